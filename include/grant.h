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

/* What grant_issue is asked for. */
struct grant_issue_req {
	const struct consent *k;         /* a live consent */
	const struct scope_set *scope;   /* ⊆ k's granted scopes, non-empty */
	bool with_refresh;               /* an offline consent: start a refresh family */
	const char *jkt;                 /* DPoP (RFC 9449): the proof key's thumbprint, or NULL */
	const char *actor;
	int64_t now;
	/* An MCP client's access token (issue #30): both set, or both NULL (a
	 * gateway's grant, as before).  aud = audience (the [mcp.NAME] URI the
	 * client named as its resource), client_id = client_id (k's agent), no
	 * act claim.  NOT YET IMPLEMENTED by grant_issue: the token leg adds it. */
	const char *audience;
	const char *client_id;
};

enum grant_issue_outcome {
	GRANT_ISSUED = 0,                /* *out holds the grant */
	GRANT_ISSUE_REVOKED,             /* the consent was revoked meanwhile */
	GRANT_ISSUE_REFUSED,             /* the consent is gone or expired, rq->scope does not fit
	                                    it, a refresh token for a consent not offline, or what
	                                    the grant names is configured no more */
	GRANT_ISSUE__MAX
};

/* Issues a grant for rq->k with rq->scope: claims iss (public_url), sub, aud
 * and client_id (gateway id), act.sub (agent), scope, resource (the resource's
 * URI), cid, jti, iat, exp = min(iat + grant_ttl, k's expiry), and cnf.jkt when
 * rq->jkt is set.  Records the jti; with_refresh (for an offline consent) also
 * starts a refresh-token family, bound to jkt when given, in the same
 * transaction.  Audited ("grant.issued", jti only).  Runs in its own
 * transaction.  CS_OK with *oc for every answer (*out written only for
 * GRANT_ISSUED; nothing written otherwise); CS_EINVAL for bad arguments,
 * CS_ECRYPTO without keys, an error only when the grant could not be judged. */
enum cs_err grant_issue(struct store_conn *c, const struct config *cfg, const struct keyring *kr,
    const struct grant_issue_req *rq, enum grant_issue_outcome *oc,
    struct grant_response *out) CS_MUST_CHECK;

/* grant_type=refresh_token. */
struct grant_refresh_req {
	const char *refresh_token;
	const struct scope_set *scope;   /* NULL, or a narrowing (must be ⊆ granted) */
	const char *jkt;                 /* the thumbprint of the request's DPoP proof, or NULL */
	const char *actor;
	int64_t now;
};

enum grant_refresh_outcome {
	GRANT_REFRESHED = 0,             /* *out holds the new grant and refresh token */
	GRANT_REFRESH_INVALID,           /* invalid_grant: no such refresh token (or malformed) */
	GRANT_REFRESH_WRONG_KEY,         /* the family is DPoP-bound to another key (or a proof is missing) */
	GRANT_REFRESH_BAD_SCOPE,         /* invalid_scope: scope outside the consent */
	/* invalid_grant, each said apart to the gateway that holds the token: */
	GRANT_REFRESH_REUSED,            /* a used token again: its family is revoked now (reuse) */
	GRANT_REFRESH_REUSE_REVOKED,     /* its family was revoked by an earlier reuse detection */
	GRANT_REFRESH_REVOKED,           /* revoked at /revoke */
	GRANT_REFRESH_CONSENT_REVOKED,   /* its consent was revoked */
	GRANT_REFRESH_EXPIRED,           /* its consent (and so the token) expired */
	GRANT_REFRESH_NOT_OFFLINE,       /* the agent or the consent no longer allows offline use */
	GRANT_REFRESH_NOT_CONFIGURED,    /* its resource (or what the grant needs) is configured no more */
	GRANT_REFRESH__MAX
};

/* The error_description of a refused refresh (fixed words): a gateway tells
 * theft (reuse detection) from an expiry or a revocation by it.  Only a token
 * consentd knows (by its hash) is told more than "unknown".  Not for
 * GRANT_REFRESHED or GRANT_REFRESH_WRONG_KEY (a DPoP refusal, worded by
 * whether a proof came). */
const char *grant_refresh_outcome_description(enum grant_refresh_outcome oc);

/* The token must be current (unused, unrevoked) and its consent live.  It is
 * used up and replaced by a new one of the same family together with a new
 * grant (same transaction).  A used token presented again revokes its whole
 * family and is audited as reuse.  A refusal of a known token says which case
 * it is (only who holds the token can ask); an unknown one is INVALID.  A family bound to a key renews only with
 * jkt equal to it, and nothing is used up otherwise; the new grant is bound to
 * jkt when one is given.  CS_OK with *oc for every answer (*out written only
 * for GRANT_REFRESHED); an error only when the refresh could not be judged. */
enum cs_err grant_refresh(struct store_conn *c, const struct config *cfg, const struct keyring *kr,
    const struct grant_refresh_req *rq, enum grant_refresh_outcome *oc,
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

/* Whether a validated grant's scope claim holds scope (an action's). */
bool grant_claims_have_scope(json_t *claims, const char *scope);

/* What grant_validate found; release with grant_check_clear(). */
struct grant_check {
	bool        valid;
	const char *why;                 /* !valid: the failing check, a fixed phrase */
	json_t     *claims;              /* valid: the grant's claims */
	struct consent k;                /* valid: its live consent */
};
void grant_check_clear(struct grant_check *g);   /* NULL-safe */

/* Validates a grant presented back to consentd (downstream-token exchange,
 * proxy): signature, typ at+jwt, iss, aud, exp, jti not revoked and consent
 * live.  CS_OK whenever the grant could be judged; out->valid says whether it
 * passed.  For a refused token out->why names the failing check as a fixed
 * phrase: "not a consentd grant", "not a grant for this gateway", "grant
 * expired", "grant issued in the future", "grant unknown to this consentd",
 * "grant revoked", "the grant's consent was revoked", "the grant's consent
 * expired", "the grant's consent is gone", "grant does not match its
 * consent".  Never token material.  The signature check alone may be answered
 * by the verified-grant cache (grant_cache.h), for grant_introspect too; every
 * other check runs on every call, so a revocation counts at the next one. */
enum cs_err grant_validate(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const char *token, int64_t now,
    struct grant_check *out) CS_MUST_CHECK;

#endif
