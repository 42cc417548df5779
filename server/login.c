/* login.c -- OpenID Connect login for people (ARCHITECTURE.md flow E).
 * The browser only ever holds an opaque session cookie and a short-lived
 * login-binding cookie; the code is exchanged server-side and no token, code
 * or verifier is ever put in a page, a URL we build, or a log. */
#include <arpa/inet.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include "app.h"
#include "buf.h"
#include "form.h"
#include "login.h"
#include "oidc.h"
#include "template.h"
#include "log.h"

static enum cs_err redirect_to(struct http_reply *rep, const char *location)
{
	rep->status = 303;
	rep->content_type = "text/plain; charset=utf-8";
	buf_reset(&rep->body);
	return reply_header(rep, "Location", location);
}

static enum cs_err set_cookie(struct http_reply *rep, const struct config *cfg, const char *name,
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

enum cs_err page_render(struct http_reply *rep, int status, const char *tpl, json_t *ctx,
    const struct session *s)
{
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

/* base64url(SHA-256(verifier)) for PKCE S256. */
static void pkce_challenge(const char *verifier, char out[44])
{
	unsigned char h[32];
	sha256_str(verifier, h);
	EVP_EncodeBlock((unsigned char *)out, h, 32);      /* 44 chars with one '=' */
	for (char *p = out; *p; p++) {
		if (*p == '+') *p = '-';
		else if (*p == '/') *p = '_';
		else if (*p == '=') { *p = '\0'; break; }
	}
}

static enum cs_err append_param(struct buf *b, const char *name, const char *value)
{
	char *enc = NULL;
	enum cs_err e = pct_encode(value, &enc);
	if (e == CS_OK)
		e = buf_printf(b, "%c%s=%s", strchr(b->data ? b->data : "", '?') ? '&' : '?', name, enc);
	free(enc);
	return e;
}

void login_client_key(const char *ip, unsigned char out[32])
{
	static const char domain[] = "consentd login address";
	unsigned char a[16], in[sizeof domain + 1 + 16];
	size_t n = 0;
	memcpy(in, domain, sizeof domain);             /* with its NUL */
	if (inet_pton(AF_INET, ip, a) == 1) {
		n = 4;
	} else if (inet_pton(AF_INET6, ip, a) == 1) {
		static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
		if (memcmp(a, mapped, sizeof mapped) == 0) {
			memmove(a, a + 12, 4);
			n = 4;
		} else {
			n = 8;                                 /* the /64 */
		}
	}
	if (n == 0) {
		sha256_str(ip, out);                       /* "-": the address was not known */
		return;
	}
	in[sizeof domain] = (unsigned char)n;
	memcpy(in + sizeof domain + 1, a, n);
	/* Can't fail; if it ever did, all such clients would share one key. */
	if (EVP_Digest(in, sizeof domain + 1 + n, out, NULL, EVP_sha256(), NULL) != 1)
		memset(out, 0, 32);
}

/* Tells the operator, at most once a minute, that everyone is being refused. */
static void warn_all_full(const struct config *cfg, int64_t now)
{
	static _Atomic int64_t warned_at;
	int64_t last = atomic_load(&warned_at);
	if (now - last < 60 || !atomic_compare_exchange_strong(&warned_at, &last, now))
		return;
	log_msg(LOG_WARN, "%lld sign-ins are started and not finished ([login] max_pending); "
	    "refusing new ones until some finish or expire", (long long)cfg->login_max_pending);
}

/* The 429 for a refused start: a page for a person, and Retry-After. */
static enum cs_err too_many(struct http_reply *rep, enum store_login_admit why, int64_t wait)
{
	char msg[200], secs[24];
	int64_t minutes;
	enum cs_err e;
	if (wait < 1)
		wait = 1;
	if (wait > LOGIN_STATE_TTL)
		wait = LOGIN_STATE_TTL;
	minutes = (wait + 59) / 60;
	const char *lead = why == STORE_LOGIN_ADDRESS_FULL ?
	    "Too many sign-in attempts from your network." :
	    "Too many people are signing in right now.";
	if (minutes <= 1)
		snprintf(msg, sizeof msg, "%s Wait a minute and try again.", lead);
	else
		snprintf(msg, sizeof msg, "%s Wait %lld minutes and try again.", lead,
		    (long long)minutes);
	snprintf(secs, sizeof secs, "%lld", (long long)wait);
	if ((e = reply_html_error(rep, 429, "Too many sign-in attempts", msg)) != CS_OK)
		return e;
	return reply_header(rep, "Retry-After", secs);
}

enum cs_err login_start(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	const struct oidc_meta *m = oidc_meta(app->idp);
	const char *return_to = form_get(&req->params, "return_to");
	const char *prompt = form_get(&req->params, "prompt");
	const char *max_age = form_get(&req->params, "max_age");
	char state[SESSION_TOKEN_LEN + 1], nonce[SESSION_TOKEN_LEN + 1];
	char verifier[SESSION_TOKEN_LEN + 1], bind[SESSION_TOKEN_LEN + 1];
	char challenge[44], redirect_uri[600], *prev = NULL;
	unsigned char prev_hash[32];
	struct store_login_state ls;
	struct store_login_limits lim;
	enum store_login_admit admit;
	int64_t free_at = 0;
	struct store_conn *c;
	struct buf loc;
	enum cs_err e;

	buf_init(&loc, 8192);
	memset(&ls, 0, sizeof ls);
	memset(&lim, 0, sizeof lim);
	if (m == NULL) {
		e = reply_html_error(rep, 503, "Sign-in is not available yet",
		    "consentd cannot reach its identity provider right now. Try again in a minute.");
		goto out;
	}
	if ((c = store_conn(app->store)) == NULL) {
		e = CS_EDB;
		goto out;
	}
	ls.max_age = -1;
	int64_t v;
	if (http_param_int(req, "max_age", &v)) {       /* digits, checked by the router */
		if (v > 86400 * 365) {
			e = reply_html_error(rep, 400, "Bad request", "max_age is not a valid number.");
			goto out;
		}
		ls.max_age = v;
	}
	if ((e = random_token(state)) != CS_OK || (e = random_token(nonce)) != CS_OK ||
	    (e = random_token(verifier)) != CS_OK || (e = random_token(bind)) != CS_OK)
		goto out;
	pkce_challenge(verifier, challenge);
	sha256_str(state, ls.state_hash);
	sha256_str(bind, ls.browser_hash);
	login_client_key(req->remote_ip, ls.addr_hash);
	ls.nonce = nonce;
	ls.code_verifier = verifier;
	ls.return_to = (char *)(return_to ? return_to : "/me");
	ls.created_at = req->now;
	ls.expires_at = req->now + LOGIN_STATE_TTL;

	/* The whole answer first, so that after the state is stored nothing is
	 * left that could fail and strand it. */
	snprintf(redirect_uri, sizeof redirect_uri, "%s/callback", cfg->public_url);
	if ((e = buf_puts(&loc, m->authorization_endpoint)) != CS_OK ||
	    (e = append_param(&loc, "response_type", "code")) != CS_OK ||
	    (e = append_param(&loc, "client_id", cfg->oidc_client_id)) != CS_OK ||
	    (e = append_param(&loc, "redirect_uri", redirect_uri)) != CS_OK ||
	    (e = append_param(&loc, "scope", cfg->oidc_scopes)) != CS_OK ||
	    (e = append_param(&loc, "state", state)) != CS_OK ||
	    (e = append_param(&loc, "nonce", nonce)) != CS_OK ||
	    (e = append_param(&loc, "code_challenge", challenge)) != CS_OK ||
	    (e = append_param(&loc, "code_challenge_method", "S256")) != CS_OK)
		goto out;
	if (prompt && (e = append_param(&loc, "prompt", prompt)) != CS_OK)
		goto out;
	if (max_age && (e = append_param(&loc, "max_age", max_age)) != CS_OK)
		goto out;

	/* SECURITY: anonymous starts are bounded (issue #12): per address and in
	 * total, or a stream of GET /login fills the disk and stalls the writers.
	 * A browser starting again replaces its own earlier login (its cookie is
	 * about to be overwritten, so that state could never finish anyway). */
	lim.now = req->now;
	lim.per_address = cfg->login_max_pending_per_address;
	lim.total = cfg->login_max_pending;
	if (cookie_get(req->cookie, login_cookie_name(cfg), &prev) == CS_OK) {
		sha256_str(prev, prev_hash);
		lim.replaces = prev_hash;
	}
	if ((e = store_login_state_admit(c, &ls, &lim, &admit, &free_at)) != CS_OK)
		goto out;
	if (admit != STORE_LOGIN_ADMITTED) {
		if (admit == STORE_LOGIN_ALL_FULL)
			warn_all_full(cfg, req->now);
		e = too_many(rep, admit, free_at - req->now);
		goto out;
	}
	if ((e = redirect_to(rep, loc.data)) != CS_OK)
		goto out;
	/* SECURITY: the state only counts in the browser that started the login. */
	e = set_cookie(rep, cfg, login_cookie_name(cfg), bind, LOGIN_STATE_TTL);
out:
	OPENSSL_cleanse(verifier, sizeof verifier);
	OPENSSL_cleanse(bind, sizeof bind);
	if (prev) {
		OPENSSL_cleanse(prev, strlen(prev));
		free(prev);
	}
	buf_clear(&loc);
	return e;
}

static enum cs_err login_fail(struct http_reply *rep, const char *msg)
{
	return reply_html_error(rep, 400, "Sign-in failed", msg);
}

static bool claim_admin(const struct config *cfg, json_t *claims)
{
	json_t *v = json_object_get(claims, cfg->oidc_admin_claim);
	size_t i;
	json_t *el;
	/* SECURITY: exact equality only -- no substring or prefix match. */
	if (json_is_string(v))
		return strcmp(json_string_value(v), cfg->oidc_admin_value) == 0;
	if (json_is_array(v))
		json_array_foreach(v, i, el)
			if (json_is_string(el) && strcmp(json_string_value(el), cfg->oidc_admin_value) == 0)
				return true;
	return false;
}

enum cs_err login_callback(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	const struct oidc_meta *m = oidc_meta(app->idp);
	const char *state = form_get(&req->params, "state");
	const char *code = form_get(&req->params, "code");
	const char *iss = form_get(&req->params, "iss");
	const char *err = form_get(&req->params, "error");
	char *bind = NULL, *id_token = NULL, *old = NULL;
	json_t *claims = NULL;
	struct store_login_state ls;
	struct store_conn *c = store_conn(app->store);
	unsigned char h[32];
	char redirect_uri[600], why[128], sid[SESSION_TOKEN_LEN + 1];
	const char *aud[1];
	struct oidc_expect ex;
	int64_t user_id = 0;
	enum cs_err e;

	memset(&ls, 0, sizeof ls);
	if (c == NULL)
		return CS_EDB;
	if (m == NULL) {
		e = reply_html_error(rep, 503, "Sign-in is not available yet",
		    "consentd cannot reach its identity provider right now.");
		goto out;
	}
	if (state == NULL) {
		e = login_fail(rep, "The sign-in response has no state. Start again from the beginning.");
		goto out;
	}
	/* The state is single-use: taking it deletes it, whatever happens next. */
	sha256_str(state, h);
	e = store_login_state_take(c, h, &ls);
	if (e == CS_ENOENT) {
		e = login_fail(rep, "This sign-in response is unknown or was already used. "
		    "Start again from the beginning.");
		goto out;
	} else if (e != CS_OK) {
		goto out;
	}
	if (ls.expires_at <= req->now) {
		e = login_fail(rep, "This sign-in took too long and expired. Start again.");
		goto out;
	}
	/* SECURITY: the browser finishing the login must be the one that began it. */
	if (cookie_get(req->cookie, login_cookie_name(cfg), &bind) != CS_OK) {
		e = login_fail(rep, "This sign-in was started in another browser or its cookie is "
		    "missing. Start again from the beginning.");
		goto out;
	}
	sha256_str(bind, h);
	if (CRYPTO_memcmp(h, ls.browser_hash, 32) != 0) {
		e = login_fail(rep, "This sign-in was started in another browser. Start again.");
		goto out;
	}
	/* SECURITY: RFC 9207 -- the issuer is checked before anything else, even
	 * before an error from the provider is shown (mix-up defence). */
	if ((m->iss_parameter_supported && iss == NULL) ||
	    (iss != NULL && strcmp(iss, m->issuer) != 0)) {
		e = login_fail(rep, "The sign-in response did not come from the expected identity provider.");
		goto out;
	}
	if (err != NULL) {
		/* SECURITY: said in consentd's words; no text of the URL reaches the page
		 * (error_description is the IdP's, for developers, and may be anyone's). */
		bool cancelled = strcmp(err, "access_denied") == 0;
		e = reply_html_error(rep, 400, cancelled ? "Sign-in cancelled" : "Sign-in failed",
		    cancelled ? "You cancelled the sign-in at your identity provider, so you are not "
		    "signed in. Start again when you are ready." :
		    "Your identity provider could not sign you in. Start again; if it keeps failing, "
		    "ask your administrator.");
		goto out;
	}
	if (code == NULL) {
		e = login_fail(rep, "The sign-in response has no code.");
		goto out;
	}
	snprintf(redirect_uri, sizeof redirect_uri, "%s/callback", cfg->public_url);
	e = oidc_exchange_code(app->idp, cfg->oidc_client_id, cfg->oidc_client_secret,
	    cfg->oidc_token_endpoint_auth == AUTH_CLIENT_SECRET_POST ? OIDC_AUTH_POST : OIDC_AUTH_BASIC,
	    code, redirect_uri, ls.code_verifier, &id_token);
	if (e != CS_OK) {
		e = login_fail(rep, "The identity provider did not accept this sign-in. Start again.");
		goto out;
	}
	aud[0] = cfg->oidc_client_id;
	memset(&ex, 0, sizeof ex);
	ex.audiences = aud;
	ex.naudiences = 1;
	ex.client_id = cfg->oidc_client_id;
	ex.nonce = ls.nonce;
	ex.now = req->now;
	ex.max_age = ls.max_age;
	if (oidc_validate(app->idp, id_token, &ex, &claims, why, sizeof why) != CS_OK) {
		e = login_fail(rep, "The identity provider's answer could not be verified.");
		goto out;
	}
	json_t *subj = json_object_get(claims, cfg->oidc_subject_claim);
	if (!json_is_string(subj) || json_string_length(subj) == 0 || json_string_length(subj) > 255) {
		e = login_fail(rep, "The identity provider did not say who you are.");
		goto out;
	}
	json_t *at = json_object_get(claims, "auth_time");
	json_t *nm = json_object_get(claims, "name");
	json_t *em = json_object_get(claims, "email");
	if ((e = store_begin(c)) != CS_OK)
		goto out;
	e = store_user_upsert(c, m->issuer, json_string_value(subj),
	    json_is_string(nm) ? json_string_value(nm) : NULL,
	    json_is_string(em) ? json_string_value(em) : NULL, req->now, &user_id);
	/* SECURITY: a new session id at every login (no fixation); the old one ends. */
	if (e == CS_OK && cookie_get(req->cookie, session_cookie_name(cfg), &old) == CS_OK) {
		sha256_str(old, h);
		e = session_end(c, h);
	}
	if (e == CS_OK)
		/* SECURITY: admin powers are measured from the IdP's auth_time, never
		 * from this login (single sign-on logs people in without a password):
		 * an ID token without one records 0, which no admin check accepts. */
		e = session_create(c, user_id, json_is_integer(at) ? json_integer_value(at) : 0,
		    claim_admin(cfg, claims), req->now, sid);
	if (e == CS_OK)
		e = store_commit(c);
	if (e != CS_OK) {
		store_rollback(c);
		goto out;
	}
	if ((e = redirect_to(rep, ls.return_to)) != CS_OK ||
	    (e = set_cookie(rep, cfg, session_cookie_name(cfg), sid, -1)) != CS_OK ||
	    (e = set_cookie(rep, cfg, login_cookie_name(cfg), "", 0)) != CS_OK)
		goto out;
out:
	OPENSSL_cleanse(sid, sizeof sid);
	if (id_token) {
		OPENSSL_cleanse(id_token, strlen(id_token));
		free(id_token);
	}
	if (bind) {
		OPENSSL_cleanse(bind, strlen(bind));
		free(bind);
	}
	if (old) {
		OPENSSL_cleanse(old, strlen(old));
		free(old);
	}
	json_decref(claims);
	store_login_state_clear(&ls);
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
		e = append_param(&loc, "return_to", return_to);
	if (e == CS_OK)
		e = redirect_to(rep, loc.data);
	buf_clear(&loc);
	return e;
}

enum cs_err login_logout(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	const struct oidc_meta *m = oidc_meta(app->idp);
	struct session s;
	struct store_conn *c = store_conn(app->store);
	struct buf loc;
	char post_logout[600];
	enum cs_err e;

	memset(&s, 0, sizeof s);
	buf_init(&loc, 4096);
	if (c == NULL)
		return CS_EDB;
	/* The front page says what ended (meta_index): "signed-out" when the
	 * browser went through the IdP's sign-out, "signed-out-here" otherwise. */
	e = session_from_cookie(c, cfg, req->cookie, req->now, &s);
	if (e == CS_ENOENT) {
		e = redirect_to(rep, "/?state=signed-out-here");
		goto out;
	} else if (e != CS_OK) {
		goto out;
	}
	if (!session_csrf_ok(&s, form_get(&req->params, "csrf"))) {
		e = reply_html_error(rep, 403, "Not allowed",
		    "This sign-out form is stale or did not come from this site. Reload the page and try again.");
		goto out;
	}
	if ((e = session_end(c, s.id_hash)) != CS_OK)
		goto out;
	if (m != NULL && m->end_session_endpoint != NULL) {
		/* SECURITY: RP-initiated logout names the client, never an id_token_hint:
		 * the ID token never passes through the browser.  The IdP hands
		 * `state` back to the registered post_logout_redirect_uri. */
		snprintf(post_logout, sizeof post_logout, "%s/", cfg->public_url);
		if ((e = buf_puts(&loc, m->end_session_endpoint)) != CS_OK ||
		    (e = append_param(&loc, "client_id", cfg->oidc_client_id)) != CS_OK ||
		    (e = append_param(&loc, "post_logout_redirect_uri", post_logout)) != CS_OK ||
		    (e = append_param(&loc, "state", "signed-out")) != CS_OK)
			goto out;
		e = redirect_to(rep, loc.data);
	} else {
		e = redirect_to(rep, "/?state=signed-out-here");
	}
	if (e == CS_OK)
		e = set_cookie(rep, cfg, session_cookie_name(cfg), "", 0);
out:
	buf_clear(&loc);
	session_clear(&s);
	return e;
}
