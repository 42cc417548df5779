/* test_store_audit_feed.c -- the admin API's audit listing as an exporter
 * tails it (GET /admin/api/audit?cursor=, admin_audit_query): every entry
 * once, in order, resuming from the cursor of the page before.
 *
 * On PostgreSQL nodes write side by side, and an entry's number (seq) comes
 * from audit's sequence before its transaction commits, so a larger number
 * may commit first.  Two stores on one database stand for two nodes: node A
 * appends an entry and holds its transaction open, node B appends one (a
 * larger number) and commits; the exporter reads; then A commits, and reading
 * on from the exporter's cursor must return A's entry (migration 0030: the
 * listing stops below the oldest running transaction).
 *
 * On both engines, as test_store.c: with CONSENTD_TEST_DATABASE_URL set to a
 * postgresql:// URL (scripts/run-store-pg.sh) every test runs on that
 * database, emptied before each; otherwise on a fresh SQLite file (one
 * writer: the paging alone). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <jansson.h>

#include "admin.h"
#include "audit.h"
#include "buf.h"
#include "store.h"
#include "testutil.h"
#include "tu_store.h"

#define T0 1700000000LL

/* An exporter: its cursor (NULL: from the start), and the actions of the
 * entries it was given, in order, joined by spaces. */
struct exporter {
	char cursor[64];
	bool has_cursor;
	char seen[1024];
};

/* One page of at most limit entries from the exporter's cursor, as its
 * loop would read it: each entry's action noted, the cursor moved to the
 * page's next_cursor, or -- where that is null and entries came, which an
 * exporter of the old contract had to do -- to the last entry's seq.  The
 * number of entries. */
static size_t exporter_read(struct exporter *x, struct store_conn *c, int64_t limit)
{
	json_t *res = NULL, *e;
	size_t i, n;
	ck_assert_int_eq(admin_audit_query(c, NULL, x->has_cursor ? x->cursor : NULL, limit, &res),
	    CS_OK);
	json_t *entries = json_object_get(res, "entries");
	json_t *next = json_object_get(res, "next_cursor");
	n = json_array_size(entries);
	json_array_foreach(entries, i, e) {
		size_t len = strlen(x->seen);
		ck_assert_int_eq(str_fmt(x->seen + len, sizeof x->seen - len, "%s%s",
		    len ? " " : "", json_string_value(json_object_get(e, "action"))), CS_OK);
	}
	if (json_is_string(next)) {
		ck_assert_int_eq(str_fmt(x->cursor, sizeof x->cursor, "%s", json_string_value(next)),
		    CS_OK);
		x->has_cursor = true;
	} else if (n > 0) {
		ck_assert_int_eq(str_fmt(x->cursor, sizeof x->cursor, "%lld", (long long)json_integer_value(
		    json_object_get(json_array_get(entries, n - 1), "seq"))), CS_OK);
		x->has_cursor = true;
	}
	json_decref(res);
	return n;
}

/* Reads pages of limit until one is empty; the entries read. */
static size_t exporter_drain(struct exporter *x, struct store_conn *c, int64_t limit)
{
	size_t all = 0, n;
	while ((n = exporter_read(x, c, limit)) > 0)
		all += n;
	return all;
}

static void fx_init(struct tu_store *f)
{
	audit_set_key((const unsigned char[32]){ 0 }, "test");
	tu_store_init(f, T0);
	ck_assert_int_eq(audit_chain_open(f->c, T0), CS_OK);
}

static enum cs_err note(struct store_conn *c, const char *action)
{
	return audit_append(c, &(struct audit_entry){ .ts = T0, .actor = "system",
	    .action = action, .outcome = "ok" });
}

/* Both engines: pages of 2 from the start until an empty one; each entry
 * once and in order; a cursor comes with every page that had entries (a short
 * one too: where to resume), none with an empty one (the cursor is kept). */
