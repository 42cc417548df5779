/* test_authzen.c -- the decision point's answer parser (outside input: every
 * kind of bad answer refused with a reason, nothing half-written), the request
 * body's shape, which actions are asked, and [authzen]'s configuration checks
 * with the exact messages operators see. */
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "authzen.h"
#include "buf.h"
#include "config.h"
#include "testutil.h"
#include "tu_config.h"

/* --- the answer ------------------------------------------------------------ */

static enum cs_err parse(const char *s, struct authzen_answer *a, char *why, size_t n)
{
	return authzen_parse_answer(s, strlen(s), a, why, n);
}

START_TEST(test_authzen_answer_verdicts)
{
	struct authzen_answer a;
	char why[96];
	ck_assert_int_eq(parse("{\"decision\": true}", &a, why, sizeof why), CS_OK);
	ck_assert_int_eq(a.verdict, AUTHZEN_PERMIT);
	ck_assert_str_eq(a.reason, "");
	ck_assert_int_eq(parse("{\"decision\": false, \"context\": {}}", &a, why, sizeof why), CS_OK);
	ck_assert_int_eq(a.verdict, AUTHZEN_DENY);
	/* No decision: context.consentd = "ask", whatever the boolean says. */
	ck_assert_int_eq(parse("{\"decision\": false, \"context\": {\"consentd\": \"ask\"}}", &a,
	    why, sizeof why), CS_OK);
	ck_assert_int_eq(a.verdict, AUTHZEN_ASK);
	ck_assert_int_eq(parse("{\"decision\": true, \"context\": {\"consentd\": \"ask\"}}", &a,
	    why, sizeof why), CS_OK);
	ck_assert_int_eq(a.verdict, AUTHZEN_ASK);
	/* Members the spec lets a PDP add are ignored. */
	ck_assert_int_eq(parse("{\"decision\": true, \"extra\": [1], \"context\": {\"id\": \"0\"}}",
	    &a, why, sizeof why), CS_OK);
	ck_assert_int_eq(a.verdict, AUTHZEN_PERMIT);
}
END_TEST

START_TEST(test_authzen_answer_reasons)
{
	struct authzen_answer a;
	char why[96];
	ck_assert_int_eq(parse("{\"decision\": false, \"context\": {\"reason_admin\": "
	    "{\"en\": \"policy C076E82F\"}}}", &a, why, sizeof why), CS_OK);
	ck_assert_str_eq(a.reason, "policy C076E82F");
	ck_assert_int_eq(parse("{\"decision\": false, \"context\": {\"reason_admin\": \"r1\", "
	    "\"reason\": \"r2\"}}", &a, why, sizeof why), CS_OK);
	ck_assert_str_eq(a.reason, "r1");
	ck_assert_int_eq(parse("{\"decision\": false, \"context\": {\"reason\": \"policy_denied\"}}",
	    &a, why, sizeof why), CS_OK);
	ck_assert_str_eq(a.reason, "policy_denied");
	/* Control characters, non-ASCII and the detail's ';' become '?'; a JWT
	 * look-alike is broken (the audit would refuse it); long reasons are cut. */
	ck_assert_int_eq(parse("{\"decision\": false, \"context\": {\"reason\": "
	    "\"a\\nb;c\\u00e9 eyJhbGci.x\"}}", &a, why, sizeof why), CS_OK);
	ck_assert_str_eq(a.reason, "a?b?c?? ?yJhbGci.x");
	char big[400];
	ck_assert_int_eq(str_fmt(big, sizeof big, "{\"decision\": true, \"context\": {\"reason\": "
	    "\"%0200d\"}}", 7), CS_OK);
	ck_assert_int_eq(parse(big, &a, why, sizeof why), CS_OK);
	ck_assert_uint_eq(strlen(a.reason), AUTHZEN_REASON_MAX);
	/* A reason of another type is no reason. */
	ck_assert_int_eq(parse("{\"decision\": false, \"context\": {\"reason\": 7}}", &a, why,
	    sizeof why), CS_OK);
	ck_assert_str_eq(a.reason, "");
}
END_TEST

