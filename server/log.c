/* log.c -- the server's one log stream: access lines and diagnostics as JSON
 * lines with a level.  It must never write a byte it was given unescaped: every
 * string goes through log_json_str, so a line is always one line of valid JSON. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "buf.h"
#include "log.h"

#define LOG_LINE_MAX 16384        /* bytes of one line, escapes included */
#define LOG_LINE_EXPECT 1024      /* most lines (an access log line is ~400 bytes) */
#define LOG_MSG_MAX  2048         /* bytes of a formatted message before escaping */

static const char *const level_names[LOG_LEVEL__MAX] = {
	[LOG_DEBUG] = "debug", [LOG_INFO] = "info", [LOG_WARN] = "warn", [LOG_ERROR] = "error",
};

/* The stream.  Written only by log_open / log_close, which run while no other
 * thread logs, and by log_reopen, which swaps log_f under the write side of
 * log_lock while every writer holds the read side from reading log_f to the end
 * of its line: the old file is closed only when no writer uses it, and a line is
 * written whole to one file or the other.  starting is flipped by log_started
 * while workers may log. */
static pthread_rwlock_t log_lock = PTHREAD_RWLOCK_INITIALIZER;
static FILE *log_f;               /* NULL: plain text on stderr */
static bool log_own;              /* log_f is a file we opened */
static char log_path[PATH_MAX];   /* its path, when log_own (for log_reopen) */
static enum log_level log_min = LOG_INFO;
static atomic_bool starting = true;

const char *log_level_name(enum log_level lv)
{
	return (unsigned)lv < LOG_LEVEL__MAX ? level_names[lv] : "error";
}

enum cs_err log_level_parse(const char *s, enum log_level *out)
{
	if (s == NULL || out == NULL)
		return CS_EINVAL;
	for (int i = 0; i < LOG_LEVEL__MAX; i++)
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return CS_OK;
		}
	return CS_EINVAL;
}

/* --- escaping ------------------------------------------------------------- */

/* The length of the well-formed UTF-8 sequence at p (its code point in *cp),
 * or 0 when the bytes at p are ill-formed (RFC 3629 table, Unicode 3.9 D92).
 * Never reads past a NUL: every continuation check fails on it first. */
static size_t utf8_seq(const unsigned char *p, uint32_t *cp)
{
	unsigned char c = p[0], lo = 0x80, hi = 0xbf;
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		if ((p[1] & 0xc0) != 0x80)
			return 0;
		*cp = (uint32_t)(c & 0x1f) << 6 | (p[1] & 0x3f);
		return 2;
	}
	if (c >= 0xe0 && c <= 0xef) {
		if (c == 0xe0)
			lo = 0xa0;              /* no overlong forms */
		if (c == 0xed)
			hi = 0x9f;              /* no surrogates */
		if (p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80)
			return 0;
		*cp = (uint32_t)(c & 0x0f) << 12 | (uint32_t)(p[1] & 0x3f) << 6 | (p[2] & 0x3f);
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		if (c == 0xf0)
			lo = 0x90;
		if (c == 0xf4)
			hi = 0x8f;              /* nothing beyond U+10FFFF */
		if (p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80)
			return 0;
		*cp = (uint32_t)(c & 0x07) << 18 | (uint32_t)(p[1] & 0x3f) << 12 |
		    (uint32_t)(p[2] & 0x3f) << 6 | (p[3] & 0x3f);
		return 4;
	}
	return 0;
}

/* SECURITY: code points a terminal or a log viewer would act on or draw
 * misleadingly: controls, bidirectional controls, line separators. */
