/* test_forwarded.c -- the client address behind trusted proxies: prefixes,
 * the strict X-Forwarded-For and Forwarded (RFC 7239) parsers with their bad
 * input (garbage, brackets, ports, obfuscated names, too many hops, empty),
 * and the right-most-untrusted walk, including the spoofing attempts it must
 * refuse. */
#include <string.h>

#include "testutil.h"
#include "buf.h"
#include "forwarded.h"

static char hops[FORWARDED_MAX_HOPS][FORWARDED_ADDR_LEN];

/* Parses h; expects success with the n entries want (NULL-terminated). */
static void expect_parse(enum forwarded_header k, const char *h, const char *const *want)
{
	size_t n = 99, i = 0;
	ck_assert_msg(forwarded_parse(k, h, hops, &n), "refused: [%s]", h);
	for (; want[i] != NULL; i++) {
		ck_assert_msg(i < n, "[%s]: only %zu entries", h, n);
		ck_assert_str_eq(hops[i], want[i]);
	}
	ck_assert_uint_eq(n, i);
}

static void expect_refused(enum forwarded_header k, const char *h)
{
	size_t n = 99;
	ck_assert_msg(!forwarded_parse(k, h, hops, &n), "accepted: [%s]", h);
	ck_assert_uint_eq(n, 0);
}

START_TEST(test_forwarded_prefix_parse)
{
	struct net_prefix p;
	ck_assert(net_prefix_parse("10.0.0.0/8", &p));
	ck_assert_uint_eq(p.bits, 104);
	ck_assert(net_prefix_parse("192.0.2.7", &p));
	ck_assert_uint_eq(p.bits, 128);
	ck_assert(net_prefix_parse("2001:db8::/32", &p));
	ck_assert_uint_eq(p.bits, 32);
	ck_assert(net_prefix_parse("::1", &p));
	ck_assert(net_prefix_parse("0.0.0.0/0", &p));
	const char *const bad[] = { "", "/8", "10.0.0.1/8", "10.0.0.0/33", "10.0.0.0/08",
		"10.0.0.0/", "10.0.0.0/8/8", "2001:db8::/129", "[::1]", "::1%eth0", "10.0.0.1:80",
		"localhost", "10.0.0", "010.0.0.1", "10.0.0.0/-1", "10.0.0.0/ 8", " 10.0.0.1",
		"2001:db8::1/32", NULL };
	for (size_t i = 0; bad[i] != NULL; i++)
		ck_assert_msg(!net_prefix_parse(bad[i], &p), "accepted %s", bad[i]);
}
END_TEST

START_TEST(test_forwarded_prefix_match)
{
	struct net_prefix v[2];
	ck_assert(net_prefix_parse("10.0.0.0/8", &v[0]));
	ck_assert(net_prefix_parse("2001:db8:1::/48", &v[1]));
	ck_assert(net_prefix_match(v, 2, "10.200.3.4"));
	ck_assert(net_prefix_match(v, 2, "::ffff:10.1.2.3"));      /* IPv4-mapped */
	ck_assert(net_prefix_match(v, 2, "2001:db8:1:ffff::9"));
	ck_assert(!net_prefix_match(v, 2, "11.0.0.1"));
	ck_assert(!net_prefix_match(v, 2, "2001:db8:2::1"));
	ck_assert(!net_prefix_match(v, 2, "-"));
	ck_assert(!net_prefix_match(v, 2, "garbage"));
	ck_assert(!net_prefix_match(v, 0, "10.0.0.1"));
	ck_assert(net_prefix_parse("192.0.2.128/25", &v[0]));
	ck_assert(net_prefix_match(v, 1, "192.0.2.200"));
	ck_assert(!net_prefix_match(v, 1, "192.0.2.127"));
}
END_TEST

