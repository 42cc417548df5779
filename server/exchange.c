/* exchange.c -- the gateway's exchanges (flows A and D) and the one approval
 * gate that flow D and the proxy (flow H) share.  No HTTP here: handlers map
 * the outcomes to replies.  It must never release a token before the release
 * is audited, use an approval twice, or put a token in the audit log. */
#include <string.h>

#include "audit.h"
#include "authzen.h"
#include "buf.h"
#include "exchange.h"
#include "health.h"
#include "jcs.h"
#include "policy.h"
#include "scope.h"

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

const char *exchange_outcome_description(const struct exchange_release *r)
{
	switch (r->outcome) {
	case EXCHANGE_CONSENT_ENDED:
		return "the grant's consent has ended";
	case EXCHANGE_APPROVAL_USED:
		return "this approval was already used or is no longer valid";
	case EXCHANGE_CONNECTION_GONE:
		return r->why[0] != '\0' ? r->why :
		    "the provider connection is gone; ask for consent again to reconnect";
	case EXCHANGE_PROVIDER_DOWN:
		return "the provider could not be reached to refresh the token";
	case EXCHANGE_SCOPE_ESCALATION:
		return "the action's scope is not in the grant";
	case EXCHANGE_PROXY_ONLY:
		return "this resource's tokens are used only by consentd's proxy";
	case EXCHANGE_BAD_DETAILS:
		return r->why;
	case EXCHANGE_DETAILS_NEEDED:
		return r->why[0] != '\0' ? r->why :
		    "this action needs a person's approval: send authorization_details";
	default:
		return "";
	}
}

enum cs_err exchange_grant_description(const struct exchange_grant *g, char *out, size_t outlen)
{
	switch (g->outcome) {
	case EXCHANGE_NO_GRANT:
		return consent_answer_description(&g->answer, out, outlen);
	case EXCHANGE_TOO_MANY_SCOPES:
		return str_fmt(out, outlen, "together with the scopes already asked for, this is more "
		    "than %d scopes", CONSENT_MAX_SCOPES);
	case EXCHANGE_GRANT_ENDED:
		return str_fmt(out, outlen, "the consent ended just now (revoked or expired); ask again");
	default:
		return str_fmt(out, outlen, "the grant was issued");
	}
}

/* --- the approval gate ------------------------------------------------- */

/* The organisation's policy lines of rq's action (issue #32 item 4; pure
 * configuration, no I/O to decide).  *decided when a line decided: an
 * approve is a release with decided_by "policy ACTION#N"; a deny is
 * APPROVAL_DENIED with the same decided_by, audited in its own transaction
 * ("approval.denied_by_policy", naming the line and the digest). */
static enum cs_err policy_step(struct store_conn *c, const struct exchange_release_req *rq,
    struct exchange_release *out, bool *decided)
{
	char by[160], detail[400];
	size_t which = 0;
	enum cs_err e;
	enum policy_verdict v = policy_eval(rq->act->policy, rq->act->npolicy, rq->params, &which);
	*decided = false;
	if (v == POLICY_NONE)
		return CS_OK;
	if ((e = str_fmt(by, sizeof by, "policy %s#%d", rq->act->name,
	    rq->act->policy[which].number)) != CS_OK)
		return e;
	if ((out->approval.decided_by = strdup(by)) == NULL)
		return CS_ENOMEM;
	*decided = true;
	if (v == POLICY_APPROVE) {
		out->approval.outcome = APPROVAL_RELEASE;
		return CS_OK;
	}
	out->approval.outcome = APPROVAL_DENIED;
	out->outcome = EXCHANGE_APPROVAL;
	if ((e = str_fmt(detail, sizeof detail, "action=%s; line=policy.%d; params_digest=%s",
	    rq->act->name, rq->act->policy[which].number, out->digest)) != CS_OK)
		return e;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if ((e = audit_append(c, &(struct audit_entry){ .ts = rq->now, .actor = rq->actor,
	    .action = "approval.denied_by_policy", .subject = rq->k->subject,
	    .agent = rq->k->agent, .resource = rq->k->resource, .consent_id = rq->k->id,
	    .outcome = "denied", .detail = detail })) != CS_OK || (e = store_commit(c)) != CS_OK)
		store_rollback(c);
	return e;
}

