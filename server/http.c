/* http.c -- libmicrohttpd glue: the only file that includes <microhttpd.h>.
 * Turns a connection into a struct http_request (raw URI, capped body, headers),
 * hands it to the router and sends the struct http_reply back, with security
 * headers and one log line (log.c) per request.  Never logs a path, a query
 * string, a header value or a body. */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include "app.h"
#include "arena.h"
#include "http.h"
#include "httpc.h"
#include "log.h"
#include "metrics.h"

/* Bounds the request line and headers.  libmicrohttpd touches the whole of it
 * per connection: 32 KiB keeps 1,000 keep-alive connections near 47 MB
 * resident (64 KiB: 78 MB), and our largest header (a client assertion or a
 * DPoP proof, a few KiB) fits many times. */
#define HTTP_CONN_MEMORY (32u * 1024)
#define HTTP_DISCARD_MAX (4u * 1024 * 1024)   /* body dropped past max_body before a 413 cuts it off */
#define HTTP_FD_SPARE 256   /* descriptors beyond the connections: database, log, clients, epoll */

struct job;

/* Deferred requests (the proxy): a pool of their own, see "deferred" below. */
#define DEFER_THREADS 16
#define DEFER_QUEUE   256
#define DEFER_BUF     (64u * 1024)   /* upstream body bytes held for one connection */
#define DEFER_ARENA   4096u          /* a job's own request memory: a usual proxied call's URI and
                                        header copies fit; more takes heap blocks */
#define DEFER_DEADLINE 45             /* s: a job's pump gives up on a slow reader after */

struct http_server {
	struct MHD_Daemon *d;
	struct app        *app;
	const struct route *table;      /* http_routes, or http_metrics_routes */
	struct http_server *metrics;    /* [metrics] listen's server; NULL when none */
	char               csp[ROUTER_CSP_MAX];   /* router_csp's, computed once by server_new */
	atomic_int         stopping;
	atomic_uint        in_flight;   /* requests begun and not yet completed */
	/* the deferred pool: a LIFO of idle threads (the one idle last gets the next
	 * job, keeping its upstream connections warm) and a bounded queue */
	pthread_mutex_t    pool_mu;
	struct pool_worker {
		struct http_server *srv;
		pthread_t           t;
		pthread_cond_t      cv;
		struct job         *job;     /* handed over by job_queue */
	}                  pool[DEFER_THREADS];
	size_t             npool;
	struct pool_worker *idle[DEFER_THREADS];   /* a stack: the last idle on top */
	size_t             nidle;
	struct job        *queue_head, *queue_tail;
	size_t             queued;
	bool               pool_stop;
	/* held around MHD_resume_connection by pool threads; http_stop sets
	 * resume_off under it before MHD_stop_daemon, so no resume can race with
	 * the daemon closing connections */
	pthread_mutex_t    resume_mu;
	bool               resume_off;
	atomic_int         draining;     /* stopping: no new suspension, pumps give up */
	/* connections suspended by a job and not yet resumed: MHD_stop_daemon
	 * aborts the process while any is left, so http_stop waits for none */
	atomic_int         suspended;
};

/* Request-lifetime memory held in the request's own state: the URI's copies,
 * the parameters and the captures of a short request (a JWKS or introspection
 * call, a page without a long query) fit, so it allocates nothing else for
 * them; a longer one takes heap blocks.  Sized so that the whole state stays a
 * small allocation for glibc (at most 1,024 bytes: its per-thread cache);
 * a larger one made every request consolidate the allocator's fast bins,
 * measured at 10 % more CPU per JWKS answer.  A form body past what is left
 * takes a heap block, as it took a malloc of its own before. */
#define HTTP_REQ_ARENA 768
#define HTTP_CONN_CTX_MAX 1024

struct conn_ctx {
	char           *raw_uri;       /* as the client sent it, before any decoding (in arena) */
	struct buf      body;
	int             started;
	int             too_big;
	size_t          discarded;      /* body bytes dropped past max_body */
	int             bad_header;    /* a field name that is not an RFC 9110 token */
	struct job     *job;           /* a deferred request, while it runs and answers */
	bool            running;       /* counted in store_requests: begun, its handler not done */
	struct timespec t0;
	struct arena    arena;         /* this request's memory, cleared when it completes */
	_Alignas(16) unsigned char mem[HTTP_REQ_ARENA];   /* the arena's first block */
};

_Static_assert(sizeof(struct conn_ctx) <= HTTP_CONN_CTX_MAX,
    "struct conn_ctx must stay a small allocation (HTTP_REQ_ARENA)");

static void job_closed(struct job *j);

/* The most a request takes from its arena: two copies of the URI, its query
 * and captures decoded, the body's parameters decoded, and slack. */
static size_t req_arena_cap(const struct config *cfg)
{
	return (size_t)cfg->max_body + 4 * ((size_t)HTTP_MAX_URI + 2) + 16384;
}

/* libmicrohttpd's own diagnostics join the log stream. */
static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	(void)cls;
	if (str_vfmt(msg, sizeof msg, fmt, ap) != CS_OK) {
		log_msg(LOG_WARN, "libmicrohttpd: a diagnostic too long to log");
		return;
	}
	size_t n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	log_msg(LOG_WARN, "libmicrohttpd: %s", msg);
}

static void *uri_logger(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct http_server *srv = cls;
	/* Not calloc: the arena's block needs no zeroing, only the fields before it. */
	struct conn_ctx *ctx = malloc(sizeof *ctx);
	(void)c;
	if (ctx == NULL)
		return NULL;
	memset(ctx, 0, offsetof(struct conn_ctx, mem));
	clock_gettime(CLOCK_MONOTONIC, &ctx->t0);
	buf_init(&ctx->body, srv->app->cfg->max_body);
	arena_init(&ctx->arena, ctx->mem, sizeof ctx->mem, req_arena_cap(srv->app->cfg));
	ctx->raw_uri = arena_strndup(&ctx->arena, uri, HTTP_MAX_URI + 1);
	atomic_fetch_add(&srv->in_flight, 1);
	ctx->running = true;
	store_requests(srv->app->store, 1);
	return ctx;
}

/* The request's handler is done (answered, deferred, or the request ended):
 * it no longer counts among the requests that may still join a group commit
 * (store_requests).  Once per request. */
static void handler_done(struct http_server *srv, struct conn_ctx *ctx)
{
	if (ctx->running) {
		ctx->running = false;
		store_requests(srv->app->store, -1);
	}
}

static void completed(void *cls, struct MHD_Connection *c, void **req_cls,
    enum MHD_RequestTerminationCode toe)
{
	struct http_server *srv = cls;
	struct conn_ctx *ctx = *req_cls;
	(void)c; (void)toe;
	if (ctx == NULL)
		return;
	if (ctx->job != NULL) {
		job_closed(ctx->job);
		ctx->job = NULL;
	}
	atomic_fetch_sub(&srv->in_flight, 1);
	handler_done(srv, ctx);
	buf_wipe_clear(&ctx->body);     /* bodies may hold secrets */
	arena_clear(&ctx->arena);       /* wiped too: parameters may be secrets */
	free(ctx);
	*req_cls = NULL;
}

