/* jws.h -- verifying compact JWS that others sign (the gateway's client
 * assertions, DPoP proofs) with public keys given as JWKs, through OpenSSL EVP.
 * It never holds a private key: a JWK with a private member is refused. */
#ifndef CS_JWS_H
#define CS_JWS_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include "cs_err.h"

/* The only algorithms accepted from outside: asymmetric, never HMAC, never none.
 * cjose 0.6.2 (Debian 12) has no EdDSA, so all three go through EVP directly. */
enum jws_alg { JWS_ES256 = 0, JWS_PS256, JWS_EDDSA, JWS_ALG__MAX };

#define JWS_MAX_COMPACT 16384   /* bytes of a compact JWS we look at */
#define JWS_JKT_LEN 43          /* base64url of a SHA-256 */

/* "ES256", "PS256" or "EdDSA". */
const char *jws_alg_name(enum jws_alg a);
/* The allowlisted algorithm called name; JWS_ALG__MAX for anything else.
 * "Ed25519" (RFC 9864's fully specified name) is JWS_EDDSA, whose keys are
 * Ed25519 only. */
enum jws_alg jws_alg_parse(const char *name);
/* Every "alg" value jws_alg_parse accepts, NULL-terminated, in the order the
 * metadata advertises them: "ES256", "PS256", "EdDSA", "Ed25519". */
extern const char *const jws_alg_names_accepted[];

struct jws_key {                 /* heap; release with jws_key_free() */
	void        *pkey;           /* EVP_PKEY *, public only */
	enum jws_alg alg;            /* the one algorithm this key verifies */
	char        *kid;            /* NULL when the JWK has none */
	char         jkt[JWS_JKT_LEN + 1];   /* RFC 7638 thumbprint */
};

/* Imports the public JWK jwk: kty EC with crv P-256 (ES256), RSA of at least
 * 2048 bits (PS256) or OKP with crv Ed25519 (EdDSA).  Refuses a JWK carrying a
 * private or symmetric member (d, p, q, dp, dq, qi, oth, k), an "alg" other than
 * the key type's, and points not on the curve.  why says what was wrong.
 * *out written only on CS_OK. */
enum cs_err jws_key_from_jwk(const json_t *jwk, struct jws_key **out, char *why,
    size_t whylen) CS_MUST_CHECK;
void jws_key_free(struct jws_key *k);   /* NULL-safe */

struct jws_keyset {              /* heap; release with jws_keyset_free() */
	struct jws_key **keys;
	size_t           n;
};
#define JWS_KEYSET_MAX 32
/* A JWKS document {"keys":[...]}: every key must import (use, when given, is
 * "sig"); at least one, at most JWS_KEYSET_MAX, kids unique. */
enum cs_err jws_keyset_parse(const char *json, struct jws_keyset **out, char *why,
    size_t whylen) CS_MUST_CHECK;
void jws_keyset_free(struct jws_keyset *ks);   /* NULL-safe */

struct jws_parsed {              /* caller-owned; release with jws_parsed_clear() */
	json_t        *header, *payload;   /* JSON objects */
	enum jws_alg   alg;
	char          *signing_input;      /* "header.payload" */
	size_t         signing_input_len;
	unsigned char *sig;
	size_t         sig_len;
};
/* Splits a compact JWS: at most JWS_MAX_COMPACT bytes, exactly three non-empty
 * base64url segments, header and payload JSON objects, header alg one of the
 * allowlist (none, HS256 ... are CS_EINVAL), no "crit" header.  Checks no
 * signature.  *out written only on CS_OK. */
enum cs_err jws_parse(const char *compact, struct jws_parsed *out, char *why,
    size_t whylen) CS_MUST_CHECK;
void jws_parsed_clear(struct jws_parsed *p);   /* NULL-safe */
/* true when p's signature verifies under k and k's algorithm is p's. */
bool jws_verify(const struct jws_parsed *p, const struct jws_key *k);

#endif
