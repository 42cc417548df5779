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
#include "audit.h"
#include "b64.h"
#include "buf.h"
#include "dpop.h"
#include "store_replay.h"
#include "seal.h"

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
	return sha256_bytes(data, n, h) && b64url_encode(h, sizeof h, out, JWS_JKT_LEN + 1) == CS_OK;
}

/* htu without its query and fragment (RFC 9449 §4.3 item 9). */
static bool htu_matches(const char *htu, const char *want)
{
	size_t n = strcspn(htu, "?#");
	return n == strlen(want) && memcmp(htu, want, n) == 0;
}

/* The proof is a dpop+jwt signed by the jwk in its header: true with *k
 * that key (the caller frees it), else false with why. */
static bool proof_signed(const struct jws_parsed *p, struct jws_key **k, char *why, size_t whylen)
{
	char kwhy[96];
	const char *typ = json_string_value(json_object_get(p->header, "typ"));
	if (typ == NULL || strcmp(typ, "dpop+jwt") != 0) {
		set_why(why, whylen, "typ is not dpop+jwt");
		return false;
	}
	/* SECURITY: the key comes with the proof; it must be a public key, and
	 * the header's algorithm must be that key's (no algorithm confusion). */
	if (jws_key_from_jwk_for(json_object_get(p->header, "jwk"), JWS_ALGS_DPOP_PROOF, k, kwhy,
	    sizeof kwhy) != CS_OK) {
		/* kwhy is shorter than any caller's why; too long, it would leave why "". */
		if (why != NULL && whylen > 0 && str_fmt(why, whylen, "jwk: %s",
		    json_object_get(p->header, "jwk") ? kwhy : "missing") != CS_OK)
			why[0] = '\0';
		return false;
	}
	if (!jws_verify(p, *k)) {
		set_why(why, whylen, "the signature does not verify with the proof's jwk");
		return false;
	}
	return true;
}

/* The proof's jti, and its htm, htu and iat against this request: NULL with
 * *t the iat, or what is wrong. */
static const char *request_claims_check(json_t *payload, const struct dpop_expect *e, double *t)
{
	json_t *jti = json_object_get(payload, "jti");
	if (!json_is_string(jti) || json_string_length(jti) == 0 ||
	    json_string_length(jti) > DPOP_JTI_MAX)
		return "jti is missing or too long";
	const char *htm = json_string_value(json_object_get(payload, "htm"));
	if (htm == NULL || strcmp(htm, e->htm) != 0)
		return "htm is not this request's method";
	const char *htu = json_string_value(json_object_get(payload, "htu"));
	if (htu == NULL || !htu_matches(htu, e->htu))
		return "htu is not this request's URL";
	json_t *iat = json_object_get(payload, "iat");
	if (!json_is_integer(iat) && !json_is_real(iat))
		return "iat is missing";
	*t = json_number_value(iat);
	if (!(*t >= (double)(e->now - e->window) && *t <= (double)(e->now + e->window)))
		return "iat is outside the accepted window";
	return NULL;
}

