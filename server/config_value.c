/* config_value.c -- typed getters and value checks for config: integers with
 * bounds, booleans, enums, word lists, URLs, listen addresses and routes, the
 * files a value names (a secret file, a CA file), each refusal reported with
 * where the value came from.  It must never print a secret value. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <ini.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/x509_vfy.h>
#include "buf.h"
#include "config.h"
#include "config_priv.h"
#include "jws.h"

static const char *const route_methods[] = { "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE",
	NULL };

/* ---------------------------------------------------------------- typed getters */

static void missing(struct ctx *c, const struct section *s, const char *key)
{
	cfg_err_line(c, s->line, key, "required in [%s]", s->name);
}

/* *out = a copy of the value (or of def when absent; NULL for an empty value with
 * S_EMPTY_NULL).  Returns the entry when a usable value was given, else NULL. */
const struct entry *cfg_get_str(struct ctx *c, const struct section *s, const char *key,
    const char *def, unsigned flags, char **out)
{
	*out = NULL;
	if (flags & S_REQUIRED)
		cfg_note_default(c, s, key, 'r', "%s", "");
	else
		cfg_note_default(c, s, key, def != NULL ? 'd' : 'n', "%s", def != NULL ? def : "");
	const struct entry *e = cfg_find(s, key);
	if (e == NULL) {
		if (flags & S_REQUIRED)
			missing(c, s, key);
		else if (def != NULL)
			*out = cfg_xstrdup(c, def);
		return NULL;
	}
	if (e->bad)
		return NULL;
	const char *v = cfg_value_of(e);
	if (*v == '\0') {
		if (flags & S_EMPTY_NULL)
			return NULL;
		if (!(flags & S_EMPTY_OK)) {
			cfg_err_e(c, e, "must not be empty");
			return NULL;
		}
	}
	*out = cfg_xstrdup(c, v);
	return *out != NULL ? e : NULL;
}

void cfg_get_int(struct ctx *c, const struct section *s, const char *key, int64_t def,
    int64_t min, int64_t max, int64_t *out)
{
	*out = def;
	cfg_note_default(c, s, key, 'd', "%lld", (long long)def);
	const struct entry *e = cfg_find(s, key);
	if (e == NULL || e->bad)
		return;
	const char *why = cfg_parse_int(cfg_value_of(e), min, max, out);
	if (why != NULL) {
		cfg_err_e(c, e, "%s (expected an integer from %lld to %lld)", why, (long long)min,
		    (long long)max);
		*out = def;
	}
}

void cfg_get_bool(struct ctx *c, const struct section *s, const char *key, bool def,
    bool *out)
{
	static const char *const yes[] = { "true", "yes", "1", "on", NULL };
	static const char *const no[] = { "false", "no", "0", "off", NULL };
	*out = def;
	cfg_note_default(c, s, key, 'd', "%s", def ? "true" : "false");
	const struct entry *e = cfg_find(s, key);
	if (e == NULL || e->bad)
		return;
	const char *v = cfg_value_of(e);
	for (size_t i = 0; yes[i] != NULL; i++) {
		if (strcasecmp(v, yes[i]) == 0) {
			*out = true;
			return;
		}
		if (strcasecmp(v, no[i]) == 0) {
			*out = false;
			return;
		}
	}
	cfg_err_e(c, e, "not a boolean (expected true/false, yes/no, on/off or 1/0)");
}

