/* test_store_approval.c -- approval.c's approval_check on the store, as nodes
 * run it: [limits] person spends one token per call that makes a new
 * approval, whatever store_retry does (issue #34).  On PostgreSQL two stores
 * on one database stand for two nodes, each with its own limiter, asking at
 * the same moment (threads released by a barrier) until their transactions
 * conflict and one is run again; the run again must not take a second token
 * of the person's.  Also covers store_approval.c's SQL under that race.
 *
 * On both engines, as test_store.c: with CONSENTD_TEST_DATABASE_URL set to a
 * postgresql:// URL (scripts/run-store-pg.sh) every test runs on that
 * database, emptied before each; otherwise on a fresh SQLite file (where no
 * two writers conflict: the one-token rule alone). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <jansson.h>
#include <sqlite3.h>

#include "approval.h"
#include "audit.h"
#include "buf.h"
#include "config.h"
#include "consent.h"
#include "jcs.h"
#include "metrics.h"
#include "rate_limits.h"
#include "store.h"
#include "store_consent.h"
#include "store_user.h"
#include "testutil.h"
#include "tu_store.h"

#define T0 1700000000LL
#define ACTOR "gateway:agent-gateway"
#define ACTION "create_issue"
#define BURST 2                      /* [limits] person_burst: one token left after a call */
#define ROUNDS_MAX 60                /* rounds of the race, at most */
#define RETRIES_WANTED 3             /* rounds with a conflict run again, wanted */

static struct config cfg;

static void config_init(void)
{
	memset(&cfg, 0, sizeof cfg);
	cfg.consent_request_ttl = 600;
	cfg.consent_interval = 5;
	cfg.consent_deny_cooldown = 300;
	cfg.consent_max_pending_per_user = 1000;   /* never the cap: the limiter alone */
}

/* The person limiter of a node: person_rate 0.001/s (none come back during
 * the test), person_burst BURST, room for every person of the test. */
static struct rate_limits *limits_new(void)
{
	struct config lc;
	memset(&lc, 0, sizeof lc);
	lc.limit_person = (struct config_limit){ .rate_milli = 1, .burst = BURST };
	lc.limit_buckets = 4096;
	struct rate_limits *l = rate_limits_new(&lc);
	ck_assert_ptr_nonnull(l);
	return l;
}

/* How many of uid's person tokens l still holds: takes them all. */
static int tokens_left(struct rate_limits *l, int64_t uid)
{
	int n = 0;
	int64_t ra = 0;
	while (n <= BURST && rate_limits_take(l, LIMIT_PERSON, &uid, sizeof uid, &ra))
		n++;
	return n;
}

/* A person (subject) with a live consent kid, their users.id. */
static int64_t person(struct store_conn *c, const char *subject, const char *kid)
{
	int64_t uid = tu_store_user(c, subject, T0);
	ck_assert_int_eq(store_consent_insert(c, &(struct store_consent_row){ .id = (char *)kid,
	    .user_id = uid, .agent = (char *)"coder", .resource = (char *)"tracker",
	    .granted = (char *)"issues", .declined = (char *)"", .created_at = T0,
	    .expires_at = T0 + 86400 }), CS_OK);
	return uid;
}

/* One node's call: approval_check of ACTION with params on consent kid. */
struct node_call {
	struct store        *s;
	struct rate_limits  *limits;
	const char          *kid;
	const char          *params;
	pthread_barrier_t   *go;         /* NULL: at once */
	enum cs_err          e;
	enum approval_outcome outcome;
	bool                 rate_limited;
};

static void *node_call_run(void *arg)
{
	struct node_call *n = arg;
	struct store_conn *c = store_conn(n->s);
	struct consent k;
	struct approval_answer a;
	struct buf b;
	char d[APPROVAL_DIGEST_LEN + 1];
	json_t *p = json_loads(n->params, JSON_DECODE_ANY, NULL);
	memset(&k, 0, sizeof k);
	memset(&a, 0, sizeof a);
	buf_init(&b, 1 << 12);
	n->e = c == NULL || p == NULL ? CS_EINVAL : CS_OK;
	if (n->e == CS_OK && (n->e = jcs_canonicalize(p, &b)) == CS_OK &&
	    (n->e = approval_digest(p, d)) == CS_OK)
		n->e = consent_get(c, n->kid, T0, &k);
	/* Both threads ready, their consents read: the two transactions begin
	 * together. */
	if (n->go != NULL)
		pthread_barrier_wait(n->go);
	if (n->e == CS_OK)
		n->e = approval_check(c, &cfg, &(struct approval_ask){ .k = &k, .action = ACTION,
		    .parameters = b.data, .digest = d, .actor = ACTOR, .now = T0 + 1,
		    .limits = n->limits }, &a);
	n->outcome = a.outcome;
	n->rate_limited = a.rate_limited;
	approval_answer_clear(&a);
	consent_clear(&k);
	buf_clear(&b);
	json_decref(p);
	return NULL;
}

