/* test_authorize_pages.c -- the authorization endpoint of MCP clients
 * (authorize_pages.c over authz_flow.c) through routes.c's real table, the
 * router and the real handlers over a real store and app, without a socket:
 * who hears a refusal (the person for a client or redirect URI consentd
 * cannot vouch for, the client for everything after), the request kept and
 * bound to one person, the consent asked through consentd's own consent
 * requests, the consent page's done step sent back to /authorize, and the
 * single code with iss and state.  The client-id URL leg with a real HTTPS
 * server is tests/integration/mcp_authorize.test.js. */
#include <pthread.h>
#include <string.h>
#include <openssl/sha.h>
#include <sqlite3.h>

#include "testutil.h"
#include "tu_consent.h"
#include "app.h"
#include "authz_flow.h"
#include "b64.h"
#include "config.h"
#include "consent.h"
#include "form.h"
#include "http.h"
#include "session.h"
#include "store.h"
#include "store_authz.h"
#include "store_user.h"

#define PUBLIC_URL "http://127.0.0.1:8080"
#define ISS "https://idp.example.com"
#define FORM_CT "application/x-www-form-urlencoded"
#define MCP_NOTES PUBLIC_URL "/mcp/notes"
#define CHALLENGE "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
#define JKT "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"

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
	    "[server]\npublic_url = " PUBLIC_URL "\n"
	    "[database]\npath = %s\n"
	    "[keys]\nmaster_key_file = %s\n"
	    "[oidc]\nissuer = " ISS "\nclient_id = consentd\nclient_secret = oidc-secret\n"
	    "[gateway]\nclient_secret = gateway-secret-0123456789\n"
	    "[agent.coder]\nallow = notes:read\n"
	    "[resource.notes]\nname = Team notes\nmax_consent = 86400\n"
	    "[scope.notes.read]\ndescription = Read your notes\n"
	    "[scope.notes.write]\ndescription = Edit your notes\n"
	    "[resource.wiki]\n[scope.wiki.read]\n"
	    "[client.ide]\nname = Example IDE\n"
	    "redirect_uris = http://127.0.0.1/callback https://ide.example/cb?x=1\n"
	    "[client.web]\nname = Web tool\nredirect_uris = https://web.example/cb\n"
	    "[mcp]\ncimd_allow = prefixes\ncimd_prefixes = https://tools.example/mcp/\n"
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

/* --- requests and replies ------------------------------------------------- */

static const char *no_header(void *hctx, const char *name)
{
	(void)hctx;
	(void)name;
	return NULL;
}

static void req_init(struct http_request *r, enum http_method m, const char *path,
    const char *query, const char *cookie)
{
	memset(r, 0, sizeof *r);
	r->method = m;
	r->path = path;
	r->query = query;
	r->app = &app;
	r->now = now;
	r->header = no_header;
	r->cookie = cookie;
	memcpy(r->remote_ip, "127.0.0.1", 10);
	memcpy(r->request_id, "test", 5);
}

static void get(struct http_reply *rep, const char *path, const char *query, const char *cookie)
{
	struct http_request req;
	req_init(&req, HTTP_GET, path, query, cookie);
	reply_init(rep);
	router_dispatch(http_routes, &req, rep);
	http_request_clear(&req);
}

static const char *body(const struct http_reply *rep)
{
	return rep->body.data ? rep->body.data : "";
}

