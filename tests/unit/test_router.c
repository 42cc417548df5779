/* test_router.c -- the pure router against a route table built here: matching
 * and captures, 404/405, parameter validation per route kind, same-origin
 * checks for browser POSTs, handler failures, security headers and header
 * injection.  Handlers echo what they were given, so every test can see
 * exactly which route ran and which values got through.  It also covers
 * reply.c, the replies and typed parameters the router and handlers share. */
#include <strings.h>
#include <jansson.h>

#include "arena.h"
#include "testutil.h"
#include "app.h"
#include "config.h"
#include "form.h"
#include "http.h"

/* --- handlers ------------------------------------------------------------ */

/* Writes "route=NAME|cap=C...|name=value..." (and "|body=RAW" for JSON routes). */
static enum cs_err echo(const struct http_request *req, struct http_reply *rep, const char *name)
{
	enum cs_err e;
	rep->status = 200;
	rep->content_type = "text/plain; charset=utf-8";
	if ((e = buf_printf(&rep->body, "route=%s", name)) != CS_OK)
		return e;
	for (size_t i = 0; i < req->ncaptures; i++)
		if ((e = buf_printf(&rep->body, "|cap=%s", req->captures[i])) != CS_OK)
			return e;
	for (size_t i = 0; i < req->params.n; i++)
		if ((e = buf_printf(&rep->body, "|%s=%s", req->params.p[i].name,
		    req->params.p[i].value)) != CS_OK)
			return e;
	if (req->body && strcmp(name, "api") == 0)
		e = buf_printf(&rep->body, "|body=%.*s", (int)req->body_len, req->body);
	return e;
}

static enum cs_err h_public(const struct http_request *q, struct http_reply *r) { return echo(q, r, "public"); }
static enum cs_err h_token(const struct http_request *q, struct http_reply *r) { return echo(q, r, "token"); }
static enum cs_err h_page(const struct http_request *q, struct http_reply *r) { return echo(q, r, "page"); }
static enum cs_err h_form(const struct http_request *q, struct http_reply *r) { return echo(q, r, "form"); }
static enum cs_err h_api(const struct http_request *q, struct http_reply *r) { return echo(q, r, "api"); }
static enum cs_err h_two(const struct http_request *q, struct http_reply *r) { return echo(q, r, "two"); }

/* Half-writes a reply, then fails: none of it may reach the client. */
static enum cs_err h_fail(const struct http_request *q, struct http_reply *r)
{
	(void)q;
	r->status = 201;
	r->content_type = "text/plain";
	if (buf_puts(&r->body, "PARTIAL-SECRET-BODY") != CS_OK ||
	    reply_header(r, "X-Partial", "leaked") != CS_OK)
		return CS_ENOMEM;
	return CS_EIO;
}

/* Returns success without setting a status: also a handler bug. */
static enum cs_err h_nostatus(const struct http_request *q, struct http_reply *r)
{
	(void)q;
	return buf_puts(&r->body, "PARTIAL-NO-STATUS");
}

static bool valid_hint(const char *v)
{
	if (*v == '\0')
		return false;
	for (; *v; v++)
		if (*v < 'a' || *v > 'z')
			return false;
	return true;
}

static const struct param_type hint_type[1] = { { .kind = PARAM_STRING, .valid = valid_hint } };

#define NO_PARAMS { { NULL, 0, NULL, 0 } }

static const struct route table[] = {
	{ HTTP_GET, "/status", ROUTE_PUBLIC, h_public, NO_PARAMS, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_POST, "/token", ROUTE_OAUTH, h_token,
	  { { "grant_type", 64, param_token68, PARAM_REQUIRED },
	    { "hint", 8, hint_type, 0 },
	    { NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, "/consent/{id}", ROUTE_BROWSER, h_page,
	  { { "return_to", 512, param_return_to, 0 },
	    { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_POST, "/consent/{id}", ROUTE_BROWSER, h_form,
	  { { "decision", 16, param_printable, PARAM_REQUIRED },
	    { "note", 32, param_printable, 0 },
	    { NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_POST, "/admin/api/things", ROUTE_API, h_api, NO_PARAMS, ROUTE_JSON_BODY, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, "/a/{x}/b/{y}", ROUTE_PUBLIC, h_two, NO_PARAMS, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, "/fail", ROUTE_BROWSER, h_fail, NO_PARAMS, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_POST, "/oauth-fail", ROUTE_OAUTH, h_fail, NO_PARAMS, ROUTE_FORM_BODY, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, "/nostatus", ROUTE_PUBLIC, h_nostatus, NO_PARAMS, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, NULL, 0, NULL, NO_PARAMS, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
};

/* --- request and reply helpers ------------------------------------------- */

static struct config test_cfg;
static struct app test_app;

static void setup(void)
{
	memset(&test_cfg, 0, sizeof test_cfg);
	memset(&test_app, 0, sizeof test_app);
	test_cfg.public_url = (char *)"http://127.0.0.1:8080";
	test_cfg.public_url_is_https = false;
	test_app.cfg = &test_cfg;
}

#define FORM_CT "application/x-www-form-urlencoded"

static void req_get(struct http_request *r, enum http_method m, const char *path, const char *query)
{
	memset(r, 0, sizeof *r);
	r->method = m;
	r->path = path;
	r->query = query;
	r->app = &test_app;
	r->now = 1700000000;
}

static void req_post(struct http_request *r, const char *path, const char *ct, const char *body)
{
	req_get(r, HTTP_POST, path, "");
	r->content_type = ct;
	r->body = body;
	r->body_len = body ? strlen(body) : 0;
}

/* A browser POST from our own page. */
static void req_form(struct http_request *r, const char *path, const char *body)
{
	req_post(r, path, FORM_CT, body);
	r->origin = "http://127.0.0.1:8080";
	r->sec_fetch_site = "same-origin";
}

static void run_table(const struct route *t, struct http_request *req, struct http_reply *rep)
{
	reply_init(rep);
	router_dispatch(t, req, rep);
}

static void run(struct http_request *req, struct http_reply *rep)
{
	run_table(table, req, rep);
}

static void done(struct http_request *req, struct http_reply *rep)
{
	reply_clear(rep);
	http_request_clear(req);
	ck_assert_uint_eq(req->ncaptures, 0);
	ck_assert_uint_eq(req->params.n, 0);
}

static const char *body(const struct http_reply *rep)
{
	return rep->body.data ? rep->body.data : "";
}

static const char *hdr(const struct http_reply *rep, const char *name)
{
	for (size_t i = 0; i < rep->nheaders; i++)
		if (strcasecmp(rep->headers[i].name, name) == 0)
			return rep->headers[i].value;
	return NULL;
}

static size_t hdr_count(const struct http_reply *rep, const char *name)
{
	size_t n = 0;
	for (size_t i = 0; i < rep->nheaders; i++)
		if (strcasecmp(rep->headers[i].name, name) == 0)
			n++;
	return n;
}

/* The handler ran and echoed exactly want. */
static void assert_ok(const struct http_reply *rep, const char *want)
{
	ck_assert_int_eq(rep->status, 200);
	ck_assert_str_eq(body(rep), want);
}

/* A JSON error reply: status, {"error":code, ...}; returns nothing, checks all. */
static void assert_json_error(const struct http_reply *rep, int status, const char *code)
{
	json_error_t err;
	ck_assert_int_eq(rep->status, status);
	ck_assert_ptr_nonnull(rep->content_type);
	ck_assert_str_eq(rep->content_type, "application/json");
	json_t *v = json_loads(body(rep), 0, &err);
	ck_assert_msg(v != NULL, "not JSON: %s (%s)", body(rep), err.text);
	ck_assert(json_is_object(v));
	ck_assert_str_eq(json_string_value(json_object_get(v, "error")), code);
	json_t *d = json_object_get(v, "error_description");
	ck_assert(d == NULL || json_is_string(d));
	json_decref(v);
	ck_assert_ptr_null(strstr(body(rep), "route="));
}

/* An HTML error page of the given status. */
static void assert_html_error(const struct http_reply *rep, int status)
{
	ck_assert_int_eq(rep->status, status);
	ck_assert_ptr_nonnull(rep->content_type);
	ck_assert(strncmp(rep->content_type, "text/html", 9) == 0);
	ck_assert_ptr_nonnull(strstr(body(rep), "<!doctype html>"));
	ck_assert_ptr_nonnull(strstr(body(rep), "</html>"));
	ck_assert_ptr_null(strstr(body(rep), "route="));
}

/* --- matching ------------------------------------------------------------ */

START_TEST(test_router_match_exact)
{
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_GET, "/status", "");
	run(&req, &rep);
	assert_ok(&rep, "route=public");
	ck_assert_str_eq(rep.content_type, "text/plain; charset=utf-8");
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_match_capture_decoded)
{
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_GET, "/consent/%41bc", "");
	run(&req, &rep);
	assert_ok(&rep, "route=page|cap=Abc");
	ck_assert_uint_eq(req.ncaptures, 1);
	ck_assert_str_eq(req.captures[0], "Abc");
	done(&req, &rep);

	req_get(&req, HTTP_GET, "/consent/a+b%20c%C3%A9", "");   /* a path keeps its '+' */
	run(&req, &rep);
	assert_ok(&rep, "route=page|cap=a+b c\xc3\xa9");
	done(&req, &rep);
}
END_TEST

/* With the request's arena (as http.c gives every request), captures and
 * parameters come from it, not the heap: they sit in its first block, the
 * request's clear frees none of them (ASan would see a bad free), and the
 * arena's clear wipes them. */
START_TEST(test_router_arena_holds_captures_and_params)
{
	struct http_request req;
	struct http_reply rep;
	struct arena a;
	unsigned char mem[1024];
	arena_init(&a, mem, sizeof mem, 1u << 16);
	req_get(&req, HTTP_GET, "/a/one/b/t%77o", "");
	req.arena = &a;
	run(&req, &rep);
	assert_ok(&rep, "route=two|cap=one|cap=two");
	ck_assert_ptr_null(req.capture_block);
	for (size_t i = 0; i < 2; i++)
		ck_assert((unsigned char *)req.captures[i] >= mem &&
		    (unsigned char *)req.captures[i] < mem + sizeof mem);
	ck_assert_ptr_null(a.heap);
	done(&req, &rep);

	req_post(&req, "/token", FORM_CT, "grant_type=code&hint=abc");
	req.arena = &a;
	run(&req, &rep);
	assert_ok(&rep, "route=token|grant_type=code|hint=abc");
	ck_assert(req.params.block_in_arena);
	ck_assert((unsigned char *)req.params.block >= mem &&
	    (unsigned char *)req.params.block < mem + sizeof mem);
	size_t used = a.first_used;
	done(&req, &rep);
	ck_assert_ptr_null(a.heap);
	arena_clear(&a);
	for (size_t i = 0; i < used; i++)
		ck_assert_uint_eq(a.first[i], 0);
}
END_TEST

START_TEST(test_router_match_two_captures)
{
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_GET, "/a/one/b/t%77o", "");
	run(&req, &rep);
	assert_ok(&rep, "route=two|cap=one|cap=two");
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_match_encoded_slash_404)
{
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_GET, "/consent/a%2Fb", "");
	run(&req, &rep);
	assert_html_error(&rep, 404);
	done(&req, &rep);
	req_get(&req, HTTP_GET, "/consent/%2f", "");
	run(&req, &rep);
	assert_html_error(&rep, 404);
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_match_bad_capture_encoding_404)
{
	static const char *const paths[] = {
		"/consent/%zz", "/consent/%4", "/consent/%00", "/consent/a%00b",
		"/consent/%C0%80", "/consent/%ED%A0%80", "/consent/%FF",
	};
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		struct http_request req;
		struct http_reply rep;
		req_get(&req, HTTP_GET, paths[i], "");
		run(&req, &rep);
		ck_assert_msg(rep.status == 404, "%s gave %d", paths[i], rep.status);
		assert_html_error(&rep, 404);
		done(&req, &rep);
	}
}
END_TEST

START_TEST(test_router_match_empty_capture_404)
{
	static const char *const paths[] = { "/consent/", "/consent", "/a//b/y", "/a/x/b/" };
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		struct http_request req;
		struct http_reply rep;
		req_get(&req, HTTP_GET, paths[i], "");
		run(&req, &rep);
		ck_assert_msg(rep.status == 404, "%s gave %d", paths[i], rep.status);
		done(&req, &rep);
	}
}
END_TEST

START_TEST(test_router_match_trailing_or_double_slash_404)
{
	static const char *const paths[] = {
		"/status/", "//status", "/status//", "/consent/abc/", "/consent//abc",
		"//consent/abc", "/consent/abc//", "/a/x/b/y/", "/status/x", "/statusx", "/Status",
		"status", "", "/status%2F",
	};
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		struct http_request req;
		struct http_reply rep;
		req_get(&req, HTTP_GET, paths[i], "");
		run(&req, &rep);
		ck_assert_msg(rep.status == 404, "'%s' gave %d", paths[i], rep.status);
		ck_assert_ptr_null(strstr(body(&rep), "route="));
		done(&req, &rep);
	}
}
END_TEST

