/* proxy.c -- proxy mode (ARCHITECTURE.md flow H): consentd calls the resource
 * for the gateway with the provider token, for a configured route only.  It
 * must never forward the gateway's raw path, credentials or cookies, send a
 * byte upstream before route, scope, consent and approval are checked, or put
 * a token or body in the audit log. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "app.h"
#include "approval.h"
#include "jcs.h"
#include "audit.h"
#include "audit_head.h"
#include "buf.h"
#include "consent.h"
#include "form.h"
#include "grant.h"
#include "httpc.h"
#include "dpop.h"
#include "proxy.h"
#include "store.h"
#include "token.h"
#include "vault.h"
#include "log.h"

#define PROXY_CONNECT_TIMEOUT 5L
#define PROXY_TIMEOUT        30L
#define PROXY_MAX_GRANT      16384
#define PROXY_MAX_REPLY_HEADERS 6
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

enum cs_err proxy_params_build(const struct proxy_match *m, const char *query,
    const char *content_type, const char *body, size_t body_len, json_t **out, int *status,
    char *why, size_t whylen)
{
	enum cs_err e = CS_ENOMEM;
	json_t *v = NULL, *path = NULL, *q = NULL, *b = NULL;
	struct form f;

	form_init(&f);
	*status = 500;
	if ((v = json_object()) == NULL || (path = json_object()) == NULL ||
	    (q = json_object()) == NULL)
		goto out;
	for (size_t i = 0; i < m->n; i++) {
		json_t *s = json_string(m->value[i]);
		if (s == NULL || json_object_set_new(path, m->name[i], s) != 0) {
			*status = 400;
			snprintf(why, whylen, "a path value is not valid UTF-8");
			e = CS_EINVAL;
			goto out;
		}
	}
	if (query != NULL && query[0] != '\0') {
		enum cs_err fe = form_parse(&f, query, strlen(query));
		if (fe != CS_OK) {
			*status = 400;
			snprintf(why, whylen, fe == CS_ETOOBIG ? "too many query parameters" :
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
	}
	if (body == NULL || body_len == 0) {
		b = json_null();
	} else {
		json_error_t je;
		if (body_len > PROXY_MAX_BODY) {
			*status = 413;
			snprintf(why, whylen, "the body is too large");
			e = CS_ETOOBIG;
			goto out;
		}
		if (!content_type_json(content_type)) {
			*status = 415;
			snprintf(why, whylen, "the body must be application/json");
			e = CS_EINVAL;
			goto out;
		}
		/* SECURITY: I-JSON (RFC 7493): what the person approves is exactly
		 * what is forwarded, so no parser may read it differently. */
		b = json_loadb(body, body_len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
		if (b == NULL) {
			*status = 400;
			snprintf(why, whylen, "the body is not JSON or repeats a member name");
			e = CS_EINVAL;
			goto out;
		}
		if (jcs_ijson_check(b, why, whylen) != CS_OK) {
			*status = 400;
			e = CS_EINVAL;
			goto out;
		}
	}
	if (json_object_set(v, "path", path) != 0 || json_object_set(v, "query", q) != 0 ||
	    json_object_set(v, "body", b) != 0)
		goto out;
	*out = v;
	v = NULL;
	*status = 200;
	e = CS_OK;
out:
	form_clear(&f);
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

/* --- counters ------------------------------------------------------------ */

#define PROXY_COUNTERS 512
/* reason NULL: forwarded (status = the upstream's, 504/502 for none); else refused
 * by consentd (status = consentd's answer; action NULL when no route matched). */
struct counter {
	const char *resource;
	const struct config_action *action;
	const char *reason;
	int status;
	unsigned long n;
};
static struct counter counters[PROXY_COUNTERS];
static pthread_mutex_t counters_mu = PTHREAD_MUTEX_INITIALIZER;

/* The configuration's strings and actions live as long as the process: their
 * addresses are the key.  A full table stops counting new keys rather than grow. */
