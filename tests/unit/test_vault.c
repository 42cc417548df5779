/* test_vault.c -- the token vault (flow D) against a real SQLite file built
 * from migrations/, a hand-filled configuration, fixed master keys and a
 * canned provider on 127.0.0.1 (RFC 8414 metadata, token and revocation
 * endpoints that record what they got).  Attacker cases first-class:
 * swapped, truncated and altered ciphertexts, foreign keys, replayed and
 * misrouted callbacks, providers that grant too much. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <sqlite3.h>

#include "testutil.h"
#include "tu_consent.h"
#include "audit.h"
#include "consent.h"
#include "form.h"
#include "httpc.h"
#include "seal.h"
#include "session.h"
#include "store.h"
#include "vault.h"

#define NOW 1700000000
#define ISS "https://idp.test"
#define PUBLIC_URL "https://consent.example.com"
#define GW "gateway:agent-gateway"
#define ACT "user:alice"

/* For code that runs off the test's thread, where ck_assert may not be used. */
#define must(x) do { if (!(x)) { fprintf(stderr, "test_vault: %s\n", #x); abort(); } } while (0)

/* --- a canned provider on 127.0.0.1 ------------------------------------- */

#define MAX_REVOKED 64

struct srv {
	int              fd;
	int              stop;
	int              running;
	pthread_t        th;
	pthread_mutex_t  mu;
	uint16_t         port;
	char             base[64];
	int              iss_supported;
	int              code_status;
	char             code_body[1024];
	char             last_code_req[4096];
	int              refresh_status;
	char             refresh_body[1024];
	int              refresh_delay_ms;
	int              refreshes;
	char             last_refresh_token[256];
	int              revoke_status;
	char             revoked[MAX_REVOKED][300];   /* "hint:token", in order */
	int              nrevoked;
};

static struct srv sv;

static void send_all(int c, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(c, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static void reply(int c, int status, const char *body)
{
	char head[512];
	size_t n = strlen(body);
	int h = snprintf(head, sizeof head, "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
	    "Content-Length: %zu\r\nConnection: close\r\n\r\n", status, n);
	send_all(c, head, (size_t)h);
	send_all(c, body, n);
}

static void serve_one(int c)
{
	char req[16384] = "";
	size_t got = 0;
	char *end = NULL;
	while (got < sizeof req - 1 && (end = strstr(req, "\r\n\r\n")) == NULL) {
		ssize_t r = recv(c, req + got, sizeof req - 1 - got, 0);
		if (r <= 0)
			return;
		got += (size_t)r;
		req[got] = '\0';
	}
	if (end == NULL)
		return;
	size_t hlen = (size_t)(end - req) + 4, clen = 0;
	char *cl = strcasestr(req, "\r\ncontent-length:");
	if (cl != NULL && cl < end)
		clen = strtoul(cl + 17, NULL, 10);
	while (got < hlen + clen && got < sizeof req - 1) {
		ssize_t r = recv(c, req + got, sizeof req - 1 - got, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
		req[got] = '\0';
	}
	char path[256] = "";
	const char *sp = strchr(req, ' ');
	if (sp != NULL)
		snprintf(path, sizeof path, "%.*s", (int)strcspn(sp + 1, " ?"), sp + 1);
	const char *body = req + hlen;
	struct form f;
	form_init(&f);
	if (form_parse(&f, body, strlen(body)) != CS_OK)
		form_init(&f);
	pthread_mutex_lock(&sv.mu);
	if (strcmp(path, "/.well-known/oauth-authorization-server") == 0 ||
	    strcmp(path, "/.well-known/openid-configuration") == 0) {
		char meta[1024];
		snprintf(meta, sizeof meta, "{\"issuer\":\"%s\",\"authorization_endpoint\":"
		    "\"%s/authorize\",\"token_endpoint\":\"%s/token\",\"revocation_endpoint\":"
		    "\"%s/revoke\",\"response_types_supported\":[\"code\"],"
		    "\"code_challenge_methods_supported\":[\"S256\"],"
		    "\"authorization_response_iss_parameter_supported\":%s}",
		    sv.base, sv.base, sv.base, sv.base, sv.iss_supported ? "true" : "false");
		reply(c, 200, meta);
	} else if (strcmp(path, "/token") == 0) {
		const char *gt = form_get(&f, "grant_type");
		if (gt != NULL && strcmp(gt, "refresh_token") == 0) {
			const char *rt = form_get(&f, "refresh_token");
			int delay = sv.refresh_delay_ms;
			sv.refreshes++;
			snprintf(sv.last_refresh_token, sizeof sv.last_refresh_token, "%s", rt ? rt : "");
			pthread_mutex_unlock(&sv.mu);
			if (delay > 0)
				usleep((useconds_t)delay * 1000);
			pthread_mutex_lock(&sv.mu);
			reply(c, sv.refresh_status, sv.refresh_body);
		} else {
			snprintf(sv.last_code_req, sizeof sv.last_code_req, "%s", body);
			reply(c, sv.code_status, sv.code_body);
		}
	} else if (strcmp(path, "/revoke") == 0) {
		const char *t = form_get(&f, "token"), *hint = form_get(&f, "token_type_hint");
		if (sv.revoke_status == 200 && sv.nrevoked < MAX_REVOKED)
			snprintf(sv.revoked[sv.nrevoked++], sizeof sv.revoked[0], "%s:%s",
			    hint ? hint : "-", t ? t : "-");
		reply(c, sv.revoke_status, "");
	} else {
		reply(c, 404, "{}");
	}
	pthread_mutex_unlock(&sv.mu);
	form_clear(&f);
}

static void *srv_main(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&sv.stop, __ATOMIC_ACQUIRE)) {
		struct pollfd pfd = { sv.fd, POLLIN, 0 };
		if (poll(&pfd, 1, 20) <= 0)
			continue;
		int c = accept(sv.fd, NULL, NULL);
		if (c < 0)
			continue;
		serve_one(c);
		close(c);
	}
	return NULL;
}

/* Listens on port (0: any) and serves. */
static void srv_up(uint16_t port)
{
	struct sockaddr_in a;
	socklen_t alen = sizeof a;
	int one = 1;
	sv.fd = socket(AF_INET, SOCK_STREAM, 0);
	must(sv.fd >= 0);
	must(setsockopt(sv.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons(port);
	must(bind(sv.fd, (struct sockaddr *)&a, sizeof a) == 0);
	must(listen(sv.fd, 64) == 0);
	must(getsockname(sv.fd, (struct sockaddr *)&a, &alen) == 0);
	sv.port = ntohs(a.sin_port);
	snprintf(sv.base, sizeof sv.base, "http://127.0.0.1:%u", (unsigned)sv.port);
	__atomic_store_n(&sv.stop, 0, __ATOMIC_RELEASE);
	must(pthread_create(&sv.th, NULL, srv_main, NULL) == 0);
	sv.running = 1;
}

/* The provider goes down: its port is closed. */
static void srv_down(void)
{
	if (!sv.running)
		return;
	__atomic_store_n(&sv.stop, 1, __ATOMIC_RELEASE);
	pthread_join(sv.th, NULL);
	close(sv.fd);
	sv.running = 0;
}

static void srv_set_tokens(const char *access, const char *refresh, const char *scope,
    long expires_in)
{
	pthread_mutex_lock(&sv.mu);
	json_t *j = json_pack("{s:s, s:s}", "access_token", access, "token_type", "Bearer");
	if (refresh != NULL)
		json_object_set_new(j, "refresh_token", json_string(refresh));
	if (scope != NULL)
		json_object_set_new(j, "scope", json_string(scope));
	if (expires_in > 0)
		json_object_set_new(j, "expires_in", json_integer(expires_in));
	char *s = json_dumps(j, JSON_COMPACT);
	snprintf(sv.code_body, sizeof sv.code_body, "%s", s);
	free(s);
	json_decref(j);
	sv.code_status = 200;
	pthread_mutex_unlock(&sv.mu);
}

static void srv_set_refresh(int status, const char *body, int delay_ms)
{
	pthread_mutex_lock(&sv.mu);
	sv.refresh_status = status;
	snprintf(sv.refresh_body, sizeof sv.refresh_body, "%s", body);
	sv.refresh_delay_ms = delay_ms;
	pthread_mutex_unlock(&sv.mu);
}

static int srv_refreshes(void)
{
	pthread_mutex_lock(&sv.mu);
	int n = sv.refreshes;
	pthread_mutex_unlock(&sv.mu);
	return n;
}

/* --- fixture ------------------------------------------------------------- */

static char *dir;
static struct store *st;
static struct store_conn *sc;
static sqlite3 *raw;
static struct master_key mk;
static struct vault *v;
static struct config cfg;
static const unsigned char SH[32] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
static const unsigned char SH_OTHER[32] = { 9, 9, 9 };

static char *allow_coder[] = { "github:issues:read", "github:issues:write", "gitlab:read",
	"notes:read", NULL };
static char *prov_read[] = { "repo", "issues:read", NULL };
static char *prov_write[] = { "repo", "issues:write", NULL };
static char *prov_gl[] = { "read_api", NULL };
static struct config_agent agents[2];
static struct config_resource resources[3];
static struct config_scope scopes[4];

static void setup(void)
{
	audit_set_key((const unsigned char[32]){ 0 }, "test");   /* the audit chain's key */
	memset(&sv, 0, sizeof sv);
	pthread_mutex_init(&sv.mu, NULL);
	sv.iss_supported = 1;
	sv.revoke_status = 200;
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 3600);
	srv_set_refresh(200, "{}", 0);
	srv_up(0);

	dir = tu_tmpdir();
	char *db = tu_path(dir, "t.db");
	ck_assert_int_eq(store_open(db, &st), CS_OK);
	sc = store_conn(st);
	ck_assert_ptr_nonnull(sc);
	ck_assert_int_eq(sqlite3_open(db, &raw), SQLITE_OK);
	sqlite3_busy_timeout(raw, 10000);
	free(db);
	memset(&mk, 0x11, sizeof mk);
	memcpy(mk.kid, "00112233aabbccdd", MASTER_KID_LEN + 1);

	memset(&cfg, 0, sizeof cfg);
	memset(agents, 0, sizeof agents);
	memset(resources, 0, sizeof resources);
	memset(scopes, 0, sizeof scopes);
	agents[0].id = "coder";
	agents[0].allow = allow_coder;
	agents[0].nallow = 4;
	agents[0].offline = true;
	agents[1].id = "helper";
	agents[1].allow = allow_coder;
	agents[1].nallow = 4;
	for (int i = 0; i < 2; i++) {
		resources[i].id = i == 0 ? "github" : "gitlab";
		resources[i].name = resources[i].id;
		resources[i].uri = i == 0 ? "urn:consentd:resource:github" : "urn:consentd:resource:gitlab";
		resources[i].max_consent = 86400;
		resources[i].provider_issuer = sv.base;
		resources[i].provider_client_id = "consentd";
		resources[i].provider_client_secret = "s3cret";
		resources[i].refresh_margin = 60;
		resources[i].token_release = RELEASE_GATEWAY;
	}
	resources[2].id = "notes";
	resources[2].name = "notes";
	resources[2].uri = "urn:consentd:resource:notes";
	resources[2].max_consent = 86400;
	scopes[0] = (struct config_scope){ "github", "issues:read", "Read", prov_read, 2 };
	scopes[1] = (struct config_scope){ "github", "issues:write", "Write", prov_write, 2 };
	scopes[2] = (struct config_scope){ "gitlab", "read", "Read", prov_gl, 1 };
	scopes[3] = (struct config_scope){ "notes", "read", "Read", NULL, 0 };
	cfg.agents = agents;
	cfg.nagents = 2;
	cfg.resources = resources;
	cfg.nresources = 3;
	cfg.scopes = scopes;
	cfg.nscopes = 4;
	cfg.public_url = PUBLIC_URL;
	cfg.gateway_id = "agent-gateway";
	cfg.consent_request_ttl = 600;
	cfg.consent_interval = 5;
	cfg.consent_deny_cooldown = 3600;
	cfg.consent_max_pending_per_user = 5;
	ck_assert_int_eq(vault_new(&cfg, &mk, &v), CS_OK);
}

static void teardown(void)
{
	vault_free(v);
	v = NULL;
	sqlite3_close(raw);
	store_close(st);
	tu_rmdir(dir);
	srv_down();
	pthread_mutex_destroy(&sv.mu);
}

/* --- helpers ------------------------------------------------------------- */

static struct scope_set set(const char *s)
{
	struct scope_set r = { .n = 0 };
	ck_assert_int_eq(scope_set_parse(s, &r), CS_OK);
	return r;
}

static void ck_set(const struct scope_set *s, const char *want)
{
	char *j = scope_set_join(s);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(j, want);
	free(j);
}

static int64_t q_int(const char *sql, const char *arg)
{
	sqlite3_stmt *s = NULL;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, sql, -1, &s, NULL), SQLITE_OK);
	if (arg != NULL)
		sqlite3_bind_text(s, 1, arg, -1, SQLITE_TRANSIENT);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
	int64_t r = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return r;
}

