/* fuzz_authzen.c -- libFuzzer target for the decision point's answer
 * (authzen.c authzen_parse_answer), which arrives from the network: any bytes.
 * Never crashes or leaks; an accepted answer has a verdict and a reason the
 * audit entry can hold (printable ASCII, no ';', no JWT look-alike, bounded);
 * a refused one says why and leaves the answer untouched. */
#include <stdint.h>
#include <string.h>

#include "authzen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct authzen_answer a = { .verdict = AUTHZEN_VERDICT__MAX, .reason = "untouched" };
	char why[96] = "";
	enum cs_err e = authzen_parse_answer((const char *)data, size, &a, why, sizeof why);
	if (e != CS_OK) {
		CHECK(e == CS_EINVAL);
		CHECK(why[0] != '\0');
		CHECK(a.verdict == AUTHZEN_VERDICT__MAX && strcmp(a.reason, "untouched") == 0);
		return 0;
	}
	CHECK(size <= AUTHZEN_MAX_ANSWER);
	CHECK(a.verdict == AUTHZEN_PERMIT || a.verdict == AUTHZEN_DENY || a.verdict == AUTHZEN_ASK);
	size_t n = strlen(a.reason);
	CHECK(n <= AUTHZEN_REASON_MAX);
	for (size_t i = 0; i < n; i++)
		CHECK(a.reason[i] >= ' ' && a.reason[i] <= '~' && a.reason[i] != ';');
	CHECK(strstr(a.reason, "eyJ") == NULL);
	/* The verdict agrees with the bytes: a permit needs "true" somewhere. */
	if (a.verdict == AUTHZEN_PERMIT)
		CHECK(memmem(data, size, "true", 4) != NULL);
	return 0;
}
