/* dpop.c -- DPoP proofs (RFC 9449) checked at every use of a bound grant, and
 * stateless server nonces.  It must never accept a proof twice, a proof for
 * another request, or a proof by a key other than the one a grant names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include "app.h"
#include "http.h"
#include "audit.h"
#include "b64.h"
#include "buf.h"
#include "dpop.h"
#include "store_replay.h"

static void set_why(char *why, size_t whylen, const char *s)
{
	/* The reasons are short constants: one longer than the caller's why
	 * leaves it "" (str_fmt's rule), never a cut reason. */
	if (why != NULL && whylen > 0 && str_fmt(why, whylen, "%s", s) != CS_OK)
		why[0] = '\0';
}

void dpop_proof_clear(struct dpop_proof *p)
{
	if (p == NULL)
		return;
	free(p->jti);
	memset(p, 0, sizeof *p);
}

static bool b64u_sha256(const void *data, size_t n, char out[JWS_JKT_LEN + 1])
{
	unsigned char h[32];
	return EVP_Digest(data, n, h, NULL, EVP_sha256(), NULL) == 1 &&
	    b64url_encode(h, sizeof h, out, JWS_JKT_LEN + 1) == CS_OK;
}

/* htu without its query and fragment (RFC 9449 §4.3 item 9). */
static bool htu_matches(const char *htu, const char *want)
{
	size_t n = strcspn(htu, "?#");
	return n == strlen(want) && memcmp(htu, want, n) == 0;
}

enum cs_err dpop_proof_check(const char *proof, const struct dpop_expect *e,
    struct dpop_proof *out, enum dpop_verdict *verdict, char *why, size_t whylen)
{
	struct jws_parsed p;
	struct jws_key *k = NULL;
	enum cs_err r = CS_OK;
	char kwhy[96], ath[JWS_JKT_LEN + 1];
	*verdict = DPOP_INVALID;
	if (jws_parse(proof, JWS_ALGS_DPOP_PROOF, &p, why, whylen) != CS_OK)
		return CS_OK;
	const char *typ = json_string_value(json_object_get(p.header, "typ"));
	if (typ == NULL || strcmp(typ, "dpop+jwt") != 0) {
		set_why(why, whylen, "typ is not dpop+jwt");
		goto out;
	}
	/* SECURITY: the key comes with the proof; it must be a public key, and
	 * the header's algorithm must be that key's (no algorithm confusion). */
	if (jws_key_from_jwk_for(json_object_get(p.header, "jwk"), JWS_ALGS_DPOP_PROOF, &k, kwhy,
	    sizeof kwhy) != CS_OK) {
		/* kwhy is shorter than any caller's why; too long, it would leave why "". */
		if (why != NULL && whylen > 0 && str_fmt(why, whylen, "jwk: %s",
		    json_object_get(p.header, "jwk") ? kwhy : "missing") != CS_OK)
			why[0] = '\0';
		goto out;
	}
	if (!jws_verify(&p, k)) {
		set_why(why, whylen, "the signature does not verify with the proof's jwk");
		goto out;
	}
	json_t *jti = json_object_get(p.payload, "jti");
	if (!json_is_string(jti) || json_string_length(jti) == 0 ||
	    json_string_length(jti) > DPOP_JTI_MAX) {
		set_why(why, whylen, "jti is missing or too long");
		goto out;
	}
	const char *htm = json_string_value(json_object_get(p.payload, "htm"));
	if (htm == NULL || strcmp(htm, e->htm) != 0) {
		set_why(why, whylen, "htm is not this request's method");
		goto out;
	}
	const char *htu = json_string_value(json_object_get(p.payload, "htu"));
	if (htu == NULL || !htu_matches(htu, e->htu)) {
		set_why(why, whylen, "htu is not this request's URL");
		goto out;
	}
	json_t *iat = json_object_get(p.payload, "iat");
	if (!json_is_integer(iat) && !json_is_real(iat)) {
		set_why(why, whylen, "iat is missing");
		goto out;
	}
	double t = json_number_value(iat);
	if (!(t >= (double)(e->now - e->window) && t <= (double)(e->now + e->window))) {
		set_why(why, whylen, "iat is outside the accepted window");
		goto out;
	}
	if (e->access_token != NULL) {
		const char *a = json_string_value(json_object_get(p.payload, "ath"));
		if (!b64u_sha256(e->access_token, strlen(e->access_token), ath)) {
			r = CS_ENOMEM;
			goto out;
		}
		if (a == NULL || strlen(a) != JWS_JKT_LEN || CRYPTO_memcmp(a, ath, JWS_JKT_LEN) != 0) {
			set_why(why, whylen, "ath is not the hash of the presented token");
			goto out;
		}
	}
	if (e->nonce_key != NULL) {
		const char *nonce = json_string_value(json_object_get(p.payload, "nonce"));
		if (nonce == NULL || !dpop_nonce_valid(e->nonce_key, nonce, e->now)) {
			set_why(why, whylen, nonce == NULL ? "a nonce is required" : "the nonce is stale");
			*verdict = DPOP_NEED_NONCE;
			goto out;
		}
	}
	memset(out, 0, sizeof *out);
	if ((out->jti = strdup(json_string_value(jti))) == NULL) {
		r = CS_ENOMEM;
		goto out;
	}
	memcpy(out->jkt, k->jkt, sizeof out->jkt);
	out->iat = (int64_t)t;
	*verdict = DPOP_VALID;
out:
	jws_key_free(k);
	jws_parsed_clear(&p);
	return r;
}

