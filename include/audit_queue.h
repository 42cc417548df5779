/* audit_queue.h -- audit entries that follow an entry already durable,
 * written off the request's path: a bounded in-memory queue and one writer
 * thread that appends what it holds in ONE transaction per batch (every
 * AUDIT_QUEUE_INTERVAL_MS, or sooner once AUDIT_QUEUE_BATCH wait).
 *
 * Only for entries whose loss in a crash loses no security property: the
 * MCP gateway's "answered" / "upstream_failed" entry of a tools/call (the
 * upstream's status) follows the call's "forwarded" entry, which was
 * committed in the release's transaction before a byte went upstream
 * (mcp_call.c).  An entry that must be durable before something happens
 * never goes through here.
 *
 * What a crash loses: the entries queued and not yet committed, at most one
 * batch window (about AUDIT_QUEUE_INTERVAL_MS, plus a write that failed and
 * waits for its retry).  An orderly stop (audit_queue_stop) writes every
 * entry queued before it.  Nothing is dropped in normal operation: a full
 * queue makes the caller write its entry synchronously (audit_append_alone,
 * counted in consentd_audit_queue_full_total), so a slow database slows the
 * callers down instead of losing entries; and a batch whose commit fails
 * stays queued and is tried again (consentd_audit_queue_write_failures_total).
 * Entries are committed in the order they were queued; an entry written
 * synchronously (queue full) may land before older queued ones, and every
 * queued entry lands after the entry it follows (that one was committed
 * before it was queued). */
#ifndef CS_AUDIT_QUEUE_H
#define CS_AUDIT_QUEUE_H

#include <stddef.h>
#include <stdint.h>
#include "audit.h"
#include "cs_err.h"
#include "store.h"

#define AUDIT_QUEUE_CAPACITY    4096   /* entries waiting at most */
#define AUDIT_QUEUE_BATCH       256    /* entries one transaction writes at most */
#define AUDIT_QUEUE_INTERVAL_MS 100    /* the longest an entry waits for its batch */
#define AUDIT_QUEUE_DETAIL_MAX  1024   /* bytes of a queued entry's detail at most */

struct audit_queue;

struct audit_queue_opts {              /* 0: the default above */
	size_t capacity;
	size_t batch;
	int    interval_ms;
};

/* One audit entry copied out of the caller's memory: it outlives the
 * request that built it (an answer streamed back after its handler
 * returned).  Its detail may grow (audit_queue_entry_detail) until it is
 * put. */
struct audit_queue_entry;

/* A copy of e (every field; detail at most AUDIT_QUEUE_DETAIL_MAX bytes:
 * CS_ETOOBIG).  *out written only on CS_OK; free with audit_queue_entry_free
 * unless it is put. */
enum cs_err audit_queue_entry_new(const struct audit_entry *e,
    struct audit_queue_entry **out) CS_MUST_CHECK;
/* Appends more to the entry's detail; CS_ETOOBIG (detail unchanged) when it
 * would pass AUDIT_QUEUE_DETAIL_MAX. */
enum cs_err audit_queue_entry_detail(struct audit_queue_entry *qe, const char *more) CS_MUST_CHECK;
/* The entry as an audit_entry (pointers into qe, valid while qe lives). */
const struct audit_entry *audit_queue_entry_view(const struct audit_queue_entry *qe);
void audit_queue_entry_free(struct audit_queue_entry *qe);   /* NULL-safe */

/* A queue writing into s (not started: audit_queue_start). *out only on CS_OK. */
enum cs_err audit_queue_new(struct store *s, const struct audit_queue_opts *o,
    struct audit_queue **out) CS_MUST_CHECK;
/* Starts the writer thread. */
enum cs_err audit_queue_start(struct audit_queue *q) CS_MUST_CHECK;
/* Hands qe over (always: freed here whatever the result).  Queued: CS_OK at
 * once.  q NULL (unit tests, a command-line tool), stopped, or full: written
 * now in a transaction of its own on c, the caller's connection (a full
 * queue is counted); then the result is audit_append_alone's. */
enum cs_err audit_queue_put(struct audit_queue *q, struct store_conn *c,
    struct audit_queue_entry *qe) CS_MUST_CHECK;
/* Writes every entry queued when it is called, in batches of at most the
 * batch size, one transaction each, on the calling thread's connection
 * (the writer's work done now: tests, and audit_queue_stop).  The first
 * failing batch stays queued and its error is returned. */
enum cs_err audit_queue_flush(struct audit_queue *q) CS_MUST_CHECK;
/* The orderly stop: from now on puts are written synchronously; the writer
 * thread ends and everything queued is written (tried a few times; what
 * still cannot be written is said on the log with its count, never dropped
 * silently).  Idempotent; NULL-safe.  Call it after the last request that
 * could put has ended and before the store closes. */
void audit_queue_stop(struct audit_queue *q);
/* audit_queue_stop, then frees q.  NULL-safe. */
void audit_queue_free(struct audit_queue *q);

struct audit_queue_stats {
	uint64_t queued;        /* entries put into the queue */
	uint64_t written;       /* queued entries committed */
	uint64_t batches;       /* transactions that committed queued entries */
	uint64_t full;          /* entries written synchronously: the queue was full */
	uint64_t failures;      /* batch writes that failed (their entries stayed queued) */
	size_t   pending;       /* entries waiting now */
};
void audit_queue_stats(struct audit_queue *q, struct audit_queue_stats *out);

#endif
