/* http.h -- consentd's HTTP core.  Only http.c includes <microhttpd.h>: it turns
 * connections into a plain struct http_request and sends a struct http_reply,
 * so every handler and the router are testable without a socket. */
#ifndef CS_HTTP_H
#define CS_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "buf.h"
#include "cs_err.h"
#include "form.h"
#include "rate_limits.h"

struct app;

enum http_method { HTTP_GET = 0, HTTP_HEAD, HTTP_POST, HTTP_PUT, HTTP_DELETE, HTTP_PATCH,
	HTTP_OPTIONS, HTTP_METHOD__MAX };

/* What kind of client a route serves decides how bad input is answered and
 * which parameters are tolerated. */
enum route_kind {
	ROUTE_PUBLIC = 0,   /* metadata, health: JSON, unknown parameters ignored */
	ROUTE_OAUTH,        /* RFC 6749 endpoints: JSON errors, unknown parameters ignored */
	ROUTE_BROWSER,      /* pages: HTML errors, unknown parameters refused, POSTs same-origin */
	ROUTE_API,          /* admin JSON API: JSON errors, unknown parameters refused */
	ROUTE_KIND__MAX
};

/* Who may call a route: the router runs this class's gate (routes.c's
 * http_gates) before the handler, and the handler runs only when it let the
 * request through, with the identity it established in req->auth. */
enum route_auth {
	ROUTE_AUTH_NONE = 0,     /* anyone: no session is read (req->auth stays empty) */
	ROUTE_AUTH_SESSION,      /* a person signed in: else a 303 to sign-in that comes back */
	/* A person's form POST: the session and the form's "csrf" (the route's
	 * first parameter) matching it: else a 401 page saying how to sign in
	 * again (routes.c's words for the route), or a 403 for a stale form. */
	ROUTE_AUTH_SESSION_FORM,
	/* The provider's answer (/oauth/callback/{resource}): the session that
	 * began the connection, else a 400 page (the session ended meanwhile). */
	ROUTE_AUTH_SESSION_CALLBACK,
	/* The session when there is one (req->auth.session NULL when not, or
	 * without a store): never refuses.  The front page, the sign-out. */
	ROUTE_AUTH_SESSION_OPTIONAL,
	ROUTE_AUTH_ADMIN_PAGE,   /* an admin's browser session with a recent enough login */
	ROUTE_AUTH_ADMIN_STEPUP, /* the same with a login from the last few minutes (bulk) */
	ROUTE_AUTH_ADMIN_API,    /* Authorization: Bearer <admin token>, never a cookie */
	ROUTE_AUTH_GATEWAY,      /* the gateway's client authentication (client_auth.c) */
	ROUTE_AUTH_METRICS,      /* the gateway's, or Authorization: Bearer <[metrics] token> */
	/* /token and /revoke: the gateway's client authentication, or a request
	 * an MCP client makes (mcp_token_request_is_client: its own client_id,
	 * no Authorization header), let through under the address's [limits]
	 * buckets for mcp_token.c to authenticate with the client's registration. */
	ROUTE_AUTH_TOKEN_CLIENT,
	ROUTE_AUTH__MAX
};

#define PARAM_REQUIRED 0x1u
/* A family of n parameters, name0 .. name<n-1> (decimal, no leading zero),
 * each checked by the same type; read with http_arg_family.  n <= 64. */
#define PARAM_FAMILY(n) ((unsigned)(n) << 8)
#define PARAM_FAMILY_COUNT(flags) (((flags) >> 8) & 0xffu)

/* What a parameter's value is once the router has checked it (as kcgi's
 * kvalid): declared once per type in routes.c, never re-parsed by a handler. */
enum param_kind {
	PARAM_STRING = 0,        /* text, checked by valid (when set) */
	PARAM_INT,               /* decimal digits only, min..max; read with http_arg_int */
	PARAM_WORD,              /* exactly one of words (a NULL-ended list); num is its index */
	PARAM_ON,                /* a checkbox: present means "on", the only value accepted */
	PARAM_KIND__MAX
};

