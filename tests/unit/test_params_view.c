/* test_params_view.c -- an approval's parameters as readable rows: paths for
 * nested objects and arrays, text as text, long values folded, invisible
 * characters made visible, the proxy's request in its three parts, bounds on
 * huge input, and non-JSON refused.  Also the approval page's template, which
 * must show the rows and no JSON text of a value. */
#include <jansson.h>

#include "testutil.h"
#include "buf.h"
#include "form.h"
#include "params_view.h"
#include "template.h"

/* The view of canonical, which must be CS_OK. */
static json_t *view_ok(const char *canonical, bool proxied)
{
	json_t *v = NULL;
	ck_assert_int_eq(params_view(canonical, proxied, &v), CS_OK);
	ck_assert_ptr_nonnull(v);
	return v;
}

/* The rows of group g as one string, "label=value" per line, a folded value as
 * "label=value|rest(N)", words as "label=(..)" and literals as "label=`..`". */
static char *rows_text(json_t *view, size_t g)
{
	struct buf b;
	json_t *grp = json_array_get(json_object_get(view, "groups"), g), *row;
	size_t i;
	ck_assert_ptr_nonnull(grp);
	buf_init(&b, 1u << 22);
	json_array_foreach(json_object_get(grp, "rows"), i, row) {
		const char *val = json_string_value(json_object_get(row, "value"));
		bool lit = json_is_true(json_object_get(row, "literal"));
		bool words = json_is_true(json_object_get(row, "words"));
		bool text = json_is_true(json_object_get(row, "text"));
		ck_assert_int_eq(lit + words + text, 1);             /* exactly one kind */
		ck_assert(buf_printf(&b, "%s=%s%s%s", json_string_value(json_object_get(row, "label")),
		    lit ? "`" : "", val, lit ? "`" : "") == CS_OK);
		if (json_is_true(json_object_get(row, "folded")))
			ck_assert(buf_printf(&b, "|%s(%lld)", json_string_value(json_object_get(row, "rest")),
			    (long long)json_integer_value(json_object_get(row, "rest_chars"))) == CS_OK);
		else
			ck_assert(json_is_null(json_object_get(row, "rest")));
		ck_assert(buf_puts(&b, "\n") == CS_OK);
	}
	return b.data ? buf_steal(&b) : strdup("");
}

static const char *group_str(json_t *view, size_t g, const char *key)
{
	return json_string_value(json_object_get(json_array_get(json_object_get(view, "groups"), g), key));
}

static size_t ngroups(json_t *view)
{
	return json_array_size(json_object_get(view, "groups"));
}

#define ROWS_EQ(canonical, proxied, want) do {                                 \
	json_t *v_ = view_ok(canonical, proxied);                                  \
	char *t_ = rows_text(v_, 0);                                               \
	ck_assert_str_eq(t_, want);                                                \
	free(t_);                                                                  \
	json_decref(v_);                                                           \
} while (0)

START_TEST(test_params_view_nesting_dotted_paths)
{
	ROWS_EQ("{\"body\":{\"meta\":{\"a\":1,\"b\":\"two\"},\"title\":\"Crash\"},\"repo\":\"acme/widgets\"}",
	    false,
	    "body.meta.a=`1`\nbody.meta.b=two\nbody.title=Crash\nrepo=acme/widgets\n");
}
END_TEST

START_TEST(test_params_view_arrays_indexed)
{
	ROWS_EQ("{\"labels\":[\"bug\",\"p1\"],\"m\":[[1,2],{\"k\":true}],\"n\":{\"a\":[true,\"x\"],\"z\":1}}",
	    false,
	    "labels[0]=bug\nlabels[1]=p1\nm[0][0]=`1`\nm[0][1]=`2`\nm[1].k=`true`\n"
	    "n.a[0]=`true`\nn.a[1]=x\nn.z=`1`\n");
	/* An array as the whole value: its indexes alone. */
	ROWS_EQ("[\"a\",{\"b\":null}]", false, "[0]=a\n[1].b=`null`\n");
}
END_TEST

