/* mcp_stream.c -- the GET stream of a 2025-11-25 MCP session (mcp_stream.h).
 * It must never write an elicitation's completion that the store did not hand
 * to it alone, never outlive its bounds (time, count), and never spin: between
 * polls it sleeps. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app.h"
#include "buf.h"
#include "httpc.h"
#include "log.h"
#include "mcp_stream.h"

/* Ids taken per poll: more wait for the next one (half a second). */
#define TAKE_MAX 16
#define PENDING_MAX (64u * 1024)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
/* Guarded by mu: the bounds, and the open streams by person (at most
 * MCP_STREAM_TOTAL_MAX people can have one). */
static struct mcp_stream_limits limits = {
	MCP_STREAM_PER_PERSON, MCP_STREAM_TOTAL, MCP_STREAM_LIFETIME_MS, MCP_STREAM_POLL_MS,
	MCP_STREAM_KEEPALIVE_MS,
};
static struct { int64_t user_id; unsigned n; } people[MCP_STREAM_TOTAL_MAX];
static unsigned open_total;
static atomic_bool stopping;

struct mcp_stream {
	struct store    *s;
	char            *endpoint, *client_id;
	unsigned char    hash[STORE_MCP_HASH_LEN];
	int64_t          user_id;
	struct timespec  start, last_write;
	struct mcp_stream_limits lim;     /* as they were when it opened */
	struct buf       pending;         /* written, not yet read out */
	size_t           off;
	bool             ended;
	struct httpc_stream *up;          /* the upstream's own GET stream, relayed; or NULL */
	struct buf       upbuf;           /* its bytes up to the next whole event */
};

enum cs_err mcp_stream_configure(const struct mcp_stream_limits *l)
{
	static const struct mcp_stream_limits defaults = {
		MCP_STREAM_PER_PERSON, MCP_STREAM_TOTAL, MCP_STREAM_LIFETIME_MS, MCP_STREAM_POLL_MS,
		MCP_STREAM_KEEPALIVE_MS,
	};
	if (l == NULL)
		l = &defaults;
	if (l->per_person == 0 || l->total == 0 || l->total > MCP_STREAM_TOTAL_MAX ||
	    l->lifetime_ms <= 0 || l->poll_ms <= 0 || l->poll_ms > 60000 || l->keepalive_ms <= 0)
		return CS_EINVAL;
	pthread_mutex_lock(&mu);
	limits = *l;
	pthread_mutex_unlock(&mu);
	atomic_store(&stopping, false);
	return CS_OK;
}

void mcp_stream_stop(void)
{
	atomic_store(&stopping, true);
}

unsigned mcp_stream_open_count(void)
{
	pthread_mutex_lock(&mu);
	unsigned n = open_total;
	pthread_mutex_unlock(&mu);
	return n;
}

unsigned mcp_stream_person_count(int64_t user_id)
{
	unsigned n = 0;
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < MCP_STREAM_TOTAL_MAX; i++)
		if (people[i].n > 0 && people[i].user_id == user_id)
			n = people[i].n;
	pthread_mutex_unlock(&mu);
	return n;
}

/* Takes a place for user_id, or says which bound is full (under mu). */
static enum mcp_stream_admit admit_locked(int64_t user_id)
{
	size_t slot = MCP_STREAM_TOTAL_MAX, free_slot = MCP_STREAM_TOTAL_MAX;
	for (size_t i = 0; i < MCP_STREAM_TOTAL_MAX; i++) {
		if (people[i].n > 0 && people[i].user_id == user_id)
			slot = i;
		else if (people[i].n == 0 && free_slot == MCP_STREAM_TOTAL_MAX)
			free_slot = i;
	}
	if (slot != MCP_STREAM_TOTAL_MAX && people[slot].n >= limits.per_person)
		return MCP_STREAM_PERSON_FULL;
	if (open_total >= limits.total)
		return MCP_STREAM_FULL;
	if (slot == MCP_STREAM_TOTAL_MAX) {
		if (free_slot == MCP_STREAM_TOTAL_MAX)        /* cannot be: total <= the table */
			return MCP_STREAM_FULL;
		slot = free_slot;
		people[slot].user_id = user_id;
	}
	people[slot].n++;
	open_total++;
	return MCP_STREAM_ADMITTED;
}

