/* test_routes.c -- routes.c's real route table dispatched without a socket (as in
 * h2o): a request struct in, a reply struct out, through router_dispatch and
 * the real handlers over a real store (a SQLite file in a temporary
 * directory) and a real app (app_init).  Covers /token, the consent decision,
 * the proxy and the admin API and pages, with the refusals the router's
 * authentication gates decide before any handler runs. */
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <string.h>
#include <fcntl.h>
#include <jansson.h>
#include <sqlite3.h>

#include "testutil.h"
#include "tu_consent.h"
#include "admin.h"
#include "app.h"
#include "config.h"
#include "consent.h"
#include "http.h"
#include "session.h"
#include "store.h"
#include "store_user.h"

#define PUBLIC_URL "http://127.0.0.1:8080"
#define ISS "https://idp.example.com"
/* agent-gateway:gateway-secret-0123456789 */
#define GATEWAY_BASIC "Basic YWdlbnQtZ2F0ZXdheTpnYXRld2F5LXNlY3JldC0wMTIzNDU2Nzg5"
#define FORM_CT "application/x-www-form-urlencoded"

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
	    "[agent.coder]\nallow = notes:read notes:write gh:read\n"
	    "[resource.notes]\nmax_consent = 86400\n"
	    "[scope.notes.read]\n[scope.notes.write]\n"
	    "[resource.gh]\nbase_url = http://127.0.0.1:9/v1/\n"
	    "[scope.gh.read]\n"
	    "[action.gh.user]\nscope = read\nroute = GET /user\n", db, key);
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

struct hdr { const char *name, *value; };

static struct hdr extra[4];

static const char *header_of(void *hctx, const char *name)
{
	(void)hctx;
	for (size_t i = 0; i < sizeof extra / sizeof extra[0] && extra[i].name; i++)
		if (strcasecmp(extra[i].name, name) == 0)
			return extra[i].value;
	return NULL;
}

static void req_init(struct http_request *r, enum http_method m, const char *path,
    const char *query)
{
	memset(r, 0, sizeof *r);
	memset(extra, 0, sizeof extra);
	r->method = m;
	r->path = path;
	r->query = query;
	r->app = &app;
	r->now = now;
	r->header = header_of;
	memcpy(r->remote_ip, "127.0.0.1", 10);
	memcpy(r->request_id, "test", 5);
}

/* A form POST; from the browser of our own site when origin. */
static void req_form(struct http_request *r, const char *path, const char *body, bool origin)
{
	req_init(r, HTTP_POST, path, "");
	r->content_type = FORM_CT;
	r->body = body;
	r->body_len = strlen(body);
	if (origin) {
		r->origin = PUBLIC_URL;
		r->sec_fetch_site = "same-origin";
	}
}

static void dispatch(struct http_request *req, struct http_reply *rep)
{
	reply_init(rep);
	router_dispatch(http_routes, req, rep);
}

static void done(struct http_request *req, struct http_reply *rep)
{
	reply_clear(rep);
	http_request_clear(req);
}

static const char *body(const struct http_reply *rep)
{
	return rep->body.data ? rep->body.data : "";
}

static const char *reply_hdr(const struct http_reply *rep, const char *name)
{
	for (size_t i = 0; i < rep->nheaders; i++)
		if (strcasecmp(rep->headers[i].name, name) == 0)
			return rep->headers[i].value;
	return NULL;
}

