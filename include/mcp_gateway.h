/* mcp_gateway.h -- the MCP gateway's seams (issue #31), for the handler
 * (mcp_api.c) and for the 2025-11-25 session pieces that plug into it:
 * which form a client is asked in, and the answers of each form as JSON.
 * Pure: no HTTP type, no store. */
#ifndef CS_MCP_GATEWAY_H
#define CS_MCP_GATEWAY_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include "cs_err.h"
#include "mcp_call.h"
#include "mcp_rpc.h"

/* The three ways of asking the person (issue #31 item 3). */
enum mcp_ask_form {
	MCP_FORM_INPUT_REQUIRED = 0,   /* 2026-07-28 with elicitation.url: InputRequiredResult */
	MCP_FORM_URL_ERROR,            /* 2025-11-25 with elicitation.url: JSON-RPC -32042 */
	MCP_FORM_TEXT,                 /* no URL elicitation declared: isError text with the link */
	MCP_FORM__MAX
};

/* The form for message m.  2026: its _meta clientCapabilities.  2025: the
 * session's capabilities from initialize -- session_url says whether they
 * declared elicitation.url (false without a session: an upstream that keeps
 * none gives the client no stream to be told on, so the text form).
 * MCP_FORM_URL_ERROR is answered only when url_error_ready (the session's GET
 * stream carries notifications/elicitation/complete, mcp_stream.h). */
enum mcp_ask_form mcp_gateway_form(const struct mcp_msg *m, bool session_url, bool url_error_ready);

/* The 2026 InputRequiredResult for ask: {resultType:"input_required",
 * inputRequests:{<kind>:{method:"elicitation/create",params:{mode:"url",
 * url,message}}},requestState:state}.  New reference, NULL on ENOMEM. */
json_t *mcp_gateway_input_required(const struct mcp_ask *ask, const char *state);
/* The 2025 error object of -32042: {code,message,data:{elicitations:[{mode:
 * "url",elicitationId,url,message}]}}; elicitation_id is the session's
 * elicitation (mcp_session.h), whose completion its GET stream announces. */
json_t *mcp_gateway_url_error(const struct mcp_ask *ask, const char *elicitation_id);
/* A tool result {content:[{type:"text",text}],isError:true} (+ resultType
 * "complete" for 2026). */
json_t *mcp_gateway_text_result(const char *text, enum mcp_era era);
/* The fallback text: the message, the link, and to retry. */
enum cs_err mcp_gateway_ask_text(const struct mcp_ask *ask, char *out, size_t outlen) CS_MUST_CHECK;

#endif