enum cs_err dpop_proof_check(const char *proof, const struct dpop_expect *e,
    struct dpop_proof *out, enum dpop_verdict *verdict, char *why, size_t whylen)
{
	struct jws_parsed p;
	struct jws_key *k = NULL;
	enum cs_err r = CS_OK;
	char ath[JWS_JKT_LEN + 1];
	*verdict = DPOP_INVALID;
	if (jws_parse(proof, JWS_ALGS_DPOP_PROOF, &p, why, whylen) != CS_OK)
		return CS_OK;
	if (!proof_signed(&p, &k, why, whylen))
		goto out;
	double t = 0;
	const char *refusal = request_claims_check(p.payload, e, &t);
	if (refusal != NULL) {
		set_why(why, whylen, refusal);
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
	if ((out->jti = strdup(json_string_value(json_object_get(p.payload, "jti")))) == NULL) {
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

void dpop_refused(struct app *app, const struct dpop_request *rq, const char *why)
{
	struct store_conn *c = store_conn(app->store);
	char before[16], after[DPOP_WHY_MAX + 4], detail[AUDIT_REFUSAL_DETAIL_MAX + 1];
	if (c == NULL)
		return;
	/* Every refusal is audited: "METHOD path: why", the path left out when
	 * it is too long, never the reason (audit_refusal_detail). */
	if (str_fmt(before, sizeof before, "%s ", rq->method) != CS_OK ||
	    str_fmt(after, sizeof after, ": %s", why) != CS_OK ||
	    audit_refusal_detail(detail, before, rq->path, after) != CS_OK)
		return;
	/* The refusal stands whether or not its entry could be written. */
	enum cs_err ae = audit_append_alone(c, &(struct audit_entry){ .ts = rq->now,
	    .actor = rq->actor, .action = "dpop.refused", .outcome = "refused", .detail = detail });
	(void)ae;
}

/* Checks rq's proof and records its jti; the verdict and why on refusal. */
static enum dpop_verdict proof_for(struct app *app, const struct dpop_request *rq,
    const char *token, struct dpop_proof *out, char *why, size_t whylen)
{
	const struct config *cfg = app->cfg;
	const char *proof = rq->proof;
	char htu[1200];
	enum dpop_verdict v = DPOP_INVALID;
	if (str_fmt(htu, sizeof htu, "%s%s", cfg->public_url, rq->path) != CS_OK) {
		set_why(why, whylen, "the URL is too long");
		return DPOP_INVALID;
	}
	if (strchr(proof, ',') != NULL || strchr(proof, ' ') != NULL) {
		set_why(why, whylen, "exactly one DPoP header with one proof");   /* §4.3 item 1 */
		return DPOP_INVALID;
	}
	struct dpop_expect ex = { .htm = rq->method, .htu = htu,
		.access_token = token, .nonce_key = cfg->gateway_dpop_nonce ? app->dpop_nonce_key : NULL,
		.now = rq->now, .window = cfg->gateway_clock_skew };
	if (dpop_proof_check(proof, &ex, out, &v, why, whylen) != CS_OK) {
		set_why(why, whylen, "the proof could not be checked");
		return DPOP_INVALID;
	}
	if (v != DPOP_VALID)
		return v;
	/* SECURITY: RFC 9449 §11.1: a proof is used once, across every node, for
	 * as long as its iat would be accepted. */
	struct store_conn *c = store_conn(app->store);
	enum cs_err e = c == NULL ? CS_EDB :
	    store_replay_use(c, REPLAY_DPOP, out->jti, out->iat + cfg->gateway_clock_skew + 1, rq->now);
	if (e != CS_OK) {
		set_why(why, whylen, e == CS_EEXIST ? "the proof was used before" :
		    "the replay cache could not be consulted");
		dpop_proof_clear(out);
		return DPOP_INVALID;
	}
	return DPOP_VALID;
}

/* A refusal: audited, and its verdict returned. */
static enum dpop_verdict refused(struct app *app, const struct dpop_request *rq,
    enum dpop_verdict v, char *why, size_t whylen, const char *say)
{
	if (say != NULL)
		set_why(why, whylen, say);
	dpop_refused(app, rq, why);
	return v;
}

enum dpop_verdict dpop_at_token(struct app *app, const struct dpop_request *rq,
    char jkt[JWS_JKT_LEN + 1], char *why, size_t whylen)
{
	struct dpop_proof p;
	jkt[0] = '\0';
	set_why(why, whylen, "invalid DPoP proof");
	memset(&p, 0, sizeof p);
	if (rq->proof == NULL) {
		if (!app->cfg->gateway_require_dpop)
			return DPOP_VALID;
		return refused(app, rq, DPOP_INVALID, why, whylen, "a DPoP proof is required");
	}
	enum dpop_verdict v = proof_for(app, rq, NULL, &p, why, whylen);
	if (v != DPOP_VALID)
		return refused(app, rq, v, why, whylen, NULL);
	memcpy(jkt, p.jkt, JWS_JKT_LEN + 1);
	dpop_proof_clear(&p);
	return DPOP_VALID;
}

enum dpop_verdict dpop_check_grant(struct app *app, const struct dpop_request *rq,
    const json_t *claims, const char *grant, char *why, size_t whylen)
{
	const char *bound = json_string_value(json_object_get(json_object_get(claims, "cnf"), "jkt"));
	struct dpop_proof p;
	enum dpop_verdict v;
	set_why(why, whylen, "invalid DPoP proof");
	if (bound == NULL)
		return DPOP_VALID;
	memset(&p, 0, sizeof p);
	/* SECURITY: a bound grant is no bearer token: without a proof by its key
	 * it opens nothing. */
	if (rq->proof == NULL)
		return refused(app, rq, DPOP_INVALID, why, whylen,
		    "the grant is DPoP-bound: a DPoP proof is required");
	if ((v = proof_for(app, rq, grant, &p, why, whylen)) != DPOP_VALID)
		return refused(app, rq, v, why, whylen, NULL);
	bool same = strlen(bound) == JWS_JKT_LEN && CRYPTO_memcmp(bound, p.jkt, JWS_JKT_LEN) == 0;
	dpop_proof_clear(&p);
	if (!same)
		return refused(app, rq, DPOP_INVALID, why, whylen,
		    "the proof is signed by another key than the grant's");
	return DPOP_VALID;
}
