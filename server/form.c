/* form.c -- form-urlencoded and percent-decoding for every outside input.
 * Must never read past len, never accept a NUL byte in a decoded value, and
 * never hand out a half-parsed form. */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "buf.h"
#include "form.h"

void form_init(struct form *f)
{
	memset(f, 0, sizeof *f);
}

void form_clear(struct form *f)
{
	if (f == NULL)
		return;
	for (size_t i = 0; i < f->n; i++) {
		free(f->p[i].name);
		if (f->p[i].value) {
			OPENSSL_cleanse(f->p[i].value, f->p[i].value_len);
			free(f->p[i].value);
		}
	}
	memset(f, 0, sizeof *f);
}

int utf8_valid(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;
	while (i < len) {
		unsigned c = s[i];
		size_t n;
		unsigned min;
		unsigned cp;
		if (c < 0x80) { i++; continue; }
		else if ((c & 0xe0) == 0xc0) { n = 1; min = 0x80; cp = c & 0x1f; }
		else if ((c & 0xf0) == 0xe0) { n = 2; min = 0x800; cp = c & 0x0f; }
		else if ((c & 0xf8) == 0xf0) { n = 3; min = 0x10000; cp = c & 0x07; }
		else return 0;
		if (len - i - 1 < n)
			return 0;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += n + 1;
	}
	return 1;
}

enum cs_err pct_decode(const char *s, size_t len, int plus_space, char **out, size_t *out_len)
{
	char *d = malloc(len + 1);
	size_t j = 0;
	if (d == NULL)
		return CS_ENOMEM;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (c == '%') {
			if (len - i < 3)
				goto bad;
			int hi = hex_digit(s[i + 1]), lo = hex_digit(s[i + 2]);
			if (hi < 0 || lo < 0)
				goto bad;
			c = (char)(hi * 16 + lo);
			i += 2;
		} else if (c == '+' && plus_space) {
			c = ' ';
		}
		if (c == '\0')
			goto bad;
		d[j++] = c;
	}
	d[j] = '\0';
	if (!utf8_valid(d, j))
		goto bad;
	*out = d;
	if (out_len)
		*out_len = j;
	return CS_OK;
bad:
	OPENSSL_cleanse(d, len + 1);
	free(d);
	return CS_EINVAL;
}

enum cs_err pct_encode(const char *s, char **out)
{
	static const char hex[] = "0123456789ABCDEF";
	struct buf b;
	enum cs_err e = CS_OK;
	buf_init(&b, 3 * strlen(s) + 1);
	for (const unsigned char *p = (const unsigned char *)s; e == CS_OK && *p; p++) {
		unsigned char c = *p;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~') {
			e = buf_append(&b, p, 1);
		} else {
			char t[3] = { '%', hex[c >> 4], hex[c & 15] };
			e = buf_append(&b, t, 3);
		}
	}
	if (e != CS_OK) {
		buf_clear(&b);
		return e;
	}
	*out = buf_steal(&b);
	return *out ? CS_OK : CS_ENOMEM;
}

enum cs_err form_url_param(struct buf *b, const char *name, const char *value)
{
	char *enc = NULL;
	enum cs_err e = pct_encode(value, &enc);
	if (e == CS_OK)
		e = buf_printf(b, "%c%s=%s", strchr(b->data ? b->data : "", '?') ? '&' : '?', name, enc);
	free(enc);
	return e;
}

enum cs_err form_parse(struct form *f, const char *s, size_t len)
{
	enum cs_err e = CS_OK;
	size_t i = 0;
	form_init(f);
	while (i < len) {
		size_t start = i;
		while (i < len && s[i] != '&')
			i++;
		size_t plen = i - start;
		if (i < len)
			i++;                          /* skip '&' */
		if (plen == 0)
			continue;                     /* "a=1&&b=2" and a trailing '&' are harmless */
		const char *pair = s + start;
		const char *eq = memchr(pair, '=', plen);
		size_t nlen = eq ? (size_t)(eq - pair) : plen;
		if (nlen == 0) {
			e = CS_EINVAL;
			goto out;
		}
		if (f->n == FORM_MAX_PARAMS) {
			e = CS_ETOOBIG;
			goto out;
		}
		struct form_param *p = &f->p[f->n];
		e = pct_decode(pair, nlen, 1, &p->name, NULL);
		if (e != CS_OK)
			goto out;
		if (eq)
			e = pct_decode(eq + 1, plen - nlen - 1, 1, &p->value, &p->value_len);
		else
			e = pct_decode("", 0, 1, &p->value, &p->value_len);
		if (e != CS_OK) {
			free(p->name);
			p->name = NULL;
			goto out;
		}
		f->n++;
	}
out:
	if (e != CS_OK)
		form_clear(f);
	return e;
}

const char *form_get(const struct form *f, const char *name)
{
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->p[i].name, name) == 0)
			return f->p[i].value;
	return NULL;
}

size_t form_count(const struct form *f, const char *name)
{
	size_t c = 0;
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->p[i].name, name) == 0)
			c++;
	return c;
}
