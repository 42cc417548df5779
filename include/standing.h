/* standing.h -- the person's standing rules (issue #32): "allow exactly this
 * call again" and "allow this action with these values fixed", for a while and
 * at most so often, made on the approval page, checked inside approval_check's
 * transaction, counted in the release's, listed and ended on /me and by admins.
 * A rule only ever stands in for the person's approval of a call of one action
 * under one live consent: never another agent, action or consent. */
#ifndef CS_STANDING_H
#define CS_STANDING_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include "config.h"
#include "consent.h"
#include "cs_err.h"
#include "store.h"

#define STANDING_MAX_FIXED 32        /* top-level parameters the page offers to fix */
#define STANDING_EXACT_KEYSET "*"    /* the key set of every exact rule */
#define STANDING_LIST_MAX 200        /* rules /me and the admin API list at most */
#define STANDING_MAX_USES 10000      /* the largest use count a rule may have */
#define STANDING_DIGEST_LEN 43       /* base64url of SHA-256 (the approvals' digest length) */

/* The call a person approved, as the approval page knows it. */
struct standing_call {
	const char *approval_id, *consent_id, *subject, *agent, *resource, *action;
	const char *parameters;          /* the canonical JSON text */
	const char *digest;              /* base64url SHA-256 of it */
	int64_t user_id;
};

/* What a person asks for on the approval page (the form's values, not trusted). */
struct standing_request {
	enum config_standing kind;       /* STANDING_EXACT or STANDING_MATCH */
	int64_t duration;                /* seconds, 60 .. the action's standing_max */
	int64_t max_uses;                /* 0: as often as needed; else 1 .. STANDING_MAX_USES */
	uint64_t fixed;                  /* bit i: the i-th top-level parameter
	                                    (standing_keys' order) stays fixed */
};

/* A rule checked against the action's configuration and built, ready for
 * approval_decide to store with the approval it was made with. */
struct standing_rule {               /* caller-owned; release with standing_rule_clear() */
	char    id[CONSENT_ID_LEN + 1];
	const char *kind;                /* "exact" | "match" */
	char   *details, *keyset;        /* canonical JSON texts */
	char    lookup[STANDING_DIGEST_LEN + 1];
	char   *consent_id, *subject, *agent, *resource, *action, *approval_id;
	int64_t user_id, expires_at, max_uses;
	char   *fixed;                   /* the fixed names, comma-joined, for the audit entry */
};
void standing_rule_clear(struct standing_rule *r);   /* NULL-safe */

/* The top-level parameter names of the canonical parameters text, in its
 * (RFC 8785) order, as a new JSON array of strings: what the page lists and
 * what standing_request.fixed's bits number.  An empty array for parameters
 * that are not an object; CS_ETOOBIG for more than STANDING_MAX_FIXED names. */
enum cs_err standing_keys(const char *canonical, json_t **out) CS_MUST_CHECK;

/* Checks rq against the action of the approved call a (its [action] standing,
 * standing_max, standing_fixed: the never-open parameters are fixed whatever
 * rq says) and builds the rule into *out (written only on CS_OK).  CS_EINVAL
 * with a reason for a person in why when the action offers no such rule, the
 * duration or use count is out of bounds, a match rule would fix nothing, or
 * a parameter never left open is missing from this call. */
enum cs_err standing_prepare(const struct config *cfg, const struct standing_call *a,
    const struct standing_request *rq, int64_t now, struct standing_rule *out,
    char *why, size_t whylen) CS_MUST_CHECK;

/* Stores rule r in the caller's transaction (approval_decide's, right after
 * the approval was recorded), audited "standing.created". */
enum cs_err standing_insert(struct store_conn *c, const struct standing_rule *r,
    const char *actor, int64_t now) CS_MUST_CHECK;

/* --- matching (pure; tests/unit/test_standing.c) ---------------------- */
/* The lookup digest of params for a stored key set: base64url SHA-256 of the
 * JCS text of the object holding exactly those keys of params.  CS_ENOENT
 * when params is not an object, lacks one of the keys, or keyset is not a
 * non-empty JSON array of distinct strings. */
enum cs_err standing_lookup_of(json_t *params, const char *keyset,
    char out[STANDING_DIGEST_LEN + 1]) CS_MUST_CHECK;
/* Whether a stored rule (its kind and details text) covers a call of action
 * with params (whose canonical digest is digest).  Fails closed: details that
 * are not the expected shape -- another type or action, an unknown member or
 * constraint, a match object that fixes nothing, a prefix that is not a
 * non-empty string -- cover nothing. */
bool standing_covers(const char *kind, const char *details, const char *action,
    json_t *params, const char *digest);

/* --- at the check points ----------------------------------------------- */
/* Inside approval_check's transaction, after the person's own approval of
 * this call: a live rule of consent k and action that covers the call
 * (parameters: canonical JSON text, digest: its digest), when the action
 * offers standing rules now.  *rule_id (malloc'd) is its id, or NULL.
 * Nothing written. */
enum cs_err standing_check(struct store_conn *c, const struct config *cfg,
    const struct consent *k, const char *action, const char *parameters, const char *digest,
    int64_t now, char **rule_id) CS_MUST_CHECK;
/* In the release's transaction (vault.c): counts one use of the rule for
 * consent k and action, re-checking it (not ended, unexpired, under its use
 * count, consent live) in the same UPDATE; audited "standing.used" or
 * "standing.refused".  *counted false when it no longer holds. */
enum cs_err standing_use(struct store_conn *c, const char *rule_id, const struct consent *k,
    const char *action, const char *actor, int64_t now, bool *counted) CS_MUST_CHECK;

/* --- seen and ended ---------------------------------------------------- */
enum standing_end_outcome {
	STANDING_ENDED = 0,              /* ended now */
	STANDING_NOT_YOURS,              /* another person's rule: nothing changes */
	STANDING_ALREADY_ENDED,          /* ended before, expired, or used up */
	STANDING_END__MAX
};
/* Ends rule id for the person user_id (0: an admin may end anyone's), in one
 * transaction, audited "standing.ended".  CS_ENOENT for an unknown id. */
enum cs_err standing_end(struct store_conn *c, const char *id, int64_t user_id,
    const char *actor, int64_t now, enum standing_end_outcome *oc) CS_MUST_CHECK;
/* The rules not ended and unexpired at now of user_id (0: everyone's), newest
 * first, at most STANDING_LIST_MAX, as a new JSON array of objects: id,
 * subject, consent_id, agent, resource, action, kind, details (object),
 * fixed (object of the exactly fixed values), prefixes (object), created_at,
 * created_by, expires_at, max_uses, uses, last_used_at, used_up (bool). */
enum cs_err standing_list(struct store_conn *c, int64_t user_id, int64_t now,
    json_t **out) CS_MUST_CHECK;
/* For the admin pages: every rule of consent consent_id, ended, expired and
 * used up ones too, newest first, at most STANDING_LIST_MAX, as
 * standing_list's objects with ended_at (0: not ended), ended_by (null: not
 * ended) and live (bool: not ended, unexpired at now, not used up) besides. */
enum cs_err standing_list_consent(struct store_conn *c, const char *consent_id, int64_t now,
    json_t **out) CS_MUST_CHECK;
/* Rule id as one object of standing_list_consent; CS_ENOENT for an unknown
 * id.  *out written only on CS_OK. */
enum cs_err standing_show(struct store_conn *c, const char *id, int64_t now,
    json_t **out) CS_MUST_CHECK;

#endif
