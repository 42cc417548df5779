/* test_auth_refusal.c -- the summary of refused gateway authentications
 * (auth_refusal.c, issue 28): one audit entry per address and interval, the
 * refusals in between carried into the next one, a cap on entries per interval
 * whatever the number of addresses, an IPv6 /64 as one address, and every
 * refusal counted in consentd_gateway_auth_refused_total by reason. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "auth_refusal.h"
#include "buf.h"
#include "metrics.h"

#define T0 1700000000

static bool note(struct auth_refusals *t, const char *ip, int64_t now, struct auth_refusal_summary *s)
{
	return auth_refusals_note(t, ip, AUTH_REFUSED_ASSERTION, true, now, s);
}

START_TEST(test_auth_refusal_once_per_address_and_interval)
{
	struct auth_refusal_summary s;
	struct auth_refusals *t = auth_refusals_new();
	ck_assert_ptr_nonnull(t);
	ck_assert(note(t, "192.0.2.1", T0, &s));                 /* the first: written */
	ck_assert_uint_eq(s.earlier, 0);
	for (int i = 0; i < 1000; i++)                            /* the rest of the interval: not */
		ck_assert(!note(t, "192.0.2.1", T0 + i % AUTH_REFUSAL_INTERVAL, &s));
	ck_assert(note(t, "192.0.2.2", T0 + 1, &s));             /* another address: its own */
	ck_assert(!note(t, "::ffff:192.0.2.2", T0 + 2, &s));     /* the same one, mapped */
	ck_assert(note(t, "2001:db8:1:2::1", T0, &s));
	ck_assert(!note(t, "2001:db8:1:2:abcd::9", T0, &s));     /* the same /64 */
	/* The next interval: one entry, carrying the 1000 refusals it did not write. */
	ck_assert(note(t, "192.0.2.1", T0 + AUTH_REFUSAL_INTERVAL, &s));
	ck_assert_uint_eq(s.earlier, 1000);
	ck_assert(!note(t, "192.0.2.1", T0 + AUTH_REFUSAL_INTERVAL + 1, &s));
	/* A clock stepped back does not silence an address for ever. */
	ck_assert(note(t, "192.0.2.1", T0 - 10, &s));
	auth_refusals_free(t);
	auth_refusals_free(NULL);
}
END_TEST

START_TEST(test_auth_refusal_cap_per_interval)
{
	struct auth_refusal_summary s;
	struct auth_refusals *t = auth_refusals_new();
	char ip[32];
	unsigned written = 0;
	/* 10,000 addresses in one interval: at most the cap is written. */
	for (int i = 0; i < 10000; i++) {
		ck_assert_int_eq(snprintf(ip, sizeof ip, "10.%d.%d.%d", i / 65536, (i / 256) % 256, i % 256) > 0, 1);
		written += note(t, ip, T0 + i % 60, &s) ? 1u : 0u;
	}
	ck_assert_uint_eq(written, AUTH_REFUSAL_MAX_ENTRIES);
	/* The next interval's first entry says how many went unrecorded. */
	ck_assert(note(t, "192.0.2.77", T0 + AUTH_REFUSAL_INTERVAL, &s));
	ck_assert_uint_eq(s.unrecorded, 10000 - AUTH_REFUSAL_MAX_ENTRIES);
	ck_assert(note(t, "192.0.2.78", T0 + AUTH_REFUSAL_INTERVAL, &s));
	ck_assert_uint_eq(s.unrecorded, 0);
	auth_refusals_free(t);
}
END_TEST

START_TEST(test_auth_refusal_counted_by_reason)
{
	struct auth_refusal_summary s;
	struct buf b;
	metrics_reset();
	ck_assert_int_eq(metrics_declare_consentd(), CS_OK);
	struct auth_refusals *t = auth_refusals_new();
	for (int i = 0; i < 5; i++)
		ck_assert(!auth_refusals_note(t, "192.0.2.1", AUTH_REFUSED_METHOD_NOT_ENABLED, false, T0, &s));
	/* Refusals never audited did not use up the address's entry. */
	ck_assert(auth_refusals_note(t, "192.0.2.1", AUTH_REFUSED_REPLAY, true, T0, &s));
	ck_assert(auth_refusals_note(NULL, "192.0.2.1", AUTH_REFUSED_BASIC, true, T0, &s));   /* no table */
	ck_assert(!auth_refusals_note(NULL, "192.0.2.1", AUTH_REFUSED_BASIC, false, T0, &s));
	buf_init(&b, 1 << 18);
	ck_assert_int_eq(metrics_render(&b), CS_OK);
	ck_assert_ptr_nonnull(strstr(b.data, "consentd_gateway_auth_refused_total{reason=\"method_not_enabled\"} 5\n"));
	ck_assert_ptr_nonnull(strstr(b.data, "consentd_gateway_auth_refused_total{reason=\"replay\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(b.data, "consentd_gateway_auth_refused_total{reason=\"basic\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(b.data, "consentd_gateway_auth_refused_total{reason=\"missing\"} 0\n"));
	for (int r = 0; r < AUTH_REFUSED__MAX; r++)
		ck_assert_str_ne(auth_refusal_reason_name((enum auth_refusal_reason)r), "other");
	ck_assert_str_eq(auth_refusal_reason_name(AUTH_REFUSED__MAX), "other");
	buf_clear(&b);
	auth_refusals_free(t);
	metrics_reset();
}
END_TEST

static Suite *auth_refusal_suite(void)
{
	Suite *s = suite_create("auth_refusal");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_auth_refusal_once_per_address_and_interval);
	tcase_add_test(tc, test_auth_refusal_cap_per_interval);
	tcase_add_test(tc, test_auth_refusal_counted_by_reason);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(auth_refusal_suite());
}
