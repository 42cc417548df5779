/* test_janitor.c -- retention (janitor.c, store_janitor.c) and audit pruning
 * (audit_prune, the anchor): each kind of row removed and each kept at its
 * boundary, batch sizes, and a pruned chain that still verifies -- and fails
 * when an entry after the anchor or the anchor itself is changed -- against a
 * real SQLite file built from migrations/. */
#include <stdarg.h>
#include <string.h>
#include <sqlite3.h>
#include "audit.h"
#include "audit_head.h"
#include "config.h"
#include "janitor.h"
#include "seal.h"
#include "store.h"
#include "store_janitor.h"
#include "testutil.h"

#define NOW 100000000LL
#define DAY 86400LL
#define GRACE 100
#define TTL 600
#define COOL 1000
#define MK1 "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
#define MK2 "HxweHRwbGhkYFxYVFBMSERAPDg0MCwoJCAcGBQQDAgE="

static char *dir;
static struct store *st;
static struct store_conn *sc;
static sqlite3 *raw;                  /* a second connection: the tests' and the attacker's */
static struct master_key mk, mk2;
static struct config cfg;

static void setup(void)
{
	dir = tu_tmpdir();
	char *db = tu_path(dir, "t.db");
	ck_assert_int_eq(store_open(db, &st), CS_OK);
	sc = store_conn(st);
	ck_assert_ptr_nonnull(sc);
	ck_assert_int_eq(sqlite3_open(db, &raw), SQLITE_OK);
	sqlite3_busy_timeout(raw, 5000);
	free(db);
	ck_assert_int_eq(master_key_load(NULL, MK1, &mk), CS_OK);
	ck_assert_int_eq(master_key_load(NULL, MK2, &mk2), CS_OK);
	ck_assert_int_eq(audit_set_master_key(&mk), CS_OK);
	memset(&cfg, 0, sizeof cfg);
	cfg.retention_enabled = true;
	cfg.retention_interval = 1;
	cfg.retention_batch_size = 500;
	cfg.retention_grace = GRACE;
	cfg.retention_revoked_consent_days = 90;
	cfg.retention_audit_days = 0;
	cfg.consent_request_ttl = TTL;
	cfg.consent_deny_cooldown = COOL;
}

static void teardown(void)
{
	audit_clear_key();
	sqlite3_close(raw);
	store_close(st);
	tu_rmdir(dir);
	master_key_clear(&mk);
	master_key_clear(&mk2);
}

