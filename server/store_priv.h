/* store_priv.h -- for the store's own files (store.c, store_*.c) only: the
 * one statement mechanism (a per-connection cache of prepared statements keyed
 * by the address of their static SQL) and the binding helpers.  Every
 * store_X.c writes its SQL once, in the dialect both engines accept (?N
 * parameters; the PostgreSQL backend numbers them $N), and reaches it through
 * these functions, which store.c hands to the engine the store was opened on
 * (store_backend.h: store_sqlite.c or store_pg.c).  No store_X.c knows which
 * engine that is.  Every other module talks to the database through
 * include/store*.h and never sees SQL. */
#ifndef CS_STORE_PRIV_H
#define CS_STORE_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "store.h"

/* One prepared statement of one connection, of whichever engine (its head
 * is in store_backend.h; nothing here looks inside it). */
struct store_stmt;

/* Statements one connection may hold prepared, a power of two (all of them
 * fit today, with room: a new store_X.c statement needs no registration,
 * only a constant). */
#define STORE_MAX_STMTS 256

/* The connection's prepared statement for sql, prepared on first use and
 * kept on that connection until it closes, cached under the address of sql:
 * pass a file-scope `static const char SQL_X[]`, never a built string.
 * NULL on failure (already reported on stderr). */
struct store_stmt *store_stmt(struct store_conn *c, const char *sql);
/* Reset + clear bindings (bound values may be secrets). */
void store_stmt_done(struct store_stmt *st);
/* Steps a statement that returns no rows to completion, then store_stmt_done. */
enum cs_err store_exec(struct store_conn *c, struct store_stmt *st) CS_MUST_CHECK;
/* One step: CS_OK with a row, CS_ENOENT when done, an error otherwise. */
enum cs_err store_step(struct store_conn *c, struct store_stmt *st) CS_MUST_CHECK;
/* For the few statements written twice, once per dialect (a row lock clause
 * SQLite has no word for, a high-water mark PostgreSQL does not keep): the
 * engine's own of the two, as store_stmt.  Both are static constants, and
 * scripts/pg-sql-check.py checks each on its engine (SQL_X and SQL_X_PG). */
struct store_stmt *store_stmt_dialect(struct store_conn *c, const char *sqlite_sql,
    const char *pg_sql);
/* The engine's own of the two texts (for store_query and friends). */
const char *store_dialect_sql(struct store_conn *c, const char *sqlite_sql, const char *pg_sql);
/* The current row's column i, either backend.  A pointer (raw text or blob)
 * stays valid until the next step or store_stmt_done. */
enum store_col_kind {
	STORE_COL_NULL,
	STORE_COL_INTEGER,
	STORE_COL_FLOAT,
	STORE_COL_TEXT,
	STORE_COL_BLOB,
};
enum store_col_kind store_col_type(struct store_stmt *st, int i);
int64_t store_col_int64(struct store_stmt *st, int i);
int store_col_int(struct store_stmt *st, int i);
int store_col_bytes(struct store_stmt *st, int i);
const void *store_col_raw_blob(struct store_stmt *st, int i);
const unsigned char *store_col_raw_text(struct store_stmt *st, int i);
int store_col_count(struct store_stmt *st);
const char *store_col_name(struct store_stmt *st, int i);
/* One value for a statement's parameter, the way every store_X.c binds:
 * the kind is fixed by the macro that makes it, so a text cannot go where a
 * number is meant without a compiler error. */
enum store_val_kind {
	STORE_VAL_TEXT,              /* p a NUL-terminated string; NULL binds NULL */
	STORE_VAL_INT,               /* i */
	STORE_VAL_BLOB,              /* p, n bytes; NULL or 0 bytes binds an empty blob */
	STORE_VAL_BLOB_OR_NULL,      /* p, n bytes; NULL binds NULL ("no refresh token",
	                              * which an empty blob is not) */
	STORE_VAL__MAX
};
struct store_val {
	enum store_val_kind kind;
	const void         *p;
	size_t              n;
	int64_t             i;
};
static inline const char *store_val_text_(const char *v) { return v; }   /* type check only */
static inline const void *store_val_blob_(const void *v) { return v; }
#define SV_TEXT(v)      ((struct store_val){ .kind = STORE_VAL_TEXT, .p = store_val_text_(v) })
#define SV_INT(v)       ((struct store_val){ .kind = STORE_VAL_INT, .i = (v) })
#define SV_BLOB(v, len) ((struct store_val){ .kind = STORE_VAL_BLOB, .p = store_val_blob_(v), \
	.n = (len) })
