/* consent_pages.c -- the consent page, the decision and the page after it
 * (flow B).  Session binding: a request is shown and decided only by the
 * person it was made for.  Every value that matters comes from the stored
 * request, never from the form: the form only says which of the stored
 * scopes are ticked.  Each handler calls one domain function. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "agent.h"
#include "app.h"
#include "authorize_pages.h"
#include "authz_flow.h"
#include "buf.h"
#include "consent.h"
#include "consent_pages.h"
#include "form.h"
#include "login.h"
#include "mcp_client.h"
#include "page_reply.h"
#include "pages.h"
#include "scope.h"
#include "session.h"
#include "vault.h"
#include "vault_connect.h"

static const int64_t durations[] = { 3600, 86400, 7 * 86400, 30 * 86400, 90 * 86400, 365 * 86400 };
static const char *const duration_names[] = { "1 hour", "1 day", "7 days", "30 days", "90 days", "1 year" };
#define N_DURATIONS (sizeof durations / sizeof durations[0])

/* "3 days", "1 hour", "90 minutes": a duration of s seconds in its largest whole unit. */
static enum cs_err duration_label(int64_t s, char out[48])
{
	static const struct {
		int64_t unit;
		const char *one, *many;
	} units[] = { { 86400, "day", "days" }, { 3600, "hour", "hours" }, { 60, "minute", "minutes" },
		{ 1, "second", "seconds" } };
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		if (s % units[i].unit == 0) {
			int64_t n = s / units[i].unit;
			return str_fmt(out, 48, "%lld %s", (long long)n, n == 1 ? units[i].one :
			    units[i].many);
		}
	}
	return CS_EINVAL;                 /* cannot happen: every s is a whole number of seconds */
}

/* The durations the consent page offers for res, shortest first: the usual ones up to
 * max_consent, max_consent itself ("the longest allowed") and the preselected default,
 * [consent] default_duration lowered to max_consent.  consent_decide takes any duration
 * from 1 to max_consent; these are only the choices shown. */
static json_t *duration_options(const struct config *cfg, const struct config_resource *res)
{
	int64_t max = res->max_consent, v[N_DURATIONS + 2];
	int64_t dflt = cfg->consent_default_duration < max ? cfg->consent_default_duration : max;
	size_t n = 0;
	json_t *opts = json_array();
	for (size_t i = 0; i < N_DURATIONS && durations[i] <= max; i++)
		v[n++] = durations[i];
	for (int k = 0; k < 2; k++) {
		int64_t want = k == 0 ? dflt : max;
		size_t at = 0;
		while (at < n && v[at] < want)
			at++;
		if (at < n && v[at] == want)
			continue;
		memmove(&v[at + 1], &v[at], (n - at) * sizeof v[0]);
		v[at] = want;
		n++;
	}
	for (size_t i = 0; opts != NULL && i < n; i++) {
		char label[80], unit[48] = "";
		const char *std = NULL;
		for (size_t j = 0; j < N_DURATIONS; j++)
			if (durations[j] == v[i])
				std = duration_names[j];
		if ((std == NULL && duration_label(v[i], unit) != CS_OK) ||
		    str_fmt(label, sizeof label, "%s%s", std ? std : unit,
		    std == NULL && v[i] == max ? " (the longest allowed)" : "") != CS_OK ||
		    json_array_append_new(opts, json_pack("{s:I, s:s, s:b}", "seconds", (json_int_t)v[i],
		    "label", label, "selected", v[i] == dflt)) != 0) {
			json_decref(opts);
			return NULL;
		}
	}
	return opts;
}

/* Loads the request named in the URL and checks it belongs to the signed-in
 * person.  Returns CS_OK with *ok true when the caller may go on; otherwise
 * the reply is complete. */
static enum cs_err bound_request(const struct http_request *req, struct http_reply *rep,
    struct store_conn *c, const struct session *s, struct consent_request *r, bool *ok)
{
	enum cs_err e;
	*ok = false;
	e = consent_request_get(c, req->captures[0], r);
	if (e == CS_ENOENT)
		return reply_html_error(rep, 404, "No such request",
		    "This consent request does not exist. Ask your agent for a new link.");
	if (e != CS_OK)
		return e;
	/* SECURITY: session binding (invariant 4) -- only the person the agent
	 * asked for may see or decide this request. */
	if (r->user_id != s->user_id)
		return pages_refuse_other_account(req, rep, s, "consent", &(struct consent_refusal){
		    .subject = r->subject, .agent = r->agent, .resource = r->resource,
		    .request_id = r->id });
	*ok = true;
	return CS_OK;
}