START_TEST(test_forwarded_xff_parse)
{
	expect_parse(FORWARDED_XFF, "203.0.113.7", (const char *[]){ "203.0.113.7", NULL });
	expect_parse(FORWARDED_XFF, " 203.0.113.7 ,\t10.0.0.2,10.0.0.1 ",
	    (const char *[]){ "203.0.113.7", "10.0.0.2", "10.0.0.1", NULL });
	/* IPv6 bare or in brackets, ports, IPv4-mapped written as IPv4, unknown. */
	expect_parse(FORWARDED_XFF, "2001:DB8::1, [2001:db8::2]:443, 198.51.100.1:8080",
	    (const char *[]){ "2001:db8::1", "2001:db8::2", "198.51.100.1", NULL });
	expect_parse(FORWARDED_XFF, "::ffff:192.0.2.1, unknown",
	    (const char *[]){ "192.0.2.1", "", NULL });
}
END_TEST

START_TEST(test_forwarded_xff_bad_input)
{
	char many[FORWARDED_MAX_HOPS * 12 + 16];
	struct buf b;
	const char *const bad[] = { "", " ", ",", "1.2.3.4,", ",1.2.3.4", "1.2.3.4,,5.6.7.8",
		"garbage", "1.2.3.4 5.6.7.8", "1.2.3.4;5.6.7.8", "1.2.3.4:", "1.2.3.4:123456",
		"1.2.3.4:http", "[1.2.3.4]", "[2001:db8::1", "2001:db8::1]", "[2001:db8::1]x",
		"[2001:db8::1]:", "fe80::1%eth0", "[fe80::1%25eth0]", "01.2.3.4", "1.2.3",
		"1.2.3.4.5", "256.1.1.1", "_hidden", "\"1.2.3.4\"", "1.2.3.4\r\n", "for=1.2.3.4",
		"1.2.3.4\x01", NULL };
	for (size_t i = 0; bad[i] != NULL; i++)
		expect_refused(FORWARDED_XFF, bad[i]);
	expect_refused(FORWARDED_XFF, NULL);
	/* One hop more than FORWARDED_MAX_HOPS, and a header past FORWARDED_MAX_LEN. */
	buf_init(&b, sizeof many);
	for (int i = 0; i <= FORWARDED_MAX_HOPS; i++)
		ck_assert_int_eq(buf_printf(&b, "%s10.0.0.%d", i ? "," : "", i), CS_OK);
	expect_refused(FORWARDED_XFF, b.data);
	buf_clear(&b);
	buf_init(&b, FORWARDED_MAX_LEN + 64);
	ck_assert_int_eq(buf_puts(&b, "1.2.3.4"), CS_OK);
	while (b.len <= FORWARDED_MAX_LEN)
		ck_assert_int_eq(buf_puts(&b, " "), CS_OK);
	expect_refused(FORWARDED_XFF, b.data);
	buf_clear(&b);
}
END_TEST

START_TEST(test_forwarded_rfc7239_parse)
{
	/* RFC 7239 section 4's examples. */
	expect_parse(FORWARDED_RFC7239, "for=\"_gazonk\"", (const char *[]){ "", NULL });
	expect_parse(FORWARDED_RFC7239, "For=\"[2001:db8:cafe::17]:4711\"",
	    (const char *[]){ "2001:db8:cafe::17", NULL });
	expect_parse(FORWARDED_RFC7239, "for=192.0.2.60;proto=http;by=203.0.113.43",
	    (const char *[]){ "192.0.2.60", NULL });
	expect_parse(FORWARDED_RFC7239, "for=192.0.2.43, for=198.51.100.17",
	    (const char *[]){ "192.0.2.43", "198.51.100.17", NULL });
	expect_parse(FORWARDED_RFC7239, "for=\"192.0.2.43:47011\" , for=unknown;by=_x ,proto=https",
	    (const char *[]){ "192.0.2.43", "", "", NULL });
	expect_parse(FORWARDED_RFC7239, "for=\"[2001:db8::1]:_port\";host=\"a\\\"b\"",
	    (const char *[]){ "2001:db8::1", NULL });
}
END_TEST

