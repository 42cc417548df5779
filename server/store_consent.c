/* store_consent.c -- the SQL of consent requests, consents and their revocation
 * cascade (grants, refresh tokens, vault records).  Rules live in consent.c;
 * this file only moves rows.  It must never build SQL from input: every value
 * is a bound parameter. */
#include <stdlib.h>
#include <string.h>


#include "audit.h"
#include "store_approval.h"
#include "store_consent.h"
#include "store_events.h"
#include "store_grant.h"
#include "store_standing.h"
#include "store_priv.h"
#include "store_vault.h"

#define CONSENT_SEL \
	"k.id, k.user_id, u.subject, k.agent, k.resource, k.granted, k.declined, k.offline, " \
	"k.created_at, k.expires_at, k.revoked_at, k.revoked_by, k.revoke_reason, k.request_id, " \
	"k.reconnect_required, k.last_used_at, k.reconnect_reason, k.granted_by "
#define CONSENT_COLS CONSENT_SEL "FROM consents k JOIN users u ON u.id = k.user_id "
#define CONSENT_NCOLS 18          /* the grant's columns follow them in SQL_CONSENT_OF_GRANT */
#define CREQ_COLS \
	"r.id, r.user_id, u.subject, r.agent, r.resource, r.scopes, r.pre_granted, r.reason, " \
	"r.status, r.created_at, r.expires_at, r.decided_at, r.last_poll_at, r.interval, " \
	"r.consent_id, r.narrowed, r.cooldown_lifted_at, r.slow_downs " \
	"FROM consent_requests r JOIN users u ON u.id = r.user_id "

/* A person's pending requests are capped by [consent] max_pending_per_user;
 * this only bounds a listing should the cap have been lowered since. */
#define CREQ_LIST_MAX 100

static const char SQL_CONSENT_GET[] = "SELECT " CONSENT_COLS "WHERE k.id = ?1";
static const char SQL_CONSENT_OF_GRANT[] =
    "SELECT " CONSENT_SEL ", g.jti, g.consent_id, g.issued_at, g.expires_at, g.revoked_at "
    "FROM grants g JOIN consents k ON k.id = g.consent_id JOIN users u ON u.id = k.user_id "
    "WHERE g.jti = ?1";
static const char SQL_CONSENT_CURRENT[] =
    "SELECT " CONSENT_COLS "WHERE k.user_id = ?1 AND k.agent = ?2 AND k.resource = ?3 "
    "AND k.revoked_at = 0";
static const char SQL_CONSENT_INSERT[] =
    "INSERT INTO consents (id, user_id, agent, resource, granted, declined, offline, "
    "created_at, expires_at, revoked_at, revoked_by, revoke_reason, request_id, granted_by) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)";
static const char SQL_CONSENT_REVOKE[] =
    "UPDATE consents SET revoked_at = ?2, revoked_by = ?3, revoke_reason = ?4 "
    "WHERE id = ?1 AND revoked_at = 0";
/* The tables of migration 0004 (grant.c's): rows die with their consent. */
static const char SQL_GRANTS_REVOKE[] =
    "UPDATE grants SET revoked_at = ?2 WHERE consent_id = ?1 AND revoked_at = 0";
static const char SQL_REFRESH_REVOKE[] =
    "UPDATE refresh_tokens SET revoked_at = ?2 WHERE consent_id = ?1 AND revoked_at = 0";
/* Once: a consent marked already keeps its first reason (migration 0020). */
static const char SQL_CONSENT_RECONNECT[] =
    "UPDATE consents SET reconnect_required = 1, reconnect_reason = ?2 "
    "WHERE id = ?1 AND revoked_at = 0 AND reconnect_required = 0";
/* Connections by health (health.h): live consents holding a vault record and
 * not marked, and live consents marked reconnect_required. */
static const char SQL_CONSENT_COUNT_HEALTH[] =
    "SELECT coalesce(sum(CASE WHEN k.reconnect_required = 0 AND EXISTS (SELECT 1 FROM "
    "vault_records r WHERE r.consent_id = k.id) THEN 1 ELSE 0 END), 0), "
    "coalesce(sum(CASE WHEN k.reconnect_required != 0 THEN 1 ELSE 0 END), 0) "
    "FROM consents k WHERE k.revoked_at = 0 AND k.expires_at > ?1";
