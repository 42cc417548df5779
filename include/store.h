/* store.h -- the only door to SQL.  Two engines behind one seam: a SQLite
 * file (WAL, one reading connection per thread, one writer shared through a
 * group commit, migrations from migrations/ applied at start) or a PostgreSQL
 * database named by a postgresql:// URL (many nodes on one database, its
 * schema from migrations/pg/, changed only by `consentd migrate`).  Every
 * statement is prepared with bound parameters.  No SQL elsewhere.
 *
 * The layers: this header and the store_X.h of each family (keys, user,
 * session, consent, grant, vault, approval, audit, events, replay, admin) are
 * engine-neutral: plain C types, no SQLite or libpq type, no SQL, and a
 * connection and a transaction are opaque.  Below them, server/store_X.c
 * holds X's SQL, written once for both engines, and runs it through
 * server/store_priv.h; server/store.c is the one dispatcher, which hands every
 * call to the engine the store was opened on through server/store_backend.h;
 * server/store_sqlite.c and server/store_pg.c are the engines, one file each,
 * and the only files that know which engine they are.  Group commit lives
 * below the line too, behind store_begin / store_commit: an engine makes many
 * callers' transactions durable together, and each caller's store_commit
 * returns only once its own writes are durable. */
#ifndef CS_STORE_H
#define CS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"

struct store;        /* process-wide handle: the engine and its database */
struct store_conn;   /* one thread's connection to it; owned by one thread at a time */

/* Opens (creating if needed) the SQLite database at path, sets WAL, foreign_keys=ON,
 * busy_timeout, synchronous=FULL, and applies pending migrations, each in one
 * transaction, recording them in schema_version.  A database whose schema is
 * newer than this binary knows fails with CS_ESCHEMA (and a message on stderr). */
enum cs_err store_open(const char *path, struct store **out) CS_MUST_CHECK;

/* What a node does with a PostgreSQL schema older than it knows.  SQLite
 * always migrates (one process owns the file); a PostgreSQL database is
 * shared by many nodes, so only `consentd migrate` (MIGRATE) changes it. */
enum store_schema_policy {
	STORE_SCHEMA_REQUIRE,        /* CS_ESCHEMA unless current (the CLI tools) */
	STORE_SCHEMA_WAIT,           /* open anyway; store_ping says CS_ESCHEMA until migrated */
	STORE_SCHEMA_MIGRATE,        /* apply what is pending (consentd migrate) */
};
struct store_opts {
	const char               *password;   /* PostgreSQL; NULL: libpq's own (PGPASSWORD, ~/.pgpass) */
	bool                      unprepared; /* PostgreSQL: send statements unnamed (PgBouncer
	                                         < 1.21 in transaction mode) */
	enum store_schema_policy  schema;
};
/* store_open on loc: a SQLite file path, or a postgresql:// URL (store_pg.c).
 * With no o, STORE_SCHEMA_REQUIRE and libpq's own password.
 * Newer schemas than this binary knows fail with CS_ESCHEMA either way. */
enum cs_err store_open_with(const char *loc, const struct store_opts *o,
    struct store **out) CS_MUST_CHECK;
/* Checks a [database] url without connecting: a postgresql:// URL libpq
 * parses, with no password in it.  why gets the failing check. */
enum cs_err store_url_check(const char *url, char *why, size_t whylen) CS_MUST_CHECK;
/* Single flight across processes: while one caller holds key (any node on
 * the same database), another store_flight_begin on key waits for its
 * store_flight_end (at most STORE_FLIGHT_WAIT_S, then CS_EBUSY).  A holder
 * that dies lets go.  Never call it inside a transaction; one key at a time
 * per connection.  SQLite: one process owns the file, and the caller's own
 * in-process single flight is the whole of it, so CS_OK at once. */
