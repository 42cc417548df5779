/* subject_cache.h -- a bounded cache of subject tokens whose signature oidc.c
 * verified: SHA-256 of the token -> the claims it carried, until the token's
 * exp, for one IdP key set.  The token itself is never stored, and nothing
 * that failed validation is ever put here. */
#ifndef CS_SUBJECT_CACHE_H
#define CS_SUBJECT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "cs_err.h"

#define SUBJECT_CACHE_DIGEST  32      /* SHA-256 */
#define SUBJECT_CACHE_WAYS    4       /* entries per set; a set evicts its least recently used */
#define SUBJECT_CACHE_ENTRIES 4096    /* what oidc.c uses */

struct subject_cache;                 /* thread-safe: one mutex around every call */

/* A cache of capacity entries (a multiple of SUBJECT_CACHE_WAYS, at least one
 * set), empty, at key set generation 0.  *out written only on CS_OK. */
enum cs_err subject_cache_new(size_t capacity, struct subject_cache **out) CS_MUST_CHECK;
/* NULL-safe; drops every entry.  No thread may still use c. */
void subject_cache_free(struct subject_cache *c);

/* out = SHA-256 of the len bytes of token. */
enum cs_err subject_cache_digest(const struct subject_cache *c, const char *token, size_t len,
    unsigned char out[SUBJECT_CACHE_DIGEST]) CS_MUST_CHECK;

/* The claims remembered for digest under key set generation gen, when an
 * entry exists and now < its expires_at: *claims is then a new reference to
 * an object other threads share -- read it, never change it.  An entry whose
 * time is up is dropped.  A gen newer than the cache's drops every entry
 * first (see subject_cache_advance).  Digests are compared with CRYPTO_memcmp. */
bool subject_cache_get(struct subject_cache *c, const unsigned char digest[SUBJECT_CACHE_DIGEST],
    uint64_t gen, int64_t now, json_t **claims);

/* Remembers claims (a new reference is taken; the caller must not change the
 * object afterwards) for digest, verified under key set generation gen, until
 * expires_at.  Ignored when gen is older than the cache's (a key set has been
 * replaced since the caller verified) or expires_at <= now; a newer gen drops
 * every entry first.  A full set evicts its least recently used entry, so the
 * count never exceeds the capacity. */
void subject_cache_put(struct subject_cache *c, const unsigned char digest[SUBJECT_CACHE_DIGEST],
    uint64_t gen, int64_t now, int64_t expires_at, json_t *claims);

/* A new key set, generation gen, was installed: when gen is newer than the
 * cache's, every entry is dropped and only gen is accepted from then on. */
void subject_cache_advance(struct subject_cache *c, uint64_t gen);

/* How many entries are held (tests and metrics). */
size_t subject_cache_count(struct subject_cache *c);

#endif
