/* test_metrics.c -- the /metrics registry: the exact text of counters,
 * gauges and histograms (cumulative buckets, +Inf, _sum, _count), label
 * escaping, the bound on series (overflow counted as "other"), refused
 * declarations, collectors run at each render, consentd's own families. */
#include <string.h>

#include "testutil.h"
#include "buf.h"
#include "metrics.h"

static char *render(void)
{
	struct buf b;
	buf_init(&b, 1 << 20);
	ck_assert_int_eq(metrics_render(&b), CS_OK);
	return buf_steal(&b);
}

START_TEST(test_counter_and_gauge_text)
{
	const char *const by_route[] = { "route", "status", NULL };
	struct metric_family *req = metrics_family("consentd_http_requests_total", "Requests answered.",
	    METRIC_COUNTER, by_route, NULL, 0);
	struct metric_family *up = metrics_family("consentd_up", "1 while serving.", METRIC_GAUGE, NULL, NULL, 0);
	ck_assert_ptr_nonnull(req);
	ck_assert_ptr_nonnull(up);
	metrics_add(req, (const char *const[]){ "/token", "200" }, 1);
	metrics_add(req, (const char *const[]){ "/token", "200" }, 2);
	metrics_add(req, (const char *const[]){ "/token", "400" }, 1);
	metrics_add(req, (const char *const[]){ "/token", "400" }, -5);   /* a counter never goes down */
	metrics_set(up, NULL, 1);
	char *t = render();
	ck_assert_str_eq(t,
	    "# HELP consentd_http_requests_total Requests answered.\n"
	    "# TYPE consentd_http_requests_total counter\n"
	    "consentd_http_requests_total{route=\"/token\",status=\"200\"} 3\n"
	    "consentd_http_requests_total{route=\"/token\",status=\"400\"} 1\n"
	    "# HELP consentd_up 1 while serving.\n"
	    "# TYPE consentd_up gauge\n"
	    "consentd_up 1\n");
	free(t);
	metrics_reset();
}
END_TEST

START_TEST(test_histogram_text)
{
	const double le[] = { 0.005, 0.1, 1 };
	const char *const labels[] = { "route", NULL };
	struct metric_family *h = metrics_family("consentd_http_request_duration_seconds", "Time to answer.",
	    METRIC_HISTOGRAM, labels, le, 3);
	ck_assert_ptr_nonnull(h);
	const char *const v[] = { "/token" };
	metrics_observe(h, v, 0.001);
	metrics_observe(h, v, 0.005);    /* on a bound: in that bucket (le is <=) */
	metrics_observe(h, v, 0.5);
	metrics_observe(h, v, 7);
	char *t = render();
	ck_assert_str_eq(t,
	    "# HELP consentd_http_request_duration_seconds Time to answer.\n"
	    "# TYPE consentd_http_request_duration_seconds histogram\n"
	    "consentd_http_request_duration_seconds_bucket{route=\"/token\",le=\"0.005\"} 2\n"
	    "consentd_http_request_duration_seconds_bucket{route=\"/token\",le=\"0.1\"} 2\n"
	    "consentd_http_request_duration_seconds_bucket{route=\"/token\",le=\"1\"} 3\n"
	    "consentd_http_request_duration_seconds_bucket{route=\"/token\",le=\"+Inf\"} 4\n"
	    "consentd_http_request_duration_seconds_sum{route=\"/token\"} 7.506\n"
	    "consentd_http_request_duration_seconds_count{route=\"/token\"} 4\n");
	free(t);
	metrics_reset();
}
END_TEST

START_TEST(test_label_values_are_escaped)
{
	const char *const labels[] = { "resource", NULL };
	struct metric_family *f = metrics_family("x_total", "Help with a \\ and a\nnewline.",
	    METRIC_COUNTER, labels, NULL, 0);
	metrics_add(f, (const char *const[]){ "a\"b\\c\nd" }, 1);
	char *t = render();
	ck_assert_str_eq(t,
	    "# HELP x_total Help with a \\\\ and a\\nnewline.\n"
	    "# TYPE x_total counter\n"
	    "x_total{resource=\"a\\\"b\\\\c\\nd\"} 1\n");
	free(t);
	metrics_reset();
}
END_TEST

START_TEST(test_series_are_bounded)
{
	const char *const labels[] = { "k", NULL };
	struct metric_family *f = metrics_family("many_total", "Many.", METRIC_COUNTER, labels, NULL, 0);
	char v[32];
	for (int i = 0; i < 10000; i++) {
		ck_assert_int_eq(str_fmt(v, sizeof v, "v%d", i), CS_OK);
		metrics_add(f, (const char *const[]){ v }, 1);
	}
	char *t = render();
	size_t lines = 0;
	for (const char *p = t; *p; p++)
		lines += *p == '\n';
	ck_assert_uint_eq(lines, 2 + METRICS_MAX_SERIES);
	char want[64];
	ck_assert_int_eq(str_fmt(want, sizeof want, "many_total{k=\"other\"} %d\n",
	    10000 - (METRICS_MAX_SERIES - 1)), CS_OK);
	ck_assert_ptr_nonnull(strstr(t, want));
	free(t);
	metrics_reset();
}
END_TEST

