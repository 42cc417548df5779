/* test_vault_key.c -- vault_key.c: an API key (credential = api_key) sealed
 * into its consent's vault record with the vault's own sealing, stored only
 * for the person's own live consent, released (to the proxy) without refresh,
 * and erased with the consent (the record at once, its outbox copy on the
 * next pass, with nothing to revoke anywhere).  Uses tu_vault.h's fixture:
 * its resource "notes" becomes the api_key resource. */
#include "tu_vault.h"
#include "vault_key.h"

#define KEY "sk-secret-0123456789abcdef"

static void key_resource(void)
{
	resources[2].credential = CREDENTIAL_API_KEY;
	resources[2].api_key_header = "X-Api-Key";
	resources[2].token_release = RELEASE_NEVER;
}

/* alice's live consent of (coder, notes:read): its id. */
static char *notes_consent(const char *sub, int64_t now)
{
	char *rid = request(sub, "coder", "notes", "read", now);
	struct consent_decision d = decision("read");
	char *kid = NULL;
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(tu_decide(sc, &cfg, rid, uid(sub), &d, ACT, now, &kid), CS_OK);
	scope_set_clear(&d.selected);
	free(rid);
	return kid;
}

static enum vault_key_outcome store_key(const char *sub, const char *kid, const char *key,
    int64_t now)
{
	enum vault_key_outcome o = VAULT_KEY__MAX;
	ck_assert_int_eq(vault_key_store(v, sc, &cfg, &(struct vault_person){ uid(sub), SH, ACT, now },
	    kid, key, &o), CS_OK);
	return o;
}

START_TEST(test_vault_key_valid)
{
	ck_assert(vault_key_valid("a"));
	ck_assert(vault_key_valid("sk-live_AZaz09~!@#$%^&*()=+[]{}|;:'\",.<>/?"));
	ck_assert(!vault_key_valid(NULL));
	ck_assert(!vault_key_valid(""));
	ck_assert(!vault_key_valid("has space"));
	ck_assert(!vault_key_valid("line\r\nX-Evil: 1"));
	ck_assert(!vault_key_valid("tab\there"));
	ck_assert(!vault_key_valid("caf\xc3\xa9"));
	char big[VAULT_KEY_MAX + 2];
	memset(big, 'k', sizeof big - 1);
	big[VAULT_KEY_MAX + 1] = '\0';
	ck_assert(!vault_key_valid(big));
	big[VAULT_KEY_MAX] = '\0';
	ck_assert(vault_key_valid(big));
}
END_TEST

START_TEST(test_vault_key_store_and_release)
{
	key_resource();
	char *kid = notes_consent("alice", NOW);
	struct vault_release r;
	/* No key yet: nothing to release. */
	ck_assert_int_eq(release_o(kid, NOW + 1, &r), VAULT_RELEASE_GONE);
	vault_release_clear(&r);
	ck_assert_int_eq(store_key("alice", kid, KEY, NOW + 2), VAULT_KEY_STORED);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records WHERE consent_id = ?1 AND "
	    "token_type = 'api_key' AND refresh_sealed IS NULL", kid), 1);
	ck_no_plaintext();
	ck_assert_int_eq(release_o(kid, NOW + 3, &r), VAULT_RELEASED);
	ck_assert_str_eq(r.access_token, KEY);
	ck_assert_str_eq(r.token_type, "api_key");
	vault_release_clear(&r);
	/* A forced refresh (the proxy's retry after a 401) has nothing to refresh with. */
	struct consent k = load(kid, NOW + 4);
	ck_assert_int_eq(vault_release_refreshed(v, sc, &cfg, &(struct vault_release_req){ .k = &k,
	    .action = "list_issues", .actor = GW, .now = NOW + 4 }, &r), CS_OK);
	ck_assert_int_eq(r.outcome, VAULT_RELEASE_TOO_SOON);
	ck_assert_ptr_null(r.access_token);
	consent_clear(&k);
	/* Replaced: the same record, the new key. */
	ck_assert_int_eq(store_key("alice", kid, "sk-secret-rotated", NOW + 5), VAULT_KEY_REPLACED);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records", NULL), 1);
	ck_assert_int_eq(release_o(kid, NOW + 6, &r), VAULT_RELEASED);
	ck_assert_str_eq(r.access_token, "sk-secret-rotated");
	vault_release_clear(&r);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.key_stored'", NULL), 2);
	ck_no_plaintext();
	free(kid);
}
END_TEST

