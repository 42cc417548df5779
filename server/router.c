/* router.c -- the pure half of the HTTP core: route matching, typed parameter
 * validation, same-origin checks, rate limits, the route's authentication gate
 * and security headers; the replies themselves are reply.c's.  Knows nothing
 * of sockets; never lets a handler see an undeclared parameter or run before
 * its route's gate let it.  What a route is (kind, gate, deferral) it reads
 * from the table, never from a path. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <openssl/crypto.h>
#include "app.h"
#include "arena.h"
#include "grant.h"
#include "http.h"
#include "session.h"

/* --- security headers ---------------------------------------------------- */

/* Appends " scheme://host[:port]" of url to b unless it is there already or
 * holds a character that could break out of a CSP source expression. */
static void add_origin(struct buf *b, const char *url)
{
	const char *hs = strstr(url, "://");
	if (hs == NULL)
		return;
	const char *pe = strpbrk(hs + 3, "/?#");
	size_t n = pe ? (size_t)(pe - url) : strlen(url);
	char o[512];
	if (n == 0 || n >= sizeof o)
		return;
	memcpy(o, url, n);
	o[n] = '\0';
	for (const char *p = o; *p; p++)
		if (*p == ';' || *p == ',' || *p == ' ' || *p == '\'' || (unsigned char)*p < 0x21)
			return;
	for (const char *p = b->data ? strstr(b->data, o) : NULL; p; p = strstr(p + 1, o))
		if (p[-1] == ' ' && (p[n] == '\0' || p[n] == ' '))
			return;                                   /* already there */
	if (buf_printf(b, " %s", o) != CS_OK)
		return;
}

enum cs_err router_csp(const struct app *app, char *out, size_t outsz)
{
	enum cs_err e;
	struct buf fa;
	/* form-action: our own origin, plus the origins a form's answer may
	 * redirect to -- the IdP's logout page, and the providers' authorization
	 * endpoints after a consent is approved (Chromium applies form-action to
	 * redirects that follow a form submission). */
	buf_init(&fa, 1024);
	if (app && app->cfg) {
		const struct config *cfg = app->cfg;
		if (cfg->oidc_issuer)
			add_origin(&fa, cfg->oidc_issuer);
		for (size_t i = 0; i < cfg->nresources; i++) {
			const struct config_resource *r = &cfg->resources[i];
			if (r->provider_authorization_endpoint)
				add_origin(&fa, r->provider_authorization_endpoint);
			else if (r->provider_issuer)
				add_origin(&fa, r->provider_issuer);
		}
	}
	e = str_fmt(out, outsz, "default-src 'none'; script-src 'self'; style-src 'self'; "
	    "img-src 'self'; form-action 'self'%s; frame-ancestors 'none'; base-uri 'none'",
	    fa.data ? fa.data : "");
	buf_clear(&fa);
	return e;
}

enum cs_err router_security_headers(const struct app *app, const char *csp,
    struct http_reply *rep)
{
	enum cs_err e;
	char cc[64], own[ROUTER_CSP_MAX];
	if (csp == NULL) {
		if ((e = router_csp(app, own, sizeof own)) != CS_OK)
			return e;
		csp = own;
	}
	/* SECURITY: no inline script anywhere (scripts only from our own /static/);
	 * no framing; no referrer leaks. */
	if ((e = reply_header(rep, "Content-Security-Policy", csp)) != CS_OK ||
	    (e = reply_header(rep, "X-Frame-Options", "DENY")) != CS_OK ||
	    (e = reply_header(rep, "X-Content-Type-Options", "nosniff")) != CS_OK ||
	    (e = reply_header(rep, "Referrer-Policy", "no-referrer")) != CS_OK ||
	    (e = reply_header(rep, "Cross-Origin-Opener-Policy", "same-origin")) != CS_OK)
		return e;
	if (rep->cache_max_age < 0) {
		if ((e = reply_header(rep, "Cache-Control", "no-store")) != CS_OK ||
		    (e = reply_header(rep, "Pragma", "no-cache")) != CS_OK)
			return e;
	} else {
		if ((e = str_fmt(cc, sizeof cc, "public, max-age=%d", rep->cache_max_age)) != CS_OK ||
		    (e = reply_header(rep, "Cache-Control", cc)) != CS_OK)
			return e;
	}
	if (app && app->cfg && app->cfg->public_url_is_https &&
	    (e = reply_header(rep, "Strict-Transport-Security", "max-age=31536000")) != CS_OK)
		return e;
	return CS_OK;
}