START_TEST(test_params_view_scalars_literal_and_words)
{
	/* Numbers keep their RFC 8785 digits (no 0.10000000000000001, no 1e21 as 1e+21
	 * rewritten otherwise); empty values are said in words, not as "", {} or []. */
	ROWS_EQ("{\"big\":1e+21,\"d\":false,\"e\":\"\",\"f\":{},\"g\":[],\"n\":-5,\"nul\":null,"
	    "\"r\":0.1,\"t\":true,\"third\":0.3333333333333333}", false,
	    "big=`1e+21`\nd=`false`\ne=(empty text)\nf=(no fields)\ng=(empty list)\nn=`-5`\n"
	    "nul=`null`\nr=`0.1`\nt=`true`\nthird=`0.3333333333333333`\n");
	/* A lone value is labelled "value". */
	ROWS_EQ("\"just text\"", false, "value=just text\n");
	ROWS_EQ("42", false, "value=`42`\n");
}
END_TEST

START_TEST(test_params_view_text_lines_not_escapes)
{
	/* A line feed is a line break in the value, never the two characters \n; quotes and
	 * backslashes are themselves, not JSON escapes. */
	json_t *v = view_ok("{\"body\":\"line one\\nline two\",\"q\":\"say \\\"hi\\\" \\\\ bye\"}", false);
	char *t = rows_text(v, 0);
	ck_assert_str_eq(t, "body=line one\nline two\nq=say \"hi\" \\ bye\n");
	ck_assert_ptr_null(strstr(t, "\\n"));
	free(t);
	json_decref(v);
}
END_TEST

START_TEST(test_params_view_empty_whole_value_says_no_values)
{
	const char *empties[] = { "{}", "[]", "null" };
	for (size_t i = 0; i < sizeof empties / sizeof empties[0]; i++) {
		json_t *v = view_ok(empties[i], false);
		ck_assert_uint_eq(ngroups(v), 1);
		ck_assert_str_eq(group_str(v, 0, "none"), "No values.");
		ck_assert(json_is_false(json_object_get(json_array_get(json_object_get(v, "groups"), 0),
		    "has_rows")));
		ck_assert(json_is_false(json_object_get(v, "has_more")));
		json_decref(v);
	}
}
END_TEST

START_TEST(test_params_view_names_quoted_when_not_plain)
{
	/* Canonical order (UTF-16 code units): "" < "a.b" < "nl\nk" < "q\"k" < "two words" < "x". */
	ROWS_EQ("{\"\":1,\"a.b\":2,\"nl\\nk\":3,\"q\\\"k\":4,\"two words\":{\"x[0]\":5},\"x\":{\"\\\\\":6}}",
	    false,
	    "[\"\"]=`1`\n[\"a.b\"]=`2`\n[\"nl[U+000A]k\"]=`3`\n[\"q\\\"k\"]=`4`\n"
	    "[\"two words\"][\"x\\[0]\"]=`5`\nx[\"\\\\\"]=`6`\n");
	/* Typed text never passes for a marker: a zero-width space and the text "[U+200B]"
	 * as names get two labels. */
	ROWS_EQ("{\"[U+200B]\":1,\"\\u200b\":2}", false, "[\"\\[U+200B]\"]=`1`\n[\"[U+200B]\"]=`2`\n");
	/* A name with a dot can never pass for a path: {"a.b":1} and {"a":{"b":1}} differ. */
	ROWS_EQ("{\"a\":{\"b\":1}}", false, "a.b=`1`\n");
	/* Non-ASCII names are quoted too (a look-alike dot cannot fake a path). */
	ROWS_EQ("{\"body\xe2\x80\xa4title\":1}", false, "[\"body\xe2\x80\xa4title\"]=`1`\n");
}
END_TEST

START_TEST(test_params_view_invisible_characters_visible)
{
	/* A right-to-left override, zero-width space, isolates, BOM, BEL, CR, TAB and
	 * a NUL in a value; the same in a name.  None passes raw. */
	json_t *v = view_ok("{\"a\\u200bb\":\"Approve \\u202egnp.exe\\u202c now\","
	    "\"c\":\"x\\u2066y\\u2069z\\ufeff\\u0007\\r\\n\\t|\\u0000|\"}", false);
	char *t = rows_text(v, 0);
	ck_assert_str_eq(t, "[\"a[U+200B]b\"]=Approve [U+202E]gnp.exe[U+202C] now\n"
	    "c=x[U+2066]y[U+2069]z[U+FEFF][U+0007][U+000D]\n[U+0009]|[U+0000]|\n");
	const char *raw[] = { "\xe2\x80\x8b", "\xe2\x80\xae", "\xe2\x80\xac", "\xe2\x81\xa6",
	    "\xe2\x81\xa9", "\xef\xbb\xbf", "\a", "\r", "\t" };
	for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++)
		ck_assert_ptr_null(strstr(t, raw[i]));
	free(t);
	json_decref(v);
}
END_TEST