struct param_type {
	enum param_kind    kind;
	bool             (*valid)(const char *v);   /* PARAM_STRING: NULL accepts any */
	int64_t            min, max;                /* PARAM_INT */
	const char *const *words;                   /* PARAM_WORD */
};

struct param_spec {
	const char *name;
	size_t      max_len;                 /* bytes after decoding */
	/* An array of one (so that a table names it as one word); NULL: any text
	 * (already valid UTF-8, no NUL). */
	const struct param_type *type;
	unsigned    flags;
};

/* The string types the route tables share (reply.c). */
extern const struct param_type param_printable[1];   /* valid_printable */
extern const struct param_type param_token68[1];     /* valid_token68 */
extern const struct param_type param_return_to[1];   /* valid_return_to */

#define ROUTE_MAX_CAPTURES 4
/* The longest a {x} capture may be once decoded (a trailing {rest*} excepted):
 * every id consentd makes is 22 characters and every configured name at most
 * 64, so a longer one names nothing; the router answers 404 in the route's
 * kind before its gate or handler sees it (a handler's fixed buffers never
 * meet it). */
#define ROUTE_CAPTURE_MAX 256
#define HTTP_MAX_URI 8192               /* bytes of a request target; 400 past it */
#define ROUTE_MAX_PARAMS 24
/* The position of "csrf" in a form route's parameters (ROUTE_AUTH_SESSION_FORM
 * and the admin pages' forms): their gates and handlers read it there. */
#define ROUTE_CSRF_PARAM 0u
#define PARAM_FAMILY_MAX 64       /* a family's count fits a uint64_t's bits */
#define HTTP_MAX_HEADERS 16

struct route;
struct session;
struct grant_check;

/* A parameter as the router checked it: the decoded value (NULL: absent),
 * the number of a PARAM_INT or the index of a PARAM_WORD, and for a family
 * which members were present (bit i: name<i>). */
struct param_value {
	const char *str;
	int64_t     num;
	uint64_t    members;
};

/* Who the route's gate established (ROUTE_AUTH_NONE: nobody); freed with
 * the request. */
#define HTTP_ACTOR_MAX 300
struct http_auth {
	/* Who the audit names as the caller, "user:<subject>", "admin:<token
	 * name>" or "gateway:<id>", set by the router once the gate let the
	 * request through ("" for ROUTE_AUTH_NONE): no handler formats it. */
	char            actor[HTTP_ACTOR_MAX];
	/* SESSION*, ADMIN_PAGE, ADMIN_STEPUP (NULL for SESSION_OPTIONAL without one) */
	struct session *session;
	char           *admin;               /* ADMIN_API: the admin token's name */
	bool            gateway;             /* GATEWAY */
	/* The grant the gateway presented, validated (grant.h), where the route
	 * checks one (struct route's grant); freed with the request. */
	struct grant_check *grant;
};

struct http_request {
	enum http_method method;
	const char *path;                    /* raw path, without the query */
	const char *query;                   /* raw query ("" when none) */
	char       *captures[ROUTE_MAX_CAPTURES];   /* percent-decoded {x} segments, in one piece */
	char       *capture_block;           /* that piece when it came from the heap (no arena) */
	struct arena *arena;                 /* request-lifetime memory (arena.h): the
	                                        connection's, or a deferred job's own;
	                                        NULL in unit tests (the heap) */
	size_t      ncaptures;
	struct form params;                  /* validated: only declared names, no duplicates */
	const struct route *route;           /* the route that answers (set by the router) */
	struct param_value values[ROUTE_MAX_PARAMS];   /* typed, by position in route->params */
	struct http_auth auth;               /* set by the route's gate */
	const char *body;                    /* raw body (NUL-terminated), may be NULL */
	size_t      body_len;
	const char *content_type, *cookie, *origin, *sec_fetch_site, *authorization, *host;
	char        remote_ip[46];           /* the peer's address as text (INET6_ADDRSTRLEN); "-" unknown */
	char        request_id[17];
	int64_t     now;
	struct app *app;
	/* Any other request header, by name (case-insensitive); NULL when absent. */
	const char *(*header)(void *hctx, const char *name);
	/* The i-th request header (0-based) into *name and *value; false past
	 * the last.  NULL where the request's headers cannot be listed (a route
	 * that is not deferred). */
	bool (*header_nth)(void *hctx, size_t i, const char **name, const char **value);
	void       *hctx;
};

