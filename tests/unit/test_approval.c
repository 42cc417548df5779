/* test_approval.c -- per-action approval (flow F): RFC 8785 canonicalization
 * against the RFC's own examples, the parameters' digest, I-JSON and shape
 * refusals of authorization_details, and the approval state machine (polling,
 * decision, single-use redemption, expiry, cap, the consent cascade) against a
 * real SQLite file built from migrations/, with explicit clocks.  Named for
 * approval.c; it also covers jcs.c (the canonicalization) and approval_api.c. */
#include <stdint.h>
#include <string.h>
#include <sqlite3.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "testutil.h"
#include "tu_consent.h"
#include "approval.h"
#include "jcs.h"
#include "approval_api.h"
#include "http.h"
#include "audit.h"
#include "consent.h"
#include "store.h"
#include "../../server/store_priv.h"   /* store_writer_stats */

#define T0 1700000000
#define ISS "https://idp.test"
#define ACTOR "gateway:agent-gateway"
#define ACTION "create_issue"

static char *dir;
static struct store *st;
static struct store_conn *sc;
static sqlite3 *raw;                   /* a second connection, for looking */
static struct config cfg;

static char *allow_coder[] = { "notes:read", "notes:write", NULL };
static struct config_agent agents[1];
static struct config_resource resources[1];
static struct config_scope scopes[2];

static void setup(void)
{
	audit_set_key((const unsigned char[32]){ 0 }, "test");   /* the audit chain's key */
	dir = tu_tmpdir();
	char *db = tu_path(dir, "t.db");
	ck_assert_int_eq(store_open(db, &st), CS_OK);
	sc = store_conn(st);
	ck_assert_ptr_nonnull(sc);
	ck_assert_int_eq(sqlite3_open(db, &raw), SQLITE_OK);
	sqlite3_busy_timeout(raw, 5000);
	free(db);

	memset(&cfg, 0, sizeof cfg);
	memset(agents, 0, sizeof agents);
	memset(resources, 0, sizeof resources);
	memset(scopes, 0, sizeof scopes);
	agents[0].id = "coder";
	agents[0].name = "Coding assistant";
	agents[0].allow = allow_coder;
	agents[0].nallow = 2;
	resources[0].id = "notes";
	resources[0].name = "Team notes";
	resources[0].uri = "urn:consentd:resource:notes";
	resources[0].max_consent = 86400;
	scopes[0].resource = "notes";
	scopes[0].name = "read";
	scopes[1].resource = "notes";
	scopes[1].name = "write";
	cfg.agents = agents;
	cfg.nagents = 1;
	cfg.resources = resources;
	cfg.nresources = 1;
	cfg.scopes = scopes;
	cfg.nscopes = 2;
	cfg.gateway_id = "agent-gateway";
	cfg.consent_request_ttl = 600;
	cfg.consent_interval = 5;
	cfg.consent_deny_cooldown = 300;
	cfg.consent_max_pending_per_user = 5;
}

static void teardown(void)
{
	sqlite3_close(raw);
	store_close(st);
	tu_rmdir(dir);
}

/* --- helpers ----------------------------------------------------------- */

static int64_t q_int(const char *sql, const char *arg)
{
	sqlite3_stmt *s = NULL;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, sql, -1, &s, NULL), SQLITE_OK);
	if (arg != NULL)
		sqlite3_bind_text(s, 1, arg, -1, SQLITE_TRANSIENT);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
	int64_t v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

static char *q_text(const char *sql, const char *arg)
{
	sqlite3_stmt *s = NULL;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, sql, -1, &s, NULL), SQLITE_OK);
	if (arg != NULL)
		sqlite3_bind_text(s, 1, arg, -1, SQLITE_TRANSIENT);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
	const unsigned char *t = sqlite3_column_text(s, 0);
	char *v = t ? strdup((const char *)t) : NULL;
	sqlite3_finalize(s);
	return v;
}

static void ck_status(const char *id, const char *want)
{
	char *s = q_text("SELECT status FROM approvals WHERE id = ?1", id);
	ck_assert_ptr_nonnull(s);
	ck_assert_msg(strcmp(s, want) == 0, "approval %s is %s, want %s", id, s, want);
	free(s);
}

static int64_t audits(const char *action)
{
	return q_int("SELECT count(*) FROM audit WHERE action = ?1", action);
}

static int64_t user_id(const char *sub)
{
	return q_int("SELECT id FROM users WHERE subject = ?1", sub);
}

static struct scope_set set(const char *s)
{
	struct scope_set v = { .n = 0 };
	ck_assert_int_eq(scope_set_parse(s, &v), CS_OK);
	return v;
}

/* A consent of sub for coder on notes, made the way a person makes one: a
 * token exchange, then an approval.  Returns the consent id (malloc'd). */
static char *make_consent(const char *sub, const char *scopes_s, int64_t duration, int64_t now)
{
	struct consent_answer a;
	struct consent_decision d;
	struct scope_set req = set(scopes_s);
	char *kid = NULL;
	memset(&a, 0, sizeof a);
	ck_assert_int_eq(tu_exchange(sc, &cfg, ISS, sub, "coder", "notes", &req, NULL, ACTOR,
	    now, &a), CS_OK);
	ck_assert_int_eq(a.outcome, CONSENT_REQUIRED);
	memset(&d, 0, sizeof d);
	d.approve = true;
	d.selected = req;
	d.duration = duration;
	tu_decision_version(sc, a.request_id, &d);
	ck_assert_int_eq(tu_decide(sc, &cfg, a.request_id, user_id(sub), &d, "user:x", now,
	    &kid), CS_OK);
	ck_assert_ptr_nonnull(kid);
	scope_set_clear(&req);
	consent_answer_clear(&a);
	return kid;
}

static struct consent load(const char *kid, int64_t now)
{
	struct consent k;
	memset(&k, 0, sizeof k);
	ck_assert_int_eq(consent_get(sc, kid, now, &k), CS_OK);
	return k;
}

/* JCS of a JSON text (any value), as a malloc'd string. */
static char *canon_of(const char *json)
{
	json_error_t err;
	json_t *v = json_loads(json, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);
	ck_assert_msg(v != NULL, "bad test JSON %s: %s", json, err.text);
	struct buf b;
	buf_init(&b, 1 << 20);
	ck_assert_int_eq(jcs_canonicalize(v, &b), CS_OK);
	json_decref(v);
	char *s = buf_steal(&b);
	buf_clear(&b);
	return s;
}

static void ck_canon(const char *json, const char *want)
{
	char *got = canon_of(json);
	ck_assert_msg(strcmp(got, want) == 0, "JCS(%s) = [%s], want [%s]", json, got, want);
	free(got);
}

static void ck_number(uint64_t bits, const char *want)
{
	double x;
	struct buf b;
	memcpy(&x, &bits, sizeof x);
	buf_init(&b, 64);
	ck_assert_int_eq(jcs_number(x, &b), CS_OK);
	ck_assert_msg(strcmp(b.data, want) == 0, "%016llx -> [%s], want [%s]",
	    (unsigned long long)bits, b.data, want);
	buf_clear(&b);
}

/* base64url(SHA-256(s)) computed with OpenSSL's own encoder. */
static void expected_digest(const char *s, char out[APPROVAL_DIGEST_LEN + 1])
{
	unsigned char h[SHA256_DIGEST_LENGTH], b64[64];
	SHA256((const unsigned char *)s, strlen(s), h);
	int n = EVP_EncodeBlock(b64, h, sizeof h);
	ck_assert_int_eq(n, 44);
	ck_assert_int_eq(b64[43], '=');
	for (int i = 0; i < 43; i++)
		out[i] = b64[i] == '+' ? '-' : b64[i] == '/' ? '_' : (char)b64[i];
	out[43] = '\0';
}

