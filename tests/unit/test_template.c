/* test_template.c -- the compiled-in templates: every one renders, every value
 * is escaped (there is no raw output), values are never re-parsed as template
 * syntax, and failures leave the output buffer as it was.  Engine edge cases
 * go through the real templates only: they are compiled from templates/. */
#include <jansson.h>

#include "testutil.h"
#include "buf.h"
#include "form.h"
#include "template.h"

static size_t count_of(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* Renders name with ctx into a fresh buffer; returns the text (caller frees). */
static char *render_ok(const char *name, json_t *ctx)
{
	struct buf b;
	buf_init(&b, 1u << 20);
	ck_assert_int_eq(template_render(name, ctx, &b), CS_OK);
	ck_assert(utf8_valid(b.data, b.len));
	return buf_steal(&b);
}

START_TEST(test_template_check_all_ok)
{
	ck_assert_int_eq(template_check_all(), CS_OK);
}
END_TEST

START_TEST(test_template_error_page_structure)
{
	json_t *ctx = json_pack("{s:s, s:s}", "title", "Not found", "message", "There is no such page.");
	char *out = render_ok("error.html", ctx);
	ck_assert(strncmp(out, "<!doctype html>", 15) == 0);               /* head.html included */
	ck_assert_ptr_nonnull(strstr(out, "<title>Not found \xc2\xb7 consentd</title>"));
	ck_assert_ptr_nonnull(strstr(out, "<h1>Not found</h1>"));
	ck_assert_ptr_nonnull(strstr(out, "<p>There is no such page.</p>"));
	ck_assert_ptr_nonnull(strstr(out, "</html>"));                      /* foot.html included */
	ck_assert_ptr_null(strstr(out, "{{"));
	ck_assert_ptr_null(strstr(out, "Reference:"));                       /* no request_id */
	free(out);
	json_decref(ctx);
}
END_TEST

START_TEST(test_template_error_escapes_script)
{
	json_t *ctx = json_pack("{s:s, s:s}", "title", "<script>alert(1)</script>",
	    "message", "He said \"hi\" & 'bye' `x`=y <img src=x onerror=alert(1)>");
	char *out = render_ok("error.html", ctx);
	ck_assert_ptr_null(strstr(out, "<script>"));
	ck_assert_ptr_null(strstr(out, "<img"));
	ck_assert_ptr_null(strstr(out, "\"hi\""));
	ck_assert_ptr_null(strstr(out, "'bye'"));
	ck_assert_uint_eq(count_of(out, "&lt;script&gt;alert(1)&lt;/script&gt;"), 2);  /* <title>, <h1> */
	ck_assert_ptr_nonnull(strstr(out,
	    "He said &quot;hi&quot; &amp; &#39;bye&#39; &#96;x&#96;&#61;y &lt;img src&#61;x "
	    "onerror&#61;alert(1)&gt;"));
	free(out);
	json_decref(ctx);
}
END_TEST

START_TEST(test_template_values_not_reparsed)
{
	/* A value that looks like template syntax is printed, never interpreted. */
	json_t *ctx = json_pack("{s:s, s:s}", "title", "T", "message", "{{title}}{{> head.html}}{{#x}}");
	char *out = render_ok("error.html", ctx);
	ck_assert_ptr_nonnull(strstr(out, "<p>{{title}}{{&gt; head.html}}{{#x}}</p>"));
	ck_assert_uint_eq(count_of(out, "<!doctype html>"), 1);
	free(out);
	json_decref(ctx);
}
END_TEST

START_TEST(test_template_section_request_id)
{
	json_t *ctx = json_pack("{s:s, s:s, s:s}", "title", "Oops", "message", "m",
	    "request_id", "abc\"<>123");
	char *out = render_ok("error.html", ctx);
	ck_assert_ptr_nonnull(strstr(out, "Reference: <code>abc&quot;&lt;&gt;123</code>"));
	free(out);
	json_decref(ctx);

	ctx = json_pack("{s:s, s:s, s:s}", "title", "Oops", "message", "m", "request_id", "");
	out = render_ok("error.html", ctx);                  /* "" is false: section skipped */
	ck_assert_ptr_null(strstr(out, "Reference:"));
	free(out);
	json_decref(ctx);

	ctx = json_pack("{s:s, s:s, s:b}", "title", "Oops", "message", "m", "request_id", 0);
	out = render_ok("error.html", ctx);
	ck_assert_ptr_null(strstr(out, "Reference:"));
	free(out);
	json_decref(ctx);
}
END_TEST

START_TEST(test_template_scalars_printed)
{
	json_t *ctx = json_pack("{s:i, s:b, s:n}", "title", 42, "message", 1, "request_id");
	char *out = render_ok("error.html", ctx);
	ck_assert_ptr_nonnull(strstr(out, "<h1>42</h1>"));
	ck_assert_ptr_nonnull(strstr(out, "<p>true</p>"));
	ck_assert_ptr_null(strstr(out, "Reference:"));                      /* null is false */
	free(out);
	json_decref(ctx);
}
END_TEST

START_TEST(test_template_missing_values_empty)
{
	json_t *ctx = json_object();
	char *out = render_ok("error.html", ctx);
	ck_assert_ptr_nonnull(strstr(out, "<h1></h1>"));
	ck_assert_ptr_nonnull(strstr(out, "<p></p>"));
	free(out);
	json_decref(ctx);
}
END_TEST

START_TEST(test_template_index_escapes_public_url)
{
	json_t *ctx = json_pack("{s:s, s:s}", "title", "consentd",
	    "public_url", "http://x\"><script>alert(1)</script>");
	char *out = render_ok("index.html", ctx);
	ck_assert_ptr_null(strstr(out, "<script>"));
	ck_assert_ptr_nonnull(strstr(out, "<code>http://x&quot;&gt;&lt;script&gt;"));
	free(out);
	json_decref(ctx);
}
END_TEST

START_TEST(test_template_object_value_refused_and_rolled_back)
{
	/* Objects and arrays are not printable: the render fails and the buffer
	 * keeps exactly what it had before. */
	struct buf b;
	buf_init(&b, 1u << 20);
	ck_assert_int_eq(buf_puts(&b, "PREFIX"), CS_OK);
	json_t *ctx = json_pack("{s:{s:s}, s:s}", "title", "k", "v", "message", "m");
	ck_assert_int_eq(template_render("error.html", ctx, &b), CS_EINVAL);
	ck_assert_uint_eq(b.len, 6);
	ck_assert_str_eq(b.data, "PREFIX");
	json_decref(ctx);
	ctx = json_pack("{s:s, s:[s]}", "title", "t", "message", "m");
	ck_assert_int_eq(template_render("error.html", ctx, &b), CS_EINVAL);
	ck_assert_str_eq(b.data, "PREFIX");
	json_decref(ctx);
	buf_clear(&b);
}
END_TEST

START_TEST(test_template_unknown_enoent)
{
	static const char *const names[] = {
		"nope.html", "", "error", "../templates/error.html", "templates/error.html",
		"ERROR.HTML", "error.html/", "error.html\n",
	};
	struct buf b;
	buf_init(&b, 4096);
	ck_assert_int_eq(buf_puts(&b, "keep"), CS_OK);
	json_t *ctx = json_object();
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		ck_assert_msg(template_render(names[i], ctx, &b) == CS_ENOENT, "'%s'", names[i]);
		ck_assert_str_eq(b.data, "keep");
	}
	json_decref(ctx);
	buf_clear(&b);
}
END_TEST

