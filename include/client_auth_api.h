/* client_auth_api.h -- the gateway's client authentication (client_auth.h)
 * as the gate of ROUTE_AUTH_GATEWAY routes: read from the request, answered
 * 401 invalid_client or 429. */
#ifndef CS_CLIENT_AUTH_API_H
#define CS_CLIENT_AUTH_API_H

#include <stdbool.h>
#include "http.h"

/* Where the gateway's form routes (/token, /introspect, /revoke) declare the
 * private_key_jwt parameters (RFC 7523 §2.2): the same first positions on
 * each, so that one gate reads them by index; every route's own parameters
 * follow (token_api.h).  A route without them (/proxy, /metrics) declares
 * none, and they read as absent. */
enum client_auth_api_param {
	CLIENT_AUTH_P_ASSERTION_TYPE = 0,
	CLIENT_AUTH_P_ASSERTION,
	CLIENT_AUTH_P_CLIENT_ID,
	CLIENT_AUTH_P__MAX
};

/* client_auth_gateway for req.  true: the gateway; false: rep holds 401
 * invalid_client (with WWW-Authenticate: Basic when Basic is on) or, for an
 * address that used up [limits] auth_failure_burst, the 429 of that limit. */
bool client_auth_api_gateway(const struct http_request *req, struct http_reply *rep);

#endif
