/* mcp_rpc.c -- one MCP JSON-RPC message read once (mcp_rpc.h), with every
 * bound checked before the gateway looks at it.  It must never accept a
 * batch, a duplicate member name or a value that is not I-JSON, and never
 * copies input text into a refusal's message. */
#include <string.h>

#include "buf.h"

#include "jcs.h"
#include "mcp_rpc.h"

void mcp_msg_clear(struct mcp_msg *m)
{
	if (m == NULL)
		return;
	json_decref(m->root);
	memset(m, 0, sizeof *m);
}

void mcp_rpc_refusal_clear(struct mcp_rpc_refusal *r)
{
	if (r == NULL)
		return;
	json_decref(r->id);
	r->id = NULL;
}

static bool refuse(struct mcp_rpc_refusal *why, int status, int code, const char *msg)
{
	why->status = status;
	why->code = code;
	if (str_fmt(why->message, sizeof why->message, "%s", msg) != CS_OK)
		why->message[0] = '\0';
	return false;
}

bool mcp_rpc_caps_url(const json_t *capabilities)
{
	return json_is_object(json_object_get(json_object_get(capabilities, "elicitation"), "url"));
}

/* A tool name: 1 to MCP_RPC_MAX_TOOL visible ASCII characters. */
static bool tool_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > MCP_RPC_MAX_TOOL)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
			return false;
	return true;
}

/* params.name (tools/call, prompts/get) or params.uri (resources/read):
 * what Mcp-Name repeats; NULL for other methods. */
static const char *named(const struct mcp_msg *m, bool *needs)
{
	*needs = true;
	if (strcmp(m->method, "tools/call") == 0 || strcmp(m->method, "prompts/get") == 0)
		return json_string_value(json_object_get(m->params, "name"));
	if (strcmp(m->method, "resources/read") == 0)
		return json_string_value(json_object_get(m->params, "uri"));
	*needs = false;
	return NULL;
}

bool mcp_rpc_check_headers(const struct mcp_msg *m, const struct mcp_rpc_headers *h,
    struct mcp_rpc_refusal *why)
{
	bool needs;
	const char *name;
	if (m->era != MCP_ERA_2026 || m->kind != MCP_REQUEST)
		return true;
	if (h == NULL || h->protocol_version == NULL ||
	    strcmp(h->protocol_version, MCP_VERSION_2026) != 0)
		return refuse(why, 400, MCP_ERR_HEADER_MISMATCH, "the MCP-Protocol-Version header "
		    "does not match the request's _meta protocol version");
	if (h->method == NULL || strcmp(h->method, m->method) != 0)
		return refuse(why, 400, MCP_ERR_HEADER_MISMATCH, "the Mcp-Method header does not "
		    "match the request's method");
	name = named(m, &needs);
	if (needs && (h->name == NULL || name == NULL || strcmp(h->name, name) != 0))
		return refuse(why, 400, MCP_ERR_HEADER_MISMATCH, "the Mcp-Name header does not "
		    "match the request's name");
	return true;
}

/* The era and declared capabilities of m (a request or notification). */
static bool era_of(struct mcp_msg *m, const struct mcp_rpc_headers *h,
    struct mcp_rpc_refusal *why)
{
	json_t *meta = json_object_get(m->params, "_meta");
	json_t *ver = json_object_get(meta, MCP_META_VERSION);
	json_t *caps;
	if (meta != NULL && !json_is_object(meta))
		return refuse(why, 400, MCP_ERR_PARAMS, "params._meta is not an object");
	if (ver != NULL) {
		if (!json_is_string(ver) || strcmp(json_string_value(ver), MCP_VERSION_2026) != 0)
			return refuse(why, 400, MCP_ERR_UNSUPPORTED_VERSION, "unsupported protocol "
			    "version in _meta (this gateway serves " MCP_VERSION_2026 " and "
			    MCP_VERSION_2025 ")");
		m->era = MCP_ERA_2026;
	} else if (h != NULL && h->protocol_version != NULL &&
	    strcmp(h->protocol_version, MCP_VERSION_2026) == 0) {
		m->era = MCP_ERA_2026;
	}
	if (m->era == MCP_ERA_2026) {
		caps = json_object_get(meta, MCP_META_CAPS);
		if (caps != NULL && !json_is_object(caps))
			return refuse(why, 400, MCP_ERR_PARAMS, "the _meta client capabilities are "
			    "not an object");
		m->has_caps = caps != NULL;
		m->url_elicitation = mcp_rpc_caps_url(caps);
	} else if (strcmp(m->method, "initialize") == 0) {
		caps = json_object_get(m->params, "capabilities");
		if (caps != NULL && !json_is_object(caps))
			return refuse(why, 400, MCP_ERR_PARAMS, "params.capabilities is not an object");
		m->has_caps = caps != NULL;
		m->url_elicitation = mcp_rpc_caps_url(caps);
	}
	return true;
}