/* A JSON error: the status, the error code and (when desc) its description. */
static void assert_oauth(const struct http_reply *rep, int status, const char *code, const char *desc)
{
	json_error_t err;
	ck_assert_msg(rep->status == status, "status %d, want %d: %s", rep->status, status, body(rep));
	ck_assert_str_eq(rep->content_type, "application/json");
	json_t *v = json_loads(body(rep), 0, &err);
	ck_assert_msg(v != NULL, "not JSON: %s", body(rep));
	ck_assert_str_eq(json_string_value(json_object_get(v, "error")), code);
	if (desc != NULL)
		ck_assert_str_eq(json_string_value(json_object_get(v, "error_description")), desc);
	json_decref(v);
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

/* A signed-in person: their user id, a Cookie header and the session's CSRF token. */
struct person {
	int64_t uid;
	char    cookie[128];
	char    csrf[SESSION_TOKEN_LEN + 1];
};

static void sign_in(const char *subject, bool admin, struct person *p)
{
	char sid[SESSION_TOKEN_LEN + 1];
	struct session s;
	memset(&s, 0, sizeof s);
	ck_assert_int_eq(store_user_put(sc, &(struct store_user){ .issuer = ISS, .subject = subject,
	    .name = subject, .now = now, .login = true }, &p->uid), CS_OK);
	ck_assert_int_eq(session_create(sc, p->uid, now, admin, now, sid), CS_OK);
	ck_assert_int_eq(str_fmt(p->cookie, sizeof p->cookie, "%s=%s", session_cookie_name(cfg), sid),
	    CS_OK);
	ck_assert_int_eq(session_from_cookie(sc, cfg, p->cookie, now, &s), CS_OK);
	memcpy(p->csrf, s.csrf, sizeof p->csrf);
	session_clear(&s);
}

/* The gateway's token exchange for alice, as far as the consent: a pending
 * request for notes:read and notes:write (malloc'd id). */
static char *consent_request(void)
{
	struct scope_set want = { .n = 0 };
	struct consent_answer a;
	memset(&a, 0, sizeof a);
	ck_assert_int_eq(scope_set_parse("read write", &want), CS_OK);
	ck_assert_int_eq(tu_exchange(sc, cfg, ISS, "alice", "coder", "notes", &want, NULL,
	    "gateway:agent-gateway", now, &a), CS_OK);
	ck_assert_int_eq(a.outcome, CONSENT_REQUIRED);
	char *id = strdup(a.request_id);
	consent_answer_clear(&a);
	scope_set_clear(&want);
	return id;
}

/* --- /token ---------------------------------------------------------------- */

START_TEST(test_handlers_token_gateway_gate)
{
	struct http_request req;
	struct http_reply rep;
	/* No client authentication: the router's gateway gate answers, RFC 6749 JSON. */
	req_form(&req, "/token", "grant_type=password", false);
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 401);
	ck_assert_str_eq(rep.content_type, "application/json");
	ck_assert_ptr_nonnull(strstr(body(&rep), "\"error\":\"invalid_client\""));
	ck_assert_str_eq(rep.log.route, "/token");
	done(&req, &rep);
	/* A wrong secret: the same. */
	req_form(&req, "/token", "grant_type=password", false);
	req.authorization = "Basic YWdlbnQtZ2F0ZXdheTp3cm9uZw==";
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 401);
	ck_assert_ptr_nonnull(strstr(body(&rep), "\"error\":\"invalid_client\""));
	done(&req, &rep);
	/* The gateway, authenticated: the handler answers. */
	req_form(&req, "/token", "grant_type=password", false);
	req.authorization = GATEWAY_BASIC;
	dispatch(&req, &rep);
	assert_oauth(&rep, 400, "unsupported_grant_type",
	    "grant_type must be token-exchange or refresh_token");
	done(&req, &rep);
	/* A parameter the router refuses is answered before the gate: 400 even
	 * without credentials, as before the gate moved into the router. */
	req_form(&req, "/token", "scope=a", false);
	dispatch(&req, &rep);
	assert_oauth(&rep, 400, "invalid_request", "parameter grant_type is missing");
	done(&req, &rep);
}
END_TEST

START_TEST(test_handlers_token_refresh_unknown_token)
{
	struct http_request req;
	struct http_reply rep;
	req_form(&req, "/token", "grant_type=refresh_token&refresh_token=nosuchtoken", false);
	req.authorization = GATEWAY_BASIC;
	dispatch(&req, &rep);
	assert_oauth(&rep, 400, "invalid_grant", NULL);
	done(&req, &rep);
}
END_TEST

/* --- the consent decision --------------------------------------------------- */

/* A thread that holds the writer's turn until told to let it go. */
struct turn_holder {
	sem_t     held, release;
	pthread_t t;
};

static void *turn_hold(void *arg)
{
	struct turn_holder *h = arg;
	struct store_conn *c = store_conn(app.store);
	ck_assert_int_eq(store_begin(c), CS_OK);
	sem_post(&h->held);
	sem_wait(&h->release);
	store_rollback(c);
	return NULL;
}

/* A full write queue answers a clean 503 with Retry-After (RFC 6749 JSON on
 * an OAuth endpoint), writes nothing, and the next request after it is served. */