START_TEST(test_forwarded_rfc7239_bad_input)
{
	const char *const bad[] = { "", " ", ",", "for=", "for", "=1.2.3.4", "for=1.2.3.4,",
		"for=1.2.3.4,,for=5.6.7.8", "for=2001:db8::1", "for=\"2001:db8::1\"",
		"for=[2001:db8::1]", "for=\"[2001:db8::1\"", "for=1.2.3.4:80", "for=\"1.2.3.4:\"",
		"for=\"1.2.3.4:123456\"", "for=\"1.2.3.4", "for=\"a\\", "for=1.2.3.4;for=5.6.7.8",
		"for=garbage", "for=_", "for=\"_a b\"", "for=1.2.3.4 by=5.6.7.8",
		"for=\"1.2.3.4\"x", "for=\"\x01\"", "for=\"fe80::1%eth0\"",
		"for=\"[fe80::1%25eth0]\"", "1.2.3.4", NULL };
	struct buf b;
	for (size_t i = 0; bad[i] != NULL; i++)
		expect_refused(FORWARDED_RFC7239, bad[i]);
	buf_init(&b, 4096);
	for (int i = 0; i <= FORWARDED_MAX_HOPS; i++)
		ck_assert_int_eq(buf_printf(&b, "%sfor=10.0.0.%d", i ? "," : "", i), CS_OK);
	expect_refused(FORWARDED_RFC7239, b.data);
	buf_clear(&b);
}
END_TEST

/* The walk: right to left through trusted hops to the first untrusted one. */
START_TEST(test_forwarded_client_walk)
{
	struct net_prefix t[2];
	char out[FORWARDED_ADDR_LEN];
	ck_assert(net_prefix_parse("127.0.0.1", &t[0]));
	ck_assert(net_prefix_parse("10.0.0.0/8", &t[1]));
	/* Trusted peer, client then proxies. */
	ck_assert(forwarded_client(t, 2, FORWARDED_XFF, "127.0.0.1", "203.0.113.9, 10.1.1.1", out));
	ck_assert_str_eq(out, "203.0.113.9");
	/* SECURITY: what the client wrote left of itself is never taken. */
	ck_assert(forwarded_client(t, 2, FORWARDED_XFF, "127.0.0.1", "1.1.1.1, 203.0.113.9", out));
	ck_assert_str_eq(out, "203.0.113.9");
	/* SECURITY: an untrusted peer's header is not read at all. */
	ck_assert(!forwarded_client(t, 2, FORWARDED_XFF, "198.51.100.4", "203.0.113.9", out));
	ck_assert_str_eq(out, "198.51.100.4");
	/* No trusted proxies configured: the peer, whatever it says. */
	ck_assert(!forwarded_client(t, 0, FORWARDED_XFF, "127.0.0.1", "203.0.113.9", out));
	ck_assert_str_eq(out, "127.0.0.1");
	/* Absent, malformed: the proxy itself. */
	ck_assert(!forwarded_client(t, 2, FORWARDED_XFF, "127.0.0.1", NULL, out));
	ck_assert_str_eq(out, "127.0.0.1");
	ck_assert(!forwarded_client(t, 2, FORWARDED_XFF, "127.0.0.1", "203.0.113.9, junk", out));
	ck_assert_str_eq(out, "127.0.0.1");
	ck_assert(!forwarded_client(t, 2, FORWARDED_XFF, "127.0.0.1", "", out));
	ck_assert_str_eq(out, "127.0.0.1");
	/* A hop that names no address: the trusted hop that wrote it. */
	ck_assert(forwarded_client(t, 2, FORWARDED_XFF, "127.0.0.1", "1.1.1.1, unknown, 10.0.0.5",
	    out));
	ck_assert_str_eq(out, "10.0.0.5");
	ck_assert(!forwarded_client(t, 2, FORWARDED_RFC7239, "127.0.0.1", "for=_hidden", out));
	ck_assert_str_eq(out, "127.0.0.1");
	/* Every hop trusted: the left-most. */
	ck_assert(forwarded_client(t, 2, FORWARDED_XFF, "127.0.0.1", "10.0.0.9, 10.0.0.8", out));
	ck_assert_str_eq(out, "10.0.0.9");
	/* Forwarded, and the right header only: an X-Forwarded-For text is garbage there. */
	ck_assert(forwarded_client(t, 2, FORWARDED_RFC7239, "10.2.3.4",
	    "for=\"[2001:db8::5]:1234\";proto=https, for=10.0.0.1", out));
	ck_assert_str_eq(out, "2001:db8::5");
	ck_assert(!forwarded_client(t, 2, FORWARDED_RFC7239, "10.2.3.4", "203.0.113.9", out));
	ck_assert_str_eq(out, "10.2.3.4");
}
END_TEST

