/* exchange.h -- the gateway's exchanges as domain operations, knowing no HTTP:
 * flow A (a grant for a person's live consent), flow D (a provider token for
 * one action of a grant), and the one approval gate with its release that
 * flow D and the proxy (flow H) both pass.  Each owns its transactions and
 * writes its audit entries; outcomes say what to answer, cs_err only fails. */
#ifndef CS_EXCHANGE_H
#define CS_EXCHANGE_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include "agent.h"
#include "approval.h"
#include "config.h"
#include "consent.h"
#include "cs_err.h"
#include "grant.h"
#include "jwt.h"
#include "oidc.h"
#include "store.h"
#include "vault.h"

#define URN_TOKEN_EXCHANGE "urn:ietf:params:oauth:grant-type:token-exchange"
#define URN_TT_ID_TOKEN "urn:ietf:params:oauth:token-type:id_token"
#define URN_TT_ACCESS_TOKEN "urn:ietf:params:oauth:token-type:access_token"
#define URN_TT_JWT "urn:ietf:params:oauth:token-type:jwt"
#define EXCHANGE_REASON_MAX_CHARS 200
/* The rule a refused reason is answered with (invalid_request). */
#define EXCHANGE_REASON_RULE "reason: at most 200 characters, no control characters"
/* An error_description this module writes fits in this many bytes. */
#define EXCHANGE_DESCRIPTION_MAX 400

enum exchange_outcome {
	EXCHANGE_RELEASED = 0,        /* the provider token is in out->tok */
	EXCHANGE_APPROVAL,            /* out->approval says which answer (approval_required, ...) */
	EXCHANGE_CONSENT_ENDED,       /* the consent ended since the grant was checked */
	EXCHANGE_APPROVAL_USED,       /* the approval was used meanwhile or is no longer valid */
	EXCHANGE_CONNECTION_GONE,     /* the provider connection is gone: reconnect */
	EXCHANGE_PROVIDER_DOWN,       /* the provider could not refresh an expired token */
	/* flow D only (exchange_provider_token): */
	EXCHANGE_SCOPE_ESCALATION,    /* the action's scope is not in the grant (audited) */
	EXCHANGE_PROXY_ONLY,          /* token_release = never (audited) */
	EXCHANGE_BAD_DETAILS,         /* authorization_details refused; out->why says why */
	EXCHANGE_DETAILS_NEEDED,      /* the action needs approval and no details were sent */
	EXCHANGE_OUTCOME__MAX
};

struct exchange_release {         /* release with exchange_release_clear() (wipes) */
	enum exchange_outcome outcome;
	struct approval_answer approval;   /* EXCHANGE_APPROVAL, and the approval released */
	struct vault_release tok;          /* EXCHANGE_RELEASED */
	json_t *params;                    /* the parameters approved (flow D: parsed details) */
	char    digest[APPROVAL_DIGEST_LEN + 1];   /* their digest; "" without approval */
	char    why[EXCHANGE_DESCRIPTION_MAX]; /* EXCHANGE_BAD_DETAILS; EXCHANGE_CONNECTION_GONE
	                                    * of a consent that needs the person (health.h) */
	bool    at_release;                /* set once the vault's release was called: an error
	                                    * (CS_ECRYPTO: the record does not open) came from it */
};
void exchange_release_clear(struct exchange_release *r);
/* The error_description /token answers r->outcome with (flow D; the proxy
 * words its own for its 401 and 403 answers).  Fixed words, or r->why for
 * EXCHANGE_BAD_DETAILS and for EXCHANGE_CONNECTION_GONE when it is set (the
 * reason the connection needs the person, and where they go), and for
 * EXCHANGE_DETAILS_NEEDED when it is set (an action judged by policy lines,
 * not a person); "" for EXCHANGE_RELEASED and EXCHANGE_APPROVAL (the
 * approval answer has its own). */
const char *exchange_outcome_description(const struct exchange_release *r);

/* One release of a provider token for action act of live consent k. */
struct exchange_release_req {
	struct vault *vault;
	const struct consent *k;
	const struct config_action *act;
	json_t *params;               /* the action's parameters: required when act needs approval */
	size_t canonical_max;         /* the cap on their canonical form */
	const char *actor;
	int64_t now;
	struct rate_limits *limits;   /* [limits] person, before a new approval; NULL: none */
	/* The caller's writes in the release's transaction (vault_release_req.with). */
	enum cs_err (*with)(struct store_conn *c, void *ctx);
	void *with_ctx;
};

/* The approval gate, then the release.  When act needs approval: the
 * parameters canonicalised (RFC 8785) and digested, approval_check (its own
 * transaction), and on an approval to release, the approval redeemed in the
 * transaction that records the release (vault_release_approved) -- released
 * once, never twice.  Otherwise vault_release.  Either way rq->with's writes
 * join the release's transaction.  out->outcome says what happened;
 * out->params is not touched. */
enum cs_err exchange_release(struct store_conn *c, const struct config *cfg,
    const struct exchange_release_req *rq, struct exchange_release *out) CS_MUST_CHECK;