static json_t *scope_items(const struct config *cfg, const struct consent_request *r)
{
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < r->scopes.n; i++) {
		const struct config_scope *sc = config_scope(cfg, r->resource, r->scopes.v[i]);
		char field[24];
		if (str_fmt(field, sizeof field, "s%zu", i) != CS_OK) {
			json_decref(arr);
			return NULL;
		}
		json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:b}", "field", field,
		    "name", r->scopes.v[i], "description", sc ? sc->description : r->scopes.v[i],
		    "already", scope_set_has(&r->pre_granted, r->scopes.v[i])));
	}
	return arr;
}

/* True when the person already has a live connection at res's provider for this agent,
 * which a consent keeping the same provider scopes takes over without a new sign-in
 * there (vault_begin_connect). */
static bool provider_connected(struct store_conn *c, const struct consent_request *r, int64_t now)
{
	struct consent live;
	bool yes;
	memset(&live, 0, sizeof live);
	if (c == NULL || consent_current(c, r->user_id, r->agent, r->resource, now, &live) != CS_OK)
		return false;
	yes = !live.reconnect_required && vault_has_record(c, live.id);
	consent_clear(&live);
	return yes;
}

/* --- MCP clients (issue #30) ------------------------------------------------ */

/* What the page says of an MCP client besides its name: whether the client
 * chose that name itself, the host of its client-id URL, and where the
 * answer goes (the redirect URI's host; a loopback one is an app on this
 * computer).  NULL for a gateway's agent, or on allocation failure (*e). */
static json_t *mcp_client_item(const struct http_request *req, const struct agent_view *ag,
    const struct consent_request *r, char **name, enum cs_err *e)
{
	struct mcp_client k;
	struct store_authz_request ar;
	char why[CIMD_WHY_MAX], host[256] = "";
	bool have, loopback = false;
	json_t *item = NULL;
	*e = CS_OK;
	*name = NULL;
	if (ag->kind == AGENT_CONFIGURED)
		return NULL;
	memset(&k, 0, sizeof k);
	memset(&ar, 0, sizeof ar);
	/* The document is cached from /authorize: no new fetch in the usual case. */
	have = mcp_client_lookup(req->app, r->agent, req->now, &k, why, sizeof why) == CS_OK;
	if (authz_flow_request_of_consent(store_conn(req->app->store), r->id, req->now, &ar) == CS_OK &&
	    authz_flow_uri_host(ar.redirect_uri, host, sizeof host, &loopback) != CS_OK)
		host[0] = '\0';
	/* SECURITY: a name the client chose is its own text: made visible, and
	 * marked as the client's. */
	if ((*name = visible_text(have && k.name != NULL ? k.name : ag->name)) == NULL) {
		*e = CS_ENOMEM;
		goto out;
	}
	item = json_pack("{s:s, s:b, s:s, s:s, s:b}", "name", *name,
	    "self_named", have && k.self_named, "client_host", have ? k.host : "",
	    "redirect_host", host, "loopback", loopback);
	if (item == NULL)
		*e = CS_ENOMEM;
out:
	store_authz_request_clear(&ar);
	mcp_client_clear(&k);
	return item;
}

/* The consent page for r, pending and the signed-in person's, with the
 * version it shows in its form.  notice (or NULL) is said above the request. */
