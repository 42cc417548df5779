/* test_session.c -- cookies, session lifetimes and CSRF tokens, against a real
 * SQLite file built from migrations/. */
#include <string.h>
#include "buf.h"
#include "session.h"
#include "store.h"
#include "store_session.h"
#include "store_user.h"
#include "testutil.h"

static char *dir;
static struct store *st;
static struct store_conn *sc;
static struct config cfg;

static void setup(void)
{
	dir = tu_tmpdir();
	char *db = tu_path(dir, "t.db");
	ck_assert_int_eq(store_open(db, &st), CS_OK);
	free(db);
	sc = store_conn(st);
	ck_assert_ptr_nonnull(sc);
	memset(&cfg, 0, sizeof cfg);
	cfg.public_url = "http://127.0.0.1:8080";
	cfg.public_url_is_https = false;
	cfg.session_idle_timeout = 1800;
	cfg.session_absolute_timeout = 43200;
}

static void teardown(void)
{
	store_close(st);
	tu_rmdir(dir);
}

static int64_t new_user(const char *sub)
{
	int64_t id = 0;
	ck_assert_int_eq(store_user_put(sc, &(struct store_user){ .issuer = "https://idp.test",
	    .subject = sub, .name = "N", .email = NULL, .now = 1000, .login = true }, &id), CS_OK);
	return id;
}

START_TEST(test_session_cookie_get_finds_value)
{
	char *v = NULL;
	ck_assert_int_eq(cookie_get("a=1; consentd_session=abc; b=2", "consentd_session", &v), CS_OK);
	ck_assert_str_eq(v, "abc");
	free(v);
	ck_assert_int_eq(cookie_get("consentd_session=\"q\"", "consentd_session", &v), CS_OK);
	ck_assert_str_eq(v, "q");
	free(v);
	ck_assert_int_eq(cookie_get("  x = y ;consentd_session=z  ", "consentd_session", &v), CS_OK);
	ck_assert_str_eq(v, "z");
	free(v);
}
END_TEST

START_TEST(test_session_cookie_get_hostile)
{
	char *v = NULL;
	char big[COOKIE_MAX_HEADER + 10];
	ck_assert_int_eq(cookie_get(NULL, "a", &v), CS_ENOENT);
	ck_assert_int_eq(cookie_get("", "a", &v), CS_ENOENT);
	ck_assert_int_eq(cookie_get("ab=1", "a", &v), CS_ENOENT);            /* prefix is not a match */
	ck_assert_int_eq(cookie_get("xa=1", "a", &v), CS_ENOENT);
	ck_assert_int_eq(cookie_get("a", "a", &v), CS_ENOENT);               /* no '=' */
	ck_assert_int_eq(cookie_get(";;;;", "a", &v), CS_ENOENT);
	ck_assert_int_eq(cookie_get("a=1; a=2", "a", &v), CS_EINVAL);        /* tossed duplicate */
	ck_assert_int_eq(cookie_get("a=1\r\nSet-Cookie: x", "a", &v), CS_EINVAL);
	memset(big, 'x', sizeof big - 1);
	big[0] = 'a';
	big[1] = '=';
	big[sizeof big - 1] = '\0';
	ck_assert_int_eq(cookie_get(big, "a", &v), CS_EINVAL);
	ck_assert_int_eq(cookie_get("a=", "a", &v), CS_OK);
	ck_assert_str_eq(v, "");
	free(v);
}
END_TEST

START_TEST(test_session_cookie_format_attributes)
{
	char *c = NULL;
	ck_assert_int_eq(cookie_format(&cfg, "consentd_session", "v", -1, &c), CS_OK);
	ck_assert_str_eq(c, "consentd_session=v; Path=/; HttpOnly; SameSite=Lax");
	free(c);
	cfg.public_url_is_https = true;
	ck_assert_str_eq(session_cookie_name(&cfg), "__Host-consentd");
	ck_assert_int_eq(cookie_format(&cfg, "__Host-consentd", "v", 0, &c), CS_OK);
	ck_assert_str_eq(c, "__Host-consentd=v; Path=/; HttpOnly; SameSite=Lax; Secure; Max-Age=0");
	free(c);
	/* The longest there is: a login cookie (issue #28), the largest sealed value. */
	char v[901];
	memset(v, 'A', 900);
	v[900] = '\0';
	ck_assert_int_eq(cookie_format(&cfg, "__Host-consentd-login-0123456789ab", v, 300, &c), CS_OK);
	ck_assert_uint_eq(strlen(c), 34 + 1 + 900 + strlen("; Path=/; HttpOnly; SameSite=Lax; Secure; Max-Age=300"));
	free(c);
}
END_TEST