START_TEST(test_handlers_write_queue_full_503)
{
	struct http_request req;
	struct http_reply rep;
	struct turn_holder h;
	ck_assert_int_eq(sem_init(&h.held, 0, 0), 0);
	ck_assert_int_eq(sem_init(&h.release, 0, 0), 0);
	store_set_write_queue(app.store, 0);
	ck_assert_int_eq(pthread_create(&h.t, NULL, turn_hold, &h), 0);
	sem_wait(&h.held);
	req_form(&req, "/token", "grant_type=refresh_token&refresh_token=nosuchtoken", false);
	req.authorization = GATEWAY_BASIC;
	dispatch(&req, &rep);
	assert_oauth(&rep, 503, "temporarily_unavailable", NULL);
	const char *ra = NULL;
	for (size_t i = 0; i < rep.nheaders; i++)
		if (strcmp(rep.headers[i].name, "Retry-After") == 0)
			ra = rep.headers[i].value;
	ck_assert_ptr_nonnull(ra);
	ck_assert_str_eq(ra, "1");
	done(&req, &rep);
	sem_post(&h.release);
	pthread_join(h.t, NULL);
	store_set_write_queue(app.store, STORE_WRITE_QUEUE_DEFAULT);
	req_form(&req, "/token", "grant_type=refresh_token&refresh_token=nosuchtoken", false);
	req.authorization = GATEWAY_BASIC;
	dispatch(&req, &rep);
	assert_oauth(&rep, 400, "invalid_grant", NULL);
	done(&req, &rep);
	sem_destroy(&h.held);
	sem_destroy(&h.release);
}
END_TEST

START_TEST(test_handlers_consent_decide)
{
	struct http_request req;
	struct http_reply rep;
	struct person alice;
	struct consent_decision d;
	struct consent k;
	char path[128], form[512];
	char *rid = consent_request();

	memset(&d, 0, sizeof d);
	memset(&k, 0, sizeof k);
	sign_in("alice", false, &alice);
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(str_fmt(path, sizeof path, "/consent/%s", rid), CS_OK);

	/* The consent page: without a session the router's session gate sends
	 * the person to sign in and back to this very page. */
	req_init(&req, HTTP_GET, path, "");
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 303);
	ck_assert_ptr_nonnull(reply_hdr(&rep, "Location"));
	ck_assert(strncmp(reply_hdr(&rep, "Location"), "/login?return_to=%2Fconsent%2F", 30) == 0);
	ck_assert_ptr_nonnull(strstr(reply_hdr(&rep, "Location"), rid));
	done(&req, &rep);
	req_init(&req, HTTP_GET, path, "");
	req.cookie = alice.cookie;
	dispatch(&req, &rep);
	ck_assert_msg(rep.status == 200, "%d %s", rep.status, body(&rep));
	ck_assert_ptr_nonnull(strstr(body(&rep), d.version));
	ck_assert_ptr_nonnull(strstr(body(&rep), "name=\"s1\""));
	done(&req, &rep);

	/* No session on the form: the handler's 401 page, nothing decided. */
	ck_assert_int_eq(str_fmt(form, sizeof form, "csrf=%s&decision=approve&duration=3600&s0=on"
	    "&version=%s", alice.csrf, d.version), CS_OK);
	req_form(&req, path, form, true);
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 401);
	ck_assert_ptr_nonnull(strstr(body(&rep), "Not signed in"));
	done(&req, &rep);

	/* A box past the family's bound (s0 .. s19) is refused by the router. */
	ck_assert_int_eq(str_fmt(form, sizeof form, "csrf=%s&decision=approve&duration=3600&s20=on"
	    "&version=%s", alice.csrf, d.version), CS_OK);
	req_form(&req, path, form, true);
	req.cookie = alice.cookie;
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 400);
	ck_assert_ptr_nonnull(strstr(body(&rep), "unknown parameter"));
	done(&req, &rep);

	/* A box inside the bound but past the request's two scopes: the handler's 400. */
	ck_assert_int_eq(str_fmt(form, sizeof form, "csrf=%s&decision=approve&duration=3600&s2=on"
	    "&version=%s", alice.csrf, d.version), CS_OK);
	req_form(&req, path, form, true);
	req.cookie = alice.cookie;
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 400);
	ck_assert_ptr_nonnull(strstr(body(&rep), "The form names a permission the agent did not ask for."));
	done(&req, &rep);

	/* A duration of 0 passes the router (a number) and not the handler. */
	ck_assert_int_eq(str_fmt(form, sizeof form, "csrf=%s&decision=approve&duration=0&s0=on"
	    "&version=%s", alice.csrf, d.version), CS_OK);
	req_form(&req, path, form, true);
	req.cookie = alice.cookie;
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 400);
	ck_assert_ptr_nonnull(strstr(body(&rep), "Choose how long the permission lasts."));
	done(&req, &rep);
	ck_assert_int_eq(consent_current(sc, alice.uid, "coder", "notes", now, &k), CS_ENOENT);

	/* Approve notes:read only (box 0), for an hour. */
	ck_assert_int_eq(str_fmt(form, sizeof form, "csrf=%s&decision=approve&duration=3600&s0=on"
	    "&version=%s", alice.csrf, d.version), CS_OK);
	req_form(&req, path, form, true);
	req.cookie = alice.cookie;
	dispatch(&req, &rep);
	ck_assert_msg(rep.status == 200, "%d %s", rep.status, body(&rep));
	ck_assert_ptr_nonnull(strstr(body(&rep), "Permission given"));
	done(&req, &rep);
	ck_assert_int_eq(consent_current(sc, alice.uid, "coder", "notes", now, &k), CS_OK);
	ck_assert_uint_eq(k.granted.n, 1);
	ck_assert_str_eq(k.granted.v[0], "read");
	ck_assert(k.expires_at == now + 3600);
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE action = 'consent.granted'"), 1);
	consent_clear(&k);
	free(rid);
}
END_TEST

