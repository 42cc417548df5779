/* test_mcp_api.c -- the MCP endpoints before the gateway (mcp_api.c) and their
 * RFC 9728 metadata (meta.c), through routes.c's real table without a socket:
 * the document of each [mcp.NAME], 404 for other names, the 401 challenge
 * naming the document, every credential refused as invalid_token; and the
 * RFC 8414 fields MCP clients read, with [mcp] cimd_allow = none too. */
#include <string.h>
#include <strings.h>
#include <jansson.h>

#include "testutil.h"
#include "app.h"
#include "config.h"
#include "http.h"
#include "seal.h"

#define PUBLIC_URL "http://127.0.0.1:8080"
#define PRM_NOTES PUBLIC_URL "/.well-known/oauth-protected-resource/mcp/notes"

static char *dir;
static struct config *cfg;
static struct app app;

static void start(const char *mcp)
{
	char text[4096];
	dir = tu_tmpdir();
	char *db = tu_path(dir, "t.db"), *key = tu_path(dir, "master.key");
	ck_assert_int_eq(master_key_create_file(key), CS_OK);
	ck_assert_int_eq(str_fmt(text, sizeof text,
	    "[server]\npublic_url = " PUBLIC_URL "\n"
	    "[database]\npath = %s\n"
	    "[keys]\nmaster_key_file = %s\n"
	    "[oidc]\nissuer = https://idp.example.com\nclient_id = consentd\nclient_secret = s\n"
	    "[gateway]\nclient_secret = gateway-secret-0123456789\n"
	    "[resource.notes]\nname = Team notes\n"
	    "[scope.notes.read]\n[scope.notes.write]\n"
	    "[resource.wiki]\n[scope.wiki.admin]\n"
	    "[mcp.notes]\nresource = notes\n"
	    "[mcp.w-1]\nresource = wiki\n"
	    "%s", db, key, mcp), CS_OK);
	free(db);
	free(key);
	ck_assert_int_eq(config_load_string(text, strlen(text), "x.conf", NULL, stderr, &cfg), CS_OK);
	ck_assert_int_eq(app_init(&app, cfg), CS_OK);
}

static void setup(void)
{
	start("");
}

static void setup_no_cimd(void)
{
	start("[mcp]\ncimd_allow = none\n");
}

static void teardown(void)
{
	app_clear(&app);
	config_free(cfg);
	tu_rmdir(dir);
}

static const char *no_header(void *hctx, const char *name)
{
	(void)hctx;
	(void)name;
	return NULL;
}

/* One request through the real table; the reply is the caller's to clear. */
static void call(enum http_method m, const char *path, const char *authorization,
    struct http_reply *rep)
{
	struct http_request r;
	memset(&r, 0, sizeof r);
	r.method = m;
	r.path = path;
	r.query = "";
	r.app = &app;
	r.now = app_now();
	r.header = no_header;
	r.authorization = authorization;
	if (m == HTTP_POST) {
		r.content_type = "application/json";
		r.body = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}";
		r.body_len = strlen(r.body);
	}
	memcpy(r.remote_ip, "127.0.0.1", 10);
	memcpy(r.request_id, "test", 5);
	reply_init(rep);
	router_dispatch(http_routes, &r, rep);
	http_request_clear(&r);
}

static const char *hdr(const struct http_reply *rep, const char *name)
{
	for (size_t i = 0; i < rep->nheaders; i++)
		if (strcasecmp(rep->headers[i].name, name) == 0)
			return rep->headers[i].value;
	return NULL;
}

static json_t *json_of(const struct http_reply *rep)
{
	json_error_t err;
	json_t *v = json_loads(rep->body.data ? rep->body.data : "", 0, &err);
	ck_assert_msg(v != NULL, "not JSON: %s", rep->body.data ? rep->body.data : "");
	return v;
}

