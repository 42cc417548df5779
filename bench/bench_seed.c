/* bench_seed.c -- fills a consentd database (after its migrations, consentd
 * stopped) with data for `make bench-seeded` (bench/seeded.js): adds CONSENTS
 * live consents (4 per seeded person: agents coder and butler x resources notes
 * and wiki; ids "seed.N", people "seed.N" at ISSUER) and AUDIT audit entries
 * ("grant.issued" by the gateway, for those consents) appended to the chain:
 * each linked by server/audit.c's own audit_link under the key derived from
 * the master key for "audit-chain", so `consentd audit verify` accepts the
 * result.  One
 * transaction; the seeding connection runs with synchronous = OFF (bench data,
 * not acknowledged writes).  Run it again to add more: numbering continues.
 *
 * Usage: build/bench_seed DB MASTER_KEY_FILE ISSUER CONSENTS AUDIT */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/crypto.h>
#include <sqlite3.h>
#include "audit.h"
#include "seal.h"

#define LINK_LEN AUDIT_LINK_LEN
#define NFIELDS 10

static int exec(sqlite3 *db, const char *sql)
{
	char *err = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
		fprintf(stderr, "bench_seed: %s: %s\n", sql, err != NULL ? err : "?");
		sqlite3_free(err);
		return 0;
	}
	return 1;
}

static int64_t one_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;
	int64_t v = -1;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* The consents: people first (4 consents each), then their consents. */
static int seed_consents(sqlite3 *db, const char *issuer, int64_t from, int64_t n, int64_t now)
{
	static const char users_sql[] =
	    "WITH RECURSIVE k(i) AS (SELECT ?1 / 4 UNION ALL SELECT i + 1 FROM k WHERE i < (?1 + ?2 - 1) / 4) "
	    "INSERT OR IGNORE INTO users (issuer, subject, name, email, created_at, last_login_at) "
	    "SELECT ?3, 'seed.' || i, 'Seeded person ' || i, 'seed.' || i || '@example.test', ?4, ?4 FROM k";
	static const char consents_sql[] =
	    "WITH RECURSIVE k(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM k WHERE i < ?1 + ?2 - 1) "
	    "INSERT INTO consents (id, user_id, agent, resource, granted, declined, offline, created_at, expires_at) "
	    "SELECT 'seed.' || i, (SELECT id FROM users WHERE issuer = ?3 AND subject = 'seed.' || (i / 4)), "
	    "CASE i % 2 WHEN 0 THEN 'coder' ELSE 'butler' END, CASE (i / 2) % 2 WHEN 0 THEN 'notes' ELSE 'wiki' END, "
	    "'read', '', 0, ?4, ?4 + 2592000 FROM k";
	const char *sqls[2] = { users_sql, consents_sql };
	if (n == 0)
		return 1;
	for (int s = 0; s < 2; s++) {
		sqlite3_stmt *st = NULL;
		int rc;
		if (sqlite3_prepare_v2(db, sqls[s], -1, &st, NULL) != SQLITE_OK) {
			fprintf(stderr, "bench_seed: %s\n", sqlite3_errmsg(db));
			return 0;
		}
		sqlite3_bind_int64(st, 1, from);
		sqlite3_bind_int64(st, 2, n);
		sqlite3_bind_text(st, 3, issuer, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 4, now);
		rc = sqlite3_step(st);
		sqlite3_finalize(st);
		if (rc != SQLITE_DONE) {
			fprintf(stderr, "bench_seed: %s\n", sqlite3_errmsg(db));
			return 0;
		}
	}
	return 1;
}

