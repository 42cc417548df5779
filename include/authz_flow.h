/* authz_flow.h -- the authorization leg of MCP clients as a domain (issue #30;
 * docs/mcp.md, "The authorization endpoint"): a validated /authorize request
 * kept while the person signs in, the consent it asks for -- consentd's own
 * consent requests (consent_exchange, the gateway's state machine), never a
 * second one -- and the one authorization code it ends in.  No HTTP here:
 * authorize_pages.c maps the outcomes to pages and redirects.  It must never
 * store a code in clear, issue two codes for one request, or let one person
 * continue another's request. */
#ifndef CS_AUTHZ_FLOW_H
#define CS_AUTHZ_FLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "config.h"
#include "cs_err.h"
#include "rate_limits.h"
#include "scope.h"
#include "store.h"
#include "store_authz.h"

#define AUTHZ_FLOW_REQUEST_TTL 600   /* s: a pending /authorize request */
#define AUTHZ_FLOW_CODE_TTL    60    /* s: an authorization code */
#define AUTHZ_FLOW_CODE_LEN    43    /* base64url of 32 random bytes */
#define AUTHZ_FLOW_JKT_LEN     43    /* base64url of a SHA-256 JWK thumbprint (RFC 7638) */
#define AUTHZ_FLOW_WHY_MAX     240   /* an error_description */

/* --- what a request asks for -------------------------------------------- */

/* What authz_flow_scopes found. */
enum authz_scope_outcome {
	AUTHZ_SCOPE_OK = 0,          /* *out holds the scopes */
	AUTHZ_SCOPE_MALFORMED,       /* not a list of distinct scope tokens (or too many) */
	AUTHZ_SCOPE_UNKNOWN,         /* *bad names a scope the resource does not configure */
	AUTHZ_SCOPE_DENIED,          /* *bad names a scope the client may not ask for */
	AUTHZ_SCOPE_NONE,            /* no scope asked and the resource configures none */
	AUTHZ_SCOPE__MAX
};

/* The scopes a request for resource (a [resource.X] id) asks of client_id
 * (an agent id, agent.h), into *out (cleared first): scope as sent -- bare
 * scope names of that resource, space-separated, as the gateway's exchange
 * takes them -- or, when scope is NULL or empty, every scope the resource
 * configures (the person chooses on the consent page).  SECURITY: each one
 * configured and one the client may ask for (invariant 7).  *bad (may be
 * NULL) points into *out or the configuration. */
enum cs_err authz_flow_scopes(const struct config *cfg, const char *client_id,
    const char *resource, const char *scope, struct scope_set *out,
    enum authz_scope_outcome *oc, const char **bad) CS_MUST_CHECK;
/* The sentence naming *oc's failing check for an error_description. */
enum cs_err authz_flow_scope_description(enum authz_scope_outcome oc, const char *bad,
    const char *resource_uri, char *out, size_t outlen) CS_MUST_CHECK;

/* Whether jkt looks like a JWK SHA-256 thumbprint: 43 base64url characters. */
bool authz_flow_jkt_valid(const char *jkt);

/* The host of an absolute http(s) URI, into host (brackets of an IPv6
 * literal removed), and whether it is a loopback host (127.0.0.1, ::1,
 * localhost): a redirect there reaches an app on the person's own computer.
 * CS_EINVAL when uri has no host that fits. */
enum cs_err authz_flow_uri_host(const char *uri, char *host, size_t hostlen, bool *loopback)
    CS_MUST_CHECK;

/* --- the steps ------------------------------------------------------------ */

/* Records r (a request authz_check let through; r->id, created_at and
 * expires_at are set here) as pending for AUTHZ_FLOW_REQUEST_TTL, with a
 * fresh id written to id. */
enum cs_err authz_flow_begin(struct store_conn *c, struct store_authz_request *r, int64_t now,
    char id[STORE_AUTHZ_ID_LEN + 1]) CS_MUST_CHECK;

