/* test_vault.c -- the token vault (flow D): scope mapping, sealing, the
 * cascade, release with refresh and the revocation outbox, against the
 * fixture of tu_vault.h (the connect flow is test_vault_connect.c).  Attacker
 * cases first-class: swapped, truncated and altered ciphertexts, foreign
 * keys, providers that answer with more scopes or not at all. */
#include "tu_vault.h"
#include "store_vault.h"
#include "buf.h"
#include "metrics.h"

/* --- mapping ------------------------------------------------------------ */

START_TEST(test_vault_map_scopes)
{
	struct scope_set in = set("issues:write issues:read"), out = { .n = 0 };
	ck_assert_int_eq(vault_map_scopes(&cfg, "github", &in, &out), CS_OK);
	ck_set(&out, "issues:read issues:write repo");      /* union, sorted, unique */
	scope_set_clear(&out);
	scope_set_clear(&in);
	in = set("issues:read");
	ck_assert_int_eq(vault_map_scopes(&cfg, "github", &in, &out), CS_OK);
	ck_set(&out, "issues:read repo");
	scope_set_clear(&out);
	scope_set_clear(&in);
	/* A scope without provider scopes maps to nothing; an unknown one fails. */
	in = set("read");
	ck_assert_int_eq(vault_map_scopes(&cfg, "notes", &in, &out), CS_OK);
	ck_assert_uint_eq(out.n, 0);
	ck_assert_int_eq(vault_map_scopes(&cfg, "github", &in, &out), CS_EINVAL);
	scope_set_clear(&in);
	ck_assert_ptr_nonnull(vault_provider(v, "github"));
	ck_assert_ptr_nonnull(vault_provider(v, "gitlab"));
	ck_assert_ptr_null(vault_provider(v, "notes"));
	ck_assert_ptr_null(vault_provider(v, "nope"));
}
END_TEST


/* An approved release: the approval is used up in the transaction that
 * records the release.  The second redemption (a lost race) is refused with
 * VAULT_RELEASE_APPROVAL_USED, its refusal audited, and leaves no release entry behind. */
START_TEST(test_vault_release_approved_one_transaction)
{
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 3600);
	char *kid = connect_alice(NOW);
	struct consent k = load(kid, NOW);
	struct vault_release r;
	char sql[512];
	snprintf(sql, sizeof sql, "INSERT INTO approvals (id, consent_id, user_id, agent, resource, "
	    "action, parameters, digest, status, created_at, expires_at, decided_at, interval) "
	    "VALUES ('apprAAAAAAAAAAAAAAAAAA', '%s', %lld, 'coder', 'github', 'list_issues', '{}', "
	    "'RBNvo1WzZ4oRRq0W9-hknpT7T8If536DEMBg9hyq_4o', 'approved', %lld, %lld, %lld, 5)",
	    kid, (long long)uid("alice"), (long long)NOW, (long long)NOW + 600, (long long)NOW + 1);
	raw_exec(sql);
	memset(&r, 0, sizeof r);
	struct vault_release_req rq = { .k = &k, .action = "list_issues",
		.approval_id = "apprAAAAAAAAAAAAAAAAAA", .actor = ACT, .now = NOW + 2 };
	ck_assert_int_eq(vault_release_approved(v, sc, &cfg, &rq, &r), CS_OK);
	ck_assert_int_eq(r.outcome, VAULT_RELEASED);
	ck_assert_str_eq(r.access_token, "AT-secret-1");
	vault_release_clear(&r);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.released' AND "
	    "detail = 'action=list_issues; approval=apprAAAAAAAAAAAAAAAAAA' AND consent_id = ?1", kid), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'approval.released'", NULL), 1);
	/* A token released is a use of its consent (/me's "last used"), recorded
	 * in the release's transaction. */
	ck_assert_int_eq(q_int("SELECT last_used_at FROM consents WHERE id = ?1", kid), NOW + 2);
	char *status = q_text("SELECT status FROM approvals WHERE id = ?1", "apprAAAAAAAAAAAAAAAAAA");
	ck_assert_str_eq(status, "used");
	free(status);
	/* The loser of the race: no token, no release entry, the refusal recorded. */
	memset(&r, 0, sizeof r);
	rq.now = NOW + 3;
	ck_assert_int_eq(vault_release_approved(v, sc, &cfg, &rq, &r), CS_OK);
	ck_assert_int_eq(r.outcome, VAULT_RELEASE_APPROVAL_USED);
	ck_assert_ptr_null(r.access_token);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.released'", NULL), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'approval.refused'", NULL), 1);
	ck_assert_int_eq(q_int("SELECT last_used_at FROM consents WHERE id = ?1", kid), NOW + 2);
	/* A release failing before its transaction (the consent ended) uses nothing up. */
	raw_exec("UPDATE approvals SET status = 'approved', used_at = 0 WHERE id = 'apprAAAAAAAAAAAAAAAAAA'");
	k.reconnect_required = true;
	rq.now = NOW + 4;
	ck_assert_int_eq(vault_release_approved(v, sc, &cfg, &rq, &r), CS_OK);
	ck_assert_int_eq(r.outcome, VAULT_RELEASE_GONE);
	status = q_text("SELECT status FROM approvals WHERE id = ?1", "apprAAAAAAAAAAAAAAAAAA");
	ck_assert_str_eq(status, "approved");
	free(status);
	rq.approval_id = NULL;
	ck_assert_int_eq(vault_release_approved(v, sc, &cfg, &rq, &r), CS_EINVAL);
	consent_clear(&k);
	ck_no_plaintext();
	free(kid);
}
END_TEST

/* The caller's writes (rq->with, the proxy's forward entry) commit with the
 * release, right after its entry; when they fail, the release rolls back and
 * no token comes out. */
static int with_calls;
static enum cs_err with_entry(struct store_conn *c, void *ctx)
{
	with_calls++;
	return audit_append(c, &(struct audit_entry){ .ts = NOW, .actor = ACT,
	    .action = "proxy.forwarded", .consent_id = ctx, .outcome = "ok" });
}
static enum cs_err with_fail(struct store_conn *c, void *ctx)
{
	(void)c;
	(void)ctx;
	with_calls++;
	return CS_EIO;
}

/* consentd_approvals_total{outcome} of this process, as scraped (0 before
 * its first sample). */
static long approvals_counted(const char *outcome)
{
	struct buf b;
	char want[96];
	long n = 0;
	buf_init(&b, 1 << 18);
	ck_assert_int_eq(metrics_render(&b), CS_OK);
	ck_assert_int_eq(str_fmt(want, sizeof want, "consentd_approvals_total{outcome=\"%s\"} ",
	    outcome), CS_OK);
	const char *at = strstr(b.data, want);
	if (at != NULL)
		n = strtol(at + strlen(want), NULL, 10);
	buf_clear(&b);
	return n;
}

/* An approval's use is counted once its release committed: not for a release
 * whose caller's writes failed (rolled back, the approval unused), once for
 * the release, and the lost race once as not_redeemable. */