/* The one number sql counts, on either engine, behind consentd's back. */
static int64_t count_of(const struct tu_store *f, const char *sql)
{
	int64_t n = -1;
	if (tu_pg_url != NULL) {
		char *v = tu_pg_sql(tu_pg_url, sql, true);
		ck_assert_ptr_nonnull(v);
		n = strtoll(v, NULL, 10);
		free(v);
		return n;
	}
	sqlite3 *h = NULL;
	sqlite3_stmt *st = NULL;
	ck_assert_int_eq(sqlite3_open(f->db, &h), SQLITE_OK);
	sqlite3_busy_timeout(h, 5000);
	ck_assert_int_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return n;
}

/* consentd_db_conflicts_total: transactions PostgreSQL rolled back for
 * another's (store_pg.c counts each once). */
static double conflicts(void)
{
	return metrics_sum(metric[M_DB_CONFLICTS], NULL);
}

static void fx_init(struct tu_store *f)
{
	audit_set_key((const unsigned char[32]){ 0 }, "test");
	config_init();
	ck_assert_int_eq(metrics_declare_consentd(), CS_OK);
	ck_assert_ptr_nonnull(metric[M_DB_CONFLICTS]);
	tu_store_init(f, T0);
	ck_assert_int_eq(audit_chain_open(f->c, T0), CS_OK);
}

static void fx_clear(struct tu_store *f)
{
	tu_store_clear(f);
	metrics_reset();
}

/* One call, no race: a new approval takes one token, a poll of it none, and
 * the call the bucket has no token for is refused and audited. */
START_TEST(test_store_approval_person_token_once)
{
	struct tu_store f;
	fx_init(&f);
	struct rate_limits *l = limits_new();
	int64_t uid = person(f.c, "carol", "k-carol");
	struct node_call n = { .s = f.s, .limits = l, .kid = "k-carol",
		.params = "{\"title\":\"one\"}" };
	node_call_run(&n);
	ck_assert_int_eq(n.e, CS_OK);
	ck_assert_int_eq(n.outcome, APPROVAL_NEEDED);
	node_call_run(&n);                   /* polled at once: slow_down, nothing new */
	ck_assert_int_eq(n.e, CS_OK);
	ck_assert_int_eq(n.outcome, APPROVAL_SLOW_DOWN);
	n.params = "{\"title\":\"two\"}";
	node_call_run(&n);
	ck_assert_int_eq(n.outcome, APPROVAL_NEEDED);
	n.params = "{\"title\":\"three\"}";
	node_call_run(&n);
	ck_assert_int_eq(n.e, CS_OK);
	ck_assert_int_eq(n.outcome, APPROVAL_TOO_MANY);
	ck_assert(n.rate_limited);
	ck_assert_int_eq(tokens_left(l, uid), 0);
	ck_assert_int_eq(count_of(&f, "SELECT count(*) FROM audit WHERE action = "
	    "'approval.refused' AND detail LIKE 'rate limit: person;%'"), 1);
	ck_assert_int_eq(count_of(&f, "SELECT count(*) FROM approvals"), 2);
	rate_limits_free(l);
	fx_clear(&f);
}
END_TEST

/* Two nodes on one PostgreSQL, each with its own limiter, ask at once for a
 * new approval of one person -- two approvals (same = false: the run again
 * makes its own) or the same one (same = true: the run again finds the
 * other's pending request).  Round after round, a fresh person each, until
 * RETRIES_WANTED rounds had a conflict run again: every call answers, and
 * no node's limiter lost more than one token of that person's for its call
 * (exactly one for a call that made an approval). */