#define STORE_FLIGHT_WAIT_S 30
enum cs_err store_flight_begin(struct store_conn *c, const char *key) CS_MUST_CHECK;
void store_flight_end(struct store_conn *c);
/* `consentd db copy`: every row of a SQLite store (from) into an empty
 * PostgreSQL store (to) of the same schema version, in one read snapshot of
 * from and one SERIALIZABLE transaction of to (a node writing meanwhile
 * makes one of the two fail), tables parents first, each in its rowid
 * order; then the identity sequences past the highest ids, and each
 * table's count held against the source's.  A destination with any row is refused
 * (CS_EEXIST); nothing is written unless everything is.  report gets the
 * tables and their counts. */
#define STORE_COPY_TABLES 64
struct store_copy_report {
	size_t ntables;
	struct {
		char    name[64];
		int64_t rows;            /* copied, and counted on both sides */
	} t[STORE_COPY_TABLES];
	char why[160];               /* what failed, when it did */
};
enum cs_err store_copy(struct store *from, struct store *to,
    struct store_copy_report *report) CS_MUST_CHECK;
/* The engine the store was opened on: "sqlite" or "postgresql" (for
 * messages and tests; no caller branches on it).  NULL for NULL. */
const char *store_engine_name(const struct store *s);
/* Closes the calling thread's connection too.  NULL-safe. */
void store_close(struct store *s);

/* The calling thread's connection, opened on first use and closed when the
 * thread exits (or at store_close for the thread that calls it).  NULL on failure. */
struct store_conn *store_conn(struct store *s);

/* The highest migration this binary knows, and the one the database has. */
int store_schema_known(void);
enum cs_err store_schema_version(struct store_conn *c, int *out) CS_MUST_CHECK;

/* A consistent copy of the database into dest_path (a new or empty file), made
 * with SQLite's online backup API while the server writes: a few pages at a
 * time with short sleeps between, so that no writer waits long; a copy that
 * keeps restarting under writes is finished in one step.  Then the copy must
 * pass PRAGMA integrity_check (CS_EDB otherwise, said on the log).  The copy
 * is closed, not fsync'ed, when this returns; the caller places it. */
enum cs_err store_backup(struct store_conn *c, const char *dest_path) CS_MUST_CHECK;

/* A cheap "is the database there" check for /readyz. */
enum cs_err store_ping(struct store_conn *c) CS_MUST_CHECK;

/* Transactions, one at a time per connection, serialised across the threads
 * of a process (one writer per store) and, on SQLite, made durable in groups
 * (the group commit, store_sqlite.c):
 * - store_begin waits for the writer's turn: CS_EBUSY (answer 503) when
 *   the write queue is full, the store is stopping, or no turn came within
 *   5 s.  Nested transactions are refused (CS_EDB).
 * - On PostgreSQL the turn is the process's only: other processes (nodes)
 *   on the same database run their transactions at the same time, each at
 *   ISOLATION LEVEL SERIALIZABLE, so a read-check-write between store_begin
 *   and store_commit holds against them too: of two that conflict, one
 *   fails with CS_EBUSY (answer 503) at a statement or at store_commit,
 *   and is rolled back whole.  Nothing retries it below this line: a
 *   caller whose transaction is one whole function may (store_retry).
 * - store_commit returns CS_OK only when the transaction's writes are
 *   durable (synchronous = FULL), committed together with those of the
 *   transactions that ended around it; an error means none of its writes
 *   stay.  It may wait for others' commit: never call it holding a lock
 *   another caller of store_begin could need.
 * - store_rollback undoes only this transaction (NULL-safe, quiet, for use
 *   after `out:`).
 * When the transaction appended audit entries, the audit hook (below) has
 * been called with its batch's last entry before store_commit returns. */
enum cs_err store_begin(struct store_conn *c) CS_MUST_CHECK;
/* Whether the last transaction on c failed because another node's conflicted
 * with it (PostgreSQL: a serialisation failure or a deadlock, SQLSTATE 40001
 * or 40P01; never on SQLite).  Such a transaction was rolled back whole and
 * may pass if run again. */
bool store_conflicted(struct store_conn *c);
/* For a function that is one whole transaction with no effect outside the
 * database (it begins, and commits or rolls back, itself):
 *     int n = 0;
 *     do e = the_transaction(c, ...); while (store_retry(c, e, &n));
 * true (after a short jitter) when e is such a conflict and fewer than
 * STORE_RETRIES runs were retried. */
