/* test_proxy.c -- proxy mode's pure parts: path normalisation (every encoded
 * traversal and separator trick), route matching with default deny, the
 * action's parameters from a request, and the rebuilt upstream URL (proxy.c);
 * also proxy_api.c's pure helpers: the upstream headers, the presented grant. */
#include <stdint.h>
#include <strings.h>

#include "testutil.h"
#include "app.h"
#include "config.h"
#include "proxy.h"
#include "proxy_api.h"

#define CFG \
	"[server]\npublic_url = https://consent.example.com\n" \
	"[oidc]\nissuer = https://idp.example.com\nclient_id = consentd\nclient_secret = oidc-secret\n" \
	"[gateway]\nclient_secret = gateway-secret-0123456789\n" \
	"[resource.gh]\nbase_url = https://api.example.com/v1/\n" \
	"[scope.gh.read]\n[scope.gh.write]\n" \
	"[action.gh.list_issues]\nscope = read\nroute = GET /repos/{owner}/{repo}/issues\n" \
	"[action.gh.create_issue]\nscope = write\napproval = required\n" \
	"route = POST /repos/{owner}/{repo}/issues\n" \
	"[action.gh.user]\nscope = read\nroute = GET /user\n"

static struct config *load(void)
{
	struct config *c = NULL;
	ck_assert_int_eq(config_load_string(CFG, strlen(CFG), "x.conf", NULL, NULL, &c), CS_OK);
	return c;
}

static void norm_fails(const char *raw)
{
	struct proxy_path p = { .n = 0 };
	ck_assert_msg(proxy_path_normalise(raw, &p) != CS_OK, "accepted: %s", raw);
	ck_assert_uint_eq(p.n, 0);
}

START_TEST(test_proxy_normalise_ok)
{
	struct proxy_path p;
	ck_assert_int_eq(proxy_path_normalise("repos/a/b/issues", &p), CS_OK);
	ck_assert_uint_eq(p.n, 4);
	ck_assert_str_eq(p.seg[0], "repos");
	ck_assert_str_eq(p.seg[3], "issues");
	proxy_path_clear(&p);
	ck_assert_int_eq(proxy_path_normalise("repos/h%C3%A9/b%20c/issues", &p), CS_OK);
	ck_assert_str_eq(p.seg[1], "h\xc3\xa9");
	ck_assert_str_eq(p.seg[2], "b c");
	proxy_path_clear(&p);
}
END_TEST

START_TEST(test_proxy_normalise_refuses_traversal_and_separators)
{
	norm_fails("");
	norm_fails("repos/../admin");
	norm_fails("..");
	norm_fails("repos/./a");
	norm_fails("repos/%2e%2e/admin");
	norm_fails("repos/%2E%2e/admin");
	norm_fails("repos/%2e/admin");
	norm_fails("repos/a%2fb/issues");
	norm_fails("repos/a%2Fb/issues");
	norm_fails("repos/a%5cb/issues");
	norm_fails("repos/a\\b/issues");
	norm_fails("repos//issues");
	norm_fails("/repos/a");
	norm_fails("repos/a/");
	norm_fails("repos/a%00b");
	norm_fails("repos/a%0ab");
	norm_fails("repos/a%zz");
	norm_fails("repos/a%");
	norm_fails("repos/%ff");
}
END_TEST

START_TEST(test_proxy_normalise_decodes_once)
{
	struct proxy_path p;
	ck_assert_int_eq(proxy_path_normalise("repos/%252e%252e/b/issues", &p), CS_OK);
	ck_assert_str_eq(p.seg[1], "%2e%2e");
	proxy_path_clear(&p);
}
END_TEST