static char *q_text(const char *sql, const char *arg)
{
	sqlite3_stmt *s = NULL;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, sql, -1, &s, NULL), SQLITE_OK);
	if (arg != NULL)
		sqlite3_bind_text(s, 1, arg, -1, SQLITE_TRANSIENT);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
	const unsigned char *t = sqlite3_column_text(s, 0);
	char *r = t ? strdup((const char *)t) : NULL;
	sqlite3_finalize(s);
	return r;
}

static void raw_exec(const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(raw, sql, NULL, NULL, &msg);
	ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : "?");
}

static int64_t uid(const char *sub)
{
	return q_int("SELECT id FROM users WHERE subject = ?1", sub);
}

static int64_t audits(const char *action)
{
	return q_int("SELECT count(*) FROM audit WHERE action = ?1", action);
}

/* A pending consent request of (sub, agent, resource) for scopes_s. */
static char *request(const char *sub, const char *agent, const char *resource,
    const char *scopes_s, int64_t now)
{
	struct scope_set req = set(scopes_s);
	struct consent_answer a;
	memset(&a, 0, sizeof a);
	ck_assert_int_eq(tu_exchange(sc, &cfg, ISS, sub, agent, resource, &req, NULL, GW, now,
	    &a), CS_OK);
	ck_assert_int_eq(a.outcome, CONSENT_REQUIRED);
	char *rid = strdup(a.request_id);
	consent_answer_clear(&a);
	scope_set_clear(&req);
	return rid;
}

static enum consent_outcome exchange(const char *sub, const char *agent, const char *resource,
    const char *scopes_s, int64_t now)
{
	struct scope_set req = set(scopes_s);
	struct consent_answer a;
	memset(&a, 0, sizeof a);
	ck_assert_int_eq(tu_exchange(sc, &cfg, ISS, sub, agent, resource, &req, NULL, GW, now,
	    &a), CS_OK);
	enum consent_outcome o = a.outcome;
	consent_answer_clear(&a);
	scope_set_clear(&req);
	return o;
}

static struct consent_decision decision(const char *selected)
{
	struct consent_decision d;
	memset(&d, 0, sizeof d);
	d.approve = true;
	d.selected = set(selected);
	d.duration = 86400;
	d.offline = false;
	return d;
}

/* One query parameter of an URL, decoded; NULL when absent. */
static char *url_param(const char *url, const char *name)
{
	const char *q = strchr(url, '?');
	struct form f;
	char *r = NULL;
	ck_assert_ptr_nonnull(q);
	form_init(&f);
	ck_assert_int_eq(form_parse(&f, q + 1, strlen(q + 1)), CS_OK);
	ck_assert_uint_le(form_count(&f, name), 1);
	const char *val = form_get(&f, name);
	if (val != NULL)
		r = strdup(val);
	form_clear(&f);
	return r;
}

/* Begins a connect of request rid by sub; returns the state from the URL. */
static char *begin(const char *rid, const char *sub, const char *selected, int64_t now)
{
	struct consent_decision d = decision(selected);
	struct vault_begin b = { NULL, NULL };
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(vault_begin_connect(v, sc, &cfg, rid, uid(sub), SH, &d, ACT, now, &b), CS_OK);
	ck_assert_ptr_nonnull(b.authorize_url);
	ck_assert_ptr_null(b.consent_id);
	char *state = url_param(b.authorize_url, "state");
	ck_assert_ptr_nonnull(state);
	vault_begin_clear(&b);
	scope_set_clear(&d.selected);
	return state;
}

static enum vault_connect_outcome finish_full(const char *resource, const char *state,
    const char *iss, const char *error, const unsigned char *sh, const char *sub, int64_t now,
    struct vault_finish *f)
{
	memset(f, 0, sizeof *f);
	ck_assert_int_eq(vault_finish_connect(v, sc, &cfg, resource, state, error ? NULL : "code-1",
	    iss, error, sh, uid(sub), ACT, now, f), CS_OK);
	return f->outcome;
}

