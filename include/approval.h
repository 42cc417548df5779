/* approval.h -- per-action approval (docs/architecture.md flow F): RFC 9396
 * authorization_details of type agent_action, I-JSON checks, the RFC 8785
 * canonical digest of the parameters, approval requests and their single-use
 * redemption.  Consent never implies approval; an approval never outlives
 * the consent it was requested under. */
#ifndef CS_APPROVAL_H
#define CS_APPROVAL_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include "buf.h"
#include "config.h"
#include "consent.h"
#include "cs_err.h"
#include "store.h"

#define APPROVAL_MAX_DETAILS 16384    /* bytes of authorization_details */
#define APPROVAL_DIGEST_LEN 43        /* base64url of SHA-256 */

/* Parses authorization_details: a JSON array holding exactly one object with
 * "type": "agent_action", "action" equal to action, and "parameters" (any
 * JSON value; absent = null).  The whole text must be I-JSON (RFC 7493): no
 * duplicate keys, integers within ±(2^53-1), no lone surrogates, at most
 * APPROVAL_MAX_DETAILS bytes.  *parameters (new reference) on CS_OK;
 * CS_EINVAL otherwise, with a short reason in why. */
enum cs_err approval_parse_details(const char *text, const char *action, json_t **parameters,
    char *why, size_t whylen) CS_MUST_CHECK;

/* approval_parse_details guarantees that the JCS canonical form (jcs.h) of
 * the parameters it returns fits in APPROVAL_MAX_CANONICAL bytes (numbers
 * such as 1e20 grow when written out in full). */
#define APPROVAL_MAX_CANONICAL (2 * APPROVAL_MAX_DETAILS)
/* base64url(SHA-256(JCS(parameters))), NUL-terminated. */
enum cs_err approval_digest(json_t *parameters, char out[APPROVAL_DIGEST_LEN + 1]) CS_MUST_CHECK;

/* Its strings are one block (strings): every char * field points into it.
 * approval_clear frees that block, never a field. */
struct approval {                    /* caller-owned; release with approval_clear() */
	char   *strings;                 /* the one allocation id .. status point into */
	char   *id;
	char   *consent_id;
	int64_t user_id;
	char   *subject, *agent, *resource, *action;
	char   *parameters;              /* the canonical JSON text */
	char    digest[APPROVAL_DIGEST_LEN + 1];
	char   *status;                  /* pending | approved | denied | expired | used | cancelled */
	int64_t created_at, expires_at, decided_at, used_at;
};
void approval_clear(struct approval *a);    /* NULL-safe */

enum approval_outcome {
	APPROVAL_RELEASE = 0,    /* approved and unused: the caller may release once (approval_redeem) */
	APPROVAL_NEEDED,         /* a new approval request: approval_required (named apart from config.h's APPROVAL_REQUIRED) */
	APPROVAL_PENDING,        /* authorization_pending */
	APPROVAL_SLOW_DOWN,      /* slow_down */
	APPROVAL_DENIED,         /* access_denied */
	APPROVAL_EXPIRED,        /* expired_token */
	APPROVAL_TOO_MANY,       /* 429 too_many_pending_requests */
	APPROVAL_CONSENT_ENDED,  /* the consent is no longer live (ended since the grant was checked) */
	APPROVAL_OUTCOME__MAX
};

struct approval_answer {             /* release with approval_answer_clear() */
	enum approval_outcome outcome;
	char   *approval_id;
	int64_t expires_in, interval, retry_after;   /* retry_after: APPROVAL_TOO_MANY, and
	                                    APPROVAL_DENIED (seconds the denial still holds) */
	bool    rate_limited;            /* APPROVAL_TOO_MANY: [limits] person_rate refused it */
	/* Issue #32: APPROVAL_RELEASE or APPROVAL_DENIED decided by something
	 * other than a person's approval of this call -- a standing rule, a
	 * policy line, the decision point -- in words for the audit entry
	 * ("rule RID", "policy ACTION#N", "decision point"); approval_id is
	 * then NULL.  NULL: a person decided. */
	char   *decided_by;
	char   *rule_id;                 /* the standing rule whose use the release counts, or NULL */
};
void approval_answer_clear(struct approval_answer *a);

/* One downstream-token call that needs approval (approval_check). */
struct approval_ask {
	const struct consent *k;         /* the grant's consent */
	const char *action;
	const char *parameters;          /* the canonical JSON text (JCS) */
	const char *digest;              /* approval_digest of the parameters */
	const char *actor;
	int64_t now;
	struct rate_limits *limits;      /* LIMIT_PERSON before a new approval; NULL: none */
};

/* The polling state machine for one downstream-token call q, in one
 * transaction with audit entries.  An approval matches on (consent, action,
 * digest); one pending approval per exact parameters; an approved one is
 * redeemable until its decision is older than [consent] request_ttl; used,
 * expired and cancelled ones never match again.  APPROVAL_CONSENT_ENDED when
 * the consent is no longer live.  CS_EINVAL (a caller's bug) when parameters
 * do not hash to digest.  A new approval first takes a token of the person's
 * from q->limits (LIMIT_PERSON): one a call at most, however often a conflict
 * with another node runs the transaction again. */
enum cs_err approval_check(struct store_conn *c, const struct config *cfg,
    const struct approval_ask *q, struct approval_answer *out) CS_MUST_CHECK;

enum approval_redeem_outcome {
	APPROVAL_REDEEMED = 0,           /* used now, for this release */
	APPROVAL_NOT_REDEEMABLE,         /* already used, cancelled, or no longer redeemable */
	APPROVAL_REDEEM__MAX
};
/* Marks the approval used -- exactly once.  Call in the caller's transaction
 * right before handing the token out; audited ("approval.released" with the
 * digest, or "approval.refused" with the reason).  CS_ENOENT for an unknown id. */
enum cs_err approval_redeem(struct store_conn *c, const struct config *cfg, const char *approval_id,
    const char *actor, int64_t now, enum approval_redeem_outcome *oc) CS_MUST_CHECK;
/* Counts a redemption's outcome in consentd_approvals_total ("used",
 * "not_redeemable"): the caller, once the transaction approval_redeem ran in
 * has committed -- never for one rolled back or run again after a conflict. */
void approval_redeem_counted(enum approval_redeem_outcome oc);

enum cs_err approval_get(struct store_conn *c, const char *id, struct approval *out) CS_MUST_CHECK;
struct standing_rule;                /* standing.h */
struct approval_decision {
	const char *id;                  /* the approval */
	int64_t user_id;                 /* who decides */
	bool approve;
	/* Issue #32: with approve, a standing rule (standing_prepare, for this
	 * approval) stored with the decision in its transaction; NULL: none. */
	const struct standing_rule *rule;
	const char *actor;
	int64_t now;
};
enum approval_decide_outcome {
	APPROVAL_DECIDED = 0,            /* recorded */
	APPROVAL_NOT_YOURS,              /* someone else's approval: nothing changes */
	APPROVAL_CLOSED,                 /* already decided, expired, or its consent ended */
	APPROVAL_DECIDE__MAX
};
/* The person's decision on a pending, unexpired approval of theirs, audited
 * in one transaction.  CS_ENOENT for an unknown id. */
enum cs_err approval_decide(struct store_conn *c, const struct config *cfg,
    const struct approval_decision *d, enum approval_decide_outcome *oc) CS_MUST_CHECK;
/* Pending approvals of a person, for /me. */
enum cs_err approval_pending_for_user(struct store_conn *c, int64_t user_id, int64_t now,
    struct approval **out, size_t *n) CS_MUST_CHECK;
void approval_list_free(struct approval *v, size_t n);

#endif