/* authorization_details for ACTION with the given parameters JSON text. */
static char *details(const char *params)
{
	char *s = NULL;
	ck_assert_int_ge(asprintf(&s, "[{\"type\":\"agent_action\",\"action\":\"" ACTION "\","
	    "\"parameters\":%s}]", params), 0);
	return s;
}

static enum cs_err parse(const char *text, json_t **params, char *why, size_t whylen)
{
	return approval_parse_details(text, ACTION, params, why, whylen);
}

static void ck_refused(const char *text)
{
	json_t *p = NULL;
	char why[160] = "";
	ck_assert_msg(parse(text, &p, why, sizeof why) == CS_EINVAL, "accepted %.200s", text);
	ck_assert_ptr_null(p);
	ck_assert_msg(why[0] != '\0', "no reason for %.200s", text);
}

static void ck_params_refused(const char *params)
{
	char *t = details(params);
	ck_refused(t);
	free(t);
}

static void ck_params_ok(const char *params)
{
	char *t = details(params);
	json_t *p = NULL;
	char why[160] = "";
	ck_assert_msg(parse(t, &p, why, sizeof why) == CS_OK, "refused %s: %s", params, why);
	ck_assert_ptr_nonnull(p);
	json_decref(p);
	free(t);
}

/* The [limits] a call passes on (NULL: none). */
static struct rate_limits *call_limits;

/* One downstream-token call for ACTION with parameters (JSON text) on
 * consent kid at now. */
static enum approval_outcome call(const char *kid, const char *params, int64_t now,
    struct approval_answer *a)
{
	json_t *p = json_loads(params, JSON_DECODE_ANY, NULL);
	ck_assert_ptr_nonnull(p);
	struct buf b;
	char dg[APPROVAL_DIGEST_LEN + 1];
	buf_init(&b, APPROVAL_MAX_CANONICAL);
	ck_assert_int_eq(jcs_canonicalize(p, &b), CS_OK);
	ck_assert_int_eq(approval_digest(p, dg), CS_OK);
	struct consent k = load(kid, now);
	memset(a, 0, sizeof *a);
	struct approval_ask q = { .k = &k, .action = ACTION, .parameters = b.data, .digest = dg,
		.actor = ACTOR, .now = now, .limits = call_limits };
	ck_assert_int_eq(approval_check(sc, &cfg, &q, a), CS_OK);
	consent_clear(&k);
	buf_clear(&b);
	json_decref(p);
	return a->outcome;
}

/* The same, returning the outcome and (when asked) a copy of the approval id. */
static enum approval_outcome call_o(const char *kid, const char *params, int64_t now, char **id)
{
	struct approval_answer a;
	enum approval_outcome o = call(kid, params, now, &a);
	if (id != NULL)
		*id = a.approval_id ? strdup(a.approval_id) : NULL;
	approval_answer_clear(&a);
	return o;
}

static enum cs_err redeem_e(const char *id, int64_t now, enum approval_redeem_outcome *oc)
{
	ck_assert_int_eq(store_begin(sc), CS_OK);
	enum cs_err e = approval_redeem(sc, &cfg, id, ACTOR, now, oc);
	/* The refusal's audit entry is kept by committing either way. */
	ck_assert_int_eq(store_commit(sc), CS_OK);
	return e;
}

static enum approval_redeem_outcome redeem(const char *id, int64_t now)
{
	enum approval_redeem_outcome oc = APPROVAL_REDEEM__MAX;
	ck_assert_int_eq(redeem_e(id, now, &oc), CS_OK);
	return oc;
}

static enum cs_err decide_e(const char *id, int64_t uid, bool approve, int64_t now,
    enum approval_decide_outcome *oc)
{
	struct approval_decision d = { .id = id, .user_id = uid, .approve = approve,
		.actor = "user:x", .now = now };
	return approval_decide(sc, &cfg, &d, oc);
}

static enum approval_decide_outcome decide(const char *id, const char *sub, bool approve,
    int64_t now)
{
	enum approval_decide_outcome oc = APPROVAL_DECIDE__MAX;
	ck_assert_int_eq(decide_e(id, user_id(sub), approve, now, &oc), CS_OK);
	return oc;
}

/* --- RFC 8785 ---------------------------------------------------------- */

