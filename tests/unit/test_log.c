/* test_log.c -- the log stream: its JSON string escaping (no raw control or
 * bidirectional character, no ill-formed UTF-8 ever reaches a line), whole
 * lines (one line, valid JSON, the fields given), levels, and the stream itself
 * (a file of JSON lines once opened; plain text on stderr before), and its
 * reopen after a move (logrotate), with writers on several threads. */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>

#include "buf.h"
#include "testutil.h"
#include "log.h"

/* s escaped as a JSON literal (malloc'd). */
static char *esc(const char *s)
{
	struct buf b;
	buf_init(&b, 1 << 20);
	ck_assert_int_eq(log_json_str(&b, s), CS_OK);
	char *out = buf_steal(&b);
	ck_assert_ptr_nonnull(out);
	return out;
}

/* Checks that lit is one JSON string literal of printable ASCII (every byte in
 * 0x20..0x7e: nothing raw a terminal or viewer could act on) and returns its
 * decoded value (malloc'd). */
static char *parse_lit(const char *lit)
{
	for (const unsigned char *p = (const unsigned char *)lit; *p; p++)
		ck_assert_msg(*p >= 0x20 && *p < 0x7f, "raw byte 0x%02x in %s", *p, lit);
	json_error_t err;
	json_t *v = json_loads(lit, JSON_DECODE_ANY, &err);
	ck_assert_msg(json_is_string(v), "not a JSON string: %s (%s)", lit, err.text);
	char *out = strdup(json_string_value(v));
	json_decref(v);
	return out;
}

static void expect_esc(const char *in, const char *want)
{
	char *got = esc(in);
	ck_assert_str_eq(got, want);
	free(parse_lit(got));
	free(got);
}