/* --- the proxy ------------------------------------------------------------- */

START_TEST(test_handlers_proxy_gates)
{
	struct http_request req;
	struct http_reply rep;
	/* No gateway credentials: the router's gate, before the handler reads anything. */
	req_init(&req, HTTP_GET, "/proxy/gh/user", "");
	extra[0] = (struct hdr){ "Consentd-Grant", "x.y.z" };
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 401);
	ck_assert_ptr_nonnull(strstr(body(&rep), "\"error\":\"invalid_client\""));
	ck_assert_str_eq(rep.log.route, "/proxy/{resource}/{rest*}");
	done(&req, &rep);
	/* The gateway without a grant: the handler's RFC 6750 answer. */
	req_init(&req, HTTP_GET, "/proxy/gh/user", "");
	req.authorization = GATEWAY_BASIC;
	dispatch(&req, &rep);
	assert_oauth(&rep, 401, "invalid_token", "a grant is required in Consentd-Grant");
	ck_assert_str_eq(reply_hdr(&rep, "WWW-Authenticate"), "Bearer error=\"invalid_token\"");
	done(&req, &rep);
	/* A grant that is no consentd grant. */
	req_init(&req, HTTP_GET, "/proxy/gh/user", "");
	req.authorization = GATEWAY_BASIC;
	extra[0] = (struct hdr){ "Consentd-Grant", "not.a.grant" };
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 401);
	ck_assert_ptr_nonnull(strstr(body(&rep), "\"error\":\"invalid_token\""));
	done(&req, &rep);
}
END_TEST

/* --- admin ----------------------------------------------------------------- */

START_TEST(test_handlers_admin_api_bearer_gate)
{
	struct http_request req;
	struct http_reply rep;
	char token[SESSION_TOKEN_LEN + 1], auth[SESSION_TOKEN_LEN + 16];
	struct person admin;
	json_error_t err;

	/* A cookie, even an admin's, is no authentication here. */
	sign_in("root", true, &admin);
	req_init(&req, HTTP_GET, "/admin/api/consents", "");
	req.cookie = admin.cookie;
	dispatch(&req, &rep);
	assert_oauth(&rep, 401, "invalid_token", "An admin token is required (Authorization: Bearer).");
	ck_assert_str_eq(reply_hdr(&rep, "WWW-Authenticate"), "Bearer realm=\"consentd-admin\"");
	done(&req, &rep);
	req_init(&req, HTTP_GET, "/admin/api/consents", "");
	req.authorization = "Bearer nosuchtoken";
	dispatch(&req, &rep);
	assert_oauth(&rep, 401, "invalid_token", "The admin token is not valid.");
	ck_assert_str_eq(reply_hdr(&rep, "WWW-Authenticate"),
	    "Bearer realm=\"consentd-admin\", error=\"invalid_token\"");
	done(&req, &rep);

	enum admin_token_outcome to = ADMIN_TOKEN__MAX;
	ck_assert_int_eq(admin_token_create(sc, "ops-1", "cli", now, token, &to), CS_OK);
	ck_assert_int_eq(to, ADMIN_TOKEN_DONE);
	ck_assert_int_eq(str_fmt(auth, sizeof auth, "Bearer %s", token), CS_OK);
	req_init(&req, HTTP_GET, "/admin/api/consents", "limit=5");
	req.authorization = auth;
	dispatch(&req, &rep);
	ck_assert_msg(rep.status == 200, "%d %s", rep.status, body(&rep));
	json_t *v = json_loads(body(&rep), 0, &err);
	ck_assert_ptr_nonnull(v);
	ck_assert(json_is_array(json_object_get(v, "consents")));
	json_decref(v);
	done(&req, &rep);
	/* The gate audits the call under the route's method and pattern. */
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE action = 'admin.api' AND "
	    "detail = 'GET /admin/api/consents'"), 1);
	/* The limit is still the route's to refuse, before the gate. */
	req_init(&req, HTTP_GET, "/admin/api/consents", "limit=0");
	dispatch(&req, &rep);
	assert_oauth(&rep, 400, "invalid_request", "parameter limit is malformed");
	done(&req, &rep);
}
END_TEST

