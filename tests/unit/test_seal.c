/* test_seal.c -- sealing round trips, every tampering case, and master key
 * loading/creation.  A blob must never open under anything but its own key,
 * purpose and additional data. */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#include "buf.h"
#include "testutil.h"
#include "seal.h"

static void fixed_key(struct master_key *mk, unsigned char fill)
{
	memset(mk, 0, sizeof *mk);
	memset(mk->bytes, fill, sizeof mk->bytes);
	memcpy(mk->kid, "0123456789abcdef", MASTER_KID_LEN + 1);
}

static void write_file(const char *path, const void *data, size_t n, mode_t mode)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, mode);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fchmod(fd, mode), 0);
	ck_assert_int_eq((int)write(fd, data, n), (int)n);
	close(fd);
}

static void b64(const unsigned char *in, size_t n, char *out)
{
	EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

START_TEST(test_seal_roundtrip_ok)
{
	struct master_key mk;
	unsigned char *blob = NULL, *pt = NULL;
	size_t blob_len = 0, pt_len = 0;
	const char msg[] = "the refresh token";

	fixed_key(&mk, 0x42);
	ck_assert_int_eq(seal(&mk, "vault", "aad", 3, msg, strlen(msg), &blob, &blob_len), CS_OK);
	ck_assert_uint_eq(blob_len, 12 + strlen(msg) + 16);
	ck_assert(memmem(blob, blob_len, msg, strlen(msg)) == NULL);
	ck_assert_int_eq(unseal(&mk, "vault", "aad", 3, blob, blob_len, &pt, &pt_len), CS_OK);
	ck_assert_uint_eq(pt_len, strlen(msg));
	ck_assert_str_eq((char *)pt, msg);
	OPENSSL_cleanse(pt, pt_len);
	free(pt);
	free(blob);
}
END_TEST

static void expect_fail(const struct master_key *mk, const char *purpose, const char *aad,
    const unsigned char *blob, size_t blob_len)
{
	unsigned char *pt = (unsigned char *)"sentinel";
	size_t pt_len = 12345;
	ck_assert_int_eq(unseal(mk, purpose, aad, strlen(aad), blob, blob_len, &pt, &pt_len),
	    CS_ECRYPTO);
	ck_assert_str_eq((char *)pt, "sentinel");       /* outputs untouched */
	ck_assert_uint_eq(pt_len, 12345);
}

START_TEST(test_seal_wrong_aad_fails)
{
	struct master_key mk;
	unsigned char *blob = NULL;
	size_t blob_len = 0;
	fixed_key(&mk, 1);
	ck_assert_int_eq(seal(&mk, "vault", "rec1", 4, "x", 1, &blob, &blob_len), CS_OK);
	expect_fail(&mk, "vault", "rec2", blob, blob_len);
	expect_fail(&mk, "vault", "", blob, blob_len);
	free(blob);
}
END_TEST

START_TEST(test_seal_wrong_purpose_fails)
{
	struct master_key mk;
	unsigned char *blob = NULL;
	size_t blob_len = 0;
	fixed_key(&mk, 1);
	ck_assert_int_eq(seal(&mk, "vault", "a", 1, "secret", 6, &blob, &blob_len), CS_OK);
	expect_fail(&mk, "signing-key", "a", blob, blob_len);
	free(blob);
}
END_TEST

START_TEST(test_seal_wrong_master_fails)
{
	struct master_key mk, other;
	unsigned char *blob = NULL;
	size_t blob_len = 0;
	fixed_key(&mk, 1);
	fixed_key(&other, 2);
	ck_assert_int_eq(seal(&mk, "vault", "a", 1, "secret", 6, &blob, &blob_len), CS_OK);
	expect_fail(&other, "vault", "a", blob, blob_len);
	free(blob);
}
END_TEST

/* HKDF-SHA-256(master key, info "consentd seal v1 " + purpose), computed here
 * apart from seal.c: what seal_derive_key must give. */
static void hkdf_here(const struct master_key *mk, const char *purpose,
    unsigned char out[SEAL_DERIVED_KEY_LEN])
{
	char info[128];
	ck_assert_int_eq(str_fmt(info, sizeof info, "consentd seal v1 %s", purpose), CS_OK);
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	ck_assert_ptr_nonnull(kdf);
	EVP_KDF_CTX *kc = EVP_KDF_CTX_new(kdf);
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)mk->bytes,
		    MASTER_KEY_LEN),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, strlen(info)),
		OSSL_PARAM_construct_end(),
	};
	ck_assert_int_eq(EVP_KDF_derive(kc, out, SEAL_DERIVED_KEY_LEN, params), 1);
	EVP_KDF_CTX_free(kc);
	EVP_KDF_free(kdf);
}

