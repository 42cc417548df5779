/* session.h -- browser sessions and CSRF tokens.  A session id is 256 random
 * bits that live only in the browser's cookie; the database keeps its SHA-256.
 * Nothing here ever writes a session id or CSRF token to a log. */
#ifndef CS_SESSION_H
#define CS_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"
#include "config.h"
#include "store.h"
#include "seal.h"                     /* sha256_bytes, sha256_str (were here) */

#define SESSION_TOKEN_LEN 43          /* base64url of 32 random bytes */
#define COOKIE_MAX_HEADER 8192

/* Cookie names: "__Host-" names need Secure, which a plain-http development
 * URL (http://127.0.0.1) cannot have; there the documented names are used. */
const char *session_cookie_name(const struct config *cfg);   /* __Host-consentd | consentd_session */

/* Finds the cookie called name in a Cookie header.  CS_ENOENT when absent;
 * CS_EINVAL for a header that is malformed, oversized, or names the cookie
 * twice (a second copy is how cookie tossing works: refuse both).
 * *value is malloc'd (caller frees) and written only on CS_OK. */
enum cs_err cookie_get(const char *header, const char *name, char **value) CS_MUST_CHECK;

/* Calls each(name, name_len, value, value_len, arg) for every cookie of the
 * header whose name begins with prefix, in the header's order, until each
 * returns false; name and value point into header (value without its quotes).
 * CS_ENOENT for a NULL header, CS_EINVAL for one cookie_get refuses (oversized,
 * control characters). */
enum cs_err cookie_each(const char *header, const char *prefix,
    bool (*each)(const char *name, size_t nlen, const char *value, size_t vlen, void *arg),
    void *arg) CS_MUST_CHECK;

/* A Set-Cookie value: HttpOnly, SameSite=Lax, Path=/, Secure unless the public
 * URL is plain http; max_age < 0 omits Max-Age (session cookie), 0 deletes. */
enum cs_err cookie_format(const struct config *cfg, const char *name, const char *value,
    int64_t max_age, char **out) CS_MUST_CHECK;

/* 43 characters of base64url from 32 random bytes, NUL-terminated. */
enum cs_err random_token(char out[SESSION_TOKEN_LEN + 1]) CS_MUST_CHECK;

struct session {                       /* caller-owned; release with session_clear() */
	char    *strings;                    /* the one allocation issuer .. email point into:
	                                        session_clear frees it, never a field */
	unsigned char id_hash[32];
	int64_t  user_id;
	char    *issuer, *subject, *name, *email;
	char     csrf[SESSION_TOKEN_LEN + 1];
	int64_t  created_at, last_seen_at, auth_time;
	bool     admin_claim;                /* the ID token's admin claim matched at login */
};
void session_clear(struct session *s);   /* NULL-safe; wipes the CSRF token */

/* Creates a session for user_id; *id_out receives the new cookie value. */
enum cs_err session_create(struct store_conn *c, int64_t user_id, int64_t auth_time,
    bool admin_claim, int64_t now, char id_out[SESSION_TOKEN_LEN + 1]) CS_MUST_CHECK;
/* Reads the session named by the request's Cookie header.  CS_ENOENT when
 * there is none or it expired (idle or absolute; an expired row is deleted).
 * Touches last_seen_at. */
enum cs_err session_from_cookie(struct store_conn *c, const struct config *cfg,
    const char *cookie_header, int64_t now, struct session *out) CS_MUST_CHECK;
/* Ends the session with this id hash (logout, rotation).  Missing is fine. */
enum cs_err session_end(struct store_conn *c, const unsigned char id_hash[32]) CS_MUST_CHECK;
/* Constant-time comparison of a submitted CSRF token with the session's. */
bool session_csrf_ok(const struct session *s, const char *token);

#endif
