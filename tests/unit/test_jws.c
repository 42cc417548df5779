/* test_jws.c -- the JWS verifier for keys from outside (jws.c) and the gateway's
 * client assertions (client_assertion_check in client_auth.c), against vectors
 * signed by jose (tests/unit/vectors/gen_jws.mjs): every algorithm of the
 * allowlist verifies, and every way an assertion can be wrong is refused. */
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "buf.h"
#include "client_auth.h"
#include "jws.h"
#include "jws_vectors.h"
#include "jws_vectors_9864.h"
#include "testutil.h"

static json_t *J(const char *s)
{
	json_t *v = json_loads(s, 0, NULL);
	ck_assert_ptr_nonnull(v);
	return v;
}

static void key_ok(const char *jwk, enum jws_alg alg, const char *jkt)
{
	struct jws_key *k = NULL;
	char why[128] = "";
	json_t *v = J(jwk);
	ck_assert_msg(jws_key_from_jwk(v, &k, why, sizeof why) == CS_OK, "%s: %s", jwk, why);
	ck_assert_int_eq(k->alg, alg);
	ck_assert_str_eq(k->jkt, jkt);   /* RFC 7638, as jose computes it */
	jws_key_free(k);
	json_decref(v);
}

static void key_bad(const char *jwk, const char *want)
{
	struct jws_key *k = NULL;
	char why[128] = "";
	json_t *v = json_loads(jwk, 0, NULL);
	ck_assert_int_eq(jws_key_from_jwk(v, &k, why, sizeof why), CS_EINVAL);
	ck_assert_ptr_null(k);
	ck_assert_msg(strstr(why, want) != NULL, "wanted \"%s\" in \"%s\" for %s", want, why, jwk);
	json_decref(v);
}

START_TEST(test_jws_keys_import_and_thumbprint)
{
	key_ok(V_JWK_ES, JWS_ES256, V_JKT_ES);
	key_ok(V_JWK_PS, JWS_PS256, V_JKT_PS);
	key_ok(V_JWK_ED, JWS_EDDSA, V_JKT_ED);
}
END_TEST

START_TEST(test_jws_keys_hostile)
{
	key_bad(V_JWK_ES_PRIVATE, "private");
	key_bad("{\"kty\":\"oct\",\"k\":\"c2VjcmV0\"}", "private or symmetric");
	key_bad("{\"kty\":\"oct\"}", "not EC, RSA or OKP");
	key_bad("{\"crv\":\"P-256\"}", "no kty");
	key_bad("[1]", "JSON object");
	key_bad("{\"kty\":\"EC\",\"crv\":\"P-384\",\"x\":\"AA\",\"y\":\"AA\"}", "P-256");
	key_bad("{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AAAA\",\"y\":\"AAAA\"}", "32 bytes");
	/* 32 + 32 bytes, but not a point on the curve */
	key_bad("{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\","
	    "\"y\":\"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}", "not on P-256");
	key_bad("{\"kty\":\"RSA\",\"n\":\"AQAB\",\"e\":\"AQAB\"}", "2048");
	key_bad("{\"kty\":\"OKP\",\"crv\":\"X25519\",\"x\":\"AA\"}", "Ed25519");
	key_bad("{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"!!!!\"}", "32 bytes");
	/* an EC key claiming to be for HS256 */
	json_t *v = J(V_JWK_ES);
	json_object_set_new(v, "alg", json_string("HS256"));
	char *s = json_dumps(v, 0);
	key_bad(s, "alg");
	free(s);
	json_decref(v);
}
END_TEST

