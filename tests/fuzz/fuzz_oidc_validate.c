/* fuzz_oidc_validate.c -- libFuzzer driver for oidc_validate: hostile compact JWS
 * strings against a provider holding one fixed RSA and one fixed P-256 public key
 * (so seeds carrying their kids reach cjose).  It must never crash, leak or accept a forgery. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "oidc.h"

/* Throwaway public keys; their private halves signed the seed tokens and were discarded. */
static const char fuzz_jwks[] =
    "{\"keys\":["
    "{\"kty\":\"RSA\",\"kid\":\"fuzz-rsa\",\"use\":\"sig\",\"e\":\"AQAB\",\"n\":"
    "\"vhrgRndZ-jLp0fKSB5q4WO-Wvri2J8iswPQ-OLXRVplpTr3x0l7HFIJWZfkZ_IqvA59ioKF4"
    "FGLMnyFKUbfwi6pp6VG0zqTT4bhdj-mC-FYcZ9v6Gw7ADFPoMmT6bTWrrrnI9GltWWWyS-TH"
    "a-AER5gk1x2PM-Yj5FcAkqFs5c7Ze5TepieO2ItM-sh8I6UWgicneU1tJ7-BdJ9cbhEFKUTM"
    "PaWpQbjzT1jc6NBikx2yzPw9_s2h5KwMXF6F1NNbuqHvCSNc5Sa3b0wcBgL3H9Bv0C7GjGbn"
    "MvFzWU5btYJ5Nz9hFrtyHJKKg3vTNwuFVBQjWQkJf3RliOr4_cUIaQ\"},"
    "{\"kty\":\"EC\",\"kid\":\"fuzz-ec\",\"crv\":\"P-256\","
    "\"x\":\"TdApgr4qEIPFccesI2NieuWbfOAoDTBk6OlxgYHPSnw\","
    "\"y\":\"XAi4MN0tGcwV8EJGFCO5PaBLljjNZ7ojSGhL9BSMrfE\"}]}";

static struct oidc_provider *prov;

static void cleanup(void)
{
	oidc_provider_free(prov);
}

static void setup(void)
{
	if (oidc_provider_new("https://idp.test", 60, &prov) != CS_OK ||
	    oidc_set_jwks(prov, fuzz_jwks) != CS_OK)
		abort();
	atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const auds[] = { "consentd", "gateway-app" };
	struct oidc_expect ex;
	json_t *claims = NULL;
	char why[128];

	if (prov == NULL)
		setup();
	char *s = malloc(size + 1);
	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	/* An ID token: client id, nonce, auth_time required. */
	memset(&ex, 0, sizeof ex);
	ex.audiences = auds;
	ex.naudiences = 1;
	ex.client_id = "consentd";
	ex.nonce = "fuzz-nonce";
	ex.now = 1700000000;
	ex.max_age = 600;
	if (oidc_validate(prov, s, &ex, &claims, why, sizeof why) == CS_OK) {
		if (!json_is_object(claims))
			abort();
		json_decref(claims);
	} else if (claims != NULL) {
		abort();                          /* written only on success */
	}
	/* A subject token: several audiences, no client id, no nonce. */
	claims = NULL;
	ex.naudiences = 2;
	ex.client_id = NULL;
	ex.nonce = NULL;
	ex.max_age = -1;
	if (oidc_validate(prov, s, &ex, &claims, why, sizeof why) == CS_OK)
		json_decref(claims);
	free(s);
	return 0;
}
