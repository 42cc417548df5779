/* store_grant.c -- the SQL for grants and refresh tokens (migration 0004).
 * Rules live in grant.c; this file only moves rows.  It must never see a
 * refresh token in clear (only its hash) nor build SQL from input. */
#include <stdlib.h>
#include <string.h>

#include "store_grant.h"
#include "store_priv.h"

static const char SQL_GRANT_INSERT[] =
    "INSERT INTO grants (jti, consent_id, issued_at, expires_at, revoked_at, family) "
    "VALUES (?1, ?2, ?3, ?4, 0, ?5)";
static const char SQL_GRANT_GET[] =
    "SELECT jti, consent_id, issued_at, expires_at, revoked_at FROM grants WHERE jti = ?1";
static const char SQL_GRANT_REVOKE[] =
    "UPDATE grants SET revoked_at = ?2 WHERE jti = ?1 AND revoked_at = 0";

static const char SQL_REFRESH_INSERT[] =
    "INSERT INTO refresh_tokens (hash, family, consent_id, issued_at, used_at, revoked_at) "
    "VALUES (?1, ?2, ?3, ?4, 0, 0)";
static const char SQL_REFRESH_GET[] =
    "SELECT hash, family, consent_id, issued_at, used_at, revoked_at, reuse_detected "
    "FROM refresh_tokens WHERE hash = ?1";
static const char SQL_REFRESH_USE[] =
    "UPDATE refresh_tokens SET used_at = ?2 WHERE hash = ?1 AND used_at = 0 AND revoked_at = 0";
static const char SQL_REFRESH_REVOKE_FAMILY[] =
    "UPDATE refresh_tokens SET revoked_at = ?2, reuse_detected = ?3 "
    "WHERE family = ?1 AND revoked_at = 0";
static const char SQL_GRANT_REVOKE_FAMILY[] =
    "UPDATE grants SET revoked_at = ?2 WHERE family = ?1 AND revoked_at = 0";

/* --- rows -------------------------------------------------------------- */

static const struct store_member grant_members[] = {
	STORE_TEXT(struct store_grant_row, jti),
	STORE_TEXT(struct store_grant_row, consent_id),
	STORE_INT64(struct store_grant_row, issued_at),
	STORE_INT64(struct store_grant_row, expires_at),
	STORE_INT64(struct store_grant_row, revoked_at),
};

static const struct store_row_type grant_rows =
    STORE_ROW_MEMBERS(struct store_grant_row, grant_members);

STORE_ROW_CLEAR_FN(struct store_grant_row, grant_rows, store_grant_row_clear)

/* The hash must be STORE_REFRESH_HASH_LEN bytes. */
static enum cs_err read_refresh(struct store_stmt *st, void *row)
{
	struct store_refresh_row *r = row;
	enum cs_err e;
	unsigned char *h = NULL;
	size_t hlen = 0;
	if ((e = store_col_blob(st, 0, &h, &hlen)) != CS_OK ||
	    (e = store_cols_text(st, &r->block, STORE_TEXT_COLS({ 1, &r->family, true },
	    { 2, &r->consent_id, true }))) != CS_OK)
		goto out;
	if (hlen != STORE_REFRESH_HASH_LEN) {
		e = CS_EDB;
		goto out;
	}
	memcpy(r->hash, h, STORE_REFRESH_HASH_LEN);
	r->issued_at = store_col_int64(st, 3);
	r->used_at = store_col_int64(st, 4);
	r->revoked_at = store_col_int64(st, 5);
	r->reuse_detected = store_col_int64(st, 6) != 0;
out:
	free(h);
	return e;
}

static const struct store_row_type refresh_rows =
    STORE_ROW_BLOCK_WIPED(struct store_refresh_row, read_refresh);

STORE_ROW_CLEAR_FN(struct store_refresh_row, refresh_rows, store_refresh_row_clear)

/* --- grants ------------------------------------------------------------ */

enum cs_err store_grant_insert(struct store_conn *c, const char *jti, const char *consent_id,
    const char *family, int64_t issued_at, int64_t expires_at)
{
	if (c == NULL || jti == NULL || consent_id == NULL)
		return CS_EINVAL;
	/* Nothing reads its answer: on PostgreSQL it goes with the next statement. */
	return store_run_later(c, SQL_GRANT_INSERT, STORE_VALS(SV_TEXT(jti), SV_TEXT(consent_id),
	    SV_INT(issued_at), SV_INT(expires_at), SV_TEXT(family)));
}

enum cs_err store_grant_get(struct store_conn *c, const char *jti, struct store_grant_row *out)
{
	if (c == NULL || jti == NULL || out == NULL)
		return CS_EINVAL;
	return store_get(c, SQL_GRANT_GET, STORE_VALS(SV_TEXT(jti)), &grant_rows, out);
}

enum cs_err store_grant_revoke(struct store_conn *c, const char *jti, int64_t now, int *changed)
{
	if (c == NULL || jti == NULL || changed == NULL)
		return CS_EINVAL;
	return store_run_changed(c, SQL_GRANT_REVOKE, STORE_VALS(SV_TEXT(jti), SV_INT(now)),
	    changed);
}

/* --- refresh tokens ---------------------------------------------------- */