void cfg_get_rate(struct ctx *c, const struct section *s, const char *key, int64_t def_milli,
    int64_t max, int64_t *out)
{
	*out = def_milli;
	if (def_milli % 1000 == 0)
		cfg_note_default(c, s, key, 'd', "%lld", (long long)(def_milli / 1000));
	else
		cfg_note_default(c, s, key, 'd', "%lld.%03lld", (long long)(def_milli / 1000),
		    (long long)(def_milli % 1000));
	const struct entry *e = cfg_find(s, key);
	if (e == NULL || e->bad)
		return;
	const char *v = cfg_value_of(e), *p = v;
	int64_t whole = 0, frac = 0;
	int nfrac = 0;
	/* Digits, then at most three decimals: no sign, exponent, or spaces. */
	while (*p >= '0' && *p <= '9' && whole <= max)
		whole = whole * 10 + (*p++ - '0');
	if (p == v || (*p == '.' && p[1] == '\0'))
		goto bad;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9' && nfrac < 3; nfrac++)
			frac = frac * 10 + (*p++ - '0');
	if (*p != '\0')
		goto bad;
	if (whole > max || (whole == max && frac > 0)) {
		cfg_err_e(c, e, "out of range (expected requests a second from 0 to %lld; 0 is off)",
		    (long long)max);
		return;
	}
	while (nfrac++ < 3)
		frac *= 10;
	*out = whole * 1000 + frac;
	return;
bad:
	cfg_err_e(c, e, "not a rate (expected requests a second such as 20 or 0.5, at most "
	    "three decimals; 0 is off)");
}

/* One of names; *out = its index (or def). */
void cfg_get_enum(struct ctx *c, const struct section *s, const char *key,
    const char *const *names, int def, int *out)
{
	*out = def;
	cfg_note_default(c, s, key, 'd', "%s", names[def]);
	const struct entry *e = cfg_find(s, key);
	if (e == NULL || e->bad)
		return;
	int i = cfg_list_index(names, cfg_value_of(e));
	if (i >= 0) {
		*out = i;
		return;
	}
	struct buf b;
	buf_init(&b, 512);
	enum cs_err r = CS_OK;
	for (size_t j = 0; r == CS_OK && names[j] != NULL; j++)
		r = buf_printf(&b, "%s%s", j ? ", " : "", names[j]);
	cfg_err_e(c, e, "must be one of: %s", r == CS_OK && b.data ? b.data : "?");
	buf_clear(&b);
}

/* ---------------------------------------------------------------- value checks */

static bool is_loopback_host(const char *h, size_t n)
{
	return (n == 9 && memcmp(h, "127.0.0.1", 9) == 0) ||
	    (n == 9 && strncasecmp(h, "localhost", 9) == 0) ||
	    (n == 5 && memcmp(h, "[::1]", 5) == 0);
}

static bool parse_port(const char *p, size_t n, uint16_t *out)
{
	if (n == 0 || n > 5)
		return false;
	unsigned v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)p[i]))
			return false;
		v = v * 10 + (unsigned)(p[i] - '0');
	}
	if (v < 1 || v > 65535)
		return false;
	*out = (uint16_t)v;
	return true;
}

/* A URL's authority a (alen bytes, no userinfo): an IPv6 literal or a host
 * name, then an optional port.  NULL with *hlen the host's length, or what
 * is wrong with it. */
static const char *url_authority_check(const char *a, size_t alen, size_t *hlen)
{
	const char *port = NULL;
	uint16_t pn;

	if (a[0] == '[') {
		const char *rb = memchr(a, ']', alen);
		char ip6[INET6_ADDRSTRLEN + 1];
		unsigned char tmp[16];
		size_t ilen = rb != NULL ? (size_t)(rb - a - 1) : 0;
		if (rb == NULL || ilen == 0 || ilen >= sizeof ip6)
			return "URL has a malformed IPv6 host";
		memcpy(ip6, a + 1, ilen);
		ip6[ilen] = '\0';
		if (inet_pton(AF_INET6, ip6, tmp) != 1)
			return "URL has a malformed IPv6 host";
		*hlen = (size_t)(rb - a) + 1;
		if (*hlen < alen) {
			if (a[*hlen] != ':')
				return "URL has a malformed host";
			port = a + *hlen + 1;
		}
	} else {
		const char *colon = memchr(a, ':', alen);
		*hlen = colon != NULL ? (size_t)(colon - a) : alen;
		if (colon != NULL)
			port = colon + 1;
		for (size_t i = 0; i < *hlen; i++) {
			unsigned char ch = (unsigned char)a[i];
			if (!(isalnum(ch) || ch == '-' || ch == '.' || ch == '_'))
				return "URL has a malformed host";
		}
	}
	if (*hlen == 0)
		return "URL has no host";
	if (port != NULL && !parse_port(port, (size_t)(a + alen - port), &pn))
		return "URL has a bad port (expected 1 to 65535)";
	return NULL;
}

