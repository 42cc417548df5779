/* dpop.h -- DPoP (RFC 9449): proofs of possession of the gateway's key at the
 * token exchange, at refresh, at the downstream-token exchange and at /proxy;
 * server nonces.  A grant bound to a key (cnf.jkt) is worth nothing without
 * a fresh proof signed by that key for the very request that carries it. */
#ifndef CS_DPOP_H
#define CS_DPOP_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include "cs_err.h"
#include "jws.h"

struct app;

#define DPOP_HEADER "DPoP"
#define DPOP_NONCE_HEADER "DPoP-Nonce"
#define DPOP_JTI_MAX 256
#define DPOP_NONCE_KEY_LEN 32
#define DPOP_NONCE_SLOT 300        /* a nonce is good for this slot and the next */
#define DPOP_NONCE_LEN 54          /* base64url of 8 bytes of slot + 32 of HMAC */

struct dpop_expect {
	const char *htm;               /* the request's method */
	const char *htu;               /* public_url + path, without query or fragment */
	const char *access_token;      /* presented with the proof: ath required; NULL: none */
	const unsigned char *nonce_key;/* non-NULL: a nonce of ours is required */
	int64_t now, window;           /* iat within [now - window, now + window] */
};

struct dpop_proof {                /* caller-owned; release with dpop_proof_clear() */
	char    jkt[JWS_JKT_LEN + 1];  /* RFC 7638 thumbprint of the proof's key */
	char   *jti;
	int64_t iat;
};
void dpop_proof_clear(struct dpop_proof *p);   /* NULL-safe */

enum dpop_verdict { DPOP_VALID = 0, DPOP_INVALID, DPOP_NEED_NONCE, DPOP_VERDICT__MAX };

/* Checks a DPoP proof JWT without the database (RFC 9449 §4.3): typ dpop+jwt;
 * alg ES256, PS256, EdDSA or Ed25519 (never HMAC or none); a jwk header that is a
 * public key of that algorithm (no private member) and verifies the
 * signature; jti a string of 1 to DPOP_JTI_MAX characters; htm equal to
 * e->htm; htu, without its query and fragment, equal to e->htu; iat within
 * e->window of e->now; ath = base64url(SHA-256(access_token)) when a token is
 * presented; with e->nonce_key a nonce that dpop_nonce_valid accepts
 * (DPOP_NEED_NONCE when it is missing or stale).  *verdict always written;
 * *out only when it is DPOP_VALID; why says what failed.  An error only for
 * the server's own failures (CS_ENOMEM). */
enum cs_err dpop_proof_check(const char *proof, const struct dpop_expect *e,
    struct dpop_proof *out, enum dpop_verdict *verdict, char *why, size_t whylen) CS_MUST_CHECK;

/* A server nonce for now: the time slot and its HMAC under key, so any node
 * with the same master key accepts it (no shared state). */
enum cs_err dpop_nonce_make(const unsigned char key[DPOP_NONCE_KEY_LEN], int64_t now,
    char out[DPOP_NONCE_LEN + 1]) CS_MUST_CHECK;
/* true for a nonce made with key in now's slot or the one before. */
bool dpop_nonce_valid(const unsigned char key[DPOP_NONCE_KEY_LEN], const char *nonce, int64_t now);

/* A request as DPoP sees it (dpop_api.c fills it from the HTTP request):
 * plain values only, so that no HTTP type reaches this module. */
struct dpop_request {
	const char *method;            /* htm: "POST", "GET", ... */
	const char *path;              /* htu is public_url + path */
	const char *proof;             /* the DPoP header's value; NULL: none came */
	const char *actor;             /* whom a dpop.refused entry names ("gateway:<id>") */
	int64_t     now;
};
/* The bytes of a refusal's reason (a why buffer of this size never cuts one). */
#define DPOP_WHY_MAX 160

/* At the token endpoint (grant exchange, refresh).  No proof: DPOP_VALID with
 * *jkt "" (a bearer request), or refused when [gateway] require_dpop.  A
 * valid, unused proof for rq's method and public_url + path: DPOP_VALID and
 * *jkt its key's thumbprint.  Anything else: DPOP_INVALID or DPOP_NEED_NONCE,
 * why says why, and the refusal is audited (dpop.refused). */
enum dpop_verdict dpop_at_token(struct app *app, const struct dpop_request *rq,
    char jkt[JWS_JKT_LEN + 1], char *why, size_t whylen);

/* For a grant presented back (downstream-token exchange, /proxy): a grant
 * without cnf.jkt passes; a bound one needs a valid, unused DPoP proof for
 * rq's method and URL, with ath over grant, signed by the key the grant names.
 * Refused: DPOP_INVALID or DPOP_NEED_NONCE, why says why, audited. */
enum dpop_verdict dpop_check_grant(struct app *app, const struct dpop_request *rq,
    const json_t *claims, const char *grant, char *why, size_t whylen);

/* Audits a refusal only the caller can see (a refresh token bound to another
 * key) as dpop.refused: "METHOD path: why", the path left out when too long
 * (audit_refusal_detail), in a transaction of its own. */
void dpop_refused(struct app *app, const struct dpop_request *rq, const char *why);

#endif
