/* test_grant.c -- grants (flow C claims, exp cap, typ), introspection and
 * revocation, refresh-token rotation, reuse detection and narrowing, against a
 * real SQLite file built from migrations/, fixed keys and explicit clocks.
 * Attacker tokens (foreign keys, alg none, garbage, replays) are first-class. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sqlite3.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "testutil.h"
#include "tu_consent.h"
#include "audit.h"
#include "buf.h"
#include "agent.h"
#include "consent.h"
#include "consent_memo.h"
#include "exchange.h"
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
#define ACTOR "gateway:agent-gateway"
#define NOTES_URI "https://notes.example.com/api"

static char *dir;
static struct store *st, *st2;
static struct store_conn *sc;
static sqlite3 *raw;                   /* a second connection, for looking */
static struct master_key mk, mk2;
static struct keyring *kr;             /* consentd's keys */
static struct keyring *kr_other;       /* someone else's keys (another database) */
static struct config cfg;

static char *allow_coder[] = { "notes:read", "notes:write", "notes:admin", NULL };
static struct config_agent agents[1];
static struct config_resource resources[1];
static struct config_scope scopes[3];

static void setup(void)
{
	grant_cache_clear();   /* process-wide: every test starts without entries */
	consent_memo_clear();  /* this thread's: the same with CK_FORK=no */
	audit_set_key((const unsigned char[32]){ 0 }, "test");   /* the audit chain's key */
	dir = tu_tmpdir();
	char *db = tu_path(dir, "t.db"), *db2 = tu_path(dir, "other.db");
	ck_assert_int_eq(store_open(db, &st), CS_OK);
	sc = store_conn(st);
	ck_assert_ptr_nonnull(sc);
	ck_assert_int_eq(sqlite3_open(db, &raw), SQLITE_OK);
	sqlite3_busy_timeout(raw, 5000);
	memset(&mk, 0x11, sizeof mk);
	memcpy(mk.kid, "00112233aabbccdd", MASTER_KID_LEN + 1);
	ck_assert_int_eq(keyring_load(sc, &mk, NOW, TTL, &kr), CS_OK);
	/* Another consentd: its own database and master key, hence its own key. */
	ck_assert_int_eq(store_open(db2, &st2), CS_OK);
	memset(&mk2, 0x22, sizeof mk2);
	memcpy(mk2.kid, "ffeeddccbbaa9988", MASTER_KID_LEN + 1);
	ck_assert_int_eq(keyring_load(store_conn(st2), &mk2, NOW, TTL, &kr_other), CS_OK);
	free(db);
	free(db2);

	memset(&cfg, 0, sizeof cfg);
	memset(agents, 0, sizeof agents);
	memset(resources, 0, sizeof resources);
	memset(scopes, 0, sizeof scopes);
	agents[0].id = "coder";
	agents[0].name = "Coding assistant";
	agents[0].allow = allow_coder;
	agents[0].nallow = 3;
	agents[0].offline = true;
	resources[0].id = "notes";
	resources[0].name = "Team notes";
	resources[0].uri = NOTES_URI;
	resources[0].max_consent = 86400;
	scopes[0].resource = "notes";
	scopes[0].name = "read";
	scopes[1].resource = "notes";
	scopes[1].name = "write";
	scopes[2].resource = "notes";
	scopes[2].name = "admin";
	cfg.agents = agents;
	cfg.nagents = 1;
	cfg.resources = resources;
	cfg.nresources = 1;
	cfg.scopes = scopes;
	cfg.nscopes = 3;
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
	keyring_free(kr_other);
	sqlite3_close(raw);
	store_close(st2);
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

static int64_t audits(const char *action)
{
	return q_int("SELECT count(*) FROM audit WHERE action = ?1", action);
}

/* A live consent of sub for coder on notes, made the way a person makes one:
 * a token exchange, then an approval of ticked for duration seconds.
 * Returns the consent id (malloc'd). */
static char *make_consent(const char *sub, const char *ticked, int64_t duration, bool offline,
    int64_t now)
{
	struct consent_answer a;
	struct consent_decision d;
	struct scope_set req = set(ticked);
	char *kid = NULL;
	memset(&a, 0, sizeof a);
	ck_assert_int_eq(tu_exchange(sc, &cfg, ISS, sub, "coder", "notes", &req, NULL, ACTOR,
	    now, &a), CS_OK);
	ck_assert_int_eq(a.outcome, CONSENT_REQUIRED);
	ck_assert_ptr_nonnull(a.request_id);
	memset(&d, 0, sizeof d);
	d.approve = true;
	d.selected = req;
	d.duration = duration;
	d.offline = offline;
	int64_t uid = q_int("SELECT id FROM users WHERE subject = ?1", sub);
	tu_decision_version(sc, a.request_id, &d);
	ck_assert_int_eq(tu_decide(sc, &cfg, a.request_id, uid, &d, "user:x", now, &kid), CS_OK);
	ck_assert_ptr_nonnull(kid);
	scope_set_clear(&req);
	consent_answer_clear(&a);
	return kid;
}

static struct consent load(const char *kid, int64_t now)
{
	struct consent k;
	memset(&k, 0, sizeof k);
	ck_assert_int_eq(consent_get(sc, kid, now, &k), CS_OK);
	return k;
}

/* grant_issue's outcome for kid's consent (it must answer: CS_OK). */
static enum grant_issue_outcome issue_with(const struct keyring *ring, const char *kid,
    const char *scope_s, bool refresh, int64_t now, struct grant_response *g)
{
	struct consent k = load(kid, now);
	struct scope_set s = set(scope_s);
	memset(g, 0, sizeof *g);
	struct grant_issue_req rq = { .k = &k, .scope = &s, .with_refresh = refresh, .actor = ACTOR,
		.now = now };
	enum grant_issue_outcome oc = GRANT_ISSUE__MAX;
	ck_assert_int_eq(grant_issue(sc, &cfg, ring, &rq, &oc, g), CS_OK);
	scope_set_clear(&s);
	consent_clear(&k);
	return oc;
}

static void issue(const char *kid, const char *scope_s, bool refresh, int64_t now,
    struct grant_response *g)
{
	ck_assert_int_eq(issue_with(kr, kid, scope_s, refresh, now, g), GRANT_ISSUED);
	ck_assert_ptr_nonnull(g->access_token);
}

static enum grant_refresh_outcome refresh_jkt(const char *rt, const char *scope_s,
    const char *jkt, int64_t now, struct grant_response *g)
{
	struct scope_set s = { .n = 0 };
	enum grant_refresh_outcome oc = GRANT_REFRESH__MAX;
	if (scope_s != NULL)
		s = set(scope_s);
	memset(g, 0, sizeof *g);
	struct grant_refresh_req rq = { .refresh_token = rt, .scope = scope_s ? &s : NULL,
		.jkt = jkt, .actor = ACTOR, .now = now };
	ck_assert_int_eq(grant_refresh(sc, &cfg, kr, &rq, &oc, g), CS_OK);
	scope_set_clear(&s);
	return oc;
}

static enum grant_refresh_outcome refresh(const char *rt, const char *scope_s, int64_t now,
    struct grant_response *g)
{
	return refresh_jkt(rt, scope_s, NULL, now, g);
}

static json_t *verified_claims(const char *token)
{
	json_t *cl = NULL;
	ck_assert_int_eq(jwt_verify(kr, "at+jwt", token, &cl), CS_OK);
	return cl;
}

static json_t *introspect(const char *token, int64_t now)
{
	json_t *v = NULL;
	ck_assert_int_eq(grant_introspect(sc, &cfg, kr, token, now, &v), CS_OK);
	ck_assert_ptr_nonnull(v);
	return v;
}

/* The answer is exactly {"active": false}. */
static void ck_inactive(const char *token, int64_t now)
{
	json_t *v = introspect(token, now);
	ck_assert_uint_eq(json_object_size(v), 1);
	ck_assert(json_is_false(json_object_get(v, "active")));
	json_decref(v);
}

static void ck_active(const char *token, int64_t now, const char *use)
{
	json_t *v = introspect(token, now);
	ck_assert(json_is_true(json_object_get(v, "active")));
	ck_assert_str_eq(json_string_value(json_object_get(v, "token_use")), use);
	json_decref(v);
}

static const char *jstr(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	ck_assert_msg(json_is_string(v), "claim %s is not a string", k);
	return json_string_value(v);
}

static json_int_t jint(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	ck_assert_msg(json_is_integer(v), "claim %s is not an integer", k);
	return json_integer_value(v);
}

/* Decodes one base64url segment (malloc'd, NUL-terminated). */
static char *b64u_decode(const char *s, size_t n)
{
	size_t padded = (n + 3) / 4 * 4;
	char *t = calloc(padded + 1, 1);
	unsigned char *out = calloc(padded + 1, 1);
	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_nonnull(out);
	for (size_t i = 0; i < padded; i++) {
		char ch = i < n ? s[i] : '=';
		t[i] = ch == '-' ? '+' : ch == '_' ? '/' : ch;
	}
	int len = EVP_DecodeBlock(out, (const unsigned char *)t, (int)padded);
	ck_assert_int_ge(len, 0);
	size_t pad = n % 4 == 0 ? 0 : 4 - n % 4;
	out[(size_t)len - pad] = '\0';
	free(t);
	return (char *)out;
}

static char *b64u_encode(const char *s)
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

/* Signs claims with our own keys (a token jwt_sign would make). */
static char *sign_ours(json_t *claims, const char *typ)
{
	char *t = NULL;
	ck_assert_int_eq(jwt_sign(kr, typ, claims, &t), CS_OK);
	return t;
}

static const char *last_why;     /* grant_validate's reason in the last validate() */

/* true when token validates; last_why holds the reason when it does not. */
static bool validate(const char *token, int64_t now)
{
	struct grant_check gc;
	last_why = "(not written)";
	ck_assert_int_eq(grant_validate(sc, &cfg, kr, token, now, &gc), CS_OK);
	last_why = gc.why;
	if (gc.valid) {
		ck_assert_ptr_nonnull(gc.claims);
		ck_assert_ptr_nonnull(gc.k.id);
		ck_assert_ptr_null(last_why);
	} else {
		ck_assert_ptr_null(gc.claims);
		ck_assert_ptr_null(gc.k.id);
		ck_assert_ptr_nonnull(last_why);
	}
	bool valid = gc.valid;
	grant_check_clear(&gc);
	return valid;
}

/* Does any row of table hold needle, in any column, as text or bytes? */
static bool table_holds(const char *table, const char *needle)
{
	char sql[128];
	sqlite3_stmt *s = NULL;
	bool found = false;
	size_t nl = strlen(needle);
	snprintf(sql, sizeof sql, "SELECT * FROM %s", table);
	ck_assert_int_eq(sqlite3_prepare_v2(raw, sql, -1, &s, NULL), SQLITE_OK);
	while (sqlite3_step(s) == SQLITE_ROW) {
		for (int i = 0; i < sqlite3_column_count(s); i++) {
			const void *b = sqlite3_column_blob(s, i);
			int n = sqlite3_column_bytes(s, i);
			if (b != NULL && n > 0 && memmem(b, (size_t)n, needle, nl) != NULL)
				found = true;
		}
	}
	sqlite3_finalize(s);
	return found;
}

/* --- issuing ----------------------------------------------------------- */

/* A subject with every kind of byte JSON must escape comes back exactly, and
 * nothing else is added to the claims. */
START_TEST(test_grant_issue_claims_escaped_subject)
{
	struct grant_response g;
	const char *sub = "a\"b\\c/</script>&\x01\x1f\x7f\n\xc3\xa9\xf0\x9f\x98\x80";
	char *kid = make_consent(sub, "read", 3600, false, NOW);
	issue(kid, "read", false, NOW, &g);
	json_t *cl = verified_claims(g.access_token);
	ck_assert_str_eq(jstr(cl, "sub"), sub);
	ck_assert_str_eq(jstr(json_object_get(cl, "act"), "sub"), "coder");
	ck_assert_str_eq(jstr(cl, "cid"), kid);
	ck_assert_uint_eq(json_object_size(cl), 11);
	json_decref(cl);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

START_TEST(test_grant_issue_claims_exact)
{
	struct grant_response g;
	char *kid = make_consent("alice", "read write", 3600, false, NOW);
	issue(kid, "read write", false, NOW, &g);
	ck_assert_ptr_null(g.refresh_token);
	ck_assert_int_eq(g.expires_in, TTL);
	ck_assert_str_eq(g.scope, "read write");

	json_t *cl = verified_claims(g.access_token);
	ck_assert_str_eq(jstr(cl, "iss"), PUBLIC_URL);
	ck_assert_str_eq(jstr(cl, "sub"), "alice");
	ck_assert_str_eq(jstr(cl, "aud"), GW_ID);
	ck_assert_str_eq(jstr(cl, "client_id"), GW_ID);
	ck_assert_str_eq(jstr(json_object_get(cl, "act"), "sub"), "coder");
	ck_assert_uint_eq(json_object_size(json_object_get(cl, "act")), 1);
	ck_assert_str_eq(jstr(cl, "scope"), "read write");
	ck_assert_str_eq(jstr(cl, "resource"), NOTES_URI);
	ck_assert_str_eq(jstr(cl, "cid"), kid);
	ck_assert_str_eq(jstr(cl, "jti"), g.jti);
	ck_assert_uint_ge(strlen(g.jti), 22);
	ck_assert_int_eq(jint(cl, "iat"), NOW);
	ck_assert_int_eq(jint(cl, "exp"), NOW + TTL);
	ck_assert_uint_eq(json_object_size(cl), 11);   /* nothing else */

	/* The jti is recorded with its consent and times. */
	ck_assert_int_eq(q_int("SELECT count(*) FROM grants WHERE jti = ?1", g.jti), 1);
	ck_assert_int_eq(q_int("SELECT expires_at FROM grants WHERE jti = ?1", g.jti), NOW + TTL);
	ck_assert_int_eq(q_int("SELECT issued_at FROM grants WHERE jti = ?1", g.jti), NOW);
	ck_assert_int_eq(audits("grant.issued"), 1);
	ck_assert_int_eq(audits("refresh.issued"), 0);
	/* A grant issued is a use of its consent (/me's "last used"). */
	ck_assert_int_eq(q_int("SELECT last_used_at FROM consents WHERE id = ?1", kid), NOW);

	/* A second grant has another jti; a narrower scope is signed as asked. */
	struct grant_response g2;
	issue(kid, "read", false, NOW + 1, &g2);
	ck_assert_str_ne(g2.jti, g.jti);
	ck_assert_int_eq(q_int("SELECT last_used_at FROM consents WHERE id = ?1", kid), NOW + 1);
	json_t *cl2 = verified_claims(g2.access_token);
	ck_assert_str_eq(jstr(cl2, "scope"), "read");
	json_decref(cl2);
	json_decref(cl);
	grant_response_clear(&g);
	grant_response_clear(&g2);
	free(kid);
}
END_TEST

static uint64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The jti's first 11 characters as the milliseconds they hold (hex digits
 * only); UINT64_MAX when they are not. */
static uint64_t jti_ms(const char *jti)
{
	uint64_t ms = 0;
	for (int i = 0; i < 11; i++) {
		char ch = jti[i];
		if (ch >= '0' && ch <= '9')
			ms = ms * 16 + (uint64_t)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			ms = ms * 16 + (uint64_t)(ch - 'a' + 10);
		else
			return UINT64_MAX;
	}
	return ms;
}

/* A jti is the time it was made (milliseconds, 11 hex digits) and then 192
 * random bits (32 base64url characters): ids of one node grow, so a grant's
 * row goes at the end of the jti index (issue 34), and stay unguessable. */
START_TEST(test_grant_issue_jti_time_ordered)
{
	struct grant_response g1, g2;
	char *kid = make_consent("alice", "read", 3600, false, NOW);
	uint64_t before = wall_ms();
	issue(kid, "read", false, NOW, &g1);
	issue(kid, "read", false, NOW, &g2);
	uint64_t after = wall_ms();
	const struct grant_response *gs[2] = { &g1, &g2 };
	for (int i = 0; i < 2; i++) {
		const char *jti = gs[i]->jti;
		ck_assert_uint_eq(strlen(jti), 43);
		uint64_t ms = jti_ms(jti);
		ck_assert_msg(ms >= before && ms <= after, "jti %s does not begin with the time it "
		    "was made (%llu..%llu ms)", jti, (unsigned long long)before,
		    (unsigned long long)after);
		for (size_t k = 11; k < 43; k++)
			ck_assert_msg(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			    "0123456789-_", jti[k]) != NULL, "jti %s: not base64url", jti);
	}
	ck_assert_uint_le(jti_ms(g1.jti), jti_ms(g2.jti));
	ck_assert_str_ne(g1.jti + 11, g2.jti + 11);   /* the random parts differ */
	grant_response_clear(&g1);
	grant_response_clear(&g2);
	free(kid);
}
END_TEST

