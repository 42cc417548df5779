/* store.c -- the only door to SQL: one SQLite connection per thread, WAL,
 * migrations embedded at build time, statements fixed up front in one table.
 * It must never build SQL from input: every value travels as a bound parameter. */
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
#include "store.h"
#include "store_priv.h"
#include "log.h"

/* Every statement consentd runs, by index (kcgi/sqlbox style).  Prepared on a
 * connection at first use and kept there. */
enum stmt {
	STMT_BEGIN,
	STMT_COMMIT,
	STMT_ROLLBACK,
	STMT_PING,
	STMT_SCHEMA_MAX,
	STMT_SCHEMA_HAS,
	STMT_SCHEMA_INSERT,
	STMT_KEY_INSERT,
	STMT_KEYS_LIST,
	STMT_KEY_RETIRE,
	STMT_KEY_REVOKE,
	STMT_USER_UPSERT,
	STMT_SESSION_INSERT,
	STMT_SESSION_GET,
	STMT_SESSION_TOUCH,
	STMT_SESSION_DELETE,
	STMT_LOGIN_INSERT,
	STMT_LOGIN_TAKE,
	STMT_LOGIN_LIVE_ADDR,
	STMT_LOGIN_LIVE_ALL,
	STMT_LOGIN_LIVE_BROWSER,
	STMT_LOGIN_DELETE_BROWSER,
	STMT_PURGE_LOGINS,
	STMT_PURGE_SESSIONS,
	STMT__MAX
};

static const char *const stmt_sql[STMT__MAX] = {
	[STMT_BEGIN] = "BEGIN IMMEDIATE",
	[STMT_COMMIT] = "COMMIT",
	[STMT_ROLLBACK] = "ROLLBACK",
	[STMT_PING] = "SELECT 1",
	[STMT_SCHEMA_MAX] = "SELECT coalesce(max(version), 0) FROM schema_version",
	[STMT_SCHEMA_HAS] = "SELECT 1 FROM schema_version WHERE version = ?1",
	[STMT_SCHEMA_INSERT] = "INSERT INTO schema_version (version, applied_at) VALUES (?1, ?2)",
	[STMT_KEY_INSERT] =
	    "INSERT INTO signing_keys (kid, alg, created_at, sign_after, retired_at, "
	    "revoked_at, master_kid, sealed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
	[STMT_KEYS_LIST] =
	    "SELECT kid, alg, created_at, sign_after, retired_at, revoked_at, master_kid, sealed "
	    "FROM signing_keys WHERE revoked_at = 0 ORDER BY created_at ASC, rowid ASC",
	[STMT_KEY_RETIRE] = "UPDATE signing_keys SET retired_at = ?2 WHERE kid = ?1 AND revoked_at = 0",
	[STMT_KEY_REVOKE] = "UPDATE signing_keys SET revoked_at = ?2 WHERE kid = ?1 AND revoked_at = 0",
	[STMT_USER_UPSERT] =
	    "INSERT INTO users (issuer, subject, name, email, created_at, last_login_at) "
	    "VALUES (?1, ?2, ?3, ?4, ?5, ?5) ON CONFLICT (issuer, subject) DO UPDATE SET "
	    "name = excluded.name, email = excluded.email, last_login_at = excluded.last_login_at "
	    "RETURNING id",
	[STMT_SESSION_INSERT] =
	    "INSERT INTO sessions (id_hash, user_id, csrf, created_at, last_seen_at, auth_time, "
	    "admin_claim) VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6)",
	[STMT_SESSION_GET] =
	    "SELECT s.user_id, u.issuer, u.subject, u.name, u.email, s.csrf, s.created_at, "
	    "s.last_seen_at, s.auth_time, s.admin_claim FROM sessions s JOIN users u ON u.id = s.user_id "
	    "WHERE s.id_hash = ?1",
	[STMT_SESSION_TOUCH] = "UPDATE sessions SET last_seen_at = ?2 WHERE id_hash = ?1",
	[STMT_SESSION_DELETE] = "DELETE FROM sessions WHERE id_hash = ?1",
	[STMT_LOGIN_INSERT] =
	    "INSERT INTO login_states (state_hash, browser_hash, nonce, code_verifier, return_to, "
	    "max_age, created_at, expires_at, addr_hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
	[STMT_LOGIN_TAKE] =
	    "DELETE FROM login_states WHERE state_hash = ?1 RETURNING browser_hash, nonce, "
	    "code_verifier, return_to, max_age, created_at, expires_at",
	/* The live states (expires_at > now) of one address, and of all, counted
	 * no further than the limit (?3, ?2), with the soonest expiry among them:
	 * both walk an index (addr_hash, expires_at) or (expires_at), never the table. */
	[STMT_LOGIN_LIVE_ADDR] =
	    "SELECT count(*), coalesce(min(expires_at), 0) FROM (SELECT expires_at FROM login_states "
	    "WHERE addr_hash = ?1 AND expires_at > ?2 ORDER BY expires_at LIMIT ?3)",
	[STMT_LOGIN_LIVE_ALL] =
	    "SELECT count(*), coalesce(min(expires_at), 0) FROM (SELECT expires_at FROM login_states "
	    "WHERE expires_at > ?1 ORDER BY expires_at LIMIT ?2)",
	[STMT_LOGIN_LIVE_BROWSER] =
	    "SELECT count(*) FROM login_states WHERE browser_hash = ?1 AND expires_at > ?2",
	[STMT_LOGIN_DELETE_BROWSER] = "DELETE FROM login_states WHERE browser_hash = ?1",
	[STMT_PURGE_LOGINS] = "DELETE FROM login_states WHERE expires_at <= ?1",
	[STMT_PURGE_SESSIONS] =
	    "DELETE FROM sessions WHERE last_seen_at < ?1 - ?2 OR created_at < ?1 - ?3",
};