static const char *location(const struct http_reply *rep)
{
	for (size_t i = 0; i < rep->nheaders; i++)
		if (strcasecmp(rep->headers[i].name, "Location") == 0)
			return rep->headers[i].value;
	return NULL;
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

/* A signed-in person: a Cookie header, the session's CSRF token, the user id. */
struct person {
	int64_t uid;
	char    cookie[128];
	char    csrf[SESSION_TOKEN_LEN + 1];
};

static void sign_in(const char *subject, struct person *p)
{
	char sid[SESSION_TOKEN_LEN + 1];
	struct session s;
	memset(&s, 0, sizeof s);
	ck_assert_int_eq(store_user_put(sc, &(struct store_user){ .issuer = ISS, .subject = subject,
	    .name = subject, .now = now, .login = true }, &p->uid), CS_OK);
	ck_assert_int_eq(session_create(sc, p->uid, now, false, now, sid), CS_OK);
	ck_assert_int_eq(str_fmt(p->cookie, sizeof p->cookie, "%s=%s", session_cookie_name(cfg), sid),
	    CS_OK);
	ck_assert_int_eq(session_from_cookie(sc, cfg, p->cookie, now, &s), CS_OK);
	memcpy(p->csrf, s.csrf, sizeof p->csrf);
	session_clear(&s);
}

/* A query from name/value pairs (NULL value: left out), percent-encoded,
 * into q (without the '?'). */
static void query(char *q, size_t qlen, const char *const *kv)
{
	struct buf b;
	buf_init(&b, 16384);
	ck_assert_int_eq(buf_puts(&b, "/x"), CS_OK);
	for (size_t i = 0; kv[i] != NULL; i += 2)
		if (kv[i + 1] != NULL)
			ck_assert_int_eq(form_url_param(&b, kv[i], kv[i + 1]), CS_OK);
	ck_assert_int_eq(str_fmt(q, qlen, "%s", b.data[2] == '?' ? b.data + 3 : ""), CS_OK);
	buf_clear(&b);
}

/* The usual request of client ide, with field name replaced by value (NULL:
 * left out), and extra pairs after it. */
static void authorize(struct http_reply *rep, const char *name, const char *value,
    const char *x1, const char *x2)
{
	const char *kv[] = { "response_type", "code", "client_id", "ide",
		"redirect_uri", "http://127.0.0.1:5555/callback", "state", "st-1",
		"code_challenge", CHALLENGE, "code_challenge_method", "S256",
		"resource", MCP_NOTES, "scope", "read write", x1, x2, NULL, NULL };
	char q[8192];
	if (x1 == NULL)
		kv[16] = NULL;
	for (size_t i = 0; name != NULL && kv[i] != NULL; i += 2)
		if (strcmp(kv[i], name) == 0)
			kv[i + 1] = value;
	query(q, sizeof q, kv);
	get(rep, "/authorize", q, NULL);
}

/* The request id of a 303 to /authorize/{id}, into id. */
static void request_id_of(const struct http_reply *rep, char id[STORE_AUTHZ_ID_LEN + 1])
{
	const char *l = location(rep);
	ck_assert_msg(rep->status == 303 && l != NULL, "%d %s", rep->status, body(rep));
	ck_assert_msg(strncmp(l, "/authorize/", 11) == 0 && strlen(l) == 11 + STORE_AUTHZ_ID_LEN,
	    "Location %s", l);
	memcpy(id, l + 11, STORE_AUTHZ_ID_LEN + 1);
}

/* A refusal to the person: an HTML page with status, naming why; never a
 * Location (the browser goes nowhere). */
static void assert_person(const struct http_reply *rep, int status, const char *why)
{
	ck_assert_msg(rep->status == status, "%d, want %d: %s", rep->status, status, body(rep));
	ck_assert_ptr_null(location(rep));
	ck_assert_ptr_nonnull(strstr(rep->content_type, "text/html"));
	ck_assert_msg(strstr(body(rep), why) != NULL, "'%s' not in %s", why, body(rep));
}

/* A refusal to the client: a 303 to the redirect URI with error, the
 * description (or a part of it) and state and iss. */
static void assert_client(const struct http_reply *rep, const char *redirect, const char *error,
    const char *why_part, const char *state)
{
	char want[512];
	const char *l = location(rep);
	ck_assert_msg(rep->status == 303 && l != NULL, "%d %s", rep->status, body(rep));
	ck_assert_msg(strncmp(l, redirect, strlen(redirect)) == 0, "Location %s", l);
	ck_assert_int_eq(str_fmt(want, sizeof want, "error=%s&error_description=", error), CS_OK);
	ck_assert_msg(strstr(l, want) != NULL, "%s not in %s", want, l);
	ck_assert_msg(strstr(l, why_part) != NULL, "%s not in %s", why_part, l);
	ck_assert_ptr_nonnull(strstr(l, "&iss=http%3A%2F%2F127.0.0.1%3A8080"));
	if (state != NULL) {
		ck_assert_int_eq(str_fmt(want, sizeof want, "&state=%s&", state), CS_OK);
		ck_assert_msg(strstr(l, want) != NULL, "%s not in %s", want, l);
	} else {
		ck_assert_ptr_null(strstr(l, "state="));
	}
	ck_assert_ptr_null(strstr(l, "code="));
}

/* --- GET /authorize --------------------------------------------------------- */

/* RFC 6749 §4.1.2.1: a client or redirect URI consentd cannot vouch for is
 * an error page, never a redirect -- an open redirector otherwise. */
/* The answer to an MCP client's consent form: a 200 page that moves on to
 * done by itself (a meta refresh) and links there, never a redirect: the
 * browser would hold a redirect after a form to the page's form-action. */
static void assert_continues(const struct http_reply *rep, const char *done)
{
	char refresh[200], link[200];
	ck_assert_msg(rep->status == 200, "%d %s", rep->status, body(rep));
	ck_assert_ptr_null(location(rep));
	ck_assert_int_eq(str_fmt(refresh, sizeof refresh, "content=\"0; url=%s\"", done), CS_OK);
	ck_assert_int_eq(str_fmt(link, sizeof link, "href=\"%s\"", done), CS_OK);
	ck_assert_msg(strstr(body(rep), refresh) != NULL, "%s", body(rep));
	ck_assert_msg(strstr(body(rep), link) != NULL, "%s", body(rep));
}

START_TEST(test_authorize_pages_refused_to_the_person)
{
	struct http_reply rep;
	authorize(&rep, "client_id", NULL, NULL, NULL);
	assert_person(&rep, 400, "client_id is missing");
	reply_clear(&rep);
	authorize(&rep, "client_id", "nobody", NULL, NULL);
	assert_person(&rep, 400, "client_id is not a registered client");
	reply_clear(&rep);
	/* A client-id URL outside the [mcp] policy's prefixes. */
	authorize(&rep, "client_id", "https://evil.example/mcp/client.json", NULL, NULL);
	assert_person(&rep, 400, "This sign-in cannot go on");
	reply_clear(&rep);
	/* Open redirect attempts: another host, a path beside the registered
	 * one, https on a registered loopback, the query changed. */
	static const char *const bad[] = { "https://evil.example/cb",
		"http://127.0.0.1:5555/callback/../evil", "https://127.0.0.1/callback",
		"https://ide.example/cb?x=2", "https://ide.example/cb", "http://localhost/callback",
		"https://ide.example/cb?x=1#f" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		authorize(&rep, "redirect_uri", bad[i], NULL, NULL);
		assert_person(&rep, 400, "redirect_uri");
		reply_clear(&rep);
	}
	/* Two registered: naming none is refused (which one would it be?). */
	authorize(&rep, "redirect_uri", NULL, NULL, NULL);
	assert_person(&rep, 400, "redirect_uri");
	reply_clear(&rep);
	ck_assert_int_eq(count("SELECT count(*) FROM authz_requests"), 0);
}
END_TEST

/* Once the redirect URI is known good, every refusal goes to the client with
 * state and iss: PKCE plain or missing, an unknown resource, a scope the
 * resource does not have, a bad dpop_jkt, another response type; nothing kept. */
START_TEST(test_authorize_pages_refused_to_the_client)
{
	struct http_reply rep;
	const char *cb = "http://127.0.0.1:5555/callback?";
	authorize(&rep, "code_challenge_method", "plain", NULL, NULL);
	assert_client(&rep, cb, "invalid_request", "S256", "st-1");
	reply_clear(&rep);
	authorize(&rep, "code_challenge", NULL, NULL, NULL);
	assert_client(&rep, cb, "invalid_request", "code_challenge", "st-1");
	reply_clear(&rep);
	authorize(&rep, "code_challenge_method", NULL, NULL, NULL);
	assert_client(&rep, cb, "invalid_request", "code_challenge_method", "st-1");
	reply_clear(&rep);
	authorize(&rep, "resource", "https://wiki.example/api", NULL, NULL);
	assert_client(&rep, cb, "invalid_target", "resource", "st-1");
	reply_clear(&rep);
	authorize(&rep, "resource", NULL, NULL, NULL);
	assert_client(&rep, cb, "invalid_target", "resource", "st-1");
	reply_clear(&rep);
	authorize(&rep, "scope", "read admin", NULL, NULL);
	assert_client(&rep, cb, "invalid_scope", "scope%20admin%20is%20not%20a%20scope", "st-1");
	reply_clear(&rep);
	authorize(&rep, "response_type", "token", NULL, NULL);
	assert_client(&rep, cb, "unsupported_response_type", "response_type", "st-1");
	reply_clear(&rep);
	authorize(&rep, NULL, NULL, "dpop_jkt", "not-a-thumbprint");
	assert_client(&rep, cb, "invalid_request", "dpop_jkt", "st-1");
	reply_clear(&rep);
	/* A state with a space is not echoed back. */
	authorize(&rep, "state", "a b", NULL, NULL);
	assert_client(&rep, cb, "invalid_request", "state", NULL);
	reply_clear(&rep);
	/* The registered redirect's own query is kept. */
	authorize(&rep, "redirect_uri", "https://ide.example/cb?x=1", "dpop_jkt", "x");
	assert_client(&rep, "https://ide.example/cb?x=1&error=", "invalid_request", "dpop_jkt", "st-1");
	reply_clear(&rep);
	ck_assert_int_eq(count("SELECT count(*) FROM authz_requests"), 0);
}
END_TEST

/* A valid request is kept (its loopback redirect on any port, RFC 8252 §7.3,
 * as sent), unknown parameters ignored (RFC 6749 §3.1), and the browser goes
 * to its page; without a scope it asks for every scope of the resource. */
START_TEST(test_authorize_pages_kept)
{
	struct http_reply rep;
	struct store_authz_request r;
	char id[STORE_AUTHZ_ID_LEN + 1];
	authorize(&rep, NULL, NULL, "dpop_jkt", JKT);
	request_id_of(&rep, id);
	reply_clear(&rep);
	ck_assert_int_eq(store_authz_request_get(sc, id, now, &r), CS_OK);
	ck_assert_str_eq(r.client_id, "ide");
	ck_assert_str_eq(r.redirect_uri, "http://127.0.0.1:5555/callback");
	ck_assert_str_eq(r.state, "st-1");
	ck_assert_str_eq(r.code_challenge, CHALLENGE);
	ck_assert_str_eq(r.resource, MCP_NOTES);
	ck_assert_str_eq(r.scope, "read write");
	ck_assert_str_eq(r.dpop_jkt, JKT);
	ck_assert_int_eq(r.user_id, 0);
	ck_assert(r.expires_at == now + AUTHZ_FLOW_REQUEST_TTL);
	store_authz_request_clear(&r);

	authorize(&rep, "scope", NULL, "prompt", "consent");
	request_id_of(&rep, id);
	reply_clear(&rep);
	ck_assert_int_eq(store_authz_request_get(sc, id, now, &r), CS_OK);
	ck_assert_ptr_null(r.scope);
	ck_assert_ptr_null(r.dpop_jkt);
	store_authz_request_clear(&r);

	/* A client with one https redirect may leave it out: that one is kept. */
	const char *kv[] = { "response_type", "code", "client_id", "web", "code_challenge", CHALLENGE,
		"code_challenge_method", "S256", "resource", MCP_NOTES, NULL, NULL };
	char q[2048];
	query(q, sizeof q, kv);
	get(&rep, "/authorize", q, NULL);
	request_id_of(&rep, id);
	reply_clear(&rep);
	ck_assert_int_eq(store_authz_request_get(sc, id, now, &r), CS_OK);
	ck_assert_str_eq(r.redirect_uri, "https://web.example/cb");
	ck_assert_ptr_null(r.state);
	store_authz_request_clear(&r);

	/* A repeated parameter is the router's 400 page, nothing kept. */
	get(&rep, "/authorize", "client_id=ide&client_id=web", NULL);
	assert_person(&rep, 400, "repeated");
	reply_clear(&rep);
	ck_assert_int_eq(count("SELECT count(*) FROM authz_requests"), 3);
}
END_TEST

/* --- the person's steps ----------------------------------------------------- */

/* The consent decision on request crid: approve (boxes "s0=on&s1=on") or
 * deny, by p -> the reply (the caller clears it). */
static void decide(struct http_reply *rep, const struct person *p, const char *crid,
    const char *how)
{
	struct http_request req;
	struct consent_decision d;
	char path[128], form[512];
	memset(&d, 0, sizeof d);
	tu_decision_version(sc, crid, &d);
	ck_assert_int_eq(str_fmt(path, sizeof path, "/consent/%s", crid), CS_OK);
	ck_assert_int_eq(str_fmt(form, sizeof form, "csrf=%s&version=%s&%s", p->csrf, d.version, how),
	    CS_OK);
	req_init(&req, HTTP_POST, path, "", p->cookie);
	req.content_type = FORM_CT;
	req.body = form;
	req.body_len = strlen(form);
	req.origin = PUBLIC_URL;
	req.sec_fetch_site = "same-origin";
	reply_init(rep);
	router_dispatch(http_routes, &req, rep);
	http_request_clear(&req);
}

/* /authorize/{id} by p -> the consent request id it sent p to, into crid. */
static void ask(const char *id, const struct person *p, char crid[64])
{
	struct http_reply rep;
	char path[64];
	ck_assert_int_eq(str_fmt(path, sizeof path, "/authorize/%s", id), CS_OK);
	get(&rep, path, "", p->cookie);
	const char *l = location(&rep);
	ck_assert_msg(rep.status == 303 && l != NULL && strncmp(l, "/consent/", 9) == 0, "%d %s %s",
	    rep.status, l ? l : "-", body(&rep));
	ck_assert_int_eq(str_fmt(crid, 64, "%s", l + 9), CS_OK);
	reply_clear(&rep);
}

/* The code in a 303 to the client, into code; checks iss and state. */
static void code_of(const struct http_reply *rep, char code[AUTHZ_FLOW_CODE_LEN + 1])
{
	const char *l = location(rep), *c;
	ck_assert_msg(rep->status == 303 && l != NULL, "%d %s", rep->status, body(rep));
	ck_assert_msg(strncmp(l, "http://127.0.0.1:5555/callback?code=", 36) == 0, "Location %s", l);
	c = l + 36;
	ck_assert_msg(strlen(c) > AUTHZ_FLOW_CODE_LEN && c[AUTHZ_FLOW_CODE_LEN] == '&', "%s", l);
	memcpy(code, c, AUTHZ_FLOW_CODE_LEN);
	code[AUTHZ_FLOW_CODE_LEN] = '\0';
	ck_assert_str_eq(c + AUTHZ_FLOW_CODE_LEN, "&state=st-1&iss=http%3A%2F%2F127.0.0.1%3A8080");
}

/* The whole way: signed out, the request's page signs in and comes back;
 * the consent request is consentd's own (agent = the client, resource = the
 * endpoint's resource), its page names the client; the decision goes back
 * to the done step, which issues one code (its hash stored, the request
 * used up) for the scopes granted, with state and iss. */
START_TEST(test_authorize_pages_code)
{
	struct http_reply rep;
	struct person alice, bob;
	struct consent_request cr;
	struct consent k;
	struct store_authz_code row;
	enum store_authz_take took;
	unsigned char hash[STORE_AUTHZ_CODE_HASH_LEN];
	char id[STORE_AUTHZ_ID_LEN + 1], crid[64], crid2[64], path[128], done[128], want[128];
	char code[AUTHZ_FLOW_CODE_LEN + 1], code2[AUTHZ_FLOW_CODE_LEN + 1];
	memset(&cr, 0, sizeof cr);
	memset(&k, 0, sizeof k);
	sign_in("alice", &alice);
	sign_in("bob", &bob);
	authorize(&rep, NULL, NULL, "dpop_jkt", JKT);
	request_id_of(&rep, id);
	reply_clear(&rep);
	ck_assert_int_eq(str_fmt(path, sizeof path, "/authorize/%s", id), CS_OK);
	ck_assert_int_eq(str_fmt(done, sizeof done, "/authorize/%s/done", id), CS_OK);

	/* Signed out: sign in, then back to this very page. */
	get(&rep, path, "", NULL);
	ck_assert_int_eq(rep.status, 303);
	ck_assert_int_eq(str_fmt(want, sizeof want, "/login?return_to=%%2Fauthorize%%2F%s", id), CS_OK);
	ck_assert_str_eq(location(&rep), want);
	reply_clear(&rep);

	/* Alice opens it: a consent request of hers, consentd's own, for the
	 * client and the resource behind the endpoint, with what it asked. */
	ask(id, &alice, crid);
	ck_assert_int_eq(consent_request_get(sc, crid, &cr), CS_OK);
	ck_assert_int_eq(cr.user_id, alice.uid);
	ck_assert_str_eq(cr.agent, "ide");
	ck_assert_str_eq(cr.resource, "notes");
	ck_assert_uint_eq(cr.scopes.n, 2);
	ck_assert_str_eq(cr.status, "pending");
	consent_request_clear(&cr);
	/* Bob with alice's link, before and after: the same 404 as an unknown id. */
	get(&rep, path, "", bob.cookie);
	assert_person(&rep, 404, "No such sign-in request");
	reply_clear(&rep);
	get(&rep, done, "", bob.cookie);
	assert_person(&rep, 404, "No such sign-in request");
	reply_clear(&rep);
	get(&rep, "/authorize/AAAAAAAAAAAAAAAAAAAAAA", "", alice.cookie);
	assert_person(&rep, 404, "No such sign-in request");
	reply_clear(&rep);
	/* Alice again: the same consent request (one per person, client, resource). */
	ask(id, &alice, crid2);
	ck_assert_str_eq(crid2, crid);

	/* The consent page names the client as its operator named it, and
	 * where the answer goes: this computer, with the warning. */
	ck_assert_int_eq(str_fmt(path, sizeof path, "/consent/%s", crid), CS_OK);
	get(&rep, path, "", alice.cookie);
	ck_assert_msg(rep.status == 200, "%d %s", rep.status, body(&rep));
	ck_assert_ptr_nonnull(strstr(body(&rep), "<h1>Example IDE asks for your permission</h1>"));
	ck_assert_ptr_nonnull(strstr(body(&rep), "you go back to <strong>127.0.0.1</strong>"));
	ck_assert_ptr_nonnull(strstr(body(&rep), "id=\"client-loopback\""));
	ck_assert_ptr_null(strstr(body(&rep), "id=\"client-self-named\""));
	ck_assert_ptr_null(strstr(body(&rep), "id=\"client-host\""));
	reply_clear(&rep);

	/* The done step before the decision: back to the consent page. */
	get(&rep, done, "", alice.cookie);
	ck_assert_int_eq(rep.status, 303);
	ck_assert_str_eq(location(&rep), path);
	reply_clear(&rep);

	/* Approve read only: the decision goes on to the done step -- by a page
	 * that moves on by itself, not a 303 (form-action, consent_pages.c). */
	decide(&rep, &alice, crid, "decision=approve&duration=3600&s0=on");
	assert_continues(&rep, done);
	reply_clear(&rep);
	get(&rep, done, "", bob.cookie);
	assert_person(&rep, 404, "No such sign-in request");
	reply_clear(&rep);
	ck_assert_int_eq(count("SELECT count(*) FROM authz_codes"), 0);

	get(&rep, done, "", alice.cookie);
	code_of(&rep, code);
	reply_clear(&rep);
	/* Stored by its hash, never in clear, with what the token leg needs. */
	SHA256((const unsigned char *)code, strlen(code), hash);
	ck_assert_int_eq(store_authz_code_take(sc, hash, now, &took, &row), CS_OK);
	ck_assert_int_eq(took, AUTHZ_TAKE_OK);
	ck_assert_str_eq(row.request_id, id);
	ck_assert_str_eq(row.client_id, "ide");
	ck_assert_str_eq(row.redirect_uri, "http://127.0.0.1:5555/callback");
	ck_assert_str_eq(row.code_challenge, CHALLENGE);
	ck_assert_str_eq(row.resource, MCP_NOTES);
	ck_assert_str_eq(row.scope, "read");            /* requested ∩ granted */
	ck_assert_str_eq(row.dpop_jkt, JKT);
	ck_assert_int_eq(row.user_id, alice.uid);
	ck_assert(row.expires_at == now + AUTHZ_FLOW_CODE_TTL);
	ck_assert_int_eq(consent_current(sc, alice.uid, "ide", "notes", now, &k), CS_OK);
	ck_assert_str_eq(row.consent_id, k.id);
	consent_clear(&k);
	store_authz_code_clear(&row);

	/* One request, one code: the done step again finds nothing. */
	get(&rep, done, "", alice.cookie);
	assert_person(&rep, 404, "No such sign-in request");
	reply_clear(&rep);
	ck_assert_int_eq(count("SELECT count(*) FROM authz_codes"), 1);
	ck_assert_int_eq(count("SELECT count(*) FROM authz_requests"), 0);
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE action = 'authz.code.issued' "
	    "AND agent = 'ide' AND scopes = 'read'"), 1);
	/* The consent's own done page no longer leads anywhere else. */
	ck_assert_int_eq(str_fmt(path, sizeof path, "/consent/%s/done", crid), CS_OK);
	get(&rep, path, "", alice.cookie);
	ck_assert_msg(rep.status == 200, "%d %s", rep.status, body(&rep));
	reply_clear(&rep);

	/* A live consent that covers the request: no page, the code at once. */
	authorize(&rep, "scope", "read", NULL, NULL);
	request_id_of(&rep, id);
	reply_clear(&rep);
	ck_assert_int_eq(str_fmt(path, sizeof path, "/authorize/%s", id), CS_OK);
	get(&rep, path, "", alice.cookie);
	code_of(&rep, code2);
	reply_clear(&rep);
	ck_assert_str_ne(code2, code);
	ck_assert_int_eq(count("SELECT count(*) FROM authz_codes"), 2);
	/* Read and write again: write was unticked within deny_cooldown, so, as
	 * for a gateway (consent.h, "blocks"), the consent answers for read alone. */
	authorize(&rep, NULL, NULL, NULL, NULL);
	request_id_of(&rep, id);
	reply_clear(&rep);
	ck_assert_int_eq(str_fmt(path, sizeof path, "/authorize/%s", id), CS_OK);
	get(&rep, path, "", alice.cookie);
	code_of(&rep, code2);
	reply_clear(&rep);
	ck_assert_int_eq(count("SELECT count(*) FROM authz_codes WHERE scope = 'read'"), 3);
	ck_assert_int_eq(count("SELECT count(*) FROM consent_requests"), 1);
}
END_TEST