START_TEST(test_approval_jcs_rfc8785_example)
{
	/* RFC 8785 §3.2.2: the parts, then the whole. */
	ck_canon("[333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001]",
	    "[333333333.3333333,1e+30,4.5,0.002,1e-27]");
	ck_canon("\"\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\\"\\/\"",
	    "\"\xe2\x82\xac$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"");
	ck_canon("[null, true, false]", "[null,true,false]");
	ck_canon("{\n  \"numbers\": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],\n"
	    "  \"string\": \"\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\\"\\/\",\n"
	    "  \"literals\": [null, true, false]\n}",
	    "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],"
	    "\"string\":\"\xe2\x82\xac$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}");
}
END_TEST

START_TEST(test_approval_jcs_rfc8785_sorting)
{
	/* RFC 8785 §3.2.3: names sorted as UTF-16 code units -- the emoji's
	 * surrogate pair (D83D DE00) sorts before U+FB33 although its UTF-8 bytes
	 * (F0 ...) sort after EF AC B3. */
	ck_canon("{\"\\u20ac\": \"Euro Sign\", \"\\r\": \"Carriage Return\", "
	    "\"\\ufb33\": \"Hebrew Letter Dalet With Dagesh\", \"1\": \"One\", "
	    "\"\\ud83d\\ude00\": \"Emoji: Grinning Face\", \"\\u0080\": \"Control\", "
	    "\"\\u00f6\": \"Latin Small Letter O With Diaeresis\"}",
	    "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\xc2\x80\":\"Control\","
	    "\"\xc3\xb6\":\"Latin Small Letter O With Diaeresis\",\"\xe2\x82\xac\":\"Euro Sign\","
	    "\"\xf0\x9f\x98\x80\":\"Emoji: Grinning Face\","
	    "\"\xef\xac\xb3\":\"Hebrew Letter Dalet With Dagesh\"}");
	/* Prefixes first; nested objects sorted too; arrays keep their order. */
	ck_canon("{\"ab\":1,\"a\":2,\"\":3,\"b\":{\"z\":[3,1,2],\"y\":{}}}",
	    "{\"\":3,\"a\":2,\"ab\":1,\"b\":{\"y\":{},\"z\":[3,1,2]}}");
	ck_canon("{\"\\uffff\":1,\"\\ud800\\udc00\":2,\"\\ue000\":3}",
	    "{\"\xf0\x90\x80\x80\":2,\"\xee\x80\x80\":3,\"\xef\xbf\xbf\":1}");
}
END_TEST

START_TEST(test_approval_jcs_rfc8785_numbers)
{
	/* RFC 8785 Appendix B, by IEEE 754 bit pattern. */
	ck_number(0x0000000000000000ull, "0");
	ck_number(0x8000000000000000ull, "0");
	ck_number(0x0000000000000001ull, "5e-324");
	ck_number(0x8000000000000001ull, "-5e-324");
	ck_number(0x7fefffffffffffffull, "1.7976931348623157e+308");
	ck_number(0xffefffffffffffffull, "-1.7976931348623157e+308");
	ck_number(0x4340000000000000ull, "9007199254740992");
	ck_number(0xc340000000000000ull, "-9007199254740992");
	ck_number(0x4430000000000000ull, "295147905179352830000");
	ck_number(0x44b52d02c7e14af5ull, "9.999999999999997e+22");
	ck_number(0x44b52d02c7e14af6ull, "1e+23");
	ck_number(0x44b52d02c7e14af7ull, "1.0000000000000001e+23");
	ck_number(0x444b1ae4d6e2ef4eull, "999999999999999700000");
	ck_number(0x444b1ae4d6e2ef4full, "999999999999999900000");
	ck_number(0x444b1ae4d6e2ef50ull, "1e+21");
	ck_number(0x3eb0c6f7a0b5ed8cull, "9.999999999999997e-7");
	ck_number(0x3eb0c6f7a0b5ed8dull, "0.000001");
	ck_number(0x41b3de4355555553ull, "333333333.3333332");
	ck_number(0x41b3de4355555554ull, "333333333.33333325");
	ck_number(0x41b3de4355555555ull, "333333333.3333333");
	ck_number(0x41b3de4355555556ull, "333333333.3333334");
	ck_number(0x41b3de4355555557ull, "333333333.33333343");
	ck_number(0xbecbf647612f3696ull, "-0.0000033333333333333333");
	ck_number(0x43143ff3c1cb0959ull, "1424953923781206.2");
	/* ES's notation boundaries, and values written as JSON text. */
	ck_canon("[1e21, 1e20, 1e-7, 1e-6, 0.1, -1.5, 123e-20, -0.0, -0, 1.0, 100, 2e0, 0.5e1]",
	    "[1e+21,100000000000000000000,1e-7,0.000001,0.1,-1.5,1.23e-18,0,0,1,100,2,5]");
	ck_canon("[9007199254740991, -9007199254740991, 0, 12]",
	    "[9007199254740991,-9007199254740991,0,12]");
	/* Not finite: refused. */
	struct buf b;
	buf_init(&b, 64);
	ck_assert_int_eq(jcs_number(1.0 / 0.0, &b), CS_EINVAL);
	ck_assert_int_eq(jcs_number(0.0 / 0.0, &b), CS_EINVAL);
	buf_clear(&b);
}
END_TEST

START_TEST(test_approval_jcs_strings)
{
	/* Control characters: short escapes where ES has them, else \u00xx in
	 * lower case; DEL, U+2028/2029 and non-ASCII stay literal. */
	ck_canon("\"\\u0001\\u001f\\u001F\\b\\f\\n\\r\\t\\u007f\\u2028\\u2029\\u00e9/\"",
	    "\"\\u0001\\u001f\\u001f\\b\\f\\n\\r\\t\x7f\xe2\x80\xa8\xe2\x80\xa9\xc3\xa9/\"");
	ck_canon("\"<script>&'\"", "\"<script>&'\"");
	ck_canon("[]", "[]");
	ck_canon("{}", "{}");
	ck_canon("[[],{},[{}]]", "[[],{},[{}]]");
}
END_TEST

START_TEST(test_approval_jcs_refuses_non_ijson)
{
	struct buf b;
	buf_init(&b, 1024);
	ck_assert_int_eq(buf_puts(&b, "keep"), CS_OK);
	json_t *v = json_pack("{s:[i, I]}", "a", 1, (json_int_t)9007199254740992LL);
	ck_assert_int_eq(jcs_canonicalize(v, &b), CS_EINVAL);
	ck_assert_str_eq(b.data, "keep");           /* nothing half-written */
	json_decref(v);
	v = json_integer(-9007199254740992LL);
	ck_assert_int_eq(jcs_canonicalize(v, &b), CS_EINVAL);
	char why[96] = "";
	ck_assert_int_eq(jcs_ijson_check(v, why, sizeof why), CS_EINVAL);
	ck_assert(strstr(why, "2^53") != NULL);
	json_decref(v);
	/* A string built without jansson's UTF-8 check. */
	v = json_stringn_nocheck("\xed\xa0\x80", 3);
	ck_assert_int_eq(jcs_canonicalize(v, &b), CS_EINVAL);
	ck_assert_int_eq(jcs_ijson_check(v, why, sizeof why), CS_EINVAL);
	json_decref(v);
	/* The size cap: CS_ETOOBIG and the buffer as it was. */
	v = json_string("0123456789012345678901234567890123456789");
	struct buf small;
	buf_init(&small, 8);
	ck_assert_int_eq(jcs_canonicalize(v, &small), CS_ETOOBIG);
	ck_assert_uint_eq(small.len, 0);
	buf_clear(&small);
	json_decref(v);
	buf_clear(&b);
}
END_TEST

START_TEST(test_approval_jcs_pretty)
{
	struct buf b;
	buf_init(&b, 4096);
	ck_assert_int_eq(jcs_pretty("{\"b\":[1,{},[],0.1,100000000000000000000],\"a\":\"\\u001f<\"}",
	    &b), CS_OK);
	ck_assert_str_eq(b.data, "{\n  \"a\": \"\\u001f<\",\n  \"b\": [\n    1,\n    {},\n    [],\n"
	    "    0.1,\n    100000000000000000000\n  ]\n}");
	buf_reset(&b);
	ck_assert_int_eq(jcs_pretty("null", &b), CS_OK);
	ck_assert_str_eq(b.data, "null");
	buf_reset(&b);
	ck_assert_int_eq(jcs_pretty("{\"a\":1,\"a\":2}", &b), CS_EINVAL);
	ck_assert_int_eq(jcs_pretty("nope", &b), CS_EINVAL);
	ck_assert_uint_eq(b.len, 0);
	buf_clear(&b);
}
END_TEST

/* --- digest ------------------------------------------------------------ */

START_TEST(test_approval_digest_known_value)
{
	char want[APPROVAL_DIGEST_LEN + 1], got[APPROVAL_DIGEST_LEN + 1], got2[APPROVAL_DIGEST_LEN + 1];
	json_t *p = json_loads("{\"title\": \"Bug \\u20ac\", \"labels\": [\"a\", \"b\"], \"n\": 1.50}",
	    0, NULL);
	ck_assert_ptr_nonnull(p);
	expected_digest("{\"labels\":[\"a\",\"b\"],\"n\":1.5,\"title\":\"Bug \xe2\x82\xac\"}", want);
	ck_assert_int_eq(approval_digest(p, got), CS_OK);
	ck_assert_str_eq(got, want);
	ck_assert_uint_eq(strlen(got), APPROVAL_DIGEST_LEN);
	json_decref(p);
	/* Member order and whitespace do not matter; a value does. */
	p = json_loads("{ \"n\":15e-1,\"labels\":[\"a\",\"b\"],  \"title\":\"Bug \xe2\x82\xac\"}", 0, NULL);
	ck_assert_int_eq(approval_digest(p, got2), CS_OK);
	ck_assert_str_eq(got2, want);
	json_decref(p);
	p = json_loads("{\"n\":1.5,\"labels\":[\"b\",\"a\"],\"title\":\"Bug \xe2\x82\xac\"}", 0, NULL);
	ck_assert_int_eq(approval_digest(p, got2), CS_OK);
	ck_assert_str_ne(got2, want);
	json_decref(p);
	/* Absent parameters are null. */
	p = json_null();
	expected_digest("null", want);
	ck_assert_int_eq(approval_digest(p, got), CS_OK);
	ck_assert_str_eq(got, want);
	/* The well-known SHA-256 of "null", base64url. */
	ck_assert_str_eq(got, "dCNOmK_nSY-12vHzasLXiswzlGT5UHA7jAGYkvmCuQs");
}
END_TEST

/* --- authorization_details --------------------------------------------- */

START_TEST(test_approval_parse_good)
{
	json_t *p = NULL;
	char why[160] = "";
	ck_assert_int_eq(parse("[{\"type\":\"agent_action\",\"action\":\"create_issue\","
	    "\"parameters\":{\"title\":\"x\",\"n\":[1,2]}}]", &p, why, sizeof why), CS_OK);
	ck_assert(json_is_object(p));
	ck_assert_str_eq(json_string_value(json_object_get(p, "title")), "x");
	ck_assert_int_eq(p->refcount, 1);           /* ours alone: the tree is gone */
	json_decref(p);
	p = NULL;
	/* No parameters: null.  RFC 9396's locations and identifier pass. */
	ck_assert_int_eq(parse("  [ {\"action\":\"create_issue\",\"type\":\"agent_action\","
	    "\"locations\":[\"https://api.example\"],\"identifier\":\"x\"} ] ", &p, why, sizeof why),
	    CS_OK);
	ck_assert(json_is_null(p));
	json_decref(p);
	ck_params_ok("\"just a string\"");
	ck_params_ok("[1, 2.5, true, null]");
	ck_params_ok("{\"x\":{\"y\":{\"z\":[{}]}}}");
}
END_TEST

START_TEST(test_approval_parse_ijson_refusals)
{
	/* Duplicate member names, at any depth. */
	ck_refused("[{\"type\":\"agent_action\",\"type\":\"agent_action\",\"action\":\"create_issue\"}]");
	ck_params_refused("{\"a\":1,\"a\":1}");
	ck_params_refused("{\"a\":{\"b\":[{\"c\":1,\"c\":2}]}}");
	/* Integers beyond ±(2^53-1), reals that are not finite. */
	ck_params_refused("9007199254740992");
	ck_params_ok("9007199254740991");
	ck_params_refused("-9007199254740992");
	ck_params_ok("-9007199254740991");
	ck_params_refused("[9223372036854775808]");
	ck_params_refused("{\"n\":-99999999999999999999999}");
	ck_params_refused("1e400");
	ck_params_refused("-1e400");
	ck_params_ok("1e300");
	ck_params_ok("9007199254740992.0");         /* a real: exact by definition */
	/* Lone surrogates; a pair is fine. */
	ck_params_refused("\"\\ud800\"");
	ck_params_refused("\"\\udc00\"");
	ck_params_refused("\"a\\ud800b\"");
	ck_params_refused("\"\\ude00\\ud83d\"");
	ck_params_refused("{\"\\ud800\":1}");
	ck_params_ok("\"\\ud83d\\ude00\"");
	/* Bad UTF-8, NUL, garbage. */
	ck_params_refused("\"\xed\xa0\x80\"");          /* an encoded surrogate */
	ck_params_refused("\"\xc0\xaf\"");              /* overlong */
	ck_params_refused("\"\xff\"");
	ck_params_refused("\"a\\u0000b\"");
	ck_params_refused("NaN");
	ck_params_refused("Infinity");
	ck_params_refused("01");
	ck_refused("[{\"type\":\"agent_action\",\"action\":\"create_issue\"}] x");
	ck_refused("");
	ck_refused("[{\"type\":\"agent_action\",\"action\":\"create_issue\"}");
}
END_TEST

START_TEST(test_approval_parse_size_caps)
{
	/* Exactly APPROVAL_MAX_DETAILS bytes pass; one more does not. */
	const char *head = "[{\"type\":\"agent_action\",\"action\":\"create_issue\",\"parameters\":\"";
	const char *tail = "\"}]";
	size_t n = APPROVAL_MAX_DETAILS;
	char *t = malloc(n + 2);
	ck_assert_ptr_nonnull(t);
	memset(t, 'a', n + 1);
	memcpy(t, head, strlen(head));
	memcpy(t + n - strlen(tail), tail, strlen(tail));
	t[n] = '\0';
	json_t *p = NULL;
	char why[160];
	ck_assert_int_eq(parse(t, &p, why, sizeof why), CS_OK);
	json_decref(p);
	p = NULL;
	memset(t, 'a', n + 1);
	memcpy(t, head, strlen(head));
	memcpy(t + n + 1 - strlen(tail), tail, strlen(tail));
	t[n + 1] = '\0';
	ck_assert_int_eq(parse(t, &p, why, sizeof why), CS_EINVAL);
	ck_assert_ptr_null(p);
	ck_assert(strstr(why, "too long") != NULL);
	free(t);
	/* Small text whose canonical form passes APPROVAL_MAX_CANONICAL: 1e20
	 * is written out as 21 digits. */
	struct buf b;
	buf_init(&b, APPROVAL_MAX_DETAILS);
	ck_assert_int_eq(buf_puts(&b, "[{\"type\":\"agent_action\",\"action\":\"create_issue\","
	    "\"parameters\":[1e20"), CS_OK);
	while (b.len < APPROVAL_MAX_DETAILS - 16)
		ck_assert_int_eq(buf_puts(&b, ",1e20"), CS_OK);
	ck_assert_int_eq(buf_puts(&b, "]}]"), CS_OK);
	ck_assert_int_eq(parse(b.data, &p, why, sizeof why), CS_EINVAL);
	ck_assert(strstr(why, "canonical") != NULL);
	buf_clear(&b);
	/* Deep nesting within jansson's limit is fine; beyond it, refused. */
	buf_init(&b, APPROVAL_MAX_DETAILS);
	ck_assert_int_eq(buf_puts(&b, "[{\"type\":\"agent_action\",\"action\":\"create_issue\","
	    "\"parameters\":"), CS_OK);
	for (int i = 0; i < 2100; i++)
		ck_assert_int_eq(buf_puts(&b, "["), CS_OK);
	for (int i = 0; i < 2100; i++)
		ck_assert_int_eq(buf_puts(&b, "]"), CS_OK);
	ck_assert_int_eq(buf_puts(&b, "}]"), CS_OK);
	ck_assert_int_eq(parse(b.data, &p, why, sizeof why), CS_EINVAL);
	buf_clear(&b);
}
END_TEST

START_TEST(test_approval_parse_shape_refusals)
{
	ck_refused("{\"type\":\"agent_action\",\"action\":\"create_issue\"}");      /* not an array */
	ck_refused("[]");
	ck_refused("[{\"type\":\"agent_action\",\"action\":\"create_issue\"},"
	    "{\"type\":\"agent_action\",\"action\":\"create_issue\"}]");                  /* two entries */
	ck_refused("[\"agent_action\"]");
	ck_refused("[{\"type\":\"openid_credential\",\"action\":\"create_issue\"}]");   /* wrong type */
	ck_refused("[{\"type\":\"Agent_Action\",\"action\":\"create_issue\"}]");
	ck_refused("[{\"action\":\"create_issue\"}]");                                  /* no type */
	ck_refused("[{\"type\":\"agent_action\",\"action\":\"delete_repo\"}]");         /* mismatch */
	ck_refused("[{\"type\":\"agent_action\",\"action\":\"create\"}]");
	ck_refused("[{\"type\":\"agent_action\",\"action\":\"create_issue2\"}]");
	ck_refused("[{\"type\":\"agent_action\"}]");                                    /* no action */
	ck_refused("[{\"type\":\"agent_action\",\"action\":[\"create_issue\"]}]");
	ck_refused("[{\"type\":\"agent_action\",\"action\":\"create_issue\",\"scope\":\"x\"}]");
	ck_refused("[{\"type\":\"agent_action\",\"action\":\"create_issue\",\"actions\":[]}]");
	ck_refused("[{\"type\":\"agent_action\",\"action\":\"create_issue\",\"params_digest\":\"x\"}]");
	ck_refused("[{\"type\":\"agent_action\",\"action\":\"create_issue\",\"locations\":\"x\"}]");
	ck_refused("[{\"type\":\"agent_action\",\"action\":\"create_issue\",\"locations\":[1]}]");
	ck_refused("[{\"type\":\"agent_action\",\"action\":\"create_issue\",\"identifier\":1}]");
	/* The reason never repeats the input. */
	json_t *p = NULL;
	char why[160] = "";
	ck_assert_int_eq(approval_parse_details("[{\"type\":\"agent_action\",\"action\":\"<b>x</b>\"}]",
	    "create_issue", &p, why, sizeof why), CS_EINVAL);
	ck_assert(strstr(why, "<b>") == NULL);
	ck_assert_int_eq(approval_parse_details(NULL, ACTION, &p, why, sizeof why), CS_EINVAL);
	ck_assert_int_eq(approval_parse_details("[]", NULL, &p, NULL, 0), CS_EINVAL);
}
END_TEST

/* --- the state machine ------------------------------------------------- */

#define P1 "{\"repo\":\"consentd\",\"title\":\"SECRET-PARAM-VALUE\"}"
#define P1_REORDERED "{ \"title\" : \"SECRET-PARAM-VALUE\", \"repo\" : \"consentd\" }"
#define P2 "{\"repo\":\"consentd\",\"title\":\"another\"}"

START_TEST(test_approval_flow_release_once)
{
	char *kid = make_consent("alice", "read write", 3600, T0);
	char *id = NULL, *id2 = NULL;
	struct approval_answer a;

	ck_assert_int_eq(call(kid, P1, T0 + 1, &a), APPROVAL_NEEDED);
	ck_assert_ptr_nonnull(a.approval_id);
	ck_assert_uint_eq(strlen(a.approval_id), CONSENT_ID_LEN);
	ck_assert_int_eq(a.expires_in, 600);
	ck_assert_int_eq(a.interval, 5);
	id = strdup(a.approval_id);
	approval_answer_clear(&a);
	ck_status(id, "pending");
	ck_assert_int_eq(audits("approval.requested"), 1);
	/* Too fast: slow_down, interval + 5 from then on. */
	ck_assert_int_eq(call(kid, P1_REORDERED, T0 + 3, &a), APPROVAL_SLOW_DOWN);
	ck_assert_str_eq(a.approval_id, id);
	ck_assert_int_eq(a.interval, 10);
	approval_answer_clear(&a);
	ck_assert_int_eq(call(kid, P1, T0 + 8, &a), APPROVAL_SLOW_DOWN);   /* 5 < 10 */
	ck_assert_int_eq(a.interval, 15);
	approval_answer_clear(&a);
	ck_assert_int_eq(call(kid, P1, T0 + 23, &a), APPROVAL_PENDING);
	ck_assert_str_eq(a.approval_id, id);
	ck_assert_int_eq(a.expires_in, 600 - 22);
	ck_assert_int_eq(a.interval, 15);
	approval_answer_clear(&a);
	/* Two slow_downs: the first audited, both counted. */
	ck_assert_int_eq(audits("approval.slow_down"), 1);
	ck_assert_int_eq(q_int("SELECT slow_downs FROM approvals WHERE id = ?1", id), 2);
	/* The person approves; the next call may release, once. */
	ck_assert_int_eq(decide(id, "alice", true, T0 + 30), APPROVAL_DECIDED);
	ck_status(id, "approved");
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'approval.approved' AND "
	    "detail LIKE 'slow_down answered 2 times; %'", NULL), 1);
	ck_assert_int_eq(call(kid, P1, T0 + 40, &a), APPROVAL_RELEASE);
	ck_assert_str_eq(a.approval_id, id);
	approval_answer_clear(&a);
	ck_assert_int_eq(redeem(id, T0 + 40), APPROVAL_REDEEMED);
	ck_status(id, "used");
	ck_assert_int_eq(q_int("SELECT used_at FROM approvals WHERE id = ?1", id), T0 + 40);
	ck_assert_int_eq(audits("approval.released"), 1);
	ck_assert_int_eq(redeem(id, T0 + 41), APPROVAL_NOT_REDEEMABLE);
	ck_assert_int_eq(audits("approval.refused"), 1);
	ck_assert_int_eq(audits("approval.released"), 1);
	/* Used: the same parameters need a new approval. */
	ck_assert_int_eq(call_o(kid, P1, T0 + 50, &id2), APPROVAL_NEEDED);
	ck_assert_ptr_nonnull(id2);
	ck_assert_str_ne(id2, id);
	ck_status(id, "used");
	ck_assert_int_eq(redeem(id2, T0 + 51), APPROVAL_NOT_REDEEMABLE);        /* pending: not redeemable */
	/* The audit log names action and digest, never a parameter's value. */
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE coalesce(detail, '') || "
	    "coalesce(scopes, '') || coalesce(outcome, '') LIKE '%SECRET-PARAM%'", NULL), 0);
	char *detail = q_text("SELECT detail FROM audit WHERE action = 'approval.released'", NULL);
	char *dg = q_text("SELECT digest FROM approvals WHERE id = ?1", id);
	ck_assert(strstr(detail, "action=" ACTION) != NULL);
	ck_assert(strstr(detail, dg) != NULL);
	free(detail);
	free(dg);
	free(id);
	free(id2);
	free(kid);
}
END_TEST