START_TEST(test_handlers_admin_page_gate)
{
	struct http_request req;
	struct http_reply rep;
	struct person alice, root;

	/* Nobody signed in: a GET goes to sign-in and comes back. */
	req_init(&req, HTTP_GET, "/admin", "");
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 303);
	ck_assert_ptr_nonnull(reply_hdr(&rep, "Location"));
	ck_assert(strncmp(reply_hdr(&rep, "Location"), "/login?return_to=", 17) == 0);
	done(&req, &rep);
	/* A POST without a session: 401. */
	req_form(&req, "/admin/revoke", "csrf=x&by=user&value=bob&count=1", true);
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 401);
	done(&req, &rep);
	/* A person who is no admin: 403, audited. */
	sign_in("alice", false, &alice);
	req_init(&req, HTTP_GET, "/admin", "");
	req.cookie = alice.cookie;
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 403);
	ck_assert_ptr_nonnull(strstr(body(&rep), "Not an administrator"));
	done(&req, &rep);
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE action = 'admin.page.refused' "
	    "AND actor = 'user:alice'"), 1);
	/* An admin: the page. */
	sign_in("root", true, &root);
	req_init(&req, HTTP_GET, "/admin", "");
	req.cookie = root.cookie;
	dispatch(&req, &rep);
	ck_assert_msg(rep.status == 200, "%d %s", rep.status, body(&rep));
	ck_assert_ptr_nonnull(strstr(body(&rep), "<h1>Consents</h1>"));
	done(&req, &rep);
}
END_TEST

/* --- a person's pages: who may call them is the table's ------------------- */

/* Issue 29 item 1: every route a person must be signed in for declares the
 * class whose gate checks it (none is ROUTE_AUTH_NONE with a check inside its
 * handler), and every session form carries its CSRF token where the gate
 * reads it. */
START_TEST(test_handlers_person_routes_declare_their_gate)
{
	static const char *const person[] = { "/me", "/consent/", "/approve/", "/oauth/callback/" };
	size_t forms = 0;
	for (const struct route *r = http_routes; r->pattern != NULL; r++) {
		for (size_t i = 0; i < sizeof person / sizeof person[0]; i++)
			if (strncmp(r->pattern, person[i], strlen(person[i])) == 0)
				ck_assert_msg(r->auth != ROUTE_AUTH_NONE && r->auth != ROUTE_AUTH_SESSION_OPTIONAL,
				    "%s %s needs a person and declares no session class",
				    http_method_name(r->method), r->pattern);
		if (r->auth != ROUTE_AUTH_SESSION_FORM)
			continue;
		forms++;
		ck_assert_msg(r->params[ROUTE_CSRF_PARAM].name != NULL &&
		    strcmp(r->params[ROUTE_CSRF_PARAM].name, "csrf") == 0 &&
		    (r->params[ROUTE_CSRF_PARAM].flags & PARAM_REQUIRED) && r->method == HTTP_POST,
		    "%s: a session form's csrf is its required parameter %u", r->pattern,
		    ROUTE_CSRF_PARAM);
	}
	ck_assert_uint_eq(forms, 8);   /* revoke, allow, reconnect, the API key, ending a rule and a denied action's allow on /me, the two decisions */
}
END_TEST

/* The answers the person's gates give (routes.c), which the handlers gave
 * before them: sign-in that comes back, the 401 of a form in the route's
 * words, the 403 of a stale form, the provider callback's 400, the sign-out
 * and the front page with and without a session; and the audit's actor the
 * router sets, for a person and for an admin. */