static void rawsql(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void rawsql(const char *fmt, ...)
{
	char sql[2048], *err = NULL;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(sql, sizeof sql, fmt, ap);
	va_end(ap);
	int rc = sqlite3_exec(raw, sql, NULL, NULL, &err);
	if (rc != SQLITE_OK)
		fprintf(stderr, "sql: %s: %s\n", sql, err ? err : "?");
	sqlite3_free(err);
	ck_assert_int_eq(rc, SQLITE_OK);
}

static int64_t rawint(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int64_t rawint(const char *fmt, ...)
{
	char sql[1024];
	sqlite3_stmt *q = NULL;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(sql, sizeof sql, fmt, ap);
	va_end(ap);
	ck_assert_int_eq(sqlite3_prepare_v2(raw, sql, -1, &q, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
	int64_t v = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	return v;
}

/* 1 when table has a row with that id column value. */
static int has(const char *table, const char *col, const char *id)
{
	return (int)rawint("SELECT count(*) FROM %s WHERE %s = '%s'", table, col, id);
}

static void user(void)
{
	rawsql("INSERT INTO users (id, issuer, subject, created_at, last_login_at) "
	    "VALUES (1, 'https://idp', 'alice', 0, 0)");
}

static void consent(const char *id, const char *agent, int64_t revoked_at)
{
	rawsql("INSERT INTO consents (id, user_id, agent, resource, granted, declined, created_at, "
	    "expires_at, revoked_at) VALUES ('%s', 1, '%s', 'mail', 'read', '', 0, %lld, %lld)",
	    id, agent, NOW + DAY, (long long)revoked_at);
}

static void grant(const char *jti, const char *cid, int64_t exp, int64_t revoked_at)
{
	rawsql("INSERT INTO grants (jti, consent_id, issued_at, expires_at, revoked_at) "
	    "VALUES ('%s', '%s', 0, %lld, %lld)", jti, cid, (long long)exp, (long long)revoked_at);
}

static struct janitor_stats run(void)
{
	struct janitor_stats s;
	ck_assert_int_eq(janitor_run(sc, &cfg, NOW, &s), CS_OK);
	return s;
}

START_TEST(test_janitor_grants_boundary)
{
	user();
	consent("k1", "bot", 0);
	grant("old", "k1", NOW - GRACE - 1, 0);
	grant("edge", "k1", NOW - GRACE, 0);
	grant("grace", "k1", NOW - GRACE + 1, 0);          /* expired, within the grace */
	grant("live", "k1", NOW + 100, 0);
	grant("revoked_live", "k1", NOW + 100, NOW - 5000); /* revoked: kept until exp */
	grant("revoked_old", "k1", NOW - GRACE - 1, NOW - 5000);
	struct janitor_stats s = run();
	ck_assert_int_eq(s.removed[JANITOR_GRANTS], 3);
	ck_assert_int_eq(has("grants", "jti", "old"), 0);
	ck_assert_int_eq(has("grants", "jti", "edge"), 0);
	ck_assert_int_eq(has("grants", "jti", "revoked_old"), 0);
	ck_assert_int_eq(has("grants", "jti", "grace"), 1);
	ck_assert_int_eq(has("grants", "jti", "live"), 1);
	ck_assert_int_eq(has("grants", "jti", "revoked_live"), 1);
	ck_assert_int_eq(has("consents", "id", "k1"), 1);
}
END_TEST

static void request(const char *id, const char *agent, const char *status, int64_t exp,
    int64_t decided)
{
	rawsql("INSERT INTO consent_requests (id, user_id, agent, resource, scopes, status, "
	    "created_at, expires_at, decided_at, interval) VALUES ('%s', 1, '%s', 'mail', 'read', "
	    "'%s', 0, %lld, %lld, 5)", id, agent, status, (long long)exp, (long long)decided);
}

START_TEST(test_janitor_requests_boundary)
{
	user();
	request("pend_old", "a1", "pending", NOW - GRACE, 0);
	request("pend_grace", "a2", "pending", NOW - GRACE + 1, 0);
	request("pend_live", "a3", "pending", NOW + 300, 0);
	request("exp_old", "a4", "expired", NOW - GRACE - 1, 0);
	request("exp_grace", "a5", "expired", NOW - 10, 0);
	/* Approved: the done page and the gateway's last poll, request_ttl after the decision. */
	request("appr_old", "a6", "approved", NOW - GRACE - 1, NOW - GRACE - TTL);
	request("appr_poll", "a7", "approved", NOW - GRACE - 1, NOW - GRACE - TTL + 1);
	request("appr_live", "a8", "approved", NOW + 300, NOW - 5000);
	/* Denied: the cooldown reads the latest denied request. */
	request("deny_old", "a9", "denied", NOW - GRACE - 1, NOW - GRACE - COOL);
	request("deny_cool", "a10", "denied", NOW - GRACE - 1, NOW - GRACE - COOL + 1);
	struct janitor_stats s = run();
	ck_assert_int_eq(s.removed[JANITOR_REQUESTS], 4);
	const char *gone[] = { "pend_old", "exp_old", "appr_old", "deny_old" };
	const char *kept[] = { "pend_grace", "pend_live", "exp_grace", "appr_poll", "appr_live",
		"deny_cool" };
	for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
		ck_assert_msg(has("consent_requests", "id", gone[i]) == 0, "%s kept", gone[i]);
	for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
		ck_assert_msg(has("consent_requests", "id", kept[i]) == 1, "%s removed", kept[i]);
}
END_TEST

static void approval(const char *id, const char *status, int64_t exp, int64_t decided,
    int64_t used)
{
	rawsql("INSERT INTO approvals (id, consent_id, user_id, agent, resource, action, parameters, "
	    "digest, status, created_at, expires_at, decided_at, used_at, interval) VALUES ('%s', "
	    "'k1', 1, 'bot', 'mail', 'send', '{}', '%s', '%s', 0, %lld, %lld, %lld, 5)", id, id,
	    status, (long long)exp, (long long)decided, (long long)used);
}

START_TEST(test_janitor_approvals_boundary)
{
	user();
	consent("k1", "bot", 0);
	int64_t old = NOW - GRACE;
	approval("used_old", "used", old, old - 5, old);
	approval("used_grace", "used", old, old - 5, old + 1);
	approval("used_pending_exp", "used", NOW + 50, old - 5, old);   /* expiry not yet + grace */
	approval("denied_old", "denied", old, old, 0);
	approval("denied_grace", "denied", old, old + 1, 0);
	approval("expired_old", "expired", old - 1, 0, 0);
	approval("cancel_old", "cancelled", old - 1, 0, 0);
	/* Approved and unused: redeemable until decided_at + request_ttl. */
	approval("appr_old", "approved", old - 1, old - TTL, 0);
	approval("appr_redeem", "approved", old - 1, old - TTL + 1, 0);
	approval("pend_old", "pending", old, 0, 0);
	approval("pend_live", "pending", NOW + 60, 0, 0);
	struct janitor_stats s = run();
	const char *gone[] = { "used_old", "denied_old", "expired_old", "cancel_old", "appr_old",
		"pend_old" };
	const char *kept[] = { "used_grace", "used_pending_exp", "denied_grace", "appr_redeem",
		"pend_live" };
	ck_assert_int_eq(s.removed[JANITOR_APPROVALS], 6);
	for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
		ck_assert_msg(has("approvals", "id", gone[i]) == 0, "%s kept", gone[i]);
	for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
		ck_assert_msg(has("approvals", "id", kept[i]) == 1, "%s removed", kept[i]);
}
END_TEST

static void event(const char *jti, const char *cid, int64_t delivered)
{
	rawsql("INSERT INTO events_outbox (jti, consent_id, subject_iss, subject, agent, resource, "
	    "created_at, next_attempt_at, delivered_at) VALUES ('%s', '%s', 'https://idp', 'alice', "
	    "'bot', 'mail', 0, 0, %lld)", jti, cid, (long long)delivered);
}

START_TEST(test_janitor_events_boundary)
{
	user();
	event("ev_old", "k9", NOW - GRACE);
	event("ev_grace", "k9", NOW - GRACE + 1);
	event("ev_undelivered", "k9", 0);                   /* retried forever: never removed */
	struct janitor_stats s = run();
	ck_assert_int_eq(s.removed[JANITOR_EVENTS], 1);
	ck_assert_int_eq(has("events_outbox", "jti", "ev_old"), 0);
	ck_assert_int_eq(has("events_outbox", "jti", "ev_grace"), 1);
	ck_assert_int_eq(has("events_outbox", "jti", "ev_undelivered"), 1);
}
END_TEST

START_TEST(test_janitor_revoked_consents)
{
	int64_t age = 90 * DAY;
	user();
	consent("old", "a1", NOW - age);
	consent("young", "a2", NOW - age + 1);
	consent("live", "a3", 0);
	consent("vaulted", "a4", NOW - age - 5);            /* its vault record is still there */
	consent("eventing", "a5", NOW - age - 5);           /* its revocation event is undelivered */
	/* The old consent's rows go with it (foreign keys are on). */
	grant("g_old", "old", NOW + 100, NOW - age);
	rawsql("INSERT INTO refresh_tokens (hash, family, consent_id, issued_at) "
	    "VALUES (x'01', 'fam1', 'old', 0)");
	rawsql("INSERT INTO refresh_bindings (family, jkt) VALUES ('fam1', 'thumb')");
	rawsql("INSERT INTO refresh_audiences (family, audience, client_id) VALUES ('fam1', "
	    "'https://consent.example/mcp/notes', 'ide')");
	rawsql("INSERT INTO approvals (id, consent_id, user_id, agent, resource, action, parameters, "
	    "digest, status, created_at, expires_at, interval) VALUES ('ap1', 'old', 1, 'a1', 'mail', "
	    "'send', '{}', 'd', 'cancelled', 0, %lld, 5)", NOW + 100);
	event("ev_old", "old", NOW - 10);
	rawsql("INSERT INTO vault_records (id, consent_id, user_id, subject, agent, resource, "
	    "provider_scopes, token_type, access_sealed, access_expires_at, master_kid, created_at, "
	    "updated_at) VALUES ('r1', 'vaulted', 1, 'alice', 'a4', 'mail', '', 'Bearer', x'00', 0, "
	    "'k', 0, 0)");
	event("ev_wait", "eventing", 0);
	cfg.events_uri = (char *)"https://gateway.example/events";   /* a receiver: events wait */
	struct janitor_stats s = run();
	ck_assert_int_eq(s.removed[JANITOR_CONSENTS], 1);
	ck_assert_int_eq(has("consents", "id", "old"), 0);
	ck_assert_int_eq(has("grants", "jti", "g_old"), 0);
	ck_assert_int_eq(rawint("SELECT count(*) FROM refresh_tokens"), 0);
	ck_assert_int_eq(rawint("SELECT count(*) FROM refresh_bindings"), 0);
	ck_assert_int_eq(rawint("SELECT count(*) FROM refresh_audiences"), 0);
	ck_assert_int_eq(has("approvals", "id", "ap1"), 0);
	ck_assert_int_eq(has("events_outbox", "jti", "ev_old"), 0);
	ck_assert_int_eq(has("consents", "id", "young"), 1);
	ck_assert_int_eq(has("consents", "id", "live"), 1);
	ck_assert_int_eq(has("consents", "id", "vaulted"), 1);
	ck_assert_int_eq(has("consents", "id", "eventing"), 1);
	ck_assert_int_eq(has("events_outbox", "jti", "ev_wait"), 1);
	/* The configured age counts: at 30 days the young one goes too. */
	cfg.retention_revoked_consent_days = 30;
	s = run();
	ck_assert_int_eq(s.removed[JANITOR_CONSENTS], 1);
	ck_assert_int_eq(has("consents", "id", "young"), 0);
	/* Without a receiver nobody waits for the event: it goes with its consent. */
	cfg.events_uri = NULL;
	s = run();
	ck_assert_int_eq(s.removed[JANITOR_CONSENTS], 1);
	ck_assert_int_eq(has("consents", "id", "eventing"), 0);
	ck_assert_int_eq(has("events_outbox", "jti", "ev_wait"), 0);
	ck_assert_int_eq(has("consents", "id", "vaulted"), 1);
}
END_TEST

static void authz_request(const char *id, int64_t exp, const char *user_id)
{
	rawsql("INSERT INTO authz_requests (id, client_id, redirect_uri, code_challenge, resource, "
	    "created_at, expires_at, user_id) VALUES ('%s', 'c', 'http://127.0.0.1/cb', 'x', 'r', 0, "
	    "%lld, %s)", id, (long long)exp, user_id);
}

static void authz_code(const char *hash_hex, int64_t exp, int64_t used)
{
	rawsql("INSERT INTO authz_codes (code_hash, request_id, client_id, redirect_uri, "
	    "code_challenge, resource, scope, user_id, consent_id, created_at, expires_at, used_at) "
	    "VALUES (x'%s', 'q', 'c', 'http://127.0.0.1/cb', 'x', 'r', 'read', 1, 'k1', 0, %lld, %lld)",
	    hash_hex, (long long)exp, (long long)used);
}

/* Pending /authorize requests and authorization codes (migration 0019): from
 * expires_at + grace on, signed in or not, used or not; a used code is kept
 * as long as an unused one, so that its reuse is told apart until then. */
START_TEST(test_janitor_authz_boundary)
{
	user();
	authz_request("rq_old", NOW - GRACE, "NULL");
	authz_request("rq_bound_old", NOW - GRACE - 1, "1");
	authz_request("rq_grace", NOW - GRACE + 1, "NULL");
	authz_request("rq_live", NOW + 600, "1");
	authz_code("01", NOW - GRACE, 0);
	authz_code("02", NOW - GRACE - 1, NOW - GRACE - 30);
	authz_code("03", NOW - GRACE + 1, NOW - GRACE - 30);   /* used, within the grace */
	authz_code("04", NOW - GRACE + 1, 0);
	authz_code("05", NOW + 60, 0);
	struct janitor_stats s = run();
	ck_assert_int_eq(s.removed[JANITOR_AUTHZ_REQUESTS], 2);
	ck_assert_int_eq(s.removed[JANITOR_AUTHZ_CODES], 2);
	ck_assert_int_eq(has("authz_requests", "id", "rq_old"), 0);
	ck_assert_int_eq(has("authz_requests", "id", "rq_bound_old"), 0);
	ck_assert_int_eq(has("authz_requests", "id", "rq_grace"), 1);
	ck_assert_int_eq(has("authz_requests", "id", "rq_live"), 1);
	ck_assert_int_eq(rawint("SELECT count(*) FROM authz_codes WHERE code_hash IN (x'01', x'02')"),
	    0);
	ck_assert_int_eq(rawint("SELECT count(*) FROM authz_codes WHERE code_hash IN "
	    "(x'03', x'04', x'05')"), 3);
}
END_TEST

START_TEST(test_janitor_batch_size)
{
	char jti[16];
	user();
	consent("k1", "bot", 0);
	for (int i = 0; i < 10; i++) {
		snprintf(jti, sizeof jti, "g%d", i);
		grant(jti, "k1", NOW - GRACE - 1, 0);
	}
	/* One batch removes exactly the batch size. */
	struct store_janitor_cutoffs cut;
	int64_t n = 0;
	janitor_cutoffs(&cfg, NOW, &cut);
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(store_janitor_batch(sc, JANITOR_GRANTS, &cut, 3, &n), CS_OK);
	ck_assert_int_eq(store_commit(sc), CS_OK);
	ck_assert_int_eq(n, 3);
	ck_assert_int_eq(rawint("SELECT count(*) FROM grants"), 7);
	/* A pass goes on in batches until one comes back short: 3 + 3 + 1 for
	 * the grants, one (empty) batch for each of the other kinds. */
	cfg.retention_batch_size = 3;
	struct janitor_stats s = run();
	ck_assert_int_eq(s.removed[JANITOR_GRANTS], 7);
	ck_assert_int_eq(s.batches, 3 + (JANITOR__MAX - 1));
	ck_assert_int_eq(rawint("SELECT count(*) FROM grants"), 0);
	ck_assert_int_eq(store_janitor_batch(sc, JANITOR_GRANTS, &cut, 0, &n), CS_EINVAL);
}
END_TEST

/* --- the audit chain --------------------------------------------------------- */

static void entries(int n, int64_t ts)
{
	for (int i = 0; i < n; i++) {
		struct audit_entry e = { .ts = ts, .actor = "system", .action = "admin.cli",
			.outcome = "ok", .detail = "x" };
		ck_assert_int_eq(audit_append_alone(sc, &e), CS_OK);
	}
}

static struct audit_verify_result verify(const struct master_key *k, const struct audit_head *want)
{
	struct audit_verify_result r;
	ck_assert_int_eq(audit_verify(sc, k, want, &r), CS_OK);
	return r;
}

/* 6 entries 2 days old, 4 from now; audit_days = 1 prunes the 6. */
static void pruned_chain(void)
{
	entries(6, NOW - 2 * DAY);
	entries(4, NOW - 10);
	cfg.retention_audit_days = 1;
	struct janitor_stats s = run();
	ck_assert_int_eq(s.audit_pruned, 6);
}

START_TEST(test_janitor_audit_default_keeps_all)
{
	entries(5, NOW - 1000 * DAY);
	struct janitor_stats s = run();
	ck_assert_int_eq(s.audit_pruned, 0);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit"), 5);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit_anchor"), 0);
}
END_TEST

START_TEST(test_janitor_audit_prune_verifies)
{
	pruned_chain();
	ck_assert_int_eq(rawint("SELECT min(seq) FROM audit"), 7);
	ck_assert_int_eq(rawint("SELECT seq FROM audit_anchor"), 6);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit"), 4);
	struct audit_verify_result r = verify(&mk, NULL);
	ck_assert_msg(r.ok == 1, "%s", r.why);
	ck_assert_int_eq(r.anchor, 6);
	ck_assert_int_eq(r.entries, 4);             /* 7..10 */
	ck_assert_int_eq(r.head.seq, 10);
	/* Appending goes on from the head; a second pass finds nothing more. */
	entries(1, NOW);
	ck_assert_int_eq(run().audit_pruned, 0);
	ck_assert_int_eq(verify(&mk, NULL).ok, 1);
	/* Under another master key, the anchor does not verify. */
	r = verify(&mk2, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, 6);
}
END_TEST

START_TEST(test_janitor_audit_entry_after_anchor_changed)
{
	pruned_chain();
	rawsql("UPDATE audit SET detail = 'y' WHERE seq = 8");
	struct audit_verify_result r = verify(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, 8);
	/* The first kept entry too: it must link to the anchor. */
	rawsql("UPDATE audit SET detail = 'x' WHERE seq = 8");
	ck_assert_int_eq(verify(&mk, NULL).ok, 1);
	rawsql("UPDATE audit SET detail = 'y' WHERE seq = 7");
	r = verify(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, 7);
}
END_TEST

START_TEST(test_janitor_audit_anchor_changed)
{
	pruned_chain();
	/* Its link changed: neither its MAC nor the first kept entry match. */
	rawsql("UPDATE audit_anchor SET link = zeroblob(32)");
	struct audit_verify_result r = verify(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, 6);
}
END_TEST

START_TEST(test_janitor_audit_anchor_moved)
{
	pruned_chain();
	/* More of the prefix cut and the anchor pointed at the new first entry,
	 * with that entry's real link: the MAC gives it away. */
	rawsql("UPDATE audit_anchor SET seq = 7, link = (SELECT link FROM audit WHERE seq = 7)");
	rawsql("DELETE FROM audit WHERE seq = 7");
	struct audit_verify_result r = verify(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, 7);
}
END_TEST

START_TEST(test_janitor_audit_anchor_deleted)
{
	pruned_chain();
	rawsql("DELETE FROM audit_anchor");
	struct audit_verify_result r = verify(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, 7);              /* "entry 1 before it is missing" */
}
END_TEST

START_TEST(test_janitor_audit_prune_refuses_broken_prefix)
{
	entries(6, NOW - 2 * DAY);
	entries(2, NOW);
	rawsql("UPDATE audit SET detail = 'forged' WHERE seq = 3");
	int64_t n = -1;
	ck_assert_int_eq(audit_prune(sc, NOW - DAY, 0, 500, NOW, &n), CS_ECRYPTO);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit"), 8);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit_anchor"), 0);
	struct audit_verify_result r = verify(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, 3);
}
END_TEST

