/* store_pg.c -- the PostgreSQL backend (store_backend.h): libpq, one
 * connection per thread, statements prepared once per connection (or, for a
 * pooler that cannot keep them, sent with their parameters every time),
 * results read in text form.  It is reached only through store.c's dispatch
 * table and calls nothing of store.c's.
 *
 * The SQL is the store_X.c files' own: "?N" becomes "$N" here, each
 * parameter's type comes from how it is bound (an SV_INT is int8, an SV_TEXT
 * text, a blob bytea), and migrations/pg/ gives the same tables the same
 * columns as migrations/ does for SQLite (one schema contract).
 *
 * Transactions: one writer per node, SERIALIZABLE across the nodes.
 * - Within a process (a node) transactions run one at a time, as SQLite's
 *   do: each takes the store's writer turn (struct pg_store's turn, an
 *   in-process mutex and condition) right after its BEGIN is answered and
 *   gives it back when it ends -- COMMIT, ROLLBACK, or its connection lost
 *   or closed.
 *   So a node's own transactions are in one order (the order of its audit
 *   chain) and never conflict with each other.  The queue for the turn is
 *   bounded ([database] write_queue) and so is the wait (PG_TURN_WAIT_S):
 *   then CS_EBUSY, a 503.
 * - Across nodes nothing is waited for in consentd: every transaction runs
 *   at ISOLATION LEVEL SERIALIZABLE, so a read-check-write inside one is
 *   safe against the other nodes' by construction: PostgreSQL's SSI aborts
 *   one of two transactions whose reads and writes conflict, with SQLSTATE
 *   40001 at a statement or at the COMMIT (or 40P01 for a deadlock).  That
 *   is CS_EBUSY too (pg_err), counted once per transaction in
 *   consentd_db_conflicts_total; the transaction is rolled back whole.
 *   Nothing retries here (the callers interleave their own logic between
 *   store_begin and store_commit): a caller whose transaction is one whole
 *   function runs it again (store_retry), any other answers 503.
 * SERIALIZABLE's snapshot is taken at the transaction's first query -- not
 * at BEGIN nor SET LOCAL -- after the turn was had, so the node's previous
 * transaction is in it (test_store_pg_snapshot_after_turn).
 * A node so writes at most 1 / (the time a transaction holds the turn)
 * transactions a second (consentd_db_lock_hold_seconds; waits:
 * consentd_db_lock_wait_seconds), and the cluster at most that many times
 * its nodes, less what conflicts cost; that time is mostly round trips: a write whose answer
 * nothing reads (store_run_later: an audit entry, a grant row) is sent
 * without waiting and goes in one flight with the next statement or the
 * COMMIT (libpq's pipeline mode, below). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>
#include <sqlite3.h>
#include <openssl/crypto.h>

#include "buf.h"
#include "embed.h"
#include "log.h"
#include "metrics.h"
#include "store_backend.h"

/* The migrations' advisory lock key (0x636f6e73656e7402: "consent", 02;
 * 01 was the cluster-wide write lock every transaction took before). */
#define PG_MIGRATE_LOCK "7165066974071780354"
/* How long a transaction waits for the node's writer turn, and for a row
 * lock another node's transaction holds: then CS_EBUSY (503). */
#define PG_TURN_WAIT_S 5
#define PG_LOCK_WAIT "5s"
#define PG_MAX_PARAMS 32
#define PG_MAX_COLS 64                /* bytea columns decoded per row */
#define PG_SLOTS 512                  /* statements per connection, a power of two */
#define PG_MAX_STR (1024 * 1024)
/* Writes sent ahead at most before a flight is ended anyway: their answers
 * are a few bytes each, far below what the server's socket holds, so the
 * server never blocks writing answers while we still send (the pipeline's
 * deadlock), whatever a batch holds. */
#define PG_MAX_PENDING 64

/* The OIDs of the built-in types we send and read (pg_type.h). */
#define OID_BOOL    16
#define OID_BYTEA   17
#define OID_INT8    20
#define OID_INT2    21
#define OID_INT4    23
#define OID_TEXT    25
#define OID_FLOAT4  700
#define OID_FLOAT8  701
#define OID_NUMERIC 1700

struct pg_store {
	char           *url;
	char           *password;         /* NULL when the URL's environment gives none */
	bool            prepared;         /* named prepared statements (not behind a pooler) */
	/* The writer turn: one transaction at a time in this process.  A
	 * condition rather than holding a mutex through the transaction: the
	 * turn is given back by whichever thread ends it (store_close closes
	 * other threads' connections), and the wait is bounded. */
	pthread_mutex_t mu;
	pthread_cond_t  turn_cv;          /* the turn became free */
	pthread_cond_t  done_cv;          /* a turn or a wait ended while stopping */
	bool            busy;             /* someone holds the turn (guarded by mu) */
	bool            stopping;         /* store_stop: no new turns (guarded by mu) */
	bool            sync_ok;          /* mu and the conditions exist */
	unsigned        waiting;          /* callers waiting for the turn (guarded by mu) */
	unsigned        queue_max;        /* guarded by mu */
	atomic_ulong    commits;
	struct store_publisher pub;       /* the dispatcher's audit publisher */
};

struct pg_stmt {
	struct store_stmt  h;             /* the head store_X.c holds: h.be = &store_backend_pg */
	struct pg_conn    *k;
	const char        *sql;           /* the key: the static constant's address */
	char              *text;          /* with $N */
	int                nparams;
	char               name[16];      /* the prepared statement's, on connection gen */
	unsigned           gen;           /* 0: not prepared */
	bool               typed;
	Oid                types[PG_MAX_PARAMS];
	PGresult          *res;
	int                row;           /* the current row, -1 before the first */
	bool               executed;
	int                ndec;          /* columns with a decoded bytea this row */
	unsigned char     *dec[PG_MAX_COLS];
	size_t             declen[PG_MAX_COLS];
};

static void pg_rollback(struct pg_conn *k);
static void pg_store_close(struct pg_store *p);
static void turn_release(struct pg_conn *k);

/* The statement behind a head this backend made (pg_stmt). */
static struct pg_stmt *pgs(struct store_stmt *st) { return (struct pg_stmt *)st; }

struct pg_conn {
	struct pg_store *p;
	PGconn          *db;
	unsigned         gen;             /* bumped at every (re)connect: prepared statements go */
	unsigned         names;
	bool             in_tx;
	bool             locked;          /* holds the store's writer turn, since locked_at */
	bool             conflicted;      /* this transaction counted in consentd_db_conflicts_total */
	bool             piped;           /* in libpq's pipeline mode (pg_run_later) */
	int              pending;         /* statements sent in it whose results are unread */
	struct timespec  locked_at;
	PGconn          *flight;          /* store_flight_begin's, opened on first use */
	bool             flying;
	int64_t          changes;
	struct pg_stmt  *slots[PG_SLOTS];
	size_t           nslots;
};

static bool pg_is_url(const char *loc)
{
	return loc != NULL && (strncmp(loc, "postgresql://", 13) == 0 ||
	    strncmp(loc, "postgres://", 11) == 0);
}

static enum cs_err pg_url_check(const char *url, char *why, size_t whylen)
{
	char *err = NULL;
	if (!pg_is_url(url)) {
		if (str_fmt(why, whylen, "is not a postgresql:// URL") != CS_OK)
			why[0] = '\0';
		return CS_ECONFIG;
	}
	PQconninfoOption *o = PQconninfoParse(url, &err);
	if (o == NULL) {
		/* libpq's message may quote the URL: say only that it failed. */
		if (str_fmt(why, whylen, "libpq cannot parse it%s", err != NULL ? "" :
		    " (out of memory)") != CS_OK)
			why[0] = '\0';
		PQfreemem(err);
		return CS_ECONFIG;
	}
	enum cs_err e = CS_OK;
	for (PQconninfoOption *i = o; i->keyword != NULL; i++) {
		if (strcmp(i->keyword, "password") == 0 && i->val != NULL && i->val[0] != '\0') {
			if (str_fmt(why, whylen, "carries a password: give it in CONSENTD_DATABASE_PASSWORD "
			    "or [database] password_file, never in the URL (it is logged and listed)") != CS_OK)
				why[0] = '\0';
			e = CS_ECONFIG;
		}
	}
	PQconninfoFree(o);
	return e;
}

/* --- errors ------------------------------------------------------------ */

/* The SQLSTATE of a failed result as a cs_err: a unique key taken is
 * CS_EEXIST, a connection gone or the server shutting down, a lock not had in
 * time or a serialisation failure CS_EBUSY (answer 503; try again).  A
 * serialisation failure or a deadlock is another node's transaction
 * conflicting with this one: counted once per transaction (the statements
 * after it in a flight fail with 25P02 or are skipped, and are not). */
