/* fuzz_params_view.c -- libFuzzer target for params_view(), the readable list of
 * an approval's parameters.  The first byte picks the proxy's form; the rest is
 * the text.  Oracles: jansson with the same flags says what is JSON (CS_OK
 * exactly then, CS_EINVAL otherwise); every shown string is valid UTF-8 holding
 * no Default_Ignorable_Code_Point and no control but LF (none at all in a
 * label), per Unicode's own DerivedCoreProperties.txt; the bounds hold; and for
 * plain values the rows are the leaves in order, each showing its own value,
 * under labels no two of which are the same. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "buf.h"
#include "form.h"
#include "visible_text.h"
#include "params_view.h"
#include "../unit/ucd.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static struct ucd_set ignorable;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (ucd_load(UCD_DERIVED_CORE, "Default_Ignorable_Code_Point", &ignorable) < 4000) {
		fprintf(stderr, "fuzz_params_view: cannot read %s (apt-get install unicode-data)\n",
		    UCD_DERIVED_CORE);
		abort();
	}
	return 0;
}

static bool must_mark(uint32_t cp, bool lf_ok)
{
	return ucd_has(&ignorable, cp) || (cp < 0x20 && !(lf_ok && cp == '\n')) ||
	    (cp >= 0x7f && cp <= 0x9f);
}

/* s (a json string or null) is valid UTF-8 with nothing hidden. */
static void check_shown(json_t *s, bool lf_ok)
{
	if (json_is_null(s))
		return;
	CHECK(json_is_string(s));
	const char *p = json_string_value(s);
	size_t n = json_string_length(s);
	CHECK(strlen(p) == n);                      /* no NUL: it is shown as a marker */
	CHECK(utf8_valid(p, n));
	while (*p) {
		const unsigned char *u = (const unsigned char *)p;
		size_t len = u[0] < 0x80 ? 1 : u[0] < 0xe0 ? 2 : u[0] < 0xf0 ? 3 : 4;
		uint32_t cp = len == 1 ? u[0] : u[0] & (0x7fu >> len);
		for (size_t k = 1; k < len; k++)
			cp = cp << 6 | (u[k] & 0x3fu);
		CHECK(!must_mark(cp, lf_ok));
		p += len;
	}
}

/* The leaves of v in order, as params_view lists them: a scalar, or an empty
 * object or array below the top. */
static void leaves(json_t *v, bool top, json_t **out, size_t *n, size_t cap)
{
	const char *k;
	size_t i;
	json_t *m;
	if ((json_is_object(v) && json_object_size(v) > 0) || (json_is_array(v) && json_array_size(v) > 0)) {
		if (json_is_object(v)) {
			json_object_foreach(v, k, m)
				leaves(m, false, out, n, cap);
		} else {
			json_array_foreach(v, i, m)
				leaves(m, false, out, n, cap);
		}
		return;
	}
	if (top && (json_is_null(v) || json_is_object(v) || json_is_array(v)))
		return;
	if (*n < cap)
		out[*n] = v;
	(*n)++;
}

/* What a string leaf must show: its NUL-free runs through visible_text, each NUL as a marker. */
static char *expected_text(const char *s, size_t n)
{
	struct buf b;
	buf_init(&b, 16 * n + 16);
	for (size_t i = 0;;) {
		const char *nul = memchr(s + i, '\0', n - i);
		size_t run = nul ? (size_t)(nul - (s + i)) : n - i;
		char *copy = strndup(s + i, run), *vis = copy ? visible_text(copy) : NULL;
		CHECK(vis != NULL && buf_puts(&b, vis) == CS_OK);
		free(vis);
		free(copy);
		if (nul == NULL)
			break;
		CHECK(buf_puts(&b, "[U+0000]") == CS_OK);
		i += run + 1;
	}
	return b.data ? buf_steal(&b) : strdup("");
}

static size_t code_points(const char *s, size_t n)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)s[i] & 0xc0) != 0x80;
	return c;
}