START_TEST(test_janitor_audit_head_kept_and_batches)
{
	entries(6, NOW - 2 * DAY);
	int64_t n = 0;
	/* Batches of 4: 4, then 1 -- the head (entry 6) is never pruned. */
	ck_assert_int_eq(audit_prune(sc, NOW - DAY, 0, 4, NOW, &n), CS_OK);
	ck_assert_int_eq(n, 4);
	ck_assert_int_eq(rawint("SELECT seq FROM audit_anchor"), 4);
	ck_assert_int_eq(audit_prune(sc, NOW - DAY, 0, 4, NOW, &n), CS_OK);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(rawint("SELECT seq FROM audit_anchor"), 5);
	ck_assert_int_eq(audit_prune(sc, NOW - DAY, 0, 4, NOW, &n), CS_OK);
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit"), 1);
	ck_assert_int_eq(rawint("SELECT seq FROM audit"), 6);
	struct audit_verify_result r = verify(&mk, NULL);
	ck_assert_msg(r.ok == 1, "%s", r.why);
	ck_assert_int_eq(r.anchor, 5);
	/* Appending goes on from the kept head. */
	entries(1, NOW);
	ck_assert_int_eq(verify(&mk, NULL).ok, 1);
}
END_TEST

START_TEST(test_janitor_audit_keep)
{
	/* audit_keep = 3 keeps the newest 3 whatever their age, in batches of 2. */
	entries(10, NOW);
	cfg.retention_audit_keep = 3;
	cfg.retention_batch_size = 2;
	struct janitor_stats s = run();
	ck_assert_int_eq(s.audit_pruned, 7);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit"), 3);
	ck_assert_int_eq(run().audit_pruned, 0);    /* nothing feeds the next pass */
	struct audit_verify_result r = verify(&mk, NULL);
	ck_assert_msg(r.ok == 1, "%s", r.why);
	ck_assert_int_eq(r.anchor, 7);
	int64_t n = -1;
	ck_assert_int_eq(audit_prune(sc, -1, 0, 10, NOW, &n), CS_EINVAL);
	ck_assert_int_eq(audit_prune(sc, 0, -1, 10, NOW, &n), CS_EINVAL);
	ck_assert_int_eq(audit_prune(sc, 0, 0, 0, NOW, &n), CS_EINVAL);
}
END_TEST

