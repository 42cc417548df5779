/* metrics.c -- the registry behind GET /metrics.  Families and their series
 * are allocated when first named and kept in fixed tables (METRICS_MAX_SERIES
 * a family), one mutex a family; rendering takes each family's mutex in
 * turn, so a scrape never sees half an update of one series.  Nothing here
 * knows HTTP: the handler asks metrics_render for the text. */
#include <math.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "metrics.h"

#define MAX_FAMILIES 64
#define MAX_COLLECTORS 16
#define OTHER "other"

struct series {
	char   *values[METRICS_MAX_LABELS];
	double  value;                          /* counter, gauge */
	double  sum;                            /* histogram */
	uint64_t count;
	uint64_t buckets[METRICS_MAX_BUCKETS + 1];   /* per bucket, not cumulative; last = +Inf */
};

struct metric_family {
	char            *name, *help;
	enum metric_type type;
	char            *labels[METRICS_MAX_LABELS];
	size_t           nlabels;
	double           le[METRICS_MAX_BUCKETS];
	size_t           nbuckets;
	pthread_mutex_t  mu;
	struct series   *series;                /* METRICS_MAX_SERIES */
	size_t           nseries;
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct metric_family *families[MAX_FAMILIES];
static size_t nfamilies;
static struct { metrics_collect_fn fn; void *arg; } collectors[MAX_COLLECTORS];
static size_t ncollectors;

static bool valid_name(const char *s)
{
	if (s == NULL || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_' ||
		    (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

static void family_free(struct metric_family *f)
{
	if (f == NULL)
		return;
	for (size_t i = 0; f->series != NULL && i < f->nseries; i++)
		for (size_t j = 0; j < f->nlabels; j++)
			free(f->series[i].values[j]);
	for (size_t j = 0; j < f->nlabels; j++)
		free(f->labels[j]);
	free(f->series);
	free(f->name);
	free(f->help);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

struct metric_family *metrics_family(const char *name, const char *help, enum metric_type type,
    const char *const *labels, const double *buckets, size_t nbuckets)
{
	struct metric_family *f = NULL;
	if (!valid_name(name) || help == NULL || type >= METRIC_TYPE__MAX ||
	    (type == METRIC_HISTOGRAM) != (nbuckets > 0) || nbuckets > METRICS_MAX_BUCKETS)
		return NULL;
	if (type == METRIC_COUNTER && (strlen(name) < 6 || strcmp(name + strlen(name) - 6, "_total") != 0))
		return NULL;
	for (size_t i = 1; i < nbuckets; i++)
		if (!(buckets[i] > buckets[i - 1]))
			return NULL;
	f = calloc(1, sizeof *f);
	if (f == NULL || pthread_mutex_init(&f->mu, NULL) != 0) {
		free(f);
		return NULL;
	}
	f->type = type;
	f->name = strdup(name);
	f->help = strdup(help);
	f->series = calloc(METRICS_MAX_SERIES, sizeof *f->series);
	if (f->name == NULL || f->help == NULL || f->series == NULL)
		goto fail;
	for (; labels != NULL && labels[f->nlabels] != NULL; f->nlabels++) {
		if (f->nlabels == METRICS_MAX_LABELS || !valid_name(labels[f->nlabels]) ||
		    strcmp(labels[f->nlabels], "le") == 0 ||
		    (f->labels[f->nlabels] = strdup(labels[f->nlabels])) == NULL)
			goto fail;
	}
	for (size_t i = 0; i < nbuckets; i++)
		f->le[i] = buckets[i];
	f->nbuckets = nbuckets;
	pthread_mutex_lock(&reg_mu);
	for (size_t i = 0; i < nfamilies; i++)
		if (strcmp(families[i]->name, name) == 0) {
			pthread_mutex_unlock(&reg_mu);
			goto fail;
		}
	if (nfamilies == MAX_FAMILIES) {
		pthread_mutex_unlock(&reg_mu);
		goto fail;
	}
	families[nfamilies++] = f;
	pthread_mutex_unlock(&reg_mu);
	return f;
fail:
	family_free(f);
	return NULL;
}

static struct metric_family *family_find(const char *name)
{
	struct metric_family *f = NULL;
	pthread_mutex_lock(&reg_mu);
	for (size_t i = 0; f == NULL && i < nfamilies; i++)
		if (strcmp(families[i]->name, name) == 0)
			f = families[i];
	pthread_mutex_unlock(&reg_mu);
	return f;
}

struct metric_family *metrics_family_get(const char *name, const char *help,
    enum metric_type type, const char *const *labels, const double *buckets, size_t nbuckets)
{
	struct metric_family *f;
	if (name == NULL || (f = family_find(name)) != NULL)
		return name == NULL ? NULL : f;
	/* Another thread may declare it meanwhile: then it is found the second time. */
	if ((f = metrics_family(name, help, type, labels, buckets, nbuckets)) == NULL)
		f = family_find(name);
	return f;
}

/* The series for values, created when new; the "other" series once the
 * table is full.  Called with f->mu held.  NULL only when memory fails. */
static struct series *series_for(struct metric_family *f, const char *const *values)
{
	const char *other[METRICS_MAX_LABELS] = { OTHER, OTHER, OTHER, OTHER };
	for (int pass = 0; pass < 2; pass++) {
		const char *const *want = pass == 0 ? values : other;
		for (size_t i = 0; i < f->nseries; i++) {
			size_t j = 0;
			while (j < f->nlabels && strcmp(f->series[i].values[j],
			    want != NULL && want[j] != NULL ? want[j] : "") == 0)
				j++;
			if (j == f->nlabels)
				return &f->series[i];
		}
		/* Room for a new series; the last slot is kept for "other". */
		if (f->nseries < METRICS_MAX_SERIES - (pass == 0 ? 1 : 0)) {
			struct series *s = &f->series[f->nseries];
			memset(s, 0, sizeof *s);
			for (size_t j = 0; j < f->nlabels; j++) {
				s->values[j] = strdup(want != NULL && want[j] != NULL ? want[j] : "");
				if (s->values[j] == NULL) {
					while (j-- > 0)
						free(s->values[j]);
					return NULL;
				}
			}
			f->nseries++;
			return s;
		}
	}
	return NULL;
}

void metrics_add(struct metric_family *f, const char *const *values, double v)
{
	struct series *s;
	if (f == NULL || f->type == METRIC_HISTOGRAM || (f->type == METRIC_COUNTER && !(v >= 0)))
		return;
	pthread_mutex_lock(&f->mu);
	if ((s = series_for(f, values)) != NULL)
		s->value += v;
	pthread_mutex_unlock(&f->mu);
}

void metrics_set(struct metric_family *f, const char *const *values, double v)
{
	struct series *s;
	if (f == NULL || f->type == METRIC_HISTOGRAM)
		return;
	pthread_mutex_lock(&f->mu);
	/* A counter never goes down. */
	if ((s = series_for(f, values)) != NULL && (f->type == METRIC_GAUGE || v >= s->value))
		s->value = v;
	pthread_mutex_unlock(&f->mu);
}

double metrics_sum(struct metric_family *f, const char *const *values)
{
	double sum = 0;
	if (f == NULL || f->type == METRIC_HISTOGRAM)
		return 0;
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; i < f->nseries; i++) {
		size_t j = 0;
		while (j < f->nlabels && (values == NULL || values[j] == NULL ||
		    strcmp(f->series[i].values[j], values[j]) == 0))
			j++;
		if (j == f->nlabels)
			sum += f->series[i].value;
	}
	pthread_mutex_unlock(&f->mu);
	return sum;
}

void metrics_observe(struct metric_family *f, const char *const *values, double v)
{
	struct series *s;
	size_t b = 0;
	if (f == NULL || f->type != METRIC_HISTOGRAM || isnan(v))
		return;
	while (b < f->nbuckets && v > f->le[b])
		b++;
	pthread_mutex_lock(&f->mu);
	if ((s = series_for(f, values)) != NULL) {
		s->buckets[b]++;
		s->count++;
		s->sum += v;
	}
	pthread_mutex_unlock(&f->mu);
}

enum cs_err metrics_collector(metrics_collect_fn fn, void *arg)
{
	enum cs_err e = CS_ETOOBIG;
	pthread_mutex_lock(&reg_mu);
	if (ncollectors < MAX_COLLECTORS) {
		collectors[ncollectors].fn = fn;
		collectors[ncollectors].arg = arg;
		ncollectors++;
		e = CS_OK;
	}
	pthread_mutex_unlock(&reg_mu);
	return e;
}

/* --- the text format ------------------------------------------------------ */

static enum cs_err put_escaped(struct buf *out, const char *s, bool quote)
{
	enum cs_err e = CS_OK;
	for (; *s && e == CS_OK; s++) {
		if (*s == '\\')
			e = buf_puts(out, "\\\\");
		else if (*s == '\n')
			e = buf_puts(out, "\\n");
		else if (*s == '"' && quote)
			e = buf_puts(out, "\\\"");
		else
			e = buf_append(out, s, 1);
	}
	return e;
}

static enum cs_err put_number(struct buf *out, double v)
{
	if (isinf(v))
		return buf_puts(out, v > 0 ? "+Inf" : "-Inf");
	if (isnan(v))
		return buf_puts(out, "NaN");
	if (v == floor(v) && fabs(v) < 1e15)
		return buf_printf(out, "%.0f", v);
	return buf_printf(out, "%.9g", v);
}

/* name{labels[,le="x"]} value\n */
static enum cs_err put_line(struct buf *out, const struct metric_family *f, const char *suffix,
    const struct series *s, const double *le, double v)
{
	enum cs_err e = buf_printf(out, "%s%s", f->name, suffix);
	if (e == CS_OK && (f->nlabels > 0 || le != NULL))
		e = buf_puts(out, "{");
	for (size_t j = 0; e == CS_OK && j < f->nlabels; j++) {
		e = buf_printf(out, "%s%s=\"", j ? "," : "", f->labels[j]);
		if (e == CS_OK)
			e = put_escaped(out, s->values[j], true);
		if (e == CS_OK)
			e = buf_puts(out, "\"");
	}
	if (e == CS_OK && le != NULL) {
		e = buf_printf(out, "%sle=\"", f->nlabels ? "," : "");
		if (e == CS_OK)
			e = put_number(out, *le);
		if (e == CS_OK)
			e = buf_puts(out, "\"");
	}
	if (e == CS_OK && (f->nlabels > 0 || le != NULL))
		e = buf_puts(out, "}");
	if (e == CS_OK)
		e = buf_puts(out, " ");
	if (e == CS_OK)
		e = put_number(out, v);
	if (e == CS_OK)
		e = buf_puts(out, "\n");
	return e;
}

static enum cs_err render_family(struct buf *out, struct metric_family *f)
{
	static const char *const type_names[] = { "counter", "gauge", "histogram" };
	enum cs_err e = buf_printf(out, "# HELP %s ", f->name);
	if (e == CS_OK)
		e = put_escaped(out, f->help, false);
	if (e == CS_OK)
		e = buf_printf(out, "\n# TYPE %s %s\n", f->name, type_names[f->type]);
	pthread_mutex_lock(&f->mu);
	for (size_t i = 0; e == CS_OK && i < f->nseries; i++) {
		const struct series *s = &f->series[i];
		if (f->type != METRIC_HISTOGRAM) {
			e = put_line(out, f, "", s, NULL, s->value);
			continue;
		}
		uint64_t cum = 0;
		for (size_t b = 0; e == CS_OK && b <= f->nbuckets; b++) {
			double inf = INFINITY;
			cum += s->buckets[b];
			e = put_line(out, f, "_bucket", s, b < f->nbuckets ? &f->le[b] : &inf, (double)cum);
		}
		if (e == CS_OK)
			e = put_line(out, f, "_sum", s, NULL, s->sum);
		if (e == CS_OK)
			e = put_line(out, f, "_count", s, NULL, (double)s->count);
	}
	pthread_mutex_unlock(&f->mu);
	return e;
}

enum cs_err metrics_render(struct buf *out)
{
	enum cs_err e = CS_OK;
	size_t n, nc;
	pthread_mutex_lock(&reg_mu);
	nc = ncollectors;
	pthread_mutex_unlock(&reg_mu);
	for (size_t i = 0; i < nc; i++)
		collectors[i].fn(collectors[i].arg);
	pthread_mutex_lock(&reg_mu);
	n = nfamilies;
	pthread_mutex_unlock(&reg_mu);
	/* Families are only appended (until metrics_reset), so the first n are stable. */
	for (size_t i = 0; e == CS_OK && i < n; i++)
		e = render_family(out, families[i]);
	return e;
}

enum cs_err metrics_render_family(struct buf *out, struct metric_family *f)
{
	return f != NULL ? render_family(out, f) : CS_OK;
}

void metrics_reset(void)
{
	pthread_mutex_lock(&reg_mu);
	for (size_t i = 0; i < M__MAX; i++)
		metric[i] = NULL;
	for (size_t i = 0; i < nfamilies; i++)
		family_free(families[i]);
	nfamilies = 0;
	ncollectors = 0;
	pthread_mutex_unlock(&reg_mu);
}

/* --- consentd's own families ---------------------------------------------- */

struct metric_family *metric[M__MAX];

static const char *const l_route_method_status[] = { "route", "method", "status", NULL };
static const char *const l_route[] = { "route", NULL };
static const char *const l_kind[] = { "kind", NULL };
static const char *const l_state[] = { "state", NULL };
static const char *const l_outcome[] = { "outcome", NULL };
static const char *const l_resource[] = { "resource", NULL };
static const char *const l_resource_outcome[] = { "resource", "outcome", NULL };
static const char *const l_what[] = { "what", NULL };
static const char *const l_cache_outcome[] = { "cache", "outcome", NULL };
static const char *const l_reason[] = { "reason", NULL };
static const char *const l_health[] = { "health", NULL };
static const double b_http[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30 };
static const double b_commit[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
	0.5, 1, 5 };
static const double b_lock[] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
	0.05, 0.1, 0.25, 0.5, 1, 5 };
static const double b_batch[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256 };

#define NB(a) (sizeof (a) / sizeof (a)[0])

static const struct {
	const char *name, *help;
	enum metric_type type;
	const char *const *labels;
	const double *buckets;
	size_t nbuckets;
} defs[M__MAX] = {
	[M_HTTP_REQUESTS] = { "consentd_http_requests_total", "HTTP requests answered, by route "
	    "pattern (\"other\": no route matched), method and status.", METRIC_COUNTER,
	    l_route_method_status, NULL, 0 },
	[M_HTTP_DURATION] = { "consentd_http_request_duration_seconds", "Time from a request's "
	    "first byte to its answer being queued, by route pattern (a proxied call: until its "
	    "upstream's status).", METRIC_HISTOGRAM, l_route, b_http, NB(b_http) },
	[M_GRANTS_ISSUED] = { "consentd_grants_issued_total", "Grants issued, by kind "
	    "(token_exchange: a new grant for a live consent; refresh_token: a refresh; "
	    "authorization_code: an MCP client's code).",
	    METRIC_COUNTER, l_kind, NULL, 0 },
	[M_CONSENTS] = { "consentd_consents", "Consents in the database, by state (live, expired, "
	    "revoked, reconnect_required), counted at each scrape.", METRIC_GAUGE, l_state, NULL, 0 },
	[M_CONSENT_REQUESTS] = { "consentd_consent_requests_total", "Decisions on consent "
	    "requests, by outcome (approved, denied; refused: unknown, not_yours, closed, invalid, "
	    "changed).", METRIC_COUNTER, l_outcome, NULL, 0 },
	[M_APPROVALS] = { "consentd_approvals_total", "Approvals of single actions, by outcome "
	    "(approved, denied, not_yours, closed: decisions; used, not_redeemable: releases).",
	    METRIC_COUNTER, l_outcome, NULL, 0 },
	[M_VAULT_RELEASES] = { "consentd_vault_releases_total", "Provider tokens released from "
	    "the vault (to the gateway or to the proxy), by resource.", METRIC_COUNTER, l_resource,
	    NULL, 0 },
	[M_VAULT_REFRESHES] = { "consentd_vault_refreshes_total", "Provider token refreshes, by "
	    "resource and outcome (ok, revoked: the provider refused the refresh token, error).",
	    METRIC_COUNTER, l_resource_outcome, NULL, 0 },
	[M_PROVIDER_ERRORS] = { "consentd_provider_errors_total", "Calls to a provider's token "
	    "or revocation endpoint that failed (no answer, or an answer that is not a valid one), "
	    "by resource.", METRIC_COUNTER, l_resource, NULL, 0 },
	[M_FETCH_ERRORS] = { "consentd_fetch_errors_total", "Documents consentd fetches that "
	    "could not be fetched or used, by what (idp_discovery, idp_jwks: the IdP's "
	    "metadata and keys; provider_discovery: a resource provider's metadata; gateway_jwks: "
	    "[gateway] jwks_uri).", METRIC_COUNTER, l_what, NULL, 0 },
	[M_EVENT_DELIVERIES] = { "consentd_event_deliveries_total", "Security event deliveries "
	    "to [gateway] events_uri, by outcome (delivered, failed).", METRIC_COUNTER, l_outcome,
	    NULL, 0 },
	[M_EVENT_BACKLOG] = { "consentd_event_backlog", "Security events waiting to be "
	    "delivered, counted at each scrape.", METRIC_GAUGE, NULL, NULL, 0 },
	[M_DB_COMMIT_SECONDS] = { "consentd_db_commit_seconds", "Time one group COMMIT took "
	    "(its fsync included).", METRIC_HISTOGRAM, NULL, b_commit, NB(b_commit) },
	[M_DB_COMMIT_BATCH] = { "consentd_db_commit_batch_size", "Transactions made durable by "
	    "one group COMMIT (one fsync).", METRIC_HISTOGRAM, NULL, b_batch, NB(b_batch) },
	[M_DB_BUSY_WAITS] = { "consentd_db_busy_waits_total", "Times a database connection found "
	    "the database locked by another and waited (SQLite busy handler, first call of each "
	    "wait).", METRIC_COUNTER, NULL, NULL, 0 },
	[M_DB_QUEUE_FULL] = { "consentd_db_write_queue_full_total", "Transactions refused at "
	    "once (503) because [database] write_queue callers already waited for the writer.",
	    METRIC_COUNTER, NULL, NULL, 0 },
	[M_DB_LOCK_WAIT] = { "consentd_db_lock_wait_seconds", "PostgreSQL: transactions that found "
	    "this node's writer turn held by another of its transactions and waited, and how long "
	    "each waited (_count is the number of waits; other nodes' transactions are never "
	    "waited for here).", METRIC_HISTOGRAM, NULL, b_lock, NB(b_lock) },
	[M_DB_LOCK_HOLD] = { "consentd_db_lock_hold_seconds", "PostgreSQL: how long each "
	    "transaction held this node's writer turn, from the turn to its COMMIT's or ROLLBACK's "
	    "answer (one transaction at a time per node: a node's transactions per second are at "
	    "most 1 / this time).", METRIC_HISTOGRAM, NULL, b_lock, NB(b_lock) },
	[M_DB_CONFLICTS] = { "consentd_db_conflicts_total", "PostgreSQL: transactions that failed "
	    "with a serialisation failure or a deadlock (SQLSTATE 40001, 40P01): another node's "
	    "concurrent transaction conflicted with them; each answered 503.", METRIC_COUNTER, NULL,
	    NULL, 0 },
	[M_DB_LINGERS] = { "consentd_db_commit_lingers_total", "SQLite: group commits that "
	    "waited (at most as long as a COMMIT takes, 1 ms at most) for requests under way to "
	    "join them before their COMMIT.", METRIC_COUNTER, NULL, NULL, 0 },
	[M_DB_WAL_RESTARTS] = { "consentd_db_wal_restarts_total", "SQLite: times the WAL, "
	    "past 4,000 pages, was to be begun again from its start, by outcome (done; readers: "
	    "a reader still in the WAL after 50 ms, tried again once it grew as much again).",
	    METRIC_COUNTER, l_outcome, NULL, 0 },
	[M_DB_REQUESTS] = { "consentd_db_requests_under_way", "SQLite: requests whose handler "
	    "has begun and not yet finished, at the scrape (the scrape's own included): what "
	    "a group commit waits for.", METRIC_GAUGE, NULL, NULL, 0 },
	[M_CACHE_LOOKUPS] = { "consentd_cache_lookups_total", "Look-ups in the verification "
	    "caches, by cache (subject_token: the IdP's signature on a subject token at /token; "
	    "grant: consentd's signature on a grant at /introspect and /proxy; consent: the live "
	    "consent a worker thread remembers for a token exchange) and outcome (hit, miss: "
	    "verified or read in full; stale: a remembered consent the writer's turn refused).",
	    METRIC_COUNTER, l_cache_outcome, NULL, 0 },
	[M_AUDIT_HEAD_LAG] = { "consentd_audit_head_lag_entries", "Audit entries in the database "
	    "past the highest head consentd published, at the scrape (0 normally: each commit "
	    "publishes its head before it answers; a database behind the heads shows in "
	    "consentd_audit_head_behind instead).", METRIC_GAUGE, NULL, NULL, 0 },
	[M_GATEWAY_AUTH_REFUSED] = { "consentd_gateway_auth_refused_total", "Refused gateway "
	    "authentications at /token, /introspect, /revoke, /proxy and /metrics, by reason "
	    "(missing, method_not_enabled, malformed, basic, assertion, replay); each one, whether "
	    "or not an audit entry summarised it.", METRIC_COUNTER, l_reason, NULL, 0 },
	[M_CONNECTIONS] = { "consentd_connections", "Provider connections of live consents, by "
	    "health (ok: tokens in the vault that work; reconnect_required: the provider ended "
	    "the connection and the person must connect again), counted at each scrape.",
	    METRIC_GAUGE, l_health, NULL, 0 },
};

/* The series for values, at zero: a scrape shows it before anything is counted. */
static void series_touch(struct metric_family *f, const char *const *values)
{
	pthread_mutex_lock(&f->mu);
	(void)series_for(f, values);
	pthread_mutex_unlock(&f->mu);
}

/* Label values known before anything happens, shown at zero. */
static const char *const zero_fetch[] = { "idp_discovery", "idp_jwks", "provider_discovery",
	"gateway_jwks", NULL };
static const char *const zero_delivery[] = { "delivered", "failed", NULL };
/* auth_refusal.h's reasons. */
static const char *const zero_refused[] = { "missing", "method_not_enabled", "malformed", "basic",
	"assertion", "replay", NULL };
static const char *const zero_cache[][2] = { { "subject_token", "hit" },
	{ "subject_token", "miss" }, { "grant", "hit" }, { "grant", "miss" }, { "consent", "hit" },
	{ "consent", "miss" }, { "consent", "stale" } };

enum cs_err metrics_declare_consentd(void)
{
	for (size_t i = 0; i < M__MAX; i++) {
		if (metric[i] != NULL)
			continue;
		metric[i] = metrics_family(defs[i].name, defs[i].help, defs[i].type, defs[i].labels,
		    defs[i].buckets, defs[i].nbuckets);
		if (metric[i] == NULL)
			return CS_ENOMEM;
		if (defs[i].labels == NULL)
			series_touch(metric[i], NULL);
	}
	for (size_t i = 0; zero_fetch[i] != NULL; i++)
		series_touch(metric[M_FETCH_ERRORS], &zero_fetch[i]);
	for (size_t i = 0; zero_delivery[i] != NULL; i++)
		series_touch(metric[M_EVENT_DELIVERIES], &zero_delivery[i]);
	for (size_t i = 0; i < sizeof zero_cache / sizeof zero_cache[0]; i++)
		series_touch(metric[M_CACHE_LOOKUPS], zero_cache[i]);
	for (size_t i = 0; zero_refused[i] != NULL; i++)
		series_touch(metric[M_GATEWAY_AUTH_REFUSED], &zero_refused[i]);
	return CS_OK;
}

void metrics_inc(enum metric_id id, const char *value)
{
	const char *v[] = { value };
	if ((unsigned)id < M__MAX)
		metrics_add(metric[id], value != NULL ? v : NULL, 1);
}

void metrics_inc2(enum metric_id id, const char *v1, const char *v2)
{
	const char *v[] = { v1, v2 };
	if ((unsigned)id < M__MAX)
		metrics_add(metric[id], v, 1);
}
