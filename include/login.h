/* login.h -- the browser side of flow E: /login, /callback, /logout, /me. */
#ifndef CS_LOGIN_H
#define CS_LOGIN_H
#include "http.h"
#include <jansson.h>
#include "session.h"

enum cs_err login_start(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err login_callback(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err login_logout(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

/* For other page handlers: the request's live session, or a 303 to /login
 * that comes back to return_to (then *have is false and the reply is ready). */
enum cs_err login_require(const struct http_request *req, struct http_reply *rep,
    const char *return_to, struct session *s, bool *have) CS_MUST_CHECK;
/* Renders a page template with a context that already has "title"; adds the
 * session's user and CSRF token as "user" and "csrf" when s is non-NULL. */
enum cs_err page_render(struct http_reply *rep, int status, const char *tpl, json_t *ctx,
    const struct session *s) CS_MUST_CHECK;

#endif
