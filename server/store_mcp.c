/* store_mcp.c -- the SQL of the MCP gateway's 2025-11-25 sessions and URL
 * elicitations (migration 0024).  It keeps the hash of a session id, never the
 * id; it never finds a session by its hash alone; every value is a bound
 * parameter. */
#include <stdlib.h>
#include <string.h>

#include "store_mcp.h"
#include "store_priv.h"

#define SESSION_COLS "endpoint, client_id, session_hash, user_id, url_elicitation, " \
	"created_at, last_seen_at, expires_at"
#define ELICITATION_COLS "id, endpoint, client_id, item_id, session_hash, user_id, kind, " \
	"created_at, expires_at, completed_at, notified_at"

/* SECURITY: a conflict on (endpoint, hash) replaces the row only when it is
 * the same person's and client's (a new initialize that the upstream answered
 * with the same id) or expired: never another person's live session. */
static const char SQL_SESSION_PUT[] =
    "INSERT INTO mcp_sessions (" SESSION_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
    "ON CONFLICT (endpoint, session_hash) DO UPDATE SET user_id = excluded.user_id, "
    "client_id = excluded.client_id, url_elicitation = excluded.url_elicitation, "
    "created_at = excluded.created_at, last_seen_at = excluded.last_seen_at, "
    "expires_at = excluded.expires_at WHERE mcp_sessions.expires_at <= ?9 OR "
    "(mcp_sessions.user_id = excluded.user_id AND mcp_sessions.client_id = excluded.client_id)";
static const char SQL_SESSION_GET[] =
    "SELECT " SESSION_COLS " FROM mcp_sessions WHERE endpoint = ?1 AND session_hash = ?2 "
    "AND user_id = ?3 AND client_id = ?4 AND expires_at > ?5";
static const char SQL_SESSION_TOUCH[] =
    "UPDATE mcp_sessions SET last_seen_at = ?3, expires_at = ?4 "
    "WHERE endpoint = ?1 AND session_hash = ?2";
static const char SQL_SESSION_DELETE[] =
    "DELETE FROM mcp_sessions WHERE endpoint = ?1 AND session_hash = ?2 AND user_id = ?3 "
    "AND client_id = ?4";
static const char SQL_SESSION_DELETE_ELICITATIONS[] =
    "DELETE FROM mcp_elicitations WHERE endpoint = ?1 AND session_hash = ?2 AND user_id = ?3 "
    "AND client_id = ?4";

static const char SQL_ELICITATION_PUT[] =
    "INSERT INTO mcp_elicitations (id, endpoint, client_id, item_id, session_hash, user_id, "
    "kind, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
static const char SQL_ELICITATION_GET[] =
    "SELECT " ELICITATION_COLS " FROM mcp_elicitations WHERE id = ?1";

/* Ready: of this session (and still of its person and client: a session id
 * taken over after its expiry does not inherit the elicitations), not
 * notified, not expired, and its item decided -- read from the item itself at
 * every look, so that whichever path decided it (the person's page, /me, an
 * admin, another node) counts without telling this table. */
#define READY_WHERE \
	"e.endpoint = ?1 AND e.session_hash = ?2 AND e.user_id = ?3 AND e.client_id = ?4 " \
	"AND e.notified_at = 0 AND e.expires_at > ?5 AND (" \
	"(e.kind = 'approval' AND EXISTS (SELECT 1 FROM approvals a " \
	"WHERE a.id = e.item_id AND a.status <> 'pending')) OR " \
	"(e.kind = 'consent' AND EXISTS (SELECT 1 FROM consent_requests r " \
	"WHERE r.id = e.item_id AND r.status <> 'pending')))"
static const char SQL_ELICITATION_COUNT_READY[] =
    "SELECT count(*) FROM mcp_elicitations e WHERE " READY_WHERE;
/* SECURITY: the one conditional write that hands an elicitation to one
 * stream: notified_at = 0 is checked again on the row itself, so that of
 * racing takers (PostgreSQL re-checks it on the row a concurrent taker
 * changed) exactly one gets each id back. */