static enum cs_err pg_err(struct pg_conn *k, const PGresult *r)
{
	const char *st = r != NULL ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	if (st != NULL && (strcmp(st, "40001") == 0 || strcmp(st, "40P01") == 0) &&
	    !(k->in_tx && k->conflicted)) {
		metrics_add(metric[M_DB_CONFLICTS], NULL, 1);
		k->conflicted = k->in_tx;
	}
	if (PQstatus(k->db) != CONNECTION_OK || st == NULL || strncmp(st, "08", 2) == 0 ||
	    strncmp(st, "57", 2) == 0) {
		/* Said once per connection lost: the next use makes a new one. */
		const char *m = st != NULL ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) :
		    PQerrorMessage(k->db);
		log_msg(LOG_WARN, "database: connection lost (%.*s)%s", m != NULL ? (int)strcspn(m, "\n") : 1,
		    m != NULL ? m : "?", k->in_tx ? "; its transaction rolls back" : "");
		return CS_EBUSY;
	}
	if (strcmp(st, "23505") == 0)
		return CS_EEXIST;
	if (strncmp(st, "23", 2) == 0)
		return CS_EINVAL;
	if (strncmp(st, "08", 2) == 0 || strncmp(st, "57", 2) == 0 || strncmp(st, "53", 2) == 0 ||
	    strcmp(st, "40001") == 0 || strcmp(st, "40P01") == 0 || strcmp(st, "55P03") == 0 ||
	    strcmp(st, "25P02") == 0)
		return CS_EBUSY;
	if (strcmp(st, "54000") == 0 || strcmp(st, "22001") == 0)
		return CS_ETOOBIG;
	if (strncmp(st, "22", 2) == 0)
		return CS_EINVAL;
	return CS_EDB;
}

/* SECURITY: the primary message only, never DETAIL (which quotes the key
 * values of a constraint), and for a data exception (class 22, which quotes
 * the value) not even that. */
static void pg_log(struct pg_conn *k, const PGresult *r, const char *what)
{
	const char *st = r != NULL ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = r != NULL ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	if (st != NULL && strncmp(st, "22", 2) == 0)
		msg = "invalid value";
	if (st == NULL) {
		/* No result from the server: the connection's own message (no values in it). */
		const char *cm = PQerrorMessage(k->db);
		size_t n = strcspn(cm, "\n");
		log_msg(LOG_ERROR, "database: %s: %.*s", what, (int)n, cm);
		return;
	}
	log_msg(LOG_ERROR, "database: %s: %s (SQLSTATE %s)", what, msg ? msg : "?", st);
}

/* --- connections ------------------------------------------------------- */

static PGconn *pg_connect(const struct pg_store *p)
{
	const char *kw[] = { "dbname", "password", "application_name", "connect_timeout",
	    "keepalives_idle", "keepalives_interval", "keepalives_count", NULL };
	const char *val[] = { p->url, p->password, "consentd", "5", "10", "5", "3", NULL };
	if (p->password == NULL)
		kw[1] = "client_encoding", val[1] = "UTF8";
	PGconn *db = PQconnectdbParams(kw, val, 1);
	if (db == NULL)
		return NULL;
	if (PQstatus(db) != CONNECTION_OK) {
		const char *cm = PQerrorMessage(db);
		log_msg(LOG_ERROR, "database: cannot connect: %.*s", (int)strcspn(cm, "\n"), cm);
		PQfinish(db);
		return NULL;
	}
	PGresult *r = PQexec(db, "SET client_encoding = 'UTF8'; SET TIME ZONE 'UTC'");
	bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	if (!ok) {
		PQfinish(db);
		return NULL;
	}
	return db;
}

/* Outside a transaction, a connection that broke is made again (its prepared
 * statements go with it: gen moves on).  CS_EBUSY while the server is away.
 * Outside a transaction the connection is first asked, without blocking
 * (one recv), whether the server has closed it meanwhile (a restart, a
 * failover, an idle timeout): then a new one is made before anything is
 * sent, so that nothing is sent on a dead one, nor twice. */
static bool conn_closed_by_server(PGconn *db)
{
	struct pollfd p = { .fd = PQsocket(db), .events = POLLIN | POLLRDHUP, .revents = 0 };
	if (p.fd < 0)
		return true;
	if (poll(&p, 1, 0) < 0)
		return false;
	/* The server's FIN (or an error) is there: it said goodbye (57P01 and
	 * the like) even if libpq has not read it yet. */
	if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
		return true;
	/* Anything else that came to an idle connection (a notice) is read now. */
	return (p.revents & POLLIN) && (PQconsumeInput(db) == 0 || PQstatus(db) != CONNECTION_OK);
}

static enum cs_err pg_alive(struct pg_conn *k)
{
	if (k->db != NULL && !k->in_tx && conn_closed_by_server(k->db)) {
		PQfinish(k->db);
		k->db = NULL;
	}
	if (k->db != NULL && PQstatus(k->db) == CONNECTION_OK)
		return CS_OK;
	if (k->in_tx)
		return CS_EBUSY;
	if (k->db != NULL)
		PQfinish(k->db);
	k->db = pg_connect(k->p);
	k->gen++;
	if (k->gen == 0)
		k->gen = 1;
	return k->db != NULL ? CS_OK : CS_EBUSY;
}

static struct pg_conn *pg_conn_open(struct pg_store *p)
{
	struct pg_conn *k = calloc(1, sizeof *k);
	if (k == NULL)
		return NULL;
	k->p = p;
	if (pg_alive(k) != CS_OK) {
		free(k);
		return NULL;
	}
	return k;
}

static void stmt_clear_row(struct pg_stmt *s)
{
	for (int i = 0; i < s->ndec && i < PG_MAX_COLS; i++) {
		if (s->dec[i] != NULL) {
			OPENSSL_cleanse(s->dec[i], s->declen[i]);
			PQfreemem(s->dec[i]);
		}
		s->dec[i] = NULL;
		s->declen[i] = 0;
	}
	s->ndec = 0;
}

static void stmt_reset(struct pg_stmt *s)
{
	stmt_clear_row(s);
	if (s->res != NULL)
		PQclear(s->res);
	s->res = NULL;
	s->row = -1;
	s->executed = false;
}

static void pg_conn_close(struct pg_conn *k)
{
	if (k == NULL)
		return;
	for (size_t i = 0; i < PG_SLOTS; i++) {
		struct pg_stmt *s = k->slots[i];
		if (s == NULL)
			continue;
		stmt_reset(s);
		free(s->text);
		free(s);
	}
	if (k->db != NULL)
		PQfinish(k->db);          /* an open transaction rolls back on the server */
	if (k->flight != NULL)
		PQfinish(k->flight);
	/* A connection closed inside a transaction (its thread ended, or
	 * store_close took it from an idle one): its writer turn goes too. */
	k->in_tx = false;
	turn_release(k);
	free(k);
}

/* --- statements -------------------------------------------------------- */

/* sql with each ?N (or bare ?) as $N, outside quotes; *np the highest N. */
static char *translate(const char *sql, int *np)
{
	size_t n = strlen(sql);
	/* "?" may become "$NNN" (4 bytes for 1): room for that at every byte. */
	char *out = malloc(n * 4 + 8);
	if (out == NULL)
		return NULL;
	size_t o = 0;
	int next = 0, max = 0;
	char q = 0;
	for (size_t i = 0; i < n; i++) {
		char ch = sql[i];
		if (q != 0) {
			if (ch == q)
				q = 0;
			out[o++] = ch;
			continue;
		}
		if (ch == '\'' || ch == '"') {
			q = ch;
			out[o++] = ch;
			continue;
		}
		if (ch != '?') {
			out[o++] = ch;
			continue;
		}
		int v = 0;
		size_t j = i + 1;
		while (j < n && sql[j] >= '0' && sql[j] <= '9' && v < 1000)
			v = v * 10 + (sql[j++] - '0');
		if (j == i + 1)
			v = ++next;
		else
			next = v;
		i = j - 1;
		if (str_fmt(out + o, 8, "$%d", v) != CS_OK) {
			free(out);
			return NULL;
		}
		o += strlen(out + o);
		if (v > max)
			max = v;
	}
	out[o] = '\0';
	*np = max;
	return out;
}

static size_t slot_of(const char *sql)
{
	uint64_t h = (uint64_t)(uintptr_t)sql * UINT64_C(0x9e3779b97f4a7c15);
	return (size_t)(h >> 32) & (PG_SLOTS - 1);
}

