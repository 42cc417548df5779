/* mcp_api.h -- the MCP gateway's endpoints public_url/mcp/NAME ([mcp.NAME],
 * issue #31): consentd's MCP access tokens checked (RFC 9728 §5.1's 401 when
 * there is none), each JSON-RPC message read, the person's current consent
 * and approvals asked for in the client's own protocol, and the call
 * forwarded to the upstream MCP server with the person's provider
 * credentials (never the client's token), its answer streamed back. */
#ifndef CS_MCP_API_H
#define CS_MCP_API_H
#include "cs_err.h"
#include "http.h"

/* POST, GET and DELETE /mcp/{name}: 404 for a name that is no [mcp.NAME].
 * No token: 401 with `WWW-Authenticate: Bearer resource_metadata="<public_url>
 * /.well-known/oauth-protected-resource/mcp/NAME", scope="..."` and a
 * JSON-RPC error body (-32001).  A token that is not consentd's for this
 * endpoint (grant_validate_mcp_token), revoked on its own, or bound to a
 * DPoP key without its proof: 401 error="invalid_token" naming the check.
 * Then (docs/mcp.md "The gateway"): no upstream configured: 503; a body
 * mcp_rpc_parse refuses: its status and JSON-RPC error; tools/call through
 * mcp_call_prepare -- an unmapped tool is -32602 naming it, a scope the token
 * lacks 403 insufficient_scope, a consent or approval to give is asked in
 * the client's form (mcp_gateway.h), a denial is an isError result saying
 * until when; a retry's requestState must open for this very call (-32003
 * otherwise).  Everything else needs a live consent (401 when there is none)
 * and is forwarded; GET and DELETE only for 2025-11-25 (405 for
 * 2026-07-28).  Upstream failures: 502/504 with a JSON-RPC error -32002
 * whose data.upstream says what failed (unreachable, timeout, bad_status,
 * too_big). */
enum cs_err mcp_api_endpoint(const struct http_request *req, struct http_reply *rep) CS_MUST_CHECK;

#endif