START_TEST(test_vault_key_other_person_refused)
{
	key_resource();
	char *kid = notes_consent("alice", NOW);
	char *bob_rid = request("bob", "coder", "notes", "read", NOW);   /* bob exists */
	struct consent k;
	bool stored = true;
	enum vault_key_outcome o;
	ck_assert_int_eq(store_key("bob", kid, KEY, NOW + 1), VAULT_KEY_NOT_FOUND);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.key_stored'", NULL), 0);
	ck_assert_int_eq(vault_key_status(sc, &cfg, uid("bob"), kid, NOW + 1, &k, &stored, &o), CS_OK);
	ck_assert_int_eq(o, VAULT_KEY_NOT_FOUND);
	ck_assert_int_eq(vault_key_status(sc, &cfg, uid("alice"), kid, NOW + 1, &k, &stored, &o), CS_OK);
	ck_assert_int_eq(o, VAULT_KEY_STORED);
	ck_assert(!stored);
	consent_clear(&k);
	ck_assert_int_eq(store_key("alice", "no-such-consent", KEY, NOW + 1), VAULT_KEY_NOT_FOUND);
	ck_assert_int_eq(store_key("alice", kid, "bad key", NOW + 1), VAULT_KEY_INVALID);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records", NULL), 0);
	free(bob_rid);
	free(kid);
}
END_TEST

/* A resource with a provider takes no key: its tokens come from the provider. */
START_TEST(test_vault_key_oauth_resource_refused)
{
	char *kid = connect_alice(NOW);
	ck_assert_int_eq(store_key("alice", kid, KEY, NOW + 1), VAULT_KEY_NOT_FOUND);
	ck_release(kid, NOW + 2, "AT-secret-1");
	free(kid);
}
END_TEST

START_TEST(test_vault_key_revoked_erased)
{
	key_resource();
	char *kid = notes_consent("alice", NOW);
	int finished = 0;
	ck_assert_int_eq(store_key("alice", kid, KEY, NOW + 1), VAULT_KEY_STORED);
	ck_assert_int_eq(tu_revoke(sc, kid, uid("alice"), ACT, "user", NOW + 2, false), CS_OK);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 1);
	/* The next pass erases it: no provider to call, nothing kept. */
	ck_assert_int_eq(vault_outbox_run(v, sc, NOW + 3, &finished), CS_OK);
	ck_assert_int_eq(finished, 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 0);
	ck_assert_int_eq(sv.nrevoked, 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.revoked' AND "
	    "consent_id = ?1", kid), 1);
	/* And the revoked consent takes no new key. */
	ck_assert_int_eq(store_key("alice", kid, KEY, NOW + 4), VAULT_KEY_NOT_FOUND);
	free(kid);
}
END_TEST

static Suite *vault_key_suite(void)
{
	Suite *s = suite_create("vault_key");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_vault_key_valid);
	tcase_add_test(tc, test_vault_key_store_and_release);
	tcase_add_test(tc, test_vault_key_other_person_refused);
	tcase_add_test(tc, test_vault_key_oauth_resource_refused);
	tcase_add_test(tc, test_vault_key_revoked_erased);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	if (httpc_global_init() != CS_OK)
		return EXIT_FAILURE;
	int rc = tu_run(vault_key_suite());
	curl_global_cleanup();
	return rc;
}