struct http_header { char *name; char *value; };

/* Header names and values live in the reply itself up to this many bytes
 * (a reply's own headers fit many times), and on the heap past it: no
 * allocation per header on the hot paths. */
#define HTTP_REPLY_HEADER_BYTES 2048

struct http_reply {                      /* initialise with reply_init(), free with reply_clear();
                                            never copied (headers may point into hmem) */
	int          status;
	const char  *content_type;           /* static string */
	struct buf   body;
	struct http_header headers[HTTP_MAX_HEADERS];
	size_t       nheaders;
	char         hmem[HTTP_REPLY_HEADER_BYTES];
	size_t       hmem_used;
	int          cache_max_age;          /* < 0: Cache-Control: no-store (the default) */
	/* A body produced while it is sent (the proxy's upstream answer), instead of
	 * body: read() copies up to max bytes and returns CS_OK with *got == 0 at the
	 * end, or an error, which cuts the connection (the status is already sent);
	 * done() frees ctx exactly once, whether the reply was sent or not.  Called on
	 * the worker thread that ran the handler. */
	struct reply_stream {
		void        *ctx;
		enum cs_err (*read)(void *ctx, char *dst, size_t max, size_t *got);
		void        (*done)(void *ctx);
	} stream;
	/* What the log line says of this answer besides its status -- never a
	 * token: the route pattern that answered (set by the router), the error
	 * code and description sent (reply_oauth_error and reply_error set them;
	 * other error bodies call reply_log_error), and the configured agent and
	 * resource the call was about (pointers into the configuration, which
	 * outlives every reply). */
	struct reply_log {
		const char *route;
		const char *agent, *resource;
		char        error[48];
		char        description[200];
	} log;
};

typedef enum cs_err (*http_handler)(const struct http_request *, struct http_reply *);
/* An authentication gate: CS_OK with *ok true lets req through (req->auth
 * filled); CS_OK with *ok false leaves the complete refusal in rep; an error
 * is a failure (a 500 of the route's kind). */
typedef enum cs_err (*http_gate)(struct http_request *req, struct http_reply *rep, bool *ok);

struct route {
	enum http_method  method;
	const char       *pattern;           /* "/consent/{id}"; a final "{rest*}" takes the rest raw */
	enum route_kind   kind;
	http_handler      handler;
	struct param_spec params[ROUTE_MAX_PARAMS];   /* ends at a NULL name */
	unsigned          flags;
	enum route_auth   auth;              /* the gate the router runs before the handler */
	/* The [limits] class the router applies (rate_limits.h): LIMIT_ADDRESS
	 * before the gate, LIMIT_GATEWAY after it let the gateway in. */
	enum limit_class  limit;
};
#define ROUTE_FORM_BODY 0x1u     /* POST body is application/x-www-form-urlencoded */
#define ROUTE_JSON_BODY 0x2u     /* POST body is application/json (kept raw for the handler) */
#define ROUTE_DEFERRED  0x4u     /* waits on an upstream: run off the server's workers (http.c) */
/* The gateway presents a grant besides its own credentials (the proxy):
 * http_grant_check runs after the gate and the limit, before the handler --
 * for a deferred route before the request may wait for a pool thread. */
#define ROUTE_GRANT     0x8u
/* With ROUTE_GRANT: the grant comes as the form's subject token (/token's
 * provider-token exchange, RFC 8693) rather than in headers (/proxy). */
#define ROUTE_GRANT_SUBJECT 0x10u
/* The liveness and readiness probes (/healthz, /readyz): what the stand-in
 * that waits for `consentd migrate` (http.c) answers on them instead of 503. */
#define ROUTE_PROBE_LIVE  0x20u
#define ROUTE_PROBE_READY 0x40u
/* A page an OAuth client sends the browser to (/authorize, issue #30): HTML
 * errors as any page, but unknown parameters ignored (RFC 6749 §3.1). */