/* --- matching ------------------------------------------------------------ */

void http_request_clear(struct http_request *req)
{
	/* The captures live in one piece: the request's arena's, or this one. */
	free(req->capture_block);
	req->capture_block = NULL;
	for (size_t i = 0; i < req->ncaptures; i++)
		req->captures[i] = NULL;
	req->ncaptures = 0;
	form_clear(&req->params);
	memset(req->values, 0, sizeof req->values);
	if (req->auth.session != NULL) {
		session_clear(req->auth.session);
		free(req->auth.session);
	}
	free(req->auth.admin);
	if (req->auth.grant != NULL) {
		grant_check_clear(req->auth.grant);
		free(req->auth.grant);
	}
	memset(&req->auth, 0, sizeof req->auth);
}

/* A match's captures: v points into one piece, from an arena or the heap. */
struct route_caps {
	char  *v[ROUTE_MAX_CAPTURES];
	size_t n;
	char  *heap;                     /* the piece when it came from the heap, else NULL */
};

/* Matches path against pattern: 1 on a match.  A capture must be non-empty
 * and must not decode to a '/'.  The captures are decoded into scratch first;
 * only on a match, and only when out is not NULL, are they kept in one piece
 * from a (the request's arena), or from the heap when a is NULL (out->heap).
 * A probe (out NULL) allocates nothing. */
static int route_match(const char *pattern, const char *path, struct arena *a,
    struct route_caps *out)
{
	const char *p = pattern, *s = path;
	size_t nc = 0, used = 0, plen = strlen(path);
	size_t off[ROUTE_MAX_CAPTURES] = { 0 };
	char scratch[HTTP_MAX_URI + ROUTE_MAX_CAPTURES];
	int ok = 0;
	if (*s != '/' || *p != '/' || plen > HTTP_MAX_URI)
		return 0;
	while (*p && *s) {
		if (*p == '{' && strncmp(p, "{rest*}", 7) == 0 && p[7] == '\0') {
			/* A trailing {rest*} takes the remaining path raw (undecoded): its
			 * handler normalises it once, itself (the proxy). */
			size_t rl = strlen(s);
			if (nc == ROUTE_MAX_CAPTURES)
				goto out;
			memcpy(scratch + used, s, rl + 1);
			off[nc++] = used;
			used += rl + 1;
			p += 7;
			s += rl;
		} else if (*p == '{') {
			const char *pe = strchr(p, '}');
			const char *se = strchr(s, '/');
			size_t slen = se ? (size_t)(se - s) : strlen(s), got = 0;
			if (pe == NULL || slen == 0 || nc == ROUTE_MAX_CAPTURES)
				goto out;
			/* Each capture is a distinct part of path, so scratch (the path's
			 * length plus a NUL a capture) always has room for it. */
			if (pct_decode_into(s, slen, 0, scratch + used, &got) != CS_OK)
				goto out;
			if (got == 0 || memchr(scratch + used, '/', got) != NULL)
				goto out;
			off[nc++] = used;
			used += got + 1;
			p = pe + 1;
			s += slen;
		} else if (*p == *s) {
			p++;
			s++;
		} else {
			goto out;
		}
	}
	ok = (*p == '\0' && *s == '\0');
	if (ok && out != NULL && nc > 0) {
		char *block = a != NULL ? arena_alloc(a, used) : malloc(used);
		if (block == NULL) {
			ok = 0;
			goto out;
		}
		memcpy(block, scratch, used);
		out->heap = a != NULL ? NULL : block;
		for (size_t i = 0; i < nc; i++)
			out->v[i] = block + off[i];
		out->n = nc;
	}
out:
	OPENSSL_cleanse(scratch, used);
	return ok;
}

