/* fuzz_proxy_request.c -- libFuzzer target for what turns a gateway's /proxy
 * request into the upstream request, without the network: the path is
 * normalised and matched against a fixed route table (proxy_path_normalise,
 * proxy_route_match), the query, content type and body become the action's
 * parameters (proxy_params_build), the upstream URL is rebuilt from them
 * (proxy_url_build) and the header lines are chosen (proxy_api_upstream_headers).
 * The input is NUL-separated fields: method, rest of the path, query,
 * Content-Type, the five forwarded request headers, then the body (the rest,
 * NULs included).  Never crashes or leaks; status 200 exactly on CS_OK; the
 * URL's query holds only encoded text; the header lines are the Authorization
 * line, allowlisted names and Content-Type, each one line. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "config.h"
#include "http.h"
#include "proxy.h"
#include "proxy_api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

#define BASE "https://api.example.com/v1"
#define CFG \
	"[server]\npublic_url = https://consent.example.com\n" \
	"[oidc]\nissuer = https://idp.example.com\nclient_id = consentd\nclient_secret = oidc-secret\n" \
	"[gateway]\nclient_secret = gateway-secret-0123456789\n" \
	"[resource.gh]\nbase_url = " BASE "\n" \
	"[scope.gh.read]\n[scope.gh.write]\n" \
	"[action.gh.a]\nscope = read\nroute = GET /repos/{owner}/{repo}/issues\n" \
	"[action.gh.b]\nscope = write\nroute = POST /repos/{owner}/{repo}/issues\n" \
	"[action.gh.c]\nscope = write\nroute = PUT /x/{one}\n" \
	"[action.gh.d]\nscope = read\nroute = GET /search\n"

#define NFIELDS 9                    /* before the body */
static const char *const hnames[] = { "Accept", "If-None-Match", "If-Match",
	"If-Modified-Since", "If-Unmodified-Since" };

struct fake { const char *v[5]; };

static const char *fake_header(void *ctx, const char *name)
{
	const struct fake *f = ctx;
	for (size_t i = 0; i < 5; i++)
		if (strcasecmp(hnames[i], name) == 0)
			return f->v[i][0] != '\0' ? f->v[i] : NULL;
	return NULL;      /* Authorization, Cookie, ...: present or not, never asked for */
}

static struct config *cfg;

static int query_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	    c == '-' || c == '.' || c == '_' || c == '~' || c == '%' || c == '=' || c == '&';
}

static void check_headers(const struct proxy_headers *h, const char *token, int body)
{
	CHECK(h->n >= 1 && h->n <= PROXY_MAX_HEADER_LINES && h->line[h->n] == NULL);
	CHECK(strncmp(h->line[0], "Authorization: Bearer ", 22) == 0);
	CHECK(strcmp(h->line[0] + 22, token) == 0);
	for (size_t i = 0; i < h->n; i++) {
		const char *l = h->line[i];
		size_t nl = strcspn(l, ":");
		int known = i == 0;
		CHECK(strpbrk(l, "\r\n") == NULL);
		for (size_t k = 0; k < 5; k++)
			known |= strlen(hnames[k]) == nl && strncmp(l, hnames[k], nl) == 0;
		if (body && i == h->n - 1)
			known |= strcmp(l, "Content-Type: application/json") == 0;
		CHECK(known);
		CHECK(i == 0 || strncasecmp(l, "Authorization", 13) != 0);
	}
}

static void run(const char *method, const char *rest, const struct proxy_input *in,
    const struct http_request *req)
{
	struct proxy_path p;
	struct proxy_match m;
	json_t *params = NULL;
	char why[160], *url = NULL;
	int status = 0;
	struct proxy_headers h;

	if (proxy_path_normalise(rest, &p) != CS_OK)
		return;
	if (proxy_route_match(cfg, "gh", method, &p, &m) != CS_OK)
		goto out_path;
	why[0] = '\0';
	enum cs_err e = proxy_params_build(&m, in, &params, &status, why, sizeof why);
	CHECK((e == CS_OK) == (status == 200));
	if (e != CS_OK) {
		CHECK(status == 400 || status == 413 || status == 415 || status == 500);
		CHECK(why[0] != '\0' || status == 500);
		goto out_match;
	}
	CHECK(json_is_object(json_object_get(params, "path")));
	CHECK(json_object_size(json_object_get(params, "path")) == m.n);
	CHECK(json_is_object(json_object_get(params, "query")));
	CHECK(json_object_get(params, "body") != NULL);
	if (proxy_url_build(BASE, m.action->route_path, &m, params, &url) == CS_OK) {
		const char *q = strchr(url, '?');
		CHECK(strncmp(url, BASE "/", sizeof BASE) == 0);
		CHECK(strchr(url, '#') == NULL);
		if (q != NULL)
			for (q++; *q; q++)
				CHECK(query_char((unsigned char)*q));
		free(url);
	}
	{
		int has_body = !json_is_null(json_object_get(params, "body"));
		if (proxy_api_upstream_headers(req, "tok-123", has_body, &h) == CS_OK) {
			check_headers(&h, "tok-123", has_body);
			proxy_headers_clear(&h);
		}
	}
	json_decref(params);
out_match:
	proxy_match_clear(&m);
out_path:
	proxy_path_clear(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *f[NFIELDS];
	struct fake fk;
	size_t at = 0;
	char *s;

	if (cfg == NULL && config_load_string(CFG, strlen(CFG), "fuzz.conf", NULL, NULL, &cfg) != CS_OK)
		__builtin_trap();
	if (size > 65536 || (s = malloc(size + 1)) == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	for (size_t i = 0; i < NFIELDS; i++) {
		f[i] = s + at;
		while (at < size && s[at] != '\0')
			at++;
		if (at < size)
			at++;                    /* past the NUL */
	}
	for (size_t i = 0; i < 5; i++)
		fk.v[i] = f[4 + i];
	{
		struct proxy_input in = { .query = f[2][0] != '\0' ? f[2] : NULL,
			.content_type = f[3][0] != '\0' ? f[3] : NULL,
			.body = s + at, .body_len = size - at };
		struct http_request req;
		memset(&req, 0, sizeof req);
		req.header = fake_header;
		req.hctx = &fk;
		run(f[0], f[1], &in, &req);
		/* A forwarded value with CR or LF, and a token with one: refused, never a line. */
		{
			struct proxy_headers h;
			CHECK(proxy_api_upstream_headers(&req, "a\r\nCookie: x", 0, &h) == CS_EINVAL);
			CHECK(proxy_api_upstream_headers(&req, NULL, 0, &h) == CS_EINVAL);
		}
	}
	free(s);
	return 0;
}
