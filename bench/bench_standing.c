/* bench_standing.c -- issue #32's measure: the CPU an approval check (approval_check, one
 * transaction, on a real SQLite file built from migrations/) costs for a person with 1,000
 * standing rules, against one with none.  The rules are the worst case for the lookup: all
 * of one consent and one action (create_issue, standing = match), 500 exact rules of other
 * calls and 500 match rules fixing repo to other repositories, so that the call checked is
 * covered by none and goes on to the person (its pending approval polled, as a gateway does).
 * Rounds alternate between the two consents; CPU time of the process (CLOCK_PROCESS_CPUTIME_ID).
 * The verdict is the median of the rounds' ratios (each pair of rounds shares its minute),
 * not the ratio of the sums, which one slow round of either side moved by 10 points.
 * Built by `make build/bench_standing`; `make bench` runs it.
 *   ./build/bench_standing [OPS_PER_ROUND=2000] [ROUNDS=9]   exit 1 when over 10 % more */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <jansson.h>

#include "approval.h"
#include "audit.h"
#include "buf.h"
#include "config.h"
#include "consent.h"
#include "jcs.h"
#include "standing.h"
#include "store.h"
#include "store_consent.h"
#include "store_user.h"

#define T0 1700000000LL
#define NRULES 1000

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, enum cs_err e)
{
	fprintf(stderr, "bench_standing: %s: %s\n", what, cs_strerror(e));
	exit(2);
}

static void must(const char *what, enum cs_err e)
{
	if (e != CS_OK)
		die(what, e);
}

/* The canonical text and digest of a JSON text. */
static void canon(const char *json, char **text, char digest[APPROVAL_DIGEST_LEN + 1])
{
	json_t *v = json_loads(json, 0, NULL);
	struct buf b;
	if (v == NULL)
		die("test JSON", CS_EINVAL);
	buf_init(&b, 1 << 16);
	must("jcs", jcs_canonicalize(v, &b));
	must("digest", approval_digest(v, digest));
	*text = buf_steal(&b);
	buf_clear(&b);
	json_decref(v);
}

static void rule(struct store_conn *c, const struct config *cfg, const struct consent *k,
    const char *params, enum config_standing kind, int i)
{
	char *text = NULL, digest[APPROVAL_DIGEST_LEN + 1], why[200], id[32];
	struct standing_rule r;
	canon(params, &text, digest);
	if (str_fmt(id, sizeof id, "ap%d", i) != CS_OK)
		die("id", CS_EINVAL);
	const struct standing_call call = { .approval_id = id, .consent_id = k->id,
		.subject = k->subject, .agent = k->agent, .resource = k->resource,
		.action = "create_issue", .parameters = text, .digest = digest, .user_id = k->user_id };
	must(why, standing_prepare(cfg, &call, &(struct standing_request){ .kind = kind,
	    .duration = 28800, .fixed = 0 }, T0, &r, why, sizeof why));
	must("insert", standing_insert(c, &r, "user:alice", T0));
	standing_rule_clear(&r);
	free(text);
}

/* ops approval checks of the call on consent k from *now on (one second apart, the
 * polling interval): CPU seconds. */
static double checks(struct store_conn *c, const struct config *cfg, const struct consent *k,
    const char *text, const char *digest, long ops, int64_t *now)
{
	double t0 = cpu_s();
	for (long i = 0; i < ops; i++) {
		struct approval_answer a;
		memset(&a, 0, sizeof a);
		*now += 1;
		must("approval_check", approval_check(c, cfg, &(struct approval_ask){ .k = k,
		    .action = "create_issue", .parameters = text, .digest = digest,
		    .actor = "gateway:agent-gateway", .now = *now }, &a));
		if (a.outcome != APPROVAL_PENDING && a.outcome != APPROVAL_NEEDED) {
			fprintf(stderr, "bench_standing: outcome %d\n", a.outcome);
			exit(2);
		}
		approval_answer_clear(&a);
	}
	return cpu_s() - t0;
}