/* The signed-in person continuing a request. */
struct authz_flow_person {
	int64_t     user_id;
	const char *issuer, *subject;    /* the person at the IdP (consent_exchange's) */
	const char *actor;               /* "user:<subject>" for the audit */
	int64_t     now;
	struct rate_limits *limits;      /* [limits] person_rate, or NULL */
};

/* What a step came to. */
enum authz_step {
	AUTHZ_STEP_UNKNOWN = 0,      /* no such request for this person: unknown, expired, another
	                                person's, or used up (one code) -- the same 404 */
	AUTHZ_STEP_CONSENT,          /* the person decides: consent_request_id */
	AUTHZ_STEP_ASK,              /* not asked yet: the request's own page first */
	AUTHZ_STEP_CODE,             /* a code was issued: code, for redirect_uri */
	AUTHZ_STEP_REFUSED,          /* an error for the client at redirect_uri: error, why
	                                (the request is used up) */
	AUTHZ_STEP__MAX
};

struct authz_flow_step {         /* release with authz_flow_step_clear() */
	enum authz_step outcome;
	struct store_authz_request req;  /* the request (CONSENT, CODE, REFUSED): redirect_uri
	                                    and state for the answer */
	char  consent_request_id[64];    /* CONSENT */
	char  code[AUTHZ_FLOW_CODE_LEN + 1];   /* CODE; wiped by the clear */
	const char *error;               /* REFUSED: an RFC 6749 code (static) */
	char  why[AUTHZ_FLOW_WHY_MAX];   /* REFUSED: error_description naming the check */
};
void authz_flow_step_clear(struct authz_flow_step *s);   /* NULL-safe */

/* GET /authorize/{id} for person p: binds the request to p (SECURITY: a
 * request bound to another person is AUTHZ_STEP_UNKNOWN, never theirs to
 * continue), then asks for the consent exactly as the gateway's exchange does
 * (consent_exchange: agent = the client_id, resource = the [resource.X] behind
 * the [mcp.NAME] the request names, the requested scopes): a live consent
 * covering them issues the code at once (AUTHZ_STEP_CODE, with requested ∩
 * granted); a pending request (new or merged) is AUTHZ_STEP_CONSENT, recorded
 * on the request; a denial within deny_cooldown, too many pending requests or
 * too many scopes are AUTHZ_STEP_REFUSED (the request used up). */
enum cs_err authz_flow_ask(struct store_conn *c, const struct config *cfg, const char *id,
    const struct authz_flow_person *p, struct authz_flow_step *out) CS_MUST_CHECK;

/* GET /authorize/{id}/done for person p, after the decision: the consent
 * request's stored status decides.  Pending: AUTHZ_STEP_CONSENT (back to the
 * page); denied or expired: AUTHZ_STEP_REFUSED access_denied; approved and its
 * consent still live: the code, for the requested scopes the person granted
 * (none of them: access_denied).  SECURITY: the code (32 random bytes) is
 * stored by its SHA-256, and in the same transaction the request is deleted:
 * when another step deleted it first nothing is issued (AUTHZ_STEP_UNKNOWN) --
 * one request, one code. */
enum cs_err authz_flow_finish(struct store_conn *c, const struct config *cfg, const char *id,
    const struct authz_flow_person *p, struct authz_flow_step *out) CS_MUST_CHECK;

/* The id of the unexpired /authorize request that led to consent request
 * consent_request_id, into id: CS_ENOENT when it came from elsewhere (a
 * gateway), or that request is gone. */
enum cs_err authz_flow_from_consent(struct store_conn *c, const char *consent_request_id,
    int64_t now, char id[STORE_AUTHZ_ID_LEN + 1]) CS_MUST_CHECK;
/* The same, with the whole request (for the consent page: its redirect URI). */
enum cs_err authz_flow_request_of_consent(struct store_conn *c, const char *consent_request_id,
    int64_t now, struct store_authz_request *out) CS_MUST_CHECK;

#endif