START_TEST(test_jws_keyset_parse)
{
	struct jws_keyset *ks = NULL;
	char why[160];
	ck_assert_int_eq(jws_keyset_parse(V_JWKS, &ks, why, sizeof why), CS_OK);
	ck_assert_uint_eq(ks->n, 3);
	ck_assert_str_eq(ks->keys[0]->kid, "es");
	jws_keyset_free(ks);
	ks = NULL;
	static const char *const bad[] = { "", "{}", "{\"keys\":[]}", "{\"keys\":{}}", "not json",
		"{\"keys\":[{\"kty\":\"oct\",\"k\":\"AA\"}]}", NULL };
	for (size_t i = 0; bad[i] != NULL; i++) {
		ck_assert_msg(jws_keyset_parse(bad[i], &ks, why, sizeof why) == CS_EINVAL, "%s", bad[i]);
		ck_assert_ptr_null(ks);
	}
	/* the same kid twice, and a key for encryption */
	json_t *d = J(V_JWKS);
	json_t *keys = json_object_get(d, "keys");
	json_object_set_new(json_array_get(keys, 1), "kid", json_string("es"));
	char *s = json_dumps(d, 0);
	ck_assert_int_eq(jws_keyset_parse(s, &ks, why, sizeof why), CS_EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "twice"));
	free(s);
	json_object_set_new(json_array_get(keys, 1), "kid", json_string("ps"));
	json_object_set_new(json_array_get(keys, 2), "use", json_string("enc"));
	s = json_dumps(d, 0);
	ck_assert_int_eq(jws_keyset_parse(s, &ks, why, sizeof why), CS_EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "sig"));
	free(s);
	json_decref(d);
}
END_TEST

START_TEST(test_jws_parse_hostile)
{
	static const char *const bad[] = { "", "a", "a.b", "a.b.c.d", ".b.c", "a..c", "a.b.",
		"eyJhbGciOiJFUzI1NiJ9.e30.!!", "e30.e30.AAAA", V_ASSERT_NONE, V_ASSERT_HS256,
		"W10.e30.AAAA",                              /* header [] */
		"eyJhbGciOiJFUzI1NiIsImNyaXQiOlsieCJdfQ.e30.AAAA",   /* crit */
		"eyJhbGciOiJFUzI1NiIsImFsZyI6IkVTMjU2In0.e30.AAAA",  /* duplicate alg */
		NULL };
	struct jws_parsed p;
	char why[128];
	for (size_t i = 0; bad[i] != NULL; i++)
		ck_assert_msg(jws_parse(bad[i], JWS_ALGS_CLIENT_ASSERTION, &p, why, sizeof why) ==
		    CS_EINVAL, "%s", bad[i]);
	char *big = malloc(JWS_MAX_COMPACT + 2);
	memset(big, 'A', JWS_MAX_COMPACT + 1);
	big[JWS_MAX_COMPACT + 1] = '\0';
	ck_assert_int_eq(jws_parse(big, JWS_ALGS_CLIENT_ASSERTION, &p, why, sizeof why), CS_EINVAL);
	free(big);
	ck_assert_int_eq(jws_parse(V_ASSERT_ES, JWS_ALGS_CLIENT_ASSERTION, &p, why, sizeof why), CS_OK);
	ck_assert_int_eq(p.alg, JWS_ES256);
	jws_parsed_clear(&p);
}
END_TEST

/* --- client assertions ------------------------------------------------------------- */

static struct jws_keyset *keys;
static const char *const auds[] = { "https://consent.example.com",
	"https://consent.example.com/token" };

static enum cs_err check(const char *a, char *why, size_t whylen)
{
	struct client_assertion_expect e = { .keys = keys, .client_id = "agent-gateway",
		.audiences = auds, .naudiences = 2, .now = V_NOW, .clock_skew = 60 };
	char *jti = NULL;
	int64_t exp = 0;
	enum cs_err r = client_assertion_check(a, &e, &jti, &exp, why, whylen);
	if (r == CS_OK) {
		ck_assert_str_eq(jti, "jti-1");
		ck_assert_int_eq(exp, V_NOW + 60);
	} else {
		ck_assert_ptr_null(jti);
	}
	free(jti);
	return r;
}

static void setup(void)
{
	char why[160];
	ck_assert_int_eq(jws_keyset_parse(V_JWKS, &keys, why, sizeof why), CS_OK);
}

static void teardown(void)
{
	jws_keyset_free(keys);
	keys = NULL;
}

