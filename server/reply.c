/* reply.c -- what a handler answers with and reads its request through, below
 * the route table: building a struct http_reply (headers, JSON, an OAuth error,
 * an error page, the 429 of a rate limit), the typed parameters by index
 * (http_arg*), the method's name and the validators routes.c's table names.
 * It knows nothing of the route table, the router or any handler, so that the
 * router, routes.c and every handler can call it without a circle.  A header
 * value never carries CR or LF; a reply's secrets are wiped when it is cleared. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include "buf.h"
#include "form.h"
#include "http.h"
#include "rate_limits.h"
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

/* Whether p points into r's own header memory (else it is the heap's). */
static bool in_hmem(const struct http_reply *r, const char *p)
{
	uintptr_t a = (uintptr_t)p, lo = (uintptr_t)r->hmem;
	return a >= lo && a < lo + sizeof r->hmem;
}

/* A copy of s in r's header memory, or on the heap once that is full. */
static char *header_copy(struct http_reply *r, const char *s)
{
	size_t n = strlen(s) + 1;
	if (n > sizeof r->hmem - r->hmem_used)
		return strdup(s);
	char *p = r->hmem + r->hmem_used;
	memcpy(p, s, n);
	r->hmem_used += n;
	return p;
}

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
		if (!in_hmem(r, r->headers[i].name))
			free(r->headers[i].name);
		if (!in_hmem(r, r->headers[i].value)) {
			OPENSSL_cleanse(r->headers[i].value, strlen(r->headers[i].value));
			free(r->headers[i].value);
		}
	}
	r->nheaders = 0;
	/* A header may be a secret (Set-Cookie carries the session). */
	OPENSSL_cleanse(r->hmem, r->hmem_used);
	r->hmem_used = 0;
	if (r->stream.done != NULL && r->stream.ctx != NULL)
		r->stream.done(r->stream.ctx);
	memset(&r->stream, 0, sizeof r->stream);
}

enum cs_err reply_header(struct http_reply *r, const char *name, const char *value)
{
	/* SECURITY: no CR/LF may reach a header line (response splitting). */
	if (strpbrk(name, "\r\n:") || strpbrk(value, "\r\n"))
		return CS_EINVAL;
	if (r->nheaders == HTTP_MAX_HEADERS)
		return CS_ETOOBIG;
	char *n = header_copy(r, name), *v = n != NULL ? header_copy(r, value) : NULL;
	if (n == NULL || v == NULL) {
		if (n != NULL && !in_hmem(r, n))
			free(n);
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

/* Copies what fits of src into dst[n]: a log line may carry a shortened
 * description, never an overrun. */
static void log_copy(char *dst, size_t n, const char *src)
{
	size_t len = strlen(src);
	if (len >= n)
		len = n - 1;
	memcpy(dst, src, len);
	dst[len] = '\0';
}

void reply_log_error(struct http_reply *r, const char *code, const char *desc)
{
	log_copy(r->log.error, sizeof r->log.error, code ? code : "");
	log_copy(r->log.description, sizeof r->log.description, desc ? desc : "");
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

enum cs_err reply_oauth_pending(struct http_reply *r, int status, const char *code,
    const char *desc, const struct reply_pending *p)
{
	json_t *v = json_pack("{s:s, s:s}", "error", code, "error_description", desc);
	if (v == NULL)
		return CS_ENOMEM;
	reply_log_error(r, code, desc);
	if (p->id != NULL) {
		json_object_set_new(v, p->id_key, json_string(p->id));
		json_object_set_new(v, p->uri_key, json_string(p->uri));
		json_object_set_new(v, "expires_in", json_integer(p->expires_in));
		json_object_set_new(v, "interval", json_integer(p->interval));
	}
	return reply_json_value(r, status, v);
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
	case 414: return "Address too long";
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

const struct param_type param_printable[1] = { { .kind = PARAM_STRING, .valid = valid_printable } };
const struct param_type param_token68[1] = { { .kind = PARAM_STRING, .valid = valid_token68 } };
const struct param_type param_return_to[1] = { { .kind = PARAM_STRING, .valid = valid_return_to } };

/* --- typed parameters ---------------------------------------------------- */

const struct param_value *http_arg(const struct http_request *req, unsigned idx)
{
	if (req->route == NULL || idx >= ROUTE_MAX_PARAMS)
		return NULL;
	for (unsigned i = 0; i <= idx; i++)        /* a table ends at a NULL name */
		if (req->route->params[i].name == NULL)
			return NULL;
	const struct param_value *pv = &req->values[idx];
	return pv->str != NULL || pv->members != 0 ? pv : NULL;
}

const char *http_arg_str(const struct http_request *req, unsigned idx)
{
	const struct param_value *pv = http_arg(req, idx);
	return pv != NULL ? pv->str : NULL;
}

bool http_arg_int(const struct http_request *req, unsigned idx, int64_t *out)
{
	const struct param_value *pv = http_arg(req, idx);
	if (pv == NULL || pv->str == NULL)
		return false;
	*out = pv->num;
	return true;
}

uint64_t http_arg_family(const struct http_request *req, unsigned idx)
{
	const struct param_value *pv = http_arg(req, idx);
	return pv != NULL ? pv->members : 0;
}

/* --- the 429 of a rate limit --------------------------------------------- */

enum cs_err reply_limit_refusal(struct http_reply *rep, enum route_kind kind, enum limit_class k,
    int64_t retry_after)
{
	char secs[24], msg[240];
	enum cs_err e;
	if (retry_after < 1)
		retry_after = 1;
	if ((e = str_fmt(secs, sizeof secs, "%lld", (long long)retry_after)) != CS_OK)
		return e;
	if (kind == ROUTE_BROWSER) {
		e = str_fmt(msg, sizeof msg, "Too many requests came from your network in a short "
		    "time. Wait %lld second%s and try again.", (long long)retry_after,
		    retry_after == 1 ? "" : "s");
		if (e == CS_OK) {
			reply_log_error(rep, "too_many_requests", "rate limit: address");
			e = reply_html_error(rep, 429, "Too many requests", msg);
		}
	} else {
		/* No OAuth error code is registered for this (RFC 6749 section 5.2 lets
		 * extensions add some); the status and Retry-After say it to any client,
		 * too_many_requests names it as HTTP does (docs/reference.md, "Rate limits" under Configuration). */
		e = str_fmt(msg, sizeof msg, "rate limit exceeded: the %s limit ([limits] %s_rate) "
		    "refused this call; retry after %lld s", limit_class_name(k), limit_class_name(k),
		    (long long)retry_after);
		if (e == CS_OK)
			e = reply_oauth_error(rep, 429, "too_many_requests", msg);
	}
	return e == CS_OK ? reply_header(rep, "Retry-After", secs) : e;
}
