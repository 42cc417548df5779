/* test_admin.c -- the admin domain against a real SQLite file built from
 * migrations/: filters that treat SQL metacharacters and LIKE wildcards as
 * plain text, keyset cursors, bulk revocation in batches (cascade, idempotent),
 * one consent's history, and admin tokens (hashed, revocable, audited); a
 * person found by subject, email or name; the audit log newest first, in pages
 * marked by entry number (the admin pages). */
#include <string.h>
#include <sqlite3.h>
#include <jansson.h>
#include "admin.h"
#include "audit.h"
#include "buf.h"
#include "store.h"
#include "testutil.h"

#define ISS "https://idp.test"
#define T0 1000000

static char *dir;
static struct store *st;
static struct store_conn *sc;
static sqlite3 *raw;

static void setup(void)
{
	dir = tu_tmpdir();
	char *db = tu_path(dir, "t.db");
	audit_set_key((const unsigned char[32]){ 0 }, "test");
	ck_assert_int_eq(store_open(db, &st), CS_OK);
	sc = store_conn(st);
	ck_assert_ptr_nonnull(sc);
	ck_assert_int_eq(sqlite3_open(db, &raw), SQLITE_OK);
	sqlite3_busy_timeout(raw, 5000);
	free(db);
}

static void teardown(void)
{
	sqlite3_close(raw);
	store_close(st);
	audit_clear_key();
	tu_rmdir(dir);
}

static void exec(const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(raw, sql, NULL, NULL, &msg);
	ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : "?");
}

static int64_t count(const char *sql)
{
	sqlite3_stmt *s;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, sql, -1, &s, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
	int64_t n = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return n;
}

/* A user (issuer ISS) and returns its row id. */
static int64_t user(const char *subject)
{
	sqlite3_stmt *s;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "INSERT INTO users (issuer, subject, created_at, "
	    "last_login_at) VALUES (?1, ?2, 0, 0)", -1, &s, NULL), SQLITE_OK);
	sqlite3_bind_text(s, 1, ISS, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, subject, -1, SQLITE_STATIC);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
	return sqlite3_last_insert_rowid(raw);
}

/* A consent row with one grant and one refresh token. */
static void consent(const char *id, int64_t uid, const char *agent, const char *resource,
    int64_t created, int64_t expires, int64_t revoked)
{
	sqlite3_stmt *s;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "INSERT INTO consents (id, user_id, agent, resource, "
	    "granted, declined, created_at, expires_at, revoked_at, request_id) "
	    "VALUES (?1, ?2, ?3, ?4, 'read write', '', ?5, ?6, ?7, 'req-' || ?1)", -1, &s, NULL),
	    SQLITE_OK);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, uid);
	sqlite3_bind_text(s, 3, agent, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 4, resource, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 5, created);
	sqlite3_bind_int64(s, 6, expires);
	sqlite3_bind_int64(s, 7, revoked);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "INSERT INTO grants (jti, consent_id, issued_at, "
	    "expires_at) VALUES ('jti-' || ?1, ?1, ?2, ?2 + 300);"
	    , -1, &s, NULL), SQLITE_OK);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, T0);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "INSERT INTO refresh_tokens (hash, family, consent_id, "
	    "issued_at) VALUES (randomblob(32), 'fam-' || ?1, ?1, ?2)", -1, &s, NULL), SQLITE_OK);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, T0);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
}

static size_t list_n(const struct admin_consent_filter *f, json_t **res)
{
	json_t *r = NULL;
	ck_assert_int_eq(admin_consents_list(sc, f, NULL, ADMIN_LIST_MAX, T0, &r), CS_OK);
	size_t n = json_array_size(json_object_get(r, "consents"));
	if (res)
		*res = r;
	else
		json_decref(r);
	return n;
}