START_TEST(test_jws_assertion_good)
{
	char why[160];
	static const char *const good[] = { V_ASSERT_ES, V_ASSERT_PS, V_ASSERT_ED, NULL };
	for (size_t i = 0; good[i] != NULL; i++)
		ck_assert_msg(check(good[i], why, sizeof why) == CS_OK, "%zu: %s", i, why);
}
END_TEST

START_TEST(test_jws_assertion_hostile)
{
	static const struct { const char *a, *why; } bad[] = {
		{ V_ASSERT_AUD_OTHER, "aud" },
		/* S1: an array naming this server and another is audience injection's shape */
		{ V_ASSERT_AUD_ARRAY, "aud" },
		/* S4: no kid while the set has three keys: refused before any signature */
		{ V_ASSERT_NOKID, "kid is required" },
		{ V_ASSERT_EXPIRED, "expired" },
		{ V_ASSERT_TOO_LONG, "5 minutes" },
		{ V_ASSERT_NO_EXP, "exp" },
		{ V_ASSERT_ISS_OTHER, "iss and sub" },
		{ V_ASSERT_SUB_OTHER, "iss and sub" },
		{ V_ASSERT_NO_JTI, "jti" },
		{ V_ASSERT_FUTURE_IAT, "iat" },
		{ V_ASSERT_ROGUE, "not signed" },
		{ V_ASSERT_KID_UNKNOWN, "not signed" },
		{ V_ASSERT_ALG_MISMATCH, "not signed" },
		{ V_ASSERT_HS256, "algorithm" },
		{ V_ASSERT_NONE, "non-empty" },      /* no signature at all */
		/* a DPoP proof by the same key is no assertion (it has no kid: refused for that first) */
		{ V_PROOF_ES, "kid is required" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char why[160] = "";
		ck_assert_msg(check(bad[i].a, why, sizeof why) == CS_EINVAL, "%zu passed", i);
		ck_assert_msg(strstr(why, bad[i].why) != NULL, "%zu: wanted \"%s\" in \"%s\"", i,
		    bad[i].why, why);
	}
	/* no keys configured */
	struct client_assertion_expect e = { .keys = NULL, .client_id = "agent-gateway",
		.audiences = auds, .naudiences = 2, .now = V_NOW, .clock_skew = 60 };
	char *jti = NULL, why[160];
	int64_t exp;
	ck_assert_int_eq(client_assertion_check(V_ASSERT_ES, &e, &jti, &exp, why, sizeof why), CS_EINVAL);
	/* tampered payload: the signature no longer matches */
	char *t = strdup(V_ASSERT_ES);
	char *dot = strchr(t, '.');
	dot[3] = dot[3] == 'A' ? 'B' : 'A';
	ck_assert_int_eq(check(t, why, sizeof why), CS_EINVAL);
	free(t);
}
END_TEST

/* Checks a against the keys of jwks (a JWKS text). */
static enum cs_err check_with(const char *jwks, const char *a, char *why, size_t whylen)
{
	struct jws_keyset *ks = NULL;
	ck_assert_int_eq(jws_keyset_parse(jwks, &ks, why, whylen), CS_OK);
	struct jws_keyset *saved = keys;
	keys = ks;
	enum cs_err r = check(a, why, whylen);
	keys = saved;
	jws_keyset_free(ks);
	return r;
}

/* RFC 9864: "Ed25519" is accepted wherever EdDSA is, by the parser, in a JWK's alg and
 * for assertions; never with a key of another type. */
START_TEST(test_jws_ed25519)
{
	struct jws_parsed p;
	char why[160] = "";
	ck_assert_int_eq(jws_alg_parse("Ed25519"), JWS_EDDSA);
	ck_assert_int_eq(jws_alg_parse("EdDSA"), JWS_EDDSA);
	ck_assert_int_eq(jws_alg_parse("Ed448"), JWS_ALG__MAX);
	ck_assert_int_eq(jws_alg_parse("ed25519"), JWS_ALG__MAX);
	ck_assert_int_eq(jws_parse(W_ASSERT_ED25519, JWS_ALGS_CLIENT_ASSERTION, &p, why, sizeof why),
	    CS_OK);
	ck_assert_int_eq(p.alg, JWS_EDDSA);
	jws_parsed_clear(&p);
	/* the advertised list: the three algorithms and the fully specified name */
	size_t n = 0;
	for (; jws_alg_names_accepted[n] != NULL; n++)
		ck_assert_int_ne(jws_alg_parse(jws_alg_names_accepted[n]), JWS_ALG__MAX);
	ck_assert_uint_eq(n, 4);
	ck_assert_str_eq(jws_alg_names_accepted[3], "Ed25519");
	/* a JWKS whose OKP key says alg Ed25519 imports; an EC key saying so does not */
	ck_assert_msg(check_with(W_JWKS, W_ASSERT_ED25519, why, sizeof why) == CS_OK, "%s", why);
	key_bad(W_JWK_EC_ALG_ED25519, "alg");
	/* "Ed25519" naming the EC key, or an ES256 signature under an "Ed25519" header */
	ck_assert_int_eq(check_with(W_JWKS, W_ASSERT_ED25519_ON_ES, why, sizeof why), CS_EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "not signed"));
	ck_assert_int_eq(check_with(W_JWKS, W_ASSERT_ES_SIG_ED25519_ALG, why, sizeof why), CS_EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "not signed"));
}
END_TEST