/* A whole connection of (sub, agent, resource) for scopes; the consent id. */
static char *connect_as(const char *sub, const char *agent, const char *resource,
    const char *scopes_s, int64_t now)
{
	char *rid = request(sub, agent, resource, scopes_s, now);
	char *state = begin(rid, sub, scopes_s, now);
	struct vault_finish f;
	enum vault_connect_outcome o = finish_full(resource, state, sv.base, NULL, SH, sub, now, &f);
	ck_assert_msg(o == VAULT_CONNECTED, "outcome %d: %s", (int)o, f.why ? f.why : "");
	ck_assert_ptr_nonnull(f.consent_id);
	ck_assert_str_eq(f.request_id, rid);
	char *kid = strdup(f.consent_id);
	vault_finish_clear(&f);
	free(state);
	free(rid);
	return kid;
}

static char *connect_alice(int64_t now)
{
	return connect_as("alice", "coder", "github", "issues:read", now);
}

static struct consent load(const char *kid, int64_t now)
{
	struct consent k;
	memset(&k, 0, sizeof k);
	ck_assert_int_eq(consent_get(sc, kid, now, &k), CS_OK);
	return k;
}

static enum cs_err release_with(struct vault *vv, struct store_conn *c, const char *kid,
    int64_t now, struct vault_release *r)
{
	struct consent k;
	memset(&k, 0, sizeof k);
	memset(r, 0, sizeof *r);
	if (consent_get(c, kid, now, &k) != CS_OK)
		return CS_ENOENT;
	enum cs_err e = vault_release(vv, c, &cfg, &k, "list_issues", GW, now, r);
	consent_clear(&k);
	return e;
}

static enum cs_err release(const char *kid, int64_t now, struct vault_release *r)
{
	return release_with(v, sc, kid, now, r);
}

/* The access token released for kid at now (which must succeed). */
static void ck_release(const char *kid, int64_t now, const char *want)
{
	struct vault_release r;
	ck_assert_int_eq(release(kid, now, &r), CS_OK);
	ck_assert_str_eq(r.access_token, want);
	ck_assert_str_eq(r.token_type, "Bearer");
	vault_release_clear(&r);
}

/* No token in clear anywhere at rest: records, outbox, audit. */
static void ck_no_plaintext(void)
{
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records WHERE "
	    "instr(access_sealed, CAST('secret' AS BLOB)) > 0 OR "
	    "instr(coalesce(refresh_sealed, x''), CAST('secret' AS BLOB)) > 0", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox WHERE "
	    "instr(access_sealed, CAST('secret' AS BLOB)) > 0 OR "
	    "instr(coalesce(refresh_sealed, x''), CAST('secret' AS BLOB)) > 0", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE "
	    "coalesce(detail, '') || coalesce(scopes, '') LIKE '%secret%'", NULL), 0);
}

static char *b64url_sha256(const char *s)
{
	unsigned char d[32];
	unsigned int n = 32;
	char b64[64];
	ck_assert_int_eq(EVP_Digest(s, strlen(s), d, &n, EVP_sha256(), NULL), 1);
	EVP_EncodeBlock((unsigned char *)b64, d, 32);
	size_t len = strlen(b64);
	while (len > 0 && b64[len - 1] == '=')
		b64[--len] = '\0';
	for (size_t i = 0; i < len; i++)
		b64[i] = b64[i] == '+' ? '-' : b64[i] == '/' ? '_' : b64[i];
	return strdup(b64);
}

/* --- mapping ------------------------------------------------------------ */

START_TEST(test_vault_map_scopes)
{
	struct scope_set in = set("issues:write issues:read"), out = { .n = 0 };
	ck_assert_int_eq(vault_map_scopes(&cfg, "github", &in, &out), CS_OK);
	ck_set(&out, "issues:read issues:write repo");      /* union, sorted, unique */
	scope_set_clear(&out);
	scope_set_clear(&in);
	in = set("issues:read");
	ck_assert_int_eq(vault_map_scopes(&cfg, "github", &in, &out), CS_OK);
	ck_set(&out, "issues:read repo");
	scope_set_clear(&out);
	scope_set_clear(&in);
	/* A scope without provider scopes maps to nothing; an unknown one fails. */
	in = set("read");
	ck_assert_int_eq(vault_map_scopes(&cfg, "notes", &in, &out), CS_OK);
	ck_assert_uint_eq(out.n, 0);
	ck_assert_int_eq(vault_map_scopes(&cfg, "github", &in, &out), CS_EINVAL);
	scope_set_clear(&in);
	ck_assert_ptr_nonnull(vault_provider(v, "github"));
	ck_assert_ptr_nonnull(vault_provider(v, "gitlab"));
	ck_assert_ptr_null(vault_provider(v, "notes"));
	ck_assert_ptr_null(vault_provider(v, "nope"));
}
END_TEST

/* --- begin -------------------------------------------------------------- */

START_TEST(test_vault_begin_authorize_url)
{
	char *rid = request("alice", "coder", "github", "issues:read issues:write", NOW);
	struct consent_decision d = decision("issues:read issues:write");
	struct vault_begin b = { NULL, NULL };
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(vault_begin_connect(v, sc, &cfg, rid, uid("alice"), SH, &d, ACT, NOW, &b),
	    CS_OK);
	ck_assert_ptr_nonnull(b.authorize_url);
	ck_assert_ptr_null(b.consent_id);
	char want_prefix[128];
	snprintf(want_prefix, sizeof want_prefix, "%s/authorize?", sv.base);
	ck_assert_int_eq(strncmp(b.authorize_url, want_prefix, strlen(want_prefix)), 0);
	char *p;
	ck_assert_str_eq((p = url_param(b.authorize_url, "response_type")), "code");
	free(p);
	ck_assert_str_eq((p = url_param(b.authorize_url, "client_id")), "consentd");
	free(p);
	ck_assert_str_eq((p = url_param(b.authorize_url, "redirect_uri")),
	    PUBLIC_URL "/oauth/callback/github");
	free(p);
	ck_assert_str_eq((p = url_param(b.authorize_url, "scope")), "issues:read issues:write repo");
	free(p);
	ck_assert_str_eq((p = url_param(b.authorize_url, "code_challenge_method")), "S256");
	free(p);
	char *state = url_param(b.authorize_url, "state");
	char *chal = url_param(b.authorize_url, "code_challenge");
	ck_assert_uint_eq(strlen(state), 43);
	/* The stored state: hash only, the verifier matching the challenge. */
	unsigned char h[32];
	sha256_str(state, h);
	sqlite3_stmt *s = NULL;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "SELECT request_id, resource, selected, "
	    "provider_scopes, expires_at, code_verifier, provider_issuer, duration, user_id "
	    "FROM vault_connects WHERE state_hash = ?1", -1, &s, NULL), SQLITE_OK);
	sqlite3_bind_blob(s, 1, h, 32, SQLITE_TRANSIENT);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
	ck_assert_str_eq((const char *)sqlite3_column_text(s, 0), rid);
	ck_assert_str_eq((const char *)sqlite3_column_text(s, 1), "github");
	ck_assert_str_eq((const char *)sqlite3_column_text(s, 2), "issues:read issues:write");
	ck_assert_str_eq((const char *)sqlite3_column_text(s, 3), "issues:read issues:write repo");
	ck_assert_int_eq(sqlite3_column_int64(s, 4), NOW + VAULT_CONNECT_TTL);
	char *want_chal = b64url_sha256((const char *)sqlite3_column_text(s, 5));
	ck_assert_str_eq(chal, want_chal);
	ck_assert_str_eq((const char *)sqlite3_column_text(s, 6), sv.base);
	ck_assert_int_eq(sqlite3_column_int64(s, 7), 86400);
	ck_assert_int_eq(sqlite3_column_int64(s, 8), uid("alice"));
	sqlite3_finalize(s);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_connects WHERE state_hash = "
	    "CAST(?1 AS BLOB)", state), 0);            /* never in clear */
	/* Nothing else changed: no consent, the request still pending. */
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 0);
	char *status = q_text("SELECT status FROM consent_requests WHERE id = ?1", rid);
	ck_assert_str_eq(status, "pending");
	free(status);
	free(want_chal);
	free(state);
	free(chal);
	vault_begin_clear(&b);
	scope_set_clear(&d.selected);
	free(rid);
}
END_TEST

