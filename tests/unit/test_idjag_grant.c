/* test_idjag_grant.c -- idjag_grant.c: an enterprise IdP's ID-JAG at /token
 * (issue #30 item 6), against a real SQLite file built from migrations/, the
 * configuration as consentd.conf states it, and JWSs signed here with OpenSSL
 * (ES256 and RS256 keys made per run).  From the attacker's side: alg none and
 * HS256, a key the IdP never had, another typ, issuer, client or resource, an
 * expired grant, a replay, a pair or scope the policy does not list -- each
 * refused naming its check, nothing written; and the organisation's consent
 * made once, marked and audited, reused, and revoked with its tokens. */
#include <string.h>
#include <sqlite3.h>
#include <jansson.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include "testutil.h"
#include "audit.h"
#include "b64.h"
#include "buf.h"
#include "consent.h"
#include "grant.h"
#include "idjag_grant.h"
#include "jwt.h"
#include "store.h"
#include "store_consent.h"
#include "store_user.h"

#define NOW 1800000000
#define PUB "https://consent.example.com"
#define IDP "https://idp.corp.example"
#define NOTES PUB "/mcp/notes"
#define WIKI PUB "/mcp/wiki"

static char *dir;
static struct store *st;
static struct store_conn *sc;
static sqlite3 *raw;
static struct keyring *kr;
static struct config *cfg;
static EVP_PKEY *es, *rs, *stranger;
static int seq;

/* A public JWK of k (EC P-256 or RSA), with kid. */
static json_t *jwk_of(EVP_PKEY *k, const char *kid)
{
	char a[600], b[600];
	if (EVP_PKEY_is_a(k, "EC")) {
		BIGNUM *x = NULL, *y = NULL;
		unsigned char xb[32], yb[32];
		ck_assert(EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_EC_PUB_X, &x));
		ck_assert(EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_EC_PUB_Y, &y));
		ck_assert_int_eq(BN_bn2binpad(x, xb, 32), 32);
		ck_assert_int_eq(BN_bn2binpad(y, yb, 32), 32);
		BN_free(x);
		BN_free(y);
		ck_assert_int_eq(b64url_encode(xb, 32, a, sizeof a), CS_OK);
		ck_assert_int_eq(b64url_encode(yb, 32, b, sizeof b), CS_OK);
		return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "kty", "EC", "crv", "P-256", "x", a,
		    "y", b, "kid", kid, "alg", "ES256");
	}
	BIGNUM *n = NULL, *e = NULL;
	unsigned char nb[256], eb[8];
	ck_assert(EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_RSA_N, &n));
	ck_assert(EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_RSA_E, &e));
	int nl = BN_bn2bin(n, nb), el = BN_bn2bin(e, eb);
	BN_free(n);
	BN_free(e);
	ck_assert_int_eq(b64url_encode(nb, (size_t)nl, a, sizeof a), CS_OK);
	ck_assert_int_eq(b64url_encode(eb, (size_t)el, b, sizeof b), CS_OK);
	return json_pack("{s:s, s:s, s:s, s:s, s:s}", "kty", "RSA", "n", a, "e", b, "kid", kid,
	    "alg", "RS256");
}

/* The compact JWS of header and payload (JSON texts) signed by k: ES256
 * (r || s) for an EC key, RS256 for RSA; k NULL: sig as given. */
