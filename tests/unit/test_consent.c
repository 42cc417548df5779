/* test_consent.c -- flow A's state machine, flow B's decisions and
 * the revocation cascade, against a real SQLite file built from migrations/,
 * with a hand-filled configuration and explicit clocks; and the words a
 * consent answer is described with (consent_answer_description). */
#include <string.h>
#include <sqlite3.h>
#include "audit.h"
#include "consent.h"
#include "store.h"
#include "store_user.h"
#include "testutil.h"
#include "../../server/store_priv.h"   /* store_writer_stats */
#include "tu_consent.h"

#define ISS "https://idp.test"
#define GW "gateway:agent-gateway"
#define T0 1000000

static char *dir;
static struct store *st;
static struct store_conn *sc;
static sqlite3 *raw;                  /* a second connection, for looking and poking */
static struct config cfg;

static char *allow_coder[] = { "notes:read", "notes:write", "notes:admin", NULL };
static char *allow_reader[] = { "notes:read", "notes:write", NULL };
static struct config_agent agents[2];
static struct config_resource resources[1];
static struct config_scope scopes[3];

/* Migration 0004 (grants, refresh tokens) belongs to grant.c; until it lands
 * the test creates the same tables so the revocation cascade has its targets. */
static const char grants_sql[] =
    "CREATE TABLE IF NOT EXISTS grants (jti TEXT PRIMARY KEY, consent_id TEXT NOT NULL "
    "REFERENCES consents(id), issued_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, "
    "revoked_at INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE IF NOT EXISTS refresh_tokens (hash BLOB PRIMARY KEY, family TEXT NOT NULL, "
    "consent_id TEXT NOT NULL REFERENCES consents(id), issued_at INTEGER NOT NULL, "
    "used_at INTEGER NOT NULL DEFAULT 0, revoked_at INTEGER NOT NULL DEFAULT 0);";

static void setup(void)
{
	audit_set_key((const unsigned char[32]){ 0 }, "test");   /* the audit chain's key */
	dir = tu_tmpdir();
	char *db = tu_path(dir, "t.db");
	ck_assert_int_eq(store_open(db, &st), CS_OK);
	sc = store_conn(st);
	ck_assert_ptr_nonnull(sc);
	ck_assert_int_eq(sqlite3_open(db, &raw), SQLITE_OK);
	sqlite3_busy_timeout(raw, 5000);
	ck_assert_int_eq(sqlite3_exec(raw, grants_sql, NULL, NULL, NULL), SQLITE_OK);
	free(db);

	memset(&cfg, 0, sizeof cfg);
	memset(agents, 0, sizeof agents);
	memset(resources, 0, sizeof resources);
	memset(scopes, 0, sizeof scopes);
	agents[0].id = "coder";
	agents[0].name = "Coding assistant";
	agents[0].allow = allow_coder;
	agents[0].nallow = 3;
	agents[0].offline = true;
	agents[1].id = "reader";
	agents[1].name = "Reader";
	agents[1].allow = allow_reader;
	agents[1].nallow = 2;
	agents[1].offline = false;
	resources[0].id = "notes";
	resources[0].name = "Team notes";
	resources[0].uri = "urn:consentd:resource:notes";
	resources[0].max_consent = 3600;
	scopes[0].resource = "notes";
	scopes[0].name = "read";
	scopes[1].resource = "notes";
	scopes[1].name = "write";
	scopes[2].resource = "notes";
	scopes[2].name = "admin";
	cfg.agents = agents;
	cfg.nagents = 2;
	cfg.resources = resources;
	cfg.nresources = 1;
	cfg.scopes = scopes;
	cfg.nscopes = 3;
	cfg.gateway_id = "agent-gateway";
	cfg.consent_request_ttl = 600;
	cfg.consent_interval = 5;
	cfg.consent_deny_cooldown = 3600;
	cfg.consent_max_pending_per_user = 5;
}

static void teardown(void)
{
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

static char *joined(const struct scope_set *s)
{
	char *j = scope_set_join(s);
	ck_assert_ptr_nonnull(j);
	return j;
}

static void ck_set(const struct scope_set *s, const char *want)
{
	char *j = joined(s);
	ck_assert_str_eq(j, want);
	free(j);
}

/* One token-exchange call of the agent (or another) for (sub, resource). */
static enum consent_outcome exch_full(const char *sub, const char *agent, const char *resource,
    const char *scopes_s, const char *reason, int64_t now, struct consent_answer *a)
{
	struct scope_set req = set(scopes_s);
	memset(a, 0, sizeof *a);
	ck_assert_int_eq(tu_exchange(sc, &cfg, ISS, sub, agent, resource, &req, reason, GW,
	    now, a), CS_OK);
	scope_set_clear(&req);
	return a->outcome;
}

static enum consent_outcome exch(const char *sub, const char *scopes_s, int64_t now,
    struct consent_answer *a)
{
	return exch_full(sub, "coder", "notes", scopes_s, NULL, now, a);
}

/* Runs exch and returns only the outcome; the request id is copied to id_out when asked. */
static enum consent_outcome exch_o(const char *sub, const char *scopes_s, int64_t now,
    char **id_out)
{
	struct consent_answer a;
	enum consent_outcome o = exch(sub, scopes_s, now, &a);
	if (id_out != NULL)
		*id_out = a.request_id ? strdup(a.request_id) : NULL;
	consent_answer_clear(&a);
	return o;
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

static char *q_text(const char *sql, const char *arg)
{
	sqlite3_stmt *s = NULL;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, sql, -1, &s, NULL), SQLITE_OK);
	if (arg != NULL)
		sqlite3_bind_text(s, 1, arg, -1, SQLITE_TRANSIENT);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
	const unsigned char *t = sqlite3_column_text(s, 0);
	char *v = t ? strdup((const char *)t) : NULL;
	sqlite3_finalize(s);
	return v;
}

static void raw_exec(const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(raw, sql, NULL, NULL, &msg);
	ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : "?");
}

static int64_t user_id(const char *sub)
{
	return q_int("SELECT id FROM users WHERE subject = ?1", sub);
}

static int64_t audits(const char *action)
{
	return q_int("SELECT count(*) FROM audit WHERE action = ?1", action);
}

/* Approves request rid as sub with the ticked scopes, for duration seconds. */
static enum cs_err decide(const char *rid, const char *sub, bool approve, const char *ticked,
    int64_t duration, bool offline, int64_t now, char **kid)
{
	struct consent_decision d;
	memset(&d, 0, sizeof d);
	d.approve = approve;
	if (ticked != NULL)
		d.selected = set(ticked);
	d.duration = duration;
	d.offline = offline;
	tu_decision_version(sc, rid, &d);
	enum cs_err e = tu_decide(sc, &cfg, rid, user_id(sub), &d, "user:x", now, kid);
	scope_set_clear(&d.selected);
	return e;
}

static bool b64url_id(const char *s)
{
	if (s == NULL || strlen(s) != CONSENT_ID_LEN)
		return false;
	for (; *s; s++)
		if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", *s))
			return false;
	return true;
}

/* --- flow A ------------------------------------------------------------ */

START_TEST(test_consent_exchange_new_pending_slow_down)
{
	struct consent_answer a;
	ck_assert_int_eq(exch("alice", "read", T0, &a), CONSENT_REQUIRED);
	ck_assert(b64url_id(a.request_id));
	ck_assert_int_eq(a.expires_in, 600);
	ck_assert_int_eq(a.interval, 5);
	char *rid = strdup(a.request_id);
	consent_answer_clear(&a);

	/* Polled on time: pending. */
	ck_assert_int_eq(exch("alice", "read", T0 + 5, &a), CONSENT_PENDING);
	ck_assert_str_eq(a.request_id, rid);
	ck_assert_int_eq(a.expires_in, 595);
	ck_assert_int_eq(a.interval, 5);
	consent_answer_clear(&a);
	/* Too fast: slow_down, and the interval grows by 5 s... */
	ck_assert_int_eq(exch("alice", "read", T0 + 7, &a), CONSENT_SLOW_DOWN);
	ck_assert_int_eq(a.interval, 10);
	consent_answer_clear(&a);
	/* ...and stays grown: 5 s later is still too fast. */
	ck_assert_int_eq(exch("alice", "read", T0 + 12, &a), CONSENT_SLOW_DOWN);
	ck_assert_int_eq(a.interval, 15);
	consent_answer_clear(&a);
	ck_assert_int_eq(exch("alice", "read", T0 + 27, &a), CONSENT_PENDING);
	ck_assert_int_eq(a.interval, 15);
	ck_assert_str_eq(a.request_id, rid);
	consent_answer_clear(&a);
	ck_assert_int_eq(audits("consent.request.created"), 1);
	/* Audited the first time only; both are counted on the request. */
	ck_assert_int_eq(audits("consent.request.slow_down"), 1);
	ck_assert_int_eq(q_int("SELECT slow_downs FROM consent_requests WHERE id = ?1", rid), 2);
	/* A third and fourth: still one entry, four counted. */
	ck_assert_int_eq(exch("alice", "read", T0 + 28, &a), CONSENT_SLOW_DOWN);
	consent_answer_clear(&a);
	ck_assert_int_eq(exch("alice", "read", T0 + 29, &a), CONSENT_SLOW_DOWN);
	ck_assert(!a.reason_kept);
	consent_answer_clear(&a);
	ck_assert_int_eq(audits("consent.request.slow_down"), 1);
	ck_assert_int_eq(q_int("SELECT slow_downs FROM consent_requests WHERE id = ?1", rid), 4);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consent_requests", NULL), 1);
	/* The user row was created for the person, without name or email. */
	ck_assert_int_eq(q_int("SELECT count(*) FROM users WHERE subject = 'alice' AND issuer = '"
	    ISS "' AND name IS NULL", NULL), 1);
	free(rid);
}
END_TEST

