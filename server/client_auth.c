/* client_auth.c -- the gateway's client authentication: Basic with the shared
 * secret, or private_key_jwt with a key of the gateway's JWKS.  It must never
 * accept a method the configuration left out, an assertion twice, or an
 * assertion that names another client or another server. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <strings.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/crypto.h>
#include "app.h"
#include "audit.h"
#include "auth_refusal.h"
#include "buf.h"
#include "client_auth.h"
#include "client_keys.h"
#include "httpc.h"
#include "log.h"
#include "metrics.h"
#include "mono.h"
#include "session.h"
#include "rate_limits.h"
#include "store_replay.h"
#include "form.h"

static void set_why(char *why, size_t whylen, const char *s)
{
	/* Fixed phrases that fit every caller's array; never a cut one. */
	if (why != NULL && whylen > 0 && str_fmt(why, whylen, "%s", s) != CS_OK)
		why[0] = '\0';
}

/* A NumericDate claim (RFC 7519 §2): CS_ENOENT when absent. */
static enum cs_err time_claim(const json_t *c, const char *name, int64_t *out)
{
	json_t *v = json_object_get(c, name);
	if (v == NULL)
		return CS_ENOENT;
	if (json_is_integer(v)) {
		*out = (int64_t)json_integer_value(v);
	} else if (json_is_real(v)) {
		double d = json_real_value(v);
		if (!(d > -1e15 && d < 1e15))
			return CS_EINVAL;
		*out = (int64_t)d;
	} else {
		return CS_EINVAL;
	}
	return *out >= 0 ? CS_OK : CS_EINVAL;
}

/* SECURITY: S1 (draft-ietf-oauth-rfc7523bis, audience injection): aud is one
 * value, a string or an array of one, equal to one of e->audiences (the issuer,
 * or the token endpoint for clients written to RFC 7523's "MAY").  An array
 * with more values is what a client tricked into signing for another server
 * sends, so it is refused even when one of them is ours. */
static bool aud_matches(const json_t *aud, const struct client_assertion_expect *e)
{
	if (json_is_array(aud) && json_array_size(aud) == 1)
		aud = json_array_get(aud, 0);
	if (!json_is_string(aud))
		return false;
	for (size_t i = 0; i < e->naudiences; i++)
		if (strcmp(json_string_value(aud), e->audiences[i]) == 0)
			return true;
	return false;
}

static bool str_claim_is(const json_t *c, const char *name, const char *want)
{
	const char *v = json_string_value(json_object_get(c, name));
	return v != NULL && strcmp(v, want) == 0;
}

