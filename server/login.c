/* login.c -- OpenID Connect login for people (docs/architecture.md flow E), the
 * domain (login.h): login states, PKCE, the callback's checks, the ID token
 * and the person's session.  It knows no HTTP.  No token, code or verifier
 * ever leaves it except towards the IdP; the browser only ever holds an
 * opaque session cookie and short-lived login cookies whose state, nonce and
 * verifier are sealed under the master key (login_cookie.c). */

#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include "app.h"
#include "b64.h"
#include "buf.h"
#include "login_cookie.h"
#include "store_session.h"
#include "store_user.h"
#include "log.h"
#include "login.h"
#include "form.h"
#include "oidc.h"

/* How long past its cookie's expiry a used state is kept: a node whose clock
 * is behind would still take the cookie for that long. */
#define LOGIN_USED_MARGIN 300

/* base64url(SHA-256(verifier)) for PKCE S256 (RFC 7636 §4.2): 43 characters
 * and a NUL, written within out's LOGIN_PKCE_CHALLENGE_LEN + 1 bytes (a 44-byte
 * out once took a NUL past its end, onto the caller's stack; test_login.c
 * holds out's size). */
void login_pkce_challenge(const char *verifier, char out[LOGIN_PKCE_CHALLENGE_LEN + 1])
{
	unsigned char h[32];
	sha256_str(verifier, h);
	/* 43 characters fit out: this cannot fail (out is "" if it did). */
	if (b64url_encode(h, sizeof h, out, LOGIN_PKCE_CHALLENGE_LEN + 1) != CS_OK)
		out[0] = '\0';
	OPENSSL_cleanse(h, sizeof h);
}

/* --- starting a login ------------------------------------------------------ */

void login_begin_out_clear(struct login_begin_out *o)
{
	if (o == NULL)
		return;
	free(o->location);
	if (o->value != NULL) {
		OPENSSL_cleanse(o->value, strlen(o->value));
		free(o->value);
	}
	OPENSSL_cleanse(o, sizeof *o);
}

/* The secrets of one start: they live only here and, sealed, in the
 * browser's cookie. */
struct start_secrets {
	char state[SESSION_TOKEN_LEN + 1], nonce[SESSION_TOKEN_LEN + 1];
	char verifier[SESSION_TOKEN_LEN + 1], challenge[LOGIN_PKCE_CHALLENGE_LEN + 1];
};

/* The IdP's authorization URL for this start. */
static enum cs_err authorize_url(const struct config *cfg, const struct oidc_meta *m,
    const struct login_begin_in *in, const struct start_secrets *k, struct buf *loc)
{
	char redirect_uri[600];
	enum cs_err e;
	if ((e = str_fmt(redirect_uri, sizeof redirect_uri, "%s/callback", cfg->public_url)) != CS_OK ||
	    (e = buf_puts(loc, m->authorization_endpoint)) != CS_OK ||
	    (e = form_url_param(loc, "response_type", "code")) != CS_OK ||
	    (e = form_url_param(loc, "client_id", cfg->oidc_client_id)) != CS_OK ||
	    (e = form_url_param(loc, "redirect_uri", redirect_uri)) != CS_OK ||
	    (e = form_url_param(loc, "scope", cfg->oidc_scopes)) != CS_OK ||
	    (e = form_url_param(loc, "state", k->state)) != CS_OK ||
	    (e = form_url_param(loc, "nonce", k->nonce)) != CS_OK ||
	    (e = form_url_param(loc, "code_challenge", k->challenge)) != CS_OK ||
	    (e = form_url_param(loc, "code_challenge_method", "S256")) != CS_OK)
		return e;
	if (in->prompt && (e = form_url_param(loc, "prompt", in->prompt)) != CS_OK)
		return e;
	if (in->max_age && (e = form_url_param(loc, "max_age", in->max_age)) != CS_OK)
		return e;
	return CS_OK;
}

/* -1 for none; false when max_age is not 0..one year of seconds. */
static bool parse_max_age(const char *s, int64_t *out)
{
	char *end = NULL;
	long long v;
	*out = -1;
	if (s == NULL)
		return true;
	v = strtoll(s, &end, 10);
	if (end == s || *end != '\0' || v < 0 || v > 86400 * 365)
		return false;
	*out = v;
	return true;
}

enum cs_err login_begin(struct app *app, const struct login_begin_in *in,
    struct login_begin_out *out, enum login_begin_outcome *outcome)
{
	const struct config *cfg = app->cfg;
	const struct oidc_meta *m = oidc_meta(app->idp);
	struct start_secrets k;
	struct login_cookie lc;
	const char *back = in->return_to ? in->return_to : "/me";
	char *value = NULL;
	struct buf loc;
	enum cs_err e = CS_OK;

