/* jcs.c -- RFC 8785 JSON Canonicalization Scheme and the I-JSON (RFC 7493)
 * checks behind approval digests (flow F).  Two values that mean the same
 * must give the same bytes, and a value jansson cannot represent faithfully
 * (an integer beyond ±(2^53-1), a non-finite number) must be refused, never
 * silently rounded: the digest binds what the person approved. */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "jcs.h"

#define JCS_MAX_SAFE_INT 9007199254740991LL  /* 2^53 - 1 */

/* --- UTF-8 and UTF-16 -------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (at most n bytes available), or 0
 * when it is invalid: overlong forms, surrogates (U+D800..U+DFFF) and code
 * points past U+10FFFF are refused.  *cp receives the code point. */
static size_t utf8_seq(const unsigned char *p, size_t n, uint32_t *cp)
{
	uint32_t c;
	size_t len;
	if (n == 0)
		return 0;
	if (p[0] < 0x80) {
		*cp = p[0];
		return 1;
	} else if (p[0] >= 0xC2 && p[0] <= 0xDF) {
		c = p[0] & 0x1Fu;
		len = 2;
	} else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
		c = p[0] & 0x0Fu;
		len = 3;
	} else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
		c = p[0] & 0x07u;
		len = 4;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		c = (c << 6) | (p[i] & 0x3Fu);
	}
	if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10FFFF)) ||
	    (c >= 0xD800 && c <= 0xDFFF))
		return 0;
	*cp = c;
	return len;
}

static bool utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	uint32_t cp;
	while (n > 0) {
		size_t l = utf8_seq(p, n, &cp);
		if (l == 0)
			return false;
		p += l;
		n -= l;
	}
	return true;
}

/* Walks a valid UTF-8 string as UTF-16 code units (RFC 8785 §3.2.3 sorts
 * member names by them: a character past U+FFFF becomes a surrogate pair
 * that sorts below U+E000..U+FFFF, unlike in UTF-8 byte order). */
struct u16_iter {
	const unsigned char *p;
	size_t   n;
	uint32_t low;                    /* a pending low surrogate, or 0 */
};

/* The next code unit, or -1 at the end. */
static int32_t u16_next(struct u16_iter *it)
{
	uint32_t cp = 0;
	size_t l;
	if (it->low != 0) {
		uint32_t u = it->low;
		it->low = 0;
		return (int32_t)u;
	}
	if (it->n == 0)
		return -1;
	l = utf8_seq(it->p, it->n, &cp);
	if (l == 0) {                     /* cannot happen: names are checked first */
		l = 1;
		cp = 0xFFFD;
	}
	it->p += l;
	it->n -= l;
	if (cp < 0x10000)
		return (int32_t)cp;
	cp -= 0x10000;
	it->low = 0xDC00 + (cp & 0x3FF);
	return (int32_t)(0xD800 + (cp >> 10));
}

static int u16_cmp(const char *a, const char *b)
{
	struct u16_iter x = { (const unsigned char *)a, strlen(a), 0 };
	struct u16_iter y = { (const unsigned char *)b, strlen(b), 0 };
	for (;;) {
		int32_t ua = u16_next(&x), ub = u16_next(&y);
		if (ua != ub)
			return ua < ub ? -1 : 1;   /* the end (-1) sorts first: a prefix is smaller */
		if (ua < 0)
			return 0;
	}
}

static int u16_qsort_cmp(const void *a, const void *b)
{
	return u16_cmp(*(const char *const *)a, *(const char *const *)b);
}

/* --- I-JSON ------------------------------------------------------------ */

