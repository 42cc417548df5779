/* oidc.h -- the upstream OpenID Provider: discovery, the JWKS cache, ID-token
 * and subject-token validation, and the authorization-code exchange.
 * Tokens are verified only against this provider's keys, with a pinned
 * algorithm allowlist; nothing here trusts a token's header on its own. */
#ifndef CS_OIDC_H
#define CS_OIDC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "buf.h"
#include "cs_err.h"

#define OIDC_MAX_JWT 16384

struct oidc_provider;            /* thread-safe; one per upstream issuer */

struct oidc_meta {               /* immutable once discovery succeeded */
	char *issuer;
	char *authorization_endpoint;
	char *token_endpoint;
	char *jwks_uri;
	char *end_session_endpoint;      /* NULL when not advertised */
	bool  iss_parameter_supported;   /* authorization_response_iss_parameter_supported */
	bool  public_subjects;           /* "public" in subject_types_supported */
	bool  s256_supported;            /* "S256" in code_challenge_methods_supported */
};

/* A provider for issuer (exactly as configured); no network I/O yet.
 * clock_skew is the tolerance for exp/nbf/iat, in seconds. */
enum cs_err oidc_provider_new(const char *issuer, int64_t clock_skew,
    struct oidc_provider **out) CS_MUST_CHECK;
void oidc_provider_free(struct oidc_provider *p);   /* NULL-safe */

/* Fetches discovery (its `issuer` must equal ours exactly; every endpoint must
 * pass httpc_url_allowed) and the JWKS.  Safe to call again after a failure
 * (e.g. from a retry loop); once it succeeded the metadata never changes. */
enum cs_err oidc_discover(struct oidc_provider *p) CS_MUST_CHECK;
/* Reads a discovery document (body, NUL-terminated, of a 200) for issuer:
 * a JSON object without duplicate members whose "issuer" is issuer exactly,
 * with authorization_endpoint, token_endpoint and jwks_uri (and
 * end_session_endpoint when present) strings that pass httpc_url_allowed.
 * CS_EINVAL otherwise; *out (release with oidc_meta_free) only on CS_OK.
 * No I/O: oidc_discover fetches, then calls it. */
enum cs_err oidc_meta_parse(const char *issuer, const char *body, struct oidc_meta **out) CS_MUST_CHECK;
void oidc_meta_free(struct oidc_meta *m);   /* NULL-safe */
/* The two pieces of discovery that provider.c's (RFC 8414, then OpenID)
 * shares.  The OpenID Discovery §4 URL of issuer appended to url: the issuer
 * without a terminating '/', then /.well-known/openid-configuration. */
enum cs_err oidc_discovery_url(const char *issuer, struct buf *url) CS_MUST_CHECK;
/* Member name of a metadata document as an endpoint: absent is fine unless
 * required (*out NULL); present, it must be a string without NUL that
 * httpc_url_allowed accepts (CS_EINVAL otherwise).  *out is a malloc'd copy. */
enum cs_err oidc_doc_url(json_t *doc, const char *name, bool required, char **out) CS_MUST_CHECK;
/* The metadata, or NULL while discovery has not succeeded. */
const struct oidc_meta *oidc_meta(struct oidc_provider *p);

/* Replaces the key set with a JWKS document (used by discovery and by tests,
 * which need no network).  Keys without a kid, of unsupported type, or private
 * keys are skipped; CS_EINVAL when nothing usable remains. */
enum cs_err oidc_set_jwks(struct oidc_provider *p, const char *jwks_json) CS_MUST_CHECK;

struct oidc_expect {
	const char  *const *audiences;   /* accepted `aud` values; at least one must be present */
	size_t       naudiences;
	const char  *client_id;          /* for ID tokens: our client id (azp rules); NULL for subject tokens */
	const char  *nonce;              /* required and compared when non-NULL */
	int64_t      now;
	int64_t      max_age;            /* >= 0: auth_time required and now - auth_time <= max_age + skew */
	bool         require_auth_time;  /* auth_time must be present even without max_age */
	bool         cache;              /* subject tokens: use the provider's cache (below) */
};

/* Validates a compact JWS from the provider: length cap, three non-empty
 * base64url segments, alg in {RS256, ES256, PS256} and matching the key type,
 * kid known (an unknown kid refetches the JWKS at most once a minute), the
 * signature, iss exactly the issuer, aud containing an accepted value, azp
 * (required to equal client_id when aud has several values; when present, it
 * must equal client_id), exp, nbf, iat with the skew, nonce, auth_time.
 * On failure returns CS_EINVAL or CS_ECRYPTO and writes to why the failing
 * check as a fixed phrase that reads after "the token" / "subject token":
 * "expired", "is not valid yet", "has the wrong issuer", "has the wrong
 * audience", "is signed with a key the IdP does not publish (unknown kid)",
 * "has a bad signature", "uses an algorithm that is not allowed", "has a typ
 * that is not allowed", ... -- never token material.  *claims (new reference)
 * written only on CS_OK.
 *
 * With exp->cache (subject tokens, which come back on every call of an agent,
 * where an ID token is seen once), a token that passed is remembered by its
 * SHA-256 (subject_cache.h) until its exp, and until a new key set is
 * installed (oidc_set_jwks, a JWKS fetch): seen again, its signature and header
 * checks are not repeated, but every claim check above is, at exp->now, with
 * the same reasons.  Failures are never remembered.  *claims may then be an
 * object other threads share: read it, never change it. */
enum cs_err oidc_validate(struct oidc_provider *p, const char *jwt,
    const struct oidc_expect *exp, json_t **claims, char *why, size_t whylen) CS_MUST_CHECK;

/* For tests only: pretends the last JWKS fetch happened `seconds` earlier, so
 * that the once-a-minute refetch on an unknown kid can be exercised quickly. */
void oidc_backdate_jwks_fetch(struct oidc_provider *p, int64_t seconds);
/* For tests: how many subject tokens the provider's cache holds. */
size_t oidc_subject_cache_count(struct oidc_provider *p);

enum oidc_auth { OIDC_AUTH_BASIC = 0, OIDC_AUTH_POST };
/* Exchanges an authorization code at the token endpoint (PKCE verifier,
 * redirect_uri, client authentication per `auth`).  *id_token is malloc'd
 * (caller wipes and frees); CS_EPERM when the provider refused the code. */
enum cs_err oidc_exchange_code(struct oidc_provider *p, const char *client_id,
    const char *client_secret, enum oidc_auth auth, const char *code,
    const char *redirect_uri, const char *code_verifier, char **id_token) CS_MUST_CHECK;

#endif
