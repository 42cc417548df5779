/* approval_pages.c -- the approval page for one action and its decision
 * (flow F).  A person sees the exact canonical parameters the digest is of,
 * with invisible characters made visible, and only their own requests. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "app.h"
#include "approval.h"
#include "approval_pages.h"
#include "buf.h"
#include "consent.h"
#include "form.h"
#include "jcs.h"
#include "page_reply.h"
#include "pages.h"
#include "session.h"

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

/* True for parameters built by the proxy from a request: {"path", "query", "body"}. */
static bool proxy_shaped(const char *parameters)
{
	json_t *v = json_loads(parameters, JSON_REJECT_DUPLICATES, NULL);
	bool yes = json_is_object(v) && json_object_size(v) == 3 &&
	    json_is_object(json_object_get(v, "path")) &&
	    json_is_object(json_object_get(v, "query")) && json_object_get(v, "body") != NULL;
	json_decref(v);
	return yes;
}

/* One member of the readable list: {"name", "value", "literal"}.  A string's value is
 * its text; any other value is its compact canonical JSON (literal: shown as code).
 * Both through visible_text.  NULL on failure. */
static json_t *parameter_item(const char *name, json_t *v)
{
	struct buf b;
	char *n = NULL, *val = NULL;
	json_t *item = NULL;
	bool literal = !json_is_string(v) || json_string_length(v) == 0;
	buf_init(&b, APPROVAL_MAX_CANONICAL);
	if (!literal)
		val = visible_text(json_string_value(v));
	else if (jcs_canonicalize(v, &b) == CS_OK && b.data != NULL)
		val = visible_text(b.data);
	if (val != NULL && (name == NULL || (n = visible_text(name)) != NULL))
		item = json_pack("{s:s?, s:s, s:b}", "name", n, "value", val, "literal", literal);
	free(n);
	free(val);
	buf_clear(&b);
	return item;
}

/* The parameters as the page lists them, set on ctx: for an object, "members" (one
 * parameter_item per top-level member, in canonical order; "has_members" when there is
 * one); for any other value, "single" (its item).  Canonical text that cannot be read
 * back (it holds a \u0000, say) sets "unreadable": the page then opens the exact text. */
static enum cs_err parameter_list(const char *canonical, json_t *ctx)
{
	/* Every number read as a double and written back by jcs_canonicalize gives the
	 * very digits of the canonical text (see jcs_pretty). */
	json_t *v = json_loads(canonical, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES |
	    JSON_DECODE_INT_AS_REAL, NULL), *members = NULL, *m;
	const char *k;
	enum cs_err e = CS_ENOMEM;
	if (v == NULL)
		return json_object_set_new(ctx, "unreadable", json_true()) == 0 ? CS_OK : CS_ENOMEM;
	if (!json_is_object(v)) {
		json_t *item = parameter_item(NULL, v);
		if (item != NULL && json_object_set_new(ctx, "single", item) == 0)
			e = CS_OK;
		goto out;
	}
	if ((members = json_array()) == NULL)
		goto out;
	json_object_foreach(v, k, m) {
		if (json_array_append_new(members, parameter_item(k, m)) != 0)
			goto out;
	}
	if (json_object_set_new(ctx, "has_members", json_boolean(json_array_size(members) > 0)) == 0 &&
	    json_object_set(ctx, "members", members) == 0)
		e = CS_OK;
out:
	json_decref(members);
	json_decref(v);
	return e;
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
	/* Who keeps the approval to this one action: consentd itself when only its proxy
	 * uses the tokens, the gateway when the token is released to it (flow F). */
	ctx = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:O, s:s, s:s, s:b}",
	    "title", "An agent asks to act now", "approval_id", a.id,
	    "agent", pages_agent_name(cfg, a.agent), "resource", pages_resource_name(cfg, a.resource),
	    "action", a.action, "action_description", act ? act->description : a.action,
	    "parameters", shown, "digest", a.digest, "expires", expires,
	    "signed_in_as", who, "other_account_url", other,
	    "proxy_enforced", res != NULL && res->token_release == RELEASE_NEVER);
	if (ctx == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	if ((e = parameter_list(a.parameters, ctx)) != CS_OK)
		goto out;
	/* A request made through the proxy (flow H): its method and route, from
	 * consentd's configuration, above the path values, query and body. */
	if (act != NULL && act->route_method != NULL && act->route_path != NULL &&
	    proxy_shaped(a.parameters)) {
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

enum cs_err approval_pages_decide(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	const struct session *s = req->auth.session;     /* the router's session form gate */
	struct approval a;
	struct store_conn *c = store_conn(app->store);
	bool approve = strcmp(http_arg_str(req, APPROVAL_PAGES_DECIDE_DECISION), "approve") == 0, ok;
	json_t *ctx = NULL;
	enum cs_err e;

	if ((e = bound_approval(req, rep, c, s, &a, &ok)) != CS_OK || !ok)
		goto out;
	enum approval_decide_outcome decided;
	e = approval_decide(c, cfg, &(struct approval_decision){ .id = a.id, .user_id = s->user_id,
	    .approve = approve, .actor = req->auth.actor, .now = req->now }, &decided);
	if (e != CS_OK) {
		goto out;
	} else if (decided == APPROVAL_NOT_YOURS) {
		e = reply_html_error(rep, 403, "Not allowed", "This request is for another account.");
		goto out;
	} else if (decided == APPROVAL_CLOSED) {
		e = reply_html_error(rep, 400, "This request cannot be decided",
		    "It was already decided, it expired, or its consent ended.");
		goto out;
	}
	const struct config_resource *res = config_resource(cfg, a.resource);
	ctx = json_pack("{s:s, s:b, s:s, s:s, s:s, s:b}", "title", approve ? "Action approved" : "Action denied",
	    "approved", approve, "agent", pages_agent_name(cfg, a.agent), "resource",
	    pages_resource_name(cfg, a.resource), "action", a.action,
	    "proxy_enforced", res != NULL && res->token_release == RELEASE_NEVER);
	if (ctx == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	e = page_render(rep, 200, "approve_done.html", ctx, s);
out:
	json_decref(ctx);
	approval_clear(&a);
	return e;
}