/* An approval check prepares no statement again: the look-ups by status
 * name the status in their SQL, never as a bound value, which SQLite would
 * re-plan at every new binding (against the partial index of pending ones). */
START_TEST(test_approval_check_prepares_nothing_again)
{
	char *kid = make_consent("alice", "write", 3600, T0);
	struct store_writer_stats w0, w1;
	ck_assert_int_eq(call_o(kid, P1, T0, NULL), APPROVAL_NEEDED);   /* every statement prepared */
	store_writer_stats(st, &w0);
	ck_assert_int_eq(call_o(kid, P2, T0 + 1, NULL), APPROVAL_NEEDED);
	ck_assert_int_eq(call_o(kid, P1, T0 + 30, NULL), APPROVAL_PENDING);
	ck_assert_int_eq(call_o(kid, P2, T0 + 31, NULL), APPROVAL_PENDING);
	store_writer_stats(st, &w1);
	ck_assert_uint_eq(w1.reprepares, w0.reprepares);
	free(kid);
}
END_TEST

START_TEST(test_approval_flow_other_parameters_other_approval)
{
	char *kid = make_consent("alice", "write", 3600, T0);
	char *id1 = NULL, *id2 = NULL, *id3 = NULL;
	ck_assert_int_eq(call_o(kid, P1, T0, &id1), APPROVAL_NEEDED);
	ck_assert_int_eq(call_o(kid, P2, T0, &id2), APPROVAL_NEEDED);
	ck_assert_str_ne(id1, id2);
	ck_assert_int_eq(decide(id1, "alice", true, T0 + 5), APPROVAL_DECIDED);
	/* P2 is still pending; P1 released; P1 again after use is new. */
	ck_assert_int_eq(call_o(kid, P2, T0 + 10, NULL), APPROVAL_PENDING);
	ck_assert_int_eq(call_o(kid, P1_REORDERED, T0 + 10, &id3), APPROVAL_RELEASE);
	ck_assert_str_eq(id3, id1);
	/* The stored parameters are the canonical text; the digest its hash. */
	char *params = q_text("SELECT parameters FROM approvals WHERE id = ?1", id1);
	char *dg = q_text("SELECT digest FROM approvals WHERE id = ?1", id1);
	char want[APPROVAL_DIGEST_LEN + 1];
	ck_assert_str_eq(params, P1);
	expected_digest(P1, want);
	ck_assert_str_eq(dg, want);
	free(params);
	free(dg);
	/* approval_check refuses parameters that do not hash to the digest. */
	struct consent k = load(kid, T0 + 11);
	struct approval_answer a;
	memset(&a, 0, sizeof a);
	struct approval_ask q = { .k = &k, .action = ACTION, .parameters = P2, .digest = want,
		.actor = ACTOR, .now = T0 + 11 };
	ck_assert_int_eq(approval_check(sc, &cfg, &q, &a), CS_EINVAL);
	ck_assert_ptr_null(a.approval_id);
	consent_clear(&k);
	free(id1);
	free(id2);
	free(id3);
	free(kid);
}
END_TEST