START_TEST(test_vault_begin_refuses)
{
	char *rid = request("alice", "coder", "github", "issues:read", NOW);
	free(request("bob", "coder", "github", "issues:read", NOW));   /* makes bob */
	struct consent_decision d = decision("issues:read");
	struct vault_begin b = { NULL, NULL };
	/* Another person. */
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(vault_begin_connect(v, sc, &cfg, rid, uid("bob"), SH, &d, ACT, NOW, &b),
	    CS_EPERM);
	/* A selection outside the request, a bad duration, an expired request. */
	scope_set_clear(&d.selected);
	d.selected = set("issues:write");
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(vault_begin_connect(v, sc, &cfg, rid, uid("alice"), SH, &d, ACT, NOW, &b),
	    CS_EINVAL);
	scope_set_clear(&d.selected);
	d.selected = set("issues:read");
	d.duration = 86401;
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(vault_begin_connect(v, sc, &cfg, rid, uid("alice"), SH, &d, ACT, NOW, &b),
	    CS_EINVAL);
	d.duration = 3600;
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(vault_begin_connect(v, sc, &cfg, rid, uid("alice"), SH, &d, ACT, NOW + 600,
	    &b), CS_EINVAL);
	tu_decision_version(sc, "nope", &d);
	ck_assert_int_eq(vault_begin_connect(v, sc, &cfg, "nope", uid("alice"), SH, &d, ACT, NOW,
	    &b), CS_ENOENT);
	ck_assert_ptr_null(b.authorize_url);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_connects", NULL), 0);
	scope_set_clear(&d.selected);
	free(rid);
}
END_TEST

/* --- finish: bad states ------------------------------------------------- */

START_TEST(test_vault_finish_bad_state)
{
	struct vault_finish f;
	char *rid = request("alice", "coder", "github", "issues:read", NOW);
	/* Unknown and absent state. */
	ck_assert_int_eq(finish_full("github", "no-such-state", sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_BAD_STATE);
	ck_assert_ptr_nonnull(f.why);
	ck_assert_ptr_null(f.consent_id);
	vault_finish_clear(&f);
	ck_assert_int_eq(finish_full("github", NULL, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_BAD_STATE);
	vault_finish_clear(&f);

	/* Another session: refused, and the state is spent. */
	char *state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH_OTHER, "alice", NOW, &f),
	    VAULT_BAD_STATE);
	vault_finish_clear(&f);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_BAD_STATE);
	vault_finish_clear(&f);
	free(state);

	/* An answer for github arriving at gitlab's redirect URI. */
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("gitlab", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_BAD_STATE);
	vault_finish_clear(&f);
	free(state);

	/* iss: required when the provider advertises RFC 9207, exact. */
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, "https://evil.test", NULL, SH, "alice", NOW, &f),
	    VAULT_BAD_STATE);
	ck_assert_str_eq(f.why, "The answer did not come from the expected provider.");
	vault_finish_clear(&f);
	free(state);
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, NULL, NULL, SH, "alice", NOW, &f),
	    VAULT_BAD_STATE);
	vault_finish_clear(&f);
	free(state);
	/* iss is checked before the error is believed. */
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, "https://evil.test", "access_denied", SH,
	    "alice", NOW, &f), VAULT_BAD_STATE);
	vault_finish_clear(&f);
	free(state);

	/* Expired. */
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice",
	    NOW + VAULT_CONNECT_TTL, &f), VAULT_BAD_STATE);
	vault_finish_clear(&f);
	free(state);

	/* Another user in the right session (cannot happen, refused anyway). */
	state = begin(rid, "alice", "issues:read", NOW);
	free(request("bob", "coder", "github", "issues:read", NOW));
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "bob", NOW, &f),
	    VAULT_BAD_STATE);
	vault_finish_clear(&f);
	free(state);

	/* Nothing was exchanged, nothing went live. */
	pthread_mutex_lock(&sv.mu);
	ck_assert_str_eq(sv.last_code_req, "");
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records", NULL), 0);
	ck_assert_int_ge(audits("vault.connect.failed"), 8);

	/* A used state is spent: replay after success. */
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_CONNECTED);
	vault_finish_clear(&f);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_BAD_STATE);
	vault_finish_clear(&f);
	free(state);
	free(rid);
}
END_TEST

START_TEST(test_vault_finish_iss_optional_when_not_advertised)
{
	struct vault_finish f;
	sv.iss_supported = 0;
	char *rid = request("alice", "coder", "github", "issues:read", NOW);
	/* A fresh vault: its provider discovers the metadata without RFC 9207. */
	vault_free(v);
	ck_assert_int_eq(vault_new(&cfg, &mk, &v), CS_OK);
	char *state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, "https://evil.test", NULL, SH, "alice", NOW, &f),
	    VAULT_BAD_STATE);                         /* present: must still match */
	vault_finish_clear(&f);
	free(state);
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, NULL, NULL, SH, "alice", NOW, &f),
	    VAULT_CONNECTED);
	vault_finish_clear(&f);
	free(state);
	free(rid);
}
END_TEST

/* --- finish: outcomes --------------------------------------------------- */

START_TEST(test_vault_finish_connected)
{
	char *kid = connect_alice(NOW);
	struct consent k = load(kid, NOW);
	ck_assert_str_eq(k.state, "live");
	ck_set(&k.granted, "issues:read");
	consent_clear(&k);
	char *ps = q_text("SELECT provider_scopes FROM vault_records WHERE consent_id = ?1", kid);
	ck_assert_str_eq(ps, "issues:read repo");
	free(ps);
	ck_assert_int_eq(q_int("SELECT access_expires_at FROM vault_records WHERE consent_id = ?1",
	    kid), NOW + 3600);
	char *mkid = q_text("SELECT master_kid FROM vault_records WHERE consent_id = ?1", kid);
	ck_assert_str_eq(mkid, mk.kid);
	free(mkid);
	ck_assert(vault_has_record(sc, kid));
	ck_assert(!vault_has_record(sc, "nope"));
	/* The code exchange carried the verifier and the redirect URI. */
	pthread_mutex_lock(&sv.mu);
	ck_assert_ptr_nonnull(strstr(sv.last_code_req, "code=code-1"));
	ck_assert_ptr_nonnull(strstr(sv.last_code_req, "code_verifier="));
	ck_assert_ptr_nonnull(strstr(sv.last_code_req, "oauth%2Fcallback%2Fgithub"));
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(audits("vault.connected"), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_connects", NULL), 0);
	/* Flow A now grants. */
	ck_assert_int_eq(exchange("alice", "coder", "github", "issues:read", NOW + 1), CONSENT_GRANT);
	ck_no_plaintext();
	free(kid);
}
END_TEST

START_TEST(test_vault_finish_narrowed)
{
	struct vault_finish f;
	srv_set_tokens("AT-secret-1", "RT-secret-1", "repo issues:read", 3600);
	char *rid = request("alice", "coder", "github", "issues:read issues:write", NOW);
	char *state = begin(rid, "alice", "issues:read issues:write", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_NARROWED);
	ck_set(&f.dropped, "issues:write");
	struct consent k = load(f.consent_id, NOW);
	ck_set(&k.granted, "issues:read");
	ck_set(&k.declined, "issues:write");
	consent_clear(&k);
	char *ps = q_text("SELECT provider_scopes FROM vault_records WHERE consent_id = ?1",
	    f.consent_id);
	ck_assert_str_eq(ps, "issues:read repo");
	free(ps);
	/* What the done page names as left out is kept with the request. */
	char *nar = q_text("SELECT narrowed FROM consent_requests WHERE id = ?1", rid);
	ck_assert_str_eq(nar, "issues:write");
	free(nar);
	vault_finish_clear(&f);
	free(state);
	free(rid);

	/* Granted only what no chosen scope can live with: nothing, tokens revoked. */
	srv_set_tokens("AT-secret-2", "RT-secret-2", "repo", 3600);
	rid = request("alice", "helper", "github", "issues:read issues:write", NOW);
	state = begin(rid, "alice", "issues:read issues:write", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_FAILED);
	ck_assert_ptr_null(f.consent_id);
	vault_finish_clear(&f);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 2);
	ck_assert_str_eq(sv.revoked[0], "refresh_token:RT-secret-2");
	ck_assert_str_eq(sv.revoked[1], "access_token:AT-secret-2");
	pthread_mutex_unlock(&sv.mu);
	free(state);
	free(rid);
}
END_TEST

START_TEST(test_vault_finish_too_much_revokes)
{
	struct vault_finish f;
	srv_set_tokens("AT-secret-1", "RT-secret-1", "admin issues:read repo", 3600);
	char *rid = request("alice", "coder", "github", "issues:read", NOW);
	char *state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_TOO_MUCH);
	ck_assert_ptr_null(f.consent_id);
	ck_assert_str_eq(f.request_id, rid);
	vault_finish_clear(&f);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 2);
	ck_assert_str_eq(sv.revoked[0], "refresh_token:RT-secret-1");
	ck_assert_str_eq(sv.revoked[1], "access_token:AT-secret-1");
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records", NULL), 0);
	char *status = q_text("SELECT status FROM consent_requests WHERE id = ?1", rid);
	ck_assert_str_eq(status, "pending");
	free(status);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.connect.failed' "
	    "AND outcome = 'too_much'", NULL), 1);
	ck_no_plaintext();
	free(state);
	free(rid);
}
END_TEST

