/* fuzz_scope.c -- libFuzzer target for scope strings (scope.c), which arrive
 * from the gateway at /token and /consent-requests, and from providers' token
 * answers: the input is two lists separated by the first LF, each parsed by
 * scope_set_parse, then joined and combined.  Never crashes or leaks; an
 * accepted set is sorted, unique, within its caps and of RFC 6749 §3.3
 * characters; joining and parsing again gives the same set; union,
 * intersection and difference keep their laws. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static void check_set(const struct scope_set *s)
{
	CHECK(s->n <= SCOPE_SET_MAX);
	for (size_t i = 0; i < s->n; i++) {
		size_t l = strlen(s->v[i]);
		CHECK(l > 0 && l <= SCOPE_TOKEN_MAX);
		for (size_t k = 0; k < l; k++) {
			unsigned char c = (unsigned char)s->v[i][k];
			CHECK(c == 0x21 || (c >= 0x23 && c <= 0x5B) || (c >= 0x5D && c <= 0x7E));
		}
		CHECK(i == 0 || strcmp(s->v[i - 1], s->v[i]) < 0);
	}
}

static int same(const struct scope_set *a, const struct scope_set *b)
{
	return scope_set_subset(a, b) && scope_set_subset(b, a) && a->n == b->n;
}

static void laws(const struct scope_set *a, const struct scope_set *b)
{
	struct scope_set u, i, m, again;
	char *j;

	memset(&u, 0, sizeof u);
	memset(&i, 0, sizeof i);
	memset(&m, 0, sizeof m);
	if ((j = scope_set_join(a)) != NULL) {
		CHECK(scope_set_parse(j, &again) == CS_OK);
		CHECK(same(a, &again));
		scope_set_clear(&again);
		free(j);
	}
	CHECK(scope_set_intersect(&i, a, b) == CS_OK);     /* never larger than a */
	CHECK(scope_set_minus(&m, a, b) == CS_OK);
	check_set(&i);
	check_set(&m);
	CHECK(scope_set_subset(&i, a) && scope_set_subset(&i, b));
	CHECK(scope_set_subset(&m, a) && i.n + m.n == a->n);
	for (size_t k = 0; k < m.n; k++)
		CHECK(!scope_set_has(b, m.v[k]) && scope_set_has(a, m.v[k]));
	if (scope_set_union(&u, a) == CS_OK) {
		enum cs_err e = scope_set_union(&u, b);
		check_set(&u);
		CHECK(scope_set_subset(a, &u));
		if (e == CS_OK)
			CHECK(scope_set_subset(b, &u) && u.n == a->n + b->n - i.n);
		else
			CHECK(e == CS_ETOOBIG && a->n + b->n - i.n > SCOPE_SET_MAX);
	}
	scope_set_clear(&u);
	scope_set_clear(&i);
	scope_set_clear(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct scope_set a, b;
	char *s;

	if (size > 8192 || (s = malloc(size + 1)) == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	char *nl = memchr(s, '\n', size);
	const char *second = "read write";
	if (nl != NULL) {
		*nl = '\0';
		second = nl + 1;
	}
	memset(&a, 0x5a, sizeof a);
	enum cs_err ea = scope_set_parse(s, &a);
	CHECK(ea == CS_OK || ea == CS_EINVAL || ea == CS_ETOOBIG || ea == CS_ENOMEM);
	if (ea == CS_OK) {
		check_set(&a);
		if (scope_set_parse(second, &b) == CS_OK) {
			check_set(&b);
			laws(&a, &b);
			laws(&b, &a);
			scope_set_clear(&b);
		}
		scope_set_clear(&a);
	} else {
		CHECK(a.n == (size_t)0x5a5a5a5a5a5a5a5aULL);     /* *out untouched */
	}
	free(s);
	return 0;
}
