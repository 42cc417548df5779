/* test_store.c -- the store: migrations (fresh, repeated, too new), WAL, the
 * statement cache, the signing-key and user rows, and per-thread connections.
 * A database newer than the binary must never be opened for use. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>

#include "buf.h"
#include "embed.h"
#include "testutil.h"
#include "store.h"
#include "store_keys.h"
#include "store_user.h"
#include "../../server/store_priv.h"   /* the statement cache, tested from outside */

struct fixture {
	char *dir;
	char *db;
};

static void fx_init(struct fixture *f)
{
	f->dir = tu_tmpdir();
	f->db = tu_path(f->dir, "consentd.db");
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
	sqlite3 *h = NULL;
	sqlite3_stmt *st = NULL;
	char *res = NULL;
	ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
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
	ck_assert_int_eq(store_open(f.db, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(store_schema_version(c, &v), CS_OK);
	ck_assert_int_eq(v, store_schema_known());
	ck_assert_int_eq(store_ping(c), CS_OK);
	store_close(s);
	/* the tables of 0001 are there */
	char *n = raw_query(f.db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
	    "AND name IN ('signing_keys', 'users', 'schema_version')");
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
	ck_assert_int_eq(store_open(f.db, &s), CS_OK);
	store_close(s);
	s = NULL;
	ck_assert_int_eq(store_open(f.db, &s), CS_OK);
	ck_assert_int_eq(store_schema_version(store_conn(s), &v), CS_OK);
	ck_assert_int_eq(v, store_schema_known());
	store_close(s);
	/* Each migration recorded once.  Counted, not taken from the highest
	 * version: numbers may have gaps while branches that add one are merged. */
	char *n = raw_query(f.db, "SELECT count(*) FROM schema_version");
	char want[16];
	int nmig = 0;
	for (const struct embedded_file *m = embedded_migrations; m->name != NULL; m++)
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
	ck_assert_int_eq(store_open(f.db, &s), CS_OK);
	store_close(s);
	s = NULL;
	free(raw_query(f.db, "INSERT INTO schema_version (version, applied_at) VALUES (9999, 1)"));
	ck_assert_int_eq(store_open(f.db, &s), CS_ESCHEMA);
	ck_assert_ptr_null(s);
	fx_clear(&f);
}
END_TEST

START_TEST(test_store_wal_on)
{
	struct fixture f;
	struct store *s = NULL;
	fx_init(&f);
	ck_assert_int_eq(store_open(f.db, &s), CS_OK);
	char *m = raw_query(f.db, "PRAGMA journal_mode");
	ck_assert_str_eq(m, "wal");
	free(m);
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
	ck_assert_int_eq(store_open(f.db, &s), CS_OK);
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
	ck_assert_int_eq(store_open(f.db, &s), CS_OK);
	struct store_conn *c = store_conn(s);
	/* The statements prepared already (begin, commit, schema, ping) share
	 * the room: fill what is left, then ask for each again. */
	ck_assert_int_eq(store_ping(c), CS_OK);
	sqlite3_stmt *first = store_stmt(c, many_sql[0]);
	ck_assert_ptr_nonnull(first);
	ck_assert_ptr_eq(store_stmt(c, many_sql[0]), first);   /* cached, not prepared again */
	int got = 1;
	while (got <= STORE_MAX_STMTS && store_stmt(c, many_sql[got]) != NULL)
		got++;
	ck_assert_int_lt(got, STORE_MAX_STMTS + 1);            /* the cap holds: NULL, no overflow */
	ck_assert_int_gt(got, STORE_MAX_STMTS / 2);
	for (int i = 0; i < got; i++) {
		sqlite3_stmt *st = store_stmt(c, many_sql[i]);
		ck_assert_ptr_nonnull(st);
		ck_assert_int_eq(store_step(c, st), CS_OK);
		ck_assert_int_eq(sqlite3_column_int(st, 0), i);
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
	ck_assert_int_eq(store_open(f.db, &s), CS_OK);
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
	ck_assert_int_eq(store_open(f.db, &s), CS_OK);
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
	ck_assert_int_eq(store_open(f.db, &s), CS_OK);
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
	ck_assert_int_eq(store_open(f.db, &s), CS_OK);
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

static Suite *store_suite(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_store_migrate_fresh);
	tcase_add_test(tc, test_store_migrate_reopen_idempotent);
	tcase_add_test(tc, test_store_migrate_newer_eschema);
	tcase_add_test(tc, test_store_wal_on);
	tcase_add_test(tc, test_store_open_bad_path_fails);
	tcase_add_test(tc, test_store_keys_roundtrip);
	tcase_add_test(tc, test_store_stmt_cache_by_address);
	tcase_add_test(tc, test_store_user_put_login_or_ensure);
	tcase_add_test(tc, test_store_tx_rollback);
	tcase_add_test(tc, test_store_conn_per_thread);
	tcase_add_test(tc, test_store_backup_copy);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(store_suite());
}
