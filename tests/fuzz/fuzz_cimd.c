/* fuzz_cimd.c -- libFuzzer target for Client ID Metadata Documents (cimd.c),
 * which arrive from anyone: a client_id at /authorize and the document its URL
 * serves.  The input is a URL, a LF, then a document.  The URL goes through
 * cimd_url_check, cimd_url_host, the policy and the config's entry checks; the
 * document through cimd_doc_parse (for the URL when it passed, else for a fixed
 * one); the URL line also through the Cache-Control parser.  Never crashes or
 * leaks; whatever is accepted keeps the rules the header promises. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cimd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static void check_url(const char *url)
{
	const char *why = NULL;
	char host[256];
	uint16_t port = 0;
	if (cimd_url_check(url, &why) != CS_OK) {
		CHECK(why != NULL && why[0] != '\0');
		CHECK(cimd_url_host(url, host, sizeof host, &port) == CS_EINVAL);
		CHECK(!cimd_policy_allows(&(struct cimd_policy){ CIMD_ALLOW_ANY, NULL, NULL }, url,
		    &why));
		return;
	}
	size_t n = strlen(url);
	CHECK(n <= CIMD_URL_MAX && strncmp(url, "https://", 8) == 0);
	CHECK(strchr(url, '#') == NULL && strchr(url, '?') == NULL && strchr(url, '\\') == NULL);
	const char *path = strchr(url + 8, '/');
	CHECK(path != NULL);
	CHECK(memchr(url + 8, '@', (size_t)(path - url - 8)) == NULL);
	CHECK(strstr(url, "/../") == NULL && strstr(url, "/./") == NULL);
	CHECK(cimd_url_host(url, host, sizeof host, &port) == CS_OK && host[0] != '\0' && port > 0);
	/* The policy: any allows, none refuses, and a prefix match is a real prefix. */
	CHECK(cimd_policy_allows(&(struct cimd_policy){ CIMD_ALLOW_ANY, NULL, NULL }, url, &why));
	CHECK(!cimd_policy_allows(&(struct cimd_policy){ CIMD_ALLOW_NONE, NULL, NULL }, url, &why));
	const char *const prefixes[] = { "https://good.example/x/", NULL };
	const char *const hosts[] = { "good.example", NULL };
	if (cimd_policy_allows(&(struct cimd_policy){ CIMD_ALLOW_PREFIXES, NULL, prefixes }, url, &why))
		CHECK(strncmp(url, prefixes[0], strlen(prefixes[0])) == 0);
	if (cimd_policy_allows(&(struct cimd_policy){ CIMD_ALLOW_HOSTS, hosts, NULL }, url, &why))
		CHECK(strcasecmp(host, "good.example") == 0 && port == 443);
	if (cimd_prefix_entry_valid(url))
		CHECK(url[n - 1] == '/');
}

static void check_doc(const char *url, const char *doc, size_t len)
{
	struct cimd_doc d = { 0 }, c = { 0 };
	char why[CIMD_WHY_MAX];
	enum cs_err e = cimd_doc_parse(url, doc, len, &d, why, sizeof why);
	if (e != CS_OK) {
		CHECK(e == CS_EINVAL || e == CS_ENOMEM);
		CHECK(d.client_id == NULL && d.redirect_uris == NULL);
		return;
	}
	CHECK(strcmp(d.client_id, url) == 0);
	CHECK(d.nredirect_uris >= 1 && d.nredirect_uris <= CIMD_MAX_REDIRECTS);
	CHECK(d.redirect_uris[d.nredirect_uris] == NULL);
	for (size_t i = 0; i < d.nredirect_uris; i++) {
		const char *r = d.redirect_uris[i];
		CHECK(strncmp(r, "https://", 8) == 0 || strncmp(r, "http://", 7) == 0);
		CHECK(strchr(r, '#') == NULL);
	}
	CHECK(d.auth == CIMD_AUTH_NONE || d.auth == CIMD_AUTH_PRIVATE_KEY_JWT);
	if (d.auth == CIMD_AUTH_PRIVATE_KEY_JWT)
		CHECK((d.jwks == NULL) != (d.jwks_uri == NULL));
	if (d.client_name != NULL)
		CHECK(strlen(d.client_name) >= 1 && strlen(d.client_name) <= CIMD_NAME_MAX);
	if (d.logo_uri != NULL)
		CHECK(strncmp(d.logo_uri, "https://", 8) == 0);
	if (cimd_doc_copy(&d, &c) == CS_OK) {
		CHECK(strcmp(c.client_id, d.client_id) == 0 && c.nredirect_uris == d.nredirect_uris);
		cimd_doc_clear(&c);
	}
	cimd_doc_clear(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t ul = nl ? (size_t)(nl - data) : size;
	char *url = malloc(ul + 1);
	if (url == NULL)
		return 0;
	memcpy(url, data, ul);
	url[ul] = '\0';
	check_url(url);
	CHECK(cimd_cache_control_max_age(url) >= -1);
	if (nl != NULL) {
		const char *doc = (const char *)nl + 1;
		size_t dl = size - ul - 1;
		const char *why = NULL;
		check_doc(cimd_url_check(url, &why) == CS_OK ? url : "https://client.example/c.json",
		    doc, dl);
	}
	free(url);
	return 0;
}