/* Flow D: a provider token for one action of a validated grant. */
struct exchange_token_req {
	struct vault *vault;
	const struct consent *k;      /* the grant's consent (grant_validate) */
	json_t *claims;               /* the grant's claims */
	const struct config_resource *res;
	const struct config_action *act;
	const char *details;          /* authorization_details, or NULL */
	const char *actor;
	int64_t now;
	struct rate_limits *limits;   /* [limits] person, before a new approval; NULL: none */
};

/* In this order: the action's scope must be in the grant (else audited
 * "vault.release.refused", escalation attempt), the resource must release
 * tokens (else audited, token_release = never), the details (when sent) must
 * name exactly this action (approval_parse_details; out->params), an action
 * that needs approval needs details; then exchange_release. */
enum cs_err exchange_provider_token(struct store_conn *c, const struct config *cfg,
    const struct exchange_token_req *rq, struct exchange_release *out) CS_MUST_CHECK;

/* Flow A: a grant for a person's consent. */
struct exchange_grant_req {
	const struct keyring *kr;
	const char *issuer;           /* the IdP's issuer and the person's subject there */
	const char *subject;
	const struct agent_view *agent;   /* resolved (agent.h) */
	const struct config_resource *res;
	const struct scope_set *want; /* checked against the configuration and the agent's allow */
	const char *reason;           /* the agent's reason, or NULL */
	const char *jkt;              /* DPoP: the proof key's thumbprint, or NULL */
	const char *actor;
	int64_t now;
	struct rate_limits *limits;   /* [limits] person, before a new consent request; NULL: none */
};

enum exchange_grant_outcome {
	EXCHANGE_GRANTED = 0,         /* out->grant */
	EXCHANGE_NO_GRANT,            /* out->answer.outcome says what to answer instead */
	EXCHANGE_GRANT_ENDED,         /* the consent was revoked or expired just now */
	EXCHANGE_TOO_MANY_SCOPES,     /* with the scopes already asked for, past CONSENT_MAX_SCOPES */
	EXCHANGE_GRANT__MAX
};

struct exchange_grant {           /* release with exchange_grant_clear() (wipes) */
	enum exchange_grant_outcome outcome;
	struct consent_answer answer;
	struct grant_response grant;
};
void exchange_grant_clear(struct exchange_grant *g);
/* The error_description for a flow A outcome that is not a grant:
 * consent_answer_description for EXCHANGE_NO_GRANT, fixed words for the
 * others.  CS_ETOOBIG (out "") when outlen is too small. */
enum cs_err exchange_grant_description(const struct exchange_grant *g, char *out,
    size_t outlen) CS_MUST_CHECK;

/* consent_exchange's state machine, and for a live consent a grant
 * (grant_issue; a refresh family when the consent and the agent are offline),
 * each in its own transaction with its audit entries. */
enum cs_err exchange_grant(struct store_conn *c, const struct config *cfg,
    const struct exchange_grant_req *rq, struct exchange_grant *out) CS_MUST_CHECK;

/* --- what the gateway names: the checks before an exchange ------------- */

/* Flow A's subject: the person, from the subject token the gateway sent,
 * checked against the upstream IdP only -- a token consentd issued is never
 * accepted as a subject. */
enum exchange_subject_outcome {
	EXCHANGE_SUBJECT_OK = 0,          /* out->claims, out->sub */
	EXCHANGE_SUBJECT_NO_TOKEN,        /* subject_token is missing */
	EXCHANGE_SUBJECT_NO_TYPE,         /* subject_token_type is missing */
	EXCHANGE_SUBJECT_TYPE_REFUSED,    /* not one of [gateway] subject_token_types */
	EXCHANGE_SUBJECT_IDP_UNREACHED,   /* the IdP's metadata is not known yet: retry */
	EXCHANGE_SUBJECT_INVALID,         /* the IdP's checks refused it: out->why names the check */
	EXCHANGE_SUBJECT_OWN_GRANT,       /* refused, and it is a consentd grant (exchange_subject_ours) */
	EXCHANGE_SUBJECT_NO_CLAIM,        /* no usable [oidc] subject_claim */
	EXCHANGE_SUBJECT__MAX
};

struct exchange_subject {         /* release with exchange_subject_clear() */
	enum exchange_subject_outcome outcome;
	json_t *claims;                   /* the token's claims, once the IdP's checks passed */
	const char *sub;                  /* OK: the person's subject, in claims */
	char why[128];                    /* INVALID */
};
void exchange_subject_clear(struct exchange_subject *s);   /* NULL-safe */

/* In this order: both present, the type one of [gateway] subject_token_types,
 * the IdP's metadata known, oidc_validate with the IdP's keys, issuer and
 * [gateway] subject_audiences (its cache), then the subject claim: a string of
 * 1 to 255 bytes.  NULL for what was not sent.  out->outcome says which
 * check refused; an error only when it could not be judged. */
