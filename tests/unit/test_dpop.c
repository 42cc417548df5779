/* test_dpop.c -- DPoP proof checks (dpop_proof_check) and server nonces against
 * proofs signed by jose (tests/unit/vectors/gen_jws.mjs): every allowed algorithm
 * passes, and every way a proof can be wrong, forged or for another request fails. */
#include <string.h>
#include "dpop.h"
#include "jws_vectors.h"
#include "jws_vectors_9864.h"
#include "testutil.h"
#include "audit.h"

#define HTU "https://consent.example.com/token"

static enum dpop_verdict check(const char *proof, const char *htm, const char *htu,
    const char *token, const unsigned char *nonce_key, int64_t now, char *why, size_t whylen,
    struct dpop_proof *out)
{
	struct dpop_expect e = { .htm = htm, .htu = htu, .access_token = token,
		.nonce_key = nonce_key, .now = now, .window = 60 };
	enum dpop_verdict v = DPOP_VERDICT__MAX;
	ck_assert_int_eq(dpop_proof_check(proof, &e, out, &v, why, whylen), CS_OK);
	ck_assert_int_ne(v, DPOP_VERDICT__MAX);
	return v;
}

static void good(const char *proof, const char *jkt)
{
	struct dpop_proof p;
	char why[160] = "";
	ck_assert_msg(check(proof, "POST", HTU, NULL, NULL, V_NOW, why, sizeof why, &p) == DPOP_VALID,
	    "%s", why);
	ck_assert_str_eq(p.jkt, jkt);
	ck_assert_str_eq(p.jti, "p-1");
	ck_assert_int_eq(p.iat, V_NOW);
	dpop_proof_clear(&p);
}

static void bad(const char *proof, const char *htm, const char *htu, const char *token,
    int64_t now, const char *want)
{
	struct dpop_proof p;
	char why[160] = "";
	memset(&p, 0, sizeof p);
	ck_assert_int_eq(check(proof, htm, htu, token, NULL, now, why, sizeof why, &p), DPOP_INVALID);
	ck_assert_ptr_null(p.jti);
	ck_assert_msg(strstr(why, want) != NULL, "wanted \"%s\" in \"%s\"", want, why);
}

START_TEST(test_dpop_proof_good)
{
	good(V_PROOF_ES, V_JKT_ES);
	good(V_PROOF_PS, V_JKT_PS);
	good(V_PROOF_ED, V_JKT_ED);
	good(V_PROOF_QUERY, V_JKT_ES);     /* htu's query and fragment are not compared */
	/* iat at either edge of the window */
	struct dpop_proof p;
	char why[160];
	ck_assert_int_eq(check(V_PROOF_ES, "POST", HTU, NULL, NULL, V_NOW + 60, why, sizeof why, &p),
	    DPOP_VALID);
	dpop_proof_clear(&p);
	ck_assert_int_eq(check(V_PROOF_ES, "POST", HTU, NULL, NULL, V_NOW - 60, why, sizeof why, &p),
	    DPOP_VALID);
	dpop_proof_clear(&p);
	/* ath over the presented token */
	ck_assert_int_eq(check(V_PROOF_ATH, "GET", "https://consent.example.com/proxy/gh/repos",
	    "the-access-token", NULL, V_NOW, why, sizeof why, &p), DPOP_VALID);
	dpop_proof_clear(&p);
}
END_TEST

START_TEST(test_dpop_proof_hostile)
{
	bad(V_PROOF_ES, "GET", HTU, NULL, V_NOW, "htm");
	bad(V_PROOF_ES, "POST", "https://consent.example.com/introspect", NULL, V_NOW, "htu");
	bad(V_PROOF_ES, "POST", "https://consent.example.com/toke", NULL, V_NOW, "htu");
	bad(V_PROOF_ES, "POST", HTU "x", NULL, V_NOW, "htu");
	bad(V_PROOF_ES, "POST", HTU, NULL, V_NOW + 61, "window");
	bad(V_PROOF_ES, "POST", HTU, NULL, V_NOW - 61, "window");
	bad(V_PROOF_OLD, "POST", HTU, NULL, V_NOW, "window");
	bad(V_PROOF_FUTURE, "POST", HTU, NULL, V_NOW, "window");
	bad(V_PROOF_NO_JTI, "POST", HTU, NULL, V_NOW, "jti");
	bad(V_PROOF_TYP_JWT, "POST", HTU, NULL, V_NOW, "typ");
	bad(V_PROOF_NO_JWK, "POST", HTU, NULL, V_NOW, "jwk: missing");
	bad(V_PROOF_PRIVATE_JWK, "POST", HTU, NULL, V_NOW, "private");
	bad(V_PROOF_WRONG_JWK, "POST", HTU, NULL, V_NOW, "signature");   /* an Ed25519 jwk on an ES256 proof */
	bad(V_PROOF_HS256, "POST", HTU, NULL, V_NOW, "algorithm");
	bad(V_PROOF_NONE, "POST", HTU, NULL, V_NOW, "non-empty");
	bad(V_ASSERT_ES, "POST", HTU, NULL, V_NOW, "typ");                /* an assertion is no proof */
	/* a token presented: ath required and over that very token */
	bad(V_PROOF_ES, "POST", HTU, "the-access-token", V_NOW, "ath");
	bad(V_PROOF_ATH, "GET", "https://consent.example.com/proxy/gh/repos", "another-token", V_NOW, "ath");
	static const char *const junk[] = { "", "a.b.c", "..", "e30.e30.e30", NULL };
	for (size_t i = 0; junk[i] != NULL; i++)
		bad(junk[i], "POST", HTU, NULL, V_NOW, "");
}
END_TEST

