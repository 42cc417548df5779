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

START_TEST(test_session_login_state_single_use)
{
	struct store_login_state ls, out;
	memset(&ls, 0, sizeof ls);
	memset(ls.state_hash, 1, 32);
	memset(ls.browser_hash, 2, 32);
	ls.nonce = "n";
	ls.code_verifier = "v";
	ls.return_to = "/me";
	ls.max_age = -1;
	ls.created_at = 10;
	ls.expires_at = 610;
	ck_assert_int_eq(store_login_state_insert(sc, &ls), CS_OK);
	ck_assert_int_eq(store_login_state_take(sc, ls.state_hash, &out), CS_OK);
	ck_assert_str_eq(out.code_verifier, "v");
	ck_assert_int_eq(memcmp(out.browser_hash, ls.browser_hash, 32), 0);
	ck_assert_int_eq(out.max_age, -1);
	store_login_state_clear(&out);
	ck_assert_int_eq(store_login_state_take(sc, ls.state_hash, &out), CS_ENOENT);
	/* Purge removes expired states. */
	memset(ls.state_hash, 3, 32);
	ck_assert_int_eq(store_login_state_insert(sc, &ls), CS_OK);
	ck_assert_int_eq(store_purge_expired(sc, 611, 1800, 43200), CS_OK);
	ck_assert_int_eq(store_login_state_take(sc, ls.state_hash, &out), CS_ENOENT);
}
END_TEST

/* A login state numbered id (its state hash), from address addr, started by
 * browser, live until exp. */
static struct store_login_state login_state(int id, int addr, int browser, int64_t exp)
{
	struct store_login_state ls;
	memset(&ls, 0, sizeof ls);
	memset(ls.state_hash, id, 32);
	memset(ls.browser_hash, browser, 32);
	memset(ls.addr_hash, addr, 32);
	ls.nonce = "n";
	ls.code_verifier = "v";
	ls.return_to = "/me";
	ls.max_age = -1;
	ls.created_at = exp - 300;
	ls.expires_at = exp;
	return ls;
}

/* store_login_state_admit with limits per_address and total at now. */
static enum store_login_admit admit(int id, int addr, int browser, int64_t exp, int64_t now,
    int64_t per_address, int64_t total, const unsigned char *replaces, int64_t *free_at)
{
	struct store_login_state ls = login_state(id, addr, browser, exp);
	struct store_login_limits lim = { now, per_address, total, replaces };
	enum store_login_admit out = STORE_LOGIN_ADMIT__MAX;
	int64_t at = -1;
	ck_assert_int_eq(store_login_state_admit(sc, &ls, &lim, &out, &at), CS_OK);
	if (free_at != NULL)
		*free_at = at;
	return out;
}

/* Whether the state numbered id is stored (taking it: single use). */
static bool login_state_there(int id)
{
	unsigned char h[32];
	struct store_login_state out;
	memset(h, id, 32);
	enum cs_err e = store_login_state_take(sc, h, &out);
	ck_assert(e == CS_OK || e == CS_ENOENT);
	if (e == CS_OK)
		store_login_state_clear(&out);
	return e == CS_OK;
}

START_TEST(test_session_login_admit_per_address_cap)
{
	int64_t at = 0;
	/* Three places per address: the fourth start from address 7 is refused,
	 * and a place frees when the soonest of the three expires. */
	ck_assert_int_eq(admit(1, 7, 1, 1300, 1000, 3, 100, NULL, &at), STORE_LOGIN_ADMITTED);
	ck_assert_int_eq(at, 0);
	ck_assert_int_eq(admit(2, 7, 2, 1200, 1000, 3, 100, NULL, NULL), STORE_LOGIN_ADMITTED);
	ck_assert_int_eq(admit(3, 7, 3, 1250, 1000, 3, 100, NULL, NULL), STORE_LOGIN_ADMITTED);
	ck_assert_int_eq(admit(4, 7, 4, 1300, 1000, 3, 100, NULL, &at), STORE_LOGIN_ADDRESS_FULL);
	ck_assert_int_eq(at, 1200);
	/* Another address is not affected. */
	ck_assert_int_eq(admit(5, 8, 5, 1300, 1000, 3, 100, NULL, NULL), STORE_LOGIN_ADMITTED);
	/* The refused one wrote nothing; the others are there. */
	ck_assert(!login_state_there(4));
	ck_assert(login_state_there(2));
	/* Finishing a login (taking its state) gives its place back. */
	ck_assert_int_eq(admit(6, 7, 6, 1300, 1000, 3, 100, NULL, NULL), STORE_LOGIN_ADMITTED);
	ck_assert_int_eq(admit(9, 7, 9, 1300, 1000, 3, 100, NULL, NULL), STORE_LOGIN_ADDRESS_FULL);
}
END_TEST

