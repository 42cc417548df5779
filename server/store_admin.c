/* store_admin.c -- the SQL for admin tokens and the admin listings.  Every
 * statement is a fixed constant; filters are bound parameters compared with
 * `=` (never LIKE), so quotes, `%` and `_` in a search are plain characters.
 * It must never read a column that holds a secret or build SQL from input. */
#include <stdlib.h>
#include <string.h>


#include "store_admin.h"
#include "store_priv.h"

/* Lists of one consent's history are bounded: a consent that ran for months
 * can have many grants, but its history page shows the last entries. */
#define HISTORY_MAX 500

static const char SQL_TOKEN_INSERT[] =
    "INSERT INTO admin_tokens (name, hash, created_at) VALUES (?1, ?2, ?3)";
/* SECURITY: the lookup compares SHA-256 values of 256-bit random tokens; a
 * timing difference in that comparison tells an attacker nothing usable about
 * a token (they cannot choose hash preimages). */
static const char SQL_TOKEN_FIND[] =
    "SELECT name, revoked_at FROM admin_tokens WHERE hash = ?1";
static const char SQL_TOKEN_TOUCH[] =
    "UPDATE admin_tokens SET last_used_at = ?2 WHERE name = ?1";
static const char SQL_TOKEN_REVOKE[] =
    "UPDATE admin_tokens SET revoked_at = ?2 WHERE name = ?1 AND revoked_at = 0";
static const char SQL_TOKEN_EXISTS[] = "SELECT 1 FROM admin_tokens WHERE name = ?1";
static const char SQL_TOKEN_LIST[] =
    "SELECT name, created_at, last_used_at, revoked_at FROM admin_tokens ORDER BY name";

#define CONSENT_ROW \
	"SELECT k.id AS id, u.subject AS subject, u.issuer AS issuer, k.agent AS agent, " \
	"k.resource AS resource, k.granted AS granted, k.declined AS declined, " \
	"k.offline AS offline, k.created_at AS created_at, k.expires_at AS expires_at, " \
	"k.revoked_at AS revoked_at, k.revoked_by AS revoked_by, " \
	"k.revoke_reason AS revoke_reason, k.request_id AS request_id, " \
	"k.reconnect_required AS reconnect_required, " \
	"CASE WHEN k.reconnect_required != 0 THEN coalesce(k.reconnect_reason, 'unknown') " \
	"END AS reconnect_reason, k.granted_by AS granted_by, " \
	"CASE WHEN k.revoked_at != 0 THEN 'revoked' WHEN k.expires_at <= ?1 THEN 'expired' " \
	"WHEN k.reconnect_required != 0 THEN 'reconnect_required' ELSE 'live' END AS state " \
	"FROM consents k JOIN users u ON u.id = k.user_id "

static const char SQL_CONSENTS[] = CONSENT_ROW
    "WHERE (?2 IS NULL OR u.issuer = ?2) AND (?3 IS NULL OR u.subject = ?3) "
    "AND (?10 IS NULL OR u.subject = ?10 OR lower(u.email) = lower(?10) "
    "OR lower(u.name) = lower(?10)) "
    "AND (?4 IS NULL OR k.agent = ?4) AND (?5 IS NULL OR k.resource = ?5) "
    "AND (?6 = 0 "
    "OR (?6 = 1 AND k.revoked_at = 0 AND k.expires_at > ?1 AND k.reconnect_required = 0) "
    "OR (?6 = 2 AND k.revoked_at = 0 AND k.expires_at <= ?1) "
    "OR (?6 = 3 AND k.revoked_at != 0) "
    "OR (?6 = 4 AND k.revoked_at = 0 AND k.expires_at > ?1 AND k.reconnect_required != 0)) "
    "AND (?7 IS NULL OR k.created_at < ?8 OR (k.created_at = ?8 AND k.id < ?7)) "
    "ORDER BY k.created_at DESC, k.id DESC LIMIT ?9";
static const char SQL_CONSENT_ONE[] = CONSENT_ROW "WHERE k.id = ?2";

/* Counts by sum(CASE ... THEN 1 ELSE 0 END), not sum(condition): PostgreSQL
 * has no sum of booleans (the statement runs on both backends). */
static const char SQL_COUNT_GRANTS[] =
    "SELECT count(*), "
    "coalesce(sum(CASE WHEN revoked_at = 0 AND expires_at > ?2 THEN 1 ELSE 0 END), 0) "
    "FROM grants WHERE consent_id = ?1";
