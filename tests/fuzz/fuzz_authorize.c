/* fuzz_authorize.c -- libFuzzer target for the authorization endpoint's
 * rules (authorize.c), whose every input arrives from a browser that a
 * client or an attacker steered: the input is up to 12 fields separated by
 * LF -- a registered redirect URI, then the request's redirect_uri,
 * response_type, state, code_challenge, code_challenge_method, resource,
 * response_mode, client_id and a PKCE verifier.  Never crashes or leaks, and
 * holds the endpoint's promises: a verdict that redirects names a URI that
 * matches the registered one; nothing is redirected before client_id and
 * redirect_uri passed; AUTHZ_OK means S256 with a 43-character challenge and
 * the one known resource; a redirect URI always matches itself; the response
 * URL starts with the redirect URI and ends with the issuer.  The
 * authorization leg's own readers (authz_flow.h) see the same fields: the
 * redirect URI's host (shown on the consent page) fits and is a part of the
 * URI; a dpop_jkt is accepted only at 43 base64url characters. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "authorize.h"
#include "authz_flow.h"
#include "buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)
#define NFIELDS 10

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size + 1), *f[NFIELDS] = { 0 };
	if (copy == NULL)
		return 0;
	memcpy(copy, data, size);
	copy[size] = '\0';
	char *p = copy;
	for (size_t i = 0; i < NFIELDS && p != NULL; i++) {
		f[i] = p;
		p = strchr(p, '\n');
		if (p != NULL)
			*p++ = '\0';
	}
	const char *reg = f[0] != NULL ? f[0] : "";
	const char *const regs[] = { reg };
	const char *const resources[] = { "https://consentd.example/mcp/x", NULL };
	struct authz_client c = { "client", regs, 1 };
	struct authz_request r = {
		.redirect_uri = f[1], .response_type = f[2], .state = f[3], .code_challenge = f[4],
		.code_challenge_method = f[5], .resource = f[6], .response_mode = f[7],
		.client_id = f[8] != NULL ? f[8] : "client",
	};
	struct authz_verdict v;
	authz_check(&c, resources, &r, &v);
	CHECK(v.outcome < AUTHZ__MAX);
	CHECK(strlen(v.why) < sizeof v.why);
	if (v.outcome == AUTHZ_TO_PERSON)
		CHECK(v.redirect_uri == NULL && v.error != NULL);
	else {
		CHECK(v.redirect_uri != NULL);
		CHECK(strcmp(r.client_id, "client") == 0);
		CHECK(authz_redirect_matches(reg, v.redirect_uri));
	}
	if (v.outcome == AUTHZ_OK) {
		CHECK(v.error == NULL);
		CHECK(strcmp(r.response_type, "code") == 0);
		CHECK(strcmp(r.code_challenge_method, "S256") == 0);
		CHECK(strlen(r.code_challenge) == AUTHZ_CHALLENGE_LEN);
		CHECK(strcmp(r.resource, resources[0]) == 0);
		struct buf b;
		buf_init(&b, 8192);
		if (authz_response_url(&b, v.redirect_uri, "code", NULL, NULL, r.state,
		    "https://consentd.example") == CS_OK) {
			CHECK(strncmp(b.data, v.redirect_uri, strlen(v.redirect_uri)) == 0);
			CHECK(strstr(b.data, "iss=https%3A%2F%2Fconsentd.example") != NULL);
		}
		buf_clear(&b);
	}
	CHECK(authz_redirect_matches(reg, reg));
	if (f[1] != NULL)
		CHECK(authz_redirect_matches(reg, f[1]) == authz_redirect_matches(reg, f[1]));
	if (f[9] != NULL && f[4] != NULL)
		(void)authz_pkce_verify(f[9], f[4]);
	for (size_t i = 0; i < 2; i++) {
		const char *u = i == 0 ? reg : f[1];
		char host[64];
		bool loop;
		if (u != NULL && authz_flow_uri_host(u, host, sizeof host, &loop) == CS_OK) {
			CHECK(host[0] != '\0' && strlen(host) < sizeof host);
			CHECK(strstr(u, host) != NULL);
			CHECK(!loop || strcmp(host, "127.0.0.1") == 0 || strcmp(host, "::1") == 0 ||
			    strcasecmp(host, "localhost") == 0);
		}
	}
	if (f[3] != NULL && authz_flow_jkt_valid(f[3]))
		CHECK(strlen(f[3]) == AUTHZ_FLOW_JKT_LEN);
	free(copy);
	return 0;
}