START_TEST(test_session_random_token_shape)
{
	char a[SESSION_TOKEN_LEN + 1], b[SESSION_TOKEN_LEN + 1];
	ck_assert_int_eq(random_token(a), CS_OK);
	ck_assert_int_eq(random_token(b), CS_OK);
	ck_assert_uint_eq(strlen(a), 43);
	ck_assert_str_ne(a, b);
	for (const char *p = a; *p; p++)
		ck_assert(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", *p));
}
END_TEST

static char *cookie_for(const char *id)
{
	char *h = malloc(100);
	ck_assert_ptr_nonnull(h);
	ck_assert_int_eq(str_fmt(h, 100, "other=1; consentd_session=%s", id), CS_OK);
	return h;
}

START_TEST(test_session_roundtrip_and_csrf)
{
	char id[SESSION_TOKEN_LEN + 1];
	struct session s;
	int64_t uid = new_user("alice");
	ck_assert_int_eq(session_create(sc, uid, 900, true, 1000, id), CS_OK);
	char *ck = cookie_for(id);
	ck_assert_int_eq(session_from_cookie(sc, &cfg, ck, 1001, &s), CS_OK);
	ck_assert_str_eq(s.subject, "alice");
	ck_assert_int_eq(s.user_id, uid);
	ck_assert_int_eq(s.auth_time, 900);
	ck_assert(s.admin_claim);
	ck_assert(session_csrf_ok(&s, s.csrf));
	char wrong[SESSION_TOKEN_LEN + 1];
	memcpy(wrong, s.csrf, sizeof wrong);
	wrong[0] = wrong[0] == 'A' ? 'B' : 'A';
	ck_assert(!session_csrf_ok(&s, wrong));
	ck_assert(!session_csrf_ok(&s, NULL));
	ck_assert(!session_csrf_ok(&s, ""));
	ck_assert(!session_csrf_ok(&s, "short"));
	/* The database holds only the hash of the id. */
	ck_assert_int_eq(session_end(sc, s.id_hash), CS_OK);
	session_clear(&s);
	ck_assert_int_eq(session_from_cookie(sc, &cfg, ck, 1002, &s), CS_ENOENT);
	free(ck);
}
END_TEST

START_TEST(test_session_idle_and_absolute_expiry)
{
	char id[SESSION_TOKEN_LEN + 1];
	struct session s;
	int64_t uid = new_user("bob");
	cfg.session_idle_timeout = 100;
	cfg.session_absolute_timeout = 1000;
	ck_assert_int_eq(session_create(sc, uid, 0, false, 1000, id), CS_OK);
	char *ck = cookie_for(id);
	/* Used every 90 s it stays alive past the idle limit... */
	for (int64_t t = 1090; t <= 1990; t += 90) {
		ck_assert_int_eq(session_from_cookie(sc, &cfg, ck, t, &s), CS_OK);
		session_clear(&s);
	}
	/* ... but not past the absolute one. */
	ck_assert_int_eq(session_from_cookie(sc, &cfg, ck, 2080, &s), CS_ENOENT);
	free(ck);
	ck_assert_int_eq(session_create(sc, uid, 0, false, 5000, id), CS_OK);
	ck = cookie_for(id);
	ck_assert_int_eq(session_from_cookie(sc, &cfg, ck, 5101, &s), CS_ENOENT);   /* idle */
	free(ck);
}
END_TEST

START_TEST(test_session_bad_cookie_values)
{
	struct session s;
	ck_assert_int_eq(session_from_cookie(sc, &cfg, NULL, 1, &s), CS_ENOENT);
	ck_assert_int_eq(session_from_cookie(sc, &cfg, "consentd_session=short", 1, &s), CS_ENOENT);
	ck_assert_int_eq(session_from_cookie(sc, &cfg,
	    "consentd_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA!", 1, &s), CS_ENOENT);
	ck_assert_int_eq(session_from_cookie(sc, &cfg,
	    "consentd_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 1, &s), CS_ENOENT);
}
END_TEST

START_TEST(test_session_login_used_single_use)
{
	unsigned char h[32], other[32];
	memset(h, 1, 32);
	memset(other, 2, 32);
	ck_assert_int_eq(store_login_used_get(sc, h), CS_ENOENT);
	ck_assert_int_eq(store_login_used_put(sc, h, 610), CS_OK);
	ck_assert_int_eq(store_login_used_get(sc, h), CS_OK);
	ck_assert_int_eq(store_login_used_get(sc, other), CS_ENOENT);
	/* The insert is the check: a second use is refused and changes nothing. */
	ck_assert_int_eq(store_login_used_put(sc, h, 9999), CS_EEXIST);
	/* Kept until its expiry, then purged. */
	ck_assert_int_eq(store_purge_expired(sc, 609, 1800, 43200), CS_OK);
	ck_assert_int_eq(store_login_used_get(sc, h), CS_OK);
	ck_assert_int_eq(store_purge_expired(sc, 610, 1800, 43200), CS_OK);
	ck_assert_int_eq(store_login_used_get(sc, h), CS_ENOENT);
}
END_TEST

/* cookie_each's visits, "name=value;" one after another. */
static bool collect(const char *name, size_t nlen, const char *value, size_t vlen, void *arg)
{
	struct buf *b = arg;
	ck_assert_int_eq(buf_printf(b, "%.*s=%.*s;", (int)nlen, name, (int)vlen, value), CS_OK);
	return b->len < 40;
}

START_TEST(test_session_cookie_each_prefix)
{
	struct buf b;
	buf_init(&b, 4096);
	ck_assert_int_eq(cookie_each("a=1; consentd_login_x=\"q\" ; bare; consentd_login_=2;"
	    " consentd_loginX=3; xconsentd_login_y=4;  consentd_login_z = 5 ", "consentd_login_",
	    collect, &b), CS_OK);
	ck_assert_str_eq(b.data, "consentd_login_x=q;consentd_login_=2;consentd_login_z=5;");
	/* The callback stops the walk. */
	buf_clear(&b);
	buf_init(&b, 4096);
	ck_assert_int_eq(cookie_each("p_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa=1; p_b=2", "p_",
	    collect, &b), CS_OK);
	ck_assert_str_eq(b.data, "p_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa=1;");
	buf_clear(&b);
	/* Absent, oversized or with control characters: nothing is visited. */
	buf_init(&b, 4096);
	ck_assert_int_eq(cookie_each(NULL, "p_", collect, &b), CS_ENOENT);
	ck_assert_int_eq(cookie_each("p_a=1\r\nX: y", "p_", collect, &b), CS_EINVAL);
	char *big = malloc(COOKIE_MAX_HEADER + 2);
	ck_assert_ptr_nonnull(big);
	memset(big, 'a', COOKIE_MAX_HEADER + 1);
	memcpy(big, "p_a=", 4);
	big[COOKIE_MAX_HEADER + 1] = '\0';
	ck_assert_int_eq(cookie_each(big, "p_", collect, &b), CS_EINVAL);
	free(big);
	ck_assert_uint_eq(b.len, 0);
	buf_clear(&b);
}
END_TEST

START_TEST(test_session_user_upsert_keeps_id)
{
	int64_t a = 0, b = 0, c2 = 0;
	ck_assert_int_eq(store_user_put(sc, &(struct store_user){ .issuer = "https://idp.test",
	    .subject = "u1", .name = "One", .email = "a@x", .now = 1, .login = true }, &a), CS_OK);
	ck_assert_int_eq(store_user_put(sc, &(struct store_user){ .issuer = "https://idp.test",
	    .subject = "u1", .name = "One Renamed", .email = NULL, .now = 2, .login = true }, &b), CS_OK);
	ck_assert_int_eq(a, b);
	/* Same subject at another issuer is another person. */
	ck_assert_int_eq(store_user_put(sc, &(struct store_user){ .issuer = "https://other.test",
	    .subject = "u1", .name = "X", .email = NULL, .now = 3, .login = true }, &c2), CS_OK);
	ck_assert_int_ne(a, c2);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("session");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_session_cookie_get_finds_value);
	tcase_add_test(tc, test_session_cookie_get_hostile);
	tcase_add_test(tc, test_session_cookie_format_attributes);
	tcase_add_test(tc, test_session_random_token_shape);
	tcase_add_test(tc, test_session_roundtrip_and_csrf);
	tcase_add_test(tc, test_session_idle_and_absolute_expiry);
	tcase_add_test(tc, test_session_bad_cookie_values);
	tcase_add_test(tc, test_session_login_used_single_use);
	tcase_add_test(tc, test_session_cookie_each_prefix);
	tcase_add_test(tc, test_session_user_upsert_keeps_id);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