static const char SQL_ELICITATION_TAKE_READY[] =
    "UPDATE mcp_elicitations SET completed_at = ?5, notified_at = ?5 WHERE id IN ("
    "SELECT e.id FROM mcp_elicitations e WHERE " READY_WHERE " ORDER BY e.created_at, e.id "
    "LIMIT ?6) AND notified_at = 0 RETURNING id";

static const char SQL_APPROVAL_EXPIRY[] = "SELECT expires_at FROM approvals WHERE id = ?1";
static const char SQL_CREQ_EXPIRY[] = "SELECT expires_at FROM consent_requests WHERE id = ?1";

static const char *const kind_names[STORE_MCP_KIND__MAX] = {
	[STORE_MCP_APPROVAL] = "approval", [STORE_MCP_CONSENT] = "consent",
};

/* --- rows -------------------------------------------------------------- */

/* A stored hash, which must be STORE_MCP_HASH_LEN bytes. */
static enum cs_err read_hash(struct store_stmt *st, int i, unsigned char out[STORE_MCP_HASH_LEN])
{
	const void *p = store_col_raw_blob(st, i);
	if (p == NULL || store_col_bytes(st, i) != STORE_MCP_HASH_LEN)
		return CS_EDB;
	memcpy(out, p, STORE_MCP_HASH_LEN);
	return CS_OK;
}

static enum cs_err session_read(struct store_stmt *st, void *row)
{
	struct store_mcp_session *r = row;
	enum cs_err e;
	if ((e = store_cols_text(st, &r->block, STORE_TEXT_COLS(
	    { 0, &r->endpoint, true },
	    { 1, &r->client_id, true }))) != CS_OK)
		return e;
	if ((e = read_hash(st, 2, r->hash)) != CS_OK)
		return e;
	r->user_id = store_col_int64(st, 3);
	r->url_elicitation = store_col_int64(st, 4) != 0;
	r->created_at = store_col_int64(st, 5);
	r->last_seen_at = store_col_int64(st, 6);
	r->expires_at = store_col_int64(st, 7);
	return CS_OK;
}

static const struct store_row_type session_rows =
    STORE_ROW_BLOCK(struct store_mcp_session, session_read);

STORE_ROW_CLEAR_FN(struct store_mcp_session, session_rows, store_mcp_session_clear)

static enum cs_err elicitation_read(struct store_stmt *st, void *row)
{
	struct store_mcp_elicitation *r = row;
	enum cs_err e;
	const unsigned char *kind;
	if ((e = store_cols_text(st, &r->block, STORE_TEXT_COLS(
	    { 0, &r->id, true },
	    { 1, &r->endpoint, true },
	    { 2, &r->client_id, true },
	    { 3, &r->item_id, true }))) != CS_OK)
		return e;
	if ((e = read_hash(st, 4, r->hash)) != CS_OK)
		return e;
	r->user_id = store_col_int64(st, 5);
	kind = store_col_raw_text(st, 6);
	r->kind = STORE_MCP_KIND__MAX;
	for (int k = 0; kind != NULL && k < STORE_MCP_KIND__MAX; k++)
		if (strcmp((const char *)kind, kind_names[k]) == 0)
			r->kind = (enum store_mcp_kind)k;
	if (r->kind == STORE_MCP_KIND__MAX)
		return CS_EDB;                /* the CHECK constraint admits no other */
	r->created_at = store_col_int64(st, 7);
	r->expires_at = store_col_int64(st, 8);
	r->completed_at = store_col_int64(st, 9);
	r->notified_at = store_col_int64(st, 10);
	return CS_OK;
}

static const struct store_row_type elicitation_rows =
    STORE_ROW_BLOCK(struct store_mcp_elicitation, elicitation_read);

STORE_ROW_CLEAR_FN(struct store_mcp_elicitation, elicitation_rows, store_mcp_elicitation_clear)

/* The id column of a RETURNING id. */
struct id_row {
	char *block;
	char *id;
};

