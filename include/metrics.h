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

#define METRICS_MAX_LABELS 3
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

/* values: one per label name, in order (NULL when the family has none).
 * metrics_add adds v >= 0 to a counter or to a gauge (which may also take a
 * negative v); metrics_set sets a gauge; metrics_observe records v in a
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

/* Forgets every family and collector (tests, and the end of a process). */
void metrics_reset(void);

#endif
