/* policy.c -- the organisation's policy lines (policy.h): one line's text
 * parsed into conditions, and the lines judged against a call's parameters.
 * It must never do I/O or read the clock: gate_check runs it before anything
 * else, and the same parameters always get the same verdict. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "policy.h"

void policy_line_clear(struct policy_line *l)
{
	if (l == NULL)
		return;
	for (size_t i = 0; i < l->nconds; i++) {
		free(l->conds[i].path);
		json_decref(l->conds[i].values);
	}
	free(l->conds);
	memset(l, 0, sizeof *l);
}

ARRAY_FREE_FN(struct policy_line, policy_line_clear, policy_lines_free)

/* --- the parser ---------------------------------------------------------- */

struct lex {
	const char *p;
	char *why;
	size_t whylen;
};

/* CS_EINVAL, with the reason in x->why (nothing rather than a cut one). */
__attribute__((format(printf, 2, 3)))
static enum cs_err fail(struct lex *x, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (x->whylen > 0 && str_vfmt(x->why, x->whylen, fmt, ap) != CS_OK)
		x->why[0] = '\0';
	va_end(ap);
	return CS_EINVAL;
}

static void skip_space(struct lex *x)
{
	while (*x->p == ' ' || *x->p == '\t')
		x->p++;
}

static bool name_start(char ch)
{
	return isalpha((unsigned char)ch) || ch == '_';
}

static bool name_char(char ch)
{
	return isalnum((unsigned char)ch) || ch == '_' || ch == '-';
}

static bool bare_char(char ch)
{
	return isalnum((unsigned char)ch) || (ch != '\0' && strchr("_-./:@+", ch) != NULL);
}

/* The word at x->p (letters only) when it is w, followed by a space, a '(' or
 * the end; consumed. */
static bool take_word(struct lex *x, const char *w)
{
	size_t n = strlen(w);
	if (strncmp(x->p, w, n) != 0 || name_char(x->p[n]) || x->p[n] == '.')
		return false;
	x->p += n;
	return true;
}

static enum cs_err parse_path(struct lex *x, char **out)
{
	const char *start = x->p;
	int names = 0;
	for (;;) {
		if (!name_start(*x->p))
			return fail(x, "%.40s: a parameter name starts with a letter or _ (names are "
			    "[A-Za-z_][A-Za-z0-9_-]*, dotted for a nested object)", x->p[0] ? x->p : "(end)");
		while (name_char(*x->p))
			x->p++;
		if (++names > POLICY_MAX_PATH)
			return fail(x, "%.40s: at most 8 names in a dotted parameter path", "path");
		if (*x->p != '.')
			break;
		x->p++;
	}
	if ((*out = strndup(start, (size_t)(x->p - start))) == NULL)
		return CS_ENOMEM;
	return CS_OK;
}

/* One literal at x->p into *out (a new reference). */
static enum cs_err parse_value(struct lex *x, json_t **out)
{
	const char *start = x->p;
	json_error_t je;
	*out = NULL;
	if (*x->p == '"') {
		for (x->p++; *x->p != '"'; x->p++) {
			if (*x->p == '\0')
				return fail(x, "%.40s: a quoted value has no closing \"", start);
			if (*x->p == '\\' && x->p[1] != '\0')
				x->p++;
		}
		x->p++;
	} else if (*x->p == '-' || isdigit((unsigned char)*x->p)) {
		while (*x->p != '\0' && strchr("+-.0123456789eE", *x->p) != NULL)
			x->p++;
	} else if (bare_char(*x->p)) {
		while (bare_char(*x->p))
			x->p++;
		size_t n = (size_t)(x->p - start);
		if ((n == 4 && memcmp(start, "true", 4) == 0) || (n == 5 &&
		    memcmp(start, "false", 5) == 0) || (n == 4 && memcmp(start, "null", 4) == 0))
			*out = json_loadb(start, n, JSON_DECODE_ANY, &je);
		else
			*out = json_stringn(start, n);
		return *out != NULL ? CS_OK : CS_ENOMEM;
	} else {
		return fail(x, "%.40s: expected a value (a word, a \"quoted string\", a number, true, "
		    "false or null)", *start ? start : "(end)");
	}
	*out = json_loadb(start, (size_t)(x->p - start), JSON_DECODE_ANY, &je);
	if (*out == NULL)
		return fail(x, "%.40s: not a JSON string or number (a number is written as in JSON, "
		    "within ±1e308)", start);
	if (json_is_real(*out) && !isfinite(json_real_value(*out))) {
		json_decref(*out);
		*out = NULL;
		return fail(x, "%.40s: not a finite number", start);
	}
	return CS_OK;
}

