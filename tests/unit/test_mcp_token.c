/* test_mcp_token.c -- the token endpoint for MCP clients (mcp_token.c, and
 * token_api.c's dispatch and gate), through the real route table without a
 * socket: router_dispatch over a real app (app_init) and a real SQLite store.
 * Codes are put in with store_authz_code_put, as the authorization leg will;
 * private_key_jwt and DPoP use the jose-made vectors (jws_vectors.h), so
 * public_url is https://consent.example.com and the clock is V_NOW.  The
 * attacker's side first: a replayed code (and what its first use issued
 * revoked), a wrong or missing PKCE verifier, a redirect_uri mismatch,
 * another client redeeming the code, an expired code, a token for resource A
 * refreshed for B, a reused refresh token, a replayed client assertion,
 * another client's revocation. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <jansson.h>
#include <sqlite3.h>
#include <openssl/sha.h>

#include "testutil.h"
#include "tu_consent.h"
#include "jws_vectors.h"
#include "app.h"
#include "b64.h"
#include "config.h"
#include "consent.h"
#include "grant.h"
#include "http.h"
#include "session.h"
#include "store.h"
#include "store_authz.h"
#include "store_user.h"

#define PUBLIC_URL "https://consent.example.com"
#define ISS "https://idp.example.com"
#define URI_A PUBLIC_URL "/mcp/notes"
#define URI_B PUBLIC_URL "/mcp/notes-too"
#define REDIRECT "http://127.0.0.1:4242/cb"
#define VERIFIER "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk-and-some-more-bytes"
/* the-gateway:gateway-secret-0123456789 */
#define GATEWAY_BASIC "Basic dGhlLWdhdGV3YXk6Z2F0ZXdheS1zZWNyZXQtMDEyMzQ1Njc4OQ=="
#define FORM_CT "application/x-www-form-urlencoded"
#define NOW V_NOW

static char *dir, *db;
static struct config *cfg;
static struct app app;
static struct store_conn *sc;

static void setup(void)
{
	char text[4096];
	dir = tu_tmpdir();
	db = tu_path(dir, "t.db");
	char *key = tu_path(dir, "master.key"), *jwks = tu_path(dir, "pk.jwks");
	ck_assert_int_eq(master_key_create_file(key), CS_OK);
	FILE *f = fopen(jwks, "w");
	ck_assert_ptr_nonnull(f);
	fputs(V_JWKS, f);
	fclose(f);
	/* [client.pk] has the jose vectors' client id (their assertions' iss and
	 * sub), so the gateway is named otherwise here. */
	enum cs_err fe = str_fmt(text, sizeof text,
	    "[server]\npublic_url = " PUBLIC_URL "\n"
	    "[database]\npath = %s\n"
	    "[keys]\nmaster_key_file = %s\n"
	    "[oidc]\nissuer = " ISS "\nclient_id = consentd\nclient_secret = oidc-secret\n"
	    "[gateway]\nid = the-gateway\nclient_secret = gateway-secret-0123456789\n"
	    "[agent.coder]\nallow = notes:read\n"
	    "[resource.notes]\nmax_consent = 86400\n[scope.notes.read]\n[scope.notes.write]\n"
	    "[mcp]\ncimd_allow = none\n"
	    "[mcp.notes]\nresource = notes\n[mcp.notes-too]\nresource = notes\n"
	    "[client.ide]\nname = IDE\nredirect_uris = http://127.0.0.1/cb\n"
	    "[client.other]\nredirect_uris = http://127.0.0.1/cb\n"
	    "[client.pk]\nclient_id = agent-gateway\nredirect_uris = https://pk.example/cb\n"
	    "token_endpoint_auth = private_key_jwt\njwks_file = %s\n", db, key, jwks);
	ck_assert_int_eq(fe, CS_OK);
	free(key);
	free(jwks);
	ck_assert_int_eq(config_load_string(text, strlen(text), "x.conf", NULL, stderr, &cfg), CS_OK);
	ck_assert_int_eq(app_init(&app, cfg), CS_OK);
	sc = store_conn(app.store);
	ck_assert_ptr_nonnull(sc);
}

static json_t *last;                 /* the last reply's JSON */
static int last_status;

