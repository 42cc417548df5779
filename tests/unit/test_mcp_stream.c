/* test_mcp_stream.c -- the GET stream of a 2025-11-25 MCP session
 * (mcp_stream.c): the exact SSE it writes (the retry hint, one
 * notifications/elicitation/complete event per decided elicitation, comments
 * to keep it open), that it ends after its lifetime and at the server's stop,
 * that it sleeps between polls rather than spinning, and its bounds per person
 * and per node.  On a fresh SQLite file, with real time (the stream reads the
 * clock). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "app.h"
#include "mcp_session.h"
#include "http.h"
#include "mcp_stream.h"
#include "store.h"
#include "store_approval.h"
#include "store_consent.h"
#include "store_user.h"
#include "testutil.h"

#define SID "session-0123456789"

struct fixture {
	char              *dir, *db;
	struct store      *s;
	struct store_conn *c;
	int64_t            alice;
	struct mcp_who     who;
	struct mcp_session sess;
};

/* Short bounds for the tests: a poll every 20 ms, a comment after 300 ms of
 * silence, a stream of 2 s. */
static const struct mcp_stream_limits quick = {
	.per_person = 2, .total = 3, .lifetime_ms = 2000, .poll_ms = 20, .keepalive_ms = 300,
};

static void fx_init(struct fixture *f)
{
	enum mcp_session_outcome oc = MCP_SESSION__MAX;
	memset(f, 0, sizeof *f);
	f->dir = tu_tmpdir();
	f->db = tu_path(f->dir, "consentd.db");
	ck_assert_int_eq(store_open(f->db, &f->s), CS_OK);
	f->c = store_conn(f->s);
	ck_assert_int_eq(store_user_put(f->c, &(struct store_user){ .issuer = "https://idp.example",
	    .subject = "alice", .now = app_now() }, &f->alice), CS_OK);
	f->who = (struct mcp_who){ "tracker", f->alice, "client-a" };
	ck_assert_int_eq(mcp_session_record(f->c, &f->who, SID, true, app_now(), &oc), CS_OK);
	ck_assert_int_eq(mcp_session_find(f->c, &f->who, SID, app_now(), &f->sess), CS_OK);
	ck_assert_int_eq(mcp_stream_configure(&quick), CS_OK);
}

static void fx_clear(struct fixture *f)
{
	ck_assert_int_eq(mcp_stream_configure(NULL), CS_OK);
	store_close(f->s);
	free(f->db);
	tu_rmdir(f->dir);
}

/* A pending approval of alice's and its elicitation in her session. */
static void pending_approval(struct fixture *f, const char *aid, char id[MCP_ELICITATION_ID_LEN + 1])
{
	int64_t now = app_now();
	struct store_consent_row k = { .id = (char *)"consent-a", .user_id = f->alice,
	    .agent = (char *)"client-a", .resource = (char *)"tracker", .granted = (char *)"w",
	    .declined = (char *)"", .created_at = now, .expires_at = now + 3600 };
	enum cs_err e = store_consent_insert(f->c, &k);
	ck_assert(e == CS_OK || e == CS_EEXIST);
	ck_assert_int_eq(store_approval_insert(f->c, &(struct store_approval_row){ .id = (char *)aid,
	    .consent_id = (char *)"consent-a", .user_id = f->alice, .agent = (char *)"client-a",
	    .resource = (char *)"tracker", .action = (char *)"create_issue",
	    .parameters = (char *)"{}", .digest = (char *)aid, .status = (char *)"pending",
	    .created_at = now, .expires_at = now + 600, .interval = 5 }), CS_OK);
	ck_assert_int_eq(mcp_elicitation_new(f->c, &f->who, &f->sess, MCP_ELICIT_APPROVAL, aid,
	    now + 600, now, id), CS_OK);
}

/* mcp_stream_open into a reply_stream, as the GET handler does. */
static enum cs_err stream_open(struct store *s, const struct mcp_who *w,
    const unsigned char hash[STORE_MCP_HASH_LEN], enum mcp_stream_admit *adm,
    struct reply_stream *rs)
{
	struct mcp_stream *st = NULL;
	enum cs_err e;
	memset(rs, 0, sizeof *rs);
	e = mcp_stream_open(s, w, hash, adm, &st);
	if (e == CS_OK && *adm == MCP_STREAM_ADMITTED)
		*rs = (struct reply_stream){ st, mcp_stream_read, mcp_stream_close };
	return e;
}