enum cs_err exchange_subject(const struct config *cfg, struct oidc_provider *idp,
    const char *type, const char *token, int64_t now, struct exchange_subject *out) CS_MUST_CHECK;
/* For a subject token the IdP refused (EXCHANGE_SUBJECT_INVALID): when it
 * verifies with kr as a grant consentd signed, the outcome becomes
 * EXCHANGE_SUBJECT_OWN_GRANT (it was sent as a subject by mistake, or on
 * purpose).  Any other outcome is left alone.  Apart from exchange_subject so
 * that the caller holds kr only for this check: cheap for a token that cannot
 * be ours (jwt_verify refuses another alg, typ or kid before any signature). */
void exchange_subject_ours(const struct keyring *kr, const char *token,
    struct exchange_subject *s);
/* The error_description of a refused subject: names the check that failed
 * (the accepted types, the IdP's reason, the claim).  CS_ETOOBIG (out "")
 * when outlen is too small. */
enum cs_err exchange_subject_description(const struct config *cfg,
    const struct exchange_subject *s, char *out, size_t outlen) CS_MUST_CHECK;

/* NULL when the agent's reason (valid UTF-8, or NULL) is acceptable: at most
 * EXCHANGE_REASON_MAX_CHARS characters and no control character (C0, DEL,
 * C1); otherwise EXCHANGE_REASON_RULE. */
const char *exchange_reason_problem(const char *reason);

/* Flow A's target: the resource (by name, audience, or URI, resource; both
 * must agree), the agent, and the scopes asked for. */
enum exchange_target_outcome {
	EXCHANGE_TARGET_OK = 0,
	EXCHANGE_TARGET_NO_RESOURCE,      /* neither audience nor resource */
	EXCHANGE_TARGET_UNKNOWN_AUDIENCE, /* audience names no configured resource */
	EXCHANGE_TARGET_UNKNOWN_URI,      /* resource is not a configured resource's URI */
	EXCHANGE_TARGET_DISAGREE,         /* audience and resource name different resources */
	EXCHANGE_TARGET_NO_AGENT,         /* agent_id is missing */
	EXCHANGE_TARGET_UNKNOWN_AGENT,    /* agent_id names no configured agent */
	EXCHANGE_TARGET_NO_SCOPE,         /* scope is missing */
	EXCHANGE_TARGET_BAD_SCOPE,        /* malformed, empty or too many scopes */
	EXCHANGE_TARGET_SCOPE_UNKNOWN,    /* out->scope is not configured for the resource */
	EXCHANGE_TARGET_SCOPE_DENIED,     /* the agent may not ask for out->scope ([agent.X] allow) */
	EXCHANGE_TARGET__MAX
};

struct exchange_target {          /* release with exchange_target_clear() */
	enum exchange_target_outcome outcome;
	/* Set as soon as each is known, also when a later check refuses (the
	 * access log names them): pointers into the configuration; the agent's
	 * view (agent.h) is one too, its id NULL until the agent is known. */
	const struct config_resource *res;
	struct agent_view agent;
	struct scope_set want;            /* OK: the scopes asked for */
	const char *scope;                /* SCOPE_UNKNOWN, SCOPE_DENIED: the scope (in want) */
};
void exchange_target_clear(struct exchange_target *t);   /* NULL-safe */
/* The error_description of a refused target: the check, and the scope,
 * resource and agent it names.  CS_ETOOBIG (out "") when outlen is too small. */
enum cs_err exchange_target_description(const struct exchange_target *t, char *out,
    size_t outlen) CS_MUST_CHECK;

/* Checks what a grant exchange names, in this order: the resource (audience,
 * resource; at least one), the agent, the scopes -- and invariant 7:
 * requested ⊆ configured ∩ agent-allowed.  NULL for what was not sent.
 * out->outcome says which check refused; no I/O.  CS_ENOMEM only. */
enum cs_err exchange_target(const struct config *cfg, const char *audience,
    const char *resource, const char *agent_id, const char *scope,
    struct exchange_target *out) CS_MUST_CHECK;

/* Whether a grant of consent k may be used for the resource a request names
 * (its id, its URI; NULL: not named): a grant reaches only its own resource. */
bool exchange_grant_for(const struct config *cfg, const struct consent *k, const char *id,
    const char *uri);

/* Flow D's action: the grant's resource (configured, with a provider) and
 * the action it names. */
enum exchange_action_outcome {
	EXCHANGE_ACTION_OK = 0,
	EXCHANGE_ACTION_NO_PROVIDER,      /* the grant's resource is gone or has no provider */
	EXCHANGE_ACTION_UNKNOWN,          /* no configured action of the resource has that name */
	EXCHANGE_ACTION__MAX
};
/* *res (NULL when not configured) and, on OK, *act.  Configuration only. */
enum exchange_action_outcome exchange_action(const struct config *cfg, struct vault *vault,
    const struct consent *k, const char *action, const struct config_resource **res,
    const struct config_action **act);
/* The error_description of a refused action (fixed words). */
const char *exchange_action_description(enum exchange_action_outcome o);

#endif