#define MAX_ROUNDS 99

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts a copy). */
static double median(const double *v, size_t n)
{
	double t[MAX_ROUNDS];
	memcpy(t, v, n * sizeof *v);
	qsort(t, n, sizeof *t, dbl_cmp);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	long ops = argc > 1 ? strtol(argv[1], NULL, 10) : 2000;
	long rounds = argc > 2 ? strtol(argv[2], NULL, 10) : 9;
	char dir[] = "/tmp/consentd-bench-standing-XXXXXX", path[128];
	struct store *s = NULL;
	struct store_conn *c;
	int64_t uid = 0, now = T0;
	static char *fixed[] = { "repo", NULL };
	struct config_resource res = { .id = "github", .name = "GitHub", .uri = "urn:consentd:resource:github" };
	struct config_action act = { .resource = "github", .name = "create_issue", .description = "Open an issue",
		.scope = "issues:write", .approval = APPROVAL_REQUIRED, .standing = STANDING_MATCH,
		.standing_max = 28800, .standing_fixed = fixed, .nstanding_fixed = 1 };
	struct config cfg;
	struct consent k0, k1;

	if (ops < 1 || ops > 1000000 || rounds < 1 || rounds > 100 || mkdtemp(dir) == NULL)
		return 2;
	memset(&cfg, 0, sizeof cfg);
	cfg.resources = &res;
	cfg.nresources = 1;
	cfg.actions = &act;
	cfg.nactions = 1;
	cfg.consent_request_ttl = 1000000000;   /* the pending approval stays pending */
	cfg.consent_interval = 1;
	cfg.consent_deny_cooldown = 300;
	cfg.consent_max_pending_per_user = 1000;
	audit_set_key((const unsigned char[32]){ 0 }, "bench");
	if (str_fmt(path, sizeof path, "%s/consentd.db", dir) != CS_OK)
		return 2;
	must("store_open", store_open(path, &s));
	c = store_conn(s);
	must("user", store_user_put(c, &(struct store_user){ .issuer = "https://idp.example",
	    .subject = "alice", .now = T0 }, &uid));
	static const char *const kids[] = { "k-none", "k-rules" };
	for (int i = 0; i < 2; i++)
		must("consent", store_consent_insert(c, &(struct store_consent_row){ .id = (char *)kids[i],
		    .user_id = uid, .agent = (char *)(i ? "coder" : "butler"), .resource = (char *)"github",
		    .granted = (char *)"issues:write", .declined = (char *)"", .created_at = T0,
		    .expires_at = T0 + 100000000 }));
	memset(&k0, 0, sizeof k0);
	memset(&k1, 0, sizeof k1);
	must("consent_get", consent_get(c, "k-none", T0, &k0));
	must("consent_get", consent_get(c, "k-rules", T0, &k1));
	must("begin", store_begin(c));
	for (int i = 0; i < NRULES; i++) {
		char p[160];
		if (str_fmt(p, sizeof p, "{\"repo\":\"acme/r%d\",\"title\":\"t%d\",\"n\":%d}", i, i, i) != CS_OK)
			return 2;
		rule(c, &cfg, &k1, p, i % 2 ? STANDING_MATCH : STANDING_EXACT, i);
	}
	must("commit", store_commit(c));

	char *text = NULL, digest[APPROVAL_DIGEST_LEN + 1];
	canon("{\"repo\":\"acme/none-of-them\",\"title\":\"Crash on start\",\"n\":7}", &text, digest);
	/* Warm up both (the first call creates the pending approval). */
	(void)checks(c, &cfg, &k0, text, digest, 200, &now);
	(void)checks(c, &cfg, &k1, text, digest, 200, &now);
	if (rounds < 1 || rounds > MAX_ROUNDS || ops < 1)
		return 2;
	double none[MAX_ROUNDS], many[MAX_ROUNDS], ratio[MAX_ROUNDS];
	for (long r = 0; r < rounds; r++) {
		none[r] = checks(c, &cfg, &k0, text, digest, ops, &now);
		many[r] = checks(c, &cfg, &k1, text, digest, ops, &now);
		ratio[r] = many[r] / none[r];
	}
	size_t nr = (size_t)rounds;
	double more = (median(ratio, nr) - 1) * 100;
	printf("approval_check, one person: no standing rules %.1f us CPU; 1,000 rules (500 exact, "
	    "500 match on one key set, none covering the call) %.1f us CPU: %+.1f %% (target <= 10 %%; "
	    "medians of %zu alternated rounds)\n",
	    median(none, nr) / (double)ops * 1e6, median(many, nr) / (double)ops * 1e6, more, nr);
	free(text);
	consent_clear(&k0);
	consent_clear(&k1);
	store_close(s);
	unlink(path);
	char side[160];
	if (str_fmt(side, sizeof side, "%s-wal", path) == CS_OK)
		unlink(side);
	if (str_fmt(side, sizeof side, "%s-shm", path) == CS_OK)
		unlink(side);
	rmdir(dir);
	return more <= 10 ? 0 : 1;
}
