/* test_grant_mcp.c -- MCP clients' access tokens (issue #30, the token leg):
 * grant_issue with an audience and a client_id (RFC 9068 claims, no act),
 * refresh families that keep their audience and their client, the validator
 * by audience (grant_validate_mcp) for issue #31's gateway, introspection and
 * revocation by the client that holds the token, against a real SQLite file
 * built from migrations/, fixed keys and explicit clocks.  The attacker's
 * side first: a token for endpoint A at endpoint B, a refresh for another
 * resource or by another client, a reused refresh token, alg none, a tampered
 * token, a gateway's grant passed off as an MCP token and back. */
#include <stdint.h>
#include <string.h>
#include <sqlite3.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "testutil.h"
#include "tu_consent.h"
#include "audit.h"
#include "consent.h"
#include "grant.h"
#include "grant_cache.h"
#include "jwt.h"
#include "seal.h"
#include "session.h"
#include "store.h"

#define NOW 1700000000
#define TTL 300
#define ISS "https://idp.test"
#define PUBLIC_URL "https://consent.example.com"
#define GW_ID "agent-gateway"
#define ACTOR "mcp:ide"
#define URI_A PUBLIC_URL "/mcp/notes"        /* endpoint A, resource notes */
#define URI_B PUBLIC_URL "/mcp/notes-too"    /* endpoint B, the same resource */
#define URI_F PUBLIC_URL "/mcp/files"        /* an endpoint of another resource */
#define JKT "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"

static char *dir;
static struct store *st;
static struct store_conn *sc;
static sqlite3 *raw;
static struct master_key mk;
static struct keyring *kr;
static struct config cfg;

static char *allow_coder[] = { "notes:read", NULL };
static char *ide_redirects[] = { "http://127.0.0.1/cb", NULL };
static struct config_agent agents[1];
static struct config_client clients[2];
static struct config_resource resources[2];
static struct config_scope scopes[3];
static struct config_mcp_endpoint endpoints[3];

static void setup(void)
{
	grant_cache_clear();
	audit_set_key((const unsigned char[32]){ 0 }, "test");
	dir = tu_tmpdir();
	char *db = tu_path(dir, "t.db");
	ck_assert_int_eq(store_open(db, &st), CS_OK);
	sc = store_conn(st);
	ck_assert_ptr_nonnull(sc);
	ck_assert_int_eq(sqlite3_open(db, &raw), SQLITE_OK);
	sqlite3_busy_timeout(raw, 5000);
	memset(&mk, 0x11, sizeof mk);
	memcpy(mk.kid, "00112233aabbccdd", MASTER_KID_LEN + 1);
	ck_assert_int_eq(keyring_load(sc, &mk, NOW, TTL, &kr), CS_OK);
	free(db);

	memset(&cfg, 0, sizeof cfg);
	memset(agents, 0, sizeof agents);
	memset(clients, 0, sizeof clients);
	memset(resources, 0, sizeof resources);
	memset(scopes, 0, sizeof scopes);
	memset(endpoints, 0, sizeof endpoints);
	agents[0] = (struct config_agent){ .id = "coder", .name = "Coder", .allow = allow_coder,
		.nallow = 1, .offline = true };
	clients[0] = (struct config_client){ .id = "ide", .client_id = "ide", .name = "IDE",
		.redirect_uris = ide_redirects, .nredirect_uris = 1 };
	clients[1] = (struct config_client){ .id = "other", .client_id = "other", .name = "Other",
		.redirect_uris = ide_redirects, .nredirect_uris = 1 };
	resources[0] = (struct config_resource){ .id = "notes", .name = "Notes",
		.uri = "https://notes.example.com/api", .max_consent = 86400 };
	resources[1] = (struct config_resource){ .id = "files", .name = "Files",
		.uri = "https://files.example.com/api", .max_consent = 86400 };
	scopes[0] = (struct config_scope){ .resource = "notes", .name = "read" };
	scopes[1] = (struct config_scope){ .resource = "notes", .name = "write" };
	scopes[2] = (struct config_scope){ .resource = "files", .name = "read" };
	endpoints[0] = (struct config_mcp_endpoint){ .id = "notes", .resource = "notes", .uri = URI_A };
	endpoints[1] = (struct config_mcp_endpoint){ .id = "notes-too", .resource = "notes",
		.uri = URI_B };
	endpoints[2] = (struct config_mcp_endpoint){ .id = "files", .resource = "files", .uri = URI_F };
	cfg.agents = agents;
	cfg.nagents = 1;
	cfg.clients = clients;
	cfg.nclients = 2;
	cfg.resources = resources;
	cfg.nresources = 2;
	cfg.scopes = scopes;
	cfg.nscopes = 3;
	cfg.mcp_endpoints = endpoints;
	cfg.nmcp_endpoints = 3;
	cfg.public_url = PUBLIC_URL;
	cfg.gateway_id = GW_ID;
	cfg.grant_ttl = TTL;
	cfg.consent_request_ttl = 600;
	cfg.consent_interval = 5;
	cfg.consent_deny_cooldown = 3600;
	cfg.consent_max_pending_per_user = 5;
}

static void teardown(void)
{
	grant_cache_clear();
	keyring_free(kr);
	sqlite3_close(raw);
	store_close(st);
	tu_rmdir(dir);
}

