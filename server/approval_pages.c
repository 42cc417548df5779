/* approval_pages.c -- the approval page for one action and its decision
 * (flow F).  A person sees what the action does, the parameters the digest is
 * of as a readable list (params_view.c) with the exact canonical text behind a
 * disclosure, invisible characters made visible, and only their own requests. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "app.h"
#include "agent.h"
#include "approval.h"
#include "approval_pages.h"
#include "buf.h"
#include "consent.h"
#include "form.h"
#include "page_reply.h"
#include "pages.h"
#include "params_view.h"
#include "session.h"
#include "standing.h"
#include "standing_pages.h"

/* The approval named in the URL into *a (zeroed first), checked to belong
 * to the signed-in person; the 403 page and an audit entry otherwise. */
static enum cs_err bound_approval(const struct http_request *req, struct http_reply *rep,
    struct store_conn *c, const struct session *s, struct approval *a, bool *ok)
{
	enum cs_err e;
	memset(a, 0, sizeof *a);
	*ok = false;
	if (c == NULL)
		return CS_EDB;
	e = approval_get(c, req->captures[0], a);
	if (e == CS_ENOENT)
		return reply_html_error(rep, 404, "No such request",
		    "This approval request does not exist. Ask your agent for a new link.");
	if (e != CS_OK)
		return e;
	if (a->user_id != s->user_id)
		return pages_refuse_other_account(req, rep, s, "approve", &(struct consent_refusal){
		    .subject = a->subject, .agent = a->agent, .resource = a->resource,
		    .request_id = a->id });
	*ok = true;
	return CS_OK;
}

/* SECURITY: the readable list must be of the very parameters the digest is of and
 * fit the page: params_view reads canonical text no longer than approvals store. */
_Static_assert(APPROVAL_MAX_CANONICAL <= PARAMS_VIEW_MAX_INPUT,
    "every approval's parameters can be listed");

/* The readable list of the parameters on ctx: "view" (params_view), or, for
 * canonical text it cannot read, "unreadable": the page then opens the exact text. */
static enum cs_err parameter_view(const char *canonical, bool proxied, json_t *ctx)
{
	json_t *view = NULL;
	enum cs_err e = params_view(canonical, proxied, &view);
	if (e == CS_EINVAL || e == CS_ETOOBIG)
		return json_object_set_new(ctx, "unreadable", json_true()) == 0 ? CS_OK : CS_ENOMEM;
	if (e != CS_OK)
		return e;
	return json_object_set_new(ctx, "view", view) == 0 ? CS_OK : CS_ENOMEM;
}

/* The approval as the call a standing rule is made from (standing.h). */
static struct standing_call call_of(const struct approval *a)
{
	return (struct standing_call){ .approval_id = a->id, .consent_id = a->consent_id,
		.subject = a->subject, .agent = a->agent, .resource = a->resource,
		.action = a->action, .parameters = a->parameters, .digest = a->digest,
		.user_id = a->user_id };
}

_Static_assert(APPROVAL_PAGES_FIXED_MAX == STANDING_MAX_FIXED, "one bit per parameter");

/* POST /approve/{id}'s rule values (issue #32) into *rq, unjudged (standing.c
 * judges them); false when rule or for is missing. */
static bool rule_request(const struct http_request *req, struct standing_request *rq)
{
	int64_t kind = -1, dur = 0, uses = 0;
	memset(rq, 0, sizeof *rq);
	if (!http_arg_int(req, APPROVAL_PAGES_DECIDE_RULE, &kind) ||
	    !http_arg_int(req, APPROVAL_PAGES_DECIDE_FOR, &dur))
		return false;
	(void)http_arg_int(req, APPROVAL_PAGES_DECIDE_USES, &uses);
	rq->kind = kind == 1 ? STANDING_MATCH : STANDING_EXACT;
	rq->duration = dur;
	rq->max_uses = uses;
	rq->fixed = http_arg_family(req, APPROVAL_PAGES_DECIDE_K);
	return true;
}

/* Whether the approval is for an MCP client's tool call (issue #31): its agent is an
 * MCP client and its resource stands behind an [mcp.NAME] endpoint; the action is the tool. */