START_TEST(test_proxy_match_route_and_default_deny)
{
	struct config *c = load();
	struct proxy_path p;
	struct proxy_match m;
	ck_assert_int_eq(proxy_path_normalise("repos/a%20b/c/issues", &p), CS_OK);
	ck_assert_int_eq(proxy_route_match(c, "gh", "GET", &p, &m), CS_OK);
	ck_assert_str_eq(m.action->name, "list_issues");
	ck_assert_uint_eq(m.n, 2);
	ck_assert_str_eq(m.name[0], "owner");
	ck_assert_str_eq(m.value[0], "a b");
	ck_assert_str_eq(m.value[1], "c");
	proxy_match_clear(&m);
	ck_assert_int_eq(proxy_route_match(c, "gh", "POST", &p, &m), CS_OK);
	ck_assert_str_eq(m.action->name, "create_issue");
	proxy_match_clear(&m);
	/* Default deny: other method, other resource. */
	ck_assert_int_eq(proxy_route_match(c, "gh", "DELETE", &p, &m), CS_ENOENT);
	ck_assert_int_eq(proxy_route_match(c, "other", "GET", &p, &m), CS_ENOENT);
	proxy_path_clear(&p);
	/* Default deny: one segment more or less, another literal. */
	ck_assert_int_eq(proxy_path_normalise("repos/a/b/issues/1", &p), CS_OK);
	ck_assert_int_eq(proxy_route_match(c, "gh", "GET", &p, &m), CS_ENOENT);
	proxy_path_clear(&p);
	ck_assert_int_eq(proxy_path_normalise("repos/a/issues", &p), CS_OK);
	ck_assert_int_eq(proxy_route_match(c, "gh", "GET", &p, &m), CS_ENOENT);
	proxy_path_clear(&p);
	ck_assert_int_eq(proxy_path_normalise("Repos/a/b/issues", &p), CS_OK);
	ck_assert_int_eq(proxy_route_match(c, "gh", "GET", &p, &m), CS_ENOENT);
	proxy_path_clear(&p);
	ck_assert_int_eq(proxy_path_normalise("user", &p), CS_OK);
	ck_assert_int_eq(proxy_route_match(c, "gh", "GET", &p, &m), CS_OK);
	ck_assert_uint_eq(m.n, 0);
	proxy_match_clear(&m);
	proxy_path_clear(&p);
	config_free(c);
}
END_TEST

static json_t *params_ok(const struct proxy_match *m, const char *q, const char *ct, const char *body)
{
	json_t *v = NULL;
	int status = 0;
	char why[160];
	ck_assert_int_eq(proxy_params_build(m, &(struct proxy_input){ q, ct, body,
	    body ? strlen(body) : 0 }, &v, &status, why, sizeof why), CS_OK);
	return v;
}

static int params_status(const struct proxy_match *m, const char *q, const char *ct, const char *body)
{
	json_t *v = NULL;
	int status = 0;
	char why[160];
	ck_assert_int_ne(proxy_params_build(m, &(struct proxy_input){ q, ct, body,
	    body ? strlen(body) : 0 }, &v, &status, why, sizeof why), CS_OK);
	ck_assert_ptr_null(v);
	return status;
}

