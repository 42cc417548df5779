/* test_store.c -- the store: migrations (fresh, repeated, too new), WAL, the
 * statement cache, the signing-key and user rows, and per-thread connections.
 * A database newer than the binary must never be opened for use.
 *
 * On both engines: with CONSENTD_TEST_DATABASE_URL set to a postgresql:// URL
 * (scripts/run-store-pg.sh starts a throw-away server and sets it) every test
 * runs on that database, emptied before each (its public schema made anew);
 * otherwise on a fresh SQLite file.  The tests of what only one engine has
 * are added for that engine alone, each saying why (store_suite). */
#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "buf.h"
#include "seal.h"
#include "consent.h"
#include "embed.h"
#include "metrics.h"
#include "testutil.h"
#include "tu_store.h"
#include "store.h"
#include "store_audit.h"
#include "store_consent.h"
#include "store_grant.h"
#include "store_keys.h"
#include "store_replay.h"
#include "store_user.h"
#include "../../server/store_priv.h"   /* the statement cache, tested from outside */

struct fixture {
	char *dir;
	char *db;                    /* the SQLite file, or the PostgreSQL URL */
};

/* The text of a test's own query in the engine's dialect. */
static const char *by_engine(const char *sqlite_sql, const char *pg_sql)
{
	return tu_pg_url != NULL ? pg_sql : sqlite_sql;
}

/* A fresh database, not opened (tu_store_fresh). */
static void fx_init(struct fixture *f)
{
	tu_store_fresh(&f->dir, &f->db);
}

/* store_open on the fixture's database (tu_store_open). */
static enum cs_err fx_open(const struct fixture *f, struct store **out)
{
	return tu_store_open(f->db, out);
}

static void fx_clear(struct fixture *f)
{
	free(f->db);
	tu_rmdir(f->dir);
}

/* Runs one SQL statement on a raw connection; returns the first column of the
 * first row as a malloc'd string (or NULL). */