/* One read of rs into a string (NUL-terminated); *got the bytes. */
static void read_once(struct reply_stream *rs, char *out, size_t cap, size_t *got)
{
	ck_assert_int_eq(rs->read(rs->ctx, out, cap - 1, got), CS_OK);
	out[*got] = '\0';
}

static int64_t mono_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The event is exactly the MCP notification as one SSE message. */
START_TEST(test_mcp_stream_event_shape)
{
	struct buf b;
	buf_init(&b, 4096);
	ck_assert_int_eq(mcp_stream_event(&b, "abc_DEF-123"), CS_OK);
	ck_assert_str_eq(b.data, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":"
	    "\"notifications/elicitation/complete\",\"params\":{\"elicitationId\":\"abc_DEF-123\"}}"
	    "\n\n");
	/* Whatever an id holds, the data line stays one JSON line. */
	buf_reset(&b);
	ck_assert_int_eq(mcp_stream_event(&b, "a\"b\nc"), CS_OK);
	ck_assert_ptr_nonnull(strstr(b.data, "\"elicitationId\":\"a\\\"b\\nc\"}}\n\n"));
	const char *data = strstr(b.data, "data: ");
	ck_assert_ptr_nonnull(data);
	ck_assert_ptr_eq(strchr(data, '\n'), b.data + b.len - 2);
	buf_clear(&b);
}
END_TEST

struct decider {
	struct store *s;
	const char   *aid;
	int           delay_ms;
	enum cs_err   e;
};

static void *decide_main(void *arg)
{
	struct decider *d = arg;
	struct timespec ts = { 0, (long)d->delay_ms * 1000000L };
	nanosleep(&ts, NULL);
	struct store_conn *c = store_conn(d->s);
	d->e = c == NULL ? CS_EDB : store_begin(c);
	if (d->e == CS_OK) {
		if ((d->e = store_approval_set_status(c, d->aid, "pending", "approved", app_now())) ==
		    CS_OK)
			d->e = store_commit(c);
		else
			store_rollback(c);
	}
	return NULL;
}

/* The stream opens with the retry hint, writes the event once the person
 * decides (on another thread, as another request would), then only comments,
 * and ends after its lifetime; and it sleeps between polls. */
START_TEST(test_mcp_stream_delivers_once_then_ends)
{
	struct fixture f;
	struct reply_stream rs;
	enum mcp_stream_admit adm = MCP_STREAM__MAX;
	char id[MCP_ELICITATION_ID_LEN + 1], buf[4096], want[512];
	size_t got = 0;
	pthread_t th;
	fx_init(&f);
	pending_approval(&f, "approval-1", id);
	/* Before the open: the stream's lifetime starts inside it, so a t0 taken
	 * after could be a millisecond late ("life == 1999" on a loaded machine). */
	int64_t t0 = mono_ms();
	ck_assert_int_eq(stream_open(f.s, &f.who, f.sess.hash, &adm, &rs), CS_OK);
	ck_assert_int_eq(adm, MCP_STREAM_ADMITTED);
	read_once(&rs, buf, sizeof buf, &got);
	ck_assert_str_eq(buf, "retry: 1000\n\n");
	struct decider d = { f.s, "approval-1", 150, CS_EINVAL };
	/* Before the decider starts: the event is written no sooner than its
	 * 150 ms sleep after this. */
	int64_t tb = mono_ms();
	ck_assert_int_eq(pthread_create(&th, NULL, decide_main, &d), 0);
	clock_t cpu0 = clock();
	read_once(&rs, buf, sizeof buf, &got);
	clock_t cpu1 = clock();
	pthread_join(th, NULL);
	ck_assert_int_eq(d.e, CS_OK);
	snprintf(want, sizeof want, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":"
	    "\"notifications/elicitation/complete\",\"params\":{\"elicitationId\":\"%s\"}}\n\n", id);
	ck_assert_str_eq(buf, want);
	/* Not before the decision; no upper bound on a loaded machine's
	 * scheduling (timing is for benchmarks, not tests). */
	int64_t waited = mono_ms() - t0;
	ck_assert_int_ge(waited, 140);
	/* About 150 ms of waiting at 20 ms polls: a spinning reader would burn
	 * all of it; a sleeping one a small part (ASan included). */
	double cpu_ms = (double)(cpu1 - cpu0) * 1000.0 / CLOCKS_PER_SEC;
	ck_assert_msg(cpu_ms < 0.5 * (double)waited, "%.1f ms of CPU in %lld ms", cpu_ms,
	    (long long)waited);
	/* Then nothing more of it: a comment after the keep-alive time, which
	 * counts from the event's write.  Measured from tb, taken before the
	 * decision could happen, not from when this thread saw the event (a
	 * descheduled thread would see it late and measure the gap short). */
	read_once(&rs, buf, sizeof buf, &got);
	ck_assert_str_eq(buf, ": keep-alive\n\n");
	ck_assert_int_ge(mono_ms() - tb, 150 + 250);
	/* Reads until the end: only comments, and the end within the lifetime. */
	for (int i = 0; i < 20; i++) {
		read_once(&rs, buf, sizeof buf, &got);
		if (got == 0)
			break;
		ck_assert_str_eq(buf, ": keep-alive\n\n");
	}
	ck_assert_uint_eq(got, 0);
	/* It lasted its lifetime, and ended (the loop above is bounded). */
	int64_t life = mono_ms() - t0;
	ck_assert_int_ge(life, 2000);
	ck_assert_uint_eq(mcp_stream_open_count(), 1);
	rs.done(rs.ctx);
	ck_assert_uint_eq(mcp_stream_open_count(), 0);
	fx_clear(&f);
}
END_TEST