/* Created by store.c, not by a migration: it records the migrations. */
static const char schema_version_sql[] =
    "CREATE TABLE IF NOT EXISTS schema_version ("
    "version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)";

static const char conn_pragmas[] =
    "PRAGMA foreign_keys = ON;"
    "PRAGMA synchronous = FULL;";

struct store_conn {
	struct store      *s;
	sqlite3           *db;
	sqlite3_stmt      *stmt[STMT__MAX];
	struct {                          /* statements of the other store_*.c files */
		const char   *sql;            /* keyed by the address of their SQL constant */
		sqlite3_stmt *st;
	} extra[STORE_MAX_EXTRA];
	size_t             nextra;
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
	for (size_t i = 0; i < STMT__MAX; i++)
		sqlite3_finalize(c->stmt[i]);
	for (size_t i = 0; i < c->nextra; i++)
		sqlite3_finalize(c->extra[i].st);
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

/* --- statements -------------------------------------------------------- */

/* The cached statement for idx, prepared on first use. */
static sqlite3_stmt *stmt_get(struct store_conn *c, enum stmt idx)
{
	if (c == NULL || (unsigned)idx >= STMT__MAX)
		return NULL;
	if (c->stmt[idx] == NULL &&
	    sqlite3_prepare_v3(c->db, stmt_sql[idx], -1, SQLITE_PREPARE_PERSISTENT,
	    &c->stmt[idx], NULL) != SQLITE_OK) {
		log_msg(LOG_ERROR, "cannot prepare statement %d: %s", (int)idx,
		    sqlite3_errmsg(c->db));
		c->stmt[idx] = NULL;
		return NULL;
	}
	return c->stmt[idx];
}

/* Ready for the next use: reset and drop bound values (which may be secrets). */
static void stmt_done(sqlite3_stmt *st)
{
	if (st != NULL) {
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
	}
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
static enum cs_err stmt_exec(struct store_conn *c, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	enum cs_err e = rc == SQLITE_DONE ? CS_OK : rc_err(rc);
	if (rc == SQLITE_ROW)
		e = CS_EDB;    /* a programming error: this statement returns rows */
	if (e != CS_OK && e != CS_EEXIST && e != CS_EBUSY)
		log_msg(LOG_ERROR, "database: %s", sqlite3_errmsg(c->db));
	stmt_done(st);
	return e;
}

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

/* A malloc'd copy of a text column; NULL column -> *out NULL. */
static enum cs_err col_text(sqlite3_stmt *st, int i, char **out)
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

static enum cs_err col_blob(sqlite3_stmt *st, int i, unsigned char **out, size_t *len)
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

/* --- transactions ------------------------------------------------------ */

enum cs_err store_begin(struct store_conn *c)
{
	sqlite3_stmt *st = stmt_get(c, STMT_BEGIN);
	if (st == NULL)
		return CS_EDB;
	c->audit.set = 0;
	return stmt_exec(c, st);
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
enum cs_err store_commit(struct store_conn *c)
{
	sqlite3_stmt *st = stmt_get(c, STMT_COMMIT);
	enum cs_err e;
	if (st == NULL)
		return CS_EDB;
	if (!c->audit.set)
		return stmt_exec(c, st);
	pthread_mutex_lock(&c->s->commit_lock);
	e = stmt_exec(c, st);
	if (e == CS_OK) {
		c->audit.set = 0;
		if (c->s->audit_hook != NULL)
			c->s->audit_hook(c->s->audit_arg, c->audit.seq, c->audit.link);
	}
	pthread_mutex_unlock(&c->s->commit_lock);
	return e;
}

void store_rollback(struct store_conn *c)
{
	if (c != NULL)
		c->audit.set = 0;
	if (c == NULL || c->db == NULL || sqlite3_get_autocommit(c->db))
		return;
	sqlite3_stmt *st = stmt_get(c, STMT_ROLLBACK);
	if (st == NULL)
		return;
	sqlite3_step(st);
	stmt_done(st);
}

enum cs_err store_ping(struct store_conn *c)
{
	sqlite3_stmt *st = stmt_get(c, STMT_PING);
	if (st == NULL)
		return CS_EDB;
	int rc = sqlite3_step(st);
	enum cs_err e = rc == SQLITE_ROW && sqlite3_column_int(st, 0) == 1 ? CS_OK : CS_EDB;
	stmt_done(st);
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
	sqlite3_stmt *st = stmt_get(c, STMT_SCHEMA_MAX);
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
		e = rc_err(rc) == CS_OK ? CS_EDB : rc_err(rc);
	}
	stmt_done(st);
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
	e = CS_EDB;
	if ((st = stmt_get(c, STMT_SCHEMA_HAS)) == NULL)
		goto out;
	if ((e = bind_int64(st, 1, version)) != CS_OK) {
		stmt_done(st);
		goto out;
	}
	int rc = sqlite3_step(st);
	stmt_done(st);
	if (rc == SQLITE_ROW) {           /* already there */
		e = store_commit(c);
		goto out;
	}
	if (rc != SQLITE_DONE) {
		e = rc_err(rc) == CS_OK ? CS_EDB : rc_err(rc);
		goto out;
	}
	if (sqlite3_exec(c->db, f->data, NULL, NULL, &msg) != SQLITE_OK) {
		log_msg(LOG_ERROR, "migration %s failed: %s", f->name, msg ? msg : "?");
		e = CS_EDB;
		goto out;
	}
	e = CS_EDB;
	if ((st = stmt_get(c, STMT_SCHEMA_INSERT)) == NULL)
		goto out;
	if ((e = bind_int64(st, 1, version)) != CS_OK ||
	    (e = bind_int64(st, 2, (int64_t)time(NULL))) != CS_OK) {
		stmt_done(st);
		goto out;
	}
	if ((e = stmt_exec(c, st)) != CS_OK)
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

/* --- signing keys ------------------------------------------------------ */

void store_key_clear(struct store_key *k)
{
	if (k == NULL)
		return;
	free(k->kid);
	free(k->alg);
	free(k->master_kid);
	free(k->sealed);
	memset(k, 0, sizeof *k);
}

void store_keys_free(struct store_key *ks, size_t n)
{
	if (ks == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		store_key_clear(&ks[i]);
	free(ks);
}

enum cs_err store_key_insert(struct store_conn *c, const struct store_key *k)
{
	enum cs_err e = CS_EINVAL;
	if (k == NULL || k->kid == NULL || k->alg == NULL || k->master_kid == NULL ||
	    k->sealed == NULL || k->sealed_len == 0)
		return CS_EINVAL;
	sqlite3_stmt *st = stmt_get(c, STMT_KEY_INSERT);
	if (st == NULL)
		return CS_EDB;
	if ((e = bind_text(st, 1, k->kid)) != CS_OK ||
	    (e = bind_text(st, 2, k->alg)) != CS_OK ||
	    (e = bind_int64(st, 3, k->created_at)) != CS_OK ||
	    (e = bind_int64(st, 4, k->sign_after)) != CS_OK ||
	    (e = bind_int64(st, 5, k->retired_at)) != CS_OK ||
	    (e = bind_int64(st, 6, k->revoked_at)) != CS_OK ||
	    (e = bind_text(st, 7, k->master_kid)) != CS_OK ||
	    (e = bind_blob(st, 8, k->sealed, k->sealed_len)) != CS_OK) {
		stmt_done(st);
		return e;
	}
	return stmt_exec(c, st);
}

enum cs_err store_keys_list(struct store_conn *c, struct store_key **out, size_t *n)
{
	enum cs_err e = CS_EDB;
	struct store_key *ks = NULL;
	size_t len = 0, cap = 0;

	if (out == NULL || n == NULL)
		return CS_EINVAL;
	sqlite3_stmt *st = stmt_get(c, STMT_KEYS_LIST);
	if (st == NULL)
		return CS_EDB;
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 4;
			if (ncap > SIZE_MAX / sizeof *ks) {
				e = CS_ENOMEM;
				goto out;
			}
			struct store_key *p = realloc(ks, ncap * sizeof *ks);
			if (p == NULL) {
				e = CS_ENOMEM;
				goto out;
			}
			ks = p;
			cap = ncap;
		}
		struct store_key *k = &ks[len++];
		memset(k, 0, sizeof *k);
		if ((e = col_text(st, 0, &k->kid)) != CS_OK ||
		    (e = col_text(st, 1, &k->alg)) != CS_OK ||
		    (e = col_text(st, 6, &k->master_kid)) != CS_OK ||
		    (e = col_blob(st, 7, &k->sealed, &k->sealed_len)) != CS_OK)
			goto out;
		if (k->kid == NULL || k->alg == NULL || k->master_kid == NULL) {
			e = CS_EDB;
			goto out;
		}
		k->created_at = sqlite3_column_int64(st, 2);
		k->sign_after = sqlite3_column_int64(st, 3);
		k->retired_at = sqlite3_column_int64(st, 4);
		k->revoked_at = sqlite3_column_int64(st, 5);
	}
	if (rc != SQLITE_DONE) {
		e = rc_err(rc) == CS_OK ? CS_EDB : rc_err(rc);
		goto out;
	}
	*out = len > 0 ? ks : NULL;
	*n = len;
	if (len == 0)
		free(ks);
	ks = NULL;
	len = 0;
	e = CS_OK;
out:
	stmt_done(st);
	store_keys_free(ks, len);
	return e;
}

static enum cs_err key_set_time(struct store_conn *c, enum stmt idx, const char *kid, int64_t at)
{
	enum cs_err e;
	if (kid == NULL || at <= 0)
		return CS_EINVAL;
	sqlite3_stmt *st = stmt_get(c, idx);
	if (st == NULL)
		return CS_EDB;
	if ((e = bind_text(st, 1, kid)) != CS_OK || (e = bind_int64(st, 2, at)) != CS_OK) {
		stmt_done(st);
		return e;
	}
	e = stmt_exec(c, st);
	if (e == CS_OK && sqlite3_changes(c->db) == 0)
		e = CS_ENOENT;
	return e;
}

enum cs_err store_key_set_retired(struct store_conn *c, const char *kid, int64_t at)
{
	return key_set_time(c, STMT_KEY_RETIRE, kid, at);
}

enum cs_err store_key_set_revoked(struct store_conn *c, const char *kid, int64_t at)
{
	return key_set_time(c, STMT_KEY_REVOKE, kid, at);
}

/* --- users, sessions, login states ------------------------------------- */

enum cs_err store_user_upsert(struct store_conn *c, const char *issuer, const char *subject,
    const char *name, const char *email, int64_t now, int64_t *id)
{
	enum cs_err e;
	int rc;
	sqlite3_stmt *st = stmt_get(c, STMT_USER_UPSERT);
	if (st == NULL)
		return CS_EDB;
	if ((e = bind_text(st, 1, issuer)) != CS_OK || (e = bind_text(st, 2, subject)) != CS_OK ||
	    (e = bind_text(st, 3, name)) != CS_OK || (e = bind_text(st, 4, email)) != CS_OK ||
	    (e = bind_int64(st, 5, now)) != CS_OK)
		goto out;
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		e = rc_err(rc) == CS_OK ? CS_EDB : rc_err(rc);
		goto out;
	}
	*id = sqlite3_column_int64(st, 0);
	e = CS_OK;
out:
	stmt_done(st);
	return e;
}

void store_session_clear(struct store_session *s)
{
	if (s == NULL)
		return;
	free(s->issuer);
	free(s->subject);
	free(s->name);
	free(s->email);
	OPENSSL_cleanse(s, sizeof *s);
}

enum cs_err store_session_insert(struct store_conn *c, const unsigned char id_hash[32],
    int64_t user_id, const char *csrf, int64_t now, int64_t auth_time, int admin_claim)
{
	enum cs_err e;
	sqlite3_stmt *st = stmt_get(c, STMT_SESSION_INSERT);
	if (st == NULL)
		return CS_EDB;
	if ((e = bind_blob(st, 1, id_hash, 32)) != CS_OK || (e = bind_int64(st, 2, user_id)) != CS_OK ||
	    (e = bind_text(st, 3, csrf)) != CS_OK || (e = bind_int64(st, 4, now)) != CS_OK ||
	    (e = bind_int64(st, 5, auth_time)) != CS_OK ||
	    (e = bind_int64(st, 6, admin_claim ? 1 : 0)) != CS_OK) {
		stmt_done(st);
		return e;
	}
	return stmt_exec(c, st);
}

enum cs_err store_session_get(struct store_conn *c, const unsigned char id_hash[32],
    struct store_session *out)
{
	enum cs_err e;
	int rc;
	char *csrf = NULL;
	struct store_session s;
	sqlite3_stmt *st = stmt_get(c, STMT_SESSION_GET);
	memset(&s, 0, sizeof s);
	if (st == NULL)
		return CS_EDB;
	if ((e = bind_blob(st, 1, id_hash, 32)) != CS_OK)
		goto out;
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		e = CS_ENOENT;
		goto out;
	} else if (rc != SQLITE_ROW) {
		e = rc_err(rc) == CS_OK ? CS_EDB : rc_err(rc);
		goto out;
	}
	s.user_id = sqlite3_column_int64(st, 0);
	if ((e = col_text(st, 1, &s.issuer)) != CS_OK || (e = col_text(st, 2, &s.subject)) != CS_OK ||
	    (e = col_text(st, 3, &s.name)) != CS_OK || (e = col_text(st, 4, &s.email)) != CS_OK ||
	    (e = col_text(st, 5, &csrf)) != CS_OK)
		goto out;
	if (csrf == NULL || strlen(csrf) >= sizeof s.csrf || s.issuer == NULL || s.subject == NULL) {
		e = CS_EDB;
		goto out;
	}
	memcpy(s.csrf, csrf, strlen(csrf) + 1);
	s.created_at = sqlite3_column_int64(st, 6);
	s.last_seen_at = sqlite3_column_int64(st, 7);
	s.auth_time = sqlite3_column_int64(st, 8);
	s.admin_claim = sqlite3_column_int(st, 9) != 0;
	*out = s;
	memset(&s, 0, sizeof s);
	e = CS_OK;
out:
	stmt_done(st);
	if (csrf) {
		OPENSSL_cleanse(csrf, strlen(csrf));
		free(csrf);
	}
	store_session_clear(&s);
	return e;
}

