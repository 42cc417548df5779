/* seal.h -- authenticated encryption of values at rest under the master key.
 * AES-256-GCM, a fresh random 96-bit nonce per seal, a key derived per purpose
 * by HKDF-SHA-256 from the master key.  The master key never leaves this module
 * except as derived keys; every buffer that held key or plaintext is wiped. */
#ifndef CS_SEAL_H
#define CS_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <openssl/types.h>
#include "cs_err.h"

/* OpenSSL's algorithms, each fetched once for the process and kept (never
 * freed): a fetch by name looks it up in OpenSSL's provider store under its
 * lock, which at every digest, link or seal cost every request that made
 * one.  NULL when it cannot be fetched (out of memory), and tried again at
 * the next call. */
const EVP_MD *alg_sha256(void);
EVP_MAC *alg_hmac(void);
EVP_KDF *alg_hkdf(void);
const EVP_CIPHER *alg_aes256gcm(void);

/* SHA-256 of the n bytes at p, with the implementation fetched from OpenSSL
 * once (a fetch at every call was most of a short input's cost); false, out
 * zeroed, when it could not be computed. */
bool sha256_bytes(const void *p, size_t n, unsigned char out[32]);
/* SHA-256 of s (for storing a secret's hash); zeros when it could not be. */
void sha256_str(const char *s, unsigned char out[32]);

#define MASTER_KEY_LEN 32
#define MASTER_KID_LEN 16        /* hex characters */

struct master_key {              /* caller-owned; wipe with master_key_clear() */
	unsigned char bytes[MASTER_KEY_LEN];
	char          kid[MASTER_KID_LEN + 1];  /* public id: hex of HMAC(key, "consentd master key id")[:8] */
};

/* Loads the master key: from env_b64 (standard Base64 of 32 bytes) when it is
 * non-NULL and non-empty, else from file (exactly 32 raw bytes, or Base64 of
 * them with optional trailing newline; the file must not be group/world
 * readable).  *out is written only on CS_OK. */
enum cs_err master_key_load(const char *file, const char *env_b64,
    struct master_key *out) CS_MUST_CHECK;
/* Writes 32 fresh random bytes to path, mode 0600, refusing to overwrite. */
enum cs_err master_key_create_file(const char *path) CS_MUST_CHECK;
void master_key_clear(struct master_key *k);   /* NULL-safe */

/* Seals pt under the key derived for purpose (a short constant such as
 * "signing-key" or "vault"), binding aad.  The blob is nonce || ciphertext || tag;
 * *blob is malloc'd.  Outputs written only on CS_OK. */
enum cs_err seal(const struct master_key *mk, const char *purpose,
    const void *aad, size_t aad_len, const void *pt, size_t pt_len,
    unsigned char **blob, size_t *blob_len) CS_MUST_CHECK;
/* Opens a blob; CS_ECRYPTO when it does not verify (wrong key, wrong aad,
 * truncated, altered).  *pt is malloc'd with a NUL after pt_len bytes; the caller
 * wipes it (OPENSSL_cleanse) before freeing. */
enum cs_err unseal(const struct master_key *mk, const char *purpose,
    const void *aad, size_t aad_len, const unsigned char *blob, size_t blob_len,
    unsigned char **pt, size_t *pt_len) CS_MUST_CHECK;

/* Derives a 32-byte key for purpose (the same HKDF as seal(): info =
 * "consentd seal v1 " + purpose) for uses other than sealing, such as the
 * audit chain's HMAC ("audit-chain").  Distinct purposes give independent
 * keys.  The caller wipes out (OPENSSL_cleanse); out written only on CS_OK. */
#define SEAL_DERIVED_KEY_LEN 32
enum cs_err seal_derive_key(const struct master_key *mk, const char *purpose,
    unsigned char out[SEAL_DERIVED_KEY_LEN]) CS_MUST_CHECK;

#endif
