/* store_session.h -- the SQL of flow E (migrations 0002, 0012): the login
 * states a login starts with and the sessions it ends in.  login.c and
 * session.c own the rules; only hashes of ids and states reach the store. */
#ifndef CS_STORE_SESSION_H
#define CS_STORE_SESSION_H

#include <stdint.h>
#include "cs_err.h"
#include "store.h"

struct store_session {           /* caller-owned; release with store_session_clear() */
	char   *block;               /* the one allocation issuer .. email point into
	                                (store_cols_text): freed whole, never a field */
	int64_t user_id;
	char   *issuer, *subject, *name, *email;
	char    csrf[44];
	int64_t created_at, last_seen_at, auth_time;
	int     admin_claim;
};
void store_session_clear(struct store_session *s);    /* NULL-safe; wipes */
/* A new session: created_at and last_seen_at are now. */
struct store_session_new {
	int64_t     user_id;
	const char *csrf;
	int64_t     now, auth_time;
	int         admin_claim;
};
/* CS_EEXIST when a session already has this hash. */
enum cs_err store_session_insert(struct store_conn *c, const unsigned char id_hash[32],
    const struct store_session_new *s) CS_MUST_CHECK;
/* CS_ENOENT when no session has this hash. */
enum cs_err store_session_get(struct store_conn *c, const unsigned char id_hash[32],
    struct store_session *out) CS_MUST_CHECK;
enum cs_err store_session_touch(struct store_conn *c, const unsigned char id_hash[32],
    int64_t now) CS_MUST_CHECK;
enum cs_err store_session_delete(struct store_conn *c, const unsigned char id_hash[32]) CS_MUST_CHECK;

/* Read (store_login_state_take), its strings are one block that
 * store_login_state_clear wipes (nonce, code_verifier) and frees, never a
 * field.  Filled by a caller for an insert, block is NULL and the strings
 * stay the caller's: clearing it then touches none of them. */
struct store_login_state {       /* release with store_login_state_clear() when read */
	char         *block;         /* the one allocation nonce .. return_to point into, or NULL */
	unsigned char state_hash[32];
	unsigned char browser_hash[32];
	unsigned char addr_hash[32];     /* the client address it came from (login_client_key) */
	char   *nonce, *code_verifier, *return_to;
	int64_t max_age;             /* -1 when none was asked */
	int64_t created_at, expires_at;
};
void store_login_state_clear(struct store_login_state *s);   /* NULL-safe; wipes */
enum cs_err store_login_state_insert(struct store_conn *c,
    const struct store_login_state *s) CS_MUST_CHECK;

/* What store_login_state_admit did. */
enum store_login_admit {
	STORE_LOGIN_ADMITTED = 0,    /* inserted */
	STORE_LOGIN_ADDRESS_FULL,    /* its address already holds per_address live states */
	STORE_LOGIN_ALL_FULL,        /* all addresses together hold total live states */
	STORE_LOGIN_ADMIT__MAX
};
struct store_login_limits {
	int64_t now;                 /* a state is live while its expires_at > now */
	int64_t per_address, total;  /* each at least 1 */
	/* The browser_hash of the browser's earlier login (its login cookie), or
	 * NULL: those states can no longer finish (the new cookie replaces theirs),
	 * so they are deleted with the insert and do not count. */
	const unsigned char *replaces;
};
/* Inserts s unless s->addr_hash already holds lim->per_address live states or
 * all addresses together hold lim->total; the check and the insert share one
 * IMMEDIATE transaction (never call it inside one).  Expired states never count.
 * A refused state writes nothing.  On CS_OK *out says which, and *free_at is,
 * when refused, the expiry of the soonest of the states that filled the limit
 * (a place frees then), 0 when admitted. */
enum cs_err store_login_state_admit(struct store_conn *c, const struct store_login_state *s,
    const struct store_login_limits *lim, enum store_login_admit *out,
    int64_t *free_at) CS_MUST_CHECK;
/* Reads and deletes (single use) the state with this hash; CS_ENOENT if none. */
enum cs_err store_login_state_take(struct store_conn *c, const unsigned char state_hash[32],
    struct store_login_state *out) CS_MUST_CHECK;
/* Deletes expired login states and sessions idle or older than the limits. */
enum cs_err store_purge_expired(struct store_conn *c, int64_t now, int64_t idle,
    int64_t absolute) CS_MUST_CHECK;

#endif