START_TEST(test_admin_filters_metacharacters_literal)
{
	int64_t a = user("alice"), inj = user("' OR 1=1 --"), pct = user("a%"), und = user("a_"),
	    ab = user("ab");
	consent("c-alice", a, "coder", "notes", T0, T0 + 100, 0);
	consent("c-inj", inj, "coder", "notes", T0 + 1, T0 + 100, 0);
	consent("c-pct", pct, "coder", "notes", T0 + 2, T0 + 100, 0);
	consent("c-und", und, "coder", "notes", T0 + 3, T0 + 100, 0);
	consent("c-ab", ab, "coder", "notes", T0 + 4, T0 + 100, 0);
	consent("c-agent", a, "x' OR '1'='1", "<script>alert(1)</script>", T0 + 5, T0 + 100, 0);
	struct admin_consent_filter f = { .issuer = ISS };
	json_t *r;

	ck_assert_uint_eq(list_n(&f, NULL), 6);
	f.user = "' OR 1=1 --";
	ck_assert_uint_eq(list_n(&f, &r), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(r,
	    "consents"), 0), "id")), "c-inj");
	json_decref(r);
	f.user = "%";
	ck_assert_uint_eq(list_n(&f, NULL), 0);
	f.user = "a%";
	ck_assert_uint_eq(list_n(&f, NULL), 1);
	f.user = "a_";                        /* never matches "ab" */
	ck_assert_uint_eq(list_n(&f, &r), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(r,
	    "consents"), 0), "id")), "c-und");
	json_decref(r);
	f.user = "alice' --";
	ck_assert_uint_eq(list_n(&f, NULL), 0);
	f.user = NULL;
	f.agent = "%";
	ck_assert_uint_eq(list_n(&f, NULL), 0);
	f.agent = "x' OR '1'='1";
	ck_assert_uint_eq(list_n(&f, NULL), 1);
	f.agent = NULL;
	f.resource = "<script>alert(1)</script>";
	ck_assert_uint_eq(list_n(&f, &r), 1);
	/* The value comes back as data, unchanged: escaping is the renderer's job. */
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(r,
	    "consents"), 0), "resource")), "<script>alert(1)</script>");
	json_decref(r);
	/* Another issuer's person of the same subject is not this one. */
	f.resource = NULL;
	f.issuer = "https://other.test";
	f.user = "alice";
	ck_assert_uint_eq(list_n(&f, NULL), 0);
	/* Tables are intact. */
	ck_assert_int_eq(count("SELECT count(*) FROM consents"), 6);
	/* Audit filter with metacharacters. */
	struct admin_audit_filter af = { .action = "' OR 1=1 --" };
	ck_assert_int_eq(admin_audit_query(sc, &af, NULL, 10, &r), CS_OK);
	ck_assert_uint_eq(json_array_size(json_object_get(r, "entries")), 0);
	json_decref(r);
}
END_TEST

START_TEST(test_admin_states)
{
	int64_t a = user("alice");
	consent("live", a, "coder", "notes", T0, T0 + 100, 0);
	consent("expired", a, "coder", "wiki", T0, T0 - 1, 0);
	consent("revoked", a, "butler", "notes", T0, T0 + 100, T0 - 5);
	consent("reconnect", a, "butler", "wiki", T0, T0 + 100, 0);
	exec("UPDATE consents SET reconnect_required = 1 WHERE id = 'reconnect'");
	const char *states[] = { "live", "expired", "revoked", "reconnect_required" };
	const char *ids[] = { "live", "expired", "revoked", "reconnect" };
	for (int i = 0; i < 4; i++) {
		struct admin_consent_filter f = { .state = states[i] };
		json_t *r;
		ck_assert_uint_eq(list_n(&f, &r), 1);
		json_t *k = json_array_get(json_object_get(r, "consents"), 0);
		ck_assert_str_eq(json_string_value(json_object_get(k, "id")), ids[i]);
		ck_assert_str_eq(json_string_value(json_object_get(k, "state")), states[i]);
		ck_assert(json_is_false(json_object_get(k, "provider_connection")));
		json_decref(r);
	}
	struct admin_consent_filter bad = { .state = "live' OR 1=1" };
	json_t *r = NULL;
	ck_assert_int_eq(admin_consents_list(sc, &bad, NULL, 10, T0, &r), CS_EINVAL);
	ck_assert_int_eq(admin_consents_list(sc, NULL, NULL, 0, T0, &r), CS_EINVAL);
	ck_assert_int_eq(admin_consents_list(sc, NULL, NULL, ADMIN_LIST_MAX + 1, T0, &r), CS_EINVAL);
}
END_TEST

