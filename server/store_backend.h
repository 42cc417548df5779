/* store_backend.h -- the seam between the store's dispatcher (store.c) and
 * its two engines, one file each: SQLite (store_sqlite.c) and PostgreSQL
 * (store_pg.c), as curl keeps its TLS backends (struct Curl_ssl, vtls.c the
 * only dispatcher).  Only those three files include it.  A backend never
 * calls into store.c: what it needs from above (publishing the last audit
 * entry a commit made durable) it is handed at open as a callback; the
 * dispatcher never looks inside a backend's handles, and no file outside
 * these three asks which engine it runs on (scripts/lint.sh holds both). */
#ifndef CS_STORE_BACKEND_H
#define CS_STORE_BACKEND_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "embed.h"
#include "metrics.h"
#include "store.h"
#include "store_priv.h"

/* A backend's handles, opaque above it: its open database (the one writer,
 * the URL and the write queue) and one thread's connection to it.  Neither
 * struct is ever defined: each backend casts them to its own. */
struct store_db;
struct store_link;


/* The head of every prepared statement: the backend it belongs to.  A
 * backend's own statement begins with it, so the dispatcher hands column
 * reads and steps to the right backend without a branch. */
struct store_stmt {
	const struct store_backend *be;
};

/* The last audit entry a transaction appended (store_audit_appended), and
 * what else its commit settles about the process's chain. */
struct store_audit_mark {
	bool          set;
	int64_t       chain;              /* the chain it went to */
	int64_t       seq;
	unsigned char link[STORE_AUDIT_LINK_LEN];
	bool          rewritten;          /* it relinked or pruned entries */
	bool          claimed;            /* it claimed the process's chain */
};

/* The dispatcher's, handed to a backend at open: publish(arg, ...) gives the
 * audit hook an entry once the commit that holds it is durable, before its
 * committer's store_commit returns.  only_newer: pass it on only when later
 * than the last one given (commits of a shared database reach this node's
 * hook in any order; the heads it publishes must only grow). */
struct store_publisher {
	void  (*publish)(void *arg, int64_t seq, const unsigned char link[STORE_AUDIT_LINK_LEN],
	    bool only_newer);
	/* An engine with own_chains calls it once a COMMIT has answered (ok:
	 * committed; unknown: the connection went before the answer, so it may
	 * have committed or not) and BEFORE the next transaction of the process
	 * may begin: the chain's head the next one reads must be this one's. */
	void  (*settle)(void *arg, const struct store_audit_mark *mark, bool ok, bool unknown);
	void   *arg;
};

/* The statements written once per dialect (a clause one engine has no word
 * for): index into store_stmt_dialect's pair. */
enum store_dialect {
	STORE_DIALECT_SQLITE,
	STORE_DIALECT_PG,
	STORE_DIALECT__MAX
};

/* One engine.  Every member is set; a backend that has nothing to do for
 * one says so in its own file (a PostgreSQL store has no writer queue in
 * the process to drain, a SQLite one no other node to wait for). */
/* A transaction for store_transact: the engine's run calls step (which
 * begins the dispatcher's state, calls the body and sets mark, the commit's
 * audit mark) inside a savepoint of its writer, on whichever thread holds
 * the turn, and sets kept. */
struct store_tx_job {
	struct store_link       *k;
	enum cs_err            (*step)(struct store_tx_job *j, bool *keep);
	/* Called at once when the job was rolled back (not kept), before the
	 * engine runs anything else: what store_rollback undoes above the
	 * engine (a chain claimed in it).  NULL: nothing. */
	void                   (*undo)(struct store_tx_job *j);
	struct store_audit_mark  mark;
	bool                     kept;     /* committed (when run returns CS_OK) */
	struct store_conn       *c;
	enum cs_err            (*body)(struct store_conn *c, void *arg, bool *keep);
	void                    *arg;
};

struct store_backend {
	const char         *name;         /* store_engine_name: "sqlite", "postgresql" */
	enum store_dialect  dialect;
	/* Each process appends to an audit chain of its own (many writers on one
	 * database, migration 0028), keeps its chain's head between transactions
	 * and takes entry numbers in blocks; false: every process appends to the
	 * shared chain 0 under the engine's one writer, the next number one past
	 * the head, which the engine keeps (audit_head) while no other
	 * connection commits and reads again after one did (SQLite). */
	bool                own_chains;
	/* Whether loc names a database of this engine (the dispatcher asks the
	 * PostgreSQL one first; SQLite takes any other location, a file path). */
	bool        (*claims)(const char *loc);
	/* A [database] url as this engine would use it, without connecting. */
	enum cs_err (*url_check)(const char *url, char *why, size_t whylen);

	/* The database: open (no connection yet), then schema_open on the first
	 * connection (migrate, or check the schema per o->schema); stop drains
	 * what the process queued; close after every connection is closed
	 * (NULL-safe). */
	enum cs_err (*open)(const char *loc, const struct store_opts *o,
	    const struct store_publisher *pub, struct store_db **out);
	enum cs_err (*schema_open)(struct store_link *k, enum store_schema_policy pol);
	void        (*stop)(struct store_db *d);
	void        (*close)(struct store_db *d);
	void        (*set_write_queue)(struct store_db *d, unsigned max);
	void        (*writer_stats)(struct store_db *d, struct store_writer_stats *out);
	/* A request began (+1) or ended (-1): how many are under way, for an
	 * engine whose group commit waits for them (SQLite; NULL: not used). */
	void        (*requests)(struct store_db *d, int delta);
	/* The group commit's linger fixed at fixed_us for tests (0: the
	 * engine's measure); NULL where there is none. */
	void        (*set_linger)(struct store_db *d, unsigned fixed_us);

