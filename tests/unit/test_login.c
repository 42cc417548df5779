/* test_login.c -- the parts of the login domain that need no IdP: PKCE, a
 * start while the IdP is not discovered yet, and the sealed login cookie
 * (issue #28): its names, sealing and opening, its attackers (altered, moved,
 * another key, another day, malformed) and which of a browser's cookies go. */
#include <stdio.h>
#include <string.h>
#include <openssl/evp.h>
#include "app.h"
#include "buf.h"
#include "login.h"
#include "login_cookie.h"
#include "testutil.h"

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
	struct login_begin_in in = { .cookie_header = NULL, .now = 1000 };
	struct login_begin_out out = { .location = NULL };
	enum login_begin_outcome o = LOGIN_BEGIN__MAX;
	memset(&cfg, 0, sizeof cfg);
	memset(&app, 0, sizeof app);
	app.cfg = &cfg;
	ck_assert_int_eq(login_begin(&app, &in, &out, &o), CS_OK);
	ck_assert_int_eq(o, LOGIN_BEGIN_NO_IDP);
	ck_assert_ptr_null(out.location);
	ck_assert_ptr_null(out.value);
	ck_assert_str_eq(out.name, "");
	login_begin_out_clear(&out);
	login_begin_out_clear(NULL);
	login_finish_out_clear(NULL);
}
END_TEST

/* --- the login cookie -------------------------------------------------------- */

#define NOW  1800000000            /* a day's second 0 plus 2 h: 20833 days and 7200 s */
#define DAY  86400

static struct master_key mk_of(unsigned char fill)
{
	struct master_key mk;
	memset(&mk, 0, sizeof mk);
	memset(mk.bytes, fill, sizeof mk.bytes);
	return mk;
}

static struct config cfg_of(bool https)
{
	struct config c;
	memset(&c, 0, sizeof c);
	c.public_url_is_https = https;
	return c;
}

/* A well-formed state: hash filled with h, expiring at exp, return_to rt. */
static struct login_cookie lc_of(unsigned char h, int64_t exp, const char *rt)
{
	struct login_cookie lc;
	memset(&lc, 0, sizeof lc);
	memset(lc.state_hash, h, 32);
	memset(lc.nonce, 'n', SESSION_TOKEN_LEN);
	memset(lc.verifier, 'v', SESSION_TOKEN_LEN);
	lc.verifier[0] = '-';
	lc.max_age = 60;
	lc.expires_at = exp;
	ck_assert_uint_le(strlen(rt), LOGIN_RETURN_TO_MAX);
	memcpy(lc.return_to, rt, strlen(rt) + 1);
	return lc;
}

static enum cs_err open_at(const struct master_key *mk, const char *name, const char *v,
    int64_t now, struct login_cookie *out)
{
	return login_cookie_open(mk, name, v, strlen(v), now, out);
}

START_TEST(test_login_cookie_names)
{
	struct config http = cfg_of(false), https = cfg_of(true);
	unsigned char h[32];
	char n[LOGIN_COOKIE_NAME_MAX];
	for (int i = 0; i < 32; i++)
		h[i] = (unsigned char)(0xa0 + i);
	login_cookie_name(&http, h, n);
	ck_assert_str_eq(n, "consentd_login_a0a1a2a3a4a5");
	login_cookie_name(&https, h, n);
	ck_assert_str_eq(n, "__Host-consentd-login-a0a1a2a3a4a5");
	ck_assert_uint_lt(strlen(n), LOGIN_COOKIE_NAME_MAX);
	ck_assert_str_eq(login_cookie_prefix(&https), "__Host-consentd-login-");
	ck_assert_str_eq(login_cookie_prefix(&http), "consentd_login_");
}
END_TEST