/* A denial answers access_denied to the client, with state and iss; and
 * within deny_cooldown the next request is refused at once, not shown. */
START_TEST(test_authorize_pages_denied)
{
	struct http_reply rep;
	struct person alice;
	char id[STORE_AUTHZ_ID_LEN + 1], crid[64], done[128], path[128];
	sign_in("alice", &alice);
	authorize(&rep, NULL, NULL, NULL, NULL);
	request_id_of(&rep, id);
	reply_clear(&rep);
	ask(id, &alice, crid);
	decide(&rep, &alice, crid, "decision=deny");
	ck_assert_int_eq(str_fmt(done, sizeof done, "/authorize/%s/done", id), CS_OK);
	assert_continues(&rep, done);
	reply_clear(&rep);
	get(&rep, done, "", alice.cookie);
	assert_client(&rep, "http://127.0.0.1:5555/callback?", "access_denied", "denied", "st-1");
	reply_clear(&rep);
	get(&rep, done, "", alice.cookie);
	assert_person(&rep, 404, "No such sign-in request");
	reply_clear(&rep);
	ck_assert_int_eq(count("SELECT count(*) FROM authz_codes"), 0);

	authorize(&rep, NULL, NULL, NULL, NULL);
	request_id_of(&rep, id);
	reply_clear(&rep);
	ck_assert_int_eq(str_fmt(path, sizeof path, "/authorize/%s", id), CS_OK);
	get(&rep, path, "", alice.cookie);
	assert_client(&rep, "http://127.0.0.1:5555/callback?", "access_denied", "deny_cooldown",
	    "st-1");
	reply_clear(&rep);
	ck_assert_int_eq(count("SELECT count(*) FROM authz_requests"), 0);
}
END_TEST

