/* test_audit.c -- the HMAC-chained audit log: appends, each kind of tampering
 * named at the right entry, a wrong key, a cut-off tail with --head, export,
 * and master-key rotation (vault_rekey) with its refusal and its rollback;
 * published heads (audit_head.c): reading head lines and files, checking a
 * history, publishing per commit and in order, a database found behind;
 * the chain's head SQLite's writer remembers between transactions, and what
 * makes it forget (a savepoint rolled back, a failed batch, another process,
 * a relink) -- against a real SQLite file built from migrations/. */
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <string.h>
#include <sys/stat.h>
#include <sqlite3.h>
#include <jansson.h>
#include "audit.h"
#include "audit_cli.h"
#include "vault_cli.h"
#include "audit_head.h"
#include "buf.h"
#include "jwt.h"
#include "seal.h"
#include "store.h"
#include "testutil.h"
#include "../../server/store_priv.h"   /* store_writer_stats, store_run, store_set_linger */

#define T0 1000000
/* Two fixed master keys (Base64 of 32 bytes). */
#define MK1 "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
#define MK2 "HxweHRwbGhkYFxYVFBMSERAPDg0MCwoJCAcGBQQDAgE="

static char *dir;
static struct store *st;
static struct store_conn *sc;
static sqlite3 *raw;                  /* a second connection: the attacker's */
static struct master_key mk, mk2;
static FILE *publog;                  /* the publisher's log, when a test opens one */

static void setup(void)
{
	dir = tu_tmpdir();
	char *db = tu_path(dir, "t.db");
	ck_assert_int_eq(store_open(db, &st), CS_OK);
	sc = store_conn(st);
	ck_assert_ptr_nonnull(sc);
	ck_assert_int_eq(sqlite3_open(db, &raw), SQLITE_OK);
	sqlite3_busy_timeout(raw, 5000);
	free(db);
	ck_assert_int_eq(master_key_load(NULL, MK1, &mk), CS_OK);
	ck_assert_int_eq(master_key_load(NULL, MK2, &mk2), CS_OK);
	ck_assert_int_eq(audit_set_master_key(&mk), CS_OK);
	audit_crossref_forget();           /* a new database: its chains are numbered from 1 again */
}

static void teardown(void)
{
	audit_publish_close(st);
	if (publog != NULL)
		fclose(publog);
	publog = NULL;
	audit_clear_key();
	sqlite3_close(raw);
	store_close(st);
	tu_rmdir(dir);
	master_key_clear(&mk);
	master_key_clear(&mk2);
}

static void rawsql(const char *sql)
{
	char *err = NULL;
	int rc = sqlite3_exec(raw, sql, NULL, NULL, &err);
	if (rc != SQLITE_OK)
		fprintf(stderr, "sql: %s: %s\n", sql, err ? err : "?");
	sqlite3_free(err);
	ck_assert_int_eq(rc, SQLITE_OK);
}

static int64_t rawint(const char *sql)
{
	sqlite3_stmt *q = NULL;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, sql, -1, &q, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
	int64_t v = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	return v;
}

/* Appends n entries (ts T0 + i), one transaction each. */
static void append_n(int n)
{
	for (int i = 0; i < n; i++) {
		char sub[16];
		ck_assert_int_eq(str_fmt(sub, sizeof sub, "user%d", i), CS_OK);
		const struct audit_entry e = {
			.ts = T0 + i, .actor = "gateway:agent-gateway", .action = "consent.request.created",
			.subject = sub, .agent = "coder", .resource = "notes", .scopes = "notes:read",
			.request_id = i % 2 ? "req" : NULL, .outcome = "ok", .detail = i % 3 ? "" : NULL,
		};
		ck_assert_int_eq(store_begin(sc), CS_OK);
		ck_assert_int_eq(audit_append(sc, &e), CS_OK);
		ck_assert_int_eq(store_commit(sc), CS_OK);
	}
}

static struct audit_verify_result verify_with(const struct master_key *k, const struct audit_head *want)
{
	struct audit_verify_result r;
	ck_assert_int_eq(audit_verify(sc, k, want, &r), CS_OK);
	return r;
}

START_TEST(test_audit_chain_intact)
{
	struct audit_head h;
	ck_assert_int_eq(audit_head(sc, &h), CS_OK);
	ck_assert_int_eq(h.seq, 0);
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 1);
	ck_assert_int_eq(r.entries, 0);
	append_n(5);
	ck_assert_int_eq(audit_head(sc, &h), CS_OK);
	ck_assert_int_eq(h.seq, 5);
	r = verify_with(&mk, &h);
	ck_assert_int_eq(r.ok, 1);
	ck_assert_int_eq(r.entries, 5);
	ck_assert_int_eq(r.head.seq, 5);
	ck_assert_str_eq(r.head.hex, h.hex);
	/* An older head is still in the chain. */
	struct audit_head old;
	char buf[100];
	ck_assert_int_eq(str_fmt(buf, sizeof buf, "5:%s", h.hex), CS_OK);
	ck_assert_int_eq(audit_head_parse(buf, &old), CS_OK);
	ck_assert_int_eq(old.seq, 5);
	ck_assert_int_eq(audit_head_parse("5:abc", &old), CS_EINVAL);
	ck_assert_int_eq(audit_head_parse("x:abc", &old), CS_EINVAL);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit WHERE master_kid = (SELECT master_kid "
	    "FROM audit WHERE seq = 1) AND length(link) = 32"), 5);
}
END_TEST

START_TEST(test_audit_append_without_key_refused)
{
	audit_clear_key();
	const struct audit_entry e = { .ts = T0, .action = "consent.granted" };
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(audit_append(sc, &e), CS_ECRYPTO);
	store_rollback(sc);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit"), 0);
}
END_TEST

START_TEST(test_audit_tamper_edit_content)
{
	append_n(5);
	rawsql("UPDATE audit SET subject = 'mallory' WHERE seq = 3");
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, 3);
	ck_assert_int_eq(r.head.seq, 2);
}
END_TEST

START_TEST(test_audit_tamper_null_versus_empty)
{
	append_n(5);
	rawsql("UPDATE audit SET detail = '' WHERE seq = 4 AND detail IS NULL");
	rawsql("UPDATE audit SET detail = NULL WHERE seq = 2");
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, 2);
}
END_TEST

START_TEST(test_audit_tamper_delete_middle)
{
	append_n(5);
	rawsql("DELETE FROM audit WHERE seq = 3");
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, 4);
	ck_assert_ptr_nonnull(strstr(r.why, "entry 3"));
}
END_TEST

START_TEST(test_audit_tamper_delete_first)
{
	append_n(3);
	rawsql("DELETE FROM audit WHERE seq = 1");
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, 2);
}
END_TEST

START_TEST(test_audit_tamper_delete_last_with_head)
{
	struct audit_head h;
	append_n(5);
	ck_assert_int_eq(audit_head(sc, &h), CS_OK);
	rawsql("DELETE FROM audit WHERE seq = 5");
	/* Without the logged head a cut-off tail cannot be seen... */
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 1);
	ck_assert_int_eq(r.head.seq, 4);
	/* ...with it, it is. */
	r = verify_with(&mk, &h);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.head_missing, 1);
	ck_assert_int_eq(r.broken, 5);
	/* The next entry takes number 6: the gap shows without a head too. */
	append_n(1);
	r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, 6);
}
END_TEST

START_TEST(test_audit_tamper_reorder)
{
	append_n(5);
	/* Swap the contents (not the numbers) of entries 2 and 3, links included. */
	rawsql("CREATE TEMP TABLE t AS SELECT * FROM audit WHERE seq IN (2, 3);"
	    "UPDATE audit SET (ts, actor, action, subject, agent, resource, scopes, consent_id, "
	    "request_id, outcome, detail, link) = (SELECT ts, actor, action, subject, agent, resource, "
	    "scopes, consent_id, request_id, outcome, detail, link FROM t WHERE t.seq = 5 - audit.seq) "
	    "WHERE seq IN (2, 3);");
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, 2);
}
END_TEST

START_TEST(test_audit_tamper_link_under_wrong_key)
{
	append_n(5);
	rawsql("CREATE TEMP TABLE good AS SELECT seq, link FROM audit");
	/* Entry 3's link made with another key (the attacker's): take the
	 * chain re-linked under mk2, then put every other link back. */
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(audit_relink(sc, &mk2), CS_OK);
	ck_assert_int_eq(store_commit(sc), CS_OK);
	rawsql("UPDATE audit SET link = (SELECT link FROM good WHERE good.seq = audit.seq), "
	    "master_kid = (SELECT master_kid FROM audit WHERE seq = 1) WHERE seq <> 3");
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, 3);
	/* And the whole chain under the wrong key breaks at entry 1. */
	rawsql("UPDATE audit SET link = (SELECT link FROM good WHERE good.seq = audit.seq)");
	ck_assert_int_eq(verify_with(&mk, NULL).ok, 1);
	r = verify_with(&mk2, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, 1);
}
END_TEST

START_TEST(test_audit_tamper_null_link)
{
	append_n(3);
	rawsql("UPDATE audit SET link = NULL WHERE seq = 2");
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, 2);
}
END_TEST

struct lines {
	int     n;
	int64_t first_seq;
};

static enum cs_err collect(void *arg, const char *js)
{
	struct lines *l = arg;
	json_error_t err;
	json_t *o = json_loads(js, 0, &err);
	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(strlen(json_string_value(json_object_get(o, "link"))), AUDIT_LINK_HEX);
	if (l->n == 0)
		l->first_seq = json_integer_value(json_object_get(o, "seq"));
	ck_assert_ptr_null(strchr(js, '\n'));
	json_decref(o);
	l->n++;
	return CS_OK;
}

