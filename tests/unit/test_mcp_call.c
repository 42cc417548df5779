/* test_mcp_call.c -- the gateway's decisions that need no store (mcp_call.c):
 * which tool-call arguments log_arguments must never record. */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include "mcp_call.h"
#include "testutil.h"

static bool secret(const char *json)
{
	json_error_t err;
	json_t *v = json_loads(json, JSON_DECODE_ANY, &err);
	ck_assert_msg(v != NULL, "%s: %s", json, err.text);
	bool s = mcp_call_secret_like(v);
	json_decref(v);
	return s;
}

START_TEST(test_mcp_call_secret_like)
{
	/* Ordinary arguments are recorded. */
	ck_assert(!secret("{}"));
	ck_assert(!secret("{\"title\":\"Fix the login page\",\"labels\":[\"bug\",\"ui\"],\"id\":42}"));
	ck_assert(!secret("{\"body\":\"A sentence with words, numbers like 2026 and a URL "
	    "https://example.com/a/b\"}"));
	ck_assert(!secret("{\"repo\":\"octo-org/some-rather-long-repository-name\"}"));   /* no digits */
	ck_assert(!secret("{\"n\":1234567890123, \"f\":3.5e30, \"t\":true, \"z\":null}"));
	ck_assert(!secret("[\"sk\", \"ghp\", \"bearer\"]"));
	/* Credentials are not, wherever they are. */
	ck_assert(secret("{\"token\":\"ghp_0123456789abcdefABCDEF0123456789abcd\"}"));
	ck_assert(secret("{\"a\":{\"b\":[1,{\"c\":\"glpat-xxxxyyyyzzzz\"}]}}"));
	ck_assert(secret("{\"h\":\"Bearer abc\"}"));
	ck_assert(secret("{\"k\":\"xoxb-1-2-3\"}"));
	ck_assert(secret("{\"k\":\"sk-live\"}"));
	ck_assert(secret("{\"aws\":\"AKIAIOSFODNN7EXAMPLE\"}"));
	ck_assert(secret("{\"j\":\"eyJhbGciOiJFUzI1NiJ9.e30.sig\"}"));
	ck_assert(secret("{\"s\":\"session 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822c\"}"));
	ck_assert(secret("{\"ghp_0123456789abcdefABCDEF0123456789abcd\":1}"));      /* a member name */
	/* The run rule's edges: 31 characters are not a secret, 32 are. */
	ck_assert(!secret("\"a123456789012345678901234567890\""));
	ck_assert(secret("\"a1234567890123456789012345678901\""));
	ck_assert(secret("\"x a1234567890123456789012345678901 y\""));
}
END_TEST

static Suite *mcp_call_suite(void)
{
	Suite *s = suite_create("mcp_call");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_mcp_call_secret_like);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(mcp_call_suite());
}
