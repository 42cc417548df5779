/* seal.c -- AES-256-GCM sealing of values at rest under keys derived from the
 * master key, and loading/creating the master key.  It must never hand out the
 * master key or partial plaintext of a blob that failed to verify. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "seal.h"
#include "log.h"

#define SEAL_NONCE_LEN 12
#define SEAL_TAG_LEN   16
#define SEAL_KEY_LEN   32
#define SEAL_INFO_PREFIX "consentd seal v1 "
#define SEAL_PURPOSE_MAX 64
#define MASTER_FILE_MAX 256          /* a key file is 32 bytes or ~45 characters */
#define MASTER_KID_LABEL "consentd master key id"

/* --- OpenSSL's algorithms, fetched once (seal.h) ------------------------- */

static pthread_mutex_t algs_mu = PTHREAD_MUTEX_INITIALIZER;
static void *_Atomic sha256_alg, *_Atomic hmac_alg, *_Atomic hkdf_alg, *_Atomic gcm_alg;

static void *fetch_sha256(void) { return EVP_MD_fetch(NULL, "SHA256", NULL); }
static void *fetch_hmac(void) { return EVP_MAC_fetch(NULL, "HMAC", NULL); }
static void *fetch_hkdf(void) { return EVP_KDF_fetch(NULL, "HKDF", NULL); }
static void *fetch_gcm(void) { return EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL); }

/* *slot, fetched at its first use and kept; a fetch that failed (out of
 * memory) is tried again at the next call, never remembered. */
static void *fetched(void *_Atomic *slot, void *(*fetch)(void))
{
	void *p = atomic_load(slot);
	if (p == NULL) {
		pthread_mutex_lock(&algs_mu);
		if ((p = atomic_load(slot)) == NULL && (p = fetch()) != NULL)
			atomic_store(slot, p);
		pthread_mutex_unlock(&algs_mu);
	}
	return p;
}

const EVP_MD *alg_sha256(void) { return fetched(&sha256_alg, fetch_sha256); }
EVP_MAC *alg_hmac(void) { return fetched(&hmac_alg, fetch_hmac); }
EVP_KDF *alg_hkdf(void) { return fetched(&hkdf_alg, fetch_hkdf); }
const EVP_CIPHER *alg_aes256gcm(void) { return fetched(&gcm_alg, fetch_gcm); }

bool sha256_bytes(const void *p, size_t n, unsigned char out[32])
{
	unsigned int len = 0;
	const EVP_MD *md = alg_sha256();
	if (md != NULL && EVP_Digest(p, n, out, &len, md, NULL) == 1 && len == 32)
		return true;
	memset(out, 0, 32);
	return false;
}

void sha256_str(const char *s, unsigned char out[32])
{
	(void)sha256_bytes(s, strlen(s), out);
}

/* Derived keys remembered, by master key and purpose: one HKDF per
 * purpose rather than one per seal and unseal (a release of a provider
 * token unseals it).  They are worth what the master key is worth, which
 * the process holds anyway; master_key_clear wipes those of the key it
 * wipes, and a slot taken again is wiped first. */
#define DERIVED_SLOTS 8
static struct derived {
	bool          used;
	unsigned char mk[MASTER_KEY_LEN];
	char          purpose[SEAL_PURPOSE_MAX + 1];
	unsigned char key[SEAL_KEY_LEN];
} derived[DERIVED_SLOTS];
static size_t derived_next;
static pthread_mutex_t derived_mu = PTHREAD_MUTEX_INITIALIZER;

static bool derived_get(const struct master_key *mk, const char *purpose,
    unsigned char out[SEAL_KEY_LEN])
{
	bool hit = false;
	pthread_mutex_lock(&derived_mu);
	for (size_t i = 0; i < DERIVED_SLOTS && !hit; i++) {
		const struct derived *d = &derived[i];
		if (d->used && strcmp(d->purpose, purpose) == 0 &&
		    CRYPTO_memcmp(d->mk, mk->bytes, MASTER_KEY_LEN) == 0) {
			memcpy(out, d->key, SEAL_KEY_LEN);
			hit = true;
		}
	}
	pthread_mutex_unlock(&derived_mu);
	return hit;
}

