/* test_agent.c -- who acts (agent.c): an [agent.X] resolved into its view,
 * an unknown id refused without touching the view, MCP clients ([client.NAME]
 * and client-id URLs under the [mcp] policy) that may ask only for resources
 * behind an [mcp.NAME] endpoint and that a gateway's exchange cannot name, a
 * client_id equal to an agent's id refused at load, and the one RESOURCE:SCOPE rule
 * from the attacker's side: prefixes, a colon moved between resource and
 * scope, empty and NULL values. */
#include <string.h>

#include "testutil.h"
#include "agent.h"
#include "config.h"
#include "exchange.h"

#define CFG \
	"[server]\npublic_url = https://consent.example.com\n" \
	"[oidc]\nissuer = https://idp.example.com\nclient_id = consentd\nclient_secret = oidc-secret\n" \
	"[gateway]\nclient_secret = gateway-secret-0123456789\n" \
	"[agent.coder]\nname = The Coder\ndescription = Writes code\n" \
	"allow = notes:read gh:repo:status res:scope\noffline = true\n" \
	"[agent.colon]\nallow = re:s:scope\n" \
	"[agent.plain]\n" \
	"[resource.notes]\n[scope.notes.read]\n[scope.notes.write]\n" \
	"[resource.gh]\n[scope.gh.repo:status]\n[scope.gh.repo]\n" \
	"[resource.res]\n[scope.res.scope]\n" \
	"[resource.re]\n[scope.re.s:scope]\n" \
	"[client.ide]\nredirect_uris = http://127.0.0.1/cb\n" \
	"[client.cli]\nclient_id = cli-7\nname = The CLI\nredirect_uris = https://cli.example/cb\n" \
	"[mcp]\ncimd_allow = prefixes\ncimd_prefixes = https://tools.example/mcp/\n" \
	"[mcp.notes]\nresource = notes\n"

static struct config *cfg;

static void setup(void)
{
	ck_assert_int_eq(config_load_string(CFG, strlen(CFG), "x.conf", NULL, stderr, &cfg), CS_OK);
}

static void teardown(void)
{
	config_free(cfg);
	cfg = NULL;
}

/* The view of the configured agent id (which must resolve). */
static struct agent_view agent(const char *id)
{
	struct agent_view v;
	ck_assert_msg(agent_resolve(cfg, id, &v), "%s does not resolve", id);
	return v;
}

START_TEST(test_agent_resolve_configured)
{
	struct agent_view v = agent("coder");
	ck_assert_int_eq(v.kind, AGENT_CONFIGURED);
	ck_assert_str_eq(v.id, "coder");
	ck_assert_str_eq(v.name, "The Coder");
	ck_assert_str_eq(v.description, "Writes code");
	ck_assert(!v.self_named);
	ck_assert_int_eq(v.rule, AGENT_RULE_ALLOW_LIST);
	ck_assert_uint_eq(v.nallow, 3);
	ck_assert_str_eq(v.allow[0], "notes:read");
	ck_assert_str_eq(v.allow[1], "gh:repo:status");
	ck_assert_str_eq(v.allow[2], "res:scope");
	ck_assert(v.offline);
	/* The defaults: the id as name, no description, no allow list, no offline. */
	v = agent("plain");
	ck_assert_int_eq(v.kind, AGENT_CONFIGURED);
	ck_assert_str_eq(v.id, "plain");
	ck_assert_str_eq(v.name, "plain");
	ck_assert_str_eq(v.description, "");
	ck_assert(!v.self_named);
	ck_assert_int_eq(v.rule, AGENT_RULE_ALLOW_LIST);
	ck_assert_uint_eq(v.nallow, 0);
	ck_assert(!v.offline);
	ck_assert(!agent_may_ask(&v, "notes", "read"));
}
END_TEST

