/* store_sqlite.c -- the SQLite backend (store_backend.h): one reading
 * connection per thread, one writer connection shared by all of them through
 * a group commit, WAL, checkpoints off the writer, migrations from
 * migrations/ embedded at build time, the online backup, and the statement
 * cache of its connections.  The SQL of each family lives in its store_X.c,
 * which reaches this file only through store.c.  It must never build SQL
 * from input: every value travels as a bound parameter, and it must never
 * answer a caller's commit before that caller's writes are durable. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>
#include <openssl/crypto.h>

#include "buf.h"
#include "embed.h"
#include "log.h"
#include "metrics.h"
#include "store_backend.h"

/* This file's own statements; the cache (core_stmt) knows them by address. */
static const char SQL_BEGIN[] = "BEGIN IMMEDIATE";
static const char SQL_COMMIT[] = "COMMIT";
static const char SQL_ROLLBACK[] = "ROLLBACK";
/* One savepoint at a time on the writer: callers take turns (see "group commit"). */
static const char SQL_SAVEPOINT[] = "SAVEPOINT caller";
static const char SQL_RELEASE[] = "RELEASE caller";
static const char SQL_ROLLBACK_TO[] = "ROLLBACK TO caller";
/* Changes when another connection commits (see "the audit chain's head"). */
static const char SQL_DATA_VERSION[] = "PRAGMA data_version";
static const char SQL_PING[] = "SELECT 1";
static const char SQL_SCHEMA_MAX[] = "SELECT coalesce(max(version), 0) FROM schema_version";
static const char SQL_SCHEMA_HAS[] = "SELECT 1 FROM schema_version WHERE version = ?1";
static const char SQL_SCHEMA_INSERT[] =
    "INSERT INTO schema_version (version, applied_at) VALUES (?1, ?2)";

/* Created here, not by a migration: it records the migrations. */
static const char schema_version_sql[] =
    "CREATE TABLE IF NOT EXISTS schema_version ("
    "version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)";

static const char conn_pragmas[] =
    "PRAGMA foreign_keys = ON;"
    "PRAGMA synchronous = FULL;";

/* The statement cache: an open-addressed table keyed by the address of the
 * static SQL constant, never more than half full, so a look-up is one or two
 * pointer compares and always finds an empty slot to stop at. */
#define STMT_SLOTS (2 * STORE_MAX_STMTS)
_Static_assert((STMT_SLOTS & (STMT_SLOTS - 1)) == 0, "STMT_SLOTS masks: a power of two");

/* One SQLite statement: the head the dispatcher reads, then the statement. */
struct lite_stmt {
	struct store_stmt  h;             /* h.be = &store_backend_sqlite */
	sqlite3_stmt      *st;
};

/* A SQLite connection and its statements.  A thread's own one serves its
 * reads; the writer's one (struct lite_db's w) serves every transaction. */
struct conn_core {
	sqlite3           *db;
	struct {
		const char       *sql;        /* the key: the address of a static constant */
		struct lite_stmt  st;
	} stmts[STMT_SLOTS];
	size_t             nstmts;
};

/* A caller waiting for the batch that holds its released savepoint. */
struct commit_wait {
	struct commit_wait *next;
	bool                done;
	enum cs_err         e;
};

/* The group commit's state, guarded by mu.  Callers take turns on the
 * writer connection: the turn's holder runs its transaction inside a
 * savepoint of one outer transaction (the batch); when it ends its turn and
 * nobody else is waiting for one (or the batch is full), it commits the
 * batch -- one COMMIT, one fsync -- for everyone in it. */
struct writer {
	pthread_mutex_t     mu;
	pthread_cond_t      turn_cv;      /* the turn became free */
	pthread_cond_t      done_cv;      /* a batch ended */
	struct conn_core    core;         /* the writer connection; used by the turn's holder only */
	bool                busy;         /* someone holds the turn */
	bool                open;         /* the outer transaction is open on core */
	bool                stopping;     /* store_stop: no new turns */
	unsigned            waiting;      /* callers waiting for the turn */
	unsigned            queue_max;    /* more waiting than this: CS_EBUSY at once */
	unsigned            pending;      /* released savepoints in the open batch */
	pthread_cond_t      ckpt_cv;      /* the checkpointer has work, or must stop */
	bool                ckpt_wanted;  /* the WAL passed STORE_CHECKPOINT_PAGES */
	bool                ckpt_stop;
	bool                ckpt_started; /* ckpt_thread runs */
	pthread_t           ckpt_thread;
	int                 wal_pages;    /* the WAL's size after the last COMMIT (the WAL hook;
	                                     written and read by the turn's holder only) */
	int                 ckpt_from;    /* wal_pages when the checkpointer was last woken */
	uint64_t            checkpoints;
	uint64_t            wal_restarts; /* the WAL begun again from its start (wal_restart) */
	uint64_t            wal_restarts_busy; /* restarts that gave up waiting for readers */
	uint64_t            batches;      /* COMMITs made, and the transactions in them */
	uint64_t            transactions;
	/* The linger (see "group commit"): a batch left open without a turn
	 * holder until commit_by, for the requests under way to join it. */
	bool                lingering;    /* commit_by is set for the open batch */
	struct commit_wait *linger_timer; /* the caller of it that commits at commit_by */
	bool                linger_over;  /* commit_by passed: the next turn's end commits */
	struct timespec     commit_by;    /* CLOCK_MONOTONIC */
	unsigned            linger_fixed_us; /* tests: this linger, whatever the COMMITs take */
	unsigned            commit_us;    /* how long a COMMIT takes (a moving average) */
	uint64_t            lingers;      /* batches that lingered */
	struct commit_wait *waits;        /* their callers */
	/* store_transact's jobs waiting for the turn's holder to run them (see
	 * "transactions the turn's holder runs"), oldest first. */
	struct lite_job    *jobs;
	struct lite_job   **jobs_tail;
	unsigned            queued;
	pthread_cond_t      jobs_cv;      /* the jobs' holder lingers: its batch is whole */
	bool                jobs_lingering;
	struct store_audit_mark audit;    /* the batch's last audit entry, in commit order */
	/* The audit chain's head (see there): the turn's holder's only. */
	bool                head_known;   /* head is the chain's head now */
	struct store_audit_mark head;     /* its chain, seq and link */
	bool                version_known;   /* data_version was read at the batch's BEGIN */
	int64_t             data_version;    /* PRAGMA data_version then */
	uint64_t            foreign_commits; /* batches begun after another connection committed */
};

/* A store_transact job in the writer's queue; on its caller's stack. */
struct lite_job {
	struct commit_wait    cw;         /* its outcome, once run: in the batch, or done */
	struct lite_job      *next;
	struct lite_link     *k;
	struct store_tx_job  *j;
	bool                  ran;        /* taken from the queue by a turn's holder */
};

/* The database: its path, the writer, and the dispatcher's publisher. */
struct lite_db {
	char                  *path;
	struct store_publisher pub;
	struct writer          w;
	bool                   w_ok;      /* w's mutex and conditions exist */
	atomic_uint            requests;  /* requests under way (store_requests) */
};

/* One thread's connection. */
struct lite_link {
	struct lite_db    *d;
	struct conn_core   own;           /* this thread's connection, for reads */
	struct conn_core  *cur;           /* &own, or the writer's while in a transaction */
};

static struct lite_db *db_of(struct store_db *d) { return (struct lite_db *)d; }
static struct lite_link *link_of(struct store_link *k) { return (struct lite_link *)k; }
static struct lite_stmt *stmt_of(struct store_stmt *st) { return (struct lite_stmt *)st; }
static sqlite3_stmt *raw_of(struct store_stmt *st) { return stmt_of(st)->st; }

#define STORE_BUSY_TIMEOUT_MS 5000

/* Waiting for another connection's write: short, even sleeps (SQLite's own
 * busy_timeout backs off to 100 ms sleeps, which, with a writer commit taking
 * one fsync of a few ms, left callers asleep long after the lock was free:
 * p99 of proxied calls ~0.6 s).  1 ms for the first 50 tries, then 2 ms,
 * about STORE_BUSY_TIMEOUT_MS in all; 0 gives up (SQLITE_BUSY). */
