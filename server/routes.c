/* routes.c -- the route table: every URL consentd answers, its method, the
 * kind of client it serves and the parameters it accepts.  A parameter not
 * declared here never reaches a handler. */
#include <stddef.h>
#include <string.h>
#include "http.h"
#include "login.h"
#include "meta.h"

static bool valid_prompt(const char *v)
{
	return strcmp(v, "login") == 0;
}

static bool valid_digits(const char *v)
{
	if (*v == '\0')
		return false;
	for (; *v; v++)
		if (*v < '0' || *v > '9')
			return false;
	return true;
}

const struct route http_routes[] = {
	{ HTTP_GET, "/", ROUTE_BROWSER, meta_index, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/.well-known/oauth-authorization-server", ROUTE_PUBLIC, meta_as_metadata,
	  { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/.well-known/jwks.json", ROUTE_PUBLIC, meta_jwks, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/healthz", ROUTE_PUBLIC, meta_healthz, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/readyz", ROUTE_PUBLIC, meta_readyz, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/static/consentd.css", ROUTE_PUBLIC, meta_stylesheet, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/login", ROUTE_BROWSER, login_start, {
		{ "return_to", 1024, valid_return_to, 0 },
		{ "prompt", 16, valid_prompt, 0 },
		{ "max_age", 10, valid_digits, 0 },
		{ NULL, 0, NULL, 0 } }, 0 },
	/* The IdP decides which parameters come back; these are every one that
	 * OpenID Connect and RFC 9207 define for a code response. */
	{ HTTP_GET, "/callback", ROUTE_BROWSER, login_callback, {
		{ "code", 4096, valid_printable, 0 },
		{ "state", 128, valid_token68, 0 },
		{ "iss", 1024, valid_printable, 0 },
		{ "error", 256, valid_printable, 0 },
		{ "error_description", 1024, valid_printable, 0 },
		{ "error_uri", 1024, valid_printable, 0 },
		{ "session_state", 1024, valid_printable, 0 },
		{ NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_POST, "/logout", ROUTE_BROWSER, login_logout, {
		{ "csrf", 64, valid_token68, PARAM_REQUIRED },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY },
	{ HTTP_GET, "/me", ROUTE_BROWSER, login_me, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, NULL, 0, NULL, { { NULL, 0, NULL, 0 } }, 0 },
};
