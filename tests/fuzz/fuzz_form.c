/* fuzz_form.c -- libFuzzer target for the form parser, percent-decoding and
 * the router's parameter handling: the input is parsed as a form, decoded,
 * then sent as an OAuth and a browser form body, as a GET query and as a path.
 * Besides not crashing or leaking, it checks the promises the parsers make:
 * decoded text is NUL-free valid UTF-8, a refused form is empty, encoding
 * round-trips, and the router answers only with the statuses it may. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "config.h"
#include "form.h"
#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static enum cs_err h_echo(const struct http_request *req, struct http_reply *rep)
{
	enum cs_err e = CS_OK;
	rep->status = 200;
	rep->content_type = "text/plain";
	for (size_t i = 0; i < req->ncaptures && e == CS_OK; i++)
		e = buf_printf(&rep->body, "cap=%s|", req->captures[i]);
	for (size_t i = 0; i < req->params.n && e == CS_OK; i++)
		e = buf_printf(&rep->body, "%s=%s|", req->params.p[i].name, req->params.p[i].value);
	return e;
}

static bool valid_hint(const char *v)
{
	for (; *v; v++)
		if (*v < 'a' || *v > 'z')
			return false;
	return true;
}

#define NO_PARAMS { { NULL, 0, NULL, 0 } }

static const struct param_type hint[1] = { { .kind = PARAM_STRING, .valid = valid_hint } };

static const struct route table[] = {
	{ HTTP_GET, "/status", ROUTE_PUBLIC, h_echo, NO_PARAMS, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_POST, "/token", ROUTE_OAUTH, h_echo,
	  { { "grant_type", 64, param_token68, PARAM_REQUIRED },
	    { "hint", 8, hint, 0 },
	    { NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, "/consent/{id}", ROUTE_BROWSER, h_echo,
	  { { "return_to", 512, param_return_to, 0 },
	    { "decision", 16, param_printable, 0 },
	    { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_POST, "/consent/{id}", ROUTE_BROWSER, h_echo,
	  { { "decision", 16, param_printable, PARAM_REQUIRED },
	    { "note", 32, param_printable, 0 },
	    { NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, "/a/{x}/b/{y}", ROUTE_PUBLIC, h_echo, NO_PARAMS, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, NULL, 0, NULL, NO_PARAMS, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
};

static struct config cfg = { .public_url = (char *)"http://127.0.0.1:8080" };
static struct app app = { .cfg = &cfg };

/* Every accepted parameter was declared, appears once and passed its checks. */
static void check_params(const struct route *rt, const struct http_request *req)
{
	for (size_t i = 0; i < req->params.n; i++) {
		const struct form_param *p = &req->params.p[i];
		const struct param_spec *ps = NULL;
		for (const struct param_spec *s = rt->params; s->name; s++)
			if (strcmp(s->name, p->name) == 0)
				ps = s;
		CHECK(ps != NULL);
		CHECK(form_count(&req->params, p->name) == 1);
		CHECK(p->value_len <= ps->max_len);
		CHECK(strlen(p->value) == p->value_len);
		CHECK(ps->type == NULL || ps->type->valid == NULL || ps->type->valid(p->value));
	}
	for (const struct param_spec *s = rt->params; s->name; s++)
		if (s->flags & PARAM_REQUIRED)
			CHECK(form_get(&req->params, s->name) != NULL);
}

static void dispatch(enum http_method m, const char *path, const char *query, const char *body,
    size_t body_len, const struct route *expect)
{
	struct http_request req;
	struct http_reply rep;
	memset(&req, 0, sizeof req);
	req.method = m;
	req.path = path;
	req.query = query;
	req.body = body;
	req.body_len = body_len;
	req.content_type = "application/x-www-form-urlencoded";
	req.origin = "http://127.0.0.1:8080";
	req.app = &app;
	reply_init(&rep);
	router_dispatch(table, &req, &rep);
	/* The echo handler cannot fail, so no 500 and no status outside these. */
	CHECK(rep.status == 200 || rep.status == 400 || rep.status == 404 || rep.status == 405);
	CHECK(rep.content_type != NULL);
	if (rep.status == 200 && expect != NULL)
		check_params(expect, &req);
	if (rep.status != 200)
		CHECK(req.params.n == 0 || rep.status == 400);
	reply_clear(&rep);
	http_request_clear(&req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';

	/* The parser alone: all or nothing, and only clean text. */
	struct form f;
	enum cs_err e = form_parse(&f, s, size);
	CHECK(e == CS_OK || e == CS_EINVAL || e == CS_ETOOBIG);
	if (e == CS_OK) {
		CHECK(f.n <= FORM_MAX_PARAMS);
		for (size_t i = 0; i < f.n; i++) {
			CHECK(f.p[i].name[0] != '\0');
			CHECK(utf8_valid(f.p[i].name, strlen(f.p[i].name)));
			CHECK(strlen(f.p[i].value) == f.p[i].value_len);
			CHECK(utf8_valid(f.p[i].value, f.p[i].value_len));
			CHECK(form_count(&f, f.p[i].name) >= 1);
		}
	} else {
		CHECK(f.n == 0);
	}
	form_clear(&f);

	/* Percent-decoding both ways; what decodes must re-encode and decode back. */
	for (int plus = 0; plus <= 1; plus++) {
		char *out = NULL, *enc = NULL, *back = NULL;
		size_t n = 0, n2 = 0;
		if (pct_decode(s, size, plus, &out, &n) != CS_OK)
			continue;
		CHECK(strlen(out) == n);
		CHECK(utf8_valid(out, n));
		CHECK(n <= size);
		if (pct_encode(out, &enc) == CS_OK) {
			CHECK(pct_decode(enc, strlen(enc), 0, &back, &n2) == CS_OK);
			CHECK(n2 == n && memcmp(back, out, n) == 0);
			free(back);
			free(enc);
		}
		free(out);
	}

	/* The router: as form bodies (OAuth and browser), as a query, as a path. */
	dispatch(HTTP_POST, "/token", "", s, size, &table[1]);
	dispatch(HTTP_POST, "/consent/x", "", s, size, &table[3]);
	dispatch(HTTP_GET, "/consent/x", s, NULL, 0, &table[2]);
	dispatch(HTTP_GET, "/status", s, NULL, 0, &table[0]);
	dispatch(HTTP_GET, s, "", NULL, 0, NULL);
	dispatch(HTTP_POST, s, "", s, size, NULL);

	free(s);
	return 0;
}