/* Migration 0013: a use moves last_used_at forward only (two workers' uses
 * in one second write it once). */
static const char SQL_CONSENT_TOUCH[] =
    "UPDATE consents SET last_used_at = ?2 WHERE id = ?1 AND last_used_at < ?2";
/* Live ones by when they were given; ended ones by when they ended. */
/* One pass, one row: the states as store_admin.c's CONSENT_ROW names them
 * (CASE ... THEN 1 ELSE 0: PostgreSQL has no sum of booleans). */
static const char SQL_CONSENT_COUNT_STATES[] =
    "SELECT coalesce(sum(CASE WHEN revoked_at = 0 AND expires_at > ?1 "
    "AND reconnect_required = 0 THEN 1 ELSE 0 END), 0), "
    "coalesce(sum(CASE WHEN revoked_at = 0 AND expires_at <= ?1 THEN 1 ELSE 0 END), 0), "
    "coalesce(sum(CASE WHEN revoked_at != 0 THEN 1 ELSE 0 END), 0), "
    "coalesce(sum(CASE WHEN revoked_at = 0 AND expires_at > ?1 "
    "AND reconnect_required != 0 THEN 1 ELSE 0 END), 0) "
    "FROM consents";
static const char SQL_CONSENT_LIST[] =
    "SELECT " CONSENT_COLS "WHERE k.user_id = ?1 "
    "ORDER BY (k.revoked_at = 0 AND k.expires_at > ?2) DESC, "
    "CASE WHEN k.revoked_at = 0 AND k.expires_at > ?2 THEN k.created_at "
    "WHEN k.revoked_at > 0 AND k.revoked_at < k.expires_at THEN k.revoked_at "
    "ELSE k.expires_at END DESC, k.rowid DESC "
    "LIMIT ?3";

static const char SQL_CREQ_GET[] = "SELECT " CREQ_COLS "WHERE r.id = ?1";
static const char SQL_CREQ_PENDING[] =
    "SELECT " CREQ_COLS "WHERE r.user_id = ?1 AND r.agent = ?2 AND r.resource = ?3 "
    "AND r.status = 'pending'";
/* Only the latest denial counts: while it holds no new request is made, so
 * every earlier one ended before it (and lifting it lifts the block). */
static const char SQL_CREQ_LAST_DENIED[] =
    "SELECT decided_at, cooldown_lifted_at FROM consent_requests WHERE user_id = ?1 "
    "AND agent = ?2 AND resource = ?3 AND status = 'denied' "
    "ORDER BY decided_at DESC, rowid DESC LIMIT 1";
static const char SQL_CREQ_LIST_DENIED[] =
    "SELECT " CREQ_COLS "WHERE r.user_id = ?1 AND r.status = 'denied' AND r.decided_at > ?2 "
    "AND r.cooldown_lifted_at = 0 AND NOT EXISTS (SELECT 1 FROM consent_requests n "
    "WHERE n.user_id = r.user_id AND n.agent = r.agent AND n.resource = r.resource "
    "AND n.status = 'denied' AND (n.decided_at > r.decided_at OR "
    "(n.decided_at = r.decided_at AND n.rowid > r.rowid))) "
    "ORDER BY r.decided_at DESC, r.rowid DESC LIMIT ?3";
static const char SQL_CREQ_LIFT[] =
    "UPDATE consent_requests SET cooldown_lifted_at = ?2 WHERE id = ?1 AND cooldown_lifted_at = 0";
static const char SQL_CREQ_COUNT[] =
    "SELECT count(*), coalesce(min(expires_at), 0) FROM consent_requests "
    "WHERE user_id = ?1 AND status = 'pending' AND expires_at > ?2";
static const char SQL_CREQ_INSERT[] =
    "INSERT INTO consent_requests (id, user_id, agent, resource, scopes, pre_granted, reason, "
    "status, created_at, expires_at, decided_at, last_poll_at, interval, consent_id) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)";
static const char SQL_CREQ_DECIDE[] =
    "UPDATE consent_requests SET status = ?2, decided_at = ?3, consent_id = ?4 "
    "WHERE id = ?1 AND status = 'pending'";