static enum cs_err session_by_hash(struct store_conn *c, enum stmt idx,
    const unsigned char id_hash[32], int64_t now, int with_time)
{
	enum cs_err e;
	sqlite3_stmt *st = stmt_get(c, idx);
	if (st == NULL)
		return CS_EDB;
	if ((e = bind_blob(st, 1, id_hash, 32)) != CS_OK ||
	    (with_time && (e = bind_int64(st, 2, now)) != CS_OK)) {
		stmt_done(st);
		return e;
	}
	return stmt_exec(c, st);
}

enum cs_err store_session_touch(struct store_conn *c, const unsigned char id_hash[32], int64_t now)
{
	return session_by_hash(c, STMT_SESSION_TOUCH, id_hash, now, 1);
}

enum cs_err store_session_delete(struct store_conn *c, const unsigned char id_hash[32])
{
	return session_by_hash(c, STMT_SESSION_DELETE, id_hash, 0, 0);
}

void store_login_state_clear(struct store_login_state *s)
{
	if (s == NULL)
		return;
	if (s->nonce) {
		OPENSSL_cleanse(s->nonce, strlen(s->nonce));
		free(s->nonce);
	}
	if (s->code_verifier) {
		OPENSSL_cleanse(s->code_verifier, strlen(s->code_verifier));
		free(s->code_verifier);
	}
	free(s->return_to);
	OPENSSL_cleanse(s, sizeof *s);
}

