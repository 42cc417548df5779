/* test_audit_queue.c -- the queue of audit entries that follow a durable one
 * (audit_queue.h): an entry is a copy that outlives its source and whose
 * detail grows within its cap; entries commit in the order they were put, in
 * batches of at most the batch size; a full queue writes the caller's entry
 * synchronously (counted), never drops it; a failed batch stays queued; the
 * writer thread commits on its own; the orderly stop writes everything; and
 * the chain verifies after batched entries -- against a real SQLite file
 * built from migrations/. */
#include <string.h>
#include <time.h>
#include "audit.h"
#include "audit_queue.h"
#include "seal.h"
#include "store.h"
#include "store_audit.h"
#include "testutil.h"

#define MK1 "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

static char *dir;
static struct store *st;
static struct store_conn *sc;
static struct master_key mk;

static void setup(void)
{
	dir = tu_tmpdir();
	char *db = tu_path(dir, "t.db");
	ck_assert_int_eq(store_open(db, &st), CS_OK);
	free(db);
	sc = store_conn(st);
	ck_assert_ptr_nonnull(sc);
	ck_assert_int_eq(master_key_load(NULL, MK1, &mk), CS_OK);
	ck_assert_int_eq(audit_set_master_key(&mk), CS_OK);
}

static void teardown(void)
{
	audit_clear_key();
	store_close(st);
	tu_rmdir(dir);
	master_key_clear(&mk);
}

/* An entry numbered i: its detail says "n=i". */
static struct audit_queue_entry *entry(int i)
{
	char d[32];
	struct audit_queue_entry *qe = NULL;
	snprintf(d, sizeof d, "n=%d", i);
	ck_assert_int_eq(audit_queue_entry_new(&(struct audit_entry){ .ts = 1000 + i,
	    .actor = "client:c", .action = "mcp.call", .subject = "alice", .agent = "c",
	    .resource = "r", .outcome = "answered", .detail = d }, &qe), CS_OK);
	return qe;
}

/* The details of the audit entries in seq order, joined by ','. */
static void details(char *out, size_t cap)
{
	struct store_audit_row *rows = NULL;
	size_t n = 0;
	out[0] = '\0';
	ck_assert_int_eq(store_audit_page(sc, 0, 1000, &rows, &n), CS_OK);
	for (size_t i = 0; i < n; i++) {
		if (out[0] != '\0')
			strncat(out, ",", cap - strlen(out) - 1);
		strncat(out, rows[i].detail != NULL ? rows[i].detail : "-", cap - strlen(out) - 1);
	}
	store_audit_rows_free(rows, n);
}

static int64_t entries(void)
{
	struct audit_head h;
	ck_assert_int_eq(audit_head(sc, &h), CS_OK);
	return h.seq;
}

static void chain_verifies(void)
{
	struct audit_verify_result r;
	ck_assert_int_eq(audit_verify(sc, &mk, NULL, &r), CS_OK);
	ck_assert_msg(r.ok, "chain broken at %lld: %s", (long long)r.broken, r.why);
}

START_TEST(test_entry_copy_and_detail)
{
	char actor[] = "client:x", detail[] = "call=1";
	struct audit_queue_entry *qe = NULL;
	ck_assert_int_eq(audit_queue_entry_new(&(struct audit_entry){ .ts = 7, .actor = actor,
	    .action = "mcp.call", .detail = detail }, &qe), CS_OK);
	/* A copy: the source's memory may go. */
	memset(actor, 'Z', sizeof actor - 1);
	memset(detail, 'Z', sizeof detail - 1);
	const struct audit_entry *e = audit_queue_entry_view(qe);
	ck_assert_str_eq(e->actor, "client:x");
	ck_assert_str_eq(e->detail, "call=1");
	ck_assert_ptr_null(e->subject);
	ck_assert_int_eq(e->ts, 7);
	ck_assert_int_eq(audit_queue_entry_detail(qe, "; upstream=200"), CS_OK);
	ck_assert_str_eq(audit_queue_entry_view(qe)->detail, "call=1; upstream=200");
	/* Past the cap: refused, the detail unchanged. */
	char big[AUDIT_QUEUE_DETAIL_MAX + 2];
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	ck_assert_int_eq(audit_queue_entry_detail(qe, big), CS_ETOOBIG);
	ck_assert_str_eq(audit_queue_entry_view(qe)->detail, "call=1; upstream=200");
	audit_queue_entry_free(qe);
	struct audit_queue_entry *no = NULL;
	ck_assert_int_eq(audit_queue_entry_new(&(struct audit_entry){ .action = "a", .detail = big },
	    &no), CS_ETOOBIG);
	ck_assert_ptr_null(no);
	audit_queue_entry_free(NULL);
}
END_TEST

/* Ten entries, batches of four: written in the order put, three transactions. */
START_TEST(test_order_and_batches)
{
	struct audit_queue *q = NULL;
	struct audit_queue_stats s;
	char got[512];
	ck_assert_int_eq(audit_queue_new(st, &(struct audit_queue_opts){ .capacity = 16, .batch = 4 },
	    &q), CS_OK);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(audit_queue_put(q, sc, entry(i)), CS_OK);
	ck_assert_int_eq(entries(), 0);            /* nothing written on the caller's path */
	audit_queue_stats(q, &s);
	ck_assert_uint_eq(s.pending, 10);
	ck_assert_uint_eq(s.queued, 10);
	ck_assert_int_eq(audit_queue_flush(q), CS_OK);
	details(got, sizeof got);
	ck_assert_str_eq(got, "n=0,n=1,n=2,n=3,n=4,n=5,n=6,n=7,n=8,n=9");
	audit_queue_stats(q, &s);
	ck_assert_uint_eq(s.batches, 3);
	ck_assert_uint_eq(s.written, 10);
	ck_assert_uint_eq(s.pending, 0);
	ck_assert_uint_eq(s.full, 0);
	chain_verifies();
	audit_queue_free(q);
}
END_TEST