#define ROUTE_UNKNOWN_IGNORED 0x80u


/* The kind of answer for a path no route matches: the first prefix that
 * starts it, else ROUTE_BROWSER.  Ends at a NULL prefix. */
struct route_prefix {
	const char     *prefix;
	enum route_kind kind;
};

/* The route table (routes.c), ending with a NULL pattern; the gate of each
 * authentication class (NULL for ROUTE_AUTH_NONE); the unmatched paths' kinds. */
extern const struct route http_routes[];
/* The table of [metrics] listen: GET /metrics alone, without authentication
 * (the address is meant to be private). */
extern const struct route http_metrics_routes[];
extern const http_gate http_gates[ROUTE_AUTH__MAX];
/* The check of ROUTE_GRANT routes (grant_api.c grant_api_gate): req->auth.grant
 * holds the grant when it lets the request through (NULL when the request
 * presents none). */
extern const http_gate http_grant_check;
extern const struct route_prefix http_route_prefixes[];

/* --- replies (reply.c, below the route table: the router, routes.c and every
 * handler answer with them) ------------------------------------------------ */
#define REPLY_MAX_BODY (4u * 1024 * 1024)
void reply_init(struct http_reply *r);
void reply_clear(struct http_reply *r);
enum cs_err reply_header(struct http_reply *r, const char *name, const char *value) CS_MUST_CHECK;
/* Sets a JSON body (status, content type, no-store). */
enum cs_err reply_json(struct http_reply *r, int status, const char *json) CS_MUST_CHECK;
/* The same with v serialised compactly; takes v's reference (NULL: CS_ENOMEM) and
 * wipes the serialised copy (token responses hold secrets). */
struct json_t;
enum cs_err reply_json_value(struct http_reply *r, int status, struct json_t *v) CS_MUST_CHECK;
/* RFC 6749 §5.2 error: {"error":code,"error_description":desc}; desc may be NULL. */
enum cs_err reply_oauth_error(struct http_reply *r, int status, const char *code,
    const char *desc) CS_MUST_CHECK;
/* Records code and desc (may be NULL) for the log line (see struct reply_log). */
void reply_log_error(struct http_reply *r, const char *code, const char *desc);
/* What a client polls on while a person decides (a consent or an approval
 * request): its id under id_key, the page that asks the person under uri_key,
 * and the request's expires_in and interval. */
struct reply_pending {
	const char *id_key, *id;       /* id NULL: no request to name */
	const char *uri_key, *uri;
	int64_t     expires_in, interval;
};
/* The RFC 6749 §5.2 error {"error":code,"error_description":desc} of such a
 * wait, logged as reply_oauth_error logs, with p's four members when p->id is
 * not NULL. */
enum cs_err reply_oauth_pending(struct http_reply *r, int status, const char *code,
    const char *desc, const struct reply_pending *p) CS_MUST_CHECK;
/* An HTML page for people: title and message are escaped text. */
enum cs_err reply_html_error(struct http_reply *r, int status, const char *title,
    const char *message) CS_MUST_CHECK;
/* The right error shape for the route kind (JSON for OAuth/API/public, HTML for pages). */
enum cs_err reply_error(struct http_reply *r, enum route_kind kind, int status,
    const char *code, const char *desc) CS_MUST_CHECK;
/* The 429 of [limits] class k for a route of kind kind: a page for people,
 * RFC 6749-shaped JSON (too_many_requests, naming the class) otherwise, and
 * Retry-After in whole seconds (at least 1). */
enum cs_err reply_limit_refusal(struct http_reply *rep, enum route_kind kind, enum limit_class k,
    int64_t retry_after) CS_MUST_CHECK;

/* --- routing (router.c; pure, no sockets) ------------------------------- */
/* Dispatches a request whose method, path, query, body and headers are filled:
 * finds the route (404; 405 with Allow), checks same-origin for browser POSTs,
 * parses and validates parameters (duplicates, unknown, oversized, invalid,
 * missing) into their typed values, runs the route's authentication gate
 * (http_gates) and, when it lets the request through, the handler.  Always
 * leaves a complete reply in *rep: a gate or handler failure becomes a 500 of
 * the route's kind. */