START_TEST(test_proxy_params_shape)
{
	struct config *c = load();
	struct proxy_path p;
	struct proxy_match m;
	ck_assert_int_eq(proxy_path_normalise("repos/o/r/issues", &p), CS_OK);
	ck_assert_int_eq(proxy_route_match(c, "gh", "POST", &p, &m), CS_OK);
	json_t *v = params_ok(&m, "state=open&label=a&label=b%20c", "application/json; charset=utf-8",
	    "{\"title\":\"hi\",\"n\":1}");
	char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
	ck_assert_str_eq(s, "{\"body\":{\"n\":1,\"title\":\"hi\"},\"path\":{\"owner\":\"o\",\"repo\":\"r\"},"
	    "\"query\":{\"label\":[\"a\",\"b c\"],\"state\":[\"open\"]}}");
	free(s);
	json_decref(v);
	v = params_ok(&m, "", NULL, NULL);
	s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
	ck_assert_str_eq(s, "{\"body\":null,\"path\":{\"owner\":\"o\",\"repo\":\"r\"},\"query\":{}}");
	free(s);
	json_decref(v);
	/* Bodies: JSON only, I-JSON only. */
	ck_assert_int_eq(params_status(&m, "", "text/plain", "hello"), 415);
	ck_assert_int_eq(params_status(&m, "", NULL, "{}"), 415);
	ck_assert_int_eq(params_status(&m, "", "application/x-www-form-urlencoded", "a=1"), 415);
	ck_assert_int_eq(params_status(&m, "", "application/json", "{\"a\":1,\"a\":2}"), 400);
	ck_assert_int_eq(params_status(&m, "", "application/json", "{\"a\":9007199254740993}"), 400);
	ck_assert_int_eq(params_status(&m, "", "application/json", "{\"a\":"), 400);
	ck_assert_int_eq(params_status(&m, "", "application/json", "\"\\u0000\""), 400);
	ck_assert_int_eq(params_status(&m, "a=%zz", NULL, NULL), 400);
	proxy_match_clear(&m);
	proxy_path_clear(&p);
	config_free(c);
}
END_TEST

START_TEST(test_proxy_url_rebuilt)
{
	struct config *c = load();
	const struct config_resource *r = config_resource(c, "gh");
	struct proxy_path p;
	struct proxy_match m;
	char *url = NULL;
	ck_assert_int_eq(proxy_path_normalise("repos/%252e%252e/a%20b%3F%23/issues", &p), CS_OK);
	ck_assert_int_eq(proxy_route_match(c, "gh", "GET", &p, &m), CS_OK);
	json_t *v = params_ok(&m, "q=x+y&q=%26&z", NULL, NULL);
	ck_assert_int_eq(proxy_url_build(r->base_url, m.action->route_path, &m, v, &url), CS_OK);
	ck_assert_str_eq(url, "https://api.example.com/v1/repos/%252e%252e/a%20b%3F%23/issues"
	    "?q=x%20y&q=%26&z=");
	free(url);
	json_decref(v);
	proxy_match_clear(&m);
	proxy_path_clear(&p);
	config_free(c);
}
END_TEST

/* The request headers a test request carries, by name (case-insensitive). */
struct hdrs { const char *name[8]; const char *value[8]; };
static const char *hdr_get(void *ctx, const char *name)
{
	const struct hdrs *h = ctx;
	for (size_t i = 0; i < 8 && h->name[i]; i++)
		if (strcasecmp(h->name[i], name) == 0)
			return h->value[i];
	return NULL;
}

START_TEST(test_proxy_upstream_headers_allowlist)
{
	struct hdrs in = { { "Authorization", "Cookie", "Consentd-Grant", "Connection", "Accept",
		"if-none-match", "Host" }, { "Basic eA==", "sid=1", "g", "close", "application/json",
		"\"v1\"", "evil.example" } };
	struct http_request req;
	struct proxy_headers h;
	memset(&req, 0, sizeof req);
	req.header = hdr_get;
	req.hctx = &in;
	ck_assert_int_eq(proxy_api_upstream_headers(&req, "tok", true, &h), CS_OK);
	ck_assert_uint_eq(h.n, 4);
	ck_assert_str_eq(h.line[0], "Authorization: Bearer tok");
	ck_assert_str_eq(h.line[1], "Accept: application/json");
	ck_assert_str_eq(h.line[2], "If-None-Match: \"v1\"");
	ck_assert_str_eq(h.line[3], "Content-Type: application/json");
	ck_assert_ptr_null(h.line[4]);
	proxy_headers_clear(&h);
	ck_assert_uint_eq(h.n, 0);
	ck_assert_ptr_null(h.own[0]);
	/* No body, no Content-Type; no header callback, the token alone. */
	req.header = NULL;
	ck_assert_int_eq(proxy_api_upstream_headers(&req, "tok", false, &h), CS_OK);
	ck_assert_uint_eq(h.n, 1);
	ck_assert_ptr_null(h.line[1]);
	proxy_headers_clear(&h);
	proxy_headers_clear(NULL);
}
END_TEST

