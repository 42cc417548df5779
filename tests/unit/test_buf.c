/* test_buf.c -- the capped buffer: appends, printf growth, the hard cap (a
 * failed append must leave the content exactly as it was) and the JSON and
 * HTML escapers every reply and page is built with. */
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "testutil.h"
#include "buf.h"

/* --- appends ------------------------------------------------------------ */

/* The reader's cursor (httpc's and mcp_stream's pending bytes): at most max
 * a call, the cursor moved past them, 0 once it stands at the end. */
START_TEST(test_buf_copy_out_moves_the_cursor)
{
	struct buf b;
	char dst[8];
	size_t off = 0;
	buf_init(&b, 64);
	ck_assert_uint_eq(buf_copy_out(&b, &off, dst, sizeof dst), 0);   /* empty, no data */
	ck_assert_uint_eq(off, 0);
	ck_assert_int_eq(buf_puts(&b, "abcdefghij"), CS_OK);
	ck_assert_uint_eq(buf_copy_out(&b, &off, dst, 4), 4);
	ck_assert_mem_eq(dst, "abcd", 4);
	ck_assert_uint_eq(off, 4);
	ck_assert_uint_eq(buf_copy_out(&b, &off, dst, sizeof dst), 6);
	ck_assert_mem_eq(dst, "efghij", 6);
	ck_assert_uint_eq(off, 10);
	ck_assert_uint_eq(buf_copy_out(&b, &off, dst, sizeof dst), 0);
	ck_assert_uint_eq(off, 10);
	buf_clear(&b);
}
END_TEST

START_TEST(test_buf_append_concatenates)
{
	struct buf b;
	buf_init(&b, 1024);
	ck_assert_ptr_null(b.data);
	ck_assert_int_eq(buf_append(&b, "abc", 3), CS_OK);
	ck_assert_int_eq(buf_puts(&b, "def"), CS_OK);
	ck_assert_int_eq(buf_append(&b, "ghi", 0), CS_OK);
	ck_assert_uint_eq(b.len, 6);
	ck_assert_str_eq(b.data, "abcdef");
	ck_assert_uint_ge(b.cap, b.len + 1);
	buf_clear(&b);
}
END_TEST

START_TEST(test_buf_append_binary_keeps_nul_bytes)
{
	struct buf b;
	buf_init(&b, 64);
	ck_assert_int_eq(buf_append(&b, "a\0b", 3), CS_OK);
	ck_assert_uint_eq(b.len, 3);
	ck_assert_mem_eq(b.data, "a\0b", 4);   /* and still NUL-terminated */
	buf_clear(&b);
}
END_TEST

START_TEST(test_buf_append_empty_allocates)
{
	struct buf b;
	buf_init(&b, 16);
	ck_assert_int_eq(buf_append(&b, "", 0), CS_OK);
	ck_assert_ptr_nonnull(b.data);
	ck_assert_str_eq(b.data, "");
	ck_assert_uint_eq(b.len, 0);
	buf_clear(&b);
}
END_TEST

START_TEST(test_buf_append_grows_past_initial_capacity)
{
	struct buf b;
	char chunk[100];
	memset(chunk, 'x', sizeof chunk);
	buf_init(&b, 100000);
	for (int i = 0; i < 500; i++)
		ck_assert_int_eq(buf_append(&b, chunk, sizeof chunk), CS_OK);
	ck_assert_uint_eq(b.len, 50000);
	ck_assert_uint_eq(strlen(b.data), 50000);
	ck_assert_uint_le(b.cap, 100001);
	for (size_t i = 0; i < b.len; i++)
		ck_assert_int_eq(b.data[i], 'x');
	buf_clear(&b);
}
END_TEST

/* --- str_fmt: a fixed array, whole text or none --------------------------- */

START_TEST(test_str_fmt_fits_exactly)
{
	char d[6];
	ck_assert_int_eq(str_fmt(d, sizeof d, "%s-%d", "ab", 12), CS_OK);
	ck_assert_str_eq(d, "ab-12");
}
END_TEST

START_TEST(test_str_fmt_refuses_truncation)
{
	char d[5] = "keep";
	ck_assert_int_eq(str_fmt(d, sizeof d, "%s", "abcde"), CS_ETOOBIG);
	ck_assert_str_eq(d, "");
	ck_assert_int_eq(str_fmt(d, 0, "x"), CS_ETOOBIG);
}
END_TEST

/* --- printf ------------------------------------------------------------- */

