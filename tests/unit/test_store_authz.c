/* test_store_authz.c -- store_authz.c (migration 0019): pending /authorize
 * requests (round trip, expiry, binding to one person, one delete) and
 * authorization codes (round trip, single use across threads, expiry, reuse
 * told apart with the family and consent to revoke), and their purge by the
 * janitor (janitor.c, store_janitor.c).  A code must never be taken twice.
 *
 * On both engines, as test_store.c: with CONSENTD_TEST_DATABASE_URL set to a
 * postgresql:// URL (scripts/run-store-pg.sh) every test runs on that
 * database, emptied before each; otherwise on a fresh SQLite file. */
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>

#include "config.h"
#include "janitor.h"
#include "store.h"
#include "store_authz.h"
#include "store_user.h"
#include "testutil.h"
#include "tu_store.h"

#define T0 1700000000LL              /* "now" of the tests */
#define GRACE 100                    /* [retention] grace of the janitor test */

/* A request as /authorize would store it: no person yet. */
static struct store_authz_request request(const char *id, int64_t expires_at)
{
	return (struct store_authz_request){
		.id = (char *)id, .client_id = (char *)"https://client.example/cimd.json",
		.redirect_uri = (char *)"http://127.0.0.1:33418/callback",
		.code_challenge = (char *)"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
		.resource = (char *)"https://consent.example/mcp/notes", .state = (char *)"xyz",
		.scope = (char *)"notes:read notes:write", .created_at = T0, .expires_at = expires_at,
	};
}

/* A code as /authorize/{id}/done would store it, for client_id. */
static struct store_authz_code code(const char *client_id, int64_t user_id, int64_t expires_at)
{
	return (struct store_authz_code){
		.request_id = (char *)"req-0123456789abcdefgh", .client_id = (char *)client_id,
		.redirect_uri = (char *)"http://127.0.0.1:33418/callback",
		.code_challenge = (char *)"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
		.resource = (char *)"https://consent.example/mcp/notes", .scope = (char *)"notes:read",
		.consent_id = (char *)"consent-0123456789abcd", .user_id = user_id,
		.created_at = T0, .expires_at = expires_at,
	};
}

static void hash_of(unsigned char h[STORE_AUTHZ_CODE_HASH_LEN], unsigned char seed)
{
	for (int i = 0; i < STORE_AUTHZ_CODE_HASH_LEN; i++)
		h[i] = (unsigned char)(seed + 7 * i);
}

/* --- pending requests ---------------------------------------------------- */

/* Every column comes back as put; NULL state and scope come back NULL; the
 * person is 0 until bound; a duplicate id and a malformed one are refused. */
START_TEST(test_store_authz_request_round_trip)
{
	struct tu_store f;
	struct store_authz_request r;
	tu_store_init(&f, T0);
	struct store_authz_request in = request("AAAAAAAAAAAAAAAAAAAAAA", T0 + 600);
	ck_assert_int_eq(store_authz_request_put(f.c, &in), CS_OK);
	ck_assert_int_eq(store_authz_request_get(f.c, "AAAAAAAAAAAAAAAAAAAAAA", T0, &r), CS_OK);
	ck_assert_ptr_eq(r.id, r.block);
	ck_assert_str_eq(r.id, "AAAAAAAAAAAAAAAAAAAAAA");
	ck_assert_str_eq(r.client_id, in.client_id);
	ck_assert_str_eq(r.redirect_uri, in.redirect_uri);
	ck_assert_str_eq(r.code_challenge, in.code_challenge);
	ck_assert_str_eq(r.resource, in.resource);
	ck_assert_str_eq(r.state, "xyz");
	ck_assert_str_eq(r.scope, "notes:read notes:write");
	ck_assert_ptr_null(r.consent_request_id);
	ck_assert_ptr_null(r.dpop_jkt);
	ck_assert_int_eq(r.user_id, 0);
	ck_assert_int_eq(r.created_at, T0);
	ck_assert_int_eq(r.expires_at, T0 + 600);
	store_authz_request_clear(&r);
	store_authz_request_clear(&r);                       /* twice is fine */
	store_authz_request_clear(NULL);

	in = request("BBBBBBBBBBBBBBBBBBBBBB", T0 + 600);
	in.state = NULL;
	in.scope = NULL;
	ck_assert_int_eq(store_authz_request_put(f.c, &in), CS_OK);
	ck_assert_int_eq(store_authz_request_get(f.c, "BBBBBBBBBBBBBBBBBBBBBB", T0, &r), CS_OK);
	ck_assert_ptr_null(r.state);
	ck_assert_ptr_null(r.scope);
	store_authz_request_clear(&r);

	ck_assert_int_eq(store_authz_request_put(f.c, &in), CS_EEXIST);
	in = request("short", T0 + 600);
	ck_assert_int_eq(store_authz_request_put(f.c, &in), CS_EINVAL);
	in = request("CCCCCCCCCCCCCCCCCCCCCC", T0 + 600);
	in.resource = NULL;
	ck_assert_int_eq(store_authz_request_put(f.c, &in), CS_EINVAL);
	ck_assert_int_eq(store_authz_request_get(f.c, "CCCCCCCCCCCCCCCCCCCCCC", T0, &r), CS_ENOENT);
	tu_store_clear(&f);
}
END_TEST