/* Each bad answer is refused (CS_EINVAL), says why, and leaves *out alone. */
START_TEST(test_authzen_answer_bad)
{
	static const struct { const char *in, *why; } bad[] = {
		{ "", "not JSON" },
		{ "decision=true", "not JSON" },
		{ "{\"decision\": true", "not JSON" },
		{ "{\"decision\": true}{}", "not JSON" },
		{ "[true]", "not a JSON object" },
		{ "true", "not a JSON object" },
		{ "\"permit\"", "not a JSON object" },
		{ "{}", "decision is missing" },
		{ "{\"Decision\": true}", "decision is missing" },
		{ "{\"decision\": \"true\"}", "not a boolean" },
		{ "{\"decision\": 1}", "not a boolean" },
		{ "{\"decision\": null}", "not a boolean" },
		{ "{\"decision\": {\"permit\": true}}", "not a boolean" },
		/* SECURITY: one parser's permit is another's deny. */
		{ "{\"decision\": false, \"decision\": true}", "duplicate" },
		{ "{\"decision\": true, \"context\": []}", "context is not an object" },
		{ "{\"decision\": true, \"context\": \"ask\"}", "context is not an object" },
		{ "{\"decision\": true, \"context\": {\"consentd\": \"permit\"}}", "consentd" },
		{ "{\"decision\": true, \"context\": {\"consentd\": true}}", "consentd" },
		{ "{\"decision\": true, \"context\": {\"consentd\": \"ask\\u0000\"}}", "not JSON" },
		{ "{\"decision\": true, \"context\": {\"consentd\": \"ASK\"}}", "consentd" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct authzen_answer a = { .verdict = AUTHZEN_VERDICT__MAX, .reason = "untouched" };
		char why[96] = "";
		ck_assert_msg(parse(bad[i].in, &a, why, sizeof why) == CS_EINVAL, "accepted %s",
		    bad[i].in);
		ck_assert_msg(strstr(why, bad[i].why) != NULL, "%s: why '%s'", bad[i].in, why);
		ck_assert_int_eq(a.verdict, AUTHZEN_VERDICT__MAX);
		ck_assert_str_eq(a.reason, "untouched");
	}
	/* NULL, an embedded NUL, and past the cap (a valid answer padded). */
	struct authzen_answer a;
	char why[96];
	ck_assert_int_eq(authzen_parse_answer(NULL, 0, &a, why, sizeof why), CS_EINVAL);
	ck_assert_int_eq(authzen_parse_answer("{\"decision\": true}\0x", 20, &a, why, sizeof why),
	    CS_EINVAL);
	char *big = malloc(AUTHZEN_MAX_ANSWER + 2);
	ck_assert_ptr_nonnull(big);
	memset(big, ' ', AUTHZEN_MAX_ANSWER + 1);
	memcpy(big, "{\"decision\": true}", 18);
	ck_assert_int_eq(authzen_parse_answer(big, AUTHZEN_MAX_ANSWER, &a, why, sizeof why), CS_OK);
	ck_assert_int_eq(authzen_parse_answer(big, AUTHZEN_MAX_ANSWER + 1, &a, why, sizeof why),
	    CS_EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "larger than"));
	free(big);
	/* Deep nesting is refused by the parser, not the stack. */
	char deep[4100] = "{\"decision\": true, \"x\": ";
	size_t n = strlen(deep);
	for (int i = 0; i < 2000; i++)
		deep[n++] = '[';
	deep[n] = '\0';
	ck_assert_int_eq(parse(deep, &a, why, sizeof why), CS_EINVAL);
}
END_TEST

/* --- the question ------------------------------------------------------------ */

static const struct consent person = { .id = "k1", .subject = "alice", .agent = "coder",
	.resource = "github" };

START_TEST(test_authzen_request_body_shape)
{
	struct config cfg = { .oidc_issuer = "https://idp.example" };
	json_t *params = json_pack("{s:s, s:i}", "repo", "acme/web", "n", 3);
	struct buf b;
	buf_init(&b, 1 << 16);
	ck_assert_int_eq(authzen_request_body(&cfg, &(struct authzen_call){ .k = &person,
	    .action = "create_issue", .params = params, .digest = "DIGEST", .actor = "gateway:gw",
	    .now = 0 }, &b), CS_OK);
	json_error_t err;
	json_t *v = json_loads(b.data, JSON_REJECT_DUPLICATES, &err);
	ck_assert_ptr_nonnull(v);
	json_t *want = json_pack("{s:{s:s, s:s, s:{s:s}}, s:{s:s, s:{s:O}}, s:{s:s, s:s}, "
	    "s:{s:s, s:s, s:s, s:s, s:s}}",
	    "subject", "type", "user", "id", "alice", "properties", "issuer", "https://idp.example",
	    "action", "name", "create_issue", "properties", "parameters", params,
	    "resource", "type", "consentd_resource", "id", "github",
	    "context", "agent", "coder", "client", "gateway:gw", "consent_id", "k1",
	    "params_digest", "DIGEST", "time", "1970-01-01T00:00:00Z");
	ck_assert_msg(json_equal(v, want), "got %s", b.data);
	json_decref(want);
	json_decref(v);
	json_decref(params);
	/* No parameters: null. */
	buf_reset(&b);
	ck_assert_int_eq(authzen_request_body(&cfg, &(struct authzen_call){ .k = &person,
	    .action = "a", .now = 0 }, &b), CS_OK);
	ck_assert_ptr_nonnull(strstr(b.data, "\"parameters\":null"));
	buf_clear(&b);
}
END_TEST

