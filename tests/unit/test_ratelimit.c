/* test_ratelimit.c -- the token buckets: a burst then refusal with the right
 * Retry-After, refill over time, keys kept apart, bounded memory under a
 * flood of distinct keys (forgetting, never refusing a new key), threads on
 * one key, and SipHash-2-4's reference vectors. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "buf.h"
#include "limiter.h"

START_TEST(test_burst_then_refused_with_retry_after)
{
	struct limit_rule r = { .rate = 0.5, .burst = 3 };     /* one token every 2 s */
	struct limiter *l = limiter_new(&r, 64);
	int64_t ra = 0;
	ck_assert_ptr_nonnull(l);
	for (int i = 0; i < 3; i++)
		ck_assert(limiter_take(l, "a", 1, 1000, &ra));
	ck_assert(!limiter_take(l, "a", 1, 1000, &ra));
	ck_assert_int_eq(ra, 2);
	/* 1.5 s later: 0.75 of a token; still refused, 1 s to wait (rounded up). */
	ck_assert(!limiter_take(l, "a", 1, 2500, &ra));
	ck_assert_int_eq(ra, 1);
	/* 2 s after the burst: one token, then refused again. */
	ck_assert(limiter_take(l, "a", 1, 3000, &ra));
	ck_assert(!limiter_take(l, "a", 1, 3000, &ra));
	limiter_free(l);
}
END_TEST

START_TEST(test_refill_is_capped_at_burst)
{
	struct limit_rule r = { .rate = 10, .burst = 2 };
	struct limiter *l = limiter_new(&r, 64);
	int64_t ra = 0;
	ck_assert(limiter_take(l, "k", 1, 0, &ra));
	/* An hour idle gives back 2 tokens, not 36,000. */
	ck_assert(limiter_take(l, "k", 1, 3600000, &ra));
	ck_assert(limiter_take(l, "k", 1, 3600000, &ra));
	ck_assert(!limiter_take(l, "k", 1, 3600000, &ra));
	/* A clock that steps back never adds tokens. */
	ck_assert(!limiter_take(l, "k", 1, 1000, &ra));
	limiter_free(l);
}
END_TEST

START_TEST(test_keys_are_apart)
{
	struct limit_rule r = { .rate = 1, .burst = 1 };
	struct limiter *l = limiter_new(&r, 64);
	int64_t ra = 0;
	ck_assert(limiter_take(l, "203.0.113.7", 11, 0, &ra));
	ck_assert(!limiter_take(l, "203.0.113.7", 11, 0, &ra));
	ck_assert(limiter_take(l, "203.0.113.8", 11, 0, &ra));
	/* Binary keys with NUL bytes are whole keys, not C strings. */
	ck_assert(limiter_take(l, "a\0b", 3, 0, &ra));
	ck_assert(limiter_take(l, "a\0c", 3, 0, &ra));
	ck_assert(!limiter_take(l, "a\0b", 3, 0, &ra));
	limiter_free(l);
}
END_TEST

/* 100,000 distinct keys through 64 slots: memory is what limiter_new took;
 * every new key gets its burst (forgetting, never a refusal of a newcomer);
 * the key being limited stays limited while the flood passes slowly enough
 * for its bucket to be the recently used one. */
START_TEST(test_flood_of_keys_is_bounded)
{
	struct limit_rule r = { .rate = 1, .burst = 1 };
	struct limiter *l = limiter_new(&r, 64);
	int64_t ra = 0;
	char key[32];
	for (int i = 0; i < 100000; i++) {
		ck_assert_int_eq(str_fmt(key, sizeof key, "flood-%d", i), CS_OK);
		ck_assert_msg(limiter_take(l, key, strlen(key), 0, &ra), "new key %d refused", i);
	}
	ck_assert_uint_gt(limiter_evictions(l), 0);
	limiter_free(l);
}
END_TEST

START_TEST(test_full_buckets_are_reused_before_live_ones)
{
	struct limit_rule r = { .rate = 1000, .burst = 1 };   /* full again after 1 ms */
	struct limiter *l = limiter_new(&r, 64);
	int64_t ra = 0;
	char key[32];
	for (int i = 0; i < 10000; i++) {
		ck_assert_int_eq(str_fmt(key, sizeof key, "k%d", i), CS_OK);
		ck_assert(limiter_take(l, key, strlen(key), (int64_t)i * 10, &ra));
	}
	/* Every bucket was full again when its slot was needed: nothing forgotten. */
	ck_assert_uint_eq(limiter_evictions(l), 0);
	limiter_free(l);
}
END_TEST

