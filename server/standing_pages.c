/* standing_pages.c -- the person's standing rules on their pages (issue #32):
 * the approval page's "allow it again" choices, the form's values read into a
 * standing_request, /me's list of rules with an End button each, and the same
 * words for the admin's consent page.  What a
 * rule may be is standing.c's to judge (the configuration's word, never the
 * form's); this file only shows and reads.  It opens no transaction. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "app.h"
#include "buf.h"
#include "page_reply.h"
#include "pages.h"
#include "session.h"
#include "standing.h"
#include "standing_pages.h"
#include "visible_text.h"

#define SHOWN_VALUE_MAX 80           /* characters of a value shown beside its name */

/* "15 minutes", "1 hour", "8 hours" ... for a duration in seconds. */
static enum cs_err duration_words(int64_t s, char *out, size_t n)
{
	if (s % 3600 == 0)
		return str_fmt(out, n, "%lld hour%s", (long long)(s / 3600), s == 3600 ? "" : "s");
	if (s % 60 == 0)
		return str_fmt(out, n, "%lld minute%s", (long long)(s / 60), s == 60 ? "" : "s");
	return str_fmt(out, n, "%lld seconds", (long long)s);
}

/* The durations the page offers: 15 min, 1 h, 8 h, those within standing_max;
 * standing_max itself when it is shorter than all of them. */
static json_t *durations(const struct config_action *act)
{
	static const int64_t offer[] = { 900, 3600, 28800 };
	json_t *v = json_array();
	char label[40];
	for (size_t i = 0; v != NULL && i < sizeof offer / sizeof offer[0]; i++)
		if (offer[i] <= act->standing_max && duration_words(offer[i], label, sizeof label) == CS_OK)
			(void)json_array_append_new(v, json_pack("{s:I, s:s, s:b}", "seconds",
			    (json_int_t)offer[i], "label", label, "selected", i == 0));
	if (v != NULL && json_array_size(v) == 0 &&
	    duration_words(act->standing_max, label, sizeof label) == CS_OK)
		(void)json_array_append_new(v, json_pack("{s:I, s:s, s:b}", "seconds",
		    (json_int_t)act->standing_max, "label", label, "selected", true));
	return v;
}

/* The value of a parameter as the page shows it beside its name: its JCS text
 * with invisible characters made visible, cut to SHOWN_VALUE_MAX characters. */
static char *shown_value(json_t *v)
{
	char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS), *shown;
	if (text == NULL)
		return NULL;
	if (strlen(text) > SHOWN_VALUE_MAX)
		memcpy(text + SHOWN_VALUE_MAX - 3, "...", 4);
	shown = visible_text(text);
	free(text);
	return shown;
}

