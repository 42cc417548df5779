/* fuzz_basic_auth.c -- libFuzzer target for the client_secret_basic parser
 * and the visible-text filter applied to agent-supplied strings. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "form.h"
#include "pages.h"
#include "client_auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	struct basic_credentials bc;
	char *v;
	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (basic_credentials(s, &bc)) {
		/* Both inside the stack buffer, terminated within it. */
		if (bc.id != bc.buf || bc.secret <= bc.id ||
		    bc.secret + strlen(bc.secret) >= bc.buf + sizeof bc.buf)
			abort();
		basic_credentials_clear(&bc);
	}
	if (utf8_valid(s, strlen(s)) && (v = visible_text(s)) != NULL)
		free(v);
	free(s);
	return 0;
}
