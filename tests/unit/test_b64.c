/* test_b64.c -- base64url, the one copy (b64.c): RFC 4648 §10's vectors in
 * the URL alphabet, the caps on both sides, and the input a decoder must
 * refuse (padding, '+', '/', a length no text can have).  Lenient and
 * canonical decoding differ only in the unused low bits of the last
 * character, as cjose's decoder and jwt.c's did. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "b64.h"

static const struct { const char *raw, *enc; } vectors[] = {
	{ "", "" }, { "f", "Zg" }, { "fo", "Zm8" }, { "foo", "Zm9v" },
	{ "foob", "Zm9vYg" }, { "fooba", "Zm9vYmE" }, { "foobar", "Zm9vYmFy" },
};

START_TEST(test_b64_encode_rfc4648_vectors)
{
	char out[16];
	for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
		size_t n = strlen(vectors[i].raw);
		ck_assert_int_eq(b64url_encode(vectors[i].raw, n, out, sizeof out), CS_OK);
		ck_assert_str_eq(out, vectors[i].enc);
		ck_assert_uint_eq(strlen(out), B64URL_LEN(n));
	}
}
END_TEST

START_TEST(test_b64_encode_url_alphabet)
{
	static const unsigned char raw[] = { 0xfb, 0xff, 0xbf };
	char out[8];
	ck_assert_int_eq(b64url_encode(raw, sizeof raw, out, sizeof out), CS_OK);
	ck_assert_str_eq(out, "-_-_");
}
END_TEST

START_TEST(test_b64_encode_cap_exact_and_short)
{
	unsigned char raw[32];
	char out[44];
	memset(raw, 0xa5, sizeof raw);
	ck_assert_int_eq(b64url_encode(raw, sizeof raw, out, 44), CS_OK);   /* 43 and the NUL */
	ck_assert_uint_eq(strlen(out), 43);
	ck_assert_int_eq(b64url_encode(raw, sizeof raw, out, 43), CS_ETOOBIG);
	ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(test_b64_append_matches_encode)
{
	struct buf b;
	char out[16];
	buf_init(&b, 64);
	ck_assert_int_eq(b64url_append(&b, "foobar!", 7), CS_OK);
	ck_assert_int_eq(b64url_encode("foobar!", 7, out, sizeof out), CS_OK);
	ck_assert_str_eq(b.data, out);
	buf_clear(&b);
	buf_init(&b, 4);
	ck_assert_int_eq(b64url_append(&b, "foobar!", 7), CS_ETOOBIG);
	buf_clear(&b);
}
END_TEST

START_TEST(test_b64_decode_round_trip)
{
	unsigned char out[16];
	size_t n = 99;
	for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
		const char *e = vectors[i].enc;
		ck_assert_int_eq(b64url_decode(e, strlen(e), out, sizeof out, &n), CS_OK);
		ck_assert_uint_eq(n, strlen(vectors[i].raw));
		ck_assert_mem_eq(out, vectors[i].raw, n);
		ck_assert_int_eq(b64url_decode_canonical(e, strlen(e), out, sizeof out, &n), CS_OK);
	}
}
END_TEST

START_TEST(test_b64_decode_refuses_bad_input)
{
	static const char *const bad[] = { "Zg==", "Zm9v+A", "Zm9v/A", "Zm 9", "Z", "Zm9vY",
		"Zm\n8", "Zm8=" };
	unsigned char out[16];
	size_t n = 77;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_assert_int_eq(b64url_decode(bad[i], strlen(bad[i]), out, sizeof out, &n), CS_EINVAL);
		ck_assert_int_eq(b64url_valid(bad[i], strlen(bad[i])), false);
	}
	ck_assert_uint_eq(n, 77);                 /* written only on CS_OK */
	ck_assert_int_eq(b64url_valid("", 0), false);
	ck_assert_int_eq(b64url_valid("Zm8", 3), true);
	/* A NUL inside the given length is no base64url character. */
	ck_assert_int_eq(b64url_decode("Zm\0v", 4, out, sizeof out, &n), CS_EINVAL);
}
END_TEST

START_TEST(test_b64_decode_cap)
{
	unsigned char out[6];
	size_t n = 0;
	ck_assert_int_eq(b64url_decode("Zm9vYmFy", 8, out, 6, &n), CS_OK);
	ck_assert_uint_eq(n, 6);
	ck_assert_int_eq(b64url_decode("Zm9vYmFy", 8, out, 5, &n), CS_ETOOBIG);
}
END_TEST

START_TEST(test_b64_decode_unused_bits)
{
	unsigned char out[4];
	size_t n = 0;
	/* "Zh": the last character's two unused bits set ("Zg" is canonical). */
	ck_assert_int_eq(b64url_decode("Zh", 2, out, sizeof out, &n), CS_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(out[0], 'f');
	ck_assert_int_eq(b64url_decode_canonical("Zh", 2, out, sizeof out, &n), CS_EINVAL);
	ck_assert_int_eq(b64url_decode_canonical("Zm9", 3, out, sizeof out, &n), CS_EINVAL);
	ck_assert_int_eq(b64url_decode_canonical("Zm8", 3, out, sizeof out, &n), CS_OK);
}
END_TEST

START_TEST(test_b64_decode_alloc_terminates)
{
	unsigned char *p = NULL;
	size_t n = 0;
	ck_assert_int_eq(b64url_decode_alloc("eyJhIjoxfQ", 10, &p, &n), CS_OK);
	ck_assert_uint_eq(n, 7);
	ck_assert_str_eq((char *)p, "{\"a\":1}");
	free(p);
	p = NULL;
	ck_assert_int_eq(b64url_decode_alloc("e=", 2, &p, &n), CS_EINVAL);
	ck_assert_ptr_null(p);
}
END_TEST

/* The ids of consents, requests, approvals and vault records: 22 characters
 * of the alphabet, never "eyJ" (audit.c refuses what looks like a JWT), and
 * fresh each time. */
START_TEST(test_b64_random_id_shape)
{
	char a[B64URL_ID_LEN + 1], b[B64URL_ID_LEN + 1];
	for (int i = 0; i < 200; i++) {
		ck_assert_int_eq(b64url_random_id(a), CS_OK);
		ck_assert_uint_eq(strlen(a), B64URL_ID_LEN);
		ck_assert(b64url_valid(a, strlen(a)));
		ck_assert_ptr_null(strstr(a, "eyJ"));
	}
	ck_assert_int_eq(b64url_random_id(b), CS_OK);
	ck_assert_str_ne(a, b);
}
END_TEST

static Suite *b64_suite(void)
{
	Suite *s = suite_create("b64");
	TCase *tc = tcase_create("b64");
	tcase_add_test(tc, test_b64_encode_rfc4648_vectors);
	tcase_add_test(tc, test_b64_encode_url_alphabet);
	tcase_add_test(tc, test_b64_encode_cap_exact_and_short);
	tcase_add_test(tc, test_b64_append_matches_encode);
	tcase_add_test(tc, test_b64_decode_round_trip);
	tcase_add_test(tc, test_b64_decode_refuses_bad_input);
	tcase_add_test(tc, test_b64_decode_cap);
	tcase_add_test(tc, test_b64_decode_unused_bits);
	tcase_add_test(tc, test_b64_decode_alloc_terminates);
	tcase_add_test(tc, test_b64_random_id_shape);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(b64_suite());
}
