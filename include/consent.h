/* consent.h -- consent requests and consents (docs/architecture.md flows A, B, G):
 * the polling state machine the token exchange runs, the person's decision,
 * listing and the revocation cascade.  Knows nothing of HTTP or HTML; every
 * state change commits in one transaction together with its audit entries. */
#ifndef CS_CONSENT_H
#define CS_CONSENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "config.h"
#include "rate_limits.h"
#include "cs_err.h"
#include "scope.h"
#include "store.h"

#define CONSENT_MAX_SCOPES SCOPE_SET_MAX   /* per request; the consent page has one box each */
#define CONSENT_ID_LEN 22            /* base64url of 16 random bytes */
#define CONSENT_VERSION_LEN 64       /* hex of a SHA-256 */

/* struct consent and struct consent_request own their strings as one block
 * (strings): every char * field points into it or is NULL.  Their _clear
 * frees that block, never a field; code that wants another value in one
 * field points it elsewhere and keeps that storage alive itself. */
struct consent {                     /* caller-owned; release with consent_clear() */
	char   *strings;                 /* the one allocation id .. request_id point into */
	char   *id;
	int64_t user_id;
	char   *subject;                 /* the person (IdP subject) */
	char   *agent, *resource;
	struct scope_set granted, declined;
	bool    offline;
	int64_t created_at, expires_at, revoked_at;
	bool    reconnect_required;      /* the provider rejected its vault record (flow D) */
	const char *state;               /* static: "live", "revoked", "expired", or "reconnect_required"
	                                    (unrevoked, unexpired, but its provider connection
	                                    must be made again) */
	char   *revoked_by, *revoke_reason;   /* the actor and the reason; NULL until revoked */
	char   *request_id;              /* the request whose approval made it, or NULL */
	int64_t last_used_at;            /* the last grant issued or token released; 0 = never */
	char   *reconnect_reason;        /* why reconnect_required (health.h's name), or NULL */
	char   *granted_by;              /* NULL: the person gave it; CONSENT_BY_ORGANISATION:
	                                    an enterprise IdP's ID-JAG under the admin's policy
	                                    (idjag_grant.h, migration 0022) */
};
#define CONSENT_BY_ORGANISATION "organisation"
void consent_clear(struct consent *c);  /* NULL-safe */
struct audit_entry;
/* An audit entry about consent k: sets a's time (now), actor, and k's
 * subject, agent, resource and id; leaves the rest of *a (the action, the
 * outcome, ...) as the caller wrote it.  a borrows k's strings. */
void consent_audit_about(const struct consent *k, const char *actor, int64_t now,
    struct audit_entry *a);

struct consent_request {             /* caller-owned; release with consent_request_clear() */
	char   *strings;                 /* the one allocation id .. narrowed point into */
	char   *id;
	int64_t user_id;
	char   *subject;
	char   *agent, *resource;
	struct scope_set scopes;         /* requested (merged) scopes */
	struct scope_set pre_granted;    /* granted by the consent live when it was made: pre-ticked */
	char   *reason;                  /* the agent's text, or NULL */
	char   *status;                  /* "pending", "approved", "denied", "expired" */
	int64_t created_at, expires_at, decided_at;
	char   *consent_id;              /* set once approved */
	char   *narrowed;                /* scopes dropped because the provider granted less, or NULL */
	int64_t cooldown_lifted_at;      /* the person let the agent ask again (0 = not) */
};
void consent_request_clear(struct consent_request *r);   /* NULL-safe */

/* Who acts on a person's consents and requests, and when: the person on
 * their pages, an administrator, or consentd itself. */
struct consent_actor {
	int64_t     user_id;             /* the person acting (> 0); 0 for consent_revoke by an
	                                    administrator, who may end anyone's */
	const char *actor;               /* for the audit log: "user:<subject>", "admin:<name>", "cli" */
	int64_t     now;                 /* UTC seconds */
};