enum cs_err standing_pages_offer(const struct config *cfg, const struct standing_call *a,
    json_t *ctx)
{
	const struct config_action *act = config_action(cfg, a->resource, a->action);
	json_t *names = NULL, *params = NULL, *keys = NULL, *offer = NULL;
	bool match;
	enum cs_err e = CS_OK;

	if (act == NULL || act->approval != APPROVAL_REQUIRED || act->standing == STANDING_NONE)
		return CS_OK;
	match = act->standing == STANDING_MATCH && standing_keys(a->parameters, &names) == CS_OK &&
	    json_array_size(names) > 0 && (params = json_loads(a->parameters, 0, NULL)) != NULL;
	/* A never-open parameter this call lacks: no match rule can keep it fixed. */
	for (size_t i = 0; match && i < act->nstanding_fixed; i++)
		if (json_object_get(params, act->standing_fixed[i]) == NULL)
			match = false;
	if ((keys = json_array()) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	for (size_t i = 0; match && i < json_array_size(names); i++) {
		const char *k = json_string_value(json_array_get(names, i));
		bool forced = false;
		char *shown = shown_value(json_object_get(params, k)), field[8];
		for (size_t j = 0; j < act->nstanding_fixed; j++)
			forced = forced || strcmp(act->standing_fixed[j], k) == 0;
		if (shown == NULL || str_fmt(field, sizeof field, "k%zu", i) != CS_OK ||
		    json_array_append_new(keys, json_pack("{s:s, s:s, s:s, s:b}", "field", field,
		    "name", k, "value", shown, "forced", forced)) != 0) {
			free(shown);
			e = CS_ENOMEM;
			goto out;
		}
		free(shown);
	}
	offer = json_pack("{s:s, s:b, s:O, s:o}", "action", act->description ? act->description :
	    act->name, "match", match, "keys", keys, "durations", durations(act));
	if (offer == NULL || json_object_set_new(ctx, "standing", offer) != 0)
		e = CS_ENOMEM;
out:
	json_decref(names);
	json_decref(params);
	json_decref(keys);
	return e;
}

enum cs_err standing_pages_done(const struct standing_rule *r, json_t *ctx)
{
	json_t *until = pages_time_value(r->expires_at), *v;
	struct buf fixed;
	buf_init(&fixed, 4096);
	/* "labels, repo": the audit entry's comma-joined names, spaced for reading. */
	for (const char *p = r->fixed; p != NULL && *p; p++)
		if (buf_printf(&fixed, *p == ',' ? ", " : "%c", *p) != CS_OK) {
			json_decref(until);
			buf_clear(&fixed);
			return CS_ENOMEM;
		}
	if (until == NULL) {
		buf_clear(&fixed);
		return CS_ENOMEM;
	}
	v = json_pack("{s:s, s:b, s:s, s:o, s:I, s:b}", "action", r->action, "exact",
	    strcmp(r->kind, "exact") == 0,
	    "fixed", fixed.data != NULL ? fixed.data : "", "until", until, "max_uses",
	    (json_int_t)r->max_uses, "has_max_uses", r->max_uses > 0);
	buf_clear(&fixed);
	if (v == NULL || json_object_set_new(ctx, "rule", v) != 0)
		return CS_ENOMEM;
	return CS_OK;
}

/* --- /me ----------------------------------------------------------------- */

/* Appends "KEY VERB VALUE" for each member of obj to b, ", " between them. */
static enum cs_err members_words(struct buf *b, json_t *obj, const char *verb)
{
	const char *k;
	json_t *v;
	char *shown;
	json_object_foreach(obj, k, v) {
		enum cs_err e = CS_ENOMEM;
		if ((shown = shown_value(v)) != NULL)
			e = buf_printf(b, "%s%s %s %s", b->len ? ", " : "", k, verb, shown);
		free(shown);
		if (e != CS_OK)
			return e;
	}
	return CS_OK;
}

/* "repo is "acme/widgets", path starts with "docs/"": a rule's fixed values in words. */
static char *fixed_words(json_t *fixed, json_t *prefixes)
{
	struct buf b;
	buf_init(&b, 4096);
	if (members_words(&b, fixed, "is") != CS_OK ||
	    members_words(&b, prefixes, "starts with") != CS_OK) {
		buf_clear(&b);
		return NULL;
	}
	if (b.data == NULL && buf_puts(&b, "") != CS_OK)
		return NULL;
	return buf_steal(&b);
}

static const char *str_or(const char *s)
{
	return s != NULL ? s : "";
}

/* A rule of standing_list (or standing_list_consent) in words: id, agent,
 * resource, action, action_description, exact, fixed, until, used.  NULL when
 * out of memory. */
static json_t *rule_words(const struct config *cfg, json_t *r)
{
	const char *res = json_string_value(json_object_get(r, "resource"));
	const char *action = json_string_value(json_object_get(r, "action"));
	const struct config_action *act = config_action(cfg, res, action);
	json_int_t uses = json_integer_value(json_object_get(r, "uses"));
	json_int_t max = json_integer_value(json_object_get(r, "max_uses"));
	char *words = fixed_words(json_object_get(r, "fixed"), json_object_get(r, "prefixes"));
	char used[80];
	json_t *item = NULL;
	if (words != NULL && (max > 0 ? str_fmt(used, sizeof used, "used %lld of %lld times",
	    (long long)uses, (long long)max) : str_fmt(used, sizeof used, "used %lld time%s",
	    (long long)uses, uses == 1 ? "" : "s")) == CS_OK)
		item = json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:s, s:o, s:s}",
		    "id", json_string_value(json_object_get(r, "id")),
		    "agent", pages_agent_name(cfg, json_string_value(json_object_get(r, "agent"))),
		    "resource", pages_resource_name(cfg, res), "action", action,
		    "action_description", act != NULL && act->description ? act->description : action,
		    "exact", strcmp(json_string_value(json_object_get(r, "kind")), "exact") == 0,
		    "fixed", words,
		    "until", pages_time_value(json_integer_value(json_object_get(r, "expires_at"))),
		    "used", used);
	free(words);
	return item;
}

/* ctx's "rules" (each of list's rules in words, by words) and "has_rules";
 * takes list. */
