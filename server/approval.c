/* approval.c -- per-action approval (flow F): RFC 9396 authorization_details
 * of type agent_action, the parameters' digest, the gateway's polling state
 * machine, the person's decision and single-use redemption.  Every change
 * commits with its audit entries; an audit entry names the action and the
 * digest, never a parameter's value, and nothing here ever sees a token. */
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "approval.h"
#include "store_approval_block.h"
#include "jcs.h"
#include "metrics.h"
#include "audit.h"
#include "b64.h"
#include "buf.h"
#include "session.h"
#include "standing.h"
#include "store_approval.h"

#define SLOW_DOWN_STEP 5             /* seconds added to the interval on slow_down */
#define APPROVAL_LIST_MAX 100        /* /me shows at most this many pending approvals */
#define DIGEST_MAX_CANONICAL (8u << 20)  /* approval_digest's cap on the canonical text */
#define STALE_MAX 16                 /* stale approved rows expired per call, at most */

_Static_assert(STANDING_DIGEST_LEN == APPROVAL_DIGEST_LEN, "a rule's lookup is a digest");

/* --- small helpers ----------------------------------------------------- */

/* base64url(SHA-256(n bytes at p)). */
static void digest_bytes(const void *p, size_t n, char out[APPROVAL_DIGEST_LEN + 1])
{
	unsigned char h[SHA256_DIGEST_LENGTH];
	/* 43 characters: out holds them, so this cannot fail (out is "" if it did). */
	if (!sha256_bytes(p, n, h) ||
	    b64url_encode(h, sizeof h, out, APPROVAL_DIGEST_LEN + 1) != CS_OK)
		out[0] = '\0';
}

static void set_why(char *why, size_t whylen, const char *msg)
{
	/* A reason longer than the caller's array is left out rather than cut. */
	if (why != NULL && whylen > 0 && str_fmt(why, whylen, "%s", msg) != CS_OK)
		why[0] = '\0';
}

/* --- authorization_details --------------------------------------------- */

/* RFC 9396 entry members we accept.  "type", "action" and "parameters" make
 * the approval; "locations" (array of strings) and "identifier" (string) are
 * RFC 9396 common fields a client may send: checked for shape, then ignored
 * (they are not part of the digest).  Anything else is refused, so that no
 * member can carry meaning the person was never shown. */
static bool member_known(const char *k)
{
	return strcmp(k, "type") == 0 || strcmp(k, "action") == 0 ||
	    strcmp(k, "parameters") == 0 || strcmp(k, "locations") == 0 ||
	    strcmp(k, "identifier") == 0;
}

/* The one entry's members, all but "parameters": NULL when they are
 * acceptable, else the reason. */
static const char *entry_check(json_t *entry, const char *action)
{
	const char *k;
	json_t *m;

	json_object_foreach(entry, k, m) {
		if (!member_known(k))
			return "the authorization_details entry has an unknown member";
	}
	m = json_object_get(entry, "type");
	if (!json_is_string(m) || strcmp(json_string_value(m), "agent_action") != 0)
		return "the authorization_details type must be agent_action";
	m = json_object_get(entry, "action");
	if (!json_is_string(m) || strcmp(json_string_value(m), action) != 0 ||
	    json_string_length(m) != strlen(action))
		return "the authorization_details action must equal the action parameter";
	m = json_object_get(entry, "identifier");
	if (m != NULL && !json_is_string(m))
		return "identifier must be a string";
	m = json_object_get(entry, "locations");
	if (m != NULL) {
		if (!json_is_array(m))
			return "locations must be an array of strings";
		for (size_t i = 0; i < json_array_size(m); i++)
			if (!json_is_string(json_array_get(m, i)))
				return "locations must be an array of strings";
	}
	return NULL;
}

/* The entry's "parameters" (JSON null when absent) into *out, a reference
 * of the caller's; their canonical form must fit what callers (and the
 * store) hold, else CS_EINVAL with *w why. */
static enum cs_err parameters_of(json_t *entry, json_t **out, const char **w)
{
	json_t *params = json_object_get(entry, "parameters");
	struct buf canon;
	enum cs_err e;

	params = params != NULL ? json_incref(params) : json_null();
	buf_init(&canon, APPROVAL_MAX_CANONICAL);
	e = jcs_canonicalize(params, &canon);
	buf_clear(&canon);
	if (e != CS_OK) {
		json_decref(params);
		if (e == CS_ENOMEM)
			return e;
		*w = "parameters are too large once canonicalized";
		return CS_EINVAL;
	}
	*out = params;
	return CS_OK;
}

