/* store.c -- the store's one dispatcher: it picks the engine a location
 * names (store_backend.h: SQLite, store_sqlite.c; PostgreSQL, store_pg.c),
 * keeps each thread's connection, refuses nested transactions, publishes the
 * audit entries commits made durable, and runs the one statement mechanism
 * every store_X.c uses (store_priv.h) on whichever engine that is.  It holds
 * no SQL and asks no engine question beyond choosing the engine at open:
 * everything engine-specific is a call through store_backend. */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "embed.h"
#include "log.h"
#include "store.h"
#include "store_backend.h"
#include "store_priv.h"

/* The engines, asked in this order whether a location is theirs
 * (SQLite's takes any: a file path). */
static const struct store_backend *const backends[] = { &store_backend_pg, &store_backend_sqlite };

struct store_conn {
	struct store      *s;
	struct store_link *k;             /* the engine's connection */
	bool               in_tx;         /* between store_begin and commit/rollback */
	struct store_conn *next;          /* in s->conns */
	struct store_audit_mark audit;    /* the last audit entry the open transaction appended */
	bool               head_known;    /* audit is the chain's head (store_audit_head_known) */
	bool               head_rewritten;   /* this transaction relinked or pruned entries */
	int64_t            claimed;       /* the chain this transaction claimed; 0: none */
	int64_t            nums[STORE_AUDIT_RESERVE];   /* entry numbers this transaction took */
	size_t             nnums, inums;  /* how many, and the next to use */
};

struct store {
	const struct store_backend *be;
	struct store_db   *db;            /* the engine's database */
	int64_t            hook_seq;      /* the last audit entry given to the hook (only_newer) */
	pthread_key_t      key;
	pthread_mutex_t    lock;          /* guards conns */
	struct store_conn *conns;         /* every open connection, to close at store_close */
	pthread_mutex_t    commit_lock;   /* guards the hook; held through each call */
	store_audit_hook   audit_hook;    /* guarded by commit_lock */
	void              *audit_arg;
	/* The audit chain this process appends to (migration 0028): 0, the
	 * shared chain, until a store with chains of its own claims one. */
	pthread_mutex_t    chain_lock;    /* guards what follows */
	bool               chains_own;    /* claims a chain (be->own_chains, or store_own_chains) */
	int64_t            chain;
	bool               head_cached;   /* head_*: the chain's committed head (be->own_chains) */
	int64_t            head_seq;
	unsigned char      head_link[STORE_AUDIT_LINK_LEN];
	atomic_uint_fast64_t head_reads;  /* heads store_audit_head read with SQL (writer stats) */
};

/* --- connections ------------------------------------------------------- */

