/* store.c -- the SQLite backend's core: one reading connection per thread,
 * one writer connection shared by all of them through a group commit, WAL,
 * migrations embedded at build time, transactions, and the one statement
 * mechanism every store_X.c uses (store_priv.h).  The SQL of each family lives
 * in its store_X.c.  It must never build SQL from input: every value travels
 * as a bound parameter, and it must never answer a caller's commit before that
 * caller's writes are durable. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>
#include <openssl/crypto.h>

#include "embed.h"
#include "metrics.h"
#include "store.h"
#include "store_priv.h"
#include "store_pg.h"
#include "log.h"

/* store.c's own statements; the cache (store_stmt) knows them by address. */
static const char SQL_BEGIN[] = "BEGIN IMMEDIATE";
static const char SQL_COMMIT[] = "COMMIT";
static const char SQL_ROLLBACK[] = "ROLLBACK";
/* One savepoint at a time on the writer: callers take turns (see "group commit"). */
static const char SQL_SAVEPOINT[] = "SAVEPOINT caller";
static const char SQL_RELEASE[] = "RELEASE caller";
static const char SQL_ROLLBACK_TO[] = "ROLLBACK TO caller";
static const char SQL_PING[] = "SELECT 1";
static const char SQL_SCHEMA_MAX[] = "SELECT coalesce(max(version), 0) FROM schema_version";
static const char SQL_SCHEMA_HAS[] = "SELECT 1 FROM schema_version WHERE version = ?1";
static const char SQL_SCHEMA_INSERT[] =
    "INSERT INTO schema_version (version, applied_at) VALUES (?1, ?2)";

/* Created by store.c, not by a migration: it records the migrations. */
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

/* A SQLite connection and its statements.  A thread's own one serves its
 * reads; the writer's one (struct store's w) serves every transaction. */
struct conn_core {
	sqlite3           *db;
	struct {
		const char       *sql;        /* the key: the address of a static constant */
		struct store_stmt st;         /* st.lite */
	} stmts[STMT_SLOTS];
	size_t             nstmts;
};

struct store_conn {
	struct store      *s;
	struct pg_conn    *pg;            /* the PostgreSQL backend's connection (own unused) */
	struct conn_core   own;           /* this thread's connection, for reads */
	struct conn_core  *cur;           /* &own, or the writer's while in a transaction */
	bool               in_tx;         /* between store_begin and commit/rollback */
	struct store_conn *next;          /* in s->conns */
	struct {                          /* the last audit entry the open transaction appended */
		int           set;
		int64_t       seq;
		unsigned char link[STORE_AUDIT_LINK_LEN];
	} audit;
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
	uint64_t            checkpoints;
	uint64_t            batches;      /* COMMITs made, and the transactions in them */
	uint64_t            transactions;
	struct commit_wait *waits;        /* their callers */
	struct {                          /* the batch's last audit entry, in commit order */
		int           set;
		int64_t       seq;
		unsigned char link[STORE_AUDIT_LINK_LEN];
	} audit;
};

struct store {
	char              *path;
	struct pg_store   *pg;            /* opened on a postgresql:// URL: store_pg.c does the work */
	int64_t            hook_seq;      /* the last audit entry given to the hook (PostgreSQL) */
	pthread_key_t      key;
	pthread_mutex_t    lock;          /* guards conns */
	struct store_conn *conns;         /* every open connection, to close at store_close */
	pthread_mutex_t    commit_lock;   /* guards the hook; held through each call */
	store_audit_hook   audit_hook;    /* guarded by commit_lock */
	void              *audit_arg;
	struct writer      w;
	bool               w_ok;          /* w's mutex and conditions exist */
};

#define STORE_BUSY_TIMEOUT_MS 5000

/* Waiting for another connection's write: short, even sleeps (SQLite's own
 * busy_timeout backs off to 100 ms sleeps, which, with a writer commit taking
 * one fsync of a few ms, left callers asleep long after the lock was free:
 * p99 of proxied calls ~0.6 s).  200 us for the first 50 tries, then 2 ms,
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
		sqlite3_finalize(k->stmts[i].st.lite);
	sqlite3_close_v2(k->db);
	memset(k, 0, sizeof *k);
}

static void conn_close(struct store_conn *c)
{
	if (c == NULL)
		return;
	pg_conn_close(c->pg);
	core_close(&c->own);
	free(c);
}

static void conn_unlink(struct store *s, struct store_conn *c)
{
	pthread_mutex_lock(&s->lock);
	for (struct store_conn **pp = &s->conns; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
}

/* The pthread key destructor: a worker thread exits, its connection goes. */
static void conn_destroy(void *p)
{
	struct store_conn *c = p;
	if (c == NULL)
		return;
	conn_unlink(c->s, c);
	conn_close(c);
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

static struct store_conn *conn_open(struct store *s)
{
	struct store_conn *c = calloc(1, sizeof *c);
	if (c == NULL)
		return NULL;
	c->s = s;
	c->cur = &c->own;
	if (s->pg != NULL) {
		if ((c->pg = pg_conn_open(s->pg)) == NULL) {
			free(c);
			return NULL;
		}
		return c;
	}
	if (core_open(s->path, &c->own) != CS_OK) {
		free(c);
		return NULL;
	}
	return c;
}

struct store_conn *store_conn(struct store *s)
{
	if (s == NULL)
		return NULL;
	struct store_conn *c = pthread_getspecific(s->key);
	if (c != NULL)
		return c;
	c = conn_open(s);
	if (c == NULL)
		return NULL;
	if (pthread_setspecific(s->key, c) != 0) {
		conn_close(c);
		return NULL;
	}
	pthread_mutex_lock(&s->lock);
	c->next = s->conns;
	s->conns = c;
	pthread_mutex_unlock(&s->lock);
	return c;
}

/* --- statements (store_priv.h) --------------------------------------- */

static size_t stmt_slot(const char *sql)
{
	/* Fibonacci hashing of the address; the low bits are alignment. */
	uint64_t h = (uint64_t)(uintptr_t)sql * UINT64_C(0x9e3779b97f4a7c15);
	return (size_t)(h >> 32) & (STMT_SLOTS - 1);
}

static struct store_stmt *core_stmt(struct conn_core *c, const char *sql)
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
	c->stmts[i].st.lite = st;
	c->nstmts++;
	return &c->stmts[i].st;
}

