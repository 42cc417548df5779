/* fuzz_idjag.c -- libFuzzer target for an ID-JAG's claims (idjag.c), which
 * arrive from a client at /token: the input is the header JSON, a LF, and
 * the payload JSON.  Never crashes or leaks; an accepted grant carries every
 * required claim, the configured issuer and the authenticated client, a
 * lifetime of at most IDJAG_MAX_LIFETIME, and a resource of the list or none. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "idjag.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const resources[] = { "https://consentd.example/mcp/x", NULL };
	const struct idjag_expect x = { "https://idp.example", "https://consentd.example",
		"client", resources, 1800000000 };
	const char *s = (const char *)data;
	const char *nl = memchr(s, '\n', size);
	size_t hlen = nl != NULL ? (size_t)(nl - s) : size;
	const char *p = nl != NULL ? nl + 1 : "";
	size_t plen = nl != NULL ? size - hlen - 1 : 0;
	struct idjag g;
	char why[IDJAG_WHY_MAX];
	memset(&g, 0, sizeof g);
	enum cs_err e = idjag_check(s, hlen, p, plen, &x, &g, why, sizeof why);
	CHECK(e == CS_OK || e == CS_EINVAL || e == CS_ENOMEM);
	if (e == CS_OK) {
		CHECK(g.iss != NULL && strcmp(g.iss, x.issuer) == 0);
		CHECK(g.client_id != NULL && strcmp(g.client_id, "client") == 0);
		CHECK(g.sub != NULL && g.jti != NULL);
		CHECK(g.exp > g.iat && g.exp - g.iat <= IDJAG_MAX_LIFETIME);
		CHECK(g.resource == NULL || strcmp(g.resource, resources[0]) == 0);
	} else {
		CHECK(g.iss == NULL && g.sub == NULL);
		CHECK(e != CS_EINVAL || why[0] != '\0');
	}
	idjag_clear(&g);
	return 0;
}
