/* mcp_api.c -- the MCP gateway's handler at public_url/mcp/NAME (issue #31):
 * the access token checked (a 401 that tells an MCP client where to sign
 * in, RFC 9728 §5.1), the message read (mcp_rpc.c), the decisions taken
 * (mcp_call.c), the person asked in the client's own form (mcp_gateway.c,
 * mcp_state.c), and the call forwarded upstream with the person's provider
 * credentials, its answer streamed back.  It must never forward the client's
 * token or cookies, nor send a byte upstream before mcp_call_prepare said
 * MCP_CALL_RELEASED. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "app.h"
#include "approval.h"
#include "authzen.h"
#include "buf.h"
#include "config.h"
#include "dpop_api.h"
#include "grant.h"
#include "httpc.h"
#include "log.h"
#include "mcp_api.h"
#include "mcp_call.h"
#include "mcp_gateway.h"
#include "mcp_rpc.h"
#include "mcp_session.h"
#include "mcp_state.h"
#include "mcp_stream.h"
#include "proxy_api.h"
#include "scope.h"
#include "vault.h"

#define MCP_CONNECT_TIMEOUT 5L
#define MCP_MAX_TOKEN 16384
#define MCP_HOLD_STEPS 10          /* a retry waits up to this many seconds for the person */
#define MCP_MAX_PARAM_HEADERS 8
/* The bytes one relayed upstream event stream may bring in its lifetime. */
#define MCP_RELAY_MAX_BYTES (16u * 1024 * 1024)
#define MCP_MAX_HEADER_LINES (12 + MCP_MAX_PARAM_HEADERS)
#define MCP_ERR_BUSY (-32005)      /* consentd's: too many pending requests for the person */
#define MCP_ERR_NO_SESSION (-32001) /* the SDKs' "Session not found" (with HTTP 404) */

/* SECURITY: the request headers an upstream MCP server gets besides the
 * credential: the protocol's own, never Authorization, Cookie or DPoP. */
static const char *const fwd_request[] = { "MCP-Protocol-Version", "Mcp-Session-Id",
	"Mcp-Method", "Mcp-Name", "Last-Event-ID", NULL };
static const char *const fwd_response[] = { "Content-Type", "Mcp-Session-Id",
	"MCP-Protocol-Version", "Retry-After", NULL };

/* --- the 401 -------------------------------------------------------------- */

/* The resource's scopes, space-separated, into out (RFC 6750 §3's scope). */
static enum cs_err scopes_of(const struct config *cfg, const char *resource, struct buf *out)
{
	enum cs_err e = CS_OK;
	for (size_t i = 0; i < cfg->nscopes && e == CS_OK; i++) {
		if (strcmp(cfg->scopes[i].resource, resource) != 0)
			continue;
		if (out->len > 0)
			e = buf_puts(out, " ");
		if (e == CS_OK)
			e = buf_puts(out, cfg->scopes[i].name);
	}
	return e;
}

/* The challenge (RFC 6750 §3 with RFC 9728 §5.1's resource_metadata).  Every
 * value is consentd's own: why is a fixed phrase, and config.c admits no '"'
 * or '\\' in public_url, section or scope names, so none needs escaping. */
static enum cs_err challenge(const struct config *cfg, const struct config_mcp_endpoint *ep,
    const char *error, const char *why, const char *scope, struct buf *out)
{
	struct buf all;
	enum cs_err e = CS_OK;
	buf_init(&all, 4096);
	if (scope == NULL && (e = scopes_of(cfg, ep->resource, &all)) == CS_OK && all.len > 0)
		scope = all.data;
	if (e == CS_OK && error != NULL)
		e = buf_printf(out, "Bearer error=\"%s\", error_description=\"%s\", ", error, why);
	else if (e == CS_OK)
		e = buf_puts(out, "Bearer ");
	if (e == CS_OK)
		e = buf_printf(out, "resource_metadata=\"%s/.well-known/oauth-protected-resource/mcp/%s\"",
		    cfg->public_url, ep->id);
	if (e == CS_OK && scope != NULL && scope[0] != '\0')
		e = buf_printf(out, ", scope=\"%s\"", scope);
	buf_clear(&all);
	return e;
}

/* A JSON-RPC error object body {jsonrpc, id, error:{code, message[, data]}}. */
static json_t *rpc_error(json_t *id, int code, const char *message, json_t *data)
{
	json_t *v = json_pack("{s:s, s:O?, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error",
	    "code", code, "message", message);
	if (v == NULL)
		json_decref(data);
	else if (data != NULL && json_object_set_new(json_object_get(v, "error"), "data", data) != 0) {
		json_decref(v);
		v = NULL;
	}
	if (v != NULL && id == NULL && json_object_set_new(v, "id", json_null()) != 0) {
		json_decref(v);
		v = NULL;
	}
	return v;
}

static enum cs_err reply_rpc_error(struct http_reply *rep, int status, json_t *id, int code,
    const char *message, json_t *data)
{
	json_t *v = rpc_error(id, code, message, data);
	reply_log_error(rep, "mcp_error", message);
	return v != NULL ? reply_json_value(rep, status, v) : CS_ENOMEM;
}

/* 401 or 403 with the challenge; a JSON-RPC error body (code -32001). */
static enum cs_err refuse_token(struct http_reply *rep, const struct config *cfg,
    const struct config_mcp_endpoint *ep, int status, const char *error, const char *why,
    const char *scope, json_t *id)
{
	struct buf www;
	enum cs_err e;
	buf_init(&www, 8192);
	e = challenge(cfg, ep, error, why, scope, &www);
	if (e == CS_OK)
		e = reply_rpc_error(rep, status, id, MCP_ERR_UNAUTHORIZED, why, NULL);
	if (e == CS_OK)
		e = reply_header(rep, "WWW-Authenticate", www.data);
	reply_log_error(rep, error != NULL ? error : "unauthorized", why);
	buf_clear(&www);
	return e;
}

/* The credential after "Bearer " or "DPoP " (case-insensitive); NULL otherwise. */
static const char *token_of(const char *authz, bool *dpop)
{
	const char *v = NULL;
	if (authz == NULL)
		return NULL;
	if (strncasecmp(authz, "Bearer ", 7) == 0) {
		v = authz + 7;
		*dpop = false;
	} else if (strncasecmp(authz, "DPoP ", 5) == 0) {
		v = authz + 5;
		*dpop = true;
	}
	while (v != NULL && *v == ' ')
		v++;
	return v;
}

