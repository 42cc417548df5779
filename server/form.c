/* form.c -- form-urlencoded and percent-decoding for every outside input.
 * Must never read past len, never accept a NUL byte in a decoded value, and
 * never hand out a half-parsed form. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "buf.h"
#include "arena.h"
#include "form.h"

void form_init(struct form *f)
{
	memset(f, 0, sizeof *f);
}

void form_clear(struct form *f)
{
	if (f == NULL)
		return;
	/* Every name and value lives in the one block: wiping it wipes them all. */
	if (f->block != NULL) {
		OPENSSL_cleanse(f->block, f->block_size);
		if (!f->block_in_arena)
			free(f->block);
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

/* Nothing is written past d[len] and d[j] is written only after s[i] (i >= j)
 * was read, so d may be s. */
enum cs_err pct_decode_into(const char *s, size_t len, int plus_space, char *d, size_t *dlen)
{
	size_t j = 0;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (c == '%') {
			if (len - i < 3)
				return CS_EINVAL;
			int hi = hex_digit(s[i + 1]), lo = hex_digit(s[i + 2]);
			if (hi < 0 || lo < 0)
				return CS_EINVAL;
			c = (char)(hi * 16 + lo);
			i += 2;
		} else if (c == '+' && plus_space) {
			c = ' ';
		}
		if (c == '\0')
			return CS_EINVAL;
		d[j++] = c;
	}
	d[j] = '\0';
	if (!utf8_valid(d, j))
		return CS_EINVAL;
	*dlen = j;
	return CS_OK;
}

enum cs_err pct_decode(const char *s, size_t len, int plus_space, char **out, size_t *out_len)
{
	size_t j = 0;
	if (len == SIZE_MAX)
		return CS_ETOOBIG;
	char *d = malloc(len + 1);
	if (d == NULL)
		return CS_ENOMEM;
	if (pct_decode_into(s, len, plus_space, d, &j) != CS_OK) {
		OPENSSL_cleanse(d, len + 1);
		free(d);
		return CS_EINVAL;
	}
	*out = d;
	if (out_len)
		*out_len = j;
	return CS_OK;
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

/* How many bytes the decoded form needs: each pair's name and value decode to no more
 * than their encoded bytes, plus a NUL each.  Pairs beyond FORM_MAX_PARAMS are refused
 * before they are decoded, so len + 2 * FORM_MAX_PARAMS bounds the block. */
static enum cs_err block_size(size_t len, size_t *out)
{
	if (len > SIZE_MAX - 2 * FORM_MAX_PARAMS)
		return CS_ETOOBIG;
	*out = len + 2 * FORM_MAX_PARAMS;
	return CS_OK;
}

enum cs_err form_parse(struct form *f, const char *s, size_t len)
{
	return form_parse_in(f, NULL, s, len);
}

enum cs_err form_parse_in(struct form *f, struct arena *a, const char *s, size_t len)
{
	enum cs_err e = CS_OK;
	size_t i = 0, used = 0, size = 0;
	form_init(f);
	if (len == 0)
		return CS_OK;
	if ((e = block_size(len, &size)) != CS_OK)
		return e;
	/* One allocation for the whole form (none from the heap with an arena):
	 * every name and value is decoded into it. */
	f->block = a != NULL ? arena_alloc(a, size) : malloc(size);
	if (f->block == NULL)
		return CS_ENOMEM;
	f->block_in_arena = a != NULL;
	f->block_size = size;
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
		size_t vlen = eq ? plen - nlen - 1 : 0;
		size_t got = 0;
		if (nlen == 0) {
			e = CS_EINVAL;
			goto out;
		}
		if (f->n == FORM_MAX_PARAMS) {
			e = CS_ETOOBIG;
			goto out;
		}
		/* Can't happen (block_size's bound), but never write past the block. */
		if (size - used < nlen + 1 + vlen + 1) {
			e = CS_ETOOBIG;
			goto out;
		}
		struct form_param *p = &f->p[f->n];
		if ((e = pct_decode_into(pair, nlen, 1, f->block + used, &got)) != CS_OK)
			goto out;
		p->name = f->block + used;
		used += got + 1;
		if ((e = pct_decode_into(eq ? eq + 1 : "", vlen, 1, f->block + used, &got)) != CS_OK)
			goto out;
		p->value = f->block + used;
		p->value_len = got;
		used += got + 1;
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

bool valid_return_to(const char *v)
{
	/* SECURITY: only a same-origin absolute path: "/x", never "//host", "/\host",
	 * a scheme, a backslash or a control character anywhere (no open redirect). */
	if (v[0] != '/' || v[1] == '/' || v[1] == '\\')
		return false;
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (*p < 0x20 || *p == 0x7f || *p == '\\')
			return false;
	return true;
}
