/* fuzz_login_cookie.c -- libFuzzer target for the sealed login cookie (issue
 * #28): a browser's Cookie header through login_cookie_stale (cookie_each,
 * then every login cookie opened), a value through login_cookie_open, and a
 * plaintext through login_cookie_parse, which only a verified seal reaches. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "login_cookie.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct master_key mk;
	struct config cfg;
	struct login_cookie lc;
	char drop[LOGIN_COOKIES_SEEN][LOGIN_COOKIE_NAME_MAX];
	size_t nd = 0;
	char *h = malloc(size + 1);
	if (h == NULL)
		return 0;
	memset(&mk, 0x5a, sizeof mk);
	memset(&cfg, 0, sizeof cfg);
	memcpy(h, data, size);
	h[size] = '\0';
	login_cookie_stale(&mk, &cfg, h, 1800000000, drop, &nd);
	if (nd > LOGIN_COOKIES_SEEN)
		abort();
	for (size_t i = 0; i < nd; i++)
		if (strnlen(drop[i], LOGIN_COOKIE_NAME_MAX) >= LOGIN_COOKIE_NAME_MAX)
			abort();
	if (login_cookie_open(&mk, "consentd_login_000000000000", (const char *)data, size,
	    1800000000, &lc) == CS_OK)
		abort();                     /* nothing unsealed opens under this key */
	if (login_cookie_parse(data, size, &lc) == CS_OK) {
		if (strlen(lc.return_to) > LOGIN_RETURN_TO_MAX || lc.return_to[0] != '/' ||
		    strlen(lc.nonce) != SESSION_TOKEN_LEN || lc.max_age < -1)
			abort();
	}
	login_cookie_clear(&lc);
	free(h);
	return 0;
}
