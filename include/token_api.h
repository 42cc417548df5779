/* token_api.h -- the gateway's endpoints (token_api.c): /token (RFC 8693
 * token exchange for grants and provider tokens, refresh_token), /introspect
 * (RFC 7662) and /revoke (RFC 7009).  Client authentication is client_auth.h's. */
#ifndef CS_TOKEN_API_H
#define CS_TOKEN_API_H
#include <stdbool.h>
#include <stddef.h>
#include "client_auth_api.h"
#include "exchange.h"
#include "grant_api.h"
#include "http.h"

/* /token's parameters by position in its route (routes.c), after client
 * authentication's (client_auth_api.h), which every gateway form route
 * declares first. */
enum token_api_param {
	TOKEN_P_GRANT_TYPE = CLIENT_AUTH_P__MAX,
	TOKEN_P_SUBJECT_TOKEN,
	TOKEN_P_SUBJECT_TOKEN_TYPE,
	TOKEN_P_REQUESTED_TOKEN_TYPE,
	TOKEN_P_AUDIENCE,
	TOKEN_P_RESOURCE,
	TOKEN_P_SCOPE,
	TOKEN_P_AGENT_ID,
	TOKEN_P_REASON,
	TOKEN_P_REFRESH_TOKEN,
	TOKEN_P_ACTION,
	TOKEN_P_AUTHORIZATION_DETAILS,
	/* grant_type=authorization_code of an MCP client (mcp_token.h) */
	TOKEN_P_CODE,
	TOKEN_P_REDIRECT_URI,
	TOKEN_P_CODE_VERIFIER,
	TOKEN_P_ASSERTION,               /* jwt-bearer: the ID-JAG (idjag_grant.h) */
	TOKEN_P__MAX
};
/* /introspect's and /revoke's, the same on both. */
enum token_api_token_param {
	TOKEN_P_TOKEN = CLIENT_AUTH_P__MAX,
	TOKEN_P_TOKEN_TYPE_HINT,
	TOKEN_P_TOKEN__MAX
};

/* /token's grant presenter (grant_api_gate runs the check): a provider-token
 * exchange (grant_type token-exchange, requested_token_type access_token)
 * presents its grant as the subject token, of type access_token, and names
 * its action; the audience and resource it names must be the grant's.  Any
 * other /token call presents none.  *ok false: rep holds the 400. */
enum cs_err token_api_grant_presented(const struct http_request *req, struct http_reply *rep,
    struct grant_api_presented *out, bool *ok) CS_MUST_CHECK;

enum cs_err token_api_token(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err token_api_introspect(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err token_api_revoke(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

#endif