static const char SQL_COUNT_REFRESH[] =
    "SELECT count(*) FROM refresh_tokens WHERE consent_id = ?1";
static const char SQL_REQUEST_ONE[] =
    "SELECT id, agent, resource, scopes, reason, status, created_at, expires_at, decided_at, "
    "consent_id FROM consent_requests WHERE id = ?1";
static const char SQL_CONSENT_APPROVALS[] =
    "SELECT id, action, digest, status, created_at, expires_at, decided_at, used_at "
    "FROM approvals WHERE consent_id = ?1 ORDER BY created_at, id LIMIT ?2";
#define AUDIT_ROW \
	"SELECT seq, ts, actor, action, subject, agent, resource, scopes, consent_id, " \
	"request_id, outcome, detail FROM audit "
/* A consent's entries, and those of the request it came from written before
 * it existed (consent_id NULL: the only entries audit_request indexes,
 * migration 0029; every entry naming the request and a consent names this
 * one, so nothing is lost).  The literal "consent_id IS NULL" is what lets
 * SQLite use that partial index. */
static const char SQL_CONSENT_EVENTS[] = AUDIT_ROW
    "WHERE consent_id = ?1 OR (?2 IS NOT NULL AND request_id = ?2 AND consent_id IS NULL) "
    "ORDER BY seq LIMIT ?3";

static const char SQL_IDS_USER[] =
    "SELECT k.id AS id FROM consents k JOIN users u ON u.id = k.user_id "
    "WHERE u.subject = ?1 AND (?2 IS NULL OR u.issuer = ?2) AND k.revoked_at = 0 "
    "ORDER BY k.id LIMIT ?3";
/* ?2 (the issuer) only matters for people; binding an unused lower index is fine. */
static const char SQL_IDS_AGENT[] =
    "SELECT id FROM consents WHERE agent = ?1 AND revoked_at = 0 "
    "ORDER BY id LIMIT ?3";
static const char SQL_IDS_RESOURCE[] =
    "SELECT id FROM consents WHERE resource = ?1 AND revoked_at = 0 "
    "ORDER BY id LIMIT ?3";

static const char SQL_PENDING_REQUESTS[] =
    "SELECT r.id AS id, u.subject AS subject, r.agent AS agent, r.resource AS resource, "
    "r.scopes AS scopes, r.reason AS reason, r.created_at AS created_at, "
    "r.expires_at AS expires_at FROM consent_requests r JOIN users u ON u.id = r.user_id "
    "WHERE r.status = 'pending' AND r.expires_at > ?1 "
    "ORDER BY r.created_at DESC, r.id DESC LIMIT ?2";
static const char SQL_PENDING_APPROVALS[] =
    "SELECT a.id AS id, a.consent_id AS consent_id, u.subject AS subject, a.agent AS agent, "
    "a.resource AS resource, a.action AS action, a.digest AS digest, "
    "a.created_at AS created_at, a.expires_at AS expires_at "
    "FROM approvals a JOIN users u ON u.id = a.user_id "
    "WHERE a.status = 'pending' AND a.expires_at > ?1 "
    "ORDER BY a.created_at DESC, a.id DESC LIMIT ?2";

/* The entries after ?1 in seq order: the pages' way to newer entries. */
#define AUDIT_AFTER_SEQ AUDIT_ROW \
    "WHERE seq > ?1 AND ts >= ?2 AND (?3 IS NULL OR action = ?3) " \
    "AND (?4 IS NULL OR consent_id = ?4) ORDER BY seq LIMIT ?5"
static const char SQL_AUDIT[] = AUDIT_AFTER_SEQ;
/* The feed (the admin API's listing, which exporters tail by its cursor).
 * SQLite: seq order, the order its one writer commits in.  PostgreSQL
 * (entry numbers from a sequence, taken before commit, migration 0030): the
 * entries whose transaction (xid) is older than every transaction still
 * running -- no entry can appear below that horizon any more -- after the
 * cursor (?6 its xid, ?1 its seq) in (xid, seq) order, along audit_xid;
 * ?7 > 0 (a cursor of seq alone, from before migration 0030) also wants
 * seq > ?7.  The xid is read as a number, for the next cursor (ORDER BY
 * names the column, not that number, or audit_xid would not serve it). */
