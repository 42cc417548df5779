/* test_oidc.c -- upstream ID/subject token validation against a JWKS built here
 * (RSA-2048 and P-256 keys made with OpenSSL, tokens signed by hand), with the
 * attacker's tokens first-class; the outbound URL policy of httpc. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "buf.h"
#include "testutil.h"
#include "httpc.h"
#include "oidc.h"

#define NOW     1700000000
#define ISSUER  "https://idp.test"
#define CLIENT  "consentd"
#define NONCE   "n-0S6_WzA2Mj"
#define SKEW    60

/* For setup code that runs outside a test, where ck_assert may not be used. */
#define must(x) do { if (!(x)) { fprintf(stderr, "test_oidc setup: %s\n", #x); abort(); } } while (0)

static EVP_PKEY *rsa_key, *ec_key;
static char *rsa_jwk;          /* public JWK JSON of rsa_key, kid rsa1 */
static char *rsa_pem;          /* its SubjectPublicKeyInfo PEM */
static char *jwks;             /* the provider's JWKS document */

/* --- helpers (independent of the code under test) ----------------------- */

static char *b64u(const void *p, size_t n)
{
	size_t cap = 4 * ((n + 2) / 3) + 1;
	char *s = malloc(cap);
	must(s != NULL);
	EVP_EncodeBlock((unsigned char *)s, p, (int)n);
	size_t len = strlen(s);
	while (len > 0 && s[len - 1] == '=')
		s[--len] = '\0';
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '+')
			s[i] = '-';
		else if (s[i] == '/')
			s[i] = '_';
	}
	return s;
}

static char *b64u_str(const char *s)
{
	return b64u(s, strlen(s));
}

static char *join3(const char *a, const char *b, const char *c)
{
	size_t n = strlen(a) + strlen(b) + strlen(c) + 3;
	char *r = malloc(n);
	must(r != NULL);
	ck_assert_int_eq(str_fmt(r, n, "%s.%s.%s", a, b, c), CS_OK);
	return r;
}

static char *bn_b64u(EVP_PKEY *k, const char *param, size_t pad)
{
	BIGNUM *bn = NULL;
	unsigned char buf[1024];
	must(EVP_PKEY_get_bn_param(k, param, &bn) == 1);
	int n = pad ? BN_bn2binpad(bn, buf, (int)pad) : BN_bn2bin(bn, buf);
	must(n > 0);
	BN_free(bn);
	return b64u(buf, (size_t)n);
}

static char *rsa_public_jwk(EVP_PKEY *k, const char *kid, const char *extra)
{
	char *n = bn_b64u(k, OSSL_PKEY_PARAM_RSA_N, 0), *e = bn_b64u(k, OSSL_PKEY_PARAM_RSA_E, 0);
	size_t cap = strlen(n) + strlen(e) + strlen(kid) + strlen(extra) + 128;
	char *s = malloc(cap);
	must(s != NULL);
	must(str_fmt(s, cap, "{\"kty\":\"RSA\",\"kid\":\"%s\",\"n\":\"%s\",\"e\":\"%s\"%s}",
	    kid, n, e, extra) == CS_OK);
	free(n);
	free(e);
	return s;
}

static char *ec_public_jwk(EVP_PKEY *k, const char *kid, const char *extra)
{
	char *x = bn_b64u(k, OSSL_PKEY_PARAM_EC_PUB_X, 32), *y = bn_b64u(k, OSSL_PKEY_PARAM_EC_PUB_Y, 32);
	size_t cap = strlen(x) + strlen(y) + strlen(kid) + strlen(extra) + 128;
	char *s = malloc(cap);
	must(s != NULL);
	must(str_fmt(s, cap, "{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"%s\",\"x\":\"%s\",\"y\":\"%s\"%s}",
	    kid, x, y, extra) == CS_OK);
	free(x);
	free(y);
	return s;
}

/* The JWS signature of input with alg (RS256, PS256, ES256) and key, base64url. */
static char *sign_b64u(const char *alg, EVP_PKEY *k, const char *input)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	EVP_PKEY_CTX *pctx = NULL;
	unsigned char sig[1024];
	size_t siglen = sizeof sig;
	char *out;
	ck_assert_ptr_nonnull(ctx);
	ck_assert_int_eq(EVP_DigestSignInit(ctx, &pctx, EVP_sha256(), NULL, k), 1);
	if (strcmp(alg, "PS256") == 0) {
		ck_assert_int_eq(EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING), 1);
		ck_assert_int_eq(EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST), 1);
	}
	ck_assert_int_eq(EVP_DigestSign(ctx, sig, &siglen, (const unsigned char *)input,
	    strlen(input)), 1);
	EVP_MD_CTX_free(ctx);
	if (strcmp(alg, "ES256") == 0) {
		/* DER ECDSA-Sig-Value -> R || S, 32 bytes each (RFC 7518 §3.4). */
		const unsigned char *p = sig;
		ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)siglen);
		unsigned char rs[64];
		ck_assert_ptr_nonnull(es);
		ck_assert_int_eq(BN_bn2binpad(ECDSA_SIG_get0_r(es), rs, 32), 32);
		ck_assert_int_eq(BN_bn2binpad(ECDSA_SIG_get0_s(es), rs + 32, 32), 32);
		ECDSA_SIG_free(es);
		return b64u(rs, sizeof rs);
	}
	out = b64u(sig, siglen);
	return out;
}

/* A compact JWS of header and payload (JSON texts) signed with alg and k. */
static char *make_jws(const char *header, const char *payload, const char *alg, EVP_PKEY *k)
{
	char *h = b64u_str(header), *p = b64u_str(payload);
	size_t n = strlen(h) + strlen(p) + 2;
	char *input = malloc(n);
	ck_assert_ptr_nonnull(input);
	ck_assert_int_eq(str_fmt(input, n, "%s.%s", h, p), CS_OK);
	char *s = sign_b64u(alg, k, input);
	char *tok = join3(h, p, s);
	free(h);
	free(p);
	free(s);
	free(input);
	return tok;
}

/* The default ID token claims; tests change them. */
static json_t *claims_default(void)
{
	json_t *c = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:I, s:s}",
	    "iss", ISSUER, "sub", "alice", "aud", CLIENT, "exp", (json_int_t)(NOW + 300),
	    "iat", (json_int_t)(NOW - 10), "nonce", NONCE, "auth_time", (json_int_t)(NOW - 20),
	    "name", "Alice");
	ck_assert_ptr_nonnull(c);
	return c;
}

/* A token of claims (stolen reference) with a standard header. */
static char *token_with(const char *alg, const char *kid, json_t *claims)
{
	char header[256];
	char *payload = json_dumps(claims, JSON_COMPACT);
	ck_assert_ptr_nonnull(payload);
	ck_assert_int_eq(str_fmt(header, sizeof header, "{\"alg\":\"%s\",\"kid\":\"%s\",\"typ\":\"JWT\"}", alg, kid), CS_OK);
	char *t = make_jws(header, payload, alg, strcmp(alg, "ES256") == 0 ? ec_key : rsa_key);
	free(payload);
	json_decref(claims);
	return t;
}

static char *token(const char *alg, const char *kid)
{
	return token_with(alg, kid, claims_default());
}

static const char *auds[] = { CLIENT };

static struct oidc_expect expect_default(void)
{
	struct oidc_expect ex;
	memset(&ex, 0, sizeof ex);
	ex.audiences = auds;
	ex.naudiences = 1;
	ex.client_id = CLIENT;
	ex.nonce = NONCE;
	ex.now = NOW;
	ex.max_age = -1;
	return ex;
}

static struct oidc_provider *provider(void)
{
	struct oidc_provider *p = NULL;
	ck_assert_int_eq(oidc_provider_new(ISSUER, SKEW, &p), CS_OK);
	ck_assert_int_eq(oidc_set_jwks(p, jwks), CS_OK);
	return p;
}

/* Validates t (freed) with ex; returns the result, checks the out-parameter
 * contract and that the reason never echoes token content. */
static enum cs_err check_ex(const char *t, const struct oidc_expect *ex)
{
	struct oidc_provider *p = provider();
	json_t *claims = NULL;
	char why[128];
	enum cs_err e = oidc_validate(p, t, ex, &claims, why, sizeof why);
	if (getenv("TEST_OIDC_WHY") != NULL)
		fprintf(stderr, "%s: %d %s\n", tcase_name(), (int)e, why);
	if (e == CS_OK) {
		ck_assert_ptr_nonnull(claims);
		ck_assert(json_is_object(claims));
		ck_assert_str_eq(why, "");
	} else {
		ck_assert_ptr_null(claims);
		ck_assert_int_gt((int)strlen(why), 0);
		ck_assert_ptr_null(strstr(why, "alice"));
		ck_assert_ptr_null(strstr(why, "evil"));
		ck_assert_ptr_null(strstr(why, "eyJ"));
	}
	json_decref(claims);
	oidc_provider_free(p);
	return e;
}

static enum cs_err check(char *t)
{
	struct oidc_expect ex = expect_default();
	enum cs_err e = check_ex(t, &ex);
	free(t);
	return e;
}

static enum cs_err check_claims(json_t *c)
{
	return check(token_with("RS256", "rsa1", c));
}

/* --- valid tokens ------------------------------------------------------- */

START_TEST(test_oidc_validate_valid_rs256)
{
	struct oidc_provider *p = provider();
	struct oidc_expect ex = expect_default();
	json_t *claims = NULL;
	char why[128];
	char *t = token("RS256", "rsa1");
	ck_assert_int_eq(oidc_validate(p, t, &ex, &claims, why, sizeof why), CS_OK);
	ck_assert_str_eq(json_string_value(json_object_get(claims, "sub")), "alice");
	json_decref(claims);
	free(t);
	oidc_provider_free(p);
}
END_TEST

START_TEST(test_oidc_validate_valid_ps256_es256)
{
	ck_assert_int_eq(check(token("PS256", "rsa1")), CS_OK);
	ck_assert_int_eq(check(token("ES256", "ec1")), CS_OK);
}
END_TEST

START_TEST(test_oidc_validate_subject_token_rules)
{
	/* A subject token: no client id, no nonce; aud array without azp is fine. */
	struct oidc_expect ex = expect_default();
	const char *sa[] = { "other", "gateway-app" };
	ex.client_id = NULL;
	ex.nonce = NULL;
	ex.audiences = sa;
	ex.naudiences = 2;
	json_t *c = claims_default();
	json_object_del(c, "nonce");
	json_object_set_new(c, "aud", json_pack("[s,s]", "gateway-app", "api"));
	char *t = token_with("ES256", "ec1", c);
	ck_assert_int_eq(check_ex(t, &ex), CS_OK);
	free(t);
	/* ...and not when none of the accepted audiences is there. */
	ex.naudiences = 1;
	c = claims_default();
	json_object_set_new(c, "aud", json_pack("[s,s]", "gateway-app", "api"));
	t = token_with("ES256", "ec1", c);
	ck_assert_int_ne(check_ex(t, &ex), CS_OK);
	free(t);
}
END_TEST