static char *jws(const char *header, const char *payload, EVP_PKEY *k, const char *sig)
{
	struct buf b;
	buf_init(&b, 65536);
	ck_assert_int_eq(b64url_append(&b, header, strlen(header)), CS_OK);
	ck_assert_int_eq(buf_puts(&b, "."), CS_OK);
	ck_assert_int_eq(b64url_append(&b, payload, strlen(payload)), CS_OK);
	size_t input_len = b.len;
	ck_assert_int_eq(buf_puts(&b, "."), CS_OK);
	if (k == NULL) {
		ck_assert_int_eq(buf_puts(&b, sig), CS_OK);
		return buf_steal(&b);
	}
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char der[600], rs_[64];
	size_t n = sizeof der;
	ck_assert_int_eq(EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k), 1);
	ck_assert_int_eq(EVP_DigestSign(md, der, &n, (const unsigned char *)b.data, input_len), 1);
	EVP_MD_CTX_free(md);
	if (EVP_PKEY_is_a(k, "EC")) {
		const unsigned char *p = der;
		ECDSA_SIG *es_sig = d2i_ECDSA_SIG(NULL, &p, (long)n);
		ck_assert_ptr_nonnull(es_sig);
		ck_assert_int_eq(BN_bn2binpad(ECDSA_SIG_get0_r(es_sig), rs_, 32), 32);
		ck_assert_int_eq(BN_bn2binpad(ECDSA_SIG_get0_s(es_sig), rs_ + 32, 32), 32);
		ECDSA_SIG_free(es_sig);
		ck_assert_int_eq(b64url_append(&b, rs_, 64), CS_OK);
	} else {
		ck_assert_int_eq(b64url_append(&b, der, n), CS_OK);
	}
	return buf_steal(&b);
}

/* The claims of a good ID-JAG for mcp-ide and the notes endpoint, one member
 * replaced (or dropped: value NULL; name NULL: none). */
static char *claims(const char *name, json_t *value)
{
	char jti[32];
	ck_assert_int_eq(str_fmt(jti, sizeof jti, "jti-%d", ++seq), CS_OK);
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "iss", IDP, "sub", "alice",
	    "aud", PUB, "client_id", "mcp-ide", "jti", jti, "resource", NOTES,
	    "iat", (json_int_t)NOW - 10, "exp", (json_int_t)NOW + 290);
	if (name != NULL && value == NULL)
		json_object_del(o, name);
	else if (name != NULL)
		json_object_set_new(o, name, value);
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}

#define HDR_ES "{\"alg\":\"ES256\",\"typ\":\"oauth-id-jag+jwt\",\"kid\":\"es-1\"}"
#define HDR_RS "{\"alg\":\"RS256\",\"typ\":\"oauth-id-jag+jwt\",\"kid\":\"rs-1\"}"

static EVP_PKEY *keygen(const char *type)
{
	EVP_PKEY *k = strcmp(type, "EC") == 0 ? EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256") :
	    EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	ck_assert_ptr_nonnull(k);
	return k;
}

static void setup(void)
{
	struct master_key mk;
	audit_set_key((const unsigned char[32]){ 0 }, "test");
	dir = tu_tmpdir();
	char *db = tu_path(dir, "t.db"), *jwks = tu_path(dir, "idp.jwks");
	ck_assert_int_eq(store_open(db, &st), CS_OK);
	sc = store_conn(st);
	ck_assert_int_eq(sqlite3_open(db, &raw), SQLITE_OK);
	sqlite3_busy_timeout(raw, 5000);
	memset(&mk, 0x11, sizeof mk);
	memcpy(mk.kid, "00112233aabbccdd", MASTER_KID_LEN + 1);
	ck_assert_int_eq(keyring_load(sc, &mk, NOW, 300, &kr), CS_OK);
	if (es == NULL) {
		es = keygen("EC");
		rs = keygen("RSA");
		stranger = keygen("EC");
	}
	json_t *set = json_pack("{s:[o, o]}", "keys", jwk_of(es, "es-1"), jwk_of(rs, "rs-1"));
	ck_assert_int_eq(json_dump_file(set, jwks, 0), 0);
	json_decref(set);
	char text[4096];
	ck_assert_int_eq(str_fmt(text, sizeof text,
	    "[server]\nlisten = 127.0.0.1:8080\npublic_url = " PUB "\n"
	    "[database]\npath = %s/x.db\n[keys]\nmaster_key_file = /dev/null\n"
	    "[oidc]\nissuer = " IDP "\nclient_id = consentd\nclient_secret = oidc-secret\n"
	    "[gateway]\nclient_secret = gateway-secret-0123456789\n"
	    "[resource.notes]\nmax_consent = 86400\n[scope.notes.read]\n[scope.notes.write]\n"
	    "[scope.notes.admin]\n[resource.wiki]\n[scope.wiki.read]\n"
	    "[mcp.notes]\nresource = notes\n[mcp.wiki]\nresource = wiki\n"
	    "[client.ide]\nclient_id = mcp-ide\nredirect_uris = http://127.0.0.1/cb\n"
	    "[client.other]\nclient_id = mcp-other\nredirect_uris = http://127.0.0.1/cb\n"
	    "[enterprise.corp]\nissuer = " IDP "\njwks_file = %s\n"
	    "allow = mcp-ide=notes:read,write mcp-other=notes:read\n", dir, jwks), CS_OK);
	static char *const no_env[] = { NULL };
	ck_assert_int_eq(config_load_string(text, strlen(text), "t.conf", no_env, stderr, &cfg), CS_OK);
	free(db);
	free(jwks);
}

