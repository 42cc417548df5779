/* admin_pages.c -- the admin's browser pages under /admin: search, one
 * consent's history and standing rules, revoking one or ending a rule after a
 * confirmation, bulk revocation after
 * a confirmation that says how many, the audit log newest first and the check
 * of its chain.  Thin views over admin.h: no SQL, no transaction, no audit
 * entry of its own (admin.c writes them), and no rule of its own beyond who
 * may see them and that every revocation carries the admin's reason.  It must
 * never show a page to anyone but an admin whose IdP login (auth_time) is
 * recent enough. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jansson.h>
#include "admin.h"
#include "admin_pages.h"
#include "agent.h"
#include "app.h"
#include "audit.h"
#include "buf.h"
#include "form.h"
#include "health.h"
#include "login.h"
#include "page_reply.h"
#include "standing.h"
#include "standing_pages.h"

#define ADMIN_PAGE_ROWS 50
/* Audit rows are taller (details, two names a row): 25 keep a page near 2,000 px at 1280 px. */
#define ADMIN_AUDIT_ROWS 25
#define ADMIN_COUNT_MAX_PAGES 2000     /* 2000 pages of ADMIN_LIST_MAX: a million consents */

enum admin_gate admin_gate_check(const struct config *cfg, const struct session *s, int64_t now,
    bool stepup)
{
	int64_t max = cfg->session_admin_timeout;
	if (!s->admin_claim)
		return ADMIN_GATE_NOT_ADMIN;
	if (stepup && max > ADMIN_STEPUP_MAX_AGE)
		max = ADMIN_STEPUP_MAX_AGE;
	/* SECURITY: measured from the IdP's auth_time, never from this session:
	 * single sign-on makes sessions without anyone typing a password.  A
	 * missing auth_time was recorded as 0 and never counts as recent. */
	if (s->auth_time <= 0 || s->auth_time > now + cfg->oidc_clock_skew ||
	    now - s->auth_time > max)
		return ADMIN_GATE_STALE;
	return ADMIN_GATE_OK;
}

/* --- small helpers -------------------------------------------------------- */

/* How a time is written: in prose with " UTC"; in a table cell without it
 * (the column header says UTC); as ISO 8601 for <time datetime>; and as
 * <input type="datetime-local"> wants its value. */
enum time_form { TIME_PROSE, TIME_CELL, TIME_ISO, TIME_INPUT };

/* "-" for 0 (never). */
static void fmt_time_as(int64_t t, enum time_form form, char out[32])
{
	time_t tt = (time_t)t;
	struct tm tm;
	size_t n = 0;
	if (t <= 0 || gmtime_r(&tt, &tm) == NULL) {
		memcpy(out, "-", 2);
		return;
	}
	switch (form) {
	case TIME_PROSE: n = strftime(out, 32, "%Y-%m-%d %H:%M:%S UTC", &tm); break;
	case TIME_CELL:  n = strftime(out, 32, "%Y-%m-%d %H:%M:%S", &tm); break;
	case TIME_ISO:   n = strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm); break;
	case TIME_INPUT: n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm); break;
	}
	if (n == 0)
		memcpy(out, "-", 2);
}

static void fmt_time(int64_t t, char out[32])
{
	fmt_time_as(t, TIME_PROSE, out);
}

static void fmt_cell_time(int64_t t, char out[32])
{
	fmt_time_as(t, TIME_CELL, out);
}

/* Ids and subjects in tables: a value of more than ADMIN_SHOWN_MAX
 * characters is shown as its first ADMIN_SHOWN_HEAD and last
 * ADMIN_SHOWN_TAIL characters around an ellipsis (ids from one IdP often
 * share a prefix; the end tells them apart), so that a column stays narrow
 * and an id never wraps letter by letter; the template puts the whole value
 * in a title (a tooltip) and the link.  Characters are counted by UTF-8 lead
 * bytes, so none is split.  malloc'd. */
#define ADMIN_SHOWN_MAX 14
#define ADMIN_SHOWN_HEAD 8
#define ADMIN_SHOWN_TAIL 4