START_TEST(test_agent_resolve_unknown)
{
	/* Nothing but the exact id: a prefix, an extension, another case, a
	 * client's NAME, and NULL are unknown; the view stays as it was. */
	const char *ids[] = { "code", "coder2", "Coder", "coder ", "", "cli", "cli-", "CLI-7" };
	struct agent_view v, before;
	memset(&before, 0xa5, sizeof before);
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
		memcpy(&v, &before, sizeof v);
		ck_assert_msg(!agent_resolve(cfg, ids[i], &v), "'%s' resolved", ids[i]);
		ck_assert_msg(memcmp(&v, &before, sizeof v) == 0, "'%s' wrote the view", ids[i]);
	}
	memcpy(&v, &before, sizeof v);
	ck_assert(!agent_resolve(cfg, NULL, &v));
	ck_assert(memcmp(&v, &before, sizeof v) == 0);
	ck_assert(!agent_resolve(NULL, "coder", &v));
	ck_assert(memcmp(&v, &before, sizeof v) == 0);
}
END_TEST

START_TEST(test_agent_resolve_mcp_client)
{
	struct agent_view v, before;
	ck_assert(agent_resolve(cfg, "cli-7", &v));
	ck_assert_int_eq(v.kind, AGENT_MCP_CLIENT);
	ck_assert_str_eq(v.id, "cli-7");
	ck_assert_str_eq(v.name, "The CLI");
	ck_assert_str_eq(v.description, "");
	ck_assert(!v.self_named);               /* the operator named it */
	ck_assert(v.offline);
	ck_assert_int_eq(v.rule, AGENT_RULE_MCP);
	ck_assert_ptr_null(v.allow);
	ck_assert_uint_eq(v.nallow, 0);
	/* Any configured scope of a resource behind an [mcp.NAME] endpoint
	 * (the person chooses); nothing of a resource no endpoint stands for. */
	ck_assert(agent_may_ask(&v, "notes", "write"));
	ck_assert(agent_may_ask(&v, "notes", "read"));
	ck_assert(!agent_may_ask(&v, "gh", "repo:status"));
	ck_assert(!agent_may_ask(&v, "res", "scope"));
	ck_assert(!agent_may_ask(&v, "notes", ""));
	ck_assert(!agent_may_ask(&v, "", "read"));
	ck_assert(!agent_may_ask(&v, NULL, "read"));
	ck_assert(!agent_may_ask(&v, "notes", NULL));
	/* No name given: the client_id, which defaults to NAME. */
	ck_assert(agent_resolve(cfg, "ide", &v));
	ck_assert_str_eq(v.id, "ide");
	ck_assert_str_eq(v.name, "ide");
	/* By client_id only: not by NAME. */
	memset(&before, 0xa5, sizeof before);
	memcpy(&v, &before, sizeof v);
	ck_assert(!agent_resolve(cfg, "cli", &v));
	ck_assert(memcmp(&v, &before, sizeof v) == 0);
}
END_TEST

START_TEST(test_agent_resolve_client_id_url)
{
	struct agent_view v, before;
	const char *url = "https://tools.example/mcp/client.json";
	ck_assert(agent_resolve(cfg, url, &v));
	ck_assert_int_eq(v.kind, AGENT_MCP_CLIENT_URL);
	ck_assert_ptr_eq(v.id, url);
	ck_assert_str_eq(v.name, url);
	ck_assert(!v.self_named);
	ck_assert(v.offline);
	ck_assert(agent_may_ask(&v, "notes", "read"));
	ck_assert(!agent_may_ask(&v, "gh", "repo"));
	/* Outside the policy's prefixes, or not a client-id URL at all. */
	memset(&before, 0xa5, sizeof before);
	memcpy(&v, &before, sizeof v);
	ck_assert(!agent_resolve(cfg, "https://tools.example/other/client.json", &v));
	ck_assert(!agent_resolve(cfg, "https://evil.example/mcp/client.json", &v));
	ck_assert(!agent_resolve(cfg, "http://tools.example/mcp/client.json", &v));
	ck_assert(!agent_resolve(cfg, "https://tools.example/mcp/c.json?x=1", &v));
	ck_assert(!agent_resolve(cfg, "https://tools.example/mcp/../c.json", &v));
	ck_assert(memcmp(&v, &before, sizeof v) == 0);
}
END_TEST

/* A [client.NAME] whose client_id is an [agent.X] id would make one consent
 * row name two parties: refused at load. */