START_TEST(test_proxy_upstream_headers_refusals)
{
	char big[PROXY_MAX_HEADER_VALUE + 2];
	struct hdrs in = { { "Accept", "If-Match" }, { big, "\"e\"" } };
	struct http_request req;
	struct proxy_headers h;
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	memset(&req, 0, sizeof req);
	req.header = hdr_get;
	req.hctx = &in;
	/* An oversized value is left out, the others kept. */
	ck_assert_int_eq(proxy_api_upstream_headers(&req, "tok", false, &h), CS_OK);
	ck_assert_uint_eq(h.n, 2);
	ck_assert_str_eq(h.line[1], "If-Match: \"e\"");
	proxy_headers_clear(&h);
	/* A CR or LF, in a forwarded value or the provider's token, would be a
	 * second header line: refused, *out untouched. */
	memset(&h, 0x5a, sizeof h);
	in.value[0] = "text/html\r\nCookie: sid=1";
	ck_assert_int_eq(proxy_api_upstream_headers(&req, "tok", false, &h), CS_EINVAL);
	ck_assert_uint_eq(h.n, 0x5a5a5a5a5a5a5a5aULL);
	in.value[0] = "a\nb";
	ck_assert_int_eq(proxy_api_upstream_headers(&req, "tok", false, &h), CS_EINVAL);
	in.value[0] = "text/plain";
	ck_assert_int_eq(proxy_api_upstream_headers(&req, "t\r\nX-Evil: 1", false, &h), CS_EINVAL);
	ck_assert_int_eq(proxy_api_upstream_headers(&req, "t\n", false, &h), CS_EINVAL);
	ck_assert_int_eq(proxy_api_upstream_headers(&req, NULL, false, &h), CS_EINVAL);
	/* A token beyond the cap. */
	char *tok = malloc(20000);
	memset(tok, 'a', 19999);
	tok[19999] = '\0';
	ck_assert_int_eq(proxy_api_upstream_headers(&req, tok, false, &h), CS_ETOOBIG);
	free(tok);
}
END_TEST

/* An API key (credential = api_key): in its header with the prefix, or in
 * the query percent-encoded after the call's own parameters; never for an
 * OAuth resource, never a key that could split a line. */
START_TEST(test_proxy_key_apply)
{
	struct config_resource r;
	char *line = NULL, *url = NULL;
	memset(&r, 0, sizeof r);
	r.credential = CREDENTIAL_API_KEY;
	r.api_key_header = "X-Api-Key";
	r.api_key_prefix = "Token ";
	ck_assert_int_eq(proxy_api_key_apply(&r, "sk-1", "https://api.test/items?a=1", &line, &url),
	    CS_OK);
	ck_assert_str_eq(line, "X-Api-Key: Token sk-1");
	ck_assert_str_eq(url, "https://api.test/items?a=1");
	free(line);
	free(url);
	r.api_key_header = NULL;
	r.api_key_query = "key";
	r.api_key_prefix = "";
	ck_assert_int_eq(proxy_api_key_apply(&r, "k&x=1#f", "https://api.test/items?a=1", &line, &url),
	    CS_OK);
	ck_assert_ptr_null(line);
	ck_assert_str_eq(url, "https://api.test/items?a=1&key=k%26x%3D1%23f");
	free(url);
	ck_assert_int_eq(proxy_api_key_apply(&r, "k", "https://api.test/items", &line, &url), CS_OK);
	ck_assert_str_eq(url, "https://api.test/items?key=k");
	free(url);
	/* Refused: a key with CR, LF or a space; an OAuth resource; none of header and query. */
	ck_assert_int_eq(proxy_api_key_apply(&r, "k\r\nX-Evil: 1", "https://a.test/", &line, &url),
	    CS_EINVAL);
	ck_assert_int_eq(proxy_api_key_apply(&r, "k k", "https://a.test/", &line, &url), CS_EINVAL);
	ck_assert_int_eq(proxy_api_key_apply(&r, "", "https://a.test/", &line, &url), CS_EINVAL);
	r.api_key_query = NULL;
	ck_assert_int_eq(proxy_api_key_apply(&r, "k", "https://a.test/", &line, &url), CS_EINVAL);
	ck_assert_ptr_null(url);
	r.credential = CREDENTIAL_OAUTH;
	r.api_key_header = "X-Api-Key";
	ck_assert_int_eq(proxy_api_key_apply(&r, "k", "https://a.test/", &line, &url), CS_EINVAL);
}
END_TEST

