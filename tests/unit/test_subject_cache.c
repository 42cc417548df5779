/* test_subject_cache.c -- the bounded cache of verified subject tokens on its
 * own: hits, expiry at exp, key set generations, the bound and LRU eviction,
 * digests, and several threads at once (run under ASan).  Times are explicit. */
#include <pthread.h>
#include <stdint.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "buf.h"
#include "testutil.h"
#include "subject_cache.h"

#define NOW 1700000000

static struct subject_cache *cache(size_t capacity)
{
	struct subject_cache *c = NULL;
	ck_assert_int_eq(subject_cache_new(capacity, &c), CS_OK);
	ck_assert_ptr_nonnull(c);
	return c;
}

/* The digest of token (a C string), through the code under test. */
static void digest_of(struct subject_cache *c, const char *token, unsigned char d[SUBJECT_CACHE_DIGEST])
{
	ck_assert_int_eq(subject_cache_digest(c, token, strlen(token), d), CS_OK);
}

/* Claims {"sub": sub, "n": n}. */
static json_t *claims_of(const char *sub, int n)
{
	json_t *o = json_pack("{s:s, s:i}", "sub", sub, "n", n);
	ck_assert_ptr_nonnull(o);
	return o;
}

/* Puts token with claims {"n": n} under gen until exp; the claims are released here. */
static void put_n(struct subject_cache *c, const char *token, int n, uint64_t gen, int64_t exp)
{
	unsigned char d[SUBJECT_CACHE_DIGEST];
	json_t *o = claims_of("alice", n);
	digest_of(c, token, d);
	subject_cache_put(c, d, gen, NOW, exp, o);
	json_decref(o);
}

/* The "n" the cache holds for token under gen at now, or -1 on a miss. */
static int get_n(struct subject_cache *c, const char *token, uint64_t gen, int64_t now)
{
	unsigned char d[SUBJECT_CACHE_DIGEST];
	json_t *o = NULL;
	digest_of(c, token, d);
	if (!subject_cache_get(c, d, gen, now, &o)) {
		ck_assert_ptr_null(o);
		return -1;
	}
	ck_assert_ptr_nonnull(o);
	int n = (int)json_integer_value(json_object_get(o, "n"));
	json_decref(o);
	return n;
}

START_TEST(test_subject_cache_new_rejects)
{
	struct subject_cache *c = NULL;
	ck_assert_int_eq(subject_cache_new(0, &c), CS_EINVAL);
	ck_assert_int_eq(subject_cache_new(SUBJECT_CACHE_WAYS - 1, &c), CS_EINVAL);
	ck_assert_int_eq(subject_cache_new(SUBJECT_CACHE_WAYS + 1, &c), CS_EINVAL);
	ck_assert_int_eq(subject_cache_new(SIZE_MAX - SIZE_MAX % SUBJECT_CACHE_WAYS, &c), CS_EINVAL);
	ck_assert_int_eq(subject_cache_new(16, NULL), CS_EINVAL);
	ck_assert_ptr_null(c);
	subject_cache_free(NULL);
	ck_assert_uint_eq(subject_cache_count(NULL), 0);
}
END_TEST

START_TEST(test_subject_cache_get_hit_returns_cached_claims)
{
	struct subject_cache *c = cache(16);
	unsigned char d[SUBJECT_CACHE_DIGEST];
	json_t *o = claims_of("alice", 7), *got = NULL;
	digest_of(c, "tok-a", d);
	ck_assert(!subject_cache_get(c, d, 1, NOW, &got));
	subject_cache_put(c, d, 1, NOW, NOW + 300, o);
	ck_assert_uint_eq(subject_cache_count(c), 1);
	/* The very object that was put, with a reference of its own. */
	ck_assert(subject_cache_get(c, d, 1, NOW + 10, &got));
	ck_assert_ptr_eq(got, o);
	ck_assert_str_eq(json_string_value(json_object_get(got, "sub")), "alice");
	json_decref(o);
	ck_assert_int_eq(json_integer_value(json_object_get(got, "n")), 7);
	json_decref(got);
	/* Putting the same digest again replaces the entry, it does not add one. */
	put_n(c, "tok-a", 8, 1, NOW + 300);
	ck_assert_uint_eq(subject_cache_count(c), 1);
	ck_assert_int_eq(get_n(c, "tok-a", 1, NOW), 8);
	subject_cache_free(c);
}
END_TEST

