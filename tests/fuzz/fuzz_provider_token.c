/* fuzz_provider_token.c -- libFuzzer target for the provider's token endpoint
 * answers (provider_token_answer): the JSON a resource's OAuth provider sends
 * back to an authorization-code exchange or a refresh.  The first byte picks
 * the call (bit 0: code or refresh), the status (bits 1-2: 200, 400, 401,
 * 500) and the preset reading it (bits 3-7, modulo PRESET__MAX: Slack's
 * authed_user, the scopes a preset drops, its lifetime); the rest is the body.  Never crashes or leaks; only a 200 gives
 * tokens, and then with a non-empty access token and token type, expires_in
 * in [0, ten years], and a scope without commas unless it has spaces (a
 * preset that drops scopes: single-spaced words, offline_access gone). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "provider.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const long statuses[] = { 200, 400, 401, 500 };
	struct provider_tokens t;
	char *body;

	if (size < 1 || size > 65536 || (body = malloc(size)) == NULL)
		return 0;
	memcpy(body, data + 1, size - 1);
	body[size - 1] = '\0';
	enum provider_token_kind kind = (data[0] & 1) ? PROVIDER_TOKEN_REFRESH : PROVIDER_TOKEN_CODE;
	long status = statuses[(data[0] >> 1) & 3];
	enum config_preset preset = (enum config_preset)((data[0] >> 3) % PRESET__MAX);
	memset(&t, 0, sizeof t);
	enum cs_err e = preset == PRESET_NONE ? provider_token_answer(kind, status, body, &t) :
	    provider_token_answer_preset(preset, kind, status, body, &t);
	CHECK(e == CS_OK || e == CS_EINVAL || e == CS_EPERM || e == CS_EIO || e == CS_ENOMEM);
	if (e == CS_OK) {
		CHECK(status == 200);
		CHECK(t.access_token != NULL && t.access_token[0] != '\0');
		CHECK(t.token_type != NULL && t.token_type[0] != '\0');
		CHECK(t.refresh_token == NULL || t.refresh_token[0] != '\0');
		CHECK(t.expires_in >= 0 && t.expires_in <= INT64_C(315360000));
		if (preset == PRESET_NONE) {
			CHECK(t.scope == NULL || strchr(t.scope, ',') == NULL || strchr(t.scope, ' ') != NULL);
		} else if (t.scope != NULL && (preset == PRESET_MICROSOFT || preset == PRESET_ATLASSIAN)) {
			/* Scopes these presets drop are rewritten out: single spaces
			 * between words, and never offline_access. */
			size_t n = strlen(t.scope);
			CHECK(strstr(t.scope, "  ") == NULL && (n == 0 || (t.scope[0] != ' ' &&
			    t.scope[n - 1] != ' ')));
			for (const char *w = t.scope; *w; w += strcspn(w, " ") + (w[strcspn(w, " ")] == ' '))
				CHECK(strcspn(w, " ") != 14 || memcmp(w, "offline_access", 14) != 0);
		}
		provider_tokens_clear(&t);
	} else {
		CHECK(t.access_token == NULL && t.refresh_token == NULL && t.scope == NULL);
		CHECK(e != CS_EPERM || status != 500);
	}
	/* A 200 is never CS_EPERM/CS_EIO unless it carried an error. */
	free(body);
	return 0;
}