START_TEST(test_admin_cursor_pagination)
{
	int64_t a = user("alice");
	char id[16];
	/* Seven consents, several sharing a created_at: ties are broken by id. */
	for (int i = 0; i < 7; i++) {
		ck_assert_int_eq(str_fmt(id, sizeof id, "k%d", i), CS_OK);
		consent(id, a, "coder", id, T0 + i / 3, T0 + 100, 0);
	}
	json_t *seen = json_object();
	char *cursor = NULL;
	int pages = 0;
	for (;;) {
		json_t *r = NULL, *k;
		size_t i;
		ck_assert_int_eq(admin_consents_list(sc, NULL, cursor, 3, T0, &r), CS_OK);
		pages++;
		json_array_foreach(json_object_get(r, "consents"), i, k) {
			const char *kid = json_string_value(json_object_get(k, "id"));
			ck_assert_ptr_null(json_object_get(seen, kid));
			json_object_set_new(seen, kid, json_true());
		}
		free(cursor);
		cursor = NULL;
		json_t *next = json_object_get(r, "next_cursor");
		if (json_is_string(next))
			cursor = strdup(json_string_value(next));
		json_decref(r);
		if (cursor == NULL)
			break;
		ck_assert_int_lt(pages, 10);
	}
	ck_assert_int_eq(pages, 3);
	ck_assert_uint_eq(json_object_size(seen), 7);
	json_decref(seen);
	/* Malformed cursors are refused, never interpreted. */
	const char *bad[] = { "x", "1", ".k1", "1.", "1.k'1", "1.%", "-1.k1", "1e3.k1", NULL };
	for (int i = 0; bad[i]; i++) {
		json_t *r = NULL;
		ck_assert_msg(admin_consents_list(sc, NULL, bad[i], 3, T0, &r) == CS_EINVAL, "%s", bad[i]);
	}
	/* The audit log pages the same way. */
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(admin_audit_note(sc, "cli", "admin.cli", "test", T0 + i), CS_OK);
	json_t *r = NULL;
	ck_assert_int_eq(admin_audit_query(sc, NULL, NULL, 2, &r), CS_OK);
	ck_assert_str_eq(json_string_value(json_object_get(r, "next_cursor")), "2");
	json_decref(r);
	/* A short page still says where to resume (an exporter tailing the
	 * log asks again later); an empty one says null, the cursor holds. */
	ck_assert_int_eq(admin_audit_query(sc, NULL, "4", 2, &r), CS_OK);
	ck_assert_uint_eq(json_array_size(json_object_get(r, "entries")), 1);
	ck_assert_str_eq(json_string_value(json_object_get(r, "next_cursor")), "5");
	json_decref(r);
	ck_assert_int_eq(admin_audit_query(sc, NULL, "5", 2, &r), CS_OK);
	ck_assert_uint_eq(json_array_size(json_object_get(r, "entries")), 0);
	ck_assert(json_is_null(json_object_get(r, "next_cursor")));
	json_decref(r);
	struct admin_audit_filter af = { .since = T0 + 3 };
	ck_assert_int_eq(admin_audit_query(sc, &af, NULL, 10, &r), CS_OK);
	ck_assert_uint_eq(json_array_size(json_object_get(r, "entries")), 2);
	json_decref(r);
	ck_assert_int_eq(admin_audit_query(sc, NULL, "1 OR 1=1", 2, &r), CS_EINVAL);
}
END_TEST

