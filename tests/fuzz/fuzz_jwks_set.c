/* fuzz_jwks_set.c -- libFuzzer target for the documents consentd fetches
 * around keys and security events: the IdP's JWKS (oidc_set_jwks, which
 * imports every key once), the gateway's JWKS (jws_keyset_parse) and an
 * enterprise IdP's (jws_keyset_parse_for, the ID-JAG list) on one
 * side, and on the other the SET receiver's answer to a pushed revocation
 * event (events_receiver_status, RFC 8935 §2.4's {"err":...}), which goes
 * into the outbox and in front of admins.  consentd emits SETs and never
 * validates one: the receiver's answer is the only outside input there.
 * Byte 0, bit 0 picks the parser: 0, the rest is a JWKS; 1, byte 0's other
 * bits are the output's size (0..127) and the rest is the answer's body.
 * Never crashes or leaks; a failed JWKS leaves the provider's keys in place;
 * the status text is one NUL-terminated line of printable ASCII within its
 * buffer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "jws.h"
#include "oidc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static const char fixed_jwks[] =
    "{\"keys\":[{\"kty\":\"EC\",\"kid\":\"fuzz-ec\",\"crv\":\"P-256\","
    "\"x\":\"TdApgr4qEIPFccesI2NieuWbfOAoDTBk6OlxgYHPSnw\","
    "\"y\":\"XAi4MN0tGcwV8EJGFCO5PaBLljjNZ7ojSGhL9BSMrfE\"}]}";

static struct oidc_provider *prov;

static void cleanup(void)
{
	oidc_provider_free(prov);
}

static void jwks(const char *s)
{
	char why[160];
	struct jws_keyset *ks = NULL;
	enum cs_err e = oidc_set_jwks(prov, s);
	CHECK(e == CS_OK || e == CS_EINVAL || e == CS_ENOMEM);
	if (e == CS_OK && oidc_set_jwks(prov, fixed_jwks) != CS_OK)   /* next input starts alike */
		__builtin_trap();
	if (jws_keyset_parse(s, &ks, why, sizeof why) == CS_OK)
		jws_keyset_free(ks);
	/* An enterprise IdP's (idjag_grant.c: jwks_file, or fetched from jwks_uri). */
	ks = NULL;
	if (jws_keyset_parse_for(s, JWS_ALGS_IDJAG, &ks, why, sizeof why) == CS_OK)
		jws_keyset_free(ks);
}

static void receiver(size_t cap, const uint8_t *body, size_t len)
{
	char *out = malloc(cap > 0 ? cap : 1);       /* exactly cap: ASan sees any overrun */
	if (out == NULL)
		return;
	out[0] = 'X';
	events_receiver_status(400 + (long)(len % 200), (const char *)body, len, out, cap);
	if (cap > 0) {
		size_t n = strnlen(out, cap);
		CHECK(n < cap);
		CHECK(n == 0 || strncmp(out, "HTTP ", 5) == 0);
		for (size_t i = 0; i < n; i++)
			CHECK(out[i] >= 0x20 && out[i] < 0x7f);
	} else {
		CHECK(out[0] == 'X');                    /* nothing written */
	}
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (prov == NULL) {
		if (oidc_provider_new("https://idp.test", 60, &prov) != CS_OK ||
		    oidc_set_jwks(prov, fixed_jwks) != CS_OK)
			abort();
		atexit(cleanup);
	}
	if (size < 1 || size > 65536)
		return 0;
	if (data[0] & 1) {
		receiver((size_t)(data[0] >> 1), data + 1, size - 1);
		return 0;
	}
	char *s = malloc(size);
	if (s == NULL)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	jwks(s);
	free(s);
	return 0;
}
