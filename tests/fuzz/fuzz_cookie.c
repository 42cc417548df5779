/* fuzz_cookie.c -- libFuzzer target for the Cookie header parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *h = malloc(size + 1);
	char *v = NULL;
	if (h == NULL)
		return 0;
	memcpy(h, data, size);
	h[size] = '\0';
	if (cookie_get(h, "consentd_session", &v) == CS_OK) {
		if (strlen(v) > size)
			abort();
		free(v);
	}
	if (cookie_get(h, "__Host-consentd", &v) == CS_OK)
		free(v);
	free(h);
	return 0;
}