START_TEST(test_audit_export_since)
{
	struct lines l = { 0, 0 };
	append_n(5);
	ck_assert_int_eq(audit_export(sc, T0 + 2, collect, &l), CS_OK);
	ck_assert_int_eq(l.n, 3);
	ck_assert_int_eq(l.first_seq, 3);
}
END_TEST

/* --- master-key rotation ------------------------------------------------- */

/* A vault record and an outbox entry sealed as vault.c seals them. */
static void vault_rows(const struct master_key *k, int corrupt_outbox)
{
	static const char aad[] = "v1\0rec1\0c1\0alice\0notes";
	unsigned char *a = NULL, *b = NULL;
	size_t al = 0, bl = 0;
	ck_assert_int_eq(seal(k, "vault", aad, sizeof aad - 1, "at-1", 4, &a, &al), CS_OK);
	ck_assert_int_eq(seal(k, "vault", aad, sizeof aad - 1, "rt-1", 4, &b, &bl), CS_OK);
	if (corrupt_outbox)
		b[bl - 1] ^= 1;
	sqlite3_stmt *q = NULL;
	ck_assert_int_eq(sqlite3_prepare_v2(raw,
	    "INSERT INTO vault_records (id, consent_id, user_id, subject, agent, resource, "
	    "provider_scopes, token_type, access_sealed, refresh_sealed, access_expires_at, master_kid, "
	    "created_at, updated_at) VALUES ('rec1', 'c1', 1, 'alice', 'coder', 'notes', 'r', 'Bearer', "
	    "?1, ?2, 0, ?3, 0, 0)", -1, &q, NULL), SQLITE_OK);
	sqlite3_bind_blob(q, 1, a, (int)al, SQLITE_TRANSIENT);
	sqlite3_bind_blob(q, 2, b, (int)bl, SQLITE_TRANSIENT);
	sqlite3_bind_text(q, 3, k->kid, -1, SQLITE_TRANSIENT);
	ck_assert_int_eq(sqlite3_step(q), SQLITE_DONE);
	sqlite3_finalize(q);
	ck_assert_int_eq(sqlite3_prepare_v2(raw,
	    "INSERT INTO vault_outbox (record_id, consent_id, user_id, subject, resource, access_sealed, "
	    "refresh_sealed, master_kid, access_expires_at, created_at) VALUES ('rec1', 'c1', 1, "
	    "'alice', 'notes', ?1, ?2, ?3, 0, 0)", -1, &q, NULL), SQLITE_OK);
	sqlite3_bind_blob(q, 1, a, (int)al, SQLITE_TRANSIENT);
	sqlite3_bind_blob(q, 2, b, (int)bl, SQLITE_TRANSIENT);
	sqlite3_bind_text(q, 3, k->kid, -1, SQLITE_TRANSIENT);
	ck_assert_int_eq(sqlite3_step(q), SQLITE_DONE);
	sqlite3_finalize(q);
	free(a);
	free(b);
}

/* Opens the blob in column col of the first row of table under k. */
static enum cs_err open_vault(const char *sql, const struct master_key *k)
{
	static const char aad[] = "v1\0rec1\0c1\0alice\0notes";
	sqlite3_stmt *q = NULL;
	unsigned char *pt = NULL;
	size_t n = 0;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, sql, -1, &q, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
	enum cs_err e = unseal(k, "vault", aad, sizeof aad - 1, sqlite3_column_blob(q, 0),
	    (size_t)sqlite3_column_bytes(q, 0), &pt, &n);
	sqlite3_finalize(q);
	free(pt);
	return e;
}

START_TEST(test_audit_rekey_round_trip)
{
	struct keyring *kr = NULL;
	struct rekey_report rep;
	char *kid = NULL;
	ck_assert_int_eq(keyring_load(sc, &mk, T0, 300, &kr), CS_OK);
	kid = strdup(keyring_signing_kid(kr));
	keyring_free(kr);
	kr = NULL;
	append_n(4);
	vault_rows(&mk, 0);
	ck_assert_int_eq(vault_rekey(sc, &mk, &mk2, T0 + 10, &rep), CS_OK);
	ck_assert_int_eq(rep.signing_keys, 1);
	ck_assert_int_eq(rep.vault_records, 1);
	ck_assert_int_eq(rep.outbox_entries, 1);
	ck_assert_int_eq(rep.audit_entries, 4);
	/* The chain verifies under the new key only, ending with the rotation. */
	struct audit_verify_result r = verify_with(&mk2, NULL);
	ck_assert_int_eq(r.ok, 1);
	ck_assert_int_eq(r.entries, 5);
	ck_assert_int_eq(verify_with(&mk, NULL).ok, 0);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit WHERE seq = 5 AND action = "
	    "'master-key-rotated' AND detail LIKE 'old=% new=%'"), 1);
	/* Everything sealed opens under the new key, nothing under the old. */
	ck_assert_int_eq(keyring_load(sc, &mk2, T0 + 20, 300, &kr), CS_OK);
	ck_assert_str_eq(keyring_signing_kid(kr), kid);
	keyring_free(kr);
	ck_assert_int_eq(open_vault("SELECT access_sealed FROM vault_records", &mk2), CS_OK);
	ck_assert_int_eq(open_vault("SELECT refresh_sealed FROM vault_records", &mk2), CS_OK);
	ck_assert_int_eq(open_vault("SELECT refresh_sealed FROM vault_outbox", &mk2), CS_OK);
	ck_assert_int_eq(open_vault("SELECT access_sealed FROM vault_records", &mk), CS_ECRYPTO);
	ck_assert_int_eq(rawint("SELECT count(*) FROM signing_keys WHERE master_kid = "
	    "(SELECT master_kid FROM vault_records)"), 1);
	/* Appends go on under the new key (the process key was switched). */
	append_n(1);
	ck_assert_int_eq(verify_with(&mk2, NULL).ok, 1);
	/* Rotating to the same key is refused. */
	ck_assert_int_eq(vault_rekey(sc, &mk2, &mk2, T0 + 30, &rep), CS_EEXIST);
	free(kid);
}
END_TEST

START_TEST(test_audit_rekey_refuses_broken_chain)
{
	struct rekey_report rep;
	append_n(4);
	vault_rows(&mk, 0);
	rawsql("UPDATE audit SET outcome = 'refused' WHERE seq = 2");
	ck_assert_int_eq(vault_rekey(sc, &mk, &mk2, T0 + 10, &rep), CS_EPERM);
	ck_assert_int_eq(rep.broken, 2);
	ck_assert_int_eq(open_vault("SELECT access_sealed FROM vault_records", &mk), CS_OK);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit"), 4);
}
END_TEST

START_TEST(test_audit_rekey_failure_rolls_back)
{
	struct rekey_report rep;
	struct keyring *kr = NULL;
	ck_assert_int_eq(keyring_load(sc, &mk, T0, 300, &kr), CS_OK);
	keyring_free(kr);
	append_n(3);
	vault_rows(&mk, 1);               /* a refresh blob that does not open, after the signing key */
	ck_assert_int_eq(vault_rekey(sc, &mk, &mk2, T0 + 10, &rep), CS_ECRYPTO);
	/* The old state, all of it: keys, records and links under the old key. */
	ck_assert_int_eq(verify_with(&mk, NULL).ok, 1);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit"), 3);
	ck_assert_int_eq(open_vault("SELECT access_sealed FROM vault_records", &mk), CS_OK);
	ck_assert_int_eq(keyring_load(sc, &mk, T0 + 20, 300, &kr), CS_OK);
	keyring_free(kr);
}
END_TEST

/* --- published heads: parsing, history, publishing, a database behind ----- */

#define HEX_A "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define HEX_A_UPPER "0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"

/* audit_head_line's verdict on line: CS_OK and *kind, or an error. */
static enum cs_err line_kind(const char *line, enum audit_line_kind *kind, struct audit_head *h)
{
	memset(h, 0, sizeof *h);
	*kind = AUDIT_LINE__MAX;
	return audit_head_line(line, kind, h);
}

START_TEST(test_audit_head_line_forms)
{
	static const char *const heads[] = {
		"7:" HEX_A, "7:" HEX_A "\n", "7:" HEX_A "\r\n", "  7:" HEX_A " \t", "7:" HEX_A_UPPER,
		"007:" HEX_A, "consentd: audit head 7:" HEX_A,
		"2025-01-31T00:00:00Z host consentd[42]: consentd: audit head 7:" HEX_A,
		"audit head seq=7 link=" HEX_A, "level=info msg=x audit head seq=7 link=" HEX_A "\n",
	};
	enum audit_line_kind k;
	struct audit_head h;
	for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
		ck_assert_msg(line_kind(heads[i], &k, &h) == CS_OK, "refused: %s", heads[i]);
		ck_assert_int_eq(k, AUDIT_LINE_HEAD);
		ck_assert_int_eq(h.seq, 7);
		ck_assert_str_eq(h.hex, HEX_A);           /* lower case, whatever was written */
	}
	static const char *const skips[] = {
		"", "\n", "   \r\n", "# a comment", "#", "# master-key-rotatedX",
		"consentd: error: audit head behind: database head 3 < published 5; ...",
	};
	for (size_t i = 0; i < sizeof skips / sizeof skips[0]; i++) {
		ck_assert_msg(line_kind(skips[i], &k, &h) == CS_OK, "refused: %s", skips[i]);
		ck_assert_int_eq(k, AUDIT_LINE_SKIP);
	}
	ck_assert_int_eq(line_kind("# master-key-rotated old=a new=b\n", &k, &h), CS_OK);
	ck_assert_int_eq(k, AUDIT_LINE_ROTATED);
	ck_assert_int_eq(line_kind(AUDIT_ROTATED_MARK, &k, &h), CS_OK);
	ck_assert_int_eq(k, AUDIT_LINE_ROTATED);
	ck_assert_int_eq(line_kind("0:" "0000000000000000000000000000000000000000000000000000000000000000",
	    &k, &h), CS_OK);
	ck_assert_int_eq(h.seq, 0);
}
END_TEST