/* A read smaller than an event gets it in pieces, whole in the end. */
START_TEST(test_mcp_stream_small_reads)
{
	struct fixture f;
	struct reply_stream rs;
	enum mcp_stream_admit adm = MCP_STREAM__MAX;
	char id[MCP_ELICITATION_ID_LEN + 1], piece[8], want[512];
	struct buf all;
	size_t got = 0;
	fx_init(&f);
	pending_approval(&f, "approval-2", id);
	ck_assert_int_eq(store_approval_set_status(f.c, "approval-2", "pending", "denied", app_now()),
	    CS_OK);
	ck_assert_int_eq(stream_open(f.s, &f.who, f.sess.hash, &adm, &rs), CS_OK);
	ck_assert_int_eq(adm, MCP_STREAM_ADMITTED);
	snprintf(want, sizeof want, "retry: 1000\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\","
	    "\"method\":\"notifications/elicitation/complete\",\"params\":{\"elicitationId\":"
	    "\"%s\"}}\n\n", id);
	buf_init(&all, 4096);
	while (all.len < strlen(want)) {
		read_once(&rs, piece, sizeof piece, &got);
		ck_assert_uint_gt(got, 0);
		ck_assert_int_eq(buf_append(&all, piece, got), CS_OK);
	}
	ck_assert_str_eq(all.data, want);
	buf_clear(&all);
	rs.done(rs.ctx);
	fx_clear(&f);
}
END_TEST

/* SECURITY (availability): at most per_person streams of one person and
 * total of the node; a closed stream gives its place back. */
