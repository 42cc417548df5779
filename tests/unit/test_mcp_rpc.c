/* test_mcp_rpc.c -- the gateway's reading of one MCP JSON-RPC message
 * (mcp_rpc.c): the shapes both eras send, and every refusal of bad input. */
#include <check.h>
#include <string.h>
#include "mcp_rpc.h"
#include "testutil.h"

static const struct mcp_rpc_headers H2026_CALL = { MCP_VERSION_2026, "tools/call", "close_issue" };

static int parse(const char *body, const struct mcp_rpc_headers *h, struct mcp_msg *m,
    struct mcp_rpc_refusal *why)
{
	enum cs_err e = mcp_rpc_parse(body, strlen(body), h, m, why);
	ck_assert(e == CS_OK || e == CS_EINVAL);
	return e == CS_OK;
}

/* Refused with status and code, the message holding want. */
static void refused(const char *body, const struct mcp_rpc_headers *h, int status, int code,
    const char *want)
{
	struct mcp_msg m;
	struct mcp_rpc_refusal why;
	memset(&m, 0, sizeof m);
	ck_assert_msg(!parse(body, h, &m, &why), "accepted: %s", body);
	ck_assert_int_eq(why.status, status);
	ck_assert_msg(why.code == code, "code %d for %s", why.code, body);
	ck_assert_msg(strstr(why.message, want) != NULL, "'%s' for %s", why.message, body);
	ck_assert_ptr_null(m.root);
	mcp_rpc_refusal_clear(&why);
}

START_TEST(test_mcp_rpc_2026_tool_call)
{
	struct mcp_msg m;
	struct mcp_rpc_refusal why;
	ck_assert(parse("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"tools/call\",\"params\":{\"name\":"
	    "\"close_issue\",\"arguments\":{\"id\":7},\"requestState\":\"abc\",\"inputResponses\":"
	    "{\"consent\":{\"action\":\"accept\"}},\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":"
	    "\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{\"elicitation\":{\"form\":{},"
	    "\"url\":{}}}}}}", &H2026_CALL, &m, &why));
	ck_assert_int_eq(m.kind, MCP_REQUEST);
	ck_assert_int_eq(m.era, MCP_ERA_2026);
	ck_assert(m.has_caps && m.url_elicitation);
	ck_assert_str_eq(m.method, "tools/call");
	ck_assert_str_eq(m.tool, "close_issue");
	ck_assert_int_eq(json_integer_value(json_object_get(m.arguments, "id")), 7);
	ck_assert_str_eq(m.request_state, "abc");
	ck_assert_ptr_nonnull(m.input_responses);
	ck_assert_int_eq(json_integer_value(m.id), 0);
	ck_assert_ptr_null(why.id);
	mcp_msg_clear(&m);
	/* {"elicitation":{}} is form only: no URL elicitation. */
	ck_assert(parse("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/call\",\"params\":{\"name\":"
	    "\"close_issue\",\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
	    "\"io.modelcontextprotocol/clientCapabilities\":{\"elicitation\":{}}}}}", &H2026_CALL, &m, &why));
	ck_assert(m.has_caps && !m.url_elicitation);
	ck_assert_ptr_null(m.arguments);
	mcp_msg_clear(&m);
	mcp_msg_clear(NULL);
}
END_TEST