static void derived_put(const struct master_key *mk, const char *purpose,
    const unsigned char key[SEAL_KEY_LEN])
{
	pthread_mutex_lock(&derived_mu);
	struct derived *d = &derived[derived_next++ % DERIVED_SLOTS];
	OPENSSL_cleanse(d, sizeof *d);
	memcpy(d->mk, mk->bytes, MASTER_KEY_LEN);
	memcpy(d->purpose, purpose, strlen(purpose) + 1);    /* <= SEAL_PURPOSE_MAX: checked */
	memcpy(d->key, key, SEAL_KEY_LEN);
	d->used = true;
	pthread_mutex_unlock(&derived_mu);
}

/* Derives the AES key for purpose: HKDF-SHA-256(ikm = master key, no salt,
 * info = "consentd seal v1 " + purpose).  The caller wipes out. */
static enum cs_err derive_key(const struct master_key *mk, const char *purpose,
    unsigned char out[SEAL_KEY_LEN])
{
	enum cs_err e = CS_ECRYPTO;
	EVP_KDF *hkdf;
	EVP_KDF_CTX *kctx = NULL;
	char info[sizeof SEAL_INFO_PREFIX + SEAL_PURPOSE_MAX];
	size_t plen;

	if (purpose == NULL || (plen = strlen(purpose)) == 0 || plen > SEAL_PURPOSE_MAX)
		return CS_EINVAL;
	if (derived_get(mk, purpose, out))
		return CS_OK;
	memcpy(info, SEAL_INFO_PREFIX, sizeof SEAL_INFO_PREFIX - 1);
	memcpy(info + sizeof SEAL_INFO_PREFIX - 1, purpose, plen);
	size_t info_len = sizeof SEAL_INFO_PREFIX - 1 + plen;

	if ((hkdf = alg_hkdf()) == NULL || (kctx = EVP_KDF_CTX_new(hkdf)) == NULL)
		goto out;
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY,
		    (void *)mk->bytes, MASTER_KEY_LEN),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, info_len),
		OSSL_PARAM_construct_end(),
	};
	if (EVP_KDF_derive(kctx, out, SEAL_KEY_LEN, params) != 1)
		goto out;
	derived_put(mk, purpose, out);
	e = CS_OK;
out:
	EVP_KDF_CTX_free(kctx);
	return e;
}

enum cs_err seal_derive_key(const struct master_key *mk, const char *purpose,
    unsigned char out[SEAL_DERIVED_KEY_LEN])
{
	unsigned char key[SEAL_KEY_LEN];
	enum cs_err e;

	if (mk == NULL || out == NULL)
		return CS_EINVAL;
	e = derive_key(mk, purpose, key);
	if (e == CS_OK)
		memcpy(out, key, SEAL_DERIVED_KEY_LEN);
	OPENSSL_cleanse(key, sizeof key);
	return e;
}