static struct store_stmt *pg_stmt(struct pg_conn *k, const char *sql)
{
	size_t i = slot_of(sql);
	for (; k->slots[i] != NULL; i = (i + 1) & (PG_SLOTS - 1))
		if (k->slots[i]->sql == sql)
			return &k->slots[i]->h;
	if (k->nslots >= PG_SLOTS / 2) {
		log_msg(LOG_ERROR, "too many prepared statements (raise PG_SLOTS)");
		return NULL;
	}
	struct pg_stmt *s = calloc(1, sizeof *s);
	if (s == NULL)
		return NULL;
	if ((s->text = translate(sql, &s->nparams)) == NULL || s->nparams > PG_MAX_PARAMS) {
		log_msg(LOG_ERROR, "database: a statement has too many parameters");
		free(s->text);
		free(s);
		return NULL;
	}
	s->h.be = &store_backend_pg;
	s->k = k;
	s->sql = sql;
	s->row = -1;
	k->slots[i] = s;
	k->nslots++;
	return &s->h;
}

static void pg_stmt_done(struct store_stmt *st)
{
	if (st != NULL)
		stmt_reset(pgs(st));
}

/* --- the pipeline: writes whose answer only what follows needs ------------
 *
 * pg_run_later sends a write inside a transaction without waiting for its
 * answer (libpq's pipeline mode).  The next statement of the transaction, or
 * its COMMIT, goes in the same flight, followed by a sync, and the answers
 * are read in order: one round trip fewer while the writer turn is held for
 * every write sent ahead.  SECURITY: a write sent ahead that fails fails what
 * follows it: the server aborted the transaction at that write and skipped
 * the rest of the flight, so nothing after it ran and no COMMIT can succeed
 * (pg_commit rolls back what is left). */

/* The connection is in an unknown state mid-flight (it broke): drop it.  Its
 * transaction ends with it on the server; the writer turn goes when the
 * caller ends the transaction (pg_commit, pg_rollback). */
static enum cs_err pipe_broken(struct pg_conn *k)
{
	const char *cm = k->db != NULL ? PQerrorMessage(k->db) : "";
	log_msg(LOG_WARN, "database: connection lost mid-flight (%.*s); its transaction rolls back",
	    (int)strcspn(cm, "\n"), cm);
	if (k->db != NULL)
		PQfinish(k->db);
	k->db = NULL;
	k->piped = false;
	k->pending = 0;
	return CS_EBUSY;
}

/* Ends the flight: a sync, then the answers of the k->pending writes sent
 * ahead and, with last, of the one statement sent after them (handed back
 * in *last whatever it says: the caller reads it as its own).  The first
 * failure of a write sent ahead is returned (a unique key it took is CS_EDB
 * here: the statement the caller waits for did not cause it). */
static enum cs_err pipe_finish(struct pg_conn *k, PGresult **last)
{
	enum cs_err e = CS_OK;
	int n = k->pending + (last != NULL ? 1 : 0);
	if (last != NULL)
		*last = NULL;
	if (PQpipelineSync(k->db) != 1)
		return pipe_broken(k);
	for (int i = 0; i < n; i++) {
		PGresult *r = PQgetResult(k->db), *end;
		if (r == NULL)
			return pipe_broken(k);
		ExecStatusType t = PQresultStatus(r);
		if (last != NULL && i == n - 1) {
			*last = r;
		} else {
			if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK && e == CS_OK) {
				e = t == PGRES_PIPELINE_ABORTED ? CS_EDB : pg_err(k, r);
				if (e != CS_EBUSY)
					pg_log(k, r, "statement sent ahead");
				if (e == CS_OK || e == CS_EEXIST)
					e = CS_EDB;
			}
			PQclear(r);
		}
		/* Each statement's answers end with a NULL. */
		if ((end = PQgetResult(k->db)) != NULL) {
			PQclear(end);
			if (last != NULL) {
				PQclear(*last);
				*last = NULL;
			}
			return pipe_broken(k);
		}
	}
	k->pending = 0;
	PGresult *sync = PQgetResult(k->db);
	bool synced = sync != NULL && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
	PQclear(sync);
	if (!synced || PQexitPipelineMode(k->db) != 1) {
		if (last != NULL) {
			PQclear(*last);
			*last = NULL;
		}
		return pipe_broken(k);
	}
	k->piped = false;
	return e;
}

/* Runs s with the values given (already in libpq's arrays); the result is
 * kept for pg_step.  The statement is prepared on this connection first
 * unless the store sends every statement unnamed (a transaction pooler).
 * After writes sent ahead (pg_run_later) s goes in their flight when it is
 * prepared already; else the flight ends first. */
static enum cs_err stmt_run_once(struct pg_stmt *s, const char *const *vals, const int *lens,
    const int *fmts)
{
	struct pg_conn *k = s->k;
	enum cs_err e;
	PGresult *r = NULL;
	if (k->pending > 0 && k->db != NULL && (!k->p->prepared || s->gen == k->gen)) {
		int sent = k->p->prepared ?
		    PQsendQueryPrepared(k->db, s->name, s->nparams, vals, lens, fmts, 0) :
		    PQsendQueryParams(k->db, s->text, s->nparams, s->nparams ? s->types : NULL, vals,
		    lens, fmts, 0);
		if (sent != 1)
			return pipe_broken(k);
		if ((e = pipe_finish(k, &r)) != CS_OK) {
			PQclear(r);
			return e;
		}
		goto answered;
	}
	if (k->pending > 0 && k->db != NULL && (e = pipe_finish(k, NULL)) != CS_OK)
		return e;
	if ((e = pg_alive(k)) != CS_OK)
		return e;
	if (k->p->prepared) {
		if (s->gen != k->gen) {
			if (str_fmt(s->name, sizeof s->name, "cs%u", ++k->names) != CS_OK)
				return CS_EDB;
			r = PQprepare(k->db, s->name, s->text, s->nparams, s->nparams ? s->types : NULL);
			if (PQresultStatus(r) != PGRES_COMMAND_OK) {
				e = pg_err(k, r);
				pg_log(k, r, "prepare");
				PQclear(r);
				/* Not run: a connection that died here may be made again. */
				if (e == CS_EBUSY && !k->in_tx && PQstatus(k->db) != CONNECTION_OK)
					return CS_ESTALE;
				return e == CS_OK ? CS_EDB : e;
			}
			PQclear(r);
			s->gen = k->gen;
		}
		r = PQexecPrepared(k->db, s->name, s->nparams, vals, lens, fmts, 0);
	} else {
		r = PQexecParams(k->db, s->text, s->nparams, s->nparams ? s->types : NULL, vals, lens,
		    fmts, 0);
	}
answered:;
	ExecStatusType t = PQresultStatus(r);
	if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK) {
		e = pg_err(k, r);
		if (e != CS_EEXIST && e != CS_EBUSY)
			pg_log(k, r, "statement");
		PQclear(r);
		return e == CS_OK ? CS_EDB : e;
	}
	const char *ct = PQcmdTuples(r);
	k->changes = ct != NULL && ct[0] != '\0' ? strtoll(ct, NULL, 10) : 0;
	s->res = r;
	s->row = -1;
	s->executed = true;
	return CS_OK;
}

/* A connection found dead (the server restarted since its last use) is
 * made again and a read outside a transaction tried once more: it changed
 * nothing.  A write is never sent twice (it may have been done). */
static bool is_read(const char *sql)
{
	while (*sql == ' ' || *sql == '\n' || *sql == '\t')
		sql++;
	return strncmp(sql, "SELECT", 6) == 0;
}

static enum cs_err stmt_run(struct pg_stmt *s, const char *const *vals, const int *lens,
    const int *fmts)
{
	struct pg_conn *k = s->k;
	enum cs_err e = stmt_run_once(s, vals, lens, fmts);
	if (e == CS_ESTALE)             /* the prepare found the connection dead: nothing ran */
		e = stmt_run_once(s, vals, lens, fmts);
	if (e == CS_ESTALE)
		e = CS_EBUSY;
	if (e == CS_EBUSY && !k->in_tx && is_read(s->text) && k->db != NULL) {
		/* The server may have said why it ends the connection (57P01)
		 * before libpq saw it closed: a new one either way. */
		PQfinish(k->db);
		k->db = NULL;
		e = stmt_run_once(s, vals, lens, fmts);
	}
	return e;
}

/* The values v[0 .. n-1] in libpq's arrays for s (ints: room for their
 * text), and s's parameter types fixed at its first binding. */
struct pg_params {
	const char *vals[PG_MAX_PARAMS];
	int         lens[PG_MAX_PARAMS], fmts[PG_MAX_PARAMS];
	char        ints[PG_MAX_PARAMS][24];
};

static enum cs_err params_encode(struct pg_stmt *s, const struct store_val *v, size_t n,
    struct pg_params *pp)
{
	Oid types[PG_MAX_PARAMS];
	enum cs_err e = CS_OK;

