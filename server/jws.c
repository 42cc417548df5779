/* jws.c -- the one JWS signature verifier: compact JWS from outside (client
 * assertions, DPoP proofs, the IdP's tokens) and consentd's own, with public
 * JWKs through OpenSSL EVP.  It must never accept an algorithm outside the
 * caller's use's list (never HMAC, never none), and never import a private key. */
#include <stdlib.h>
#include <string.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>
#include "b64.h"
#include "buf.h"
#include "jws.h"
#include "seal.h"

static const char *const alg_names[JWS_ALG__MAX] = {
	[JWS_ES256] = "ES256", [JWS_PS256] = "PS256", [JWS_EDDSA] = "EdDSA", [JWS_RS256] = "RS256",
};

/* Members that only a private or symmetric key has (RFC 7518 §6). */
static const char *const private_members[] = { "d", "p", "q", "dp", "dq", "qi", "oth", "k",
	NULL };

const char *jws_alg_name(enum jws_alg a)
{
	return (unsigned)a < JWS_ALG__MAX ? alg_names[a] : "?";
}

const char *const jws_alg_names_accepted[] = { "ES256", "PS256", "EdDSA", "Ed25519", NULL };

enum jws_alg jws_alg_parse(const char *name)
{
	for (int i = 0; name != NULL && i < JWS_ALG__MAX; i++)
		if (strcmp(name, alg_names[i]) == 0)
			return (enum jws_alg)i;
	/* SECURITY: RFC 9864's fully specified "Ed25519" is EdDSA on the Ed25519
	 * curve alone.  It maps to JWS_EDDSA, whose only keys are Ed25519 ones
	 * (ed25519() refuses any other crv, and jws_verify checks the key's type
	 * again), so it verifies with nothing else. */
	if (name != NULL && strcmp(name, "Ed25519") == 0)
		return JWS_EDDSA;
	return JWS_ALG__MAX;
}

static void set_why(char *why, size_t whylen, const char *s)
{
	/* The reasons are short constants: one longer than the caller's why
	 * leaves it "" (str_fmt's rule), never a cut reason. */
	if (why != NULL && whylen > 0 && str_fmt(why, whylen, "%s", s) != CS_OK)
		why[0] = '\0';
}

/* "key N: reason" for the i-th key of a set (why may be NULL). */
static void why_key(char *why, size_t whylen, size_t i, const char *reason)
{
	/* reason is a constant or a key's why (96 bytes): both fit the callers'
	 * why; one that did not would leave it "" (str_fmt's rule). */
	if (why != NULL && whylen > 0 && str_fmt(why, whylen, "key %zu: %s", i + 1, reason) != CS_OK)
		why[0] = '\0';
}

/* Decodes n base64url characters; *out is malloc'd (NUL-terminated for JSON). */
static bool part_decode(const char *s, size_t n, unsigned char **out, size_t *len)
{
	*out = NULL;
	return b64url_valid(s, n) && b64url_decode_alloc(s, n, out, len) == CS_OK;
}

static bool jwk_member_bytes(const json_t *jwk, const char *name, unsigned char **out, size_t *len)
{
	const char *v = json_string_value(json_object_get(jwk, name));
	return v != NULL && part_decode(v, strlen(v), out, len);
}

/* --- keys ------------------------------------------------------------------ */

static EVP_PKEY *fromdata(const char *type, OSSL_PARAM_BLD *bld)
{
	OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
	EVP_PKEY *pk = NULL;
	if (params == NULL || ctx == NULL || EVP_PKEY_fromdata_init(ctx) != 1 ||
	    EVP_PKEY_fromdata(ctx, &pk, EVP_PKEY_PUBLIC_KEY, params) != 1)
		pk = NULL;
	EVP_PKEY_CTX_free(ctx);
	OSSL_PARAM_free(params);
	return pk;
}