/* The derived keys seal.c remembers are exactly HKDF's, per master key and
 * purpose, whatever the order, past its slots (eight), and after a master
 * key was wiped and loaded again: keys that share a public id (fixed_key
 * gives every key the same kid) never share a derived key. */
START_TEST(test_seal_derived_keys_exact)
{
	static const char *const purposes[] = { "vault", "signing-key", "audit-chain", "session",
		"client-secret" };
	struct master_key mks[3];
	unsigned char got[SEAL_DERIVED_KEY_LEN], want[SEAL_DERIVED_KEY_LEN];
	for (int i = 0; i < 3; i++)
		fixed_key(&mks[i], (unsigned char)(0x40 + i));
	for (int round = 0; round < 3; round++)
		for (size_t p = 0; p < 5; p++)
			for (int i = 0; i < 3; i++) {
				int k = (i + round) % 3;
				ck_assert_int_eq(seal_derive_key(&mks[k], purposes[p], got), CS_OK);
				hkdf_here(&mks[k], purposes[p], want);
				ck_assert_msg(memcmp(got, want, sizeof got) == 0, "key %d, purpose %s, round %d",
				    k, purposes[p], round);
			}
	/* Wiped, then the same key again: still its own derivation. */
	master_key_clear(&mks[1]);
	fixed_key(&mks[1], 0x41);
	ck_assert_int_eq(seal_derive_key(&mks[1], "vault", got), CS_OK);
	hkdf_here(&mks[1], "vault", want);
	ck_assert(memcmp(got, want, sizeof got) == 0);
	/* A blob sealed under one opens under none of the others, in either order. */
	unsigned char *blob = NULL, *pt = NULL;
	size_t blob_len = 0, pt_len = 0;
	ck_assert_int_eq(seal(&mks[0], "vault", "a", 1, "secret", 6, &blob, &blob_len), CS_OK);
	ck_assert_int_eq(unseal(&mks[2], "vault", "a", 1, blob, blob_len, &pt, &pt_len), CS_ECRYPTO);
	ck_assert_int_eq(unseal(&mks[0], "session", "a", 1, blob, blob_len, &pt, &pt_len),
	    CS_ECRYPTO);
	ck_assert_int_eq(unseal(&mks[0], "vault", "a", 1, blob, blob_len, &pt, &pt_len), CS_OK);
	ck_assert_mem_eq(pt, "secret", 6);
	free(pt);
	free(blob);
	for (int i = 0; i < 3; i++)
		master_key_clear(&mks[i]);
}
END_TEST

START_TEST(test_seal_truncated_fails)
{
	struct master_key mk;
	unsigned char *blob = NULL;
	size_t blob_len = 0;
	fixed_key(&mk, 1);
	ck_assert_int_eq(seal(&mk, "vault", "a", 1, "secret", 6, &blob, &blob_len), CS_OK);
	for (size_t n = 0; n < blob_len; n++)
		expect_fail(&mk, "vault", "a", blob, n);
	free(blob);
}
END_TEST

