/* proxy_api.c -- proxy mode's handler (docs/architecture.md flow H): /proxy/{resource}/
 * {path...} for the gateway, the upstream call with the provider token, the
 * answer streamed back, and the proxy's counters for /metrics.  The decisions (route, scope, approval,
 * release) and their audit entries are proxy.c's.  It must never forward the
 * gateway's raw path, credentials or cookies, or send a byte upstream before
 * proxy_prepare said PROXY_READY. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "app.h"
#include "approval_api.h"
#include "buf.h"
#include "consent.h"
#include "grant.h"
#include "grant_api.h"
#include "health.h"
#include "httpc.h"
#include "log.h"
#include "metrics.h"
#include "proxy.h"
#include "proxy_api.h"
#include "vault_key.h"

#define PROXY_CONNECT_TIMEOUT 5L
#define PROXY_TIMEOUT        30L
#define PROXY_MAX_GRANT      16384
#define PROXY_MAX_REPLY_HEADERS 6
/* A URL (proxy.c's cap, under 64 KiB) with a percent-encoded key, its prefix and name. */
#define PROXY_MAX_URL_KEY    (128 * 1024)

/* --- counters ------------------------------------------------------------ */

/* The proxy's two families live in the registry (metrics.c), declared when
 * first needed.  Label values are the configuration's names and consentd's
 * own words, never a request's text. */
static struct metric_family *family(bool refused)
{
	if (refused)
		return metrics_family_get("consentd_proxy_refused_total", "Proxied calls with a "
		    "valid grant that consentd refused before the upstream, by resource, action (empty: "
		    "no route), reason and consentd's status.", METRIC_COUNTER,
		    (const char *[]){ "resource", "action", "reason", "status", NULL }, NULL, 0);
	return metrics_family_get("consentd_proxy_requests_total", "Proxied calls forwarded "
	    "upstream, by resource, action and the upstream's status (504: no answer in time, "
	    "502: none).", METRIC_COUNTER,
	    (const char *[]){ "resource", "action", "status", NULL }, NULL, 0);
}

/* reason NULL: forwarded (status = the upstream's, 504/502 for none); else refused
 * by consentd (status = consentd's answer; action NULL when no route matched). */
static void count_key(const char *resource, const struct config_action *a, const char *reason,
    int status)
{
	char st[16];
	const char *act = a != NULL ? a->name : "";
	if (resource == NULL || str_fmt(st, sizeof st, "%d", status) != CS_OK)
		return;
	if (reason == NULL)
		metrics_add(family(false), (const char *[]){ resource, act, st }, 1);
	else
		metrics_add(family(true), (const char *[]){ resource, act, reason, st }, 1);
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
	return (unsigned long)metrics_sum(family(false), (const char *[]){ resource, action, NULL });
}

enum cs_err proxy_metrics_declare(void)
{
	return family(false) != NULL && family(true) != NULL ? CS_OK : CS_ENOMEM;
}

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

/* Moves line's text into h (proxy_headers_clear frees it). */
static enum cs_err own_line(struct buf *line, struct proxy_headers *h)
{
	if (h->n >= PROXY_MAX_HEADER_LINES)
		return CS_ETOOBIG;
	if ((h->own[h->n] = buf_steal(line)) == NULL)
		return CS_ENOMEM;
	h->line[h->n] = h->own[h->n];
	h->n++;
	return CS_OK;
}

void proxy_headers_clear(struct proxy_headers *h)
{
	if (h == NULL)
		return;
	for (size_t i = 0; i < PROXY_MAX_HEADER_LINES; i++)
		if (h->own[i] != NULL) {
			OPENSSL_cleanse(h->own[i], strlen(h->own[i]));
			free(h->own[i]);
		}
	memset(h, 0, sizeof *h);
}

/* The upstream's header lines: cred (the credential's line, moved into
 * *out; NULL when the credential goes in the query), then the allowlisted
 * request headers, then the body's type. */
