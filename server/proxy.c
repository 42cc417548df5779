/* proxy.c -- proxy mode's domain (docs/architecture.md flow H): the path normalised
 * once, the route matched (default deny), the action's parameters, the
 * approval gate and release (exchange.c), the upstream URL, and the audit
 * entries of each call.  No HTTP here: proxy_api.c is the handler and does the
 * upstream call.  It must never build a URL from the gateway's raw path, let a
 * call through before route, scope, consent and approval are checked, or put a
 * token or body in the audit log. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "approval.h"
#include "jcs.h"
#include "audit.h"
#include "buf.h"
#include "consent.h"
#include "scope.h"
#include "form.h"
#include "grant.h"
#include "proxy.h"
#include "store.h"

#define PROXY_MAX_URL        (3 * PROXY_MAX_PATH + 3 * 16384 + 1024)

/* --- normalisation ------------------------------------------------------- */

void proxy_path_clear(struct proxy_path *p)
{
	if (p == NULL)
		return;
	for (size_t i = 0; i < p->n; i++)
		free(p->seg[i]);
	p->n = 0;
}

enum cs_err proxy_path_normalise(const char *raw, struct proxy_path *out)
{
	struct proxy_path p = { .n = 0 };
	enum cs_err e = CS_EINVAL;
	size_t len, start = 0;

	if (raw == NULL || out == NULL || (len = strlen(raw)) == 0)
		return CS_EINVAL;
	if (len > PROXY_MAX_PATH)
		return CS_ETOOBIG;
	/* SECURITY: a backslash is a separator to some servers: refused raw and decoded. */
	if (strchr(raw, '\\') != NULL)
		return CS_EINVAL;
	for (;;) {
		const char *s = raw + start;
		const char *slash = strchr(s, '/');
		size_t sl = slash ? (size_t)(slash - s) : strlen(s);
		char *d = NULL;
		size_t dl = 0;
		if (sl == 0)
			goto out;                     /* empty segment: leading, "//" or trailing '/' */
		if (p.n == PROXY_MAX_SEGMENTS) {
			e = CS_ETOOBIG;
			goto out;
		}
		/* SECURITY: decoded exactly once; what is left of '%' is literal text
		 * and is re-encoded when forwarding, so it never becomes a separator
		 * or a dot segment upstream. */
		if (pct_decode(s, sl, 0, &d, &dl) != CS_OK)
			goto out;
		p.seg[p.n++] = d;
		if (dl == 0 || strcmp(d, ".") == 0 || strcmp(d, "..") == 0)
			goto out;
		for (size_t i = 0; i < dl; i++) {
			unsigned char ch = (unsigned char)d[i];
			if (ch == '/' || ch == '\\' || ch < 0x20 || ch == 0x7f)
				goto out;
		}
		if (slash == NULL)
			break;
		start += sl + 1;
	}
	*out = p;
	return CS_OK;
out:
	proxy_path_clear(&p);
	return e;
}

/* --- route matching ------------------------------------------------------ */

void proxy_match_clear(struct proxy_match *m)
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < m->n; i++) {
		free(m->name[i]);
		free(m->value[i]);
	}
	m->n = 0;
	m->action = NULL;
}

/* 1 when template (starting with '/') matches p; fills m's captures. */
static int template_match(const char *tpl, const struct proxy_path *p, struct proxy_match *m,
    enum cs_err *err)
{
	const char *t = tpl;
	size_t i = 0;
	*err = CS_OK;
	if (*t != '/')
		return 0;
	t++;
	while (*t != '\0') {
		const char *end = strchr(t, '/');
		size_t tl = end ? (size_t)(end - t) : strlen(t);
		if (i >= p->n)
			return 0;
		if (tl >= 2 && t[0] == '{' && t[tl - 1] == '}' && memchr(t + 1, '{', tl - 2) == NULL) {
			if (m->n == PROXY_MAX_CAPTURES)
				return 0;
			if ((m->name[m->n] = strndup(t + 1, tl - 2)) == NULL ||
			    (m->value[m->n] = strdup(p->seg[i])) == NULL) {
				free(m->name[m->n]);
				m->name[m->n] = NULL;
				*err = CS_ENOMEM;
				return 0;
			}
			m->n++;
		} else if (memchr(t, '{', tl) != NULL) {
			return 0;                     /* a capture inside a segment: never matches */
		} else if (strlen(p->seg[i]) != tl || memcmp(p->seg[i], t, tl) != 0) {
			return 0;
		}
		i++;
		t += tl;
		if (*t == '/')
			t++;
	}
	return i == p->n;
}