START_TEST(test_agent_client_id_of_an_agent_refused)
{
	static const char bad[] = CFG "[client.same]\nclient_id = coder\n"
	    "redirect_uris = https://same.example/cb\n";
	struct config *c2 = NULL;
	FILE *err = tmpfile();
	ck_assert_int_ne(config_load_string(bad, strlen(bad), "x.conf", NULL, err, &c2), CS_OK);
	ck_assert_ptr_null(c2);
	char msg[1024] = "";
	rewind(err);
	size_t n = fread(msg, 1, sizeof msg - 1, err);
	msg[n] = '\0';
	fclose(err);
	ck_assert_msg(strstr(msg, "has the id of [agent.coder]") != NULL, "%s", msg);
}
END_TEST

/* An [mcp.NAME] must name a configured resource, and its URI is
 * public_url/mcp/NAME. */
START_TEST(test_agent_mcp_endpoint_config)
{
	const struct config_mcp_endpoint *m = config_mcp_endpoint(cfg, "notes");
	ck_assert_ptr_nonnull(m);
	ck_assert_str_eq(m->resource, "notes");
	ck_assert_str_eq(m->uri, "https://consent.example.com/mcp/notes");
	ck_assert_ptr_eq(config_mcp_endpoint_by_uri(cfg, "https://consent.example.com/mcp/notes"), m);
	ck_assert_ptr_null(config_mcp_endpoint_by_uri(cfg, "https://consent.example.com/mcp/note"));
	ck_assert_ptr_null(config_mcp_endpoint_by_uri(cfg, "https://consent.example.com/mcp/notes/"));
	ck_assert(config_resource_has_mcp_endpoint(cfg, "notes"));
	ck_assert(!config_resource_has_mcp_endpoint(cfg, "gh"));
	static const char bad[] = CFG "[mcp.x]\nresource = nope\n";
	struct config *c2 = NULL;
	FILE *err = tmpfile();
	ck_assert_int_ne(config_load_string(bad, strlen(bad), "x.conf", NULL, err, &c2), CS_OK);
	char msg[1024] = "";
	rewind(err);
	size_t n = fread(msg, 1, sizeof msg - 1, err);
	msg[n] = '\0';
	fclose(err);
	ck_assert_msg(strstr(msg, "no [resource.nope] section") != NULL, "%s", msg);
	static const char none[] = CFG "[mcp.y]\n";
	err = tmpfile();
	ck_assert_int_ne(config_load_string(none, strlen(none), "x.conf", NULL, err, &c2), CS_OK);
	fclose(err);
}
END_TEST

/* A gateway that names an MCP client's client_id (or a client-id URL) at
 * /token is refused as an unknown agent: its consents are not the
 * gateway's. */
START_TEST(test_agent_exchange_never_reaches_a_client)
{
	struct exchange_target t;
	ck_assert_int_eq(exchange_target(cfg, "notes", NULL, "cli-7", "read", &t), CS_OK);
	ck_assert_int_eq(t.outcome, EXCHANGE_TARGET_UNKNOWN_AGENT);
	exchange_target_clear(&t);
	ck_assert_int_eq(exchange_target(cfg, "notes", NULL, "https://tools.example/mcp/c.json",
	    "read", &t), CS_OK);
	ck_assert_int_eq(t.outcome, EXCHANGE_TARGET_UNKNOWN_AGENT);
	exchange_target_clear(&t);
	ck_assert_int_eq(exchange_target(cfg, "notes", NULL, "coder", "write", &t), CS_OK);
	ck_assert_int_eq(t.outcome, EXCHANGE_TARGET_SCOPE_DENIED);
	ck_assert_str_eq(t.agent.name, "The Coder");
	exchange_target_clear(&t);
}
END_TEST

START_TEST(test_agent_may_ask_exact_entries)
{
	struct agent_view v = agent("coder");
	ck_assert(agent_may_ask(&v, "notes", "read"));
	ck_assert(agent_may_ask(&v, "res", "scope"));
	/* A scope may hold a colon: the entry splits at its first one. */
	ck_assert(agent_may_ask(&v, "gh", "repo:status"));
	ck_assert(!agent_may_ask(&v, "gh", "repo"));
	ck_assert(!agent_may_ask(&v, "notes", "write"));
	v = agent("colon");
	ck_assert(agent_may_ask(&v, "re", "s:scope"));
}
END_TEST