static enum http_method method_of(const char *m)
{
	static const char *const names[HTTP_METHOD__MAX] = {
		"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS" };
	for (int i = 0; i < HTTP_METHOD__MAX; i++)
		if (strcmp(m, names[i]) == 0)
			return (enum http_method)i;
	return HTTP_METHOD__MAX;
}

static const char *header_of(void *hctx, const char *name)
{
	return MHD_lookup_connection_value(hctx, MHD_HEADER_KIND, name);
}

_Static_assert(sizeof ((struct http_request *)0)->remote_ip >= INET6_ADDRSTRLEN,
    "http_request.remote_ip holds any address inet_ntop writes");

static void remote_ip(struct MHD_Connection *c, char *out, size_t outlen)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (outlen < 2)
		return;
	memcpy(out, "-", 2);
	if (ci == NULL || ci->client_addr == NULL)
		return;
	if (ci->client_addr->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)ci->client_addr)->sin_addr,
		    out, (socklen_t)outlen);
	else if (ci->client_addr->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)ci->client_addr)->sin6_addr,
		    out, (socklen_t)outlen);
}

/* Every instance of one request header, joined with "," (RFC 9110 section
 * 5.3), for the forwarded-address parsers: its last FORWARDED_MAX_LEN bytes
 * when it is longer (cut says so). */
struct joined_header {
	const char *name;
	char        text[FORWARDED_MAX_LEN + 2];
	size_t      len;
	bool        any, cut;
};

static enum MHD_Result join_header(void *cls, enum MHD_ValueKind kind, const char *key,
    const char *value)
{
	struct joined_header *j = cls;
	size_t n = value != NULL ? strlen(value) : 0, sep = j->any ? 1 : 0;
	(void)kind;
	if (key == NULL || strcasecmp(key, j->name) != 0)
		return MHD_YES;
	if (value == NULL)
		value = "";
	/* SECURITY: S3 (issue 28): the proxies append on the right, so a header
	 * too long keeps its right end; the client wrote what is dropped. */
	if (j->len + sep + n > FORWARDED_MAX_LEN) {
		j->cut = true;
		if (n >= FORWARDED_MAX_LEN) {
			memcpy(j->text, value + n - FORWARDED_MAX_LEN, FORWARDED_MAX_LEN);
			j->len = FORWARDED_MAX_LEN;
			j->text[j->len] = '\0';
			j->any = true;
			return MHD_YES;
		}
		size_t keep = FORWARDED_MAX_LEN - n - sep;      /* < j->len here */
		memmove(j->text, j->text + j->len - keep, keep);
		j->len = keep;
	}
	if (sep)
		j->text[j->len++] = ',';
	memcpy(j->text + j->len, value, n);
	j->len += n;
	j->text[j->len] = '\0';
	j->any = true;
	return MHD_YES;
}

/* SECURITY: the client address (forwarded.h): the TCP peer, unless it is one
 * of [server] trusted_proxies; then the header it names.  Of a header too long
 * to read whole, the right end is read, from its first whole element on (the
 * cut one might parse as another address). */
static void client_address(struct MHD_Connection *c, const struct config *cfg, const char *peer,
    char *out, size_t outlen)
{
	struct joined_header j = { .name = cfg->proxy_header == FORWARDED_RFC7239 ? "Forwarded" :
	    "X-Forwarded-For" };
	char addr[FORWARDED_ADDR_LEN];
	if (cfg->ntrusted_proxies == 0 || outlen < sizeof addr)
		return;
	if (!net_prefix_match(cfg->trusted_proxies, cfg->ntrusted_proxies, peer))
		return;
	MHD_get_connection_values(c, MHD_HEADER_KIND, join_header, &j);
	const char *h = j.text;
	if (j.cut)
		h = (h = strchr(j.text, ',')) != NULL ? h + 1 : "";
	(void)forwarded_client(cfg->trusted_proxies, cfg->ntrusted_proxies, cfg->proxy_header, peer,
	    j.any ? h : NULL, addr);
	memcpy(out, addr, strlen(addr) + 1);
}

/* A request id is 16 hex digits: the time in milliseconds, its low 24 bits
 * (6 digits, wrapping every 4.7 hours), then 40 random bits (10 digits).  The
 * time first keeps the audit's request index written near its end, on a page
 * a batch's entries share, where 64 random bits wrote a page of its own for
 * every entry (issue 34).  Two ids are equal no more often than with 64 random
 * bits (about once a year at 10,000 requests a second for ids a millisecond
 * apart); an id is a correlation id, never unique by contract, never a secret.
 * The random bits come from a pool per thread of the CSPRNG's bytes, refilled
 * 64 ids at a time: one RAND_bytes call per 64 ids (each takes the DRBG's
 * lock and asks getpid: 12 % of a GET /.well-known/jwks.json, issue 34).
 * consentd never forks, so no two processes share a pool.  A failed refill
 * gives this id zeros, as a failed call did, and the next id tries again. */
#define RID_POOL 64

