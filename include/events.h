/* events.h -- revocation and connection-health events (docs/architecture.md
 * flow G): every consent revocation, and every provider connection that needs
 * the person again or recovers (health.h), is pushed to [gateway] events_uri as
 * a Security Event Token (RFC 8417) over RFC 8935 push delivery, from an
 * outbox that survives restarts.
 *
 * Enqueueing happens in the store, inside the revoking transaction: the
 * revocation cascade (store_consent_cascade) calls store_events_enqueue, so
 * every revocation -- by the person, by replacement, by an admin, in bulk --
 * adds exactly one event, and a rolled-back revocation adds none.  The cascade
 * does not know the configuration, so it always enqueues; with no events_uri
 * configured the push pass sends nothing and entries wait (an operator who
 * configures events_uri later gets them delivered then).
 *
 * Delivery is at least once: a receiver dedupes by jti (the same at every
 * attempt), as RFC 8935 §2.3 has it. */
#ifndef CS_EVENTS_H
#define CS_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "config.h"
#include "cs_err.h"
#include "jwt.h"
#include "store.h"
#include "store_events.h"

#define EVENTS_SET_TYP      "secevent+jwt"
#define EVENTS_MEDIA_TYPE   "application/secevent+jwt"
#define EVENTS_REVOKED_URI  "urn:consentd:event:consent-revoked"
/* A provider connection needs the person again, or works again (health.h;
 * docs/grants.md "Connection health events"). */
#define EVENTS_HEALTH_URI   "urn:consentd:event:connection-health"
#define EVENTS_BATCH        20      /* the most entries one pass tries */
#define EVENTS_CLAIM_LEASE  300     /* seconds a pass holds what it claimed (store_events_claim):
                                       more than EVENTS_BATCH pushes can take (each at most
                                       httpc's 10 s timeout plus the 5 s connect), so no other
                                       node takes an entry a slow pass has yet to push */
#define EVENTS_RETRY_FIRST  5       /* seconds before the first retry */
#define EVENTS_RETRY_MAX    3600    /* the longest wait between attempts */

/* Seconds to wait after a failed attempt when `attempts` attempts had failed
 * before it: min(EVENTS_RETRY_FIRST * 2^attempts, EVENTS_RETRY_MAX), so 5,
 * 10, 20, ... 3600, and 3600 from then on (an entry is never given up). */
int64_t events_retry_delay(int64_t attempts);

/* The claims of the SET for outbox entry r, issued at now: iss = public_url,
 * aud = gateway_id, iat = now (this attempt), toe = r->created_at (RFC 8417
 * §2.2 time of event: the revocation, which a retried SET reports long after),
 * jti = r->jti, sub_id = {"format":"iss_sub",
 * "iss":r->subject_iss, "sub":r->subject} (RFC 9493), events =
 * {EVENTS_REVOKED_URI: {cid, agent_id, resource, reason}} where resource is
 * the configured resource's uri (its id when it is no longer configured) and
 * reason may be null -- or, for an entry of kind "reconnect_required" or
 * "recovered" (health.h), {EVENTS_HEALTH_URI: {cid, agent_id, resource,
 * state (the kind), reason (health.h's name), reconnect_uri (public_url/me,
 * reconnect_required only)}}.  CS_EINVAL for a kind not known.  No exp: a SET
 * describes a fact, it does not expire.
 * *out (new reference) written only on CS_OK. */
enum cs_err events_set_claims(const struct config *cfg, const struct store_event_row *r,
    int64_t now, json_t **out) CS_MUST_CHECK;

/* What a receiver's non-202 answer says, for last_error: "HTTP <status>", or
 * "HTTP <status>: <err>" when body (body_len bytes, may be NULL) is a JSON
 * object whose "err" (RFC 8935 §2.4) is a string; at most 63 characters of
 * it, each outside printable ASCII replaced by '?'.  out is
 * always NUL-terminated when cap > 0 (empty when even the status does not fit). */
void events_receiver_status(long status, const char *body, size_t body_len, char *out, size_t cap);

/* One push pass: for each undelivered entry due at now (at most
 * EVENTS_BATCH), signs its SET with kr (typ secevent+jwt) and POSTs it to
 * cfg->events_uri as application/secevent+jwt.  A 202 marks it delivered
 * (audited as "event.delivered" in the same transaction); anything else
 * records the attempt (last_status, last_error) and schedules the next by
 * events_retry_delay -- failed attempts are not audited, they would flood the
 * chain while a receiver is down; the outbox row shows them.  After a
 * transport failure (no answer) the pass stops: the receiver is unreachable.
 * The receiver is never called inside a transaction.  With no events_uri
 * configured nothing is sent.  *delivered counts this pass's deliveries. */
enum cs_err events_push_run(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, int64_t now, int *delivered) CS_MUST_CHECK;

/* --- delivery state, for the admin API ---------------------------------- */

/* Entries newest first; see store_events_list for the filters (consent_id
 * NULL: all; before_id 0: from the newest; max capped at
 * STORE_EVENTS_LIST_MAX).  Release with store_event_rows_free. */
enum cs_err events_list(struct store_conn *c, const char *consent_id,
    enum store_events_state state, int64_t before_id, size_t max,
    struct store_event_row **out, size_t *n) CS_MUST_CHECK;
/* "delivered", "retrying" (failed at least once) or "pending" (not tried yet). */
const char *events_state_name(const struct store_event_row *r);
/* One entry as a JSON object for the admin API: id, jti, kind, consent_id,
 * subject_iss, subject, agent, resource, reason, created_at, state, attempts,
 * next_attempt_at (null once delivered), delivered_at (null until then),
 * last_status (null when none), last_error.  NULL when out of memory. */
json_t *events_row_json(const struct store_event_row *r);
/* Counts: waiting (undelivered), failing (undelivered, failed at least
 * once), delivered. */
enum cs_err events_count(struct store_conn *c, int64_t *waiting, int64_t *failing,
    int64_t *delivered) CS_MUST_CHECK;

#endif