START_TEST(test_router_unknown_path_browser_html_404)
{
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_GET, "/nope", "");
	run(&req, &rep);
	assert_html_error(&rep, 404);
	ck_assert_ptr_nonnull(strstr(body(&rep), "Not found"));
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_unknown_path_not_reflected)
{
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_GET, "/<script>alert(1)</script>", "");
	run(&req, &rep);
	assert_html_error(&rep, 404);
	ck_assert_ptr_null(strstr(body(&rep), "<script>"));
	ck_assert_ptr_null(strstr(body(&rep), "alert(1)"));
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_unknown_path_oauth_json_404)
{
	/* A table without /token: the paths under a prefix routes.c declares
	 * JSON (http_route_prefixes) answer in JSON. */
	static const struct route small[] = {
		{ HTTP_GET, "/status", ROUTE_PUBLIC, h_public, NO_PARAMS, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
		{ HTTP_GET, NULL, 0, NULL, NO_PARAMS, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	};
	static const char *const paths[] = {
		"/.well-known/nothing", "/admin/api/nothing", "/proxy/nothing",
	};
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		struct http_request req;
		struct http_reply rep;
		req_post(&req, paths[i], FORM_CT, "grant_type=x");
		run_table(small, &req, &rep);
		assert_json_error(&rep, 404, "not_found");
		done(&req, &rep);
	}
}
END_TEST

/* The kind of a path is its route's, read from the table: the real table's
 * gateway endpoints are OAuth whatever the method, the admin API's API, the
 * pages browser, and only what waits on an outside server is deferred: the
 * proxy, and GET /authorize (a client-id URL's document, up to 5 s). */
START_TEST(test_router_kind_for_path_from_table)
{
	ck_assert_int_eq(router_kind_for_path(http_routes, "/token"), ROUTE_OAUTH);
	ck_assert_int_eq(router_kind_for_path(http_routes, "/revoke"), ROUTE_OAUTH);
	ck_assert_int_eq(router_kind_for_path(http_routes, "/proxy/r/x/y"), ROUTE_OAUTH);
	ck_assert_int_eq(router_kind_for_path(http_routes, "/proxy/junk"), ROUTE_OAUTH);
	ck_assert_int_eq(router_kind_for_path(http_routes, "/admin/api/consents"), ROUTE_API);
	ck_assert_int_eq(router_kind_for_path(http_routes, "/admin/api/nothing"), ROUTE_API);
	ck_assert_int_eq(router_kind_for_path(http_routes, "/admin"), ROUTE_BROWSER);
	ck_assert_int_eq(router_kind_for_path(http_routes, "/healthz"), ROUTE_PUBLIC);
	ck_assert_int_eq(router_kind_for_path(http_routes, "/.well-known/nothing"), ROUTE_PUBLIC);
	ck_assert_int_eq(router_kind_for_path(http_routes, "/no/such/page"), ROUTE_BROWSER);
	for (const struct route *r = http_routes; r->pattern; r++)
		ck_assert_int_eq((r->flags & ROUTE_DEFERRED) != 0, strncmp(r->pattern, "/proxy/", 7) == 0 ||
		    strcmp(r->pattern, "/authorize") == 0 || strcmp(r->pattern, "/mcp/{name}") == 0);
	ck_assert_ptr_nonnull(router_route_for_path(http_routes, "/proxy/r/x"));
	ck_assert_ptr_null(router_route_for_path(http_routes, "/proxy/r"));
}
END_TEST

/* --- typed parameters ------------------------------------------------------ */

static const char *const color_words[] = { "red", "green", NULL };
static const struct param_type days_type[1] = { { .kind = PARAM_INT, .min = 1, .max = 365 } };
static const struct param_type color_type[1] = { { .kind = PARAM_WORD, .words = color_words } };
static const struct param_type on_type[1] = { { .kind = PARAM_ON } };

/* Writes what the typed accessors read, by index: "days=N|color=I|on=B|boxes=MASK"
 * (and that an index past the route's parameters reads nothing). */
enum { T_DAYS, T_COLOR, T_ON, T_B };
static enum cs_err h_typed(const struct http_request *req, struct http_reply *rep)
{
	int64_t days = -1, color = -1;
	bool have = http_arg_int(req, T_DAYS, &days);
	if (!http_arg_int(req, T_COLOR, &color))
		color = -1;
	rep->status = 200;
	rep->content_type = "text/plain; charset=utf-8";
	if (http_arg(req, T_B + 1) != NULL || http_arg(req, ROUTE_MAX_PARAMS) != NULL)
		return CS_EINVAL;
	return buf_printf(&rep->body, "days=%lld|color=%lld|on=%d|boxes=%llx", have ? (long long)days : -1LL,
	    (long long)color, http_arg_str(req, T_ON) != NULL,
	    (unsigned long long)http_arg_family(req, T_B));
}

static const struct route typed_table[] = {
	{ HTTP_GET, "/typed", ROUTE_BROWSER, h_typed,
	  { [T_DAYS] = { "days", 3, days_type, 0 },
	    [T_COLOR] = { "color", 8, color_type, 0 },
	    [T_ON] = { "on", 2, on_type, 0 },
	    [T_B] = { "b", 2, on_type, PARAM_FAMILY(12) },
	    { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, NULL, 0, NULL, NO_PARAMS, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
};

static void typed(const char *query, int status, const char *want)
{
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_GET, "/typed", query);
	run_table(typed_table, &req, &rep);
	ck_assert_msg(rep.status == status, "%s: %d %s", query, rep.status, body(&rep));
	if (want != NULL)
		ck_assert_msg(strstr(body(&rep), want) != NULL, "%s: %s lacks %s", query, body(&rep), want);
	done(&req, &rep);
}

START_TEST(test_router_typed_values_reach_the_handler)
{
	typed("", 200, "days=-1|color=-1|on=0|boxes=0");
	typed("days=7&color=green&on=on", 200, "days=7|color=1|on=1|boxes=0");
	typed("b0=on&b3=on&b11=on", 200, "boxes=809");
	typed("days=365", 200, "days=365|");
}
END_TEST

START_TEST(test_router_typed_values_refused_before_the_handler)
{
	typed("days=0", 400, "parameter days is malformed");        /* below min */
	typed("days=366", 400, "parameter days is malformed");      /* above max */
	typed("days=1a", 400, "parameter days is malformed");
	typed("days=", 400, "parameter days is malformed");
	typed("days=-1", 400, "parameter days is malformed");
	typed("days=0012", 400, "parameter days is too long");
	typed("color=blue", 400, "parameter color is malformed");
	typed("color=", 400, "parameter color is malformed");
	typed("on=no", 400, "parameter on is malformed");
	typed("on=on&on=on", 400, "parameter on is repeated");
	/* A family: only name0 .. name11, no leading zero, each checked and once. */
	typed("b12=on", 400, "unknown parameter");
	typed("b01=on", 400, "unknown parameter");
	typed("b=on", 400, "unknown parameter");
	typed("bx=on", 400, "unknown parameter");
	typed("b99999999999999999999=on", 400, "unknown parameter");
	typed("b2=no", 400, "parameter b2 is malformed");
	typed("b2=on&b2=on", 400, "parameter b2 is repeated");
}
END_TEST

/* --- methods --------------------------------------------------------------- */

START_TEST(test_router_method_405_allow_lists_methods)
{
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_DELETE, "/consent/abc", "");
	run(&req, &rep);
	assert_html_error(&rep, 405);
	ck_assert_ptr_nonnull(hdr(&rep, "Allow"));
	ck_assert_str_eq(hdr(&rep, "Allow"), "GET, HEAD, POST");
	ck_assert_ptr_null(req.captures[0]);
	done(&req, &rep);

	req_get(&req, HTTP_PUT, "/status", "");
	run(&req, &rep);
	ck_assert_int_eq(rep.status, 405);
	ck_assert_str_eq(hdr(&rep, "Allow"), "GET, HEAD");
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_method_405_oauth_json)
{
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_GET, "/token", "grant_type=x");
	run(&req, &rep);
	assert_json_error(&rep, 405, "invalid_request");
	ck_assert_str_eq(hdr(&rep, "Allow"), "POST");
	done(&req, &rep);

	req_get(&req, HTTP_HEAD, "/token", "");           /* HEAD is not a POST */
	run(&req, &rep);
	ck_assert_int_eq(rep.status, 405);
	ck_assert_str_eq(hdr(&rep, "Allow"), "POST");
	done(&req, &rep);

	req_get(&req, HTTP_GET, "/admin/api/things", "");
	run(&req, &rep);
	assert_json_error(&rep, 405, "invalid_request");
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_method_head_served_by_get)
{
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_HEAD, "/status", "");
	run(&req, &rep);
	assert_ok(&rep, "route=public");
	done(&req, &rep);
	req_get(&req, HTTP_HEAD, "/consent/x", "return_to=%2Fme");
	run(&req, &rep);
	assert_ok(&rep, "route=page|cap=x|return_to=/me");
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_method_same_path_picks_method)
{
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_GET, "/consent/x", "");
	run(&req, &rep);
	assert_ok(&rep, "route=page|cap=x");
	done(&req, &rep);
	req_form(&req, "/consent/x", "decision=allow");
	run(&req, &rep);
	assert_ok(&rep, "route=form|cap=x|decision=allow");
	done(&req, &rep);
}
END_TEST

