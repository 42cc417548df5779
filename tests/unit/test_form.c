/* test_form.c -- the form-urlencoded parser and percent-coding: every happy
 * shape a browser or OAuth client sends, and every malformed or hostile byte
 * sequence an attacker can put in a query string or a body. */
#include <stdint.h>
#include <string.h>

#include "testutil.h"
#include "arena.h"
#include "buf.h"
#include "form.h"

/* Parses a NUL-terminated literal. */
static enum cs_err parse(struct form *f, const char *s)
{
	return form_parse(f, s, strlen(s));
}

/* Asserts that s is refused with want and that the form is left empty. */
static void parse_fails(const char *s, size_t len, enum cs_err want)
{
	struct form f;
	ck_assert_int_eq(form_parse(&f, s, len), want);
	ck_assert_uint_eq(f.n, 0);
	ck_assert_ptr_null(f.block);                    /* wiped and freed */
	ck_assert_ptr_null(form_get(&f, "a"));
	ck_assert_ptr_null(form_get(&f, "b"));
	form_clear(&f);
}

#define PARSE_FAILS(lit, want) parse_fails((lit), sizeof(lit) - 1, (want))

/* --- happy paths --------------------------------------------------------- */

START_TEST(test_form_parse_two_pairs)
{
	struct form f;
	ck_assert_int_eq(parse(&f, "a=1&b=2"), CS_OK);
	ck_assert_uint_eq(f.n, 2);
	ck_assert_str_eq(f.p[0].name, "a");
	ck_assert_str_eq(f.p[0].value, "1");
	ck_assert_uint_eq(f.p[0].value_len, 1);
	ck_assert_str_eq(form_get(&f, "b"), "2");
	ck_assert_ptr_null(form_get(&f, "c"));
	ck_assert_uint_eq(form_count(&f, "c"), 0);
	form_clear(&f);
	ck_assert_uint_eq(f.n, 0);
}
END_TEST

START_TEST(test_form_parse_plus_is_space)
{
	struct form f;
	ck_assert_int_eq(parse(&f, "q=hello+world&r=a%2Bb"), CS_OK);
	ck_assert_str_eq(form_get(&f, "q"), "hello world");
	ck_assert_str_eq(form_get(&f, "r"), "a+b");
	form_clear(&f);
}
END_TEST

START_TEST(test_form_parse_percent_escapes)
{
	struct form f;
	ck_assert_int_eq(parse(&f, "q=a%20b&r=%e2%80%94&%73cope=x%3Dy%26z"), CS_OK);
	ck_assert_str_eq(form_get(&f, "q"), "a b");
	ck_assert_str_eq(form_get(&f, "r"), "\xe2\x80\x94");
	ck_assert_uint_eq(f.p[1].value_len, 3);
	ck_assert_str_eq(form_get(&f, "scope"), "x=y&z");
	form_clear(&f);
}
END_TEST

START_TEST(test_form_parse_empty_value)
{
	struct form f;
	ck_assert_int_eq(parse(&f, "a="), CS_OK);
	ck_assert_uint_eq(f.n, 1);
	ck_assert_str_eq(form_get(&f, "a"), "");
	ck_assert_uint_eq(f.p[0].value_len, 0);
	form_clear(&f);
}
END_TEST

START_TEST(test_form_parse_bare_name)
{
	struct form f;
	ck_assert_int_eq(parse(&f, "a&b=2"), CS_OK);
	ck_assert_uint_eq(f.n, 2);
	ck_assert_ptr_nonnull(form_get(&f, "a"));
	ck_assert_str_eq(form_get(&f, "a"), "");
	ck_assert_uint_eq(form_count(&f, "a"), 1);
	ck_assert_str_eq(form_get(&f, "b"), "2");
	form_clear(&f);
}
END_TEST