static void count_key(const char *resource, const struct config_action *a, const char *reason,
    int status)
{
	if (resource == NULL)
		return;
	pthread_mutex_lock(&counters_mu);
	for (size_t i = 0; i < PROXY_COUNTERS; i++) {
		struct counter *k = &counters[i];
		if (k->resource == NULL) {
			k->resource = resource;
			k->action = a;
			k->reason = reason;
			k->status = status;
		} else if (k->resource != resource || k->action != a || k->reason != reason ||
		    k->status != status) {
			continue;
		}
		k->n++;
		break;
	}
	pthread_mutex_unlock(&counters_mu);
}

static void count(const struct config_action *a, int status)
{
	count_key(a->resource, a, NULL, status);
}

static void count_refused(const struct config_resource *r, const struct config_action *a,
    const char *reason, int status)
{
	count_key(r ? r->id : NULL, a, reason, status);
}

unsigned long proxy_count(const char *resource, const char *action)
{
	unsigned long n = 0;
	pthread_mutex_lock(&counters_mu);
	for (size_t i = 0; i < PROXY_COUNTERS && counters[i].resource != NULL; i++)
		if (counters[i].reason == NULL && counters[i].action != NULL &&
		    strcmp(counters[i].resource, resource) == 0 &&
		    strcmp(counters[i].action->name, action) == 0)
			n += counters[i].n;
	pthread_mutex_unlock(&counters_mu);
	return n;
}

/* A Prometheus label value: backslash, quote and newline escaped. */
static enum cs_err label(struct buf *b, const char *v)
{
	enum cs_err e = CS_OK;
	for (; *v && e == CS_OK; v++) {
		if (*v == '\\' || *v == '"')
			e = buf_printf(b, "\\%c", *v);
		else if (*v == '\n')
			e = buf_puts(b, "\\n");
		else
			e = buf_append(b, v, 1);
	}
	return e;
}

static enum cs_err metric_lines(struct buf *b, bool refused)
{
	enum cs_err e = CS_OK;
	for (size_t i = 0; e == CS_OK && i < PROXY_COUNTERS && counters[i].resource != NULL; i++) {
		const struct counter *k = &counters[i];
		if ((k->reason != NULL) != refused)
			continue;
		if ((e = buf_printf(b, "consentd_proxy_%s_total{resource=\"",
		    refused ? "refused" : "requests")) != CS_OK ||
		    (e = label(b, k->resource)) != CS_OK ||
		    (e = buf_puts(b, "\",action=\"")) != CS_OK ||
		    (e = label(b, k->action ? k->action->name : "")) != CS_OK)
			break;
		if (refused && ((e = buf_puts(b, "\",reason=\"")) != CS_OK ||
		    (e = label(b, k->reason)) != CS_OK))
			break;
		e = buf_printf(b, "\",status=\"%d\"} %lu\n", k->status, k->n);
	}
	return e;
}

enum cs_err proxy_metrics(const struct http_request *req, struct http_reply *rep)
{
	enum cs_err e;
	(void)req;
	/* The counts name resources and actions: for the gateway (or its scraper),
	 * which routes.c's ROUTE_AUTH_GATEWAY lets through alone. */
	buf_reset(&rep->body);
	e = buf_puts(&rep->body, "# HELP consentd_proxy_requests_total Proxied calls forwarded "
	    "upstream, by resource, action and the upstream's status (504: no answer in time, "
	    "502: none).\n# TYPE consentd_proxy_requests_total counter\n");
	pthread_mutex_lock(&counters_mu);
	if (e == CS_OK)
		e = metric_lines(&rep->body, false);
	if (e == CS_OK)
		e = buf_puts(&rep->body, "# HELP consentd_proxy_refused_total Proxied calls with a "
		    "valid grant that consentd refused before the upstream, by resource, action (empty: "
		    "no route), reason and consentd's status.\n"
		    "# TYPE consentd_proxy_refused_total counter\n");
	if (e == CS_OK)
		e = metric_lines(&rep->body, true);
	pthread_mutex_unlock(&counters_mu);
	if (e == CS_OK)
		e = audit_head_metrics(&rep->body);
	if (e != CS_OK)
		return e;
	rep->status = 200;
	rep->content_type = "text/plain; version=0.0.4; charset=utf-8";
	return CS_OK;
}

/* --- the handler --------------------------------------------------------- */