static int busy_wait(void *arg, int count)
{
	(void)arg;
	const int quick = 50;
	if (count == 0)
		metrics_add(metric[M_DB_BUSY_WAITS], NULL, 1);
	if (count >= quick + (STORE_BUSY_TIMEOUT_MS - quick) / 2)
		return 0;
	struct timespec ts = { 0, count < quick ? 1000 * 1000 : 2 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	return 1;
}
#define STORE_MAX_STR (1024 * 1024)  /* no text column of ours is larger */

/* --- connections ------------------------------------------------------- */

static void core_close(struct conn_core *k)
{
	for (size_t i = 0; i < STMT_SLOTS; i++)
		sqlite3_finalize(k->stmts[i].st.st);
	sqlite3_close_v2(k->db);
	memset(k, 0, sizeof *k);
}

/* Opens path into k: WAL, foreign keys, synchronous=FULL, our busy handler.
 * Each connection is used by one thread at a time (a thread's own, or the
 * writer by the turn's holder): SQLite's own mutexes are not needed. */
static enum cs_err core_open(const char *path, struct conn_core *k)
{
	memset(k, 0, sizeof *k);
	int rc = sqlite3_open_v2(path, &k->db,
	    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		log_msg(LOG_ERROR, "cannot open database %s: %s", path,
		    k->db != NULL ? sqlite3_errmsg(k->db) : sqlite3_errstr(rc));
		goto fail;
	}
	sqlite3_extended_result_codes(k->db, 1);
	if (sqlite3_busy_handler(k->db, busy_wait, NULL) != SQLITE_OK)
		goto fail;
	char *msg = NULL;
	if (sqlite3_exec(k->db, conn_pragmas, NULL, NULL, &msg) != SQLITE_OK) {
		log_msg(LOG_ERROR, "database %s: %s", path, msg ? msg : "pragma failed");
		sqlite3_free(msg);
		goto fail;
	}
	/* journal_mode answers with the mode it ended up in; insist on wal. */
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(k->db, "PRAGMA journal_mode = WAL", -1, &st, NULL) != SQLITE_OK)
		goto fail;
	int ok = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != NULL &&
	    strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
	sqlite3_finalize(st);
	if (!ok) {
		log_msg(LOG_ERROR, "database %s: cannot switch to WAL mode", path);
		goto fail;
	}
	return CS_OK;
fail:
	core_close(k);
	return CS_EDB;
}

static struct store_link *lite_link_open(struct store_db *dd)
{
	struct lite_db *d = db_of(dd);
	struct lite_link *k = calloc(1, sizeof *k);
	if (k == NULL)
		return NULL;
	k->d = d;
	k->cur = &k->own;
	if (core_open(d->path, &k->own) != CS_OK) {
		free(k);
		return NULL;
	}
	return (struct store_link *)k;
}

static void lite_link_close(struct store_link *kk)
{
	struct lite_link *k = link_of(kk);
	if (k == NULL)
		return;
	core_close(&k->own);
	free(k);
}

/* --- statements -------------------------------------------------------- */

static size_t stmt_slot(const char *sql)
{
	/* Fibonacci hashing of the address; the low bits are alignment. */
	uint64_t h = (uint64_t)(uintptr_t)sql * UINT64_C(0x9e3779b97f4a7c15);
	return (size_t)(h >> 32) & (STMT_SLOTS - 1);
}

static struct lite_stmt *core_stmt(struct conn_core *c, const char *sql)
{
	size_t i = stmt_slot(sql);
	for (; c->stmts[i].sql != NULL; i = (i + 1) & (STMT_SLOTS - 1))
		if (c->stmts[i].sql == sql)
			return &c->stmts[i].st;
	if (c->nstmts == STORE_MAX_STMTS) {
		log_msg(LOG_ERROR, "too many prepared statements (raise STORE_MAX_STMTS)");
		return NULL;
	}
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK) {
		log_msg(LOG_ERROR, "cannot prepare statement: %s", sqlite3_errmsg(c->db));
		return NULL;
	}
	c->stmts[i].sql = sql;
	c->stmts[i].st.h.be = &store_backend_sqlite;
	c->stmts[i].st.st = st;
	c->nstmts++;
	return &c->stmts[i].st;
}

/* In a transaction the statement is the writer's: every statement of a
 * transaction runs on the one writer connection, inside the caller's savepoint. */
static struct store_stmt *lite_stmt(struct store_link *k, const char *sql)
{
	struct lite_stmt *st = core_stmt(link_of(k)->cur, sql);
	return st != NULL ? &st->h : NULL;
}

/* Statements SQLite prepared again by itself, in this process: a schema
 * change, or a bound value its plan depends on (a parameter compared with the
 * column of a partial index's WHERE re-prepares at every new binding).  For
 * tests (store_writer_stats' reprepares): none of ours should. */
static atomic_uint_fast64_t reprepares;

/* Ready for the next use: reset and drop bound values (which may be secrets). */
static void stmt_clear(sqlite3_stmt *st)
{
	int n = sqlite3_stmt_status(st, SQLITE_STMTSTATUS_REPREPARE, 1);
	if (n > 0)
		atomic_fetch_add_explicit(&reprepares, (uint_fast64_t)n, memory_order_relaxed);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

static void lite_stmt_done(struct store_stmt *st)
{
	stmt_clear(raw_of(st));
}

static enum cs_err rc_err(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return CS_OK;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return CS_EBUSY;
	case SQLITE_NOMEM:
		return CS_ENOMEM;
	case SQLITE_CONSTRAINT:
		return (rc == SQLITE_CONSTRAINT_PRIMARYKEY || rc == SQLITE_CONSTRAINT_UNIQUE)
		    ? CS_EEXIST : CS_EINVAL;
	case SQLITE_TOOBIG:
		return CS_ETOOBIG;
	default:
		return CS_EDB;
	}
}

/* Runs a statement that returns no rows.  Clears it in every case. */
static enum cs_err lite_exec(struct store_stmt *sst)
{
	sqlite3_stmt *st = raw_of(sst);
	int rc = sqlite3_step(st);
	enum cs_err e = rc == SQLITE_DONE ? CS_OK : rc_err(rc);
	if (rc == SQLITE_ROW)
		e = CS_EDB;    /* a programming error: this statement returns rows */
	if (e != CS_OK && e != CS_EEXIST && e != CS_EBUSY)
		log_msg(LOG_ERROR, "database: %s", sqlite3_errmsg(sqlite3_db_handle(st)));
	stmt_clear(st);
	return e;
}

static enum cs_err lite_step(struct store_stmt *sst)
{
	sqlite3_stmt *st = raw_of(sst);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		return CS_OK;
	if (rc == SQLITE_DONE)
		return CS_ENOENT;
	enum cs_err e = rc_err(rc);
	log_msg(LOG_ERROR, "database: %s", sqlite3_errmsg(sqlite3_db_handle(st)));
	return e == CS_OK ? CS_EDB : e;
}

static int64_t lite_changes(struct store_link *k)
{
	return (int64_t)sqlite3_changes64(link_of(k)->cur->db);
}

static enum cs_err bind_text(sqlite3_stmt *st, int i, const char *v, sqlite3_destructor_type how)
{
	if (v == NULL)
		return sqlite3_bind_null(st, i) == SQLITE_OK ? CS_OK : CS_EDB;
	size_t n = strlen(v);
	if (n > STORE_MAX_STR)
		return CS_ETOOBIG;
	return sqlite3_bind_text(st, i, v, (int)n, how) == SQLITE_OK ? CS_OK : CS_EDB;
}

static enum cs_err bind_blob(sqlite3_stmt *st, int i, const void *v, size_t n,
    sqlite3_destructor_type how)
{
	if (n > INT_MAX)
		return CS_ETOOBIG;
	if (v == NULL || n == 0)
		return sqlite3_bind_zeroblob(st, i, 0) == SQLITE_OK ? CS_OK : CS_EDB;
	return sqlite3_bind_blob(st, i, v, (int)n, how) == SQLITE_OK ? CS_OK : CS_EDB;
}

static enum cs_err bind_int64(sqlite3_stmt *st, int i, int64_t v)
{
	return sqlite3_bind_int64(st, i, (sqlite3_int64)v) == SQLITE_OK ? CS_OK : CS_EDB;
}

/* Binds v[0..n) to st.  copy: SQLITE_TRANSIENT (SQLite copies each text and
 * blob); otherwise SQLITE_STATIC (no copy: only for a caller that steps and
 * clears the statement before it returns, while v's values are still alive;
 * no copy also means no unwiped copy of a secret in SQLite's heap). */
static enum cs_err lite_bind(struct store_stmt *sst, const struct store_val *v, size_t n,
    bool copy)
{
	sqlite3_destructor_type how = copy ? SQLITE_TRANSIENT : SQLITE_STATIC;
	sqlite3_stmt *st = raw_of(sst);
	enum cs_err e = CS_OK;
	if (n > INT_MAX)
		e = CS_EINVAL;
	for (size_t k = 0; k < n && e == CS_OK; k++) {
		int i = (int)k + 1;
		switch (v[k].kind) {
		case STORE_VAL_TEXT:
			e = bind_text(st, i, v[k].p, how);
			break;
		case STORE_VAL_INT:
			e = bind_int64(st, i, v[k].i);
			break;
		case STORE_VAL_BLOB:
			e = bind_blob(st, i, v[k].p, v[k].n, how);
			break;
		case STORE_VAL_BLOB_OR_NULL:
			e = v[k].p == NULL ? (sqlite3_bind_null(st, i) == SQLITE_OK ? CS_OK : CS_EDB)
			    : bind_blob(st, i, v[k].p, v[k].n, how);
			break;
		default:
			e = CS_EINVAL;    /* can't happen: the SV_ macros make every value */
			break;
		}
	}
	return e;
}