static void new_request_id(char out[17])
{
	static const char hex[] = "0123456789abcdef";
	static _Thread_local unsigned char pool[RID_POOL * 8];
	static _Thread_local size_t left;      /* unused ids at the pool's end */
	unsigned char r[8];
	if (left == 0 && RAND_bytes(pool, (int)sizeof pool) == 1)
		left = RID_POOL;
	if (left > 0) {
		memcpy(r, pool + (RID_POOL - left) * 8, sizeof r);
		left--;
	} else {
		memset(r, 0, sizeof r);
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	r[0] = (unsigned char)(ms >> 16);
	r[1] = (unsigned char)(ms >> 8);
	r[2] = (unsigned char)ms;
	for (int i = 0; i < 8; i++) {
		out[2 * i] = hex[r[i] >> 4];
		out[2 * i + 1] = hex[r[i] & 15];
	}
	out[16] = '\0';
}

/* One log line per request (log.c).  SECURITY: the route pattern, never the
 * path (it holds request ids), the query (it may carry an authorization code),
 * a header value or a body; the error code and description consentd sent, and
 * the configured agent and resource a call was about. */
static void access_log(const struct conn_ctx *ctx, const char *ip, const char *method,
    const char *rid, const struct http_reply *rep)
{
	struct timespec t1;
	enum log_level lv = rep->status >= 500 ? LOG_ERROR : LOG_INFO;
	if (!log_enabled(lv))
		return;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ms = (double)(t1.tv_sec - ctx->t0.tv_sec) * 1e3 +
	    (double)(t1.tv_nsec - ctx->t0.tv_nsec) / 1e6;
	struct log_field f[12];
	size_t n = 0;
	f[n++] = LOG_STR("request_id", rid);
	f[n++] = LOG_STR("ip", ip);
	f[n++] = LOG_STR("method", method);
	f[n++] = LOG_STR("route", rep->log.route);
	f[n++] = LOG_INT("status", rep->status);
	f[n++] = LOG_MS("ms", ms);
	f[n++] = LOG_INT("bytes", rep->body.len);
	if (rep->log.error[0] != '\0')
		f[n++] = LOG_STR("error", rep->log.error);
	if (rep->log.description[0] != '\0')
		f[n++] = LOG_STR("error_description", rep->log.description);
	if (rep->log.agent != NULL)
		f[n++] = LOG_STR("agent", rep->log.agent);
	if (rep->log.resource != NULL)
		f[n++] = LOG_STR("resource", rep->log.resource);
	log_event(lv, "request", f, n);
}

/* The request in consentd_http_requests_total and its duration.  SECURITY:
 * label values are consentd's words only -- the route pattern that answered
 * ("other" when none did), the method's name when it is one of ours, the
 * status -- never the path or any other text of the request. */
static void count_request(const struct conn_ctx *ctx, const char *method,
    const struct http_reply *rep)
{
	struct timespec t1;
	char status[12];
	enum http_method m = method_of(method);
	const char *route = rep->log.route != NULL ? rep->log.route : "other";
	if (str_fmt(status, sizeof status, "%d", rep->status) != CS_OK)
		return;
	const char *v[] = { route, m < HTTP_METHOD__MAX ? http_method_name(m) : "other", status };
	metrics_add(metric[M_HTTP_REQUESTS], v, 1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	metrics_observe(metric[M_HTTP_DURATION], v, (double)(t1.tv_sec - ctx->t0.tv_sec) +
	    (double)(t1.tv_nsec - ctx->t0.tv_nsec) / 1e9);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *dst, size_t max)
{
	struct reply_stream *rs = cls;
	size_t got = 0;
	(void)pos;
	if (rs->read(rs->ctx, dst, max, &got) != CS_OK)
		return MHD_CONTENT_READER_END_WITH_ERROR;      /* the connection is cut */
	return got == 0 ? MHD_CONTENT_READER_END_OF_STREAM : (ssize_t)got;
}

static void stream_free(void *cls)
{
	struct reply_stream *rs = cls;
	if (rs->done != NULL)
		rs->done(rs->ctx);
	free(rs);
}

/* RFC 9110 sections 15.2, 15.3.5, 15.4.5 and 9.3.2: a 1xx, 204 or 304 answer,
 * and any answer to HEAD, has no body -- a streamed (chunked) one would put a
 * stray terminator on a keep-alive connection and desynchronise it. */
static bool may_have_body(int status, const char *method)
{
	return !(status < 200 || status == 204 || status == 304 || strcmp(method, "HEAD") == 0);
}

static struct MHD_Response *buffer_response(const struct http_reply *rep)
{
	return MHD_create_response_from_buffer(rep->body.len,
	    rep->body.data ? rep->body.data : (char *)"", MHD_RESPMEM_MUST_COPY);
}

/* rep's status and headers on resp (NULL: MHD_NO), queued, logged. */
static enum MHD_Result queue_reply(struct http_server *srv, struct MHD_Connection *c,
    const struct conn_ctx *ctx, const char *method, const char *rid,
    const struct http_reply *rep, struct MHD_Response *resp)
{
	enum MHD_Result ret;
	char ip[INET6_ADDRSTRLEN];
	if (resp == NULL)
		return MHD_NO;
	if (rep->content_type)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, rep->content_type);
	for (size_t i = 0; i < rep->nheaders; i++)
		MHD_add_response_header(resp, rep->headers[i].name, rep->headers[i].value);
	if (atomic_load(&srv->stopping))
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	ret = MHD_queue_response(c, (unsigned)rep->status, resp);
	MHD_destroy_response(resp);
	remote_ip(c, ip, sizeof ip);
	access_log(ctx, ip, method, rid, rep);
	count_request(ctx, method, rep);
	return ret;
}

static enum MHD_Result send_reply(struct http_server *srv, struct MHD_Connection *c,
    struct conn_ctx *ctx, const char *method, const char *rid, struct http_reply *rep)
{
	struct MHD_Response *resp;
	if (router_security_headers(srv->app, srv->csp, rep) != CS_OK ||
	    reply_header(rep, "X-Request-Id", rid) != CS_OK) {
		reply_clear(rep);
		reply_init(rep);
		rep->status = 500;
	}
	if (rep->stream.read != NULL && !may_have_body(rep->status, method)) {
		if (rep->stream.done != NULL)
			rep->stream.done(rep->stream.ctx);
		memset(&rep->stream, 0, sizeof rep->stream);
	}
	if (rep->stream.read != NULL) {
		/* MHD owns the stream from here: stream_free runs when MHD is done with it
		 * (sent, cut or never started). */
		struct reply_stream *rs = malloc(sizeof *rs);
		resp = NULL;
		if (rs != NULL) {
			*rs = rep->stream;
			memset(&rep->stream, 0, sizeof rep->stream);
			resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read,
			    rs, stream_free);
			if (resp == NULL)
				stream_free(rs);
		}
	} else {
		resp = buffer_response(rep);
	}
	return queue_reply(srv, c, ctx, method, rid, rep, resp);
}

/* --- deferred requests (the proxy) ----------------------------------------
 *
 * A proxied call waits on its upstream for up to 30 s.  Run on an MHD worker it
 * would stall every other connection of that worker, so it is deferred: the
 * connection is suspended and the handler runs on a pool thread of its own.
 * When the handler's answer has a streamed body, that pool thread stays with it
 * as the pump: it reads the upstream into a bounded buffer that the MHD worker
 * drains, and the worker suspends the connection while the buffer is empty.
 * Every MHD call on a suspended connection is made by MHD's own threads except
 * MHD_resume_connection, which pool threads make under resume_mu. */

struct job {
	pthread_mutex_t        mu;
	pthread_cond_t         space;      /* the pump waits here for room in data */
	int                    refs;       /* the pool thread, the connection, the response */
	struct http_server    *srv;
	struct MHD_Connection *c;
	bool                   closed;     /* the connection is gone: never resume it */
	bool                   ready;      /* the handler ran: rep holds its answer */
	bool                   waiting;    /* the reader suspended the connection for data */
	bool                   cancelled;  /* nobody reads any more: stop pumping */
	bool                   finished;   /* the pump has put all of the body (or failed) */
	bool                   streamed;   /* the answer's body comes from the pump */
	struct timespec        deadline;   /* CLOCK_MONOTONIC: the pump gives up then */
	enum cs_err            perr;       /* how the body ended */
	struct reply_stream    src;        /* the handler's body, read by the pump */
	struct buf             data;       /* pumped, not yet sent */
	size_t                 off;
	struct http_request    req;
	struct http_reply      rep;
	struct buf             body;       /* the request body */
	char                 **hname, **hvalue;   /* copies of the request's headers (in arena) */
	size_t                 nh;
	/* The job's own request memory: the URI (req.path and req.query point into
	 * its copy), the headers, and what the router takes.  The connection's
	 * arena may be gone before the pool thread is done with the job. */
	struct arena           arena;
	_Alignas(16) unsigned char mem[DEFER_ARENA];
	struct job            *next;       /* in the queue */
};

