/* fuzz_discovery.c -- libFuzzer target for the metadata documents consentd
 * fetches: the IdP's OpenID discovery document (oidc_meta_parse) and a
 * resource provider's RFC 8414 / OpenID metadata (provider_meta_parse), for a
 * provider that discovers everything and one with a configured token
 * endpoint.  Byte 0 picks the parser; the rest is the body.  Never crashes or
 * leaks; accepted metadata names exactly the configured issuer, every
 * endpoint passes httpc_url_allowed, and a configured endpoint is kept. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "httpc.h"
#include "oidc.h"
#include "provider.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

#define IDP "https://idp.example.com"
#define PROV "https://github.example.com"
#define CFG \
	"[server]\npublic_url = https://consent.example.com\n" \
	"[oidc]\nissuer = " IDP "\nclient_id = consentd\nclient_secret = oidc-secret\n" \
	"[gateway]\nclient_secret = gateway-secret-0123456789\n" \
	"[resource.a]\nbase_url = https://api.example.com\nprovider_issuer = " PROV "\n" \
	"provider_client_id = cid\nprovider_client_secret = csecret\n" \
	"[resource.b]\nbase_url = https://api.example.com\nprovider_issuer = " PROV "\n" \
	"provider_client_id = cid\nprovider_client_secret = csecret\n" \
	"provider_token_endpoint = https://tok.example.com/token\n" \
	"[scope.a.read]\n[scope.b.read]\n"

static struct config *cfg;
static struct provider *pa, *pb;

static void cleanup(void)
{
	provider_free(pa);
	provider_free(pb);
	config_free(cfg);
}

static void setup(void)
{
	if (config_load_string(CFG, strlen(CFG), "fuzz.conf", NULL, NULL, &cfg) != CS_OK ||
	    provider_new(config_resource(cfg, "a"), &pa) != CS_OK ||
	    provider_new(config_resource(cfg, "b"), &pb) != CS_OK)
		abort();
	atexit(cleanup);
}

static void url_ok(const char *u, int optional)
{
	if (optional && u == NULL)
		return;
	CHECK(u != NULL && httpc_url_allowed(u));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *body;

	if (cfg == NULL)
		setup();
	if (size < 1 || size > 65536 || (body = malloc(size)) == NULL)
		return 0;
	memcpy(body, data + 1, size - 1);
	body[size - 1] = '\0';
	switch (data[0] % 3) {
	case 0: {
		struct oidc_meta *m = NULL;
		enum cs_err e = oidc_meta_parse(IDP, body, &m);
		CHECK(e == CS_OK || e == CS_EINVAL || e == CS_ENOMEM);
		if (e == CS_OK) {
			CHECK(strcmp(m->issuer, IDP) == 0);
			url_ok(m->authorization_endpoint, 0);
			url_ok(m->token_endpoint, 0);
			url_ok(m->jwks_uri, 0);
			url_ok(m->end_session_endpoint, 1);
			oidc_meta_free(m);
		} else {
			CHECK(m == NULL);
		}
		break;
	}
	default: {
		int configured = data[0] % 3 == 2;
		struct provider_meta *m = NULL;
		enum cs_err e = provider_meta_parse(configured ? pb : pa, body, &m);
		CHECK(e == CS_OK || e == CS_EINVAL || e == CS_ENOENT || e == CS_ENOMEM);
		if (e == CS_OK) {
			CHECK(m->issuer != NULL && strcmp(m->issuer, PROV) == 0);
			url_ok(m->authorization_endpoint, 0);
			url_ok(m->token_endpoint, 0);
			url_ok(m->revocation_endpoint, 1);
			if (configured)
				CHECK(strcmp(m->token_endpoint, "https://tok.example.com/token") == 0);
			provider_meta_free(m);
		} else {
			CHECK(m == NULL);
		}
		break;
	}
	}
	free(body);
	return 0;
}
