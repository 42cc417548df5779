/* login_pages.c -- the handlers of flow E (login_pages.h): GET /login,
 * GET /callback, POST /logout, and the redirect to sign-in for other pages.
 * They read the request and its cookies, call the login domain (login.h) and
 * answer; no SQL, no transaction, and no text of the IdP's reaches a page. */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "app.h"
#include "buf.h"
#include "form.h"
#include "login_pages.h"
#include "page_reply.h"

/* Frees a cookie value (a secret) after wiping it. */
static void cookie_free(char *v)
{
	if (v) {
		OPENSSL_cleanse(v, strlen(v));
		free(v);
	}
}

/* The cookie called name, or NULL when it is absent or unreadable. */
static char *cookie_or_null(const struct http_request *req, const char *name)
{
	char *v = NULL;
	return cookie_get(req->cookie, name, &v) == CS_OK ? v : NULL;
}

enum cs_err login_start(const struct http_request *req, struct http_reply *rep)
{
	const struct config *cfg = req->app->cfg;
	struct login_begin_in in = {
		.return_to = form_get(&req->params, "return_to"),
		.prompt = form_get(&req->params, "prompt"),
		.max_age = form_get(&req->params, "max_age"),
		.cookie_header = req->cookie, .now = req->now,
	};
	struct login_begin_out out = { .location = NULL };
	enum login_begin_outcome o = LOGIN_BEGIN__MAX;
	enum cs_err e;

	if ((e = login_begin(req->app, &in, &out, &o)) != CS_OK)
		goto out;
	switch (o) {
	case LOGIN_BEGUN:
		/* SECURITY: the state only counts in the browser that started the
		 * login: its own cookie, HttpOnly, SameSite=Lax (the IdP's redirect
		 * back is a top-level GET), __Host- and Secure on https. */
		if ((e = page_redirect(rep, out.location)) == CS_OK)
			e = page_set_cookie(rep, cfg, out.name, out.value, LOGIN_STATE_TTL);
		for (size_t i = 0; i < out.ndrop && e == CS_OK; i++)
			e = page_set_cookie(rep, cfg, out.drop[i], "", 0);
		break;
	case LOGIN_BEGIN_NO_IDP:
		e = reply_html_error(rep, 503, "Sign-in is not available yet",
		    "consentd cannot reach its identity provider right now. Try again in a minute.");
		break;
	case LOGIN_BEGIN_BAD_MAX_AGE:
		e = reply_html_error(rep, 400, "Bad request", "max_age is not a valid number.");
		break;
	default:
		e = CS_EINVAL;
		break;
	}
out:
	login_begin_out_clear(&out);
	return e;
}

/* What a failed sign-in says, in consentd's words (400 unless said). */
static const struct { int status; const char *title, *msg; } finish_fail[LOGIN_FINISH__MAX] = {
	[LOGIN_FINISH_NO_IDP] = { 503, "Sign-in is not available yet",
	    "consentd cannot reach its identity provider right now." },
	[LOGIN_FINISH_NO_STATE] = { 400, "Sign-in failed",
	    "The sign-in response has no state. Start again from the beginning." },
	[LOGIN_FINISH_UNKNOWN_STATE] = { 400, "Sign-in failed",
	    "This sign-in response is unknown or was already used. Start again from the beginning." },
	[LOGIN_FINISH_EXPIRED] = { 400, "Sign-in failed",
	    "This sign-in took too long and expired. Start again." },
	[LOGIN_FINISH_NO_BINDING] = { 400, "Sign-in failed",
	    "This sign-in was started in another browser or its cookie is missing. "
	    "Start again from the beginning." },
	[LOGIN_FINISH_BAD_BINDING] = { 400, "Sign-in failed",
	    "This sign-in's cookie could not be read. Start again from the beginning." },
	[LOGIN_FINISH_OTHER_BROWSER] = { 400, "Sign-in failed",
	    "This sign-in was started in another browser. Start again." },
	[LOGIN_FINISH_WRONG_ISSUER] = { 400, "Sign-in failed",
	    "The sign-in response did not come from the expected identity provider." },
	[LOGIN_FINISH_CANCELLED] = { 400, "Sign-in cancelled",
	    "You cancelled the sign-in at your identity provider, so you are not "
	    "signed in. Start again when you are ready." },
	[LOGIN_FINISH_IDP_ERROR] = { 400, "Sign-in failed",
	    "Your identity provider could not sign you in. Start again; if it keeps failing, "
	    "ask your administrator." },
	[LOGIN_FINISH_NO_CODE] = { 400, "Sign-in failed", "The sign-in response has no code." },
	[LOGIN_FINISH_EXCHANGE_FAILED] = { 400, "Sign-in failed",
	    "The identity provider did not accept this sign-in. Start again." },
	[LOGIN_FINISH_UNVERIFIED] = { 400, "Sign-in failed",
	    "The identity provider's answer could not be verified." },
	[LOGIN_FINISH_NO_SUBJECT] = { 400, "Sign-in failed",
	    "The identity provider did not say who you are." },
};

