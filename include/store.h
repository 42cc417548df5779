/* store.h -- the only door to SQL.  One SQLite file in WAL mode, one connection
 * per worker thread, migrations from migrations/ (embedded at build time) applied
 * at start, every statement prepared with bound parameters.  No SQL elsewhere. */
#ifndef CS_STORE_H
#define CS_STORE_H

#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"

struct store;        /* process-wide handle: the path and the migration state */
struct store_conn;   /* one SQLite connection; owned by one thread at a time */

/* Opens (creating if needed) the database at path, sets WAL, foreign_keys=ON,
 * busy_timeout, synchronous=FULL, and applies pending migrations, each in one
 * transaction, recording them in schema_version.  A database whose schema is
 * newer than this binary knows fails with CS_ESCHEMA (and a message on stderr). */
enum cs_err store_open(const char *path, struct store **out) CS_MUST_CHECK;
/* Closes the calling thread's connection too.  NULL-safe. */
void store_close(struct store *s);

/* The calling thread's connection, opened on first use and closed when the
 * thread exits (or at store_close for the thread that calls it).  NULL on failure. */
struct store_conn *store_conn(struct store *s);

/* The highest migration this binary knows, and the one the database has. */
int store_schema_known(void);
enum cs_err store_schema_version(struct store_conn *c, int *out) CS_MUST_CHECK;

/* A cheap "is the database there" check for /readyz. */
enum cs_err store_ping(struct store_conn *c) CS_MUST_CHECK;

/* Transactions: BEGIN IMMEDIATE / COMMIT / ROLLBACK (rollback is NULL-safe and
 * never fails loudly, for use after `out:`). */
enum cs_err store_begin(struct store_conn *c) CS_MUST_CHECK;
enum cs_err store_commit(struct store_conn *c) CS_MUST_CHECK;
void store_rollback(struct store_conn *c);

/* --- signing keys (owned by jwt.c; stored sealed) ----------------------- */
struct store_key {               /* caller-owned; release with store_key_clear() */
	char          *kid;
	char          *alg;          /* "ES256" */
	int64_t        created_at;   /* UTC seconds */
	int64_t        sign_after;   /* signs from this time on */
	int64_t        retired_at;   /* 0 = still current; a later key replaced it */
	int64_t        revoked_at;   /* 0 = not revoked */
	char          *master_kid;   /* which master key sealed it */
	unsigned char *sealed;       /* seal.h blob of the private JWK JSON */
	size_t         sealed_len;
};
void store_key_clear(struct store_key *k);            /* NULL-safe */
void store_keys_free(struct store_key *ks, size_t n); /* NULL-safe */
enum cs_err store_key_insert(struct store_conn *c, const struct store_key *k) CS_MUST_CHECK;
/* Every key not revoked, oldest first.  *out is NULL and *n 0 when none. */
enum cs_err store_keys_list(struct store_conn *c, struct store_key **out, size_t *n) CS_MUST_CHECK;
enum cs_err store_key_set_retired(struct store_conn *c, const char *kid, int64_t at) CS_MUST_CHECK;
enum cs_err store_key_set_revoked(struct store_conn *c, const char *kid, int64_t at) CS_MUST_CHECK;

#endif
