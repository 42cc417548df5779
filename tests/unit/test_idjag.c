/* test_idjag.c -- idjag.c: an ID-JAG's claims, from the attacker's side: a
 * grant for another authorization server, client or resource, from another
 * issuer, expired, from the future, too long-lived, of another typ, with
 * duplicate or mistyped claims -- each refused naming its check. */
#include <string.h>
#include "testutil.h"
#include "buf.h"
#include "idjag.h"

static const char *const resources[] = { "https://consentd.example/mcp/github", NULL };
#define NOW 1800000000
#define HDR "{\"alg\":\"ES256\",\"typ\":\"oauth-id-jag+jwt\",\"kid\":\"k1\"}"

static const struct idjag_expect expect_default = {
	.issuer = "https://idp.example", .audience = "https://consentd.example",
	.client_id = "https://client.example/c.json", .resources = resources, .now = NOW,
};

/* A payload with one member replaced (or removed: value NULL), as JSON text. */
static void payload(char *out, size_t n, const char *name, const char *value)
{
	static const char *const names[] = { "iss", "sub", "aud", "client_id", "jti", "iat", "exp",
		"resource", "scope", NULL };
	static const char *const values[] = { "\"https://idp.example\"", "\"alice@example\"",
		"\"https://consentd.example\"", "\"https://client.example/c.json\"", "\"j-1\"",
		"1799999990", "1800000100", "\"https://consentd.example/mcp/github\"",
		"\"repo:read\"" };
	struct buf b;
	buf_init(&b, 4096);
	ck_assert_int_eq(buf_puts(&b, "{"), CS_OK);
	bool first = true;
	for (size_t i = 0; names[i] != NULL; i++) {
		const char *v = values[i];
		if (name != NULL && strcmp(name, names[i]) == 0)
			v = value;
		if (v == NULL)
			continue;
		ck_assert_int_eq(buf_puts(&b, first ? "\"" : ",\""), CS_OK);
		ck_assert_int_eq(buf_puts(&b, names[i]), CS_OK);
		ck_assert_int_eq(buf_puts(&b, "\":"), CS_OK);
		ck_assert_int_eq(buf_puts(&b, v), CS_OK);
		first = false;
	}
	ck_assert_int_eq(buf_puts(&b, "}"), CS_OK);
	ck_assert_int_eq(str_fmt(out, n, "%s", b.data), CS_OK);
	buf_clear(&b);
}

static void refused(const char *hdr, const char *pl, const struct idjag_expect *x,
    const char *part)
{
	struct idjag g;
	char why[IDJAG_WHY_MAX] = "";
	memset(&g, 0, sizeof g);
	ck_assert_msg(idjag_check(hdr, strlen(hdr), pl, strlen(pl), x, &g, why, sizeof why) ==
	    CS_EINVAL, "accepted: %s", pl);
	ck_assert_msg(strstr(why, part) != NULL, "'%s' lacks '%s' (%s)", why, part, pl);
	ck_assert_ptr_null(g.iss);                       /* nothing half-written */
}

static void member_refused(const char *name, const char *value, const char *part)
{
	char pl[4096];
	payload(pl, sizeof pl, name, value);
	refused(HDR, pl, &expect_default, part);
}

START_TEST(test_idjag_good)
{
	char pl[4096], why[IDJAG_WHY_MAX];
	struct idjag g;
	payload(pl, sizeof pl, NULL, NULL);
	ck_assert_int_eq(idjag_check(HDR, strlen(HDR), pl, strlen(pl), &expect_default, &g, why,
	    sizeof why), CS_OK);
	ck_assert_str_eq(g.sub, "alice@example");
	ck_assert_str_eq(g.jti, "j-1");
	ck_assert_str_eq(g.resource, "https://consentd.example/mcp/github");
	ck_assert_str_eq(g.scope, "repo:read");
	ck_assert_int_eq(g.exp, 1800000100);
	idjag_clear(&g);
	/* aud as a one-element array; resource and scope absent; typ with the
	 * media type prefix, in another case. */
	payload(pl, sizeof pl, "aud", "[\"https://consentd.example\"]");
	const char *h2 = "{\"alg\":\"ES256\",\"typ\":\"application/OAUTH-ID-JAG+JWT\"}";
	ck_assert_int_eq(idjag_check(h2, strlen(h2), pl, strlen(pl), &expect_default, &g, why,
	    sizeof why), CS_OK);
	idjag_clear(&g);
	payload(pl, sizeof pl, "resource", NULL);
	ck_assert_int_eq(idjag_check(HDR, strlen(HDR), pl, strlen(pl), &expect_default, &g, why,
	    sizeof why), CS_OK);
	ck_assert_ptr_null(g.resource);
	idjag_clear(&g);
	idjag_clear(NULL);
}
END_TEST