START_TEST(test_buf_printf_formats_and_grows)
{
	struct buf b;
	struct buf want;
	buf_init(&b, 10000);
	buf_init(&want, 10000);
	for (int i = 0; i < 300; i++) {
		ck_assert_int_eq(buf_printf(&b, "%03d,", i), CS_OK);
		char t[16];
		ck_assert_int_eq(str_fmt(t, sizeof t, "%03d,", i), CS_OK);
		ck_assert_int_eq(buf_puts(&want, t), CS_OK);
	}
	ck_assert_uint_eq(b.len, 1200);
	ck_assert_str_eq(b.data, want.data);
	ck_assert(strncmp(b.data, "000,001,002,", 12) == 0);
	ck_assert(strcmp(b.data + b.len - 4, "299,") == 0);
	buf_clear(&b);
	buf_clear(&want);
}
END_TEST

START_TEST(test_buf_printf_large_single_write)
{
	struct buf b;
	buf_init(&b, 4096);
	ck_assert_int_eq(buf_printf(&b, "[%s]", "hello"), CS_OK);
	ck_assert_int_eq(buf_printf(&b, "%1000d", 7), CS_OK);
	ck_assert_uint_eq(b.len, 7 + 1000);
	ck_assert_int_eq(b.data[b.len - 1], '7');
	ck_assert_int_eq(b.data[7], ' ');
	ck_assert_int_eq(b.data[b.len], '\0');
	buf_clear(&b);
}
END_TEST

/* --- the cap ------------------------------------------------------------ */

START_TEST(test_buf_cap_exact_fit_ok)
{
	struct buf b;
	buf_init(&b, 8);
	ck_assert_int_eq(buf_puts(&b, "12345678"), CS_OK);
	ck_assert_str_eq(b.data, "12345678");
	ck_assert_uint_le(b.cap, 9);
	ck_assert_int_eq(buf_append(&b, "", 0), CS_OK);
	buf_clear(&b);
}
END_TEST

START_TEST(test_buf_cap_append_toobig_unchanged)
{
	struct buf b;
	buf_init(&b, 8);
	ck_assert_int_eq(buf_puts(&b, "12345"), CS_OK);
	ck_assert_int_eq(buf_puts(&b, "6789"), CS_ETOOBIG);
	ck_assert_uint_eq(b.len, 5);
	ck_assert_str_eq(b.data, "12345");
	ck_assert_int_eq(buf_puts(&b, "678"), CS_OK);
	ck_assert_int_eq(buf_append(&b, "9", 1), CS_ETOOBIG);
	ck_assert_str_eq(b.data, "12345678");
	buf_clear(&b);
}
END_TEST

START_TEST(test_buf_cap_huge_length_refused)
{
	struct buf b;
	buf_init(&b, 16);
	ck_assert_int_eq(buf_puts(&b, "ab"), CS_OK);
	/* A length near SIZE_MAX must be refused before any arithmetic on it. */
	ck_assert_int_eq(buf_append(&b, "x", SIZE_MAX), CS_ETOOBIG);
	ck_assert_int_eq(buf_append(&b, "x", SIZE_MAX - 1), CS_ETOOBIG);
	ck_assert_str_eq(b.data, "ab");
	buf_clear(&b);
}
END_TEST

START_TEST(test_buf_cap_zero_refuses_everything)
{
	struct buf b;
	buf_init(&b, 0);
	ck_assert_int_eq(buf_append(&b, "a", 1), CS_ETOOBIG);
	ck_assert_int_eq(buf_printf(&b, "%d", 1), CS_ETOOBIG);
	ck_assert_int_eq(buf_json_str(&b, ""), CS_ETOOBIG);
	ck_assert_uint_eq(b.len, 0);
	buf_clear(&b);
}
END_TEST

START_TEST(test_buf_cap_printf_toobig_unchanged)
{
	struct buf b;
	buf_init(&b, 10);
	ck_assert_int_eq(buf_printf(&b, "%s", "abcdef"), CS_OK);
	ck_assert_int_eq(buf_printf(&b, "%d", 12345), CS_ETOOBIG);
	ck_assert_uint_eq(b.len, 6);
	ck_assert_str_eq(b.data, "abcdef");
	ck_assert_int_eq(buf_printf(&b, "%d", 1234), CS_OK);
	ck_assert_str_eq(b.data, "abcdef1234");
	buf_clear(&b);
}
END_TEST