/* A request is gone for get and bind from its expiry on (the boundary
 * included), and *out is left alone then. */
START_TEST(test_store_authz_request_expiry)
{
	struct tu_store f;
	struct store_authz_request r;
	tu_store_init(&f, T0);
	struct store_authz_request in = request("AAAAAAAAAAAAAAAAAAAAAA", T0 + 600);
	ck_assert_int_eq(store_authz_request_put(f.c, &in), CS_OK);
	ck_assert_int_eq(store_authz_request_get(f.c, in.id, T0 + 599, &r), CS_OK);
	store_authz_request_clear(&r);
	memset(&r, 0x5a, sizeof r);
	ck_assert_int_eq(store_authz_request_get(f.c, in.id, T0 + 600, &r), CS_ENOENT);
	ck_assert_ptr_eq(r.block, (void *)0x5a5a5a5a5a5a5a5aULL);
	ck_assert_int_eq(store_authz_request_bind(f.c, in.id, f.alice, NULL, T0 + 600), CS_ENOENT);
	ck_assert_int_eq(store_authz_request_get(f.c, "unknown-id-0123456789a", T0, &r), CS_ENOENT);
	tu_store_clear(&f);
}
END_TEST

/* Bound once to a person: that person may bind it again (a new consent
 * request), anyone else is refused and changes nothing. */
START_TEST(test_store_authz_request_bind_one_person)
{
	struct tu_store f;
	struct store_authz_request r;
	tu_store_init(&f, T0);
	struct store_authz_request in = request("AAAAAAAAAAAAAAAAAAAAAA", T0 + 600);
	ck_assert_int_eq(store_authz_request_put(f.c, &in), CS_OK);
	ck_assert_int_eq(store_authz_request_bind(f.c, in.id, f.alice, NULL, T0 + 1), CS_OK);
	ck_assert_int_eq(store_authz_request_get(f.c, in.id, T0 + 1, &r), CS_OK);
	ck_assert_int_eq(r.user_id, f.alice);
	ck_assert_ptr_null(r.consent_request_id);
	store_authz_request_clear(&r);
	ck_assert_int_eq(store_authz_request_bind(f.c, in.id, f.alice, "creq-1", T0 + 2), CS_OK);
	ck_assert_int_eq(store_authz_request_bind(f.c, in.id, f.bob, "creq-bob", T0 + 3), CS_ENOENT);
	ck_assert_int_eq(store_authz_request_get(f.c, in.id, T0 + 3, &r), CS_OK);
	ck_assert_int_eq(r.user_id, f.alice);
	ck_assert_str_eq(r.consent_request_id, "creq-1");
	store_authz_request_clear(&r);
	ck_assert_int_eq(store_authz_request_bind(f.c, in.id, f.alice, "creq-2", T0 + 4), CS_OK);
	ck_assert_int_eq(store_authz_request_get(f.c, in.id, T0 + 4, &r), CS_OK);
	ck_assert_str_eq(r.consent_request_id, "creq-2");
	store_authz_request_clear(&r);
	ck_assert_int_eq(store_authz_request_bind(f.c, "unknown-id-0123456789a", f.alice, NULL, T0),
	    CS_ENOENT);
	ck_assert_int_eq(store_authz_request_bind(f.c, in.id, 0, NULL, T0), CS_EINVAL);
	tu_store_clear(&f);
}
END_TEST