/* --- nonces ------------------------------------------------------------------ */

static bool nonce_for_slot(const unsigned char key[DPOP_NONCE_KEY_LEN], uint64_t slot,
    char out[DPOP_NONCE_LEN + 1])
{
	unsigned char raw[8 + 32];
	unsigned int ml = 0;
	for (int i = 0; i < 8; i++)
		raw[i] = (unsigned char)(slot >> (56 - 8 * i));
	return HMAC(EVP_sha256(), key, DPOP_NONCE_KEY_LEN, raw, 8, raw + 8, &ml) != NULL &&
	    ml == 32 && b64url_encode(raw, sizeof raw, out, DPOP_NONCE_LEN + 1) == CS_OK;
}

enum cs_err dpop_nonce_make(const unsigned char key[DPOP_NONCE_KEY_LEN], int64_t now,
    char out[DPOP_NONCE_LEN + 1])
{
	if (now < 0)
		return CS_EINVAL;
	return nonce_for_slot(key, (uint64_t)now / DPOP_NONCE_SLOT, out) ? CS_OK : CS_ECRYPTO;
}

bool dpop_nonce_valid(const unsigned char key[DPOP_NONCE_KEY_LEN], const char *nonce, int64_t now)
{
	char want[DPOP_NONCE_LEN + 1];
	if (nonce == NULL || now < 0 || strlen(nonce) != DPOP_NONCE_LEN)
		return false;
	uint64_t slot = (uint64_t)now / DPOP_NONCE_SLOT;
	/* This slot's nonce, or the one before (handed out up to a slot ago). */
	if (nonce_for_slot(key, slot, want) && CRYPTO_memcmp(want, nonce, DPOP_NONCE_LEN) == 0)
		return true;
	if (slot > 0 && nonce_for_slot(key, slot - 1, want) &&
	    CRYPTO_memcmp(want, nonce, DPOP_NONCE_LEN) == 0)
		return true;
	return false;
}

/* --- at the endpoints --------------------------------------------------------- */

static void audit_refused(const struct http_request *req, const char *why)
{
	struct store_conn *c = store_conn(req->app->store);
	char detail[256], actor[300];
	struct audit_entry a;
	if (c == NULL)
		return;
	/* Every refusal is audited: a path too long for detail is left out (and
	 * said so), never cut; why is at most 160 bytes, so the rest fits.  The
	 * gateway id is at most 255 bytes (config.c): actor always fits. */
	const char *method = http_method_name(req->method);
	if (str_fmt(detail, sizeof detail, "%s %s: %s", method, req->path, why) != CS_OK &&
	    str_fmt(detail, sizeof detail, "%s (a path too long to record): %s", method,
	    why) != CS_OK)
		return;
	if (str_fmt(actor, sizeof actor, "gateway:%s", req->app->cfg->gateway_id) != CS_OK)
		return;
	memset(&a, 0, sizeof a);
	a.ts = req->now;
	a.actor = actor;
	a.action = "dpop.refused";
	a.outcome = "refused";
	a.detail = detail;
	if (store_begin(c) != CS_OK)
		return;
	if (audit_append(c, &a) != CS_OK || store_commit(c) != CS_OK)
		store_rollback(c);
}

enum cs_err dpop_reply_nonce(const struct http_request *req, struct http_reply *rep)
{
	char nonce[DPOP_NONCE_LEN + 1];
	enum cs_err e;
	if (!req->app->cfg->gateway_dpop_nonce)
		return CS_OK;
	if ((e = dpop_nonce_make(req->app->dpop_nonce_key, req->now, nonce)) != CS_OK)
		return e;
	return reply_header(rep, DPOP_NONCE_HEADER, nonce);
}

/* The algorithms a proof may use, as the challenge names them. */
#define DPOP_CHALLENGE_ALGS "ES256 PS256 EdDSA Ed25519"

enum cs_err dpop_challenge(struct http_reply *rep, const char *error)
{
	char chal[160];
	enum cs_err e = error != NULL ?
	    str_fmt(chal, sizeof chal, "DPoP error=\"%s\", algs=\"" DPOP_CHALLENGE_ALGS "\"", error) :
	    str_fmt(chal, sizeof chal, "DPoP algs=\"" DPOP_CHALLENGE_ALGS "\"");
	return e == CS_OK ? reply_header(rep, "WWW-Authenticate", chal) : e;
}

/* Answers a refusal: the RFC's error, the nonce to use, and for a resource
 * (401) the DPoP challenge of RFC 9449 §7.1. */