/* The server's JSON log stream: a line is read by its msg; requests and other
 * messages are skipped, so a whole log file can be checked. */
START_TEST(test_audit_head_line_json_log)
{
	enum audit_line_kind k;
	struct audit_head h;
	ck_assert_int_eq(line_kind("{\"ts\":\"2025-01-31T00:00:00.000Z\",\"level\":\"info\","
	    "\"msg\":\"audit head 7:" HEX_A "\"}", &k, &h), CS_OK);
	ck_assert_int_eq(k, AUDIT_LINE_HEAD);
	ck_assert_int_eq(h.seq, 7);
	ck_assert_str_eq(h.hex, HEX_A);
	static const char *const skips[] = {
		"{\"ts\":\"x\",\"level\":\"info\",\"event\":\"request\",\"route\":\"/token\",\"status\":400}",
		"{\"level\":\"info\",\"msg\":\"consentd 0.1.0 listening on 127.0.0.1:8080\"}",
		"{\"level\":\"error\",\"msg\":\"audit head behind: database head 3 < published 5\"}",
		"{\"level\":\"info\",\"msg\":\"audit head_file /x: last published head 4\"}",
		"{\"level\":\"error\",\"msg\":\"audit head check: cannot read the database: busy\"}",
		"{}",
	};
	for (size_t i = 0; i < sizeof skips / sizeof skips[0]; i++) {
		ck_assert_msg(line_kind(skips[i], &k, &h) == CS_OK, "refused: %s", skips[i]);
		ck_assert_int_eq(k, AUDIT_LINE_SKIP);
	}
	static const char *const bad[] = {
		"{", "{\"msg\":\"audit head 7:" HEX_A "\"", "{\"msg\":\"audit head 7:abc\"}",
		"{\"msg\":\"audit head 7:" HEX_A "\",\"msg\":\"audit head 8:" HEX_A "\"}",
		"[\"audit head 7:" HEX_A "\"]",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(line_kind(bad[i], &k, &h) == CS_EINVAL, "accepted: %s", bad[i]);
}
END_TEST

START_TEST(test_audit_head_line_bad)
{
	static const char *const bad[] = {
		"garbage", "hello world", "7", "7:", ":" HEX_A, "x:" HEX_A, "-7:" HEX_A, "+7:" HEX_A,
		"7a:" HEX_A, "7.0:" HEX_A, "99999999999999999999:" HEX_A,             /* > INT64_MAX */
		"7:" "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg",  /* non-hex */
		"7:" "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",   /* 63 */
		"7:" HEX_A "0",                                                       /* 65 */
		"7:" HEX_A " trailing", "7 " HEX_A, "7::" HEX_A, "7:0x" HEX_A,
		"audit head seq=7 link=abc", "audit head seq=x link=" HEX_A,
		"audit head seq=7 link " HEX_A, "audit head seq= link=" HEX_A, "audit head 7",
		"consentd: audit head 7:" HEX_A "0",
	};
	enum audit_line_kind k;
	struct audit_head h;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_assert_msg(line_kind(bad[i], &k, &h) == CS_EINVAL, "accepted: %s", bad[i]);
		ck_assert_int_eq(k, AUDIT_LINE__MAX);    /* nothing written on failure */
	}
	/* A very long line, even one ending in a good head. */
	size_t n = AUDIT_HEAD_LINE_MAX + 200;
	char *l = malloc(n + 1);
	ck_assert_ptr_nonnull(l);
	memset(l, 'a', n);
	memcpy(l + n - 66, "7:" HEX_A, 66);
	l[n] = '\0';
	ck_assert_int_eq(line_kind(l, &k, &h), CS_EINVAL);
	free(l);
	ck_assert_int_eq(audit_head_line(NULL, &k, &h), CS_EINVAL);
}
END_TEST

/* Writes text (n bytes) to a new file in dir; returns its path. */
static char *write_file(const char *name, const char *text, size_t n)
{
	char *p = tu_path(dir, name);
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(text, 1, n, f), n);
	fclose(f);
	return p;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *s = NULL;
	size_t n = 0;
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(getdelim(&s, &n, '\0', f) >= 0 || feof(f), 1);
	fclose(f);
	if (s == NULL)
		s = strdup("");
	return s;
}

/* audit_heads_check on the file at path against the chain as it verifies. */
static enum cs_err heads_check(const char *path, struct audit_heads_result *hr)
{
	struct audit_verify_result r = verify_with(&mk, NULL);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	enum cs_err e = audit_heads_check(sc, f, &r.head, hr);
	fclose(f);
	return e;
}

static enum cs_err heads_check_text(const char *text, size_t n, struct audit_heads_result *hr)
{
	char *p = write_file("heads.txt", text, n);
	enum cs_err e = heads_check(p, hr);
	free(p);
	return e;
}

START_TEST(test_audit_heads_file_bad)
{
	struct audit_heads_result hr;
	append_n(2);
	struct audit_head h;
	ck_assert_int_eq(audit_head(sc, &h), CS_OK);
	char good[100];
	ck_assert_int_eq(str_fmt(good, sizeof good, "2:%s\n", h.hex), CS_OK);

	/* Empty, or only blank lines and comments: no head, nothing proven. */
	ck_assert_int_eq(heads_check_text("", 0, &hr), CS_ENOENT);
	ck_assert_int_eq(hr.ok, 0);
	ck_assert_int_eq(heads_check_text("\n# nothing\n\n", 12, &hr), CS_ENOENT);
	/* Garbage on line 3 is named, even after a good head. */
	char text[4096];
	ck_assert_int_eq(str_fmt(text, sizeof text, "%s\nnot a head\n", good), CS_OK);
	int n = (int)strlen(text);
	ck_assert_int_eq(heads_check_text(text, (size_t)n, &hr), CS_EINVAL);
	ck_assert_int_eq(hr.line, 3);
	ck_assert_ptr_nonnull(strstr(hr.why, "line 3"));
	/* Non-hex, wrong length, seq not numeric. */
	ck_assert_int_eq(heads_check_text("2:zz\n", 5, &hr), CS_EINVAL);
	ck_assert_int_eq(hr.line, 1);
	/* A link of the wrong length that is not hex all through is garbage. */
	ck_assert_int_eq(str_fmt(text, sizeof text, "%s2:%.62sxx\n", good, h.hex), CS_OK);
	n = (int)strlen(text);
	ck_assert_int_eq(heads_check_text(text, (size_t)n, &hr), CS_EINVAL);
	ck_assert_int_eq(hr.line, 2);
	/* A head a crash cut short (digits, ':' and fewer hex digits), or a tail of
	 * NUL bytes after one, is skipped and counted: the heads around it count. */
	ck_assert_int_eq(str_fmt(text, sizeof text, "2:%.20s\n%s", h.hex, good), CS_OK);
	n = (int)strlen(text);
	ck_assert_int_eq(heads_check_text(text, (size_t)n, &hr), CS_OK);
	ck_assert_int_eq(hr.ok, 1);
	ck_assert_int_eq(hr.heads, 1);
	ck_assert_int_eq(hr.torn, 1);
	ck_assert_int_eq(str_fmt(text, sizeof text, "%s2:%.63s", good, h.hex), CS_OK);
	n = (int)strlen(text);
	ck_assert_int_eq(heads_check_text(text, (size_t)n, &hr), CS_OK);
	ck_assert_int_eq(hr.torn, 1);
	{
		char tail[256];
		ck_assert_int_eq(str_fmt(tail, sizeof tail, "%s1", good), CS_OK);
		size_t tl = strlen(tail);
		memset(tail + tl, 0, 40);
		tail[tl + 40] = '\n';
		ck_assert_int_eq(heads_check_text(tail, tl + 41, &hr), CS_OK);
		ck_assert_int_eq(hr.heads, 1);
		ck_assert_int_eq(hr.torn, 1);
	}
	/* Only cut-off lines: no head, nothing proven. */
	ck_assert_int_eq(heads_check_text("2:ab\n", 5, &hr), CS_ENOENT);
	ck_assert_int_eq(str_fmt(text, sizeof text, "two:%s\n", h.hex), CS_OK);
	n = (int)strlen(text);
	ck_assert_int_eq(heads_check_text(text, (size_t)n, &hr), CS_EINVAL);
	/* A NUL byte. */
	ck_assert_int_eq(heads_check_text("2:\0abc\n", 7, &hr), CS_EINVAL);
	/* A line longer than AUDIT_HEAD_LINE_MAX: refused without reading it all in. */
	char *big = malloc(3 * AUDIT_HEAD_LINE_MAX);
	ck_assert_ptr_nonnull(big);
	ck_assert_int_eq(str_fmt(big, 3 * AUDIT_HEAD_LINE_MAX, "%s", good), CS_OK);
	n = (int)strlen(big);
	memset(big + n, '1', 2 * AUDIT_HEAD_LINE_MAX);
	big[n + 2 * AUDIT_HEAD_LINE_MAX] = '\n';
	ck_assert_int_eq(heads_check_text(big, (size_t)n + 2 * AUDIT_HEAD_LINE_MAX + 1, &hr),
	    CS_ETOOBIG);
	ck_assert_int_eq(hr.line, 2);
	free(big);
	/* The good line alone, without a final newline too, passes. */
	ck_assert_int_eq(heads_check_text(good, strlen(good) - 1, &hr), CS_OK);
	ck_assert_int_eq(hr.ok, 1);
	ck_assert_int_eq(hr.heads, 1);
}
END_TEST