/* The request changes (a merged scope) while the person is at the provider:
 * the callback grants nothing, revokes the tokens it got and says so. */
/* The request changes (a merged scope) while the person is at the provider:
 * the callback grants nothing, never exchanges the code, and says so. */
START_TEST(test_vault_finish_request_changed_meanwhile)
{
	struct vault_finish f;
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 3600);
	char *rid = request("alice", "coder", "github", "issues:read", NOW);
	char *state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(exchange("alice", "coder", "github", "issues:read issues:write", NOW + 1),
	    CONSENT_REQUIRED);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW + 2, &f),
	    VAULT_CHANGED);
	ck_assert_ptr_null(f.consent_id);
	ck_assert_str_eq(f.request_id, rid);
	vault_finish_clear(&f);
	/* The code was never exchanged: no tokens exist to revoke. */
	pthread_mutex_lock(&sv.mu);
	ck_assert_str_eq(sv.last_code_req, "");
	ck_assert_int_eq(sv.nrevoked, 0);
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records", NULL), 0);
	char *status = q_text("SELECT status FROM consent_requests WHERE id = ?1", rid);
	ck_assert_str_eq(status, "pending");
	free(status);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.connect.failed' "
	    "AND outcome = 'changed'", NULL), 1);
	ck_no_plaintext();
	free(state);
	free(rid);
}
END_TEST

/* The connect path binds its selection to the version shown, too. */
START_TEST(test_vault_begin_refuses_changed_request)
{
	char *rid = request("alice", "coder", "github", "issues:read", NOW);
	struct consent_decision d = decision("issues:read");
	struct vault_begin b = { NULL, NULL };
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(exchange("alice", "coder", "github", "issues:read issues:write", NOW + 1),
	    CONSENT_REQUIRED);
	ck_assert_int_eq(vault_begin_connect(v, sc, &cfg, rid, uid("alice"), SH, &d, ACT, NOW + 2, &b),
	    CS_ESTALE);
	ck_assert_ptr_null(b.authorize_url);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_connects", NULL), 0);
	scope_set_clear(&d.selected);
	free(rid);
}
END_TEST

START_TEST(test_vault_finish_cancelled_and_errors)
{
	struct vault_finish f;
	char *rid = request("alice", "coder", "github", "issues:read", NOW);
	char *state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, "access_denied", SH, "alice", NOW, &f),
	    VAULT_CANCELLED);
	ck_assert_str_eq(f.request_id, rid);
	vault_finish_clear(&f);
	free(state);
	char *status = q_text("SELECT status FROM consent_requests WHERE id = ?1", rid);
	ck_assert_str_eq(status, "pending");
	free(status);
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, "server_error", SH, "alice", NOW, &f),
	    VAULT_FAILED);
	vault_finish_clear(&f);
	free(state);
	/* The provider refuses the code. */
	pthread_mutex_lock(&sv.mu);
	sv.code_status = 400;
	snprintf(sv.code_body, sizeof sv.code_body, "{\"error\":\"invalid_grant\"}");
	pthread_mutex_unlock(&sv.mu);
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_FAILED);
	vault_finish_clear(&f);
	free(state);
	/* Not Bearer: revoked, failed. */
	pthread_mutex_lock(&sv.mu);
	sv.code_status = 200;
	snprintf(sv.code_body, sizeof sv.code_body, "{\"access_token\":\"AT-secret-9\","
	    "\"token_type\":\"DPoP\",\"scope\":\"issues:read repo\"}");
	pthread_mutex_unlock(&sv.mu);
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_FAILED);
	vault_finish_clear(&f);
	free(state);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 1);
	ck_assert_str_eq(sv.revoked[0], "access_token:AT-secret-9");
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 0);
	/* The request expired while the person was at the provider: undone. */
	srv_set_tokens("AT-secret-3", NULL, NULL, 0);
	state = begin(rid, "alice", "issues:read", NOW + 500);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW + 600, &f),
	    VAULT_FAILED);
	vault_finish_clear(&f);
	free(state);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records", NULL), 0);
	pthread_mutex_lock(&sv.mu);
	ck_assert_str_eq(sv.revoked[sv.nrevoked - 1], "access_token:AT-secret-3");
	pthread_mutex_unlock(&sv.mu);
	free(rid);
}
END_TEST

/* An approved release: the approval is used up in the transaction that
 * records the release.  The second redemption (a lost race) is refused with
 * CS_ESTALE, its refusal audited, and leaves no release entry behind. */
START_TEST(test_vault_release_approved_one_transaction)
{
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 3600);
	char *kid = connect_alice(NOW);
	struct consent k = load(kid, NOW);
	struct vault_release r;
	char sql[512];
	snprintf(sql, sizeof sql, "INSERT INTO approvals (id, consent_id, user_id, agent, resource, "
	    "action, parameters, digest, status, created_at, expires_at, decided_at, interval) "
	    "VALUES ('apprAAAAAAAAAAAAAAAAAA', '%s', %lld, 'coder', 'github', 'list_issues', '{}', "
	    "'RBNvo1WzZ4oRRq0W9-hknpT7T8If536DEMBg9hyq_4o', 'approved', %lld, %lld, %lld, 5)",
	    kid, (long long)uid("alice"), (long long)NOW, (long long)NOW + 600, (long long)NOW + 1);
	raw_exec(sql);
	memset(&r, 0, sizeof r);
	ck_assert_int_eq(vault_release_approved(v, sc, &cfg, &k, "list_issues",
	    "apprAAAAAAAAAAAAAAAAAA", ACT, NOW + 2, &r), CS_OK);
	ck_assert_str_eq(r.access_token, "AT-secret-1");
	vault_release_clear(&r);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.released' AND "
	    "detail = 'action=list_issues; approval=apprAAAAAAAAAAAAAAAAAA' AND consent_id = ?1", kid), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'approval.released'", NULL), 1);
	/* A token released is a use of its consent (/me's "last used"), recorded
	 * in the release's transaction. */
	ck_assert_int_eq(q_int("SELECT last_used_at FROM consents WHERE id = ?1", kid), NOW + 2);
	char *status = q_text("SELECT status FROM approvals WHERE id = ?1", "apprAAAAAAAAAAAAAAAAAA");
	ck_assert_str_eq(status, "used");
	free(status);
	/* The loser of the race: no token, no release entry, the refusal recorded. */
	memset(&r, 0, sizeof r);
	ck_assert_int_eq(vault_release_approved(v, sc, &cfg, &k, "list_issues",
	    "apprAAAAAAAAAAAAAAAAAA", ACT, NOW + 3, &r), CS_ESTALE);
	ck_assert_ptr_null(r.access_token);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.released'", NULL), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'approval.refused'", NULL), 1);
	ck_assert_int_eq(q_int("SELECT last_used_at FROM consents WHERE id = ?1", kid), NOW + 2);
	/* A release failing before its transaction (the consent ended) uses nothing up. */
	raw_exec("UPDATE approvals SET status = 'approved', used_at = 0 WHERE id = 'apprAAAAAAAAAAAAAAAAAA'");
	k.reconnect_required = true;
	ck_assert_int_eq(vault_release_approved(v, sc, &cfg, &k, "list_issues",
	    "apprAAAAAAAAAAAAAAAAAA", ACT, NOW + 4, &r), CS_EPERM);
	status = q_text("SELECT status FROM approvals WHERE id = ?1", "apprAAAAAAAAAAAAAAAAAA");
	ck_assert_str_eq(status, "approved");
	free(status);
	ck_assert_int_eq(vault_release_approved(v, sc, &cfg, &k, "list_issues", NULL, ACT, NOW + 4,
	    &r), CS_EINVAL);
	consent_clear(&k);
	ck_no_plaintext();
	free(kid);
}
END_TEST

/* --- sealing ------------------------------------------------------------ */

START_TEST(test_vault_seal_round_trip)
{
	/* No scope and no expiry from the provider: the mapping, and an hour. */
	srv_set_tokens("AT-secret-1", "RT-secret-1", NULL, 0);
	char *kid = connect_alice(NOW);
	struct vault_release r;
	ck_assert_int_eq(release(kid, NOW + 10, &r), CS_OK);
	ck_assert_str_eq(r.access_token, "AT-secret-1");
	ck_assert_str_eq(r.token_type, "Bearer");
	ck_assert_str_eq(r.scope, "issues:read repo");
	ck_assert_int_eq(r.expires_in, 3600 - 10);
	vault_release_clear(&r);
	ck_assert_ptr_null(r.access_token);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.released' AND "
	    "detail = 'action=list_issues' AND consent_id = ?1", kid), 1);
	ck_no_plaintext();
	/* A consent without a record. */
	char *rid = request("alice", "coder", "notes", "read", NOW);
	struct consent_decision d = decision("read");
	char *nk = NULL;
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(tu_decide(sc, &cfg, rid, uid("alice"), &d, ACT, NOW, &nk), CS_OK);
	ck_assert_int_eq(release(nk, NOW, &r), CS_ENOENT);      /* notes has no provider */
	scope_set_clear(&d.selected);
	free(nk);
	free(rid);
	free(kid);
}
END_TEST