START_TEST(test_grant_issue_header_typ)
{
	struct grant_response g;
	char *kid = make_consent("alice", "read", 3600, false, NOW);
	issue(kid, "read", false, NOW, &g);
	const char *dot = strchr(g.access_token, '.');
	ck_assert_ptr_nonnull(dot);
	char *hdr = b64u_decode(g.access_token, (size_t)(dot - g.access_token));
	json_t *h = json_loads(hdr, 0, NULL);
	ck_assert_ptr_nonnull(h);
	ck_assert_str_eq(jstr(h, "typ"), "at+jwt");
	ck_assert_str_eq(jstr(h, "alg"), "ES256");
	ck_assert_str_eq(jstr(h, "kid"), keyring_signing_kid(kr));
	/* And a verifier that pins another typ refuses it. */
	json_t *cl = NULL;
	ck_assert_int_ne(jwt_verify(kr, "JWT", g.access_token, &cl), CS_OK);
	json_decref(h);
	free(hdr);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

START_TEST(test_grant_issue_exp_capped_by_consent)
{
	struct grant_response g;
	char *kid = make_consent("alice", "read", 100, false, NOW);
	issue(kid, "read", false, NOW, &g);
	ck_assert_int_eq(g.expires_in, 100);
	json_t *cl = verified_claims(g.access_token);
	ck_assert_int_eq(jint(cl, "exp"), NOW + 100);
	json_decref(cl);
	grant_response_clear(&g);
	/* Later in the consent's life, what remains of it. */
	issue(kid, "read", false, NOW + 90, &g);
	ck_assert_int_eq(g.expires_in, 10);
	grant_response_clear(&g);
	/* At its expiry, no grant at all. */
	ck_assert_int_eq(issue_with(kr, kid, "read", false, NOW + 100, &g), GRANT_ISSUE_REFUSED);
	ck_assert_ptr_null(g.access_token);
	free(kid);
}
END_TEST

START_TEST(test_grant_issue_refused_cases)
{
	struct grant_response g;
	char *kid = make_consent("alice", "read", 3600, false, NOW);
	/* A scope the person did not grant, and the empty scope. */
	ck_assert_int_eq(issue_with(kr, kid, "read write", false, NOW, &g), GRANT_ISSUE_REFUSED);
	ck_assert_int_eq(issue_with(kr, kid, "", false, NOW, &g), GRANT_ISSUE_REFUSED);
	/* A refresh token for a consent not given for offline use. */
	ck_assert_int_eq(issue_with(kr, kid, "read", true, NOW, &g), GRANT_ISSUE_REFUSED);
	ck_assert_ptr_null(g.access_token);
	ck_assert_int_eq(q_int("SELECT count(*) FROM grants", NULL), 0);
	ck_assert_int_eq(audits("grant.issued"), 0);

	/* The caller's snapshot says live, the database says revoked: refused. */
	struct consent k = load(kid, NOW);
	struct scope_set s = set("read");
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:x", "test", NOW + 1, false), CS_OK);
	memset(&g, 0, sizeof g);
	struct grant_issue_req rq = { .k = &k, .scope = &s, .actor = ACTOR, .now = NOW + 2 };
	enum grant_issue_outcome oc = GRANT_ISSUE__MAX;
	ck_assert_int_eq(grant_issue(sc, &cfg, kr, &rq, &oc, &g), CS_OK);
	ck_assert_int_eq(oc, GRANT_ISSUE_REVOKED);
	ck_assert_ptr_null(g.access_token);
	ck_assert_int_eq(q_int("SELECT count(*) FROM grants", NULL), 0);
	/* Bad arguments. */
	rq.now = NOW;
	ck_assert_int_eq(grant_issue(sc, &cfg, NULL, &rq, &oc, &g), CS_ECRYPTO);
	ck_assert_int_eq(grant_issue(sc, &cfg, kr, &rq, NULL, &g), CS_EINVAL);
	rq.k = NULL;
	ck_assert_int_eq(grant_issue(sc, &cfg, kr, &rq, &oc, &g), CS_EINVAL);
	scope_set_clear(&s);
	consent_clear(&k);
	free(kid);
}
END_TEST

/* The signature is made before the transaction, for the caller's snapshot of
 * the consent; when the database says otherwise inside the transaction, the
 * grant follows the database (signed again there) or is refused. */
START_TEST(test_grant_issue_snapshot_differs_from_database)
{
	struct grant_response g;
	char *kid = make_consent("alice", "read", 100, false, NOW);
	struct consent k = load(kid, NOW);
	struct scope_set s = set("read"), rw = set("read write");
	struct grant_issue_req rq = { .k = &k, .scope = &s, .actor = ACTOR, .now = NOW };
	int64_t real_end = k.expires_at;
	/* A snapshot that promises a longer life than the consent has. */
	k.expires_at = NOW + 3600;
	memset(&g, 0, sizeof g);
	enum grant_issue_outcome oc = GRANT_ISSUE__MAX;
	ck_assert_int_eq(grant_issue(sc, &cfg, kr, &rq, &oc, &g), CS_OK);
	ck_assert_int_eq(oc, GRANT_ISSUED);
	ck_assert_int_eq(g.expires_in, 100);
	json_t *cl = verified_claims(g.access_token);
	ck_assert_int_eq(jint(cl, "exp"), NOW + 100);
	json_decref(cl);
	grant_response_clear(&g);
	/* A snapshot naming another person: the grant is the consent's person's. */
	k.expires_at = real_end;
	k.subject = (char *)"mallory";   /* k.strings still holds "alice"; consent_clear frees it */
	ck_assert_int_eq(grant_issue(sc, &cfg, kr, &rq, &oc, &g), CS_OK);
	ck_assert_int_eq(oc, GRANT_ISSUED);
	cl = verified_claims(g.access_token);
	ck_assert_str_eq(jstr(cl, "sub"), "alice");
	json_decref(cl);
	grant_response_clear(&g);
	/* A snapshot that grants a scope the consent does not: refused, nothing kept. */
	int64_t before = q_int("SELECT count(*) FROM grants", NULL);
	scope_set_clear(&k.granted);
	k.granted = set("read write");
	rq.scope = &rw;
	ck_assert_int_eq(grant_issue(sc, &cfg, kr, &rq, &oc, &g), CS_OK);
	ck_assert_int_eq(oc, GRANT_ISSUE_REFUSED);
	ck_assert_ptr_null(g.access_token);
	ck_assert_int_eq(q_int("SELECT count(*) FROM grants", NULL), before);
	/* The snapshot as it is: signed outside and kept, exactly as asked. */
	consent_clear(&k);
	k = load(kid, NOW);
	rq.scope = &s;
	ck_assert_int_eq(grant_issue(sc, &cfg, kr, &rq, &oc, &g), CS_OK);
	ck_assert_int_eq(oc, GRANT_ISSUED);
	cl = verified_claims(g.access_token);
	ck_assert_str_eq(jstr(cl, "sub"), "alice");
	ck_assert_str_eq(jstr(cl, "scope"), "read");
	ck_assert_str_eq(jstr(cl, "jti"), g.jti);
	json_decref(cl);
	ck_assert_int_eq(q_int("SELECT count(*) FROM grants WHERE jti = ?1", g.jti), 1);
	grant_response_clear(&g);
	scope_set_clear(&s);
	scope_set_clear(&rw);
	consent_clear(&k);
	free(kid);
}
END_TEST

/* Flow A's grant for sub asking coder for scope_s on notes (exchange_grant). */
static void xgrant(const char *sub, const char *scope_s, int64_t now, struct exchange_grant *out)
{
	struct agent_view ag;
	struct scope_set want = set(scope_s);
	ck_assert(agent_resolve(&cfg, "coder", &ag));
	memset(out, 0, sizeof *out);
	ck_assert_int_eq(exchange_grant(sc, &cfg, &(struct exchange_grant_req){ .kr = kr,
	    .issuer = ISS, .subject = sub, .agent = &ag, .res = &resources[0], .want = &want,
	    .actor = ACTOR, .now = now }, out), CS_OK);
	scope_set_clear(&want);
}

/* Whether this thread remembers a consent for sub, coder and notes. */
static bool remembered(const char *sub, int64_t now, char **kid)
{
	struct store_consent_row r;
	memset(&r, 0, sizeof r);
	const struct consent_memo_key key = { ISS, sub, "coder", "notes" };
	bool got = consent_memo_get(&key, now, &r);
	if (got && kid != NULL)
		*kid = strdup(r.id);
	store_consent_row_clear(&r);
	return got;
}

/* Flow A signs for a consent this thread remembers only when the writer's
 * transaction finds it the same and covering: a revoked one, or one whose
 * provider connection must be made again, is forgotten and the call takes
 * the full path, which answers what is live now. */
START_TEST(test_grant_exchange_remembered_consent_is_only_a_hint)
{
	struct exchange_grant x;
	char *kid = make_consent("alice", "read", 3600, false, NOW), *kid2 = NULL, *seen = NULL;
	int64_t uid = q_int("SELECT id FROM users WHERE subject = ?1", "alice");

	/* The first grant reads the consent and remembers it; the second is
	 * answered from memory, and both are the consent's. */
	ck_assert(!remembered("alice", NOW + 1, NULL));
	xgrant("alice", "read", NOW + 1, &x);
	ck_assert_int_eq(x.outcome, EXCHANGE_GRANTED);
	ck_assert(remembered("alice", NOW + 1, &seen));
	ck_assert_str_eq(seen, kid);
	free(seen);
	exchange_grant_clear(&x);
	xgrant("alice", "read", NOW + 2, &x);
	ck_assert_int_eq(x.outcome, EXCHANGE_GRANTED);
	ck_assert_str_eq(x.answer.live.id, kid);
	exchange_grant_clear(&x);
	ck_assert_int_eq(audits("grant.issued"), 2);
	/* Nor is it used once CONSENT_MEMO_TTL seconds old. */
	ck_assert(!remembered("alice", NOW + 1 + CONSENT_MEMO_TTL, NULL));

	/* Revoked, and a new consent made for the same call, while this thread
	 * still remembers the old one: the grant is the new consent's. */
	xgrant("alice", "read", NOW + 3, &x);
	exchange_grant_clear(&x);
	ck_assert_int_eq(tu_revoke(sc, kid, uid, "user:alice", "x", NOW + 4, false), CS_OK);
	kid2 = make_consent("alice", "read", 3600, false, NOW + 5);
	ck_assert(remembered("alice", NOW + 7, &seen));
	ck_assert_str_eq(seen, kid);            /* the revoked one */
	free(seen);
	xgrant("alice", "read", NOW + 7, &x);
	ck_assert_int_eq(x.outcome, EXCHANGE_GRANTED);
	ck_assert_str_eq(x.answer.live.id, kid2);
	json_t *cl = verified_claims(x.grant.access_token);
	ck_assert_str_eq(jstr(cl, "cid"), kid2);
	json_decref(cl);
	exchange_grant_clear(&x);
	ck_assert(remembered("alice", NOW + 7, &seen));
	ck_assert_str_eq(seen, kid2);
	free(seen);
	ck_assert_int_eq(audits("grant.issued"), 4);

	/* The provider rejected its connection (flow D) after this thread
	 * remembered it: no grant; the gateway is told to have the person
	 * reconnect, as the full path says. */
	char upd[160];
	snprintf(upd, sizeof upd, "UPDATE consents SET reconnect_required = 1 WHERE id = '%s'", kid2);
	ck_assert_int_eq(sqlite3_exec(raw, upd, NULL, NULL, NULL), SQLITE_OK);
	xgrant("alice", "read", NOW + 8, &x);
	ck_assert_int_eq(x.outcome, EXCHANGE_NO_GRANT);
	ck_assert_int_eq(x.answer.outcome, CONSENT_REQUIRED);
	ck_assert(x.answer.reconnect);
	ck_assert_ptr_null(x.grant.access_token);
	exchange_grant_clear(&x);
	ck_assert(!remembered("alice", NOW + 8, NULL));
	ck_assert_int_eq(audits("grant.issued"), 4);
	free(kid);
	free(kid2);
}
END_TEST

/* --- validation and introspection -------------------------------------- */

START_TEST(test_grant_introspect_active_grant)
{
	struct grant_response g;
	char *kid = make_consent("alice", "read write", 3600, false, NOW);
	issue(kid, "read", false, NOW, &g);
	json_t *v = introspect(g.access_token, NOW + 10);
	ck_assert(json_is_true(json_object_get(v, "active")));
	ck_assert_str_eq(jstr(v, "token_use"), "grant");
	ck_assert_str_eq(jstr(v, "token_type"), "Bearer");
	ck_assert_str_eq(jstr(v, "client_id"), GW_ID);
	ck_assert_str_eq(jstr(v, "sub"), "alice");
	ck_assert_str_eq(jstr(v, "scope"), "read");
	ck_assert_str_eq(jstr(v, "cid"), kid);
	ck_assert_str_eq(jstr(v, "jti"), g.jti);
	ck_assert_str_eq(jstr(json_object_get(v, "act"), "sub"), "coder");
	ck_assert_int_eq(jint(v, "exp"), NOW + TTL);
	json_decref(v);

	/* grant_validate hands back the consent. */
	struct grant_check gc;
	ck_assert_int_eq(grant_validate(sc, &cfg, kr, g.access_token, NOW + 10, &gc), CS_OK);
	ck_assert(gc.valid);
	ck_assert_str_eq(gc.k.id, kid);
	ck_assert_str_eq(gc.k.subject, "alice");
	ck_assert_str_eq(jstr(gc.claims, "jti"), g.jti);
	grant_check_clear(&gc);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

START_TEST(test_grant_introspect_inactive_after_revoke)
{
	struct grant_response g, other;
	char *kid = make_consent("alice", "read", 3600, false, NOW);
	issue(kid, "read", false, NOW, &g);
	issue(kid, "read", false, NOW, &other);
	ck_active(g.access_token, NOW + 1, "grant");
	ck_assert_int_eq(grant_revoke(sc, &cfg, kr, g.access_token, ACTOR, NOW + 2), CS_OK);
	ck_inactive(g.access_token, NOW + 3);
	ck_assert(!validate(g.access_token, NOW + 3));
	ck_assert_int_eq(q_int("SELECT revoked_at FROM grants WHERE jti = ?1", g.jti), NOW + 2);
	ck_assert_int_eq(audits("grant.revoked"), 1);
	/* Revoking again is fine and not audited twice; the other grant lives. */
	ck_assert_int_eq(grant_revoke(sc, &cfg, kr, g.access_token, ACTOR, NOW + 4), CS_OK);
	ck_assert_int_eq(audits("grant.revoked"), 1);
	ck_active(other.access_token, NOW + 5, "grant");
	grant_response_clear(&g);
	grant_response_clear(&other);
	free(kid);
}
END_TEST

START_TEST(test_grant_introspect_inactive_after_consent_revoke)
{
	struct grant_response g;
	char *kid = make_consent("alice", "read", 3600, false, NOW);
	issue(kid, "read", false, NOW, &g);
	ck_active(g.access_token, NOW + 1, "grant");
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "user:alice", "revoked on /me", NOW + 2, false),
	    CS_OK);
	ck_inactive(g.access_token, NOW + 3);
	ck_assert(!validate(g.access_token, NOW + 3));
	grant_response_clear(&g);
	free(kid);
}
END_TEST

