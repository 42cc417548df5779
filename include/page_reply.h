/* page_reply.h -- the shapes every HTML page handler answers with: a template
 * rendered with the signed-in person and their CSRF token, a 303 redirect and a
 * Set-Cookie (a URL's query parameters: form_url_param in form.h), and a
 * form POST's session and CSRF check.  Nothing here decides who may see
 * a page, and only that check reads the database (the session row). */
#ifndef CS_PAGE_REPLY_H
#define CS_PAGE_REPLY_H

#include <stdint.h>
#include <jansson.h>
#include "buf.h"
#include "config.h"
#include "http.h"
#include "session.h"

/* Renders a page template with a context that already has "title"; adds the
 * session's user and CSRF token as "user" and "csrf" when s is non-NULL. */
enum cs_err page_render(struct http_reply *rep, int status, const char *tpl, json_t *ctx,
    const struct session *s) CS_MUST_CHECK;
/* A 303 See Other to location, with an empty body. */
enum cs_err page_redirect(struct http_reply *rep, const char *location) CS_MUST_CHECK;
/* Adds a Set-Cookie (cookie_format's attributes; max_age < 0 a session
 * cookie, 0 deletes it); the formatted value is wiped after use. */
enum cs_err page_set_cookie(struct http_reply *rep, const struct config *cfg, const char *name,
    const char *value, int64_t max_age) CS_MUST_CHECK;

/* For a form POST of a signed-in person (a consent or approval decision, a
 * /me action): the session into *s, and the form's "csrf" checked against
 * it.  *ok false when rep already holds the answer: 401 saying signin_why
 * without a session, 403 for a stale or foreign form. */
#define PAGE_SIGNIN_AGENT_LINK \
	"Your session ended. Open the link from your agent again to sign in."
enum cs_err page_form_session(const struct http_request *req, struct http_reply *rep,
    struct store_conn *c, const char *signin_why, struct session *s, bool *ok) CS_MUST_CHECK;

#endif
