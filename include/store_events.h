/* store_events.h -- the SQL behind events.c: the revocation-event outbox of
 * migration 0009.  Plain rows; building, signing and pushing Security Event
 * Tokens belong to events.c, not here. */
#ifndef CS_STORE_EVENTS_H
#define CS_STORE_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"
#include "store.h"

#define STORE_EVENTS_JTI_LEN 32      /* lowercase hex of 16 random bytes */
#define STORE_EVENTS_LIST_MAX 1000   /* the most rows one listing returns */

/* Read from the store, a row's strings are one block (block; the fields point
 * into it, store_cols_text): store_event_row_clear frees that block, never a
 * field (one set to NULL or pointed elsewhere is fine). */
struct store_event_row {         /* caller-owned; release with store_event_row_clear() */
	char   *block;               /* the one allocation jti .. last_error point into */
	int64_t id;
	char   *jti, *consent_id, *subject_iss, *subject, *agent, *resource;
	char   *reason;              /* may be NULL */
	int64_t created_at, attempts, next_attempt_at, delivered_at, last_status;
	char   *last_error;          /* may be NULL */
	char   *kind;                /* migration 0019: "revoked", "reconnect_required" or
	                              * "recovered" (health.h's HEALTH_KIND_*) */
};
void store_event_row_clear(struct store_event_row *r);                 /* NULL-safe */
void store_event_rows_free(struct store_event_row *v, size_t n);       /* NULL-safe */

/* Adds the revocation event of consent_id, due at now, with a fresh random
 * jti; the person (issuer, subject), agent, resource and revoke_reason are
 * read from the consent row, so call it after store_consent_set_revoked, in
 * the same transaction (store_consent_cascade does).  CS_ENOENT when the
 * consent is unknown. */
enum cs_err store_events_enqueue(struct store_conn *c, const char *consent_id,
    int64_t now) CS_MUST_CHECK;
/* Adds an event of another kind (health.h: "reconnect_required",
 * "recovered") about consent_id, due at now, with reason (may be NULL) in
 * place of the consent's revoke_reason; the person, agent and resource from
 * the consent row.  In the caller's transaction.  CS_ENOENT when the
 * consent is unknown. */
enum cs_err store_events_enqueue_kind(struct store_conn *c, const char *consent_id,
    const char *kind, const char *reason, int64_t now) CS_MUST_CHECK;

/* Claims the undelivered entries due at now, the longest waiting first, at
 * most max, for one delivery run: their next attempt moves to now + lease, so
 * that no other node (or run) delivers them meanwhile; one that is neither
 * delivered nor retried by then (its node died) is due again.  Writes: call
 * it in a transaction.  *out NULL and *n 0 when none. */
enum cs_err store_events_claim(struct store_conn *c, int64_t now, int64_t lease, size_t max,
    struct store_event_row **out, size_t *n) CS_MUST_CHECK;
/* Gives back a claimed entry not tried: due again at at. */
enum cs_err store_events_release(struct store_conn *c, int64_t id, int64_t at) CS_MUST_CHECK;
/* Records a delivery: attempts + 1, delivered_at = now, last_status. */
enum cs_err store_events_delivered(struct store_conn *c, int64_t id, int64_t now,
    int64_t status) CS_MUST_CHECK;
/* Records a failed attempt: attempts, next_attempt_at, last_status (0 when
 * no answer came) and last_error (may be NULL). */
enum cs_err store_events_retry(struct store_conn *c, int64_t id, int64_t attempts,
    int64_t next_attempt_at, int64_t status, const char *error) CS_MUST_CHECK;

/* Which entries a listing returns. */
enum store_events_state {
	STORE_EVENTS_ANY,
	STORE_EVENTS_UNDELIVERED,    /* waiting, whether tried already or not */
	STORE_EVENTS_DELIVERED,
	STORE_EVENTS__MAX
};
/* Which entries store_events_list returns. */
struct store_events_filter {
	const char              *consent_id;   /* NULL: of every consent */
	enum store_events_state  state;
	int64_t                  before_id;    /* > 0: only ids below it (a keyset cursor) */
	size_t                   max;          /* capped at STORE_EVENTS_LIST_MAX */
};
/* Entries newest first (by id) that pass f.  *out NULL and *n 0 when none. */
enum cs_err store_events_list(struct store_conn *c, const struct store_events_filter *f,
    struct store_event_row **out, size_t *n) CS_MUST_CHECK;
/* How many entries wait (undelivered), how many of those failed at least
 * once, and how many were delivered. */
enum cs_err store_events_count(struct store_conn *c, int64_t *waiting, int64_t *failing,
    int64_t *delivered) CS_MUST_CHECK;

#endif