START_TEST(test_vault_release_approved_counted_when_committed)
{
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 3600);
	metrics_reset();
	ck_assert_int_eq(metrics_declare_consentd(), CS_OK);
	char *kid = connect_alice(NOW);
	struct consent k = load(kid, NOW);
	struct vault_release r;
	char sql[512];
	ck_assert_int_eq(str_fmt(sql, sizeof sql, "INSERT INTO approvals (id, consent_id, user_id, "
	    "agent, resource, action, parameters, digest, status, created_at, expires_at, decided_at, "
	    "interval) VALUES ('apprAAAAAAAAAAAAAAAAAA', '%s', %lld, 'coder', 'github', 'list_issues', "
	    "'{}', 'RBNvo1WzZ4oRRq0W9-hknpT7T8If536DEMBg9hyq_4o', 'approved', %lld, %lld, %lld, 5)",
	    kid, (long long)uid("alice"), (long long)NOW, (long long)NOW + 600, (long long)NOW + 1),
	    CS_OK);
	raw_exec(sql);
	memset(&r, 0, sizeof r);
	struct vault_release_req rq = { .k = &k, .action = "list_issues",
		.approval_id = "apprAAAAAAAAAAAAAAAAAA", .actor = ACT, .now = NOW + 2,
		.with = with_fail, .with_ctx = kid };
	ck_assert_int_eq(vault_release_approved(v, sc, &cfg, &rq, &r), CS_EIO);
	char *status = q_text("SELECT status FROM approvals WHERE id = ?1", "apprAAAAAAAAAAAAAAAAAA");
	ck_assert_str_eq(status, "approved");
	free(status);
	ck_assert_int_eq(approvals_counted("used"), 0);
	rq.with = with_entry;
	rq.now = NOW + 3;
	ck_assert_int_eq(vault_release_approved(v, sc, &cfg, &rq, &r), CS_OK);
	ck_assert_int_eq(r.outcome, VAULT_RELEASED);
	vault_release_clear(&r);
	ck_assert_int_eq(approvals_counted("used"), 1);
	rq.now = NOW + 4;
	ck_assert_int_eq(vault_release_approved(v, sc, &cfg, &rq, &r), CS_OK);
	ck_assert_int_eq(r.outcome, VAULT_RELEASE_APPROVAL_USED);
	ck_assert_int_eq(approvals_counted("used"), 1);
	ck_assert_int_eq(approvals_counted("not_redeemable"), 1);
	consent_clear(&k);
	metrics_reset();
	free(kid);
}
END_TEST

START_TEST(test_vault_release_with_callers_writes)
{
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 3600);
	char *kid = connect_alice(NOW);
	struct consent k = load(kid, NOW);
	struct vault_release r;
	memset(&r, 0, sizeof r);
	struct vault_release_req rq = { .k = &k, .action = "list_issues", .actor = ACT,
		.now = NOW + 2, .with = with_entry, .with_ctx = kid };
	ck_assert_int_eq(vault_release(v, sc, &cfg, &rq, &r), CS_OK);
	ck_assert_int_eq(r.outcome, VAULT_RELEASED);
	vault_release_clear(&r);
	ck_assert_int_eq(with_calls, 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit a JOIN audit b ON b.seq = a.seq + 1 "
	    "WHERE a.action = 'vault.released' AND b.action = 'proxy.forwarded' AND a.consent_id = ?1 "
	    "AND b.consent_id = ?1", kid), 1);
	/* Failing: no token, no release entry, no use of the consent. */
	rq.with = with_fail;
	rq.now = NOW + 5;
	ck_assert_int_eq(vault_release(v, sc, &cfg, &rq, &r), CS_EIO);
	ck_assert_ptr_null(r.access_token);
	ck_assert_int_eq(with_calls, 2);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.released'", NULL), 1);
	ck_assert_int_eq(q_int("SELECT last_used_at FROM consents WHERE id = ?1", kid), NOW + 2);
	/* Nothing released (the consent gone): the caller's writes are not made. */
	k.reconnect_required = true;
	ck_assert_int_eq(vault_release(v, sc, &cfg, &rq, &r), CS_OK);
	ck_assert_int_eq(r.outcome, VAULT_RELEASE_GONE);
	ck_assert_int_eq(with_calls, 2);
	consent_clear(&k);
	ck_no_plaintext();
	free(kid);
}
END_TEST

/* The consent revoked after the caller read it (on another node, say): the
 * release's own transaction reads it again and releases nothing -- no token,
 * no vault.released entry, no use of the consent. */
START_TEST(test_vault_release_consent_revoked_meanwhile)
{
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 3600);
	char *kid = connect_alice(NOW);
	struct consent k = load(kid, NOW);        /* the caller's snapshot: live */
	struct vault_release r;
	char sql[160];
	memset(&r, 0, sizeof r);
	ck_assert_int_eq(str_fmt(sql, sizeof sql, "UPDATE consents SET revoked_at = %d WHERE id = '%s'",
	    NOW + 1, kid), CS_OK);
	raw_exec(sql);
	struct vault_release_req rq = { .k = &k, .action = "list_issues", .actor = ACT,
		.now = NOW + 2, .with = with_entry, .with_ctx = kid };
	int calls = with_calls;
	ck_assert_int_eq(vault_release(v, sc, &cfg, &rq, &r), CS_OK);
	ck_assert_int_eq(r.outcome, VAULT_RELEASE_GONE);
	ck_assert_ptr_null(r.access_token);
	ck_assert_int_eq(with_calls, calls);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.released'", NULL), 0);
	ck_assert_int_eq(q_int("SELECT last_used_at FROM consents WHERE id = ?1", kid), 0);
	vault_release_clear(&r);
	consent_clear(&k);
	free(kid);
}
END_TEST

/* --- sealing ------------------------------------------------------------ */

START_TEST(test_vault_seal_round_trip)
{
	/* No scope and no expiry from the provider: the mapping, and an hour. */
	srv_set_tokens("AT-secret-1", "RT-secret-1", NULL, 0);
	char *kid = connect_alice(NOW);
	struct vault_release r;
	ck_assert_int_eq(release_o(kid, NOW + 10, &r), VAULT_RELEASED);
	ck_assert_str_eq(r.access_token, "AT-secret-1");
	ck_assert_str_eq(r.token_type, "Bearer");
	ck_assert_str_eq(r.scope, "issues:read repo");
	ck_assert_int_eq(r.expires_in, 3600 - 10);
	vault_release_clear(&r);
	ck_assert_ptr_null(r.access_token);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.released' AND "
	    "detail = 'action=list_issues' AND consent_id = ?1", kid), 1);
	ck_no_plaintext();
	/* A consent without a record. */
	char *rid = request("alice", "coder", "notes", "read", NOW);
	struct consent_decision d = decision("read");
	char *nk = NULL;
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(tu_decide(sc, &cfg, rid, uid("alice"), &d, ACT, NOW, &nk), CS_OK);
	ck_assert_int_eq(release_o(nk, NOW, &r), VAULT_RELEASE_GONE);      /* notes has no provider */
	scope_set_clear(&d.selected);
	free(nk);
	free(rid);
	free(kid);
}
END_TEST