enum cs_err login_callback(const struct http_request *req, struct http_reply *rep)
{
	const struct config *cfg = req->app->cfg;
	struct login_finish_in in = {
		.state = form_get(&req->params, "state"),
		.code = form_get(&req->params, "code"),
		.iss = form_get(&req->params, "iss"),
		.error = form_get(&req->params, "error"),
		.now = req->now,
	};
	struct login_finish_out out = { .return_to = NULL };
	enum login_finish_outcome o = LOGIN_FINISH__MAX;
	char *old = cookie_or_null(req, session_cookie_name(cfg));
	enum cs_err e;

	in.cookie_header = req->cookie;
	in.old_session = old;
	if ((e = login_finish(req->app, &in, &out, &o)) != CS_OK)
		goto out;
	if (o != LOGIN_FINISHED) {
		e = o < LOGIN_FINISH__MAX && finish_fail[o].msg ? reply_html_error(rep,
		    finish_fail[o].status, finish_fail[o].title, finish_fail[o].msg) : CS_EINVAL;
	} else if ((e = page_redirect(rep, out.return_to)) == CS_OK) {
		e = page_set_cookie(rep, cfg, session_cookie_name(cfg), out.sid, -1);
	}
	/* The start's cookie is spent whatever the outcome. */
	if (e == CS_OK && out.name[0] != '\0')
		e = page_set_cookie(rep, cfg, out.name, "", 0);
out:
	cookie_free(old);
	login_finish_out_clear(&out);
	return e;
}

enum cs_err login_require(const struct http_request *req, struct http_reply *rep,
    const char *return_to, struct session *s, bool *have)
{
	struct store_conn *c = store_conn(req->app->store);
	struct buf loc;
	enum cs_err e;
	*have = false;
	if (c == NULL)
		return CS_EDB;
	e = session_from_cookie(c, req->app->cfg, req->cookie, req->now, s);
	if (e == CS_OK) {
		*have = true;
		return CS_OK;
	}
	if (e != CS_ENOENT)
		return e;
	/* A return_to /login would refuse (too long) would strand the person. */
	if (strlen(return_to) > LOGIN_RETURN_TO_MAX)
		return_to = "/me";
	buf_init(&loc, 4096);
	e = buf_puts(&loc, "/login");
	if (e == CS_OK)
		e = form_url_param(&loc, "return_to", return_to);
	if (e == CS_OK)
		e = page_redirect(rep, loc.data);
	buf_clear(&loc);
	return e;
}

enum cs_err login_logout(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	struct session s;
	struct store_conn *c = store_conn(app->store);
	char *idp_logout = NULL;
	enum cs_err e;

	memset(&s, 0, sizeof s);
	if (c == NULL)
		return CS_EDB;
	/* The front page says what ended (meta_index): "signed-out" when the
	 * browser went through the IdP's sign-out, "signed-out-here" otherwise. */
	e = session_from_cookie(c, cfg, req->cookie, req->now, &s);
	if (e == CS_ENOENT) {
		e = page_redirect(rep, "/?state=signed-out-here");
		goto out;
	} else if (e != CS_OK) {
		goto out;
	}
	if (!session_csrf_ok(&s, form_get(&req->params, "csrf"))) {
		e = reply_html_error(rep, 403, "Not allowed",
		    "This sign-out form is stale or did not come from this site. Reload the page and try again.");
		goto out;
	}
	if ((e = login_end(app, s.id_hash, &idp_logout)) != CS_OK)
		goto out;
	e = page_redirect(rep, idp_logout ? idp_logout : "/?state=signed-out-here");
	if (e == CS_OK)
		e = page_set_cookie(rep, cfg, session_cookie_name(cfg), "", 0);
out:
	free(idp_logout);
	session_clear(&s);
	return e;
}