START_TEST(test_consent_exchange_keeps_user_profile)
{
	int64_t id = 0, id2 = 0;
	ck_assert_int_eq(store_user_put(sc, &(struct store_user){ .issuer = ISS, .subject = "alice",
	    .name = "Alice", .email = "a@x.test", .now = 10, .login = true }, &id), CS_OK);
	ck_assert_int_eq(exch_o("alice", "read", T0, NULL), CONSENT_REQUIRED);
	ck_assert_int_eq(user_id("alice"), id);
	char *name = q_text("SELECT name || ' ' || email FROM users WHERE subject = ?1", "alice");
	ck_assert_str_eq(name, "Alice a@x.test");
	free(name);
	/* Another issuer is another person. */
	struct scope_set req = set("read");
	struct consent_answer a;
	ck_assert_int_eq(tu_exchange(sc, &cfg, "https://other.test", "alice", "coder", "notes",
	    &req, NULL, GW, T0, &a), CS_OK);
	ck_assert_int_eq(a.outcome, CONSENT_REQUIRED);
	consent_answer_clear(&a);
	scope_set_clear(&req);
	id2 = q_int("SELECT id FROM users WHERE issuer = 'https://other.test'", NULL);
	ck_assert_int_ne(id, id2);
}
END_TEST

START_TEST(test_consent_exchange_merge_same_request)
{
	char *rid = NULL, *rid2 = NULL;
	struct consent_request r;
	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	struct consent_answer a;
	ck_assert_int_eq(exch_full("alice", "coder", "notes", "write", "to file notes", T0 + 1, &a),
	    CONSENT_REQUIRED);
	ck_assert(a.merged);
	ck_assert_str_eq(a.request_id, rid);
	ck_assert_int_eq(a.expires_in, 599);
	consent_answer_clear(&a);
	ck_assert_int_eq(consent_request_get(sc, rid, &r), CS_OK);
	ck_set(&r.scopes, "read write");
	ck_assert_str_eq(r.reason, "to file notes");
	ck_assert_str_eq(r.subject, "alice");
	ck_assert_str_eq(r.status, "pending");
	consent_request_clear(&r);
	/* A subset of the merged scopes is a poll, not a merge; no reason keeps the old one. */
	ck_assert_int_eq(exch_o("alice", "write read", T0 + 10, &rid2), CONSENT_PENDING);
	ck_assert_str_eq(rid2, rid);
	ck_assert_int_eq(consent_request_get(sc, rid, &r), CS_OK);
	ck_assert_str_eq(r.reason, "to file notes");
	consent_request_clear(&r);
	ck_assert_int_eq(audits("consent.request.merged"), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consent_requests", NULL), 1);
	free(rid);
	free(rid2);
}
END_TEST

START_TEST(test_consent_approve_partial_then_grant)
{
	char *rid = NULL, *rid2 = NULL, *kid = NULL;
	struct consent_answer a;
	struct consent_request r;
	ck_assert_int_eq(exch_o("alice", "read write", T0, &rid), CONSENT_REQUIRED);
	/* The person unticks write. */
	ck_assert_int_eq(decide(rid, "alice", true, "read", 3600, false, T0 + 30, &kid), CS_OK);
	ck_assert(b64url_id(kid));
	ck_assert_int_eq(consent_request_get(sc, rid, &r), CS_OK);
	ck_assert_str_eq(r.status, "approved");
	ck_assert_str_eq(r.consent_id, kid);
	ck_assert_int_eq(r.decided_at, T0 + 30);
	consent_request_clear(&r);

	/* The same call now gets a grant for the ticked scope only. */
	ck_assert_int_eq(exch("alice", "read write", T0 + 35, &a), CONSENT_GRANT);
	ck_set(&a.grant_scopes, "read");
	ck_assert_str_eq(a.live.id, kid);
	ck_assert_str_eq(a.live.subject, "alice");
	ck_assert_str_eq(a.live.agent, "coder");
	ck_assert_str_eq(a.live.resource, "notes");
	ck_assert_str_eq(a.live.state, "live");
	ck_set(&a.live.granted, "read");
	ck_set(&a.live.declined, "write");
	ck_assert_int_eq(a.live.expires_at, T0 + 30 + 3600);
	ck_assert(!a.live.offline);
	ck_assert_ptr_null(a.request_id);
	consent_answer_clear(&a);
	ck_assert_int_eq(exch("alice", "read", T0 + 36, &a), CONSENT_GRANT);
	ck_set(&a.grant_scopes, "read");
	consent_answer_clear(&a);

	/* Only the declined scope, within deny_cooldown of the decision: answered
	 * as a denial of that scope (issue #14), nothing written. */
	ck_assert_int_eq(exch_o("alice", "write", T0 + 40, NULL), CONSENT_DENIED);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consent_requests", NULL), 1);
	/* The person lets it ask again: a new request that shows everything the
	 * agent would hold, with read pre-ticked. */
	bool lifted = false;
	ck_assert_int_eq(tu_allow_asking(sc, &cfg, rid, user_id("alice"), "user:alice", T0 + 40,
	    &lifted), CS_OK);
	ck_assert(lifted);
	ck_assert_int_eq(exch_o("alice", "write", T0 + 40, &rid2), CONSENT_REQUIRED);
	ck_assert_str_ne(rid2, rid);
	ck_assert_int_eq(consent_request_get(sc, rid2, &r), CS_OK);
	ck_set(&r.scopes, "read write");
	ck_set(&r.pre_granted, "read");
	consent_request_clear(&r);
	/* A scope never decided on (admin) is not covered either: merged into it. */
	ck_assert_int_eq(exch("alice", "read admin", T0 + 41, &a), CONSENT_REQUIRED);
	ck_assert_str_eq(a.request_id, rid2);
	consent_answer_clear(&a);
	/* But the covered call still gets its grant while that request is pending. */
	ck_assert_int_eq(exch("alice", "read", T0 + 42, &a), CONSENT_GRANT);
	consent_answer_clear(&a);
	/* The consent expires: no grant any more, a poll of the pending request. */
	ck_assert_int_eq(exch("alice", "read", T0 + 30 + 3600, &a), CONSENT_EXPIRED);
	consent_answer_clear(&a);
	ck_assert_int_eq(exch("alice", "read", T0 + 30 + 3601, &a), CONSENT_REQUIRED);
	ck_assert_int_eq(consent_request_get(sc, a.request_id, &r), CS_OK);
	ck_set(&r.pre_granted, "");               /* no live consent any more */
	consent_request_clear(&r);
	consent_answer_clear(&a);
	free(rid);
	free(rid2);
	free(kid);
}
END_TEST

/* A known person's covered call is answered from committed rows: no
 * transaction, so no turn at the writer and no wait for a group commit.  A
 * call that is not covered, or a person not known yet, still runs one. */
START_TEST(test_consent_exchange_covered_without_transaction)
{
	char *rid = NULL, *kid = NULL;
	struct consent_answer a;
	struct store_writer_stats w0, w1;
	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 3600, false, T0 + 30, &kid), CS_OK);
	store_writer_stats(st, &w0);
	ck_assert_int_eq(exch("alice", "read", T0 + 35, &a), CONSENT_GRANT);
	ck_assert_str_eq(a.live.id, kid);
	ck_set(&a.grant_scopes, "read");
	consent_answer_clear(&a);
	store_writer_stats(st, &w1);
	ck_assert_uint_eq(w1.transactions, w0.transactions);
	/* Not covered: the full path, one transaction. */
	ck_assert_int_eq(exch("alice", "read write", T0 + 36, &a), CONSENT_REQUIRED);
	consent_answer_clear(&a);
	store_writer_stats(st, &w0);
	ck_assert_uint_eq(w0.transactions, w1.transactions + 1);
	/* Someone new: the full path makes the user row. */
	ck_assert_int_eq(exch_o("bob", "read", T0 + 37, NULL), CONSENT_REQUIRED);
	store_writer_stats(st, &w1);
	ck_assert_uint_eq(w1.transactions, w0.transactions + 1);
	/* Once revoked, the same call is not covered any more. */
	enum consent_revoke_outcome ro;
	const struct consent_actor al = { .user_id = user_id("alice"), .actor = "user:alice",
	    .now = T0 + 38 };
	ck_assert_int_eq(consent_revoke(sc, kid, &al, "x", &ro), CS_OK);
	ck_assert_int_eq(ro, CONSENT_REVOKED);
	ck_assert_int_ne(exch_o("alice", "read", T0 + 39, NULL), CONSENT_GRANT);
	free(rid);
	free(kid);
}
END_TEST