static char *shorten(const char *s)
{
	size_t chars = 0, n = 0, head = 0, tail = 0, i;
	struct buf b;
	for (i = 0; s[i]; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			chars++;
	buf_init(&b, i + 8);
	if (chars <= ADMIN_SHOWN_MAX) {
		if (buf_puts(&b, s) != CS_OK)
			goto fail;
		return buf_steal(&b);
	}
	/* The byte offsets of character ADMIN_SHOWN_HEAD and of the first of
	 * the last ADMIN_SHOWN_TAIL. */
	for (i = 0; s[i]; i++) {
		if (((unsigned char)s[i] & 0xc0) == 0x80)
			continue;
		if (n == ADMIN_SHOWN_HEAD)
			head = i;
		if (n == chars - ADMIN_SHOWN_TAIL)
			tail = i;
		n++;
	}
	if (buf_append(&b, s, head) != CS_OK || buf_puts(&b, "\xe2\x80\xa6") != CS_OK ||
	    buf_puts(&b, s + tail) != CS_OK)
		goto fail;
	return buf_steal(&b);
fail:
	buf_clear(&b);
	return NULL;
}

/* {"full", "short", "cut": bool} for a value shown shortened. */
static json_t *short_value(const char *s)
{
	char *sh = shorten(s);
	json_t *o = NULL;
	if (sh)
		o = json_pack("{s:s, s:s, s:b}", "full", s, "short", sh, "cut", strcmp(sh, s) != 0);
	free(sh);
	return o;
}

/* An audit actor ("user:<subject>", "admin:<subject>", "gateway:<id>") as
 * {"kind", "full", "short", "cut"}: the kind whole, the rest shortened. */
static json_t *actor_value(const char *actor)
{
	const char *colon = strchr(actor, ':');
	char kind[32] = "";
	json_t *o;
	if (colon && (size_t)(colon - actor) < sizeof kind)
		memcpy(kind, actor, (size_t)(colon - actor));
	else
		colon = NULL;            /* no kind, or none that short: shortened whole */
	o = short_value(colon ? colon + 1 : actor);
	if (o == NULL || json_object_set_new(o, "kind", json_string(kind)) != 0 ||
	    json_object_set_new(o, "full", json_string(actor)) != 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* An agent or a resource as the pages show it: {"id", "label", "show_id",
 * "unknown"}: the configured name as label, with the id beside it when they
 * differ (show_id); an id no longer configured is its own label, said so
 * (unknown). */
static json_t *named(const char *id, const char *name)
{
	bool known = name != NULL;
	if (id == NULL || id[0] == '\0')
		return json_pack("{s:s, s:s, s:b, s:b}", "id", "", "label", "", "show_id", false,
		    "unknown", false);
	if (name == NULL)
		name = id;
	return json_pack("{s:s, s:s, s:b, s:b}", "id", id, "label", name,
	    "show_id", strcmp(name, id) != 0, "unknown", !known);
}

static json_t *agent_named(const struct config *cfg, const char *id)
{
	struct agent_view a;
	return named(id, agent_resolve(cfg, id, &a) ? a.name : NULL);
}

static json_t *resource_named(const struct config *cfg, const char *id)
{
	const struct config_resource *r = id ? config_resource(cfg, id) : NULL;
	return named(id, r ? r->name : NULL);
}

static const char *str_of(const json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));
	return v ? v : "";
}

static int64_t int_of(const json_t *o, const char *k)
{
	return (int64_t)json_integer_value(json_object_get(o, k));
}

/* A JSON array of strings joined with spaces (scopes); malloc'd. */
static char *join_strings(const json_t *a)
{
	struct buf b;
	size_t i;
	json_t *v;
	buf_init(&b, 64 * 1024);
	if (buf_puts(&b, "") != CS_OK)
		goto fail;
	json_array_foreach(a, i, v) {
		if (json_is_string(v) && buf_printf(&b, "%s%s", i ? " " : "", json_string_value(v)) != CS_OK)
			goto fail;
	}
	return buf_steal(&b);
fail:
	buf_clear(&b);
	return NULL;
}

/* Appends "&name=value" (or "?name=value" first) percent-encoded; nothing
 * for an empty value (a filter not set). */
static enum cs_err add_param(struct buf *b, const char *name, const char *value)
{
	if (value == NULL || value[0] == '\0')
		return CS_OK;
	return form_url_param(b, name, value);
}

/* The sign-in URL that comes back to back: with stepup a forced, fresh login
 * (prompt=login, max_age=0: the callback then refuses an ID token without
 * auth_time or with an old one). */
static enum cs_err login_url(const char *back, bool stepup, struct buf *out)
{
	enum cs_err e = buf_puts(out, "/login");
	if (e == CS_OK && stepup)
		e = buf_puts(out, "?prompt=login&max_age=0");
	if (e == CS_OK)
		e = add_param(out, "return_to", back);
	return e;
}

static enum cs_err refused(struct http_reply *rep, int status, const char *title, const char *msg,
    const char *relogin)
{
	json_t *ctx = json_pack("{s:s, s:s, s:s?}", "title", title, "message", msg,
	    "login_url", relogin);
	enum cs_err e;
	e = page_render(rep, status, "admin_refused.html", ctx, NULL);
	json_decref(ctx);
	return e;
}

/* The path and query this GET came from, to come back to after a login; the
 * bare path when the query would make it too long for /login's return_to
 * (LOGIN_RETURN_TO_MAX bytes, decoded: the router decodes the percent-encoding
 * login_url adds, so the value /login sees is exactly this text), and /admin
 * when even the path would. */
static enum cs_err back_url(const struct http_request *req, struct buf *out)
{
	size_t np = strlen(req->path), nq = strlen(req->query);
	if (nq > 0 && np + 1 + nq <= LOGIN_RETURN_TO_MAX)
		return buf_printf(out, "%s?%s", req->path, req->query);
	if (np <= LOGIN_RETURN_TO_MAX)
		return buf_puts(out, req->path);
	return buf_puts(out, "/admin");
}

/* SECURITY: the admin gate in front of every /admin page and form.  CS_OK
 * with *ok true: s is an admin with a recent enough login (a step-up when
 * stepup).  Otherwise the reply is complete: anonymous GETs go to sign-in,
 * anonymous POSTs get a 401, non-admins a 403 (audited), stale admins a 403
 * with a link to sign in again -- or, for a step-up page, the forced login
 * itself. */
enum cs_err admin_pages_gate(const struct http_request *req, struct http_reply *rep, bool stepup,
    const struct session *s, bool *ok)
{
	const struct config *cfg = req->app->cfg;
	struct store_conn *c = store_conn(req->app->store);
	bool get = req->method != HTTP_POST;
	struct buf back, loc;
	enum admin_gate g;
	enum cs_err e = CS_OK;

	*ok = false;
	if (c == NULL)
		return CS_EDB;
	buf_init(&back, 2048);
	buf_init(&loc, 4096);
	if (s == NULL) {
		if (!get) {
			e = refused(rep, 401, "Not signed in",
			    "Your session ended. Sign in again and repeat what you were doing.", NULL);
		} else if ((e = back_url(req, &back)) == CS_OK &&
		    (e = login_url(back.data, stepup, &loc)) == CS_OK) {
			e = page_redirect(rep, loc.data);
		}
		goto out;
	}
	g = admin_gate_check(cfg, s, req->now, stepup);
	if (g == ADMIN_GATE_NOT_ADMIN) {
		if ((e = admin_page_refused(c, s->subject, req->now)) != CS_OK)
			goto out;
		e = refused(rep, 403, "Not an administrator",
		    "These pages are for consentd's administrators only.", NULL);
		goto out;
	}
	if (g == ADMIN_GATE_STALE) {
		/* A POST cannot be replayed after a login: come back to the page. */
		e = get ? back_url(req, &back) : buf_puts(&back, "/admin");
		if (e == CS_OK)
			e = login_url(back.data, true, &loc);
		if (e != CS_OK)
			goto out;
		if (stepup && get)
			e = page_redirect(rep, loc.data);
		else
			e = refused(rep, 403, stepup ? "Confirm it is you" : "Sign in again",
			    stepup ? "Revoking in bulk needs a sign-in from the last few minutes. "
			    "Sign in again, then confirm once more." :
			    "Admin pages need a recent sign-in. Sign in again to continue.", loc.data);
		goto out;
	}
	*ok = true;
out:
	buf_clear(&back);
	buf_clear(&loc);
	return e;
}

static bool csrf_ok(const struct http_request *req, const struct session *s)
{
	return session_csrf_ok(s, http_arg_str(req, ROUTE_CSRF_PARAM));
}

static enum cs_err csrf_refused(struct http_reply *rep)
{
	return refused(rep, 403, "Not allowed",
	    "This form is stale or did not come from this site. Reload the page and try again.", NULL);
}

/* Every admin page is rendered here: the header then shows who is signed in,
 * the admin pages' links and a sign-out button (head.html's admin_bar). */
static enum cs_err admin_render(struct http_reply *rep, int status, const char *tpl, json_t *ctx,
    const struct session *s)
{
	if (json_object_set_new(ctx, "admin_bar", json_true()) != 0)
		return CS_ENOMEM;
	return page_render(rep, status, tpl, ctx, s);
}

/* A consent object of admin.h as a row for the templates: the agent and the
 * resource by their configured names, ids shortened for tables (in full in
 * id and subject), and the accessible name of the row's revoke button, which
 * says which consent it revokes. */
static json_t *consent_row(const struct config *cfg, const json_t *k)
{
	char created[32], expires[32], revoked[32], created_cell[32], expires_cell[32];
	const char *agent = str_of(k, "agent"), *resource = str_of(k, "resource");
	struct agent_view ca;
	const char *agent_name = agent_resolve(cfg, agent, &ca) ? ca.name : agent;
	const struct config_resource *cr = config_resource(cfg, resource);
	char *granted = join_strings(json_object_get(k, "scopes"));
	char *declined = join_strings(json_object_get(k, "declined_scopes"));
	char *id_short = shorten(str_of(k, "id"));
	struct buf label;
	json_t *o = NULL;

	buf_init(&label, 2048);
	fmt_time(int_of(k, "created_at"), created);
	fmt_time(int_of(k, "expires_at"), expires);
	fmt_time(int_of(k, "revoked_at"), revoked);
	fmt_cell_time(int_of(k, "created_at"), created_cell);
	fmt_cell_time(int_of(k, "expires_at"), expires_cell);
	if (granted && declined && id_short &&
	    buf_printf(&label, "Revoke %s on %s for %s", agent_name,
	    cr ? cr->name : resource, str_of(k, "user")) == CS_OK)
		o = json_pack("{s:s, s:s, s:o, s:s, s:s, s:o, s:o, s:s, s:s, s:s, s:s, s:s, s:s, s:s,"
		    " s:s?, s:s, s:s, s:b, s:b, s:s, s:s?, s:b}",
		    "id", str_of(k, "id"), "id_short", id_short,
		    "subject_short", short_value(str_of(k, "user")),
		    "subject", str_of(k, "user"), "issuer", str_of(k, "issuer"),
		    "agent", agent_named(cfg, agent), "resource", resource_named(cfg, resource),
		    "state", str_of(k, "state"), "granted", granted, "declined", declined,
		    "created", created, "expires", expires,
		    "created_cell", created_cell, "expires_cell", expires_cell,
		    "revoked", int_of(k, "revoked_at") ? revoked : NULL,
		    "revoked_by", str_of(k, "revoked_by"), "revoke_reason", str_of(k, "revoke_reason"),
		    "offline", json_is_true(json_object_get(k, "offline")),
		    "can_revoke", int_of(k, "revoked_at") == 0, "revoke_label", label.data,
		    /* A broken connection says why, in the person's words (health.h). */
		    /* str_of answers "" for a NULL: ask for the string itself. */
		    "reconnect_why", json_string_value(json_object_get(k, "reconnect_reason")) != NULL ?
		    health_reason_person(health_reason_parse(str_of(k, "reconnect_reason"))) : NULL,
		    /* An enterprise IdP's ID-JAG under the admin's policy (idjag_grant.h). */
		    /* str_of answers "" for a NULL: ask for the string itself. */
		    "by_organisation", json_string_value(json_object_get(k, "granted_by")) != NULL);
	buf_clear(&label);
	free(id_short);
	free(granted);
	free(declined);
	return o;
}

/* An audit entry of admin.h as a table row: its time in UTC (and as an
 * ISO 8601 datetime for <time>), the actor, person and consent id
 * shortened, the agent and resource by name; what the entry does not name
 * is null, so that its section shows nothing. */
static json_t *audit_row(const struct config *cfg, const json_t *ev)
{
	char when[32], iso[32];
	const char *cid = json_string_value(json_object_get(ev, "consent_id"));
	const char *subject = str_of(ev, "subject");
	const char *agent = str_of(ev, "agent"), *resource = str_of(ev, "resource");
	fmt_cell_time(int_of(ev, "ts"), when);
	fmt_time_as(int_of(ev, "ts"), TIME_ISO, iso);
	return json_pack("{s:I, s:s, s:s, s:o, s:s, s:o?, s:o?, s:o?, s:o?, s:s, s:s}",
	    "seq", (json_int_t)int_of(ev, "seq"), "when", when, "when_iso", iso,
	    "actor", actor_value(str_of(ev, "actor")), "action", str_of(ev, "action"),
	    "subject", subject[0] ? short_value(subject) : NULL,
	    "agent", agent[0] ? agent_named(cfg, agent) : NULL,
	    "resource", resource[0] ? resource_named(cfg, resource) : NULL,
	    "consent", cid && cid[0] ? short_value(cid) : NULL,
	    "outcome", str_of(ev, "outcome"), "detail", str_of(ev, "detail"));
}

/* --- GET /admin ------------------------------------------------------------ */

static enum cs_err add_option(json_t *opts, const char *value, const char *label, bool selected)
{
	return json_array_append_new(opts, json_pack("{s:s, s:s, s:b}", "value", value, "label", label,
	    "selected", selected)) == 0 ? CS_OK : CS_ENOMEM;
}

/* The option of a configured agent or resource: its name, with its id when
 * they differ ("Claude (claude)"); selected when it is the one searched
 * (searched NULL: none).  l is the caller's scratch buffer. */
static enum cs_err add_named_option(json_t *opts, struct buf *l, const char *id, const char *name,
    const char *searched)
{
	enum cs_err e;
	buf_reset(l);
	if ((e = buf_puts(l, name)) == CS_OK && strcmp(name, id) != 0)
		e = buf_printf(l, " (%s)", id);
	if (e == CS_OK)
		e = add_option(opts, id, l->data, searched && strcmp(searched, id) == 0);
	return e;
}

/* The options of the search's agent and resource lists: any, then each
 * configured one by name (with its id), then the searched id when no
 * configured one has it -- a consent can outlive its agent's section. */
static enum cs_err search_options(const struct config *cfg, const char *agent, const char *resource,
    json_t *agents, json_t *resources)
{
	struct agent_view known;
	struct buf l;
	enum cs_err e;
	buf_init(&l, 1024);
	if ((e = add_option(agents, "", "any agent", agent == NULL)) != CS_OK ||
	    (e = add_option(resources, "", "any resource", resource == NULL)) != CS_OK)
		goto out;
	for (size_t i = 0; i < cfg->nagents && e == CS_OK; i++)
		e = add_named_option(agents, &l, cfg->agents[i].id, cfg->agents[i].name, agent);
	for (size_t i = 0; i < cfg->nresources && e == CS_OK; i++)
		e = add_named_option(resources, &l, cfg->resources[i].id, cfg->resources[i].name,
		    resource);
	if (e == CS_OK && agent && !agent_resolve(cfg, agent, &known)) {
		buf_reset(&l);
		if ((e = buf_printf(&l, "%s (not configured)", agent)) == CS_OK)
			e = add_option(agents, agent, l.data, true);
	}
	if (e == CS_OK && resource && config_resource(cfg, resource) == NULL) {
		buf_reset(&l);
		if ((e = buf_printf(&l, "%s (not configured)", resource)) == CS_OK)
			e = add_option(resources, resource, l.data, true);
	}
out:
	buf_clear(&l);
	return e;
}

static const char *const search_states[] = { "", "live", "expired", "revoked",
	"reconnect_required" };

/* A list filter from the query: NULL when absent or empty (no filter). */
static const char *filter_param(const struct http_request *req, unsigned idx)
{
	const char *v = http_arg_str(req, idx);
	return v != NULL && *v != '\0' ? v : NULL;
}

enum cs_err admin_pages_search(const struct http_request *req, struct http_reply *rep)
{
	const struct config *cfg = req->app->cfg;
	struct store_conn *c = store_conn(req->app->store);
	const char *user = filter_param(req, ADMIN_PAGES_SEARCH_USER);
	const char *agent = filter_param(req, ADMIN_PAGES_SEARCH_AGENT);
	const char *resource = filter_param(req, ADMIN_PAGES_SEARCH_RESOURCE);
	const char *state = filter_param(req, ADMIN_PAGES_SEARCH_STATE);
	const char *after = http_arg_str(req, ADMIN_PAGES_SEARCH_AFTER);
	struct admin_consent_filter f;
	const struct session *s = req->auth.session;
	json_t *res = NULL, *rows = NULL, *states = NULL, *agents = NULL, *resources = NULL;
	json_t *ctx = NULL, *k;
	struct buf next;
	size_t i;
	enum cs_err e;

	buf_init(&next, 4096);
	if (c == NULL)
		return CS_EDB;
	memset(&f, 0, sizeof f);
	/* The person by subject, email or name, at the IdP people sign in with. */
	f.issuer = user ? cfg->oidc_issuer : NULL;
	f.person = user;
	f.agent = agent;
	f.resource = resource;
	f.state = state;
	e = admin_consents_list(c, &f, after, ADMIN_PAGE_ROWS, req->now, &res);
	if (e == CS_EINVAL) {
		e = refused(rep, 400, "Bad request", "The search or its page marker is not valid.", NULL);
		goto out;
	} else if (e != CS_OK) {
		goto out;
	}
	e = CS_ENOMEM;
	if ((rows = json_array()) == NULL || (states = json_array()) == NULL ||
	    (agents = json_array()) == NULL || (resources = json_array()) == NULL)
		goto out;
	json_array_foreach(json_object_get(res, "consents"), i, k) {
		if (json_array_append_new(rows, consent_row(cfg, k)) != 0)
			goto out;
	}
	if ((e = search_options(cfg, agent, resource, agents, resources)) != CS_OK)
		goto out;
	e = CS_ENOMEM;
	for (i = 0; i < sizeof search_states / sizeof search_states[0]; i++)
		if (json_array_append_new(states, json_pack("{s:s, s:s, s:b}", "value", search_states[i],
		    "label", i ? search_states[i] : "any",
		    "selected", state ? strcmp(state, search_states[i]) == 0 : i == 0)) != 0)
			goto out;
	if (json_is_string(json_object_get(res, "next_cursor"))) {
		if ((e = buf_puts(&next, "/admin")) != CS_OK || (e = add_param(&next, "user", user)) != CS_OK ||
		    (e = add_param(&next, "agent", agent)) != CS_OK ||
		    (e = add_param(&next, "resource", resource)) != CS_OK ||
		    (e = add_param(&next, "state", state)) != CS_OK ||
		    (e = add_param(&next, "after", str_of(res, "next_cursor"))) != CS_OK)
			goto out;
		e = CS_ENOMEM;
	}
	ctx = json_pack("{s:s, s:s, s:O, s:O, s:O, s:O, s:b, s:s?}", "title", "Admin: consents",
	    "q_user", user ? user : "", "agents", agents, "resources", resources,
	    "states", states, "consents", rows,
	    "has_consents", json_array_size(rows) > 0, "next_url", next.data);
	if (ctx == NULL)
		goto out;
	e = admin_render(rep, 200, "admin.html", ctx, s);
out:
	buf_clear(&next);
	json_decref(ctx);
	json_decref(resources);
	json_decref(agents);
	json_decref(states);
	json_decref(rows);
	json_decref(res);
	return e;
}

/* --- GET /admin/consents/{id}, POST /admin/consents/{id}/revoke ------------ */

static enum cs_err no_such_consent(struct http_reply *rep)
{
	return refused(rep, 404, "No such consent", "There is no consent with this id.", NULL);
}

/* The consent of the route's {id} as admin_consent_show gives it, into *res;
 * when there is none, the 404 page is the reply and *res stays NULL. */
static enum cs_err consent_or_404(const struct http_request *req, struct http_reply *rep,
    json_t **res)
{
	struct store_conn *c = store_conn(req->app->store);
	if (c == NULL)
		return CS_EDB;
	enum cs_err e = admin_consent_show(c, req->captures[0], req->now, res);
	return e == CS_ENOENT ? no_such_consent(rep) : e;
}

enum cs_err admin_pages_consent(const struct http_request *req, struct http_reply *rep)
{
	const struct session *s = req->auth.session;
	json_t *res = NULL, *ctx = NULL, *events = NULL, *ev;
	size_t i;
	enum cs_err e;

	if ((e = consent_or_404(req, rep, &res)) != CS_OK || res == NULL)
		goto out;
	e = CS_ENOMEM;
	if ((ctx = consent_row(req->app->cfg, json_object_get(res, "consent"))) == NULL ||
	    (events = json_array()) == NULL)
		goto out;
	json_array_foreach(json_object_get(json_object_get(res, "history"), "events"), i, ev) {
		if (json_array_append_new(events, audit_row(req->app->cfg, ev)) != 0)
			goto out;
	}
	if (json_object_set_new(ctx, "title", json_string("Admin: a consent")) != 0 ||
	    json_object_set(ctx, "events", events) != 0 ||
	    json_object_set_new(ctx, "has_events", json_boolean(json_array_size(events) > 0)) != 0)
		goto out;
	/* The person's standing rules under this consent, ended ones too (issue #32). */
	if ((e = standing_pages_admin_rules(store_conn(req->app->store), req->app->cfg,
	    req->captures[0], req->now, ctx)) != CS_OK)
		goto out;
	e = admin_render(rep, 200, "admin_consent.html", ctx, s);
out:
	json_decref(events);
	json_decref(ctx);
	json_decref(res);
	return e;
}

/* The form's reason when it says something: NULL when it is missing or only
 * spaces.  SECURITY: a revocation always carries the admin's own words --
 * the person reads them on /me -- whatever the browser let through. */
static const char *reason_given(const struct http_request *req, unsigned idx)
{
	const char *r = http_arg_str(req, idx);
	if (r == NULL)
		return NULL;
	for (const char *p = r; *p; p++)
		if (*p != ' ' && *p != '\t')
			return r;
	return NULL;
}

#define REASON_MISSING "Give a reason: the person reads it on their page. Nothing was revoked."
#define REASON_BAD "The reason is not valid (at most 200 characters, no control characters). " \
	"Nothing was revoked."

/* The confirmation of one revocation: the consent as its page shows it, and
 * a form that needs a reason; error (may be NULL) says why the last try was
 * refused, with status 400. */
static enum cs_err revoke_one_page(const struct http_request *req, struct http_reply *rep,
    const char *error)
{
	json_t *res = NULL, *ctx = NULL;
	const char *reason;
	enum cs_err e;

	if ((e = consent_or_404(req, rep, &res)) != CS_OK || res == NULL)
		goto out;
	/* After a refusal the form comes back with what was typed. */
	reason = error ? http_arg_str(req, ADMIN_PAGES_REVOKE_ONE_REASON) : NULL;
	e = CS_ENOMEM;
	if ((ctx = consent_row(req->app->cfg, json_object_get(res, "consent"))) == NULL ||
	    json_object_set_new(ctx, "title", json_string("Admin: revoke a consent")) != 0 ||
	    (error && json_object_set_new(ctx, "error", json_string(error)) != 0) ||
	    (reason && json_object_set_new(ctx, "q_reason", json_string(reason)) != 0))
		goto out;
	e = admin_render(rep, error ? 400 : 200, "admin_revoke_one.html", ctx, req->auth.session);
out:
	json_decref(ctx);
	json_decref(res);
	return e;
}

enum cs_err admin_pages_revoke_confirm(const struct http_request *req, struct http_reply *rep)
{
	return revoke_one_page(req, rep, NULL);
}

enum cs_err admin_pages_revoke_one(const struct http_request *req, struct http_reply *rep)
{
	struct store_conn *c = store_conn(req->app->store);
	const struct session *s = req->auth.session;
	const char *reason = reason_given(req, ADMIN_PAGES_REVOKE_ONE_REASON);
	struct buf loc;
	enum admin_revoke_outcome o = ADMIN_REVOKE__MAX;
	enum cs_err e;

	buf_init(&loc, 256);
	if (c == NULL)
		return CS_EDB;
	if (!csrf_ok(req, s)) {
		e = csrf_refused(rep);
		goto out;
	}
	if (reason == NULL) {
		e = revoke_one_page(req, rep, REASON_MISSING);
		goto out;
	}
	if ((e = admin_consent_revoke(c, req->captures[0], req->auth.actor, reason, req->now,
	    &o)) != CS_OK)
		goto out;
	if (o == ADMIN_REVOKE_UNKNOWN) {
		e = no_such_consent(rep);
		goto out;
	} else if (o == ADMIN_REVOKE_BAD_REASON) {
		e = revoke_one_page(req, rep, REASON_BAD);
		goto out;
	}
	if ((e = buf_puts(&loc, "/admin/consents/")) != CS_OK)
		goto out;
	{
		char *enc = NULL;
		if ((e = pct_encode(req->captures[0], &enc)) == CS_OK)
			e = buf_puts(&loc, enc);
		free(enc);
	}
	if (e == CS_OK)
		e = page_redirect(rep, loc.data);
out:
	buf_clear(&loc);
	return e;
}

/* --- GET and POST /admin/rules/{id}/end ----------------------------------- */

static enum cs_err no_such_rule(struct http_reply *rep)
{
	return refused(rep, 404, "No such rule", "There is no standing rule with this id.", NULL);
}

/* GET: the rule of the route's {id} in words, and the form that ends it
 * when it still holds. */
enum cs_err admin_pages_rule_end_confirm(const struct http_request *req, struct http_reply *rep)
{
	struct store_conn *c = store_conn(req->app->store);
	json_t *r = NULL, *ctx = NULL;
	enum cs_err e;

	if (c == NULL)
		return CS_EDB;
	if ((e = standing_show(c, req->captures[0], req->now, &r)) == CS_ENOENT)
		return no_such_rule(rep);
	if (e != CS_OK)
		return e;
	e = CS_ENOMEM;
	if ((ctx = standing_pages_admin_rule(req->app->cfg, r)) == NULL ||
	    json_object_set_new(ctx, "title", json_string("Admin: end a standing rule")) != 0)
		goto out;
	e = admin_render(rep, 200, "admin_rule_end.html", ctx, req->auth.session);
out:
	json_decref(ctx);
	json_decref(r);
	return e;
}

/* POST (csrf): ends the rule through standing_end, as the admin API does
 * (audited "standing.ended" by=an admin, the actor "admin:<subject>"), and
 * goes back to its consent's page.  A rule that no longer held ends nothing
 * and goes back all the same: the page says why it is over. */
enum cs_err admin_pages_rule_end(const struct http_request *req, struct http_reply *rep)
{
	struct store_conn *c = store_conn(req->app->store);
	enum standing_end_outcome o = STANDING_ALREADY_ENDED;
	json_t *r = NULL;
	struct buf loc;
	char *enc = NULL;
	enum cs_err e;

	buf_init(&loc, 256);
	if (c == NULL)
		return CS_EDB;
	if (!csrf_ok(req, req->auth.session)) {
		e = csrf_refused(rep);
		goto out;
	}
	e = standing_end(c, req->captures[0], 0, req->auth.actor, req->now, &o);
	if (e == CS_ENOENT) {
		e = no_such_rule(rep);
		goto out;
	}
	if (e != CS_OK || (e = standing_show(c, req->captures[0], req->now, &r)) != CS_OK)
		goto out;
	if ((e = pct_encode(str_of(r, "consent_id"), &enc)) == CS_OK &&
	    (e = buf_printf(&loc, "/admin/consents/%s#rules", enc)) == CS_OK)
		e = page_redirect(rep, loc.data);
out:
	free(enc);
	json_decref(r);
	buf_clear(&loc);
	return e;
}

/* --- GET and POST /admin/revoke (bulk) ------------------------------------ */

static bool bulk_by(const char *by, enum admin_bulk_by *out, const char **label)
{
	if (by == NULL)
		return false;
	if (strcmp(by, "user") == 0) { *out = ADMIN_BY_USER; *label = "the person"; return true; }
	if (strcmp(by, "agent") == 0) { *out = ADMIN_BY_AGENT; *label = "the agent"; return true; }
	if (strcmp(by, "resource") == 0) { *out = ADMIN_BY_RESOURCE; *label = "the resource"; return true; }
	return false;
}

/* A bulk revocation as the admin chose it. */
struct bulk_form {
	enum admin_bulk_by b;
	const char *by, *label;          /* the form's word, and how the pages say it */
	const char *value;               /* the subject, agent id or resource id */
	int64_t count;                   /* how many it is (to confirm) or was (done) */
	const char *reason;              /* as the form sent it (shown back after a refusal) */
};

/* How many consents admin_bulk_revoke would revoke now: the unrevoked ones
 * (live, expired or reconnect_required) matching, counted through the same
 * listing the search uses. */
static enum cs_err bulk_count(struct store_conn *c, const struct config *cfg,
    const struct bulk_form *w, int64_t now, int64_t *count)
{
	struct admin_consent_filter f;
	char cursor[ADMIN_CURSOR_MAX + 32];
	const char *cur = NULL;
	int64_t n = 0;
	memset(&f, 0, sizeof f);
	if (w->b == ADMIN_BY_USER) {
		f.issuer = cfg->oidc_issuer;
		f.user = w->value;
	} else if (w->b == ADMIN_BY_AGENT) {
		f.agent = w->value;
	} else {
		f.resource = w->value;
	}
	for (int page = 0; page < ADMIN_COUNT_MAX_PAGES; page++) {
		json_t *res = NULL, *k, *next;
		size_t i;
		enum cs_err e = admin_consents_list(c, &f, cur, ADMIN_LIST_MAX, now, &res);
		if (e != CS_OK)
			return e;
		json_array_foreach(json_object_get(res, "consents"), i, k)
			if (strcmp(str_of(k, "state"), "revoked") != 0)
				n++;
		next = json_object_get(res, "next_cursor");
		if (!json_is_string(next) || json_string_length(next) >= sizeof cursor) {
			json_decref(res);
			*count = n;
			return CS_OK;
		}
		e = str_fmt(cursor, sizeof cursor, "%s", json_string_value(next));
		json_decref(res);
		if (e != CS_OK)
			return e;
		cur = cursor;
	}
	return CS_ETOOBIG;
}

/* The three pages of a bulk revocation. */
enum bulk_view { BULK_CONFIRM, BULK_CHANGED, BULK_DONE, BULK__MAX };
static const struct { int status; const char *tpl, *title; } bulk_views[BULK__MAX] = {
	[BULK_CONFIRM] = { 200, "admin_revoke.html", "Admin: revoke in bulk" },
	[BULK_CHANGED] = { 409, "admin_revoke.html", "The number changed: confirm again" },
	[BULK_DONE] = { 200, "admin_revoke_done.html", "Consents revoked" },
};

/* The confirmation and the result: what is revoked named as the admin knows
 * it (an agent or a resource by its configured name, with its id). */
static enum cs_err bulk_page(struct http_reply *rep, enum bulk_view v, const struct config *cfg,
    const struct session *s, const struct bulk_form *w, int status, const char *error)
{
	json_t *what = w->b == ADMIN_BY_AGENT ? agent_named(cfg, w->value) :
	    w->b == ADMIN_BY_RESOURCE ? resource_named(cfg, w->value) : named(w->value, w->value);
	json_t *ctx;
	enum cs_err e;
	if (what == NULL)
		return CS_ENOMEM;
	ctx = json_pack("{s:s, s:s, s:s, s:s, s:o, s:I, s:I, s:b, s:s?, s:s?}", "title",
	    bulk_views[v].title, "by", w->by, "by_label", w->label, "value", w->value, "what", what,
	    "count", (json_int_t)w->count, "revoked", (json_int_t)w->count, "nonzero", w->count > 0,
	    "error", error, "q_reason", w->reason);
	if (ctx == NULL)
		return CS_ENOMEM;
	e = admin_render(rep, status ? status : bulk_views[v].status, bulk_views[v].tpl, ctx, s);
	json_decref(ctx);
	return e;
}

/* The by, value and reason (NULL: none) of the bulk forms; false when by or
 * value is missing or wrong. */
static bool bulk_form_read(struct bulk_form *w, const char *by, const char *value,
    const char *reason)
{
	memset(w, 0, sizeof *w);
	w->by = by;
	w->value = value;
	w->reason = reason;
	return bulk_by(w->by, &w->b, &w->label) && w->value != NULL && w->value[0] != '\0';
}

enum cs_err admin_pages_bulk_confirm(const struct http_request *req, struct http_reply *rep)
{
	struct store_conn *c = store_conn(req->app->store);
	struct bulk_form w;
	const struct session *s = req->auth.session;
	enum cs_err e;

	if (c == NULL)
		return CS_EDB;
	if (!bulk_form_read(&w, http_arg_str(req, ADMIN_PAGES_BULK_CONFIRM_BY),
	    http_arg_str(req, ADMIN_PAGES_BULK_CONFIRM_VALUE), NULL)) {
		e = refused(rep, 400, "Bad request",
		    "Say whose consents to revoke: a person, an agent or a resource, and its name.", NULL);
		goto out;
	}
	if ((e = bulk_count(c, req->app->cfg, &w, req->now, &w.count)) != CS_OK)
		goto out;
	e = bulk_page(rep, BULK_CONFIRM, req->app->cfg, s, &w, 0, NULL);
out:
	return e;
}

enum cs_err admin_pages_bulk_revoke(const struct http_request *req, struct http_reply *rep)
{
	const struct config *cfg = req->app->cfg;
	struct store_conn *c = store_conn(req->app->store);
	enum admin_revoke_outcome o = ADMIN_REVOKE__MAX;
	struct bulk_form w;
	const struct session *s = req->auth.session;
	const char *reason = reason_given(req, ADMIN_PAGES_BULK_REVOKE_REASON);
	int64_t want = -1;
	enum cs_err e;

	if (c == NULL)
		return CS_EDB;
	if (!csrf_ok(req, s)) {
		e = csrf_refused(rep);
		goto out;
	}
	/* The router checked count (0 and up) is there. */
	if (!http_arg_int(req, ADMIN_PAGES_BULK_REVOKE_COUNT, &want) ||
	    !bulk_form_read(&w, http_arg_str(req, ADMIN_PAGES_BULK_REVOKE_BY),
	    http_arg_str(req, ADMIN_PAGES_BULK_REVOKE_VALUE),
	    http_arg_str(req, ADMIN_PAGES_BULK_REVOKE_REASON))) {
		e = refused(rep, 400, "Bad request", "This form is incomplete. Start again from /admin.", NULL);
		goto out;
	}
	/* The admin confirmed a number: when it changed meanwhile, they see the
	 * new one and confirm again rather than revoke something else. */
	if ((e = bulk_count(c, cfg, &w, req->now, &w.count)) != CS_OK)
		goto out;
	if (w.count != want) {
		e = bulk_page(rep, BULK_CHANGED, cfg, s, &w, 0, NULL);
		goto out;
	}
	/* SECURITY: no bulk revocation without the admin's reason (the admin
	 * API's rule too): the form comes back with the count, nothing revoked. */
	if (reason == NULL) {
		e = bulk_page(rep, BULK_CONFIRM, cfg, s, &w, 400, REASON_MISSING);
		goto out;
	}
	if ((e = admin_bulk_revoke(c, &(struct admin_bulk){ .by = w.b, .value = w.value,
	    .issuer = w.b == ADMIN_BY_USER ? cfg->oidc_issuer : NULL, .actor = req->auth.actor,
	    .reason = reason }, req->now, &w.count, &o)) != CS_OK)
		goto out;
	if (o == ADMIN_REVOKE_BAD_REASON) {
		w.count = want;
		e = bulk_page(rep, BULK_CONFIRM, cfg, s, &w, 400, REASON_BAD);
		goto out;
	}
	e = bulk_page(rep, BULK_DONE, cfg, s, &w, 0, NULL);
out:
	return e;
}

/* --- GET /admin/audit ------------------------------------------------------ */

/* n decimal digits at p as *v; false when any is not a digit. */
static bool fixed_digits(const char *p, size_t n, int *v)
{
	int r = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		r = r * 10 + (p[i] - '0');
	}
	*v = r;
	return true;
}

/* Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar (Howard
 * Hinnant's days_from_civil): no time zone, no libc normalisation. */
static int64_t days_from_civil(int y, int m, int d)
{
	int64_t yy = y - (m <= 2);
	int64_t era = (yy >= 0 ? yy : yy - 399) / 400;
	int64_t yoe = yy - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

enum cs_err admin_parse_since(const char *s, int64_t *out)
{
	static const int mdays[12] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	size_t n = s ? strlen(s) : 0;
	int y, mo, d, h = 0, mi = 0, sec = 0;
	bool leap;

	if (n == 0)
		return CS_EINVAL;
	if (strspn(s, "0123456789") == n) {
		/* The old form: UTC seconds, as many digits as the route allows. */
		int64_t v = 0;
		if (n > ADMIN_SINCE_DIGITS_MAX)
			return CS_EINVAL;
		for (size_t i = 0; i < n; i++)
			v = v * 10 + (s[i] - '0');
		*out = v;
		return CS_OK;
	}
	/* YYYY-MM-DD, then optionally THH:MM and :SS. */
	if ((n != 10 && n != 16 && n != 19) || s[4] != '-' || s[7] != '-' ||
	    !fixed_digits(s, 4, &y) || !fixed_digits(s + 5, 2, &mo) || !fixed_digits(s + 8, 2, &d))
		return CS_EINVAL;
	if (n >= 16 && (s[10] != 'T' || s[13] != ':' ||
	    !fixed_digits(s + 11, 2, &h) || !fixed_digits(s + 14, 2, &mi)))
		return CS_EINVAL;
	if (n == 19 && (s[16] != ':' || !fixed_digits(s + 17, 2, &sec)))
		return CS_EINVAL;
	leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] ||
	    (mo == 2 && d == 29 && !leap) || h > 23 || mi > 59 || sec > 59)
		return CS_EINVAL;
	*out = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
	return CS_OK;
}

