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

/* Each route's parameters by position (routes.c declares them in this order;
 * http_arg reads them).  /callback takes every one OpenID Connect and RFC 9207
 * define for a code response. */
enum login_pages_start_param { LOGIN_PAGES_START_RETURN_TO, LOGIN_PAGES_START_PROMPT,
	LOGIN_PAGES_START_MAX_AGE };
enum login_pages_callback_param { LOGIN_PAGES_CALLBACK_CODE, LOGIN_PAGES_CALLBACK_STATE,
	LOGIN_PAGES_CALLBACK_ISS, LOGIN_PAGES_CALLBACK_ERROR,
	LOGIN_PAGES_CALLBACK_ERROR_DESCRIPTION, LOGIN_PAGES_CALLBACK_ERROR_URI,
	LOGIN_PAGES_CALLBACK_SESSION_STATE };
enum login_pages_logout_param { LOGIN_PAGES_LOGOUT_CSRF };

/* GET /login: a 303 to the IdP with the login-binding cookie, or a 429 page
 * with Retry-After when too many logins are started and not finished. */
enum cs_err login_pages_start(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* GET /callback: the new session's cookie and a 303 to return_to, or a page
 * saying, in consentd's words, why the sign-in failed. */
enum cs_err login_pages_callback(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* POST /logout (the session when there is one, routes.c): ends it, then the
 * IdP's sign-out when it has one; without a session, back to the front page. */
enum cs_err login_pages_logout(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

#endif
