/* cimd.c -- Client ID Metadata Documents, the checks: the client-id URL, the
 * document, where an address leads (SSRF) and the admin policy.  Pure functions
 * over outside input; it must never fetch anything (cimd_fetch.c does) and never
 * accept a document that could carry a shared secret or private key. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "buf.h"
#include "cimd.h"

/* --------------------------------------------------------------- reasons */

/* Writes a reason into why (whylen bytes); a reason too long for it becomes a
 * short generic one rather than a cut one. */
void cimd_reason(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;
	if (why == NULL || whylen == 0)
		return;
	va_start(ap, fmt);
	enum cs_err e = str_vfmt(why, whylen, fmt, ap);
	va_end(ap);
	if (e != CS_OK && str_fmt(why, whylen, "%s", "the client metadata document is refused") != CS_OK)
		why[0] = '\0';
}

/* --------------------------------------------------------------- URLs */

enum {
	U_QUERY_OK    = 1,           /* a query is allowed */
	U_PATH_OPT    = 2,           /* the path may be empty */
	U_DOTS_OK     = 4,           /* "." and ".." segments are allowed */
	U_HTTP_LOOP   = 8,           /* http:// to a loopback host is allowed */
};

struct url_parts {
	const char *host;            /* as written; an IPv6 literal without its brackets */
	size_t      hostlen;
	uint16_t    port;            /* 443 (https) or 80 (http) when none is written */
	bool        has_port, https;
	const char *path;            /* from the first '/' after the authority */
};

/* RFC 3986 characters a URL may hold (printable ASCII but space " < > \ ^ ` { | }). */
static bool url_char(unsigned char ch)
{
	return ch > 0x20 && ch < 0x7f && strchr("\"<>\\^`{|}", ch) == NULL;
}

static bool reg_name_ok(const char *h, size_t n)
{
	size_t label = 0;
	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = h[i];
		if (ch == '.') {
			if (label == 0 || h[i - 1] == '-')
				return false;     /* empty label, or one ending in '-' */
			label = 0;
			continue;
		}
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || (ch == '-' && label > 0);
		if (!ok || ++label > 63)
			return false;
	}
	return label > 0 && h[n - 1] != '-';  /* no trailing dot, no trailing '-' */
}

/* True when the segment [s, s+n) is "." or ".." once %2e is read as '.'. */
static bool dot_segment(const char *s, size_t n)
{
	size_t dots = 0;
	for (size_t i = 0; i < n;) {
		if (s[i] == '.') {
			i++;
		} else if (n - i >= 3 && s[i] == '%' && s[i + 1] == '2' &&
		    (s[i + 2] == 'e' || s[i + 2] == 'E')) {
			i += 3;
		} else {
			return false;
		}
		dots++;
	}
	return dots == 1 || dots == 2;
}

/* Parses url by the rules of flags.  what names it in reasons ("client_id"). */
/* The URL as text: not empty, at most CIMD_URL_MAX bytes, each one a URL's. */
static bool url_text_ok(const char *url, const char *what, char *why, size_t whylen)
{
	size_t n;
	if (url == NULL || url[0] == '\0') {
		cimd_reason(why, whylen, "%s is empty", what);
		return false;
	}
	n = strnlen(url, CIMD_URL_MAX + 1);
	if (n > CIMD_URL_MAX) {
		cimd_reason(why, whylen, "%s is longer than %d bytes", what, CIMD_URL_MAX);
		return false;
	}
	for (size_t i = 0; i < n; i++)
		if (!url_char((unsigned char)url[i])) {
			cimd_reason(why, whylen, "%s holds a character a URL may not (byte %zu)", what, i);
			return false;
		}
	return true;
}