static enum cs_err ijson_walk(const json_t *v, size_t depth, const char **why)
{
	enum cs_err e;
	if (depth > JCS_MAX_DEPTH) {
		*why = "nested too deeply";
		return CS_EINVAL;
	}
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		const char *k;
		json_t *m;
		json_object_foreach((json_t *)v, k, m) {
			if (!utf8_valid(k, strlen(k))) {
				*why = "a member name is not valid UTF-8";
				return CS_EINVAL;
			}
			if ((e = ijson_walk(m, depth + 1, why)) != CS_OK)
				return e;
		}
		return CS_OK;
	}
	case JSON_ARRAY:
		for (size_t i = 0; i < json_array_size(v); i++)
			if ((e = ijson_walk(json_array_get(v, i), depth + 1, why)) != CS_OK)
				return e;
		return CS_OK;
	case JSON_STRING:
		if (!utf8_valid(json_string_value(v), json_string_length(v))) {
			*why = "a string is not valid UTF-8";
			return CS_EINVAL;
		}
		return CS_OK;
	case JSON_INTEGER: {
		json_int_t i = json_integer_value(v);
		/* SECURITY: past 2^53 integers stop being exact in most JSON
		 * implementations: two different values could show and digest alike. */
		if (i > JCS_MAX_SAFE_INT || i < -JCS_MAX_SAFE_INT) {
			*why = "an integer is beyond +-(2^53-1) (I-JSON)";
			return CS_EINVAL;
		}
		return CS_OK;
	}
	case JSON_REAL:
		if (!isfinite(json_real_value(v))) {
			*why = "a number is not finite";
			return CS_EINVAL;
		}
		return CS_OK;
	case JSON_TRUE:
	case JSON_FALSE:
	case JSON_NULL:
		return CS_OK;
	}
	*why = "unknown JSON type";
	return CS_EINVAL;
}

enum cs_err jcs_ijson_check(const json_t *v, char *why, size_t whylen)
{
	const char *w = "not I-JSON";
	enum cs_err e;
	if (v == NULL)
		return CS_EINVAL;
	e = ijson_walk(v, 0, &w);
	/* The reasons are short constants: one longer than the caller's why
	 * leaves it "" (str_fmt's rule), never a cut reason; e is what counts. */
	if (e != CS_OK && why != NULL && whylen > 0 && str_fmt(why, whylen, "%s", w) != CS_OK)
		why[0] = '\0';
	return e;
}

/* --- numbers (ECMAScript Number::toString) ----------------------------- */

/* Parses "%.*e" output (d[.ddd]e±XX) into its digits and exponent. */
static bool sci_parse(const char *s, char *digits, size_t dlen, int *k, int *exp10)
{
	size_t o = 0;
	const char *p = s;
	for (; *p != '\0' && *p != 'e'; p++) {
		if (*p == '.')
			continue;
		if (*p < '0' || *p > '9' || o + 1 >= dlen)
			return false;
		digits[o++] = *p;
	}
	if (*p != 'e' || o == 0)
		return false;
	digits[o] = '\0';
	char *end = NULL;
	long ex = strtol(p + 1, &end, 10);
	if (end == p + 1 || *end != '\0' || ex < -400 || ex > 400)
		return false;
	*k = (int)o;
	*exp10 = (int)ex;
	return true;
}

/* The value of digits (k of them) as d.ddd × 10^exp10. */
static double sci_value(const char *digits, int k, int exp10)
{
	char s[48];
	/* At most 23 digits and an exponent: it fits.  NaN, were it not, equals
	 * no x, so the caller only loses a candidate. */
	if (str_fmt(s, sizeof s, "%c.%se%d", digits[0], k > 1 ? digits + 1 : "0", exp10) != CS_OK)
		return NAN;
	return strtod(s, NULL);
}

/* digits ± one unit in the last place, in place; false when the result
 * would lose its leading digit (such a value has fewer digits and was
 * tried before). */
static bool sci_step(char *digits, int *k, int *exp10, bool up)
{
	int i = *k - 1;
	if (up) {
		for (; i >= 0 && digits[i] == '9'; i--)
			digits[i] = '0';
		if (i < 0) {                  /* 99..9 + 1 = 100..0: one digit, one decade up */
			digits[0] = '1';
			digits[1] = '\0';
			*k = 1;
			(*exp10)++;
			return true;
		}
		digits[i]++;
		return true;
	}
	for (; i >= 0 && digits[i] == '0'; i--)
		digits[i] = '9';
	if (i < 0)
		return false;
	digits[i]--;
	return digits[0] != '0';
}

/* Shortest digits d1..dk and exponent n with x = 0.d1..dk × 10^n that read
 * back as exactly x (ES's k minimal; among candidates the closer one).
 * x is finite and positive. */