/* --- OAuth form routes ------------------------------------------------------ */

START_TEST(test_router_oauth_unknown_params_ignored)
{
	struct http_request req;
	struct http_reply rep;
	req_post(&req, "/token", FORM_CT, "foo=bar&grant_type=authorization_code&resource=x&foo=baz");
	run(&req, &rep);
	assert_ok(&rep, "route=token|grant_type=authorization_code");
	ck_assert_uint_eq(req.params.n, 1);
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_oauth_all_declared_params)
{
	struct http_request req;
	struct http_reply rep;
	req_post(&req, "/token", FORM_CT, "grant_type=code&hint=abc");
	run(&req, &rep);
	assert_ok(&rep, "route=token|grant_type=code|hint=abc");
	done(&req, &rep);
	req_post(&req, "/token", FORM_CT, "hint=abc&x=1&grant_type=code");
	run(&req, &rep);
	assert_ok(&rep, "route=token|hint=abc|grant_type=code");
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_oauth_charset_content_type_ok)
{
	struct http_request req;
	struct http_reply rep;
	req_post(&req, "/token", "Application/X-WWW-Form-Urlencoded; charset=UTF-8", "grant_type=a");
	run(&req, &rep);
	assert_ok(&rep, "route=token|grant_type=a");
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_oauth_duplicate_400)
{
	static const char *const bodies[] = {
		"grant_type=a&grant_type=b", "grant_type=a&grant_type=a",
		"grant_type=a&hint=x&hint=y", "hint=x&grant_type=a&hint=x",
	};
	for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
		struct http_request req;
		struct http_reply rep;
		req_post(&req, "/token", FORM_CT, bodies[i]);
		run(&req, &rep);
		assert_json_error(&rep, 400, "invalid_request");
		ck_assert_ptr_nonnull(strstr(body(&rep), "repeated"));
		done(&req, &rep);
	}
}
END_TEST

