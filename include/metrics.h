/* metrics.h -- counters, gauges and histograms for GET /metrics, in the
 * Prometheus text exposition format (version 0.0.4).  A family is declared
 * once with its name, help text, type and label names; its series (one per
 * combination of label values) live in a fixed table of METRICS_MAX_SERIES,
 * so memory is bounded whatever values callers pass: past the bound, values
 * are counted under the one series whose labels all say "other".  Label
 * values come from consentd's own words (route patterns, status codes,
 * configured resource names, outcome names), never from a request's text.
 * Updates are lock-free once a series exists; thread-safe throughout. */
#ifndef CS_METRICS_H
#define CS_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include "buf.h"
#include "cs_err.h"

#define METRICS_MAX_LABELS 4
#define METRICS_MAX_SERIES 256
#define METRICS_MAX_BUCKETS 16

enum metric_type {
	METRIC_COUNTER,
	METRIC_GAUGE,
	METRIC_HISTOGRAM,
	METRIC_TYPE__MAX
};

struct metric_family;

/* Declares a family.  name follows Prometheus conventions (a counter ends
 * in _total; base units: _seconds, _bytes); labels is NULL-terminated (at
 * most METRICS_MAX_LABELS); buckets (histograms only) are the upper bounds
 * in ascending order, nbuckets at most METRICS_MAX_BUCKETS, +Inf implied.
 * Families are kept until metrics_reset and rendered in declaration order.
 * NULL on a bad declaration or allocation failure (callers may pass NULL on
 * to the update functions, which then do nothing). */
struct metric_family *metrics_family(const char *name, const char *help, enum metric_type type,
    const char *const *labels, const double *buckets, size_t nbuckets);

/* The family called name, declared as metrics_family does when it is not
 * yet (so a module may declare its own families when it first needs them,
 * from any thread); NULL as metrics_family. */
struct metric_family *metrics_family_get(const char *name, const char *help,
    enum metric_type type, const char *const *labels, const double *buckets, size_t nbuckets);

/* values: one per label name, in order (NULL when the family has none).
 * metrics_add adds v >= 0 to a counter or to a gauge (which may also take a
 * negative v); metrics_set sets a gauge, or a counter that something else
 * counts (never lower than it was); metrics_observe records v in a
 * histogram (and its _sum and _count). */
void metrics_add(struct metric_family *f, const char *const *values, double v);
void metrics_set(struct metric_family *f, const char *const *values, double v);
void metrics_observe(struct metric_family *f, const char *const *values, double v);

/* Called at each scrape, before rendering, to set gauges computed on demand
 * (rows by state, a backlog); at most 16 collectors. */
typedef void (*metrics_collect_fn)(void *arg);
enum cs_err metrics_collector(metrics_collect_fn fn, void *arg) CS_MUST_CHECK;

/* Appends every family: # HELP, # TYPE and one line per series. */
enum cs_err metrics_render(struct buf *out) CS_MUST_CHECK;
/* Appends one family (nothing for NULL), as metrics_render writes it. */
enum cs_err metrics_render_family(struct buf *out, struct metric_family *f) CS_MUST_CHECK;
/* The sum of a counter's or gauge's series whose labels equal values' (a
 * NULL value matches any); 0 for NULL. */
double metrics_sum(struct metric_family *f, const char *const *values);

/* Forgets every family and collector (tests, and the end of a process);
 * metric[] goes back to NULLs. */
void metrics_reset(void);

/* --- consentd's own families ---------------------------------------------
 * Declared once at start (metrics_declare_consentd, from app_init) so that a
 * scrape shows every family, counted or not; each module updates its own
 * through metric[M_X] (NULL before the declaration: updates do nothing, as in
 * unit tests).  docs/reference.md's "Metrics" says where each is counted. */
enum metric_id {
	M_HTTP_REQUESTS,        /* consentd_http_requests_total{route,method,status} */
	M_HTTP_DURATION,        /* consentd_http_request_duration_seconds{route} */
	M_GRANTS_ISSUED,        /* consentd_grants_issued_total{kind} */
	M_CONSENTS,             /* consentd_consents{state} (a collector) */
	M_CONSENT_REQUESTS,     /* consentd_consent_requests_total{outcome} */
	M_APPROVALS,            /* consentd_approvals_total{outcome} */
	M_VAULT_RELEASES,       /* consentd_vault_releases_total{resource} */
	M_VAULT_REFRESHES,      /* consentd_vault_refreshes_total{resource,outcome} */
	M_PROVIDER_ERRORS,      /* consentd_provider_errors_total{resource} */
	M_FETCH_ERRORS,         /* consentd_fetch_errors_total{what} */
	M_EVENT_DELIVERIES,     /* consentd_event_deliveries_total{outcome} */
	M_EVENT_BACKLOG,        /* consentd_event_backlog (a collector) */
	M_DB_COMMIT_SECONDS,    /* consentd_db_commit_seconds */
	M_DB_COMMIT_BATCH,      /* consentd_db_commit_batch_size */
	M_DB_BUSY_WAITS,        /* consentd_db_busy_waits_total */
	M_DB_QUEUE_FULL,        /* consentd_db_write_queue_full_total */
	M_DB_LOCK_WAIT,         /* consentd_db_lock_wait_seconds (PostgreSQL) */
	M_DB_LOCK_HOLD,         /* consentd_db_lock_hold_seconds (PostgreSQL) */
	M_DB_CONFLICTS,         /* consentd_db_conflicts_total (PostgreSQL) */
	M_DB_LINGERS,           /* consentd_db_commit_lingers_total (SQLite) */
	M_DB_WAL_RESTARTS,      /* consentd_db_wal_restarts_total{outcome} (SQLite) */
	M_DB_REQUESTS,          /* consentd_db_requests_under_way (SQLite, a collector) */
	M_CACHE_LOOKUPS,        /* consentd_cache_lookups_total */
	M_AUDIT_HEAD_LAG,       /* consentd_audit_head_lag_entries (a collector) */
	M_GATEWAY_AUTH_REFUSED, /* consentd_gateway_auth_refused_total{reason} */
	M_CONNECTIONS,          /* consentd_connections{health} (a collector) */
	M__MAX
};
extern struct metric_family *metric[M__MAX];

/* Declares every family of enum metric_id (idempotent: a second call keeps
 * the first's), with the series known in advance at zero: each family without
 * labels, and consentd_fetch_errors_total's and _event_deliveries_total's
 * label values.  CS_ENOMEM when one could not be declared. */
enum cs_err metrics_declare_consentd(void) CS_MUST_CHECK;

/* Shorthands: one label value (or none), add 1. */
void metrics_inc(enum metric_id id, const char *value);
void metrics_inc2(enum metric_id id, const char *v1, const char *v2);

#endif