static int seed_audit(sqlite3 *db, const struct master_key *mk, int64_t nconsents, int64_t n, int64_t now)
{
	static const char head_sql[] = "SELECT seq, link FROM audit ORDER BY seq DESC LIMIT 1";
	static const char ins_sql[] =
	    "INSERT INTO audit (seq, ts, actor, action, subject, agent, resource, scopes, consent_id, "
	    "request_id, outcome, detail, link, master_kid) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)";
	unsigned char key[SEAL_DERIVED_KEY_LEN], prev[LINK_LEN], link[LINK_LEN];
	char subject[32], consent[32], detail[48];
	sqlite3_stmt *head = NULL, *ins = NULL;
	int64_t seq = 1;
	int ok = 0;

	memset(prev, 0, sizeof prev);
	if (one_int(db, "SELECT count(*) FROM audit_anchor") > 0) {
		fprintf(stderr, "bench_seed: the chain was pruned (audit_anchor): not supported\n");
		return 0;
	}
	if (sqlite3_prepare_v2(db, head_sql, -1, &head, NULL) != SQLITE_OK)
		goto out;
	if (sqlite3_step(head) == SQLITE_ROW) {
		seq = sqlite3_column_int64(head, 0) + 1;
		if (sqlite3_column_bytes(head, 1) == LINK_LEN)
			memcpy(prev, sqlite3_column_blob(head, 1), LINK_LEN);
	}
	if (seal_derive_key(mk, "audit-chain", key) != CS_OK)
		goto out;
	if (sqlite3_prepare_v2(db, ins_sql, -1, &ins, NULL) != SQLITE_OK)
		goto out;
	for (int64_t i = 0; i < n; i++, seq++) {
		int64_t c = nconsents > 0 ? (seq * 7919) % nconsents : 0;
		const char *f[NFIELDS];
		snprintf(subject, sizeof subject, "seed.%" PRId64, c / 4);
		snprintf(consent, sizeof consent, "seed.%" PRId64, c);
		snprintf(detail, sizeof detail, "jti=seed%016" PRIx64, (uint64_t)seq * UINT64_C(0x9e3779b97f4a7c15));
		f[0] = "gateway:agent-gateway";
		f[1] = "grant.issued";
		f[2] = subject;
		f[3] = c % 2 == 0 ? "coder" : "butler";
		f[4] = (c / 2) % 2 == 0 ? "notes" : "wiki";
		f[5] = "read";
		f[6] = nconsents > 0 ? consent : NULL;
		f[7] = NULL;
		f[8] = "ok";
		f[9] = detail;
		const struct audit_entry e = { .ts = now, .actor = f[0], .action = f[1],
			.subject = f[2], .agent = f[3], .resource = f[4], .scopes = f[5],
			.consent_id = f[6], .request_id = f[7], .outcome = f[8], .detail = f[9] };
		if (audit_link(key, prev, seq, &e, link) != CS_OK)
			goto out;
		sqlite3_bind_int64(ins, 1, seq);
		sqlite3_bind_int64(ins, 2, now);
		for (int k = 0; k < NFIELDS; k++) {
			if (f[k] == NULL)
				sqlite3_bind_null(ins, 3 + k);
			else
				sqlite3_bind_text(ins, 3 + k, f[k], -1, SQLITE_STATIC);
		}
		sqlite3_bind_blob(ins, 13, link, LINK_LEN, SQLITE_STATIC);
		sqlite3_bind_text(ins, 14, mk->kid, -1, SQLITE_STATIC);
		if (sqlite3_step(ins) != SQLITE_DONE)
			goto out;
		sqlite3_reset(ins);
		memcpy(prev, link, LINK_LEN);
	}
	ok = 1;
out:
	if (!ok)
		fprintf(stderr, "bench_seed: audit: %s\n", sqlite3_errmsg(db));
	OPENSSL_cleanse(key, sizeof key);
	sqlite3_finalize(head);
	sqlite3_finalize(ins);
	return ok;
}

int main(int argc, char **argv)
{
	struct master_key mk;
	sqlite3 *db = NULL;
	int64_t nc, na, from, now = (int64_t)time(NULL);
	int rc = 1;

	if (argc != 6 || (nc = strtoll(argv[4], NULL, 10)) < 0 || (na = strtoll(argv[5], NULL, 10)) < 0) {
		fprintf(stderr, "usage: %s DB MASTER_KEY_FILE ISSUER CONSENTS AUDIT\n", argv[0]);
		return 2;
	}
	if (master_key_load(argv[2], NULL, &mk) != CS_OK) {
		fprintf(stderr, "bench_seed: cannot load the master key %s\n", argv[2]);
		return 1;
	}
	if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		fprintf(stderr, "bench_seed: %s: %s\n", argv[1], sqlite3_errmsg(db));
		goto out;
	}
	sqlite3_busy_timeout(db, 5000);
	if (!exec(db, "PRAGMA synchronous = OFF; PRAGMA cache_size = -262144; BEGIN IMMEDIATE"))
		goto out;
	/* Seeded consents so far: their ids are "seed.N", N from 0 (a '.' is not base64url). */
	from = one_int(db, "SELECT count(*) FROM consents WHERE id >= 'seed.' AND id < 'seed/'");
	if (from < 0 || !seed_consents(db, argv[3], from, nc, now) ||
	    !seed_audit(db, &mk, from + nc, na, now) || !exec(db, "COMMIT"))
		goto out;
	printf("{\"consents\":%" PRId64 ",\"audit\":%" PRId64 "}\n",
	    one_int(db, "SELECT count(*) FROM consents"), one_int(db, "SELECT count(*) FROM audit"));
	rc = 0;
out:
	master_key_clear(&mk);
	sqlite3_close(db);
	return rc;
}
