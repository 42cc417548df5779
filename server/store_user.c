/* store_user.c -- the SQL of the users table: the one statement that makes a
 * user row (store_user.h).  It never builds SQL from input, and only a login
 * writes what the IdP said about a person. */
#include <stddef.h>

#include <sqlite3.h>

#include "store_priv.h"
#include "store_user.h"

/* One statement for both kinds of caller: ?7 (a login, 1 or 0) decides whether
 * a row already there is updated.  When it is not, the conflict does nothing and
 * RETURNING yields no row, so the id is read by SQL_USER_ID.  ?7 <> 0, not ?7
 * alone: PostgreSQL takes no integer as a condition. */
static const char SQL_USER_PUT[] =
    "INSERT INTO users (issuer, subject, name, email, created_at, last_login_at) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (issuer, subject) DO UPDATE SET "
    "name = excluded.name, email = excluded.email, last_login_at = excluded.last_login_at "
    "WHERE ?7 <> 0 RETURNING id";
static const char SQL_USER_ID[] = "SELECT id FROM users WHERE issuer = ?1 AND subject = ?2";

static enum cs_err user_id(struct store_conn *c, const struct store_user *u, int64_t *id)
{
	enum cs_err e;
	sqlite3_stmt *st = store_stmt(c, SQL_USER_ID);
	if (st == NULL)
		return CS_EDB;
	if ((e = store_bind(st, STORE_VALS(SV_TEXT(u->issuer),
	    SV_TEXT(u->subject)))) == CS_OK &&
	    (e = store_step(c, st)) == CS_OK)
		*id = sqlite3_column_int64(st, 0);
	if (e == CS_ENOENT)
		e = CS_EDB;                   /* just inserted or there: cannot be missing */
	store_stmt_done(st);
	return e;
}

enum cs_err store_user_put(struct store_conn *c, const struct store_user *u, int64_t *id)
{
	enum cs_err e;
	int64_t v = 0;
	if (u == NULL || u->issuer == NULL || u->subject == NULL || id == NULL)
		return CS_EINVAL;
	sqlite3_stmt *st = store_stmt(c, SQL_USER_PUT);
	if (st == NULL)
		return CS_EDB;
	/* SECURITY: only a login records name, email and last login: a token
	 * exchange must never overwrite what the person's own login recorded. */
	if ((e = store_bind(st, STORE_VALS(SV_TEXT(u->issuer), SV_TEXT(u->subject),
	    SV_TEXT(u->login ? u->name : NULL), SV_TEXT(u->login ? u->email : NULL),
	    SV_INT(u->now), SV_INT(u->login ? u->now : 0), SV_INT(u->login ? 1 : 0)))) != CS_OK)
		goto out;
	e = store_step(c, st);
	if (e == CS_OK) {
		v = sqlite3_column_int64(st, 0);   /* the first step ran it whole */
	} else if (e == CS_ENOENT) {
		store_stmt_done(st);
		st = NULL;
		e = user_id(c, u, &v);    /* there already, left untouched */
	}
	if (e == CS_OK)
		*id = v;
out:
	store_stmt_done(st);
	return e;
}

enum cs_err store_user_find(struct store_conn *c, const char *issuer, const char *subject,
    int64_t *id)
{
	enum cs_err e;
	if (issuer == NULL || subject == NULL || id == NULL)
		return CS_EINVAL;
	sqlite3_stmt *st = store_stmt(c, SQL_USER_ID);
	if (st == NULL)
		return CS_EDB;
	if ((e = store_bind(st, STORE_VALS(SV_TEXT(issuer), SV_TEXT(subject)))) != CS_OK)
		return e;
	if ((e = store_step(c, st)) == CS_OK)
		*id = sqlite3_column_int64(st, 0);
	store_stmt_done(st);
	return e;
}
