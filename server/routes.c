/* routes.c -- the route table: every URL consentd answers, its method, the
 * kind of client it serves and the parameters it accepts.  A parameter not
 * declared here never reaches a handler. */
#include <stddef.h>
#include "http.h"
#include "meta.h"

const struct route http_routes[] = {
	{ HTTP_GET, "/", ROUTE_BROWSER, meta_index, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/.well-known/oauth-authorization-server", ROUTE_PUBLIC, meta_as_metadata,
	  { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/.well-known/jwks.json", ROUTE_PUBLIC, meta_jwks, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/healthz", ROUTE_PUBLIC, meta_healthz, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/readyz", ROUTE_PUBLIC, meta_readyz, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/static/consentd.css", ROUTE_PUBLIC, meta_stylesheet, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, NULL, 0, NULL, { { NULL, 0, NULL, 0 } }, 0 },
};