START_TEST(test_consent_deny_cooldown)
{
	char *rid = NULL, *rid2 = NULL, *kid = NULL;
	struct consent_answer a;
	/* A live consent exists; the person denies a request for more. */
	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 3600, false, T0 + 1, &kid), CS_OK);
	free(rid);
	ck_assert_int_eq(exch_o("alice", "write", T0 + 2, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", false, NULL, 0, false, T0 + 10, NULL), CS_OK);
	ck_assert_int_eq(audits("consent.request.denied"), 1);
	/* Denied within the cooldown... */
	ck_assert_int_eq(exch_o("alice", "write", T0 + 11, NULL), CONSENT_DENIED);
	ck_assert_int_eq(exch_o("alice", "write", T0 + 10 + 3599, NULL), CONSENT_DENIED);
	/* ...the previous consent unchanged and still granting... */
	ck_assert_int_eq(exch("alice", "read", T0 + 12, &a), CONSENT_GRANT);
	ck_assert_str_eq(a.live.id, kid);
	consent_answer_clear(&a);
	/* ...and a new request after it. */
	ck_assert_int_eq(exch_o("alice", "write", T0 + 10 + 3600, &rid2), CONSENT_REQUIRED);
	ck_assert_str_ne(rid, rid2);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents WHERE revoked_at = 0", NULL), 1);
	free(rid);
	free(rid2);
	free(kid);
}
END_TEST

START_TEST(test_consent_exchange_expired_then_new)
{
	char *rid = NULL, *rid2 = NULL;
	struct consent_request r;
	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(exch_o("alice", "read", T0 + 599, NULL), CONSENT_PENDING);
	ck_assert_int_eq(exch_o("alice", "read", T0 + 600, NULL), CONSENT_EXPIRED);
	ck_assert_int_eq(consent_request_get(sc, rid, &r), CS_OK);
	ck_assert_str_eq(r.status, "expired");
	consent_request_clear(&r);
	ck_assert_int_eq(audits("consent.request.expired"), 1);
	ck_assert_int_eq(exch_o("alice", "read", T0 + 601, &rid2), CONSENT_REQUIRED);
	ck_assert_str_ne(rid, rid2);
	/* The expired request cannot be decided any more. */
	ck_assert_int_eq(decide(rid, "alice", true, "read", 60, false, T0 + 602, NULL), CS_EINVAL);
	free(rid);
	free(rid2);
}
END_TEST

START_TEST(test_consent_exchange_too_many)
{
	struct consent_answer a;
	cfg.consent_max_pending_per_user = 2;
	ck_assert_int_eq(exch_full("alice", "coder", "notes", "read", NULL, T0, &a), CONSENT_REQUIRED);
	consent_answer_clear(&a);
	ck_assert_int_eq(exch_full("alice", "coder", "wiki", "read", NULL, T0 + 100, &a),
	    CONSENT_REQUIRED);
	consent_answer_clear(&a);
	ck_assert_int_eq(exch_full("alice", "coder", "cal", "read", NULL, T0 + 200, &a),
	    CONSENT_TOO_MANY);
	ck_assert_int_eq(a.retry_after, 400);      /* the notes request expires at T0 + 600 */
	ck_assert_ptr_null(a.request_id);
	consent_answer_clear(&a);
	ck_assert_int_eq(audits("consent.request.refused"), 1);
	/* Others are not counted against alice. */
	ck_assert_int_eq(exch_full("bob", "coder", "cal", "read", NULL, T0 + 200, &a),
	    CONSENT_REQUIRED);
	consent_answer_clear(&a);
	/* Expired pending requests do not count. */
	ck_assert_int_eq(exch_full("alice", "coder", "cal", "read", NULL, T0 + 600, &a),
	    CONSENT_REQUIRED);
	consent_answer_clear(&a);
	/* Polling an existing pending request is never refused. */
	ck_assert_int_eq(exch_full("alice", "coder", "wiki", "read", NULL, T0 + 601, &a),
	    CONSENT_PENDING);
	consent_answer_clear(&a);
	ck_assert_int_eq(exch_full("alice", "reader", "notes", "read", NULL, T0 + 699, &a),
	    CONSENT_TOO_MANY);
	ck_assert_int_eq(a.retry_after, 1);        /* wiki expires at T0 + 700 */
	consent_answer_clear(&a);
}
END_TEST

START_TEST(test_consent_exchange_merge_too_many)
{
	char a15[256], b10[256];
	size_t o = 0, p = 0;
	struct consent_request r;
	struct consent_answer a;
	char *rid = NULL;
	for (int i = 0; i < 15; i++)
		o += (size_t)snprintf(a15 + o, sizeof a15 - o, "%sa%02d", i ? " " : "", i);
	for (int i = 0; i < 10; i++)
		p += (size_t)snprintf(b10 + p, sizeof b10 - p, "%sb%02d", i ? " " : "", i);
	ck_assert_int_eq(exch_o("alice", a15, T0, &rid), CONSENT_REQUIRED);
	struct scope_set req = set(b10);
	memset(&a, 0, sizeof a);
	ck_assert_int_eq(tu_exchange(sc, &cfg, ISS, "alice", "coder", "notes", &req, NULL, GW,
	    T0 + 10, &a), CS_OK);
	ck_assert_int_eq(a.outcome, CONSENT_TOO_MANY_SCOPES);
	ck_assert_ptr_null(a.request_id);
	scope_set_clear(&req);
	ck_assert_int_eq(consent_request_get(sc, rid, &r), CS_OK);
	ck_assert_uint_eq(r.scopes.n, 15);
	consent_request_clear(&r);
	ck_assert_int_eq(audits("consent.request.merged"), 0);
	free(rid);
}
END_TEST

/* --- flow B ------------------------------------------------------------ */

START_TEST(test_consent_decide_other_user_eperm)
{
	char *rid = NULL, *kid = NULL;
	struct consent_request r;
	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(exch_o("bob", "read", T0, NULL), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "bob", true, "read", 60, false, T0 + 1, &kid), CS_EPERM);
	ck_assert_int_eq(decide(rid, "bob", false, NULL, 0, false, T0 + 1, NULL), CS_EPERM);
	ck_assert_ptr_null(kid);
	ck_assert_int_eq(consent_request_get(sc, rid, &r), CS_OK);
	ck_assert_str_eq(r.status, "pending");
	consent_request_clear(&r);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 0);
	ck_assert_int_eq(decide("nosuchrequestAAAAAAAAA", "alice", true, "read", 60, false, T0 + 1,
	    NULL), CS_ENOENT);
	free(rid);
}
END_TEST

/* Decides rid with the version vers (a page drawn earlier), as sub. */
static enum cs_err decide_at(const char *rid, const char *vers, bool approve, const char *ticked,
    int64_t now, char **kid)
{
	struct consent_decision d;
	memset(&d, 0, sizeof d);
	d.approve = approve;
	if (ticked != NULL)
		d.selected = set(ticked);
	d.duration = 60;
	memcpy(d.version, vers, sizeof d.version);
	enum cs_err e = tu_decide(sc, &cfg, rid, user_id("alice"), &d, "user:x", now, kid);
	scope_set_clear(&d.selected);
	return e;
}

/* The review's attack: the page showed "read" (box s0); the agent then asks
 * for "admin", which sorts first and would take box s0.  An approval drawn
 * from the old page grants nothing. */
START_TEST(test_consent_decide_changed_request_estale)
{
	char *rid = NULL, *rid2 = NULL, *kid = NULL;
	char v1[CONSENT_VERSION_LEN + 1], v2[CONSENT_VERSION_LEN + 1];
	struct consent_decision d;
	struct consent_request r;
	memset(&d, 0, sizeof d);
	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	tu_decision_version(sc, rid, &d);
	memcpy(v1, d.version, sizeof v1);
	ck_assert_uint_eq(strlen(v1), CONSENT_VERSION_LEN);
	/* Polling the same scopes does not change what the person sees. */
	ck_assert_int_eq(exch_o("alice", "read", T0 + 10, NULL), CONSENT_PENDING);
	tu_decision_version(sc, rid, &d);
	ck_assert_str_eq(d.version, v1);
	/* The merge. */
	ck_assert_int_eq(exch_o("alice", "admin read", T0 + 20, &rid2), CONSENT_REQUIRED);
	ck_assert_str_eq(rid2, rid);
	tu_decision_version(sc, rid, &d);
	memcpy(v2, d.version, sizeof v2);
	ck_assert_str_ne(v1, v2);
	ck_assert_int_eq(decide_at(rid, v1, true, "read", T0 + 21, &kid), CS_ESTALE);
	ck_assert_int_eq(decide_at(rid, v1, true, "admin", T0 + 21, &kid), CS_ESTALE);
	/* No version at all, or garbage, is never current. */
	ck_assert_int_eq(decide_at(rid, "", true, "read", T0 + 21, &kid), CS_ESTALE);
	ck_assert_int_eq(decide_at(rid, "0000000000000000000000000000000000000000000000000000000000000000",
	    true, "read", T0 + 21, &kid), CS_ESTALE);
	ck_assert_ptr_null(kid);
	/* Nothing was written: still pending, no consent, no decision audited. */
	ck_assert_int_eq(consent_request_get(sc, rid, &r), CS_OK);
	ck_assert_str_eq(r.status, "pending");
	consent_request_clear(&r);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 0);
	ck_assert_int_eq(audits("consent.request.approved"), 0);
	/* On the page as it is now, the person's choice counts, exactly. */
	ck_assert_int_eq(decide_at(rid, v2, true, "read", T0 + 22, &kid), CS_OK);
	ck_assert_ptr_nonnull(kid);
	char *granted = q_text("SELECT granted FROM consents WHERE id = ?1", kid);
	char *declined = q_text("SELECT declined FROM consents WHERE id = ?1", kid);
	ck_assert_str_eq(granted, "read");
	ck_assert_str_eq(declined, "admin");
	free(granted);
	free(declined);
	free(kid);
	free(rid);
	free(rid2);
}
END_TEST

/* A denial grants nothing, so it stands for any version of the request. */
START_TEST(test_consent_decide_deny_any_version)
{
	char *rid = NULL;
	char v1[CONSENT_VERSION_LEN + 1];
	struct consent_decision d;
	memset(&d, 0, sizeof d);
	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	tu_decision_version(sc, rid, &d);
	memcpy(v1, d.version, sizeof v1);
	ck_assert_int_eq(exch_o("alice", "admin read", T0 + 20, NULL), CONSENT_REQUIRED);
	ck_assert_int_eq(decide_at(rid, v1, false, NULL, T0 + 21, NULL), CS_OK);
	ck_assert_int_eq(audits("consent.request.denied"), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 0);
	ck_assert_int_eq(exch_o("alice", "admin read", T0 + 30, NULL), CONSENT_DENIED);
	free(rid);
}
END_TEST