START_TEST(test_params_view_long_text_folded)
{
	struct buf in;
	char *t;
	json_t *v, *row;
	/* 1000 code points of two bytes each: 280 shown, 720 behind the fold. */
	buf_init(&in, 1u << 20);
	ck_assert(buf_puts(&in, "{\"t\":\"") == CS_OK);
	for (int i = 0; i < 1000; i++)
		ck_assert(buf_puts(&in, "\xc3\xa9") == CS_OK);          /* é */
	ck_assert(buf_puts(&in, "\"}") == CS_OK);
	v = view_ok(in.data, false);
	row = json_array_get(json_object_get(json_array_get(json_object_get(v, "groups"), 0), "rows"), 0);
	ck_assert(json_is_true(json_object_get(row, "folded")));
	ck_assert_uint_eq(strlen(json_string_value(json_object_get(row, "value"))), 2 * PARAMS_VIEW_FOLD_CHARS);
	ck_assert_uint_eq(strlen(json_string_value(json_object_get(row, "rest"))), 2 * (1000 - PARAMS_VIEW_FOLD_CHARS));
	ck_assert_int_eq(json_integer_value(json_object_get(row, "rest_chars")), 1000 - PARAMS_VIEW_FOLD_CHARS);
	ck_assert(utf8_valid(json_string_value(json_object_get(row, "value")), 2 * PARAMS_VIEW_FOLD_CHARS));
	json_decref(v);

	/* Exactly PARAMS_VIEW_FOLD_CHARS: not folded. */
	buf_reset(&in);
	ck_assert(buf_puts(&in, "{\"t\":\"") == CS_OK);
	for (int i = 0; i < PARAMS_VIEW_FOLD_CHARS; i++)
		ck_assert(buf_puts(&in, "a") == CS_OK);
	ck_assert(buf_puts(&in, "\"}") == CS_OK);
	v = view_ok(in.data, false);
	t = rows_text(v, 0);
	ck_assert_ptr_null(strchr(t, '|'));
	free(t);
	json_decref(v);

	/* Twelve short lines: eight shown, the rest folded, with its line breaks. */
	ROWS_EQ("{\"t\":\"1\\n2\\n3\\n4\\n5\\n6\\n7\\n8\\n9\\n10\\n11\\n12\"}", false,
	    "t=1\n2\n3\n4\n5\n6\n7\n8\n|9\n10\n11\n12(10)\n");
	/* The fold never cuts a marker: a hidden character past the fold is marked in the rest. */
	buf_reset(&in);
	ck_assert(buf_puts(&in, "{\"t\":\"") == CS_OK);
	for (int i = 0; i < PARAMS_VIEW_FOLD_CHARS - 1; i++)
		ck_assert(buf_puts(&in, "a") == CS_OK);
	ck_assert(buf_puts(&in, "\\u202e\\u202e\"}") == CS_OK);
	v = view_ok(in.data, false);
	row = json_array_get(json_object_get(json_array_get(json_object_get(v, "groups"), 0), "rows"), 0);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(row, "value")), "a[U+202E]"));
	ck_assert_str_eq(json_string_value(json_object_get(row, "rest")), "[U+202E]");
	ck_assert_int_eq(json_integer_value(json_object_get(row, "rest_chars")), 1);
	json_decref(v);
	buf_clear(&in);
}
END_TEST

