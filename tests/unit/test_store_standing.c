/* test_store_standing.c -- the person's standing rules (issue #32; standing.c
 * over store_standing.c, migration 0026): what a stored rule covers, judged
 * from its RFC 9396 details and failing closed on bad or hostile stored data;
 * the rule the approval page may make (the configuration's word, never the
 * form's); and, in approval_check and the release's counted use, a rule that
 * covers its call and nothing else -- another value of a fixed parameter,
 * another action, another consent -- and an expired, used-up, ended or
 * revoked-consent rule that does nothing.
 *
 * On both engines, as test_store.c: with CONSENTD_TEST_DATABASE_URL set to a
 * postgresql:// URL (scripts/run-store-pg.sh) every store test runs on that
 * database, emptied before each; otherwise on a fresh SQLite file. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sqlite3.h>
#include <jansson.h>

#include "approval.h"
#include "audit.h"
#include "buf.h"
#include "config.h"
#include "jcs.h"
#include "consent.h"
#include "standing.h"
#include "store.h"
#include "store_consent.h"
#include "store_standing.h"
#include "store_user.h"
#include "testutil.h"
#include "tu_consent.h"
#include "tu_store.h"

#define T0 1700000000LL
#define ACTOR "gateway:agent-gateway"

/* --- a configuration: tracker's create_issue offers match rules, repo is
 * never left open; close_issue offers exact rules only; list_issues none. --- */

static char *fixed_repo[] = { "repo", NULL };
static struct config_resource resources[1];
static struct config_action actions[3];
static struct config cfg;

static void config_init(void)
{
	memset(&cfg, 0, sizeof cfg);
	memset(resources, 0, sizeof resources);
	memset(actions, 0, sizeof actions);
	resources[0].id = "tracker";
	resources[0].name = "Tracker";
	resources[0].uri = "urn:consentd:resource:tracker";
	actions[0] = (struct config_action){ .resource = "tracker", .name = "create_issue",
		.description = "Open an issue", .scope = "issues", .approval = APPROVAL_REQUIRED,
		.standing = STANDING_MATCH, .standing_max = 28800, .standing_fixed = fixed_repo,
		.nstanding_fixed = 1 };
	actions[1] = (struct config_action){ .resource = "tracker", .name = "close_issue",
		.description = "Close an issue", .scope = "issues", .approval = APPROVAL_REQUIRED,
		.standing = STANDING_EXACT, .standing_max = 3600 };
	actions[2] = (struct config_action){ .resource = "tracker", .name = "list_issues",
		.description = "List issues", .scope = "issues", .approval = APPROVAL_REQUIRED,
		.standing = STANDING_NONE, .standing_max = 28800 };
	cfg.resources = resources;
	cfg.nresources = 1;
	cfg.actions = actions;
	cfg.nactions = 3;
	cfg.consent_request_ttl = 600;
	cfg.consent_interval = 5;
	cfg.consent_deny_cooldown = 300;
	cfg.consent_max_pending_per_user = 50;
}

/* --- pure matching ------------------------------------------------------ */

static json_t *js(const char *text)
{
	json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
	ck_assert_msg(v != NULL, "bad test JSON %s", text);
	return v;
}

static void digest_of(const char *params, char out[APPROVAL_DIGEST_LEN + 1])
{
	json_t *p = js(params);
	ck_assert_int_eq(approval_digest(p, out), CS_OK);
	json_decref(p);
}

static bool covers(const char *kind, const char *details, const char *action, const char *params)
{
	char d[APPROVAL_DIGEST_LEN + 1];
	json_t *p = js(params);
	digest_of(params, d);
	bool ok = standing_covers(kind, details, action, p, d);
	json_decref(p);
	return ok;
}

#define MATCH_REPO "{\"actions\":[\"create_issue\"],\"locations\":[\"urn:x\"]," \
	"\"match\":{\"repo\":{\"exact\":\"acme/widgets\"}},\"type\":\"agent_action\"}"

START_TEST(test_standing_covers_exact)
{
	const char *d = "{\"actions\":[\"close_issue\"],\"type\":\"agent_action\","
	    "\"parameters\":{\"n\":7,\"repo\":\"acme/w\"}}";
	ck_assert(covers("exact", d, "close_issue", "{\"repo\":\"acme/w\",\"n\":7}"));
	ck_assert(covers("exact", d, "close_issue", "{\"n\":7.0,\"repo\":\"acme/w\"}"));  /* same JCS */
	ck_assert(!covers("exact", d, "close_issue", "{\"repo\":\"acme/w\",\"n\":8}"));
	ck_assert(!covers("exact", d, "close_issue", "{\"repo\":\"acme/w\",\"n\":7,\"x\":1}"));
	ck_assert(!covers("exact", d, "create_issue", "{\"repo\":\"acme/w\",\"n\":7}"));
	/* An exact rule of a non-object value. */
	ck_assert(covers("exact", "{\"actions\":[\"a\"],\"type\":\"agent_action\",\"parameters\":null}",
	    "a", "null"));
}
END_TEST

START_TEST(test_standing_covers_match)
{
	ck_assert(covers("match", MATCH_REPO, "create_issue", "{\"repo\":\"acme/widgets\",\"title\":\"x\"}"));
	ck_assert(covers("match", MATCH_REPO, "create_issue", "{\"title\":\"y\",\"repo\":\"acme/widgets\"}"));
	/* Another value of the fixed parameter, a longer one, another type, none. */
	ck_assert(!covers("match", MATCH_REPO, "create_issue", "{\"repo\":\"acme/gadgets\",\"title\":\"x\"}"));
	ck_assert(!covers("match", MATCH_REPO, "create_issue", "{\"repo\":\"acme/widgets2\"}"));
	ck_assert(!covers("match", MATCH_REPO, "create_issue", "{\"repo\":[\"acme/widgets\"]}"));
	ck_assert(!covers("match", MATCH_REPO, "create_issue", "{\"title\":\"x\"}"));
	ck_assert(!covers("match", MATCH_REPO, "create_issue", "[\"acme/widgets\"]"));
	ck_assert(!covers("match", MATCH_REPO, "create_issue", "\"acme/widgets\""));
	/* Another action. */
	ck_assert(!covers("match", MATCH_REPO, "delete_repo", "{\"repo\":\"acme/widgets\"}"));
	/* Exact values compare by their canonical text: objects in any order, 1 = 1.0. */
	const char *obj = "{\"actions\":[\"a\"],\"type\":\"agent_action\",\"match\":{\"o\":{\"exact\":{\"b\":1,\"a\":2}}}}";
	ck_assert(covers("match", obj, "a", "{\"o\":{\"a\":2,\"b\":1.0}}"));
	ck_assert(!covers("match", obj, "a", "{\"o\":{\"a\":2,\"b\":1,\"c\":0}}"));
	/* Prefix constraints: strings only, byte-wise. */
	const char *pre = "{\"actions\":[\"a\"],\"type\":\"agent_action\",\"match\":{"
	    "\"repo\":{\"exact\":\"acme/w\"},\"path\":{\"prefix\":\"docs/\"}}}";
	ck_assert(covers("match", pre, "a", "{\"repo\":\"acme/w\",\"path\":\"docs/a.txt\"}"));
	ck_assert(covers("match", pre, "a", "{\"repo\":\"acme/w\",\"path\":\"docs/\"}"));
	ck_assert(!covers("match", pre, "a", "{\"repo\":\"acme/w\",\"path\":\"doc\"}"));
	ck_assert(!covers("match", pre, "a", "{\"repo\":\"acme/w\",\"path\":\"src/docs/x\"}"));
	ck_assert(!covers("match", pre, "a", "{\"repo\":\"acme/w\",\"path\":7}"));
	ck_assert(!covers("match", pre, "a", "{\"repo\":\"acme/w\"}"));
}
END_TEST