static enum cs_err id_read(struct store_stmt *st, void *row)
{
	struct id_row *r = row;
	return store_cols_text(st, &r->block, STORE_TEXT_COLS({ 0, &r->id, true }));
}

static const struct store_row_type id_rows = STORE_ROW_BLOCK(struct id_row, id_read);
STORE_ROW_LIST_FN(struct id_row, id_rows, id_list)

void store_mcp_ids_free(char **ids, size_t n)
{
	if (ids == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
}

/* --- sessions ------------------------------------------------------------ */

enum cs_err store_mcp_session_put(struct store_conn *c, const struct store_mcp_session *r,
    int64_t now)
{
	int changed = 0;
	enum cs_err e;
	if (c == NULL || r == NULL || r->endpoint == NULL || r->client_id == NULL ||
	    r->user_id <= 0)
		return CS_EINVAL;
	if ((e = store_run_changed(c, SQL_SESSION_PUT, STORE_VALS(SV_TEXT(r->endpoint),
	    SV_TEXT(r->client_id), SV_BLOB(r->hash, STORE_MCP_HASH_LEN), SV_INT(r->user_id),
	    SV_INT(r->url_elicitation ? 1 : 0), SV_INT(r->created_at), SV_INT(r->last_seen_at),
	    SV_INT(r->expires_at), SV_INT(now)), &changed)) != CS_OK)
		return e;
	return changed ? CS_OK : CS_EEXIST;
}

enum cs_err store_mcp_session_get(struct store_conn *c, const char *endpoint,
    const unsigned char hash[STORE_MCP_HASH_LEN], int64_t user_id, const char *client_id,
    int64_t now, struct store_mcp_session *out)
{
	struct store_mcp_session r;
	enum cs_err e;
	if (c == NULL || endpoint == NULL || hash == NULL || client_id == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_get(c, SQL_SESSION_GET, STORE_VALS(SV_TEXT(endpoint),
	    SV_BLOB(hash, STORE_MCP_HASH_LEN), SV_INT(user_id), SV_TEXT(client_id), SV_INT(now)),
	    &session_rows, &r)) != CS_OK)
		return e;
	*out = r;
	return CS_OK;
}

enum cs_err store_mcp_session_touch(struct store_conn *c, const char *endpoint,
    const unsigned char hash[STORE_MCP_HASH_LEN], int64_t last_seen_at, int64_t expires_at)
{
	if (c == NULL || endpoint == NULL || hash == NULL)
		return CS_EINVAL;
	return store_run_one(c, SQL_SESSION_TOUCH, STORE_VALS(SV_TEXT(endpoint),
	    SV_BLOB(hash, STORE_MCP_HASH_LEN), SV_INT(last_seen_at), SV_INT(expires_at)));
}

enum cs_err store_mcp_session_delete(struct store_conn *c, const char *endpoint,
    const unsigned char hash[STORE_MCP_HASH_LEN], int64_t user_id, const char *client_id)
{
	int changed = 0;
	enum cs_err e;
	if (c == NULL || endpoint == NULL || hash == NULL || client_id == NULL)
		return CS_EINVAL;
	if ((e = store_run_changed(c, SQL_SESSION_DELETE, STORE_VALS(SV_TEXT(endpoint),
	    SV_BLOB(hash, STORE_MCP_HASH_LEN), SV_INT(user_id), SV_TEXT(client_id)),
	    &changed)) != CS_OK)
		return e;
	if (!changed)
		return CS_ENOENT;
	return store_run(c, SQL_SESSION_DELETE_ELICITATIONS, STORE_VALS(SV_TEXT(endpoint),
	    SV_BLOB(hash, STORE_MCP_HASH_LEN), SV_INT(user_id), SV_TEXT(client_id)));
}

/* --- elicitations -------------------------------------------------------- */