/* --- helpers ----------------------------------------------------------- */

static struct scope_set set(const char *s)
{
	struct scope_set v = { .n = 0 };
	ck_assert_int_eq(scope_set_parse(s, &v), CS_OK);
	return v;
}

static int64_t q_int(const char *sql, const char *arg)
{
	sqlite3_stmt *s = NULL;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, sql, -1, &s, NULL), SQLITE_OK);
	if (arg != NULL)
		sqlite3_bind_text(s, 1, arg, -1, SQLITE_TRANSIENT);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
	int64_t v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

/* A consent of sub for agent (an MCP client's client_id, or a gateway's
 * agent) on resource, made the way a person makes one. */
static char *make_consent(const char *sub, const char *agent, const char *resource,
    const char *ticked, int64_t duration, bool offline)
{
	struct consent_answer a;
	struct consent_decision d;
	struct scope_set req = set(ticked);
	char *kid = NULL;
	memset(&a, 0, sizeof a);
	ck_assert_int_eq(tu_exchange(sc, &cfg, ISS, sub, agent, resource, &req, NULL, ACTOR,
	    NOW, &a), CS_OK);
	ck_assert_int_eq(a.outcome, CONSENT_REQUIRED);
	memset(&d, 0, sizeof d);
	d.approve = true;
	d.selected = req;
	d.duration = duration;
	d.offline = offline;
	int64_t uid = q_int("SELECT id FROM users WHERE subject = ?1", sub);
	tu_decision_version(sc, a.request_id, &d);
	ck_assert_int_eq(tu_decide(sc, &cfg, a.request_id, uid, &d, "user:x", NOW, &kid), CS_OK);
	scope_set_clear(&req);
	consent_answer_clear(&a);
	return kid;
}

/* grant_issue for kid's consent with audience and client_id. */
static enum grant_issue_outcome issue_mcp(const char *kid, const char *scope_s,
    const char *audience, const char *client_id, bool refresh, const char *jkt, int64_t now,
    struct grant_response *g)
{
	struct consent k;
	memset(&k, 0, sizeof k);
	ck_assert_int_eq(consent_get(sc, kid, now, &k), CS_OK);
	struct scope_set s = set(scope_s);
	memset(g, 0, sizeof *g);
	struct grant_issue_req rq = { .k = &k, .scope = &s, .with_refresh = refresh, .jkt = jkt,
		.actor = ACTOR, .now = now, .audience = audience, .client_id = client_id };
	enum grant_issue_outcome oc = GRANT_ISSUE__MAX;
	ck_assert_int_eq(grant_issue(sc, &cfg, kr, &rq, &oc, g), CS_OK);
	scope_set_clear(&s);
	consent_clear(&k);
	return oc;
}

static enum grant_refresh_outcome refresh_as(const char *rt, const char *client,
    const char *audience, const char *scope_s, const char *jkt, int64_t now,
    struct grant_response *g)
{
	struct scope_set s = { .n = 0 };
	if (scope_s != NULL)
		s = set(scope_s);
	memset(g, 0, sizeof *g);
	struct grant_refresh_req rq = { .refresh_token = rt, .scope = scope_s ? &s : NULL,
		.jkt = jkt, .actor = ACTOR, .now = now, .client_id = client, .audience = audience };
	enum grant_refresh_outcome oc = GRANT_REFRESH__MAX;
	ck_assert_int_eq(grant_refresh(sc, &cfg, kr, &rq, &oc, g), CS_OK);
	scope_set_clear(&s);
	return oc;
}

static const char *last_why;

typedef enum cs_err (*mcp_validator)(struct store_conn *, const struct config *,
    const struct keyring *, const char *, const char *, int64_t, struct grant_check *);

/* Whether token passes v for audience; last_why says why not; *cid (when
 * not NULL) the consent it names, when it passes. */
static bool passes(mcp_validator v, const char *token, const char *audience, int64_t now,
    char **cid)
{
	struct grant_check gc;
	ck_assert_int_eq(v(sc, &cfg, kr, token, audience, now, &gc), CS_OK);
	last_why = gc.why;
	bool ok = gc.valid;
	if (ok) {
		ck_assert_ptr_nonnull(gc.claims);
		ck_assert_ptr_nonnull(gc.k.id);
		if (cid != NULL)
			*cid = strdup(gc.k.id);
	} else {
		ck_assert_ptr_null(gc.claims);
		ck_assert_ptr_nonnull(gc.why);
	}
	grant_check_clear(&gc);
	return ok;
}

/* grant_validate_mcp: an MCP client's token at the endpoint it names. */
static bool valid_for(const char *token, const char *audience, int64_t now)
{
	return passes(grant_validate_mcp, token, audience, now, NULL);
}

/* grant_validate_mcp_token: the token's own standing (its row, and its
 * consent whatever that consent's state). */
static bool stands_for(const char *token, const char *audience, int64_t now, char **cid)
{
	return passes(grant_validate_mcp_token, token, audience, now, cid);
}

static json_t *claims_of(const char *token)
{
	json_t *cl = NULL;
	ck_assert_int_eq(jwt_verify(kr, "at+jwt", token, &cl), CS_OK);
	return cl;
}

static const char *jstr(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	ck_assert_msg(json_is_string(v), "claim %s is not a string", k);
	return json_string_value(v);
}