/* One listed row against the leaf it must show. */
static void check_row(json_t *row, json_t *leaf)
{
	const char *val = json_string_value(json_object_get(row, "value"));
	bool words = json_is_true(json_object_get(row, "words")), lit = json_is_true(json_object_get(row, "literal"));
	bool text = json_is_true(json_object_get(row, "text")), folded = json_is_true(json_object_get(row, "folded"));
	if (json_is_string(leaf) && json_string_length(leaf) > 0) {
		size_t n = json_string_length(leaf), cps = code_points(json_string_value(leaf), n);
		const char *rest = json_string_value(json_object_get(row, "rest"));
		char *want = expected_text(json_string_value(leaf), n), *got;
		CHECK(text && !words && !lit);
		CHECK(asprintf(&got, "%s%s", val, folded ? rest : "") >= 0);
		CHECK(strcmp(got, want) == 0);              /* head and rest: the whole text */
		json_int_t rc = json_integer_value(json_object_get(row, "rest_chars"));
		if (folded)
			CHECK(rest != NULL && rc >= 1 && (size_t)rc < cps);
		else
			CHECK(rest == NULL && rc == 0 && cps <= PARAMS_VIEW_FOLD_CHARS);
		free(got);
		free(want);
		return;
	}
	CHECK(!folded && !text);
	if (json_is_string(leaf))
		CHECK(words && strcmp(val, "(empty text)") == 0);
	else if (json_is_object(leaf))
		CHECK(words && strcmp(val, "(no fields)") == 0);
	else if (json_is_array(leaf))
		CHECK(words && strcmp(val, "(empty list)") == 0);
	else if (json_is_number(leaf))
		CHECK(lit && strtod(val, NULL) == json_number_value(leaf));
	else
		CHECK(lit && strcmp(val, json_is_true(leaf) ? "true" : json_is_false(leaf) ? "false" : "null") == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	bool proxied = data[0] & 1;
	char *s = malloc(size);
	json_t *view = NULL, *v, *groups, *g, *row, *lv[PARAMS_VIEW_MAX_ROWS];
	size_t nrows = 0, label_bytes = 0, first_label = 0, nleaves = 0, i, j;
	if (s == NULL)
		return 0;
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';

	enum cs_err e = params_view(s, proxied, &view);
	if (strlen(s) > PARAMS_VIEW_MAX_INPUT) {
		CHECK(e == CS_ETOOBIG && view == NULL);
		free(s);
		return 0;
	}
	v = json_loads(s, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL |
	    JSON_ALLOW_NUL, NULL);
	if (v == NULL) {
		CHECK(e == CS_EINVAL && view == NULL);
		free(s);
		return 0;
	}
	CHECK(e == CS_OK && view != NULL);
	groups = json_object_get(view, "groups");
	CHECK(json_array_size(groups) >= 1);
	json_array_foreach(groups, i, g) {
		CHECK(json_is_boolean(json_object_get(g, "has_rows")));
		CHECK(json_is_true(json_object_get(g, "has_rows")) == (json_array_size(json_object_get(g, "rows")) > 0));
		json_array_foreach(json_object_get(g, "rows"), j, row) {
			const char *label = json_string_value(json_object_get(row, "label"));
			check_shown(json_object_get(row, "label"), false);
			check_shown(json_object_get(row, "value"), true);
			check_shown(json_object_get(row, "rest"), true);
			CHECK(json_is_true(json_object_get(row, "text")) + json_is_true(json_object_get(row, "literal")) +
			    json_is_true(json_object_get(row, "words")) == 1);
			if (nrows == 0)
				first_label = strlen(label);
			label_bytes += strlen(label);
			nrows++;
		}
	}
	CHECK(nrows <= PARAMS_VIEW_MAX_ROWS);
	CHECK(label_bytes <= PARAMS_VIEW_LABEL_BUDGET || label_bytes == first_label);
	json_int_t more = json_integer_value(json_object_get(view, "more"));
	CHECK(more >= 0 && json_is_true(json_object_get(view, "has_more")) == (more > 0));

	if (!json_is_true(json_object_get(view, "request"))) {
		/* Plain values: one group, its rows the leaves in order, every label its own. */
		CHECK(json_array_size(groups) == 1);
		g = json_array_get(groups, 0);
		leaves(v, true, lv, &nleaves, PARAMS_VIEW_MAX_ROWS);
		CHECK(nrows + (size_t)more == nleaves);
		json_array_foreach(json_object_get(g, "rows"), j, row) {
			check_row(row, lv[j]);
			for (size_t k = 0; k < j; k++)
				CHECK(strcmp(json_string_value(json_object_get(json_array_get(json_object_get(g, "rows"), k),
				    "label")), json_string_value(json_object_get(row, "label"))) != 0);
		}
		if (nleaves == 0)
			CHECK(strcmp(json_string_value(json_object_get(g, "none")), "No values.") == 0);
	} else {
		CHECK(proxied);
	}
	json_decref(v);
	json_decref(view);
	free(s);
	return 0;
}