/* The DPoP key a request names (RFC 9449 §10, migration 0023) comes back
 * as put, and a request is found by the consent request it led to: the
 * newest bound to it, only while unexpired, never by another id. */
START_TEST(test_store_authz_request_by_consent)
{
	struct tu_store f;
	struct store_authz_request r;
	tu_store_init(&f, T0);
	struct store_authz_request in = request("AAAAAAAAAAAAAAAAAAAAAA", T0 + 600);
	in.dpop_jkt = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I";
	ck_assert_int_eq(store_authz_request_put(f.c, &in), CS_OK);
	ck_assert_int_eq(store_authz_request_get(f.c, in.id, T0, &r), CS_OK);
	ck_assert_str_eq(r.dpop_jkt, in.dpop_jkt);
	store_authz_request_clear(&r);
	ck_assert_int_eq(store_authz_request_by_consent(f.c, "creq-1", T0, &r), CS_ENOENT);
	ck_assert_int_eq(store_authz_request_bind(f.c, in.id, f.alice, "creq-1", T0 + 1), CS_OK);
	ck_assert_int_eq(store_authz_request_by_consent(f.c, "creq-1", T0 + 1, &r), CS_OK);
	ck_assert_str_eq(r.id, "AAAAAAAAAAAAAAAAAAAAAA");
	ck_assert_str_eq(r.consent_request_id, "creq-1");
	ck_assert_str_eq(r.dpop_jkt, in.dpop_jkt);
	ck_assert_int_eq(r.user_id, f.alice);
	store_authz_request_clear(&r);
	/* A second /authorize request of the same person merged into the same
	 * consent request: the newest is the one the done step continues. */
	struct store_authz_request in2 = request("BBBBBBBBBBBBBBBBBBBBBB", T0 + 700);
	in2.created_at = T0 + 5;
	ck_assert_int_eq(store_authz_request_put(f.c, &in2), CS_OK);
	ck_assert_int_eq(store_authz_request_bind(f.c, in2.id, f.alice, "creq-1", T0 + 5), CS_OK);
	ck_assert_int_eq(store_authz_request_by_consent(f.c, "creq-1", T0 + 5, &r), CS_OK);
	ck_assert_str_eq(r.id, "BBBBBBBBBBBBBBBBBBBBBB");
	ck_assert_ptr_null(r.dpop_jkt);
	store_authz_request_clear(&r);
	/* Another consent request's id, a prefix of it, or after expiry: none. */
	ck_assert_int_eq(store_authz_request_by_consent(f.c, "creq-", T0 + 5, &r), CS_ENOENT);
	ck_assert_int_eq(store_authz_request_by_consent(f.c, "creq-2", T0 + 5, &r), CS_ENOENT);
	ck_assert_int_eq(store_authz_request_delete(f.c, in2.id), CS_OK);
	ck_assert_int_eq(store_authz_request_by_consent(f.c, "creq-1", T0 + 600, &r), CS_ENOENT);
	ck_assert_int_eq(store_authz_request_by_consent(f.c, "creq-1", T0 + 599, &r), CS_OK);
	ck_assert_str_eq(r.id, "AAAAAAAAAAAAAAAAAAAAAA");
	store_authz_request_clear(&r);
	ck_assert_int_eq(store_authz_request_by_consent(f.c, NULL, T0, &r), CS_EINVAL);
	tu_store_clear(&f);
}
END_TEST

