/* store_keys.c -- the SQL of the signing keys (migration 0001).  Which key
 * signs, when one retires and what revocation means live in jwt.c; this file
 * only moves sealed rows, and never builds SQL from input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store_keys.h"
#include "store_priv.h"

static const char SQL_KEY_INSERT[] =
    "INSERT INTO signing_keys (kid, alg, created_at, sign_after, retired_at, "
    "revoked_at, master_kid, sealed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
static const char SQL_KEYS_LIST[] =
    "SELECT kid, alg, created_at, sign_after, retired_at, revoked_at, master_kid, sealed "
    "FROM signing_keys WHERE revoked_at = 0 ORDER BY created_at ASC, rowid ASC";
static const char SQL_KEY_RETIRE[] =
    "UPDATE signing_keys SET retired_at = ?2 WHERE kid = ?1 AND revoked_at = 0";
static const char SQL_KEY_REVOKE[] =
    "UPDATE signing_keys SET revoked_at = ?2 WHERE kid = ?1 AND revoked_at = 0";

/* A SQL_KEYS_LIST row, column by column. */
static const struct store_member key_members[] = {
	STORE_TEXT(struct store_key, kid),
	STORE_TEXT(struct store_key, alg),
	STORE_INT64(struct store_key, created_at),
	STORE_INT64(struct store_key, sign_after),
	STORE_INT64(struct store_key, retired_at),
	STORE_INT64(struct store_key, revoked_at),
	STORE_TEXT(struct store_key, master_kid),
	STORE_BLOB(struct store_key, sealed, sealed_len),
};

static const struct store_row_type key_rows =
    STORE_ROW_MEMBERS(struct store_key, key_members);

STORE_ROW_CLEAR_FN(struct store_key, key_rows, store_key_clear)
STORE_ROWS_FREE_FN(struct store_key, key_rows, store_keys_free)

enum cs_err store_key_insert(struct store_conn *c, const struct store_key *k)
{
	if (k == NULL || k->kid == NULL || k->alg == NULL || k->master_kid == NULL ||
	    k->sealed == NULL || k->sealed_len == 0)
		return CS_EINVAL;
	return store_run(c, SQL_KEY_INSERT, STORE_VALS(SV_TEXT(k->kid), SV_TEXT(k->alg),
	    SV_INT(k->created_at), SV_INT(k->sign_after), SV_INT(k->retired_at),
	    SV_INT(k->revoked_at), SV_TEXT(k->master_kid), SV_BLOB(k->sealed, k->sealed_len)));
}

/* Every row, however many: a listing that stopped at a cap would hide a
 * key that still verifies. */
enum cs_err store_keys_list(struct store_conn *c, struct store_key **out, size_t *n)
{
	enum cs_err e;
	void *rows = NULL;
	if (out == NULL || n == NULL)
		return CS_EINVAL;
	struct store_stmt *st = store_stmt(c, SQL_KEYS_LIST);
	if (st == NULL)
		return CS_EDB;
	if ((e = store_rows_all(c, st, &key_rows, &rows, n)) == CS_OK)
		*out = rows;
	return e;
}

static enum cs_err key_set_time(struct store_conn *c, const char *sql, const char *kid, int64_t at)
{
	if (kid == NULL || at <= 0)
		return CS_EINVAL;
	/* The kid is the primary key: "changed no row" is "changed not one". */
	return store_run_one(c, sql, STORE_VALS(SV_TEXT(kid), SV_INT(at)));
}

enum cs_err store_key_set_retired(struct store_conn *c, const char *kid, int64_t at)
{
	return key_set_time(c, SQL_KEY_RETIRE, kid, at);
}

enum cs_err store_key_set_revoked(struct store_conn *c, const char *kid, int64_t at)
{
	return key_set_time(c, SQL_KEY_REVOKE, kid, at);
}