/* --- algorithm attacks -------------------------------------------------- */

START_TEST(test_oidc_validate_alg_none)
{
	char *p = NULL, *h = b64u_str("{\"alg\":\"none\",\"kid\":\"rsa1\",\"typ\":\"JWT\"}");
	json_t *c = claims_default();
	char *pl = json_dumps(c, JSON_COMPACT);
	json_decref(c);
	p = b64u_str(pl);
	ck_assert_int_ne(check(join3(h, p, "")), CS_OK);       /* empty signature */
	ck_assert_int_ne(check(join3(h, p, "AAAA")), CS_OK);   /* some signature */
	/* "None", "NONE": no case games either. */
	free(h);
	h = b64u_str("{\"alg\":\"None\",\"kid\":\"rsa1\"}");
	ck_assert_int_ne(check(join3(h, p, "AAAA")), CS_OK);
	free(h);
	free(p);
	free(pl);
}
END_TEST

START_TEST(test_oidc_validate_hs256_with_public_key)
{
	const char *secrets[] = { rsa_jwk, rsa_pem, jwks };
	const char *hdr = "{\"alg\":\"HS256\",\"kid\":\"rsa1\",\"typ\":\"JWT\"}";
	json_t *c = claims_default();
	char *pl = json_dumps(c, JSON_COMPACT);
	json_decref(c);
	char *h = b64u_str(hdr), *p = b64u_str(pl);
	size_t n = strlen(h) + strlen(p) + 2;
	char *input = malloc(n);
	ck_assert_ptr_nonnull(input);
	ck_assert_int_eq(str_fmt(input, n, "%s.%s", h, p), CS_OK);
	for (size_t i = 0; i < sizeof secrets / sizeof secrets[0]; i++) {
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned int mdlen = 0;
		ck_assert_ptr_nonnull(HMAC(EVP_sha256(), secrets[i], (int)strlen(secrets[i]),
		    (const unsigned char *)input, strlen(input), md, &mdlen));
		char *s = b64u(md, mdlen);
		ck_assert_int_ne(check(join3(h, p, s)), CS_OK);
		free(s);
	}
	free(input);
	free(h);
	free(p);
	free(pl);
}
END_TEST

START_TEST(test_oidc_validate_alg_key_mismatch)
{
	/* ES256 naming the RSA kid, RS256/PS256 naming the EC kid. */
	char *pl = NULL;
	json_t *c = claims_default();
	pl = json_dumps(c, JSON_COMPACT);
	json_decref(c);
	ck_assert_int_ne(check(make_jws("{\"alg\":\"ES256\",\"kid\":\"rsa1\"}", pl, "ES256", ec_key)), CS_OK);
	ck_assert_int_ne(check(make_jws("{\"alg\":\"RS256\",\"kid\":\"ec1\"}", pl, "RS256", rsa_key)), CS_OK);
	ck_assert_int_ne(check(make_jws("{\"alg\":\"PS256\",\"kid\":\"ec1\"}", pl, "PS256", rsa_key)), CS_OK);
	/* A key whose JWK says alg RS256 is not used for PS256. */
	ck_assert_int_eq(check(make_jws("{\"alg\":\"RS256\",\"kid\":\"rsa-rs\"}", pl, "RS256", rsa_key)), CS_OK);
	ck_assert_int_ne(check(make_jws("{\"alg\":\"PS256\",\"kid\":\"rsa-rs\"}", pl, "PS256", rsa_key)), CS_OK);
	/* Algorithms outside the allowlist, even with a matching key. */
	ck_assert_int_ne(check(make_jws("{\"alg\":\"RS384\",\"kid\":\"rsa1\"}", pl, "RS256", rsa_key)), CS_OK);
	ck_assert_int_ne(check(make_jws("{\"alg\":\"ES384\",\"kid\":\"ec1\"}", pl, "ES256", ec_key)), CS_OK);
	free(pl);
}
END_TEST

START_TEST(test_oidc_validate_unknown_kid)
{
	ck_assert_int_ne(check(token("RS256", "nope")), CS_OK);
	/* Skipped JWKS entries are unknown: private, enc, oct, small RSA. */
	ck_assert_int_ne(check(token("RS256", "priv")), CS_OK);
	ck_assert_int_ne(check(token("RS256", "enc1")), CS_OK);
	ck_assert_int_ne(check(token("RS256", "small")), CS_OK);
	/* No kid at all. */
	json_t *c = claims_default();
	char *pl = json_dumps(c, JSON_COMPACT);
	json_decref(c);
	ck_assert_int_ne(check(make_jws("{\"alg\":\"RS256\"}", pl, "RS256", rsa_key)), CS_OK);
	ck_assert_int_ne(check(make_jws("{\"alg\":\"RS256\",\"kid\":\"\"}", pl, "RS256", rsa_key)), CS_OK);
	ck_assert_int_ne(check(make_jws("{\"alg\":\"RS256\",\"kid\":7}", pl, "RS256", rsa_key)), CS_OK);
	free(pl);
}
END_TEST

START_TEST(test_oidc_validate_no_keys_no_discovery)
{
	struct oidc_provider *p = NULL;
	struct oidc_expect ex = expect_default();
	json_t *claims = NULL;
	char why[64];
	char *t = token("RS256", "rsa1");
	ck_assert_int_eq(oidc_provider_new(ISSUER, SKEW, &p), CS_OK);
	ck_assert_ptr_null(oidc_meta(p));
	ck_assert_int_ne(oidc_validate(p, t, &ex, &claims, why, sizeof why), CS_OK);
	ck_assert_str_eq(why, "is signed with a key the IdP does not publish (unknown kid)");
	ck_assert_ptr_null(claims);
	free(t);
	oidc_provider_free(p);
}
END_TEST

START_TEST(test_oidc_validate_tampered)
{
	char *t = token("RS256", "rsa1");
	json_t *c = claims_default();
	json_object_set_new(c, "sub", json_string("mallory"));
	char *other = token_with("RS256", "rsa1", c);
	/* Payload of one token with the signature of the other. */
	char *d1 = strchr(t, '.'), *d2 = strrchr(t, '.');
	char *o1 = strchr(other, '.'), *o2 = strrchr(other, '.');
	size_t n = strlen(t) + strlen(other) + 1;
	char *mix = malloc(n);
	ck_assert_ptr_nonnull(mix);
	ck_assert_int_eq(str_fmt(mix, n, "%.*s%.*s%s", (int)(d1 - t), t, (int)(o2 - o1), o1, d2), CS_OK);
	ck_assert_int_ne(check(mix), CS_OK);
	/* A flipped signature character (in the middle: no padding-bit games). */
	char *t2 = strdup(t);
	ck_assert_ptr_nonnull(t2);
	size_t mid = (size_t)(d2 - t) + 20;
	t2[mid] = t2[mid] == 'A' ? 'B' : 'A';
	ck_assert_int_ne(check(t2), CS_OK);
	/* Same for ES256. */
	char *e = token("ES256", "ec1");
	d2 = strrchr(e, '.');
	mid = (size_t)(d2 - e) + 20;
	e[mid] = e[mid] == 'A' ? 'B' : 'A';
	ck_assert_int_ne(check(e), CS_OK);
	/* A truncated ES256 signature. */
	e = token("ES256", "ec1");
	e[strlen(e) - 4] = '\0';
	ck_assert_int_ne(check(e), CS_OK);
	free(t);
	free(other);
}
END_TEST

/* --- claims ------------------------------------------------------------- */

START_TEST(test_oidc_validate_iss)
{
	json_t *c = claims_default();
	json_object_set_new(c, "iss", json_string("https://evil.test"));
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "iss", json_string(ISSUER "/"));
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "iss", json_string("HTTPS://IDP.TEST"));
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_del(c, "iss");
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "iss", json_pack("[s]", ISSUER));
	ck_assert_int_ne(check_claims(c), CS_OK);
}
END_TEST

START_TEST(test_oidc_validate_aud_azp)
{
	json_t *c = claims_default();
	json_object_set_new(c, "aud", json_string("evil-client"));
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_del(c, "aud");
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "aud", json_array());
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "aud", json_pack("[s,i]", CLIENT, 5));
	ck_assert_int_ne(check_claims(c), CS_OK);
	/* A single-element array is fine. */
	c = claims_default();
	json_object_set_new(c, "aud", json_pack("[s]", CLIENT));
	ck_assert_int_eq(check_claims(c), CS_OK);
	/* Several audiences need azp... */
	c = claims_default();
	json_object_set_new(c, "aud", json_pack("[s,s]", CLIENT, "other"));
	ck_assert_int_ne(check_claims(c), CS_OK);
	/* ...naming us. */
	c = claims_default();
	json_object_set_new(c, "aud", json_pack("[s,s]", CLIENT, "other"));
	json_object_set_new(c, "azp", json_string(CLIENT));
	ck_assert_int_eq(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "aud", json_pack("[s,s]", CLIENT, "other"));
	json_object_set_new(c, "azp", json_string("other"));
	ck_assert_int_ne(check_claims(c), CS_OK);
	/* azp present with one audience: must still be us. */
	c = claims_default();
	json_object_set_new(c, "azp", json_string("evil-client"));
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "azp", json_integer(1));
	ck_assert_int_ne(check_claims(c), CS_OK);
}
END_TEST

START_TEST(test_oidc_validate_exp)
{
	json_t *c = claims_default();
	json_object_set_new(c, "exp", json_integer(NOW - SKEW - 1));     /* beyond the skew */
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "exp", json_integer(NOW - SKEW));         /* boundary: expired */
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "exp", json_integer(NOW - SKEW / 2));     /* within the skew */
	ck_assert_int_eq(check_claims(c), CS_OK);
	c = claims_default();
	json_object_del(c, "exp");
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "exp", json_string("9999999999"));
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "exp", json_real(1e300));
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "exp", json_integer(INT64_MAX));
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "exp", json_real(NOW + 300.5));           /* a real is fine */
	ck_assert_int_eq(check_claims(c), CS_OK);
}
END_TEST

START_TEST(test_oidc_validate_nbf_iat)
{
	json_t *c = claims_default();
	json_object_set_new(c, "nbf", json_integer(NOW + 120));
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "nbf", json_integer(NOW + 30));
	ck_assert_int_eq(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "nbf", json_integer(-5));
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "iat", json_integer(NOW + 120));
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_del(c, "iat");
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "iat", json_integer(-1));
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "iat", json_true());
	ck_assert_int_ne(check_claims(c), CS_OK);
}
END_TEST