/* Stored details that are not the expected shape cover nothing. */
START_TEST(test_standing_covers_hostile)
{
	const char *p = "{\"repo\":\"acme/widgets\"}";
	static const char *const bad[] = {
		"", "not json", "[]", "null", "{\"repo\":\"acme/widgets\"}",
		/* no match, an empty one, one that is not an object */
		"{\"actions\":[\"create_issue\"],\"type\":\"agent_action\"}",
		"{\"actions\":[\"create_issue\"],\"type\":\"agent_action\",\"match\":{}}",
		"{\"actions\":[\"create_issue\"],\"type\":\"agent_action\",\"match\":[]}",
		"{\"actions\":[\"create_issue\"],\"type\":\"agent_action\",\"match\":\"*\"}",
		/* another type, no type, two actions, a wildcard, an action with a NUL */
		"{\"actions\":[\"create_issue\"],\"type\":\"x\",\"match\":{\"repo\":{\"exact\":\"acme/widgets\"}}}",
		"{\"actions\":[\"create_issue\"],\"match\":{\"repo\":{\"exact\":\"acme/widgets\"}}}",
		"{\"actions\":[\"create_issue\",\"delete\"],\"type\":\"agent_action\",\"match\":{\"repo\":{\"exact\":\"acme/widgets\"}}}",
		"{\"actions\":[\"*\"],\"type\":\"agent_action\",\"match\":{\"repo\":{\"exact\":\"acme/widgets\"}}}",
		"{\"actions\":\"create_issue\",\"type\":\"agent_action\",\"match\":{\"repo\":{\"exact\":\"acme/widgets\"}}}",
		"{\"actions\":[\"create_issue\\u0000x\"],\"type\":\"agent_action\",\"match\":{\"repo\":{\"exact\":\"acme/widgets\"}}}",
		/* an unknown member (meaning the person never saw), parameters in a match rule */
		"{\"actions\":[\"create_issue\"],\"type\":\"agent_action\",\"any\":true,\"match\":{\"repo\":{\"exact\":\"acme/widgets\"}}}",
		"{\"actions\":[\"create_issue\"],\"type\":\"agent_action\",\"parameters\":{},\"match\":{\"repo\":{\"exact\":\"acme/widgets\"}}}",
		/* constraints: unknown, two at once, not an object, an empty or non-string prefix */
		"{\"actions\":[\"create_issue\"],\"type\":\"agent_action\",\"match\":{\"repo\":{\"regex\":\".*\"}}}",
		"{\"actions\":[\"create_issue\"],\"type\":\"agent_action\",\"match\":{\"repo\":{\"exact\":\"acme/widgets\",\"prefix\":\"a\"}}}",
		"{\"actions\":[\"create_issue\"],\"type\":\"agent_action\",\"match\":{\"repo\":\"acme/widgets\"}}",
		"{\"actions\":[\"create_issue\"],\"type\":\"agent_action\",\"match\":{\"repo\":{\"prefix\":\"\"}}}",
		"{\"actions\":[\"create_issue\"],\"type\":\"agent_action\",\"match\":{\"repo\":{\"prefix\":1}}}",
		/* duplicate keys */
		"{\"actions\":[\"create_issue\"],\"type\":\"agent_action\",\"match\":{\"repo\":{\"exact\":\"acme/widgets\"}},\"match\":{\"x\":{\"prefix\":\"a\"}}}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(!covers("match", bad[i], "create_issue", p), "covered by %s", bad[i]);
	/* The kind and the details must agree; an unknown kind covers nothing. */
	ck_assert(!covers("exact", MATCH_REPO, "create_issue", p));
	ck_assert(!covers("any", MATCH_REPO, "create_issue", p));
	ck_assert(!standing_covers(NULL, MATCH_REPO, "create_issue", NULL, NULL));
	ck_assert(!standing_covers("match", MATCH_REPO, "create_issue", NULL, NULL));
	/* An exact rule without parameters, or with another call's. */
	ck_assert(!covers("exact", "{\"actions\":[\"create_issue\"],\"type\":\"agent_action\"}",
	    "create_issue", p));
	ck_assert(!covers("exact", "{\"actions\":[\"create_issue\"],\"type\":\"agent_action\","
	    "\"parameters\":{\"repo\":\"acme/gadgets\"}}", "create_issue", p));
}
END_TEST

START_TEST(test_standing_lookup_of)
{
	char a[APPROVAL_DIGEST_LEN + 1], b[APPROVAL_DIGEST_LEN + 1];
	json_t *p = js("{\"repo\":\"acme/w\",\"title\":\"x\",\"n\":1}");
	json_t *q = js("{\"n\":2,\"title\":\"y\",\"repo\":\"acme/w\"}");
	json_t *r = js("{\"repo\":\"acme/v\",\"title\":\"x\"}");
	ck_assert_int_eq(standing_lookup_of(p, "[\"repo\"]", a), CS_OK);
	ck_assert_int_eq(standing_lookup_of(q, "[\"repo\"]", b), CS_OK);
	ck_assert_str_eq(a, b);                          /* the other values do not count */
	ck_assert_int_eq(standing_lookup_of(r, "[\"repo\"]", b), CS_OK);
	ck_assert_str_ne(a, b);
	ck_assert_int_eq(standing_lookup_of(p, "[\"repo\",\"title\"]", a), CS_OK);
	ck_assert_int_eq(standing_lookup_of(q, "[\"repo\",\"title\"]", b), CS_OK);
	ck_assert_str_ne(a, b);
	static const char *const bad[] = { "", "x", "[]", "{}", "[1]", "[\"repo\",\"repo\"]",
		"[\"missing\"]", "[\"repo\",null]", "\"repo\"" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_msg(standing_lookup_of(p, bad[i], a) == CS_ENOENT, "keyset %s", bad[i]);
	json_t *arr = js("[1]");
	ck_assert_int_eq(standing_lookup_of(arr, "[\"repo\"]", a), CS_ENOENT);
	ck_assert_int_eq(standing_lookup_of(NULL, "[\"repo\"]", a), CS_ENOENT);
	json_decref(arr);
	json_decref(p);
	json_decref(q);
	json_decref(r);
}
END_TEST

/* --- the page's choice -------------------------------------------------- */

static struct approval approval_of(const char *action, const char *params)
{
	json_t *p = js(params);
	struct buf b;
	struct approval a;
	memset(&a, 0, sizeof a);
	buf_init(&b, 1 << 16);
	ck_assert_int_eq(jcs_canonicalize(p, &b), CS_OK);
	ck_assert_int_eq(approval_digest(p, a.digest), CS_OK);
	json_decref(p);
	a.strings = buf_steal(&b);
	buf_clear(&b);
	a.parameters = a.strings;
	a.id = (char *)"ap1";
	a.consent_id = (char *)"k1";
	a.user_id = 1;
	a.subject = (char *)"alice";
	a.agent = (char *)"coder";
	a.resource = (char *)"tracker";
	a.action = (char *)action;
	return a;
}

#define call_of(a) ((struct standing_call){ .approval_id = (a)->id, .consent_id = (a)->consent_id, \
	.subject = (a)->subject, .agent = (a)->agent, .resource = (a)->resource, \
	.action = (a)->action, .parameters = (a)->parameters, .digest = (a)->digest, \
	.user_id = (a)->user_id })

