/* test_exchange.c -- what the gateway names at /token, checked before an
 * exchange (exchange.c, no I/O): the resource, the agent and the scopes of a
 * grant exchange, invariant 7 (requested ⊆ configured ∩ agent-allowed) and
 * the order the checks refuse in; the resource a grant reaches; a provider-
 * token exchange's action.  The exchanges themselves run in test_routes and
 * the integration tests. */
#include <string.h>

#include "testutil.h"
#include "config.h"
#include "exchange.h"
#include "seal.h"
#include "vault.h"

#define CFG \
	"[server]\npublic_url = https://consent.example.com\n" \
	"[oidc]\nissuer = https://idp.example.com\nclient_id = consentd\nclient_secret = oidc-secret\n" \
	"[gateway]\nclient_secret = gateway-secret-0123456789\n" \
	"[agent.coder]\nallow = notes:read gh:read gh:write\n" \
	"[agent.reader]\nallow = notes:read\n" \
	"[resource.notes]\nuri = https://notes.example.com/api\n" \
	"[scope.notes.read]\n[scope.notes.write]\n" \
	"[resource.gh]\nprovider_issuer = https://gh.example\nprovider_client_id = x\n" \
	"provider_client_secret = y\n" \
	"[scope.gh.read]\n[scope.gh.write]\n" \
	"[action.gh.user]\nscope = read\n"

static struct config *cfg;

static void setup(void)
{
	ck_assert_int_eq(config_load_string(CFG, strlen(CFG), "x.conf", NULL, stderr, &cfg), CS_OK);
}

static void teardown(void)
{
	config_free(cfg);
	cfg = NULL;
}

/* exchange_target's outcome for these values, and t kept for more checks. */
static enum exchange_target_outcome target(const char *aud, const char *res, const char *agent,
    const char *scope, struct exchange_target *t)
{
	ck_assert_int_eq(exchange_target(cfg, aud, res, agent, scope, t), CS_OK);
	return t->outcome;
}

static enum exchange_target_outcome target_only(const char *aud, const char *res,
    const char *agent, const char *scope)
{
	struct exchange_target t;
	enum exchange_target_outcome o = target(aud, res, agent, scope, &t);
	exchange_target_clear(&t);
	return o;
}

START_TEST(test_exchange_target_resource_by_name_or_uri)
{
	struct exchange_target t;
	ck_assert_int_eq(target("notes", NULL, "coder", "read", &t), EXCHANGE_TARGET_OK);
	ck_assert_str_eq(t.res->id, "notes");
	ck_assert_str_eq(t.agent->id, "coder");
	ck_assert_uint_eq(t.want.n, 1);
	ck_assert_str_eq(t.want.v[0], "read");
	exchange_target_clear(&t);
	ck_assert_int_eq(target(NULL, "https://notes.example.com/api", "coder", "read", &t),
	    EXCHANGE_TARGET_OK);
	ck_assert_str_eq(t.res->id, "notes");
	exchange_target_clear(&t);
	/* Both, agreeing; the default URI of a resource without one. */
	ck_assert_int_eq(target_only("notes", "https://notes.example.com/api", "coder", "read"),
	    EXCHANGE_TARGET_OK);
	ck_assert_int_eq(target_only(NULL, "urn:consentd:resource:gh", "coder", "read write"),
	    EXCHANGE_TARGET_OK);
	exchange_target_clear(NULL);
}
END_TEST

START_TEST(test_exchange_target_resource_refusals)
{
	struct exchange_target t;
	ck_assert_int_eq(target_only(NULL, NULL, "coder", "read"), EXCHANGE_TARGET_NO_RESOURCE);
	ck_assert_int_eq(target_only("nosuch", NULL, "coder", "read"),
	    EXCHANGE_TARGET_UNKNOWN_AUDIENCE);
	/* An audience is the name, never the URI; a resource is the URI, never the name. */
	ck_assert_int_eq(target_only("https://notes.example.com/api", NULL, "coder", "read"),
	    EXCHANGE_TARGET_UNKNOWN_AUDIENCE);
	ck_assert_int_eq(target_only(NULL, "notes", "coder", "read"), EXCHANGE_TARGET_UNKNOWN_URI);
	ck_assert_int_eq(target_only("notes", "https://evil.example/api", "coder", "read"),
	    EXCHANGE_TARGET_UNKNOWN_URI);
	ck_assert_int_eq(target("gh", "https://notes.example.com/api", "coder", "read", &t),
	    EXCHANGE_TARGET_DISAGREE);
	/* Nothing resolved is handed back for a refused resource. */
	ck_assert_ptr_null(t.res);
	ck_assert_ptr_null(t.agent);
	exchange_target_clear(&t);
}
END_TEST

START_TEST(test_exchange_target_agent_and_scope_refusals)
{
	struct exchange_target t;
	/* The resource is known before the agent is refused (the access log names it). */
	ck_assert_int_eq(target("notes", NULL, NULL, "read", &t), EXCHANGE_TARGET_NO_AGENT);
	ck_assert_str_eq(t.res->id, "notes");
	ck_assert_ptr_null(t.agent);
	exchange_target_clear(&t);
	ck_assert_int_eq(target("notes", NULL, "nosuch", "read", &t), EXCHANGE_TARGET_UNKNOWN_AGENT);
	ck_assert_ptr_null(t.agent);
	exchange_target_clear(&t);
	ck_assert_int_eq(target("notes", NULL, "coder", NULL, &t), EXCHANGE_TARGET_NO_SCOPE);
	ck_assert_str_eq(t.agent->id, "coder");
	exchange_target_clear(&t);
	ck_assert_int_eq(target_only("notes", NULL, "coder", ""), EXCHANGE_TARGET_BAD_SCOPE);
	ck_assert_int_eq(target_only("notes", NULL, "coder", "read  write"), EXCHANGE_TARGET_BAD_SCOPE);
	ck_assert_int_eq(target_only("notes", NULL, "coder", "read\twrite"), EXCHANGE_TARGET_BAD_SCOPE);
}
END_TEST