START_TEST(test_grant_introspect_inactive_after_expiry)
{
	struct grant_response g;
	char *kid = make_consent("alice", "read", 3600, false, NOW);
	issue(kid, "read", false, NOW, &g);
	ck_active(g.access_token, NOW + TTL - 1, "grant");
	ck_inactive(g.access_token, NOW + TTL);
	ck_inactive(g.access_token, NOW + TTL + 1000);
	ck_assert(!validate(g.access_token, NOW + TTL));
	/* A grant cut short by its consent dies with the consent's expiry. */
	grant_response_clear(&g);
	free(kid);
	kid = make_consent("bob", "read", 50, false, NOW);
	issue(kid, "read", false, NOW, &g);
	ck_active(g.access_token, NOW + 49, "grant");
	ck_inactive(g.access_token, NOW + 50);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

START_TEST(test_grant_introspect_inactive_foreign_keyring)
{
	struct grant_response g;
	char *kid = make_consent("alice", "read", 3600, false, NOW);
	/* Signed by another consentd's key, yet its jti is in our database:
	 * only the signature is wrong. */
	ck_assert_int_eq(issue_with(kr_other, kid, "read", false, NOW, &g), GRANT_ISSUED);
	ck_inactive(g.access_token, NOW + 1);
	ck_assert(!validate(g.access_token, NOW + 1));
	/* Nor may it revoke anything. */
	ck_assert_int_eq(grant_revoke(sc, &cfg, kr, g.access_token, ACTOR, NOW + 2), CS_OK);
	ck_assert_int_eq(q_int("SELECT revoked_at FROM grants WHERE jti = ?1", g.jti), 0);
	ck_assert_int_eq(audits("grant.revoked"), 0);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

START_TEST(test_grant_introspect_inactive_garbage)
{
	char big[9000];
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	big[10] = '.';
	big[20] = '.';
	const char *bad[] = {
		"", "garbage", "a.b.c", "..", "a..c", "a.b.c.d", "eyJ.eyJ.", "x y z",
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",   /* refresh-shaped, unknown */
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA+",   /* not base64url */
		big,
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_inactive(bad[i], NOW);
		ck_assert_int_eq(grant_revoke(sc, &cfg, kr, bad[i], ACTOR, NOW), CS_OK);
	}
	ck_inactive(NULL, NOW);
	ck_assert_int_eq(grant_revoke(sc, &cfg, kr, NULL, ACTOR, NOW), CS_OK);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit", NULL), 0);
}
END_TEST

START_TEST(test_grant_introspect_inactive_alg_none)
{
	struct grant_response g;
	char hdr[256];
	char *kid = make_consent("alice", "read", 3600, false, NOW);
	issue(kid, "read", false, NOW, &g);
	const char *d1 = strchr(g.access_token, '.');
	const char *d2 = strchr(d1 + 1, '.');
	char *payload = strndup(d1 + 1, (size_t)(d2 - d1 - 1));
	snprintf(hdr, sizeof hdr, "{\"alg\":\"none\",\"typ\":\"at+jwt\",\"kid\":\"%s\"}",
	    keyring_signing_kid(kr));
	char *h = b64u_encode(hdr);
	/* The real claims (known jti, live consent) under alg none: empty
	 * signature, and the real signature carried over. */
	size_t n = strlen(h) + strlen(payload) + strlen(d2) + 4;
	char *t1 = malloc(n), *t2 = malloc(n);
	snprintf(t1, n, "%s.%s.", h, payload);
	snprintf(t2, n, "%s.%s%s", h, payload, d2);
	ck_inactive(t1, NOW + 1);
	ck_inactive(t2, NOW + 1);
	ck_assert(!validate(t1, NOW + 1));
	ck_assert(!validate(t2, NOW + 1));
	/* And they revoke nothing. */
	ck_assert_int_eq(grant_revoke(sc, &cfg, kr, t2, ACTOR, NOW + 1), CS_OK);
	ck_active(g.access_token, NOW + 2, "grant");
	free(t1);
	free(t2);
	free(h);
	free(payload);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

/* Tokens signed with our own key but with one claim wrong. */
START_TEST(test_grant_validate_claim_checks)
{
	struct grant_response g;
	char *kid = make_consent("alice", "read", 3600, false, NOW);
	issue(kid, "read", false, NOW, &g);
	json_t *base = verified_claims(g.access_token);
	struct { const char *claim; json_t *value; } bad[] = {
		{ "iss", json_string("https://evil.example.com") },
		{ "iss", json_string(PUBLIC_URL "/") },
		{ "aud", json_string("someone-else") },
		{ "aud", json_pack("[s]", "someone-else") },
		{ "client_id", json_string("someone-else") },
		{ "sub", json_string("mallory") },
		{ "act", json_pack("{s:s}", "sub", "other-agent") },
		{ "act", json_string("coder") },
		{ "cid", json_string("AAAAAAAAAAAAAAAAAAAAAA") },
		{ "jti", json_string("unknown-jti-unknown-jti") },
		{ "jti", json_integer(1) },
		{ "scope", json_string("read admin") },
		{ "resource", json_string("urn:consentd:resource:other") },
		{ "iat", json_integer(NOW + 100) },                 /* issued in the future */
		{ "iat", json_integer(NOW - 1000) },                /* lifetime beyond the cap */
		{ "exp", json_integer(NOW + 5) },                   /* expired at NOW + 10 */
		{ "exp", json_string("never") },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		json_t *c = json_deep_copy(base);
		ck_assert_ptr_nonnull(bad[i].value);
		json_object_set_new(c, bad[i].claim, bad[i].value);
		char *t = sign_ours(c, "at+jwt");
		ck_assert_msg(!validate(t, NOW + 10), "claim %s (case %zu) accepted",
		    bad[i].claim, i);
		ck_inactive(t, NOW + 10);
		free(t);
		json_decref(c);
	}
	/* Missing claims. */
	const char *need[] = { "iss", "aud", "sub", "act", "cid", "jti", "exp", "iat", "scope" };
	for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
		json_t *c = json_deep_copy(base);
		json_object_del(c, need[i]);
		char *t = sign_ours(c, "at+jwt");
		ck_assert_msg(!validate(t, NOW + 10), "without %s accepted", need[i]);
		free(t);
		json_decref(c);
	}
	/* Our key, our claims, but another typ: an ID-token-like JWT. */
	char *t = sign_ours(base, "JWT");
	ck_assert(!validate(t, NOW + 10));
	ck_inactive(t, NOW + 10);
	free(t);
	/* An audience array holding the gateway is accepted (RFC 7519 §4.1.3). */
	json_t *c = json_deep_copy(base);
	json_object_set_new(c, "aud", json_pack("[s,s]", "x", GW_ID));
	t = sign_ours(c, "at+jwt");
	ck_assert(validate(t, NOW + 10));
	free(t);
	json_decref(c);
	json_decref(base);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

/* Each refusal names its check: expired, revoked, the consent ended, not ours. */
START_TEST(test_grant_validate_reasons)
{
	struct grant_response g, g2, g3;
	char *kid = make_consent("alice", "read", 3600, false, NOW);
	issue(kid, "read", false, NOW, &g);
	issue(kid, "read", false, NOW, &g2);
	ck_assert(validate(g.access_token, NOW + 10));

	ck_assert(!validate(g.access_token, NOW + TTL));
	ck_assert_str_eq(last_why, "grant expired");
	ck_assert(!validate(g.access_token, NOW + TTL + 1000));
	ck_assert_str_eq(last_why, "grant expired");

	ck_assert(!validate("not.a.grant", NOW + 10));
	ck_assert_str_eq(last_why, "not a consentd grant");
	ck_assert(!validate("", NOW + 10));
	ck_assert_str_eq(last_why, "not a consentd grant");
	json_t *base = verified_claims(g.access_token);
	char *t = sign_ours(base, "JWT");                  /* our key, another typ */
	ck_assert(!validate(t, NOW + 10));
	ck_assert_str_eq(last_why, "not a consentd grant");
	free(t);
	json_t *c = json_deep_copy(base);
	json_object_set_new(c, "aud", json_string("someone-else"));
	t = sign_ours(c, "at+jwt");
	ck_assert(!validate(t, NOW + 10));
	ck_assert_str_eq(last_why, "not a grant for this gateway");
	free(t);
	json_decref(c);
	c = json_deep_copy(base);
	json_object_set_new(c, "iat", json_integer(NOW + 100));
	t = sign_ours(c, "at+jwt");
	ck_assert(!validate(t, NOW + 10));
	ck_assert_str_eq(last_why, "grant issued in the future");
	free(t);
	json_decref(c);
	c = json_deep_copy(base);
	json_object_set_new(c, "jti", json_string("unknown-jti-unknown-jti"));
	t = sign_ours(c, "at+jwt");
	ck_assert(!validate(t, NOW + 10));
	ck_assert_str_eq(last_why, "grant unknown to this consentd");
	free(t);
	json_decref(c);
	c = json_deep_copy(base);
	json_object_set_new(c, "sub", json_string("mallory"));
	t = sign_ours(c, "at+jwt");
	ck_assert(!validate(t, NOW + 10));
	ck_assert_str_eq(last_why, "grant does not match its consent");
	free(t);
	json_decref(c);
	json_decref(base);

	/* The gateway revokes one grant: that one is "revoked", the other still good. */
	ck_assert_int_eq(grant_revoke(sc, &cfg, kr, g.access_token, ACTOR, NOW + 11), CS_OK);
	ck_assert(!validate(g.access_token, NOW + 12));
	ck_assert_str_eq(last_why, "grant revoked");
	ck_assert(validate(g2.access_token, NOW + 12));

	/* The person revokes the consent: its grants are revoked with it. */
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "user:alice", "revoked on /me", NOW + 13, false),
	    CS_OK);
	ck_assert(!validate(g2.access_token, NOW + 14));
	ck_assert_str_eq(last_why, "grant revoked");

	/* A consent that ran out while its grant is unexpired (a grant signed
	 * before the consent was shortened by hand): "the grant's consent expired". */
	char *kid2 = make_consent("bob", "read", 3600, false, NOW);
	issue(kid2, "read", false, NOW, &g3);
	char sql[256];
	snprintf(sql, sizeof sql, "UPDATE consents SET expires_at = %lld WHERE id = '%s'",
	    (long long)(NOW + 5), kid2);
	ck_assert_int_eq(sqlite3_exec(raw, sql, NULL, NULL, NULL), SQLITE_OK);
	ck_assert(!validate(g3.access_token, NOW + 10));
	ck_assert_str_eq(last_why, "the grant's consent expired");
	grant_response_clear(&g);
	grant_response_clear(&g2);
	grant_response_clear(&g3);
	free(kid);
	free(kid2);
}
END_TEST

/* --- refresh tokens ---------------------------------------------------- */

START_TEST(test_grant_refresh_rotation)
{
	struct grant_response g, g2, g3;
	char *kid = make_consent("alice", "read write", 7200, true, NOW);
	issue(kid, "read write", true, NOW, &g);
	ck_assert_ptr_nonnull(g.refresh_token);
	ck_assert_uint_eq(strlen(g.refresh_token), 43);
	ck_assert_int_eq(audits("refresh.issued"), 1);

	/* Introspection of a current refresh token. */
	json_t *v = introspect(g.refresh_token, NOW + 1);
	ck_assert(json_is_true(json_object_get(v, "active")));
	ck_assert_str_eq(jstr(v, "token_use"), "refresh");
	ck_assert_str_eq(jstr(v, "client_id"), GW_ID);
	ck_assert_str_eq(jstr(v, "sub"), "alice");
	ck_assert_str_eq(jstr(v, "scope"), "read write");
	ck_assert_str_eq(jstr(v, "cid"), kid);
	ck_assert_str_eq(jstr(json_object_get(v, "act"), "sub"), "coder");
	ck_assert_int_eq(jint(v, "exp"), NOW + 7200);
	json_decref(v);

	/* Rotation: a new grant and a new refresh token; the old one is used up. */
	ck_assert_int_eq(refresh(g.refresh_token, NULL, NOW + 600, &g2), GRANT_REFRESHED);
	ck_assert_ptr_nonnull(g2.access_token);
	ck_assert_ptr_nonnull(g2.refresh_token);
	ck_assert_str_ne(g2.refresh_token, g.refresh_token);
	ck_assert_str_eq(g2.scope, "read write");
	ck_assert_int_eq(g2.expires_in, TTL);
	ck_active(g2.access_token, NOW + 601, "grant");
	json_t *cl = verified_claims(g2.access_token);
	ck_assert_int_eq(jint(cl, "iat"), NOW + 600);
	ck_assert_str_eq(jstr(cl, "cid"), kid);
	json_decref(cl);
	ck_inactive(g.refresh_token, NOW + 601);
	ck_active(g2.refresh_token, NOW + 601, "refresh");
	ck_assert_int_eq(audits("refresh.used"), 1);
	/* A grant renewed with a refresh token is a use too. */
	ck_assert_int_eq(q_int("SELECT last_used_at FROM consents WHERE id = ?1", kid), NOW + 600);

	/* The new one works in turn. */
	ck_assert_int_eq(refresh(g2.refresh_token, NULL, NOW + 1200, &g3), GRANT_REFRESHED);
	ck_assert_ptr_nonnull(g3.refresh_token);
	ck_assert_int_eq(audits("refresh.used"), 2);
	/* Same family throughout. */
	ck_assert_int_eq(q_int("SELECT count(DISTINCT family) FROM refresh_tokens", NULL), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM refresh_tokens WHERE used_at = 0", NULL), 1);
	grant_response_clear(&g);
	grant_response_clear(&g2);
	grant_response_clear(&g3);
	free(kid);
}
END_TEST

START_TEST(test_grant_refresh_reuse_revokes_family)
{
	struct grant_response g, g2, g3, other, x;
	char *kid = make_consent("alice", "read", 7200, true, NOW);
	issue(kid, "read", true, NOW, &g);
	issue(kid, "read", true, NOW, &other);    /* a second family of the same consent */
	ck_assert_int_eq(refresh(g.refresh_token, NULL, NOW + 10, &g2), GRANT_REFRESHED);
	ck_assert_int_eq(refresh(g2.refresh_token, NULL, NOW + 20, &g3), GRANT_REFRESHED);
	/* The first token, already used, comes back: someone copied it. */
	ck_assert_int_eq(refresh(g.refresh_token, NULL, NOW + 30, &x), GRANT_REFRESH_REUSED);
	ck_assert_ptr_null(x.access_token);
	ck_assert_ptr_null(x.refresh_token);
	ck_assert_int_eq(audits("refresh.reuse_detected"), 1);
	/* The whole family is dead, the current token included, and it sticks. */
	ck_assert_int_eq(refresh(g3.refresh_token, NULL, NOW + 40, &x), GRANT_REFRESH_REUSE_REVOKED);
	ck_inactive(g3.refresh_token, NOW + 40);
	/* So is every grant minted in it: the thief's as much as the holder's. */
	ck_inactive(g.access_token, NOW + 40);
	ck_inactive(g2.access_token, NOW + 40);
	ck_inactive(g3.access_token, NOW + 40);
	ck_active(other.access_token, NOW + 40, "grant");
	/* Only the other family's token is still unrevoked. */
	ck_assert_int_eq(q_int("SELECT count(*) FROM refresh_tokens WHERE revoked_at = 0", NULL), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM refresh_tokens WHERE revoked_at = ?1", "1700000030"),
	    3);
	/* The reuse of a middle token is detected the same way. */
	ck_assert_int_eq(refresh(g2.refresh_token, NULL, NOW + 50, &x), GRANT_REFRESH_REUSED);
	ck_assert_int_eq(audits("refresh.reuse_detected"), 2);
	/* The other family of the consent is untouched. */
	ck_active(other.refresh_token, NOW + 60, "refresh");
	ck_assert_int_eq(refresh(other.refresh_token, NULL, NOW + 60, &x), GRANT_REFRESHED);
	grant_response_clear(&x);
	grant_response_clear(&g);
	grant_response_clear(&g2);
	grant_response_clear(&g3);
	grant_response_clear(&other);
	free(kid);
}
END_TEST

START_TEST(test_grant_refresh_dies_with_consent)
{
	struct grant_response g, x;
	char *kid = make_consent("alice", "read", 7200, true, NOW);
	issue(kid, "read", true, NOW, &g);
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "user:alice", "revoked on /me", NOW + 5, false),
	    CS_OK);
	ck_assert_int_eq(refresh(g.refresh_token, NULL, NOW + 6, &x), GRANT_REFRESH_CONSENT_REVOKED);
	ck_assert_ptr_null(x.access_token);
	ck_inactive(g.refresh_token, NOW + 6);
	ck_assert_int_eq(audits("refresh.used"), 0);
	grant_response_clear(&g);
	free(kid);

	/* ... and with the consent's expiry. */
	kid = make_consent("bob", "read", 1000, true, NOW);
	issue(kid, "read", true, NOW, &g);
	ck_active(g.refresh_token, NOW + 999, "refresh");
	/* Near the end the new grant is cut to what remains ... */
	struct grant_response y;
	ck_assert_int_eq(refresh(g.refresh_token, NULL, NOW + 900, &y), GRANT_REFRESHED);
	ck_assert_int_eq(y.expires_in, 100);
	/* ... and at the end the new refresh token dies with the consent. */
	ck_assert_int_eq(refresh(y.refresh_token, NULL, NOW + 1000, &x), GRANT_REFRESH_EXPIRED);
	ck_inactive(y.refresh_token, NOW + 1000);
	grant_response_clear(&y);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

START_TEST(test_grant_refresh_scope_narrowing)
{
	struct grant_response g, g2, x;
	char *kid = make_consent("alice", "read write", 7200, true, NOW);
	issue(kid, "read write", true, NOW, &g);
	/* Wider than the consent: invalid_scope, and the token is not used up. */
	ck_assert_int_eq(refresh(g.refresh_token, "read admin", NOW + 1, &x), GRANT_REFRESH_BAD_SCOPE);
	ck_assert_int_eq(refresh(g.refresh_token, "admin", NOW + 1, &x), GRANT_REFRESH_BAD_SCOPE);
	ck_assert_int_eq(refresh(g.refresh_token, "", NOW + 1, &x), GRANT_REFRESH_BAD_SCOPE);
	ck_assert_ptr_null(x.access_token);
	ck_active(g.refresh_token, NOW + 2, "refresh");
	ck_assert_int_eq(audits("refresh.reuse_detected"), 0);
	/* Narrower: granted as asked. */
	ck_assert_int_eq(refresh(g.refresh_token, "read", NOW + 3, &g2), GRANT_REFRESHED);
	ck_assert_str_eq(g2.scope, "read");
	json_t *cl = verified_claims(g2.access_token);
	ck_assert_str_eq(jstr(cl, "scope"), "read");
	json_decref(cl);
	/* The next refresh without scope gets the consent's full set again. */
	ck_assert_int_eq(refresh(g2.refresh_token, NULL, NOW + 4, &x), GRANT_REFRESHED);
	ck_assert_str_eq(x.scope, "read write");
	grant_response_clear(&x);
	grant_response_clear(&g);
	grant_response_clear(&g2);
	free(kid);
}
END_TEST

START_TEST(test_grant_refresh_refused_cases)
{
	struct grant_response g, x;
	const char *bad[] = {
		"", "short", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"a.b.c",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_assert_int_eq(refresh(bad[i], NULL, NOW, &x), GRANT_REFRESH_INVALID);
		ck_assert_ptr_null(x.access_token);
	}
	ck_assert_int_eq(refresh(NULL, NULL, NOW, &x), GRANT_REFRESH_INVALID);
	/* A grant is not a refresh token. */
	char *kid = make_consent("alice", "read", 7200, true, NOW);
	issue(kid, "read", true, NOW, &g);
	ck_assert_int_eq(refresh(g.access_token, NULL, NOW + 1, &x), GRANT_REFRESH_INVALID);
	/* No keys is the server's fault (never invalid_scope); the token survives. */
	enum grant_refresh_outcome oc;
	struct grant_refresh_req rq = { .refresh_token = g.refresh_token, .actor = ACTOR,
		.now = NOW + 1 };
	ck_assert_int_eq(grant_refresh(sc, &cfg, NULL, &rq, &oc, &x), CS_ECRYPTO);
	/* A resource no longer configured: invalid_grant, not invalid_scope. */
	cfg.nresources = 0;
	ck_assert_int_eq(refresh(g.refresh_token, NULL, NOW + 1, &x), GRANT_REFRESH_NOT_CONFIGURED);
	cfg.nresources = 1;
	ck_active(g.refresh_token, NOW + 1, "refresh");
	/* An agent no longer configured offline: the family stops renewing, and
	 * new grants come without a refresh token. */
	agents[0].offline = false;
	ck_assert_int_eq(refresh(g.refresh_token, NULL, NOW + 2, &x), GRANT_REFRESH_NOT_OFFLINE);
	ck_inactive(g.refresh_token, NOW + 2);
	grant_response_clear(&g);
	issue(kid, "read", true, NOW + 3, &g);
	ck_assert_ptr_null(g.refresh_token);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

START_TEST(test_grant_revoke_refresh_family)
{
	struct grant_response g, g2, x;
	char *kid = make_consent("alice", "read", 7200, true, NOW);
	issue(kid, "read", true, NOW, &g);
	ck_assert_int_eq(refresh(g.refresh_token, NULL, NOW + 1, &g2), GRANT_REFRESHED);
	/* Revoking the used first token ends the family, the current one too. */
	ck_assert_int_eq(grant_revoke(sc, &cfg, kr, g.refresh_token, ACTOR, NOW + 2), CS_OK);
	ck_assert_int_eq(audits("refresh.revoked"), 1);
	ck_inactive(g2.refresh_token, NOW + 3);
	ck_assert_int_eq(refresh(g2.refresh_token, NULL, NOW + 3, &x), GRANT_REFRESH_REVOKED);
	/* Again: fine, not audited twice. */
	ck_assert_int_eq(grant_revoke(sc, &cfg, kr, g2.refresh_token, ACTOR, NOW + 4), CS_OK);
	ck_assert_int_eq(audits("refresh.revoked"), 1);
	/* The grants minted in the family end with it. */
	ck_inactive(g.access_token, NOW + 5);
	ck_inactive(g2.access_token, NOW + 5);
	ck_assert_int_eq(q_int("SELECT count(*) FROM grants WHERE family IS NOT NULL AND revoked_at = 0",
	    NULL), 0);
	grant_response_clear(&g);
	grant_response_clear(&g2);
	free(kid);
}
END_TEST

/* --- secrets at rest --------------------------------------------------- */

START_TEST(test_grant_refresh_never_stored_in_clear)
{
	struct grant_response g, g2, x;
	unsigned char h[32];
	char *kid = make_consent("alice", "read write", 7200, true, NOW);
	issue(kid, "read write", true, NOW, &g);
	ck_assert_int_eq(refresh(g.refresh_token, "read", NOW + 1, &g2), GRANT_REFRESHED);
	ck_assert_int_eq(refresh(g.refresh_token, NULL, NOW + 2, &x), GRANT_REFRESH_REUSED);   /* reuse */
	ck_assert_int_eq(grant_revoke(sc, &cfg, kr, g2.access_token, ACTOR, NOW + 3), CS_OK);
	ck_assert_int_eq(grant_revoke(sc, &cfg, kr, g2.refresh_token, ACTOR, NOW + 3), CS_OK);
	const char *tokens[] = { g.refresh_token, g2.refresh_token };
	const char *tables[] = { "refresh_tokens", "grants", "audit", "consents" };
	for (size_t i = 0; i < 2; i++) {
		for (size_t j = 0; j < sizeof tables / sizeof tables[0]; j++)
			ck_assert_msg(!table_holds(tables[j], tokens[i]), "refresh token %zu in %s", i,
			    tables[j]);
		/* What is stored is its SHA-256. */
		sha256_str(tokens[i], h);
		sqlite3_stmt *s = NULL;
		ck_assert_int_eq(sqlite3_prepare_v2(raw,
		    "SELECT count(*) FROM refresh_tokens WHERE hash = ?1", -1, &s, NULL), SQLITE_OK);
		sqlite3_bind_blob(s, 1, h, 32, SQLITE_TRANSIENT);
		ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
		ck_assert_int_eq(sqlite3_column_int64(s, 0), 1);
		sqlite3_finalize(s);
	}
	/* Nor any grant, anywhere: "eyJ" opens every JWT. */
	for (size_t j = 0; j < sizeof tables / sizeof tables[0]; j++)
		ck_assert_msg(!table_holds(tables[j], "eyJ"), "a JWT in %s", tables[j]);
	ck_assert_int_ge(audits("grant.issued"), 2);
	ck_assert_int_eq(audits("refresh.reuse_detected"), 1);
	grant_response_clear(&g);
	grant_response_clear(&g2);
	free(kid);
}
END_TEST

START_TEST(test_grant_audit_entries)
{
	struct grant_response g, g2;
	char *kid = make_consent("alice", "read", 7200, true, NOW);
	issue(kid, "read", true, NOW, &g);
	ck_assert_int_eq(refresh(g.refresh_token, NULL, NOW + 1, &g2), GRANT_REFRESHED);
	ck_assert_int_eq(grant_revoke(sc, &cfg, kr, g2.access_token, ACTOR, NOW + 2), CS_OK);
	/* Each entry names the consent, the person and the agent, and ids only. */
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action IN ('grant.issued', "
	    "'refresh.issued', 'refresh.used', 'grant.revoked') AND consent_id = ?1 "
	    "AND subject = 'alice' AND agent = 'coder' AND actor = '" ACTOR "'", kid), 5);
	char want[64];
	snprintf(want, sizeof want, "jti=%s", g.jti);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'grant.issued' "
	    "AND detail = ?1", want), 1);
	snprintf(want, sizeof want, "jti=%s", g2.jti);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'grant.revoked' "
	    "AND detail = ?1", want), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action IN ('refresh.issued', "
	    "'refresh.used') AND detail LIKE 'family=%' AND length(detail) = 50", NULL), 2);
	ck_assert(!table_holds("audit", "eyJ"));
	grant_response_clear(&g);
	grant_response_clear(&g2);
	free(kid);
}
END_TEST

