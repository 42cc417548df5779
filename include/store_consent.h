/* store_consent.h -- the SQL behind consent.c (consent requests, consents, the
 * revocation cascade onto grants, refresh tokens and vault records).  Plain
 * rows with text columns: parsing and rules belong to consent.c, not here. */
#ifndef CS_STORE_CONSENT_H
#define CS_STORE_CONSENT_H

#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"
#include "store.h"

/* A row read from the store owns its strings as one block (block; the text
 * fields point into it, store_cols_text): store_X_row_clear frees that block,
 * never a field, and whoever takes the strings over takes the block.  A row
 * filled by a caller for an insert leaves block NULL: its fields stay the
 * caller's, and clearing it frees nothing of theirs. */
struct store_consent_row {       /* caller-owned; release with store_consent_row_clear() */
	char   *block;               /* the text fields' one allocation, or NULL */
	char   *id;
	int64_t user_id;
	char   *subject;             /* users.subject (read only; ignored on insert) */
	char   *agent, *resource;
	char   *granted, *declined;  /* space-separated, sorted */
	int     offline;
	int64_t created_at, expires_at, revoked_at;
	char   *revoked_by, *revoke_reason, *request_id;
	int     reconnect_required;  /* migration 0005; ignored on insert (starts 0) */
	int64_t last_used_at;        /* migration 0013; ignored on insert (starts 0) */
	char   *reconnect_reason;    /* migration 0019: health.h's reason name; may be NULL;
	                              * ignored on insert */
	char   *granted_by;          /* migration 0022: NULL (the person) or "organisation" */
};
void store_consent_row_clear(struct store_consent_row *r);               /* NULL-safe */
void store_consent_rows_free(struct store_consent_row *v, size_t n);     /* NULL-safe */

struct store_creq_row {          /* caller-owned; release with store_creq_row_clear() */
	char   *block;               /* the text fields' one allocation, or NULL */
	char   *id;
	int64_t user_id;
	char   *subject;             /* users.subject (read only; ignored on insert) */
	char   *agent, *resource;
	char   *scopes, *pre_granted;
	char   *reason;              /* may be NULL */
	char   *status;
	int64_t created_at, expires_at, decided_at, last_poll_at, interval;
	int64_t slow_downs;          /* slow_down answers so far (read only; ignored on insert) */
	char   *consent_id;          /* may be NULL */
	char   *narrowed;            /* scopes the provider did not grant; may be NULL */
	int64_t cooldown_lifted_at;  /* migration 0013; ignored on insert (starts 0) */
};
void store_creq_row_clear(struct store_creq_row *r);                     /* NULL-safe */
void store_creq_rows_free(struct store_creq_row *v, size_t n);           /* NULL-safe */

/* --- consents ---------------------------------------------------------- */
/* CS_ENOENT when unknown.  *out written only on CS_OK (here and below). */
/* The grant with this jti and the consent it was issued under (any state),
 * read by one statement, so from one snapshot: introspection's and the
 * proxy's check reads both on every call (issue 34).  CS_ENOENT when the
 * grant is unknown or its consent row is gone (store_grant_get and
 * store_consent_get tell which).  *g and *k written only on CS_OK. */
struct store_grant_row;
enum cs_err store_consent_of_grant(struct store_conn *c, const char *jti,
    struct store_grant_row *g, struct store_consent_row *k) CS_MUST_CHECK;
enum cs_err store_consent_get(struct store_conn *c, const char *id,
    struct store_consent_row *out) CS_MUST_CHECK;
/* The unrevoked consent of (user, agent, resource), expired or not (there is
 * at most one); CS_ENOENT when none. */
enum cs_err store_consent_current(struct store_conn *c, int64_t user_id, const char *agent,
    const char *resource, struct store_consent_row *out) CS_MUST_CHECK;
/* Inserts r (subject ignored); CS_EEXIST on a duplicate id or a second
 * unrevoked consent for the same (user, agent, resource). */
enum cs_err store_consent_insert(struct store_conn *c, const struct store_consent_row *r) CS_MUST_CHECK;
/* Marks an unrevoked consent revoked; *changed is 1 when it was, 0 when it
 * was revoked already (or unknown). */
enum cs_err store_consent_set_revoked(struct store_conn *c, const char *id, int64_t now,
    const char *by, const char *reason, int *changed) CS_MUST_CHECK;
/* Revokes every unrevoked grant and refresh token of the consent (tables of
 * migration 0004), moves its vault record, unless reserved for a move, to the
 * revocation outbox (store_vault_to_outbox, migration 0005), cancels its
 * pending and approved-unused approvals (0006) and queues one revocation
 * event for the gateway (store_events_enqueue, 0009). */
enum cs_err store_consent_cascade(struct store_conn *c, const char *id, int64_t now) CS_MUST_CHECK;
/* Marks an unrevoked consent reconnect_required with reason (health.h's
 * name, may be NULL); *changed 1 when it was unrevoked and not marked yet,
 * 0 when revoked, unknown or marked already (its first reason stays). */
enum cs_err store_consent_set_reconnect(struct store_conn *c, const char *id,
    const char *reason, int *changed) CS_MUST_CHECK;
