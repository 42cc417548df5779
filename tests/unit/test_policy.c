/* test_policy.c -- the organisation's policy lines (policy.h): the syntax and
 * what each refusal names, and the evaluation's edge cases (missing
 * parameters, types a condition cannot judge, numbers by value, first line
 * wins).  Pure: no store, no configuration. */
#include <string.h>
#include "buf.h"
#include "policy.h"
#include "testutil.h"

static struct policy_line line(const char *text, int n)
{
	struct policy_line l;
	char why[200];
	ck_assert_msg(policy_line_parse(text, n, &l, why, sizeof why) == CS_OK, "%s: %s", text, why);
	return l;
}

/* The reason a bad line is refused with (must be refused). */
static void bad(const char *text, const char *reason_has)
{
	struct policy_line l;
	char why[200];
	memset(&l, 0x5a, sizeof l);
	ck_assert_msg(policy_line_parse(text, 1, &l, why, sizeof why) == CS_EINVAL, "accepted: %s",
	    text);
	ck_assert_msg(strstr(why, reason_has) != NULL, "%s: '%s' lacks '%s'", text, why, reason_has);
	ck_assert_int_eq(l.number, 0x5a5a5a5a);      /* *out untouched */
}

/* The verdict of lines (texts, NULL-terminated) on params (JSON text). */
static enum policy_verdict verdict(const char *const *texts, const char *params, size_t *which)
{
	struct policy_line v[8];
	size_t n = 0;
	json_error_t je;
	json_t *p = params != NULL ? json_loads(params, JSON_DECODE_ANY, &je) : NULL;
	ck_assert(params == NULL || p != NULL);
	for (; texts[n] != NULL; n++)
		v[n] = line(texts[n], (int)n + 1);
	enum policy_verdict r = policy_eval(v, n, p, which);
	for (size_t i = 0; i < n; i++)
		policy_line_clear(&v[i]);
	json_decref(p);
	return r;
}

static enum policy_verdict one(const char *text, const char *params)
{
	size_t w = 99;
	return verdict((const char *const[]){ text, NULL }, params, &w);
}

START_TEST(test_policy_parse_good)
{
	struct policy_line l = line("deny", 3);
	ck_assert_int_eq(l.number, 3);
	ck_assert_int_eq(l.verdict, POLICY_DENY);
	ck_assert_uint_eq(l.nconds, 0);
	policy_line_clear(&l);
	l = line("  approve  ", 1);
	ck_assert_int_eq(l.verdict, POLICY_APPROVE);
	ck_assert(!policy_needs_params(&l, 1));
	policy_line_clear(&l);

	l = line("deny if branch == main and repo.owner in (acme, \"big corp\", 7) and n <= 1e3 "
	    "and ref prefix refs/heads/", 2);
	ck_assert_uint_eq(l.nconds, 4);
	ck_assert_str_eq(l.conds[0].path, "branch");
	ck_assert_int_eq(l.conds[0].op, POLICY_EQ);
	ck_assert_str_eq(json_string_value(json_array_get(l.conds[0].values, 0)), "main");
	ck_assert_str_eq(l.conds[1].path, "repo.owner");
	ck_assert_int_eq(l.conds[1].op, POLICY_IN);
	ck_assert_uint_eq(json_array_size(l.conds[1].values), 3);
	ck_assert_str_eq(json_string_value(json_array_get(l.conds[1].values, 1)), "big corp");
	ck_assert(json_is_integer(json_array_get(l.conds[1].values, 2)));
	ck_assert_int_eq(l.conds[2].op, POLICY_LE);
	ck_assert(json_number_value(json_array_get(l.conds[2].values, 0)) == 1000.0);
	ck_assert_int_eq(l.conds[3].op, POLICY_PREFIX);
	ck_assert_str_eq(json_string_value(json_array_get(l.conds[3].values, 0)), "refs/heads/");
	ck_assert(policy_needs_params(&l, 1));
	policy_line_clear(&l);
	policy_line_clear(&l);        /* twice: cleared means empty */
	policy_line_clear(NULL);
	policy_lines_free(NULL, 3);

	/* No spaces needed around symbols; true, false, null and a quoted "10" keep their types. */
	l = line("approve if a==true and b in(false,null) and c==\"10\" and d<-2.5 and e>=0", 1);
	ck_assert(json_is_true(json_array_get(l.conds[0].values, 0)));
	ck_assert(json_is_null(json_array_get(l.conds[1].values, 1)));
	ck_assert(json_is_string(json_array_get(l.conds[2].values, 0)));
	ck_assert_int_eq(l.conds[3].op, POLICY_LT);
	ck_assert_int_eq(l.conds[4].op, POLICY_GE);
	policy_line_clear(&l);
}
END_TEST