START_TEST(test_router_oauth_oversized_400)
{
	struct http_request req;
	struct http_reply rep;
	req_post(&req, "/token", FORM_CT, "grant_type=a&hint=abcdefgh");    /* 8: the limit */
	run(&req, &rep);
	assert_ok(&rep, "route=token|grant_type=a|hint=abcdefgh");
	done(&req, &rep);
	req_post(&req, "/token", FORM_CT, "grant_type=a&hint=abcdefghi");   /* 9 */
	run(&req, &rep);
	assert_json_error(&rep, 400, "invalid_request");
	ck_assert_ptr_nonnull(strstr(body(&rep), "too long"));
	done(&req, &rep);
	/* The limit is on decoded bytes: %C3%A9 is two. */
	req_post(&req, "/token", FORM_CT, "grant_type=a&hint=%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9");
	run(&req, &rep);
	assert_json_error(&rep, 400, "invalid_request");
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_oauth_validator_400)
{
	static const char *const bodies[] = {
		"grant_type=a&hint=ABC", "grant_type=a&hint=", "grant_type=a&hint",
		"grant_type=a+b", "grant_type=a%0Ab", "grant_type=", "grant_type=%22x%22",
	};
	for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
		struct http_request req;
		struct http_reply rep;
		req_post(&req, "/token", FORM_CT, bodies[i]);
		run(&req, &rep);
		ck_assert_msg(rep.status == 400, "%s gave %d", bodies[i], rep.status);
		assert_json_error(&rep, 400, "invalid_request");
		ck_assert_ptr_nonnull(strstr(body(&rep), "malformed"));
		done(&req, &rep);
	}
}
END_TEST

START_TEST(test_router_oauth_missing_required_400)
{
	static const char *const bodies[] = { "hint=abc", "", "other=1" };
	for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
		struct http_request req;
		struct http_reply rep;
		req_post(&req, "/token", FORM_CT, bodies[i]);
		run(&req, &rep);
		assert_json_error(&rep, 400, "invalid_request");
		ck_assert_ptr_nonnull(strstr(body(&rep), "grant_type is missing"));
		done(&req, &rep);
	}
	struct http_request req;
	struct http_reply rep;
	req_post(&req, "/token", FORM_CT, NULL);          /* no body at all */
	run(&req, &rep);
	assert_json_error(&rep, 400, "invalid_request");
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_oauth_malformed_body_400)
{
	static const char *const bodies[] = {
		"grant_type=%zz", "grant_type=a&=b", "grant_type=%00", "grant_type=%C0%80",
	};
	for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
		struct http_request req;
		struct http_reply rep;
		req_post(&req, "/token", FORM_CT, bodies[i]);
		run(&req, &rep);
		assert_json_error(&rep, 400, "invalid_request");
		done(&req, &rep);
	}
	/* More pairs than a form holds. */
	struct buf b;
	buf_init(&b, 4096);
	ck_assert_int_eq(buf_puts(&b, "grant_type=a"), CS_OK);
	for (int i = 0; i < FORM_MAX_PARAMS; i++)
		ck_assert_int_eq(buf_printf(&b, "&x%d=1", i), CS_OK);
	struct http_request req;
	struct http_reply rep;
	req_post(&req, "/token", FORM_CT, b.data);
	run(&req, &rep);
	assert_json_error(&rep, 400, "invalid_request");
	done(&req, &rep);
	buf_clear(&b);
}
END_TEST

START_TEST(test_router_oauth_wrong_content_type_415)
{
	static const char *const cts[] = {
		"application/json", "text/plain", "application/x-www-form-urlencodedx",
		"multipart/form-data; boundary=x", "",
	};
	for (size_t i = 0; i < sizeof cts / sizeof cts[0]; i++) {
		struct http_request req;
		struct http_reply rep;
		req_post(&req, "/token", cts[i], "grant_type=a");
		run(&req, &rep);
		assert_json_error(&rep, 415, "invalid_request");
		done(&req, &rep);
	}
	struct http_request req;
	struct http_reply rep;
	req_post(&req, "/token", NULL, "grant_type=a");
	run(&req, &rep);
	assert_json_error(&rep, 415, "invalid_request");
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_oauth_query_params_ignored)
{
	struct http_request req;
	struct http_reply rep;
	req_post(&req, "/token", FORM_CT, "grant_type=code");
	req.query = "grant_type=evil&hint=injected";
	run(&req, &rep);
	assert_ok(&rep, "route=token|grant_type=code");
	done(&req, &rep);
	/* Nor can the query stand in for a missing body parameter. */
	req_post(&req, "/token", FORM_CT, "");
	req.query = "grant_type=code";
	run(&req, &rep);
	assert_json_error(&rep, 400, "invalid_request");
	done(&req, &rep);
}
END_TEST

/* --- browser routes ----------------------------------------------------------- */

START_TEST(test_router_browser_unknown_query_param_400)
{
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_GET, "/consent/x", "return_to=%2Fme&debug=1");
	run(&req, &rep);
	assert_html_error(&rep, 400);
	done(&req, &rep);
	req_get(&req, HTTP_GET, "/consent/x", "debug");
	run(&req, &rep);
	assert_html_error(&rep, 400);
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_browser_malformed_query_400)
{
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_GET, "/consent/x", "return_to=%zz");
	run(&req, &rep);
	assert_html_error(&rep, 400);
	done(&req, &rep);
	req_get(&req, HTTP_GET, "/consent/x", "return_to=%2Fa&return_to=%2Fb");
	run(&req, &rep);
	assert_html_error(&rep, 400);
	done(&req, &rep);
}
END_TEST

/* GET /consent/x?return_to=<v encoded>: the router sees the decoded value. */
static int return_to_status(const char *v, char **echoed)
{
	char *enc = NULL;
	struct buf q;
	struct http_request req;
	struct http_reply rep;
	ck_assert_int_eq(pct_encode(v, &enc), CS_OK);
	buf_init(&q, 4096);
	ck_assert_int_eq(buf_printf(&q, "return_to=%s", enc), CS_OK);
	req_get(&req, HTTP_GET, "/consent/x", q.data);
	run(&req, &rep);
	int status = rep.status;
	if (status == 200) {
		if (echoed)
			*echoed = strdup(body(&rep));
	} else {
		assert_html_error(&rep, 400);
	}
	done(&req, &rep);
	buf_clear(&q);
	free(enc);
	return status;
}

START_TEST(test_router_browser_return_to_hostile_refused)
{
	static const char *const bad[] = {
		"/\\evil", "//evil", "//evil.example/x", "http://x", "https://evil", "/ok\r\n",
		"/ok\r\nSet-Cookie: a=b", "/ok\x01", "/ok\x7f", "", "evil", "javascript:alert(1)",
		"\\\\evil", "/a\\b", "/\t/evil", " /x", "./x",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int st = return_to_status(bad[i], NULL);
		ck_assert_msg(st == 400, "return_to '%s' gave %d", bad[i], st);
	}
}
END_TEST

START_TEST(test_router_browser_return_to_good_accepted)
{
	static const char *const good[] = { "/", "/me", "/me?x=1", "/consent/abc?y=%2F#f", "/a/b/c" };
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		char *echoed = NULL;
		int st = return_to_status(good[i], &echoed);
		ck_assert_msg(st == 200, "return_to '%s' gave %d", good[i], st);
		struct buf want;
		buf_init(&want, 1024);
		ck_assert_int_eq(buf_printf(&want, "route=page|cap=x|return_to=%s", good[i]), CS_OK);
		ck_assert_str_eq(echoed, want.data);
		buf_clear(&want);
		free(echoed);
	}
}
END_TEST

START_TEST(test_router_valid_return_to_direct)
{
	ck_assert(valid_return_to("/me"));
	ck_assert(valid_return_to("/me?x=1&y=/z"));
	ck_assert(!valid_return_to(""));
	ck_assert(!valid_return_to("/"  "/evil"));
	ck_assert(!valid_return_to("/\\evil"));
	ck_assert(!valid_return_to("https://evil"));
	ck_assert(!valid_return_to("/ok\r\n"));
	ck_assert(!valid_return_to("/ok\x01"));
	ck_assert(!valid_return_to("/x\\y"));
}
END_TEST

START_TEST(test_router_browser_post_origin_same_accepted)
{
	struct http_request req;
	struct http_reply rep;
	req_form(&req, "/consent/abc", "decision=allow&note=hi+there");
	req.sec_fetch_site = NULL;                        /* Origin alone decides */
	run(&req, &rep);
	assert_ok(&rep, "route=form|cap=abc|decision=allow|note=hi there");
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_browser_post_origin_other_403)
{
	static const char *const origins[] = {
		"http://evil.example", "http://127.0.0.1:8081", "https://127.0.0.1:8080",
		"http://127.0.0.1:8080/", "http://127.0.0.1", "HTTP://127.0.0.1:8080",
		"http://127.0.0.1:8080.evil.example", "",
	};
	for (size_t i = 0; i < sizeof origins / sizeof origins[0]; i++) {
		struct http_request req;
		struct http_reply rep;
		req_form(&req, "/consent/abc", "decision=allow");
		req.origin = origins[i];
		req.sec_fetch_site = "same-origin";           /* a lying or stale header does not help */
		run(&req, &rep);
		ck_assert_msg(rep.status == 403, "Origin '%s' gave %d", origins[i], rep.status);
		assert_html_error(&rep, 403);
		done(&req, &rep);
	}
}
END_TEST