START_TEST(test_subject_cache_get_expires_at_exp)
{
	struct subject_cache *c = cache(16);
	put_n(c, "tok-a", 1, 1, NOW + 100);
	ck_assert_int_eq(get_n(c, "tok-a", 1, NOW + 99), 1);
	/* At exp exactly the entry is gone, and stays gone. */
	ck_assert_int_eq(get_n(c, "tok-a", 1, NOW + 100), -1);
	ck_assert_uint_eq(subject_cache_count(c), 0);
	ck_assert_int_eq(get_n(c, "tok-a", 1, NOW + 50), -1);
	/* An entry whose exp has passed is never put. */
	put_n(c, "tok-b", 2, 1, NOW);
	put_n(c, "tok-c", 3, 1, NOW - 1);
	ck_assert_uint_eq(subject_cache_count(c), 0);
	ck_assert_int_eq(get_n(c, "tok-b", 1, NOW - 10), -1);
	subject_cache_free(c);
}
END_TEST

START_TEST(test_subject_cache_advance_drops_all)
{
	struct subject_cache *c = cache(64);
	char t[32];
	for (int i = 0; i < 10; i++) {
		ck_assert_int_eq(str_fmt(t, sizeof t, "tok-%d", i), CS_OK);
		put_n(c, t, i, 1, NOW + 300);
	}
	ck_assert_uint_eq(subject_cache_count(c), 10);
	ck_assert_int_eq(get_n(c, "tok-3", 1, NOW), 3);
	subject_cache_advance(c, 2);
	ck_assert_uint_eq(subject_cache_count(c), 0);
	ck_assert_int_eq(get_n(c, "tok-3", 1, NOW), -1);
	ck_assert_int_eq(get_n(c, "tok-3", 2, NOW), -1);
	/* A thread that verified with the replaced set cannot put its entry back. */
	put_n(c, "tok-3", 3, 1, NOW + 300);
	ck_assert_uint_eq(subject_cache_count(c), 0);
	/* Advancing to an older or the same generation changes nothing. */
	put_n(c, "tok-4", 4, 2, NOW + 300);
	subject_cache_advance(c, 1);
	subject_cache_advance(c, 2);
	ck_assert_int_eq(get_n(c, "tok-4", 2, NOW), 4);
	/* A put or get from a newer generation than the cache knows drops the rest. */
	put_n(c, "tok-5", 5, 3, NOW + 300);
	ck_assert_uint_eq(subject_cache_count(c), 1);
	ck_assert_int_eq(get_n(c, "tok-4", 2, NOW), -1);
	ck_assert_int_eq(get_n(c, "tok-5", 4, NOW), -1);
	ck_assert_uint_eq(subject_cache_count(c), 0);
	subject_cache_free(c);
}
END_TEST

START_TEST(test_subject_cache_put_bound_holds)
{
	struct subject_cache *c = cache(16);
	char t[32];
	for (int i = 0; i < 1000; i++) {
		ck_assert_int_eq(str_fmt(t, sizeof t, "tok-%d", i), CS_OK);
		put_n(c, t, i, 1, NOW + 300);
		ck_assert_uint_le(subject_cache_count(c), 16);
	}
	ck_assert_uint_eq(subject_cache_count(c), 16);
	/* The newest is always there; 16 entries at most answer. */
	ck_assert_int_eq(get_n(c, "tok-999", 1, NOW), 999);
	int hits = 0;
	for (int i = 0; i < 1000; i++) {
		ck_assert_int_eq(str_fmt(t, sizeof t, "tok-%d", i), CS_OK);
		if (get_n(c, t, 1, NOW) == i)
			hits++;
	}
	ck_assert_int_eq(hits, 16);
	subject_cache_free(c);
}
END_TEST

START_TEST(test_subject_cache_put_evicts_least_recently_used)
{
	/* One set: capacity == ways. */
	struct subject_cache *c = cache(SUBJECT_CACHE_WAYS);
	ck_assert_int_eq(SUBJECT_CACHE_WAYS, 4);
	put_n(c, "a", 1, 1, NOW + 300);
	put_n(c, "b", 2, 1, NOW + 300);
	put_n(c, "c", 3, 1, NOW + 300);
	put_n(c, "d", 4, 1, NOW + 300);
	ck_assert_int_eq(get_n(c, "a", 1, NOW), 1);        /* a is used again: b is the oldest */
	put_n(c, "e", 5, 1, NOW + 300);
	ck_assert_int_eq(get_n(c, "b", 1, NOW), -1);
	ck_assert_int_eq(get_n(c, "a", 1, NOW), 1);
	ck_assert_int_eq(get_n(c, "e", 1, NOW), 5);
	/* An entry whose time is up goes before any live one. */
	put_n(c, "short", 6, 1, NOW + 10);
	ck_assert_int_eq(get_n(c, "c", 1, NOW), -1);          /* c was the least recently used */
	unsigned char d[SUBJECT_CACHE_DIGEST];
	json_t *o = claims_of("bob", 7);
	digest_of(c, "f", d);
	subject_cache_put(c, d, 1, NOW + 20, NOW + 300, o);
	json_decref(o);
	ck_assert_int_eq(get_n(c, "short", 1, NOW), -1);
	ck_assert_int_eq(get_n(c, "a", 1, NOW), 1);
	ck_assert_int_eq(get_n(c, "d", 1, NOW), 4);
	ck_assert_int_eq(get_n(c, "e", 1, NOW), 5);
	ck_assert_int_eq(get_n(c, "f", 1, NOW), 7);
	ck_assert_uint_eq(subject_cache_count(c), 4);
	subject_cache_free(c);
}
END_TEST