START_TEST(test_form_parse_empty_pairs_skipped)
{
	struct form f;
	ck_assert_int_eq(parse(&f, "a=1&&b=2"), CS_OK);
	ck_assert_uint_eq(f.n, 2);
	ck_assert_str_eq(form_get(&f, "a"), "1");
	ck_assert_str_eq(form_get(&f, "b"), "2");
	form_clear(&f);
	ck_assert_int_eq(parse(&f, "a=1&"), CS_OK);
	ck_assert_uint_eq(f.n, 1);
	ck_assert_str_eq(form_get(&f, "a"), "1");
	form_clear(&f);
	ck_assert_int_eq(parse(&f, "&&&a=1"), CS_OK);
	ck_assert_uint_eq(f.n, 1);
	form_clear(&f);
}
END_TEST

START_TEST(test_form_parse_empty_input)
{
	struct form f;
	ck_assert_int_eq(parse(&f, ""), CS_OK);
	ck_assert_uint_eq(f.n, 0);
	form_clear(&f);
	ck_assert_int_eq(parse(&f, "&"), CS_OK);
	ck_assert_uint_eq(f.n, 0);
	form_clear(&f);
}
END_TEST

START_TEST(test_form_parse_equals_in_value)
{
	struct form f;
	ck_assert_int_eq(parse(&f, "a=b=c=="), CS_OK);
	ck_assert_str_eq(form_get(&f, "a"), "b=c==");
	form_clear(&f);
}
END_TEST

START_TEST(test_form_parse_respects_len)
{
	struct form f;
	const char s[] = "a=1&b=2";
	ck_assert_int_eq(form_parse(&f, s, 3), CS_OK);    /* only "a=1" */
	ck_assert_uint_eq(f.n, 1);
	ck_assert_ptr_null(form_get(&f, "b"));
	form_clear(&f);
	/* An escape cut by len is bad even if the bytes after len would complete it. */
	ck_assert_int_eq(form_parse(&f, "a=%41", 4), CS_EINVAL);
	ck_assert_uint_eq(f.n, 0);
	form_clear(&f);
}
END_TEST

START_TEST(test_form_parse_duplicates_kept)
{
	struct form f;
	ck_assert_int_eq(parse(&f, "a=1&b=x&a=2&a="), CS_OK);
	ck_assert_uint_eq(f.n, 4);
	ck_assert_uint_eq(form_count(&f, "a"), 3);
	ck_assert_uint_eq(form_count(&f, "b"), 1);
	ck_assert_str_eq(form_get(&f, "a"), "1");     /* the first one */
	form_clear(&f);
}
END_TEST

START_TEST(test_form_parse_max_params_ok)
{
	struct form f;
	struct buf b;
	buf_init(&b, 4096);
	for (int i = 0; i < FORM_MAX_PARAMS; i++)
		ck_assert_int_eq(buf_printf(&b, "p%d=%d&", i, i), CS_OK);
	ck_assert_int_eq(form_parse(&f, b.data, b.len), CS_OK);
	ck_assert_uint_eq(f.n, FORM_MAX_PARAMS);
	ck_assert_str_eq(form_get(&f, "p63"), "63");
	form_clear(&f);
	buf_clear(&b);
}
END_TEST

START_TEST(test_form_parse_too_many_params)
{
	struct form f;
	struct buf b;
	buf_init(&b, 4096);
	for (int i = 0; i <= FORM_MAX_PARAMS; i++)
		ck_assert_int_eq(buf_printf(&b, "p%d=%d&", i, i), CS_OK);
	ck_assert_int_eq(form_parse(&f, b.data, b.len), CS_ETOOBIG);
	ck_assert_uint_eq(f.n, 0);
	ck_assert_ptr_null(form_get(&f, "p0"));
	form_clear(&f);
	buf_clear(&b);
}
END_TEST

/* Every name and value lies inside f's one block, NUL-terminated there. */
static void assert_in_block(const struct form *f)
{
	for (size_t i = 0; i < f->n; i++) {
		const char *lo = f->block, *hi = f->block + f->block_size;
		ck_assert(f->p[i].name >= lo && f->p[i].name + strlen(f->p[i].name) < hi);
		ck_assert(f->p[i].value >= lo && f->p[i].value + f->p[i].value_len < hi);
		ck_assert_uint_eq(strlen(f->p[i].value), f->p[i].value_len);
	}
}