/* A delete says whether it deleted: of two "done" steps, one issues. */
START_TEST(test_store_authz_request_delete_once)
{
	struct tu_store f;
	struct store_authz_request r;
	tu_store_init(&f, T0);
	struct store_authz_request in = request("AAAAAAAAAAAAAAAAAAAAAA", T0 + 600);
	ck_assert_int_eq(store_authz_request_put(f.c, &in), CS_OK);
	ck_assert_int_eq(store_authz_request_delete(f.c, in.id), CS_OK);
	ck_assert_int_eq(store_authz_request_delete(f.c, in.id), CS_ENOENT);
	ck_assert_int_eq(store_authz_request_get(f.c, in.id, T0, &r), CS_ENOENT);
	tu_store_clear(&f);
}
END_TEST

/* --- codes ---------------------------------------------------------------- */

/* Every column of a code comes back from its take; the take marks it used
 * at now; NULL dpop_jkt and family read NULL; bad puts are refused. */
START_TEST(test_store_authz_code_round_trip)
{
	struct tu_store f;
	struct store_authz_code r;
	enum store_authz_take oc = AUTHZ_TAKE__MAX;
	unsigned char h[STORE_AUTHZ_CODE_HASH_LEN], h2[STORE_AUTHZ_CODE_HASH_LEN];
	tu_store_init(&f, T0);
	hash_of(h, 1);
	hash_of(h2, 2);
	struct store_authz_code in = code("https://client.example/cimd.json", f.alice, T0 + 60);
	in.dpop_jkt = (char *)"0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I";
	ck_assert_int_eq(store_authz_code_put(f.c, h, &in), CS_OK);
	ck_assert_int_eq(store_authz_code_take(f.c, h, T0 + 5, &oc, &r), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_TAKE_OK);
	ck_assert_ptr_eq(r.request_id, r.block);
	ck_assert_str_eq(r.request_id, in.request_id);
	ck_assert_str_eq(r.client_id, in.client_id);
	ck_assert_str_eq(r.redirect_uri, in.redirect_uri);
	ck_assert_str_eq(r.code_challenge, in.code_challenge);
	ck_assert_str_eq(r.resource, in.resource);
	ck_assert_str_eq(r.scope, "notes:read");
	ck_assert_str_eq(r.consent_id, in.consent_id);
	ck_assert_str_eq(r.dpop_jkt, in.dpop_jkt);
	ck_assert_ptr_null(r.family_id);
	ck_assert_int_eq(r.user_id, f.alice);
	ck_assert_int_eq(r.created_at, T0);
	ck_assert_int_eq(r.expires_at, T0 + 60);
	ck_assert_int_eq(r.used_at, T0 + 5);
	store_authz_code_clear(&r);
	store_authz_code_clear(&r);
	store_authz_code_clear(NULL);

	in.dpop_jkt = NULL;
	ck_assert_int_eq(store_authz_code_put(f.c, h2, &in), CS_OK);
	ck_assert_int_eq(store_authz_code_take(f.c, h2, T0 + 5, &oc, &r), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_TAKE_OK);
	ck_assert_ptr_null(r.dpop_jkt);
	store_authz_code_clear(&r);

	ck_assert_int_eq(store_authz_code_put(f.c, h2, &in), CS_EEXIST);
	in.consent_id = NULL;
	ck_assert_int_eq(store_authz_code_put(f.c, h, &in), CS_EINVAL);
	in = code("c", 0, T0 + 60);
	ck_assert_int_eq(store_authz_code_put(f.c, h, &in), CS_EINVAL);
	ck_assert_int_eq(store_authz_code_take(f.c, h, 0, &oc, &r), CS_EINVAL);
	tu_store_clear(&f);
}
END_TEST

/* OAuth 2.1 §4.1.3: the first take wins, every later one is a reuse that
 * carries what the first use issued (its family once recorded, its consent),
 * even past the code's expiry; the family is recorded once, never replaced. */