enum cs_err approval_parse_details(const char *text, const char *action, json_t **parameters,
    char *why, size_t whylen)
{
	json_t *root = NULL, *entry;
	json_error_t jerr;
	const char *w = NULL;
	char ijwhy[96];
	size_t len;
	enum cs_err e = CS_EINVAL;

	if (text == NULL || action == NULL || action[0] == '\0' || parameters == NULL) {
		w = "authorization_details or action missing";
		goto out;
	}
	len = strnlen(text, APPROVAL_MAX_DETAILS + 1);
	if (len > APPROVAL_MAX_DETAILS) {
		w = "authorization_details is too long";
		goto out;
	}
	/* SECURITY: RFC 7493 I-JSON.  jansson itself refuses duplicate member
	 * names (with this flag, at any depth), lone surrogate escapes, invalid
	 * UTF-8, \u0000, integers beyond int64 and reals that overflow (1e400);
	 * the walk below refuses integers beyond ±(2^53-1). */
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		w = "authorization_details is not valid I-JSON";
		goto out;
	}
	if (jcs_ijson_check(root, ijwhy, sizeof ijwhy) != CS_OK) {
		w = ijwhy;
		goto out;
	}
	if (!json_is_array(root) || json_array_size(root) != 1) {
		w = "authorization_details must be an array of exactly one entry";
		goto out;
	}
	entry = json_array_get(root, 0);
	if (!json_is_object(entry)) {
		w = "the authorization_details entry must be an object";
		goto out;
	}
	if ((w = entry_check(entry, action)) != NULL)
		goto out;
	e = parameters_of(entry, parameters, &w);
out:
	if (e != CS_OK && w != NULL)
		set_why(why, whylen, w);
	json_decref(root);
	return e;
}

enum cs_err approval_digest(json_t *parameters, char out[APPROVAL_DIGEST_LEN + 1])
{
	struct buf b;
	enum cs_err e;
	if (parameters == NULL || out == NULL)
		return CS_EINVAL;
	buf_init(&b, DIGEST_MAX_CANONICAL);
	if ((e = jcs_canonicalize(parameters, &b)) == CS_OK)
		digest_bytes(b.data != NULL ? b.data : "", b.len, out);
	buf_clear(&b);
	return e;
}

/* --- structs ----------------------------------------------------------- */

void approval_clear(struct approval *a)
{
	if (a == NULL)
		return;
	free(a->strings);
	memset(a, 0, sizeof *a);
}

void approval_answer_clear(struct approval_answer *a)
{
	if (a == NULL)
		return;
	free(a->approval_id);
	free(a->decided_by);
	free(a->rule_id);
	memset(a, 0, sizeof *a);
}

ARRAY_FREE_FN(struct approval, approval_clear, approval_list_free)

/* Moves a row into *out: the row's block of strings changes owner (it
 * becomes out->strings) and the row's text fields are NULL after.  *out
 * written only on CS_OK; on failure the row keeps its strings. */
static enum cs_err approval_from_row(struct store_approval_row *r, struct approval *out)
{
	struct approval a;
	if (strlen(r->digest) != APPROVAL_DIGEST_LEN)
		return CS_EDB;
	memset(&a, 0, sizeof a);
	memcpy(a.digest, r->digest, APPROVAL_DIGEST_LEN + 1);
	a.strings = r->block;
	a.id = r->id;
	a.consent_id = r->consent_id;
	a.subject = r->subject;
	a.agent = r->agent;
	a.resource = r->resource;
	a.action = r->action;
	a.parameters = r->parameters;
	a.status = r->status;
	a.user_id = r->user_id;
	a.created_at = r->created_at;
	a.expires_at = r->expires_at;
	a.decided_at = r->decided_at;
	a.used_at = r->used_at;
	r->block = NULL;
	r->id = r->consent_id = r->subject = r->agent = r->resource = NULL;
	r->action = r->parameters = r->digest = r->status = NULL;
	*out = a;
	return CS_OK;
}

/* --- audit ------------------------------------------------------------- */

/* One entry about an approval (or the call being made): *base with the
 * detail "why; action=...; params_digest=..." -- the action and the
 * parameters' digest, never their values. */
