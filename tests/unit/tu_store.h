/* tu_store.h -- the store unit tests' shared set-up, on both engines: with
 * CONSENTD_TEST_DATABASE_URL set to a postgresql:// URL (scripts/run-store-pg.sh
 * starts a throw-away server and sets it) every test runs on that database,
 * emptied before each (its public schema made anew); otherwise on a fresh
 * SQLite file in a temporary directory.  test_store.c, test_store_authz.c,
 * test_store_mcp.c, test_store_standing.c and test_store_approval.c use it;
 * each runs its suite through tu_store_run, which reads the engine first. */
#ifndef CS_TU_STORE_H
#define CS_TU_STORE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <libpq-fe.h>

#include "store.h"
#include "store_user.h"
#include "testutil.h"

#define TU_STORE_ISSUER "https://idp.example"

/* The PostgreSQL database the tests run on, or NULL for SQLite (set by
 * tu_store_run). */
static const char *tu_pg_url;

/* Runs sql on the PostgreSQL database at url as one simple query, which must
 * succeed (as a command alone unless rows_ok); the first column of its first
 * row as a malloc'd string, or NULL. */
static inline char *tu_pg_sql(const char *url, const char *sql, bool rows_ok)
{
	char *res = NULL;
	PGconn *db = PQconnectdb(url);
	ck_assert_msg(PQstatus(db) == CONNECTION_OK, "connect: %s", PQerrorMessage(db));
	PGresult *r = PQexec(db, sql);
	ExecStatusType t = PQresultStatus(r);
	ck_assert_msg(t == PGRES_COMMAND_OK || (rows_ok && t == PGRES_TUPLES_OK), "%s: %s", sql,
	    PQresultErrorMessage(r));
	if (t == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
		res = strdup(PQgetvalue(r, 0, 0));
	PQclear(r);
	PQfinish(db);
	return res;
}

/* A command (no rows) on the PostgreSQL database at url. */
static inline void tu_pg_exec(const char *url, const char *sql)
{
	free(tu_pg_sql(url, sql, false));
}

/* A fresh database: *dir a new temporary directory, *db the SQLite file in it,
 * or the PostgreSQL URL with the public schema emptied.  Nothing is opened. */
static inline void tu_store_fresh(char **dir, char **db)
{
	*dir = tu_tmpdir();
	if (tu_pg_url != NULL) {
		*db = strdup(tu_pg_url);
		ck_assert_ptr_nonnull(*db);
		tu_pg_exec(tu_pg_url, "DROP SCHEMA public CASCADE; CREATE SCHEMA public");
		return;
	}
	*db = tu_path(*dir, "consentd.db");
}

/* store_open on db: on PostgreSQL as `consentd migrate` opens it (a node never
 * migrates a shared database by itself). */
static inline enum cs_err tu_store_open(const char *db, struct store **out)
{
	const struct store_opts migrate = { .schema = STORE_SCHEMA_MIGRATE };
	return tu_pg_url != NULL ? store_open_with(db, &migrate, out) : store_open(db, out);
}

/* The users.id of (TU_STORE_ISSUER, subject), put at now. */
static inline int64_t tu_store_user(struct store_conn *c, const char *subject, int64_t now)
{
	int64_t id = 0;
	ck_assert_int_eq(store_user_put(c, &(struct store_user){ .issuer = TU_STORE_ISSUER,
	    .subject = subject, .now = now }, &id), CS_OK);
	ck_assert_int_gt(id, 0);
	return id;
}

/* An open store on a fresh database with two people in it, alice and bob. */
struct tu_store {
	char         *dir;
	char         *db;            /* the SQLite file, or the PostgreSQL URL */
	struct store *s;
	struct store_conn *c;
	int64_t       alice, bob;    /* users.id */
};

/* Opens f's fresh database, the people put at now. */
static inline void tu_store_init(struct tu_store *f, int64_t now)
{
	memset(f, 0, sizeof *f);
	tu_store_fresh(&f->dir, &f->db);
	ck_assert_int_eq(tu_store_open(f->db, &f->s), CS_OK);
	f->c = store_conn(f->s);
	ck_assert_ptr_nonnull(f->c);
	f->alice = tu_store_user(f->c, "alice", now);
	f->bob = tu_store_user(f->c, "bob", now);
}

/* Closes f's store (when still open) and removes its directory. */
static inline void tu_store_clear(struct tu_store *f)
{
	store_close(f->s);
	f->s = NULL;
	free(f->db);
	tu_rmdir(f->dir);
}

/* Reads the engine from CONSENTD_TEST_DATABASE_URL (empty is SQLite), then
 * runs the suite make builds for it; the process exit status. */
static inline int tu_store_run(Suite *(*make)(void))
{
	tu_pg_url = getenv("CONSENTD_TEST_DATABASE_URL");
	if (tu_pg_url != NULL && tu_pg_url[0] == '\0')
		tu_pg_url = NULL;
	return tu_run(make());
}

#endif
