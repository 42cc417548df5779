/* test_authorize.c -- authorize.c: the OAuth 2.1 authorization endpoint's
 * rules.  Every refusal, in its order and to whom (the person's page before
 * the redirect URI is known good, the client after); the redirect URI match
 * from the attacker's side; PKCE S256 against RFC 7636's vector; the response
 * URL with RFC 9207's iss. */
#include <string.h>
#include "testutil.h"
#include "authorize.h"
#include "buf.h"

static const char *const redirects[] = {
	"https://client.example/cb",
	"http://127.0.0.1:33418/callback",
	"http://localhost/oauth/cb?x=1",
	"http://[::1]/cb",
};
static const struct authz_client client = { "https://client.example/c.json", redirects, 4 };
static const char *const resources[] = { "https://consentd.example/mcp/github", NULL };
#define CHALLENGE "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
#define VERIFIER "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"

static struct authz_request good(void)
{
	struct authz_request r = {
		.response_type = "code", .client_id = "https://client.example/c.json",
		.redirect_uri = "https://client.example/cb", .state = "xyz",
		.code_challenge = CHALLENGE, .code_challenge_method = "S256",
		.resource = "https://consentd.example/mcp/github",
	};
	return r;
}

static void expect(const struct authz_request *r, enum authz_outcome o, const char *error,
    const char *why_part)
{
	struct authz_verdict v;
	authz_check(&client, resources, r, &v);
	ck_assert_msg(v.outcome == o, "outcome %d, want %d (%s)", v.outcome, o, v.why);
	if (error == NULL) {
		ck_assert_ptr_null(v.error);
		return;
	}
	ck_assert_str_eq(v.error, error);
	ck_assert_msg(strstr(v.why, why_part) != NULL, "'%s' lacks '%s'", v.why, why_part);
	if (o == AUTHZ_TO_PERSON)
		ck_assert_ptr_null(v.redirect_uri);
	else
		ck_assert_ptr_nonnull(v.redirect_uri);
}

START_TEST(test_authorize_good_request)
{
	struct authz_request r = good();
	struct authz_verdict v;
	authz_check(&client, resources, &r, &v);
	ck_assert_int_eq(v.outcome, AUTHZ_OK);
	ck_assert_str_eq(v.redirect_uri, "https://client.example/cb");
	r.state = NULL;                      /* state is the client's choice */
	expect(&r, AUTHZ_OK, NULL, NULL);
}
END_TEST

/* RFC 6749 §4.1.2.1: an unknown client or a redirect URI that is not the
 * client's never sends the browser anywhere. */
START_TEST(test_authorize_client_and_redirect_to_person)
{
	struct authz_request r = good();
	r.client_id = NULL;
	expect(&r, AUTHZ_TO_PERSON, "invalid_request", "client_id is missing");
	r = good();
	r.client_id = "";
	expect(&r, AUTHZ_TO_PERSON, "invalid_request", "client_id is missing");
	r = good();
	r.client_id = "https://evil.example/c.json";
	expect(&r, AUTHZ_TO_PERSON, "invalid_client", "no client");
	struct authz_verdict v;
	r = good();
	authz_check(NULL, resources, &r, &v);
	ck_assert_int_eq(v.outcome, AUTHZ_TO_PERSON);

	/* Open redirect attempts: every one refused to the person's face, even
	 * when the rest of the request is also wrong. */
	static const char *const bad[] = {
		"https://client.example/cb/", "https://client.example/cb?x=1",
		"https://client.example/cb#f", "https://client.example/CB",
		"https://client.example.evil.example/cb", "https://client.example:443/cb",
		"http://client.example/cb", "https://evil.example/cb",
		"http://127.0.0.1:33418/callback/../x", "http://127.0.0.2:33418/callback",
		"http://localhost:9999/callback",  /* 127.0.0.1 registered, not localhost */
		"http://127.0.0.1:33418/callback?x", "http://127.0.0.1:0/callback",
		"http://127.0.0.1:65536/callback", "http://127.0.0.1:/callback",
		"http://127.0.0.1:033418x/callback", "http://127.0.0.1.evil.example/callback",
		"http://127.0.0.1@evil.example/callback", "http://localhost/oauth/cb",
		"http://localhost:80/oauth/cb?x=2", "http://[::1]:8080/cb/x", "",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		r = good();
		r.redirect_uri = bad[i];
		r.response_type = "token";
		expect(&r, AUTHZ_TO_PERSON, "invalid_request", "not one this client registered");
	}
}
END_TEST