static enum cs_err audit_approval(struct store_conn *c, const struct audit_entry *base,
    const char *why, const char *action, const char *digest)
{
	struct audit_entry a = *base;
	char detail[300];
	enum cs_err e = str_fmt(detail, sizeof detail, "%s%saction=%s; params_digest=%s",
	    why ? why : "", why ? "; " : "", action, digest);
	if (e != CS_OK)
		return e;
	a.detail = detail;
	return audit_append(c, &a);
}

/* The entry of what happened to row r: action and outcome, and why. */
static enum cs_err audit_row(struct store_conn *c, const struct audit_entry *what,
    const struct store_approval_row *r, const char *why)
{
	struct audit_entry a = *what;
	a.subject = r->subject;
	a.agent = r->agent;
	a.resource = r->resource;
	a.consent_id = r->consent_id;
	a.request_id = r->id;
	return audit_approval(c, &a, why, r->action, r->digest);
}

/* The entry of a refusal or request about the call q itself. */
static enum cs_err audit_ask(struct store_conn *c, const struct approval_ask *q,
    const struct audit_entry *what, const char *why)
{
	struct audit_entry a = *what;
	consent_audit_about(q->k, q->actor, q->now, &a);
	return audit_approval(c, &a, why, q->action, q->digest);
}

/* --- the gateway's state machine --------------------------------------- */

/* What one approval_check call's [limits] person said, kept across the runs
 * store_retry makes of its transaction: the limiter is asked once per call,
 * so a run again after a conflict neither takes a second token nor counts a
 * second refusal. */
struct person_token {
	bool    asked;
	bool    taken;                   /* asked: a token was taken, else refused */
	int64_t retry_after;             /* refused: the limiter's seconds */
};

/* A new pending approval, unless the person has too many pending already. */
static enum cs_err check_new(struct store_conn *c, const struct config *cfg,
    const struct approval_ask *q, struct person_token *pt, struct approval_answer *a)
{
	enum cs_err e;
	int64_t count = 0, earliest = 0, now = q->now;
	const struct consent *k = q->k;
	struct store_approval_row r;
	char id[CONSENT_ID_LEN + 1];

	if ((e = store_approval_count_pending(c, k->user_id, now, &count, &earliest)) != CS_OK)
		return e;
	if (count >= cfg->consent_max_pending_per_user) {
		if ((e = audit_ask(c, q, &(struct audit_entry){ .action = "approval.refused",
		    .outcome = "refused" }, "too many pending approvals")) != CS_OK)
			return e;
		a->outcome = APPROVAL_TOO_MANY;
		a->retry_after = earliest - now >= 1 ? earliest - now : 1;
		return CS_OK;
	}
	/* SECURITY: [limits] person: how fast approval requests for one person
	 * may appear, whatever asks for them.  Asked before the approval is made,
	 * once per call: a run again after a conflict (store_retry) keeps the
	 * first run's answer, and its refusal is audited in the run that commits. */
	if (!pt->asked) {
		int64_t uid = k->user_id;
		pt->taken = rate_limits_take(q->limits, LIMIT_PERSON, &uid, sizeof uid,
		    &pt->retry_after);
		pt->asked = true;
	}
	if (!pt->taken) {
		if ((e = audit_ask(c, q, &(struct audit_entry){ .action = "approval.refused",
		    .outcome = "refused" }, "rate limit: person")) != CS_OK)
			return e;
		a->outcome = APPROVAL_TOO_MANY;
		a->rate_limited = true;
		a->retry_after = pt->retry_after;
		return CS_OK;
	}
	if ((e = b64url_random_id(id)) != CS_OK)
		return e;
	memset(&r, 0, sizeof r);
	r.id = id;
	r.consent_id = k->id;
	r.user_id = k->user_id;
	r.agent = k->agent;
	r.resource = k->resource;
	r.action = (char *)q->action;
	r.parameters = (char *)q->parameters;
	r.digest = (char *)q->digest;
	r.status = "pending";
	r.created_at = now;
	r.expires_at = now + cfg->consent_request_ttl;
	r.last_poll_at = now;
	r.interval = cfg->consent_interval;
	if ((e = store_approval_insert(c, &r)) != CS_OK ||
	    (e = audit_ask(c, q, &(struct audit_entry){ .action = "approval.requested",
	    .request_id = id, .outcome = "pending" }, NULL)) != CS_OK)
		return e;
	if ((a->approval_id = strdup(id)) == NULL)
		return CS_ENOMEM;
	a->outcome = APPROVAL_NEEDED;
	a->expires_in = cfg->consent_request_ttl;
	a->interval = cfg->consent_interval;
	return CS_OK;
}