START_TEST(test_approval_flow_deny_cooldown)
{
	char *kid = make_consent("alice", "write", 3600, T0);
	char *id = NULL, *id2 = NULL;
	ck_assert_int_eq(call_o(kid, P1, T0, &id), APPROVAL_NEEDED);
	ck_assert_int_eq(decide(id, "alice", false, T0 + 10), APPROVAL_DECIDED);
	ck_status(id, "denied");
	ck_assert_int_eq(audits("approval.denied"), 1);
	ck_assert_int_eq(call_o(kid, P1, T0 + 20, NULL), APPROVAL_DENIED);
	ck_assert_int_eq(call_o(kid, P1, T0 + 10 + 299, NULL), APPROVAL_DENIED);
	/* Other parameters are another question. */
	ck_assert_int_eq(call_o(kid, P2, T0 + 30, NULL), APPROVAL_NEEDED);
	ck_assert_int_eq(redeem(id, T0 + 40), APPROVAL_NOT_REDEEMABLE);
	/* After deny_cooldown: a new request. */
	ck_assert_int_eq(call_o(kid, P1, T0 + 10 + 300, &id2), APPROVAL_NEEDED);
	ck_assert_str_ne(id2, id);
	free(id);
	free(id2);
	free(kid);
}
END_TEST

