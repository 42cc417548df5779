/* consent_decide.c -- flow B: the person's decision on a consent request,
 * and the version of a request as the person saw it.  It must never let
 * anyone but the requested person decide, nor grant what they did not see. */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "agent.h"
#include "audit.h"
#include "b64.h"
#include "buf.h"
#include "consent_priv.h"
#include "metrics.h"
#include "seal.h"

/* --- versions ---------------------------------------------------------- */

/* One field of a version: its length (4 bytes, big-endian) and its bytes, so
 * that no two different requests hash the same text.  NULL differs from "". */
static void version_field(EVP_MD_CTX *h, const char *s)
{
	size_t n = s != NULL ? strlen(s) : 0;
	unsigned char len[5] = { s != NULL, (unsigned char)(n >> 24), (unsigned char)(n >> 16),
	    (unsigned char)(n >> 8), (unsigned char)n };
	EVP_DigestUpdate(h, len, sizeof len);
	if (n > 0)
		EVP_DigestUpdate(h, s, n);
}

static void version_of(const char *agent, const char *resource, const struct scope_set *scopes,
    const struct scope_set *pre, const char *reason, char out[CONSENT_VERSION_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[32];
	unsigned int mdlen = 0;
	EVP_MD_CTX *h = EVP_MD_CTX_new();
	memset(md, 0, sizeof md);
	/* SHA-256 cannot fail once its context exists; without one, an all-zero
	 * version never equals a page's real one, so nothing is decided. */
	const EVP_MD *sha = alg_sha256();
	if (h != NULL && sha != NULL && EVP_DigestInit_ex(h, sha, NULL) == 1) {
		version_field(h, "consentd-request-v1");
		version_field(h, agent);
		version_field(h, resource);
		for (size_t i = 0; i < scopes->n; i++)
			version_field(h, scopes->v[i]);
		version_field(h, "|");
		for (size_t i = 0; i < pre->n; i++)
			version_field(h, pre->v[i]);
		version_field(h, "|");
		version_field(h, reason);
		if (EVP_DigestFinal_ex(h, md, &mdlen) != 1 || mdlen != sizeof md)
			memset(md, 0, sizeof md);
	}
	EVP_MD_CTX_free(h);
	for (size_t i = 0; i < sizeof md; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[CONSENT_VERSION_LEN] = '\0';
}

void consent_request_version(const struct consent_request *r, char out[CONSENT_VERSION_LEN + 1])
{
	version_of(r->agent, r->resource, &r->scopes, &r->pre_granted, r->reason, out);
}

/* true when have equals want (a page's version). */
static bool version_is(const char *have, const char *want)
{
	return strlen(want) == CONSENT_VERSION_LEN &&
	    CRYPTO_memcmp(have, want, CONSENT_VERSION_LEN) == 0;
}

/* *at when the stored request is still at version want (a page's). */
static enum cs_err row_at_version(const struct store_creq_row *r, const char *want, bool *at)
{
	struct scope_set scopes, pre;
	char have[CONSENT_VERSION_LEN + 1];
	enum cs_err e;
	memset(&scopes, 0, sizeof scopes);
	memset(&pre, 0, sizeof pre);
	*at = false;
	if ((e = consent_scopes_from_db(r->scopes, &scopes)) != CS_OK ||
	    (e = consent_scopes_from_db(r->pre_granted, &pre)) != CS_OK)
		goto out;
	version_of(r->agent, r->resource, &scopes, &pre, r->reason, have);
	*at = version_is(have, want);
out:
	scope_set_clear(&scopes);
	scope_set_clear(&pre);
	return e;
}

/* --- the decision ----------------------------------------------------- */

void consent_decided_clear(struct consent_decided *d)
{
	if (d == NULL)
		return;
	free(d->consent_id);
	memset(d, 0, sizeof *d);
}

/* true when the approval d may be made of a request of agent for resource
 * with the scopes req: its selection non-empty, ⊆ req, still configured and
 * allowed to the agent, and its duration within the resource's max_consent. */
static bool approval_ok(const struct config *cfg, const char *agent, const char *resource,
    const struct scope_set *req, const struct consent_decision *d)
{
	struct agent_view ag;
	const struct config_resource *res = config_resource(cfg, resource);
	if (!agent_resolve(cfg, agent, &ag) || res == NULL || d->duration < 1 ||
	    d->duration > res->max_consent)
		return false;
	if (d->selected.n == 0 || d->selected.n > CONSENT_MAX_SCOPES)
		return false;
	for (size_t i = 0; i < d->selected.n; i++) {
		const char *s = d->selected.v[i];
		/* SECURITY: granted ⊆ requested ∩ configured ∩ agent-allowed
		 * (invariant 8), whatever the form sent. */
		if (s == NULL || !scope_set_has(req, s) || config_scope(cfg, resource, s) == NULL ||
		    !agent_may_ask(&ag, resource, s))
			return false;
	}
	return true;
}

/* The new consent of an approval, for the request r: granted sel, declined
 * the rest of req; inserted and audited ("consent.request.approved",
 * "consent.granted") in the open transaction. */
static enum cs_err approve_insert(struct store_conn *c, const struct store_creq_row *r,
    const struct consent_actor *who, const struct consent_decision *d,
    const struct store_consent_row *k, size_t ndeclined)
{
	enum cs_err e;
	char detail[64], note[64];
	if ((e = store_consent_insert(c, k)) != CS_OK ||
	    (e = store_creq_decide(c, r->id, "approved", who->now, k->id)) != CS_OK ||
	    (e = audit_append(c, &(struct audit_entry){ .ts = who->now, .actor = who->actor,
	    .action = "consent.request.approved", .subject = r->subject, .agent = r->agent,
	    .resource = r->resource, .scopes = k->granted, .consent_id = k->id,
	    .request_id = r->id, .outcome = "approved",
	    .detail = consent_slow_down_note(r->slow_downs, note) })) != CS_OK)
		return e;
	if ((e = str_fmt(detail, sizeof detail, "declined=%zu offline=%d duration=%lld", ndeclined,
	    k->offline, (long long)d->duration)) != CS_OK)
		return e;
	return audit_append(c, &(struct audit_entry){ .ts = who->now, .actor = who->actor,
	    .action = "consent.granted", .subject = r->subject, .agent = r->agent,
	    .resource = r->resource, .scopes = k->granted, .consent_id = k->id,
	    .request_id = r->id, .outcome = "ok", .detail = detail });
}

/* Approve inside the open transaction (approval_ok holds): replace the
 * current consent by a new one, whose id goes to *new_id. */
static enum cs_err decide_approve(struct store_conn *c, const struct config *cfg,
    const struct store_creq_row *r, const struct consent_actor *who,
    const struct consent_decision *d, char **new_id)
{
	enum cs_err e;
	struct scope_set req, sel, declined;
	struct store_consent_row old, k;
	char id[CONSENT_ID_LEN + 1], detail[64];
	char *granted_s = NULL, *declined_s = NULL, *nid = NULL;
	int changed = 0;
	struct agent_view ag;
	bool agent_offline = agent_resolve(cfg, r->agent, &ag) && ag.offline;

	memset(&req, 0, sizeof req);
	memset(&sel, 0, sizeof sel);
	memset(&declined, 0, sizeof declined);
	memset(&old, 0, sizeof old);
	memset(&k, 0, sizeof k);
	if ((e = consent_scopes_from_db(r->scopes, &req)) != CS_OK ||
	    (e = scope_set_union(&sel, &d->selected)) != CS_OK ||
	    (e = scope_set_minus(&declined, &req, &sel)) != CS_OK)
		goto out;
	if ((granted_s = scope_set_join(&sel)) == NULL ||
	    (declined_s = scope_set_join(&declined)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	if ((e = b64url_random_id(id)) != CS_OK)
		goto out;
	if ((nid = strdup(id)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	/* The previous consent (live or merely expired: at most one is unrevoked)
	 * goes with its grants and refresh tokens in this same transaction. */
	e = store_consent_current(c, r->user_id, r->agent, r->resource, &old);
	if (e == CS_OK) {
		if ((e = str_fmt(detail, sizeof detail, "replaced by %s", id)) != CS_OK ||
		    (e = consent_revoke_locked(c, &old, who, CONSENT_REASON_REPLACED, detail,
		    &changed)) != CS_OK)
			goto out;
	} else if (e != CS_ENOENT) {
		goto out;
	}
	k.id = id;
	k.user_id = r->user_id;
	k.agent = r->agent;
	k.resource = r->resource;
	k.granted = granted_s;
	k.declined = declined_s;
	/* SECURITY: offline use only where the operator allowed it for this agent. */
	k.offline = d->offline && agent_offline;
	k.created_at = who->now;
	k.expires_at = who->now + d->duration;
	k.request_id = r->id;
	if ((e = approve_insert(c, r, who, d, &k, declined.n)) != CS_OK)
		goto out;
	*new_id = nid;
	nid = NULL;
out:
	free(nid);
	free(granted_s);
	free(declined_s);
	scope_set_clear(&req);
	scope_set_clear(&sel);
	scope_set_clear(&declined);
	store_consent_row_clear(&old);
	return e;
}

/* What the stored request r allows who to decide with d, checked before
 * anything is written (CONSENT_DECIDED: it may be recorded). */
static enum cs_err decide_check(const struct config *cfg, const struct store_creq_row *r,
    const struct consent_actor *who, const struct consent_decision *d,
    enum consent_decide_outcome *out)
{
	enum cs_err e;
	bool at = false;
	struct scope_set req;
	/* SECURITY: invariant 4 -- only the person the agent asked for decides. */
	if (who->user_id <= 0 || r->user_id != who->user_id) {
		*out = CONSENT_DECIDE_NOT_YOURS;
		return CS_OK;
	}
	/* An expired request is refused without writing: the token exchange
	 * records the expiry and tells the gateway expired_token once (flow A),
	 * whoever looked first. */
	if (strcmp(r->status, "pending") != 0 || r->expires_at <= who->now) {
		*out = CONSENT_DECIDE_CLOSED;
		return CS_OK;
	}
	*out = CONSENT_DECIDED;
	/* A denial grants nothing whatever the request holds now, so it stands
	 * for every version (an agent merging scopes cannot hold a denial off). */
	if (!d->approve)
		return CS_OK;
	/* SECURITY: an approval counts only for the request as the person saw it:
	 * checked inside the transaction, so no merge can slip in between. */
	if ((e = row_at_version(r, d->version, &at)) != CS_OK)
		return e;
	if (!at) {
		*out = CONSENT_DECIDE_CHANGED;
		return CS_OK;
	}
	memset(&req, 0, sizeof req);
	if ((e = consent_scopes_from_db(r->scopes, &req)) != CS_OK)
		return e;
	if (!approval_ok(cfg, r->agent, r->resource, &req, d))
		*out = CONSENT_DECIDE_INVALID;
	scope_set_clear(&req);
	return CS_OK;
}

enum cs_err consent_decide_tx(struct store_conn *c, const struct config *cfg,
    const char *request_id, const struct consent_actor *who, const struct consent_decision *d,
    struct consent_decided *out)
{
	enum cs_err e;
	enum consent_decide_outcome o = CONSENT_DECIDE_UNKNOWN;
	char *nid = NULL, note[64];
	struct store_creq_row r;

	memset(&r, 0, sizeof r);
	if (c == NULL || cfg == NULL || request_id == NULL || who == NULL || d == NULL ||
	    out == NULL)
		return CS_EINVAL;
	e = store_creq_get(c, request_id, &r);
	if (e == CS_ENOENT)
		e = CS_OK;                    /* CONSENT_DECIDE_UNKNOWN */
	else if (e != CS_OK || (e = decide_check(cfg, &r, who, d, &o)) != CS_OK ||
	    o != CONSENT_DECIDED)
		goto out;
	else if (d->approve)
		e = decide_approve(c, cfg, &r, who, d, &nid);
	/* Deny: the request only; a live consent stays as it was. */
	else if ((e = store_creq_decide(c, r.id, "denied", who->now, NULL)) == CS_OK)
		e = audit_append(c, &(struct audit_entry){ .ts = who->now, .actor = who->actor,
		    .action = "consent.request.denied", .subject = r.subject, .agent = r.agent,
		    .resource = r.resource, .scopes = r.scopes, .request_id = r.id,
		    .outcome = "denied", .detail = consent_slow_down_note(r.slow_downs, note) });
out:
	if (e == CS_OK) {
		out->outcome = o;
		out->consent_id = nid;
		nid = NULL;
	}
	free(nid);
	store_creq_row_clear(&r);
	return e;
}

/* The outcome in consentd_consent_requests_total (CONSENT_DECIDED: approved or denied). */
static const char *const decide_words[CONSENT_DECIDE__MAX] = {
	[CONSENT_DECIDE_UNKNOWN] = "unknown", [CONSENT_DECIDE_NOT_YOURS] = "not_yours",
	[CONSENT_DECIDE_CLOSED] = "closed", [CONSENT_DECIDE_INVALID] = "invalid",
	[CONSENT_DECIDE_CHANGED] = "changed",
};

static const char *decide_word(enum consent_decide_outcome o, bool approve)
{
	if (o == CONSENT_DECIDED)
		return approve ? "approved" : "denied";
	return (unsigned)o < CONSENT_DECIDE__MAX && decide_words[o] != NULL ? decide_words[o] : "other";
}

enum cs_err consent_decide(struct store_conn *c, const struct config *cfg, const char *request_id,
    const struct consent_actor *who, const struct consent_decision *d,
    struct consent_decided *out)
{
	enum cs_err e;
	struct consent_decided got = { CONSENT_DECIDE_UNKNOWN, NULL };
	if (c == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	e = consent_decide_tx(c, cfg, request_id, who, d, &got);
	/* Only a recorded decision wrote anything worth keeping. */
	if (e != CS_OK || got.outcome != CONSENT_DECIDED)
		store_rollback(c);
	else if ((e = store_commit(c)) != CS_OK)
		store_rollback(c);
	if (e != CS_OK) {
		consent_decided_clear(&got);
		return e;
	}
	metrics_inc(M_CONSENT_REQUESTS, decide_word(got.outcome, d->approve));
	*out = got;
	return CS_OK;
}

enum cs_err consent_decision_check(const struct config *cfg, const struct consent_request *r,
    int64_t user_id, const struct consent_decision *d, int64_t now,
    enum consent_decide_outcome *out)
{
	char have[CONSENT_VERSION_LEN + 1];

	if (cfg == NULL || r == NULL || d == NULL || r->status == NULL || r->agent == NULL ||
	    r->resource == NULL || out == NULL)
		return CS_EINVAL;
	/* SECURITY: invariant 4, as in consent_decide. */
	consent_request_version(r, have);
	if (user_id <= 0 || r->user_id != user_id)
		*out = CONSENT_DECIDE_NOT_YOURS;
	else if (strcmp(r->status, "pending") != 0 || r->expires_at <= now)
		*out = CONSENT_DECIDE_CLOSED;
	else if (!d->approve)
		*out = CONSENT_DECIDE_INVALID;
	else if (!version_is(have, d->version))
		*out = CONSENT_DECIDE_CHANGED;
	else if (!approval_ok(cfg, r->agent, r->resource, &r->scopes, d))
		*out = CONSENT_DECIDE_INVALID;
	else
		*out = CONSENT_DECIDED;
	return CS_OK;
}
