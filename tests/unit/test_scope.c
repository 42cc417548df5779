/* test_scope.c -- scope sets: RFC 6749's scope grammar, the caps, and the
 * set operations consents and grants are checked with.  No store needed. */
#include <string.h>
#include "buf.h"
#include "scope.h"
#include "testutil.h"

static struct scope_set set(const char *s)
{
	struct scope_set v = { .n = 0 };
	ck_assert_int_eq(scope_set_parse(s, &v), CS_OK);
	return v;
}

static void ck_set(const struct scope_set *s, const char *want)
{
	char *j = scope_set_join(s);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(j, want);
	free(j);
}

START_TEST(test_scope_parse_good)
{
	struct scope_set s = set("write read");
	ck_assert_uint_eq(s.n, 2);
	ck_assert_str_eq(s.v[0], "read");
	ck_assert_str_eq(s.v[1], "write");
	ck_assert(scope_set_has(&s, "read"));
	ck_assert(!scope_set_has(&s, "rea"));
	ck_assert(!scope_set_has(&s, "reads"));
	scope_set_clear(&s);
	ck_assert_uint_eq(s.n, 0);
	/* The whole RFC 6749 charset but '"' and '\\'. */
	s = set("a!b c#[]~ issues:write x-y_z.w");
	ck_assert_uint_eq(s.n, 4);
	ck_set(&s, "a!b c#[]~ issues:write x-y_z.w");
	scope_set_clear(&s);
	s = set("zeta alpha mid Alpha");
	ck_set(&s, "Alpha alpha mid zeta");        /* byte order */
	scope_set_clear(&s);
	s = set("");
	ck_assert_uint_eq(s.n, 0);
	ck_set(&s, "");
	scope_set_clear(&s);
}
END_TEST

START_TEST(test_scope_parse_bad)
{
	const char *bad[] = {
		"a  b", " a", "a ", " ", "a\"b", "a\\b", "a\tb", "a\nb", "caf\xc3\xa9", "a\x7f",
		"a\x01", "read  ", "  ",
	};
	struct scope_set s = { .n = 0 };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(scope_set_parse(bad[i], &s) == CS_EINVAL, "accepted [%s]", bad[i]);
	ck_assert_uint_eq(s.n, 0);               /* untouched on failure */
	ck_assert_int_eq(scope_set_parse(NULL, &s), CS_EINVAL);
}
END_TEST

START_TEST(test_scope_parse_too_many)
{
	char buf[512];
	size_t o = 0;
	struct scope_set s = { .n = 0 };
	for (int i = 0; i < SCOPE_SET_MAX; i++) {
		ck_assert_int_eq(str_fmt(buf + o, sizeof buf - o, "%ss%02d", i ? " " : "", i), CS_OK);
		o += strlen(buf + o);
	}
	s = set(buf);
	ck_assert_uint_eq(s.n, SCOPE_SET_MAX);
	scope_set_clear(&s);
	/* A duplicate does not count... */
	ck_assert_int_eq(str_fmt(buf + o, sizeof buf - o, " s00"), CS_OK);
	s = set(buf);
	ck_assert_uint_eq(s.n, SCOPE_SET_MAX);
	scope_set_clear(&s);
	/* ...a 21st distinct scope does. */
	ck_assert_int_eq(str_fmt(buf + o, sizeof buf - o, " s99"), CS_OK);
	ck_assert_int_eq(scope_set_parse(buf, &s), CS_ETOOBIG);
	ck_assert_uint_eq(s.n, 0);
	char longtok[SCOPE_TOKEN_MAX + 2];
	memset(longtok, 'a', sizeof longtok - 1);
	longtok[sizeof longtok - 1] = '\0';
	ck_assert_int_eq(scope_set_parse(longtok, &s), CS_ETOOBIG);
	longtok[SCOPE_TOKEN_MAX] = '\0';
	s = set(longtok);
	ck_assert_uint_eq(s.n, 1);
	scope_set_clear(&s);
}
END_TEST

START_TEST(test_scope_parse_duplicates_collapsed)
{
	struct scope_set s = set("b a b a c a");
	ck_set(&s, "a b c");
	struct scope_set t = set("a c");
	ck_assert(scope_set_subset(&t, &s));
	ck_assert(!scope_set_subset(&s, &t));
	scope_set_clear(&t);
	t = set("");
	ck_assert(scope_set_subset(&t, &s));
	scope_set_clear(&t);
	scope_set_clear(&s);
}
END_TEST

START_TEST(test_scope_set_operations)
{
	struct scope_set a = set("read write admin"), b = set("write list"), out = { .n = 0 };
	ck_assert_int_eq(scope_set_intersect(&out, &a, &b), CS_OK);
	ck_set(&out, "write");
	scope_set_clear(&out);
	ck_assert_int_eq(scope_set_minus(&out, &a, &b), CS_OK);
	ck_set(&out, "admin read");
	scope_set_clear(&out);
	ck_assert_int_eq(scope_set_union(&a, &b), CS_OK);
	ck_set(&a, "admin list read write");
	ck_assert_int_eq(scope_set_add(&a, "zz-and-more", 2), CS_OK);
	ck_assert_int_eq(scope_set_add(&a, "read", 4), CS_OK);      /* already there */
	ck_set(&a, "admin list read write zz");
	scope_set_clear(&a);
	scope_set_clear(&b);
}
END_TEST

static Suite *scope_suite(void)
{
	Suite *s = suite_create("scope");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_scope_parse_good);
	tcase_add_test(tc, test_scope_parse_bad);
	tcase_add_test(tc, test_scope_parse_too_many);
	tcase_add_test(tc, test_scope_parse_duplicates_collapsed);
	tcase_add_test(tc, test_scope_set_operations);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(scope_suite());
}
