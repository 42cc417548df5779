/* me_pages.c -- /me, the person's control panel: the agents acting for them,
 * the history of ended consents, what waits for a decision, the agents their
 * "no" holds back, and revoking with a confirmation.  It shows and changes
 * only the signed-in person's own records, and never text from its URL. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "app.h"
#include "approval.h"
#include "approval_block.h"
#include "buf.h"
#include "consent.h"
#include "form.h"
#include "health.h"
#include "page_reply.h"
#include "me_pages.h"
#include "standing_pages.h"
#include "pages.h"
#include "params_view.h"
#include "session.h"
#include "vault.h"

#define ME_LIST_MAX 100              /* consents shown, live ones first */

/* Each scope with what it lets the agent do, in the operator's words; a scope
 * no longer configured shows its name. */
static json_t *scope_items(const struct config *cfg, const char *resource,
    const struct scope_set *s)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < s->n; i++) {
		const struct config_scope *sc = config_scope(cfg, resource, s->v[i]);
		json_array_append_new(a, json_pack("{s:s, s:s}", "name", s->v[i],
		    "description", sc && sc->description ? sc->description : s->v[i]));
	}
	return a;
}

static enum cs_err see_other(struct http_reply *rep, const char *location)
{
	rep->status = 303;
	rep->content_type = "text/plain; charset=utf-8";
	buf_reset(&rep->body);
	return reply_header(rep, "Location", location);
}

/* Consent ids are 22 characters of base64url: anything else is no consent,
 * and never reaches a return_to or a query. */
static bool id_shaped(const char *id)
{
	size_t n = 0;
	for (; id[n] != '\0'; n++)
		if (!((id[n] >= 'A' && id[n] <= 'Z') || (id[n] >= 'a' && id[n] <= 'z') ||
		    (id[n] >= '0' && id[n] <= '9') || id[n] == '-' || id[n] == '_'))
			return false;
	return n == CONSENT_ID_LEN;
}

static enum cs_err not_found(struct http_reply *rep)
{
	return reply_html_error(rep, 404, "No such consent", "There is no such consent of yours.");
}

/* The signed-in person's consent named in the URL into *k (zeroed first); a
 * 404 page (*ok false) when there is none -- SECURITY: someone else's looks
 * exactly like a missing one. */
static enum cs_err own_consent(const struct http_request *req, struct http_reply *rep,
    struct consent *k, bool *ok)
{
	struct store_conn *c = store_conn(req->app->store);
	enum cs_err e;
	memset(k, 0, sizeof *k);
	*ok = false;
	if (c == NULL)
		return CS_EDB;
	if (!id_shaped(req->captures[0]))
		return not_found(rep);
	e = consent_get(c, req->captures[0], req->now, k);
	if (e == CS_ENOENT)
		return not_found(rep);
	if (e != CS_OK)
		return e;
	if (k->user_id != req->auth.session->user_id) {
		consent_clear(k);
		return not_found(rep);
	}
	*ok = true;
	return CS_OK;
}

/* How an ended consent ended, in words (*why may stay NULL). */
static const char *ended_how(const struct consent *k, const char **why)
{
	*why = NULL;
	switch (consent_revoker(k)) {
	case CONSENT_BY_PERSON:
		return "Revoked by you";
	case CONSENT_BY_REPLACEMENT:
		*why = "you approved a newer request from this agent for the same account, "
		    "and that consent took this one's place";
		return "Replaced by a newer consent";
	case CONSENT_BY_ADMIN:
		*why = k->revoke_reason;
		return "Revoked by an administrator";
	case CONSENT_BY_OTHER:
		*why = k->revoke_reason;
		return "Ended by consentd";
	case CONSENT_BY_NOBODY:
	case CONSENT_REVOKER__MAX:
		break;
	}
	*why = "it reached the end of the time you chose";
	return "Expired";
}