START_TEST(test_store_authz_code_single_use)
{
	struct tu_store f;
	struct store_authz_code r;
	enum store_authz_take oc = AUTHZ_TAKE__MAX;
	unsigned char h[STORE_AUTHZ_CODE_HASH_LEN], other[STORE_AUTHZ_CODE_HASH_LEN];
	tu_store_init(&f, T0);
	hash_of(h, 1);
	hash_of(other, 9);
	struct store_authz_code in = code("client-a", f.alice, T0 + 60);
	ck_assert_int_eq(store_authz_code_put(f.c, h, &in), CS_OK);
	/* No family before the code is used. */
	ck_assert_int_eq(store_authz_code_set_family(f.c, h, "fam-early"), CS_ENOENT);
	ck_assert_int_eq(store_authz_code_take(f.c, h, T0 + 1, &oc, &r), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_TAKE_OK);
	store_authz_code_clear(&r);
	ck_assert_int_eq(store_authz_code_set_family(f.c, h, "fam-1"), CS_OK);
	ck_assert_int_eq(store_authz_code_set_family(f.c, h, "fam-2"), CS_ENOENT);
	ck_assert_int_eq(store_authz_code_set_family(f.c, other, "fam-1"), CS_ENOENT);

	ck_assert_int_eq(store_authz_code_take(f.c, h, T0 + 2, &oc, &r), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_TAKE_REUSED);
	ck_assert_str_eq(r.family_id, "fam-1");
	ck_assert_str_eq(r.consent_id, in.consent_id);
	ck_assert_str_eq(r.client_id, "client-a");
	ck_assert_int_eq(r.used_at, T0 + 1);               /* the first use's time stays */
	store_authz_code_clear(&r);
	/* Past its expiry a used code is still a reuse, not an expired code. */
	ck_assert_int_eq(store_authz_code_take(f.c, h, T0 + 3600, &oc, &r), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_TAKE_REUSED);
	ck_assert_str_eq(r.family_id, "fam-1");
	store_authz_code_clear(&r);
	tu_store_clear(&f);
}
END_TEST

/* From its expiry on (the boundary included) an unused code is refused as
 * expired and stays unused; a hash never put is unknown; *out is left alone
 * for both. */
START_TEST(test_store_authz_code_expiry_and_unknown)
{
	struct tu_store f;
	struct store_authz_code r;
	enum store_authz_take oc = AUTHZ_TAKE__MAX;
	unsigned char h[STORE_AUTHZ_CODE_HASH_LEN], never[STORE_AUTHZ_CODE_HASH_LEN];
	tu_store_init(&f, T0);
	hash_of(h, 1);
	hash_of(never, 200);
	struct store_authz_code in = code("client-a", f.alice, T0 + 60);
	ck_assert_int_eq(store_authz_code_put(f.c, h, &in), CS_OK);
	memset(&r, 0x5a, sizeof r);
	ck_assert_int_eq(store_authz_code_take(f.c, h, T0 + 60, &oc, &r), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_TAKE_EXPIRED);
	ck_assert_ptr_eq(r.block, (void *)0x5a5a5a5a5a5a5a5aULL);
	ck_assert_int_eq(store_authz_code_take(f.c, h, T0 + 61, &oc, &r), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_TAKE_EXPIRED);
	ck_assert_int_eq(store_authz_code_set_family(f.c, h, "fam-1"), CS_ENOENT);   /* unused */
	ck_assert_int_eq(store_authz_code_take(f.c, never, T0, &oc, &r), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_TAKE_UNKNOWN);
	ck_assert_ptr_eq(r.block, (void *)0x5a5a5a5a5a5a5a5aULL);
	/* The expired takes did not use it up: a node whose clock is a second
	 * behind still takes it (once). */
	ck_assert_int_eq(store_authz_code_take(f.c, h, T0 + 59, &oc, &r), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_TAKE_OK);
	store_authz_code_clear(&r);
	tu_store_clear(&f);
}
END_TEST

/* The store finds a code by its hash alone: a token request of client B
 * presenting client A's code gets A's row back, and it is the caller that
 * must compare client_id (store_authz.h). */