START_TEST(test_policy_parse_bad)
{
	bad("", "starts with approve or deny");
	bad("allow", "starts with approve or deny");
	bad("denyall", "starts with approve or deny");
	bad("deny when x == 1", "expected if");
	bad("deny if", "a parameter name starts with a letter");
	bad("deny if 9x == 1", "a parameter name starts with a letter");
	bad("deny if x.", "a parameter name starts with a letter");
	bad("deny if x = 1", "expected an operator");
	bad("deny if x != 1", "expected an operator");
	bad("deny if x ==", "expected a value");
	bad("deny if x == \"open", "no closing");
	bad("deny if x == 1.2.3", "not a JSON string or number");
	bad("deny if x == 01", "not a JSON string or number");
	bad("deny if x < 1e999", "not a JSON string or number");
	bad("deny if x < main", "a numeric bound takes a number");
	bad("deny if x <= \"5\"", "a numeric bound takes a number");
	bad("deny if x prefix 5", "prefix takes a string");
	bad("deny if x in a, b", "in takes a list in brackets");
	bad("deny if x in (a b)", "expected , or )");
	bad("deny if x in (a,", "expected a value");
	bad("deny if x == 1 or y == 2", "expected and CONDITION");
	bad("deny if x == 1 and", "a parameter name starts with a letter");
	bad("deny if a.b.c.d.e.f.g.h.i == 1", "at most 8 names");
	bad("deny if a==1 and b==1 and c==1 and d==1 and e==1 and f==1 and g==1 and h==1 and "
	    "i==1 and j==1 and k==1 and l==1 and m==1 and n==1 and o==1 and p==1 and q==1",
	    "at most 16 conditions");
	char big[600] = "deny if x in (";
	for (int i = 0; i < 65; i++)
		ck_assert_int_eq(str_fmt(big + strlen(big), sizeof big - strlen(big), "%s%d",
		    i ? "," : "", i), CS_OK);
	ck_assert_int_eq(str_fmt(big + strlen(big), sizeof big - strlen(big), ")"), CS_OK);
	bad(big, "at most 64 values");
}
END_TEST

START_TEST(test_policy_eval_first_line_decides)
{
	size_t w = 99;
	const char *const lines[] = { "deny if branch == main", "approve if repo == docs", "deny",
		NULL };
	ck_assert_int_eq(verdict(lines, "{\"branch\":\"main\",\"repo\":\"docs\"}", &w), POLICY_DENY);
	ck_assert_uint_eq(w, 0);
	ck_assert_int_eq(verdict(lines, "{\"branch\":\"dev\",\"repo\":\"docs\"}", &w), POLICY_APPROVE);
	ck_assert_uint_eq(w, 1);
	ck_assert_int_eq(verdict(lines, "{\"branch\":\"dev\",\"repo\":\"site\"}", &w), POLICY_DENY);
	ck_assert_uint_eq(w, 2);
	/* No line holds: no verdict, *which untouched. */
	w = 99;
	ck_assert_int_eq(verdict((const char *const[]){ "deny if branch == main", NULL },
	    "{\"branch\":\"dev\"}", &w), POLICY_NONE);
	ck_assert_uint_eq(w, 99);
	ck_assert_int_eq(policy_eval(NULL, 0, NULL, &w), POLICY_NONE);
	/* An unconditional line decides even without parameters. */
	ck_assert_int_eq(one("approve", NULL), POLICY_APPROVE);
	ck_assert_int_eq(one("deny", "[1,2]"), POLICY_DENY);
}
END_TEST

START_TEST(test_policy_eval_missing_and_nested)
{
	/* A missing parameter does not hold the condition, on either kind of line. */
	ck_assert_int_eq(one("deny if branch == main", "{}"), POLICY_NONE);
	ck_assert_int_eq(one("deny if branch == main", NULL), POLICY_NONE);
	ck_assert_int_eq(one("deny if branch == main", "\"main\""), POLICY_NONE);
	ck_assert_int_eq(one("approve if n < 5", "{\"m\":1}"), POLICY_NONE);
	/* Dotted paths reach into objects, never into arrays or strings. */
	ck_assert_int_eq(one("deny if head.ref == main", "{\"head\":{\"ref\":\"main\"}}"), POLICY_DENY);
	ck_assert_int_eq(one("deny if head.ref == main", "{\"head\":[{\"ref\":\"main\"}]}"),
	    POLICY_NONE);
	ck_assert_int_eq(one("deny if head.ref == main", "{\"head\":\"main\"}"), POLICY_NONE);
	ck_assert_int_eq(one("deny if path.repo == x", "{\"path\":{\"owner\":\"x\"}}"), POLICY_NONE);
	/* A name with a dot in the parameters is not the nested path. */
	ck_assert_int_eq(one("deny if a.b == 1", "{\"a.b\":1}"), POLICY_NONE);
}
END_TEST

