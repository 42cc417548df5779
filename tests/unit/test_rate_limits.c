/* test_rate_limits.c -- the [limits] classes over the token buckets: a class
 * with rate 0 is never refused, classes and keys are apart, an IPv6 client
 * counts by its /64 (and an IPv4-mapped one as its IPv4 address), and every
 * refusal is counted in consentd_rate_limit_refusals_total by class. */
#include <string.h>

#include "testutil.h"
#include "buf.h"
#include "config.h"
#include "metrics.h"
#include "rate_limits.h"

static struct rate_limits *make(int64_t addr_milli, int64_t person_milli, int64_t burst)
{
	struct config c;
	memset(&c, 0, sizeof c);
	c.limit_address = (struct config_limit){ .rate_milli = addr_milli, .burst = burst };
	c.limit_person = (struct config_limit){ .rate_milli = person_milli, .burst = burst };
	c.limit_gateway = (struct config_limit){ .rate_milli = 1, .burst = burst };
	c.limit_auth_failure = (struct config_limit){ .rate_milli = 1, .burst = burst };
	c.limit_buckets = 64;
	struct rate_limits *l = rate_limits_new(&c);
	ck_assert_ptr_nonnull(l);
	return l;
}

static bool addr(struct rate_limits *l, const char *ip)
{
	int64_t ra = 0;
	bool ok = rate_limits_take_address(l, ip, &ra);
	if (!ok)
		ck_assert_int_ge(ra, 1);
	return ok;
}

START_TEST(test_rate_limits_off_and_apart)
{
	metrics_reset();
	struct rate_limits *l = make(1, 0, 2);        /* address 0.001/s; person off */
	int64_t ra = 0, uid = 7;
	ck_assert(addr(l, "192.0.2.1"));
	ck_assert(addr(l, "192.0.2.1"));
	ck_assert(!addr(l, "192.0.2.1"));
	ck_assert(addr(l, "192.0.2.2"));               /* another address */
	for (int i = 0; i < 50; i++)                   /* a class switched off */
		ck_assert(rate_limits_take(l, LIMIT_PERSON, &uid, sizeof uid, &ra));
	ck_assert(rate_limits_take(l, LIMIT_NONE, "x", 1, &ra));
	ck_assert(rate_limits_take(NULL, LIMIT_ADDRESS, "x", 1, &ra));   /* no limits at all */
	/* The gateway class is a table of its own: the address refusals took none of it. */
	ck_assert(rate_limits_take(l, LIMIT_GATEWAY, "192.0.2.1", 9, &ra));
	ck_assert_str_eq(limit_class_name(LIMIT_GATEWAY), "gateway");
	rate_limits_free(l);
	rate_limits_free(NULL);
	metrics_reset();
}
END_TEST

START_TEST(test_rate_limits_ipv6_by_64)
{
	metrics_reset();
	struct rate_limits *l = make(1, 1, 2);
	/* SECURITY: rotating through one /64 does not buy new buckets. */
	ck_assert(addr(l, "2001:db8:1:2::1"));
	ck_assert(addr(l, "2001:db8:1:2:ffff::9"));
	ck_assert(!addr(l, "2001:db8:1:2:abcd::1"));
	ck_assert(addr(l, "2001:db8:1:3::1"));         /* the next /64 */
	/* An IPv4-mapped address is its IPv4 address. */
	ck_assert(addr(l, "198.51.100.5"));
	ck_assert(addr(l, "::ffff:198.51.100.5"));
	ck_assert(!addr(l, "198.51.100.5"));
	rate_limits_free(l);
	metrics_reset();
}
END_TEST

START_TEST(test_rate_limits_refusals_counted)
{
	struct buf b;
	int64_t ra = 0, uid = 1;
	metrics_reset();
	struct rate_limits *l = make(1, 1, 1);
	ck_assert(addr(l, "192.0.2.1"));
	ck_assert(!addr(l, "192.0.2.1"));
	ck_assert(!addr(l, "192.0.2.1"));
	ck_assert(rate_limits_take(l, LIMIT_PERSON, &uid, sizeof uid, &ra));
	ck_assert(!rate_limits_take(l, LIMIT_PERSON, &uid, sizeof uid, &ra));
	buf_init(&b, 1 << 16);
	ck_assert_int_eq(metrics_render(&b), CS_OK);
	ck_assert_ptr_nonnull(strstr(b.data, "# TYPE consentd_rate_limit_refusals_total counter"));
	ck_assert_ptr_nonnull(strstr(b.data, "consentd_rate_limit_refusals_total{limit=\"address\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(b.data, "consentd_rate_limit_refusals_total{limit=\"person\"} 1\n"));
	ck_assert_ptr_null(strstr(b.data, "limit=\"gateway\""));
	buf_clear(&b);
	rate_limits_free(l);
	metrics_reset();
}
END_TEST

/* The failed-authentication class: asking spends nothing, failures do; by address
 * (an IPv6 /64 as one), apart from the address class; refusals counted. */
START_TEST(test_rate_limits_auth_failures)
{
	struct buf b;
	int64_t ra = 0;
	metrics_reset();
	struct rate_limits *l = make(1, 1, 3);
	for (int i = 0; i < 20; i++)
		ck_assert(rate_limits_auth_allowed(l, "192.0.2.1", &ra));
	for (int i = 0; i < 3; i++)
		rate_limits_auth_failed(l, "192.0.2.1");
	ra = 0;
	ck_assert(!rate_limits_auth_allowed(l, "192.0.2.1", &ra));
	ck_assert_int_ge(ra, 1);
	ck_assert(!rate_limits_auth_allowed(l, "::ffff:192.0.2.1", &ra));      /* the same address */
	ck_assert(rate_limits_auth_allowed(l, "192.0.2.2", &ra));              /* another */
	ck_assert(addr(l, "192.0.2.1"));                       /* the address class is apart */
	for (int i = 0; i < 3; i++)
		rate_limits_auth_failed(l, "2001:db8:1:2::1");
	ck_assert(!rate_limits_auth_allowed(l, "2001:db8:1:2:ffff::9", &ra));  /* its /64 */
	ck_assert(rate_limits_auth_allowed(l, "2001:db8:1:3::1", &ra));
	ck_assert(rate_limits_auth_allowed(NULL, "192.0.2.1", &ra));           /* no limits */
	rate_limits_auth_failed(NULL, "192.0.2.1");
	ck_assert_str_eq(limit_class_name(LIMIT_AUTH_FAILURE), "auth_failure");
	buf_init(&b, 1 << 16);
	ck_assert_int_eq(metrics_render(&b), CS_OK);
	ck_assert_ptr_nonnull(strstr(b.data, "consentd_rate_limit_refusals_total{limit=\"auth_failure\"} 3\n"));
	buf_clear(&b);
	rate_limits_free(l);
	/* rate 0: the class is off */
	struct config c;
	memset(&c, 0, sizeof c);
	c.limit_buckets = 64;
	l = rate_limits_new(&c);
	for (int i = 0; i < 100; i++)
		rate_limits_auth_failed(l, "192.0.2.1");
	ck_assert(rate_limits_auth_allowed(l, "192.0.2.1", &ra));
	rate_limits_free(l);
	metrics_reset();
}
END_TEST

static Suite *rate_limits_suite(void)
{
	Suite *s = suite_create("rate_limits");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_rate_limits_off_and_apart);
	tcase_add_test(tc, test_rate_limits_ipv6_by_64);
	tcase_add_test(tc, test_rate_limits_refusals_counted);
	tcase_add_test(tc, test_rate_limits_auth_failures);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(rate_limits_suite());
}