/* The seqs of a page of admin_audit_recent, newest first, as "5 4 3". */
static void recent(const struct admin_audit_filter *f, int64_t before, int64_t after, int64_t limit,
    const char *want, int64_t older, int64_t newer)
{
	json_t *r = NULL, *e;
	size_t i;
	char got[256] = "";
	size_t n = 0;
	ck_assert_int_eq(admin_audit_recent(sc, f, before, after, limit, &r), CS_OK);
	json_array_foreach(json_object_get(r, "entries"), i, e) {
		ck_assert_int_eq(str_fmt(got + n, sizeof got - n, "%s%lld", i ? " " : "",
		    (long long)json_integer_value(json_object_get(e, "seq"))), CS_OK);
		n = strlen(got);
	}
	ck_assert_msg(strcmp(got, want) == 0, "before %lld after %lld: got \"%s\", want \"%s\"",
	    (long long)before, (long long)after, got, want);
	json_t *o = json_object_get(r, "older"), *w = json_object_get(r, "newer");
	ck_assert_int_eq(older ? json_integer_value(o) : 0, older);
	ck_assert(older ? json_is_integer(o) : json_is_null(o));
	ck_assert_int_eq(newer ? json_integer_value(w) : 0, newer);
	ck_assert(newer ? json_is_integer(w) : json_is_null(w));
	json_decref(r);
}

START_TEST(test_admin_audit_recent_pages)
{
	/* Entries 1..7; 2, 4 and 6 are admin.page.refused. */
	for (int i = 1; i <= 7; i++)
		ck_assert_int_eq(admin_audit_note(sc, "cli", i % 2 ? "admin.cli" : "admin.page.refused",
		    "test", T0 + i), CS_OK);
	/* Newest first; Next (older) from the last shown, Previous (newer) from the first. */
	recent(NULL, 0, 0, 3, "7 6 5", 5, 0);
	recent(NULL, 5, 0, 3, "4 3 2", 2, 4);
	recent(NULL, 2, 0, 3, "1", 0, 1);
	recent(NULL, 0, 4, 3, "7 6 5", 5, 0);        /* exactly the page before it */
	recent(NULL, 0, 1, 3, "4 3 2", 2, 4);
	recent(NULL, 0, 5, 3, "7 6 5", 5, 0);        /* fewer than a page newer: the newest page */
	/* New entries shift no page: the page older than 5 is still 4 3 2. */
	ck_assert_int_eq(admin_audit_note(sc, "cli", "admin.cli", "test", T0 + 8), CS_OK);
	recent(NULL, 5, 0, 3, "4 3 2", 2, 4);
	recent(NULL, 0, 4, 3, "7 6 5", 5, 7);        /* and the newer entry is one click away */
	recent(NULL, 0, 0, 3, "8 7 6", 6, 0);
	/* Filters go with the pages. */
	struct admin_audit_filter af = { .action = "admin.page.refused" };
	recent(&af, 0, 0, 2, "6 4", 4, 0);
	recent(&af, 4, 0, 2, "2", 0, 2);
	recent(&af, 0, 2, 2, "6 4", 4, 0);
	struct admin_audit_filter since = { .since = T0 + 6 };
	recent(&since, 0, 0, 10, "8 7 6", 0, 0);
	/* Past either end, and bad markers. */
	recent(NULL, 1, 0, 3, "", 0, 0);
	recent(NULL, 0, 8, 3, "8 7 6", 6, 0);
	json_t *r = NULL;
	ck_assert_int_eq(admin_audit_recent(sc, NULL, 3, 3, 3, &r), CS_EINVAL);
	ck_assert_int_eq(admin_audit_recent(sc, NULL, -1, 0, 3, &r), CS_EINVAL);
	ck_assert_int_eq(admin_audit_recent(sc, NULL, 0, -1, 3, &r), CS_EINVAL);
	ck_assert_int_eq(admin_audit_recent(sc, NULL, 0, 0, 0, &r), CS_EINVAL);
	ck_assert_int_eq(admin_audit_recent(sc, NULL, 0, 0, ADMIN_LIST_MAX + 1, &r), CS_EINVAL);
	ck_assert_ptr_null(r);
}
END_TEST