START_TEST(test_mcp_rpc_2025_messages)
{
	struct mcp_msg m;
	struct mcp_rpc_refusal why;
	const struct mcp_rpc_headers none = { NULL, NULL, NULL };
	ck_assert(parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
	    "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{\"elicitation\":{\"url\":{}}}}}",
	    &none, &m, &why));
	ck_assert_int_eq(m.era, MCP_ERA_2025);
	ck_assert(m.has_caps && m.url_elicitation);
	mcp_msg_clear(&m);
	ck_assert(parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &none, &m, &why));
	ck_assert_int_eq(m.kind, MCP_NOTIFICATION);
	ck_assert_ptr_null(m.id);
	mcp_msg_clear(&m);
	ck_assert(parse("{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"action\":\"accept\"}}", &none, &m, &why));
	ck_assert_int_eq(m.kind, MCP_RESPONSE);
	mcp_msg_clear(&m);
	/* A 2025 tools/call: no header checks, the same tool reading. */
	const struct mcp_rpc_headers h25 = { MCP_VERSION_2025, NULL, NULL };
	ck_assert(parse("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
	    "\"list_issues\",\"arguments\":{}}}", &h25, &m, &why));
	ck_assert_int_eq(m.era, MCP_ERA_2025);
	ck_assert_str_eq(m.tool, "list_issues");
	ck_assert(!m.has_caps);
	mcp_msg_clear(&m);
}
END_TEST

START_TEST(test_mcp_rpc_bad_input)
{
	const struct mcp_rpc_headers none = { NULL, NULL, NULL };
	refused("", &none, 400, MCP_ERR_PARSE, "empty");
	refused("{", &none, 400, MCP_ERR_PARSE, "not JSON");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"ping\"}", &none, 400, MCP_ERR_PARSE,
	    "duplicate member");
	refused("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", &none, 400,
	    MCP_ERR_INVALID_REQUEST, "batches are not accepted");
	refused("\"ping\"", &none, 400, MCP_ERR_INVALID_REQUEST, "not a JSON-RPC message");
	refused("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", &none, 400,
	    MCP_ERR_INVALID_REQUEST, "jsonrpc must be");
	refused("{\"id\":1,\"method\":\"ping\"}", &none, 400, MCP_ERR_INVALID_REQUEST, "jsonrpc");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", &none, 400,
	    MCP_ERR_INVALID_REQUEST, "the id must be");
	refused("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", &none, 400,
	    MCP_ERR_INVALID_REQUEST, "the id must be");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}", &none, 400, MCP_ERR_INVALID_REQUEST,
	    "the method must be");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}", &none, 400, MCP_ERR_INVALID_REQUEST,
	    "the method must be");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":[]}", &none, 400,
	    MCP_ERR_INVALID_REQUEST, "params must be an object");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1}", &none, 400, MCP_ERR_INVALID_REQUEST, "needs a method");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{}}", &none, 400,
	    MCP_ERR_INVALID_REQUEST, "exactly one of result and error");
	/* Not I-JSON: an integer past 2^53-1. */
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"t\","
	    "\"arguments\":{\"n\":9007199254740993}}}", &none, 400, MCP_ERR_INVALID_REQUEST, "I-JSON");
	/* NUL inside a string is refused by the JSON reader. */
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\\u0000b\"}", &none, 400, MCP_ERR_PARSE,
	    "not JSON");
	/* tools/call's members. */
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}", &none, 400,
	    MCP_ERR_PARAMS, "params.name");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"a b\"}}",
	    &none, 400, MCP_ERR_PARAMS, "params.name");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"t\","
	    "\"arguments\":[1]}}", &none, 400, MCP_ERR_PARAMS, "arguments is not an object");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"t\","
	    "\"requestState\":5}}", &none, 400, MCP_ERR_PARAMS, "requestState");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"t\","
	    "\"requestState\":\"\"}}", &none, 400, MCP_ERR_PARAMS, "requestState");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"t\","
	    "\"inputResponses\":\"x\"}}", &none, 400, MCP_ERR_PARAMS, "inputResponses");
	/* A tool name of 129 characters. */
	char body[512], name[130];
	memset(name, 'a', 129);
	name[129] = '\0';
	snprintf(body, sizeof body, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
	    "{\"name\":\"%s\"}}", name);
	refused(body, &none, 400, MCP_ERR_PARAMS, "params.name");
	/* An unknown protocol version in _meta. */
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
	    "\"io.modelcontextprotocol/protocolVersion\":\"2099-01-01\"}}}", &none, 400,
	    MCP_ERR_UNSUPPORTED_VERSION, "unsupported protocol version");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":5}}",
	    &none, 400, MCP_ERR_PARAMS, "_meta");
}
END_TEST

