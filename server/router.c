/* router.c -- the pure half of the HTTP core: route matching, parameter
 * validation, same-origin checks, security headers and error replies.
 * Knows nothing of sockets; never lets a handler see an undeclared parameter. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include "app.h"
#include "http.h"
#include "template.h"

static const char *const method_names[HTTP_METHOD__MAX] = {
	[HTTP_GET] = "GET", [HTTP_HEAD] = "HEAD", [HTTP_POST] = "POST", [HTTP_PUT] = "PUT",
	[HTTP_DELETE] = "DELETE", [HTTP_PATCH] = "PATCH", [HTTP_OPTIONS] = "OPTIONS",
};

const char *http_method_name(enum http_method m)
{
	return (unsigned)m < HTTP_METHOD__MAX ? method_names[m] : "?";
}

/* --- replies ------------------------------------------------------------ */

void reply_init(struct http_reply *r)
{
	memset(r, 0, sizeof *r);
	buf_init(&r->body, REPLY_MAX_BODY);
	r->cache_max_age = -1;
}

void reply_clear(struct http_reply *r)
{
	if (r == NULL)
		return;
	buf_wipe_clear(&r->body);
	for (size_t i = 0; i < r->nheaders; i++) {
		free(r->headers[i].name);
		free(r->headers[i].value);
	}
	r->nheaders = 0;
	if (r->stream.done != NULL && r->stream.ctx != NULL)
		r->stream.done(r->stream.ctx);
	memset(&r->stream, 0, sizeof r->stream);
}

/* Empties a reply a handler may have half-filled, keeping nothing of it. */
static void reply_reset(struct http_reply *r)
{
	reply_clear(r);
	reply_init(r);
}

enum cs_err reply_header(struct http_reply *r, const char *name, const char *value)
{
	/* SECURITY: no CR/LF may reach a header line (response splitting). */
	if (strpbrk(name, "\r\n:") || strpbrk(value, "\r\n"))
		return CS_EINVAL;
	if (r->nheaders == HTTP_MAX_HEADERS)
		return CS_ETOOBIG;
	char *n = strdup(name), *v = strdup(value);
	if (n == NULL || v == NULL) {
		free(n);
		free(v);
		return CS_ENOMEM;
	}
	r->headers[r->nheaders].name = n;
	r->headers[r->nheaders].value = v;
	r->nheaders++;
	return CS_OK;
}

enum cs_err reply_json(struct http_reply *r, int status, const char *json)
{
	buf_reset(&r->body);
	r->status = status;
	r->content_type = "application/json";
	r->cache_max_age = -1;
	return buf_puts(&r->body, json);
}

enum cs_err reply_json_value(struct http_reply *r, int status, json_t *v)
{
	char *s;
	enum cs_err e;
	if (v == NULL)
		return CS_ENOMEM;
	s = json_dumps(v, JSON_COMPACT);
	json_decref(v);
	if (s == NULL)
		return CS_ENOMEM;
	e = reply_json(r, status, s);
	OPENSSL_cleanse(s, strlen(s));
	free(s);
	return e;
}

void reply_log_error(struct http_reply *r, const char *code, const char *desc)
{
	snprintf(r->log.error, sizeof r->log.error, "%s", code ? code : "");
	snprintf(r->log.description, sizeof r->log.description, "%s", desc ? desc : "");
}

enum cs_err reply_oauth_error(struct http_reply *r, int status, const char *code, const char *desc)
{
	enum cs_err e;
	reply_log_error(r, code, desc);
	buf_reset(&r->body);
	r->status = status;
	r->content_type = "application/json";
	r->cache_max_age = -1;
	if ((e = buf_puts(&r->body, "{\"error\":")) != CS_OK ||
	    (e = buf_json_str(&r->body, code)) != CS_OK)
		return e;
	if (desc && ((e = buf_puts(&r->body, ",\"error_description\":")) != CS_OK ||
	    (e = buf_json_str(&r->body, desc)) != CS_OK))
		return e;
	return buf_puts(&r->body, "}");
}

