/* login.c -- OpenID Connect login for people (ARCHITECTURE.md flow E), the
 * domain (login.h): login states, PKCE, the callback's checks, the ID token
 * and the person's session.  It knows no HTTP.  No token, code or verifier
 * ever leaves it except towards the IdP; the browser only ever holds an
 * opaque session cookie and a short-lived login-binding cookie. */
#include <arpa/inet.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include "app.h"
#include "buf.h"
#include "store_session.h"
#include "store_user.h"
#include "log.h"
#include "login.h"
#include "form.h"
#include "oidc.h"

/* base64url(SHA-256(verifier)) for PKCE S256 (RFC 7636 §4.2): 43 characters.
 * SECURITY: EVP_EncodeBlock writes 44 characters and a NUL, 45 bytes, and is
 * not instrumented by ASan: it writes into a buffer of its own size, never
 * into out (a 44-byte out once took a NUL past its end, onto the caller's
 * stack; test_login.c holds out's size). */
void login_pkce_challenge(const char *verifier, char out[LOGIN_PKCE_CHALLENGE_LEN + 1])
{
	unsigned char h[32], b64[4 * 32 / 3 + 4 + 1];      /* 44 characters, one '=', NUL */
	sha256_str(verifier, h);
	EVP_EncodeBlock(b64, h, 32);
	for (size_t i = 0; i < LOGIN_PKCE_CHALLENGE_LEN; i++) {
		char ch = (char)b64[i];
		out[i] = ch == '+' ? '-' : ch == '/' ? '_' : ch;
	}
	out[LOGIN_PKCE_CHALLENGE_LEN] = '\0';
	OPENSSL_cleanse(b64, sizeof b64);
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

/* --- starting a login ------------------------------------------------------ */

void login_begin_out_clear(struct login_begin_out *o)
{
	if (o == NULL)
		return;
	free(o->location);
	OPENSSL_cleanse(o, sizeof *o);
}

/* The secrets of one start: they live only here, in the stored state and, for
 * bind, in the browser's cookie. */
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
	char bind[SESSION_TOKEN_LEN + 1];
	unsigned char prev_hash[32];
	struct store_login_state ls = { .return_to = NULL };
	struct store_login_limits lim = { .now = in->now };
	enum store_login_admit admit;
	int64_t free_at = 0;
	struct store_conn *c;
	struct buf loc;
	enum cs_err e;

	buf_init(&loc, 8192);
	memset(&k, 0, sizeof k);
	memset(bind, 0, sizeof bind);
	if (m == NULL) {
		*outcome = LOGIN_BEGIN_NO_IDP;
		e = CS_OK;
		goto out;
	}
	if ((c = store_conn(app->store)) == NULL) {
		e = CS_EDB;
		goto out;
	}
	if (!parse_max_age(in->max_age, &ls.max_age)) {
		*outcome = LOGIN_BEGIN_BAD_MAX_AGE;
		e = CS_OK;
		goto out;
	}
	if ((e = random_token(k.state)) != CS_OK || (e = random_token(k.nonce)) != CS_OK ||
	    (e = random_token(k.verifier)) != CS_OK || (e = random_token(bind)) != CS_OK)
		goto out;
	login_pkce_challenge(k.verifier, k.challenge);
	sha256_str(k.state, ls.state_hash);
	sha256_str(bind, ls.browser_hash);
	login_client_key(in->remote_ip, ls.addr_hash);
	ls.nonce = k.nonce;
	ls.code_verifier = k.verifier;
	ls.return_to = (char *)(in->return_to ? in->return_to : "/me");
	ls.created_at = in->now;
	ls.expires_at = in->now + LOGIN_STATE_TTL;

	/* The whole answer first, so that after the state is stored nothing is
	 * left that could fail and strand it. */
	if ((e = authorize_url(cfg, m, in, &k, &loc)) != CS_OK)
		goto out;

	/* SECURITY: anonymous starts are bounded (issue #12): per address and in
	 * total, or a stream of GET /login fills the disk and stalls the writers.
	 * A browser starting again replaces its own earlier login (its cookie is
	 * about to be overwritten, so that state could never finish anyway). */
	lim.per_address = cfg->login_max_pending_per_address;
	lim.total = cfg->login_max_pending;
	if (in->prev_bind != NULL) {
		sha256_str(in->prev_bind, prev_hash);
		lim.replaces = prev_hash;
	}
	if ((e = store_login_state_admit(c, &ls, &lim, &admit, &free_at)) != CS_OK)
		goto out;
	if (admit != STORE_LOGIN_ADMITTED) {
		if (admit == STORE_LOGIN_ALL_FULL)
			warn_all_full(cfg, in->now);
		*outcome = admit == STORE_LOGIN_ALL_FULL ? LOGIN_BEGIN_ALL_FULL : LOGIN_BEGIN_ADDRESS_FULL;
		out->retry_after = free_at - in->now;
		goto out;
	}
	if ((out->location = buf_steal(&loc)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	memcpy(out->bind, bind, sizeof bind);
	*outcome = LOGIN_BEGUN;
out:
	OPENSSL_cleanse(&k, sizeof k);
	OPENSSL_cleanse(bind, sizeof bind);
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

/* Takes (deletes) the state and checks that this browser, and the expected
 * IdP, finish it, before anything from the IdP is believed. */
static enum cs_err check_state(struct store_conn *c, const struct oidc_meta *m,
    const struct login_finish_in *in, struct store_login_state *ls,
    enum login_finish_outcome *outcome)
{
	unsigned char h[32];
	enum cs_err e;
	*outcome = LOGIN_FINISH__MAX;
	if (in->state == NULL) {
		*outcome = LOGIN_FINISH_NO_STATE;
		return CS_OK;
	}
	/* The state is single-use: taking it deletes it, whatever happens next. */
	sha256_str(in->state, h);
	e = store_login_state_take(c, h, ls);
	if (e == CS_ENOENT)
		*outcome = LOGIN_FINISH_UNKNOWN_STATE;
	if (e != CS_OK)
		return e == CS_ENOENT ? CS_OK : e;
	if (ls->expires_at <= in->now) {
		*outcome = LOGIN_FINISH_EXPIRED;
		return CS_OK;
	}
	/* SECURITY: the browser finishing the login must be the one that began it. */
	if (in->bind == NULL) {
		*outcome = LOGIN_FINISH_NO_BINDING;
		return CS_OK;
	}
	sha256_str(in->bind, h);
	if (CRYPTO_memcmp(h, ls->browser_hash, 32) != 0) {
		*outcome = LOGIN_FINISH_OTHER_BROWSER;
		return CS_OK;
	}
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
    const struct store_login_state *ls, json_t **claims, enum login_finish_outcome *outcome)
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
	    in->code, redirect_uri, ls->code_verifier, &id_token);
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

/* The user row (subject at issuer) and the session, in one transaction. */
static enum cs_err sign_in(struct app *app, const struct login_finish_in *in, json_t *claims,
    const char *issuer, const char *subject, char sid[SESSION_TOKEN_LEN + 1])
{
	const struct config *cfg = app->cfg;
	struct store_conn *c = store_conn(app->store);
	json_t *at = json_object_get(claims, "auth_time");
	unsigned char h[32];
	int64_t user_id = 0;
	enum cs_err e;
	if (c == NULL)
		return CS_EDB;
	if ((e = store_begin(c)) != CS_OK)
		return e;
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
	struct store_login_state ls = { .return_to = NULL };
	char sid[SESSION_TOKEN_LEN + 1] = "", *back = NULL;
	json_t *claims = NULL, *subj;
	enum cs_err e;

	if (c == NULL)
		return CS_EDB;
	if (m == NULL) {
		*outcome = LOGIN_FINISH_NO_IDP;
		return CS_OK;
	}
	/* LOGIN_FINISH__MAX from check_state: nothing stood against it so far. */
	if ((e = check_state(c, m, in, &ls, outcome)) != CS_OK || *outcome != LOGIN_FINISH__MAX)
		goto out;
	if ((e = id_token_claims(app, in, &ls, &claims, outcome)) != CS_OK ||
	    *outcome != LOGIN_FINISHED)
		goto out;
	subj = json_object_get(claims, app->cfg->oidc_subject_claim);
	if (!json_is_string(subj) || json_string_length(subj) == 0 || json_string_length(subj) > 255) {
		*outcome = LOGIN_FINISH_NO_SUBJECT;
		goto out;
	}
	/* A copy, made before the session is: the state's strings are one block,
	 * wiped and freed below. */
	if ((back = strdup(ls.return_to)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	if ((e = sign_in(app, in, claims, m->issuer, json_string_value(subj), sid)) != CS_OK)
		goto out;
	memcpy(out->sid, sid, sizeof sid);
	out->return_to = back;
	back = NULL;
out:
	free(back);
	OPENSSL_cleanse(sid, sizeof sid);
	json_decref(claims);
	store_login_state_clear(&ls);
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
