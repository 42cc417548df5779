/* tu_events.h -- the events outbox's unit-test fixture, shared by
 * test_events.c (revocation events) and test_health.c (connection-health
 * events): a real SQLite file built from migrations/, a hand-filled
 * configuration and signing keys, and the helpers that read the outbox.
 * Include it once, from a test program's only file, after tu_consent.h. */
#ifndef CS_TU_EVENTS_H
#define CS_TU_EVENTS_H
#include <string.h>
#include <sqlite3.h>
#include "audit.h"
#include "buf.h"
#include "consent.h"
#include "events.h"
#include "jwt.h"
#include "store.h"
#include "testutil.h"
#include "tu_consent.h"

#define ISS "https://idp.test"
#define GW "gateway:agent-gateway"
#define PUBLIC "https://consent.test"
#define T0 1700000000
#define TTL 300

static char *dir;
static struct store *st;
static struct store_conn *sc;
static sqlite3 *raw;
static struct config cfg;
static struct master_key mk;
static struct keyring *kr;

static char *allow_coder[] = { "notes:read", "notes:write", NULL };
static struct config_agent agents[1];
static struct config_resource resources[1];
static struct config_scope scopes[2];

static void setup(void)
{
	audit_set_key((const unsigned char[32]){ 0 }, "test");
	dir = tu_tmpdir();
	char *db = tu_path(dir, "t.db");
	ck_assert_int_eq(store_open(db, &st), CS_OK);
	sc = store_conn(st);
	ck_assert_ptr_nonnull(sc);
	ck_assert_int_eq(sqlite3_open(db, &raw), SQLITE_OK);
	sqlite3_busy_timeout(raw, 5000);
	free(db);
	memset(&mk, 0, sizeof mk);
	memset(mk.bytes, 7, sizeof mk.bytes);
	memcpy(mk.kid, "00112233aabbccdd", MASTER_KID_LEN + 1);
	ck_assert_int_eq(keyring_load(sc, &mk, T0, TTL, &kr), CS_OK);

	memset(&cfg, 0, sizeof cfg);
	memset(agents, 0, sizeof agents);
	memset(resources, 0, sizeof resources);
	memset(scopes, 0, sizeof scopes);
	agents[0].id = "coder";
	agents[0].name = "Coding assistant";
	agents[0].allow = allow_coder;
	agents[0].nallow = 2;
	resources[0].id = "notes";
	resources[0].name = "Team notes";
	resources[0].uri = "urn:consentd:resource:notes";
	resources[0].max_consent = 3600;
	scopes[0].resource = "notes";
	scopes[0].name = "read";
	scopes[1].resource = "notes";
	scopes[1].name = "write";
	cfg.agents = agents;
	cfg.nagents = 1;
	cfg.resources = resources;
	cfg.nresources = 1;
	cfg.scopes = scopes;
	cfg.nscopes = 2;
	cfg.public_url = PUBLIC;
	cfg.gateway_id = "agent-gateway";
	cfg.consent_request_ttl = 600;
	cfg.consent_interval = 5;
	cfg.consent_deny_cooldown = 3600;
	cfg.consent_max_pending_per_user = 5;
}

static void teardown(void)
{
	keyring_free(kr);
	sqlite3_close(raw);
	store_close(st);
	tu_rmdir(dir);
}

/* --- helpers ----------------------------------------------------------- */

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

static int64_t user_id(const char *sub)
{
	return q_int("SELECT id FROM users WHERE subject = ?1", sub);
}

/* A consent of sub for coder on notes with scopes, approved at now. */
static char *approve(const char *sub, const char *scopes_s, int64_t now)
{
	struct scope_set req = { .n = 0 };
	struct consent_answer a;
	struct consent_decision d;
	char *kid = NULL;
	ck_assert_int_eq(scope_set_parse(scopes_s, &req), CS_OK);
	memset(&a, 0, sizeof a);
	ck_assert_int_eq(tu_exchange(sc, &cfg, ISS, sub, "coder", "notes", &req, NULL, GW,
	    now, &a), CS_OK);
	ck_assert_int_eq(a.outcome, CONSENT_REQUIRED);
	memset(&d, 0, sizeof d);
	d.approve = true;
	d.selected = req;
	d.duration = 3600;
	tu_decision_version(sc, a.request_id, &d);
	ck_assert_int_eq(tu_decide(sc, &cfg, a.request_id, user_id(sub), &d, "user:x",
	    now + 1, &kid), CS_OK);
	consent_answer_clear(&a);
	scope_set_clear(&req);
	ck_assert_ptr_nonnull(kid);
	return kid;

#endif
