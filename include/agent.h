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
	AGENT_CONFIGURED = 0,            /* an [agent.X] section */
	AGENT_MCP_CLIENT,                /* a [client.NAME] section (provisional, below) */
	AGENT_KIND__MAX
};

/* Which rule agent_may_ask applies. */
enum agent_rule {
	AGENT_RULE_ALLOW_LIST = 0,       /* exactly the allow list's RESOURCE:SCOPE entries */
	AGENT_RULE_ANY_SCOPE,            /* any scope of any resource (provisional, below) */
	AGENT_RULE__MAX
};

/* An agent as every check sees it.  Every pointer points into the
 * configuration the view was resolved from: the view lives as long as that
 * configuration, and there is nothing to free (it may be copied). */
struct agent_view {
	enum agent_kind kind;
	const char *id;                  /* what consent rows and grants name as agent */
	const char *name;                /* display name (the id when none was given) */
	const char *description;         /* "" when none */
	bool self_named;                 /* name was chosen by the client itself, not by the
	                                    operator: the consent page must say so.  false for
	                                    every kind today (a client-id URL's document would
	                                    be the first, issue #30) */
	enum agent_rule rule;
	const char *const *allow;        /* ALLOW_LIST: "RESOURCE:SCOPE" entries; else NULL */
	size_t nallow;
	bool offline;                    /* may consents for it renew grants offline */
};

/* The [agent.X] whose id is id, byte for byte, into *out (written only when
 * true).  false for NULL or an id no [agent.X] names.  This is what every
 * existing path (exchange, consent, grants, pages) resolves with; it never
 * answers for a [client.NAME] client, so no flow that names an agent today
 * can reach one. */
bool agent_resolve(const struct config *cfg, const char *id, struct agent_view *out);

/* PROVISIONAL (issue #30, until issue #31 maps MCP endpoints to resources):
 * the [client.NAME] whose client_id is client_id, into *out (written only
 * when true): name = the client's name (chosen by the operator, so
 * self_named = false), no description, offline = true, and rule
 * AGENT_RULE_ANY_SCOPE -- it may ask for any scope of any resource, which the
 * person still chooses on the consent page.  Once the mapping exists, the
 * rule narrows to the resource behind the MCP endpoint the client names.
 * Kept apart from agent_resolve on purpose: only the MCP authorization leg
 * may call it, so a gateway's exchange naming a client_id stays "unknown
 * agent". */
bool agent_resolve_mcp_client(const struct config *cfg, const char *client_id,
    struct agent_view *out);

/* Whether agent a may ask for scope of resource (a resource id, as in
 * [resource.NAME]) by its own rule.  ALLOW_LIST: an entry splits at its
 * first ':' (as config.c checks it) into exactly resource and exactly scope;
 * a prefix of either, or a colon moved between them, does not match.  false
 * for a NULL agent, a NULL or empty resource or scope, or a resource with a
 * ':' (no resource id has one).  This is only the agent's side of invariants
 * 7 and 8: callers also check that the scope is configured (config_scope). */
bool agent_may_ask(const struct agent_view *a, const char *resource, const char *scope);

#endif
