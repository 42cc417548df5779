/* mcp_client.c -- who an MCP client is: a [client.NAME], or a client-id URL
 * and its metadata document (mcp_client.h).  Knows no HTTP server. */
#include <string.h>
#include "app.h"
#include "mcp_client.h"

void mcp_client_clear(struct mcp_client *k)
{
	if (k == NULL)
		return;
	cimd_doc_clear(&k->doc);
	memset(k, 0, sizeof *k);
}

struct cimd_fetch_opts mcp_client_fetch_opts(const struct config *cfg)
{
	return (struct cimd_fetch_opts){
		.allow_loopback = cfg->mcp_cimd_allow_loopback,
		.ca_file = cfg->mcp_cimd_ca_file,
		.timeout_ms = (long)cfg->mcp_cimd_timeout_ms,
		.connect_timeout_ms = (long)cfg->mcp_cimd_connect_timeout_ms,
		.max_bytes = (size_t)cfg->mcp_cimd_max_bytes,
	};
}

struct cimd_policy mcp_client_policy(const struct config *cfg)
{
	return (struct cimd_policy){
		.allow = cfg->mcp_cimd_allow,
		.hosts = (const char *const *)cfg->mcp_cimd_hosts,
		.prefixes = (const char *const *)cfg->mcp_cimd_prefixes,
	};
}

enum cs_err mcp_client_lookup(struct app *app, const char *client_id, int64_t now,
    struct mcp_client *out, char *why, size_t whylen)
{
	const struct config *cfg = app->cfg;
	if (why != NULL && whylen > 0)
		why[0] = '\0';
	if (client_id == NULL || client_id[0] == '\0') {
		cimd_reason(why, whylen, "client_id is missing");
		return CS_ENOENT;
	}
	const struct config_client *r = config_client(cfg, client_id);
	if (r != NULL) {
		*out = (struct mcp_client){
			.by_url = false,
			.client_id = r->client_id,
			.name = r->name,
			.redirect_uris = (const char *const *)r->redirect_uris,
			.nredirect_uris = r->nredirect_uris,
			.private_key_jwt = r->auth == CLIENT_AUTH_PRIVATE_KEY_JWT,
			.jwks = r->jwks_json,
			.jwks_uri = r->jwks_uri,
			.refresh = true,
		};
		return CS_OK;
	}
	if (strncmp(client_id, "https://", 8) != 0) {
		cimd_reason(why, whylen, "client_id is not a registered client, nor an https "
		    "client-id URL");
		return CS_ENOENT;
	}
	if (app->cimd == NULL) {
		cimd_reason(why, whylen, "client-id URLs are not accepted here");
		return CS_EPERM;
	}
	struct cimd_policy pol = mcp_client_policy(cfg);
	struct cimd_fetch_opts fo = mcp_client_fetch_opts(cfg);
	struct mcp_client k = { .by_url = true };
	enum cs_err e = cimd_client(app->cimd, &pol, &fo, client_id, now, &k.doc, why, whylen);
	if (e != CS_OK)
		return e;
	uint16_t port;
	if (cimd_url_host(client_id, k.host, sizeof k.host, &port) != CS_OK) {
		cimd_doc_clear(&k.doc);
		cimd_reason(why, whylen, "client_id is not a valid client-id URL");
		return CS_EINVAL;
	}
	k.client_id = k.doc.client_id;
	k.name = k.doc.client_name;
	k.self_named = k.doc.client_name != NULL;
	k.redirect_uris = (const char *const *)k.doc.redirect_uris;
	k.nredirect_uris = k.doc.nredirect_uris;
	k.private_key_jwt = k.doc.auth == CIMD_AUTH_PRIVATE_KEY_JWT;
	k.jwks = k.doc.jwks;
	k.jwks_uri = k.doc.jwks_uri;
	k.refresh = k.doc.refresh;
	*out = k;
	return CS_OK;
}
