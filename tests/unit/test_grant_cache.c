/* test_grant_cache.c -- the verified-grant cache on its own: the bound, the
 * key-set and exp rules, exact-token keys, and many threads at once (run
 * under ASan).  Real keyrings from a real SQLite file; grant.c's use of the
 * cache (revocation, times, DPoP on a hit) is in test_grant.c. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "testutil.h"
#include "buf.h"
#include "grant_cache.h"
#include "jwt.h"
#include "seal.h"
#include "store.h"

#define NOW 1700000000
#define TTL 300

static char *dir;
static struct store *st, *st2;
static struct keyring *kr, *kr_other;

static void setup(void)
{
	struct master_key mk, mk2;
	grant_cache_clear();
	dir = tu_tmpdir();
	char *db = tu_path(dir, "t.db"), *db2 = tu_path(dir, "other.db");
	ck_assert_int_eq(store_open(db, &st), CS_OK);
	ck_assert_int_eq(store_open(db2, &st2), CS_OK);
	memset(&mk, 0x11, sizeof mk);
	memcpy(mk.kid, "00112233aabbccdd", MASTER_KID_LEN + 1);
	memset(&mk2, 0x22, sizeof mk2);
	memcpy(mk2.kid, "ffeeddccbbaa9988", MASTER_KID_LEN + 1);
	ck_assert_int_eq(keyring_load(store_conn(st), &mk, NOW, TTL, &kr), CS_OK);
	ck_assert_int_eq(keyring_load(store_conn(st2), &mk2, NOW, TTL, &kr_other), CS_OK);
	free(db);
	free(db2);
}

static void teardown(void)
{
	grant_cache_clear();
	keyring_free(kr);
	keyring_free(kr_other);
	store_close(st2);
	store_close(st);
	tu_rmdir(dir);
}

/* A token-shaped string for i, and claims naming i. */
static void tok(char out[64], size_t i)
{
	ck_assert_int_eq(str_fmt(out, 64, "eyJhbGciOiJFUzI1NiJ9.token-%zu.sig", i), CS_OK);
}

static json_t *claims_of(size_t i)
{
	json_t *c = json_pack("{s:I, s:s}", "n", (json_int_t)i, "iss", "https://c.example");
	ck_assert_ptr_nonnull(c);
	return c;
}

static void put(const struct keyring *ring, size_t i, int64_t exp)
{
	char t[64];
	json_t *c = claims_of(i);
	tok(t, i);
	grant_cache_put(ring, t, c, exp, NOW);
	json_decref(c);
}

/* CS_OK and the claims' n, or the error. */
static enum cs_err get(const struct keyring *ring, size_t i, int64_t now, json_int_t *n)
{
	char t[64];
	json_t *c = NULL;
	tok(t, i);
	enum cs_err e = grant_cache_get(ring, t, now, &c);
	if (e == CS_OK) {
		ck_assert_ptr_nonnull(c);
		*n = json_integer_value(json_object_get(c, "n"));
		json_decref(c);
	}
	return e;
}

START_TEST(test_grant_cache_get_put_roundtrip)
{
	json_int_t n = -1;
	ck_assert_int_eq(get(kr, 7, NOW, &n), CS_ENOENT);
	put(kr, 7, NOW + 100);
	ck_assert_int_eq(get(kr, 7, NOW + 1, &n), CS_OK);
	ck_assert_int_eq(n, 7);
	/* The caller owns what it gets: changing it changes nothing cached. */
	char t[64];
	json_t *c = NULL;
	tok(t, 7);
	ck_assert_int_eq(grant_cache_get(kr, t, NOW + 1, &c), CS_OK);
	json_object_set_new(c, "active", json_true());
	json_decref(c);
	c = NULL;
	ck_assert_int_eq(grant_cache_get(kr, t, NOW + 1, &c), CS_OK);
	ck_assert_ptr_null(json_object_get(c, "active"));
	json_decref(c);
	/* Another token, a prefix of it, one byte more: misses. */
	ck_assert_int_eq(get(kr, 8, NOW + 1, &n), CS_ENOENT);
	t[strlen(t) - 1] = '\0';
	ck_assert_int_eq(grant_cache_get(kr, t, NOW + 1, &c), CS_ENOENT);
	ck_assert_int_eq(grant_cache_get(kr, NULL, NOW + 1, &c), CS_ENOENT);
}
END_TEST

/* SECURITY: never at or past the grant's exp; nothing put that is already
 * past it. */
START_TEST(test_grant_cache_exp_bounds_entry)
{
	json_int_t n = -1;
	put(kr, 1, NOW + 10);
	ck_assert_int_eq(get(kr, 1, NOW + 9, &n), CS_OK);
	ck_assert_int_eq(get(kr, 1, NOW + 10, &n), CS_ENOENT);
	ck_assert_int_eq(get(kr, 1, NOW + 10000, &n), CS_ENOENT);
	put(kr, 2, NOW);                                  /* exp == now: not remembered */
	ck_assert_int_eq(get(kr, 2, NOW - 1, &n), CS_ENOENT);
}
END_TEST