START_TEST(test_bad_declarations_are_refused)
{
	const double up[] = { 1, 0.5 };
	const char *const le[] = { "le", NULL };
	const char *const bad[] = { "a-b", NULL };
	ck_assert_ptr_null(metrics_family("requests", "A counter without _total.", METRIC_COUNTER, NULL, NULL, 0));
	ck_assert_ptr_null(metrics_family("9lives", "A bad name.", METRIC_GAUGE, NULL, NULL, 0));
	ck_assert_ptr_null(metrics_family("h_seconds", "Buckets going down.", METRIC_HISTOGRAM, NULL, up, 2));
	ck_assert_ptr_null(metrics_family("h2_seconds", "No buckets.", METRIC_HISTOGRAM, NULL, NULL, 0));
	ck_assert_ptr_null(metrics_family("g", "A label named le.", METRIC_GAUGE, le, NULL, 0));
	ck_assert_ptr_null(metrics_family("g", "A bad label.", METRIC_GAUGE, bad, NULL, 0));
	ck_assert_ptr_nonnull(metrics_family("g", "Fine.", METRIC_GAUGE, NULL, NULL, 0));
	ck_assert_ptr_null(metrics_family("g", "Twice.", METRIC_GAUGE, NULL, NULL, 0));
	/* Updates on a family that failed to declare do nothing. */
	metrics_add(NULL, NULL, 1);
	metrics_observe(NULL, NULL, 1);
	metrics_set(NULL, NULL, 1);
	metrics_reset();
}
END_TEST

static struct metric_family *backlog;
static int collected;

static void collect(void *arg)
{
	(void)arg;
	metrics_set(backlog, NULL, 40 + ++collected);
}

/* consentd's families: every one declared (a bad name or help would leave a
 * NULL), a second declaration keeps the first, and each renders its HELP and
 * TYPE before anything is counted. */