#define SV_BLOB_OR_NULL(v, len) ((struct store_val){ .kind = STORE_VAL_BLOB_OR_NULL, \
	.p = store_val_blob_(v), .n = (len) })
/* The values of ?1, ?2, ... in order, as the (array, count) pair the
 * functions below take. */
#define STORE_VALS(...) (const struct store_val[]){ __VA_ARGS__ }, \
	sizeof((const struct store_val[]){ __VA_ARGS__ }) / sizeof(struct store_val)
/* Binds v[0 .. n-1] to ?1 .. ?n.  On failure st is cleared (store_stmt_done)
 * and the error returned. */
enum cs_err store_bind(struct store_stmt *st, const struct store_val *v, size_t n) CS_MUST_CHECK;
/* store_stmt + store_bind: the statement for sql with v bound, ready to
 * step; NULL with *e set on failure. */
struct store_stmt *store_query(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n, enum cs_err *e);
/* store_query + store_exec: runs sql, which returns no rows, with v bound.  SQLite
 * reads v's texts and blobs in place (no copy): they need to live only for the call. */
enum cs_err store_run(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n) CS_MUST_CHECK;
/* store_run for a write whose outcome the transaction needs only at its
 * COMMIT (an INSERT that nothing reads back by its answer, such as an audit
 * entry): inside a transaction an engine may send it with the next statement
 * or with the COMMIT (PostgreSQL's pipeline: one round trip fewer while the
 * writer turn is held).  Its failure then fails that statement or the COMMIT,
 * and the transaction rolls back whole: nothing after it runs.  CS_OK may so
 * mean "sent"; store_changes says nothing of it.  Outside a transaction, and
 * on SQLite, it is store_run. */
enum cs_err store_run_later(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n) CS_MUST_CHECK;
/* A malloc'd copy of one column (for a single value; a row's text columns go
 * through store_cols_text); a NULL column gives *out NULL. */
enum cs_err store_col_text(struct store_stmt *st, int i, char **out) CS_MUST_CHECK;
enum cs_err store_col_blob(struct store_stmt *st, int i, unsigned char **out, size_t *len) CS_MUST_CHECK;
/* One text column of a row: column i, whose copy *out will point into the
 * row's block (store_cols_text); required marks a NOT NULL column, whose NULL
 * means a damaged database. */
struct store_text_col {
	int    i;
	char **out;
	bool   required;
};
/* The (array, count) pair store_cols_text takes. */
#define STORE_TEXT_COLS(...) (const struct store_text_col[]){ __VA_ARGS__ }, \
	sizeof((const struct store_text_col[]){ __VA_ARGS__ }) / sizeof(struct store_text_col)
/* Copies the text columns cols[0 .. n-1] of st's current row into ONE
 * malloc'd block, each NUL-terminated, and points every out into it (a NULL
 * column leaves its out NULL).  On CS_OK *block is that allocation (NULL when
 * every column was NULL) and the row owns it: the row's clear frees *block --
 * wiping first the fields that can hold a secret -- and never one of the outs,
 * and whatever takes the strings over takes the block with them.  CS_EDB when
 * a required column is NULL.  On failure nothing stays allocated: *block and
 * every out are NULL. */
enum cs_err store_cols_text(struct store_stmt *st, char **block, const struct store_text_col *cols,
    size_t n) CS_MUST_CHECK;
/* A member of a row that a statement's column fills (store_row_type's
 * members: column i of the SELECT list goes to members[i]). */
enum store_member_kind {
	STORE_MEMBER_TEXT,           /* char *, into the row's block; a NULL is CS_EDB */
	STORE_MEMBER_TEXT_OR_NULL,   /* char *, into the row's block, or NULL */
	STORE_MEMBER_INT64,          /* int64_t (a NULL reads 0) */
	STORE_MEMBER_FLAG,           /* int: 1 when the column is nonzero, else 0 */
	STORE_MEMBER_BLOB,           /* unsigned char *, a malloc'd copy; a NULL is CS_EDB */
	STORE_MEMBER_BLOB_OR_NULL,   /* unsigned char *, a malloc'd copy, or NULL */
	STORE_MEMBER__MAX
};
struct store_member {
	enum store_member_kind kind;
	size_t                 off;  /* offsetof the member in its row */
	size_t                 len;  /* a blob's: offsetof its size_t length */
};
/* The members, each checked against its type at compile time: T's member m.  The
 * check selects on the member's address, so an array member (char name[64])
 * is refused rather than taken for the pointer it would decay to. */
