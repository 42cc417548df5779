/* store_session.c -- the SQL of flow E (migrations 0002, 0012): login states,
 * admitted against their limits, and the sessions they end in.  The rules
 * (cookies, lifetimes, admin powers) live in login.c and session.c; this file
 * only moves rows of hashes, and never builds SQL from input. */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "store_priv.h"
#include "store_session.h"

static const char SQL_SESSION_INSERT[] =
    "INSERT INTO sessions (id_hash, user_id, csrf, created_at, last_seen_at, auth_time, "
    "admin_claim) VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6)";
static const char SQL_SESSION_GET[] =
    "SELECT s.user_id, u.issuer, u.subject, u.name, u.email, s.csrf, s.created_at, "
    "s.last_seen_at, s.auth_time, s.admin_claim FROM sessions s JOIN users u ON u.id = s.user_id "
    "WHERE s.id_hash = ?1";
static const char SQL_SESSION_TOUCH[] =
    "UPDATE sessions SET last_seen_at = ?2 WHERE id_hash = ?1";
static const char SQL_SESSION_DELETE[] =
    "DELETE FROM sessions WHERE id_hash = ?1";
static const char SQL_LOGIN_INSERT[] =
    "INSERT INTO login_states (state_hash, browser_hash, nonce, code_verifier, return_to, "
    "max_age, created_at, expires_at, addr_hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
static const char SQL_LOGIN_TAKE[] =
    "DELETE FROM login_states WHERE state_hash = ?1 RETURNING browser_hash, nonce, "
    "code_verifier, return_to, max_age, created_at, expires_at";
/* The live states (expires_at > now) of one address, and of all, counted
 * no further than the limit (?3, ?2), with the soonest expiry among them:
 * both walk an index (addr_hash, expires_at) or (expires_at), never the table.
 * The subquery is named (AS live): PostgreSQL 15 requires it. */
static const char SQL_LOGIN_LIVE_ADDR[] =
    "SELECT count(*), coalesce(min(expires_at), 0) FROM (SELECT expires_at FROM login_states "
    "WHERE addr_hash = ?1 AND expires_at > ?2 ORDER BY expires_at LIMIT ?3) AS live";
static const char SQL_LOGIN_LIVE_ALL[] =
    "SELECT count(*), coalesce(min(expires_at), 0) FROM (SELECT expires_at FROM login_states "
    "WHERE expires_at > ?1 ORDER BY expires_at LIMIT ?2) AS live";
static const char SQL_LOGIN_LIVE_BROWSER[] =
    "SELECT count(*) FROM login_states WHERE browser_hash = ?1 AND expires_at > ?2";
static const char SQL_LOGIN_DELETE_BROWSER[] =
    "DELETE FROM login_states WHERE browser_hash = ?1";
static const char SQL_PURGE_LOGINS[] =
    "DELETE FROM login_states WHERE expires_at <= ?1";
static const char SQL_PURGE_SESSIONS[] =
    "DELETE FROM sessions WHERE last_seen_at < ?1 - ?2 OR created_at < ?1 - ?3";

/* --- sessions ---------------------------------------------------------- */

void store_session_clear(struct store_session *s)
{
	if (s == NULL)
		return;
	free(s->block);
	OPENSSL_cleanse(s, sizeof *s);
}

enum cs_err store_session_insert(struct store_conn *c, const unsigned char id_hash[32],
    const struct store_session_new *s)
{
	if (s == NULL)
		return CS_EINVAL;
	return store_run(c, SQL_SESSION_INSERT, STORE_VALS(SV_BLOB(id_hash, 32),
	    SV_INT(s->user_id), SV_TEXT(s->csrf), SV_INT(s->now), SV_INT(s->auth_time),
	    SV_INT(s->admin_claim ? 1 : 0)));
}

enum cs_err store_session_get(struct store_conn *c, const unsigned char id_hash[32],
    struct store_session *out)
{
	enum cs_err e;
	const unsigned char *csrf;
	int csrf_len;
	struct store_session s;
	struct store_stmt *st = store_stmt(c, SQL_SESSION_GET);
	memset(&s, 0, sizeof s);
	if (st == NULL)
		return CS_EDB;
	if ((e = store_bind(st, STORE_VALS(SV_BLOB(id_hash, 32)))) != CS_OK ||
	    (e = store_step(c, st)) != CS_OK)
		goto out;
	s.user_id = store_col_int64(st, 0);
	if ((e = store_cols_text(st, &s.block, STORE_TEXT_COLS({ 1, &s.issuer, true },
	    { 2, &s.subject, true }, { 3, &s.name, false }, { 4, &s.email, false }))) != CS_OK)
		goto out;
	/* The CSRF token goes straight into its array: no heap copy to wipe. */
	csrf = store_col_raw_text(st, 5);
	csrf_len = store_col_bytes(st, 5);
	if (csrf == NULL || csrf_len < 0 || (size_t)csrf_len >= sizeof s.csrf) {
		e = CS_EDB;
		goto out;
	}
	memcpy(s.csrf, csrf, (size_t)csrf_len);
	s.csrf[csrf_len] = '\0';
	s.created_at = store_col_int64(st, 6);
	s.last_seen_at = store_col_int64(st, 7);
	s.auth_time = store_col_int64(st, 8);
	s.admin_claim = store_col_int(st, 9) != 0;
	*out = s;
	memset(&s, 0, sizeof s);
	e = CS_OK;
out:
	store_stmt_done(st);
	store_session_clear(&s);
	return e;
}