/* SECURITY: invariant 7: requested ⊆ configured ∩ agent-allowed, the first
 * scope that fails named. */
START_TEST(test_exchange_target_invariant_7)
{
	struct exchange_target t;
	ck_assert_int_eq(target("notes", NULL, "coder", "read admin", &t),
	    EXCHANGE_TARGET_SCOPE_UNKNOWN);
	ck_assert_str_eq(t.scope, "admin");
	exchange_target_clear(&t);
	/* Configured, but not in the agent's allow list. */
	ck_assert_int_eq(target("notes", NULL, "coder", "read write", &t),
	    EXCHANGE_TARGET_SCOPE_DENIED);
	ck_assert_str_eq(t.scope, "write");
	exchange_target_clear(&t);
	ck_assert_int_eq(target("gh", NULL, "reader", "read", &t), EXCHANGE_TARGET_SCOPE_DENIED);
	ck_assert_str_eq(t.scope, "read");
	exchange_target_clear(&t);
	/* Allowed for one resource is not allowed for another: "gh:write" is
	 * no "notes:write". */
	ck_assert_int_eq(target_only("notes", NULL, "coder", "write"), EXCHANGE_TARGET_SCOPE_DENIED);
	/* Not configured wins over not allowed when a scope is both. */
	ck_assert_int_eq(target("notes", NULL, "reader", "nope", &t), EXCHANGE_TARGET_SCOPE_UNKNOWN);
	ck_assert_str_eq(t.scope, "nope");
	exchange_target_clear(&t);
	ck_assert_int_eq(target_only("gh", NULL, "coder", "write read"), EXCHANGE_TARGET_OK);
}
END_TEST

/* SECURITY: a grant reaches only its own resource, by name or by URI. */
START_TEST(test_exchange_grant_for_own_resource_only)
{
	struct consent k = { .resource = "notes", .agent = "coder" };
	ck_assert(exchange_grant_for(cfg, &k, NULL, NULL));
	ck_assert(exchange_grant_for(cfg, &k, "notes", NULL));
	ck_assert(exchange_grant_for(cfg, &k, NULL, "https://notes.example.com/api"));
	ck_assert(exchange_grant_for(cfg, &k, "notes", "https://notes.example.com/api"));
	ck_assert(!exchange_grant_for(cfg, &k, "gh", NULL));
	ck_assert(!exchange_grant_for(cfg, &k, NULL, "urn:consentd:resource:gh"));
	ck_assert(!exchange_grant_for(cfg, &k, "notes", "urn:consentd:resource:gh"));
	ck_assert(!exchange_grant_for(cfg, &k, "Notes", NULL));
	/* A grant whose resource is no longer configured reaches no URI. */
	struct consent gone = { .resource = "removed", .agent = "coder" };
	ck_assert(exchange_grant_for(cfg, &gone, "removed", NULL));
	ck_assert(!exchange_grant_for(cfg, &gone, NULL, "urn:consentd:resource:removed"));
}
END_TEST

START_TEST(test_exchange_action_of_grant)
{
	struct master_key mk;
	struct vault *v = NULL;
	const struct config_resource *r = NULL;
	const struct config_action *a = NULL;
	struct consent gh = { .resource = "gh", .agent = "coder" };
	struct consent notes = { .resource = "notes", .agent = "coder" };
	struct consent gone = { .resource = "removed", .agent = "coder" };
	memset(&mk, 0x11, sizeof mk);
	memcpy(mk.kid, "00112233aabbccdd", MASTER_KID_LEN + 1);
	ck_assert_int_eq(vault_new(cfg, &mk, &v), CS_OK);
	ck_assert_int_eq(exchange_action(cfg, v, &gh, "user", &r, &a), EXCHANGE_ACTION_OK);
	ck_assert_str_eq(r->id, "gh");
	ck_assert_str_eq(a->name, "user");
	a = NULL;
	ck_assert_int_eq(exchange_action(cfg, v, &gh, "delete_repo", &r, &a), EXCHANGE_ACTION_UNKNOWN);
	ck_assert_str_eq(r->id, "gh");
	ck_assert_ptr_null(a);
	/* A resource without a provider, or one no longer configured. */
	ck_assert_int_eq(exchange_action(cfg, v, &notes, "user", &r, &a),
	    EXCHANGE_ACTION_NO_PROVIDER);
	ck_assert_str_eq(r->id, "notes");
	ck_assert_int_eq(exchange_action(cfg, v, &gone, "user", &r, &a), EXCHANGE_ACTION_NO_PROVIDER);
	ck_assert_ptr_null(r);
	/* The provider is checked before the action. */
	ck_assert_int_eq(exchange_action(cfg, v, &notes, "nosuch", &r, &a),
	    EXCHANGE_ACTION_NO_PROVIDER);
	ck_assert_ptr_null(a);
	vault_free(v);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("exchange");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_exchange_target_resource_by_name_or_uri);
	tcase_add_test(tc, test_exchange_target_resource_refusals);
	tcase_add_test(tc, test_exchange_target_agent_and_scope_refusals);
	tcase_add_test(tc, test_exchange_target_invariant_7);
	tcase_add_test(tc, test_exchange_grant_for_own_resource_only);
	tcase_add_test(tc, test_exchange_action_of_grant);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
