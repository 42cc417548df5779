/* mcp_rpc.h -- one MCP JSON-RPC message as the gateway reads it (issue #31):
 * request, notification or response; its method, id and params; a
 * tools/call's name, arguments, requestState and inputResponses; the
 * protocol era (2026-07-28 or 2025-11-25) and the URL elicitation the client
 * declared; the 2026-07-28 request headers checked against the body.  Pure:
 * no HTTP type, no store, no I/O.  It must never accept a batch, duplicate
 * member names or a value that is not I-JSON. */
#ifndef CS_MCP_RPC_H
#define CS_MCP_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include "cs_err.h"

#define MCP_RPC_MAX_BODY (1u << 20)        /* a request body, and an upstream answer */
#define MCP_RPC_MAX_METHOD 128
#define MCP_RPC_MAX_ID 256                 /* a string id's bytes */
#define MCP_RPC_MAX_TOOL 128               /* a tool name (MCP: 1 to 128 characters) */
#define MCP_RPC_MAX_STATE 8192             /* a requestState's bytes */
#define MCP_VERSION_2026 "2026-07-28"
#define MCP_VERSION_2025 "2025-11-25"
#define MCP_META_VERSION "io.modelcontextprotocol/protocolVersion"
#define MCP_META_CAPS "io.modelcontextprotocol/clientCapabilities"

/* JSON-RPC and MCP error codes the gateway answers with. */
#define MCP_ERR_PARSE (-32700)
#define MCP_ERR_INVALID_REQUEST (-32600)
#define MCP_ERR_METHOD (-32601)
#define MCP_ERR_PARAMS (-32602)
#define MCP_ERR_INTERNAL (-32603)
#define MCP_ERR_UNAUTHORIZED (-32001)      /* consentd's: no usable access token */
#define MCP_ERR_UPSTREAM (-32002)          /* consentd's: the upstream failed (data.upstream says how) */
#define MCP_ERR_STATE (-32003)             /* consentd's: a requestState refused (data.reason) */
#define MCP_ERR_TOOL (-32004)              /* consentd's: a tool the endpoint does not serve */
#define MCP_ERR_HEADER_MISMATCH (-32020)   /* 2026-07-28 */
#define MCP_ERR_UNSUPPORTED_VERSION (-32022)   /* 2026-07-28 */
#define MCP_ERR_URL_ELICITATION (-32042)   /* 2025-11-25 only */

enum mcp_era { MCP_ERA_2025 = 0, MCP_ERA_2026, MCP_ERA__MAX };
enum mcp_kind { MCP_REQUEST = 0, MCP_NOTIFICATION, MCP_RESPONSE, MCP_KIND__MAX };

/* One parsed message: every pointer points into root. */
struct mcp_msg {                           /* release with mcp_msg_clear() */
	json_t       *root;                    /* the whole message (owned) */
	enum mcp_kind kind;
	const char   *method;                  /* REQUEST and NOTIFICATION */
	json_t       *id;                      /* REQUEST and RESPONSE: a string or an integer */
	json_t       *params;                  /* an object, or NULL */
	enum mcp_era  era;
	/* The client's URL elicitation: declared in the request's _meta
	 * clientCapabilities (2026), or in initialize's capabilities (2025: the
	 * session remembers it; has_caps says the message declared any). */
	bool          has_caps;
	bool          url_elicitation;
	/* tools/call: */
	const char   *tool;                    /* params.name */
	json_t       *arguments;               /* params.arguments: an object, or NULL */
	const char   *request_state;           /* params.requestState, or NULL */
	json_t       *input_responses;         /* params.inputResponses: an object, or NULL */
};
void mcp_msg_clear(struct mcp_msg *m);     /* NULL-safe */

/* The request headers that 2026-07-28 repeats from the body (NULL: absent). */
struct mcp_rpc_headers {
	const char *protocol_version;          /* MCP-Protocol-Version */
	const char *method;                    /* Mcp-Method */
	const char *name;                      /* Mcp-Name */
};

/* Why a message was refused: the HTTP status and the JSON-RPC error to answer. */
struct mcp_rpc_refusal {
	int   status;                          /* 400, 413 */
	int   code;                            /* MCP_ERR_* */
	char  message[200];                    /* consentd's words; never input text */
	json_t *id;                            /* the message's id when it could be read, else NULL (a new reference) */
};
void mcp_rpc_refusal_clear(struct mcp_rpc_refusal *r);   /* NULL-safe */

/* Parses body (len bytes) as exactly one JSON-RPC 2.0 message.  In this
 * order: the size (413), JSON with no duplicate member name (-32700), not an
 * array (a batch: -32600, "batches are not accepted"), an object with
 * jsonrpc "2.0", I-JSON throughout (jcs_ijson_check), an id that is a string
 * of at most MCP_RPC_MAX_ID bytes or an integer, a method of 1 to
 * MCP_RPC_MAX_METHOD bytes, params an object when present (-32600 each);
 * the era and the declared capabilities; for tools/call a name of 1 to
 * MCP_RPC_MAX_TOOL visible ASCII characters, arguments an object when
 * present, a requestState string of at most MCP_RPC_MAX_STATE bytes and
 * inputResponses an object when present (-32602 each); then, for 2026-07-28,
 * the headers (mcp_rpc_check_headers).  An unsupported _meta protocol
 * version is -32022.  CS_OK with *out, or CS_EINVAL with *why filled;
 * CS_ENOMEM only for memory. */
enum cs_err mcp_rpc_parse(const char *body, size_t len, const struct mcp_rpc_headers *h,
    struct mcp_msg *out, struct mcp_rpc_refusal *why) CS_MUST_CHECK;

/* The 2026-07-28 header rules (streamable-http §Request Metadata) for a
 * parsed message m: MCP-Protocol-Version present and equal to the _meta
 * version, Mcp-Method equal to the method, and for tools/call, prompts/get
 * (params.name) and resources/read (params.uri) Mcp-Name equal to it.
 * false with *why (400, -32020) naming the header. */
bool mcp_rpc_check_headers(const struct mcp_msg *m, const struct mcp_rpc_headers *h,
    struct mcp_rpc_refusal *why);

/* Whether capabilities (an object: a client's capabilities) declare URL
 * elicitation: elicitation.url is an object. */
bool mcp_rpc_caps_url(const json_t *capabilities);

#endif