/* RFC 9449: a grant issued with a proof key names it (cnf.jkt), and so does its
 * introspection; the refresh family is bound: no key or another key is refused
 * and uses nothing up, the key's holder renews (and the new grant is bound). */
START_TEST(test_grant_dpop_binding)
{
	static const char jkt[] = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I";
	static const char other[] = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs";
	struct grant_response g, r;
	char *kid = make_consent("alice", "read", 7200, true, NOW);
	struct consent k = load(kid, NOW);
	struct scope_set s = set("read");
	memset(&g, 0, sizeof g);
	struct grant_issue_req rq = { .k = &k, .scope = &s, .with_refresh = true, .jkt = jkt,
		.actor = ACTOR, .now = NOW };
	enum grant_issue_outcome oc = GRANT_ISSUE__MAX;
	ck_assert_int_eq(grant_issue(sc, &cfg, kr, &rq, &oc, &g), CS_OK);
	ck_assert_int_eq(oc, GRANT_ISSUED);
	json_t *cl = verified_claims(g.access_token);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(cl, "cnf"), "jkt")), jkt);
	json_decref(cl);
	json_t *v = introspect(g.access_token, NOW);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(v, "cnf"), "jkt")), jkt);
	ck_assert_str_eq(json_string_value(json_object_get(v, "token_type")), "DPoP");
	json_decref(v);
	v = introspect(g.refresh_token, NOW);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(v, "cnf"), "jkt")), jkt);
	json_decref(v);

	memset(&r, 0, sizeof r);
	ck_assert_int_eq(refresh_jkt(g.refresh_token, NULL, NULL, NOW + 1, &r),
	    GRANT_REFRESH_WRONG_KEY);
	ck_assert_int_eq(refresh_jkt(g.refresh_token, NULL, other, NOW + 1, &r),
	    GRANT_REFRESH_WRONG_KEY);
	ck_active(g.refresh_token, NOW + 1, "refresh");          /* not used up, family alive */
	ck_assert_int_eq(audits("refresh.reuse_detected"), 0);
	ck_assert_int_eq(refresh_jkt(g.refresh_token, NULL, jkt, NOW + 2, &r), GRANT_REFRESHED);
	cl = verified_claims(r.access_token);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(cl, "cnf"), "jkt")), jkt);
	json_decref(cl);

	/* an unbound grant has no cnf and is a Bearer one */
	struct grant_response b;
	issue(kid, "read", false, NOW, &b);
	cl = verified_claims(b.access_token);
	ck_assert_ptr_null(json_object_get(cl, "cnf"));
	json_decref(cl);
	v = introspect(b.access_token, NOW);
	ck_assert_str_eq(json_string_value(json_object_get(v, "token_type")), "Bearer");
	json_decref(v);
	grant_response_clear(&b);
	grant_response_clear(&r);
	grant_response_clear(&g);
	scope_set_clear(&s);
	consent_clear(&k);
	free(kid);
}
END_TEST

