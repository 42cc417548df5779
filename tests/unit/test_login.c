/* test_login.c -- the parts of the login domain that need no IdP: the key
 * under which login starts are counted per client address (issue #12), and a
 * start while the IdP is not discovered yet. */
#include <string.h>
#include "app.h"
#include "login.h"
#include "testutil.h"

/* Whether a and b are counted under the same key. */
static int same_key(const char *a, const char *b)
{
	unsigned char ka[32], kb[32];
	login_client_key(a, ka);
	login_client_key(b, kb);
	return memcmp(ka, kb, 32) == 0;
}

START_TEST(test_login_client_key_ipv4_per_address)
{
	ck_assert(same_key("192.0.2.1", "192.0.2.1"));
	ck_assert(!same_key("192.0.2.1", "192.0.2.2"));
	ck_assert(!same_key("127.0.0.1", "127.0.0.2"));
	/* An IPv4-mapped IPv6 peer is the same IPv4 client. */
	ck_assert(same_key("192.0.2.1", "::ffff:192.0.2.1"));
	ck_assert(!same_key("192.0.2.1", "::ffff:192.0.2.9"));
}
END_TEST

START_TEST(test_login_client_key_ipv6_per_64)
{
	/* One site or device is handed a whole /64: counting per /128 would give
	 * one attacker 2^64 addresses, each with its own places. */
	ck_assert(same_key("2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"));
	ck_assert(same_key("2001:db8:1:2::1", "2001:0db8:0001:0002:0:0:0:7"));
	ck_assert(!same_key("2001:db8:1:2::1", "2001:db8:1:3::1"));
	/* The IPv6 key space stays apart from IPv4's (2001:db8:: is not 32.1.13.184). */
	ck_assert(!same_key("2001:db8::", "32.1.13.184"));
}
END_TEST

START_TEST(test_login_client_key_unknown_text)
{
	/* An address the server could not tell ("-") is one shared key, never
	 * the key of a real address. */
	ck_assert(same_key("-", "-"));
	ck_assert(!same_key("-", "0.0.0.0"));
	ck_assert(!same_key("", "-"));
}
END_TEST

START_TEST(test_login_pkce_challenge_s256)
{
	/* RFC 7636 §4.2 S256, the expected values from Python's hashlib and
	 * base64.urlsafe_b64encode; '+' and '/' become '-' and '_', no '='.
	 * And nothing written past the 44 bytes the challenge owns (libcrypto's
	 * base64 writes 45, unseen by ASan). */
	char out[LOGIN_PKCE_CHALLENGE_LEN + 1 + 8];
	memset(out, 'X', sizeof out);
	login_pkce_challenge("dBjftJeZ4CVP-mB92K9uhvDQaoBsa7Z3sG3HJ7sFqPs", out);
	ck_assert_str_eq(out, "_FwW__09BtSWsiPtsX737l681A-NNg3Bg0z5-drHqMA");
	for (size_t i = LOGIN_PKCE_CHALLENGE_LEN + 1; i < sizeof out; i++)
		ck_assert_int_eq(out[i], 'X');
	char o2[LOGIN_PKCE_CHALLENGE_LEN + 1];
	login_pkce_challenge("d", o2);     /* base64: GKw+c0PwFokMUQ6T+TUmEWnZ4/VlQ2Qpgw+vCTT0+OQ= */
	ck_assert_str_eq(o2, "GKw-c0PwFokMUQ6T-TUmEWnZ4_VlQ2Qpgw-vCTT0-OQ");
}
END_TEST

START_TEST(test_login_begin_no_idp)
{
	/* Before discovery nothing is stored and nothing is handed out: the
	 * outcome alone, and a cleared result that stays safe to clear. */
	struct config cfg;
	struct app app;
	struct login_begin_in in = { .remote_ip = "192.0.2.1", .now = 1000 };
	struct login_begin_out out = { .location = NULL };
	enum login_begin_outcome o = LOGIN_BEGIN__MAX;
	memset(&cfg, 0, sizeof cfg);
	memset(&app, 0, sizeof app);
	app.cfg = &cfg;
	ck_assert_int_eq(login_begin(&app, &in, &out, &o), CS_OK);
	ck_assert_int_eq(o, LOGIN_BEGIN_NO_IDP);
	ck_assert_ptr_null(out.location);
	ck_assert_str_eq(out.bind, "");
	login_begin_out_clear(&out);
	login_begin_out_clear(NULL);
	login_finish_out_clear(NULL);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("login");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_login_client_key_ipv4_per_address);
	tcase_add_test(tc, test_login_client_key_ipv6_per_64);
	tcase_add_test(tc, test_login_client_key_unknown_text);
	tcase_add_test(tc, test_login_pkce_challenge_s256);
	tcase_add_test(tc, test_login_begin_no_idp);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
