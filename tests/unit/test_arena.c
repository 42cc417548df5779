/* test_arena.c -- request-lifetime memory: pieces aligned and inside their
 * block, the first block used before the heap, the cap never passed whatever
 * the size asked for, and everything wiped at clear. */
#include <stdint.h>
#include <string.h>

#include "testutil.h"
#include "arena.h"

static int aligned(const void *p)
{
	return (uintptr_t)p % ARENA_ALIGN == 0;
}

START_TEST(test_arena_first_block_used_first)
{
	unsigned char first[256];
	struct arena a;
	arena_init(&a, first, sizeof first, 1u << 20);
	unsigned char *p = arena_alloc(&a, 10), *q = arena_alloc(&a, 1);
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(q);
	ck_assert(p >= first && p + 10 <= first + sizeof first);
	ck_assert(q >= p + 10 && q + 1 <= first + sizeof first);   /* no overlap */
	ck_assert(aligned(p) && aligned(q));
	ck_assert_ptr_null(a.heap);
	arena_clear(&a);
}
END_TEST

START_TEST(test_arena_misaligned_first_block)
{
	_Alignas(16) unsigned char first[64];
	struct arena a;
	arena_init(&a, first + 3, sizeof first - 3, 4096);
	unsigned char *p = arena_alloc(&a, 1);
	ck_assert_ptr_nonnull(p);
	ck_assert(aligned(p));
	ck_assert(p >= first + 3 && p < first + sizeof first);
	/* A block too small to hold one aligned byte is no block at all. */
	arena_init(&a, first + 1, 8, 4096);
	ck_assert_ptr_null(a.first);
	p = arena_alloc(&a, 1);
	ck_assert_ptr_nonnull(p);
	ck_assert(p < first || p >= first + sizeof first);
	arena_clear(&a);
}
END_TEST

START_TEST(test_arena_spills_to_heap_and_back)
{
	unsigned char first[64];
	struct arena a;
	arena_init(&a, first, sizeof first, 1u << 20);
	unsigned char *small = arena_alloc(&a, 16);
	ck_assert(small >= first && small < first + sizeof first);
	unsigned char *big = arena_alloc(&a, 100);       /* past the first block */
	ck_assert_ptr_nonnull(big);
	ck_assert(big < first || big >= first + sizeof first);
	ck_assert(aligned(big));
	memset(big, 0xab, 100);
	unsigned char *huge = arena_alloc(&a, 3 * ARENA_HEAP_BLOCK);   /* a block of its own */
	ck_assert_ptr_nonnull(huge);
	memset(huge, 0xcd, 3 * ARENA_HEAP_BLOCK);
	ck_assert_uint_eq(big[99], 0xab);                 /* untouched by the next piece */
	arena_clear(&a);
	ck_assert_ptr_null(a.heap);
	ck_assert_uint_eq(a.total, 0);
	/* After a clear the first block serves again. */
	unsigned char *again = arena_alloc(&a, 16);
	ck_assert_ptr_eq(again, small);
	arena_clear(&a);
}
END_TEST

START_TEST(test_arena_no_first_block)
{
	struct arena a;
	arena_init(&a, NULL, 0, 1u << 16);
	char *s = arena_strdup(&a, "hello");
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s, "hello");
	ck_assert(aligned(s));
	arena_clear(&a);
	arena_clear(&a);                                 /* twice is harmless */
	arena_clear(NULL);
}
END_TEST

START_TEST(test_arena_cap_refuses_and_changes_nothing)
{
	unsigned char first[64];
	struct arena a;
	arena_init(&a, first, sizeof first, 64);
	ck_assert_ptr_nonnull(arena_alloc(&a, 48));
	size_t total = a.total, used = a.first_used;
	ck_assert_ptr_null(arena_alloc(&a, 17));          /* 48 + 32 > 64 */
	ck_assert_uint_eq(a.total, total);
	ck_assert_uint_eq(a.first_used, used);
	ck_assert_ptr_null(a.heap);
	ck_assert_ptr_nonnull(arena_alloc(&a, 16));       /* exactly to the cap */
	ck_assert_ptr_null(arena_alloc(&a, 0));           /* even one byte is past it */
	arena_clear(&a);
}
END_TEST

START_TEST(test_arena_huge_sizes_refused)
{
	struct arena a;
	arena_init(&a, NULL, 0, SIZE_MAX);
	ck_assert_ptr_null(arena_alloc(&a, SIZE_MAX));
	ck_assert_ptr_null(arena_alloc(&a, SIZE_MAX - 1));
	ck_assert_ptr_null(arena_alloc(&a, SIZE_MAX - ARENA_ALIGN));
	ck_assert_ptr_null(arena_strndup(&a, "x", SIZE_MAX));
	ck_assert_ptr_null(a.heap);
	ck_assert_uint_eq(a.total, 0);
	arena_clear(&a);
	arena_init(&a, NULL, 0, 1u << 20);               /* the cap refuses before any malloc */
	ck_assert_ptr_null(arena_alloc(&a, SIZE_MAX / 2 + 1));
	ck_assert_ptr_null(arena_alloc(&a, (1u << 20) + 1));
	ck_assert_ptr_null(a.heap);
	arena_clear(&a);
}
END_TEST

START_TEST(test_arena_strndup_stops_at_nul_and_at_n)
{
	unsigned char first[128];
	struct arena a;
	arena_init(&a, first, sizeof first, 4096);
	char *s = arena_strndup(&a, "abcdef", 3);
	ck_assert_str_eq(s, "abc");
	char *t = arena_strndup(&a, "ab\0cd", 5);
	ck_assert_str_eq(t, "ab");
	const char unterminated[4] = { 'w', 'x', 'y', 'z' };
	char *u = arena_strndup(&a, unterminated, sizeof unterminated);
	ck_assert_str_eq(u, "wxyz");
	ck_assert_str_eq(arena_strndup(&a, "", 0), "");
	arena_clear(&a);
}
END_TEST

/* Request data holds credentials: a clear leaves none of it in the caller's
 * block. */
START_TEST(test_arena_clear_wipes_first_block)
{
	unsigned char first[128];
	struct arena a;
	memset(first, 0x11, sizeof first);
	arena_init(&a, first, sizeof first, 4096);
	char *s = arena_strdup(&a, "Basic c2VjcmV0");
	ck_assert_ptr_nonnull(s);
	size_t off = (size_t)((unsigned char *)s - first);
	arena_clear(&a);
	for (size_t i = 0; i < 15; i++)
		ck_assert_uint_eq(first[off + i], 0);
}
END_TEST

static Suite *arena_suite(void)
{
	Suite *s = suite_create("arena");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_arena_first_block_used_first);
	tcase_add_test(tc, test_arena_misaligned_first_block);
	tcase_add_test(tc, test_arena_spills_to_heap_and_back);
	tcase_add_test(tc, test_arena_no_first_block);
	tcase_add_test(tc, test_arena_cap_refuses_and_changes_nothing);
	tcase_add_test(tc, test_arena_huge_sizes_refused);
	tcase_add_test(tc, test_arena_strndup_stops_at_nul_and_at_n);
	tcase_add_test(tc, test_arena_clear_wipes_first_block);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(arena_suite());
}