/* The action filter's options: any, then every action consentd writes, then
 * the one asked for when it is none of them (an old link). */
static enum cs_err action_options(const char *action, json_t *opts)
{
	bool known = action == NULL;
	struct buf l;
	enum cs_err e = add_option(opts, "", "any action", action == NULL);
	for (size_t i = 0; e == CS_OK && audit_actions[i] != NULL; i++) {
		bool sel = action != NULL && strcmp(action, audit_actions[i]) == 0;
		known = known || sel;
		e = add_option(opts, audit_actions[i], audit_actions[i], sel);
	}
	if (e != CS_OK || known)
		return e;
	buf_init(&l, 256);
	if ((e = buf_printf(&l, "%s (not a known action)", action)) == CS_OK)
		e = add_option(opts, action, l.data, true);
	buf_clear(&l);
	return e;
}

/* "/admin/audit" with the filters and one page marker (name=seq). */
static enum cs_err audit_url(struct buf *b, const char *action, const char *consent,
    const char *since, const char *marker, int64_t seq)
{
	char n[24];
	enum cs_err e;
	if ((e = buf_puts(b, "/admin/audit")) != CS_OK ||
	    (e = add_param(b, "action", action)) != CS_OK ||
	    (e = add_param(b, "consent", consent)) != CS_OK ||
	    (e = add_param(b, "since", since)) != CS_OK)
		return e;
	if (marker == NULL)
		return CS_OK;
	if ((e = str_fmt(n, sizeof n, "%lld", (long long)seq)) != CS_OK)
		return e;
	return add_param(b, marker, n);
}