	/* One thread's connection (NULL on failure, said on the log). */
	struct store_link *(*link_open)(struct store_db *d);
	void        (*link_close)(struct store_link *k);   /* NULL-safe */

	/* Statements (store_priv.h's contracts).  bind: copy false only for a
	 * caller that steps and finishes the statement before v goes; on
	 * failure the dispatcher finishes it.  step: CS_OK with a row, CS_ENOENT
	 * when done.  exec: steps a statement that returns no rows to its end
	 * and finishes it, in every case. */
	struct store_stmt *(*stmt)(struct store_link *k, const char *sql);
	void        (*stmt_done)(struct store_stmt *st);
	enum cs_err (*bind)(struct store_stmt *st, const struct store_val *v, size_t n, bool copy);
	enum cs_err (*step)(struct store_stmt *st);
	enum cs_err (*exec)(struct store_stmt *st);
	/* bind (copy false) and exec, except that inside a transaction the
	 * engine may send it and answer before it has run (store_run_later);
	 * st is left finished either way.  NULL: the engine has no round trip
	 * to save, and store_run_later is store_run (SQLite). */
	enum cs_err (*run_later)(struct store_stmt *st, const struct store_val *v, size_t n);
	int64_t     (*changes)(struct store_link *k);

	/* The current row's columns. */
	enum store_col_kind (*col_type)(struct store_stmt *st, int i);
	int64_t     (*col_int64)(struct store_stmt *st, int i);
	int         (*col_bytes)(struct store_stmt *st, int i);
	const void *(*col_raw_blob)(struct store_stmt *st, int i);
	const unsigned char *(*col_raw_text)(struct store_stmt *st, int i);
	int         (*col_count)(struct store_stmt *st);
	const char *(*col_name)(struct store_stmt *st, int i);
	/* Whether the NULL col_raw_text just gave means no memory, not a NULL column. */
	bool        (*col_nomem)(struct store_stmt *st);

	/* Transactions (store.h's contracts; the dispatcher refuses nesting).
	 * commit makes the writes durable and publishes mark (when set) first;
	 * rollback with in_tx false only lets go of anything left open. */
	enum cs_err (*begin)(struct store_link *k);
	enum cs_err (*commit)(struct store_link *k, const struct store_audit_mark *mark);
	void        (*rollback)(struct store_link *k, bool in_tx);
	/* store_transact's job, run by the writer's turn holder (SQLite).  NULL:
	 * the dispatcher runs it between begin and commit on the caller's thread. */
	enum cs_err (*transact)(struct store_link *k, struct store_tx_job *j);
	/* The head of the process's audit chain as the engine keeps it between
	 * transactions, for the transaction open on k: true with *seq and link
	 * when it is chain's and nobody can have appended since, so that the
	 * next entry's number is *seq + 1.  The engine learns it from commit's
	 * mark (and forgets it when the mark says rewritten).  NULL: the engine
	 * keeps none (PostgreSQL: the dispatcher's settle keeps the process's). */
	bool        (*audit_head)(struct store_link *k, int64_t chain, int64_t *seq,
	    unsigned char link[STORE_AUDIT_LINK_LEN]);

	/* Whether the transaction begun last on k failed because another
	 * writer's conflicted with it (a serialisation failure or deadlock: run
	 * again, it may pass).  NULL: the engine has one writer (SQLite). */
	bool        (*conflicted)(struct store_link *k);
	enum cs_err (*ping)(struct store_link *k);
	enum cs_err (*schema_version)(struct store_link *k, int *out);
	enum cs_err (*backup)(struct store_link *k, const char *dest_path);
	enum cs_err (*flight_begin)(struct store_link *k, const char *key);
	void        (*flight_end)(struct store_link *k);

	/* `consentd db copy`: copy_source gives the SQLite database a copy
	 * reads (NULL: this engine is no source), copy_in fills an empty
	 * database from one (CS_EINVAL: this engine is no destination). */
	struct sqlite3 *(*copy_source)(struct store_link *k);
	enum cs_err (*copy_in)(struct store_link *k, struct sqlite3 *src,
	    struct store_copy_report *r);
};

extern const struct store_backend store_backend_sqlite;
extern const struct store_backend store_backend_pg;

/* The version of a migration named "NNNN_what.sql"; -1 when misnamed. */
static inline int store_migration_version(const char *name)
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

/* The highest version of a set of migrations (embed.h). */
static inline int store_migrations_known(const struct embedded_file *set)
{
	int max = 0;
	for (const struct embedded_file *f = set; f->name != NULL; f++) {
		int v = store_migration_version(f->name);
		if (v > max)
			max = v;
	}
	return max;
}

/* consentd_db_commit_seconds and _batch_size: one observation per COMMIT
 * that made n transactions durable, timed from t0.  Returns the seconds
 * observed (0 for a COMMIT that failed: nothing observed). */
static inline double store_count_commit(const struct timespec *t0, enum cs_err e, unsigned n)
{
	struct timespec t1;
	if (e != CS_OK)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
	metrics_observe(metric[M_DB_COMMIT_SECONDS], NULL, s);
	metrics_observe(metric[M_DB_COMMIT_BATCH], NULL, (double)n);
	return s;
}

#endif