static json_t *introspect(const char *token, int64_t now)
{
	json_t *v = NULL;
	ck_assert_int_eq(grant_introspect(sc, &cfg, kr, token, now, &v), CS_OK);
	ck_assert_ptr_nonnull(v);
	return v;
}

static bool active(const char *token, int64_t now)
{
	json_t *v = introspect(token, now);
	bool a = json_is_true(json_object_get(v, "active"));
	if (!a)
		ck_assert_uint_eq(json_object_size(v), 1);
	json_decref(v);
	return a;
}

static char *b64u(const char *s)
{
	size_t n = strlen(s), cap = 4 * ((n + 2) / 3) + 1;
	char *o = malloc(cap);
	ck_assert_ptr_nonnull(o);
	EVP_EncodeBlock((unsigned char *)o, (const unsigned char *)s, (int)n);
	size_t len = strlen(o);
	while (len > 0 && o[len - 1] == '=')
		o[--len] = '\0';
	for (size_t i = 0; i < len; i++)
		o[i] = o[i] == '+' ? '-' : o[i] == '/' ? '_' : o[i];
	return o;
}

/* --- issuing ----------------------------------------------------------- */

START_TEST(test_grant_mcp_issue_claims_exact)
{
	struct grant_response g;
	char *kid = make_consent("alice", "ide", "notes", "read write", 3600, true);
	ck_assert_int_eq(issue_mcp(kid, "read", URI_A, "ide", true, JKT, NOW, &g), GRANT_ISSUED);
	ck_assert_ptr_nonnull(g.refresh_token);
	ck_assert_ptr_nonnull(g.family);
	json_t *cl = claims_of(g.access_token);
	/* RFC 9068 §2.2: exactly these, and no act or resource claim. */
	ck_assert_uint_eq(json_object_size(cl), 10);
	ck_assert_str_eq(jstr(cl, "iss"), PUBLIC_URL);
	ck_assert_str_eq(jstr(cl, "sub"), "alice");
	ck_assert_str_eq(jstr(cl, "aud"), URI_A);
	ck_assert_str_eq(jstr(cl, "client_id"), "ide");
	ck_assert_str_eq(jstr(cl, "scope"), "read");
	ck_assert_str_eq(jstr(cl, "cid"), kid);
	ck_assert_uint_eq(strlen(jstr(cl, "jti")), 43);
	ck_assert_int_eq(json_integer_value(json_object_get(cl, "iat")), NOW);
	ck_assert_int_eq(json_integer_value(json_object_get(cl, "exp")), NOW + TTL);
	ck_assert_str_eq(jstr(json_object_get(cl, "cnf"), "jkt"), JKT);
	ck_assert_ptr_null(json_object_get(cl, "act"));
	ck_assert_ptr_null(json_object_get(cl, "resource"));
	/* The family remembers its audience and its client. */
	ck_assert_int_eq(q_int("SELECT count(*) FROM refresh_audiences WHERE family = ?1 AND "
	    "audience = '" URI_A "' AND client_id = 'ide'", g.family), 1);
	/* And the grant row is in it. */
	ck_assert_int_eq(q_int("SELECT count(*) FROM grants WHERE family = ?1", g.family), 1);
	json_decref(cl);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

/* exp never past the consent's end; a token without refresh is still in a family. */
START_TEST(test_grant_mcp_issue_exp_bounded_no_refresh)
{
	struct grant_response g;
	char *kid = make_consent("alice", "ide", "notes", "read", 100, false);
	ck_assert_int_eq(issue_mcp(kid, "read", URI_A, "ide", false, NULL, NOW + 40, &g),
	    GRANT_ISSUED);
	json_t *cl = claims_of(g.access_token);
	ck_assert_int_eq(json_integer_value(json_object_get(cl, "exp")), NOW + 100);
	ck_assert_int_eq(g.expires_in, 60);
	ck_assert_ptr_null(g.refresh_token);
	ck_assert_ptr_nonnull(g.family);
	ck_assert_ptr_null(json_object_get(cl, "cnf"));
	ck_assert_int_eq(q_int("SELECT count(*) FROM refresh_audiences", NULL), 0);
	json_decref(cl);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

START_TEST(test_grant_mcp_issue_refused_cases)
{
	struct grant_response g;
	char *kid = make_consent("alice", "ide", "notes", "read", 3600, true);
	char *gw = make_consent("bob", "coder", "notes", "read", 3600, true);
	/* An audience that is no endpoint, or an endpoint of another resource. */
	ck_assert_int_eq(issue_mcp(kid, "read", "https://evil.example/mcp", "ide", false, NULL,
	    NOW, &g), GRANT_ISSUE_REFUSED);
	ck_assert_int_eq(issue_mcp(kid, "read", URI_F, "ide", false, NULL, NOW, &g),
	    GRANT_ISSUE_REFUSED);
	/* Another client than the consent's. */
	ck_assert_int_eq(issue_mcp(kid, "read", URI_A, "other", false, NULL, NOW, &g),
	    GRANT_ISSUE_REFUSED);
	/* A gateway agent's consent never becomes an MCP token. */
	ck_assert_int_eq(issue_mcp(gw, "read", URI_A, "coder", false, NULL, NOW, &g),
	    GRANT_ISSUE_REFUSED);
	/* A scope the person did not grant. */
	ck_assert_int_eq(issue_mcp(kid, "write", URI_A, "ide", false, NULL, NOW, &g),
	    GRANT_ISSUE_REFUSED);
	ck_assert_int_eq(q_int("SELECT count(*) FROM grants", NULL), 0);
	/* One of the two alone is the caller's mistake. */
	struct consent k;
	memset(&k, 0, sizeof k);
	ck_assert_int_eq(consent_get(sc, kid, NOW, &k), CS_OK);
	struct scope_set s = set("read");
	enum grant_issue_outcome oc;
	ck_assert_int_eq(grant_issue(sc, &cfg, kr, &(struct grant_issue_req){ .k = &k, .scope = &s,
	    .now = NOW, .audience = URI_A }, &oc, &g), CS_EINVAL);
	ck_assert_int_eq(grant_issue(sc, &cfg, kr, &(struct grant_issue_req){ .k = &k, .scope = &s,
	    .now = NOW, .client_id = "ide" }, &oc, &g), CS_EINVAL);
	scope_set_clear(&s);
	consent_clear(&k);
	free(kid);
	free(gw);
}
END_TEST

/* grant_issue_tx writes in the caller's transaction: rolled back, nothing stays. */
START_TEST(test_grant_mcp_issue_tx_in_callers_transaction)
{
	struct grant_response g;
	char *kid = make_consent("alice", "ide", "notes", "read", 3600, true);
	struct consent k;
	memset(&k, 0, sizeof k);
	memset(&g, 0, sizeof g);
	ck_assert_int_eq(consent_get(sc, kid, NOW, &k), CS_OK);
	struct scope_set s = set("read");
	struct grant_issue_req rq = { .k = &k, .scope = &s, .with_refresh = true, .actor = ACTOR,
		.now = NOW, .audience = URI_A, .client_id = "ide" };
	enum grant_issue_outcome oc = GRANT_ISSUE__MAX;
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(grant_issue_tx(sc, &cfg, kr, &rq, &oc, &g), CS_OK);
	ck_assert_int_eq(oc, GRANT_ISSUED);
	ck_assert_ptr_nonnull(g.refresh_token);
	store_rollback(sc);
	ck_assert_int_eq(q_int("SELECT count(*) FROM grants", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM refresh_tokens", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM refresh_audiences", NULL), 0);
	ck_assert(!valid_for(g.access_token, URI_A, NOW + 1));
	ck_assert_str_eq(last_why, "grant unknown to this consentd");
	grant_response_clear(&g);
	/* Committed, it stands. */
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(grant_issue_tx(sc, &cfg, kr, &rq, &oc, &g), CS_OK);
	ck_assert_int_eq(store_commit(sc), CS_OK);
	ck_assert(valid_for(g.access_token, URI_A, NOW + 1));
	grant_response_clear(&g);
	scope_set_clear(&s);
	consent_clear(&k);
	free(kid);
}
END_TEST

/* --- the validator ----------------------------------------------------- */

START_TEST(test_grant_mcp_validate_audience_exact)
{
	struct grant_response g;
	char *kid = make_consent("alice", "ide", "notes", "read", 3600, false);
	ck_assert_int_eq(issue_mcp(kid, "read", URI_A, "ide", false, NULL, NOW, &g), GRANT_ISSUED);
	ck_assert(valid_for(g.access_token, URI_A, NOW + 1));
	/* A token for endpoint A presented at endpoint B (the same resource behind). */
	ck_assert(!valid_for(g.access_token, URI_B, NOW + 1));
	ck_assert_str_eq(last_why, "not an access token for this resource");
	ck_assert(!valid_for(g.access_token, URI_F, NOW + 1));
	ck_assert_str_eq(last_why, "not an access token for this resource");
	/* A prefix, a trailing slash, another case: not equal. */
	ck_assert(!valid_for(g.access_token, URI_A "/", NOW + 1));
	ck_assert(!valid_for(g.access_token, PUBLIC_URL "/mcp/NOTES", NOW + 1));
	ck_assert(!valid_for(g.access_token, NULL, NOW + 1));
	ck_assert_str_eq(last_why, "not an access token for this resource");
	/* Time. */
	ck_assert(!valid_for(g.access_token, URI_A, NOW + TTL));
	ck_assert_str_eq(last_why, "access token expired");
	ck_assert(!valid_for(g.access_token, URI_A, NOW - 1));
	ck_assert_str_eq(last_why, "access token issued in the future");
	/* Not this gateway's grant either. */
	struct grant_check gc;
	ck_assert_int_eq(grant_validate(sc, &cfg, kr, g.access_token, NOW + 1, &gc), CS_OK);
	ck_assert(!gc.valid);
	ck_assert_str_eq(gc.why, "not a consentd grant");
	grant_check_clear(&gc);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

/* A gateway's grant is no MCP token, even when its aud were an endpoint. */
START_TEST(test_grant_mcp_validate_refuses_gateway_grant)
{
	struct grant_response g;
	char *gw = make_consent("bob", "coder", "notes", "read", 3600, false);
	struct consent k;
	memset(&k, 0, sizeof k);
	ck_assert_int_eq(consent_get(sc, gw, NOW, &k), CS_OK);
	struct scope_set s = set("read");
	enum grant_issue_outcome oc;
	ck_assert_int_eq(grant_issue(sc, &cfg, kr, &(struct grant_issue_req){ .k = &k, .scope = &s,
	    .actor = ACTOR, .now = NOW }, &oc, &g), CS_OK);
	ck_assert_int_eq(oc, GRANT_ISSUED);
	ck_assert(!valid_for(g.access_token, URI_A, NOW + 1));
	ck_assert_str_eq(last_why, "not an access token for this resource");
	grant_response_clear(&g);
	/* Our own key signing a gateway-shaped token whose aud is endpoint A: act refuses it. */
	json_t *cl = json_pack("{s:s, s:s, s:s, s:s, s:{s:s}, s:s, s:s, s:s, s:I, s:I}",
	    "iss", PUBLIC_URL, "sub", "bob", "aud", URI_A, "client_id", "coder", "act", "sub", "coder",
	    "scope", "read", "cid", gw, "jti", "j1", "iat", (json_int_t)NOW,
	    "exp", (json_int_t)NOW + 60);
	char *t = NULL;
	ck_assert_int_eq(jwt_sign(kr, "at+jwt", cl, &t), CS_OK);
	ck_assert(!valid_for(t, URI_A, NOW + 1));
	ck_assert_str_eq(last_why, "not an access token for this resource");
	free(t);
	json_decref(cl);
	scope_set_clear(&s);
	consent_clear(&k);
	free(gw);
}
END_TEST

START_TEST(test_grant_mcp_validate_alg_none_and_tampered)
{
	struct grant_response g;
	char hdr[256];
	char *kid = make_consent("alice", "ide", "notes", "read", 3600, false);
	ck_assert_int_eq(issue_mcp(kid, "read", URI_A, "ide", false, NULL, NOW, &g), GRANT_ISSUED);
	const char *d1 = strchr(g.access_token, '.');
	const char *d2 = strchr(d1 + 1, '.');
	char *payload = strndup(d1 + 1, (size_t)(d2 - d1 - 1));
	snprintf(hdr, sizeof hdr, "{\"alg\":\"none\",\"typ\":\"at+jwt\",\"kid\":\"%s\"}",
	    keyring_signing_kid(kr));
	char *h = b64u(hdr);
	size_t n = strlen(h) + strlen(payload) + strlen(d2) + 4;
	char *t1 = malloc(n), *t2 = malloc(n);
	snprintf(t1, n, "%s.%s.", h, payload);
	snprintf(t2, n, "%s.%s%s", h, payload, d2);
	ck_assert(!valid_for(t1, URI_A, NOW + 1));
	ck_assert_str_eq(last_why, "not a consentd access token");
	ck_assert(!valid_for(t2, URI_A, NOW + 1));
	ck_assert_str_eq(last_why, "not a consentd access token");
	/* A payload re-written for endpoint B under A's signature. */
	json_t *cl = claims_of(g.access_token);
	json_object_set_new(cl, "aud", json_string(URI_B));
	char *pj = json_dumps(cl, JSON_COMPACT);
	char *p2 = b64u(pj);
	size_t hl = (size_t)(d1 - g.access_token);
	size_t n3 = hl + strlen(p2) + strlen(d2) + 4;
	char *t3 = malloc(n3);
	snprintf(t3, n3, "%.*s.%s%s", (int)hl, g.access_token, p2, d2);
	ck_assert(!valid_for(t3, URI_B, NOW + 1));
	ck_assert_str_eq(last_why, "not a consentd access token");
	/* Garbage and nothing. */
	ck_assert(!valid_for("a.b.c", URI_A, NOW + 1));
	ck_assert(!valid_for("", URI_A, NOW + 1));
	ck_assert(!valid_for(NULL, URI_A, NOW + 1));
	ck_assert(valid_for(g.access_token, URI_A, NOW + 1));
	free(t1);
	free(t2);
	free(t3);
	free(p2);
	free(pj);
	json_decref(cl);
	free(h);
	free(payload);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

/* Revoking the consent (on /me, or an admin) ends the token and its refresh at once. */
START_TEST(test_grant_mcp_consent_revoked_ends_tokens)
{
	struct grant_response g, g2;
	char *kid = make_consent("alice", "ide", "notes", "read", 3600, true);
	ck_assert_int_eq(issue_mcp(kid, "read", URI_A, "ide", true, NULL, NOW, &g), GRANT_ISSUED);
	ck_assert(valid_for(g.access_token, URI_A, NOW + 1));
	/* The consent's own check, even where its grants' rows were not touched. */
	ck_assert_int_eq(sqlite3_exec(raw, "UPDATE consents SET revoked_at = 1", NULL, NULL, NULL),
	    SQLITE_OK);
	ck_assert(!valid_for(g.access_token, URI_A, NOW + 1));
	ck_assert_str_eq(last_why, "the grant's consent was revoked");
	ck_assert_int_eq(sqlite3_exec(raw, "UPDATE consents SET revoked_at = 0", NULL, NULL, NULL),
	    SQLITE_OK);
	ck_assert(valid_for(g.access_token, URI_A, NOW + 1));
	/* Revoked on /me: its tokens end with it at once. */
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "user:alice", "revoked on /me", NOW + 2, false),
	    CS_OK);
	ck_assert(!valid_for(g.access_token, URI_A, NOW + 3));
	ck_assert_str_eq(last_why, "grant revoked");
	ck_assert(!active(g.access_token, NOW + 3));
	ck_assert(!active(g.refresh_token, NOW + 3));
	ck_assert_int_eq(refresh_as(g.refresh_token, "ide", URI_A, NULL, NULL, NOW + 3, &g2),
	    GRANT_REFRESH_CONSENT_REVOKED);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

/* The gateway's check of an MCP client's token (grant_validate_mcp_token):
 * its row and its consent in one read, each refusal named.  A token revoked
 * with its consent still names the person (the gateway then asks for the
 * current consent, issue #31); one revoked on its own does not. */
START_TEST(test_grant_mcp_token_standing)
{
	struct grant_response g, g2;
	char *cid = NULL;
	char *kid = make_consent("alice", "ide", "notes", "read", 3600, false);
	ck_assert_int_eq(issue_mcp(kid, "read", URI_A, "ide", false, NULL, NOW, &g), GRANT_ISSUED);
	ck_assert(stands_for(g.access_token, URI_A, NOW + 1, &cid));
	ck_assert_str_eq(cid, kid);
	free(cid);
	ck_assert(!stands_for(g.access_token, URI_B, NOW + 1, NULL));
	ck_assert_str_eq(last_why, "not an access token for this resource");
	/* Its consent revoked (its grants with it, at the same instant): it still stands. */
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "user:alice", "revoked on /me", NOW + 2, false),
	    CS_OK);
	ck_assert(!valid_for(g.access_token, URI_A, NOW + 3));
	ck_assert(stands_for(g.access_token, URI_A, NOW + 3, NULL));
	/* Revoked on its own, before its consent ended: it does not. */
	ck_assert_int_eq(sqlite3_exec(raw, "UPDATE grants SET revoked_at = revoked_at - 1",
	    NULL, NULL, NULL), SQLITE_OK);
	ck_assert(!stands_for(g.access_token, URI_A, NOW + 3, NULL));
	ck_assert_str_eq(last_why, "grant revoked");
	/* Its row gone: unknown. */
	ck_assert_int_eq(sqlite3_exec(raw, "DELETE FROM grants", NULL, NULL, NULL), SQLITE_OK);
	ck_assert(!stands_for(g.access_token, URI_A, NOW + 3, NULL));
	ck_assert_str_eq(last_why, "grant unknown to this consentd");
	/* A row naming another consent than the token's cid. */
	char *kid2 = make_consent("bob", "ide", "notes", "read", 3600, false);
	ck_assert_int_eq(issue_mcp(kid2, "read", URI_A, "ide", false, NULL, NOW, &g2),
	    GRANT_ISSUED);
	ck_assert(stands_for(g2.access_token, URI_A, NOW + 1, NULL));
	sqlite3_stmt *up;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "UPDATE grants SET consent_id = ?1", -1, &up,
	    NULL), SQLITE_OK);
	sqlite3_bind_text(up, 1, kid, -1, SQLITE_STATIC);
	ck_assert_int_eq(sqlite3_step(up), SQLITE_DONE);
	sqlite3_finalize(up);
	ck_assert(!stands_for(g2.access_token, URI_A, NOW + 1, NULL));
	ck_assert_str_eq(last_why, "grant does not match its consent");
	grant_response_clear(&g);
	grant_response_clear(&g2);
	free(kid);
	free(kid2);
}
END_TEST