/* The reference vectors of the SipHash paper (key 00..0f, messages 00..len-1). */
START_TEST(test_siphash_vectors)
{
	unsigned char k[16], m[15];
	for (unsigned i = 0; i < 16; i++)
		k[i] = (unsigned char)i;
	for (unsigned i = 0; i < 15; i++)
		m[i] = (unsigned char)i;
	ck_assert_uint_eq(limiter_siphash(k, m, 0), 0x726fdb47dd0e0e31ULL);
	ck_assert_uint_eq(limiter_siphash(k, m, 8), 0x93f5f5799a932462ULL);
	ck_assert_uint_eq(limiter_siphash(k, m, 15), 0xa129ca6149be45e5ULL);
}
END_TEST

START_TEST(test_bad_rules_are_refused)
{
	struct limit_rule zero = { .rate = 0, .burst = 1 }, thin = { .rate = 1, .burst = 0.5 };
	ck_assert_ptr_null(limiter_new(&zero, 64));
	ck_assert_ptr_null(limiter_new(&thin, 64));
	ck_assert_ptr_null(limiter_new(NULL, 64));
	limiter_free(NULL);
}
END_TEST

struct racer {
	struct limiter *l;
	int granted;
};

static void *race(void *arg)
{
	struct racer *x = arg;
	int64_t ra;
	for (int i = 0; i < 1000; i++)
		if (limiter_take(x->l, "shared", 6, 0, &ra))
			x->granted++;
	return NULL;
}

/* Eight threads on one key at one instant share exactly its burst. */
START_TEST(test_threads_share_one_burst)
{
	struct limit_rule r = { .rate = 1, .burst = 50 };
	struct limiter *l = limiter_new(&r, 4096);
	struct racer x[8];
	pthread_t t[8];
	int total = 0;
	for (int i = 0; i < 8; i++) {
		x[i] = (struct racer){ .l = l };
		ck_assert_int_eq(pthread_create(&t[i], NULL, race, &x[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		total += x[i].granted;
	}
	ck_assert_int_eq(total, 50);
	limiter_free(l);
}
END_TEST

/* limiter_peek looks without taking, and never makes room for a key it does not hold. */
START_TEST(test_peek_takes_nothing)
{
	struct limit_rule r = { .rate = 1, .burst = 2 };
	struct limiter *l = limiter_new(&r, 64);
	int64_t ra = 0;
	ck_assert(limiter_peek(l, "new", 3, 0, &ra));             /* unknown: a full bucket */
	for (int i = 0; i < 10; i++)
		ck_assert(limiter_peek(l, "a", 1, 0, &ra));       /* peeks spend nothing */
	ck_assert(limiter_take(l, "a", 1, 0, &ra));
	ck_assert(limiter_peek(l, "a", 1, 0, &ra));
	ck_assert(limiter_take(l, "a", 1, 0, &ra));
	ra = 0;
	ck_assert(!limiter_peek(l, "a", 1, 0, &ra));              /* empty: refused, Retry-After */
	ck_assert_int_eq(ra, 1);
	ck_assert(!limiter_take(l, "a", 1, 500, &ra));            /* half a token */
	ck_assert(limiter_peek(l, "a", 1, 1000, &ra));            /* a whole one by now */
	ck_assert_uint_eq(limiter_evictions(l), 0);
	limiter_free(l);
}
END_TEST

static Suite *ratelimit_suite(void)
{
	Suite *s = suite_create("ratelimit");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_burst_then_refused_with_retry_after);
	tcase_add_test(tc, test_refill_is_capped_at_burst);
	tcase_add_test(tc, test_keys_are_apart);
	tcase_add_test(tc, test_flood_of_keys_is_bounded);
	tcase_add_test(tc, test_full_buckets_are_reused_before_live_ones);
	tcase_add_test(tc, test_siphash_vectors);
	tcase_add_test(tc, test_peek_takes_nothing);
	tcase_add_test(tc, test_bad_rules_are_refused);
	tcase_add_test(tc, test_threads_share_one_burst);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(ratelimit_suite());
}