static EVP_PKEY *ec_p256(const json_t *jwk, char *why, size_t whylen)
{
	unsigned char *x = NULL, *y = NULL, pt[65];
	size_t xl = 0, yl = 0;
	EVP_PKEY *pk = NULL;
	OSSL_PARAM_BLD *bld = NULL;
	EVP_PKEY_CTX *chk = NULL;
	if (!json_is_string(json_object_get(jwk, "crv")) ||
	    strcmp(json_string_value(json_object_get(jwk, "crv")), "P-256") != 0) {
		set_why(why, whylen, "an EC key must be on P-256");
		goto out;
	}
	if (!jwk_member_bytes(jwk, "x", &x, &xl) || !jwk_member_bytes(jwk, "y", &y, &yl) || xl != 32 ||
	    yl != 32) {
		set_why(why, whylen, "an EC key needs x and y of 32 bytes");
		goto out;
	}
	pt[0] = 0x04;
	memcpy(pt + 1, x, 32);
	memcpy(pt + 33, y, 32);
	if ((bld = OSSL_PARAM_BLD_new()) == NULL ||
	    OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) != 1 ||
	    OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pt, sizeof pt) != 1 ||
	    (pk = fromdata("EC", bld)) == NULL) {
		set_why(why, whylen, "the EC point is not on P-256");
		goto out;
	}
	/* SECURITY: a point off the curve would leak nothing here (we only
	 * verify), but it is no key: refuse it.  The quick check (on the curve,
	 * not infinity) is the whole check for P-256, whose cofactor is 1. */
	if ((chk = EVP_PKEY_CTX_new_from_pkey(NULL, pk, NULL)) == NULL ||
	    EVP_PKEY_public_check_quick(chk) != 1) {
		EVP_PKEY_free(pk);
		pk = NULL;
		set_why(why, whylen, "the EC point is not on P-256");
	}
out:
	EVP_PKEY_CTX_free(chk);
	OSSL_PARAM_BLD_free(bld);
	free(x);
	free(y);
	return pk;
}

static EVP_PKEY *rsa_pub(const json_t *jwk, char *why, size_t whylen)
{
	unsigned char *n = NULL, *e = NULL;
	size_t nl = 0, el = 0;
	BIGNUM *bn = NULL, *be = NULL;
	OSSL_PARAM_BLD *bld = NULL;
	EVP_PKEY *pk = NULL;
	if (!jwk_member_bytes(jwk, "n", &n, &nl) || !jwk_member_bytes(jwk, "e", &e, &el) || el > 8) {
		set_why(why, whylen, "an RSA key needs n and e");
		goto out;
	}
	if (nl < 256 || nl > 1024 || n[0] == 0) {
		set_why(why, whylen, "an RSA key must have 2048 to 8192 bits");
		goto out;
	}
	if ((bn = BN_bin2bn(n, (int)nl, NULL)) == NULL || (be = BN_bin2bn(e, (int)el, NULL)) == NULL ||
	    !BN_is_odd(be) || BN_is_one(be) || (bld = OSSL_PARAM_BLD_new()) == NULL ||
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) != 1 ||
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be) != 1 ||
	    (pk = fromdata("RSA", bld)) == NULL)
		set_why(why, whylen, "the RSA key is not usable");
out:
	OSSL_PARAM_BLD_free(bld);
	BN_free(bn);
	BN_free(be);
	free(n);
	free(e);
	return pk;
}

static EVP_PKEY *ed25519(const json_t *jwk, char *why, size_t whylen)
{
	unsigned char *x = NULL;
	size_t xl = 0;
	EVP_PKEY *pk = NULL;
	const char *crv = json_string_value(json_object_get(jwk, "crv"));
	if (crv == NULL || strcmp(crv, "Ed25519") != 0)
		set_why(why, whylen, "an OKP key must be Ed25519");
	else if (!jwk_member_bytes(jwk, "x", &x, &xl) || xl != 32)
		set_why(why, whylen, "an Ed25519 key needs x of 32 bytes");
	else if ((pk = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, x, 32)) == NULL)
		set_why(why, whylen, "the Ed25519 key is not usable");
	free(x);
	return pk;
}