static void teardown(void)
{
	config_free(cfg);
	keyring_free(kr);
	sqlite3_close(raw);
	store_close(st);
	tu_rmdir(dir);
}

static int64_t count(const char *sql)
{
	sqlite3_stmt *s;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, sql, -1, &s, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
	int64_t n = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return n;
}

/* idjag_grant for the assertion as client_id (resource, scope of the request). */
static enum idjag_grant_outcome run(const char *assertion, const char *client_id,
    const char *resource, const char *scope, struct idjag_grant_result *r)
{
	struct idjag_grant_req rq = { .assertion = assertion, .client_id = client_id,
		.resource = resource, .scope = scope, .now = NOW };
	ck_assert_int_eq(idjag_grant(sc, cfg, kr, &rq, r), CS_OK);
	return r->outcome;
}

/* A refusal of outcome oc naming part; nothing written. */
static void refused(char *assertion, const char *client_id, const char *resource,
    const char *scope, enum idjag_grant_outcome oc, const char *part)
{
	struct idjag_grant_result r;
	int64_t before = count("SELECT count(*) FROM consents");
	ck_assert_int_eq(run(assertion, client_id, resource, scope, &r), oc);
	ck_assert_msg(strstr(r.why, part) != NULL, "'%s' lacks '%s'", r.why, part);
	ck_assert_ptr_null(r.grant.access_token);
	ck_assert_ptr_null(r.consent_id);
	ck_assert_int_eq(count("SELECT count(*) FROM consents"), before);
	idjag_grant_result_clear(&r);
	free(assertion);
}

static json_t *payload_of(const char *token)
{
	const char *a = strchr(token, '.') + 1, *b = strchr(a, '.');
	unsigned char *raw_pl = NULL;
	size_t n = 0;
	ck_assert_int_eq(b64url_decode_alloc(a, (size_t)(b - a), &raw_pl, &n), CS_OK);
	json_t *o = json_loadb((const char *)raw_pl, n, 0, NULL);
	free(raw_pl);
	ck_assert_ptr_nonnull(o);
	return o;
}

START_TEST(test_idjag_grant_good_once)
{
	struct idjag_grant_result r;
	char *pl = claims("scope", json_string("read write admin")), *a = jws(HDR_ES, pl, es, NULL);
	ck_assert_int_eq(run(a, "mcp-ide", NULL, NULL, &r), IDJAG_GRANTED);
	/* The policy's scopes ∩ the grant's: admin is not the policy's. */
	ck_assert_str_eq(r.grant.scope, "read write");
	ck_assert_ptr_null(r.grant.refresh_token);
	json_t *at = payload_of(r.grant.access_token);
	ck_assert_str_eq(json_string_value(json_object_get(at, "sub")), "alice");
	ck_assert_str_eq(json_string_value(json_object_get(at, "scope")), "read write");
	ck_assert_str_eq(json_string_value(json_object_get(at, "aud")), NOTES);
	ck_assert_str_eq(json_string_value(json_object_get(at, "client_id")), "mcp-ide");
	ck_assert_ptr_null(json_object_get(at, "act"));
	ck_assert_ptr_null(json_object_get(at, "cnf"));
	json_decref(at);
	ck_assert_int_eq(count("SELECT count(*) FROM consents WHERE agent = 'mcp-ide' AND "
	    "resource = 'notes' AND granted = 'read write' AND granted_by = 'organisation' AND "
	    "offline = 0 AND revoked_at = 0 AND expires_at = 1800086400"), 1);
	ck_assert_int_eq(count("SELECT count(*) FROM users WHERE issuer = '" IDP "' AND "
	    "subject = 'alice'"), 1);
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE action = 'consent.granted_by_policy' "
	    "AND actor = 'enterprise:corp' AND agent = 'mcp-ide' AND detail = 'enterprise=corp'"), 1);
	ck_assert_int_eq(count("SELECT count(*) FROM refresh_tokens"), 0);
	idjag_grant_result_clear(&r);
	/* SECURITY: the same ID-JAG again is refused: single use. */
	refused(a, "mcp-ide", NULL, NULL, IDJAG_GRANT_INVALID, "used already");
	free(pl);
}
END_TEST