/* The port after the host, from ':' at he to end (no leading zero, 1-65535). */
static bool url_port(const char *he, const char *end, struct url_parts *p, const char *what,
    char *why, size_t whylen)
{
	unsigned long port = 0;
	const char *d = he + 1;
	if (*he != ':' || d == end || end - d > 5 || *d == '0') {
		cimd_reason(why, whylen, "%s has a bad port", what);
		return false;
	}
	for (; d < end; d++) {
		if (*d < '0' || *d > '9') {
			cimd_reason(why, whylen, "%s has a bad port", what);
			return false;
		}
		port = port * 10 + (unsigned long)(*d - '0');
	}
	if (port == 0 || port > 65535) {
		cimd_reason(why, whylen, "%s has a bad port", what);
		return false;
	}
	p->port = (uint16_t)port;
	p->has_port = true;
	return true;
}

/* The authority from a to end: no userinfo, a bracketed IPv6 literal or a
 * registered name, then an optional port. */
static bool url_authority(const char *a, const char *end, struct url_parts *p, const char *what,
    char *why, size_t whylen)
{
	const char *h, *he;
	if (memchr(a, '@', (size_t)(end - a)) != NULL) {
		cimd_reason(why, whylen, "%s must not contain userinfo (user@)", what);
		return false;
	}
	if (*a == '[') {
		char lit[INET6_ADDRSTRLEN + 1];
		struct in6_addr a6;
		h = a + 1;
		he = memchr(h, ']', (size_t)(end - h));
		if (he == NULL || (size_t)(he - h) >= sizeof lit) {
			cimd_reason(why, whylen, "%s has a bad IPv6 literal", what);
			return false;
		}
		memcpy(lit, h, (size_t)(he - h));
		lit[he - h] = '\0';
		if (inet_pton(AF_INET6, lit, &a6) != 1) {
			cimd_reason(why, whylen, "%s has a bad IPv6 literal", what);
			return false;
		}
		p->host = h;
		p->hostlen = (size_t)(he - h);
		he++;                              /* past ']' */
	} else {
		h = a;
		he = memchr(a, ':', (size_t)(end - a));
		if (he == NULL)
			he = end;
		if (!reg_name_ok(h, (size_t)(he - h))) {
			cimd_reason(why, whylen, "%s has no valid host name", what);
			return false;
		}
		p->host = h;
		p->hostlen = (size_t)(he - h);
	}
	return he == end || url_port(he, end, p, what, why, whylen);
}

/* The path from s, segment by segment, then the query and fragment rules. */
static bool url_rest(const char *s, unsigned flags, const char *what, char *why, size_t whylen)
{
	while (*s == '/') {
		const char *seg = s + 1;
		const char *se = seg + strcspn(seg, "/?#");
		for (const char *q = seg; q < se; q++)
			if (*q == '%' && (hex_digit(q[1]) < 0 || hex_digit(q[2]) < 0 ||
			    (q[1] == '0' && q[2] == '0'))) {
				cimd_reason(why, whylen, "%s has a bad percent-encoding", what);
				return false;
			}
		if (!(flags & U_DOTS_OK) && dot_segment(seg, (size_t)(se - seg))) {
			cimd_reason(why, whylen, "%s must not contain a \".\" or \"..\" path segment", what);
			return false;
		}
		s = se;
	}
	if (*s == '?' && !(flags & U_QUERY_OK)) {
		cimd_reason(why, whylen, "%s must not contain a query", what);
		return false;
	}
	if (strchr(s, '#') != NULL) {
		cimd_reason(why, whylen, "%s must not contain a fragment", what);
		return false;
	}
	if (*s == '?')
		for (const char *q = s; *q; q++)
			if (*q == '%' && (hex_digit(q[1]) < 0 || hex_digit(q[2]) < 0)) {
				cimd_reason(why, whylen, "%s has a bad percent-encoding", what);
				return false;
			}
	return true;
}