START_TEST(test_params_view_many_rows_bounded)
{
	struct buf in;
	json_t *v, *g;
	/* 5000 elements: PARAMS_VIEW_MAX_ROWS listed, the rest counted. */
	buf_init(&in, 1u << 20);
	ck_assert(buf_puts(&in, "[") == CS_OK);
	for (int i = 0; i < 5000; i++)
		ck_assert(buf_printf(&in, "%s%d", i ? "," : "", i % 10) == CS_OK);
	ck_assert(buf_puts(&in, "]") == CS_OK);
	v = view_ok(in.data, false);
	g = json_array_get(json_object_get(v, "groups"), 0);
	ck_assert_uint_eq(json_array_size(json_object_get(g, "rows")), PARAMS_VIEW_MAX_ROWS);
	ck_assert(json_is_true(json_object_get(v, "has_more")));
	ck_assert_int_eq(json_integer_value(json_object_get(v, "more")), 5000 - PARAMS_VIEW_MAX_ROWS);
	json_decref(v);
	buf_clear(&in);
}
END_TEST

START_TEST(test_params_view_deep_paths_bounded)
{
	struct buf in;
	json_t *v, *g, *row;
	size_t i, labels = 0;
	/* 200 levels of a 100-byte name, then 2000 leaves: every label repeats a 20 KB prefix,
	 * so the label budget stops the list long before the row bound. */
	buf_init(&in, 1u << 20);
	char name[101];
	memset(name, 'k', 100);
	name[100] = '\0';
	for (int d = 0; d < 200; d++)
		ck_assert(buf_printf(&in, "{\"%s\":", name) == CS_OK);
	ck_assert(buf_puts(&in, "[") == CS_OK);
	for (int k = 0; k < 2000; k++)
		ck_assert(buf_printf(&in, "%s1", k ? "," : "") == CS_OK);
	ck_assert(buf_puts(&in, "]") == CS_OK);
	for (int d = 0; d < 200; d++)
		ck_assert(buf_puts(&in, "}") == CS_OK);
	ck_assert_uint_le(in.len, PARAMS_VIEW_MAX_INPUT);
	v = view_ok(in.data, false);
	g = json_array_get(json_object_get(v, "groups"), 0);
	json_array_foreach(json_object_get(g, "rows"), i, row)
		labels += strlen(json_string_value(json_object_get(row, "label")));
	ck_assert_uint_le(labels, PARAMS_VIEW_LABEL_BUDGET);
	ck_assert_uint_ge(json_array_size(json_object_get(g, "rows")), 1);
	ck_assert_uint_lt(json_array_size(json_object_get(g, "rows")), 10);
	ck_assert_int_eq(json_integer_value(json_object_get(v, "more")) +
	    (json_int_t)json_array_size(json_object_get(g, "rows")), 2000);
	json_decref(v);

	/* jansson's deepest nesting (2048) still gives its one row. */
	buf_reset(&in);
	for (int d = 0; d < 2047; d++)
		ck_assert(buf_puts(&in, "[") == CS_OK);
	ck_assert(buf_puts(&in, "1") == CS_OK);
	for (int d = 0; d < 2047; d++)
		ck_assert(buf_puts(&in, "]") == CS_OK);
	v = view_ok(in.data, false);
	g = json_array_get(json_object_get(v, "groups"), 0);
	ck_assert_uint_eq(json_array_size(json_object_get(g, "rows")), 1);
	json_decref(v);
	buf_clear(&in);
}
END_TEST

START_TEST(test_params_view_too_big_refused)
{
	size_t n = PARAMS_VIEW_MAX_INPUT + 8;
	char *s = malloc(n + 1);
	json_t *v = (json_t *)1;
	ck_assert_ptr_nonnull(s);
	memset(s, ' ', n);
	s[0] = '"';
	s[n - 1] = '"';
	s[n] = '\0';
	ck_assert_int_eq(params_view(s, false, &v), CS_ETOOBIG);
	ck_assert_ptr_eq(v, (json_t *)1);                       /* *out untouched */
	free(s);
}
END_TEST

START_TEST(test_params_view_not_json_refused)
{
	const char *bad[] = { "", "{", "{\"a\":1,\"a\":2}", "{\"a\":1} x", "'a'", "{a:1}",
	    "[1,]", "\"\\ud800\"", "\"\xff\"", "{\"a\\u0000b\":1}", "NaN" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		json_t *v = (json_t *)1;
		ck_assert_msg(params_view(bad[i], false, &v) == CS_EINVAL, "accepted: %s", bad[i]);
		ck_assert_ptr_eq(v, (json_t *)1);
	}
}
END_TEST