	buf_init(&loc, 8192);
	memset(&k, 0, sizeof k);
	memset(&lc, 0, sizeof lc);
	if (m == NULL) {
		*outcome = LOGIN_BEGIN_NO_IDP;
		goto out;
	}
	if (!parse_max_age(in->max_age, &lc.max_age)) {
		*outcome = LOGIN_BEGIN_BAD_MAX_AGE;
		goto out;
	}
	if (strlen(back) > LOGIN_RETURN_TO_MAX) {     /* routes.c refuses it first */
		e = CS_EINVAL;
		goto out;
	}
	if ((e = random_token(k.state)) != CS_OK || (e = random_token(k.nonce)) != CS_OK ||
	    (e = random_token(k.verifier)) != CS_OK)
		goto out;
	login_pkce_challenge(k.verifier, k.challenge);
	sha256_str(k.state, lc.state_hash);
	memcpy(lc.nonce, k.nonce, sizeof lc.nonce);
	memcpy(lc.verifier, k.verifier, sizeof lc.verifier);
	memcpy(lc.return_to, back, strlen(back) + 1);
	lc.expires_at = in->now + LOGIN_STATE_TTL;

	/* SECURITY: nothing is written at consentd (issue #28): the state is
	 * sealed into this start's own cookie, named by its state's hash, so that
	 * only the browser that started it can finish it and several tabs can
	 * sign in at once.  The browser's oldest starts beyond LOGIN_COOKIES_MAX
	 * are deleted, so its Cookie header always has room for the session. */
	login_cookie_name(cfg, lc.state_hash, out->name);
	if ((e = login_cookie_seal(&app->mk, out->name, &lc, in->now, &value)) != CS_OK ||
	    (e = authorize_url(cfg, m, in, &k, &loc)) != CS_OK)
		goto out;
	if ((out->location = buf_steal(&loc)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	login_cookie_stale(&app->mk, cfg, in->cookie_header, in->now, out->drop, &out->ndrop);
	out->value = value;
	value = NULL;
	*outcome = LOGIN_BEGUN;
out:
	if (value != NULL) {
		OPENSSL_cleanse(value, strlen(value));
		free(value);
	}
	OPENSSL_cleanse(&k, sizeof k);
	login_cookie_clear(&lc);
	buf_clear(&loc);
	return e;
}

/* --- finishing it ------------------------------------------------------------ */

void login_finish_out_clear(struct login_finish_out *o)
{
	if (o == NULL)
		return;
	free(o->return_to);
	OPENSSL_cleanse(o, sizeof *o);
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

/* A state as login_begin makes them: 43 base64url characters. */
static bool state_shape_ok(const char *s)
{
	if (strlen(s) != SESSION_TOKEN_LEN)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'))
			return false;
	return true;
}

/* Opens the state's cookie and checks that this browser, and the expected
 * IdP, finish it, before anything from the IdP is believed.  *lc filled
 * when *outcome is left LOGIN_FINISH__MAX (nothing stood against it). */
static enum cs_err check_state(struct app *app, struct store_conn *c, const struct oidc_meta *m,
    const struct login_finish_in *in, struct login_cookie *lc, char name[LOGIN_COOKIE_NAME_MAX],
    enum login_finish_outcome *outcome)
{
	unsigned char h[32];
	char *value = NULL;
	enum cs_err e, ce;
	*outcome = LOGIN_FINISH__MAX;
	if (in->state == NULL) {
		*outcome = LOGIN_FINISH_NO_STATE;
		return CS_OK;
	}
	if (!state_shape_ok(in->state)) {
		*outcome = LOGIN_FINISH_UNKNOWN_STATE;
		return CS_OK;
	}
	sha256_str(in->state, h);
	login_cookie_name(app->cfg, h, name);
	/* SECURITY: single use -- a state that signed someone in is refused
	 * before the IdP is asked again. */
	if ((e = store_login_used_get(c, h)) == CS_OK) {
		*outcome = LOGIN_FINISH_UNKNOWN_STATE;
		return CS_OK;
	}
	if (e != CS_ENOENT)
		return e;
	/* SECURITY: the browser finishing the login must be the one that began
	 * it: only its cookie holds the state's hash, sealed under the master key. */
	ce = cookie_get(in->cookie_header, name, &value);
	if (ce == CS_ENOMEM)
		return ce;
	if (ce == CS_ENOENT)
		*outcome = LOGIN_FINISH_NO_BINDING;
	else if (ce != CS_OK || login_cookie_open(&app->mk, name, value, strlen(value), in->now,
	    lc) != CS_OK)
		*outcome = LOGIN_FINISH_BAD_BINDING;
	else if (CRYPTO_memcmp(lc->state_hash, h, 32) != 0)
		*outcome = LOGIN_FINISH_OTHER_BROWSER;
	else if (lc->expires_at <= in->now)
		*outcome = LOGIN_FINISH_EXPIRED;
	if (value != NULL) {
		OPENSSL_cleanse(value, strlen(value));
		free(value);
	}
	if (*outcome != LOGIN_FINISH__MAX)
		return CS_OK;
	/* SECURITY: RFC 9207 -- the issuer is checked before anything else, even
	 * before an error from the provider is shown (mix-up defence). */
	if ((m->iss_parameter_supported && in->iss == NULL) ||
	    (in->iss != NULL && strcmp(in->iss, m->issuer) != 0))
		*outcome = LOGIN_FINISH_WRONG_ISSUER;
	/* SECURITY: said in consentd's words by the handler; no text of the
	 * IdP's (error_description may be anyone's) reaches the page. */
	else if (in->error != NULL)
		*outcome = strcmp(in->error, "access_denied") == 0 ? LOGIN_FINISH_CANCELLED :
		    LOGIN_FINISH_IDP_ERROR;
	else if (in->code == NULL)
		*outcome = LOGIN_FINISH_NO_CODE;
	return CS_OK;
}

/* Exchanges the code and validates the ID token; *claims on LOGIN_FINISHED. */
static enum cs_err id_token_claims(struct app *app, const struct login_finish_in *in,
    const struct login_cookie *ls, json_t **claims, enum login_finish_outcome *outcome)
{
	const struct config *cfg = app->cfg;
	const char *aud[1] = { cfg->oidc_client_id };
	struct oidc_expect ex = {
		.audiences = aud, .naudiences = 1, .client_id = cfg->oidc_client_id,
		.nonce = ls->nonce, .now = in->now, .max_age = ls->max_age,
	};
	char redirect_uri[600], why[128], *id_token = NULL;
	enum cs_err e;
	if ((e = str_fmt(redirect_uri, sizeof redirect_uri, "%s/callback", cfg->public_url)) != CS_OK)
		return e;
	e = oidc_exchange_code(app->idp, cfg->oidc_client_id, cfg->oidc_client_secret,
	    cfg->oidc_token_endpoint_auth == AUTH_CLIENT_SECRET_POST ? OIDC_AUTH_POST : OIDC_AUTH_BASIC,
	    in->code, redirect_uri, ls->verifier, &id_token);
	if (e != CS_OK)
		*outcome = LOGIN_FINISH_EXCHANGE_FAILED;
	else if (oidc_validate(app->idp, id_token, &ex, claims, why, sizeof why) != CS_OK)
		*outcome = LOGIN_FINISH_UNVERIFIED;
	else
		*outcome = LOGIN_FINISHED;
	if (id_token) {
		OPENSSL_cleanse(id_token, strlen(id_token));
		free(id_token);
	}
	return CS_OK;
}

/* The one place a person's user row is written from a login: created, or
 * its name, email and last login refreshed. */
static enum cs_err user_record(struct store_conn *c, const char *issuer, json_t *claims,
    const char *subject, int64_t now, int64_t *user_id)
{
	json_t *nm = json_object_get(claims, "name");
	json_t *em = json_object_get(claims, "email");
	return store_user_put(c, &(struct store_user){ .issuer = issuer, .subject = subject,
	    .name = json_is_string(nm) ? json_string_value(nm) : NULL,
	    .email = json_is_string(em) ? json_string_value(em) : NULL,
	    .now = now, .login = true }, user_id);
}

/* The state marked used, the user row (subject at issuer) and the session, in
 * one transaction; *used when the state was used already (nothing written). */
static enum cs_err sign_in(struct app *app, const struct login_finish_in *in, json_t *claims,
    const struct login_cookie *lc, const char *issuer, const char *subject,
    char sid[SESSION_TOKEN_LEN + 1], bool *used)
{
	const struct config *cfg = app->cfg;
	struct store_conn *c = store_conn(app->store);
	json_t *at = json_object_get(claims, "auth_time");
	unsigned char h[32];
	int64_t user_id = 0;
	enum cs_err e;
	*used = false;
	if (c == NULL)
		return CS_EDB;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	/* SECURITY: single use, recorded only now that the IdP has answered (so
	 * strangers' callbacks write nothing), and kept past the cookie's expiry
	 * by LOGIN_USED_MARGIN for nodes whose clocks differ.  The insert is the
	 * check: of two racing callbacks only one signs in. */
	e = store_login_used_put(c, lc->state_hash, lc->expires_at + LOGIN_USED_MARGIN);
	if (e == CS_EEXIST) {
		*used = true;
		store_rollback(c);
		return CS_OK;
	}
	if (e == CS_OK)
		e = user_record(c, issuer, claims, subject, in->now, &user_id);
	/* SECURITY: a new session id at every login (no fixation); the old one ends. */
	if (e == CS_OK && in->old_session != NULL) {
		sha256_str(in->old_session, h);
		e = session_end(c, h);
	}
	if (e == CS_OK)
		/* SECURITY: admin powers are measured from the IdP's auth_time, never
		 * from this login (single sign-on logs people in without a password):
		 * an ID token without one records 0, which no admin check accepts. */
		e = session_create(c, user_id, json_is_integer(at) ? json_integer_value(at) : 0,
		    claim_admin(cfg, claims), in->now, sid);
	if (e == CS_OK)
		e = store_commit(c);
	if (e != CS_OK)
		store_rollback(c);
	return e;
}

enum cs_err login_finish(struct app *app, const struct login_finish_in *in,
    struct login_finish_out *out, enum login_finish_outcome *outcome)
{
	const struct oidc_meta *m = oidc_meta(app->idp);
	struct store_conn *c = store_conn(app->store);
	struct login_cookie lc;
	char sid[SESSION_TOKEN_LEN + 1] = "", *back = NULL;
	json_t *claims = NULL, *subj;
	bool used = false;
	enum cs_err e;

	memset(&lc, 0, sizeof lc);
	out->name[0] = '\0';
	if (c == NULL)
		return CS_EDB;
	if (m == NULL) {
		*outcome = LOGIN_FINISH_NO_IDP;
		return CS_OK;
	}
	/* LOGIN_FINISH__MAX from check_state: nothing stood against it so far. */
	if ((e = check_state(app, c, m, in, &lc, out->name, outcome)) != CS_OK ||
	    *outcome != LOGIN_FINISH__MAX)
		goto out;
	if ((e = id_token_claims(app, in, &lc, &claims, outcome)) != CS_OK ||
	    *outcome != LOGIN_FINISHED)
		goto out;
	subj = json_object_get(claims, app->cfg->oidc_subject_claim);
	if (!json_is_string(subj) || json_string_length(subj) == 0 || json_string_length(subj) > 255) {
		*outcome = LOGIN_FINISH_NO_SUBJECT;
		goto out;
	}
	if ((back = strdup(lc.return_to)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	if ((e = sign_in(app, in, claims, &lc, m->issuer, json_string_value(subj), sid,
	    &used)) != CS_OK)
		goto out;
	if (used) {
		*outcome = LOGIN_FINISH_UNKNOWN_STATE;
		goto out;
	}
	memcpy(out->sid, sid, sizeof sid);
	out->return_to = back;
	back = NULL;
out:
	free(back);
	OPENSSL_cleanse(sid, sizeof sid);
	json_decref(claims);
	login_cookie_clear(&lc);
	return e;
}

/* --- ending a session -------------------------------------------------------- */

enum cs_err login_end(struct app *app, const unsigned char id_hash[32], char **idp_logout)
{
	const struct config *cfg = app->cfg;
	const struct oidc_meta *m = oidc_meta(app->idp);
	struct store_conn *c = store_conn(app->store);
	char post_logout[600];
	struct buf loc;
	enum cs_err e;

	*idp_logout = NULL;
	if (c == NULL)
		return CS_EDB;
	if ((e = session_end(c, id_hash)) != CS_OK)
		return e;
	if (m == NULL || m->end_session_endpoint == NULL)
		return CS_OK;
	/* SECURITY: RP-initiated logout names the client, never an id_token_hint:
	 * the ID token never passes through the browser.  The IdP hands
	 * `state` back to the registered post_logout_redirect_uri. */
	buf_init(&loc, 4096);
	if ((e = str_fmt(post_logout, sizeof post_logout, "%s/", cfg->public_url)) != CS_OK ||
	    (e = buf_puts(&loc, m->end_session_endpoint)) != CS_OK ||
	    (e = form_url_param(&loc, "client_id", cfg->oidc_client_id)) != CS_OK ||
	    (e = form_url_param(&loc, "post_logout_redirect_uri", post_logout)) != CS_OK ||
	    (e = form_url_param(&loc, "state", "signed-out")) != CS_OK)
		goto out;
	if ((*idp_logout = buf_steal(&loc)) == NULL)
		e = CS_ENOMEM;
out:
	buf_clear(&loc);
	return e;
}