START_TEST(test_vault_ciphertext_swapped_between_rows)
{
	char *k1 = connect_alice(NOW);
	srv_set_tokens("AT-secret-2", "RT-secret-2", "issues:read repo", 3600);
	/* Two agents never share a provider token: helper gets its own record. */
	char *k2 = connect_as("alice", "helper", "github", "issues:read", NOW);
	ck_release(k1, NOW, "AT-secret-1");
	ck_release(k2, NOW, "AT-secret-2");
	/* An attacker with the database swaps the ciphertexts of the two rows. */
	raw_exec("CREATE TEMP TABLE t AS SELECT consent_id, access_sealed FROM vault_records");
	sqlite3_stmt *s = NULL;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "UPDATE vault_records SET access_sealed = "
	    "(SELECT t.access_sealed FROM t WHERE t.consent_id <> vault_records.consent_id)", -1, &s,
	    NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
	struct vault_release r;
	ck_assert_int_eq(release(k1, NOW, &r), CS_ECRYPTO);
	ck_assert_ptr_null(r.access_token);
	ck_assert_int_eq(release(k2, NOW, &r), CS_ECRYPTO);
	ck_assert_ptr_null(r.access_token);
	/* Pointing a record at another consent does not help either. */
	raw_exec("UPDATE vault_records SET access_sealed = (SELECT t.access_sealed FROM t WHERE "
	    "t.consent_id = vault_records.consent_id)");
	ck_release(k1, NOW, "AT-secret-1");
	raw_exec("DELETE FROM vault_records WHERE consent_id IN (SELECT consent_id FROM t WHERE "
	    "rowid = 2)");
	sqlite3_stmt *u = NULL;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "UPDATE vault_records SET consent_id = ?1", -1, &u,
	    NULL), SQLITE_OK);
	char *other = q_text("SELECT consent_id FROM t WHERE rowid = 2", NULL);
	sqlite3_bind_text(u, 1, other, -1, SQLITE_TRANSIENT);
	ck_assert_int_eq(sqlite3_step(u), SQLITE_DONE);
	sqlite3_finalize(u);
	ck_assert_int_eq(release(other, NOW, &r), CS_ECRYPTO);
	ck_assert_int_eq(audits("vault.released"), 3);           /* failures release nothing */
	free(other);
	free(k1);
	free(k2);
}
END_TEST

/* Rewrites the access ciphertext of kid's record through f. */
static void tamper(const char *kid, void (*f)(unsigned char *, int *))
{
	sqlite3_stmt *s = NULL;
	unsigned char blob[1024];
	int n;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "SELECT access_sealed FROM vault_records WHERE "
	    "consent_id = ?1", -1, &s, NULL), SQLITE_OK);
	sqlite3_bind_text(s, 1, kid, -1, SQLITE_TRANSIENT);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
	n = sqlite3_column_bytes(s, 0);
	ck_assert_int_le(n, (int)sizeof blob);
	if (n > 0)
		memcpy(blob, sqlite3_column_blob(s, 0), (size_t)n);
	sqlite3_finalize(s);
	f(blob, &n);
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "UPDATE vault_records SET access_sealed = ?2 "
	    "WHERE consent_id = ?1", -1, &s, NULL), SQLITE_OK);
	sqlite3_bind_text(s, 1, kid, -1, SQLITE_TRANSIENT);
	sqlite3_bind_blob(s, 2, blob, n, SQLITE_TRANSIENT);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
}

static unsigned char saved[1024];
static int nsaved;
static void t_save(unsigned char *b, int *n) { memcpy(saved, b, (size_t)*n); nsaved = *n; }
static void t_restore(unsigned char *b, int *n) { memcpy(b, saved, (size_t)nsaved); *n = nsaved; }
static void t_flip(unsigned char *b, int *n) { b[*n / 2] ^= 0x01; }
static void t_flip_nonce(unsigned char *b, int *n) { (void)n; b[0] ^= 0x80; }
static void t_flip_tag(unsigned char *b, int *n) { b[*n - 1] ^= 0x01; }
static void t_truncate(unsigned char *b, int *n) { (void)b; *n -= 1; }
static void t_short(unsigned char *b, int *n) { (void)b; *n = 20; }
static void t_empty(unsigned char *b, int *n) { (void)b; *n = 0; }

START_TEST(test_vault_tampered_ciphertexts)
{
	char *kid = connect_alice(NOW);
	void (*bad[])(unsigned char *, int *) = { t_flip, t_flip_nonce, t_flip_tag, t_truncate,
		t_short, t_empty };
	tamper(kid, t_save);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct vault_release r;
		tamper(kid, bad[i]);
		ck_assert_msg(release(kid, NOW, &r) == CS_ECRYPTO, "tamper %zu accepted", i);
		ck_assert_ptr_null(r.access_token);
		tamper(kid, t_restore);
		ck_release(kid, NOW, "AT-secret-1");
	}
	free(kid);
}
END_TEST

START_TEST(test_vault_wrong_master_key)
{
	char *kid = connect_alice(NOW);
	struct vault *v2 = NULL, *v3 = NULL;
	struct master_key same_kid, other_kid;
	struct vault_release r;
	/* Other bytes under the same key id: the tag does not verify. */
	memset(&same_kid, 0x22, sizeof same_kid);
	memcpy(same_kid.kid, mk.kid, MASTER_KID_LEN + 1);
	ck_assert_int_eq(vault_new(&cfg, &same_kid, &v2), CS_OK);
	ck_assert_int_eq(release_with(v2, sc, kid, NOW, &r), CS_ECRYPTO);
	ck_assert_ptr_null(r.access_token);
	/* Another key id: refused before any decryption (clear message). */
	memset(&other_kid, 0x11, sizeof other_kid);
	memcpy(other_kid.kid, "ffeeddccbbaa9988", MASTER_KID_LEN + 1);
	ck_assert_int_eq(vault_new(&cfg, &other_kid, &v3), CS_OK);
	ck_assert_int_eq(release_with(v3, sc, kid, NOW, &r), CS_ECRYPTO);
	vault_free(v2);
	vault_free(v3);
	ck_release(kid, NOW, "AT-secret-1");
	free(kid);
}
END_TEST

/* --- cascade and moves -------------------------------------------------- */