static enum cs_err prepare(const char *action, const char *params, enum config_standing kind,
    int64_t dur, int64_t uses, uint64_t bits, struct standing_rule *r, char *why)
{
	struct approval a = approval_of(action, params);
	memset(r, 0, sizeof *r);
	why[0] = '\0';
	enum cs_err e = standing_prepare(&cfg, &call_of(&a), &(struct standing_request){ .kind = kind,
	    .duration = dur, .max_uses = uses, .fixed = bits }, T0, r, why, 200);
	free(a.strings);
	return e;
}

START_TEST(test_standing_prepare)
{
	struct standing_rule r;
	char why[200];
	config_init();
	const char *p = "{\"title\":\"x\",\"repo\":\"acme/w\",\"labels\":[\"bug\"]}";
	/* standing_keys: the canonical order, what the bits number. */
	json_t *names = NULL;
	struct approval a = approval_of("create_issue", p);
	ck_assert_int_eq(standing_keys(a.parameters, &names), CS_OK);
	ck_assert_uint_eq(json_array_size(names), 3);
	ck_assert_str_eq(json_string_value(json_array_get(names, 0)), "labels");
	ck_assert_str_eq(json_string_value(json_array_get(names, 1)), "repo");
	ck_assert_str_eq(json_string_value(json_array_get(names, 2)), "title");
	json_decref(names);
	free(a.strings);

	/* Fixing nothing by the form still fixes the never-open repo. */
	ck_assert_int_eq(prepare("create_issue", p, STANDING_MATCH, 3600, 0, 0, &r, why), CS_OK);
	ck_assert_str_eq(r.kind, "match");
	ck_assert_str_eq(r.fixed, "repo");
	ck_assert_str_eq(r.keyset, "[\"repo\"]");
	ck_assert_int_eq(r.expires_at, T0 + 3600);
	ck_assert_ptr_nonnull(strstr(r.details, "\"match\":{\"repo\":{\"exact\":\"acme/w\"}}"));
	ck_assert(covers("match", r.details, "create_issue", "{\"repo\":\"acme/w\",\"title\":\"other\"}"));
	ck_assert(!covers("match", r.details, "create_issue", "{\"repo\":\"acme/v\",\"title\":\"x\"}"));
	standing_rule_clear(&r);
	/* labels (bit 0) ticked as well. */
	ck_assert_int_eq(prepare("create_issue", p, STANDING_MATCH, 900, 5, 1u, &r, why), CS_OK);
	ck_assert_str_eq(r.fixed, "labels,repo");
	ck_assert_str_eq(r.keyset, "[\"labels\",\"repo\"]");
	ck_assert_int_eq(r.max_uses, 5);
	standing_rule_clear(&r);
	/* An exact rule. */
	ck_assert_int_eq(prepare("create_issue", p, STANDING_EXACT, 900, 0, 0, &r, why), CS_OK);
	ck_assert_str_eq(r.keyset, "*");
	ck_assert(covers("exact", r.details, "create_issue", p));
	standing_rule_clear(&r);

	/* Refused: longer than standing_max, too short, use counts out of bounds, a bit
	 * beyond the call's values, a call without the never-open repo, an action that
	 * offers only exact rules or none, an unknown action. */
	ck_assert_int_eq(prepare("create_issue", p, STANDING_MATCH, 28801, 0, 0, &r, why), CS_EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "longer"));
	ck_assert_int_eq(prepare("create_issue", p, STANDING_MATCH, 59, 0, 0, &r, why), CS_EINVAL);
	ck_assert_int_eq(prepare("create_issue", p, STANDING_MATCH, 900, -1, 0, &r, why), CS_EINVAL);
	ck_assert_int_eq(prepare("create_issue", p, STANDING_MATCH, 900, 10001, 0, &r, why), CS_EINVAL);
	ck_assert_int_eq(prepare("create_issue", p, STANDING_MATCH, 900, 0, 8u, &r, why), CS_EINVAL);
	ck_assert_int_eq(prepare("create_issue", "{\"title\":\"x\"}", STANDING_MATCH, 900, 0, 1u, &r,
	    why), CS_EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "must stay fixed"));
	ck_assert_int_eq(prepare("create_issue", "[1,2]", STANDING_MATCH, 900, 0, 1u, &r, why),
	    CS_EINVAL);
	ck_assert_int_eq(prepare("close_issue", p, STANDING_MATCH, 900, 0, 2u, &r, why), CS_EINVAL);
	ck_assert_int_eq(prepare("close_issue", p, STANDING_EXACT, 3601, 0, 0, &r, why), CS_EINVAL);
	ck_assert_int_eq(prepare("close_issue", p, STANDING_EXACT, 3600, 0, 0, &r, why), CS_OK);
	standing_rule_clear(&r);
	ck_assert_int_eq(prepare("list_issues", p, STANDING_EXACT, 900, 0, 0, &r, why), CS_EINVAL);
	ck_assert_int_eq(prepare("unknown", p, STANDING_EXACT, 900, 0, 0, &r, why), CS_EINVAL);
	ck_assert_int_eq(prepare("create_issue", p, STANDING_NONE, 900, 0, 0, &r, why), CS_EINVAL);
	/* A match rule with no never-open parameter must fix at least one. */
	actions[0].nstanding_fixed = 0;
	actions[0].standing_fixed = NULL;
	ck_assert_int_eq(prepare("create_issue", p, STANDING_MATCH, 900, 0, 0, &r, why), CS_EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "at least one"));
	ck_assert_int_eq(prepare("create_issue", p, STANDING_MATCH, 900, 0, 4u, &r, why), CS_OK);
	ck_assert_str_eq(r.fixed, "title");
	standing_rule_clear(&r);
}
END_TEST