enum cs_err client_assertion_check(const char *compact, const struct client_assertion_expect *e,
    char **jti, int64_t *exp, char *why, size_t whylen)
{
	struct jws_parsed p;
	enum cs_err r = CS_EINVAL;
	int64_t t_exp = 0, t = 0;
	bool verified = false;
	if (jws_parse(compact, JWS_ALGS_CLIENT_ASSERTION, &p, why, whylen) != CS_OK)
		return CS_EINVAL;
	if (e->keys == NULL) {
		set_why(why, whylen, "no keys are configured for the client");
		goto out;
	}
	/* SECURITY: only the gateway's own keys, and only by the key's own
	 * algorithm; a kid, when named, must be one of them. */
	json_t *kid = json_object_get(p.header, "kid");
	if (kid != NULL && !json_is_string(kid)) {
		set_why(why, whylen, "kid is not a string");
		goto out;
	}
	/* SECURITY: S4: without a kid an assertion could make consentd try every
	 * key of the set (32 RSA keys of 8192 bits) before refusing it; OpenID
	 * Connect Core §10.1 asks for a kid whenever the set has more than one
	 * key, so there is at most one signature check per assertion. */
	if (kid == NULL && e->keys->n > 1) {
		set_why(why, whylen, "kid is required: the client has more than one key");
		goto out;
	}
	for (size_t i = 0; !verified && i < e->keys->n; i++) {
		const struct jws_key *k = e->keys->keys[i];
		if (kid != NULL && (k->kid == NULL || strcmp(k->kid, json_string_value(kid)) != 0))
			continue;
		verified = jws_verify(&p, k);
	}
	if (!verified) {
		set_why(why, whylen, "not signed by a key of the client");
		goto out;
	}
	if (!str_claim_is(p.payload, "iss", e->client_id) ||
	    !str_claim_is(p.payload, "sub", e->client_id)) {
		set_why(why, whylen, "iss and sub must both be the client id");
		goto out;
	}
	if (!aud_matches(json_object_get(p.payload, "aud"), e)) {
		set_why(why, whylen, "aud must be this server's issuer or token endpoint, one value");
		goto out;
	}
	if (time_claim(p.payload, "exp", &t_exp) != CS_OK) {
		set_why(why, whylen, "exp is missing or not a number");
		goto out;
	}
	if (t_exp + e->clock_skew < e->now) {
		set_why(why, whylen, "the assertion has expired");
		goto out;
	}
	if (t_exp > e->now + CLIENT_ASSERTION_MAX_AHEAD) {
		set_why(why, whylen, "exp is more than 5 minutes ahead");
		goto out;
	}
	for (int i = 0; i < 2; i++) {
		const char *name = i == 0 ? "nbf" : "iat";
		enum cs_err tr = time_claim(p.payload, name, &t);
		if (tr == CS_EINVAL || (tr == CS_OK && t > e->now + e->clock_skew)) {
			set_why(why, whylen, i == 0 ? "nbf is ahead or malformed" : "iat is ahead or malformed");
			goto out;
		}
	}
	json_t *j = json_object_get(p.payload, "jti");
	if (!json_is_string(j) || json_string_length(j) == 0 ||
	    json_string_length(j) > CLIENT_ASSERTION_JTI_MAX) {
		set_why(why, whylen, "jti is missing or too long");
		goto out;
	}
	if ((*jti = strdup(json_string_value(j))) == NULL) {
		r = CS_ENOMEM;
		goto out;
	}
	*exp = t_exp;
	r = CS_OK;
out:
	jws_parsed_clear(&p);
	return r;
}

/* --- at the endpoints ---------------------------------------------------------- */

void basic_credentials_clear(struct basic_credentials *c)
{
	if (c != NULL)
		OPENSSL_cleanse(c, sizeof *c);
}

bool basic_credentials(const char *hdr, struct basic_credentials *out)
{
	size_t n, len, idlen = 0, slen = 0;
	char *colon;
	out->id = out->secret = NULL;
	if (hdr == NULL || strncasecmp(hdr, "Basic ", 6) != 0)
		return false;
	hdr += 6;
	while (*hdr == ' ')
		hdr++;
	n = strlen(hdr);
	if (n == 0 || n > BASIC_CREDENTIALS_MAX || n % 4 != 0)
		return false;
	/* n / 4 * 3 + 1 bytes: what EVP_DecodeBlock writes for n, and a NUL. */
	int r = EVP_DecodeBlock((unsigned char *)out->buf, (const unsigned char *)hdr, (int)n);
	if (r < 0)
		goto bad;
	len = (size_t)r;
	if (n >= 1 && hdr[n - 1] == '=')
		len--;
	if (n >= 2 && hdr[n - 2] == '=')
		len--;
	out->buf[len] = '\0';
	if (memchr(out->buf, '\0', len) != NULL || (colon = strchr(out->buf, ':')) == NULL)
		goto bad;
	*colon = '\0';
	/* RFC 6749 §2.3.1: both parts are form-urlencoded before Base64; they are
	 * decoded in place (decoding never lengthens). */
	if (pct_decode_into(out->buf, (size_t)(colon - out->buf), 1, out->buf, &idlen) != CS_OK ||
	    pct_decode_into(colon + 1, strlen(colon + 1), 1, colon + 1, &slen) != CS_OK)
		goto bad;
	out->id = out->buf;
	out->secret = colon + 1;
	return true;
bad:
	basic_credentials_clear(out);
	return false;
}