static char *write_heads(const char *text)
{
	char *p = tu_path(dir, "heads.txt");
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	return p;
}

static struct audit_head head_at(int64_t seq)
{
	struct audit_head h;
	unsigned char link[AUDIT_LINK_LEN];
	sqlite3_stmt *q = NULL;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "SELECT link FROM audit WHERE seq = ?1", -1, &q,
	    NULL), SQLITE_OK);
	sqlite3_bind_int64(q, 1, seq);
	ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
	memcpy(link, sqlite3_column_blob(q, 0), AUDIT_LINK_LEN);
	sqlite3_finalize(q);
	h.seq = seq;
	audit_link_hex(link, h.hex);
	return h;
}

START_TEST(test_janitor_audit_heads_after_anchor)
{
	entries(6, NOW - 2 * DAY);
	entries(4, NOW - 10);
	struct audit_head h3 = head_at(3), h6 = head_at(6), h9 = head_at(9);
	cfg.retention_audit_days = 1;
	ck_assert_int_eq(run().audit_pruned, 6);
	char text[512];
	snprintf(text, sizeof text, "%lld:%s\n%lld:%s\n%lld:%s\n", (long long)h3.seq, h3.hex,
	    (long long)h6.seq, h6.hex, (long long)h9.seq, h9.hex);
	char *p = write_heads(text);
	struct audit_verify_result r = verify(&mk, NULL);
	ck_assert_int_eq(r.ok, 1);
	struct audit_heads_result hr;
	FILE *f = fopen(p, "r");
	ck_assert_int_eq(audit_heads_check(sc, f, &r.head, &hr), CS_OK);
	fclose(f);
	ck_assert_msg(hr.ok == 1, "%s", hr.why);
	ck_assert_int_eq(hr.pruned, 1);             /* 3: before the anchor */
	ck_assert_int_eq(hr.heads, 2);              /* 6 (the anchor's link) and 9 */
	/* --head at the anchor and after it. */
	ck_assert_int_eq(verify(&mk, &h6).ok, 1);
	ck_assert_int_eq(verify(&mk, &h9).ok, 1);
	/* A head after the anchor whose entry was rewritten still fails. */
	free(p);
	h9.hex[0] = h9.hex[0] == '0' ? '1' : '0';
	snprintf(text, sizeof text, "%lld:%s\n", (long long)h9.seq, h9.hex);
	p = write_heads(text);
	f = fopen(p, "r");
	ck_assert_int_eq(audit_heads_check(sc, f, &r.head, &hr), CS_OK);
	fclose(f);
	ck_assert_int_eq(hr.ok, 0);
	ck_assert_int_eq(hr.bad.seq, 9);
	ck_assert_int_eq(verify(&mk, &h9).ok, 0);
	free(p);
}
END_TEST

