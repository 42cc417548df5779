/* jwt.h -- consentd's own signing keys and JWS, through cjose.
 * The only module that touches private key bytes.  Algorithms are pinned:
 * ES256 only, for signing and verifying consentd's own tokens. */
#ifndef CS_JWT_H
#define CS_JWT_H

#include <stdint.h>
#include <jansson.h>
#include "cs_err.h"
#include "seal.h"
#include "store.h"

struct keyring;   /* an immutable snapshot of the signing keys */

/* Loads every unrevoked key from the store, unsealing private keys with mk.
 * If there is no key that may sign at `now`, generates an ES256 key, seals it
 * and stores it (one transaction) first.  *out written only on CS_OK. */
enum cs_err keyring_load(struct store_conn *c, const struct master_key *mk,
    int64_t now, struct keyring **out) CS_MUST_CHECK;
void keyring_free(struct keyring *kr);   /* NULL-safe; wipes private keys */

/* The JWKS document {"keys":[...]} with kid, kty, crv, x, y, use "sig",
 * alg "ES256" for every published key; never a private member.  *json malloc'd. */
enum cs_err keyring_jwks(const struct keyring *kr, char **json) CS_MUST_CHECK;
/* The kid that signs now; NULL when none. */
const char *keyring_signing_kid(const struct keyring *kr);

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