const struct route *router_route_for_path(const struct route *table, const char *path)
{
	for (const struct route *r = table; r->pattern; r++)
		if (route_match(r->pattern, path, NULL, NULL))
			return r;
	return NULL;
}

enum route_kind router_kind_for_path(const struct route *table, const char *path)
{
	const struct route *r = router_route_for_path(table, path);
	if (r != NULL)
		return r->kind;
	for (const struct route_prefix *p = http_route_prefixes; p->prefix; p++)
		if (strncmp(path, p->prefix, strlen(p->prefix)) == 0)
			return p->kind;
	return ROUTE_BROWSER;
}

static int content_type_is(const char *ct, const char *want)
{
	size_t n = strlen(want);
	if (ct == NULL || strncasecmp(ct, want, n) != 0)
		return 0;
	return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ';
}

/* The spec of parameter name in rt (its position in *at), with for a
 * family's member its index in *member (else -1); NULL when undeclared. */
static const struct param_spec *spec_find(const struct route *rt, const char *name, size_t *at,
    int *member)
{
	for (const struct param_spec *ps = rt->params; ps->name; ps++) {
		size_t n = strlen(ps->name);
		unsigned count = PARAM_FAMILY_COUNT(ps->flags);
		*at = (size_t)(ps - rt->params);
		*member = -1;
		if (count == 0) {
			if (strcmp(ps->name, name) == 0)
				return ps;
			continue;
		}
		/* A member: the prefix, then a decimal index below count with no
		 * leading zero ("s0" .. "s19", never "s01"). */
		const char *d = name + n;
		unsigned v = 0;
		if (strncmp(ps->name, name, n) != 0 || *d == '\0' || (d[0] == '0' && d[1] != '\0'))
			continue;
		for (; *d >= '0' && *d <= '9' && v < count; d++)
			v = v * 10 + (unsigned)(*d - '0');
		if (*d == '\0' && v < count && v < PARAM_FAMILY_MAX) {
			*member = (int)v;
			return ps;
		}
	}
	return NULL;
}

/* Whether v is a valid value of ps; a PARAM_INT's number or a PARAM_WORD's
 * index in *num. */
static bool value_ok(const struct param_spec *ps, const char *v, int64_t *num)
{
	const struct param_type *t = ps->type;
	*num = 0;
	if (t == NULL)
		return true;
	switch (t->kind) {
	case PARAM_INT: {
		int64_t n = 0;
		if (*v == '\0')
			return false;
		for (; *v; v++) {
			if (*v < '0' || *v > '9' || n > (INT64_MAX - (*v - '0')) / 10)
				return false;
			n = n * 10 + (*v - '0');
		}
		if (n < t->min || n > t->max)
			return false;
		*num = n;
		return true;
	}
	case PARAM_WORD:
		for (int64_t k = 0; t->words != NULL && t->words[k] != NULL; k++)
			if (strcmp(t->words[k], v) == 0) {
				*num = k;
				return true;
			}
		return false;
	case PARAM_ON:
		return strcmp(v, "on") == 0;
	case PARAM_STRING:
	case PARAM_KIND__MAX:
		break;
	}
	return t->valid == NULL || t->valid(v);
}

/* Validates raw parameters against the route's declaration, moving the
 * accepted ones into req->params and their typed values into req->values.
 * Returns NULL or a reason (static, or written into why). */
