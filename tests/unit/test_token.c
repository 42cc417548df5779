/* test_token.c -- client_secret_basic parsing and the visible-text filter for
 * agent-supplied strings (pure functions; the endpoints are tested over HTTP). */
#include <string.h>
#include "pages.h"
#include "token.h"
#include "testutil.h"

static void basic_ok(const char *hdr, const char *want_id, const char *want_secret)
{
	char *id = NULL, *secret = NULL;
	ck_assert_msg(basic_credentials(hdr, &id, &secret), "parse %s", hdr);
	ck_assert_str_eq(id, want_id);
	ck_assert_str_eq(secret, want_secret);
	free(id);
	free(secret);
}

static void basic_bad(const char *hdr)
{
	char *id = NULL, *secret = NULL;
	ck_assert_msg(!basic_credentials(hdr, &id, &secret), "should refuse %s", hdr ? hdr : "NULL");
	ck_assert_ptr_null(id);
	ck_assert_ptr_null(secret);
}

START_TEST(test_token_basic_good)
{
	basic_ok("Basic YWdlbnQtZ2F0ZXdheTpnYXRld2F5LWRldi1zZWNyZXQ=", "agent-gateway", "gateway-dev-secret");
	basic_ok("basic YTpi", "a", "b");                 /* scheme is case-insensitive */
	/* RFC 6749 §2.3.1: form-urlencoded before Base64: "a%3Ab:c%2Bd+e" -> id "a:b", secret "c+d e" */
	basic_ok("Basic YSUzQWI6YyUyQmQrZQ==", "a:b", "c+d e");
	basic_ok("Basic OnNlY3JldA==", "", "secret");      /* empty id parses; the id check refuses it */
}
END_TEST

START_TEST(test_token_basic_hostile)
{
	basic_bad(NULL);
	basic_bad("");
	basic_bad("Bearer YTpi");
	basic_bad("Basic");
	basic_bad("Basic ");
	basic_bad("Basic YTpi!");                          /* not base64 */
	basic_bad("Basic YWJj");                           /* "abc": no colon */
	basic_bad("Basic YQBiOmM=");                       /* a NUL inside */
	basic_bad("Basic YSUyOmI=");                       /* "a%2:b": bad escape */
	basic_bad("Basic YSUwMDpi");                       /* "a%00:b": NUL escape */
	char big[4200];
	memcpy(big, "Basic ", 6);
	memset(big + 6, 'Q', sizeof big - 7);
	big[sizeof big - 1] = '\0';
	basic_bad(big);
}
END_TEST

START_TEST(test_token_visible_text_shows_invisible)
{
	char *v = visible_text("txt.exe\xe2\x80\xae" "fdp.");
	ck_assert_str_eq(v, "txt.exe[U+202E]fdp.");
	free(v);
	v = visible_text("a\xe2\x80\x8b" "b\xef\xbb\xbf" "c\xe2\x81\xa6" "d\xc2\xad" "e");
	ck_assert_str_eq(v, "a[U+200B]b[U+FEFF]c[U+2066]d[U+00AD]e");
	free(v);
	v = visible_text("plain <b>text</b> \xc3\xa9\xf0\x9f\x98\x80");
	ck_assert_str_eq(v, "plain <b>text</b> \xc3\xa9\xf0\x9f\x98\x80");   /* escaping is the template's job */
	free(v);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("token");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_token_basic_good);
	tcase_add_test(tc, test_token_basic_hostile);
	tcase_add_test(tc, test_token_visible_text_shows_invisible);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
