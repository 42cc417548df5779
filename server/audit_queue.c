/* audit_queue.c -- the bounded queue of audit entries that follow a durable
 * one, and its one writer thread (audit_queue.h says what may go through
 * here and what a crash loses).  It must never drop an entry silently, never
 * reorder what it commits, and never hold its lock across a transaction.
 * No SQL here: entries go through audit_append like every other. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit_queue.h"
#include "log.h"
#include "metrics.h"

#define STOP_TRIES 3                     /* flush attempts at the orderly stop */

struct audit_queue_entry {
	struct audit_entry e;                /* points into the strings below */
	char *f[9];                          /* actor .. outcome, owned */
	char *detail;                        /* owned, grows */
	size_t detail_len;
};

struct audit_queue {
	struct store *store;
	size_t cap, batch;
	int interval_ms;
	pthread_mutex_t mu;                  /* ring, counters, stopping */
	pthread_cond_t cv;                   /* a put or the stop */
	pthread_mutex_t write_mu;            /* one batch writer at a time (thread or flush) */
	struct audit_queue_entry **ring;
	size_t head, n;
	struct timespec first_at;            /* monotonic: when the oldest pending batch began */
	bool stopping, started;
	pthread_t thread;
	struct audit_queue_stats st;
	struct metric_family *m_full, *m_fail, *m_written, *m_pending;
};

/* --- entries -------------------------------------------------------------- */

static enum cs_err dup_field(const char *s, char **out)
{
	*out = NULL;
	if (s == NULL)
		return CS_OK;
	return (*out = strdup(s)) != NULL ? CS_OK : CS_ENOMEM;
}

void audit_queue_entry_free(struct audit_queue_entry *qe)
{
	if (qe == NULL)
		return;
	for (size_t i = 0; i < sizeof qe->f / sizeof qe->f[0]; i++)
		free(qe->f[i]);
	free(qe->detail);
	free(qe);
}

static void entry_view_set(struct audit_queue_entry *qe)
{
	qe->e.actor = qe->f[0];
	qe->e.action = qe->f[1];
	qe->e.subject = qe->f[2];
	qe->e.agent = qe->f[3];
	qe->e.resource = qe->f[4];
	qe->e.scopes = qe->f[5];
	qe->e.consent_id = qe->f[6];
	qe->e.request_id = qe->f[7];
	qe->e.outcome = qe->f[8];
	qe->e.detail = qe->detail;
}

enum cs_err audit_queue_entry_new(const struct audit_entry *e, struct audit_queue_entry **out)
{
	struct audit_queue_entry *qe;
	enum cs_err err = CS_OK;
	if (e == NULL || e->action == NULL || out == NULL)
		return CS_EINVAL;
	if (e->detail != NULL && strlen(e->detail) > AUDIT_QUEUE_DETAIL_MAX)
		return CS_ETOOBIG;
	if ((qe = calloc(1, sizeof *qe)) == NULL)
		return CS_ENOMEM;
	const char *src[9] = { e->actor, e->action, e->subject, e->agent, e->resource, e->scopes,
		e->consent_id, e->request_id, e->outcome };
	for (size_t i = 0; i < 9 && err == CS_OK; i++)
		err = dup_field(src[i], &qe->f[i]);
	if (err == CS_OK)
		err = dup_field(e->detail != NULL ? e->detail : "", &qe->detail);
	if (err != CS_OK) {
		audit_queue_entry_free(qe);
		return err;
	}
	qe->detail_len = strlen(qe->detail);
	qe->e.ts = e->ts;
	entry_view_set(qe);
	*out = qe;
	return CS_OK;
}

enum cs_err audit_queue_entry_detail(struct audit_queue_entry *qe, const char *more)
{
	if (qe == NULL || more == NULL)
		return CS_EINVAL;
	size_t m = strlen(more);
	if (m > AUDIT_QUEUE_DETAIL_MAX - qe->detail_len)
		return CS_ETOOBIG;
	char *d = realloc(qe->detail, qe->detail_len + m + 1);
	if (d == NULL)
		return CS_ENOMEM;
	memcpy(d + qe->detail_len, more, m + 1);
	qe->detail = d;
	qe->detail_len += m;
	entry_view_set(qe);
	return CS_OK;
}

const struct audit_entry *audit_queue_entry_view(const struct audit_queue_entry *qe)
{
	return qe != NULL ? &qe->e : NULL;
}

/* --- the queue ------------------------------------------------------------ */

static void ms_after(const struct timespec *t, int ms, struct timespec *out)
{
	*out = *t;
	out->tv_sec += ms / 1000;
	out->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (out->tv_nsec >= 1000000000L) {
		out->tv_sec++;
		out->tv_nsec -= 1000000000L;
	}
}

static bool reached(const struct timespec *deadline)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > deadline->tv_sec ||
	    (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec);
}