/* "slow_down answered N times" for the audit entry that ends an approval
 * request, or NULL when it never was. */
static const char *slow_down_note(int64_t n, char buf[64])
{
	if (n <= 0 || str_fmt(buf, 64, "slow_down answered %lld time%s", (long long)n,
	    n == 1 ? "" : "s") != CS_OK)
		return NULL;
	return buf;
}

/* The pending approval r: expired, polled too fast, or still waiting. */
static enum cs_err pending_answer(struct store_conn *c, struct store_approval_row *r,
    const struct approval_ask *q, struct approval_answer *a)
{
	enum cs_err e;
	char note[64];
	int64_t now = q->now;
	if (r->expires_at <= now) {
		/* The person never decided: expired_token once; the next call
		 * starts a new approval. */
		if ((e = store_approval_set_status(c, r->id, "pending", "expired", 0)) != CS_OK ||
		    (e = audit_row(c, &(struct audit_entry){ .ts = now, .actor = q->actor,
		    .action = "approval.expired", .outcome = "expired" }, r,
		    slow_down_note(r->slow_downs, note))) != CS_OK)
			return e;
		a->outcome = APPROVAL_EXPIRED;
		return CS_OK;
	}
	bool slow = now - r->last_poll_at < r->interval;
	if (slow) {
		r->interval += SLOW_DOWN_STEP;
		/* Audited the first time only; the rest are counted (slow_downs). */
		if (r->slow_downs == 0 && (e = audit_row(c, &(struct audit_entry){ .ts = now,
		    .actor = q->actor, .action = "approval.slow_down", .outcome = "slow_down" }, r,
		    "the first; later ones are counted")) != CS_OK)
			return e;
		a->outcome = APPROVAL_SLOW_DOWN;
	} else {
		a->outcome = APPROVAL_PENDING;
	}
	if ((e = store_approval_poll(c, r->id, now, r->interval, slow)) != CS_OK)
		return e;
	if ((a->approval_id = strdup(r->id)) == NULL)
		return CS_ENOMEM;
	a->expires_in = r->expires_at - now;
	a->interval = r->interval;
	return CS_OK;
}

/* (a) of approval_check: an approved, unused approval is released while its
 * decision is younger than request_ttl; an older one expires (and the search
 * goes on).  *found set when a->outcome is APPROVAL_RELEASE. */
static enum cs_err check_approved(struct store_conn *c, const struct config *cfg,
    const struct approval_ask *q, struct approval_answer *a, bool *found)
{
	enum cs_err e = CS_OK;
	struct store_approval_row r;
	*found = false;
	memset(&r, 0, sizeof r);
	for (int i = 0; i < STALE_MAX; i++) {
		e = store_approval_find_unused(c, q->k->id, q->action, q->digest, &r);
		if (e == CS_ENOENT)
			return CS_OK;
		if (e != CS_OK)
			return e;
		if (r.decided_at + cfg->consent_request_ttl > q->now) {
			if ((a->approval_id = strdup(r.id)) == NULL)
				e = CS_ENOMEM;
			a->outcome = APPROVAL_RELEASE;
			a->expires_in = r.decided_at + cfg->consent_request_ttl - q->now;
			*found = e == CS_OK;
			break;
		}
		if ((e = store_approval_set_status(c, r.id, "approved", "expired", 0)) != CS_OK ||
		    (e = audit_row(c, &(struct audit_entry){ .ts = q->now, .actor = q->actor,
		    .action = "approval.expired", .outcome = "expired" }, &r,
		    "approved but not used within request_ttl")) != CS_OK)
			break;
		store_approval_row_clear(&r);
	}
	store_approval_row_clear(&r);
	return e;
}

/* (b) of approval_check: the pending approval for these exact parameters,
 * answered as pending, slow_down or expired.  *found when there is one. */
static enum cs_err check_pending(struct store_conn *c, const struct approval_ask *q,
    struct approval_answer *a, bool *found)
{
	enum cs_err e;
	struct store_approval_row r;

