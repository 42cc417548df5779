/* forwarded.c -- trusted-proxy prefixes and the strict parsers of
 * X-Forwarded-For and Forwarded (RFC 7239 section 4): the client address
 * consentd keys its per-address limits by.  It must never read a header from a
 * peer that is not a trusted proxy, nor take an entry left of the first one
 * that is not a trusted proxy's (anyone may write those). */
#include <arpa/inet.h>
#include <string.h>
#include <strings.h>
#include "forwarded.h"

static const unsigned char v4_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

/* ip's 16 bytes (IPv4 as IPv4-mapped IPv6); false when ip is no address. */
static bool addr16(const char *ip, unsigned char out[16])
{
	unsigned char a[4];
	if (inet_pton(AF_INET, ip, a) == 1) {
		memcpy(out, v4_mapped, 12);
		memcpy(out + 12, a, 4);
		return true;
	}
	return inet_pton(AF_INET6, ip, out) == 1;
}

/* The text of 16 bytes: an IPv4-mapped address as IPv4. */
static bool addr_text(const unsigned char a[16], char out[FORWARDED_ADDR_LEN])
{
	if (memcmp(a, v4_mapped, 12) == 0)
		return inet_ntop(AF_INET, a + 12, out, FORWARDED_ADDR_LEN) != NULL;
	return inet_ntop(AF_INET6, a, out, FORWARDED_ADDR_LEN) != NULL;
}

static bool prefix_has(const struct net_prefix *p, const unsigned char a[16])
{
	unsigned full = p->bits / 8, rest = p->bits % 8;
	if (memcmp(p->addr, a, full) != 0)
		return false;
	if (rest == 0)
		return true;
	unsigned char mask = (unsigned char)(0xffu << (8 - rest));
	return (p->addr[full] & mask) == (a[full] & mask);
}

bool net_prefix_parse(const char *s, struct net_prefix *out)
{
	char host[FORWARDED_ADDR_LEN];
	const char *slash = strchr(s, '/');
	size_t hl = slash ? (size_t)(slash - s) : strlen(s);
	unsigned char a[16], b4[4];
	unsigned bits, max;
	bool v4;
	if (hl == 0 || hl >= sizeof host)
		return false;
	memcpy(host, s, hl);
	host[hl] = '\0';
	v4 = inet_pton(AF_INET, host, b4) == 1;
	if (v4) {
		memcpy(a, v4_mapped, 12);
		memcpy(a + 12, b4, 4);
		max = 32;
	} else if (inet_pton(AF_INET6, host, a) == 1) {
		max = 128;
	} else {
		return false;
	}
	bits = max;
	if (slash != NULL) {
		const char *d = slash + 1;
		size_t dl = strlen(d);
		if (dl == 0 || dl > 3 || (d[0] == '0' && dl > 1))
			return false;
		bits = 0;
		for (; *d; d++) {
			if (*d < '0' || *d > '9')
				return false;
			bits = bits * 10 + (unsigned)(*d - '0');
		}
		if (bits > max)
			return false;
	}
	out->bits = v4 ? bits + 96 : bits;
	memcpy(out->addr, a, 16);
	/* No host bits past the prefix: "10.0.0.1/8" is a typo, not a network. */
	for (unsigned i = out->bits; i < 128; i++)
		if (a[i / 8] & (0x80u >> (i % 8)))
			return false;
	return true;
}

bool net_prefix_match(const struct net_prefix *v, size_t n, const char *ip)
{
	unsigned char a[16];
	if (n == 0 || !addr16(ip, a))
		return false;
	for (size_t i = 0; i < n; i++)
		if (prefix_has(&v[i], a))
			return true;
	return false;
}

/* --- the parsers ----------------------------------------------------------- */

