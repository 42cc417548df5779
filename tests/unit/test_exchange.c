/* test_exchange.c -- what the gateway names at /token, checked before an
 * exchange (exchange.c, no I/O): the resource, the agent and the scopes of a
 * grant exchange, invariant 7 (requested ⊆ configured ∩ agent-allowed) and
 * the order the checks refuse in; the resource a grant reaches; a provider-
 * token exchange's action; flow A's subject-token checks up to the IdP's, the
 * agent's reason rule, and the error_description each refusal is answered
 * with (byte for byte what the integration tests see).  The exchanges
 * themselves run in test_routes and the integration tests. */
#include <string.h>

#include "testutil.h"
#include "buf.h"
#include "config.h"
#include "exchange.h"
#include "oidc.h"
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
	ck_assert_str_eq(t.agent.id, "coder");
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
	ck_assert_ptr_null(t.agent.id);
	exchange_target_clear(&t);
}
END_TEST

START_TEST(test_exchange_target_agent_and_scope_refusals)
{
	struct exchange_target t;
	/* The resource is known before the agent is refused (the access log names it). */
	ck_assert_int_eq(target("notes", NULL, NULL, "read", &t), EXCHANGE_TARGET_NO_AGENT);
	ck_assert_str_eq(t.res->id, "notes");
	ck_assert_ptr_null(t.agent.id);
	exchange_target_clear(&t);
	ck_assert_int_eq(target("notes", NULL, "nosuch", "read", &t), EXCHANGE_TARGET_UNKNOWN_AGENT);
	ck_assert_ptr_null(t.agent.id);
	exchange_target_clear(&t);
	ck_assert_int_eq(target("notes", NULL, "coder", NULL, &t), EXCHANGE_TARGET_NO_SCOPE);
	ck_assert_str_eq(t.agent.id, "coder");
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

START_TEST(test_exchange_reason_rule)
{
	char r200[201], r201[202], e200[401], e201[403];
	memset(r200, 'r', 200);
	r200[200] = '\0';
	memset(r201, 'r', 201);
	r201[201] = '\0';
	for (int i = 0; i < 200; i++)
		memcpy(e200 + 2 * i, "\xc3\xa9", 2);           /* 200 characters, 400 bytes */
	e200[400] = '\0';
	memcpy(e201, e200, 400);
	memcpy(e201 + 400, "\xc3\xa9", 3);                  /* 201 characters */
	ck_assert_ptr_null(exchange_reason_problem(NULL));
	ck_assert_ptr_null(exchange_reason_problem(""));
	ck_assert_ptr_null(exchange_reason_problem("to file the bug you reported"));
	ck_assert_ptr_null(exchange_reason_problem(r200));
	ck_assert_ptr_null(exchange_reason_problem(e200));
	ck_assert_ptr_null(exchange_reason_problem("tab-free \xe2\x80\xae is shown visibly, not refused"));
	ck_assert_ptr_null(exchange_reason_problem("\xc2\xa0 no-break space"));
	const char *const bad[] = { r201, e201, "line\nbreak", "tab\there", "bell\x07",
		"esc\x1b[31m", "del\x7f", "c1 \xc2\x80", "csi \xc2\x9b" "31m", "nel \xc2\x85" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_str_eq(exchange_reason_problem(bad[i]),
		    "reason: at most 200 characters, no control characters");
	ck_assert_str_eq(EXCHANGE_REASON_RULE, "reason: at most 200 characters, no control characters");
}
END_TEST

/* --- flow A's subject, and the descriptions -------------------------------- */

/* exchange_subject's outcome and its description, for these values. */
static enum exchange_subject_outcome subject(const struct config *c, struct oidc_provider *idp,
    const char *type, const char *token, char *desc)
{
	struct exchange_subject s;
	ck_assert_int_eq(exchange_subject(c, idp, type, token, 1000, &s), CS_OK);
	ck_assert_ptr_null(s.sub);
	ck_assert_int_eq(exchange_subject_description(c, &s, desc, EXCHANGE_DESCRIPTION_MAX), CS_OK);
	enum exchange_subject_outcome o = s.outcome;
	exchange_subject_clear(&s);
	return o;
}

START_TEST(test_exchange_subject_refusals_in_order)
{
	static const char cfg_text[] = CFG;
	char one_type[sizeof cfg_text + 64];
	const char *gw = strstr(cfg_text, "[gateway]\n") + strlen("[gateway]\n");
	struct config *c1 = NULL;
	struct oidc_provider *idp = NULL;     /* never discovered: no metadata */
	char d[EXCHANGE_DESCRIPTION_MAX];
	ck_assert_int_eq(oidc_provider_new("https://idp.example.com", 60, &idp), CS_OK);
	ck_assert_int_eq(subject(cfg, idp, URN_TT_ID_TOKEN, NULL, d), EXCHANGE_SUBJECT_NO_TOKEN);
	ck_assert_str_eq(d, "subject_token is missing");
	ck_assert_int_eq(subject(cfg, idp, NULL, NULL, d), EXCHANGE_SUBJECT_NO_TOKEN);
	ck_assert_int_eq(subject(cfg, idp, NULL, "t", d), EXCHANGE_SUBJECT_NO_TYPE);
	ck_assert_str_eq(d, "subject_token_type is missing");
	/* The type comes before the IdP: an unknown URN, or a bare name, is refused. */
	ck_assert_int_eq(subject(cfg, idp, "urn:ietf:params:oauth:token-type:saml2", "t", d),
	    EXCHANGE_SUBJECT_TYPE_REFUSED);
	ck_assert_str_eq(d, "subject_token_type is not one this consentd accepts "
	    "(urn:ietf:params:oauth:token-type: id_token, access_token, jwt)");
	ck_assert_int_eq(subject(cfg, idp, "id_token", "t", d), EXCHANGE_SUBJECT_TYPE_REFUSED);
	/* Each accepted type reaches the IdP's check; none passes before discovery. */
	ck_assert_int_eq(subject(cfg, idp, URN_TT_ID_TOKEN, "t", d), EXCHANGE_SUBJECT_IDP_UNREACHED);
	ck_assert_str_eq(d, "consentd has not reached its IdP yet, so it cannot check the subject "
	    "token; retry");
	ck_assert_int_eq(subject(cfg, idp, URN_TT_ACCESS_TOKEN, "t", d), EXCHANGE_SUBJECT_IDP_UNREACHED);
	ck_assert_int_eq(subject(cfg, idp, URN_TT_JWT, "t", d), EXCHANGE_SUBJECT_IDP_UNREACHED);
	/* [gateway] subject_token_types narrows them. */
	ck_assert_int_eq(str_fmt(one_type, sizeof one_type, "%.*ssubject_token_types = id_token\n%s",
	    (int)(gw - cfg_text), cfg_text, gw), CS_OK);
	ck_assert_int_eq(config_load_string(one_type, strlen(one_type), "x.conf", NULL, stderr, &c1),
	    CS_OK);
	ck_assert_int_eq(subject(c1, idp, URN_TT_ID_TOKEN, "t", d), EXCHANGE_SUBJECT_IDP_UNREACHED);
	ck_assert_int_eq(subject(c1, idp, URN_TT_ACCESS_TOKEN, "t", d), EXCHANGE_SUBJECT_TYPE_REFUSED);
	ck_assert_str_eq(d, "subject_token_type is not one this consentd accepts "
	    "(urn:ietf:params:oauth:token-type: id_token)");
	ck_assert_int_eq(subject(c1, idp, URN_TT_JWT, "t", d), EXCHANGE_SUBJECT_TYPE_REFUSED);
	config_free(c1);
	oidc_provider_free(idp);
}
END_TEST

START_TEST(test_exchange_subject_descriptions)
{
	struct exchange_subject s;
	char d[EXCHANGE_DESCRIPTION_MAX], small[16];
	memset(&s, 0, sizeof s);
	s.outcome = EXCHANGE_SUBJECT_INVALID;
	memcpy(s.why, "expired (exp)", sizeof "expired (exp)");
	ck_assert_int_eq(exchange_subject_description(cfg, &s, d, sizeof d), CS_OK);
	ck_assert_str_eq(d, "subject token expired (exp)");
	/* Only a refused token is looked at as ours; no keys, no change. */
	exchange_subject_ours(NULL, "t", &s);
	ck_assert_int_eq(s.outcome, EXCHANGE_SUBJECT_INVALID);
	s.outcome = EXCHANGE_SUBJECT_IDP_UNREACHED;
	exchange_subject_ours(NULL, "t", &s);
	ck_assert_int_eq(s.outcome, EXCHANGE_SUBJECT_IDP_UNREACHED);
	s.outcome = EXCHANGE_SUBJECT_OWN_GRANT;
	ck_assert_int_eq(exchange_subject_description(cfg, &s, d, sizeof d), CS_OK);
	ck_assert_str_eq(d, "the subject token is a consentd grant; send the person's token from the IdP");
	s.outcome = EXCHANGE_SUBJECT_NO_CLAIM;
	ck_assert_int_eq(exchange_subject_description(cfg, &s, d, sizeof d), CS_OK);
	ck_assert_str_eq(d, "the subject token has no usable sub claim (a string of 1 to 255 bytes; "
	    "[oidc] subject_claim)");
	/* A short buffer is never overrun, and never holds a cut text. */
	ck_assert_int_eq(exchange_subject_description(cfg, &s, small, sizeof small), CS_ETOOBIG);
	ck_assert_uint_eq(strlen(small), 0);
	exchange_subject_clear(&s);
	exchange_subject_clear(NULL);
}
END_TEST

/* Each refusal's words: what errors.test.js and consent_attacks.test.js see. */
START_TEST(test_exchange_target_descriptions)
{
	static const struct { const char *aud, *res, *agent, *scope, *want; } c[] = {
		{ NULL, NULL, "coder", "read", "the resource is missing: name it with audience or resource" },
		{ "nope", NULL, "coder", "read", "audience names no configured resource" },
		{ NULL, "https://x.example", "coder", "read",
		  "resource is not the URI of a configured resource" },
		{ "gh", "https://notes.example.com/api", "coder", "read",
		  "audience and resource name different resources" },
		{ "notes", NULL, NULL, "read", "agent_id is missing" },
		{ "notes", NULL, "nope", "read", "agent_id names no configured agent" },
		{ "notes", NULL, "coder", NULL, "scope is missing" },
		{ "notes", NULL, "coder", "a  b", "scope is malformed: at most 20 distinct scopes of at "
		  "most 128 characters, separated by single spaces" },
		{ "notes", NULL, "coder", "read admin", "scope admin is not configured for resource notes" },
		{ "notes", NULL, "coder", "read write",
		  "agent coder may not ask for scope write of resource notes ([agent.coder] allow)" },
	};
	char d[EXCHANGE_DESCRIPTION_MAX];
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		struct exchange_target t;
		ck_assert_int_ne(target(c[i].aud, c[i].res, c[i].agent, c[i].scope, &t), EXCHANGE_TARGET_OK);
		ck_assert_int_eq(exchange_target_description(&t, d, sizeof d), CS_OK);
		ck_assert_str_eq(d, c[i].want);
		exchange_target_clear(&t);
	}
}
END_TEST

START_TEST(test_exchange_outcome_descriptions)
{
	struct exchange_release r;
	struct exchange_grant g;
	char d[EXCHANGE_DESCRIPTION_MAX];
	memset(&r, 0, sizeof r);
	r.outcome = EXCHANGE_CONNECTION_GONE;
	ck_assert_str_eq(exchange_outcome_description(&r),
	    "the provider connection is gone; ask for consent again to reconnect");
	r.outcome = EXCHANGE_PROXY_ONLY;
	ck_assert_str_eq(exchange_outcome_description(&r),
	    "this resource's tokens are used only by consentd's proxy");
	r.outcome = EXCHANGE_BAD_DETAILS;
	memcpy(r.why, "the details name another action", sizeof "the details name another action");
	ck_assert_str_eq(exchange_outcome_description(&r), "the details name another action");
	r.outcome = EXCHANGE_DETAILS_NEEDED;   /* its own words unless why says the policy's */
	r.why[0] = '\0';
	ck_assert_str_eq(exchange_outcome_description(&r),
	    "this action needs a person's approval: send authorization_details");
	ck_assert_str_eq(exchange_action_description(EXCHANGE_ACTION_UNKNOWN),
	    "unknown action: action names no configured action of the grant's resource");
	ck_assert_str_eq(exchange_action_description(EXCHANGE_ACTION_NO_PROVIDER),
	    "the grant's resource has no provider");
	memset(&g, 0, sizeof g);
	g.outcome = EXCHANGE_TOO_MANY_SCOPES;
	ck_assert_int_eq(exchange_grant_description(&g, d, sizeof d), CS_OK);
	ck_assert_str_eq(d, "together with the scopes already asked for, this is more than 20 scopes");
	g.outcome = EXCHANGE_GRANT_ENDED;
	ck_assert_int_eq(exchange_grant_description(&g, d, sizeof d), CS_OK);
	ck_assert_str_eq(d, "the consent ended just now (revoked or expired); ask again");
	/* Not a grant: the consent answer's own words. */
	g.outcome = EXCHANGE_NO_GRANT;
	g.answer.outcome = CONSENT_PENDING;
	g.answer.interval = 5;
	ck_assert_int_eq(exchange_grant_description(&g, d, sizeof d), CS_OK);
	ck_assert_str_eq(d, "the person has not decided yet; poll again in 5 s");
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
	tcase_add_test(tc, test_exchange_reason_rule);
	tcase_add_test(tc, test_exchange_subject_refusals_in_order);
	tcase_add_test(tc, test_exchange_subject_descriptions);
	tcase_add_test(tc, test_exchange_target_descriptions);
	tcase_add_test(tc, test_exchange_outcome_descriptions);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
