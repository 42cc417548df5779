/* grant_cache.h -- a bounded, process-wide cache of grant signatures already
 * verified, for introspection and the proxy (issue 15).  It remembers that a
 * token's ES256 signature verified under one key set, and the claims it
 * carried; never the token, and never that a grant is live. */
#ifndef CS_GRANT_CACHE_H
#define CS_GRANT_CACHE_H

#include <stdint.h>
#include <jansson.h>
#include "cs_err.h"
#include "jwt.h"

/* Entries at most: 1024 sets of 16, each set under its own lock (room for the
 * 10,000 distinct live grants of the introspection benchmark: with 2048 sets
 * of 8, 2.2 % of them fell in a full set and were verified again on every
 * call, which 16 ways make about 0.5 %, at the same bound; issue 34). */
#define GRANT_CACHE_CAPACITY 16384

/* The claims of token when exactly this token (same SHA-256) was put under a
 * ring with kr's fingerprint and its exp is after now.  *claims is a new
 * object the caller owns (and may change).  CS_ENOENT for a miss, so the
 * caller verifies the signature itself; CS_ENOMEM.  A hit says only that
 * jwt_verify(kr, "at+jwt", token) would succeed and return these claims:
 * times, revocation and consent are for the caller to check, every time. */
enum cs_err grant_cache_get(const struct keyring *kr, const char *token, int64_t now,
    json_t **claims) CS_MUST_CHECK;

/* Remembers that token verified under kr with claims, until exp (the
 * grant's).  Call only after jwt_verify(kr, "at+jwt", token) succeeded with
 * these very claims.  Best effort: on a full set it evicts the entry of an
 * older key set or past its exp, else the one expiring first (or keeps the
 * set as it is when the newcomer would expire first); on ENOMEM it
 * remembers nothing. */
void grant_cache_put(const struct keyring *kr, const char *token, json_t *claims,
    int64_t exp, int64_t now);

/* Drops every entry (tests, shutdown). */
void grant_cache_clear(void);

struct grant_cache_stats {
	uint64_t hits;        /* grant_cache_get answered CS_OK */
	uint64_t misses;      /* grant_cache_get answered CS_ENOENT: the caller verified */
	uint64_t entries;     /* held now */
};
void grant_cache_stats(struct grant_cache_stats *out);

#endif