/* --- the verified-grant cache (issue 15) ------------------------------- */

/* Cache hits and misses since the last mark. */
static struct grant_cache_stats mark_at;
static void mark(void)
{
	grant_cache_stats(&mark_at);
}
static uint64_t hits_since(void)
{
	struct grant_cache_stats s;
	grant_cache_stats(&s);
	return s.hits - mark_at.hits;
}
static uint64_t misses_since(void)
{
	struct grant_cache_stats s;
	grant_cache_stats(&s);
	return s.misses - mark_at.misses;
}

/* validate() with another ring. */
static bool validate_kr(const struct keyring *ring, const char *token, int64_t now)
{
	struct grant_check gc;
	last_why = "(not written)";
	ck_assert_int_eq(grant_validate(sc, &cfg, ring, token, now, &gc), CS_OK);
	last_why = gc.why;
	bool valid = gc.valid;
	grant_check_clear(&gc);
	return valid;
}

/* A grant validated once is not verified again: the second call is a hit,
 * with the very claims the signature vouched for. */
START_TEST(test_grant_cache_hit_skips_verify)
{
	struct grant_response g;
	struct grant_check gc;
	char *kid = make_consent("alice", "read", 3600, false, NOW);
	issue(kid, "read", false, NOW, &g);
	mark();
	ck_assert(validate(g.access_token, NOW + 1));
	ck_assert_uint_eq(hits_since(), 0);
	ck_assert_uint_eq(misses_since(), 1);          /* one jwt_verify */
	mark();
	ck_assert_int_eq(grant_validate(sc, &cfg, kr, g.access_token, NOW + 2, &gc), CS_OK);
	ck_assert(gc.valid);
	ck_assert_uint_eq(hits_since(), 1);
	ck_assert_uint_eq(misses_since(), 0);          /* no jwt_verify */
	json_t *want = verified_claims(g.access_token);
	ck_assert(json_equal(gc.claims, want));
	ck_assert_str_eq(gc.k.id, kid);
	json_decref(want);
	grant_check_clear(&gc);
	/* Introspection goes through the same cache: active, from a hit. */
	mark();
	ck_active(g.access_token, NOW + 3, "grant");
	ck_assert_uint_eq(hits_since(), 1);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

/* SECURITY: the cache remembers a signature, never liveness: a revoked grant,
 * or one whose consent was revoked, is refused on the very next call, and
 * that call was a hit. */
START_TEST(test_grant_cache_revoked_refused_on_hit)
{
	struct grant_response g, g2;
	char *kid = make_consent("alice", "read", 3600, false, NOW);
	issue(kid, "read", false, NOW, &g);
	issue(kid, "read", false, NOW, &g2);
	ck_assert(validate(g.access_token, NOW + 1));
	ck_assert(validate(g2.access_token, NOW + 1));
	ck_assert_int_eq(grant_revoke(sc, &cfg, kr, g.access_token, ACTOR, NOW + 2), CS_OK);
	mark();
	ck_assert(!validate(g.access_token, NOW + 2));
	ck_assert_str_eq(last_why, "grant revoked");
	ck_inactive(g.access_token, NOW + 2);
	ck_assert_uint_eq(hits_since(), 2);
	ck_assert_uint_eq(misses_since(), 0);
	/* The person revokes the consent on /me: its other grant dies with it. */
	ck_assert(validate(g2.access_token, NOW + 3));
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "user:alice", "revoked on /me", NOW + 3, false),
	    CS_OK);
	mark();
	ck_assert(!validate(g2.access_token, NOW + 3));
	ck_inactive(g2.access_token, NOW + 3);
	ck_assert_uint_eq(hits_since(), 2);
	ck_assert_uint_eq(misses_since(), 0);
	grant_response_clear(&g);
	grant_response_clear(&g2);
	free(kid);
}
END_TEST