START_TEST(test_admin_person_by_email_or_name)
{
	int64_t a = user("alice"), b = user("bob"), x = user("alice@example.test");
	exec("UPDATE users SET name = 'Alice Example', email = 'Alice@Example.TEST' WHERE subject = 'alice'");
	exec("UPDATE users SET name = 'Bob', email = 'bob@example.test' WHERE subject = 'bob'");
	consent("ka", a, "coder", "notes", T0, T0 + 100, 0);
	consent("kb", b, "coder", "notes", T0, T0 + 100, 0);
	consent("kx", x, "coder", "notes", T0, T0 + 100, 0);
	struct admin_consent_filter f = { .issuer = ISS };
	f.person = "alice";
	ck_assert_uint_eq(list_n(&f, NULL), 1);
	f.person = "alice example";
	ck_assert_uint_eq(list_n(&f, NULL), 1);
	f.person = "BOB";
	ck_assert_uint_eq(list_n(&f, NULL), 1);
	/* A subject that is an email address, and a person whose email it is: both. */
	f.person = "alice@example.test";
	ck_assert_uint_eq(list_n(&f, NULL), 2);
	/* Whole values only, and no pattern characters. */
	const char *none[] = { "Alice", "example.test", "%", "_lice", "alice%", "' OR '1'='1", NULL };
	for (int i = 0; none[i]; i++) {
		f.person = none[i];
		ck_assert_msg(list_n(&f, NULL) == 0, "%s", none[i]);
	}
	/* At another IdP: nobody. */
	f.issuer = "https://other.test";
	f.person = "alice";
	ck_assert_uint_eq(list_n(&f, NULL), 0);
	/* The admin API's user filter stays the subject alone. */
	struct admin_consent_filter api = { .issuer = ISS, .user = "Alice Example" };
	ck_assert_uint_eq(list_n(&api, NULL), 0);
}
END_TEST

/* admin_bulk_revoke's outcome for this request; *n its count. */
static enum admin_revoke_outcome bulk(enum admin_bulk_by by, const char *value, const char *issuer,
    const char *actor, const char *reason, int64_t *n)
{
	enum admin_revoke_outcome o = ADMIN_REVOKE__MAX;
	ck_assert_int_eq(admin_bulk_revoke(sc, &(struct admin_bulk){ .by = by, .value = value,
	    .issuer = issuer, .actor = actor, .reason = reason }, T0, n, &o), CS_OK);
	return o;
}