enum cs_err proxy_route_match(const struct config *cfg, const char *resource, const char *method,
    const struct proxy_path *p, struct proxy_match *out)
{
	struct proxy_match found = { .n = 0 };
	size_t hits = 0;
	if (cfg == NULL || resource == NULL || method == NULL || p == NULL || out == NULL)
		return CS_EINVAL;
	for (size_t i = 0; i < cfg->nactions; i++) {
		const struct config_action *a = &cfg->actions[i];
		struct proxy_match m = { .n = 0 };
		enum cs_err e;
		if (a->route_method == NULL || a->route_path == NULL || a->resource == NULL ||
		    strcmp(a->resource, resource) != 0 || strcmp(a->route_method, method) != 0)
			continue;
		if (template_match(a->route_path, p, &m, &e)) {
			m.action = a;
			if (hits++ == 0)
				found = m;
			else
				proxy_match_clear(&m);
		} else {
			proxy_match_clear(&m);
			if (e != CS_OK) {
				proxy_match_clear(&found);
				return e;
			}
		}
	}
	/* SECURITY: default deny -- and two routes matching one request is a
	 * configuration ambiguity, denied rather than guessed. */
	if (hits != 1) {
		proxy_match_clear(&found);
		return CS_ENOENT;
	}
	*out = found;
	return CS_OK;
}

/* --- parameters ---------------------------------------------------------- */

static int content_type_json(const char *ct)
{
	static const char want[] = "application/json";
	size_t n = sizeof want - 1;
	if (ct == NULL || strncasecmp(ct, want, n) != 0)
		return 0;
	return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ';
}

/* The why of a refused input: a fixed phrase, or nothing rather than a cut one. */
static void set_why(char *why, size_t whylen, const char *msg)
{
	if (whylen > 0 && str_fmt(why, whylen, "%s", msg) != CS_OK)
		why[0] = '\0';
}

/* The query's parameters into q, each name to the array of its values;
 * a malformed query is a 400 (*status, why). */
static enum cs_err query_values(const char *query, json_t *q, int *status, char *why,
    size_t whylen)
{
	enum cs_err e = CS_ENOMEM, fe;
	struct form f;

	form_init(&f);
	if ((fe = form_parse(&f, query, strlen(query))) != CS_OK) {
		*status = 400;
		set_why(why, whylen, fe == CS_ETOOBIG ? "too many query parameters" :
		    "malformed query string");
		e = CS_EINVAL;
		goto out;
	}
	for (size_t i = 0; i < f.n; i++) {
		json_t *arr = json_object_get(q, f.p[i].name);
		if (arr == NULL) {
			if ((arr = json_array()) == NULL || json_object_set_new(q, f.p[i].name, arr) != 0)
				goto out;
		}
		if (json_array_append_new(arr, json_stringn(f.p[i].value, f.p[i].value_len)) != 0)
			goto out;
	}
	e = CS_OK;
out:
	form_clear(&f);
	return e;
}

/* The request body into *b: JSON null when there is none, else I-JSON of
 * at most PROXY_MAX_BODY bytes; a refusal sets *status (413, 415, 400) and
 * why. */