START_TEST(test_approval_flow_expiry)
{
	char *kid = make_consent("alice", "write", 3600, T0);
	char *id = NULL, *id2 = NULL;
	struct approval_answer a;
	ck_assert_int_eq(call_o(kid, P1, T0, &id), APPROVAL_NEEDED);
	ck_assert_int_eq(call_o(kid, P1, T0 + 599, NULL), APPROVAL_PENDING);
	ck_assert_int_eq(call(kid, P1, T0 + 600, &a), APPROVAL_EXPIRED);
	ck_assert_ptr_null(a.approval_id);
	approval_answer_clear(&a);
	ck_status(id, "expired");
	ck_assert_int_eq(audits("approval.expired"), 1);
	/* Too late to decide. */
	ck_assert_int_eq(decide(id, "alice", true, T0 + 601), APPROVAL_CLOSED);
	ck_status(id, "expired");
	ck_assert_int_eq(call_o(kid, P1, T0 + 605, &id2), APPROVAL_NEEDED);
	ck_assert_str_ne(id2, id);
	/* A decision on an expired-but-unmarked pending approval marks it. */
	ck_assert_int_eq(decide(id2, "alice", true, T0 + 605 + 600), APPROVAL_CLOSED);
	ck_status(id2, "expired");
	ck_assert_int_eq(audits("approval.expired"), 2);
	free(id);
	free(id2);
	free(kid);
}
END_TEST

START_TEST(test_approval_flow_approved_too_old)
{
	char *kid = make_consent("alice", "write", 3600, T0);
	char *id = NULL, *id2 = NULL, *id3 = NULL;
	ck_assert_int_eq(call_o(kid, P1, T0, &id), APPROVAL_NEEDED);
	ck_assert_int_eq(decide(id, "alice", true, T0 + 100), APPROVAL_DECIDED);
	/* Released by check within request_ttl of the decision, but redeemed
	 * after it: refused. */
	ck_assert_int_eq(call_o(kid, P1, T0 + 699, NULL), APPROVAL_RELEASE);
	ck_assert_int_eq(redeem(id, T0 + 700), APPROVAL_NOT_REDEEMABLE);
	ck_status(id, "approved");
	char *detail = q_text("SELECT detail FROM audit WHERE action = 'approval.refused'", NULL);
	ck_assert(strstr(detail, "request_ttl") != NULL);
	free(detail);
	/* The next call expires it and asks again. */
	ck_assert_int_eq(call_o(kid, P1, T0 + 700, &id2), APPROVAL_NEEDED);
	ck_assert_str_ne(id2, id);
	ck_status(id, "expired");
	ck_assert_int_eq(audits("approval.expired"), 1);
	ck_assert_int_eq(redeem(id, T0 + 701), APPROVAL_NOT_REDEEMABLE);
	/* The new one works as usual. */
	ck_assert_int_eq(decide(id2, "alice", true, T0 + 710), APPROVAL_DECIDED);
	ck_assert_int_eq(call_o(kid, P1, T0 + 720, &id3), APPROVAL_RELEASE);
	ck_assert_str_eq(id3, id2);
	ck_assert_int_eq(redeem(id2, T0 + 720), APPROVAL_REDEEMED);
	free(id);
	free(id2);
	free(id3);
	free(kid);
}
END_TEST

START_TEST(test_approval_flow_pending_cap)
{
	char *kid = make_consent("alice", "write", 3600, T0);
	char p[64];
	struct approval_answer a;
	cfg.consent_max_pending_per_user = 3;
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof p, "{\"n\":%d}", i);
		ck_assert_int_eq(call_o(kid, p, T0 + i * 10, NULL), APPROVAL_NEEDED);
	}
	ck_assert_int_eq(call(kid, "{\"n\":99}", T0 + 50, &a), APPROVAL_TOO_MANY);
	ck_assert_ptr_null(a.approval_id);
	ck_assert_int_eq(a.retry_after, 600 - 50);           /* the first expires then */
	approval_answer_clear(&a);
	ck_assert_int_eq(audits("approval.refused"), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM approvals", NULL), 3);
	/* Polling an existing one is not capped. */
	ck_assert_int_eq(call_o(kid, "{\"n\":1}", T0 + 60, NULL), APPROVAL_PENDING);
	/* Once the first has expired, there is room again. */
	ck_assert_int_eq(call_o(kid, "{\"n\":99}", T0 + 600, NULL), APPROVAL_NEEDED);
	/* Another person is not held by alice's cap. */
	char *kb = make_consent("bob", "write", 3600, T0);
	ck_assert_int_eq(call_o(kb, "{\"n\":100}", T0 + 601, NULL), APPROVAL_NEEDED);
	free(kb);
	free(kid);
}
END_TEST

/* [limits] person: new approval requests of one person beyond the burst are
 * refused (rate_limited, audited), polls are not, and another person is served. */
