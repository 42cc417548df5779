/* idjag_grant.h -- enterprise-managed authorization (issue #30 item 6; MCP's
 * ext-auth extension): /token's grant_type
 * urn:ietf:params:oauth:grant-type:jwt-bearer with an Identity Assertion JWT
 * Authorization Grant (draft-ietf-oauth-identity-assertion-authz-grant) from
 * a configured [enterprise.NAME] IdP.  Where that section's allow policy lists
 * the (client, MCP endpoint) pair, the organisation's word stands in for the
 * person's consent: a consent row marked granted_by = "organisation"
 * (migration 0022), audited "consent.granted_by_policy", shown on /me as
 * given by the organisation and revoked as any other.  No refresh token: the
 * client comes back with a new ID-JAG. */
#ifndef CS_IDJAG_GRANT_H
#define CS_IDJAG_GRANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "config.h"
#include "cs_err.h"
#include "grant.h"
#include "idjag.h"
#include "jwt.h"
#include "store.h"

/* What the token endpoint asks, once the client authenticated. */
struct idjag_grant_req {
	const char *assertion;           /* the ID-JAG, a compact JWS */
	const char *client_id;           /* the authenticated MCP client */
	const char *resource;            /* the request's resource (RFC 8707), or NULL */
	const char *scope;               /* the request's scope, or NULL */
	const char *jkt;                 /* DPoP: the valid proof's key thumbprint, or NULL */
	int64_t     now;
};

enum idjag_grant_outcome {
	IDJAG_GRANTED = 0,               /* *out's grant holds the access token */
	IDJAG_GRANT_INVALID,             /* invalid_grant: the assertion, its signature, claims,
	                                    a used jti, or a pair the policy does not list */
	IDJAG_GRANT_BAD_TARGET,          /* invalid_target: no resource, or not an [mcp.NAME] URI,
	                                    or the request's differs from the grant's */
	IDJAG_GRANT_BAD_SCOPE,           /* invalid_scope: nothing of what was asked is allowed */
	IDJAG_GRANT_UNAVAILABLE,         /* temporarily_unavailable: the IdP's jwks_uri could not
	                                    be fetched */
	IDJAG_GRANT__MAX
};

struct idjag_grant_result {          /* release with idjag_grant_result_clear() */
	enum idjag_grant_outcome outcome;
	char why[IDJAG_WHY_MAX];         /* not GRANTED: the error_description */
	struct grant_response grant;     /* GRANTED: access token (aud = the endpoint's URI,
	                                    client_id), no refresh token */
	char *consent_id;                /* GRANTED: the organisation's consent (malloc'd) */
};
void idjag_grant_result_clear(struct idjag_grant_result *r);   /* NULL-safe */

/* How often an IdP's jwks_uri is fetched at most: on first use, and again
 * when an ID-JAG names a kid the cached set lacks. */
#define IDJAG_KEYS_REFETCH 60

/* The grant itself: the JWS parsed with JWS_ALGS_IDJAG (ES256, RS256: none
 * and HS* refused), its iss an [enterprise.NAME] issuer, its signature
 * verified with that IdP's keys (jwks_file's, or jwks_uri's, cached per
 * process; the header's kid, when given, picks the key),
 * idjag_check (typ, iss, aud = public_url, client_id = rq->client_id, exp, iat,
 * resource an [mcp.NAME] URI), the target resource (the request's or the
 * grant's; equal when both are given), the policy's pair, the scopes (the
 * policy's ∩ the grant's scope ∩ the request's, each when given), then the jti
 * recorded once (REPLAY_IDJAG, keyed by the IdP's NAME).  Then, in one
 * transaction, the person (the grant's iss and sub, as a login by that issuer
 * names them) gets the organisation's consent for (client, resource): a live
 * one covering the scopes is reused; any other unrevoked one is replaced; the
 * new one is audited "consent.granted_by_policy"; its access token is issued
 * (grant_issue_tx: aud = the endpoint's URI, client_id, cnf.jkt with jkt) in
 * that same transaction.  CS_OK
 * with out->outcome for every answer; an error only when the grant could not
 * be judged. */
enum cs_err idjag_grant(struct store_conn *c, const struct config *cfg, const struct keyring *kr,
    const struct idjag_grant_req *rq, struct idjag_grant_result *out) CS_MUST_CHECK;

/* At start: every live consent an organisation gave (granted_by =
 * organisation) whose (client, resource) no [enterprise.NAME] allow entry
 * still lists -- an entry naming the client and an [mcp.NAME] of the
 * resource, with every scope the consent holds -- is revoked as consentd
 * ("consentd"; reason IDJAG_POLICY_GONE), each in its own transaction with
 * its cascade (tokens end at once) and audit entry.  *revoked (may be NULL)
 * counts them.  The policy is the operator's word: taking a pair out of it
 * takes back what it gave. */
#define IDJAG_POLICY_GONE "the organisation's policy no longer lets this client use this resource"
enum cs_err idjag_grant_sweep(struct store_conn *c, const struct config *cfg, int64_t now,
    int64_t *revoked) CS_MUST_CHECK;

#endif