/* In a transaction the statement is the writer's: every statement of a
 * transaction runs on the one writer connection, inside the caller's savepoint. */
struct store_stmt *store_stmt(struct store_conn *c, const char *sql)
{
	if (c == NULL || sql == NULL)
		return NULL;
	if (c->pg != NULL)
		return pg_stmt(c->pg, sql);
	return core_stmt(c->cur, sql);
}

/* Ready for the next use: reset and drop bound values (which may be secrets). */
void store_stmt_done(struct store_stmt *st)
{
	if (st == NULL)
		return;
	if (st->pg != NULL) {
		pg_stmt_done(st);
		return;
	}
	sqlite3_reset(st->lite);
	sqlite3_clear_bindings(st->lite);
}

enum cs_err store_rc_err(int rc)
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
enum cs_err store_exec(struct store_conn *c, struct store_stmt *st)
{
	if (st->pg != NULL)
		return pg_exec(st);
	int rc = sqlite3_step(st->lite);
	enum cs_err e = rc == SQLITE_DONE ? CS_OK : store_rc_err(rc);
	if (rc == SQLITE_ROW)
		e = CS_EDB;    /* a programming error: this statement returns rows */
	if (e != CS_OK && e != CS_EEXIST && e != CS_EBUSY)
		log_msg(LOG_ERROR, "database: %s", sqlite3_errmsg(c->cur->db));
	store_stmt_done(st);
	return e;
}

enum cs_err store_step(struct store_conn *c, struct store_stmt *st)
{
	if (st->pg != NULL)
		return pg_step(st);
	int rc = sqlite3_step(st->lite);
	if (rc == SQLITE_ROW)
		return CS_OK;
	if (rc == SQLITE_DONE)
		return CS_ENOENT;
	enum cs_err e = store_rc_err(rc);
	log_msg(LOG_ERROR, "database: %s", sqlite3_errmsg(c->cur->db));
	return e == CS_OK ? CS_EDB : e;
}