START_TEST(test_agent_may_ask_prefixes)
{
	struct agent_view v = agent("coder");
	/* A prefix or an extension of the resource or the scope is another one. */
	ck_assert(!agent_may_ask(&v, "note", "read"));
	ck_assert(!agent_may_ask(&v, "n", "read"));
	ck_assert(!agent_may_ask(&v, "notesx", "read"));
	ck_assert(!agent_may_ask(&v, "notes", "rea"));
	ck_assert(!agent_may_ask(&v, "notes", "r"));
	ck_assert(!agent_may_ask(&v, "notes", "reading"));
	ck_assert(!agent_may_ask(&v, "notes", "read:x"));
	ck_assert(!agent_may_ask(&v, "Notes", "read"));
	ck_assert(!agent_may_ask(&v, "notes", "READ"));
	ck_assert(!agent_may_ask(&v, "gh", "repo:statu"));
	ck_assert(!agent_may_ask(&v, "gh", "repo:"));
}
END_TEST

START_TEST(test_agent_may_ask_colon_moved)
{
	/* "res:scope" is resource res, scope scope: not resource re, scope s:scope. */
	struct agent_view v = agent("coder");
	ck_assert(!agent_may_ask(&v, "re", "s:scope"));
	ck_assert(!agent_may_ask(&v, "res:scope", "scope"));
	/* "re:s:scope" is resource re, scope s:scope: not resource re:s (no
	 * resource id has a colon), and not res. */
	v = agent("colon");
	ck_assert(!agent_may_ask(&v, "re:s", "scope"));
	ck_assert(!agent_may_ask(&v, "res", "scope"));
	ck_assert(!agent_may_ask(&v, "re:", "s:scope"));
	ck_assert(!agent_may_ask(&v, "re", "s"));
}
END_TEST

START_TEST(test_agent_may_ask_empty_and_null)
{
	struct agent_view v = agent("coder");
	ck_assert(!agent_may_ask(NULL, "notes", "read"));
	ck_assert(!agent_may_ask(&v, NULL, "read"));
	ck_assert(!agent_may_ask(&v, "notes", NULL));
	ck_assert(!agent_may_ask(&v, "", "read"));
	ck_assert(!agent_may_ask(&v, "notes", ""));
	ck_assert(!agent_may_ask(&v, "", ""));
	/* Entries the configuration would refuse ("notes:", ":read", no colon)
	 * match nothing either, least of all the empty scope or resource. */
	const char *const odd[] = { "notes:", ":read", "notesread", NULL };
	struct agent_view h = { .kind = AGENT_CONFIGURED, .id = "h", .name = "h", .description = "",
	    .rule = AGENT_RULE_ALLOW_LIST, .allow = odd, .nallow = 4 };
	ck_assert(!agent_may_ask(&h, "notes", ""));
	ck_assert(!agent_may_ask(&h, "", "read"));
	ck_assert(!agent_may_ask(&h, "notes", "read"));
	ck_assert(!agent_may_ask(&h, "notesread", ""));
	/* The MCP rule is the MCP client's alone: a view that claims it
	 * without being one gets nothing. */
	h.rule = AGENT_RULE_MCP;
	h.cfg = cfg;
	ck_assert(!agent_may_ask(&h, "notes", "read"));
	h.rule = AGENT_RULE__MAX;
	ck_assert(!agent_may_ask(&h, "notes", "read"));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("agent");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_agent_resolve_configured);
	tcase_add_test(tc, test_agent_resolve_unknown);
	tcase_add_test(tc, test_agent_resolve_mcp_client);
	tcase_add_test(tc, test_agent_resolve_client_id_url);
	tcase_add_test(tc, test_agent_client_id_of_an_agent_refused);
	tcase_add_test(tc, test_agent_mcp_endpoint_config);
	tcase_add_test(tc, test_agent_exchange_never_reaches_a_client);
	tcase_add_test(tc, test_agent_may_ask_exact_entries);
	tcase_add_test(tc, test_agent_may_ask_prefixes);
	tcase_add_test(tc, test_agent_may_ask_colon_moved);
	tcase_add_test(tc, test_agent_may_ask_empty_and_null);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