START_TEST(test_admin_bulk_revoke_batches_idempotent)
{
	int64_t bob = user("bob"), alice = user("alice");
	char id[16];
	for (int i = 0; i < 250; i++) {
		ck_assert_int_eq(str_fmt(id, sizeof id, "b%03d", i), CS_OK);
		consent(id, bob, i % 2 ? "coder" : "butler", id, T0 + i, T0 + 1000, 0);
	}
	consent("b-expired", bob, "coder", "zzz", T0, T0 - 1, 0);
	consent("b-revoked", bob, "coder", "yyy", T0, T0 + 1000, T0 - 1);
	consent("alice1", alice, "coder", "notes", T0, T0 + 1000, 0);
	exec("INSERT INTO approvals (id, consent_id, user_id, agent, resource, action, parameters, "
	    "digest, status, created_at, expires_at, interval) SELECT 'ap-' || id, id, user_id, agent, "
	    "resource, 'act', '{}', 'd', 'pending', 0, 99999999, 5 FROM consents");
	int64_t n = -1;
	ck_assert_int_eq(bulk(ADMIN_BY_USER, "bob", ISS, "admin:t", "offboarded", &n), ADMIN_REVOKED);
	ck_assert_int_eq(n, 251);               /* 250 + the expired one; not the revoked one */
	ck_assert_int_eq(count("SELECT count(*) FROM consents c JOIN users u ON u.id = c.user_id "
	    "WHERE u.subject = 'bob' AND c.revoked_at = 0"), 0);
	ck_assert_int_eq(count("SELECT count(*) FROM grants g JOIN consents c ON c.id = g.consent_id "
	    "WHERE c.user_id = (SELECT id FROM users WHERE subject = 'bob') AND g.revoked_at = 0 "
	    "AND c.id != 'b-revoked'"), 0);
	ck_assert_int_eq(count("SELECT count(*) FROM refresh_tokens r JOIN consents c ON "
	    "c.id = r.consent_id WHERE c.user_id = (SELECT id FROM users WHERE subject = 'bob') "
	    "AND r.revoked_at = 0 AND c.id != 'b-revoked'"), 0);
	ck_assert_int_eq(count("SELECT count(*) FROM approvals WHERE status = 'pending' "
	    "AND consent_id LIKE 'b%' AND consent_id != 'b-revoked'"), 0);
	/* One audit entry per consent naming actor and reason, and one summary. */
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE action = 'consent.revoked' "
	    "AND actor = 'admin:t' AND detail = 'offboarded'"), 251);
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE action = 'admin.bulk_revoked' "
	    "AND detail LIKE 'by=user count=251 %'"), 1);
	ck_assert_int_eq(count("SELECT revoke_reason = 'offboarded' AND revoked_by = 'admin:t' "
	    "FROM consents WHERE id = 'b100'"), 1);
	/* Alice is untouched. */
	ck_assert_int_eq(count("SELECT revoked_at FROM consents WHERE id = 'alice1'"), 0);
	/* Again: nothing left to do. */
	ck_assert_int_eq(bulk(ADMIN_BY_USER, "bob", ISS, "admin:t", "again", &n), ADMIN_REVOKED);
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE action = 'consent.revoked'"), 251);
	/* By agent and resource, with metacharacters taken literally. */
	ck_assert_int_eq(bulk(ADMIN_BY_AGENT, "%", NULL, "cli", "r", &n), ADMIN_REVOKED);
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(bulk(ADMIN_BY_RESOURCE, "notes' OR 1=1 --", NULL, "cli", "r", &n),
	    ADMIN_REVOKED);
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(bulk(ADMIN_BY_RESOURCE, "notes", NULL, "cli", "r", &n), ADMIN_REVOKED);
	ck_assert_int_eq(n, 1);
	/* Bad input. */
	enum admin_revoke_outcome o = ADMIN_REVOKE__MAX;
	ck_assert_int_eq(bulk(ADMIN_BY_USER, "bob", ISS, "cli", "", &n), ADMIN_REVOKE_BAD_REASON);
	ck_assert_int_eq(admin_bulk_revoke(sc, &(struct admin_bulk){ .by = ADMIN_BY_USER, .value = "",
	    .issuer = ISS, .actor = "cli", .reason = "r" }, T0, &n, &o), CS_EINVAL);
}
END_TEST