static const char SQL_CREQ_MERGE[] =
    "UPDATE consent_requests SET scopes = ?2, reason = coalesce(?3, reason) "
    "WHERE id = ?1 AND status = 'pending'";
static const char SQL_CREQ_NARROWED[] =
    "UPDATE consent_requests SET narrowed = ?2 WHERE id = ?1";
static const char SQL_CREQ_POLL[] =
    "UPDATE consent_requests SET last_poll_at = ?2, interval = ?3, slow_downs = slow_downs + ?4 "
    "WHERE id = ?1 AND status = 'pending'";
static const char SQL_CREQ_LIST[] =
    "SELECT " CREQ_COLS "WHERE r.user_id = ?1 AND r.status = 'pending' AND r.expires_at > ?2 "
    "ORDER BY r.created_at DESC, r.rowid DESC LIMIT ?3";

/* --- rows -------------------------------------------------------------- */

/* A CONSENT_COLS statement's row, column by column (its strings in one
 * block, store_cols_text). */
static const struct store_member consent_members[] = {
	STORE_TEXT(struct store_consent_row, id),
	STORE_INT64(struct store_consent_row, user_id),
	STORE_TEXT(struct store_consent_row, subject),
	STORE_TEXT(struct store_consent_row, agent),
	STORE_TEXT(struct store_consent_row, resource),
	STORE_TEXT(struct store_consent_row, granted),
	STORE_TEXT(struct store_consent_row, declined),
	STORE_FLAG(struct store_consent_row, offline),
	STORE_INT64(struct store_consent_row, created_at),
	STORE_INT64(struct store_consent_row, expires_at),
	STORE_INT64(struct store_consent_row, revoked_at),
	STORE_TEXT_OR_NULL(struct store_consent_row, revoked_by),
	STORE_TEXT_OR_NULL(struct store_consent_row, revoke_reason),
	STORE_TEXT_OR_NULL(struct store_consent_row, request_id),
	STORE_FLAG(struct store_consent_row, reconnect_required),
	STORE_INT64(struct store_consent_row, last_used_at),
	STORE_TEXT_OR_NULL(struct store_consent_row, reconnect_reason),
	STORE_TEXT_OR_NULL(struct store_consent_row, granted_by),
};
_Static_assert(sizeof consent_members / sizeof consent_members[0] == CONSENT_NCOLS,
    "CONSENT_NCOLS counts CONSENT_COLS");

/* The same of a CREQ_COLS statement. */
static const struct store_member creq_members[] = {
	STORE_TEXT(struct store_creq_row, id),
	STORE_INT64(struct store_creq_row, user_id),
	STORE_TEXT(struct store_creq_row, subject),
	STORE_TEXT(struct store_creq_row, agent),
	STORE_TEXT(struct store_creq_row, resource),
	STORE_TEXT(struct store_creq_row, scopes),
	STORE_TEXT(struct store_creq_row, pre_granted),
	STORE_TEXT_OR_NULL(struct store_creq_row, reason),
	STORE_TEXT(struct store_creq_row, status),
	STORE_INT64(struct store_creq_row, created_at),
	STORE_INT64(struct store_creq_row, expires_at),
	STORE_INT64(struct store_creq_row, decided_at),
	STORE_INT64(struct store_creq_row, last_poll_at),
	STORE_INT64(struct store_creq_row, interval),
	STORE_TEXT_OR_NULL(struct store_creq_row, consent_id),
	STORE_TEXT_OR_NULL(struct store_creq_row, narrowed),
	STORE_INT64(struct store_creq_row, cooldown_lifted_at),
	STORE_INT64(struct store_creq_row, slow_downs),
};

static const struct store_row_type consent_rows =
    STORE_ROW_MEMBERS(struct store_consent_row, consent_members);

/* A row of SQL_CONSENT_OF_GRANT: the consent's columns, then the grant's. */
struct consent_grant_row {
	struct store_consent_row k;
	struct store_grant_row   g;
};