/* SECURITY: an entry answers only for the key set it was put under. */
START_TEST(test_grant_cache_other_keyring_misses)
{
	json_int_t n = -1;
	put(kr, 3, NOW + 100);
	ck_assert_int_eq(get(kr_other, 3, NOW + 1, &n), CS_ENOENT);
	ck_assert_int_eq(get(NULL, 3, NOW + 1, &n), CS_ENOENT);
	ck_assert_int_eq(get(kr, 3, NOW + 1, &n), CS_OK);
	/* Put again under the other set: that one answers, the first no more. */
	put(kr_other, 3, NOW + 100);
	ck_assert_int_eq(get(kr_other, 3, NOW + 1, &n), CS_OK);
	ck_assert_int_eq(get(kr, 3, NOW + 1, &n), CS_ENOENT);
}
END_TEST

/* The bound: three times the capacity put, at most the capacity held; a
 * newer entry displaces one that expires first, never the other way. */
START_TEST(test_grant_cache_bound_holds)
{
	struct grant_cache_stats s;
	json_int_t n = -1;
	for (size_t i = 0; i < 3 * GRANT_CACHE_CAPACITY; i++)
		put(kr, i, NOW + 100 + (int64_t)i);
	grant_cache_stats(&s);
	ck_assert_uint_le(s.entries, GRANT_CACHE_CAPACITY);
	ck_assert_uint_ge(s.entries, GRANT_CACHE_CAPACITY / 2);
	ck_assert_int_eq(get(kr, 3 * GRANT_CACHE_CAPACITY - 1, NOW + 1, &n), CS_OK);
	ck_assert_int_eq(n, 3 * GRANT_CACHE_CAPACITY - 1);
	/* Full sets: a newcomer that would expire first is not let in; one of
	 * another key set displaces the entries of the old one. */
	put(kr, 5 * GRANT_CACHE_CAPACITY, NOW + 50);
	ck_assert_int_eq(get(kr, 5 * GRANT_CACHE_CAPACITY, NOW + 1, &n), CS_ENOENT);
	put(kr_other, 5 * GRANT_CACHE_CAPACITY, NOW + 50);
	ck_assert_int_eq(get(kr_other, 5 * GRANT_CACHE_CAPACITY, NOW + 1, &n), CS_OK);
	grant_cache_clear();
	grant_cache_stats(&s);
	ck_assert_uint_eq(s.entries, 0);
}
END_TEST

/* Issue 34: 10,000 live grants (the introspection benchmark's), each put
 * once, are nearly all remembered: few fall in a set already full.  With
 * 2048 sets of 8 it forgot 2.2 % of them on average. */
START_TEST(test_grant_cache_holds_ten_thousand)
{
	struct grant_cache_stats s;
	json_int_t n = -1;
	size_t forgotten = 0;
	for (size_t i = 0; i < 10000; i++)
		put(kr, i, NOW + 300);
	for (size_t i = 0; i < 10000; i++)
		if (get(kr, i, NOW + 1, &n) != CS_OK)
			forgotten++;
	grant_cache_stats(&s);
	ck_assert_uint_eq(s.entries, 10000 - forgotten);
	ck_assert_msg(forgotten <= 100, "%zu of 10,000 live grants forgotten", forgotten);
}
END_TEST

/* Threads putting, getting and clearing the same few tokens: every hit holds
 * the claims of its own token (ASan and UBSan watch the memory). */
#define CT_THREADS 6
#define CT_ROUNDS 4000
#define CT_TOKENS 64

static void *ct_worker(void *p)
{
	int *wrong = p;
	for (size_t r = 0; r < CT_ROUNDS; r++) {
		size_t i = (r * 7 + (size_t)(uintptr_t)wrong) % CT_TOKENS;
		json_int_t n = -1;
		char t[64];
		json_t *c = NULL;
		tok(t, i);
		enum cs_err e = grant_cache_get(r % 2 ? kr : kr_other, t, NOW + 1, &c);
		if (e == CS_OK) {
			n = json_integer_value(json_object_get(c, "n"));
			if (n != (json_int_t)i)
				(*wrong)++;
			json_decref(c);
		} else if (e != CS_ENOENT) {
			(*wrong)++;
		}
		if (e != CS_OK) {
			c = claims_of(i);
			grant_cache_put(r % 2 ? kr : kr_other, t, c, NOW + 100, NOW);
			json_decref(c);
		}
		if (r % 997 == 0)
			grant_cache_clear();
	}
	return NULL;
}

START_TEST(test_grant_cache_concurrent_threads)
{
	pthread_t th[CT_THREADS];
	int wrong[CT_THREADS];
	struct grant_cache_stats s;
	for (size_t t = 0; t < CT_THREADS; t++) {
		wrong[t] = 0;
		ck_assert_int_eq(pthread_create(&th[t], NULL, ct_worker, &wrong[t]), 0);
	}
	for (size_t t = 0; t < CT_THREADS; t++) {
		ck_assert_int_eq(pthread_join(th[t], NULL), 0);
		ck_assert_int_eq(wrong[t], 0);
	}
	grant_cache_stats(&s);
	ck_assert_uint_gt(s.hits, 0);
	ck_assert_uint_le(s.entries, CT_TOKENS);
}
END_TEST

static Suite *grant_cache_suite(void)
{
	Suite *s = suite_create("grant_cache");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_grant_cache_get_put_roundtrip);
	tcase_add_test(tc, test_grant_cache_exp_bounds_entry);
	tcase_add_test(tc, test_grant_cache_other_keyring_misses);
	tcase_add_test(tc, test_grant_cache_bound_holds);
	tcase_add_test(tc, test_grant_cache_holds_ten_thousand);
	tcase_add_test(tc, test_grant_cache_concurrent_threads);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(grant_cache_suite());
}