START_TEST(test_router_browser_post_origin_null_same_origin_accepted)
{
	struct http_request req;
	struct http_reply rep;
	req_form(&req, "/consent/abc", "decision=deny");
	req.origin = "null";
	req.sec_fetch_site = "same-origin";
	run(&req, &rep);
	assert_ok(&rep, "route=form|cap=abc|decision=deny");
	done(&req, &rep);
	/* No Origin at all, Sec-Fetch-Site same-origin: accepted too. */
	req_form(&req, "/consent/abc", "decision=deny");
	req.origin = NULL;
	run(&req, &rep);
	assert_ok(&rep, "route=form|cap=abc|decision=deny");
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_browser_post_origin_null_cross_site_403)
{
	static const char *const sites[] = { "cross-site", "same-site", "none", "", "Same-Origin" };
	for (size_t i = 0; i < sizeof sites / sizeof sites[0]; i++) {
		struct http_request req;
		struct http_reply rep;
		req_form(&req, "/consent/abc", "decision=allow");
		req.origin = "null";
		req.sec_fetch_site = sites[i];
		run(&req, &rep);
		ck_assert_msg(rep.status == 403, "Sec-Fetch-Site '%s' gave %d", sites[i], rep.status);
		assert_html_error(&rep, 403);
		done(&req, &rep);
	}
	struct http_request req;
	struct http_reply rep;
	req_form(&req, "/consent/abc", "decision=allow");
	req.origin = "null";
	req.sec_fetch_site = NULL;
	run(&req, &rep);
	assert_html_error(&rep, 403);
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_browser_post_no_origin_no_fetch_site_403)
{
	struct http_request req;
	struct http_reply rep;
	req_form(&req, "/consent/abc", "decision=allow");
	req.origin = NULL;
	req.sec_fetch_site = NULL;
	run(&req, &rep);
	assert_html_error(&rep, 403);
	done(&req, &rep);
	/* Checked before anything else: a bad body from elsewhere is still a 403. */
	req_form(&req, "/consent/abc", "%zz");
	req.origin = "http://evil.example";
	req.content_type = "text/plain";
	run(&req, &rep);
	assert_html_error(&rep, 403);
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_browser_post_without_app_403)
{
	struct http_request req;
	struct http_reply rep;
	req_form(&req, "/consent/abc", "decision=allow");
	req.app = NULL;                                   /* no public URL to compare with */
	req.sec_fetch_site = NULL;
	run(&req, &rep);
	assert_html_error(&rep, 403);
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_browser_post_params_checked)
{
	struct http_request req;
	struct http_reply rep;
	req_form(&req, "/consent/abc", "decision=allow&extra=1");        /* unknown */
	run(&req, &rep);
	assert_html_error(&rep, 400);
	done(&req, &rep);
	req_form(&req, "/consent/abc", "note=x");                         /* missing */
	run(&req, &rep);
	assert_html_error(&rep, 400);
	done(&req, &rep);
	req_form(&req, "/consent/abc", "decision=allow&decision=deny");  /* repeated */
	run(&req, &rep);
	assert_html_error(&rep, 400);
	done(&req, &rep);
	req_form(&req, "/consent/abc", "decision=a%0Db");                /* control char */
	run(&req, &rep);
	assert_html_error(&rep, 400);
	done(&req, &rep);
	req_form(&req, "/consent/abc", "decision=allow");                /* query on a POST */
	req.query = "decision=allow";
	run(&req, &rep);
	assert_html_error(&rep, 400);
	done(&req, &rep);
	req_form(&req, "/consent/abc", "decision=allow");                /* wrong type */
	req.content_type = "application/json";
	run(&req, &rep);
	assert_html_error(&rep, 415);
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_browser_error_escapes_nothing_raw)
{
	/* The 400 page for a hostile value must not echo the value. */
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_GET, "/consent/x", "%3Cscript%3E=1");
	run(&req, &rep);
	assert_html_error(&rep, 400);
	ck_assert_ptr_null(strstr(body(&rep), "<script>"));
	done(&req, &rep);
}
END_TEST

/* --- API JSON route ----------------------------------------------------------- */

START_TEST(test_router_api_json_ok)
{
	struct http_request req;
	struct http_reply rep;
	req_post(&req, "/admin/api/things", "application/json", "{\"a\":1}");
	run(&req, &rep);
	assert_ok(&rep, "route=api|body={\"a\":1}");
	done(&req, &rep);
	req_post(&req, "/admin/api/things", "application/json; charset=utf-8", "[]");
	run(&req, &rep);
	assert_ok(&rep, "route=api|body=[]");
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_api_wrong_content_type_415)
{
	static const char *const cts[] = { FORM_CT, "text/plain", "application/jsonx", "" };
	for (size_t i = 0; i < sizeof cts / sizeof cts[0]; i++) {
		struct http_request req;
		struct http_reply rep;
		req_post(&req, "/admin/api/things", cts[i], "{}");
		run(&req, &rep);
		assert_json_error(&rep, 415, "invalid_request");
		done(&req, &rep);
	}
	struct http_request req;
	struct http_reply rep;
	req_post(&req, "/admin/api/things", NULL, "{}");
	run(&req, &rep);
	assert_json_error(&rep, 415, "invalid_request");
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_api_query_refused_400)
{
	struct http_request req;
	struct http_reply rep;
	req_post(&req, "/admin/api/things", "application/json", "{}");
	req.query = "x=1";
	run(&req, &rep);
	assert_json_error(&rep, 400, "invalid_request");
	done(&req, &rep);
}
END_TEST

/* --- handler failures ----------------------------------------------------------- */

START_TEST(test_router_handler_error_browser_500_html)
{
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_GET, "/fail", "");
	run(&req, &rep);
	assert_html_error(&rep, 500);
	ck_assert_ptr_null(strstr(body(&rep), "PARTIAL"));
	ck_assert_ptr_null(hdr(&rep, "X-Partial"));
	ck_assert_uint_eq(rep.nheaders, 0);
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_handler_error_oauth_500_json)
{
	struct http_request req;
	struct http_reply rep;
	req_post(&req, "/oauth-fail", FORM_CT, "");
	run(&req, &rep);
	assert_json_error(&rep, 500, "server_error");
	ck_assert_ptr_null(strstr(body(&rep), "PARTIAL"));
	ck_assert_ptr_null(hdr(&rep, "X-Partial"));
	done(&req, &rep);
}
END_TEST

START_TEST(test_router_handler_no_status_500)
{
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_GET, "/nostatus", "");
	run(&req, &rep);
	assert_json_error(&rep, 500, "server_error");
	ck_assert_ptr_null(strstr(body(&rep), "PARTIAL"));
	done(&req, &rep);
}
END_TEST

/* --- security headers --------------------------------------------------------- */

START_TEST(test_router_security_headers_defaults)
{
	struct http_reply rep;
	reply_init(&rep);
	ck_assert_int_eq(router_security_headers(&test_app, NULL, &rep), CS_OK);
	const char *csp = hdr(&rep, "Content-Security-Policy");
	ck_assert_ptr_nonnull(csp);
	ck_assert_ptr_nonnull(strstr(csp, "frame-ancestors 'none'"));
	ck_assert_ptr_nonnull(strstr(csp, "default-src 'none'"));
	ck_assert_ptr_null(strstr(csp, "unsafe-inline"));
	ck_assert_str_eq(hdr(&rep, "X-Frame-Options"), "DENY");
	ck_assert_str_eq(hdr(&rep, "X-Content-Type-Options"), "nosniff");
	ck_assert_str_eq(hdr(&rep, "Referrer-Policy"), "no-referrer");
	ck_assert_str_eq(hdr(&rep, "Cache-Control"), "no-store");
	ck_assert_uint_eq(hdr_count(&rep, "Cache-Control"), 1);
	ck_assert_ptr_null(hdr(&rep, "Strict-Transport-Security"));
	reply_clear(&rep);
}
END_TEST