START_TEST(test_vault_cascade_revoke_moves_to_outbox)
{
	char *kid = connect_alice(NOW);
	char *rec_id = q_text("SELECT id FROM vault_records WHERE consent_id = ?1", kid);
	int64_t len = q_int("SELECT length(access_sealed) FROM vault_records WHERE consent_id = ?1",
	    kid);
	ck_assert_int_eq(tu_revoke(sc, kid, uid("alice"), ACT, "user", NOW + 5, false), CS_OK);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox WHERE record_id = ?1", rec_id), 1);
	ck_assert_int_eq(q_int("SELECT length(access_sealed) FROM vault_outbox", NULL), len);
	ck_assert_int_eq(q_int("SELECT next_attempt_at FROM vault_outbox", NULL), NOW + 5);
	ck_assert_int_eq(q_int("SELECT refresh_sealed IS NOT NULL FROM vault_outbox", NULL), 1);
	char *c = q_text("SELECT consent_id || '/' || subject || '/' || resource || '/' || master_kid "
	    "FROM vault_outbox", NULL);
	char want[256];
	snprintf(want, sizeof want, "%s/alice/github/%s", kid, mk.kid);
	ck_assert_str_eq(c, want);
	free(c);
	ck_assert(!vault_has_record(sc, kid));
	/* Nothing is released from the outbox. */
	struct vault_release r;
	ck_assert_int_eq(release_o(kid, NOW + 6, &r), VAULT_RELEASE_GONE);
	ck_no_plaintext();
	free(rec_id);
	free(kid);
}
END_TEST

START_TEST(test_vault_cascade_replaced)
{
	/* Replaced by a decision without the vault (the old consent's record goes). */
	char *kid = connect_alice(NOW);
	char *rid = request("alice", "coder", "github", "issues:write", NOW + 1);
	struct consent_decision d = decision("issues:read issues:write");
	char *nk = NULL;
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(tu_decide(sc, &cfg, rid, uid("alice"), &d, ACT, NOW + 1, &nk), CS_OK);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox WHERE consent_id = ?1", kid), 1);
	scope_set_clear(&d.selected);
	free(nk);
	free(rid);
	free(kid);

	/* Replaced by a new connection with another mapping: old record out, new in. */
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 3600);
	kid = connect_as("bob", "coder", "github", "issues:read", NOW);
	srv_set_tokens("AT-secret-2", "RT-secret-2", "issues:read issues:write repo", 3600);
	nk = connect_as("bob", "coder", "github", "issues:read issues:write", NOW + 2);
	struct consent k = load(kid, NOW + 2);
	ck_assert_str_eq(k.state, "revoked");
	consent_clear(&k);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox WHERE consent_id = ?1", kid), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records WHERE consent_id = ?1", nk), 1);
	ck_release(nk, NOW + 2, "AT-secret-2");
	free(kid);
	free(nk);
}
END_TEST


/* --- release and refresh ------------------------------------------------ */

START_TEST(test_vault_release_refreshes_near_expiry)
{
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 100);
	srv_set_refresh(200, "{\"access_token\":\"AT-secret-2\",\"token_type\":\"bearer\","
	    "\"refresh_token\":\"RT-secret-2\",\"expires_in\":3600}", 0);
	char *kid = connect_alice(NOW);
	ck_release(kid, NOW, "AT-secret-1");                 /* 100 s left > margin 60 */
	ck_assert_int_eq(srv_refreshes(), 0);
	ck_release(kid, NOW + 40, "AT-secret-2");            /* 60 s left: refreshed first */
	ck_assert_int_eq(srv_refreshes(), 1);
	pthread_mutex_lock(&sv.mu);
	ck_assert_str_eq(sv.last_refresh_token, "RT-secret-1");
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(q_int("SELECT access_expires_at FROM vault_records", NULL), NOW + 40 + 3600);
	ck_release(kid, NOW + 41, "AT-secret-2");            /* fresh: no second refresh */
	ck_assert_int_eq(srv_refreshes(), 1);
	/* The rotated refresh token replaced the old one. */
	srv_set_refresh(200, "{\"access_token\":\"AT-secret-3\",\"token_type\":\"Bearer\","
	    "\"expires_in\":3600}", 0);
	ck_release(kid, NOW + 40 + 3600 - 10, "AT-secret-3");
	pthread_mutex_lock(&sv.mu);
	ck_assert_str_eq(sv.last_refresh_token, "RT-secret-2");
	pthread_mutex_unlock(&sv.mu);
	/* No rotation this time: the old refresh token stays. */
	srv_set_refresh(200, "{\"access_token\":\"AT-secret-4\",\"token_type\":\"Bearer\","
	    "\"expires_in\":3600}", 0);
	ck_release(kid, NOW + 40 + 7200, "AT-secret-4");
	pthread_mutex_lock(&sv.mu);
	ck_assert_str_eq(sv.last_refresh_token, "RT-secret-2");
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(audits("vault.refreshed"), 3);
	ck_no_plaintext();
	free(kid);
}
END_TEST

START_TEST(test_vault_release_refresh_more_scopes_refused)
{
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 30);
	srv_set_refresh(200, "{\"access_token\":\"AT-secret-2\",\"token_type\":\"Bearer\","
	    "\"scope\":\"admin issues:read repo\",\"expires_in\":3600}", 0);
	char *kid = connect_alice(NOW);
	struct vault_release r;
	ck_assert_int_eq(release_o(kid, NOW, &r), VAULT_RELEASE_GONE);
	ck_assert_ptr_null(r.access_token);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 1);
	ck_assert_str_eq(sv.revoked[0], "access_token:AT-secret-2");
	pthread_mutex_unlock(&sv.mu);
	struct consent k = load(kid, NOW);
	ck_assert_str_eq(k.state, "reconnect_required");
	consent_clear(&k);
	free(kid);
}
END_TEST

struct racer {
	const char *kid;
	int         ok;
};

static void *race_main(void *arg)
{
	struct racer *rc = arg;
	struct store_conn *c = store_conn(st);
	struct vault_release r;
	must(c != NULL);
	memset(&r, 0, sizeof r);
	enum cs_err e = release_with(v, c, rc->kid, NOW + 50, &r);
	rc->ok = e == CS_OK && r.access_token != NULL && strcmp(r.access_token, "AT-secret-2") == 0;
	vault_release_clear(&r);
	return NULL;
}

START_TEST(test_vault_release_single_flight)
{
	enum { N = 20 };
	pthread_t th[N];
	struct racer rc[N];
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 100);
	srv_set_refresh(200, "{\"access_token\":\"AT-secret-2\",\"token_type\":\"Bearer\","
	    "\"refresh_token\":\"RT-secret-2\",\"expires_in\":3600}", 300);
	char *kid = connect_alice(NOW);
	for (int i = 0; i < N; i++) {
		rc[i].kid = kid;
		rc[i].ok = 0;
		ck_assert_int_eq(pthread_create(&th[i], NULL, race_main, &rc[i]), 0);
	}
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < N; i++)
		ck_assert_msg(rc[i].ok, "thread %d got no fresh token", i);
	ck_assert_int_eq(srv_refreshes(), 1);
	ck_assert_int_eq(audits("vault.refreshed"), 1);
	ck_assert_int_eq(audits("vault.released"), N);
	free(kid);
}
END_TEST