START_TEST(test_login_cookie_roundtrip)
{
	struct master_key mk = mk_of(7);
	char longest[LOGIN_RETURN_TO_MAX + 1], *v = NULL;
	struct login_cookie in, out;
	/* The longest return_to there is, with UTF-8 and a space as /login takes them. */
	memset(longest, 'r', LOGIN_RETURN_TO_MAX);
	memcpy(longest, "/caf\xc3\xa9 x?", 9);
	longest[LOGIN_RETURN_TO_MAX] = '\0';
	in = lc_of(3, NOW + 300, longest);
	ck_assert_int_eq(login_cookie_seal(&mk, "consentd_login_030303030303", &in, NOW, &v), CS_OK);
	ck_assert_uint_eq(strlen(v), LOGIN_COOKIE_VALUE_MAX);   /* the largest there is */
	for (const char *p = v; *p; p++)
		ck_assert(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", *p));
	ck_assert_int_eq(open_at(&mk, "consentd_login_030303030303", v, NOW + 10, &out), CS_OK);
	ck_assert_int_eq(memcmp(in.state_hash, out.state_hash, 32), 0);
	ck_assert_str_eq(in.nonce, out.nonce);
	ck_assert_str_eq(in.verifier, out.verifier);
	ck_assert_str_eq(in.return_to, out.return_to);
	ck_assert_int_eq(out.max_age, 60);
	ck_assert_int_eq(out.expires_at, NOW + 300);
	/* Not in the clear: nothing of the nonce, verifier or return_to shows. */
	ck_assert_ptr_null(strstr(v, "nnnnnnnn"));
	ck_assert_ptr_null(strstr(v, "rrrrrrrr"));
	login_cookie_clear(&out);
	free(v);
	/* The shortest: return_to "/", no max_age. */
	in = lc_of(4, NOW + 300, "/");
	in.max_age = -1;
	ck_assert_int_eq(login_cookie_seal(&mk, "n", &in, NOW, &v), CS_OK);
	ck_assert_int_eq(open_at(&mk, "n", v, NOW, &out), CS_OK);
	ck_assert_int_eq(out.max_age, -1);
	ck_assert_str_eq(out.return_to, "/");
	free(v);
	login_cookie_clear(NULL);
}
END_TEST

START_TEST(test_login_cookie_attacker_opens_nothing)
{
	struct master_key mk = mk_of(7), other = mk_of(8);
	struct login_cookie in = lc_of(3, NOW + 300, "/me"), out;
	char *v = NULL, *w;
	size_t n;
	ck_assert_int_eq(login_cookie_seal(&mk, "consentd_login_a", &in, NOW, &v), CS_OK);
	n = strlen(v);
	/* Another name (a cookie moved to another state's name), another master key. */
	ck_assert_int_eq(open_at(&mk, "consentd_login_b", v, NOW, &out), CS_ECRYPTO);
	ck_assert_int_eq(open_at(&other, "consentd_login_a", v, NOW, &out), CS_ECRYPTO);
	/* Every character changed, one at a time: nothing opens. */
	w = strdup(v);
	ck_assert_ptr_nonnull(w);
	for (size_t i = 0; i < n; i++) {
		char keep = w[i];
		w[i] = keep == 'A' ? 'B' : 'A';
		enum cs_err e = open_at(&mk, "consentd_login_a", w, NOW, &out);
		/* The last character's spare bits may not change the bytes. */
		ck_assert_msg(e == CS_ECRYPTO || (i == n - 1 && e == CS_OK), "character %zu: %d", i, e);
		w[i] = keep;
	}
	/* Cut, extended, or not base64url. */
	ck_assert_int_eq(login_cookie_open(&mk, "consentd_login_a", v, n - 4, NOW, &out), CS_ECRYPTO);
	ck_assert_int_eq(login_cookie_open(&mk, "consentd_login_a", v, n - 1, NOW, &out), CS_EINVAL);
	ck_assert_int_eq(login_cookie_open(&mk, "consentd_login_a", v, 0, NOW, &out), CS_EINVAL);
	ck_assert_int_eq(login_cookie_open(&mk, "consentd_login_a", v, 217, NOW, &out), CS_EINVAL);
	w[5] = '+';
	ck_assert_int_eq(open_at(&mk, "consentd_login_a", w, NOW, &out), CS_EINVAL);
	w[5] = '=';
	ck_assert_int_eq(open_at(&mk, "consentd_login_a", w, NOW, &out), CS_EINVAL);
	free(w);
	char big[LOGIN_COOKIE_VALUE_MAX + 5];
	memset(big, 'A', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	ck_assert_int_eq(open_at(&mk, "consentd_login_a", big, NOW, &out), CS_EINVAL);
	/* A name longer than any of ours is refused, not cut. */
	char longname[LOGIN_COOKIE_NAME_MAX + 8];
	memset(longname, 'x', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	ck_assert_int_eq(open_at(&mk, longname, v, NOW, &out), CS_EINVAL);
	free(v);
}
END_TEST

START_TEST(test_login_cookie_days)
{
	/* The key is the day's: a cookie opens the day it was sealed, the day
	 * after, and the day before (a node whose clock is behind); not further. */
	struct master_key mk = mk_of(7);
	struct login_cookie in = lc_of(3, NOW + 300, "/me"), out;
	char *v = NULL;
	ck_assert_int_eq(login_cookie_seal(&mk, "n", &in, NOW, &v), CS_OK);
	ck_assert_int_eq(open_at(&mk, "n", v, NOW + DAY, &out), CS_OK);
	ck_assert_int_eq(open_at(&mk, "n", v, NOW - DAY, &out), CS_OK);
	ck_assert_int_eq(open_at(&mk, "n", v, NOW + 2 * DAY, &out), CS_ECRYPTO);
	ck_assert_int_eq(open_at(&mk, "n", v, NOW - 2 * DAY, &out), CS_ECRYPTO);
	free(v);
	/* Sealed under another day's key than the one it claims: two days off. */
	ck_assert_int_eq(login_cookie_seal(&mk, "n", &in, NOW + 2 * DAY, &v), CS_OK);
	ck_assert_int_eq(open_at(&mk, "n", v, NOW, &out), CS_ECRYPTO);
	free(v);
}
END_TEST

START_TEST(test_login_cookie_seal_refuses_bad_states)
{
	struct master_key mk = mk_of(7);
	struct login_cookie lc;
	char *v = NULL;
	static const char *const bad_rt[] = { "", "me", "//evil.example", "/\\evil", "/a\tb",
	    "/a\x7f" };
	for (size_t i = 0; i < sizeof bad_rt / sizeof bad_rt[0]; i++) {
		lc = lc_of(1, NOW + 300, bad_rt[i]);
		ck_assert_int_eq(login_cookie_seal(&mk, "n", &lc, NOW, &v), CS_EINVAL);
	}
	lc = lc_of(1, NOW + 300, "/me");
	lc.nonce[5] = '+';
	ck_assert_int_eq(login_cookie_seal(&mk, "n", &lc, NOW, &v), CS_EINVAL);
	lc = lc_of(1, NOW + 300, "/me");
	lc.verifier[42] = '\0';
	ck_assert_int_eq(login_cookie_seal(&mk, "n", &lc, NOW, &v), CS_EINVAL);
	lc = lc_of(1, NOW + 300, "/me");
	lc.max_age = -2;
	ck_assert_int_eq(login_cookie_seal(&mk, "n", &lc, NOW, &v), CS_EINVAL);
	ck_assert_ptr_null(v);
}
END_TEST

/* A plaintext as login_cookie_seal writes it, for login_cookie_parse. */
static size_t plain_of(unsigned char *p, const char *rt)
{
	size_t n = 1 + 8 + 8 + 32 + 2 * SESSION_TOKEN_LEN;
	memset(p, 0, n);
	p[0] = 1;
	p[8] = 100;                               /* expires_at 100 */
	memset(p + 9, 0xff, 8);                   /* max_age -1 */
	memset(p + 17, 9, 32);
	memset(p + 49, 'n', 2 * SESSION_TOKEN_LEN);
	memcpy(p + n, rt, strlen(rt));
	return n + strlen(rt);
}

START_TEST(test_login_cookie_parse_bad_plaintext)
{
	unsigned char p[1024];
	struct login_cookie out;
	size_t n = plain_of(p, "/me");
	ck_assert_int_eq(login_cookie_parse(p, n, &out), CS_OK);
	ck_assert_int_eq(out.expires_at, 100);
	ck_assert_int_eq(out.max_age, -1);
	ck_assert_str_eq(out.return_to, "/me");
	/* Every length up to an empty return_to, a version 2, a bad nonce or
	 * verifier character, max_age below -1, bad return_tos, one longer than 512. */
	for (size_t k = 0; k + 3 <= n; k++)
		ck_assert_int_eq(login_cookie_parse(p, k, &out), CS_EINVAL);
	p[0] = 2;
	ck_assert_int_eq(login_cookie_parse(p, n, &out), CS_EINVAL);
	n = plain_of(p, "/me");
	p[60] = '.';
	ck_assert_int_eq(login_cookie_parse(p, n, &out), CS_EINVAL);
	n = plain_of(p, "/me");
	p[49 + SESSION_TOKEN_LEN + 3] = 0;
	ck_assert_int_eq(login_cookie_parse(p, n, &out), CS_EINVAL);
	n = plain_of(p, "/me");
	p[16] = 0xfe;                              /* max_age -2 */
	ck_assert_int_eq(login_cookie_parse(p, n, &out), CS_EINVAL);
	static const char *const bad_rt[] = { "me", "//x", "/\\x", "/a\nb" };
	for (size_t i = 0; i < sizeof bad_rt / sizeof bad_rt[0]; i++) {
		n = plain_of(p, bad_rt[i]);
		ck_assert_int_eq(login_cookie_parse(p, n, &out), CS_EINVAL);
	}
	n = plain_of(p, "/a");
	p[n - 1] = '\0';                           /* a NUL inside return_to */
	ck_assert_int_eq(login_cookie_parse(p, n, &out), CS_EINVAL);
	n = plain_of(p, "/");
	memset(p + n, 'a', LOGIN_RETURN_TO_MAX);
	ck_assert_int_eq(login_cookie_parse(p, n + LOGIN_RETURN_TO_MAX - 1, &out), CS_OK);
	ck_assert_int_eq(login_cookie_parse(p, n + LOGIN_RETURN_TO_MAX, &out), CS_EINVAL);
}
END_TEST

/* A Cookie header of cookies called consentd_login_<i>, sealed to expire at
 * NOW + exp[i] (0: a value that does not open). */
static void header_of(struct buf *h, const struct master_key *mk, const int *exp, size_t n)
{
	buf_init(h, COOKIE_MAX_HEADER);
	ck_assert_int_eq(buf_puts(h, "consentd_session=abc"), CS_OK);
	for (size_t i = 0; i < n; i++) {
		char name[32], *v = NULL;
		ck_assert_int_eq(str_fmt(name, sizeof name, "consentd_login_%zu", i), CS_OK);
		struct login_cookie lc = lc_of((unsigned char)i, NOW + exp[i], "/me");
		if (exp[i] == 0)
			v = strdup("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
		else
			ck_assert_int_eq(login_cookie_seal(mk, name, &lc, NOW, &v), CS_OK);
		ck_assert_ptr_nonnull(v);
		ck_assert_int_eq(buf_printf(h, "; %s=%s", name, v), CS_OK);
		free(v);
	}
}

static void expect_drop(const int *exp, size_t n, const char *want)
{
	struct master_key mk = mk_of(7);
	struct config cfg = cfg_of(false);
	char drop[LOGIN_COOKIES_SEEN][LOGIN_COOKIE_NAME_MAX];
	size_t nd = 99;
	struct buf h, got;
	header_of(&h, &mk, exp, n);
	login_cookie_stale(&mk, &cfg, h.data, NOW, drop, &nd);
	buf_init(&got, 4096);
	for (size_t i = 0; i < nd; i++)
		ck_assert_int_eq(buf_printf(&got, "%s%s", i ? " " : "", drop[i] + strlen("consentd_login_")), CS_OK);
	ck_assert_str_eq(got.data ? got.data : "", want);
	buf_clear(&got);
	buf_clear(&h);
}

START_TEST(test_login_cookie_stale_keeps_room)
{
	/* Three are kept (the new start makes four); a fourth goes, the soonest
	 * to expire; the unreadable and the expired go before any live one. */
	expect_drop((const int[]){ 100, 200, 300 }, 3, "");
	expect_drop((const int[]){ 200, 100, 300, 250 }, 4, "1");
	expect_drop((const int[]){ 200, 100, 0, 300, 250 }, 5, "2 1");
	expect_drop((const int[]){ 200, -5, 300, 250 }, 4, "1");
	/* A browser sending many: only the first LOGIN_COOKIES_SEEN are looked at. */
	int many[20];
	for (int i = 0; i < 20; i++)
		many[i] = 100 + i;
	expect_drop(many, 20, "0 1 2 3 4 5 6 7 8 9 10 11 12");
	/* No header, or one that is not read: nothing to drop. */
	struct master_key mk = mk_of(7);
	struct config cfg = cfg_of(false);
	char drop[LOGIN_COOKIES_SEEN][LOGIN_COOKIE_NAME_MAX];
	size_t nd = 99;
	login_cookie_stale(&mk, &cfg, NULL, NOW, drop, &nd);
	ck_assert_uint_eq(nd, 0);
	nd = 99;
	login_cookie_stale(&mk, &cfg, "consentd_login_1=a\x01", NOW, drop, &nd);
	ck_assert_uint_eq(nd, 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("login");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_login_pkce_challenge_s256);
	tcase_add_test(tc, test_login_begin_no_idp);
	tcase_add_test(tc, test_login_cookie_names);
	tcase_add_test(tc, test_login_cookie_roundtrip);
	tcase_add_test(tc, test_login_cookie_attacker_opens_nothing);
	tcase_add_test(tc, test_login_cookie_days);
	tcase_add_test(tc, test_login_cookie_seal_refuses_bad_states);
	tcase_add_test(tc, test_login_cookie_parse_bad_plaintext);
	tcase_add_test(tc, test_login_cookie_stale_keeps_room);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