static bool tool_call(const struct config *cfg, const struct approval *a)
{
	struct agent_view av;
	return agent_resolve(cfg, a->agent, &av) && av.rule == AGENT_RULE_MCP &&
	    config_resource_has_mcp_endpoint(cfg, a->resource);
}

enum cs_err approval_pages_show(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	const struct session *s = req->auth.session;     /* the router's session gate */
	struct approval a;
	struct store_conn *c = store_conn(app->store);
	char other[200];
	char *shown = NULL, *who = NULL;
	json_t *ctx = NULL, *expires = NULL;
	bool ok;
	enum cs_err e;

	if ((e = bound_approval(req, rep, c, s, &a, &ok)) != CS_OK || !ok)
		goto out;
	if (strcmp(a.status, "pending") != 0 || a.expires_at <= req->now) {
		e = reply_html_error(rep, 410, "This request is closed",
		    strcmp(a.status, "approved") == 0 || strcmp(a.status, "used") == 0 ?
		    "You already approved this action." : strcmp(a.status, "denied") == 0 ?
		    "You already denied this action." : "This request expired or was cancelled.");
		goto out;
	}
	const struct config_action *act = config_action(cfg, a.resource, a.action);
	const struct config_resource *res = config_resource(cfg, a.resource);
	/* The exact parameters are the canonical JSON text itself, the very bytes the
	 * digest is of, with invisible characters made visible. */
	if ((shown = visible_text(a.parameters)) == NULL || (who = pages_signed_in_name(s)) == NULL ||
	    (expires = pages_time_value(a.expires_at)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	if ((e = str_fmt(other, sizeof other, "/login?prompt=login&return_to=%%2Fapprove%%2F%s",
	    a.id)) != CS_OK)
		goto out;
	/* The page leads with what the action does (for an MCP tool call the action is
	 * the tool: its description), then the values as a readable list.  Who keeps the
	 * approval to this one action: consentd itself when only its proxy uses the
	 * tokens, the gateway when the token is released to it (flow F). */
	ctx = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:b, s:s, s:s, s:O, s:s, s:s, s:b}",
	    "title", "An agent asks to act now", "approval_id", a.id,
	    "agent", pages_agent_name(cfg, a.agent), "resource", pages_resource_name(cfg, a.resource),
	    "action", a.action, "action_description", act ? act->description : a.action,
	    "tool", tool_call(cfg, &a),
	    "parameters", shown, "digest", a.digest, "expires", expires,
	    "signed_in_as", who, "other_account_url", other,
	    "proxy_enforced", res != NULL && res->token_release == RELEASE_NEVER);
	if (ctx == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	bool routed = act != NULL && act->route_method != NULL && act->route_path != NULL;
	const struct standing_call call = call_of(&a);
	if ((e = parameter_view(a.parameters, routed, ctx)) != CS_OK ||
	    (e = standing_pages_offer(cfg, &call, ctx)) != CS_OK)
		goto out;
	/* A request made through the proxy (flow H): its method and route, from
	 * consentd's configuration, above the path values, query and body. */
	if (json_is_true(json_object_get(json_object_get(ctx, "view"), "request"))) {
		char line[600];
		if ((e = str_fmt(line, sizeof line, "%s %s", act->route_method,
		    act->route_path)) != CS_OK)
			goto out;
		if (json_object_set_new(ctx, "request_line", json_string(line)) != 0 ||
		    json_object_set_new(ctx, "proxied", json_true()) != 0) {
			e = CS_ENOMEM;
			goto out;
		}
	}
	e = page_render(rep, 200, "approve.html", ctx, s);
out:
	free(shown);
	free(who);
	json_decref(expires);
	json_decref(ctx);
	approval_clear(&a);
	return e;
}

/* A decision that came too late (issue #32 item 7): says exactly why, from
 * the approval as it stood when the page was posted. */
static enum cs_err closed_page(struct http_reply *rep, const struct approval *a, int64_t now)
{
	char when[STR_TIME_LEN], text[400];
	enum cs_err e;
	if ((strcmp(a->status, "pending") == 0 && a->expires_at <= now) ||
	    strcmp(a->status, "expired") == 0) {
		(void)str_time(a->expires_at, when);
		if ((e = str_fmt(text, sizeof text, "This request expired at %s, while its page was "
		    "open: nothing was approved or denied. If the agent still needs to do this, its "
		    "next try asks you again.", when)) != CS_OK)
			return e;
		return reply_html_error(rep, 400, "This request expired", text);
	}
	if (strcmp(a->status, "approved") == 0 || strcmp(a->status, "used") == 0 ||
	    strcmp(a->status, "denied") == 0) {
		(void)str_time(a->decided_at, when);
		if ((e = str_fmt(text, sizeof text, "You already %s this request at %s; that decision "
		    "stands.", strcmp(a->status, "denied") == 0 ? "denied" : "approved", when)) != CS_OK)
			return e;
		return reply_html_error(rep, 400, "Already decided", text);
	}
	return reply_html_error(rep, 400, "This request cannot be decided",
	    "Its consent ended (revoked or expired), so nothing can be approved for it.");
}

enum cs_err approval_pages_decide(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	const struct session *s = req->auth.session;     /* the router's session form gate */
	struct approval a;
	struct store_conn *c = store_conn(app->store);
	const char *decision = http_arg_str(req, APPROVAL_PAGES_DECIDE_DECISION);
	bool standing = strcmp(decision, "standing") == 0, ok;
	bool approve = standing || strcmp(decision, "approve") == 0;
	struct standing_rule rule;
	struct standing_request srq;
	char why[200] = "";
	json_t *ctx = NULL;
	enum cs_err e;

	memset(&rule, 0, sizeof rule);
	if ((e = bound_approval(req, rep, c, s, &a, &ok)) != CS_OK || !ok)
		goto out;
	/* Issue #32: approve and make a standing rule -- judged against the
	 * action's configuration before anything is decided. */
	const struct standing_call call = call_of(&a);
	if (standing && (!rule_request(req, &srq) ||
	    (e = standing_prepare(cfg, &call, &srq, req->now, &rule, why, sizeof why)) == CS_EINVAL)) {
		e = reply_html_error(rep, 400, "This rule cannot be made", standing && why[0] &&
		    e == CS_EINVAL ? why : "Choose how long the rule holds, then approve again.");
		goto out;
	} else if (e != CS_OK) {
		goto out;
	}
	enum approval_decide_outcome decided;
	e = approval_decide(c, cfg, &(struct approval_decision){ .id = a.id, .user_id = s->user_id,
	    .approve = approve, .rule = standing ? &rule : NULL, .actor = req->auth.actor,
	    .now = req->now }, &decided);
	if (e != CS_OK) {
		goto out;
	} else if (decided == APPROVAL_NOT_YOURS) {
		e = reply_html_error(rep, 403, "Not allowed", "This request is for another account.");
		goto out;
	} else if (decided == APPROVAL_CLOSED) {
		e = closed_page(rep, &a, req->now);
		goto out;
	}
	/* Issue #32 item 7: what was given or declined (the action by its
	 * description, the values), and until when. */
	const struct config_resource *res = config_resource(cfg, a.resource);
	const struct config_action *act = config_action(cfg, a.resource, a.action);
	ctx = json_pack("{s:s, s:b, s:s, s:s, s:s, s:s, s:b, s:o?, s:o?}", "title",
	    approve ? "Action approved" : "Action denied",
	    "approved", approve, "agent", pages_agent_name(cfg, a.agent), "resource",
	    pages_resource_name(cfg, a.resource), "action", a.action, "action_description",
	    act != NULL && act->description != NULL ? act->description : a.action,
	    "proxy_enforced", res != NULL && res->token_release == RELEASE_NEVER,
	    /* approval_check: redeemable until request_ttl after the decision */
	    "use_by", approve ? pages_time_value(req->now + cfg->consent_request_ttl) : NULL,
	    "blocked_until", !approve && cfg->consent_deny_cooldown > 0 ?
	    pages_time_value(req->now + cfg->consent_deny_cooldown) : NULL);
	if (ctx == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	if ((e = parameter_view(a.parameters, act != NULL && act->route_method != NULL &&
	    act->route_path != NULL, ctx)) != CS_OK ||
	    (standing && (e = standing_pages_done(&rule, ctx)) != CS_OK))
		goto out;
	e = page_render(rep, 200, "approve_done.html", ctx, s);
out:
	json_decref(ctx);
	standing_rule_clear(&rule);
	approval_clear(&a);
	return e;
}