/* Opens the publisher on the test store with head_file "heads" in dir (or
 * none) and its log in dir/pub.log; returns the head file's path. */
static char *publish_open(int with_file)
{
	char *p = tu_path(dir, "heads");
	char *lp = tu_path(dir, "pub.log");
	FILE *log = fopen(lp, "a");
	ck_assert_ptr_nonnull(log);
	setvbuf(log, NULL, _IOLBF, 0);
	free(lp);
	if (publog != NULL)
		fclose(publog);
	publog = log;
	ck_assert_int_eq(audit_publish_open(st, with_file ? p : NULL, log), CS_OK);
	return p;
}

static char *publish_log(void)
{
	char *lp = tu_path(dir, "pub.log");
	char *s = slurp(lp);
	free(lp);
	return s;
}

/* Entry seq's stored link in hex. */
static void db_link(int64_t seq, char hex[AUDIT_LINK_HEX + 1])
{
	char sql[100];
	sqlite3_stmt *q = NULL;
	ck_assert_int_eq(str_fmt(sql, sizeof sql, "SELECT lower(hex(link)) FROM audit WHERE seq = %lld", (long long)seq), CS_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(raw, sql, -1, &q, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
	ck_assert_int_eq(str_fmt(hex, AUDIT_LINK_HEX + 1, "%s", (const char *)sqlite3_column_text(q, 0)), CS_OK);
	sqlite3_finalize(q);
}

/* The database's lines as head_file would hold one per entry: "1:L1\n2:L2\n...". */
static char *db_lines(int64_t from, int64_t to)
{
	size_t cap = (size_t)(to - from + 1) * 100 + 1, o = 0;
	char *s = calloc(1, cap), hex[AUDIT_LINK_HEX + 1];
	ck_assert_ptr_nonnull(s);
	for (int64_t i = from; i <= to; i++) {
		db_link(i, hex);
		ck_assert_int_eq(str_fmt(s + o, cap - o, "%lld:%s\n", (long long)i, hex), CS_OK);
		o += strlen(s + o);
	}
	return s;
}

/* Cuts entries above keep off and rewinds the numbers: what someone with
 * write access to the database but without the master key can do. */
static void cut_tail(int keep)
{
	char sql[200];
	ck_assert_int_eq(str_fmt(sql, sizeof sql, "DELETE FROM audit WHERE seq > %d; "
	    "UPDATE sqlite_sequence SET seq = %d WHERE name = 'audit'", keep, keep), CS_OK);
	rawsql(sql);
}

START_TEST(test_audit_heads_history)
{
	struct audit_heads_result hr;
	char *p = publish_open(1);
	append_n(5);
	/* A good history passes: each commit's head, in order. */
	char *want = db_lines(1, 5), *got = slurp(p);
	ck_assert_str_eq(got, want);
	free(got);
	free(want);
	ck_assert_int_eq(heads_check(p, &hr), CS_OK);
	ck_assert_int_eq(hr.ok, 1);
	ck_assert_int_eq(hr.heads, 5);
	audit_publish_close(st);

	/* The tail cut off and the numbers rewound: the chain still verifies on its
	 * own, the history names head 4. */
	rawsql("CREATE TABLE saved AS SELECT * FROM audit");
	cut_tail(3);
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 1);
	ck_assert_int_eq(r.head.seq, 3);
	ck_assert_int_eq(heads_check(p, &hr), CS_OK);
	ck_assert_int_eq(hr.ok, 0);
	ck_assert_int_eq(hr.missing, 1);
	ck_assert_int_eq(hr.bad.seq, 4);
	ck_assert_int_eq(hr.line, 4);
	ck_assert_ptr_nonnull(strstr(hr.why, "line 4; the log ends at entry 3"));

	/* Entries written again over the cut numbers: contiguous and correctly
	 * chained (consentd wrote them), but head 4 has another link now. */
	append_n(3);
	r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 1);
	ck_assert_int_eq(r.head.seq, 6);
	ck_assert_int_eq(heads_check(p, &hr), CS_OK);
	ck_assert_int_eq(hr.ok, 0);
	ck_assert_int_eq(hr.missing, 0);
	ck_assert_int_eq(hr.bad.seq, 4);
	ck_assert_ptr_nonnull(strstr(hr.why, "another link"));

	/* Log lines grepped into a file count the same. */
	rawsql("DELETE FROM audit; INSERT INTO audit SELECT * FROM saved; "
	    "UPDATE sqlite_sequence SET seq = 6 WHERE name = 'audit'");
	char text[4096], hex[AUDIT_LINK_HEX + 1];
	size_t o = 0;
	for (int64_t i = 1; i <= 5; i++) {
		db_link(i, hex);
		ck_assert_int_eq(str_fmt(text + o, sizeof text - o, i % 2 ?
		    "Jan 31 host consentd[7]: consentd: audit head %lld:%s\n" :
		    "audit head seq=%lld link=%s\n", (long long)i, hex), CS_OK);
		o += strlen(text + o);
	}
	ck_assert_int_eq(heads_check_text(text, o, &hr), CS_OK);
	ck_assert_int_eq(hr.ok, 1);
	ck_assert_int_eq(hr.heads, 5);
	free(p);
}
END_TEST