static enum cs_err read_consent_grant(struct store_stmt *st, void *row)
{
	struct consent_grant_row *r = row;
	enum cs_err e;
	if ((e = store_read_members(st, &r->k, &r->k.block, consent_members, CONSENT_NCOLS)) != CS_OK ||
	    (e = store_cols_text(st, &r->g.block, STORE_TEXT_COLS({ CONSENT_NCOLS, &r->g.jti, true },
	    { CONSENT_NCOLS + 1, &r->g.consent_id, true }))) != CS_OK)
		return e;
	r->g.issued_at = store_col_int64(st, CONSENT_NCOLS + 2);
	r->g.expires_at = store_col_int64(st, CONSENT_NCOLS + 3);
	r->g.revoked_at = store_col_int64(st, CONSENT_NCOLS + 4);
	return CS_OK;
}

static void consent_grant_clear(void *row)
{
	struct consent_grant_row *r = row;
	store_consent_row_clear(&r->k);
	store_grant_row_clear(&r->g);
}

static const struct store_row_type consent_grant_rows = {
	.size = sizeof(struct consent_grant_row), .read = read_consent_grant,
	.clear = consent_grant_clear
};
static const struct store_row_type creq_rows = STORE_ROW_MEMBERS(struct store_creq_row, creq_members);

STORE_ROW_CLEAR_FN(struct store_consent_row, consent_rows, store_consent_row_clear)
STORE_ROWS_FREE_FN(struct store_consent_row, consent_rows, store_consent_rows_free)
STORE_ROW_LIST_FN(struct store_consent_row, consent_rows, consent_list)
STORE_ROW_CLEAR_FN(struct store_creq_row, creq_rows, store_creq_row_clear)
STORE_ROWS_FREE_FN(struct store_creq_row, creq_rows, store_creq_rows_free)
STORE_ROW_LIST_FN(struct store_creq_row, creq_rows, creq_list)

/* --- consents ---------------------------------------------------------- */

enum cs_err store_consent_get(struct store_conn *c, const char *id, struct store_consent_row *out)
{
	return store_get(c, SQL_CONSENT_GET, STORE_VALS(SV_TEXT(id)), &consent_rows, out);
}

enum cs_err store_consent_of_grant(struct store_conn *c, const char *jti,
    struct store_grant_row *g, struct store_consent_row *k)
{
	struct consent_grant_row r;
	enum cs_err e;
	memset(&r, 0, sizeof r);
	if (c == NULL || jti == NULL || g == NULL || k == NULL)
		return CS_EINVAL;
	if ((e = store_get(c, SQL_CONSENT_OF_GRANT, STORE_VALS(SV_TEXT(jti)), &consent_grant_rows,
	    &r)) != CS_OK)
		return e;
	*g = r.g;
	*k = r.k;
	return CS_OK;
}

enum cs_err store_consent_current(struct store_conn *c, int64_t user_id, const char *agent,
    const char *resource, struct store_consent_row *out)
{
	return store_get(c, SQL_CONSENT_CURRENT, STORE_VALS(SV_INT(user_id),
	    SV_TEXT(agent), SV_TEXT(resource)), &consent_rows, out);
}

enum cs_err store_consent_insert(struct store_conn *c, const struct store_consent_row *r)
{
	return store_run(c, SQL_CONSENT_INSERT, STORE_VALS(SV_TEXT(r->id), SV_INT(r->user_id),
	    SV_TEXT(r->agent), SV_TEXT(r->resource), SV_TEXT(r->granted), SV_TEXT(r->declined),
	    SV_INT(r->offline ? 1 : 0), SV_INT(r->created_at), SV_INT(r->expires_at),
	    SV_INT(r->revoked_at), SV_TEXT(r->revoked_by), SV_TEXT(r->revoke_reason),
	    SV_TEXT(r->request_id), SV_TEXT(r->granted_by)));
}

enum cs_err store_consent_set_revoked(struct store_conn *c, const char *id, int64_t now,
    const char *by, const char *reason, int *changed)
{
	return store_run_changed(c, SQL_CONSENT_REVOKE, STORE_VALS(SV_TEXT(id), SV_INT(now),
	    SV_TEXT(by), SV_TEXT(reason)), changed);
}

/* One "UPDATE ... SET revoked_at = ?2 WHERE consent_id = ?1" statement. */
static enum cs_err revoke_children(struct store_conn *c, const char *sql, const char *id,
    int64_t now)
{
	return store_run(c, sql, STORE_VALS(SV_TEXT(id), SV_INT(now)));
}

