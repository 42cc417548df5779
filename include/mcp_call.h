/* mcp_call.h -- the MCP gateway's decisions for one request (issue #31),
 * knowing no HTTP: the tool's action, the token's scope, the person's
 * CURRENT consent for (user, client, resource), the approval gate and the
 * provider token's release (exchange_release), the consent request when the
 * consent is not live (consent_exchange), and the "mcp.call" audit entry.
 * Nothing goes upstream without a live consent; no approval is released
 * twice (exchange.h). */
#ifndef CS_MCP_CALL_H
#define CS_MCP_CALL_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include "approval.h"
#include "audit_queue.h"
#include "b64.h"
#include "config.h"
#include "consent.h"
#include "cs_err.h"
#include "exchange.h"
#include "mcp_state.h"
#include "scope.h"
#include "store.h"
#include "vault.h"

struct rate_limits;

/* One request of a person's client at an endpoint, its token checked
 * (grant_validate_mcp_token). */
struct mcp_call_req {
	struct vault *vault;
	const struct config_mcp_endpoint *ep;
	const struct consent *token_consent;    /* the consent the token was issued under (any state) */
	const struct scope_set *token_scopes;   /* the token's scope claim */
	const char *issuer;                     /* the person's IdP issuer ([oidc] issuer) */
	const char *method;                     /* the JSON-RPC method */
	const char *tool;                       /* tools/call: the tool, else NULL */
	json_t *arguments;                      /* tools/call: its arguments (NULL: {}) */
	const char *actor;                      /* "client:<client_id>" */
	int64_t now;
	struct rate_limits *limits;
	const char *call_id;                    /* the request's id (X-Request-Id), named by
	                                           the call's entries; NULL: a random one */
};

enum mcp_call_outcome {
	MCP_CALL_RELEASED = 0,    /* forward: rel.tok holds the provider token */
	MCP_CALL_UNMAPPED,        /* tools/call of a tool no action maps (unmapped = refuse) */
	MCP_CALL_SCOPE,           /* the token lacks scope: 403 insufficient_scope */
	MCP_CALL_ASK,             /* the person must decide: ask (kind, pending id, url) */
	MCP_CALL_DENIED,          /* the person denied this call: until says until when */
	MCP_CALL_TOO_MANY,        /* too many pending requests for this person */
	MCP_CALL_PROVIDER_DOWN,   /* the provider could not refresh an expired token */
	MCP_CALL_NO_CONSENT,      /* not a tools/call and no live consent: nothing to ask in it */
	MCP_CALL_OUTCOME__MAX
};

/* What the person is asked, in whichever form the client gets it (mcp_gateway.h). */
struct mcp_ask {
	enum mcp_ask_kind kind;
	char pending[96];                       /* the approval id or the consent request id */
	char url[640];                          /* public_url/approve/ID or public_url/consent/ID */
	char message[320];                      /* what to tell the person */
};

struct mcp_call_plan {                      /* release with mcp_call_plan_clear() (wipes) */
	enum mcp_call_outcome outcome;
	const struct config_action *act;        /* tools/call: the tool's action (NULL: unmapped) */
	struct config_action unmapped;          /* unmapped = allow: the action standing for it */
	const char *scope;                      /* the scope the call needs (NULL: none) */
	char digest[APPROVAL_DIGEST_LEN + 1];   /* tools/call: RFC 8785 digest of the arguments */
	struct mcp_ask ask;                     /* MCP_CALL_ASK */
	int64_t until;                          /* MCP_CALL_DENIED: refused until (UTC seconds) */
	int64_t retry_after;                    /* MCP_CALL_TOO_MANY */
	struct consent live;                    /* the person's current consent (when one is live) */
	struct exchange_release rel;            /* MCP_CALL_RELEASED */
	char call_id[B64URL_ID_LEN + 1];        /* tools/call released: "call=" in its entries */
};
void mcp_call_plan_clear(struct mcp_call_plan *p);   /* NULL-safe */

