/* store_user.h -- the SQL of the users table (migration 0001): the one way a
 * user row is made.  A login records what the IdP said; everything else (a
 * token exchange naming a subject) only makes sure the row exists. */
#ifndef CS_STORE_USER_H
#define CS_STORE_USER_H

#include <stdbool.h>
#include <stdint.h>
#include "cs_err.h"
#include "store.h"

struct store_user {
	const char *issuer, *subject;    /* the key: (issuer, subject) */
	const char *name, *email;        /* NULL when unknown; written only by a login */
	int64_t     now;                 /* created_at of a new row */
	/* A login: creates or updates the row with name, email and
	 * last_login_at = now.  Not a login: creates the row when missing, with
	 * name and email NULL and last_login_at 0, and leaves an existing row
	 * untouched. */
	bool        login;
};

/* Creates (or, for a login, updates) the user u; *id is its row id.
 * CS_EINVAL when issuer or subject is missing. */
enum cs_err store_user_put(struct store_conn *c, const struct store_user *u,
    int64_t *id) CS_MUST_CHECK;
/* The row id of (issuer, subject), read only; CS_ENOENT when there is none. */
enum cs_err store_user_find(struct store_conn *c, const char *issuer, const char *subject,
    int64_t *id) CS_MUST_CHECK;

#endif