/* Connections by health at now (health.h): *ok the live consents holding a
 * vault record and not marked, *broken the live consents marked
 * reconnect_required. */
enum cs_err store_consent_count_health(struct store_conn *c, int64_t now, int64_t *ok,
    int64_t *broken) CS_MUST_CHECK;
/* Records a use of the consent (a grant issued, a token released) at now:
 * last_used_at = now unless it is later already.  An unknown id changes
 * nothing.  Inside the caller's transaction (on PostgreSQL sent with its next
 * statement: store_run_later). */
enum cs_err store_consent_touch(struct store_conn *c, const char *id, int64_t now) CS_MUST_CHECK;
/* Consents by state at now, counted in one pass over the table (one row
 * answered, whatever its size): for GET /metrics. */
enum store_consent_state { STORE_CONSENT_LIVE, STORE_CONSENT_EXPIRED, STORE_CONSENT_REVOKED,
	STORE_CONSENT_RECONNECT_REQUIRED, STORE_CONSENT_STATE__MAX };
enum cs_err store_consent_count_states(struct store_conn *c, int64_t now,
    int64_t out[STORE_CONSENT_STATE__MAX]) CS_MUST_CHECK;
/* The user's consents: live ones (unrevoked, unexpired at now) first, then
 * the others, each group most recent first; at most max rows.  *out NULL and
 * *n 0 when none. */
enum cs_err store_consent_list_user(struct store_conn *c, int64_t user_id, int64_t now,
    size_t max, struct store_consent_row **out, size_t *n) CS_MUST_CHECK;

/* The live consents (unrevoked, unexpired at now) an organisation gave
 * (granted_by = "organisation", migration 0022) whose id sorts after after
 * ("" for the first page), by id, at most max. */
enum cs_err store_consent_list_organisation(struct store_conn *c, int64_t now,
    const char *after, size_t max, struct store_consent_row **out, size_t *n) CS_MUST_CHECK;

/* --- consent requests -------------------------------------------------- */
enum cs_err store_creq_get(struct store_conn *c, const char *id,
    struct store_creq_row *out) CS_MUST_CHECK;
/* The pending request of (user, agent, resource), expired or not; CS_ENOENT when none. */
enum cs_err store_creq_pending(struct store_conn *c, int64_t user_id, const char *agent,
    const char *resource, struct store_creq_row *out) CS_MUST_CHECK;
/* decided_at and cooldown_lifted_at of the most recently denied request of
 * (user, agent, resource); CS_ENOENT when none was ever denied. */
enum cs_err store_creq_last_denied(struct store_conn *c, int64_t user_id, const char *agent,
    const char *resource, int64_t *decided_at, int64_t *lifted_at) CS_MUST_CHECK;
/* The user's denied requests decided after since whose cooldown was not
 * lifted, each the latest denial of its (agent, resource), most recent first. */
enum cs_err store_creq_list_denied(struct store_conn *c, int64_t user_id, int64_t since,
    struct store_creq_row **out, size_t *n) CS_MUST_CHECK;
/* Sets cooldown_lifted_at = now on a request not lifted yet; *changed 1 when
 * it was, 0 when it was lifted already (or is unknown). */
enum cs_err store_creq_lift_cooldown(struct store_conn *c, const char *id, int64_t now,
    int *changed) CS_MUST_CHECK;
/* How many pending requests of the user are unexpired at now, and the
 * earliest expiry among them (0 when none). */
enum cs_err store_creq_count_pending(struct store_conn *c, int64_t user_id, int64_t now,
    int64_t *count, int64_t *earliest) CS_MUST_CHECK;
/* Inserts r (subject ignored); CS_EEXIST on a duplicate id or a second
 * pending request for the same (user, agent, resource). */
enum cs_err store_creq_insert(struct store_conn *c, const struct store_creq_row *r) CS_MUST_CHECK;
/* Moves a pending request to status (approved, denied, expired) with
 * decided_at and consent_id (may be NULL); CS_ENOENT when it is not pending. */
enum cs_err store_creq_decide(struct store_conn *c, const char *id, const char *status,
    int64_t decided_at, const char *consent_id) CS_MUST_CHECK;
/* Replaces a pending request's scopes, and its reason when reason != NULL. */
enum cs_err store_creq_merge(struct store_conn *c, const char *id, const char *scopes,
    const char *reason) CS_MUST_CHECK;
/* Records the scopes the provider did not grant (flow D narrowing), inside the
 * transaction that makes the consent live; CS_ENOENT for an unknown request. */
enum cs_err store_creq_set_narrowed(struct store_conn *c, const char *id,
    const char *dropped) CS_MUST_CHECK;
/* Records a poll: last_poll_at, the (possibly grown) interval, and slow_down
 * (0 or 1) added to the count of slow_down answers. */
enum cs_err store_creq_poll(struct store_conn *c, const char *id, int64_t last_poll_at,
    int64_t interval, int slow_down) CS_MUST_CHECK;
/* The user's pending requests unexpired at now, most recent first. */
enum cs_err store_creq_list_pending(struct store_conn *c, int64_t user_id, int64_t now,
    struct store_creq_row **out, size_t *n) CS_MUST_CHECK;


#endif