START_TEST(test_oidc_validate_nonce)
{
	json_t *c = claims_default();
	json_object_del(c, "nonce");
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "nonce", json_string("n-0S6_WzA2MJ"));
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "nonce", json_string(NONCE "x"));
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	json_object_set_new(c, "nonce", json_integer(1));
	ck_assert_int_ne(check_claims(c), CS_OK);
	/* No nonce expected: none needed. */
	struct oidc_expect ex = expect_default();
	ex.nonce = NULL;
	c = claims_default();
	json_object_del(c, "nonce");
	char *t = token_with("RS256", "rsa1", c);
	ck_assert_int_eq(check_ex(t, &ex), CS_OK);
	free(t);
}
END_TEST

START_TEST(test_oidc_validate_auth_time)
{
	struct oidc_expect ex = expect_default();
	char *t;
	json_t *c;

	ex.max_age = 300;
	c = claims_default();
	json_object_set_new(c, "auth_time", json_integer(NOW - 300 - SKEW - 1));
	t = token_with("RS256", "rsa1", c);
	ck_assert_int_ne(check_ex(t, &ex), CS_OK);
	free(t);
	c = claims_default();
	json_object_set_new(c, "auth_time", json_integer(NOW - 300));
	t = token_with("RS256", "rsa1", c);
	ck_assert_int_eq(check_ex(t, &ex), CS_OK);
	free(t);
	c = claims_default();
	json_object_del(c, "auth_time");
	t = token_with("RS256", "rsa1", c);
	ck_assert_int_ne(check_ex(t, &ex), CS_OK);
	free(t);
	c = claims_default();
	json_object_set_new(c, "auth_time", json_string("recent"));
	t = token_with("RS256", "rsa1", c);
	ck_assert_int_ne(check_ex(t, &ex), CS_OK);
	free(t);
	/* max_age 0 still allows the skew. */
	ex.max_age = 0;
	c = claims_default();
	t = token_with("RS256", "rsa1", c);
	ck_assert_int_eq(check_ex(t, &ex), CS_OK);
	free(t);
	/* require_auth_time without max_age. */
	ex.max_age = -1;
	ex.require_auth_time = true;
	c = claims_default();
	json_object_del(c, "auth_time");
	t = token_with("RS256", "rsa1", c);
	ck_assert_int_ne(check_ex(t, &ex), CS_OK);
	free(t);
	c = claims_default();
	json_object_set_new(c, "auth_time", json_integer(NOW - 100000));
	t = token_with("RS256", "rsa1", c);
	ck_assert_int_eq(check_ex(t, &ex), CS_OK);
	free(t);
	/* Neither: auth_time is not looked at. */
	ex.require_auth_time = false;
	c = claims_default();
	json_object_del(c, "auth_time");
	t = token_with("RS256", "rsa1", c);
	ck_assert_int_eq(check_ex(t, &ex), CS_OK);
	free(t);
}
END_TEST

START_TEST(test_oidc_validate_logout_token)
{
	json_t *c = claims_default();
	json_object_set_new(c, "events", json_pack("{s:{}}",
	    "http://schemas.openid.net/event/backchannel-logout"));
	ck_assert_int_ne(check_claims(c), CS_OK);
	c = claims_default();
	char *pl = json_dumps(c, JSON_COMPACT);
	json_decref(c);
	ck_assert_int_ne(check(make_jws("{\"alg\":\"RS256\",\"kid\":\"rsa1\",\"typ\":\"logout+jwt\"}",
	    pl, "RS256", rsa_key)), CS_OK);
	ck_assert_int_eq(check(make_jws("{\"alg\":\"RS256\",\"kid\":\"rsa1\",\"typ\":\"at+jwt\"}",
	    pl, "RS256", rsa_key)), CS_OK);
	free(pl);
}
END_TEST

/* --- the reason names the failing check ---------------------------------- */

/* The reason oidc_validate gives for t (freed) with the default expectations,
 * checked to refuse; written to out. */
static void why_of(char *t, const struct oidc_expect *ex, char *out, size_t outlen)
{
	struct oidc_provider *p = provider();
	struct oidc_expect d = expect_default();
	json_t *claims = NULL;
	ck_assert_int_ne(oidc_validate(p, t, ex ? ex : &d, &claims, out, outlen), CS_OK);
	ck_assert_ptr_null(claims);
	oidc_provider_free(p);
	free(t);
}

static void expect_why(char *t, const char *want)
{
	char why[128];
	why_of(t, NULL, why, sizeof why);
	ck_assert_str_eq(why, want);
}

static void expect_claims_why(json_t *c, const char *want)
{
	expect_why(token_with("RS256", "rsa1", c), want);
}

START_TEST(test_oidc_validate_reason_per_check)
{
	json_t *c = claims_default();
	json_object_set_new(c, "exp", json_integer(NOW - SKEW - 1));
	expect_claims_why(c, "expired");
	c = claims_default();
	json_object_del(c, "exp");
	expect_claims_why(c, "has no valid exp");
	c = claims_default();
	json_object_set_new(c, "nbf", json_integer(NOW + SKEW + 60));
	expect_claims_why(c, "is not valid yet");
	c = claims_default();
	json_object_set_new(c, "nbf", json_string("soon"));
	expect_claims_why(c, "has a malformed nbf");
	c = claims_default();
	json_object_set_new(c, "iat", json_integer(NOW + SKEW + 60));
	expect_claims_why(c, "was issued in the future");
	c = claims_default();
	json_object_set_new(c, "iss", json_string("https://evil.test"));
	expect_claims_why(c, "has the wrong issuer");
	c = claims_default();
	json_object_set_new(c, "aud", json_string("evil-client"));
	expect_claims_why(c, "has the wrong audience");
	c = claims_default();
	json_object_set_new(c, "azp", json_string("evil-client"));
	expect_claims_why(c, "has the wrong azp");
	c = claims_default();
	json_object_set_new(c, "nonce", json_string("other"));
	expect_claims_why(c, "has the wrong nonce");
	c = claims_default();
	json_object_set_new(c, "events", json_object());
	expect_claims_why(c, "is a logout or event token");

	expect_why(token("RS256", "nope"), "is signed with a key the IdP does not publish (unknown kid)");
	char *t = token("RS256", "rsa1");
	char *d2 = strrchr(t, '.');
	size_t mid = (size_t)(d2 - t) + 20;
	t[mid] = t[mid] == 'A' ? 'B' : 'A';
	expect_why(t, "has a bad signature");

	c = claims_default();
	char *pl = json_dumps(c, JSON_COMPACT);
	json_decref(c);
	expect_why(make_jws("{\"alg\":\"HS256\",\"kid\":\"rsa1\"}", pl, "RS256", rsa_key),
	    "uses an algorithm that is not allowed");
	expect_why(make_jws("{\"alg\":\"none\",\"kid\":\"rsa1\"}", pl, "RS256", rsa_key),
	    "uses an algorithm that is not allowed");
	expect_why(make_jws("{\"alg\":\"ES256\",\"kid\":\"rsa1\"}", pl, "ES256", ec_key),
	    "uses an algorithm that does not fit its key");
	expect_why(make_jws("{\"alg\":\"RS256\",\"kid\":\"rsa1\",\"typ\":\"logout+jwt\"}", pl,
	    "RS256", rsa_key), "has a typ that is not allowed");
	expect_why(make_jws("{\"alg\":\"RS256\",\"kid\":\"rsa1\",\"typ\":\"secevent+jwt\"}", pl,
	    "RS256", rsa_key), "has a typ that is not allowed");
	expect_why(make_jws("{\"alg\":\"RS256\"}", pl, "RS256", rsa_key), "has no kid");
	expect_why(make_jws("{\"alg\":\"RS256\",\"kid\":\"rsa1\",\"crit\":[\"x\"]}", pl, "RS256",
	    rsa_key), "has a crit header");
	expect_why(make_jws("not json", pl, "RS256", rsa_key), "has a malformed header");
	expect_why(make_jws("{\"alg\":\"RS256\",\"kid\":\"rsa1\"}", "[1]", "RS256", rsa_key),
	    "has a malformed payload");
	free(pl);
	expect_why(strdup("a.b"), "is not a well-formed compact JWS");
	expect_why(strdup("not a token"), "is not a well-formed compact JWS");

	/* For an ID token: a sign-in that is too old. */
	struct oidc_expect ex = expect_default();
	char why[128];
	ex.max_age = 5;
	c = claims_default();
	json_object_set_new(c, "auth_time", json_integer(NOW - 200));
	why_of(token_with("RS256", "rsa1", c), &ex, why, sizeof why);
	ck_assert_str_eq(why, "is from a sign-in that is too old");
}
END_TEST

/* --- malformed tokens --------------------------------------------------- */

START_TEST(test_oidc_validate_shape)
{
	char *t = token("RS256", "rsa1");
	char *d1 = strchr(t, '.'), *d2 = strrchr(t, '.');
	char buf[OIDC_MAX_JWT + 64];
	int h = (int)(d1 - t), pl = (int)(d2 - d1 - 1);

	/* Empty segments. */
	ck_assert_int_eq(str_fmt(buf, sizeof buf, ".%.*s%s", pl, d1 + 1, d2), CS_OK);
	ck_assert_int_ne(check(strdup(buf)), CS_OK);
	ck_assert_int_eq(str_fmt(buf, sizeof buf, "%.*s.%s", h, t, d2), CS_OK);
	ck_assert_int_ne(check(strdup(buf)), CS_OK);
	ck_assert_int_eq(str_fmt(buf, sizeof buf, "%.*s.", (int)(d2 - t), t), CS_OK);
	ck_assert_int_ne(check(strdup(buf)), CS_OK);
	ck_assert_int_ne(check(strdup("..")), CS_OK);
	ck_assert_int_ne(check(strdup("")), CS_OK);
	/* Two and four segments. */
	ck_assert_int_eq(str_fmt(buf, sizeof buf, "%.*s", (int)(d2 - t), t), CS_OK);
	ck_assert_int_ne(check(strdup(buf)), CS_OK);
	ck_assert_int_eq(str_fmt(buf, sizeof buf, "%s.%s", t, d2 + 1), CS_OK);
	ck_assert_int_ne(check(strdup(buf)), CS_OK);
	ck_assert_int_eq(str_fmt(buf, sizeof buf, "%s.", t), CS_OK);
	ck_assert_int_ne(check(strdup(buf)), CS_OK);
	/* Non-base64url characters: padding, '+', '/', space, newline. */
	const char *bad[] = { "=", "+", "/", " ", "\n", "%", "\xc3\xa9" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_assert_int_eq(str_fmt(buf, sizeof buf, "%s%s", t, bad[i]), CS_OK);
		ck_assert_int_ne(check(strdup(buf)), CS_OK);
		ck_assert_int_eq(str_fmt(buf, sizeof buf, "%.*s%s%s", h, t, bad[i], d1), CS_OK);
		ck_assert_int_ne(check(strdup(buf)), CS_OK);
	}
	/* Oversized: a valid token padded past the cap in the payload. */
	char *big = malloc(OIDC_MAX_JWT + 2);
	ck_assert_ptr_nonnull(big);
	memset(big, 'A', OIDC_MAX_JWT + 1);
	big[OIDC_MAX_JWT + 1] = '\0';
	big[10] = '.';
	big[OIDC_MAX_JWT - 10] = '.';
	ck_assert_int_ne(check(big), CS_OK);
	/* A large but valid token just under the cap still works. */
	json_t *c = claims_default();
	char *filler = malloc(OIDC_MAX_JWT / 2);
	ck_assert_ptr_nonnull(filler);
	memset(filler, 'x', OIDC_MAX_JWT / 2 - 1);
	filler[OIDC_MAX_JWT / 2 - 1] = '\0';
	json_object_set_new(c, "filler", json_string(filler));
	free(filler);
	ck_assert_int_eq(check(token_with("RS256", "rsa1", c)), CS_OK);
	free(t);
}
END_TEST