enum cs_err store_mcp_elicitation_put(struct store_conn *c, const struct store_mcp_elicitation *r)
{
	if (c == NULL || r == NULL || r->id == NULL || strlen(r->id) != STORE_MCP_ID_LEN ||
	    r->endpoint == NULL || r->client_id == NULL || r->item_id == NULL || r->user_id <= 0 ||
	    (unsigned)r->kind >= STORE_MCP_KIND__MAX)
		return CS_EINVAL;
	return store_run(c, SQL_ELICITATION_PUT, STORE_VALS(SV_TEXT(r->id), SV_TEXT(r->endpoint),
	    SV_TEXT(r->client_id), SV_TEXT(r->item_id), SV_BLOB(r->hash, STORE_MCP_HASH_LEN),
	    SV_INT(r->user_id), SV_TEXT(kind_names[r->kind]), SV_INT(r->created_at),
	    SV_INT(r->expires_at)));
}

enum cs_err store_mcp_elicitation_get(struct store_conn *c, const char *id,
    struct store_mcp_elicitation *out)
{
	struct store_mcp_elicitation r;
	enum cs_err e;
	if (c == NULL || id == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_get(c, SQL_ELICITATION_GET, STORE_VALS(SV_TEXT(id)), &elicitation_rows,
	    &r)) != CS_OK)
		return e;
	*out = r;
	return CS_OK;
}

enum cs_err store_mcp_elicitation_count_ready(struct store_conn *c, const char *endpoint,
    const unsigned char hash[STORE_MCP_HASH_LEN], int64_t user_id, const char *client_id,
    int64_t now, int64_t *n)
{
	if (c == NULL || endpoint == NULL || hash == NULL || client_id == NULL || n == NULL)
		return CS_EINVAL;
	return store_aggregate(c, SQL_ELICITATION_COUNT_READY, STORE_VALS(SV_TEXT(endpoint),
	    SV_BLOB(hash, STORE_MCP_HASH_LEN), SV_INT(user_id), SV_TEXT(client_id), SV_INT(now)),
	    n, 1);
}

enum cs_err store_mcp_elicitation_take_ready(struct store_conn *c, const char *endpoint,
    const unsigned char hash[STORE_MCP_HASH_LEN], int64_t user_id, const char *client_id,
    int64_t now, size_t max, char ***ids, size_t *n)
{
	struct id_row *rows = NULL;
	size_t nrows = 0;
	char **out = NULL;
	enum cs_err e;
	if (c == NULL || endpoint == NULL || hash == NULL || client_id == NULL || ids == NULL ||
	    n == NULL || max == 0 || max > 1024)
		return CS_EINVAL;
	/* store_rows steps to the end, so every row the UPDATE changed comes back. */
	if ((e = id_list(c, SQL_ELICITATION_TAKE_READY, STORE_VALS(SV_TEXT(endpoint),
	    SV_BLOB(hash, STORE_MCP_HASH_LEN), SV_INT(user_id), SV_TEXT(client_id), SV_INT(now),
	    SV_INT((int64_t)max)), max, &rows, &nrows)) != CS_OK)
		return e;
	if (nrows > 0) {
		if ((out = calloc(nrows, sizeof *out)) == NULL) {
			e = CS_ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < nrows; i++)
			if ((out[i] = strdup(rows[i].id)) == NULL) {
				store_mcp_ids_free(out, nrows);
				out = NULL;
				e = CS_ENOMEM;
				goto out;
			}
	}
	*ids = out;
	*n = nrows;
out:
	store_rows_free(&id_rows, rows, nrows);
	return e;
}

enum cs_err store_mcp_item_expiry(struct store_conn *c, enum store_mcp_kind kind,
    const char *item_id, int64_t *expires_at)
{
	if (c == NULL || item_id == NULL || expires_at == NULL || (unsigned)kind >= STORE_MCP_KIND__MAX)
		return CS_EINVAL;
	return store_get_ints(c, kind == STORE_MCP_APPROVAL ? SQL_APPROVAL_EXPIRY : SQL_CREQ_EXPIRY,
	    STORE_VALS(SV_TEXT(item_id)), expires_at, 1);
}
