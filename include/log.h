/* log.h -- consentd's one log stream: the access log and every diagnostic of the
 * server, as JSON lines with a level.  It must never be given a token, a secret,
 * an authorization code, a cookie or a query string: callers log ids and words. */
#ifndef CS_LOG_H
#define CS_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "buf.h"
#include "cs_err.h"

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_LEVEL__MAX };

/* "debug", "info", "warn" or "error". */
const char *log_level_name(enum log_level lv);
/* The level named s (exactly one of the names above); CS_EINVAL otherwise. */
enum cs_err log_level_parse(const char *s, enum log_level *out) CS_MUST_CHECK;

/* Until log_open succeeds (the command-line tools, `consentd -n`), a line is
 * plain text on stderr: "consentd: MSG" (warnings "consentd: warning: MSG").
 * log_open makes every later line JSON on `where` ("stderr", "stdout", or a file
 * path, appended) and drops lines below min.  While the server starts (until
 * log_started), an error line also goes to stderr when the stream is elsewhere,
 * so that a refused start is seen on the terminal.  Not thread-safe against
 * concurrent logging: call it before any thread logs.  CS_EIO when the file
 * cannot be opened (errno kept). */
enum cs_err log_open(const char *where, enum log_level min) CS_MUST_CHECK;
void log_started(void);
/* When the stream is a file: opens its path again (appended, created as
 * log_open creates it) and makes it the stream, for logrotate's
 * move-then-SIGHUP.  Safe while other threads log: every line goes whole to the
 * old file or to the new one, and the old file is closed once no writer uses
 * it.  When the path cannot be opened, the old stream stays, an error line says
 * why, and CS_EIO is returned (errno kept).  CS_OK and nothing done on stderr
 * or stdout. */
enum cs_err log_reopen(void) CS_MUST_CHECK;
/* Back to plain text on stderr; closes a file stream.  Call after every thread
 * that logs has stopped. */
void log_close(void);
/* Whether a line at lv would be written now. */
bool log_enabled(enum log_level lv);

enum log_type { LOG_T_STR = 0, LOG_T_INT, LOG_T_MS };
struct log_field {               /* one "key": value of a line */
	const char   *key;           /* a fixed ASCII word, never input */
	enum log_type type;
	const char   *s;             /* LOG_T_STR; NULL is written as null */
	int64_t       i;             /* LOG_T_INT */
	double        ms;            /* LOG_T_MS: written with three decimals */
};
#define LOG_STR(k, v) ((struct log_field){ .key = (k), .type = LOG_T_STR, .s = (v) })
#define LOG_INT(k, v) ((struct log_field){ .key = (k), .type = LOG_T_INT, .i = (int64_t)(v) })
#define LOG_MS(k, v)  ((struct log_field){ .key = (k), .type = LOG_T_MS, .ms = (v) })

/* One line: {"ts":..., "level":..., "event":event, <fields...>} (event may be NULL). */
void log_event(enum log_level lv, const char *event, const struct log_field *f, size_t n);
/* One line: {"ts":..., "level":..., "msg":<formatted>}. */
void log_msg(enum log_level lv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* --- the pure part (unit-tested) ------------------------------------------ */

/* Appends s as a JSON string literal that is safe to read in a terminal and in
 * any log viewer: ", \ and every control character (C0, DEL, C1) escaped, so is
 * every bidirectional control (U+061C, U+200E-F, U+202A-E, U+2066-9) and the
 * line separators U+2028-9; each byte of ill-formed UTF-8 (stray continuation
 * bytes, overlong forms, surrogates, beyond U+10FFFF, cut sequences) becomes
 * \ufffd.  On failure b keeps what it held. */
enum cs_err log_json_str(struct buf *b, const char *s) CS_MUST_CHECK;
/* One line's content, for log_format. */
struct log_line {
	int64_t                 ts_ms;   /* milliseconds since the epoch, UTC */
	enum log_level          lv;
	const char             *event;   /* may be NULL */
	const char             *msg;     /* may be NULL */
	const struct log_field *f;       /* n fields */
	size_t                  n;
};
/* Formats line, ending in "\n", into b; on failure b keeps what it held. */
enum cs_err log_format(struct buf *b, const struct log_line *line) CS_MUST_CHECK;

#endif