/* A page marker (?before=, ?after=): 0 when absent; false when not a number. */
static bool marker_param(const struct http_request *req, unsigned idx, int64_t *out)
{
	*out = 0;
	return http_arg(req, idx) == NULL || (http_arg_int(req, idx, out) && *out > 0);
}

/* The "Since" filter into f->since, and shown back in the form as the date
 * and time it means, in UTC (also when it came as seconds); years past 9999
 * stay empty.  false when it is not a date and time. */
static bool audit_since(const char *since, struct admin_audit_filter *f, char input[32],
    char shown[32])
{
	if (admin_parse_since(since, &f->since) != CS_OK)
		return false;
	if (f->since > 0 && f->since <= ADMIN_SINCE_INPUT_MAX)
		fmt_time_as(f->since, TIME_INPUT, input);
	if (f->since > 0)
		fmt_time(f->since, shown);
	return true;
}

/* The audit page's links to other pages of the same filters. */
struct audit_links {
	struct buf next, prev, first;
};

static void audit_links_init(struct audit_links *l)
{
	buf_init(&l->next, 4096);
	buf_init(&l->prev, 4096);
	buf_init(&l->first, 4096);
}

static void audit_links_clear(struct audit_links *l)
{
	buf_clear(&l->next);
	buf_clear(&l->prev);
	buf_clear(&l->first);
}

