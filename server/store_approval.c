/* store_approval.c -- the SQL for per-action approvals (migration 0006).
 * Rules live in approval.c; this file only moves rows.  It must never build
 * SQL from input: every value is a bound parameter. */
#include <stdlib.h>
#include <string.h>


#include "store_approval.h"
#include "store_priv.h"

#define APPROVAL_COLS \
	"a.id, a.consent_id, a.user_id, u.subject, a.agent, a.resource, a.action, a.parameters, " \
	"a.digest, a.status, a.created_at, a.expires_at, a.decided_at, a.used_at, " \
	"a.last_poll_at, a.interval, a.slow_downs FROM approvals a JOIN users u ON u.id = a.user_id "

static const char SQL_APPROVAL_GET[] = "SELECT " APPROVAL_COLS "WHERE a.id = ?1";
/* The status is written in the statement, never bound: a.status = ?N against
 * the partial index approvals_one_pending (status = 'pending') made SQLite
 * prepare the statement again at every new binding (about 30 us of each
 * approval check). */
#define APPROVAL_FIND(status) \
    "SELECT " APPROVAL_COLS "WHERE a.consent_id = ?1 AND a.action = ?2 AND a.digest = ?3 " \
    "AND a.status = '" status "' " \
    "ORDER BY a.decided_at DESC, a.created_at DESC, a.rowid DESC LIMIT 1"
static const char SQL_APPROVAL_FIND_PENDING[] = APPROVAL_FIND("pending");
static const char SQL_APPROVAL_FIND_DENIED[] = APPROVAL_FIND("denied");
static const char SQL_APPROVAL_FIND_APPROVED[] = APPROVAL_FIND("approved");
static const char SQL_APPROVAL_FIND_UNUSED[] =
    "SELECT " APPROVAL_COLS "WHERE a.consent_id = ?1 AND a.action = ?2 AND a.digest = ?3 "
    "AND a.status = 'approved' AND a.used_at = 0 "
    "ORDER BY a.decided_at DESC, a.created_at DESC, a.rowid DESC LIMIT 1";
static const char SQL_APPROVAL_COUNT[] =
    "SELECT count(*), coalesce(min(expires_at), 0) FROM approvals "
    "WHERE user_id = ?1 AND status = 'pending' AND expires_at > ?2";
static const char SQL_APPROVAL_INSERT[] =
    "INSERT INTO approvals (id, consent_id, user_id, agent, resource, action, parameters, "
    "digest, status, created_at, expires_at, decided_at, used_at, last_poll_at, interval) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";
static const char SQL_APPROVAL_SET_STATUS[] =
    "UPDATE approvals SET status = ?3, "
    "decided_at = CASE WHEN ?4 > 0 THEN ?4 ELSE decided_at END "
    "WHERE id = ?1 AND status = ?2 AND used_at = 0";
static const char SQL_APPROVAL_POLL[] =
    "UPDATE approvals SET last_poll_at = ?2, interval = ?3, slow_downs = slow_downs + ?4 "
    "WHERE id = ?1 AND status = 'pending'";
/* SECURITY: the single-use step.  One statement decides and marks, so two
 * concurrent releases can never both see the approval unused; it also
 * re-checks the consent (invariant 9: never without a live consent). */
static const char SQL_APPROVAL_USE[] =
    "UPDATE approvals SET status = 'used', used_at = ?3 "
    "WHERE id = ?1 AND status = 'approved' AND used_at = 0 AND decided_at + ?2 > ?3 "
    "AND consent_id IN (SELECT id FROM consents WHERE revoked_at = 0 AND expires_at > ?3)";
static const char SQL_APPROVAL_CANCEL_CONSENT[] =
    "UPDATE approvals SET status = 'cancelled' WHERE consent_id = ?1 "
    "AND (status = 'pending' OR (status = 'approved' AND used_at = 0))";
static const char SQL_APPROVAL_CONSENT_LIVE[] =
    "SELECT count(*) FROM consents WHERE id = ?1 AND revoked_at = 0 AND expires_at > ?2";
static const char SQL_APPROVAL_LIST[] =
    "SELECT " APPROVAL_COLS "JOIN consents k ON k.id = a.consent_id "
    "WHERE a.user_id = ?1 AND a.status = 'pending' AND a.expires_at > ?2 "
    "AND k.revoked_at = 0 AND k.expires_at > ?2 "
    "ORDER BY a.created_at DESC, a.rowid DESC LIMIT ?3";

/* --- rows -------------------------------------------------------------- */

/* An APPROVAL_COLS statement's row, column by column (its strings in one
 * block, store_cols_text). */
static const struct store_member approval_members[] = {
	STORE_TEXT(struct store_approval_row, id),
	STORE_TEXT(struct store_approval_row, consent_id),
	STORE_INT64(struct store_approval_row, user_id),
	STORE_TEXT(struct store_approval_row, subject),
	STORE_TEXT(struct store_approval_row, agent),
	STORE_TEXT(struct store_approval_row, resource),
	STORE_TEXT(struct store_approval_row, action),
	STORE_TEXT(struct store_approval_row, parameters),
	STORE_TEXT(struct store_approval_row, digest),
	STORE_TEXT(struct store_approval_row, status),
	STORE_INT64(struct store_approval_row, created_at),
	STORE_INT64(struct store_approval_row, expires_at),
	STORE_INT64(struct store_approval_row, decided_at),
	STORE_INT64(struct store_approval_row, used_at),
	STORE_INT64(struct store_approval_row, last_poll_at),
	STORE_INT64(struct store_approval_row, interval),
	STORE_INT64(struct store_approval_row, slow_downs),
};