START_TEST(test_vault_release_invalid_grant_reconnect)
{
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 30);
	srv_set_refresh(400, "{\"error\":\"invalid_grant\"}", 0);
	char *kid = connect_alice(NOW);
	ck_assert_int_eq(exchange("alice", "coder", "github", "issues:read", NOW), CONSENT_GRANT);
	struct vault_release r;
	ck_assert_int_eq(release_o(kid, NOW, &r), VAULT_RELEASE_GONE);
	ck_assert_ptr_null(r.access_token);
	struct consent k = load(kid, NOW);
	ck_assert_str_eq(k.state, "reconnect_required");
	ck_assert(k.reconnect_required);
	ck_assert(consent_is_live(&k, NOW));
	consent_clear(&k);
	ck_assert_int_eq(audits("vault.reconnect_required"), 1);
	/* No second call to the provider: the consent says reconnect. */
	ck_assert_int_eq(release_o(kid, NOW + 1, &r), VAULT_RELEASE_GONE);
	ck_assert_int_eq(srv_refreshes(), 1);
	/* Flow A asks the person again; /me shows the state. */
	ck_assert_int_eq(exchange("alice", "coder", "github", "issues:read", NOW + 2),
	    CONSENT_REQUIRED);
	struct consent *ks = NULL;
	size_t n = 0;
	ck_assert_int_eq(consent_list_for_user(sc, uid("alice"), NOW + 2, 10, &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(ks[0].state, "reconnect_required");
	consent_list_free(ks, n);
	/* Reconnecting goes to the provider (the dead record does not move). */
	char *rid = q_text("SELECT id FROM consent_requests WHERE status = 'pending'", NULL);
	char *state = begin(rid, "alice", "issues:read", NOW + 3);
	srv_set_tokens("AT-secret-5", "RT-secret-5", "issues:read repo", 3600);
	struct vault_finish f;
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW + 3, &f),
	    VAULT_CONNECTED);
	ck_release(f.consent_id, NOW + 3, "AT-secret-5");
	ck_assert_int_eq(exchange("alice", "coder", "github", "issues:read", NOW + 10), CONSENT_GRANT);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox WHERE consent_id = ?1", kid), 1);
	vault_finish_clear(&f);
	free(state);
	free(rid);
	free(kid);
}
END_TEST

START_TEST(test_vault_release_provider_down)
{
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 100);
	char *kid = connect_alice(NOW);
	srv_down();
	/* Refresh fails transiently: the unexpired token is still released... */
	ck_release(kid, NOW + 50, "AT-secret-1");
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.released' AND "
	    "outcome = 'refresh_failed'", NULL), 1);
	/* ...an expired one never. */
	struct vault_release r;
	ck_assert_int_eq(release_o(kid, NOW + 100, &r), VAULT_RELEASE_UNAVAILABLE);
	ck_assert_ptr_null(r.access_token);
	free(kid);
}
END_TEST

START_TEST(test_vault_release_refresh_backoff)
{
	/* 503 then success: the connection is kept, and a provider that is down
	 * is asked again only after a growing wait, not by every release. */
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 100);
	srv_set_refresh(503, "{\"error\":\"temporarily_unavailable\"}", 0);
	char *kid = connect_alice(NOW);
	ck_release(kid, NOW + 50, "AT-secret-1");            /* refresh failed: still valid */
	ck_assert_int_eq(srv_refreshes(), 1);
	ck_release(kid, NOW + 51, "AT-secret-1");            /* waits 2 s: no call */
	ck_assert_int_eq(srv_refreshes(), 1);
	ck_release(kid, NOW + 52, "AT-secret-1");            /* asked again, 503 again */
	ck_assert_int_eq(srv_refreshes(), 2);
	ck_release(kid, NOW + 55, "AT-secret-1");            /* now 4 s */
	ck_assert_int_eq(srv_refreshes(), 2);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.released' AND "
	    "outcome = 'refresh_failed'", NULL), 4);
	srv_set_refresh(200, "{\"access_token\":\"AT-secret-2\",\"token_type\":\"Bearer\","
	    "\"refresh_token\":\"RT-secret-2\",\"expires_in\":3600}", 0);
	ck_release(kid, NOW + 56, "AT-secret-2");            /* recovered */
	ck_assert_int_eq(srv_refreshes(), 3);
	struct consent k = load(kid, NOW + 56);
	ck_assert(!k.reconnect_required);
	consent_clear(&k);
	ck_assert_int_eq(audits("vault.reconnect_required"), 0);
	/* A success ends the wait: the next failure starts again at 2 s. */
	srv_set_refresh(502, "bad gateway", 0);
	ck_release(kid, NOW + 56 + 3600 - 1, "AT-secret-2");   /* one second left */
	ck_assert_int_eq(srv_refreshes(), 4);
	/* Expired while waiting: nothing is released, the provider is not asked,
	 * and the connection stays (the provider may come back). */
	struct vault_release r;
	ck_assert_int_eq(release_o(kid, NOW + 56 + 3600, &r), VAULT_RELEASE_UNAVAILABLE);
	ck_assert_ptr_null(r.access_token);
	ck_assert_int_eq(srv_refreshes(), 4);
	k = load(kid, NOW + 56 + 3600);
	ck_assert(!k.reconnect_required);
	consent_clear(&k);
	free(kid);
}
END_TEST

/* A whole connection of (sub, coder, resource) for scopes_s that may act
 * while the person is away (offline); the consent id. */
static char *connect_offline(const char *sub, const char *resource, const char *scopes_s,
    int64_t now)
{
	char *rid = request(sub, "coder", resource, scopes_s, now);
	struct consent_decision d = decision(scopes_s);
	struct vault_begin b = { NULL, NULL, CONSENT_DECIDED };
	struct vault_finish f;
	d.offline = true;
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(begin_as(rid, uid(sub), &d, now, &b), CS_OK);
	char *state = url_param(b.authorize_url, "state");
	ck_assert_int_eq(finish_full(resource, state, sv.base, NULL, SH, sub, now, &f), VAULT_CONNECTED);
	char *kid = strdup(f.consent_id);
	vault_finish_clear(&f);
	vault_begin_clear(&b);
	scope_set_clear(&d.selected);
	free(state);
	free(rid);
	return kid;
}

/* One refresh-ahead pass at now; how many records it tried. */
static int ahead(int64_t now)
{
	int tried = -1;
	ck_assert_int_eq(vault_refresh_ahead(v, sc, now, &tried), CS_OK);
	return tried;
}

