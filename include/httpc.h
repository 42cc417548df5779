/* httpc.h -- consentd's outbound HTTP client (libcurl): discovery, JWKS, token
 * endpoints.  Always with timeouts, a response size cap, TLS verification on,
 * no redirects followed, and plain http only to loopback hosts. */
#ifndef CS_HTTPC_H
#define CS_HTTPC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include "buf.h"
#include "cs_err.h"

#define HTTPC_MAX_RESPONSE (1u << 20)

struct httpc_response {          /* caller-owned; release with httpc_response_clear() */
	long        status;
	struct buf  body;            /* NUL-terminated */
	char       *content_type;    /* NULL when absent */
};

/* 1 when url is https, or http to 127.0.0.1, [::1] or localhost. */
int httpc_url_allowed(const char *url);

/* GET url with Accept: application/json.  CS_EINVAL for a URL that is not
 * allowed, CS_EIO for a transport failure or timeout, CS_ETOOBIG past the cap.
 * Non-2xx statuses are not errors: look at res->status. */
enum cs_err httpc_get(const char *url, struct httpc_response *res) CS_MUST_CHECK;
/* POST a form body (application/x-www-form-urlencoded).  basic_user and
 * basic_pass, when non-NULL, are sent as client_secret_basic (each
 * form-urlencoded before Base64, RFC 6749 §2.3.1). */
enum cs_err httpc_post_form(const char *url, const char *body, const char *basic_user,
    const char *basic_pass, struct httpc_response *res) CS_MUST_CHECK;
/* POST body_len bytes of body with Content-Type: content_type (a bare media
 * type such as "application/secevent+jwt": no parameters, no spaces; CS_EINVAL
 * otherwise) and Accept: application/json.  Same rules and errors as
 * httpc_get; look at res->status. */
enum cs_err httpc_post(const char *url, const char *content_type, const char *body,
    size_t body_len, struct httpc_response *res) CS_MUST_CHECK;
void httpc_response_clear(struct httpc_response *res);   /* NULL-safe; wipes the body */

/* Call once at start (curl_global_init) before threads exist. */
enum cs_err httpc_global_init(void) CS_MUST_CHECK;

/* --- general requests (the proxy, flow H) --------------------------------- */
#define HTTPC_MAX_REPLY_HEADERS 32
struct httpc_header { char *name, *value; };
struct httpc_reply {             /* caller-owned; release with httpc_reply_clear() */
	long        status;
	struct buf  body;            /* NUL-terminated; at most the request's max_body */
	struct httpc_header headers[HTTPC_MAX_REPLY_HEADERS];   /* of the final response */
	size_t      nheaders;
};
struct httpc_request {
	const char        *method;   /* GET HEAD POST PUT PATCH DELETE */
	const char        *url;      /* must pass httpc_url_allowed */
	const char *const *headers;  /* "Name: value" lines, NULL-terminated; no CR/LF */
	const char        *body;     /* NULL: none */
	size_t             body_len;
	size_t             max_body; /* response body cap (0: HTTPC_MAX_RESPONSE) */
	long               connect_timeout, timeout;   /* seconds (0: defaults) */
	bool               headers_only;   /* httpc_stream_open returns once the final
	                                      headers are in, without waiting for body
	                                      bytes (an event stream may be silent) */
};
/* One request on this thread's reused connection cache: no redirects followed
 * (a 3xx comes back as it is), TLS verified, timeouts, the response body and
 * headers capped (excess headers are dropped, never the status).  CS_EINVAL for
 * a URL or method that is not allowed or a header line with CR/LF, CS_EBUSY
 * for a timeout, CS_EIO for any other transport failure, CS_ETOOBIG past the
 * cap.  Any status is CS_OK: look at res->status. */
enum cs_err httpc_request(const struct httpc_request *rq, struct httpc_reply *res) CS_MUST_CHECK;

/* httpc_request with what a call to a configured service needs besides
 * (authzen.c): timeout_ms (> 0) bounds the whole call, connecting included
 * (rq's connect_timeout and timeout are then ignored), and ca_file, when not
 * NULL, names PEM CAs trusted besides the system's (libcurl keeps its CA
 * directory when CAINFO is set). */
