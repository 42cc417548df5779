/* health.h -- connection health (issue #33 item 4): why a consent's provider
 * connection needs the person again, in the words each audience reads (the
 * person on /me, the gateway in an error_description, the event's reason),
 * and the health events themselves.  Knows no HTTP and no SQL of its own. */
#ifndef CS_HEALTH_H
#define CS_HEALTH_H

#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"
#include "store.h"

/* Why a connection needs the person again; stored by name in
 * consents.reconnect_reason (migration 0019). */
enum health_reason {
	HEALTH_REFRESH_REFUSED = 0,   /* the provider refused the refresh token (invalid_grant):
	                               * revoked at the provider, lapsed, or rotated away */
	HEALTH_MORE_SCOPES,           /* the refresh answer granted more than the consent
	                               * (invariant 8: the tokens were revoked) */
	HEALTH_EXPIRED,               /* the access token expired and there is no refresh token */
	HEALTH_REVOKED,               /* revoked at the provider: the upstream refused an
	                               * unexpired token (401) and the forced refresh was
	                               * refused too (invalid_grant) */
	HEALTH_UNKNOWN,               /* a row marked before migration 0019, or a name not known */
	HEALTH_REASON__MAX
};

/* The stored name ("refresh_refused", "more_scopes", "expired", "revoked",
 * "unknown"). */
const char *health_reason_name(enum health_reason r);
/* The reason a stored name says; HEALTH_UNKNOWN for NULL or a name not known
 * (never an error: the words then say that consentd does not know why). */
enum health_reason health_reason_parse(const char *name);
/* One sentence for the person (/me), ending with a full stop. */
const char *health_reason_person(enum health_reason r);
/* A short clause for the gateway and the audit (no full stop), e.g. "the
 * provider refused the refresh token (invalid_grant)". */
const char *health_reason_gateway(enum health_reason r);

/* The error_description a call on a connection that needs the person gets:
 * what happened and where the person goes ("<public_url>/me"), at most
 * HEALTH_DESCRIPTION_MAX bytes with its NUL.  CS_ETOOBIG (out "") when
 * public_url is too long; CS_EINVAL for a NULL argument. */
#define HEALTH_DESCRIPTION_MAX 400
enum cs_err health_reconnect_description(enum health_reason r, const char *public_url,
    char *out, size_t cap) CS_MUST_CHECK;

/* When consent_id is marked reconnect_required: its
 * health_reconnect_description into out (CS_OK).  CS_ENOENT (out "") when
 * it is not marked or unknown: its connection is gone for another reason. */
enum cs_err health_describe_consent(struct store_conn *c, const char *public_url,
    const char *consent_id, char *out, size_t cap) CS_MUST_CHECK;

/* --- the events (events.h pushes them) ---------------------------------- */
/* The outbox kinds (events_outbox.kind): a revocation (events.h's
 * EVENTS_REVOKED_URI), a connection that needs the person, one that works
 * again. */
#define HEALTH_KIND_REVOKED   "revoked"
#define HEALTH_KIND_BROKEN    "reconnect_required"
#define HEALTH_KIND_RECOVERED "recovered"

/* Marks unrevoked consent consent_id reconnect_required for reason r and
 * adds its "reconnect_required" event to the outbox, due at now -- in the
 * caller's transaction, so the mark and its event commit together.  Once
 * only: CS_ENOENT (nothing written) when the consent is revoked, unknown or
 * marked already. */
enum cs_err health_mark_broken(struct store_conn *c, const char *consent_id,
    enum health_reason r, int64_t now) CS_MUST_CHECK;

/* Adds the "recovered" event of consent new_id (the consent that replaced a
 * broken one, with the broken one's reason r) to the outbox, due at now, in
 * the caller's transaction.  CS_ENOENT when new_id is unknown. */
enum cs_err health_recovered(struct store_conn *c, const char *new_id,
    enum health_reason r, int64_t now) CS_MUST_CHECK;

/* Connections by health at now, for the metrics: *ok the live consents
 * holding a provider connection that works, *broken the live consents whose
 * connection needs the person. */
enum cs_err health_count(struct store_conn *c, int64_t now, int64_t *ok,
    int64_t *broken) CS_MUST_CHECK;

#endif