START_TEST(test_admin_consent_history)
{
	int64_t a = user("alice");
	consent("h1", a, "coder", "notes", T0, T0 + 1000, 0);
	exec("INSERT INTO grants (jti, consent_id, issued_at, expires_at) VALUES "
	    "('j2', 'h1', 1000000, 1000300), ('j3', 'h1', 1000000, 999999)");
	exec("INSERT INTO consent_requests (id, user_id, agent, resource, scopes, reason, status, "
	    "created_at, expires_at, decided_at, interval, consent_id) VALUES ('req-h1', 1, 'coder', "
	    "'notes', 'read write', 'please', 'approved', 999000, 999600, 999100, 5, 'h1')");
	exec("INSERT INTO approvals (id, consent_id, user_id, agent, resource, action, parameters, "
	    "digest, status, created_at, expires_at, decided_at, interval) VALUES ('ap1', 'h1', 1, "
	    "'coder', 'notes', 'create', '{}', 'dg', 'approved', 999200, 999800, 999300, 5)");
	struct audit_entry e = { .ts = T0, .actor = "gateway:gw", .action = "vault.released",
		.consent_id = "h1", .detail = "action=create" };
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(audit_append(sc, &e), CS_OK);
	ck_assert_int_eq(store_commit(sc), CS_OK);

	json_t *r = NULL;
	ck_assert_int_eq(admin_consent_show(sc, "h1", T0, &r), CS_OK);
	json_t *h = json_object_get(r, "history");
	ck_assert_int_eq(json_integer_value(json_object_get(h, "grants_issued")), 3);
	ck_assert_int_eq(json_integer_value(json_object_get(h, "grants_live")), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(h, "refresh_tokens_issued")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(h, "decided_at")), 999100);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(h, "requested"), "reason")),
	    "please");
	ck_assert_uint_eq(json_array_size(json_object_get(h, "approvals")), 1);
	ck_assert_uint_eq(json_array_size(json_object_get(h, "releases")), 1);
	ck_assert(json_is_null(json_object_get(h, "revocation")));
	json_decref(r);

	enum admin_revoke_outcome revoked = ADMIN_REVOKE__MAX;
	ck_assert_int_eq(admin_consent_revoke(sc, "h1", "admin:t", "lost laptop", T0 + 1, &revoked),
	    CS_OK);
	ck_assert_int_eq(revoked, ADMIN_REVOKED);
	ck_assert_int_eq(admin_consent_revoke(sc, "h1", "admin:t", "again", T0 + 2, &revoked), CS_OK);
	ck_assert_int_eq(revoked, ADMIN_REVOKED_ALREADY);
	ck_assert_int_eq(admin_consent_show(sc, "h1", T0 + 3, &r), CS_OK);
	h = json_object_get(r, "history");
	json_t *rv = json_object_get(h, "revocation");
	ck_assert_str_eq(json_string_value(json_object_get(rv, "reason")), "lost laptop");
	ck_assert_str_eq(json_string_value(json_object_get(rv, "revoked_by")), "admin:t");
	ck_assert_int_eq(json_integer_value(json_object_get(h, "grants_live")), 0);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "consent"), "state")),
	    "revoked");
	/* The approved-unused approval was cancelled by the cascade. */
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(h,
	    "approvals"), 0), "status")), "cancelled");
	json_decref(r);
	ck_assert_int_eq(admin_consent_show(sc, "nope", T0, &r), CS_ENOENT);
	ck_assert_int_eq(admin_consent_show(sc, "' OR 1=1 --", T0, &r), CS_ENOENT);
	ck_assert_int_eq(admin_consent_revoke(sc, "nope", "cli", "r", T0, &revoked), CS_OK);
	ck_assert_int_eq(revoked, ADMIN_REVOKE_UNKNOWN);
	ck_assert_int_eq(admin_consent_revoke(sc, "h1", "cli", "", T0, &revoked), CS_OK);
	ck_assert_int_eq(revoked, ADMIN_REVOKE_BAD_REASON);
}
END_TEST