static void job_unref(struct job *j)
{
	pthread_mutex_lock(&j->mu);
	int left = --j->refs;
	pthread_mutex_unlock(&j->mu);
	if (left > 0)
		return;
	if (j->src.done != NULL)
		j->src.done(j->src.ctx);
	http_request_clear(&j->req);
	reply_clear(&j->rep);
	buf_wipe_clear(&j->body);
	buf_wipe_clear(&j->data);
	arena_clear(&j->arena);           /* wipes the headers' copies (Authorization) */
	pthread_cond_destroy(&j->space);
	pthread_mutex_destroy(&j->mu);
	free(j);
}

/* The connection is gone (MHD's completion callback): never resume it, stop
 * the pump, drop the connection's reference. */
static void job_closed(struct job *j)
{
	pthread_mutex_lock(&j->mu);
	j->closed = true;
	j->cancelled = true;
	j->waiting = false;
	pthread_cond_broadcast(&j->space);
	pthread_mutex_unlock(&j->mu);
	job_unref(j);
}

/* Resumes j's connection unless it is gone or the daemon is stopping (called
 * with j->mu held, so a concurrent close waits for it). */
static void job_resume(struct job *j)
{
	pthread_mutex_lock(&j->srv->resume_mu);
	if (!j->closed && !j->srv->resume_off)
		MHD_resume_connection(j->c);
	atomic_fetch_sub(&j->srv->suspended, 1);
	pthread_mutex_unlock(&j->srv->resume_mu);
}

static const char *job_header(void *hctx, const char *name)
{
	const struct job *j = hctx;
	for (size_t i = 0; i < j->nh; i++)
		if (strcasecmp(j->hname[i], name) == 0)
			return j->hvalue[i];
	return NULL;
}

static bool job_header_nth(void *hctx, size_t i, const char **name, const char **value)
{
	const struct job *j = hctx;
	if (i >= j->nh)
		return false;
	*name = j->hname[i];
	*value = j->hvalue[i];
	return true;
}

struct hcopy { struct job *j; size_t cap; bool nomem; };

static enum MHD_Result copy_header(void *cls, enum MHD_ValueKind kind, const char *key,
    size_t key_len, const char *value, size_t value_len)
{
	struct hcopy *h = cls;
	struct job *j = h->j;
	(void)kind;
	if (j->nh == h->cap) {
		/* The arena does not reallocate: the arrays are copied into twice the room. */
		size_t ncap = h->cap ? 2 * h->cap : 16;
		char **nn = arena_alloc(&j->arena, ncap * sizeof *nn);
		char **nv = arena_alloc(&j->arena, ncap * sizeof *nv);
		if (nn == NULL || nv == NULL)
			goto nomem;
		if (j->nh > 0) {
			memcpy(nn, j->hname, j->nh * sizeof *nn);
			memcpy(nv, j->hvalue, j->nh * sizeof *nv);
		}
		j->hname = nn;
		j->hvalue = nv;
		h->cap = ncap;
	}
	j->hname[j->nh] = arena_strndup(&j->arena, key, key_len);
	j->hvalue[j->nh] = arena_strndup(&j->arena, value ? value : "", value ? value_len : 0);
	if (j->hname[j->nh] == NULL || j->hvalue[j->nh] == NULL)
		goto nomem;
	j->nh++;
	return MHD_YES;
nomem:
	h->nomem = true;
	return MHD_NO;
}

/* Pumps the handler's body into j->data until the end, a failure or nobody
 * reads any more; on the pool thread that ran the handler (whose curl handles
 * the body source uses). */
static void job_pump(struct job *j)
{
	char chunk[16384];
	for (;;) {
		size_t got = 0;
		enum cs_err e = j->src.read(j->src.ctx, chunk, sizeof chunk, &got);
		bool done;
		pthread_mutex_lock(&j->mu);
		/* A reader too slow for the buffer is waited for until the job's
		 * deadline (or the stop), never longer: the thread is the pool's. */
		bool late = false;
		while (!j->cancelled && e == CS_OK && got > 0 && j->data.len - j->off + got > DEFER_BUF) {
			struct timespec now, slice;
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (atomic_load(&j->srv->draining) || now.tv_sec >= j->deadline.tv_sec) {
				late = true;
				break;
			}
			slice = now;
			slice.tv_sec += 1;
			pthread_cond_timedwait(&j->space, &j->mu, &slice);
		}
		if (j->cancelled) {
			pthread_mutex_unlock(&j->mu);
			break;
		}
		if (late) {
			got = 0;
			e = CS_EBUSY;
			log_msg(LOG_WARN, "proxy: the gateway reads too slowly; its answer was cut");
		}
		if (e == CS_OK && got > 0) {
			if (j->off > 0) {                 /* keep what is unsent at the front */
				memmove(j->data.data, j->data.data + j->off, j->data.len - j->off);
				j->data.len -= j->off;
				j->off = 0;
			}
			e = buf_append(&j->data, chunk, got);
		}
		if (e != CS_OK || got == 0) {
			j->finished = true;
			j->perr = e;
		}
		if (j->waiting) {
			j->waiting = false;
			job_resume(j);
		}
		done = j->finished;
		pthread_mutex_unlock(&j->mu);
		if (done)
			break;
	}
	OPENSSL_cleanse(chunk, sizeof chunk);
	/* The body source is closed here, on the thread whose curl share it uses. */
	pthread_mutex_lock(&j->mu);
	struct reply_stream src = j->src;
	memset(&j->src, 0, sizeof j->src);
	pthread_mutex_unlock(&j->mu);
	if (src.done != NULL)
		src.done(src.ctx);
}

static void job_run(struct job *j)
{
	bool pump;
	router_handle(&j->req, &j->rep);       /* router_admit let it through (job_admit) */
	pthread_mutex_lock(&j->mu);
	pump = j->rep.stream.read != NULL;
	if (pump) {
		j->streamed = true;
		j->src = j->rep.stream;
		memset(&j->rep.stream, 0, sizeof j->rep.stream);
		if (j->closed)
			j->cancelled = true;
	}
	j->ready = true;
	job_resume(j);
	pthread_mutex_unlock(&j->mu);
	if (pump)
		job_pump(j);
	job_unref(j);
}