START_TEST(test_form_parse_one_block)
{
	struct form f;
	ck_assert_int_eq(parse(&f, "grant_type=x&subject_token=a%2Eb.c&scope=read+write&e="), CS_OK);
	ck_assert_ptr_nonnull(f.block);
	ck_assert_uint_eq(f.n, 4);
	assert_in_block(&f);
	ck_assert_str_eq(form_get(&f, "subject_token"), "a.b.c");
	ck_assert_str_eq(form_get(&f, "scope"), "read write");
	form_clear(&f);
	ck_assert_ptr_null(f.block);
	ck_assert_uint_eq(f.block_size, 0);
	/* Nothing to decode: no block at all. */
	ck_assert_int_eq(parse(&f, ""), CS_OK);
	ck_assert_ptr_null(f.block);
	form_clear(&f);
}
END_TEST

/* The block's worst case: the most pairs, each the shortest (a bare name, so two NULs
 * for one input byte), and the most NUL overhead with '=' and empty values. */
START_TEST(test_form_parse_block_worst_case)
{
	struct form f;
	struct buf b;
	const char *shapes[] = { "a", "a=", "%41", "a=%41" };
	for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
		buf_init(&b, 4096);
		for (int i = 0; i < FORM_MAX_PARAMS; i++)
			ck_assert_int_eq(buf_printf(&b, "%s%s", i ? "&" : "", shapes[k]), CS_OK);
		ck_assert_int_eq(form_parse(&f, b.data, b.len), CS_OK);
		ck_assert_uint_eq(f.n, FORM_MAX_PARAMS);
		assert_in_block(&f);
		form_clear(&f);
		ck_assert_int_eq(buf_append(&b, "&", 1), CS_OK);
		ck_assert_int_eq(buf_puts(&b, shapes[k]), CS_OK);
		ck_assert_int_eq(form_parse(&f, b.data, b.len), CS_ETOOBIG);
		ck_assert_uint_eq(f.n, 0);
		ck_assert_ptr_null(f.block);
		form_clear(&f);
		buf_clear(&b);
	}
}
END_TEST

/* A long value (a token) next to short ones: lengths, not a fixed size, bound the block. */
START_TEST(test_form_parse_long_value)
{
	struct form f;
	struct buf b;
	buf_init(&b, 1 << 20);
	ck_assert_int_eq(buf_puts(&b, "a=1&t="), CS_OK);
	for (int i = 0; i < 100000; i++)
		ck_assert_int_eq(buf_puts(&b, i % 2 ? "%41" : "b"), CS_OK);
	ck_assert_int_eq(buf_puts(&b, "&z"), CS_OK);
	ck_assert_int_eq(form_parse(&f, b.data, b.len), CS_OK);
	ck_assert_uint_eq(f.n, 3);
	assert_in_block(&f);
	ck_assert_uint_eq(strlen(form_get(&f, "t")), 100000);
	ck_assert_str_eq(form_get(&f, "z"), "");
	form_clear(&f);
	buf_clear(&b);
}
END_TEST

/* --- failures ------------------------------------------------------------ */

START_TEST(test_form_parse_bad_escapes)
{
	PARSE_FAILS("a=%", CS_EINVAL);
	PARSE_FAILS("a=%4", CS_EINVAL);
	PARSE_FAILS("a=%zz", CS_EINVAL);
	PARSE_FAILS("a=%4g", CS_EINVAL);
	PARSE_FAILS("a=%g4", CS_EINVAL);
	PARSE_FAILS("a=% 41", CS_EINVAL);
	PARSE_FAILS("%", CS_EINVAL);
	PARSE_FAILS("%zz=1", CS_EINVAL);
	PARSE_FAILS("a=1&b=%", CS_EINVAL);            /* after a good pair: still all or nothing */
	PARSE_FAILS("a=%%41", CS_EINVAL);
}
END_TEST

START_TEST(test_form_parse_nul_refused)
{
	PARSE_FAILS("a=%00", CS_EINVAL);
	PARSE_FAILS("a=x%00y", CS_EINVAL);
	PARSE_FAILS("a%00=1", CS_EINVAL);
	PARSE_FAILS("a=1&b=x\0y", CS_EINVAL);        /* a raw NUL inside len */
}
END_TEST