START_TEST(test_audit_heads_history_rotated)
{
	struct audit_heads_result hr;
	struct rekey_report rep;
	char text[4096], hex[AUDIT_LINK_HEX + 1];
	size_t o = 0;
	append_n(3);
	for (int64_t i = 1; i <= 3; i++) {
		db_link(i, hex);
		ck_assert_int_eq(str_fmt(text + o, sizeof text - o, "%lld:%s\n", (long long)i, hex), CS_OK);
		o += strlen(text + o);
	}
	ck_assert_int_eq(vault_rekey(sc, &mk, &mk2, T0 + 10, &rep), CS_OK);
	struct audit_head h;
	ck_assert_int_eq(audit_head(sc, &h), CS_OK);
	char *p = write_file("heads", text, o);
	ck_assert_int_eq(audit_head_file_rotated(p, mk.kid, mk2.kid, &h), CS_OK);
	/* Heads before the mark were re-linked: present is enough; the one after it
	 * must match under the new key. */
	struct audit_verify_result r = verify_with(&mk2, NULL);
	ck_assert_int_eq(r.ok, 1);
	FILE *f = fopen(p, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(audit_heads_check(sc, f, &r.head, &hr), CS_OK);
	fclose(f);
	ck_assert_int_eq(hr.ok, 1);
	ck_assert_int_eq(hr.heads, 4);
	/* Without the mark the old heads do not match. */
	ck_assert_int_eq(heads_check_text(text, o, &hr), CS_OK);
	ck_assert_int_eq(hr.ok, 0);
	ck_assert_int_eq(hr.bad.seq, 1);
	ck_assert_int_eq(hr.missing, 0);
	/* A head missing before the mark is still missing. */
	rawsql("DELETE FROM audit WHERE seq = 3");
	f = fopen(p, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(audit_heads_check(sc, f, &r.head, &hr), CS_OK);
	fclose(f);
	ck_assert_int_eq(hr.ok, 0);
	ck_assert_int_eq(hr.missing, 1);
	ck_assert_int_eq(hr.bad.seq, 3);
	free(p);
}
END_TEST

/* One transaction appending k entries. */
static void append_tx(int k)
{
	ck_assert_int_eq(store_begin(sc), CS_OK);
	for (int i = 0; i < k; i++) {
		const struct audit_entry e = { .ts = T0, .action = "consent.granted", .outcome = "ok" };
		ck_assert_int_eq(audit_append(sc, &e), CS_OK);
	}
	ck_assert_int_eq(store_commit(sc), CS_OK);
}

START_TEST(test_audit_publish_per_commit)
{
	char *p = publish_open(1);
	struct audit_head h;
	append_n(3);
	/* Each commit's head, on the file and the log, once store_commit returned. */
	char *want = db_lines(1, 3), *got = slurp(p);
	ck_assert_str_eq(got, want);
	free(got);
	free(want);
	struct stat sb;
	ck_assert_int_eq(stat(p, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 0777, 0600);
	char *log = publish_log();
	db_link(3, h.hex);
	char line[200];
	ck_assert_int_eq(str_fmt(line, sizeof line, "consentd: audit head 3:%s\n", h.hex), CS_OK);
	ck_assert_ptr_nonnull(strstr(log, line));
	free(log);
	/* A transaction of two entries publishes its last; a rolled-back one nothing. */
	append_tx(2);
	ck_assert_int_eq(store_begin(sc), CS_OK);
	const struct audit_entry e = { .ts = T0, .action = "consent.granted" };
	ck_assert_int_eq(audit_append(sc, &e), CS_OK);
	store_rollback(sc);
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(store_commit(sc), CS_OK);       /* no audit entry: nothing */
	got = slurp(p);
	want = db_lines(1, 3);
	char *five = db_lines(5, 5);
	ck_assert_int_eq(strncmp(got, want, strlen(want)), 0);
	ck_assert_str_eq(got + strlen(want), five);
	free(got);
	free(want);
	free(five);
	audit_head_published(&h);
	ck_assert_int_eq(h.seq, 5);
	ck_assert_int_eq(audit_head_behind(), 0);
	/* The periodic check finds nothing wrong, and its metrics say so. */
	int behind = -1;
	ck_assert_int_eq(audit_publish_check(sc, 0, &behind), CS_OK);
	ck_assert_int_eq(behind, 0);
	struct buf b;
	buf_init(&b, 4096);
	ck_assert_int_eq(audit_head_metrics(&b), CS_OK);
	ck_assert_int_eq(buf_puts(&b, ""), CS_OK);
	ck_assert_ptr_nonnull(strstr(b.data, "\nconsentd_audit_head_behind 0\n"));
	ck_assert_ptr_nonnull(strstr(b.data, "\nconsentd_audit_head_seq 5\n"));
	buf_clear(&b);
	/* An append outside any transaction (a bug audit.h forbids) is published at once. */
	ck_assert_int_eq(audit_append(sc, &e), CS_OK);
	got = slurp(p);
	want = db_lines(6, 6);
	ck_assert_str_eq(got + strlen(got) - strlen(want), want);
	free(got);
	free(want);
	free(p);
}
END_TEST

#define PUB_THREADS 4
#define PUB_PER_THREAD 15

static void *pub_worker(void *arg)
{
	(void)arg;
	struct store_conn *c = store_conn(st);
	ck_assert_ptr_nonnull(c);
	for (int i = 0; i < PUB_PER_THREAD; i++) {
		const struct audit_entry e = { .ts = T0, .action = "consent.granted", .outcome = "ok" };
		ck_assert_int_eq(store_begin(c), CS_OK);
		ck_assert_int_eq(audit_append(c, &e), CS_OK);
		ck_assert_int_eq(store_commit(c), CS_OK);
	}
	return NULL;
}

START_TEST(test_audit_publish_threads_in_order)
{
	char *p = publish_open(1);
	pthread_t t[PUB_THREADS];
	for (int i = 0; i < PUB_THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, pub_worker, NULL), 0);
	for (int i = 0; i < PUB_THREADS; i++)
		pthread_join(t[i], NULL);
	/* One line per group commit (a batch publishes its last entry), in
	 * strictly growing number order, each the database's own, the last one
	 * the last entry: no head skipped past, none repeated, none reordered. */
	char *got = slurp(p), *line = got;
	int64_t prev = 0;
	int lines = 0;
	while (*line != '\0') {
		char *nl = strchr(line, '\n'), *colon = strchr(line, ':');
		ck_assert_ptr_nonnull(nl);
		ck_assert_ptr_nonnull(colon);
		int64_t seq = strtoll(line, NULL, 10);
		ck_assert_int_gt(seq, prev);
		char *want = db_lines(seq, seq);
		ck_assert_int_eq(strncmp(line, want, strlen(want)), 0);
		free(want);
		prev = seq;
		lines++;
		line = nl + 1;
	}
	ck_assert_int_eq(prev, PUB_THREADS * PUB_PER_THREAD);
	ck_assert_int_ge(lines, 1);
	free(got);
	ck_assert_int_eq(audit_head_behind(), 0);
	free(p);
}
END_TEST

START_TEST(test_audit_publish_behind_at_check)
{
	char *p = publish_open(1);
	int behind = -1;
	append_n(5);
	cut_tail(3);
	ck_assert_int_eq(audit_head_behind(), 0);
	ck_assert_int_eq(audit_publish_check(sc, 0, &behind), CS_OK);
	ck_assert_int_eq(behind, 1);
	ck_assert_int_eq(audit_head_behind(), 1);
	char *log = publish_log();
	ck_assert_ptr_nonnull(strstr(log, "audit head behind: database head 3 < published 5"));
	free(log);
	struct buf b;
	buf_init(&b, 4096);
	ck_assert_int_eq(audit_head_metrics(&b), CS_OK);
	ck_assert_int_eq(buf_puts(&b, ""), CS_OK);
	ck_assert_ptr_nonnull(strstr(b.data, "\nconsentd_audit_head_behind 1\n"));
	ck_assert_ptr_nonnull(strstr(b.data, "\nconsentd_audit_head_seq 5\n"));
	buf_clear(&b);
	/* Behind is for good: new commits are logged but no longer extend head_file,
	 * whose last line stays the last good head. */
	append_n(4);
	ck_assert_int_eq(audit_publish_check(sc, 0, &behind), CS_OK);
	ck_assert_int_eq(behind, 1);
	audit_publish_close(st);
	ck_assert_int_eq(audit_head_behind(), 0);
	char *got = slurp(p);
	ck_assert_int_eq(strlen(got), 5 * (2 + AUDIT_LINK_HEX + 1));
	free(got);

	/* A restart reads head 5 from head_file: the database (head 7, another
	 * entry 5) is behind it from the start. */
	p = (free(p), publish_open(1));
	ck_assert_int_eq(audit_publish_check(sc, 1, &behind), CS_OK);
	ck_assert_int_eq(behind, 1);
	log = publish_log();
	ck_assert_ptr_nonnull(strstr(log, "entry 5 has another link than the published head"));
	free(log);
	audit_publish_close(st);
	/* The same file over a database cut to 3: behind, head 3 < 5. */
	cut_tail(3);
	p = (free(p), publish_open(1));
	ck_assert_int_eq(audit_publish_check(sc, 1, &behind), CS_OK);
	ck_assert_int_eq(behind, 1);
	free(p);
}
END_TEST

/* A published head a prune removed is no alarm; one "removed" under an
 * anchor whose MAC does not verify (written, or moved, without the chain key)
 * is: the database is behind what was published. */
START_TEST(test_audit_publish_forged_anchor_excuses_nothing)
{
	int behind = -1;
	int64_t removed = 0;
	char *p = publish_open(1);
	append_n(5);                      /* published through 5 */
	audit_publish_close(st);
	append_n(3);                      /* 6 .. 8, not published */
	ck_assert_int_eq(audit_prune(sc, T0 + 100, 0, 100, T0 + 200, &removed), CS_OK);
	ck_assert_int_eq(removed, 7);     /* all but the newest */
	p = (free(p), publish_open(1));
	ck_assert_int_eq(audit_publish_check(sc, 0, &behind), CS_OK);
	ck_assert_int_eq(behind, 0);
	audit_publish_close(st);
	/* The anchor's MAC replaced: no longer the chain key's. */
	rawsql("UPDATE audit_anchor SET mac = link");
	p = (free(p), publish_open(1));
	ck_assert_int_eq(audit_publish_check(sc, 0, &behind), CS_OK);
	ck_assert_int_eq(behind, 1);
	char *log = publish_log();
	ck_assert_ptr_nonnull(strstr(log, "published head 5 is missing from the database"));
	free(log);
	free(p);
}
END_TEST

START_TEST(test_audit_publish_behind_at_commit)
{
	char *p = publish_open(1);
	append_n(5);
	/* Rewound while running: the next commit gets a number already published. */
	cut_tail(3);
	append_n(1);
	ck_assert_int_eq(audit_head_behind(), 1);
	char *log = publish_log();
	ck_assert_ptr_nonnull(strstr(log, "audit head behind: database head 4 < published 5"));
	free(log);
	char *got = slurp(p);
	ck_assert_int_eq(strlen(got), 5 * (2 + AUDIT_LINK_HEX + 1));
	free(got);
	free(p);
}
END_TEST

START_TEST(test_audit_publish_start_catches_up)
{
	int behind = -1;
	struct audit_head h;
	/* Entries written without a publisher (another command, no head_file)... */
	append_n(2);
	char *p = publish_open(1);
	/* ...are published at start (publish = 1), then commits go on from there. */
	ck_assert_int_eq(audit_publish_check(sc, 1, &behind), CS_OK);
	ck_assert_int_eq(behind, 0);
	append_n(1);
	char *got = slurp(p), *want2 = db_lines(2, 3);
	ck_assert_str_eq(got, want2);
	free(got);
	free(want2);
	audit_publish_close(st);
	/* A torn last line (a crash mid-write) is skipped, the next head starts on a
	 * fresh line; the head before it still counts. */
	FILE *f = fopen(p, "a");
	ck_assert_ptr_nonnull(f);
	fputs("4:0123", f);
	fclose(f);
	free(publish_open(1));
	audit_head_published(&h);
	ck_assert_int_eq(h.seq, 3);
	ck_assert_int_eq(audit_publish_check(sc, 1, &behind), CS_OK);
	ck_assert_int_eq(behind, 0);
	append_n(1);
	got = slurp(p);
	want2 = db_lines(4, 4);
	ck_assert_ptr_nonnull(strstr(got, "\n4:0123\n"));
	ck_assert_str_eq(got + strlen(got) - strlen(want2), want2);
	free(got);
	free(want2);
	audit_publish_close(st);
	/* A file with something in it but no head cannot vouch for the database. */
	char *g = write_file("garbage", "not a head\n", 11);
	ck_assert_int_eq(audit_publish_open(st, g, publog), CS_OK);
	ck_assert_int_eq(audit_head_behind(), 1);
	audit_publish_close(st);
	/* A head file that cannot be opened is an error. */
	char *d = tu_path(dir, "no/such/dir/heads");
	ck_assert_int_eq(audit_publish_open(st, d, publog), CS_EIO);
	free(d);
	free(g);
	free(p);
}
END_TEST

START_TEST(test_audit_publish_log_only)
{
	int behind = -1;
	free(publish_open(0));
	append_n(2);
	char *log = publish_log();
	char hex[AUDIT_LINK_HEX + 1], line[200];
	db_link(2, hex);
	ck_assert_int_eq(str_fmt(line, sizeof line, "consentd: audit head 2:%s\n", hex), CS_OK);
	ck_assert_ptr_nonnull(strstr(log, line));
	free(log);
	/* Without head_file the process still holds the database to what it logged. */
	cut_tail(1);
	ck_assert_int_eq(audit_publish_check(sc, 0, &behind), CS_OK);
	ck_assert_int_eq(behind, 1);
}
END_TEST

/* --- one chain per writer (migration 0028; issue #34 goal 4) -------------- */

static struct store *st2;             /* a second writer ("node") on the same file */
static struct store_conn *sc2;

static void open_second_writer(void)
{
	char *db = tu_path(dir, "t.db");
	ck_assert_int_eq(store_open(db, &st2), CS_OK);
	free(db);
	sc2 = store_conn(st2);
	ck_assert_ptr_nonnull(sc2);
	/* What every PostgreSQL node does: each appends to a chain of its own. */
	store_own_chains(st, true);
	store_own_chains(st2, true);
}

static void close_second_writer(void)
{
	store_close(st2);
	st2 = NULL;
	sc2 = NULL;
}

/* Appends one entry through c (ts T0 + i); the newest seq after it. */
static int64_t append_via(struct store_conn *c, int i)
{
	char sub[16];
	ck_assert_int_eq(str_fmt(sub, sizeof sub, "user%d", i), CS_OK);
	const struct audit_entry e = { .ts = T0 + i, .actor = "system", .action = "grant.issued",
	    .subject = sub, .outcome = "ok" };
	ck_assert_int_eq(store_begin(c), CS_OK);
	ck_assert_int_eq(audit_append(c, &e), CS_OK);
	ck_assert_int_eq(store_commit(c), CS_OK);
	return rawint("SELECT max(seq) FROM audit");
}

/* A writes 3, B 2, A 2, B 1: every chain's first entry is its
 * audit.chain.opened; B's names A's newest entry then (*a3). */
static void two_chains(int64_t *a3)
{
	open_second_writer();
	for (int i = 0; i < 3; i++)
		*a3 = append_via(sc, i);
	append_via(sc2, 3);
	append_via(sc2, 4);
	append_via(sc, 5);
	append_via(sc, 6);
	append_via(sc2, 7);
}

START_TEST(test_audit_chains_two_writers_verify)
{
	int64_t a3 = 0;
	char q[200];
	two_chains(&a3);
	ck_assert_int_eq(rawint("SELECT count(DISTINCT chain) FROM audit WHERE chain > 0"), 2);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit WHERE chain = 0"), 0);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit_chains WHERE chain > 0"), 2);
	/* Each chain opens with its audit.chain.opened entry... */
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit AS a WHERE action = 'audit.chain.opened' "
	    "AND seq = (SELECT min(seq) FROM audit AS b WHERE b.chain = a.chain)"), 2);
	/* ...the first names nobody, the second A's newest entry then. */
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit WHERE action = 'audit.chain.opened' "
	    "AND detail = 'heads=none'"), 1);
	ck_assert_int_eq(str_fmt(q, sizeof q, "SELECT count(*) FROM audit WHERE action = "
	    "'audit.chain.opened' AND detail LIKE 'heads=%%:%" PRId64 ":%%'", a3), CS_OK);
	ck_assert_int_eq(rawint(q), 1);
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_msg(r.ok == 1, "verify: %s at %" PRId64, r.why, r.broken);
	ck_assert_int_eq(r.entries, 10);
	ck_assert_int_eq(r.chains, 2);
	ck_assert_int_eq(r.crossrefs, 1);
	close_second_writer();
}
END_TEST

