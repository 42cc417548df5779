/* http.c -- libmicrohttpd glue: the only file that includes <microhttpd.h>.
 * Turns a connection into a struct http_request (raw URI, capped body, headers),
 * hands it to the router and sends the struct http_reply back, with security
 * headers and one JSON access-log line.  Never logs a query string or a body. */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <microhttpd.h>
#include <openssl/rand.h>
#include "app.h"
#include "http.h"

#define HTTP_MAX_URI 8192
#define HTTP_CONN_MEMORY (64u * 1024)   /* bounds the request line and headers */
#define HTTP_CONN_LIMIT 1024

struct http_server {
	struct MHD_Daemon *d;
	struct app        *app;
	atomic_int         stopping;
	atomic_uint        in_flight;   /* requests begun and not yet completed */
};

struct conn_ctx {
	char           *raw_uri;       /* as the client sent it, before any decoding */
	struct buf      body;
	int             started;
	int             too_big;
	int             bad_header;    /* a field name that is not an RFC 9110 token */
	struct timespec t0;
};

static void *uri_logger(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct http_server *srv = cls;
	struct conn_ctx *ctx = calloc(1, sizeof *ctx);
	(void)c;
	if (ctx == NULL)
		return NULL;
	clock_gettime(CLOCK_MONOTONIC, &ctx->t0);
	buf_init(&ctx->body, srv->app->cfg->max_body);
	ctx->raw_uri = strndup(uri, HTTP_MAX_URI + 1);
	atomic_fetch_add(&srv->in_flight, 1);
	return ctx;
}

static void completed(void *cls, struct MHD_Connection *c, void **req_cls,
    enum MHD_RequestTerminationCode toe)
{
	struct http_server *srv = cls;
	struct conn_ctx *ctx = *req_cls;
	(void)c; (void)toe;
	if (ctx == NULL)
		return;
	atomic_fetch_sub(&srv->in_flight, 1);
	buf_wipe_clear(&ctx->body);     /* bodies may hold secrets */
	free(ctx->raw_uri);
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

static void remote_ip(struct MHD_Connection *c, char *out, size_t outlen)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	snprintf(out, outlen, "-");
	if (ci == NULL || ci->client_addr == NULL)
		return;
	if (ci->client_addr->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)ci->client_addr)->sin_addr,
		    out, (socklen_t)outlen);
	else if (ci->client_addr->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)ci->client_addr)->sin6_addr,
		    out, (socklen_t)outlen);
}

static void new_request_id(char out[17])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char r[8];
	if (RAND_bytes(r, sizeof r) != 1)
		memset(r, 0, sizeof r);
	for (int i = 0; i < 8; i++) {
		out[2 * i] = hex[r[i] >> 4];
		out[2 * i + 1] = hex[r[i] & 15];
	}
	out[16] = '\0';
}

/* One JSON line per request.  SECURITY: the path only, never the query (it may
 * carry an authorization code), never a header value or a body. */
static void access_log(struct http_server *srv, const struct conn_ctx *ctx, const char *ip,
    const char *method, const char *path, const char *rid, int status, size_t bytes)
{
	FILE *f = srv->app->access_log;
	struct timespec t1;
	struct buf b;
	time_t now = time(NULL);
	struct tm tm;
	char ts[32];
	if (f == NULL)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ms = (double)(t1.tv_sec - ctx->t0.tv_sec) * 1e3 +
	    (double)(t1.tv_nsec - ctx->t0.tv_nsec) / 1e6;
	gmtime_r(&now, &tm);
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
	buf_init(&b, 4 * HTTP_MAX_URI);
	if (buf_printf(&b, "{\"ts\":\"%s\",\"rid\":\"%s\",\"ip\":", ts, rid) == CS_OK &&
	    buf_json_str(&b, ip) == CS_OK && buf_puts(&b, ",\"method\":") == CS_OK &&
	    buf_json_str(&b, method) == CS_OK && buf_puts(&b, ",\"path\":") == CS_OK &&
	    buf_json_str(&b, path) == CS_OK &&
	    buf_printf(&b, ",\"status\":%d,\"bytes\":%zu,\"ms\":%.3f}\n", status, bytes, ms) == CS_OK) {
		flockfile(f);
		fwrite(b.data, 1, b.len, f);
		fflush(f);
		funlockfile(f);
	}
	buf_clear(&b);
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

static enum MHD_Result send_reply(struct http_server *srv, struct MHD_Connection *c,
    struct conn_ctx *ctx, const char *method, const char *path, const char *rid,
    struct http_reply *rep)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	char ip[INET6_ADDRSTRLEN];
	if (router_security_headers(srv->app, rep) != CS_OK ||
	    reply_header(rep, "X-Request-Id", rid) != CS_OK) {
		reply_clear(rep);
		reply_init(rep);
		rep->status = 500;
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
		resp = MHD_create_response_from_buffer(rep->body.len,
		    rep->body.data ? rep->body.data : (char *)"", MHD_RESPMEM_MUST_COPY);
	}
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
	access_log(srv, ctx, ip, method, path, rid, rep->status, rep->body.len);
	return ret;
}