START_TEST(test_oidc_validate_bad_header_payload)
{
	json_t *c = claims_default();
	char *pl = json_dumps(c, JSON_COMPACT);
	json_decref(c);
	/* Header not JSON, not an object, alg not a string, duplicate alg. */
	ck_assert_int_ne(check(make_jws("not json", pl, "RS256", rsa_key)), CS_OK);
	ck_assert_int_ne(check(make_jws("[\"RS256\"]", pl, "RS256", rsa_key)), CS_OK);
	ck_assert_int_ne(check(make_jws("{\"alg\":[\"RS256\"],\"kid\":\"rsa1\"}", pl, "RS256", rsa_key)), CS_OK);
	ck_assert_int_ne(check(make_jws("{\"alg\":\"none\",\"alg\":\"RS256\",\"kid\":\"rsa1\"}", pl,
	    "RS256", rsa_key)), CS_OK);
	ck_assert_int_ne(check(make_jws("{\"alg\":\"RS256\",\"kid\":\"rsa1\",\"typ\":5}", pl,
	    "RS256", rsa_key)), CS_OK);
	/* crit, even naming a claim. */
	ck_assert_int_ne(check(make_jws("{\"alg\":\"RS256\",\"kid\":\"rsa1\",\"crit\":[\"exp\"],\"exp\":1}",
	    pl, "RS256", rsa_key)), CS_OK);
	ck_assert_int_ne(check(make_jws("{\"alg\":\"RS256\",\"kid\":\"rsa1\",\"crit\":[]}",
	    pl, "RS256", rsa_key)), CS_OK);
	/* The same header without crit passes: the signing above is sound. */
	ck_assert_int_eq(check(make_jws("{\"alg\":\"RS256\",\"kid\":\"rsa1\"}", pl, "RS256", rsa_key)), CS_OK);
	/* Payload not an object, not JSON, duplicate keys. */
	const char *hdr = "{\"alg\":\"RS256\",\"kid\":\"rsa1\"}";
	ck_assert_int_ne(check(make_jws(hdr, "[1,2]", "RS256", rsa_key)), CS_OK);
	ck_assert_int_ne(check(make_jws(hdr, "\"" ISSUER "\"", "RS256", rsa_key)), CS_OK);
	ck_assert_int_ne(check(make_jws(hdr, "{not json", "RS256", rsa_key)), CS_OK);
	char dup[1024];
	ck_assert_int_eq(str_fmt(dup, sizeof dup, "{\"iss\":\"https://evil.test\",%s", pl + 1), CS_OK);
	ck_assert_int_ne(check(make_jws(hdr, dup, "RS256", rsa_key)), CS_OK);
	free(pl);
}
END_TEST

START_TEST(test_oidc_validate_bad_args)
{
	struct oidc_provider *p = provider();
	struct oidc_expect ex = expect_default();
	json_t *claims = NULL;
	char why[4];                 /* a short reason buffer is left "", never cut or overrun */
	char *t = token("RS256", "rsa1");
	ck_assert_int_ne(oidc_validate(p, NULL, &ex, &claims, why, sizeof why), CS_OK);
	ck_assert_int_ne(oidc_validate(p, t, NULL, &claims, why, sizeof why), CS_OK);
	ck_assert_int_ne(oidc_validate(p, t, &ex, NULL, why, sizeof why), CS_OK);
	ck_assert_int_ne(oidc_validate(NULL, t, &ex, &claims, NULL, 0), CS_OK);
	ex.naudiences = 0;
	ck_assert_int_ne(oidc_validate(p, t, &ex, &claims, why, sizeof why), CS_OK);
	ck_assert_str_eq(why, "");
	ex = expect_default();
	ck_assert_int_eq(oidc_validate(p, t, &ex, &claims, NULL, 0), CS_OK);
	json_decref(claims);
	free(t);
	oidc_provider_free(p);
}
END_TEST

/* --- JWKS and provider -------------------------------------------------- */

START_TEST(test_oidc_jwks_rejects)
{
	struct oidc_provider *p = NULL;
	ck_assert_int_eq(oidc_provider_new(ISSUER, SKEW, &p), CS_OK);
	ck_assert_int_eq(oidc_set_jwks(p, "not json"), CS_EINVAL);
	ck_assert_int_eq(oidc_set_jwks(p, "{}"), CS_EINVAL);
	ck_assert_int_eq(oidc_set_jwks(p, "{\"keys\":{}}"), CS_EINVAL);
	ck_assert_int_eq(oidc_set_jwks(p, "{\"keys\":[]}"), CS_EINVAL);
	ck_assert_int_eq(oidc_set_jwks(p, "{\"keys\":[{\"kty\":\"oct\",\"kid\":\"k\",\"k\":\"c2VjcmV0\"}]}"),
	    CS_EINVAL);
	/* Nothing usable keeps the last good set. */
	ck_assert_int_eq(oidc_set_jwks(p, jwks), CS_OK);
	ck_assert_int_eq(oidc_set_jwks(p, "{\"keys\":[]}"), CS_EINVAL);
	struct oidc_expect ex = expect_default();
	json_t *claims = NULL;
	char *t = token("ES256", "ec1");
	ck_assert_int_eq(oidc_validate(p, t, &ex, &claims, NULL, 0), CS_OK);
	json_decref(claims);
	free(t);
	/* A set with only the RSA key: the EC kid is gone. */
	char *only = malloc(strlen(rsa_jwk) + 16);
	ck_assert_ptr_nonnull(only);
	ck_assert_int_eq(str_fmt(only, strlen(rsa_jwk) + 16, "{\"keys\":[%s]}", rsa_jwk), CS_OK);
	ck_assert_int_eq(oidc_set_jwks(p, only), CS_OK);
	t = token("ES256", "ec1");
	claims = NULL;
	ck_assert_int_ne(oidc_validate(p, t, &ex, &claims, NULL, 0), CS_OK);
	free(t);
	free(only);
	oidc_provider_free(p);
}
END_TEST

/* A JWKS member that is not strict base64url never reaches cjose, whose
 * decoder aborts on some (an '=' inside the text: found by fuzz_jwks_set);
 * the key is skipped and the last good set kept. */
static char *with_member(const char *jwk, const char *name, const char *value)
{
	json_t *k = json_loads(jwk, 0, NULL), *doc;
	ck_assert_ptr_nonnull(k);
	ck_assert_int_eq(json_object_set_new(k, name, json_string(value)), 0);
	doc = json_pack("{s:[o]}", "keys", k);
	ck_assert_ptr_nonnull(doc);
	char *s = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	return s;
}

START_TEST(test_oidc_jwks_malformed_base64)
{
	static const char ec_ok[] = "{\"kty\":\"EC\",\"kid\":\"k1\",\"crv\":\"P-256\","
	    "\"x\":\"TdApgr4qEIPFccesI2NieuWbfOAoDTBk6OlxgYHPSnw\","
	    "\"y\":\"XAi4MN0tGcwV8EJGFCO5PaBLljjNZ7ojSGhL9BSMrfE\"}";
	static const char *const bad_ec[] = {
		"T=Apgr4qEIPFccesI2NieuWbfOAoDTBk6OlxgYHPSnw",     /* the fuzzer's input */
		"TdApgr4qEIPFccesI2NieuWbfOAoDTBk6OlxgYHPSnw=",    /* padding */
		"TdApgr4qEIPFccesI2NieuWbfOAoDTBk6OlxgYHPSn",      /* 42: fine length, wrong point */
		"TdApgr4qEIPFccesI2NieuWbfOAoDTBk6OlxgYHPSnwAA",   /* 45: no base64 has it */
		"TdApgr4qEIPFccesI2NieuWb+OAoDTBk6OlxgYHPSnw",     /* base64, not base64url */
		"TdApgr4qEIPFccesI2NieuWb fOAoDTBk6OlxgYHPSnw", "=", "==", "A", "",
	};
	struct oidc_provider *p = NULL;
	char *doc;
	ck_assert_int_eq(oidc_provider_new(ISSUER, SKEW, &p), CS_OK);
	ck_assert_int_eq(oidc_set_jwks(p, jwks), CS_OK);
	doc = with_member(ec_ok, "kid", "k1");
	ck_assert_int_eq(oidc_set_jwks(p, doc), CS_OK);     /* the unmutated key is usable */
	free(doc);
	for (size_t i = 0; i < sizeof bad_ec / sizeof bad_ec[0]; i++)
		for (int m = 0; m < 2; m++) {
			doc = with_member(ec_ok, m ? "y" : "x", bad_ec[i]);
			ck_assert_msg(oidc_set_jwks(p, doc) == CS_EINVAL, "accepted %s", doc);
			free(doc);
		}
	json_t *k = json_loads(rsa_jwk, 0, NULL);
	ck_assert_ptr_nonnull(k);
	const char *n = json_string_value(json_object_get(k, "n"));
	ck_assert_ptr_nonnull(n);
	size_t nl = strlen(n);
	char *bad_n = malloc(nl + 2);
	ck_assert_ptr_nonnull(bad_n);
	/* An '=' in the modulus, padding after it, one character too many. */
	memcpy(bad_n, n, nl + 1);
	bad_n[1] = '=';
	doc = with_member(rsa_jwk, "n", bad_n);
	ck_assert_int_eq(oidc_set_jwks(p, doc), CS_EINVAL);
	free(doc);
	memcpy(bad_n, n, nl);
	memcpy(bad_n + nl, "=", 2);
	doc = with_member(rsa_jwk, "n", bad_n);
	ck_assert_int_eq(oidc_set_jwks(p, doc), CS_EINVAL);
	free(doc);
	static const char *const bad_e[] = { "AQ=B", "AQAB=", "A", "AQ AB", "" };
	for (size_t i = 0; i < sizeof bad_e / sizeof bad_e[0]; i++) {
		doc = with_member(rsa_jwk, "e", bad_e[i]);
		ck_assert_msg(oidc_set_jwks(p, doc) == CS_EINVAL, "accepted e=%s", bad_e[i]);
		free(doc);
	}
	free(bad_n);
	json_decref(k);
	/* The last good set (the EC k1 only) is still in place: rsa1 is not. */
	struct oidc_expect ex = expect_default();
	json_t *claims = NULL;
	char *t = token("RS256", "rsa1");
	ck_assert_int_ne(oidc_validate(p, t, &ex, &claims, NULL, 0), CS_OK);
	free(t);
	oidc_provider_free(p);
}
END_TEST