START_TEST(test_janitor_audit_published_head_pruned_not_behind)
{
	/* head_file's last head (6) was pruned away after more entries were
	 * written: at the next start that is not "behind". */
	char *hp = tu_path(dir, "heads"), *lp = tu_path(dir, "pub.log");
	FILE *log = fopen(lp, "a");
	ck_assert_ptr_nonnull(log);
	ck_assert_int_eq(audit_publish_open(st, hp, log), CS_OK);
	entries(6, NOW);
	audit_publish_close(st);
	entries(4, NOW);                            /* not published */
	cfg.retention_audit_keep = 2;
	ck_assert_int_eq(run().audit_pruned, 8);
	int behind = -1;
	ck_assert_int_eq(audit_publish_open(st, hp, log), CS_OK);
	ck_assert_int_eq(audit_publish_check(sc, 1, &behind), CS_OK);
	ck_assert_int_eq(behind, 0);
	audit_publish_close(st);
	/* A head file ahead of the database is still behind, pruned or not. */
	rawsql("DELETE FROM audit WHERE seq = 10");
	rawsql("UPDATE sqlite_sequence SET seq = 9 WHERE name = 'audit'");
	FILE *f = fopen(hp, "a");
	ck_assert_ptr_nonnull(f);
	struct audit_head h10;
	h10.seq = 10;
	memset(h10.hex, 'a', AUDIT_LINK_HEX);
	h10.hex[AUDIT_LINK_HEX] = '\0';
	fprintf(f, "10:%s\n", h10.hex);
	fclose(f);
	ck_assert_int_eq(audit_publish_open(st, hp, log), CS_OK);
	ck_assert_int_eq(audit_publish_check(sc, 0, &behind), CS_OK);
	ck_assert_int_eq(behind, 1);
	audit_publish_close(st);
	fclose(log);
	free(hp);
	free(lp);
}
END_TEST

