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
	char   *family;                  /* the refresh family the grant was recorded in, or
	                                    NULL (grant_issue: a refresh token was minted, or
	                                    an MCP client's access token) */
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
	 * gateway's grant).  aud = audience, the URI of an [mcp.NAME] whose
	 * resource is k's (the client named it as its RFC 8707 resource);
	 * client_id = client_id, which must be k's agent (an MCP client, never an
	 * [agent.X]); no act and no resource claim.  Its refresh family remembers
	 * both (a refresh keeps aud exactly, for that client alone). */
	const char *audience;
	const char *client_id;
	/* Flow A: the consent must also cover calls as the transaction reads it
	 * -- not marked reconnect_required (flow D) -- or GRANT_ISSUE_REFUSED.
	 * What lets a caller sign for a consent it remembered rather than read
	 * (consent_exchange_remembered). */
	bool live_only;
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
 * rq->jkt is set.  An MCP client's access token (rq->audience) carries iss,
 * sub, aud (rq->audience), client_id (rq->client_id), scope, cid, jti, iat,
 * exp and cnf.jkt, and is always recorded in a family (out->family) so that
 * what one authorization code issued can be revoked at once.  Records the
 * jti; with_refresh (for an offline consent) also starts a refresh-token
 * family, bound to jkt when given, in the same transaction.  Audited
 * ("grant.issued", jti only).  Runs in its own transaction.  CS_OK with *oc
 * for every answer (*out written only for GRANT_ISSUED; nothing written
 * otherwise); CS_EINVAL for bad arguments, CS_ECRYPTO without keys, an error
 * only when the grant could not be judged. */
enum cs_err grant_issue(struct store_conn *c, const struct config *cfg, const struct keyring *kr,
    const struct grant_issue_req *rq, enum grant_issue_outcome *oc,
    struct grant_response *out) CS_MUST_CHECK;
/* grant_issue inside the caller's transaction (store_begin): the same checks
 * and writes, for a caller whose own writes must commit with the grant (the
 * authorization code's take and its family, mcp_token.c).  On a refusal it
 * has written nothing; on an error the caller rolls back.  Counts no metric. */
enum cs_err grant_issue_tx(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const struct grant_issue_req *rq, enum grant_issue_outcome *oc,
    struct grant_response *out) CS_MUST_CHECK;

/* grant_type=refresh_token. */
struct grant_refresh_req {
	const char *refresh_token;
	const struct scope_set *scope;   /* NULL, or a narrowing (must be ⊆ granted) */
	const char *jkt;                 /* the thumbprint of the request's DPoP proof, or NULL */
	const char *actor;
	int64_t now;
	/* An MCP client's refresh (issue #30): client_id the authenticated
	 * client, audience the request's resource; both NULL for the gateway's.
	 * SECURITY: a family is refreshed only by whom it was issued to: an MCP
	 * client's family by that client, for its own audience; a gateway's by
	 * the gateway.  Anyone else hears "unknown". */
	const char *client_id;
	const char *audience;
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
	GRANT_REFRESH_WRONG_RESOURCE,    /* invalid_target: an MCP family asked for another resource
	                                    (nothing used up) */
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
 * claims and "token_use": "grant" | "refresh".  An MCP client's access token
 * is checked as grant_validate_mcp does for its own aud, and answers its
 * claims (aud, client_id: the client's); an MCP family's refresh token
 * answers its client_id and aud. */
enum cs_err grant_introspect(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const char *token, int64_t now, json_t **out) CS_MUST_CHECK;

/* RFC 7009: revokes a grant (by its jti, if consentd's signature verifies) or a
 * refresh token (with its family).  Unknown tokens are fine (CS_OK).
 * SECURITY (RFC 7009 §2.1): only the gateway's own: an MCP client's token is
 * left alone, silently. */
enum cs_err grant_revoke(struct store_conn *c, const struct config *cfg, const struct keyring *kr,
    const char *token, const char *actor, int64_t now) CS_MUST_CHECK;
/* grant_revoke for the MCP client client_id (authenticated by the caller):
 * its own access tokens (client_id claim, no act) and refresh tokens (its
 * family's client) only; anyone else's token, or the gateway's, is left
 * alone and CS_OK says nothing of it. */
enum cs_err grant_revoke_mcp(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const char *token, const char *client_id, const char *actor,
    int64_t now) CS_MUST_CHECK;

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

/* Validates an MCP client's access token presented to the MCP endpoint whose
 * URI is audience (issue #31's gateway): signature with consentd's keys,
 * ES256, typ at+jwt, iss, no act claim, aud a string equal to audience byte
 * for byte and audience an [mcp.NAME] of this configuration, exp, jti not
 * revoked, and its consent live (revoking it on /me or by an admin ends the
 * token at the next call), the consent's agent the token's client_id, its
 * resource the endpoint's, the scope within it.  A cnf.jkt is the caller's to
 * hold to a DPoP proof (dpop.h).  CS_OK whenever the token could be judged;
 * out->valid says whether it passed, and out->why names the failing check:
 * grant_validate's phrases for the grant row and the consent, and "not a
 * consentd access token", "not an access token for this resource", "access
 * token expired", "access token issued in the future".  Never token
 * material. */
enum cs_err grant_validate_mcp(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const char *token, const char *audience, int64_t now,
    struct grant_check *out) CS_MUST_CHECK;

/* The MCP gateway's check of an access token (issue #31): everything
 * grant_validate_mcp checks of the token itself -- signature, ES256, typ
 * at+jwt, iss, no act, aud this endpoint exactly, exp, iat -- and its grant
 * row not revoked on its own (RFC 7009, a refresh family's reuse), and the
 * consent it names being the token's person's, client's and endpoint's
 * resource's; but not that this consent is still live: out->k is it in any
 * state, and a token whose row was revoked only with its consent (revoked on
 * /me, replaced, by an admin) still passes.  The gateway's authority is the
 * person's CURRENT consent for (user, client, resource) at each call
 * (consent_current).  out->valid and out->why as grant_validate_mcp says
 * ("grant revoked" for a token revoked on its own). */
enum cs_err grant_validate_mcp_token(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const char *token, const char *audience, int64_t now,
    struct grant_check *out) CS_MUST_CHECK;

#endif