START_TEST(test_idjag_header_refused)
{
	char pl[4096];
	payload(pl, sizeof pl, NULL, NULL);
	refused("{\"alg\":\"ES256\"}", pl, &expect_default, "typ is not oauth-id-jag+jwt");
	refused("{\"alg\":\"ES256\",\"typ\":\"JWT\"}", pl, &expect_default, "typ is not");
	refused("{\"alg\":\"ES256\",\"typ\":\"oauth-id-jag+jwt \"}", pl, &expect_default, "typ is not");
	refused("{\"alg\":\"ES256\",\"typ\":7}", pl, &expect_default, "typ is not");
	refused("{\"typ\":\"oauth-id-jag+jwt\",\"typ\":\"oauth-id-jag+jwt\"}", pl, &expect_default,
	    "header is not a JSON object");
	refused("[1]", pl, &expect_default, "header is not a JSON object");
	refused("{", pl, &expect_default, "header is not a JSON object");
	refused(HDR, "[]", &expect_default, "payload is not a JSON object");
	refused(HDR, "{\"iss\":\"a\",\"iss\":\"a\"}", &expect_default, "payload is not a JSON object");
	refused(HDR, "", &expect_default, "payload is not a JSON object");
}
END_TEST

START_TEST(test_idjag_claims_refused)
{
	static const char *const required[] = { "iss", "sub", "client_id", "jti", "iat", "exp", "aud" };
	for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
		char part[64];
		ck_assert_int_eq(str_fmt(part, sizeof part, "no %s claim", required[i]), CS_OK);
		member_refused(required[i], NULL, part);
	}
	member_refused("iss", "\"https://other-idp.example\"", "iss is not the configured");
	member_refused("iss", "\"https://idp.example/\"", "iss is not the configured");
	member_refused("aud", "\"https://other-as.example\"", "aud is not this authorization server");
	member_refused("aud", "[\"https://consentd.example\",\"https://other-as.example\"]",
	    "aud is not this");
	member_refused("aud", "[]", "aud is not this");
	member_refused("client_id", "\"https://evil.example/c.json\"", "not the authenticated client");
	member_refused("resource", "\"https://consentd.example/mcp/gitlab\"", "names no resource");
	member_refused("sub", "\"\"", "sub claim is not a valid string");
	member_refused("sub", "42", "sub claim is not a valid string");
	member_refused("jti", "\"a\\u0000b\"", "payload is not a JSON object");   /* jansson: no NUL */
	member_refused("jti", "\"a\\nb\"", "jti claim is not a valid string");
	member_refused("scope", "[\"a\"]", "scope claim is not a valid string");
	member_refused("iat", "\"1799999990\"", "iat claim is not a time");
	member_refused("exp", "1.5e9", "exp claim is not a time");
	member_refused("exp", "-1", "exp claim is not a time");
	/* Time: expired (past the leeway), from the future, inverted, too long. */
	member_refused("iat", "1800000031", "iat is in the future");
	member_refused("exp", "1799999990", "exp is not after its iat");
	member_refused("exp", "1800000291", "longer than 300 seconds");
	char big[IDJAG_CLAIM_MAX + 8];
	memset(big, 'a', sizeof big);
	big[0] = '"';
	big[IDJAG_CLAIM_MAX + 2] = '"';
	big[IDJAG_CLAIM_MAX + 3] = '\0';
	member_refused("sub", big, "sub claim is not a valid string");
}
END_TEST

START_TEST(test_idjag_leeway_edges)
{
	char pl[4096], why[IDJAG_WHY_MAX];
	struct idjag g;
	struct idjag_expect x = expect_default;
	payload(pl, sizeof pl, NULL, NULL);
	x.now = 1800000100 + IDJAG_LEEWAY - 1;       /* exp passed, within the leeway */
	ck_assert_int_eq(idjag_check(HDR, strlen(HDR), pl, strlen(pl), &x, &g, why, sizeof why), CS_OK);
	idjag_clear(&g);
	x.now = 1800000100 + IDJAG_LEEWAY;
	refused(HDR, pl, &x, "has expired");
	/* An expectation without an issuer, audience or client refuses everything. */
	x = expect_default;
	x.issuer = NULL;
	refused(HDR, pl, &x, "iss is not");
	x = expect_default;
	x.audience = NULL;
	refused(HDR, pl, &x, "aud is not");
	x = expect_default;
	x.client_id = NULL;
	refused(HDR, pl, &x, "client_id is not");
	x = expect_default;
	x.resources = NULL;
	refused(HDR, pl, &x, "names no resource");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("idjag");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_idjag_good);
	tcase_add_test(tc, test_idjag_header_refused);
	tcase_add_test(tc, test_idjag_claims_refused);
	tcase_add_test(tc, test_idjag_leeway_edges);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