enum cs_err store_consent_cascade(struct store_conn *c, const char *id, int64_t now)
{
	enum cs_err e = revoke_children(c, SQL_GRANTS_REVOKE, id, now);
	if (e != CS_OK)
		return e;
	/* SECURITY: invariant 9 -- its pending and approved-unused approvals
	 * (migration 0006) are cancelled in this same transaction. */
	if ((e = store_approval_cancel_for_consent(c, id)) != CS_OK)
		return e;
	/* Issue #32: its standing rules end with it (migration 0026). */
	if ((e = store_standing_end_for_consent(c, id, now)) != CS_OK)
		return e;
	if ((e = revoke_children(c, SQL_REFRESH_REVOKE, id, now)) != CS_OK)
		return e;
	/* SECURITY: the consent's provider tokens go to the revocation outbox
	 * (migration 0005) in this same transaction; a record reserved for the
	 * consent replacing this one stays for vault.c to move over. */
	if ((e = store_vault_to_outbox(c, id, now, NULL)) != CS_OK)
		return e;
	/* SECURITY: exactly one revocation event (migration 0009) per revocation,
	 * in this same transaction: a rolled-back revocation pushes nothing, a
	 * committed one is pushed even across a restart (events.h). */
	return store_events_enqueue(c, id, now);
}

enum cs_err store_consent_set_reconnect(struct store_conn *c, const char *id,
    const char *reason, int *changed)
{
	return store_run_changed(c, SQL_CONSENT_RECONNECT, STORE_VALS(SV_TEXT(id),
	    SV_TEXT(reason)), changed);
}

enum cs_err store_consent_count_health(struct store_conn *c, int64_t now, int64_t *ok,
    int64_t *broken)
{
	int64_t v[2];
	enum cs_err e = store_aggregate(c, SQL_CONSENT_COUNT_HEALTH, STORE_VALS(SV_INT(now)), v, 2);
	if (e == CS_OK) {
		*ok = v[0];
		*broken = v[1];
	}
	return e;
}

enum cs_err store_consent_touch(struct store_conn *c, const char *id, int64_t now)
{
	/* Nothing reads its answer: on PostgreSQL it goes with the next statement. */
	return store_run_later(c, SQL_CONSENT_TOUCH, STORE_VALS(SV_TEXT(id), SV_INT(now)));
}

enum cs_err store_consent_list_user(struct store_conn *c, int64_t user_id, int64_t now,
    size_t max, struct store_consent_row **out, size_t *n)
{
	if (max > 10000)
		max = 10000;
	return consent_list(c, SQL_CONSENT_LIST, STORE_VALS(SV_INT(user_id), SV_INT(now),
	    SV_INT((int64_t)max)), max, out, n);
}

static const char SQL_CONSENT_LIST_ORG[] =
    "SELECT " CONSENT_COLS "WHERE k.granted_by = 'organisation' AND k.revoked_at = 0 "
    "AND k.expires_at > ?1 AND k.id > ?2 ORDER BY k.id LIMIT ?3";

enum cs_err store_consent_list_organisation(struct store_conn *c, int64_t now,
    const char *after, size_t max, struct store_consent_row **out, size_t *n)
{
	return consent_list(c, SQL_CONSENT_LIST_ORG, STORE_VALS(SV_INT(now), SV_TEXT(after),
	    SV_INT((int64_t)max)), max, out, n);
}

enum cs_err store_consent_count_states(struct store_conn *c, int64_t now,
    int64_t out[STORE_CONSENT_STATE__MAX])
{
	return store_aggregate(c, SQL_CONSENT_COUNT_STATES, STORE_VALS(SV_INT(now)), out,
	    STORE_CONSENT_STATE__MAX);
}

/* --- consent requests -------------------------------------------------- */

enum cs_err store_creq_get(struct store_conn *c, const char *id, struct store_creq_row *out)
{
	return store_get(c, SQL_CREQ_GET, STORE_VALS(SV_TEXT(id)), &creq_rows, out);
}