/* Two done steps for one request (two tabs, a replayed link): the first
 * issues, the second finds the request used up and issues nothing --
 * authz_flow_finish deletes the request in the transaction that stores the code. */
START_TEST(test_authorize_pages_one_code_per_request)
{
	struct http_reply rep;
	struct person alice;
	struct authz_flow_step a, b;
	char id[STORE_AUTHZ_ID_LEN + 1], crid[64];
	sign_in("alice", &alice);
	authorize(&rep, NULL, NULL, NULL, NULL);
	request_id_of(&rep, id);
	reply_clear(&rep);
	ask(id, &alice, crid);
	decide(&rep, &alice, crid, "decision=approve&duration=3600&s0=on&s1=on");
	reply_clear(&rep);
	struct authz_flow_person p = { .user_id = alice.uid, .issuer = ISS, .subject = "alice",
		.actor = "user:alice", .now = now };
	ck_assert_int_eq(authz_flow_finish(sc, cfg, id, &p, &a), CS_OK);
	ck_assert_int_eq(authz_flow_finish(sc, cfg, id, &p, &b), CS_OK);
	ck_assert_int_eq(a.outcome, AUTHZ_STEP_CODE);
	ck_assert_int_eq(b.outcome, AUTHZ_STEP_UNKNOWN);
	ck_assert_uint_eq(strlen(a.code), AUTHZ_FLOW_CODE_LEN);
	ck_assert_str_eq(b.code, "");
	authz_flow_step_clear(&a);
	authz_flow_step_clear(&b);
	ck_assert_int_eq(count("SELECT count(*) FROM authz_codes WHERE scope = 'read write'"), 1);
}
END_TEST