static const char *hdr(const struct http_request *req, const char *name)
{
	return req->header != NULL ? req->header(req->hctx, name) : NULL;
}

/* --- one gateway request -------------------------------------------------- */

struct gw {
	const struct http_request *req;
	struct http_reply *rep;
	struct app *app;
	const struct config *cfg;
	const struct config_mcp_endpoint *ep;
	struct store_conn *c;
	const char *token;
	struct grant_check gc;
	struct scope_set token_scopes;
	char actor[300];
	struct mcp_msg msg;                   /* POST: the message */
	bool have_msg;
	/* The request's Mcp-Session-Id (2025-11-25) and its session, the
	 * person's own with this client here (mcp_session.h). */
	const char *sid;
	struct mcp_session sess;
	bool have_session;
};

static void gw_clear(struct gw *g)
{
	grant_check_clear(&g->gc);
	scope_set_clear(&g->token_scopes);
	mcp_msg_clear(&g->msg);
}

/* The token: present, consentd's, for this endpoint, its DPoP proof when it
 * is bound.  false: rep holds the refusal. */
static enum cs_err check_token(struct gw *g, bool *ok)
{
	const struct http_request *req = g->req;
	bool dpop = false;
	const char *t = token_of(req->authorization, &dpop);
	const char *jkt;
	enum cs_err e;
	*ok = false;
	if (req->authorization == NULL)
		return refuse_token(g->rep, g->cfg, g->ep, 401, NULL, "An access token is required: "
		    "sign in through the authorization server named by the protected resource "
		    "metadata.", NULL, NULL);
	if (t == NULL || t[0] == '\0' || strlen(t) > MCP_MAX_TOKEN || strpbrk(t, " \r\n") != NULL)
		return refuse_token(g->rep, g->cfg, g->ep, 401, "invalid_token", "the Authorization "
		    "header is not Bearer <token> or DPoP <token>", NULL, NULL);
	const struct keyring *kr = app_keys_get(g->app);
	e = grant_validate_mcp_token(g->c, g->cfg, kr, t, g->ep->uri, req->now, &g->gc);
	app_keys_put(g->app);
	if (e != CS_OK)
		return e;
	if (!g->gc.valid)
		return refuse_token(g->rep, g->cfg, g->ep, 401, "invalid_token",
		    g->gc.why != NULL ? g->gc.why : "not a consentd access token", NULL, NULL);
	/* SECURITY: a token bound to a key (RFC 9449) only with a proof by that
	 * key for this very request; an unbound one only as Bearer. */
	jkt = json_string_value(json_object_get(json_object_get(g->gc.claims, "cnf"), "jkt"));
	if (jkt != NULL && !dpop)
		return refuse_token(g->rep, g->cfg, g->ep, 401, "invalid_token", "this access token "
		    "is bound to a DPoP key: present it as DPoP <token> with a proof", NULL, NULL);
	if (jkt == NULL && dpop)
		return refuse_token(g->rep, g->cfg, g->ep, 401, "invalid_token", "this access token "
		    "is not bound to a DPoP key: present it as Bearer <token>", NULL, NULL);
	if (jkt != NULL && !dpop_api_check_grant(req, g->rep, g->gc.claims, t, 401))
		return CS_OK;
	if (scope_set_parse(json_string_value(json_object_get(g->gc.claims, "scope")),
	    &g->token_scopes) != CS_OK)
		return refuse_token(g->rep, g->cfg, g->ep, 401, "invalid_token", "not a consentd "
		    "access token", NULL, NULL);
	if ((e = str_fmt(g->actor, sizeof g->actor, "client:%s", g->gc.k.agent)) != CS_OK)
		return e;
	g->token = t;
	*ok = true;
	return CS_OK;
}

/* --- upstream ------------------------------------------------------------- */

struct up_headers {
	const char *line[MCP_MAX_HEADER_LINES + 1];
	char *own[MCP_MAX_HEADER_LINES];
	size_t n;
	char *url;                           /* the upstream URL with an API key in its
	                                        query (api_key_query); NULL: ep->upstream */
};

static void up_headers_clear(struct up_headers *h)
{
	for (size_t i = 0; i < h->n; i++) {
		OPENSSL_cleanse(h->own[i], strlen(h->own[i]));
		free(h->own[i]);
	}
	if (h->url != NULL) {
		OPENSSL_cleanse(h->url, strlen(h->url));
		free(h->url);
	}
	memset(h, 0, sizeof *h);
}

static enum cs_err up_line(struct up_headers *h, const char *name, const char *value)
{
	struct buf b;
	if (h->n >= MCP_MAX_HEADER_LINES)
		return CS_ETOOBIG;
	if (strpbrk(value, "\r\n") != NULL)
		return CS_EINVAL;
	buf_init(&b, 20000);
	enum cs_err e = buf_printf(&b, "%s: %s", name, value);
	if (e == CS_OK && (h->own[h->n] = buf_steal(&b)) == NULL)
		e = CS_ENOMEM;
	if (e == CS_OK) {
		h->line[h->n] = h->own[h->n];
		h->n++;
	}
	buf_wipe_clear(&b);
	return e;
}

/* The upstream's header lines: the provider's credential, the protocol's
 * headers as the client sent them, the content types. */