static enum cs_err rules_into(const struct config *cfg, json_t *list,
    json_t *(*words)(const struct config *, json_t *), json_t *ctx)
{
	json_t *items = json_array(), *r;
	size_t i;
	enum cs_err e = CS_OK;
	if (items == NULL) {
		json_decref(list);
		return CS_ENOMEM;
	}
	json_array_foreach(list, i, r) {
		if (json_array_append_new(items, words(cfg, r)) != 0) {
			e = CS_ENOMEM;
			goto out;
		}
	}
	if (json_object_set(ctx, "rules", items) != 0 ||
	    json_object_set_new(ctx, "has_rules", json_boolean(json_array_size(items) > 0)) != 0)
		e = CS_ENOMEM;
out:
	json_decref(list);
	json_decref(items);
	return e;
}

enum cs_err me_rules_add(struct store_conn *c, const struct config *cfg, int64_t user_id,
    int64_t now, json_t *ctx)
{
	json_t *list = NULL;
	enum cs_err e = standing_list(c, user_id, now, &list);    /* list written only on CS_OK */
	return e == CS_OK ? rules_into(cfg, list, rule_words, ctx) : e;
}

/* --- the admin pages ------------------------------------------------------ */

json_t *standing_pages_admin_rule(const struct config *cfg, json_t *r)
{
	json_t *item = rule_words(cfg, r);
	json_int_t ended = json_integer_value(json_object_get(r, "ended_at"));
	const char *ended_by = json_string_value(json_object_get(r, "ended_by"));
	bool live = json_is_true(json_object_get(r, "live"));
	char over[300] = "", label[300];
	enum cs_err e = CS_OK;
	if (item == NULL)
		return NULL;
	/* Why a rule no longer holds: ended (by whom: an actor such as
	 * "admin:<subject>", or the revocation's own words), used up, or expired. */
	if (ended > 0 && ended_by != NULL && strchr(ended_by, ':') == NULL)
		e = str_fmt(over, sizeof over, "%s", ended_by);
	else if (ended > 0)
		e = str_fmt(over, sizeof over, "ended by %s", str_or(ended_by));
	else if (json_is_true(json_object_get(r, "used_up")))
		e = str_fmt(over, sizeof over, "used up");
	else if (!live)
		e = str_fmt(over, sizeof over, "expired");
	if (e == CS_OK)
		e = str_fmt(label, sizeof label, "End the rule of %s: %s",
		    str_or(json_string_value(json_object_get(item, "agent"))),
		    str_or(json_string_value(json_object_get(r, "action"))));
	if (e != CS_OK || json_object_set_new(item, "made",
	    pages_time_value(json_integer_value(json_object_get(r, "created_at")))) != 0 ||
	    json_object_set_new(item, "made_by",
	    json_string(str_or(json_string_value(json_object_get(r, "created_by"))))) != 0 ||
	    json_object_set_new(item, "consent_id",
	    json_string(str_or(json_string_value(json_object_get(r, "consent_id"))))) != 0 ||
	    json_object_set_new(item, "subject",
	    json_string(str_or(json_string_value(json_object_get(r, "subject"))))) != 0 ||
	    json_object_set_new(item, "live", json_boolean(live)) != 0 ||
	    json_object_set_new(item, "ended", ended > 0 ? pages_time_value(ended) : json_null()) != 0 ||
	    (!live && json_object_set_new(item, "over", json_string(over)) != 0) ||
	    json_object_set_new(item, "end_label", json_string(label)) != 0) {
		json_decref(item);
		return NULL;
	}
	return item;
}

enum cs_err standing_pages_admin_rules(struct store_conn *c, const struct config *cfg,
    const char *consent_id, int64_t now, json_t *ctx)
{
	json_t *list = NULL;
	enum cs_err e = standing_list_consent(c, consent_id, now, &list);    /* list written only on CS_OK */
	return e == CS_OK ? rules_into(cfg, list, standing_pages_admin_rule, ctx) : e;
}

enum cs_err me_rules_end(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct session *s = req->auth.session;     /* the router's session form gate */
	struct store_conn *c = store_conn(app->store);
	enum standing_end_outcome o = STANDING_NOT_YOURS;
	enum cs_err e;
	if (c == NULL)
		return CS_EDB;
	e = standing_end(c, req->captures[0], s->user_id, req->auth.actor, req->now, &o);
	/* SECURITY: someone else's rule looks exactly like a missing one. */
	if (e == CS_ENOENT || (e == CS_OK && o == STANDING_NOT_YOURS))
		return reply_html_error(rep, 404, "No such rule", "There is no such rule of yours.");
	if (e != CS_OK)
		return e;
	/* Ended now, or already over: either way /me no longer lists it. */
	return page_redirect(rep, "/me#rules");
}