/* A merge that only changes the reason the person is reading changes the
 * version too. */
START_TEST(test_consent_decide_changed_reason_estale)
{
	char *rid = NULL, *kid = NULL;
	struct consent_answer a;
	struct consent_decision d;
	char v1[CONSENT_VERSION_LEN + 1];
	memset(&d, 0, sizeof d);
	ck_assert_int_eq(exch_full("alice", "coder", "notes", "read", "to read the notes", T0, &a),
	    CONSENT_REQUIRED);
	rid = strdup(a.request_id);
	consent_answer_clear(&a);
	tu_decision_version(sc, rid, &d);
	memcpy(v1, d.version, sizeof v1);
	ck_assert_int_eq(exch_full("alice", "coder", "notes", "read write", "something else", T0 + 10,
	    &a), CONSENT_REQUIRED);
	consent_answer_clear(&a);
	ck_assert_int_eq(decide_at(rid, v1, true, "read", T0 + 11, &kid), CS_ESTALE);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 0);
	/* The version covers the reason alone as well. */
	struct consent_request r;
	char va[CONSENT_VERSION_LEN + 1], vb[CONSENT_VERSION_LEN + 1];
	ck_assert_int_eq(consent_request_get(sc, rid, &r), CS_OK);
	consent_request_version(&r, va);
	/* The request's strings are one block (r.strings): a field is pointed
	 * elsewhere, never freed alone. */
	r.reason = (char *)"something else!";
	consent_request_version(&r, vb);
	ck_assert_str_ne(va, vb);
	r.reason = NULL;
	consent_request_version(&r, vb);
	ck_assert_str_ne(va, vb);
	consent_request_clear(&r);
	free(rid);
}
END_TEST

/* Another reason while a request is pending, without new scopes: the person
 * keeps seeing the first one (an open page stays decidable) and the gateway
 * is told so; the version of the request does not change. */
START_TEST(test_consent_exchange_new_reason_kept)
{
	struct consent_answer a;
	struct consent_request r;
	struct consent_decision d;
	char *rid = NULL, *kid = NULL;
	char v1[CONSENT_VERSION_LEN + 1];
	memset(&d, 0, sizeof d);
	ck_assert_int_eq(exch_full("alice", "coder", "notes", "read", "to read the notes", T0, &a),
	    CONSENT_REQUIRED);
	ck_assert(!a.merged);
	ck_assert(!a.reason_kept);
	rid = strdup(a.request_id);
	consent_answer_clear(&a);
	tu_decision_version(sc, rid, &d);
	memcpy(v1, d.version, sizeof v1);
	/* Same scopes, another reason, on time: pending, reason kept. */
	ck_assert_int_eq(exch_full("alice", "coder", "notes", "read", "URGENT: approve now", T0 + 5,
	    &a), CONSENT_PENDING);
	ck_assert(a.reason_kept);
	ck_assert(!a.merged);
	consent_answer_clear(&a);
	/* ...and too fast: slow_down, reason kept. */
	ck_assert_int_eq(exch_full("alice", "coder", "notes", "read", "URGENT!!", T0 + 6, &a),
	    CONSENT_SLOW_DOWN);
	ck_assert(a.reason_kept);
	consent_answer_clear(&a);
	/* The same reason, or none: nothing to say. */
	ck_assert_int_eq(exch_full("alice", "coder", "notes", "read", "to read the notes", T0 + 20,
	    &a), CONSENT_PENDING);
	ck_assert(!a.reason_kept);
	consent_answer_clear(&a);
	ck_assert_int_eq(exch_full("alice", "coder", "notes", "read", NULL, T0 + 40, &a),
	    CONSENT_PENDING);
	ck_assert(!a.reason_kept);
	consent_answer_clear(&a);
	ck_assert_int_eq(consent_request_get(sc, rid, &r), CS_OK);
	ck_assert_str_eq(r.reason, "to read the notes");
	consent_request_clear(&r);
	ck_assert_int_eq(audits("consent.request.merged"), 0);
	/* The page the person opened first is still the request: deciding on it works. */
	ck_assert_int_eq(decide_at(rid, v1, true, "read", T0 + 41, &kid), CS_OK);
	free(kid);
	free(rid);
}
END_TEST

/* A denial says until when; a request that expires names its slow_downs. */
START_TEST(test_consent_exchange_denied_until_and_expiry_note)
{
	struct consent_answer a;
	char *rid = NULL;
	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", false, NULL, 60, false, T0 + 1, NULL), CS_OK);
	ck_assert_int_eq(exch("alice", "read", T0 + 2, &a), CONSENT_DENIED);
	ck_assert_int_eq(a.denied_until, T0 + 1 + cfg.consent_deny_cooldown);
	consent_answer_clear(&a);
	free(rid);

	ck_assert_int_eq(exch_o("bob", "read", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(exch_o("bob", "read", T0 + 1, NULL), CONSENT_SLOW_DOWN);
	ck_assert_int_eq(exch_o("bob", "read", T0 + 2, NULL), CONSENT_SLOW_DOWN);
	ck_assert_int_eq(exch_o("bob", "read", T0 + 3, NULL), CONSENT_SLOW_DOWN);
	ck_assert_int_eq(exch_o("bob", "read", T0 + cfg.consent_request_ttl + 1, NULL),
	    CONSENT_EXPIRED);
	char *detail = q_text("SELECT detail FROM audit WHERE action = 'consent.request.expired' "
	    "AND request_id = ?1", rid);
	ck_assert_str_eq(detail, "slow_down answered 3 times");
	free(detail);
	free(rid);
}
END_TEST

START_TEST(test_consent_decide_twice_einval)
{
	char *rid = NULL, *kid = NULL, *kid2 = NULL;
	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 60, false, T0 + 1, &kid), CS_OK);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 60, false, T0 + 2, &kid2), CS_EINVAL);
	ck_assert_int_eq(decide(rid, "alice", false, NULL, 0, false, T0 + 2, NULL), CS_EINVAL);
	ck_assert_ptr_null(kid2);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 1);
	free(rid);
	free(kid);
}
END_TEST

START_TEST(test_consent_decide_bad_choices)
{
	char *rid = NULL, *kid = NULL;
	struct consent_request r;
	ck_assert_int_eq(exch_o("alice", "read write", T0, &rid), CONSENT_REQUIRED);
	/* Outside the request (configured and allowed, but not asked for). */
	ck_assert_int_eq(decide(rid, "alice", true, "admin", 60, false, T0 + 1, &kid), CS_EINVAL);
	ck_assert_int_eq(decide(rid, "alice", true, "read admin", 60, false, T0 + 1, &kid), CS_EINVAL);
	/* Empty approval. */
	ck_assert_int_eq(decide(rid, "alice", true, "", 60, false, T0 + 1, &kid), CS_EINVAL);
	/* Durations. */
	ck_assert_int_eq(decide(rid, "alice", true, "read", 0, false, T0 + 1, &kid), CS_EINVAL);
	ck_assert_int_eq(decide(rid, "alice", true, "read", -5, false, T0 + 1, &kid), CS_EINVAL);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 3601, false, T0 + 1, &kid), CS_EINVAL);
	ck_assert_ptr_null(kid);
	/* Nothing was written by any of them. */
	ck_assert_int_eq(consent_request_get(sc, rid, &r), CS_OK);
	ck_assert_str_eq(r.status, "pending");
	consent_request_clear(&r);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit", NULL), 1);
	/* A scope the configuration no longer allows the agent is refused too. */
	agents[0].nallow = 1;                     /* notes:read only */
	ck_assert_int_eq(decide(rid, "alice", true, "read write", 60, false, T0 + 1, &kid), CS_EINVAL);
	agents[0].nallow = 3;
	/* The maximum is fine. */
	ck_assert_int_eq(decide(rid, "alice", true, "read", 3600, false, T0 + 1, &kid), CS_OK);
	free(kid);
	free(rid);
	/* An expired request: refused without writing, so that the gateway's next
	 * call still hears expired_token once (flow A), then a new request. */
	ck_assert_int_eq(exch_o("bob", "read", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "bob", true, "read", 60, false, T0 + 600, NULL), CS_EINVAL);
	ck_assert_int_eq(consent_request_get(sc, rid, &r), CS_OK);
	ck_assert_str_eq(r.status, "pending");
	consent_request_clear(&r);
	free(rid);
	ck_assert_int_eq(exch_o("bob", "read", T0 + 601, NULL), CONSENT_EXPIRED);
	ck_assert_int_eq(exch_o("bob", "read", T0 + 602, NULL), CONSENT_REQUIRED);
}
END_TEST

START_TEST(test_consent_offline_only_for_offline_agent)
{
	char *rid = NULL, *kid = NULL;
	struct consent k;
	struct consent_answer a;
	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 60, true, T0 + 1, &kid), CS_OK);
	ck_assert_int_eq(consent_get(sc, kid, T0 + 2, &k), CS_OK);
	ck_assert(k.offline);
	consent_clear(&k);
	free(rid);
	free(kid);
	ck_assert_int_eq(exch_full("alice", "reader", "notes", "read", NULL, T0, &a),
	    CONSENT_REQUIRED);
	ck_assert_int_eq(decide(a.request_id, "alice", true, "read", 60, true, T0 + 1, &kid), CS_OK);
	consent_answer_clear(&a);
	ck_assert_int_eq(consent_get(sc, kid, T0 + 2, &k), CS_OK);
	ck_assert(!k.offline);                    /* the reader agent is not offline */
	consent_clear(&k);
	free(kid);
}
END_TEST

