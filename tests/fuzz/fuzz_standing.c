/* fuzz_standing.c -- libFuzzer target for what judges a stored standing rule
 * (standing.c, issue #32): the input is "details NUL params NUL keyset"; the
 * rule's RFC 9396 details, however hostile, must never crash the judge, and
 * a rule that covers a call must name exactly that call's action. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "standing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 3), *details, *params_text, *keyset, digest[STANDING_DIGEST_LEN + 1];
	json_t *params;
	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = text[size + 1] = text[size + 2] = '\0';
	details = text;
	params_text = details + strlen(details) + 1;
	keyset = params_text + strlen(params_text) + 1;
	params = json_loads(params_text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
	if (standing_lookup_of(params, keyset, digest) == CS_OK && strlen(digest) != STANDING_DIGEST_LEN)
		abort();
	for (int kind = 0; kind < 2; kind++) {
		if (!standing_covers(kind ? "match" : "exact", details, "create_issue", params, digest))
			continue;
		/* Covered: the details name exactly this action, and a match rule fixes something. */
		json_t *d = json_loads(details, JSON_REJECT_DUPLICATES, NULL);
		json_t *a = json_object_get(d, "actions");
		if (json_array_size(a) != 1 || !json_is_string(json_array_get(a, 0)) ||
		    strcmp(json_string_value(json_array_get(a, 0)), "create_issue") != 0 ||
		    (kind && json_object_size(json_object_get(d, "match")) == 0))
			abort();
		json_decref(d);
	}
	json_decref(params);
	free(text);
	return 0;
}