/* The proxy's {"path", "query", "body"} in canonical order: body, path, query. */
#define PROXY_PARAMS "{\"body\":{\"body\":\"Steps:\\n1. run\",\"labels\":[\"bug\",\"p1\"],\"title\":\"Crash\"}," \
	"\"path\":{\"owner\":\"acme\",\"repo\":\"widgets v2\"}," \
	"\"query\":{\"label\":[\"bug\",\"needs triage\"],\"note\":[\"<i>y</i>\"]}}"

START_TEST(test_params_view_proxy_request_in_parts)
{
	json_t *v = view_ok(PROXY_PARAMS, true);
	char *t;
	ck_assert_uint_eq(ngroups(v), 3);
	ck_assert_str_eq(group_str(v, 0, "group"), "path");
	ck_assert_str_eq(group_str(v, 0, "heading"), "In the address");
	ck_assert_str_eq(group_str(v, 1, "group"), "query");
	ck_assert_str_eq(group_str(v, 1, "heading"), "In the query");
	ck_assert_str_eq(group_str(v, 2, "group"), "body");
	ck_assert_str_eq(group_str(v, 2, "heading"), "In the body");
	t = rows_text(v, 0);
	ck_assert_str_eq(t, "owner=acme\nrepo=widgets v2\n");
	free(t);
	t = rows_text(v, 1);                     /* a repeated name once per value */
	ck_assert_str_eq(t, "label=bug\nlabel=needs triage\nnote=<i>y</i>\n");
	free(t);
	t = rows_text(v, 2);                     /* the body's members under their own names */
	ck_assert_str_eq(t, "body=Steps:\n1. run\nlabels[0]=bug\nlabels[1]=p1\ntitle=Crash\n");
	free(t);
	json_decref(v);

	/* Not an approval for a route: the same text as plain nested values. */
	v = view_ok(PROXY_PARAMS, false);
	ck_assert_uint_eq(ngroups(v), 1);
	ck_assert(json_is_null(json_object_get(json_array_get(json_object_get(v, "groups"), 0), "heading")));
	t = rows_text(v, 0);
	ck_assert_ptr_nonnull(strstr(t, "path.repo=widgets v2\nquery.label[0]=bug\n"));
	free(t);
	json_decref(v);
}
END_TEST

START_TEST(test_params_view_proxy_empty_parts)
{
	/* A GET without a query: no body, no query, path values only. */
	json_t *v = view_ok("{\"body\":null,\"path\":{\"owner\":\"acme\"},\"query\":{}}", true);
	char *t;
	ck_assert_uint_eq(ngroups(v), 1);
	ck_assert_str_eq(group_str(v, 0, "group"), "path");
	t = rows_text(v, 0);
	ck_assert_str_eq(t, "owner=acme\n");
	free(t);
	json_decref(v);
	/* Nothing at all: "No values." */
	v = view_ok("{\"body\":null,\"path\":{},\"query\":{}}", true);
	ck_assert_uint_eq(ngroups(v), 1);
	ck_assert_str_eq(group_str(v, 0, "none"), "No values.");
	json_decref(v);
	/* An empty JSON body is said so; a text body is one row. */
	v = view_ok("{\"body\":{},\"path\":{},\"query\":{}}", true);
	ck_assert_uint_eq(ngroups(v), 1);
	ck_assert_str_eq(group_str(v, 0, "group"), "body");
	ck_assert_str_eq(group_str(v, 0, "none"), "No fields.");
	json_decref(v);
	v = view_ok("{\"body\":\"hello\",\"path\":{},\"query\":{}}", true);
	t = rows_text(v, 0);
	ck_assert_str_eq(t, "body=hello\n");
	free(t);
	json_decref(v);
	/* Another shape with a route: plain values. */
	v = view_ok("{\"body\":null,\"path\":{},\"query\":{},\"x\":1}", true);
	ck_assert_str_eq(group_str(v, 0, "group"), "values");
	json_decref(v);
}
END_TEST

/* The approval page itself: the rows as a definition list, no JSON text of a value,
 * a folded value behind a disclosure, "and N more". */