static void add_tokens(const char *kid, const char *tag)
{
	char sql[512];
	snprintf(sql, sizeof sql,
	    "INSERT INTO grants (jti, consent_id, issued_at, expires_at) VALUES ('j-%s', '%s', 1, 9e9);"
	    "INSERT INTO refresh_tokens (hash, family, consent_id, issued_at) VALUES "
	    "(x'%02x', 'f-%s', '%s', 1);", tag, kid, (unsigned)tag[0], tag, kid);
	raw_exec(sql);
}

START_TEST(test_consent_approve_replaces_old)
{
	char *rid = NULL, *kid1 = NULL, *kid2 = NULL;
	struct consent k;
	struct consent_answer a;
	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 3600, true, T0 + 1, &kid1), CS_OK);
	free(rid);
	add_tokens(kid1, "a");
	/* Asking for more: a new request with read pre-ticked, approved with both. */
	ck_assert_int_eq(exch_o("alice", "write", T0 + 10, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "read write", 3600, false, T0 + 20, &kid2), CS_OK);
	ck_assert_str_ne(kid1, kid2);
	/* The old consent is revoked as replaced, with its grants and refresh tokens. */
	ck_assert_int_eq(consent_get(sc, kid1, T0 + 21, &k), CS_OK);
	ck_assert_str_eq(k.state, "revoked");
	ck_assert_int_eq(k.revoked_at, T0 + 20);
	ck_assert(!consent_is_live(&k, T0 + 21));
	consent_clear(&k);
	char *why = q_text("SELECT revoke_reason || '/' || revoked_by FROM consents WHERE id = ?1", kid1);
	ck_assert_str_eq(why, "replaced/user:x");
	free(why);
	ck_assert_int_eq(q_int("SELECT revoked_at FROM grants WHERE consent_id = ?1", kid1), T0 + 20);
	ck_assert_int_eq(q_int("SELECT revoked_at FROM refresh_tokens WHERE consent_id = ?1", kid1),
	    T0 + 20);
	ck_assert_int_eq(consent_get(sc, kid2, T0 + 21, &k), CS_OK);
	ck_assert_str_eq(k.state, "live");
	ck_assert(consent_is_live(&k, T0 + 21));
	ck_set(&k.granted, "read write");
	ck_set(&k.declined, "");
	consent_clear(&k);
	ck_assert_int_eq(exch("alice", "write", T0 + 30, &a), CONSENT_GRANT);
	ck_assert_str_eq(a.live.id, kid2);
	consent_answer_clear(&a);
	ck_assert_int_eq(audits("consent.revoked"), 1);
	ck_assert_int_eq(audits("consent.granted"), 2);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents WHERE revoked_at = 0", NULL), 1);
	/* An expired, unrevoked consent is replaced the same way. */
	free(rid);
	ck_assert_int_eq(exch_o("alice", "admin", T0 + 5000, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "admin", 60, false, T0 + 5001, NULL), CS_OK);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents WHERE revoked_at = 0", NULL), 1);
	ck_assert_int_eq(q_int("SELECT revoked_at FROM consents WHERE id = ?1", kid2), T0 + 5001);
	free(rid);
	free(kid1);
	free(kid2);
}
END_TEST

/* --- flow G ------------------------------------------------------------ */

START_TEST(test_consent_revoke_cases)
{
	char *rid = NULL, *kid = NULL;
	struct consent k;
	struct consent_answer a;
	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 3600, true, T0 + 1, &kid), CS_OK);
	add_tokens(kid, "b");
	ck_assert_int_eq(exch_o("bob", "read", T0, NULL), CONSENT_REQUIRED);
	/* Someone else: refused, nothing changes. */
	ck_assert_int_eq(tu_revoke(sc, kid, user_id("bob"), "user:bob", "mine now", T0 + 2,
	    false), CS_EPERM);
	ck_assert_int_eq(consent_get(sc, kid, T0 + 2, &k), CS_OK);
	ck_assert_str_eq(k.state, "live");
	consent_clear(&k);
	ck_assert_int_eq(tu_revoke(sc, "nosuchconsentAAAAAAAAA", 0, "admin:root", "x", T0 + 2,
	    false), CS_ENOENT);
	/* The owner. */
	ck_assert_int_eq(tu_revoke(sc, kid, user_id("alice"), "user:alice",
	    "revoked by the person on /me", T0 + 3, false), CS_OK);
	ck_assert_int_eq(q_int("SELECT revoked_at FROM grants WHERE consent_id = ?1", kid), T0 + 3);
	ck_assert_int_eq(q_int("SELECT revoked_at FROM refresh_tokens WHERE consent_id = ?1", kid),
	    T0 + 3);
	/* Twice: fine, one audit entry, the first revocation kept. */
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "again", T0 + 4, false), CS_OK);
	ck_assert_int_eq(audits("consent.revoked"), 1);
	char *det = q_text("SELECT actor || '|' || detail || '|' || consent_id || '|' || subject "
	    "FROM audit WHERE action = 'consent.revoked'", NULL);
	char want[200];
	snprintf(want, sizeof want, "user:alice|revoked by the person on /me|%s|alice", kid);
	ck_assert_str_eq(det, want);
	free(det);
	ck_assert_int_eq(consent_get(sc, kid, T0 + 5, &k), CS_OK);
	ck_assert_int_eq(k.revoked_at, T0 + 3);
	consent_clear(&k);
	/* No grant any more: a new request. */
	ck_assert_int_eq(exch("alice", "read", T0 + 6, &a), CONSENT_REQUIRED);
	consent_answer_clear(&a);
	free(rid);
	free(kid);
}
END_TEST

START_TEST(test_consent_revoke_in_callers_tx)
{
	char *rid = NULL, *kid = NULL;
	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 3600, false, T0 + 1, &kid), CS_OK);
	/* Rolled back by the caller: as if it never happened. */
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "bulk", T0 + 2, true), CS_OK);
	store_rollback(sc);
	ck_assert_int_eq(q_int("SELECT revoked_at FROM consents WHERE id = ?1", kid), 0);
	ck_assert_int_eq(audits("consent.revoked"), 0);
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "bulk", T0 + 2, true), CS_OK);
	ck_assert_int_eq(store_commit(sc), CS_OK);
	ck_assert_int_eq(q_int("SELECT revoked_at FROM consents WHERE id = ?1", kid), T0 + 2);
	free(rid);
	free(kid);
}
END_TEST

/* --- listing ----------------------------------------------------------- */

START_TEST(test_consent_list_and_pending)
{
	char *rid = NULL, *k1 = NULL, *k2 = NULL;
	struct consent *ks = NULL;
	struct consent_request *rs = NULL;
	size_t nk = 9, nr = 9;
	struct consent_answer a;
	int64_t alice;

	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	alice = user_id("alice");
	ck_assert_int_eq(consent_list_for_user(sc, alice, T0, 10, &ks, &nk), CS_OK);
	ck_assert_uint_eq(nk, 0);
	ck_assert_ptr_null(ks);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 3600, false, T0 + 1, &k1), CS_OK);
	free(rid);
	ck_assert_int_eq(exch_o("alice", "write", T0 + 2, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "read write", 3600, false, T0 + 3, &k2), CS_OK);
	free(rid);
	/* A pending request of another agent. */
	ck_assert_int_eq(exch_full("alice", "reader", "notes", "read", "why not", T0 + 4, &a),
	    CONSENT_REQUIRED);
	ck_assert_int_eq(consent_pending_for_user(sc, alice, T0 + 5, &rs, &nr), CS_OK);
	ck_assert_uint_eq(nr, 1);
	ck_assert_str_eq(rs[0].id, a.request_id);
	ck_assert_str_eq(rs[0].agent, "reader");
	ck_assert_str_eq(rs[0].resource, "notes");
	ck_assert_str_eq(rs[0].subject, "alice");
	ck_assert_str_eq(rs[0].reason, "why not");
	ck_set(&rs[0].scopes, "read");
	consent_request_list_free(rs, nr);
	/* Not once expired. */
	ck_assert_int_eq(consent_pending_for_user(sc, alice, T0 + 4 + 600, &rs, &nr), CS_OK);
	ck_assert_uint_eq(nr, 0);
	consent_request_list_free(rs, nr);
	consent_answer_clear(&a);

	ck_assert_int_eq(consent_list_for_user(sc, alice, T0 + 10, 10, &ks, &nk), CS_OK);
	ck_assert_uint_eq(nk, 2);
	ck_assert_str_eq(ks[0].id, k2);           /* live first */
	ck_assert_str_eq(ks[0].state, "live");
	ck_assert_str_eq(ks[1].id, k1);
	ck_assert_str_eq(ks[1].state, "revoked");
	consent_list_free(ks, nk);
	ck_assert_int_eq(consent_list_for_user(sc, alice, T0 + 10, 1, &ks, &nk), CS_OK);
	ck_assert_uint_eq(nk, 1);
	ck_assert_str_eq(ks[0].id, k2);
	consent_list_free(ks, nk);
	/* Expired ones are not live. */
	ck_assert_int_eq(consent_list_for_user(sc, alice, T0 + 3 + 3600, 10, &ks, &nk), CS_OK);
	ck_assert_uint_eq(nk, 2);
	ck_assert_str_eq(ks[0].id, k2);           /* the most recent */
	ck_assert_str_eq(ks[0].state, "expired");
	consent_list_free(ks, nk);
	/* Bob sees nothing of alice's. */
	ck_assert_int_eq(exch_o("bob", "read", T0, NULL), CONSENT_REQUIRED);
	ck_assert_int_eq(consent_list_for_user(sc, user_id("bob"), T0 + 10, 10, &ks, &nk), CS_OK);
	ck_assert_uint_eq(nk, 0);
	consent_list_free(ks, nk);
	struct consent k;
	ck_assert_int_eq(consent_get(sc, "nosuchconsentAAAAAAAAA", T0, &k), CS_ENOENT);
	struct consent_request r;
	ck_assert_int_eq(consent_request_get(sc, "nosuchrequestAAAAAAAAA", &r), CS_ENOENT);
	free(k1);
	free(k2);
}
END_TEST