/* An http(s) URL: https, or http on a loopback host; no userinfo, no fragment;
 * a path and a query only where allowed (a lone "/" path is always fine).
 * *https tells the scheme.  Reports and returns false when the URL is unusable. */
bool cfg_check_url(struct ctx *c, const struct entry *e, const char *v, unsigned allow,
    bool *https)
{
	for (const char *p = v; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f) {
			cfg_err_e(c, e, "URL must be printable ASCII without spaces");
			return false;
		}
	const char *a;
	if (strncmp(v, "https://", 8) == 0) {
		*https = true;
		a = v + 8;
	} else if (strncmp(v, "http://", 7) == 0) {
		*https = false;
		a = v + 7;
	} else {
		cfg_err_e(c, e, "must be an https:// URL");
		return false;
	}
	size_t alen = strcspn(a, "/?#");
	const char *rest = a + alen;
	if (memchr(a, '@', alen) != NULL) {
		cfg_err_e(c, e, "URL must not contain user information ('@')");
		return false;
	}
	const char *host = a, *why;
	size_t hlen;
	if ((why = url_authority_check(a, alen, &hlen)) != NULL) {
		cfg_err_e(c, e, "%s", why);
		return false;
	}
	bool ok = true;
	if (strchr(rest, '#') != NULL) {
		cfg_err_e(c, e, "URL must not have a fragment ('#')");
		ok = false;
	}
	if (strchr(rest, '?') != NULL && !(allow & URL_QUERY)) {
		cfg_err_e(c, e, "URL must not have a query ('?')");
		ok = false;
	}
	size_t plen = strcspn(rest, "?#");
	if (plen > 0 && !(allow & URL_PATH) && !(plen == 1 && rest[0] == '/')) {
		cfg_err_e(c, e, "URL must not have a path (only scheme://host[:port])");
		ok = false;
	}
	if (!*https && !is_loopback_host(host, hlen)) {
		cfg_err_e(c, e, "http:// is allowed only for 127.0.0.1, localhost or [::1]; use https://");
		ok = false;
	}
	return ok;
}

/* listen = host:port with host an IPv4 address, "localhost", or [IPv6]. */
void cfg_check_listen(struct ctx *c, const struct entry *e, const char *v, char **host,
    uint16_t *port)
{
	const char *h = v, *p;
	size_t hlen;
	char tmp[INET6_ADDRSTRLEN + 1];
	unsigned char addr[16];
	if (v[0] == '[') {
		const char *rb = strchr(v, ']');
		if (rb == NULL || rb[1] != ':') {
			cfg_err_e(c, e, "expected HOST:PORT (IPv6 as [ADDRESS]:PORT)");
			return;
		}
		h = v + 1;
		hlen = (size_t)(rb - h);
		p = rb + 2;
		if (hlen == 0 || hlen >= sizeof tmp) {
			cfg_err_e(c, e, "malformed IPv6 address");
			return;
		}
		memcpy(tmp, h, hlen);
		tmp[hlen] = '\0';
		if (inet_pton(AF_INET6, tmp, addr) != 1) {
			cfg_err_e(c, e, "malformed IPv6 address");
			return;
		}
	} else {
		const char *colon = strrchr(v, ':');
		if (colon == NULL) {
			cfg_err_e(c, e, "expected HOST:PORT");
			return;
		}
		hlen = (size_t)(colon - v);
		p = colon + 1;
		if (hlen == 0 || hlen >= sizeof tmp) {
			cfg_err_e(c, e, "host must be an IPv4 address, localhost or [IPv6]");
			return;
		}
		memcpy(tmp, v, hlen);
		tmp[hlen] = '\0';
		if (strcmp(tmp, "localhost") != 0 && inet_pton(AF_INET, tmp, addr) != 1) {
			cfg_err_e(c, e, "host must be an IPv4 address, localhost or [IPv6]");
			return;
		}
	}
	if (!parse_port(p, strlen(p), port)) {
		cfg_err_e(c, e, "port must be from 1 to 65535");
		return;
	}
	*host = cfg_xstrndup(c, h, hlen);
}