/* --- refresh ------------------------------------------------------------ */

START_TEST(test_grant_mcp_refresh_keeps_audience)
{
	struct grant_response g, g2, g3;
	char *kid = make_consent("alice", "ide", "notes", "read write", 3600, true);
	ck_assert_int_eq(issue_mcp(kid, "read write", URI_A, "ide", true, NULL, NOW, &g),
	    GRANT_ISSUED);
	/* A token for resource A refreshed for resource B: refused, nothing used up. */
	ck_assert_int_eq(refresh_as(g.refresh_token, "ide", URI_B, NULL, NULL, NOW + 1, &g2),
	    GRANT_REFRESH_WRONG_RESOURCE);
	ck_assert_str_eq(grant_refresh_outcome_description(GRANT_REFRESH_WRONG_RESOURCE),
	    "resource is not the one the refresh token was issued for");
	/* Another client: unknown to it, and nothing used up either. */
	ck_assert_int_eq(refresh_as(g.refresh_token, "other", URI_A, NULL, NULL, NOW + 1, &g2),
	    GRANT_REFRESH_INVALID);
	/* The gateway cannot refresh an MCP client's family. */
	ck_assert_int_eq(refresh_as(g.refresh_token, NULL, NULL, NULL, NULL, NOW + 1, &g2),
	    GRANT_REFRESH_INVALID);
	ck_assert(active(g.refresh_token, NOW + 1));
	/* Widening refused; narrowing keeps aud and client. */
	ck_assert_int_eq(refresh_as(g.refresh_token, "ide", URI_A, "read admin", NULL, NOW + 1, &g2),
	    GRANT_REFRESH_BAD_SCOPE);
	ck_assert_int_eq(refresh_as(g.refresh_token, "ide", URI_A, "read", NULL, NOW + 2, &g2),
	    GRANT_REFRESHED);
	json_t *cl = claims_of(g2.access_token);
	ck_assert_str_eq(jstr(cl, "aud"), URI_A);
	ck_assert_str_eq(jstr(cl, "client_id"), "ide");
	ck_assert_str_eq(jstr(cl, "scope"), "read");
	ck_assert_ptr_null(json_object_get(cl, "act"));
	json_decref(cl);
	ck_assert(valid_for(g2.access_token, URI_A, NOW + 3));
	/* The new refresh token is of the same family: it renews A again. */
	ck_assert_int_eq(refresh_as(g2.refresh_token, "ide", URI_A, NULL, NULL, NOW + 4, &g3),
	    GRANT_REFRESHED);
	cl = claims_of(g3.access_token);
	ck_assert_str_eq(jstr(cl, "aud"), URI_A);
	json_decref(cl);
	grant_response_clear(&g);
	grant_response_clear(&g2);
	grant_response_clear(&g3);
	free(kid);
}
END_TEST