START_TEST(test_approval_flow_person_rate_limit)
{
	struct config lc;
	memset(&lc, 0, sizeof lc);
	lc.limit_person = (struct config_limit){ .rate_milli = 1, .burst = 2 };   /* 0.001/s */
	lc.limit_buckets = 64;
	call_limits = rate_limits_new(&lc);
	ck_assert_ptr_nonnull(call_limits);
	char *kid = make_consent("alice", "write", 3600, T0);
	struct approval_answer a;
	ck_assert_int_eq(call_o(kid, "{\"n\":1}", T0, NULL), APPROVAL_NEEDED);
	ck_assert_int_eq(call_o(kid, "{\"n\":2}", T0 + 10, NULL), APPROVAL_NEEDED);
	ck_assert_int_eq(call(kid, "{\"n\":3}", T0 + 20, &a), APPROVAL_TOO_MANY);
	ck_assert(a.rate_limited);
	ck_assert_ptr_null(a.approval_id);
	ck_assert_int_ge(a.retry_after, 1);
	approval_answer_clear(&a);
	ck_assert_int_eq(audits("approval.refused"), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM approvals", NULL), 2);
	/* A poll creates nothing: not limited. */
	ck_assert_int_eq(call_o(kid, "{\"n\":1}", T0 + 60, NULL), APPROVAL_PENDING);
	/* Another person has a bucket of their own. */
	char *kb = make_consent("bob", "write", 3600, T0);
	ck_assert_int_eq(call_o(kb, "{\"n\":3}", T0 + 61, NULL), APPROVAL_NEEDED);
	free(kb);
	free(kid);
	rate_limits_free(call_limits);
	call_limits = NULL;
}
END_TEST

START_TEST(test_approval_consent_revoked_cancels)
{
	char *kid = make_consent("alice", "write", 3600, T0);
	char *pend = NULL, *appr = NULL, *used = NULL, *den = NULL, *id = NULL;
	ck_assert_int_eq(call_o(kid, "{\"n\":1}", T0, &pend), APPROVAL_NEEDED);
	ck_assert_int_eq(call_o(kid, "{\"n\":2}", T0, &appr), APPROVAL_NEEDED);
	ck_assert_int_eq(call_o(kid, "{\"n\":3}", T0, &used), APPROVAL_NEEDED);
	ck_assert_int_eq(call_o(kid, "{\"n\":4}", T0, &den), APPROVAL_NEEDED);
	ck_assert_int_eq(decide(appr, "alice", true, T0 + 5), APPROVAL_DECIDED);
	ck_assert_int_eq(decide(used, "alice", true, T0 + 5), APPROVAL_DECIDED);
	ck_assert_int_eq(decide(den, "alice", false, T0 + 5), APPROVAL_DECIDED);
	ck_assert_int_eq(redeem(used, T0 + 6), APPROVAL_REDEEMED);
	ck_assert_int_eq(tu_revoke(sc, kid, user_id("alice"), "user:alice", "revoked by user",
	    T0 + 10, false), CS_OK);
	ck_status(pend, "cancelled");
	ck_status(appr, "cancelled");
	ck_status(used, "used");
	ck_status(den, "denied");
	ck_assert_int_eq(redeem(appr, T0 + 11), APPROVAL_NOT_REDEEMABLE);
	ck_assert_int_eq(decide(pend, "alice", true, T0 + 11), APPROVAL_CLOSED);
	/* The stale struct still says live: approval_check looks again. */
	struct consent k = load(kid, T0);
	struct approval_answer a;
	memset(&a, 0, sizeof a);
	k.revoked_at = 0;
	struct approval_ask q = { .k = &k, .action = ACTION, .parameters = "{\"n\":2}",
		.digest = "x", .actor = ACTOR, .now = T0 + 12 };
	ck_assert_int_eq(approval_check(sc, &cfg, &q, &a), CS_EINVAL);    /* digest mismatch first */
	char dg[APPROVAL_DIGEST_LEN + 1];
	expected_digest("{\"n\":2}", dg);
	q.digest = dg;
	ck_assert_int_eq(approval_check(sc, &cfg, &q, &a), CS_OK);
	ck_assert_int_eq(a.outcome, APPROVAL_CONSENT_ENDED);
	consent_clear(&k);
	/* A new consent starts from nothing: none of the old approvals match. */
	char *kid2 = make_consent("alice", "write", 3600, T0 + 20);
	ck_assert_int_eq(call_o(kid2, "{\"n\":2}", T0 + 21, &id), APPROVAL_NEEDED);
	ck_assert_str_ne(id, appr);
	ck_assert_int_eq(call_o(kid2, "{\"n\":4}", T0 + 21, NULL), APPROVAL_NEEDED);
	/* Replacement (a new consent for the same triple) cancels as well. */
	ck_assert_int_eq(decide(id, "alice", true, T0 + 22), APPROVAL_DECIDED);
	struct consent_answer ca;
	struct consent_decision d;
	struct scope_set req = set("read write");
	char *kid3 = NULL;
	memset(&ca, 0, sizeof ca);
	ck_assert_int_eq(tu_exchange(sc, &cfg, ISS, "alice", "coder", "notes", &req, NULL,
	    ACTOR, T0 + 30, &ca), CS_OK);
	ck_assert_int_eq(ca.outcome, CONSENT_REQUIRED);
	memset(&d, 0, sizeof d);
	d.approve = true;
	d.selected = req;
	d.duration = 3600;
	tu_decision_version(sc, ca.request_id, &d);
	ck_assert_int_eq(tu_decide(sc, &cfg, ca.request_id, user_id("alice"), &d, "user:x",
	    T0 + 31, &kid3), CS_OK);
	ck_status(id, "cancelled");
	ck_assert_int_eq(q_int("SELECT count(*) FROM approvals WHERE consent_id = ?1 AND "
	    "status IN ('pending', 'approved')", kid2), 0);
	ck_assert_int_eq(call_o(kid3, "{\"n\":2}", T0 + 40, NULL), APPROVAL_NEEDED);
	scope_set_clear(&req);
	consent_answer_clear(&ca);
	free(kid3);
	free(kid2);
	free(kid);
	free(pend);
	free(appr);
	free(used);
	free(den);
	free(id);
}
END_TEST

START_TEST(test_approval_decide_rules)
{
	char *kid = make_consent("alice", "write", 3600, T0);
	char *kb = make_consent("bob", "write", 3600, T0);
	char *id = NULL, *idb = NULL;
	ck_assert_int_eq(call_o(kid, P1, T0, &id), APPROVAL_NEEDED);
	/* Someone else: CS_EPERM, nothing changes. */
	ck_assert_int_eq(decide(id, "bob", true, T0 + 1), APPROVAL_NOT_YOURS);
	enum approval_decide_outcome oc;
	ck_assert_int_eq(decide_e(id, 0, true, T0 + 1, &oc), CS_OK);
	ck_assert_int_eq(oc, APPROVAL_NOT_YOURS);
	ck_assert_int_eq(decide_e(id, -1, true, T0 + 1, &oc), CS_OK);
	ck_assert_int_eq(oc, APPROVAL_NOT_YOURS);
	ck_status(id, "pending");
	ck_assert_int_eq(audits("approval.approved"), 0);
	ck_assert_int_eq(decide_e("nope", user_id("alice"), true, T0 + 1, &oc), CS_ENOENT);
	/* Decided once only. */
	ck_assert_int_eq(decide(id, "alice", true, T0 + 2), APPROVAL_DECIDED);
	ck_assert_int_eq(decide(id, "alice", false, T0 + 3), APPROVAL_CLOSED);
	ck_status(id, "approved");
	ck_assert_int_eq(q_int("SELECT decided_at FROM approvals WHERE id = ?1", id), T0 + 2);
	ck_assert_int_eq(audits("approval.approved"), 1);
	/* A consent that expired meanwhile: the approval is cancelled. */
	ck_assert_int_eq(call_o(kb, P1, T0 + 3590, &idb), APPROVAL_NEEDED);
	ck_assert_int_eq(decide(idb, "bob", true, T0 + 3600), APPROVAL_CLOSED);
	ck_status(idb, "cancelled");
	ck_assert_int_eq(audits("approval.cancelled"), 1);
	/* An approved one is not redeemable once its consent has expired. */
	char *id3 = NULL;
	ck_assert_int_eq(call_o(kid, P2, T0 + 3500, &id3), APPROVAL_NEEDED);
	ck_assert_int_eq(decide(id3, "alice", true, T0 + 3550), APPROVAL_DECIDED);
	ck_assert_int_eq(call_o(kid, P2, T0 + 3560, NULL), APPROVAL_RELEASE);
	ck_assert_int_eq(redeem(id3, T0 + 3600), APPROVAL_NOT_REDEEMABLE);
	ck_status(id3, "approved");
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'approval.refused' "
	    "AND detail LIKE 'consent not live;%'", NULL), 1);
	free(id3);
	free(id);
	free(idb);
	free(kb);
	free(kid);
}
END_TEST