/* RFC 3986 absolute URI: scheme ":" something, no fragment, no spaces. */
bool cfg_check_abs_uri(struct ctx *c, const struct entry *e, const char *v)
{
	size_t i = 0;
	if (!isalpha((unsigned char)v[0]))
		goto bad;
	while (isalnum((unsigned char)v[i]) || v[i] == '+' || v[i] == '-' || v[i] == '.')
		i++;
	if (v[i] != ':' || v[i + 1] == '\0')
		goto bad;
	for (const char *p = v; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			goto bad;
	if (strchr(v, '#') != NULL) {
		cfg_err_e(c, e, "must not have a fragment ('#')");
		return false;
	}
	return true;
bad:
	cfg_err_e(c, e, "must be an absolute URI (scheme:...), printable ASCII without spaces");
	return false;
}

/* route = METHOD /path/{capture}/...; captures are whole names [A-Za-z0-9_], unique. */
void cfg_check_route(struct ctx *c, const struct entry *e, const char *v, char **method,
    char **path)
{
	char **w = NULL;
	size_t n = 0;
	char *names = NULL;
	w = cfg_split_words(c, v, &n);
	if (w == NULL)
		goto out;
	if (n != 2 || !cfg_in_list(route_methods, w[0])) {
		cfg_err_e(c, e, "expected 'METHOD /path' with METHOD one of GET HEAD POST PUT PATCH DELETE");
		goto out;
	}
	const char *p = w[1];
	if (p[0] != '/') {
		cfg_err_e(c, e, "the path must start with '/'");
		goto out;
	}
	size_t plen = strlen(p);
	names = calloc(plen + 2, 1);       /* "\n"-separated capture names seen so far */
	if (names == NULL) {
		c->oom = true;
		goto out;
	}
	size_t nlen = 0;
	for (size_t i = 0; i < plen; i++) {
		unsigned char ch = (unsigned char)p[i];
		if (ch <= 0x20 || ch >= 0x7f || ch == '?' || ch == '#' || ch == '}') {
			cfg_err_e(c, e, "the path must be printable ASCII without spaces, '?', '#' or a "
			    "stray '}'");
			goto out;
		}
		if (ch == '%') {
			cfg_err_e(c, e, "the path must not hold '%%': a literal segment is matched "
			    "decoded and sent as written");
			goto out;
		}
		if (ch == '/' && p[i + 1] == '\0' && i > 0) {
			cfg_err_e(c, e, "the path must not end with '/' (a request path never does)");
			goto out;
		}
		if (ch == '/' && (p[i + 1] == '/' ||
		    (p[i + 1] == '.' && (p[i + 2] == '/' || p[i + 2] == '\0')) ||
		    (p[i + 1] == '.' && p[i + 2] == '.' && (p[i + 3] == '/' || p[i + 3] == '\0')))) {
			cfg_err_e(c, e, "the path must not contain empty, '.' or '..' segments");
			goto out;
		}
		if (ch == '{') {
			size_t j = i + 1;
			if (p[i - 1] != '/') {
				cfg_err_e(c, e, "a capture must be a whole segment: /{NAME}/");
				goto out;
			}
			while (isalnum((unsigned char)p[j]) || p[j] == '_')
				j++;
			if (p[j] != '}' || j == i + 1) {
				cfg_err_e(c, e, "a capture must be {NAME} with letters, digits or '_'");
				goto out;
			}
			if (p[j + 1] != '/' && p[j + 1] != '\0') {
				cfg_err_e(c, e, "a capture must be a whole segment: /{NAME}/");
				goto out;
			}
			size_t cl = j - i - 1;
			for (const char *q = names; *q;) {
				const char *nl = strchr(q, '\n');
				if ((size_t)(nl - q) == cl && memcmp(q, p + i + 1, cl) == 0) {
					cfg_err_e(c, e, "capture {%.*s} appears twice", (int)cl, p + i + 1);
					goto out;
				}
				q = nl + 1;
			}
			memcpy(names + nlen, p + i + 1, cl);
			nlen += cl;
			names[nlen++] = '\n';
			i = j;
		}
	}
	*method = cfg_xstrdup(c, w[0]);
	*path = cfg_xstrdup(c, w[1]);
out:
	free(names);
	cfg_free_strv(w);
}

/* Base64 (standard alphabet) of exactly 32 bytes: 43 characters, or 44 with one '='. */
bool cfg_is_b64_32(const char *s)
{
	size_t n = strlen(s);
	if (n == 44 && s[43] == '=')
		n = 43;
	else if (n != 43)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '+' || s[i] == '/'))
			return false;
	/* the last character carries 2 bits of padding that must be zero */
	return strchr("AEIMQUYcgkosw048", s[42]) != NULL;
}