#define STORE_TEXT(T, m)         { STORE_MEMBER_TEXT, _Generic(&((T *)0)->m, char **: offsetof(T, m)), 0 }
#define STORE_TEXT_OR_NULL(T, m) \
	{ STORE_MEMBER_TEXT_OR_NULL, _Generic(&((T *)0)->m, char **: offsetof(T, m)), 0 }
#define STORE_INT64(T, m)        { STORE_MEMBER_INT64, _Generic(&((T *)0)->m, int64_t *: offsetof(T, m)), 0 }
#define STORE_FLAG(T, m)         { STORE_MEMBER_FLAG, _Generic(&((T *)0)->m, int *: offsetof(T, m)), 0 }
#define STORE_BLOB(T, m, n)      { STORE_MEMBER_BLOB, \
	_Generic(&((T *)0)->m, unsigned char **: offsetof(T, m)), \
	_Generic(&((T *)0)->n, size_t *: offsetof(T, n)) }
#define STORE_BLOB_OR_NULL(T, m, n) { STORE_MEMBER_BLOB_OR_NULL, \
	_Generic(&((T *)0)->m, unsigned char **: offsetof(T, m)), \
	_Generic(&((T *)0)->n, size_t *: offsetof(T, n)) }
/* Text members one row may have at most (store_read_members). */
#define STORE_MAX_TEXT_MEMBERS 32
/* Reads st's current row into row, zeroed by the caller: column i into
 * members[i] for i < n, the text members copied into one block at
 * *block (store_cols_text, whose errors it returns).  On failure what it
 * allocated is left in row for the row's clear (store_row_clear). */
enum cs_err store_read_members(struct store_stmt *st, void *row, char **block,
    const struct store_member *members, size_t n) CS_MUST_CHECK;
/* A kind of row store_get and store_rows read: its size, how one is read
 * (into a row they have zeroed; they clear a row whose read failed) and how
 * one is cleared (store_row_clear). */
struct store_row_type {
	size_t        size;
	enum cs_err (*read)(struct store_stmt *st, void *row);   /* NULL: by members */
	void        (*clear)(void *row);     /* NULL: the row holds only its block */
	size_t        block;                 /* with clear NULL: offsetof the row's char *block */
	bool          wipe;                  /* with clear NULL: zeroed with OPENSSL_cleanse */
	const struct store_member *members;  /* with read NULL: column i into members[i]; with
	                                      * clear NULL: the blobs the clear frees */
	size_t        nmembers;
};
/* The row type of T, read by read, whose only allocation is its member
 * `char *block` (store_cols_text) and holds no secret. */
#define STORE_ROW_BLOCK(T, read) { sizeof(T), (read), NULL, offsetof(T, block), false, NULL, 0 }
/* The same for a row that holds a hash or a token of its own (a session's
 * CSRF token, a refresh token's hash): its clear wipes the row itself
 * (OPENSSL_cleanse) after freeing its block. */
#define STORE_ROW_BLOCK_WIPED(T, read) { sizeof(T), (read), NULL, offsetof(T, block), true, \
	NULL, 0 }
/* The row type of T whose columns are members (a static array of
 * struct store_member, one a column of the SELECT list, in its order). */
#define STORE_ROW_MEMBERS(T, members) { sizeof(T), NULL, NULL, offsetof(T, block), false, \
	(members), sizeof(members) / sizeof((members)[0]) }
#define STORE_ROW_MEMBERS_WIPED(T, members) { sizeof(T), NULL, NULL, offsetof(T, block), true, \
	(members), sizeof(members) / sizeof((members)[0]) }
/* Releases what row holds and zeroes it: t->clear, or else frees its block
 * and its blob members, each wiped first (and wipes the row when t->wipe);
 * NULL-safe. */
void store_row_clear(const struct store_row_type *t, void *row);
/* store_row_clear on rows[0 .. n-1], then frees the array; NULL-safe. */
void store_rows_free(const struct store_row_type *t, void *rows, size_t n);
/* Steps a bound query into a calloc'd array of at most max rows of type t;
 * always finishes st.  CS_OK: *out holds *n rows (NULL when none).  On an
 * error the rows read so far are released (store_rows_free). */
