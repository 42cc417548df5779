/* jwt.h -- consentd's own signing keys and JWS: signed through cjose, verified
 * through jws.c (JWS_ALGS_OWN).
 * The only module that touches private key bytes.  Algorithms are pinned:
 * ES256 only, for signing and verifying consentd's own tokens. */
#ifndef CS_JWT_H
#define CS_JWT_H

#include <stdint.h>
#include <jansson.h>
#include "cs_err.h"
#include "seal.h"
#include "store.h"
#include "store_keys.h"

struct keyring;   /* an immutable snapshot of the signing keys */

/* How long a key stays published after it stopped signing, beyond the longest
 * lifetime of a token it signed: a running server notices a newer key only
 * at its next reload (every 60 s), so it may go on signing that long. */
#define KEYRING_RELOAD_SLACK 60

/* A key's place in its life at a given time (see keyring_classify). */
enum key_state {
	KEY_SIGNING,            /* the one key that signs now; published */
	KEY_UPCOMING,           /* sign_after is still ahead; published, does not sign yet */
	KEY_RETIRED_PUBLISHED,  /* replaced, but tokens it signed may still be alive */
	KEY_RETIRED,            /* replaced long enough ago: neither published nor accepted */
	KEY_REVOKED,            /* withdrawn: never published, never verifies */
	KEY_STATE__MAX
};

struct key_status {
	enum key_state state;
	int64_t        stopped_at;    /* when it stopped signing; 0 when it has not */
	int64_t        unpublish_at;  /* when it leaves the JWKS; 0 when not scheduled */
};

/* Classifies the n rows ks at now.  The signing key is the unrevoked key with
 * the largest sign_after <= now (the newest row on a tie) whose retired_at is
 * 0 or still ahead.  Any other key with sign_after <= now stopped signing when
 * a later key started (its sign_after) or at its retired_at, whichever came
 * first; it stays published until token_ttl + KEYRING_RELOAD_SLACK after that.
 * consentd never writes retired_at itself (rotation is derived from sign_after
 * alone), but honours one set by hand.  Revoking a key makes the newest
 * remaining key with sign_after <= now sign again.
 * out[i] is the status of ks[i]; out must hold n entries. */
void keyring_classify(const struct store_key *ks, size_t n, int64_t now,
    int64_t token_ttl, struct key_status *out);
/* "signing", "upcoming", "retired-published", "retired" or "revoked". */
const char *key_state_name(enum key_state s);

/* Loads the published keys from the store (keyring_classify with token_ttl,
 * the longest lifetime of a token consentd signs), unsealing their private keys
 * with mk; keys no longer published are not unsealed and do not verify.
 * If there is no key that may sign at `now`, generates an ES256 key, seals it
 * and stores it (one transaction) first.  *out written only on CS_OK. */
enum cs_err keyring_load(struct store_conn *c, const struct master_key *mk,
    int64_t now, int64_t token_ttl, struct keyring **out) CS_MUST_CHECK;
void keyring_free(struct keyring *kr);   /* NULL-safe; wipes private keys */

/* The JWKS document {"keys":[...]} with kid, kty, crv, x, y, use "sig",
 * alg "ES256" for every published key; never a private member.  *json malloc'd. */
enum cs_err keyring_jwks(const struct keyring *kr, char **json) CS_MUST_CHECK;
/* What identifies the set of keys a ring verifies with: the SHA-256 of its
 * JWKS document.  Two rings with equal fingerprints accept exactly the same
 * signatures; adding, retiring or revoking a key changes it, a reload that
 * found the same keys does not.  KEYRING_FP_LEN bytes; NULL for a NULL ring. */
#define KEYRING_FP_LEN 32
const unsigned char *keyring_fingerprint(const struct keyring *kr);
/* The kid that signs now; NULL when none. */
const char *keyring_signing_kid(const struct keyring *kr);

/* Generates an ES256 key, seals it under mk and stores it (one transaction)
 * with created_at = now and the given sign_after: published by every ring
 * loaded from then on, signing from sign_after.  *kid (malloc'd, the RFC 7638
 * thumbprint) written only on CS_OK. */
enum cs_err keyring_generate_key(struct store_conn *c, const struct master_key *mk,
    int64_t now, int64_t sign_after, char **kid) CS_MUST_CHECK;
/* Revokes the key kid at now (one transaction).  CS_ENOENT when no unrevoked
 * key has that kid; CS_EPERM when kid signs now and no other key is ready to
 * take over, i.e. no other key that may sign at now and is published already
 * (clients may fetch the JWKS only every few minutes).  On CS_OK, *next_signer
 * (if not NULL) is the kid that signs after the revocation (malloc'd). */
enum cs_err keyring_revoke_key(struct store_conn *c, const char *kid, int64_t now,
    int64_t token_ttl, char **next_signer) CS_MUST_CHECK;

/* Signs claims with the current key: header {"alg":"ES256","typ":typ,"kid":...}.
 * *compact is malloc'd. */
enum cs_err jwt_sign(const struct keyring *kr, const char *typ, json_t *claims,
    char **compact) CS_MUST_CHECK;
/* Verifies a compact JWS made by jwt_sign: exactly three non-empty segments,
 * header alg == ES256 and typ == expected_typ, kid known in kr, signature valid.
 * Does not check claims' times; *claims (new reference) written only on CS_OK. */
enum cs_err jwt_verify(const struct keyring *kr, const char *expected_typ,
    const char *compact, json_t **claims) CS_MUST_CHECK;

#endif
