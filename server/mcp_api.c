/* mcp_api.c -- the MCP endpoints (public_url/mcp/NAME) until the gateway
 * (issue #31) serves them: a 401 that tells an MCP client where to sign in
 * (RFC 9728 §5.1, MCP 2026-07-28 /basic/authorization).  It must never
 * answer a request as if its token were valid: no token is accepted here. */
#include <string.h>
#include <jansson.h>
#include "app.h"
#include "buf.h"
#include "config.h"
#include "mcp_api.h"

/* The resource's scopes, space-separated, into out (RFC 6750 §3's scope). */
static enum cs_err scopes_of(const struct config *cfg, const char *resource, struct buf *out)
{
	enum cs_err e = CS_OK;
	for (size_t i = 0; i < cfg->nscopes && e == CS_OK; i++) {
		if (strcmp(cfg->scopes[i].resource, resource) != 0)
			continue;
		if (out->len > 0)
			e = buf_puts(out, " ");
		if (e == CS_OK)
			e = buf_puts(out, cfg->scopes[i].name);
	}
	return e;
}

/* The challenge (RFC 6750 §3 with RFC 9728 §5.1's resource_metadata).  Every
 * value is consentd's own and config.c admits no '"' or '\\' in any (public_url
 * is scheme://host[:port]; section and scope names are letters, digits, '_',
 * '-' and ':'), so none needs escaping. */
static enum cs_err challenge(const struct config *cfg, const struct config_mcp_endpoint *ep,
    bool presented, struct buf *out)
{
	struct buf scope;
	enum cs_err e;
	buf_init(&scope, 4096);
	e = scopes_of(cfg, ep->resource, &scope);
	if (e == CS_OK && presented)
		e = buf_puts(out, "Bearer error=\"invalid_token\", error_description=\"No access "
		    "token is accepted at this endpoint yet\", ");
	else if (e == CS_OK)
		e = buf_puts(out, "Bearer ");
	if (e == CS_OK)
		e = buf_printf(out, "resource_metadata=\"%s/.well-known/oauth-protected-resource/mcp/%s\"",
		    cfg->public_url, ep->id);
	if (e == CS_OK && scope.len > 0)
		e = buf_printf(out, ", scope=\"%s\"", scope.data);
	buf_clear(&scope);
	return e;
}

enum cs_err mcp_api_endpoint(const struct http_request *req, struct http_reply *rep)
{
	const struct config *cfg = req->app->cfg;
	const struct config_mcp_endpoint *ep = req->ncaptures == 1 ?
	    config_mcp_endpoint(cfg, req->captures[0]) : NULL;
	/* SECURITY: any credential at all is refused as a token: none is valid
	 * here before the gateway checks them (issue #31). */
	bool presented = req->authorization != NULL;
	const char *why = presented ? "This MCP endpoint does not accept access tokens yet." :
	    "An access token is required: sign in through the authorization server named by "
	    "the protected resource metadata.";
	struct buf www;
	enum cs_err e;
	if (ep == NULL)
		return reply_error(rep, req->route->kind, 404, "not_found",
		    "There is no such MCP endpoint here.");
	buf_init(&www, 8192);
	e = challenge(cfg, ep, presented, &www);
	if (e == CS_OK)
		e = reply_json_value(rep, 401, json_pack("{s:s, s:n, s:{s:i, s:s}}", "jsonrpc", "2.0",
		    "id", "error", "code", -32001, "message", why));
	if (e == CS_OK)
		e = reply_header(rep, "WWW-Authenticate", www.data);
	reply_log_error(rep, presented ? "invalid_token" : "unauthorized", why);
	buf_clear(&www);
	return e;
}
