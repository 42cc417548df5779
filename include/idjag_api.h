/* idjag_api.h -- /token with grant_type urn:ietf:params:oauth:grant-type:jwt-bearer
 * (an MCP client's ID-JAG; idjag_grant.h), the handler token_api.c dispatches to.
 * The route's gate lets this grant type past the gateway's authentication:
 * the MCP client authenticates here (401 invalid_client otherwise). */
#ifndef CS_IDJAG_API_H
#define CS_IDJAG_API_H

#include "http.h"

/* /token's own parameters of this grant, as token_api.c read them (the
 * client's are client_auth_api.h's). */
struct idjag_api_params {
	const char *assertion;           /* the ID-JAG, or NULL */
	const char *resource, *scope;    /* or NULL */
};

/* Authenticates the MCP client (idjag_client_authenticate), then idjag_grant,
 * answered as RFC 6749 JSON (Cache-Control: no-store). */
enum cs_err idjag_api_token(const struct http_request *req, struct http_reply *rep,
    const struct idjag_api_params *p) CS_MUST_CHECK;

#endif