/* --- audit and atomicity ----------------------------------------------- */

START_TEST(test_consent_audit_every_step)
{
	char *rid = NULL, *kid = NULL;
	struct audit_entry e;
	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(exch_o("alice", "read", T0 + 1, NULL), CONSENT_SLOW_DOWN);
	ck_assert_int_eq(exch_o("alice", "read write", T0 + 2, NULL), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 60, false, T0 + 3, &kid), CS_OK);
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "test", T0 + 4, false), CS_OK);
	const char *actions[] = {
		"consent.request.created", "consent.request.slow_down", "consent.request.merged",
		"consent.request.approved", "consent.granted", "consent.revoked",
	};
	for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++)
		ck_assert_msg(audits(actions[i]) == 1, "%s", actions[i]);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit", NULL), 6);
	/* Every entry names the person, agent and resource; none carries a token. */
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE subject = 'alice' AND agent = "
	    "'coder' AND resource = 'notes' AND outcome IS NOT NULL AND ts >= 1000000 AND "
	    "scopes IS NOT NULL AND (request_id IS NOT NULL OR consent_id IS NOT NULL)", NULL), 6);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE instr(coalesce(actor, '') || "
	    "coalesce(subject, '') || coalesce(scopes, '') || coalesce(detail, '') || "
	    "coalesce(consent_id, '') || coalesce(request_id, ''), 'eyJ') > 0", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'consent.request.approved'"
	    " AND consent_id = ?1", kid), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'consent.granted'"
	    " AND request_id = ?1", rid), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE actor = '" GW "'", NULL), 3);

	/* audit_append refuses anything that looks like a JWT, and an entry without action. */
	memset(&e, 0, sizeof e);
	e.ts = T0;
	e.action = "test.entry";
	e.detail = "token=eyJhbGciOiJFUzI1NiJ9.e30.sig";
	ck_assert_int_eq(audit_append(sc, &e), CS_EINVAL);
	e.detail = NULL;
	e.scopes = "read eyJx.y";
	ck_assert_int_eq(audit_append(sc, &e), CS_EINVAL);
	e.scopes = NULL;
	e.subject = "eyJzdWIiOiJ4In0.e30";
	ck_assert_int_eq(audit_append(sc, &e), CS_EINVAL);
	e.subject = "alice";
	/* A random id may contain "eyJ" by chance: without the dot it is no JWT. */
	e.consent_id = "Ab3eyJq9-_x0AbCdEfGhIj";
	ck_assert_int_eq(audit_append(sc, &e), CS_OK);
	e.consent_id = NULL;
	ck_assert_int_eq(audit_append(sc, &e), CS_OK);
	e.action = NULL;
	ck_assert_int_eq(audit_append(sc, &e), CS_EINVAL);
	e.action = "";
	ck_assert_int_eq(audit_append(sc, &e), CS_EINVAL);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit", NULL), 8);
	free(rid);
	free(kid);
}
END_TEST

static void counts(int64_t out[5])
{
	out[0] = q_int("SELECT count(*) FROM consents WHERE revoked_at = 0", NULL);
	out[1] = q_int("SELECT count(*) FROM consent_requests WHERE status = 'pending'", NULL);
	out[2] = q_int("SELECT count(*) FROM audit", NULL);
	out[3] = q_int("SELECT count(*) FROM grants WHERE revoked_at = 0", NULL);
	out[4] = q_int("SELECT count(*) FROM consents", NULL);
}

START_TEST(test_consent_failure_mid_transaction_rolls_back)
{
	char *rid = NULL, *kid = NULL, *kid2 = NULL;
	int64_t before[5], after[5];
	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 3600, false, T0 + 1, &kid), CS_OK);
	free(rid);
	add_tokens(kid, "c");
	ck_assert_int_eq(exch_o("alice", "write", T0 + 2, &rid), CONSENT_REQUIRED);
	/* The new consent's insert fails after the old one was revoked and audited
	 * in the same transaction: all of it must roll back. */
	raw_exec("CREATE TRIGGER no_new_consents BEFORE INSERT ON consents "
	    "BEGIN SELECT RAISE(ABORT, 'forced failure'); END;");
	counts(before);
	ck_assert_int_ne(decide(rid, "alice", true, "read write", 3600, false, T0 + 3, &kid2), CS_OK);
	ck_assert_ptr_null(kid2);
	counts(after);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(before[i], after[i]);
	ck_assert_int_eq(q_int("SELECT revoked_at FROM consents WHERE id = ?1", kid), 0);
	/* The exchange's own transaction: a failing audit insert undoes the new request. */
	raw_exec("DROP TRIGGER no_new_consents;"
	    "CREATE TRIGGER no_audit BEFORE INSERT ON audit "
	    "BEGIN SELECT RAISE(ABORT, 'forced failure'); END;");
	struct scope_set req = set("read");
	struct consent_answer a;
	memset(&a, 0, sizeof a);
	counts(before);
	ck_assert_int_ne(tu_exchange(sc, &cfg, ISS, "carol", "coder", "notes", &req, NULL, GW,
	    T0, &a), CS_OK);
	ck_assert_ptr_null(a.request_id);
	counts(after);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(before[i], after[i]);
	ck_assert_int_eq(q_int("SELECT count(*) FROM users WHERE subject = 'carol'", NULL), 0);
	scope_set_clear(&req);
	/* And the connection is usable afterwards. */
	raw_exec("DROP TRIGGER no_audit;");
	ck_assert_int_eq(decide(rid, "alice", true, "read write", 3600, false, T0 + 4, &kid2), CS_OK);
	ck_assert_int_eq(q_int("SELECT revoked_at FROM consents WHERE id = ?1", kid), T0 + 4);
	free(rid);
	free(kid);
	free(kid2);
}
END_TEST

/* --- blocks: deny_cooldown after a denial or a declined scope ----------- */

static size_t blocks(const char *sub, int64_t now, struct consent_block **v)
{
	size_t n = 99;
	*v = NULL;
	ck_assert_int_eq(consent_blocks_for_user(sc, &cfg, user_id(sub), now, v, &n), CS_OK);
	return n;
}

START_TEST(test_consent_declined_scope_cooldown)
{
	char *rid = NULL, *rid2 = NULL, *kid = NULL;
	struct consent_answer a;
	struct consent_block *b = NULL;
	cfg.consent_deny_cooldown = 100;
	ck_assert_int_eq(exch_o("alice", "read write admin", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 3600, false, T0 + 10, &kid), CS_OK);
	/* Declined scopes alone, one or both: access_denied while the cooldown holds. */
	ck_assert_int_eq(exch_o("alice", "write", T0 + 11, NULL), CONSENT_DENIED);
	ck_assert_int_eq(exch_o("alice", "admin write", T0 + 10 + 99, NULL), CONSENT_DENIED);
	/* With a granted scope: answered from the consent, as before. */
	ck_assert_int_eq(exch("alice", "read write", T0 + 12, &a), CONSENT_GRANT);
	ck_set(&a.grant_scopes, "read");
	consent_answer_clear(&a);
	/* /me lists it as a block of the declined scopes, until decided_at + cooldown. */
	ck_assert_uint_eq(blocks("alice", T0 + 12, &b), 1);
	ck_assert(b[0].declined);
	ck_assert_str_eq(b[0].request_id, rid);
	ck_assert_str_eq(b[0].agent, "coder");
	ck_assert_str_eq(b[0].resource, "notes");
	ck_set(&b[0].scopes, "admin write");
	ck_assert_int_eq(b[0].decided_at, T0 + 10);
	ck_assert_int_eq(b[0].until, T0 + 110);
	consent_block_list_free(b, 1);
	/* Over at decided_at + cooldown: a new request. */
	ck_assert_uint_eq(blocks("alice", T0 + 110, &b), 0);
	ck_assert_int_eq(exch_o("alice", "write", T0 + 110, &rid2), CONSENT_REQUIRED);
	ck_assert_str_ne(rid2, rid);
	free(rid);
	free(rid2);
	free(kid);
}
END_TEST

START_TEST(test_consent_declined_new_scope_still_asks)
{
	char *rid = NULL, *rid2 = NULL, *kid = NULL;
	struct consent_request r;
	ck_assert_int_eq(exch_o("alice", "read write", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 3600, false, T0 + 10, &kid), CS_OK);
	/* A scope never decided with a declined one: a new request, as before;
	 * the person sees the declined scope again, unticked. */
	ck_assert_int_eq(exch_o("alice", "write admin", T0 + 11, &rid2), CONSENT_REQUIRED);
	ck_assert_int_eq(consent_request_get(sc, rid2, &r), CS_OK);
	ck_set(&r.scopes, "admin read write");
	ck_set(&r.pre_granted, "read");
	consent_request_clear(&r);
	free(rid);
	free(rid2);
	free(kid);
}
END_TEST

START_TEST(test_consent_declined_by_provider_not_blocked)
{
	char *rid = NULL, *kid = NULL;
	struct consent_block *b = NULL;
	ck_assert_int_eq(exch_o("alice", "read write", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 3600, false, T0 + 10, &kid), CS_OK);
	/* The provider, not the person, left write out (flow D narrowing): the
	 * request records it, and it holds nobody back. */
	raw_exec("UPDATE consent_requests SET narrowed = 'write'");
	ck_assert_uint_eq(blocks("alice", T0 + 11, &b), 0);
	ck_assert_int_eq(exch_o("alice", "write", T0 + 11, NULL), CONSENT_REQUIRED);
	free(rid);
	free(kid);
}
END_TEST