/* What the token exchange should answer (flow A). */
enum consent_outcome {
	CONSENT_GRANT = 0,       /* *live holds the covering consent; *grant_scopes = requested ∩ granted */
	CONSENT_REQUIRED,        /* a new request, or scopes merged into the pending one: consent_required */
	CONSENT_PENDING,         /* authorization_pending */
	CONSENT_SLOW_DOWN,       /* slow_down (the interval grew by 5 s) */
	CONSENT_DENIED,          /* access_denied (within deny_cooldown) */
	CONSENT_EXPIRED,         /* expired_token: the pending request expired; the next call starts anew */
	CONSENT_TOO_MANY,        /* 429 too_many_pending_requests; *retry_after set */
	CONSENT_TOO_MANY_SCOPES, /* the scopes would pass CONSENT_MAX_SCOPES: nothing written */
	CONSENT_OUTCOME__MAX
};

struct consent_answer {              /* release with consent_answer_clear() */
	enum consent_outcome outcome;
	struct consent live;             /* CONSENT_GRANT */
	struct scope_set grant_scopes;   /* CONSENT_GRANT */
	char   *request_id;              /* CONSENT_REQUIRED / PENDING / SLOW_DOWN */
	int64_t expires_in;              /* seconds left on the request */
	int64_t interval;                /* current polling interval */
	int64_t retry_after;             /* CONSENT_TOO_MANY */
	bool    rate_limited;            /* CONSENT_TOO_MANY: [limits] person_rate refused it,
	                                    not max_pending_per_user */
	/* What the gateway is told besides the outcome (error_description): */
	bool    merged;                  /* CONSENT_REQUIRED: the call's new scopes joined the
	                                    pending request (and its reason, when it sent one) */
	bool    reason_kept;             /* PENDING / SLOW_DOWN: the call sent another reason;
	                                    the pending request keeps the one the person sees */
	bool    reconnect;               /* CONSENT_REQUIRED: the live consent covers the call
	                                    but its provider connection must be made again */
	const char *reconnect_why;       /* with reconnect: why, in the gateway's words (static,
	                                    health.h), or NULL */
	int64_t denied_until;            /* CONSENT_DENIED: when a new request may be made */
};
void consent_answer_clear(struct consent_answer *a);
/* The error_description for an answer that is not a grant: what the gateway
 * should do next (send the person to consent_uri, poll again in N s, when a
 * denied request may be asked again, ...), including whether the call's new
 * scopes joined the pending request or its new reason was not taken.  Fixed
 * words and numbers only, never anything the gateway sent. */
enum cs_err consent_answer_description(const struct consent_answer *a, char *out,
    size_t outlen) CS_MUST_CHECK;   /* CS_ETOOBIG (out "") when outlen is too small */

/* One token-exchange call (flow A): who asks for whom, and for what. */
struct consent_ask {
	const char *issuer, *subject;    /* the person (the user row is created when new) */
	const char *agent, *resource;    /* validated against the configuration */
	const struct scope_set *requested;   /* a non-empty subset of what the agent may ask for */
	const char *reason;              /* the agent's text, or NULL */
	const char *actor;               /* for the audit log: "gateway:<id>" */
	int64_t     now;
	struct rate_limits *limits;      /* LIMIT_PERSON before a new request; NULL: none */
};

/* Runs flow A's state machine for one token-exchange call.  A known person
 * whose live consent covers the call is answered from committed rows without
 * a transaction (nothing to write; grant_issue reads the consent again in its
 * own); everything else runs in one transaction,
 * with audit entries (created, merged, expired; slow_down only the first time
 * per request, later ones are counted in the request and named in the entry
 * that ends it).  A pending request keeps its reason unless the call merges new
 * scopes into it (then the reason joins too): an agent cannot keep rewriting
 * what an open page shows, since every change makes that page's decision stale
 * (consent_request_version); *out says which (merged, reason_kept).
 * CONSENT_TOO_MANY_SCOPES (nothing written, nothing else in *out) when the
 * request's scopes -- merged with the pending request's, or with the live
 * consent's granted ones -- would pass CONSENT_MAX_SCOPES. */
enum cs_err consent_exchange(struct store_conn *c, const struct config *cfg,
    const struct consent_ask *ask, struct consent_answer *out) CS_MUST_CHECK;

/* consent_exchange for flow A: first from the live consent this thread
 * remembers for the call's person, agent and resource (consent_memo.h), when
 * it covers the call -- then *remembered is true and nothing was read.
 * SECURITY: such an answer is only a hint; its caller signs only for what
 * its writer's transaction reads (grant_issue_req's live_only), and when
 * that refuses, calls consent_exchange_forget and consent_exchange. */
