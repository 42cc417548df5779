/* fuzz_dpop.c -- libFuzzer driver for the parsers of what the gateway signs:
 * DPoP proofs (dpop_proof_check), client assertions (client_assertion_check)
 * and JWKs / JWKS documents (jws.c).  The first byte picks the parser; the
 * rest is the input.  It must never crash, leak, or accept a forgery: only
 * the seeds' jose-signed vectors may pass, and then with a thumbprint. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "client_auth.h"
#include "dpop.h"
#include "jws.h"
#include "../unit/jws_vectors.h"

static struct jws_keyset *keys;
static const unsigned char nonce_key[DPOP_NONCE_KEY_LEN] = { 1, 2, 3 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[160];
	if (keys == NULL && jws_keyset_parse(V_JWKS, &keys, why, sizeof why) != CS_OK)
		abort();
	if (size < 1 || size > JWS_MAX_COMPACT + 64)
		return 0;
	char *s = malloc(size);
	if (s == NULL)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	switch (data[0] % 4) {
	case 0:
	case 1: {
		struct dpop_expect e = { .htm = "POST", .htu = "https://consent.example.com/token",
			.access_token = data[0] % 4 == 1 ? "the-access-token" : NULL,
			.nonce_key = data[0] & 0x80 ? nonce_key : NULL, .now = V_NOW, .window = 60 };
		struct dpop_proof p;
		enum dpop_verdict v;
		memset(&p, 0, sizeof p);
		if (dpop_proof_check(s, &e, &p, &v, why, sizeof why) == CS_OK && v == DPOP_VALID) {
			if (strlen(p.jkt) != JWS_JKT_LEN || p.jti == NULL)
				abort();
			dpop_proof_clear(&p);
		}
		break;
	}
	case 2: {
		static const char *const auds[] = { "https://consent.example.com" };
		struct client_assertion_expect e = { .keys = keys, .client_id = "agent-gateway",
			.audiences = auds, .naudiences = 1, .now = V_NOW, .clock_skew = 60 };
		char *jti = NULL;
		int64_t exp = 0;
		if (client_assertion_check(s, &e, &jti, &exp, why, sizeof why) == CS_OK) {
			if (jti == NULL || exp < V_NOW - 60 || exp > V_NOW + CLIENT_ASSERTION_MAX_AHEAD)
				abort();
			free(jti);
		}
		break;
	}
	default: {
		struct jws_keyset *ks = NULL;
		struct jws_key *k = NULL;
		json_t *j = json_loads(s, 0, NULL);
		if (jws_key_from_jwk(j, &k, why, sizeof why) == CS_OK)
			jws_key_free(k);
		json_decref(j);
		if (jws_keyset_parse(s, &ks, why, sizeof why) == CS_OK)
			jws_keyset_free(ks);
		break;
	}
	}
	free(s);
	return 0;
}
