/* page_reply.c -- the answers HTML page handlers share (page_reply.h):
 * rendering through the template engine, redirects and cookies.  It must
 * never print raw HTML (only template.c writes pages) nor log a cookie. */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "app.h"
#include "form.h"
#include "page_reply.h"
#include "template.h"

enum cs_err page_render(struct http_reply *rep, int status, const char *tpl, json_t *ctx,
    const struct session *s)
{
	if (ctx == NULL)
		return CS_ENOMEM;                 /* the caller's json_pack failed */
	if (s != NULL) {
		json_t *u = json_pack("{s:s?, s:s?, s:s?}", "name", s->name, "subject", s->subject,
		    "email", s->email);
		if (u == NULL || json_object_set_new(ctx, "user", u) != 0 ||
		    json_object_set_new(ctx, "csrf", json_string(s->csrf)) != 0)
			return CS_ENOMEM;
	}
	buf_reset(&rep->body);
	rep->status = status;
	rep->content_type = "text/html; charset=utf-8";
	return template_render(tpl, ctx, &rep->body);
}

enum cs_err page_redirect(struct http_reply *rep, const char *location)
{
	rep->status = 303;
	rep->content_type = "text/plain; charset=utf-8";
	buf_reset(&rep->body);
	return reply_header(rep, "Location", location);
}

enum cs_err page_set_cookie(struct http_reply *rep, const struct config *cfg, const char *name,
    const char *value, int64_t max_age)
{
	char *c = NULL;
	enum cs_err e = cookie_format(cfg, name, value, max_age, &c);
	if (e == CS_OK)
		e = reply_header(rep, "Set-Cookie", c);
	if (c) {
		OPENSSL_cleanse(c, strlen(c));
		free(c);
	}
	return e;
}