/* Older entries follow (Next); newer ones come back (Previous); and a
 * page away from the top links to the newest entries too. */
static enum cs_err audit_links_build(struct audit_links *l, json_t *res,
    const struct admin_audit_filter *f, const char *since, int64_t before)
{
	json_t *older = json_object_get(res, "older"), *newer = json_object_get(res, "newer");
	enum cs_err e = CS_OK;

	if ((json_is_integer(older) && (e = audit_url(&l->next, f->action, f->consent_id, since,
	    "before", (int64_t)json_integer_value(older))) != CS_OK) ||
	    (json_is_integer(newer) && (e = audit_url(&l->prev, f->action, f->consent_id, since,
	    "after", (int64_t)json_integer_value(newer))) != CS_OK) ||
	    ((before > 0 || json_is_integer(newer)) &&
	    (e = audit_url(&l->first, f->action, f->consent_id, since, NULL, 0)) != CS_OK))
		return e;
	return CS_OK;
}

/* The page's rows, one per entry of res; NULL when out of memory. */
static json_t *audit_rows(const struct config *cfg, json_t *res)
{
	json_t *rows = json_array(), *ev;
	size_t i;

	json_array_foreach(json_object_get(res, "entries"), i, ev) {
		if (rows == NULL || json_array_append_new(rows, audit_row(cfg, ev)) != 0) {
			json_decref(rows);
			return NULL;
		}
	}
	return rows;
}