static enum cs_err up_headers_build(const struct gw *g, const char *provider_token, bool body,
    struct up_headers *h)
{
	enum cs_err e;
	memset(h, 0, sizeof *h);
	if (provider_token == NULL || strpbrk(provider_token, "\r\n ") != NULL)
		return CS_EINVAL;
	const struct config_resource *res = config_resource(g->cfg, g->ep->resource);
	if (res != NULL && res->credential == CREDENTIAL_API_KEY) {
		/* An API key goes where the resource says, as the proxy puts it
		 * (docs/providers.md "API keys"): a header, or the query. */
		char *key_line = NULL, *url = NULL;
		if ((e = proxy_api_key_apply(res, provider_token, g->ep->upstream, &key_line, &url))
		    != CS_OK)
			return e;
		h->url = url;
		if (key_line != NULL) {
			h->own[h->n] = key_line;
			h->line[h->n] = key_line;
			h->n++;
		}
	} else {
		struct buf b;
		buf_init(&b, 20000);
		e = buf_printf(&b, "Bearer %s", provider_token);
		if (e == CS_OK)
			e = up_line(h, "Authorization", b.data);
		buf_wipe_clear(&b);
	}
	if (e == CS_OK)
		e = up_line(h, "Accept", g->req->method == HTTP_GET ? "text/event-stream" :
		    "application/json, text/event-stream");
	if (e == CS_OK && body)
		e = up_line(h, "Content-Type", "application/json");
	for (size_t i = 0; e == CS_OK && fwd_request[i] != NULL; i++) {
		const char *v = hdr(g->req, fwd_request[i]);
		if (v != NULL && strlen(v) <= 4096)
			e = up_line(h, fwd_request[i], v);
	}
	/* MCP 2026-07-28: Mcp-Param-* headers mirror a tool's parameters for the
	 * upstream's routing; unknown ones are forwarded as they came (at most
	 * MCP_MAX_PARAM_HEADERS, each at most 4096 bytes; their values are the
	 * client's and were checked for CR/LF by the HTTP parser and up_line). */
	const char *name, *value;
	size_t params = 0;
	for (size_t i = 0; e == CS_OK && g->req->header_nth != NULL &&
	    g->req->header_nth(g->req->hctx, i, &name, &value); i++) {
		if (strncasecmp(name, "Mcp-Param-", 10) != 0 || strlen(value) > 4096)
			continue;
		if (++params > MCP_MAX_PARAM_HEADERS)
			break;
		e = up_line(h, name, value);
	}
	return e;
}

/* The upstream's answer streamed to the client (http.c, reply_stream). */
/* An upstream answer streamed back, and a tools/call's entry of it, put
 * (audit queue) once the body has gone: its bytes and how it ended. */
struct relay {
	struct httpc_stream *st;
	struct app *app;
	struct audit_queue_entry *answer;     /* NULL: not a tools/call */
	uint64_t bytes;
	bool ended, cut;
};

static enum cs_err upstream_read(void *ctx, char *dst, size_t max, size_t *got)
{
	struct relay *r = ctx;
	enum cs_err e = httpc_stream_read(r->st, dst, max, got);
	if (e != CS_OK) {
		r->cut = true;
		log_msg(LOG_WARN, "mcp: the upstream answer was cut: %s",
		    e == CS_EBUSY ? "timeout" : e == CS_ETOOBIG ? "larger than the cap" :
		    "transport error");
	} else if (*got == 0) {
		r->ended = true;
	} else {
		r->bytes += *got;
	}
	return e;
}

static void upstream_done(void *ctx)
{
	struct relay *r = ctx;
	httpc_stream_close(r->st);
	if (r->answer != NULL && mcp_call_answer_put(r->app->audit_queue, store_conn(r->app->store),
	    r->answer, r->bytes, r->ended ? "complete" : r->cut ? "upstream_cut" : "client_gone") !=
	    CS_OK)
		log_msg(LOG_ERROR, "mcp: the audit entry of an upstream answer could not be written");
	free(r);
}

static int64_t mono_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* A tools/call forwarded: its request and plan, for the entry of its answer. */
struct answer_of {
	const struct mcp_call_req *rq;
	const struct mcp_call_plan *p;
	int64_t t0;                            /* mono_ms() as the request went upstream */
};

/* The entry of an answer that is not relayed (a failure: failure NULL is a
 * status not passed back), put now. */
static void answer_failed(struct gw *g, const struct answer_of *ao, long status,
    const char *failure)
{
	struct audit_queue_entry *qe = NULL;
	if (ao == NULL)
		return;
	if (mcp_call_answer_new(ao->rq, ao->p, status, failure, mono_ms() - ao->t0, &qe) != CS_OK ||
	    mcp_call_answer_put(g->app->audit_queue, g->c, qe, 0, NULL) != CS_OK)
		log_msg(LOG_ERROR, "mcp: the audit entry of a failed upstream call could not be "
		    "written");
}

static const char *failure_word(enum cs_err e)
{
	return e == CS_OK ? NULL : e == CS_EBUSY ? "timeout" : e == CS_ETOOBIG ? "too_big" :
	    e == CS_EINVAL ? "not_sent" : "unreachable";
}

static bool in_list(const char *const *l, const char *name)
{
	for (size_t i = 0; l[i] != NULL; i++)
		if (strcasecmp(l[i], name) == 0)
			return true;
	return false;
}

static void copy_headers(struct http_reply *rep, const struct httpc_reply *up)
{
	for (size_t i = 0; i < up->nheaders; i++)
		if (in_list(fwd_response, up->headers[i].name) &&
		    reply_header(rep, up->headers[i].name, up->headers[i].value) != CS_OK)
			continue;     /* CR/LF or too many: dropped */
}

/* An upstream failure as a JSON-RPC error that says what failed. */
static enum cs_err upstream_failed(struct gw *g, enum cs_err e, long status)
{
	json_t *id = g->have_msg ? g->msg.id : NULL;
	char msg[200];
	const char *what;
	enum cs_err ef;
	if (e == CS_EBUSY) {
		what = "timeout";
		ef = str_fmt(msg, sizeof msg, "the upstream MCP server did not answer within %lld s",
		    (long long)g->ep->upstream_timeout);
	} else if (e == CS_ETOOBIG) {
		what = "too_big";
		ef = str_fmt(msg, sizeof msg, "the upstream MCP server's answer is larger than 1 MiB");
	} else if (e == CS_OK) {
		what = "bad_status";
		ef = str_fmt(msg, sizeof msg, "the upstream MCP server answered HTTP %ld", status);
	} else {
		what = "unreachable";
		ef = str_fmt(msg, sizeof msg, "the upstream MCP server could not be reached");
	}
	if (ef != CS_OK)
		return ef;
	return reply_rpc_error(g->rep, e == CS_EBUSY ? 504 : 502, id, MCP_ERR_UPSTREAM, msg,
	    json_pack("{s:s, s:I}", "upstream", what, "status", (json_int_t)status));
}

/* Whether the upstream's status goes back as it is: success, and the
 * protocol's own client errors (an unknown session is 404, say). */
static bool passable(long st)
{
	return (st >= 200 && st < 300) || (st >= 400 && st < 500 && st != 401 && st != 403 &&
	    st != 407);
}