START_TEST(test_params_view_approve_page_renders_rows)
{
	struct buf in, out;
	json_t *ctx, *view;
	buf_init(&in, 1u << 20);
	ck_assert(buf_puts(&in, "{\"body\":\"line one\\nline two\",\"deep\":{\"a\":{}},"
	    "\"labels\":[\"bug\",\"<b>p1</b>\"],"
	    "\"long\":\"") == CS_OK);
	for (int i = 0; i < 300; i++)
		ck_assert(buf_puts(&in, "z") == CS_OK);
	ck_assert(buf_puts(&in, "\",\"many\":[") == CS_OK);
	for (int i = 0; i < 300; i++)
		ck_assert(buf_printf(&in, "%s%d", i ? "," : "", i) == CS_OK);
	ck_assert(buf_puts(&in, "]}") == CS_OK);
	view = view_ok(in.data, false);
	ctx = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:b}", "title", "An agent asks to act now",
	    "approval_id", "ap1", "agent", "Coder", "resource", "GitHub", "action", "create_issue",
	    "action_description", "Open an issue", "parameters", in.data, "digest", "d",
	    "view", view, "proxy_enforced", false);
	ck_assert_ptr_nonnull(ctx);
	buf_init(&out, 1u << 22);
	ck_assert_int_eq(template_render("approve.html", ctx, &out), CS_OK);
	/* The list part: from #parameter-list to the exact-parameters disclosure. */
	char *list = strstr(out.data, "id=\"parameter-list\"");
	char *exact = strstr(out.data, "id=\"exact-parameters\"");
	ck_assert_ptr_nonnull(list);
	ck_assert_ptr_nonnull(exact);
	ck_assert(list < exact);
	*exact = '\0';
	ck_assert_ptr_nonnull(strstr(list, "<dt>body</dt><dd>line one\nline two</dd>"));
	ck_assert_ptr_nonnull(strstr(list, "<dt>labels[1]</dt><dd>&lt;b&gt;p1&lt;/b&gt;</dd>"));
	ck_assert_ptr_nonnull(strstr(list, "<dt>deep.a</dt><dd><em>(no fields)</em></dd>"));
	ck_assert_ptr_nonnull(strstr(list, "<details class=\"fold\"><summary>Show the rest (20 more characters)</summary>"));
	ck_assert_ptr_nonnull(strstr(list, "<dt>many[0]</dt><dd><code>0</code></dd>"));
	ck_assert_ptr_nonnull(strstr(list, "id=\"more-values\""));
	ck_assert_ptr_nonnull(strstr(list, "And 105 more values"));
	/* No JSON text of a value: no brace, no bracketed list, no quoted string, no \n. */
	ck_assert_ptr_null(strstr(list, "{"));
	ck_assert_ptr_null(strstr(list, "&quot;"));
	ck_assert_ptr_null(strstr(list, "\\n"));
	ck_assert_ptr_null(strstr(list, "[\""));
	buf_clear(&out);
	buf_clear(&in);
	json_decref(ctx);
}
END_TEST

static Suite *params_view_suite(void)
{
	Suite *s = suite_create("params_view");
	TCase *tc = tcase_create("params_view");
	tcase_add_test(tc, test_params_view_nesting_dotted_paths);
	tcase_add_test(tc, test_params_view_arrays_indexed);
	tcase_add_test(tc, test_params_view_scalars_literal_and_words);
	tcase_add_test(tc, test_params_view_text_lines_not_escapes);
	tcase_add_test(tc, test_params_view_empty_whole_value_says_no_values);
	tcase_add_test(tc, test_params_view_names_quoted_when_not_plain);
	tcase_add_test(tc, test_params_view_invisible_characters_visible);
	tcase_add_test(tc, test_params_view_long_text_folded);
	tcase_add_test(tc, test_params_view_many_rows_bounded);
	tcase_add_test(tc, test_params_view_deep_paths_bounded);
	tcase_add_test(tc, test_params_view_too_big_refused);
	tcase_add_test(tc, test_params_view_not_json_refused);
	tcase_add_test(tc, test_params_view_proxy_request_in_parts);
	tcase_add_test(tc, test_params_view_proxy_empty_parts);
	tcase_add_test(tc, test_params_view_approve_page_renders_rows);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(params_view_suite());
}