	if (n != (size_t)s->nparams) {
		log_msg(LOG_ERROR, "database: %zu values for %d parameters", n, s->nparams);
		return CS_EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		pp->lens[i] = 0;
		pp->fmts[i] = 0;
		switch (v[i].kind) {
		case STORE_VAL_TEXT:
			types[i] = OID_TEXT;
			pp->vals[i] = v[i].p;
			if (v[i].p != NULL && strlen(v[i].p) > PG_MAX_STR)
				e = CS_ETOOBIG;
			break;
		case STORE_VAL_INT:
			types[i] = OID_INT8;
			if (str_fmt(pp->ints[i], sizeof pp->ints[i], "%lld", (long long)v[i].i) != CS_OK)
				e = CS_EINVAL;
			pp->vals[i] = pp->ints[i];
			break;
		case STORE_VAL_BLOB:
		case STORE_VAL_BLOB_OR_NULL:
			types[i] = OID_BYTEA;
			pp->fmts[i] = 1;
			if (v[i].n > INT_MAX)
				e = CS_ETOOBIG;
			pp->lens[i] = (int)v[i].n;
			pp->vals[i] = v[i].p != NULL ? v[i].p : "";
			if (v[i].p == NULL && v[i].kind == STORE_VAL_BLOB_OR_NULL)
				pp->vals[i] = NULL;
			if (v[i].p != NULL && v[i].n == 0)
				pp->lens[i] = 0;
			break;
		default:
			e = CS_EINVAL;
			break;
		}
	}
	if (e != CS_OK)
		return e;
	if (!s->typed) {
		memcpy(s->types, types, n * sizeof *types);
		s->typed = true;
	} else if (n > 0 && memcmp(s->types, types, n * sizeof *types) != 0) {
		log_msg(LOG_ERROR, "database: a statement bound with other types than before");
		return CS_EINVAL;
	}
	return CS_OK;
}

/* Binding runs the statement: every value is bound at once (store_bind), so
 * nothing of the caller's needs copying, and what a value held is in
 * PostgreSQL's hands, not ours, when this returns. */
static enum cs_err pg_bind(struct store_stmt *st, const struct store_val *v, size_t n)
{
	struct pg_stmt *s = pgs(st);
	struct pg_params pp;

	stmt_reset(s);
	enum cs_err e = params_encode(s, v, n, &pp);
	if (e == CS_OK)
		e = stmt_run(s, pp.vals, pp.lens, pp.fmts);
	OPENSSL_cleanse(pp.ints, sizeof pp.ints);
	return e;
}

/* store_run_later: inside a transaction, on a connection where st is
 * prepared already (or that prepares nothing), st is sent and not waited
 * for (the pipeline above); otherwise it runs at once, as store_run. */
static enum cs_err pg_run_later(struct store_stmt *st, const struct store_val *v, size_t n)
{
	struct pg_stmt *s = pgs(st);
	struct pg_conn *k = s->k;
	struct pg_params pp;

	stmt_reset(s);
	enum cs_err e = params_encode(s, v, n, &pp);
	if (e != CS_OK)
		goto out;
	if (!k->in_tx || k->db == NULL || PQstatus(k->db) != CONNECTION_OK ||
	    (k->p->prepared && s->gen != k->gen)) {
		if ((e = stmt_run(s, pp.vals, pp.lens, pp.fmts)) == CS_OK && s->res != NULL &&
		    PQntuples(s->res) > 0)
			e = CS_EDB;           /* a programming error: this statement returns rows */
		stmt_reset(s);
		goto out;
	}
	if (k->pending >= PG_MAX_PENDING && (e = pipe_finish(k, NULL)) != CS_OK)
		goto out;
	if (!k->piped) {
		if (PQenterPipelineMode(k->db) != 1) {
			e = CS_EDB;
			goto out;
		}
		k->piped = true;
	}
	int sent = k->p->prepared ?
	    PQsendQueryPrepared(k->db, s->name, s->nparams, pp.vals, pp.lens, pp.fmts, 0) :
	    PQsendQueryParams(k->db, s->text, s->nparams, s->nparams ? s->types : NULL, pp.vals,
	    pp.lens, pp.fmts, 0);
	if (sent != 1) {
		e = pipe_broken(k);
		goto out;
	}
	k->pending++;
	k->changes = 0;
out:
	OPENSSL_cleanse(pp.ints, sizeof pp.ints);
	return e;
}

static enum cs_err pg_step(struct store_stmt *st)
{
	struct pg_stmt *s = pgs(st);
	enum cs_err e;
	if (!s->executed) {
		if (s->nparams != 0) {
			log_msg(LOG_ERROR, "database: a statement stepped with its values unbound");
			return CS_EINVAL;
		}
		s->typed = true;
		if ((e = stmt_run(s, NULL, NULL, NULL)) != CS_OK)
			return e;
	}
	stmt_clear_row(s);
	if (s->res == NULL || s->row + 1 >= PQntuples(s->res))
		return CS_ENOENT;
	s->row++;
	return CS_OK;
}

static enum cs_err pg_exec(struct store_stmt *st)
{
	struct pg_stmt *s = pgs(st);
	enum cs_err e = pg_step(st);
	if (e == CS_ENOENT)
		e = CS_OK;
	else if (e == CS_OK)
		e = CS_EDB;     /* a programming error: this statement returns rows */
	stmt_reset(s);
	return e;
}

static int64_t pg_changes(struct pg_conn *k) { return k->changes; }

/* --- columns ----------------------------------------------------------- */

static bool col_ok(const struct pg_stmt *s, int i)
{
	return s->res != NULL && s->row >= 0 && i >= 0 && i < PQnfields(s->res);
}

static enum store_col_kind pg_col_type(struct store_stmt *st, int i)
{
	struct pg_stmt *s = pgs(st);
	if (!col_ok(s, i) || PQgetisnull(s->res, s->row, i))
		return STORE_COL_NULL;
	switch (PQftype(s->res, i)) {
	case OID_INT8: case OID_INT4: case OID_INT2: case OID_BOOL: case OID_NUMERIC:
		return STORE_COL_INTEGER;
	case OID_FLOAT4: case OID_FLOAT8:
		return STORE_COL_FLOAT;
	case OID_BYTEA:
		return STORE_COL_BLOB;
	default:
		return STORE_COL_TEXT;
	}
}

static int64_t pg_col_int64(struct store_stmt *st, int i)
{
	struct pg_stmt *s = pgs(st);
	if (!col_ok(s, i) || PQgetisnull(s->res, s->row, i))
		return 0;
	const char *t = PQgetvalue(s->res, s->row, i);
	if (PQftype(s->res, i) == OID_BOOL)
		return t[0] == 't';
	return strtoll(t, NULL, 10);
}

/* Column i's bytea, decoded once per row (PQunescapeBytea of the hex form). */
static const unsigned char *col_bytea(struct pg_stmt *s, int i, size_t *len)
{
	*len = 0;
	if (i >= PG_MAX_COLS)
		return NULL;
	if (s->dec[i] == NULL) {
		s->dec[i] = PQunescapeBytea((const unsigned char *)PQgetvalue(s->res, s->row, i),
		    &s->declen[i]);
		if (s->dec[i] == NULL)
			return NULL;
		if (i + 1 > s->ndec)
			s->ndec = i + 1;
	}
	*len = s->declen[i];
	return s->dec[i];
}

static int pg_col_bytes(struct store_stmt *st, int i)
{
	struct pg_stmt *s = pgs(st);
	if (!col_ok(s, i) || PQgetisnull(s->res, s->row, i))
		return 0;
	if (PQftype(s->res, i) == OID_BYTEA) {
		size_t n;
		(void)col_bytea(s, i, &n);
		return n > INT_MAX ? INT_MAX : (int)n;
	}
	return PQgetlength(s->res, s->row, i);
}

static const void *pg_col_raw_blob(struct store_stmt *st, int i)
{
	struct pg_stmt *s = pgs(st);
	if (!col_ok(s, i) || PQgetisnull(s->res, s->row, i))
		return NULL;
	if (PQftype(s->res, i) == OID_BYTEA) {
		size_t n;
		return col_bytea(s, i, &n);
	}
	return PQgetvalue(s->res, s->row, i);
}

static const unsigned char *pg_col_raw_text(struct store_stmt *st, int i)
{
	struct pg_stmt *s = pgs(st);
	if (!col_ok(s, i) || PQgetisnull(s->res, s->row, i))
		return NULL;
	return (const unsigned char *)PQgetvalue(s->res, s->row, i);
}

static int pg_col_count(struct store_stmt *st)
{
	return pgs(st)->res != NULL ? PQnfields(pgs(st)->res) : 0;
}

static const char *pg_col_name(struct store_stmt *st, int i)
{
	return pgs(st)->res != NULL ? PQfname(pgs(st)->res, i) : NULL;
}

/* --- transactions ------------------------------------------------------ */