enum cs_err reply_html_error(struct http_reply *r, int status, const char *title, const char *message)
{
	enum cs_err e = CS_ENOMEM;
	json_t *ctx = json_pack("{s:s, s:s}", "title", title, "message", message);
	buf_reset(&r->body);
	r->status = status;
	r->content_type = "text/html; charset=utf-8";
	r->cache_max_age = -1;
	if (ctx != NULL)
		e = template_render("error.html", ctx, &r->body);
	json_decref(ctx);
	return e;
}

static const char *status_title(int status)
{
	switch (status) {
	case 400: return "Bad request";
	case 401: return "Not signed in";
	case 403: return "Not allowed";
	case 404: return "Not found";
	case 405: return "Method not allowed";
	case 413: return "Request too large";
	case 415: return "Unsupported content type";
	case 429: return "Too many requests";
	case 503: return "Not ready";
	default:  return status >= 500 ? "Something went wrong" : "Request refused";
	}
}

enum cs_err reply_error(struct http_reply *r, enum route_kind kind, int status, const char *code,
    const char *desc)
{
	if (kind == ROUTE_BROWSER) {
		reply_log_error(r, code, desc);
		return reply_html_error(r, status, status_title(status), desc ? desc : code);
	}
	return reply_oauth_error(r, status, code, desc);
}

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

enum cs_err router_security_headers(const struct app *app, struct http_reply *rep)
{
	enum cs_err e;
	char cc[64], csp[2048];
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
	snprintf(csp, sizeof csp, "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
	    "form-action 'self'%s; frame-ancestors 'none'; base-uri 'none'", fa.data ? fa.data : "");
	buf_clear(&fa);
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
		snprintf(cc, sizeof cc, "public, max-age=%d", rep->cache_max_age);
		if ((e = reply_header(rep, "Cache-Control", cc)) != CS_OK)
			return e;
	}
	if (app && app->cfg && app->cfg->public_url_is_https &&
	    (e = reply_header(rep, "Strict-Transport-Security", "max-age=31536000")) != CS_OK)
		return e;
	return CS_OK;
}

/* --- validators ---------------------------------------------------------- */

bool valid_printable(const char *v)
{
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

bool valid_token68(const char *v)
{
	if (*v == '\0')
		return false;
	for (const char *p = v; *p; p++) {
		char c = *p;
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '='))
			return false;
	}
	return true;
}

bool valid_return_to(const char *v)
{
	/* SECURITY: only a same-origin absolute path: "/x", never "//host", "/\host",
	 * a scheme, a backslash or a control character anywhere (no open redirect). */
	if (v[0] != '/' || v[1] == '/' || v[1] == '\\')
		return false;
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (*p < 0x20 || *p == 0x7f || *p == '\\')
			return false;
	return true;
}

/* --- matching ------------------------------------------------------------ */

void http_request_clear(struct http_request *req)
{
	for (size_t i = 0; i < req->ncaptures; i++) {
		free(req->captures[i]);
		req->captures[i] = NULL;
	}
	req->ncaptures = 0;
	form_clear(&req->params);
}

/* Matches path against pattern; on a match fills captures (decoded) and
 * returns 1.  A capture must be non-empty and must not decode to a '/'. */
