/* fuzz_grant_presented.c -- libFuzzer target for where the gateway put the
 * grant at /proxy (proxy_api_grant_via): the Authorization header and
 * Consentd-Grant, as two NUL-separated fields (a missing second field: no
 * Consentd-Grant header).  Never crashes or reads past either value; a
 * refusal says why and hands out no grant; a grant from Authorization is one
 * token68 inside it, with no CR or LF, and only when Consentd-Grant is absent. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "proxy_api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	const char *grant = NULL, *why = NULL;
	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	const char *authz = s;
	size_t al = strlen(s);
	const char *cg = al < size ? s + al + 1 : NULL;
	enum proxy_grant_via via = proxy_api_grant_via(authz, cg, &grant, &why);
	CHECK(via >= PROXY_GRANT_ABSENT && via < PROXY_GRANT_VIA__MAX);
	CHECK((via == PROXY_GRANT_MALFORMED) == (why != NULL));
	switch (via) {
	case PROXY_GRANT_MALFORMED:
	case PROXY_GRANT_ABSENT:
		CHECK(grant == NULL);
		break;
	case PROXY_GRANT_HEADER:
		CHECK(grant == cg && cg[0] != '\0' && strpbrk(grant, "\r\n") == NULL);
		break;
	case PROXY_GRANT_DPOP:
	case PROXY_GRANT_BEARER:
		CHECK(grant > authz && grant < authz + al && valid_token68(grant));
		CHECK(cg == NULL || cg[0] == '\0');
		break;
	case PROXY_GRANT_VIA__MAX:
		CHECK(0);
	}
	free(s);
	return 0;
}