/* The server computes the policy once (router_csp) and passes it in: the
 * header carries exactly what it was given, and router_csp's answer is what
 * a call without one computes. */
START_TEST(test_router_security_headers_given_csp)
{
	struct http_reply rep;
	char csp[ROUTER_CSP_MAX];
	reply_init(&rep);
	ck_assert_int_eq(router_security_headers(&test_app, "default-src 'none'; given", &rep), CS_OK);
	ck_assert_str_eq(hdr(&rep, "Content-Security-Policy"), "default-src 'none'; given");
	ck_assert_uint_eq(hdr_count(&rep, "Content-Security-Policy"), 1);
	reply_clear(&rep);

	ck_assert_int_eq(router_csp(&test_app, csp, sizeof csp), CS_OK);
	reply_init(&rep);
	ck_assert_int_eq(router_security_headers(&test_app, NULL, &rep), CS_OK);
	ck_assert_str_eq(hdr(&rep, "Content-Security-Policy"), csp);
	reply_clear(&rep);
	ck_assert_int_eq(router_csp(&test_app, csp, 16), CS_ETOOBIG);
}
END_TEST

START_TEST(test_router_security_headers_cache_max_age)
{
	struct http_reply rep;
	reply_init(&rep);
	rep.cache_max_age = 300;
	ck_assert_int_eq(router_security_headers(&test_app, NULL, &rep), CS_OK);
	ck_assert_str_eq(hdr(&rep, "Cache-Control"), "public, max-age=300");
	ck_assert_uint_eq(hdr_count(&rep, "Cache-Control"), 1);
	ck_assert_ptr_null(hdr(&rep, "Pragma"));
	ck_assert_str_eq(hdr(&rep, "X-Frame-Options"), "DENY");
	reply_clear(&rep);
}
END_TEST

START_TEST(test_router_security_headers_hsts_only_https)
{
	struct http_reply rep;
	reply_init(&rep);
	test_cfg.public_url = (char *)"https://consent.example";
	test_cfg.public_url_is_https = true;
	ck_assert_int_eq(router_security_headers(&test_app, NULL, &rep), CS_OK);
	const char *hsts = hdr(&rep, "Strict-Transport-Security");
	ck_assert_ptr_nonnull(hsts);
	ck_assert(strncmp(hsts, "max-age=", 8) == 0);
	ck_assert_uint_eq(hdr_count(&rep, "Strict-Transport-Security"), 1);
	reply_clear(&rep);

	reply_init(&rep);                   /* no app: no HSTS, the rest still there */
	ck_assert_int_eq(router_security_headers(NULL, NULL, &rep), CS_OK);
	ck_assert_ptr_null(hdr(&rep, "Strict-Transport-Security"));
	ck_assert_str_eq(hdr(&rep, "X-Frame-Options"), "DENY");
	reply_clear(&rep);
}
END_TEST

START_TEST(test_router_security_headers_form_action_idp_origin)
{
	/* Sign-out's answer redirects to the IdP: form-action allows its origin only. */
	struct http_reply rep;
	reply_init(&rep);
	test_cfg.oidc_issuer = (char *)"https://idp.example:8443/realms/main";
	ck_assert_int_eq(router_security_headers(&test_app, NULL, &rep), CS_OK);
	const char *csp = hdr(&rep, "Content-Security-Policy");
	ck_assert_ptr_nonnull(csp);
	ck_assert_ptr_nonnull(strstr(csp, "form-action 'self' https://idp.example:8443;"));
	ck_assert_ptr_null(strstr(csp, "/realms"));
	ck_assert_ptr_nonnull(strstr(csp, "frame-ancestors 'none'"));
	reply_clear(&rep);
	test_cfg.oidc_issuer = NULL;
	reply_init(&rep);
	ck_assert_int_eq(router_security_headers(&test_app, NULL, &rep), CS_OK);
	ck_assert_ptr_nonnull(strstr(hdr(&rep, "Content-Security-Policy"), "form-action 'self';"));
	reply_clear(&rep);

	/* Approving a consent for a resource with a provider redirects there:
	 * each provider's origin once, and nothing that could end the directive. */
	struct config_resource res[4];
	memset(res, 0, sizeof res);
	res[0].provider_issuer = (char *)"https://gh.example/oauth";
	res[1].provider_authorization_endpoint = (char *)"https://auth.gl.example:444/authorize";
	res[1].provider_issuer = (char *)"https://gl.example";
	res[2].provider_issuer = (char *)"https://gh.example/other";        /* same origin again */
	res[3].provider_issuer = (char *)"https://evil.example;script-src";
	test_cfg.resources = res;
	test_cfg.nresources = 4;
	test_cfg.oidc_issuer = (char *)"https://gh.example:4430";             /* a longer look-alike */
	reply_init(&rep);
	ck_assert_int_eq(router_security_headers(&test_app, NULL, &rep), CS_OK);
	ck_assert_ptr_nonnull(strstr(hdr(&rep, "Content-Security-Policy"),
	    "form-action 'self' https://gh.example:4430 https://gh.example https://auth.gl.example:444;"));
	ck_assert_ptr_null(strstr(hdr(&rep, "Content-Security-Policy"), "evil"));
	reply_clear(&rep);
	test_cfg.resources = NULL;
	test_cfg.nresources = 0;
	test_cfg.oidc_issuer = NULL;
}
END_TEST

START_TEST(test_router_security_headers_after_error_reply)
{
	/* An error reply (which resets cache_max_age) still gets no-store. */
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_GET, "/nope", "");
	run(&req, &rep);
	ck_assert_int_eq(rep.status, 404);
	ck_assert_int_eq(router_security_headers(&test_app, NULL, &rep), CS_OK);
	ck_assert_str_eq(hdr(&rep, "Cache-Control"), "no-store");
	done(&req, &rep);
}
END_TEST

/* --- reply helpers ----------------------------------------------------------- */

START_TEST(test_router_reply_header_refuses_crlf)
{
	struct http_reply rep;
	reply_init(&rep);
	ck_assert_int_eq(reply_header(&rep, "X-Ok", "fine value"), CS_OK);
	ck_assert_int_eq(reply_header(&rep, "Location", "/x\r\nSet-Cookie: s=evil"), CS_EINVAL);
	ck_assert_int_eq(reply_header(&rep, "Location", "/x\nSet-Cookie: s=evil"), CS_EINVAL);
	ck_assert_int_eq(reply_header(&rep, "Location", "/x\rSet-Cookie: s=evil"), CS_EINVAL);
	ck_assert_int_eq(reply_header(&rep, "X-A\r\nSet-Cookie", "x"), CS_EINVAL);
	ck_assert_int_eq(reply_header(&rep, "X-A\n", "x"), CS_EINVAL);
	ck_assert_int_eq(reply_header(&rep, "X-A: y", "x"), CS_EINVAL);
	ck_assert_uint_eq(rep.nheaders, 1);
	ck_assert_str_eq(hdr(&rep, "X-Ok"), "fine value");
	ck_assert_ptr_null(hdr(&rep, "Location"));
	reply_clear(&rep);
}
END_TEST

/* Header names and values go into the reply's own memory while they fit and
 * to the heap past it; every one reads back whole, the secrets among them are
 * wiped at reply_clear, and nothing leaks (ASan). */
START_TEST(test_router_reply_headers_in_reply_memory)
{
	struct http_reply rep;
	char name[16], value[301];
	reply_init(&rep);
	ck_assert_int_eq(reply_header(&rep, "Set-Cookie", "s=secret-session-token"), CS_OK);
	ck_assert((uintptr_t)rep.headers[0].value >= (uintptr_t)rep.hmem &&   /* no allocation */
	    (uintptr_t)rep.headers[0].value < (uintptr_t)(rep.hmem + sizeof rep.hmem));
	for (int i = 1; i < HTTP_MAX_HEADERS; i++) {                       /* 15 x 300 B: past it */
		memset(value, 'a' + i, sizeof value - 1);
		value[sizeof value - 1] = '\0';
		ck_assert_int_eq(str_fmt(name, sizeof name, "X-H%d", i), CS_OK);
		ck_assert_int_eq(reply_header(&rep, name, value), CS_OK);
	}
	ck_assert_uint_eq(rep.nheaders, HTTP_MAX_HEADERS);
	ck_assert_str_eq(rep.headers[0].value, "s=secret-session-token");
	for (int i = 1; i < HTTP_MAX_HEADERS; i++) {
		ck_assert_int_eq(str_fmt(name, sizeof name, "X-H%d", i), CS_OK);
		ck_assert_str_eq(rep.headers[i].name, name);
		ck_assert_uint_eq(strlen(rep.headers[i].value), 300);
		ck_assert_int_eq(rep.headers[i].value[299], 'a' + i);
	}
	reply_clear(&rep);
	ck_assert_uint_eq(rep.hmem_used, 0);
	ck_assert_ptr_null(memmem(rep.hmem, sizeof rep.hmem, "secret-session-token", 20));
}
END_TEST

