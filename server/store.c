/* store.c -- the SQLite backend's core: one connection per thread, WAL,
 * migrations embedded at build time, transactions, and the one statement
 * mechanism every store_X.c uses (store_priv.h).  The SQL of each family lives
 * in its store_X.c.  It must never build SQL from input: every value travels
 * as a bound parameter. */
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
#include "log.h"

/* store.c's own statements; the cache (store_stmt) knows them by address. */
static const char SQL_BEGIN[] = "BEGIN IMMEDIATE";
static const char SQL_COMMIT[] = "COMMIT";
static const char SQL_ROLLBACK[] = "ROLLBACK";
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

struct store_conn {
	struct store      *s;
	sqlite3           *db;
	struct {
		const char   *sql;            /* the key: the address of a static constant */
		sqlite3_stmt *st;
	} stmts[STMT_SLOTS];
	size_t             nstmts;
	struct store_conn *next;          /* in s->conns */
	struct {                          /* the last audit entry the open transaction appended */
		int           set;
		int64_t       seq;
		unsigned char link[STORE_AUDIT_LINK_LEN];
	} audit;
};

struct store {
	char              *path;
	pthread_key_t      key;
	pthread_mutex_t    lock;          /* guards conns */
	struct store_conn *conns;         /* every open connection, to close at store_close */
	pthread_mutex_t    commit_lock;   /* held from an audited COMMIT through the hook */
	store_audit_hook   audit_hook;    /* guarded by commit_lock */
	void              *audit_arg;
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

static void conn_close(struct store_conn *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < STMT_SLOTS; i++)
		sqlite3_finalize(c->stmts[i].st);
	sqlite3_close_v2(c->db);
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

static struct store_conn *conn_open(struct store *s)
{
	struct store_conn *c = calloc(1, sizeof *c);
	if (c == NULL)
		return NULL;
	c->s = s;
	/* One connection per thread: SQLite's own mutexes are not needed. */
	int rc = sqlite3_open_v2(s->path, &c->db,
	    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		log_msg(LOG_ERROR, "cannot open database %s: %s", s->path,
		    c->db != NULL ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
		goto fail;
	}
	sqlite3_extended_result_codes(c->db, 1);
	if (sqlite3_busy_handler(c->db, busy_wait, NULL) != SQLITE_OK)
		goto fail;
	char *msg = NULL;
	if (sqlite3_exec(c->db, conn_pragmas, NULL, NULL, &msg) != SQLITE_OK) {
		log_msg(LOG_ERROR, "database %s: %s", s->path, msg ? msg : "pragma failed");
		sqlite3_free(msg);
		goto fail;
	}
	/* journal_mode answers with the mode it ended up in; insist on wal. */
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(c->db, "PRAGMA journal_mode = WAL", -1, &st, NULL) != SQLITE_OK)
		goto fail;
	int ok = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != NULL &&
	    strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
	sqlite3_finalize(st);
	if (!ok) {
		log_msg(LOG_ERROR, "database %s: cannot switch to WAL mode", s->path);
		goto fail;
	}
	return c;
fail:
	conn_close(c);
	return NULL;
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

sqlite3_stmt *store_stmt(struct store_conn *c, const char *sql)
{
	if (c == NULL || sql == NULL)
		return NULL;
	size_t i = stmt_slot(sql);
	for (; c->stmts[i].sql != NULL; i = (i + 1) & (STMT_SLOTS - 1))
		if (c->stmts[i].sql == sql)
			return c->stmts[i].st;
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
	c->stmts[i].st = st;
	c->nstmts++;
	return st;
}

/* Ready for the next use: reset and drop bound values (which may be secrets). */
void store_stmt_done(sqlite3_stmt *st)
{
	if (st != NULL) {
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
	}
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
enum cs_err store_exec(struct store_conn *c, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	enum cs_err e = rc == SQLITE_DONE ? CS_OK : store_rc_err(rc);
	if (rc == SQLITE_ROW)
		e = CS_EDB;    /* a programming error: this statement returns rows */
	if (e != CS_OK && e != CS_EEXIST && e != CS_EBUSY)
		log_msg(LOG_ERROR, "database: %s", sqlite3_errmsg(c->db));
	store_stmt_done(st);
	return e;
}

enum cs_err store_step(struct store_conn *c, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		return CS_OK;
	if (rc == SQLITE_DONE)
		return CS_ENOENT;
	enum cs_err e = store_rc_err(rc);
	log_msg(LOG_ERROR, "database: %s", sqlite3_errmsg(c->db));
	return e == CS_OK ? CS_EDB : e;
}

int64_t store_changes(struct store_conn *c) { return (int64_t)sqlite3_changes64(c->db); }

static enum cs_err bind_text(sqlite3_stmt *st, int i, const char *v)
{
	if (v == NULL)
		return sqlite3_bind_null(st, i) == SQLITE_OK ? CS_OK : CS_EDB;
	size_t n = strlen(v);
	if (n > STORE_MAX_STR)
		return CS_ETOOBIG;
	return sqlite3_bind_text(st, i, v, (int)n, SQLITE_TRANSIENT) == SQLITE_OK ? CS_OK : CS_EDB;
}

static enum cs_err bind_blob(sqlite3_stmt *st, int i, const void *v, size_t n)
{
	if (n > INT_MAX)
		return CS_ETOOBIG;
	if (v == NULL || n == 0)
		return sqlite3_bind_zeroblob(st, i, 0) == SQLITE_OK ? CS_OK : CS_EDB;
	return sqlite3_bind_blob(st, i, v, (int)n, SQLITE_TRANSIENT) == SQLITE_OK ? CS_OK : CS_EDB;
}

static enum cs_err bind_int64(sqlite3_stmt *st, int i, int64_t v)
{
	return sqlite3_bind_int64(st, i, (sqlite3_int64)v) == SQLITE_OK ? CS_OK : CS_EDB;
}

enum cs_err store_bind(sqlite3_stmt *st, const struct store_val *v, size_t n)
{
	enum cs_err e = CS_OK;
	if (n > INT_MAX)
		e = CS_EINVAL;
	for (size_t k = 0; k < n && e == CS_OK; k++) {
		int i = (int)k + 1;
		switch (v[k].kind) {
		case STORE_VAL_TEXT:
			e = bind_text(st, i, v[k].p);
			break;
		case STORE_VAL_INT:
			e = bind_int64(st, i, v[k].i);
			break;
		case STORE_VAL_BLOB:
			e = bind_blob(st, i, v[k].p, v[k].n);
			break;
		case STORE_VAL_BLOB_OR_NULL:
			e = v[k].p == NULL ? (sqlite3_bind_null(st, i) == SQLITE_OK ? CS_OK : CS_EDB)
			    : bind_blob(st, i, v[k].p, v[k].n);
			break;
		default:
			e = CS_EINVAL;    /* can't happen: the SV_ macros make every value */
			break;
		}
	}
	if (e != CS_OK)
		store_stmt_done(st);
	return e;
}

sqlite3_stmt *store_query(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n, enum cs_err *e)
{
	sqlite3_stmt *st = store_stmt(c, sql);
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
	sqlite3_stmt *st = store_query(c, sql, v, n, &e);
	return st == NULL ? e : store_exec(c, st);
}

/* A malloc'd copy of a text column; NULL column -> *out NULL. */
enum cs_err store_col_text(sqlite3_stmt *st, int i, char **out)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	if (t == NULL) {
		if (sqlite3_errcode(sqlite3_db_handle(st)) == SQLITE_NOMEM)
			return CS_ENOMEM;
		*out = NULL;
		return CS_OK;
	}
	int n = sqlite3_column_bytes(st, i);
	char *p = malloc((size_t)n + 1);
	if (p == NULL)
		return CS_ENOMEM;
	memcpy(p, t, (size_t)n);
	p[n] = '\0';
	*out = p;
	return CS_OK;
}

enum cs_err store_cols_text(sqlite3_stmt *st, const struct store_text_col *cols, size_t n)
{
	enum cs_err e;
	for (size_t k = 0; k < n; k++)
		if ((e = store_col_text(st, cols[k].i, cols[k].out)) != CS_OK)
			return e;
	/* Defensive: NOT NULL columns that come back NULL mean a damaged database. */
	for (size_t k = 0; k < n; k++)
		if (cols[k].required && *cols[k].out == NULL)
			return CS_EDB;
	return CS_OK;
}

enum cs_err store_col_blob(sqlite3_stmt *st, int i, unsigned char **out, size_t *len)
{
	const void *b = sqlite3_column_blob(st, i);
	int n = sqlite3_column_bytes(st, i);
	unsigned char *p = malloc(n > 0 ? (size_t)n : 1);
	if (p == NULL)
		return CS_ENOMEM;
	if (n > 0 && b != NULL)
		memcpy(p, b, (size_t)n);
	*out = p;
	*len = n > 0 ? (size_t)n : 0;
	return CS_OK;
}

enum cs_err store_get(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n, const struct store_row_type *t, void *out)
{
	enum cs_err e;
	sqlite3_stmt *st = store_query(c, sql, v, n, &e);
	if (st == NULL)
		return e;
	if ((e = store_step(c, st)) == CS_OK)
		e = t->read(st, out);
	store_stmt_done(st);
	return e;
}

enum cs_err store_rows(struct store_conn *c, sqlite3_stmt *st, size_t max,
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

/* --- transactions ------------------------------------------------------ */

enum cs_err store_begin(struct store_conn *c)
{
	sqlite3_stmt *st = store_stmt(c, SQL_BEGIN);
	if (st == NULL)
		return CS_EDB;
	c->audit.set = 0;
	return store_exec(c, st);
}

void store_audit_appended(struct store_conn *c, int64_t seq,
    const unsigned char link[STORE_AUDIT_LINK_LEN])
{
	c->audit.set = 1;
	c->audit.seq = seq;
	memcpy(c->audit.link, link, STORE_AUDIT_LINK_LEN);
	/* Can't happen (audit.h: appends run inside a transaction), but if one
	 * ran outside, its row is committed already: publish it now, not never. */
	if (sqlite3_get_autocommit(c->db)) {
		pthread_mutex_lock(&c->s->commit_lock);
		if (c->s->audit_hook != NULL)
			c->s->audit_hook(c->s->audit_arg, seq, link);
		pthread_mutex_unlock(&c->s->commit_lock);
		c->audit.set = 0;
	}
}

void store_set_audit_hook(struct store *s, store_audit_hook fn, void *arg)
{
	pthread_mutex_lock(&s->commit_lock);
	s->audit_hook = fn;
	s->audit_arg = arg;
	pthread_mutex_unlock(&s->commit_lock);
}

/* SECURITY: a transaction that appended audit entries commits under
 * commit_lock and hands its last entry to the hook before the lock is let go.
 * SQLite's writer lock orders the commits; commit_lock keeps the hook calls in
 * that order, so the heads the hook publishes only ever grow -- and it runs
 * before the caller answers anyone, so no acknowledged entry goes unpublished. */
/* consentd_db_commit_seconds and _batch_size: one transaction a COMMIT today
 * (a group-commit writer will observe the batches it makes). */
static void count_commit(const struct timespec *t0, enum cs_err e)
{
	struct timespec t1;
	if (e != CS_OK)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	metrics_observe(metric[M_DB_COMMIT_SECONDS], NULL, (double)(t1.tv_sec - t0->tv_sec) +
	    (double)(t1.tv_nsec - t0->tv_nsec) / 1e9);
	metrics_observe(metric[M_DB_COMMIT_BATCH], NULL, 1);
}

enum cs_err store_commit(struct store_conn *c)
{
	sqlite3_stmt *st = store_stmt(c, SQL_COMMIT);
	struct timespec t0;
	enum cs_err e;
	if (st == NULL)
		return CS_EDB;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!c->audit.set) {
		e = store_exec(c, st);
		count_commit(&t0, e);
		return e;
	}
	pthread_mutex_lock(&c->s->commit_lock);
	e = store_exec(c, st);
	if (e == CS_OK) {
		c->audit.set = 0;
		if (c->s->audit_hook != NULL)
			c->s->audit_hook(c->s->audit_arg, c->audit.seq, c->audit.link);
	}
	pthread_mutex_unlock(&c->s->commit_lock);
	count_commit(&t0, e);
	return e;
}

void store_rollback(struct store_conn *c)
{
	if (c != NULL)
		c->audit.set = 0;
	if (c == NULL || c->db == NULL || sqlite3_get_autocommit(c->db))
		return;
	sqlite3_stmt *st = store_stmt(c, SQL_ROLLBACK);
	if (st == NULL)
		return;
	sqlite3_step(st);
	store_stmt_done(st);
}

enum cs_err store_ping(struct store_conn *c)
{
	sqlite3_stmt *st = store_stmt(c, SQL_PING);
	if (st == NULL)
		return CS_EDB;
	int rc = sqlite3_step(st);
	enum cs_err e = rc == SQLITE_ROW && sqlite3_column_int(st, 0) == 1 ? CS_OK : CS_EDB;
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