static enum cs_err headers_build(const struct http_request *req, struct buf *cred, bool body,
    struct proxy_headers *out)
{
	struct proxy_headers h;
	struct buf line;
	enum cs_err e = CS_OK;

	memset(&h, 0, sizeof h);
	buf_init(&line, PROXY_MAX_HEADER_VALUE + 64);
	if (cred != NULL && (e = own_line(cred, &h)) != CS_OK)
		goto out;
	for (size_t i = 0; fwd_request[i] && req->header; i++) {
		const char *v = req->header(req->hctx, fwd_request[i]);
		if (v == NULL || strlen(v) > PROXY_MAX_HEADER_VALUE)
			continue;
		if (strpbrk(v, "\r\n") != NULL) {   /* refused by http.c already */
			e = CS_EINVAL;
			goto out;
		}
		buf_init(&line, PROXY_MAX_HEADER_VALUE + 64);
		if ((e = buf_printf(&line, "%s: %s", fwd_request[i], v)) != CS_OK ||
		    (e = own_line(&line, &h)) != CS_OK)
			goto out;
	}
	if (body)
		h.line[h.n++] = "Content-Type: application/json";
	*out = h;
	memset(&h, 0, sizeof h);
out:
	buf_wipe_clear(&line);
	proxy_headers_clear(&h);
	return e;
}

enum cs_err proxy_api_upstream_headers(const struct http_request *req, const char *token, bool body,
    struct proxy_headers *out)
{
	struct buf line;
	enum cs_err e;
	buf_init(&line, PROXY_MAX_GRANT + 64);
	/* SECURITY: a CR or LF would smuggle another header (httpc refuses it too). */
	if (token == NULL || strpbrk(token, "\r\n") != NULL)
		e = CS_EINVAL;
	else if ((e = buf_printf(&line, "Authorization: Bearer %s", token)) == CS_OK)
		e = headers_build(req, &line, body, out);
	buf_wipe_clear(&line);
	return e;
}

enum cs_err proxy_api_key_apply(const struct config_resource *res, const char *key,
    const char *url, char **header_line, char **url_out)
{
	struct buf b;
	char *name = NULL, *val = NULL;
	const char *prefix;
	enum cs_err e = CS_EINVAL;
	if (res == NULL || res->credential != CREDENTIAL_API_KEY || url == NULL ||
	    header_line == NULL || url_out == NULL || !vault_key_valid(key))
		return CS_EINVAL;
	prefix = res->api_key_prefix != NULL ? res->api_key_prefix : "";
	buf_init(&b, PROXY_MAX_URL_KEY);
	*header_line = NULL;
	*url_out = NULL;
	if (res->api_key_header != NULL) {
		/* SECURITY: the key is visible ASCII (vault_key_valid): it cannot end
		 * the line.  Exactly one of header and query (config). */
		if ((e = buf_printf(&b, "%s: %s%s", res->api_key_header, prefix, key)) != CS_OK ||
		    (*url_out = strdup(url)) == NULL)
			goto out;
		if ((*header_line = buf_steal(&b)) == NULL)
			e = CS_ENOMEM;
		goto out;
	}
	if (res->api_key_query == NULL)
		goto out;
	/* The key percent-encoded: '&', '#' or '=' in it stay inside its value. */
	if ((e = buf_printf(&b, "%s%s", prefix, key)) != CS_OK ||
	    (e = pct_encode(b.data, &val)) != CS_OK || (e = pct_encode(res->api_key_query, &name))
	    != CS_OK)
		goto out;
	buf_wipe_clear(&b);
	buf_init(&b, PROXY_MAX_URL_KEY);
	if ((e = buf_printf(&b, "%s%c%s=%s", url, strchr(url, '?') != NULL ? '&' : '?', name,
	    val)) != CS_OK)
		goto out;
	if ((*url_out = buf_steal(&b)) == NULL)
		e = CS_ENOMEM;
out:
	if (e != CS_OK) {
		free(*url_out);
		*url_out = NULL;
	}
	if (val != NULL)
		OPENSSL_cleanse(val, strlen(val));
	free(val);
	free(name);
	buf_wipe_clear(&b);
	return e;
}