START_TEST(test_authzen_applies_which)
{
	struct config_action req = { .resource = "github", .name = "merge", .approval = APPROVAL_REQUIRED };
	struct config_action none = { .resource = "github", .name = "list", .approval = APPROVAL_NONE };
	struct config_action other = { .resource = "githubx", .name = "merge",
		.approval = APPROVAL_REQUIRED };
	struct config cfg = { 0 };
	ck_assert(!authzen_applies(&cfg, &req));              /* no endpoint */
	cfg.authzen_endpoint = "https://pdp.example/access/v1/evaluation";
	ck_assert(authzen_applies(&cfg, &req));
	ck_assert(!authzen_applies(&cfg, &none));             /* no person would be asked */
	ck_assert(!authzen_applies(&cfg, NULL));
	char *list[] = { "github.merge", NULL };
	cfg.authzen_actions = list;
	cfg.nauthzen_actions = 1;
	ck_assert(authzen_applies(&cfg, &req));
	ck_assert(!authzen_applies(&cfg, &other));            /* a prefix is not the name */
	struct config_action merge2 = { .resource = "github", .name = "merge2",
		.approval = APPROVAL_REQUIRED };
	ck_assert(!authzen_applies(&cfg, &merge2));
	/* Who denied, as callers word it. */
	struct approval_answer a = { .outcome = APPROVAL_DENIED, .decided_by = AUTHZEN_DECIDED_BY };
	ck_assert(authzen_denied(&a));
	a.decided_by = "policy x#1";
	ck_assert(!authzen_denied(&a));
	a.decided_by = NULL;
	ck_assert(!authzen_denied(&a));
	a.decided_by = AUTHZEN_DECIDED_BY;
	a.outcome = APPROVAL_RELEASE;
	ck_assert(!authzen_denied(&a));
}
END_TEST

/* --- [authzen] ------------------------------------------------------------- */

#define BASE "[server]\npublic_url = https://consent.example.com\n" \
	"[oidc]\nissuer = https://idp.example.com\nclient_id = consentd\nclient_secret = s3\n" \
	"[gateway]\nclient_secret = gateway-secret-0123456789\n" \
	"[resource.github]\n[scope.github.repo]\n" \
	"[action.github.merge]\nscope = repo\napproval = required\n" \
	"[action.github.list]\nscope = repo\n"

START_TEST(test_authzen_config_defaults_and_keys)
{
	static char *const none[] = { NULL };
	struct config *c = tu_config_expect_ok(BASE, none, NULL);
	ck_assert_ptr_null(c->authzen_endpoint);
	ck_assert_int_eq(c->authzen_timeout_ms, 2000);
	ck_assert_int_eq(c->authzen_on_error, AUTHZEN_ON_ERROR_DENY);
	config_free(c);
	c = tu_config_expect_ok(BASE "[authzen]\nendpoint = https://pdp.example/access/v1/evaluation\n"
	    "timeout_ms = 500\non_error = ask\nactions = github.merge\n", none, NULL);
	ck_assert_str_eq(c->authzen_endpoint, "https://pdp.example/access/v1/evaluation");
	ck_assert_int_eq(c->authzen_timeout_ms, 500);
	ck_assert_int_eq(c->authzen_on_error, AUTHZEN_ON_ERROR_ASK);
	ck_assert_uint_eq(c->nauthzen_actions, 1);
	ck_assert_ptr_null(c->authzen_token);
	config_free(c);
	/* The token from the environment, as every secret may be. */
	static char *const env[] = { "CONSENTD_AUTHZEN_TOKEN=pdp-token-0123456789abcdef", NULL };
	c = tu_config_expect_ok(BASE "[authzen]\nendpoint = http://127.0.0.1:9/e\n", env, NULL);
	ck_assert_str_eq(c->authzen_token, "pdp-token-0123456789abcdef");
	config_free(c);
	/* From a file, one final newline allowed. */
	char *dir = tu_tmpdir(), *p = tu_path(dir, "tok"), text[1024];
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs("file-token-0123456789abcdef\n", f);
	fclose(f);
	ck_assert_int_eq(str_fmt(text, sizeof text, BASE "[authzen]\nendpoint = "
	    "https://pdp.example/e\ntoken_file = %s\n", p), CS_OK);
	c = tu_config_expect_ok(text, none, NULL);
	ck_assert_str_eq(c->authzen_token, "file-token-0123456789abcdef");
	config_free(c);
	f = fopen(p, "w");
	fputs("two words here-0123456789\n", f);
	fclose(f);
	tu_config_expect_error(text, none, "must hold one token of 16 to 4096 printable characters");
	free(p);
	tu_rmdir(dir);
}
END_TEST