START_TEST(test_grant_mcp_refresh_reuse_kills_family)
{
	struct grant_response g, g2, g3;
	char *kid = make_consent("alice", "ide", "notes", "read", 3600, true);
	ck_assert_int_eq(issue_mcp(kid, "read", URI_A, "ide", true, NULL, NOW, &g), GRANT_ISSUED);
	ck_assert_int_eq(refresh_as(g.refresh_token, "ide", URI_A, NULL, NULL, NOW + 1, &g2),
	    GRANT_REFRESHED);
	/* The used one again: the family dies, and every token minted in it. */
	ck_assert_int_eq(refresh_as(g.refresh_token, "ide", URI_A, NULL, NULL, NOW + 2, &g3),
	    GRANT_REFRESH_REUSED);
	ck_assert_int_eq(refresh_as(g2.refresh_token, "ide", URI_A, NULL, NULL, NOW + 3, &g3),
	    GRANT_REFRESH_REUSE_REVOKED);
	ck_assert(!valid_for(g2.access_token, URI_A, NOW + 3));
	ck_assert_str_eq(last_why, "grant revoked");
	ck_assert(!valid_for(g.access_token, URI_A, NOW + 3));
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'refresh.reuse_detected'",
	    NULL), 1);
	grant_response_clear(&g);
	grant_response_clear(&g2);
	free(kid);
}
END_TEST