/* The header lines and URL of one call with an API key (proxy_api_key_apply);
 * *url is the caller's to wipe and free. */
static enum cs_err key_request(const struct http_request *req, const struct proxy_plan *p,
    struct proxy_headers *h, char **url)
{
	char *line = NULL;
	struct buf cred;
	enum cs_err e = proxy_api_key_apply(p->res, p->rel.tok.access_token, p->url, &line, url);
	if (e != CS_OK)
		return e;
	buf_init(&cred, PROXY_MAX_URL_KEY);
	if (line != NULL)
		e = buf_puts(&cred, line);
	if (e == CS_OK)
		e = headers_build(req, line != NULL ? &cred : NULL, p->body != NULL, h);
	if (line != NULL) {
		OPENSSL_cleanse(line, strlen(line));
		free(line);
	}
	buf_wipe_clear(&cred);
	return e;
}

/* One upstream call with p's token; the header lines are wiped after. */
static enum cs_err forward(const struct http_request *req, const struct proxy_plan *p,
    struct httpc_reply *res, struct httpc_stream **st)
{
	struct proxy_headers h;
	char *key_url = NULL;
	enum cs_err e;

	/* An API key goes in its configured header or query parameter. */
	if (p->res != NULL && p->res->credential == CREDENTIAL_API_KEY)
		e = key_request(req, p, &h, &key_url);
	else
		e = proxy_api_upstream_headers(req, p->rel.tok.access_token, p->body != NULL, &h);
	if (e != CS_OK)
		return e;
	{
		struct httpc_request rq = { http_method_name(req->method), key_url ? key_url : p->url,
			h.line, p->body, p->body_len, PROXY_MAX_BODY, PROXY_CONNECT_TIMEOUT, PROXY_TIMEOUT,
			false };
		e = httpc_stream_open(&rq, res, st);
	}
	proxy_headers_clear(&h);
	if (key_url != NULL) {
		OPENSSL_cleanse(key_url, strlen(key_url));
		free(key_url);
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

/* --- the handler --------------------------------------------------------- */

/* The error each outcome answers, as the refusal reason in /metrics. */
static const char *const approval_reasons[APPROVAL_OUTCOME__MAX] = {
	[APPROVAL_NEEDED] = "approval_required", [APPROVAL_PENDING] = "authorization_pending",
	[APPROVAL_SLOW_DOWN] = "slow_down", [APPROVAL_DENIED] = "access_denied",
	[APPROVAL_EXPIRED] = "expired_token", [APPROVAL_TOO_MANY] = "too_many_pending_requests",
};

/* The credential after an Authorization scheme of n letters ("DPoP", "Bearer"),
 * case-insensitive (RFC 9110 §11.1), and one or more spaces; NULL when v has
 * another scheme. */
static const char *after_scheme(const char *v, const char *scheme)
{
	size_t n = strlen(scheme);
	if (strncasecmp(v, scheme, n) != 0 || v[n] != ' ')
		return NULL;
	for (v += n; *v == ' '; v++)
		;
	return v;
}

enum proxy_grant_via proxy_api_grant_via(const char *authorization, const char *consentd_grant,
    const char **grant, const char **why)
{
	const char *in_auth = NULL;
	enum proxy_grant_via via = PROXY_GRANT_ABSENT;
	*why = NULL;
	/* SECURITY: a CR or LF inside a header we read is a smuggling attempt. */
	if ((consentd_grant != NULL && strpbrk(consentd_grant, "\r\n") != NULL) ||
	    (authorization != NULL && strpbrk(authorization, "\r\n") != NULL)) {
		*why = "a header value holds CR or LF";
		return PROXY_GRANT_MALFORMED;
	}
	if (authorization != NULL) {
		if ((in_auth = after_scheme(authorization, "DPoP")) != NULL)
			via = PROXY_GRANT_DPOP;
		else if ((in_auth = after_scheme(authorization, "Bearer")) != NULL)
			via = PROXY_GRANT_BEARER;
	}
	if (consentd_grant != NULL && consentd_grant[0] == '\0')
		consentd_grant = NULL;                /* an empty header: none */
	if (in_auth != NULL && consentd_grant != NULL) {
		*why = "the grant is given twice: present it in Authorization or in Consentd-Grant, "
		    "not both";
		return PROXY_GRANT_MALFORMED;
	}
	if (in_auth != NULL) {
		/* RFC 9110 §11.4 and RFC 9449 §7.1: the credential is one token68. */
		if (!valid_token68(in_auth)) {
			*why = via == PROXY_GRANT_DPOP ? "the Authorization header is not DPoP <grant>" :
			    "the Authorization header is not Bearer <grant>";
			return PROXY_GRANT_MALFORMED;
		}
		*grant = in_auth;
		return via;
	}
	if (consentd_grant != NULL) {
		*grant = consentd_grant;
		return PROXY_GRANT_HEADER;
	}
	return PROXY_GRANT_ABSENT;
}

/* Whether the gateway's own credentials are in Authorization (client_secret_basic):
 * then the grant can only be in Consentd-Grant. */
static bool authorization_is_basic(const struct http_request *req)
{
	return req->authorization != NULL && strncasecmp(req->authorization, "Basic ", 6) == 0;
}

enum cs_err proxy_api_grant_presented(const struct http_request *req, struct http_reply *rep,
    struct grant_api_presented *out, bool *ok)
{
	const char *grant = NULL, *why = NULL;
	enum proxy_grant_via via;
	*ok = false;
	if (req->ncaptures != 2)
		return reply_oauth_error(rep, 403, "access_denied", "no such route");
	/* SECURITY: a CR or LF inside a header we read or forward is a smuggling
	 * attempt: the whole request is refused, before anything goes upstream. */
	for (size_t i = 0; req->header && fwd_request[i]; i++) {
		const char *hv = req->header(req->hctx, fwd_request[i]);
		if (hv != NULL && strpbrk(hv, "\r\n") != NULL)
			return reply_oauth_error(rep, 400, "invalid_request", "a header value holds CR or LF");
	}
	via = proxy_api_grant_via(req->authorization,
	    req->header ? req->header(req->hctx, "Consentd-Grant") : NULL, &grant, &why);
	if (via == PROXY_GRANT_MALFORMED)
		return reply_oauth_error(rep, 400, "invalid_request", why);
	if (via == PROXY_GRANT_ABSENT || strlen(grant) > PROXY_MAX_GRANT) {
		/* A gateway that authenticates by Basic has only Consentd-Grant left;
		 * any other may use Authorization as RFC 9449 §7.1 and RFC 6750 say. */
		if (authorization_is_basic(req))
			return grant_api_invalid_token(rep, "a grant is required in Consentd-Grant",
			    GRANT_API_CHALLENGE_BEARER);
		return grant_api_invalid_token(rep, "a grant is required: Authorization: DPoP <grant> "
		    "(Bearer for a grant not bound to a DPoP key), or Consentd-Grant",
		    GRANT_API_CHALLENGE_BOTH);
	}
	*out = (struct grant_api_presented){ .grant = grant, .dialect = GRANT_API_AT_RESOURCE,
		.scheme = via == PROXY_GRANT_DPOP ? GRANT_API_DPOP :
		    via == PROXY_GRANT_BEARER ? GRANT_API_BEARER : GRANT_API_NO_SCHEME,
		.resource_id = req->captures[0] };
	*ok = true;
	return CS_OK;
}

/* A grant bound to a DPoP key is challenged with DPoP (RFC 9449 §7.1). */
static enum grant_api_challenge challenge_of(const struct grant_check *gc)
{
	return json_object_get(json_object_get(gc->claims, "cnf"), "jkt") != NULL ?
	    GRANT_API_CHALLENGE_DPOP : GRANT_API_CHALLENGE_BEARER;
}

/* The reply (and the refusal count) for a call that is not forwarded. */
static enum cs_err refusal_reply(struct http_reply *rep, const struct config *cfg,
    const struct proxy_plan *p, const struct grant_check *gc, int64_t now)
{
	const struct exchange_release *x = &p->rel;
	enum cs_err e;
	switch (p->outcome) {
	case PROXY_NO_ROUTE:
		count_refused(p->res, NULL, "no_route", 403);
		return reply_oauth_error(rep, 403, "access_denied", "no configured action of this "
		    "resource has a route for this method and path (default deny)");
	case PROXY_SCOPE:
		count_refused(p->res, p->act, "scope", 403);
		return reply_oauth_error(rep, 403, "invalid_scope", "the action's scope is not in the grant");
	case PROXY_BODY_ON_GET:
		return reply_oauth_error(rep, 400, "invalid_request", "a GET or HEAD request has no body");
	case PROXY_BAD_INPUT:
		return reply_oauth_error(rep, p->status, "invalid_request", p->why);
	case PROXY_NOT_IJSON:
		return reply_oauth_error(rep, 400, "invalid_request", "the body is not I-JSON");
	case PROXY_NO_SITE: {
		char why[512];
		count_refused(p->res, p->act, "no_site", 403);
		if (str_fmt(why, sizeof why, "the provider connection names no site to call (it was "
		    "made before consentd kept its sites): the person reconnects at %s/me",
		    cfg->public_url) != CS_OK)
			return CS_ETOOBIG;
		return reply_oauth_error(rep, 403, "access_denied", why);
	}
	default:
		break;
	}
	switch (x->outcome) {
	case EXCHANGE_CONSENT_ENDED:
		count_refused(p->res, p->act, "consent_ended", 401);
		return grant_api_invalid_token(rep, "the grant's consent has ended", challenge_of(gc));
	case EXCHANGE_APPROVAL:
		e = approval_answer_reply(rep, cfg, &x->approval, 403, now);
		if (x->approval.outcome > APPROVAL_RELEASE && x->approval.outcome < APPROVAL_OUTCOME__MAX &&
		    approval_reasons[x->approval.outcome] != NULL)
			count_refused(p->res, p->act, approval_reasons[x->approval.outcome], rep->status);
		return e;
	case EXCHANGE_APPROVAL_USED:
		count_refused(p->res, p->act, "approval_used", 403);
		return reply_oauth_error(rep, 403, "access_denied",
		    "this approval was already used or is no longer valid");
	case EXCHANGE_PROVIDER_DOWN:
		return reply_oauth_error(rep, 503, "temporarily_unavailable",
		    "the provider could not be reached to refresh the token");
	default:
		/* A connection that needs the person says why and where they go (health.h). */
		if (x->outcome == EXCHANGE_CONNECTION_GONE && x->why[0] != '\0')
			return grant_api_invalid_token(rep, x->why, challenge_of(gc));
		if (p->res != NULL && p->res->credential == CREDENTIAL_API_KEY) {
			char why[512];
			/* Where the person must go: the consent's own key page. */
			if (str_fmt(why, sizeof why, "no API key is stored for this consent: the person "
			    "enters it at %s/me/consents/%s/key", cfg->public_url, gc->k.id) != CS_OK)
				return CS_ETOOBIG;
			count_refused(p->res, p->act, "no_api_key", 403);
			return reply_oauth_error(rep, 403, "access_denied", why);
		}
		return grant_api_invalid_token(rep, "the provider connection is gone: ask for consent "
		    "again to reconnect", challenge_of(gc));
	}
}

/* The upstream's answer (or the lack of one) as the reply; the body follows
 * as it arrives (*st is handed to rep). */
static enum cs_err upstream_reply(struct http_reply *rep, enum cs_err e,
    const struct httpc_reply *up, struct httpc_stream **st)
{
	if (e == CS_EBUSY)
		return reply_oauth_error(rep, 504, "upstream_timeout", "the resource did not answer in time");
	if (e == CS_ETOOBIG)
		return reply_oauth_error(rep, 502, "upstream_error", "the resource's answer is too large");
	if (e == CS_EIO || e == CS_EINVAL)
		return reply_oauth_error(rep, 502, "upstream_unreachable", "the resource could not be reached");
	if (e != CS_OK)
		return e;
	if (up->status < 200 || up->status > 599)
		return reply_oauth_error(rep, 502, "upstream_error", "the resource's answer is not usable");
	rep->status = (int)up->status;
	rep->content_type = NULL;
	/* At most PROXY_MAX_REPLY_HEADERS: the router adds its security headers after. */
	for (size_t i = 0, kept = 0; i < up->nheaders && kept < PROXY_MAX_REPLY_HEADERS; i++) {
		if (!in_list(fwd_response, up->headers[i].name))
			continue;
		kept++;
		if (reply_header(rep, up->headers[i].name, up->headers[i].value) != CS_OK)
			continue;     /* CR/LF or too many: dropped */
	}
	/* The body follows as it arrives, at most PROXY_MAX_BODY bytes (http.c
	 * drops it where the status or HEAD allows none). */
	rep->stream.ctx = *st;
	rep->stream.read = upstream_read;
	rep->stream.done = upstream_done;
	*st = NULL;
	return CS_OK;
}

enum cs_err proxy_api_handle(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	struct store_conn *c = store_conn(app->store);
	/* The route's grant check (grant_api_gate) let it through: the grant is valid,
	 * its proof checked and for this resource. */
	const struct grant_check *gc = req->auth.grant;
	struct proxy_plan p;
	struct httpc_reply up;
	struct httpc_stream *st = NULL;
	char why[HEALTH_DESCRIPTION_MAX];
	enum cs_err e;

	memset(&p, 0, sizeof p);
	httpc_reply_init(&up);
	if (c == NULL)
		return CS_EDB;
	if (gc == NULL || !gc->valid || req->ncaptures != 2)
		return CS_EPERM;        /* cannot happen: the route table checks the grant first */
	struct proxy_call call = { .limits = app->limits, .vault = app->vault, .k = &gc->k, .claims = gc->claims,
		.rest = req->captures[1], .method = http_method_name(req->method),
		.bodyless = req->method == HTTP_GET || req->method == HTTP_HEAD,
		.in = { req->query, req->content_type, req->body, req->body_len },
		.actor = req->auth.actor, .now = req->now };
	if ((e = proxy_prepare(c, cfg, &call, &p)) != CS_OK)
		goto out;
	if (p.outcome != PROXY_READY) {
		e = refusal_reply(rep, cfg, &p, gc, req->now);
		goto out;
	}
	e = forward(req, &p, &up, &st);
	/* One refresh and one retry: the provider may have revoked the token early
	 * (at most one forced refresh a minute per connection: else the 401 goes
	 * back as it is). */
	if (e == CS_OK && up.status == 401 && proxy_refresh_token(c, cfg, &call, &p)) {
		httpc_stream_close(st);
		st = NULL;
		httpc_reply_clear(&up);
		e = forward(req, &p, &up, &st);
	} else if (e == CS_OK && up.status == 401 &&
	    health_describe_consent(c, cfg->public_url, gc->k.id, why, sizeof why) == CS_OK) {
		/* The refresh was refused as well: the connection now needs the
		 * person (revoked at the provider), and the gateway hears why and
		 * where they go, as on its next call. */
		count(p.act, 401);
		e = grant_api_invalid_token(rep, why, challenge_of(gc));
		goto out;
	}
	/* The forward entries were committed with the releases: the upstream's
	 * status goes to the counters and, as the reply's, to the access log. */
	count(p.act, e == CS_OK ? (int)up.status : e == CS_EBUSY ? 504 : 502);
	e = upstream_reply(rep, e, &up, &st);
out:
	httpc_stream_close(st);
	proxy_plan_clear(&p);
	httpc_reply_clear(&up);
	return e;
}