START_TEST(test_approval_get_and_pending_list)
{
	char *kid = make_consent("alice", "write", 3600, T0);
	char *kb = make_consent("bob", "write", 3600, T0);
	char *id1 = NULL, *id2 = NULL, *idb = NULL;
	struct approval a;
	struct approval *v = NULL;
	size_t n = 0;
	ck_assert_int_eq(call_o(kid, P1_REORDERED, T0, &id1), APPROVAL_NEEDED);
	ck_assert_int_eq(call_o(kid, P2, T0 + 10, &id2), APPROVAL_NEEDED);
	ck_assert_int_eq(call_o(kb, P1, T0 + 10, &idb), APPROVAL_NEEDED);
	memset(&a, 0, sizeof a);
	ck_assert_int_eq(approval_get(sc, id1, &a), CS_OK);
	ck_assert_str_eq(a.id, id1);
	ck_assert_str_eq(a.consent_id, kid);
	ck_assert_int_eq(a.user_id, user_id("alice"));
	ck_assert_str_eq(a.subject, "alice");
	ck_assert_str_eq(a.agent, "coder");
	ck_assert_str_eq(a.resource, "notes");
	ck_assert_str_eq(a.action, ACTION);
	ck_assert_str_eq(a.parameters, P1);
	ck_assert_str_eq(a.status, "pending");
	ck_assert_int_eq(a.created_at, T0);
	ck_assert_int_eq(a.expires_at, T0 + 600);
	ck_assert_int_eq(a.decided_at, 0);
	ck_assert_int_eq(a.used_at, 0);
	char want[APPROVAL_DIGEST_LEN + 1];
	expected_digest(P1, want);
	ck_assert_str_eq(a.digest, want);
	approval_clear(&a);
	approval_clear(&a);                          /* twice is fine */
	approval_clear(NULL);
	ck_assert_int_eq(approval_get(sc, "unknown", &a), CS_ENOENT);
	/* alice's pending ones, newest first; bob's are not hers. */
	ck_assert_int_eq(approval_pending_for_user(sc, user_id("alice"), T0 + 20, &v, &n), CS_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(v[0].id, id2);
	ck_assert_str_eq(v[1].id, id1);
	approval_list_free(v, n);
	/* Decided and expired ones leave the list. */
	ck_assert_int_eq(decide(id2, "alice", false, T0 + 30), APPROVAL_DECIDED);
	ck_assert_int_eq(approval_pending_for_user(sc, user_id("alice"), T0 + 30, &v, &n), CS_OK);
	ck_assert_uint_eq(n, 1);
	approval_list_free(v, n);
	v = NULL;
	ck_assert_int_eq(approval_pending_for_user(sc, user_id("alice"), T0 + 600, &v, &n), CS_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(v);
	approval_list_free(NULL, 0);
	approval_answer_clear(NULL);
	free(id1);
	free(id2);
	free(idb);
	free(kb);
	free(kid);
}
END_TEST

START_TEST(test_approval_redeem_in_callers_tx_rolls_back)
{
	char *kid = make_consent("alice", "write", 3600, T0);
	char *id = NULL;
	ck_assert_int_eq(call_o(kid, P1, T0, &id), APPROVAL_NEEDED);
	ck_assert_int_eq(decide(id, "alice", true, T0 + 1), APPROVAL_DECIDED);
	/* The caller's release failed after redeeming: its rollback undoes the use. */
	ck_assert_int_eq(store_begin(sc), CS_OK);
	enum approval_redeem_outcome oc;
	ck_assert_int_eq(approval_redeem(sc, &cfg, id, ACTOR, T0 + 2, &oc), CS_OK);
	ck_assert_int_eq(oc, APPROVAL_REDEEMED);
	store_rollback(sc);
	ck_status(id, "approved");
	ck_assert_int_eq(audits("approval.released"), 0);
	ck_assert_int_eq(redeem(id, T0 + 3), APPROVAL_REDEEMED);
	enum approval_redeem_outcome ro;
	ck_assert_int_eq(redeem_e("no-such-approval", T0 + 3, &ro), CS_ENOENT);
	free(id);
	free(kid);
}
END_TEST

/* Every answer that is not a release says what to do, in RFC 6749's charset,
 * and names its error for the log line. */
START_TEST(test_approval_answer_descriptions)
{
	static const struct { enum approval_outcome o; const char *code, *desc; int status; } cases[] = {
		{ APPROVAL_NEEDED, "approval_required", "this action needs the person's approval: send "
		  "them to approval_uri, then repeat this call every 5 s", 400 },
		{ APPROVAL_PENDING, "authorization_pending", "the person has not decided on this action "
		  "yet; repeat this call in 5 s", 400 },
		{ APPROVAL_SLOW_DOWN, "slow_down", "polled faster than the interval: wait 5 s between "
		  "calls from now on", 403 },
		/* Until when: T0 + retry_after (issue #32). */
		{ APPROVAL_DENIED, "access_denied", "the person denied this action with these "
		  "parameters; the same call is refused until 2023-11-14T22:38:20Z (1500 s from now) "
		  "unless the person lets it ask again on their /me page", 403 },
		{ APPROVAL_EXPIRED, "expired_token", "the approval request expired before the person "
		  "decided; the next call starts a new one", 400 },
		{ APPROVAL_TOO_MANY, "too_many_pending_requests", "this person has too many pending "
		  "approvals", 429 },
	};
	cfg.public_url = (char *)"https://consent.example.com";
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct approval_answer a;
		struct http_reply rep;
		memset(&a, 0, sizeof a);
		a.outcome = cases[i].o;
		a.approval_id = (char *)"AAAAAAAAAAAAAAAAAAAAAA";
		a.expires_in = 600;
		a.interval = 5;
		a.retry_after = cases[i].o == APPROVAL_DENIED ? 1500 : 0;
		reply_init(&rep);
		ck_assert_int_eq(approval_answer_reply(&rep, &cfg, &a, cases[i].status == 429 ? 400 :
		    cases[i].status, T0), CS_OK);
		ck_assert_int_eq(rep.status, cases[i].status);
		json_t *v = json_loads(rep.body.data, 0, NULL);
		ck_assert_ptr_nonnull(v);
		ck_assert_str_eq(json_string_value(json_object_get(v, "error")), cases[i].code);
		const char *d = json_string_value(json_object_get(v, "error_description"));
		ck_assert_ptr_nonnull(d);
		ck_assert_str_eq(d, cases[i].desc);
		for (const unsigned char *p = (const unsigned char *)d; *p; p++)
			ck_assert(*p >= 0x20 && *p <= 0x7e && *p != '"' && *p != '\\');
		ck_assert_str_eq(rep.log.error, cases[i].code);
		ck_assert_str_eq(rep.log.description, cases[i].desc);
		json_decref(v);
		reply_clear(&rep);
	}
	/* A policy line's deny says so, and names the line (issue #32). */
	struct approval_answer a = { .outcome = APPROVAL_DENIED, .decided_by = (char *)"policy "
		"delete_branch#1", .retry_after = 0 };
	struct http_reply rep;
	reply_init(&rep);
	ck_assert_int_eq(approval_answer_reply(&rep, &cfg, &a, 403, T0), CS_OK);
	ck_assert_int_eq(rep.status, 403);
	ck_assert_str_eq(rep.log.error, "access_denied");
	ck_assert_str_eq(rep.log.description, "denied by the organisation's policy (policy "
	    "delete_branch#1): no one is asked, and the same call is denied every time");
	reply_clear(&rep);
}
END_TEST

static Suite *approval_suite(void)
{
	Suite *s = suite_create("approval");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_approval_jcs_rfc8785_example);
	tcase_add_test(tc, test_approval_jcs_rfc8785_sorting);
	tcase_add_test(tc, test_approval_jcs_rfc8785_numbers);
	tcase_add_test(tc, test_approval_jcs_strings);
	tcase_add_test(tc, test_approval_jcs_refuses_non_ijson);
	tcase_add_test(tc, test_approval_jcs_pretty);
	tcase_add_test(tc, test_approval_digest_known_value);
	tcase_add_test(tc, test_approval_parse_good);
	tcase_add_test(tc, test_approval_parse_ijson_refusals);
	tcase_add_test(tc, test_approval_parse_size_caps);
	tcase_add_test(tc, test_approval_parse_shape_refusals);
	tcase_add_test(tc, test_approval_flow_release_once);
	tcase_add_test(tc, test_approval_answer_descriptions);
	tcase_add_test(tc, test_approval_flow_other_parameters_other_approval);
	tcase_add_test(tc, test_approval_check_prepares_nothing_again);
	tcase_add_test(tc, test_approval_flow_deny_cooldown);
	tcase_add_test(tc, test_approval_flow_expiry);
	tcase_add_test(tc, test_approval_flow_approved_too_old);
	tcase_add_test(tc, test_approval_flow_pending_cap);
	tcase_add_test(tc, test_approval_flow_person_rate_limit);
	tcase_add_test(tc, test_approval_consent_revoked_cancels);
	tcase_add_test(tc, test_approval_decide_rules);
	tcase_add_test(tc, test_approval_get_and_pending_list);
	tcase_add_test(tc, test_approval_redeem_in_callers_tx_rolls_back);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(approval_suite());
}
