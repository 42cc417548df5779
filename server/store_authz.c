/* store_authz.c -- the SQL for the authorization code flow (migration 0019):
 * pending /authorize requests and authorization codes.  Rules live with its
 * callers; this file only moves rows.  It must never see an authorization
 * code in clear (only its SHA-256) nor build SQL from input. */
#include <stdlib.h>
#include <string.h>

#include "store_authz.h"
#include "store_priv.h"

#define REQUEST_COLS "id, client_id, redirect_uri, state, code_challenge, resource, scope, " \
	"consent_request_id, user_id, created_at, expires_at, dpop_jkt"
#define CODE_COLS "request_id, client_id, redirect_uri, code_challenge, resource, scope, " \
	"consent_id, dpop_jkt, family_id, user_id, created_at, expires_at, used_at"

/* user_id 0 ("not signed in yet") is stored as NULL: NULLIF, in both dialects. */
static const char SQL_REQUEST_PUT[] =
    "INSERT INTO authz_requests (" REQUEST_COLS ") "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, NULLIF(?9, 0), ?10, ?11, ?12)";
static const char SQL_REQUEST_GET[] =
    "SELECT " REQUEST_COLS " FROM authz_requests WHERE id = ?1 AND expires_at > ?2";
/* SECURITY: bound once to a person; only that person binds it again. */
static const char SQL_REQUEST_BIND[] =
    "UPDATE authz_requests SET user_id = ?2, consent_request_id = ?3 "
    "WHERE id = ?1 AND expires_at > ?4 AND (user_id IS NULL OR user_id = ?2)";
/* The newest, should a consent request ever be recorded on two (each
 * /authorize request binds its own; a merge may make them share one). */
static const char SQL_REQUEST_BY_CONSENT[] =
    "SELECT " REQUEST_COLS " FROM authz_requests WHERE consent_request_id = ?1 "
    "AND expires_at > ?2 ORDER BY created_at DESC, id LIMIT 1";
static const char SQL_REQUEST_DELETE[] = "DELETE FROM authz_requests WHERE id = ?1";

static const char SQL_CODE_PUT[] =
    "INSERT INTO authz_codes (code_hash, request_id, client_id, redirect_uri, code_challenge, "
    "resource, scope, consent_id, dpop_jkt, user_id, created_at, expires_at, used_at) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 0)";
/* SECURITY: the one conditional write that makes a code single use: of
 * racing takes, the database lets exactly one change the row (OAuth 2.1
 * §4.1.3). */
static const char SQL_CODE_TAKE[] =
    "UPDATE authz_codes SET used_at = ?2 WHERE code_hash = ?1 AND used_at = 0 "
    "AND expires_at > ?2 RETURNING " CODE_COLS;
static const char SQL_CODE_GET[] =
    "SELECT " CODE_COLS " FROM authz_codes WHERE code_hash = ?1";
static const char SQL_CODE_SET_FAMILY[] =
    "UPDATE authz_codes SET family_id = ?2 "
    "WHERE code_hash = ?1 AND used_at <> 0 AND family_id IS NULL";

/* --- rows -------------------------------------------------------------- */

/* A REQUEST_COLS statement's row, column by column (store_get, store_rows). */
static const struct store_member request_members[] = {
	STORE_TEXT(struct store_authz_request, id),
	STORE_TEXT(struct store_authz_request, client_id),
	STORE_TEXT(struct store_authz_request, redirect_uri),
	STORE_TEXT_OR_NULL(struct store_authz_request, state),
	STORE_TEXT(struct store_authz_request, code_challenge),
	STORE_TEXT(struct store_authz_request, resource),
	STORE_TEXT_OR_NULL(struct store_authz_request, scope),
	STORE_TEXT_OR_NULL(struct store_authz_request, consent_request_id),
	STORE_INT64(struct store_authz_request, user_id),         /* NULL reads 0 */
	STORE_INT64(struct store_authz_request, created_at),
	STORE_INT64(struct store_authz_request, expires_at),
	STORE_TEXT_OR_NULL(struct store_authz_request, dpop_jkt),
};

