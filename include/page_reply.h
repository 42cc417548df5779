/* page_reply.h -- the shapes every HTML page handler answers with: a template
 * rendered with the signed-in person and their CSRF token, a 303 redirect and a
 * Set-Cookie (a URL's query parameters: form_url_param in form.h).  Nothing
 * here decides who may see a page (the route's gate does, routes.c) and
 * nothing reads the database. */
#ifndef CS_PAGE_REPLY_H
#define CS_PAGE_REPLY_H

#include <stdint.h>
#include <jansson.h>
#include "buf.h"
#include "config.h"
#include "http.h"
#include "session.h"

/* Renders a page template with a context that already has "title"; adds the
 * session's user and CSRF token as "user" and "csrf" when s is non-NULL.
 * ctx NULL (the json_pack that built it failed): CS_ENOMEM, rep untouched. */
enum cs_err page_render(struct http_reply *rep, int status, const char *tpl, json_t *ctx,
    const struct session *s) CS_MUST_CHECK;
/* A 303 See Other to location, with an empty body. */
enum cs_err page_redirect(struct http_reply *rep, const char *location) CS_MUST_CHECK;
/* Adds a Set-Cookie (cookie_format's attributes; max_age < 0 a session
 * cookie, 0 deletes it); the formatted value is wiped after use. */
enum cs_err page_set_cookie(struct http_reply *rep, const struct config *cfg, const char *name,
    const char *value, int64_t max_age) CS_MUST_CHECK;

#endif