static int route_match(const char *pattern, const char *path, struct http_request *req)
{
	const char *p = pattern, *s = path;
	size_t nc = 0;
	char *caps[ROUTE_MAX_CAPTURES] = { 0 };
	int ok = 0;
	if (*s != '/' || *p != '/')
		return 0;
	while (*p && *s) {
		if (*p == '{' && strncmp(p, "{rest*}", 7) == 0 && p[7] == '\0') {
			/* A trailing {rest*} takes the remaining path raw (undecoded): its
			 * handler normalises it once, itself (the proxy). */
			if (nc == ROUTE_MAX_CAPTURES || (caps[nc] = strdup(s)) == NULL)
				goto out;
			nc++;
			p += 7;
			s += strlen(s);
		} else if (*p == '{') {
			const char *pe = strchr(p, '}');
			const char *se = strchr(s, '/');
			size_t slen = se ? (size_t)(se - s) : strlen(s);
			if (pe == NULL || slen == 0 || nc == ROUTE_MAX_CAPTURES)
				goto out;
			if (pct_decode(s, slen, 0, &caps[nc], NULL) != CS_OK)
				goto out;
			if (strchr(caps[nc], '/') || caps[nc][0] == '\0') {
				nc++;
				goto out;
			}
			nc++;
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
out:
	if (ok) {
		for (size_t i = 0; i < nc; i++)
			req->captures[i] = caps[i];
		req->ncaptures = nc;
	} else {
		for (size_t i = 0; i < nc; i++)
			free(caps[i]);
	}
	return ok;
}

static int content_type_is(const char *ct, const char *want)
{
	size_t n = strlen(want);
	if (ct == NULL || strncasecmp(ct, want, n) != 0)
		return 0;
	return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ';
}

static const struct param_spec *spec_find(const struct route *rt, const char *name)
{
	for (const struct param_spec *ps = rt->params; ps->name; ps++)
		if (strcmp(ps->name, name) == 0)
			return ps;
	return NULL;
}

/* Validates raw parameters against the route's declaration, moving the
 * accepted ones into req->params.  Returns NULL or a static reason. */
static const char *params_validate(const struct route *rt, struct form *raw, struct http_request *req,
    char *why, size_t whylen)
{
	int tolerate_unknown = (rt->kind == ROUTE_OAUTH || rt->kind == ROUTE_PUBLIC);
	form_init(&req->params);
	/* Check everything before moving anything: form_count() reads every
	 * name in raw, and a moved entry's name is NULL. */
	for (size_t i = 0; i < raw->n; i++) {
		const struct param_spec *ps = spec_find(rt, raw->p[i].name);
		if (ps == NULL) {
			if (tolerate_unknown)
				continue;     /* RFC 6749 §3.2: unknown parameters are ignored */
			return "unknown parameter";
		}
		if (form_count(raw, ps->name) > 1) {
			snprintf(why, whylen, "parameter %s is repeated", ps->name);
			return why;
		}
		if (raw->p[i].value_len > ps->max_len) {
			snprintf(why, whylen, "parameter %s is too long", ps->name);
			return why;
		}
		if (ps->valid && !ps->valid(raw->p[i].value)) {
			snprintf(why, whylen, "parameter %s is malformed", ps->name);
			return why;
		}
	}
	for (size_t i = 0; i < raw->n; i++) {
		if (spec_find(rt, raw->p[i].name) == NULL)
			continue;
		req->params.p[req->params.n++] = raw->p[i];      /* moves ownership */
		raw->p[i].name = NULL;
		raw->p[i].value = NULL;
		raw->p[i].value_len = 0;
	}
	for (const struct param_spec *ps = rt->params; ps->name; ps++) {
		if ((ps->flags & PARAM_REQUIRED) && form_get(&req->params, ps->name) == NULL) {
			snprintf(why, whylen, "parameter %s is missing", ps->name);
			return why;
		}
	}
	return NULL;
}

/* Frees what params_validate left in raw (moved entries are NULL, which
 * form_clear skips); it wipes the values: a refused one may be a secret. */
static void raw_clear(struct form *raw)
{
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

void router_dispatch(const struct route *table, struct http_request *req, struct http_reply *rep)
{
	const struct route *rt = NULL;
	char allow[96] = "";
	char why[160];
	struct form raw;
	const char *bad = NULL;
	enum http_method m = req->method == HTTP_HEAD ? HTTP_GET : req->method;
	enum cs_err e;
	int path_known = 0;

	form_init(&raw);
	for (const struct route *r = table; r->pattern; r++) {
		struct http_request probe = { 0 };
		if (!route_match(r->pattern, req->path, &probe))
			continue;
		path_known = 1;
		if (r->method == m && rt == NULL) {
			http_request_clear(req);
			for (size_t i = 0; i < probe.ncaptures; i++)
				req->captures[i] = probe.captures[i];
			req->ncaptures = probe.ncaptures;
			rt = r;
		} else {
			http_request_clear(&probe);
		}
		if (strstr(allow, http_method_name(r->method)) == NULL) {
			if (allow[0])
				strncat(allow, ", ", sizeof allow - strlen(allow) - 1);
			strncat(allow, http_method_name(r->method), sizeof allow - strlen(allow) - 1);
			if (r->method == HTTP_GET)
				strncat(allow, ", HEAD", sizeof allow - strlen(allow) - 1);
		}
	}
	if (rt == NULL) {
		enum route_kind k = strncmp(req->path, "/admin/api/", 11) == 0 ? ROUTE_API :
		    (strncmp(req->path, "/.well-known/", 13) == 0 || strcmp(req->path, "/token") == 0 ||
		     strcmp(req->path, "/introspect") == 0 || strcmp(req->path, "/revoke") == 0)
		    ? ROUTE_OAUTH : ROUTE_BROWSER;
		if (path_known) {
			e = reply_error(rep, k, 405, "invalid_request", "This method is not allowed here.");
			if (e == CS_OK)
				e = reply_header(rep, "Allow", allow);
		} else {
			e = reply_error(rep, k, 404, "not_found", "There is no such page.");
		}
		goto done;
	}

	if (rt->kind == ROUTE_BROWSER && m != HTTP_GET && !same_origin(req)) {
		e = reply_error(rep, rt->kind, 403, "invalid_request",
		    "This form was not sent from this site, so it was refused.");
		goto done;
	}

	/* Parameters: the query for GET; the body for form POSTs. */
	if (m == HTTP_GET || !(rt->flags & (ROUTE_FORM_BODY | ROUTE_JSON_BODY))) {
		if (form_parse(&raw, req->query, strlen(req->query)) != CS_OK)
			bad = "malformed query string";
	} else {
		if (req->query[0] != '\0' && rt->kind != ROUTE_OAUTH) {
			bad = "parameters are not accepted in the URL here";
		} else if (rt->flags & ROUTE_FORM_BODY) {
			if (!content_type_is(req->content_type, "application/x-www-form-urlencoded")) {
				e = reply_error(rep, rt->kind, 415, "invalid_request",
				    "The body must be application/x-www-form-urlencoded.");
				goto done;
			}
			if (form_parse(&raw, req->body ? req->body : "", req->body_len) != CS_OK)
				bad = "malformed form body";
		} else if (!content_type_is(req->content_type, "application/json")) {
			e = reply_error(rep, rt->kind, 415, "invalid_request",
			    "The body must be application/json.");
			goto done;
		}
	}
	if (bad == NULL)
		bad = params_validate(rt, &raw, req, why, sizeof why);
	if (bad != NULL) {
		e = reply_error(rep, rt->kind, 400, "invalid_request", bad);
		goto done;
	}

	e = rt->handler(req, rep);
	if (e != CS_OK || rep->status == 0) {
		reply_reset(rep);
		e = reply_error(rep, rt->kind, 500, "server_error",
		    "The server could not complete this request.");
	}
done:
	rep->log.route = rt != NULL ? rt->pattern : NULL;
	raw_clear(&raw);
	if (e != CS_OK) {          /* last resort: a fixed reply that cannot fail */
		reply_reset(rep);
		rep->log.route = rt != NULL ? rt->pattern : NULL;
		reply_log_error(rep, "server_error", NULL);
		rep->status = 500;
		rep->content_type = "text/plain; charset=utf-8";
		if (buf_puts(&rep->body, "internal error\n") != CS_OK)
			rep->body.len = 0;
	}
}