enum cs_err store_login_state_insert(struct store_conn *c, const struct store_login_state *s)
{
	enum cs_err e;
	sqlite3_stmt *st = stmt_get(c, STMT_LOGIN_INSERT);
	if (st == NULL)
		return CS_EDB;
	if ((e = bind_blob(st, 1, s->state_hash, 32)) != CS_OK ||
	    (e = bind_blob(st, 2, s->browser_hash, 32)) != CS_OK ||
	    (e = bind_text(st, 3, s->nonce)) != CS_OK ||
	    (e = bind_text(st, 4, s->code_verifier)) != CS_OK ||
	    (e = bind_text(st, 5, s->return_to)) != CS_OK ||
	    (e = bind_int64(st, 6, s->max_age)) != CS_OK ||
	    (e = bind_int64(st, 7, s->created_at)) != CS_OK ||
	    (e = bind_int64(st, 8, s->expires_at)) != CS_OK ||
	    (e = bind_blob(st, 9, s->addr_hash, 32)) != CS_OK) {
		stmt_done(st);
		return e;
	}
	return stmt_exec(c, st);
}

/* Runs a counting statement already bound: *n = column 0, *soonest = column 1
 * when asked for. */
static enum cs_err login_count(struct store_conn *c, sqlite3_stmt *st, int64_t *n, int64_t *soonest)
{
	enum cs_err e = store_step(c, st);
	if (e == CS_OK) {
		*n = sqlite3_column_int64(st, 0);
		if (soonest != NULL)
			*soonest = sqlite3_column_int64(st, 1);
	} else if (e == CS_ENOENT) {
		e = CS_EDB;                   /* an aggregate always returns its row */
	}
	stmt_done(st);
	return e;
}