START_TEST(test_audit_chains_entry_moved_to_other_chain)
{
	int64_t a3 = 0;
	char q[200];
	two_chains(&a3);
	/* An attacker with the database moves one of A's entries into B's chain
	 * (content and link unchanged): it does not follow B's entry before it. */
	ck_assert_int_eq(str_fmt(q, sizeof q, "UPDATE audit SET chain = (SELECT max(chain) FROM "
	    "audit) WHERE seq = %" PRId64, a3), CS_OK);
	rawsql(q);
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, a3);
	close_second_writer();
}
END_TEST

/* A whole chain relabelled as another (every entry of B moved to a chain
 * nobody has): each still follows the one before it, so only the chain's
 * part in every link finds it, at B's first entry. */
START_TEST(test_audit_chains_chain_relabelled)
{
	int64_t a3 = 0;
	two_chains(&a3);
	int64_t b_first = rawint("SELECT min(seq) FROM audit WHERE chain = (SELECT max(chain) FROM "
	    "audit)");
	rawsql("UPDATE audit SET chain = 99 WHERE chain = (SELECT max(chain) FROM audit)");
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, b_first);
	close_second_writer();
}
END_TEST

START_TEST(test_audit_chains_delete_middle_of_one)
{
	int64_t a3 = 0;
	char q[300];
	two_chains(&a3);
	/* A's entry before a3 goes: a3 no longer follows the one before it in A. */
	ck_assert_int_eq(str_fmt(q, sizeof q, "DELETE FROM audit WHERE seq = (SELECT max(seq) FROM "
	    "audit WHERE seq < %" PRId64 " AND chain = (SELECT chain FROM audit WHERE seq = %" PRId64
	    "))", a3, a3), CS_OK);
	rawsql(q);
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, a3);
	ck_assert_msg(strstr(r.why, "before it is missing") != NULL, "why: %s", r.why);
	close_second_writer();
}
END_TEST

/* The cut-the-tail test, per chain: cutting A's tail is found by the head A
 * published, and -- below what B's first entry names -- by B's
 * cross-reference even without it; a cut above both is seen by neither
 * verify alone (the window docs/reference.md states). */
START_TEST(test_audit_chains_cut_tail)
{
	int64_t a3 = 0;
	char q[300];
	struct audit_head a_head;
	two_chains(&a3);
	int64_t chain_a = rawint("SELECT chain FROM audit WHERE seq = 1");
	ck_assert_int_eq(str_fmt(q, sizeof q, "SELECT max(seq) FROM audit WHERE chain = %" PRId64,
	    chain_a), CS_OK);
	int64_t a_last = rawint(q);
	/* A's newest entry as A published it ("N:LINK"). */
	ck_assert_int_eq(str_fmt(q, sizeof q, "SELECT seq || ':' || lower(hex(link)) FROM audit "
	    "WHERE seq = %" PRId64, a_last), CS_OK);
	{
		sqlite3_stmt *x = NULL;
		ck_assert_int_eq(sqlite3_prepare_v2(raw, q, -1, &x, NULL), SQLITE_OK);
		ck_assert_int_eq(sqlite3_step(x), SQLITE_ROW);
		ck_assert_int_eq(audit_head_parse((const char *)sqlite3_column_text(x, 0), &a_head),
		    CS_OK);
		sqlite3_finalize(x);
	}
	/* 1. Cut A's last entry only (above what B names): verify alone cannot
	 * see it; the head A published can. */
	ck_assert_int_eq(str_fmt(q, sizeof q, "DELETE FROM audit WHERE seq = %" PRId64, a_last),
	    CS_OK);
	rawsql(q);
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 1);
	r = verify_with(&mk, &a_head);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.head_missing, 1);
	ck_assert_int_eq(r.broken, a_last);
	/* 2. Cut A's tail down below the entry B's first entry names: B's
	 * cross-reference finds it with no published head at all. */
	ck_assert_int_eq(str_fmt(q, sizeof q, "DELETE FROM audit WHERE chain = %" PRId64
	    " AND seq >= %" PRId64, chain_a, a3), CS_OK);
	rawsql(q);
	r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_msg(strstr(r.why, "which is missing") != NULL, "why: %s", r.why);
	ck_assert_int_eq(r.broken, rawint("SELECT seq FROM audit WHERE action = "
	    "'audit.chain.opened' AND detail <> 'heads=none'"));
	close_second_writer();
}
END_TEST

/* How many cross-references name entry seq of a chain, with more (SQL
 * appended to the WHERE clause, "" for none). */
static int64_t crossrefs_naming(int64_t seq, const char *more)
{
	char q[400];
	ck_assert_int_eq(str_fmt(q, sizeof q, "SELECT count(*) FROM audit WHERE action = "
	    "'audit.chain.crossref' AND detail LIKE 'heads=%%:%" PRId64 ":%%'%s", seq, more), CS_OK);
	return rawint(q);
}

/* The periodic cross-reference ([audit] crossref_interval): A's chain
 * vouches for B's newest entry, only when B moved on; one writer never. */
START_TEST(test_audit_chains_crossref_when_others_moved)
{
	int64_t a3 = 0;
	bool wrote = true;
	char q[300];
	/* One writer (chain 0): nothing to vouch for. */
	append_via(sc, 0);
	ck_assert_int_eq(audit_crossref(sc, T0 + 50, &wrote), CS_OK);
	ck_assert(!wrote);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit WHERE action = 'audit.chain.crossref'"), 0);
	rawsql("DELETE FROM audit");
	rawsql("DELETE FROM sqlite_sequence");
	two_chains(&a3);
	int64_t chain_a = rawint("SELECT chain FROM audit WHERE seq = (SELECT min(seq) FROM audit)");
	ck_assert_int_eq(str_fmt(q, sizeof q, "SELECT max(seq) FROM audit WHERE chain <> %" PRId64,
	    chain_a), CS_OK);
	int64_t b_last = rawint(q);
	ck_assert_int_eq(audit_crossref(sc, T0 + 50, &wrote), CS_OK);
	ck_assert(wrote);
	/* In A's chain, naming A as its resource and B's newest entry. */
	ck_assert_int_eq(str_fmt(q, sizeof q, "SELECT count(*) FROM audit WHERE action = "
	    "'audit.chain.crossref' AND chain = %" PRId64 " AND resource = '%" PRId64 "' AND "
	    "actor = 'system' AND detail LIKE 'heads=%%:%" PRId64 ":%%' AND detail NOT LIKE "
	    "'%%,%%'", chain_a, chain_a, b_last), CS_OK);
	ck_assert_int_eq(rawint(q), 1);
	/* Nothing moved: nothing written, even after A's own entries. */
	append_via(sc, 51);
	ck_assert_int_eq(audit_crossref(sc, T0 + 52, &wrote), CS_OK);
	ck_assert(!wrote);
	/* B moves on: written again, naming B's new newest entry. */
	int64_t b_next = append_via(sc2, 53);
	ck_assert_int_eq(audit_crossref(sc, T0 + 54, &wrote), CS_OK);
	ck_assert(wrote);
	ck_assert_int_eq(crossrefs_naming(b_next, ""), 1);
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_msg(r.ok == 1, "verify: %s at %" PRId64, r.why, r.broken);
	ck_assert_int_eq(r.chains, 2);
	ck_assert_int_eq(r.crossrefs, 3);  /* B's opening entry, A's two cross-references */
	ck_assert_int_eq(r.crossref_lookups, 2);   /* A's newest named, B's newest named */
	close_second_writer();
}
END_TEST

