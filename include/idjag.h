/* idjag.h -- the claims of an Identity Assertion JWT Authorization Grant
 * (draft-ietf-oauth-identity-assertion-authz-grant; MCP's enterprise-managed
 * authorization extension, issue #30 item 6): what consentd checks once the
 * JWS signature verified against the configured enterprise IdP's keys.  The
 * token endpoint takes it as urn:ietf:params:oauth:grant-type:jwt-bearer.
 * Pure: the caller verifies the signature first, and records the jti as used
 * (single use) after these checks pass. */
#ifndef CS_IDJAG_H
#define CS_IDJAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"

#define IDJAG_TYP          "oauth-id-jag+jwt"
#define IDJAG_GRANT_TYPE   "urn:ietf:params:oauth:grant-type:jwt-bearer"
#define IDJAG_PROFILE      "urn:ietf:params:oauth:grant-profile:id-jag"
#define IDJAG_WHY_MAX      200
#define IDJAG_CLAIM_MAX    1024      /* bytes of any one string claim */
#define IDJAG_MAX_LIFETIME 300       /* seconds from iat to exp a grant may span */
#define IDJAG_LEEWAY       30        /* seconds of clock difference allowed */

/* What the grant must say, from the configuration and the request. */
struct idjag_expect {
	const char        *issuer;       /* the enterprise IdP's issuer, byte for byte */
	const char        *audience;     /* consentd's own issuer */
	const char        *client_id;    /* the client that authenticated at /token */
	const char *const *resources;    /* NULL-terminated: resources consentd protects */
	int64_t            now;
};

/* The checked claims; release with idjag_clear. */
struct idjag {
	char   *iss, *sub, *client_id, *jti;
	char   *resource;                /* NULL when the grant names none */
	char   *scope;                   /* NULL when absent */
	int64_t iat, exp;
};
void idjag_clear(struct idjag *g);   /* NULL-safe */

/* Checks the decoded header and payload (JSON text, header_len and
 * payload_len bytes) of a grant whose signature already verified: header
 * typ is IDJAG_TYP (case-insensitively, "application/" prefix allowed, RFC
 * 8725 §3.11); payload a JSON object without duplicate members with iss ==
 * issuer, aud == audience (a string, or an array of exactly that one
 * string), sub, client_id == the authenticated client, jti (each a non-empty
 * string of at most IDJAG_CLAIM_MAX bytes, no control characters), iat and
 * exp integers with iat <= now + leeway, exp > now - leeway, exp > iat and
 * exp - iat <= IDJAG_MAX_LIFETIME; resource, when present, one of resources
 * (MCP: the server's own Resource Identifier); scope, when present, a
 * string.  CS_OK with *out filled, or CS_EINVAL with why naming the failing
 * check (for invalid_grant's error_description), CS_ENOMEM. */
enum cs_err idjag_check(const char *header, size_t header_len, const char *payload,
    size_t payload_len, const struct idjag_expect *x, struct idjag *out, char *why,
    size_t whylen) CS_MUST_CHECK;

#endif