/* The deciders in order -- the organisation's policy lines, then (approval
 * = required) approval_check -- for rq: out->approval and out->digest.
 * *release when the token may go now (an approval to redeem, a policy
 * line's approve, or an action without approval that no line denied);
 * otherwise out->outcome says why not. */
static enum cs_err gate_check(struct store_conn *c, const struct config *cfg,
    const struct exchange_release_req *rq, struct exchange_release *out, bool *release)
{
	struct buf canon;
	enum cs_err e;
	bool decided = false;
	*release = false;
	if (rq->params == NULL && rq->act->approval == APPROVAL_REQUIRED)
		return CS_EINVAL;
	buf_init(&canon, rq->canonical_max);
	if (rq->params != NULL && ((e = jcs_canonicalize(rq->params, &canon)) != CS_OK ||
	    (e = approval_digest(rq->params, out->digest)) != CS_OK))
		goto out;
	/* 1. SECURITY: the organisation's policy decides before anyone is asked,
	 * and its deny holds whatever the approval setting (issue #32 item 4). */
	if ((e = policy_step(c, rq, out, &decided)) != CS_OK || decided) {
		*release = e == CS_OK && out->approval.outcome == APPROVAL_RELEASE;
		goto out;
	}
	if (rq->act->approval != APPROVAL_REQUIRED) {
		*release = true;
		goto out;
	}
	/* 2. The organisation's decision point (authzen.h), outside any transaction;
	 * then 3. the person's standing rules and 4. the person (approval_check). */
	if ((e = authzen_gate(c, cfg, rq->act, &(struct authzen_call){ .k = rq->k,
	    .action = rq->act->name, .params = rq->params, .digest = out->digest,
	    .actor = rq->actor, .now = rq->now }, &out->approval, release)) != CS_OK || *release) {
		if (e == CS_OK && out->approval.outcome != APPROVAL_RELEASE) {
			out->outcome = EXCHANGE_APPROVAL;
			*release = false;
		}
		goto out;
	}
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
	if (rq->act->approval == APPROVAL_REQUIRED || rq->act->npolicy > 0) {
		if ((e = gate_check(c, cfg, rq, out, &approved)) != CS_OK || !approved)
			return e;
	}
	/* SECURITY: an approved release uses the approval up in the transaction
	 * that records the release: released once, never twice -- even when what
	 * follows (the proxy's upstream call) then fails. */
	struct vault_release_req vr = { .k = rq->k, .action = rq->act->name,
		.approval_id = approved ? out->approval.approval_id : NULL,
		.decided_by = approved ? out->approval.decided_by : NULL,
		.rule_id = approved ? out->approval.rule_id : NULL, .actor = rq->actor,
		.now = rq->now, .with = rq->with, .with_ctx = rq->with_ctx };
	out->at_release = true;
	e = vr.approval_id != NULL ? vault_release_approved(rq->vault, c, cfg, &vr, &out->tok) :
	    vault_release(rq->vault, c, cfg, &vr, &out->tok);
	if (e == CS_OK)
		out->outcome = from_vault(out->tok.outcome);
	/* Why, when the connection needs the person (issue #33 item 4). */
	if (e == CS_OK && out->outcome == EXCHANGE_CONNECTION_GONE &&
	    (e = health_describe_consent(c, cfg->public_url, rq->k->id, out->why,
	    sizeof out->why)) == CS_ENOENT)
		e = CS_OK;
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
	/* SECURITY: never the token without the details, and nothing is created;
	 * policy lines with conditions judge the details too (issue #32). */
	if ((rq->act->approval == APPROVAL_REQUIRED ||
	    policy_needs_params(rq->act->policy, rq->act->npolicy)) && rq->details == NULL) {
		out->outcome = EXCHANGE_DETAILS_NEEDED;
		if (rq->act->approval != APPROVAL_REQUIRED && str_fmt(out->why, sizeof out->why,
		    "the organisation's policy judges this action by its parameters: send "
		    "authorization_details") != CS_OK)
			out->why[0] = '\0';
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
	bool remembered = false;
	if (c == NULL || cfg == NULL || rq == NULL || rq->agent == NULL || rq->res == NULL ||
	    out == NULL)
		return CS_EINVAL;
	const struct consent_ask ask = { .issuer = rq->issuer, .subject = rq->subject,
		.agent = rq->agent->id, .resource = rq->res->id, .requested = rq->want,
		.reason = rq->reason, .actor = rq->actor, .now = rq->now, .limits = rq->limits };
	/* At most twice: a grant refused for a consent this thread remembered
	 * (consent_exchange_remembered) goes round the full path once more,
	 * which reads what is live now. */
	for (int pass = 0;; pass++) {
		e = pass == 0 ? consent_exchange_remembered(c, cfg, &ask, &out->answer, &remembered) :
		    consent_exchange(c, cfg, &ask, &out->answer);
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
		struct grant_issue_req iq = { .k = &out->answer.live,
			.scope = &out->answer.grant_scopes,
			.with_refresh = out->answer.live.offline && rq->agent->offline, .jkt = rq->jkt,
			.actor = rq->actor, .now = rq->now, .live_only = true };
		enum grant_issue_outcome oc = GRANT_ISSUE_REFUSED;
		if ((e = grant_issue(c, cfg, rq->kr, &iq, &oc, &out->grant)) != CS_OK)
			return e;
		if (oc == GRANT_ISSUED) {
			out->outcome = EXCHANGE_GRANTED;
			return CS_OK;
		}
		if (pass > 0 || !remembered) {
			/* Revoked or expired meanwhile: the consent ended. */
			out->outcome = EXCHANGE_GRANT_ENDED;
			return CS_OK;
		}
		consent_exchange_forget(&ask);
		consent_answer_clear(&out->answer);
	}
}

void exchange_target_clear(struct exchange_target *t)
{
	if (t == NULL)
		return;
	scope_set_clear(&t->want);
	memset(t, 0, sizeof *t);
}

/* --- flow A's subject -------------------------------------------------- */

void exchange_subject_clear(struct exchange_subject *s)
{
	if (s == NULL)
		return;
	json_decref(s->claims);
	memset(s, 0, sizeof *s);
}

/* Whether urn names a type [oidc] subject_token_types accepts. */
static bool subject_type_allowed(const struct config *cfg, const char *urn)
{
	const char *name = strcmp(urn, URN_TT_ID_TOKEN) == 0 ? "id_token" :
	    strcmp(urn, URN_TT_ACCESS_TOKEN) == 0 ? "access_token" :
	    strcmp(urn, URN_TT_JWT) == 0 ? "jwt" : NULL;
	for (size_t i = 0; name != NULL && i < cfg->nsubject_token_types; i++)
		if (strcmp(cfg->subject_token_types[i], name) == 0)
			return true;
	return false;
}

enum cs_err exchange_subject(const struct config *cfg, struct oidc_provider *idp,
    const char *type, const char *token, int64_t now, struct exchange_subject *out)
{
	memset(out, 0, sizeof *out);
	if (token == NULL || type == NULL) {
		out->outcome = token == NULL ? EXCHANGE_SUBJECT_NO_TOKEN : EXCHANGE_SUBJECT_NO_TYPE;
		return CS_OK;
	}
	if (!subject_type_allowed(cfg, type)) {
		out->outcome = EXCHANGE_SUBJECT_TYPE_REFUSED;
		return CS_OK;
	}
	if (oidc_meta(idp) == NULL) {
		out->outcome = EXCHANGE_SUBJECT_IDP_UNREACHED;
		return CS_OK;
	}
	/* SECURITY: only the upstream IdP's keys, issuer and audiences count; a
	 * consentd grant (our iss, our keys) can never pass this. */
	struct oidc_expect ex = { .audiences = (const char *const *)cfg->subject_audiences,
		.naudiences = cfg->nsubject_audiences, .now = now, .max_age = -1, .cache = true };
	if (oidc_validate(idp, token, &ex, &out->claims, out->why, sizeof out->why) != CS_OK) {
		out->outcome = EXCHANGE_SUBJECT_INVALID;
		return CS_OK;
	}
	json_t *s = json_object_get(out->claims, cfg->oidc_subject_claim);
	if (!json_is_string(s) || json_string_length(s) == 0 || json_string_length(s) > 255) {
		out->outcome = EXCHANGE_SUBJECT_NO_CLAIM;
		return CS_OK;
	}
	out->sub = json_string_value(s);
	return CS_OK;
}

void exchange_subject_ours(const struct keyring *kr, const char *token, struct exchange_subject *s)
{
	json_t *cl = NULL;
	if (s->outcome == EXCHANGE_SUBJECT_INVALID && kr != NULL && token != NULL &&
	    jwt_verify(kr, "at+jwt", token, &cl) == CS_OK)
		s->outcome = EXCHANGE_SUBJECT_OWN_GRANT;
	json_decref(cl);
}

enum cs_err exchange_subject_description(const struct config *cfg,
    const struct exchange_subject *s, char *out, size_t outlen)
{
	struct buf types;
	enum cs_err e = CS_OK;
	switch (s->outcome) {
	case EXCHANGE_SUBJECT_NO_TOKEN:
		return str_fmt(out, outlen, "subject_token is missing");
	case EXCHANGE_SUBJECT_NO_TYPE:
		return str_fmt(out, outlen, "subject_token_type is missing");
	case EXCHANGE_SUBJECT_TYPE_REFUSED:
		buf_init(&types, 64);
		for (size_t i = 0; i < cfg->nsubject_token_types && e == CS_OK; i++)
			e = buf_printf(&types, "%s%s", i ? ", " : "", cfg->subject_token_types[i]);
		if (e == CS_OK)
			e = str_fmt(out, outlen, "subject_token_type is not one this consentd accepts "
			    "(urn:ietf:params:oauth:token-type: %s)", types.data ? types.data : "");
		buf_clear(&types);
		return e;
	case EXCHANGE_SUBJECT_IDP_UNREACHED:
		return str_fmt(out, outlen, "consentd has not reached its IdP yet, so it cannot check "
		    "the subject token; retry");
	/* RFC 8693 §2.2.2: invalid_request, naming the check that failed. */
	case EXCHANGE_SUBJECT_INVALID:
		return str_fmt(out, outlen, "subject token %s", s->why);
	case EXCHANGE_SUBJECT_OWN_GRANT:
		return str_fmt(out, outlen, "the subject token is a consentd grant; send the person's "
		    "token from the IdP");
	case EXCHANGE_SUBJECT_NO_CLAIM:
		return str_fmt(out, outlen, "the subject token has no usable %s claim (a string of 1 to "
		    "255 bytes; [oidc] subject_claim)", cfg->oidc_subject_claim);
	default:
		return str_fmt(out, outlen, "the subject token was accepted");
	}
}

/* --- what the gateway names ---------------------------------------------- */

const char *exchange_reason_problem(const char *reason)
{
	const unsigned char *p = (const unsigned char *)reason;
	size_t chars = 0;
	if (reason == NULL)
		return NULL;
	for (; *p; p++) {
		/* C0 and DEL; C1 (U+0080..U+009F) is 0xC2 0x80..0x9F in UTF-8 (the
		 * router let only valid UTF-8 through). */
		if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
			return EXCHANGE_REASON_RULE;
		if ((*p & 0xc0) != 0x80)
			chars++;
	}
	return chars > EXCHANGE_REASON_MAX_CHARS ? EXCHANGE_REASON_RULE : NULL;
}

/* The resource named by audience (its id) and resource (its URI): both must agree. */
static enum exchange_target_outcome target_resource(const struct config *cfg, const char *aud,
    const char *uri, const struct config_resource **out)
{
	const struct config_resource *r = NULL, *r2 = NULL;
	if (aud == NULL && uri == NULL)
		return EXCHANGE_TARGET_NO_RESOURCE;
	if (aud != NULL && (r = config_resource(cfg, aud)) == NULL)
		return EXCHANGE_TARGET_UNKNOWN_AUDIENCE;
	if (uri != NULL && (r2 = config_resource_by_uri(cfg, uri)) == NULL)
		return EXCHANGE_TARGET_UNKNOWN_URI;
	if (uri != NULL && r != NULL && r2 != r)
		return EXCHANGE_TARGET_DISAGREE;
	*out = uri != NULL ? r2 : r;
	return EXCHANGE_TARGET_OK;
}

enum cs_err exchange_target(const struct config *cfg, const char *audience,
    const char *resource, const char *agent_id, const char *scope,
    struct exchange_target *out)
{
	memset(out, 0, sizeof *out);
	if ((out->outcome = target_resource(cfg, audience, resource, &out->res)) !=
	    EXCHANGE_TARGET_OK)
		return CS_OK;
	/* SECURITY: a gateway acts for its [agent.X] agents only; an MCP client
	 * signs in at /authorize, and its consents are not a gateway's to use. */
	if (!agent_resolve(cfg, agent_id, &out->agent) || out->agent.kind != AGENT_CONFIGURED) {
		out->outcome = agent_id == NULL ? EXCHANGE_TARGET_NO_AGENT : EXCHANGE_TARGET_UNKNOWN_AGENT;
		return CS_OK;
	}
	if (scope == NULL) {
		out->outcome = EXCHANGE_TARGET_NO_SCOPE;
		return CS_OK;
	}
	if (scope_set_parse(scope, &out->want) != CS_OK || out->want.n == 0) {
		out->outcome = EXCHANGE_TARGET_BAD_SCOPE;
		return CS_OK;
	}
	for (size_t i = 0; i < out->want.n; i++) {
		/* SECURITY: requested ⊆ configured ∩ agent-allowed (invariant 7). */
		const char *w = out->want.v[i];
		if (config_scope(cfg, out->res->id, w) == NULL ||
		    !agent_may_ask(&out->agent, out->res->id, w)) {
			out->outcome = config_scope(cfg, out->res->id, w) == NULL ?
			    EXCHANGE_TARGET_SCOPE_UNKNOWN : EXCHANGE_TARGET_SCOPE_DENIED;
			out->scope = w;
			return CS_OK;
		}
	}
	return CS_OK;
}

enum cs_err exchange_target_description(const struct exchange_target *t, char *out, size_t outlen)
{
	const char *r = t->res != NULL ? t->res->id : "";
	const char *a = t->agent.id != NULL ? t->agent.id : "";
	switch (t->outcome) {
	case EXCHANGE_TARGET_NO_RESOURCE:
		return str_fmt(out, outlen, "the resource is missing: name it with audience or resource");
	case EXCHANGE_TARGET_UNKNOWN_AUDIENCE:
		return str_fmt(out, outlen, "audience names no configured resource");
	case EXCHANGE_TARGET_UNKNOWN_URI:
		return str_fmt(out, outlen, "resource is not the URI of a configured resource");
	case EXCHANGE_TARGET_DISAGREE:
		return str_fmt(out, outlen, "audience and resource name different resources");
	case EXCHANGE_TARGET_NO_AGENT:
		return str_fmt(out, outlen, "agent_id is missing");
	case EXCHANGE_TARGET_UNKNOWN_AGENT:
		return str_fmt(out, outlen, "agent_id names no configured agent");
	case EXCHANGE_TARGET_NO_SCOPE:
		return str_fmt(out, outlen, "scope is missing");
	case EXCHANGE_TARGET_BAD_SCOPE:
		return str_fmt(out, outlen, "scope is malformed: at most %d distinct scopes of at most "
		    "%d characters, separated by single spaces", CONSENT_MAX_SCOPES, SCOPE_TOKEN_MAX);
	/* The scope is named: scope_set_parse let only printable ASCII through. */
	case EXCHANGE_TARGET_SCOPE_UNKNOWN:
		return str_fmt(out, outlen, "scope %s is not configured for resource %s", t->scope, r);
	case EXCHANGE_TARGET_SCOPE_DENIED:
		return str_fmt(out, outlen, "agent %s may not ask for scope %s of resource %s "
		    "([agent.%s] allow)", a, t->scope, r, a);
	default:
		return str_fmt(out, outlen, "the target was accepted");
	}
}

bool exchange_grant_for(const struct config *cfg, const struct consent *k, const char *id,
    const char *uri)
{
	const struct config_resource *r = config_resource(cfg, k->resource);
	/* SECURITY: a grant reaches only its own resource. */
	if (id != NULL && strcmp(id, k->resource) != 0)
		return false;
	return uri == NULL || (r != NULL && strcmp(uri, r->uri) == 0);
}

enum exchange_action_outcome exchange_action(const struct config *cfg, struct vault *vault,
    const struct consent *k, const char *action, const struct config_resource **res,
    const struct config_action **act)
{
	const struct config_action *a = config_action(cfg, k->resource, action);
	*res = config_resource(cfg, k->resource);
	if (*res == NULL || vault_provider(vault, k->resource) == NULL)
		return EXCHANGE_ACTION_NO_PROVIDER;
	if (a == NULL)
		return EXCHANGE_ACTION_UNKNOWN;
	*act = a;
	return EXCHANGE_ACTION_OK;
}

const char *exchange_action_description(enum exchange_action_outcome o)
{
	switch (o) {
	case EXCHANGE_ACTION_NO_PROVIDER:
		return "the grant's resource has no provider";
	case EXCHANGE_ACTION_UNKNOWN:
		return "unknown action: action names no configured action of the grant's resource";
	default:
		return "the action was found";
	}
}
