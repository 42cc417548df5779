/* bench_dpop_check.c -- the CPU cost of checking one DPoP proof (dpop_proof_check: parse,
 * import the proof's jwk, verify, claims) and one client assertion, on the jose-signed
 * vectors of tests/unit/jws_vectors.h, one thread.  Built like bench_jwt:
 *   cc -std=c17 -D_GNU_SOURCE -O2 -Iinclude -Ibuild -Itests/unit $(pkg-config --cflags openssl cjose jansson) \
 *     bench/bench_dpop_check.c build/rel/libconsentd.a \
 *     $(pkg-config --libs libmicrohttpd openssl cjose libcurl sqlite3 jansson inih) -pthread -o build/bench_dpop_check */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "client_auth.h"
#include "dpop.h"
#include "jws_vectors.h"

#define OPS 5000

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void proofs(const char *name, const char *proof, const char *htu, const char *htm,
    const char *token)
{
	struct dpop_expect e = { .htm = htm, .htu = htu, .access_token = token, .now = V_NOW,
		.window = 60 };
	char why[160];
	double t0 = now_s();
	for (int i = 0; i < OPS; i++) {
		struct dpop_proof p;
		enum dpop_verdict v;
		if (dpop_proof_check(proof, &e, &p, &v, why, sizeof why) != CS_OK || v != DPOP_VALID) {
			fprintf(stderr, "%s: %s\n", name, why);
			exit(1);
		}
		dpop_proof_clear(&p);
	}
	double dt = now_s() - t0;
	printf("| %s | %.0f | %.1f µs |\n", name, OPS / dt, 1e6 * dt / OPS);
}

int main(void)
{
	struct jws_keyset *ks = NULL;
	char why[160];
	printf("| check (%d operations) | ops/s | per op |\n|---|---|---|\n", OPS);
	proofs("DPoP proof, ES256 (at /token)", V_PROOF_ES, "https://consent.example.com/token", "POST", NULL);
	proofs("DPoP proof, PS256 (RSA 2048)", V_PROOF_PS, "https://consent.example.com/token", "POST", NULL);
	proofs("DPoP proof, EdDSA (Ed25519)", V_PROOF_ED, "https://consent.example.com/token", "POST", NULL);
	proofs("DPoP proof, ES256 with ath (at /proxy)", V_PROOF_ATH,
	    "https://consent.example.com/proxy/gh/repos", "GET", "the-access-token");
	if (jws_keyset_parse(V_JWKS, &ks, why, sizeof why) != CS_OK)
		return 1;
	static const char *const auds[] = { "https://consent.example.com" };
	struct client_assertion_expect e = { .keys = ks, .client_id = "agent-gateway",
		.audiences = auds, .naudiences = 1, .now = V_NOW, .clock_skew = 60 };
	double t0 = now_s();
	for (int i = 0; i < OPS; i++) {
		char *jti = NULL;
		int64_t exp;
		if (client_assertion_check(V_ASSERT_ES, &e, &jti, &exp, why, sizeof why) != CS_OK)
			return 1;
		free(jti);
	}
	double dt = now_s() - t0;
	printf("| client assertion, ES256 (3 keys in the set) | %.0f | %.1f µs |\n", OPS / dt, 1e6 * dt / OPS);
	jws_keyset_free(ks);
	return 0;
}