enum cs_err consent_exchange_remembered(struct store_conn *c, const struct config *cfg,
    const struct consent_ask *ask, struct consent_answer *out, bool *remembered) CS_MUST_CHECK;
/* Forgets what this thread remembers for ask's person, agent and resource. */
void consent_exchange_forget(const struct consent_ask *ask);

/* A request by id; CS_ENOENT when unknown. */
enum cs_err consent_request_get(struct store_conn *c, const char *id,
    struct consent_request *out) CS_MUST_CHECK;

/* The version of a request as a person sees it: hex(SHA-256) over the
 * agent, the resource, the requested scopes in page order, the pre-ticked
 * scopes and the agent's reason, each length-prefixed.  A merge (flow A) that
 * adds a scope or changes the reason changes it; polling does not. */
void consent_request_version(const struct consent_request *r,
    char out[CONSENT_VERSION_LEN + 1]);

struct consent_decision {
	bool    approve;
	struct scope_set selected;       /* ticked boxes; must be ⊆ the request's scopes */
	int64_t duration;                /* seconds, 1 .. the resource's max_consent */
	bool    offline;                 /* only honoured for an offline agent */
	/* SECURITY: the consent_request_version of the page the person decided
	 * on.  An approval of any other version of the request is refused with
	 * CONSENT_DECIDE_CHANGED and changes nothing: the person grants what they saw. */
	char    version[CONSENT_VERSION_LEN + 1];
};

/* What became of a decision.  Only CONSENT_DECIDED wrote anything. */
enum consent_decide_outcome {
	CONSENT_DECIDED = 0,             /* recorded; an approval made a new consent */
	CONSENT_DECIDE_UNKNOWN,          /* no such request */
	CONSENT_DECIDE_NOT_YOURS,        /* the request is another person's */
	CONSENT_DECIDE_CLOSED,           /* decided already, or expired */
	CONSENT_DECIDE_INVALID,          /* a selection outside the request, an empty approval
	                                    or a bad duration */
	CONSENT_DECIDE_CHANGED,          /* an approval of a version the request is no longer at */
	CONSENT_DECIDE__MAX
};
struct consent_decided {             /* release with consent_decided_clear() */
	enum consent_decide_outcome outcome;
	char   *consent_id;              /* CONSENT_DECIDED on an approval: the new consent (malloc'd) */
};
void consent_decided_clear(struct consent_decided *d);

/* Records who->user_id's decision on their pending, unexpired request, in one
 * transaction with its audit entries; out->outcome says whether it was
 * recorded (a denial stands for any version; an approval only at d->version).
 * Approve: a new consent (new id) with granted = selected and declined = the
 * rest of the request, replacing -- in the same transaction -- the live
 * consent for (user, agent, resource) with its grants and refresh tokens (its
 * vault record goes to the revocation outbox unless reserved for a move).
 * Deny: the request is denied; the live consent is unchanged.
 * cs_err only for failures; *out written only on CS_OK. */
enum cs_err consent_decide(struct store_conn *c, const struct config *cfg, const char *request_id,
    const struct consent_actor *who, const struct consent_decision *d,
    struct consent_decided *out) CS_MUST_CHECK;
/* The same, inside the caller's transaction (the vault makes a consent live
 * together with its record): nothing is committed or rolled back here, and
 * an outcome other than CONSENT_DECIDED has written nothing. */
enum cs_err consent_decide_tx(struct store_conn *c, const struct config *cfg,
    const char *request_id, const struct consent_actor *who, const struct consent_decision *d,
    struct consent_decided *out) CS_MUST_CHECK;
/* The checks consent_decide makes on an approval, without writing anything:
 * *out is CONSENT_DECIDED when user_id may approve r with d at now (pending,
 * unexpired, theirs, at d->version, d->selected non-empty, ⊆ r's scopes,
 * configured and allowed to the agent, duration within the resource's
 * max_consent).  For the vault, which checks before sending the person to the
 * provider. */
enum cs_err consent_decision_check(const struct config *cfg, const struct consent_request *r,
    int64_t user_id, const struct consent_decision *d, int64_t now,
    enum consent_decide_outcome *out) CS_MUST_CHECK;

/* The consent (any state) the grant jti was issued under, with the grant's
 * row, read together (store_consent_of_grant: one statement, one snapshot).
 * CS_ENOENT when the grant is unknown or its consent is gone; *g and *out
 * written only on CS_OK (release *g with store_grant_row_clear). */