START_TEST(test_authorize_loopback_any_port)
{
	struct authz_request r = good();
	static const char *const ok[] = {
		"http://127.0.0.1:33418/callback", "http://127.0.0.1:51000/callback",
		"http://127.0.0.1/callback", "http://127.0.0.1:1/callback",
		"http://127.0.0.1:65535/callback", "http://localhost:8080/oauth/cb?x=1",
		"http://localhost/oauth/cb?x=1", "http://[::1]:4000/cb",
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		struct authz_verdict v;
		r.redirect_uri = ok[i];
		authz_check(&client, resources, &r, &v);
		ck_assert_msg(v.outcome == AUTHZ_OK, "%s: %s", ok[i], v.why);
		ck_assert_str_eq(v.redirect_uri, ok[i]);
	}
	/* https never gets the loopback allowance. */
	ck_assert(!authz_redirect_matches("https://127.0.0.1/cb", "https://127.0.0.1:8443/cb"));
	ck_assert(authz_redirect_matches("https://127.0.0.1/cb", "https://127.0.0.1/cb"));
	ck_assert(!authz_redirect_matches(NULL, "x"));
	ck_assert(!authz_redirect_matches("x", NULL));
}
END_TEST

/* OAuth 2.1 §4.1.1: redirect_uri may be left out only when one is registered,
 * and never for a loopback one. */
START_TEST(test_authorize_redirect_uri_absent)
{
	static const char *const one[] = { "https://solo.example/cb" };
	static const char *const lo[] = { "http://127.0.0.1/cb" };
	struct authz_client c1 = { "c1", one, 1 }, c2 = { "c2", lo, 1 };
	struct authz_request r = good();
	struct authz_verdict v;
	r.redirect_uri = NULL;
	r.client_id = "c1";
	authz_check(&c1, resources, &r, &v);
	ck_assert_int_eq(v.outcome, AUTHZ_OK);
	ck_assert_str_eq(v.redirect_uri, "https://solo.example/cb");
	r.client_id = "c2";
	authz_check(&c2, resources, &r, &v);
	ck_assert_int_eq(v.outcome, AUTHZ_TO_PERSON);
	ck_assert(strstr(v.why, "loopback") != NULL);
	r.client_id = client.client_id;
	expect(&r, AUTHZ_TO_PERSON, "invalid_request", "registered more than one");
}
END_TEST

START_TEST(test_authorize_refusals_to_client)
{
	struct authz_request r = good();
	r.response_type = NULL;
	expect(&r, AUTHZ_TO_CLIENT, "invalid_request", "response_type is missing");
	r = good(); r.response_type = "token";
	expect(&r, AUTHZ_TO_CLIENT, "unsupported_response_type", "must be code");
	r = good(); r.response_type = "code id_token";
	expect(&r, AUTHZ_TO_CLIENT, "unsupported_response_type", "must be code");
	r = good(); r.response_mode = "fragment";
	expect(&r, AUTHZ_TO_CLIENT, "invalid_request", "response_mode must be query");
	r = good(); r.response_mode = "query";
	expect(&r, AUTHZ_OK, NULL, NULL);
	r = good(); r.request = "eyJ.x.y";
	expect(&r, AUTHZ_TO_CLIENT, "request_not_supported", "request objects");
	r = good(); r.request_uri = "urn:ietf:params:oauth:request_uri:x";
	expect(&r, AUTHZ_TO_CLIENT, "request_uri_not_supported", "pushed");
	/* PKCE: S256 only. */
	r = good(); r.code_challenge = NULL;
	expect(&r, AUTHZ_TO_CLIENT, "invalid_request", "code_challenge is missing");
	r = good(); r.code_challenge_method = NULL;
	expect(&r, AUTHZ_TO_CLIENT, "invalid_request", "code_challenge_method is missing");
	r = good(); r.code_challenge_method = "plain";
	expect(&r, AUTHZ_TO_CLIENT, "invalid_request", "must be S256");
	r = good(); r.code_challenge_method = "s256";
	expect(&r, AUTHZ_TO_CLIENT, "invalid_request", "must be S256");
	r = good(); r.code_challenge = VERIFIER "x";           /* 44 characters */
	expect(&r, AUTHZ_TO_CLIENT, "invalid_request", "43 base64url");
	r = good(); r.code_challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw+cM";
	expect(&r, AUTHZ_TO_CLIENT, "invalid_request", "43 base64url");
	r = good(); r.code_challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-c=";
	expect(&r, AUTHZ_TO_CLIENT, "invalid_request", "43 base64url");
	/* state */
	r = good(); r.state = "";
	expect(&r, AUTHZ_TO_CLIENT, "invalid_request", "state must be");
	r = good(); r.state = "a b";
	expect(&r, AUTHZ_TO_CLIENT, "invalid_request", "state must be");
	r = good(); r.state = "a\nb";
	expect(&r, AUTHZ_TO_CLIENT, "invalid_request", "state must be");
	char longstate[AUTHZ_STATE_MAX + 2];
	memset(longstate, 's', sizeof longstate - 1);
	longstate[sizeof longstate - 1] = '\0';
	r = good(); r.state = longstate;
	expect(&r, AUTHZ_TO_CLIENT, "invalid_request", "state must be");
	longstate[AUTHZ_STATE_MAX] = '\0';
	expect(&r, AUTHZ_OK, NULL, NULL);
	/* RFC 8707 */
	r = good(); r.resource = NULL;
	expect(&r, AUTHZ_TO_CLIENT, "invalid_target", "resource is missing");
	r = good(); r.resource = "https://consentd.example/mcp/github/";
	expect(&r, AUTHZ_TO_CLIENT, "invalid_target", "names no resource");
	r = good(); r.resource = "https://consentd.example/mcp/gitla";
	expect(&r, AUTHZ_TO_CLIENT, "invalid_target", "names no resource");
	struct authz_verdict v;
	r = good();
	authz_check(&client, NULL, &r, &v);
	ck_assert_int_eq(v.outcome, AUTHZ_TO_CLIENT);
	ck_assert_str_eq(v.error, "invalid_target");
}
END_TEST