START_TEST(test_form_parse_invalid_utf8_refused)
{
	PARSE_FAILS("a=%C0%80", CS_EINVAL);           /* overlong NUL */
	PARSE_FAILS("a=%C1%BF", CS_EINVAL);           /* overlong */
	PARSE_FAILS("a=%E0%80%AF", CS_EINVAL);        /* overlong '/' */
	PARSE_FAILS("a=%ED%A0%80", CS_EINVAL);        /* surrogate U+D800 */
	PARSE_FAILS("a=%F4%90%80%80", CS_EINVAL);     /* > U+10FFFF */
	PARSE_FAILS("a=%E2%82", CS_EINVAL);           /* truncated sequence */
	PARSE_FAILS("a=%E2%82x", CS_EINVAL);          /* bad continuation */
	PARSE_FAILS("a=%80", CS_EINVAL);              /* lone continuation */
	PARSE_FAILS("a=%FF", CS_EINVAL);
	PARSE_FAILS("a=\xc0\x80", CS_EINVAL);         /* raw bytes too */
	PARSE_FAILS("a=\xed\xa0\x80", CS_EINVAL);
	PARSE_FAILS("%C0%80=1", CS_EINVAL);           /* in a name */
	PARSE_FAILS("a=ok&b=%F4%90%80%80", CS_EINVAL);
}
END_TEST

START_TEST(test_form_parse_empty_name_refused)
{
	PARSE_FAILS("=x", CS_EINVAL);
	PARSE_FAILS("=", CS_EINVAL);
	PARSE_FAILS("a=1&=x", CS_EINVAL);
}
END_TEST

START_TEST(test_form_parse_failure_reuses_form)
{
	struct form f;
	ck_assert_int_eq(parse(&f, "a=1&b=2&c=%zz"), CS_EINVAL);
	ck_assert_uint_eq(f.n, 0);
	form_clear(&f);                 /* safe after a failure */
	form_clear(NULL);
	ck_assert_int_eq(parse(&f, "a=1"), CS_OK);
	ck_assert_str_eq(form_get(&f, "a"), "1");
	form_clear(&f);
}
END_TEST

/* --- pct_decode / pct_encode ------------------------------------------- */

START_TEST(test_form_pct_decode_plus_kept_without_plus_space)
{
	char *out = NULL;
	size_t n = 0;
	ck_assert_int_eq(pct_decode("a+b%20c%2B", 10, 0, &out, &n), CS_OK);
	ck_assert_str_eq(out, "a+b c+");
	ck_assert_uint_eq(n, 6);
	free(out);
	ck_assert_int_eq(pct_decode("a+b", 3, 1, &out, NULL), CS_OK);
	ck_assert_str_eq(out, "a b");
	free(out);
}
END_TEST

START_TEST(test_form_pct_decode_failures_leave_out_alone)
{
	char *out = (char *)"sentinel";
	size_t n = 99;
	ck_assert_int_eq(pct_decode("%2", 2, 0, &out, &n), CS_EINVAL);
	ck_assert_int_eq(pct_decode("%00", 3, 0, &out, &n), CS_EINVAL);
	ck_assert_int_eq(pct_decode("%ED%BF%BF", 9, 0, &out, &n), CS_EINVAL);
	ck_assert_str_eq(out, "sentinel");
	ck_assert_uint_eq(n, 99);
	ck_assert_int_eq(pct_decode("", 0, 0, &out, &n), CS_OK);
	ck_assert_str_eq(out, "");
	ck_assert_uint_eq(n, 0);
	free(out);
}
END_TEST

START_TEST(test_form_pct_decode_mixed_case_hex)
{
	char *out = NULL;
	ck_assert_int_eq(pct_decode("%c3%A9%C3%a9", 12, 0, &out, NULL), CS_OK);
	ck_assert_str_eq(out, "\xc3\xa9\xc3\xa9");
	free(out);
}
END_TEST