/* --- the store, both engines ------------------------------------------- */

/* Runs sql on the fixture's database behind consentd's back (hostile data). */
static void raw_exec(const struct tu_store *f, const char *sql)
{
	if (tu_pg_url != NULL) {
		tu_pg_exec(tu_pg_url, sql);
		return;
	}
	sqlite3 *h = NULL;
	ck_assert_int_eq(sqlite3_open(f->db, &h), SQLITE_OK);
	sqlite3_busy_timeout(h, 5000);
	ck_assert_int_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
}

static void consent_row(struct store_conn *c, const char *id, int64_t uid, const char *agent)
{
	ck_assert_int_eq(store_consent_insert(c, &(struct store_consent_row){ .id = (char *)id,
	    .user_id = uid, .agent = (char *)agent, .resource = (char *)"tracker",
	    .granted = (char *)"issues", .declined = (char *)"", .created_at = T0,
	    .expires_at = T0 + 86400 }), CS_OK);
}

/* A fresh store (tu_store.h) with alice's consents to coder and butler and
 * bob's to coder. */
static void fx_init(struct tu_store *f)
{
	audit_set_key((const unsigned char[32]){ 0 }, "test");
	config_init();
	tu_store_init(f, T0);
	consent_row(f->c, "k-alice-coder", f->alice, "coder");
	consent_row(f->c, "k-alice-butler", f->alice, "butler");
	consent_row(f->c, "k-bob-coder", f->bob, "coder");
}

/* A rule of consent kid (the person's approval ap-<n>) stored as the page does, at at. */
static void make_rule_at(struct tu_store *f, const char *kid, const char *action,
    const char *params, enum config_standing kind, int64_t uses, uint64_t bits, int64_t at,
    char id[CONSENT_ID_LEN + 1])
{
	struct consent k;
	struct standing_rule r;
	char why[200];
	memset(&k, 0, sizeof k);
	ck_assert_int_eq(consent_get(f->c, kid, T0, &k), CS_OK);
	struct approval a = approval_of(action, params);
	a.consent_id = k.id;
	a.user_id = k.user_id;
	a.agent = k.agent;
	ck_assert_int_eq(standing_prepare(&cfg, &call_of(&a), &(struct standing_request){ .kind = kind,
	    .duration = 3600, .max_uses = uses, .fixed = bits }, at, &r, why, sizeof why), CS_OK);
	ck_assert_int_eq(store_begin(f->c), CS_OK);
	ck_assert_int_eq(standing_insert(f->c, &r, "user:alice", at), CS_OK);
	ck_assert_int_eq(store_commit(f->c), CS_OK);
	memcpy(id, r.id, CONSENT_ID_LEN + 1);
	standing_rule_clear(&r);
	free(a.strings);
	consent_clear(&k);
}

/* make_rule_at at T0. */
static void make_rule(struct tu_store *f, const char *kid, const char *action, const char *params,
    enum config_standing kind, int64_t uses, uint64_t bits, char id[CONSENT_ID_LEN + 1])
{
	make_rule_at(f, kid, action, params, kind, uses, bits, T0, id);
}

/* approval_check of a call: its outcome, and the rule that decided it ("" none). */
static enum approval_outcome check(struct tu_store *f, const char *kid, const char *action,
    const char *params, int64_t now, char rule[CONSENT_ID_LEN + 1])
{
	struct consent k;
	struct approval_answer an;
	struct buf b;
	char d[APPROVAL_DIGEST_LEN + 1];
	json_t *p = js(params);
	memset(&k, 0, sizeof k);
	memset(&an, 0, sizeof an);
	buf_init(&b, 1 << 16);
	ck_assert_int_eq(jcs_canonicalize(p, &b), CS_OK);
	ck_assert_int_eq(approval_digest(p, d), CS_OK);
	ck_assert_int_eq(consent_get(f->c, kid, now, &k), CS_OK);
	ck_assert_int_eq(approval_check(f->c, &cfg, &(struct approval_ask){ .k = &k,
	    .action = action, .parameters = b.data, .digest = d, .actor = ACTOR, .now = now },
	    &an), CS_OK);
	enum approval_outcome o = an.outcome;
	rule[0] = '\0';
	if (an.rule_id != NULL) {
		ck_assert_int_eq(o, APPROVAL_RELEASE);
		ck_assert_ptr_null(an.approval_id);
		char want[64];
		ck_assert_int_eq(str_fmt(want, sizeof want, "rule %s", an.rule_id), CS_OK);
		ck_assert_str_eq(an.decided_by, want);
		ck_assert_int_eq(str_fmt(rule, CONSENT_ID_LEN + 1, "%s", an.rule_id), CS_OK);
	}
	approval_answer_clear(&an);
	consent_clear(&k);
	buf_clear(&b);
	json_decref(p);
	return o;
}

/* standing_use in its own transaction, as the release's. */
static enum approval_redeem_outcome use(struct tu_store *f, const char *rule, const char *kid,
    const char *action, int64_t now)
{
	struct consent k;
	bool counted = false;
	memset(&k, 0, sizeof k);
	ck_assert_int_eq(consent_get(f->c, kid, now, &k), CS_OK);
	ck_assert_int_eq(store_begin(f->c), CS_OK);
	ck_assert_int_eq(standing_use(f->c, rule, &k, action, ACTOR, now, &counted), CS_OK);
	enum approval_redeem_outcome o = counted ? APPROVAL_REDEEMED : APPROVAL_NOT_REDEEMABLE;
	ck_assert_int_eq(store_commit(f->c), CS_OK);
	consent_clear(&k);
	return o;
}

#define REPO_W "{\"repo\":\"acme/w\",\"title\":\"first\"}"