START_TEST(test_janitor_audit_relink_after_prune)
{
	pruned_chain();
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(audit_relink(sc, &mk2), CS_OK);
	ck_assert_int_eq(store_commit(sc), CS_OK);
	struct audit_verify_result r = verify(&mk2, NULL);
	ck_assert_msg(r.ok == 1, "%s", r.why);
	ck_assert_int_eq(r.anchor, 6);
	ck_assert_int_eq(verify(&mk, NULL).ok, 0);
}
END_TEST

static Suite *janitor_suite(void)
{
	Suite *s = suite_create("janitor");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_janitor_grants_boundary);
	tcase_add_test(tc, test_janitor_requests_boundary);
	tcase_add_test(tc, test_janitor_approvals_boundary);
	tcase_add_test(tc, test_janitor_events_boundary);
	tcase_add_test(tc, test_janitor_revoked_consents);
	tcase_add_test(tc, test_janitor_authz_boundary);
	tcase_add_test(tc, test_janitor_batch_size);
	tcase_add_test(tc, test_janitor_audit_default_keeps_all);
	tcase_add_test(tc, test_janitor_audit_prune_verifies);
	tcase_add_test(tc, test_janitor_audit_entry_after_anchor_changed);
	tcase_add_test(tc, test_janitor_audit_anchor_changed);
	tcase_add_test(tc, test_janitor_audit_anchor_moved);
	tcase_add_test(tc, test_janitor_audit_anchor_deleted);
	tcase_add_test(tc, test_janitor_audit_prune_refuses_broken_prefix);
	tcase_add_test(tc, test_janitor_audit_head_kept_and_batches);
	tcase_add_test(tc, test_janitor_audit_keep);
	tcase_add_test(tc, test_janitor_audit_heads_after_anchor);
	tcase_add_test(tc, test_janitor_audit_published_head_pruned_not_behind);
	tcase_add_test(tc, test_janitor_audit_relink_after_prune);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(janitor_suite());
}