/* Done steps racing on their own threads and connections (two tabs, a
 * replayed link at the same moment): exactly one code. */
#define RACERS 4
struct racer {
	const char *id;
	struct authz_flow_person p;
	pthread_barrier_t *go;
	enum authz_step outcome;
	enum cs_err e;
};

static void *race_done(void *arg)
{
	struct racer *r = arg;
	struct authz_flow_step st;
	memset(&st, 0, sizeof st);
	struct store_conn *c = store_conn(app.store);
	pthread_barrier_wait(r->go);
	r->e = c == NULL ? CS_EDB : authz_flow_finish(c, cfg, r->id, &r->p, &st);
	r->outcome = st.outcome;
	authz_flow_step_clear(&st);
	return NULL;
}

START_TEST(test_authorize_pages_racing_done_steps)
{
	struct http_reply rep;
	struct person alice;
	pthread_t t[RACERS];
	struct racer r[RACERS];
	pthread_barrier_t go;
	char id[STORE_AUTHZ_ID_LEN + 1], crid[64];
	size_t codes = 0;
	sign_in("alice", &alice);
	authorize(&rep, NULL, NULL, NULL, NULL);
	request_id_of(&rep, id);
	reply_clear(&rep);
	ask(id, &alice, crid);
	decide(&rep, &alice, crid, "decision=approve&duration=3600&s0=on");
	reply_clear(&rep);
	ck_assert_int_eq(pthread_barrier_init(&go, NULL, RACERS), 0);
	for (size_t i = 0; i < RACERS; i++) {
		r[i] = (struct racer){ .id = id, .go = &go, .p = { .user_id = alice.uid, .issuer = ISS,
			.subject = "alice", .actor = "user:alice", .now = now } };
		ck_assert_int_eq(pthread_create(&t[i], NULL, race_done, &r[i]), 0);
	}
	for (size_t i = 0; i < RACERS; i++) {
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
		ck_assert_int_eq(r[i].e, CS_OK);
		ck_assert(r[i].outcome == AUTHZ_STEP_CODE || r[i].outcome == AUTHZ_STEP_UNKNOWN);
		codes += r[i].outcome == AUTHZ_STEP_CODE;
	}
	pthread_barrier_destroy(&go);
	ck_assert_uint_eq(codes, 1);
	ck_assert_int_eq(count("SELECT count(*) FROM authz_codes"), 1);
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE action = 'authz.code.issued'"), 1);
}
END_TEST

