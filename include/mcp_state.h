/* mcp_state.h -- the requestState of an MCP 2026-07-28 InputRequiredResult
 * (issue #31): what the gateway asked the person about, sealed with AES-GCM
 * under a key derived from the master key (seal.h, purpose
 * "mcp-request-state"), so the client can only echo it.  Pure: no store, no
 * HTTP.  It must never accept a state that does not open, is expired, or is
 * another person's, client's, endpoint's, tool's or arguments'. */
#ifndef CS_MCP_STATE_H
#define CS_MCP_STATE_H

#include <stdint.h>
#include "cs_err.h"
#include "seal.h"

#define MCP_STATE_PURPOSE "mcp-request-state"
#define MCP_STATE_MAX 8192                /* the sealed text's bytes (mcp_rpc.h's cap) */
#define MCP_STATE_TTL 900                 /* seconds a state is good for */

enum mcp_ask_kind { MCP_ASK_NONE = 0, MCP_ASK_CONSENT, MCP_ASK_APPROVAL, MCP_ASK__MAX };

/* What a state binds.  Strings are the caller's (seal) or point into
 * the opened state (open, until mcp_state_clear). */
struct mcp_state {                        /* opened: release with mcp_state_clear() */
	int64_t     user_id;                  /* the person (users row) */
	const char *client_id;                /* the MCP client */
	const char *endpoint;                 /* the [mcp.NAME] id */
	const char *tool;
	const char *digest;                   /* RFC 8785 digest of the arguments (approval.h) */
	enum mcp_ask_kind kind;
	const char *pending;                  /* the approval id or the consent request id */
	int64_t     expires_at;
	void       *own;                      /* opened: the parsed JSON the strings point into */
};
void mcp_state_clear(struct mcp_state *s);   /* NULL-safe */

/* The state s sealed and base64url-encoded into *out (malloc'd).  CS_EINVAL
 * for a missing field or a sealed text past MCP_STATE_MAX. */
enum cs_err mcp_state_seal(const struct master_key *mk, const struct mcp_state *s,
    char **out) CS_MUST_CHECK;

enum mcp_state_verdict {
	MCP_STATE_OK = 0,
	MCP_STATE_BROKEN,            /* it does not open: tampered, another key, not base64url */
	MCP_STATE_EXPIRED,
	MCP_STATE_OTHER_PERSON,
	MCP_STATE_OTHER_CLIENT,
	MCP_STATE_OTHER_ENDPOINT,
	MCP_STATE_OTHER_TOOL,
	MCP_STATE_OTHER_ARGUMENTS,
	MCP_STATE_VERDICT__MAX
};
/* Opens text and holds it to want (user_id, client_id, endpoint, tool and
 * digest; want's kind, pending and expires_at are ignored) at now, in the
 * verdicts' order.  *verdict always written; *out (the state's own kind,
 * pending id and expiry) only for MCP_STATE_OK.  An error only for memory. */
enum cs_err mcp_state_open(const struct master_key *mk, const char *text,
    const struct mcp_state *want, int64_t now, struct mcp_state *out,
    enum mcp_state_verdict *verdict) CS_MUST_CHECK;
/* The reason a verdict is answered with (fixed words). */
const char *mcp_state_verdict_text(enum mcp_state_verdict v);

#endif