/* RFC 9864: "Ed25519" is EdDSA with an Ed25519 key (oauth4webapi 3 signs proofs so), and
 * only with one: the jwk's key type still decides. */
START_TEST(test_dpop_proof_ed25519)
{
	struct dpop_proof p;
	char why[160] = "";
	ck_assert_msg(check(W_PROOF_ED25519, "POST", HTU, NULL, NULL, V_NOW, why, sizeof why, &p) ==
	    DPOP_VALID, "%s", why);
	ck_assert_str_eq(p.jkt, W_JKT_ED);
	dpop_proof_clear(&p);
	bad(W_PROOF_ED25519_EC_JWK, "POST", HTU, NULL, V_NOW, "signature");   /* an EC jwk */
	bad(W_PROOF_ES256_ED_JWK, "POST", HTU, NULL, V_NOW, "signature");     /* ES256 over an Ed25519 jwk */
}
END_TEST

START_TEST(test_dpop_nonce)
{
	unsigned char key[DPOP_NONCE_KEY_LEN], other[DPOP_NONCE_KEY_LEN];
	char n[DPOP_NONCE_LEN + 1], m[DPOP_NONCE_LEN + 1];
	memset(key, 7, sizeof key);
	memset(other, 8, sizeof other);
	ck_assert_int_eq(dpop_nonce_make(key, V_NOW, n), CS_OK);
	ck_assert_uint_eq(strlen(n), DPOP_NONCE_LEN);
	ck_assert(dpop_nonce_valid(key, n, V_NOW));
	ck_assert(dpop_nonce_valid(key, n, V_NOW + DPOP_NONCE_SLOT));         /* the next slot too */
	ck_assert(!dpop_nonce_valid(key, n, V_NOW + 2 * DPOP_NONCE_SLOT));    /* not later */
	ck_assert(!dpop_nonce_valid(key, n, V_NOW - DPOP_NONCE_SLOT));        /* not earlier */
	ck_assert(!dpop_nonce_valid(other, n, V_NOW));                        /* another server's */
	memcpy(m, n, sizeof m);
	m[10] = m[10] == 'A' ? 'B' : 'A';
	ck_assert(!dpop_nonce_valid(key, m, V_NOW));
	ck_assert(!dpop_nonce_valid(key, "", V_NOW));
	ck_assert(!dpop_nonce_valid(key, NULL, V_NOW));
	/* a proof without a nonce, or with a foreign one, asks for ours */
	struct dpop_proof p;
	char why[160];
	ck_assert_int_eq(check(V_PROOF_ES, "POST", HTU, NULL, key, V_NOW, why, sizeof why, &p),
	    DPOP_NEED_NONCE);
	ck_assert_int_eq(check(V_PROOF_NONCE, "POST", HTU, NULL, key, V_NOW, why, sizeof why, &p),
	    DPOP_NEED_NONCE);
	ck_assert_ptr_nonnull(strstr(why, "stale"));
}
END_TEST

/* Issue 29 item 4: a refusal's audit detail (dpop.refused, and
 * gateway.auth.refused alike) keeps its reason whole: a path that would not
 * fit is left out and said so, never cut. */
START_TEST(test_dpop_refusal_detail_never_cut)
{
	char d[AUDIT_REFUSAL_DETAIL_MAX + 1], path[AUDIT_REFUSAL_DETAIL_MAX + 2];
	ck_assert_int_eq(audit_refusal_detail(d, "POST ", "/token", ": the proof was used before"),
	    CS_OK);
	ck_assert_str_eq(d, "POST /token: the proof was used before");
	memset(path, 'a', sizeof path - 1);
	path[0] = '/';
	path[sizeof path - 1] = '\0';
	ck_assert_int_eq(audit_refusal_detail(d, "GET ", path, ": htu is not this request's URL"),
	    CS_OK);
	ck_assert_str_eq(d, "GET (a path too long to record): htu is not this request's URL");
	/* The longest path that fits is kept whole. */
	path[AUDIT_REFUSAL_DETAIL_MAX - strlen("GET : x")] = '\0';
	ck_assert_int_eq(audit_refusal_detail(d, "GET ", path, ": x"), CS_OK);
	ck_assert_uint_eq(strlen(d), AUDIT_REFUSAL_DETAIL_MAX);
	ck_assert_int_eq(strncmp(d + 4, path, strlen(path)), 0);
	/* Nothing to say without the reason: refused rather than cut. */
	char why[AUDIT_REFUSAL_DETAIL_MAX + 2];
	memset(why, 'w', sizeof why - 1);
	why[sizeof why - 1] = '\0';
	ck_assert_int_eq(audit_refusal_detail(d, "GET ", "/p", why), CS_ETOOBIG);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dpop");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_dpop_proof_good);
	tcase_add_test(tc, test_dpop_proof_hostile);
	tcase_add_test(tc, test_dpop_proof_ed25519);
	tcase_add_test(tc, test_dpop_nonce);
	tcase_add_test(tc, test_dpop_refusal_detail_never_cut);
	suite_add_tcase(s, tc);
	return tu_run(s);
}