/* tools/call's own members. */
static bool tool_call(struct mcp_msg *m, struct mcp_rpc_refusal *why)
{
	json_t *name = json_object_get(m->params, "name");
	json_t *args = json_object_get(m->params, "arguments");
	json_t *st = json_object_get(m->params, "requestState");
	json_t *ir = json_object_get(m->params, "inputResponses");
	if (!json_is_string(name) || !tool_name_ok(json_string_value(name)))
		return refuse(why, 400, MCP_ERR_PARAMS, "tools/call needs params.name: a tool name "
		    "of 1 to 128 visible ASCII characters");
	if (args != NULL && !json_is_object(args))
		return refuse(why, 400, MCP_ERR_PARAMS, "params.arguments is not an object");
	if (st != NULL && (!json_is_string(st) || json_string_length(st) == 0 ||
	    json_string_length(st) > MCP_RPC_MAX_STATE))
		return refuse(why, 400, MCP_ERR_PARAMS, "params.requestState is not a string of 1 "
		    "to 8192 bytes");
	if (ir != NULL && !json_is_object(ir))
		return refuse(why, 400, MCP_ERR_PARAMS, "params.inputResponses is not an object");
	m->tool = json_string_value(name);
	m->arguments = args;
	m->request_state = st != NULL ? json_string_value(st) : NULL;
	m->input_responses = ir;
	return true;
}

/* The envelope: jsonrpc, id, method, params, result or error. */
static bool envelope(struct mcp_msg *m, struct mcp_rpc_refusal *why)
{
	json_t *r = m->root, *v = json_object_get(r, "jsonrpc");
	json_t *id = json_object_get(r, "id"), *method = json_object_get(r, "method");
	json_t *params = json_object_get(r, "params");
	if (!json_is_string(v) || strcmp(json_string_value(v), "2.0") != 0)
		return refuse(why, 400, MCP_ERR_INVALID_REQUEST, "not a JSON-RPC 2.0 message "
		    "(jsonrpc must be \"2.0\")");
	if (id != NULL && !(json_is_integer(id) || (json_is_string(id) &&
	    json_string_length(id) <= MCP_RPC_MAX_ID)))
		return refuse(why, 400, MCP_ERR_INVALID_REQUEST, "the id must be a string of at most "
		    "256 bytes or an integer");
	if (id != NULL) {
		m->id = id;
		why->id = json_incref(id);
	}
	if (method == NULL) {
		bool result = json_object_get(r, "result") != NULL;
		bool error = json_object_get(r, "error") != NULL;
		if (id == NULL || result == error)
			return refuse(why, 400, MCP_ERR_INVALID_REQUEST, "a message needs a method, or "
			    "an id with exactly one of result and error");
		m->kind = MCP_RESPONSE;
		return true;
	}
	if (!json_is_string(method) || json_string_length(method) == 0 ||
	    json_string_length(method) > MCP_RPC_MAX_METHOD)
		return refuse(why, 400, MCP_ERR_INVALID_REQUEST, "the method must be a string of 1 "
		    "to 128 bytes");
	if (params != NULL && !json_is_object(params))
		return refuse(why, 400, MCP_ERR_INVALID_REQUEST, "params must be an object");
	m->method = json_string_value(method);
	m->params = params;
	m->kind = id != NULL ? MCP_REQUEST : MCP_NOTIFICATION;
	return true;
}

enum cs_err mcp_rpc_parse(const char *body, size_t len, const struct mcp_rpc_headers *h,
    struct mcp_msg *out, struct mcp_rpc_refusal *why)
{
	struct mcp_msg m;
	json_error_t jerr;
	char ij[128];
	memset(&m, 0, sizeof m);
	memset(why, 0, sizeof *why);
	if (len > MCP_RPC_MAX_BODY) {
		refuse(why, 413, MCP_ERR_INVALID_REQUEST, "the request body is larger than 1 MiB");
		return CS_EINVAL;
	}
	if (body == NULL || len == 0) {
		refuse(why, 400, MCP_ERR_PARSE, "the request body is empty: one JSON-RPC message "
		    "is expected");
		return CS_EINVAL;
	}
	/* SECURITY: a duplicate member name could be read one way here and
	 * another way upstream: refused (I-JSON, RFC 7493 §2.3). */
	m.root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (m.root == NULL) {
		refuse(why, 400, MCP_ERR_PARSE, json_error_code(&jerr) == json_error_duplicate_key ?
		    "the body has a duplicate member name" : "the body is not JSON");
		return CS_EINVAL;
	}
	if (json_is_array(m.root)) {
		refuse(why, 400, MCP_ERR_INVALID_REQUEST, "batches are not accepted: send one "
		    "JSON-RPC message per request");
		goto refused;
	}
	if (!json_is_object(m.root)) {
		refuse(why, 400, MCP_ERR_INVALID_REQUEST, "the body is not a JSON-RPC message (an "
		    "object)");
		goto refused;
	}
	if (jcs_ijson_check(m.root, ij, sizeof ij) != CS_OK) {
		refuse(why, 400, MCP_ERR_INVALID_REQUEST, "the body is not I-JSON (RFC 7493)");
		goto refused;
	}
	if (!envelope(&m, why))
		goto refused;
	if (m.kind != MCP_RESPONSE && !era_of(&m, h, why))
		goto refused;
	if (m.kind == MCP_REQUEST && strcmp(m.method, "tools/call") == 0 && !tool_call(&m, why))
		goto refused;
	if (!mcp_rpc_check_headers(&m, h, why))
		goto refused;
	mcp_rpc_refusal_clear(why);
	*out = m;
	return CS_OK;
refused:
	json_decref(m.root);
	return CS_EINVAL;
}