/* --- columns ----------------------------------------------------------- */

static enum store_col_kind lite_col_type(struct store_stmt *st, int i)
{
	switch (sqlite3_column_type(raw_of(st), i)) {
	case SQLITE_INTEGER:
		return STORE_COL_INTEGER;
	case SQLITE_FLOAT:
		return STORE_COL_FLOAT;
	case SQLITE_TEXT:
		return STORE_COL_TEXT;
	case SQLITE_BLOB:
		return STORE_COL_BLOB;
	default:
		return STORE_COL_NULL;
	}
}

static int64_t lite_col_int64(struct store_stmt *st, int i)
{
	return (int64_t)sqlite3_column_int64(raw_of(st), i);
}

static int lite_col_bytes(struct store_stmt *st, int i)
{
	return sqlite3_column_bytes(raw_of(st), i);
}

static const void *lite_col_raw_blob(struct store_stmt *st, int i)
{
	return sqlite3_column_blob(raw_of(st), i);
}

static const unsigned char *lite_col_raw_text(struct store_stmt *st, int i)
{
	return sqlite3_column_text(raw_of(st), i);
}

static int lite_col_count(struct store_stmt *st)
{
	return sqlite3_column_count(raw_of(st));
}

static const char *lite_col_name(struct store_stmt *st, int i)
{
	return sqlite3_column_name(raw_of(st), i);
}

/* Whether a NULL from sqlite3_column_text meant no memory converting the
 * value, rather than a NULL column. */
static bool lite_col_nomem(struct store_stmt *st)
{
	return sqlite3_errcode(sqlite3_db_handle(raw_of(st))) == SQLITE_NOMEM;
}

/* --- transactions: the group commit ------------------------------------
 *
 * Every transaction runs on the one writer connection, one caller at a time
 * (the "turn"), inside a savepoint of an outer transaction that may hold the
 * released savepoints of many callers (the "batch").  A caller that ends its
 * turn while others wait for one hands the turn on and sleeps; the last of a
 * run of callers (nobody waiting, or the batch full) commits the batch: one
 * COMMIT, one fsync (synchronous = FULL), for all of them.  Then each caller's
 * store_commit returns.
 *
 * The linger.  Under load the requests come in waves: a batch's callers answer
 * together, their clients send the next requests together, and the first of
 * them to reach the writer found nobody waiting and committed alone -- one
 * fsync for one transaction, a third of all fsyncs (issue 34: 1,831 of 5,062
 * COMMITs held one grant).  So a caller that would commit a batch while more
 * requests are under way than the batch and the queue account for (the HTTP
 * layer counts them, store_requests) leaves the batch open and the turn free,
 * for at most as long as a COMMIT takes (a moving average, capped at
 * STORE_LINGER_MAX_US): waiting longer than an fsync would cost more than a
 * commit of its own.  A later caller adds its savepoint and decides again:
 * once every request under way is in the batch or queued, the batch commits
 * at once.  When the time is up, the next turn's end commits, or, if the turn
 * is free, the batch's caller that keeps its time takes it and commits.
 * Nothing is acknowledged earlier than before: each caller still waits for
 * the COMMIT holding its writes.  Bigger batches write fewer pages a
 * transaction (the tables' and indexes' last pages are shared), and pages,
 * not fsyncs, are what a grant's durable write costs (docs/BENCHMARKS.md).
 *
 * SECURITY: lite_commit returns CS_OK only after the COMMIT that holds the
 * caller's writes returned, so nothing is acknowledged before it is durable.
 * A caller that read a batch-mate's uncommitted row commits in the same batch
 * or a later one, so no answer depends on a write that could still be lost.
 * A failing caller rolls back to its own savepoint and takes nobody with it;
 * a failure that ends the outer transaction (SQLite does so itself after an
 * I/O error, a full disk or no memory) or a failed COMMIT fails exactly the
 * callers of that batch. */

#define STORE_BATCH_MAX 64           /* transactions one COMMIT makes durable, at most */
#define STORE_LINGER_MAX_US 1000     /* a batch waits this long at most for requests under way */
#define STORE_CHECKPOINT_PAGES 1000  /* WAL pages that wake the checkpointer (SQLite's default) */
#define STORE_WAL_RESTART_PAGES 4000 /* a WAL this long is begun again (wal_restart) */
#define STORE_WAL_RESTART_WAIT_MS 50 /* how long a restart waits for readers, at most */

static enum cs_err core_run(struct conn_core *k, const char *sql)
{
	struct lite_stmt *st = core_stmt(k, sql);
	if (st == NULL)
		return CS_EDB;
	int rc = sqlite3_step(st->st);
	enum cs_err e = rc == SQLITE_DONE ? CS_OK : rc_err(rc);
	if (e == CS_OK && rc != SQLITE_DONE)
		e = CS_EDB;
	if (e != CS_OK && e != CS_EBUSY)
		log_msg(LOG_ERROR, "database: %s", sqlite3_errmsg(k->db));
	stmt_clear(st->st);
	return e;
}

/* Wakes the callers of a batch with its outcome.  mu held. */
static void batch_finish_locked(struct writer *w, struct commit_wait *list, enum cs_err e)
{
	for (struct commit_wait *x = list; x != NULL; x = x->next) {
		x->e = e;
		x->done = true;
	}
	pthread_cond_broadcast(&w->done_cv);
}

/* Commits the open batch.  mu held and the turn ours; mu is let go during the
 * COMMIT (the turn keeps the writer ours) and held again on return. */
static void batch_commit_locked(struct lite_db *d)
{
	struct writer *w = &d->w;
	struct commit_wait *list = w->waits;
	unsigned n = w->pending;
	struct store_audit_mark mark = w->audit;
	struct timespec t0;

	w->waits = NULL;
	w->pending = 0;
	w->audit.set = false;
	w->lingering = false;
	w->linger_over = false;
	pthread_mutex_unlock(&w->mu);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	enum cs_err e = core_run(&w->core, SQL_COMMIT);
	if (e != CS_OK && !sqlite3_get_autocommit(w->core.db))
		(void)core_run(&w->core, SQL_ROLLBACK);
	w->open = false;
	if (e != CS_OK)
		w->head_known = false;        /* every entry of the batch is gone */
	/* SECURITY: the hook publishes the batch's last audit entry before any
	 * caller of the batch answers; batches commit one at a time, so the
	 * published heads follow commit order and only grow. */
	if (e == CS_OK && mark.set)
		d->pub.publish(d->pub.arg, mark.seq, mark.link, false);
	int64_t took = (int64_t)(store_count_commit(&t0, e, n) * 1e6);    /* µs */
	OPENSSL_cleanse(mark.link, sizeof mark.link);

	pthread_mutex_lock(&w->mu);
	if (e == CS_OK) {
		w->batches++;
		w->transactions += n;
		/* The linger's measure: an eighth of each new COMMIT's time. */
		if (took > 0 && took < 1000000)
			w->commit_us = (unsigned)(((int64_t)w->commit_us * 7 + took) / 8);
	}
	/* A checkpoint for each STORE_CHECKPOINT_PAGES written, not for each
	 * COMMIT once the WAL is that long: each copies what was added since the
	 * last and fsyncs the database file (and a WAL that is never begun again,
	 * or is only at 4,000 pages, is that long after nearly every COMMIT). */
	if (w->wal_pages < w->ckpt_from)
		w->ckpt_from = 0;                         /* begun again */
	if (w->wal_pages - w->ckpt_from >= STORE_CHECKPOINT_PAGES && w->ckpt_started) {
		w->ckpt_from = w->wal_pages;
		w->ckpt_wanted = true;
		pthread_cond_signal(&w->ckpt_cv);
	}
	batch_finish_locked(w, list, e);
}

static bool time_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Whether the open batch should wait for the requests under way rather than
 * commit now: some are neither in it nor queued for a turn, and its linger
 * (started now if it had none) has time left.  mu held. */
static bool linger_locked(struct lite_db *d, const struct commit_wait *self)
{
	struct writer *w = &d->w;
	struct timespec now;
	unsigned us = w->linger_fixed_us != 0 ? w->linger_fixed_us :
	    w->commit_us < STORE_LINGER_MAX_US ? w->commit_us : STORE_LINGER_MAX_US;
	if (us == 0 || w->stopping || w->pending >= STORE_BATCH_MAX)
		return false;
	/* A transaction outside any request (the janitor, the start) counts
	 * nobody; each request under way is in the batch, queued, or coming. */
	if (atomic_load_explicit(&d->requests, memory_order_relaxed) <=
	    w->pending + w->waiting + w->queued)
		return false;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (!w->lingering) {
		/* One caller of the batch keeps the time (the others sleep until it
		 * commits): the newest, usually the one deciding now. */
		w->lingering = true;
		w->linger_timer = w->waits;
		w->lingers++;
		metrics_add(metric[M_DB_LINGERS], NULL, 1);
		if (w->linger_timer != self)       /* it sleeps untimed: wake it to keep time */
			pthread_cond_broadcast(&w->done_cv);
		long ns = now.tv_nsec + (long)(us % 1000000u) * 1000;
		w->commit_by.tv_sec = now.tv_sec + (time_t)(us / 1000000u) + ns / 1000000000L;
		w->commit_by.tv_nsec = ns % 1000000000L;
		return true;
	}
	return !w->linger_over && time_before(&now, &w->commit_by);
}

