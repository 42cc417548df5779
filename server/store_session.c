/* store_session.c -- the SQL of flow E (migrations 0002, 0017): the login
 * states that were used, and the sessions logins end in.  The rules
 * (cookies, lifetimes, admin powers) live in login.c and session.c; this file
 * only moves rows of hashes, and never builds SQL from input. */
#include <stdlib.h>
#include <string.h>

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
/* A used state: the insert is the check (a second one changes no row). */
static const char SQL_LOGIN_USED_PUT[] =
    "INSERT INTO login_used (state_hash, expires_at) VALUES (?1, ?2) "
    "ON CONFLICT (state_hash) DO NOTHING";
static const char SQL_LOGIN_USED_GET[] =
    "SELECT 1 FROM login_used WHERE state_hash = ?1";
static const char SQL_PURGE_LOGIN_USED[] =
    "DELETE FROM login_used WHERE expires_at <= ?1";
/* login_states is no longer written (migration 0017 keeps it for a node of
 * the previous release during a rolling upgrade): its last rows expire. */
static const char SQL_PURGE_LOGINS[] =
    "DELETE FROM login_states WHERE expires_at <= ?1";
static const char SQL_PURGE_SESSIONS[] =
    "DELETE FROM sessions WHERE last_seen_at < ?1 - ?2 OR created_at < ?1 - ?3";

/* --- sessions ---------------------------------------------------------- */

/* The CSRF token goes straight into its array: no heap copy to wipe. */
static enum cs_err read_session(struct store_stmt *st, void *row)
{
	struct store_session *s = row;
	enum cs_err e;
	const unsigned char *csrf;
	int csrf_len;
	s->user_id = store_col_int64(st, 0);
	if ((e = store_cols_text(st, &s->block, STORE_TEXT_COLS({ 1, &s->issuer, true },
	    { 2, &s->subject, true }, { 3, &s->name, false }, { 4, &s->email, false }))) != CS_OK)
		return e;
	csrf = store_col_raw_text(st, 5);
	csrf_len = store_col_bytes(st, 5);
	if (csrf == NULL || csrf_len < 0 || (size_t)csrf_len >= sizeof s->csrf)
		return CS_EDB;
	memcpy(s->csrf, csrf, (size_t)csrf_len);
	s->csrf[csrf_len] = '\0';
	s->created_at = store_col_int64(st, 6);
	s->last_seen_at = store_col_int64(st, 7);
	s->auth_time = store_col_int64(st, 8);
	s->admin_claim = store_col_int(st, 9) != 0;
	return CS_OK;
}

static const struct store_row_type session_rows =
    STORE_ROW_BLOCK_WIPED(struct store_session, read_session);

STORE_ROW_CLEAR_FN(struct store_session, session_rows, store_session_clear)

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
	return store_get(c, SQL_SESSION_GET, STORE_VALS(SV_BLOB(id_hash, 32)), &session_rows, out);
}

enum cs_err store_session_touch(struct store_conn *c, const unsigned char id_hash[32], int64_t now)
{
	return store_run(c, SQL_SESSION_TOUCH, STORE_VALS(SV_BLOB(id_hash, 32), SV_INT(now)));
}

enum cs_err store_session_delete(struct store_conn *c, const unsigned char id_hash[32])
{
	return store_run(c, SQL_SESSION_DELETE, STORE_VALS(SV_BLOB(id_hash, 32)));
}

/* --- used login states ------------------------------------------------ */

enum cs_err store_login_used_get(struct store_conn *c, const unsigned char state_hash[32])
{
	enum cs_err e;
	struct store_stmt *st = store_query(c, SQL_LOGIN_USED_GET,
	    STORE_VALS(SV_BLOB(state_hash, 32)), &e);
	if (st == NULL)
		return e;
	e = store_step(c, st);
	store_stmt_done(st);
	return e;
}

enum cs_err store_login_used_put(struct store_conn *c, const unsigned char state_hash[32],
    int64_t expires_at)
{
	enum cs_err e = store_run(c, SQL_LOGIN_USED_PUT, STORE_VALS(SV_BLOB(state_hash, 32),
	    SV_INT(expires_at)));
	if (e != CS_OK)
		return e;
	return store_changes(c) == 1 ? CS_OK : CS_EEXIST;
}

/* --- login states and sessions together ------------------------------ */

enum cs_err store_purge_expired(struct store_conn *c, int64_t now, int64_t idle, int64_t absolute)
{
	enum cs_err e;
	if ((e = store_run(c, SQL_PURGE_LOGIN_USED, STORE_VALS(SV_INT(now)))) != CS_OK ||
	    (e = store_run(c, SQL_PURGE_LOGINS, STORE_VALS(SV_INT(now)))) != CS_OK)
		return e;
	return store_run(c, SQL_PURGE_SESSIONS, STORE_VALS(SV_INT(now), SV_INT(idle),
	    SV_INT(absolute)));
}