START_TEST(test_store_audit_feed_pages)
{
	struct tu_store f;
	struct exporter x = { .has_cursor = false }, y = { .has_cursor = false };
	json_t *res = NULL;
	/* On PostgreSQL the node's chain opens with an entry of its own. */
	const char *opened = tu_pg_url != NULL ? "audit.chain.opened " : "";
	char want[256];
	fx_init(&f);
	for (int i = 0; i < 5; i++) {
		char a[32];
		ck_assert_int_eq(str_fmt(a, sizeof a, "test.e%d", i), CS_OK);
		ck_assert_int_eq(store_begin(f.c), CS_OK);
		ck_assert_int_eq(note(f.c, a), CS_OK);
		ck_assert_int_eq(store_commit(f.c), CS_OK);
	}
	ck_assert_uint_eq(exporter_read(&x, f.c, 2), 2);
	ck_assert_uint_eq(exporter_drain(&x, f.c, 2), tu_pg_url != NULL ? 4 : 3);
	char before[64];
	memcpy(before, x.cursor, sizeof before);
	ck_assert_uint_eq(exporter_read(&x, f.c, 50), 0);
	ck_assert_str_eq(x.cursor, before);                /* null: keep it */
	ck_assert_int_eq(str_fmt(want, sizeof want, "%stest.e0 test.e1 test.e2 test.e3 test.e4",
	    opened), CS_OK);
	ck_assert_str_eq(x.seen, want);
	/* A short page: its cursor resumes after its last entry. */
	ck_assert_int_eq(admin_audit_query(f.c, NULL, NULL, 50, &res), CS_OK);
	ck_assert(json_is_string(json_object_get(res, "next_cursor")));
	json_decref(res);
	ck_assert_uint_eq(exporter_read(&y, f.c, 50), tu_pg_url != NULL ? 6 : 5);
	ck_assert_uint_eq(exporter_read(&y, f.c, 50), 0);
	ck_assert_int_eq(store_begin(f.c), CS_OK);
	ck_assert_int_eq(note(f.c, "test.e5"), CS_OK);
	ck_assert_int_eq(store_commit(f.c), CS_OK);
	ck_assert_uint_eq(exporter_read(&y, f.c, 50), 1);
	ck_assert_int_eq(str_fmt(want, sizeof want, "%stest.e0 test.e1 test.e2 test.e3 test.e4 "
	    "test.e5", opened), CS_OK);
	ck_assert_str_eq(y.seen, want);
	/* A cursor of seq alone (SQLite's; PostgreSQL's before migration 0030)
	 * resumes after that number; PostgreSQL answers with its own form. */
	ck_assert_int_eq(admin_audit_query(f.c, NULL, NULL, 50, &res), CS_OK);
	json_t *e2 = json_array_get(json_object_get(res, "entries"), tu_pg_url != NULL ? 3 : 2);
	ck_assert_str_eq(json_string_value(json_object_get(e2, "action")), "test.e2");
	ck_assert_ptr_null(json_object_get(e2, "xid"));  /* the store's, for the cursor alone */
	struct exporter z = { .has_cursor = true };
	ck_assert_int_eq(str_fmt(z.cursor, sizeof z.cursor, "%lld",
	    (long long)json_integer_value(json_object_get(e2, "seq"))), CS_OK);
	json_decref(res);
	ck_assert_uint_eq(exporter_read(&z, f.c, 2), 2);
	ck_assert(tu_pg_url == NULL || strchr(z.cursor, '.') != NULL);
	ck_assert_uint_eq(exporter_drain(&z, f.c, 2), 1);
	ck_assert_str_eq(z.seen, "test.e3 test.e4 test.e5");
	/* A malformed cursor is refused. */
	ck_assert_int_eq(admin_audit_query(f.c, NULL, "1x", 50, &res), CS_EINVAL);
	ck_assert_int_eq(admin_audit_query(f.c, NULL, "", 50, &res), CS_EINVAL);
	ck_assert_int_eq(admin_audit_query(f.c, NULL, "1.", 50, &res), CS_EINVAL);
	ck_assert_int_eq(admin_audit_query(f.c, NULL, ".1", 50, &res), CS_EINVAL);
	ck_assert_int_eq(admin_audit_query(f.c, NULL, "1.2.3", 50, &res), CS_EINVAL);
	tu_store_clear(&f);
}
END_TEST

/* PostgreSQL: node A's entry, numbered before node B's, commits after it. */
START_TEST(test_store_audit_feed_late_commit)
{
	struct tu_store f;
	struct store *b = NULL;
	struct exporter x = { .has_cursor = false };
	fx_init(&f);
	ck_assert_int_eq(store_open(f.db, &b), CS_OK);
	struct store_conn *ca = f.c, *cb = store_conn(b);
	ck_assert_ptr_nonnull(cb);
	ck_assert_int_eq(audit_chain_open(cb, T0), CS_OK);
	ck_assert_uint_eq(exporter_drain(&x, cb, 1), 2);   /* both chains' openings */

	ck_assert_int_eq(store_begin(ca), CS_OK);
	ck_assert_int_eq(note(ca, "test.node_a"), CS_OK);  /* takes its number, holds on */
	ck_assert_int_eq(store_begin(cb), CS_OK);
	ck_assert_int_eq(note(cb, "test.node_b"), CS_OK);
	ck_assert_int_eq(store_commit(cb), CS_OK);
	char *a_seq = tu_pg_sql(f.db, "SELECT max(seq) FROM audit", true);   /* B's, A's unseen */
	char *b_seq = tu_pg_sql(f.db, "SELECT seq FROM audit WHERE action = 'test.node_b'", true);
	ck_assert_str_eq(a_seq, b_seq);

	size_t n = exporter_drain(&x, cb, 1);              /* while A runs */
	char cursor_then[64];
	memcpy(cursor_then, x.cursor, sizeof cursor_then);
	ck_assert_msg(strstr(x.seen, "test.node_a") == NULL, "A's entry seen before it committed");
	ck_assert_int_eq(store_commit(ca), CS_OK);
	char *a_now = tu_pg_sql(f.db, "SELECT seq FROM audit WHERE action = 'test.node_a'", true);
	ck_assert_msg(strtoll(a_now, NULL, 10) < strtoll(b_seq, NULL, 10),
	    "A's number %s is below B's %s", a_now, b_seq);

	n += exporter_drain(&x, cb, 1);
	ck_assert_msg(strstr(x.seen, "test.node_a") != NULL,
	    "node A's entry (seq %s) never returned: while it ran the exporter read %s, and "
	    "its cursor %s passed it (node B's seq %s)", a_now,
	    x.seen, cursor_then, b_seq);
	ck_assert_uint_eq(n, 2);
	ck_assert_msg(strstr(x.seen, "test.node_b") != NULL, "B's entry: %s", x.seen);
	free(a_seq);
	free(b_seq);
	free(a_now);
	store_close(b);
	tu_store_clear(&f);
}
END_TEST

static Suite *feed_suite(void)
{
	Suite *s = suite_create(tu_pg_url != NULL ? "store_audit_feed (postgresql)" :
	    "store_audit_feed");
	TCase *tc = tcase_create("feed");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_store_audit_feed_pages);
	suite_add_tcase(s, tc);
	if (tu_pg_url != NULL) {
		tc = tcase_create("late_commit");
		tcase_set_timeout(tc, 60);
		tcase_add_test(tc, test_store_audit_feed_late_commit);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	return tu_store_run(feed_suite);
}
