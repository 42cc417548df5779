/* fuzz_mcp_state.c -- libFuzzer target for the requestState opener
 * (mcp_state.c): any text a client echoes must be refused or, only when it
 * is one the gateway sealed, answered OK. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "mcp_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct master_key mk;
	struct mcp_state want = { .user_id = 7, .client_id = "c", .endpoint = "e", .tool = "t",
		.digest = "d" }, out;
	enum mcp_state_verdict v;
	char *text = malloc(size + 1);
	if (text == NULL)
		return 0;
	memset(mk.bytes, 0x42, sizeof mk.bytes);
	memcpy(text, data, size);
	text[size] = '\0';
	memset(&out, 0, sizeof out);
	enum cs_err e = mcp_state_open(&mk, text, &want, 10, &out, &v);
	if (e == CS_OK && v == MCP_STATE_OK) {
		/* A random input cannot forge a seal: only a real one gets here. */
		if (out.pending == NULL || out.kind == MCP_ASK_NONE)
			abort();
		mcp_state_clear(&out);
	} else if (e == CS_OK && (v >= MCP_STATE_VERDICT__MAX || out.own != NULL)) {
		abort();
	}
	free(text);
	return 0;
}
