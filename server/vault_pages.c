/* vault_pages.c -- the vault's browser pages: the provider's answer at
 * /oauth/callback/{resource}.  A handler only: it reads the session and the
 * query, calls vault_finish_connect once and maps its outcome to a reply; it
 * opens no transaction, writes no audit entry, and never echoes the code. */
#include <stdlib.h>
#include <string.h>
#include "app.h"
#include "buf.h"
#include "form.h"
#include "session.h"
#include "vault_connect.h"
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
	struct session s;
	struct vault_finish f;
	struct store_conn *c = store_conn(app->store);
	char actor[300];
	const char *outcome;
	struct buf loc;
	enum cs_err e;
	memset(&s, 0, sizeof s);
	memset(&f, 0, sizeof f);
	buf_init(&loc, 4096);
	if (c == NULL)
		return CS_EDB;
	e = session_from_cookie(c, cfg, req->cookie, req->now, &s);
	if (e == CS_ENOENT) {
		e = reply_html_error(rep, 400, "Not connected",
		    "Your session ended while you were at the provider. Open the link from your agent again.");
		goto out;
	} else if (e != CS_OK) {
		goto out;
	}
	if ((e = str_fmt(actor, sizeof actor, "user:%s", s.subject)) != CS_OK)
		goto out;
	e = vault_finish_connect(app->vault, c, cfg,
	    &(struct vault_person){ s.user_id, s.id_hash, actor, req->now },
	    &(struct vault_callback){ req->captures[0], form_get(&req->params, "state"),
	    form_get(&req->params, "code"), form_get(&req->params, "iss"),
	    form_get(&req->params, "error") }, &f);
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
	session_clear(&s);
	return e;
}
