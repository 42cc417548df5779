/* test_health.c -- connection health (health.c): the reasons and their words,
 * the reconnect description, the mark and its event written together and once
 * (and not at all when rolled back), the "recovered" event, the SET claims of
 * both health kinds (events.c), and the count by health -- on a real SQLite
 * database built from migrations/. */
#include <string.h>

#include <sqlite3.h>

#include "audit.h"
#include "buf.h"
#include "consent.h"
#include "events.h"
#include "health.h"
#include "jwt.h"
#include "store.h"
#include "testutil.h"
#include "tu_consent.h"

#include "tu_events.h"
}


/* The one outbox row of consent_id of kind (NULL: any). */
static int64_t events_of(const char *consent_id, const char *kind)
{
	if (kind == NULL)
		return q_int("SELECT count(*) FROM events_outbox WHERE consent_id = ?1", consent_id);
	char sql[200];
	ck_assert_int_eq(str_fmt(sql, sizeof sql, "SELECT count(*) FROM events_outbox WHERE "
	    "consent_id = ?1 AND kind = '%s'", kind), CS_OK);
	return q_int(sql, consent_id);
}

static void mark(const char *kid, enum health_reason r, int64_t now, enum cs_err want)
{
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(health_mark_broken(sc, kid, r, now), want);
	ck_assert_int_eq(store_commit(sc), CS_OK);
}

START_TEST(test_health_reason_names)
{
	for (int i = 0; i < HEALTH_REASON__MAX; i++) {
		enum health_reason r = (enum health_reason)i;
		ck_assert_int_eq(health_reason_parse(health_reason_name(r)), r);
		ck_assert_ptr_nonnull(strstr(health_reason_person(r), "."));
		ck_assert_uint_gt(strlen(health_reason_gateway(r)), 10);
	}
	ck_assert_str_eq(health_reason_name(HEALTH_REFRESH_REFUSED), "refresh_refused");
	/* Bad input: never an error, never another reason. */
	ck_assert_int_eq(health_reason_parse(NULL), HEALTH_UNKNOWN);
	ck_assert_int_eq(health_reason_parse(""), HEALTH_UNKNOWN);
	ck_assert_int_eq(health_reason_parse("refresh_refused "), HEALTH_UNKNOWN);
	ck_assert_int_eq(health_reason_parse("REFRESH_REFUSED"), HEALTH_UNKNOWN);
	ck_assert_str_eq(health_reason_name((enum health_reason)99), "unknown");
	ck_assert_str_eq(health_reason_person((enum health_reason)-1),
	    health_reason_person(HEALTH_UNKNOWN));
}
END_TEST

START_TEST(test_health_description)
{
	char out[HEALTH_DESCRIPTION_MAX];
	ck_assert_int_eq(health_reconnect_description(HEALTH_REFRESH_REFUSED, PUBLIC, out,
	    sizeof out), CS_OK);
	ck_assert_str_eq(out, "the provider connection needs the person again: the provider "
	    "refused the refresh token (invalid_grant): the access was removed at the provider "
	    "or lapsed; ask for consent again and the person reconnects (they see why at "
	    "https://consent.test/me)");
	/* RFC 6750 error_description: no '"' nor '\\' (it may go in a header). */
	for (int i = 0; i < HEALTH_REASON__MAX; i++) {
		ck_assert_int_eq(health_reconnect_description((enum health_reason)i, PUBLIC, out,
		    sizeof out), CS_OK);
		for (const char *c = out; *c; c++)
			ck_assert(*c >= 0x20 && *c < 0x7f && *c != '"' && *c != '\\');
	}
	/* Too long: refused, nothing half-written. */
	char url[HEALTH_DESCRIPTION_MAX + 10];
	memset(url, 'a', sizeof url - 1);
	url[sizeof url - 1] = '\0';
	ck_assert_int_eq(health_reconnect_description(HEALTH_EXPIRED, url, out, sizeof out),
	    CS_ETOOBIG);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(health_reconnect_description(HEALTH_EXPIRED, NULL, out, sizeof out),
	    CS_EINVAL);
	ck_assert_int_eq(health_reconnect_description(HEALTH_EXPIRED, PUBLIC, NULL, 10), CS_EINVAL);
}
END_TEST