	memset(&r, 0, sizeof r);
	e = store_approval_find(c, q->k->id, q->action, q->digest, "pending", &r);
	if (e == CS_OK) {
		e = pending_answer(c, &r, q, a);
		*found = true;
	} else if (e == CS_ENOENT) {
		e = CS_OK;
	}
	store_approval_row_clear(&r);
	return e;
}

/* The ask names a consent, an action and its parameters, and (SECURITY)
 * the digest binds exactly the text the person will see: the parameters
 * are the canonical bytes, so their hash must be the digest. */
static bool ask_valid(const struct approval_ask *q)
{
	char check[APPROVAL_DIGEST_LEN + 1];

	if (q == NULL || q->k == NULL || q->k->id == NULL ||
	    q->k->subject == NULL || q->k->agent == NULL || q->k->resource == NULL ||
	    q->k->user_id <= 0 || q->action == NULL || q->action[0] == '\0' ||
	    q->parameters == NULL || q->digest == NULL)
		return false;
	digest_bytes(q->parameters, strlen(q->parameters), check);
	return strcmp(check, q->digest) == 0;
}

/* A standing rule of the person's that lets this call through (issue #32):
 * *found, with the rule named as the decider. */
static enum cs_err check_standing(struct store_conn *c, const struct config *cfg,
    const struct approval_ask *q, struct approval_answer *a, bool *found)
{
	enum cs_err e;
	char by[64];

	if ((e = standing_check(c, cfg, q->k, q->action, q->parameters, q->digest, q->now,
	    &a->rule_id)) != CS_OK)
		return e;
	if (a->rule_id == NULL)
		return CS_OK;
	if ((e = str_fmt(by, sizeof by, "rule %s", a->rule_id)) != CS_OK)
		return e;
	if ((a->decided_by = strdup(by)) == NULL)
		return CS_ENOMEM;
	a->outcome = APPROVAL_RELEASE;
	*found = true;
	return CS_OK;
}

/* A denial of these exact parameters still inside deny_cooldown and not
 * lifted on /me: *found, with how long it holds. */
static enum cs_err check_denied(struct store_conn *c, const struct config *cfg,
    const struct approval_ask *q, struct approval_answer *a, bool *found)
{
	enum cs_err e;
	int64_t lifted = 0;
	struct store_approval_row r;

	memset(&r, 0, sizeof r);
	e = store_approval_find(c, q->k->id, q->action, q->digest, "denied", &r);
	if (e == CS_OK && r.decided_at + cfg->consent_deny_cooldown > q->now &&
	    (e = store_approval_block_lifted_at(c, r.id, &lifted)) == CS_OK && lifted == 0) {
		a->outcome = APPROVAL_DENIED;
		/* How long the denial holds (the MCP gateway says until when). */
		a->retry_after = r.decided_at + cfg->consent_deny_cooldown - q->now;
		*found = true;
	} else if (e == CS_ENOENT) {
		e = CS_OK;
	}
	store_approval_row_clear(&r);
	return e;
}

static enum cs_err check_once(struct store_conn *c, const struct config *cfg,
    const struct approval_ask *q, struct person_token *pt, struct approval_answer *out)
{
	enum cs_err e;
	bool in_tx = false, found = false;
	int live = 0;
	struct approval_answer a;

	memset(&a, 0, sizeof a);
	if (c == NULL || cfg == NULL || !ask_valid(q) || out == NULL)
		return CS_EINVAL;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	in_tx = true;
	/* SECURITY: invariant 9 -- never without a live consent, checked again
	 * inside the transaction (the grant may predate a revocation). */
	if ((e = store_approval_consent_live(c, q->k->id, q->now, &live)) != CS_OK)
		goto out;
	if (!live) {
		a.outcome = APPROVAL_CONSENT_ENDED;
		goto commit;
	}
	if ((e = check_approved(c, cfg, q, &a, &found)) != CS_OK)
		goto out;
	if (found)
		goto commit;
	/* Issue #32: a standing rule of the person's covers this call.  After
	 * (a): the person's approval of this very call (the one a rule is made
	 * with) is used first, so a rule's uses count only the calls it let through. */
	if ((e = check_standing(c, cfg, q, &a, &found)) != CS_OK)
		goto out;
	if (found)
		goto commit;

	/* (b) the pending approval for these exact parameters. */
	if ((e = check_pending(c, q, &a, &found)) != CS_OK)
		goto out;
	if (found)
		goto commit;

	/* (c) a recent denial of these exact parameters holds for deny_cooldown,
	 * unless the person let it ask again on /me (approval_block.h). */
	if ((e = check_denied(c, cfg, q, &a, &found)) != CS_OK)
		goto out;
	if (found)
		goto commit;

	/* (d) a new approval request. */
	if ((e = check_new(c, cfg, q, pt, &a)) != CS_OK)
		goto out;

commit:
	if ((e = store_commit(c)) != CS_OK)
		goto out;
	in_tx = false;
	*out = a;
	memset(&a, 0, sizeof a);
	e = CS_OK;
out:
	if (in_tx)
		store_rollback(c);
	approval_answer_clear(&a);
	return e;
}