START_TEST(test_vault_refresh_ahead)
{
	/* proactive_refresh on github only: an offline consent's token is renewed
	 * within refresh_margin of expiry with no release, audited by "system". */
	vault_free(v);
	resources[0].proactive_refresh = true;
	ck_assert_int_eq(vault_new(&cfg, &mk, &v), CS_OK);
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 100);
	char *kid = connect_offline("alice", "github", "issues:read", NOW);
	char *online = connect_as("bob", "coder", "github", "issues:read", NOW);   /* not offline */
	srv_set_tokens("AT-secret-1", "RT-secret-1", "read_api", 100);
	char *other = connect_offline("carol", "gitlab", "read", NOW);             /* not asked for */
	ck_assert_int_eq(ahead(NOW + 10), 0);                /* 90 s left > margin 60 */
	ck_assert_int_eq(srv_refreshes(), 0);
	srv_set_refresh(200, "{\"access_token\":\"AT-secret-2\",\"token_type\":\"Bearer\","
	    "\"refresh_token\":\"RT-secret-2\",\"expires_in\":3600}", 0);
	ck_assert_int_eq(ahead(NOW + 45), 1);
	ck_assert_int_eq(srv_refreshes(), 1);                /* alice's only */
	ck_assert_int_eq(q_int("SELECT access_expires_at FROM vault_records WHERE consent_id = ?1",
	    kid), NOW + 45 + 3600);
	ck_assert_int_eq(q_int("SELECT access_expires_at FROM vault_records WHERE consent_id = ?1",
	    online), NOW + 100);
	ck_assert_int_eq(q_int("SELECT access_expires_at FROM vault_records WHERE consent_id = ?1",
	    other), NOW + 100);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.refreshed' AND "
	    "actor = 'system' AND consent_id = ?1", kid), 1);
	ck_assert_int_eq(audits("vault.released"), 0);       /* no agent asked */
	ck_assert_int_eq(ahead(NOW + 46), 0);                /* fresh now: nothing to do */
	ck_assert_int_eq(srv_refreshes(), 1);
	ck_release(kid, NOW + 50, "AT-secret-2");            /* the agent gets the renewed token */
	ck_assert_int_eq(srv_refreshes(), 1);
	ck_no_plaintext();
	free(kid);
	free(online);
	free(other);
}
END_TEST

START_TEST(test_vault_refresh_ahead_failures)
{
	/* A transient failure waits out the backoff; invalid_grant marks the
	 * consent with its health event, before any agent asks. */
	vault_free(v);
	resources[0].proactive_refresh = true;
	ck_assert_int_eq(vault_new(&cfg, &mk, &v), CS_OK);
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 100);
	char *kid = connect_offline("alice", "github", "issues:read", NOW);
	srv_set_refresh(503, "{\"error\":\"temporarily_unavailable\"}", 0);
	ck_assert_int_eq(ahead(NOW + 45), 1);
	ck_assert_int_eq(srv_refreshes(), 1);
	ck_assert_int_eq(ahead(NOW + 46), 0);                /* waiting 2 s */
	ck_assert_int_eq(srv_refreshes(), 1);
	struct consent k = load(kid, NOW + 46);
	ck_assert(!k.reconnect_required);                    /* the connection is kept */
	consent_clear(&k);
	srv_set_refresh(400, "{\"error\":\"invalid_grant\"}", 0);
	ck_assert_int_eq(ahead(NOW + 48), 1);
	ck_assert_int_eq(srv_refreshes(), 2);
	k = load(kid, NOW + 48);
	ck_assert(k.reconnect_required);
	ck_assert_str_eq(k.reconnect_reason, "refresh_refused");
	consent_clear(&k);
	ck_assert_int_eq(q_int("SELECT count(*) FROM events_outbox WHERE consent_id = ?1 AND "
	    "kind = 'reconnect_required' AND reason = 'refresh_refused'", kid), 1);
	ck_assert_int_eq(audits("vault.reconnect_required"), 1);
	ck_assert_int_eq(ahead(NOW + 60), 0);                /* marked: never asked again */
	ck_assert_int_eq(srv_refreshes(), 2);
	free(kid);
}
END_TEST

START_TEST(test_vault_forced_refresh_refused_is_revoked)
{
	/* The proxy's forced refresh after the upstream refused an unexpired
	 * token, refused too: revoked at the provider, with its event. */
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 3600);
	char *kid = connect_alice(NOW);
	srv_set_refresh(400, "{\"error\":\"invalid_grant\"}", 0);
	struct consent k = load(kid, NOW + 120);
	struct vault_release r;
	memset(&r, 0, sizeof r);
	ck_assert_int_eq(vault_release_refreshed(v, sc, &cfg, &(struct vault_release_req){ .k = &k,
	    .action = "list_issues", .actor = GW, .now = NOW + 120 }, &r), CS_OK);
	ck_assert_int_eq(r.outcome, VAULT_RELEASE_GONE);
	ck_assert_ptr_null(r.access_token);
	consent_clear(&k);
	k = load(kid, NOW + 120);
	ck_assert(k.reconnect_required);
	ck_assert_str_eq(k.reconnect_reason, "revoked");
	consent_clear(&k);
	ck_assert_int_eq(q_int("SELECT count(*) FROM events_outbox WHERE consent_id = ?1 AND "
	    "kind = 'reconnect_required' AND reason = 'revoked'", kid), 1);
	char *d = q_text("SELECT detail FROM audit WHERE action = 'vault.reconnect_required'", NULL);
	ck_assert_ptr_nonnull(strstr(d, "revoked at the provider"));
	free(d);
	free(kid);
}
END_TEST

START_TEST(test_vault_reconnect_from_me)
{
	/* /me's Reconnect: a request for what the broken consent granted, the
	 * person's own only; approving it connects again and pushes recovered. */
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 30);
	char *kid = connect_alice(NOW);
	char *bobs = connect_as("bob", "coder", "github", "issues:read", NOW);
	struct consent_reconnect r;
	const struct consent_actor alice = { uid("alice"), ACT, NOW + 1 };
	ck_assert_int_eq(consent_reconnect(sc, &cfg, kid, &alice, &r), CS_OK);
	ck_assert_int_eq(r.outcome, CONSENT_RECONNECT_NOT_NEEDED);   /* it works: nothing written */
	ck_assert_int_eq(q_int("SELECT count(*) FROM consent_requests WHERE status = 'pending'", NULL), 0);
	srv_set_refresh(400, "{\"error\":\"invalid_grant\"}", 0);
	struct vault_release rl;
	ck_assert_int_eq(release_o(kid, NOW + 1, &rl), VAULT_RELEASE_GONE);
	srv_set_refresh(400, "{\"error\":\"invalid_grant\"}", 0);
	ck_assert_int_eq(release_o(bobs, NOW + 1, &rl), VAULT_RELEASE_GONE);
	/* Another person's consent: as a missing one, nothing written. */
	ck_assert_int_eq(consent_reconnect(sc, &cfg, bobs, &alice, &r), CS_OK);
	ck_assert_int_eq(r.outcome, CONSENT_RECONNECT_NOT_YOURS);
	ck_assert_int_eq(consent_reconnect(sc, &cfg, "no-such-consent-at-all", &alice, &r), CS_OK);
	ck_assert_int_eq(r.outcome, CONSENT_RECONNECT_UNKNOWN);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consent_requests WHERE status = 'pending'", NULL), 0);
	ck_assert_int_eq(consent_reconnect(sc, &cfg, kid, &alice, &r), CS_OK);
	ck_assert_int_eq(r.outcome, CONSENT_RECONNECT_ASKED);
	char *rid = strdup(r.request_id);
	char *sc_ = q_text("SELECT scopes || '|' || pre_granted || '|' || agent || '|' || resource "
	    "FROM consent_requests WHERE id = ?1", rid);
	ck_assert_str_eq(sc_, "issues:read|issues:read|coder|github");
	free(sc_);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'consent.request.created' "
	    "AND detail = 'reconnect from /me' AND actor = 'user:alice'", NULL), 1);
	/* Twice: the same request, not a second one. */
	ck_assert_int_eq(consent_reconnect(sc, &cfg, kid, &alice, &r), CS_OK);
	ck_assert_int_eq(r.outcome, CONSENT_RECONNECT_PENDING);
	ck_assert_str_eq(r.request_id, rid);
	/* The consent page's approval connects again: a new consent, "recovered". */
	char *state = begin(rid, "alice", "issues:read", NOW + 2);
	srv_set_tokens("AT-secret-5", "RT-secret-5", "issues:read repo", 3600);
	struct vault_finish f;
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW + 2, &f),
	    VAULT_CONNECTED);
	ck_release(f.consent_id, NOW + 3, "AT-secret-5");
	ck_assert_int_eq(q_int("SELECT count(*) FROM events_outbox WHERE consent_id = ?1 AND "
	    "kind = 'recovered'", f.consent_id), 1);
	/* The old consent was replaced: nothing to reconnect there any more. */
	ck_assert_int_eq(consent_reconnect(sc, &cfg, kid, &(struct consent_actor){ uid("alice"), ACT,
	    NOW + 4 }, &r), CS_OK);
	ck_assert_int_eq(r.outcome, CONSENT_RECONNECT_NOT_NEEDED);
	vault_finish_clear(&f);
	free(state);
	free(rid);
	free(bobs);
	free(kid);
}
END_TEST