START_TEST(test_idjag_grant_reuse_and_revoke)
{
	struct idjag_grant_result r1, r2;
	char *pl = claims(NULL, NULL), *a = jws(HDR_RS, pl, rs, NULL);    /* RS256 too */
	ck_assert_int_eq(run(a, "mcp-ide", NOTES, "read", &r1), IDJAG_GRANTED);
	ck_assert_str_eq(r1.grant.scope, "read");
	free(a);
	free(pl);
	/* A narrower consent is replaced by the policy's wider one; a second
	 * grant within it reuses it. */
	pl = claims(NULL, NULL);
	a = jws(HDR_ES, pl, es, NULL);
	ck_assert_int_eq(run(a, "mcp-ide", NULL, NULL, &r2), IDJAG_GRANTED);
	ck_assert_str_ne(r1.consent_id, r2.consent_id);
	ck_assert_int_eq(count("SELECT count(*) FROM consents WHERE revoked_at = 0"), 1);
	free(a);
	free(pl);
	struct idjag_grant_result r3;
	pl = claims(NULL, NULL);
	a = jws(HDR_ES, pl, es, NULL);
	ck_assert_int_eq(run(a, "mcp-ide", NULL, "write", &r3), IDJAG_GRANTED);
	ck_assert_str_eq(r3.consent_id, r2.consent_id);
	ck_assert_int_eq(count("SELECT count(*) FROM consents"), 2);
	/* Revoking it (as an admin) ends its tokens. */
	struct grant_check gc;
	ck_assert_int_eq(grant_validate_mcp(sc, cfg, kr, r3.grant.access_token, NOTES, NOW, &gc),
	    CS_OK);
	ck_assert(gc.valid);
	grant_check_clear(&gc);
	enum consent_revoke_outcome oc;
	ck_assert_int_eq(consent_revoke(sc, r3.consent_id, &(struct consent_actor){ .user_id = 0,
	    .actor = "admin:ops", .now = NOW + 1 }, "policy review", &oc), CS_OK);
	ck_assert_int_eq(oc, CONSENT_REVOKED);
	ck_assert_int_eq(grant_validate_mcp(sc, cfg, kr, r3.grant.access_token, NOTES, NOW + 2, &gc),
	    CS_OK);
	ck_assert(!gc.valid);
	grant_check_clear(&gc);
	idjag_grant_result_clear(&r1);
	idjag_grant_result_clear(&r2);
	idjag_grant_result_clear(&r3);
	free(a);
	free(pl);
}
END_TEST

/* A live consent the person gave that covers the scopes is used as it is:
 * the organisation's word neither replaces nor marks it. */
START_TEST(test_idjag_grant_persons_consent_kept)
{
	struct idjag_grant_result r;
	int64_t uid = 0;
	ck_assert_int_eq(store_user_put(sc, &(struct store_user){ .issuer = IDP, .subject = "alice",
	    .now = NOW - 100, .login = true }, &uid), CS_OK);
	struct store_consent_row k = { .id = "personsconsent00000001", .user_id = uid,
		.agent = "mcp-ide", .resource = "notes", .granted = "read write", .declined = "",
		.created_at = NOW - 100, .expires_at = NOW + 3600 };
	ck_assert_int_eq(store_consent_insert(sc, &k), CS_OK);
	char *pl = claims(NULL, NULL), *a = jws(HDR_ES, pl, es, NULL);
	ck_assert_int_eq(run(a, "mcp-ide", NULL, "read", &r), IDJAG_GRANTED);
	ck_assert_str_eq(r.consent_id, "personsconsent00000001");
	ck_assert_int_eq(count("SELECT count(*) FROM consents"), 1);
	ck_assert_int_eq(count("SELECT count(*) FROM consents WHERE granted_by IS NULL"), 1);
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE action = 'consent.granted_by_policy'"),
	    0);
	idjag_grant_result_clear(&r);
	free(a);
	free(pl);
}
END_TEST