/* One simple query on k; CS_OK when it ended with status want. */
static enum cs_err pg_simple(struct pg_conn *k, const char *sql, ExecStatusType want,
    PGresult **keep)
{
	enum cs_err e = CS_OK;
	if (k->pending > 0 && k->db != NULL && (e = pipe_finish(k, NULL)) != CS_OK)
		return e;
	if (k->db == NULL)
		return CS_EBUSY;
	PGresult *r = PQexec(k->db, sql);
	if (PQresultStatus(r) != want) {
		e = pg_err(k, r);
		if (e != CS_EBUSY)
			pg_log(k, r, "transaction");
		if (e == CS_OK)
			e = CS_EDB;
	}
	if (keep != NULL && e == CS_OK)
		*keep = r;
	else
		PQclear(r);
	return e;
}


static double seconds_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Takes the store's writer turn for k (pg_begin, once its BEGIN is answered).
 * CS_EBUSY at once when the store is stopping or queue_max callers wait
 * already, and after PG_TURN_WAIT_S without it.  Each wait is observed in
 * consentd_db_lock_wait_seconds, had or timed out; a turn had at once is no
 * wait.  Only this process's transactions are waited for: other nodes'
 * run at the same time (SERIALIZABLE sorts them out). */
static enum cs_err turn_take(struct pg_conn *k)
{
	struct pg_store *p = k->p;
	enum cs_err e = CS_OK;
	struct timespec w0, until;

	pthread_mutex_lock(&p->mu);
	if (p->stopping) {
		e = CS_EBUSY;
		goto out;
	}
	if (p->busy) {
		if (p->waiting >= p->queue_max) {
			metrics_add(metric[M_DB_QUEUE_FULL], NULL, 1);
			e = CS_EBUSY;
			goto out;
		}
		clock_gettime(CLOCK_MONOTONIC, &w0);
		until = w0;
		until.tv_sec += PG_TURN_WAIT_S;
		p->waiting++;
		while (p->busy && e == CS_OK)
			if (pthread_cond_timedwait(&p->turn_cv, &p->mu, &until) == ETIMEDOUT && p->busy)
				e = CS_EBUSY;
		p->waiting--;
		if (p->stopping)
			pthread_cond_broadcast(&p->done_cv);    /* pg_stop watches the queue drain */
		metrics_observe(metric[M_DB_LOCK_WAIT], NULL, seconds_since(&w0));
		if (e != CS_OK)
			goto out;
	}
	p->busy = true;
	k->locked = true;
	clock_gettime(CLOCK_MONOTONIC, &k->locked_at);
out:
	pthread_mutex_unlock(&p->mu);
	return e;
}

/* The transaction ended (or never began), and k's writer turn with it:
 * consentd_db_lock_hold_seconds, and the next waiter goes.  Every path that
 * ends a transaction comes here -- pg_commit, pg_rollback, pg_begin's
 * failure, pg_conn_close -- and a second call does nothing. */
static void turn_release(struct pg_conn *k)
{
	struct pg_store *p = k->p;
	if (!k->locked)
		return;
	k->locked = false;
	metrics_observe(metric[M_DB_LOCK_HOLD], NULL, seconds_since(&k->locked_at));
	pthread_mutex_lock(&p->mu);
	p->busy = false;
	pthread_cond_signal(&p->turn_cv);
	if (p->stopping)
		pthread_cond_broadcast(&p->done_cv);
	pthread_mutex_unlock(&p->mu);
}

/* SECURITY: SERIALIZABLE makes every read-check-write of a transaction
 * safe against other nodes' concurrent ones (the file's head).  BEGIN and
 * its settings go in one round trip; the snapshot is taken at the first
 * statement after them, with the turn already had. */
#define SQL_BEGIN "BEGIN ISOLATION LEVEL SERIALIZABLE; SET LOCAL lock_timeout = '" PG_LOCK_WAIT "'"

static enum cs_err pg_begin(struct pg_conn *k)
{
	enum cs_err e;
	k->conflicted = false;
	if ((e = pg_alive(k)) != CS_OK)
		return e;
	/* BEGIN goes before the writer turn is taken: a SERIALIZABLE
	 * transaction takes its snapshot at its first query, not at BEGIN nor at
	 * SET LOCAL, so the snapshot still follows every commit of this process
	 * before the turn -- and the turn is held for one round trip less.
	 * Once more on a connection found dead (nothing was begun on it). */
	e = pg_simple(k, SQL_BEGIN, PGRES_COMMAND_OK, NULL);
	if (e == CS_EBUSY && PQtransactionStatus(k->db) != PQTRANS_INTRANS) {
		PQfinish(k->db);
		k->db = NULL;
		if ((e = pg_alive(k)) == CS_OK)
			e = pg_simple(k, SQL_BEGIN, PGRES_COMMAND_OK, NULL);
	}
	if (e != CS_OK || (e = turn_take(k)) != CS_OK)
		goto fail;
	k->in_tx = true;
	return CS_OK;
fail:
	if (k->db != NULL && PQstatus(k->db) == CONNECTION_OK &&
	    PQtransactionStatus(k->db) != PQTRANS_IDLE)
		(void)pg_simple(k, "ROLLBACK", PGRES_COMMAND_OK, NULL);
	return e;
}

/* SECURITY: only a COMMIT that answers "COMMIT" committed: one that ends an
 * aborted transaction answers "ROLLBACK" with a success status.  After
 * writes sent ahead the COMMIT goes in their flight; when one of them failed
 * it was skipped, and the aborted transaction is rolled back here.  A COMMIT
 * refused (a serialisation failure found at the COMMIT: 40001) ended the
 * transaction on the server, rolled back; should anything be left open, it
 * is rolled back too.  Whatever happened, the writer turn goes. */
static enum cs_err pg_commit(struct pg_conn *k, const struct store_audit_mark *mark)
{
	PGresult *r = NULL;
	enum cs_err e;
	if (!k->in_tx)
		return CS_EDB;
	if (k->pending > 0 && k->db != NULL) {
		if (PQsendQueryParams(k->db, "COMMIT", 0, NULL, NULL, NULL, NULL, 0) != 1)
			e = pipe_broken(k);
		else
			e = pipe_finish(k, &r);
		if (e == CS_OK && PQresultStatus(r) != PGRES_COMMAND_OK) {
			e = pg_err(k, r);
			if (e != CS_EBUSY)
				pg_log(k, r, "transaction");
			if (e == CS_OK)
				e = CS_EDB;
		}
		if (e != CS_OK) {
			PQclear(r);
			r = NULL;
			if (k->db != NULL && PQstatus(k->db) == CONNECTION_OK &&
			    PQtransactionStatus(k->db) != PQTRANS_IDLE)
				(void)pg_simple(k, "ROLLBACK", PGRES_COMMAND_OK, NULL);
		}
	} else {
		e = k->db != NULL ? pg_simple(k, "COMMIT", PGRES_COMMAND_OK, &r) : CS_EBUSY;
		if (e != CS_OK && k->db != NULL && PQstatus(k->db) == CONNECTION_OK &&
		    PQtransactionStatus(k->db) != PQTRANS_IDLE)
			(void)pg_simple(k, "ROLLBACK", PGRES_COMMAND_OK, NULL);
	}
	if (e == CS_OK) {
		if (strcmp(PQcmdStatus(r), "COMMIT") != 0)
			e = CS_EDB;
		PQclear(r);
	}
	/* SECURITY: the process's chain head is settled before the turn goes:
	 * the next transaction links to what this one committed, or reads it. */
	if (mark != NULL)
		k->p->pub.settle(k->p->pub.arg, mark, e == CS_OK, e != CS_OK &&
		    (k->db == NULL || PQstatus(k->db) != CONNECTION_OK));
	k->in_tx = false;
	turn_release(k);
	if (e == CS_OK)
		atomic_fetch_add(&k->p->commits, 1);
	return e;
}

static void pg_rollback(struct pg_conn *k)
{
	if (k == NULL)
		return;
	if (k->pending > 0 && k->db != NULL)
		(void)pipe_finish(k, NULL);       /* what they say no longer matters */
	if (k->db != NULL && PQstatus(k->db) == CONNECTION_OK &&
	    PQtransactionStatus(k->db) != PQTRANS_IDLE)
		(void)pg_simple(k, "ROLLBACK", PGRES_COMMAND_OK, NULL);
	k->in_tx = false;
	turn_release(k);
}

/* --- the store --------------------------------------------------------- */