enum cs_err audit_queue_new(struct store *s, const struct audit_queue_opts *o,
    struct audit_queue **out)
{
	struct audit_queue *q;
	pthread_condattr_t ca;
	if (s == NULL || out == NULL)
		return CS_EINVAL;
	if ((q = calloc(1, sizeof *q)) == NULL)
		return CS_ENOMEM;
	q->store = s;
	q->cap = o != NULL && o->capacity > 0 ? o->capacity : AUDIT_QUEUE_CAPACITY;
	q->batch = o != NULL && o->batch > 0 ? o->batch : AUDIT_QUEUE_BATCH;
	q->interval_ms = o != NULL && o->interval_ms > 0 ? o->interval_ms : AUDIT_QUEUE_INTERVAL_MS;
	if ((q->ring = calloc(q->cap, sizeof *q->ring)) == NULL) {
		free(q);
		return CS_ENOMEM;
	}
	pthread_mutex_init(&q->mu, NULL);
	pthread_mutex_init(&q->write_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->cv, &ca);
	pthread_condattr_destroy(&ca);
	/* Declared now, so that a scrape shows them at zero. */
	q->m_full = metrics_family_get("consentd_audit_queue_full_total", "Audit entries written "
	    "synchronously on the request's path because the queue of follow-up entries (an MCP "
	    "call's upstream status) was full.", METRIC_COUNTER, NULL, NULL, 0);
	q->m_fail = metrics_family_get("consentd_audit_queue_write_failures_total", "Batches of "
	    "queued audit entries whose transaction failed (their entries stayed queued and were "
	    "tried again).", METRIC_COUNTER, NULL, NULL, 0);
	q->m_written = metrics_family_get("consentd_audit_queue_written_total", "Queued audit "
	    "entries committed by the queue's writer.", METRIC_COUNTER, NULL, NULL, 0);
	q->m_pending = metrics_family_get("consentd_audit_queue_entries", "Audit entries queued "
	    "and not yet committed.", METRIC_GAUGE, NULL, NULL, 0);
	metrics_add(q->m_full, NULL, 0);
	metrics_add(q->m_fail, NULL, 0);
	metrics_add(q->m_written, NULL, 0);
	metrics_set(q->m_pending, NULL, 0);
	*out = q;
	return CS_OK;
}

/* One batch: the oldest entries (at most batch) in one transaction on the
 * calling thread's connection; removed from the queue only once committed.
 * *wrote: how many.  Only one writer at a time (write_mu): puts append at
 * the tail meanwhile and never touch what is taken here. */
static enum cs_err write_batch(struct audit_queue *q, size_t *wrote)
{
	struct store_conn *c;
	enum cs_err e = CS_OK;
	size_t n, head;
	*wrote = 0;
	pthread_mutex_lock(&q->write_mu);
	pthread_mutex_lock(&q->mu);
	n = q->n < q->batch ? q->n : q->batch;
	head = q->head;
	pthread_mutex_unlock(&q->mu);
	if (n == 0)
		goto out;
	if ((c = store_conn(q->store)) == NULL) {
		e = CS_EDB;
		goto failed;
	}
	if ((e = store_begin(c)) != CS_OK)
		goto failed;
	/* The batch's numbers in one round trip (many writers: PostgreSQL). */
	e = audit_expect(c, n + 1);
	for (size_t i = 0; i < n && e == CS_OK; i++)
		e = audit_append(c, &q->ring[(head + i) % q->cap]->e);
	if (e == CS_OK)
		e = store_commit(c);
	if (e != CS_OK) {
		store_rollback(c);
		goto failed;
	}
	pthread_mutex_lock(&q->mu);
	for (size_t i = 0; i < n; i++) {
		size_t k = (q->head + i) % q->cap;
		audit_queue_entry_free(q->ring[k]);
		q->ring[k] = NULL;
	}
	q->head = (q->head + n) % q->cap;
	q->n -= n;
	q->st.written += n;
	q->st.batches++;
	clock_gettime(CLOCK_MONOTONIC, &q->first_at);
	size_t left = q->n;
	pthread_mutex_unlock(&q->mu);
	metrics_add(q->m_written, NULL, (double)n);
	metrics_set(q->m_pending, NULL, (double)left);
	*wrote = n;
	goto out;
failed:
	pthread_mutex_lock(&q->mu);
	q->st.failures++;
	pthread_mutex_unlock(&q->mu);
	metrics_add(q->m_fail, NULL, 1);
	log_msg(LOG_WARN, "audit queue: writing %zu queued audit entries failed (%s); they stay "
	    "queued and are tried again", n, cs_strerror(e));
out:
	pthread_mutex_unlock(&q->write_mu);
	return e;
}

/* The writer: a batch once AUDIT_QUEUE_BATCH wait or the oldest has waited
 * interval_ms; after a failure, the next try an interval later. */
