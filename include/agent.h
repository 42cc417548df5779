/* agent.h -- who acts: the one answer to "which agent is this id, what is it
 * called, and what may it ask for".  Reads the configuration only: no HTTP, no
 * store, no allocation.  Nothing but agent.c looks an [agent.X] up (lint.sh). */
#ifndef CS_AGENT_H
#define CS_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include "config.h"

/* Where a view came from. */
enum agent_kind {
	AGENT_CONFIGURED = 0,            /* an [agent.X] section: a gateway's agent */
	AGENT_MCP_CLIENT,                /* a [client.NAME] section: an MCP client the operator
	                                    registered */
	AGENT_MCP_CLIENT_URL,            /* a client-id URL (cimd.h) the [mcp] policy lets in */
	AGENT_KIND__MAX
};

/* Which rule agent_may_ask applies. */
enum agent_rule {
	AGENT_RULE_ALLOW_LIST = 0,       /* exactly the allow list's RESOURCE:SCOPE entries */
	AGENT_RULE_MCP,                  /* any configured scope of a resource an [mcp.NAME]
	                                    endpoint stands for (the person chooses) */
	AGENT_RULE__MAX
};

/* An agent as every check sees it.  Every pointer points into the
 * configuration the view was resolved from, or into the id it was resolved
 * with (a client-id URL): the view lives as long as both, and there is
 * nothing to free (it may be copied). */
struct agent_view {
	enum agent_kind kind;
	const char *id;                  /* what consent rows and grants name as agent */
	const char *name;                /* display name (the id when none was given) */
	const char *description;         /* "" when none */
	bool self_named;                 /* name was chosen by the client itself, not by the
	                                    operator: the consent page must say so.  Never set
	                                    here (a client-id URL's view is named by its URL;
	                                    the page adds the document's client_name, marked) */
	enum agent_rule rule;
	const char *const *allow;        /* ALLOW_LIST: "RESOURCE:SCOPE" entries; else NULL */
	size_t nallow;
	bool offline;                    /* may consents for it renew grants offline */
	const struct config *cfg;        /* RULE_MCP: the configuration naming the endpoints */
};

/* The agent whose id is id, byte for byte, into *out (written only when
 * true): an [agent.X]; else the [client.NAME] whose client_id it is (name =
 * the operator's name, offline, RULE_MCP); else a client-id URL that passes
 * cimd_url_check and the [mcp] cimd_allow policy (name = the id itself,
 * offline, RULE_MCP: its document, fetched at /authorize, is not needed to
 * know what it may ask).  false for NULL or anything else.  SECURITY: the
 * three cannot collide: config refuses a client_id equal to an [agent.X] id
 * or written as an https URL, and an [agent.X] id has no ':'.  A gateway's
 * exchange names gateway agents only: exchange.c refuses a view whose kind is
 * not AGENT_CONFIGURED. */
bool agent_resolve(const struct config *cfg, const char *id, struct agent_view *out);

/* Whether agent a may ask for scope of resource (a resource id, as in
 * [resource.NAME]) by its own rule.  ALLOW_LIST: an entry splits at its
 * first ':' (as config.c checks it) into exactly resource and exactly scope;
 * a prefix of either, or a colon moved between them, does not match.  MCP:
 * some [mcp.NAME] stands for resource.  false for a NULL agent, a NULL or
 * empty resource or scope, or a resource with a ':' (no resource id has one).
 * This is only the agent's side of invariants 7 and 8: callers also check
 * that the scope is configured (config_scope). */
bool agent_may_ask(const struct agent_view *a, const char *resource, const char *scope);

#endif
