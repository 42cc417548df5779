/* store_approval.h -- the SQL behind approval.c (migration 0006): approval
 * rows by id and by (consent, action, digest), and the cancellation that the
 * consent revocation cascade (store_consent.c) runs.  Plain rows: the rules
 * (polling, expiry, redemption window) belong to approval.c. */
#ifndef CS_STORE_APPROVAL_H
#define CS_STORE_APPROVAL_H

#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"
#include "store.h"

/* A row read from the store owns its strings as one block (block; the text
 * fields point into it, store_cols_text): store_approval_row_clear frees that
 * block, never a field, and whoever takes the strings over takes the block.
 * A row filled by a caller for an insert leaves block NULL. */
struct store_approval_row {      /* caller-owned; release with store_approval_row_clear() */
	char   *block;               /* the text fields' one allocation, or NULL */
	char   *id, *consent_id;
	int64_t user_id;
	char   *subject;             /* users.subject (read only; ignored on insert) */
	char   *agent, *resource, *action;
	char   *parameters, *digest; /* canonical JSON text; base64url SHA-256 of it */
	char   *status;
	int64_t created_at, expires_at, decided_at, used_at, last_poll_at, interval;
	int64_t slow_downs;          /* slow_down answers so far (read only; ignored on insert) */
};
void store_approval_row_clear(struct store_approval_row *r);              /* NULL-safe */
void store_approval_rows_free(struct store_approval_row *v, size_t n);    /* NULL-safe */

/* CS_ENOENT when unknown.  *out written only on CS_OK (here and below). */
enum cs_err store_approval_get(struct store_conn *c, const char *id,
    struct store_approval_row *out) CS_MUST_CHECK;
/* The most recent approval of (consent, action, digest) in status
 * ("pending", "denied" or "approved"; CS_EINVAL for any other), by
 * decided_at then creation; CS_ENOENT when none. */
enum cs_err store_approval_find(struct store_conn *c, const char *consent_id, const char *action,
    const char *digest, const char *status, struct store_approval_row *out) CS_MUST_CHECK;
/* The approved, unused approval of (consent, action, digest) decided most
 * recently; CS_ENOENT when none. */
enum cs_err store_approval_find_unused(struct store_conn *c, const char *consent_id,
    const char *action, const char *digest, struct store_approval_row *out) CS_MUST_CHECK;
/* How many pending approvals of the user are unexpired at now, and the
 * earliest expiry among them (0 when none). */
enum cs_err store_approval_count_pending(struct store_conn *c, int64_t user_id, int64_t now,
    int64_t *count, int64_t *earliest) CS_MUST_CHECK;
/* Inserts r (subject ignored); CS_EEXIST on a duplicate id or a second
 * pending approval for the same (consent, action, digest). */
enum cs_err store_approval_insert(struct store_conn *c,
    const struct store_approval_row *r) CS_MUST_CHECK;
/* Moves an approval from status from to status to, setting decided_at when
 * decided_at > 0; CS_ENOENT when it was not in status from.  An 'approved'
 * row moves only while unused. */
enum cs_err store_approval_set_status(struct store_conn *c, const char *id, const char *from,
    const char *to, int64_t decided_at) CS_MUST_CHECK;
/* Records a poll of a pending approval: last_poll_at, the interval, and
 * slow_down (0 or 1) added to the count of slow_down answers. */
enum cs_err store_approval_poll(struct store_conn *c, const char *id, int64_t last_poll_at,
    int64_t interval, int slow_down) CS_MUST_CHECK;
/* Marks the approval used at now -- only when it is approved, unused, decided
 * after now - ttl, and its consent is unrevoked and unexpired at now.
 * *changed is 1 when it was marked, 0 otherwise. */
enum cs_err store_approval_use(struct store_conn *c, const char *id, int64_t ttl, int64_t now,
    int *changed) CS_MUST_CHECK;
/* Cancels the consent's pending and approved-unused approvals (the consent
 * revocation cascade; inside the caller's transaction). */
enum cs_err store_approval_cancel_for_consent(struct store_conn *c,
    const char *consent_id) CS_MUST_CHECK;
/* true in *live when the consent exists, is unrevoked and unexpired at now. */
enum cs_err store_approval_consent_live(struct store_conn *c, const char *consent_id,
    int64_t now, int *live) CS_MUST_CHECK;
/* The user's pending approvals unexpired at now whose consent is live, most
 * recent first, at most max.  *out NULL and *n 0 when none. */
enum cs_err store_approval_list_pending(struct store_conn *c, int64_t user_id, int64_t now,
    size_t max, struct store_approval_row **out, size_t *n) CS_MUST_CHECK;

#endif