static void release(int64_t user_id)
{
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < MCP_STREAM_TOTAL_MAX; i++)
		if (people[i].n > 0 && people[i].user_id == user_id) {
			people[i].n--;
			break;
		}
	if (open_total > 0)
		open_total--;
	pthread_mutex_unlock(&mu);
}

/* Whole milliseconds elapsed, rounded down.  The nanoseconds' difference is
 * added before dividing: divided alone, a negative one rounded toward zero
 * and counted up to a millisecond more than had passed, so a stream could end
 * before its lifetime (test_mcp_stream saw "life == 1999"). */
static int64_t ms_since(const struct timespec *t0)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return ((int64_t)(now.tv_sec - t0->tv_sec) * 1000000000 + (now.tv_nsec - t0->tv_nsec)) /
	    1000000;
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

enum cs_err mcp_stream_event(struct buf *b, const char *elicitation_id)
{
	size_t mark;
	enum cs_err e;
	if (b == NULL || elicitation_id == NULL)
		return CS_EINVAL;
	mark = b->len;
	if ((e = buf_puts(b, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":"
	    "\"notifications/elicitation/complete\",\"params\":{\"elicitationId\":")) != CS_OK ||
	    (e = buf_json_str(b, elicitation_id)) != CS_OK ||
	    (e = buf_puts(b, "}}\n\n")) != CS_OK)
		buf_truncate(b, mark);
	return e;
}

/* Copies what is pending into dst. */
static void drain_pending(struct mcp_stream *st, char *dst, size_t max, size_t *got)
{
	*got = buf_copy_out(&st->pending, &st->off, dst, max);
	if (st->off == st->pending.len) {
		buf_reset(&st->pending);
		st->off = 0;
	}
}

/* Stops relaying the upstream's stream (it ended, failed, or overflowed):
 * consentd's own events go on. */
static void relay_stop(struct mcp_stream *st, const char *why)
{
	if (why != NULL)
		log_msg(LOG_INFO, "mcp: a session's upstream stream is no longer relayed: %s", why);
	httpc_stream_close(st->up);
	st->up = NULL;
	buf_wipe_clear(&st->upbuf);
}

/* The end of the first whole event in b (its blank line included), or 0. */
static size_t event_end(const struct buf *b)
{
	for (size_t i = 0; i + 1 < b->len; i++) {
		if (b->data[i] == '\n' && b->data[i + 1] == '\n')
			return i + 2;
		if (i + 3 < b->len && memcmp(b->data + i, "\r\n\r\n", 4) == 0)
			return i + 4;
	}
	return 0;
}

/* Waits up to poll_ms for the upstream's bytes and moves each whole event
 * into pending, never a part of one: consentd's own events go between the
 * upstream's, never inside one. */
static void relay_step(struct mcp_stream *st)
{
	char tmp[8192];
	size_t n = 0, end;
	bool ended = false;
	enum cs_err e = httpc_stream_read_wait(st->up, tmp, sizeof tmp, &n, (long)st->lim.poll_ms,
	    &ended);
	if (e != CS_OK || ended) {
		relay_stop(st, e != CS_OK ? "its transfer failed" : NULL);
		return;
	}
	if (n > 0 && buf_append(&st->upbuf, tmp, n) != CS_OK) {
		relay_stop(st, "an event larger than the bound");
		return;
	}
	while ((end = event_end(&st->upbuf)) > 0) {
		if (buf_append(&st->pending, st->upbuf.data, end) != CS_OK) {
			relay_stop(st, "the client does not read fast enough");
			return;
		}
		memmove(st->upbuf.data, st->upbuf.data + end, st->upbuf.len - end);
		st->upbuf.len -= end;
	}
}

void mcp_stream_relay(struct mcp_stream *st, struct httpc_stream *up)
{
	if (st == NULL) {
		httpc_stream_close(up);
		return;
	}
	relay_stop(st, NULL);
	buf_init(&st->upbuf, PENDING_MAX);
	st->up = up;
}