/* When SQLite ended the outer transaction itself, the batch is gone: its
 * callers fail.  mu held, the turn ours. */
static void turn_lost_batch_locked(struct writer *w)
{
	if (w->open && sqlite3_get_autocommit(w->core.db)) {
		log_msg(LOG_ERROR, "database: a transaction batch was rolled back by the database");
		w->head_known = false;
		struct commit_wait *list = w->waits;
		w->waits = NULL;
		w->pending = 0;
		w->audit.set = false;
		w->open = false;
		w->lingering = false;
		w->linger_over = false;
		batch_finish_locked(w, list, CS_EDB);
	}
}

/* An open batch with nothing in it: let the write lock go.  mu held, the
 * turn ours. */
static void batch_drop_locked(struct writer *w)
{
	(void)core_run(&w->core, SQL_ROLLBACK);
	w->open = false;
	w->lingering = false;
	w->linger_over = false;
}

/* Gives the turn up to the next caller.  mu held, the turn ours. */
static void turn_release_locked(struct writer *w)
{
	w->busy = false;
	pthread_cond_signal(&w->turn_cv);
	if (w->jobs != NULL)                       /* a queued job's caller takes the turn */
		pthread_cond_broadcast(&w->done_cv);
	if (w->stopping)
		pthread_cond_broadcast(&w->done_cv);    /* store_stop watches the queue drain */
}

/* Ends the open batch now, whoever waits: commits it, or lets the lock go
 * when nothing is in it.  mu held, the turn ours (wal_restart). */
static void turn_close_batch_locked(struct lite_db *d)
{
	struct writer *w = &d->w;
	turn_lost_batch_locked(w);
	if (w->open && w->pending > 0)
		batch_commit_locked(d);
	else if (w->open)
		batch_drop_locked(w);
}

/* Ends the caller's turn: commits the batch when nobody waits to add to it
 * (or it is full) and it need not linger, hands the turn on otherwise.  mu
 * held, the turn ours. */
static void turn_end_locked(struct lite_db *d, const struct commit_wait *self)
{
	struct writer *w = &d->w;
	turn_lost_batch_locked(w);
	if (w->open && w->pending == 0 && w->waiting == 0 && w->jobs == NULL)
		batch_drop_locked(w);
	else if (w->open && w->pending > 0 &&
	    ((w->waiting == 0 && w->jobs == NULL) || w->pending >= STORE_BATCH_MAX) &&
	    !linger_locked(d, self))
		batch_commit_locked(d);
	turn_release_locked(w);
}

/* Takes the writer's turn.  CS_EBUSY at once when the store is stopping or
 * queue_max callers wait already (counted as a transaction refused, unless
 * the checkpointer asked: !refusal_counted), and after STORE_BUSY_TIMEOUT_MS
 * without it. */
static enum cs_err turn_take(struct writer *w, bool refusal_counted)
{
	enum cs_err e = CS_OK;
	struct timespec until;

	pthread_mutex_lock(&w->mu);
	if (w->stopping) {
		e = CS_EBUSY;
		goto out;
	}
	if (w->busy) {
		if (w->waiting + w->queued >= w->queue_max) {
			if (refusal_counted)
				metrics_add(metric[M_DB_QUEUE_FULL], NULL, 1);
			e = CS_EBUSY;
			goto out;
		}
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += STORE_BUSY_TIMEOUT_MS / 1000;
		w->waiting++;
		if (w->jobs_lingering)
			pthread_cond_signal(&w->jobs_cv);
		while (w->busy && e == CS_OK)
			if (pthread_cond_timedwait(&w->turn_cv, &w->mu, &until) == ETIMEDOUT && w->busy)
				e = CS_EBUSY;
		w->waiting--;
		if (e != CS_OK)
			goto out;
	}
	w->busy = true;
out:
	pthread_mutex_unlock(&w->mu);
	return e;
}

/* --- the audit chain's head ----------------------------------------------
 * A transaction's first audit entry follows the head of the process's chain
 * and takes the number after the highest ever given (sqlite_sequence).
 * Reading both (SQL_AUDIT_HEAD, a join of three tables) cost 3.8 % of an
 * MCP call's CPU, and the writer knows the answer already: it ran the
 * transaction that appended last.  So it keeps that head for the next
 * transaction, in the same batch or a later one (store_audit_chain_head),
 * under these rules:
 *  - A transaction sets it only once its savepoint is released (lite_commit),
 *    to its last entry and that entry's chain (a transaction of another
 *    chain, after a claim, does not use it).  A savepoint rolled back would
 *    leave it right (what the database holds again), but a caller that
 *    rolls back may have failed on the head itself: lite_rollback forgets
 *    it, so that a head ever wrong cannot fail every transaction after.
 *    A transaction that rewrote links (store_audit_head_forget: a prune, a
 *    rekey) forgets it at its release, as a migration's does; until then
 *    the dispatcher does not ask for it (its head is read from the table).
 *  - A batch whose COMMIT failed, or that SQLite rolled back itself, took
 *    every entry of the batch with it: the head is forgotten.
 *  - Another connection may commit between two batches: another process on
 *    the file (`consentd audit`, `consentd admin`, any tool), or a statement
 *    run outside a transaction on a thread's own connection.  It may have
 *    appended to the chain (chain 0 is every SQLite process's), taken numbers
 *    (they are global across chains) or rewritten links.  Nobody commits
 *    inside a batch (its BEGIN IMMEDIATE holds the write lock until its
 *    COMMIT), and PRAGMA data_version, read once a batch just after its
 *    BEGIN, changes when another connection committed since the last read:
 *    then the head is forgotten.
 * SECURITY: a head remembered wrongly would fork the chain (two entries after
 * one) or reuse a number; every doubt forgets it, and a forgotten head is
 * read from the table, as PostgreSQL's dispatcher does after a COMMIT whose
 * outcome is unknown (store.c, settle). */

/* A batch began and holds the write lock: the head goes when another
 * connection committed since the last batch began (or that is not known). */
static void head_check_others(struct writer *w)
{
	struct lite_stmt *st = core_stmt(&w->core, SQL_DATA_VERSION);
	bool ok = st != NULL && sqlite3_step(st->st) == SQLITE_ROW;
	int64_t v = ok ? (int64_t)sqlite3_column_int64(st->st, 0) : 0;
	if (st != NULL)
		stmt_clear(st->st);
	if (ok && w->version_known && v == w->data_version)
		return;
	if (ok && w->version_known) {
		pthread_mutex_lock(&w->mu);
		w->foreign_commits++;
		pthread_mutex_unlock(&w->mu);
	}
	w->head_known = false;
	w->version_known = ok;
	w->data_version = v;
}

/* A caller's savepoint was released: its last entry is the head, unless it
 * rewrote links (mark NULL: a migration, which may have). */
static void head_released(struct writer *w, const struct store_audit_mark *mark)
{
	if (mark == NULL || mark->rewritten) {
		w->head_known = false;
	} else if (mark->set) {
		w->head = *mark;
		w->head_known = true;
	}
}

static bool lite_audit_head(struct store_link *kk, int64_t chain, int64_t *seq,
    unsigned char link[STORE_AUDIT_LINK_LEN])
{
	struct lite_link *k = link_of(kk);
	struct writer *w = &k->d->w;
	/* Defensive: only for the turn's holder, inside the open batch (SQLite
	 * ends the outer transaction itself after an I/O error or a full disk:
	 * the head went with it), and for the chain it is the head of. */
	if (k->cur != &w->core || !w->open || sqlite3_get_autocommit(w->core.db)) {
		if (k->cur == &w->core)
			w->head_known = false;
		return false;
	}
	if (!w->head_known || w->head.chain != chain)
		return false;
	*seq = w->head.seq;
	memcpy(link, w->head.link, STORE_AUDIT_LINK_LEN);
	return true;
}

static enum cs_err lite_begin(struct store_link *kk)
{
	struct lite_link *k = link_of(kk);
	struct writer *w = &k->d->w;
	enum cs_err e;
	if ((e = turn_take(w, true)) != CS_OK)
		return e;
	if (!w->open) {
		if ((e = core_run(&w->core, SQL_BEGIN)) != CS_OK)
			goto fail;
		w->open = true;
		head_check_others(w);
	}
	if ((e = core_run(&w->core, SQL_SAVEPOINT)) != CS_OK)
		goto fail;
	k->cur = &w->core;
	return CS_OK;
fail:
	pthread_mutex_lock(&w->mu);
	turn_end_locked(k->d, NULL);
	pthread_mutex_unlock(&w->mu);
	return e;
}