START_TEST(test_consent_allow_asking_after_denial)
{
	char *rid = NULL, *rid2 = NULL;
	struct consent_block *b = NULL;
	bool lifted = true;
	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	/* Pending: holds nobody back. */
	ck_assert_int_eq(tu_allow_asking(sc, &cfg, rid, user_id("alice"), "user:alice", T0 + 1,
	    &lifted), CS_EINVAL);
	ck_assert_int_eq(decide(rid, "alice", false, NULL, 0, false, T0 + 10, NULL), CS_OK);
	ck_assert_int_eq(exch_o("alice", "read", T0 + 11, NULL), CONSENT_DENIED);
	ck_assert_uint_eq(blocks("alice", T0 + 11, &b), 1);
	ck_assert(!b[0].declined);
	ck_assert_str_eq(b[0].request_id, rid);
	ck_set(&b[0].scopes, "read");
	ck_assert_int_eq(b[0].until, T0 + 10 + 3600);
	consent_block_list_free(b, 1);
	/* Someone else, or no such request: refused, nothing written. */
	ck_assert_int_eq(exch_o("bob", "read", T0, NULL), CONSENT_REQUIRED);
	ck_assert_int_eq(tu_allow_asking(sc, &cfg, rid, user_id("bob"), "user:bob", T0 + 12,
	    &lifted), CS_EPERM);
	ck_assert_int_eq(tu_allow_asking(sc, &cfg, "nosuchrequestAAAAAAAAA", user_id("alice"),
	    "user:alice", T0 + 12, &lifted), CS_ENOENT);
	ck_assert_int_eq(exch_o("alice", "read", T0 + 12, NULL), CONSENT_DENIED);
	ck_assert_int_eq(audits("consent.cooldown_lifted"), 0);
	/* The person: lifted, audited once; again is fine and writes nothing. */
	ck_assert_int_eq(tu_allow_asking(sc, &cfg, rid, user_id("alice"), "user:alice", T0 + 13,
	    &lifted), CS_OK);
	ck_assert(lifted);
	ck_assert_int_eq(tu_allow_asking(sc, &cfg, rid, user_id("alice"), "user:alice", T0 + 14,
	    &lifted), CS_OK);
	ck_assert(!lifted);
	ck_assert_int_eq(audits("consent.cooldown_lifted"), 1);
	char *det = q_text("SELECT actor || '|' || request_id || '|' || scopes || '|' || detail "
	    "FROM audit WHERE action = 'consent.cooldown_lifted'", NULL);
	char want[200];
	snprintf(want, sizeof want, "user:alice|%s|read|denied", rid);
	ck_assert_str_eq(det, want);
	free(det);
	ck_assert_int_eq(q_int("SELECT cooldown_lifted_at FROM consent_requests WHERE id = ?1", rid),
	    T0 + 13);
	ck_assert_uint_eq(blocks("alice", T0 + 14, &b), 0);
	/* The next call asks the person again; a new denial holds again. */
	ck_assert_int_eq(exch_o("alice", "read", T0 + 15, &rid2), CONSENT_REQUIRED);
	ck_assert_str_ne(rid2, rid);
	ck_assert_int_eq(decide(rid2, "alice", false, NULL, 0, false, T0 + 20, NULL), CS_OK);
	ck_assert_int_eq(exch_o("alice", "read", T0 + 21, NULL), CONSENT_DENIED);
	ck_assert_uint_eq(blocks("alice", T0 + 21, &b), 1);
	ck_assert_str_eq(b[0].request_id, rid2);
	consent_block_list_free(b, 1);
	/* After the cooldown: nothing to lift, CS_OK, nothing written. */
	ck_assert_int_eq(tu_allow_asking(sc, &cfg, rid2, user_id("alice"), "user:alice",
	    T0 + 20 + 3600, &lifted), CS_OK);
	ck_assert(!lifted);
	ck_assert_int_eq(audits("consent.cooldown_lifted"), 1);
	free(rid);
	free(rid2);
}
END_TEST

START_TEST(test_consent_allow_asking_after_decline)
{
	char *rid = NULL, *kid = NULL, *rid2 = NULL;
	struct consent_block *b = NULL;
	bool lifted = false;
	ck_assert_int_eq(exch_o("alice", "read write", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 3600, false, T0 + 10, &kid), CS_OK);
	ck_assert_int_eq(exch_o("alice", "write", T0 + 11, NULL), CONSENT_DENIED);
	ck_assert_int_eq(tu_allow_asking(sc, &cfg, rid, user_id("alice"), "user:alice", T0 + 12,
	    &lifted), CS_OK);
	ck_assert(lifted);
	char *det = q_text("SELECT consent_id || '|' || scopes || '|' || detail FROM audit "
	    "WHERE action = 'consent.cooldown_lifted'", NULL);
	char want[200];
	snprintf(want, sizeof want, "%s|write|declined", kid);
	ck_assert_str_eq(det, want);
	free(det);
	ck_assert_uint_eq(blocks("alice", T0 + 12, &b), 0);
	ck_assert_int_eq(exch_o("alice", "write", T0 + 13, &rid2), CONSENT_REQUIRED);
	free(rid);
	free(rid2);
	free(kid);
}
END_TEST

START_TEST(test_consent_revoked_ends_decline_block)
{
	char *rid = NULL, *kid = NULL;
	struct consent_block *b = NULL;
	bool lifted = true;
	ck_assert_int_eq(exch_o("alice", "read write", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 3600, false, T0 + 10, &kid), CS_OK);
	ck_assert_int_eq(tu_revoke(sc, kid, user_id("alice"), "user:alice", "x", T0 + 11, false),
	    CS_OK);
	/* The consent ended: its declines hold nothing back any more. */
	ck_assert_uint_eq(blocks("alice", T0 + 12, &b), 0);
	ck_assert_int_eq(tu_allow_asking(sc, &cfg, rid, user_id("alice"), "user:alice", T0 + 12,
	    &lifted), CS_OK);
	ck_assert(!lifted);
	ck_assert_int_eq(exch_o("alice", "write", T0 + 12, NULL), CONSENT_REQUIRED);
	free(rid);
	free(kid);
}
END_TEST

START_TEST(test_consent_touch_and_revoker)
{
	char *rid = NULL, *kid = NULL, *rid2 = NULL, *kid2 = NULL;
	struct consent k;
	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid, "alice", true, "read", 3600, false, T0 + 1, &kid), CS_OK);
	ck_assert_int_eq(consent_get(sc, kid, T0 + 2, &k), CS_OK);
	ck_assert_int_eq(k.last_used_at, 0);
	ck_assert_int_eq(consent_revoker(&k), CONSENT_BY_NOBODY);
	ck_assert_str_eq(k.request_id, rid);
	consent_clear(&k);
	/* A use moves last_used_at forward, never back. */
	ck_assert_int_eq(consent_touch(sc, kid, T0 + 5), CS_OK);
	ck_assert_int_eq(consent_touch(sc, kid, T0 + 3), CS_OK);
	ck_assert_int_eq(consent_touch(sc, "nosuchconsentAAAAAAAAA", T0 + 3), CS_OK);
	ck_assert_int_eq(consent_get(sc, kid, T0 + 6, &k), CS_OK);
	ck_assert_int_eq(k.last_used_at, T0 + 5);
	consent_clear(&k);
	/* Replaced by a newer consent of the person. */
	ck_assert_int_eq(exch_o("alice", "write", T0 + 7, &rid2), CONSENT_REQUIRED);
	ck_assert_int_eq(decide(rid2, "alice", true, "read write", 3600, false, T0 + 8, &kid2), CS_OK);
	ck_assert_int_eq(consent_get(sc, kid, T0 + 9, &k), CS_OK);
	ck_assert_int_eq(consent_revoker(&k), CONSENT_BY_REPLACEMENT);
	ck_assert_str_eq(k.revoke_reason, "replaced");
	consent_clear(&k);
	/* The same fields as the callers write them. */
	struct consent f;
	memset(&f, 0, sizeof f);
	f.revoked_at = T0;
	f.subject = "alice";
	f.revoked_by = "user:alice";
	f.revoke_reason = "revoked by the person on /me";
	ck_assert_int_eq(consent_revoker(&f), CONSENT_BY_PERSON);
	f.revoke_reason = "replaced";
	ck_assert_int_eq(consent_revoker(&f), CONSENT_BY_REPLACEMENT);
	f.revoked_by = "admin:ops";               /* an administrator typing "replaced" */
	ck_assert_int_eq(consent_revoker(&f), CONSENT_BY_ADMIN);
	f.revoke_reason = "left the company";
	f.revoked_by = "user:alicex";
	ck_assert_int_eq(consent_revoker(&f), CONSENT_BY_OTHER);
	f.revoked_by = "admin:ops";
	ck_assert_int_eq(consent_revoker(&f), CONSENT_BY_ADMIN);
	f.revoked_by = "cli";
	ck_assert_int_eq(consent_revoker(&f), CONSENT_BY_ADMIN);
	f.revoked_by = "system";
	ck_assert_int_eq(consent_revoker(&f), CONSENT_BY_OTHER);
	f.revoked_at = 0;
	ck_assert_int_eq(consent_revoker(&f), CONSENT_BY_NOBODY);
	free(rid);
	free(kid);
	free(rid2);
	free(kid2);
}
END_TEST

/* The outcomes themselves, as the pages map them (tu_consent.h turns them
 * into the codes the other tests check). */