/* In this order: for tools/call the tool's action (unmapped: refused, or
 * unmapped_scope) and the token's scope (MCP_CALL_SCOPE); the person's
 * current consent for (user, client, endpoint's resource): none live, one
 * marked reconnect_required, or one not granting the scope the call needs
 * opens (or finds) a consent request for the token's scopes through
 * consent_exchange (MCP_CALL_ASK, consent; a denial within deny_cooldown is
 * MCP_CALL_DENIED); then exchange_release for the action with the arguments
 * (approval: MCP_CALL_ASK approval, DENIED, TOO_MANY; a connection gone:
 * MCP_CALL_ASK consent).  Other methods release the provider token for
 * their method name (vault_release) with a live consent, or answer
 * MCP_CALL_NO_CONSENT.  Writes what those modules write; an error only for
 * failures. */
enum cs_err mcp_call_prepare(struct store_conn *c, const struct config *cfg,
    const struct mcp_call_req *rq, struct mcp_call_plan *out) CS_MUST_CHECK;

/* The "mcp.call" audit entry of a tools/call, in its own transaction:
 * person, client, endpoint's resource, the tool, the digest of its
 * arguments, outcome (a fixed word: "forwarded", "unmapped", "scope",
 * "consent_required", "approval_required", "denied", "failed", ...), the
 * upstream's status (0: none), and the argument values only when the
 * endpoint has log_arguments (and they fit an entry; else it says so). */
enum cs_err mcp_call_audit(struct store_conn *c, const struct mcp_call_req *rq,
    const struct mcp_call_plan *p, const char *outcome, long upstream_status) CS_MUST_CHECK;

/* The entry that follows a released tools/call's "forwarded" one, for the
 * audit queue (audit_queue.h: off the request's path, one transaction per
 * batch): action "mcp.call", the same person, client, resource, scope and
 * request id, outcome "answered" (the upstream answered status, 2xx or a
 * client error passed back) or "upstream_failed" (another status, or none:
 * status 0 and failure says why: "timeout", "unreachable", "too_big"), detail
 * "call=ID; endpoint=E; tool=T; digest=D; upstream=STATUS; ms=MS" (MS: from
 * the request upstream to its answer's status), "; failure=WHY" when given.
 * The call id joins it to the "forwarded" entry.  No argument values (the
 * forwarded entry has them with log_arguments).  *out only on CS_OK. */
enum cs_err mcp_call_answer_new(const struct mcp_call_req *rq, const struct mcp_call_plan *p,
    long status, const char *failure, int64_t ms, struct audit_queue_entry **out) CS_MUST_CHECK;
/* Completes an "answered" entry once its body was relayed: "; bytes=N;
 * end=complete|upstream_cut|client_gone" (end: the upstream's body came
 * whole, the upstream's stream failed, or the client went away first; end
 * NULL: no body was relayed, nothing added), and puts it (audit_queue_put: queued, or written on c when the queue is NULL,
 * stopped or full).  qe is always consumed. */
enum cs_err mcp_call_answer_put(struct audit_queue *q, struct store_conn *c,
    struct audit_queue_entry *qe, uint64_t bytes, const char *end) CS_MUST_CHECK;

/* Whether a tool call's arguments hold something that looks like a
 * credential, in a value or a member name: a known token prefix (ghp_,
 * glpat-, xoxb-, sk-, AKIA, ya29., "Bearer ", ...), a JWT ("eyJ"), or a run of
 * 32 or more characters of [A-Za-z0-9_-+/=.] with both letters and digits.
 * log_arguments never records such arguments. */
bool mcp_call_secret_like(const json_t *v);

/* After the upstream answered 401 to a released call p: the provider token
 * refreshed whatever its expiry (vault_release_refreshed: at most once a
 * minute per connection; a refused refresh marks the connection as needing
 * the person), its "forwarded_again" entry in the release's transaction.
 * out->outcome VAULT_RELEASED: retry once with out->access_token. */
enum cs_err mcp_call_refresh(struct store_conn *c, const struct config *cfg,
    const struct mcp_call_req *rq, const struct mcp_call_plan *p, struct vault_release *out)
    CS_MUST_CHECK;

#endif