enum cs_err store_session_touch(struct store_conn *c, const unsigned char id_hash[32], int64_t now)
{
	return store_run(c, SQL_SESSION_TOUCH, STORE_VALS(SV_BLOB(id_hash, 32), SV_INT(now)));
}

enum cs_err store_session_delete(struct store_conn *c, const unsigned char id_hash[32])
{
	return store_run(c, SQL_SESSION_DELETE, STORE_VALS(SV_BLOB(id_hash, 32)));
}

/* --- login states ------------------------------------------------------ */

void store_login_state_clear(struct store_login_state *s)
{
	if (s == NULL)
		return;
	/* SECURITY: the nonce and the PKCE verifier are wiped before their block
	 * is freed.  A caller's insert row (block NULL) is the caller's own. */
	if (s->block != NULL) {
		if (s->nonce)
			OPENSSL_cleanse(s->nonce, strlen(s->nonce));
		if (s->code_verifier)
			OPENSSL_cleanse(s->code_verifier, strlen(s->code_verifier));
		free(s->block);
	}
	OPENSSL_cleanse(s, sizeof *s);
}

enum cs_err store_login_state_insert(struct store_conn *c, const struct store_login_state *s)
{
	return store_run(c, SQL_LOGIN_INSERT, STORE_VALS(SV_BLOB(s->state_hash, 32),
	    SV_BLOB(s->browser_hash, 32), SV_TEXT(s->nonce), SV_TEXT(s->code_verifier),
	    SV_TEXT(s->return_to), SV_INT(s->max_age), SV_INT(s->created_at),
	    SV_INT(s->expires_at), SV_BLOB(s->addr_hash, 32)));
}

/* Runs a counting statement already bound: *n = column 0, *soonest = column 1
 * when asked for. */
static enum cs_err login_count(struct store_conn *c, struct store_stmt *st, int64_t *n, int64_t *soonest)
{
	enum cs_err e = store_step(c, st);
	if (e == CS_OK) {
		*n = store_col_int64(st, 0);
		if (soonest != NULL)
			*soonest = store_col_int64(st, 1);
	} else if (e == CS_ENOENT) {
		e = CS_EDB;                   /* an aggregate always returns its row */
	}
	store_stmt_done(st);
	return e;
}

/* What login_live counted. */
struct login_counts {
	int64_t mine;                 /* live states of the browser being replaced */
	int64_t addr, addr_free;      /* the address's live states, the soonest expiry */
	int64_t all, all_free;        /* everyone's, likewise */
};

/* How many live states the address and everyone hold, each counted to at most
 * its limit plus n->mine; mine = the live states of browser hash replaces (0
 * for NULL).  The soonest expiry among each count goes to addr_free / all_free. */
static enum cs_err login_live(struct store_conn *c, const unsigned char addr_hash[32],
    const unsigned char *replaces, const struct store_login_limits *lim, struct login_counts *n)
{
	enum cs_err e;
	struct store_stmt *st;
	n->mine = 0;
	if (replaces != NULL) {
		if ((st = store_query(c, SQL_LOGIN_LIVE_BROWSER, STORE_VALS(SV_BLOB(replaces, 32),
		    SV_INT(lim->now)), &e)) == NULL)
			return e;
		if ((e = login_count(c, st, &n->mine, NULL)) != CS_OK)
			return e;
	}
	if ((st = store_query(c, SQL_LOGIN_LIVE_ADDR, STORE_VALS(SV_BLOB(addr_hash, 32),
	    SV_INT(lim->now), SV_INT(lim->per_address + n->mine)), &e)) == NULL)
		return e;
	if ((e = login_count(c, st, &n->addr, &n->addr_free)) != CS_OK)
		return e;
	if ((st = store_query(c, SQL_LOGIN_LIVE_ALL, STORE_VALS(SV_INT(lim->now),
	    SV_INT(lim->total + n->mine)), &e)) == NULL)
		return e;
	return login_count(c, st, &n->all, &n->all_free);
}