START_TEST(test_form_pct_encode_unreserved_unchanged)
{
	const char *u = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~";
	char *out = NULL;
	ck_assert_int_eq(pct_encode(u, &out), CS_OK);
	ck_assert_str_eq(out, u);
	free(out);
	ck_assert_int_eq(pct_encode("", &out), CS_OK);
	ck_assert_str_eq(out, "");
	free(out);
}
END_TEST

START_TEST(test_form_pct_encode_reserved_escaped)
{
	char *out = NULL;
	ck_assert_int_eq(pct_encode(" +/?#&=%\"<>\\\x7f\x01" "caf\xc3\xa9", &out), CS_OK);
	ck_assert_str_eq(out, "%20%2B%2F%3F%23%26%3D%25%22%3C%3E%5C%7F%01caf%C3%A9");
	free(out);
}
END_TEST

/* Appends code point cp as UTF-8. */
static size_t put_utf8(unsigned cp, char *o)
{
	if (cp < 0x80) { o[0] = (char)cp; return 1; }
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3f)); return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f)); return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

START_TEST(test_form_pct_encode_roundtrip_random_utf8)
{
	uint32_t x = 0x12345678u;               /* xorshift: reproducible */
	char s[256];
	for (int round = 0; round < 2000; round++) {
		size_t n = 0;
		x ^= x << 13; x ^= x >> 17; x ^= x << 5;
		size_t count = x % 40;
		for (size_t k = 0; k < count; k++) {
			x ^= x << 13; x ^= x >> 17; x ^= x << 5;
			unsigned cp;
			switch (x % 4) {
			case 0:  cp = 1 + (x >> 8) % 0x7f; break;                 /* ASCII incl. controls */
			case 1:  cp = 0x80 + (x >> 8) % (0x800 - 0x80); break;
			case 2:
				cp = 0x800 + (x >> 8) % (0x10000 - 0x800);
				if (cp >= 0xd800 && cp <= 0xdfff)
					cp = 0xfffd;
				break;
			default: cp = 0x10000 + (x >> 8) % (0x110000 - 0x10000); break;
			}
			n += put_utf8(cp, s + n);
		}
		s[n] = '\0';
		ck_assert(utf8_valid(s, n));
		char *enc = NULL, *dec = NULL;
		size_t dlen = 0;
		ck_assert_int_eq(pct_encode(s, &enc), CS_OK);
		for (const char *p = enc; *p; p++)         /* only unreserved and escapes */
			ck_assert_msg(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			    "0123456789-._~%", *p) != NULL, "unexpected %02x in %s", (unsigned char)*p, enc);
		ck_assert_int_eq(pct_decode(enc, strlen(enc), 0, &dec, &dlen), CS_OK);
		ck_assert_uint_eq(dlen, n);
		ck_assert_mem_eq(dec, s, n);
		free(dec);
		/* Forms decode '+' as space, but pct_encode never emits a bare '+'. */
		ck_assert_int_eq(pct_decode(enc, strlen(enc), 1, &dec, &dlen), CS_OK);
		ck_assert_str_eq(dec, s);
		free(dec);
		free(enc);
	}
}
END_TEST

START_TEST(test_form_pct_encode_roundtrip_every_ascii_byte)
{
	char s[128];
	for (int i = 1; i < 128; i++)
		s[i - 1] = (char)i;
	s[127] = '\0';
	char *enc = NULL, *dec = NULL;
	ck_assert_int_eq(pct_encode(s, &enc), CS_OK);
	ck_assert_int_eq(pct_decode(enc, strlen(enc), 0, &dec, NULL), CS_OK);
	ck_assert_str_eq(dec, s);
	free(enc);
	free(dec);
}
END_TEST

START_TEST(test_form_pct_encode_invalid_utf8_not_decodable)
{
	char *enc = NULL, *dec = NULL;
	ck_assert_int_eq(pct_encode("\xff\xfe", &enc), CS_OK);
	ck_assert_str_eq(enc, "%FF%FE");
	ck_assert_int_eq(pct_decode(enc, strlen(enc), 0, &dec, NULL), CS_EINVAL);
	free(enc);
}
END_TEST

/* --- utf8_valid ---------------------------------------------------------- */