START_TEST(test_vault_ciphertext_swapped_between_rows)
{
	char *k1 = connect_alice(NOW);
	srv_set_tokens("AT-secret-2", "RT-secret-2", "issues:read repo", 3600);
	/* Two agents never share a provider token: helper gets its own record. */
	char *k2 = connect_as("alice", "helper", "github", "issues:read", NOW);
	ck_release(k1, NOW, "AT-secret-1");
	ck_release(k2, NOW, "AT-secret-2");
	/* An attacker with the database swaps the ciphertexts of the two rows. */
	raw_exec("CREATE TEMP TABLE t AS SELECT consent_id, access_sealed FROM vault_records");
	sqlite3_stmt *s = NULL;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "UPDATE vault_records SET access_sealed = "
	    "(SELECT t.access_sealed FROM t WHERE t.consent_id <> vault_records.consent_id)", -1, &s,
	    NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
	struct vault_release r;
	ck_assert_int_eq(release(k1, NOW, &r), CS_ECRYPTO);
	ck_assert_ptr_null(r.access_token);
	ck_assert_int_eq(release(k2, NOW, &r), CS_ECRYPTO);
	ck_assert_ptr_null(r.access_token);
	/* Pointing a record at another consent does not help either. */
	raw_exec("UPDATE vault_records SET access_sealed = (SELECT t.access_sealed FROM t WHERE "
	    "t.consent_id = vault_records.consent_id)");
	ck_release(k1, NOW, "AT-secret-1");
	raw_exec("DELETE FROM vault_records WHERE consent_id IN (SELECT consent_id FROM t WHERE "
	    "rowid = 2)");
	sqlite3_stmt *u = NULL;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "UPDATE vault_records SET consent_id = ?1", -1, &u,
	    NULL), SQLITE_OK);
	char *other = q_text("SELECT consent_id FROM t WHERE rowid = 2", NULL);
	sqlite3_bind_text(u, 1, other, -1, SQLITE_TRANSIENT);
	ck_assert_int_eq(sqlite3_step(u), SQLITE_DONE);
	sqlite3_finalize(u);
	ck_assert_int_eq(release(other, NOW, &r), CS_ECRYPTO);
	ck_assert_int_eq(audits("vault.released"), 3);           /* failures release nothing */
	free(other);
	free(k1);
	free(k2);
}
END_TEST

/* Rewrites the access ciphertext of kid's record through f. */
static void tamper(const char *kid, void (*f)(unsigned char *, int *))
{
	sqlite3_stmt *s = NULL;
	unsigned char blob[1024];
	int n;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "SELECT access_sealed FROM vault_records WHERE "
	    "consent_id = ?1", -1, &s, NULL), SQLITE_OK);
	sqlite3_bind_text(s, 1, kid, -1, SQLITE_TRANSIENT);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
	n = sqlite3_column_bytes(s, 0);
	ck_assert_int_le(n, (int)sizeof blob);
	if (n > 0)
		memcpy(blob, sqlite3_column_blob(s, 0), (size_t)n);
	sqlite3_finalize(s);
	f(blob, &n);
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "UPDATE vault_records SET access_sealed = ?2 "
	    "WHERE consent_id = ?1", -1, &s, NULL), SQLITE_OK);
	sqlite3_bind_text(s, 1, kid, -1, SQLITE_TRANSIENT);
	sqlite3_bind_blob(s, 2, blob, n, SQLITE_TRANSIENT);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
}

static unsigned char saved[1024];
static int nsaved;
static void t_save(unsigned char *b, int *n) { memcpy(saved, b, (size_t)*n); nsaved = *n; }
static void t_restore(unsigned char *b, int *n) { memcpy(b, saved, (size_t)nsaved); *n = nsaved; }
static void t_flip(unsigned char *b, int *n) { b[*n / 2] ^= 0x01; }
static void t_flip_nonce(unsigned char *b, int *n) { (void)n; b[0] ^= 0x80; }
static void t_flip_tag(unsigned char *b, int *n) { b[*n - 1] ^= 0x01; }
static void t_truncate(unsigned char *b, int *n) { (void)b; *n -= 1; }
static void t_short(unsigned char *b, int *n) { (void)b; *n = 20; }
static void t_empty(unsigned char *b, int *n) { (void)b; *n = 0; }

START_TEST(test_vault_tampered_ciphertexts)
{
	char *kid = connect_alice(NOW);
	void (*bad[])(unsigned char *, int *) = { t_flip, t_flip_nonce, t_flip_tag, t_truncate,
		t_short, t_empty };
	tamper(kid, t_save);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct vault_release r;
		tamper(kid, bad[i]);
		ck_assert_msg(release(kid, NOW, &r) == CS_ECRYPTO, "tamper %zu accepted", i);
		ck_assert_ptr_null(r.access_token);
		tamper(kid, t_restore);
		ck_release(kid, NOW, "AT-secret-1");
	}
	free(kid);
}
END_TEST

START_TEST(test_vault_wrong_master_key)
{
	char *kid = connect_alice(NOW);
	struct vault *v2 = NULL, *v3 = NULL;
	struct master_key same_kid, other_kid;
	struct vault_release r;
	/* Other bytes under the same key id: the tag does not verify. */
	memset(&same_kid, 0x22, sizeof same_kid);
	memcpy(same_kid.kid, mk.kid, MASTER_KID_LEN + 1);
	ck_assert_int_eq(vault_new(&cfg, &same_kid, &v2), CS_OK);
	ck_assert_int_eq(release_with(v2, sc, kid, NOW, &r), CS_ECRYPTO);
	ck_assert_ptr_null(r.access_token);
	/* Another key id: refused before any decryption (clear message). */
	memset(&other_kid, 0x11, sizeof other_kid);
	memcpy(other_kid.kid, "ffeeddccbbaa9988", MASTER_KID_LEN + 1);
	ck_assert_int_eq(vault_new(&cfg, &other_kid, &v3), CS_OK);
	ck_assert_int_eq(release_with(v3, sc, kid, NOW, &r), CS_ECRYPTO);
	vault_free(v2);
	vault_free(v3);
	ck_release(kid, NOW, "AT-secret-1");
	free(kid);
}
END_TEST

/* --- cascade and moves -------------------------------------------------- */

START_TEST(test_vault_cascade_revoke_moves_to_outbox)
{
	char *kid = connect_alice(NOW);
	char *rec_id = q_text("SELECT id FROM vault_records WHERE consent_id = ?1", kid);
	int64_t len = q_int("SELECT length(access_sealed) FROM vault_records WHERE consent_id = ?1",
	    kid);
	ck_assert_int_eq(tu_revoke(sc, kid, uid("alice"), ACT, "user", NOW + 5, false), CS_OK);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox WHERE record_id = ?1", rec_id), 1);
	ck_assert_int_eq(q_int("SELECT length(access_sealed) FROM vault_outbox", NULL), len);
	ck_assert_int_eq(q_int("SELECT next_attempt_at FROM vault_outbox", NULL), NOW + 5);
	ck_assert_int_eq(q_int("SELECT refresh_sealed IS NOT NULL FROM vault_outbox", NULL), 1);
	char *c = q_text("SELECT consent_id || '/' || subject || '/' || resource || '/' || master_kid "
	    "FROM vault_outbox", NULL);
	char want[256];
	snprintf(want, sizeof want, "%s/alice/github/%s", kid, mk.kid);
	ck_assert_str_eq(c, want);
	free(c);
	ck_assert(!vault_has_record(sc, kid));
	/* Nothing is released from the outbox. */
	struct vault_release r;
	ck_assert_int_eq(release(kid, NOW + 6, &r), CS_EPERM);
	ck_no_plaintext();
	free(rec_id);
	free(kid);
}
END_TEST