/* How many live states the address and everyone hold, each counted to at most
 * its limit plus mine; mine = the live states of browser hash replaces (0 for
 * NULL).  The soonest expiry among each count goes to addr_free / all_free. */
static enum cs_err login_live(struct store_conn *c, const unsigned char addr_hash[32],
    const unsigned char *replaces, const struct store_login_limits *lim, int64_t *mine,
    int64_t *addr, int64_t *addr_free, int64_t *all, int64_t *all_free)
{
	enum cs_err e;
	sqlite3_stmt *st;
	*mine = 0;
	if (replaces != NULL) {
		if ((st = stmt_get(c, STMT_LOGIN_LIVE_BROWSER)) == NULL)
			return CS_EDB;
		if ((e = bind_blob(st, 1, replaces, 32)) != CS_OK ||
		    (e = bind_int64(st, 2, lim->now)) != CS_OK) {
			stmt_done(st);
			return e;
		}
		if ((e = login_count(c, st, mine, NULL)) != CS_OK)
			return e;
	}
	if ((st = stmt_get(c, STMT_LOGIN_LIVE_ADDR)) == NULL)
		return CS_EDB;
	if ((e = bind_blob(st, 1, addr_hash, 32)) != CS_OK ||
	    (e = bind_int64(st, 2, lim->now)) != CS_OK ||
	    (e = bind_int64(st, 3, lim->per_address + *mine)) != CS_OK) {
		stmt_done(st);
		return e;
	}
	if ((e = login_count(c, st, addr, addr_free)) != CS_OK)
		return e;
	if ((st = stmt_get(c, STMT_LOGIN_LIVE_ALL)) == NULL)
		return CS_EDB;
	if ((e = bind_int64(st, 1, lim->now)) != CS_OK ||
	    (e = bind_int64(st, 2, lim->total + *mine)) != CS_OK) {
		stmt_done(st);
		return e;
	}
	return login_count(c, st, all, all_free);
}