static void teardown(void)
{
	json_decref(last);
	last = NULL;
	app_clear(&app);
	config_free(cfg);
	free(db);
	tu_rmdir(dir);
}

/* --- requests and replies ------------------------------------------------- */

static const char *dpop_header;      /* the DPoP header of the next request, or NULL */

static const char *header_of(void *hctx, const char *name)
{
	(void)hctx;
	return strcasecmp(name, "DPoP") == 0 ? dpop_header : NULL;
}

/* POSTs body (a form) to path as an MCP client would (no Authorization),
 * or with authorization; keeps the status and the JSON. */
static void post_as(const char *path, const char *authorization, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void post_as(const char *path, const char *authorization, const char *fmt, ...)
{
	char bodybuf[8192];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(bodybuf, sizeof bodybuf, fmt, ap);
	va_end(ap);
	ck_assert(n > 0 && (size_t)n < sizeof bodybuf);
	struct http_request r;
	struct http_reply rep;
	memset(&r, 0, sizeof r);
	r.method = HTTP_POST;
	r.path = path;
	r.query = "";
	r.app = &app;
	r.now = NOW;
	r.header = header_of;
	r.authorization = authorization;
	r.content_type = FORM_CT;
	r.body = bodybuf;
	r.body_len = strlen(bodybuf);
	memcpy(r.remote_ip, "127.0.0.1", 10);
	memcpy(r.request_id, "test", 5);
	reply_init(&rep);
	router_dispatch(http_routes, &r, &rep);
	json_decref(last);
	json_error_t err;
	last = json_loads(rep.body.data ? rep.body.data : "", 0, &err);
	ck_assert_msg(last != NULL, "not JSON (%d): %s", rep.status, rep.body.data);
	last_status = rep.status;
	reply_clear(&rep);
	http_request_clear(&r);
	dpop_header = NULL;
}
#define post(...) post_as("/token", NULL, __VA_ARGS__)

static const char *jstr(const char *k)
{
	json_t *v = json_object_get(last, k);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* The last reply was status with error and (when desc) this description. */
static void refused(int status, const char *error, const char *desc)
{
	char *s = json_dumps(last, 0);
	ck_assert_msg(last_status == status, "status %d, want %d: %s", last_status, status, s);
	ck_assert_str_eq(jstr("error"), error);
	if (desc != NULL)
		ck_assert_str_eq(jstr("error_description"), desc);
	free(s);
}

static void ok200(void)
{
	char *s = json_dumps(last, 0);
	ck_assert_msg(last_status == 200, "status %d: %s", last_status, s);
	free(s);
}

static int64_t count(const char *sql)
{
	sqlite3 *raw;
	sqlite3_stmt *st;
	int64_t n = -1;
	ck_assert_int_eq(sqlite3_open_v2(db, &raw, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(raw, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(raw);
	return n;
}

/* --- the scene: a consent and a code, as the authorization leg leaves them -- */

/* The live consent of alice for client, or NULL. */
static char *live_consent(const char *client)
{
	sqlite3 *raw;
	sqlite3_stmt *st;
	char *id = NULL;
	ck_assert_int_eq(sqlite3_open_v2(db, &raw, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "SELECT id FROM consents WHERE agent = ?1 AND "
	    "revoked_at = 0", -1, &st, NULL), SQLITE_OK);
	sqlite3_bind_text(st, 1, client, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		id = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(raw);
	return id;
}

/* alice's consent for client on notes (offline), made the way a person makes
 * one, or the live one she gave already. */
static char *consent_for(const char *client, bool offline, int64_t *uid)
{
	char *have = live_consent(client);
	if (have != NULL) {
		*uid = count("SELECT id FROM users WHERE subject = 'alice'");
		return have;
	}
	struct scope_set want = { .n = 0 };
	struct consent_answer a;
	struct consent_decision d;
	char *kid = NULL;
	memset(&a, 0, sizeof a);
	ck_assert_int_eq(scope_set_parse("read write", &want), CS_OK);
	ck_assert_int_eq(tu_exchange(sc, cfg, ISS, "alice", client, "notes", &want, NULL, "user:alice",
	    NOW, &a), CS_OK);
	ck_assert_int_eq(a.outcome, CONSENT_REQUIRED);
	memset(&d, 0, sizeof d);
	d.approve = true;
	d.selected = want;
	d.duration = 3600;
	d.offline = offline;
	*uid = count("SELECT id FROM users WHERE subject = 'alice'");
	tu_decision_version(sc, a.request_id, &d);
	ck_assert_int_eq(tu_decide(sc, cfg, a.request_id, *uid, &d, "user:alice", NOW, &kid), CS_OK);
	consent_answer_clear(&a);
	scope_set_clear(&want);
	return kid;
}

/* The S256 challenge of v. */
static void challenge_of(const char *v, char out[64])
{
	unsigned char h[SHA256_DIGEST_LENGTH];
	SHA256((const unsigned char *)v, strlen(v), h);
	ck_assert_int_eq(b64url_encode(h, sizeof h, out, 64), CS_OK);
}

/* A code (written to code, 43 characters) for client, redirect REDIRECT,
 * resource URI_A, scope "read write", expiring at NOW + ttl, bound to jkt. */
static char *seed_code(const char *client, const char *redirect, const char *jkt, int64_t ttl,
    char code[SESSION_TOKEN_LEN + 1])
{
	int64_t uid = 0;
	char chal[64];
	unsigned char h[STORE_AUTHZ_CODE_HASH_LEN];
	char *kid = consent_for(client, true, &uid);
	challenge_of(VERIFIER, chal);
	ck_assert_int_eq(random_token(code), CS_OK);
	sha256_str(code, h);
	struct store_authz_code row = { .request_id = "req0000000000000000000", .client_id =
		(char *)client, .redirect_uri = (char *)redirect, .code_challenge = chal,
		.resource = URI_A, .scope = "read write", .consent_id = kid, .dpop_jkt = (char *)jkt,
		.user_id = uid, .created_at = NOW, .expires_at = NOW + ttl };
	ck_assert_int_eq(store_authz_code_put(sc, h, &row), CS_OK);
	return kid;
}

static void redeem(const char *client, const char *code, const char *redirect,
    const char *verifier, const char *resource)
{
	post("grant_type=authorization_code&client_id=%s&code=%s&redirect_uri=%s&code_verifier=%s"
	    "&resource=%s", client, code, redirect, verifier, resource);
}

static bool valid_for(const char *token, const char *audience, const char **why)
{
	struct grant_check gc;
	const struct keyring *kr = app_keys_get(&app);
	ck_assert_int_eq(grant_validate_mcp(sc, cfg, kr, token, audience, NOW + 1, &gc), CS_OK);
	app_keys_put(&app);
	bool ok = gc.valid;
	if (why != NULL)
		*why = gc.why;
	grant_check_clear(&gc);
	return ok;
}

/* --- authorization_code -------------------------------------------------- */

START_TEST(test_mcp_token_code_then_refresh)
{
	char code[SESSION_TOKEN_LEN + 1];
	char *kid = seed_code("ide", REDIRECT, NULL, 60, code);
	redeem("ide", code, REDIRECT, VERIFIER, URI_A);
	ok200();
	ck_assert_str_eq(jstr("token_type"), "Bearer");
	ck_assert_str_eq(jstr("scope"), "read write");
	ck_assert_int_eq(json_integer_value(json_object_get(last, "expires_in")), 300);
	ck_assert_ptr_nonnull(jstr("refresh_token"));
	char *at = strdup(jstr("access_token")), *rt = strdup(jstr("refresh_token"));
	ck_assert(valid_for(at, URI_A, NULL));
	const char *why;
	ck_assert(!valid_for(at, URI_B, &why));
	ck_assert_str_eq(why, "not an access token for this resource");
	/* The family recorded on the code. */
	ck_assert_int_eq(count("SELECT count(*) FROM authz_codes WHERE used_at > 0 AND family_id "
	    "IS NOT NULL"), 1);
	/* Refresh: resource required, and only A's. */
	post("grant_type=refresh_token&client_id=ide&refresh_token=%s", rt);
	refused(400, "invalid_request", "resource is missing (RFC 8707: the MCP endpoint the "
	    "refresh token was issued for)");
	post("grant_type=refresh_token&client_id=ide&refresh_token=%s&resource=%s", rt, URI_B);
	refused(400, "invalid_target", "resource is not the one the refresh token was issued for");
	post("grant_type=refresh_token&client_id=other&refresh_token=%s&resource=%s", rt, URI_A);
	refused(400, "invalid_grant", "the refresh token is unknown");
	post("grant_type=refresh_token&client_id=ide&refresh_token=%s&resource=%s&scope=read%%20admin",
	    rt, URI_A);
	refused(400, "invalid_scope", "scope is outside the consent");
	post("grant_type=refresh_token&client_id=ide&refresh_token=%s&resource=%s&scope=read", rt,
	    URI_A);
	ok200();
	ck_assert_str_eq(jstr("scope"), "read");
	char *at2 = strdup(jstr("access_token"));
	ck_assert(valid_for(at2, URI_A, NULL));
	/* The used refresh token again: the family dies, the new access token with it. */
	post("grant_type=refresh_token&client_id=ide&refresh_token=%s&resource=%s", rt, URI_A);
	refused(400, "invalid_grant", NULL);
	ck_assert_ptr_nonnull(strstr(jstr("error_description"), "reuse detected"));
	ck_assert(!valid_for(at2, URI_A, &why));
	ck_assert_str_eq(why, "grant revoked");
	free(at);
	free(at2);
	free(rt);
	free(kid);
}
END_TEST

START_TEST(test_mcp_token_code_replayed_revokes_first_use)
{
	char code[SESSION_TOKEN_LEN + 1];
	char *kid = seed_code("ide", REDIRECT, NULL, 60, code);
	redeem("ide", code, REDIRECT, VERIFIER, URI_A);
	ok200();
	char *at = strdup(jstr("access_token")), *rt = strdup(jstr("refresh_token"));
	redeem("ide", code, REDIRECT, VERIFIER, URI_A);
	refused(400, "invalid_grant", "the code was used before: the tokens its first use issued "
	    "are now revoked (OAuth 2.1 §4.1.3)");
	const char *why;
	ck_assert(!valid_for(at, URI_A, &why));
	ck_assert_str_eq(why, "grant revoked");
	post("grant_type=refresh_token&client_id=ide&refresh_token=%s&resource=%s", rt, URI_A);
	refused(400, "invalid_grant", NULL);
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE action = 'authz.code_reused' AND "
	    "actor = 'client:ide'"), 1);
	/* The consent itself stays: the person's decision was not the thief's. */
	ck_assert_int_eq(count("SELECT count(*) FROM consents WHERE revoked_at = 0"), 1);
	free(at);
	free(rt);
	free(kid);
}
END_TEST

/* Without an offline consent (or a client that may not refresh) there is no
 * refresh token, and a replay still revokes the access token. */
START_TEST(test_mcp_token_code_replayed_no_refresh)
{
	char code[SESSION_TOKEN_LEN + 1];
	char *kid = seed_code("ide", REDIRECT, NULL, 60, code);
	sqlite3 *raw;
	ck_assert_int_eq(sqlite3_open(db, &raw), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(raw, "UPDATE consents SET offline = 0", NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(raw);
	redeem("ide", code, REDIRECT, VERIFIER, URI_A);
	ok200();
	ck_assert_ptr_null(jstr("refresh_token"));
	char *at = strdup(jstr("access_token"));
	redeem("ide", code, REDIRECT, VERIFIER, URI_A);
	refused(400, "invalid_grant", NULL);
	ck_assert(!valid_for(at, URI_A, NULL));
	free(at);
	free(kid);
}
END_TEST

START_TEST(test_mcp_token_code_checks)
{
	char c1[SESSION_TOKEN_LEN + 1], c2[SESSION_TOKEN_LEN + 1], c3[SESSION_TOKEN_LEN + 1];
	char c4[SESSION_TOKEN_LEN + 1], c5[SESSION_TOKEN_LEN + 1], c6[SESSION_TOKEN_LEN + 1];
	char *k1 = seed_code("ide", REDIRECT, NULL, 60, c1);
	/* Missing parameters are named, and burn nothing. */
	post("grant_type=authorization_code&client_id=ide&code=%s&redirect_uri=%s&resource=%s", c1,
	    REDIRECT, URI_A);
	refused(400, "invalid_request", "code_verifier is missing (PKCE is required)");
	post("grant_type=authorization_code&client_id=ide&code=%s&code_verifier=%s&resource=%s", c1,
	    VERIFIER, URI_A);
	refused(400, "invalid_request", "redirect_uri is missing (the one the code was issued to)");
	post("grant_type=authorization_code&client_id=ide&code=%s&redirect_uri=%s&code_verifier=%s",
	    c1, REDIRECT, VERIFIER);
	refused(400, "invalid_request", "resource is missing (RFC 8707: the MCP endpoint the code "
	    "was issued for)");
	/* PKCE: a wrong verifier (and a downgrade to the challenge itself, as plain would). */
	redeem("ide", c1, REDIRECT, VERIFIER "x", URI_A);
	refused(400, "invalid_grant", "code_verifier does not match the code's code_challenge "
	    "(PKCE S256)");
	/* The code is burnt by the failed attempt: the right verifier comes too late. */
	redeem("ide", c1, REDIRECT, VERIFIER, URI_A);
	refused(400, "invalid_grant", NULL);
	ck_assert_ptr_nonnull(strstr(jstr("error_description"), "used before"));
	char chal[64];
	challenge_of(VERIFIER, chal);
	char *k2 = seed_code("ide", REDIRECT, NULL, 60, c2);
	redeem("ide", c2, REDIRECT, chal, URI_A);
	refused(400, "invalid_grant", "code_verifier does not match the code's code_challenge "
	    "(PKCE S256)");
	/* redirect_uri: another port is another URI here (exact, as issued). */
	char *k3 = seed_code("ide", REDIRECT, NULL, 60, c3);
	redeem("ide", c3, "http://127.0.0.1:4243/cb", VERIFIER, URI_A);
	refused(400, "invalid_grant", "redirect_uri is not the one the code was issued to");
	/* Another client redeeming ide's code. */
	char *k4 = seed_code("ide", REDIRECT, NULL, 60, c4);
	redeem("other", c4, REDIRECT, VERIFIER, URI_A);
	refused(400, "invalid_grant", "the code was issued to another client");
	/* Another resource than the code's. */
	char *k5 = seed_code("ide", REDIRECT, NULL, 60, c5);
	redeem("ide", c5, REDIRECT, VERIFIER, URI_B);
	refused(400, "invalid_target", "resource is not the one the code was issued for");
	/* Expired, and unknown. */
	char *k6 = seed_code("ide", REDIRECT, NULL, -1, c6);
	redeem("ide", c6, REDIRECT, VERIFIER, URI_A);
	refused(400, "invalid_grant", "the code expired");
	redeem("ide", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", REDIRECT, VERIFIER, URI_A);
	refused(400, "invalid_grant", "the code is unknown");
	/* None of it issued anything. */
	ck_assert_int_eq(count("SELECT count(*) FROM grants"), 0);
	ck_assert_int_eq(count("SELECT count(*) FROM refresh_tokens"), 0);
	free(k1);
	free(k2);
	free(k3);
	free(k4);
	free(k5);
	free(k6);
}
END_TEST

/* Revoking the consent (on /me, or an admin) ends what the code issued at once. */
START_TEST(test_mcp_token_consent_revoked)
{
	char code[SESSION_TOKEN_LEN + 1], c2[SESSION_TOKEN_LEN + 1];
	char *kid = seed_code("ide", REDIRECT, NULL, 60, code);
	redeem("ide", code, REDIRECT, VERIFIER, URI_A);
	ok200();
	char *at = strdup(jstr("access_token")), *rt = strdup(jstr("refresh_token"));
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "test", NOW, false), CS_OK);
	ck_assert(!valid_for(at, URI_A, NULL));
	post("grant_type=refresh_token&client_id=ide&refresh_token=%s&resource=%s", rt, URI_A);
	refused(400, "invalid_grant", "the refresh token's consent was revoked");
	/* A code whose consent was revoked before its redemption issues nothing. */
	char *k2 = seed_code("ide", REDIRECT, NULL, 60, c2);
	ck_assert_int_eq(tu_revoke(sc, k2, 0, "user:alice", "revoked on /me", NOW, false), CS_OK);
	redeem("ide", c2, REDIRECT, VERIFIER, URI_A);
	refused(400, "invalid_grant", "the code's consent was revoked");
	free(at);
	free(rt);
	free(kid);
	free(k2);
}
END_TEST

/* --- client authentication ------------------------------------------------ */

START_TEST(test_mcp_token_client_auth)
{
	char code[SESSION_TOKEN_LEN + 1];
	char *kid = seed_code("agent-gateway", "https://pk.example/cb", NULL, 60, code);
	/* Unknown client. */
	redeem("nobody", code, REDIRECT, VERIFIER, URI_A);
	refused(401, "invalid_client", NULL);
	ck_assert_ptr_nonnull(strstr(jstr("error_description"), "client_id"));
	/* A public client with an assertion. */
	post("grant_type=authorization_code&client_id=ide&code=x&redirect_uri=%s&code_verifier=%s"
	    "&resource=%s&client_assertion_type=urn:ietf:params:oauth:client-assertion-type:"
	    "jwt-bearer&client_assertion=%s", REDIRECT, VERIFIER, URI_A, V_ASSERT_ES);
	refused(401, "invalid_client", "the client is registered as public "
	    "(token_endpoint_auth_method none): it sends no client assertion");
	/* private_key_jwt without an assertion, with a forged one, then its own. */
	redeem("agent-gateway", code, "https://pk.example/cb", VERIFIER, URI_A);
	refused(401, "invalid_client", "client assertion: the client uses private_key_jwt: "
	    "client_assertion_type must be urn:ietf:params:oauth:client-assertion-type:jwt-bearer "
	    "with a client_assertion");
	post("grant_type=authorization_code&client_id=agent-gateway&code=%s&redirect_uri=%s"
	    "&code_verifier=%s&resource=%s&client_assertion_type=urn:ietf:params:oauth:"
	    "client-assertion-type:jwt-bearer&client_assertion=%s", code, "https://pk.example/cb",
	    VERIFIER, URI_A, V_ASSERT_NONE);
	refused(401, "invalid_client", NULL);
	ck_assert_int_eq(count("SELECT count(*) FROM authz_codes WHERE used_at > 0"), 0);
	post("grant_type=authorization_code&client_id=agent-gateway&code=%s&redirect_uri=%s"
	    "&code_verifier=%s&resource=%s&client_assertion_type=urn:ietf:params:oauth:"
	    "client-assertion-type:jwt-bearer&client_assertion=%s", code, "https://pk.example/cb",
	    VERIFIER, URI_A, V_ASSERT_ES);
	ok200();
	/* The same assertion again: its jti was used. */
	post("grant_type=refresh_token&client_id=agent-gateway&refresh_token=%s&resource=%s"
	    "&client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
	    "&client_assertion=%s", jstr("refresh_token"), URI_A, V_ASSERT_ES);
	refused(401, "invalid_client", "client assertion: the assertion's jti was used before");
	free(kid);
}
END_TEST

/* The gateway's requests still go to the gateway: Basic, or its own id. */
START_TEST(test_mcp_token_gateway_untouched)
{
	post_as("/token", GATEWAY_BASIC, "grant_type=authorization_code&client_id=ide&code=x");
	refused(400, "unsupported_grant_type", "grant_type must be token-exchange or refresh_token");
	post("grant_type=authorization_code&client_id=the-gateway&code=x");
	refused(401, "invalid_client", NULL);
	post("grant_type=password&client_id=ide");
	refused(400, "unsupported_grant_type", "grant_type must be authorization_code, "
	    "refresh_token or urn:ietf:params:oauth:grant-type:jwt-bearer for an MCP client");
}
END_TEST

/* --- DPoP ------------------------------------------------------------------ */

START_TEST(test_mcp_token_dpop)
{
	char c1[SESSION_TOKEN_LEN + 1], c2[SESSION_TOKEN_LEN + 1];
	/* A code bound to a key (RFC 9449 §10): no proof is refused (and burns it). */
	char *k1 = seed_code("ide", REDIRECT, V_JKT_ES, 60, c1);
	redeem("ide", c1, REDIRECT, VERIFIER, URI_A);
	refused(400, "invalid_dpop_proof", "the code is bound to a DPoP key (dpop_jkt): a DPoP "
	    "proof is required");
	/* With the proof: a DPoP-bound token and refresh family. */
	char *k2 = seed_code("ide", REDIRECT, V_JKT_ES, 60, c2);
	dpop_header = V_PROOF_ES;
	redeem("ide", c2, REDIRECT, VERIFIER, URI_A);
	ok200();
	ck_assert_str_eq(jstr("token_type"), "DPoP");
	char *rt = strdup(jstr("refresh_token"));
	json_t *cl = NULL;
	const struct keyring *kr = app_keys_get(&app);
	ck_assert_int_eq(jwt_verify(kr, "at+jwt", jstr("access_token"), &cl), CS_OK);
	app_keys_put(&app);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(cl, "cnf"), "jkt")),
	    V_JKT_ES);
	json_decref(cl);
	/* The family needs the key: without a proof, refused and nothing used up. */
	post("grant_type=refresh_token&client_id=ide&refresh_token=%s&resource=%s", rt, URI_A);
	refused(400, "invalid_dpop_proof", "the refresh token is DPoP-bound: a DPoP proof is required");
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE action = 'dpop.refused'"), 2);
	free(rt);
	free(k1);
	free(k2);
}
END_TEST

START_TEST(test_mcp_token_require_dpop)
{
	char code[SESSION_TOKEN_LEN + 1];
	((struct config *)cfg)->mcp_require_dpop = true;
	char *kid = seed_code("ide", REDIRECT, NULL, 60, code);
	redeem("ide", code, REDIRECT, VERIFIER, URI_A);
	refused(400, "invalid_dpop_proof", "a DPoP proof is required of public clients "
	    "([mcp] require_dpop)");
	/* Refused before the take: the code still works with a proof. */
	dpop_header = V_PROOF_ES;
	redeem("ide", code, REDIRECT, VERIFIER, URI_A);
	ok200();
	ck_assert_str_eq(jstr("token_type"), "DPoP");
	free(kid);
}
END_TEST

/* --- revocation and introspection --------------------------------------- */

START_TEST(test_mcp_token_revoke_and_introspect)
{
	char code[SESSION_TOKEN_LEN + 1];
	char *kid = seed_code("ide", REDIRECT, NULL, 60, code);
	redeem("ide", code, REDIRECT, VERIFIER, URI_A);
	ok200();
	char *at = strdup(jstr("access_token")), *rt = strdup(jstr("refresh_token"));
	/* The gateway's introspection answers the client's token with its aud and client. */
	post_as("/introspect", GATEWAY_BASIC, "token=%s", at);
	ok200();
	ck_assert(json_is_true(json_object_get(last, "active")));
	ck_assert_str_eq(jstr("aud"), URI_A);
	ck_assert_str_eq(jstr("client_id"), "ide");
	/* Another client revoking it: 200, and nothing happens. */
	post_as("/revoke", NULL, "client_id=other&token=%s", at);
	ok200();
	post_as("/revoke", NULL, "client_id=other&token=%s", rt);
	ok200();
	ck_assert(valid_for(at, URI_A, NULL));
	/* An unknown client is refused. */
	post_as("/revoke", NULL, "client_id=nobody&token=%s", at);
	refused(401, "invalid_client", NULL);
	/* The holder. */
	post_as("/revoke", NULL, "client_id=ide&token=%s", at);
	ok200();
	ck_assert(!valid_for(at, URI_A, NULL));
	post_as("/revoke", NULL, "client_id=ide&token=%s", rt);
	ok200();
	post_as("/introspect", GATEWAY_BASIC, "token=%s", rt);
	ck_assert(json_is_false(json_object_get(last, "active")));
	free(at);
	free(rt);
	free(kid);
}
END_TEST

static Suite *mcp_token_suite(void)
{
	Suite *s = suite_create("mcp_token");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_mcp_token_code_then_refresh);
	tcase_add_test(tc, test_mcp_token_code_replayed_revokes_first_use);
	tcase_add_test(tc, test_mcp_token_code_replayed_no_refresh);
	tcase_add_test(tc, test_mcp_token_code_checks);
	tcase_add_test(tc, test_mcp_token_consent_revoked);
	tcase_add_test(tc, test_mcp_token_client_auth);
	tcase_add_test(tc, test_mcp_token_gateway_untouched);
	tcase_add_test(tc, test_mcp_token_dpop);
	tcase_add_test(tc, test_mcp_token_require_dpop);
	tcase_add_test(tc, test_mcp_token_revoke_and_introspect);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(mcp_token_suite());
}