START_TEST(test_health_mark_once_with_event)
{
	char *kid = approve("alice", "read", T0);
	char desc[HEALTH_DESCRIPTION_MAX];
	ck_assert_int_eq(health_describe_consent(sc, PUBLIC, kid, desc, sizeof desc), CS_ENOENT);
	ck_assert_str_eq(desc, "");
	mark(kid, HEALTH_REFRESH_REFUSED, T0 + 10, CS_OK);
	ck_assert_int_eq(q_int("SELECT reconnect_required FROM consents WHERE id = ?1", kid), 1);
	ck_assert_int_eq(q_int("SELECT reconnect_reason = 'refresh_refused' FROM consents "
	    "WHERE id = ?1", kid), 1);
	ck_assert_int_eq(events_of(kid, HEALTH_KIND_BROKEN), 1);
	ck_assert_int_eq(events_of(kid, NULL), 1);
	ck_assert_int_eq(q_int("SELECT created_at FROM events_outbox WHERE consent_id = ?1", kid),
	    T0 + 10);
	/* Once: a second mark (another reason) changes nothing and adds no event. */
	mark(kid, HEALTH_EXPIRED, T0 + 20, CS_ENOENT);
	ck_assert_int_eq(q_int("SELECT reconnect_reason = 'refresh_refused' FROM consents "
	    "WHERE id = ?1", kid), 1);
	ck_assert_int_eq(events_of(kid, NULL), 1);
	/* The consent as the domain reads it, and what the gateway is told. */
	struct consent k;
	ck_assert_int_eq(consent_get(sc, kid, T0 + 30, &k), CS_OK);
	ck_assert(k.reconnect_required);
	ck_assert_str_eq(k.state, "reconnect_required");
	ck_assert_str_eq(k.reconnect_reason, "refresh_refused");
	consent_clear(&k);
	ck_assert_int_eq(health_describe_consent(sc, PUBLIC, kid, desc, sizeof desc), CS_OK);
	ck_assert_ptr_nonnull(strstr(desc, "(invalid_grant)"));
	ck_assert_ptr_nonnull(strstr(desc, "https://consent.test/me"));
	ck_assert_int_eq(health_describe_consent(sc, PUBLIC, "nope", desc, sizeof desc), CS_ENOENT);
	free(kid);
}
END_TEST

START_TEST(test_health_mark_rolled_back_or_revoked)
{
	char *kid = approve("alice", "read", T0);
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(health_mark_broken(sc, kid, HEALTH_MORE_SCOPES, T0 + 5), CS_OK);
	store_rollback(sc);
	ck_assert_int_eq(q_int("SELECT reconnect_required FROM consents WHERE id = ?1", kid), 0);
	ck_assert_int_eq(events_of(kid, NULL), 0);
	/* Unknown, and revoked: nothing written. */
	mark("no-such-consent", HEALTH_EXPIRED, T0 + 6, CS_ENOENT);
	ck_assert_int_eq(q_int("SELECT count(*) FROM events_outbox", NULL), 0);
	ck_assert_int_eq(tu_revoke(sc, kid, user_id("alice"), "user:alice", "test", T0 + 7, false), CS_OK);
	int64_t before = events_of(kid, NULL);
	mark(kid, HEALTH_EXPIRED, T0 + 8, CS_ENOENT);
	ck_assert_int_eq(events_of(kid, NULL), before);
	ck_assert_int_eq(events_of(kid, HEALTH_KIND_BROKEN), 0);
	ck_assert_int_eq(health_mark_broken(NULL, kid, HEALTH_EXPIRED, T0), CS_EINVAL);
	free(kid);
}
END_TEST

/* The SET claims of the one entry of kind for kid. */
static json_t *claims_of(const char *kid, const char *kind)
{
	struct store_event_row *v = NULL;
	size_t n = 0;
	json_t *cl = NULL;
	ck_assert_int_eq(events_list(sc, kid, STORE_EVENTS_ANY, 0, 10, &v, &n), CS_OK);
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].kind, kind) == 0)
			ck_assert_int_eq(events_set_claims(&cfg, &v[i], T0 + 100, &cl), CS_OK);
	store_event_rows_free(v, n);
	ck_assert_ptr_nonnull(cl);
	return cl;
}