enum cs_err seal(const struct master_key *mk, const char *purpose,
    const void *aad, size_t aad_len, const void *pt, size_t pt_len,
    unsigned char **blob, size_t *blob_len)
{
	enum cs_err e;
	unsigned char key[SEAL_KEY_LEN];
	unsigned char *b = NULL;
	EVP_CIPHER_CTX *ctx = NULL;
	const EVP_CIPHER *cipher;
	int n = 0;

	if (mk == NULL || blob == NULL || blob_len == NULL ||
	    (aad == NULL && aad_len > 0) || (pt == NULL && pt_len > 0))
		return CS_EINVAL;
	if (aad_len > INT_MAX || pt_len > INT_MAX - SEAL_NONCE_LEN - SEAL_TAG_LEN)
		return CS_ETOOBIG;
	e = derive_key(mk, purpose, key);
	if (e != CS_OK)
		goto out;
	e = CS_ENOMEM;
	size_t total = SEAL_NONCE_LEN + pt_len + SEAL_TAG_LEN;
	b = malloc(total);
	if (b == NULL)
		goto out;
	e = CS_ECRYPTO;
	/* SECURITY: a fresh random 96-bit nonce for every seal; GCM is broken
	 * by nonce reuse under one key. */
	if (RAND_bytes(b, SEAL_NONCE_LEN) != 1)
		goto out;
	ctx = EVP_CIPHER_CTX_new();
	if (ctx == NULL)
		goto out;
	if ((cipher = alg_aes256gcm()) == NULL ||
	    EVP_EncryptInit_ex2(ctx, cipher, key, b, NULL) != 1)
		goto out;
	if (aad_len > 0 && EVP_EncryptUpdate(ctx, NULL, &n, aad, (int)aad_len) != 1)
		goto out;
	if (pt_len > 0) {
		if (EVP_EncryptUpdate(ctx, b + SEAL_NONCE_LEN, &n, pt, (int)pt_len) != 1 ||
		    (size_t)n != pt_len)
			goto out;
	}
	if (EVP_EncryptFinal_ex(ctx, b + SEAL_NONCE_LEN + pt_len, &n) != 1 || n != 0)
		goto out;
	if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, SEAL_TAG_LEN,
	    b + SEAL_NONCE_LEN + pt_len) != 1)
		goto out;
	*blob = b;
	*blob_len = total;
	b = NULL;
	e = CS_OK;
out:
	OPENSSL_cleanse(key, sizeof key);
	EVP_CIPHER_CTX_free(ctx);
	free(b);
	return e;
}

enum cs_err unseal(const struct master_key *mk, const char *purpose,
    const void *aad, size_t aad_len, const unsigned char *blob, size_t blob_len,
    unsigned char **pt, size_t *pt_len)
{
	enum cs_err e;
	unsigned char key[SEAL_KEY_LEN];
	unsigned char *p = NULL;
	size_t ct_len = 0;
	EVP_CIPHER_CTX *ctx = NULL;
	const EVP_CIPHER *cipher;
	int n = 0;

	if (mk == NULL || pt == NULL || pt_len == NULL ||
	    (aad == NULL && aad_len > 0) || (blob == NULL && blob_len > 0))
		return CS_EINVAL;
	if (blob_len < SEAL_NONCE_LEN + SEAL_TAG_LEN)
		return CS_ECRYPTO;
	if (aad_len > INT_MAX || blob_len > INT_MAX)
		return CS_ECRYPTO;
	ct_len = blob_len - SEAL_NONCE_LEN - SEAL_TAG_LEN;
	e = derive_key(mk, purpose, key);
	if (e != CS_OK)
		goto out;
	e = CS_ENOMEM;
	p = malloc(ct_len + 1);
	if (p == NULL)
		goto out;
	e = CS_ECRYPTO;
	ctx = EVP_CIPHER_CTX_new();
	if (ctx == NULL)
		goto out;
	if ((cipher = alg_aes256gcm()) == NULL ||
	    EVP_DecryptInit_ex2(ctx, cipher, key, blob, NULL) != 1)
		goto out;
	if (aad_len > 0 && EVP_DecryptUpdate(ctx, NULL, &n, aad, (int)aad_len) != 1)
		goto out;
	if (ct_len > 0) {
		if (EVP_DecryptUpdate(ctx, p, &n, blob + SEAL_NONCE_LEN, (int)ct_len) != 1 ||
		    (size_t)n != ct_len)
			goto out;
	}
	if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, SEAL_TAG_LEN,
	    (void *)(blob + SEAL_NONCE_LEN + ct_len)) != 1)
		goto out;
	/* SECURITY: the tag decides; nothing decrypted leaves before it verified. */
	if (EVP_DecryptFinal_ex(ctx, p + ct_len, &n) != 1 || n != 0)
		goto out;
	p[ct_len] = '\0';
	*pt = p;
	*pt_len = ct_len;
	p = NULL;
	e = CS_OK;