static enum cs_err pg_store_open(const char *url, const char *password, bool prepared,
    struct pg_store **out)
{
	struct pg_store *p = calloc(1, sizeof *p);
	if (p == NULL)
		return CS_ENOMEM;
	p->url = strdup(url);
	p->password = password != NULL ? strdup(password) : NULL;
	p->prepared = prepared;
	p->queue_max = STORE_WRITE_QUEUE_DEFAULT;
	atomic_init(&p->commits, 0);
	if (p->url == NULL || (password != NULL && p->password == NULL)) {
		pg_store_close(p);
		return CS_ENOMEM;
	}
	/* The turn's wait is timed on CLOCK_MONOTONIC: a clock step does not
	 * stretch or cut it. */
	pthread_condattr_t ca;
	bool ca_ok = pthread_condattr_init(&ca) == 0;
	if (!ca_ok || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
	    pthread_mutex_init(&p->mu, NULL) != 0) {
		if (ca_ok)
			pthread_condattr_destroy(&ca);
		pg_store_close(p);
		return CS_ENOMEM;
	}
	if (pthread_cond_init(&p->turn_cv, &ca) != 0) {
		pthread_mutex_destroy(&p->mu);
		pthread_condattr_destroy(&ca);
		pg_store_close(p);
		return CS_ENOMEM;
	}
	if (pthread_cond_init(&p->done_cv, &ca) != 0) {
		pthread_cond_destroy(&p->turn_cv);
		pthread_mutex_destroy(&p->mu);
		pthread_condattr_destroy(&ca);
		pg_store_close(p);
		return CS_ENOMEM;
	}
	pthread_condattr_destroy(&ca);
	p->sync_ok = true;
	*out = p;
	return CS_OK;
}

static void pg_store_close(struct pg_store *p)
{
	if (p == NULL)
		return;
	free(p->url);
	if (p->password != NULL) {
		OPENSSL_cleanse(p->password, strlen(p->password));
		free(p->password);
	}
	if (p->sync_ok) {
		pthread_cond_destroy(&p->done_cv);
		pthread_cond_destroy(&p->turn_cv);
		pthread_mutex_destroy(&p->mu);
	}
	free(p);
}

static void pg_set_write_queue(struct pg_store *p, unsigned max)
{
	pthread_mutex_lock(&p->mu);
	p->queue_max = max;
	pthread_mutex_unlock(&p->mu);
}

static void pg_writer_stats(struct pg_store *p, struct store_writer_stats *out)
{
	memset(out, 0, sizeof *out);
	pthread_mutex_lock(&p->mu);
	out->stopping = p->stopping;
	out->waiting = p->waiting;
	pthread_mutex_unlock(&p->mu);
	out->batches = atomic_load(&p->commits);
	out->transactions = out->batches;
}

/* store_stop: no new turns; returns once the transaction holding the turn
 * and every caller queued for one have ended (as SQLite's writer does). */