START_TEST(test_grant_mcp_refresh_dpop_bound)
{
	struct grant_response g, g2;
	char *kid = make_consent("alice", "ide", "notes", "read", 3600, true);
	ck_assert_int_eq(issue_mcp(kid, "read", URI_A, "ide", true, JKT, NOW, &g), GRANT_ISSUED);
	ck_assert_int_eq(refresh_as(g.refresh_token, "ide", URI_A, NULL, NULL, NOW + 1, &g2),
	    GRANT_REFRESH_WRONG_KEY);
	ck_assert_int_eq(refresh_as(g.refresh_token, "ide", URI_A, NULL, "other-key", NOW + 1, &g2),
	    GRANT_REFRESH_WRONG_KEY);
	ck_assert_int_eq(refresh_as(g.refresh_token, "ide", URI_A, NULL, JKT, NOW + 1, &g2),
	    GRANT_REFRESHED);
	json_t *cl = claims_of(g2.access_token);
	ck_assert_str_eq(jstr(json_object_get(cl, "cnf"), "jkt"), JKT);
	json_decref(cl);
	grant_response_clear(&g);
	grant_response_clear(&g2);
	free(kid);
}
END_TEST

/* --- introspection and revocation -------------------------------------- */

START_TEST(test_grant_mcp_introspect)
{
	struct grant_response g;
	char *kid = make_consent("alice", "ide", "notes", "read", 3600, true);
	ck_assert_int_eq(issue_mcp(kid, "read", URI_A, "ide", true, JKT, NOW, &g), GRANT_ISSUED);
	json_t *v = introspect(g.access_token, NOW + 1);
	ck_assert(json_is_true(json_object_get(v, "active")));
	ck_assert_str_eq(jstr(v, "aud"), URI_A);
	ck_assert_str_eq(jstr(v, "client_id"), "ide");
	ck_assert_str_eq(jstr(v, "token_type"), "DPoP");
	ck_assert_str_eq(jstr(v, "token_use"), "grant");
	json_decref(v);
	v = introspect(g.refresh_token, NOW + 1);
	ck_assert(json_is_true(json_object_get(v, "active")));
	ck_assert_str_eq(jstr(v, "token_use"), "refresh");
	ck_assert_str_eq(jstr(v, "aud"), URI_A);
	ck_assert_str_eq(jstr(v, "client_id"), "ide");
	ck_assert_ptr_null(json_object_get(v, "act"));
	ck_assert_str_eq(jstr(json_object_get(v, "cnf"), "jkt"), JKT);
	json_decref(v);
	ck_assert(!active(g.access_token, NOW + TTL));
	grant_response_clear(&g);
	free(kid);
}
END_TEST

