/* test_approval_pages.c -- the approval page (approval_pages.c) through
 * routes.c's real table, the router and the real handler over a real store,
 * without a socket: it leads with what the action does (for an MCP client's
 * tool call, the tool and its description), then the values as a readable list
 * (params_view.c), the exact canonical text and its digest behind a disclosure.
 * The browser's view of the same page is tests/e2e/person_pages.test.js. */
#include <string.h>

#include "testutil.h"
#include "tu_consent.h"
#include "app.h"
#include "approval.h"
#include "config.h"
#include "consent.h"
#include "http.h"
#include "page_reply.h"
#include "jcs.h"
#include "scope.h"
#include "session.h"
#include "store.h"
#include "store_user.h"

#define ISS "https://idp.example.com"

static char *dir, *db;
static struct config *cfg;
static struct app app;
static struct store_conn *sc;
static int64_t now;

static void setup(void)
{
	char text[4096];
	dir = tu_tmpdir();
	db = tu_path(dir, "t.db");
	char *key = tu_path(dir, "master.key");
	ck_assert_int_eq(master_key_create_file(key), CS_OK);
	enum cs_err fe = str_fmt(text, sizeof text,
	    "[server]\npublic_url = http://127.0.0.1:8080\n"
	    "[database]\npath = %s\n"
	    "[keys]\nmaster_key_file = %s\n"
	    "[oidc]\nissuer = " ISS "\nclient_id = consentd\nclient_secret = oidc-secret\n"
	    "[gateway]\nclient_secret = gateway-secret-0123456789\n"
	    "[agent.coder]\nname = Coding assistant\nallow = notes:write\n"
	    "[resource.notes]\nname = Team notes\n"
	    "[scope.notes.write]\ndescription = Edit your notes\n"
	    "[action.notes.create_note]\ndescription = Write a note\nscope = write\napproval = required\n"
	    "[client.ide]\nname = Example IDE\nredirect_uris = http://127.0.0.1/callback\n"
	    "[mcp.notes]\nresource = notes\n", db, key);
	ck_assert_int_eq(fe, CS_OK);
	free(key);
	ck_assert_int_eq(config_load_string(text, strlen(text), "x.conf", NULL, stderr, &cfg), CS_OK);
	ck_assert_int_eq(app_init(&app, cfg), CS_OK);
	sc = store_conn(app.store);
	ck_assert_ptr_nonnull(sc);
	now = app_now();
}

static void teardown(void)
{
	app_clear(&app);
	config_free(cfg);
	free(db);
	tu_rmdir(dir);
}

static const char *no_header(void *hctx, const char *name)
{
	(void)hctx;
	(void)name;
	return NULL;
}

/* alice signed in: her Cookie header into cookie, her user id. */
static int64_t sign_in(char cookie[128])
{
	char sid[SESSION_TOKEN_LEN + 1];
	int64_t uid;
	ck_assert_int_eq(store_user_put(sc, &(struct store_user){ .issuer = ISS, .subject = "alice",
	    .name = "Alice", .now = now, .login = true }, &uid), CS_OK);
	ck_assert_int_eq(session_create(sc, uid, now, false, now, sid), CS_OK);
	ck_assert_int_eq(str_fmt(cookie, 128, "%s=%s", session_cookie_name(cfg), sid), CS_OK);
	return uid;
}

/* alice's live consent to agent for notes:write; its id (caller frees). */
static char *consent_for(const char *agent, int64_t uid)
{
	struct consent_answer a;
	struct consent_decision d;
	struct scope_set req;
	char *kid = NULL;
	memset(&a, 0, sizeof a);
	ck_assert_int_eq(scope_set_parse("write", &req), CS_OK);
	ck_assert_int_eq(tu_exchange(sc, cfg, ISS, "alice", agent, "notes", &req, NULL, "gateway",
	    now, &a), CS_OK);
	ck_assert_int_eq(a.outcome, CONSENT_REQUIRED);
	memset(&d, 0, sizeof d);
	d.approve = true;
	d.selected = req;
	d.duration = 3600;
	tu_decision_version(sc, a.request_id, &d);
	ck_assert_int_eq(tu_decide(sc, cfg, a.request_id, uid, &d, "user:alice", now, &kid), CS_OK);
	scope_set_clear(&req);
	consent_answer_clear(&a);
	return kid;
}

/* A pending approval of create_note with params (JSON text) under consent kid; its id. */
static char *approval_for(const char *kid, const char *params)
{
	json_t *p = json_loads(params, JSON_DECODE_ANY, NULL);
	struct buf b;
	struct consent k;
	struct approval_answer a;
	char dg[APPROVAL_DIGEST_LEN + 1], *id;
	ck_assert_ptr_nonnull(p);
	buf_init(&b, APPROVAL_MAX_CANONICAL);
	ck_assert_int_eq(jcs_canonicalize(p, &b), CS_OK);
	ck_assert_int_eq(approval_digest(p, dg), CS_OK);
	memset(&k, 0, sizeof k);
	ck_assert_int_eq(consent_get(sc, kid, now, &k), CS_OK);
	memset(&a, 0, sizeof a);
	ck_assert_int_eq(approval_check(sc, cfg, &(struct approval_ask){ .k = &k, .action = "create_note",
	    .parameters = b.data, .digest = dg, .actor = "gateway", .now = now }, &a), CS_OK);
	ck_assert_int_eq(a.outcome, APPROVAL_NEEDED);
	id = strdup(a.approval_id);
	approval_answer_clear(&a);
	consent_clear(&k);
	buf_clear(&b);
	json_decref(p);
	return id;
}