static const struct store_row_type request_rows =
    STORE_ROW_MEMBERS(struct store_authz_request, request_members);

STORE_ROW_CLEAR_FN(struct store_authz_request, request_rows, store_authz_request_clear)

static const struct store_member code_members[] = {
	STORE_TEXT(struct store_authz_code, request_id),
	STORE_TEXT(struct store_authz_code, client_id),
	STORE_TEXT(struct store_authz_code, redirect_uri),
	STORE_TEXT(struct store_authz_code, code_challenge),
	STORE_TEXT(struct store_authz_code, resource),
	STORE_TEXT(struct store_authz_code, scope),
	STORE_TEXT(struct store_authz_code, consent_id),
	STORE_TEXT_OR_NULL(struct store_authz_code, dpop_jkt),
	STORE_TEXT_OR_NULL(struct store_authz_code, family_id),
	STORE_INT64(struct store_authz_code, user_id),
	STORE_INT64(struct store_authz_code, created_at),
	STORE_INT64(struct store_authz_code, expires_at),
	STORE_INT64(struct store_authz_code, used_at),
};

static const struct store_row_type code_rows =
    STORE_ROW_MEMBERS_WIPED(struct store_authz_code, code_members);

STORE_ROW_CLEAR_FN(struct store_authz_code, code_rows, store_authz_code_clear)

/* --- pending requests ---------------------------------------------------- */

enum cs_err store_authz_request_put(struct store_conn *c, const struct store_authz_request *r)
{
	if (c == NULL || r == NULL || r->id == NULL || strlen(r->id) != STORE_AUTHZ_ID_LEN ||
	    r->client_id == NULL || r->redirect_uri == NULL || r->code_challenge == NULL ||
	    r->resource == NULL || r->user_id < 0)
		return CS_EINVAL;
	return store_run(c, SQL_REQUEST_PUT, STORE_VALS(SV_TEXT(r->id), SV_TEXT(r->client_id),
	    SV_TEXT(r->redirect_uri), SV_TEXT(r->state), SV_TEXT(r->code_challenge),
	    SV_TEXT(r->resource), SV_TEXT(r->scope), SV_TEXT(r->consent_request_id),
	    SV_INT(r->user_id), SV_INT(r->created_at), SV_INT(r->expires_at),
	    SV_TEXT(r->dpop_jkt)));
}

enum cs_err store_authz_request_get(struct store_conn *c, const char *id, int64_t now,
    struct store_authz_request *out)
{
	struct store_authz_request r;
	enum cs_err e;
	if (c == NULL || id == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_get(c, SQL_REQUEST_GET, STORE_VALS(SV_TEXT(id), SV_INT(now)),
	    &request_rows, &r)) != CS_OK)
		return e;                 /* a failed read left r empty */
	*out = r;
	return CS_OK;
}

enum cs_err store_authz_request_by_consent(struct store_conn *c, const char *consent_request_id,
    int64_t now, struct store_authz_request *out)
{
	struct store_authz_request r;
	enum cs_err e;
	if (c == NULL || consent_request_id == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_get(c, SQL_REQUEST_BY_CONSENT, STORE_VALS(SV_TEXT(consent_request_id),
	    SV_INT(now)), &request_rows, &r)) != CS_OK)
		return e;
	*out = r;
	return CS_OK;
}

enum cs_err store_authz_request_bind(struct store_conn *c, const char *id, int64_t user_id,
    const char *consent_request_id, int64_t now)
{
	enum cs_err e;
	if (c == NULL || id == NULL || user_id <= 0)
		return CS_EINVAL;
	if ((e = store_run(c, SQL_REQUEST_BIND, STORE_VALS(SV_TEXT(id), SV_INT(user_id),
	    SV_TEXT(consent_request_id), SV_INT(now)))) != CS_OK)
		return e;
	return store_changes(c) == 1 ? CS_OK : CS_ENOENT;
}