static void shortest(double x, char digits[24], int *k, int *n)
{
	char s[48], d[24];
	int kk = 0, ex = 0;
	for (int p = 1; p <= 17; p++) {
		/* At most 17 digits and an exponent: it fits (else the "" it
		 * leaves does not parse and the candidate is skipped). */
		if (str_fmt(s, sizeof s, "%.*e", p - 1, x) != CS_OK || !sci_parse(s, d, sizeof d,
		    &kk, &ex))
			continue;
		double y = strtod(s, NULL);
		if (y == x)
			goto found;
		/* The nearest p-digit decimal can fall just outside x's rounding
		 * interval (which is lopsided at powers of two) while its other
		 * neighbour falls inside: try that one too. */
		if (sci_step(d, &kk, &ex, y < x) && sci_value(d, kk, ex) == x)
			goto found;
	}
	/* 17 significant digits always round-trip; this is a safe fallback. */
	if (str_fmt(s, sizeof s, "%.16e", x) != CS_OK || !sci_parse(s, d, sizeof d, &kk, &ex)) {
		d[0] = '0';
		d[1] = '\0';
		kk = 1;
		ex = 0;
	}
found:
	while (kk > 1 && d[kk - 1] == '0')
		d[--kk] = '\0';
	memcpy(digits, d, (size_t)kk + 1);
	*k = kk;
	*n = ex + 1;
}

static enum cs_err put_zeros(struct buf *out, int count)
{
	enum cs_err e = CS_OK;
	for (int i = 0; i < count && e == CS_OK; i++)
		e = buf_append(out, "0", 1);
	return e;
}

enum cs_err jcs_number(double x, struct buf *out)
{
	char digits[24];
	int k = 0, n = 0;
	enum cs_err e;
	if (!isfinite(x))
		return CS_EINVAL;
	if (x == 0)
		return buf_puts(out, "0");   /* -0 too */
	if (x < 0) {
		if ((e = buf_puts(out, "-")) != CS_OK)
			return e;
		x = -x;
	}
	shortest(x, digits, &k, &n);
	if (k <= n && n <= 21) {
		if ((e = buf_append(out, digits, (size_t)k)) != CS_OK)
			return e;
		return put_zeros(out, n - k);
	}
	if (0 < n && n <= 21) {
		if ((e = buf_append(out, digits, (size_t)n)) != CS_OK ||
		    (e = buf_puts(out, ".")) != CS_OK)
			return e;
		return buf_append(out, digits + n, (size_t)(k - n));
	}
	if (-6 < n && n <= 0) {
		if ((e = buf_puts(out, "0.")) != CS_OK || (e = put_zeros(out, -n)) != CS_OK)
			return e;
		return buf_append(out, digits, (size_t)k);
	}
	if ((e = buf_append(out, digits, 1)) != CS_OK)
		return e;
	if (k > 1 && ((e = buf_puts(out, ".")) != CS_OK ||
	    (e = buf_append(out, digits + 1, (size_t)(k - 1))) != CS_OK))
		return e;
	return buf_printf(out, "e%c%d", n - 1 >= 0 ? '+' : '-', abs(n - 1));
}

/* --- strings ----------------------------------------------------------- */

/* A JSON string exactly as ECMAScript's JSON.stringify writes it: only ",
 * \ and control characters are escaped (the short forms where they exist,
 * else \u00xx in lower case); everything else is literal UTF-8. */
static enum cs_err put_string(struct buf *out, const char *s, size_t n)
{
	enum cs_err e;
	size_t run = 0;
	if (!utf8_valid(s, n))
		return CS_EINVAL;
	if ((e = buf_append(out, "\"", 1)) != CS_OK)
		return e;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		const char *esc = NULL;
		char u[8];
		if (ch >= 0x20 && ch != '"' && ch != '\\')
			continue;
		switch (ch) {
		case '"': esc = "\\\""; break;
		case '\\': esc = "\\\\"; break;
		case '\b': esc = "\\b"; break;
		case '\f': esc = "\\f"; break;
		case '\n': esc = "\\n"; break;
		case '\r': esc = "\\r"; break;
		case '\t': esc = "\\t"; break;
		default:
			if ((e = str_fmt(u, sizeof u, "\\u%04x", (unsigned)ch)) != CS_OK)
				return e;
			esc = u;
			break;
		}
		if ((e = buf_append(out, s + run, i - run)) != CS_OK || (e = buf_puts(out, esc)) != CS_OK)
			return e;
		run = i + 1;
	}
	if ((e = buf_append(out, s + run, n - run)) != CS_OK)
		return e;
	return buf_append(out, "\"", 1);
}

/* --- values ------------------------------------------------------------ */

static enum cs_err jcs_value(json_t *v, struct buf *out, size_t depth, bool pretty);

/* Pretty form only: a newline and two spaces per level. */
static enum cs_err put_indent(struct buf *out, size_t depth)
{
	enum cs_err e = buf_append(out, "\n", 1);
	for (size_t i = 0; i < depth && e == CS_OK; i++)
		e = buf_append(out, "  ", 2);
	return e;
}