START_TEST(test_subject_cache_digest_one_byte_differs)
{
	struct subject_cache *c = cache(16);
	unsigned char d1[SUBJECT_CACHE_DIGEST], d2[SUBJECT_CACHE_DIGEST];
	/* SHA-256 itself (FIPS 180-2 "abc"). */
	static const unsigned char abc[SUBJECT_CACHE_DIGEST] = {
		0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae,
		0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61,
		0xf2, 0x00, 0x15, 0xad,
	};
	digest_of(c, "abc", d1);
	ck_assert_mem_eq(d1, abc, sizeof abc);
	ck_assert_int_eq(subject_cache_digest(c, NULL, 0, d1), CS_EINVAL);
	ck_assert_int_eq(subject_cache_digest(NULL, "abc", 3, d1), CS_EINVAL);
	/* Two tokens one byte apart (the last) share no entry. */
	const char *t1 = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlQQ";
	const char *t2 = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlQR";
	digest_of(c, t1, d1);
	digest_of(c, t2, d2);
	ck_assert(memcmp(d1, d2, sizeof d1) != 0);
	put_n(c, t1, 1, 1, NOW + 300);
	ck_assert_int_eq(get_n(c, t2, 1, NOW), -1);
	ck_assert_int_eq(get_n(c, t1, 1, NOW), 1);
	/* A prefix is another token too. */
	ck_assert_int_eq(subject_cache_digest(c, t1, strlen(t1) - 1, d2), CS_OK);
	json_t *o = NULL;
	ck_assert(!subject_cache_get(c, d2, 1, NOW, &o));
	subject_cache_free(c);
}
END_TEST

/* --- several threads ----------------------------------------------------- */

struct race {
	struct subject_cache *c;
	int id;
	int wrong;              /* hits whose claims belong to another token */
};

#define RACE_TOKENS 64
#define RACE_ROUNDS 4000

static void *race_main(void *arg)
{
	struct race *r = arg;
	char t[32];
	unsigned char d[SUBJECT_CACHE_DIGEST];
	for (int i = 0; i < RACE_ROUNDS; i++) {
		int k = (i * 7 + r->id * 13) % RACE_TOKENS;
		uint64_t gen = 1 + (uint64_t)(i / 1000);
		if (str_fmt(t, sizeof t, "tok-%d", k) != CS_OK ||
		    subject_cache_digest(r->c, t, strlen(t), d) != CS_OK) {
			r->wrong++;
			continue;
		}
		json_t *o = NULL;
		if (subject_cache_get(r->c, d, gen, NOW + (i % 50), &o)) {
			/* Shared and read-only: reading it from every thread is the point. */
			if (json_integer_value(json_object_get(o, "n")) != k)
				r->wrong++;
			json_decref(o);
		} else {
			json_t *n = json_pack("{s:s, s:i}", "sub", "alice", "n", k);
			subject_cache_put(r->c, d, gen, NOW, NOW + 40 + k % 20, n);
			json_decref(n);
		}
		if (i % 997 == 0)
			subject_cache_advance(r->c, gen);
		if (subject_cache_count(r->c) > 32)
			r->wrong++;
	}
	return NULL;
}

START_TEST(test_subject_cache_concurrent_threads)
{
	struct subject_cache *c = cache(32);
	struct race r[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		r[i] = (struct race){ .c = c, .id = i, .wrong = 0 };
		ck_assert_int_eq(pthread_create(&th[i], NULL, race_main, &r[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(r[i].wrong, 0);
	}
	ck_assert_uint_le(subject_cache_count(c), 32);
	subject_cache_free(c);
}
END_TEST

static Suite *subject_cache_suite(void)
{
	Suite *s = suite_create("subject_cache");
	TCase *tc = tcase_create("cache");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_subject_cache_new_rejects);
	tcase_add_test(tc, test_subject_cache_get_hit_returns_cached_claims);
	tcase_add_test(tc, test_subject_cache_get_expires_at_exp);
	tcase_add_test(tc, test_subject_cache_advance_drops_all);
	tcase_add_test(tc, test_subject_cache_put_bound_holds);
	tcase_add_test(tc, test_subject_cache_put_evicts_least_recently_used);
	tcase_add_test(tc, test_subject_cache_digest_one_byte_differs);
	tcase_add_test(tc, test_subject_cache_concurrent_threads);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(subject_cache_suite());
}