static void refuse(const struct http_request *req, struct http_reply *rep, int status,
    enum dpop_verdict v, const char *why)
{
	const char *err = v == DPOP_NEED_NONCE ? "use_dpop_nonce" : "invalid_dpop_proof";
	enum cs_err e;
	audit_refused(req, why);
	/* The two codes spelled at their calls: tests/integration/openapi.test.js
	 * holds docs/errors.md to the codes reply_oauth_error is given. */
	if (v == DPOP_NEED_NONCE)
		e = reply_oauth_error(rep, status, "use_dpop_nonce", why);
	else
		e = reply_oauth_error(rep, status, "invalid_dpop_proof", why);
	if (e != CS_OK || dpop_reply_nonce(req, rep) != CS_OK) {
		rep->status = status;
		return;
	}
	if (status == 401 && dpop_challenge(rep, err) != CS_OK)
		rep->status = status;
}

/* Checks req's proof and records its jti; the verdict and why on refusal. */
static enum dpop_verdict proof_for(const struct http_request *req, const char *proof,
    const char *token, struct dpop_proof *out, char *why, size_t whylen)
{
	const struct config *cfg = req->app->cfg;
	char htu[1200];
	enum dpop_verdict v = DPOP_INVALID;
	if (str_fmt(htu, sizeof htu, "%s%s", cfg->public_url, req->path) != CS_OK) {
		set_why(why, whylen, "the URL is too long");
		return DPOP_INVALID;
	}
	if (strchr(proof, ',') != NULL || strchr(proof, ' ') != NULL) {
		set_why(why, whylen, "exactly one DPoP header with one proof");   /* §4.3 item 1 */
		return DPOP_INVALID;
	}
	struct dpop_expect ex = { .htm = http_method_name(req->method), .htu = htu,
		.access_token = token, .nonce_key = cfg->gateway_dpop_nonce ? req->app->dpop_nonce_key : NULL,
		.now = req->now, .window = cfg->gateway_clock_skew };
	if (dpop_proof_check(proof, &ex, out, &v, why, whylen) != CS_OK) {
		set_why(why, whylen, "the proof could not be checked");
		return DPOP_INVALID;
	}
	if (v != DPOP_VALID)
		return v;
	/* SECURITY: RFC 9449 §11.1: a proof is used once, across every node, for
	 * as long as its iat would be accepted. */
	struct store_conn *c = store_conn(req->app->store);
	enum cs_err e = c == NULL ? CS_EDB :
	    store_replay_use(c, REPLAY_DPOP, out->jti, out->iat + cfg->gateway_clock_skew + 1, req->now);
	if (e != CS_OK) {
		set_why(why, whylen, e == CS_EEXIST ? "the proof was used before" :
		    "the replay cache could not be consulted");
		dpop_proof_clear(out);
		return DPOP_INVALID;
	}
	return DPOP_VALID;
}

bool dpop_at_token(const struct http_request *req, struct http_reply *rep, char jkt[JWS_JKT_LEN + 1])
{
	const char *proof = req->header ? req->header(req->hctx, DPOP_HEADER) : NULL;
	struct dpop_proof p;
	char why[160] = "invalid DPoP proof";
	jkt[0] = '\0';
	memset(&p, 0, sizeof p);
	if (proof == NULL) {
		if (!req->app->cfg->gateway_require_dpop)
			return true;
		refuse(req, rep, 400, DPOP_INVALID, "a DPoP proof is required");
		return false;
	}
	enum dpop_verdict v = proof_for(req, proof, NULL, &p, why, sizeof why);
	if (v != DPOP_VALID) {
		refuse(req, rep, 400, v, why);
		return false;
	}
	memcpy(jkt, p.jkt, JWS_JKT_LEN + 1);
	dpop_proof_clear(&p);
	return true;
}

bool dpop_check_grant(const struct http_request *req, struct http_reply *rep,
    const json_t *claims, const char *grant, int status)
{
	const char *bound = json_string_value(json_object_get(json_object_get(claims, "cnf"), "jkt"));
	const char *proof = req->header ? req->header(req->hctx, DPOP_HEADER) : NULL;
	struct dpop_proof p;
	char why[160] = "invalid DPoP proof";
	enum dpop_verdict v;
	if (bound == NULL)
		return true;
	memset(&p, 0, sizeof p);
	/* SECURITY: a bound grant is no bearer token: without a proof by its key
	 * it opens nothing. */
	if (proof == NULL) {
		refuse(req, rep, status, DPOP_INVALID, "the grant is DPoP-bound: a DPoP proof is required");
		return false;
	}
	if ((v = proof_for(req, proof, grant, &p, why, sizeof why)) != DPOP_VALID) {
		refuse(req, rep, status, v, why);
		return false;
	}
	bool same = strlen(bound) == JWS_JKT_LEN && CRYPTO_memcmp(bound, p.jkt, JWS_JKT_LEN) == 0;
	dpop_proof_clear(&p);
	if (!same) {
		refuse(req, rep, status, DPOP_INVALID, "the proof is signed by another key than the grant's");
		return false;
	}
	return true;
}

void dpop_refuse(const struct http_request *req, struct http_reply *rep, int status,
    const char *why)
{
	refuse(req, rep, status, DPOP_INVALID, why);
}