static void conn_close(struct store_conn *c)
{
	if (c == NULL)
		return;
	c->s->be->link_close(c->k);
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
	if ((c->k = s->be->link_open(s->db)) == NULL) {
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

struct store_stmt *store_stmt(struct store_conn *c, const char *sql)
{
	if (c == NULL || sql == NULL)
		return NULL;
	return c->s->be->stmt(c->k, sql);
}

const char *store_dialect_sql(struct store_conn *c, const char *sqlite_sql, const char *pg_sql)
{
	if (c == NULL)
		return NULL;
	const char *const own[STORE_DIALECT__MAX] = {
		[STORE_DIALECT_SQLITE] = sqlite_sql,
		[STORE_DIALECT_PG] = pg_sql,
	};
	return own[c->s->be->dialect];
}

struct store_stmt *store_stmt_dialect(struct store_conn *c, const char *sqlite_sql,
    const char *pg_sql)
{
	return store_stmt(c, store_dialect_sql(c, sqlite_sql, pg_sql));
}

/* Ready for the next use: reset and drop bound values (which may be secrets). */
void store_stmt_done(struct store_stmt *st)
{
	if (st != NULL)
		st->be->stmt_done(st);
}

/* Runs a statement that returns no rows.  Clears it in every case. */
enum cs_err store_exec(struct store_conn *c, struct store_stmt *st)
{
	(void)c;
	return st->be->exec(st);
}

enum cs_err store_step(struct store_conn *c, struct store_stmt *st)
{
	(void)c;
	return st->be->step(st);
}

int64_t store_changes(struct store_conn *c)
{
	return c->s->be->changes(c->k);
}

/* Binds v to st (copy: whether the engine must keep its own copy of each
 * value); on failure st is finished. */
static enum cs_err bind_values(struct store_stmt *st, const struct store_val *v, size_t n,
    bool copy)
{
	enum cs_err e = st->be->bind(st, v, n, copy);
	if (e != CS_OK)
		store_stmt_done(st);
	return e;
}

enum cs_err store_bind(struct store_stmt *st, const struct store_val *v, size_t n)
{
	return bind_values(st, v, n, true);
}

/* store_query without the engine's copies of the values, for store_run and
 * store_get: they step the statement and clear its bindings (store_stmt_done)
 * before they return, so the caller's values outlive every use the engine
 * makes of them.  No copy also means no unwiped copy of a secret in the
 * engine's heap. */
static struct store_stmt *query_nocopy(struct store_conn *c, const char *sql,
    const struct store_val *v, size_t n, enum cs_err *e)
{
	struct store_stmt *st = store_stmt(c, sql);
	if (st == NULL) {
		*e = CS_EDB;
		return NULL;
	}
	if ((*e = bind_values(st, v, n, false)) != CS_OK)
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

enum cs_err store_run_later(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n)
{
	/* An engine without run_later (SQLite: in the process, no round trip
	 * to save) runs it at once. */
	if (!c->in_tx || c->s->be->run_later == NULL)
		return store_run(c, sql, v, n);
	struct store_stmt *st = store_stmt(c, sql);
	if (st == NULL)
		return CS_EDB;
	enum cs_err e = c->s->be->run_later(st, v, n);
	store_stmt_done(st);
	return e;
}

/* A malloc'd copy of a text column; NULL column -> *out NULL. */
enum cs_err store_col_text(struct store_stmt *st, int i, char **out)
{
	const unsigned char *t = store_col_raw_text(st, i);
	if (t == NULL) {
		if (st->be->col_nomem(st))
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
 * engines answer the same pointer and length for a column asked twice
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
			e = st->be->col_nomem(st) ? CS_ENOMEM : cols[k].required ? CS_EDB : CS_OK;
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

/* The current row's columns, of the statement's own engine. */
enum store_col_kind store_col_type(struct store_stmt *st, int i) { return st->be->col_type(st, i); }
int64_t store_col_int64(struct store_stmt *st, int i) { return st->be->col_int64(st, i); }
/* The low 32 bits, as SQLite's sqlite3_column_int gives them. */
int store_col_int(struct store_stmt *st, int i) { return (int)st->be->col_int64(st, i); }
int store_col_bytes(struct store_stmt *st, int i) { return st->be->col_bytes(st, i); }
const void *store_col_raw_blob(struct store_stmt *st, int i) { return st->be->col_raw_blob(st, i); }
const unsigned char *store_col_raw_text(struct store_stmt *st, int i)
{
	return st->be->col_raw_text(st, i);
}
int store_col_count(struct store_stmt *st) { return st->be->col_count(st); }
const char *store_col_name(struct store_stmt *st, int i) { return st->be->col_name(st, i); }

enum cs_err store_run_one(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n)
{
	enum cs_err e = store_run(c, sql, v, n);
	if (e == CS_OK && store_changes(c) != 1)
		e = CS_ENOENT;
	return e;
}

enum cs_err store_run_changed(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n, int *changed)
{
	enum cs_err e = store_run(c, sql, v, n);
	if (e == CS_OK)
		*changed = store_changes(c) > 0;
	return e;
}

enum cs_err store_get_ints(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n, int64_t *out, size_t nout)
{
	enum cs_err e;
	struct store_stmt *st = query_nocopy(c, sql, v, n, &e);
	if (st == NULL)
		return e;
	if ((e = store_step(c, st)) == CS_OK)
		for (size_t i = 0; i < nout; i++)
			out[i] = store_col_int64(st, (int)i);
	store_stmt_done(st);
	return e;
}

enum cs_err store_aggregate(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n, int64_t *out, size_t nout)
{
	enum cs_err e = store_get_ints(c, sql, v, n, out, nout);
	return e == CS_ENOENT ? CS_EDB : e;   /* an aggregate always answers one row */
}

void store_row_clear(const struct store_row_type *t, void *row)
{
	if (row == NULL)
		return;
	if (t->clear != NULL) {
		t->clear(row);
		return;
	}
	unsigned char *base = row;
	char *block;
	memcpy(&block, base + t->block, sizeof block);
	free(block);
	for (size_t i = 0; i < t->nmembers; i++) {
		const struct store_member *m = &t->members[i];
		unsigned char *p;
		size_t len;
		if (m->kind != STORE_MEMBER_BLOB && m->kind != STORE_MEMBER_BLOB_OR_NULL)
			continue;
		memcpy(&p, base + m->off, sizeof p);
		memcpy(&len, base + m->len, sizeof len);
		if (p != NULL) {
			OPENSSL_cleanse(p, len);
			free(p);
		}
	}
	if (t->wipe)
		OPENSSL_cleanse(row, t->size);
	else
		memset(row, 0, t->size);
}

enum cs_err store_read_members(struct store_stmt *st, void *row, char **block,
    const struct store_member *members, size_t n)
{
	struct store_text_col texts[STORE_MAX_TEXT_MEMBERS];
	size_t nt = 0;
	unsigned char *base = row;
	/* SECURITY: a statement that lists fewer columns than its table would read
	 * 0 into the members past its end, and 0 in revoked_at or ended_at reads
	 * as "live": a row the reader cannot fill whole is no row. */
	if (n > (size_t)INT_MAX || store_col_count(st) < (int)n)
		return CS_EDB;
	for (size_t i = 0; i < n; i++) {
		const struct store_member *m = &members[i];
		int col = (int)i;
		int64_t v;
		int flag;
		unsigned char *blob;
		size_t len;
		enum cs_err e;
		switch (m->kind) {
		case STORE_MEMBER_TEXT:
		case STORE_MEMBER_TEXT_OR_NULL:
			if (nt == STORE_MAX_TEXT_MEMBERS)
				return CS_EDB;     /* a table longer than this reader: cannot be */
			texts[nt++] = (struct store_text_col){ col, (char **)(void *)(base + m->off),
			    m->kind == STORE_MEMBER_TEXT };
			break;
		case STORE_MEMBER_INT64:
			v = store_col_int64(st, col);
			memcpy(base + m->off, &v, sizeof v);
			break;
		case STORE_MEMBER_FLAG:
			flag = store_col_int(st, col) != 0;
			memcpy(base + m->off, &flag, sizeof flag);
			break;
		case STORE_MEMBER_BLOB:
		case STORE_MEMBER_BLOB_OR_NULL:
			if (store_col_type(st, col) == STORE_COL_NULL) {
				/* Defensive: a NOT NULL column that comes back NULL
				 * means a damaged database. */
				if (m->kind == STORE_MEMBER_BLOB)
					return CS_EDB;
				break;             /* the zeroed row's NULL and 0 */
			}
			if ((e = store_col_blob(st, col, &blob, &len)) != CS_OK)
				return e;
			memcpy(base + m->off, &blob, sizeof blob);
			memcpy(base + m->len, &len, sizeof len);
			break;
		case STORE_MEMBER__MAX:
			break;
		}
	}
	return store_cols_text(st, block, texts, nt);
}

/* t->read (or its members) into row, zeroed first; a row whose read failed
 * is cleared, so it holds nothing. */
static enum cs_err read_row(struct store_stmt *st, const struct store_row_type *t, void *row)
{
	memset(row, 0, t->size);
	enum cs_err e = t->read != NULL ? t->read(st, row) : store_read_members(st, row,
	    (char **)(void *)((unsigned char *)row + t->block), t->members, t->nmembers);
	if (e != CS_OK)
		store_row_clear(t, row);
	return e;
}

enum cs_err store_get(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n, const struct store_row_type *t, void *out)
{
	enum cs_err e;
	struct store_stmt *st = query_nocopy(c, sql, v, n, &e);
	if (st == NULL)
		return e;
	if ((e = store_step(c, st)) == CS_OK)
		e = read_row(st, t, out);
	store_stmt_done(st);
	return e;
}

void store_rows_free(const struct store_row_type *t, void *rows, size_t n)
{
	if (rows == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		store_row_clear(t, (unsigned char *)rows + i * t->size);
	free(rows);
}

/* The end of store_rows and store_rows_all: st finished; on CS_OK the nv
 * rows of v (NULL when none) go to *out and *n, else they are released. */
static enum cs_err rows_hand_out(struct store_stmt *st, enum cs_err e,
    const struct store_row_type *t, unsigned char *v, size_t nv, void **out, size_t *n)
{
	store_stmt_done(st);
	if (e != CS_OK) {
		store_rows_free(t, v, nv);
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
		if ((e = read_row(st, t, v + nv * t->size)) != CS_OK)
			goto out;
		nv++;
	}
	if (e == CS_ENOENT || nv == max)
		e = CS_OK;
out:
	return rows_hand_out(st, e, t, v, nv, out, n);
}

enum cs_err store_list_dialect(struct store_conn *c, const char *sqlite_sql, const char *pg_sql,
    const struct store_val *v, size_t nv, size_t max, const struct store_row_type *t,
    void **out, size_t *n)
{
	enum cs_err e;
	struct store_stmt *st = store_stmt_dialect(c, sqlite_sql, pg_sql);
	if (st == NULL)
		return CS_EDB;
	if ((e = store_bind(st, v, nv)) != CS_OK)
		return e;
	return store_rows(c, st, max, t, out, n);
}

enum cs_err store_list(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t nv, size_t max, const struct store_row_type *t, void **out, size_t *n)
{
	return store_list_dialect(c, sql, sql, v, nv, max, t, out, n);
}

enum cs_err store_rows_all(struct store_conn *c, struct store_stmt *st,
    const struct store_row_type *t, void **out, size_t *n)
{
	enum cs_err e;
	unsigned char *v = NULL;
	size_t nv = 0, cap = 0;
	while ((e = store_step(c, st)) == CS_OK) {
		if (nv == cap) {
			size_t ncap = cap == 0 ? 16 : cap * 2;
			unsigned char *p;
			if (ncap > SIZE_MAX / t->size || (p = realloc(v, ncap * t->size)) == NULL) {
				e = CS_ENOMEM;
				goto out;
			}
			v = p;
			cap = ncap;
		}
		if ((e = read_row(st, t, v + nv * t->size)) != CS_OK)
			goto out;
		nv++;
	}
	if (e == CS_ENOENT)
		e = CS_OK;
out:
	return rows_hand_out(st, e, t, v, nv, out, n);
}

/* --- transactions and the audit hook ----------------------------------- */

enum cs_err store_begin(struct store_conn *c)
{
	enum cs_err e;
	if (c == NULL)
		return CS_EINVAL;
	if (c->in_tx) {
		log_msg(LOG_ERROR, "database: a transaction began inside another");
		return CS_EDB;
	}
	c->audit.set = false;
	c->head_known = false;
	c->head_rewritten = false;
	c->claimed = 0;
	c->nnums = c->inums = 0;
	if ((e = c->s->be->begin(c->k)) == CS_OK)
		c->in_tx = true;
	return e;
}

/* The engines' publisher (store_backend.h), and store_audit_appended's. */
static void publish(void *arg, int64_t seq, const unsigned char link[STORE_AUDIT_LINK_LEN],
    bool only_newer)
{
	struct store *s = arg;
	pthread_mutex_lock(&s->commit_lock);
	if (s->audit_hook != NULL && (!only_newer || seq > s->hook_seq)) {
		s->audit_hook(s->audit_arg, seq, link);
		if (only_newer)
			s->hook_seq = seq;
	}
	pthread_mutex_unlock(&s->commit_lock);
}

/* The engines' settle (store_backend.h): a COMMIT's outcome for the
 * process's chain, before the next transaction may begin. */
static void settle(void *arg, const struct store_audit_mark *mark, bool ok, bool unknown)
{
	struct store *s = arg;
	pthread_mutex_lock(&s->chain_lock);
	/* A claim that did not commit was rolled back with its transaction.
	 * SECURITY: entries whose COMMIT lost its connection may still land after
	 * the next transaction read the chain's head: it would follow the same
	 * entry (a fork).  The process gives that chain up and claims a new one,
	 * whose first entry names the old chain's newest. */
	if ((mark->claimed && !ok) || (mark->set && unknown)) {
		s->chain = 0;
		s->head_cached = false;
	}
	if (mark->set || mark->rewritten) {
		/* SECURITY: after a COMMIT that failed the entry may or may not be
		 * there (a connection lost during COMMIT leaves it unknown): the
		 * head is read from the table rather than guessed, since a guess
		 * could fork the chain; so too after links were rewritten. */
		s->head_cached = ok && mark->set && !mark->rewritten;
		if (s->head_cached) {
			s->head_seq = mark->seq;
			memcpy(s->head_link, mark->link, STORE_AUDIT_LINK_LEN);
		}
	}
	pthread_mutex_unlock(&s->chain_lock);
}

void store_audit_appended(struct store_conn *c, int64_t chain, int64_t seq,
    const unsigned char link[STORE_AUDIT_LINK_LEN])
{
	c->audit.set = true;
	c->audit.chain = chain;
	c->audit.seq = seq;
	memcpy(c->audit.link, link, STORE_AUDIT_LINK_LEN);
	c->head_known = c->in_tx;
	/* Can't happen (audit.h: appends run inside a transaction), but if one
	 * ran outside, its row is committed already: publish it now, not never. */
	if (!c->in_tx) {
		publish(c->s, seq, link, false);
		c->audit.set = false;
	}
}

/* SECURITY: the transaction holds the one writer (SQLite's, or PostgreSQL's
 * write lock) from its first statement: after its own append nobody else
 * can have appended, so its last entry is the head, and the next append of
 * the same transaction need not read it again. */
bool store_audit_head_known(struct store_conn *c, int64_t *seq,
    unsigned char link[STORE_AUDIT_LINK_LEN])
{
	if (c == NULL || !c->in_tx || !c->head_known || !c->audit.set)
		return false;
	*seq = c->audit.seq;
	memcpy(link, c->audit.link, STORE_AUDIT_LINK_LEN);
	return true;
}

void store_audit_head_forget(struct store_conn *c)
{
	if (c == NULL)
		return;
	c->head_known = false;
	c->head_rewritten = true;      /* an engine's head (SQLite's) goes at commit */
	pthread_mutex_lock(&c->s->chain_lock);
	c->s->head_cached = false;
	pthread_mutex_unlock(&c->s->chain_lock);
}

void store_audit_head_was_read(struct store_conn *c)
{
	atomic_fetch_add_explicit(&c->s->head_reads, 1, memory_order_relaxed);
}

/* --- the process's own audit chain (migration 0028) ---------------------- */

/* A transaction that claimed the process's chain ends (committed: ok): the
 * chain is the process's from now on, or was never had (an engine's settle
 * said so first when it committed; SQLite's and a rollback say it here).
 * Only a claiming transaction takes the lock: not every commit's path. */
static void chain_tx_end(struct store_conn *c, bool ok)
{
	int64_t claimed = c->claimed;
	c->claimed = 0;
	if (claimed == 0 || ok)
		return;
	pthread_mutex_lock(&c->s->chain_lock);
	if (c->s->chain == claimed) {         /* not another's claim since */
		c->s->chain = 0;
		c->s->head_cached = false;
	}
	pthread_mutex_unlock(&c->s->chain_lock);
}

void store_own_chains(struct store *s, bool own)
{
	pthread_mutex_lock(&s->chain_lock);
	s->chains_own = own || s->be->own_chains;
	pthread_mutex_unlock(&s->chain_lock);
}

int64_t store_audit_chain_of(struct store_conn *c, bool *own)
{
	pthread_mutex_lock(&c->s->chain_lock);
	int64_t chain = c->s->chain;
	*own = c->s->chains_own;
	pthread_mutex_unlock(&c->s->chain_lock);
	return chain;
}

void store_audit_chain_claimed(struct store_conn *c, int64_t chain)
{
	pthread_mutex_lock(&c->s->chain_lock);
	c->s->chain = chain;
	c->s->head_cached = false;
	pthread_mutex_unlock(&c->s->chain_lock);
	c->claimed = chain;
}

bool store_audit_chain_head(struct store_conn *c, int64_t chain, int64_t *seq,
    unsigned char link[STORE_AUDIT_LINK_LEN])
{
	bool have;
	/* SQLite: the writer's, as its open batch or last COMMIT left it, and
	 * never to a transaction that rewrote links (its own head is read from
	 * the table, and the writer forgets it when that transaction releases). */
	if (!c->s->be->own_chains)
		return c->in_tx && !c->head_rewritten && c->s->be->audit_head != NULL &&
		    c->s->be->audit_head(c->k, chain, seq, link);
	pthread_mutex_lock(&c->s->chain_lock);
	have = c->s->head_cached;
	if (have) {
		*seq = c->s->head_seq;
		memcpy(link, c->s->head_link, STORE_AUDIT_LINK_LEN);
	}
	pthread_mutex_unlock(&c->s->chain_lock);
	return have;
}

bool store_audit_numbers_from_sequence(struct store_conn *c)
{
	return c->s->be->own_chains;
}

bool store_audit_number_take(struct store_conn *c, int64_t *seq)
{
	if (!c->in_tx || c->inums >= c->nnums)
		return false;
	*seq = c->nums[c->inums++];
	return true;
}

void store_audit_numbers_add(struct store_conn *c, const int64_t *v, size_t n)
{
	if (n > STORE_AUDIT_RESERVE)
		n = STORE_AUDIT_RESERVE;
	memcpy(c->nums, v, n * sizeof *v);
	c->nnums = n;
	c->inums = 0;
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
	c->audit.rewritten = c->head_rewritten;
	c->audit.claimed = c->claimed != 0;
	enum cs_err e = c->s->be->commit(c->k, &c->audit);
	chain_tx_end(c, e == CS_OK);
	c->in_tx = false;
	c->audit.set = false;
	c->head_known = false;
	return e;
}

/* store_transact's step: what store_begin sets up, the body, and what
 * store_commit hands the engine; on the turn holder's thread. */
static enum cs_err transact_step(struct store_tx_job *j, bool *keep)
{
	struct store_conn *c = j->c;
	c->audit.set = false;
	c->head_known = false;
	c->head_rewritten = false;
	c->claimed = 0;
	c->nnums = c->inums = 0;
	c->in_tx = true;
	*keep = false;
	enum cs_err e = j->body(c, j->arg, keep);
	c->audit.rewritten = c->head_rewritten;
	c->audit.claimed = c->claimed != 0;
	j->mark = c->audit;
	return e;
}

/* store_transact's undo: a job rolled back gives up the chain it claimed,
 * as store_rollback does, before the writer runs another transaction. */
static void transact_undo(struct store_tx_job *j)
{
	chain_tx_end(j->c, false);
}

enum cs_err store_transact(struct store_conn *c,
    enum cs_err (*body)(struct store_conn *c, void *arg, bool *keep), void *arg, bool *kept)
{
	enum cs_err e;
	bool keep = false;
	if (kept == NULL)
		return CS_EINVAL;
	*kept = false;
	if (c == NULL || body == NULL)
		return CS_EINVAL;
	if (c->in_tx) {
		log_msg(LOG_ERROR, "database: a transaction began inside another");
		return CS_EDB;
	}
	if (c->s->be->transact == NULL) {
		if ((e = store_begin(c)) != CS_OK)
			return e;
		if ((e = body(c, arg, &keep)) != CS_OK || !keep) {
			store_rollback(c);
			return e;
		}
		if ((e = store_commit(c)) == CS_OK)
			*kept = true;
		return e;
	}
	struct store_tx_job j = { .k = c->k, .step = transact_step, .undo = transact_undo,
	    .c = c, .body = body, .arg = arg };
	e = c->s->be->transact(c->k, &j);
	*kept = e == CS_OK && j.kept;
	chain_tx_end(c, *kept);
	c->in_tx = false;
	c->audit.set = false;
	c->head_known = false;
	return e;
}

void store_rollback(struct store_conn *c)
{
	if (c == NULL)
		return;
	if (c->in_tx)
		chain_tx_end(c, false);
	c->audit.set = false;
	c->head_known = false;
	c->s->be->rollback(c->k, c->in_tx);
	c->in_tx = false;
}

bool store_conflicted(struct store_conn *c)
{
	return c != NULL && c->s->be->conflicted != NULL && c->s->be->conflicted(c->k);
}

bool store_retry(struct store_conn *c, enum cs_err e, int *attempt)
{
	if (e != CS_EBUSY || !store_conflicted(c) || *attempt >= STORE_RETRIES)
		return false;
	(*attempt)++;
	/* The other writer's transaction may still be running: a moment's
	 * jitter (0.5 to 2 ms, more each time) before running again. */
	unsigned char r = 0;
	if (RAND_bytes(&r, 1) != 1)
		r = 128;
	struct timespec ts = { 0, (long)(500000 + (long)r * 6000) * *attempt };
	nanosleep(&ts, NULL);
	return true;
}

enum cs_err store_end(struct store_conn *c, enum cs_err e)
{
	if (e == CS_OK && (e = store_commit(c)) == CS_OK)
		return CS_OK;
	store_rollback(c);
	return e;
}

void store_set_write_queue(struct store *s, unsigned max)
{
	if (s != NULL)
		s->be->set_write_queue(s->db, max);
}

void store_requests(struct store *s, int delta)
{
	if (s != NULL && s->be->requests != NULL)
		s->be->requests(s->db, delta);
}

void store_set_linger(struct store *s, unsigned fixed_us)
{
	if (s != NULL && s->be->set_linger != NULL)
		s->be->set_linger(s->db, fixed_us);
}

unsigned store_requests_under_way(struct store *s)
{
	struct store_writer_stats ws;
	memset(&ws, 0, sizeof ws);
	if (s != NULL)
		s->be->writer_stats(s->db, &ws);
	return ws.requests;
}

void store_writer_stats(struct store *s, struct store_writer_stats *out)
{
	s->be->writer_stats(s->db, out);
	out->audit_head_reads = atomic_load_explicit(&s->head_reads, memory_order_relaxed);
}

void store_stop(struct store *s)
{
	if (s != NULL)
		s->be->stop(s->db);
}

/* --- the database ------------------------------------------------------ */

enum cs_err store_ping(struct store_conn *c)
{
	return c->s->be->ping(c->k);
}

enum cs_err store_backup(struct store_conn *c, const char *dest_path)
{
	if (c == NULL)
		return CS_EINVAL;
	return c->s->be->backup(c->k, dest_path);
}

int store_schema_known(void)
{
	return store_migrations_known(embedded_migrations);
}

enum cs_err store_schema_version(struct store_conn *c, int *out)
{
	if (out == NULL)
		return CS_EINVAL;
	return c->s->be->schema_version(c->k, out);
}

const char *store_engine_name(const struct store *s)
{
	return s != NULL ? s->be->name : NULL;
}

enum cs_err store_copy(struct store *from, struct store *to, struct store_copy_report *r)
{
	if (from == NULL || to == NULL || r == NULL)
		return CS_EINVAL;
	struct store_conn *a = store_conn(from), *b = store_conn(to);
	if (a == NULL || b == NULL)
		return CS_EDB;
	struct sqlite3 *src = from->be->copy_source(a->k);
	if (src == NULL)
		return CS_EINVAL;
	return to->be->copy_in(b->k, src, r);
}

enum cs_err store_flight_begin(struct store_conn *c, const char *key)
{
	if (c == NULL || key == NULL)
		return CS_EINVAL;
	return c->s->be->flight_begin(c->k, key);
}

void store_flight_end(struct store_conn *c)
{
	if (c != NULL)
		c->s->be->flight_end(c->k);
}

/* A [database] url names a PostgreSQL database. */
enum cs_err store_url_check(const char *url, char *why, size_t whylen)
{
	return store_backend_pg.url_check(url, why, whylen);
}

enum cs_err store_open(const char *path, struct store **out)
{
	return store_open_with(path, NULL, out);
}

enum cs_err store_open_with(const char *loc, const struct store_opts *o, struct store **out)
{
	enum cs_err e = CS_ENOMEM;
	struct store *s = NULL;
	int key_ok = 0, lock_ok = 0, commit_lock_ok = 0, chain_lock_ok = 0;
	const struct store_opts none = { .schema = STORE_SCHEMA_REQUIRE };

	if (loc == NULL || loc[0] == '\0' || out == NULL)
		return CS_EINVAL;
	if (o == NULL)
		o = &none;
	s = calloc(1, sizeof *s);
	if (s == NULL)
		goto out;
	for (size_t i = 0; s->be == NULL; i++)
		if (backends[i]->claims(loc))
			s->be = backends[i];
	if (pthread_mutex_init(&s->lock, NULL) != 0)
		goto out;
	lock_ok = 1;
	if (pthread_mutex_init(&s->commit_lock, NULL) != 0)
		goto out;
	commit_lock_ok = 1;
	if (pthread_mutex_init(&s->chain_lock, NULL) != 0)
		goto out;
	chain_lock_ok = 1;
	s->chains_own = s->be->own_chains;
	if (pthread_key_create(&s->key, conn_destroy) != 0)
		goto out;
	key_ok = 1;
	const struct store_publisher pub = { .publish = publish, .settle = settle, .arg = s };
	if ((e = s->be->open(loc, o, &pub, &s->db)) != CS_OK)
		goto out;
	e = CS_ENOMEM;
	struct store_conn *c = store_conn(s);
	if (c == NULL) {
		e = CS_EDB;
		goto out;
	}
	if ((e = s->be->schema_open(c->k, o->schema)) != CS_OK)
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
			if (chain_lock_ok)
				pthread_mutex_destroy(&s->chain_lock);
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
	s->be->close(s->db);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->commit_lock);
	pthread_mutex_destroy(&s->chain_lock);
	free(s);
}