static const struct store_row_type approval_rows =
    STORE_ROW_MEMBERS(struct store_approval_row, approval_members);

STORE_ROW_CLEAR_FN(struct store_approval_row, approval_rows, store_approval_row_clear)
STORE_ROWS_FREE_FN(struct store_approval_row, approval_rows, store_approval_rows_free)
STORE_ROW_LIST_FN(struct store_approval_row, approval_rows, approval_list)

/* --- reading ----------------------------------------------------------- */

enum cs_err store_approval_get(struct store_conn *c, const char *id,
    struct store_approval_row *out)
{
	return store_get(c, SQL_APPROVAL_GET, STORE_VALS(SV_TEXT(id)), &approval_rows, out);
}

enum cs_err store_approval_find(struct store_conn *c, const char *consent_id, const char *action,
    const char *digest, const char *status, struct store_approval_row *out)
{
	const char *sql = status == NULL ? NULL : strcmp(status, "pending") == 0 ?
	    SQL_APPROVAL_FIND_PENDING : strcmp(status, "denied") == 0 ? SQL_APPROVAL_FIND_DENIED :
	    strcmp(status, "approved") == 0 ? SQL_APPROVAL_FIND_APPROVED : NULL;
	if (sql == NULL)
		return CS_EINVAL;
	return store_get(c, sql, STORE_VALS(SV_TEXT(consent_id), SV_TEXT(action),
	    SV_TEXT(digest)), &approval_rows, out);
}

enum cs_err store_approval_find_unused(struct store_conn *c, const char *consent_id,
    const char *action, const char *digest, struct store_approval_row *out)
{
	return store_get(c, SQL_APPROVAL_FIND_UNUSED, STORE_VALS(SV_TEXT(consent_id),
	    SV_TEXT(action), SV_TEXT(digest)), &approval_rows, out);
}

enum cs_err store_approval_count_pending(struct store_conn *c, int64_t user_id, int64_t now,
    int64_t *count, int64_t *earliest)
{
	int64_t v[2];
	enum cs_err e = store_aggregate(c, SQL_APPROVAL_COUNT, STORE_VALS(SV_INT(user_id),
	    SV_INT(now)), v, 2);
	if (e == CS_OK) {
		*count = v[0];
		*earliest = v[1];
	}
	return e;
}

enum cs_err store_approval_consent_live(struct store_conn *c, const char *consent_id,
    int64_t now, int *live)
{
	int64_t k;
	enum cs_err e = store_aggregate(c, SQL_APPROVAL_CONSENT_LIVE, STORE_VALS(SV_TEXT(consent_id),
	    SV_INT(now)), &k, 1);
	if (e == CS_OK)
		*live = k > 0;
	return e;
}

enum cs_err store_approval_list_pending(struct store_conn *c, int64_t user_id, int64_t now,
    size_t max, struct store_approval_row **out, size_t *n)
{
	if (max > 1000)
		max = 1000;
	return approval_list(c, SQL_APPROVAL_LIST, STORE_VALS(SV_INT(user_id), SV_INT(now),
	    SV_INT((int64_t)max)), max, out, n);
}

/* --- writing ----------------------------------------------------------- */

enum cs_err store_approval_insert(struct store_conn *c, const struct store_approval_row *r)
{
	return store_run(c, SQL_APPROVAL_INSERT, STORE_VALS(SV_TEXT(r->id),
	    SV_TEXT(r->consent_id), SV_INT(r->user_id), SV_TEXT(r->agent), SV_TEXT(r->resource),
	    SV_TEXT(r->action), SV_TEXT(r->parameters), SV_TEXT(r->digest), SV_TEXT(r->status),
	    SV_INT(r->created_at), SV_INT(r->expires_at), SV_INT(r->decided_at),
	    SV_INT(r->used_at), SV_INT(r->last_poll_at), SV_INT(r->interval)));
}

enum cs_err store_approval_set_status(struct store_conn *c, const char *id, const char *from,
    const char *to, int64_t decided_at)
{
	return store_run_one(c, SQL_APPROVAL_SET_STATUS, STORE_VALS(SV_TEXT(id), SV_TEXT(from),
	    SV_TEXT(to), SV_INT(decided_at)));
}

enum cs_err store_approval_poll(struct store_conn *c, const char *id, int64_t last_poll_at,
    int64_t interval, int slow_down)
{
	return store_run_one(c, SQL_APPROVAL_POLL, STORE_VALS(SV_TEXT(id), SV_INT(last_poll_at),
	    SV_INT(interval), SV_INT(slow_down ? 1 : 0)));
}

enum cs_err store_approval_use(struct store_conn *c, const char *id, int64_t ttl, int64_t now,
    int *changed)
{
	/* The id is the primary key: "changed a row" is "changed exactly one". */
	return store_run_changed(c, SQL_APPROVAL_USE, STORE_VALS(SV_TEXT(id), SV_INT(ttl),
	    SV_INT(now)), changed);
}

enum cs_err store_approval_cancel_for_consent(struct store_conn *c, const char *consent_id)
{
	return store_run(c, SQL_APPROVAL_CANCEL_CONSENT, STORE_VALS(SV_TEXT(consent_id)));
}