START_TEST(test_handlers_person_gates)
{
	struct http_request req;
	struct http_reply rep;
	struct person alice, root;
	struct consent_decision d;
	struct consent k;
	char path[160], form[512];
	char *rid = consent_request();

	memset(&d, 0, sizeof d);
	memset(&k, 0, sizeof k);
	sign_in("alice", false, &alice);
	sign_in("root", true, &root);

	/* A page: sign in, then back to this very page. */
	req_init(&req, HTTP_GET, "/me/consents/AAAAAAAAAAAAAAAAAAAAAA/revoked", "");
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 303);
	ck_assert_str_eq(reply_hdr(&rep, "Location"),
	    "/login?return_to=%2Fme%2Fconsents%2FAAAAAAAAAAAAAAAAAAAAAA%2Frevoked");
	done(&req, &rep);

	/* A /me form without a session: 401 in /me's words; a stale one: 403. */
	req_form(&req, "/me/requests/AAAAAAAAAAAAAAAAAAAAAA/allow", "csrf=x", true);
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 401);
	ck_assert_ptr_nonnull(strstr(body(&rep), "Sign in again to manage your consents."));
	done(&req, &rep);
	req_form(&req, "/me/requests/AAAAAAAAAAAAAAAAAAAAAA/allow", "csrf=x", true);
	req.cookie = alice.cookie;
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 403);
	ck_assert_ptr_nonnull(strstr(body(&rep), "This form is stale or did not come from this site."));
	done(&req, &rep);
	/* With this session's token the handler runs: no such request of hers. */
	ck_assert_int_eq(str_fmt(form, sizeof form, "csrf=%s", alice.csrf), CS_OK);
	req_form(&req, "/me/requests/AAAAAAAAAAAAAAAAAAAAAA/allow", form, true);
	req.cookie = alice.cookie;
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 404);
	ck_assert_ptr_nonnull(strstr(body(&rep), "There is no such decision of yours."));
	done(&req, &rep);

	/* A decision without a session: the agent's link signs in again. */
	req_form(&req, "/approve/AAAAAAAAAAAAAAAAAAAAAA", "csrf=x&decision=approve", true);
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 401);
	ck_assert_ptr_nonnull(strstr(body(&rep), "Open the link from your agent again to sign in."));
	done(&req, &rep);

	/* The provider's answer without a session: 400, no sign-in with the code. */
	req_init(&req, HTTP_GET, "/oauth/callback/gh", "state=x&code=y");
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 400);
	ck_assert_ptr_nonnull(strstr(body(&rep), "Your session ended while you were at the provider."));
	ck_assert_ptr_null(reply_hdr(&rep, "Location"));
	done(&req, &rep);

	/* Sign-out: signed out already goes home; a stale form is refused. */
	req_form(&req, "/logout", "csrf=x", true);
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 303);
	ck_assert_str_eq(reply_hdr(&rep, "Location"), "/?state=signed-out-here");
	done(&req, &rep);
	req_form(&req, "/logout", "csrf=x", true);
	req.cookie = alice.cookie;
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 403);
	ck_assert_ptr_nonnull(strstr(body(&rep), "This sign-out form is stale"));
	done(&req, &rep);

	/* The front page with and without a session. */
	req_init(&req, HTTP_GET, "/", "state=signed-out");
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 200);
	ck_assert_ptr_nonnull(strstr(body(&rep), "You are signed out"));
	done(&req, &rep);
	req_init(&req, HTTP_GET, "/", "state=signed-out");
	req.cookie = alice.cookie;
	dispatch(&req, &rep);
	ck_assert_int_eq(rep.status, 200);
	ck_assert_ptr_null(strstr(body(&rep), "You are signed out"));
	ck_assert_ptr_nonnull(strstr(body(&rep), "alice"));
	done(&req, &rep);

	/* The actor the router sets: alice's decision is hers ... */
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(str_fmt(path, sizeof path, "/consent/%s", rid), CS_OK);
	ck_assert_int_eq(str_fmt(form, sizeof form, "csrf=%s&decision=approve&duration=3600&s0=on"
	    "&version=%s", alice.csrf, d.version), CS_OK);
	req_form(&req, path, form, true);
	req.cookie = alice.cookie;
	dispatch(&req, &rep);
	ck_assert_msg(rep.status == 200, "%d %s", rep.status, body(&rep));
	done(&req, &rep);
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE action = 'consent.granted' "
	    "AND actor = 'user:alice'"), 1);
	/* ... and an admin revoking it on the admin pages acts as "admin:". */
	ck_assert_int_eq(consent_current(sc, alice.uid, "coder", "notes", now, &k), CS_OK);
	ck_assert_int_eq(str_fmt(path, sizeof path, "/admin/consents/%s/revoke", k.id), CS_OK);
	ck_assert_int_eq(str_fmt(form, sizeof form, "csrf=%s&reason=done", root.csrf), CS_OK);
	req_form(&req, path, form, true);
	req.cookie = root.cookie;
	dispatch(&req, &rep);
	ck_assert_msg(rep.status == 303, "%d %s", rep.status, body(&rep));
	done(&req, &rep);
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE action = 'consent.revoked' "
	    "AND actor = 'admin:root'"), 1);
	consent_clear(&k);
	free(rid);
}
END_TEST

/* --- every capture of every route ------------------------------------------- */

/* path: route r's pattern with each {x} capture n bytes of 'a' (a trailing
 * {rest*} is "x"); false when r has no {x} capture. */
static bool long_path(const struct route *r, size_t n, struct buf *path)
{
	bool any = false;
	for (const char *p = r->pattern; *p; p++) {
		const char *end = *p == '{' ? strchr(p, '}') : NULL;
		if (end == NULL) {
			ck_assert_int_eq(buf_append(path, p, 1), CS_OK);
			continue;
		}
		if (strncmp(p, "{rest*}", 7) == 0) {
			ck_assert_int_eq(buf_puts(path, "x"), CS_OK);
		} else {
			for (size_t i = 0; i < n; i++)
				ck_assert_int_eq(buf_append(path, "a", 1), CS_OK);
			any = true;
		}
		p = end;
	}
	return any;
}