enum cs_err admin_pages_audit(const struct http_request *req, struct http_reply *rep)
{
	struct store_conn *c = store_conn(req->app->store);
	const char *action = filter_param(req, ADMIN_PAGES_AUDIT_ACTION);
	const char *consent = filter_param(req, ADMIN_PAGES_AUDIT_CONSENT);
	const char *since = filter_param(req, ADMIN_PAGES_AUDIT_SINCE);
	struct admin_audit_filter f = { .action = action, .consent_id = consent };
	const struct session *s = req->auth.session;
	json_t *res = NULL, *rows = NULL, *ctx = NULL, *actions = NULL;
	char since_input[32] = "", since_shown[32] = "";
	struct audit_links l;
	int64_t before = 0, after = 0;
	enum cs_err e;

	audit_links_init(&l);
	if (c == NULL)
		return CS_EDB;
	if (since && !audit_since(since, &f, since_input, since_shown)) {
		e = refused(rep, 400, "Bad request",
		    "\"Since\" is not a date and time (UTC) such as 2025-01-31T09:30.", NULL);
		goto out;
	}
	if (!marker_param(req, ADMIN_PAGES_AUDIT_BEFORE, &before) ||
	    !marker_param(req, ADMIN_PAGES_AUDIT_AFTER, &after) ||
	    (before > 0 && after > 0)) {
		e = refused(rep, 400, "Bad request", "The page marker is not valid.", NULL);
		goto out;
	}
	e = admin_audit_recent(c, &f, before, after, ADMIN_AUDIT_ROWS, &res);
	if (e == CS_EINVAL) {
		e = refused(rep, 400, "Bad request", "The filter or its page marker is not valid.", NULL);
		goto out;
	} else if (e != CS_OK) {
		goto out;
	}
	e = CS_ENOMEM;
	if ((rows = audit_rows(req->app->cfg, res)) == NULL || (actions = json_array()) == NULL)
		goto out;
	if ((e = action_options(action, actions)) != CS_OK ||
	    (e = audit_links_build(&l, res, &f, since, before)) != CS_OK)
		goto out;
	e = CS_ENOMEM;
	ctx = json_pack("{s:s, s:I, s:O, s:s, s:s, s:s?, s:O, s:b, s:s?, s:s?, s:s?, s:b}",
	    "title", "Admin: audit log", "page_rows", (json_int_t)ADMIN_AUDIT_ROWS, "actions", actions, "q_consent", consent ? consent : "",
	    "q_since", since_input, "since_shown", since_shown[0] ? since_shown : NULL,
	    "entries", rows, "has_entries", json_array_size(rows) > 0, "next_url", l.next.data,
	    "prev_url", l.prev.data, "newest_url", l.first.data,
	    "paged", l.next.data != NULL || l.prev.data != NULL || l.first.data != NULL);
	if (ctx == NULL)
		goto out;
	e = admin_render(rep, 200, "admin_audit.html", ctx, s);
out:
	audit_links_clear(&l);
	json_decref(ctx);
	json_decref(actions);
	json_decref(rows);
	json_decref(res);
	return e;
}