static bool basic_ok(const struct config *cfg, const char *authorization)
{
	struct basic_credentials bc;
	unsigned char h[32];
	bool ok = false;
	if (basic_credentials(authorization, &bc)) {
		sha256_str(bc.secret, h);
		/* SECURITY: the secret is compared as a SHA-256, in constant time;
		 * the id is public. */
		int id_ok = strcmp(bc.id, cfg->gateway_id) == 0;
		int secret_ok = CRYPTO_memcmp(h, cfg->gateway_secret_sha256, 32) == 0;
		ok = id_ok && secret_ok && cfg->gateway_has_secret;
		basic_credentials_clear(&bc);
	}
	OPENSSL_cleanse(h, sizeof h);
	return ok;
}

/* The audit entry that stands for a refused assertion from rq's address
 * (auth_refusal.h: at most one per address and interval): the address, the
 * reason, what it summarises, and the endpoint last (left out when too long:
 * audit_refusal_detail). */
static void audit_refused(struct app *app, const struct client_auth_request *rq, const char *why,
    const struct auth_refusal_summary *sum)
{
	struct store_conn *c = store_conn(app->store);
	struct buf before;
	char detail[AUDIT_REFUSAL_DETAIL_MAX + 1];
	if (c == NULL)
		return;
	buf_init(&before, AUDIT_REFUSAL_DETAIL_MAX + 1);
	if (buf_printf(&before, "private_key_jwt refused from %s: %s; %llu earlier from this "
	    "address and %llu from addresses past the interval's cap not recorded one by one; at ",
	    rq->remote_ip, why, (unsigned long long)sum->earlier,
	    (unsigned long long)sum->unrecorded) == CS_OK &&
	    audit_refusal_detail(detail, before.data, rq->path, "") == CS_OK) {
		/* The refusal stands whether or not its entry could be written. */
		enum cs_err ae = audit_append_alone(c, &(struct audit_entry){ .ts = rq->now,
		    .actor = "client:-", .action = "gateway.auth.refused", .outcome = "refused",
		    .detail = detail });
		(void)ae;
	}
	buf_clear(&before);
}

/* true: authenticated; otherwise the refusal's reason is in why and *reason. */
static bool assertion_ok(struct app *app, int64_t now, const char *assertion, char *why,
    size_t whylen, enum auth_refusal_reason *reason)
{
	const struct config *cfg = app->cfg;
	char token_ep[600], *jti = NULL;
	int64_t exp = 0;
	bool ok = false;
	struct client_keys *keys = app->gateway_keys;
	struct client_keyset *set = NULL;
	/* S1: the issuer; the token endpoint too, for clients that follow RFC
	 * 7523's "MAY" and OpenID Connect's "SHOULD"; no other endpoint. */
	bool with_token_ep = str_fmt(token_ep, sizeof token_ep, "%s/token", cfg->public_url) == CS_OK;
	const char *auds[2] = { cfg->public_url, token_ep };
	*reason = AUTH_REFUSED_ASSERTION;
	if (keys == NULL) {
		set_why(why, whylen, "no keys are configured for the client");
		goto out;
	}
	set = client_keys_acquire(keys, assertion);
	struct client_assertion_expect ex = {
		.keys = client_keyset_keys(set), .client_id = cfg->gateway_id, .audiences = auds,
		.naudiences = with_token_ep ? 2 : 1, .now = now,
		.clock_skew = cfg->gateway_clock_skew,
	};
	enum cs_err ce = client_assertion_check(assertion, &ex, &jti, &exp, why, whylen);
	client_keys_release(keys, set);
	if (ce != CS_OK)
		goto out;
	struct store_conn *c = store_conn(app->store);
	/* SECURITY: RFC 7523 §3 item 7: a jti is used once, across every node,
	 * until the assertion could not be accepted anyway. */
	enum cs_err e = c == NULL ? CS_EDB :
	    store_replay_use(c, REPLAY_CLIENT_ASSERTION, jti, exp + cfg->gateway_clock_skew, now);
	if (e == CS_EEXIST) {
		set_why(why, whylen, "the assertion's jti was used before");
		*reason = AUTH_REFUSED_REPLAY;
	} else if (e != CS_OK) {
		set_why(why, whylen, "the replay cache could not be consulted");
	} else {
		ok = true;
	}
out:
	free(jti);
	return ok;
}