START_TEST(test_vault_cascade_replaced)
{
	/* Replaced by a decision without the vault (the old consent's record goes). */
	char *kid = connect_alice(NOW);
	char *rid = request("alice", "coder", "github", "issues:write", NOW + 1);
	struct consent_decision d = decision("issues:read issues:write");
	char *nk = NULL;
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(tu_decide(sc, &cfg, rid, uid("alice"), &d, ACT, NOW + 1, &nk), CS_OK);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox WHERE consent_id = ?1", kid), 1);
	scope_set_clear(&d.selected);
	free(nk);
	free(rid);
	free(kid);

	/* Replaced by a new connection with another mapping: old record out, new in. */
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 3600);
	kid = connect_as("bob", "coder", "github", "issues:read", NOW);
	srv_set_tokens("AT-secret-2", "RT-secret-2", "issues:read issues:write repo", 3600);
	nk = connect_as("bob", "coder", "github", "issues:read issues:write", NOW + 2);
	struct consent k = load(kid, NOW + 2);
	ck_assert_str_eq(k.state, "revoked");
	consent_clear(&k);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox WHERE consent_id = ?1", kid), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records WHERE consent_id = ?1", nk), 1);
	ck_release(nk, NOW + 2, "AT-secret-2");
	free(kid);
	free(nk);
}
END_TEST

START_TEST(test_vault_begin_moves_exact_record)
{
	char *kid = connect_alice(NOW);
	char *rec_id = q_text("SELECT id FROM vault_records WHERE consent_id = ?1", kid);
	char *before = q_text("SELECT hex(access_sealed) FROM vault_records WHERE id = ?1", rec_id);
	/* The agent asks again (a longer duration, say): the same mapping. */
	char *rid = request("alice", "coder", "github", "issues:write", NOW + 1);
	struct consent_decision d = decision("issues:read");
	struct vault_begin b = { NULL, NULL };
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(vault_begin_connect(v, sc, &cfg, rid, uid("alice"), SH, &d, ACT, NOW + 1,
	    &b), CS_OK);
	ck_assert_ptr_null(b.authorize_url);
	ck_assert_ptr_nonnull(b.consent_id);
	ck_assert_str_ne(b.consent_id, kid);
	/* Same record, under the new consent, re-sealed; the old consent revoked; no outbox. */
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records WHERE id = ?1 AND "
	    "reserved_for IS NULL", rec_id), 1);
	char *now_kid = q_text("SELECT consent_id FROM vault_records WHERE id = ?1", rec_id);
	ck_assert_str_eq(now_kid, b.consent_id);
	free(now_kid);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 0);
	struct consent k = load(kid, NOW + 1);
	ck_assert_str_eq(k.state, "revoked");
	consent_clear(&k);
	ck_assert_int_eq(audits("vault.record.moved"), 1);
	ck_release(b.consent_id, NOW + 1, "AT-secret-1");
	struct vault_release r;
	ck_assert_int_eq(release(kid, NOW + 1, &r), CS_EPERM);
	/* Re-sealed: a new ciphertext (fresh nonce, new additional data). */
	char *after = q_text("SELECT hex(access_sealed) FROM vault_records WHERE id = ?1", rec_id);
	ck_assert_str_ne(after, before);
	free(after);
	free(before);
	vault_begin_clear(&b);
	scope_set_clear(&d.selected);

	/* Another mapping: a new connection, the live consent untouched until the callback.
	 * (issues:write was just unticked: the person first lets the agent ask again.) */
	char *cur = q_text("SELECT consent_id FROM vault_records", NULL);
	bool lifted = false;
	ck_assert_int_eq(tu_allow_asking(sc, &cfg, rid, uid("alice"), ACT, NOW + 2, &lifted),
	    CS_OK);
	ck_assert(lifted);
	char *rid2 = request("alice", "coder", "github", "issues:write", NOW + 2);
	char *state = begin(rid2, "alice", "issues:read issues:write", NOW + 2);
	k = load(cur, NOW + 2);
	ck_assert_str_eq(k.state, "live");
	consent_clear(&k);
	free(state);
	free(rid2);
	free(cur);
	free(rid);
	free(rec_id);
	free(kid);
}
END_TEST

/* --- release and refresh ------------------------------------------------ */

START_TEST(test_vault_release_refreshes_near_expiry)
{
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 100);
	srv_set_refresh(200, "{\"access_token\":\"AT-secret-2\",\"token_type\":\"bearer\","
	    "\"refresh_token\":\"RT-secret-2\",\"expires_in\":3600}", 0);
	char *kid = connect_alice(NOW);
	ck_release(kid, NOW, "AT-secret-1");                 /* 100 s left > margin 60 */
	ck_assert_int_eq(srv_refreshes(), 0);
	ck_release(kid, NOW + 40, "AT-secret-2");            /* 60 s left: refreshed first */
	ck_assert_int_eq(srv_refreshes(), 1);
	pthread_mutex_lock(&sv.mu);
	ck_assert_str_eq(sv.last_refresh_token, "RT-secret-1");
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(q_int("SELECT access_expires_at FROM vault_records", NULL), NOW + 40 + 3600);
	ck_release(kid, NOW + 41, "AT-secret-2");            /* fresh: no second refresh */
	ck_assert_int_eq(srv_refreshes(), 1);
	/* The rotated refresh token replaced the old one. */
	srv_set_refresh(200, "{\"access_token\":\"AT-secret-3\",\"token_type\":\"Bearer\","
	    "\"expires_in\":3600}", 0);
	ck_release(kid, NOW + 40 + 3600 - 10, "AT-secret-3");
	pthread_mutex_lock(&sv.mu);
	ck_assert_str_eq(sv.last_refresh_token, "RT-secret-2");
	pthread_mutex_unlock(&sv.mu);
	/* No rotation this time: the old refresh token stays. */
	srv_set_refresh(200, "{\"access_token\":\"AT-secret-4\",\"token_type\":\"Bearer\","
	    "\"expires_in\":3600}", 0);
	ck_release(kid, NOW + 40 + 7200, "AT-secret-4");
	pthread_mutex_lock(&sv.mu);
	ck_assert_str_eq(sv.last_refresh_token, "RT-secret-2");
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(audits("vault.refreshed"), 3);
	ck_no_plaintext();
	free(kid);
}
END_TEST

START_TEST(test_vault_release_refresh_more_scopes_refused)
{
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 30);
	srv_set_refresh(200, "{\"access_token\":\"AT-secret-2\",\"token_type\":\"Bearer\","
	    "\"scope\":\"admin issues:read repo\",\"expires_in\":3600}", 0);
	char *kid = connect_alice(NOW);
	struct vault_release r;
	ck_assert_int_eq(release(kid, NOW, &r), CS_EPERM);
	ck_assert_ptr_null(r.access_token);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 1);
	ck_assert_str_eq(sv.revoked[0], "access_token:AT-secret-2");
	pthread_mutex_unlock(&sv.mu);
	struct consent k = load(kid, NOW);
	ck_assert_str_eq(k.state, "reconnect_required");
	consent_clear(&k);
	free(kid);
}
END_TEST

struct racer {
	const char *kid;
	int         ok;
};

static void *race_main(void *arg)
{
	struct racer *rc = arg;
	struct store_conn *c = store_conn(st);
	struct vault_release r;
	must(c != NULL);
	memset(&r, 0, sizeof r);
	enum cs_err e = release_with(v, c, rc->kid, NOW + 50, &r);
	rc->ok = e == CS_OK && r.access_token != NULL && strcmp(r.access_token, "AT-secret-2") == 0;
	vault_release_clear(&r);
	return NULL;
}

START_TEST(test_vault_release_single_flight)
{
	enum { N = 20 };
	pthread_t th[N];
	struct racer rc[N];
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 100);
	srv_set_refresh(200, "{\"access_token\":\"AT-secret-2\",\"token_type\":\"Bearer\","
	    "\"refresh_token\":\"RT-secret-2\",\"expires_in\":3600}", 300);
	char *kid = connect_alice(NOW);
	for (int i = 0; i < N; i++) {
		rc[i].kid = kid;
		rc[i].ok = 0;
		ck_assert_int_eq(pthread_create(&th[i], NULL, race_main, &rc[i]), 0);
	}
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < N; i++)
		ck_assert_msg(rc[i].ok, "thread %d got no fresh token", i);
	ck_assert_int_eq(srv_refreshes(), 1);
	ck_assert_int_eq(audits("vault.refreshed"), 1);
	ck_assert_int_eq(audits("vault.released"), N);
	free(kid);
}
END_TEST

