/* test_admin_pages.c -- the parts of the admin pages that need no browser: the
 * audit filter's "since" (a UTC date and time, or the old UTC seconds; never
 * an impossible date) and the gate's rule of how recent the IdP login must be
 * (admin_timeout, and the step-up for bulk revocation), as docs/reference.md states it;
 * the audit page's list of actions. */
#include <string.h>
#include "admin_pages.h"
#include "audit.h"
#include "testutil.h"

static int64_t since_of(const char *s)
{
	int64_t t = -1;
	ck_assert_msg(admin_parse_since(s, &t) == CS_OK, "refused: %s", s);
	return t;
}

static void since_refused(const char *s)
{
	int64_t t = 42;
	ck_assert_msg(admin_parse_since(s, &t) == CS_EINVAL, "accepted: %s", s != NULL ? s : "(NULL)");
	ck_assert_int_eq(t, 42);                  /* written only on success */
}

START_TEST(test_admin_pages_since_forms)
{
	/* The old numeric form stays: UTC seconds. */
	ck_assert_int_eq(since_of("0"), 0);
	ck_assert_int_eq(since_of("1738315800"), 1738315800);
	ck_assert_int_eq(since_of("999999999999"), 999999999999LL);
	/* A date is its midnight, UTC; date and time as datetime-local sends it. */
	ck_assert_int_eq(since_of("1970-01-01"), 0);
	ck_assert_int_eq(since_of("2025-01-31"), 1738281600);
	ck_assert_int_eq(since_of("2025-01-31T09:30"), 1738315800);
	ck_assert_int_eq(since_of("2025-01-31T09:30:07"), 1738315807);
	ck_assert_int_eq(since_of("2024-02-29T23:59:59"), 1709251199);
	ck_assert_int_eq(since_of("2000-02-29"), 951782400);
	ck_assert_int_eq(since_of("9999-12-31T23:59:59"), ADMIN_SINCE_INPUT_MAX);
}
END_TEST

START_TEST(test_admin_pages_since_refused)
{
	static const char *const bad[] = {
		"", "-1", "+5", " 5", "5 ", "1e9", "0x10", "1234567890123",      /* 13 digits */
		"2025-02-29", "1900-02-29", "2025-04-31", "2025-00-10", "2025-13-01", "2025-01-00",
		"2025-01-31T24:00", "2025-01-31T23:60", "2025-01-31T23:59:60",
		"2025-01-31T09:30Z", "2025-01-31T09:30:00Z", "2025-01-31T09:30+01:00",
		"2025-01-31 09:30", "2025-1-31", "25-01-31", "2025/01/31", "2025-01-31T9:30",
		"1969-12-31", "yesterday", "2025-01-31T", "2025-01-31T09", "2025-01-31T09:3",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		since_refused(bad[i]);
	since_refused(NULL);
}
END_TEST

/* The gate as docs/reference.md "Admin pages" says it: admin_timeout for every page,
 * the smaller of ADMIN_STEPUP_MAX_AGE (300 s) and admin_timeout for the bulk
 * confirmation and the bulk POST, measured from the IdP's auth_time. */
START_TEST(test_admin_pages_gate_ages)
{
	struct config cfg;
	struct session s;
	const int64_t now = 2000000000;
	memset(&cfg, 0, sizeof cfg);
	memset(&s, 0, sizeof s);
	cfg.session_admin_timeout = 3600;
	cfg.oidc_clock_skew = 60;
	s.admin_claim = true;

	s.auth_time = now - 3600;
	ck_assert_int_eq(admin_gate_check(&cfg, &s, now, false), ADMIN_GATE_OK);
	s.auth_time = now - 3601;
	ck_assert_int_eq(admin_gate_check(&cfg, &s, now, false), ADMIN_GATE_STALE);
	s.auth_time = now - 300;
	ck_assert_int_eq(admin_gate_check(&cfg, &s, now, true), ADMIN_GATE_OK);
	s.auth_time = now - 301;
	ck_assert_int_eq(admin_gate_check(&cfg, &s, now, true), ADMIN_GATE_STALE);
	ck_assert_int_eq(admin_gate_check(&cfg, &s, now, false), ADMIN_GATE_OK);
	/* A smaller admin_timeout is the step-up's limit too. */
	cfg.session_admin_timeout = 120;
	s.auth_time = now - 120;
	ck_assert_int_eq(admin_gate_check(&cfg, &s, now, true), ADMIN_GATE_OK);
	s.auth_time = now - 121;
	ck_assert_int_eq(admin_gate_check(&cfg, &s, now, true), ADMIN_GATE_STALE);
	/* No auth_time, or one past the clock skew, never counts as recent. */
	s.auth_time = 0;
	ck_assert_int_eq(admin_gate_check(&cfg, &s, now, false), ADMIN_GATE_STALE);
	s.auth_time = now + 60;
	ck_assert_int_eq(admin_gate_check(&cfg, &s, now, false), ADMIN_GATE_OK);
	s.auth_time = now + 61;
	ck_assert_int_eq(admin_gate_check(&cfg, &s, now, false), ADMIN_GATE_STALE);
	/* Without the admin claim nothing else matters. */
	s.auth_time = now;
	s.admin_claim = false;
	ck_assert_int_eq(admin_gate_check(&cfg, &s, now, false), ADMIN_GATE_NOT_ADMIN);
}
END_TEST

/* The audit filter's choices: sorted, each once, each an action name. */
START_TEST(test_admin_pages_audit_actions)
{
	size_t n = 0;
	for (; audit_actions[n] != NULL; n++) {
		const char *a = audit_actions[n];
		ck_assert_msg(a[0] != '\0' && strspn(a, "abcdefghijklmnopqrstuvwxyz._-") == strlen(a), "%s", a);
		if (n > 0)
			ck_assert_msg(strcmp(audit_actions[n - 1], a) < 0, "%s before %s",
			    audit_actions[n - 1], a);
	}
	ck_assert_uint_ge(n, 40);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("admin_pages");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_admin_pages_since_forms);
	tcase_add_test(tc, test_admin_pages_since_refused);
	tcase_add_test(tc, test_admin_pages_gate_ages);
	tcase_add_test(tc, test_admin_pages_audit_actions);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
