/* store_keys.h -- the SQL of the signing keys (migration 0001): jwt.c and
 * keys_cli.c own the rules (rotation, revocation); this only moves rows.  The
 * private key travels sealed (seal.h): no clear key ever reaches the store. */
#ifndef CS_STORE_KEYS_H
#define CS_STORE_KEYS_H

#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"
#include "store.h"

/* Read from the store, a key's strings are one block (block; kid, alg and
 * master_kid point into it): store_key_clear frees that block and the sealed
 * blob, never a string field.  A key filled for store_key_insert leaves block
 * NULL. */
struct store_key {               /* caller-owned; release with store_key_clear() */
	char          *block;        /* the one allocation kid, alg and master_kid point into */
	char          *kid;
	char          *alg;          /* "ES256" */
	int64_t        created_at;   /* UTC seconds */
	int64_t        sign_after;   /* signs from this time on */
	int64_t        retired_at;   /* 0 = still current; a later key replaced it */
	int64_t        revoked_at;   /* 0 = not revoked */
	char          *master_kid;   /* which master key sealed it */
	unsigned char *sealed;       /* seal.h blob of the private JWK JSON */
	size_t         sealed_len;
};
void store_key_clear(struct store_key *k);            /* NULL-safe */
void store_keys_free(struct store_key *ks, size_t n); /* NULL-safe */
/* CS_EEXIST when the kid is taken; CS_EINVAL when a field is missing. */
enum cs_err store_key_insert(struct store_conn *c, const struct store_key *k) CS_MUST_CHECK;
/* Every key not revoked, oldest first.  *out is NULL and *n 0 when none. */
enum cs_err store_keys_list(struct store_conn *c, struct store_key **out, size_t *n) CS_MUST_CHECK;
/* Set once: CS_ENOENT when the kid is unknown or already revoked. */
enum cs_err store_key_set_retired(struct store_conn *c, const char *kid, int64_t at) CS_MUST_CHECK;
enum cs_err store_key_set_revoked(struct store_conn *c, const char *kid, int64_t at) CS_MUST_CHECK;

#endif