/* Sends body (or none) upstream with the provider token and streams the
 * answer back.  *status: the upstream's status (0: none).  unauthorized
 * non-NULL: a 401 is not answered but said there (the caller refreshes the
 * token and tries once more). */
static enum cs_err forward(struct gw *g, const char *provider_token, const char *body,
    size_t body_len, long *status, bool *unauthorized, const struct answer_of *ao)
{
	struct up_headers h;
	struct httpc_reply up;
	struct httpc_stream *st = NULL;
	struct relay *r = NULL;
	enum cs_err e;
	*status = 0;
	httpc_reply_init(&up);
	if ((e = up_headers_build(g, provider_token, body != NULL, &h)) != CS_OK) {
		up_headers_clear(&h);
		if (e == CS_EINVAL)
			answer_failed(g, ao, 0, failure_word(e));
		return e == CS_EINVAL ? upstream_failed(g, CS_EINVAL, 0) : e;
	}
	h.line[h.n] = NULL;
	struct httpc_request rq = { http_method_name(g->req->method),
		h.url != NULL ? h.url : g->ep->upstream, h.line, body,
		body_len, MCP_RPC_MAX_BODY, MCP_CONNECT_TIMEOUT, (long)g->ep->upstream_timeout, false };
	e = httpc_stream_open(&rq, &up, &st);
	up_headers_clear(&h);
	if (e == CS_OK)
		*status = up.status;
	if (e == CS_ENOMEM)
		goto out;
	if (e == CS_OK && up.status == 401 && unauthorized != NULL) {
		*unauthorized = true;
		goto out;
	}
	if (e != CS_OK || !passable(up.status)) {
		answer_failed(g, ao, e == CS_OK ? up.status : 0, failure_word(e));
		e = upstream_failed(g, e, up.status);
		goto out;
	}
	if ((r = calloc(1, sizeof *r)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	r->app = g->app;
	/* The answer's entry follows the call's "forwarded" one (already
	 * committed): the audit queue writes it off this path. */
	if (ao != NULL && (e = mcp_call_answer_new(ao->rq, ao->p, up.status, NULL,
	    mono_ms() - ao->t0, &r->answer)) != CS_OK) {
		free(r);
		goto out;
	}
	g->rep->status = (int)up.status;
	g->rep->content_type = NULL;
	copy_headers(g->rep, &up);
	r->st = st;
	g->rep->stream.ctx = r;
	g->rep->stream.read = upstream_read;
	g->rep->stream.done = upstream_done;
	st = NULL;
out:
	httpc_stream_close(st);
	httpc_reply_clear(&up);
	return e;
}

/* --- tools/list: unmapped tools removed ----------------------------------- */

/* One JSON-RPC message of the upstream with result.tools filtered in place. */
static void filter_tools(const struct gw *g, json_t *msg)
{
	json_t *tools = json_object_get(json_object_get(msg, "result"), "tools");
	size_t i = 0;
	while (json_is_array(tools) && i < json_array_size(tools)) {
		const char *name = json_string_value(json_object_get(json_array_get(tools, i), "name"));
		if (name == NULL || config_action(g->cfg, g->ep->resource, name) == NULL)
			json_array_remove(tools, i);
		else
			i++;
	}
}

/* The upstream's answer to tools/list read whole (bounded), unmapped tools
 * removed: JSON, or an SSE stream whose data lines are messages. */
static enum cs_err forward_list(struct gw *g, const char *provider_token, long *status)
{
	struct up_headers h;
	struct httpc_reply up;
	struct buf out;
	enum cs_err e;
	const char *ct = NULL;
	*status = 0;
	httpc_reply_init(&up);
	buf_init(&out, 2 * MCP_RPC_MAX_BODY);
	if ((e = up_headers_build(g, provider_token, true, &h)) != CS_OK) {
		up_headers_clear(&h);
		buf_clear(&out);
		return e == CS_EINVAL ? upstream_failed(g, CS_EINVAL, 0) : e;
	}
	h.line[h.n] = NULL;
	struct httpc_request rq = { "POST", h.url != NULL ? h.url : g->ep->upstream, h.line,
		g->req->body, g->req->body_len,
		MCP_RPC_MAX_BODY, MCP_CONNECT_TIMEOUT, (long)g->ep->upstream_timeout, false };
	e = httpc_request(&rq, &up);
	up_headers_clear(&h);
	if (e == CS_OK)
		*status = up.status;
	if (e == CS_ENOMEM)
		goto out;
	if (e != CS_OK || !passable(up.status)) {
		e = upstream_failed(g, e, up.status);
		goto out;
	}
	for (size_t i = 0; i < up.nheaders; i++)
		if (strcasecmp(up.headers[i].name, "Content-Type") == 0)
			ct = up.headers[i].value;
	if (ct != NULL && strncasecmp(ct, "text/event-stream", 17) == 0) {
		/* Each "data:" line is one message: re-written filtered. */
		const char *p = up.body.data, *end = up.body.data + up.body.len;
		while (e == CS_OK && p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			size_t n = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
			json_t *m = NULL;
			if (n > 5 && strncmp(p, "data:", 5) == 0 &&
			    (m = json_loadb(p + 5, n - 5, JSON_REJECT_DUPLICATES, NULL)) != NULL) {
				char *s;
				filter_tools(g, m);
				s = json_dumps(m, JSON_COMPACT);
				e = s != NULL ? buf_printf(&out, "data: %s\n", s) : CS_ENOMEM;
				free(s);
				json_decref(m);
			} else {
				e = buf_append(&out, p, n);
				if (e == CS_OK)
					e = buf_puts(&out, "\n");
			}
			p += n + (nl != NULL ? 1 : 0);
		}
		if (e != CS_OK)
			goto out;
		g->rep->status = (int)up.status;
		copy_headers(g->rep, &up);
		g->rep->content_type = NULL;
		e = buf_append(&g->rep->body, out.data, out.len);
		goto out;
	}
	json_t *m = json_loadb(up.body.data, up.body.len, JSON_REJECT_DUPLICATES, NULL);
	if (m == NULL) {
		e = upstream_failed(g, CS_OK, up.status);
		goto out;
	}
	filter_tools(g, m);
	e = reply_json_value(g->rep, (int)up.status, m);
	if (e == CS_OK)
		for (size_t i = 0; i < up.nheaders; i++)
			if (strcasecmp(up.headers[i].name, "Mcp-Session-Id") == 0 &&
			    reply_header(g->rep, "Mcp-Session-Id", up.headers[i].value) != CS_OK)
				break;
out:
	httpc_reply_clear(&up);
	buf_clear(&out);
	return e;
}

/* --- 2025-11-25 sessions ---------------------------------------------------- */

static struct mcp_who gw_who(const struct gw *g)
{
	return (struct mcp_who){ .endpoint = g->ep->id, .user_id = g->gc.k.user_id,
		.client_id = g->gc.k.agent };
}

/* SECURITY: a request that names a session (Mcp-Session-Id, whatever its
 * era) goes on only in the person's own session with this client at this
 * endpoint: any other id -- another person's or client's, one consentd
 * never recorded, an ended one -- is answered 404 "Session not found" (the
 * client initializes anew), and nothing goes upstream.  false: rep holds
 * that answer. */
static enum cs_err check_session(struct gw *g, bool *ok)
{
	struct mcp_who w = gw_who(g);
	enum cs_err e;
	*ok = true;
	if ((g->sid = hdr(g->req, "Mcp-Session-Id")) == NULL)
		return CS_OK;
	e = mcp_session_find(g->c, &w, g->sid, g->req->now, &g->sess);
	if (e == CS_OK) {
		g->have_session = true;
		return CS_OK;
	}
	if (e != CS_ENOENT)
		return e;
	*ok = false;
	return reply_rpc_error(g->rep, 404, g->have_msg ? g->msg.id : NULL, MCP_ERR_NO_SESSION,
	    "Session not found: this Mcp-Session-Id is not a session of this client here; "
	    "initialize again", NULL);
}

/* After a 2025 initialize went upstream: the session the upstream opened
 * (its Mcp-Session-Id answer header) recorded for the person, the client
 * and the endpoint, with whether the client declared URL elicitation.  An
 * upstream that keeps no session answers none: nothing to record. */
static enum cs_err record_session(struct gw *g)
{
	struct mcp_who w = gw_who(g);
	enum mcp_session_outcome oc = MCP_SESSION__MAX;
	const char *sid = NULL;
	enum cs_err e;
	for (size_t i = 0; i < g->rep->nheaders; i++)
		if (strcasecmp(g->rep->headers[i].name, "Mcp-Session-Id") == 0)
			sid = g->rep->headers[i].value;
	if (sid == NULL)
		return CS_OK;
	e = mcp_session_record(g->c, &w, sid, g->msg.url_elicitation, g->req->now, &oc);
	if (e == CS_OK && oc == MCP_SESSION_RECORDED)
		return CS_OK;
	if (e != CS_OK && e != CS_EINVAL)
		return e;
	/* SECURITY: an id consentd cannot keep apart (malformed, or another
	 * person's or client's live session here) is never handed on: the
	 * answer that carried it is dropped (its stream closed) for an error. */
	struct reply_log keep = g->rep->log;
	reply_clear(g->rep);
	reply_init(g->rep);
	g->rep->log = keep;
	return reply_rpc_error(g->rep, 502, g->msg.id, MCP_ERR_UPSTREAM, "the upstream MCP server "
	    "answered initialize with a session id consentd cannot use (malformed, or already "
	    "another's session)", json_pack("{s:s}", "upstream", "session_id"));
}

static struct mcp_call_req call_req(struct gw *g);

/* The upstream's own GET stream of the session, when it has one (200, an
 * event stream), opened with the person's provider token for st to relay.
 * Anything else (405: no such stream, a failure, no live consent) leaves st
 * with consentd's own events alone. */
static enum cs_err relay_upstream(struct gw *g, struct mcp_stream *st)
{
	struct mcp_call_req rq = call_req(g);
	struct mcp_call_plan p;
	struct up_headers h;
	struct httpc_reply up;
	struct httpc_stream *us = NULL;
	enum cs_err e;
	memset(&p, 0, sizeof p);
	memset(&h, 0, sizeof h);
	httpc_reply_init(&up);
	if ((e = mcp_call_prepare(g->c, g->cfg, &rq, &p)) != CS_OK || p.outcome != MCP_CALL_RELEASED)
		goto out;
	if ((e = up_headers_build(g, p.rel.tok.access_token, false, &h)) != CS_OK) {
		e = e == CS_ENOMEM ? e : CS_OK;
		goto out;
	}
	h.line[h.n] = NULL;
	/* The stream lives as long as consentd's own, and a little more; its
	 * bytes are bounded in all by the stream's lifetime at this cap. */
	struct httpc_request r = { "GET", h.url != NULL ? h.url : g->ep->upstream, h.line, NULL, 0,
		MCP_RELAY_MAX_BYTES, MCP_CONNECT_TIMEOUT, MCP_STREAM_LIFETIME_MS / 1000 + 5, true };
	e = httpc_stream_open(&r, &up, &us);
	if (e == CS_ENOMEM)
		goto out;
	const char *ct = NULL;
	for (size_t i = 0; e == CS_OK && i < up.nheaders; i++)
		if (strcasecmp(up.headers[i].name, "Content-Type") == 0)
			ct = up.headers[i].value;
	if (e == CS_OK && up.status == 200 && ct != NULL &&
	    strncasecmp(ct, "text/event-stream", 17) == 0) {
		mcp_stream_relay(st, us);
		us = NULL;
	}
	e = CS_OK;
out:
	httpc_stream_close(us);
	httpc_reply_clear(&up);
	up_headers_clear(&h);
	mcp_call_plan_clear(&p);
	return e;
}

/* GET in a session: the session's stream of notifications/elicitation/complete
 * (mcp_stream.h), within the bounds per person and per node, with the
 * upstream's own GET stream relayed when it has one. */
static enum cs_err open_stream(struct gw *g)
{
	struct mcp_who w = gw_who(g);
	struct mcp_stream *st = NULL;
	enum mcp_stream_admit adm = MCP_STREAM__MAX;
	enum cs_err e;
	if ((e = mcp_stream_open(g->app->store, &w, g->sess.hash, &adm, &st)) != CS_OK)
		return e;
	switch (adm) {
	case MCP_STREAM_ADMITTED:
		if ((e = relay_upstream(g, st)) != CS_OK) {
			mcp_stream_close(st);
			return e;
		}
		g->rep->status = 200;
		g->rep->content_type = "text/event-stream";
		g->rep->stream = (struct reply_stream){ st, mcp_stream_read, mcp_stream_close };
		return CS_OK;
	case MCP_STREAM_PERSON_FULL:
		e = reply_rpc_error(g->rep, 429, NULL, MCP_ERR_BUSY, "too many streams of this person "
		    "are open: close one, or retry later", json_pack("{s:s}", "limit", "per_person"));
		break;
	default:
		e = reply_rpc_error(g->rep, 503, NULL, MCP_ERR_BUSY, "too many streams are open on "
		    "this server: retry later", json_pack("{s:s}", "limit", adm == MCP_STREAM_FULL ?
		    "total" : "stopping"));
		break;
	}
	if (e == CS_OK)
		e = reply_header(g->rep, "Retry-After", "5");
	return e;
}

/* --- answers for the decisions ------------------------------------------- */

static enum cs_err reply_result(struct gw *g, json_t *result)
{
	json_t *v;
	if (result == NULL)
		return CS_ENOMEM;
	v = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", g->msg.id, "result", result);
	return v != NULL ? reply_json_value(g->rep, 200, v) : CS_ENOMEM;
}

/* The person is asked, in the client's form. */
static enum cs_err reply_ask(struct gw *g, const struct mcp_call_plan *p)
{
	char text[1200];
	enum mcp_ask_form form = mcp_gateway_form(&g->msg, g->have_session &&
	    g->sess.url_elicitation, true);
	enum cs_err e;
	if (form == MCP_FORM_INPUT_REQUIRED) {
		char *state = NULL;
		struct mcp_state s = { .user_id = g->gc.k.user_id, .client_id = g->gc.k.agent,
			.endpoint = g->ep->id, .tool = g->msg.tool, .digest = p->digest, .kind = p->ask.kind,
			.pending = p->ask.pending, .expires_at = g->req->now + MCP_STATE_TTL };
		if ((e = mcp_state_seal(&g->app->mk, &s, &state)) != CS_OK)
			return e;
		e = reply_result(g, mcp_gateway_input_required(&p->ask, state));
		free(state);
		return e;
	}
	if (form == MCP_FORM_URL_ERROR) {
		/* The session's own elicitation, announced on its GET stream once
		 * the person decided (mcp_stream.h), until the item expires. */
		struct mcp_who w = gw_who(g);
		enum mcp_elicitation_kind k = p->ask.kind == MCP_ASK_APPROVAL ? MCP_ELICIT_APPROVAL :
		    MCP_ELICIT_CONSENT;
		char eid[MCP_ELICITATION_ID_LEN + 1];
		int64_t until = 0;
		if ((e = mcp_elicitation_item_expiry(g->c, k, p->ask.pending, &until)) != CS_OK ||
		    (e = mcp_elicitation_new(g->c, &w, &g->sess, k, p->ask.pending, until,
		    g->req->now, eid)) != CS_OK)
			return e;
		json_t *v = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", g->msg.id, "error",
		    mcp_gateway_url_error(&p->ask, eid));
		return v != NULL ? reply_json_value(g->rep, 200, v) : CS_ENOMEM;
	}
	if ((e = mcp_gateway_ask_text(&p->ask, text, sizeof text)) != CS_OK)
		return e;
	return reply_result(g, mcp_gateway_text_result(text, g->msg.era));
}

static enum cs_err reply_denied(struct gw *g, const struct mcp_call_plan *p)
{
	char when[STR_TIME_LEN], text[600];
	enum cs_err e;
	(void)str_time(p->until, when);
	const char *by = p->rel.approval.decided_by;
	if (p->act != NULL && p->rel.outcome == EXCHANGE_APPROVAL && authzen_denied(&p->rel.approval))
		e = str_fmt(text, sizeof text, "This call of %s was %s.", g->msg.tool,
		    AUTHZEN_DENIED_WORDS);
	else if (p->act != NULL && p->rel.outcome == EXCHANGE_APPROVAL && by != NULL &&
	    strncmp(by, "policy ", 7) == 0)
		e = str_fmt(text, sizeof text, "The call of %s with these arguments is denied by the "
		    "organisation's policy (%s). No one is asked, and the same call is denied every "
		    "time.", g->msg.tool, by);
	else if (p->act != NULL && p->rel.outcome == EXCHANGE_APPROVAL && by != NULL)
		e = str_fmt(text, sizeof text, "The call of %s with these arguments is denied by the "
		    "%s, not by a person.", g->msg.tool, by);
	else if (p->act != NULL && p->rel.outcome == EXCHANGE_APPROVAL)
		e = str_fmt(text, sizeof text, "The person denied this call of %s with these "
		    "arguments. The same call is refused until %s.", g->msg.tool, when);
	else
		e = str_fmt(text, sizeof text, "The person declined consent for this client. It is "
		    "not asked again until %s.", when);
	return e != CS_OK ? e : reply_result(g, mcp_gateway_text_result(text, g->msg.era));
}

/* tools/call's decision that is not a release. */
static enum cs_err reply_plan(struct gw *g, const struct mcp_call_plan *p)
{
	char msg[300];
	struct buf sc;
	enum cs_err e;
	switch (p->outcome) {
	case MCP_CALL_UNMAPPED:
		if ((e = str_fmt(msg, sizeof msg, "Unknown tool: %s (no action maps it at this "
		    "endpoint)", g->msg.tool)) != CS_OK)
			return e;
		return reply_rpc_error(g->rep, 200, g->msg.id, MCP_ERR_PARAMS, msg,
		    json_pack("{s:s}", "tool", g->msg.tool));
	case MCP_CALL_SCOPE:
		/* The scopes held and the one the tool needs: the step-up asks for all. */
		buf_init(&sc, 4096);
		e = buf_puts(&sc, json_string_value(json_object_get(g->gc.claims, "scope")));
		if (e == CS_OK && p->scope != NULL)
			e = buf_printf(&sc, " %s", p->scope);
		if (e == CS_OK)
			e = str_fmt(msg, sizeof msg, "the access token lacks the scope %s that the tool "
			    "%s needs", p->scope != NULL ? p->scope : "-", g->msg.tool);
		if (e == CS_OK)
			e = refuse_token(g->rep, g->cfg, g->ep, 403, "insufficient_scope", msg, sc.data,
			    g->msg.id);
		buf_clear(&sc);
		return e;
	case MCP_CALL_ASK:
		return reply_ask(g, p);
	case MCP_CALL_DENIED:
		return reply_denied(g, p);
	case MCP_CALL_TOO_MANY:
		if ((e = str_fmt(msg, sizeof msg, "too many requests are waiting for this person's "
		    "decision: retry in %lld s", (long long)p->retry_after)) != CS_OK)
			return e;
		return reply_rpc_error(g->rep, 200, g->msg.id, MCP_ERR_BUSY, msg, NULL);
	case MCP_CALL_PROVIDER_DOWN:
		return reply_rpc_error(g->rep, 200, g->msg.id, MCP_ERR_UPSTREAM, "the provider could "
		    "not be reached to refresh the person's token", json_pack("{s:s}", "upstream",
		    "provider_unavailable"));
	default:
		return reply_rpc_error(g->rep, 200, g->msg.id, MCP_ERR_INTERNAL, "the call could not "
		    "be prepared", NULL);
	}
}

static const char *const audit_words[MCP_CALL_OUTCOME__MAX] = {
	[MCP_CALL_RELEASED] = "forwarded", [MCP_CALL_UNMAPPED] = "unmapped",
	[MCP_CALL_SCOPE] = "insufficient_scope", [MCP_CALL_ASK] = "asked",
	[MCP_CALL_DENIED] = "denied", [MCP_CALL_TOO_MANY] = "too_many",
	[MCP_CALL_PROVIDER_DOWN] = "provider_down", [MCP_CALL_NO_CONSENT] = "no_consent",
};

static struct mcp_call_req call_req(struct gw *g)
{
	return (struct mcp_call_req){ .vault = g->app->vault, .ep = g->ep, .token_consent = &g->gc.k,
		.token_scopes = &g->token_scopes, .issuer = g->cfg->oidc_issuer,
		.method = g->have_msg ? g->msg.method : http_method_name(g->req->method),
		.tool = g->have_msg ? g->msg.tool : NULL, .arguments = g->have_msg ? g->msg.arguments : NULL,
		.actor = g->actor, .now = g->req->now, .limits = g->app->limits,
		.call_id = g->req->request_id };
}

/* The body to forward for a tools/call: as it came, or without consentd's
 * own requestState and inputResponses (the upstream never issued them). */
static enum cs_err tool_body(struct gw *g, char **own, const char **body, size_t *len)
{
	*own = NULL;
	*body = g->req->body;
	*len = g->req->body_len;
	if (g->msg.request_state == NULL && g->msg.input_responses == NULL)
		return CS_OK;
	json_object_del(g->msg.params, "requestState");
	json_object_del(g->msg.params, "inputResponses");
	g->msg.request_state = NULL;
	g->msg.input_responses = NULL;
	if ((*own = json_dumps(g->msg.root, JSON_COMPACT)) == NULL)
		return CS_ENOMEM;
	*body = *own;
	*len = strlen(*own);
	return CS_OK;
}

/* The upstream answered 401 to a released tool call: the provider may have
 * revoked its token early.  One forced refresh and one retry (the proxy's
 * rule).  A refused refresh marks the connection as needing the person
 * (vault.h), so the next call asks for their consent; this one answers the
 * upstream's 401 as a JSON-RPC error. */
static enum cs_err after_401(struct gw *g, const struct mcp_call_req *rq, struct mcp_call_plan *p,
    const char *body, size_t len, long *status, const struct answer_of *ao)
{
	struct vault_release t;
	enum cs_err e = mcp_call_refresh(g->c, g->cfg, rq, p, &t);
	if (e == CS_OK && t.outcome == VAULT_RELEASED) {
		e = forward(g, t.access_token, body, len, status, NULL, ao);
	} else if (e == CS_OK) {
		answer_failed(g, ao, 401, NULL);
		e = upstream_failed(g, CS_OK, 401);
	}
	vault_release_clear(&t);
	return e;
}

/* tools/call: the retry's state, the gate (held a while when the person
 * has not decided yet), the answer or the forward, and the audit entry. */
static enum cs_err tools_call(struct gw *g)
{
	struct mcp_call_req rq = call_req(g);
	struct mcp_call_plan p;
	struct mcp_state st;
	enum mcp_state_verdict v = MCP_STATE_OK;
	char digest[APPROVAL_DIGEST_LEN + 1], *own = NULL;
	const char *body;
	size_t len;
	long status = 0;
	enum cs_err e;
	memset(&p, 0, sizeof p);
	memset(&st, 0, sizeof st);
	if (g->msg.request_state != NULL) {
		json_t *args = g->msg.arguments != NULL ? json_incref(g->msg.arguments) : json_object();
		e = args != NULL ? approval_digest(args, digest) : CS_ENOMEM;
		json_decref(args);
		if (e != CS_OK)
			return e;
		struct mcp_state want = { .user_id = g->gc.k.user_id, .client_id = g->gc.k.agent,
			.endpoint = g->ep->id, .tool = g->msg.tool, .digest = digest };
		if ((e = mcp_state_open(&g->app->mk, g->msg.request_state, &want, g->req->now, &st,
		    &v)) != CS_OK)
			return e;
		/* SECURITY: a state that is not this very call's fails closed. */
		if (v != MCP_STATE_OK)
			return reply_rpc_error(g->rep, 200, g->msg.id, MCP_ERR_STATE,
			    mcp_state_verdict_text(v), json_pack("{s:s}", "reason", "request_state"));
	}
	for (int step = 0;; step++) {
		rq.now = g->req->now + step;
		mcp_call_plan_clear(&p);
		if ((e = mcp_call_prepare(g->c, g->cfg, &rq, &p)) != CS_OK)
			goto out;
		if (st.pending == NULL || p.outcome != MCP_CALL_ASK)
			break;
		/* The state's approval was used or expired: never a second release. */
		if (st.kind == MCP_ASK_APPROVAL && (p.ask.kind != MCP_ASK_APPROVAL ||
		    strcmp(p.ask.pending, st.pending) != 0)) {
			if ((e = mcp_call_audit(g->c, &rq, &p, "state_used", 0)) == CS_OK)
				e = reply_rpc_error(g->rep, 200, g->msg.id, MCP_ERR_STATE, "the "
				    "requestState's approval was already used or is no longer valid: call "
				    "the tool again without it", json_pack("{s:s}", "reason",
				    "request_state_used"));
			goto out;
		}
		/* The person has not decided yet: the retry waits a bounded while. */
		if (step >= MCP_HOLD_STEPS || strcmp(p.ask.pending, st.pending) != 0)
			break;
		sleep(1);
	}
	if (p.outcome != MCP_CALL_RELEASED) {
		if ((e = mcp_call_audit(g->c, &rq, &p, audit_words[p.outcome], 0)) != CS_OK)
			goto out;
		e = reply_plan(g, &p);
		goto out;
	}
	if ((e = tool_body(g, &own, &body, &len)) != CS_OK)
		goto out;
	/* The call's "forwarded" entry went into the release's transaction,
	 * before a byte goes upstream; the entry of its answer ("answered" or
	 * "upstream_failed", with the status) goes through the audit queue: no
	 * second durable commit on the request's path (audit_queue.h). */
	bool unauthorized = false;
	struct answer_of ao = { &rq, &p, mono_ms() };
	e = forward(g, p.rel.tok.access_token, body, len, &status, &unauthorized, &ao);
	if (e == CS_OK && unauthorized)
		e = after_401(g, &rq, &p, body, len, &status, &ao);
out:
	free(own);
	mcp_state_clear(&st);
	mcp_call_plan_clear(&p);
	return e;
}

/* Any other message: a live consent, the provider token, forwarded. */
static enum cs_err other(struct gw *g)
{
	struct mcp_call_req rq = call_req(g);
	struct mcp_call_plan p;
	long status = 0;
	enum cs_err e;
	memset(&p, 0, sizeof p);
	if ((e = mcp_call_prepare(g->c, g->cfg, &rq, &p)) != CS_OK)
		goto out;
	if (p.outcome == MCP_CALL_NO_CONSENT) {
		/* Nothing to ask in outside a tool call: the client signs in again. */
		e = refuse_token(g->rep, g->cfg, g->ep, 401, "invalid_token", "the person's consent "
		    "for this client has ended: sign in again", NULL, g->have_msg ? g->msg.id : NULL);
		goto out;
	}
	if (p.outcome != MCP_CALL_RELEASED) {
		e = reply_plan(g, &p);
		goto out;
	}
	if (g->have_msg && g->msg.kind == MCP_REQUEST && strcmp(g->msg.method, "tools/list") == 0 &&
	    g->ep->unmapped == UNMAPPED_REFUSE)
		e = forward_list(g, p.rel.tok.access_token, &status);
	else
		e = forward(g, p.rel.tok.access_token, g->req->method == HTTP_POST ? g->req->body : NULL,
		    g->req->method == HTTP_POST ? g->req->body_len : 0, &status, NULL, NULL);
out:
	mcp_call_plan_clear(&p);
	return e;
}

enum cs_err mcp_api_endpoint(const struct http_request *req, struct http_reply *rep)
{
	struct gw g;
	struct mcp_rpc_refusal why;
	bool ok = false;
	enum cs_err e;
	memset(&g, 0, sizeof g);
	memset(&why, 0, sizeof why);
	g.req = req;
	g.rep = rep;
	g.app = req->app;
	g.cfg = req->app->cfg;
	g.ep = req->ncaptures == 1 ? config_mcp_endpoint(g.cfg, req->captures[0]) : NULL;
	if (g.ep == NULL)
		return reply_error(rep, req->route->kind, 404, "not_found",
		    "There is no such MCP endpoint here.");
	if ((g.c = store_conn(g.app->store)) == NULL)
		return CS_EDB;
	if ((e = check_token(&g, &ok)) != CS_OK || !ok)
		goto out;
	if (g.ep->upstream == NULL) {
		e = reply_rpc_error(rep, 503, NULL, MCP_ERR_UPSTREAM, "this MCP endpoint has no "
		    "upstream server configured", NULL);
		goto out;
	}
	if (req->method != HTTP_POST) {
		/* GET (the server's stream) and DELETE (a session's end) exist in
		 * 2025-11-25 only (2026-07-28: 405). */
		const char *v = hdr(req, "MCP-Protocol-Version");
		if (v != NULL && strcmp(v, MCP_VERSION_2026) == 0) {
			e = reply_rpc_error(rep, 405, NULL, MCP_ERR_INVALID_REQUEST, "GET and DELETE are "
			    "not part of MCP 2026-07-28: POST only", NULL);
			if (e == CS_OK)
				e = reply_header(rep, "Allow", "POST");
			goto out;
		}
		if ((e = check_session(&g, &ok)) != CS_OK || !ok)
			goto out;
		if (req->method == HTTP_GET && g.have_session) {
			e = open_stream(&g);
			goto out;
		}
		if (req->method == HTTP_DELETE && g.have_session) {
			/* consentd forgets the session first: whatever the upstream
			 * answers, the id serves nobody any more. */
			struct mcp_who w = gw_who(&g);
			if ((e = mcp_session_end(g.c, &w, g.sid)) != CS_OK && e != CS_ENOENT)
				goto out;
			g.have_session = false;
		}
		e = other(&g);
		goto out;
	}
	struct mcp_rpc_headers h = { hdr(req, "MCP-Protocol-Version"), hdr(req, "Mcp-Method"),
		hdr(req, "Mcp-Name") };
	if ((e = mcp_rpc_parse(req->body, req->body_len, &h, &g.msg, &why)) != CS_OK) {
		if (e == CS_EINVAL)
			e = reply_rpc_error(rep, why.status, why.id, why.code, why.message, NULL);
		goto out;
	}
	g.have_msg = true;
	if ((e = check_session(&g, &ok)) != CS_OK || !ok)
		goto out;
	if (g.msg.kind == MCP_REQUEST && g.msg.tool != NULL) {
		e = tools_call(&g);
	} else {
		e = other(&g);
		if (e == CS_OK && g.msg.kind == MCP_REQUEST && g.msg.era == MCP_ERA_2025 &&
		    strcmp(g.msg.method, "initialize") == 0)
			e = record_session(&g);
	}
out:
	mcp_rpc_refusal_clear(&why);
	gw_clear(&g);
	return e;
}