/* Splits the raw URI into a NUL-terminated path and query inside *copy. */
static int split_uri(const char *raw, char **copy, const char **path, const char **query)
{
	char *q;
	if (raw == NULL || raw[0] != '/' || strlen(raw) > HTTP_MAX_URI)
		return 0;
	*copy = strdup(raw);
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

static enum route_kind kind_of_path(const char *path)
{
	if (strcmp(path, "/token") == 0 || strcmp(path, "/introspect") == 0 ||
	    strcmp(path, "/revoke") == 0 || strncmp(path, "/proxy/", 7) == 0)
		return ROUTE_OAUTH;
	return strncmp(path, "/admin/api/", 11) == 0 ? ROUTE_API : ROUTE_BROWSER;
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
		if (!ctx->too_big && !ctx->bad_header)
			return MHD_YES;        /* wait for the body */
	} else if (*upload_data_size > 0) {
		if (!ctx->too_big && buf_append(&ctx->body, upload_data, *upload_data_size) != CS_OK)
			ctx->too_big = 1;
		*upload_data_size = 0;
		return MHD_YES;
	}

	memset(&req, 0, sizeof req);
	reply_init(&rep);
	new_request_id(req.request_id);
	if (!split_uri(ctx->raw_uri, &uricopy, &path, &query)) {
		path = "-";
		if (reply_html_error(&rep, 400, "Bad request", "The address is malformed.") != CS_OK)
			rep.status = 400;
		goto send;
	}
	if (ctx->bad_header || ctx->too_big) {
		enum route_kind k = kind_of_path(path);
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
	req.now = app_now();
	req.app = srv->app;
	router_dispatch(http_routes, &req, &rep);
	http_request_clear(&req);
send:
	ret = send_reply(srv, c, ctx, method, path, req.request_id, &rep);
	reply_clear(&rep);
	free(uricopy);
	return ret;
}

enum cs_err http_start(struct app *app, struct http_server **out)
{
	const struct config *cfg = app->cfg;
	struct http_server *srv = calloc(1, sizeof *srv);
	struct sockaddr_in a4;
	struct sockaddr_in6 a6;
	const struct sockaddr *sa;
	unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG;
	const char *host = cfg->listen_host;

	if (srv == NULL)
		return CS_ENOMEM;
	srv->app = app;
	memset(&a4, 0, sizeof a4);
	memset(&a6, 0, sizeof a6);
	if (strcmp(host, "localhost") == 0)
		host = "127.0.0.1";
	if (strchr(host, ':') != NULL) {          /* config stores IPv6 without brackets */
		if (inet_pton(AF_INET6, host, &a6.sin6_addr) != 1)
			goto bad;
		a6.sin6_family = AF_INET6;
		a6.sin6_port = htons(cfg->listen_port);
		sa = (const struct sockaddr *)&a6;
		flags |= MHD_USE_IPv6;
	} else {
		if (inet_pton(AF_INET, host, &a4.sin_addr) != 1)
			goto bad;
		a4.sin_family = AF_INET;
		a4.sin_port = htons(cfg->listen_port);
		sa = (const struct sockaddr *)&a4;
	}
	srv->d = MHD_start_daemon(flags, cfg->listen_port, NULL, NULL, on_request, srv,
	    MHD_OPTION_SOCK_ADDR, sa,
	    MHD_OPTION_THREAD_POOL_SIZE, (unsigned)(cfg->threads ? cfg->threads : 1),
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONN_LIMIT,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->per_ip_connections,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->idle_timeout,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY,
	    MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
	    MHD_OPTION_URI_LOG_CALLBACK, uri_logger, srv,
	    MHD_OPTION_NOTIFY_COMPLETED, completed, srv,
	    MHD_OPTION_END);
	if (srv->d == NULL) {
		fprintf(stderr, "consentd: cannot listen on %s:%u\n", cfg->listen_host,
		    (unsigned)cfg->listen_port);
		free(srv);
		return CS_EIO;
	}
	*out = srv;
	return CS_OK;
bad:
	fprintf(stderr, "consentd: listen address %s is not an IP address\n", cfg->listen_host);
	free(srv);
	return CS_ECONFIG;
}

void http_quiesce(struct http_server *s)
{
	if (s == NULL || s->d == NULL)
		return;
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
	if (s->d)
		MHD_stop_daemon(s->d);
	free(s);
}