/* Capacity three: the fourth and fifth are written at once by their callers
 * (counted), never dropped; the queued three follow at the flush. */
START_TEST(test_bounded_full_writes_synchronously)
{
	struct audit_queue *q = NULL;
	struct audit_queue_stats s;
	char got[256];
	ck_assert_int_eq(audit_queue_new(st, &(struct audit_queue_opts){ .capacity = 3 }, &q), CS_OK);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(audit_queue_put(q, sc, entry(i)), CS_OK);
	audit_queue_stats(q, &s);
	ck_assert_uint_eq(s.pending, 3);
	ck_assert_uint_eq(s.full, 2);
	details(got, sizeof got);
	ck_assert_str_eq(got, "n=3,n=4");
	ck_assert_int_eq(audit_queue_flush(q), CS_OK);
	details(got, sizeof got);
	ck_assert_str_eq(got, "n=3,n=4,n=0,n=1,n=2");
	chain_verifies();
	audit_queue_free(q);
}
END_TEST

/* No queue (unit tests, command-line tools): written at once. */
START_TEST(test_null_queue_writes_now)
{
	ck_assert_int_eq(audit_queue_put(NULL, sc, entry(1)), CS_OK);
	ck_assert_int_eq(entries(), 1);
	ck_assert_int_eq(audit_queue_put(NULL, sc, NULL), CS_EINVAL);
	ck_assert_int_eq(audit_queue_flush(NULL), CS_OK);
	audit_queue_stop(NULL);
	audit_queue_free(NULL);
}
END_TEST

/* A batch that cannot be written (no chain key) stays queued, whole, and
 * is written by the next try. */
START_TEST(test_failed_batch_stays)
{
	struct audit_queue *q = NULL;
	struct audit_queue_stats s;
	char got[256];
	ck_assert_int_eq(audit_queue_new(st, NULL, &q), CS_OK);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(audit_queue_put(q, sc, entry(i)), CS_OK);
	audit_clear_key();
	ck_assert_int_ne(audit_queue_flush(q), CS_OK);
	audit_queue_stats(q, &s);
	ck_assert_uint_eq(s.pending, 3);
	ck_assert_uint_eq(s.failures, 1);
	ck_assert_int_eq(entries(), 0);
	ck_assert_int_eq(audit_set_master_key(&mk), CS_OK);
	ck_assert_int_eq(audit_queue_flush(q), CS_OK);
	details(got, sizeof got);
	ck_assert_str_eq(got, "n=0,n=1,n=2");
	chain_verifies();
	audit_queue_free(q);
}
END_TEST

/* The writer thread commits on its own (polled, bounded; no timing bound
 * asserted). */
START_TEST(test_writer_thread)
{
	struct audit_queue *q = NULL;
	struct audit_queue_stats s;
	ck_assert_int_eq(audit_queue_new(st, &(struct audit_queue_opts){ .interval_ms = 20 }, &q),
	    CS_OK);
	ck_assert_int_eq(audit_queue_start(q), CS_OK);
	ck_assert_int_eq(audit_queue_start(q), CS_EINVAL);   /* one writer */
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(audit_queue_put(q, sc, entry(i)), CS_OK);
	for (int i = 0; i < 3000 && entries() < 5; i++) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	ck_assert_int_eq(entries(), 5);
	audit_queue_stats(q, &s);
	ck_assert_uint_eq(s.written, 5);
	ck_assert_uint_ge(s.batches, 1);
	chain_verifies();
	audit_queue_free(q);
}
END_TEST

/* The orderly stop: a writer that would wait a minute, and the stop writes
 * what is queued; a put after the stop is written at once. */
START_TEST(test_stop_flushes)
{
	struct audit_queue *q = NULL;
	char got[256];
	ck_assert_int_eq(audit_queue_new(st, &(struct audit_queue_opts){ .interval_ms = 60000 },
	    &q), CS_OK);
	ck_assert_int_eq(audit_queue_start(q), CS_OK);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(audit_queue_put(q, sc, entry(i)), CS_OK);
	ck_assert_int_eq(entries(), 0);
	audit_queue_stop(q);
	details(got, sizeof got);
	ck_assert_str_eq(got, "n=0,n=1,n=2");
	ck_assert_int_eq(audit_queue_put(q, sc, entry(3)), CS_OK);
	ck_assert_int_eq(entries(), 4);
	audit_queue_stop(q);                        /* idempotent */
	chain_verifies();
	audit_queue_free(q);
}
END_TEST

static Suite *audit_queue_suite(void)
{
	Suite *s = suite_create("audit_queue");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_entry_copy_and_detail);
	tcase_add_test(tc, test_order_and_batches);
	tcase_add_test(tc, test_bounded_full_writes_synchronously);
	tcase_add_test(tc, test_null_queue_writes_now);
	tcase_add_test(tc, test_failed_batch_stays);
	tcase_add_test(tc, test_writer_thread);
	tcase_add_test(tc, test_stop_flushes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(audit_queue_suite());
}