static const struct {
	const char *word;
	enum policy_op op;
} op_words[] = {
	{ "==", POLICY_EQ }, { "<=", POLICY_LE }, { ">=", POLICY_GE }, { "<", POLICY_LT },
	{ ">", POLICY_GT }, { "prefix", POLICY_PREFIX }, { "in", POLICY_IN },
};

static enum cs_err parse_op(struct lex *x, enum policy_op *op)
{
	for (size_t i = 0; i < sizeof op_words / sizeof op_words[0]; i++) {
		size_t n = strlen(op_words[i].word);
		if (strncmp(x->p, op_words[i].word, n) != 0)
			continue;
		if (name_start(op_words[i].word[0]) && name_char(x->p[n]))
			continue;
		x->p += n;
		*op = op_words[i].op;
		return CS_OK;
	}
	return fail(x, "%.40s: expected an operator: == prefix in < <= > >=", *x->p ? x->p : "(end)");
}

/* The literals of one condition, checked against its operator. */
static enum cs_err parse_values(struct lex *x, struct policy_cond *k)
{
	json_t *v = NULL;
	enum cs_err e;
	if ((k->values = json_array()) == NULL)
		return CS_ENOMEM;
	skip_space(x);
	if (k->op == POLICY_IN) {
		if (*x->p != '(')
			return fail(x, "%.40s: in takes a list in brackets: in (a, b, c)", *x->p ? x->p : "(end)");
		x->p++;
		for (;;) {
			skip_space(x);
			if ((e = parse_value(x, &v)) != CS_OK)
				return e;
			if (json_array_size(k->values) >= POLICY_MAX_VALUES) {
				json_decref(v);
				return fail(x, "%.40s: at most 64 values in one list", k->path);
			}
			if (json_array_append_new(k->values, v) != 0)
				return CS_ENOMEM;
			skip_space(x);
			if (*x->p == ',') {
				x->p++;
				continue;
			}
			if (*x->p == ')') {
				x->p++;
				return CS_OK;
			}
			return fail(x, "%.40s: expected , or ) in the list", *x->p ? x->p : "(end)");
		}
	}
	if ((e = parse_value(x, &v)) != CS_OK)
		return e;
	if (json_array_append_new(k->values, v) != 0)
		return CS_ENOMEM;
	if (k->op == POLICY_PREFIX && !json_is_string(v))
		return fail(x, "%.40s: prefix takes a string", k->path);
	if (k->op >= POLICY_LT && !json_is_number(v))
		return fail(x, "%.40s: a numeric bound takes a number", k->path);
	return CS_OK;
}