static void *writer_main(void *arg)
{
	struct audit_queue *q = arg;
	pthread_mutex_lock(&q->mu);
	while (!q->stopping) {
		struct timespec due;
		if (q->n == 0) {
			pthread_cond_wait(&q->cv, &q->mu);
			continue;
		}
		ms_after(&q->first_at, q->interval_ms, &due);
		if (q->n < q->batch && !reached(&due)) {
			(void)pthread_cond_timedwait(&q->cv, &q->mu, &due);
			continue;
		}
		pthread_mutex_unlock(&q->mu);
		size_t wrote = 0;
		enum cs_err e = write_batch(q, &wrote);
		pthread_mutex_lock(&q->mu);
		if (e != CS_OK && !q->stopping) {
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			ms_after(&now, q->interval_ms, &due);
			while (!q->stopping && pthread_cond_timedwait(&q->cv, &q->mu, &due) != ETIMEDOUT)
				;
			clock_gettime(CLOCK_MONOTONIC, &q->first_at);
		}
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

enum cs_err audit_queue_start(struct audit_queue *q)
{
	if (q == NULL || q->started)
		return CS_EINVAL;
	if (pthread_create(&q->thread, NULL, writer_main, q) != 0)
		return CS_ENOMEM;
	q->started = true;
	return CS_OK;
}

enum cs_err audit_queue_put(struct audit_queue *q, struct store_conn *c,
    struct audit_queue_entry *qe)
{
	enum cs_err e;
	bool full = false;
	if (qe == NULL)
		return CS_EINVAL;
	if (q != NULL) {
		pthread_mutex_lock(&q->mu);
		if (!q->stopping && q->n < q->cap) {
			if (q->n == 0)
				clock_gettime(CLOCK_MONOTONIC, &q->first_at);
			q->ring[(q->head + q->n) % q->cap] = qe;
			q->n++;
			q->st.queued++;
			size_t n = q->n;
			/* The writer wakes for a full batch; otherwise at its deadline. */
			if (n == 1 || n >= q->batch)
				pthread_cond_signal(&q->cv);
			pthread_mutex_unlock(&q->mu);
			metrics_set(q->m_pending, NULL, (double)n);
			return CS_OK;
		}
		full = !q->stopping;
		uint64_t nfull = full ? ++q->st.full : 0;
		pthread_mutex_unlock(&q->mu);
		/* SECURITY: never dropped -- a full queue (the database behind)
		 * costs this caller a commit of its own instead. */
		if (full) {
			metrics_add(q->m_full, NULL, 1);
			if (nfull % 1000 == 1)     /* said, not once per entry */
				log_msg(LOG_WARN, "audit queue full (%zu entries): entries are written "
				    "on the request's path (%llu so far)", q->cap, (unsigned long long)nfull);
		}
	}
	e = c != NULL ? audit_append_alone(c, &qe->e) : CS_EDB;
	audit_queue_entry_free(qe);
	return e;
}

enum cs_err audit_queue_flush(struct audit_queue *q)
{
	if (q == NULL)
		return CS_OK;
	pthread_mutex_lock(&q->mu);
	size_t rounds = q->n / q->batch + 1;
	pthread_mutex_unlock(&q->mu);
	for (size_t i = 0; i < rounds; i++) {
		size_t wrote = 0;
		enum cs_err e = write_batch(q, &wrote);
		if (e != CS_OK)
			return e;
		if (wrote == 0)
			break;
	}
	return CS_OK;
}

void audit_queue_stop(struct audit_queue *q)
{
	if (q == NULL)
		return;
	pthread_mutex_lock(&q->mu);
	q->stopping = true;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	if (q->started) {
		pthread_join(q->thread, NULL);
		q->started = false;
	}
	for (int i = 0; i < STOP_TRIES; i++) {
		pthread_mutex_lock(&q->mu);
		size_t left = q->n;
		pthread_mutex_unlock(&q->mu);
		if (left == 0)
			return;
		if (audit_queue_flush(q) == CS_OK)
			continue;
		struct timespec ts = { 0, (long)q->interval_ms * 1000000L };
		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&q->mu);
	size_t lost = q->n;
	pthread_mutex_unlock(&q->mu);
	if (lost > 0)
		log_msg(LOG_ERROR, "audit queue: %zu queued audit entries (MCP calls' upstream "
		    "statuses) could not be written at the stop", lost);
}

void audit_queue_free(struct audit_queue *q)
{
	if (q == NULL)
		return;
	audit_queue_stop(q);
	for (size_t i = 0; i < q->n; i++)
		audit_queue_entry_free(q->ring[(q->head + i) % q->cap]);
	free(q->ring);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->write_mu);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

void audit_queue_stats(struct audit_queue *q, struct audit_queue_stats *out)
{
	if (out == NULL)
		return;
	memset(out, 0, sizeof *out);
	if (q == NULL)
		return;
	pthread_mutex_lock(&q->mu);
	*out = q->st;
	out->pending = q->n;
	pthread_mutex_unlock(&q->mu);
}