/* One look at the store: the completions taken now, as events into pending. */
static enum cs_err poll_once(struct mcp_stream *st)
{
	struct store_conn *c = store_conn(st->s);
	const struct mcp_who who = { st->endpoint, st->user_id, st->client_id };
	char **ids = NULL;
	size_t n = 0;
	enum cs_err e;
	if (c == NULL)
		return CS_EDB;
	if ((e = mcp_elicitation_take_done(c, &who, st->hash, app_now(), TAKE_MAX, &ids, &n)) !=
	    CS_OK)
		return e;
	for (size_t i = 0; i < n && e == CS_OK; i++)
		e = mcp_stream_event(&st->pending, ids[i]);
	/* SECURITY (of delivery, not secrecy): an id the store handed over is
	 * this stream's alone; one that did not fit is said on the log rather
	 * than dropped without a word (the client still retries on its own). */
	if (e != CS_OK)
		log_msg(LOG_WARN, "mcp: a session's stream could not hold %zu completion(s)", n);
	store_mcp_ids_free(ids, n);
	return e;
}

enum cs_err mcp_stream_read(void *ctx, char *dst, size_t max, size_t *got)
{
	struct mcp_stream *st = ctx;
	if (st == NULL || dst == NULL || got == NULL)
		return CS_EINVAL;
	*got = 0;
	if (max == 0)
		return CS_OK;
	for (;;) {
		if (st->pending.len > st->off) {
			drain_pending(st, dst, max, got);
			clock_gettime(CLOCK_MONOTONIC, &st->last_write);
			return CS_OK;
		}
		if (st->ended)
			return CS_OK;                         /* *got 0: the end */
		if (atomic_load(&stopping) || ms_since(&st->start) >= st->lim.lifetime_ms) {
			st->ended = true;
			continue;
		}
		if (poll_once(st) != CS_OK) {
			/* The client opens the stream again after MCP_STREAM_RETRY_MS; a
			 * store that failed is asked afresh then. */
			log_msg(LOG_WARN, "mcp: a session's stream ended: the store failed");
			st->ended = true;
			continue;
		}
		if (st->pending.len > st->off)
			continue;
		if (ms_since(&st->last_write) >= st->lim.keepalive_ms) {
			if (buf_puts(&st->pending, ": keep-alive\n\n") != CS_OK)
				st->ended = true;
			continue;
		}
		if (st->up != NULL)
			relay_step(st);               /* waits up to poll_ms for the upstream */
		else
			sleep_ms(st->lim.poll_ms);
	}
}

void mcp_stream_close(void *ctx)
{
	struct mcp_stream *st = ctx;
	if (st == NULL)
		return;
	release(st->user_id);
	relay_stop(st, NULL);
	buf_clear(&st->pending);
	free(st->endpoint);
	free(st->client_id);
	free(st);
}

enum cs_err mcp_stream_open(struct store *s, const struct mcp_who *who,
    const unsigned char hash[STORE_MCP_HASH_LEN], enum mcp_stream_admit *adm,
    struct mcp_stream **out)
{
	struct mcp_stream *st;
	enum mcp_stream_admit a;
	if (s == NULL || who == NULL || who->endpoint == NULL || who->client_id == NULL ||
	    who->user_id <= 0 || hash == NULL || adm == NULL || out == NULL)
		return CS_EINVAL;
	if (atomic_load(&stopping)) {
		*adm = MCP_STREAM_STOPPING;
		return CS_OK;
	}
	if ((st = calloc(1, sizeof *st)) == NULL)
		return CS_ENOMEM;
	st->s = s;
	st->user_id = who->user_id;
	memcpy(st->hash, hash, sizeof st->hash);
	buf_init(&st->pending, PENDING_MAX);
	if ((st->endpoint = strdup(who->endpoint)) == NULL ||
	    (st->client_id = strdup(who->client_id)) == NULL ||
	    buf_printf(&st->pending, "retry: %d\n\n", MCP_STREAM_RETRY_MS) != CS_OK) {
		buf_clear(&st->pending);
		free(st->endpoint);
		free(st->client_id);
		free(st);
		return CS_ENOMEM;
	}
	pthread_mutex_lock(&mu);
	a = admit_locked(who->user_id);
	st->lim = limits;
	pthread_mutex_unlock(&mu);
	if (a != MCP_STREAM_ADMITTED) {
		buf_clear(&st->pending);
		free(st->endpoint);
		free(st->client_id);
		free(st);
		*adm = a;
		return CS_OK;
	}
	clock_gettime(CLOCK_MONOTONIC, &st->start);
	st->last_write = st->start;
	*out = st;
	*adm = MCP_STREAM_ADMITTED;
	return CS_OK;
}