/* One entry of "Agents acting for you". */
static json_t *active_item(struct app *app, struct store_conn *c, const struct consent *k)
{
	const struct config *cfg = app->cfg;
	return json_pack("{s:s, s:s, s:s, s:o, s:o, s:b, s:b, s:b, s:b, s:s?, s:o, s:o, s:o?, s:b}",
	    "id", k->id, "agent", pages_agent_name(cfg, k->agent),
	    "resource", pages_resource_name(cfg, k->resource),
	    "scopes", scope_items(cfg, k->resource, &k->granted),
	    "declined", scope_items(cfg, k->resource, &k->declined), "has_declined", k->declined.n > 0,
	    "offline", k->offline, "connected", vault_has_record(c, k->id) && !k->reconnect_required,
	    "reconnect", k->reconnect_required,
	    "reconnect_why", k->reconnect_required ?
	    health_reason_person(health_reason_parse(k->reconnect_reason)) : NULL,
	    "created", pages_time_value(k->created_at),
	    "expires", pages_time_value(k->expires_at),
	    "last_used", k->last_used_at > 0 ? pages_time_value(k->last_used_at) : NULL,
	    "by_organisation", k->granted_by != NULL);   /* idjag_grant.h */
}

/* One entry of the history; the administrator's reason made visible text. */
static json_t *history_item(const struct config *cfg, const struct consent *k)
{
	const char *why = NULL, *how = ended_how(k, &why);
	char *shown = why ? visible_text(why) : NULL;
	json_t *o;
	if (why != NULL && shown == NULL)
		return NULL;
	int64_t ended = k->revoked_at != 0 && k->revoked_at < k->expires_at ? k->revoked_at :
	    k->expires_at;
	o = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:s, s:s?, s:o?, s:b}",
	    "id", k->id, "agent", pages_agent_name(cfg, k->agent),
	    "resource", pages_resource_name(cfg, k->resource),
	    "scopes", scope_items(cfg, k->resource, &k->granted),
	    "created", pages_time_value(k->created_at),
	    "ended", pages_time_value(ended), "how", how, "why", shown,
	    "last_used", k->last_used_at > 0 ? pages_time_value(k->last_used_at) : NULL,
	    "by_organisation", k->granted_by != NULL);   /* idjag_grant.h */
	free(shown);
	return o;
}

static json_t *block_item(const struct config *cfg, const struct consent_block *b)
{
	return json_pack("{s:s, s:s, s:s, s:o, s:b, s:o, s:o}", "request_id", b->request_id,
	    "agent", pages_agent_name(cfg, b->agent), "resource", pages_resource_name(cfg, b->resource),
	    "scopes", scope_items(cfg, b->resource, &b->scopes), "declined", b->declined,
	    "decided", pages_time_value(b->decided_at), "until", pages_time_value(b->until));
}

/* A denied action (issue #32 item 3): named by its description, its values
 * as a person reads them (params_view), until when it is blocked. */
static json_t *action_block_item(const struct config *cfg, const struct approval_block *b)
{
	const struct config_action *act = config_action(cfg, b->resource, b->action);
	json_t *view = NULL;
	if (params_view(b->parameters, act != NULL && act->route_path != NULL, &view) != CS_OK)
		return NULL;
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o}", "id", b->id,
	    "agent", pages_agent_name(cfg, b->agent), "resource", pages_resource_name(cfg, b->resource),
	    "action", b->action, "action_description",
	    act != NULL && act->description != NULL ? act->description : b->action,
	    "view", view, "decided", pages_time_value(b->decided_at),
	    "until", pages_time_value(b->until));
}

/* Appends v to a, or fails for a NULL v (an allocation failed). */
static enum cs_err push(json_t *a, json_t *v)
{
	if (a == NULL || v == NULL || json_array_append_new(a, v) != 0)
		return CS_ENOMEM;
	return CS_OK;
}

/* A consent request waiting for the person's answer. */
static json_t *pending_item(const struct config *cfg, const struct consent_request *r)
{
	return json_pack("{s:s, s:s, s:s, s:o, s:o}", "id", r->id,
	    "agent", pages_agent_name(cfg, r->agent),
	    "resource", pages_resource_name(cfg, r->resource),
	    "scopes", scope_items(cfg, r->resource, &r->scopes),
	    "expires", pages_time_value(r->expires_at));
}

/* An action waiting for the person's approval, named by its description. */
static json_t *approval_item(const struct config *cfg, const struct approval *a)
{
	const struct config_action *act = config_action(cfg, a->resource, a->action);
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "id", a->id,
	    "agent", pages_agent_name(cfg, a->agent),
	    "resource", pages_resource_name(cfg, a->resource),
	    "action", a->action, "action_description",
	    act && act->description ? act->description : a->action,
	    "expires", pages_time_value(a->expires_at));
}