#define U8(lit) utf8_valid((lit), sizeof(lit) - 1)

START_TEST(test_form_utf8_valid_accepts_boundaries)
{
	ck_assert(utf8_valid("", 0));
	ck_assert(U8("plain ascii \x7f"));
	ck_assert(U8("\xc2\x80"));               /* U+0080 */
	ck_assert(U8("\xdf\xbf"));               /* U+07FF */
	ck_assert(U8("\xe0\xa0\x80"));           /* U+0800 */
	ck_assert(U8("\xed\x9f\xbf"));           /* U+D7FF, just below the surrogates */
	ck_assert(U8("\xee\x80\x80"));           /* U+E000, just above */
	ck_assert(U8("\xef\xbf\xbf"));           /* U+FFFF */
	ck_assert(U8("\xf0\x90\x80\x80"));       /* U+10000 */
	ck_assert(U8("\xf4\x8f\xbf\xbf"));       /* U+10FFFF */
}
END_TEST

START_TEST(test_form_utf8_valid_refuses_bad)
{
	ck_assert(!U8("\x80"));                  /* lone continuation */
	ck_assert(!U8("a\xbf"));
	ck_assert(!U8("\xc0\x80"));              /* overlongs */
	ck_assert(!U8("\xc1\xbf"));
	ck_assert(!U8("\xe0\x9f\xbf"));
	ck_assert(!U8("\xf0\x8f\xbf\xbf"));
	ck_assert(!U8("\xed\xa0\x80"));          /* surrogates */
	ck_assert(!U8("\xed\xbf\xbf"));
	ck_assert(!U8("\xf4\x90\x80\x80"));      /* > U+10FFFF */
	ck_assert(!U8("\xf5\x80\x80\x80"));
	ck_assert(!U8("\xf7\xbf\xbf\xbf"));
	ck_assert(!U8("\xf8\x88\x80\x80\x80"));  /* 5- and 6-byte forms */
	ck_assert(!U8("\xfc\x84\x80\x80\x80\x80"));
	ck_assert(!U8("\xfe"));
	ck_assert(!U8("\xff"));
	ck_assert(!U8("\xe2\x82"));              /* truncated at the end */
	ck_assert(!U8("\xf0\x9f\x98"));
	ck_assert(!U8("\xc3"));
	ck_assert(!U8("\xe2\x28\xa1"));          /* bad continuation */
	ck_assert(!U8("\xe2\x82\xc3\xa9"));
}
END_TEST

START_TEST(test_form_utf8_valid_honours_len)
{
	ck_assert(!utf8_valid("\xc3\xa9", 1));    /* cut inside a sequence */
	ck_assert(utf8_valid("\xc3\xa9", 2));
	ck_assert(utf8_valid("ab\xff", 2));       /* the bad byte is past len */
	ck_assert(!utf8_valid("\xf0\x9f\x98\x80", 3));
}
END_TEST

/* --- request memory ------------------------------------------------------ */

/* form_parse_in takes the block from the request's arena: the same result as
 * form_parse, form_clear wipes it without freeing it, a failure leaves the
 * form empty, and past the arena's cap it is CS_ENOMEM with nothing parsed. */
START_TEST(test_form_parse_in_arena)
{
	unsigned char mem[512];
	struct arena a;
	struct form f;
	arena_init(&a, mem, sizeof mem, 4096);
	ck_assert_int_eq(form_parse_in(&f, &a, "a=1&b=x%20y+z", 13), CS_OK);
	ck_assert_uint_eq(f.n, 2);
	ck_assert_str_eq(form_get(&f, "b"), "x y z");
	ck_assert(f.block_in_arena);
	ck_assert((unsigned char *)f.block >= mem && (unsigned char *)f.block < mem + sizeof mem);
	char *block = f.block;
	form_clear(&f);                              /* ASan: a free of mem would abort */
	ck_assert_uint_eq((unsigned char)block[0], 0);
	ck_assert_int_eq(form_parse_in(&f, &a, "a=%zz", 5), CS_EINVAL);
	ck_assert_uint_eq(f.n, 0);
	ck_assert_ptr_null(f.block);
	arena_clear(&a);

	arena_init(&a, NULL, 0, 64);                 /* the block would pass the cap */
	ck_assert_int_eq(form_parse_in(&f, &a, "a=1", 3), CS_ENOMEM);
	ck_assert_uint_eq(f.n, 0);
	arena_clear(&a);
	ck_assert_int_eq(form_parse_in(&f, NULL, "a=1", 3), CS_OK);   /* NULL: the heap */
	ck_assert(!f.block_in_arena);
	ck_assert_str_eq(form_get(&f, "a"), "1");
	form_clear(&f);
}
END_TEST