static const char *params_validate(const struct route *rt, struct form *raw, struct http_request *req,
    char *why, size_t whylen)
{
	int tolerate_unknown = (rt->kind == ROUTE_OAUTH || rt->kind == ROUTE_PUBLIC ||
	    (rt->flags & ROUTE_UNKNOWN_IGNORED));
	const struct param_spec *ps;
	size_t at;
	int member;
	int64_t num;
	form_init(&req->params);
	memset(req->values, 0, sizeof req->values);
	/* Check everything before moving anything: form_count() reads every
	 * name in raw, and a moved entry's name is NULL. */
	for (size_t i = 0; i < raw->n; i++) {
		const char *name = raw->p[i].name;
		if ((ps = spec_find(rt, name, &at, &member)) == NULL) {
			if (tolerate_unknown)
				continue;     /* RFC 6749 §3.2: unknown parameters are ignored */
			return "unknown parameter";
		}
		const char *what = form_count(raw, name) > 1 ? "repeated" :
		    raw->p[i].value_len > ps->max_len ? "too long" :
		    !value_ok(ps, raw->p[i].value, &num) ? "malformed" : NULL;
		if (what != NULL)
			return str_fmt(why, whylen, "parameter %s is %s", name, what) == CS_OK ? why :
			    "parameter is refused";
	}
	/* The accepted names and values point into raw's block: req->params owns it from
	 * here on, and raw_clear() wipes in place what stays behind. */
	req->params.block = raw->block;
	req->params.block_size = raw->block_size;
	req->params.block_in_arena = raw->block_in_arena;
	raw->block = NULL;
	raw->block_size = 0;
	raw->block_in_arena = false;
	for (size_t i = 0; i < raw->n; i++) {
		if ((ps = spec_find(rt, raw->p[i].name, &at, &member)) == NULL)
			continue;
		struct param_value *pv = &req->values[at];
		if (!value_ok(ps, raw->p[i].value, &num))
			return "parameter is refused";      /* cannot happen: checked above */
		if (member >= 0) {
			pv->members |= UINT64_C(1) << member;
		} else {
			pv->str = raw->p[i].value;
			pv->num = num;
		}
		req->params.p[req->params.n++] = raw->p[i];      /* moves ownership */
		raw->p[i].name = NULL;
		raw->p[i].value = NULL;
		raw->p[i].value_len = 0;
	}
	for (ps = rt->params; ps->name; ps++) {
		if ((ps->flags & PARAM_REQUIRED) && form_get(&req->params, ps->name) == NULL)
			return str_fmt(why, whylen, "parameter %s is missing", ps->name) == CS_OK ? why :
			    "parameter is missing";
	}
	return NULL;
}

/* Wipes the values params_validate left in raw (moved entries are NULL): a
 * refused one may be a secret.  Their bytes may sit in the block req->params now
 * owns, so they are wiped in place; then raw's block, if it still has it, goes. */
static void raw_clear(struct form *raw)
{
	for (size_t i = 0; i < raw->n; i++)
		if (raw->p[i].value != NULL)
			OPENSSL_cleanse(raw->p[i].value, raw->p[i].value_len);
	form_clear(raw);
}

/* SECURITY: a state-changing browser request must come from our own origin.
 * Origin decides when present; "null" (Chromium with no-referrer) and absent
 * defer to Sec-Fetch-Site. */
static int same_origin(const struct http_request *req)
{
	const char *pub = req->app && req->app->cfg ? req->app->cfg->public_url : NULL;
	if (req->origin && strcmp(req->origin, "null") != 0)
		return pub != NULL && strcmp(req->origin, pub) == 0;
	return req->sec_fetch_site && strcmp(req->sec_fetch_site, "same-origin") == 0;
}

/* The first route whose pattern and method match; its captures move into
 * req. allow collects every method the path answers to (for a 405), and
 * *path_known says whether any pattern matched the path at all. */
static const struct route *route_lookup(const struct route *table, struct http_request *req,
    enum http_method m, char *allow, size_t allowsz, int *path_known)
{
	const struct route *rt = NULL;

	for (const struct route *r = table; r->pattern; r++) {
		/* Only the route that answers keeps its captures; the others are
		 * probes that allocate nothing. */
		bool answers = r->method == m && rt == NULL;
		struct route_caps caps = { .n = 0 };
		if (!route_match(r->pattern, req->path, req->arena, answers ? &caps : NULL))
			continue;
		*path_known = 1;
		if (answers) {
			http_request_clear(req);
			for (size_t i = 0; i < caps.n; i++)
				req->captures[i] = caps.v[i];
			req->ncaptures = caps.n;
			req->capture_block = caps.heap;
			req->route = rt = r;
		}
		if (strstr(allow, http_method_name(r->method)) == NULL) {
			if (allow[0])
				strncat(allow, ", ", allowsz - strlen(allow) - 1);
			strncat(allow, http_method_name(r->method), allowsz - strlen(allow) - 1);
			if (r->method == HTTP_GET)
				strncat(allow, ", HEAD", allowsz - strlen(allow) - 1);
		}
	}
	return rt;
}