/* Waits until the batch holding me has ended (me->done).  A caller of the
 * batch may be made its linger's timekeeper (linger_locked: the newest of its
 * callers, a queued job's too): it keeps the time, and when it is up the next
 * turn's end commits (or hands the turn to one whose end will); if nobody
 * holds the turn, that end is its own.  mu held. */
static void batch_wait_locked(struct lite_db *d, struct commit_wait *me)
{
	struct writer *w = &d->w;
	while (!me->done) {
		if (!w->lingering || w->linger_timer != me || w->linger_over) {
			pthread_cond_wait(&w->done_cv, &w->mu);
			continue;
		}
		if (pthread_cond_timedwait(&w->done_cv, &w->mu, &w->commit_by) != ETIMEDOUT ||
		    me->done || !w->lingering || w->linger_timer != me)
			continue;
		w->linger_over = true;
		if (!w->busy) {
			w->busy = true;
			turn_end_locked(d, me);
		}
	}
}

static enum cs_err lite_commit(struct store_link *kk, const struct store_audit_mark *mark)
{
	struct lite_link *k = link_of(kk);
	struct writer *w = &k->d->w;
	struct commit_wait me = { .next = NULL, .done = false, .e = CS_EDB };
	enum cs_err e = core_run(&w->core, SQL_RELEASE);
	if (e != CS_OK && !sqlite3_get_autocommit(w->core.db)) {
		(void)core_run(&w->core, SQL_ROLLBACK_TO);
		(void)core_run(&w->core, SQL_RELEASE);
	}
	if (e == CS_OK)
		head_released(w, mark);
	k->cur = &k->own;

	pthread_mutex_lock(&w->mu);
	if (e == CS_OK) {
		me.next = w->waits;
		w->waits = &me;
		w->pending++;
		if (mark != NULL && mark->set)
			w->audit = *mark;
	}
	turn_end_locked(k->d, e == CS_OK ? &me : NULL);
	if (e == CS_OK)
		batch_wait_locked(k->d, &me);
	if (e == CS_OK)
		e = me.e;
	pthread_mutex_unlock(&w->mu);
	return e;
}

/* --- transactions the turn's holder runs ---------------------------------
 * store_transact hands the writer a whole transaction (a body and its
 * argument) instead of taking the turn itself: the caller queues it and
 * sleeps; whoever holds the turn next -- the first queued caller to find it
 * free -- runs every queued job, each in its own savepoint of the open batch
 * exactly as lite_begin/lite_commit would, until the queue is empty, and
 * then commits the batch (or hands the turn to a store_begin caller waiting
 * for it, whose turn end commits).  Every caller of the batch still hears
 * its outcome only after the COMMIT that holds its writes (SECURITY: nothing
 * is answered before it is durable, as before), but the turn no longer goes
 * from thread to thread between transactions (issue #34: a grant's CPU
 * −6 to −9 % in make bench-ab, docs/BENCHMARKS.md).
 *  - A job's body runs on the holder's thread with its caller's link, whose
 *    thread sleeps meanwhile (store.h says what a body may touch).
 *  - A body that fails, or does not keep its writes, is rolled back to its
 *    savepoint alone; the others of the batch are not touched.
 *  - A job not yet taken when STORE_BUSY_TIMEOUT_MS passes leaves the queue
 *    with CS_EBUSY, as a store_begin without a turn does; the queue counts
 *    against [database] write_queue with the callers waiting for a turn.
 *  - The holder lingers as a turn's end does (linger_locked): when the
 *    queue is empty, nobody waits for a turn, and more requests are under
 *    way than the batch and the queues hold, it waits for them at most as
 *    long as a COMMIT takes (jobs_linger_locked), and the job or the turn's
 *    waiter that makes the batch whole wakes it (one wake-up a batch, not
 *    one a job).  Measured: −5 to −11 % CPU a grant, 11.7–12.7 → 7.5–8.9 KB
 *    written a grant (bigger batches). */

/* Runs one job in a savepoint of the open batch.  mu not held, the turn ours.
 * Returns whether its writes stay in the batch. */
static bool job_run(struct writer *w, struct lite_job *x, enum cs_err begun)
{
	enum cs_err e = begun;
	bool keep = false;
	if (e == CS_OK)
		e = core_run(&w->core, SQL_SAVEPOINT);
	if (e == CS_OK) {
		x->k->cur = &w->core;
		e = x->j->step(x->j, &keep);
		x->k->cur = &x->k->own;
		if (e == CS_OK && keep)
			e = core_run(&w->core, SQL_RELEASE);
		if (e != CS_OK || !keep) {
			if (!sqlite3_get_autocommit(w->core.db)) {
				(void)core_run(&w->core, SQL_ROLLBACK_TO);
				(void)core_run(&w->core, SQL_RELEASE);
			}
			/* As lite_rollback: a body that failed may have failed on the
			 * head; every doubt forgets it. */
			w->head_known = false;
		} else {
			head_released(w, &x->j->mark);
		}
	}
	x->j->kept = e == CS_OK && keep;
	x->cw.e = e;
	if (!x->j->kept && x->j->undo != NULL)
		x->j->undo(x->j);                 /* before the next job runs */
	return x->j->kept;
}

/* Whether more requests are under way than the batch and the queues hold. */
static bool batch_incomplete_locked(struct lite_db *d)
{
	struct writer *w = &d->w;
	return atomic_load_explicit(&d->requests, memory_order_relaxed) >
	    w->pending + w->waiting + w->queued;
}

/* The jobs' holder's linger: its batch is not full and requests are under
 * way that are neither in it nor queued; it waits for them, at most as long
 * as a COMMIT takes, and is woken once they are all queued.  Returns whether
 * jobs came.  mu held, the turn ours. */
static bool jobs_linger_locked(struct lite_db *d)
{
	struct writer *w = &d->w;
	struct timespec until;
	unsigned us = w->linger_fixed_us != 0 ? w->linger_fixed_us :
	    w->commit_us < STORE_LINGER_MAX_US ? w->commit_us : STORE_LINGER_MAX_US;
	if (us == 0 || w->stopping || w->pending >= STORE_BATCH_MAX || !batch_incomplete_locked(d))
		return false;
	clock_gettime(CLOCK_MONOTONIC, &until);
	long ns = until.tv_nsec + (long)(us % 1000000u) * 1000;
	until.tv_sec += (time_t)(us / 1000000u) + ns / 1000000000L;
	until.tv_nsec = ns % 1000000000L;
	w->lingers++;
	metrics_add(metric[M_DB_LINGERS], NULL, 1);
	w->jobs_lingering = true;
	while (w->waiting == 0 && !w->stopping && batch_incomplete_locked(d))
		if (pthread_cond_timedwait(&w->jobs_cv, &w->mu, &until) == ETIMEDOUT)
			break;
	w->jobs_lingering = false;
	return w->jobs != NULL;
}

/* Runs every queued job, then ends the batch as a turn's end would.  mu
 * held and the turn ours; mu is let go while the jobs run. */
static void jobs_run_locked(struct lite_db *d, const struct commit_wait *self)
{
	struct writer *w = &d->w;
	bool lingered = false, first = true;
again:
	/* The holder runs the queue until its own batch has committed, and lets
	 * the turn go to a store_begin caller waiting for it (the checkpointer's
	 * WAL restart too) after its first round: new jobs keep coming under
	 * load, and nobody else may wait without end. */
	while (w->jobs != NULL && (first || (w->waiting == 0 && !self->done))) {
		first = false;
		struct lite_job *list = w->jobs;
		w->jobs = NULL;
		w->jobs_tail = &w->jobs;
		for (struct lite_job *x = list; x != NULL; x = x->next)
			x->ran = true;
		w->queued = 0;
		pthread_mutex_unlock(&w->mu);

		enum cs_err begun = CS_OK;
		if (!w->open && (begun = core_run(&w->core, SQL_BEGIN)) == CS_OK) {
			w->open = true;
			head_check_others(w);
		}
		struct commit_wait *kept = NULL;
		unsigned n = 0;
		bool refused = false;
		struct store_audit_mark last = { .set = false };
		for (struct lite_job *x = list, *nx; x != NULL; x = nx) {
			nx = x->next;
			/* SQLite ended the batch itself (an I/O error, a full disk):
			 * a SAVEPOINT now would begin a transaction of its own, whose
			 * RELEASE commits it.  The rest fail; the batch's callers fail
			 * below (turn_lost_batch_locked). */
			if (begun == CS_OK && w->open && sqlite3_get_autocommit(w->core.db))
				begun = CS_EDB;
			if (job_run(w, x, begun)) {
				x->cw.next = kept;
				kept = &x->cw;
				n++;
				if (x->j->mark.set)
					last = x->j->mark;
			} else {
				refused = true;
			}
		}

		pthread_mutex_lock(&w->mu);
		for (struct lite_job *x = list; x != NULL; x = x->next)
			if (!x->j->kept)
				x->cw.done = true;        /* rolled back: its outcome is known now */
		while (kept != NULL) {
			struct commit_wait *nk = kept->next;
			kept->next = w->waits;
			w->waits = kept;
			kept = nk;
		}
		w->pending += n;
		if (last.set)
			w->audit = last;          /* commit order: the batch's last entry */
		if (refused)
			pthread_cond_broadcast(&w->done_cv);
		turn_lost_batch_locked(w);
		if (w->open && w->pending >= STORE_BATCH_MAX)
			batch_commit_locked(d);
	}
	if (!lingered && w->open && w->pending > 0 && w->waiting == 0 && jobs_linger_locked(d)) {
		lingered = true;
		goto again;
	}
	if (w->open && w->pending > 0 && w->waiting == 0)
		batch_commit_locked(d);
	else if (w->open && w->pending == 0 && w->waiting == 0)
		batch_drop_locked(w);
}