#define STORE_RETRIES 4
bool store_retry(struct store_conn *c, enum cs_err e, int *attempt);
enum cs_err store_commit(struct store_conn *c) CS_MUST_CHECK;
void store_rollback(struct store_conn *c);
/* One whole transaction handed to the writer: body runs between a begin and
 * a commit (or a rollback), with the contracts of store_begin and
 * store_commit above, and its caller learns how it ended.  *keep is false
 * when it enters body; body sets it to have its writes committed, and a body
 * that returns an error or leaves it false is rolled back (only its own
 * writes).  CS_OK and *kept true: committed and durable; CS_OK and *kept
 * false: rolled back by body's choice; an error: nothing of it stays.
 * On SQLite body may run on another thread -- the holder of the writer's
 * turn runs every transaction queued for it, one after another, and then
 * commits them together (store_sqlite.c, "transactions the turn's holder
 * runs"): that hand-over saves the turn's hand-over between threads.  So
 * body must use only c and arg: no thread-local state, no store_conn(),
 * and nothing that waits on anyone else (a lock, the network).  Other
 * engines run it on the caller's thread. */
enum cs_err store_transact(struct store_conn *c,
    enum cs_err (*body)(struct store_conn *c, void *arg, bool *keep), void *arg,
    bool *kept) CS_MUST_CHECK;
/* Ends the open transaction by how it went, e: store_commit when e is CS_OK,
 * else store_rollback, as after a COMMIT that failed.  Returns e, or the
 * COMMIT's error. */
enum cs_err store_end(struct store_conn *c, enum cs_err e) CS_MUST_CHECK;

/* At most max callers wait for the writer's turn ([database] write_queue);
 * the next one gets CS_EBUSY at once rather than a place in an unbounded
 * queue.  0 refuses every caller that would have to wait. */
#define STORE_WRITE_QUEUE_DEFAULT 256
void store_set_write_queue(struct store *s, unsigned max);
/* A request began (delta +1) or ended (-1).  The HTTP layer counts every
 * request: SQLite's group commit leaves a batch open for a fraction of an
 * fsync while more are under way than it holds or queues (the linger,
 * store_sqlite.c), so that a wave of requests shares one COMMIT.  NULL-safe. */
void store_requests(struct store *s, int delta);
/* How many are under way now, as the group commit counts them (0 on an
 * engine that does not: PostgreSQL). */
unsigned store_requests_under_way(struct store *s);
/* An orderly stop of the writer: from now on store_begin answers CS_EBUSY;
 * returns once every transaction that held or waited for a turn has ended
 * and everything committed is durable.  store_close calls it.  Never call
 * it from inside a transaction. */
void store_stop(struct store *s);

/* Called with the number and link of the last audit entry a committed batch
 * of transactions appended.  Calls for one store come one at a time and in
 * commit order (the committer holds the writer's turn through the call), so
 * the hook must be quick and must not use the store's transactions itself. */
#define STORE_AUDIT_LINK_LEN 32
typedef void (*store_audit_hook)(void *arg, int64_t seq,
    const unsigned char link[STORE_AUDIT_LINK_LEN]);
/* Installs fn (NULL removes it); the audit publisher (audit_head.c) is the one user. */
void store_set_audit_hook(struct store *s, store_audit_hook fn, void *arg);
/* With own true, s appends to an audit chain of its own, claimed at its first
 * append, as every process on PostgreSQL does (migration 0028): for tests
 * that run many "nodes" on one SQLite file, and for tools.  An engine whose
 * processes always have their own chains ignores false. */
void store_own_chains(struct store *s, bool own);

/* New sealed blobs (seal.h) for one row, and the master key that sealed them:
 * a vault record's access (a) and refresh (b) token, or a signing key (a). */
struct store_sealed_blobs {
	const unsigned char *a;      /* never NULL */
	size_t               a_len;
	const unsigned char *b;      /* NULL when none */
	size_t               b_len;
	const char          *master_kid;
};

#endif
