/* authzen.h -- the organisation's decision point (issue #32 item 5): an
 * OpenID AuthZEN 1.0 Access Evaluation API endpoint ([authzen] endpoint),
 * asked before a person is whether an action with its exact parameters may
 * run.  Its answer permits, denies, or leaves the decision to the person;
 * every call is audited ("authzen.evaluated").  docs/security.md says what it
 * can and cannot do. */
#ifndef CS_AUTHZEN_H
#define CS_AUTHZEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "approval.h"
#include "buf.h"
#include "config.h"
#include "consent.h"
#include "cs_err.h"
#include "store.h"

#define AUTHZEN_MAX_ANSWER  16384        /* bytes of the decision point's answer */
#define AUTHZEN_REASON_MAX  120          /* bytes of its reason kept for the audit entry */
/* approval_answer.decided_by of a decision the decision point made. */
#define AUTHZEN_DECIDED_BY  "decision point"
/* What callers answer a denial by the decision point with. */
#define AUTHZEN_DENIED_WORDS "denied by the organisation's decision point"

enum authzen_verdict {
	AUTHZEN_PERMIT = 0,          /* "decision": true */
	AUTHZEN_DENY,                /* "decision": false */
	AUTHZEN_ASK,                 /* "context": {"consentd": "ask"}: the person decides */
	AUTHZEN_VERDICT__MAX
};

struct authzen_answer {
	enum authzen_verdict verdict;
	/* context.reason_admin (a string, or an object's "en" string) or
	 * context.reason, cut to AUTHZEN_REASON_MAX bytes, every byte outside
	 * printable ASCII and ';' made '?'; "" when none. */
	char reason[AUTHZEN_REASON_MAX + 1];
};

/* Parses the decision point's answer (len bytes, outside input): a JSON
 * object, no duplicate keys, at most AUTHZEN_MAX_ANSWER bytes, with
 * "decision" a boolean (required) and "context", when present, an object.
 * context.consentd, when present, must be the string "ask" and makes the
 * verdict AUTHZEN_ASK whatever the decision.  Other members are ignored (the
 * spec lets a PDP add them).  CS_EINVAL with a short reason in why
 * otherwise; *out written only on CS_OK. */
enum cs_err authzen_parse_answer(const char *body, size_t len, struct authzen_answer *out,
    char *why, size_t whylen) CS_MUST_CHECK;

/* One question: may agent act on the person's consent k with action and
 * params (the canonical parameters)? */
struct authzen_call {
	const struct consent *k;         /* the person, the agent, the resource, the consent */
	const char *action;
	json_t *params;                  /* the action's parameters (NULL: none) */
	const char *digest;              /* approval_digest of params */
	const char *actor;               /* who asked: the gateway or the MCP client */
	int64_t now;
};

/* The request body (AuthZEN 1.0 §6): subject {type "user", id k->subject,
 * properties.issuer [oidc] issuer}, action {name, properties.parameters},
 * resource {type "consentd_resource", id k->resource}, context {agent,
 * client (actor), consent_id, params_digest, time (RFC 3339)}.  Into out. */
enum cs_err authzen_request_body(const struct config *cfg, const struct authzen_call *q,
    struct buf *out) CS_MUST_CHECK;

/* Whether act is put to the decision point: one is configured, act needs
 * approval, and [authzen] actions is empty or names it. */
bool authzen_applies(const struct config *cfg, const struct config_action *act);

/* The gate's step (exchange.c gate_check, before approval_check; no
 * transaction may be open: it waits on the network).  When authzen_applies:
 * POSTs the question to [authzen] endpoint (bearer token, CA file, timeout,
 * no redirects, the answer capped) and writes one audit entry in a
 * transaction of its own, "authzen.evaluated", outcome permit, deny, ask or
 * error (the failure, and what on_error made of it), never the token.
 * *decided and out (APPROVAL_RELEASE or APPROVAL_DENIED, decided_by
 * AUTHZEN_DECIDED_BY) on a permit, a deny, or a failure with on_error = deny;
 * otherwise *decided is false and out untouched: the person decides.  An
 * error only when the audit entry could not be written (nothing decided). */
enum cs_err authzen_gate(struct store_conn *c, const struct config *cfg,
    const struct config_action *act, const struct authzen_call *q, struct approval_answer *out,
    bool *decided) CS_MUST_CHECK;

/* Whether a denial was the decision point's (callers word it so). */
bool authzen_denied(const struct approval_answer *a);

#endif