START_TEST(test_proxy_metrics_format)
{
	struct config *cfg = load();
	struct app app;
	struct http_request req;
	struct http_reply rep;
	memset(&app, 0, sizeof app);
	app.cfg = cfg;
	memset(&req, 0, sizeof req);
	req.app = &app;
	req.method = HTTP_GET;
	req.path = "/metrics";
	req.query = "";
	/* Without the gateway's credentials, or with a wrong secret: 401 invalid_client
	 * (the route's gateway gate, which the router runs before proxy_metrics). */
	const char *bad[] = { NULL, "Basic YWdlbnQtZ2F0ZXdheTp3cm9uZw==", "Bearer x" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		reply_init(&rep);
		req.authorization = bad[i];
		router_dispatch(http_routes, &req, &rep);
		http_request_clear(&req);
		ck_assert_int_eq(rep.status, 401);
		ck_assert_ptr_null(strstr(rep.body.data, "consentd_proxy"));
		reply_clear(&rep);
	}
	/* agent-gateway:gateway-secret-0123456789 */
	reply_init(&rep);
	req.authorization = "Basic YWdlbnQtZ2F0ZXdheTpnYXRld2F5LXNlY3JldC0wMTIzNDU2Nzg5";
	router_dispatch(http_routes, &req, &rep);
	http_request_clear(&req);
	ck_assert_int_eq(rep.status, 200);
	ck_assert_ptr_nonnull(strstr(rep.body.data, "# TYPE consentd_proxy_requests_total counter\n"));
	ck_assert_ptr_nonnull(strstr(rep.body.data, "# TYPE consentd_proxy_refused_total counter\n"));
	ck_assert_uint_eq(proxy_count("gh", "list_issues"), 0);
	reply_clear(&rep);
	config_free(cfg);
}
END_TEST

/* --- where the gateway puts the grant (RFC 9449 §7.1, RFC 6750 §2.1) -------- */

#define G "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"

static enum proxy_grant_via via_of(const char *authz, const char *cg, const char **grant,
    const char **why)
{
	*grant = NULL;
	*why = NULL;
	return proxy_api_grant_via(authz, cg, grant, why);
}