START_TEST(test_router_reply_header_cap)
{
	struct http_reply rep;
	reply_init(&rep);
	for (int i = 0; i < HTTP_MAX_HEADERS; i++)
		ck_assert_int_eq(reply_header(&rep, "X-N", "v"), CS_OK);
	ck_assert_int_eq(reply_header(&rep, "X-N", "v"), CS_ETOOBIG);
	ck_assert_uint_eq(rep.nheaders, HTTP_MAX_HEADERS);
	reply_clear(&rep);
	reply_clear(NULL);
}
END_TEST

START_TEST(test_router_reply_oauth_error_escapes)
{
	struct http_reply rep;
	json_error_t err;
	reply_init(&rep);
	ck_assert_int_eq(reply_oauth_error(&rep, 400, "invalid_grant", "bad \"x\"\n</script>"), CS_OK);
	ck_assert_int_eq(rep.status, 400);
	json_t *v = json_loads(body(&rep), 0, &err);
	ck_assert_ptr_nonnull(v);
	ck_assert_str_eq(json_string_value(json_object_get(v, "error")), "invalid_grant");
	ck_assert_str_eq(json_string_value(json_object_get(v, "error_description")),
	    "bad \"x\"\n</script>");
	ck_assert_ptr_null(strchr(body(&rep), '<'));
	json_decref(v);
	ck_assert_int_eq(reply_oauth_error(&rep, 401, "invalid_client", NULL), CS_OK);
	ck_assert_str_eq(body(&rep), "{\"error\":\"invalid_client\"}");
	reply_clear(&rep);
}
END_TEST

START_TEST(test_router_method_name)
{
	ck_assert_str_eq(http_method_name(HTTP_GET), "GET");
	ck_assert_str_eq(http_method_name(HTTP_OPTIONS), "OPTIONS");
	ck_assert_str_eq(http_method_name(HTTP_METHOD__MAX), "?");
}
END_TEST

static enum cs_err h_rest(const struct http_request *q, struct http_reply *r) { return echo(q, r, "rest"); }

