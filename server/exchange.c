/* exchange.c -- the gateway's exchanges (flows A and D) and the one approval
 * gate that flow D and the proxy (flow H) share.  No HTTP here: handlers map
 * the outcomes to replies.  It must never release a token before the release
 * is audited, use an approval twice, or put a token in the audit log. */
#include <string.h>

#include "audit.h"
#include "buf.h"
#include "exchange.h"
#include "jcs.h"

void exchange_release_clear(struct exchange_release *r)
{
	if (r == NULL)
		return;
	approval_answer_clear(&r->approval);
	vault_release_clear(&r->tok);
	json_decref(r->params);
	memset(r, 0, sizeof *r);
}

void exchange_grant_clear(struct exchange_grant *g)
{
	if (g == NULL)
		return;
	consent_answer_clear(&g->answer);
	grant_response_clear(&g->grant);
	memset(g, 0, sizeof *g);
}

/* --- the approval gate ------------------------------------------------- */

/* approval_check for rq: out->approval and out->digest.  *release when an
 * approval may be redeemed now; otherwise out->outcome says why not. */
static enum cs_err gate_check(struct store_conn *c, const struct config *cfg,
    const struct exchange_release_req *rq, struct exchange_release *out, bool *release)
{
	struct buf canon;
	enum cs_err e;
	*release = false;
	if (rq->params == NULL)
		return CS_EINVAL;
	buf_init(&canon, rq->canonical_max);
	if ((e = jcs_canonicalize(rq->params, &canon)) != CS_OK ||
	    (e = approval_digest(rq->params, out->digest)) != CS_OK)
		goto out;
	e = approval_check(c, cfg, &(struct approval_ask){ .k = rq->k, .action = rq->act->name,
	    .parameters = canon.data, .digest = out->digest, .actor = rq->actor, .now = rq->now,
	    .limits = rq->limits },
	    &out->approval);
	if (e != CS_OK)
		goto out;
	if (out->approval.outcome == APPROVAL_CONSENT_ENDED)
		out->outcome = EXCHANGE_CONSENT_ENDED;
	else if (out->approval.outcome != APPROVAL_RELEASE)
		out->outcome = EXCHANGE_APPROVAL;
	else
		*release = true;
out:
	buf_clear(&canon);
	return e;
}

static enum exchange_outcome from_vault(enum vault_release_outcome o)
{
	switch (o) {
	case VAULT_RELEASED:
		return EXCHANGE_RELEASED;
	case VAULT_RELEASE_APPROVAL_USED:
		return EXCHANGE_APPROVAL_USED;
	case VAULT_RELEASE_UNAVAILABLE:
		return EXCHANGE_PROVIDER_DOWN;
	default:
		return EXCHANGE_CONNECTION_GONE;
	}
}

enum cs_err exchange_release(struct store_conn *c, const struct config *cfg,
    const struct exchange_release_req *rq, struct exchange_release *out)
{
	enum cs_err e;
	bool approved = false;
	if (c == NULL || cfg == NULL || rq == NULL || rq->k == NULL || rq->act == NULL ||
	    out == NULL)
		return CS_EINVAL;
	if (rq->act->approval == APPROVAL_REQUIRED) {
		if ((e = gate_check(c, cfg, rq, out, &approved)) != CS_OK || !approved)
			return e;
	}
	/* SECURITY: an approved release uses the approval up in the transaction
	 * that records the release: released once, never twice -- even when what
	 * follows (the proxy's upstream call) then fails. */
	struct vault_release_req vr = { .k = rq->k, .action = rq->act->name,
		.approval_id = approved ? out->approval.approval_id : NULL, .actor = rq->actor,
		.now = rq->now, .with = rq->with, .with_ctx = rq->with_ctx };
	out->at_release = true;
	e = approved ? vault_release_approved(rq->vault, c, cfg, &vr, &out->tok) :
	    vault_release(rq->vault, c, cfg, &vr, &out->tok);
	if (e == CS_OK)
		out->outcome = from_vault(out->tok.outcome);
	return e;
}

/* --- flow D ------------------------------------------------------------ */