START_TEST(test_store_standing_match_covers_only_its_calls)
{
	struct tu_store f;
	char id[CONSENT_ID_LEN + 1], got[CONSENT_ID_LEN + 1];
	fx_init(&f);
	make_rule(&f, "k-alice-coder", "create_issue", REPO_W, STANDING_MATCH, 0, 0, id);
	/* Its call, and others with repo fixed and the rest free. */
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue", REPO_W, T0 + 1, got), APPROVAL_RELEASE);
	ck_assert_str_eq(got, id);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"repo\":\"acme/w\",\"title\":\"second\",\"body\":\"b\"}", T0 + 2, got), APPROVAL_RELEASE);
	ck_assert_str_eq(got, id);
	/* Another value of the fixed parameter, a call without it: the person is asked. */
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"repo\":\"acme/evil\",\"title\":\"first\"}", T0 + 3, got), APPROVAL_NEEDED);
	ck_assert_str_eq(got, "");
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue", "{\"title\":\"first\"}",
	    T0 + 4, got), APPROVAL_NEEDED);
	/* Another action, another agent's consent, another person's. */
	ck_assert_int_eq(check(&f, "k-alice-coder", "close_issue", REPO_W, T0 + 5, got), APPROVAL_NEEDED);
	ck_assert_int_eq(check(&f, "k-alice-butler", "create_issue", REPO_W, T0 + 6, got), APPROVAL_NEEDED);
	ck_assert_int_eq(check(&f, "k-bob-coder", "create_issue", REPO_W, T0 + 7, got), APPROVAL_NEEDED);
	/* Expired. */
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"repo\":\"acme/w\",\"title\":\"later\"}", T0 + 3600, got), APPROVAL_NEEDED);
	/* The configuration stops offering match rules: the match rule no longer holds. */
	actions[0].standing = STANDING_EXACT;
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"repo\":\"acme/w\",\"title\":\"third\"}", T0 + 8, got), APPROVAL_NEEDED);
	tu_store_clear(&f);
}
END_TEST

START_TEST(test_store_standing_exact_and_uses)
{
	struct tu_store f;
	char id[CONSENT_ID_LEN + 1], got[CONSENT_ID_LEN + 1];
	fx_init(&f);
	make_rule(&f, "k-alice-coder", "close_issue", "{\"n\":7}", STANDING_EXACT, 2, 0, id);
	ck_assert_int_eq(check(&f, "k-alice-coder", "close_issue", "{\"n\":7}", T0 + 1, got), APPROVAL_RELEASE);
	ck_assert_str_eq(got, id);
	ck_assert_int_eq(check(&f, "k-alice-coder", "close_issue", "{\"n\":8}", T0 + 1, got), APPROVAL_NEEDED);
	/* Counted in the release's transaction; the third use is refused and audited. */
	ck_assert_int_eq(use(&f, id, "k-alice-coder", "close_issue", T0 + 2), APPROVAL_REDEEMED);
	ck_assert_int_eq(use(&f, id, "k-alice-coder", "close_issue", T0 + 3), APPROVAL_REDEEMED);
	ck_assert_int_eq(use(&f, id, "k-alice-coder", "close_issue", T0 + 4), APPROVAL_NOT_REDEEMABLE);
	ck_assert_int_eq(check(&f, "k-alice-coder", "close_issue", "{\"n\":7}", T0 + 5, got), APPROVAL_NEEDED);
	/* Not for another action or consent, even by its id. */
	struct store_standing_row r;
	memset(&r, 0, sizeof r);
	ck_assert_int_eq(store_standing_get(f.c, id, &r), CS_OK);
	ck_assert_int_eq(r.uses, 2);
	store_standing_row_clear(&r);
	char id2[CONSENT_ID_LEN + 1];
	make_rule(&f, "k-alice-coder", "close_issue", "{\"n\":9}", STANDING_EXACT, 0, 0, id2);
	ck_assert_int_eq(use(&f, id2, "k-alice-coder", "create_issue", T0 + 6), APPROVAL_NOT_REDEEMABLE);
	ck_assert_int_eq(use(&f, id2, "k-alice-butler", "close_issue", T0 + 6), APPROVAL_NOT_REDEEMABLE);
	ck_assert_int_eq(use(&f, id2, "k-alice-coder", "close_issue", T0 + 3600), APPROVAL_NOT_REDEEMABLE);
	ck_assert_int_eq(use(&f, id2, "k-alice-coder", "close_issue", T0 + 6), APPROVAL_REDEEMED);
	tu_store_clear(&f);
}
END_TEST

START_TEST(test_store_standing_end_and_revocation)
{
	struct tu_store f;
	char id[CONSENT_ID_LEN + 1], id2[CONSENT_ID_LEN + 1], got[CONSENT_ID_LEN + 1];
	enum standing_end_outcome o;
	json_t *list = NULL;
	fx_init(&f);
	make_rule(&f, "k-alice-coder", "create_issue", REPO_W, STANDING_MATCH, 0, 0, id);
	make_rule(&f, "k-alice-coder", "close_issue", "{\"n\":1}", STANDING_EXACT, 0, 0, id2);
	ck_assert_int_eq(standing_list(f.c, f.alice, T0 + 1, &list), CS_OK);
	ck_assert_uint_eq(json_array_size(list), 2);
	json_decref(list);
	ck_assert_int_eq(standing_list(f.c, f.bob, T0 + 1, &list), CS_OK);
	ck_assert_uint_eq(json_array_size(list), 0);
	json_decref(list);
	/* Bob cannot end Alice's rule; Alice can, once. */
	ck_assert_int_eq(standing_end(f.c, id, f.bob, "user:bob", T0 + 2, &o), CS_OK);
	ck_assert_int_eq(o, STANDING_NOT_YOURS);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue", REPO_W, T0 + 3, got), APPROVAL_RELEASE);
	ck_assert_int_eq(standing_end(f.c, id, f.alice, "user:alice", T0 + 4, &o), CS_OK);
	ck_assert_int_eq(o, STANDING_ENDED);
	ck_assert_int_eq(standing_end(f.c, id, f.alice, "user:alice", T0 + 5, &o), CS_OK);
	ck_assert_int_eq(o, STANDING_ALREADY_ENDED);
	ck_assert_int_eq(standing_end(f.c, "no-such-rule", 0, "admin:x", T0 + 5, &o), CS_ENOENT);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"repo\":\"acme/w\",\"title\":\"n\"}", T0 + 6, got), APPROVAL_NEEDED);
	ck_assert_int_eq(use(&f, id, "k-alice-coder", "create_issue", T0 + 6), APPROVAL_NOT_REDEEMABLE);
	/* Revoking the consent ends its rules, at once. */
	ck_assert_int_eq(check(&f, "k-alice-coder", "close_issue", "{\"n\":1}", T0 + 7, got), APPROVAL_RELEASE);
	ck_assert_int_eq(tu_revoke(f.c, "k-alice-coder", f.alice, "user:alice", "done", T0 + 8,
	    false), CS_OK);
	ck_assert_int_eq(use(&f, id2, "k-alice-coder", "close_issue", T0 + 9), APPROVAL_NOT_REDEEMABLE);
	ck_assert_int_eq(standing_list(f.c, f.alice, T0 + 9, &list), CS_OK);
	ck_assert_uint_eq(json_array_size(list), 0);
	json_decref(list);
	struct store_standing_row r;
	memset(&r, 0, sizeof r);
	ck_assert_int_eq(store_standing_get(f.c, id2, &r), CS_OK);
	ck_assert_int_eq(r.ended_at, T0 + 8);
	ck_assert_str_eq(r.ended_by, "revoked with its consent");
	store_standing_row_clear(&r);
	tu_store_clear(&f);
}
END_TEST

