/* config_lookup.c -- the look-ups on a loaded, immutable struct config
 * (config.h): an agent, a client, a resource, a scope, an action, an MCP
 * endpoint, an enterprise IdP, each by its name, matched byte for byte.  The
 * load's checks use them as every other module does, so this file calls
 * nothing of the config family: it reads a struct config and never changes one. */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include "config.h"

static bool same(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

const struct config_agent *config_agent(const struct config *c, const char *id)
{
	for (size_t i = 0; c != NULL && i < c->nagents; i++)
		if (same(c->agents[i].id, id))
			return &c->agents[i];
	return NULL;
}

const struct config_client *config_client(const struct config *c, const char *client_id)
{
	for (size_t i = 0; c != NULL && i < c->nclients; i++)
		if (same(c->clients[i].client_id, client_id))
			return &c->clients[i];
	return NULL;
}

const struct config_mcp_endpoint *config_mcp_endpoint(const struct config *c, const char *id)
{
	for (size_t i = 0; c != NULL && i < c->nmcp_endpoints; i++)
		if (same(c->mcp_endpoints[i].id, id))
			return &c->mcp_endpoints[i];
	return NULL;
}

const struct config_mcp_endpoint *config_mcp_endpoint_by_uri(const struct config *c,
    const char *uri)
{
	for (size_t i = 0; c != NULL && i < c->nmcp_endpoints; i++)
		if (same(c->mcp_endpoints[i].uri, uri))
			return &c->mcp_endpoints[i];
	return NULL;
}

bool config_resource_has_mcp_endpoint(const struct config *c, const char *resource)
{
	for (size_t i = 0; c != NULL && i < c->nmcp_endpoints; i++)
		if (same(c->mcp_endpoints[i].resource, resource))
			return true;
	return false;
}

/* [enterprise.NAME] (issue #30 item 6) */
const struct config_enterprise *config_enterprise_by_issuer(const struct config *c,
    const char *issuer)
{
	for (size_t i = 0; c != NULL && i < c->nenterprises; i++)
		if (same(c->enterprises[i].issuer, issuer))
			return &c->enterprises[i];
	return NULL;
}

const struct config_enterprise_allow *config_enterprise_allows(const struct config_enterprise *e,
    const char *client_id, const char *mcp)
{
	for (size_t i = 0; e != NULL && i < e->nallow; i++)
		if (same(e->allow[i].client_id, client_id) && same(e->allow[i].mcp, mcp))
			return &e->allow[i];
	return NULL;
}

const struct config_resource *config_resource(const struct config *c, const char *id)
{
	for (size_t i = 0; c != NULL && i < c->nresources; i++)
		if (same(c->resources[i].id, id))
			return &c->resources[i];
	return NULL;
}

const struct config_resource *config_resource_by_uri(const struct config *c, const char *uri)
{
	for (size_t i = 0; c != NULL && i < c->nresources; i++)
		if (same(c->resources[i].uri, uri))
			return &c->resources[i];
	return NULL;
}

const struct config_scope *config_scope(const struct config *c, const char *resource,
    const char *name)
{
	for (size_t i = 0; c != NULL && i < c->nscopes; i++)
		if (same(c->scopes[i].resource, resource) && same(c->scopes[i].name, name))
			return &c->scopes[i];
	return NULL;
}

const struct config_action *config_action(const struct config *c, const char *resource,
    const char *name)
{
	for (size_t i = 0; c != NULL && i < c->nactions; i++)
		if (same(c->actions[i].resource, resource) && same(c->actions[i].name, name))
			return &c->actions[i];
	return NULL;
}