START_TEST(test_policy_eval_types)
{
	/* Equality is JSON's: the string "10" is not the number 10, true is not "true". */
	ck_assert_int_eq(one("deny if n == 10", "{\"n\":\"10\"}"), POLICY_NONE);
	ck_assert_int_eq(one("deny if n == \"10\"", "{\"n\":10}"), POLICY_NONE);
	ck_assert_int_eq(one("deny if n == \"10\"", "{\"n\":\"10\"}"), POLICY_DENY);
	ck_assert_int_eq(one("deny if f == true", "{\"f\":\"true\"}"), POLICY_NONE);
	ck_assert_int_eq(one("deny if f == true", "{\"f\":true}"), POLICY_DENY);
	ck_assert_int_eq(one("deny if f == null", "{\"f\":null}"), POLICY_DENY);
	ck_assert_int_eq(one("deny if f in (a, 1, true)", "{\"f\":true}"), POLICY_DENY);
	ck_assert_int_eq(one("deny if f in (a, 1, true)", "{\"f\":\"b\"}"), POLICY_NONE);
	/* SECURITY: a type a bound or prefix cannot judge counts against the caller:
	 * a deny line holds, an approve line does not. */
	ck_assert_int_eq(one("deny if amount > 1000", "{\"amount\":\"5000\"}"), POLICY_DENY);
	ck_assert_int_eq(one("approve if amount <= 1000", "{\"amount\":\"5\"}"), POLICY_NONE);
	ck_assert_int_eq(one("deny if ref prefix main", "{\"ref\":7}"), POLICY_DENY);
	ck_assert_int_eq(one("approve if ref prefix feature/", "{\"ref\":[\"feature/x\"]}"),
	    POLICY_NONE);
	ck_assert_int_eq(one("deny if amount > 1000 and branch == main",
	    "{\"amount\":\"5000\",\"branch\":\"dev\"}"), POLICY_NONE);
	/* Prefix: bytes, case-sensitive; the empty prefix holds for every string. */
	ck_assert_int_eq(one("deny if ref prefix \"\"", "{\"ref\":\"\"}"), POLICY_DENY);
	ck_assert_int_eq(one("deny if ref prefix Main", "{\"ref\":\"main\"}"), POLICY_NONE);
	ck_assert_int_eq(one("deny if ref prefix release/", "{\"ref\":\"release\"}"), POLICY_NONE);
	ck_assert_int_eq(one("deny if ref prefix release/", "{\"ref\":\"release/1\"}"), POLICY_DENY);
}
END_TEST

START_TEST(test_policy_eval_numbers_by_value)
{
	/* 1e3, 1000.0 and 1000 are one number (the JCS canonical form of each is 1000). */
	ck_assert_int_eq(one("deny if n == 1000", "{\"n\":1e3}"), POLICY_DENY);
	ck_assert_int_eq(one("deny if n == 1e3", "{\"n\":1000}"), POLICY_DENY);
	ck_assert_int_eq(one("deny if n == 1000", "{\"n\":1000.0}"), POLICY_DENY);
	ck_assert_int_eq(one("deny if n in (1, 1E3)", "{\"n\":1000}"), POLICY_DENY);
	ck_assert_int_eq(one("deny if n == -0", "{\"n\":0}"), POLICY_DENY);
	/* Bounds at and around their edge. */
	ck_assert_int_eq(one("approve if n <= 100", "{\"n\":100}"), POLICY_APPROVE);
	ck_assert_int_eq(one("approve if n <= 100", "{\"n\":100.5}"), POLICY_NONE);
	ck_assert_int_eq(one("approve if n < 100", "{\"n\":100}"), POLICY_NONE);
	ck_assert_int_eq(one("approve if n >= -1", "{\"n\":-1}"), POLICY_APPROVE);
	ck_assert_int_eq(one("approve if n > -1", "{\"n\":-1}"), POLICY_NONE);
	ck_assert_int_eq(one("approve if n > 0.1 and n < 0.3", "{\"n\":0.2}"), POLICY_APPROVE);
	/* The largest I-JSON integer. */
	ck_assert_int_eq(one("deny if n >= 9007199254740991", "{\"n\":9007199254740991}"),
	    POLICY_DENY);
	ck_assert_int_eq(one("deny if n >= 9007199254740991", "{\"n\":9007199254740990}"),
	    POLICY_NONE);
}
END_TEST

static Suite *policy_suite(void)
{
	Suite *s = suite_create("policy");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_policy_parse_good);
	tcase_add_test(tc, test_policy_parse_bad);
	tcase_add_test(tc, test_policy_eval_first_line_decides);
	tcase_add_test(tc, test_policy_eval_missing_and_nested);
	tcase_add_test(tc, test_policy_eval_types);
	tcase_add_test(tc, test_policy_eval_numbers_by_value);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(policy_suite());
}
