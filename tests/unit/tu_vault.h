/* tu_vault.h -- the token vault's unit-test fixture, shared by test_vault.c
 * (records, sealing, release, refresh, outbox) and test_vault_connect.c (the
 * connect flow): a real SQLite file built from migrations/, a hand-filled
 * configuration, fixed master keys and a canned provider on 127.0.0.1 (RFC
 * 8414 metadata, token and revocation endpoints that record what they got).
 * Include it once, from a test program's only file. */
#ifndef CS_TU_VAULT_H
#define CS_TU_VAULT_H
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
#include "vault_connect.h"

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

static inline void send_all(int c, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(c, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static inline void reply(int c, int status, const char *body)
{
	char head[512];
	size_t n = strlen(body);
	int h = snprintf(head, sizeof head, "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
	    "Content-Length: %zu\r\nConnection: close\r\n\r\n", status, n);
	send_all(c, head, (size_t)h);
	send_all(c, body, n);
}

static inline void serve_one(int c)
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
	} else if (strcmp(path, "/token") == 0 || strcmp(path, "/login/oauth/access_token") == 0) {
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
	} else if (strncmp(path, "/api/v3/applications/", 21) == 0 && strncmp(req, "DELETE ", 7) == 0) {
		/* GitHub's token deletion (preset github, github-app): a JSON body. */
		json_t *j = json_loads(body, 0, NULL);
		const char *t = json_string_value(json_object_get(j, "access_token"));
		if (sv.revoke_status == 200 && sv.nrevoked < MAX_REVOKED)
			snprintf(sv.revoked[sv.nrevoked++], sizeof sv.revoked[0], "github:%s", t ? t : "-");
		reply(c, sv.revoke_status == 200 ? 204 : sv.revoke_status, "");
		json_decref(j);
	} else {
		reply(c, 404, "{}");
	}
	pthread_mutex_unlock(&sv.mu);
	form_clear(&f);
}

static inline void *srv_main(void *arg)
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
static inline void srv_up(uint16_t port)
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
static inline void srv_down(void)
{
	if (!sv.running)
		return;
	__atomic_store_n(&sv.stop, 1, __ATOMIC_RELEASE);
	pthread_join(sv.th, NULL);
	close(sv.fd);
	sv.running = 0;
}

static inline void srv_set_tokens(const char *access, const char *refresh, const char *scope,
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

static inline void srv_set_refresh(int status, const char *body, int delay_ms)
{
	pthread_mutex_lock(&sv.mu);
	sv.refresh_status = status;
	snprintf(sv.refresh_body, sizeof sv.refresh_body, "%s", body);
	sv.refresh_delay_ms = delay_ms;
	pthread_mutex_unlock(&sv.mu);
}

static inline int srv_refreshes(void)
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
static const unsigned char SH_OTHER[32] __attribute__((unused)) = { 9, 9, 9 };

static char *allow_coder[] = { "github:issues:read", "github:issues:write", "gitlab:read",
	"notes:read", NULL };
static char *prov_read[] = { "repo", "issues:read", NULL };
static char *prov_write[] = { "repo", "issues:write", NULL };
static char *prov_gl[] = { "read_api", NULL };
static struct config_agent agents[2];
static struct config_resource resources[3];
static struct config_scope scopes[4];

static inline void setup(void)
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

static inline void teardown(void)
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

static inline struct scope_set set(const char *s)
{
	struct scope_set r = { .n = 0 };
	ck_assert_int_eq(scope_set_parse(s, &r), CS_OK);
	return r;
}

static inline void ck_set(const struct scope_set *s, const char *want)
{
	char *j = scope_set_join(s);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(j, want);
	free(j);
}

static inline int64_t q_int(const char *sql, const char *arg)
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

static inline char *q_text(const char *sql, const char *arg)
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

static inline void raw_exec(const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(raw, sql, NULL, NULL, &msg);
	ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : "?");
}

static inline int64_t uid(const char *sub)
{
	return q_int("SELECT id FROM users WHERE subject = ?1", sub);
}