void router_dispatch(const struct route *table, struct http_request *req, struct http_reply *rep);
/* router_dispatch in two halves, for a deferred route (http.c): router_admit
 * does everything before the handler -- route, limits, parameters, the gate
 * and the route's grant check -- on the connection's thread.  false: rep
 * holds the complete answer (a refusal); true: rep is untouched and
 * router_handle runs req->route's handler (on a pool thread), with req and
 * rep as router_admit left them. */
bool router_admit(const struct route *table, struct http_request *req, struct http_reply *rep);
void router_handle(struct http_request *req, struct http_reply *rep);

/* The first route whose pattern matches path, whatever its method; NULL: none. */
const struct route *router_route_for_path(const struct route *table, const char *path);
/* The kind of answer path gets: its route's, or http_route_prefixes' for an
 * unknown path (errors answered before routing, 404 and 405 use it). */
enum route_kind router_kind_for_path(const struct route *table, const char *path);
/* Typed parameters read by index (reply.c, as kcgi's fieldmap[KEY_X]): a route's
 * handler header declares an enum of its parameters' positions, and routes.c
 * declares them with designated initializers ([ME_REVOKE_CSRF] = { "csrf",
 * ... }), so an index names the parameter the table checked.  The router
 * already refused what is missing, unknown or invalid.  http_arg: the value
 * at idx, NULL when absent (or idx past the route's parameters). */
const struct param_value *http_arg(const struct http_request *req, unsigned idx);
/* Its text (NULL when absent). */
const char *http_arg_str(const struct http_request *req, unsigned idx);
/* A present PARAM_INT's number, or a PARAM_WORD's index, into *out: true;
 * false when absent. */
bool http_arg_int(const struct http_request *req, unsigned idx, int64_t *out);
/* A family's members present (bit i: name<i>); 0 when none. */
uint64_t http_arg_family(const struct http_request *req, unsigned idx);
/* The Content-Security-Policy for app's configuration (NULL: our own origin
 * alone) into out.  It depends on the configuration only, so the HTTP server
 * computes it once at start instead of per answer.  CS_ETOOBIG past outsz. */
#define ROUTER_CSP_MAX 2048
enum cs_err router_csp(const struct app *app, char *out, size_t outsz) CS_MUST_CHECK;
/* Adds the security headers every response carries (CSP, framing, nosniff,
 * referrer policy, cache control, HSTS for https).  csp: router_csp's answer
 * for app, or NULL to compute it here. */
enum cs_err router_security_headers(const struct app *app, const char *csp,
    struct http_reply *rep) CS_MUST_CHECK;
void http_request_clear(struct http_request *req);   /* frees captures and params */
const char *http_method_name(enum http_method m);   /* reply.c */

/* --- validators for param_spec (reply.c) ------------------------------- */
bool valid_token68(const char *v);      /* opaque token characters (RFC 7235 token68 + '.') */
bool valid_printable(const char *v);    /* no control characters */

/* --- the server (http.c) ----------------------------------------------- */
struct http_server;
/* Starts libmicrohttpd with an internal epoll thread pool per the config. */
enum cs_err http_start(struct app *app, struct http_server **out) CS_MUST_CHECK;
/* While a node waits for `consentd migrate` (a PostgreSQL schema older than
 * it knows), a stand-in on [server] listen answers /healthz 200, /readyz 503
 * and everything else 503 temporarily_unavailable; stopped before
 * http_start takes the address. */
struct http_waiter;
enum cs_err http_waiter_start(const struct config *cfg, struct http_waiter **out) CS_MUST_CHECK;
void http_waiter_stop(struct http_waiter *w);
/* Stops accepting new connections (in-flight ones continue). */
void http_quiesce(struct http_server *s);
/* Requests begun and not yet answered (idle keep-alive connections do not count). */
unsigned http_in_flight(struct http_server *s);
/* Stops the daemon, closing what is left.  NULL-safe. */
void http_stop(struct http_server *s);

#endif
