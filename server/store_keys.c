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

void store_key_clear(struct store_key *k)
{
	if (k == NULL)
		return;
	free(k->block);
	free(k->sealed);
	memset(k, 0, sizeof *k);
}

void store_keys_free(struct store_key *ks, size_t n)
{
	if (ks == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		store_key_clear(&ks[i]);
	free(ks);
}

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
	enum cs_err e = CS_EDB;
	struct store_key *ks = NULL;
	size_t len = 0, cap = 0;

	if (out == NULL || n == NULL)
		return CS_EINVAL;
	struct store_stmt *st = store_stmt(c, SQL_KEYS_LIST);
	if (st == NULL)
		return CS_EDB;
	while ((e = store_step(c, st)) == CS_OK) {
		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 4;
			if (ncap > SIZE_MAX / sizeof *ks) {
				e = CS_ENOMEM;
				goto out;
			}
			struct store_key *p = realloc(ks, ncap * sizeof *ks);
			if (p == NULL) {
				e = CS_ENOMEM;
				goto out;
			}
			ks = p;
			cap = ncap;
		}
		struct store_key *k = &ks[len++];
		memset(k, 0, sizeof *k);
		if ((e = store_col_blob(st, 7, &k->sealed, &k->sealed_len)) != CS_OK ||
		    (e = store_cols_text(st, &k->block, STORE_TEXT_COLS({ 0, &k->kid, true },
		    { 1, &k->alg, true }, { 6, &k->master_kid, true }))) != CS_OK)
			goto out;
		k->created_at = store_col_int64(st, 2);
		k->sign_after = store_col_int64(st, 3);
		k->retired_at = store_col_int64(st, 4);
		k->revoked_at = store_col_int64(st, 5);
	}
	if (e != CS_ENOENT)
		goto out;
	*out = len > 0 ? ks : NULL;
	*n = len;
	if (len == 0)
		free(ks);
	ks = NULL;
	len = 0;
	e = CS_OK;
out:
	store_stmt_done(st);
	store_keys_free(ks, len);
	return e;
}

static enum cs_err key_set_time(struct store_conn *c, const char *sql, const char *kid, int64_t at)
{
	enum cs_err e;
	if (kid == NULL || at <= 0)
		return CS_EINVAL;
	struct store_stmt *st = store_query(c, sql, STORE_VALS(SV_TEXT(kid), SV_INT(at)), &e);
	if (st == NULL)
		return e;
	e = store_exec(c, st);
	if (e == CS_OK && store_changes(c) == 0)
		e = CS_ENOENT;
	return e;
}

enum cs_err store_key_set_retired(struct store_conn *c, const char *kid, int64_t at)
{
	return key_set_time(c, SQL_KEY_RETIRE, kid, at);
}

enum cs_err store_key_set_revoked(struct store_conn *c, const char *kid, int64_t at)
{
	return key_set_time(c, SQL_KEY_REVOKE, kid, at);
}