/* One request to r's method on path, as a browser of our own site (a form
 * POST with an empty body) or the gateway; its status. */
static int status_of(const struct route *r, const char *path, char *body_out, size_t outlen)
{
	struct http_request req;
	struct http_reply rep;
	if (r->flags & ROUTE_FORM_BODY) {
		req_form(&req, path, "", true);
	} else {
		req_init(&req, r->method, path, "");
		req.origin = PUBLIC_URL;
		req.sec_fetch_site = "same-origin";
		if (r->flags & ROUTE_JSON_BODY) {
			req.content_type = "application/json";
			req.body = "{}";
			req.body_len = 2;
		}
	}
	req.method = r->method;
	dispatch(&req, &rep);
	int st = rep.status;
	ck_assert_int_eq(str_fmt(body_out, outlen, "%.200s", body(&rep)), CS_OK);
	done(&req, &rep);
	return st;
}

/* Issue 29 item 3: handlers read parameters by index (http_arg), and
 * routes.c declares them with designated initializers -- so a table whose
 * positions leave a hole would end a route's list early and silently drop
 * what follows.  Every route: names up to the first NULL, nothing after it,
 * and no name twice. */
START_TEST(test_handlers_route_params_have_no_holes)
{
	for (const struct route *r = http_routes; r->pattern != NULL; r++) {
		size_t n = 0;
		while (n < ROUTE_MAX_PARAMS && r->params[n].name != NULL)
			n++;
		for (size_t i = n; i < ROUTE_MAX_PARAMS; i++)
			ck_assert_msg(r->params[i].name == NULL && r->params[i].type == NULL &&
			    r->params[i].max_len == 0 && r->params[i].flags == 0,
			    "%s %s: parameter %zu follows the end of its list",
			    http_method_name(r->method), r->pattern, i);
		for (size_t i = 0; i < n; i++)
			for (size_t j = i + 1; j < n; j++)
				ck_assert_msg(strcmp(r->params[i].name, r->params[j].name) != 0,
				    "%s %s: %s twice", http_method_name(r->method), r->pattern,
				    r->params[i].name);
	}
}
END_TEST

/* Issue 28 item 4: a capture of any length is a 4xx, never a 500 -- every
 * route of the table, at the router's bound and far past it (a handler's
 * fixed buffer, such as the sign-in's return page, used to fail on 4 KiB). */
START_TEST(test_handlers_every_capture_long_is_4xx)
{
	char text[256];
	size_t tried = 0;
	for (const struct route *r = http_routes; r->pattern != NULL; r++) {
		const size_t lens[] = { ROUTE_CAPTURE_MAX, ROUTE_CAPTURE_MAX + 1, 4100, 6000 };
		for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
			struct buf path;
			buf_init(&path, HTTP_MAX_URI);
			if (!long_path(r, lens[k], &path)) {
				buf_clear(&path);
				break;
			}
			int st = status_of(r, path.data, text, sizeof text);
			ck_assert_msg(st >= 300 && st < 500, "%s %s with a %zu-byte capture: %d %s",
			    http_method_name(r->method), r->pattern, lens[k], st, text);
			if (lens[k] > ROUTE_CAPTURE_MAX)
				ck_assert_msg(st == 404, "%s %s with a %zu-byte capture: %d, not 404",
				    http_method_name(r->method), r->pattern, lens[k], st);
			buf_clear(&path);
			tried++;
		}
	}
	ck_assert_uint_ge(tried, 4 * 15);     /* every route with a capture, four lengths each */
}
END_TEST

/* Moved from tests/integration/foundation.test.js (issue 29 item 9: an
 * endpoint check that needs no process): a known path under a method it does
 * not answer is a 405 naming what it does answer, HEAD included wherever GET
 * is, and HEAD itself is answered. */
START_TEST(test_handlers_wrong_method_405_with_allow)
{
	struct http_request req;
	struct http_reply rep;
	req_init(&req, HTTP_DELETE, "/healthz", "");
	dispatch(&req, &rep);
	ck_assert_msg(rep.status == 405, "DELETE /healthz: %d %s", rep.status, body(&rep));
	ck_assert_ptr_nonnull(reply_hdr(&rep, "Allow"));
	ck_assert_str_eq(reply_hdr(&rep, "Allow"), "GET, HEAD");
	done(&req, &rep);
	req_init(&req, HTTP_HEAD, "/healthz", "");
	dispatch(&req, &rep);
	ck_assert_msg(rep.status == 200, "HEAD /healthz: %d %s", rep.status, body(&rep));
	done(&req, &rep);
}
END_TEST

