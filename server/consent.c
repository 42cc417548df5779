/* consent.c -- consent requests and consents (flows A, G): the token
 * exchange's polling state machine, reading and listing, and the revocation
 * cascade; the person's decision is consent_decide.c, the blocks a "no" holds
 * consent_block.c.  Every change commits in one transaction with its audit
 * entries; it must never let anyone but a consent's person end it as theirs. */
#include <stdlib.h>
#include <string.h>
#include <time.h>


#include "audit.h"
#include "b64.h"
#include "buf.h"
#include "consent_memo.h"
#include "consent_priv.h"
#include "health.h"
#include "metrics.h"
#include "store_grant.h"
#include "store_user.h"

#define SLOW_DOWN_STEP 5             /* seconds added to the interval on slow_down */

/* --- ids --------------------------------------------------------------- */

/* Consent and consent request ids are b64url_random_id's. */
_Static_assert(CONSENT_ID_LEN == B64URL_ID_LEN, "CONSENT_ID_LEN is B64URL_ID_LEN");

/* --- structs ----------------------------------------------------------- */

void consent_audit_about(const struct consent *k, const char *actor, int64_t now,
    struct audit_entry *a)
{
	a->ts = now;
	a->actor = actor;
	a->subject = k->subject;
	a->agent = k->agent;
	a->resource = k->resource;
	a->consent_id = k->id;
}

void consent_clear(struct consent *k)
{
	if (k == NULL)
		return;
	free(k->strings);
	scope_set_clear(&k->granted);
	scope_set_clear(&k->declined);
	memset(k, 0, sizeof *k);
}

void consent_request_clear(struct consent_request *r)
{
	if (r == NULL)
		return;
	free(r->strings);
	scope_set_clear(&r->scopes);
	scope_set_clear(&r->pre_granted);
	memset(r, 0, sizeof *r);
}

void consent_answer_clear(struct consent_answer *a)
{
	if (a == NULL)
		return;
	consent_clear(&a->live);
	scope_set_clear(&a->grant_scopes);
	free(a->request_id);
	memset(a, 0, sizeof *a);
}

