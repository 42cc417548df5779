/* jws.h -- consentd's one JWS signature verifier: compact JWS that others
 * sign (the gateway's client assertions, DPoP proofs, the IdP's ID tokens)
 * and consentd's own (jwt.c), with public keys given as JWKs, through OpenSSL
 * EVP.  It never holds a private key: a JWK with a private member is refused.
 * Each use names its algorithm allowlist here, and nowhere else. */
#ifndef CS_JWS_H
#define CS_JWS_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include "cs_err.h"

/* The only algorithms any use accepts: asymmetric, never HMAC, never none.
 * cjose 0.6.2 (Debian 12) has no EdDSA, so all go through EVP directly. */
enum jws_alg { JWS_ES256 = 0, JWS_PS256, JWS_EDDSA, JWS_RS256, JWS_ALG__MAX };

/* An allowlist: a set of enum jws_alg, one bit each. */
typedef unsigned jws_algs;
#define JWS_ALG_BIT(a) (1u << (a))
/* SECURITY: the allowlists, one per use.  A token's header picks an
 * algorithm only from its use's list, and a key verifies only the algorithms
 * of that list that fit its type (and its JWK's own alg, when it names one). */
/* The gateway's client assertions (RFC 7523; client_auth.c). */
#define JWS_ALGS_CLIENT_ASSERTION \
	(JWS_ALG_BIT(JWS_ES256) | JWS_ALG_BIT(JWS_PS256) | JWS_ALG_BIT(JWS_EDDSA))
/* DPoP proofs (RFC 9449; dpop.c). */
#define JWS_ALGS_DPOP_PROOF \
	(JWS_ALG_BIT(JWS_ES256) | JWS_ALG_BIT(JWS_PS256) | JWS_ALG_BIT(JWS_EDDSA))
/* The IdP's ID tokens and the subject tokens it signs (oidc.c). */
#define JWS_ALGS_IDP_TOKEN \
	(JWS_ALG_BIT(JWS_RS256) | JWS_ALG_BIT(JWS_PS256) | JWS_ALG_BIT(JWS_ES256))
/* An enterprise IdP's ID-JAGs (idjag_grant.c; issue #30): the algorithms
 * enterprise IdPs sign with. */
#define JWS_ALGS_IDJAG (JWS_ALG_BIT(JWS_ES256) | JWS_ALG_BIT(JWS_RS256))
/* consentd's own tokens: grants, access and refresh tokens (jwt.c signs
 * them ES256 only). */
#define JWS_ALGS_OWN JWS_ALG_BIT(JWS_ES256)

#define JWS_MAX_COMPACT 16384   /* bytes of a compact JWS we look at */
#define JWS_JKT_LEN 43          /* base64url of a SHA-256 */

/* "ES256", "PS256", "EdDSA" or "RS256". */
const char *jws_alg_name(enum jws_alg a);
/* The algorithm called name; JWS_ALG__MAX for anything else (a use then
 * checks it against its list).
 * "Ed25519" (RFC 9864's fully specified name) is JWS_EDDSA, whose keys are
 * Ed25519 only. */
enum jws_alg jws_alg_parse(const char *name);
/* Every "alg" value the client-assertion and DPoP lists accept,
 * NULL-terminated, in the order the metadata advertises them: "ES256",
 * "PS256", "EdDSA", "Ed25519". */
extern const char *const jws_alg_names_accepted[];

struct jws_key {                 /* heap; release with jws_key_free() */
	void        *pkey;           /* EVP_PKEY *, public only */
	enum jws_alg alg;            /* the first algorithm of algs (for a key of
	                              * the gateway's lists, its only one) */
	jws_algs     algs;           /* every algorithm this key verifies */
	char        *kid;            /* NULL when the JWK has none */
	char         jkt[JWS_JKT_LEN + 1];   /* RFC 7638 thumbprint */
};

/* Imports the public JWK jwk for the use whose list is allow: kty EC with crv
 * P-256 (ES256), RSA of 2048 to 8192 bits (PS256, RS256) or OKP with crv
 * Ed25519 (EdDSA); the key verifies the algorithms of allow its type fits,
 * only the JWK's "alg" when it names one.  Refuses a JWK carrying a private or
 * symmetric member (d, p, q, dp, dq, qi, oth, k), a type allow has no
 * algorithm for, an "alg" outside allow or not the key type's, and points not
 * on the curve.  why says what was wrong.  *out written only on CS_OK. */
enum cs_err jws_key_from_jwk_for(const json_t *jwk, jws_algs allow, struct jws_key **out,
    char *why, size_t whylen) CS_MUST_CHECK;
/* jws_key_from_jwk_for with the gateway's list (JWS_ALGS_CLIENT_ASSERTION,
 * which is JWS_ALGS_DPOP_PROOF's too): one algorithm per key type. */
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
/* The same for the use whose list is allow (jws_keyset_parse: the gateway's). */
enum cs_err jws_keyset_parse_for(const char *json, jws_algs allow, struct jws_keyset **out,
    char *why, size_t whylen) CS_MUST_CHECK;
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
 * base64url segments, header and payload JSON objects, header alg in the use's
 * list allow (none, HS256 ... are CS_EINVAL), no "crit" header.  Checks no
 * signature.  *out written only on CS_OK. */
enum cs_err jws_parse(const char *compact, jws_algs allow, struct jws_parsed *out, char *why,
    size_t whylen) CS_MUST_CHECK;
void jws_parsed_clear(struct jws_parsed *p);   /* NULL-safe */
/* true when p's signature verifies under k and k verifies p's algorithm. */
bool jws_verify(const struct jws_parsed *p, const struct jws_key *k);
/* The verifier itself, which jws_verify calls: true when sig (sig_len bytes;
 * r || s for ES256) is k's signature with alg over the n bytes at input, and
 * alg is one k verifies. */
bool jws_verify_input(const struct jws_key *k, enum jws_alg alg, const void *input, size_t n,
    const unsigned char *sig, size_t sig_len);

#endif