START_TEST(test_mcp_rpc_too_big)
{
	struct mcp_msg m;
	struct mcp_rpc_refusal why;
	size_t n = MCP_RPC_MAX_BODY + 1;
	char *big = malloc(n);
	ck_assert_ptr_nonnull(big);
	memset(big, ' ', n);
	ck_assert_int_eq(mcp_rpc_parse(big, n, NULL, &m, &why), CS_EINVAL);
	ck_assert_int_eq(why.status, 413);
	free(big);
}
END_TEST

/* 2026-07-28: the headers must repeat the body (400, -32020). */
START_TEST(test_mcp_rpc_2026_headers)
{
	const char *call = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"tools/call\",\"params\":{\"name\":"
	    "\"close_issue\",\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}";
	refused(call, &(struct mcp_rpc_headers){ NULL, "tools/call", "close_issue" }, 400,
	    MCP_ERR_HEADER_MISMATCH, "MCP-Protocol-Version");
	refused(call, &(struct mcp_rpc_headers){ "2025-11-25", "tools/call", "close_issue" }, 400,
	    MCP_ERR_HEADER_MISMATCH, "MCP-Protocol-Version");
	refused(call, &(struct mcp_rpc_headers){ MCP_VERSION_2026, NULL, "close_issue" }, 400,
	    MCP_ERR_HEADER_MISMATCH, "Mcp-Method");
	refused(call, &(struct mcp_rpc_headers){ MCP_VERSION_2026, "tools/list", "close_issue" }, 400,
	    MCP_ERR_HEADER_MISMATCH, "Mcp-Method");
	refused(call, &(struct mcp_rpc_headers){ MCP_VERSION_2026, "tools/call", NULL }, 400,
	    MCP_ERR_HEADER_MISMATCH, "Mcp-Name");
	/* SECURITY: a header naming a harmless tool while the body calls another. */
	refused(call, &(struct mcp_rpc_headers){ MCP_VERSION_2026, "tools/call", "list_issues" }, 400,
	    MCP_ERR_HEADER_MISMATCH, "Mcp-Name");
	/* The header alone makes it a 2026 request: the body's method must follow. */
	refused("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"tools/list\"}",
	    &(struct mcp_rpc_headers){ MCP_VERSION_2026, "tools/call", NULL }, 400,
	    MCP_ERR_HEADER_MISMATCH, "Mcp-Method");
	/* resources/read names its uri. */
	refused("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"resources/read\",\"params\":{\"uri\":\"a:b\"}}",
	    &(struct mcp_rpc_headers){ MCP_VERSION_2026, "resources/read", "a:c" }, 400,
	    MCP_ERR_HEADER_MISMATCH, "Mcp-Name");
	struct mcp_msg m;
	struct mcp_rpc_refusal why;
	ck_assert(parse("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"resources/read\",\"params\":{\"uri\":\"a:b\"}}",
	    &(struct mcp_rpc_headers){ MCP_VERSION_2026, "resources/read", "a:b" }, &m, &why));
	mcp_msg_clear(&m);
	/* A refusal after the id was read carries the id, for the error's id. */
	ck_assert(!parse(call, &(struct mcp_rpc_headers){ MCP_VERSION_2026, "tools/call", "x" }, &m, &why));
	ck_assert_int_eq(json_integer_value(why.id), 0);
	mcp_rpc_refusal_clear(&why);
	mcp_rpc_refusal_clear(NULL);
}
END_TEST

static Suite *mcp_rpc_suite(void)
{
	Suite *s = suite_create("mcp_rpc");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_mcp_rpc_2026_tool_call);
	tcase_add_test(tc, test_mcp_rpc_2025_messages);
	tcase_add_test(tc, test_mcp_rpc_bad_input);
	tcase_add_test(tc, test_mcp_rpc_too_big);
	tcase_add_test(tc, test_mcp_rpc_2026_headers);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(mcp_rpc_suite());
}
