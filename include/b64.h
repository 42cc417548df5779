/* b64.h -- base64url (RFC 4648 §5, no padding): consentd's one encoder and
 * decoder.  No other file spells the alphabet or decodes it (lint.sh). */
#ifndef CS_B64_H
#define CS_B64_H

#include <stdbool.h>
#include <stddef.h>
#include "buf.h"
#include "cs_err.h"

/* Characters base64url takes for n bytes (no padding), and the most bytes n
 * characters decode to. */
#define B64URL_LEN(n) (((n) * 4 + 2) / 3)
#define B64URL_DECODED_MAX(n) ((n) * 3 / 4)

/* Writes B64URL_LEN(n) characters and a NUL into out; CS_ETOOBIG (out left
 * "" when cap > 0) when cap cannot hold them. */
enum cs_err b64url_encode(const void *in, size_t n, char *out, size_t cap) CS_MUST_CHECK;
/* Appends the B64URL_LEN(n) characters to b (buf_append's errors). */
enum cs_err b64url_append(struct buf *b, const void *in, size_t n) CS_MUST_CHECK;
/* true when c is one of the 64 characters. */
bool b64url_char(unsigned char c);
/* true when s[0..n) is non-empty, of the alphabet only, and of a length a
 * base64url text can have (n % 4 != 1). */
bool b64url_valid(const char *s, size_t n);
/* Decodes s[0..n) into out (cap bytes, at least B64URL_DECODED_MAX(n));
 * *out_len written only on CS_OK.  CS_EINVAL for a character outside the
 * alphabet (padding included) or n % 4 == 1; unused low bits of the last
 * character are ignored, as cjose does.  CS_ETOOBIG when cap is short. */
enum cs_err b64url_decode(const char *s, size_t n, unsigned char *out, size_t cap,
    size_t *out_len) CS_MUST_CHECK;
/* b64url_decode, and CS_EINVAL as well when those unused bits are not 0
 * (one text per byte string: consentd's own tokens). */
enum cs_err b64url_decode_canonical(const char *s, size_t n, unsigned char *out, size_t cap,
    size_t *out_len) CS_MUST_CHECK;
/* b64url_decode into a malloc'd buffer with a NUL after the bytes (for JSON);
 * *out and *out_len written only on CS_OK; CS_ENOMEM when malloc fails. */
enum cs_err b64url_decode_alloc(const char *s, size_t n, unsigned char **out,
    size_t *out_len) CS_MUST_CHECK;

/* The random ids of consents, consent requests, approvals and vault
 * records: B64URL_ID_LEN base64url characters of 16 random bytes, drawn
 * again in the rare case they contain "eyJ" (audit.c refuses what looks like
 * a JWT).  CS_ECRYPTO when the generator fails (or 16 draws in a row did). */
#define B64URL_ID_LEN 22
enum cs_err b64url_random_id(char out[B64URL_ID_LEN + 1]) CS_MUST_CHECK;

#endif
