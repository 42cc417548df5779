/* config_placeholder.c -- the load's last step for a deployed configuration: a
 * secret still a placeholder, or a documentation host (RFC 2606, 6761, 5737, 3849)
 * in a URL consentd publishes or connects to, is an error unless [server]
 * development = true.  It must never print a secret's value. */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>
#include "config_priv.h"

/* The keys checked, by section kind: what a value there is. */
enum ph_kind { PH_SECRET, PH_URL };
static const struct {
	enum sec_kind sec;
	const char   *key;
	enum ph_kind  kind;
} checked[] = {
	{ SK_SERVER,   "public_url", PH_URL },
	{ SK_DATABASE, "url", PH_URL },
	{ SK_DATABASE, "password", PH_SECRET },
	{ SK_OIDC,     "issuer", PH_URL },
	{ SK_OIDC,     "client_secret", PH_SECRET },
	{ SK_GATEWAY,  "client_secret", PH_SECRET },
	{ SK_GATEWAY,  "client_secret_sha256", PH_SECRET },
	{ SK_GATEWAY,  "events_uri", PH_URL },
	{ SK_GATEWAY,  "jwks_uri", PH_URL },
	{ SK_METRICS,  "token", PH_SECRET },
	{ SK_RESOURCE, "provider_issuer", PH_URL },
	{ SK_RESOURCE, "provider_authorization_endpoint", PH_URL },
	{ SK_RESOURCE, "provider_token_endpoint", PH_URL },
	{ SK_RESOURCE, "provider_revocation_endpoint", PH_URL },
	{ SK_RESOURCE, "provider_base_url", PH_URL },
	{ SK_RESOURCE, "provider_client_secret", PH_SECRET },
	{ SK_RESOURCE, "base_url", PH_URL },
};

/* The words an example puts where a secret goes (compared without case). */
static const char *const placeholder_words[][2] = {
	{ "replace-me", "it says REPLACE-ME" }, { "replace_me", "it says REPLACE_ME" },
	{ "replaceme", "it says REPLACEME" }, { "change-me", "it says CHANGE-ME" },
	{ "change_me", "it says CHANGE_ME" }, { "changeme", "it says CHANGEME" },
	{ "placeholder", "it says placeholder" },
};

/* Why s is a placeholder secret, NULL when it is not: it holds one of the words
 * above, is written "<...>", or is one character repeated ("...", "xxxx", 64 zeros). */
static const char *secret_placeholder(const char *s)
{
	size_t n = strlen(s);
	for (size_t i = 0; i < sizeof placeholder_words / sizeof *placeholder_words; i++) {
		size_t w = strlen(placeholder_words[i][0]);
		for (size_t k = 0; k + w <= n; k++)
			if (strncasecmp(s + k, placeholder_words[i][0], w) == 0)
				return placeholder_words[i][1];
	}
	if (n >= 2 && s[0] == '<' && s[n - 1] == '>')
		return "written as <...>";
	bool same = n > 0;
	for (size_t i = 1; i < n && same; i++)
		same = s[i] == s[0];
	return same ? "one character repeated" : NULL;
}

/* Does the lowercased host h (no trailing dot) equal name or end in ".name"? */
static bool in_domain(const char *h, const char *name)
{
	size_t hl = strlen(h), nl = strlen(name);
	if (hl == nl)
		return strcmp(h, name) == 0;
	return hl > nl && h[hl - nl - 1] == '.' && strcmp(h + hl - nl, name) == 0;
}

/* Why host h (lowercased, no brackets, no port) is a documentation name, NULL
 * when it is not.  localhost and loopback addresses are real development hosts. */
static const char *doc_host(const char *h)
{
	static const char *const names[] = { "example.com", "example.net", "example.org", NULL };
	static const char *const tlds[] = { "example", "test", "invalid", NULL };
	unsigned char a4[4], a6[16];
	for (size_t i = 0; names[i] != NULL; i++)
		if (in_domain(h, names[i]))
			return "a documentation domain (RFC 2606)";
	for (size_t i = 0; tlds[i] != NULL; i++)
		if (in_domain(h, tlds[i]))
			return "under a reserved top-level domain (RFC 2606, 6761)";
	if (inet_pton(AF_INET, h, a4) == 1 &&
	    ((a4[0] == 192 && a4[1] == 0 && a4[2] == 2) ||
	     (a4[0] == 198 && a4[1] == 51 && a4[2] == 100) ||
	     (a4[0] == 203 && a4[1] == 0 && a4[2] == 113)))
		return "a documentation address (RFC 5737)";
	if (inet_pton(AF_INET6, h, a6) == 1 && a6[0] == 0x20 && a6[1] == 0x01 && a6[2] == 0x0d &&
	    a6[3] == 0xb8)
		return "a documentation address (RFC 3849)";
	return NULL;
}

/* The host of URL v into out (lowercased, without userinfo, brackets, port or a
 * trailing dot); false when v has no "scheme://host" or the host does not fit. */
static bool url_host(const char *v, char *out, size_t cap)
{
	const char *p = strstr(v, "://");
	if (p == NULL)
		return false;
	p += 3;
	size_t end = strcspn(p, "/?#");
	const char *at = memchr(p, '@', end);
	if (at != NULL) {
		end -= (size_t)(at + 1 - p);
		p = at + 1;
	}
	size_t hl;
	if (end > 0 && *p == '[') {
		const char *close = memchr(p, ']', end);
		if (close == NULL)
			return false;
		p++;
		hl = (size_t)(close - p);
	} else {
		const char *colon = memchr(p, ':', end);
		hl = colon != NULL ? (size_t)(colon - p) : end;
	}
	if (hl > 0 && p[hl - 1] == '.')
		hl--;
	if (hl == 0 || hl >= cap)
		return false;
	for (size_t i = 0; i < hl; i++)
		out[i] = (char)tolower((unsigned char)p[i]);
	out[hl] = '\0';
	return true;
}

/* CONSENTD_<SECTION>_<KEY> for a message: the variable that gives a secret. */
static void env_name(const struct section *s, const char *key, char *out, size_t cap)
{
	size_t n = 0;
	const char *parts[] = { "CONSENTD_", s->name, "_", key };
	for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
		for (const char *q = parts[i]; *q != '\0' && n + 1 < cap; q++)
			out[n++] = *q == '.' || *q == ':' || *q == '-' ? '_' :
			    (char)toupper((unsigned char)*q);
	out[n] = '\0';
}

void cfg_check_placeholders(struct ctx *c)
{
	static const char allow[] = "[server] development = true allows it in a test setup";
	for (size_t i = 0; i < c->nsecs; i++) {
		const struct section *s = &c->secs[i];
		for (size_t k = 0; k < sizeof checked / sizeof *checked; k++) {
			if (checked[k].sec != s->kind)
				continue;
			const struct entry *e = cfg_find(s, checked[k].key);
			if (e == NULL || e->bad)
				continue;
			const char *v = cfg_value_of(e), *why;
			char host[256], var[160];
			if (*v == '\0')
				continue;
			if (checked[k].kind == PH_SECRET && (why = secret_placeholder(v)) != NULL) {
				env_name(s, checked[k].key, var, sizeof var);
				cfg_err_e(c, e, "a placeholder in [%s] (%s): give the real secret, here "
				    "or in %s; %s", s->name, why, var, allow);
			} else if (checked[k].kind == PH_URL && url_host(v, host, sizeof host) &&
			    (why = doc_host(host)) != NULL) {
				cfg_err_e(c, e, "%s in [%s] is %s, not a real host: give this "
				    "deployment's; %s", host, s->name, why, allow);
			}
		}
	}
}