/* A list of words: at least one, no duplicates; each checked by ok(). */
char **cfg_get_words(struct ctx *c, const struct section *s, const struct words_key *k,
    size_t *count, bool *given)
{
	const char *key = k->key, *def = k->def, *what = k->what;
	bool (*ok)(const char *) = k->ok;
	char *v = NULL;
	char **w = NULL;
	size_t n = 0, dup;
	*count = 0;
	*given = false;
	const struct entry *e = cfg_get_str(c, s, key, def, S_EMPTY_OK, &v);
	if (v == NULL)
		goto out;
	*given = e != NULL;
	w = cfg_split_words(c, v, &n);
	if (w == NULL || e == NULL)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (!ok(w[i])) {
			cfg_err_e(c, e, "'%s' is not a valid %s", w[i], what);
			goto out;
		}
	if (cfg_has_dup(w, n, &dup))
		cfg_err_e(c, e, "'%s' is listed twice", w[dup]);
out:
	if (w != NULL)
		*count = n;
	free(v);
	return w;
}

/* ---------------------------------------------------------------- files */

/* A secret file (token_file, password_file): the whole file is the secret,
 * one final newline (or CRLF) allowed; read into buf (cap bytes), *n its
 * length.  false when it could not be read (said through c). */
bool cfg_read_secret_file(struct ctx *c, const struct entry *e, const char *path, char *buf,
    size_t cap, size_t *n)
{
	FILE *f = fopen(path, "re");
	if (f == NULL) {
		cfg_err_e(c, e, "cannot open '%s': %s", path, strerror(errno));
		return false;
	}
	*n = fread(buf, 1, cap - 1, f);
	bool ok = !ferror(f);
	if (!ok)
		cfg_err_e(c, e, "cannot read '%s': %s", path, strerror(errno));
	fclose(f);
	buf[*n] = '\0';
	if (*n > 0 && buf[*n - 1] == '\n')
		buf[--*n] = '\0';
	if (*n > 0 && buf[*n - 1] == '\r')
		buf[--*n] = '\0';
	return ok;
}

/* [mcp] cimd_ca_file: a readable PEM file of at least one CA certificate. */
void cfg_check_ca_file(struct ctx *c, const struct entry *e, const char *path)
{
	X509_STORE *st = X509_STORE_new();
	if (st == NULL) {
		c->oom = true;
		return;
	}
	if (X509_STORE_load_file(st, path) != 1)
		cfg_err_e(c, e, "'%s' is not a readable PEM file of CA certificates", path);
	X509_STORE_free(st);
}