/* RFC 7638: SHA-256 of the required members in lexical order, no spaces. */
static enum cs_err thumbprint(const json_t *jwk, const char *kty, char out[JWS_JKT_LEN + 1])
{
	static const char *const ec[] = { "crv", "kty", "x", "y", NULL };
	static const char *const rsa[] = { "e", "kty", "n", NULL };
	static const char *const okp[] = { "crv", "kty", "x", NULL };
	const char *const *m = strcmp(kty, "EC") == 0 ? ec : strcmp(kty, "RSA") == 0 ? rsa : okp;
	json_t *t = json_object();
	char *s = NULL;
	unsigned char h[32];
	enum cs_err e = CS_ENOMEM;
	if (t == NULL)
		return CS_ENOMEM;
	for (size_t i = 0; m[i] != NULL; i++) {
		json_t *v = json_object_get(jwk, m[i]);
		if (!json_is_string(v)) {
			e = CS_EINVAL;
			goto out;
		}
		if (json_object_set(t, m[i], v) != 0)
			goto out;
	}
	if ((s = json_dumps(t, JSON_COMPACT | JSON_SORT_KEYS)) == NULL)
		goto out;
	if (!sha256_bytes(s, strlen(s), h)) {
		e = CS_ECRYPTO;
		goto out;
	}
	e = b64url_encode(h, sizeof h, out, JWS_JKT_LEN + 1);
out:
	free(s);
	json_decref(t);
	return e;
}

/* The lowest algorithm of a non-empty set. */
static enum jws_alg first_alg(jws_algs s)
{
	for (int i = 0; i < JWS_ALG__MAX; i++)
		if (s & JWS_ALG_BIT(i))
			return (enum jws_alg)i;
	return JWS_ALG__MAX;
}

enum cs_err jws_key_from_jwk(const json_t *jwk, struct jws_key **out, char *why, size_t whylen)
{
	return jws_key_from_jwk_for(jwk, JWS_ALGS_CLIENT_ASSERTION, out, why, whylen);
}

/* The JWK is a public key (SECURITY: a private key in a public place is
 * refused outright, RFC 9449 §4.3 for proofs; a JWKS with private members is
 * a leaked key) of a type that fits allow: NULL with *fits the algorithms it
 * may verify, or why not. */
static const char *key_type_check(const json_t *jwk, jws_algs allow, jws_algs *fits)
{
	if (!json_is_object(jwk))
		return "a JWK must be a JSON object";
	for (size_t i = 0; private_members[i] != NULL; i++) {
		if (json_object_get(jwk, private_members[i]) != NULL)
			return "the JWK carries a private or symmetric key";
	}
	const char *kty = json_string_value(json_object_get(jwk, "kty"));
	if (kty == NULL)
		return "the JWK has no kty";
	if (strcmp(kty, "EC") == 0)
		*fits = JWS_ALG_BIT(JWS_ES256);
	else if (strcmp(kty, "RSA") == 0)
		*fits = JWS_ALG_BIT(JWS_PS256) | JWS_ALG_BIT(JWS_RS256);
	else if (strcmp(kty, "OKP") == 0)
		*fits = JWS_ALG_BIT(JWS_EDDSA);
	else
		return "the key type is not EC, RSA or OKP";
	/* SECURITY: the key verifies only what its use allows and its type fits. */
	if ((*fits &= allow) == 0)
		return "the key type is not allowed here";
	return NULL;
}

/* The JWK's optional alg (one its type fits: *fits narrows to it) and kid
 * (1 to 128 characters): NULL, or what is wrong. */
static const char *alg_kid_check(const json_t *jwk, jws_algs *fits)
{
	json_t *ja = json_object_get(jwk, "alg");
	enum jws_alg pinned = ja != NULL ? jws_alg_parse(json_string_value(ja)) : JWS_ALG__MAX;
	if (ja != NULL && (!json_is_string(ja) || pinned == JWS_ALG__MAX ||
	    (*fits & JWS_ALG_BIT(pinned)) == 0))
		return "the JWK's alg is not one allowed for its key type";
	if (ja != NULL)
		*fits = JWS_ALG_BIT(pinned);
	json_t *kid = json_object_get(jwk, "kid");
	if (kid != NULL && (!json_is_string(kid) || json_string_length(kid) == 0 ||
	    json_string_length(kid) > 128))
		return "the JWK's kid must be a string of 1 to 128 characters";
	return NULL;
}