static bool is_ows(char c)
{
	return c == ' ' || c == '\t';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_alnum(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* RFC 9110 tchar. */
static bool is_tchar(char c)
{
	return is_alnum(c) || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* RFC 7239 obfnode / obfport: "_" 1*(ALPHA / DIGIT / "." / "_" / "-"). */
static bool is_obfuscated(const char *s, size_t n)
{
	if (n < 2 || s[0] != '_')
		return false;
	for (size_t i = 1; i < n; i++)
		if (!is_alnum(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
			return false;
	return true;
}

/* A port: 1 to 5 digits (an obfuscated one too when obf). */
static bool is_port(const char *s, size_t n, bool obf)
{
	if (obf && is_obfuscated(s, n))
		return true;
	if (n == 0 || n > 5)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_digit(s[i]))
			return false;
	return true;
}

/* One node (s, n bytes): an address with an optional port, "unknown" or an
 * obfuscated name.  rfc7239: the Forwarded header's rules (IPv6 only in
 * brackets, obfuscated names and ports allowed); else X-Forwarded-For's (bare
 * IPv6 too).  out gets the address's text, or "" for a node that names none. */
static bool parse_node(const char *s, size_t n, bool rfc7239, char out[FORWARDED_ADDR_LEN])
{
	char host[FORWARDED_ADDR_LEN];
	const char *port = NULL;
	size_t hl;
	unsigned char a[16];
	out[0] = '\0';
	if (n == 7 && strncasecmp(s, "unknown", 7) == 0)
		return true;
	if (rfc7239 && is_obfuscated(s, n))
		return true;
	if (n > 0 && s[0] == '[') {
		const char *close = memchr(s, ']', n);
		if (close == NULL)
			return false;
		hl = (size_t)(close - s) - 1;
		if (hl == 0 || hl >= sizeof host)
			return false;
		memcpy(host, s + 1, hl);
		host[hl] = '\0';
		if ((size_t)(close - s) + 1 < n) {
			if (close[1] != ':')
				return false;
			port = close + 2;
			if (!is_port(port, n - (size_t)(port - s), rfc7239))
				return false;
		}
		if (strchr(host, '.') != NULL && strchr(host, ':') == NULL)
			return false;                /* "[192.0.2.1]" is no IPv6 address */
		if (inet_pton(AF_INET6, host, a) != 1)
			return false;
		return addr_text(a, out);
	}
	const char *colon = memchr(s, ':', n);
	const char *colon2 = colon ? memchr(colon + 1, ':', n - (size_t)(colon + 1 - s)) : NULL;
	if (colon2 != NULL) {
		/* Two colons: a bare IPv6 address, X-Forwarded-For only (RFC 7239
		 * wants it quoted and in brackets). */
		if (rfc7239 || n >= sizeof host)
			return false;
		memcpy(host, s, n);
		host[n] = '\0';
		if (inet_pton(AF_INET6, host, a) != 1)
			return false;
		return addr_text(a, out);
	}
	hl = colon ? (size_t)(colon - s) : n;
	if (colon != NULL && !is_port(colon + 1, n - hl - 1, rfc7239))
		return false;
	if (hl == 0 || hl >= sizeof host)
		return false;
	memcpy(host, s, hl);
	host[hl] = '\0';
	unsigned char b4[4];
	if (inet_pton(AF_INET, host, b4) != 1)
		return false;
	memcpy(a, v4_mapped, 12);
	memcpy(a + 12, b4, 4);
	return addr_text(a, out);
}

/* X-Forwarded-For: 1#node, OWS around the commas, no empty element. */
static bool parse_xff(const char *h, char v[FORWARDED_MAX_HOPS][FORWARDED_ADDR_LEN], size_t *n)
{
	const char *p = h;
	for (;;) {
		while (is_ows(*p))
			p++;
		const char *start = p;
		while (*p && *p != ',' && !is_ows(*p))
			p++;
		size_t len = (size_t)(p - start);
		while (is_ows(*p))
			p++;
		if (len == 0 || *n == FORWARDED_MAX_HOPS || (*p != ',' && *p != '\0'))
			return false;
		if (!parse_node(start, len, false, v[*n]))
			return false;
		(*n)++;
		if (*p == '\0')
			return true;
		p++;                                   /* the comma */
	}
}

/* One value of a Forwarded pair at *pp: a token or a quoted-string, unquoted
 * into val (at most valsz - 1 bytes). */
static bool pair_value(const char **pp, char *val, size_t valsz, size_t *vl)
{
	const char *p = *pp;
	size_t k = 0;
	if (*p == '"') {
		for (p++; *p != '"'; p++) {
			unsigned char ch = (unsigned char)*p;
			if (ch == '\\') {
				p++;
				ch = (unsigned char)*p;
				if (ch == '\0' || (ch < 0x20 && ch != '\t') || ch == 0x7f)
					return false;
			} else if (ch == '\0' || (ch < 0x20 && ch != '\t') || ch == 0x7f) {
				return false;
			}
			if (k + 1 >= valsz)
				return false;
			val[k++] = (char)ch;
		}
		p++;
	} else {
		while (is_tchar(*p)) {
			if (k + 1 >= valsz)
				return false;
			val[k++] = *p++;
		}
		if (k == 0)
			return false;
	}
	val[k] = '\0';
	*vl = k;
	*pp = p;
	return true;
}

/* Forwarded: 1#forwarded-element, each [pair] *( ";" [pair] ), a pair
 * token "=" value; an element's for= (at most one) names its node. */
static bool parse_rfc7239(const char *h, char v[FORWARDED_MAX_HOPS][FORWARDED_ADDR_LEN], size_t *n)
{
	const char *p = h;
	char val[128];
	for (;;) {
		bool have_for = false, any = false;
		if (*n == FORWARDED_MAX_HOPS)
			return false;
		v[*n][0] = '\0';
		for (;;) {                         /* the pairs of one element */
			while (is_ows(*p))
				p++;
			if (*p != ';' && *p != ',' && *p != '\0') {
				const char *name = p;
				size_t vl;
				while (is_tchar(*p))
					p++;
				size_t nl = (size_t)(p - name);
				if (nl == 0 || *p != '=')
					return false;
				p++;
				if (!pair_value(&p, val, sizeof val, &vl))
					return false;
				any = true;
				if (nl == 3 && strncasecmp(name, "for", 3) == 0) {
					if (have_for || !parse_node(val, vl, true, v[*n]))
						return false;
					have_for = true;
				}
				while (is_ows(*p))
					p++;
			}
			if (*p != ';')
				break;
			p++;
		}
		if (!any || (*p != ',' && *p != '\0'))
			return false;
		(*n)++;
		if (*p == '\0')
			return true;
		p++;
	}
}

bool forwarded_parse(enum forwarded_header kind, const char *header,
    char v[FORWARDED_MAX_HOPS][FORWARDED_ADDR_LEN], size_t *n)
{
	bool ok;
	*n = 0;
	if (header == NULL || strlen(header) > FORWARDED_MAX_LEN)
		return false;
	ok = kind == FORWARDED_RFC7239 ? parse_rfc7239(header, v, n) : parse_xff(header, v, n);
	if (!ok)
		*n = 0;
	return ok;
}

static void copy_addr(char out[FORWARDED_ADDR_LEN], const char *ip)
{
	size_t n = strlen(ip);
	if (n >= FORWARDED_ADDR_LEN)
		n = FORWARDED_ADDR_LEN - 1;
	memmove(out, ip, n);
	out[n] = '\0';
}

/* SECURITY: S3 (issue 28).  The entries of header, or when it does not parse
 * whole, of its longest tail that does: the text right of one of its last
 * FORWARDED_MAX_HOPS + 1 commas.  Each proxy appends on the right, so the
 * entries a walk from the right needs are at the right end, and whatever a
 * client wrote itself is on the left; malformed text there (or too many hops)
 * must not turn its request into the proxy's own. */
static bool parse_tail(enum forwarded_header kind, const char *header,
    char v[FORWARDED_MAX_HOPS][FORWARDED_ADDR_LEN], size_t *hops)
{
	const char *best = NULL;
	unsigned tries = 0;
	if (forwarded_parse(kind, header, v, hops))
		return true;
	for (const char *p = header + strlen(header); p > header && tries <= FORWARDED_MAX_HOPS;) {
		if (*--p != ',')
			continue;
		tries++;
		/* A longer tail may parse where a shorter one did not (a comma
		 * inside a quoted string): the last success is the longest. */
		if (forwarded_parse(kind, p + 1, v, hops))
			best = p + 1;
	}
	return best != NULL && forwarded_parse(kind, best, v, hops);
}

bool forwarded_client(const struct net_prefix *trusted, size_t n, enum forwarded_header kind,
    const char *peer, const char *header, char out[FORWARDED_ADDR_LEN])
{
	char v[FORWARDED_MAX_HOPS][FORWARDED_ADDR_LEN];
	size_t hops = 0;
	/* SECURITY: an untrusted peer's headers are its own words: never read. */
	if (header == NULL || !net_prefix_match(trusted, n, peer) ||
	    !parse_tail(kind, header, v, &hops) || hops == 0) {
		copy_addr(out, peer);
		return false;
	}
	/* SECURITY: right to left: each trusted proxy appended the address it saw;
	 * the first that is not a trusted proxy is the client, and whatever lies
	 * left of it the client may have written. */
	for (size_t i = hops; i-- > 0;) {
		if (v[i][0] == '\0') {
			copy_addr(out, i + 1 < hops ? v[i + 1] : peer);
			return i + 1 < hops;
		}
		if (!net_prefix_match(trusted, n, v[i])) {
			copy_addr(out, v[i]);
			return true;
		}
	}
	copy_addr(out, v[0]);               /* every hop a trusted proxy */
	return true;
}