/* One transaction whose only effect outside the database is the person's
 * token, taken once whatever the runs (pt): run again when another node's
 * conflicted with it (two nodes asking for the same new approval at once: the
 * run after finds the other's pending request; or for two new approvals of
 * one person: the run after makes its own, on the token already taken). */
enum cs_err approval_check(struct store_conn *c, const struct config *cfg,
    const struct approval_ask *q, struct approval_answer *out)
{
	enum cs_err e;
	int n = 0;
	struct person_token pt = { .asked = false };
	do
		e = check_once(c, cfg, q, &pt, out);
	while (store_retry(c, e, &n));
	return e;
}

/* --- redemption -------------------------------------------------------- */

static const char *refusal_reason(const struct store_approval_row *r, const struct config *cfg,
    int64_t now)
{
	if (strcmp(r->status, "used") == 0)
		return "already used";
	if (strcmp(r->status, "cancelled") == 0)
		return "cancelled with its consent";
	if (strcmp(r->status, "pending") == 0)
		return "not decided";
	if (strcmp(r->status, "denied") == 0)
		return "denied";
	if (strcmp(r->status, "expired") == 0)
		return "expired";
	if (r->decided_at + cfg->consent_request_ttl <= now)
		return "decision older than request_ttl";
	return "consent not live";
}

enum cs_err approval_redeem(struct store_conn *c, const struct config *cfg, const char *approval_id,
    const char *actor, int64_t now, enum approval_redeem_outcome *oc)
{
	enum cs_err e;
	int changed = 0;
	struct store_approval_row r;
	struct audit_entry what = { .ts = now, .actor = actor };

	memset(&r, 0, sizeof r);
	if (c == NULL || cfg == NULL || approval_id == NULL || oc == NULL)
		return CS_EINVAL;
	if ((e = store_approval_get(c, approval_id, &r)) != CS_OK)
		return e;
	/* SECURITY: invariant 9 -- the one UPDATE that marks it used is the check. */
	if ((e = store_approval_use(c, approval_id, cfg->consent_request_ttl, now, &changed)) != CS_OK)
		goto out;
	if (!changed) {
		/* Recorded in the caller's transaction: it stays only if the caller
		 * commits after this refusal. */
		what.action = "approval.refused";
		what.outcome = "refused";
		if ((e = audit_row(c, &what, &r, refusal_reason(&r, cfg, now))) == CS_OK)
			*oc = APPROVAL_NOT_REDEEMABLE;
		goto out;
	}
	what.action = "approval.released";
	what.outcome = "ok";
	if ((e = audit_row(c, &what, &r, NULL)) == CS_OK)
		*oc = APPROVAL_REDEEMED;
out:
	store_approval_row_clear(&r);
	return e;
}

void approval_redeem_counted(enum approval_redeem_outcome oc)
{
	metrics_inc(M_APPROVALS, oc == APPROVAL_REDEEMED ? "used" : "not_redeemable");
}

/* --- the person's decision --------------------------------------------- */

/* Inside approval_decide's transaction, for the pending row r: an expiry or a
 * consent no longer live is recorded (and closes it), else the decision. */