START_TEST(test_store_authz_code_found_by_hash_alone)
{
	struct tu_store f;
	struct store_authz_code r;
	enum store_authz_take oc = AUTHZ_TAKE__MAX;
	unsigned char ha[STORE_AUTHZ_CODE_HASH_LEN], hb[STORE_AUTHZ_CODE_HASH_LEN];
	tu_store_init(&f, T0);
	hash_of(ha, 1);
	hash_of(hb, 2);
	struct store_authz_code a = code("https://a.example/client.json", f.alice, T0 + 60);
	struct store_authz_code b = code("https://b.example/client.json", f.bob, T0 + 60);
	ck_assert_int_eq(store_authz_code_put(f.c, ha, &a), CS_OK);
	ck_assert_int_eq(store_authz_code_put(f.c, hb, &b), CS_OK);
	ck_assert_int_eq(store_authz_code_take(f.c, ha, T0 + 1, &oc, &r), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_TAKE_OK);
	ck_assert_str_eq(r.client_id, "https://a.example/client.json");
	ck_assert_int_eq(r.user_id, f.alice);
	store_authz_code_clear(&r);
	ck_assert_int_eq(store_authz_code_take(f.c, hb, T0 + 1, &oc, &r), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_TAKE_OK);
	ck_assert_str_eq(r.client_id, "https://b.example/client.json");
	ck_assert_int_eq(r.user_id, f.bob);
	store_authz_code_clear(&r);
	tu_store_clear(&f);
}
END_TEST

/* Racing takes, each on its own thread's connection: exactly one wins. */
#define RACERS 8
#define RACE_CODES 25

static pthread_barrier_t race_barrier;

struct racer {
	struct store         *s;
	const unsigned char (*hashes)[STORE_AUTHZ_CODE_HASH_LEN];
	enum store_authz_take oc[RACE_CODES];
	enum cs_err           e[RACE_CODES];
};

static void *racer_main(void *arg)
{
	struct racer *t = arg;
	struct store_conn *c = store_conn(t->s);
	for (int i = 0; i < RACE_CODES; i++) {
		struct store_authz_code r;
		pthread_barrier_wait(&race_barrier);
		t->e[i] = c == NULL ? CS_EDB : store_authz_code_take(c, t->hashes[i], T0 + 1, &t->oc[i], &r);
		if (t->e[i] == CS_OK && (t->oc[i] == AUTHZ_TAKE_OK || t->oc[i] == AUTHZ_TAKE_REUSED))
			store_authz_code_clear(&r);
	}
	return NULL;
}

START_TEST(test_store_authz_code_race_one_winner)
{
	struct tu_store f;
	static unsigned char hashes[RACE_CODES][STORE_AUTHZ_CODE_HASH_LEN];
	static struct racer rs[RACERS];
	pthread_t th[RACERS];
	tu_store_init(&f, T0);
	struct store_authz_code in = code("client-a", f.alice, T0 + 60);
	for (int i = 0; i < RACE_CODES; i++) {
		hash_of(hashes[i], (unsigned char)(i + 1));
		ck_assert_int_eq(store_authz_code_put(f.c, hashes[i], &in), CS_OK);
	}
	ck_assert_int_eq(pthread_barrier_init(&race_barrier, NULL, RACERS), 0);
	for (int k = 0; k < RACERS; k++) {
		memset(&rs[k], 0, sizeof rs[k]);
		rs[k].s = f.s;
		rs[k].hashes = (const unsigned char (*)[STORE_AUTHZ_CODE_HASH_LEN])hashes;
		ck_assert_int_eq(pthread_create(&th[k], NULL, racer_main, &rs[k]), 0);
	}
	for (int k = 0; k < RACERS; k++)
		pthread_join(th[k], NULL);
	pthread_barrier_destroy(&race_barrier);
	for (int i = 0; i < RACE_CODES; i++) {
		int won = 0, reused = 0;
		for (int k = 0; k < RACERS; k++) {
			ck_assert_msg(rs[k].e[i] == CS_OK, "code %d, racer %d: %s", i, k,
			    cs_strerror(rs[k].e[i]));
			won += rs[k].oc[i] == AUTHZ_TAKE_OK;
			reused += rs[k].oc[i] == AUTHZ_TAKE_REUSED;
		}
		ck_assert_msg(won == 1, "code %d taken %d times", i, won);
		ck_assert_int_eq(reused, RACERS - 1);
	}
	tu_store_clear(&f);
}
END_TEST