START_TEST(test_authzen_config_refusals)
{
	static char *const none[] = { NULL };
	/* SECURITY: plain http only to loopback, no user information. */
	tu_config_expect_error(BASE "[authzen]\nendpoint = http://pdp.example/e\n", none,
	    "endpoint: http:// is allowed only for 127.0.0.1, localhost or [::1]");
	tu_config_expect_error(BASE "[authzen]\nendpoint = https://u:p@pdp.example/e\n", none,
	    "must not contain user information");
	tu_config_expect_error(BASE "[authzen]\nendpoint = ftp://pdp.example/e\n", none,
	    "must be an https:// URL");
	tu_config_expect_error(BASE "[authzen]\nendpoint = https://pdp.example/e#f\n", none,
	    "must not have a fragment");
	/* Keys that would be ignored without the endpoint. */
	tu_config_expect_error(BASE "[authzen]\non_error = ask\n", none,
	    "on_error: not used without [authzen] endpoint");
	static char *const env[] = { "CONSENTD_AUTHZEN_TOKEN=pdp-token-0123456789abcdef", NULL };
	tu_config_expect_error(BASE, env, "not used without [authzen] endpoint");
	tu_config_expect_error(BASE "[authzen]\nendpoint = https://pdp.example/e\non_error = allow\n", none,
	    "on_error");
	tu_config_expect_error(BASE "[authzen]\nendpoint = https://pdp.example/e\ntimeout_ms = 50\n", none,
	    "timeout_ms");
	tu_config_expect_error(BASE "[authzen]\nendpoint = https://pdp.example/e\ntimeout_ms = 30001\n", none,
	    "timeout_ms");
	tu_config_expect_error(BASE "[authzen]\nendpoint = https://pdp.example/e\ntoken = short\n", none,
	    "token: must be 16 to 4096 printable characters without spaces");
	tu_config_expect_error(BASE "[authzen]\nendpoint = https://pdp.example/e\ntoken = "
	    "pdp-token-0123456789abcdef\ntoken_file = /nonexistent\n", none,
	    "give token (CONSENTD_AUTHZEN_TOKEN) or token_file, not both");
	tu_config_expect_error(BASE "[authzen]\nendpoint = https://pdp.example/e\ntoken_file = /nonexistent\n",
	    none, "cannot open '/nonexistent'");
	tu_config_expect_error(BASE "[authzen]\nendpoint = https://pdp.example/e\nca_file = /nonexistent\n",
	    none, "is not a readable PEM file of CA certificates");
	/* The actions asked must exist and need a person's approval. */
	tu_config_expect_error(BASE "[authzen]\nendpoint = https://pdp.example/e\nactions = github.nope\n",
	    none, "'github.nope' names no [action.github.nope] section");
	tu_config_expect_error(BASE "[authzen]\nendpoint = https://pdp.example/e\nactions = github.list\n",
	    none, "'github.list' has approval = none");
	tu_config_expect_error(BASE "[authzen]\nendpoint = https://pdp.example/e\nactions = merge\n",
	    none, "'merge' is not a valid action (RESOURCE.ACTION)");
	tu_config_expect_error(BASE "[authzen]\nendpoint = https://pdp.example/e\n"
	    "actions = github.merge github.merge\n", none, "'github.merge' is listed twice");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("authzen");
	TCase *t = tcase_create("core");
	tcase_add_test(t, test_authzen_answer_verdicts);
	tcase_add_test(t, test_authzen_answer_reasons);
	tcase_add_test(t, test_authzen_answer_bad);
	tcase_add_test(t, test_authzen_request_body_shape);
	tcase_add_test(t, test_authzen_applies_which);
	tcase_add_test(t, test_authzen_config_defaults_and_keys);
	tcase_add_test(t, test_authzen_config_refusals);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