static const char SQL_AUDIT_FEED[] = AUDIT_AFTER_SEQ;
static const char SQL_AUDIT_FEED_PG[] =
    "SELECT seq, ts, actor, action, subject, agent, resource, scopes, consent_id, "
    "request_id, outcome, detail, CAST(CAST(xid AS TEXT) AS BIGINT) AS xid FROM audit "
    "WHERE (xid, seq) > (CAST(CAST(?6 AS TEXT) AS xid8), ?1) "
    "AND xid < pg_snapshot_xmin(pg_current_snapshot()) AND seq > ?7 "
    "AND ts >= ?2 AND (?3 IS NULL OR action = ?3) "
    "AND (?4 IS NULL OR consent_id = ?4) ORDER BY audit.xid, audit.seq LIMIT ?5";
/* Newest first: the entries before ?1 (?1 = 0: from the newest). */
static const char SQL_AUDIT_DESC[] = AUDIT_ROW
    "WHERE (?1 = 0 OR seq < ?1) AND ts >= ?2 AND (?3 IS NULL OR action = ?3) "
    "AND (?4 IS NULL OR consent_id = ?4) ORDER BY seq DESC LIMIT ?5";

/* --- rows as JSON -------------------------------------------------------- */

/* The current row as an object: integers, text (invalid UTF-8, which no
 * writer stores, becomes null rather than broken JSON) and nulls.  Blobs are
 * never selected here. */
static enum cs_err row_json(struct store_stmt *st, json_t **out)
{
	json_t *o = json_object();
	if (o == NULL)
		return CS_ENOMEM;
	int n = store_col_count(st);
	for (int i = 0; i < n; i++) {
		const char *name = store_col_name(st, i);
		json_t *v;
		switch (store_col_type(st, i)) {
		case STORE_COL_INTEGER:
			v = json_integer((json_int_t)store_col_int64(st, i));
			break;
		case STORE_COL_TEXT: {
			const unsigned char *t = store_col_raw_text(st, i);
			int len = store_col_bytes(st, i);
			v = t ? json_stringn((const char *)t, (size_t)len) : NULL;
			if (v == NULL)
				v = json_null();
			break;
		}
		default:
			v = json_null();
			break;
		}
		if (name == NULL || v == NULL || json_object_set_new(o, name, v) != 0) {
			json_decref(o);
			return CS_ENOMEM;
		}
	}
	*out = o;
	return CS_OK;
}

/* Steps an already bound statement to the end, collecting every row; clears
 * the statement. */
static enum cs_err rows_json(struct store_conn *c, struct store_stmt *st, json_t **out)
{
	enum cs_err e;
	json_t *a = json_array();
	if (a == NULL) {
		store_stmt_done(st);
		return CS_ENOMEM;
	}
	while ((e = store_step(c, st)) == CS_OK) {
		json_t *o = NULL;
		if ((e = row_json(st, &o)) != CS_OK)
			break;
		if (json_array_append_new(a, o) != 0) {
			e = CS_ENOMEM;
			break;
		}
	}
	store_stmt_done(st);
	if (e != CS_ENOENT) {
		json_decref(a);
		return e;
	}
	*out = a;
	return CS_OK;
}

/* The first row of rows_json, or CS_ENOENT. */
static enum cs_err one_json(struct store_conn *c, struct store_stmt *st, json_t **out)
{
	json_t *a = NULL;
	enum cs_err e = rows_json(c, st, &a);
	if (e != CS_OK)
		return e;
	if (json_array_size(a) == 0) {
		json_decref(a);
		return CS_ENOENT;
	}
	*out = json_incref(json_array_get(a, 0));
	json_decref(a);
	return CS_OK;
}

/* --- admin tokens -------------------------------------------------------- */

enum cs_err store_admin_token_insert(struct store_conn *c, const char *name,
    const unsigned char hash[32], int64_t now)
{
	return store_run(c, SQL_TOKEN_INSERT, STORE_VALS(SV_TEXT(name), SV_BLOB(hash, 32),
	    SV_INT(now)));
}

enum cs_err store_admin_token_find(struct store_conn *c, const unsigned char hash[32],
    char **name, int64_t *revoked_at)
{
	enum cs_err e;
	char *n = NULL;
	struct store_stmt *st = store_stmt(c, SQL_TOKEN_FIND);
	if (st == NULL)
		return CS_EDB;
	if ((e = store_bind(st, STORE_VALS(SV_BLOB(hash, 32)))) == CS_OK &&
	    (e = store_step(c, st)) == CS_OK &&
	    (e = store_col_text(st, 0, &n)) == CS_OK) {
		if (n == NULL) {
			e = CS_EDB;
		} else {
			*revoked_at = store_col_int64(st, 1);
			*name = n;
			n = NULL;
		}
	}
	free(n);
	store_stmt_done(st);
	return e;
}