static enum cs_err consent_page(const struct http_request *req, struct http_reply *rep,
    const struct session *s, const struct consent_request *r, int status, const char *notice)
{
	const struct config *cfg = req->app->cfg;
	char version[CONSENT_VERSION_LEN + 1], other[200];
	json_t *ctx = NULL, *opts = NULL, *expires = NULL, *client = NULL;
	char *reason = NULL, *who = NULL, *client_name = NULL;
	bool provider;
	enum cs_err e;

	if (strcmp(r->status, "pending") != 0 || r->expires_at <= req->now)
		return reply_html_error(rep, 410, "This request is closed",
		    strcmp(r->status, "approved") == 0 ? "You already approved this request." :
		    strcmp(r->status, "denied") == 0 ? "You already denied this request." :
		    "This request expired. Your agent can ask again.");
	const struct config_resource *res = config_resource(cfg, r->resource);
	struct agent_view ag;
	if (res == NULL || !agent_resolve(cfg, r->agent, &ag))
		return reply_html_error(rep, 410, "This request is closed",
		    "The agent or resource it names is no longer configured.");
	provider = vault_provider(req->app->vault, r->resource) != NULL;
	if ((client = mcp_client_item(req, &ag, r, &client_name, &e)) == NULL && e != CS_OK)
		goto out;
	if ((opts = duration_options(cfg, res)) == NULL || (expires = pages_time_value(r->expires_at)) == NULL ||
	    (who = pages_signed_in_name(s)) == NULL ||
	    (r->reason && (reason = visible_text(r->reason)) == NULL)) {
		e = CS_ENOMEM;
		goto out;
	}
	/* "Not you?" signs in afresh (prompt=login) and comes back to this request, as
	 * the page for another account does (refuse_other_account). */
	if ((e = str_fmt(other, sizeof other, "/login?prompt=login&return_to=%%2Fconsent%%2F%s",
	    r->id)) != CS_OK)
		goto out;
	/* SECURITY: the form names the version it was drawn from; a decision on
	 * any other version of the request grants nothing (consent_decide). */
	consent_request_version(r, version);
	ctx = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?, s:o, s:O, s:b, s:O, s:s, s:s?, s:s, s:s, "
	    "s:b, s:b, s:O?}",
	    "title", "An agent asks for your permission", "request_id", r->id,
	    "agent", client_name != NULL ? client_name : ag.name, "agent_description", ag.description, "resource", res->name,
	    "reason", reason, "scopes", scope_items(cfg, r), "durations", opts,
	    "offline", ag.offline, "expires", expires, "version", version, "notice", notice,
	    "signed_in_as", who, "other_account_url", other, "provider", provider,
	    "provider_connected", provider && provider_connected(store_conn(req->app->store), r,
	    req->now), "client", client);
	e = page_render(rep, status, "consent.html", ctx, s);
out:
	free(reason);
	free(who);
	free(client_name);
	json_decref(client);
	json_decref(opts);
	json_decref(expires);
	json_decref(ctx);
	return e;
}

/* The request the URL names, as it is now, on its page (status, with note
 * above it when given): the person's own only (bound_request). */
static enum cs_err show_request(const struct http_request *req, struct http_reply *rep,
    struct store_conn *c, const struct session *s, int status, const char *note)
{
	struct consent_request now;
	bool ok;
	enum cs_err e;
	memset(&now, 0, sizeof now);
	if ((e = bound_request(req, rep, c, s, &now, &ok)) == CS_OK && ok)
		e = consent_page(req, rep, s, &now, status, note);
	consent_request_clear(&now);
	return e;
}

enum cs_err consent_pages_show(const struct http_request *req, struct http_reply *rep)
{
	struct store_conn *c = store_conn(req->app->store);
	if (c == NULL)
		return CS_EDB;
	return show_request(req, rep, c, req->auth.session /* the router's session gate */, 200,
	    NULL);
}

/* The request changed under the person's open page: nothing was decided; the
 * request is shown again as it is now (409), to be decided anew. */
static enum cs_err consent_changed(const struct http_request *req, struct http_reply *rep,
    struct store_conn *c, const struct session *s)
{
	return show_request(req, rep, c, s, 409,
	    "This request changed while you were looking at it, so nothing was given. "
	    "Here it is as it is now: check it and decide again.");
}

/* The decision the form states for the stored request r, into *d: *ok false
 * when the reply (a 400 page) is complete.  The boxes are named by position in
 * the stored request: a form can only choose among the scopes the agent asked
 * for, never add one, and the version (checked in consent_decide) makes the
 * positions those the person saw. */