enum cs_err store_rows(struct store_conn *c, struct store_stmt *st, size_t max,
    const struct store_row_type *t, void **out, size_t *n) CS_MUST_CHECK;
/* store_query + store_rows: the rows of sql with v[0 .. nv-1] bound, at most
 * max of type t, as store_rows hands them out (CS_OK: *out holds *n rows). */
enum cs_err store_list(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t nv, size_t max, const struct store_row_type *t, void **out, size_t *n) CS_MUST_CHECK;
/* store_list of a statement written once per dialect (store_stmt_dialect). */
enum cs_err store_list_dialect(struct store_conn *c, const char *sqlite_sql, const char *pg_sql,
    const struct store_val *v, size_t nv, size_t max, const struct store_row_type *t,
    void **out, size_t *n) CS_MUST_CHECK;
/* store_rows for a listing that must not stop at a cap (a key that still
 * verifies, every sealed row a rekey must reach): every row of st, in an
 * array that grows as they come. */
enum cs_err store_rows_all(struct store_conn *c, struct store_stmt *st,
    const struct store_row_type *t, void **out, size_t *n) CS_MUST_CHECK;
/* The functions a kind of row has, written once here rather than out in
 * each store_X.c, for rows of type T read through the table rows (a static
 * const struct store_row_type):
 * - STORE_ROW_CLEAR_FN: the exported clear_fn(T *) its header declares,
 *   store_row_clear;
 * - STORE_ROWS_FREE_FN: the exported free_fn(T *, size_t n) of an array of
 *   n of them, store_rows_free;
 * - STORE_ROW_LIST_FN: the file's own static fn(c, sql, v, nv, max, T **out,
 *   size_t *n), store_list typed for T (*out written only on CS_OK);
 * - STORE_ROW_LIST_DIALECT_FN: the same for store_list_dialect,
 *   fn(c, sqlite_sql, pg_sql, v, nv, max, T **out, size_t *n). */
#define STORE_ROW_CLEAR_FN(T, rows, clear_fn) \
	void clear_fn(T *r) { store_row_clear(&(rows), r); }
#define STORE_ROWS_FREE_FN(T, rows, free_fn) \
	void free_fn(T *v, size_t n) { store_rows_free(&(rows), v, n); }
#define STORE_ROW_LIST_DIALECT_FN(T, rows, fn) \
	static enum cs_err fn(struct store_conn *c, const char *sqlite_sql, const char *pg_sql, \
	    const struct store_val *v, size_t nv, size_t max, T **out, size_t *n) \
	{ \
		void *got = NULL; \
		enum cs_err e = store_list_dialect(c, sqlite_sql, pg_sql, v, nv, max, &(rows), \
		    &got, n); \
		if (e == CS_OK) \
			*out = got; \
		return e; \
	}
#define STORE_ROW_LIST_FN(T, rows, fn) \
	static enum cs_err fn(struct store_conn *c, const char *sql, const struct store_val *v, \
	    size_t nv, size_t max, T **out, size_t *n) \
	{ \
		void *got = NULL; \
		enum cs_err e = store_list(c, sql, v, nv, max, &(rows), &got, n); \
		if (e == CS_OK) \
			*out = got; \
		return e; \
	}
/* store_query, one step and t->read into *out (a single row of type t);
 * always finishes the statement.  CS_ENOENT when there is no row (*out
 * untouched); after a failed read *out is left zeroed. */
enum cs_err store_get(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n, const struct store_row_type *t, void *out) CS_MUST_CHECK;
/* store_query, one step, and the row's columns 0 .. nout-1 as integers into
 * out[0 .. nout-1]; always finishes the statement.  CS_ENOENT when there is
 * no row (out untouched). */
enum cs_err store_get_ints(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n, int64_t *out, size_t nout) CS_MUST_CHECK;
/* store_get_ints for an aggregate (count, sum), which always answers one
 * row: no row is CS_EDB. */
enum cs_err store_aggregate(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n, int64_t *out, size_t nout) CS_MUST_CHECK;
/* store_run for an UPDATE of one row: CS_ENOENT unless it changed exactly
 * one. */