START_TEST(test_grant_mcp_revoke_only_by_holder)
{
	struct grant_response g;
	char *kid = make_consent("alice", "ide", "notes", "read", 3600, true);
	ck_assert_int_eq(issue_mcp(kid, "read", URI_A, "ide", true, NULL, NOW, &g), GRANT_ISSUED);
	/* Another client, and the gateway: nothing happens (and nothing is said). */
	ck_assert_int_eq(grant_revoke_mcp(sc, &cfg, kr, g.access_token, "other", "mcp:other",
	    NOW + 1), CS_OK);
	ck_assert_int_eq(grant_revoke_mcp(sc, &cfg, kr, g.refresh_token, "other", "mcp:other",
	    NOW + 1), CS_OK);
	ck_assert_int_eq(grant_revoke(sc, &cfg, kr, g.access_token, "gateway", NOW + 1), CS_OK);
	ck_assert_int_eq(grant_revoke(sc, &cfg, kr, g.refresh_token, "gateway", NOW + 1), CS_OK);
	ck_assert(valid_for(g.access_token, URI_A, NOW + 2));
	ck_assert(active(g.refresh_token, NOW + 2));
	/* The holder: the access token by its jti, the refresh token with its family. */
	ck_assert_int_eq(grant_revoke_mcp(sc, &cfg, kr, g.access_token, "ide", ACTOR, NOW + 2),
	    CS_OK);
	ck_assert(!valid_for(g.access_token, URI_A, NOW + 3));
	ck_assert_str_eq(last_why, "grant revoked");
	ck_assert(active(g.refresh_token, NOW + 3));
	ck_assert_int_eq(grant_revoke_mcp(sc, &cfg, kr, g.refresh_token, "ide", ACTOR, NOW + 3),
	    CS_OK);
	ck_assert(!active(g.refresh_token, NOW + 4));
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action IN ('grant.revoked', "
	    "'refresh.revoked') AND actor = '" ACTOR "'", NULL), 2);
	ck_assert_int_eq(grant_revoke_mcp(sc, &cfg, kr, g.access_token, NULL, ACTOR, NOW), CS_EINVAL);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