/* The chains named are those that appended last, not the last claimed: on
 * PostgreSQL every `consentd` command that writes claims a chain and never
 * moves it again.  Seventeen such one-shot chains after B: B moving on is
 * still named (with them, not vouched for yet), and then only B. */
START_TEST(test_audit_chains_crossref_names_the_chains_that_move)
{
	int64_t a3 = 0;
	bool wrote = false;
	two_chains(&a3);
	ck_assert_int_eq(audit_crossref(sc, T0 + 50, &wrote), CS_OK);
	ck_assert(wrote);
	char *db = tu_path(dir, "t.db");
	for (int i = 0; i < 17; i++) {
		struct store *once = NULL;
		ck_assert_int_eq(store_open(db, &once), CS_OK);
		store_own_chains(once, true);
		append_via(store_conn(once), 60 + i);
		store_close(once);
	}
	free(db);
	ck_assert_int_eq(rawint("SELECT count(DISTINCT chain) FROM audit"), 19);
	/* B moves on: named, with the new chains not vouched for yet. */
	int64_t b_next = append_via(sc2, 80);
	ck_assert_int_eq(audit_crossref(sc, T0 + 81, &wrote), CS_OK);
	ck_assert(wrote);
	ck_assert_int_eq(crossrefs_naming(b_next, " AND detail LIKE '%,%'"), 1);
	/* B again: only B, though seventeen chains were claimed after it. */
	b_next = append_via(sc2, 82);
	ck_assert_int_eq(audit_crossref(sc, T0 + 83, &wrote), CS_OK);
	ck_assert(wrote);
	ck_assert_int_eq(crossrefs_naming(b_next, " AND detail NOT LIKE '%,%'"), 1);
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_msg(r.ok == 1, "verify: %s at %" PRId64, r.why, r.broken);
	ck_assert_int_eq(r.chains, 19);
	close_second_writer();
}
END_TEST

/* The cut-the-tail test against a periodic cross-reference: B's tail cut
 * below what A's latest cross-reference names is found by verify alone,
 * with no head published -- where B's only other voucher, A's opening
 * entry, predates B. */
START_TEST(test_audit_chains_crossref_finds_cut_tail)
{
	int64_t a3 = 0;
	bool wrote = false;
	char q[300];
	two_chains(&a3);
	int64_t chain_a = rawint("SELECT chain FROM audit WHERE seq = (SELECT min(seq) FROM audit)");
	ck_assert_int_eq(str_fmt(q, sizeof q, "SELECT max(chain) FROM audit WHERE chain <> %" PRId64,
	    chain_a), CS_OK);
	int64_t chain_b = rawint(q);
	ck_assert_int_eq(audit_crossref(sc, T0 + 50, &wrote), CS_OK);
	ck_assert(wrote);
	int64_t xref_seq = rawint("SELECT seq FROM audit WHERE action = 'audit.chain.crossref'");
	/* Without the cross-reference nothing names B's entries: cutting B's
	 * last one is invisible to verify alone (the case above).  With it: */
	ck_assert_int_eq(str_fmt(q, sizeof q, "DELETE FROM audit WHERE seq = (SELECT max(seq) FROM "
	    "audit WHERE chain = %" PRId64 ")", chain_b), CS_OK);
	rawsql(q);
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_int_eq(r.ok, 0);
	ck_assert_int_eq(r.broken, xref_seq);
	ck_assert_msg(strstr(r.why, "which is missing") != NULL, "why: %s", r.why);
	ck_assert_int_eq(r.head_missing, 1);
	close_second_writer();
}
END_TEST

START_TEST(test_audit_chains_prune_and_go_on)
{
	int64_t a3 = 0, removed = 0;
	two_chains(&a3);
	/* Everything before T0 + 100 goes but the newest entry: both chains are
	 * anchored, each at its own last entry removed. */
	ck_assert_int_eq(audit_prune(sc, T0 + 100, 0, 100, T0 + 200, &removed), CS_OK);
	ck_assert_int_eq(removed, 9);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit"), 1);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit_anchor"), 2);
	struct audit_verify_result r = verify_with(&mk, NULL);
	ck_assert_msg(r.ok == 1, "verify: %s at %" PRId64, r.why, r.broken);
	/* Both writers go on, A's from its anchor. */
	append_via(sc, 8);
	append_via(sc2, 9);
	append_via(sc, 10);
	r = verify_with(&mk, NULL);
	ck_assert_msg(r.ok == 1, "verify: %s at %" PRId64, r.why, r.broken);
	ck_assert_int_eq(r.entries, 4);
	/* An anchor moved to another chain does not verify. */
	rawsql("UPDATE audit_anchor SET chain = chain + 100 WHERE chain = (SELECT min(chain) FROM "
	    "audit_anchor)");
	ck_assert_int_eq(verify_with(&mk, NULL).ok, 0);
	close_second_writer();
}
END_TEST

START_TEST(test_audit_chains_rekey)
{
	int64_t a3 = 0;
	struct rekey_report rep;
	two_chains(&a3);
	ck_assert_int_eq(vault_rekey(sc, &mk, &mk2, T0 + 10, &rep), CS_OK);
	struct audit_verify_result r = verify_with(&mk2, NULL);
	ck_assert_msg(r.ok == 1, "verify: %s at %" PRId64, r.why, r.broken);
	ck_assert_int_eq(r.chains, 2);
	ck_assert_int_eq(verify_with(&mk, NULL).ok, 0);
	close_second_writer();
}
END_TEST

/* --- the head SQLite's writer remembers (store_sqlite.c, "the audit
 * chain's head") ----------------------------------------------------------- */

/* Heads read with SQL, and batches begun after another connection had
 * committed, since the store opened. */
static uint64_t head_reads(struct store *s)
{
	struct store_writer_stats ws;
	store_writer_stats(s, &ws);
	return ws.audit_head_reads;
}

static uint64_t foreign_commits(struct store *s)
{
	struct store_writer_stats ws;
	store_writer_stats(s, &ws);
	return ws.foreign_commits;
}

/* The log verifies under k and holds n entries. */
static void verifies(const struct master_key *k, int64_t n)
{
	struct audit_verify_result r = verify_with(k, NULL);
	ck_assert_msg(r.ok == 1, "verify: %s at %" PRId64, r.why, r.broken);
	ck_assert_int_eq(r.entries, n);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit"), n);
}

/* One entry in a transaction of its own through c; the caller commits. */
static void append_open(struct store_conn *c)
{
	const struct audit_entry e = { .ts = T0, .actor = "system", .action = "grant.issued",
	    .outcome = "ok" };
	ck_assert_int_eq(store_begin(c), CS_OK);
	ck_assert_int_eq(audit_append(c, &e), CS_OK);
}

/* After the first, no transaction reads the head: the writer's last one left
 * it, alone or in a batch of many threads'. */
START_TEST(test_audit_writer_head_remembered)
{
	pthread_t t[PUB_THREADS];
	const int64_t n = 1 + 10 + 3 + PUB_THREADS * PUB_PER_THREAD;
	append_n(1);
	uint64_t r0 = head_reads(st);
	ck_assert_uint_ge(r0, 1);
	append_n(10);
	append_tx(3);
	ck_assert_msg(head_reads(st) == r0, "the head was read %" PRIu64 " times more",
	    head_reads(st) - r0);
	for (int i = 0; i < PUB_THREADS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, pub_worker, NULL), 0);
	for (int i = 0; i < PUB_THREADS; i++)
		pthread_join(t[i], NULL);
	ck_assert_msg(head_reads(st) == r0, "the head was read %" PRIu64 " times more",
	    head_reads(st) - r0);
	verifies(&mk, n);
	ck_assert_int_eq(rawint("SELECT max(seq) FROM audit"), n);
	ck_assert_uint_eq(foreign_commits(st), 0);
}
END_TEST

/* A caller of a lingering batch (the batch's first transaction). */
struct lingerer {
	sem_t       began;
	enum cs_err e;
};

static void *linger_append(void *arg)
{
	struct lingerer *x = arg;
	struct store_conn *c = store_conn(st);
	ck_assert_ptr_nonnull(c);
	append_open(c);
	sem_post(&x->began);
	x->e = store_commit(c);
	return NULL;
}

/* Waits until the writer has counted n lingering batches in all. */
static void wait_lingers(uint64_t n)
{
	struct store_writer_stats ws;
	for (int i = 0; i < 10000; i++) {
		store_writer_stats(st, &ws);
		if (ws.lingers >= n)
			return;
		usleep(1000);
	}
	ck_abort_msg("the batch did not linger");
}