static enum cs_err paudit(struct store_conn *c, const char *actor, const struct consent *k,
    const char *what, const char *outcome, const char *detail, const char *approval_id,
    int64_t now)
{
	struct audit_entry a;
	enum cs_err e;
	memset(&a, 0, sizeof a);
	a.ts = now;
	a.actor = actor;
	a.action = what;
	a.subject = k ? k->subject : NULL;
	a.agent = k ? k->agent : NULL;
	a.resource = k ? k->resource : NULL;
	a.consent_id = k ? k->id : NULL;
	a.request_id = approval_id;
	a.outcome = outcome;
	a.detail = detail;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if ((e = audit_append(c, &a)) != CS_OK || (e = store_commit(c)) != CS_OK)
		store_rollback(c);
	return e;
}

static enum cs_err invalid_token(struct http_reply *rep, const char *desc)
{
	enum cs_err e = reply_oauth_error(rep, 401, "invalid_token", desc);
	if (e == CS_OK)
		e = reply_header(rep, "WWW-Authenticate", "Bearer error=\"invalid_token\"");
	return e;
}

/* The error each outcome answers, as the refusal reason in /metrics. */
static const char *const approval_reasons[APPROVAL_OUTCOME__MAX] = {
	[APPROVAL_NEEDED] = "approval_required", [APPROVAL_PENDING] = "authorization_pending",
	[APPROVAL_SLOW_DOWN] = "slow_down", [APPROVAL_DENIED] = "access_denied",
	[APPROVAL_EXPIRED] = "expired_token", [APPROVAL_TOO_MANY] = "too_many_pending_requests",
};

/* SECURITY: an allowlist -- Authorization, Cookie, Consentd-Grant and the
 * hop-by-hop headers are never among them. */
static const char *const fwd_request[] = { "Accept", "If-None-Match", "If-Match",
	"If-Modified-Since", "If-Unmodified-Since", NULL };
static const char *const fwd_response[] = { "Content-Type", "ETag", "Link", "Location",
	"Last-Modified", "Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining",
	"X-RateLimit-Reset", NULL };

static bool in_list(const char *const *l, const char *name)
{
	for (size_t i = 0; l[i]; i++)
		if (strcasecmp(l[i], name) == 0)
			return true;
	return false;
}

#define PROXY_MAX_HEADER_VALUE 4096