out:
	OPENSSL_cleanse(key, sizeof key);
	EVP_CIPHER_CTX_free(ctx);
	if (p != NULL) {
		OPENSSL_cleanse(p, ct_len + 1);
		free(p);
	}
	return e;
}

/* The public id of a master key: lowercase hex of the first 8 bytes of
 * HMAC-SHA-256(key, "consentd master key id"). */
static enum cs_err master_kid(struct master_key *k)
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mac_len = 0;
	static const char hex[] = "0123456789abcdef";

	if (HMAC(EVP_sha256(), k->bytes, MASTER_KEY_LEN,
	    (const unsigned char *)MASTER_KID_LABEL, sizeof MASTER_KID_LABEL - 1,
	    mac, &mac_len) == NULL || mac_len < MASTER_KID_LEN / 2)
		return CS_ECRYPTO;
	for (size_t i = 0; i < MASTER_KID_LEN / 2; i++) {
		k->kid[2 * i] = hex[mac[i] >> 4];
		k->kid[2 * i + 1] = hex[mac[i] & 0x0f];
	}
	k->kid[MASTER_KID_LEN] = '\0';
	OPENSSL_cleanse(mac, sizeof mac);
	return CS_OK;
}

static int is_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Decodes standard Base64 text (surrounding whitespace ignored, '=' padding
 * optional) that must hold exactly MASTER_KEY_LEN bytes. */
static enum cs_err decode_b64_key(const char *s, size_t len, unsigned char out[MASTER_KEY_LEN])
{
	enum cs_err e = CS_EINVAL;
	char in[48];
	unsigned char tmp[36];

	while (len > 0 && is_space((unsigned char)s[0])) {
		s++;
		len--;
	}
	while (len > 0 && is_space((unsigned char)s[len - 1]))
		len--;
	/* 32 bytes are 43 characters plus one '=' of padding. */
	if (len == 44 && s[43] == '=')
		len = 43;
	if (len != 43)
		goto out;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '+' || c == '/'))
			goto out;
	}
	memcpy(in, s, 43);
	in[43] = '=';
	in[44] = '\0';
	/* EVP_DecodeBlock counts the padding as decoded zero bytes: 44 chars -> 33. */
	if (EVP_DecodeBlock(tmp, (const unsigned char *)in, 44) != 33 || tmp[32] != 0)
		goto out;
	memcpy(out, tmp, MASTER_KEY_LEN);
	e = CS_OK;
out:
	OPENSSL_cleanse(in, sizeof in);
	OPENSSL_cleanse(tmp, sizeof tmp);
	return e;
}

/* Opens the master key file into *fd: a regular file (SECURITY) that
 * neither group nor others can read.  Logs why not. */
static enum cs_err key_file_open(const char *file, int *fd)
{
	struct stat st;

	*fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (*fd < 0) {
		int err = errno;
		log_msg(LOG_ERROR, "cannot open master key file %s: %s%s", file, strerror(err),
		    err == ENOENT ? " (create one with `consentd keygen FILE`)" : "");
		return err == ENOENT ? CS_ENOENT : err == EACCES ? CS_EPERM : CS_EIO;
	}
	if (fstat(*fd, &st) != 0)
		return CS_EIO;
	if (!S_ISREG(st.st_mode)) {
		log_msg(LOG_ERROR, "master key file %s is not a regular file", file);
		return CS_EINVAL;
	}
	/* SECURITY: a master key others can read is no secret; refuse it. */
	if ((st.st_mode & 077) != 0) {
		log_msg(LOG_ERROR, "master key file %s is readable by group or others "
		    "(mode %03o); chmod 600 it", file, (unsigned)(st.st_mode & 0777));
		return CS_EPERM;
	}
	return CS_OK;
}

/* Reads the whole key file (at most MASTER_FILE_MAX bytes) into raw, its
 * length into *got. */