/* The admin's consent page: every rule of one consent, ended, used-up and
 * expired ones too, each saying whether it still holds; one rule by id. */
START_TEST(test_store_standing_list_consent)
{
	struct tu_store f;
	char live[CONSENT_ID_LEN + 1], ended[CONSENT_ID_LEN + 1], used[CONSENT_ID_LEN + 1];
	char other[CONSENT_ID_LEN + 1];
	enum standing_end_outcome o;
	json_t *list = NULL, *r = NULL, *x;
	size_t i;
	fx_init(&f);
	make_rule(&f, "k-alice-coder", "create_issue", REPO_W, STANDING_MATCH, 0, 0, live);
	make_rule(&f, "k-alice-coder", "close_issue", "{\"n\":1}", STANDING_EXACT, 0, 0, ended);
	make_rule(&f, "k-alice-coder", "close_issue", "{\"n\":2}", STANDING_EXACT, 1, 0, used);
	make_rule(&f, "k-alice-butler", "create_issue", REPO_W, STANDING_MATCH, 0, 0, other);
	ck_assert_int_eq(standing_end(f.c, ended, 0, "admin:root", T0 + 2, &o), CS_OK);
	ck_assert_int_eq(o, STANDING_ENDED);
	ck_assert_int_eq(use(&f, used, "k-alice-coder", "close_issue", T0 + 3), APPROVAL_REDEEMED);

	ck_assert_int_eq(standing_list_consent(f.c, "k-alice-coder", T0 + 4, &list), CS_OK);
	ck_assert_uint_eq(json_array_size(list), 3);
	json_array_foreach(list, i, x) {
		const char *id = json_string_value(json_object_get(x, "id"));
		ck_assert_str_eq(json_string_value(json_object_get(x, "consent_id")), "k-alice-coder");
		ck_assert_str_eq(json_string_value(json_object_get(x, "subject")), "alice");
		ck_assert_str_eq(json_string_value(json_object_get(x, "created_by")), "user:alice");
		ck_assert_str_ne(id, other);
		if (strcmp(id, live) == 0) {
			ck_assert(json_is_true(json_object_get(x, "live")));
			ck_assert_int_eq(json_integer_value(json_object_get(x, "ended_at")), 0);
			ck_assert(json_is_null(json_object_get(x, "ended_by")));
			ck_assert_str_eq(json_string_value(json_object_get(json_object_get(x, "fixed"),
			    "repo")), "acme/w");
		} else if (strcmp(id, ended) == 0) {
			ck_assert(json_is_false(json_object_get(x, "live")));
			ck_assert_int_eq(json_integer_value(json_object_get(x, "ended_at")), T0 + 2);
			ck_assert_str_eq(json_string_value(json_object_get(x, "ended_by")), "admin:root");
		} else {
			ck_assert_str_eq(id, used);
			ck_assert(json_is_false(json_object_get(x, "live")));
			ck_assert(json_is_true(json_object_get(x, "used_up")));
			ck_assert_int_eq(json_integer_value(json_object_get(x, "ended_at")), 0);
		}
	}
	json_decref(list);
	/* Expired: listed, no longer live. */
	ck_assert_int_eq(standing_list_consent(f.c, "k-alice-coder", T0 + 3600, &list), CS_OK);
	ck_assert_uint_eq(json_array_size(list), 3);
	json_array_foreach(list, i, x)
		ck_assert(json_is_false(json_object_get(x, "live")));
	json_decref(list);
	/* Another consent's list holds its own rule only; an unknown one's is empty. */
	ck_assert_int_eq(standing_list_consent(f.c, "k-alice-butler", T0 + 4, &list), CS_OK);
	ck_assert_uint_eq(json_array_size(list), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "id")), other);
	json_decref(list);
	ck_assert_int_eq(standing_list_consent(f.c, "no-such-consent", T0 + 4, &list), CS_OK);
	ck_assert_uint_eq(json_array_size(list), 0);
	json_decref(list);
	/* The person's list (and the admin API's) keeps its shape: rules not ended
	 * (the used-up one, and the butler consent's), no ended_at or live. */
	ck_assert_int_eq(standing_list(f.c, f.alice, T0 + 4, &list), CS_OK);
	ck_assert_uint_eq(json_array_size(list), 3);
	ck_assert_ptr_null(json_object_get(json_array_get(list, 0), "ended_at"));
	ck_assert_ptr_null(json_object_get(json_array_get(list, 0), "live"));
	json_decref(list);
	/* One rule by id. */
	ck_assert_int_eq(standing_show(f.c, ended, T0 + 4, &r), CS_OK);
	ck_assert_str_eq(json_string_value(json_object_get(r, "consent_id")), "k-alice-coder");
	ck_assert(json_is_false(json_object_get(r, "live")));
	json_decref(r);
	r = NULL;
	ck_assert_int_eq(standing_show(f.c, "no-such-rule", T0 + 4, &r), CS_ENOENT);
	ck_assert_ptr_null(r);
	tu_store_clear(&f);
}
END_TEST

/* Rows changed behind consentd's back: the indexed columns only find
 * candidates; the details decide, and fail closed. */