START_TEST(test_seal_bitflip_fails)
{
	struct master_key mk;
	unsigned char *blob = NULL;
	size_t blob_len = 0;
	fixed_key(&mk, 7);
	ck_assert_int_eq(seal(&mk, "vault", "aad", 3, "abcd", 4, &blob, &blob_len), CS_OK);
	for (size_t bit = 0; bit < blob_len * 8; bit++) {
		blob[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		expect_fail(&mk, "vault", "aad", blob, blob_len);
		blob[bit / 8] ^= (unsigned char)(1u << (bit % 8));
	}
	/* and the untouched blob still opens */
	unsigned char *pt = NULL;
	size_t pt_len = 0;
	ck_assert_int_eq(unseal(&mk, "vault", "aad", 3, blob, blob_len, &pt, &pt_len), CS_OK);
	free(pt);
	free(blob);
}
END_TEST

START_TEST(test_seal_empty_plaintext_ok)
{
	struct master_key mk;
	unsigned char *blob = NULL, *pt = NULL;
	size_t blob_len = 0, pt_len = 99;
	fixed_key(&mk, 3);
	ck_assert_int_eq(seal(&mk, "vault", NULL, 0, NULL, 0, &blob, &blob_len), CS_OK);
	ck_assert_uint_eq(blob_len, 28);
	ck_assert_int_eq(unseal(&mk, "vault", NULL, 0, blob, blob_len, &pt, &pt_len), CS_OK);
	ck_assert_uint_eq(pt_len, 0);
	ck_assert_ptr_nonnull(pt);
	ck_assert_int_eq(pt[0], '\0');
	free(pt);
	free(blob);
}
END_TEST

START_TEST(test_seal_nonce_fresh)
{
	struct master_key mk;
	unsigned char *a = NULL, *b = NULL;
	size_t al = 0, bl = 0;
	fixed_key(&mk, 3);
	ck_assert_int_eq(seal(&mk, "vault", "x", 1, "same", 4, &a, &al), CS_OK);
	ck_assert_int_eq(seal(&mk, "vault", "x", 1, "same", 4, &b, &bl), CS_OK);
	ck_assert_uint_eq(al, bl);
	ck_assert_int_ne(memcmp(a, b, 12), 0);
	ck_assert_int_ne(memcmp(a, b, al), 0);
	free(a);
	free(b);
}
END_TEST

START_TEST(test_seal_bad_args_einval)
{
	struct master_key mk;
	unsigned char *blob = NULL;
	size_t blob_len = 0;
	fixed_key(&mk, 3);
	ck_assert_int_eq(seal(&mk, "", "x", 1, "a", 1, &blob, &blob_len), CS_EINVAL);
	ck_assert_int_eq(seal(&mk, NULL, "x", 1, "a", 1, &blob, &blob_len), CS_EINVAL);
	ck_assert_int_eq(seal(NULL, "vault", "x", 1, "a", 1, &blob, &blob_len), CS_EINVAL);
	ck_assert_ptr_null(blob);
}
END_TEST

/* --- master key -------------------------------------------------------- */

static const unsigned char key32[32] = {
	1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
	17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32 };

START_TEST(test_seal_master_raw_file_ok)
{
	char *d = tu_tmpdir(), *p = tu_path(d, "master.key");
	struct master_key mk;
	write_file(p, key32, 32, 0600);
	ck_assert_int_eq(master_key_load(p, NULL, &mk), CS_OK);
	ck_assert_int_eq(memcmp(mk.bytes, key32, 32), 0);
	ck_assert_uint_eq(strlen(mk.kid), MASTER_KID_LEN);
	for (size_t i = 0; i < MASTER_KID_LEN; i++)
		ck_assert(strchr("0123456789abcdef", mk.kid[i]) != NULL);
	master_key_clear(&mk);
	free(p);
	tu_rmdir(d);
}
END_TEST

START_TEST(test_seal_master_b64_file_ok)
{
	char *d = tu_tmpdir(), *p = tu_path(d, "master.key");
	char text[64];
	struct master_key a, b;
	b64(key32, 32, text);
	size_t n = strlen(text);
	text[n] = '\n';
	write_file(p, text, n + 1, 0400);
	ck_assert_int_eq(master_key_load(p, NULL, &a), CS_OK);
	ck_assert_int_eq(memcmp(a.bytes, key32, 32), 0);
	/* the same key as raw bytes: the same kid (stable) */
	write_file(p, key32, 32, 0600);
	ck_assert_int_eq(master_key_load(p, "", &b), CS_OK);
	ck_assert_str_eq(a.kid, b.kid);
	free(p);
	tu_rmdir(d);
}
END_TEST

START_TEST(test_seal_master_env_wins)
{
	char *d = tu_tmpdir(), *p = tu_path(d, "master.key");
	unsigned char other[32];
	char text[64], padded[80];
	struct master_key mk;
	memset(other, 0xaa, sizeof other);
	write_file(p, key32, 32, 0600);
	b64(other, 32, text);
	ck_assert_int_eq(str_fmt(padded, sizeof padded, "  %s \n", text), CS_OK);
	ck_assert_int_eq(master_key_load(p, padded, &mk), CS_OK);
	ck_assert_int_eq(memcmp(mk.bytes, other, 32), 0);
	/* env wins even when the file is missing */
	ck_assert_int_eq(master_key_load("/nonexistent/master.key", text, &mk), CS_OK);
	ck_assert_int_eq(memcmp(mk.bytes, other, 32), 0);
	free(p);
	tu_rmdir(d);
}
END_TEST

START_TEST(test_seal_master_wrong_length_refused)
{
	char *d = tu_tmpdir(), *p = tu_path(d, "master.key");
	char text[64];
	struct master_key mk;
	memset(&mk, 0x5a, sizeof mk);
	struct master_key before = mk;
	write_file(p, key32, 31, 0600);
	ck_assert_int_ne(master_key_load(p, NULL, &mk), CS_OK);
	unsigned char k33[33] = { 0 };
	memcpy(k33, key32, 32);
	write_file(p, k33, 33, 0600);
	ck_assert_int_ne(master_key_load(p, NULL, &mk), CS_OK);
	b64(key32, 31, text);
	ck_assert_int_ne(master_key_load(NULL, text, &mk), CS_OK);
	b64(key32, 30, text);   /* 40 characters: neither raw (32) nor 44 */
	write_file(p, text, strlen(text), 0600);
	ck_assert_int_ne(master_key_load(p, NULL, &mk), CS_OK);
	ck_assert_int_ne(master_key_load(NULL, "not base64 at all!!", &mk), CS_OK);
	ck_assert_int_eq(memcmp(&mk, &before, sizeof mk), 0);   /* untouched */
	free(p);
	tu_rmdir(d);
}
END_TEST

START_TEST(test_seal_master_mode_refused)
{
	char *d = tu_tmpdir(), *p = tu_path(d, "master.key");
	struct master_key mk;
	write_file(p, key32, 32, 0644);
	ck_assert_int_eq(master_key_load(p, NULL, &mk), CS_EPERM);
	ck_assert_int_eq(chmod(p, 0640), 0);
	ck_assert_int_eq(master_key_load(p, NULL, &mk), CS_EPERM);
	ck_assert_int_eq(chmod(p, 0604), 0);
	ck_assert_int_eq(master_key_load(p, NULL, &mk), CS_EPERM);
	free(p);
	tu_rmdir(d);
}
END_TEST

START_TEST(test_seal_master_missing_fails)
{
	struct master_key mk;
	ck_assert_int_ne(master_key_load("/nonexistent/dir/master.key", NULL, &mk), CS_OK);
	ck_assert_int_ne(master_key_load(NULL, NULL, &mk), CS_OK);
	ck_assert_int_ne(master_key_load("", "", &mk), CS_OK);
}
END_TEST

START_TEST(test_seal_master_create_ok)
{
	char *d = tu_tmpdir(), *p = tu_path(d, "master.key");
	struct master_key a, b;
	struct stat st;
	ck_assert_int_eq(master_key_create_file(p), CS_OK);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	ck_assert_int_eq((int)st.st_size, 32);
	ck_assert_int_eq(master_key_load(p, NULL, &a), CS_OK);
	/* refuses to overwrite; the key stays the same */
	ck_assert_int_eq(master_key_create_file(p), CS_EEXIST);
	ck_assert_int_eq(master_key_load(p, NULL, &b), CS_OK);
	ck_assert_int_eq(memcmp(a.bytes, b.bytes, 32), 0);
	ck_assert_str_eq(a.kid, b.kid);
	free(p);
	tu_rmdir(d);
}
END_TEST

static Suite *seal_suite(void)
{
	Suite *s = suite_create("seal");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_seal_roundtrip_ok);
	tcase_add_test(tc, test_seal_wrong_aad_fails);
	tcase_add_test(tc, test_seal_wrong_purpose_fails);
	tcase_add_test(tc, test_seal_wrong_master_fails);
	tcase_add_test(tc, test_seal_truncated_fails);
	tcase_add_test(tc, test_seal_bitflip_fails);
	tcase_add_test(tc, test_seal_empty_plaintext_ok);
	tcase_add_test(tc, test_seal_nonce_fresh);
	tcase_add_test(tc, test_seal_bad_args_einval);
	tcase_add_test(tc, test_seal_master_raw_file_ok);
	tcase_add_test(tc, test_seal_master_b64_file_ok);
	tcase_add_test(tc, test_seal_master_env_wins);
	tcase_add_test(tc, test_seal_master_wrong_length_refused);
	tcase_add_test(tc, test_seal_master_mode_refused);
	tcase_add_test(tc, test_seal_master_missing_fails);
	tcase_add_test(tc, test_seal_master_create_ok);
	tcase_add_test(tc, test_seal_derived_keys_exact);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(seal_suite());
}