/* GET /approve/{id} as cookie; the page (caller frees). */
static char *show(const char *id, const char *cookie)
{
	struct http_request req;
	struct http_reply rep;
	char path[128];
	ck_assert_int_eq(str_fmt(path, sizeof path, "/approve/%s", id), CS_OK);
	memset(&req, 0, sizeof req);
	req.method = HTTP_GET;
	req.path = path;
	req.query = "";
	req.app = &app;
	req.now = now;
	req.header = no_header;
	req.cookie = cookie;
	memcpy(req.remote_ip, "127.0.0.1", 10);
	memcpy(req.request_id, "test", 5);
	reply_init(&rep);
	router_dispatch(http_routes, &req, &rep);
	ck_assert_msg(rep.status == 200, "%d %s", rep.status, rep.body.data ? rep.body.data : "");
	char *page = strdup(rep.body.data);
	http_request_clear(&req);
	reply_clear(&rep);
	return page;
}

/* A page whose json_pack failed (ctx NULL): CS_ENOMEM and the reply as it
 * was, with or without a session (the pages pass their json_pack straight in). */
START_TEST(test_page_render_without_a_context_is_enomem)
{
	struct http_reply rep;
	struct session s;
	memset(&s, 0, sizeof s);
	reply_init(&rep);
	ck_assert_int_eq(page_render(&rep, 200, "me_revoke.html", NULL, NULL), CS_ENOMEM);
	ck_assert_int_eq(page_render(&rep, 403, "consent_other.html", NULL, &s), CS_ENOMEM);
	ck_assert_int_ne(rep.status, 200);
	ck_assert_int_ne(rep.status, 403);
	ck_assert_uint_eq(rep.body.len, 0);
	reply_clear(&rep);
}
END_TEST

#define PARAMS "{\"text\":\"line one\\nline two\",\"tags\":[\"a\",\"b\"],\"meta\":{\"pinned\":true}}"

/* An MCP client's tool call: the page names the tool and leads with its description. */
START_TEST(test_approval_pages_tool_call_leads_with_the_tool)
{
	char cookie[128];
	int64_t uid = sign_in(cookie);
	char *kid = consent_for("ide", uid), *id = approval_for(kid, PARAMS), *page = show(id, cookie);
	ck_assert_msg(strstr(page, "<p id=\"action\"><strong>Example IDE</strong> wants to "
	    "<strong>Write a note</strong> (the tool <code>create_note</code>) on your "
	    "<strong>Team notes</strong> account") != NULL, "%s", page);
	/* The readable list: paths, text with its line break, true as code; no JSON text. */
	ck_assert_ptr_nonnull(strstr(page, "<dt>meta.pinned</dt><dd><code>true</code></dd>"));
	ck_assert_ptr_nonnull(strstr(page, "<dt>tags[0]</dt><dd>a</dd>"));
	ck_assert_ptr_nonnull(strstr(page, "<dt>tags[1]</dt><dd>b</dd>"));
	ck_assert_ptr_nonnull(strstr(page, "<dt>text</dt><dd>line one\nline two</dd>"));
	char *list = strstr(page, "id=\"parameter-list\""), *exact = strstr(page, "id=\"exact-parameters\"");
	ck_assert(list != NULL && exact != NULL && list < exact);
	*exact = '\0';
	ck_assert_ptr_null(strstr(list, "{"));
	ck_assert_ptr_null(strstr(list, "&quot;"));
	ck_assert_ptr_null(strstr(list, "\\n"));
	/* The exact canonical text is still there, behind its disclosure. */
	ck_assert_ptr_nonnull(strstr(exact + 1, "{&quot;meta&quot;:{&quot;pinned&quot;:true},"));
	free(page);
	free(id);
	free(kid);
}
END_TEST

/* A gateway agent's action is an action, not a tool. */
START_TEST(test_approval_pages_agent_action_is_no_tool)
{
	char cookie[128];
	int64_t uid = sign_in(cookie);
	char *kid = consent_for("coder", uid), *id = approval_for(kid, PARAMS), *page = show(id, cookie);
	ck_assert_msg(strstr(page, "<strong>Coding assistant</strong> wants to <strong>Write a note</strong> "
	    "(<code>create_note</code>)") != NULL, "%s", page);
	ck_assert_ptr_null(strstr(page, "the tool"));
	ck_assert_ptr_nonnull(strstr(page, "<dt>text</dt><dd>line one\nline two</dd>"));
	free(page);
	free(id);
	free(kid);
}
END_TEST

static Suite *approval_pages_suite(void)
{
	Suite *s = suite_create("approval_pages");
	TCase *tc = tcase_create("approval_pages");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_approval_pages_tool_call_leads_with_the_tool);
	tcase_add_test(tc, test_page_render_without_a_context_is_enomem);
	tcase_add_test(tc, test_approval_pages_agent_action_is_no_tool);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(approval_pages_suite());
}