START_TEST(test_buf_cap_json_str_toobig_unchanged)
{
	struct buf b;
	buf_init(&b, 12);
	ck_assert_int_eq(buf_puts(&b, "{\"a\":"), CS_OK);
	/* Fits unescaped, not once '<' becomes \u003c: no half literal may remain. */
	ck_assert_int_eq(buf_json_str(&b, "<<"), CS_ETOOBIG);
	ck_assert_uint_eq(b.len, 5);
	ck_assert_str_eq(b.data, "{\"a\":");
	ck_assert_int_eq(buf_json_str(&b, "xy"), CS_OK);
	ck_assert_str_eq(b.data, "{\"a\":\"xy\"");
	buf_clear(&b);
}
END_TEST

/* buf_expect makes room once and never past the cap; what fits then needs no more. */
START_TEST(test_buf_expect_hint)
{
	struct buf b;
	buf_init(&b, 100);
	ck_assert_int_eq(buf_expect(&b, 50), CS_OK);
	ck_assert_uint_ge(b.cap, 51);
	ck_assert_uint_eq(b.len, 0);
	char *before = b.data;
	size_t cap = b.cap;
	for (int i = 0; i < 50; i++)
		ck_assert_int_eq(buf_append(&b, "x", 1), CS_OK);
	ck_assert_ptr_eq(b.data, before);
	ck_assert_uint_eq(b.cap, cap);
	/* Past the cap: room up to it, and the cap still holds for appends. */
	ck_assert_int_eq(buf_expect(&b, SIZE_MAX), CS_OK);
	ck_assert_uint_le(b.cap, 101);
	static const char more[51];
	ck_assert_int_eq(buf_append(&b, more, sizeof more), CS_ETOOBIG);
	ck_assert_uint_eq(b.len, 50);
	buf_clear(&b);
	buf_init(&b, 0);
	ck_assert_int_eq(buf_expect(&b, 10), CS_OK);
	ck_assert_int_eq(buf_append(&b, "a", 1), CS_ETOOBIG);
	buf_clear(&b);
}
END_TEST

START_TEST(test_buf_cap_html_exact_fit_ok)
{
	struct buf b;
	buf_init(&b, 10);
	ck_assert_int_eq(buf_puts(&b, "<p>"), CS_OK);
	ck_assert_int_eq(buf_html(&b, "a&b"), CS_OK);         /* "a&amp;b" is 7: 3 + 7 = 10 */
	ck_assert_str_eq(b.data, "<p>a&amp;b");
	ck_assert_int_eq(buf_html(&b, "x"), CS_ETOOBIG);
	ck_assert_str_eq(b.data, "<p>a&amp;b");
	buf_clear(&b);
}
END_TEST

START_TEST(test_buf_cap_html_partial_escape_rolled_back)
{
	struct buf b;
	buf_init(&b, 9);
	ck_assert_int_eq(buf_puts(&b, "<p>"), CS_OK);
	ck_assert_int_eq(buf_html(&b, "ab<c"), CS_ETOOBIG);   /* "ab&lt;c" is 7 > 6 left */
	ck_assert_uint_eq(b.len, 3);
	ck_assert_str_eq(b.data, "<p>");
	ck_assert_int_eq(buf_html(&b, "ab&lt"), CS_ETOOBIG);
	ck_assert_str_eq(b.data, "<p>");
	ck_assert_int_eq(buf_html(&b, "a<b"), CS_OK);          /* "a&lt;b" is 6 */
	ck_assert_str_eq(b.data, "<p>a&lt;b");
	buf_clear(&b);
}
END_TEST

/* --- JSON string escaping ------------------------------------------------ */

static char *json_lit(const char *s)
{
	struct buf b;
	buf_init(&b, 4096);
	ck_assert_int_eq(buf_json_str(&b, s), CS_OK);
	return buf_steal(&b);
}

/* The literal must parse back, with jansson, to exactly s. */
static void json_roundtrip(const char *s)
{
	char *lit = json_lit(s);
	json_error_t err;
	json_t *v = json_loads(lit, JSON_DECODE_ANY, &err);
	ck_assert_msg(v != NULL, "jansson refused %s: %s", lit, err.text);
	ck_assert(json_is_string(v));
	ck_assert_str_eq(json_string_value(v), s);
	json_decref(v);
	free(lit);
}

START_TEST(test_buf_json_str_plain)
{
	char *lit = json_lit("hello world");
	ck_assert_str_eq(lit, "\"hello world\"");
	free(lit);
	lit = json_lit("");
	ck_assert_str_eq(lit, "\"\"");
	free(lit);
}
END_TEST

START_TEST(test_buf_json_str_quotes_and_backslash)
{
	char *lit = json_lit("a\"b\\c");
	ck_assert_str_eq(lit, "\"a\\\"b\\\\c\"");
	free(lit);
	json_roundtrip("\"\\\"\\\\");
}
END_TEST