START_TEST(test_idjag_grant_forged)
{
	char *pl = claims(NULL, NULL);
	/* alg none and HMAC: refused before any key is looked at. */
	refused(jws("{\"alg\":\"none\",\"typ\":\"oauth-id-jag+jwt\"}", pl, NULL, ""), "mcp-ide", NULL,
	    NULL, IDJAG_GRANT_INVALID, "not an ID-JAG");
	refused(jws("{\"alg\":\"none\",\"typ\":\"oauth-id-jag+jwt\"}", pl, NULL, "c2ln"), "mcp-ide",
	    NULL, NULL, IDJAG_GRANT_INVALID, "not an ID-JAG");
	refused(jws("{\"alg\":\"HS256\",\"typ\":\"oauth-id-jag+jwt\"}", pl, NULL, "c2lnbmF0dXJl"),
	    "mcp-ide", NULL, NULL, IDJAG_GRANT_INVALID, "not an ID-JAG");
	refused(jws("{\"alg\":\"PS256\",\"typ\":\"oauth-id-jag+jwt\"}", pl, NULL, "c2lnbmF0dXJl"),
	    "mcp-ide", NULL, NULL, IDJAG_GRANT_INVALID, "not an ID-JAG");
	/* A key the IdP never had, with the IdP's kid or none. */
	refused(jws(HDR_ES, pl, stranger, NULL), "mcp-ide", NULL, NULL, IDJAG_GRANT_INVALID,
	    "signature does not verify with the keys of [enterprise.corp]");
	refused(jws("{\"alg\":\"ES256\",\"typ\":\"oauth-id-jag+jwt\"}", pl, stranger, NULL), "mcp-ide",
	    NULL, NULL, IDJAG_GRANT_INVALID, "signature does not verify");
	/* The RS key's signature under the ES key's kid. */
	refused(jws("{\"alg\":\"RS256\",\"typ\":\"oauth-id-jag+jwt\",\"kid\":\"es-1\"}", pl, rs, NULL),
	    "mcp-ide", NULL, NULL, IDJAG_GRANT_INVALID, "signature does not verify");
	/* Signed by the IdP, but of another typ. */
	refused(jws("{\"alg\":\"ES256\",\"typ\":\"JWT\",\"kid\":\"es-1\"}", pl, es, NULL), "mcp-ide",
	    NULL, NULL, IDJAG_GRANT_INVALID, "typ is not oauth-id-jag+jwt");
	refused(jws("{\"alg\":\"ES256\",\"kid\":\"es-1\"}", pl, es, NULL), "mcp-ide", NULL, NULL,
	    IDJAG_GRANT_INVALID, "typ is not oauth-id-jag+jwt");
	refused(strdup("not.a.jws"), "mcp-ide", NULL, NULL, IDJAG_GRANT_INVALID, "not an ID-JAG");
	free(pl);
	ck_assert_int_eq(count("SELECT count(*) FROM replay_cache WHERE kind = 'id_jag'"), 0);
}
END_TEST