START_TEST(test_proxy_grant_presented_places)
{
	const char *g, *why;
	/* Authorization: DPoP <grant>, the scheme in any case, one or more spaces. */
	ck_assert_int_eq(via_of("DPoP " G, NULL, &g, &why), PROXY_GRANT_DPOP);
	ck_assert_str_eq(g, G);
	ck_assert_ptr_null(why);
	ck_assert_int_eq(via_of("dpop   " G, NULL, &g, &why), PROXY_GRANT_DPOP);
	ck_assert_str_eq(g, G);
	ck_assert_int_eq(via_of("Bearer " G, NULL, &g, &why), PROXY_GRANT_BEARER);
	ck_assert_str_eq(g, G);
	ck_assert_int_eq(via_of("BEARER " G, "", &g, &why), PROXY_GRANT_BEARER);
	/* Consentd-Grant beside the gateway's Basic credentials, or alone. */
	ck_assert_int_eq(via_of("Basic YWdlbnQ6c2VjcmV0", G, &g, &why), PROXY_GRANT_HEADER);
	ck_assert_str_eq(g, G);
	ck_assert_int_eq(via_of(NULL, G, &g, &why), PROXY_GRANT_HEADER);
	/* Nowhere: no header, an empty one, or Authorization with another scheme. */
	ck_assert_int_eq(via_of(NULL, NULL, &g, &why), PROXY_GRANT_ABSENT);
	ck_assert_ptr_null(g);
	ck_assert_int_eq(via_of(NULL, "", &g, &why), PROXY_GRANT_ABSENT);
	ck_assert_int_eq(via_of("Basic YWdlbnQ6c2VjcmV0", NULL, &g, &why), PROXY_GRANT_ABSENT);
	ck_assert_int_eq(via_of("DPoPx " G, NULL, &g, &why), PROXY_GRANT_ABSENT);
	ck_assert_int_eq(via_of("Bearer", NULL, &g, &why), PROXY_GRANT_ABSENT);
	ck_assert_int_eq(via_of("Negotiate abc", NULL, &g, &why), PROXY_GRANT_ABSENT);
	ck_assert_ptr_null(why);
}
END_TEST

START_TEST(test_proxy_grant_presented_refusals)
{
	const char *g, *why;
	/* Both places: never guess which one counts. */
	ck_assert_int_eq(via_of("DPoP " G, G, &g, &why), PROXY_GRANT_MALFORMED);
	ck_assert_ptr_nonnull(strstr(why, "given twice"));
	ck_assert_ptr_null(g);
	ck_assert_int_eq(via_of("Bearer " G, "other", &g, &why), PROXY_GRANT_MALFORMED);
	ck_assert_ptr_nonnull(strstr(why, "given twice"));
	/* Not one token68 after the scheme. */
	ck_assert_int_eq(via_of("DPoP ", NULL, &g, &why), PROXY_GRANT_MALFORMED);
	ck_assert_str_eq(why, "the Authorization header is not DPoP <grant>");
	ck_assert_int_eq(via_of("DPoP " G " extra", NULL, &g, &why), PROXY_GRANT_MALFORMED);
	ck_assert_int_eq(via_of("DPoP " G ",x", NULL, &g, &why), PROXY_GRANT_MALFORMED);
	ck_assert_int_eq(via_of("Bearer a\"b", NULL, &g, &why), PROXY_GRANT_MALFORMED);
	ck_assert_str_eq(why, "the Authorization header is not Bearer <grant>");
	/* CR or LF in either header: a smuggling attempt. */
	ck_assert_int_eq(via_of(NULL, G "\r\nX-Injected: 1", &g, &why), PROXY_GRANT_MALFORMED);
	ck_assert_str_eq(why, "a header value holds CR or LF");
	ck_assert_int_eq(via_of("DPoP " G "\n", NULL, &g, &why), PROXY_GRANT_MALFORMED);
	ck_assert_int_eq(via_of("Basic x\r", G, &g, &why), PROXY_GRANT_MALFORMED);
	ck_assert_ptr_null(g);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("proxy");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_proxy_normalise_ok);
	tcase_add_test(tc, test_proxy_normalise_refuses_traversal_and_separators);
	tcase_add_test(tc, test_proxy_normalise_decodes_once);
	tcase_add_test(tc, test_proxy_match_route_and_default_deny);
	tcase_add_test(tc, test_proxy_params_shape);
	tcase_add_test(tc, test_proxy_url_rebuilt);
	tcase_add_test(tc, test_proxy_upstream_headers_allowlist);
	tcase_add_test(tc, test_proxy_upstream_headers_refusals);
	tcase_add_test(tc, test_proxy_metrics_format);
	tcase_add_test(tc, test_proxy_grant_presented_places);
	tcase_add_test(tc, test_proxy_key_apply);
	tcase_add_test(tc, test_proxy_grant_presented_refusals);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