START_TEST(test_consentd_families)
{
	static const char *const names[] = { "consentd_http_requests_total",
		"consentd_http_request_duration_seconds", "consentd_grants_issued_total",
		"consentd_consents", "consentd_consent_requests_total", "consentd_approvals_total",
		"consentd_vault_releases_total", "consentd_vault_refreshes_total",
		"consentd_provider_errors_total", "consentd_fetch_errors_total",
		"consentd_event_deliveries_total", "consentd_event_backlog",
		"consentd_db_commit_seconds", "consentd_db_commit_batch_size",
		"consentd_db_busy_waits_total", "consentd_db_write_queue_full_total",
		"consentd_db_lock_wait_seconds", "consentd_db_lock_hold_seconds",
		"consentd_db_conflicts_total", "consentd_db_commit_lingers_total",
		"consentd_db_wal_restarts_total", "consentd_db_requests_under_way", "consentd_cache_lookups_total",
		"consentd_audit_head_lag_entries", "consentd_gateway_auth_refused_total",
		"consentd_connections", NULL };
	ck_assert_int_eq(metrics_declare_consentd(), CS_OK);
	for (size_t i = 0; i < M__MAX; i++)
		ck_assert_ptr_nonnull(metric[i]);
	struct metric_family *first = metric[M_GRANTS_ISSUED];
	ck_assert_int_eq(metrics_declare_consentd(), CS_OK);
	ck_assert_ptr_eq(metric[M_GRANTS_ISSUED], first);
	metrics_inc(M_GRANTS_ISSUED, "token_exchange");
	metrics_inc(M_GRANTS_ISSUED, "token_exchange");
	metrics_inc2(M_VAULT_REFRESHES, "gh", "ok");
	metrics_inc(M_DB_BUSY_WAITS, NULL);
	char *t = render();
	size_t n = 0;
	for (; names[n] != NULL; n++) {
		char want[160];
		ck_assert_int_eq(str_fmt(want, sizeof want, "# TYPE %s ", names[n]), CS_OK);
		ck_assert_msg(strstr(t, want) != NULL, "%s missing in:\n%s", names[n], t);
	}
	ck_assert_uint_eq(n, M__MAX);
	ck_assert_ptr_nonnull(strstr(t, "\nconsentd_grants_issued_total{kind=\"token_exchange\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(t,
	    "\nconsentd_vault_refreshes_total{resource=\"gh\",outcome=\"ok\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(t, "\nconsentd_db_busy_waits_total 1\n"));
	/* Known before anything is counted: shown at zero. */
	ck_assert_ptr_nonnull(strstr(t, "\nconsentd_event_backlog 0\n"));
	ck_assert_ptr_nonnull(strstr(t, "\nconsentd_db_write_queue_full_total 0\n"));
	ck_assert_ptr_nonnull(strstr(t, "\nconsentd_db_conflicts_total 0\n"));
	ck_assert_ptr_nonnull(strstr(t,
	    "\nconsentd_cache_lookups_total{cache=\"subject_token\",outcome=\"miss\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(t, "\nconsentd_cache_lookups_total{cache=\"grant\",outcome=\"hit\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(t,
	    "\nconsentd_cache_lookups_total{cache=\"consent\",outcome=\"stale\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(t, "\nconsentd_db_commit_seconds_count 0\n"));
	ck_assert_ptr_nonnull(strstr(t, "\nconsentd_db_lock_wait_seconds_count 0\n"));
	ck_assert_ptr_nonnull(strstr(t, "\nconsentd_db_commit_batch_size_bucket{le=\"+Inf\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(t, "\nconsentd_fetch_errors_total{what=\"idp_jwks\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(t, "\nconsentd_event_deliveries_total{outcome=\"failed\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(t,
	    "\nconsentd_gateway_auth_refused_total{reason=\"method_not_enabled\"} 0\n"));
	free(t);
	/* After a reset the ids point at nothing, and updates do nothing. */
	metrics_reset();
	for (size_t i = 0; i < M__MAX; i++)
		ck_assert_ptr_null(metric[i]);
	metrics_inc(M_GRANTS_ISSUED, "token_exchange");
	t = render();
	ck_assert_str_eq(t, "");
	free(t);
}
END_TEST

START_TEST(test_collectors_run_at_each_render)
{
	backlog = metrics_family("consentd_events_backlog", "Events waiting.", METRIC_GAUGE, NULL, NULL, 0);
	collected = 0;
	ck_assert_int_eq(metrics_collector(collect, NULL), CS_OK);
	char *t = render();
	ck_assert_ptr_nonnull(strstr(t, "consentd_events_backlog 41\n"));
	free(t);
	t = render();
	ck_assert_ptr_nonnull(strstr(t, "consentd_events_backlog 42\n"));
	free(t);
	metrics_reset();
}
END_TEST

/* Four labels (the proxy's refusals: resource, action, reason, status), the
 * text proxy_api.c wrote by hand before it used the registry; a family
 * declared on first need once only; a counter something else counts is set,
 * never lowered; sums over series with a wildcard. */
START_TEST(test_four_labels_and_shared_families)
{
	const char *const l4[] = { "resource", "action", "reason", "status", NULL };
	const char *const l5[] = { "a", "b", "c", "d", "e", NULL };
	struct metric_family *f = metrics_family_get("consentd_proxy_refused_total", "Refused.",
	    METRIC_COUNTER, l4, NULL, 0);
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_eq(metrics_family_get("consentd_proxy_refused_total", "Refused.",
	    METRIC_COUNTER, l4, NULL, 0), f);
	ck_assert_ptr_null(metrics_family("consentd_five_total", "Five.", METRIC_COUNTER, l5, NULL, 0));
	metrics_add(f, (const char *const[]){ "gh", "create_issue", "scope", "403" }, 1);
	metrics_add(f, (const char *const[]){ "gh", "", "no_route", "403" }, 2);
	metrics_add(f, (const char *const[]){ "gh", "create_issue", "scope", "403" }, 1);
	struct metric_family *errs = metrics_family_get("consentd_errors_total", "Errors.",
	    METRIC_COUNTER, NULL, NULL, 0);
	metrics_set(errs, NULL, 3);
	metrics_set(errs, NULL, 2);                /* a counter never goes down */
	char *t = render();
	ck_assert_str_eq(t,
	    "# HELP consentd_proxy_refused_total Refused.\n"
	    "# TYPE consentd_proxy_refused_total counter\n"
	    "consentd_proxy_refused_total{resource=\"gh\",action=\"create_issue\",reason=\"scope\","
	    "status=\"403\"} 2\n"
	    "consentd_proxy_refused_total{resource=\"gh\",action=\"\",reason=\"no_route\","
	    "status=\"403\"} 2\n"
	    "# HELP consentd_errors_total Errors.\n"
	    "# TYPE consentd_errors_total counter\n"
	    "consentd_errors_total 3\n");
	free(t);
	ck_assert(metrics_sum(f, (const char *const[]){ "gh", NULL, NULL, "403" }) == 4);
	ck_assert(metrics_sum(f, (const char *const[]){ "gh", "create_issue", NULL, NULL }) == 2);
	ck_assert(metrics_sum(f, (const char *const[]){ "other", NULL, NULL, NULL }) == 0);
	ck_assert(metrics_sum(NULL, NULL) == 0);
	struct buf b;
	buf_init(&b, 4096);
	ck_assert_int_eq(metrics_render_family(&b, errs), CS_OK);
	ck_assert_int_eq(metrics_render_family(&b, NULL), CS_OK);
	ck_assert_str_eq(b.data, "# HELP consentd_errors_total Errors.\n"
	    "# TYPE consentd_errors_total counter\nconsentd_errors_total 3\n");
	buf_clear(&b);
	metrics_reset();
}
END_TEST

static Suite *metrics_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_counter_and_gauge_text);
	tcase_add_test(tc, test_histogram_text);
	tcase_add_test(tc, test_label_values_are_escaped);
	tcase_add_test(tc, test_series_are_bounded);
	tcase_add_test(tc, test_bad_declarations_are_refused);
	tcase_add_test(tc, test_collectors_run_at_each_render);
	tcase_add_test(tc, test_consentd_families);
	tcase_add_test(tc, test_four_labels_and_shared_families);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(metrics_suite());
}