enum cs_err store_creq_pending(struct store_conn *c, int64_t user_id, const char *agent,
    const char *resource, struct store_creq_row *out)
{
	return store_get(c, SQL_CREQ_PENDING, STORE_VALS(SV_INT(user_id),
	    SV_TEXT(agent), SV_TEXT(resource)), &creq_rows, out);
}

enum cs_err store_creq_last_denied(struct store_conn *c, int64_t user_id, const char *agent,
    const char *resource, int64_t *decided_at, int64_t *lifted_at)
{
	int64_t v[2];
	enum cs_err e = store_get_ints(c, SQL_CREQ_LAST_DENIED, STORE_VALS(SV_INT(user_id),
	    SV_TEXT(agent), SV_TEXT(resource)), v, 2);
	if (e == CS_OK) {
		*decided_at = v[0];
		*lifted_at = v[1];
	}
	return e;
}

enum cs_err store_creq_lift_cooldown(struct store_conn *c, const char *id, int64_t now,
    int *changed)
{
	return store_run_changed(c, SQL_CREQ_LIFT, STORE_VALS(SV_TEXT(id), SV_INT(now)), changed);
}

enum cs_err store_creq_count_pending(struct store_conn *c, int64_t user_id, int64_t now,
    int64_t *count, int64_t *earliest)
{
	int64_t v[2];
	enum cs_err e = store_aggregate(c, SQL_CREQ_COUNT, STORE_VALS(SV_INT(user_id), SV_INT(now)),
	    v, 2);
	if (e == CS_OK) {
		*count = v[0];
		*earliest = v[1];
	}
	return e;
}

enum cs_err store_creq_insert(struct store_conn *c, const struct store_creq_row *r)
{
	return store_run(c, SQL_CREQ_INSERT, STORE_VALS(SV_TEXT(r->id), SV_INT(r->user_id),
	    SV_TEXT(r->agent), SV_TEXT(r->resource), SV_TEXT(r->scopes),
	    SV_TEXT(r->pre_granted ? r->pre_granted : ""), SV_TEXT(r->reason),
	    SV_TEXT(r->status), SV_INT(r->created_at), SV_INT(r->expires_at),
	    SV_INT(r->decided_at), SV_INT(r->last_poll_at), SV_INT(r->interval),
	    SV_TEXT(r->consent_id)));
}

enum cs_err store_creq_decide(struct store_conn *c, const char *id, const char *status,
    int64_t decided_at, const char *consent_id)
{
	return store_run_one(c, SQL_CREQ_DECIDE, STORE_VALS(SV_TEXT(id), SV_TEXT(status),
	    SV_INT(decided_at), SV_TEXT(consent_id)));
}

enum cs_err store_creq_merge(struct store_conn *c, const char *id, const char *scopes,
    const char *reason)
{
	return store_run_one(c, SQL_CREQ_MERGE, STORE_VALS(SV_TEXT(id), SV_TEXT(scopes),
	    SV_TEXT(reason)));
}

enum cs_err store_creq_set_narrowed(struct store_conn *c, const char *id, const char *dropped)
{
	return store_run_one(c, SQL_CREQ_NARROWED, STORE_VALS(SV_TEXT(id), SV_TEXT(dropped)));
}

enum cs_err store_creq_poll(struct store_conn *c, const char *id, int64_t last_poll_at,
    int64_t interval, int slow_down)
{
	return store_run_one(c, SQL_CREQ_POLL, STORE_VALS(SV_TEXT(id), SV_INT(last_poll_at),
	    SV_INT(interval), SV_INT(slow_down ? 1 : 0)));
}

enum cs_err store_creq_list_denied(struct store_conn *c, int64_t user_id, int64_t since,
    struct store_creq_row **out, size_t *n)
{
	return creq_list(c, SQL_CREQ_LIST_DENIED, STORE_VALS(SV_INT(user_id), SV_INT(since),
	    SV_INT(CREQ_LIST_MAX)), CREQ_LIST_MAX, out, n);
}

enum cs_err store_creq_list_pending(struct store_conn *c, int64_t user_id, int64_t now,
    struct store_creq_row **out, size_t *n)
{
	return creq_list(c, SQL_CREQ_LIST, STORE_VALS(SV_INT(user_id), SV_INT(now),
	    SV_INT(CREQ_LIST_MAX)), CREQ_LIST_MAX, out, n);
}