/* SECURITY: every hit runs the time checks against the caller's now: never
 * past exp (not even a hit then), never before iat, never past the consent's
 * expiry. */
START_TEST(test_grant_cache_times_checked_on_hit)
{
	struct grant_response g, g2;
	char sql[256];
	char *kid = make_consent("alice", "read", 3600, false, NOW);
	issue(kid, "read", false, NOW, &g);
	ck_assert(validate(g.access_token, NOW + 10));
	mark();
	ck_assert(!validate(g.access_token, NOW + TTL));
	ck_assert_str_eq(last_why, "grant expired");
	ck_inactive(g.access_token, NOW + TTL + 1000);
	ck_assert_uint_eq(hits_since(), 0);            /* an entry ends at exp */
	ck_assert(validate(g.access_token, NOW + TTL - 1));
	mark();
	ck_assert(!validate(g.access_token, NOW - 1));
	ck_assert_str_eq(last_why, "grant issued in the future");
	ck_assert_uint_eq(hits_since(), 1);
	/* The consent shortened by hand: the grant's hit is refused all the same. */
	char *kid2 = make_consent("bob", "read", 3600, false, NOW);
	issue(kid2, "read", false, NOW, &g2);
	ck_assert(validate(g2.access_token, NOW + 1));
	ck_assert_int_eq(str_fmt(sql, sizeof sql,
	    "UPDATE consents SET expires_at = %lld WHERE id = '%s'", (long long)(NOW + 5), kid2),
	    CS_OK);
	ck_assert_int_eq(sqlite3_exec(raw, sql, NULL, NULL, NULL), SQLITE_OK);
	mark();
	ck_assert(!validate(g2.access_token, NOW + 10));
	ck_assert_str_eq(last_why, "the grant's consent expired");
	ck_assert_uint_eq(hits_since(), 1);
	grant_response_clear(&g);
	grant_response_clear(&g2);
	free(kid);
	free(kid2);
}
END_TEST