static enum cs_err read_decision(const struct http_request *req, struct http_reply *rep,
    const struct consent_request *r, struct consent_decision *d, bool *ok)
{
	const char *version = http_arg_str(req, CONSENT_PAGES_DECIDE_VERSION);
	/* typed by the router: s0 .. s19, "on" */
	uint64_t boxes = http_arg_family(req, CONSENT_PAGES_DECIDE_S);
	*ok = false;
	d->approve = strcmp(http_arg_str(req, CONSENT_PAGES_DECIDE_DECISION), "approve") == 0;
	/* A form without a version is treated as drawn from another version. */
	if (version != NULL && strlen(version) == CONSENT_VERSION_LEN)
		memcpy(d->version, version, sizeof d->version);
	if (!d->approve) {
		*ok = true;
		return CS_OK;
	}
	if (r->scopes.n < CONSENT_MAX_SCOPES && (boxes >> r->scopes.n) != 0)
		return reply_html_error(rep, 400, "Bad request",
		    "The form names a permission the agent did not ask for.");
	for (size_t i = 0; i < r->scopes.n; i++) {
		if (!(boxes & (UINT64_C(1) << i)))
			continue;
		if ((d->selected.v[d->selected.n] = strdup(r->scopes.v[i])) == NULL)
			return CS_ENOMEM;
		d->selected.n++;
	}
	if (d->selected.n == 0)
		return reply_html_error(rep, 400, "Nothing selected",
		    "Tick at least one permission to approve, or choose Deny.");
	if (!http_arg_int(req, CONSENT_PAGES_DECIDE_DURATION, &d->duration) || d->duration <= 0)
		return reply_html_error(rep, 400, "Bad request", "Choose how long the permission lasts.");
	d->offline = http_arg(req, CONSENT_PAGES_DECIDE_OFFLINE) != NULL;
	*ok = true;
	return CS_OK;
}