START_TEST(test_consent_outcomes_not_errors)
{
	char *rid = NULL;
	struct consent_decision d;
	struct consent_decided got = { CONSENT_DECIDED, NULL };
	enum consent_revoke_outcome ro = CONSENT_REVOKED;
	enum consent_lift_outcome lo = CONSENT_LIFTED;
	enum consent_decide_outcome co = CONSENT_DECIDED;
	struct consent_request r;

	ck_assert_int_eq(exch_o("alice", "read", T0, &rid), CONSENT_REQUIRED);
	const struct consent_actor al = { .user_id = user_id("alice"), .actor = "user:alice",
	    .now = T0 + 1 }, bob = { .user_id = user_id("alice") + 1000, .actor = "user:bob",
	    .now = T0 + 1 };
	memset(&d, 0, sizeof d);
	d.approve = true;
	d.selected = set("read");
	d.duration = 60;
	/* A page of another version: nothing written, an outcome, not an error. */
	ck_assert_int_eq(consent_decide(sc, &cfg, rid, &al, &d, &got), CS_OK);
	ck_assert_int_eq(got.outcome, CONSENT_DECIDE_CHANGED);
	ck_assert_ptr_null(got.consent_id);
	ck_assert_int_eq(consent_decide(sc, &cfg, "nosuchrequestAAAAAAAAA", &al, &d, &got), CS_OK);
	ck_assert_int_eq(got.outcome, CONSENT_DECIDE_UNKNOWN);
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(consent_decide(sc, &cfg, rid, &bob, &d, &got), CS_OK);
	ck_assert_int_eq(got.outcome, CONSENT_DECIDE_NOT_YOURS);
	memset(&r, 0, sizeof r);
	ck_assert_int_eq(consent_request_get(sc, rid, &r), CS_OK);
	ck_assert_int_eq(consent_decision_check(&cfg, &r, al.user_id, &d, T0 + 1, &co), CS_OK);
	ck_assert_int_eq(co, CONSENT_DECIDED);
	d.duration = 3601;
	ck_assert_int_eq(consent_decision_check(&cfg, &r, al.user_id, &d, T0 + 1, &co), CS_OK);
	ck_assert_int_eq(co, CONSENT_DECIDE_INVALID);
	ck_assert_int_eq(consent_decide(sc, &cfg, rid, &al, &d, &got), CS_OK);
	ck_assert_int_eq(got.outcome, CONSENT_DECIDE_INVALID);
	d.duration = 60;
	ck_assert_int_eq(consent_decide(sc, &cfg, rid, &al, &d, &got), CS_OK);
	ck_assert_int_eq(got.outcome, CONSENT_DECIDED);
	ck_assert(b64url_id(got.consent_id));
	char *kid = got.consent_id;
	got.consent_id = NULL;
	ck_assert_int_eq(consent_decide(sc, &cfg, rid, &al, &d, &got), CS_OK);
	ck_assert_int_eq(got.outcome, CONSENT_DECIDE_CLOSED);
	ck_assert_int_eq(consent_allow_asking(sc, &cfg, rid, &al, &lo), CS_OK);
	ck_assert_int_eq(lo, CONSENT_LIFT_NOTHING);          /* nothing was declined */
	ck_assert_int_eq(consent_revoke(sc, kid, &bob, "x", &ro), CS_OK);
	ck_assert_int_eq(ro, CONSENT_REVOKE_NOT_YOURS);
	ck_assert_int_eq(consent_revoke(sc, kid, &al, "x", &ro), CS_OK);
	ck_assert_int_eq(ro, CONSENT_REVOKED);
	ck_assert_int_eq(consent_revoke(sc, kid, &al, "x", &ro), CS_OK);
	ck_assert_int_eq(ro, CONSENT_REVOKE_ALREADY);
	ck_assert_int_eq(consent_revoke(sc, "nosuchconsentAAAAAAAAA", &al, "x", &ro), CS_OK);
	ck_assert_int_eq(ro, CONSENT_REVOKE_UNKNOWN);
	ck_assert_int_eq(audits("consent.revoked"), 1);
	consent_request_clear(&r);
	consent_decided_clear(&got);
	scope_set_clear(&d.selected);
	free(kid);
	free(rid);
}
END_TEST

/* RFC 6749 section 5.2: error_description is %x20-21 / %x23-5B / %x5D-7E. */
static void ck_rfc6749_text(const char *d)
{
	ck_assert_uint_gt(strlen(d), 10);
	for (const unsigned char *p = (const unsigned char *)d; *p; p++)
		ck_assert_msg(*p >= 0x20 && *p <= 0x7e && *p != '"' && *p != '\\',
		    "byte 0x%02x in \"%s\"", *p, d);
}

static void describe(struct consent_answer *a, char *out)
{
	ck_assert_int_eq(consent_answer_description(a, out, 300), CS_OK);
	ck_rfc6749_text(out);
}

START_TEST(test_consent_answer_descriptions)
{
	struct consent_answer a;
	char d[300];
	memset(&a, 0, sizeof a);
	a.interval = 5;
	a.outcome = CONSENT_REQUIRED;
	describe(&a, d);
	ck_assert_str_eq(d, "the person has not consented: send them to consent_uri, then poll every 5 s");
	a.merged = true;
	describe(&a, d);
	ck_assert_ptr_nonnull(strstr(d, "the request was updated"));
	ck_assert_ptr_nonnull(strstr(d, "new scopes"));
	a.merged = false;
	a.reconnect = true;
	describe(&a, d);
	ck_assert_ptr_nonnull(strstr(d, "provider connection must be made again"));
	a.reconnect = false;

	a.outcome = CONSENT_PENDING;
	describe(&a, d);
	ck_assert_str_eq(d, "the person has not decided yet; poll again in 5 s");
	a.reason_kept = true;
	describe(&a, d);
	ck_assert_ptr_nonnull(strstr(d, "the person has not decided yet; poll again in 5 s; the pending "
	    "request keeps the reason the person sees"));
	a.outcome = CONSENT_SLOW_DOWN;
	a.interval = 10;
	describe(&a, d);
	ck_assert_ptr_nonnull(strstr(d, "polled faster than the interval: wait 10 s between calls"));
	ck_assert_ptr_nonnull(strstr(d, "keeps the reason the person sees"));
	a.reason_kept = false;
	describe(&a, d);
	ck_assert_ptr_null(strstr(d, "reason"));

	a.outcome = CONSENT_DENIED;
	a.denied_until = 1700000000;
	describe(&a, d);
	ck_assert_str_eq(d, "the person denied this request; a new request can be made from "
	    "2023-11-14T22:13:20Z");
	a.outcome = CONSENT_EXPIRED;
	describe(&a, d);
	ck_assert_ptr_nonnull(strstr(d, "expired"));
	a.outcome = CONSENT_TOO_MANY;
	a.retry_after = 42;
	describe(&a, d);
	ck_assert_ptr_nonnull(strstr(d, "retry after 42 s"));
	/* A short buffer is never overrun, and never holds a cut text. */
	char small[8];
	a.outcome = CONSENT_PENDING;
	ck_assert_int_eq(consent_answer_description(&a, small, sizeof small), CS_ETOOBIG);
	ck_assert_uint_eq(strlen(small), 0);
}
END_TEST

static Suite *consent_suite(void)
{
	Suite *s = suite_create("consent");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_consent_exchange_new_pending_slow_down);
	tcase_add_test(tc, test_consent_exchange_new_reason_kept);
	tcase_add_test(tc, test_consent_exchange_denied_until_and_expiry_note);
	tcase_add_test(tc, test_consent_exchange_keeps_user_profile);
	tcase_add_test(tc, test_consent_exchange_merge_same_request);
	tcase_add_test(tc, test_consent_approve_partial_then_grant);
	tcase_add_test(tc, test_consent_exchange_covered_without_transaction);
	tcase_add_test(tc, test_consent_deny_cooldown);
	tcase_add_test(tc, test_consent_exchange_expired_then_new);
	tcase_add_test(tc, test_consent_exchange_too_many);
	tcase_add_test(tc, test_consent_exchange_merge_too_many);
	tcase_add_test(tc, test_consent_decide_other_user_eperm);
	tcase_add_test(tc, test_consent_decide_twice_einval);
	tcase_add_test(tc, test_consent_decide_changed_request_estale);
	tcase_add_test(tc, test_consent_decide_changed_reason_estale);
	tcase_add_test(tc, test_consent_decide_deny_any_version);
	tcase_add_test(tc, test_consent_decide_bad_choices);
	tcase_add_test(tc, test_consent_offline_only_for_offline_agent);
	tcase_add_test(tc, test_consent_approve_replaces_old);
	tcase_add_test(tc, test_consent_revoke_cases);
	tcase_add_test(tc, test_consent_revoke_in_callers_tx);
	tcase_add_test(tc, test_consent_list_and_pending);
	tcase_add_test(tc, test_consent_audit_every_step);
	tcase_add_test(tc, test_consent_failure_mid_transaction_rolls_back);
	tcase_add_test(tc, test_consent_declined_scope_cooldown);
	tcase_add_test(tc, test_consent_declined_new_scope_still_asks);
	tcase_add_test(tc, test_consent_declined_by_provider_not_blocked);
	tcase_add_test(tc, test_consent_allow_asking_after_denial);
	tcase_add_test(tc, test_consent_allow_asking_after_decline);
	tcase_add_test(tc, test_consent_revoked_ends_decline_block);
	tcase_add_test(tc, test_consent_touch_and_revoker);
	tcase_add_test(tc, test_consent_outcomes_not_errors);
	suite_add_tcase(s, tc);
	tc = tcase_create("description");
	tcase_add_test(tc, test_consent_answer_descriptions);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(consent_suite());
}