enum cs_err store_authz_request_delete(struct store_conn *c, const char *id)
{
	enum cs_err e;
	if (c == NULL || id == NULL)
		return CS_EINVAL;
	if ((e = store_run(c, SQL_REQUEST_DELETE, STORE_VALS(SV_TEXT(id)))) != CS_OK)
		return e;
	return store_changes(c) == 1 ? CS_OK : CS_ENOENT;
}

/* --- codes ---------------------------------------------------------------- */

enum cs_err store_authz_code_put(struct store_conn *c,
    const unsigned char code_hash[STORE_AUTHZ_CODE_HASH_LEN], const struct store_authz_code *r)
{
	if (c == NULL || code_hash == NULL || r == NULL || r->request_id == NULL ||
	    r->client_id == NULL || r->redirect_uri == NULL || r->code_challenge == NULL ||
	    r->resource == NULL || r->scope == NULL || r->consent_id == NULL || r->user_id <= 0)
		return CS_EINVAL;
	return store_run(c, SQL_CODE_PUT, STORE_VALS(SV_BLOB(code_hash, STORE_AUTHZ_CODE_HASH_LEN),
	    SV_TEXT(r->request_id), SV_TEXT(r->client_id), SV_TEXT(r->redirect_uri),
	    SV_TEXT(r->code_challenge), SV_TEXT(r->resource), SV_TEXT(r->scope),
	    SV_TEXT(r->consent_id), SV_TEXT(r->dpop_jkt), SV_INT(r->user_id),
	    SV_INT(r->created_at), SV_INT(r->expires_at)));
}

enum cs_err store_authz_code_take(struct store_conn *c,
    const unsigned char code_hash[STORE_AUTHZ_CODE_HASH_LEN], int64_t now,
    enum store_authz_take *oc, struct store_authz_code *out)
{
	struct store_authz_code r;
	enum cs_err e;
	if (c == NULL || code_hash == NULL || oc == NULL || out == NULL || now <= 0)
		return CS_EINVAL;
	/* The take itself: a row comes back only to the one caller that used
	 * the code up. */
	e = store_get(c, SQL_CODE_TAKE, STORE_VALS(SV_BLOB(code_hash, STORE_AUTHZ_CODE_HASH_LEN),
	    SV_INT(now)), &code_rows, &r);
	if (e == CS_OK) {
		*oc = AUTHZ_TAKE_OK;
		*out = r;
		return CS_OK;
	}
	if (e != CS_ENOENT)
		return e;
	/* Nothing taken: say why, from the row as it is now (a used row never
	 * becomes unused again, so a later look cannot turn a reuse into a
	 * success). */
	e = store_get(c, SQL_CODE_GET, STORE_VALS(SV_BLOB(code_hash, STORE_AUTHZ_CODE_HASH_LEN)),
	    &code_rows, &r);
	if (e == CS_ENOENT) {
		*oc = AUTHZ_TAKE_UNKNOWN;
		return CS_OK;
	}
	if (e != CS_OK)
		return e;
	if (r.used_at == 0) {
		/* Unused: past its expiry, or (a row put between the two
		 * statements, which a random code makes all but impossible)
		 * unknown to the take. */
		*oc = r.expires_at <= now ? AUTHZ_TAKE_EXPIRED : AUTHZ_TAKE_UNKNOWN;
		store_authz_code_clear(&r);
		return CS_OK;
	}
	*oc = AUTHZ_TAKE_REUSED;
	*out = r;
	return CS_OK;
}

enum cs_err store_authz_code_set_family(struct store_conn *c,
    const unsigned char code_hash[STORE_AUTHZ_CODE_HASH_LEN], const char *family_id)
{
	enum cs_err e;
	if (c == NULL || code_hash == NULL || family_id == NULL)
		return CS_EINVAL;
	if ((e = store_run(c, SQL_CODE_SET_FAMILY, STORE_VALS(SV_BLOB(code_hash,
	    STORE_AUTHZ_CODE_HASH_LEN), SV_TEXT(family_id)))) != CS_OK)
		return e;
	return store_changes(c) == 1 ? CS_OK : CS_ENOENT;
}
