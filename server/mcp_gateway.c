/* mcp_gateway.c -- the answers of the three ways of asking the person
 * (mcp_gateway.h), as JSON.  It never puts anything but consentd's own link
 * and words in them: no token, no argument value. */
#include <string.h>

#include "buf.h"

#include "mcp_gateway.h"

static const char *kind_key(enum mcp_ask_kind k)
{
	return k == MCP_ASK_APPROVAL ? "approval" : "consent";
}

enum mcp_ask_form mcp_gateway_form(const struct mcp_msg *m, bool session_url, bool url_error_ready)
{
	if (m->era == MCP_ERA_2026)
		return m->url_elicitation ? MCP_FORM_INPUT_REQUIRED : MCP_FORM_TEXT;
	return session_url && url_error_ready ? MCP_FORM_URL_ERROR : MCP_FORM_TEXT;
}

json_t *mcp_gateway_input_required(const struct mcp_ask *ask, const char *state)
{
	return json_pack("{s:s, s:{s:{s:s, s:{s:s, s:s, s:s}}}, s:s}", "resultType", "input_required",
	    "inputRequests", kind_key(ask->kind), "method", "elicitation/create", "params",
	    "mode", "url", "url", ask->url, "message", ask->message, "requestState", state);
}

json_t *mcp_gateway_url_error(const struct mcp_ask *ask)
{
	return json_pack("{s:i, s:s, s:{s:[{s:s, s:s, s:s, s:s}]}}", "code", MCP_ERR_URL_ELICITATION,
	    "message", ask->message, "data", "elicitations", "mode", "url", "elicitationId",
	    ask->pending, "url", ask->url, "message", ask->message);
}

json_t *mcp_gateway_text_result(const char *text, enum mcp_era era)
{
	json_t *v = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text,
	    "isError", 1);
	if (v != NULL && era == MCP_ERA_2026 &&
	    json_object_set_new(v, "resultType", json_string("complete")) != 0) {
		json_decref(v);
		v = NULL;
	}
	return v;
}

enum cs_err mcp_gateway_ask_text(const struct mcp_ask *ask, char *out, size_t outlen)
{
	return str_fmt(out, outlen, "%s Open %s in your browser; once you have decided, call the "
	    "tool again.", ask->message, ask->url);
}