static inline int64_t audits(const char *action)
{
	return q_int("SELECT count(*) FROM audit WHERE action = ?1", action);
}

/* A pending consent request of (sub, agent, resource) for scopes_s. */
static inline char *request(const char *sub, const char *agent, const char *resource,
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

static inline enum consent_outcome exchange(const char *sub, const char *agent,
    const char *resource, const char *scopes_s, int64_t now)
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

static inline struct consent_decision decision(const char *selected)
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
static inline char *url_param(const char *url, const char *name)
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

/* vault_begin_connect of request rid by user with decision d, in session SH. */
static inline enum cs_err begin_as(const char *rid, int64_t user, const struct consent_decision *d,
    int64_t now, struct vault_begin *b)
{
	return vault_begin_connect(v, sc, &cfg, &(struct vault_person){ user, SH, ACT, now },
	    &(struct vault_decision){ rid, d }, b);
}

/* Begins a connect of request rid by sub; returns the state from the URL. */
static inline char *begin(const char *rid, const char *sub, const char *selected, int64_t now)
{
	struct consent_decision d = decision(selected);
	struct vault_begin b = { NULL, NULL, CONSENT_DECIDED };
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(begin_as(rid, uid(sub), &d, now, &b), CS_OK);
	ck_assert_ptr_nonnull(b.authorize_url);
	ck_assert_ptr_null(b.consent_id);
	char *state = url_param(b.authorize_url, "state");
	ck_assert_ptr_nonnull(state);
	vault_begin_clear(&b);
	scope_set_clear(&d.selected);
	return state;
}

static inline enum vault_connect_outcome finish_full(const char *resource, const char *state,
    const char *iss, const char *error, const unsigned char *sh, const char *sub, int64_t now,
    struct vault_finish *f)
{
	memset(f, 0, sizeof *f);
	ck_assert_int_eq(vault_finish_connect(v, sc, &cfg,
	    &(struct vault_person){ uid(sub), sh, ACT, now },
	    &(struct vault_callback){ resource, state, error ? NULL : "code-1", iss, error }, f),
	    CS_OK);
	return f->outcome;
}

/* A whole connection of (sub, agent, resource) for scopes; the consent id. */
static inline char *connect_as(const char *sub, const char *agent, const char *resource,
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

static inline char *connect_alice(int64_t now)
{
	return connect_as("alice", "coder", "github", "issues:read", now);
}

static inline struct consent load(const char *kid, int64_t now)
{
	struct consent k;
	memset(&k, 0, sizeof k);
	ck_assert_int_eq(consent_get(sc, kid, now, &k), CS_OK);
	return k;
}

static inline enum cs_err release_with(struct vault *vv, struct store_conn *c, const char *kid,
    int64_t now, struct vault_release *r)
{
	struct consent k;
	memset(&k, 0, sizeof k);
	memset(r, 0, sizeof *r);
	if (consent_get(c, kid, now, &k) != CS_OK)
		return CS_ENOENT;
	struct vault_release_req rq = { .k = &k, .action = "list_issues", .actor = GW, .now = now };
	enum cs_err e = vault_release(vv, c, &cfg, &rq, r);
	consent_clear(&k);
	return e;
}

static inline enum cs_err release(const char *kid, int64_t now, struct vault_release *r)
{
	return release_with(v, sc, kid, now, r);
}

/* The outcome of a release that did not fail. */
static inline enum vault_release_outcome release_o(const char *kid, int64_t now,
    struct vault_release *r)
{
	ck_assert_int_eq(release(kid, now, r), CS_OK);
	return r->outcome;
}

/* The access token released for kid at now (which must succeed). */
static inline void ck_release(const char *kid, int64_t now, const char *want)
{
	struct vault_release r;
	ck_assert_int_eq(release(kid, now, &r), CS_OK);
	ck_assert_str_eq(r.access_token, want);
	ck_assert_str_eq(r.token_type, "Bearer");
	vault_release_clear(&r);
}

/* No token in clear anywhere at rest: records, outbox, audit. */
static inline void ck_no_plaintext(void)
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

static inline char *b64url_sha256(const char *s)
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

#endif