static bool url_parse(const char *url, unsigned flags, const char *what, struct url_parts *p,
    char *why, size_t whylen)
{
	const char *a, *end;
	memset(p, 0, sizeof *p);
	if (!url_text_ok(url, what, why, whylen))
		return false;
	if (strncmp(url, "https://", 8) == 0) {
		p->https = true;
		a = url + 8;
		p->port = 443;
	} else if ((flags & U_HTTP_LOOP) && strncmp(url, "http://", 7) == 0) {
		a = url + 7;
		p->port = 80;
	} else {
		cimd_reason(why, whylen, "%s must begin with https://%s", what,
		    (flags & U_HTTP_LOOP) ? " (or http:// to a loopback host)" : "");
		return false;
	}
	end = a + strcspn(a, "/?#");
	if (!url_authority(a, end, p, what, why, whylen))
		return false;
	if (*end != '/' && !(flags & U_PATH_OPT)) {
		cimd_reason(why, whylen, "%s must contain a path (https://host/path)", what);
		return false;
	}
	p->path = end;
	return url_rest(end, flags, what, why, whylen);
}

static bool host_is(const struct url_parts *p, const char *name)
{
	return p->hostlen == strlen(name) && strncasecmp(p->host, name, p->hostlen) == 0;
}

enum cs_err cimd_url_check(const char *url, const char **why)
{
	static _Thread_local char buf[CIMD_WHY_MAX];
	struct url_parts p;
	if (url_parse(url, 0, "client_id", &p, buf, sizeof buf))
		return CS_OK;
	if (why != NULL)
		*why = buf;
	return CS_EINVAL;
}

enum cs_err cimd_url_host(const char *url, char *host, size_t hostlen, uint16_t *port)
{
	struct url_parts p;
	if (host == NULL || port == NULL || !url_parse(url, 0, "client_id", &p, NULL, 0) ||
	    p.hostlen >= hostlen)
		return CS_EINVAL;
	memcpy(host, p.host, p.hostlen);
	host[p.hostlen] = '\0';
	*port = p.port;
	return CS_OK;
}

/* --------------------------------------------------------------- the document */

void cimd_doc_clear(struct cimd_doc *d)
{
	if (d == NULL)
		return;
	free(d->client_id);
	free(d->client_name);
	free(d->client_uri);
	free(d->logo_uri);
	for (size_t i = 0; i < d->nredirect_uris; i++)
		free(d->redirect_uris[i]);
	free(d->redirect_uris);
	free(d->jwks);
	free(d->jwks_uri);
	memset(d, 0, sizeof *d);
}

static bool dup_opt(const char *s, char **out)
{
	*out = NULL;
	return s == NULL || (*out = strdup(s)) != NULL;
}

enum cs_err cimd_doc_copy(const struct cimd_doc *src, struct cimd_doc *out)
{
	struct cimd_doc d = { 0 };
	if (src == NULL || out == NULL)
		return CS_EINVAL;
	d.auth = src->auth;
	d.refresh = src->refresh;
	if (!dup_opt(src->client_id, &d.client_id) || !dup_opt(src->client_name, &d.client_name) ||
	    !dup_opt(src->client_uri, &d.client_uri) || !dup_opt(src->logo_uri, &d.logo_uri) ||
	    !dup_opt(src->jwks, &d.jwks) || !dup_opt(src->jwks_uri, &d.jwks_uri))
		goto nomem;
	if ((d.redirect_uris = calloc(src->nredirect_uris + 1, sizeof *d.redirect_uris)) == NULL)
		goto nomem;
	for (; d.nredirect_uris < src->nredirect_uris; d.nredirect_uris++)
		if ((d.redirect_uris[d.nredirect_uris] = strdup(src->redirect_uris[d.nredirect_uris]))
		    == NULL)
			goto nomem;
	*out = d;
	return CS_OK;
nomem:
	cimd_doc_clear(&d);
	return CS_ENOMEM;
}

/* A JSON string member: absent (NULL, true), a string without NUL (true), or
 * refused (false, with why). */
static bool member_str(json_t *root, const char *key, const char **out, char *why, size_t whylen)
{
	json_t *v = json_object_get(root, key);
	*out = NULL;
	if (v == NULL)
		return true;
	if (!json_is_string(v)) {
		cimd_reason(why, whylen, "%s must be a string", key);
		return false;
	}
	if (strlen(json_string_value(v)) != json_string_length(v)) {
		cimd_reason(why, whylen, "%s must not contain NUL", key);
		return false;
	}
	*out = json_string_value(v);
	return true;
}