START_TEST(test_buf_json_str_control_chars)
{
	char *lit = json_lit("\n\r\t");
	ck_assert_str_eq(lit, "\"\\n\\r\\t\"");
	free(lit);
	lit = json_lit("\x01\x1f\x7f\b\f");
	ck_assert_str_eq(lit, "\"\\u0001\\u001f\\u007f\\u0008\\u000c\"");
	free(lit);
	char all[32];
	for (int i = 1; i < 32; i++)
		all[i - 1] = (char)i;
	all[31] = '\0';
	lit = json_lit(all);
	for (const char *p = lit; *p; p++)
		ck_assert_msg((unsigned char)*p >= 0x20, "raw control byte in %s", lit);
	free(lit);
	json_roundtrip(all);
}
END_TEST

START_TEST(test_buf_json_str_html_specials)
{
	char *lit = json_lit("</script><b>&amp;");
	ck_assert_str_eq(lit, "\"\\u003c/script\\u003e\\u003cb\\u003e\\u0026amp;\"");
	ck_assert_ptr_null(strchr(lit, '<'));
	ck_assert_ptr_null(strchr(lit, '>'));
	ck_assert_ptr_null(strchr(lit, '&'));
	free(lit);
	json_roundtrip("</script><!-- & -->");
}
END_TEST

START_TEST(test_buf_json_str_utf8_passthrough)
{
	char *lit = json_lit("caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80");
	ck_assert_str_eq(lit, "\"caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80\"");
	free(lit);
	json_roundtrip("caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80");
}
END_TEST

START_TEST(test_buf_json_str_appends_after_existing)
{
	struct buf b;
	buf_init(&b, 128);
	ck_assert_int_eq(buf_puts(&b, "{\"k\":"), CS_OK);
	ck_assert_int_eq(buf_json_str(&b, "v\""), CS_OK);
	ck_assert_int_eq(buf_puts(&b, "}"), CS_OK);
	ck_assert_str_eq(b.data, "{\"k\":\"v\\\"\"}");
	buf_clear(&b);
}
END_TEST

/* --- HTML escaping ------------------------------------------------------- */

START_TEST(test_buf_html_escapes_all_specials)
{
	struct buf b;
	buf_init(&b, 256);
	ck_assert_int_eq(buf_html(&b, "&<>\"'`="), CS_OK);
	ck_assert_str_eq(b.data, "&amp;&lt;&gt;&quot;&#39;&#96;&#61;");
	buf_clear(&b);
}
END_TEST

START_TEST(test_buf_html_attack_strings)
{
	struct buf b;
	buf_init(&b, 256);
	ck_assert_int_eq(buf_html(&b, "<script>alert(1)</script>"), CS_OK);
	ck_assert_str_eq(b.data, "&lt;script&gt;alert(1)&lt;/script&gt;");
	buf_reset(&b);
	ck_assert_int_eq(buf_html(&b, "\" onmouseover=alert(1) x=\""), CS_OK);
	ck_assert_ptr_null(strchr(b.data, '"'));
	ck_assert_ptr_null(strchr(b.data, '='));
	ck_assert_str_eq(b.data, "&quot; onmouseover&#61;alert(1) x&#61;&quot;");
	buf_clear(&b);
}
END_TEST

START_TEST(test_buf_html_plain_and_utf8_unchanged)
{
	struct buf b;
	buf_init(&b, 256);
	ck_assert_int_eq(buf_html(&b, "Hello, world. caf\xc3\xa9 \xe2\x80\x94"), CS_OK);
	ck_assert_str_eq(b.data, "Hello, world. caf\xc3\xa9 \xe2\x80\x94");
	buf_reset(&b);
	ck_assert_int_eq(buf_html(&b, ""), CS_OK);
	ck_assert_uint_eq(b.len, 0);
	buf_clear(&b);
}
END_TEST

/* --- steal, reset, clear ------------------------------------------------- */

START_TEST(test_buf_steal_returns_data_and_empties)
{
	struct buf b;
	buf_init(&b, 64);
	ck_assert_int_eq(buf_puts(&b, "token"), CS_OK);
	char *s = buf_steal(&b);
	ck_assert_str_eq(s, "token");
	ck_assert_ptr_null(b.data);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_uint_eq(b.cap, 0);
	/* Still usable, with the same cap. */
	ck_assert_int_eq(buf_puts(&b, "again"), CS_OK);
	ck_assert_str_eq(b.data, "again");
	ck_assert_int_eq(buf_append(&b, "0123456789012345678901234567890123456789012345678901234567890",
	    61), CS_ETOOBIG);
	free(s);
	buf_clear(&b);
}
END_TEST