/* The contract of store_authz.h: a take, the issuance and set_family in one
 * transaction make a racing take wait for their commit, so that a reuse
 * always finds the family to revoke.  A takes inside its transaction and
 * records the family only later; B's take, started after A's, must see it. */
static sem_t taken;

struct late_taker {
	struct store         *s;
	const unsigned char  *hash;
	enum cs_err           e;
	enum store_authz_take oc;
	char                  family[32];
};

static void *late_taker_main(void *arg)
{
	struct late_taker *t = arg;
	struct store_authz_code r;
	struct store_conn *c = store_conn(t->s);
	while (sem_wait(&taken) != 0)
		;
	t->e = c == NULL ? CS_EDB : store_authz_code_take(c, t->hash, T0 + 2, &t->oc, &r);
	if (t->e == CS_OK && t->oc == AUTHZ_TAKE_REUSED) {
		if (r.family_id != NULL && strlen(r.family_id) < sizeof t->family)
			memcpy(t->family, r.family_id, strlen(r.family_id) + 1);
		store_authz_code_clear(&r);
	}
	return NULL;
}

START_TEST(test_store_authz_code_reuse_waits_for_issuance)
{
	struct tu_store f;
	struct store_authz_code r;
	enum store_authz_take oc = AUTHZ_TAKE__MAX;
	unsigned char h[STORE_AUTHZ_CODE_HASH_LEN];
	static struct late_taker t;
	pthread_t th;
	tu_store_init(&f, T0);
	hash_of(h, 1);
	struct store_authz_code in = code("client-a", f.alice, T0 + 60);
	ck_assert_int_eq(store_authz_code_put(f.c, h, &in), CS_OK);
	memset(&t, 0, sizeof t);
	t.s = f.s;
	t.hash = h;
	ck_assert_int_eq(sem_init(&taken, 0, 0), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, late_taker_main, &t), 0);
	ck_assert_int_eq(store_begin(f.c), CS_OK);
	ck_assert_int_eq(store_authz_code_take(f.c, h, T0 + 1, &oc, &r), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_TAKE_OK);
	store_authz_code_clear(&r);
	ck_assert_int_eq(sem_post(&taken), 0);
	usleep(300 * 1000);                                   /* the issuance */
	ck_assert_int_eq(store_authz_code_set_family(f.c, h, "fam-tx"), CS_OK);
	ck_assert_int_eq(store_commit(f.c), CS_OK);
	pthread_join(th, NULL);
	sem_destroy(&taken);
	ck_assert_int_eq(t.e, CS_OK);
	ck_assert_int_eq(t.oc, AUTHZ_TAKE_REUSED);
	ck_assert_str_eq(t.family, "fam-tx");
	tu_store_clear(&f);
}
END_TEST

/* The janitor removes requests and codes from expires_at + grace on, used or
 * not; until then a used code stays a reuse, after it the hash is unknown. */