/* Takes a queued job out (it timed out before anyone ran it).  mu held. */
static void job_unqueue_locked(struct writer *w, struct lite_job *me)
{
	struct lite_job **p = &w->jobs;
	while (*p != NULL && *p != me)
		p = &(*p)->next;
	if (*p == NULL)
		return;
	*p = me->next;
	if (w->jobs_tail == &me->next)
		w->jobs_tail = p;
	w->queued--;
}

static enum cs_err lite_transact(struct store_link *kk, struct store_tx_job *j)
{
	struct lite_link *k = link_of(kk);
	struct writer *w = &k->d->w;
	struct lite_job me = { .cw = { .next = NULL, .done = false, .e = CS_EDB }, .k = k, .j = j };
	struct timespec until;
	enum cs_err e;

	j->kept = false;
	pthread_mutex_lock(&w->mu);
	if (w->stopping || (w->busy && w->waiting + w->queued >= w->queue_max)) {
		if (!w->stopping)
			metrics_add(metric[M_DB_QUEUE_FULL], NULL, 1);
		pthread_mutex_unlock(&w->mu);
		return CS_EBUSY;
	}
	*w->jobs_tail = &me;
	w->jobs_tail = &me.next;
	w->queued++;
	if (w->jobs_lingering && !batch_incomplete_locked(k->d))
		pthread_cond_signal(&w->jobs_cv);
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += STORE_BUSY_TIMEOUT_MS / 1000;
	while (!me.cw.done) {
		if (me.ran) {
			/* In a batch: wait for its end, keeping its linger's time
			 * when made its keeper. */
			batch_wait_locked(k->d, &me.cw);
			break;
		}
		if (!w->busy) {
			w->busy = true;
			jobs_run_locked(k->d, &me.cw);
			turn_release_locked(w);
			continue;
		}
		/* Past the deadline only while someone holds the turn: with the
		 * turn free the loop takes it (a batch whose last turn ended
		 * handing over to the queue must be ended by someone). */
		if (pthread_cond_timedwait(&w->done_cv, &w->mu, &until) == ETIMEDOUT &&
		    !me.ran && w->busy) {
			job_unqueue_locked(w, &me);
			if (w->stopping)
				pthread_cond_broadcast(&w->done_cv);
			pthread_mutex_unlock(&w->mu);
			return CS_EBUSY;
		}
	}
	e = me.cw.e;
	if (e != CS_OK)
		j->kept = false;
	pthread_mutex_unlock(&w->mu);
	return e;
}

static void lite_rollback(struct store_link *kk, bool in_tx)
{
	struct lite_link *k = link_of(kk);
	if (!in_tx) {
		/* Outside a transaction nothing should be open on the thread's own
		 * connection; if something is, it goes. */
		if (k->own.db != NULL && !sqlite3_get_autocommit(k->own.db))
			(void)core_run(&k->own, SQL_ROLLBACK);
		return;
	}
	struct writer *w = &k->d->w;
	if (!sqlite3_get_autocommit(w->core.db)) {
		(void)core_run(&w->core, SQL_ROLLBACK_TO);
		(void)core_run(&w->core, SQL_RELEASE);
	}
	/* The head stood before the savepoint, and still does; but a caller
	 * that rolls back may have failed on it (a number already taken, were
	 * it ever wrong): every doubt forgets it, and it is read again. */
	w->head_known = false;
	k->cur = &k->own;
	pthread_mutex_lock(&w->mu);
	turn_end_locked(k->d, NULL);
	pthread_mutex_unlock(&w->mu);
}

static void lite_set_write_queue(struct store_db *dd, unsigned max)
{
	struct lite_db *d = db_of(dd);
	pthread_mutex_lock(&d->w.mu);
	d->w.queue_max = max;
	pthread_mutex_unlock(&d->w.mu);
}

static void lite_writer_stats(struct store_db *dd, struct store_writer_stats *out)
{
	struct lite_db *d = db_of(dd);
	pthread_mutex_lock(&d->w.mu);
	out->stopping = d->w.stopping;
	out->checkpoints = d->w.checkpoints;
	out->waiting = d->w.waiting;
	out->queued = d->w.queued;
	out->batches = d->w.batches;
	out->transactions = d->w.transactions;
	out->lingers = d->w.lingers;
	out->wal_restarts = d->w.wal_restarts;
	out->wal_restarts_busy = d->w.wal_restarts_busy;
	out->reprepares = atomic_load_explicit(&reprepares, memory_order_relaxed);
	out->foreign_commits = d->w.foreign_commits;
	out->requests = atomic_load(&d->requests);
	pthread_mutex_unlock(&d->w.mu);
}

static void lite_set_linger(struct store_db *dd, unsigned fixed_us)
{
	struct lite_db *d = db_of(dd);
	pthread_mutex_lock(&d->w.mu);
	d->w.linger_fixed_us = fixed_us;
	pthread_mutex_unlock(&d->w.mu);
}

static void lite_requests(struct store_db *dd, int delta)
{
	struct lite_db *d = db_of(dd);
	if (delta > 0)
		atomic_fetch_add_explicit(&d->requests, (unsigned)delta, memory_order_relaxed);
	else
		atomic_fetch_sub_explicit(&d->requests, (unsigned)-delta, memory_order_relaxed);
}

static void lite_stop(struct store_db *dd)
{
	struct lite_db *d = db_of(dd);
	if (d == NULL || !d->w_ok)
		return;
	struct writer *w = &d->w;
	pthread_mutex_lock(&w->mu);
	w->stopping = true;
	pthread_cond_signal(&w->jobs_cv);         /* a jobs' linger ends */
	/* The queue drains: every caller that holds or waits for a turn ends it,
	 * and the last one commits what is pending. */
	while (w->busy || w->waiting > 0 || w->pending > 0 || w->jobs != NULL)
		pthread_cond_wait(&w->done_cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
}

static enum cs_err lite_ping(struct store_link *k)
{
	struct lite_stmt *st = core_stmt(link_of(k)->cur, SQL_PING);
	if (st == NULL)
		return CS_EDB;
	int rc = sqlite3_step(st->st);
	enum cs_err e = rc == SQLITE_ROW && sqlite3_column_int(st->st, 0) == 1 ? CS_OK : CS_EDB;
	stmt_clear(st->st);
	return e;
}

/* --- backup ------------------------------------------------------------ */

#define BACKUP_PAGES 64          /* pages per step */
#define BACKUP_SLEEP_NS (2 * 1000 * 1000)
#define BACKUP_STEPS_MAX 20000   /* then the rest in one step (a copy that restarts) */

/* The destination's integrity_check answers exactly one row "ok". */
static enum cs_err backup_check(sqlite3 *db, const char *path)
{
	sqlite3_stmt *st = NULL;
	enum cs_err e = CS_EDB;
	if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) != SQLITE_OK)
		goto out;
	int rc = sqlite3_step(st);
	const unsigned char *t = rc == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
	if (t == NULL || strcmp((const char *)t, "ok") != 0) {
		log_msg(LOG_ERROR, "backup %s: integrity_check: %s", path,
		    t != NULL ? (const char *)t : sqlite3_errmsg(db));
		goto out;
	}
	if (sqlite3_step(st) != SQLITE_DONE)
		goto out;
	e = CS_OK;
out:
	sqlite3_finalize(st);
	return e;
}

static enum cs_err lite_backup(struct store_link *kk, const char *dest_path)
{
	struct lite_link *k = link_of(kk);
	sqlite3 *dst = NULL;
	sqlite3_backup *b = NULL;
	enum cs_err e = CS_EDB;
	int rc;