START_TEST(test_idjag_grant_claims_and_policy)
{
	char *pl;
#define SIGNED(name, value) (pl = claims(name, value), jws(HDR_ES, pl, es, NULL))
	char *a;
	a = SIGNED("iss", json_string("https://other-idp.example"));
	refused(a, "mcp-ide", NULL, NULL, IDJAG_GRANT_INVALID, "iss is no configured enterprise");
	free(pl);
	a = SIGNED("aud", json_string("https://other-as.example"));
	refused(a, "mcp-ide", NULL, NULL, IDJAG_GRANT_INVALID, "aud is not this authorization server");
	free(pl);
	/* Another client than the authenticated one. */
	a = SIGNED(NULL, NULL);
	refused(a, "mcp-other", NULL, NULL, IDJAG_GRANT_INVALID,
	    "client_id is not the authenticated client");
	free(pl);
	a = SIGNED("exp", json_integer(NOW - 31));
	refused(a, "mcp-ide", NULL, NULL, IDJAG_GRANT_INVALID, "");
	free(pl);
	pl = claims(NULL, NULL);
	json_t *o = json_loads(pl, 0, NULL);
	free(pl);
	json_object_set_new(o, "iat", json_integer(NOW - 400));
	json_object_set_new(o, "exp", json_integer(NOW - 100));
	pl = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	refused(jws(HDR_ES, pl, es, NULL), "mcp-ide", NULL, NULL, IDJAG_GRANT_INVALID, "expired");
	free(pl);
	/* The resource: an [mcp.NAME] URI, the request's equal to the grant's. */
	a = SIGNED("resource", json_string("https://elsewhere.example/mcp"));
	refused(a, "mcp-ide", NULL, NULL, IDJAG_GRANT_INVALID, "resource names no resource");
	free(pl);
	a = SIGNED("resource", NULL);
	refused(a, "mcp-ide", NULL, NULL, IDJAG_GRANT_BAD_TARGET, "resource is missing");
	free(pl);
	a = SIGNED(NULL, NULL);
	refused(a, "mcp-ide", WIKI, NULL, IDJAG_GRANT_BAD_TARGET,
	    "resource is not the resource the grant names");
	free(pl);
	a = SIGNED("resource", NULL);
	refused(a, "mcp-ide", PUB "/mcp/nope", NULL, IDJAG_GRANT_BAD_TARGET,
	    "resource is not an MCP endpoint of this server");
	free(pl);
	/* SECURITY: a pair the policy does not list, and scopes it does not grant. */
	a = SIGNED("resource", json_string(WIKI));
	refused(a, "mcp-ide", NULL, NULL, IDJAG_GRANT_INVALID,
	    "the policy of [enterprise.corp] does not let this client have tokens for this resource");
	free(pl);
	a = SIGNED(NULL, NULL);
	refused(a, "mcp-ide", NULL, "admin", IDJAG_GRANT_BAD_SCOPE, "no scope asked for");
	free(pl);
	a = SIGNED("scope", json_string("admin"));
	refused(a, "mcp-ide", NULL, NULL, IDJAG_GRANT_BAD_SCOPE, "no scope asked for");
	free(pl);
	/* mcp-other's pair allows read only: write is not widened into. */
	pl = claims("client_id", json_string("mcp-other"));
	refused(jws(HDR_ES, pl, es, NULL), "mcp-other", NULL, "write", IDJAG_GRANT_BAD_SCOPE,
	    "no scope asked for");
	free(pl);
#undef SIGNED
	/* None of these spent a jti or wrote anything. */
	ck_assert_int_eq(count("SELECT count(*) FROM replay_cache WHERE kind = 'id_jag'"), 0);
	ck_assert_int_eq(count("SELECT count(*) FROM users"), 0);
	ck_assert_int_eq(count("SELECT count(*) FROM audit WHERE action = 'consent.granted_by_policy'"),
	    0);
}
END_TEST

START_TEST(test_idjag_grant_bad_arguments)
{
	struct idjag_grant_result r;
	struct idjag_grant_req rq = { .assertion = NULL, .client_id = "mcp-ide", .now = NOW };
	ck_assert_int_eq(idjag_grant(sc, cfg, kr, &rq, &r), CS_EINVAL);
	rq.assertion = "a.b.c";
	rq.client_id = NULL;
	ck_assert_int_eq(idjag_grant(sc, cfg, kr, &rq, &r), CS_EINVAL);
	idjag_grant_result_clear(NULL);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("idjag_grant");
	TCase *tc = tcase_create("grant");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_idjag_grant_good_once);
	tcase_add_test(tc, test_idjag_grant_reuse_and_revoke);
	tcase_add_test(tc, test_idjag_grant_persons_consent_kept);
	tcase_add_test(tc, test_idjag_grant_forged);
	tcase_add_test(tc, test_idjag_grant_claims_and_policy);
	tcase_add_test(tc, test_idjag_grant_bad_arguments);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