/* A transaction rolled back between two appends takes its entry and its
 * number with it, and the head it had: the next entry follows the one
 * before it, alone and inside one batch (a savepoint rolled back while
 * another caller's released one waits for the COMMIT). */
START_TEST(test_audit_writer_head_rollback_between_appends)
{
	struct store_writer_stats w0, w1;
	struct lingerer x;
	pthread_t t;
	append_n(2);
	append_open(sc);
	store_rollback(sc);
	append_n(1);
	verifies(&mk, 3);
	ck_assert_int_eq(rawint("SELECT max(seq) FROM audit"), 3);
	/* In one batch: a's entry released, b's rolled back, c's after a's. */
	store_set_linger(st, 60u * 1000 * 1000);    /* committed by c, long before */
	store_requests(st, 2);                      /* a's and the main thread's */
	store_writer_stats(st, &w0);
	ck_assert_int_eq(sem_init(&x.began, 0, 0), 0);
	x.e = CS_EDB;
	ck_assert_int_eq(pthread_create(&t, NULL, linger_append, &x), 0);
	sem_wait(&x.began);
	wait_lingers(w0.lingers + 1);               /* a released: its batch waits */
	append_open(sc);                            /* b */
	store_rollback(sc);
	append_open(sc);                            /* c */
	ck_assert_int_eq(store_commit(sc), CS_OK);
	pthread_join(t, NULL);
	sem_destroy(&x.began);
	store_requests(st, -2);
	ck_assert_int_eq(x.e, CS_OK);
	store_writer_stats(st, &w1);
	verifies(&mk, 5);
	ck_assert_int_eq(rawint("SELECT max(seq) FROM audit"), 5);
	ck_assert_uint_eq(w1.batches - w0.batches, 1);
	ck_assert_uint_eq(w1.transactions - w0.transactions, 2);
	/* b's rollback made the writer forget the head (every doubt does): c
	 * read it once, from the table, and followed a's entry. */
	ck_assert_uint_eq(w1.audit_head_reads, w0.audit_head_reads + 1);
}
END_TEST

/* A batch whose COMMIT fails (a deferred foreign key, checked only then)
 * loses every entry of it: the next transaction reads the head again, and
 * follows the last entry committed. */
static const char SQL_ORPHAN[] = "INSERT INTO hk (p) VALUES (99)";

START_TEST(test_audit_writer_head_failed_batch)
{
	rawsql("CREATE TABLE hp (id INTEGER PRIMARY KEY); CREATE TABLE hk (p INTEGER REFERENCES "
	    "hp (id) DEFERRABLE INITIALLY DEFERRED)");
	append_n(2);
	uint64_t r0 = head_reads(st);
	append_open(sc);
	ck_assert_int_eq(store_run(sc, SQL_ORPHAN, NULL, 0), CS_OK);
	ck_assert_int_ne(store_commit(sc), CS_OK);
	store_rollback(sc);
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit"), 2);
	append_n(2);
	verifies(&mk, 4);
	ck_assert_int_eq(rawint("SELECT max(seq) FROM audit"), 4);
	ck_assert_uint_eq(head_reads(st) - r0, 1);  /* once, after the failed batch */
}
END_TEST

/* Another process on the file (`consentd audit ...`, `consentd admin ...`:
 * a store of its own, appending to chain 0 as every SQLite process does)
 * appends between two of the server's transactions: the server's writer
 * sees that another connection committed, and reads the head again. */
START_TEST(test_audit_writer_head_other_process)
{
	char *db = tu_path(dir, "t.db");
	append_n(2);
	ck_assert_int_eq(store_open(db, &st2), CS_OK);
	free(db);
	sc2 = store_conn(st2);
	ck_assert_ptr_nonnull(sc2);
	uint64_t r0 = head_reads(st), f0 = foreign_commits(st), r[3], f;
	append_via(sc2, 10);
	append_via(sc2, 11);
	append_n(1);
	r[0] = head_reads(st) - r0;
	f = foreign_commits(st) - f0;
	append_n(1);                                /* nobody else since: not read */
	r[1] = head_reads(st) - r0;
	append_via(sc2, 12);
	append_n(2);
	r[2] = head_reads(st) - r0;
	verifies(&mk, 9);
	ck_assert_int_eq(rawint("SELECT max(seq) FROM audit"), 9);
	ck_assert_int_eq(rawint("SELECT count(DISTINCT chain) FROM audit"), 1);
	ck_assert_uint_eq(f, 1);
	ck_assert_uint_eq(r[0], 1);
	ck_assert_uint_eq(r[1], 1);
	ck_assert_uint_eq(r[2], 2);
	close_second_writer();
}
END_TEST

/* A relink with no entry after it in its transaction (audit_relink alone;
 * store_audit_head_forget) and a prune: the next transaction follows the
 * head as they left it. */
START_TEST(test_audit_writer_head_relink_and_prune)
{
	int64_t removed = 0;
	append_n(5);
	ck_assert_int_eq(audit_prune(sc, T0 + 100, 0, 100, T0 + 200, &removed), CS_OK);
	ck_assert_int_eq(removed, 4);
	append_n(2);
	verifies(&mk, 3);
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(audit_relink(sc, &mk2), CS_OK);
	ck_assert_int_eq(store_commit(sc), CS_OK);
	ck_assert_int_eq(audit_set_master_key(&mk2), CS_OK);
	uint64_t r0 = head_reads(st);
	append_n(2);
	verifies(&mk2, 5);
	ck_assert_int_eq(verify_with(&mk, NULL).ok, 0);
	ck_assert_uint_eq(head_reads(st) - r0, 1);  /* once, after the relink */
	/* A relink rolled back changed nothing: the head is the one before it. */
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(audit_relink(sc, &mk), CS_OK);
	store_rollback(sc);
	append_n(1);
	verifies(&mk2, 6);
}
END_TEST

/* A process that goes over to a chain of its own (store_own_chains, as a
 * tool may) follows its new chain's start, not the head it kept of chain 0. */
START_TEST(test_audit_writer_head_chain_claimed)
{
	append_n(2);
	store_own_chains(st, true);
	uint64_t r0 = head_reads(st);
	append_n(2);
	verifies(&mk, 5);                           /* 2, audit.chain.opened, 2 */
	ck_assert_int_eq(rawint("SELECT count(*) FROM audit WHERE chain > 0"), 3);
	ck_assert_int_eq(rawint("SELECT prev_seq FROM audit WHERE action = "
	    "'audit.chain.opened'"), 0);
	ck_assert_uint_eq(head_reads(st) - r0, 1);  /* the new chain's, once */
}
END_TEST

static Suite *audit_suite(void)
{
	Suite *s = suite_create("audit");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_audit_chain_intact);
	tcase_add_test(tc, test_audit_append_without_key_refused);
	tcase_add_test(tc, test_audit_tamper_edit_content);
	tcase_add_test(tc, test_audit_tamper_null_versus_empty);
	tcase_add_test(tc, test_audit_tamper_delete_middle);
	tcase_add_test(tc, test_audit_tamper_delete_first);
	tcase_add_test(tc, test_audit_tamper_delete_last_with_head);
	tcase_add_test(tc, test_audit_tamper_reorder);
	tcase_add_test(tc, test_audit_tamper_link_under_wrong_key);
	tcase_add_test(tc, test_audit_tamper_null_link);
	tcase_add_test(tc, test_audit_export_since);
	tcase_add_test(tc, test_audit_rekey_round_trip);
	tcase_add_test(tc, test_audit_rekey_refuses_broken_chain);
	tcase_add_test(tc, test_audit_rekey_failure_rolls_back);
	tcase_add_test(tc, test_audit_head_line_forms);
	tcase_add_test(tc, test_audit_head_line_json_log);
	tcase_add_test(tc, test_audit_head_line_bad);
	tcase_add_test(tc, test_audit_heads_file_bad);
	tcase_add_test(tc, test_audit_heads_history);
	tcase_add_test(tc, test_audit_heads_history_rotated);
	tcase_add_test(tc, test_audit_publish_per_commit);
	tcase_add_test(tc, test_audit_publish_threads_in_order);
	tcase_add_test(tc, test_audit_publish_behind_at_check);
	tcase_add_test(tc, test_audit_publish_forged_anchor_excuses_nothing);
	tcase_add_test(tc, test_audit_publish_behind_at_commit);
	tcase_add_test(tc, test_audit_publish_start_catches_up);
	tcase_add_test(tc, test_audit_publish_log_only);
	tcase_add_test(tc, test_audit_chains_two_writers_verify);
	tcase_add_test(tc, test_audit_chains_entry_moved_to_other_chain);
	tcase_add_test(tc, test_audit_chains_chain_relabelled);
	tcase_add_test(tc, test_audit_chains_delete_middle_of_one);
	tcase_add_test(tc, test_audit_chains_cut_tail);
	tcase_add_test(tc, test_audit_chains_crossref_when_others_moved);
	tcase_add_test(tc, test_audit_chains_crossref_finds_cut_tail);
	tcase_add_test(tc, test_audit_chains_crossref_names_the_chains_that_move);
	tcase_add_test(tc, test_audit_chains_prune_and_go_on);
	tcase_add_test(tc, test_audit_chains_rekey);
	tcase_add_test(tc, test_audit_writer_head_remembered);
	tcase_add_test(tc, test_audit_writer_head_rollback_between_appends);
	tcase_add_test(tc, test_audit_writer_head_failed_batch);
	tcase_add_test(tc, test_audit_writer_head_other_process);
	tcase_add_test(tc, test_audit_writer_head_relink_and_prune);
	tcase_add_test(tc, test_audit_writer_head_chain_claimed);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(audit_suite());
}