static char *raw_query(const char *db, const char *sql)
{
	if (tu_pg_url != NULL && strcmp(db, tu_pg_url) == 0)
		return tu_pg_sql(db, sql, true);
	sqlite3 *h = NULL;
	sqlite3_stmt *st = NULL;
	char *res = NULL;
	ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
	/* The store's writer or checkpointer may hold a lock for a moment (a
	 * busy machine): wait for it rather than fail with SQLITE_BUSY. */
	ck_assert_int_eq(sqlite3_busy_timeout(h, 10000), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
	int rc = sqlite3_step(st);
	ck_assert(rc == SQLITE_ROW || rc == SQLITE_DONE);
	if (rc == SQLITE_ROW && sqlite3_column_text(st, 0) != NULL)
		res = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(h);
	return res;
}

START_TEST(test_store_migrate_fresh)
{
	struct fixture f;
	struct store *s = NULL;
	int v = -1;
	fx_init(&f);
	ck_assert_int_ge(store_schema_known(), 1);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(store_schema_version(c, &v), CS_OK);
	ck_assert_int_eq(v, store_schema_known());
	ck_assert_int_eq(store_ping(c), CS_OK);
	store_close(s);
	/* the tables of 0001 are there */
	char *n = raw_query(f.db, by_engine("SELECT count(*) FROM sqlite_master WHERE type = 'table' "
	    "AND name IN ('signing_keys', 'users', 'schema_version')",
	    "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' "
	    "AND table_name IN ('signing_keys', 'users', 'schema_version')"));
	ck_assert_str_eq(n, "3");
	free(n);
	fx_clear(&f);
}
END_TEST

START_TEST(test_store_migrate_reopen_idempotent)
{
	struct fixture f;
	struct store *s = NULL;
	int v = -1;
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	store_close(s);
	s = NULL;
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	ck_assert_int_eq(store_schema_version(store_conn(s), &v), CS_OK);
	ck_assert_int_eq(v, store_schema_known());
	store_close(s);
	/* Each migration recorded once.  Counted, not taken from the highest
	 * version: numbers may have gaps while branches that add one are merged. */
	char *n = raw_query(f.db, "SELECT count(*) FROM schema_version");
	char want[16];
	int nmig = 0;
	for (const struct embedded_file *m = tu_pg_url != NULL ? embedded_migrations_pg :
	    embedded_migrations; m->name != NULL; m++)
		nmig++;
	ck_assert_int_eq(str_fmt(want, sizeof want, "%d", nmig), CS_OK);
	ck_assert_str_eq(n, want);
	free(n);
	fx_clear(&f);
}
END_TEST

START_TEST(test_store_migrate_newer_eschema)
{
	struct fixture f;
	struct store *s = NULL;
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	store_close(s);
	s = NULL;
	free(raw_query(f.db, "INSERT INTO schema_version (version, applied_at) VALUES (9999, 1)"));
	ck_assert_int_eq(fx_open(&f, &s), CS_ESCHEMA);
	ck_assert_ptr_null(s);
	fx_clear(&f);
}
END_TEST

START_TEST(test_store_wal_on)
{
	struct fixture f;
	struct store *s = NULL;
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	char *m = raw_query(f.db, "PRAGMA journal_mode");
	ck_assert_str_eq(m, "wal");
	free(m);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* Whether this process has one of SQLite's temporary files open ("etilqs_",
 * removed at once after it is opened: listed as deleted). */
static bool sqlite_temp_file_open(void)
{
	DIR *d = opendir("/proc/self/fd");
	bool found = false;
	ck_assert_ptr_nonnull(d);
	for (struct dirent *e; !found && (e = readdir(d)) != NULL;) {
		char path[64], to[512];
		ck_assert_int_eq(str_fmt(path, sizeof path, "/proc/self/fd/%s", e->d_name), CS_OK);
		ssize_t n = readlink(path, to, sizeof to - 1);
		if (n > 0) {
			to[n] = '\0';
			found = strstr(to, "etilqs_") != NULL;
		}
	}
	closedir(d);
	return found;
}

static const char SQL_SPILL_REWRITE[] = "UPDATE spill SET x = randomblob(3000)";

/* Issue 34: a transaction's savepoint keeps its sub-journal (the pages to roll
 * back to) in memory.  With SQLite's default it spilled past 64 KiB to a
 * temporary file under /var/tmp, written page by page (3.6 writes a grant). */
START_TEST(test_store_savepoint_journal_in_memory)
{
	struct fixture f;
	struct store *s = NULL;
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	free(raw_query(f.db, "CREATE TABLE spill (x BLOB)"));
	free(raw_query(f.db, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
	    "WHERE i < 100) INSERT INTO spill SELECT zeroblob(3000) FROM n"));
	struct store_conn *c = store_conn(s);
	ck_assert_int_eq(store_begin(c), CS_OK);
	/* 100 pages rewritten inside the caller's savepoint: 300 KiB of sub-journal */
	ck_assert_int_eq(store_exec(c, store_stmt(c, SQL_SPILL_REWRITE)), CS_OK);
	ck_assert_int_eq(store_changes(c), 100);
	ck_assert_msg(!sqlite_temp_file_open(), "the savepoint's journal went to a temporary file");
	ck_assert_int_eq(store_commit(c), CS_OK);
	char *n = raw_query(f.db, "SELECT count(*) FROM spill WHERE x != zeroblob(3000)");
	ck_assert_str_eq(n, "100");
	free(n);
	store_close(s);
	fx_clear(&f);
}
END_TEST

START_TEST(test_store_open_bad_path_fails)
{
	struct store *s = NULL;
	ck_assert_int_ne(store_open("/nonexistent/dir/consentd.db", &s), CS_OK);
	ck_assert_ptr_null(s);
	ck_assert_int_eq(store_open("", &s), CS_EINVAL);
	store_close(NULL);
	store_rollback(NULL);
}
END_TEST

static void key_fill(struct store_key *k, const char *kid, int64_t t)
{
	static unsigned char blob[] = { 1, 2, 3, 0, 5 };
	memset(k, 0, sizeof *k);
	k->kid = (char *)kid;
	k->alg = (char *)"ES256";
	k->created_at = t;
	k->sign_after = t + 10;
	k->master_kid = (char *)"0123456789abcdef";
	k->sealed = blob;
	k->sealed_len = sizeof blob;
}

START_TEST(test_store_keys_roundtrip)
{
	struct fixture f;
	struct store *s = NULL;
	struct store_key k, *ks = NULL;
	size_t n = 99;
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);

	ck_assert_int_eq(store_keys_list(c, &ks, &n), CS_OK);
	ck_assert_ptr_null(ks);
	ck_assert_uint_eq(n, 0);

	key_fill(&k, "kid-a", 100);
	ck_assert_int_eq(store_key_insert(c, &k), CS_OK);
	ck_assert_int_eq(store_key_insert(c, &k), CS_EEXIST);
	key_fill(&k, "kid-b", 200);
	ck_assert_int_eq(store_key_insert(c, &k), CS_OK);

	ck_assert_int_eq(store_keys_list(c, &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(ks[0].kid, "kid-a");         /* oldest first */
	ck_assert_str_eq(ks[1].kid, "kid-b");
	ck_assert_str_eq(ks[0].alg, "ES256");
	ck_assert_str_eq(ks[0].master_kid, "0123456789abcdef");
	ck_assert_int_eq(ks[0].created_at, 100);
	ck_assert_int_eq(ks[0].sign_after, 110);
	ck_assert_int_eq(ks[0].retired_at, 0);
	ck_assert_int_eq(ks[0].revoked_at, 0);
	ck_assert_uint_eq(ks[0].sealed_len, 5);
	ck_assert_int_eq(memcmp(ks[0].sealed, k.sealed, 5), 0);
	store_keys_free(ks, n);

	ck_assert_int_eq(store_key_set_retired(c, "kid-a", 300), CS_OK);
	ck_assert_int_eq(store_key_set_retired(c, "nope", 300), CS_ENOENT);
	ck_assert_int_eq(store_keys_list(c, &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(ks[0].retired_at, 300);
	store_keys_free(ks, n);

	ck_assert_int_eq(store_key_set_revoked(c, "kid-a", 400), CS_OK);
	ck_assert_int_eq(store_key_set_revoked(c, "kid-a", 500), CS_ENOENT);  /* already */
	ck_assert_int_eq(store_keys_list(c, &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(ks[0].kid, "kid-b");
	store_keys_free(ks, n);

	/* bound parameters only: a hostile kid is just a value */
	key_fill(&k, "x'); DROP TABLE signing_keys; --", 600);
	ck_assert_int_eq(store_key_insert(c, &k), CS_OK);
	ck_assert_int_eq(store_keys_list(c, &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 2);
	store_keys_free(ks, n);

	store_close(s);
	fx_clear(&f);
}
END_TEST

/* The keys' listing has no cap (a key left out would stop verifying): 40
 * keys come back whole, past the growing array's first two sizes
 * (store_rows_all starts at 16 and doubles). */
START_TEST(test_store_keys_list_every_row)
{
	struct fixture f;
	struct store *s = NULL;
	struct store_key k, *ks = NULL;
	size_t n = 0;
	char kid[40][16];
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	for (int i = 0; i < 40; i++) {
		ck_assert_int_eq(str_fmt(kid[i], sizeof kid[i], "kid-%02d", i), CS_OK);
		key_fill(&k, kid[i], 100 + i);
		ck_assert_int_eq(store_key_insert(c, &k), CS_OK);
	}
	ck_assert_int_eq(store_keys_list(c, &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 40);
	for (size_t i = 0; i < n; i++) {
		ck_assert_str_eq(ks[i].kid, kid[i]);          /* oldest first */
		ck_assert_int_eq(ks[i].created_at, 100 + (int64_t)i);
		ck_assert_uint_eq(ks[i].sealed_len, 5);
		ck_assert_int_eq(memcmp(ks[i].sealed, k.sealed, 5), 0);
	}
	store_keys_free(ks, n);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* A row type of the test's own: a name and a revocation time. */
struct short_row {
	char   *name;
	int64_t revoked_at;
	char   *block;
};
static const struct store_member short_row_members[] = {
	STORE_TEXT(struct short_row, name),
	STORE_INT64(struct short_row, revoked_at),
};
static const struct store_row_type short_row_type =
	STORE_ROW_MEMBERS(struct short_row, short_row_members);
static const char SQL_SHORT_ONE[] = "SELECT 'n'";
static const char SQL_SHORT_BOTH[] = "SELECT 'n', 7";

/* SECURITY: a SELECT listing fewer columns than its row's members is no row:
 * the member past its end would read 0, and a revoked_at of 0 reads as live. */
START_TEST(test_store_row_shorter_than_its_members_refused)
{
	struct fixture f;
	struct store *s = NULL;
	struct short_row r = { 0 };
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	ck_assert_int_eq(store_get(c, SQL_SHORT_ONE, NULL, 0, &short_row_type, &r), CS_EDB);
	ck_assert_ptr_null(r.name);                      /* left zeroed */
	ck_assert_int_eq(store_get(c, SQL_SHORT_BOTH, NULL, 0, &short_row_type, &r), CS_OK);
	ck_assert_str_eq(r.name, "n");
	ck_assert_int_eq(r.revoked_at, 7);
	store_row_clear(&short_row_type, &r);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* One SQL constant per slot: the cache tells statements apart by address. */
static char many_sql[STORE_MAX_STMTS + 1][24];

static void many_sql_fill(void)
{
	for (int i = 0; i <= STORE_MAX_STMTS; i++)
		ck_assert_int_eq(str_fmt(many_sql[i], sizeof many_sql[i], "SELECT %d", i), CS_OK);
}

START_TEST(test_store_stmt_cache_by_address)
{
	struct fixture f;
	struct store *s = NULL;
	fx_init(&f);
	many_sql_fill();
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	/* The statements prepared already (begin, commit, schema, ping) share
	 * the room: fill what is left, then ask for each again. */
	ck_assert_int_eq(store_ping(c), CS_OK);
	struct store_stmt *first = store_stmt(c, many_sql[0]);
	ck_assert_ptr_nonnull(first);
	ck_assert_ptr_eq(store_stmt(c, many_sql[0]), first);   /* cached, not prepared again */
	int got = 1;
	while (got <= STORE_MAX_STMTS && store_stmt(c, many_sql[got]) != NULL)
		got++;
	ck_assert_int_lt(got, STORE_MAX_STMTS + 1);            /* the cap holds: NULL, no overflow */
	ck_assert_int_gt(got, STORE_MAX_STMTS / 2);
	for (int i = 0; i < got; i++) {
		struct store_stmt *st = store_stmt(c, many_sql[i]);
		ck_assert_ptr_nonnull(st);
		ck_assert_int_eq(store_step(c, st), CS_OK);
		ck_assert_int_eq(store_col_int(st, 0), i);
		store_stmt_done(st);
	}
	/* Transactions still work with the cache full: their statements are in it. */
	ck_assert_int_eq(store_begin(c), CS_OK);
	ck_assert_int_eq(store_commit(c), CS_OK);
	ck_assert_int_eq(store_ping(c), CS_OK);
	ck_assert_ptr_null(store_stmt(c, many_sql[got]));      /* still full */
	store_close(s);
	fx_clear(&f);
}
END_TEST

START_TEST(test_store_user_put_login_or_ensure)
{
	struct fixture f;
	struct store *s = NULL;
	int64_t a = 0, b = 0, d = 0, e2 = 0;
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	const char *iss = "https://idp.test";

	/* Not a login: created bare, whatever name it is handed. */
	ck_assert_int_eq(store_user_put(c, &(struct store_user){ .issuer = iss, .subject = "u1",
	    .name = "Ignored", .now = 10 }, &a), CS_OK);
	char *row = raw_query(f.db, "SELECT coalesce(name, '-') || ' ' || coalesce(email, '-') || ' ' "
	    "|| created_at || ' ' || last_login_at FROM users WHERE subject = 'u1'");
	ck_assert_str_eq(row, "- - 10 0");
	free(row);
	/* A login records what the IdP said, on the same row. */
	ck_assert_int_eq(store_user_put(c, &(struct store_user){ .issuer = iss, .subject = "u1",
	    .name = "One", .email = "a@x", .now = 20, .login = true }, &b), CS_OK);
	ck_assert_int_eq(a, b);
	row = raw_query(f.db, "SELECT name || ' ' || email || ' ' || created_at || ' ' || "
	    "last_login_at FROM users WHERE subject = 'u1'");
	ck_assert_str_eq(row, "One a@x 10 20");
	free(row);
	/* SECURITY: not a login again: the row is left as the login wrote it. */
	ck_assert_int_eq(store_user_put(c, &(struct store_user){ .issuer = iss, .subject = "u1",
	    .name = "Mallory", .email = "m@x", .now = 30 }, &d), CS_OK);
	ck_assert_int_eq(d, a);
	row = raw_query(f.db, "SELECT name || ' ' || email || ' ' || created_at || ' ' || "
	    "last_login_at FROM users WHERE subject = 'u1'");
	ck_assert_str_eq(row, "One a@x 10 20");
	free(row);
	/* A first login creates the row whole; another issuer is another person. */
	ck_assert_int_eq(store_user_put(c, &(struct store_user){ .issuer = "https://other.test",
	    .subject = "u1", .name = "X", .now = 40, .login = true }, &e2), CS_OK);
	ck_assert_int_ne(e2, a);
	ck_assert_int_eq(store_user_put(c, &(struct store_user){ .subject = "u1", .now = 1 }, &d),
	    CS_EINVAL);
	ck_assert_int_eq(store_user_put(c, NULL, &d), CS_EINVAL);
	store_close(s);
	fx_clear(&f);
}
END_TEST

START_TEST(test_store_tx_rollback)
{
	struct fixture f;
	struct store *s = NULL;
	struct store_key k, *ks = NULL;
	size_t n = 0;
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	ck_assert_int_eq(store_begin(c), CS_OK);
	key_fill(&k, "kid-tx", 1);
	ck_assert_int_eq(store_key_insert(c, &k), CS_OK);
	store_rollback(c);
	store_rollback(c);                 /* harmless outside a transaction */
	ck_assert_int_eq(store_keys_list(c, &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(store_begin(c), CS_OK);
	ck_assert_int_eq(store_key_insert(c, &k), CS_OK);
	ck_assert_int_eq(store_commit(c), CS_OK);
	ck_assert_int_eq(store_keys_list(c, &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 1);
	store_keys_free(ks, n);
	/* store_end: a failure given rolls back and comes back (still one key);
	 * CS_OK commits (two); either way the transaction is over (the next begins). */
	key_fill(&k, "kid-end", 1);
	for (size_t commit = 0; commit <= 1; commit++) {
		enum cs_err given = commit ? CS_OK : CS_EINVAL;
		ck_assert_int_eq(store_begin(c), CS_OK);
		ck_assert_int_eq(store_key_insert(c, &k), CS_OK);
		ck_assert_int_eq(store_end(c, given), given);
		ck_assert_int_eq(store_keys_list(c, &ks, &n), CS_OK);
		ck_assert_uint_eq(n, 1 + commit);
		store_keys_free(ks, n);
	}
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* S2 (issue 28): two nodes whose clocks differ.  Node A, 200 s ahead, purges the replay
 * cache; node B, on time, must still find the jti it may accept until its expiry. */
START_TEST(test_store_replay_survives_a_fast_clock)
{
	struct fixture f;
	struct store *s = NULL;
	const int64_t t = 1700000000, exp = t + 60;
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	ck_assert_int_eq(store_replay_use(c, REPLAY_CLIENT_ASSERTION, "j-1", exp, t), CS_OK);
	ck_assert_int_eq(store_replay_use(c, REPLAY_CLIENT_ASSERTION, "j-1", exp, t + 1), CS_EEXIST);
	/* Node A at B's t + 30 reads t + 230: past exp, so it purges by its clock ... */
	ck_assert_int_eq(store_replay_use(c, REPLAY_DPOP, "other", t + 290, t + 230), CS_OK);
	/* ... and B, for which the assertion is valid until exp, sees the replay. */
	ck_assert_int_eq(store_replay_use(c, REPLAY_CLIENT_ASSERTION, "j-1", exp, t + 30), CS_EEXIST);
	/* Kinds are apart; past expiry and the margin, a row is purged and may be reused. */
	ck_assert_int_eq(store_replay_use(c, REPLAY_DPOP, "j-1", exp, t + 30), CS_OK);
	ck_assert_int_eq(store_replay_use(c, REPLAY_CLIENT_ASSERTION, "j-1", exp + 1000,
	    exp + REPLAY_CLOCK_MARGIN + 1), CS_OK);
	ck_assert_int_eq(store_replay_use(c, REPLAY__MAX, "j-1", exp, t), CS_EINVAL);
	store_close(s);
	fx_clear(&f);
}
END_TEST

static pthread_barrier_t thr_barrier;

struct thr {
	struct store      *s;
	struct store_conn *c;
	struct store_conn *again;
	enum cs_err        ping;
};

static void *thr_main(void *arg)
{
	struct thr *t = arg;
	t->c = store_conn(t->s);
	t->again = store_conn(t->s);
	t->ping = t->c != NULL ? store_ping(t->c) : CS_EDB;
	/* both threads hold their connection at once, so the pointers compare */
	pthread_barrier_wait(&thr_barrier);
	return NULL;
}

START_TEST(test_store_conn_per_thread)
{
	struct fixture f;
	struct store *s = NULL;
	pthread_t a, b;
	struct thr ta = { 0 }, tb = { 0 };
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	ta.s = tb.s = s;
	ck_assert_int_eq(pthread_barrier_init(&thr_barrier, NULL, 2), 0);
	ck_assert_int_eq(pthread_create(&a, NULL, thr_main, &ta), 0);
	ck_assert_int_eq(pthread_create(&b, NULL, thr_main, &tb), 0);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	pthread_barrier_destroy(&thr_barrier);
	ck_assert_ptr_nonnull(ta.c);
	ck_assert_ptr_nonnull(tb.c);
	ck_assert_ptr_eq(ta.c, ta.again);       /* cached per thread */
	ck_assert_ptr_ne(ta.c, tb.c);
	ck_assert_ptr_ne(ta.c, store_conn(s));
	ck_assert_int_eq(ta.ping, CS_OK);
	ck_assert_int_eq(tb.ping, CS_OK);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* store_backup: every row, in a copy that passes integrity_check, stepped over
 * many pages; a destination that does not exist is refused (the caller makes it). */
static const char SQL_BK_CREATE[] = "CREATE TABLE bk (i INTEGER PRIMARY KEY, v TEXT)";
static const char SQL_BK_INSERT[] = "INSERT INTO bk (i, v) VALUES (?1, ?2)";
START_TEST(test_store_backup_copy)
{
	struct fixture f;
	struct store *s = NULL;
	char v[200];
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(store_run(c, SQL_BK_CREATE, NULL, 0), CS_OK);
	memset(v, 'x', sizeof v - 1);
	v[sizeof v - 1] = '\0';
	ck_assert_int_eq(store_begin(c), CS_OK);
	for (int64_t i = 1; i <= 3000; i++)   /* ~600 KB: many steps of 64 pages */
		ck_assert_int_eq(store_run(c, SQL_BK_INSERT, STORE_VALS(SV_INT(i), SV_TEXT(v))), CS_OK);
	ck_assert_int_eq(store_commit(c), CS_OK);

	char *copy = tu_path(f.dir, "copy.db");
	FILE *fp = fopen(copy, "w");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);
	ck_assert_int_eq(store_backup(c, copy), CS_OK);
	char *n = raw_query(copy, "SELECT count(*) FROM bk");
	ck_assert_str_eq(n, "3000");
	free(n);
	n = raw_query(copy, "PRAGMA integrity_check");
	ck_assert_str_eq(n, "ok");
	free(n);
	char *missing = tu_path(f.dir, "none/copy.db");
	ck_assert_int_ne(store_backup(c, missing), CS_OK);
	free(missing);
	free(copy);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* --- the group commit --------------------------------------------------
 * Callers are threads driven step by step (begin, then write and commit on a
 * signal), so that who waits for the writer's turn is known, not raced. */
static const char SQL_GC_INSERT[] = "INSERT INTO bk (i, v) VALUES (?1, 'gc')";

struct caller {
	struct store *s;
	const char   *db;             /* for an independent connection's look */
	int64_t       rows[2];        /* inserted in order; 0 = none */
	bool          fail;           /* roll back instead of committing */
	sem_t         go;             /* posted: write and commit */
	sem_t         began;          /* posted by the caller: it holds the turn */
	enum cs_err   begin_e, write_e, commit_e;
	char          seen_after[16]; /* count(*) of its rows from another connection, after commit */
	pthread_t     t;
};

static void *caller_main(void *arg)
{
	struct caller *x = arg;
	struct store_conn *c = store_conn(x->s);
	ck_assert_ptr_nonnull(c);
	x->begin_e = store_begin(c);
	sem_post(&x->began);
	if (x->begin_e != CS_OK)
		return NULL;
	sem_wait(&x->go);
	x->write_e = CS_OK;
	for (int k = 0; k < 2 && x->rows[k] != 0 && x->write_e == CS_OK; k++)
		x->write_e = store_run(c, SQL_GC_INSERT, STORE_VALS(SV_INT(x->rows[k])));
	if (x->fail || x->write_e != CS_OK) {
		store_rollback(c);
		x->commit_e = CS_EINVAL;
		return NULL;
	}
	x->commit_e = store_commit(c);
	char sql[100];
	ck_assert_int_eq(str_fmt(sql, sizeof sql, "SELECT count(*) FROM bk WHERE i = %lld",
	    (long long)x->rows[0]), CS_OK);
	char *n = raw_query(x->db, sql);
	ck_assert_ptr_nonnull(n);
	ck_assert_int_eq(str_fmt(x->seen_after, sizeof x->seen_after, "%s", n), CS_OK);
	free(n);
	return NULL;
}

static void caller_start(struct caller *x, struct store *s, const char *db, int64_t r0, int64_t r1)
{
	memset(x, 0, sizeof *x);
	x->s = s;
	x->db = db;
	x->rows[0] = r0;
	x->rows[1] = r1;
	x->begin_e = x->write_e = x->commit_e = CS_EDB;
	ck_assert_int_eq(sem_init(&x->go, 0, 0), 0);
	ck_assert_int_eq(sem_init(&x->began, 0, 0), 0);
	ck_assert_int_eq(pthread_create(&x->t, NULL, caller_main, x), 0);
}

static void caller_join(struct caller *x)
{
	pthread_join(x->t, NULL);
	sem_destroy(&x->go);
	sem_destroy(&x->began);
}

/* Waits (without a time limit that could flake) until n callers wait for the turn. */
static void wait_for_waiting(struct store *s, unsigned n)
{
	struct store_writer_stats ws;
	for (;;) {
		store_writer_stats(s, &ws);
		if (ws.waiting == n)
			return;
		usleep(1000);
	}
}

static struct store *gc_open(struct fixture *f)
{
	struct store *s = NULL;
	fx_init(f);
	ck_assert_int_eq(fx_open(f, &s), CS_OK);
	ck_assert_int_eq(store_run(store_conn(s), SQL_BK_CREATE, NULL, 0), CS_OK);
	return s;
}

static char *count_rows(const char *db)
{
	return raw_query(db, by_engine("SELECT group_concat(i) FROM (SELECT i FROM bk ORDER BY i)",
	    "SELECT string_agg(i::text, ',' ORDER BY i) FROM bk"));
}

/* Three callers whose turns overlap share one COMMIT; none of them hears
 * "committed" before its row is visible to another connection (durable). */
START_TEST(test_store_group_commit_batches_callers)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct store_writer_stats before, after;
	struct caller a, b, c;
	store_writer_stats(s, &before);
	caller_start(&a, s, f.db, 1, 0);
	sem_wait(&a.began);                         /* a holds the turn */
	ck_assert_int_eq(a.begin_e, CS_OK);
	caller_start(&b, s, f.db, 2, 0);
	wait_for_waiting(s, 1);
	caller_start(&c, s, f.db, 3, 0);
	wait_for_waiting(s, 2);
	sem_post(&a.go);                            /* a commits: b and c wait, so it hands on */
	sem_wait(&b.began);
	sem_post(&b.go);
	sem_wait(&c.began);
	sem_post(&c.go);                            /* c is the last: it commits all three */
	caller_join(&a);
	caller_join(&b);
	caller_join(&c);
	ck_assert_int_eq(a.commit_e, CS_OK);
	ck_assert_int_eq(b.commit_e, CS_OK);
	ck_assert_int_eq(c.commit_e, CS_OK);
	store_writer_stats(s, &after);
	ck_assert_uint_eq(after.transactions - before.transactions, 3);
	/* SQLite: one COMMIT, one fsync, for the three.  PostgreSQL commits each
	 * transaction itself (its group commit is the server's own). */
	ck_assert_uint_eq(after.batches - before.batches, tu_pg_url != NULL ? 3 : 1);
	char *rows = count_rows(f.db);
	ck_assert_str_eq(rows, "1,2,3");
	free(rows);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* Waits until the writer has counted n lingering batches in all (it takes
 * microseconds; ten seconds without means it never lingered). */
static void wait_for_lingers(struct store *s, uint64_t n)
{
	struct store_writer_stats ws;
	for (int i = 0; i < 10000; i++) {
		store_writer_stats(s, &ws);
		if (ws.lingers >= n)
			return;
		usleep(1000);
	}
	ck_abort_msg("the batch was committed alone: it did not linger for the request under way");
}

/* Since before: n transactions in one COMMIT that lingered once, and the
 * table holds rows. */
static void one_batch(struct store *s, const struct store_writer_stats *before, uint64_t n,
    const char *db, const char *rows)
{
	struct store_writer_stats after;
	store_writer_stats(s, &after);
	ck_assert_uint_eq(after.transactions - before->transactions, n);
	ck_assert_uint_eq(after.batches - before->batches, 1);
	ck_assert_uint_eq(after.lingers - before->lingers, 1);
	char *got = count_rows(db);
	ck_assert_str_eq(got, rows);
	free(got);
}

/* SQLite's linger: a caller that would commit alone while another request is
 * under way (store_requests) leaves its batch open; the other's transaction
 * joins it and, everyone under way now in the batch, commits both at once --
 * one COMMIT, long before the linger's time (a minute here: a batch that
 * waited for it would fail the test's timeout). */
START_TEST(test_store_linger_joins_requests_under_way)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct store_writer_stats before;
	struct caller a, b;
	store_set_linger(s, 60u * 1000 * 1000);
	store_requests(s, 2);                       /* two requests under way: a's and b's */
	store_writer_stats(s, &before);
	caller_start(&a, s, f.db, 30, 0);
	sem_wait(&a.began);
	sem_post(&a.go);                            /* nobody queued: a's batch lingers */
	wait_for_lingers(s, before.lingers + 1);
	caller_start(&b, s, f.db, 31, 0);
	sem_wait(&b.began);                         /* b takes the free turn, joins a's batch */
	sem_post(&b.go);
	caller_join(&a);
	caller_join(&b);
	ck_assert_int_eq(a.commit_e, CS_OK);
	ck_assert_int_eq(b.commit_e, CS_OK);
	ck_assert_str_eq(a.seen_after, "1");        /* acknowledged only once committed */
	one_batch(s, &before, 2, f.db, "30,31");
	store_requests(s, -2);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* A request counted as under way that never writes (a GET, a refusal) holds
 * a lingering batch only until its time is up: then the caller that keeps
 * the batch's time commits it, also after another caller took the turn in
 * the meantime and rolled back. */
START_TEST(test_store_linger_time_up_commits)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct store_writer_stats before;
	struct caller a, b;
	store_set_linger(s, 200u * 1000);        /* 200 ms */
	store_requests(s, 3);                       /* a, b and one that never comes */
	store_writer_stats(s, &before);
	caller_start(&a, s, f.db, 40, 0);
	sem_wait(&a.began);
	sem_post(&a.go);
	wait_for_lingers(s, before.lingers + 1);
	caller_start(&b, s, f.db, 41, 0);
	b.fail = true;                              /* b rolls back: its turn's end decides too */
	sem_wait(&b.began);
	sem_post(&b.go);
	caller_join(&b);
	caller_join(&a);                            /* returns once the time is up */
	ck_assert_int_eq(a.commit_e, CS_OK);
	ck_assert_str_eq(a.seen_after, "1");
	one_batch(s, &before, 1, f.db, "40");
	store_requests(s, -3);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* No linger without other requests under way: a transaction of no request
 * (the janitor's) or a request's own commits at once. */
START_TEST(test_store_linger_not_alone)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct store_writer_stats before, after;
	struct store_conn *c = store_conn(s);
	store_set_linger(s, 100u * 1000);        /* 100 ms, were it to linger */
	store_writer_stats(s, &before);
	ck_assert_int_eq(store_begin(c), CS_OK);
	ck_assert_int_eq(store_run(c, SQL_GC_INSERT, STORE_VALS(SV_INT(50))), CS_OK);
	ck_assert_int_eq(store_commit(c), CS_OK);
	store_requests(s, 1);                       /* this request, ours */
	ck_assert_int_eq(store_begin(c), CS_OK);
	ck_assert_int_eq(store_run(c, SQL_GC_INSERT, STORE_VALS(SV_INT(51))), CS_OK);
	ck_assert_int_eq(store_commit(c), CS_OK);
	store_requests(s, -1);
	store_writer_stats(s, &after);
	ck_assert_uint_eq(after.batches - before.batches, 2);
	ck_assert_uint_eq(after.lingers - before.lingers, 0);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* --- the WAL begun again (store_sqlite.c wal_restart) ------------------- */

#define WAL_RESTART_PAGES 4000      /* store_sqlite.c STORE_WAL_RESTART_PAGES */
#define WAL_FRAME (4096 + 24)       /* a WAL frame: a page and its header */

/* A worker's reads as they come under load: one read transaction after
 * another, each a few milliseconds long, two threads overlapping, so that
 * some reader is always in the WAL.  hold: one read transaction held until
 * told to stop instead (a backup, an export). */
struct wal_reader {
	const char  *db;
	bool         hold;
	atomic_bool  stop;
	sem_t        holding;
	pthread_t    t;
};

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static void *wal_reader_run(void *arg)
{
	struct wal_reader *r = arg;
	sqlite3 *h = NULL;
	if (sqlite3_open(r->db, &h) != SQLITE_OK)
		return NULL;
	sqlite3_busy_timeout(h, 10000);
	do {
		/* A worker's short read: the newest row, not a count of them all
		 * (which takes longer as the table grows). */
		sqlite3_exec(h, "BEGIN; SELECT max(i) FROM bk;", NULL, NULL, NULL);
		if (r->hold) {
			sem_post(&r->holding);
			while (!atomic_load(&r->stop))
				sleep_ms(1);
		} else {
			sleep_ms(2);
		}
		sqlite3_exec(h, "COMMIT", NULL, NULL, NULL);
	} while (!atomic_load(&r->stop));
	sqlite3_close(h);
	return NULL;
}

static void wal_reader_start(struct wal_reader *r, const char *db, bool hold)
{
	r->db = db;
	r->hold = hold;
	atomic_init(&r->stop, false);
	ck_assert_int_eq(sem_init(&r->holding, 0, 0), 0);
	ck_assert_int_eq(pthread_create(&r->t, NULL, wal_reader_run, r), 0);
}

static void wal_reader_stop(struct wal_reader *r)
{
	atomic_store(&r->stop, true);
	pthread_join(r->t, NULL);
	sem_destroy(&r->holding);
}

/* n transactions of ten rows of 8,000 bytes (about 20 pages each) from first
 * on, each committed before the next begins. */
static void wal_write(struct store *s, int first, int n)
{
	static char v[8001];
	memset(v, 'w', sizeof v - 1);
	struct store_conn *c = store_conn(s);
	for (int t = 0; t < n; t++) {
		ck_assert_int_eq(store_begin(c), CS_OK);
		for (int i = 0; i < 10; i++)
			ck_assert_int_eq(store_run(c, SQL_BK_INSERT,
			    STORE_VALS(SV_INT((first + t) * 10 + i), SV_TEXT(v))), CS_OK);
		ck_assert_int_eq(store_commit(c), CS_OK);
	}
}

static off_t wal_size(const char *db)
{
	char path[4096];
	struct stat st;
	ck_assert_int_eq(str_fmt(path, sizeof path, "%s-wal", db), CS_OK);
	return stat(path, &st) == 0 ? st.st_size : 0;
}

/* Commits one after another while readers are always in the WAL: SQLite
 * alone never begins the WAL again (a PASSIVE checkpoint never copies every
 * frame back while frames keep coming, and a reader always holds one), so the
 * WAL grew by every page written -- here about 30,000 pages, 120 MB.  With the
 * checkpointer's restart it stays within a few times STORE_WAL_RESTART_PAGES
 * (and that again for each attempt a reader made give up), and every
 * transaction still commits. */
START_TEST(test_store_wal_restart_bounds_the_wal)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct store_writer_stats before, after;
	struct wal_reader r1, r2;
	store_writer_stats(s, &before);
	wal_reader_start(&r1, f.db, false);
	sleep_ms(1);
	wal_reader_start(&r2, f.db, false);
	wal_write(s, 0, 1500);
	wal_reader_stop(&r1);
	wal_reader_stop(&r2);
	store_writer_stats(s, &after);
	off_t size = wal_size(f.db);
	ck_assert_msg(after.wal_restarts > before.wal_restarts,
	    "the WAL was never begun again (%lld bytes)", (long long)size);
	/* Each attempt that gave up on a reader (one descheduled past the 50 ms
	 * wait, as on a loaded machine) lets the WAL grow STORE_WAL_RESTART_PAGES
	 * more before the next (wal_restart): the bound counts them. */
	uint64_t busy = after.wal_restarts_busy - before.wal_restarts_busy;
	ck_assert_msg(size <= (off_t)(3 + busy) * WAL_RESTART_PAGES * WAL_FRAME,
	    "the WAL grew to %lld bytes (%llu attempts gave up on a reader)", (long long)size,
	    (unsigned long long)busy);
	char *n = raw_query(f.db, "SELECT count(*) FROM bk");
	ck_assert_str_eq(n, "15000");
	free(n);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* One checkpoint for each 1,000 pages written, not one for each COMMIT once
 * the WAL is 1,000 pages long (each copies what the COMMITs before it added
 * and fsyncs the database file): 200 transactions of about 20 pages, about
 * 4,000 pages, make four or five. */
START_TEST(test_store_checkpoint_per_thousand_pages)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct store_writer_stats before, after;
	store_writer_stats(s, &before);
	wal_write(s, 0, 200);
	usleep(100 * 1000);                         /* the last wake-up's checkpoint */
	store_writer_stats(s, &after);
	uint64_t n = after.checkpoints - before.checkpoints;
	ck_assert_msg(n >= 3 && n <= 6, "%" PRIu64 " checkpoints for about 4,000 pages", n);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* A reader that holds one snapshot for long (a backup, an export) keeps the
 * WAL from being begun again; the restart gives up after a short wait and
 * writers go on (every transaction commits, none refused), and once the
 * reader is gone the WAL is begun again. */
START_TEST(test_store_wal_restart_long_reader)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct store_writer_stats before, mid, after;
	struct wal_reader r;
	wal_write(s, 0, 1);                         /* the reader's snapshot is in the WAL */
	store_writer_stats(s, &before);
	wal_reader_start(&r, f.db, true);
	sem_wait(&r.holding);
	wal_write(s, 1, 600);                       /* about 12,000 pages */
	store_writer_stats(s, &mid);
	ck_assert_uint_eq(mid.wal_restarts, before.wal_restarts);
	/* It tried, and gave up; not at every COMMIT (each wakes the
	 * checkpointer) but once each time the WAL grew by as much again. */
	uint64_t tries = mid.wal_restarts_busy - before.wal_restarts_busy;
	ck_assert_msg(tries >= 1 && tries <= 4, "%" PRIu64 " restarts given up", tries);
	wal_reader_stop(&r);                        /* the reader lets go */
	/* The restart is the checkpointer's, after the WAL grew as much again
	 * as when it last gave up: write on (about 1,000 pages at a time, up to
	 * 30,000) until it comes. */
	int t = 601;
	store_writer_stats(s, &after);
	for (int i = 0; i < 30 && after.wal_restarts == mid.wal_restarts; i++) {
		wal_write(s, t, 50);
		t += 50;
		usleep(20 * 1000);
		store_writer_stats(s, &after);
	}
	ck_assert_msg(after.wal_restarts > mid.wal_restarts, "not begun again after the reader left");
	char *n = raw_query(f.db, "SELECT count(*) FROM bk"), want[32];
	ck_assert_int_eq(str_fmt(want, sizeof want, "%d", t * 10), CS_OK);
	ck_assert_str_eq(n, want);
	free(n);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* What each caller saw right after its store_commit returned: its own row,
 * from a connection of its own (a commit acknowledged before the batch's
 * COMMIT would show 0 here). */
START_TEST(test_store_group_commit_acknowledged_is_committed)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct caller a, b;
	caller_start(&a, s, f.db, 10, 0);
	sem_wait(&a.began);
	caller_start(&b, s, f.db, 11, 0);
	wait_for_waiting(s, 1);
	sem_post(&a.go);                            /* a's savepoint released, batch open */
	sem_wait(&b.began);
	sem_post(&b.go);
	caller_join(&a);
	caller_join(&b);
	ck_assert_int_eq(a.commit_e, CS_OK);
	ck_assert_int_eq(b.commit_e, CS_OK);
	ck_assert_str_eq(a.seen_after, "1");
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* A failing caller in the middle of a batch rolls back alone: its first
 * write goes with it, the others' rows stay. */
START_TEST(test_store_group_commit_failure_rolls_back_alone)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct caller a, b, c;
	caller_start(&a, s, f.db, 20, 0);
	sem_wait(&a.began);
	caller_start(&b, s, f.db, 21, 20);          /* its second row clashes with a's */
	wait_for_waiting(s, 1);
	caller_start(&c, s, f.db, 22, 0);
	wait_for_waiting(s, 2);
	sem_post(&a.go);
	sem_wait(&b.began);
	sem_post(&b.go);
	sem_wait(&c.began);
	sem_post(&c.go);
	caller_join(&a);
	caller_join(&b);
	caller_join(&c);
	ck_assert_int_eq(a.commit_e, CS_OK);
	ck_assert_int_eq(b.write_e, CS_EEXIST);
	ck_assert_int_eq(c.commit_e, CS_OK);
	char *rows = count_rows(f.db);
	ck_assert_str_eq(rows, "20,22");            /* 21 rolled back with its caller */
	free(rows);
	/* And a caller that rolls back on its own choice leaves nothing either. */
	caller_start(&a, s, f.db, 23, 0);
	a.fail = true;
	sem_wait(&a.began);
	sem_post(&a.go);
	caller_join(&a);
	rows = count_rows(f.db);
	ck_assert_str_eq(rows, "20,22");
	free(rows);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* The queue is bounded: past write_queue waiting callers the next one is
 * refused at once with CS_EBUSY (a 503), and the queue still drains. */
START_TEST(test_store_group_commit_queue_full)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct caller a, b;
	store_set_write_queue(s, 1);
	caller_start(&a, s, f.db, 30, 0);
	sem_wait(&a.began);
	caller_start(&b, s, f.db, 31, 0);
	wait_for_waiting(s, 1);
	struct store_conn *c = store_conn(s);
	ck_assert_int_eq(store_begin(c), CS_EBUSY);   /* the queue holds b already */
	sem_post(&a.go);
	sem_wait(&b.began);
	sem_post(&b.go);
	caller_join(&a);
	caller_join(&b);
	ck_assert_int_eq(a.commit_e, CS_OK);
	ck_assert_int_eq(b.commit_e, CS_OK);
	/* With room again, the same caller is served. */
	ck_assert_int_eq(store_begin(c), CS_OK);
	ck_assert_int_eq(store_run(c, SQL_GC_INSERT, STORE_VALS(SV_INT(32))), CS_OK);
	ck_assert_int_eq(store_commit(c), CS_OK);
	/* 0: nobody may wait at all. */
	store_set_write_queue(s, 0);
	caller_start(&a, s, f.db, 33, 0);
	sem_wait(&a.began);
	ck_assert_int_eq(store_begin(c), CS_EBUSY);
	sem_post(&a.go);
	caller_join(&a);
	char *rows = count_rows(f.db);
	ck_assert_str_eq(rows, "30,31,32,33");
	free(rows);
	store_close(s);
	fx_clear(&f);
}
END_TEST

struct stopper {
	struct store *s;
	bool          done;
	pthread_t     t;
};

static void *stopper_main(void *arg)
{
	struct stopper *x = arg;
	store_stop(x->s);
	__atomic_store_n(&x->done, true, __ATOMIC_SEQ_CST);
	return NULL;
}

/* An orderly stop refuses new transactions but lets the queue drain: the
 * caller holding the turn and those waiting all commit, then stop returns. */
START_TEST(test_store_group_commit_stop_drains)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct caller a, b, c;
	struct stopper st = { .s = s };
	caller_start(&a, s, f.db, 40, 0);
	sem_wait(&a.began);
	caller_start(&b, s, f.db, 41, 0);
	wait_for_waiting(s, 1);
	caller_start(&c, s, f.db, 42, 0);
	wait_for_waiting(s, 2);
	ck_assert_int_eq(pthread_create(&st.t, NULL, stopper_main, &st), 0);
	/* Stopping: a new caller is refused at once, nobody queued is. */
	struct store_writer_stats ws;
	do {
		usleep(1000);
		store_writer_stats(s, &ws);
	} while (!ws.stopping);
	struct store_conn *m = store_conn(s);
	ck_assert_int_eq(store_begin(m), CS_EBUSY);
	ck_assert_uint_eq(ws.waiting, 2);
	ck_assert(!__atomic_load_n(&st.done, __ATOMIC_SEQ_CST));   /* a still holds the turn */
	sem_post(&a.go);
	sem_wait(&b.began);
	sem_post(&b.go);
	sem_wait(&c.began);
	sem_post(&c.go);
	pthread_join(st.t, NULL);
	caller_join(&a);
	caller_join(&b);
	caller_join(&c);
	ck_assert_int_eq(a.commit_e, CS_OK);
	ck_assert_int_eq(b.commit_e, CS_OK);
	ck_assert_int_eq(c.commit_e, CS_OK);
	char *rows = count_rows(f.db);
	ck_assert_str_eq(rows, "40,41,42");
	free(rows);
	ck_assert_int_eq(store_begin(m), CS_EBUSY);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* --- store_transact: whole transactions the turn's holder runs ----------- */

struct job {
	struct store *s;
	int64_t       rows[2];        /* inserted in order; 0 = none */
	bool          keep;           /* keep its writes when they went in */
	bool          audit;          /* and append an audit entry */
	int           times;          /* run this many transactions (0: one) */
	pthread_t     ran_on;         /* the thread its body ran on, last time */
	enum cs_err   e;
	bool          kept;
	pthread_t     t;
};

static enum cs_err job_body(struct store_conn *c, void *arg, bool *keep)
{
	struct job *x = arg;
	enum cs_err e = CS_OK;
	static const struct audit_entry ent = { .ts = 1700000000, .actor = "system",
	    .action = "grant.issued", .outcome = "ok" };
	x->ran_on = pthread_self();
	for (int k = 0; k < 2 && x->rows[k] != 0 && e == CS_OK; k++)
		e = store_run(c, SQL_GC_INSERT, STORE_VALS(SV_INT(x->rows[k])));
	if (e == CS_OK && x->audit)
		e = audit_append(c, &ent);
	*keep = e == CS_OK && x->keep;
	return e;
}

static void *job_main(void *arg)
{
	struct job *x = arg;
	struct store_conn *c = store_conn(x->s);
	ck_assert_ptr_nonnull(c);
	int n = x->times > 0 ? x->times : 1;
	x->e = CS_OK;
	for (int i = 0; i < n && (x->e == CS_OK || x->e == CS_EBUSY); i++)
		x->e = store_transact(c, job_body, x, &x->kept);
	return NULL;
}

static void job_start(struct job *x, struct store *s, int64_t r0, int64_t r1, bool keep)
{
	memset(x, 0, sizeof *x);
	x->s = s;
	x->rows[0] = r0;
	x->rows[1] = r1;
	x->keep = keep;
	x->e = CS_EDB;
	ck_assert_int_eq(pthread_create(&x->t, NULL, job_main, x), 0);
}

/* A mix under load: threads that hand whole transactions to the writer
 * (store_transact) beside threads that take the turn themselves
 * (store_begin ... store_commit or store_rollback), each one request under
 * way while it runs, with lingers on: every transaction ends (none waits
 * without end for a wake-up nobody sends), and exactly the kept rows stay. */
struct mix {
	struct store *s;
	int           id;
	bool          jobs;           /* store_transact; else store_begin */
	int           n;
	int           kept;
	int           busy;
	int64_t       slowest_ms;     /* the longest one transaction took */
	enum cs_err   e;
	pthread_t     t;
	struct job    j;
};

static void *mix_main(void *arg)
{
	struct mix *x = arg;
	struct store_conn *c = store_conn(x->s);
	ck_assert_ptr_nonnull(c);
	x->e = CS_OK;
	for (int i = 0; i < x->n && x->e == CS_OK; i++) {
		int64_t row = (int64_t)x->id * 100000 + i + 1;
		bool keep = i % 7 != 3;
		enum cs_err e;
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		store_requests(x->s, 1);
		if (x->jobs) {
			memset(&x->j, 0, sizeof x->j);
			x->j.s = x->s;
			x->j.rows[0] = row;
			x->j.keep = keep;
			x->j.audit = i % 3 == 0;
			e = store_transact(c, job_body, &x->j, &x->j.kept);
			if (e == CS_OK && x->j.kept)
				x->kept++;
		} else if ((e = store_begin(c)) == CS_OK) {
			if (i % 4 != 1)            /* a stream's look that found nothing */
				e = store_run(c, SQL_GC_INSERT, STORE_VALS(SV_INT(row)));
			if (e == CS_OK && keep) {
				if ((e = store_commit(c)) == CS_OK && i % 4 != 1)
					x->kept++;
			} else {
				store_rollback(c);
			}
		}
		store_requests(x->s, -1);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		int64_t ms = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms > x->slowest_ms)
			x->slowest_ms = ms;
		if (e == CS_EBUSY) {               /* the queue's bound: allowed, counted */
			x->busy++;
			e = CS_OK;
		}
		x->e = e;
		if (i % 16 == 0)
			usleep((useconds_t)(x->id * 37 % 400));
	}
	return NULL;
}

START_TEST(test_store_transact_mixed_under_load)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	enum { NJ = 6, NB = 4, N = 400 };
	struct mix m[NJ + NB];
	int kept = 0, busy = 0;
	struct master_key mk;
	struct audit_verify_result r;
	store_own_chains(s, true);
	ck_assert_int_eq(master_key_load(NULL, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", &mk),
	    CS_OK);
	ck_assert_int_eq(audit_set_master_key(&mk), CS_OK);
	store_set_linger(s, 3000);
	store_requests(s, 2);                       /* two streams open: in no batch */
	for (int i = 0; i < NJ + NB; i++) {
		memset(&m[i], 0, sizeof m[i]);
		m[i].s = s;
		m[i].id = i + 1;
		m[i].jobs = i < NJ;
		m[i].n = N;
		ck_assert_int_eq(pthread_create(&m[i].t, NULL, mix_main, &m[i]), 0);
	}
	for (int i = 0; i < NJ + NB; i++) {
		pthread_join(m[i].t, NULL);
		ck_assert_msg(m[i].e == CS_OK, "thread %d: %d", i, (int)m[i].e);
		/* A transaction left in an open batch nobody ends waits until
		 * some later write ends it: seconds, not a linger's milliseconds. */
		ck_assert_msg(m[i].slowest_ms < 2000, "thread %d waited %lld ms", i,
		    (long long)m[i].slowest_ms);
		kept += m[i].kept;
		busy += m[i].busy;
	}
	store_requests(s, -2);
	char *n = raw_query(f.db, "SELECT count(*) FROM bk");
	char want[16];
	ck_assert_int_eq(str_fmt(want, sizeof want, "%d", kept), CS_OK);
	ck_assert_str_eq(n, want);
	free(n);
	ck_assert_int_eq(busy, 0);
	ck_assert_int_eq(audit_verify(store_conn(s), &mk, NULL, &r), CS_OK);
	ck_assert_msg(r.ok == 1, "verify: %s at %" PRId64, r.why, r.broken);
	audit_clear_key();
	master_key_clear(&mk);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* Until n callers wait for the turn or jobs for its holder (SQLite queues a
 * job; PostgreSQL's store_transact waits for the turn as store_begin does). */
static void wait_for_queue(struct store *s, unsigned n)
{
	struct store_writer_stats ws;
	for (;;) {
		store_writer_stats(s, &ws);
		if (ws.waiting + ws.queued == n)
			return;
		usleep(1000);
	}
}

/* Jobs queued while a store_begin caller holds the turn: once it ends its
 * turn, one holder runs all three, each in its own savepoint, and one
 * COMMIT makes the caller's and the kept job's writes durable together; a
 * job that failed (its second row clashes) and one that chose not to keep
 * its writes leave nothing, and neither touches the others. */
START_TEST(test_store_transact_one_holder_runs_the_queue)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct store_writer_stats before, after;
	struct caller a;
	struct job j1, j2, j3;
	store_writer_stats(s, &before);
	caller_start(&a, s, f.db, 50, 0);
	sem_wait(&a.began);
	ck_assert_int_eq(a.begin_e, CS_OK);
	job_start(&j1, s, 51, 0, true);
	wait_for_queue(s, 1);
	job_start(&j2, s, 52, 50, true);           /* 50 is a's: CS_EEXIST, and 52 goes too */
	wait_for_queue(s, 2);
	job_start(&j3, s, 53, 0, false);           /* ran, but not kept */
	wait_for_queue(s, 3);
	sem_post(&a.go);
	caller_join(&a);
	pthread_join(j1.t, NULL);
	pthread_join(j2.t, NULL);
	pthread_join(j3.t, NULL);
	ck_assert_int_eq(a.commit_e, CS_OK);
	ck_assert_str_eq(a.seen_after, "1");
	ck_assert_int_eq(j1.e, CS_OK);
	ck_assert(j1.kept);
	ck_assert_int_eq(j2.e, CS_EEXIST);
	ck_assert(!j2.kept);
	ck_assert_int_eq(j3.e, CS_OK);
	ck_assert(!j3.kept);
	char *rows = count_rows(f.db);
	ck_assert_str_eq(rows, "50,51");
	free(rows);
	store_writer_stats(s, &after);
	ck_assert_uint_eq(after.transactions - before.transactions, 2);
	if (tu_pg_url == NULL) {
		/* SQLite: one thread ran the three, and one COMMIT ended a's and j1's. */
		ck_assert_msg(pthread_equal(j1.ran_on, j2.ran_on) && pthread_equal(j2.ran_on, j3.ran_on),
		    "the queued jobs were run by more than one thread: the turn went round");
		ck_assert_uint_eq(after.batches - before.batches, 1);
	} else {
		ck_assert(pthread_equal(j1.ran_on, j1.t) && pthread_equal(j2.ran_on, j2.t));
	}
	ck_assert_uint_eq(after.queued, 0);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* The jobs' holder lingers as a turn's end does: alone in its batch while
 * another request is under way, it waits (a minute here) and is woken as
 * soon as that request's job is queued, runs it, and one COMMIT holds both;
 * a store_begin caller that comes to wait for the turn ends the linger too
 * (its turn's end commits). */
START_TEST(test_store_linger_jobs_join_requests_under_way)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct store_writer_stats before;
	struct job j1, j2;
	struct caller a;
	if (tu_pg_url != NULL) {             /* PostgreSQL: no linger, no queue of jobs */
		store_close(s);
		fx_clear(&f);
		return;
	}
	store_set_linger(s, 60u * 1000 * 1000);
	store_requests(s, 2);
	store_writer_stats(s, &before);
	job_start(&j1, s, 70, 0, true);             /* the turn is free: it runs j1, lingers */
	wait_for_lingers(s, before.lingers + 1);
	job_start(&j2, s, 71, 0, true);             /* queued: the batch is whole, j1's holder wakes */
	pthread_join(j1.t, NULL);
	pthread_join(j2.t, NULL);
	ck_assert_int_eq(j1.e, CS_OK);
	ck_assert_int_eq(j2.e, CS_OK);
	ck_assert(j1.kept && j2.kept);
	ck_assert(pthread_equal(j1.ran_on, j2.ran_on));
	one_batch(s, &before, 2, f.db, "70,71");

	store_writer_stats(s, &before);
	job_start(&j1, s, 72, 0, true);
	wait_for_lingers(s, before.lingers + 1);
	caller_start(&a, s, f.db, 73, 0);           /* waits for the turn: the linger ends */
	sem_wait(&a.began);
	sem_post(&a.go);
	caller_join(&a);
	pthread_join(j1.t, NULL);
	ck_assert_int_eq(j1.e, CS_OK);
	ck_assert_int_eq(a.commit_e, CS_OK);
	one_batch(s, &before, 2, f.db, "70,71,72,73");
	store_requests(s, -2);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* A job's caller made its batch's linger keeper keeps the time: a jobs'
 * holder lingers, a store_begin caller comes to wait (the holder hands it
 * the turn, the batch open), rolls back, and its turn's end leaves the batch
 * lingering for the requests still under way, with the job's caller -- the
 * batch's only one -- as its keeper.  When the linger (0.2 s) is up, that
 * caller commits; nobody else would. */
START_TEST(test_store_linger_job_keeps_the_time)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct store_writer_stats before;
	struct job j1;
	struct caller b;
	if (tu_pg_url != NULL) {
		store_close(s);
		fx_clear(&f);
		return;
	}
	store_set_linger(s, 200u * 1000);
	store_requests(s, 3);
	store_writer_stats(s, &before);
	job_start(&j1, s, 80, 0, true);
	wait_for_lingers(s, before.lingers + 1);
	caller_start(&b, s, f.db, 81, 0);
	b.fail = true;
	sem_wait(&b.began);
	sem_post(&b.go);
	caller_join(&b);
	pthread_join(j1.t, NULL);
	ck_assert_int_eq(j1.e, CS_OK);
	ck_assert(j1.kept);
	char *rows = count_rows(f.db);
	ck_assert_str_eq(rows, "80");
	free(rows);
	store_requests(s, -3);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* The write queue bounds jobs as it bounds callers waiting for a turn; a
 * transaction inside another is refused; a job queued before a stop still
 * runs and commits, one after it is refused. */
START_TEST(test_store_transact_queue_full_nested_and_stop)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct caller a;
	struct job j1;
	struct stopper st = { .s = s };
	struct store_conn *m = store_conn(s);
	bool kept = true;
	struct job mine = { .s = s, .rows = { 69, 0 }, .keep = true };

	ck_assert_int_eq(store_begin(m), CS_OK);
	ck_assert_int_eq(store_transact(m, job_body, &mine, &kept), CS_EDB);
	ck_assert(!kept);
	store_rollback(m);
	/* The bound is on waiting: with the turn free even a queue of 0 serves. */
	store_set_write_queue(s, 0);
	ck_assert_int_eq(store_transact(m, job_body, &mine, &kept), CS_OK);
	ck_assert(kept);
	mine.rows[0] = 68;
	store_set_write_queue(s, 1);
	caller_start(&a, s, f.db, 60, 0);
	sem_wait(&a.began);
	job_start(&j1, s, 61, 0, true);
	wait_for_queue(s, 1);
	kept = true;
	ck_assert_int_eq(store_transact(m, job_body, &mine, &kept), CS_EBUSY);
	ck_assert(!kept);
	ck_assert_int_eq(pthread_create(&st.t, NULL, stopper_main, &st), 0);
	struct store_writer_stats ws;
	do {
		usleep(1000);
		store_writer_stats(s, &ws);
	} while (!ws.stopping);
	store_set_write_queue(s, 8);
	ck_assert_int_eq(store_transact(m, job_body, &mine, &kept), CS_EBUSY);
	ck_assert(!__atomic_load_n(&st.done, __ATOMIC_SEQ_CST));   /* a holds the turn, j1 waits */
	sem_post(&a.go);
	caller_join(&a);
	pthread_join(j1.t, NULL);
	pthread_join(st.t, NULL);
	ck_assert_int_eq(a.commit_e, CS_OK);
	ck_assert_int_eq(j1.e, CS_OK);
	ck_assert(j1.kept);
	char *rows = count_rows(f.db);
	ck_assert_str_eq(rows, "60,61,69");
	free(rows);
	store_close(s);
	fx_clear(&f);
}
END_TEST

#define GC_THREADS 8
#define GC_PER_THREAD 40

struct many { struct store *s; int64_t base; enum cs_err e; };

static void *many_main(void *arg)
{
	struct many *x = arg;
	struct store_conn *c = store_conn(x->s);
	x->e = CS_OK;
	for (int64_t i = 0; i < GC_PER_THREAD && x->e == CS_OK; i++) {
		if ((x->e = store_begin(c)) != CS_OK)
			break;
		x->e = store_run(c, SQL_GC_INSERT, STORE_VALS(SV_INT(x->base + i)));
		if (x->e == CS_OK && (i % 7) == 3) {          /* every seventh one fails on purpose */
			store_rollback(c);
			continue;
		}
		if (x->e == CS_OK)
			x->e = store_commit(c);
		else
			store_rollback(c);
	}
	return NULL;
}

/* Many concurrent writers, some failing: every committed row is there, no
 * rolled-back one is, and the transactions were made durable by no more
 * COMMITs than there were transactions. */
START_TEST(test_store_group_commit_concurrent_writers)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct many m[GC_THREADS];
	pthread_t t[GC_THREADS];
	struct store_writer_stats before, after;
	store_writer_stats(s, &before);
	for (int i = 0; i < GC_THREADS; i++) {
		m[i] = (struct many){ .s = s, .base = (i + 1) * 1000 };
		ck_assert_int_eq(pthread_create(&t[i], NULL, many_main, &m[i]), 0);
	}
	for (int i = 0; i < GC_THREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < GC_THREADS; i++)
		ck_assert_int_eq(m[i].e, CS_OK);
	store_writer_stats(s, &after);
	int per = 0;
	for (int i = 0; i < GC_PER_THREAD; i++)
		per += (i % 7) != 3;
	ck_assert_uint_eq(after.transactions - before.transactions, (uint64_t)(GC_THREADS * per));
	ck_assert_uint_le(after.batches - before.batches, after.transactions - before.transactions);
	char *n = raw_query(f.db, "SELECT count(*) FROM bk");
	char want[32];
	ck_assert_int_eq(str_fmt(want, sizeof want, "%d", GC_THREADS * per), CS_OK);
	ck_assert_str_eq(n, want);
	free(n);
	n = raw_query(f.db, "SELECT count(*) FROM bk WHERE i % 1000 % 7 = 3");
	ck_assert_str_eq(n, "0");
	free(n);
	if (tu_pg_url == NULL) {             /* SQLite's own check of its file */
		n = raw_query(f.db, "PRAGMA integrity_check");
		ck_assert_str_eq(n, "ok");
		free(n);
	}
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* PostgreSQL: the open transaction's last statement at the server is a
 * count (what was sent after it has not reached the server); why names the
 * failure. */
static void last_statement_is_count(const char *why)
{
	char *q = tu_pg_sql(tu_pg_url, "SELECT query FROM pg_stat_activity WHERE "
	    "application_name = 'consentd' AND state = 'idle in transaction'", true);
	ck_assert_ptr_nonnull(q);
	ck_assert_msg(strstr(q, "count(*)") != NULL, "%s: %s", why, q);
	free(q);
}

/* store_run_later (PostgreSQL sends the write with the next statement or
 * the COMMIT): a later statement of the transaction sees the write; a write
 * that fails fails what follows it and the COMMIT, and nothing of the
 * transaction -- before or after it -- is committed; the connection serves
 * the next transaction; outside a transaction it runs at once. */
static const char SQL_BK_COUNT[] = "SELECT count(*) FROM bk";
START_TEST(test_store_run_later)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct store_conn *c = store_conn(s);
	int64_t n = -1;
	ck_assert_int_eq(store_begin(c), CS_OK);
	ck_assert_int_eq(store_run_later(c, SQL_BK_INSERT, STORE_VALS(SV_INT(1), SV_TEXT("a"))), CS_OK);
	ck_assert_int_eq(store_aggregate(c, SQL_BK_COUNT, NULL, 0, &n, 1), CS_OK);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(store_run_later(c, SQL_BK_INSERT, STORE_VALS(SV_INT(2), SV_TEXT("b"))), CS_OK);
	if (tu_pg_url != NULL) {
		/* The write (its statement prepared on the connection by the first)
		 * has not reached the server: it goes in the next statement's
		 * flight.  The server's last statement of this transaction is
		 * still the count. */
		last_statement_is_count("the write went alone");
	}
	ck_assert_int_eq(store_aggregate(c, SQL_BK_COUNT, NULL, 0, &n, 1), CS_OK);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(store_run_later(c, SQL_BK_INSERT, STORE_VALS(SV_INT(3), SV_TEXT("c"))), CS_OK);
	ck_assert_int_eq(store_commit(c), CS_OK);
	char *rows = count_rows(f.db);
	ck_assert_str_eq(rows, "1,2,3");
	free(rows);

	/* A key taken: on SQLite the write says so at once; on PostgreSQL the
	 * statement after it, or the COMMIT, fails instead. */
	ck_assert_int_eq(store_begin(c), CS_OK);
	ck_assert_int_eq(store_run(c, SQL_BK_INSERT, STORE_VALS(SV_INT(10), SV_TEXT("x"))), CS_OK);
	enum cs_err e = store_run_later(c, SQL_BK_INSERT, STORE_VALS(SV_INT(1), SV_TEXT("dup")));
	if (e == CS_OK)
		e = store_run_later(c, SQL_BK_INSERT, STORE_VALS(SV_INT(11), SV_TEXT("y")));
	if (e == CS_OK)
		e = store_commit(c);
	ck_assert_int_ne(e, CS_OK);
	store_rollback(c);
	rows = count_rows(f.db);
	ck_assert_str_eq(rows, "1,2,3");
	free(rows);
	/* ... and with a read after the failed write. */
	ck_assert_int_eq(store_begin(c), CS_OK);
	e = store_run_later(c, SQL_BK_INSERT, STORE_VALS(SV_INT(2), SV_TEXT("dup")));
	if (e == CS_OK) {
		e = store_aggregate(c, SQL_BK_COUNT, NULL, 0, &n, 1);
		ck_assert_int_ne(e, CS_OK);
		ck_assert_int_ne(e, CS_EEXIST);  /* not the read's own outcome */
	} else {
		ck_assert_int_eq(e, CS_EEXIST);
	}
	store_rollback(c);

	/* The connection goes on: a transaction, and a write outside one. */
	ck_assert_int_eq(store_begin(c), CS_OK);
	ck_assert_int_eq(store_run_later(c, SQL_BK_INSERT, STORE_VALS(SV_INT(4), SV_TEXT("d"))), CS_OK);
	ck_assert_int_eq(store_commit(c), CS_OK);
	ck_assert_int_eq(store_run_later(c, SQL_BK_INSERT, STORE_VALS(SV_INT(5), SV_TEXT("e"))), CS_OK);
	ck_assert_int_eq(store_run_later(c, SQL_BK_INSERT, STORE_VALS(SV_INT(5), SV_TEXT("e"))),
	    CS_EEXIST);
	rows = count_rows(f.db);
	ck_assert_str_eq(rows, "1,2,3,4,5");
	free(rows);
	/* More writes than one flight takes (PG_MAX_PENDING): all there. */
	ck_assert_int_eq(store_begin(c), CS_OK);
	for (int64_t i = 100; i < 250; i++)
		ck_assert_int_eq(store_run_later(c, SQL_BK_INSERT, STORE_VALS(SV_INT(i), SV_TEXT("m"))),
		    CS_OK);
	ck_assert_int_eq(store_commit(c), CS_OK);
	ck_assert_int_eq(store_aggregate(c, SQL_BK_COUNT, NULL, 0, &n, 1), CS_OK);
	ck_assert_int_eq(n, 155);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* The audit head inside a transaction that appended: its own last entry,
 * not read again (a batch of entries reads the head once); a relink makes
 * it read again; the next transaction reads the table. */
static const char SQL_AUDIT_COUNT[] = "SELECT count(*) FROM audit";
/* Many threads of one process append at once, each in its own transaction:
 * on PostgreSQL the process's chain head is kept between transactions
 * (migration 0028), and the next transaction must link to the last commit,
 * never to the one before it (a fork).  audit verify walks it. */
struct chain_worker {
	struct store *s;
	int           n;
	enum cs_err   e;
};

static void *chain_append_worker(void *arg)
{
	struct chain_worker *w = arg;
	struct store_conn *c = store_conn(w->s);
	const struct audit_entry ent = { .ts = 1700000000, .actor = "system", .action = "grant.issued",
	    .outcome = "ok" };
	w->e = c != NULL ? CS_OK : CS_EDB;
	for (int i = 0; i < w->n && w->e == CS_OK; i++) {
		enum cs_err e = store_begin(c);
		if (e == CS_OK && (e = audit_append(c, &ent)) == CS_OK)
			e = store_commit(c);
		else
			store_rollback(c);
		if (e != CS_OK && e != CS_EBUSY)
			w->e = e;
	}
	return NULL;
}

START_TEST(test_store_audit_chain_threads_no_fork)
{
	struct fixture f;
	struct store *s = NULL;
	struct chain_worker w[6];
	pthread_t t[6];
	struct master_key mk;
	struct audit_verify_result r;

	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	store_own_chains(s, true);
	ck_assert_int_eq(master_key_load(NULL, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", &mk),
	    CS_OK);
	ck_assert_int_eq(audit_set_master_key(&mk), CS_OK);
	for (int i = 0; i < 6; i++) {
		w[i] = (struct chain_worker){ .s = s, .n = 150 };
		ck_assert_int_eq(pthread_create(&t[i], NULL, chain_append_worker, &w[i]), 0);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(w[i].e, CS_OK);
	}
	ck_assert_int_eq(audit_verify(store_conn(s), &mk, NULL, &r), CS_OK);
	ck_assert_msg(r.ok == 1, "verify: %s at %" PRId64, r.why, r.broken);
	ck_assert_int_ge(r.entries, 6 * 150 / 2);
	audit_clear_key();
	master_key_clear(&mk);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* The same through store_transact, beside store_begin callers: the turn's
 * holder appends for the jobs it runs, each after the last one released
 * (the writer's remembered head), and the chain verifies without a fork. */
START_TEST(test_store_audit_chain_transact_no_fork)
{
	struct fixture f;
	struct store *s = NULL;
	struct chain_worker w[2];
	struct job j[4];
	pthread_t t[2];
	struct master_key mk;
	struct audit_verify_result r;

	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	store_own_chains(s, true);
	ck_assert_int_eq(master_key_load(NULL, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", &mk),
	    CS_OK);
	ck_assert_int_eq(audit_set_master_key(&mk), CS_OK);
	for (int i = 0; i < 2; i++) {
		w[i] = (struct chain_worker){ .s = s, .n = 100 };
		ck_assert_int_eq(pthread_create(&t[i], NULL, chain_append_worker, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		j[i] = (struct job){ .s = s, .keep = true, .audit = true, .times = 150 };
		ck_assert_int_eq(pthread_create(&j[i].t, NULL, job_main, &j[i]), 0);
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(w[i].e, CS_OK);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(j[i].t, NULL);
		ck_assert_int_eq(j[i].e, CS_OK);
		ck_assert(j[i].kept);
	}
	ck_assert_int_eq(audit_verify(store_conn(s), &mk, NULL, &r), CS_OK);
	ck_assert_msg(r.ok == 1, "verify: %s at %" PRId64, r.why, r.broken);
	ck_assert_int_ge(r.entries, (2 * 100 + 4 * 150) / 2);
	audit_clear_key();
	master_key_clear(&mk);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* SQLite's next number is one past the highest given; PostgreSQL's comes
 * from the process's block (migrations/pg/0028): above every number given,
 * and a new one at every ask. */
static void next_above(const struct store_audit_head *h)
{
	if (tu_pg_url == NULL)
		ck_assert_int_eq(h->next, h->seq + 1);
	else
		ck_assert_int_gt(h->next, h->seq);
}

START_TEST(test_store_audit_head_known)
{
	struct fixture f;
	struct store *s = NULL;
	struct store_audit_head h;
	unsigned char l1[STORE_AUDIT_LINK_LEN], l2[STORE_AUDIT_LINK_LEN], l3[STORE_AUDIT_LINK_LEN];
	struct store_audit_fields e = { .ts = 1700000000, .action = "test.entry" };
	int64_t n = -1;
	memset(l1, 1, sizeof l1);
	memset(l2, 2, sizeof l2);
	memset(l3, 3, sizeof l3);
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	ck_assert_int_eq(store_begin(c), CS_OK);
	/* PostgreSQL: the transaction's numbers in one round trip, before the
	 * heads below (SQLite: nothing to do). */
	ck_assert_int_eq(store_audit_reserve(c, 8), CS_OK);
	/* A chain of this process's own (chain 0 is closed on PostgreSQL). */
	ck_assert_int_eq(store_audit_chain_claim(c, 1700000000, &e.chain), CS_OK);
	ck_assert_int_eq(store_audit_head(c, &h), CS_OK);
	ck_assert_int_eq(h.seq, 0);
	ck_assert_int_eq(h.next, 1);
	ck_assert_int_eq(store_audit_append(c, &e, 1, l1, "mk"), CS_OK);
	ck_assert_int_eq(store_aggregate(c, SQL_AUDIT_COUNT, NULL, 0, &n, 1), CS_OK);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(store_audit_head(c, &h), CS_OK);
	ck_assert_int_eq(h.seq, 1);
	ck_assert_int_eq(h.next, 2);
	ck_assert_uint_eq(h.link_len, STORE_AUDIT_LINK_LEN);
	ck_assert_int_eq(memcmp(h.link, l1, sizeof l1), 0);
	if (tu_pg_url != NULL) {
		/* Nothing went to the server for that head: its last statement is the count. */
		last_statement_is_count("the head was read again");
	}
	ck_assert_int_eq(store_audit_append(c, &e, 2, l2, "mk"), CS_OK);
	ck_assert_int_eq(store_audit_head(c, &h), CS_OK);
	ck_assert_int_eq(h.seq, 2);
	ck_assert_int_eq(memcmp(h.link, l2, sizeof l2), 0);
	/* A relink (vault rekey) rewrites links: the head is read from the table. */
	ck_assert_int_eq(store_audit_set_link(c, 2, l3, "mk2"), CS_OK);
	ck_assert_int_eq(store_audit_head(c, &h), CS_OK);
	ck_assert_int_eq(h.seq, 2);
	next_above(&h);
	ck_assert_int_eq(memcmp(h.link, l3, sizeof l3), 0);
	ck_assert_int_eq(store_commit(c), CS_OK);
	ck_assert_int_eq(store_begin(c), CS_OK);
	ck_assert_int_eq(store_audit_head(c, &h), CS_OK);
	ck_assert_int_eq(h.seq, 2);
	next_above(&h);
	ck_assert_int_eq(memcmp(h.link, l3, sizeof l3), 0);
	store_rollback(c);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* Checkpoints run off the writer: past STORE_CHECKPOINT_PAGES in the WAL a
 * COMMIT wakes the checkpointer thread, which copies the WAL back (the
 * writer's own automatic checkpoint, which would stall every caller waiting
 * for the turn, is off), and the data stays whole. */
START_TEST(test_store_group_commit_checkpoint_off_the_writer)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct store_conn *c = store_conn(s);
	struct store_writer_stats ws;
	char v[3001];
	memset(v, 'x', sizeof v - 1);
	v[sizeof v - 1] = '\0';
	/* ~6 MB in 60 transactions: well past 1000 pages of 4 KiB. */
	for (int64_t t = 0; t < 60; t++) {
		ck_assert_int_eq(store_begin(c), CS_OK);
		for (int64_t i = 0; i < 30; i++)
			ck_assert_int_eq(store_run(c, SQL_BK_INSERT, STORE_VALS(SV_INT(t * 100 + i),
			    SV_TEXT(v))), CS_OK);
		ck_assert_int_eq(store_commit(c), CS_OK);
	}
	do {                                  /* the checkpointer runs on its own */
		usleep(2000);
		store_writer_stats(s, &ws);
	} while (ws.checkpoints == 0);
	char *n = raw_query(f.db, "SELECT count(*) FROM bk");
	ck_assert_str_eq(n, "1800");
	free(n);
	n = raw_query(f.db, "PRAGMA integrity_check");
	ck_assert_str_eq(n, "ok");
	free(n);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* A transaction inside a transaction is refused, and the outer one goes on. */
START_TEST(test_store_group_commit_nested_refused)
{
	struct fixture f;
	struct store *s = gc_open(&f);
	struct store_conn *c = store_conn(s);
	ck_assert_int_eq(store_begin(c), CS_OK);
	ck_assert_int_eq(store_begin(c), CS_EDB);
	ck_assert_int_eq(store_run(c, SQL_GC_INSERT, STORE_VALS(SV_INT(50))), CS_OK);
	ck_assert_int_eq(store_commit(c), CS_OK);
	ck_assert_int_eq(store_commit(c), CS_EDB);     /* none open */
	char *rows = count_rows(f.db);
	ck_assert_str_eq(rows, "50");
	free(rows);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* One schema contract: migrations/pg/ holds the PostgreSQL form of each
 * migration of migrations/, under the same name and version, and no other. */
START_TEST(test_store_migrations_one_contract)
{
	size_t n = 0, npg = 0;
	for (; embedded_migrations[n].name != NULL; n++)
		;
	for (; embedded_migrations_pg[npg].name != NULL; npg++)
		;
	ck_assert_uint_gt(n, 0);
	ck_assert_uint_eq(npg, n);
	for (size_t i = 0; i < n; i++)
		ck_assert_str_eq(embedded_migrations_pg[i].name, embedded_migrations[i].name);
}
END_TEST

/* The URL check of [database] url and `consentd db copy --to`. */
START_TEST(test_store_url_check)
{
	char why[160];
	ck_assert_int_eq(store_url_check("postgresql://consentd@db:5432/consentd", why, sizeof why),
	    CS_OK);
	ck_assert_int_eq(store_url_check("postgres:///x?host=/run/postgresql", why, sizeof why), CS_OK);
	ck_assert_int_eq(store_url_check("postgresql://u:pw@db/x", why, sizeof why), CS_ECONFIG);
	ck_assert_ptr_nonnull(strstr(why, "carries a password"));
	ck_assert_ptr_null(strstr(why, "pw@"));
	ck_assert_int_eq(store_url_check("postgresql://db/x?password=pw", why, sizeof why), CS_ECONFIG);
	ck_assert_int_eq(store_url_check("/var/lib/consentd/consentd.db", why, sizeof why), CS_ECONFIG);
	ck_assert_int_eq(store_url_check("postgresql://db/x?bogus=1", why, sizeof why), CS_ECONFIG);
	ck_assert_int_eq(store_url_check("postgresql://[::1/x", why, sizeof why), CS_ECONFIG);
	/* A store names its engine, and copies nothing into itself (a copy goes
	 * from SQLite into PostgreSQL only). */
	struct fixture f;
	fx_init(&f);
	struct store *s = NULL;
	struct store_copy_report r;
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	ck_assert_str_eq(store_engine_name(s), tu_pg_url != NULL ? "postgresql" : "sqlite");
	ck_assert_int_eq(store_copy(s, s, &r), CS_EINVAL);
	/* SQLite: one process, nothing to wait for; PostgreSQL: the key is free. */
	ck_assert_int_eq(store_flight_begin(store_conn(s), "k"), CS_OK);
	store_flight_end(store_conn(s));
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* --- rows: a row's text columns in one block (store_cols_text, #15) ------ */

static const char SQL_COLS_ALL[] = "SELECT 'alice', '', 42, 'sj\xc3\xb6 \xe2\x80\x94 x', 'eyJ.z'";
static const char SQL_COLS_SOME_NULL[] = "SELECT NULL, 'b', NULL, 'd', NULL";
static const char SQL_COLS_ALL_NULL[] = "SELECT NULL, NULL";

/* Steps sql (no parameters) to its one row on c. */
static struct store_stmt *one_row(struct store_conn *c, const char *sql)
{
	struct store_stmt *st = store_stmt(c, sql);
	ck_assert_ptr_nonnull(st);
	ck_assert_int_eq(store_step(c, st), CS_OK);
	return st;
}

/* Every column set: read back exactly, each NUL-terminated, one after the
 * other in one allocation (an integer column as its text). */
START_TEST(test_store_cols_text_all_set)
{
	struct fixture f;
	struct store *s = NULL;
	char *block = NULL, *a, *b, *n, *u, *j;
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	struct store_stmt *st = one_row(c, SQL_COLS_ALL);
	ck_assert_int_eq(store_cols_text(st, &block, STORE_TEXT_COLS({ 0, &a, true },
	    { 1, &b, true }, { 2, &n, true }, { 3, &u, true }, { 4, &j, false })), CS_OK);
	store_stmt_done(st);
	ck_assert_ptr_nonnull(block);
	ck_assert_str_eq(a, "alice");
	ck_assert_str_eq(b, "");
	ck_assert_str_eq(n, "42");
	ck_assert_str_eq(u, "sj\xc3\xb6 \xe2\x80\x94 x");
	ck_assert_str_eq(j, "eyJ.z");
	/* One block, in the order asked: the outs point into it. */
	ck_assert_ptr_eq(a, block);
	ck_assert_ptr_eq(b, a + 6);
	ck_assert_ptr_eq(n, b + 1);
	ck_assert_ptr_eq(u, n + 3);
	ck_assert_ptr_eq(j, u + strlen(u) + 1);
	free(block);                       /* the one free: ASan sees a leak otherwise */
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* NULL optional columns stay NULL pointers and take no room; a row whose
 * every column is NULL allocates nothing. */
START_TEST(test_store_cols_text_null_optional)
{
	struct fixture f;
	struct store *s = NULL;
	char *block = NULL, *a = (char *)"x", *b = NULL, *c3 = (char *)"x", *d = NULL, *e5 = (char *)"x";
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	struct store_stmt *st = one_row(c, SQL_COLS_SOME_NULL);
	ck_assert_int_eq(store_cols_text(st, &block, STORE_TEXT_COLS({ 0, &a, false },
	    { 1, &b, true }, { 2, &c3, false }, { 3, &d, true }, { 4, &e5, false })), CS_OK);
	store_stmt_done(st);
	ck_assert_ptr_null(a);
	ck_assert_ptr_null(c3);
	ck_assert_ptr_null(e5);
	ck_assert_str_eq(b, "b");
	ck_assert_str_eq(d, "d");
	ck_assert_ptr_eq(b, block);
	ck_assert_ptr_eq(d, b + 2);
	free(block);
	st = one_row(c, SQL_COLS_ALL_NULL);
	block = (char *)"x";
	ck_assert_int_eq(store_cols_text(st, &block, STORE_TEXT_COLS({ 0, &a, false },
	    { 1, &b, false })), CS_OK);
	store_stmt_done(st);
	ck_assert_ptr_null(block);
	ck_assert_ptr_null(a);
	ck_assert_ptr_null(b);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* A required column NULL (a damaged row): CS_EDB, and nothing stays
 * allocated -- no block, every out NULL, whatever was read before it. */
START_TEST(test_store_cols_text_required_null)
{
	struct fixture f;
	struct store *s = NULL;
	char *block = (char *)"x", *a = (char *)"x", *b = (char *)"x", *d = (char *)"x";
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	struct store_stmt *st = one_row(c, SQL_COLS_SOME_NULL);
	ck_assert_int_eq(store_cols_text(st, &block, STORE_TEXT_COLS({ 1, &b, true },
	    { 3, &d, true }, { 4, &a, true })), CS_EDB);
	store_stmt_done(st);
	ck_assert_ptr_null(block);
	ck_assert_ptr_null(a);
	ck_assert_ptr_null(b);
	ck_assert_ptr_null(d);
	store_close(s);
	fx_clear(&f);
}
END_TEST

#define ROWS_ISS "https://idp.test"

/* A user row for subject, and the consent k1 of it: fully set when full
 * (revoked, with an actor, a reason and its request), else live with the
 * optional columns NULL. */
static int64_t consent_fill(struct store_conn *c, bool full)
{
	int64_t uid = 0;
	ck_assert_int_eq(store_user_put(c, &(struct store_user){ .issuer = ROWS_ISS,
	    .subject = "alice", .now = 10 }, &uid), CS_OK);
	struct store_consent_row k = {
		.id = (char *)"k1", .user_id = uid, .agent = (char *)"coder",
		.resource = (char *)"notes", .granted = (char *)"notes:read notes:write",
		.declined = (char *)"", .offline = full, .created_at = 100, .expires_at = 5000,
		.revoked_at = full ? 200 : 0, .revoked_by = full ? (char *)"user:alice" : NULL,
		.revoke_reason = full ? (char *)"no longer needed" : NULL,
		.request_id = full ? (char *)"r1" : NULL,
	};
	ck_assert_int_eq(store_consent_insert(c, &k), CS_OK);
	/* An insert row's strings are the caller's (block NULL): clearing it
	 * frees none of them (these are literals). */
	store_consent_row_clear(&k);
	ck_assert_ptr_null(k.id);
	return uid;
}

START_TEST(test_store_consent_row_all_set)
{
	struct fixture f;
	struct store *s = NULL;
	struct store_consent_row r;
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	int64_t uid = consent_fill(c, true);
	ck_assert_int_eq(store_consent_touch(c, "k1", 150), CS_OK);
	ck_assert_int_eq(store_consent_get(c, "k1", &r), CS_OK);
	ck_assert_ptr_nonnull(r.block);
	ck_assert_ptr_eq(r.id, r.block);   /* the first column opens the block */
	ck_assert_str_eq(r.id, "k1");
	ck_assert_int_eq(r.user_id, uid);
	ck_assert_str_eq(r.subject, "alice");
	ck_assert_str_eq(r.agent, "coder");
	ck_assert_str_eq(r.resource, "notes");
	ck_assert_str_eq(r.granted, "notes:read notes:write");
	ck_assert_str_eq(r.declined, "");
	ck_assert_int_eq(r.offline, 1);
	ck_assert_int_eq(r.created_at, 100);
	ck_assert_int_eq(r.expires_at, 5000);
	ck_assert_int_eq(r.revoked_at, 200);
	ck_assert_str_eq(r.revoked_by, "user:alice");
	ck_assert_str_eq(r.revoke_reason, "no longer needed");
	ck_assert_str_eq(r.request_id, "r1");
	ck_assert_int_eq(r.reconnect_required, 0);
	ck_assert_int_eq(r.last_used_at, 150);
	store_consent_row_clear(&r);
	ck_assert_ptr_null(r.block);
	store_consent_row_clear(&r);       /* twice is fine */
	store_consent_row_clear(NULL);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* Issue 34: the grant and its consent in one statement, as introspection
 * reads them on every call: the same rows store_grant_get and
 * store_consent_get give, the grant's revocation seen, and CS_ENOENT (rows
 * untouched) for an unknown grant. */
START_TEST(test_store_consent_of_grant)
{
	struct fixture f;
	struct store *s = NULL;
	struct store_consent_row k, one;
	struct store_grant_row g;
	int changed = 0;
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	int64_t uid = consent_fill(c, true);
	ck_assert_int_eq(store_grant_insert(c, "j1", "k1", NULL, 120, 420), CS_OK);
	ck_assert_int_eq(store_consent_of_grant(c, "j1", &g, &k), CS_OK);
	ck_assert_str_eq(g.jti, "j1");
	ck_assert_str_eq(g.consent_id, "k1");
	ck_assert_int_eq(g.issued_at, 120);
	ck_assert_int_eq(g.expires_at, 420);
	ck_assert_int_eq(g.revoked_at, 0);
	ck_assert_int_eq(store_consent_get(c, "k1", &one), CS_OK);
	ck_assert_str_eq(k.id, one.id);
	ck_assert_int_eq(k.user_id, uid);
	ck_assert_str_eq(k.subject, "alice");
	ck_assert_str_eq(k.agent, one.agent);
	ck_assert_str_eq(k.resource, one.resource);
	ck_assert_str_eq(k.granted, one.granted);
	ck_assert_str_eq(k.declined, one.declined);
	ck_assert_int_eq(k.offline, one.offline);
	ck_assert_int_eq(k.created_at, one.created_at);
	ck_assert_int_eq(k.expires_at, one.expires_at);
	ck_assert_int_eq(k.revoked_at, one.revoked_at);
	ck_assert_str_eq(k.revoked_by, one.revoked_by);
	ck_assert_str_eq(k.revoke_reason, one.revoke_reason);
	ck_assert_str_eq(k.request_id, one.request_id);
	store_consent_row_clear(&one);
	store_consent_row_clear(&k);
	store_grant_row_clear(&g);

	ck_assert_int_eq(store_grant_revoke(c, "j1", 300, &changed), CS_OK);
	ck_assert_int_eq(changed, 1);
	ck_assert_int_eq(store_consent_of_grant(c, "j1", &g, &k), CS_OK);
	ck_assert_int_eq(g.revoked_at, 300);
	store_consent_row_clear(&k);
	store_grant_row_clear(&g);

	memset(&g, 0, sizeof g);
	memset(&k, 0, sizeof k);
	ck_assert_int_eq(store_consent_of_grant(c, "nope", &g, &k), CS_ENOENT);
	ck_assert_ptr_null(g.block);
	ck_assert_ptr_null(k.block);
	store_close(s);
	fx_clear(&f);
}
END_TEST

START_TEST(test_store_consent_row_null_optional)
{
	struct fixture f;
	struct store *s = NULL;
	struct store_consent_row *v = NULL;
	size_t n = 0;
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	int64_t uid = consent_fill(c, false);
	ck_assert_int_eq(store_consent_list_user(c, uid, 300, 10, &v, &n), CS_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0].id, "k1");
	ck_assert_str_eq(v[0].declined, "");
	ck_assert_ptr_null(v[0].revoked_by);
	ck_assert_ptr_null(v[0].revoke_reason);
	ck_assert_ptr_null(v[0].request_id);
	ck_assert_int_eq(v[0].revoked_at, 0);
	store_consent_rows_free(v, n);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* A consent row whose NOT NULL column is NULL (a damaged database: the table
 * made again without its constraints): CS_EDB, *out left zeroed, nothing
 * leaked (ASan, which sees every test: CK_FORK=no), and a listing and
 * consent_get refuse it alike. */
START_TEST(test_store_consent_row_damaged)
{
	struct fixture f;
	struct store *s = NULL;
	struct store_consent_row r, *v = NULL;
	struct consent k;
	size_t n = 7;
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	int64_t uid = consent_fill(c, true);
	free(raw_query(f.db, "ALTER TABLE consents RENAME TO consents_whole"));
	free(raw_query(f.db, "CREATE TABLE consents AS SELECT * FROM consents_whole"));
	free(raw_query(f.db, "UPDATE consents SET declined = NULL WHERE id = 'k1'"));
	memset(&r, 0x5a, sizeof r);
	ck_assert_int_eq(store_consent_get(c, "k1", &r), CS_EDB);
	ck_assert_ptr_null(r.block);
	ck_assert_ptr_null(r.id);
	ck_assert_int_eq(store_consent_list_user(c, uid, 300, 10, &v, &n), CS_EDB);
	ck_assert_ptr_null(v);
	ck_assert_uint_eq(n, 7);
	memset(&k, 0, sizeof k);
	ck_assert_int_eq(consent_get(c, "k1", 300, &k), CS_EDB);
	ck_assert_ptr_null(k.strings);
	/* Another required column, with the optional ones after it set. */
	free(raw_query(f.db, "UPDATE consents SET declined = '', granted = NULL WHERE id = 'k1'"));
	ck_assert_int_eq(store_consent_get(c, "k1", &r), CS_EDB);
	free(raw_query(f.db, "UPDATE consents SET granted = 'notes:read' WHERE id = 'k1'"));
	ck_assert_int_eq(store_consent_get(c, "k1", &r), CS_OK);
	ck_assert_str_eq(r.granted, "notes:read");
	store_consent_row_clear(&r);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* The strings of a consent (and of a request) outlive the row they were read
 * into: consent_get and consent_list_for_user clear or free their rows before
 * returning, so the block changed owner (k.strings), and consent_clear frees
 * it -- ASan would see a use after free or a leak otherwise. */
START_TEST(test_store_consent_strings_survive_row_clear)
{
	struct fixture f;
	struct store *s = NULL;
	struct consent k, *ks = NULL;
	struct consent_request q;
	size_t n = 0;
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	int64_t uid = consent_fill(c, true);
	ck_assert_int_eq(consent_get(c, "k1", 300, &k), CS_OK);
	ck_assert_ptr_nonnull(k.strings);
	ck_assert_ptr_eq(k.id, k.strings);
	ck_assert_str_eq(k.id, "k1");
	ck_assert_str_eq(k.subject, "alice");
	ck_assert_str_eq(k.agent, "coder");
	ck_assert_str_eq(k.resource, "notes");
	ck_assert_str_eq(k.revoked_by, "user:alice");
	ck_assert_str_eq(k.revoke_reason, "no longer needed");
	ck_assert_str_eq(k.request_id, "r1");
	ck_assert_str_eq(k.state, "revoked");
	ck_assert_uint_eq(k.granted.n, 2);
	ck_assert_int_eq(consent_revoker(&k), CONSENT_BY_PERSON);
	consent_clear(&k);
	ck_assert_ptr_null(k.strings);
	consent_clear(&k);                 /* twice is fine */
	consent_clear(NULL);
	ck_assert_int_eq(consent_list_for_user(c, uid, 300, 10, &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(ks[0].id, "k1");
	ck_assert_str_eq(ks[0].request_id, "r1");
	consent_list_free(ks, n);
	/* A request: its strings change owner the same way. */
	ck_assert_int_eq(store_creq_insert(c, &(struct store_creq_row){ .id = (char *)"r2",
	    .user_id = uid, .agent = (char *)"coder", .resource = (char *)"notes",
	    .scopes = (char *)"notes:read", .status = (char *)"pending", .created_at = 100,
	    .expires_at = 700, .last_poll_at = 100, .interval = 5 }), CS_OK);
	ck_assert_int_eq(consent_request_get(c, "r2", &q), CS_OK);
	ck_assert_ptr_eq(q.id, q.strings);
	ck_assert_str_eq(q.id, "r2");
	ck_assert_str_eq(q.subject, "alice");
	ck_assert_str_eq(q.status, "pending");
	ck_assert_ptr_null(q.reason);
	ck_assert_ptr_null(q.consent_id);
	ck_assert_ptr_null(q.narrowed);
	ck_assert_uint_eq(q.pre_granted.n, 0);
	consent_request_clear(&q);
	consent_request_clear(&q);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* --- PostgreSQL only ---------------------------------------------------- */

/* A server that is not there fails the open, and leaves nothing (SQLite's
 * form of this: test_store_open_bad_path_fails). */
START_TEST(test_store_pg_open_unreachable_fails)
{
	struct store *s = NULL;
	const struct store_opts o = { .schema = STORE_SCHEMA_MIGRATE };
	ck_assert_int_ne(store_open_with("postgresql:///consentd?host=/nonexistent/dir&user=postgres",
	    &o, &s), CS_OK);
	ck_assert_ptr_null(s);
	ck_assert_int_eq(store_open_with("", &o, &s), CS_EINVAL);
	ck_assert_ptr_null(s);
}
END_TEST

/* A shared database is migrated only by `consentd migrate`: a node that
 * requires the schema refuses an older one, one that waits opens but is
 * unready (store_ping) until it is migrated. */
START_TEST(test_store_pg_schema_policies)
{
	struct fixture f;
	struct store *s = NULL;
	fx_init(&f);
	ck_assert_int_eq(store_open_with(f.db, &(struct store_opts){ .schema = STORE_SCHEMA_REQUIRE },
	    &s), CS_ESCHEMA);
	ck_assert_ptr_null(s);
	ck_assert_int_eq(store_open(f.db, &s), CS_ESCHEMA);          /* REQUIRE is the default */
	ck_assert_int_eq(store_open_with(f.db, &(struct store_opts){ .schema = STORE_SCHEMA_WAIT },
	    &s), CS_OK);
	ck_assert_int_eq(store_ping(store_conn(s)), CS_ESCHEMA);
	struct store *m = NULL;
	ck_assert_int_eq(fx_open(&f, &m), CS_OK);                      /* consentd migrate */
	ck_assert_int_eq(store_ping(store_conn(s)), CS_OK);
	store_close(m);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* store_backup is SQLite's online copy: on PostgreSQL it refuses (pg_dump
 * and pg_basebackup are the tools there) and writes nothing. */
START_TEST(test_store_pg_backup_refused)
{
	struct fixture f;
	struct store *s = NULL;
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	char *copy = tu_path(f.dir, "copy.db");
	ck_assert_int_eq(store_backup(store_conn(s), copy), CS_EINVAL);
	ck_assert_int_ne(access(copy, F_OK), 0);
	ck_assert_int_eq(store_backup(NULL, copy), CS_EINVAL);
	free(copy);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* The _count and _sum of a histogram without labels (its name ends in
 * _seconds), from its rendering. */
static void histogram_read(struct metric_family *h, double *count, double *sum)
{
	struct buf b;
	buf_init(&b, 1 << 16);
	ck_assert_int_eq(metrics_render_family(&b, h), CS_OK);
	const char *c = strstr(b.data, "_seconds_count "), *m = strstr(b.data, "_seconds_sum ");
	ck_assert_ptr_nonnull(c);
	ck_assert_ptr_nonnull(m);
	*count = strtod(c + 15, NULL);
	*sum = strtod(m + 13, NULL);
	buf_clear(&b);
}

/* The value of a counter without labels, from its rendering. */
static double counter_read(struct metric_family *m, const char *name)
{
	struct buf b;
	char want[96];
	buf_init(&b, 1 << 12);
	ck_assert_int_eq(metrics_render_family(&b, m), CS_OK);
	ck_assert_int_eq(str_fmt(want, sizeof want, "\n%s ", name), CS_OK);
	const char *v = strstr(b.data, want);
	ck_assert_msg(v != NULL, "%s not in:\n%s", name, b.data);
	double n = strtod(v + strlen(want), NULL);
	buf_clear(&b);
	return n;
}

struct lock_waiter {
	struct store *s;
	enum cs_err   begin, commit;
};

static void *lock_waiter_main(void *arg)
{
	struct lock_waiter *w = arg;
	struct store_conn *c = store_conn(w->s);
	w->begin = store_begin(c);
	w->commit = w->begin == CS_OK ? store_commit(c) : CS_EDB;
	return NULL;
}

/* The writer turn is the process's, not the cluster's.  Two nodes on one
 * database (two stores): while one holds a transaction open, the other's
 * begins and commits without waiting for it (no wait in
 * consentd_db_lock_wait_seconds; had it waited, this thread's join would
 * come only after the first node's COMMIT below, or the turn's 5 s bound).
 * Two connections of the same node do wait for each other: one wait, about
 * as long as the holder kept the turn; consentd_db_lock_hold_seconds has
 * every transaction. */
START_TEST(test_store_pg_lock_wait_counted)
{
	struct fixture f;
	struct store *a = NULL, *b = NULL;
	double w0, ws0, h0, hs0, w1, ws1, h1, hs1;
	pthread_t t;
	fx_init(&f);
	ck_assert_int_eq(metrics_declare_consentd(), CS_OK);
	ck_assert_int_eq(fx_open(&f, &a), CS_OK);
	ck_assert_ptr_nonnull(metric[M_DB_LOCK_WAIT]);
	ck_assert_int_eq(store_open(f.db, &b), CS_OK);
	histogram_read(metric[M_DB_LOCK_WAIT], &w0, &ws0);
	histogram_read(metric[M_DB_LOCK_HOLD], &h0, &hs0);
	struct store_conn *c = store_conn(a);
	ck_assert_int_eq(store_begin(c), CS_OK);
	usleep(200000);
	/* The other node, while this one's transaction is open. */
	struct lock_waiter lw = { .s = b, .begin = CS_EDB, .commit = CS_EDB };
	ck_assert_int_eq(pthread_create(&t, NULL, lock_waiter_main, &lw), 0);
	pthread_join(t, NULL);
	ck_assert_int_eq(lw.begin, CS_OK);
	ck_assert_int_eq(lw.commit, CS_OK);
	histogram_read(metric[M_DB_LOCK_WAIT], &w1, &ws1);
	ck_assert_msg(w1 - w0 == 0, "the other node waited: %g waits, %g s", w1 - w0, ws1 - ws0);
	ck_assert_int_eq(store_commit(c), CS_OK);
	histogram_read(metric[M_DB_LOCK_HOLD], &h1, &hs1);
	ck_assert_msg(h1 - h0 == 2, "turns held counted: %g", h1 - h0);
	ck_assert_msg(hs1 - hs0 >= 0.2, "the turns were held %g s", hs1 - hs0);

	/* The same node's second connection waits for the first. */
	ck_assert_int_eq(store_begin(c), CS_OK);
	lw = (struct lock_waiter){ .s = a, .begin = CS_EDB, .commit = CS_EDB };
	ck_assert_int_eq(pthread_create(&t, NULL, lock_waiter_main, &lw), 0);
	/* Until it queues for the turn (bounded: a store without a turn would
	 * never queue, and the counts below say so). */
	struct store_writer_stats ws = { .waiting = 0 };
	for (int i = 0; i < 1000 && ws.waiting == 0; i++) {
		usleep(10000);
		store_writer_stats(a, &ws);
	}
	usleep(200000);
	ck_assert_int_eq(store_commit(c), CS_OK);
	pthread_join(t, NULL);
	ck_assert_int_eq(lw.begin, CS_OK);
	ck_assert_int_eq(lw.commit, CS_OK);
	histogram_read(metric[M_DB_LOCK_WAIT], &w1, &ws1);
	histogram_read(metric[M_DB_LOCK_HOLD], &h1, &hs1);
	ck_assert_msg(w1 - w0 == 1, "turn waits counted: %g", w1 - w0);
	ck_assert_msg(ws1 - ws0 >= 0.2, "the wait lasted %g s", ws1 - ws0);
	ck_assert_msg(h1 - h0 == 4, "turns held counted: %g", h1 - h0);
	/* A transaction that takes the turn at once does not wait. */
	ck_assert_int_eq(store_begin(c), CS_OK);
	store_rollback(c);
	histogram_read(metric[M_DB_LOCK_WAIT], &w1, &ws1);
	histogram_read(metric[M_DB_LOCK_HOLD], &h1, &hs1);
	ck_assert_msg(w1 - w0 == 1, "turn waits counted: %g", w1 - w0);
	ck_assert_msg(h1 - h0 == 5, "turns held counted: %g", h1 - h0);
	store_close(b);
	store_close(a);
	metrics_reset();
	fx_clear(&f);
}
END_TEST

/* SECURITY: a read-check-write is safe across nodes.  The classic write
 * skew: two nodes (two stores) each check that nobody holds a duty (no bk
 * row with v the duty) and, finding nobody, take it (each its own row, so
 * no key and no row lock stands in the way).  At READ COMMITTED both would
 * commit and break the rule; at SERIALIZABLE exactly one commits and the
 * other fails with CS_EBUSY (a 503) -- at its COMMIT when both wrote before
 * either committed, at its INSERT when the other had committed already --
 * leaving nothing behind, counted once in consentd_db_conflicts_total.  A
 * COMMIT that failed ended the transaction and gave the writer turn back
 * without a store_rollback: the same connection begins again at once. */
static const char SQL_DUTY_COUNT[] = "SELECT count(*) FROM bk WHERE v = ?1";
static const char SQL_DUTY_TAKE[] = "INSERT INTO bk (i, v) VALUES (?1, ?2)";

/* One round on cs[0] and cs[1] (two stores): both read, then both write
 * and commit, or (first_commits) the first writes and commits before the
 * second writes.  e[i]: how each ended; commit_failed[i]: at its COMMIT. */
static void duty_round(struct store_conn *cs[2], const char *duty, int64_t row0,
    bool first_commits, enum cs_err e[2], bool commit_failed[2])
{
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(store_begin(cs[i]), CS_OK);
	for (int i = 0; i < 2; i++) {
		int64_t n = -1;
		ck_assert_int_eq(store_aggregate(cs[i], SQL_DUTY_COUNT, STORE_VALS(SV_TEXT(duty)), &n, 1),
		    CS_OK);
		ck_assert_int_eq(n, 0);
		commit_failed[i] = false;
	}
	for (int i = 0; i < 2; i++) {
		e[i] = store_run(cs[i], SQL_DUTY_TAKE, STORE_VALS(SV_INT(row0 + i), SV_TEXT(duty)));
		if (i == 0 && !first_commits)
			continue;
		if (e[i] != CS_OK)
			store_rollback(cs[i]);      /* a statement failed: the caller rolls back */
		else if ((e[i] = store_commit(cs[i])) != CS_OK)
			commit_failed[i] = true;    /* no store_rollback: the COMMIT ended it */
	}
	if (!first_commits) {
		if (e[0] != CS_OK)
			store_rollback(cs[0]);
		else if ((e[0] = store_commit(cs[0])) != CS_OK)
			commit_failed[0] = true;
	}
}

/* BEGIN is sent before the process's writer turn is taken (one round trip
 * less inside the turn): the transaction's snapshot must still come after
 * the turn, so that it sees what the turn's last holder committed -- a
 * read-check-write of this process never acts on a stale read.  A thread
 * holds the turn with a row written; the main thread begins meanwhile (its
 * BEGIN already gone), and once it has the turn it must see that row. */
struct turn_holder {
	struct store *s;
	sem_t         wrote;
	enum cs_err   e;
};

static void *turn_hold(void *arg)
{
	struct turn_holder *h = arg;
	struct store_conn *c = store_conn(h->s);
	h->e = store_begin(c);
	if (h->e == CS_OK)
		h->e = store_run(c, SQL_BK_INSERT, STORE_VALS(SV_INT(1), SV_TEXT("first")));
	sem_post(&h->wrote);
	usleep(200 * 1000);
	if (h->e == CS_OK)
		h->e = store_commit(c);
	else
		store_rollback(c);
	return NULL;
}

START_TEST(test_store_pg_snapshot_after_turn)
{
	struct fixture f;
	struct store *s = NULL;
	struct turn_holder h;
	pthread_t t;
	int64_t n = -1;
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	ck_assert_int_eq(store_run(c, SQL_BK_CREATE, NULL, 0), CS_OK);
	h.s = s;
	h.e = CS_EDB;
	ck_assert_int_eq(sem_init(&h.wrote, 0, 0), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, turn_hold, &h), 0);
	sem_wait(&h.wrote);
	ck_assert_int_eq(store_begin(c), CS_OK);         /* waits for the holder's COMMIT */
	ck_assert_int_eq(store_aggregate(c, SQL_BK_COUNT, NULL, 0, &n, 1), CS_OK);
	ck_assert_msg(n == 1, "the snapshot predates the turn: %lld rows seen", (long long)n);
	ck_assert_int_eq(store_run(c, SQL_BK_INSERT, STORE_VALS(SV_INT(2), SV_TEXT("second"))), CS_OK);
	ck_assert_int_eq(store_commit(c), CS_OK);
	pthread_join(t, NULL);
	ck_assert_int_eq(h.e, CS_OK);
	sem_destroy(&h.wrote);
	store_close(s);
	fx_clear(&f);
}
END_TEST

/* Migration 0028 closes chain 0 on PostgreSQL: an entry of it (what a
 * consentd of an earlier release writes after the migration) is refused, and
 * nothing of its transaction stays; a chain of the process's own is taken. */
START_TEST(test_store_pg_chain_zero_closed)
{
	struct fixture f;
	struct store *s = NULL;
	unsigned char l[STORE_AUDIT_LINK_LEN];
	struct store_audit_fields e = { .ts = 1700000000, .action = "test.entry" };
	int64_t n = -1;
	memset(l, 7, sizeof l);
	fx_init(&f);
	ck_assert_int_eq(fx_open(&f, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	ck_assert_int_eq(store_begin(c), CS_OK);
	enum cs_err r = store_audit_append(c, &e, 1, l, "mk");
	if (r == CS_OK)
		r = store_commit(c);
	else
		store_rollback(c);
	ck_assert_msg(r != CS_OK, "an entry of chain 0 was taken on PostgreSQL");
	ck_assert_int_eq(store_aggregate(c, SQL_AUDIT_COUNT, NULL, 0, &n, 1), CS_OK);
	ck_assert_int_eq(n, 0);
	/* The process's own chain is taken. */
	ck_assert_int_eq(store_begin(c), CS_OK);
	ck_assert_int_eq(store_audit_chain_claim(c, 1700000000, &e.chain), CS_OK);
	ck_assert_int_gt(e.chain, 0);
	ck_assert_int_eq(store_audit_append(c, &e, 2, l, "mk"), CS_OK);
	ck_assert_int_eq(store_commit(c), CS_OK);
	ck_assert_int_eq(store_aggregate(c, SQL_AUDIT_COUNT, NULL, 0, &n, 1), CS_OK);
	ck_assert_int_eq(n, 1);
	store_close(s);
	fx_clear(&f);
}
END_TEST

START_TEST(test_store_pg_write_skew_one_commits)
{
	struct fixture f;
	struct store *a = NULL, *b = NULL;
	static const char *const duties[2] = { "oncall", "standby" };
	fx_init(&f);
	ck_assert_int_eq(metrics_declare_consentd(), CS_OK);
	ck_assert_ptr_nonnull(metric[M_DB_CONFLICTS]);
	ck_assert_int_eq(fx_open(&f, &a), CS_OK);
	ck_assert_int_eq(store_open(f.db, &b), CS_OK);
	/* One thread holds a connection of each store: both nodes'
	 * transactions are open at once, in an order known, not raced. */
	struct store_conn *cs[2] = { store_conn(a), store_conn(b) };
	ck_assert_int_eq(store_run(cs[0], SQL_BK_CREATE, NULL, 0), CS_OK);
	for (int round = 0; round < 2; round++) {
		enum cs_err e[2];
		bool commit_failed[2];
		char sql[96];
		double k0 = counter_read(metric[M_DB_CONFLICTS], "consentd_db_conflicts_total");
		duty_round(cs, duties[round], 10 * (round + 1), round == 1, e, commit_failed);
		ck_assert_msg((e[0] == CS_OK) + (e[1] == CS_OK) == 1, "%s: committed: a %d, b %d",
		    duties[round], e[0], e[1]);
		ck_assert_int_eq(e[0] == CS_OK ? e[1] : e[0], CS_EBUSY);
		/* Both wrote before either committed: the one found last fails at
		 * its COMMIT; the first had committed: the second fails at its write. */
		ck_assert_msg((commit_failed[0] || commit_failed[1]) == (round == 0),
		    "%s: the loser failed at %s", duties[round], round == 0 ? "a statement, not its "
		    "COMMIT" : "its COMMIT, not its write");
		ck_assert_int_eq(str_fmt(sql, sizeof sql, "SELECT string_agg(i::text, ',' ORDER BY i) "
		    "FROM bk WHERE v = '%s'", duties[round]), CS_OK);
		char *n = raw_query(f.db, sql);
		char want[24];
		ck_assert_int_eq(str_fmt(want, sizeof want, "%d", 10 * (round + 1) + (e[0] == CS_OK ? 0 : 1)),
		    CS_OK);
		ck_assert_str_eq(n, want);
		free(n);
		double k1 = counter_read(metric[M_DB_CONFLICTS], "consentd_db_conflicts_total");
		ck_assert_msg(k1 - k0 == 1, "%s: conflicts counted: %g", duties[round], k1 - k0);
		/* Nothing half done: each connection begins again at once, and sees
		 * the duty taken (the loser would now be refused by its own check). */
		for (int i = 0; i < 2; i++) {
			int64_t m = -1;
			ck_assert_msg(store_begin(cs[i]) == CS_OK, "%s: begin again (%s)", duties[round],
			    commit_failed[i] ? "after a failed COMMIT" : "after its rollback or commit");
			ck_assert_int_eq(store_aggregate(cs[i], SQL_DUTY_COUNT,
			    STORE_VALS(SV_TEXT(duties[round])), &m, 1), CS_OK);
			ck_assert_int_eq(m, 1);
			ck_assert_int_eq(store_commit(cs[i]), CS_OK);
		}
	}
	store_close(b);
	store_close(a);
	metrics_reset();
	fx_clear(&f);
}
END_TEST

static Suite *store_suite(void)
{
	Suite *s = suite_create(tu_pg_url != NULL ? "store (postgresql)" : "store (sqlite)");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_store_migrate_fresh);
	tcase_add_test(tc, test_store_migrations_one_contract);
	tcase_add_test(tc, test_store_url_check);
	tcase_add_test(tc, test_store_migrate_reopen_idempotent);
	tcase_add_test(tc, test_store_migrate_newer_eschema);
	tcase_add_test(tc, test_store_keys_roundtrip);
	tcase_add_test(tc, test_store_keys_list_every_row);
	tcase_add_test(tc, test_store_row_shorter_than_its_members_refused);
	tcase_add_test(tc, test_store_stmt_cache_by_address);
	tcase_add_test(tc, test_store_user_put_login_or_ensure);
	tcase_add_test(tc, test_store_tx_rollback);
	tcase_add_test(tc, test_store_conn_per_thread);
	if (tu_pg_url == NULL) {
		/* SQLite only: WAL is the journal mode of its file (PostgreSQL's WAL
		 * is the server's, no setting of ours); a location is a file path;
		 * store_backup is its online backup API. */
		tcase_add_test(tc, test_store_wal_on);
		tcase_add_test(tc, test_store_savepoint_journal_in_memory);
		tcase_add_test(tc, test_store_open_bad_path_fails);
		tcase_add_test(tc, test_store_backup_copy);
	} else {
		/* PostgreSQL's forms of those, and the schema policies of a
		 * database many nodes share (SQLite always migrates its file). */
		tcase_add_test(tc, test_store_pg_open_unreachable_fails);
		tcase_add_test(tc, test_store_pg_backup_refused);
		tcase_add_test(tc, test_store_pg_schema_policies);
		tcase_add_test(tc, test_store_pg_lock_wait_counted);
		tcase_add_test(tc, test_store_pg_write_skew_one_commits);
		tcase_add_test(tc, test_store_pg_snapshot_after_turn);
		tcase_add_test(tc, test_store_pg_chain_zero_closed);
	}
	suite_add_tcase(s, tc);
	tc = tcase_create("rows");
	tcase_add_test(tc, test_store_cols_text_all_set);
	tcase_add_test(tc, test_store_cols_text_null_optional);
	tcase_add_test(tc, test_store_cols_text_required_null);
	tcase_add_test(tc, test_store_consent_row_all_set);
	tcase_add_test(tc, test_store_consent_of_grant);
	tcase_add_test(tc, test_store_consent_row_null_optional);
	tcase_add_test(tc, test_store_consent_row_damaged);
	tcase_add_test(tc, test_store_consent_strings_survive_row_clear);
	suite_add_tcase(s, tc);
	tc = tcase_create("group_commit");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_store_group_commit_batches_callers);
	tcase_add_test(tc, test_store_group_commit_acknowledged_is_committed);
	tcase_add_test(tc, test_store_group_commit_failure_rolls_back_alone);
	tcase_add_test(tc, test_store_group_commit_queue_full);
	tcase_add_test(tc, test_store_group_commit_concurrent_writers);
	tcase_add_test(tc, test_store_transact_one_holder_runs_the_queue);
	tcase_add_test(tc, test_store_transact_queue_full_nested_and_stop);
	tcase_add_test(tc, test_store_linger_jobs_join_requests_under_way);
	tcase_add_test(tc, test_store_linger_job_keeps_the_time);
	tcase_add_test(tc, test_store_transact_mixed_under_load);
	tcase_add_test(tc, test_store_group_commit_nested_refused);
	tcase_add_test(tc, test_store_replay_survives_a_fast_clock);
	/* store_stop drains the writer queue of the process on both engines
	 * (PostgreSQL's writer turn is the process's too). */
	tcase_add_test(tc, test_store_group_commit_stop_drains);
	if (tu_pg_url == NULL) {
		/* SQLite only: checkpoints copy SQLite's WAL into its file. */
		tcase_add_test(tc, test_store_group_commit_checkpoint_off_the_writer);
		/* SQLite only: PostgreSQL's group commit is the server's. */
		tcase_add_test(tc, test_store_linger_joins_requests_under_way);
		tcase_add_test(tc, test_store_linger_time_up_commits);
		tcase_add_test(tc, test_store_linger_not_alone);
		tcase_add_test(tc, test_store_wal_restart_bounds_the_wal);
		tcase_add_test(tc, test_store_wal_restart_long_reader);
		tcase_add_test(tc, test_store_checkpoint_per_thousand_pages);
	}
	tcase_add_test(tc, test_store_run_later);
	tcase_add_test(tc, test_store_audit_head_known);
	tcase_add_test(tc, test_store_audit_chain_threads_no_fork);
	tcase_add_test(tc, test_store_audit_chain_transact_no_fork);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_store_run(store_suite);
}