/* The verdict on counts that already leave out the browser's own states. */
static enum store_login_admit login_verdict(const struct store_login_limits *lim, int64_t addr,
    int64_t addr_free, int64_t all, int64_t all_free, int64_t *free_at)
{
	if (addr >= lim->per_address) {
		*free_at = addr_free;
		return STORE_LOGIN_ADDRESS_FULL;
	}
	if (all >= lim->total) {
		*free_at = all_free;
		return STORE_LOGIN_ALL_FULL;
	}
	*free_at = 0;
	return STORE_LOGIN_ADMITTED;
}

enum cs_err store_login_state_admit(struct store_conn *c, const struct store_login_state *s,
    const struct store_login_limits *lim, enum store_login_admit *out, int64_t *free_at)
{
	enum cs_err e;
	enum store_login_admit v;
	int64_t mine, addr, addr_free, all, all_free, at;
	sqlite3_stmt *st;

	if (lim->per_address < 1 || lim->total < 1)
		return CS_EINVAL;
	/* 1. A look without the write lock: a flood from one address is refused
	 *    here, by reads alone, so it cannot queue up in front of the writers
	 *    (token issuance).  The browser's own states do not count: they are
	 *    about to be replaced.  Its counts can only be too low (mine may lie at
	 *    another address), never too high, so it refuses only what step 2 would. */
	if ((e = login_live(c, s->addr_hash, lim->replaces, lim, &mine, &addr, &addr_free, &all,
	    &all_free)) != CS_OK)
		return e;
	v = login_verdict(lim, addr - mine, addr_free, all - mine, all_free, &at);
	if (v != STORE_LOGIN_ADMITTED)
		goto done;
	/* 2. SECURITY: the decision that counts: the browser's earlier states go,
	 *    then count and insert in one IMMEDIATE transaction, so concurrent
	 *    starts cannot both take the last place.  Refused: rolled back, so a
	 *    refused start has written (and deleted) nothing. */
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if (lim->replaces != NULL) {
		if ((st = stmt_get(c, STMT_LOGIN_DELETE_BROWSER)) == NULL) {
			e = CS_EDB;
			goto fail;
		}
		if ((e = bind_blob(st, 1, lim->replaces, 32)) != CS_OK) {
			stmt_done(st);
			goto fail;
		}
		if ((e = stmt_exec(c, st)) != CS_OK)
			goto fail;
	}
	if ((e = login_live(c, s->addr_hash, NULL, lim, &mine, &addr, &addr_free, &all,
	    &all_free)) != CS_OK)
		goto fail;
	v = login_verdict(lim, addr, addr_free, all, all_free, &at);
	if (v != STORE_LOGIN_ADMITTED) {
		store_rollback(c);
		goto done;
	}
	if ((e = store_login_state_insert(c, s)) != CS_OK || (e = store_commit(c)) != CS_OK)
		goto fail;
done:
	*out = v;
	*free_at = at;
	return CS_OK;
fail:
	store_rollback(c);
	return e;
}

