/* vault_pages.c -- the vault's browser pages: the provider's answer at
 * /oauth/callback/{resource}, and the API key page /me/consents/{id}/key.  A handler only: it takes the session its gate
 * found (routes.c) and the query, calls vault_finish_connect once and maps its outcome to a reply; it
 * opens no transaction, writes no audit entry, and never echoes the code. */
#include <stdlib.h>
#include <string.h>
#include "app.h"
#include "authorize_pages.h"
#include "buf.h"
#include "consent.h"
#include "form.h"
#include "session.h"
#include "pages.h"
#include "page_reply.h"
#include "vault_connect.h"
#include "vault_key.h"
#include "vault_pages.h"

/* The done page's ?outcome= for a connection that did not go live; NULL when
 * it did (the page then says what the stored request says). */
static const char *done_outcome(enum vault_connect_outcome o)
{
	switch (o) {
	case VAULT_CANCELLED: return "cancelled";
	case VAULT_TOO_MUCH:  return "too_much";
	case VAULT_FAILED:    return "failed";
	case VAULT_CHANGED:   return "changed";
	default:              return NULL;
	}
}

enum cs_err vault_pages_callback(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	/* The router's callback gate: the session the connection began in. */
	const struct session *s = req->auth.session;
	struct vault_finish f;
	struct store_conn *c = store_conn(app->store);
	const char *outcome;
	struct buf loc;
	enum cs_err e;
	memset(&f, 0, sizeof f);
	buf_init(&loc, 4096);
	if (c == NULL)
		return CS_EDB;
	e = vault_finish_connect(app->vault, c, cfg,
	    &(struct vault_person){ s->user_id, s->id_hash, req->auth.actor, req->now },
	    &(struct vault_callback){ req->captures[0],
	    http_arg_str(req, VAULT_PAGES_CALLBACK_STATE), http_arg_str(req, VAULT_PAGES_CALLBACK_CODE),
	    http_arg_str(req, VAULT_PAGES_CALLBACK_ISS), http_arg_str(req, VAULT_PAGES_CALLBACK_ERROR) },
	    &f);
	if (e != CS_OK)
		goto out;
	if (f.outcome == VAULT_BAD_STATE || f.request_id == NULL) {
		e = reply_html_error(rep, 400, "Not connected", f.why ? f.why :
		    "This answer from the provider is unknown, was already used, or belongs to another session.");
		goto out;
	}
	/* SECURITY: answer with a 303 to a URL without the code. */
	outcome = done_outcome(f.outcome);
	if ((e = buf_printf(&loc, "/consent/%s/done", f.request_id)) != CS_OK ||
	    (outcome != NULL && (e = buf_printf(&loc, "?outcome=%s", outcome)) != CS_OK))
		goto out;
	rep->status = 303;
	rep->content_type = "text/plain; charset=utf-8";
	e = reply_header(rep, "Location", loc.data);
out:
	buf_clear(&loc);
	vault_finish_clear(&f);
	return e;
}

static enum cs_err key_not_found(struct http_reply *rep)
{
	return reply_html_error(rep, 404, "No such connection",
	    "There is no consent of yours with an API key here. See your consents on /me.");
}

enum cs_err vault_pages_key_show(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct session *s = req->auth.session;     /* the router's session gate */
	struct store_conn *c = store_conn(app->store);
	enum vault_key_outcome o;
	struct consent k;
	bool stored = false;
	json_t *ctx = NULL;
	enum cs_err e;
	memset(&k, 0, sizeof k);
	if (c == NULL)
		return CS_EDB;
	if ((e = vault_key_status(c, app->cfg, s->user_id, req->captures[0], req->now, &k, &stored,
	    &o)) != CS_OK)
		return e;
	if (o != VAULT_KEY_STORED)
		return key_not_found(rep);
	/* SECURITY: whether a key is stored, never the key. */
	ctx = json_pack("{s:s, s:s, s:s, s:s, s:b}", "title", "API key", "id", k.id,
	    "agent", pages_agent_name(app->cfg, k.agent),
	    "resource", pages_resource_name(app->cfg, k.resource), "stored", stored);
	e = page_render(rep, 200, "vault_key.html", ctx, s);
	json_decref(ctx);
	consent_clear(&k);
	return e;
}

enum cs_err vault_pages_key_store(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct session *s = req->auth.session;     /* the router's session form gate */
	struct store_conn *c = store_conn(app->store);
	enum vault_key_outcome o = VAULT_KEY_NOT_FOUND;
	char back[256];
	enum cs_err e;
	if (c == NULL)
		return CS_EDB;
	e = vault_key_store(app->vault, c, app->cfg,
	    &(struct vault_person){ s->user_id, s->id_hash, req->auth.actor, req->now },
	    req->captures[0], http_arg_str(req, VAULT_PAGES_KEY_KEY), &o);
	if (e != CS_OK)
		return e;
	switch (o) {
	case VAULT_KEY_STORED:
	case VAULT_KEY_REPLACED:
		break;
	case VAULT_KEY_INVALID:
		return reply_html_error(rep, 400, "Key not stored", "A key is 1 to 4096 visible "
		    "characters, without spaces. Nothing was stored; go back and enter it again.");
	case VAULT_KEY_NOT_FOUND:
	case VAULT_KEY__MAX:
		return key_not_found(rep);
	}
	/* An MCP client's sign-in whose consent waited for this key goes back to
	 * the client now (issue #30). */
	struct consent k;
	bool sent = false;
	if ((e = consent_get(c, req->captures[0], req->now, &k)) != CS_OK)
		return e;
	if (k.request_id != NULL)
		e = authorize_pages_continue(req, rep, k.request_id, &sent);
	consent_clear(&k);
	if (e != CS_OK || sent)
		return e;
	if ((e = str_fmt(back, sizeof back, "/me/consents/%s/key", req->captures[0])) != CS_OK)
		return e;
	rep->status = 303;
	rep->content_type = "text/plain; charset=utf-8";
	return reply_header(rep, "Location", back);
}