START_TEST(test_oidc_provider_new_rejects)
{
	struct oidc_provider *p = NULL;
	ck_assert_int_eq(oidc_provider_new("http://idp.example", SKEW, &p), CS_EINVAL);
	ck_assert_int_eq(oidc_provider_new("ftp://idp.example", SKEW, &p), CS_EINVAL);
	ck_assert_int_eq(oidc_provider_new(ISSUER, -1, &p), CS_EINVAL);
	ck_assert_int_eq(oidc_provider_new(NULL, SKEW, &p), CS_EINVAL);
	ck_assert_ptr_null(p);
	ck_assert_int_eq(oidc_provider_new("http://127.0.0.1:9999", 0, &p), CS_OK);
	ck_assert_ptr_null(oidc_meta(p));
	char *tok = NULL;
	/* No discovery yet: no code exchange. */
	ck_assert_int_ne(oidc_exchange_code(p, "c", "s", OIDC_AUTH_BASIC, "code",
	    "https://rp.test/cb", "verifier", &tok), CS_OK);
	ck_assert_ptr_null(tok);
	oidc_provider_free(p);
	oidc_provider_free(NULL);
}
END_TEST

struct race {
	struct oidc_provider *p;
	char *tok[2];
	int ok;
};

static void *race_validate(void *arg)
{
	struct race *r = arg;
	struct oidc_expect ex = expect_default();
	for (int i = 0; i < 100; i++) {
		json_t *claims = NULL;
		if (oidc_validate(r->p, r->tok[i & 1], &ex, &claims, NULL, 0) == CS_OK)
			__atomic_add_fetch(&r->ok, 1, __ATOMIC_RELAXED);
		json_decref(claims);
	}
	return NULL;
}

START_TEST(test_oidc_validate_concurrent_jwks_swap)
{
	struct race r;
	pthread_t th[4];
	r.p = provider();
	r.tok[0] = token("RS256", "rsa1");
	r.tok[1] = token("ES256", "ec1");
	r.ok = 0;
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, race_validate, &r), 0);
	for (int i = 0; i < 40; i++)
		ck_assert_int_eq(oidc_set_jwks(r.p, jwks), CS_OK);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	ck_assert_int_eq(r.ok, 400);
	free(r.tok[0]);
	free(r.tok[1]);
	oidc_provider_free(r.p);
}
END_TEST

/* --- the subject-token cache ------------------------------------------- */

static struct oidc_expect expect_cached(void)
{
	struct oidc_expect ex = expect_default();
	ex.cache = true;
	return ex;
}

START_TEST(test_oidc_cache_hit_returns_cached_validation)
{
	struct oidc_provider *p = provider();
	struct oidc_expect ex = expect_cached();
	char *t = token("RS256", "rsa1");
	json_t *c1 = NULL, *c2 = NULL;
	char why[128];
	ck_assert_int_eq(oidc_validate(p, t, &ex, &c1, why, sizeof why), CS_OK);
	ck_assert_uint_eq(oidc_subject_cache_count(p), 1);
	/* Seen again: the claims object the first validation produced. */
	ex.now = NOW + 100;
	ck_assert_int_eq(oidc_validate(p, t, &ex, &c2, why, sizeof why), CS_OK);
	ck_assert_ptr_eq(c1, c2);
	ck_assert_str_eq(why, "");
	ck_assert_str_eq(json_string_value(json_object_get(c2, "sub")), "alice");
	json_decref(c2);
	c2 = NULL;
	/* Without exp->cache (an ID token) the cache is neither read nor written. */
	ex.cache = false;
	ck_assert_int_eq(oidc_validate(p, t, &ex, &c2, why, sizeof why), CS_OK);
	ck_assert_ptr_ne(c1, c2);
	json_decref(c2);
	char *t2 = token("ES256", "ec1");
	ck_assert_int_eq(oidc_validate(p, t2, &ex, &c2, why, sizeof why), CS_OK);
	ck_assert_uint_eq(oidc_subject_cache_count(p), 1);
	json_decref(c2);
	json_decref(c1);
	free(t);
	free(t2);
	oidc_provider_free(p);
}
END_TEST

START_TEST(test_oidc_cache_hit_checks_claims_again)
{
	struct oidc_provider *p = provider();
	struct oidc_expect ex = expect_cached();
	char *t = token("RS256", "rsa1");        /* exp NOW + 300; skew 60 */
	json_t *c = NULL;
	char why[128];
	ck_assert_int_eq(oidc_validate(p, t, &ex, &c, why, sizeof why), CS_OK);
	json_decref(c);
	c = NULL;
	ck_assert_uint_eq(oidc_subject_cache_count(p), 1);
	/* A cached token is held to every claim rule of the moment: another
	 * audience, nonce or max_age refuses it with the validator's reason. */
	const char *other[] = { "someone-else" };
	ex.audiences = other;
	ck_assert_int_ne(oidc_validate(p, t, &ex, &c, why, sizeof why), CS_OK);
	ck_assert_ptr_null(c);
	ck_assert_str_eq(why, "has the wrong audience");
	ex = expect_cached();
	ex.nonce = "another-nonce";
	ck_assert_int_ne(oidc_validate(p, t, &ex, &c, why, sizeof why), CS_OK);
	ck_assert_str_eq(why, "has the wrong nonce");
	ex = expect_cached();
	ex.now = NOW + 200;
	ex.max_age = 60;
	ck_assert_int_ne(oidc_validate(p, t, &ex, &c, why, sizeof why), CS_OK);
	ck_assert_str_eq(why, "is from a sign-in that is too old");
	ck_assert_uint_eq(oidc_subject_cache_count(p), 1);
	/* Up to exp it is a hit; at exp the entry is gone (the skew still lets
	 * the full validation pass, which does not cache it again), and past
	 * exp + skew it is "expired", as without a cache. */
	ex = expect_cached();
	ex.now = NOW + 299;
	ck_assert_int_eq(oidc_validate(p, t, &ex, &c, why, sizeof why), CS_OK);
	json_decref(c);
	c = NULL;
	ck_assert_uint_eq(oidc_subject_cache_count(p), 1);
	ex.now = NOW + 300;
	ck_assert_int_eq(oidc_validate(p, t, &ex, &c, why, sizeof why), CS_OK);
	json_decref(c);
	c = NULL;
	ck_assert_uint_eq(oidc_subject_cache_count(p), 0);
	ex.now = NOW + 360;
	ck_assert_int_ne(oidc_validate(p, t, &ex, &c, why, sizeof why), CS_OK);
	ck_assert_str_eq(why, "expired");
	ck_assert_ptr_null(c);
	free(t);
	oidc_provider_free(p);
}
END_TEST

START_TEST(test_oidc_cache_failure_not_cached)
{
	struct oidc_provider *p = provider();
	struct oidc_expect ex = expect_cached();
	json_t *c = NULL;
	char why[128];
	/* A good signature with a failing claim: refused twice, never remembered. */
	json_t *cl = claims_default();
	json_object_set_new(cl, "aud", json_string("not-us"));
	char *bad_aud = token_with("RS256", "rsa1", cl);
	cl = claims_default();
	json_object_set_new(cl, "exp", json_integer(NOW - 100));
	char *expired = token_with("ES256", "ec1", cl);
	char *good = token("RS256", "rsa1");
	char *tampered = strdup(good);
	ck_assert_ptr_nonnull(tampered);
	size_t dot = (size_t)(strrchr(tampered, '.') - tampered);
	tampered[dot + 10] = tampered[dot + 10] == 'A' ? 'B' : 'A';
	for (int round = 0; round < 2; round++) {
		ck_assert_int_ne(oidc_validate(p, bad_aud, &ex, &c, why, sizeof why), CS_OK);
		ck_assert_str_eq(why, "has the wrong audience");
		ck_assert_int_ne(oidc_validate(p, expired, &ex, &c, why, sizeof why), CS_OK);
		ck_assert_str_eq(why, "expired");
		ck_assert_int_ne(oidc_validate(p, tampered, &ex, &c, why, sizeof why), CS_OK);
		ck_assert_str_eq(why, "has a bad signature");
		ck_assert_ptr_null(c);
		ck_assert_uint_eq(oidc_subject_cache_count(p), 0);
	}
	/* The good token is cached; the tampered one (one character of the
	 * signature apart) still fails: no shared entry. */
	ck_assert_int_eq(oidc_validate(p, good, &ex, &c, why, sizeof why), CS_OK);
	json_decref(c);
	c = NULL;
	ck_assert_uint_eq(oidc_subject_cache_count(p), 1);
	ck_assert_int_ne(oidc_validate(p, tampered, &ex, &c, why, sizeof why), CS_OK);
	ck_assert_str_eq(why, "has a bad signature");
	ck_assert_uint_eq(oidc_subject_cache_count(p), 1);
	free(bad_aud);
	free(expired);
	free(good);
	free(tampered);
	oidc_provider_free(p);
}
END_TEST

START_TEST(test_oidc_cache_key_set_change_drops_all)
{
	struct oidc_provider *p = provider();
	struct oidc_expect ex = expect_cached();
	char *rs = token("RS256", "rsa1"), *es = token("ES256", "ec1");
	json_t *c = NULL;
	char why[128], only_ec[1024];
	ck_assert_int_eq(oidc_validate(p, rs, &ex, &c, why, sizeof why), CS_OK);
	json_decref(c);
	ck_assert_int_eq(oidc_validate(p, es, &ex, &c, why, sizeof why), CS_OK);
	json_decref(c);
	c = NULL;
	ck_assert_uint_eq(oidc_subject_cache_count(p), 2);
	/* The same JWKS installed again is a new key set: everything is dropped. */
	ck_assert_int_eq(oidc_set_jwks(p, jwks), CS_OK);
	ck_assert_uint_eq(oidc_subject_cache_count(p), 0);
	ck_assert_int_eq(oidc_validate(p, rs, &ex, &c, why, sizeof why), CS_OK);
	json_decref(c);
	c = NULL;
	ck_assert_uint_eq(oidc_subject_cache_count(p), 1);
	/* The IdP rotated: rsa1 is no longer published.  The token cached a
	 * moment ago is verified again, and refused. */
	char *ec = ec_public_jwk(ec_key, "ec1", "");
	ck_assert_int_eq(str_fmt(only_ec, sizeof only_ec, "{\"keys\":[%s]}", ec), CS_OK);
	free(ec);
	ck_assert_int_eq(oidc_set_jwks(p, only_ec), CS_OK);
	ck_assert_uint_eq(oidc_subject_cache_count(p), 0);
	ck_assert_int_ne(oidc_validate(p, rs, &ex, &c, why, sizeof why), CS_OK);
	ck_assert_str_eq(why, "is signed with a key the IdP does not publish (unknown kid)");
	ck_assert_ptr_null(c);
	ck_assert_int_eq(oidc_validate(p, es, &ex, &c, why, sizeof why), CS_OK);
	json_decref(c);
	/* A JWKS without a usable key leaves the set, and the cache, as they were. */
	ck_assert_int_ne(oidc_set_jwks(p, "{\"keys\":[]}"), CS_OK);
	ck_assert_uint_eq(oidc_subject_cache_count(p), 1);
	free(rs);
	free(es);
	oidc_provider_free(p);
}
END_TEST