/* Records a refusal: the metric, the address's failure (its [limits]
 * auth_failure bucket) and, for a refused assertion, the summary entry when
 * one is due. */
static void refused(struct app *app, const struct client_auth_request *rq,
    enum auth_refusal_reason reason, bool audit, const char *why)
{
	struct auth_refusal_summary sum;
	rate_limits_auth_failed(app->limits, rq->remote_ip);
	if (auth_refusals_note(app->auth_refusals, rq->remote_ip, reason, audit, rq->now, &sum))
		audit_refused(app, rq, why, &sum);
}

void client_auth_gateway(struct app *app, const struct client_auth_request *rq,
    struct client_auth_result *out)
{
	const struct config *cfg = app->cfg;
	const char *type = rq->assertion_type, *assertion = rq->assertion;
	const char *hdr = rq->assertion_header, *client_id = rq->client_id;
	char why[160] = "client authentication failed";
	enum auth_refusal_reason reason = AUTH_REFUSED_MISSING;
	bool ok = false, audit = false, tell = false;
	bool has_basic = rq->authorization != NULL &&
	    strncasecmp(rq->authorization, "Basic ", 6) == 0;
	bool has_assertion = type != NULL || assertion != NULL || hdr != NULL;

	memset(out, 0, sizeof *out);
	/* SECURITY: an address whose authentications failed [limits]
	 * auth_failure_burst times is refused here, before any signature, hash or
	 * database work (issue 28). */
	if (!rate_limits_auth_allowed(app->limits, rq->remote_ip, &out->retry_after)) {
		out->outcome = CLIENT_AUTH_LIMITED;
		return;
	}
	if (has_basic && has_assertion) {
		set_why(why, sizeof why, "use one client authentication method, not two");
		reason = AUTH_REFUSED_MALFORMED;
		tell = true;
	} else if (has_assertion && !cfg->gateway_auth_private_key_jwt) {
		/* A method that is not enabled is no attempt at it: never audited. */
		set_why(why, sizeof why, "private_key_jwt is not enabled");
		reason = AUTH_REFUSED_METHOD_NOT_ENABLED;
		tell = true;
	} else if (has_assertion) {
		audit = tell = true;
		reason = AUTH_REFUSED_MALFORMED;
		if (hdr != NULL && (type != NULL || assertion != NULL))
			set_why(why, sizeof why, "the assertion is given twice");
		else if (hdr == NULL && (type == NULL || strcmp(type, CLIENT_ASSERTION_TYPE) != 0))
			set_why(why, sizeof why, "client_assertion_type must be jwt-bearer");
		else if (hdr == NULL && assertion == NULL)
			set_why(why, sizeof why, "client_assertion is missing");
		else if (client_id != NULL && strcmp(client_id, cfg->gateway_id) != 0)
			set_why(why, sizeof why, "client_id is not the assertion's client");
		else
			ok = assertion_ok(app, rq->now, hdr != NULL ? hdr : assertion, why, sizeof why,
			    &reason);
	} else if (has_basic && !cfg->gateway_auth_basic) {
		set_why(why, sizeof why, "client_secret_basic is not enabled");
		reason = AUTH_REFUSED_METHOD_NOT_ENABLED;
		tell = true;
	} else if (has_basic) {
		ok = basic_ok(cfg, rq->authorization);
		reason = AUTH_REFUSED_BASIC;
	}
	if (ok) {
		out->outcome = CLIENT_AUTH_OK;
		return;
	}
	refused(app, rq, reason, audit, why);
	/* The description names what failed for an assertion or a method (never
	 * which part of a Basic credential was wrong). */
	out->outcome = CLIENT_AUTH_REFUSED;
	out->basic_challenge = cfg->gateway_auth_basic;
	if (str_fmt(out->description, sizeof out->description, "client authentication failed%s%s",
	    tell ? ": " : "", tell ? why : "") != CS_OK)
		out->description[0] = '\0';
}