/* --- POST /admin/audit/verify ---------------------------------------------- */

/* SECURITY: the walk `consentd audit verify` runs (audit_verify under the
 * master key the server holds), for an admin with a fresh login and this
 * session's CSRF token.  It reads; it writes nothing, not even an entry. */
enum cs_err admin_pages_audit_verify(const struct http_request *req, struct http_reply *rep)
{
	struct store_conn *c = store_conn(req->app->store);
	const struct session *s = req->auth.session;
	struct audit_verify_result res;
	json_t *ctx = NULL;
	enum cs_err e;

	if (c == NULL)
		return CS_EDB;
	if (!csrf_ok(req, s))
		return csrf_refused(rep);
	memset(&res, 0, sizeof res);
	if ((e = audit_verify(c, &req->app->mk, NULL, &res)) != CS_OK)
		return e;
	ctx = json_pack("{s:s, s:b, s:I, s:s, s:I, s:s, s:I, s:s, s:o}",
	    "title", res.ok ? "Admin: the audit chain verifies" : "Admin: the audit chain is broken",
	    "ok", res.ok != 0, "entries", (json_int_t)res.entries, "kid", req->app->mk.kid,
	    "head_seq", (json_int_t)res.head.seq, "head_link", res.head.hex,
	    "broken", (json_int_t)res.broken, "why", res.why,
	    "anchor", res.anchor > 0 ? json_integer((json_int_t)res.anchor) : json_null());
	if (ctx == NULL)
		return CS_ENOMEM;
	e = admin_render(rep, 200, "admin_audit_verify.html", ctx, s);
	json_decref(ctx);
	return e;
}
