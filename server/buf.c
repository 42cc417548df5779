/* buf.c -- capped growable buffer, plus the small text helpers around it
 * (str_fmt, str_time, hex_digit, wipe_free).  Every append checks the cap before it computes a
 * new size, so no arithmetic here can overflow. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/crypto.h>
#include "buf.h"

void buf_init(struct buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
}

static enum cs_err buf_reserve(struct buf *b, size_t extra)
{
	if (extra > b->max || b->len > b->max - extra)
		return CS_ETOOBIG;
	size_t need = b->len + extra + 1;           /* + NUL; cannot overflow: max < SIZE_MAX */
	if (need <= b->cap)
		return CS_OK;
	size_t ncap = b->cap ? b->cap : 64;
	while (ncap < need)
		ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
	if (ncap > b->max + 1)
		ncap = b->max + 1;
	char *p = realloc(b->data, ncap);
	if (p == NULL)
		return CS_ENOMEM;
	b->data = p;
	b->cap = ncap;
	return CS_OK;
}

enum cs_err buf_expect(struct buf *b, size_t n)
{
	if (b->len >= b->max)
		return CS_OK;
	if (n > b->max - b->len)
		n = b->max - b->len;
	return buf_reserve(b, n);
}

enum cs_err buf_append(struct buf *b, const void *p, size_t n)
{
	enum cs_err e = buf_reserve(b, n);
	if (e != CS_OK)
		return e;
	if (n > 0)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return CS_OK;
}

enum cs_err buf_puts(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

enum cs_err buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		return CS_EINVAL;
	enum cs_err e = buf_reserve(b, (size_t)n);
	if (e != CS_OK)
		return e;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return CS_OK;
}

enum cs_err buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	enum cs_err e = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return e;
}

enum cs_err buf_json_str(struct buf *b, const char *s)
{
	size_t start = b->len;
	enum cs_err e = buf_append(b, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; e == CS_OK && *p; p++) {
		switch (*p) {
		case '"':  e = buf_append(b, "\\\"", 2); break;
		case '\\': e = buf_append(b, "\\\\", 2); break;
		case '\n': e = buf_append(b, "\\n", 2); break;
		case '\r': e = buf_append(b, "\\r", 2); break;
		case '\t': e = buf_append(b, "\\t", 2); break;
		case '<':  e = buf_append(b, "\\u003c", 6); break;   /* safe inside HTML too */
		case '>':  e = buf_append(b, "\\u003e", 6); break;
		case '&':  e = buf_append(b, "\\u0026", 6); break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				e = buf_printf(b, "\\u%04x", *p);
			else
				e = buf_append(b, p, 1);
		}
	}
	if (e == CS_OK)
		e = buf_append(b, "\"", 1);
	if (e != CS_OK)               /* leave no half-written literal behind */
		buf_truncate(b, start);
	return e;
}

enum cs_err buf_html(struct buf *b, const char *s)
{
	size_t start = b->len;
	enum cs_err e = CS_OK;
	for (const char *p = s; e == CS_OK && *p; p++) {
		switch (*p) {
		case '&':  e = buf_append(b, "&amp;", 5); break;
		case '<':  e = buf_append(b, "&lt;", 4); break;
		case '>':  e = buf_append(b, "&gt;", 4); break;
		case '"':  e = buf_append(b, "&quot;", 6); break;
		case '\'': e = buf_append(b, "&#39;", 5); break;
		case '`':  e = buf_append(b, "&#96;", 5); break;
		case '=':  e = buf_append(b, "&#61;", 5); break;
		default:   e = buf_append(b, p, 1);
		}
	}
	if (e != CS_OK)
		buf_truncate(b, start);
	return e;
}

void buf_reset(struct buf *b)
{
	buf_truncate(b, 0);
}

void buf_truncate(struct buf *b, size_t len)
{
	b->len = len;
	if (b->data)
		b->data[len] = '\0';
}

size_t buf_copy_out(const struct buf *b, size_t *off, char *dst, size_t max)
{
	size_t n = b->len - *off;
	if (n > max)
		n = max;
	if (n > 0)
		memcpy(dst, b->data + *off, n);
	*off += n;
	return n;
}

char *buf_steal(struct buf *b)
{
	char *p = b->data;
	if (p == NULL)
		p = calloc(1, 1);
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

void buf_clear(struct buf *b)
{
	if (b == NULL)
		return;
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

void buf_wipe_clear(struct buf *b)
{
	if (b == NULL)
		return;
	if (b->data)
		OPENSSL_cleanse(b->data, b->cap);
	buf_clear(b);
}

void wipe_free(char *s)
{
	if (s == NULL)
		return;
	OPENSSL_cleanse(s, strlen(s));
	free(s);
}

void wipe_free_n(void *p, size_t n)
{
	if (p == NULL)
		return;
	OPENSSL_cleanse(p, n);
	free(p);
}

enum cs_err str_vfmt(char *dst, size_t n, const char *fmt, va_list ap)
{
	if (n == 0)
		return CS_ETOOBIG;
	int w = vsnprintf(dst, n, fmt, ap);
	if (w < 0) {
		dst[0] = '\0';
		return CS_EINVAL;
	}
	if ((size_t)w >= n) {
		dst[0] = '\0';
		return CS_ETOOBIG;
	}
	return CS_OK;
}

enum cs_err str_fmt(char *dst, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	enum cs_err e = str_vfmt(dst, n, fmt, ap);
	va_end(ap);
	return e;
}

int hex_digit(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

const char *str_time(int64_t t, char buf[STR_TIME_LEN])
{
	struct tm tm;
	time_t tt = (time_t)t;
	if ((int64_t)tt != t || gmtime_r(&tt, &tm) == NULL ||
	    strftime(buf, STR_TIME_LEN, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
		/* 20 digits and a sign fit in STR_TIME_LEN. */
		if (str_fmt(buf, STR_TIME_LEN, "%lld", (long long)t) != CS_OK)
			return "?";
	}
	return buf;
}