/* Whether each {x} capture of req is at most ROUTE_CAPTURE_MAX bytes; a
 * trailing {rest*} (rt's last capture) is bounded by HTTP_MAX_URI alone. */
static bool captures_fit(const struct route *rt, const struct http_request *req)
{
	size_t n = req->ncaptures;
	size_t pl = strlen(rt->pattern);
	if (n > 0 && pl >= 7 && strcmp(rt->pattern + pl - 7, "{rest*}") == 0)
		n--;
	for (size_t i = 0; i < n; i++)
		if (strlen(req->captures[i]) > ROUTE_CAPTURE_MAX)
			return false;
	return true;
}

/* --- rate limits ----------------------------------------------------------- */

/* SECURITY: the route's [limits] class at the point where its key is known:
 * a client address before any work, the gateway once its gate let it in.
 * true: go on; false: rep holds the 429 (or *e an error). */
static bool limit_ok(const struct route *rt, struct http_request *req, struct http_reply *rep,
    bool authenticated, enum cs_err *e)
{
	struct rate_limits *l = req->app != NULL ? req->app->limits : NULL;
	const char *gw = req->app != NULL && req->app->cfg != NULL ? req->app->cfg->gateway_id : NULL;
	int64_t ra = 0;
	bool ok = true;
	if (rt->limit == LIMIT_ADDRESS && !authenticated)
		ok = rate_limits_take_address(l, req->remote_ip, &ra);
	else if (rt->limit == LIMIT_GATEWAY && authenticated && req->auth.gateway && gw != NULL)
		ok = rate_limits_take(l, LIMIT_GATEWAY, gw, strlen(gw), &ra);
	if (!ok)
		*e = reply_limit_refusal(rep, rt->kind, rt->limit, ra);
	return ok;
}

/* Empties a reply a handler may have half-filled, keeping nothing of it. */
static void reply_reset(struct http_reply *r)
{
	reply_clear(r);
	reply_init(r);
}

/* The answer for a gate's or a handler's failure e: CS_EBUSY a 503 to retry,
 * any other failure (or a handler that set no status) a 500 of the route's
 * kind; rep untouched when neither. */
static enum cs_err failure_reply(const struct route *rt, struct http_reply *rep, enum cs_err e)
{
	if (e == CS_EBUSY) {
		/* The database's write queue is full or it is stopping (store.h),
		 * or (PostgreSQL) the database is out of reach or the connection
		 * was lost: whatever the request began was rolled back; the caller
		 * may try again in a moment. */
		reply_reset(rep);
		e = reply_error(rep, rt->kind, 503, "temporarily_unavailable",
		    "The database is busy or out of reach (too many writes waiting, or its "
		    "connection lost). Try again in a moment.");
		if (e == CS_OK)
			e = reply_header(rep, "Retry-After", "1");
	} else if (e != CS_OK || rep->status == 0) {
		reply_reset(rep);
		e = reply_error(rep, rt->kind, 500, "server_error",
		    "The server could not complete this request.");
	}
	return e;
}

/* The log's route, and the last resort when the answer itself failed: a
 * fixed reply that cannot fail. */
static void finish(const struct route *rt, struct http_reply *rep, enum cs_err e)
{
	rep->log.route = rt != NULL ? rt->pattern : NULL;
	if (e != CS_OK) {
		reply_reset(rep);
		rep->log.route = rt != NULL ? rt->pattern : NULL;
		reply_log_error(rep, "server_error", NULL);
		rep->status = 500;
		rep->content_type = "text/plain; charset=utf-8";
		if (buf_puts(&rep->body, "internal error\n") != CS_OK)
			rep->body.len = 0;
	}
}

