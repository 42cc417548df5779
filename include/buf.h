/* buf.h -- a growable byte buffer with a mandatory size cap (curl's dynbuf idea).
 * All string building in consentd goes through it; it never grows past max.
 * Also the fixed-array formatter str_fmt, str_time, hex_digit, wipe_free and
 * ARRAY_FREE_FN. */
#ifndef CS_BUF_H
#define CS_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"

struct buf {            /* caller-owned; release with buf_clear() */
	char   *data;       /* always NUL-terminated when non-NULL */
	size_t  len;
	size_t  cap;
	size_t  max;        /* hard cap on len */
};

/* Prepares an empty buffer that will refuse to grow beyond max bytes. */
void buf_init(struct buf *b, size_t max);
/* Makes room for n more bytes now: one allocation instead of the doublings, for a
 * caller that knows about how much it will write.  A hint, so never past the cap (it
 * then makes room up to the cap); CS_ENOMEM on allocation failure. */
enum cs_err buf_expect(struct buf *b, size_t n) CS_MUST_CHECK;
/* Appends n bytes; CS_ETOOBIG past the cap, CS_ENOMEM on allocation failure.
 * On failure the buffer keeps its previous content. */
enum cs_err buf_append(struct buf *b, const void *p, size_t n) CS_MUST_CHECK;
enum cs_err buf_puts(struct buf *b, const char *s) CS_MUST_CHECK;
enum cs_err buf_printf(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3))) CS_MUST_CHECK;
enum cs_err buf_vprintf(struct buf *b, const char *fmt, va_list ap) CS_MUST_CHECK;
/* Appends s as a JSON string literal (with quotes), escaping as RFC 8259 asks. */
enum cs_err buf_json_str(struct buf *b, const char *s) CS_MUST_CHECK;
/* Appends s with HTML special characters escaped (& < > " ' ` =). */
enum cs_err buf_html(struct buf *b, const char *s) CS_MUST_CHECK;
/* Empties the buffer without freeing it. */
void buf_reset(struct buf *b);
/* Cuts the buffer back to its first len bytes (len <= b->len), e.g. to leave
 * nothing half-written behind after a failed append. */
void buf_truncate(struct buf *b, size_t len);
/* Reads b from the cursor *off (<= b->len): up to max bytes into dst, *off
 * moved past them; returns how many (0 when nothing is left). */
size_t buf_copy_out(const struct buf *b, size_t *off, char *dst, size_t max);
/* Hands the data to the caller (who frees it) and empties the buffer.
 * Returns an empty allocated string when nothing was appended, NULL on OOM. */
char *buf_steal(struct buf *b);
/* Frees the data. NULL-safe. */
void buf_clear(struct buf *b);
/* Wipes then frees; for buffers that held secrets. NULL-safe. */
void buf_wipe_clear(struct buf *b);
/* Wipes a heap string that held a secret (up to its NUL), then frees it;
 * wipe_free_n the same for n bytes at p.  NULL-safe.  The one definition of
 * each (lint.sh). */
void wipe_free(char *s);
void wipe_free_n(void *p, size_t n);
/* Defines void free_fn(T *v, size_t n), the free of a malloc'd array of n
 * T's: clear_fn(&v[i]) on each, then free(v); NULL-safe.  One loop for the
 * lists every module hands out (the file includes <stdlib.h>). */
#define ARRAY_FREE_FN(T, clear_fn, free_fn) \
	void free_fn(T *v, size_t n) \
	{ \
		if (v == NULL) \
			return; \
		for (size_t i = 0; i < n; i++) \
			clear_fn(&v[i]); \
		free(v); \
	}

/* free_fn(p), then p = NULL: a teardown that may run again finds nothing to free. */
#define FREE_TO_NULL(free_fn, p) \
	do { \
		free_fn(p); \
		(p) = NULL; \
	} while (0)

/* t as "2006-01-02T15:04:05Z" (UTC) in buf, or as its decimal digits when
 * out of range (an int64 always fits STR_TIME_LEN); returns buf. */
#define STR_TIME_LEN 32
const char *str_time(int64_t t, char buf[STR_TIME_LEN]);
/* The value of one hexadecimal digit (either case), -1 when ch is none. */
int hex_digit(char ch);

/* Formats into a fixed array of n bytes, the one way consentd writes text
 * into an array: CS_ETOOBIG when the text would not fit whole (dst is then
 * "", never a silently cut string), CS_EINVAL on an encoding error. */
enum cs_err str_fmt(char *dst, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4))) CS_MUST_CHECK;
enum cs_err str_vfmt(char *dst, size_t n, const char *fmt, va_list ap) CS_MUST_CHECK;

#endif
