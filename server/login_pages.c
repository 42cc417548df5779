/* login_pages.c -- the handlers of flow E (login_pages.h): GET /login,
 * GET /callback and POST /logout (the redirect to sign-in other pages answer
 * with is their gate's, routes.c).
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

enum cs_err login_pages_start(const struct http_request *req, struct http_reply *rep)
{
	const struct config *cfg = req->app->cfg;
	struct login_begin_in in = {
		.return_to = http_arg_str(req, LOGIN_PAGES_START_RETURN_TO),
		.prompt = http_arg_str(req, LOGIN_PAGES_START_PROMPT),
		.max_age = http_arg_str(req, LOGIN_PAGES_START_MAX_AGE),
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

enum cs_err login_pages_callback(const struct http_request *req, struct http_reply *rep)
{
	const struct config *cfg = req->app->cfg;
	struct login_finish_in in = {
		.state = http_arg_str(req, LOGIN_PAGES_CALLBACK_STATE),
		.code = http_arg_str(req, LOGIN_PAGES_CALLBACK_CODE),
		.iss = http_arg_str(req, LOGIN_PAGES_CALLBACK_ISS),
		.error = http_arg_str(req, LOGIN_PAGES_CALLBACK_ERROR),
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

enum cs_err login_pages_logout(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	/* The router's optional session gate: NULL when nobody is signed in. */
	const struct session *s = req->auth.session;
	char *idp_logout = NULL;
	enum cs_err e;

	if (store_conn(app->store) == NULL)
		return CS_EDB;
	/* The front page says what ended (meta_index): "signed-out" when the
	 * browser went through the IdP's sign-out, "signed-out-here" otherwise. */
	if (s == NULL)
		return page_redirect(rep, "/?state=signed-out-here");
	if (!session_csrf_ok(s, http_arg_str(req, LOGIN_PAGES_LOGOUT_CSRF)))
		return reply_html_error(rep, 403, "Not allowed",
		    "This sign-out form is stale or did not come from this site. Reload the page and try again.");
	if ((e = login_end(app, s->id_hash, &idp_logout)) != CS_OK)
		goto out;
	e = page_redirect(rep, idp_logout ? idp_logout : "/?state=signed-out-here");
	if (e == CS_OK)
		e = page_set_cookie(rep, cfg, session_cookie_name(cfg), "", 0);
out:
	free(idp_logout);
	return e;
}