	if (k->own.db == NULL || dest_path == NULL)
		return CS_EINVAL;
	rc = sqlite3_open_v2(dest_path, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		log_msg(LOG_ERROR, "backup %s: %s", dest_path,
		    dst != NULL ? sqlite3_errmsg(dst) : sqlite3_errstr(rc));
		goto out;
	}
	if ((b = sqlite3_backup_init(dst, "main", k->own.db, "main")) == NULL) {
		log_msg(LOG_ERROR, "backup %s: %s", dest_path, sqlite3_errmsg(dst));
		goto out;
	}
	for (int steps = 0;; steps++) {
		rc = sqlite3_backup_step(b, steps < BACKUP_STEPS_MAX ? BACKUP_PAGES : -1);
		if (rc == SQLITE_DONE)
			break;
		if (rc != SQLITE_OK && rc != SQLITE_BUSY && rc != SQLITE_LOCKED) {
			log_msg(LOG_ERROR, "backup %s: %s", dest_path, sqlite3_errstr(rc));
			goto out;
		}
		struct timespec ts = { 0, BACKUP_SLEEP_NS };
		nanosleep(&ts, NULL);
	}
	rc = sqlite3_backup_finish(b);
	b = NULL;
	if (rc != SQLITE_OK) {
		log_msg(LOG_ERROR, "backup %s: %s", dest_path, sqlite3_errstr(rc));
		goto out;
	}
	e = backup_check(dst, dest_path);
out:
	if (b != NULL)
		sqlite3_backup_finish(b);
	if (dst != NULL && sqlite3_close(dst) != SQLITE_OK && e == CS_OK) {
		log_msg(LOG_ERROR, "backup %s: cannot close the copy", dest_path);
		e = CS_EDB;
	}
	return e;
}

/* --- migrations -------------------------------------------------------- */

static enum cs_err lite_schema_version(struct store_link *kk, int *out)
{
	struct lite_stmt *st = core_stmt(link_of(kk)->cur, SQL_SCHEMA_MAX);
	if (st == NULL)
		return CS_EDB;
	enum cs_err e = CS_EDB;
	int rc = sqlite3_step(st->st);
	if (rc == SQLITE_ROW) {
		sqlite3_int64 v = sqlite3_column_int64(st->st, 0);
		if (v >= 0 && v <= INT_MAX) {
			*out = (int)v;
			e = CS_OK;
		}
	} else {
		e = rc_err(rc) == CS_OK ? CS_EDB : rc_err(rc);
	}
	stmt_clear(st->st);
	return e;
}

/* sql with v bound (no copy), stepped once: CS_OK with a row (then finished),
 * CS_ENOENT without, an error otherwise.  For the migrations' own statements. */
static enum cs_err core_query(struct lite_link *k, const char *sql, const struct store_val *v,
    size_t n, bool rows)
{
	struct lite_stmt *st = core_stmt(k->cur, sql);
	if (st == NULL)
		return CS_EDB;
	enum cs_err e = lite_bind(&st->h, v, n, false);
	if (e == CS_OK)
		e = rows ? lite_step(&st->h) : lite_exec(&st->h);
	stmt_clear(st->st);
	return e;
}

/* Applies one migration unless another process did already: the check, the
 * script and the schema_version row share one IMMEDIATE transaction. */
static enum cs_err migration_apply(struct lite_link *k, int version, const struct embedded_file *f)
{
	enum cs_err e;
	char *msg = NULL;
	bool in_tx = false;

	if ((e = lite_begin((struct store_link *)k)) != CS_OK)
		goto out;
	in_tx = true;
	e = core_query(k, SQL_SCHEMA_HAS, STORE_VALS(SV_INT(version)), true);
	if (e == CS_OK) {                 /* already there */
		in_tx = false;
		e = lite_commit((struct store_link *)k, NULL);
		goto out;
	}
	if (e != CS_ENOENT)
		goto out;
	if (sqlite3_exec(k->cur->db, f->data, NULL, NULL, &msg) != SQLITE_OK) {
		log_msg(LOG_ERROR, "migration %s failed: %s", f->name, msg ? msg : "?");
		e = CS_EDB;
		goto out;
	}
	if ((e = core_query(k, SQL_SCHEMA_INSERT, STORE_VALS(SV_INT(version),
	    SV_INT((int64_t)time(NULL))), false)) != CS_OK)
		goto out;
	in_tx = false;
	e = lite_commit((struct store_link *)k, NULL);
out:
	sqlite3_free(msg);
	if (e != CS_OK)
		lite_rollback((struct store_link *)k, in_tx);
	return e;
}

/* SQLite always migrates, whatever the policy: one process owns the file. */
static enum cs_err lite_schema_open(struct store_link *kk, enum store_schema_policy pol)
{
	struct lite_link *k = link_of(kk);
	enum cs_err e;
	char *msg = NULL;
	int have = 0, known = store_migrations_known(embedded_migrations), prev = 0;

	(void)pol;
	if (sqlite3_exec(k->own.db, schema_version_sql, NULL, NULL, &msg) != SQLITE_OK) {
		log_msg(LOG_ERROR, "database: %s", msg ? msg : "cannot create schema_version");
		sqlite3_free(msg);
		return CS_EDB;
	}
	e = lite_schema_version(kk, &have);
	if (e != CS_OK)
		return e;
	/* SECURITY: never run against a schema we do not understand; an older
	 * binary could misread or damage it. */
	if (have > known) {
		log_msg(LOG_ERROR, "database schema version %d is newer than this "
		    "consentd (knows %d); refusing to start", have, known);
		return CS_ESCHEMA;
	}
	for (const struct embedded_file *f = embedded_migrations; f->name != NULL; f++) {
		int v = store_migration_version(f->name);
		if (v <= prev) {
			log_msg(LOG_ERROR, "embedded migration %s is misnamed or out of order",
			    f->name);
			return CS_ESCHEMA;
		}
		prev = v;
		if (v <= have)
			continue;
		e = migration_apply(k, v, f);
		if (e != CS_OK)
			return e;
	}
	return CS_OK;
}

/* --- checkpoints ------------------------------------------------------
 * SQLite's automatic checkpoint would run inside the COMMIT of the batch that
 * crossed its threshold, on the writer, while every other caller waits for
 * the turn.  So the writer's is off, and a thread of its own copies the WAL
 * back into the database (PASSIVE: it never blocks the writer nor a reader,
 * and does what it can) whenever a COMMIT left STORE_CHECKPOINT_PAGES or more
 * in the WAL. */

/* The writer's WAL hook: the WAL's size after each COMMIT.  It runs inside
 * batch_commit_locked's COMMIT, on the thread holding the turn, which alone
 * reads wal_pages right after: no lock needed on this per-commit path. */
static int wal_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
	(void)db;
	(void)name;
	struct writer *w = arg;
	w->wal_pages = pages;
	return SQLITE_OK;
}

/* The checkpointer's busy handler, which only a RESTART calls (PASSIVE never
 * waits): short sleeps while the readers that still read the WAL finish,
 * STORE_WAL_RESTART_WAIT_MS in all.  Not busy_wait: nobody waits for another
 * connection's write here, and the writer's turn is held meanwhile. */
static int restart_wait(void *arg, int count)
{
	(void)arg;
	if (count >= STORE_WAL_RESTART_WAIT_MS * 10)
		return 0;
	struct timespec ts = { 0, 100 * 1000 };
	nanosleep(&ts, NULL);
	return 1;
}

/* Begins the WAL again from its start.  SQLite does so by itself only when a
 * write begins after a checkpoint copied every frame back and no reader still
 * reads one; under a steady flow of group commits that moment never comes (a
 * PASSIVE checkpoint never catches up with the frames written meanwhile, and
 * 16 workers' reads overlap), and the WAL grew without end: 135 MB in 8 s of
 * POST /token, every fsync also writing the file's grown size, and every
 * page look-up searching more of the WAL's index.  So, once it is
 * STORE_WAL_RESTART_PAGES long, the checkpointer takes the writer's turn like
 * any transaction, commits the open batch (as its last caller's turn end
 * would), and runs a RESTART checkpoint: nothing new is written while it
 * copies what is left and waits for the readers still in the WAL; the next
 * COMMIT then writes from the WAL's start, over blocks the file already has.
 * false when it could not (the store stopping, a full queue, a reader
 * holding on past STORE_WAL_RESTART_WAIT_MS). */
static bool wal_restart(struct lite_db *d, struct conn_core *k)
{
	struct writer *w = &d->w;
	if (turn_take(w, false) != CS_OK)
		return false;
	pthread_mutex_lock(&w->mu);
	turn_close_batch_locked(d);
	pthread_mutex_unlock(&w->mu);
	int rc = sqlite3_wal_checkpoint_v2(k->db, NULL, SQLITE_CHECKPOINT_RESTART, NULL, NULL);
	if (rc != SQLITE_OK && rc != SQLITE_BUSY)
		log_msg(LOG_ERROR, "database checkpoint: %s", sqlite3_errmsg(k->db));
	pthread_mutex_lock(&w->mu);
	if (rc == SQLITE_OK)
		w->wal_restarts++;
	else
		w->wal_restarts_busy++;
	turn_release_locked(w);
	pthread_mutex_unlock(&w->mu);
	metrics_add(metric[M_DB_WAL_RESTARTS], (const char *[]){ rc == SQLITE_OK ? "done" : "readers" }, 1);
	return rc == SQLITE_OK;
}