/* One upstream call with token; lines[] is filled here and wiped after. */
static enum cs_err forward(const struct http_request *req, const char *url, const char *token,
    const char *body, size_t body_len, struct httpc_reply *res, struct httpc_stream **st)
{
	const char *lines[16] = { 0 };
	char *own[16] = { 0 };
	size_t n = 0;
	struct buf line;
	enum cs_err e = CS_OK;
	const char *method = http_method_name(req->method);

	buf_init(&line, PROXY_MAX_GRANT + 64);
	if ((e = buf_printf(&line, "Authorization: Bearer %s", token)) != CS_OK)
		goto out;
	if ((own[n] = buf_steal(&line)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	lines[n] = own[n];
	n++;
	for (size_t i = 0; fwd_request[i] && req->header; i++) {
		const char *v = req->header(req->hctx, fwd_request[i]);
		if (v == NULL || strlen(v) > PROXY_MAX_HEADER_VALUE)   /* CR/LF: refused earlier */
			continue;
		buf_init(&line, PROXY_MAX_HEADER_VALUE + 64);
		if ((e = buf_printf(&line, "%s: %s", fwd_request[i], v)) != CS_OK)
			goto out;
		if ((own[n] = buf_steal(&line)) == NULL) {
			e = CS_ENOMEM;
			goto out;
		}
		lines[n] = own[n];
		n++;
	}
	if (body != NULL) {
		lines[n++] = "Content-Type: application/json";
	}
	{
		struct httpc_request rq = { method, url, lines, body, body_len, PROXY_MAX_BODY,
			PROXY_CONNECT_TIMEOUT, PROXY_TIMEOUT };
		e = httpc_stream_open(&rq, res, st);
	}
out:
	buf_wipe_clear(&line);
	for (size_t i = 0; i < 16; i++)
		if (own[i] != NULL) {
			OPENSSL_cleanse(own[i], strlen(own[i]));
			free(own[i]);
		}
	return e;
}

/* The upstream body, streamed to the gateway as it arrives (http.c, reply_stream). */
static enum cs_err upstream_read(void *ctx, char *dst, size_t max, size_t *got)
{
	enum cs_err e = httpc_stream_read(ctx, dst, max, got);
	if (e != CS_OK)
		log_msg(LOG_WARN, "proxy: the upstream answer was cut: %s",
		    e == CS_EBUSY ? "timeout" : e == CS_ETOOBIG ? "larger than the cap" :
		    "transport error");
	return e;
}

static void upstream_done(void *ctx)
{
	httpc_stream_close(ctx);
}

enum cs_err proxy_handle(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	struct store_conn *c = store_conn(app->store);
	struct consent k;
	struct proxy_path path = { .n = 0 };
	struct proxy_match m = { .n = 0 };
	struct scope_set gs = { .n = 0 };
	struct approval_answer aa;
	struct vault_release tok;
	struct httpc_reply up;
	struct httpc_stream *st = NULL;
	struct buf canon;
	json_t *claims = NULL, *params = NULL;
	char actor[300], why[160], detail[600], digest[APPROVAL_DIGEST_LEN + 1] = "";
	char *url = NULL, *fbody = NULL;
	size_t fbody_len = 0;
	const char *grant, *method = http_method_name(req->method);
	int status;
	enum cs_err e;

	memset(&k, 0, sizeof k);
	memset(&aa, 0, sizeof aa);
	memset(&tok, 0, sizeof tok);
	httpc_reply_init(&up);
	buf_init(&canon, 2 * PROXY_MAX_BODY + APPROVAL_MAX_CANONICAL);
	if (c == NULL)
		return CS_EDB;
	if (req->ncaptures != 2) {
		e = reply_oauth_error(rep, 403, "access_denied", "no such route");
		goto out;
	}
	snprintf(actor, sizeof actor, "gateway:%s", cfg->gateway_id);
	/* SECURITY: a CR or LF inside a header we read or forward is a smuggling
	 * attempt: the whole request is refused, before anything goes upstream. */
	for (size_t i = 0; req->header && fwd_request[i]; i++) {
		const char *hv = req->header(req->hctx, fwd_request[i]);
		if (hv != NULL && strpbrk(hv, "\r\n") != NULL) {
			e = reply_oauth_error(rep, 400, "invalid_request", "a header value holds CR or LF");
			goto out;
		}
	}
	grant = req->header ? req->header(req->hctx, "Consentd-Grant") : NULL;
	if (grant != NULL && strpbrk(grant, "\r\n") != NULL) {
		e = reply_oauth_error(rep, 400, "invalid_request", "a header value holds CR or LF");
		goto out;
	}
	if (grant == NULL || grant[0] == '\0' || strlen(grant) > PROXY_MAX_GRANT) {
		e = invalid_token(rep, "a grant is required in Consentd-Grant");
		goto out;
	}
	{
		const struct keyring *kr = app_keys_get(app);
		const char *gwhy = NULL;
		e = grant_validate(c, cfg, kr, grant, req->now, &claims, &k, &gwhy);
		app_keys_put(app);
		if (e == CS_EPERM) {
			e = invalid_token(rep, gwhy != NULL ? gwhy : "not a consentd grant");
			goto out;
		}
	}
	if (e != CS_OK)
		goto out;
	{
		const struct config_resource *lr = config_resource(cfg, k.resource);
		const struct config_agent *la = config_agent(cfg, k.agent);
		rep->log.resource = lr != NULL ? lr->id : NULL;
		rep->log.agent = la != NULL ? la->id : NULL;
	}
	/* SECURITY: a DPoP-bound grant is refused without a proof by its key for
	 * this method, URL and grant (RFC 9449 §7). */
	if (!dpop_check_grant(req, rep, claims, grant, 401)) {
		e = CS_OK;
		goto out;
	}
	/* SECURITY: a grant reaches only its own resource. */
	if (strcmp(k.resource, req->captures[0]) != 0) {
		e = reply_oauth_error(rep, 403, "access_denied", "the grant is for another resource");
		goto out;
	}
	const struct config_resource *r = config_resource(cfg, k.resource);
	/* SECURITY: default deny, before any byte goes upstream. */
	if (r == NULL || r->base_url == NULL ||
	    proxy_path_normalise(req->captures[1], &path) != CS_OK ||
	    proxy_route_match(cfg, k.resource, method, &path, &m) != CS_OK) {
		snprintf(detail, sizeof detail, "method=%s; no such route", method);
		if ((e = paudit(c, actor, &k, "proxy.refused", "refused", detail, NULL, req->now))
		    != CS_OK)
			goto out;
		count_refused(r, NULL, "no_route", 403);
		e = reply_oauth_error(rep, 403, "access_denied", "no configured action of this resource "
		    "has a route for this method and path (default deny)");
		goto out;
	}
	const struct config_action *act = m.action;
	json_t *sc = json_object_get(claims, "scope");
	if (!json_is_string(sc) || scope_set_parse(json_string_value(sc), &gs) != CS_OK ||
	    !scope_set_has(&gs, act->scope)) {
		/* SECURITY: an action outside the grant is an escalation attempt. */
		snprintf(detail, sizeof detail, "action=%s; escalation attempt: scope outside the grant",
		    act->name);
		if ((e = paudit(c, actor, &k, "proxy.refused", "refused", detail, NULL, req->now))
		    != CS_OK)
			goto out;
		count_refused(r, act, "scope", 403);
		e = reply_oauth_error(rep, 403, "invalid_scope", "the action's scope is not in the grant");
		goto out;
	}
	/* SECURITY: a body on GET or HEAD would make libcurl send a POST, which is
	 * another action than the one matched and approved. */
	if ((req->method == HTTP_GET || req->method == HTTP_HEAD) && req->body_len > 0) {
		e = reply_oauth_error(rep, 400, "invalid_request", "a GET or HEAD request has no body");
		goto out;
	}
	if (proxy_params_build(&m, req->query, req->content_type, req->body, req->body_len, &params,
	    &status, why, sizeof why) != CS_OK) {
		e = status == 500 ? CS_ENOMEM : reply_oauth_error(rep, status, "invalid_request", why);
		goto out;
	}
	/* The body forwarded is the canonical form of the one parsed (and approved). */
	json_t *pb = json_object_get(params, "body");
	if (!json_is_null(pb)) {
		struct buf bb;
		buf_init(&bb, 2 * PROXY_MAX_BODY);
		if ((e = jcs_canonicalize(pb, &bb)) != CS_OK) {
			buf_clear(&bb);
			if (e == CS_ENOMEM)
				goto out;
			e = reply_oauth_error(rep, 400, "invalid_request", "the body is not I-JSON");
			goto out;
		}
		fbody_len = bb.len;
		fbody = buf_steal(&bb);
		if (fbody == NULL) {
			e = CS_ENOMEM;
			goto out;
		}
	}
	if (act->approval == APPROVAL_REQUIRED) {
		if ((e = jcs_canonicalize(params, &canon)) != CS_OK ||
		    (e = approval_digest(params, digest)) != CS_OK)
			goto out;
		e = approval_check(c, cfg, &k, act->name, canon.data, digest, actor, req->now, &aa);
		if (e == CS_EPERM) {
			count_refused(r, act, "consent_ended", 401);
			e = invalid_token(rep, "the grant's consent has ended");
			goto out;
		}
		if (e != CS_OK)
			goto out;
		if (aa.outcome != APPROVAL_RELEASE) {
			e = approval_answer_reply(rep, cfg, &aa, 403);
			if (aa.outcome > APPROVAL_RELEASE && aa.outcome < APPROVAL_OUTCOME__MAX)
				count_refused(r, act, approval_reasons[aa.outcome], rep->status);
			goto out;
		}
	}
	/* SECURITY: the approval is used up before the call, in the transaction of
	 * the release: single use even when the upstream call then fails. */
	e = aa.approval_id != NULL ?
	    vault_release_approved(app->vault, c, cfg, &k, act->name, aa.approval_id, actor,
	    req->now, &tok) : vault_release(app->vault, c, cfg, &k, act->name, actor, req->now, &tok);
	if (e == CS_ESTALE) {
		count_refused(r, act, "approval_used", 403);
		e = reply_oauth_error(rep, 403, "access_denied",
		    "this approval was already used or is no longer valid");
		goto out;
	} else if (e == CS_EPERM || e == CS_ENOENT) {
		e = invalid_token(rep, "the provider connection is gone: ask for consent again to "
		    "reconnect");
		goto out;
	} else if (e == CS_EIO) {
		e = reply_oauth_error(rep, 503, "temporarily_unavailable",
		    "the provider could not be reached to refresh the token");
		goto out;
	} else if (e != CS_OK) {
		goto out;
	}
	if ((e = proxy_url_build(r->base_url, act->route_path, &m, params, &url)) != CS_OK)
		goto out;
	e = forward(req, url, tok.access_token, fbody, fbody_len, &up, &st);
	if (e == CS_OK && up.status == 401) {
		/* One refresh and one retry: the provider may have revoked the token early
		 * (at most one forced refresh a minute per connection: else the 401
		 * goes back as it is). */
		vault_release_clear(&tok);
		enum cs_err e2 = vault_release_refreshed(app->vault, c, cfg, &k, act->name, actor,
		    req->now, &tok);
		if (e2 == CS_OK) {
			httpc_stream_close(st);
			st = NULL;
			httpc_reply_clear(&up);
			e = forward(req, url, tok.access_token, fbody, fbody_len, &up, &st);
		}
	}
	count(act, e == CS_OK ? (int)up.status : e == CS_EBUSY ? 504 : 502);
	snprintf(detail, sizeof detail, "action=%s; method=%s; route=%s; status=%ld; approval=%s",
	    act->name, method, act->route_path, e == CS_OK ? up.status : 0L,
	    aa.approval_id ? aa.approval_id : "-");
	{
		enum cs_err ea = paudit(c, actor, &k, "proxy.forwarded",
		    e == CS_OK ? "ok" : "failed", detail, aa.approval_id, req->now);
		if (ea != CS_OK) {
			e = ea;
			goto out;
		}
	}
	if (e == CS_EBUSY) {
		e = reply_oauth_error(rep, 504, "upstream_timeout", "the resource did not answer in time");
		goto out;
	}
	if (e == CS_ETOOBIG) {
		e = reply_oauth_error(rep, 502, "upstream_error", "the resource's answer is too large");
		goto out;
	}
	if (e == CS_EIO || e == CS_EINVAL) {
		e = reply_oauth_error(rep, 502, "upstream_unreachable", "the resource could not be reached");
		goto out;
	}
	if (e != CS_OK)
		goto out;
	if (up.status < 200 || up.status > 599) {
		e = reply_oauth_error(rep, 502, "upstream_error", "the resource's answer is not usable");
		goto out;
	}
	rep->status = (int)up.status;
	rep->content_type = NULL;
	/* At most PROXY_MAX_REPLY_HEADERS: the router adds its security headers after. */
	for (size_t i = 0, kept = 0; i < up.nheaders && kept < PROXY_MAX_REPLY_HEADERS; i++) {
		if (!in_list(fwd_response, up.headers[i].name))
			continue;
		kept++;
		if (reply_header(rep, up.headers[i].name, up.headers[i].value) != CS_OK)
			continue;     /* CR/LF or too many: dropped */
	}
	/* The body follows as it arrives, at most PROXY_MAX_BODY bytes (http.c
	 * drops it where the status or HEAD allows none). */
	rep->stream.ctx = st;
	rep->stream.read = upstream_read;
	rep->stream.done = upstream_done;
	st = NULL;
out:
	httpc_stream_close(st);
	json_decref(claims);
	json_decref(params);
	scope_set_clear(&gs);
	consent_clear(&k);
	approval_answer_clear(&aa);
	vault_release_clear(&tok);
	httpc_reply_clear(&up);
	proxy_match_clear(&m);
	proxy_path_clear(&path);
	buf_clear(&canon);
	free(url);
	free(fbody);
	return e;
}