static void pg_stop(struct pg_store *p)
{
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	while (p->busy || p->waiting > 0)
		pthread_cond_wait(&p->done_cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

static enum cs_err pg_flight_begin(struct pg_conn *k, const char *key)
{
	if (k->flying)
		return CS_EINVAL;
	if (k->flight != NULL && PQstatus(k->flight) != CONNECTION_OK) {
		PQfinish(k->flight);
		k->flight = NULL;
	}
	if (k->flight == NULL && (k->flight = pg_connect(k->p)) == NULL)
		return CS_EBUSY;
	PGresult *r = PQexec(k->flight, "BEGIN; SET LOCAL lock_timeout = '30s'");
	bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	if (ok) {
		const char *v[1] = { key };
		r = PQexecParams(k->flight, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", 1,
		    NULL, v, NULL, NULL, 0);
		ok = PQresultStatus(r) == PGRES_TUPLES_OK;
		PQclear(r);
	}
	if (!ok) {
		r = PQexec(k->flight, "ROLLBACK");
		PQclear(r);
		return CS_EBUSY;
	}
	k->flying = true;
	return CS_OK;
}

static void pg_flight_end(struct pg_conn *k)
{
	if (!k->flying)
		return;
	PGresult *r = PQexec(k->flight, "COMMIT");
	PQclear(r);
	k->flying = false;
}

/* --- migrations -------------------------------------------------------- */

static int pg_schema_known(void)
{
	return store_migrations_known(embedded_migrations_pg);
}

static enum cs_err pg_schema_version(struct pg_conn *k, int *out)
{
	PGresult *r = NULL;
	enum cs_err e = pg_alive(k);
	if (e != CS_OK)
		return e;
	if ((e = pg_simple(k, "SELECT to_regclass('schema_version') IS NOT NULL",
	    PGRES_TUPLES_OK, &r)) != CS_OK)
		return e;
	bool have = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	if (!have) {
		*out = 0;
		return CS_OK;
	}
	if ((e = pg_simple(k, "SELECT coalesce(max(version), 0) FROM schema_version",
	    PGRES_TUPLES_OK, &r)) != CS_OK)
		return e;
	long long v = PQntuples(r) == 1 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -1;
	PQclear(r);
	if (v < 0 || v > INT_MAX)
		return CS_EDB;
	*out = (int)v;
	return CS_OK;
}

static enum cs_err migration_apply(struct pg_conn *k, int v, const struct embedded_file *f)
{
	char ver[24], at[24];
	enum cs_err e;
	if ((e = pg_simple(k, "BEGIN", PGRES_COMMAND_OK, NULL)) != CS_OK)
		return e;
	if ((e = pg_simple(k, f->data, PGRES_COMMAND_OK, NULL)) != CS_OK) {
		log_msg(LOG_ERROR, "migration %s failed", f->name);
		goto fail;
	}
	if (str_fmt(ver, sizeof ver, "%d", v) != CS_OK ||
	    str_fmt(at, sizeof at, "%lld", (long long)time(NULL)) != CS_OK) {
		e = CS_EINVAL;
		goto fail;
	}
	const char *vals[2] = { ver, at };
	PGresult *r = PQexecParams(k->db, "INSERT INTO schema_version (version, applied_at) "
	    "VALUES ($1::bigint, $2::bigint)", 2, NULL, vals, NULL, NULL, 0);
	e = PQresultStatus(r) == PGRES_COMMAND_OK ? CS_OK : pg_err(k, r);
	PQclear(r);
	if (e != CS_OK)
		goto fail;
	if ((e = pg_simple(k, "COMMIT", PGRES_COMMAND_OK, NULL)) != CS_OK)
		goto fail;
	log_msg(LOG_INFO, "database: applied migration %s", f->name);
	return CS_OK;
fail:
	(void)pg_simple(k, "ROLLBACK", PGRES_COMMAND_OK, NULL);
	return e;
}

static enum cs_err pg_migrate(struct pg_conn *k)
{
	enum cs_err e = pg_alive(k);
	int have = 0, known = pg_schema_known(), prev = 0;
	if (e != CS_OK)
		return e;
	/* One migrating node at a time; the others wait here, then find nothing to do. */
	if ((e = pg_simple(k, "SELECT pg_advisory_lock(" PG_MIGRATE_LOCK ")",
	    PGRES_TUPLES_OK, NULL)) != CS_OK)
		return e;
	if ((e = pg_simple(k, "CREATE TABLE IF NOT EXISTS schema_version ("
	    "version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)", PGRES_COMMAND_OK, NULL)) != CS_OK)
		goto out;
	if ((e = pg_schema_version(k, &have)) != CS_OK)
		goto out;
	if (have > known) {
		log_msg(LOG_ERROR, "database schema version %d is newer than this consentd (knows %d); "
		    "refusing to migrate", have, known);
		e = CS_ESCHEMA;
		goto out;
	}
	for (const struct embedded_file *f = embedded_migrations_pg; f->name != NULL; f++) {
		int v = store_migration_version(f->name);
		if (v <= prev) {
			log_msg(LOG_ERROR, "embedded migration pg/%s is misnamed or out of order", f->name);
			e = CS_ESCHEMA;
			goto out;
		}
		prev = v;
		if (v <= have)
			continue;
		if ((e = migration_apply(k, v, f)) != CS_OK)
			goto out;
	}
out:
	if (PQstatus(k->db) == CONNECTION_OK)
		(void)pg_simple(k, "SELECT pg_advisory_unlock(" PG_MIGRATE_LOCK ")",
		    PGRES_TUPLES_OK, NULL);
	return e;
}

/* --- consentd db copy: SQLite into PostgreSQL -------------------------- */

#define COPY_WHY(r, ...) do { if (str_fmt((r)->why, sizeof (r)->why, __VA_ARGS__) != CS_OK) \
	(r)->why[0] = '\0'; } while (0)

/* Our own table and column names only: letters, digits, underscores. */
static bool ident_ok(const char *s)
{
	if (s == NULL || s[0] == '\0' || strlen(s) >= 64)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

/* The tables of db (ours, not SQLite's nor schema_version), parents before
 * the tables whose foreign keys name them. */
static enum cs_err copy_tables(sqlite3 *db, struct store_copy_report *r)
{
	char names[STORE_COPY_TABLES][64], parents[STORE_COPY_TABLES][8][64];
	size_t n = 0, np[STORE_COPY_TABLES];
	bool done[STORE_COPY_TABLES];
	sqlite3_stmt *st = NULL;
	enum cs_err e = CS_OK;

	if (sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND "
	    "name NOT LIKE 'sqlite_%' AND name <> 'schema_version' ORDER BY rowid", -1, &st,
	    NULL) != SQLITE_OK)
		return CS_EDB;
	while (e == CS_OK && sqlite3_step(st) == SQLITE_ROW) {
		const char *t = (const char *)sqlite3_column_text(st, 0);
		if (n == STORE_COPY_TABLES || !ident_ok(t)) {
			COPY_WHY(r, "the source has a table consentd does not know");
			e = CS_EINVAL;
			break;
		}
		memcpy(names[n], t, strlen(t) + 1);
		np[n] = 0;
		done[n] = false;
		n++;
	}
	sqlite3_finalize(st);
	for (size_t i = 0; i < n && e == CS_OK; i++) {
		char q[128];
		if (str_fmt(q, sizeof q, "SELECT DISTINCT \"table\" FROM pragma_foreign_key_list('%s')",
		    names[i]) != CS_OK || sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK)
			return CS_EDB;
		while (sqlite3_step(st) == SQLITE_ROW) {
			const char *t = (const char *)sqlite3_column_text(st, 0);
			if (np[i] == 8 || !ident_ok(t)) {
				e = CS_EINVAL;
				break;
			}
			memcpy(parents[i][np[i]++], t, strlen(t) + 1);
		}
		sqlite3_finalize(st);
	}
	r->ntables = 0;
	for (bool moved = true; e == CS_OK && moved;) {
		moved = false;
		for (size_t i = 0; i < n; i++) {
			if (done[i])
				continue;
			bool ready = true;
			for (size_t p = 0; p < np[i] && ready; p++)
				for (size_t j = 0; j < n; j++)
					if (!done[j] && j != i && strcmp(names[j], parents[i][p]) == 0)
						ready = false;
			if (!ready)
				continue;
			done[i] = true;
			moved = true;
			memcpy(r->t[r->ntables].name, names[i], sizeof names[i]);
			r->t[r->ntables++].rows = 0;
		}
	}
	if (e == CS_OK && r->ntables != n) {
		COPY_WHY(r, "the source's foreign keys go round in a circle");
		e = CS_EINVAL;
	}
	return e;
}

static int64_t pg_count(struct pg_conn *k, const char *table, enum cs_err *e)
{
	char q[128];
	PGresult *res = NULL;
	int64_t v = -1;
	if (str_fmt(q, sizeof q, "SELECT count(*) FROM %s", table) != CS_OK) {
		*e = CS_EINVAL;
		return -1;
	}
	if ((*e = pg_simple(k, q, PGRES_TUPLES_OK, &res)) == CS_OK) {
		v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		PQclear(res);
	}
	return v;
}

/* One value of a SQLite row in PostgreSQL's text form, for a parameter whose
 * type PostgreSQL takes from the column it goes into.  NULL for SQL NULL;
 * *owned set when the text was made here. */
static const char *copy_value(sqlite3_stmt *st, int i, char **owned, enum cs_err *e)
{
	static const char hex[] = "0123456789abcdef";
	*owned = NULL;
	switch (sqlite3_column_type(st, i)) {
	case SQLITE_NULL:
		return NULL;
	case SQLITE_BLOB: {
		const unsigned char *b = sqlite3_column_blob(st, i);
		size_t n = (size_t)sqlite3_column_bytes(st, i);
		char *t = malloc(2 * n + 3);
		if (t == NULL) {
			*e = CS_ENOMEM;
			return NULL;
		}
		t[0] = '\\';
		t[1] = 'x';
		for (size_t j = 0; j < n; j++) {
			t[2 + 2 * j] = hex[b[j] >> 4];
			t[3 + 2 * j] = hex[b[j] & 15];
		}
		t[2 + 2 * n] = '\0';
		*owned = t;
		return t;
	}
	default:
		/* Integers and text: SQLite's text form is PostgreSQL's. */
		return (const char *)sqlite3_column_text(st, i);
	}
}

static enum cs_err copy_table(struct pg_conn *k, sqlite3 *db, const char *table, int64_t *rows,
    struct store_copy_report *r)
{
	char q[256], ins[4096];
	sqlite3_stmt *st = NULL;
	enum cs_err e = CS_OK;
	const char *vals[PG_MAX_COLS];
	char *owned[PG_MAX_COLS];
	int ncol;

	/* In rowid order where there is one, so that PostgreSQL's generated
	 * rowid (the tie-breaker of some orderings) follows the same order. */
	if (str_fmt(q, sizeof q, "SELECT * FROM %s ORDER BY rowid", table) != CS_OK)
		return CS_EINVAL;
	if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK) {
		if (str_fmt(q, sizeof q, "SELECT * FROM %s", table) != CS_OK ||
		    sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK)
			return CS_EDB;
	}
	ncol = sqlite3_column_count(st);
	if (ncol <= 0 || ncol > PG_MAX_COLS) {
		sqlite3_finalize(st);
		return CS_EINVAL;
	}
	struct buf b;
	buf_init(&b, sizeof ins);
	e = buf_printf(&b, "INSERT INTO %s (", table);
	for (int i = 0; i < ncol && e == CS_OK; i++) {
		const char *c = sqlite3_column_name(st, i);
		if (!ident_ok(c))
			e = CS_EINVAL;
		else
			e = buf_printf(&b, "%s%s", i ? ", " : "", c);
	}
	if (e == CS_OK)
		e = buf_puts(&b, ") VALUES (");
	for (int i = 0; i < ncol && e == CS_OK; i++)
		e = buf_printf(&b, "%s$%d", i ? ", " : "", i + 1);
	if (e == CS_OK)
		e = buf_puts(&b, ")");
	if (e == CS_OK && b.len >= sizeof ins)
		e = CS_ETOOBIG;
	if (e == CS_OK)
		memcpy(ins, b.data, b.len + 1);
	buf_clear(&b);
	if (e != CS_OK) {
		sqlite3_finalize(st);
		return e;
	}
	PGresult *res = PQprepare(k->db, "", ins, ncol, NULL);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		pg_log(k, res, "copy");
		COPY_WHY(r, "table %s: PostgreSQL refused its INSERT", table);
		PQclear(res);
		sqlite3_finalize(st);
		return CS_EDB;
	}
	PQclear(res);
	int rc;
	while (e == CS_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		for (int i = 0; i < ncol; i++)
			vals[i] = copy_value(st, i, &owned[i], &e);
		if (e == CS_OK) {
			res = PQexecPrepared(k->db, "", ncol, vals, NULL, NULL, 0);
			if (PQresultStatus(res) != PGRES_COMMAND_OK) {
				pg_log(k, res, "copy");
				COPY_WHY(r, "table %s: row %lld refused by PostgreSQL", table,
				    (long long)*rows + 1);
				e = pg_err(k, res);
				if (e == CS_OK)
					e = CS_EDB;
			}
			PQclear(res);
		}
		for (int i = 0; i < ncol; i++)
			free(owned[i]);
		if (e == CS_OK)
			(*rows)++;
	}
	if (e == CS_OK && rc != SQLITE_DONE)
		e = CS_EDB;
	sqlite3_finalize(st);
	return e;
}

/* Identity columns that take given values (GENERATED BY DEFAULT) go on from
 * the highest copied. */
static enum cs_err copy_sequences(struct pg_conn *k)
{
	PGresult *res = NULL;
	enum cs_err e = pg_simple(k, "SELECT table_name, column_name FROM information_schema.columns "
	    "WHERE table_schema = current_schema() AND is_identity = 'YES' AND "
	    "identity_generation = 'BY DEFAULT'", PGRES_TUPLES_OK, &res);
	if (e != CS_OK)
		return e;
	for (int i = 0; i < PQntuples(res) && e == CS_OK; i++) {
		const char *t = PQgetvalue(res, i, 0), *c = PQgetvalue(res, i, 1);
		char q[256];
		/* (Above 0: audit_chains' chain 0 is a row, never a sequence's value.) */
		if (!ident_ok(t) || !ident_ok(c) || str_fmt(q, sizeof q, "SELECT setval("
		    "pg_get_serial_sequence('%s', '%s'), max(%s)) FROM %s HAVING max(%s) > 0",
		    t, c, c, t, c) != CS_OK) {
			e = CS_EINVAL;
			break;
		}
		e = pg_simple(k, q, PGRES_TUPLES_OK, NULL);
	}
	PQclear(res);
	return e;
}