/* A name shown to a person: no C0 or C1 control and no bidirectional control
 * (U+200E/F, U+202A-202E, U+2066-2069), which could reorder what is shown. */
static bool display_text_ok(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	for (size_t i = 0; u[i]; i++) {
		if (u[i] < 0x20 || u[i] == 0x7f)
			return false;
		if (u[i] == 0xc2 && u[i + 1] >= 0x80 && u[i + 1] <= 0x9f)
			return false;
		if (u[i] == 0xe2 && u[i + 1] == 0x80 &&
		    (u[i + 2] == 0x8e || u[i + 2] == 0x8f || (u[i + 2] >= 0xaa && u[i + 2] <= 0xae)))
			return false;
		if (u[i] == 0xe2 && u[i + 1] == 0x81 && u[i + 2] >= 0xa6 && u[i + 2] <= 0xa9)
			return false;
	}
	return true;
}

/* One redirect URI, named what in a refusal: absolute, no fragment or
 * userinfo, https -- or http back to the person's own machine. */
static bool redirect_ok(const char *s, const char *what, char *why, size_t whylen)
{
	struct url_parts p;
	if (!url_parse(s, U_QUERY_OK | U_PATH_OPT | U_DOTS_OK | U_HTTP_LOOP, what, &p, why, whylen))
		return false;
	/* SECURITY: plain http only back to the person's own machine (RFC 8252 §7.3). */
	if (!p.https && !host_is(&p, "127.0.0.1") && !host_is(&p, "::1") &&
	    !host_is(&p, "localhost")) {
		cimd_reason(why, whylen, "%s: http is allowed only to 127.0.0.1, [::1] or localhost", what);
		return false;
	}
	return true;
}

bool cimd_redirect_uri_ok(const char *uri, char *why, size_t whylen)
{
	return uri != NULL && redirect_ok(uri, "redirect URI", why, whylen);
}

static bool check_redirects(json_t *root, struct cimd_doc *d, char *why, size_t whylen)
{
	json_t *ru = json_object_get(root, "redirect_uris"), *v;
	size_t i;
	if (ru == NULL) {
		cimd_reason(why, whylen, "redirect_uris is missing");
		return false;
	}
	if (!json_is_array(ru) || json_array_size(ru) == 0) {
		cimd_reason(why, whylen, "redirect_uris must be a non-empty array");
		return false;
	}
	if (json_array_size(ru) > CIMD_MAX_REDIRECTS) {
		cimd_reason(why, whylen, "redirect_uris has more than %d entries", CIMD_MAX_REDIRECTS);
		return false;
	}
	if ((d->redirect_uris = calloc(json_array_size(ru) + 1, sizeof *d->redirect_uris)) == NULL)
		return false;
	json_array_foreach(ru, i, v) {
		char what[40];
		const char *s = json_string_value(v);
		if (str_fmt(what, sizeof what, "redirect_uris[%zu]", i) != CS_OK)
			return false;
		if (!json_is_string(v) || strlen(s) != json_string_length(v)) {
			cimd_reason(why, whylen, "%s must be a string", what);
			return false;
		}
		if (!redirect_ok(s, what, why, whylen))
			return false;
		if ((d->redirect_uris[i] = strdup(s)) == NULL)
			return false;
		d->nredirect_uris++;
	}
	return true;
}

/* SECURITY: a document is public: a JWK in it must hold no private part. */
static bool check_jwks(json_t *jwks, char *why, size_t whylen)
{
	static const char *const priv[] = { "d", "p", "q", "dp", "dq", "qi", "oth", "k", NULL };
	json_t *keys = json_is_object(jwks) ? json_object_get(jwks, "keys") : NULL, *k;
	size_t i;
	if (!json_is_array(keys) || json_array_size(keys) == 0) {
		cimd_reason(why, whylen, "jwks must be an object with a non-empty \"keys\" array");
		return false;
	}
	json_array_foreach(keys, i, k) {
		if (!json_is_object(k)) {
			cimd_reason(why, whylen, "jwks.keys[%zu] must be an object", i);
			return false;
		}
		for (size_t j = 0; priv[j]; j++)
			if (json_object_get(k, priv[j]) != NULL) {
				cimd_reason(why, whylen, "jwks.keys[%zu] holds private key material (\"%s\"): "
				    "a client metadata document is public", i, priv[j]);
				return false;
			}
	}
	return true;
}