/* S3 (issue 28): a client's own malformed text left of what its proxy appended, or more
 * hops than are read, does not make its request the proxy's own (whose bucket and pending
 * sign-ins everyone behind the proxy would then share). */
START_TEST(test_forwarded_client_malformed_left_of_the_proxy)
{
	struct net_prefix t[2];
	char out[FORWARDED_ADDR_LEN];
	ck_assert(net_prefix_parse("127.0.0.1", &t[0]));
	ck_assert(net_prefix_parse("10.0.0.0/8", &t[1]));
	ck_assert(forwarded_client(t, 2, FORWARDED_XFF, "127.0.0.1", "junk]], 203.0.113.9", out));
	ck_assert_str_eq(out, "203.0.113.9");
	ck_assert(forwarded_client(t, 2, FORWARDED_XFF, "127.0.0.1",
	    "1.1.1.1, two words, 203.0.113.9, 10.1.1.1", out));
	ck_assert_str_eq(out, "203.0.113.9");
	ck_assert(forwarded_client(t, 2, FORWARDED_XFF, "127.0.0.1", ",,, 203.0.113.9", out));
	ck_assert_str_eq(out, "203.0.113.9");
	/* 40 hops the client wrote, then its proxy's entry: the right end is read. */
	char many[1024] = "";
	size_t k = 0;
	for (int i = 0; i < 40; i++)
		k += (size_t)snprintf(many + k, sizeof many - k, "192.0.2.%d, ", i);
	snprintf(many + k, sizeof many - k, "203.0.113.9");
	ck_assert(forwarded_client(t, 2, FORWARDED_XFF, "127.0.0.1", many, out));
	ck_assert_str_eq(out, "203.0.113.9");
	/* Forwarded: an unbalanced quote the client opened swallows nothing of the proxy's. */
	ck_assert(forwarded_client(t, 2, FORWARDED_RFC7239, "127.0.0.1",
	    "for=\"[2001:db8::1, for=203.0.113.9", out));
	ck_assert_str_eq(out, "203.0.113.9");
	ck_assert(forwarded_client(t, 2, FORWARDED_RFC7239, "127.0.0.1",
	    "for=\"a,b\";by=x, for=\"[2001:db8::7]:80\", for=10.0.0.2", out));
	ck_assert_str_eq(out, "2001:db8::7");
	/* Junk the trusted hop 10.0.0.9 would have written: that hop. */
	ck_assert(forwarded_client(t, 2, FORWARDED_XFF, "127.0.0.1", "junk, 10.0.0.9, 10.0.0.8", out));
	ck_assert_str_eq(out, "10.0.0.9");
	/* Junk in the right-most entry, which the trusted peer wrote: the peer, as before. */
	ck_assert(!forwarded_client(t, 2, FORWARDED_XFF, "127.0.0.1", "203.0.113.9, junk", out));
	ck_assert_str_eq(out, "127.0.0.1");
	ck_assert(!forwarded_client(t, 2, FORWARDED_XFF, "127.0.0.1", ",", out));
	ck_assert_str_eq(out, "127.0.0.1");
}
END_TEST

static Suite *forwarded_suite(void)
{
	Suite *s = suite_create("forwarded");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_forwarded_prefix_parse);
	tcase_add_test(tc, test_forwarded_prefix_match);
	tcase_add_test(tc, test_forwarded_xff_parse);
	tcase_add_test(tc, test_forwarded_xff_bad_input);
	tcase_add_test(tc, test_forwarded_rfc7239_parse);
	tcase_add_test(tc, test_forwarded_rfc7239_bad_input);
	tcase_add_test(tc, test_forwarded_client_walk);
	tcase_add_test(tc, test_forwarded_client_malformed_left_of_the_proxy);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(forwarded_suite());
}