START_TEST(test_admin_tokens)
{
	char t[SESSION_TOKEN_LEN + 1], *name = NULL;
	enum admin_token_outcome o = ADMIN_TOKEN__MAX;
	ck_assert_int_eq(admin_token_create(sc, "ops-1", "cli", T0, t, &o), CS_OK);
	ck_assert_int_eq(o, ADMIN_TOKEN_DONE);
	ck_assert_uint_eq(strlen(t), SESSION_TOKEN_LEN);
	/* Stored hashed only: the token appears nowhere in the database. */
	sqlite3_stmt *s;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "SELECT count(*) FROM admin_tokens WHERE "
	    "CAST(hash AS TEXT) = ?1 OR name = ?1", -1, &s, NULL), SQLITE_OK);
	sqlite3_bind_text(s, 1, t, -1, SQLITE_STATIC);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
	ck_assert_int_eq(sqlite3_column_int(s, 0), 0);
	sqlite3_finalize(s);
	ck_assert_int_eq(count("SELECT length(hash) FROM admin_tokens"), 32);

	ck_assert_int_eq(admin_token_create(sc, "ops-1", "cli", T0, t, &o), CS_OK);
	ck_assert_int_eq(o, ADMIN_TOKEN_NAME_TAKEN);
	ck_assert_int_eq(admin_token_create(sc, "bad name", "cli", T0, t, &o), CS_OK);
	ck_assert_int_eq(o, ADMIN_TOKEN_BAD_NAME);
	ck_assert_int_eq(admin_token_create(sc, "", "cli", T0, t, &o), CS_OK);
	ck_assert_int_eq(o, ADMIN_TOKEN_BAD_NAME);
	ck_assert_int_eq(admin_token_create(sc, "x'--", "cli", T0, t, &o), CS_OK);
	ck_assert_int_eq(o, ADMIN_TOKEN_BAD_NAME);
	char t2[SESSION_TOKEN_LEN + 1];
	ck_assert_int_eq(admin_token_create(sc, "ops-2", "cli", T0, t2, &o), CS_OK);
	ck_assert_int_eq(o, ADMIN_TOKEN_DONE);

	ck_assert_int_eq(admin_token_check(sc, t, "GET /x", T0 + 5, &name), CS_OK);
	ck_assert_str_eq(name, "ops-1");
	free(name);
	name = NULL;
	ck_assert_int_eq(count("SELECT last_used_at FROM admin_tokens WHERE name = 'ops-1'"), T0 + 5);
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE action = 'admin.api' AND "
	    "actor = 'admin:ops-1'"), 1);
	ck_assert_int_eq(admin_token_check(sc, "nope", "GET /x", T0, &name), CS_EPERM);
	ck_assert_int_eq(admin_token_check(sc, "", "GET /x", T0, &name), CS_EPERM);
	ck_assert_int_eq(admin_token_check(sc, "a b", "GET /x", T0, &name), CS_EPERM);
	t[0] = t[0] == 'A' ? 'B' : 'A';
	ck_assert_int_eq(admin_token_check(sc, t, "GET /x", T0, &name), CS_EPERM);
	t[0] = t[0] == 'A' ? 'B' : 'A';   /* not necessarily the original: re-derive below */

	ck_assert_int_eq(admin_token_revoke(sc, "ops-2", "cli", T0, &o), CS_OK);
	ck_assert_int_eq(o, ADMIN_TOKEN_DONE);
	ck_assert_int_eq(admin_token_revoke(sc, "ops-2", "cli", T0, &o), CS_OK);
	ck_assert_int_eq(o, ADMIN_TOKEN_ALREADY_REVOKED);
	ck_assert_int_eq(admin_token_revoke(sc, "ghost", "cli", T0, &o), CS_OK);
	ck_assert_int_eq(o, ADMIN_TOKEN_UNKNOWN);
	ck_assert_int_eq(admin_token_check(sc, t2, "GET /x", T0, &name), CS_EPERM);
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE action = 'admin.api.refused' AND "
	    "actor = 'admin:ops-2'"), 1);
	/* No audit entry holds a token. */
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE instr(coalesce(detail, '') || "
	    "coalesce(actor, ''), 'ops-') > 0 AND length(detail) > 40"), 0);
	json_t *l = NULL;
	ck_assert_int_eq(admin_token_list(sc, &l), CS_OK);
	ck_assert_uint_eq(json_array_size(l), 2);
	ck_assert_ptr_null(json_object_get(json_array_get(l, 0), "hash"));
	json_decref(l);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("admin");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_admin_audit_recent_pages);
	tcase_add_test(tc, test_admin_person_by_email_or_name);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_admin_filters_metacharacters_literal);
	tcase_add_test(tc, test_admin_states);
	tcase_add_test(tc, test_admin_cursor_pagination);
	tcase_add_test(tc, test_admin_bulk_revoke_batches_idempotent);
	tcase_add_test(tc, test_admin_consent_history);
	tcase_add_test(tc, test_admin_tokens);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