/* What /me lists for one person, as the domain returns it. */
struct me_lists {
	struct consent *ks;
	struct consent_request *rs;
	struct approval *as;
	struct consent_block *bs;
	struct approval_block *abs;
	size_t nk, nr, na, nb, nab;
};

static enum cs_err me_lists_read(struct store_conn *c, const struct config *cfg, int64_t user_id,
    int64_t now, struct me_lists *l)
{
	enum cs_err e;
	if ((e = consent_list_for_user(c, user_id, now, ME_LIST_MAX, &l->ks, &l->nk)) != CS_OK ||
	    (e = consent_pending_for_user(c, user_id, now, &l->rs, &l->nr)) != CS_OK ||
	    (e = approval_pending_for_user(c, user_id, now, &l->as, &l->na)) != CS_OK ||
	    (e = consent_blocks_for_user(c, cfg, user_id, now, &l->bs, &l->nb)) != CS_OK ||
	    (e = approval_blocks_for_user(c, cfg, user_id, now, &l->abs, &l->nab)) != CS_OK)
		return e;
	return CS_OK;
}

static void me_lists_clear(struct me_lists *l)
{
	approval_block_list_free(l->abs, l->nab);
	approval_list_free(l->as, l->na);
	consent_list_free(l->ks, l->nk);
	consent_request_list_free(l->rs, l->nr);
	consent_block_list_free(l->bs, l->nb);
}

/* The page's lists, one JSON array each, built from struct me_lists. */
struct me_items {
	json_t *active, *history, *pending, *approvals, *blocks, *action_blocks;
};

static enum cs_err me_items_build(struct app *app, struct store_conn *c, const struct me_lists *l,
    int64_t now, struct me_items *it)
{
	const struct config *cfg = app->cfg;
	enum cs_err e = CS_OK;

	it->active = json_array();
	it->history = json_array();
	it->pending = json_array();
	it->approvals = json_array();
	it->blocks = json_array();
	it->action_blocks = json_array();
	for (size_t i = 0; i < l->nab; i++)
		if ((e = push(it->action_blocks, action_block_item(cfg, &l->abs[i]))) != CS_OK)
			return e;
	for (size_t i = 0; i < l->nk; i++) {
		if (consent_is_live(&l->ks[i], now))
			e = push(it->active, active_item(app, c, &l->ks[i]));
		else
			e = push(it->history, history_item(cfg, &l->ks[i]));
		if (e != CS_OK)
			return e;
	}
	for (size_t i = 0; i < l->nr; i++)
		if ((e = push(it->pending, pending_item(cfg, &l->rs[i]))) != CS_OK)
			return e;
	for (size_t i = 0; i < l->na; i++)
		if ((e = push(it->approvals, approval_item(cfg, &l->as[i]))) != CS_OK)
			return e;
	for (size_t i = 0; i < l->nb; i++)
		if ((e = push(it->blocks, block_item(cfg, &l->bs[i]))) != CS_OK)
			return e;
	return CS_OK;
}

static void me_items_clear(struct me_items *it)
{
	json_decref(it->active);
	json_decref(it->history);
	json_decref(it->pending);
	json_decref(it->approvals);
	json_decref(it->blocks);
	json_decref(it->action_blocks);
}