START_TEST(test_template_appends_to_buffer)
{
	struct buf b;
	buf_init(&b, 1u << 20);
	ck_assert_int_eq(buf_puts(&b, "before|"), CS_OK);
	json_t *ctx = json_pack("{s:s}", "title", "x");
	ck_assert_int_eq(template_render("foot.html", ctx, &b), CS_OK);
	ck_assert(strncmp(b.data, "before|</main>", 14) == 0);
	json_decref(ctx);
	buf_clear(&b);
}
END_TEST

START_TEST(test_template_cap_toobig_rolled_back)
{
	struct buf b;
	buf_init(&b, 200);                       /* head.html alone is longer */
	ck_assert_int_eq(buf_puts(&b, "abc"), CS_OK);
	json_t *ctx = json_pack("{s:s, s:s}", "title", "t", "message", "m");
	ck_assert_int_eq(template_render("error.html", ctx, &b), CS_ETOOBIG);
	ck_assert_uint_eq(b.len, 3);
	ck_assert_str_eq(b.data, "abc");
	json_decref(ctx);
	buf_clear(&b);
}
END_TEST

START_TEST(test_template_stylesheet_passes_through)
{
	json_t *ctx = json_object();
	char *out = render_ok("consentd.css", ctx);
	ck_assert_ptr_nonnull(strstr(out, ":root {"));
	ck_assert_ptr_null(strstr(out, "&"));             /* no escaping of the template text */
	free(out);
	json_decref(ctx);
}
END_TEST

static Suite *template_suite(void)
{
	Suite *s = suite_create("template");
	TCase *tc = tcase_create("template");
	tcase_add_test(tc, test_template_check_all_ok);
	tcase_add_test(tc, test_template_error_page_structure);
	tcase_add_test(tc, test_template_error_escapes_script);
	tcase_add_test(tc, test_template_values_not_reparsed);
	tcase_add_test(tc, test_template_section_request_id);
	tcase_add_test(tc, test_template_scalars_printed);
	tcase_add_test(tc, test_template_missing_values_empty);
	tcase_add_test(tc, test_template_index_escapes_public_url);
	tcase_add_test(tc, test_template_object_value_refused_and_rolled_back);
	tcase_add_test(tc, test_template_unknown_enoent);
	tcase_add_test(tc, test_template_appends_to_buffer);
	tcase_add_test(tc, test_template_cap_toobig_rolled_back);
	tcase_add_test(tc, test_template_stylesheet_passes_through);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(template_suite());
}