enum cs_err jws_key_from_jwk_for(const json_t *jwk, jws_algs allow, struct jws_key **out,
    char *why, size_t whylen)
{
	struct jws_key *k = NULL;
	EVP_PKEY *pk = NULL;
	jws_algs fits = 0;
	enum cs_err e = CS_EINVAL;
	const char *refusal;
	set_why(why, whylen, "not a usable public key");
	if ((refusal = key_type_check(jwk, allow, &fits)) != NULL) {
		set_why(why, whylen, refusal);
		return CS_EINVAL;
	}
	const char *kty = json_string_value(json_object_get(jwk, "kty"));
	if (strcmp(kty, "EC") == 0)
		pk = ec_p256(jwk, why, whylen);
	else if (strcmp(kty, "RSA") == 0)
		pk = rsa_pub(jwk, why, whylen);
	else
		pk = ed25519(jwk, why, whylen);
	if (pk == NULL)
		return CS_EINVAL;
	if ((refusal = alg_kid_check(jwk, &fits)) != NULL) {
		set_why(why, whylen, refusal);
		goto fail;
	}
	json_t *kid = json_object_get(jwk, "kid");
	if ((k = calloc(1, sizeof *k)) == NULL) {
		e = CS_ENOMEM;
		goto fail;
	}
	if (kid != NULL && (k->kid = strdup(json_string_value(kid))) == NULL) {
		e = CS_ENOMEM;
		goto fail;
	}
	if ((e = thumbprint(jwk, kty, k->jkt)) != CS_OK)
		goto fail;
	k->pkey = pk;
	k->alg = first_alg(fits);
	k->algs = fits;
	*out = k;
	return CS_OK;
fail:
	if (k != NULL)
		free(k->kid);
	free(k);
	EVP_PKEY_free(pk);
	return e;
}

void jws_key_free(struct jws_key *k)
{
	if (k == NULL)
		return;
	EVP_PKEY_free(k->pkey);
	free(k->kid);
	free(k);
}

enum cs_err jws_keyset_parse(const char *json, struct jws_keyset **out, char *why, size_t whylen)
{
	return jws_keyset_parse_for(json, JWS_ALGS_CLIENT_ASSERTION, out, why, whylen);
}