/* t as UTC time ("2006-01-02T15:04:05Z"), or "" when it cannot be shown. */
static void utc_time(int64_t t, char *out, size_t outlen)
{
	struct tm tm;
	time_t tt = (time_t)t;
	if (outlen == 0)
		return;
	out[0] = '\0';
	if ((int64_t)tt == t && gmtime_r(&tt, &tm) != NULL)
		strftime(out, outlen, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

enum cs_err consent_answer_description(const struct consent_answer *a, char *out, size_t outlen)
{
	static const char kept[] = "; the pending request keeps the reason the person sees (a new "
	    "reason is shown only with new scopes, or in the next request)";
	char when[32];
	long long iv = (long long)a->interval;
	switch (a->outcome) {
	case CONSENT_REQUIRED:
		if (a->reconnect)
			return str_fmt(out, outlen, "the consent's provider connection must be made "
			    "again%s%s%s: send the person to consent_uri, then poll every %lld s",
			    a->reconnect_why ? " (" : "", a->reconnect_why ? a->reconnect_why : "",
			    a->reconnect_why ? ")" : "", iv);
		if (a->merged)
			return str_fmt(out, outlen, "the request was updated: the pending request now "
			    "also asks for the new scopes; the person decides on it at consent_uri (poll "
			    "every %lld s)", iv);
		return str_fmt(out, outlen, "the person has not consented: send them to consent_uri, "
		    "then poll every %lld s", iv);
	case CONSENT_PENDING:
		return str_fmt(out, outlen, "the person has not decided yet; poll again in %lld s%s",
		    iv, a->reason_kept ? kept : "");
	case CONSENT_SLOW_DOWN:
		return str_fmt(out, outlen, "polled faster than the interval: wait %lld s between "
		    "calls from now on%s", iv, a->reason_kept ? kept : "");
	case CONSENT_DENIED:
		utc_time(a->denied_until, when, sizeof when);
		return str_fmt(out, outlen, "the person denied this request; a new request can be "
		    "made from %s", when[0] ? when : "the end of [consent] deny_cooldown");
	case CONSENT_EXPIRED:
		return str_fmt(out, outlen, "the consent request expired before the person decided; "
		    "the next call starts a new one");
	case CONSENT_TOO_MANY:
		if (a->rate_limited)
			return str_fmt(out, outlen, "rate limit exceeded: the person limit ([limits] "
			    "person_rate) refused a new consent request for this person; retry after "
			    "%lld s", (long long)(a->retry_after > 0 ? a->retry_after : 1));
		return str_fmt(out, outlen, "this person has too many pending requests; retry after "
		    "%lld s", (long long)(a->retry_after > 0 ? a->retry_after : 1));
	default:
		return str_fmt(out, outlen, "the consent was found");
	}
}

ARRAY_FREE_FN(struct consent, consent_clear, consent_list_free)
ARRAY_FREE_FN(struct consent_request, consent_request_clear, consent_request_list_free)

bool consent_is_live(const struct consent *k, int64_t now)
{
	return k != NULL && k->revoked_at == 0 && k->expires_at > now;
}

static const char *consent_state(int64_t revoked_at, int64_t expires_at, int reconnect,
    int64_t now)
{
	if (revoked_at != 0)
		return "revoked";
	if (expires_at <= now)
		return "expired";
	return reconnect ? "reconnect_required" : "live";
}

/* Moves a row into *out: the row's block of strings changes owner (it
 * becomes out->strings) and the row's text fields are NULL after, so nothing
 * reads them through the row once the consent may be gone.  *out written
 * only on CS_OK; on failure the row keeps its strings. */
static enum cs_err consent_from_row(struct store_consent_row *r, int64_t now, struct consent *out)
{
	struct consent k;
	enum cs_err e;
	memset(&k, 0, sizeof k);
	if ((e = consent_scopes_from_db(r->granted, &k.granted)) != CS_OK ||
	    (e = consent_scopes_from_db(r->declined, &k.declined)) != CS_OK)
		goto out;
	k.state = consent_state(r->revoked_at, r->expires_at, r->reconnect_required, now);
	k.strings = r->block;
	k.id = r->id;
	k.subject = r->subject;
	k.agent = r->agent;
	k.resource = r->resource;
	k.revoked_by = r->revoked_by;
	k.revoke_reason = r->revoke_reason;
	k.request_id = r->request_id;
	k.last_used_at = r->last_used_at;
	k.user_id = r->user_id;
	k.offline = r->offline != 0;
	k.created_at = r->created_at;
	k.expires_at = r->expires_at;
	k.revoked_at = r->revoked_at;
	k.reconnect_required = r->reconnect_required != 0;
	k.reconnect_reason = r->reconnect_reason;
	k.granted_by = r->granted_by;
	r->block = NULL;
	r->reconnect_reason = r->granted_by = NULL;
	r->id = r->subject = r->agent = r->resource = r->granted = r->declined = NULL;
	r->revoked_by = r->revoke_reason = r->request_id = NULL;
	*out = k;
	memset(&k, 0, sizeof k);
out:
	consent_clear(&k);
	return e;
}

/* Moves a row into *out as consent_from_row does (out->strings is the row's block). */
static enum cs_err request_from_row(struct store_creq_row *r, struct consent_request *out)
{
	struct consent_request q;
	enum cs_err e;
	memset(&q, 0, sizeof q);
	if ((e = consent_scopes_from_db(r->scopes, &q.scopes)) != CS_OK ||
	    (e = consent_scopes_from_db(r->pre_granted, &q.pre_granted)) != CS_OK)
		goto out;
	q.strings = r->block;
	q.id = r->id;
	q.subject = r->subject;
	q.agent = r->agent;
	q.resource = r->resource;
	q.reason = r->reason;
	q.status = r->status;
	q.consent_id = r->consent_id;
	q.narrowed = r->narrowed;
	q.user_id = r->user_id;
	q.created_at = r->created_at;
	q.expires_at = r->expires_at;
	q.decided_at = r->decided_at;
	q.cooldown_lifted_at = r->cooldown_lifted_at;
	r->block = NULL;
	r->id = r->subject = r->agent = r->resource = r->scopes = r->pre_granted = NULL;
	r->reason = r->status = r->consent_id = r->narrowed = NULL;
	*out = q;
	memset(&q, 0, sizeof q);
out:
	consent_request_clear(&q);
	return e;
}

/* --- revocation -------------------------------------------------------- */

const char *const consent_state_names[CONSENT_STATES] = {
	[STORE_CONSENT_LIVE] = "live", [STORE_CONSENT_EXPIRED] = "expired",
	[STORE_CONSENT_REVOKED] = "revoked", [STORE_CONSENT_RECONNECT_REQUIRED] = "reconnect_required",
};
_Static_assert(CONSENT_STATES == STORE_CONSENT_STATE__MAX, "one name a state");

enum cs_err consent_count_by_state(struct store_conn *c, int64_t now, int64_t out[CONSENT_STATES])
{
	if (c == NULL || out == NULL)
		return CS_EINVAL;
	return store_consent_count_states(c, now, out);
}

enum cs_err consent_touch(struct store_conn *c, const char *consent_id, int64_t now)
{
	if (c == NULL || consent_id == NULL)
		return CS_EINVAL;
	return store_consent_touch(c, consent_id, now);
}

/* Actors as the callers of consent_revoke write them: "user:<subject>" for a
 * person (me_pages.c), "admin:<name>" for the admin pages and API, "cli" for
 * `consentd admin` (admin_cli.c). */
enum consent_revoker consent_revoker(const struct consent *k)
{
	const char *by;
	if (k == NULL || k->revoked_at == 0)
		return CONSENT_BY_NOBODY;
	by = k->revoked_by ? k->revoked_by : "";
	/* An administrator's reason is free text: "replaced" there is still theirs. */
	if (strncmp(by, "admin:", 6) == 0 || strcmp(by, "cli") == 0)
		return CONSENT_BY_ADMIN;
	/* Only decide_approve writes CONSENT_REASON_REPLACED, with the deciding person as actor. */
	if (k->revoke_reason != NULL && strcmp(k->revoke_reason, CONSENT_REASON_REPLACED) == 0)
		return CONSENT_BY_REPLACEMENT;
	if (strncmp(by, "user:", 5) == 0 && k->subject != NULL && strcmp(by + 5, k->subject) == 0)
		return CONSENT_BY_PERSON;
	return CONSENT_BY_OTHER;
}

enum cs_err consent_revoke_locked(struct store_conn *c, const struct store_consent_row *k,
    const struct consent_actor *who, const char *reason, const char *detail, int *changed)
{
	enum cs_err e;
	*changed = 0;
	if ((e = store_consent_set_revoked(c, k->id, who->now, who->actor, reason, changed)) != CS_OK)
		return e;
	if (!*changed)
		return CS_OK;
	/* SECURITY: a revoked consent's grants and refresh tokens die with it, in
	 * the same transaction: introspection and refresh see it at once. */
	if ((e = store_consent_cascade(c, k->id, who->now)) != CS_OK)
		return e;
	return audit_append(c, &(struct audit_entry){ .ts = who->now, .actor = who->actor,
	    .action = "consent.revoked", .subject = k->subject, .agent = k->agent,
	    .resource = k->resource, .scopes = k->granted, .consent_id = k->id,
	    .request_id = k->request_id, .outcome = "ok", .detail = detail });
}

enum cs_err consent_revoke_tx(struct store_conn *c, const char *consent_id,
    const struct consent_actor *who, const char *reason, enum consent_revoke_outcome *out)
{
	enum cs_err e;
	int changed = 0;
	struct store_consent_row k;

	memset(&k, 0, sizeof k);
	if (c == NULL || consent_id == NULL || who == NULL || out == NULL)
		return CS_EINVAL;
	e = store_consent_get(c, consent_id, &k);
	if (e == CS_ENOENT) {
		*out = CONSENT_REVOKE_UNKNOWN;
		return CS_OK;
	}
	if (e != CS_OK)
		goto out;
	/* SECURITY: a person revokes only their own consents. */
	if (who->user_id > 0 && k.user_id != who->user_id) {
		*out = CONSENT_REVOKE_NOT_YOURS;
		goto out;
	}
	if (k.revoked_at == 0 &&
	    (e = consent_revoke_locked(c, &k, who, reason, reason, &changed)) != CS_OK)
		goto out;
	*out = changed ? CONSENT_REVOKED : CONSENT_REVOKE_ALREADY;
out:
	store_consent_row_clear(&k);
	return e;
}

enum cs_err consent_revoke(struct store_conn *c, const char *consent_id,
    const struct consent_actor *who, const char *reason, enum consent_revoke_outcome *out)
{
	enum cs_err e;
	enum consent_revoke_outcome o = CONSENT_REVOKE_UNKNOWN;
	if (c == NULL || out == NULL)
		return CS_EINVAL;
	/* One transaction with no effect outside the database: run again when
	 * another node's conflicted with it (store_retry). */
	int n = 0;
	do {
		o = CONSENT_REVOKE_UNKNOWN;
		if ((e = store_begin(c)) == CS_OK)
			e = store_end(c, consent_revoke_tx(c, consent_id, who, reason, &o));
	} while (store_retry(c, e, &n));
	if (e != CS_OK)
		return e;
	*out = o;
	return CS_OK;
}

enum cs_err consent_refuse_binding(struct store_conn *c, const struct consent_refusal *r)
{
	enum cs_err e;
	if (c == NULL || r == NULL)
		return CS_EINVAL;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	return store_end(c, audit_append(c, &(struct audit_entry){ .ts = r->now,
	    .actor = r->actor, .action = "consent.binding_refused", .subject = r->subject,
	    .agent = r->agent, .resource = r->resource, .request_id = r->request_id,
	    .outcome = "refused", .detail = "opened by another account" }));
}

/* --- flow A: the token exchange's state machine ------------------------ */

/* (a): K covers requested when every requested scope was decided on (granted
 * or declined) and at least one was granted; *grant = requested ∩ granted. */
static enum cs_err live_covers(const struct scope_set *kg, const struct scope_set *kd,
    const struct scope_set *requested, bool *covers, struct scope_set *grant)
{
	bool any = false;
	*covers = false;
	for (size_t i = 0; i < requested->n; i++) {
		bool g = scope_set_has(kg, requested->v[i]);
		if (!g && !scope_set_has(kd, requested->v[i]))
			return CS_OK;
		any = any || g;
	}
	if (!any)
		return CS_OK;
	*covers = true;
	return scope_set_intersect(grant, requested, kg);
}

/* scope_set_union's CS_ETOOBIG is a full set: the request's scopes would
 * pass CONSENT_MAX_SCOPES.  That is an answer (consent_exchange then writes
 * nothing), not a failure; any other error stays one. */
static enum cs_err too_many_scopes(enum cs_err e, struct consent_answer *a)
{
	if (e != CS_ETOOBIG)
		return e;
	a->outcome = CONSENT_TOO_MANY_SCOPES;
	return CS_OK;
}

const char *consent_slow_down_note(int64_t n, char buf[64])
{
	if (n <= 0)
		return NULL;
	if (str_fmt(buf, 64, "slow_down answered %lld time%s", (long long)n,
	    n == 1 ? "" : "s") != CS_OK)
		return NULL;              /* cannot happen: an int64 fits */
	return buf;
}

enum cs_err consent_request_open(struct store_conn *c, const struct config *cfg,
    struct store_creq_row *r, const struct audit_entry *about)
{
	enum cs_err e;
	struct audit_entry a = *about;
	r->status = "pending";
	r->created_at = about->ts;
	r->expires_at = about->ts + cfg->consent_request_ttl;
	r->last_poll_at = about->ts;
	r->interval = cfg->consent_interval;
	if ((e = store_creq_insert(c, r)) != CS_OK)
		return e;
	a.action = "consent.request.created";
	a.scopes = r->scopes;
	a.request_id = r->id;
	a.outcome = "pending";
	return audit_append(c, &a);
}

enum cs_err consent_request_expire(struct store_conn *c, const struct store_creq_row *r,
    const struct audit_entry *about)
{
	enum cs_err e;
	char note[64];
	struct audit_entry a = *about;
	if ((e = store_creq_decide(c, r->id, "expired", about->ts, NULL)) != CS_OK)
		return e;
	a.action = "consent.request.expired";
	a.scopes = r->scopes;
	a.request_id = r->id;
	a.outcome = "expired";
	a.detail = consent_slow_down_note(r->slow_downs, note);
	return audit_append(c, &a);
}

/* (b): a pending request exists for the triple. */
static enum cs_err exchange_pending(struct store_conn *c, const struct consent_ask *ask,
    struct store_creq_row *r, struct consent_answer *a)
{
	enum cs_err e;
	struct scope_set have;
	char *joined = NULL;
	int64_t now = ask->now;

	memset(&have, 0, sizeof have);
	if (r->expires_at <= now) {
		/* The person never decided: the gateway hears expired_token once, and
		 * its next call starts a new request. */
		if ((e = consent_request_expire(c, r, &(struct audit_entry){ .ts = now,
		    .actor = ask->actor, .subject = ask->subject, .agent = ask->agent,
		    .resource = ask->resource })) != CS_OK)
			goto out;
		a->outcome = CONSENT_EXPIRED;
		goto out;
	}
	if ((e = consent_scopes_from_db(r->scopes, &have)) != CS_OK)
		goto out;
	if (!scope_set_subset(ask->requested, &have)) {
		/* At most one pending request per triple: new scopes join it. */
		if ((e = scope_set_union(&have, ask->requested)) != CS_OK) {
			e = too_many_scopes(e, a);
			goto out;
		}
		if ((joined = scope_set_join(&have)) == NULL) {
			e = CS_ENOMEM;
			goto out;
		}
		if ((e = store_creq_merge(c, r->id, joined, ask->reason)) != CS_OK ||
		    (e = audit_append(c, &(struct audit_entry){ .ts = now, .actor = ask->actor,
		    .action = "consent.request.merged", .subject = ask->subject, .agent = ask->agent,
		    .resource = ask->resource, .scopes = joined, .request_id = r->id,
		    .outcome = "pending" })) != CS_OK)
			goto out;
		a->outcome = CONSENT_REQUIRED;
		a->merged = true;
	} else {
		bool slow = now - r->last_poll_at < r->interval;
		if (slow) {
			r->interval += SLOW_DOWN_STEP;
			/* Audited the first time only: a gateway polling in a loop would
			 * otherwise fill the chain; the rest are counted (slow_downs). */
			if (r->slow_downs == 0 &&
			    (e = audit_append(c, &(struct audit_entry){ .ts = now, .actor = ask->actor,
			    .action = "consent.request.slow_down", .subject = ask->subject,
			    .agent = ask->agent, .resource = ask->resource, .scopes = r->scopes,
			    .request_id = r->id, .outcome = "slow_down",
			    .detail = "the first; later ones are counted" })) != CS_OK)
				goto out;
			a->outcome = CONSENT_SLOW_DOWN;
		} else {
			a->outcome = CONSENT_PENDING;
		}
		/* SECURITY: the reason shown stays what the person may already be
		 * reading; the gateway is told it was not replaced. */
		a->reason_kept = ask->reason != NULL &&
		    (r->reason == NULL || strcmp(r->reason, ask->reason) != 0);
		if ((e = store_creq_poll(c, r->id, now, r->interval, slow)) != CS_OK)
			goto out;
	}
	if ((a->request_id = strdup(r->id)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	a->expires_in = r->expires_at - now;
	a->interval = r->interval;
	e = CS_OK;
out:
	free(joined);
	scope_set_clear(&have);
	return e;
}

/* (d) refused: the person has too many requests pending already, or (rated)
 * made new ones faster than [limits] person_rate allows. */
static enum cs_err exchange_refused(struct store_conn *c, const struct consent_ask *ask,
    int64_t earliest, bool rated, struct consent_answer *a)
{
	enum cs_err e;
	char *joined = scope_set_join(ask->requested);
	if (joined == NULL)
		return CS_ENOMEM;
	e = audit_append(c, &(struct audit_entry){ .ts = ask->now, .actor = ask->actor,
	    .action = "consent.request.refused", .subject = ask->subject, .agent = ask->agent,
	    .resource = ask->resource, .scopes = joined, .outcome = "refused",
	    .detail = rated ? "rate limit: person" : "too many pending requests" });
	free(joined);
	if (e == CS_OK) {
		a->outcome = CONSENT_TOO_MANY;
		a->rate_limited = rated;
		a->retry_after = earliest - ask->now >= 1 ? earliest - ask->now : 1;
	}
	return e;
}

/* (d): a new request of user_id, unless the person has too many pending
 * already; live_granted (or NULL) is what the live consent grants. */
static enum cs_err exchange_new(struct store_conn *c, const struct config *cfg,
    const struct consent_ask *ask, int64_t user_id, const struct scope_set *live_granted,
    struct consent_answer *a)
{
	enum cs_err e;
	int64_t count = 0, earliest = 0, now = ask->now;
	struct scope_set all;
	struct store_creq_row r;
	char id[CONSENT_ID_LEN + 1];
	char *joined = NULL, *pre = NULL;

	memset(&all, 0, sizeof all);
	memset(&r, 0, sizeof r);
	if ((e = store_creq_count_pending(c, user_id, now, &count, &earliest)) != CS_OK)
		goto out;
	if (count >= cfg->consent_max_pending_per_user) {
		e = exchange_refused(c, ask, earliest, false, a);
		goto out;
	}
	/* SECURITY: [limits] person: how fast requests for one person may appear
	 * on their pages, whatever agent asks (polls and merges are not new). */
	int64_t ra = 0;
	if (!rate_limits_take(ask->limits, LIMIT_PERSON, &user_id, sizeof user_id, &ra)) {
		e = exchange_refused(c, ask, now + ra, true, a);
		goto out;
	}
	/* The person sees everything the agent would hold, with what the live
	 * consent already grants pre-ticked. */
	if ((e = scope_set_union(&all, ask->requested)) != CS_OK ||
	    (live_granted != NULL && (e = scope_set_union(&all, live_granted)) != CS_OK)) {
		e = too_many_scopes(e, a);
		goto out;
	}
	if ((joined = scope_set_join(&all)) == NULL ||
	    (pre = scope_set_join(live_granted)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	if ((e = b64url_random_id(id)) != CS_OK)
		goto out;
	r.id = id;
	r.user_id = user_id;
	r.agent = (char *)ask->agent;
	r.resource = (char *)ask->resource;
	r.scopes = joined;
	r.pre_granted = pre;
	r.reason = (char *)ask->reason;
	if ((e = consent_request_open(c, cfg, &r, &(struct audit_entry){ .ts = now,
	    .actor = ask->actor, .subject = ask->subject, .agent = ask->agent,
	    .resource = ask->resource })) != CS_OK)
		goto out;
	if ((a->request_id = strdup(id)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	a->outcome = CONSENT_REQUIRED;
	a->expires_in = cfg->consent_request_ttl;
	a->interval = cfg->consent_interval;
out:
	free(joined);
	free(pre);
	scope_set_clear(&all);
	return e;
}

/* (c) a recent "no" holds for deny_cooldown, unless the person lifted it:
 * a denied request for the triple, or -- asked only for scopes the person
 * unticked on the live consent (live, or NULL) -- those declined scopes
 * (consent.h).  a->outcome is CONSENT_DENIED when one holds. */
static enum cs_err exchange_held(struct store_conn *c, const struct config *cfg,
    const struct consent_ask *ask, int64_t user_id, const struct store_consent_row *live,
    struct consent_answer *a)
{
	enum cs_err e;
	int64_t denied_at = 0, lifted_at = 0, now = ask->now;
	struct consent_block b;
	struct scope_set kd;

	e = store_creq_last_denied(c, user_id, ask->agent, ask->resource, &denied_at, &lifted_at);
	if (e == CS_OK && lifted_at == 0 && now < denied_at + cfg->consent_deny_cooldown) {
		a->outcome = CONSENT_DENIED;
		a->denied_until = denied_at + cfg->consent_deny_cooldown;
		return CS_OK;
	} else if (e != CS_OK && e != CS_ENOENT) {
		return e;
	}
	if (live == NULL)
		return CS_OK;
	memset(&b, 0, sizeof b);
	memset(&kd, 0, sizeof kd);
	if ((e = consent_scopes_from_db(live->declined, &kd)) == CS_OK &&
	    scope_set_subset(ask->requested, &kd) &&
	    (e = consent_declined_block(c, cfg, live, ask->requested, now, &b)) == CS_OK &&
	    b.request_id != NULL)
		a->outcome = CONSENT_DENIED;
	scope_set_clear(&kd);
	consent_block_clear(&b);
	return e;
}

/* (a) the live consent k of the call's triple, unrevoked and unexpired:
 * *covers when it answers the call with a grant (a->live, a->grant_scopes). */
static enum cs_err exchange_live(struct store_consent_row *k, const struct consent_ask *ask,
    bool *covers, struct consent_answer *a)
{
	enum cs_err e;
	struct scope_set kg, kd;
	memset(&kg, 0, sizeof kg);
	memset(&kd, 0, sizeof kd);
	*covers = false;
	if ((e = consent_scopes_from_db(k->granted, &kg)) != CS_OK ||
	    (e = consent_scopes_from_db(k->declined, &kd)) != CS_OK)
		goto out;
	/* SECURITY: a consent whose provider connection was rejected covers
	 * nothing until the person reconnects (flow D): consent_required. */
	if (!k->reconnect_required &&
	    (e = live_covers(&kg, &kd, ask->requested, covers, &a->grant_scopes)) != CS_OK)
		goto out;
	if (*covers && (e = consent_from_row(k, ask->now, &a->live)) == CS_OK)
		a->outcome = CONSENT_GRANT;
out:
	scope_set_clear(&kg);
	scope_set_clear(&kd);
	return e;
}

/* What the pending request, a "no" in force or a new request answers, after
 * (a) did not: live is the live consent (or NULL). */
static enum cs_err exchange_ask(struct store_conn *c, const struct config *cfg,
    const struct consent_ask *ask, int64_t user_id, const struct store_consent_row *live,
    struct consent_answer *a)
{
	enum cs_err e;
	struct store_creq_row r;
	struct scope_set kg;

	memset(&r, 0, sizeof r);
	memset(&kg, 0, sizeof kg);
	/* (b) the pending request: expired, merged, or polled. */
	e = store_creq_pending(c, user_id, ask->agent, ask->resource, &r);
	if (e == CS_OK) {
		e = exchange_pending(c, ask, &r, a);
		goto out;
	} else if (e != CS_ENOENT) {
		goto out;
	}
	/* (c) a "no" in force. */
	if ((e = exchange_held(c, cfg, ask, user_id, live, a)) != CS_OK ||
	    a->outcome == CONSENT_DENIED)
		goto out;
	/* (d) a new request. */
	if (live != NULL && (e = consent_scopes_from_db(live->granted, &kg)) != CS_OK)
		goto out;
	e = exchange_new(c, cfg, ask, user_id, live != NULL ? &kg : NULL, a);
out:
	store_creq_row_clear(&r);
	scope_set_clear(&kg);
	return e;
}

/* consent_exchange's and _remembered's arguments. */
static bool ask_ok(const struct store_conn *c, const struct config *cfg,
    const struct consent_ask *ask, const struct consent_answer *out)
{
	return c != NULL && cfg != NULL && ask != NULL && ask->issuer != NULL &&
	    ask->subject != NULL && ask->agent != NULL && ask->resource != NULL &&
	    ask->requested != NULL && ask->requested->n > 0 && out != NULL;
}

/* The memo's key (consent_memo.h) for ask's person, agent and resource. */
static struct consent_memo_key memo_key_of(const struct consent_ask *ask)
{
	return (struct consent_memo_key){ .issuer = ask->issuer, .subject = ask->subject,
		.agent = ask->agent, .resource = ask->resource };
}

/* The common case without a transaction: a person already known with a live
 * consent that covers the call.  Read on the thread's own connection, so only
 * committed rows; nothing is written.  *done false: take the full path.
 * SECURITY: the answer is a consent to sign for, and grant_issue reads that
 * consent again inside its own transaction and signs only for what is live
 * then -- as it does after the full path's transaction. */
static enum cs_err exchange_known(struct store_conn *c, const struct consent_ask *ask,
    struct consent_answer *out, bool *done)
{
	enum cs_err e;
	int64_t user_id = 0;
	bool covers = false;
	struct store_consent_row k;
	struct consent_answer a;

	*done = false;
	memset(&k, 0, sizeof k);
	memset(&a, 0, sizeof a);
	if ((e = store_user_find(c, ask->issuer, ask->subject, &user_id)) != CS_OK)
		return e == CS_ENOENT ? CS_OK : e;
	e = store_consent_current(c, user_id, ask->agent, ask->resource, &k);
	if (e == CS_ENOENT) {
		e = CS_OK;
		goto out;
	}
	if (e != CS_OK || k.expires_at <= ask->now)
		goto out;
	/* Remembered for flow A's next call (consent_exchange_remembered);
	 * forgotten again below when it does not cover this one. */
	const struct consent_memo_key mk = memo_key_of(ask);
	consent_memo_put(&mk, &k, ask->now);
	if ((e = exchange_live(&k, ask, &covers, &a)) != CS_OK || !covers) {
		consent_memo_forget(&mk);
		goto out;
	}
	*out = a;
	memset(&a, 0, sizeof a);
	*done = true;
out:
	store_consent_row_clear(&k);
	consent_answer_clear(&a);
	return e;
}

enum cs_err consent_exchange_remembered(struct store_conn *c, const struct config *cfg,
    const struct consent_ask *ask, struct consent_answer *out, bool *remembered)
{
	enum cs_err e;
	bool covers = false;
	struct store_consent_row k;
	struct consent_answer a;

	if (remembered == NULL)
		return CS_EINVAL;
	*remembered = false;
	memset(&k, 0, sizeof k);
	memset(&a, 0, sizeof a);
	if (!ask_ok(c, cfg, ask, out))
		return CS_EINVAL;
	const struct consent_memo_key mk = memo_key_of(ask);
	if (consent_memo_get(&mk, ask->now, &k)) {
		e = k.revoked_at == 0 && k.expires_at > ask->now ?
		    exchange_live(&k, ask, &covers, &a) : CS_OK;
		store_consent_row_clear(&k);
		if (e != CS_OK) {
			consent_answer_clear(&a);
			return e;
		}
		if (covers) {
			metrics_inc2(M_CACHE_LOOKUPS, "consent", "hit");
			*out = a;
			*remembered = true;
			return CS_OK;
		}
		consent_answer_clear(&a);
		consent_memo_forget(&mk);
	}
	metrics_inc2(M_CACHE_LOOKUPS, "consent", "miss");
	return consent_exchange(c, cfg, ask, out);
}

void consent_exchange_forget(const struct consent_ask *ask)
{
	if (ask == NULL)
		return;
	const struct consent_memo_key mk = memo_key_of(ask);
	metrics_inc2(M_CACHE_LOOKUPS, "consent", "stale");
	consent_memo_forget(&mk);
}

enum cs_err consent_exchange(struct store_conn *c, const struct config *cfg,
    const struct consent_ask *ask, struct consent_answer *out)
{
	enum cs_err e;
	bool in_tx = false, covers = false;
	int64_t user_id = 0;
	struct store_consent_row k;
	const struct store_consent_row *live = NULL;
	struct consent_answer a;

	memset(&k, 0, sizeof k);
	memset(&a, 0, sizeof a);
	if (!ask_ok(c, cfg, ask, out))
		return CS_EINVAL;
	if ((e = exchange_known(c, ask, out, &covers)) != CS_OK || covers)
		return e;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	in_tx = true;
	if ((e = store_user_put(c, &(struct store_user){ .issuer = ask->issuer,
	    .subject = ask->subject, .now = ask->now }, &user_id)) != CS_OK)
		goto out;
	/* (a) a live consent that covers the call: a grant. */
	e = store_consent_current(c, user_id, ask->agent, ask->resource, &k);
	if (e != CS_OK && e != CS_ENOENT)
		goto out;
	if (e == CS_OK && k.expires_at > ask->now) {
		live = &k;
		if ((e = exchange_live(&k, ask, &covers, &a)) != CS_OK)
			goto out;
	}
	if (!covers) {
		a.reconnect = live != NULL && k.reconnect_required;
		a.reconnect_why = a.reconnect ?
		    health_reason_gateway(health_reason_parse(k.reconnect_reason)) : NULL;
		if ((e = exchange_ask(c, cfg, ask, user_id, live, &a)) != CS_OK)
			goto out;
	}
	if (a.outcome == CONSENT_TOO_MANY_SCOPES) {
		/* Nothing is written for it, and nothing but the outcome answered. */
		store_rollback(c);
		in_tx = false;
		consent_answer_clear(&a);
		a.outcome = CONSENT_TOO_MANY_SCOPES;
	} else if ((e = store_commit(c)) != CS_OK) {
		goto out;
	}
	in_tx = false;
	*out = a;
	memset(&a, 0, sizeof a);
out:
	if (in_tx)
		store_rollback(c);
	store_consent_row_clear(&k);
	consent_answer_clear(&a);
	return e;
}

/* --- reading ----------------------------------------------------------- */

enum cs_err consent_request_get(struct store_conn *c, const char *id, struct consent_request *out)
{
	enum cs_err e;
	struct store_creq_row r;
	memset(&r, 0, sizeof r);
	if (c == NULL || id == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_creq_get(c, id, &r)) == CS_OK)
		e = request_from_row(&r, out);
	store_creq_row_clear(&r);
	return e;
}

enum cs_err consent_get(struct store_conn *c, const char *id, int64_t now, struct consent *out)
{
	enum cs_err e;
	struct store_consent_row r;
	memset(&r, 0, sizeof r);
	if (c == NULL || id == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_consent_get(c, id, &r)) == CS_OK)
		e = consent_from_row(&r, now, out);
	store_consent_row_clear(&r);
	return e;
}

enum cs_err consent_of_grant(struct store_conn *c, const char *jti, int64_t now,
    struct store_grant_row *g, struct consent *out)
{
	enum cs_err e;
	struct store_consent_row r;
	struct store_grant_row gr;
	memset(&r, 0, sizeof r);
	memset(&gr, 0, sizeof gr);
	if (c == NULL || jti == NULL || g == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_consent_of_grant(c, jti, &gr, &r)) == CS_OK &&
	    (e = consent_from_row(&r, now, out)) == CS_OK) {
		*g = gr;
		memset(&gr, 0, sizeof gr);
	}
	store_grant_row_clear(&gr);
	store_consent_row_clear(&r);
	return e;
}

enum cs_err consent_current(struct store_conn *c, int64_t user_id, const char *agent,
    const char *resource, int64_t now, struct consent *out)
{
	enum cs_err e;
	struct store_consent_row r;
	memset(&r, 0, sizeof r);
	if (c == NULL || agent == NULL || resource == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_consent_current(c, user_id, agent, resource, &r)) != CS_OK)
		goto out;
	if (r.expires_at <= now) {
		e = CS_ENOENT;
		goto out;
	}
	e = consent_from_row(&r, now, out);
out:
	store_consent_row_clear(&r);
	return e;
}

enum cs_err consent_list_for_user(struct store_conn *c, int64_t user_id, int64_t now, size_t max,
    struct consent **out, size_t *n)
{
	enum cs_err e;
	struct store_consent_row *rows = NULL;
	struct consent *v = NULL;
	size_t nrows = 0, i = 0;

	if (c == NULL || out == NULL || n == NULL)
		return CS_EINVAL;
	if ((e = store_consent_list_user(c, user_id, now, max, &rows, &nrows)) != CS_OK)
		goto out;
	if (nrows > 0 && (v = calloc(nrows, sizeof *v)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	for (; i < nrows; i++)
		if ((e = consent_from_row(&rows[i], now, &v[i])) != CS_OK)
			goto out;
	*out = v;
	*n = nrows;
	v = NULL;
out:
	consent_list_free(v, i);
	store_consent_rows_free(rows, nrows);
	return e;
}

enum cs_err consent_pending_for_user(struct store_conn *c, int64_t user_id, int64_t now,
    struct consent_request **out, size_t *n)
{
	enum cs_err e;
	struct store_creq_row *rows = NULL;
	struct consent_request *v = NULL;
	size_t nrows = 0, i = 0;

	if (c == NULL || out == NULL || n == NULL)
		return CS_EINVAL;
	if ((e = store_creq_list_pending(c, user_id, now, &rows, &nrows)) != CS_OK)
		goto out;
	if (nrows > 0 && (v = calloc(nrows, sizeof *v)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	for (; i < nrows; i++)
		if ((e = request_from_row(&rows[i], &v[i])) != CS_OK)
			goto out;
	*out = v;
	*n = nrows;
	v = NULL;
out:
	consent_request_list_free(v, i);
	store_creq_rows_free(rows, nrows);
	return e;
}
