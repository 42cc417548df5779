/* login_pages.h -- the browser side of flow E: /login, /callback, /logout, and
 * the redirect to sign-in other pages answer with.  Thin handlers over the
 * login domain (login.h): they read the request and its cookies, call it, and
 * turn its outcome into a page, a redirect and cookies. */
#ifndef CS_LOGIN_PAGES_H
#define CS_LOGIN_PAGES_H

#include <stdbool.h>
#include "http.h"
#include "login.h"
#include "session.h"

/* GET /login: a 303 to the IdP with the login-binding cookie, or a 429 page
 * with Retry-After when too many logins are started and not finished. */
enum cs_err login_start(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* GET /callback: the new session's cookie and a 303 to return_to, or a page
 * saying, in consentd's words, why the sign-in failed. */
enum cs_err login_callback(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* POST /logout: ends the session, then the IdP's sign-out when it has one. */
enum cs_err login_logout(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

/* For other page handlers: the request's live session, or a 303 to /login
 * that comes back to return_to (then *have is false and the reply is ready). */
enum cs_err login_require(const struct http_request *req, struct http_reply *rep,
    const char *return_to, struct session *s, bool *have) CS_MUST_CHECK;

#endif