/* SECURITY: entries belong to the key set they verified under.  After
 * `keys revoke` of the signing key and a reload, a grant it signed is
 * refused at once; a reload that found the same keys keeps the entries. */
START_TEST(test_grant_cache_keyring_change_drops)
{
	struct grant_response g;
	struct keyring *same = NULL, *after = NULL;
	char *kid_b = NULL, *next = NULL;
	char *kid = make_consent("alice", "read", 3600, false, NOW);
	issue(kid, "read", false, NOW, &g);
	char *kid_a = strdup(keyring_signing_kid(kr));
	ck_assert(validate(g.access_token, NOW + 1));
	/* A reload with nothing changed: same fingerprint, still a hit. */
	ck_assert_int_eq(keyring_load(sc, &mk, NOW + 2, TTL, &same), CS_OK);
	ck_assert_mem_eq(keyring_fingerprint(same), keyring_fingerprint(kr), KEYRING_FP_LEN);
	mark();
	ck_assert(validate_kr(same, g.access_token, NOW + 2));
	ck_assert_uint_eq(hits_since(), 1);
	/* keys rotate (a second key, ready now), then keys revoke the first. */
	ck_assert_int_eq(keyring_generate_key(sc, &mk, NOW + 3, NOW + 3, &kid_b), CS_OK);
	ck_assert_int_eq(keyring_revoke_key(sc, kid_a, NOW + 4, TTL, &next), CS_OK);
	ck_assert_str_eq(next, kid_b);
	ck_assert_int_eq(keyring_load(sc, &mk, NOW + 5, TTL, &after), CS_OK);
	ck_assert(CRYPTO_memcmp(keyring_fingerprint(after), keyring_fingerprint(kr),
	    KEYRING_FP_LEN) != 0);
	mark();
	ck_assert(!validate_kr(after, g.access_token, NOW + 5));
	ck_assert_str_eq(last_why, "not a consentd grant");
	ck_assert_uint_eq(hits_since(), 0);
	ck_assert_uint_eq(misses_since(), 1);
	json_t *v = NULL;
	ck_assert_int_eq(grant_introspect(sc, &cfg, after, g.access_token, NOW + 5, &v), CS_OK);
	ck_assert(json_is_false(json_object_get(v, "active")));
	json_decref(v);
	keyring_free(same);
	keyring_free(after);
	free(kid_a);
	free(kid_b);
	free(next);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

/* A token one byte away from a cached grant is another token: a miss, then
 * refused by the signature check.  The cached grant is still a hit. */
START_TEST(test_grant_cache_tampered_not_hit)
{
	struct grant_response g;
	char *kid = make_consent("alice", "read", 3600, false, NOW);
	issue(kid, "read", false, NOW, &g);
	ck_assert(validate(g.access_token, NOW + 1));
	size_t n = strlen(g.access_token);
	const size_t at[] = { n - 5, strchr(g.access_token, '.') - g.access_token + 5, 3 };
	for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
		char *t = strdup(g.access_token);
		t[at[i]] = t[at[i]] == 'A' ? 'B' : 'A';
		mark();
		ck_assert_msg(!validate(t, NOW + 2), "tampered at %zu accepted", at[i]);
		ck_inactive(t, NOW + 2);
		ck_assert_uint_eq(hits_since(), 0);
		free(t);
	}
	mark();
	ck_assert(validate(g.access_token, NOW + 3));
	ck_assert_uint_eq(hits_since(), 1);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

/* alg none carrying a cached grant's real claims (and its real signature)
 * is not a hit and is refused. */
START_TEST(test_grant_cache_alg_none_refused)
{
	struct grant_response g;
	char hdr[256];
	char *kid = make_consent("alice", "read", 3600, false, NOW);
	issue(kid, "read", false, NOW, &g);
	ck_assert(validate(g.access_token, NOW + 1));
	const char *d1 = strchr(g.access_token, '.');
	const char *d2 = strchr(d1 + 1, '.');
	char *payload = strndup(d1 + 1, (size_t)(d2 - d1 - 1));
	ck_assert_int_eq(str_fmt(hdr, sizeof hdr,
	    "{\"alg\":\"none\",\"typ\":\"at+jwt\",\"kid\":\"%s\"}", keyring_signing_kid(kr)),
	    CS_OK);
	char *h = b64u_encode(hdr);
	size_t n = strlen(h) + strlen(payload) + strlen(d2) + 4;
	char *t1 = malloc(n), *t2 = malloc(n);
	ck_assert_int_eq(str_fmt(t1, n, "%s.%s.", h, payload), CS_OK);
	ck_assert_int_eq(str_fmt(t2, n, "%s.%s%s", h, payload, d2), CS_OK);
	mark();
	ck_assert(!validate(t1, NOW + 2));
	ck_assert(!validate(t2, NOW + 2));
	ck_inactive(t2, NOW + 2);
	ck_assert_uint_eq(hits_since(), 0);
	free(t1);
	free(t2);
	free(h);
	free(payload);
	grant_response_clear(&g);
	free(kid);
}
END_TEST

/* A DPoP-bound grant keeps its cnf.jkt on a hit: the caller's proof check
 * (dpop_check_grant, per request) sees the same claims as on a miss. */
START_TEST(test_grant_cache_dpop_cnf_on_hit)
{
	static const char jkt[] = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I";
	struct grant_response g;
	struct grant_check gc;
	char *kid = make_consent("alice", "read", 7200, false, NOW);
	struct consent k = load(kid, NOW);
	struct scope_set s = set("read");
	memset(&g, 0, sizeof g);
	struct grant_issue_req rq = { .k = &k, .scope = &s, .jkt = jkt, .actor = ACTOR, .now = NOW };
	enum grant_issue_outcome oc = GRANT_ISSUE__MAX;
	ck_assert_int_eq(grant_issue(sc, &cfg, kr, &rq, &oc, &g), CS_OK);
	ck_assert_int_eq(oc, GRANT_ISSUED);
	ck_assert(validate(g.access_token, NOW + 1));
	mark();
	ck_assert_int_eq(grant_validate(sc, &cfg, kr, g.access_token, NOW + 2, &gc), CS_OK);
	ck_assert(gc.valid);
	ck_assert_uint_eq(hits_since(), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(gc.claims, "cnf"),
	    "jkt")), jkt);
	grant_check_clear(&gc);
	json_t *v = introspect(g.access_token, NOW + 3);
	ck_assert_str_eq(json_string_value(json_object_get(v, "token_type")), "DPoP");
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(v, "cnf"), "jkt")), jkt);
	json_decref(v);
	grant_response_clear(&g);
	scope_set_clear(&s);
	consent_clear(&k);
	free(kid);
}
END_TEST