START_TEST(test_mcp_stream_bounds)
{
	struct fixture f;
	struct reply_stream rs[4];
	enum mcp_stream_admit adm = MCP_STREAM__MAX;
	int64_t bob = 0, carol = 0;
	fx_init(&f);
	ck_assert_int_eq(store_user_put(f.c, &(struct store_user){ .issuer = "https://idp.example",
	    .subject = "bob", .now = app_now() }, &bob), CS_OK);
	ck_assert_int_eq(store_user_put(f.c, &(struct store_user){ .issuer = "https://idp.example",
	    .subject = "carol", .now = app_now() }, &carol), CS_OK);
	struct mcp_who wb = { "tracker", bob, "client-a" }, wc = { "tracker", carol, "client-a" };
	ck_assert_int_eq(stream_open(f.s, &f.who, f.sess.hash, &adm, &rs[0]), CS_OK);
	ck_assert_int_eq(adm, MCP_STREAM_ADMITTED);
	ck_assert_int_eq(stream_open(f.s, &f.who, f.sess.hash, &adm, &rs[1]), CS_OK);
	ck_assert_int_eq(adm, MCP_STREAM_ADMITTED);
	ck_assert_uint_eq(mcp_stream_person_count(f.alice), 2);
	memset(&rs[3], 0, sizeof rs[3]);
	ck_assert_int_eq(stream_open(f.s, &f.who, f.sess.hash, &adm, &rs[3]), CS_OK);
	ck_assert_int_eq(adm, MCP_STREAM_PERSON_FULL);
	ck_assert_ptr_null(rs[3].read);
	ck_assert_int_eq(stream_open(f.s, &wb, f.sess.hash, &adm, &rs[2]), CS_OK);
	ck_assert_int_eq(adm, MCP_STREAM_ADMITTED);
	ck_assert_int_eq(stream_open(f.s, &wc, f.sess.hash, &adm, &rs[3]), CS_OK);
	ck_assert_int_eq(adm, MCP_STREAM_FULL);
	ck_assert_uint_eq(mcp_stream_open_count(), 3);
	rs[0].done(rs[0].ctx);
	ck_assert_uint_eq(mcp_stream_person_count(f.alice), 1);
	ck_assert_int_eq(stream_open(f.s, &wc, f.sess.hash, &adm, &rs[3]), CS_OK);
	ck_assert_int_eq(adm, MCP_STREAM_ADMITTED);
	rs[1].done(rs[1].ctx);
	rs[2].done(rs[2].ctx);
	rs[3].done(rs[3].ctx);
	ck_assert_uint_eq(mcp_stream_open_count(), 0);
	ck_assert_uint_eq(mcp_stream_person_count(f.alice), 0);
	/* Bounds out of range change nothing. */
	struct mcp_stream_limits bad = quick;
	bad.total = MCP_STREAM_TOTAL_MAX + 1;
	ck_assert_int_eq(mcp_stream_configure(&bad), CS_EINVAL);
	bad = quick;
	bad.poll_ms = 0;
	ck_assert_int_eq(mcp_stream_configure(&bad), CS_EINVAL);
	fx_clear(&f);
}
END_TEST

static void *stop_main(void *arg)
{
	struct timespec ts = { 0, 100 * 1000000L };
	(void)arg;
	nanosleep(&ts, NULL);
	mcp_stream_stop();
	return NULL;
}

/* The server's stop ends an open stream at its next poll (not at its
 * lifetime's end), and no stream opens after it. */
START_TEST(test_mcp_stream_stop)
{
	struct fixture f;
	struct reply_stream rs, rs2;
	enum mcp_stream_admit adm = MCP_STREAM__MAX;
	char buf[256];
	size_t got = 0;
	pthread_t th;
	fx_init(&f);
	ck_assert_int_eq(stream_open(f.s, &f.who, f.sess.hash, &adm, &rs), CS_OK);
	ck_assert_int_eq(adm, MCP_STREAM_ADMITTED);
	read_once(&rs, buf, sizeof buf, &got);                 /* the retry hint */
	int64_t t0 = mono_ms();
	ck_assert_int_eq(pthread_create(&th, NULL, stop_main, NULL), 0);
	read_once(&rs, buf, sizeof buf, &got);
	pthread_join(th, NULL);
	ck_assert_uint_eq(got, 0);                              /* the end, not a comment */
	(void)t0;
	ck_assert_int_eq(stream_open(f.s, &f.who, f.sess.hash, &adm, &rs2), CS_OK);
	ck_assert_int_eq(adm, MCP_STREAM_STOPPING);
	rs.done(rs.ctx);
	fx_clear(&f);
}
END_TEST

static Suite *mcp_stream_suite(void)
{
	Suite *s = suite_create("mcp_stream");
	TCase *tc = tcase_create("stream");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_mcp_stream_event_shape);
	tcase_add_test(tc, test_mcp_stream_delivers_once_then_ends);
	tcase_add_test(tc, test_mcp_stream_small_reads);
	tcase_add_test(tc, test_mcp_stream_bounds);
	tcase_add_test(tc, test_mcp_stream_stop);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(mcp_stream_suite());
}