/* The UTF-8 encoding of cp (surrogates included, so ill-formed input can be built). */
static size_t put_utf8(uint32_t cp, unsigned char out[5])
{
	size_t n;
	if (cp < 0x80) {
		out[0] = (unsigned char)cp;
		n = 1;
	} else if (cp < 0x800) {
		out[0] = (unsigned char)(0xc0 | cp >> 6);
		out[1] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		out[0] = (unsigned char)(0xe0 | cp >> 12);
		out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		out[0] = (unsigned char)(0xf0 | cp >> 18);
		out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
		out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
		out[3] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	out[n] = '\0';
	return n;
}

/* --- escaping ----------------------------------------------------------- */

START_TEST(test_log_json_str_plain_and_quotes)
{
	expect_esc("", "\"\"");
	expect_esc("subject token expired", "\"subject token expired\"");
	expect_esc("a \"quoted\" back\\slash", "\"a \\\"quoted\\\" back\\\\slash\"");
	expect_esc("/consent/{id}", "\"/consent/{id}\"");
}
END_TEST

START_TEST(test_log_json_str_every_c0_and_del_escaped)
{
	for (unsigned c = 1; c < 0x20; c++) {
		char in[4] = { 'a', (char)c, 'b', 0 };
		char want[16];
		if (c == '\n')
			ck_assert_int_eq(str_fmt(want, sizeof want, "\"a\\nb\""), CS_OK);
		else if (c == '\r')
			ck_assert_int_eq(str_fmt(want, sizeof want, "\"a\\rb\""), CS_OK);
		else if (c == '\t')
			ck_assert_int_eq(str_fmt(want, sizeof want, "\"a\\tb\""), CS_OK);
		else
			ck_assert_int_eq(str_fmt(want, sizeof want, "\"a\\u%04xb\"", c), CS_OK);
		expect_esc(in, want);
	}
	expect_esc("a\x7f" "b", "\"a\\u007fb\"");
	/* A forged log line inside a value stays inside the value. */
	char *got = esc("x\n{\"level\":\"error\",\"msg\":\"forged\"}");
	ck_assert_ptr_null(strchr(got, '\n'));
	char *back = parse_lit(got);
	ck_assert_str_eq(back, "x\n{\"level\":\"error\",\"msg\":\"forged\"}");
	free(back);
	free(got);
}
END_TEST

START_TEST(test_log_json_str_c1_bidi_and_separators_escaped)
{
	expect_esc("\xc2\x80", "\"\\u0080\"");
	expect_esc("\xc2\x9b" "31m", "\"\\u009b31m\"");            /* C1 CSI */
	expect_esc("\xc2\x9f", "\"\\u009f\"");
	expect_esc("txt\xe2\x80\xae" "fdp.exe", "\"txt\\u202efdp.exe\"");   /* RLO */
	expect_esc("\xe2\x81\xa6" "x" "\xe2\x81\xa9", "\"\\u2066x\\u2069\"");
	expect_esc("\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c", "\"\\u200e\\u200f\\u061c\"");
	expect_esc("a\xe2\x80\xa8" "b\xe2\x80\xa9", "\"a\\u2028b\\u2029\"");
	/* Neighbours of escaped ranges pass as they are. */
	char *got = esc("\xc2\xa0\xe2\x80\x8d\xe2\x80\xaf");
	ck_assert_str_eq(got, "\"\xc2\xa0\xe2\x80\x8d\xe2\x80\xaf\"");
	free(got);
}
END_TEST

START_TEST(test_log_json_str_valid_utf8_kept)
{
	char *got = esc("caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf");
	ck_assert_str_eq(got, "\"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\"");
	json_t *v = json_loads(got, JSON_DECODE_ANY, NULL);
	ck_assert(json_is_string(v));
	ck_assert_str_eq(json_string_value(v), "caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf");
	json_decref(v);
	free(got);
}
END_TEST

START_TEST(test_log_json_str_invalid_utf8_escaped)
{
	static const struct { const char *in, *want; } cases[] = {
		{ "\x80", "\"\\ufffd\"" },                           /* a stray continuation byte */
		{ "a\xbf" "b", "\"a\\ufffdb\"" },
		{ "\xc0\xaf", "\"\\ufffd\\ufffd\"" },                /* overlong '/' */
		{ "\xc1\xbf", "\"\\ufffd\\ufffd\"" },
		{ "\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\"" },     /* overlong, 3 bytes */
		{ "\xf0\x80\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"" },
		{ "\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"" },     /* a surrogate */
		{ "\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"" },   /* beyond U+10FFFF */
		{ "\xf5\x80\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"" },
		{ "\xff\xfe", "\"\\ufffd\\ufffd\"" },
		{ "\xe2\x82", "\"\\ufffd\\ufffd\"" },                /* cut at the end */
		{ "\xe2\x82" "x", "\"\\ufffd\\ufffdx\"" },           /* cut before ASCII */
		{ "\xf0\x9f\x98", "\"\\ufffd\\ufffd\\ufffd\"" },
		{ "\xc3" "\"", "\"\\ufffd\\\"\"" },                  /* a quote is never eaten */
		{ "\xc3\\", "\"\\ufffd\\\\\"" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		expect_esc(cases[i].in, cases[i].want);
}
END_TEST

/* Every code point, alone: either passed through exactly (and then neither a
 * control nor a bidirectional character) or escaped; surrogates are ill-formed. */
START_TEST(test_log_json_str_every_code_point)
{
	for (uint32_t cp = 1; cp <= 0x10ffff; cp++) {
		unsigned char in[5];
		char want[64];
		struct buf b;
		put_utf8(cp, in);
		buf_init(&b, 256);
		ck_assert_int_eq(log_json_str(&b, (const char *)in), CS_OK);
		bool surrogate = cp >= 0xd800 && cp <= 0xdfff;
		bool ctl = cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
		bool bidi = cp == 0x061c || cp == 0x200e || cp == 0x200f ||
		    (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
		if (surrogate) {
			ck_assert_str_eq(b.data, "\"\\ufffd\\ufffd\\ufffd\"");
		} else if ((ctl || bidi) && cp != '\n' && cp != '\r' && cp != '\t') {
			ck_assert_int_eq(str_fmt(want, sizeof want, "\"\\u%04x\"", (unsigned)cp), CS_OK);
			ck_assert_str_eq(b.data, want);
		} else if (!ctl && cp != '"' && cp != '\\') {
			ck_assert_int_eq(str_fmt(want, sizeof want, "\"%s\"", (const char *)in), CS_OK);
			ck_assert_msg(strcmp(b.data, want) == 0, "U+%04X changed", (unsigned)cp);
		}
		buf_clear(&b);
	}
}
END_TEST

/* Random bytes: the literal is always valid JSON, printable ASCII or well-formed
 * UTF-8 without a raw control (jansson refuses ill-formed UTF-8 on load). */
START_TEST(test_log_json_str_random_bytes)
{
	uint32_t x = 2463534242u;
	for (int round = 0; round < 20000; round++) {
		unsigned char in[24];
		size_t n = 1 + (size_t)(round % 23);
		for (size_t i = 0; i < n; i++) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			in[i] = (unsigned char)(x % 255 + 1);    /* no NUL */
		}
		in[n] = '\0';
		char *got = esc((const char *)in);
		json_error_t err;
		json_t *v = json_loads(got, JSON_DECODE_ANY, &err);
		ck_assert_msg(json_is_string(v), "round %d: %s", round, err.text);
		for (const unsigned char *p = (const unsigned char *)got; *p; p++)
			ck_assert_msg(*p >= 0x20 && *p != 0x7f, "raw control 0x%02x", *p);
		ck_assert_ptr_null(strstr(got, "\xc2\x9b"));
		ck_assert_ptr_null(strstr(got, "\xe2\x80\xae"));
		json_decref(v);
		free(got);
	}
}
END_TEST

START_TEST(test_log_json_str_cap_leaves_nothing_half_written)
{
	struct buf b;
	buf_init(&b, 8);
	ck_assert_int_eq(buf_puts(&b, "ab"), CS_OK);
	ck_assert_int_eq(log_json_str(&b, "\x01\x02\x03"), CS_ETOOBIG);
	ck_assert_str_eq(b.data, "ab");
	ck_assert_uint_eq(b.len, 2);
	buf_clear(&b);
}
END_TEST

/* --- lines ---------------------------------------------------------------- */

START_TEST(test_log_format_line_is_one_json_object)
{
	struct buf b;
	struct log_field f[] = {
		LOG_STR("request_id", "0123456789abcdef"), LOG_STR("route", "/consent/{id}"),
		LOG_INT("status", 400), LOG_MS("ms", 1.23456), LOG_STR("agent", NULL),
		LOG_STR("error", "x\ny\xc2\x85z\xff"),
	};
	buf_init(&b, 4096);
	/* 2024-02-29T12:34:56.789Z */
	ck_assert_int_eq(log_format(&b, &(struct log_line){ .ts_ms = INT64_C(1709210096789),
	    .lv = LOG_WARN, .event = "request", .msg = "said \"hi\"\n", .f = f,
	    .n = sizeof f / sizeof f[0] }), CS_OK);
	ck_assert_uint_gt(b.len, 2);
	ck_assert_int_eq(b.data[b.len - 1], '\n');
	ck_assert_ptr_eq(strchr(b.data, '\n'), b.data + b.len - 1);
	for (size_t i = 0; i + 1 < b.len; i++)
		ck_assert_msg((unsigned char)b.data[i] >= 0x20 && b.data[i] != 0x7f, "raw byte at %zu", i);
	json_error_t err;
	json_t *v = json_loads(b.data, 0, &err);
	ck_assert_msg(json_is_object(v), "%s: %s", b.data, err.text);
	ck_assert_str_eq(json_string_value(json_object_get(v, "ts")), "2024-02-29T12:34:56.789Z");
	ck_assert_str_eq(json_string_value(json_object_get(v, "level")), "warn");
	ck_assert_str_eq(json_string_value(json_object_get(v, "event")), "request");
	ck_assert_str_eq(json_string_value(json_object_get(v, "msg")), "said \"hi\"\n");
	ck_assert_str_eq(json_string_value(json_object_get(v, "route")), "/consent/{id}");
	ck_assert_int_eq(json_integer_value(json_object_get(v, "status")), 400);
	ck_assert(json_is_real(json_object_get(v, "ms")));
	ck_assert(json_is_null(json_object_get(v, "agent")));
	ck_assert_str_eq(json_string_value(json_object_get(v, "error")), "x\ny\xc2\x85z\xef\xbf\xbd");
	json_decref(v);
	buf_clear(&b);

	/* No event, no message: still a line. */
	buf_init(&b, 256);
	ck_assert_int_eq(log_format(&b, &(struct log_line){ .lv = LOG_ERROR }), CS_OK);
	ck_assert_str_eq(b.data, "{\"ts\":\"1970-01-01T00:00:00.000Z\",\"level\":\"error\"}\n");
	buf_clear(&b);
}
END_TEST

/* The fields log.c writes without printf (issue 34): integers, durations with
 * three decimals, and the timestamp kept per thread for its second. */
static char *line_of(int64_t ts_ms, const struct log_field *f, size_t n)
{
	struct buf b;
	buf_init(&b, 4096);
	ck_assert_int_eq(log_format(&b, &(struct log_line){ .ts_ms = ts_ms, .lv = LOG_INFO,
	    .f = f, .n = n }), CS_OK);
	return buf_steal(&b);
}

START_TEST(test_log_numbers_and_ts_without_printf)
{
	static const struct { double ms; const char *text; } ms[] = {
		{ 0, "0.000" }, { 1.23456, "1.235" }, { 3.912, "3.912" }, { 0.0004, "0.000" },
		{ 0.0006, "0.001" }, { 999.9996, "1000.000" }, { 12345.678, "12345.678" },
		{ -2.5, "-2.500" }, { 1e13, "10000000000000.000" },
	};
	for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
		struct log_field f[] = { LOG_MS("ms", ms[i].ms) };
		char want[128], *got = line_of(0, f, 1);
		ck_assert_int_eq(str_fmt(want, sizeof want, "{\"ts\":\"1970-01-01T00:00:00.000Z\","
		    "\"level\":\"info\",\"ms\":%s}\n", ms[i].text), CS_OK);
		ck_assert_str_eq(got, want);
		free(got);
	}
	/* Every duration of a request (0 to 100 s, in steps that are not round):
	 * the text printf's "%.3f" would write, but for its last digit's rounding. */
	for (double v = 0; v < 100000; v += 7.0711) {
		struct log_field f[] = { LOG_MS("ms", v) };
		char want[64], *got = line_of(0, f, 1);
		ck_assert_int_eq(str_fmt(want, sizeof want, "%.3f", v), CS_OK);
		char *at = strstr(got, "\"ms\":") + 5;
		double back = strtod(at, NULL);
		ck_assert_msg(fabs(back - v) <= 0.0005 + 1e-9, "%s for %.6f", at, v);
		ck_assert_msg(strncmp(at, want, strlen(want)) == 0 || fabs(strtod(want, NULL) - back) <= 0.0011,
		    "%s against %s", at, want);
		free(got);
	}
	static const int64_t ints[] = { 0, 7, -7, 400, INT64_MAX, INT64_MIN };
	for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
		struct log_field f[] = { LOG_INT("n", ints[i]) };
		char want[64], *got = line_of(0, f, 1);
		ck_assert_int_eq(str_fmt(want, sizeof want, "\"n\":%lld}", (long long)ints[i]), CS_OK);
		ck_assert_msg(strstr(got, want) != NULL, "%s: %s", want, got);
		free(got);
	}
	/* The timestamp's second is kept per thread: another second, then the
	 * first again, each written as its own. */
	static const struct { int64_t ms; const char *text; } ts[] = {
		{ INT64_C(1709210096789), "2024-02-29T12:34:56.789Z" },
		{ INT64_C(1709210096001), "2024-02-29T12:34:56.001Z" },
		{ INT64_C(1709210097000), "2024-02-29T12:34:57.000Z" },
		{ INT64_C(1709210096789), "2024-02-29T12:34:56.789Z" },
		{ 0, "1970-01-01T00:00:00.000Z" }, { -1, "-" },
	};
	for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
		char want[64], *got = line_of(ts[i].ms, NULL, 0);
		ck_assert_int_eq(str_fmt(want, sizeof want, "{\"ts\":\"%s\",", ts[i].text), CS_OK);
		ck_assert_msg(strncmp(got, want, strlen(want)) == 0, "%s: %s", want, got);
		free(got);
	}
}
END_TEST

START_TEST(test_log_levels_parse)
{
	enum log_level lv = LOG_ERROR;
	static const char *const names[] = { "debug", "info", "warn", "error" };
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(log_level_parse(names[i], &lv), CS_OK);
		ck_assert_int_eq((int)lv, i);
		ck_assert_str_eq(log_level_name(lv), names[i]);
	}
	static const char *const bad[] = { "", "INFO", "warning", "err", "info ", "trace" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		ck_assert_int_eq(log_level_parse(bad[i], &lv), CS_EINVAL);
	ck_assert_int_eq(log_level_parse(NULL, &lv), CS_EINVAL);
}
END_TEST

/* --- the stream ----------------------------------------------------------- */

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	struct buf b;
	char chunk[4096];
	size_t n;
	buf_init(&b, 1 << 20);
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		ck_assert_int_eq(buf_append(&b, chunk, n), CS_OK);
	fclose(f);
	char *s = buf_steal(&b);
	ck_assert_ptr_nonnull(s);
	return s;
}

START_TEST(test_log_stream_file_of_json_lines)
{
	char *dir = tu_tmpdir();
	char *path = tu_path(dir, "consentd.log");
	ck_assert_int_eq(log_open(path, LOG_INFO), CS_OK);
	ck_assert(!log_enabled(LOG_DEBUG));
	ck_assert(log_enabled(LOG_INFO));
	log_msg(LOG_DEBUG, "not written %d", 1);
	log_msg(LOG_INFO, "listening on %s", "127.0.0.1:8080");
	log_msg(LOG_WARN, "the agent said \x1b[31m%s", "red\r\n");
	struct log_field f[] = { LOG_STR("route", "/token"), LOG_INT("status", 400),
	    LOG_STR("error", "authorization_pending") };
	log_event(LOG_INFO, "request", f, 3);
	log_started();
	log_msg(LOG_ERROR, "after the start");
	log_close();

	char *text = slurp(path);
	ck_assert_ptr_null(strstr(text, "not written"));
	ck_assert_ptr_null(strchr(text, '\x1b'));
	ck_assert_ptr_null(strchr(text, '\r'));
	int lines = 0;
	for (char *line = text, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
		*nl = '\0';
		json_error_t err;
		json_t *v = json_loads(line, 0, &err);
		ck_assert_msg(json_is_object(v), "line %d: %s (%s)", lines, line, err.text);
		ck_assert(json_is_string(json_object_get(v, "ts")));
		ck_assert(json_is_string(json_object_get(v, "level")));
		if (lines == 2)
			ck_assert_str_eq(json_string_value(json_object_get(v, "error")), "authorization_pending");
		if (lines == 1)
			ck_assert_str_eq(json_string_value(json_object_get(v, "msg")),
			    "the agent said \x1b[31mred\r\n");
		json_decref(v);
		lines++;
	}
	ck_assert_int_eq(lines, 4);
	free(text);

	/* A stream that cannot be opened is an error, and nothing changes. */
	char *nowhere = tu_path(dir, "no/such/dir/log");
	ck_assert_int_eq(log_open(nowhere, LOG_INFO), CS_EIO);
	ck_assert_int_eq(log_open(path, LOG_LEVEL__MAX), CS_EINVAL);
	free(nowhere);
	free(path);
	tu_rmdir(dir);
}
END_TEST

START_TEST(test_log_levels_filter)
{
	char *dir = tu_tmpdir();
	char *path = tu_path(dir, "warn.log");
	ck_assert_int_eq(log_open(path, LOG_WARN), CS_OK);
	log_msg(LOG_INFO, "info line");
	log_event(LOG_INFO, "request", NULL, 0);
	log_msg(LOG_WARN, "warn line");
	log_msg(LOG_ERROR, "error line");
	log_started();
	log_close();
	char *text = slurp(path);
	ck_assert_ptr_null(strstr(text, "info line"));
	ck_assert_ptr_null(strstr(text, "\"request\""));
	ck_assert_ptr_nonnull(strstr(text, "\"level\":\"warn\",\"msg\":\"warn line\""));
	ck_assert_ptr_nonnull(strstr(text, "\"level\":\"error\",\"msg\":\"error line\""));
	free(text);

	ck_assert_int_eq(log_open(path, LOG_DEBUG), CS_OK);
	log_msg(LOG_DEBUG, "debug line");
	log_close();
	text = slurp(path);
	ck_assert_ptr_nonnull(strstr(text, "\"level\":\"debug\",\"msg\":\"debug line\""));
	free(text);
	free(path);
	tu_rmdir(dir);
}
END_TEST

/* Before log_open (the tools, -n) a message is text on stderr, controls escaped. */
START_TEST(test_log_text_mode_before_open)
{
	char *dir = tu_tmpdir();
	char *path = tu_path(dir, "stderr.txt");
	fflush(stderr);
	int saved = dup(2);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_ne(dup2(fileno(f), 2), -1);
	log_close();
	log_msg(LOG_ERROR, "master key file %s is readable by group or others", "/k\x1b[2J");
	log_msg(LOG_WARN, "careful");
	log_msg(LOG_DEBUG, "hidden");
	fflush(stderr);
	ck_assert_int_ne(dup2(saved, 2), -1);
	close(saved);
	fclose(f);
	char *text = slurp(path);
	ck_assert_str_eq(text, "consentd: master key file /k\\u001b[2J is readable by group or others\n"
	    "consentd: warning: careful\n");
	free(text);
	free(path);
	tu_rmdir(dir);
}
END_TEST

/* --- reopen (logrotate: move the file, SIGHUP) ----------------------------- */

#define REOPEN_THREADS 4
#define REOPEN_LINES   2000

static atomic_int reopen_written;

static void *reopen_writer(void *arg)
{
	int t = (int)(intptr_t)arg;
	for (int i = 0; i < REOPEN_LINES; i++) {
		struct log_field f[] = { LOG_INT("t", t), LOG_INT("i", i) };
		log_event(LOG_INFO, "w", f, 2);
		atomic_fetch_add(&reopen_written, 1);
	}
	return NULL;
}

/* Counts the lines of text (each one JSON object) and marks seen[t][i]. */
static int count_lines(char *text, unsigned char seen[REOPEN_THREADS][REOPEN_LINES])
{
	int lines = 0;
	for (char *line = text, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
		*nl = '\0';
		json_error_t err;
		json_t *v = json_loads(line, 0, &err);
		ck_assert_msg(json_is_object(v), "torn line: %s (%s)", line, err.text);
		json_t *t = json_object_get(v, "t"), *i = json_object_get(v, "i");
		if (json_is_integer(t) && json_is_integer(i)) {
			json_int_t ti = json_integer_value(t), ii = json_integer_value(i);
			ck_assert(ti >= 0 && ti < REOPEN_THREADS && ii >= 0 && ii < REOPEN_LINES);
			ck_assert_msg(!seen[ti][ii], "line %lld/%lld twice", (long long)ti, (long long)ii);
			seen[ti][ii] = 1;
		}
		json_decref(v);
		lines++;
	}
	return lines;
}

START_TEST(test_log_reopen_after_move)
{
	char *dir = tu_tmpdir();
	char *path = tu_path(dir, "consentd.log");
	char *moved = tu_path(dir, "consentd.log.1");
	static unsigned char seen[REOPEN_THREADS][REOPEN_LINES];
	memset(seen, 0, sizeof seen);
	atomic_store(&reopen_written, 0);
	ck_assert_int_eq(log_open(path, LOG_INFO), CS_OK);
	log_started();
	log_msg(LOG_INFO, "before the move");

	/* Writers on several threads while the file is moved and reopened. */
	pthread_t th[REOPEN_THREADS];
	for (int t = 0; t < REOPEN_THREADS; t++)
		ck_assert_int_eq(pthread_create(&th[t], NULL, reopen_writer, (void *)(intptr_t)t), 0);
	while (atomic_load(&reopen_written) < REOPEN_THREADS * REOPEN_LINES / 4)
		sched_yield();
	ck_assert_int_eq(rename(path, moved), 0);
	ck_assert_int_eq(log_reopen(), CS_OK);
	int at_reopen = atomic_load(&reopen_written);
	for (int t = 0; t < REOPEN_THREADS; t++)
		ck_assert_int_eq(pthread_join(th[t], NULL), 0);
	log_msg(LOG_INFO, "after the reopen");
	log_close();

	char *old_text = slurp(moved), *new_text = slurp(path);
	ck_assert_ptr_nonnull(strstr(old_text, "before the move"));
	ck_assert_ptr_null(strstr(old_text, "after the reopen"));
	ck_assert_ptr_nonnull(strstr(new_text, "after the reopen"));
	ck_assert_ptr_null(strstr(new_text, "before the move"));
	int old_n = count_lines(old_text, seen), new_n = count_lines(new_text, seen);
	/* None lost, none twice, none torn; both files got some of the writers' lines. */
	ck_assert_int_eq(old_n + new_n, REOPEN_THREADS * REOPEN_LINES + 2);
	for (int t = 0; t < REOPEN_THREADS; t++)
		for (int i = 0; i < REOPEN_LINES; i++)
			ck_assert_msg(seen[t][i], "line %d/%d lost", t, i);
	ck_assert_int_ge(old_n - 1, REOPEN_THREADS * REOPEN_LINES / 4);
	if (at_reopen < REOPEN_THREADS * REOPEN_LINES)
		ck_assert_int_gt(new_n, 1);
	/* The new file is created as log_open creates one (0666 less the umask). */
	struct stat st;
	mode_t um = umask(0);
	umask(um);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0666 & ~um);
	free(old_text);
	free(new_text);
	free(moved);
	free(path);
	tu_rmdir(dir);
}
END_TEST

/* A path that cannot be opened again: the old stream stays and says why. */
START_TEST(test_log_reopen_failure_keeps_old_stream)
{
	char *dir = tu_tmpdir();
	char *path = tu_path(dir, "consentd.log");
	char *moved = tu_path(dir, "consentd.log.1");
	ck_assert_int_eq(log_open(path, LOG_INFO), CS_OK);
	log_started();
	log_msg(LOG_INFO, "one");
	ck_assert_int_eq(rename(path, moved), 0);
	ck_assert_int_eq(mkdir(path, 0700), 0);    /* a directory cannot be appended to */
	ck_assert_int_eq(log_reopen(), CS_EIO);
	log_msg(LOG_INFO, "two");
	log_close();
	char *text = slurp(moved);
	ck_assert_ptr_nonnull(strstr(text, "one"));
	ck_assert_ptr_nonnull(strstr(text, "cannot reopen the log"));
	ck_assert_ptr_nonnull(strstr(text, "keeping the current file"));
	ck_assert_ptr_nonnull(strstr(text, "\"msg\":\"two\""));
	free(text);
	/* Nothing to reopen on stderr. */
	ck_assert_int_eq(log_open("stderr", LOG_INFO), CS_OK);
	ck_assert_int_eq(log_reopen(), CS_OK);
	log_close();
	free(moved);
	free(path);
	tu_rmdir(dir);
}
END_TEST

static Suite *log_suite(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("log");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_log_json_str_plain_and_quotes);
	tcase_add_test(tc, test_log_numbers_and_ts_without_printf);
	tcase_add_test(tc, test_log_json_str_every_c0_and_del_escaped);
	tcase_add_test(tc, test_log_json_str_c1_bidi_and_separators_escaped);
	tcase_add_test(tc, test_log_json_str_valid_utf8_kept);
	tcase_add_test(tc, test_log_json_str_invalid_utf8_escaped);
	tcase_add_test(tc, test_log_json_str_every_code_point);
	tcase_add_test(tc, test_log_json_str_random_bytes);
	tcase_add_test(tc, test_log_json_str_cap_leaves_nothing_half_written);
	tcase_add_test(tc, test_log_format_line_is_one_json_object);
	tcase_add_test(tc, test_log_levels_parse);
	tcase_add_test(tc, test_log_stream_file_of_json_lines);
	tcase_add_test(tc, test_log_levels_filter);
	tcase_add_test(tc, test_log_text_mode_before_open);
	tcase_add_test(tc, test_log_reopen_after_move);
	tcase_add_test(tc, test_log_reopen_failure_keeps_old_stream);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(log_suite());
}