enum cs_err jws_keyset_parse_for(const char *json, jws_algs allow, struct jws_keyset **out,
    char *why, size_t whylen)
{
	json_error_t jerr;
	json_t *doc = json_loads(json, JSON_REJECT_DUPLICATES, &jerr);
	json_t *keys = json_object_get(doc, "keys");
	struct jws_keyset *ks = NULL;
	enum cs_err e = CS_EINVAL;
	char kwhy[96];
	if (!json_is_array(keys) || json_array_size(keys) == 0 ||
	    json_array_size(keys) > JWS_KEYSET_MAX) {
		set_why(why, whylen, "not a JWKS with 1 to 32 keys");
		goto out;
	}
	if ((ks = calloc(1, sizeof *ks)) == NULL ||
	    (ks->keys = calloc(json_array_size(keys), sizeof *ks->keys)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < json_array_size(keys); i++) {
		json_t *k = json_array_get(keys, i);
		const char *use = json_string_value(json_object_get(k, "use"));
		if (json_object_get(k, "use") != NULL && (use == NULL || strcmp(use, "sig") != 0)) {
			e = CS_EINVAL;
			why_key(why, whylen, i, "use must be sig");
			goto out;
		}
		if ((e = jws_key_from_jwk_for(k, allow, &ks->keys[i], kwhy, sizeof kwhy)) != CS_OK) {
			why_key(why, whylen, i, kwhy);
			goto out;
		}
		ks->n++;
		for (size_t j = 0; j < i; j++) {
			if (ks->keys[i]->kid != NULL && ks->keys[j]->kid != NULL &&
			    strcmp(ks->keys[i]->kid, ks->keys[j]->kid) == 0) {
				e = CS_EINVAL;
				why_key(why, whylen, i, "kid is used twice");
				goto out;
			}
		}
	}
	*out = ks;
	ks = NULL;
	e = CS_OK;
out:
	jws_keyset_free(ks);
	json_decref(doc);
	return e;
}

void jws_keyset_free(struct jws_keyset *ks)
{
	if (ks == NULL)
		return;
	for (size_t i = 0; i < ks->n; i++)
		jws_key_free(ks->keys[i]);
	free(ks->keys);
	free(ks);
}

/* --- compact JWS ------------------------------------------------------------- */

static json_t *segment_json(const char *s, size_t n)
{
	unsigned char *raw = NULL;
	size_t rl = 0;
	json_t *v = NULL;
	if (!part_decode(s, n, &raw, &rl))
		return NULL;
	if (memchr(raw, '\0', rl) == NULL)
		v = json_loadb((const char *)raw, rl, JSON_REJECT_DUPLICATES, NULL);
	free(raw);
	if (v != NULL && !json_is_object(v)) {
		json_decref(v);
		v = NULL;
	}
	return v;
}

/* "the algorithm is not A, B or C", naming allow's algorithms (EdDSA with
 * RFC 9864's "Ed25519"). */
static void why_alg(char *why, size_t whylen, jws_algs allow)
{
	const char *names[JWS_ALG__MAX + 1];
	size_t n = 0;
	struct buf b;
	for (int i = 0; i < JWS_ALG__MAX; i++) {
		if ((allow & JWS_ALG_BIT(i)) == 0)
			continue;
		names[n++] = alg_names[i];
		if (i == JWS_EDDSA)
			names[n++] = "Ed25519";
	}
	buf_init(&b, 128);
	enum cs_err e = buf_puts(&b, "the algorithm is not ");
	for (size_t i = 0; i < n && e == CS_OK; i++) {
		if (i > 0)
			e = buf_puts(&b, i + 1 == n ? " or " : ", ");
		if (e == CS_OK)
			e = buf_puts(&b, names[i]);
	}
	set_why(why, whylen, e == CS_OK && b.data != NULL ? b.data : "the algorithm is not allowed");
	buf_clear(&b);
}

enum cs_err jws_parse(const char *compact, jws_algs allow, struct jws_parsed *out, char *why,
    size_t whylen)
{
	struct jws_parsed p;
	memset(&p, 0, sizeof p);
	size_t n = compact != NULL ? strnlen(compact, JWS_MAX_COMPACT + 1) : 0;
	if (n == 0 || n > JWS_MAX_COMPACT) {
		set_why(why, whylen, "empty or too long");
		return CS_EINVAL;
	}
	const char *d1 = memchr(compact, '.', n);
	const char *d2 = d1 ? memchr(d1 + 1, '.', n - (size_t)(d1 + 1 - compact)) : NULL;
	if (d1 == NULL || d2 == NULL || memchr(d2 + 1, '.', n - (size_t)(d2 + 1 - compact)) != NULL ||
	    d1 == compact || d2 == d1 + 1 || d2 + 1 == compact + n) {
		set_why(why, whylen, "not a compact JWS of three non-empty parts");
		return CS_EINVAL;
	}
	if ((p.header = segment_json(compact, (size_t)(d1 - compact))) == NULL) {
		set_why(why, whylen, "the header is not a JSON object");
		goto fail;
	}
	const char *alg = json_string_value(json_object_get(p.header, "alg"));
	/* SECURITY: the algorithm comes from the use's fixed allowlist of
	 * asymmetric ones; none and HMAC never reach a key. */
	if ((p.alg = jws_alg_parse(alg)) == JWS_ALG__MAX || (allow & JWS_ALG_BIT(p.alg)) == 0) {
		why_alg(why, whylen, allow);
		goto fail;
	}
	if (json_object_get(p.header, "crit") != NULL) {
		set_why(why, whylen, "no critical header is understood");
		goto fail;
	}
	if ((p.payload = segment_json(d1 + 1, (size_t)(d2 - d1 - 1))) == NULL) {
		set_why(why, whylen, "the payload is not a JSON object");
		goto fail;
	}
	if (!part_decode(d2 + 1, n - (size_t)(d2 + 1 - compact), &p.sig, &p.sig_len)) {
		set_why(why, whylen, "the signature is not base64url");
		goto fail;
	}
	p.signing_input_len = (size_t)(d2 - compact);
	if ((p.signing_input = strndup(compact, p.signing_input_len)) == NULL)
		goto fail;
	*out = p;
	return CS_OK;
fail:
	jws_parsed_clear(&p);
	return CS_EINVAL;
}

void jws_parsed_clear(struct jws_parsed *p)
{
	if (p == NULL)
		return;
	json_decref(p->header);
	json_decref(p->payload);
	free(p->signing_input);
	free(p->sig);
	memset(p, 0, sizeof *p);
}

/* JWS ES256 signatures are r || s (32 bytes each); EVP wants DER. */
static unsigned char *es256_der(const unsigned char *sig, size_t len, size_t *der_len)
{
	ECDSA_SIG *es = NULL;
	BIGNUM *r = NULL, *s = NULL;
	unsigned char *der = NULL;
	if (len != 64)
		return NULL;
	if ((es = ECDSA_SIG_new()) == NULL || (r = BN_bin2bn(sig, 32, NULL)) == NULL ||
	    (s = BN_bin2bn(sig + 32, 32, NULL)) == NULL || ECDSA_SIG_set0(es, r, s) != 1) {
		BN_free(r);
		BN_free(s);
		ECDSA_SIG_free(es);
		return NULL;
	}
	int n = i2d_ECDSA_SIG(es, &der);
	ECDSA_SIG_free(es);
	if (n <= 0)
		return NULL;
	*der_len = (size_t)n;
	return der;
}

bool jws_verify(const struct jws_parsed *p, const struct jws_key *k)
{
	return jws_verify_input(k, p->alg, p->signing_input, p->signing_input_len, p->sig,
	    p->sig_len);
}

bool jws_verify_input(const struct jws_key *k, enum jws_alg alg, const void *input, size_t n,
    const unsigned char *sig_in, size_t sig_in_len)
{
	EVP_MD_CTX *md = NULL;
	EVP_PKEY_CTX *pctx = NULL;
	unsigned char *der = NULL;
	const unsigned char *sig = sig_in;
	size_t sig_len = sig_in_len;
	bool ok = false;
	/* SECURITY: the key decides the algorithms; a header naming another one
	 * never verifies (no RSA key used as PSS for an ES256 header, etc.). */
	const EVP_MD *sha = alg_sha256();
	if ((unsigned)alg >= JWS_ALG__MAX || (k->algs & JWS_ALG_BIT(alg)) == 0 || sha == NULL ||
	    (md = EVP_MD_CTX_new()) == NULL)
		goto out;
	switch (alg) {
	case JWS_ES256:
		if ((der = es256_der(sig_in, sig_in_len, &sig_len)) == NULL)
			goto out;
		sig = der;
		if (EVP_DigestVerifyInit(md, NULL, sha, NULL, k->pkey) != 1)
			goto out;
		break;
	case JWS_PS256:
		if (EVP_DigestVerifyInit(md, &pctx, sha, NULL, k->pkey) != 1 ||
		    EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) != 1 ||
		    EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) != 1 ||
		    EVP_PKEY_CTX_set_rsa_mgf1_md(pctx, sha) != 1)
			goto out;
		break;
	case JWS_RS256:
		if (EVP_DigestVerifyInit(md, &pctx, sha, NULL, k->pkey) != 1 ||
		    EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) != 1)
			goto out;
		break;
	case JWS_EDDSA:
		if (sig_len != 64 || EVP_PKEY_get_id(k->pkey) != EVP_PKEY_ED25519 ||
		    EVP_DigestVerifyInit(md, NULL, NULL, NULL, k->pkey) != 1)
			goto out;
		break;
	default:
		goto out;
	}
	ok = EVP_DigestVerify(md, sig, sig_len, input, n) == 1;
out:
	OPENSSL_free(der);
	EVP_MD_CTX_free(md);
	return ok;
}