START_TEST(test_vault_release_invalid_grant_reconnect)
{
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 30);
	srv_set_refresh(400, "{\"error\":\"invalid_grant\"}", 0);
	char *kid = connect_alice(NOW);
	ck_assert_int_eq(exchange("alice", "coder", "github", "issues:read", NOW), CONSENT_GRANT);
	struct vault_release r;
	ck_assert_int_eq(release(kid, NOW, &r), CS_EPERM);
	ck_assert_ptr_null(r.access_token);
	struct consent k = load(kid, NOW);
	ck_assert_str_eq(k.state, "reconnect_required");
	ck_assert(k.reconnect_required);
	ck_assert(consent_is_live(&k, NOW));
	consent_clear(&k);
	ck_assert_int_eq(audits("vault.reconnect_required"), 1);
	/* No second call to the provider: the consent says reconnect. */
	ck_assert_int_eq(release(kid, NOW + 1, &r), CS_EPERM);
	ck_assert_int_eq(srv_refreshes(), 1);
	/* Flow A asks the person again; /me shows the state. */
	ck_assert_int_eq(exchange("alice", "coder", "github", "issues:read", NOW + 2),
	    CONSENT_REQUIRED);
	struct consent *ks = NULL;
	size_t n = 0;
	ck_assert_int_eq(consent_list_for_user(sc, uid("alice"), NOW + 2, 10, &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(ks[0].state, "reconnect_required");
	consent_list_free(ks, n);
	/* Reconnecting goes to the provider (the dead record does not move). */
	char *rid = q_text("SELECT id FROM consent_requests WHERE status = 'pending'", NULL);
	char *state = begin(rid, "alice", "issues:read", NOW + 3);
	srv_set_tokens("AT-secret-5", "RT-secret-5", "issues:read repo", 3600);
	struct vault_finish f;
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW + 3, &f),
	    VAULT_CONNECTED);
	ck_release(f.consent_id, NOW + 3, "AT-secret-5");
	ck_assert_int_eq(exchange("alice", "coder", "github", "issues:read", NOW + 10), CONSENT_GRANT);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox WHERE consent_id = ?1", kid), 1);
	vault_finish_clear(&f);
	free(state);
	free(rid);
	free(kid);
}
END_TEST

START_TEST(test_vault_release_provider_down)
{
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 100);
	char *kid = connect_alice(NOW);
	srv_down();
	/* Refresh fails transiently: the unexpired token is still released... */
	ck_release(kid, NOW + 50, "AT-secret-1");
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.released' AND "
	    "outcome = 'refresh_failed'", NULL), 1);
	/* ...an expired one never. */
	struct vault_release r;
	ck_assert_int_eq(release(kid, NOW + 100, &r), CS_EIO);
	ck_assert_ptr_null(r.access_token);
	free(kid);
}
END_TEST

START_TEST(test_vault_release_expired_without_refresh)
{
	srv_set_tokens("AT-secret-1", NULL, "issues:read repo", 100);
	char *kid = connect_alice(NOW);
	ck_release(kid, NOW + 50, "AT-secret-1");            /* near expiry, nothing to refresh */
	struct vault_release r;
	ck_assert_int_eq(release(kid, NOW + 100, &r), CS_EPERM);
	struct consent k = load(kid, NOW + 100);
	ck_assert_str_eq(k.state, "reconnect_required");
	consent_clear(&k);
	free(kid);
}
END_TEST

/* --- the outbox ---------------------------------------------------------- */

START_TEST(test_vault_outbox_revokes_refresh_then_access)
{
	char *kid = connect_alice(NOW);
	int fin = -1;
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "admin", NOW + 1, false), CS_OK);
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 1, &fin), CS_OK);
	ck_assert_int_eq(fin, 1);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 2);
	ck_assert_str_eq(sv.revoked[0], "refresh_token:RT-secret-1");
	ck_assert_str_eq(sv.revoked[1], "access_token:AT-secret-1");
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.revoked' AND "
	    "outcome = 'ok' AND consent_id = ?1", kid), 1);
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 2, &fin), CS_OK);
	ck_assert_int_eq(fin, 0);
	free(kid);
}
END_TEST

START_TEST(test_vault_outbox_provider_down_retries)
{
	char *kid = connect_alice(NOW);
	int fin = -1;
	uint16_t port = sv.port;
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "admin", NOW + 1, false), CS_OK);
	srv_down();
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 1, &fin), CS_OK);
	ck_assert_int_eq(fin, 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 1);
	ck_assert_int_eq(q_int("SELECT attempts FROM vault_outbox", NULL), 1);
	ck_assert_int_eq(q_int("SELECT next_attempt_at FROM vault_outbox", NULL), NOW + 1 + 10);
	ck_assert_int_eq(audits("vault.revoke_retry"), 1);
	/* Not due yet: nothing happens. */
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 5, &fin), CS_OK);
	ck_assert_int_eq(audits("vault.revoke_retry"), 1);
	/* Still down: the backoff doubles. */
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 11, &fin), CS_OK);
	ck_assert_int_eq(q_int("SELECT next_attempt_at FROM vault_outbox", NULL), NOW + 11 + 20);
	/* Back up: revoked, erased. */
	srv_up(port);
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 31, &fin), CS_OK);
	ck_assert_int_eq(fin, 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 0);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 2);
	ck_assert_str_eq(sv.revoked[0], "refresh_token:RT-secret-1");
	pthread_mutex_unlock(&sv.mu);
	free(kid);
}
END_TEST

START_TEST(test_vault_outbox_partial_and_expired)
{
	char *kid = connect_alice(NOW);
	int fin = -1;
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "admin", NOW + 1, false), CS_OK);
	/* The provider refuses to revoke: retried. */
	pthread_mutex_lock(&sv.mu);
	sv.revoke_status = 503;
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 1, &fin), CS_OK);
	ck_assert_int_eq(fin, 0);
	/* The refresh token revoked, then the access token expired: done ("expired"). */
	pthread_mutex_lock(&sv.mu);
	sv.revoke_status = 200;
	pthread_mutex_unlock(&sv.mu);
	raw_exec("UPDATE vault_outbox SET access_expires_at = 0");
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 100, &fin), CS_OK);
	ck_assert_int_eq(fin, 1);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 1);               /* the expired access token is not sent */
	ck_assert_str_eq(sv.revoked[0], "refresh_token:RT-secret-1");
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.revoked' AND "
	    "outcome = 'expired'", NULL), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 0);
	free(kid);
}
END_TEST

START_TEST(test_vault_outbox_unreadable_kept_until_expiry)
{
	char *kid = connect_alice(NOW);
	int fin = -1;
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "admin", NOW + 1, false), CS_OK);
	raw_exec("UPDATE vault_outbox SET consent_id = 'another'");   /* no longer opens */
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 1, &fin), CS_OK);
	ck_assert_int_eq(fin, 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 1);
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 3600, &fin), CS_OK);
	ck_assert_int_eq(fin, 1);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 0);
	pthread_mutex_unlock(&sv.mu);
	free(kid);
}
END_TEST

static Suite *vault_suite(void)
{
	Suite *s = suite_create("vault");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_vault_map_scopes);
	tcase_add_test(tc, test_vault_begin_authorize_url);
	tcase_add_test(tc, test_vault_begin_refuses);
	tcase_add_test(tc, test_vault_finish_bad_state);
	tcase_add_test(tc, test_vault_finish_iss_optional_when_not_advertised);
	tcase_add_test(tc, test_vault_finish_connected);
	tcase_add_test(tc, test_vault_finish_narrowed);
	tcase_add_test(tc, test_vault_finish_too_much_revokes);
	tcase_add_test(tc, test_vault_release_approved_one_transaction);
	tcase_add_test(tc, test_vault_finish_request_changed_meanwhile);
	tcase_add_test(tc, test_vault_begin_refuses_changed_request);
	tcase_add_test(tc, test_vault_finish_cancelled_and_errors);
	tcase_add_test(tc, test_vault_seal_round_trip);
	tcase_add_test(tc, test_vault_ciphertext_swapped_between_rows);
	tcase_add_test(tc, test_vault_tampered_ciphertexts);
	tcase_add_test(tc, test_vault_wrong_master_key);
	tcase_add_test(tc, test_vault_cascade_revoke_moves_to_outbox);
	tcase_add_test(tc, test_vault_cascade_replaced);
	tcase_add_test(tc, test_vault_begin_moves_exact_record);
	tcase_add_test(tc, test_vault_release_refreshes_near_expiry);
	tcase_add_test(tc, test_vault_release_refresh_more_scopes_refused);
	tcase_add_test(tc, test_vault_release_single_flight);
	tcase_add_test(tc, test_vault_release_invalid_grant_reconnect);
	tcase_add_test(tc, test_vault_release_provider_down);
	tcase_add_test(tc, test_vault_release_expired_without_refresh);
	tcase_add_test(tc, test_vault_outbox_revokes_refresh_then_access);
	tcase_add_test(tc, test_vault_outbox_provider_down_retries);
	tcase_add_test(tc, test_vault_outbox_partial_and_expired);
	tcase_add_test(tc, test_vault_outbox_unreadable_kept_until_expiry);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	if (httpc_global_init() != CS_OK)
		return EXIT_FAILURE;
	int rc = tu_run(vault_suite());
	curl_global_cleanup();
	return rc;
}
