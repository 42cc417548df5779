/* fuzz_provider_sites.c -- libFuzzer target for Atlassian's accessible-resources
 * answer (provider_sites_parse): the sites a token reaches, whose cloud ids go
 * into API paths.  Never crashes or leaks; on CS_OK the ids are non-empty
 * runs of [A-Za-z0-9-] joined by single commas, at most 64 of them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "provider.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *body, *ids = NULL;
	if (size > 65536 || (body = malloc(size + 1)) == NULL)
		return 0;
	memcpy(body, data, size);
	body[size] = '\0';
	enum cs_err e = provider_sites_parse(body, &ids);
	CHECK(e == CS_OK || e == CS_EINVAL || e == CS_ENOENT || e == CS_ENOMEM);
	if (e == CS_OK) {
		size_t n = 1, run = 0;
		CHECK(ids != NULL && ids[0] != '\0');
		for (const char *c = ids; *c; c++) {
			if (*c == ',') {
				CHECK(run > 0);
				run = 0;
				n++;
				continue;
			}
			CHECK((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
			    (*c >= '0' && *c <= '9') || *c == '-');
			run++;
		}
		CHECK(run > 0 && n <= 64);
		free(ids);
	} else {
		CHECK(ids == NULL);
	}
	free(body);
	return 0;
}
