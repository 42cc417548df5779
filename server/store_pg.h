/* store_pg.h -- for store.c only: the PostgreSQL backend (store_pg.c) below
 * the store interface.  store.c keeps the public functions and hands each to
 * these when the store was opened on a postgresql:// URL; the statements of
 * every store_X.c run unchanged (their ?N become $N here). */
#ifndef CS_STORE_PG_H
#define CS_STORE_PG_H

#include <stdbool.h>
#include <stdint.h>
#include "store_priv.h"

struct pg_store;    /* the URL, the password and the write queue */
struct pg_conn;     /* one libpq connection and its prepared statements */

/* Whether loc names a PostgreSQL database (postgresql:// or postgres://). */
bool pg_is_url(const char *loc);

/* Checks a URL the way store_open will use it, without connecting: libpq
 * parses it, and it must not carry a password (that comes from
 * CONSENTD_DATABASE_PASSWORD or [database] password_file).  why gets the
 * failing check. */
enum cs_err pg_url_check(const char *url, char *why, size_t whylen) CS_MUST_CHECK;

/* Opens the backend and its first connection (*conn, the caller's). */
enum cs_err pg_store_open(const char *url, const char *password, bool prepared,
    struct pg_store **out) CS_MUST_CHECK;
void pg_store_close(struct pg_store *p);
void pg_set_write_queue(struct pg_store *p, unsigned max);
void pg_writer_stats(struct pg_store *p, struct store_writer_stats *out);

struct pg_conn *pg_conn_open(struct pg_store *p);
void pg_conn_close(struct pg_conn *k);

struct store_stmt *pg_stmt(struct pg_conn *k, const char *sql);
void pg_stmt_done(struct store_stmt *st);
enum cs_err pg_bind(struct store_stmt *st, const struct store_val *v, size_t n) CS_MUST_CHECK;
enum cs_err pg_step(struct store_stmt *st) CS_MUST_CHECK;
enum cs_err pg_exec(struct store_stmt *st) CS_MUST_CHECK;
int64_t pg_changes(struct pg_conn *k);

enum store_col_kind pg_col_type(struct store_stmt *st, int i);
int64_t pg_col_int64(struct store_stmt *st, int i);
int pg_col_bytes(struct store_stmt *st, int i);
const void *pg_col_raw_blob(struct store_stmt *st, int i);
const unsigned char *pg_col_raw_text(struct store_stmt *st, int i);
int pg_col_count(struct store_stmt *st);
const char *pg_col_name(struct store_stmt *st, int i);

/* Transactions: every one takes the cluster-wide write lock (a transaction
 * advisory lock), so transactions of all nodes run one at a time, as on
 * SQLite's one writer; PostgreSQL's own group commit makes them durable. */
enum cs_err pg_begin(struct pg_conn *k) CS_MUST_CHECK;
enum cs_err pg_commit(struct pg_conn *k) CS_MUST_CHECK;
void pg_rollback(struct pg_conn *k);

/* store_flight_begin/_end: a transaction advisory lock on a second
 * connection of the thread's (so that it works through a transaction pooler
 * and never holds the write lock), held open while the caller works. */
enum cs_err pg_flight_begin(struct pg_conn *k, const char *key) CS_MUST_CHECK;
void pg_flight_end(struct pg_conn *k);

/* store_copy: the rows of the SQLite database db into k's (empty) database. */
struct sqlite3;
enum cs_err pg_copy_from_sqlite(struct pg_conn *k, struct sqlite3 *db,
    struct store_copy_report *r) CS_MUST_CHECK;

enum cs_err pg_schema_version(struct pg_conn *k, int *out) CS_MUST_CHECK;
/* Applies every migration of migrations/pg/ newer than the database's, each
 * in one transaction under the migration lock (one node at a time). */
enum cs_err pg_migrate(struct pg_conn *k) CS_MUST_CHECK;
int pg_schema_known(void);

#endif