/* The gateway's own grants keep working as before next to MCP tokens: its
 * revocation and refresh still act on its own. */
START_TEST(test_grant_mcp_gateway_tokens_unchanged)
{
	struct grant_response g, g2;
	char *gw = make_consent("bob", "coder", "notes", "read", 3600, true);
	struct consent k;
	memset(&k, 0, sizeof k);
	ck_assert_int_eq(consent_get(sc, gw, NOW, &k), CS_OK);
	struct scope_set s = set("read");
	enum grant_issue_outcome oc;
	ck_assert_int_eq(grant_issue(sc, &cfg, kr, &(struct grant_issue_req){ .k = &k, .scope = &s,
	    .with_refresh = true, .actor = ACTOR, .now = NOW }, &oc, &g), CS_OK);
	ck_assert_int_eq(oc, GRANT_ISSUED);
	ck_assert_ptr_nonnull(g.family);
	/* An MCP client cannot refresh or revoke the gateway's. */
	ck_assert_int_eq(refresh_as(g.refresh_token, "ide", URI_A, NULL, NULL, NOW + 1, &g2),
	    GRANT_REFRESH_INVALID);
	ck_assert_int_eq(grant_revoke_mcp(sc, &cfg, kr, g.access_token, "coder", ACTOR, NOW + 1),
	    CS_OK);
	json_t *v = introspect(g.access_token, NOW + 1);
	ck_assert(json_is_true(json_object_get(v, "active")));
	ck_assert_str_eq(jstr(v, "client_id"), GW_ID);
	json_decref(v);
	ck_assert_int_eq(refresh_as(g.refresh_token, NULL, NULL, NULL, NULL, NOW + 1, &g2),
	    GRANT_REFRESHED);
	ck_assert_int_eq(grant_revoke(sc, &cfg, kr, g2.access_token, "gateway", NOW + 2), CS_OK);
	ck_assert(!active(g2.access_token, NOW + 2));
	grant_response_clear(&g);
	grant_response_clear(&g2);
	scope_set_clear(&s);
	consent_clear(&k);
	free(gw);
}
END_TEST

static Suite *grant_mcp_suite(void)
{
	Suite *s = suite_create("grant_mcp");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_grant_mcp_issue_claims_exact);
	tcase_add_test(tc, test_grant_mcp_issue_exp_bounded_no_refresh);
	tcase_add_test(tc, test_grant_mcp_issue_refused_cases);
	tcase_add_test(tc, test_grant_mcp_issue_tx_in_callers_transaction);
	tcase_add_test(tc, test_grant_mcp_validate_audience_exact);
	tcase_add_test(tc, test_grant_mcp_validate_refuses_gateway_grant);
	tcase_add_test(tc, test_grant_mcp_validate_alg_none_and_tampered);
	tcase_add_test(tc, test_grant_mcp_consent_revoked_ends_tokens);
	tcase_add_test(tc, test_grant_mcp_token_standing);
	tcase_add_test(tc, test_grant_mcp_refresh_keeps_audience);
	tcase_add_test(tc, test_grant_mcp_refresh_reuse_kills_family);
	tcase_add_test(tc, test_grant_mcp_refresh_dpop_bound);
	tcase_add_test(tc, test_grant_mcp_introspect);
	tcase_add_test(tc, test_grant_mcp_revoke_only_by_holder);
	tcase_add_test(tc, test_grant_mcp_gateway_tokens_unchanged);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(grant_mcp_suite());
}