struct store_grant_row;
enum cs_err consent_of_grant(struct store_conn *c, const char *jti, int64_t now,
    struct store_grant_row *g, struct consent *out) CS_MUST_CHECK;
/* A consent by id (any state); CS_ENOENT when unknown. */
enum cs_err consent_get(struct store_conn *c, const char *id, int64_t now,
    struct consent *out) CS_MUST_CHECK;
/* true when the consent is neither revoked nor expired at now. */
bool consent_is_live(const struct consent *k, int64_t now);
/* The unrevoked, unexpired consent of (user, agent, resource) -- reconnect_required
 * or not; CS_ENOENT when none. */
enum cs_err consent_current(struct store_conn *c, int64_t user_id, const char *agent,
    const char *resource, int64_t now, struct consent *out) CS_MUST_CHECK;

/* The person's consents (live ones first, then the most recent others, at most
 * max) and pending requests.  Arrays are malloc'd; free with the _free calls. */
enum cs_err consent_list_for_user(struct store_conn *c, int64_t user_id, int64_t now, size_t max,
    struct consent **out, size_t *n) CS_MUST_CHECK;
void consent_list_free(struct consent *v, size_t n);
enum cs_err consent_pending_for_user(struct store_conn *c, int64_t user_id, int64_t now,
    struct consent_request **out, size_t *n) CS_MUST_CHECK;
void consent_request_list_free(struct consent_request *v, size_t n);

/* Who ended a revoked consent, as the person is told on /me. */
enum consent_revoker {
	CONSENT_BY_NOBODY = 0,           /* not revoked (live or expired) */
	CONSENT_BY_PERSON,               /* the person, on /me */
	CONSENT_BY_REPLACEMENT,          /* a newer consent the person gave for the same agent and resource */
	CONSENT_BY_ADMIN,                /* an administrator (pages, API or command line) */
	CONSENT_BY_OTHER,                /* consentd itself */
	CONSENT_REVOKER__MAX
};
enum consent_revoker consent_revoker(const struct consent *k);

/* Consents by state at now, counted in one aggregate query (for /metrics):
 * out[i] for the state called consent_state_names[i]. */
#define CONSENT_STATES 4
extern const char *const consent_state_names[CONSENT_STATES];
enum cs_err consent_count_by_state(struct store_conn *c, int64_t now,
    int64_t out[CONSENT_STATES]) CS_MUST_CHECK;

/* Records a use of consent_id at now (a grant issued, a provider token
 * released): its last_used_at, shown on /me.  Inside the caller's transaction,
 * which must be the one recording the use; one indexed UPDATE. */
enum cs_err consent_touch(struct store_conn *c, const char *consent_id, int64_t now) CS_MUST_CHECK;

/* --- blocks: deny_cooldown, after a denial or a declined scope ---------
 * A person's "no" holds for [consent] deny_cooldown from the decision:
 *  - a denied request: every new request of its (user, agent, resource) is
 *    answered access_denied (calls a live consent covers still get grants);
 *  - scopes the person unticked when approving (declined; not those the
 *    provider did not grant): a call asking only for declined scopes of the
 *    live consent is answered access_denied, as a denial of those scopes.
 *    A call that also asks for a scope granted is answered from the consent,
 *    one that adds a scope never decided makes a new request as before.
 * The person can lift either at once (consent_allow_asking). */
struct consent_block {               /* release with consent_block_list_free() */
	char   *request_id;              /* the decided request that holds the agent back */
	char   *agent, *resource;
	struct scope_set scopes;         /* denied: the request's scopes; declined: the unticked ones */
	bool    declined;                /* true: unticked on an approval; false: the request was denied */
	int64_t decided_at, until;       /* the block ends at until */
};
void consent_block_list_free(struct consent_block *v, size_t n);
/* The person's blocks in force at now, most recent first. */
enum cs_err consent_blocks_for_user(struct store_conn *c, const struct config *cfg,
    int64_t user_id, int64_t now, struct consent_block **out, size_t *n) CS_MUST_CHECK;