enum cs_err store_admin_token_touch(struct store_conn *c, const char *name, int64_t now)
{
	return store_run(c, SQL_TOKEN_TOUCH, STORE_VALS(SV_TEXT(name), SV_INT(now)));
}

enum cs_err store_admin_token_revoke(struct store_conn *c, const char *name, int64_t now,
    int *changed)
{
	enum cs_err e;
	struct store_stmt *st = store_stmt(c, SQL_TOKEN_EXISTS);
	if (st == NULL)
		return CS_EDB;
	if ((e = store_bind(st, STORE_VALS(SV_TEXT(name)))) == CS_OK)
		e = store_step(c, st);
	store_stmt_done(st);
	if (e != CS_OK)
		return e;                      /* CS_ENOENT: no such name */
	if ((st = store_query(c, SQL_TOKEN_REVOKE, STORE_VALS(SV_TEXT(name), SV_INT(now)),
	    &e)) == NULL)
		return e;
	if ((e = store_exec(c, st)) != CS_OK)
		return e;
	*changed = store_changes(c) > 0;
	return CS_OK;
}

enum cs_err store_admin_token_list(struct store_conn *c, json_t **out)
{
	struct store_stmt *st = store_stmt(c, SQL_TOKEN_LIST);
	if (st == NULL)
		return CS_EDB;
	return rows_json(c, st, out);
}

/* --- consents ------------------------------------------------------------ */

enum cs_err store_admin_consents(struct store_conn *c, const struct store_admin_consent_query *q,
    json_t **out)
{
	enum cs_err e;
	struct store_stmt *st = store_query(c, SQL_CONSENTS, STORE_VALS(SV_INT(q->now),
	    SV_TEXT(q->issuer), SV_TEXT(q->subject), SV_TEXT(q->agent), SV_TEXT(q->resource),
	    SV_INT((int64_t)q->state), SV_TEXT(q->after_id), SV_INT(q->after_created),
	    SV_INT(q->limit), SV_TEXT(q->person)), &e);
	if (st == NULL)
		return e;
	return rows_json(c, st, out);
}

enum cs_err store_admin_consent(struct store_conn *c, const char *id, int64_t now, json_t **out)
{
	enum cs_err e;
	struct store_stmt *st = store_query(c, SQL_CONSENT_ONE, STORE_VALS(SV_INT(now), SV_TEXT(id)),
	    &e);
	if (st == NULL)
		return e;
	return one_json(c, st, out);
}

enum cs_err store_admin_consent_counts(struct store_conn *c, const char *id, int64_t now,
    int64_t *grants_issued, int64_t *grants_live, int64_t *refresh_issued)
{
	enum cs_err e;
	int64_t gi = 0, gl = 0, ri = 0;
	struct store_stmt *st = store_stmt(c, SQL_COUNT_GRANTS);
	if (st == NULL)
		return CS_EDB;
	if ((e = store_bind(st, STORE_VALS(SV_TEXT(id), SV_INT(now)))) == CS_OK &&
	    (e = store_step(c, st)) == CS_OK) {
		gi = store_col_int64(st, 0);
		gl = store_col_int64(st, 1);
	}
	store_stmt_done(st);
	if (e != CS_OK)
		return e == CS_ENOENT ? CS_EDB : e;
	if ((st = store_stmt(c, SQL_COUNT_REFRESH)) == NULL)
		return CS_EDB;
	if ((e = store_bind(st, STORE_VALS(SV_TEXT(id)))) == CS_OK &&
	    (e = store_step(c, st)) == CS_OK)
		ri = store_col_int64(st, 0);
	store_stmt_done(st);
	if (e != CS_OK)
		return e == CS_ENOENT ? CS_EDB : e;
	*grants_issued = gi;
	*grants_live = gl;
	*refresh_issued = ri;
	return CS_OK;
}

enum cs_err store_admin_request(struct store_conn *c, const char *id, json_t **out)
{
	enum cs_err e;
	struct store_stmt *st = store_query(c, SQL_REQUEST_ONE, STORE_VALS(SV_TEXT(id)), &e);
	if (st == NULL)
		return e;
	return one_json(c, st, out);
}

