/* b64.c -- base64url without padding (RFC 4648 §5, RFC 7515 §2), the only
 * copy of the alphabet.  It never writes past the caller's cap and never
 * accepts a character outside the alphabet. */
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "b64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static int value_of(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	return -1;
}

/* The 2, 3 or 4 characters of in[i..i+3) (k = bytes left, at most 3 used). */
static size_t quantum(const unsigned char *in, size_t k, char out[4])
{
	unsigned v = (unsigned)in[0] << 16;
	if (k > 1)
		v |= (unsigned)in[1] << 8;
	if (k > 2)
		v |= in[2];
	out[0] = alphabet[(v >> 18) & 63];
	out[1] = alphabet[(v >> 12) & 63];
	out[2] = alphabet[(v >> 6) & 63];
	out[3] = alphabet[v & 63];
	return k > 2 ? 4 : k + 1;
}

enum cs_err b64url_encode(const void *in, size_t n, char *out, size_t cap)
{
	const unsigned char *p = in;
	size_t o = 0;
	if (n > (SIZE_MAX - 2) / 4 || cap < B64URL_LEN(n) + 1) {
		if (cap > 0)
			out[0] = '\0';
		return CS_ETOOBIG;
	}
	for (size_t i = 0; i < n; i += 3) {
		char q[4];
		size_t m = quantum(p + i, n - i, q);
		memcpy(out + o, q, m);
		o += m;
	}
	out[o] = '\0';
	return CS_OK;
}

enum cs_err b64url_append(struct buf *b, const void *in, size_t n)
{
	const unsigned char *p = in;
	enum cs_err e = CS_OK;
	for (size_t i = 0; i < n && e == CS_OK; i += 3) {
		char q[4];
		size_t m = quantum(p + i, n - i, q);
		e = buf_append(b, q, m);
	}
	return e;
}

bool b64url_char(unsigned char c)
{
	return value_of(c) >= 0;
}

bool b64url_valid(const char *s, size_t n)
{
	if (s == NULL || n == 0 || n % 4 == 1)
		return false;
	for (size_t i = 0; i < n; i++)
		if (value_of((unsigned char)s[i]) < 0)
			return false;
	return true;
}

static enum cs_err decode(const char *s, size_t n, unsigned char *out, size_t cap,
    size_t *out_len, bool canonical)
{
	size_t o = 0;
	unsigned acc = 0;
	int bits = 0;
	if (n % 4 == 1)
		return CS_EINVAL;
	if (cap < B64URL_DECODED_MAX(n))
		return CS_ETOOBIG;
	for (size_t i = 0; i < n; i++) {
		int v = value_of((unsigned char)s[i]);
		if (v < 0)
			return CS_EINVAL;
		acc = ((acc << 6) | (unsigned)v) & 0xffffu;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)((acc >> bits) & 0xff);
		}
	}
	if (canonical && bits > 0 && (acc & ((1u << bits) - 1)) != 0)
		return CS_EINVAL;       /* non-canonical: leftover bits set */
	*out_len = o;
	return CS_OK;
}

enum cs_err b64url_decode(const char *s, size_t n, unsigned char *out, size_t cap,
    size_t *out_len)
{
	return decode(s, n, out, cap, out_len, false);
}

enum cs_err b64url_decode_canonical(const char *s, size_t n, unsigned char *out, size_t cap,
    size_t *out_len)
{
	return decode(s, n, out, cap, out_len, true);
}

enum cs_err b64url_decode_alloc(const char *s, size_t n, unsigned char **out, size_t *out_len)
{
	size_t cap = B64URL_DECODED_MAX(n), len = 0;
	unsigned char *p = malloc(cap + 1);
	enum cs_err e;
	if (p == NULL)
		return CS_ENOMEM;
	if ((e = decode(s, n, p, cap, &len, false)) != CS_OK) {
		free(p);
		return e;
	}
	p[len] = '\0';
	*out = p;
	*out_len = len;
	return CS_OK;
}

enum cs_err b64url_random_id(char out[B64URL_ID_LEN + 1])
{
	unsigned char r[16];
	enum cs_err e;
	for (int tries = 0; tries < 16; tries++) {
		if (RAND_bytes(r, sizeof r) != 1)
			return CS_ECRYPTO;
		if ((e = b64url_encode(r, sizeof r, out, B64URL_ID_LEN + 1)) != CS_OK)
			return e;
		if (strstr(out, "eyJ") == NULL)
			return CS_OK;
	}
	return CS_ECRYPTO;                /* 16 draws in a row: the generator is broken */
}