static bool check_auth(json_t *root, struct cimd_doc *d, char *why, size_t whylen)
{
	const char *m = NULL;
	json_t *jwks = json_object_get(root, "jwks");
	const char *ju = NULL;
	struct url_parts p;

	if (json_object_get(root, "client_secret") != NULL ||
	    json_object_get(root, "client_secret_expires_at") != NULL) {
		cimd_reason(why, whylen, "client_secret must not appear in a client metadata document");
		return false;
	}
	if (!member_str(root, "token_endpoint_auth_method", &m, why, whylen) ||
	    !member_str(root, "jwks_uri", &ju, why, whylen))
		return false;
	if (jwks != NULL && !check_jwks(jwks, why, whylen))
		return false;
	if (m == NULL || strcmp(m, "none") == 0) {
		d->auth = CIMD_AUTH_NONE;
		return true;
	}
	if (strcmp(m, "private_key_jwt") != 0) {
		if (strncmp(m, "client_secret_", 14) == 0)
			cimd_reason(why, whylen, "token_endpoint_auth_method %s needs a shared secret, which a "
			    "client metadata document cannot establish", m);
		else
			cimd_reason(why, whylen, "token_endpoint_auth_method must be none or private_key_jwt");
		return false;
	}
	d->auth = CIMD_AUTH_PRIVATE_KEY_JWT;
	if ((jwks == NULL) == (ju == NULL)) {
		cimd_reason(why, whylen, "private_key_jwt needs exactly one of jwks and jwks_uri");
		return false;
	}
	if (ju != NULL) {
		if (!url_parse(ju, U_QUERY_OK | U_PATH_OPT, "jwks_uri", &p, why, whylen))
			return false;
		return (d->jwks_uri = strdup(ju)) != NULL;
	}
	return (d->jwks = json_dumps(jwks, JSON_COMPACT)) != NULL;
}

static bool check_grants(json_t *root, struct cimd_doc *d, char *why, size_t whylen)
{
	json_t *gt = json_object_get(root, "grant_types"), *rt = json_object_get(root,
	    "response_types"), *v;
	size_t i;
	bool code = false;

	d->refresh = true;
	if (gt != NULL) {
		if (!json_is_array(gt)) {
			cimd_reason(why, whylen, "grant_types must be an array");
			return false;
		}
		d->refresh = false;
		json_array_foreach(gt, i, v) {
			const char *g = json_string_value(v);
			if (g == NULL) {
				cimd_reason(why, whylen, "grant_types[%zu] must be a string", i);
				return false;
			}
			if (strcmp(g, "implicit") == 0 || strcmp(g, "password") == 0) {
				cimd_reason(why, whylen, "grant_types must not list %s (OAuth 2.1 removed it)", g);
				return false;
			}
			code = code || strcmp(g, "authorization_code") == 0;
			d->refresh = d->refresh || strcmp(g, "refresh_token") == 0;
		}
		if (!code) {
			cimd_reason(why, whylen, "grant_types must list authorization_code");
			return false;
		}
	}
	if (rt != NULL && (!json_is_array(rt) || json_array_size(rt) != 1 ||
	    !json_is_string(json_array_get(rt, 0)) ||
	    strcmp(json_string_value(json_array_get(rt, 0)), "code") != 0)) {
		cimd_reason(why, whylen, "response_types must be [\"code\"]");
		return false;
	}
	return true;
}