static enum cs_err decide_pending(struct store_conn *c, const struct approval_decision *d,
    struct store_approval_row *r, enum approval_decide_outcome *oc)
{
	enum cs_err e;
	int live = 0;
	char note[64];
	struct audit_entry what = { .ts = d->now, .actor = d->actor };
	*oc = APPROVAL_CLOSED;
	if (r->expires_at <= d->now) {
		/* Record the expiry, then refuse the decision. */
		what.action = "approval.expired";
		what.outcome = "expired";
		if ((e = store_approval_set_status(c, r->id, "pending", "expired", 0)) != CS_OK)
			return e;
		return audit_row(c, &what, r, NULL);
	}
	/* SECURITY: invariant 9 -- an approval never outlives its consent; one
	 * whose consent expired (revocation cancels them at once) is cancelled. */
	if ((e = store_approval_consent_live(c, r->consent_id, d->now, &live)) != CS_OK)
		return e;
	if (!live) {
		what.action = "approval.cancelled";
		what.outcome = "cancelled";
		if ((e = store_approval_set_status(c, r->id, "pending", "cancelled", 0)) != CS_OK)
			return e;
		return audit_row(c, &what, r, "consent not live");
	}
	what.action = d->approve ? "approval.approved" : "approval.denied";
	what.outcome = d->approve ? "approved" : "denied";
	if ((e = store_approval_set_status(c, r->id, "pending", what.outcome, d->now)) != CS_OK ||
	    (e = audit_row(c, &what, r, slow_down_note(r->slow_downs, note))) != CS_OK)
		return e;
	/* Issue #32: the standing rule made with this approval, in its transaction. */
	if (d->approve && d->rule != NULL) {
		if (d->rule->approval_id == NULL || strcmp(d->rule->approval_id, r->id) != 0)
			return CS_EINVAL;
		if ((e = standing_insert(c, d->rule, d->actor, d->now)) != CS_OK)
			return e;
	}
	*oc = APPROVAL_DECIDED;
	return CS_OK;
}

static enum cs_err decide_once(struct store_conn *c, const struct config *cfg,
    const struct approval_decision *d, enum approval_decide_outcome *oc)
{
	enum cs_err e;
	struct store_approval_row r;
	enum approval_decide_outcome o = APPROVAL_CLOSED;

	memset(&r, 0, sizeof r);
	if (c == NULL || cfg == NULL || d == NULL || d->id == NULL || oc == NULL)
		return CS_EINVAL;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if ((e = store_approval_get(c, d->id, &r)) != CS_OK)
		goto out;
	/* SECURITY: invariant 4 -- only the person the agent acts for decides. */
	if (d->user_id <= 0 || r.user_id != d->user_id)
		o = APPROVAL_NOT_YOURS;
	else if (strcmp(r.status, "pending") == 0 && (e = decide_pending(c, d, &r, &o)) != CS_OK)
		goto out;
	/* Nothing was written for someone else's or a decided approval. */
out:
	if ((e = store_end(c, e)) == CS_OK)
		*oc = o;
	if (e == CS_OK)
		metrics_inc(M_APPROVALS, o == APPROVAL_DECIDED ? (d->approve ? "approved" : "denied") :
		    o == APPROVAL_NOT_YOURS ? "not_yours" : "closed");
	store_approval_row_clear(&r);
	return e;
}

enum cs_err approval_decide(struct store_conn *c, const struct config *cfg,
    const struct approval_decision *d, enum approval_decide_outcome *oc)
{
	enum cs_err e;
	int n = 0;
	do
		e = decide_once(c, cfg, d, oc);
	while (store_retry(c, e, &n));
	return e;
}

/* --- reading ----------------------------------------------------------- */

enum cs_err approval_get(struct store_conn *c, const char *id, struct approval *out)
{
	enum cs_err e;
	struct store_approval_row r;
	memset(&r, 0, sizeof r);
	if (c == NULL || id == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_approval_get(c, id, &r)) == CS_OK)
		e = approval_from_row(&r, out);
	store_approval_row_clear(&r);
	return e;
}

enum cs_err approval_pending_for_user(struct store_conn *c, int64_t user_id, int64_t now,
    struct approval **out, size_t *n)
{
	enum cs_err e;
	struct store_approval_row *rows = NULL;
	struct approval *v = NULL;
	size_t nrows = 0, i = 0;

	if (c == NULL || out == NULL || n == NULL)
		return CS_EINVAL;
	if ((e = store_approval_list_pending(c, user_id, now, APPROVAL_LIST_MAX, &rows,
	    &nrows)) != CS_OK)
		goto out;
	if (nrows > 0 && (v = calloc(nrows, sizeof *v)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	for (; i < nrows; i++)
		if ((e = approval_from_row(&rows[i], &v[i])) != CS_OK)
			goto out;
	*out = v;
	*n = nrows;
	v = NULL;
out:
	approval_list_free(v, i);
	store_approval_rows_free(rows, nrows);
	return e;
}