static void *checkpointer(void *arg)
{
	struct lite_db *d = arg;
	struct writer *w = &d->w;
	struct conn_core k;
	/* The length at which the WAL is begun again: after a restart that gave
	 * up (a long reader: a backup, an export), not before it grew as much
	 * again, so that one slow reader stops writers once per
	 * STORE_WAL_RESTART_PAGES, not at every COMMIT. */
	int restart_at = STORE_WAL_RESTART_PAGES;
	if (core_open(d->path, &k) != CS_OK)
		return NULL;
	sqlite3_busy_handler(k.db, restart_wait, NULL);
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->ckpt_wanted && !w->ckpt_stop)
			pthread_cond_wait(&w->ckpt_cv, &w->mu);
		if (w->ckpt_stop)
			break;
		w->ckpt_wanted = false;
		pthread_mutex_unlock(&w->mu);
		int frames = 0;
		int rc = sqlite3_wal_checkpoint_v2(k.db, NULL, SQLITE_CHECKPOINT_PASSIVE, &frames, NULL);
		if (rc != SQLITE_OK && rc != SQLITE_BUSY)
			log_msg(LOG_ERROR, "database checkpoint: %s", sqlite3_errmsg(k.db));
		if (rc == SQLITE_OK && frames >= restart_at)
			restart_at = wal_restart(d, &k) ? STORE_WAL_RESTART_PAGES :
			    frames + STORE_WAL_RESTART_PAGES;
		else if (frames < STORE_WAL_RESTART_PAGES)
			restart_at = STORE_WAL_RESTART_PAGES;
		pthread_mutex_lock(&w->mu);
		w->checkpoints++;
	}
	pthread_mutex_unlock(&w->mu);
	core_close(&k);
	return NULL;
}

/* The writer: its connection and the group commit's lock and conditions
 * (the turn's wait is timed on the monotonic clock). */
static enum cs_err writer_init(struct lite_db *d)
{
	struct writer *w = &d->w;
	pthread_condattr_t ca;
	int ok = 0;
	w->jobs = NULL;
	w->jobs_tail = &w->jobs;
	if (pthread_condattr_init(&ca) != 0)
		return CS_ENOMEM;
	if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
	    pthread_mutex_init(&w->mu, NULL) == 0) {
		ok = 1;
		if (pthread_cond_init(&w->turn_cv, &ca) == 0) {
			ok = 2;
			if (pthread_cond_init(&w->done_cv, &ca) == 0) {
				ok = 3;
				if (pthread_cond_init(&w->ckpt_cv, &ca) == 0) {
					ok = 4;
					if (pthread_cond_init(&w->jobs_cv, &ca) == 0)
						ok = 5;
					else
						pthread_cond_destroy(&w->ckpt_cv);
				}
			}
		}
	}
	pthread_condattr_destroy(&ca);
	if (ok < 5) {
		if (ok >= 3)
			pthread_cond_destroy(&w->done_cv);
		if (ok >= 2)
			pthread_cond_destroy(&w->turn_cv);
		if (ok >= 1)
			pthread_mutex_destroy(&w->mu);
		return CS_ENOMEM;
	}
	w->queue_max = STORE_WRITE_QUEUE_DEFAULT;
	d->w_ok = true;
	enum cs_err e = core_open(d->path, &w->core);
	if (e != CS_OK)
		return e;
	/* The savepoints of a batch keep their sub-journal (the pages to roll a
	 * caller back to) in memory: on disk it spilled past 64 KiB to a temporary
	 * file, written, truncated, opened and removed again and again (issue 34:
	 * 3.6 writes a grant to /var/tmp).  It is never part of what makes a commit
	 * durable (the WAL is), and it holds at most one caller's pages: the
	 * outermost savepoint's RELEASE empties it. */
	if (sqlite3_exec(w->core.db, "PRAGMA temp_store = MEMORY", NULL, NULL, NULL) != SQLITE_OK) {
		log_msg(LOG_ERROR, "database %s: %s", d->path, sqlite3_errmsg(w->core.db));
		return CS_EDB;
	}
	sqlite3_wal_autocheckpoint(w->core.db, 0);
	sqlite3_wal_hook(w->core.db, wal_hook, w);
	if (pthread_create(&w->ckpt_thread, NULL, checkpointer, d) != 0)
		return CS_ENOMEM;
	w->ckpt_started = true;
	return CS_OK;
}

/* --- the database ------------------------------------------------------ */

/* Every connection is closed by now; the writer's queue drained (lite_stop). */
static void lite_close(struct store_db *dd)
{
	struct lite_db *d = db_of(dd);
	if (d == NULL)
		return;
	if (d->w_ok) {
		if (d->w.ckpt_started) {
			pthread_mutex_lock(&d->w.mu);
			d->w.ckpt_stop = true;
			pthread_cond_signal(&d->w.ckpt_cv);
			pthread_mutex_unlock(&d->w.mu);
			pthread_join(d->w.ckpt_thread, NULL);
		}
		core_close(&d->w.core);
		pthread_cond_destroy(&d->w.turn_cv);
		pthread_cond_destroy(&d->w.done_cv);
		pthread_cond_destroy(&d->w.ckpt_cv);
		pthread_cond_destroy(&d->w.jobs_cv);
		pthread_mutex_destroy(&d->w.mu);
	}
	free(d->path);
	free(d);
}

static enum cs_err lite_open(const char *path, const struct store_opts *o,
    const struct store_publisher *pub, struct store_db **out)
{
	(void)o;                          /* the PostgreSQL options; SQLite always migrates */
	struct lite_db *d = calloc(1, sizeof *d);
	if (d == NULL)
		return CS_ENOMEM;
	d->pub = *pub;
	enum cs_err e = CS_ENOMEM;
	if ((d->path = strdup(path)) == NULL || (e = writer_init(d)) != CS_OK) {
		lite_close((struct store_db *)d);
		return e;
	}
	*out = (struct store_db *)d;
	return CS_OK;
}

/* Any location that is not another engine's is a file path. */
static bool lite_claims(const char *loc)
{
	(void)loc;
	return true;
}

/* A [database] url names a server's database; a SQLite file is a path. */
static enum cs_err lite_url_check(const char *url, char *why, size_t whylen)
{
	(void)url;
	if (str_fmt(why, whylen, "is not a postgresql:// URL") != CS_OK)
		why[0] = '\0';
	return CS_ECONFIG;
}

/* One process owns the file: the caller's own in-process single flight is
 * the whole of it. */
static enum cs_err lite_flight_begin(struct store_link *k, const char *key)
{
	(void)k;
	(void)key;
	return CS_OK;
}

static void lite_flight_end(struct store_link *k)
{
	(void)k;
}

/* `consentd db copy` reads the calling thread's own connection. */
static struct sqlite3 *lite_copy_source(struct store_link *k)
{
	return link_of(k)->own.db;
}

static enum cs_err lite_copy_in(struct store_link *k, struct sqlite3 *src,
    struct store_copy_report *r)
{
	(void)k;
	(void)src;
	(void)r;
	return CS_EINVAL;                 /* copies go from SQLite, never into it */
}

const struct store_backend store_backend_sqlite = {
	.name = "sqlite",
	.dialect = STORE_DIALECT_SQLITE,
	.own_chains = false,
	.claims = lite_claims,
	.url_check = lite_url_check,
	.open = lite_open,
	.schema_open = lite_schema_open,
	.stop = lite_stop,
	.close = lite_close,
	.set_write_queue = lite_set_write_queue,
	.writer_stats = lite_writer_stats,
	.requests = lite_requests,
	.set_linger = lite_set_linger,
	.link_open = lite_link_open,
	.link_close = lite_link_close,
	.stmt = lite_stmt,
	.stmt_done = lite_stmt_done,
	.bind = lite_bind,
	.step = lite_step,
	.exec = lite_exec,
	.changes = lite_changes,
	.col_type = lite_col_type,
	.col_int64 = lite_col_int64,
	.col_bytes = lite_col_bytes,
	.col_raw_blob = lite_col_raw_blob,
	.col_raw_text = lite_col_raw_text,
	.col_count = lite_col_count,
	.col_name = lite_col_name,
	.col_nomem = lite_col_nomem,
	.begin = lite_begin,
	.commit = lite_commit,
	.transact = lite_transact,
	.rollback = lite_rollback,
	.audit_head = lite_audit_head,
	.conflicted = NULL,
	.ping = lite_ping,
	.schema_version = lite_schema_version,
	.backup = lite_backup,
	.flight_begin = lite_flight_begin,
	.flight_end = lite_flight_end,
	.copy_source = lite_copy_source,
	.copy_in = lite_copy_in,
};