START_TEST(test_health_set_claims)
{
	char *kid = approve("alice", "read", T0);
	mark(kid, HEALTH_REFRESH_REFUSED, T0 + 10, CS_OK);
	json_t *cl = claims_of(kid, HEALTH_KIND_BROKEN);
	json_t *evs = json_object_get(cl, "events");
	ck_assert_uint_eq(json_object_size(evs), 1);
	json_t *e = json_object_get(evs, EVENTS_HEALTH_URI);
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(json_object_size(e), 6);
	ck_assert_str_eq(json_string_value(json_object_get(e, "cid")), kid);
	ck_assert_str_eq(json_string_value(json_object_get(e, "agent_id")), "coder");
	ck_assert_str_eq(json_string_value(json_object_get(e, "resource")), "urn:consentd:resource:notes");
	ck_assert_str_eq(json_string_value(json_object_get(e, "state")), "reconnect_required");
	ck_assert_str_eq(json_string_value(json_object_get(e, "reason")), "refresh_refused");
	ck_assert_str_eq(json_string_value(json_object_get(e, "reconnect_uri")), PUBLIC "/me");
	ck_assert_int_eq(json_integer_value(json_object_get(cl, "toe")), T0 + 10);
	ck_assert_ptr_null(json_object_get(cl, "exp"));
	json_decref(cl);

	/* Recovered: the new consent, the old reason, no reconnect_uri. */
	char *k2 = approve("bob", "read", T0 + 20);
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(health_recovered(sc, k2, HEALTH_REFRESH_REFUSED, T0 + 30), CS_OK);
	ck_assert_int_eq(store_commit(sc), CS_OK);
	cl = claims_of(k2, HEALTH_KIND_RECOVERED);
	e = json_object_get(json_object_get(cl, "events"), EVENTS_HEALTH_URI);
	ck_assert_uint_eq(json_object_size(e), 5);
	ck_assert_str_eq(json_string_value(json_object_get(e, "state")), "recovered");
	ck_assert_str_eq(json_string_value(json_object_get(e, "reason")), "refresh_refused");
	ck_assert_ptr_null(json_object_get(e, "reconnect_uri"));
	json_decref(cl);
	ck_assert_int_eq(health_recovered(sc, "no-such-consent", HEALTH_UNKNOWN, T0), CS_ENOENT);

	/* A kind this build does not know is never pushed as another. */
	struct store_event_row *v = NULL;
	size_t n = 0;
	ck_assert_int_eq(events_list(sc, k2, STORE_EVENTS_ANY, 0, 10, &v, &n), CS_OK);
	ck_assert_uint_eq(n, 1);
	v[0].kind = "credential-change";
	ck_assert_int_eq(events_set_claims(&cfg, &v[0], T0, &cl), CS_EINVAL);
	v[0].kind = HEALTH_KIND_REVOKED;
	ck_assert_int_eq(events_set_claims(&cfg, &v[0], T0, &cl), CS_OK);
	ck_assert_ptr_nonnull(json_object_get(json_object_get(cl, "events"), EVENTS_REVOKED_URI));
	json_decref(cl);
	store_event_rows_free(v, n);
	free(kid);
	free(k2);
}
END_TEST

/* A vault record for consent kid (sealed bytes stand in: never opened here). */
static void record_for(const char *kid)
{
	char sql[600];
	ck_assert_int_eq(str_fmt(sql, sizeof sql, "INSERT INTO vault_records (id, consent_id, "
	    "user_id, subject, agent, resource, provider_scopes, token_type, access_sealed, "
	    "access_expires_at, master_kid, created_at, updated_at) SELECT 'r-' || id, id, "
	    "user_id, 'x', agent, resource, 'read', 'Bearer', x'00', %d, 'k', %d, %d FROM consents "
	    "WHERE id = ?1", T0 + 3600, T0, T0), CS_OK);
	sqlite3_stmt *s = NULL;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, sql, -1, &s, NULL), SQLITE_OK);
	sqlite3_bind_text(s, 1, kid, -1, SQLITE_TRANSIENT);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
}

START_TEST(test_health_count)
{
	int64_t ok = -1, broken = -1;
	ck_assert_int_eq(health_count(sc, T0, &ok, &broken), CS_OK);
	ck_assert_int_eq(ok, 0);
	ck_assert_int_eq(broken, 0);
	char *a = approve("alice", "read", T0);      /* a connection that works */
	char *b = approve("bob", "read", T0);        /* one that needs the person */
	char *c = approve("carol", "read", T0);      /* a consent without a connection */
	record_for(a);
	record_for(b);
	mark(b, HEALTH_EXPIRED, T0 + 5, CS_OK);
	ck_assert_int_eq(health_count(sc, T0 + 10, &ok, &broken), CS_OK);
	ck_assert_int_eq(ok, 1);
	ck_assert_int_eq(broken, 1);
	/* Expired consents count as neither. */
	ck_assert_int_eq(health_count(sc, T0 + 7200, &ok, &broken), CS_OK);
	ck_assert_int_eq(ok, 0);
	ck_assert_int_eq(broken, 0);
	ck_assert_int_eq(health_count(NULL, T0, &ok, &broken), CS_EINVAL);
	free(a);
	free(b);
	free(c);
}
END_TEST

static Suite *health_suite(void)
{
	Suite *s = suite_create("health");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_health_reason_names);
	tcase_add_test(tc, test_health_description);
	tcase_add_test(tc, test_health_mark_once_with_event);
	tcase_add_test(tc, test_health_mark_rolled_back_or_revoked);
	tcase_add_test(tc, test_health_set_claims);
	tcase_add_test(tc, test_health_count);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(health_suite());
}