/* The github resource as preset github-app with provider_base_url = the
 * canned provider: its endpoints as config_section.c fills them. */
static void github_app_preset(void)
{
	static char a[128], t[128], r[128];
	vault_free(v);
	ck_assert_int_eq(str_fmt(a, sizeof a, "%s/login/oauth/authorize", sv.base), CS_OK);
	ck_assert_int_eq(str_fmt(t, sizeof t, "%s/login/oauth/access_token", sv.base), CS_OK);
	ck_assert_int_eq(str_fmt(r, sizeof r, "%s/api/v3/applications/consentd/token", sv.base), CS_OK);
	resources[0].provider_issuer = NULL;
	resources[0].preset = PRESET_GITHUB_APP;
	resources[0].provider_base_url = sv.base;
	resources[0].provider_authorization_endpoint = a;
	resources[0].provider_token_endpoint = t;
	resources[0].provider_revocation_endpoint = r;
	ck_assert_int_eq(vault_new(&cfg, &mk, &v), CS_OK);
}

START_TEST(test_vault_github_app_rotation_and_revocation)
{
	github_app_preset();
	/* GitHub app: scope "" (the app's permissions), 8 h tokens, a refresh token. */
	srv_set_tokens("ghu_secret1", "ghr_secret1", "", 0);
	char *kid = connect_alice(NOW);
	ck_assert_int_eq(q_int("SELECT access_expires_at FROM vault_records", NULL), NOW + 28800);
	char *ps = q_text("SELECT provider_scopes FROM vault_records", NULL);
	ck_assert_str_eq(ps, "issues:read repo");            /* as asked */
	free(ps);
	/* A refresh rotates both. */
	srv_set_refresh(200, "{\"access_token\":\"ghu_secret2\",\"token_type\":\"bearer\",\"scope\":\"\","
	    "\"expires_in\":28800,\"refresh_token\":\"ghr_secret2\",\"refresh_token_expires_in\":15811200}", 0);
	ck_release(kid, NOW + 28800 - 30, "ghu_secret2");
	pthread_mutex_lock(&sv.mu);
	ck_assert_str_eq(sv.last_refresh_token, "ghr_secret1");
	pthread_mutex_unlock(&sv.mu);
	/* Revoked: GitHub deletes the access token; the refresh token cannot be
	 * named there, and the entry is finished all the same. */
	ck_assert_int_eq(tu_revoke(sc, kid, uid("alice"), ACT, "user", NOW + 28800, false), CS_OK);
	int done = 0;
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 28800, &done), CS_OK);
	ck_assert_int_eq(done, 1);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 1);
	ck_assert_str_eq(sv.revoked[0], "github:ghu_secret2");
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.revoked' AND "
	    "detail LIKE '%refresh=not_revocable access=revoked%'", NULL), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 0);
	free(kid);
}
END_TEST

START_TEST(test_vault_release_expired_without_refresh)
{
	srv_set_tokens("AT-secret-1", NULL, "issues:read repo", 100);
	char *kid = connect_alice(NOW);
	ck_release(kid, NOW + 50, "AT-secret-1");            /* near expiry, nothing to refresh */
	struct vault_release r;
	ck_assert_int_eq(release_o(kid, NOW + 100, &r), VAULT_RELEASE_GONE);
	struct consent k = load(kid, NOW + 100);
	ck_assert_str_eq(k.state, "reconnect_required");
	consent_clear(&k);
	free(kid);
}
END_TEST

/* --- the outbox ---------------------------------------------------------- */

START_TEST(test_vault_outbox_revokes_refresh_then_access)
{
	char *kid = connect_alice(NOW);
	int fin = -1;
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "admin", NOW + 1, false), CS_OK);
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 1, &fin), CS_OK);
	ck_assert_int_eq(fin, 1);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 2);
	ck_assert_str_eq(sv.revoked[0], "refresh_token:RT-secret-1");
	ck_assert_str_eq(sv.revoked[1], "access_token:AT-secret-1");
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.revoked' AND "
	    "outcome = 'ok' AND consent_id = ?1", kid), 1);
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 2, &fin), CS_OK);
	ck_assert_int_eq(fin, 0);
	free(kid);
}
END_TEST

START_TEST(test_vault_outbox_provider_down_retries)
{
	char *kid = connect_alice(NOW);
	int fin = -1;
	uint16_t port = sv.port;
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "admin", NOW + 1, false), CS_OK);
	srv_down();
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 1, &fin), CS_OK);
	ck_assert_int_eq(fin, 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 1);
	ck_assert_int_eq(q_int("SELECT attempts FROM vault_outbox", NULL), 1);
	ck_assert_int_eq(q_int("SELECT next_attempt_at FROM vault_outbox", NULL), NOW + 1 + 10);
	ck_assert_int_eq(audits("vault.revoke_retry"), 1);
	/* Not due yet: nothing happens. */
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 5, &fin), CS_OK);
	ck_assert_int_eq(audits("vault.revoke_retry"), 1);
	/* Still down: the backoff doubles. */
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 11, &fin), CS_OK);
	ck_assert_int_eq(q_int("SELECT next_attempt_at FROM vault_outbox", NULL), NOW + 11 + 20);
	/* Back up: revoked, erased. */
	srv_up(port);
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 31, &fin), CS_OK);
	ck_assert_int_eq(fin, 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 0);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 2);
	ck_assert_str_eq(sv.revoked[0], "refresh_token:RT-secret-1");
	pthread_mutex_unlock(&sv.mu);
	free(kid);
}
END_TEST