static void *pool_main(void *arg)
{
	struct pool_worker *w = arg;
	struct http_server *srv = w->srv;
	pthread_mutex_lock(&srv->pool_mu);
	for (;;) {
		struct job *j = w->job;
		w->job = NULL;
		if (j == NULL && srv->queue_head != NULL) {
			j = srv->queue_head;
			srv->queue_head = j->next;
			if (srv->queue_head == NULL)
				srv->queue_tail = NULL;
			srv->queued--;
		}
		if (j == NULL) {
			if (srv->pool_stop)
				break;
			srv->idle[srv->nidle++] = w;
			while (w->job == NULL && !srv->pool_stop)
				pthread_cond_wait(&w->cv, &srv->pool_mu);
			if (w->job == NULL) {             /* stopping: off the idle stack */
				for (size_t i = 0; i < srv->nidle; i++)
					if (srv->idle[i] == w) {
						srv->idle[i] = srv->idle[--srv->nidle];
						break;
					}
			}
			continue;
		}
		pthread_mutex_unlock(&srv->pool_mu);
		job_run(j);
		pthread_mutex_lock(&srv->pool_mu);
	}
	pthread_mutex_unlock(&srv->pool_mu);
	return NULL;
}

/* MHD's reader for a deferred answer's body: what the pump has put, or a
 * suspension until it puts more. */
static ssize_t job_read(void *cls, uint64_t pos, char *dst, size_t max)
{
	struct job *j = cls;
	ssize_t r;
	(void)pos;
	pthread_mutex_lock(&j->mu);
	if (j->off < j->data.len) {
		size_t n = j->data.len - j->off;
		if (n > max)
			n = max;
		memcpy(dst, j->data.data + j->off, n);
		j->off += n;
		pthread_cond_signal(&j->space);
		r = (ssize_t)n;
	} else if (j->finished) {
		r = j->perr == CS_OK ? MHD_CONTENT_READER_END_OF_STREAM :
		    MHD_CONTENT_READER_END_WITH_ERROR;   /* the connection is cut */
	} else if (atomic_load(&j->srv->draining)) {
		r = MHD_CONTENT_READER_END_WITH_ERROR;   /* stopping: no new suspension */
	} else {
		j->waiting = true;
		atomic_fetch_add(&j->srv->suspended, 1);
		MHD_suspend_connection(j->c);         /* the pump resumes it */
		r = 0;
	}
	pthread_mutex_unlock(&j->mu);
	return r;
}

static void job_response_free(void *cls)
{
	struct job *j = cls;
	pthread_mutex_lock(&j->mu);
	j->cancelled = true;
	j->waiting = false;
	pthread_cond_broadcast(&j->space);
	pthread_mutex_unlock(&j->mu);
	job_unref(j);
}

/* Takes the request out of MHD's hands: copies of its headers, body and URI
 * in the job's own memory, one reference (the caller's: job_unref).  NULL
 * when out of memory (ctx keeps its body): answer as usual. */
static struct job *job_new(struct http_server *srv, struct MHD_Connection *c, struct conn_ctx *ctx,
    const struct http_request *proto)
{
	struct job *j = calloc(1, sizeof *j);
	struct hcopy h = { j, 0, false };
	if (j == NULL)
		return NULL;
	arena_init(&j->arena, j->mem, sizeof j->mem,
	    req_arena_cap(srv->app->cfg) + 2 * HTTP_CONN_MEMORY);
	pthread_mutex_init(&j->mu, NULL);
	{
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&j->space, &ca);
		pthread_condattr_destroy(&ca);
	}
	clock_gettime(CLOCK_MONOTONIC, &j->deadline);
	j->deadline.tv_sec += DEFER_DEADLINE;
	j->refs = 1;
	j->srv = srv;
	j->c = c;
	buf_init(&j->data, DEFER_BUF + 16384);
	reply_init(&j->rep);
	j->req = *proto;
	j->req.arena = &j->arena;
	/* path and query, copied whole into the job's memory (proto's point into
	 * the connection's copy of the URI). */
	size_t pl = strlen(proto->path), ql = strlen(proto->query);
	char *pq = arena_alloc(&j->arena, pl + ql + 2);
	if (pq == NULL) {
		job_unref(j);
		return NULL;
	}
	memcpy(pq, proto->path, pl + 1);
	memcpy(pq + pl + 1, proto->query, ql + 1);
	j->req.path = pq;
	j->req.query = pq + pl + 1;
	j->body = ctx->body;                      /* taken over */
	buf_init(&ctx->body, srv->app->cfg->max_body);
	j->req.body = j->body.data;
	j->req.body_len = j->body.len;
	MHD_get_connection_values_n(c, MHD_HEADER_KIND, copy_header, &h);
	if (h.nomem) {
		ctx->body = j->body;                  /* give it back */
		memset(&j->body, 0, sizeof j->body);
		job_unref(j);
		return NULL;
	}
	j->req.header = job_header;
	j->req.header_nth = job_header_nth;
	j->req.hctx = j;
	j->req.content_type = job_header(j, MHD_HTTP_HEADER_CONTENT_TYPE);
	j->req.cookie = job_header(j, MHD_HTTP_HEADER_COOKIE);
	j->req.origin = job_header(j, "Origin");
	j->req.sec_fetch_site = job_header(j, "Sec-Fetch-Site");
	j->req.authorization = job_header(j, MHD_HTTP_HEADER_AUTHORIZATION);
	j->req.host = job_header(j, MHD_HTTP_HEADER_HOST);
	return j;
}

/* Hands an admitted job to the pool: the connection suspended, the job with
 * an idle thread or queued: 1.  0: no pool (answer on this thread); -1: the
 * queue is full or the server is stopping.  On 0 and -1 the job is still the
 * caller's alone. */
static int job_queue(struct http_server *srv, struct MHD_Connection *c, struct conn_ctx *ctx,
    struct job *j)
{
	pthread_mutex_lock(&srv->pool_mu);
	if (srv->queued >= DEFER_QUEUE || srv->pool_stop || srv->npool == 0 ||
	    atomic_load(&srv->draining)) {
		int busy = srv->queued >= DEFER_QUEUE || atomic_load(&srv->draining) ? -1 : 0;
		pthread_mutex_unlock(&srv->pool_mu);
		return busy;
	}
	j->refs = 2;                              /* the pool thread and the connection */
	ctx->job = j;
	atomic_fetch_add(&srv->suspended, 1);
	MHD_suspend_connection(c);
	if (srv->nidle > 0) {                     /* the thread idle last: warm connections */
		struct pool_worker *w = srv->idle[--srv->nidle];
		w->job = j;
		pthread_cond_signal(&w->cv);
	} else {
		if (srv->queue_tail)
			srv->queue_tail->next = j;
		else
			srv->queue_head = j;
		srv->queue_tail = j;
		srv->queued++;
	}
	pthread_mutex_unlock(&srv->pool_mu);
	return 1;
}

/* A deferred route's request: admitted on this (the connection's) thread --
 * route, limits, parameters, the gateway's gate and the grant the route
 * takes (router_admit) -- and only then handed to the pool.  SECURITY: a
 * caller that fails any of them is answered here and never holds a pool
 * thread or a place in its queue, so anonymous requests cannot crowd the
 * gateway's calls out (there is one gateway: the pool is all its own). */