static void *race_validate_cached(void *arg)
{
	struct race *r = arg;
	struct oidc_expect ex = expect_cached();
	for (int i = 0; i < 200; i++) {
		json_t *claims = NULL;
		ex.now = NOW + (i % 7);
		if (oidc_validate(r->p, r->tok[i & 1], &ex, &claims, NULL, 0) == CS_OK &&
		    json_is_object(claims) &&
		    strcmp(json_string_value(json_object_get(claims, "sub")), "alice") == 0)
			__atomic_add_fetch(&r->ok, 1, __ATOMIC_RELAXED);
		json_decref(claims);
	}
	return NULL;
}

START_TEST(test_oidc_cache_concurrent_threads)
{
	struct race r;
	pthread_t th[4];
	r.p = provider();
	r.tok[0] = token("RS256", "rsa1");
	r.tok[1] = token("ES256", "ec1");
	r.ok = 0;
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, race_validate_cached, &r), 0);
	for (int i = 0; i < 40; i++)
		ck_assert_int_eq(oidc_set_jwks(r.p, jwks), CS_OK);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	ck_assert_int_eq(r.ok, 800);
	ck_assert_uint_le(oidc_subject_cache_count(r.p), 2);
	free(r.tok[0]);
	free(r.tok[1]);
	oidc_provider_free(r.p);
}
END_TEST

/* --- httpc -------------------------------------------------------------- */

START_TEST(test_httpc_url_allowed)
{
	ck_assert_int_eq(httpc_url_allowed("https://idp.example/.well-known/openid-configuration"), 1);
	ck_assert_int_eq(httpc_url_allowed("https://idp.example:8443/jwks"), 1);
	ck_assert_int_eq(httpc_url_allowed("http://127.0.0.1:9/x"), 1);
	ck_assert_int_eq(httpc_url_allowed("http://localhost"), 1);
	ck_assert_int_eq(httpc_url_allowed("http://localhost:8080/a?b=c"), 1);
	ck_assert_int_eq(httpc_url_allowed("http://[::1]:8/"), 1);
	ck_assert_int_eq(httpc_url_allowed("http://example.com"), 0);
	ck_assert_int_eq(httpc_url_allowed("http://10.0.0.1/"), 0);
	ck_assert_int_eq(httpc_url_allowed("ftp://example.com/f"), 0);
	ck_assert_int_eq(httpc_url_allowed("ftp://127.0.0.1/f"), 0);
	ck_assert_int_eq(httpc_url_allowed("file:///etc/passwd"), 0);
	ck_assert_int_eq(httpc_url_allowed("gopher://127.0.0.1/"), 0);
	ck_assert_int_eq(httpc_url_allowed(""), 0);
	ck_assert_int_eq(httpc_url_allowed(NULL), 0);
	ck_assert_int_eq(httpc_url_allowed("idp.example/x"), 0);
	ck_assert_int_eq(httpc_url_allowed("//idp.example/x"), 0);
	ck_assert_int_eq(httpc_url_allowed("http://127.0.0.1.evil.com/"), 0);
	ck_assert_int_eq(httpc_url_allowed("http://localhost.evil.com/"), 0);
	ck_assert_int_eq(httpc_url_allowed("http://user@127.0.0.1/"), 0);
	ck_assert_int_eq(httpc_url_allowed("https://user:pw@idp.example/"), 0);
	ck_assert_int_eq(httpc_url_allowed("http://evil.com#@127.0.0.1/"), 0);
	ck_assert_int_eq(httpc_url_allowed("http://evil.com\\@127.0.0.1/"), 0);
	ck_assert_int_eq(httpc_url_allowed("https://"), 0);
	ck_assert_int_eq(httpc_url_allowed("https://idp example/"), 0);
}
END_TEST

START_TEST(test_httpc_refuses_before_network)
{
	struct httpc_response res;
	ck_assert_int_eq(httpc_get("http://example.com/", &res), CS_EINVAL);
	httpc_response_clear(&res);
	ck_assert_int_eq(httpc_post_form("file:///etc/passwd", "a=b", "u", "p", &res), CS_EINVAL);
	httpc_response_clear(&res);
	ck_assert_int_eq(httpc_post_form("https://idp.example/", "a=b", "u", NULL, &res), CS_EINVAL);
	httpc_response_clear(NULL);
}
END_TEST

/* --- a canned HTTP server on 127.0.0.1: discovery, JWKS, token endpoint -- */

struct srv {
	int              fd;
	int              stop;
	pthread_t        th;
	pthread_mutex_t  mu;
	char             base[64];
	char            *discovery;      /* NULL: 404 */
	const char      *jwks_body;      /* NULL: 404 */
	int              jwks_hits;
	int              token_status;
	const char      *token_body;
	char             last_auth[1024];
	char             last_body[4096];
};