/* A refused release, audited in its own transaction. */
static enum cs_err refuse(struct store_conn *c, const struct exchange_token_req *rq,
    const char *why)
{
	char detail[300];
	enum cs_err e;
	if ((e = str_fmt(detail, sizeof detail, "action=%s; %s", rq->act->name, why)) != CS_OK)
		return e;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if ((e = audit_append(c, &(struct audit_entry){ .ts = rq->now, .actor = rq->actor,
	    .action = "vault.release.refused", .subject = rq->k->subject, .agent = rq->k->agent,
	    .resource = rq->k->resource, .consent_id = rq->k->id, .outcome = "refused",
	    .detail = detail })) != CS_OK || (e = store_commit(c)) != CS_OK)
		store_rollback(c);
	return e;
}

enum cs_err exchange_provider_token(struct store_conn *c, const struct config *cfg,
    const struct exchange_token_req *rq, struct exchange_release *out)
{
	enum cs_err e;
	if (c == NULL || cfg == NULL || rq == NULL || rq->k == NULL || rq->act == NULL ||
	    rq->res == NULL || out == NULL)
		return CS_EINVAL;
	/* SECURITY: an action outside the grant is an escalation attempt. */
	if (!grant_claims_have_scope(rq->claims, rq->act->scope)) {
		if ((e = refuse(c, rq, "escalation attempt: scope outside the grant")) == CS_OK)
			out->outcome = EXCHANGE_SCOPE_ESCALATION;
		return e;
	}
	if (rq->res->token_release == RELEASE_NEVER) {
		if ((e = refuse(c, rq, "token_release = never")) == CS_OK)
			out->outcome = EXCHANGE_PROXY_ONLY;
		return e;
	}
	/* Flow F: authorization_details, when present, names exactly this action. */
	if (rq->details != NULL && approval_parse_details(rq->details, rq->act->name, &out->params,
	    out->why, sizeof out->why) != CS_OK) {
		out->outcome = EXCHANGE_BAD_DETAILS;
		return CS_OK;
	}
	/* SECURITY: never the token without the details, and nothing is created. */
	if (rq->act->approval == APPROVAL_REQUIRED && rq->details == NULL) {
		out->outcome = EXCHANGE_DETAILS_NEEDED;
		return CS_OK;
	}
	return exchange_release(c, cfg, &(struct exchange_release_req){ .vault = rq->vault,
	    .k = rq->k, .act = rq->act, .params = out->params,
	    .canonical_max = 2 * APPROVAL_MAX_DETAILS, .actor = rq->actor, .now = rq->now,
	    .limits = rq->limits }, out);
}

/* --- flow A ------------------------------------------------------------ */

enum cs_err exchange_grant(struct store_conn *c, const struct config *cfg,
    const struct exchange_grant_req *rq, struct exchange_grant *out)
{
	enum cs_err e;
	if (c == NULL || cfg == NULL || rq == NULL || rq->agent == NULL || rq->res == NULL ||
	    out == NULL)
		return CS_EINVAL;
	e = consent_exchange(c, cfg, &(struct consent_ask){ .issuer = rq->issuer,
	    .subject = rq->subject, .agent = rq->agent->id, .resource = rq->res->id,
	    .requested = rq->want, .reason = rq->reason, .actor = rq->actor, .now = rq->now,
	    .limits = rq->limits },
	    &out->answer);
	if (e != CS_OK)
		return e;
	if (out->answer.outcome == CONSENT_TOO_MANY_SCOPES) {
		out->outcome = EXCHANGE_TOO_MANY_SCOPES;
		return CS_OK;
	}
	if (out->answer.outcome != CONSENT_GRANT) {
		out->outcome = EXCHANGE_NO_GRANT;
		return CS_OK;
	}
	struct grant_issue_req iq = { .k = &out->answer.live, .scope = &out->answer.grant_scopes,
		.with_refresh = out->answer.live.offline && rq->agent->offline, .jkt = rq->jkt,
		.actor = rq->actor, .now = rq->now };
	enum grant_issue_outcome oc = GRANT_ISSUE_REFUSED;
	if ((e = grant_issue(c, cfg, rq->kr, &iq, &oc, &out->grant)) != CS_OK)
		return e;
	/* Revoked or expired meanwhile: the consent ended. */
	out->outcome = oc == GRANT_ISSUED ? EXCHANGE_GRANTED : EXCHANGE_GRANT_ENDED;
	return CS_OK;
}