static enum cs_err body_value(const struct proxy_input *in, json_t **b, int *status, char *why,
    size_t whylen)
{
	json_error_t je;

	if (in->body == NULL || in->body_len == 0) {
		*b = json_null();
		return CS_OK;
	}
	if (in->body_len > PROXY_MAX_BODY) {
		*status = 413;
		set_why(why, whylen, "the body is too large");
		return CS_ETOOBIG;
	}
	if (!content_type_json(in->content_type)) {
		*status = 415;
		set_why(why, whylen, "the body must be application/json");
		return CS_EINVAL;
	}
	/* SECURITY: I-JSON (RFC 7493): what the person approves is exactly
	 * what is forwarded, so no parser may read it differently. */
	*b = json_loadb(in->body, in->body_len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	if (*b == NULL) {
		*status = 400;
		set_why(why, whylen, "the body is not JSON or repeats a member name");
		return CS_EINVAL;
	}
	if (jcs_ijson_check(*b, why, whylen) != CS_OK) {
		*status = 400;
		return CS_EINVAL;
	}
	return CS_OK;
}

enum cs_err proxy_params_build(const struct proxy_match *m, const struct proxy_input *in,
    json_t **out, int *status, char *why, size_t whylen)
{
	enum cs_err e = CS_ENOMEM;
	json_t *v = NULL, *path = NULL, *q = NULL, *b = NULL;

	*status = 500;
	if ((v = json_object()) == NULL || (path = json_object()) == NULL ||
	    (q = json_object()) == NULL)
		goto out;
	for (size_t i = 0; i < m->n; i++) {
		json_t *s = json_string(m->value[i]);
		if (s == NULL || json_object_set_new(path, m->name[i], s) != 0) {
			*status = 400;
			set_why(why, whylen, "a path value is not valid UTF-8");
			e = CS_EINVAL;
			goto out;
		}
	}
	if (in->query != NULL && in->query[0] != '\0' &&
	    (e = query_values(in->query, q, status, why, whylen)) != CS_OK)
		goto out;
	if ((e = body_value(in, &b, status, why, whylen)) != CS_OK)
		goto out;
	e = CS_ENOMEM;
	if (json_object_set(v, "path", path) != 0 || json_object_set(v, "query", q) != 0 ||
	    json_object_set(v, "body", b) != 0)
		goto out;
	*out = v;
	v = NULL;
	*status = 200;
	e = CS_OK;
out:
	json_decref(v);
	json_decref(path);
	json_decref(q);
	json_decref(b);
	return e;
}

/* --- the upstream URL ---------------------------------------------------- */

static const char *capture_of(const struct proxy_match *m, const char *name, size_t nl)
{
	for (size_t i = 0; i < m->n; i++)
		if (strlen(m->name[i]) == nl && memcmp(m->name[i], name, nl) == 0)
			return m->value[i];
	return NULL;
}

static enum cs_err put_encoded(struct buf *b, const char *s)
{
	char *enc = NULL;
	enum cs_err e = pct_encode(s, &enc);
	if (e == CS_OK)
		e = buf_puts(b, enc);
	free(enc);
	return e;
}

enum cs_err proxy_url_build(const char *base_url, const char *route_path,
    const struct proxy_match *m, json_t *params, char **out)
{
	struct buf b;
	enum cs_err e = CS_EINVAL;
	const char *t = route_path;
	json_t *q = params ? json_object_get(params, "query") : NULL;

	buf_init(&b, PROXY_MAX_URL);
	if (base_url == NULL || route_path == NULL || *t != '/')
		goto out;
	if ((e = buf_puts(&b, base_url)) != CS_OK)
		goto out;
	t++;
	while (*t != '\0') {
		const char *end = strchr(t, '/');
		size_t tl = end ? (size_t)(end - t) : strlen(t);
		if ((e = buf_puts(&b, "/")) != CS_OK)
			goto out;
		if (tl >= 2 && t[0] == '{' && t[tl - 1] == '}') {
			const char *v = capture_of(m, t + 1, tl - 2);
			if (v == NULL) {
				e = CS_EINVAL;
				goto out;
			}
			/* SECURITY: each capture percent-encoded: '/', '%', '?' and '#'
			 * in a value stay inside its one segment. */
			if ((e = put_encoded(&b, v)) != CS_OK)
				goto out;
		} else if ((e = buf_append(&b, t, tl)) != CS_OK) {
			goto out;
		}
		t += tl;
		if (*t == '/')
			t++;
	}
	if (json_is_object(q) && json_object_size(q) > 0) {
		const char *name;
		json_t *arr;
		char sep = '?';
		json_object_foreach(q, name, arr) {
			size_t i;
			json_t *val;
			json_array_foreach(arr, i, val) {
				if ((e = buf_append(&b, &sep, 1)) != CS_OK ||
				    (e = put_encoded(&b, name)) != CS_OK ||
				    (e = buf_puts(&b, "=")) != CS_OK ||
				    (e = put_encoded(&b, json_string_value(val) ? json_string_value(val) : ""))
				    != CS_OK)
					goto out;
				sep = '&';
			}
		}
	}
	if ((*out = buf_steal(&b)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	e = CS_OK;
out:
	buf_clear(&b);
	return e;
}


/* --- one proxied call ---------------------------------------------------- */

void proxy_plan_clear(struct proxy_plan *p)
{
	if (p == NULL)
		return;
	exchange_release_clear(&p->rel);
	free(p->url);
	free(p->body);
	memset(p, 0, sizeof *p);
}

/* what, about the call, appended in the caller's transaction. */
static enum cs_err paudit_in(struct store_conn *c, const struct proxy_call *call,
    const struct audit_entry *what)
{
	struct audit_entry a = *what;
	consent_audit_about(call->k, call->actor, call->now, &a);
	return audit_append(c, &a);
}

/* One audit entry about the call, in its own transaction. */
static enum cs_err paudit(struct store_conn *c, const struct proxy_call *call,
    const struct audit_entry *what)
{
	enum cs_err e;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if ((e = paudit_in(c, call, what)) != CS_OK || (e = store_commit(c)) != CS_OK)
		store_rollback(c);
	return e;
}

/* The forward entry of one upstream request, in the transaction of the
 * release whose token it carries (vault_release_req.with). */
struct forward_entry {
	const struct proxy_call *call;
	const struct proxy_plan *p;          /* act, and rel.approval once the gate passed */
	bool retry;                          /* the one retry after a 401, with a refreshed token */
};

static enum cs_err forward_entry_write(struct store_conn *c, void *ctx)
{
	const struct forward_entry *f = ctx;
	const struct proxy_plan *p = f->p;
	const char *approval = p->rel.approval.approval_id;
	char detail[600];
	enum cs_err e = str_fmt(detail, sizeof detail, "action=%s; method=%s; route=%s; approval=%s%s",
	    p->act->name, f->call->method, p->act->route_path, approval ? approval : "-",
	    f->retry ? "; retry after 401" : "");
	if (e != CS_OK)
		return e;
	return paudit_in(c, f->call, &(struct audit_entry){ .action = "proxy.forwarded",
	    .request_id = approval, .outcome = "ok", .detail = detail });
}

/* A call refused before the upstream, audited ("proxy.refused"). */
static enum cs_err refuse(struct store_conn *c, const struct proxy_call *call,
    struct proxy_plan *out, enum proxy_outcome o, const char *detail)
{
	enum cs_err e = paudit(c, call, &(struct audit_entry){ .action = "proxy.refused",
	    .outcome = "refused", .detail = detail });
	if (e == CS_OK)
		out->outcome = o;
	return e;
}

/* The route and the scope: *m matched, or out->outcome refused (audited). */
static enum cs_err prepare_route(struct store_conn *c, const struct config *cfg,
    const struct proxy_call *call, struct proxy_match *m, struct proxy_plan *out)
{
	struct proxy_path path = { .n = 0 };
	char detail[600];
	enum cs_err e;
	bool found;
	out->res = config_resource(cfg, call->k->resource);
	/* SECURITY: default deny, before any byte goes upstream. */
	found = out->res != NULL && out->res->base_url != NULL &&
	    proxy_path_normalise(call->rest, &path) == CS_OK &&
	    proxy_route_match(cfg, call->k->resource, call->method, &path, m) == CS_OK;
	proxy_path_clear(&path);
	if (!found) {
		if ((e = str_fmt(detail, sizeof detail, "method=%s; no such route", call->method)) != CS_OK)
			return e;
		return refuse(c, call, out, PROXY_NO_ROUTE, detail);
	}
	out->act = m->action;
	if (!grant_claims_have_scope(call->claims, out->act->scope)) {
		/* SECURITY: an action outside the grant is an escalation attempt. */
		if ((e = str_fmt(detail, sizeof detail, "action=%s; escalation attempt: scope outside "
		    "the grant", out->act->name)) != CS_OK)
			return e;
		return refuse(c, call, out, PROXY_SCOPE, detail);
	}
	out->outcome = PROXY_READY;
	return CS_OK;
}

/* The action's parameters (*params) and the body to forward: the canonical
 * form of the one parsed (and approved).  out->outcome says what was wrong. */
static enum cs_err prepare_params(const struct proxy_call *call, const struct proxy_match *m,
    json_t **params, struct proxy_plan *out)
{
	struct buf bb;
	enum cs_err e;
	if (proxy_params_build(m, &call->in, params, &out->status, out->why,
	    sizeof out->why) != CS_OK) {
		out->outcome = PROXY_BAD_INPUT;
		return out->status == 500 ? CS_ENOMEM : CS_OK;
	}
	json_t *pb = json_object_get(*params, "body");
	if (json_is_null(pb))
		return CS_OK;
	buf_init(&bb, 2 * PROXY_MAX_BODY);
	if ((e = jcs_canonicalize(pb, &bb)) != CS_OK) {
		buf_clear(&bb);
		if (e == CS_ENOMEM)
			return e;
		out->outcome = PROXY_NOT_IJSON;
		return CS_OK;
	}
	out->body_len = bb.len;
	if ((out->body = buf_steal(&bb)) == NULL)
		return CS_ENOMEM;
	return CS_OK;
}

/* The base URL of the call when the resource's holds {cloud_id} (preset
 * atlassian): the first site the consent's connection reaches put there, in
 * *base (malloc'd; NULL when base_url has no placeholder, or when the consent
 * holds no connection -- the release then answers that it is gone, and
 * nothing is sent).  A connection that names no site is refused (PROXY_NO_SITE,
 * audited). */
static enum cs_err prepare_base(struct store_conn *c, const struct proxy_call *call,
    struct proxy_plan *out, char **base)
{
	const char *bu = out->res->base_url, *at = strstr(bu, CONFIG_SITE_PLACEHOLDER);
	char *site = NULL;
	char detail[600];
	struct buf b;
	enum cs_err e;
	*base = NULL;
	if (at == NULL)
		return CS_OK;
	e = vault_site(c, call->k->id, &site);
	if (e == CS_ENOENT && !vault_has_record(c, call->k->id))
		return CS_OK;
	if (e == CS_ENOENT) {
		if ((e = str_fmt(detail, sizeof detail, "action=%s; the connection names no site for "
		    "%s", out->act->name, CONFIG_SITE_PLACEHOLDER)) != CS_OK)
			return e;
		return refuse(c, call, out, PROXY_NO_SITE, detail);
	}
	if (e != CS_OK)
		return e;
	/* SECURITY: a site is [A-Za-z0-9-] only (provider_sites_parse): one
	 * path segment, nothing to encode. */
	buf_init(&b, PROXY_MAX_URL);
	if ((e = buf_append(&b, bu, (size_t)(at - bu))) == CS_OK &&
	    (e = buf_puts(&b, site)) == CS_OK &&
	    (e = buf_puts(&b, at + strlen(CONFIG_SITE_PLACEHOLDER))) == CS_OK &&
	    (*base = buf_steal(&b)) == NULL)
		e = CS_ENOMEM;
	buf_clear(&b);
	free(site);
	return e;
}

enum cs_err proxy_prepare(struct store_conn *c, const struct config *cfg,
    const struct proxy_call *call, struct proxy_plan *out)
{
	struct proxy_match m = { .n = 0 };
	json_t *params = NULL;
	char *base = NULL;
	enum cs_err e;
	if (c == NULL || cfg == NULL || call == NULL || call->k == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = prepare_route(c, cfg, call, &m, out)) != CS_OK || out->outcome != PROXY_READY)
		goto out;
	/* SECURITY: a body on GET or HEAD would make libcurl send a POST, which is
	 * another action than the one matched and approved. */
	if (call->bodyless && call->in.body_len > 0) {
		out->outcome = PROXY_BODY_ON_GET;
		goto out;
	}
	if ((e = prepare_params(call, &m, &params, out)) != CS_OK || out->outcome != PROXY_READY)
		goto out;
	if ((e = prepare_base(c, call, out, &base)) != CS_OK || out->outcome != PROXY_READY)
		goto out;
	/* Built before the release: once the release has committed, nothing may
	 * stop the call that its forward entry records. */
	if ((e = proxy_url_build(base != NULL ? base : out->res->base_url, out->act->route_path, &m,
	    params, &out->url)) != CS_OK)
		goto out;
	/* One transaction for the whole call: the approval used up (single use
	 * even when the upstream call then fails), the release audited and the
	 * forward entry written, all committed before the token leaves. */
	e = exchange_release(c, cfg, &(struct exchange_release_req){ .vault = call->vault,
	    .k = call->k, .act = out->act, .params = params,
	    .canonical_max = 2 * PROXY_MAX_BODY + APPROVAL_MAX_CANONICAL, .actor = call->actor,
	    .now = call->now, .limits = call->limits, .with = forward_entry_write,
	    .with_ctx = &(struct forward_entry){ .call = call, .p = out } }, &out->rel);
	if (e != CS_OK)
		goto out;
	if (out->rel.outcome != EXCHANGE_RELEASED)
		out->outcome = PROXY_NOT_RELEASED;
out:
	free(base);
	json_decref(params);
	proxy_match_clear(&m);
	return e;
}

bool proxy_refresh_token(struct store_conn *c, const struct config *cfg,
    const struct proxy_call *call, struct proxy_plan *p)
{
	struct vault_release tok;
	memset(&tok, 0, sizeof tok);
	/* The retry is another request upstream: its forward entry goes in the
	 * transaction of this release as well. */
	enum cs_err e = vault_release_refreshed(call->vault, c, cfg, &(struct vault_release_req){
	    .k = call->k, .action = p->act->name, .actor = call->actor, .now = call->now,
	    .with = forward_entry_write,
	    .with_ctx = &(struct forward_entry){ .call = call, .p = p, .retry = true } }, &tok);
	if (e == CS_OK && tok.outcome == VAULT_RELEASED) {
		vault_release_clear(&p->rel.tok);
		p->rel.tok = tok;
		return true;
	}
	vault_release_clear(&tok);
	return false;
}