START_TEST(test_authorize_pkce_verify)
{
	ck_assert(authz_pkce_verify(VERIFIER, CHALLENGE));                 /* RFC 7636 App. B */
	ck_assert(!authz_pkce_verify(VERIFIER, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cN"));
	ck_assert(!authz_pkce_verify("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXK", CHALLENGE));
	ck_assert(!authz_pkce_verify(CHALLENGE, CHALLENGE));      /* "plain": the challenge itself */
	ck_assert(!authz_pkce_verify(NULL, CHALLENGE));
	ck_assert(!authz_pkce_verify(VERIFIER, NULL));
	ck_assert(!authz_pkce_verify(VERIFIER, "short"));
	/* The verifier's grammar: 43 to 128 unreserved characters. */
	char v[140];
	memset(v, 'a', sizeof v);
	v[42] = '\0';
	ck_assert(!authz_pkce_verify(v, CHALLENGE));
	v[42] = 'a'; v[129] = '\0';
	ck_assert(!authz_pkce_verify(v, CHALLENGE));
	ck_assert(!authz_pkce_verify("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjX+", CHALLENGE));
	ck_assert(!authz_pkce_verify("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEj k", CHALLENGE));
}
END_TEST

START_TEST(test_authorize_response_url)
{
	struct buf b;
	buf_init(&b, 4096);
	ck_assert_int_eq(authz_response_url(&b, "https://client.example/cb", "c0de", NULL, NULL,
	    "s&t=1", "https://consentd.example"), CS_OK);
	ck_assert_str_eq(b.data, "https://client.example/cb?code=c0de&state=s%26t%3D1"
	    "&iss=https%3A%2F%2Fconsentd.example");
	buf_clear(&b);
	buf_init(&b, 4096);
	ck_assert_int_eq(authz_response_url(&b, "http://localhost:9/oauth/cb?x=1", NULL,
	    "access_denied", "the person declined", NULL, "https://c.example"), CS_OK);
	ck_assert_str_eq(b.data, "http://localhost:9/oauth/cb?x=1&error=access_denied"
	    "&error_description=the%20person%20declined&iss=https%3A%2F%2Fc.example");
	buf_clear(&b);
	buf_init(&b, 4096);
	ck_assert_int_eq(authz_response_url(&b, "https://c/cb", "x", "e", NULL, NULL, "i"), CS_EINVAL);
	ck_assert_int_eq(authz_response_url(&b, "https://c/cb", NULL, NULL, NULL, NULL, "i"), CS_EINVAL);
	ck_assert_int_eq(authz_response_url(&b, "https://c/cb", "x", NULL, NULL, NULL, NULL), CS_EINVAL);
	ck_assert_int_eq(authz_response_url(&b, "https://c/cb#f", "x", NULL, NULL, NULL, "i"), CS_EINVAL);
	buf_clear(&b);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("authorize");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_authorize_good_request);
	tcase_add_test(tc, test_authorize_client_and_redirect_to_person);
	tcase_add_test(tc, test_authorize_loopback_any_port);
	tcase_add_test(tc, test_authorize_redirect_uri_absent);
	tcase_add_test(tc, test_authorize_refusals_to_client);
	tcase_add_test(tc, test_authorize_pkce_verify);
	tcase_add_test(tc, test_authorize_response_url);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