/* S1 (draft-ietf-oauth-rfc7523bis): aud is the issuer, or the token endpoint for older
 * clients, as a string or a one-value array; no other endpoint, no extra values.  S4: a
 * kid is required when the set holds more than one key, not when it holds one. */
START_TEST(test_jws_assertion_audience_and_kid)
{
	char why[160] = "";
	ck_assert_msg(check_with(W_JWKS, W_ASSERT_AUD_ONE, why, sizeof why) == CS_OK, "%s", why);
	ck_assert_msg(check_with(W_JWKS, W_ASSERT_AUD_TOKEN, why, sizeof why) == CS_OK, "%s", why);
	ck_assert_int_eq(check_with(W_JWKS, W_ASSERT_AUD_INTROSPECT, why, sizeof why), CS_EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "aud"));
	ck_assert_int_eq(check_with(W_JWKS, W_ASSERT_AUD_TWO, why, sizeof why), CS_EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "aud"));
	ck_assert_int_eq(check_with(W_JWKS, W_ASSERT_ED25519_NOKID, why, sizeof why), CS_EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "kid is required"));
	ck_assert_msg(check_with(W_JWKS_ONE, W_ASSERT_ED25519_NOKID, why, sizeof why) == CS_OK, "%s",
	    why);
	/* with one key, a DPoP proof by it is still no assertion */
	ck_assert_int_eq(check_with(W_JWKS_ONE, W_PROOF_ED25519, why, sizeof why), CS_EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "iss and sub"));
}
END_TEST

/* Each use names its allowlist (jws.h): a header's algorithm outside the
 * use's list is refused whatever the key, and a key verifies only the
 * algorithms of its use's list its type fits (its JWK's alg, when pinned). */
