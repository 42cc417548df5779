/* fuzz_proxy_path.c -- libFuzzer target for proxy mode's path handling: the
 * input is normalised as the raw rest of a /proxy/ path, matched against a
 * fixed route table, and the upstream URL rebuilt.  Never crashes; an accepted
 * path never holds an empty, "." or ".." segment, a '/' or '\\' inside a
 * segment; the rebuilt URL never holds a dot segment or an encoded slash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

#define CFG \
	"[server]\npublic_url = https://consent.example.com\n" \
	"[oidc]\nissuer = https://idp.example.com\nclient_id = consentd\nclient_secret = oidc-secret\n" \
	"[gateway]\nclient_secret = gateway-secret-0123456789\n" \
	"[resource.gh]\nbase_url = https://api.example.com/v1\n" \
	"[scope.gh.read]\n" \
	"[action.gh.a]\nscope = read\nroute = GET /repos/{owner}/{repo}/issues\n" \
	"[action.gh.b]\nscope = read\nroute = GET /x/{one}\n" \
	"[action.gh.c]\nscope = read\nroute = GET /{any}/{two}/z\n"

static struct config *cfg;

static void check_url(const char *url)
{
	const char *path = url + strlen("https://api.example.com/v1");
	size_t plen = strcspn(path, "?");
	CHECK(strncmp(url, "https://api.example.com/v1/", 27) == 0);
	for (size_t i = 0; i < plen; i++) {
		CHECK(path[i] != '\\');
		if (path[i] == '/') {
			const char *s = path + i + 1;
			size_t sl = strcspn(s, "/?");
			CHECK(sl != 0);
			CHECK(!(sl == 1 && s[0] == '.'));
			CHECK(!(sl == 2 && s[0] == '.' && s[1] == '.'));
		}
		if (path[i] == '%' && i + 2 < plen) {
			CHECK(!(path[i + 1] == '2' && (path[i + 2] == 'f' || path[i + 2] == 'F')));
			CHECK(!(path[i + 1] == '5' && (path[i + 2] == 'c' || path[i + 2] == 'C')));
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proxy_path p;
	struct proxy_match m;
	char *raw, *url = NULL;

	if (cfg == NULL && config_load_string(CFG, strlen(CFG), "fuzz.conf", NULL, NULL, &cfg) != CS_OK)
		__builtin_trap();
	if (size > 8192)
		return 0;
	if ((raw = malloc(size + 1)) == NULL)
		return 0;
	memcpy(raw, data, size);
	raw[size] = '\0';
	if (proxy_path_normalise(raw, &p) == CS_OK) {
		CHECK(p.n > 0);
		for (size_t i = 0; i < p.n; i++) {
			CHECK(p.seg[i][0] != '\0');
			CHECK(strcmp(p.seg[i], ".") != 0 && strcmp(p.seg[i], "..") != 0);
			CHECK(strchr(p.seg[i], '/') == NULL && strchr(p.seg[i], '\\') == NULL);
		}
		if (proxy_route_match(cfg, "gh", "GET", &p, &m) == CS_OK) {
			CHECK(m.action != NULL);
			if (proxy_url_build("https://api.example.com/v1", m.action->route_path, &m, NULL,
			    &url) == CS_OK) {
				check_url(url);
				free(url);
			}
			proxy_match_clear(&m);
		}
		proxy_path_clear(&p);
	}
	free(raw);
	return 0;
}
