/* grant.h -- grants (RFC 9068 at+jwt, ES256, flow C), refresh tokens for
 * offline consents, introspection (RFC 7662) and revocation (RFC 7009).
 * Refresh tokens are opaque and stored only as SHA-256 hashes. */
#ifndef CS_GRANT_H
#define CS_GRANT_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include "config.h"
#include "consent.h"
#include "cs_err.h"
#include "jwt.h"
#include "store.h"

struct grant_response {              /* release with grant_response_clear() (wipes) */
	char   *access_token;            /* the signed grant */
	char   *refresh_token;           /* NULL unless the consent is offline */
	int64_t expires_in;
	char   *scope;                   /* the granted scopes, space-separated */
	char   *jti;
};
void grant_response_clear(struct grant_response *g);

/* Issues a grant for a live consent k with scope (⊆ k's granted scopes):
 * claims iss (public_url), sub, aud and client_id (gateway id), act.sub (agent),
 * scope, resource (the resource's URI), cid, jti, iat, exp = min(iat +
 * grant_ttl, k's expiry).  Records the jti; with_refresh (for an offline
 * consent) also starts a refresh-token family.  Audited ("grant.issued",
 * jti only).  Runs in its own transaction. */
enum cs_err grant_issue(struct store_conn *c, const struct config *cfg, const struct keyring *kr,
    const struct consent *k, const struct scope_set *scope, bool with_refresh, const char *actor,
    int64_t now, struct grant_response *out) CS_MUST_CHECK;

/* grant_issue for a DPoP-bound grant (RFC 9449): jkt, when not NULL, is the
 * thumbprint of the gateway's proof key; the grant carries cnf.jkt and its
 * refresh family, if any, is bound to jkt in the same transaction. */
enum cs_err grant_issue_bound(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const struct consent *k, const struct scope_set *scope,
    bool with_refresh, const char *jkt, const char *actor, int64_t now,
    struct grant_response *out) CS_MUST_CHECK;
/* grant_type=refresh_token: the token must be current (unused, unrevoked) and
 * its consent live.  It is used up and replaced by a new one of the same family
 * together with a new grant (same transaction).  A used token presented again
 * revokes its whole family and is audited as reuse.  scope, when non-NULL,
 * narrows (must be ⊆ granted).  CS_EPERM for any refusal (invalid_grant),
 * CS_EINVAL for a scope outside the consent (invalid_scope). */
enum cs_err grant_refresh(struct store_conn *c, const struct config *cfg, const struct keyring *kr,
    const char *refresh_token, const struct scope_set *scope, const char *actor, int64_t now,
    struct grant_response *out) CS_MUST_CHECK;

/* grant_refresh with the thumbprint jkt of the request's DPoP proof (NULL:
 * none).  A family bound to a key renews only with jkt equal to it: otherwise
 * CS_EPERM with *wrong_key set, and nothing is used up.  The new grant is
 * bound to jkt when one is given. */
enum cs_err grant_refresh_bound(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const char *refresh_token, const struct scope_set *scope,
    const char *jkt, bool *wrong_key, const char *actor, int64_t now,
    struct grant_response *out) CS_MUST_CHECK;
/* RFC 7662: *out is {"active":false} unless token is a grant consentd issued
 * (signature with its keys, typ at+jwt, unexpired, jti not revoked, consent
 * live) or a current refresh token of a live consent; active answers carry the
 * claims and "token_use": "grant" | "refresh". */
enum cs_err grant_introspect(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const char *token, int64_t now, json_t **out) CS_MUST_CHECK;

/* RFC 7009: revokes a grant (by its jti, if consentd's signature verifies) or a
 * refresh token (with its family).  Unknown tokens are fine (CS_OK). */
enum cs_err grant_revoke(struct store_conn *c, const struct config *cfg, const struct keyring *kr,
    const char *token, const char *actor, int64_t now) CS_MUST_CHECK;

/* Validates a grant presented back to consentd (downstream-token exchange,
 * proxy): signature, typ at+jwt, iss, aud, exp, jti not revoked and consent
 * live.  *claims (new reference) and *k filled on CS_OK.  CS_EPERM for a token
 * that is refused; then *why (when why is not NULL) names the failing check as
 * a fixed phrase: "not a consentd grant", "not a grant for this gateway",
 * "grant expired", "grant issued in the future", "grant unknown to this
 * consentd", "grant revoked", "the grant's consent was revoked", "the grant's
 * consent expired", "the grant's consent is gone", "grant does not match its
 * consent".  Never token material. */
enum cs_err grant_validate(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const char *token, int64_t now, json_t **claims,
    struct consent *k, const char **why) CS_MUST_CHECK;

#endif