/* The verdict on counts, leaving out the browser's own states (n->mine). */
static enum store_login_admit login_verdict(const struct store_login_limits *lim,
    const struct login_counts *n, int64_t *free_at)
{
	if (n->addr - n->mine >= lim->per_address) {
		*free_at = n->addr_free;
		return STORE_LOGIN_ADDRESS_FULL;
	}
	if (n->all - n->mine >= lim->total) {
		*free_at = n->all_free;
		return STORE_LOGIN_ALL_FULL;
	}
	*free_at = 0;
	return STORE_LOGIN_ADMITTED;
}

enum cs_err store_login_state_admit(struct store_conn *c, const struct store_login_state *s,
    const struct store_login_limits *lim, enum store_login_admit *out, int64_t *free_at)
{
	enum cs_err e;
	enum store_login_admit v;
	struct login_counts n;
	int64_t at;
	struct store_stmt *st;

	if (lim->per_address < 1 || lim->total < 1)
		return CS_EINVAL;
	/* 1. A look without the write lock: a flood from one address is refused
	 *    here, by reads alone, so it cannot queue up in front of the writers
	 *    (token issuance).  The browser's own states do not count: they are
	 *    about to be replaced.  Its counts can only be too low (mine may lie at
	 *    another address), never too high, so it refuses only what step 2 would. */
	if ((e = login_live(c, s->addr_hash, lim->replaces, lim, &n)) != CS_OK)
		return e;
	v = login_verdict(lim, &n, &at);
	if (v != STORE_LOGIN_ADMITTED)
		goto done;
	/* 2. SECURITY: the decision that counts: the browser's earlier states go,
	 *    then count and insert in one IMMEDIATE transaction, so concurrent
	 *    starts cannot both take the last place.  Refused: rolled back, so a
	 *    refused start has written (and deleted) nothing. */
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if (lim->replaces != NULL) {
		if ((st = store_stmt(c, SQL_LOGIN_DELETE_BROWSER)) == NULL) {
			e = CS_EDB;
			goto fail;
		}
		if ((e = store_bind(st, STORE_VALS(SV_BLOB(lim->replaces, 32)))) != CS_OK) {
			store_stmt_done(st);
			goto fail;
		}
		if ((e = store_exec(c, st)) != CS_OK)
			goto fail;
	}
	if ((e = login_live(c, s->addr_hash, NULL, lim, &n)) != CS_OK)   /* mine = 0 */
		goto fail;
	v = login_verdict(lim, &n, &at);
	if (v != STORE_LOGIN_ADMITTED) {
		store_rollback(c);
		goto done;
	}
	if ((e = store_login_state_insert(c, s)) != CS_OK || (e = store_commit(c)) != CS_OK)
		goto fail;
done:
	*out = v;
	*free_at = at;
	return CS_OK;
fail:
	store_rollback(c);
	return e;
}

enum cs_err store_login_state_take(struct store_conn *c, const unsigned char state_hash[32],
    struct store_login_state *out)
{
	enum cs_err e;
	unsigned char *bh = NULL;
	size_t bhlen = 0;
	struct store_login_state s;
	struct store_stmt *st = store_stmt(c, SQL_LOGIN_TAKE);
	memset(&s, 0, sizeof s);
	if (st == NULL)
		return CS_EDB;
	if ((e = store_bind(st, STORE_VALS(SV_BLOB(state_hash, 32)))) != CS_OK ||
	    (e = store_step(c, st)) != CS_OK)
		goto out;
	if ((e = store_col_blob(st, 0, &bh, &bhlen)) != CS_OK ||
	    (e = store_cols_text(st, &s.block, STORE_TEXT_COLS({ 1, &s.nonce, true },
	    { 2, &s.code_verifier, true }, { 3, &s.return_to, true }))) != CS_OK)
		goto out;
	if (bhlen != 32) {
		e = CS_EDB;
		goto out;
	}
	memcpy(s.state_hash, state_hash, 32);
	memcpy(s.browser_hash, bh, 32);
	s.max_age = store_col_int64(st, 4);
	s.created_at = store_col_int64(st, 5);
	s.expires_at = store_col_int64(st, 6);
	/* Finish the statement so the DELETE really happens (RETURNING runs it). */
	if ((e = store_step(c, st)) != CS_ENOENT) {
		e = e == CS_OK ? CS_EDB : e;
		goto out;
	}
	*out = s;
	memset(&s, 0, sizeof s);
	e = CS_OK;
out:
	store_stmt_done(st);
	free(bh);
	store_login_state_clear(&s);
	return e;
}

/* --- login states and sessions together ------------------------------ */

enum cs_err store_purge_expired(struct store_conn *c, int64_t now, int64_t idle, int64_t absolute)
{
	enum cs_err e;
	struct store_stmt *st = store_query(c, SQL_PURGE_LOGINS, STORE_VALS(SV_INT(now)), &e);
	if (st == NULL)
		return e;
	if ((e = store_exec(c, st)) != CS_OK)
		return e;
	return store_run(c, SQL_PURGE_SESSIONS, STORE_VALS(SV_INT(now), SV_INT(idle),
	    SV_INT(absolute)));
}