START_TEST(test_jws_allowlist_per_use)
{
	struct jws_parsed p;
	struct jws_key *k = NULL;
	char why[128] = "", *rs = NULL;
	const char *dot = strchr(V_ASSERT_PS, '.');
	struct buf b;
	/* {"alg":"RS256","kid":"ps"} over the PS256 vector's payload and signature. */
	buf_init(&b, 16384);
	ck_assert_int_eq(buf_puts(&b, "eyJhbGciOiJSUzI1NiIsImtpZCI6InBzIn0"), CS_OK);
	ck_assert_int_eq(buf_puts(&b, dot), CS_OK);
	rs = buf_steal(&b);
	ck_assert_int_eq(jws_parse(rs, JWS_ALGS_CLIENT_ASSERTION, &p, why, sizeof why), CS_EINVAL);
	ck_assert_str_eq(why, "the algorithm is not ES256, PS256, EdDSA or Ed25519");
	ck_assert_int_eq(jws_parse(rs, JWS_ALGS_DPOP_PROOF, &p, why, sizeof why), CS_EINVAL);
	ck_assert_int_eq(jws_parse(V_ASSERT_ED, JWS_ALGS_IDP_TOKEN, &p, why, sizeof why), CS_EINVAL);
	ck_assert_str_eq(why, "the algorithm is not ES256, PS256 or RS256");
	ck_assert_int_eq(jws_parse(V_ASSERT_PS, JWS_ALGS_OWN, &p, why, sizeof why), CS_EINVAL);
	ck_assert_str_eq(why, "the algorithm is not ES256");
	ck_assert_int_eq(jws_parse(rs, JWS_ALGS_IDP_TOKEN, &p, why, sizeof why), CS_OK);
	ck_assert_int_eq(p.alg, JWS_RS256);
	jws_parsed_clear(&p);

	/* An RSA key: PS256 alone for the gateway, PS256 and RS256 for the IdP. */
	json_t *v = J(V_JWK_PS);
	ck_assert_int_eq(jws_key_from_jwk(v, &k, why, sizeof why), CS_OK);
	ck_assert_uint_eq(k->algs, JWS_ALG_BIT(JWS_PS256));
	jws_key_free(k);
	ck_assert_int_eq(jws_key_from_jwk_for(v, JWS_ALGS_IDP_TOKEN, &k, why, sizeof why), CS_OK);
	ck_assert_uint_eq(k->algs, JWS_ALG_BIT(JWS_PS256) | JWS_ALG_BIT(JWS_RS256));
	ck_assert_int_eq(jws_parse(V_ASSERT_PS, JWS_ALGS_IDP_TOKEN, &p, why, sizeof why), CS_OK);
	ck_assert(jws_verify(&p, k));
	/* The right key and signature, the wrong algorithm: never. */
	ck_assert(!jws_verify_input(k, JWS_RS256, p.signing_input, p.signing_input_len, p.sig,
	    p.sig_len));
	jws_key_free(k);
	k = NULL;
	ck_assert_int_eq(jws_key_from_jwk_for(v, JWS_ALGS_OWN, &k, why, sizeof why), CS_EINVAL);
	ck_assert_ptr_null(k);
	ck_assert_str_eq(why, "the key type is not allowed here");
	/* Pinned to RS256 by its JWK: refused for the gateway, RS256 alone for the IdP. */
	ck_assert_int_eq(json_object_set_new(v, "alg", json_string("RS256")), 0);
	ck_assert_int_eq(jws_key_from_jwk(v, &k, why, sizeof why), CS_EINVAL);
	ck_assert_str_eq(why, "the JWK's alg is not one allowed for its key type");
	ck_assert_int_eq(jws_key_from_jwk_for(v, JWS_ALGS_IDP_TOKEN, &k, why, sizeof why), CS_OK);
	ck_assert_uint_eq(k->algs, JWS_ALG_BIT(JWS_RS256));
	ck_assert(!jws_verify(&p, k));            /* a PS256 signature */
	jws_key_free(k);
	jws_parsed_clear(&p);
	json_decref(v);
	/* An Ed25519 key has no algorithm on the IdP's list. */
	v = J(V_JWK_ED);
	ck_assert_int_eq(jws_key_from_jwk_for(v, JWS_ALGS_IDP_TOKEN, &k, why, sizeof why), CS_EINVAL);
	json_decref(v);
	free(rs);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("jws");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_jws_keys_import_and_thumbprint);
	tcase_add_test(tc, test_jws_keys_hostile);
	tcase_add_test(tc, test_jws_keyset_parse);
	tcase_add_test(tc, test_jws_parse_hostile);
	tcase_add_test(tc, test_jws_allowlist_per_use);
	tcase_add_test(tc, test_jws_assertion_good);
	tcase_add_test(tc, test_jws_assertion_hostile);
	tcase_add_test(tc, test_jws_ed25519);
	tcase_add_test(tc, test_jws_assertion_audience_and_kid);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