START_TEST(test_mcp_api_protected_resource_metadata)
{
	struct http_reply rep;
	call(HTTP_GET, "/.well-known/oauth-protected-resource/mcp/notes", NULL, &rep);
	ck_assert_int_eq(rep.status, 200);
	ck_assert_int_eq(rep.cache_max_age, 300);
	json_t *v = json_of(&rep);
	json_t *want = json_pack("{s:s, s:[s], s:[s,s], s:[s], s:s}",
	    "resource", PUBLIC_URL "/mcp/notes", "authorization_servers", PUBLIC_URL,
	    "scopes_supported", "read", "write", "bearer_methods_supported", "header",
	    "resource_name", "Team notes");
	ck_assert_msg(json_equal(v, want), "%s", rep.body.data);
	json_decref(want);
	json_decref(v);
	reply_clear(&rep);

	/* Another endpoint: its own resource, its resource's scopes, the id as name. */
	call(HTTP_GET, "/.well-known/oauth-protected-resource/mcp/w-1", NULL, &rep);
	ck_assert_int_eq(rep.status, 200);
	v = json_of(&rep);
	ck_assert_str_eq(json_string_value(json_object_get(v, "resource")), PUBLIC_URL "/mcp/w-1");
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(v, "scopes_supported"), 0)), "admin");
	ck_assert_int_eq(json_array_size(json_object_get(v, "scopes_supported")), 1);
	ck_assert_str_eq(json_string_value(json_object_get(v, "resource_name")), "wiki");
	json_decref(v);
	reply_clear(&rep);

	/* No such endpoint: 404, whatever the name looks like. */
	static const char *const bad[] = { "/.well-known/oauth-protected-resource/mcp/nothing",
		"/.well-known/oauth-protected-resource/mcp/NOTES",
		"/.well-known/oauth-protected-resource/mcp/..", "/.well-known/oauth-protected-resource", NULL };
	for (size_t i = 0; bad[i] != NULL; i++) {
		call(HTTP_GET, bad[i], NULL, &rep);
		ck_assert_msg(rep.status == 404, "%s: %d", bad[i], rep.status);
		reply_clear(&rep);
	}
}
END_TEST

START_TEST(test_mcp_api_challenge)
{
	static const enum http_method methods[] = { HTTP_POST, HTTP_GET, HTTP_DELETE };
	struct http_reply rep;
	for (size_t i = 0; i < 3; i++) {
		call(methods[i], "/mcp/notes", NULL, &rep);
		ck_assert_int_eq(rep.status, 401);
		ck_assert_str_eq(hdr(&rep, "WWW-Authenticate"),
		    "Bearer resource_metadata=\"" PRM_NOTES "\", scope=\"read write\"");
		json_t *v = json_of(&rep);
		ck_assert_str_eq(json_string_value(json_object_get(v, "jsonrpc")), "2.0");
		ck_assert(json_is_null(json_object_get(v, "id")));
		ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(v, "error"), "code")), -32001);
		json_decref(v);
		reply_clear(&rep);

		call(methods[i], "/mcp/nothing", NULL, &rep);
		ck_assert_int_eq(rep.status, 404);
		ck_assert_ptr_null(hdr(&rep, "WWW-Authenticate"));
		reply_clear(&rep);
	}
	call(HTTP_PUT, "/mcp/notes", NULL, &rep);
	ck_assert_int_eq(rep.status, 405);
	reply_clear(&rep);
}
END_TEST