enum cs_err store_run_one(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n) CS_MUST_CHECK;
/* store_run that tells whether it changed a row: *changed written on CS_OK. */
enum cs_err store_run_changed(struct store_conn *c, const char *sql, const struct store_val *v,
    size_t n, int *changed) CS_MUST_CHECK;
/* Notes entry seq of chain with link as the open transaction's last audit
 * entry, for store_commit's audit hook (store_audit_append calls it). */
void store_audit_appended(struct store_conn *c, int64_t chain, int64_t seq,
    const unsigned char link[STORE_AUDIT_LINK_LEN]);
/* The open transaction's own last audit entry, which is the chain's head (the
 * transaction holds the one writer: nobody else appended since), for
 * store_audit_head: true with *seq and link written; false outside a
 * transaction, before its first append, and after store_audit_head_forget
 * (entries rewritten or removed: the next head is read from the table). */
bool store_audit_head_known(struct store_conn *c, int64_t *seq,
    unsigned char link[STORE_AUDIT_LINK_LEN]);
void store_audit_head_forget(struct store_conn *c);
/* store_audit_head read the head with SQL (store_writer_stats counts it). */
void store_audit_head_was_read(struct store_conn *c);
/* The process's own audit chain (migration 0028; store_audit.c).  The chain
 * it appends to (0: none claimed yet, or the shared chain), and in *own
 * whether it is to claim one of its own. */
int64_t store_audit_chain_of(struct store_conn *c, bool *own);
/* The open transaction claimed chain: the process's once that transaction
 * commits; forgotten if it does not. */
void store_audit_chain_claimed(struct store_conn *c, int64_t chain);
/* The head of chain, the process's, as its transactions before this one
 * left it, when nobody else can have appended since: true with *seq and
 * link.  With own_chains (PostgreSQL) the process's last commit's (nobody
 * else appends to its chain; numbers come from the sequence); otherwise
 * (SQLite) the writer's, inside a transaction that rewrote no link, and
 * the next number is then *seq + 1. */
bool store_audit_chain_head(struct store_conn *c, int64_t chain, int64_t *seq,
    unsigned char link[STORE_AUDIT_LINK_LEN]);
/* Whether entry numbers come from the database's sequence (store_backend
 * own_chains: many writers), taken by the transaction ahead of its appends
 * (store_audit_reserve): store_audit_number_take hands out the next one
 * (false when none is left), store_audit_numbers_add keeps n (at most
 * STORE_AUDIT_RESERVE) for the open transaction. */
#define STORE_AUDIT_RESERVE 64
bool store_audit_numbers_from_sequence(struct store_conn *c);
bool store_audit_number_take(struct store_conn *c, int64_t *seq);
void store_audit_numbers_add(struct store_conn *c, const int64_t *v, size_t n);
/* The group commit as seen from outside, for tests and benchmarks: callers
 * waiting for the writer's turn now, and since store_open the COMMITs made
 * (batches), the transactions they made durable and the WAL checkpoints run
 * off the writer. */
struct store_writer_stats {
	bool     stopping;
	unsigned waiting;
	unsigned queued;             /* store_transact jobs waiting to be run (SQLite) */
	uint64_t batches;
	uint64_t transactions;
	uint64_t checkpoints;        /* WAL checkpoints the checkpointer ran */
	uint64_t lingers;            /* batches left open for requests under way */
	uint64_t wal_restarts;       /* the WAL begun again from its start (SQLite) */
	uint64_t wal_restarts_busy;  /* restarts that gave up: a reader stayed in the WAL */
	unsigned requests;           /* requests under way (store_requests; SQLite) */
	uint64_t reprepares;         /* statements SQLite prepared again itself, in this
	                                process (SQLite; tests: none of ours should) */
	uint64_t audit_head_reads;   /* audit chain heads read with SQL (store_audit_head),
	                                not remembered from a transaction before */
	uint64_t foreign_commits;    /* batches begun after another connection had
	                                committed (SQLite: the writer's head forgotten) */
};
void store_writer_stats(struct store *s, struct store_writer_stats *out);
/* SQLite's linger (store_requests): fixed_us != 0 lingers exactly that long
 * whatever the COMMITs take (tests); 0, as long as a COMMIT takes (capped).
 * Other engines: nothing. */
void store_set_linger(struct store *s, unsigned fixed_us);
/* Rows changed by the connection's last statement. */
int64_t store_changes(struct store_conn *c);

#endif