int64_t store_changes(struct store_conn *c)
{
	if (c->pg != NULL)
		return pg_changes(c->pg);
	return (int64_t)sqlite3_changes64(c->cur->db);
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

/* Binds v[0..n) to sst.  how is SQLITE_TRANSIENT (SQLite copies each text and blob)
 * or SQLITE_STATIC (no copy: only for a caller that steps and clears the statement
 * before it returns, while v's values are still alive). */
static enum cs_err bind_values(struct store_stmt *sst, const struct store_val *v, size_t n,
    sqlite3_destructor_type how)
{
	enum cs_err e = CS_OK;
	if (sst->pg != NULL) {
		/* PostgreSQL runs the statement here, with every value at once. */
		if ((e = pg_bind(sst, v, n)) != CS_OK)
			store_stmt_done(sst);
		return e;
	}
	sqlite3_stmt *st = sst->lite;
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
	if (e != CS_OK)
		store_stmt_done(sst);
	return e;
}

enum cs_err store_bind(struct store_stmt *sst, const struct store_val *v, size_t n)
{
	return bind_values(sst, v, n, SQLITE_TRANSIENT);
}

/* store_query without SQLite's copies of the values, for store_run and store_get:
 * they step the statement and clear its bindings (store_stmt_done) before they
 * return, so the caller's values outlive every use SQLite makes of them.  No copy
 * also means no unwiped copy of a secret in SQLite's heap. */
static struct store_stmt *query_nocopy(struct store_conn *c, const char *sql,
    const struct store_val *v, size_t n, enum cs_err *e)
{
	struct store_stmt *st = store_stmt(c, sql);
	if (st == NULL) {
		*e = CS_EDB;
		return NULL;
	}
	if ((*e = bind_values(st, v, n, SQLITE_STATIC)) != CS_OK)
		return NULL;
	return st;
}

struct store_stmt *store_query(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n, enum cs_err *e)
{
	struct store_stmt *st = store_stmt(c, sql);
	if (st == NULL) {
		*e = CS_EDB;
		return NULL;
	}
	if ((*e = store_bind(st, v, n)) != CS_OK)
		return NULL;
	return st;
}

enum cs_err store_run(struct store_conn *c, const char *sql, const struct store_val *v, size_t n)
{
	enum cs_err e;
	struct store_stmt *st = query_nocopy(c, sql, v, n, &e);
	return st == NULL ? e : store_exec(c, st);
}

/* Whether a NULL from store_col_raw_text means SQLite ran out of memory
 * converting the value, rather than a NULL column. */
static bool raw_text_nomem(struct store_stmt *st)
{
	return st->pg == NULL && sqlite3_errcode(sqlite3_db_handle(st->lite)) == SQLITE_NOMEM;
}

/* A malloc'd copy of a text column; NULL column -> *out NULL. */
enum cs_err store_col_text(struct store_stmt *st, int i, char **out)
{
	const unsigned char *t = store_col_raw_text(st, i);
	if (t == NULL) {
		if (raw_text_nomem(st))
			return CS_ENOMEM;
		*out = NULL;
		return CS_OK;
	}
	int n = store_col_bytes(st, i);
	char *p = malloc((size_t)n + 1);
	if (p == NULL)
		return CS_ENOMEM;
	memcpy(p, t, (size_t)n);
	p[n] = '\0';
	*out = p;
	return CS_OK;
}

/* Two passes over the row: the first measures every column (and finds a
 * required one NULL before anything is allocated), the second copies.  Both
 * backends answer the same pointer and length for a column asked twice
 * within one row (SQLite converts a value to text once and keeps it). */
enum cs_err store_cols_text(struct store_stmt *st, char **block, const struct store_text_col *cols,
    size_t n)
{
	enum cs_err e = CS_OK;
	size_t total = 0, at = 0;
	char *p = NULL;

	*block = NULL;
	for (size_t k = 0; k < n; k++)
		*cols[k].out = NULL;
	for (size_t k = 0; k < n; k++) {
		const unsigned char *t = store_col_raw_text(st, cols[k].i);
		if (t == NULL) {
			/* Defensive: a NOT NULL column that comes back NULL means a
			 * damaged database. */
			e = raw_text_nomem(st) ? CS_ENOMEM : cols[k].required ? CS_EDB : CS_OK;
			if (e != CS_OK)
				goto out;
			continue;
		}
		int len = store_col_bytes(st, cols[k].i);
		if (len < 0 || (size_t)len >= SIZE_MAX - total) {
			e = CS_ETOOBIG;
			goto out;
		}
		total += (size_t)len + 1;
	}
	if (total == 0)
		goto out;                 /* every column NULL: no block */
	if ((p = malloc(total)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		const unsigned char *t = store_col_raw_text(st, cols[k].i);
		if (t == NULL && !cols[k].required)
			continue;
		int len = t != NULL ? store_col_bytes(st, cols[k].i) : -1;
		/* Defensive, cannot happen: the column changed between the passes. */
		if (len < 0 || (size_t)len >= total - at) {
			e = CS_EDB;
			goto out;
		}
		memcpy(p + at, t, (size_t)len);
		p[at + (size_t)len] = '\0';
		*cols[k].out = p + at;
		at += (size_t)len + 1;
	}
	*block = p;
	p = NULL;
out:
	if (p != NULL) {
		OPENSSL_cleanse(p, total);    /* a partial copy may hold a secret column */
		free(p);
	}
	if (e != CS_OK)
		for (size_t k = 0; k < n; k++)
			*cols[k].out = NULL;
	return e;
}

enum cs_err store_col_blob(struct store_stmt *st, int i, unsigned char **out, size_t *len)
{
	const void *b = store_col_raw_blob(st, i);
	int n = store_col_bytes(st, i);
	unsigned char *p = malloc(n > 0 ? (size_t)n : 1);
	if (p == NULL)
		return CS_ENOMEM;
	if (n > 0 && b != NULL)
		memcpy(p, b, (size_t)n);
	*out = p;
	*len = n > 0 ? (size_t)n : 0;
	return CS_OK;
}

/* The current row's columns, either backend (store_priv.h). */
enum store_col_kind store_col_type(struct store_stmt *st, int i)
{
	if (st->pg != NULL)
		return pg_col_type(st, i);
	switch (sqlite3_column_type(st->lite, i)) {
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

int64_t store_col_int64(struct store_stmt *st, int i)
{
	return st->pg != NULL ? pg_col_int64(st, i) : (int64_t)sqlite3_column_int64(st->lite, i);
}

int store_col_int(struct store_stmt *st, int i)
{
	return st->pg != NULL ? (int)pg_col_int64(st, i) : sqlite3_column_int(st->lite, i);
}

int store_col_bytes(struct store_stmt *st, int i)
{
	return st->pg != NULL ? pg_col_bytes(st, i) : sqlite3_column_bytes(st->lite, i);
}

const void *store_col_raw_blob(struct store_stmt *st, int i)
{
	return st->pg != NULL ? pg_col_raw_blob(st, i) : sqlite3_column_blob(st->lite, i);
}

const unsigned char *store_col_raw_text(struct store_stmt *st, int i)
{
	return st->pg != NULL ? pg_col_raw_text(st, i) : sqlite3_column_text(st->lite, i);
}

int store_col_count(struct store_stmt *st)
{
	return st->pg != NULL ? pg_col_count(st) : sqlite3_column_count(st->lite);
}

const char *store_col_name(struct store_stmt *st, int i)
{
	return st->pg != NULL ? pg_col_name(st, i) : sqlite3_column_name(st->lite, i);
}

enum cs_err store_get(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n, const struct store_row_type *t, void *out)
{
	enum cs_err e;
	struct store_stmt *st = query_nocopy(c, sql, v, n, &e);
	if (st == NULL)
		return e;
	if ((e = store_step(c, st)) == CS_OK)
		e = t->read(st, out);
	store_stmt_done(st);
	return e;
}

enum cs_err store_rows(struct store_conn *c, struct store_stmt *st, size_t max,
    const struct store_row_type *t, void **out, size_t *n)
{
	enum cs_err e = CS_OK;
	unsigned char *v = NULL;
	size_t nv = 0;
	if (max > 0 && (v = calloc(max, t->size)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	while (nv < max && (e = store_step(c, st)) == CS_OK) {
		if ((e = t->read(st, v + nv * t->size)) != CS_OK)
			goto out;
		nv++;
	}
	if (e == CS_ENOENT || nv == max)
		e = CS_OK;
out:
	store_stmt_done(st);
	if (e != CS_OK) {
		t->free(v, nv);
		return e;
	}
	if (nv == 0) {
		free(v);
		v = NULL;
	}
	*out = v;
	*n = nv;
	return CS_OK;
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
 * SECURITY: store_commit returns CS_OK only after the COMMIT that holds the
 * caller's writes returned, so nothing is acknowledged before it is durable.
 * A caller that read a batch-mate's uncommitted row commits in the same batch
 * or a later one, so no answer depends on a write that could still be lost.
 * A failing caller rolls back to its own savepoint and takes nobody with it;
 * a failure that ends the outer transaction (SQLite does so itself after an
 * I/O error, a full disk or no memory) or a failed COMMIT fails exactly the
 * callers of that batch. */

#define STORE_BATCH_MAX 64           /* transactions one COMMIT makes durable, at most */
#define STORE_CHECKPOINT_PAGES 1000  /* WAL pages that wake the checkpointer (SQLite's default) */

static enum cs_err core_run(struct conn_core *k, const char *sql)
{
	struct store_stmt *st = core_stmt(k, sql);
	if (st == NULL)
		return CS_EDB;
	int rc = sqlite3_step(st->lite);
	enum cs_err e = rc == SQLITE_DONE ? CS_OK : store_rc_err(rc);
	if (e == CS_OK && rc != SQLITE_DONE)
		e = CS_EDB;
	if (e != CS_OK && e != CS_EBUSY)
		log_msg(LOG_ERROR, "database: %s", sqlite3_errmsg(k->db));
	store_stmt_done(st);
	return e;
}

/* consentd_db_commit_seconds and _batch_size: one observation per COMMIT. */
static void count_commit(const struct timespec *t0, enum cs_err e, unsigned n)
{
	struct timespec t1;
	if (e != CS_OK)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	metrics_observe(metric[M_DB_COMMIT_SECONDS], NULL, (double)(t1.tv_sec - t0->tv_sec) +
	    (double)(t1.tv_nsec - t0->tv_nsec) / 1e9);
	metrics_observe(metric[M_DB_COMMIT_BATCH], NULL, (double)n);
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
static void batch_commit_locked(struct store *s)
{
	struct writer *w = &s->w;
	struct commit_wait *list = w->waits;
	unsigned n = w->pending;
	int audited = w->audit.set;
	int64_t seq = w->audit.seq;
	unsigned char link[STORE_AUDIT_LINK_LEN];
	struct timespec t0;

	memcpy(link, w->audit.link, sizeof link);
	w->waits = NULL;
	w->pending = 0;
	w->audit.set = 0;
	pthread_mutex_unlock(&w->mu);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	enum cs_err e = core_run(&w->core, SQL_COMMIT);
	if (e != CS_OK && !sqlite3_get_autocommit(w->core.db))
		(void)core_run(&w->core, SQL_ROLLBACK);
	w->open = false;
	/* SECURITY: the hook publishes the batch's last audit entry before any
	 * caller of the batch answers; batches commit one at a time, so the
	 * published heads follow commit order and only grow. */
	if (e == CS_OK && audited) {
		pthread_mutex_lock(&s->commit_lock);
		if (s->audit_hook != NULL)
			s->audit_hook(s->audit_arg, seq, link);
		pthread_mutex_unlock(&s->commit_lock);
	}
	count_commit(&t0, e, n);
	OPENSSL_cleanse(link, sizeof link);

	pthread_mutex_lock(&w->mu);
	if (e == CS_OK) {
		w->batches++;
		w->transactions += n;
	}
	if (w->wal_pages >= STORE_CHECKPOINT_PAGES && w->ckpt_started) {
		w->ckpt_wanted = true;
		pthread_cond_signal(&w->ckpt_cv);
	}
	batch_finish_locked(w, list, e);
}

/* Ends the caller's turn: commits the batch when nobody waits to add to it
 * (or it is full), hands the turn on otherwise.  mu held, the turn ours. */
static void turn_end_locked(struct store *s)
{
	struct writer *w = &s->w;
	if (w->open && sqlite3_get_autocommit(w->core.db)) {
		/* SQLite ended the outer transaction itself: the batch is gone. */
		log_msg(LOG_ERROR, "database: a transaction batch was rolled back by the database");
		struct commit_wait *list = w->waits;
		w->waits = NULL;
		w->pending = 0;
		w->audit.set = 0;
		w->open = false;
		batch_finish_locked(w, list, CS_EDB);
	}
	if (w->open && w->pending == 0 && w->waiting == 0) {
		(void)core_run(&w->core, SQL_ROLLBACK);    /* nothing in it: let the lock go */
		w->open = false;
	} else if (w->open && w->pending > 0 && (w->waiting == 0 || w->pending >= STORE_BATCH_MAX)) {
		batch_commit_locked(s);
	}
	w->busy = false;
	pthread_cond_signal(&w->turn_cv);
	if (w->stopping)
		pthread_cond_broadcast(&w->done_cv);    /* store_stop watches the queue drain */
}

/* Takes the writer's turn.  CS_EBUSY at once when the store is stopping or
 * queue_max callers wait already, and after STORE_BUSY_TIMEOUT_MS without it. */
static enum cs_err turn_take(struct writer *w)
{
	enum cs_err e = CS_OK;
	struct timespec until;

	pthread_mutex_lock(&w->mu);
	if (w->stopping) {
		e = CS_EBUSY;
		goto out;
	}
	if (w->busy) {
		if (w->waiting >= w->queue_max) {
			metrics_add(metric[M_DB_QUEUE_FULL], NULL, 1);
			e = CS_EBUSY;
			goto out;
		}
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += STORE_BUSY_TIMEOUT_MS / 1000;
		w->waiting++;
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

enum cs_err store_begin(struct store_conn *c)
{
	enum cs_err e;
	if (c == NULL)
		return CS_EINVAL;
	if (c->in_tx) {
		log_msg(LOG_ERROR, "database: a transaction began inside another");
		return CS_EDB;
	}
	c->audit.set = 0;
	if (c->pg != NULL) {
		if ((e = pg_begin(c->pg)) == CS_OK)
			c->in_tx = true;
		return e;
	}
	struct writer *w = &c->s->w;
	if ((e = turn_take(w)) != CS_OK)
		return e;
	if (!w->open) {
		if ((e = core_run(&w->core, SQL_BEGIN)) != CS_OK)
			goto fail;
		w->open = true;
	}
	if ((e = core_run(&w->core, SQL_SAVEPOINT)) != CS_OK)
		goto fail;
	c->cur = &w->core;
	c->in_tx = true;
	c->audit.set = 0;
	return CS_OK;
fail:
	pthread_mutex_lock(&w->mu);
	turn_end_locked(c->s);
	pthread_mutex_unlock(&w->mu);
	return e;
}

void store_audit_appended(struct store_conn *c, int64_t seq,
    const unsigned char link[STORE_AUDIT_LINK_LEN])
{
	c->audit.set = 1;
	c->audit.seq = seq;
	memcpy(c->audit.link, link, STORE_AUDIT_LINK_LEN);
	/* Can't happen (audit.h: appends run inside a transaction), but if one
	 * ran outside, its row is committed already: publish it now, not never. */
	if (!c->in_tx) {
		pthread_mutex_lock(&c->s->commit_lock);
		if (c->s->audit_hook != NULL)
			c->s->audit_hook(c->s->audit_arg, seq, link);
		pthread_mutex_unlock(&c->s->commit_lock);
		c->audit.set = 0;
	}
}

/* PostgreSQL: commits run one at a time across the nodes (the write lock),
 * but this node's callers reach the hook after their COMMIT in any order:
 * only a later entry than the last one given goes on, so the heads a node
 * publishes only grow.  commit_lock held. */
static void hook_call_locked(struct store *s, int64_t seq, const unsigned char *link)
{
	if (s->audit_hook != NULL && seq > s->hook_seq) {
		s->audit_hook(s->audit_arg, seq, link);
		s->hook_seq = seq;
	}
}

static enum cs_err pg_tx_commit(struct store_conn *c)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	enum cs_err e = pg_commit(c->pg);
	c->in_tx = false;
	count_commit(&t0, e, 1);
	if (e == CS_OK && c->audit.set) {
		pthread_mutex_lock(&c->s->commit_lock);
		hook_call_locked(c->s, c->audit.seq, c->audit.link);
		pthread_mutex_unlock(&c->s->commit_lock);
	}
	c->audit.set = 0;
	return e;
}

void store_set_audit_hook(struct store *s, store_audit_hook fn, void *arg)
{
	pthread_mutex_lock(&s->commit_lock);
	s->audit_hook = fn;
	s->audit_arg = arg;
	pthread_mutex_unlock(&s->commit_lock);
}

enum cs_err store_commit(struct store_conn *c)
{
	if (c == NULL || !c->in_tx)
		return CS_EDB;                /* can't happen: no transaction to commit */
	if (c->pg != NULL)
		return pg_tx_commit(c);
	struct writer *w = &c->s->w;
	struct commit_wait me = { .next = NULL, .done = false, .e = CS_EDB };
	enum cs_err e = core_run(&w->core, SQL_RELEASE);
	if (e != CS_OK && !sqlite3_get_autocommit(w->core.db)) {
		(void)core_run(&w->core, SQL_ROLLBACK_TO);
		(void)core_run(&w->core, SQL_RELEASE);
	}
	c->cur = &c->own;
	c->in_tx = false;

	pthread_mutex_lock(&w->mu);
	if (e == CS_OK) {
		me.next = w->waits;
		w->waits = &me;
		w->pending++;
		if (c->audit.set) {
			w->audit.set = 1;
			w->audit.seq = c->audit.seq;
			memcpy(w->audit.link, c->audit.link, STORE_AUDIT_LINK_LEN);
		}
	}
	c->audit.set = 0;
	turn_end_locked(c->s);
	while (e == CS_OK && !me.done)
		pthread_cond_wait(&w->done_cv, &w->mu);
	if (e == CS_OK)
		e = me.e;
	pthread_mutex_unlock(&w->mu);
	return e;
}

void store_rollback(struct store_conn *c)
{
	if (c == NULL)
		return;
	c->audit.set = 0;
	if (c->pg != NULL) {
		pg_rollback(c->pg);
		c->in_tx = false;
		return;
	}
	if (!c->in_tx) {
		/* Outside store_begin nothing should be open on the thread's own
		 * connection; if something is, it goes. */
		if (c->own.db != NULL && !sqlite3_get_autocommit(c->own.db))
			(void)core_run(&c->own, SQL_ROLLBACK);
		return;
	}
	struct writer *w = &c->s->w;
	if (!sqlite3_get_autocommit(w->core.db)) {
		(void)core_run(&w->core, SQL_ROLLBACK_TO);
		(void)core_run(&w->core, SQL_RELEASE);
	}
	c->cur = &c->own;
	c->in_tx = false;
	pthread_mutex_lock(&w->mu);
	turn_end_locked(c->s);
	pthread_mutex_unlock(&w->mu);
}

void store_set_write_queue(struct store *s, unsigned max)
{
	if (s == NULL)
		return;
	if (s->pg != NULL) {
		pg_set_write_queue(s->pg, max);
		return;
	}
	pthread_mutex_lock(&s->w.mu);
	s->w.queue_max = max;
	pthread_mutex_unlock(&s->w.mu);
}

void store_writer_stats(struct store *s, struct store_writer_stats *out)
{
	if (s->pg != NULL) {
		pg_writer_stats(s->pg, out);
		return;
	}
	pthread_mutex_lock(&s->w.mu);
	out->stopping = s->w.stopping;
	out->checkpoints = s->w.checkpoints;
	out->waiting = s->w.waiting;
	out->batches = s->w.batches;
	out->transactions = s->w.transactions;
	pthread_mutex_unlock(&s->w.mu);
}

void store_stop(struct store *s)
{
	if (s == NULL || !s->w_ok)
		return;
	struct writer *w = &s->w;
	pthread_mutex_lock(&w->mu);
	w->stopping = true;
	/* The queue drains: every caller that holds or waits for a turn ends it,
	 * and the last one commits what is pending. */
	while (w->busy || w->waiting > 0 || w->pending > 0)
		pthread_cond_wait(&w->done_cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
}

enum cs_err store_ping(struct store_conn *c)
{
	if (c->pg != NULL) {
		/* Ready means the schema this binary knows, too (consentd migrate). */
		int have = 0;
		enum cs_err e = pg_schema_version(c->pg, &have);
		/* A newer schema is a rolling upgrade's (migrations keep the
		 * previous release working): only an older one is unready. */
		return e != CS_OK ? e : have >= pg_schema_known() ? CS_OK : CS_ESCHEMA;
	}
	struct store_stmt *st = store_stmt(c, SQL_PING);
	if (st == NULL)
		return CS_EDB;
	int rc = sqlite3_step(st->lite);
	enum cs_err e = rc == SQLITE_ROW && sqlite3_column_int(st->lite, 0) == 1 ? CS_OK : CS_EDB;
	store_stmt_done(st);
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

enum cs_err store_backup(struct store_conn *c, const char *dest_path)
{
	sqlite3 *dst = NULL;
	sqlite3_backup *b = NULL;
	enum cs_err e = CS_EDB;
	int rc;

	if (c != NULL && c->pg != NULL) {
		log_msg(LOG_ERROR, "backup: the database is PostgreSQL: use pg_dump or pg_basebackup");
		return CS_EINVAL;
	}
	if (c == NULL || c->own.db == NULL || dest_path == NULL)
		return CS_EINVAL;
	rc = sqlite3_open_v2(dest_path, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		log_msg(LOG_ERROR, "backup %s: %s", dest_path,
		    dst != NULL ? sqlite3_errmsg(dst) : sqlite3_errstr(rc));
		goto out;
	}
	if ((b = sqlite3_backup_init(dst, "main", c->own.db, "main")) == NULL) {
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

/* The version of a migration named "NNNN_what.sql"; -1 when malformed. */
int store_migration_version(const char *name)
{
	long v = 0;
	size_t i = 0;
	for (; name[i] >= '0' && name[i] <= '9'; i++) {
		v = v * 10 + (name[i] - '0');
		if (v > INT_MAX / 10)
			return -1;
	}
	if (i == 0 || name[i] != '_' || v <= 0)
		return -1;
	size_t n = strlen(name);
	if (n < 4 || strcmp(name + n - 4, ".sql") != 0)
		return -1;
	return (int)v;
}

int store_migrations_known(const struct embedded_file *set)
{
	int max = 0;
	for (const struct embedded_file *f = set; f->name != NULL; f++) {
		int v = store_migration_version(f->name);
		if (v > max)
			max = v;
	}
	return max;
}

int store_schema_known(void)
{
	return store_migrations_known(embedded_migrations);
}

enum cs_err store_schema_version(struct store_conn *c, int *out)
{
	if (out == NULL)
		return CS_EINVAL;
	if (c->pg != NULL)
		return pg_schema_version(c->pg, out);
	struct store_stmt *st = store_stmt(c, SQL_SCHEMA_MAX);
	if (st == NULL)
		return CS_EDB;
	enum cs_err e = CS_EDB;
	int rc = sqlite3_step(st->lite);
	if (rc == SQLITE_ROW) {
		sqlite3_int64 v = sqlite3_column_int64(st->lite, 0);
		if (v >= 0 && v <= INT_MAX) {
			*out = (int)v;
			e = CS_OK;
		}
	} else {
		e = store_rc_err(rc) == CS_OK ? CS_EDB : store_rc_err(rc);
	}
	store_stmt_done(st);
	return e;
}

/* Applies one migration unless another process did already: the check, the
 * script and the schema_version row share one IMMEDIATE transaction. */
static enum cs_err migration_apply(struct store_conn *c, int version, const struct embedded_file *f)
{
	enum cs_err e;
	char *msg = NULL;
	struct store_stmt *st;

	e = store_begin(c);
	if (e != CS_OK)
		goto out;
	if ((st = store_query(c, SQL_SCHEMA_HAS, STORE_VALS(SV_INT(version)), &e)) == NULL)
		goto out;
	e = store_step(c, st);
	store_stmt_done(st);
	if (e == CS_OK) {                 /* already there */
		e = store_commit(c);
		goto out;
	}
	if (e != CS_ENOENT)
		goto out;
	if (sqlite3_exec(c->cur->db, f->data, NULL, NULL, &msg) != SQLITE_OK) {
		log_msg(LOG_ERROR, "migration %s failed: %s", f->name, msg ? msg : "?");
		e = CS_EDB;
		goto out;
	}
	if ((e = store_run(c, SQL_SCHEMA_INSERT, STORE_VALS(SV_INT(version),
	    SV_INT((int64_t)time(NULL))))) != CS_OK)
		goto out;
	e = store_commit(c);
out:
	sqlite3_free(msg);
	if (e != CS_OK)
		store_rollback(c);
	return e;
}

static enum cs_err migrate(struct store_conn *c)
{
	enum cs_err e;
	char *msg = NULL;
	int have = 0, known = store_schema_known(), prev = 0;

	if (sqlite3_exec(c->own.db, schema_version_sql, NULL, NULL, &msg) != SQLITE_OK) {
		log_msg(LOG_ERROR, "database: %s", msg ? msg : "cannot create schema_version");
		sqlite3_free(msg);
		return CS_EDB;
	}
	e = store_schema_version(c, &have);
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
		e = migration_apply(c, v, f);
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

static void *checkpointer(void *arg)
{
	struct store *s = arg;
	struct writer *w = &s->w;
	struct conn_core k;
	if (core_open(s->path, &k) != CS_OK)
		return NULL;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->ckpt_wanted && !w->ckpt_stop)
			pthread_cond_wait(&w->ckpt_cv, &w->mu);
		if (w->ckpt_stop)
			break;
		w->ckpt_wanted = false;
		pthread_mutex_unlock(&w->mu);
		int rc = sqlite3_wal_checkpoint_v2(k.db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
		if (rc != SQLITE_OK && rc != SQLITE_BUSY)
			log_msg(LOG_ERROR, "database checkpoint: %s", sqlite3_errmsg(k.db));
		pthread_mutex_lock(&w->mu);
		w->checkpoints++;
	}
	pthread_mutex_unlock(&w->mu);
	core_close(&k);
	return NULL;
}

/* The writer: its connection and the group commit's lock and conditions
 * (the turn's wait is timed on the monotonic clock). */
static enum cs_err writer_init(struct store *s)
{
	struct writer *w = &s->w;
	pthread_condattr_t ca;
	int ok = 0;
	if (pthread_condattr_init(&ca) != 0)
		return CS_ENOMEM;
	if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
	    pthread_mutex_init(&w->mu, NULL) == 0) {
		ok = 1;
		if (pthread_cond_init(&w->turn_cv, &ca) == 0) {
			ok = 2;
			if (pthread_cond_init(&w->done_cv, &ca) == 0) {
				ok = 3;
				if (pthread_cond_init(&w->ckpt_cv, &ca) == 0)
					ok = 4;
			}
		}
	}
	pthread_condattr_destroy(&ca);
	if (ok < 4) {
		if (ok >= 3)
			pthread_cond_destroy(&w->done_cv);
		if (ok >= 2)
			pthread_cond_destroy(&w->turn_cv);
		if (ok >= 1)
			pthread_mutex_destroy(&w->mu);
		return CS_ENOMEM;
	}
	w->queue_max = STORE_WRITE_QUEUE_DEFAULT;
	s->w_ok = true;
	enum cs_err e = core_open(s->path, &w->core);
	if (e != CS_OK)
		return e;
	sqlite3_wal_autocheckpoint(w->core.db, 0);
	sqlite3_wal_hook(w->core.db, wal_hook, w);
	if (pthread_create(&w->ckpt_thread, NULL, checkpointer, s) != 0)
		return CS_ENOMEM;
	w->ckpt_started = true;
	return CS_OK;
}

bool store_is_pg(const struct store *s) { return s != NULL && s->pg != NULL; }
bool store_is_pg_conn(const struct store_conn *c) { return c != NULL && c->pg != NULL; }

enum cs_err store_copy(struct store *from, struct store *to, struct store_copy_report *r)
{
	if (from == NULL || to == NULL || r == NULL || from->pg != NULL || to->pg == NULL)
		return CS_EINVAL;
	struct store_conn *a = store_conn(from), *b = store_conn(to);
	if (a == NULL || b == NULL)
		return CS_EDB;
	return pg_copy_from_sqlite(b->pg, a->own.db, r);
}

enum cs_err store_flight_begin(struct store_conn *c, const char *key)
{
	if (c == NULL || key == NULL)
		return CS_EINVAL;
	return c->pg != NULL ? pg_flight_begin(c->pg, key) : CS_OK;
}

void store_flight_end(struct store_conn *c)
{
	if (c != NULL && c->pg != NULL)
		pg_flight_end(c->pg);
}

enum cs_err store_url_check(const char *url, char *why, size_t whylen)
{
	return pg_url_check(url, why, whylen);
}

enum cs_err store_open(const char *path, struct store **out)
{
	return store_open_with(path, NULL, out);
}

/* The PostgreSQL side of store_open_with, after the common set-up. */
static enum cs_err pg_open_schema(struct store_conn *c, enum store_schema_policy pol)
{
	int have = 0, known = pg_schema_known();
	enum cs_err e;
	if (pol == STORE_SCHEMA_MIGRATE)
		return pg_migrate(c->pg);
	if ((e = pg_schema_version(c->pg, &have)) != CS_OK)
		return e;
	/* SECURITY: never run against a schema we do not understand. */
	if (have > known) {
		log_msg(LOG_ERROR, "database schema version %d is newer than this consentd (knows "
		    "%d); refusing to start", have, known);
		return CS_ESCHEMA;
	}
	if (have < known) {
		log_msg(pol == STORE_SCHEMA_WAIT ? LOG_WARN : LOG_ERROR, "database schema version %d "
		    "is older than this consentd's (%d): run `consentd migrate -c FILE`%s", have, known,
		    pol == STORE_SCHEMA_WAIT ? "; serving unready until then" : "");
		if (pol != STORE_SCHEMA_WAIT)
			return CS_ESCHEMA;
	}
	return CS_OK;
}

enum cs_err store_open_with(const char *path, const struct store_opts *o, struct store **out)
{
	enum cs_err e = CS_ENOMEM;
	struct store *s = NULL;
	int key_ok = 0, lock_ok = 0, commit_lock_ok = 0;
	const struct store_opts none = { .schema = STORE_SCHEMA_REQUIRE };

	if (path == NULL || path[0] == '\0' || out == NULL)
		return CS_EINVAL;
	if (o == NULL)
		o = &none;
	s = calloc(1, sizeof *s);
	if (s == NULL)
		goto out;
	s->path = strdup(path);
	if (s->path == NULL)
		goto out;
	if (pthread_mutex_init(&s->lock, NULL) != 0)
		goto out;
	lock_ok = 1;
	if (pthread_mutex_init(&s->commit_lock, NULL) != 0)
		goto out;
	commit_lock_ok = 1;
	if (pthread_key_create(&s->key, conn_destroy) != 0)
		goto out;
	key_ok = 1;
	if (pg_is_url(path)) {
		if ((e = pg_store_open(path, o->password, !o->unprepared, &s->pg)) != CS_OK)
			goto out;
	} else if ((e = writer_init(s)) != CS_OK) {
		goto out;
	}
	e = CS_ENOMEM;
	struct store_conn *c = store_conn(s);
	if (c == NULL) {
		e = CS_EDB;
		goto out;
	}
	e = s->pg != NULL ? pg_open_schema(c, o->schema) : migrate(c);
	if (e != CS_OK)
		goto out;
	*out = s;
	s = NULL;
out:
	if (s != NULL) {
		if (key_ok) {
			store_close(s);       /* closes the connection, the key and s */
			s = NULL;
		} else {
			if (lock_ok)
				pthread_mutex_destroy(&s->lock);
			if (commit_lock_ok)
				pthread_mutex_destroy(&s->commit_lock);
			free(s->path);
			free(s);
		}
	}
	return e;
}

void store_close(struct store *s)
{
	if (s == NULL)
		return;
	/* The caller's connection, then any a still-running-but-idle thread left;
	 * worker threads must have been joined (or stopped using s) by now.  The
	 * writer's queue drains first: what was released gets committed. */
	struct store_conn *mine = pthread_getspecific(s->key);
	if (mine != NULL && mine->in_tx)
		store_rollback(mine);
	store_stop(s);
	if (mine != NULL) {
		pthread_setspecific(s->key, NULL);
		conn_unlink(s, mine);
		conn_close(mine);
	}
	pthread_key_delete(s->key);
	pthread_mutex_lock(&s->lock);
	struct store_conn *c = s->conns;
	s->conns = NULL;
	pthread_mutex_unlock(&s->lock);
	while (c != NULL) {
		struct store_conn *next = c->next;
		conn_close(c);
		c = next;
	}
	if (s->w_ok) {
		if (s->w.ckpt_started) {
			pthread_mutex_lock(&s->w.mu);
			s->w.ckpt_stop = true;
			pthread_cond_signal(&s->w.ckpt_cv);
			pthread_mutex_unlock(&s->w.mu);
			pthread_join(s->w.ckpt_thread, NULL);
		}
		core_close(&s->w.core);
		pthread_cond_destroy(&s->w.turn_cv);
		pthread_cond_destroy(&s->w.done_cv);
		pthread_cond_destroy(&s->w.ckpt_cv);
		pthread_mutex_destroy(&s->w.mu);
	}
	pg_store_close(s->pg);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->commit_lock);
	free(s->path);
	free(s);
}