static enum MHD_Result job_admit(struct http_server *srv, struct MHD_Connection *c,
    struct conn_ctx *ctx, const char *method, struct job *j)
{
	enum MHD_Result ret;
	if (router_admit(srv->table, &j->req, &j->rep)) {
		int queued = job_queue(srv, c, ctx, j);
		if (queued > 0)
			return MHD_YES;
		if (queued < 0) {
			reply_clear(&j->rep);
			reply_init(&j->rep);
			if (reply_oauth_error(&j->rep, 503, "temporarily_unavailable",
			    "too many proxied calls are waiting; retry later") != CS_OK ||
			    reply_header(&j->rep, "Retry-After", "1") != CS_OK)
				j->rep.status = 503;
			j->rep.log.route = j->req.route != NULL ? j->req.route->pattern : NULL;
		} else {
			router_handle(&j->req, &j->rep);  /* no pool: on this thread */
		}
	}
	ret = send_reply(srv, c, ctx, method, j->req.request_id, &j->rep);
	job_unref(j);
	return ret;
}

/* The deferred answer, once the handler ran (on_request after the resume). */
static enum MHD_Result job_answer(struct http_server *srv, struct MHD_Connection *c,
    struct conn_ctx *ctx, const char *method)
{
	struct job *j = ctx->job;
	struct MHD_Response *resp = NULL;
	bool streamed;
	pthread_mutex_lock(&j->mu);
	if (!j->ready) {                          /* a spurious call: stay suspended */
		pthread_mutex_unlock(&j->mu);
		return MHD_YES;
	}
	streamed = j->streamed;
	pthread_mutex_unlock(&j->mu);
	struct http_reply *rep = &j->rep;
	if (router_security_headers(srv->app, srv->csp, rep) != CS_OK ||
	    reply_header(rep, "X-Request-Id", j->req.request_id) != CS_OK) {
		reply_clear(rep);
		reply_init(rep);
		rep->status = 500;
		streamed = false;
	}
	if (streamed && !may_have_body(rep->status, method))
		streamed = false;
	if (j->streamed && !streamed) {         /* nobody will read what the pump puts */
		pthread_mutex_lock(&j->mu);
		j->cancelled = true;
		pthread_cond_broadcast(&j->space);
		pthread_mutex_unlock(&j->mu);
	}
	if (streamed) {
		pthread_mutex_lock(&j->mu);
		j->refs++;                            /* the response's */
		pthread_mutex_unlock(&j->mu);
		resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, job_read, j,
		    job_response_free);
		if (resp == NULL)
			job_response_free(j);
	} else {
		resp = buffer_response(rep);
	}
	return queue_reply(srv, c, ctx, method, j->req.request_id, rep, resp);
}

/* Splits the raw URI into a NUL-terminated path and query inside *copy, a
 * copy from a. */
static int split_uri(struct arena *a, const char *raw, char **copy, const char **path,
    const char **query)
{
	char *q;
	if (raw == NULL || raw[0] != '/' || strlen(raw) > HTTP_MAX_URI)
		return 0;
	*copy = arena_strdup(a, raw);
	if (*copy == NULL)
		return 0;
	q = strchr(*copy, '?');
	*path = *copy;
	*query = "";
	if (q) {
		*q = '\0';
		*query = q + 1;
	}
	if (strchr(*query, '#'))                /* a fragment never reaches a server */
		return 0;
	return 1;
}

/* RFC 9110 section 5.1: a field name is a token.  libmicrohttpd 0.9.75 accepts an
 * obs-fold continuation line and glues it onto the previous field's NAME (so
 * "Accept: x\r\n X-Injected: 1" arrives as a name holding ": "); checking every name
 * refuses that, and any other malformed line, with 400. */
static enum MHD_Result name_is_token(void *cls, enum MHD_ValueKind kind, const char *key,
    size_t key_len, const char *value, size_t value_len)
{
	static const char tchar[] = "!#$%&'*+-.^_`|~";
	int *bad = cls;
	(void)kind; (void)value; (void)value_len;
	if (key == NULL || key_len == 0) {
		*bad = 1;
		return MHD_NO;
	}
	for (size_t i = 0; i < key_len; i++) {
		unsigned char ch = (unsigned char)key[i];
		if (!isalnum(ch) && (ch == '\0' || strchr(tchar, ch) == NULL)) {
			*bad = 1;
			return MHD_NO;
		}
	}
	return MHD_YES;
}

/* The first calls for a request: checks the header names and the announced
 * length, then gathers the body as it arrives. True while MHD should call
 * again with more; false once the request is whole or already refused. */
static bool still_receiving(struct http_server *srv, struct MHD_Connection *c,
    struct conn_ctx *ctx, const char *upload_data, size_t *upload_data_size)
{
	if (!ctx->started) {
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
		    MHD_HTTP_HEADER_CONTENT_LENGTH);
		ctx->started = 1;
		MHD_get_connection_values_n(c, MHD_HEADER_KIND, name_is_token, &ctx->bad_header);
		if (cl != NULL) {
			char *end = NULL;
			unsigned long long n = strtoull(cl, &end, 10);
			if (end == cl || *end != '\0' || n > srv->app->cfg->max_body)
				ctx->too_big = 1;
		}
		return !ctx->too_big && !ctx->bad_header;   /* wait for the body */
	}
	if (*upload_data_size > 0) {
		if (!ctx->too_big && buf_append(&ctx->body, upload_data, *upload_data_size) != CS_OK)
			ctx->too_big = 1;
		if (ctx->too_big)
			ctx->discarded += *upload_data_size;
		*upload_data_size = 0;
		/* A body past [server] max_body that no Content-Length announced (a
		 * chunked one) is read on and dropped up to HTTP_DISCARD_MAX (4 MiB) more, so
		 * that a client that sends it whole still reads its 413; past that it
		 * is answered at once and the connection closed: the rest of a body
		 * of any size is never read. */
		return !ctx->too_big || ctx->discarded <= HTTP_DISCARD_MAX;
	}
	return false;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **req_cls)
{
	struct http_server *srv = cls;
	struct conn_ctx *ctx = *req_cls;
	struct http_request req;
	struct http_reply rep;
	char *uricopy = NULL;
	const char *path = "-", *query = "";
	enum MHD_Result ret;
	(void)url; (void)version;

	if (ctx == NULL)
		return MHD_NO;
	if (still_receiving(srv, c, ctx, upload_data, upload_data_size))
		return MHD_YES;
	if (ctx->job != NULL)                   /* a deferred request, resumed */
		return job_answer(srv, c, ctx, method);

	memset(&req, 0, sizeof req);
	reply_init(&rep);
	new_request_id(req.request_id);
	req.arena = &ctx->arena;
	if (!split_uri(&ctx->arena, ctx->raw_uri, &uricopy, &path, &query)) {
		path = "-";
		if (reply_html_error(&rep, 400, "Bad request", "The address is malformed.") != CS_OK)
			rep.status = 400;
		goto send;
	}
	if (ctx->bad_header || ctx->too_big) {
		enum route_kind k = router_kind_for_path(srv->table, path);
		int st = ctx->bad_header ? 400 : 413;
		if (reply_error(&rep, k, st, "invalid_request", ctx->bad_header ?
		    "A header line is malformed." : "The request body is too large.") != CS_OK)
			rep.status = st;
		/* The unread body makes the connection unusable: close it after this. */
		if (reply_header(&rep, "Connection", "close") != CS_OK)
			rep.status = 413;
		goto send;
	}
	req.method = method_of(method);
	if (req.method == HTTP_METHOD__MAX) {
		if (reply_html_error(&rep, 405, "Method not allowed", "This method is not supported.") != CS_OK)
			rep.status = 405;
		goto send;
	}
	req.path = path;
	req.query = query;
	req.body = ctx->body.data;
	req.body_len = ctx->body.len;
	req.header = header_of;
	req.hctx = c;
	req.content_type = header_of(c, MHD_HTTP_HEADER_CONTENT_TYPE);
	req.cookie = header_of(c, MHD_HTTP_HEADER_COOKIE);
	req.origin = header_of(c, "Origin");
	req.sec_fetch_site = header_of(c, "Sec-Fetch-Site");
	req.authorization = header_of(c, MHD_HTTP_HEADER_AUTHORIZATION);
	req.host = header_of(c, MHD_HTTP_HEADER_HOST);
	remote_ip(c, req.remote_ip, sizeof req.remote_ip);
	if (srv->app != NULL && srv->app->cfg != NULL)
		client_address(c, srv->app->cfg, req.remote_ip, req.remote_ip, sizeof req.remote_ip);
	req.now = app_now();
	req.app = srv->app;
	/* A route that waits on an upstream (the proxy) runs off the MHD workers
	 * once admitted (see "deferred"); the route table says which. */
	const struct route *rt = router_route_for_path(srv->table, path);
	struct job *j = rt != NULL && (rt->flags & ROUTE_DEFERRED) ? job_new(srv, c, ctx, &req) : NULL;
	if (j != NULL) {
		reply_clear(&rep);
		handler_done(srv, ctx);
		return job_admit(srv, c, ctx, method, j);
	}
	router_dispatch(srv->table, &req, &rep);
	http_request_clear(&req);
send:
	handler_done(srv, ctx);
	ret = send_reply(srv, c, ctx, method, req.request_id, &rep);
	reply_clear(&rep);
	return ret;
}

