/* mcp_api.h -- the MCP endpoints public_url/mcp/NAME ([mcp.NAME]) as a
 * resource server answers them before it has a token it accepts (issue #30):
 * the 401 whose challenge names the endpoint's protected resource metadata
 * (RFC 9728 §5.1), where MCP clients begin their sign-in.  Accepting a token
 * and serving MCP is the gateway's (issue #31). */
#ifndef CS_MCP_API_H
#define CS_MCP_API_H
#include "cs_err.h"
#include "http.h"

/* POST, GET and DELETE /mcp/{name}: 404 for a name that is no [mcp.NAME];
 * otherwise 401 with `WWW-Authenticate: Bearer resource_metadata="<public_url>
 * /.well-known/oauth-protected-resource/mcp/NAME", scope="..."` and a JSON-RPC
 * error body.  A request that carries credentials (any Authorization header)
 * gets error="invalid_token" in the challenge: no token is valid here until
 * the gateway validates them (issue #31), and none is ever let through. */
enum cs_err mcp_api_endpoint(const struct http_request *req, struct http_reply *rep) CS_MUST_CHECK;

#endif