static void race(bool same)
{
	struct tu_store f;
	struct store *b = NULL;
	int retried = 0, rounds = 0;
	fx_init(&f);
	ck_assert_int_eq(store_open(f.db, &b), CS_OK);
	struct store *nodes[2] = { f.s, b };
	struct rate_limits *limits[2] = { limits_new(), limits_new() };
	ck_assert_int_eq(audit_chain_open(store_conn(b), T0), CS_OK);
	for (; rounds < ROUNDS_MAX && retried < RETRIES_WANTED; rounds++) {
		char sub[32], kid[32], params[2][64];
		pthread_barrier_t go;
		pthread_t t[2];
		struct node_call n[2];
		ck_assert_int_eq(str_fmt(sub, sizeof sub, "p%d", rounds), CS_OK);
		ck_assert_int_eq(str_fmt(kid, sizeof kid, "k-p%d", rounds), CS_OK);
		int64_t uid = person(f.c, sub, kid);
		ck_assert_int_eq(pthread_barrier_init(&go, NULL, 2), 0);
		double k0 = conflicts();
		for (int i = 0; i < 2; i++) {
			ck_assert_int_eq(str_fmt(params[i], sizeof params[i], "{\"title\":\"%s %d\"}",
			    same ? "both" : i == 0 ? "a" : "b", rounds), CS_OK);
			n[i] = (struct node_call){ .s = nodes[i], .limits = limits[i], .kid = kid,
				.params = params[i], .go = &go };
			ck_assert_int_eq(pthread_create(&t[i], NULL, node_call_run, &n[i]), 0);
		}
		for (int i = 0; i < 2; i++)
			ck_assert_int_eq(pthread_join(t[i], NULL), 0);
		pthread_barrier_destroy(&go);
		double k = conflicts() - k0;
		/* A conflicted transaction is rolled back whole: both calls
		 * answered, so the conflicted one was run again (store_retry). */
		for (int i = 0; i < 2; i++) {
			ck_assert_msg(n[i].e == CS_OK, "round %d: node %c: error %d (conflicts %g)",
			    rounds, 'a' + i, n[i].e, k);
			/* (the other's request, made this second, is polled too fast) */
			ck_assert_msg(n[i].outcome == APPROVAL_NEEDED || (same &&
			    n[i].outcome == APPROVAL_SLOW_DOWN), "round %d: node %c answered %d%s "
			    "(conflicts %g)", rounds, 'a' + i, n[i].outcome,
			    n[i].rate_limited ? ", rate limit: person" : "", k);
		}
		if (same)
			ck_assert_msg((n[0].outcome == APPROVAL_NEEDED) + (n[1].outcome ==
			    APPROVAL_NEEDED) == 1, "round %d: one approval made, not %d", rounds,
			    (n[0].outcome == APPROVAL_NEEDED) + (n[1].outcome == APPROVAL_NEEDED));
		/* A call that made an approval took one token, however often it
		 * ran; one that found the other's pending request (same: polled
		 * too fast) took one if a run of it had asked for a new approval
		 * first (it conflicted, and its run again found the other's), and
		 * none if its only run found it -- which is what a round without a
		 * conflict gives, when the two calls did not overlap (a loaded
		 * machine: seen under make check, round 1, "took 0"). */
		for (int i = 0; i < 2; i++) {
			int taken = BURST - tokens_left(limits[i], uid);
			ck_assert_msg(n[i].outcome == APPROVAL_NEEDED ? taken == 1 : taken <= 1,
			    "round %d: node %c took %d of the person's tokens for one call answered %d "
			    "(conflicts %g)", rounds, 'a' + i, taken, n[i].outcome, k);
		}
		if (k > 0)
			retried++;
	}
	ck_assert_msg(retried >= 1, "no conflict in %d rounds: store_retry never ran", rounds);
	if (getenv("TEST_APPROVAL_RACE") != NULL)
		fprintf(stderr, "race(%s): %d rounds, %d with a run again\n",
		    same ? "same" : "two", rounds, retried);
	for (int i = 0; i < 2; i++)
		rate_limits_free(limits[i]);
	store_close(b);
	fx_clear(&f);
}

START_TEST(test_store_approval_race_two_approvals_one_token_each)
{
	race(false);
}
END_TEST

START_TEST(test_store_approval_race_same_approval_one_token_each)
{
	race(true);
}
END_TEST

static Suite *approval_suite(void)
{
	Suite *s = suite_create(tu_pg_url != NULL ? "store_approval (postgresql)" :
	    "store_approval (sqlite)");
	TCase *tc = tcase_create("limits");
	tcase_add_test(tc, test_store_approval_person_token_once);
	suite_add_tcase(s, tc);
	if (tu_pg_url != NULL) {
		/* Two writers conflict on PostgreSQL alone (SQLite has one writer). */
		tc = tcase_create("nodes");
		tcase_set_timeout(tc, 120);
		tcase_add_test(tc, test_store_approval_race_two_approvals_one_token_each);
		tcase_add_test(tc, test_store_approval_race_same_approval_one_token_each);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	return tu_store_run(approval_suite);
}