/* The scopes of set, each with what it lets the agent do (the operator's words). */
static json_t *done_scopes(const struct config *cfg, const char *resource,
    const struct scope_set *set)
{
	json_t *a = json_array();
	for (size_t i = 0; a != NULL && i < set->n; i++) {
		const struct config_scope *sc = config_scope(cfg, resource, set->v[i]);
		if (json_array_append_new(a, json_pack("{s:s, s:s}", "name", set->v[i], "description",
		    sc != NULL && sc->description != NULL ? sc->description : set->v[i])) != 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* What a done page lists (issue #32 item 7), from the stored state: for a
 * given consent (consent_id) what it grants, what was declined and until
 * when; for a denial, everything the request asked for, declined.  Nothing
 * added when the consent cannot be read (the page still says what happened). */
static enum cs_err done_lists(struct store_conn *c, const struct config *cfg,
    const struct consent_request *r, const char *consent_id, bool approved, int64_t now,
    json_t *ctx)
{
	struct consent k;
	enum cs_err e = CS_OK;
	int bad = 0;
	memset(&k, 0, sizeof k);
	if (!approved) {
		bad = json_object_set_new(ctx, "declined_scopes", done_scopes(cfg, r->resource,
		    &r->scopes)) || json_object_set_new(ctx, "has_declined", json_boolean(r->scopes.n > 0));
		return bad ? CS_ENOMEM : CS_OK;
	}
	if (c == NULL || consent_id == NULL)
		return CS_OK;
	if ((e = consent_get(c, consent_id, now, &k)) == CS_ENOENT)
		return CS_OK;
	if (e != CS_OK)
		return e;
	bad = json_object_set_new(ctx, "given", done_scopes(cfg, k.resource, &k.granted)) ||
	    json_object_set_new(ctx, "declined_scopes", done_scopes(cfg, k.resource, &k.declined)) ||
	    json_object_set_new(ctx, "has_declined", json_boolean(k.declined.n > 0)) ||
	    json_object_set_new(ctx, "until", pages_time_value(k.expires_at)) ||
	    json_object_set_new(ctx, "offline", json_boolean(k.offline));
	consent_clear(&k);
	return bad ? CS_ENOMEM : CS_OK;
}

/* The page that answers a decision d on r whose outcome is o. */
static enum cs_err decided_page(const struct http_request *req, struct http_reply *rep,
    const struct session *s, const struct consent_request *r, const struct consent_decision *d,
    const struct consent_decided *done)
{
	enum consent_decide_outcome o = done->outcome;
	const struct config *cfg = req->app->cfg;
	json_t *ctx;
	enum cs_err e;
	switch (o) {
	case CONSENT_DECIDED:
		break;
	case CONSENT_DECIDE_CHANGED:
		return consent_changed(req, rep, store_conn(req->app->store), s);
	case CONSENT_DECIDE_NOT_YOURS:
		return reply_html_error(rep, 403, "Not allowed", "This request is for another account.");
	case CONSENT_DECIDE_UNKNOWN:
		return reply_html_error(rep, 404, "No such request",
		    "This consent request does not exist. Ask your agent for a new link.");
	case CONSENT_DECIDE_CLOSED:
	case CONSENT_DECIDE_INVALID:
	case CONSENT_DECIDE__MAX:
		return reply_html_error(rep, 400, "This request cannot be decided",
		    "It was already decided, it expired, or the choice was not valid.");
	}
	/* A denial holds the agent back for deny_cooldown (consent.h): said here,
	 * with the way to lift it, so that a misclick is not a silent day. */
	ctx = json_pack("{s:s, s:b, s:s, s:s, s:o?}", "title", d->approve ? "Permission given" : "Request denied",
	    "approved", d->approve, "agent", pages_agent_name(cfg, r->agent), "resource",
	    pages_resource_name(cfg, r->resource), "blocked_until", !d->approve && cfg->consent_deny_cooldown > 0 ?
	    pages_time_value(req->now + cfg->consent_deny_cooldown) : NULL);
	if (ctx == NULL)
		return CS_ENOMEM;
	if ((e = done_lists(store_conn(req->app->store), cfg, r, done->consent_id, d->approve,
	    req->now, ctx)) != CS_OK) {
		json_decref(ctx);
		return e;
	}
	e = page_render(rep, 200, "consent_done.html", ctx, s);
	json_decref(ctx);
	return e;
}

enum cs_err consent_pages_decide(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	const struct session *s = req->auth.session;     /* the router's session form gate */
	const char *actor = req->auth.actor;
	struct consent_request r;
	struct consent_decision d;
	struct consent_decided done = { CONSENT_DECIDE_UNKNOWN, NULL };
	struct store_conn *c = store_conn(app->store);
	bool ok;
	enum cs_err e;

	memset(&r, 0, sizeof r);
	memset(&d, 0, sizeof d);
	if (c == NULL)
		return CS_EDB;
	if ((e = bound_request(req, rep, c, s, &r, &ok)) != CS_OK || !ok)
		goto out;
	if ((e = read_decision(req, rep, &r, &d, &ok)) != CS_OK || !ok)
		goto out;
	if (d.approve && vault_provider(app->vault, r.resource) != NULL) {
		/* A resource with a provider: the consent goes live only once the
		 * provider authorized exactly its scopes (or a record moves over). */
		struct vault_begin vb = { NULL, NULL, CONSENT_DECIDED };
		e = vault_begin_connect(app->vault, c, cfg,
		    &(struct vault_person){ s->user_id, s->id_hash, actor, req->now },
		    &(struct vault_decision){ r.id, &d }, &vb);
		if (e == CS_OK && vb.authorize_url != NULL) {
			rep->status = 303;
			rep->content_type = "text/plain; charset=utf-8";
			e = reply_header(rep, "Location", vb.authorize_url);
			vault_begin_clear(&vb);
			goto out;
		}
		done.outcome = vb.outcome;
		vault_begin_clear(&vb);
	} else {
		e = consent_decide(c, cfg, r.id, &(struct consent_actor){ .user_id = s->user_id,
		    .actor = actor, .now = req->now }, &d, &done);
	}
	/* An API key resource: where a provider's sign-in would be, the page
	 * that takes the key (vault_pages_key_show). */
	if (e == CS_OK && done.outcome == CONSENT_DECIDED && done.consent_id != NULL &&
	    config_resource(cfg, r.resource) != NULL &&
	    config_resource(cfg, r.resource)->credential == CREDENTIAL_API_KEY) {
		char key_page[256];
		if ((e = str_fmt(key_page, sizeof key_page, "/me/consents/%s/key",
		    done.consent_id)) == CS_OK) {
			rep->status = 303;
			rep->content_type = "text/plain; charset=utf-8";
			e = reply_header(rep, "Location", key_page);
		}
		goto out;
	}
	/* An MCP client's sign-in: the decision goes back to /authorize. */
	if (e == CS_OK && done.outcome == CONSENT_DECIDED) {
		bool sent;
		if ((e = authorize_pages_continue(req, rep, r.id, &sent)) != CS_OK || sent)
			goto out;
	}
	if (e == CS_OK)
		e = decided_page(req, rep, s, &r, &d, &done);
out:
	consent_decided_clear(&done);
	scope_set_clear(&d.selected);
	consent_request_clear(&r);
	return e;
}

/* What the done page says besides the request: approved, the scopes the
 * provider left out (or NULL), why nothing was connected (or NULL). */
struct done_says {
	bool        approved;
	const char *narrowed, *failure;
};

static enum cs_err done_page(struct http_reply *rep, const struct config *cfg,
    const struct consent_request *r, const struct session *s, const struct done_says *say,
    struct store_conn *c, int64_t now)
{
	const char *failure = say->failure;
	json_t *ctx = json_pack("{s:s, s:b, s:s, s:s, s:s?, s:s?, s:s, s:b}", "title",
	    failure ? "Not connected" : say->approved ? "Permission given" : "Request denied",
	    "approved", say->approved && !failure, "agent", pages_agent_name(cfg, r->agent),
	    "resource", pages_resource_name(cfg, r->resource), "narrowed", say->narrowed, "failure", failure,
	    "request_id", r->id, "retry", failure != NULL && strcmp(r->status, "pending") == 0);
	enum cs_err e;
	if (ctx == NULL)
		return CS_ENOMEM;
	if (failure == NULL && strcmp(r->status, "pending") != 0 &&
	    (e = done_lists(c, cfg, r, r->consent_id, say->approved, now, ctx)) != CS_OK) {
		json_decref(ctx);
		return e;
	}
	e = page_render(rep, 200, "consent_done.html", ctx, s);
	json_decref(ctx);
	return e;
}

/* The sentence a done page says for a still pending request after the
 * provider step: what ?outcome= names (never its text), the failure otherwise. */
static const char *done_failure(const char *outcome)
{
	static const struct {
		const char *outcome, *says;
	} said[] = {
		{ "too_much", "The provider granted more than was asked for, so consentd revoked those "
		    "tokens at once and gave nothing. Try again or ask the provider's administrator." },
		{ "changed", "The request changed while you were at the provider, so nothing was given "
		    "and the connection was undone. Open the request again to see it as it is now." },
	};
	for (size_t i = 0; i < sizeof said / sizeof said[0]; i++)
		if (strcmp(outcome, said[i].outcome) == 0)
			return said[i].says;
	return "The connection to the provider failed. Nothing was given; you can try again.";
}

enum cs_err consent_pages_done(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct session *s = req->auth.session;     /* the router's session gate */
	struct consent_request r;
	struct store_conn *c = store_conn(app->store);
	const char *outcome = http_arg_str(req, CONSENT_PAGES_DONE_OUTCOME);
	char back[LOGIN_RETURN_TO_MAX + 1], cancelled[600];
	bool ok, sent = false;
	enum cs_err e;
	memset(&r, 0, sizeof r);
	if (c == NULL)
		return CS_EDB;
	if ((e = bound_request(req, rep, c, s, &r, &ok)) != CS_OK || !ok)
		goto out;
	/* SECURITY: the stored status decides what the page says; a link (an agent
	 * hands the person that link) chooses at most which of consentd's sentences
	 * explains a request that is still pending. */
	if (strcmp(r.status, "pending") == 0 && outcome == NULL) {
		rep->status = 303;
		rep->content_type = "text/plain; charset=utf-8";
		buf_reset(&rep->body);
		if ((e = str_fmt(back, sizeof back, "/consent/%s", r.id)) == CS_OK)
			e = reply_header(rep, "Location", back);
	} else if (strcmp(r.status, "pending") != 0 &&
	    ((e = authorize_pages_continue(req, rep, r.id, &sent)) != CS_OK || sent)) {
		/* decided, for an MCP client's sign-in: the 303 to /authorize/{id}/done */
	} else if (strcmp(r.status, "pending") != 0 || outcome == NULL) {
		/* What was left out comes from the stored request, never from the link. */
		e = done_page(rep, app->cfg, &r, s, &(struct done_says){
		    .approved = strcmp(r.status, "approved") == 0,
		    .narrowed = strcmp(r.status, "approved") == 0 ? r.narrowed : NULL }, c, req->now);
	} else if (strcmp(outcome, "cancelled") == 0) {
		if ((e = str_fmt(cancelled, sizeof cancelled, "You cancelled at %s, so %s was not "
		    "connected to it and nothing was given. The request still waits for you: review "
		    "it again to connect, or deny it.", pages_resource_name(app->cfg, r.resource),
		    pages_agent_name(app->cfg, r.agent))) == CS_OK)
			e = done_page(rep, app->cfg, &r, s, &(struct done_says){ .failure = cancelled }, c,
			    req->now);
	} else {
		e = done_page(rep, app->cfg, &r, s, &(struct done_says){
		    .failure = done_failure(outcome) }, c, req->now);
	}
out:
	consent_request_clear(&r);
	return e;
}