struct httpc_call_opts {
	long        timeout_ms;
	const char *ca_file;
};
enum cs_err httpc_request_opts(const struct httpc_request *rq, const struct httpc_call_opts *o,
    struct httpc_reply *res) CS_MUST_CHECK;

/* The same request with its response body streamed: httpc_stream_open returns
 * once the final response's status and headers are in res and either the first
 * body bytes have arrived or the response is complete (so a Content-Length past
 * max_body, a refused connection or a timeout before the answer are still
 * errors here, as for httpc_request).  res->body stays empty: the body comes
 * from httpc_stream_read, max_body bytes at most in all.  The stream's curl
 * handles (a multi handle and its easy handle) are the thread's: taken from
 * those of its streams that ended, wiped with curl_easy_reset, or new; this
 * thread's connection cache is shared (CURLSH), so consecutive calls reuse
 * connections.  A stream must be read and closed on the thread that opened it. */
struct httpc_stream;
enum cs_err httpc_stream_open(const struct httpc_request *rq, struct httpc_reply *res,
    struct httpc_stream **out) CS_MUST_CHECK;
/* Copies up to max body bytes into dst: *got > 0, or *got == 0 at the end.
 * CS_EBUSY (timeout), CS_ETOOBIG (past max_body), CS_EIO (transport) or
 * CS_ENOMEM once the body cannot be completed. */
enum cs_err httpc_stream_read(struct httpc_stream *s, char *dst, size_t max, size_t *got)
    CS_MUST_CHECK;
/* httpc_stream_read, waiting at most wait_ms for bytes: CS_OK with *got 0
 * and *ended false when none came in that time; *ended true (and *got 0) at
 * the end.  For a stream read beside other work (an event stream relayed). */
enum cs_err httpc_stream_read_wait(struct httpc_stream *s, char *dst, size_t max, size_t *got,
    long wait_ms, bool *ended) CS_MUST_CHECK;
void httpc_stream_close(struct httpc_stream *s);    /* NULL-safe */
/* At shutdown: every stream's transfer (running or to come) fails within about
 * a second (CS_EIO), so that threads waiting on an upstream can be joined. */
void httpc_abort_all(void);
/* How many multi-and-easy handle pairs streams have made so far, all threads
 * together (a thread reuses its own: tests count them). */
unsigned long httpc_handles_made(void);
void httpc_reply_init(struct httpc_reply *res);
void httpc_reply_clear(struct httpc_reply *res);   /* NULL-safe; wipes the body */

/* --- a pinned GET (client metadata documents, cimd.c) --------------------- */
#define HTTPC_ERROR_MAX 256              /* CURL_ERROR_SIZE */
struct httpc_pinned_get {
	const char        *url;      /* https only (loopback too) */
	const char *const *addrs;    /* numeric addresses the URL's host is pinned to
	                                (CURLOPT_RESOLVE); NULL-terminated, at least one */
	/* Asked once more for every address curl is about to connect to: false
	 * refuses it (the call is then CS_EPERM). */
	bool             (*addr_ok)(const struct sockaddr *sa, void *arg);
	void              *addr_arg;
	const char        *accept;   /* the Accept header's value; no CR/LF */
	const char        *extra_ca_file;   /* PEM CAs trusted besides the system's; NULL: none */
	size_t             max_body; /* > 0 */
	long               connect_timeout_ms, timeout_ms;   /* > 0; timeout_ms is the whole call */
	char              *error;    /* NULL, or HTTPC_ERROR_MAX bytes for curl's reason */
};
/* One GET on a handle of its own: nothing shared with any other call
 * (connections, DNS, TLS sessions), the host resolved only to rq->addrs, no
 * proxy, no redirects followed (a 3xx comes back as it is), TLS verified, the
 * body capped at max_body.  CS_EINVAL for a bad request or a URL that is not
 * https, CS_EPERM when addr_ok refused an address, CS_EBUSY for a timeout,
 * CS_ETOOBIG past the cap, CS_EIO for any other transport failure (rq->error
 * says which).  Any status is CS_OK: look at res->status and res->headers. */
enum cs_err httpc_get_pinned(const struct httpc_pinned_get *rq, struct httpc_reply *res)
    CS_MUST_CHECK;
#endif