START_TEST(test_vault_outbox_partial_and_expired)
{
	char *kid = connect_alice(NOW);
	int fin = -1;
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "admin", NOW + 1, false), CS_OK);
	/* The provider refuses to revoke: retried. */
	pthread_mutex_lock(&sv.mu);
	sv.revoke_status = 503;
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 1, &fin), CS_OK);
	ck_assert_int_eq(fin, 0);
	/* The refresh token revoked, then the access token expired: done ("expired"). */
	pthread_mutex_lock(&sv.mu);
	sv.revoke_status = 200;
	pthread_mutex_unlock(&sv.mu);
	raw_exec("UPDATE vault_outbox SET access_expires_at = 0");
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 100, &fin), CS_OK);
	ck_assert_int_eq(fin, 1);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 1);               /* the expired access token is not sent */
	ck_assert_str_eq(sv.revoked[0], "refresh_token:RT-secret-1");
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.revoked' AND "
	    "outcome = 'expired'", NULL), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 0);
	free(kid);
}
END_TEST

START_TEST(test_vault_outbox_unreadable_kept_until_expiry)
{
	char *kid = connect_alice(NOW);
	int fin = -1;
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "admin", NOW + 1, false), CS_OK);
	raw_exec("UPDATE vault_outbox SET consent_id = 'another'");   /* no longer opens */
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 1, &fin), CS_OK);
	ck_assert_int_eq(fin, 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 1);
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 3600, &fin), CS_OK);
	ck_assert_int_eq(fin, 1);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 0);
	pthread_mutex_unlock(&sv.mu);
	free(kid);
}
END_TEST

START_TEST(test_vault_outbox_claim_holds_entries)
{
	/* What one pass (one node) claimed, no other pass takes until its lease
	 * ends: the provider hears each token once, then again only when the
	 * claimer died before settling it. */
	char *kid = connect_alice(NOW);
	struct store_vault_outbox *o = NULL;
	size_t n = 99;
	int fin = -1;
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "admin", NOW + 1, false), CS_OK);
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(store_vault_outbox_claim(sc, NOW + 1, VAULT_OUTBOX_LEASE, 10, &o, &n), CS_OK);
	ck_assert_int_eq(store_commit(sc), CS_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(o[0].consent_id, kid);
	ck_assert_int_eq(o[0].next_attempt_at, NOW + 1 + VAULT_OUTBOX_LEASE);
	store_vault_outbox_free(o, n);
	ck_assert_int_eq(q_int("SELECT next_attempt_at FROM vault_outbox", NULL), NOW + 1 + VAULT_OUTBOX_LEASE);
	/* Another pass meanwhile: nothing to claim, nothing revoked. */
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 2, &fin), CS_OK);
	ck_assert_int_eq(fin, 0);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 0);
	pthread_mutex_unlock(&sv.mu);
	/* The claimer never settled it: due again when the lease ends. */
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 1 + VAULT_OUTBOX_LEASE, &fin), CS_OK);
	ck_assert_int_eq(fin, 1);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 2);
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 0);
	free(kid);
}
END_TEST

START_TEST(test_vault_outbox_pass_claims_in_turn)
{
	/* 12 entries due: one pass claims 10, then the other 2, and finishes all. */
	char *kid = connect_alice(NOW);
	int fin = -1;
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "admin", NOW + 1, false), CS_OK);
	for (int i = 0; i < 11; i++)
		raw_exec("INSERT INTO vault_outbox (record_id, consent_id, user_id, subject, resource, "
		    "access_sealed, refresh_sealed, master_kid, access_expires_at, created_at, attempts, "
		    "next_attempt_at, refresh_revoked, access_revoked) SELECT record_id, consent_id, "
		    "user_id, subject, resource, access_sealed, refresh_sealed, master_kid, "
		    "access_expires_at, created_at, attempts, next_attempt_at, refresh_revoked, "
		    "access_revoked FROM vault_outbox ORDER BY id LIMIT 1");
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 12);
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 1, &fin), CS_OK);
	ck_assert_int_eq(fin, 12);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 0);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 24);
	pthread_mutex_unlock(&sv.mu);
	free(kid);
}
END_TEST

static Suite *vault_suite(void)
{
	Suite *s = suite_create("vault");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_vault_map_scopes);
	tcase_add_test(tc, test_vault_release_approved_one_transaction);
	tcase_add_test(tc, test_vault_release_with_callers_writes);
	tcase_add_test(tc, test_vault_release_approved_counted_when_committed);
	tcase_add_test(tc, test_vault_release_consent_revoked_meanwhile);
	tcase_add_test(tc, test_vault_seal_round_trip);
	tcase_add_test(tc, test_vault_ciphertext_swapped_between_rows);
	tcase_add_test(tc, test_vault_tampered_ciphertexts);
	tcase_add_test(tc, test_vault_wrong_master_key);
	tcase_add_test(tc, test_vault_cascade_revoke_moves_to_outbox);
	tcase_add_test(tc, test_vault_cascade_replaced);
	tcase_add_test(tc, test_vault_release_refreshes_near_expiry);
	tcase_add_test(tc, test_vault_release_refresh_more_scopes_refused);
	tcase_add_test(tc, test_vault_release_single_flight);
	tcase_add_test(tc, test_vault_release_invalid_grant_reconnect);
	tcase_add_test(tc, test_vault_release_provider_down);
	tcase_add_test(tc, test_vault_release_expired_without_refresh);
	tcase_add_test(tc, test_vault_release_refresh_backoff);
	tcase_add_test(tc, test_vault_refresh_ahead);
	tcase_add_test(tc, test_vault_refresh_ahead_failures);
	tcase_add_test(tc, test_vault_forced_refresh_refused_is_revoked);
	tcase_add_test(tc, test_vault_reconnect_from_me);
	tcase_add_test(tc, test_vault_github_app_rotation_and_revocation);
	tcase_add_test(tc, test_vault_outbox_revokes_refresh_then_access);
	tcase_add_test(tc, test_vault_outbox_provider_down_retries);
	tcase_add_test(tc, test_vault_outbox_partial_and_expired);
	tcase_add_test(tc, test_vault_outbox_unreadable_kept_until_expiry);
	tcase_add_test(tc, test_vault_outbox_claim_holds_entries);
	tcase_add_test(tc, test_vault_outbox_pass_claims_in_turn);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	if (httpc_global_init() != CS_OK)
		return EXIT_FAILURE;
	int rc = tu_run(vault_suite());
	curl_global_cleanup();
	return rc;
}