static void send_all(int c, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(c, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* The fake server keeps at most cap - 1 bytes of what it was sent: a longer
 * request is cut on purpose (the tests look at its start), never overrun. */
static void keep(char *dst, size_t cap, const char *s, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
}

static void reply(int c, int status, const char *extra, const char *body, size_t n)
{
	char head[512];
	/* A status and a length always fit; in the server's thread a failure aborts. */
	if (str_fmt(head, sizeof head, "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
	    "Content-Length: %zu\r\nConnection: close\r\n%s\r\n", status, n, extra) != CS_OK)
		abort();
	int h = (int)strlen(head);
	send_all(c, head, (size_t)h);
	send_all(c, body, n);
}

static void serve_one(struct srv *sv, int c)
{
	char req[16384] = "";
	size_t got = 0;
	char *end = NULL;
	while (got < sizeof req - 1 && (end = strstr(req, "\r\n\r\n")) == NULL) {
		ssize_t r = recv(c, req + got, sizeof req - 1 - got, 0);
		if (r <= 0)
			return;
		got += (size_t)r;
		req[got] = '\0';
	}
	if (end == NULL)
		return;
	size_t hlen = (size_t)(end - req) + 4, clen = 0;
	char *cl = strcasestr(req, "\r\ncontent-length:");
	if (cl != NULL && cl < end)
		clen = strtoul(cl + 17, NULL, 10);
	while (got < hlen + clen && got < sizeof req - 1) {
		ssize_t r = recv(c, req + got, sizeof req - 1 - got, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
		req[got] = '\0';
	}
	char path[256] = "";
	const char *sp = strchr(req, ' ');
	if (sp != NULL) {
		size_t k = strcspn(sp + 1, " ");
		keep(path, sizeof path, sp + 1, k);
	}
	pthread_mutex_lock(&sv->mu);
	if (strcmp(path, "/.well-known/openid-configuration") == 0 && sv->discovery != NULL) {
		reply(c, 200, "", sv->discovery, strlen(sv->discovery));
	} else if (strcmp(path, "/jwks") == 0 && sv->jwks_body != NULL) {
		sv->jwks_hits++;
		reply(c, 200, "", sv->jwks_body, strlen(sv->jwks_body));
	} else if (strcmp(path, "/token") == 0) {
		char *a = strcasestr(req, "\r\nauthorization: ");
		sv->last_auth[0] = '\0';
		if (a != NULL && a < end)
			keep(sv->last_auth, sizeof sv->last_auth, a + 17, strcspn(a + 17, "\r"));
		keep(sv->last_body, sizeof sv->last_body, req + hlen, strlen(req + hlen));
		reply(c, sv->token_status, "", sv->token_body, strlen(sv->token_body));
	} else if (strcmp(path, "/big") == 0) {
		size_t n = HTTPC_MAX_RESPONSE + 100;
		char *big = malloc(n);
		if (big != NULL) {
			memset(big, 'a', n);
			reply(c, 200, "", big, n);
			free(big);
		}
	} else if (strcmp(path, "/redirect") == 0) {
		reply(c, 302, "Location: /jwks\r\n", "", 0);
	} else {
		reply(c, 404, "", "{}", 2);
	}
	pthread_mutex_unlock(&sv->mu);
}

static void *srv_main(void *arg)
{
	struct srv *sv = arg;
	while (!__atomic_load_n(&sv->stop, __ATOMIC_ACQUIRE)) {
		struct pollfd pfd = { sv->fd, POLLIN, 0 };
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		int c = accept(sv->fd, NULL, NULL);
		if (c < 0)
			continue;
		serve_one(sv, c);
		close(c);
	}
	return NULL;
}

/* Discovery naming issuer, with every endpoint on the server (token_endpoint
 * replaced when token_ep is non-NULL). */
static void srv_discovery(struct srv *sv, const char *issuer, const char *token_ep)
{
	char tok[128];
	ck_assert_int_eq(str_fmt(tok, sizeof tok, "%s/token", sv->base), CS_OK);
	json_t *d = json_pack("{s:s, s:s+, s:s, s:s+, s:s+, s:[s], s:[s,s], s:b}",
	    "issuer", issuer, "authorization_endpoint", sv->base, "/auth",
	    "token_endpoint", token_ep != NULL ? token_ep : tok,
	    "jwks_uri", sv->base, "/jwks", "end_session_endpoint", sv->base, "/logout",
	    "subject_types_supported", "public", "code_challenge_methods_supported", "plain", "S256",
	    "authorization_response_iss_parameter_supported", 1);
	ck_assert_ptr_nonnull(d);
	pthread_mutex_lock(&sv->mu);
	free(sv->discovery);
	sv->discovery = json_dumps(d, JSON_COMPACT);
	pthread_mutex_unlock(&sv->mu);
	json_decref(d);
}

static void srv_start(struct srv *sv)
{
	struct sockaddr_in a;
	socklen_t alen = sizeof a;
	memset(sv, 0, sizeof *sv);
	pthread_mutex_init(&sv->mu, NULL);
	sv->fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(sv->fd, 0);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(sv->fd, (struct sockaddr *)&a, sizeof a), 0);
	ck_assert_int_eq(listen(sv->fd, 16), 0);
	ck_assert_int_eq(getsockname(sv->fd, (struct sockaddr *)&a, &alen), 0);
	ck_assert_int_eq(str_fmt(sv->base, sizeof sv->base, "http://127.0.0.1:%u", (unsigned)ntohs(a.sin_port)), CS_OK);
	sv->jwks_body = jwks;
	sv->token_status = 200;
	sv->token_body = "{}";
	srv_discovery(sv, sv->base, NULL);
	ck_assert_int_eq(pthread_create(&sv->th, NULL, srv_main, sv), 0);
}

static void srv_stop(struct srv *sv)
{
	__atomic_store_n(&sv->stop, 1, __ATOMIC_RELEASE);
	pthread_join(sv->th, NULL);
	close(sv->fd);
	free(sv->discovery);
	pthread_mutex_destroy(&sv->mu);
}

static int srv_hits(struct srv *sv)
{
	pthread_mutex_lock(&sv->mu);
	int n = sv->jwks_hits;
	pthread_mutex_unlock(&sv->mu);
	return n;
}

/* Validates an ES256 token for kid from issuer against p; returns the result. */
static enum cs_err validate_from(struct oidc_provider *p, const char *issuer, const char *kid)
{
	struct oidc_expect ex = expect_default();
	json_t *c = claims_default(), *claims = NULL;
	json_object_set_new(c, "iss", json_string(issuer));
	char *t = token_with("ES256", kid, c);
	enum cs_err e = oidc_validate(p, t, &ex, &claims, NULL, 0);
	json_decref(claims);
	free(t);
	return e;
}

struct miss {
	struct oidc_provider *p;
	const char *tok;
};

/* No Check assertions off the main thread: a wrong acceptance aborts. */
static void *miss_main(void *arg)
{
	struct miss *m = arg;
	struct oidc_expect ex = expect_default();
	for (int i = 0; i < 10; i++) {
		json_t *claims = NULL;
		if (oidc_validate(m->p, m->tok, &ex, &claims, NULL, 0) == CS_OK)
			abort();
	}
	return NULL;
}

/* The discovery document alone (oidc_meta_parse): what oidc_discover refuses. */
START_TEST(test_oidc_meta_parse_bad)
{
#define DOC(iss, rest) "{\"issuer\":\"" iss "\",\"authorization_endpoint\":\"https://i.test/a\"," \
	"\"token_endpoint\":\"https://i.test/t\"" rest "}"
	static const char *const bad[] = {
		"", "not json", "[]", "\"https://i.test\"", "{}",
		DOC("https://i.test/", ",\"jwks_uri\":\"https://i.test/k\""),     /* trailing slash */
		DOC("https://I.test", ",\"jwks_uri\":\"https://i.test/k\""),      /* case */
		DOC("https://i.test", ""),                                       /* no jwks_uri */
		DOC("https://i.test", ",\"jwks_uri\":\"http://i.test/k\""),       /* plain http */
		DOC("https://i.test", ",\"jwks_uri\":\"https://u:p@i.test/k\""),  /* userinfo */
		DOC("https://i.test", ",\"jwks_uri\":7"),
		DOC("https://i.test", ",\"jwks_uri\":\"https://i.test/k\",\"end_session_endpoint\":null"),
		DOC("https://i.test", ",\"jwks_uri\":\"https://i.test/k\",\"issuer\":\"https://i.test\""),
		"{\"issuer\":\"https://i.test\",\"authorization_endpoint\":\"https://i.test/a\","
		    "\"jwks_uri\":\"https://i.test/k\"}",                            /* no token_endpoint */
	};
	struct oidc_meta *m = NULL;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_assert_msg(oidc_meta_parse("https://i.test", bad[i], &m) == CS_EINVAL, "accepted %s",
		    bad[i]);
		ck_assert_ptr_null(m);
	}
	ck_assert_int_eq(oidc_meta_parse("https://i.test", NULL, &m), CS_EINVAL);
	ck_assert_int_eq(oidc_meta_parse(NULL, "{}", &m), CS_EINVAL);
	ck_assert_int_eq(oidc_meta_parse("https://i.test",
	    DOC("https://i.test", ",\"jwks_uri\":\"https://i.test/k\",\"subject_types_supported\":\"public\"")
	    , &m), CS_OK);
	ck_assert_str_eq(m->jwks_uri, "https://i.test/k");
	ck_assert_ptr_null(m->end_session_endpoint);
	ck_assert(!m->public_subjects);                  /* a string, not the array */
	ck_assert(!m->s256_supported && !m->iss_parameter_supported);
	oidc_meta_free(m);
	oidc_meta_free(NULL);
#undef DOC
}
END_TEST

START_TEST(test_oidc_discover_and_refetch)
{
	struct srv sv;
	struct oidc_provider *p = NULL;
	char only_rsa[4096];
	srv_start(&sv);
	ck_assert_int_eq(str_fmt(only_rsa, sizeof only_rsa, "{\"keys\":[%s]}", rsa_jwk), CS_OK);
	sv.jwks_body = only_rsa;
	ck_assert_int_eq(oidc_provider_new(sv.base, SKEW, &p), CS_OK);
	ck_assert_int_eq(oidc_discover(p), CS_OK);
	const struct oidc_meta *m = oidc_meta(p);
	ck_assert_ptr_nonnull(m);
	ck_assert_str_eq(m->issuer, sv.base);
	ck_assert_ptr_nonnull(strstr(m->token_endpoint, "/token"));
	ck_assert_ptr_nonnull(strstr(m->jwks_uri, "/jwks"));
	ck_assert_ptr_nonnull(m->end_session_endpoint);
	ck_assert(m->iss_parameter_supported);
	ck_assert(m->public_subjects);
	ck_assert(m->s256_supported);
	ck_assert_int_eq(srv_hits(&sv), 1);
	/* Discovery again changes nothing and fetches nothing. */
	ck_assert_int_eq(oidc_discover(p), CS_OK);
	ck_assert_ptr_eq(oidc_meta(p), m);
	ck_assert_int_eq(srv_hits(&sv), 1);

	/* The provider rotates in the EC key: within the minute, no refetch. */
	pthread_mutex_lock(&sv.mu);
	sv.jwks_body = jwks;
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_ne(validate_from(p, sv.base, "ec1"), CS_OK);
	ck_assert_int_eq(srv_hits(&sv), 1);
	/* A minute later, one refetch finds it. */
	oidc_backdate_jwks_fetch(p, 61);
	ck_assert_int_eq(validate_from(p, sv.base, "ec1"), CS_OK);
	ck_assert_int_eq(srv_hits(&sv), 2);
	/* Unknown kids right after: no fetch; a minute later: exactly one. */
	for (int i = 0; i < 5; i++)
		ck_assert_int_ne(validate_from(p, sv.base, "nope"), CS_OK);
	ck_assert_int_eq(srv_hits(&sv), 2);
	oidc_backdate_jwks_fetch(p, 61);
	for (int i = 0; i < 5; i++)
		ck_assert_int_ne(validate_from(p, sv.base, "nope"), CS_OK);
	ck_assert_int_eq(srv_hits(&sv), 3);
	/* A refetch that yields nothing usable keeps the keys. */
	pthread_mutex_lock(&sv.mu);
	sv.jwks_body = "{\"keys\":[]}";
	pthread_mutex_unlock(&sv.mu);
	oidc_backdate_jwks_fetch(p, 61);
	ck_assert_int_ne(validate_from(p, sv.base, "nope"), CS_OK);
	ck_assert_int_eq(srv_hits(&sv), 4);
	ck_assert_int_eq(validate_from(p, sv.base, "ec1"), CS_OK);
	/* Many threads missing a kid at once: still one fetch. */
	json_t *c = claims_default();
	json_object_set_new(c, "iss", json_string(sv.base));
	char *nope = token_with("ES256", "nope", c);
	struct miss m4 = { p, nope };
	pthread_t th[4];
	oidc_backdate_jwks_fetch(p, 61);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, miss_main, &m4), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	ck_assert_int_eq(srv_hits(&sv), 5);
	free(nope);
	oidc_provider_free(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_oidc_discover_rejects)
{
	struct srv sv;
	struct oidc_provider *p = NULL;
	char iss[128];
	srv_start(&sv);
	ck_assert_int_eq(oidc_provider_new(sv.base, SKEW, &p), CS_OK);
	/* The document names another issuer (a trailing slash is another issuer). */
	ck_assert_int_eq(str_fmt(iss, sizeof iss, "%s/", sv.base), CS_OK);
	srv_discovery(&sv, iss, NULL);
	ck_assert_int_ne(oidc_discover(p), CS_OK);
	srv_discovery(&sv, "https://evil.test", NULL);
	ck_assert_int_ne(oidc_discover(p), CS_OK);
	/* An endpoint that is not https (and not loopback). */
	srv_discovery(&sv, sv.base, "http://idp.example/token");
	ck_assert_int_ne(oidc_discover(p), CS_OK);
	srv_discovery(&sv, sv.base, "https://user@idp.example/token");
	ck_assert_int_ne(oidc_discover(p), CS_OK);
	/* No usable JWKS. */
	srv_discovery(&sv, sv.base, NULL);
	pthread_mutex_lock(&sv.mu);
	sv.jwks_body = NULL;
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_ne(oidc_discover(p), CS_OK);
	pthread_mutex_lock(&sv.mu);
	sv.jwks_body = "{\"keys\":[{\"kty\":\"oct\",\"kid\":\"k\",\"k\":\"c2VjcmV0\"}]}";
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_ne(oidc_discover(p), CS_OK);
	ck_assert_ptr_null(oidc_meta(p));
	/* No document at all. */
	pthread_mutex_lock(&sv.mu);
	free(sv.discovery);
	sv.discovery = NULL;
	sv.jwks_body = jwks;
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_ne(oidc_discover(p), CS_OK);
	ck_assert_ptr_null(oidc_meta(p));
	/* Fixed: a retry succeeds. */
	srv_discovery(&sv, sv.base, NULL);
	ck_assert_int_eq(oidc_discover(p), CS_OK);
	ck_assert_ptr_nonnull(oidc_meta(p));
	oidc_provider_free(p);

	/* An issuer configured with a trailing slash: discovery drops it before
	 * the well-known path, and the document must name it with the slash. */
	ck_assert_int_eq(oidc_provider_new(iss, SKEW, &p), CS_OK);
	ck_assert_int_ne(oidc_discover(p), CS_OK);
	srv_discovery(&sv, iss, NULL);
	ck_assert_int_eq(oidc_discover(p), CS_OK);
	ck_assert_str_eq(oidc_meta(p)->issuer, iss);
	oidc_provider_free(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_oidc_exchange_code)
{
	struct srv sv;
	struct oidc_provider *p = NULL;
	char *tok = NULL;
	srv_start(&sv);
	ck_assert_int_eq(oidc_provider_new(sv.base, SKEW, &p), CS_OK);
	ck_assert_int_eq(oidc_discover(p), CS_OK);
	sv.token_body = "{\"access_token\":\"at\",\"id_token\":\"a.b.c\",\"token_type\":\"Bearer\"}";
	ck_assert_int_eq(oidc_exchange_code(p, "my client:1", "s\xc3\xa9" "cret+/%", OIDC_AUTH_BASIC,
	    "the code", "https://rp.test/cb?x=1", "verif-ier", &tok), CS_OK);
	ck_assert_str_eq(tok, "a.b.c");
	free(tok);
	tok = NULL;
	/* RFC 6749 §2.3.1: form-encoded, then Base64. */
	const char *raw = "my%20client%3A1:s%C3%A9cret%2B%2F%25";
	char *b64 = malloc(4 * strlen(raw) / 3 + 8), want[256];
	ck_assert_ptr_nonnull(b64);
	EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)raw, (int)strlen(raw));
	ck_assert_int_eq(str_fmt(want, sizeof want, "Basic %s", b64), CS_OK);
	free(b64);
	ck_assert_str_eq(sv.last_auth, want);
	ck_assert_str_eq(sv.last_body, "grant_type=authorization_code&code=the%20code&"
	    "redirect_uri=https%3A%2F%2Frp.test%2Fcb%3Fx%3D1&code_verifier=verif-ier");
	/* client_secret_post: credentials in the body, no Authorization. */
	ck_assert_int_eq(oidc_exchange_code(p, "c", "s&t", OIDC_AUTH_POST, "k", "https://rp.test/cb",
	    "v", &tok), CS_OK);
	free(tok);
	tok = NULL;
	ck_assert_str_eq(sv.last_auth, "");
	ck_assert_str_eq(sv.last_body, "grant_type=authorization_code&code=k&"
	    "redirect_uri=https%3A%2F%2Frp.test%2Fcb&code_verifier=v&client_id=c&client_secret=s%26t");
	/* Refusals and bad answers. */
	sv.token_status = 400;
	sv.token_body = "{\"error\":\"invalid_grant\"}";
	ck_assert_int_eq(oidc_exchange_code(p, "c", "s", OIDC_AUTH_BASIC, "k", "https://rp.test/cb",
	    "v", &tok), CS_EPERM);
	sv.token_status = 401;
	ck_assert_int_eq(oidc_exchange_code(p, "c", "s", OIDC_AUTH_BASIC, "k", "https://rp.test/cb",
	    "v", &tok), CS_EPERM);
	sv.token_status = 500;
	ck_assert_int_eq(oidc_exchange_code(p, "c", "s", OIDC_AUTH_BASIC, "k", "https://rp.test/cb",
	    "v", &tok), CS_EIO);
	sv.token_status = 200;
	sv.token_body = "{\"access_token\":\"at\"}";
	ck_assert_int_eq(oidc_exchange_code(p, "c", "s", OIDC_AUTH_BASIC, "k", "https://rp.test/cb",
	    "v", &tok), CS_EINVAL);
	sv.token_body = "{\"id_token\":7}";
	ck_assert_int_eq(oidc_exchange_code(p, "c", "s", OIDC_AUTH_BASIC, "k", "https://rp.test/cb",
	    "v", &tok), CS_EINVAL);
	sv.token_body = "not json";
	ck_assert_int_eq(oidc_exchange_code(p, "c", "s", OIDC_AUTH_BASIC, "k", "https://rp.test/cb",
	    "v", &tok), CS_EINVAL);
	ck_assert_ptr_null(tok);
	oidc_provider_free(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_httpc_transfers)
{
	struct srv sv;
	struct httpc_response res;
	char url[128];
	srv_start(&sv);
	ck_assert_int_eq(str_fmt(url, sizeof url, "%s/jwks", sv.base), CS_OK);
	ck_assert_int_eq(httpc_get(url, &res), CS_OK);
	ck_assert_int_eq(res.status, 200);
	ck_assert_str_eq(res.body.data, jwks);
	ck_assert_str_eq(res.content_type, "application/json");
	httpc_response_clear(&res);
	/* Non-2xx is not an error; the body is an empty string, never NULL. */
	ck_assert_int_eq(str_fmt(url, sizeof url, "%s/redirect", sv.base), CS_OK);
	ck_assert_int_eq(httpc_get(url, &res), CS_OK);
	ck_assert_int_eq(res.status, 302);             /* not followed */
	ck_assert_str_eq(res.body.data, "");
	httpc_response_clear(&res);
	ck_assert_int_eq(str_fmt(url, sizeof url, "%s/big", sv.base), CS_OK);
	ck_assert_int_eq(httpc_get(url, &res), CS_ETOOBIG);
	ck_assert_ptr_null(res.body.data);
	httpc_response_clear(&res);
	/* Nothing listening. */
	srv_stop(&sv);
	ck_assert_int_eq(httpc_get(url, &res), CS_EIO);
	httpc_response_clear(&res);
}
END_TEST

/* --- setup -------------------------------------------------------------- */

static void keys_setup(void)
{
	BIO *bio;
	char *pem_data = NULL;
	long pem_len;
	EVP_PKEY *small;

	rsa_key = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	ec_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	small = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
	must(rsa_key != NULL);
	must(ec_key != NULL);
	must(small != NULL);
	rsa_jwk = rsa_public_jwk(rsa_key, "rsa1", "");
	char *rsa_rs = rsa_public_jwk(rsa_key, "rsa-rs", ",\"alg\":\"RS256\",\"use\":\"sig\"");
	char *rsa_enc = rsa_public_jwk(rsa_key, "enc1", ",\"use\":\"enc\"");
	char *rsa_small = rsa_public_jwk(small, "small", "");
	/* A "public" key with a private member: skipped whatever the member holds. */
	char *rsa_priv = rsa_public_jwk(rsa_key, "priv", ",\"d\":\"AQAB\"");
	char *ec = ec_public_jwk(ec_key, "ec1", ",\"use\":\"sig\"");
	char *ec_bad_alg = ec_public_jwk(ec_key, "ec-hs", ",\"alg\":\"HS256\"");
	size_t cap = strlen(rsa_jwk) + strlen(rsa_rs) + strlen(rsa_enc) + strlen(rsa_small) +
	    strlen(rsa_priv) + strlen(ec) + strlen(ec_bad_alg) + 256;
	jwks = malloc(cap);
	must(jwks != NULL);
	must(str_fmt(jwks, cap, "{\"keys\":[%s,%s,%s,%s,%s,%s,%s,"
	    "{\"kty\":\"oct\",\"kid\":\"oct1\",\"k\":\"c2VjcmV0\"},{\"kid\":\"nokty\"},17]}",
	    rsa_priv, rsa_jwk, rsa_rs, rsa_enc, rsa_small, ec, ec_bad_alg) == CS_OK);
	free(rsa_rs);
	free(rsa_enc);
	free(rsa_small);
	free(rsa_priv);
	free(ec);
	free(ec_bad_alg);
	EVP_PKEY_free(small);

	bio = BIO_new(BIO_s_mem());
	must(bio != NULL);
	must(PEM_write_bio_PUBKEY(bio, rsa_key) == 1);
	pem_len = BIO_get_mem_data(bio, &pem_data);
	rsa_pem = strndup(pem_data, (size_t)pem_len);
	must(rsa_pem != NULL);
	BIO_free(bio);
}

static void keys_teardown(void)
{
	EVP_PKEY_free(rsa_key);
	EVP_PKEY_free(ec_key);
	free(rsa_jwk);
	free(rsa_pem);
	free(jwks);
}

static Suite *oidc_suite(void)
{
	Suite *s = suite_create("oidc");
	TCase *tc = tcase_create("validate");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_oidc_validate_valid_rs256);
	tcase_add_test(tc, test_oidc_validate_valid_ps256_es256);
	tcase_add_test(tc, test_oidc_validate_subject_token_rules);
	tcase_add_test(tc, test_oidc_validate_alg_none);
	tcase_add_test(tc, test_oidc_validate_hs256_with_public_key);
	tcase_add_test(tc, test_oidc_validate_alg_key_mismatch);
	tcase_add_test(tc, test_oidc_validate_unknown_kid);
	tcase_add_test(tc, test_oidc_validate_no_keys_no_discovery);
	tcase_add_test(tc, test_oidc_validate_tampered);
	tcase_add_test(tc, test_oidc_validate_iss);
	tcase_add_test(tc, test_oidc_validate_aud_azp);
	tcase_add_test(tc, test_oidc_validate_exp);
	tcase_add_test(tc, test_oidc_validate_nbf_iat);
	tcase_add_test(tc, test_oidc_validate_nonce);
	tcase_add_test(tc, test_oidc_validate_auth_time);
	tcase_add_test(tc, test_oidc_validate_logout_token);
	tcase_add_test(tc, test_oidc_validate_reason_per_check);
	tcase_add_test(tc, test_oidc_validate_shape);
	tcase_add_test(tc, test_oidc_validate_bad_header_payload);
	tcase_add_test(tc, test_oidc_validate_bad_args);
	tcase_add_test(tc, test_oidc_jwks_rejects);
	tcase_add_test(tc, test_oidc_jwks_malformed_base64);
	tcase_add_test(tc, test_oidc_meta_parse_bad);
	tcase_add_test(tc, test_oidc_provider_new_rejects);
	tcase_add_test(tc, test_oidc_validate_concurrent_jwks_swap);
	tcase_add_test(tc, test_oidc_cache_hit_returns_cached_validation);
	tcase_add_test(tc, test_oidc_cache_hit_checks_claims_again);
	tcase_add_test(tc, test_oidc_cache_failure_not_cached);
	tcase_add_test(tc, test_oidc_cache_key_set_change_drops_all);
	tcase_add_test(tc, test_oidc_cache_concurrent_threads);
	suite_add_tcase(s, tc);
	TCase *tn = tcase_create("network");
	tcase_set_timeout(tn, 60);
	tcase_add_test(tn, test_oidc_discover_and_refetch);
	tcase_add_test(tn, test_oidc_discover_rejects);
	tcase_add_test(tn, test_oidc_exchange_code);
	tcase_add_test(tn, test_httpc_transfers);
	suite_add_tcase(s, tn);
	TCase *th = tcase_create("httpc");
	tcase_add_test(th, test_httpc_url_allowed);
	tcase_add_test(th, test_httpc_refuses_before_network);
	suite_add_tcase(s, th);
	return s;
}

int main(void)
{
	if (httpc_global_init() != CS_OK)
		return EXIT_FAILURE;
	keys_setup();
	int rc = tu_run(oidc_suite());
	keys_teardown();
	curl_global_cleanup();
	return rc;
}