/* The connections consentd serves at once: [server] max_connections, the
 * open-file limit raised to fit them (up to its hard limit); when the hard
 * limit is lower, as many as fit, said in the log. */
static unsigned connection_limit(const struct config *cfg)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)cfg->max_connections + HTTP_FD_SPARE;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return cfg->max_connections;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
		rlim_t cur = rl.rlim_cur;
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			rl.rlim_cur = cur;
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
		unsigned fit = rl.rlim_cur > HTTP_FD_SPARE + 16 ? (unsigned)(rl.rlim_cur - HTTP_FD_SPARE) : 16;
		log_msg(LOG_WARN, "the open-file limit (%llu) fits %u of [server] max_connections = %u; "
		    "raise it (LimitNOFILE=, ulimit -n) to serve them all",
		    (unsigned long long)rl.rlim_cur, fit, cfg->max_connections);
		return fit;
	}
	return cfg->max_connections;
}

/* A daemon for srv on host:port (host as the config stores it). */
/* host (as the config stores it: IPv6 without brackets) and port as a socket
 * address in *a4 or *a6; *sa points at the one filled, *v6 says which. */
static enum cs_err sock_addr(const char *host, uint16_t port, struct sockaddr_in *a4,
    struct sockaddr_in6 *a6, const struct sockaddr **sa, bool *v6)
{
	memset(a4, 0, sizeof *a4);
	memset(a6, 0, sizeof *a6);
	if (strcmp(host, "localhost") == 0)
		host = "127.0.0.1";
	*v6 = strchr(host, ':') != NULL;
	if (*v6) {
		if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
			return CS_ECONFIG;
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		*sa = (const struct sockaddr *)a6;
	} else {
		if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
			return CS_ECONFIG;
		a4->sin_family = AF_INET;
		a4->sin_port = htons(port);
		*sa = (const struct sockaddr *)a4;
	}
	return CS_OK;
}

static enum cs_err listen_on(struct http_server *srv, const char *host_cfg, uint16_t port,
    unsigned threads, unsigned conn_limit, unsigned per_ip)
{
	const struct config *cfg = srv->app->cfg;
	struct sockaddr_in a4;
	struct sockaddr_in6 a6;
	const struct sockaddr *sa = NULL;
	unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG |
	    MHD_ALLOW_SUSPEND_RESUME;
	bool v6;

	if (sock_addr(host_cfg, port, &a4, &a6, &sa, &v6) != CS_OK)
		goto bad;
	if (v6)
		flags |= MHD_USE_IPv6;
	/* The logger first: libmicrohttpd uses its own for what the options before it say. */
	srv->d = MHD_start_daemon(flags, port, NULL, NULL, on_request, srv,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, NULL,
	    MHD_OPTION_SOCK_ADDR, sa,
	    MHD_OPTION_THREAD_POOL_SIZE, threads,
	    MHD_OPTION_CONNECTION_LIMIT, conn_limit,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->idle_timeout,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY,
	    MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
	    MHD_OPTION_URI_LOG_CALLBACK, uri_logger, srv,
	    MHD_OPTION_NOTIFY_COMPLETED, completed, srv,
	    MHD_OPTION_END);
	if (srv->d == NULL) {
		log_msg(LOG_ERROR, "cannot listen on %s:%u", host_cfg, (unsigned)port);
		return CS_EIO;
	}
	return CS_OK;
bad:
	log_msg(LOG_ERROR, "listen address %s is not an IP address", host_cfg);
	return CS_ECONFIG;
}

/* --- the stand-in while the schema awaits its migration ------------------ */

struct http_waiter {
	struct MHD_Daemon *d;
};

/* Every request: /healthz 200 (the process lives), /readyz 503 saying why,
 * anything else 503 temporarily_unavailable with Retry-After.  No body is
 * read, no state is kept. */
static enum MHD_Result on_wait(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *data, size_t *size, void **state)
{
	static const char ready[] = "{\"status\":\"unready\",\"checks\":{\"database\":false,"
	    "\"database_schema\":\"older than this consentd: waiting for consentd migrate\"}}";
	static const char alive[] = "{\"status\":\"ok\"}";
	static const char busy[] = "{\"error\":\"temporarily_unavailable\",\"error_description\":"
	    "\"the database schema is older than this consentd: waiting for consentd migrate\"}";
	(void)cls;
	(void)method;
	(void)version;
	(void)data;
	if (*state == NULL) {              /* the headers: answer once the body (if any) is in */
		*state = conn;
		return MHD_YES;
	}
	if (*size != 0) {
		*size = 0;                     /* a body is not read: dropped */
		return MHD_YES;
	}
	/* Which path is which is the route table's (routes.c). */
	const struct route *rt = router_route_for_path(http_routes, url);
	const char *body = rt != NULL && (rt->flags & ROUTE_PROBE_LIVE) ? alive :
	    rt != NULL && (rt->flags & ROUTE_PROBE_READY) ? ready : busy;
	unsigned status = body == alive ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE;
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body,
	    MHD_RESPMEM_PERSISTENT);
	if (r == NULL)
		return MHD_NO;
	enum MHD_Result ok = MHD_add_response_header(r, "Content-Type", "application/json");
	if (ok == MHD_YES && body != alive)
		ok = MHD_add_response_header(r, "Retry-After", "5");
	if (ok == MHD_YES)
		ok = MHD_add_response_header(r, "Cache-Control", "no-store");
	if (ok == MHD_YES)
		ok = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ok;
}