START_TEST(test_store_authz_janitor_purge)
{
	struct tu_store f;
	struct store_authz_request q;
	struct store_authz_code r;
	struct janitor_stats st;
	struct config cfg;
	enum store_authz_take oc = AUTHZ_TAKE__MAX;
	unsigned char used[STORE_AUTHZ_CODE_HASH_LEN], unused[STORE_AUTHZ_CODE_HASH_LEN],
	    live[STORE_AUTHZ_CODE_HASH_LEN];
	tu_store_init(&f, T0);
	memset(&cfg, 0, sizeof cfg);
	cfg.retention_batch_size = 500;
	cfg.retention_grace = GRACE;
	cfg.retention_revoked_consent_days = 90;
	hash_of(used, 1);
	hash_of(unused, 2);
	hash_of(live, 3);
	struct store_authz_request rq_old = request("OLDOLDOLDOLDOLDOLDOLDO", T0 + 600);
	struct store_authz_request rq_live = request("LIVELIVELIVELIVELIVELI", T0 + 601);
	ck_assert_int_eq(store_authz_request_put(f.c, &rq_old), CS_OK);
	ck_assert_int_eq(store_authz_request_put(f.c, &rq_live), CS_OK);
	struct store_authz_code in = code("client-a", f.alice, T0 + 60);
	ck_assert_int_eq(store_authz_code_put(f.c, used, &in), CS_OK);
	ck_assert_int_eq(store_authz_code_put(f.c, unused, &in), CS_OK);
	in.expires_at = T0 + 61;
	ck_assert_int_eq(store_authz_code_put(f.c, live, &in), CS_OK);
	ck_assert_int_eq(store_authz_code_take(f.c, used, T0 + 1, &oc, &r), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_TAKE_OK);
	store_authz_code_clear(&r);

	/* Within the grace nothing goes, and the used code is still a reuse. */
	ck_assert_int_eq(janitor_run(f.c, &cfg, T0 + 60 + GRACE - 1, &st), CS_OK);
	ck_assert_int_eq(st.removed[JANITOR_AUTHZ_CODES], 0);
	ck_assert_int_eq(st.removed[JANITOR_AUTHZ_REQUESTS], 0);
	ck_assert_int_eq(store_authz_code_take(f.c, used, T0 + 60 + GRACE - 1, &oc, &r), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_TAKE_REUSED);
	store_authz_code_clear(&r);
	/* At expires_at + grace both codes expiring then go, used or not; the
	 * one a second younger stays. */
	ck_assert_int_eq(janitor_run(f.c, &cfg, T0 + 60 + GRACE, &st), CS_OK);
	ck_assert_int_eq(st.removed[JANITOR_AUTHZ_CODES], 2);
	ck_assert_int_eq(store_authz_code_take(f.c, used, T0 + 60 + GRACE, &oc, &r), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_TAKE_UNKNOWN);
	ck_assert_int_eq(store_authz_code_take(f.c, unused, T0 + 60 + GRACE, &oc, &r), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_TAKE_UNKNOWN);
	ck_assert_int_eq(store_authz_code_take(f.c, live, T0 + 60 + GRACE, &oc, &r), CS_OK);
	ck_assert_int_eq(oc, AUTHZ_TAKE_EXPIRED);
	/* The requests the same way, a pass of each of the two at its edge. */
	ck_assert_int_eq(janitor_run(f.c, &cfg, T0 + 600 + GRACE, &st), CS_OK);
	ck_assert_int_eq(st.removed[JANITOR_AUTHZ_REQUESTS], 1);
	ck_assert_int_eq(st.removed[JANITOR_AUTHZ_CODES], 1);
	ck_assert_int_eq(store_authz_request_delete(f.c, rq_old.id), CS_ENOENT);
	ck_assert_int_eq(store_authz_request_get(f.c, rq_live.id, T0, &q), CS_OK);
	store_authz_request_clear(&q);
	ck_assert_int_eq(janitor_run(f.c, &cfg, T0 + 601 + GRACE, &st), CS_OK);
	ck_assert_int_eq(st.removed[JANITOR_AUTHZ_REQUESTS], 1);
	ck_assert_int_eq(store_authz_request_delete(f.c, rq_live.id), CS_ENOENT);
	tu_store_clear(&f);
}
END_TEST

static Suite *store_authz_suite(void)
{
	Suite *s = suite_create(tu_pg_url != NULL ? "store_authz (postgresql)" : "store_authz (sqlite)");
	TCase *tc = tcase_create("requests");
	tcase_add_test(tc, test_store_authz_request_round_trip);
	tcase_add_test(tc, test_store_authz_request_expiry);
	tcase_add_test(tc, test_store_authz_request_bind_one_person);
	tcase_add_test(tc, test_store_authz_request_delete_once);
	tcase_add_test(tc, test_store_authz_request_by_consent);
	suite_add_tcase(s, tc);
	tc = tcase_create("codes");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_store_authz_code_round_trip);
	tcase_add_test(tc, test_store_authz_code_single_use);
	tcase_add_test(tc, test_store_authz_code_expiry_and_unknown);
	tcase_add_test(tc, test_store_authz_code_found_by_hash_alone);
	tcase_add_test(tc, test_store_authz_code_race_one_winner);
	tcase_add_test(tc, test_store_authz_code_reuse_waits_for_issuance);
	tcase_add_test(tc, test_store_authz_janitor_purge);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_store_run(store_authz_suite);
}