enum cs_err store_refresh_insert(struct store_conn *c,
    const unsigned char hash[STORE_REFRESH_HASH_LEN], const char *family,
    const char *consent_id, int64_t issued_at)
{
	if (c == NULL || hash == NULL || family == NULL || consent_id == NULL)
		return CS_EINVAL;
	return store_run(c, SQL_REFRESH_INSERT, STORE_VALS(SV_BLOB(hash, STORE_REFRESH_HASH_LEN),
	    SV_TEXT(family), SV_TEXT(consent_id), SV_INT(issued_at)));
}

enum cs_err store_refresh_get(struct store_conn *c,
    const unsigned char hash[STORE_REFRESH_HASH_LEN], struct store_refresh_row *out)
{
	if (c == NULL || hash == NULL || out == NULL)
		return CS_EINVAL;
	return store_get(c, SQL_REFRESH_GET, STORE_VALS(SV_BLOB(hash, STORE_REFRESH_HASH_LEN)),
	    &refresh_rows, out);
}

enum cs_err store_refresh_mark_used(struct store_conn *c,
    const unsigned char hash[STORE_REFRESH_HASH_LEN], int64_t now, int *changed)
{
	if (c == NULL || hash == NULL || changed == NULL)
		return CS_EINVAL;
	return store_run_changed(c, SQL_REFRESH_USE, STORE_VALS(SV_BLOB(hash, STORE_REFRESH_HASH_LEN),
	    SV_INT(now)), changed);
}

enum cs_err store_refresh_revoke_family(struct store_conn *c, const char *family, int64_t now,
    bool reuse, int64_t *n)
{
	enum cs_err e;
	struct store_stmt *st;
	if (c == NULL || family == NULL || n == NULL)
		return CS_EINVAL;
	if ((st = store_query(c, SQL_REFRESH_REVOKE_FAMILY, STORE_VALS(SV_TEXT(family),
	    SV_INT(now), SV_INT(reuse ? 1 : 0)), &e)) == NULL)
		return e;
	if ((e = store_exec(c, st)) != CS_OK)
		return e;
	*n = store_changes(c);
	/* SECURITY: the grants minted in the family end with it. */
	return store_run(c, SQL_GRANT_REVOKE_FAMILY, STORE_VALS(SV_TEXT(family), SV_INT(now)));
}

/* --- DPoP bindings ---------------------------------------------------------- */

static const char SQL_REFRESH_BIND[] =
    "INSERT INTO refresh_bindings (family, jkt) VALUES (?1, ?2)";
static const char SQL_REFRESH_BINDING[] =
    "SELECT jkt FROM refresh_bindings WHERE family = ?1";

enum cs_err store_refresh_bind(struct store_conn *c, const char *family, const char *jkt)
{
	if (c == NULL || family == NULL || jkt == NULL)
		return CS_EINVAL;
	return store_run(c, SQL_REFRESH_BIND, STORE_VALS(SV_TEXT(family), SV_TEXT(jkt)));
}

enum cs_err store_refresh_binding(struct store_conn *c, const char *family, char **jkt)
{
	enum cs_err e;
	struct store_stmt *st;
	char *v = NULL;
	if (c == NULL || family == NULL || jkt == NULL)
		return CS_EINVAL;
	if ((st = store_query(c, SQL_REFRESH_BINDING, STORE_VALS(SV_TEXT(family)), &e)) == NULL)
		return e;
	e = store_step(c, st);
	if (e == CS_OK && (e = store_col_text(st, 0, &v)) == CS_OK && v == NULL)
		e = CS_ENOENT;
	store_stmt_done(st);
	if (e == CS_OK)
		*jkt = v;
	else
		free(v);
	return e;
}

/* --- audiences of MCP clients' refresh families ---------------------------- */

static const char SQL_REFRESH_AUDIENCE_PUT[] =
    "INSERT INTO refresh_audiences (family, audience, client_id) VALUES (?1, ?2, ?3)";
static const char SQL_REFRESH_AUDIENCE[] =
    "SELECT audience, client_id FROM refresh_audiences WHERE family = ?1";

enum cs_err store_refresh_audience_put(struct store_conn *c, const char *family,
    const char *audience, const char *client_id)
{
	if (c == NULL || family == NULL || audience == NULL || client_id == NULL)
		return CS_EINVAL;
	return store_run(c, SQL_REFRESH_AUDIENCE_PUT, STORE_VALS(SV_TEXT(family), SV_TEXT(audience),
	    SV_TEXT(client_id)));
}

enum cs_err store_refresh_audience(struct store_conn *c, const char *family, char **audience,
    char **client_id)
{
	enum cs_err e;
	struct store_stmt *st;
	char *a = NULL, *k = NULL;
	if (c == NULL || family == NULL || audience == NULL || client_id == NULL)
		return CS_EINVAL;
	if ((st = store_query(c, SQL_REFRESH_AUDIENCE, STORE_VALS(SV_TEXT(family)), &e)) == NULL)
		return e;
	e = store_step(c, st);
	if (e == CS_OK && (e = store_col_text(st, 0, &a)) == CS_OK &&
	    (e = store_col_text(st, 1, &k)) == CS_OK && (a == NULL || k == NULL))
		e = CS_ENOENT;
	store_stmt_done(st);
	if (e == CS_OK) {
		*audience = a;
		*client_id = k;
	} else {
		free(a);
		free(k);
	}
	return e;
}