static enum cs_err key_file_read(int fd, const char *file, unsigned char raw[MASTER_FILE_MAX + 1],
    size_t *got)
{
	*got = 0;
	for (;;) {
		ssize_t r = read(fd, raw + *got, MASTER_FILE_MAX + 1 - *got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return CS_EIO;
		}
		if (r == 0)
			break;
		*got += (size_t)r;
		if (*got == MASTER_FILE_MAX + 1)
			break;
	}
	if (*got > MASTER_FILE_MAX) {
		log_msg(LOG_ERROR, "master key file %s is too long for a key", file);
		return CS_EINVAL;
	}
	return CS_OK;
}

enum cs_err master_key_load(const char *file, const char *env_b64, struct master_key *out)
{
	enum cs_err e = CS_EINVAL;
	struct master_key k;
	unsigned char raw[MASTER_FILE_MAX + 1];
	size_t got = 0;
	int fd = -1;

	memset(&k, 0, sizeof k);
	if (out == NULL)
		return CS_EINVAL;
	if (env_b64 != NULL && env_b64[0] != '\0') {
		e = decode_b64_key(env_b64, strlen(env_b64), k.bytes);
		if (e != CS_OK)
			log_msg(LOG_ERROR, "CONSENTD_KEYS_MASTER_KEY is not the Base64 of 32 bytes");
		goto derive;
	}
	if (file == NULL || file[0] == '\0') {
		log_msg(LOG_ERROR, "no master key: set [keys] master_key_file or CONSENTD_KEYS_MASTER_KEY");
		goto out;
	}
	if ((e = key_file_open(file, &fd)) != CS_OK ||
	    (e = key_file_read(fd, file, raw, &got)) != CS_OK)
		goto out;
	if (got == MASTER_KEY_LEN) {
		memcpy(k.bytes, raw, MASTER_KEY_LEN);
		e = CS_OK;
	} else {
		e = decode_b64_key((const char *)raw, got, k.bytes);
		if (e != CS_OK)
			log_msg(LOG_ERROR, "master key file %s holds %zu bytes: neither 32 raw bytes "
			    "nor the Base64 of 32 bytes (too short a key is refused)", file, got);
	}
derive:
	if (e != CS_OK)
		goto out;
	e = master_kid(&k);
	if (e != CS_OK)
		goto out;
	memcpy(out, &k, sizeof k);
out:
	if (fd >= 0)
		close(fd);
	OPENSSL_cleanse(raw, sizeof raw);
	OPENSSL_cleanse(&k, sizeof k);
	return e;
}

enum cs_err master_key_create_file(const char *path)
{
	enum cs_err e = CS_EIO;
	unsigned char key[MASTER_KEY_LEN];
	int fd = -1;
	int created = 0;
	size_t done = 0;

	if (path == NULL || path[0] == '\0')
		return CS_EINVAL;
	if (RAND_bytes(key, sizeof key) != 1) {
		e = CS_ECRYPTO;
		goto out;
	}
	/* SECURITY: O_EXCL: never overwrite an existing key (that would lose every
	 * sealed secret); 0600 from the first byte on. */
	fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		e = errno == EEXIST ? CS_EEXIST : errno == EACCES ? CS_EPERM : CS_EIO;
		goto out;
	}
	created = 1;
	if (fchmod(fd, 0600) != 0)
		goto out;
	while (done < sizeof key) {
		ssize_t w = write(fd, key + done, sizeof key - done);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			goto out;
		}
		done += (size_t)w;
	}
	if (fsync(fd) != 0)
		goto out;
	e = CS_OK;
out:
	if (fd >= 0 && close(fd) != 0 && e == CS_OK)
		e = CS_EIO;
	if (e != CS_OK && created)
		unlink(path);
	OPENSSL_cleanse(key, sizeof key);
	return e;
}

void master_key_clear(struct master_key *k)
{
	if (k == NULL)
		return;
	pthread_mutex_lock(&derived_mu);
	for (size_t i = 0; i < DERIVED_SLOTS; i++)
		if (derived[i].used && CRYPTO_memcmp(derived[i].mk, k->bytes, MASTER_KEY_LEN) == 0)
			OPENSSL_cleanse(&derived[i], sizeof derived[i]);
	pthread_mutex_unlock(&derived_mu);
	OPENSSL_cleanse(k, sizeof *k);
}
