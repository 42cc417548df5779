/* agent.c -- who acts: resolves an agent id to the view every check uses, and
 * holds the one "may this agent ask for RESOURCE:SCOPE" rule.  Must never
 * know HTTP or the store, and is the only caller of config_agent(). */
#include <string.h>
#include "agent.h"
#include "cimd.h"

/* The [mcp] policy for client-id URLs, as cimd.h takes it. */
static struct cimd_policy cimd_policy_of(const struct config *cfg)
{
	return (struct cimd_policy){
		.allow = cfg->mcp_cimd_allow,
		.hosts = (const char *const *)cfg->mcp_cimd_hosts,
		.prefixes = (const char *const *)cfg->mcp_cimd_prefixes,
	};
}

bool agent_resolve(const struct config *cfg, const char *id, struct agent_view *out)
{
	if (cfg == NULL || id == NULL)
		return false;
	const struct config_agent *a = config_agent(cfg, id);
	if (a != NULL) {
		*out = (struct agent_view){
			.kind = AGENT_CONFIGURED,
			.id = a->id,
			.name = a->name != NULL ? a->name : a->id,
			.description = a->description != NULL ? a->description : "",
			.self_named = false,
			.rule = AGENT_RULE_ALLOW_LIST,
			.allow = (const char *const *)a->allow,
			.nallow = a->allow != NULL ? a->nallow : 0,
			.offline = a->offline,
			.cfg = cfg,
		};
		return true;
	}
	const struct config_client *k = config_client(cfg, id);
	if (k != NULL) {
		*out = (struct agent_view){
			.kind = AGENT_MCP_CLIENT,
			.id = k->client_id,
			.name = k->name != NULL ? k->name : k->client_id,
			.description = "",
			.self_named = false,          /* the operator named it in [client.NAME] */
			.rule = AGENT_RULE_MCP,
			.offline = true,
			.cfg = cfg,
		};
		return true;
	}
	const char *why;
	struct cimd_policy pol = cimd_policy_of(cfg);
	if (cimd_url_check(id, &why) != CS_OK || !cimd_policy_allows(&pol, id, &why))
		return false;
	*out = (struct agent_view){
		.kind = AGENT_MCP_CLIENT_URL,
		.id = id,
		.name = id,
		.description = "",
		.self_named = false,
		.rule = AGENT_RULE_MCP,
		.offline = true,
		.cfg = cfg,
	};
	return true;
}

/* Whether the entry e ("RESOURCE:SCOPE", split at its first ':') is exactly
 * resource and scope. */
static bool entry_is(const char *e, const char *resource, size_t rl, const char *scope)
{
	const char *colon = strchr(e, ':');
	return colon != NULL && (size_t)(colon - e) == rl && memcmp(e, resource, rl) == 0 &&
	    strcmp(colon + 1, scope) == 0;
}

bool agent_may_ask(const struct agent_view *a, const char *resource, const char *scope)
{
	/* SECURITY: the agent's side of requested ⊆ configured ∩ agent-allowed
	 * (invariants 7 and 8): exact matches only, and nothing for what is not
	 * there to match. */
	if (a == NULL || resource == NULL || scope == NULL || resource[0] == '\0' ||
	    scope[0] == '\0' || strchr(resource, ':') != NULL)
		return false;
	switch (a->rule) {
	case AGENT_RULE_MCP:
		/* Only MCP clients get this rule; a view that claims it otherwise
		 * was not made here and gets nothing. */
		return (a->kind == AGENT_MCP_CLIENT || a->kind == AGENT_MCP_CLIENT_URL) &&
		    config_resource_has_mcp_endpoint(a->cfg, resource);
	case AGENT_RULE_ALLOW_LIST: {
		size_t rl = strlen(resource);
		for (size_t i = 0; a->allow != NULL && i < a->nallow; i++)
			if (a->allow[i] != NULL && entry_is(a->allow[i], resource, rl, scope))
				return true;
		return false;
	}
	case AGENT_RULE__MAX:
		break;
	}
	return false;
}