/* Runs a gate (or a grant check): CS_OK and true when it let req through;
 * false with rep holding its refusal, or with *e its failure. */
static bool gate_run(http_gate gate, struct http_request *req, struct http_reply *rep,
    enum cs_err *e)
{
	bool ok = false;
	*e = gate != NULL ? gate(req, rep, &ok) : CS_ECONFIG;
	if (*e == CS_OK && !ok && rep->status == 0)
		*e = CS_EPERM;              /* a refusal without an answer: a gate bug */
	return *e == CS_OK && ok;
}

/* The audit's name for whom the gate let through (struct http_auth's actor):
 * a person by their subject, "admin:<subject>" on the admin pages (an admin
 * acting as one), the admin API's token by its name, the gateway by its id. */
static enum cs_err actor_set(struct http_request *req)
{
	struct http_auth *a = &req->auth;
	enum route_auth k = req->route->auth;
	if (a->session != NULL && a->session->subject != NULL)
		return str_fmt(a->actor, sizeof a->actor, "%s:%s",
		    k == ROUTE_AUTH_ADMIN_PAGE || k == ROUTE_AUTH_ADMIN_STEPUP ? "admin" : "user",
		    a->session->subject);
	if (a->admin != NULL)
		return str_fmt(a->actor, sizeof a->actor, "admin:%s", a->admin);
	if (a->gateway && req->app != NULL && req->app->cfg != NULL)
		return str_fmt(a->actor, sizeof a->actor, "gateway:%s", req->app->cfg->gateway_id);
	/* Else what the gate named ("client:<client_id>", token_api_gate), or "". */
	return CS_OK;
}

/* The answer when no route matches: 405 with Allow when the path is known
 * under another method, else 404. */
static enum cs_err no_route_reply(const struct route *table, const struct http_request *req,
    struct http_reply *rep, const char *allow, int path_known)
{
	enum route_kind k = router_kind_for_path(table, req->path);
	enum cs_err e;
	if (path_known) {
		e = reply_error(rep, k, 405, "invalid_request", "This method is not allowed here.");
		if (e == CS_OK)
			e = reply_header(rep, "Allow", allow);
	} else {
		e = reply_error(rep, k, 404, "not_found", "There is no such page.");
	}
	return e;
}

/* The route reads its parameters from the body (a form or JSON POST), not
 * from the query. */
static bool reads_body(const struct route *rt, enum http_method m)
{
	return m != HTTP_GET && (rt->flags & (ROUTE_FORM_BODY | ROUTE_JSON_BODY)) != 0;
}

/* A body-reading route given parameters in the URL as well: refused (a 400),
 * except on the OAuth endpoints. */
static bool url_params_refused(const struct route *rt, const struct http_request *req)
{
	return req->query[0] != '\0' && rt->kind != ROUTE_OAUTH;
}

/* The 415 words when a body route's request body has the wrong media type;
 * NULL when it is right or the route reads no body. */
static const char *body_type_refusal(const struct route *rt, const struct http_request *req,
    enum http_method m)
{
	if (!reads_body(rt, m))
		return NULL;
	if (url_params_refused(rt, req))
		return NULL;        /* refused as a 400 by params_parse */
	if (rt->flags & ROUTE_FORM_BODY)
		return content_type_is(req->content_type, "application/x-www-form-urlencoded") ?
		    NULL : "The body must be application/x-www-form-urlencoded.";
	return content_type_is(req->content_type, "application/json") ?
	    NULL : "The body must be application/json.";
}

/* Parameters: the query for GET; the body for form POSTs.  NULL, or why
 * they are malformed (a 400). */
static const char *params_parse(const struct route *rt, struct http_request *req,
    enum http_method m, struct form *raw)
{
	if (!reads_body(rt, m)) {
		if (form_parse_in(raw, req->arena, req->query, strlen(req->query)) != CS_OK)
			return "malformed query string";
	} else if (url_params_refused(rt, req)) {
		return "parameters are not accepted in the URL here";
	} else if (rt->flags & ROUTE_FORM_BODY) {
		if (form_parse_in(raw, req->arena, req->body ? req->body : "", req->body_len) != CS_OK)
			return "malformed form body";
	}
	return NULL;
}