enum cs_err store_login_state_take(struct store_conn *c, const unsigned char state_hash[32],
    struct store_login_state *out)
{
	enum cs_err e;
	int rc;
	unsigned char *bh = NULL;
	size_t bhlen = 0;
	struct store_login_state s;
	sqlite3_stmt *st = stmt_get(c, STMT_LOGIN_TAKE);
	memset(&s, 0, sizeof s);
	if (st == NULL)
		return CS_EDB;
	if ((e = bind_blob(st, 1, state_hash, 32)) != CS_OK)
		goto out;
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		e = CS_ENOENT;
		goto out;
	} else if (rc != SQLITE_ROW) {
		e = rc_err(rc) == CS_OK ? CS_EDB : rc_err(rc);
		goto out;
	}
	if ((e = col_blob(st, 0, &bh, &bhlen)) != CS_OK || (e = col_text(st, 1, &s.nonce)) != CS_OK ||
	    (e = col_text(st, 2, &s.code_verifier)) != CS_OK ||
	    (e = col_text(st, 3, &s.return_to)) != CS_OK)
		goto out;
	if (bhlen != 32 || s.nonce == NULL || s.code_verifier == NULL || s.return_to == NULL) {
		e = CS_EDB;
		goto out;
	}
	memcpy(s.state_hash, state_hash, 32);
	memcpy(s.browser_hash, bh, 32);
	s.max_age = sqlite3_column_int64(st, 4);
	s.created_at = sqlite3_column_int64(st, 5);
	s.expires_at = sqlite3_column_int64(st, 6);
	/* Finish the statement so the DELETE really happens (RETURNING runs it). */
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE) {
		e = rc_err(rc) == CS_OK ? CS_EDB : rc_err(rc);
		goto out;
	}
	*out = s;
	memset(&s, 0, sizeof s);
	e = CS_OK;