enum cs_err me_pages_show(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	const struct session *s = req->auth.session;
	struct store_conn *c = store_conn(app->store);
	struct me_lists l;
	struct me_items it;
	json_t *ctx = NULL;
	enum cs_err e;

	memset(&l, 0, sizeof l);
	memset(&it, 0, sizeof it);
	if (c == NULL) {
		e = CS_EDB;
		goto out;
	}
	if ((e = me_lists_read(c, cfg, s->user_id, req->now, &l)) != CS_OK ||
	    (e = me_items_build(app, c, &l, req->now, &it)) != CS_OK)
		goto out;
	/* An admin (the ID token's admin claim) is offered the admin pages; the
	 * admin gate still decides on every one of them (a recent login too). */
	ctx = json_pack("{s:s, s:s?, s:O, s:O, s:O, s:O, s:O, s:b, s:b}", "title", "Your consents",
	    "issuer", s->issuer, "active", it.active, "history", it.history, "pending", it.pending,
	    "approvals", it.approvals, "blocks", it.blocks, "has_blocks", l.nb > 0,
	    "is_admin", s->admin_claim);
	if (ctx != NULL && (json_object_set(ctx, "action_blocks", it.action_blocks) != 0 ||
	    json_object_set_new(ctx, "has_action_blocks", json_boolean(l.nab > 0)) != 0)) {
		e = CS_ENOMEM;
		goto out;
	}
	if (ctx == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	/* Issue #32: the person's standing rules (standing_pages.c). */
	if ((e = me_rules_add(c, cfg, s->user_id, req->now, ctx)) != CS_OK)
		goto out;
	e = page_render(rep, 200, "me.html", ctx, s);
out:
	me_items_clear(&it);
	json_decref(ctx);
	me_lists_clear(&l);
	return e;
}

enum cs_err me_pages_revoke_confirm(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	const struct session *s = req->auth.session;     /* the router's session gate */
	struct consent k;
	char back[128];
	json_t *ctx = NULL;
	bool ok;
	enum cs_err e;

	if ((e = own_consent(req, rep, &k, &ok)) != CS_OK || !ok)
		goto out;
	/* own_consent: the id is CONSENT_ID_LEN characters, so this fits. */
	if (k.revoked_at != 0) {
		if ((e = str_fmt(back, sizeof back, "/me/consents/%s/revoked", k.id)) == CS_OK)
			e = see_other(rep, back);
		goto out;
	}
	if (!consent_is_live(&k, req->now)) {
		e = reply_html_error(rep, 410, "This consent already ended",
		    "It expired, so there is nothing to revoke. The agent has to ask you again.");
		goto out;
	}
	ctx = json_pack("{s:s, s:s, s:s, s:s, s:o, s:b, s:b, s:o, s:o}",
	    "title", "Revoke this consent?", "id", k.id, "agent", pages_agent_name(cfg, k.agent),
	    "resource", pages_resource_name(cfg, k.resource),
	    "scopes", scope_items(cfg, k.resource, &k.granted),
	    "offline", k.offline, "provider", vault_provider(app->vault, k.resource) != NULL,
	    "created", pages_time_value(k.created_at), "expires", pages_time_value(k.expires_at));
	e = page_render(rep, 200, "me_revoke.html", ctx, s);
out:
	json_decref(ctx);
	consent_clear(&k);
	return e;
}

enum cs_err me_pages_revoke(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct session *s = req->auth.session;     /* the router's session form gate */
	struct store_conn *c = store_conn(app->store);
	char done[128];
	enum consent_revoke_outcome o = CONSENT_REVOKE_UNKNOWN;
	enum cs_err e;
	if (c == NULL)
		return CS_EDB;
	if (!id_shaped(req->captures[0]))
		return not_found(rep);
	/* The route requires confirm=yes (ME_REVOKE_CONFIRM): only the
	 * confirmation page's form revokes. */
	if ((e = consent_revoke(c, req->captures[0], &(struct consent_actor){ .user_id = s->user_id,
	    .actor = req->auth.actor, .now = req->now }, "revoked by the person on /me", &o)) != CS_OK)
		return e;
	if (o == CONSENT_REVOKE_UNKNOWN || o == CONSENT_REVOKE_NOT_YOURS)
		return not_found(rep);   /* SECURITY: someone else's looks exactly like a missing one */
	/* Revoked now or before: the page after says how it ended. */
	if ((e = str_fmt(done, sizeof done, "/me/consents/%s/revoked", req->captures[0])) == CS_OK)
		e = see_other(rep, done);
	return e;
}

enum cs_err me_pages_revoked(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	const struct session *s = req->auth.session;     /* the router's session gate */
	struct consent k;
	char *shown = NULL;
	json_t *ctx = NULL;
	bool ok;
	enum cs_err e;

	if ((e = own_consent(req, rep, &k, &ok)) != CS_OK || !ok)
		goto out;
	if (k.revoked_at == 0) {
		e = see_other(rep, "/me");   /* nothing was revoked: the panel says how it stands */
		goto out;
	}
	const char *why = NULL, *how = ended_how(&k, &why);
	if (why != NULL && (shown = visible_text(why)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	ctx = json_pack("{s:s, s:b, s:s, s:s, s:o, s:s, s:s?, s:b}",
	    "title", consent_revoker(&k) == CONSENT_BY_PERSON ? "Access revoked" : "This consent ended",
	    "by_you", consent_revoker(&k) == CONSENT_BY_PERSON,
	    "agent", pages_agent_name(cfg, k.agent), "resource", pages_resource_name(cfg, k.resource),
	    "when", pages_time_value(k.revoked_at), "how", how, "why", shown,
	    "provider", vault_provider(app->vault, k.resource) != NULL);
	e = page_render(rep, 200, "me_revoked.html", ctx, s);
out:
	free(shown);
	json_decref(ctx);
	consent_clear(&k);
	return e;
}

enum cs_err me_pages_allow(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct session *s = req->auth.session;     /* the router's session form gate */
	struct store_conn *c = store_conn(app->store);
	enum consent_lift_outcome o = CONSENT_LIFT_UNKNOWN;
	enum cs_err e;
	if (c == NULL)
		return CS_EDB;
	if ((e = consent_allow_asking(c, app->cfg, req->captures[0], &(struct consent_actor){
	    .user_id = s->user_id, .actor = req->auth.actor, .now = req->now }, &o)) != CS_OK)
		return e;
	if (o == CONSENT_LIFT_UNKNOWN || o == CONSENT_LIFT_NOT_YOURS)
		/* SECURITY: someone else's request looks exactly like a missing one. */
		return reply_html_error(rep, 404, "No such request", "There is no such decision of yours.");
	if (o == CONSENT_LIFT_UNDECIDED)
		return reply_html_error(rep, 400, "Nothing to allow",
		    "This request was never decided, so it holds no agent back.");
	/* Lifted now, or already free to ask: either way /me shows it no longer blocked. */
	return see_other(rep, "/me");
}

enum cs_err me_pages_approval_allow(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct session *s = req->auth.session;     /* the router's session form gate */
	struct store_conn *c = store_conn(app->store);
	enum approval_lift_outcome o = APPROVAL_LIFT_UNKNOWN;
	enum cs_err e;
	if (c == NULL)
		return CS_EDB;
	if ((e = approval_allow_asking(c, app->cfg, req->captures[0], s->user_id, req->auth.actor,
	    req->now, &o)) != CS_OK)
		return e;
	if (o == APPROVAL_LIFT_UNKNOWN || o == APPROVAL_LIFT_NOT_YOURS)
		/* SECURITY: someone else's approval looks exactly like a missing one. */
		return reply_html_error(rep, 404, "No such action", "There is no such decision of yours.");
	if (o == APPROVAL_LIFT_NOT_DENIED)
		return reply_html_error(rep, 400, "Nothing to allow",
		    "You did not deny this action, so it holds no agent back.");
	/* Lifted now, or already free to ask: either way /me shows it no longer blocked. */
	return see_other(rep, "/me");
}

enum cs_err me_pages_reconnect(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct session *s = req->auth.session;     /* the router's session form gate */
	struct store_conn *c = store_conn(app->store);
	struct consent_reconnect r;
	char to[128];
	enum cs_err e;
	if (c == NULL)
		return CS_EDB;
	if (!id_shaped(req->captures[0]))
		return not_found(rep);
	if ((e = consent_reconnect(c, app->cfg, req->captures[0], &(struct consent_actor){
	    .user_id = s->user_id, .actor = req->auth.actor, .now = req->now }, &r)) != CS_OK)
		return e;
	switch (r.outcome) {
	case CONSENT_RECONNECT_ASKED:
	case CONSENT_RECONNECT_PENDING:
		/* The consent page of the request: approving it goes on to the
		 * provider, and back here the connection works again. */
		if ((e = str_fmt(to, sizeof to, "/consent/%s", r.request_id)) != CS_OK)
			return e;
		return see_other(rep, to);
	case CONSENT_RECONNECT_NOT_NEEDED:
		return see_other(rep, "/me");    /* the panel says how it stands */
	case CONSENT_RECONNECT_UNAVAILABLE:
		return reply_html_error(rep, 409, "This connection cannot be made again",
		    "None of the permissions this agent had may be asked for any more. Revoke the "
		    "consent; the agent can ask for what it may have now.");
	case CONSENT_RECONNECT_UNKNOWN:
	case CONSENT_RECONNECT_NOT_YOURS:
	case CONSENT_RECONNECT__MAX:
		break;
	}
	return not_found(rep);   /* SECURITY: someone else's looks exactly like a missing one */
}