START_TEST(test_session_login_admit_total_cap)
{
	int64_t at = 0;
	/* Four places in all, three per address: addresses 1 and 2 fill them,
	 * address 3 is refused as "everyone", not as its own address. */
	ck_assert_int_eq(admit(1, 1, 1, 1100, 1000, 3, 4, NULL, NULL), STORE_LOGIN_ADMITTED);
	ck_assert_int_eq(admit(2, 1, 2, 1400, 1000, 3, 4, NULL, NULL), STORE_LOGIN_ADMITTED);
	ck_assert_int_eq(admit(3, 2, 3, 1050, 1000, 3, 4, NULL, NULL), STORE_LOGIN_ADMITTED);
	ck_assert_int_eq(admit(4, 2, 4, 1400, 1000, 3, 4, NULL, NULL), STORE_LOGIN_ADMITTED);
	ck_assert_int_eq(admit(5, 3, 5, 1400, 1000, 3, 4, NULL, &at), STORE_LOGIN_ALL_FULL);
	ck_assert_int_eq(at, 1050);
	ck_assert(!login_state_there(5));
	/* Once the soonest expires, its place is free again (no purge needed). */
	ck_assert_int_eq(admit(5, 3, 5, 1400, 1050, 3, 4, NULL, NULL), STORE_LOGIN_ADMITTED);
	ck_assert_int_eq(admit(6, 3, 6, 1400, 1050, 3, 4, NULL, NULL), STORE_LOGIN_ALL_FULL);
	/* Bad limits are a programming error, not a verdict. */
	struct store_login_state ls = login_state(7, 3, 7, 1400);
	struct store_login_limits lim = { 1000, 0, 4, NULL };
	enum store_login_admit out;
	int64_t f;
	ck_assert_int_eq(store_login_state_admit(sc, &ls, &lim, &out, &f), CS_EINVAL);
}
END_TEST

START_TEST(test_session_login_admit_expired_not_counted)
{
	/* Expired states (expires_at <= now) that the purge has not reached yet
	 * hold no place, neither for their address nor in the total. */
	for (int i = 1; i <= 5; i++)
		ck_assert_int_eq(admit(i, 7, i, 1000 + i, 1000, 5, 5, NULL, NULL), STORE_LOGIN_ADMITTED);
	ck_assert_int_eq(admit(9, 7, 9, 2000, 1000, 5, 5, NULL, NULL), STORE_LOGIN_ADDRESS_FULL);
	ck_assert_int_eq(admit(9, 8, 9, 2000, 1000, 9, 5, NULL, NULL), STORE_LOGIN_ALL_FULL);
	/* At 1003 the states expiring at 1001..1003 are dead (expiry itself counts as dead). */
	ck_assert_int_eq(admit(10, 7, 10, 2000, 1003, 5, 5, NULL, NULL), STORE_LOGIN_ADMITTED);
	ck_assert_int_eq(admit(11, 7, 11, 2000, 1003, 5, 5, NULL, NULL), STORE_LOGIN_ADMITTED);
	ck_assert_int_eq(admit(12, 7, 12, 2000, 1003, 5, 5, NULL, NULL), STORE_LOGIN_ADMITTED);
	ck_assert_int_eq(admit(13, 7, 13, 2000, 1003, 5, 5, NULL, NULL), STORE_LOGIN_ADDRESS_FULL);
	/* ... and the purge then removes them. */
	ck_assert_int_eq(store_purge_expired(sc, 1003, 1800, 43200), CS_OK);
	ck_assert(!login_state_there(1));
	ck_assert(!login_state_there(3));
	ck_assert(login_state_there(4));
}
END_TEST

START_TEST(test_session_login_admit_browser_replaces_its_own)
{
	unsigned char b1[32], b2[32];
	memset(b1, 1, 32);
	memset(b2, 2, 32);
	/* Two places per address, both taken by browsers 1 and 2. */
	ck_assert_int_eq(admit(1, 7, 1, 1300, 1000, 2, 10, NULL, NULL), STORE_LOGIN_ADMITTED);
	ck_assert_int_eq(admit(2, 7, 2, 1300, 1000, 2, 10, NULL, NULL), STORE_LOGIN_ADMITTED);
	/* Browser 1 starts again (its cookie names state 1): admitted in place
	 * of state 1, which is gone; it does so again and again. */
	ck_assert_int_eq(admit(3, 7, 1, 1300, 1000, 2, 10, b1, NULL), STORE_LOGIN_ADMITTED);
	ck_assert_int_eq(admit(4, 7, 1, 1300, 1000, 2, 10, b1, NULL), STORE_LOGIN_ADMITTED);
	ck_assert(!login_state_there(1));
	ck_assert(!login_state_there(3));
	/* A third browser is still refused, and a cookie naming no state helps nothing. */
	unsigned char b9[32];
	memset(b9, 9, 32);
	ck_assert_int_eq(admit(5, 7, 9, 1300, 1000, 2, 10, b9, NULL), STORE_LOGIN_ADDRESS_FULL);
	/* A refused start deletes nothing either: browser 2, starting again from
	 * address 8, which is full, gets past the first look (its own state lies
	 * elsewhere), is refused inside the transaction, and keeps its state. */
	ck_assert_int_eq(admit(6, 8, 6, 1300, 1000, 2, 3, NULL, NULL), STORE_LOGIN_ADMITTED);
	ck_assert_int_eq(admit(7, 8, 2, 1300, 1000, 1, 3, b2, NULL), STORE_LOGIN_ADDRESS_FULL);
	ck_assert(login_state_there(2));
	ck_assert(login_state_there(4));
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
	tcase_add_test(tc, test_session_login_state_single_use);
	tcase_add_test(tc, test_session_login_admit_per_address_cap);
	tcase_add_test(tc, test_session_login_admit_total_cap);
	tcase_add_test(tc, test_session_login_admit_expired_not_counted);
	tcase_add_test(tc, test_session_login_admit_browser_replaces_its_own);
	tcase_add_test(tc, test_session_user_upsert_keeps_id);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(suite());
}