static bool must_escape(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c || cp == 0x200e ||
	    cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* Appends s escaped; json: as a JSON string literal (quotes, \" and \\ too),
 * else as plain text for a terminal (controls still escaped, quotes kept). */
static enum cs_err escape(struct buf *b, const char *s, bool json)
{
	size_t start = b->len;
	enum cs_err e = json ? buf_append(b, "\"", 1) : CS_OK;
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	while (e == CS_OK && *p) {
		/* A run of printable ASCII that needs no escape goes in at once
		 * (most of a line: ids, routes, numbers). */
		size_t run = 0;
		while (p[run] >= 0x20 && p[run] < 0x7f && (!json || (p[run] != '"' && p[run] != '\\')))
			run++;
		if (run > 0) {
			e = buf_append(b, p, run);
			p += run;
			continue;
		}
		uint32_t cp = 0;
		size_t n = utf8_seq(p, &cp);
		if (n == 0) {
			e = buf_append(b, "\\ufffd", 6);   /* one per ill-formed byte */
			p++;
			continue;
		}
		if (json && cp == '"')
			e = buf_append(b, "\\\"", 2);
		else if (json && cp == '\\')
			e = buf_append(b, "\\\\", 2);
		else if (cp == '\n')
			e = buf_append(b, "\\n", 2);
		else if (cp == '\r')
			e = buf_append(b, "\\r", 2);
		else if (cp == '\t')
			e = buf_append(b, "\\t", 2);
		else if (must_escape(cp))
			e = buf_printf(b, "\\u%04x", (unsigned)cp);
		else
			e = buf_append(b, p, n);
		p += n;
	}
	if (e == CS_OK && json)
		e = buf_append(b, "\"", 1);
	if (e != CS_OK)                  /* leave no half-written literal behind */
		buf_truncate(b, start);
	return e;
}

enum cs_err log_json_str(struct buf *b, const char *s)
{
	return escape(b, s, true);
}

/* --- lines ---------------------------------------------------------------- */

/* n (< 10^20) in decimal at the end of d[24]: where its first digit is. */
static char *decimal(uint64_t n, char d[24])
{
	char *q = d + 24;
	do {
		*--q = (char)('0' + n % 10);
		n /= 10;
	} while (n > 0);
	return q;
}

static enum cs_err put_int(struct buf *b, int64_t v)
{
	char d[24];
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	char *q = decimal(u, d);
	if (v < 0)
		*--q = '-';
	return buf_append(b, q, (size_t)(d + 24 - q));
}

/* A duration in milliseconds with three decimals, as "%.3f" writes it (up to
 * the last digit's rounding), without printf's machinery on every line. */
static enum cs_err put_ms(struct buf *b, double ms)
{
	if (!isfinite(ms))
		return buf_puts(b, "null");
	if (fabs(ms) >= 1e12)
		return buf_printf(b, "%.3f", ms);
	int64_t us = llround(ms * 1000.0);
	char d[24];
	uint64_t u = us < 0 ? (uint64_t)0 - (uint64_t)us : (uint64_t)us;
	char frac[4] = { (char)('0' + u / 100 % 10), (char)('0' + u / 10 % 10), (char)('0' + u % 10), 0 };
	char *q = decimal(u / 1000, d);
	if (us < 0)
		*--q = '-';
	enum cs_err e = buf_append(b, q, (size_t)(d + 24 - q));
	if (e == CS_OK)
		e = buf_append(b, ".", 1);
	return e == CS_OK ? buf_append(b, frac, 3) : e;
}

/* The timestamp's seconds as text, kept per thread for the second it names:
 * every line of that second reuses it (gmtime_r and strftime once a second). */
static enum cs_err put_ts(struct buf *b, int64_t ts_ms)
{
	static _Thread_local int64_t cached_secs = -1;
	static _Thread_local char ts[32];
	time_t secs = (time_t)(ts_ms / 1000);
	if (ts_ms < 0)
		return buf_puts(b, "\"-\"");
	if (cached_secs != (int64_t)secs) {
		struct tm tm;
		if (gmtime_r(&secs, &tm) == NULL ||
		    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
			cached_secs = -1;
			return buf_puts(b, "\"-\"");
		}
		cached_secs = (int64_t)secs;
	}
	int msec = (int)(ts_ms % 1000);
	char tail[7] = { '.', (char)('0' + msec / 100), (char)('0' + msec / 10 % 10),
		(char)('0' + msec % 10), 'Z', '"', 0 };
	enum cs_err e = buf_append(b, "\"", 1);
	if (e == CS_OK)
		e = buf_puts(b, ts);
	return e == CS_OK ? buf_append(b, tail, 6) : e;
}

static enum cs_err put_field(struct buf *b, const struct log_field *f)
{
	enum cs_err e;
	if ((e = buf_puts(b, ",")) != CS_OK || (e = log_json_str(b, f->key)) != CS_OK ||
	    (e = buf_puts(b, ":")) != CS_OK)
		return e;
	switch (f->type) {
	case LOG_T_STR:
		return f->s == NULL ? buf_puts(b, "null") : log_json_str(b, f->s);
	case LOG_T_INT:
		return put_int(b, f->i);
	case LOG_T_MS:
		return put_ms(b, f->ms);
	default:
		return buf_puts(b, "null");
	}
}

enum cs_err log_format(struct buf *b, const struct log_line *line)
{
	const char *event = line->event, *msg = line->msg;
	const struct log_field *f = line->f;
	size_t n = line->n;
	enum cs_err e;
	size_t start = b->len;
	if ((e = buf_puts(b, "{\"ts\":")) != CS_OK || (e = put_ts(b, line->ts_ms)) != CS_OK ||
	    (e = buf_puts(b, ",\"level\":\"")) != CS_OK ||
	    (e = buf_puts(b, log_level_name(line->lv))) != CS_OK || (e = buf_puts(b, "\"")) != CS_OK)
		goto out;
	if (event != NULL && ((e = buf_puts(b, ",\"event\":")) != CS_OK ||
	    (e = log_json_str(b, event)) != CS_OK))
		goto out;
	for (size_t i = 0; i < n; i++)
		if ((e = put_field(b, &f[i])) != CS_OK)
			goto out;
	if (msg != NULL && ((e = buf_puts(b, ",\"msg\":")) != CS_OK ||
	    (e = log_json_str(b, msg)) != CS_OK))
		goto out;
	e = buf_puts(b, "}\n");
out:
	if (e != CS_OK)
		buf_truncate(b, start);
	return e;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return -1;
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void put_line(FILE *f, const char *s, size_t n)
{
	flockfile(f);
	fwrite(s, 1, n, f);
	fflush(f);
	funlockfile(f);
}

bool log_enabled(enum log_level lv)
{
	return lv >= log_min;
}

static void emit(enum log_level lv, const char *event, const char *msg,
    const struct log_field *f, size_t n)
{
	struct buf b;
	if (!log_enabled(lv))
		return;
	buf_init(&b, LOG_LINE_MAX);
	/* Room for a usual line at once, not by doublings (issue 15). */
	if (buf_expect(&b, LOG_LINE_EXPECT) != CS_OK)
		return;                   /* out of memory: the line could not be built anyway */
	pthread_rwlock_rdlock(&log_lock);
	if (log_f == NULL && msg != NULL && event == NULL && n == 0) {
		/* Not serving: the tools' plain text, controls escaped all the same. */
		if (buf_puts(&b, lv == LOG_WARN ? "consentd: warning: " : "consentd: ") == CS_OK &&
		    escape(&b, msg, false) == CS_OK && buf_puts(&b, "\n") == CS_OK)
			put_line(stderr, b.data, b.len);
		goto out;
	}
	struct log_line line = { .ts_ms = now_ms(), .lv = lv, .event = event, .msg = msg, .f = f,
		.n = n };
	if (log_format(&b, &line) != CS_OK) {
		buf_reset(&b);
		line = (struct log_line){ .ts_ms = line.ts_ms, .lv = lv, .event = event,
			.msg = "(this line was too long to log)" };
		if (log_format(&b, &line) != CS_OK)
			goto out;
	}
	FILE *to = log_f != NULL ? log_f : stderr;
	put_line(to, b.data, b.len);
	if (to != stderr && lv >= LOG_ERROR && atomic_load(&starting))
		put_line(stderr, b.data, b.len);
out:
	pthread_rwlock_unlock(&log_lock);
	buf_clear(&b);
}

void log_event(enum log_level lv, const char *event, const struct log_field *f, size_t n)
{
	emit(lv, event, NULL, f, n);
}

void log_msg(enum log_level lv, const char *fmt, ...)
{
	struct buf b;
	va_list ap;
	if (!log_enabled(lv))
		return;
	buf_init(&b, LOG_MSG_MAX);
	va_start(ap, fmt);
	enum cs_err e = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	/* A message is logged whole or, longer than LOG_MSG_MAX, replaced by one
	 * that says so (as emit does with a line too long): never a cut one. */
	emit(lv, NULL, e == CS_OK && b.data != NULL ? b.data : "(this message was too long to log)",
	    NULL, 0);
	buf_clear(&b);
}

enum cs_err log_open(const char *where, enum log_level min)
{
	FILE *f;
	bool own = false;
	if (where == NULL || (unsigned)min >= LOG_LEVEL__MAX)
		return CS_EINVAL;
	if (strcmp(where, "stderr") == 0) {
		f = stderr;
	} else if (strcmp(where, "stdout") == 0) {
		f = stdout;
	} else {
		if (str_fmt(log_path, sizeof log_path, "%s", where) != CS_OK)
			return CS_EINVAL;
		if ((f = fopen(where, "ae")) == NULL)
			return CS_EIO;
		own = true;
	}
	log_close();
	log_f = f;
	log_own = own;
	log_min = min;
	atomic_store(&starting, true);
	return CS_OK;
}

enum cs_err log_reopen(void)
{
	char path[PATH_MAX];
	pthread_rwlock_rdlock(&log_lock);
	bool own = log_own && log_f != NULL;
	enum cs_err e = own ? str_fmt(path, sizeof path, "%s", log_path) : CS_OK;
	pthread_rwlock_unlock(&log_lock);
	if (!own)
		return CS_OK;             /* stderr or stdout: nothing to reopen */
	if (e != CS_OK)
		return e;
	/* Opened before the swap: on failure the old stream stays as it was. */
	FILE *f = fopen(path, "ae");
	if (f == NULL) {
		int err = errno;
		log_msg(LOG_ERROR, "cannot reopen the log %s: %s; keeping the current file",
		    path, strerror(err));
		errno = err;
		return CS_EIO;
	}
	pthread_rwlock_wrlock(&log_lock);
	FILE *old = log_f;
	log_f = f;
	pthread_rwlock_unlock(&log_lock);
	/* No writer holds old now: each took the read side before using it. */
	fclose(old);
	return CS_OK;
}

void log_started(void)
{
	atomic_store(&starting, false);
}

void log_close(void)
{
	if (log_f != NULL && log_own)
		fclose(log_f);
	log_f = NULL;
	log_own = false;
	log_min = LOG_INFO;
	atomic_store(&starting, true);
}
