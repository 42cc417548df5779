/* login.h -- the browser side of flow E: /login, /callback, /logout, /me. */
#ifndef CS_LOGIN_H
#define CS_LOGIN_H
#include "http.h"
#include <jansson.h>
#include "session.h"

/* The longest return_to /login accepts (bytes, decoded); every link to /login
 * that carries one must fit (admin_pages.c shortens to the bare path). */
#define LOGIN_RETURN_TO_MAX 512
/* How long a started login may take, and its binding cookie lives: 300 s (it
 * was 600).  A person at the IdP's form needs a minute or two, and every
 * abandoned start holds one of its address's [login] max_pending_per_address
 * places until it expires, so a shorter life frees them sooner. */
#define LOGIN_STATE_TTL 300

/* Starts a login unless the client's address, or everyone together, already
 * has [login] max_pending_per_address / max_pending logins started and not
 * finished: then a 429 page with Retry-After, and nothing written, no cookie. */
enum cs_err login_start(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err login_callback(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err login_logout(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

/* For other page handlers: the request's live session, or a 303 to /login
 * that comes back to return_to (then *have is false and the reply is ready). */
enum cs_err login_require(const struct http_request *req, struct http_reply *rep,
    const char *return_to, struct session *s, bool *have) CS_MUST_CHECK;
/* The key login starts are counted under for a client address (the request's
 * remote_ip text): SHA-256 of the IPv4 address, of an IPv6 address's /64 (one
 * site or device gets a whole /64), or of the text itself when it does not
 * parse; an IPv4-mapped IPv6 address counts as its IPv4 address. */
void login_client_key(const char *ip, unsigned char out[32]);
/* Renders a page template with a context that already has "title"; adds the
 * session's user and CSRF token as "user" and "csrf" when s is non-NULL. */
enum cs_err page_render(struct http_reply *rep, int status, const char *tpl, json_t *ctx,
    const struct session *s) CS_MUST_CHECK;

#endif