static enum cs_err jcs_object(json_t *v, struct buf *out, size_t depth, bool pretty)
{
	enum cs_err e = CS_OK;
	size_t n = json_object_size(v), i = 0;
	const char **keys = NULL, *k;
	json_t *m;

	if (n == 0)
		return buf_puts(out, "{}");
	if ((keys = calloc(n, sizeof *keys)) == NULL)
		return CS_ENOMEM;
	json_object_foreach(v, k, m) {
		(void)m;
		if (i >= n || !utf8_valid(k, strlen(k))) {
			e = CS_EINVAL;
			goto out;
		}
		keys[i++] = k;
	}
	if (i != n) {
		e = CS_EINVAL;
		goto out;
	}
	qsort(keys, n, sizeof *keys, u16_qsort_cmp);
	if ((e = buf_append(out, "{", 1)) != CS_OK)
		goto out;
	for (i = 0; i < n; i++) {
		if ((i > 0 && (e = buf_append(out, ",", 1)) != CS_OK) ||
		    (pretty && (e = put_indent(out, depth + 1)) != CS_OK) ||
		    (e = put_string(out, keys[i], strlen(keys[i]))) != CS_OK ||
		    (e = buf_puts(out, pretty ? ": " : ":")) != CS_OK ||
		    (e = jcs_value(json_object_get(v, keys[i]), out, depth + 1, pretty)) != CS_OK)
			goto out;
	}
	if (pretty && (e = put_indent(out, depth)) != CS_OK)
		goto out;
	e = buf_append(out, "}", 1);
out:
	free(keys);
	return e;
}

static enum cs_err jcs_value(json_t *v, struct buf *out, size_t depth, bool pretty)
{
	enum cs_err e;
	if (v == NULL)
		return CS_EINVAL;
	if (depth > JCS_MAX_DEPTH)
		return CS_ETOOBIG;
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return jcs_object(v, out, depth, pretty);
	case JSON_ARRAY:
		if ((e = buf_append(out, "[", 1)) != CS_OK)
			return e;
		for (size_t i = 0; i < json_array_size(v); i++)
			if ((i > 0 && (e = buf_append(out, ",", 1)) != CS_OK) ||
			    (pretty && (e = put_indent(out, depth + 1)) != CS_OK) ||
			    (e = jcs_value(json_array_get(v, i), out, depth + 1, pretty)) != CS_OK)
				return e;
		if (pretty && json_array_size(v) > 0 && (e = put_indent(out, depth)) != CS_OK)
			return e;
		return buf_append(out, "]", 1);
	case JSON_STRING:
		return put_string(out, json_string_value(v), json_string_length(v));
	case JSON_INTEGER: {
		json_int_t i = json_integer_value(v);
		if (i > JCS_MAX_SAFE_INT || i < -JCS_MAX_SAFE_INT)
			return CS_EINVAL;     /* not I-JSON: refused, never rounded */
		return buf_printf(out, "%" PRId64, (int64_t)i);
	}
	case JSON_REAL:
		return jcs_number(json_real_value(v), out);
	case JSON_TRUE:
		return buf_puts(out, "true");
	case JSON_FALSE:
		return buf_puts(out, "false");
	case JSON_NULL:
		return buf_puts(out, "null");
	}
	return CS_EINVAL;
}

/* jcs_value appended to out, or nothing: after a failure the buffer ends
 * where it began (nothing half-written). */
static enum cs_err jcs_append(json_t *v, struct buf *out, bool pretty)
{
	size_t len0 = out->len;
	enum cs_err e = jcs_value(v, out, 0, pretty);
	if (e != CS_OK && out->data != NULL) {
		out->len = len0;
		out->data[len0] = '\0';
	}
	return e;
}

enum cs_err jcs_canonicalize(json_t *v, struct buf *out)
{
	if (v == NULL || out == NULL)
		return CS_EINVAL;
	return jcs_append(v, out, false);
}

enum cs_err jcs_pretty(const char *canonical, struct buf *out)
{
	json_t *v;
	enum cs_err e;
	if (canonical == NULL || out == NULL)
		return CS_EINVAL;
	/* Every number read as a double: a canonical integer such as
	 * 100000000000000000000 (written for the real 1e20) is past int64. */
	v = json_loads(canonical, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL,
	    NULL);
	if (v == NULL)
		return CS_EINVAL;
	e = jcs_append(v, out, true);
	json_decref(v);
	return e;
}
