/* authorize_pages.h -- the authorization endpoint of MCP clients (issue #30;
 * docs/mcp.md, "The authorization endpoint"): GET /authorize checks the
 * request and keeps it, GET /authorize/{id} asks for the person's consent,
 * GET /authorize/{id}/done sends the client its code or its refusal. */
#ifndef CS_AUTHORIZE_PAGES_H
#define CS_AUTHORIZE_PAGES_H
#include <stdbool.h>
#include "http.h"

/* GET /authorize's parameters by position (routes.c declares them in this
 * order; http_arg reads them).  Any other parameter is ignored (RFC 6749 §3.1). */
enum authorize_pages_param { AUTHORIZE_P_RESPONSE_TYPE, AUTHORIZE_P_CLIENT_ID,
	AUTHORIZE_P_REDIRECT_URI, AUTHORIZE_P_STATE, AUTHORIZE_P_CODE_CHALLENGE,
	AUTHORIZE_P_CODE_CHALLENGE_METHOD, AUTHORIZE_P_SCOPE, AUTHORIZE_P_RESOURCE,
	AUTHORIZE_P_RESPONSE_MODE, AUTHORIZE_P_REQUEST, AUTHORIZE_P_REQUEST_URI,
	AUTHORIZE_P_DPOP_JKT, AUTHORIZE_P__MAX };

/* GET /authorize: the client's request, checked (authz_check) against the
 * client's registration (mcp_client_lookup) and consentd's MCP endpoints.
 * Refused before the redirect URI is known good: an error page; after: a 303
 * to the client with error, state and iss; valid: kept, and a 303 to
 * /authorize/{id}. */
enum cs_err authorize_pages_start(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* GET /authorize/{id} (signed in): the request becomes the person's and asks
 * for their consent: a 303 to the consent page, or straight to the client
 * with a code when a live consent covers it. */
enum cs_err authorize_pages_ask(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* GET /authorize/{id}/done (signed in, the same person): after the decision,
 * a 303 to the client with the code, or with access_denied. */
enum cs_err authorize_pages_done(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

/* After a step of consent request request_id's (its decision; an API key
 * stored for the consent it made): when the request came from an /authorize
 * sign-in still waiting, the way back to its done step -- a 303 on a GET, a
 * page that moves on by itself after a form's POST -- and *sent.  Otherwise
 * nothing (*sent false): the caller answers as for a gateway's request. */
enum cs_err authorize_pages_continue(const struct http_request *req, struct http_reply *rep,
    const char *request_id, bool *sent) CS_MUST_CHECK;

#endif