static bool check_display(json_t *root, struct cimd_doc *d, char *why, size_t whylen)
{
	const char *name = NULL, *cu = NULL, *lu = NULL;
	struct url_parts p;
	if (!member_str(root, "client_name", &name, why, whylen) ||
	    !member_str(root, "client_uri", &cu, why, whylen) ||
	    !member_str(root, "logo_uri", &lu, why, whylen))
		return false;
	if (name != NULL) {
		size_t n = strlen(name);
		if (n == 0 || n > CIMD_NAME_MAX) {
			cimd_reason(why, whylen, "client_name must be 1 to %d bytes", CIMD_NAME_MAX);
			return false;
		}
		if (!display_text_ok(name)) {
			cimd_reason(why, whylen, "client_name must not contain control characters");
			return false;
		}
		if ((d->client_name = strdup(name)) == NULL)
			return false;
	}
	if (cu != NULL && (!url_parse(cu, U_QUERY_OK | U_PATH_OPT, "client_uri", &p, why, whylen) ||
	    (d->client_uri = strdup(cu)) == NULL))
		return false;
	if (lu != NULL && (!url_parse(lu, U_QUERY_OK | U_PATH_OPT, "logo_uri", &p, why, whylen) ||
	    (d->logo_uri = strdup(lu)) == NULL))
		return false;
	return true;
}

enum cs_err cimd_doc_parse(const char *url, const char *json, size_t len, struct cimd_doc *out,
    char *why, size_t whylen)
{
	enum cs_err e = CS_EINVAL;
	struct cimd_doc d = { 0 };
	json_t *root = NULL;
	json_error_t jerr;
	const char *cid = NULL;

	if (why != NULL && whylen > 0)
		why[0] = '\0';
	if (url == NULL || json == NULL || out == NULL) {
		cimd_reason(why, whylen, "no document");
		goto out;
	}
	if (len > CIMD_DOC_MAX_LIMIT) {
		cimd_reason(why, whylen, "the document is larger than %d bytes", CIMD_DOC_MAX_LIMIT);
		goto out;
	}
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (root == NULL) {
		cimd_reason(why, whylen, "the document is not JSON (or repeats a member)");
		goto out;
	}
	if (!json_is_object(root)) {
		cimd_reason(why, whylen, "the document must be a JSON object");
		goto out;
	}
	if (!member_str(root, "client_id", &cid, why, whylen))
		goto out;
	if (cid == NULL) {
		cimd_reason(why, whylen, "client_id is missing from the document");
		goto out;
	}
	/* SECURITY: the document speaks for the URL it was fetched from and no other
	 * (draft §4: simple string comparison, RFC 3986 §6.2.1). */
	if (strcmp(cid, url) != 0) {
		cimd_reason(why, whylen, "the document's client_id is not the URL it was fetched from");
		goto out;
	}
	if ((d.client_id = strdup(cid)) == NULL)
		goto nomem;
	if (!check_auth(root, &d, why, whylen) || !check_redirects(root, &d, why, whylen) ||
	    !check_grants(root, &d, why, whylen) || !check_display(root, &d, why, whylen)) {
		/* An empty reason here means an allocation failed. */
		e = (why != NULL && whylen > 0 && why[0] == '\0') ? CS_ENOMEM : CS_EINVAL;
		goto out;
	}
	*out = d;
	memset(&d, 0, sizeof d);
	e = CS_OK;
	goto out;
nomem:
	e = CS_ENOMEM;
out:
	cimd_doc_clear(&d);
	json_decref(root);
	return e;
}

/* --------------------------------------------------------------- addresses */

static const char *const addr_names[CIMD_ADDR__MAX] = {
	[CIMD_ADDR_PUBLIC]      = "a public address",
	[CIMD_ADDR_LOOPBACK]    = "a loopback address",
	[CIMD_ADDR_PRIVATE]     = "a private address",
	[CIMD_ADDR_LINK_LOCAL]  = "a link-local address",
	[CIMD_ADDR_UNSPECIFIED] = "an unspecified address",
	[CIMD_ADDR_MULTICAST]   = "a multicast address",
	[CIMD_ADDR_SHARED]      = "a carrier-grade NAT address",
	[CIMD_ADDR_RESERVED]    = "a special-use address",
};

const char *cimd_addr_name(enum cimd_addr a)
{
	return (unsigned)a < CIMD_ADDR__MAX ? addr_names[a] : "an unknown address";
}