START_TEST(test_store_standing_hostile_rows)
{
	struct tu_store f;
	char id[CONSENT_ID_LEN + 1], got[CONSENT_ID_LEN + 1], sql[600];
	fx_init(&f);
	make_rule(&f, "k-alice-coder", "create_issue", REPO_W, STANDING_MATCH, 0, 0, id);
	/* The lookup of another repo's calls written into the row: the details still
	 * say acme/w, so acme/evil's call is not covered. */
	char evil[APPROVAL_DIGEST_LEN + 1];
	json_t *p = js("{\"repo\":\"acme/evil\"}");
	ck_assert_int_eq(standing_lookup_of(p, "[\"repo\"]", evil), CS_OK);
	json_decref(p);
	ck_assert_int_eq(str_fmt(sql, sizeof sql, "UPDATE standing_rules SET lookup = '%s' "
	    "WHERE id = '%s'", evil, id), CS_OK);
	raw_exec(&f, sql);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"repo\":\"acme/evil\",\"title\":\"x\"}", T0 + 1, got), APPROVAL_NEEDED);
	/* A match object emptied (it would allow every call), with the lookup right. */
	ck_assert_int_eq(str_fmt(sql, sizeof sql, "UPDATE standing_rules SET details = "
	    "'{\"actions\":[\"create_issue\"],\"match\":{},\"type\":\"agent_action\"}' "
	    "WHERE id = '%s'", id), CS_OK);
	raw_exec(&f, sql);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"repo\":\"acme/evil\",\"title\":\"y\"}", T0 + 2, got), APPROVAL_NEEDED);
	/* Details that are not JSON; a rule moved to another agent's consent whose
	 * agent column still names coder. */
	ck_assert_int_eq(str_fmt(sql, sizeof sql, "UPDATE standing_rules SET details = '{' "
	    "WHERE id = '%s'", id), CS_OK);
	raw_exec(&f, sql);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue", REPO_W, T0 + 3, got), APPROVAL_NEEDED);
	char id2[CONSENT_ID_LEN + 1];
	make_rule(&f, "k-alice-coder", "create_issue", "{\"repo\":\"acme/x\"}", STANDING_MATCH, 0, 0, id2);
	ck_assert_int_eq(str_fmt(sql, sizeof sql, "UPDATE standing_rules SET consent_id = "
	    "'k-alice-butler' WHERE id = '%s'", id2), CS_OK);
	raw_exec(&f, sql);
	ck_assert_int_eq(check(&f, "k-alice-butler", "create_issue", "{\"repo\":\"acme/x\"}", T0 + 4,
	    got), APPROVAL_NEEDED);
	/* A keyset that is not an array of names. */
	ck_assert_int_eq(str_fmt(sql, sizeof sql, "UPDATE standing_rules SET consent_id = "
	    "'k-alice-coder', keyset = '[]' WHERE id = '%s'", id2), CS_OK);
	raw_exec(&f, sql);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue", "{\"repo\":\"acme/x\"}", T0 + 5,
	    got), APPROVAL_NEEDED);
	tu_store_clear(&f);
}
END_TEST

/* The key sets of a consent's match rules, as the check reads them: none, one
 * (the smallest and largest are the same), several (in order, at most max);
 * an ended rule's key set is not among them. */
START_TEST(test_store_standing_keysets)
{
	struct tu_store f;
	char a[CONSENT_ID_LEN + 1], b[CONSENT_ID_LEN + 1], d[CONSENT_ID_LEN + 1];
	char **ks = NULL;
	size_t n = 99;
	enum standing_end_outcome o;
	fx_init(&f);
	ck_assert_int_eq(store_standing_keysets(f.c, "k-alice-coder", "create_issue", 16, &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 0);
	free(ks);
	make_rule(&f, "k-alice-coder", "create_issue", "{\"repo\":\"acme/c\"}", STANDING_MATCH, 0, 0, a);
	make_rule(&f, "k-alice-coder", "create_issue", "{\"repo\":\"acme/d\"}", STANDING_MATCH, 0, 0, d);
	ck_assert_int_eq(store_standing_keysets(f.c, "k-alice-coder", "create_issue", 16, &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(ks[0], "[\"repo\"]");
	free(ks[0]);
	free(ks);
	make_rule(&f, "k-alice-coder", "create_issue", "{\"body\":\"x\",\"repo\":\"acme/a\"}",
	    STANDING_MATCH, 0, 1, b);
	make_rule(&f, "k-alice-coder", "create_issue", "{\"repo\":\"acme/b\",\"title\":\"t\"}",
	    STANDING_MATCH, 0, 2, b);
	ck_assert_int_eq(store_standing_keysets(f.c, "k-alice-coder", "create_issue", 16, &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(ks[0], "[\"body\",\"repo\"]");
	ck_assert_str_eq(ks[1], "[\"repo\",\"title\"]");
	ck_assert_str_eq(ks[2], "[\"repo\"]");
	for (size_t i = 0; i < n; i++)
		free(ks[i]);
	free(ks);
	ck_assert_int_eq(store_standing_keysets(f.c, "k-alice-coder", "create_issue", 2, &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(ks[1], "[\"repo\",\"title\"]");
	for (size_t i = 0; i < n; i++)
		free(ks[i]);
	free(ks);
	/* Ended: its key set goes; another consent's or action's are not these. */
	ck_assert_int_eq(standing_end(f.c, b, f.alice, "user:alice", T0 + 1, &o), CS_OK);
	ck_assert_int_eq(o, STANDING_ENDED);
	ck_assert_int_eq(store_standing_keysets(f.c, "k-alice-coder", "create_issue", 16, &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(ks[0], "[\"body\",\"repo\"]");
	ck_assert_str_eq(ks[1], "[\"repo\"]");
	for (size_t i = 0; i < n; i++)
		free(ks[i]);
	free(ks);
	ck_assert_int_eq(store_standing_keysets(f.c, "k-alice-butler", "create_issue", 16, &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 0);
	free(ks);
	ck_assert_int_eq(store_standing_keysets(f.c, "k-alice-coder", "close_issue", 16, &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 0);
	free(ks);
	tu_store_clear(&f);
}
END_TEST

/* Match rules of several key sets: a call is judged against each key set it
 * has every value of -- the first read with the exact rules, the others after
 * -- and a rule of any of them, first or last, lets it through. */
START_TEST(test_store_standing_several_keysets)
{
	struct tu_store f;
	char a[CONSENT_ID_LEN + 1], b[CONSENT_ID_LEN + 1], c[CONSENT_ID_LEN + 1];
	char got[CONSENT_ID_LEN + 1];
	enum standing_end_outcome o;
	fx_init(&f);
	/* Key sets ["body","repo"] (a), ["repo","title"] (b), ["repo"] (c), in that order. */
	make_rule(&f, "k-alice-coder", "create_issue", "{\"body\":\"x\",\"repo\":\"acme/a\"}",
	    STANDING_MATCH, 0, 1, a);
	make_rule(&f, "k-alice-coder", "create_issue", "{\"repo\":\"acme/b\",\"title\":\"t\"}",
	    STANDING_MATCH, 0, 2, b);
	make_rule(&f, "k-alice-coder", "create_issue", "{\"repo\":\"acme/c\"}", STANDING_MATCH, 0, 0, c);
	/* The first key set's rule. */
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"body\":\"x\",\"repo\":\"acme/a\",\"title\":\"any\"}", T0 + 1, got), APPROVAL_RELEASE);
	ck_assert_str_eq(got, a);
	/* The call lacks the first key set's body: the second's, the third's. */
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"n\":1,\"repo\":\"acme/b\",\"title\":\"t\"}", T0 + 2, got), APPROVAL_RELEASE);
	ck_assert_str_eq(got, b);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"repo\":\"acme/c\",\"title\":\"other\"}", T0 + 3, got), APPROVAL_RELEASE);
	ck_assert_str_eq(got, c);
	/* It has the first key set's values, which no rule fixes: the later ones. */
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"body\":\"y\",\"repo\":\"acme/b\",\"title\":\"t\"}", T0 + 4, got), APPROVAL_RELEASE);
	ck_assert_str_eq(got, b);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"body\":\"y\",\"repo\":\"acme/c\"}", T0 + 5, got), APPROVAL_RELEASE);
	ck_assert_str_eq(got, c);
	/* None covers it. */
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"body\":\"x\",\"repo\":\"acme/d\",\"title\":\"t\"}", T0 + 6, got), APPROVAL_NEEDED);
	/* Ended, the others still hold; the last one left alone still holds. */
	ck_assert_int_eq(standing_end(f.c, b, f.alice, "user:alice", T0 + 7, &o), CS_OK);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"repo\":\"acme/b\",\"title\":\"t\",\"n\":2}", T0 + 8, got), APPROVAL_NEEDED);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"repo\":\"acme/c\",\"n\":3}", T0 + 9, got), APPROVAL_RELEASE);
	ck_assert_str_eq(got, c);
	ck_assert_int_eq(standing_end(f.c, a, f.alice, "user:alice", T0 + 10, &o), CS_OK);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"body\":\"x\",\"repo\":\"acme/a\",\"n\":4}", T0 + 11, got), APPROVAL_NEEDED);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"repo\":\"acme/c\",\"n\":5}", T0 + 12, got), APPROVAL_RELEASE);
	ck_assert_str_eq(got, c);
	/* Expired, all of them. */
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"repo\":\"acme/c\",\"n\":6}", T0 + 3600, got), APPROVAL_NEEDED);
	tu_store_clear(&f);
}
END_TEST