START_TEST(test_router_match_rest_capture_raw)
{
	static const struct route rest_table[] = {
		{ HTTP_GET, "/proxy/{resource}/{rest*}", ROUTE_OAUTH, h_rest, { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
		{ HTTP_GET, NULL, 0, NULL, { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	};
	struct http_request req;
	struct http_reply rep;
	/* The rest is handed over raw -- encoded slashes and dots included -- for
	 * its handler to normalise once. */
	req_get(&req, HTTP_GET, "/proxy/git%68ub/repos/a%2Fb/../x", "");
	run_table(rest_table, &req, &rep);
	ck_assert_int_eq(rep.status, 200);
	ck_assert_str_eq(rep.body.data, "route=rest|cap=github|cap=repos/a%2Fb/../x");
	done(&req, &rep);
	/* An empty rest does not match. */
	req_get(&req, HTTP_GET, "/proxy/github/", "");
	run_table(rest_table, &req, &rep);
	ck_assert_int_eq(rep.status, 404);
	done(&req, &rep);
	req_get(&req, HTTP_GET, "/proxy/github", "");
	run_table(rest_table, &req, &rep);
	ck_assert_int_eq(rep.status, 404);
	done(&req, &rep);
}
END_TEST

/* A {x} capture past ROUTE_CAPTURE_MAX names nothing: 404 in the route's kind
 * (a page for people, JSON for the gateway) before any handler; at the bound
 * it still reaches the handler; a trailing {rest*} is bounded by the URI alone. */
START_TEST(test_router_capture_over_bound_404)
{
	static const struct route rest_table[] = {
		{ HTTP_GET, "/proxy/{resource}/{rest*}", ROUTE_OAUTH, h_rest, { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
		{ HTTP_GET, NULL, 0, NULL, { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	};
	char path[2 * ROUTE_CAPTURE_MAX + 64];
	char cap[2 * ROUTE_CAPTURE_MAX];
	struct http_request req;
	struct http_reply rep;
	memset(cap, 'a', sizeof cap);
	/* At the bound: the page's handler. */
	cap[ROUTE_CAPTURE_MAX] = '\0';
	ck_assert_int_eq(str_fmt(path, sizeof path, "/consent/%s", cap), CS_OK);
	req_get(&req, HTTP_GET, path, "");
	run(&req, &rep);
	ck_assert_int_eq(rep.status, 200);
	done(&req, &rep);
	/* One byte past it, or as many bytes decoded from an encoded form: a 404 page. */
	cap[ROUTE_CAPTURE_MAX] = 'a';
	cap[ROUTE_CAPTURE_MAX + 1] = '\0';
	ck_assert_int_eq(str_fmt(path, sizeof path, "/consent/%s", cap), CS_OK);
	req_get(&req, HTTP_GET, path, "");
	run(&req, &rep);
	ck_assert_int_eq(rep.status, 404);
	ck_assert_str_eq(rep.content_type, "text/html; charset=utf-8");
	ck_assert_ptr_nonnull(strstr(rep.body.data, "too long"));
	ck_assert_ptr_null(strstr(rep.body.data, "route="));
	ck_assert_str_eq(rep.log.route, "/consent/{id}");
	done(&req, &rep);
	/* The second of two captures. */
	ck_assert_int_eq(str_fmt(path, sizeof path, "/a/one/b/%s", cap), CS_OK);
	req_get(&req, HTTP_GET, path, "");
	run(&req, &rep);
	ck_assert_int_eq(rep.status, 404);
	ck_assert_str_eq(rep.content_type, "application/json");
	done(&req, &rep);
	/* The gateway's {resource}: JSON; its {rest*} may be long. */
	ck_assert_int_eq(str_fmt(path, sizeof path, "/proxy/%s/x", cap), CS_OK);
	req_get(&req, HTTP_GET, path, "");
	run_table(rest_table, &req, &rep);
	ck_assert_int_eq(rep.status, 404);
	ck_assert_ptr_nonnull(strstr(rep.body.data, "\"error\":\"not_found\""));
	done(&req, &rep);
	ck_assert_int_eq(str_fmt(path, sizeof path, "/proxy/gh/%s", cap), CS_OK);
	req_get(&req, HTTP_GET, path, "");
	run_table(rest_table, &req, &rep);
	ck_assert_int_eq(rep.status, 200);
	done(&req, &rep);
}
END_TEST

/* What the log line says of an answer: the route pattern (never the path with
 * its ids), the error code and description sent; nothing for a handler's 200. */
START_TEST(test_router_reply_log_fields)
{
	struct http_request req;
	struct http_reply rep;
	req_get(&req, HTTP_GET, "/consent/SECRET-ID-123", "");
	run(&req, &rep);
	ck_assert_int_eq(rep.status, 200);
	ck_assert_str_eq(rep.log.route, "/consent/{id}");
	ck_assert_str_eq(rep.log.error, "");
	done(&req, &rep);
	/* A refused parameter: the router's error is recorded. */
	req_post(&req, "/token", FORM_CT, "grant_type=x&hint=TOOLONGHINT");
	run(&req, &rep);
	assert_json_error(&rep, 400, "invalid_request");
	ck_assert_str_eq(rep.log.route, "/token");
	ck_assert_str_eq(rep.log.error, "invalid_request");
	ck_assert_str_eq(rep.log.description, "parameter hint is too long");
	done(&req, &rep);
	/* A handler failure: server_error, its half-written reply gone. */
	req_get(&req, HTTP_GET, "/fail", "");
	run(&req, &rep);
	ck_assert_int_eq(rep.status, 500);
	ck_assert_str_eq(rep.log.route, "/fail");
	ck_assert_str_eq(rep.log.error, "server_error");
	done(&req, &rep);
	/* No route: no pattern; 404 not_found. */
	req_get(&req, HTTP_GET, "/nowhere/SECRET", "");
	run(&req, &rep);
	ck_assert_int_eq(rep.status, 404);
	ck_assert_ptr_null(rep.log.route);
	ck_assert_str_eq(rep.log.error, "not_found");
	done(&req, &rep);
	/* reply_log_error truncates, never overruns. */
	char longd[400];
	memset(longd, 'd', sizeof longd - 1);
	longd[sizeof longd - 1] = '\0';
	reply_init(&rep);
	ck_assert_int_eq(reply_oauth_error(&rep, 400, "invalid_request", longd), CS_OK);
	ck_assert_uint_eq(strlen(rep.log.description), sizeof rep.log.description - 1);
	reply_clear(&rep);
}
END_TEST

/* [limits] address on a route that declares it: the burst passes, then a 429
 * page with Retry-After before the handler (or the same-origin check) runs;
 * another address is served; a route without the class never is refused. */
static const struct route limited_table[] = {
	{ HTTP_GET, "/page/{id}", ROUTE_BROWSER, h_page, NO_PARAMS, 0, ROUTE_AUTH_NONE, LIMIT_ADDRESS },
	{ HTTP_POST, "/page/{id}", ROUTE_BROWSER, h_form, NO_PARAMS, ROUTE_FORM_BODY, ROUTE_AUTH_NONE,
	  LIMIT_ADDRESS },
	{ HTTP_GET, "/status", ROUTE_PUBLIC, h_public, NO_PARAMS, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, NULL, 0, NULL, NO_PARAMS, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
};

START_TEST(test_router_rate_limit_address)
{
	struct http_request req;
	struct http_reply rep;
	test_cfg.limit_address = (struct config_limit){ .rate_milli = 1, .burst = 2 };
	test_cfg.limit_buckets = 64;
	test_app.limits = rate_limits_new(&test_cfg);
	ck_assert_ptr_nonnull(test_app.limits);
	for (int i = 0; i < 2; i++) {
		req_get(&req, HTTP_GET, "/page/a", "");
		memcpy(req.remote_ip, "192.0.2.1", 10);
		run_table(limited_table, &req, &rep);
		ck_assert_int_eq(rep.status, 200);
		done(&req, &rep);
	}
	/* A cross-site POST is refused by the limit first: no check costs more than it. */
	req_post(&req, "/page/a", FORM_CT, "");
	memcpy(req.remote_ip, "192.0.2.1", 10);
	run_table(limited_table, &req, &rep);
	ck_assert_int_eq(rep.status, 429);
	ck_assert_str_eq(rep.content_type, "text/html; charset=utf-8");
	ck_assert_ptr_nonnull(hdr(&rep, "Retry-After"));
	ck_assert_int_ge(strtol(hdr(&rep, "Retry-After"), NULL, 10), 1);
	ck_assert_ptr_nonnull(strstr(body(&rep), "Too many requests came from your network"));
	ck_assert_ptr_null(strstr(body(&rep), "form"));      /* the handler did not run */
	ck_assert_str_eq(rep.log.error, "too_many_requests");
	done(&req, &rep);
	for (int i = 0; i < 5; i++) {          /* not limited: /status */
		req_get(&req, HTTP_GET, "/status", "");
		memcpy(req.remote_ip, "192.0.2.1", 10);
		run_table(limited_table, &req, &rep);
		ck_assert_int_eq(rep.status, 200);
		done(&req, &rep);
	}
	req_get(&req, HTTP_GET, "/page/a", "");
	memcpy(req.remote_ip, "192.0.2.2", 10);
	run_table(limited_table, &req, &rep);
	ck_assert_int_eq(rep.status, 200);
	done(&req, &rep);
	rate_limits_free(test_app.limits);
	test_app.limits = NULL;
}
END_TEST

static Suite *router_suite(void)
{
	Suite *s = suite_create("router");
	TCase *tc = tcase_create("router");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_router_match_exact);
	tcase_add_test(tc, test_router_reply_log_fields);
	tcase_add_test(tc, test_router_capture_over_bound_404);
	tcase_add_test(tc, test_router_match_capture_decoded);
	tcase_add_test(tc, test_router_arena_holds_captures_and_params);
	tcase_add_test(tc, test_router_match_two_captures);
	tcase_add_test(tc, test_router_match_encoded_slash_404);
	tcase_add_test(tc, test_router_match_bad_capture_encoding_404);
	tcase_add_test(tc, test_router_match_empty_capture_404);
	tcase_add_test(tc, test_router_match_trailing_or_double_slash_404);
	tcase_add_test(tc, test_router_unknown_path_browser_html_404);
	tcase_add_test(tc, test_router_unknown_path_not_reflected);
	tcase_add_test(tc, test_router_unknown_path_oauth_json_404);
	tcase_add_test(tc, test_router_kind_for_path_from_table);
	tcase_add_test(tc, test_router_typed_values_reach_the_handler);
	tcase_add_test(tc, test_router_typed_values_refused_before_the_handler);
	tcase_add_test(tc, test_router_method_405_allow_lists_methods);
	tcase_add_test(tc, test_router_method_405_oauth_json);
	tcase_add_test(tc, test_router_method_head_served_by_get);
	tcase_add_test(tc, test_router_method_same_path_picks_method);
	tcase_add_test(tc, test_router_oauth_unknown_params_ignored);
	tcase_add_test(tc, test_router_oauth_all_declared_params);
	tcase_add_test(tc, test_router_oauth_charset_content_type_ok);
	tcase_add_test(tc, test_router_oauth_duplicate_400);
	tcase_add_test(tc, test_router_oauth_oversized_400);
	tcase_add_test(tc, test_router_oauth_validator_400);
	tcase_add_test(tc, test_router_oauth_missing_required_400);
	tcase_add_test(tc, test_router_oauth_malformed_body_400);
	tcase_add_test(tc, test_router_oauth_wrong_content_type_415);
	tcase_add_test(tc, test_router_oauth_query_params_ignored);
	tcase_add_test(tc, test_router_browser_unknown_query_param_400);
	tcase_add_test(tc, test_router_browser_malformed_query_400);
	tcase_add_test(tc, test_router_browser_return_to_hostile_refused);
	tcase_add_test(tc, test_router_browser_return_to_good_accepted);
	tcase_add_test(tc, test_router_valid_return_to_direct);
	tcase_add_test(tc, test_router_browser_post_origin_same_accepted);
	tcase_add_test(tc, test_router_browser_post_origin_other_403);
	tcase_add_test(tc, test_router_browser_post_origin_null_same_origin_accepted);
	tcase_add_test(tc, test_router_browser_post_origin_null_cross_site_403);
	tcase_add_test(tc, test_router_browser_post_no_origin_no_fetch_site_403);
	tcase_add_test(tc, test_router_browser_post_without_app_403);
	tcase_add_test(tc, test_router_browser_post_params_checked);
	tcase_add_test(tc, test_router_browser_error_escapes_nothing_raw);
	tcase_add_test(tc, test_router_api_json_ok);
	tcase_add_test(tc, test_router_api_wrong_content_type_415);
	tcase_add_test(tc, test_router_api_query_refused_400);
	tcase_add_test(tc, test_router_handler_error_browser_500_html);
	tcase_add_test(tc, test_router_handler_error_oauth_500_json);
	tcase_add_test(tc, test_router_handler_no_status_500);
	tcase_add_test(tc, test_router_security_headers_defaults);
	tcase_add_test(tc, test_router_security_headers_given_csp);
	tcase_add_test(tc, test_router_security_headers_cache_max_age);
	tcase_add_test(tc, test_router_security_headers_hsts_only_https);
	tcase_add_test(tc, test_router_security_headers_form_action_idp_origin);
	tcase_add_test(tc, test_router_match_rest_capture_raw);
	tcase_add_test(tc, test_router_security_headers_after_error_reply);
	tcase_add_test(tc, test_router_reply_header_refuses_crlf);
	tcase_add_test(tc, test_router_reply_header_cap);
	tcase_add_test(tc, test_router_reply_headers_in_reply_memory);
	tcase_add_test(tc, test_router_reply_oauth_error_escapes);
	tcase_add_test(tc, test_router_method_name);
	tcase_add_test(tc, test_router_rate_limit_address);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(router_suite());
}