	if (c == NULL || c->db == NULL || dest_path == NULL)
		return CS_EINVAL;
	rc = sqlite3_open_v2(dest_path, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		log_msg(LOG_ERROR, "backup %s: %s", dest_path,
		    dst != NULL ? sqlite3_errmsg(dst) : sqlite3_errstr(rc));
		goto out;
	}
	if ((b = sqlite3_backup_init(dst, "main", c->db, "main")) == NULL) {
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
static int migration_version(const char *name)
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

int store_schema_known(void)
{
	int max = 0;
	for (const struct embedded_file *f = embedded_migrations; f->name != NULL; f++) {
		int v = migration_version(f->name);
		if (v > max)
			max = v;
	}
	return max;
}

enum cs_err store_schema_version(struct store_conn *c, int *out)
{
	if (out == NULL)
		return CS_EINVAL;
	sqlite3_stmt *st = store_stmt(c, SQL_SCHEMA_MAX);
	if (st == NULL)
		return CS_EDB;
	enum cs_err e = CS_EDB;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		sqlite3_int64 v = sqlite3_column_int64(st, 0);
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
	sqlite3_stmt *st;

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
	if (sqlite3_exec(c->db, f->data, NULL, NULL, &msg) != SQLITE_OK) {
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

	if (sqlite3_exec(c->db, schema_version_sql, NULL, NULL, &msg) != SQLITE_OK) {
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
		int v = migration_version(f->name);
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

enum cs_err store_open(const char *path, struct store **out)
{
	enum cs_err e = CS_ENOMEM;
	struct store *s = NULL;
	int key_ok = 0, lock_ok = 0, commit_lock_ok = 0;

	if (path == NULL || path[0] == '\0' || out == NULL)
		return CS_EINVAL;
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
	struct store_conn *c = store_conn(s);
	if (c == NULL) {
		e = CS_EDB;
		goto out;
	}
	e = migrate(c);
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
	 * worker threads must have been joined (or stopped using s) by now. */
	struct store_conn *mine = pthread_getspecific(s->key);
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
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->commit_lock);
	free(s->path);
	free(s);
}