enum cs_err http_waiter_start(const struct config *cfg, struct http_waiter **out)
{
	struct sockaddr_in a4;
	struct sockaddr_in6 a6;
	const struct sockaddr *sa = NULL;
	bool v6;
	struct http_waiter *w;
	if (sock_addr(cfg->listen_host, cfg->listen_port, &a4, &a6, &sa, &v6) != CS_OK)
		return CS_ECONFIG;
	if ((w = calloc(1, sizeof *w)) == NULL)
		return CS_ENOMEM;
	w->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | (v6 ? MHD_USE_IPv6 : 0),
	    cfg->listen_port, NULL, NULL, on_wait, NULL,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, NULL,
	    MHD_OPTION_SOCK_ADDR, sa,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
	    MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
	    MHD_OPTION_END);
	if (w->d == NULL) {
		free(w);
		log_msg(LOG_ERROR, "cannot listen on %s:%u", cfg->listen_host, (unsigned)cfg->listen_port);
		return CS_EIO;
	}
	*out = w;
	return CS_OK;
}

void http_waiter_stop(struct http_waiter *w)
{
	if (w == NULL)
		return;
	MHD_stop_daemon(w->d);
	free(w);
}

static struct http_server *server_new(struct app *app, const struct route *table)
{
	struct http_server *srv = calloc(1, sizeof *srv);
	if (srv == NULL)
		return NULL;
	srv->app = app;
	srv->table = table;
	if (router_csp(app, srv->csp, sizeof srv->csp) != CS_OK) {
		log_msg(LOG_ERROR, "the Content-Security-Policy for the configured origins is "
		    "longer than %d bytes", ROUTER_CSP_MAX);
		free(srv);
		return NULL;
	}
	pthread_mutex_init(&srv->pool_mu, NULL);
	pthread_mutex_init(&srv->resume_mu, NULL);
	return srv;
}

/* [metrics] listen: one worker, a few connections, only http_metrics_routes,
 * no deferred pool (that table defers nothing). */
#define METRICS_CONNECTIONS 16

enum cs_err http_start(struct app *app, struct http_server **out)
{
	const struct config *cfg = app->cfg;
	struct http_server *srv = server_new(app, http_routes);
	enum cs_err e;

	if (srv == NULL)
		return CS_ENOMEM;
	if ((e = listen_on(srv, cfg->listen_host, cfg->listen_port,
	    (unsigned)(cfg->threads ? cfg->threads : 1), connection_limit(cfg),
	    (unsigned)cfg->per_ip_connections)) != CS_OK) {
		free(srv);
		return e;
	}
	if (cfg->metrics_listen_host != NULL) {
		if ((srv->metrics = server_new(app, http_metrics_routes)) == NULL)
			e = CS_ENOMEM;
		else
			e = listen_on(srv->metrics, cfg->metrics_listen_host, cfg->metrics_listen_port, 1,
			    METRICS_CONNECTIONS, METRICS_CONNECTIONS);
		if (e != CS_OK) {
			free(srv->metrics);               /* its daemon did not start */
			MHD_stop_daemon(srv->d);
			free(srv);
			return e;
		}
	}
	/* Without pool threads a deferred request is answered on the worker. */
	for (size_t i = 0; i < DEFER_THREADS; i++) {
		struct pool_worker *w = &srv->pool[srv->npool];
		w->srv = srv;
		pthread_cond_init(&w->cv, NULL);
		if (pthread_create(&w->t, NULL, pool_main, w) == 0)
			srv->npool++;
		else
			pthread_cond_destroy(&w->cv);
	}
	*out = srv;
	return CS_OK;
}

void http_quiesce(struct http_server *s)
{
	if (s == NULL || s->d == NULL)
		return;
	http_quiesce(s->metrics);
	atomic_store(&s->stopping, 1);
	MHD_socket fd = MHD_quiesce_daemon(s->d);
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
}

unsigned http_in_flight(struct http_server *s)
{
	return s ? atomic_load(&s->in_flight) : 0;
}

void http_stop(struct http_server *s)
{
	if (s == NULL)
		return;
	/* [metrics] listen defers nothing and suspends no connection: stopped at once. */
	if (s->metrics != NULL) {
		MHD_stop_daemon(s->metrics->d);
		free(s->metrics);
		s->metrics = NULL;
	}
	/* Upstream transfers still running fail within a second, so every job
	 * answers (an error, or a cut stream) and resumes its connection: libmicrohttpd
	 * 0.9.75 aborts the process when stopped with a connection suspended.  Then
	 * no pool thread resumes anything any more, the daemon closes every
	 * connection and the pool drains its queue. */
	/* draining first (under pool_mu, which job_queue holds while it suspends):
	 * from here the count of suspended connections only goes down. */
	pthread_mutex_lock(&s->pool_mu);
	atomic_store(&s->draining, 1);
	pthread_mutex_unlock(&s->pool_mu);
	httpc_abort_all();
	/* Zero twice, 200 ms apart: a reader that looked at draining just before it
	 * was set has suspended (and its pump resumed it) by the second look. */
	for (int i = 0, zero = 0; i < 100 && zero < 2; i++) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		zero = atomic_load(&s->suspended) > 0 ? 0 : zero + 1;
		if (zero < 2)
			nanosleep(&ts, NULL);
		if (zero == 1)
			nanosleep(&ts, NULL);
	}
	if (atomic_load(&s->suspended) > 0) {
		/* Stopping the daemon now would abort the process inside libmicrohttpd. */
		log_msg(LOG_ERROR, "%d proxied connection(s) still suspended; exiting without "
		    "closing them", atomic_load(&s->suspended));
		_exit(3);
	}
	pthread_mutex_lock(&s->resume_mu);
	s->resume_off = true;
	pthread_mutex_unlock(&s->resume_mu);
	if (s->d)
		MHD_stop_daemon(s->d);
	pthread_mutex_lock(&s->pool_mu);
	s->pool_stop = true;
	for (size_t i = 0; i < s->npool; i++)
		pthread_cond_signal(&s->pool[i].cv);
	pthread_mutex_unlock(&s->pool_mu);
	for (size_t i = 0; i < s->npool; i++) {
		pthread_join(s->pool[i].t, NULL);
		pthread_cond_destroy(&s->pool[i].cv);
	}
	free(s);
}
