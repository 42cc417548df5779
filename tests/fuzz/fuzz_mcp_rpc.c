/* fuzz_mcp_rpc.c -- libFuzzer target for the gateway's JSON-RPC reader
 * (mcp_rpc.c).  The first two bytes pick the 2026 headers; a message it
 * accepts must hold what the contract says, a refusal a status and code. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "mcp_rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = { NULL, "close_issue", "tools/call", "a:b" };
	struct mcp_rpc_headers h = { NULL, NULL, NULL };
	struct mcp_msg m;
	struct mcp_rpc_refusal why;
	if (size < 2)
		return 0;
	if (data[0] & 1)
		h.protocol_version = MCP_VERSION_2026;
	if (data[0] & 2)
		h.method = (data[0] & 4) ? "tools/call" : "tools/list";
	h.name = names[data[1] & 3];
	enum cs_err e = mcp_rpc_parse((const char *)data + 2, size - 2, &h, &m, &why);
	if (e == CS_OK) {
		if (m.root == NULL || m.kind >= MCP_KIND__MAX || m.era >= MCP_ERA__MAX)
			abort();
		if (m.kind != MCP_RESPONSE && (m.method == NULL || strlen(m.method) > MCP_RPC_MAX_METHOD))
			abort();
		if (m.tool != NULL && (strlen(m.tool) == 0 || strlen(m.tool) > MCP_RPC_MAX_TOOL))
			abort();
		if (m.request_state != NULL && strlen(m.request_state) > MCP_RPC_MAX_STATE)
			abort();
		if (m.era == MCP_ERA_2026 && m.kind == MCP_REQUEST &&
		    (h.protocol_version == NULL || h.method == NULL || strcmp(h.method, m.method) != 0))
			abort();
		if (why.id != NULL)
			abort();
		mcp_msg_clear(&m);
	} else if (e == CS_EINVAL) {
		if ((why.status != 400 && why.status != 413) || why.code == 0 ||
		    memchr(why.message, '\0', sizeof why.message) == NULL)
			abort();
		mcp_rpc_refusal_clear(&why);
	} else if (e != CS_ENOMEM) {
		abort();
	}
	return 0;
}