static enum cs_err pg_copy_from_sqlite(struct pg_conn *k, sqlite3 *db, struct store_copy_report *r)
{
	enum cs_err e;
	bool lite_tx = false, pg_tx = false;
	memset(r, 0, sizeof *r);
	if ((e = pg_alive(k)) != CS_OK)
		return e;
	if ((e = copy_tables(db, r)) != CS_OK)
		return e;
	/* One snapshot of the source: a read transaction for the whole copy. */
	if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
		return CS_EDB;
	lite_tx = true;
	/* The destination, empty: one SERIALIZABLE transaction, so a node
	 * writing meanwhile makes one of the two fail rather than mix in. */
	if ((e = pg_begin(k)) != CS_OK)
		goto out;
	pg_tx = true;
	/* A SQLite database's entries are chain 0's, which migration 0028's
	 * trigger keeps closed to every other writer on PostgreSQL. */
	e = pg_simple(k, "SET LOCAL consentd.copying = 'on'", PGRES_COMMAND_OK, NULL);
	for (size_t i = 0; i < r->ntables && e == CS_OK; i++) {
		int64_t have = pg_count(k, r->t[i].name, &e);
		/* audit_chains holds chain 0 from migration 0028 on both sides:
		 * empty is that row alone, which the source's copy replaces. */
		if (e == CS_OK && have == 1 && strcmp(r->t[i].name, "audit_chains") == 0 &&
		    pg_count(k, "audit_chains WHERE chain = 0", &e) == 1 && e == CS_OK) {
			e = pg_simple(k, "DELETE FROM audit_chains WHERE chain = 0", PGRES_COMMAND_OK, NULL);
			have = 0;
		}
		if (e == CS_OK && have != 0) {
			COPY_WHY(r, "the destination is not empty: table %s has %lld rows",
			    r->t[i].name, (long long)have);
			e = CS_EEXIST;
		}
	}
	for (size_t i = 0; i < r->ntables && e == CS_OK; i++)
		e = copy_table(k, db, r->t[i].name, &r->t[i].rows, r);
	if (e == CS_OK)
		e = copy_sequences(k);
	/* What arrived is what was there: each table's count on both sides. */
	for (size_t i = 0; i < r->ntables && e == CS_OK; i++) {
		char q[128];
		sqlite3_stmt *st = NULL;
		int64_t src = -1, dst = pg_count(k, r->t[i].name, &e);
		if (e == CS_OK && str_fmt(q, sizeof q, "SELECT count(*) FROM %s", r->t[i].name) == CS_OK &&
		    sqlite3_prepare_v2(db, q, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
			src = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
		if (e == CS_OK && (src != dst || dst != r->t[i].rows)) {
			COPY_WHY(r, "table %s: %lld rows in the source, %lld copied, %lld counted in the "
			    "destination", r->t[i].name, (long long)src, (long long)r->t[i].rows,
			    (long long)dst);
			e = CS_EDB;
		}
	}
	if (e == CS_OK) {
		e = pg_commit(k, NULL);
		pg_tx = false;
	}
out:
	if (pg_tx)
		pg_rollback(k);
	if (lite_tx)
		(void)sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	return e;
}

/* --- the backend (store_backend.h) ------------------------------------- */

static struct pg_store *store_of(struct store_db *d) { return (struct pg_store *)d; }
static struct pg_conn *conn_of(struct store_link *k) { return (struct pg_conn *)k; }

static enum cs_err be_open(const char *url, const struct store_opts *o,
    const struct store_publisher *pub, struct store_db **out)
{
	struct pg_store *p = NULL;
	enum cs_err e = pg_store_open(url, o->password, !o->unprepared, &p);
	if (e != CS_OK)
		return e;
	p->pub = *pub;
	*out = (struct store_db *)p;
	return CS_OK;
}

/* After the first connection: the schema as o->schema says (a PostgreSQL
 * database is shared by many nodes, so only `consentd migrate` changes it). */
static enum cs_err be_schema_open(struct store_link *kk, enum store_schema_policy pol)
{
	struct pg_conn *k = conn_of(kk);
	int have = 0, known = pg_schema_known();
	enum cs_err e;
	if (pol == STORE_SCHEMA_MIGRATE)
		return pg_migrate(k);
	if ((e = pg_schema_version(k, &have)) != CS_OK)
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

static void be_stop(struct store_db *d) { pg_stop(store_of(d)); }
static void be_close(struct store_db *d) { pg_store_close(store_of(d)); }
static void be_set_write_queue(struct store_db *d, unsigned max)
{
	pg_set_write_queue(store_of(d), max);
}
static void be_writer_stats(struct store_db *d, struct store_writer_stats *out)
{
	pg_writer_stats(store_of(d), out);
}
static struct store_link *be_link_open(struct store_db *d)
{
	return (struct store_link *)pg_conn_open(store_of(d));
}
static void be_link_close(struct store_link *k) { pg_conn_close(conn_of(k)); }
static struct store_stmt *be_stmt(struct store_link *k, const char *sql)
{
	return pg_stmt(conn_of(k), sql);
}
/* Binding runs the statement (pg_bind), with every value at once: nothing
 * of the caller's is kept, copied or not. */
static enum cs_err be_bind(struct store_stmt *st, const struct store_val *v, size_t n, bool copy)
{
	(void)copy;
	return pg_bind(st, v, n);
}
static enum cs_err be_run_later(struct store_stmt *st, const struct store_val *v, size_t n)
{
	return pg_run_later(st, v, n);
}
static int64_t be_changes(struct store_link *k) { return pg_changes(conn_of(k)); }
/* A NULL text is a NULL column: the values were read whole with the result. */
static bool be_col_nomem(struct store_stmt *st) { (void)st; return false; }
static enum cs_err be_begin(struct store_link *k) { return pg_begin(conn_of(k)); }

/* A node's commits run one at a time (its writer turn), but its callers
 * reach the hook after their COMMIT and the turn's end in any order: only a
 * later entry than the last one given goes on (only_newer). */
static enum cs_err be_commit(struct store_link *kk, const struct store_audit_mark *mark)
{
	struct pg_conn *k = conn_of(kk);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	enum cs_err e = pg_commit(k, mark);
	(void)store_count_commit(&t0, e, 1);
	if (e == CS_OK && mark != NULL && mark->set)
		k->p->pub.publish(k->p->pub.arg, mark->seq, mark->link, true);
	return e;
}

static void be_rollback(struct store_link *k, bool in_tx)
{
	(void)in_tx;                      /* whatever is open on the connection goes */
	pg_rollback(conn_of(k));
}

/* Ready means the schema this binary knows, too (consentd migrate).  A newer
 * schema is a rolling upgrade's (migrations keep the previous release
 * working): only an older one is unready. */
static bool be_conflicted(struct store_link *k)
{
	return conn_of(k)->conflicted;
}

static enum cs_err be_ping(struct store_link *k)
{
	int have = 0;
	enum cs_err e = pg_schema_version(conn_of(k), &have);
	return e != CS_OK ? e : have >= pg_schema_known() ? CS_OK : CS_ESCHEMA;
}

static enum cs_err be_schema_version(struct store_link *k, int *out)
{
	return pg_schema_version(conn_of(k), out);
}

static enum cs_err be_backup(struct store_link *k, const char *dest_path)
{
	(void)k;
	(void)dest_path;
	log_msg(LOG_ERROR, "backup: the database is PostgreSQL: use pg_dump or pg_basebackup");
	return CS_EINVAL;
}

static enum cs_err be_flight_begin(struct store_link *k, const char *key)
{
	return pg_flight_begin(conn_of(k), key);
}
static void be_flight_end(struct store_link *k) { pg_flight_end(conn_of(k)); }
/* A copy goes into PostgreSQL, never out of it (pg_dump does that). */
static struct sqlite3 *be_copy_source(struct store_link *k) { (void)k; return NULL; }
static enum cs_err be_copy_in(struct store_link *k, struct sqlite3 *src,
    struct store_copy_report *r)
{
	return pg_copy_from_sqlite(conn_of(k), src, r);
}

const struct store_backend store_backend_pg = {
	.name = "postgresql",
	.dialect = STORE_DIALECT_PG,
	.own_chains = true,
	.claims = pg_is_url,
	.url_check = pg_url_check,
	.open = be_open,
	.schema_open = be_schema_open,
	.stop = be_stop,
	.close = be_close,
	.set_write_queue = be_set_write_queue,
	.writer_stats = be_writer_stats,
	.link_open = be_link_open,
	.link_close = be_link_close,
	.stmt = be_stmt,
	.stmt_done = pg_stmt_done,
	.bind = be_bind,
	.step = pg_step,
	.exec = pg_exec,
	.run_later = be_run_later,
	.changes = be_changes,
	.col_type = pg_col_type,
	.col_int64 = pg_col_int64,
	.col_bytes = pg_col_bytes,
	.col_raw_blob = pg_col_raw_blob,
	.col_raw_text = pg_col_raw_text,
	.col_count = pg_col_count,
	.col_name = pg_col_name,
	.col_nomem = be_col_nomem,
	.begin = be_begin,
	.commit = be_commit,
	.rollback = be_rollback,
	.audit_head = NULL,               /* settle keeps the process's (store.c) */
	.conflicted = be_conflicted,
	.ping = be_ping,
	.schema_version = be_schema_version,
	.backup = be_backup,
	.flight_begin = be_flight_begin,
	.flight_end = be_flight_end,
	.copy_source = be_copy_source,
	.copy_in = be_copy_in,
};