enum cs_err policy_line_parse(const char *text, int number, struct policy_line *out,
    char *why, size_t whylen)
{
	struct lex x = { .p = text, .why = why, .whylen = whylen };
	struct policy_line l = { .number = number };
	enum cs_err e = CS_OK;
	if (whylen > 0)
		why[0] = '\0';
	skip_space(&x);
	if (take_word(&x, "approve"))
		l.verdict = POLICY_APPROVE;
	else if (take_word(&x, "deny"))
		l.verdict = POLICY_DENY;
	else {
		e = fail(&x, "%.40s: a line starts with approve or deny", *x.p ? x.p : "(empty)");
		goto out;
	}
	skip_space(&x);
	if (*x.p == '\0')
		goto done;
	if (!take_word(&x, "if")) {
		e = fail(&x, "%.40s: expected if CONDITION after the verdict", x.p);
		goto out;
	}
	do {
		skip_space(&x);
		if (l.nconds == POLICY_MAX_CONDS) {
			e = fail(&x, "%.40s: at most 16 conditions on one line", x.p);
			goto out;
		}
		struct policy_cond *nc = realloc(l.conds, (l.nconds + 1) * sizeof *nc);
		if (nc == NULL) {
			e = CS_ENOMEM;
			goto out;
		}
		l.conds = nc;
		struct policy_cond *k = &l.conds[l.nconds++];
		memset(k, 0, sizeof *k);
		if ((e = parse_path(&x, &k->path)) != CS_OK)
			goto out;
		skip_space(&x);
		if ((e = parse_op(&x, &k->op)) != CS_OK || (e = parse_values(&x, k)) != CS_OK)
			goto out;
		skip_space(&x);
	} while (take_word(&x, "and"));
	if (*x.p != '\0') {
		e = fail(&x, "%.40s: expected and CONDITION or the end of the line", x.p);
		goto out;
	}
done:
	*out = l;
	return CS_OK;
out:
	policy_line_clear(&l);
	return e;
}

/* --- the evaluation ------------------------------------------------------ */

/* The value at the dotted path, or NULL when some name is missing or a step
 * is not an object. */
static json_t *lookup(json_t *params, const char *path)
{
	json_t *v = params;
	char name[256];
	while (v != NULL) {
		size_t n = strcspn(path, ".");
		if (n >= sizeof name || !json_is_object(v))
			return NULL;
		memcpy(name, path, n);
		name[n] = '\0';
		v = json_object_get(v, name);
		if (path[n] == '\0')
			return v;
		path += n + 1;
	}
	return NULL;
}

/* JSON equality, numbers by value (1e3 == 1000: the canonical form of both
 * is 1000). */
static bool same(json_t *a, json_t *b)
{
	if (json_is_number(a) && json_is_number(b))
		return json_number_value(a) == json_number_value(b);
	return json_equal(a, b) != 0;
}

enum judged { NOT_HELD, HELD, CANNOT_JUDGE };

static enum judged judge(const struct policy_cond *k, json_t *params)
{
	json_t *v = lookup(params, k->path);
	json_t *lit = json_array_get(k->values, 0);
	if (v == NULL)
		return NOT_HELD;
	switch (k->op) {
	case POLICY_EQ:
		return same(v, lit) ? HELD : NOT_HELD;
	case POLICY_IN:
		for (size_t i = 0; i < json_array_size(k->values); i++)
			if (same(v, json_array_get(k->values, i)))
				return HELD;
		return NOT_HELD;
	case POLICY_PREFIX: {
		if (!json_is_string(v))
			return CANNOT_JUDGE;
		size_t n = json_string_length(lit);
		return json_string_length(v) >= n &&
		    memcmp(json_string_value(v), json_string_value(lit), n) == 0 ? HELD : NOT_HELD;
	}
	default: {
		if (!json_is_number(v))
			return CANNOT_JUDGE;
		double a = json_number_value(v), b = json_number_value(lit);
		bool held = k->op == POLICY_LT ? a < b : k->op == POLICY_LE ? a <= b :
		    k->op == POLICY_GT ? a > b : a >= b;
		return held ? HELD : NOT_HELD;
	}
	}
}

static bool line_holds(const struct policy_line *l, json_t *params)
{
	for (size_t i = 0; i < l->nconds; i++) {
		enum judged j = judge(&l->conds[i], params);
		/* SECURITY: what cannot be judged counts against the caller. */
		if (j == NOT_HELD || (j == CANNOT_JUDGE && l->verdict != POLICY_DENY))
			return false;
	}
	return true;
}

enum policy_verdict policy_eval(const struct policy_line *lines, size_t n, json_t *params,
    size_t *which)
{
	for (size_t i = 0; lines != NULL && i < n; i++)
		if (line_holds(&lines[i], params)) {
			if (which != NULL)
				*which = i;
			return lines[i].verdict;
		}
	return POLICY_NONE;
}

bool policy_needs_params(const struct policy_line *lines, size_t n)
{
	for (size_t i = 0; lines != NULL && i < n; i++)
		if (lines[i].nconds > 0)
			return true;
	return false;
}
