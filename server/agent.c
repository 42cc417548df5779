/* agent.c -- who acts: resolves an agent id to the view every check uses, and
 * holds the one "may this agent ask for RESOURCE:SCOPE" rule.  Must never
 * know HTTP or the store, and is the only caller of config_agent(). */
#include <string.h>
#include "agent.h"

bool agent_resolve(const struct config *cfg, const char *id, struct agent_view *out)
{
	const struct config_agent *a = id != NULL ? config_agent(cfg, id) : NULL;
	if (a == NULL)
		return false;
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
	};
	return true;
}

bool agent_resolve_mcp_client(const struct config *cfg, const char *client_id,
    struct agent_view *out)
{
	const struct config_client *k = client_id != NULL ? config_client(cfg, client_id) : NULL;
	if (k == NULL)
		return false;
	/* PROVISIONAL (agent.h): any scope of any resource until issue #31 says
	 * which resource an MCP endpoint stands for. */
	*out = (struct agent_view){
		.kind = AGENT_MCP_CLIENT,
		.id = k->client_id,
		.name = k->name != NULL ? k->name : k->client_id,
		.description = "",
		.self_named = false,          /* the operator named it in [client.NAME] */
		.rule = AGENT_RULE_ANY_SCOPE,
		.allow = NULL,
		.nallow = 0,
		.offline = true,
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
	case AGENT_RULE_ANY_SCOPE:
		/* Only agent_resolve_mcp_client gives this rule; a view that
		 * claims it otherwise was not made here and gets nothing. */
		return a->kind == AGENT_MCP_CLIENT;
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
