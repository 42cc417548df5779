/* test_audit.c -- the HMAC-chained audit log: appends, each kind of tampering
 * named at the right entry, a wrong key, a cut-off tail with --head, export,
 * and master-key rotation (vault_rekey) with its refusal and its rollback,
 * against a real SQLite file built from migrations/. */
#include <string.h>
#include <sqlite3.h>
#include <jansson.h>
#include "audit.h"
#include "audit_cli.h"
#include "jwt.h"
#include "seal.h"
#include "store.h"
#include "testutil.h"

#define T0 1000000
/* Two fixed master keys (Base64 of 32 bytes). */
#define MK1 "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
#define MK2 "HxweHRwbGhkYFxYVFBMSERAPDg0MCwoJCAcGBQQDAgE="

static char *dir;
static struct store *st;
static struct store_conn *sc;
static sqlite3 *raw;                  /* a second connection: the attacker's */
static struct master_key mk, mk2;

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
}

static void teardown(void)
{
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
		snprintf(sub, sizeof sub, "user%d", i);
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
	snprintf(buf, sizeof buf, "5:%s", h.hex);
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
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(audit_suite());
}