/* b: the four bytes of an IPv4 address in network order. */
static enum cimd_addr classify4(const unsigned char *b)
{
	if (b[0] == 0)
		return CIMD_ADDR_UNSPECIFIED;                      /* 0/8 "this network" */
	if (b[0] == 127)
		return CIMD_ADDR_LOOPBACK;
	if (b[0] == 10 || (b[0] == 172 && (b[1] & 0xf0) == 16) || (b[0] == 192 && b[1] == 168))
		return CIMD_ADDR_PRIVATE;
	if (b[0] == 169 && b[1] == 254)
		return CIMD_ADDR_LINK_LOCAL;
	if (b[0] == 100 && (b[1] & 0xc0) == 64)
		return CIMD_ADDR_SHARED;                           /* 100.64/10 */
	if ((b[0] & 0xf0) == 224)
		return CIMD_ADDR_MULTICAST;                        /* 224/4 */
	if ((b[0] & 0xf0) == 240)
		return CIMD_ADDR_RESERVED;                         /* 240/4, broadcast */
	if ((b[0] == 192 && b[1] == 0 && (b[2] == 0 || b[2] == 2)) ||     /* 192.0.0/24, TEST-NET-1 */
	    (b[0] == 192 && b[1] == 88 && b[2] == 99) ||                  /* 6to4 relay anycast */
	    (b[0] == 198 && (b[1] & 0xfe) == 18) ||                       /* 198.18/15 benchmarking */
	    (b[0] == 198 && b[1] == 51 && b[2] == 100) ||                 /* TEST-NET-2 */
	    (b[0] == 203 && b[1] == 0 && b[2] == 113))                    /* TEST-NET-3 */
		return CIMD_ADDR_RESERVED;
	return CIMD_ADDR_PUBLIC;
}

static enum cimd_addr classify6(const unsigned char *b)
{
	static const unsigned char zero[16] = { 0 };
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const unsigned char nat64[12] = { 0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0 };

	if (memcmp(b, zero, 16) == 0)
		return CIMD_ADDR_UNSPECIFIED;
	if (memcmp(b, zero, 15) == 0 && b[15] == 1)
		return CIMD_ADDR_LOOPBACK;
	/* SECURITY: the forms that carry an IPv4 address are judged by it. */
	if (memcmp(b, mapped, 12) == 0 || memcmp(b, nat64, 12) == 0)
		return classify4(b + 12);
	if (b[0] == 0x20 && b[1] == 0x02)
		return classify4(b + 2);                           /* 6to4 2002::/16 */
	if (memcmp(b, zero, 12) == 0)
		return CIMD_ADDR_RESERVED;                         /* IPv4-compatible ::/96 */
	if ((b[0] & 0xfe) == 0xfc)
		return CIMD_ADDR_PRIVATE;                          /* fc00::/7 */
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
		return CIMD_ADDR_LINK_LOCAL;                       /* fe80::/10 */
	if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)
		return CIMD_ADDR_PRIVATE;                          /* fec0::/10 site-local */
	if (b[0] == 0xff)
		return CIMD_ADDR_MULTICAST;
	if ((b[0] == 0x01 && b[1] == 0 && memcmp(b + 2, zero, 6) == 0) ||   /* 100::/64 discard */
	    (b[0] == 0x20 && b[1] == 0x01 && b[2] < 0x02) ||                /* 2001::/23 (Teredo) */
	    (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) || /* 2001:db8::/32 */
	    (b[0] == 0 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0 && b[5] == 1) ||
	    (b[0] == 0x3f && b[1] == 0xff && (b[2] & 0xf0) == 0))           /* 3fff::/20 docs */
		return CIMD_ADDR_RESERVED;
	if ((b[0] & 0xe0) != 0x20)
		return CIMD_ADDR_RESERVED;                         /* outside 2000::/3 */
	return CIMD_ADDR_PUBLIC;
}