/* pct_decode_into may decode in place: Basic credentials are decoded so. */
START_TEST(test_form_pct_decode_into_in_place)
{
	char s[] = "a%3Ab+c%2B%C3%A9";
	size_t n = 0;
	ck_assert_int_eq(pct_decode_into(s, strlen(s), 1, s, &n), CS_OK);
	ck_assert_str_eq(s, "a:b c+\xc3\xa9");
	ck_assert_uint_eq(n, 8);
	char t[] = "%41%42%43";
	ck_assert_int_eq(pct_decode_into(t, strlen(t), 0, t, &n), CS_OK);
	ck_assert_str_eq(t, "ABC");
	char u[] = "ab%0";
	ck_assert_int_eq(pct_decode_into(u, strlen(u), 0, u, &n), CS_EINVAL);
	char v[] = "a%00b";
	ck_assert_int_eq(pct_decode_into(v, strlen(v), 0, v, &n), CS_EINVAL);
}
END_TEST

static Suite *form_suite(void)
{
	Suite *s = suite_create("form");
	TCase *tc = tcase_create("form");
	tcase_add_test(tc, test_form_parse_in_arena);
	tcase_add_test(tc, test_form_pct_decode_into_in_place);
	tcase_add_test(tc, test_form_parse_two_pairs);
	tcase_add_test(tc, test_form_parse_plus_is_space);
	tcase_add_test(tc, test_form_parse_percent_escapes);
	tcase_add_test(tc, test_form_parse_empty_value);
	tcase_add_test(tc, test_form_parse_bare_name);
	tcase_add_test(tc, test_form_parse_empty_pairs_skipped);
	tcase_add_test(tc, test_form_parse_empty_input);
	tcase_add_test(tc, test_form_parse_equals_in_value);
	tcase_add_test(tc, test_form_parse_respects_len);
	tcase_add_test(tc, test_form_parse_duplicates_kept);
	tcase_add_test(tc, test_form_parse_max_params_ok);
	tcase_add_test(tc, test_form_parse_too_many_params);
	tcase_add_test(tc, test_form_parse_one_block);
	tcase_add_test(tc, test_form_parse_block_worst_case);
	tcase_add_test(tc, test_form_parse_long_value);
	tcase_add_test(tc, test_form_parse_bad_escapes);
	tcase_add_test(tc, test_form_parse_nul_refused);
	tcase_add_test(tc, test_form_parse_invalid_utf8_refused);
	tcase_add_test(tc, test_form_parse_empty_name_refused);
	tcase_add_test(tc, test_form_parse_failure_reuses_form);
	tcase_add_test(tc, test_form_pct_decode_plus_kept_without_plus_space);
	tcase_add_test(tc, test_form_pct_decode_failures_leave_out_alone);
	tcase_add_test(tc, test_form_pct_decode_mixed_case_hex);
	tcase_add_test(tc, test_form_pct_encode_unreserved_unchanged);
	tcase_add_test(tc, test_form_pct_encode_reserved_escaped);
	tcase_add_test(tc, test_form_pct_encode_roundtrip_random_utf8);
	tcase_add_test(tc, test_form_pct_encode_roundtrip_every_ascii_byte);
	tcase_add_test(tc, test_form_pct_encode_invalid_utf8_not_decodable);
	tcase_add_test(tc, test_form_utf8_valid_accepts_boundaries);
	tcase_add_test(tc, test_form_utf8_valid_refuses_bad);
	tcase_add_test(tc, test_form_utf8_valid_honours_len);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(form_suite());
}
