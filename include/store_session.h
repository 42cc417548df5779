/* store_session.h -- the SQL of flow E (migrations 0002, 0017): the login
 * states that were used and the sessions logins end in.  login.c and
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

/* The states that signed someone in (migration 0017), by SHA-256, each kept
 * until expires_at so that its callback cannot be replayed.  A started login
 * itself is never stored (login_cookie.h). */
/* CS_OK when this state was used, CS_ENOENT when not. */
enum cs_err store_login_used_get(struct store_conn *c,
    const unsigned char state_hash[32]) CS_MUST_CHECK;
/* Records the state as used; CS_EEXIST when it was already (the insert is
 * the check, so two racing callbacks cannot both pass). */
enum cs_err store_login_used_put(struct store_conn *c, const unsigned char state_hash[32],
    int64_t expires_at) CS_MUST_CHECK;
/* Deletes used states past their expiry (and the previous release's expired
 * login_states rows), and sessions idle or older than the limits. */
enum cs_err store_purge_expired(struct store_conn *c, int64_t now, int64_t idle,
    int64_t absolute) CS_MUST_CHECK;

#endif