enum cimd_addr cimd_addr_classify(const struct sockaddr *sa)
{
	if (sa == NULL)
		return CIMD_ADDR_RESERVED;
	if (sa->sa_family == AF_INET)
		return classify4((const unsigned char *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr);
	if (sa->sa_family == AF_INET6)
		return classify6(((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr);
	return CIMD_ADDR_RESERVED;
}

/* --------------------------------------------------------------- policy */

/* Splits a [mcp] cimd_hosts entry into its host and port (0: none). */
static bool host_entry_split(const char *entry, const char **h, size_t *hl, unsigned *port)
{
	const char *colon;
	*port = 0;
	if (entry == NULL || entry[0] == '\0' || strlen(entry) > 270)
		return false;
	if (entry[0] == '[') {
		const char *rb = strchr(entry, ']');
		char lit[INET6_ADDRSTRLEN + 1];
		struct in6_addr a6;
		if (rb == NULL || (size_t)(rb - entry - 1) >= sizeof lit)
			return false;
		memcpy(lit, entry + 1, (size_t)(rb - entry - 1));
		lit[rb - entry - 1] = '\0';
		if (inet_pton(AF_INET6, lit, &a6) != 1)
			return false;
		*h = entry + 1;
		*hl = (size_t)(rb - entry - 1);
		colon = rb[1] == ':' ? rb + 1 : NULL;
		if (colon == NULL && rb[1] != '\0')
			return false;
	} else {
		colon = strchr(entry, ':');
		*h = entry;
		*hl = colon ? (size_t)(colon - entry) : strlen(entry);
		if (!reg_name_ok(entry, *hl))
			return false;
	}
	if (colon != NULL) {
		const char *d = colon + 1;
		unsigned long v = 0;
		if (*d == '\0' || *d == '0' || strlen(d) > 5)
			return false;
		for (; *d; d++) {
			if (*d < '0' || *d > '9')
				return false;
			v = v * 10 + (unsigned long)(*d - '0');
		}
		if (v == 0 || v > 65535)
			return false;
		*port = (unsigned)v;
	}
	return true;
}

bool cimd_host_entry_valid(const char *entry)
{
	const char *h;
	size_t hl;
	unsigned port;
	return host_entry_split(entry, &h, &hl, &port);
}

bool cimd_prefix_entry_valid(const char *entry)
{
	struct url_parts p;
	size_t n = entry != NULL ? strlen(entry) : 0;
	return n > 0 && entry[n - 1] == '/' && url_parse(entry, 0, "prefix", &p, NULL, 0);
}

bool cimd_policy_allows(const struct cimd_policy *pol, const char *url, const char **why)
{
	struct url_parts p;
	const char *dummy;
	why = why != NULL ? why : &dummy;
	if (pol == NULL || !url_parse(url, 0, "client_id", &p, NULL, 0)) {
		*why = "the client_id is not a valid client-id URL";
		return false;
	}
	switch (pol->allow) {
	case CIMD_ALLOW_ANY:
		return true;
	case CIMD_ALLOW_HOSTS:
		for (size_t i = 0; pol->hosts != NULL && pol->hosts[i] != NULL; i++) {
			const char *h;
			size_t hl;
			unsigned port;
			if (!host_entry_split(pol->hosts[i], &h, &hl, &port))
				continue;
			if (hl == p.hostlen && strncasecmp(h, p.host, hl) == 0 &&
			    (port != 0 ? p.port == port : p.port == 443))
				return true;
		}
		*why = "the client_id's host is not among the hosts allowed to sign in";
		return false;
	case CIMD_ALLOW_PREFIXES:
		/* SECURITY: every prefix ends in '/' (cimd_prefix_entry_valid), so a
		 * match never ends inside the host or a path segment. */
		for (size_t i = 0; pol->prefixes != NULL && pol->prefixes[i] != NULL; i++) {
			size_t n = strlen(pol->prefixes[i]);
			if (n > 0 && pol->prefixes[i][n - 1] == '/' &&
			    strncmp(url, pol->prefixes[i], n) == 0)
				return true;
		}
		*why = "the client_id does not start with a prefix allowed to sign in";
		return false;
	case CIMD_ALLOW_NONE:
	default:
		*why = "client-id URLs (client metadata documents) are not accepted here";
		return false;
	}
}