enum cs_err store_admin_consent_approvals(struct store_conn *c, const char *id, json_t **out)
{
	enum cs_err e;
	struct store_stmt *st = store_query(c, SQL_CONSENT_APPROVALS, STORE_VALS(SV_TEXT(id),
	    SV_INT(HISTORY_MAX)), &e);
	if (st == NULL)
		return e;
	return rows_json(c, st, out);
}

enum cs_err store_admin_consent_events(struct store_conn *c, const char *consent_id,
    const char *request_id, json_t **out)
{
	enum cs_err e;
	struct store_stmt *st = store_query(c, SQL_CONSENT_EVENTS, STORE_VALS(SV_TEXT(consent_id),
	    SV_TEXT(request_id), SV_INT(HISTORY_MAX)), &e);
	if (st == NULL)
		return e;
	return rows_json(c, st, out);
}

enum cs_err store_admin_unrevoked_ids(struct store_conn *c, enum store_admin_by by,
    const char *value, const char *issuer, int64_t limit, json_t **out)
{
	static const char *const sql[STORE_ADMIN_BY__MAX] = {
		[STORE_ADMIN_BY_USER] = SQL_IDS_USER,
		[STORE_ADMIN_BY_AGENT] = SQL_IDS_AGENT,
		[STORE_ADMIN_BY_RESOURCE] = SQL_IDS_RESOURCE,
	};
	enum cs_err e;
	json_t *rows = NULL, *ids = NULL;
	if ((unsigned)by >= STORE_ADMIN_BY__MAX || value == NULL)
		return CS_EINVAL;
	struct store_stmt *st = store_stmt(c, sql[by]);
	if (st == NULL)
		return CS_EDB;
	if ((e = store_bind(st, STORE_VALS(SV_TEXT(value), SV_TEXT(issuer),
	    SV_INT(limit)))) != CS_OK)
		return e;
	if ((e = rows_json(c, st, &rows)) != CS_OK)
		return e;
	if ((ids = json_array()) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r) {
		json_t *id = json_object_get(r, "id");
		if (!json_is_string(id) || json_array_append(ids, id) != 0) {
			e = CS_EDB;
			goto out;
		}
	}
	*out = ids;
	ids = NULL;
	e = CS_OK;
out:
	json_decref(ids);
	json_decref(rows);
	return e;
}

/* --- pending work and the audit log ------------------------------------- */

static enum cs_err now_limit(struct store_conn *c, const char *sql, int64_t now, int64_t limit,
    json_t **out)
{
	enum cs_err e;
	struct store_stmt *st = store_query(c, sql, STORE_VALS(SV_INT(now), SV_INT(limit)), &e);
	if (st == NULL)
		return e;
	return rows_json(c, st, out);
}

enum cs_err store_admin_pending_requests(struct store_conn *c, int64_t now, int64_t limit,
    json_t **out)
{
	return now_limit(c, SQL_PENDING_REQUESTS, now, limit, out);
}

enum cs_err store_admin_pending_approvals(struct store_conn *c, int64_t now, int64_t limit,
    json_t **out)
{
	return now_limit(c, SQL_PENDING_APPROVALS, now, limit, out);
}

enum cs_err store_admin_audit(struct store_conn *c, const struct store_admin_audit_query *q,
    json_t **out)
{
	enum cs_err e;
	struct store_stmt *st;
	if (q->feed && !q->newest_first && store_audit_numbers_from_sequence(c))
		st = store_query(c, SQL_AUDIT_FEED_PG, STORE_VALS(SV_INT(q->after_seq),
		    SV_INT(q->since), SV_TEXT(q->action), SV_TEXT(q->consent_id), SV_INT(q->limit),
		    SV_INT(q->after_xid), SV_INT(q->after_seq_only)), &e);
	else
		st = store_query(c, q->newest_first ? SQL_AUDIT_DESC : q->feed ? SQL_AUDIT_FEED :
		    SQL_AUDIT, STORE_VALS(SV_INT(q->newest_first ? q->before_seq : q->after_seq),
		    SV_INT(q->since), SV_TEXT(q->action), SV_TEXT(q->consent_id), SV_INT(q->limit)),
		    &e);
	if (st == NULL)
		return e;
	return rows_json(c, st, out);
}