out:
	stmt_done(st);
	free(bh);
	store_login_state_clear(&s);
	return e;
}

enum cs_err store_purge_expired(struct store_conn *c, int64_t now, int64_t idle, int64_t absolute)
{
	enum cs_err e;
	sqlite3_stmt *st = stmt_get(c, STMT_PURGE_LOGINS);
	if (st == NULL)
		return CS_EDB;
	if ((e = bind_int64(st, 1, now)) != CS_OK) {
		stmt_done(st);
		return e;
	}
	if ((e = stmt_exec(c, st)) != CS_OK)
		return e;
	if ((st = stmt_get(c, STMT_PURGE_SESSIONS)) == NULL)
		return CS_EDB;
	if ((e = bind_int64(st, 1, now)) != CS_OK || (e = bind_int64(st, 2, idle)) != CS_OK ||
	    (e = bind_int64(st, 3, absolute)) != CS_OK) {
		stmt_done(st);
		return e;
	}
	return stmt_exec(c, st);
}

/* --- for the other store_*.c files (store_priv.h) ----------------------- */

sqlite3_stmt *store_stmt(struct store_conn *c, const char *sql)
{
	if (c == NULL)
		return NULL;
	for (size_t i = 0; i < c->nextra; i++)
		if (c->extra[i].sql == sql)
			return c->extra[i].st;
	if (c->nextra == STORE_MAX_EXTRA) {
		log_msg(LOG_ERROR, "too many prepared statements (raise STORE_MAX_EXTRA)");
		return NULL;
	}
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK) {
		log_msg(LOG_ERROR, "cannot prepare statement: %s", sqlite3_errmsg(c->db));
		return NULL;
	}
	c->extra[c->nextra].sql = sql;
	c->extra[c->nextra].st = st;
	c->nextra++;
	return st;
}

enum cs_err store_rows(struct store_conn *c, sqlite3_stmt *st, size_t max, size_t elem,
    enum cs_err (*read_row)(sqlite3_stmt *st, void *row),
    void (*free_rows)(void *rows, size_t n), void **out, size_t *n)
{
	enum cs_err e = CS_OK;
	unsigned char *v = NULL;
	size_t nv = 0;
	if (max > 0 && (v = calloc(max, elem)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	while (nv < max && (e = store_step(c, st)) == CS_OK) {
		if ((e = read_row(st, v + nv * elem)) != CS_OK)
			goto out;
		nv++;
	}
	if (e == CS_ENOENT || nv == max)
		e = CS_OK;
out:
	stmt_done(st);
	if (e != CS_OK) {
		free_rows(v, nv);
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

void store_stmt_done(sqlite3_stmt *st) { stmt_done(st); }
enum cs_err store_exec(struct store_conn *c, sqlite3_stmt *st) { return stmt_exec(c, st); }
enum cs_err store_rc_err(int rc) { return rc_err(rc); }
enum cs_err store_bind_text(sqlite3_stmt *st, int i, const char *v) { return bind_text(st, i, v); }
enum cs_err store_bind_blob(sqlite3_stmt *st, int i, const void *v, size_t n) { return bind_blob(st, i, v, n); }
enum cs_err store_bind_int64(sqlite3_stmt *st, int i, int64_t v) { return bind_int64(st, i, v); }
enum cs_err store_col_text(sqlite3_stmt *st, int i, char **out) { return col_text(st, i, out); }
enum cs_err store_col_blob(sqlite3_stmt *st, int i, unsigned char **out, size_t *len)
{
	return col_blob(st, i, out, len);
}
int64_t store_changes(struct store_conn *c) { return (int64_t)sqlite3_changes64(c->db); }

enum cs_err store_step(struct store_conn *c, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		return CS_OK;
	if (rc == SQLITE_DONE)
		return CS_ENOENT;
	enum cs_err e = rc_err(rc);
	log_msg(LOG_ERROR, "database: %s", sqlite3_errmsg(c->db));
	return e == CS_OK ? CS_EDB : e;
}