/* Worker threads (each with its own connection, as MHD's and the proxy's)
 * validate live and revoked grants at once, while another revokes: every
 * answer is right, and ASan sees no race on the cache's memory. */
#define CC_THREADS 4
#define CC_ROUNDS 150
struct cc_arg {
	char **live, **dead;
	size_t n;
	int wrong;
};

static void *cc_worker(void *p)
{
	struct cc_arg *a = p;
	struct store_conn *c = store_conn(st);
	if (c == NULL) {
		a->wrong++;
		return NULL;
	}
	for (int r = 0; r < CC_ROUNDS; r++) {
		for (size_t i = 0; i < a->n; i++) {
			struct grant_check gc;
			if (grant_validate(c, &cfg, kr, a->live[i], NOW + 1 + r % 50, &gc) != CS_OK ||
			    !gc.valid)
				a->wrong++;
			grant_check_clear(&gc);
			if (grant_validate(c, &cfg, kr, a->dead[i], NOW + 1 + r % 50, &gc) != CS_OK ||
			    gc.valid)
				a->wrong++;
			grant_check_clear(&gc);
		}
		if (r % 37 == 0)
			grant_cache_clear();
	}
	return NULL;
}

START_TEST(test_grant_cache_concurrent_use)
{
	enum { N = 4 };
	struct grant_response live[N], dead[N];
	char *lt[N], *dt[N];
	char *kid = make_consent("alice", "read", 3600, false, NOW);
	for (size_t i = 0; i < N; i++) {
		issue(kid, "read", false, NOW, &live[i]);
		issue(kid, "read", false, NOW, &dead[i]);
		lt[i] = live[i].access_token;
		dt[i] = dead[i].access_token;
		ck_assert(validate(dt[i], NOW + 1));     /* cached while live */
		ck_assert_int_eq(grant_revoke(sc, &cfg, kr, dt[i], ACTOR, NOW + 1), CS_OK);
	}
	pthread_t th[CC_THREADS];
	struct cc_arg args[CC_THREADS];
	for (size_t t = 0; t < CC_THREADS; t++) {
		args[t] = (struct cc_arg){ .live = lt, .dead = dt, .n = N };
		ck_assert_int_eq(pthread_create(&th[t], NULL, cc_worker, &args[t]), 0);
	}
	for (size_t t = 0; t < CC_THREADS; t++) {
		ck_assert_int_eq(pthread_join(th[t], NULL), 0);
		ck_assert_int_eq(args[t].wrong, 0);
	}
	for (size_t i = 0; i < N; i++) {
		grant_response_clear(&live[i]);
		grant_response_clear(&dead[i]);
	}
	free(kid);
}
END_TEST

/* A gateway tells theft (reuse detection) from an expiry or a revocation by
 * the words of each invalid_grant (what errors.test.js and dpop.test.js see). */
START_TEST(test_grant_refresh_outcome_descriptions)
{
	ck_assert_str_eq(grant_refresh_outcome_description(GRANT_REFRESH_INVALID),
	    "the refresh token is unknown");
	ck_assert_str_eq(grant_refresh_outcome_description(GRANT_REFRESH_REUSED),
	    "the refresh token was already used: a used token presented again means it was "
	    "copied, so its whole family is now revoked (reuse detected); start again with a "
	    "token exchange");
	ck_assert_str_eq(grant_refresh_outcome_description(GRANT_REFRESH_REUSE_REVOKED),
	    "the refresh token's family was revoked because one of its used tokens was presented "
	    "again (reuse detected); start again with a token exchange");
	ck_assert_str_eq(grant_refresh_outcome_description(GRANT_REFRESH_REVOKED),
	    "the refresh token was revoked (at /revoke)");
	ck_assert_str_eq(grant_refresh_outcome_description(GRANT_REFRESH_CONSENT_REVOKED),
	    "the refresh token's consent was revoked");
	ck_assert_str_eq(grant_refresh_outcome_description(GRANT_REFRESH_EXPIRED),
	    "the refresh token expired with its consent");
	ck_assert_str_eq(grant_refresh_outcome_description(GRANT_REFRESH_NOT_OFFLINE),
	    "the refresh token's agent or consent no longer allows offline use");
	ck_assert_str_eq(grant_refresh_outcome_description(GRANT_REFRESH_NOT_CONFIGURED),
	    "the refresh token's resource is no longer configured");
	ck_assert_str_eq(grant_refresh_outcome_description(GRANT_REFRESH_BAD_SCOPE),
	    "scope is outside the consent");
}
END_TEST

static Suite *grant_suite(void)
{
	Suite *s = suite_create("grant");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_grant_issue_claims_escaped_subject);
	tcase_add_test(tc, test_grant_issue_claims_exact);
	tcase_add_test(tc, test_grant_issue_jti_time_ordered);
	tcase_add_test(tc, test_grant_issue_header_typ);
	tcase_add_test(tc, test_grant_issue_exp_capped_by_consent);
	tcase_add_test(tc, test_grant_issue_refused_cases);
	tcase_add_test(tc, test_grant_issue_snapshot_differs_from_database);
	tcase_add_test(tc, test_grant_exchange_remembered_consent_is_only_a_hint);
	tcase_add_test(tc, test_grant_introspect_active_grant);
	tcase_add_test(tc, test_grant_introspect_inactive_after_revoke);
	tcase_add_test(tc, test_grant_introspect_inactive_after_consent_revoke);
	tcase_add_test(tc, test_grant_introspect_inactive_after_expiry);
	tcase_add_test(tc, test_grant_introspect_inactive_foreign_keyring);
	tcase_add_test(tc, test_grant_introspect_inactive_garbage);
	tcase_add_test(tc, test_grant_introspect_inactive_alg_none);
	tcase_add_test(tc, test_grant_validate_claim_checks);
	tcase_add_test(tc, test_grant_validate_reasons);
	tcase_add_test(tc, test_grant_refresh_rotation);
	tcase_add_test(tc, test_grant_refresh_reuse_revokes_family);
	tcase_add_test(tc, test_grant_refresh_dies_with_consent);
	tcase_add_test(tc, test_grant_refresh_scope_narrowing);
	tcase_add_test(tc, test_grant_refresh_refused_cases);
	tcase_add_test(tc, test_grant_revoke_refresh_family);
	tcase_add_test(tc, test_grant_refresh_never_stored_in_clear);
	tcase_add_test(tc, test_grant_audit_entries);
	tcase_add_test(tc, test_grant_dpop_binding);
	tcase_add_test(tc, test_grant_cache_hit_skips_verify);
	tcase_add_test(tc, test_grant_cache_revoked_refused_on_hit);
	tcase_add_test(tc, test_grant_cache_times_checked_on_hit);
	tcase_add_test(tc, test_grant_cache_keyring_change_drops);
	tcase_add_test(tc, test_grant_cache_tampered_not_hit);
	tcase_add_test(tc, test_grant_cache_alg_none_refused);
	tcase_add_test(tc, test_grant_cache_dpop_cnf_on_hit);
	tcase_add_test(tc, test_grant_cache_concurrent_use);
	suite_add_tcase(s, tc);
	tc = tcase_create("description");
	tcase_add_test(tc, test_grant_refresh_outcome_descriptions);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(grant_suite());
}
