/* test_mcp_call.c -- the gateway's decisions that need no store (mcp_call.c):
 * which tool-call arguments log_arguments must never record; the entry of a
 * call's answer (its outcome by status, its detail joined by call=). */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
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

/* The entry of the answer of a released call, its detail completed. */
static void answer(long status, const char *failure, const char *end, const char *outcome,
    const char *detail)
{
	struct config_mcp_endpoint ep = { .id = (char *)"tracker", .resource = (char *)"gh" };
	struct consent k = { .id = (char *)"k1", .subject = (char *)"alice", .agent = (char *)"cl" };
	struct mcp_call_req rq = { .ep = &ep, .token_consent = &k, .tool = "list_issues",
		.method = "tools/call", .actor = "client:cl", .now = 1000 };
	struct mcp_call_plan p;
	struct audit_queue_entry *qe = NULL;
	memset(&p, 0, sizeof p);
	p.outcome = MCP_CALL_RELEASED;
	p.scope = "issues:read";
	ck_assert_int_eq(str_fmt(p.call_id, sizeof p.call_id, "0123456789abcdef"), CS_OK);
	ck_assert_int_eq(str_fmt(p.digest, sizeof p.digest, "DIGEST"), CS_OK);
	ck_assert_int_eq(mcp_call_answer_new(&rq, &p, status, failure, 12, &qe), CS_OK);
	if (end != NULL) {
		char more[64];
		ck_assert_int_eq(str_fmt(more, sizeof more, "; bytes=5; end=%s", end), CS_OK);
		ck_assert_int_eq(audit_queue_entry_detail(qe, more), CS_OK);
	}
	const struct audit_entry *e = audit_queue_entry_view(qe);
	ck_assert_str_eq(e->action, "mcp.call");
	ck_assert_str_eq(e->outcome, outcome);
	ck_assert_str_eq(e->detail, detail);
	ck_assert_str_eq(e->subject, "alice");
	ck_assert_str_eq(e->agent, "cl");
	ck_assert_str_eq(e->consent_id, "k1");
	ck_assert_str_eq(e->resource, "gh");
	ck_assert_str_eq(e->scopes, "issues:read");
	audit_queue_entry_free(qe);
	/* Only a released call has an answer. */
	p.outcome = MCP_CALL_ASK;
	ck_assert_int_eq(mcp_call_answer_new(&rq, &p, status, failure, 12, &qe), CS_EINVAL);
}

START_TEST(test_mcp_call_answer_entry)
{
	answer(200, NULL, "complete", "answered", "call=0123456789abcdef; endpoint=tracker; "
	    "tool=list_issues; digest=DIGEST; upstream=200; ms=12; bytes=5; end=complete");
	/* A protocol client error goes back as it is: answered. */
	answer(404, NULL, "client_gone", "answered", "call=0123456789abcdef; endpoint=tracker; "
	    "tool=list_issues; digest=DIGEST; upstream=404; ms=12; bytes=5; end=client_gone");
	answer(502, NULL, NULL, "upstream_failed", "call=0123456789abcdef; endpoint=tracker; "
	    "tool=list_issues; digest=DIGEST; upstream=502; ms=12");
	answer(401, NULL, NULL, "upstream_failed", "call=0123456789abcdef; endpoint=tracker; "
	    "tool=list_issues; digest=DIGEST; upstream=401; ms=12");
	answer(0, "timeout", NULL, "upstream_failed", "call=0123456789abcdef; endpoint=tracker; "
	    "tool=list_issues; digest=DIGEST; upstream=0; ms=12; failure=timeout");
}
END_TEST

static Suite *mcp_call_suite(void)
{
	Suite *s = suite_create("mcp_call");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_mcp_call_secret_like);
	tcase_add_test(tc, test_mcp_call_answer_entry);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(mcp_call_suite());
}