START_TEST(test_mcp_api_every_credential_refused)
{
	static const char *const creds[] = { "Bearer x", "Bearer eyJhbGciOiJFUzI1NiJ9.e30.sig",
		"DPoP eyJhbGciOiJFUzI1NiJ9.e30.sig", "Basic YTpi", "", NULL };
	struct http_reply rep;
	for (size_t i = 0; creds[i] != NULL; i++) {
		call(HTTP_POST, "/mcp/notes", creds[i], &rep);
		ck_assert_msg(rep.status == 401, "%s: %d", creds[i], rep.status);
		/* The gateway (issue #31) names the failing check; whatever it is,
		 * the challenge says invalid_token and where to sign in. */
		const char *w = hdr(&rep, "WWW-Authenticate");
		static const char head[] = "Bearer error=\"invalid_token\", error_description=\"";
		static const char tail[] = "\", resource_metadata=\"" PRM_NOTES "\", scope=\"read write\"";
		ck_assert_msg(w != NULL && strncmp(w, head, sizeof head - 1) == 0, "%s: %s", creds[i], w);
		ck_assert_msg(strlen(w) > sizeof head + sizeof tail &&
		    strcmp(w + strlen(w) - (sizeof tail - 1), tail) == 0, "%s: %s", creds[i], w);
		ck_assert_str_eq(rep.log.error, "invalid_token");
		reply_clear(&rep);
	}
}
END_TEST

/* The RFC 8414 fields of MCP clients (metadata.test.js holds each to behaviour). */
static json_t *as_metadata(void)
{
	struct http_reply rep;
	call(HTTP_GET, "/.well-known/oauth-authorization-server", NULL, &rep);
	ck_assert_int_eq(rep.status, 200);
	json_t *v = json_of(&rep);
	reply_clear(&rep);
	return v;
}

START_TEST(test_mcp_api_as_metadata)
{
	json_t *v = as_metadata();
	ck_assert_str_eq(json_string_value(json_object_get(v, "authorization_endpoint")), PUBLIC_URL "/authorize");
	json_t *want = json_pack("{s:[s], s:[s], s:b, s:b, s:[s,s,s], s:[s,s,s,s], s:[s], s:[s,s,s]}",
	    "response_types_supported", "code", "code_challenge_methods_supported", "S256",
	    "authorization_response_iss_parameter_supported", 1,
	    "client_id_metadata_document_supported", 1,
	    "token_endpoint_auth_methods_supported", "client_secret_basic", "none", "private_key_jwt",
	    "grant_types_supported", "urn:ietf:params:oauth:grant-type:token-exchange", "refresh_token",
	    "authorization_code", "urn:ietf:params:oauth:grant-type:jwt-bearer",
	    "introspection_endpoint_auth_methods_supported", "client_secret_basic",
	    "revocation_endpoint_auth_methods_supported", "client_secret_basic", "none",
	    "private_key_jwt");
	const char *k;
	json_t *w;
	json_object_foreach(want, k, w)
		ck_assert_msg(json_equal(json_object_get(v, k), w), "%s", k);
	ck_assert(json_is_array(json_object_get(v, "token_endpoint_auth_signing_alg_values_supported")));
	ck_assert(json_is_array(json_object_get(v, "revocation_endpoint_auth_signing_alg_values_supported")));
	ck_assert_ptr_null(json_object_get(v, "introspection_endpoint_auth_signing_alg_values_supported"));
	ck_assert_ptr_null(json_object_get(v, "registration_endpoint"));
	json_decref(want);
	json_decref(v);
}
END_TEST

START_TEST(test_mcp_api_as_metadata_without_cimd)
{
	json_t *v = as_metadata();
	ck_assert_ptr_null(json_object_get(v, "client_id_metadata_document_supported"));
	ck_assert_str_eq(json_string_value(json_object_get(v, "authorization_endpoint")), PUBLIC_URL "/authorize");
	json_decref(v);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("mcp_api");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_mcp_api_protected_resource_metadata);
	tcase_add_test(tc, test_mcp_api_challenge);
	tcase_add_test(tc, test_mcp_api_every_credential_refused);
	tcase_add_test(tc, test_mcp_api_as_metadata);
	suite_add_tcase(s, tc);
	TCase *none = tcase_create("cimd_none");
	tcase_add_checked_fixture(none, setup_no_cimd, teardown);
	tcase_add_test(none, test_mcp_api_as_metadata_without_cimd);
	suite_add_tcase(s, none);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