enum consent_lift_outcome {
	CONSENT_LIFTED = 0,              /* the block is lifted, with an audit entry */
	CONSENT_LIFT_NOTHING,            /* nothing held the agent back: lifted already, the
	                                    cooldown over, the consent ended, nothing declined */
	CONSENT_LIFT_UNKNOWN,            /* no such request */
	CONSENT_LIFT_NOT_YOURS,          /* the request is another person's */
	CONSENT_LIFT_UNDECIDED,          /* pending or expired: no decision holds anyone back */
	CONSENT_LIFT__MAX
};
/* Lifts the block request_id holds (a denied request, or the approved request
 * of a live consent with declined scopes), with an audit entry
 * "consent.cooldown_lifted", in one transaction: the agent's next call makes a
 * new request.  who->user_id must be the request's person. */
enum cs_err consent_allow_asking(struct store_conn *c, const struct config *cfg,
    const char *request_id, const struct consent_actor *who,
    enum consent_lift_outcome *out) CS_MUST_CHECK;

enum consent_revoke_outcome {
	CONSENT_REVOKED = 0,             /* revoked now, with its audit entry */
	CONSENT_REVOKE_ALREADY,          /* it was revoked already: nothing written (idempotent) */
	CONSENT_REVOKE_UNKNOWN,          /* no such consent */
	CONSENT_REVOKE_NOT_YOURS,        /* who->user_id > 0 and the consent is another person's */
	CONSENT_REVOKE__MAX
};
/* Revokes a consent with its grants and refresh tokens, cancels its pending
 * and approved-unused approvals and moves its vault record (if any) to the
 * revocation outbox, with one audit entry naming who->actor and reason, in
 * its own transaction.  When who->user_id > 0 the consent must be theirs. */
enum cs_err consent_revoke(struct store_conn *c, const char *consent_id,
    const struct consent_actor *who, const char *reason,
    enum consent_revoke_outcome *out) CS_MUST_CHECK;
/* The same inside the caller's transaction (bulk revocation, the admin pages). */
enum cs_err consent_revoke_tx(struct store_conn *c, const char *consent_id,
    const struct consent_actor *who, const char *reason,
    enum consent_revoke_outcome *out) CS_MUST_CHECK;

/* --- reconnecting from /me (consent_reconnect.c) ------------------------ */
enum consent_reconnect_outcome {
	CONSENT_RECONNECT_ASKED = 0,     /* a new request for the consent's agent, resource and
	                                    scopes (those still configured and allowed), audited */
	CONSENT_RECONNECT_PENDING,       /* a request of the triple waits already: request_id */
	CONSENT_RECONNECT_NOT_NEEDED,    /* revoked, expired, or its connection works: nothing written */
	CONSENT_RECONNECT_UNAVAILABLE,   /* none of its scopes may be asked for any more */
	CONSENT_RECONNECT_UNKNOWN,       /* no such consent */
	CONSENT_RECONNECT_NOT_YOURS,     /* another person's consent */
	CONSENT_RECONNECT__MAX
};
struct consent_reconnect {
	enum consent_reconnect_outcome outcome;
	char request_id[CONSENT_ID_LEN + 1];   /* ASKED and PENDING: the request to decide */
};
/* The person who->user_id asks to reconnect their consent consent_id, which is
 * live and marked reconnect_required: in one transaction, the pending request
 * of its (user, agent, resource) when one waits unexpired (an expired one is
 * ended and audited), else a new request whose scopes -- pre-ticked -- are
 * the consent's granted ones still configured and allowed to the agent,
 * audited "consent.request.created" (detail "reconnect from /me").  Approving
 * it on the consent page connects the provider again and replaces the broken
 * consent (its "recovered" event: vault_connect.c).  A request the person
 * makes for themselves is not counted against max_pending_per_user or
 * [limits] person (at most one per triple waits).  cs_err only for failures. */
enum cs_err consent_reconnect(struct store_conn *c, const struct config *cfg,
    const char *consent_id, const struct consent_actor *who,
    struct consent_reconnect *out) CS_MUST_CHECK;

/* Session binding (invariant 4): records that someone other than its person
 * opened a consent or approval request -- one "consent.binding_refused"
 * entry, in its own transaction.  The request stays as it was. */
struct consent_refusal {
	const char *actor;               /* "user:<subject>" of who opened it */
	const char *subject, *agent, *resource;   /* the request's */
	const char *request_id;          /* a consent or an approval request */
	int64_t     now;
};
enum cs_err consent_refuse_binding(struct store_conn *c, const struct consent_refusal *r) CS_MUST_CHECK;

#endif