/* Moved from tests/integration/foundation.test.js: RFC 8414 metadata names
 * the issuer and jwks_uri, and every endpoint it lists exists -- a POST to its
 * path is answered by a route (refused, since it carries nothing), never 404. */
START_TEST(test_handlers_as_metadata_endpoints_exist)
{
	struct http_request req;
	struct http_reply rep;
	json_error_t jerr;
	req_init(&req, HTTP_GET, "/.well-known/oauth-authorization-server", "");
	dispatch(&req, &rep);
	ck_assert_msg(rep.status == 200, "metadata: %d %s", rep.status, body(&rep));
	json_t *m = json_loads(body(&rep), 0, &jerr);
	ck_assert_msg(m != NULL, "not JSON: %s", body(&rep));
	done(&req, &rep);
	ck_assert_str_eq(json_string_value(json_object_get(m, "issuer")), PUBLIC_URL);
	ck_assert_str_eq(json_string_value(json_object_get(m, "jwks_uri")),
	    PUBLIC_URL "/.well-known/jwks.json");
	const char *k;
	json_t *v;
	size_t listed = 0;
	json_object_foreach(m, k, v) {
		size_t kl = strlen(k);
		if (kl < 9 || strcmp(k + kl - 9, "_endpoint") != 0)
			continue;
		const char *u = json_string_value(v);
		ck_assert_msg(u != NULL && strncmp(u, PUBLIC_URL "/", strlen(PUBLIC_URL) + 1) == 0,
		    "%s is not under the public URL: %s", k, u ? u : "(not a string)");
		req_init(&req, HTTP_POST, u + strlen(PUBLIC_URL), "");
		dispatch(&req, &rep);
		ck_assert_msg(rep.status != 404 && rep.status != 0,
		    "%s is listed, so it must exist: POST %s: %d %s", k, u, rep.status, body(&rep));
		done(&req, &rep);
		listed++;
	}
	ck_assert_uint_ge(listed, 4);    /* token, introspection, revocation, authorization ... */
	json_decref(m);
}
END_TEST

/* Issue 28 item 3: a proxied call's gate and grant are decided by
 * router_admit (the connection's thread), so a refused call never reaches
 * the pool; only an admitted one leaves rep empty for router_handle. */
START_TEST(test_handlers_proxy_admission_before_the_pool)
{
	struct http_request req;
	struct http_reply rep;
	const char *who[][2] = {
		{ NULL, "x.y.z" },                    /* anonymous */
		{ "Basic YWdlbnQtZ2F0ZXdheTp3cm9uZw==", "x.y.z" },   /* a wrong secret */
		{ GATEWAY_BASIC, NULL },              /* the gateway, no grant */
		{ GATEWAY_BASIC, "not.a.grant" },     /* the gateway, no consentd grant */
	};
	const int want[] = { 401, 401, 401, 401 };
	for (size_t i = 0; i < sizeof who / sizeof who[0]; i++) {
		req_init(&req, HTTP_GET, "/proxy/gh/user", "");
		req.authorization = who[i][0];
		if (who[i][1] != NULL)
			extra[0] = (struct hdr){ "Consentd-Grant", who[i][1] };
		reply_init(&rep);
		ck_assert_msg(!router_admit(http_routes, &req, &rep), "case %zu admitted", i);
		ck_assert_msg(rep.status == want[i], "case %zu: %d %s", i, rep.status, body(&rep));
		ck_assert_str_eq(rep.log.route, "/proxy/{resource}/{rest*}");
		ck_assert_ptr_null(req.auth.grant);
		done(&req, &rep);
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("handlers");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_handlers_token_gateway_gate);
	tcase_add_test(tc, test_handlers_token_refresh_unknown_token);
	tcase_add_test(tc, test_handlers_write_queue_full_503);
	tcase_add_test(tc, test_handlers_consent_decide);
	tcase_add_test(tc, test_handlers_proxy_gates);
	tcase_add_test(tc, test_handlers_admin_api_bearer_gate);
	tcase_add_test(tc, test_handlers_admin_page_gate);
	tcase_add_test(tc, test_handlers_every_capture_long_is_4xx);
	tcase_add_test(tc, test_handlers_route_params_have_no_holes);
	tcase_add_test(tc, test_handlers_person_routes_declare_their_gate);
	tcase_add_test(tc, test_handlers_person_gates);
	tcase_add_test(tc, test_handlers_proxy_admission_before_the_pool);
	tcase_add_test(tc, test_handlers_wrong_method_405_with_allow);
	tcase_add_test(tc, test_handlers_as_metadata_endpoints_exist);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