/* SECURITY: the route's gate decides who may call it; the handler runs
 * only after it let the request through (a class without a gate fails
 * closed).  Then the caller's limit, then the grant the route takes: all
 * before the handler, so that a deferred request waits for a pool
 * thread only once all of them passed (http.c).  true: let through; false:
 * rep holds the refusal, or *e the failure. */
static bool caller_admitted(const struct route *rt, struct http_request *req,
    struct http_reply *rep, enum cs_err *e)
{
	if (rt->auth != ROUTE_AUTH_NONE) {
		http_gate gate = (unsigned)rt->auth < ROUTE_AUTH__MAX ? http_gates[rt->auth] : NULL;
		if (!gate_run(gate, req, rep, e) ||
		    !limit_ok(rt, req, rep, true, e))
			goto failed;
		if ((*e = actor_set(req)) != CS_OK)
			goto failed;
	}
	if ((rt->flags & ROUTE_GRANT) && !gate_run(http_grant_check, req, rep, e))
		goto failed;
	return true;
failed:
	if (*e != CS_OK)
		*e = failure_reply(rt, rep, *e);
	return false;
}

/* Everything before the handler.  true: the handler may run (rep untouched);
 * false: rep holds the answer, or *ep the failure finish() turns into one. */
static bool admit(const struct route *table, struct http_request *req, struct http_reply *rep,
    enum cs_err *ep)
{
	const struct route *rt;
	char allow[96] = "";
	char why[160];
	struct form raw;
	const char *bad = NULL, *refusal;
	enum http_method m = req->method == HTTP_HEAD ? HTTP_GET : req->method;
	enum cs_err e = CS_OK;
	int path_known = 0;
	bool go = false;

	form_init(&raw);
	rt = route_lookup(table, req, m, allow, sizeof allow, &path_known);
	if (rt == NULL) {
		e = no_route_reply(table, req, rep, allow, path_known);
		goto done;
	}

	if (!limit_ok(rt, req, rep, false, &e))
		goto done;

	/* SECURITY: a capture longer than any id or name is no page: 404 before
	 * any gate or handler (their buffers are sized for real ids). */
	if (!captures_fit(rt, req)) {
		e = reply_error(rep, rt->kind, 404, "not_found",
		    "There is no such page: a part of its address is too long to name anything here.");
		goto done;
	}

	if (rt->kind == ROUTE_BROWSER && m != HTTP_GET && !same_origin(req)) {
		e = reply_error(rep, rt->kind, 403, "invalid_request",
		    "This form was not sent from this site, so it was refused.");
		goto done;
	}

	if ((refusal = body_type_refusal(rt, req, m)) != NULL) {
		e = reply_error(rep, rt->kind, 415, "invalid_request", refusal);
		goto done;
	}
	bad = params_parse(rt, req, m, &raw);
	if (bad == NULL)
		bad = params_validate(rt, &raw, req, why, sizeof why);
	if (bad != NULL) {
		e = reply_error(rep, rt->kind, 400, "invalid_request", bad);
		goto done;
	}

	go = caller_admitted(rt, req, rep, &e);
done:
	raw_clear(&raw);
	*ep = e;
	return go;
}

bool router_admit(const struct route *table, struct http_request *req, struct http_reply *rep)
{
	enum cs_err e = CS_OK;
	if (admit(table, req, rep, &e))
		return true;
	finish(req->route, rep, e);
	return false;
}

void router_handle(struct http_request *req, struct http_reply *rep)
{
	const struct route *rt = req->route;
	enum cs_err e = rt != NULL ? rt->handler(req, rep) : CS_ECONFIG;
	if (rt != NULL)
		e = failure_reply(rt, rep, e);
	finish(rt, rep, e);
}

void router_dispatch(const struct route *table, struct http_request *req, struct http_reply *rep)
{
	if (router_admit(table, req, rep))
		router_handle(req, rep);
}