START_TEST(test_buf_steal_empty_gives_empty_string)
{
	struct buf b;
	buf_init(&b, 64);
	char *s = buf_steal(&b);
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s, "");
	free(s);
	buf_clear(&b);
}
END_TEST

START_TEST(test_buf_reset_keeps_allocation)
{
	struct buf b;
	buf_init(&b, 64);
	buf_reset(&b);                   /* on a buffer that never allocated */
	ck_assert_ptr_null(b.data);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_int_eq(buf_puts(&b, "abc"), CS_OK);
	char *before = b.data;
	buf_reset(&b);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_ptr_eq(b.data, before);
	ck_assert_str_eq(b.data, "");
	ck_assert_int_eq(buf_puts(&b, "xy"), CS_OK);
	ck_assert_str_eq(b.data, "xy");
	buf_clear(&b);
}
END_TEST

START_TEST(test_buf_clear_null_safe)
{
	struct buf b;
	buf_clear(NULL);
	buf_wipe_clear(NULL);
	buf_init(&b, 64);
	buf_clear(&b);                   /* never allocated */
	buf_clear(&b);                   /* twice */
	ck_assert_ptr_null(b.data);
	ck_assert_int_eq(buf_puts(&b, "secret"), CS_OK);
	buf_wipe_clear(&b);
	ck_assert_ptr_null(b.data);
	ck_assert_uint_eq(b.len, 0);
	buf_wipe_clear(&b);
}
END_TEST

START_TEST(test_buf_wipe_free_null_safe)
{
	char *s = strdup("secret");
	unsigned char *p = malloc(8);
	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_nonnull(p);
	wipe_free(s);
	wipe_free_n(p, 8);
	wipe_free(NULL);
	wipe_free_n(NULL, 8);
}
END_TEST

static Suite *buf_suite(void)
{
	Suite *s = suite_create("buf");
	TCase *tc = tcase_create("buf");
	tcase_add_test(tc, test_buf_append_concatenates);
	tcase_add_test(tc, test_buf_append_binary_keeps_nul_bytes);
	tcase_add_test(tc, test_buf_append_empty_allocates);
	tcase_add_test(tc, test_buf_append_grows_past_initial_capacity);
	tcase_add_test(tc, test_buf_printf_formats_and_grows);
	tcase_add_test(tc, test_buf_printf_large_single_write);
	tcase_add_test(tc, test_buf_cap_exact_fit_ok);
	tcase_add_test(tc, test_buf_cap_append_toobig_unchanged);
	tcase_add_test(tc, test_buf_cap_huge_length_refused);
	tcase_add_test(tc, test_buf_cap_zero_refuses_everything);
	tcase_add_test(tc, test_buf_cap_printf_toobig_unchanged);
	tcase_add_test(tc, test_buf_cap_json_str_toobig_unchanged);
	tcase_add_test(tc, test_buf_cap_html_exact_fit_ok);
	tcase_add_test(tc, test_buf_cap_html_partial_escape_rolled_back);
	tcase_add_test(tc, test_buf_json_str_plain);
	tcase_add_test(tc, test_buf_json_str_quotes_and_backslash);
	tcase_add_test(tc, test_buf_json_str_control_chars);
	tcase_add_test(tc, test_buf_json_str_html_specials);
	tcase_add_test(tc, test_buf_json_str_utf8_passthrough);
	tcase_add_test(tc, test_buf_json_str_appends_after_existing);
	tcase_add_test(tc, test_buf_html_escapes_all_specials);
	tcase_add_test(tc, test_buf_html_attack_strings);
	tcase_add_test(tc, test_buf_html_plain_and_utf8_unchanged);
	tcase_add_test(tc, test_buf_steal_returns_data_and_empties);
	tcase_add_test(tc, test_buf_steal_empty_gives_empty_string);
	tcase_add_test(tc, test_buf_reset_keeps_allocation);
	tcase_add_test(tc, test_buf_clear_null_safe);
	tcase_add_test(tc, test_buf_expect_hint);
	tcase_add_test(tc, test_str_fmt_fits_exactly);
	tcase_add_test(tc, test_str_fmt_refuses_truncation);
	tcase_add_test(tc, test_buf_wipe_free_null_safe);
	tcase_add_test(tc, test_buf_copy_out_moves_the_cursor);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(buf_suite());
}
