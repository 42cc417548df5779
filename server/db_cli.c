/* db_cli.c -- `consentd migrate -c FILE` and `consentd db copy -c FILE --from
 * SQLITE_FILE --to URL`: argument parsing and what the operator reads.  The
 * migrations and the copy are the store's (store_open_with, store_copy); the
 * copy is then held to the audit chain (audit_verify) under the master key of
 * FILE, on the PostgreSQL side.  No SQL here. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "app.h"
#include "audit.h"
#include "audit_cli.h"
#include "config.h"
#include "db_cli.h"
#include "seal.h"
#include "store.h"

int migrate_cli_main(int argc, char *const *argv)
{
	const char *path = NULL;
	struct config *cfg = NULL;
	struct store *s = NULL;
	struct store_conn *c;
	int have = 0, rc = 1;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "-c") == 0 && i + 1 < argc) {
			path = argv[++i];
		} else {
			path = NULL;
			break;
		}
	}
	if (path == NULL) {
		fprintf(stderr, "usage: consentd migrate -c FILE\n");
		return 2;
	}
	if (config_load(path, stderr, &cfg) != CS_OK)
		return 1;
	enum cs_err e = app_store_open(cfg, STORE_SCHEMA_MIGRATE, &s);
	if (e == CS_OK && ((c = store_conn(s)) == NULL || (e = store_schema_version(c, &have)) != CS_OK)
	    && e == CS_OK)
		e = CS_EDB;
	if (e != CS_OK) {
		fprintf(stderr, "consentd migrate: database %s: %s\n", app_db_name(cfg), cs_strerror(e));
		goto out;
	}
	printf("consentd migrate: database %s: schema %d (this consentd knows %d)\n",
	    app_db_name(cfg), have, store_schema_known());
	rc = have == store_schema_known() ? 0 : 1;
out:
	store_close(s);
	config_free(cfg);
	return rc;
}

static void db_usage(FILE *f)
{
	fprintf(f,
	    "usage: consentd db copy -c FILE --from SQLITE_FILE --to postgresql://...\n"
	    "                             copy a SQLite deployment into an empty PostgreSQL\n"
	    "                             database (migrated first), in one snapshot and one\n"
	    "                             transaction; then each table's count on both sides and\n"
	    "                             `audit verify` on the copy under FILE's master key.\n"
	    "                             The PostgreSQL password comes from libpq (PGPASSWORD,\n"
	    "                             ~/.pgpass), never from the URL.  Stop the server first.\n");
}

int db_cli_main(int argc, char *const *argv)
{
	const char *path = NULL, *from = NULL, *to = NULL;
	struct config *cfg = NULL;
	struct store *src = NULL, *dst = NULL;
	struct store_conn *c;
	struct master_key mk;
	struct store_copy_report rep;
	struct audit_verify_result res;
	char why[160];
	int rc = 1;
	enum cs_err e;

	memset(&mk, 0, sizeof mk);
	if (argc < 1 || strcmp(argv[0], "copy") != 0) {
		db_usage(argc >= 1 && strcmp(argv[0], "--help") == 0 ? stdout : stderr);
		return argc >= 1 && strcmp(argv[0], "--help") == 0 ? 0 : 2;
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-c") == 0 && i + 1 < argc)
			path = argv[++i];
		else if (strcmp(argv[i], "--from") == 0 && i + 1 < argc)
			from = argv[++i];
		else if (strcmp(argv[i], "--to") == 0 && i + 1 < argc)
			to = argv[++i];
		else {
			db_usage(stderr);
			return 2;
		}
	}
	if (path == NULL || from == NULL || to == NULL) {
		db_usage(stderr);
		return 2;
	}
	if (store_url_check(to, why, sizeof why) != CS_OK) {
		fprintf(stderr, "consentd db copy: --to %s\n", why);
		return 2;
	}
	if (config_load(path, stderr, &cfg) != CS_OK)
		return 1;
	if (audit_cli_load_master("consentd db copy", cfg, &mk) != 0)
		goto out;
	if ((e = store_open(from, &src)) != CS_OK) {
		fprintf(stderr, "consentd db copy: --from %s: %s\n", from, cs_strerror(e));
		goto out;
	}
	const struct store_opts o = { .schema = STORE_SCHEMA_MIGRATE,
	    .unprepared = !cfg->db_prepared };
	if ((e = store_open_with(to, &o, &dst)) != CS_OK) {
		fprintf(stderr, "consentd db copy: --to %s: %s\n", to, cs_strerror(e));
		goto out;
	}
	if ((e = store_copy(src, dst, &rep)) != CS_OK) {
		fprintf(stderr, "consentd db copy: %s%s%s; nothing was copied\n", cs_strerror(e),
		    rep.why[0] ? ": " : "", rep.why);
		goto out;
	}
	int64_t total = 0;
	for (size_t i = 0; i < rep.ntables; i++) {
		printf("copied %-20s %" PRId64 " rows (counted on both sides)\n", rep.t[i].name,
		    rep.t[i].rows);
		total += rep.t[i].rows;
	}
	if ((c = store_conn(dst)) == NULL ||
	    (e = audit_verify(c, &mk, NULL, &res)) != CS_OK || !res.ok) {
		fprintf(stderr, "consentd db copy: the copy's audit chain does not verify: %s\n",
		    c == NULL ? "no connection" : e != CS_OK ? cs_strerror(e) : res.why);
		goto out;
	}
	printf("consentd db copy: %" PRId64 " rows in %zu tables; audit: %" PRId64 " entries intact "
	    "under master key %s; head %" PRId64 ":%s\n", total, rep.ntables, res.entries, mk.kid,
	    res.head.seq, res.head.hex);
	rc = 0;
out:
	store_close(dst);
	store_close(src);
	master_key_clear(&mk);
	config_free(cfg);
	return rc;
}