/* The pure helpers: a redirect URI's host and whether it is this computer;
 * the dpop_jkt shape; the scopes a request asks. */
START_TEST(test_authorize_pages_helpers)
{
	static const struct { const char *uri, *host; bool loop; } ok[] = {
		{ "http://127.0.0.1:5555/cb", "127.0.0.1", true },
		{ "http://[::1]/cb", "::1", true },
		{ "http://LocalHost:1/x?y", "LocalHost", true },
		{ "https://ide.example/cb", "ide.example", false },
		{ "https://ide.example:8443", "ide.example", false },
		{ "https://127.0.0.1.evil.example/cb", "127.0.0.1.evil.example", false },
	};
	char host[64];
	bool loop;
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		ck_assert_int_eq(authz_flow_uri_host(ok[i].uri, host, sizeof host, &loop), CS_OK);
		ck_assert_str_eq(host, ok[i].host);
		ck_assert_int_eq(loop, ok[i].loop);
	}
	static const char *const bad[] = { "ftp://x/", "http://", "https:///cb", "http://[::1/cb",
		"https://user@ide.example/cb", "cb" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(authz_flow_uri_host(bad[i], host, sizeof host, &loop) == CS_EINVAL, "%s",
		    bad[i]);
	ck_assert(authz_flow_jkt_valid(JKT));
	ck_assert(!authz_flow_jkt_valid("0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4"));
	ck_assert(!authz_flow_jkt_valid("0ZcOCORZNYy+DWpqq30jZyJGHTN0d2HglBV3uiguA4I"));
	ck_assert(!authz_flow_jkt_valid(NULL));

	struct scope_set s = { .n = 0 };
	enum authz_scope_outcome oc;
	const char *bad_scope;
	ck_assert_int_eq(authz_flow_scopes(cfg, "ide", "notes", NULL, &s, &oc, &bad_scope), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_SCOPE_OK);
	ck_assert_uint_eq(s.n, 2);
	ck_assert_int_eq(authz_flow_scopes(cfg, "ide", "notes", "re\"ad", &s, &oc, &bad_scope),
	    CS_OK);
	ck_assert_int_eq(oc, AUTHZ_SCOPE_MALFORMED);
	ck_assert_int_eq(authz_flow_scopes(cfg, "ide", "notes", "read notes:write", &s, &oc,
	    &bad_scope), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_SCOPE_UNKNOWN);
	ck_assert_str_eq(bad_scope, "notes:write");
	/* wiki is behind no [mcp.NAME]: an MCP client may not ask for it. */
	ck_assert_int_eq(authz_flow_scopes(cfg, "ide", "wiki", "read", &s, &oc, &bad_scope), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_SCOPE_DENIED);
	/* A gateway's agent asks by its allow list. */
	ck_assert_int_eq(authz_flow_scopes(cfg, "coder", "notes", "write", &s, &oc, &bad_scope),
	    CS_OK);
	ck_assert_int_eq(oc, AUTHZ_SCOPE_DENIED);
	scope_set_clear(&s);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("authorize_pages");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_authorize_pages_refused_to_the_person);
	tcase_add_test(tc, test_authorize_pages_refused_to_the_client);
	tcase_add_test(tc, test_authorize_pages_kept);
	tcase_add_test(tc, test_authorize_pages_code);
	tcase_add_test(tc, test_authorize_pages_denied);
	tcase_add_test(tc, test_authorize_pages_one_code_per_request);
	tcase_add_test(tc, test_authorize_pages_racing_done_steps);
	tcase_add_test(tc, test_authorize_pages_helpers);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