/* An exact rule and a match rule that both cover a call: the exact rule
 * decides (it is read in the same statement as the match rules). */
START_TEST(test_store_standing_exact_before_match)
{
	struct tu_store f;
	char m[CONSENT_ID_LEN + 1], x[CONSENT_ID_LEN + 1], got[CONSENT_ID_LEN + 1];
	struct consent k;
	char d[APPROVAL_DIGEST_LEN + 1], *rule = NULL;
	fx_init(&f);
	make_rule(&f, "k-alice-coder", "create_issue", REPO_W, STANDING_MATCH, 0, 0, m);
	make_rule(&f, "k-alice-coder", "create_issue", REPO_W, STANDING_EXACT, 0, 0, x);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue", REPO_W, T0 + 1, got), APPROVAL_RELEASE);
	ck_assert_str_eq(got, x);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"repo\":\"acme/w\",\"title\":\"second\"}", T0 + 2, got), APPROVAL_RELEASE);
	ck_assert_str_eq(got, m);
	/* Parameters that are not JSON: an exact rule of their digest still
	 * covers them; without one the check fails (as before any rule is read). */
	memset(&k, 0, sizeof k);
	ck_assert_int_eq(consent_get(f.c, "k-alice-coder", T0 + 3, &k), CS_OK);
	digest_of(REPO_W, d);
	ck_assert_int_eq(store_begin(f.c), CS_OK);
	ck_assert_int_eq(standing_check(f.c, &cfg, &k, "create_issue", "{not json", d, T0 + 3,
	    &rule), CS_OK);
	ck_assert_str_eq(rule, x);
	free(rule);
	rule = NULL;
	digest_of("{\"repo\":\"acme/w\",\"title\":\"third\"}", d);
	ck_assert_int_eq(standing_check(f.c, &cfg, &k, "create_issue", "{not json", d, T0 + 3,
	    &rule), CS_EINVAL);
	ck_assert_ptr_null(rule);
	store_rollback(f.c);
	/* Exact rules only, now: the exact rule holds, the match rule does not. */
	actions[0].standing = STANDING_EXACT;
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue", REPO_W, T0 + 4, got), APPROVAL_RELEASE);
	ck_assert_str_eq(got, x);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"repo\":\"acme/w\",\"title\":\"fourth\"}", T0 + 5, got), APPROVAL_NEEDED);
	consent_clear(&k);
	tu_store_clear(&f);
}
END_TEST

/* Several live rules of one lookup that all cover a call: the newest decides,
 * exact and match alike. */
START_TEST(test_store_standing_newest_first)
{
	struct tu_store f;
	char old1[CONSENT_ID_LEN + 1], new1[CONSENT_ID_LEN + 1], got[CONSENT_ID_LEN + 1];
	char old2[CONSENT_ID_LEN + 1], new2[CONSENT_ID_LEN + 1];
	fx_init(&f);
	make_rule_at(&f, "k-alice-coder", "create_issue", REPO_W, STANDING_MATCH, 0, 0, T0, old1);
	make_rule_at(&f, "k-alice-coder", "create_issue", REPO_W, STANDING_MATCH, 0, 0, T0 + 10, new1);
	make_rule_at(&f, "k-alice-coder", "close_issue", "{\"n\":3}", STANDING_EXACT, 0, 0, T0, old2);
	make_rule_at(&f, "k-alice-coder", "close_issue", "{\"n\":3}", STANDING_EXACT, 0, 0, T0 + 10, new2);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"repo\":\"acme/w\",\"title\":\"other\"}", T0 + 11, got), APPROVAL_RELEASE);
	ck_assert_str_eq(got, new1);
	ck_assert_int_eq(check(&f, "k-alice-coder", "close_issue", "{\"n\":3}", T0 + 11, got),
	    APPROVAL_RELEASE);
	ck_assert_str_eq(got, new2);
	/* The newest ended: the older one. */
	ck_assert_int_eq(standing_end(f.c, new1, f.alice, "user:alice", T0 + 12,
	    &(enum standing_end_outcome){ 0 }), CS_OK);
	ck_assert_int_eq(check(&f, "k-alice-coder", "create_issue",
	    "{\"repo\":\"acme/w\",\"title\":\"more\"}", T0 + 13, got), APPROVAL_RELEASE);
	ck_assert_str_eq(got, old1);
	tu_store_clear(&f);
}
END_TEST

static Suite *standing_suite(void)
{
	Suite *s = suite_create(tu_pg_url != NULL ? "store_standing (postgresql)" :
	    "store_standing (sqlite)");
	TCase *tc = tcase_create("match");
	tcase_add_test(tc, test_standing_covers_exact);
	tcase_add_test(tc, test_standing_covers_match);
	tcase_add_test(tc, test_standing_covers_hostile);
	tcase_add_test(tc, test_standing_lookup_of);
	tcase_add_test(tc, test_standing_prepare);
	suite_add_tcase(s, tc);
	tc = tcase_create("store");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_store_standing_match_covers_only_its_calls);
	tcase_add_test(tc, test_store_standing_exact_and_uses);
	tcase_add_test(tc, test_store_standing_end_and_revocation);
	tcase_add_test(tc, test_store_standing_list_consent);
	tcase_add_test(tc, test_store_standing_hostile_rows);
	tcase_add_test(tc, test_store_standing_keysets);
	tcase_add_test(tc, test_store_standing_several_keysets);
	tcase_add_test(tc, test_store_standing_exact_before_match);
	tcase_add_test(tc, test_store_standing_newest_first);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_store_run(standing_suite);
}
