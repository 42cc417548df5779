/* login_cookie.h -- a started sign-in's state (the hash of its state, its
 * nonce, PKCE verifier, return_to, max_age and expiry), sealed into a cookie
 * of the browser that started it (issue #28).  Nothing about a sign-in is
 * stored at consentd before the IdP has answered, so no number of strangers'
 * starts can fill anything another person's sign-in needs.  This module only
 * names, seals and opens those cookies; login.c holds the rules. */
#ifndef CS_LOGIN_COOKIE_H
#define CS_LOGIN_COOKIE_H

#include <stddef.h>
#include <stdint.h>
#include "config.h"
#include "cs_err.h"
#include "seal.h"
#include "session.h"

/* The longest return_to /login accepts (bytes, decoded); every link to /login
 * that carries one must fit (admin_pages.c shortens to the bare path). */
#define LOGIN_RETURN_TO_MAX 512
/* Each start has its own cookie, named by the first LOGIN_COOKIE_ID_LEN hex
 * characters of SHA-256(state): several tabs may sign in at once. */
#define LOGIN_COOKIE_ID_LEN 12
#define LOGIN_COOKIE_NAME_MAX 40     /* "__Host-consentd-login-" + the id + NUL */
/* At most this many starts are kept in one browser: a start beyond them
 * deletes the oldest, so that the browser's Cookie header (COOKIE_MAX_HEADER)
 * always has room for the session cookie. */
#define LOGIN_COOKIES_MAX 4
/* The value: base64url of the sealed state, at most 900 characters. */
#define LOGIN_COOKIE_VALUE_MAX 900

struct login_cookie {            /* caller-owned; wipe with login_cookie_clear() */
	unsigned char state_hash[32];                /* SHA-256 of the state sent to the IdP */
	char    nonce[SESSION_TOKEN_LEN + 1];
	char    verifier[SESSION_TOKEN_LEN + 1];     /* the PKCE code_verifier */
	char    return_to[LOGIN_RETURN_TO_MAX + 1];
	int64_t max_age;                             /* -1 when none was asked */
	int64_t expires_at;                          /* UTC seconds */
};
void login_cookie_clear(struct login_cookie *lc);   /* NULL-safe; wipes */

/* What every login cookie's name begins with: "__Host-consentd-login-" when
 * the public URL is https (a __Host- cookie is Secure, Path=/, host-only),
 * "consentd_login_" on a plain-http development URL. */
const char *login_cookie_prefix(const struct config *cfg);
/* The name of the cookie of the start whose state has this SHA-256. */
void login_cookie_name(const struct config *cfg, const unsigned char state_hash[32],
    char out[LOGIN_COOKIE_NAME_MAX]);

/* Seals lc at now for the cookie called name (the name is bound as
 * associated data) under the key derived from the master key for the day of
 * now ("login-state <day>"); *value is malloc'd base64url of at most
 * LOGIN_COOKIE_VALUE_MAX characters.  CS_EINVAL for a state that is not well
 * formed (lengths, characters).  *value written only on CS_OK. */
enum cs_err login_cookie_seal(const struct master_key *mk, const char *name,
    const struct login_cookie *lc, int64_t now, char **value) CS_MUST_CHECK;
/* Opens the value (len bytes, not necessarily NUL-terminated) of the cookie
 * called name, sealed on the day of now, the day before or the day after (a
 * node whose clock is behind).  CS_EINVAL when it is not base64url of a sealed state's length,
 * CS_ECRYPTO when it does not verify (altered, another name, another master
 * key), CS_EINVAL when its plaintext is not a state (login_cookie_parse).
 * Expiry is the caller's to check.  *out written only on CS_OK. */
enum cs_err login_cookie_open(const struct master_key *mk, const char *name,
    const char *value, size_t len, int64_t now, struct login_cookie *out) CS_MUST_CHECK;
/* Parses a sealed state's plaintext (version 1: a version byte, expires_at and
 * max_age as 8-byte big-endian integers, the 32-byte state hash, the 43-byte
 * nonce and verifier, then return_to to the end).  CS_EINVAL unless every
 * field has its length and characters.  Only login_cookie_open and the fuzzer
 * call it.  *out written only on CS_OK. */
enum cs_err login_cookie_parse(const unsigned char *pt, size_t n,
    struct login_cookie *out) CS_MUST_CHECK;

/* The login cookies of a Cookie header to delete before one more is set, so
 * that the browser is left holding fewer than LOGIN_COOKIES_MAX: those that
 * do not open or have expired at now first, then the soonest to expire.
 * Looks at the first LOGIN_COOKIES_SEEN of them.  Writes up to
 * LOGIN_COOKIES_SEEN names to drop and their count to *ndrop (0 on an
 * unreadable or absent header). */
#define LOGIN_COOKIES_SEEN 16
void login_cookie_stale(const struct master_key *mk, const struct config *cfg,
    const char *cookie_header, int64_t now,
    char drop[LOGIN_COOKIES_SEEN][LOGIN_COOKIE_NAME_MAX], size_t *ndrop);

#endif
