/* test_jwt.c -- the keyring (generation, sealing, reuse, JWKS, RFC 7638 kid)
 * and JWS sign/verify, with the attacker's tokens first-class: alg none, HMAC
 * with the public key, wrong typ, unknown kid, tampering, malformed shapes;
 * rotation and revocation at fixed times. */
#include <pthread.h>
#include <stdint.h>
#include <sqlite3.h>

#include <cjose/cjose.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "buf.h"
#include "testutil.h"
#include "jwt.h"
#include "seal.h"
#include "store.h"

#define NOW 1700000000
#define TTL 300                  /* grant_ttl */
#define KEEP (TTL + KEYRING_RELOAD_SLACK)
#define LEAD 3600                /* publish_lead */

struct fixture {
	char              *dir;
	char              *db;
	struct store      *s;
	struct master_key  mk;
	struct keyring    *kr;
};

static void fx_init(struct fixture *f, unsigned char fill)
{
	memset(f, 0, sizeof *f);
	f->dir = tu_tmpdir();
	f->db = tu_path(f->dir, "consentd.db");
	memset(f->mk.bytes, fill, sizeof f->mk.bytes);
	memcpy(f->mk.kid, "00112233aabbccdd", MASTER_KID_LEN + 1);
	ck_assert_int_eq(store_open(f->db, &f->s), CS_OK);
	ck_assert_int_eq(keyring_load(store_conn(f->s), &f->mk, NOW, TTL, &f->kr), CS_OK);
}

static void fx_clear(struct fixture *f)
{
	keyring_free(f->kr);
	store_close(f->s);
	free(f->db);
	tu_rmdir(f->dir);
}

/* Our own base64url (no padding), independent of the code under test. */
static char *b64u(const void *p, size_t n)
{
	size_t cap = 4 * ((n + 2) / 3) + 1;
	char *s = malloc(cap);
	ck_assert_ptr_nonnull(s);
	EVP_EncodeBlock((unsigned char *)s, p, (int)n);
	size_t len = strlen(s);
	while (len > 0 && s[len - 1] == '=')
		s[--len] = '\0';
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '+')
			s[i] = '-';
		else if (s[i] == '/')
			s[i] = '_';
	}
	return s;
}

static char *b64u_str(const char *s)
{
	return b64u(s, strlen(s));
}

/* "a.b.c" from three parts. */
static char *join3(const char *a, const char *b, const char *c)
{
	size_t n = strlen(a) + strlen(b) + strlen(c) + 3;
	char *r = malloc(n);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(str_fmt(r, n, "%s.%s.%s", a, b, c), CS_OK);
	return r;
}

/* A token with the given header and payload JSON and an explicit signature segment. */
static char *craft(const char *hdr, const char *payload, const char *sig_b64u)
{
	char *h = b64u_str(hdr), *p = b64u_str(payload);
	char *t = join3(h, p, sig_b64u);
	free(h);
	free(p);
	return t;
}

/* Splits a compact token into its three segments (malloc'd). */
static void split3(const char *t, char **h, char **p, char **s)
{
	const char *d1 = strchr(t, '.');
	ck_assert_ptr_nonnull(d1);
	const char *d2 = strchr(d1 + 1, '.');
	ck_assert_ptr_nonnull(d2);
	*h = strndup(t, (size_t)(d1 - t));
	*p = strndup(d1 + 1, (size_t)(d2 - d1 - 1));
	*s = strdup(d2 + 1);
}

static json_t *sample_claims(void)
{
	json_t *c = json_pack("{s:s, s:s, s:s, s:{s:s}, s:s, s:I, s:I}",
	    "iss", "https://consent.example.com", "sub", "user-1", "aud", "agent-gateway",
	    "act", "sub", "coder", "scope", "notes:read", "iat", (json_int_t)NOW,
	    "exp", (json_int_t)NOW + 300);
	ck_assert_ptr_nonnull(c);
	return c;
}

static char *sign_sample(struct keyring *kr, const char *typ)
{
	json_t *c = sample_claims();
	char *t = NULL;
	ck_assert_int_eq(jwt_sign(kr, typ, c, &t), CS_OK);
	json_decref(c);
	return t;
}

static void expect_refused(struct keyring *kr, const char *typ, const char *token)
{
	json_t *claims = (json_t *)0x1;
	enum cs_err e = jwt_verify(kr, typ, token, &claims);
	ck_assert_msg(e == CS_ECRYPTO || e == CS_EINVAL, "verify gave %d", (int)e);
	ck_assert_ptr_eq(claims, (json_t *)0x1);
}

/* The private JWK of the signing key, read back from the store the way
 * jwt.c does, so the test can sign things jwt_sign refuses to. */
static cjose_jwk_t *stored_jwk(struct fixture *f)
{
	struct store_key *ks = NULL;
	size_t n = 0;
	unsigned char *pt = NULL;
	size_t pt_len = 0;
	const char *kid = keyring_signing_kid(f->kr);
	cjose_jwk_t *jwk = NULL;
	ck_assert_int_eq(store_keys_list(store_conn(f->s), &ks, &n), CS_OK);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(ks[i].kid, kid) != 0)
			continue;
		ck_assert_int_eq(unseal(&f->mk, "signing-key", kid, strlen(kid), ks[i].sealed,
		    ks[i].sealed_len, &pt, &pt_len), CS_OK);
		jwk = cjose_jwk_import((const char *)pt, pt_len, NULL);
		OPENSSL_cleanse(pt, pt_len);
		free(pt);
	}
	store_keys_free(ks, n);
	ck_assert_ptr_nonnull(jwk);
	return jwk;
}

/* Signs an arbitrary payload with the ring's real key through cjose directly. */
static char *sign_raw_alg(struct fixture *f, const char *alg, const char *typ,
    const char *payload)
{
	cjose_jwk_t *jwk = stored_jwk(f);
	cjose_header_t *h = cjose_header_new(NULL);
	ck_assert(cjose_header_set(h, CJOSE_HDR_ALG, alg, NULL));
	ck_assert(cjose_header_set(h, "typ", typ, NULL));
	ck_assert(cjose_header_set(h, CJOSE_HDR_KID, keyring_signing_kid(f->kr), NULL));
	cjose_jws_t *jws = cjose_jws_sign(jwk, h, (const uint8_t *)payload, strlen(payload), NULL);
	ck_assert_ptr_nonnull(jws);
	const char *ser = NULL;
	ck_assert(cjose_jws_export(jws, &ser, NULL));
	char *r = strdup(ser);
	cjose_jws_release(jws);
	cjose_header_release(h);
	cjose_jwk_release(jwk);
	return r;
}

static char *sign_raw(struct fixture *f, const char *typ, const char *payload)
{
	return sign_raw_alg(f, "ES256", typ, payload);
}

/* --- keyring ----------------------------------------------------------- */

START_TEST(test_jwt_keyring_generates_sealed)
{
	struct fixture f;
	struct store_key *ks = NULL;
	size_t n = 0;
	fx_init(&f, 0x11);
	ck_assert_ptr_nonnull(keyring_signing_kid(f.kr));
	ck_assert_int_eq(store_keys_list(store_conn(f.s), &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(ks[0].kid, keyring_signing_kid(f.kr));
	ck_assert_str_eq(ks[0].alg, "ES256");
	ck_assert_str_eq(ks[0].master_kid, f.mk.kid);
	ck_assert_int_eq(ks[0].sign_after, NOW);
	ck_assert_int_eq(ks[0].created_at, NOW);
	ck_assert(memmem(ks[0].sealed, ks[0].sealed_len, "\"d\"", 3) == NULL);
	ck_assert(memmem(ks[0].sealed, ks[0].sealed_len, "P-256", 5) == NULL);
	store_keys_free(ks, n);
	fx_clear(&f);
}
END_TEST

START_TEST(test_jwt_keyring_reload_reuses)
{
	struct fixture f;
	struct keyring *again = NULL;
	struct store_key *ks = NULL;
	size_t n = 0;
	fx_init(&f, 0x11);
	char *kid = strdup(keyring_signing_kid(f.kr));
	ck_assert_int_eq(keyring_load(store_conn(f.s), &f.mk, NOW + 100, TTL, &again), CS_OK);
	ck_assert_str_eq(keyring_signing_kid(again), kid);
	ck_assert_int_eq(store_keys_list(store_conn(f.s), &ks, &n), CS_OK);
	ck_assert_uint_eq(n, 1);
	store_keys_free(ks, n);
	/* a token of the first load verifies with the second */
	char *t = sign_sample(f.kr, "at+jwt");
	json_t *c = NULL;
	ck_assert_int_eq(jwt_verify(again, "at+jwt", t, &c), CS_OK);
	json_decref(c);
	free(t);
	free(kid);
	keyring_free(again);
	fx_clear(&f);
}
END_TEST

START_TEST(test_jwt_keyring_wrong_master_fails)
{
	struct fixture f;
	struct master_key other;
	struct keyring *kr = (struct keyring *)0x1;
	fx_init(&f, 0x11);
	memset(&other, 0, sizeof other);
	memset(other.bytes, 0x22, sizeof other.bytes);
	memcpy(other.kid, "ffffffffffffffff", MASTER_KID_LEN + 1);
	ck_assert_int_eq(keyring_load(store_conn(f.s), &other, NOW, TTL, &kr), CS_ECRYPTO);
	ck_assert_ptr_eq(kr, (struct keyring *)0x1);
	fx_clear(&f);
}
END_TEST

START_TEST(test_jwt_keyring_retire_rotates)
{
	struct fixture f;
	struct keyring *kr2 = NULL;
	fx_init(&f, 0x11);
	char *old = strdup(keyring_signing_kid(f.kr));
	char *t = sign_sample(f.kr, "at+jwt");
	ck_assert_int_eq(store_key_set_retired(store_conn(f.s), old, NOW + 1), CS_OK);
	ck_assert_int_eq(keyring_load(store_conn(f.s), &f.mk, NOW + 2, TTL, &kr2), CS_OK);
	ck_assert_str_ne(keyring_signing_kid(kr2), old);
	/* the retired key stays published and its tokens verify */
	char *jwks = NULL;
	ck_assert_int_eq(keyring_jwks(kr2, &jwks), CS_OK);
	ck_assert(strstr(jwks, old) != NULL);
	ck_assert(strstr(jwks, keyring_signing_kid(kr2)) != NULL);
	json_t *c = NULL;
	ck_assert_int_eq(jwt_verify(kr2, "at+jwt", t, &c), CS_OK);
	json_decref(c);
	free(jwks);
	/* revoked: gone at once, and so are its tokens */
	keyring_free(kr2);
	kr2 = NULL;
	ck_assert_int_eq(store_key_set_revoked(store_conn(f.s), old, NOW + 3), CS_OK);
	ck_assert_int_eq(keyring_load(store_conn(f.s), &f.mk, NOW + 4, TTL, &kr2), CS_OK);
	ck_assert_int_eq(keyring_jwks(kr2, &jwks), CS_OK);
	ck_assert(strstr(jwks, old) == NULL);
	expect_refused(kr2, "at+jwt", t);
	free(jwks);
	free(t);
	free(old);
	keyring_free(kr2);
	fx_clear(&f);
}
END_TEST

/* --- rotation and revocation ------------------------------------------- */

static struct keyring *load_at(struct fixture *f, int64_t now)
{
	struct keyring *kr = NULL;
	ck_assert_int_eq(keyring_load(store_conn(f->s), &f->mk, now, TTL, &kr), CS_OK);
	return kr;
}

/* The kids of kr's JWKS, as one string "kid1 kid2 ..." in document order,
 * and their number. */
static size_t jwks_kids(const struct keyring *kr, char *out, size_t cap)
{
	char *doc = NULL;
	ck_assert_int_eq(keyring_jwks(kr, &doc), CS_OK);
	json_t *j = json_loads(doc, 0, NULL);
	ck_assert_ptr_nonnull(j);
	json_t *keys = json_object_get(j, "keys");
	size_t n = json_array_size(keys), used = 0;
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(str_fmt(out + used, cap - used, "%s%s", i ? " " : "",
		    json_string_value(json_object_get(json_array_get(keys, i), "kid"))), CS_OK);
		int w = (int)strlen(out + used);
		ck_assert(w > 0 && (size_t)w < cap - used);
		used += (size_t)w;
	}
	json_decref(j);
	free(doc);
	return n;
}

static bool published_in(const struct keyring *kr, const char *kid)
{
	char kids[1024];
	jwks_kids(kr, kids, sizeof kids);
	return strstr(kids, kid) != NULL;
}

static void expect_verifies(const struct keyring *kr, const char *token)
{
	json_t *c = NULL;
	ck_assert_int_eq(jwt_verify(kr, "at+jwt", token, &c), CS_OK);
	json_decref(c);
}

/* The state keyring_classify gives kid in the store at now. */
static enum key_state state_of(struct fixture *f, const char *kid, int64_t now)
{
	struct store_key *ks = NULL;
	size_t n = 0;
	enum key_state r = KEY_STATE__MAX;
	ck_assert_int_eq(store_keys_list(store_conn(f->s), &ks, &n), CS_OK);
	struct key_status *st = calloc(n, sizeof *st);
	ck_assert_ptr_nonnull(st);
	keyring_classify(ks, n, now, TTL, st);
	for (size_t i = 0; i < n; i++)
		if (strcmp(ks[i].kid, kid) == 0)
			r = st[i].state;
	free(st);
	store_keys_free(ks, n);
	return r;
}

static size_t stored_keys(struct fixture *f)
{
	struct store_key *ks = NULL;
	size_t n = 0;
	ck_assert_int_eq(store_keys_list(store_conn(f->s), &ks, &n), CS_OK);
	store_keys_free(ks, n);
	return n;
}

START_TEST(test_jwt_rotate_publish_then_switch)
{
	struct fixture f;
	char *k2 = NULL;
	char kids[1024];
	fx_init(&f, 0x11);
	char *k1 = strdup(keyring_signing_kid(f.kr));
	const int64_t rot = NOW + 10, sw = rot + LEAD;

	ck_assert_int_eq(keyring_generate_key(store_conn(f.s), &f.mk, rot, sw, &k2), CS_OK);
	ck_assert_str_ne(k1, k2);
	ck_assert_uint_eq(stored_keys(&f), 2);

	/* Published at once, but the old key goes on signing until sw. */
	struct keyring *before = load_at(&f, rot);
	ck_assert_uint_eq(jwks_kids(before, kids, sizeof kids), 2);
	ck_assert(strstr(kids, k1) != NULL && strstr(kids, k2) != NULL);
	ck_assert_str_eq(keyring_signing_kid(before), k1);
	ck_assert_int_eq(state_of(&f, k1, rot), KEY_SIGNING);
	ck_assert_int_eq(state_of(&f, k2, rot), KEY_UPCOMING);
	char *t1 = sign_sample(before, "at+jwt");
	struct keyring *last = load_at(&f, sw - 1);
	ck_assert_str_eq(keyring_signing_kid(last), k1);
	keyring_free(last);

	/* From sw the new key signs; the old one stays published and verifiable. */
	struct keyring *after = load_at(&f, sw);
	ck_assert_str_eq(keyring_signing_kid(after), k2);
	ck_assert_uint_eq(jwks_kids(after, kids, sizeof kids), 2);
	ck_assert_int_eq(state_of(&f, k1, sw), KEY_RETIRED_PUBLISHED);
	ck_assert_int_eq(state_of(&f, k2, sw), KEY_SIGNING);
	expect_verifies(after, t1);
	char *t2 = sign_sample(after, "at+jwt");
	/* a server that has not reloaded yet already knows the new key */
	expect_verifies(before, t2);
	ck_assert_uint_eq(stored_keys(&f), 2);       /* nothing generated on the way */

	/* Until grant_ttl + 60 s after the switch... */
	struct keyring *late = load_at(&f, sw + KEEP - 1);
	ck_assert(published_in(late, k1));
	expect_verifies(late, t1);
	keyring_free(late);
	/* ...and not a second longer: gone from the JWKS, its tokens refused. */
	struct keyring *gone = load_at(&f, sw + KEEP);
	ck_assert_uint_eq(jwks_kids(gone, kids, sizeof kids), 1);
	ck_assert_str_eq(kids, k2);
	ck_assert_str_eq(keyring_signing_kid(gone), k2);
	ck_assert_int_eq(state_of(&f, k1, sw + KEEP), KEY_RETIRED);
	expect_refused(gone, "at+jwt", t1);
	expect_verifies(gone, t2);
	ck_assert_uint_eq(stored_keys(&f), 2);

	keyring_free(gone);
	keyring_free(after);
	keyring_free(before);
	free(t1);
	free(t2);
	free(k1);
	free(k2);
	fx_clear(&f);
}
END_TEST

/* Two rotations in a row: the middle key's published time runs from the
 * third key's start, and the first key's from the second's. */
START_TEST(test_jwt_rotate_twice_each_key_kept_from_its_successor)
{
	struct fixture f;
	char *k2 = NULL, *k3 = NULL;
	fx_init(&f, 0x11);
	char *k1 = strdup(keyring_signing_kid(f.kr));
	ck_assert_int_eq(keyring_generate_key(store_conn(f.s), &f.mk, NOW, NOW + 100, &k2), CS_OK);
	ck_assert_int_eq(keyring_generate_key(store_conn(f.s), &f.mk, NOW, NOW + 1000, &k3), CS_OK);
	struct keyring *kr = load_at(&f, NOW + 100 + KEEP - 1);
	ck_assert_str_eq(keyring_signing_kid(kr), k2);
	ck_assert(published_in(kr, k1) && published_in(kr, k3));
	keyring_free(kr);
	kr = load_at(&f, NOW + 100 + KEEP);
	ck_assert(!published_in(kr, k1));
	ck_assert(published_in(kr, k2) && published_in(kr, k3));
	keyring_free(kr);
	kr = load_at(&f, NOW + 1000 + KEEP - 1);
	ck_assert_str_eq(keyring_signing_kid(kr), k3);
	ck_assert(published_in(kr, k2));
	keyring_free(kr);
	kr = load_at(&f, NOW + 1000 + KEEP);
	ck_assert(!published_in(kr, k2));
	ck_assert_str_eq(keyring_signing_kid(kr), k3);
	keyring_free(kr);
	free(k1);
	free(k2);
	free(k3);
	fx_clear(&f);
}
END_TEST

START_TEST(test_jwt_revoke_gone_at_once)
{
	struct fixture f;
	char *k2 = NULL, *next = NULL;
	fx_init(&f, 0x11);
	char *k1 = strdup(keyring_signing_kid(f.kr));
	/* publish_lead = 0: the new key signs at once */
	ck_assert_int_eq(keyring_generate_key(store_conn(f.s), &f.mk, NOW + 1, NOW + 1, &k2), CS_OK);
	struct keyring *kr = load_at(&f, NOW + 2);
	ck_assert_str_eq(keyring_signing_kid(kr), k2);
	char *t2 = sign_sample(kr, "at+jwt");
	expect_verifies(kr, t2);
	keyring_free(kr);

	/* k1 is published, so it may take over again */
	ck_assert_int_eq(keyring_revoke_key(store_conn(f.s), k2, NOW + 3, TTL, &next), CS_OK);
	ck_assert_str_eq(next, k1);
	kr = load_at(&f, NOW + 3);
	char kids[1024];
	ck_assert_uint_eq(jwks_kids(kr, kids, sizeof kids), 1);
	ck_assert_str_eq(kids, k1);
	ck_assert_str_eq(keyring_signing_kid(kr), k1);
	expect_refused(kr, "at+jwt", t2);
	keyring_free(kr);
	/* and k1 signs for good: no retirement clock runs for it any more */
	kr = load_at(&f, NOW + 3 + 10 * KEEP);
	ck_assert_str_eq(keyring_signing_kid(kr), k1);
	keyring_free(kr);

	/* the only key left: refused, and nothing changed */
	char *untouched = (char *)0x1;
	ck_assert_int_eq(keyring_revoke_key(store_conn(f.s), k1, NOW + 4, TTL, &untouched), CS_EPERM);
	ck_assert_ptr_eq(untouched, (char *)0x1);
	ck_assert_uint_eq(stored_keys(&f), 1);
	ck_assert_int_eq(state_of(&f, k1, NOW + 4), KEY_SIGNING);
	/* unknown or already revoked kids */
	ck_assert_int_eq(keyring_revoke_key(store_conn(f.s), k2, NOW + 4, TTL, NULL), CS_ENOENT);
	ck_assert_int_eq(keyring_revoke_key(store_conn(f.s), "nope", NOW + 4, TTL, NULL), CS_ENOENT);
	ck_assert_int_eq(keyring_revoke_key(store_conn(f.s), "", NOW + 4, TTL, NULL), CS_EINVAL);
	ck_assert_int_eq(keyring_revoke_key(store_conn(f.s), NULL, NOW + 4, TTL, NULL), CS_EINVAL);
	free(next);
	free(t2);
	free(k1);
	free(k2);
	fx_clear(&f);
}
END_TEST

/* The signing key cannot be revoked while its successor is still upcoming,
 * nor in favour of a key clients have already dropped. */
START_TEST(test_jwt_revoke_signer_needs_ready_successor)
{
	struct fixture f;
	char *k2 = NULL, *next = NULL;
	fx_init(&f, 0x11);
	char *k1 = strdup(keyring_signing_kid(f.kr));
	ck_assert_int_eq(keyring_generate_key(store_conn(f.s), &f.mk, NOW, NOW + LEAD, &k2), CS_OK);
	ck_assert_int_eq(keyring_revoke_key(store_conn(f.s), k1, NOW + 1, TTL, NULL), CS_EPERM);
	/* once k2 signs, k1 (retired but published) may go */
	ck_assert_int_eq(keyring_revoke_key(store_conn(f.s), k1, NOW + LEAD, TTL, &next), CS_OK);
	ck_assert_str_eq(next, k2);
	free(next);
	next = NULL;
	struct keyring *kr = load_at(&f, NOW + LEAD);
	ck_assert(!published_in(kr, k1));
	ck_assert_str_eq(keyring_signing_kid(kr), k2);
	keyring_free(kr);
	free(k1);
	free(k2);
	fx_clear(&f);

	/* k1 retired long ago (no longer published): k2 may not hand back to it */
	fx_init(&f, 0x11);
	k1 = strdup(keyring_signing_kid(f.kr));
	ck_assert_int_eq(keyring_generate_key(store_conn(f.s), &f.mk, NOW, NOW + 1, &k2), CS_OK);
	ck_assert_int_eq(keyring_revoke_key(store_conn(f.s), k2, NOW + 1 + KEEP, TTL, NULL), CS_EPERM);
	ck_assert_int_eq(keyring_revoke_key(store_conn(f.s), k2, NOW + KEEP, TTL, &next), CS_OK);
	ck_assert_str_eq(next, k1);
	free(next);
	free(k1);
	free(k2);
	fx_clear(&f);
}
END_TEST

/* An upcoming key may be withdrawn: it leaves the JWKS and never signs. */
START_TEST(test_jwt_revoke_upcoming)
{
	struct fixture f;
	char *k2 = NULL, *next = NULL;
	fx_init(&f, 0x11);
	char *k1 = strdup(keyring_signing_kid(f.kr));
	ck_assert_int_eq(keyring_generate_key(store_conn(f.s), &f.mk, NOW, NOW + LEAD, &k2), CS_OK);
	ck_assert_int_eq(keyring_revoke_key(store_conn(f.s), k2, NOW + 1, TTL, &next), CS_OK);
	ck_assert_str_eq(next, k1);
	struct keyring *kr = load_at(&f, NOW + LEAD + 1);
	ck_assert(!published_in(kr, k2));
	ck_assert_str_eq(keyring_signing_kid(kr), k1);
	keyring_free(kr);
	free(next);
	free(k1);
	free(k2);
	fx_clear(&f);
}
END_TEST

/* A key that is no longer published is not even unsealed: a row that would
 * not open fails the load only while it is published. */
START_TEST(test_jwt_unpublished_key_not_unsealed)
{
	struct fixture f;
	struct store_key k;
	struct keyring *kr = (struct keyring *)0x1;
	unsigned char junk[64];
	fx_init(&f, 0x11);
	memset(&k, 0, sizeof k);
	memset(junk, 0x5a, sizeof junk);
	k.kid = (char *)"old-key-that-does-not-open";
	k.alg = (char *)"ES256";
	k.created_at = NOW - 100000;
	k.sign_after = NOW - 100000;
	k.master_kid = f.mk.kid;
	k.sealed = junk;
	k.sealed_len = sizeof junk;
	ck_assert_int_eq(store_key_insert(store_conn(f.s), &k), CS_OK);
	/* replaced at NOW by the fixture's key: published until NOW + KEEP */
	ck_assert_int_eq(keyring_load(store_conn(f.s), &f.mk, NOW + KEEP - 1, TTL, &kr), CS_ECRYPTO);
	ck_assert_ptr_eq(kr, (struct keyring *)0x1);
	kr = load_at(&f, NOW + KEEP);
	ck_assert(!published_in(kr, "old-key-that-does-not-open"));
	keyring_free(kr);
	fx_clear(&f);
}
END_TEST

/* keyring_classify on its own, with hand-made rows. */
START_TEST(test_jwt_classify_states)
{
	struct store_key ks[5];
	struct key_status st[5];
	memset(ks, 0, sizeof ks);
	ks[0].sign_after = 100;                    /* A */
	ks[1].sign_after = 200;                    /* B */
	ks[2].sign_after = 200;                    /* C: same start, newer row: wins */
	ks[3].sign_after = 150;                    /* D: revoked, replaces nobody */
	ks[3].revoked_at = 160;
	ks[4].sign_after = 1000;                   /* E: upcoming */

	keyring_classify(ks, 5, 150, TTL, st);
	ck_assert_int_eq(st[0].state, KEY_SIGNING);
	ck_assert_int_eq(st[0].stopped_at, 0);
	ck_assert_int_eq(st[1].state, KEY_UPCOMING);
	ck_assert_int_eq(st[2].state, KEY_UPCOMING);
	ck_assert_int_eq(st[3].state, KEY_REVOKED);
	ck_assert_int_eq(st[4].state, KEY_UPCOMING);

	keyring_classify(ks, 5, 200, TTL, st);
	ck_assert_int_eq(st[0].state, KEY_RETIRED_PUBLISHED);
	ck_assert_int_eq(st[0].stopped_at, 200);
	ck_assert_int_eq(st[0].unpublish_at, 200 + KEEP);
	ck_assert_int_eq(st[1].state, KEY_RETIRED_PUBLISHED);
	ck_assert_int_eq(st[1].stopped_at, 200);
	ck_assert_int_eq(st[2].state, KEY_SIGNING);

	keyring_classify(ks, 5, 200 + KEEP, TTL, st);
	ck_assert_int_eq(st[0].state, KEY_RETIRED);
	ck_assert_int_eq(st[1].state, KEY_RETIRED);
	ck_assert_int_eq(st[2].state, KEY_SIGNING);
	ck_assert_int_eq(st[4].state, KEY_UPCOMING);

	keyring_classify(ks, 5, 1000, TTL, st);
	ck_assert_int_eq(st[2].state, KEY_RETIRED_PUBLISHED);
	ck_assert_int_eq(st[2].stopped_at, 1000);
	ck_assert_int_eq(st[4].state, KEY_SIGNING);

	/* retired_at set by hand stops a key at that time; the newest key left
	 * signs again (as after a revocation) */
	ks[2].retired_at = 300;
	keyring_classify(ks, 5, 299, TTL, st);
	ck_assert_int_eq(st[2].state, KEY_SIGNING);
	keyring_classify(ks, 5, 300, TTL, st);
	ck_assert_int_eq(st[2].state, KEY_RETIRED_PUBLISHED);
	ck_assert_int_eq(st[2].stopped_at, 300);
	ck_assert_int_eq(st[1].state, KEY_SIGNING);
	ck_assert_int_eq(st[0].state, KEY_RETIRED_PUBLISHED);
	ck_assert_int_eq(st[0].stopped_at, 200);

	/* extreme times do not overflow */
	ks[2].retired_at = 0;
	ks[4].sign_after = INT64_MAX - 1;
	keyring_classify(ks, 5, INT64_MAX - 1, INT64_MAX, st);
	ck_assert_int_eq(st[4].state, KEY_SIGNING);
	ck_assert_int_eq(st[2].state, KEY_RETIRED_PUBLISHED);
	ck_assert_int_eq(st[2].unpublish_at, INT64_MAX);

	ck_assert_str_eq(key_state_name(KEY_SIGNING), "signing");
	ck_assert_str_eq(key_state_name(KEY_UPCOMING), "upcoming");
	ck_assert_str_eq(key_state_name(KEY_RETIRED_PUBLISHED), "retired-published");
	ck_assert_str_eq(key_state_name(KEY_RETIRED), "retired");
	ck_assert_str_eq(key_state_name(KEY_REVOKED), "revoked");
	ck_assert_str_eq(key_state_name(KEY_STATE__MAX), "unknown");
}
END_TEST

START_TEST(test_jwt_jwks_public_only)
{
	struct fixture f;
	char *doc = NULL;
	fx_init(&f, 0x11);
	ck_assert_int_eq(keyring_jwks(f.kr, &doc), CS_OK);
	json_t *j = json_loads(doc, 0, NULL);
	ck_assert_ptr_nonnull(j);
	json_t *keys = json_object_get(j, "keys");
	ck_assert(json_is_array(keys));
	ck_assert_uint_eq(json_array_size(keys), 1);
	json_t *k = json_array_get(keys, 0);
	ck_assert_str_eq(json_string_value(json_object_get(k, "kid")), keyring_signing_kid(f.kr));
	ck_assert_str_eq(json_string_value(json_object_get(k, "use")), "sig");
	ck_assert_str_eq(json_string_value(json_object_get(k, "alg")), "ES256");
	ck_assert_str_eq(json_string_value(json_object_get(k, "kty")), "EC");
	ck_assert_str_eq(json_string_value(json_object_get(k, "crv")), "P-256");
	ck_assert(json_is_string(json_object_get(k, "x")));
	ck_assert(json_is_string(json_object_get(k, "y")));
	ck_assert_ptr_null(json_object_get(k, "d"));
	ck_assert_uint_eq(json_object_size(k), 7);
	ck_assert(strstr(doc, "\"d\"") == NULL);
	json_decref(j);
	free(doc);
	fx_clear(&f);
}
END_TEST

START_TEST(test_jwt_kid_rfc7638)
{
	struct fixture f;
	char *doc = NULL;
	unsigned char md[32];
	unsigned int md_len = 0;
	char in[512];
	fx_init(&f, 0x11);
	ck_assert_int_eq(keyring_jwks(f.kr, &doc), CS_OK);
	json_t *j = json_loads(doc, 0, NULL);
	json_t *k = json_array_get(json_object_get(j, "keys"), 0);
	ck_assert_int_eq(str_fmt(in, sizeof in, "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"%s\",\"y\":\"%s\"}",
	    json_string_value(json_object_get(k, "x")), json_string_value(json_object_get(k, "y"))), CS_OK);
	ck_assert_int_eq(EVP_Digest(in, strlen(in), md, &md_len, EVP_sha256(), NULL), 1);
	ck_assert_uint_eq(md_len, 32);
	char *tp = b64u(md, md_len);
	ck_assert_uint_eq(strlen(tp), 43);
	ck_assert_str_eq(tp, keyring_signing_kid(f.kr));
	free(tp);
	json_decref(j);
	free(doc);
	fx_clear(&f);
}
END_TEST

/* --- sign and verify --------------------------------------------------- */

START_TEST(test_jwt_sign_verify_roundtrip)
{
	struct fixture f;
	fx_init(&f, 0x11);
	json_t *want = sample_claims(), *got = NULL;
	char *t = NULL;
	ck_assert_int_eq(jwt_sign(f.kr, "at+jwt", want, &t), CS_OK);
	ck_assert_int_eq(jwt_verify(f.kr, "at+jwt", t, &got), CS_OK);
	ck_assert(json_equal(want, got));
	/* the header is exactly what we promise */
	char *h, *p, *s;
	split3(t, &h, &p, &s);
	char hdr[512];
	ck_assert_int_eq(str_fmt(hdr, sizeof hdr, "{\"alg\":\"ES256\",\"typ\":\"at+jwt\",\"kid\":\"%s\"}",
	    keyring_signing_kid(f.kr)), CS_OK);
	json_t *want_hdr = json_loads(hdr, 0, NULL);
	unsigned char raw[512];
	size_t hl = strlen(h), pad = (4 - hl % 4) % 4;
	char *padded = calloc(1, hl + 4);
	for (size_t i = 0; i < hl; i++)
		padded[i] = h[i] == '-' ? '+' : h[i] == '_' ? '/' : h[i];
	memset(padded + hl, '=', pad);
	int rl = EVP_DecodeBlock(raw, (unsigned char *)padded, (int)(hl + pad));
	ck_assert_int_gt(rl, (int)pad);
	json_t *got_hdr = json_loadb((char *)raw, (size_t)rl - pad, 0, NULL);
	ck_assert_ptr_nonnull(got_hdr);
	ck_assert(json_equal(want_hdr, got_hdr));
	json_decref(want_hdr);
	json_decref(got_hdr);
	free(padded);
	free(h);
	free(p);
	free(s);
	json_decref(want);
	json_decref(got);
	free(t);
	fx_clear(&f);
}
END_TEST

START_TEST(test_jwt_sign_bad_args_einval)
{
	struct fixture f;
	char *t = NULL;
	fx_init(&f, 0x11);
	json_t *arr = json_array();
	ck_assert_int_eq(jwt_sign(f.kr, "at+jwt", arr, &t), CS_EINVAL);
	ck_assert_int_eq(jwt_sign(f.kr, "", arr, &t), CS_EINVAL);
	ck_assert_int_eq(jwt_sign(NULL, "at+jwt", arr, &t), CS_EINVAL);
	ck_assert_ptr_null(t);
	json_decref(arr);
	fx_clear(&f);
}
END_TEST

START_TEST(test_jwt_verify_alg_none_refused)
{
	struct fixture f;
	char hdr[256];
	fx_init(&f, 0x11);
	ck_assert_int_eq(str_fmt(hdr, sizeof hdr, "{\"alg\":\"none\",\"typ\":\"at+jwt\",\"kid\":\"%s\"}",
	    keyring_signing_kid(f.kr)), CS_OK);
	char *t = craft(hdr, "{\"sub\":\"admin\"}", "");
	expect_refused(f.kr, "at+jwt", t);
	free(t);
	/* with a fake signature of the right size, and of another size */
	char fake[87];
	memset(fake, 'A', 86);
	fake[86] = '\0';
	t = craft(hdr, "{\"sub\":\"admin\"}", fake);
	expect_refused(f.kr, "at+jwt", t);
	free(t);
	t = craft(hdr, "{\"sub\":\"admin\"}", "c2ln");
	expect_refused(f.kr, "at+jwt", t);
	free(t);
	/* "none" without kid or typ */
	t = craft("{\"alg\":\"none\"}", "{\"sub\":\"admin\"}", fake);
	expect_refused(f.kr, "at+jwt", t);
	free(t);
	fx_clear(&f);
}
END_TEST

START_TEST(test_jwt_verify_hs256_pubkey_refused)
{
	struct fixture f;
	char hdr[256], *doc = NULL;
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mac_len = 0;
	fx_init(&f, 0x11);
	ck_assert_int_eq(keyring_jwks(f.kr, &doc), CS_OK);
	json_t *j = json_loads(doc, 0, NULL);
	char *pubkey = json_dumps(json_array_get(json_object_get(j, "keys"), 0), JSON_COMPACT);
	/* HS256, and HS512 whose 64-byte MAC has the length of an ES256 signature
	 * (so only the algorithm pin can stop it) */
	const char *algs[] = { "HS256", "HS512" };
	const EVP_MD *mds[] = { EVP_sha256(), EVP_sha512() };
	const char *secrets[2];
	secrets[0] = pubkey;
	secrets[1] = doc;
	for (size_t a = 0; a < 2; a++) {
		ck_assert_int_eq(str_fmt(hdr, sizeof hdr, "{\"alg\":\"%s\",\"typ\":\"at+jwt\",\"kid\":\"%s\"}",
		    algs[a], keyring_signing_kid(f.kr)), CS_OK);
		char *h = b64u_str(hdr), *p = b64u_str("{\"sub\":\"admin\"}");
		for (size_t i = 0; i < 2; i++) {
			char *input = join3(h, p, "");
			input[strlen(input) - 1] = '\0';    /* "h.p" */
			ck_assert_ptr_nonnull(HMAC(mds[a], secrets[i], (int)strlen(secrets[i]),
			    (unsigned char *)input, strlen(input), mac, &mac_len));
			char *sig = b64u(mac, mac_len);
			char *t = join3(h, p, sig);
			expect_refused(f.kr, "at+jwt", t);
			free(t);
			free(sig);
			free(input);
		}
		free(h);
		free(p);
	}
	free(pubkey);
	json_decref(j);
	free(doc);
	fx_clear(&f);
}
END_TEST

/* Signed by our own key, but under another ECDSA algorithm name: only the
 * pin stops it (cjose would verify ES384 with a P-256 key). */
START_TEST(test_jwt_verify_other_ec_alg_refused)
{
	struct fixture f;
	fx_init(&f, 0x11);
	char *t = sign_raw_alg(&f, "ES384", "at+jwt", "{\"sub\":\"admin\"}");
	expect_refused(f.kr, "at+jwt", t);
	free(t);
	fx_clear(&f);
}
END_TEST

START_TEST(test_jwt_verify_wrong_typ_refused)
{
	struct fixture f;
	fx_init(&f, 0x11);
	char *t = sign_sample(f.kr, "secevent+jwt");
	expect_refused(f.kr, "at+jwt", t);
	json_t *c = NULL;
	ck_assert_int_eq(jwt_verify(f.kr, "secevent+jwt", t, &c), CS_OK);
	json_decref(c);
	expect_refused(f.kr, "AT+JWT", t);
	free(t);
	/* typ missing altogether */
	char hdr[256];
	ck_assert_int_eq(str_fmt(hdr, sizeof hdr, "{\"alg\":\"ES256\",\"kid\":\"%s\"}", keyring_signing_kid(f.kr)), CS_OK);
	t = sign_sample(f.kr, "at+jwt");
	char *h, *p, *s;
	split3(t, &h, &p, &s);
	char *h2 = b64u_str(hdr), *t2 = join3(h2, p, s);
	expect_refused(f.kr, "at+jwt", t2);
	free(h);
	free(p);
	free(s);
	free(h2);
	free(t2);
	free(t);
	fx_clear(&f);
}
END_TEST

START_TEST(test_jwt_verify_unknown_kid_refused)
{
	struct fixture f;
	fx_init(&f, 0x11);
	char *t = sign_sample(f.kr, "at+jwt");
	char *h, *p, *s;
	split3(t, &h, &p, &s);
	const char *hdrs[] = {
		"{\"alg\":\"ES256\",\"typ\":\"at+jwt\",\"kid\":\"nope\"}",
		"{\"alg\":\"ES256\",\"typ\":\"at+jwt\"}",
		"{\"alg\":\"ES256\",\"typ\":\"at+jwt\",\"kid\":42}",
		"{\"alg\":\"ES256\",\"typ\":\"at+jwt\",\"kid\":\"\"}",
	};
	for (size_t i = 0; i < sizeof hdrs / sizeof hdrs[0]; i++) {
		char *h2 = b64u_str(hdrs[i]), *t2 = join3(h2, p, s);
		expect_refused(f.kr, "at+jwt", t2);
		free(h2);
		free(t2);
	}
	free(h);
	free(p);
	free(s);
	free(t);
	fx_clear(&f);
}
END_TEST

START_TEST(test_jwt_verify_tampered_refused)
{
	struct fixture f;
	fx_init(&f, 0x11);
	char *t = sign_sample(f.kr, "at+jwt");
	char *h, *p, *s;
	split3(t, &h, &p, &s);
	/* another payload under the same header and signature */
	char *p2 = b64u_str("{\"sub\":\"admin\"}"), *t2 = join3(h, p2, s);
	expect_refused(f.kr, "at+jwt", t2);
	free(t2);
	free(p2);
	/* one character of the payload changed */
	char *t3 = strdup(t);
	t3[strlen(h) + 2] = t3[strlen(h) + 2] == 'A' ? 'B' : 'A';
	expect_refused(f.kr, "at+jwt", t3);
	free(t3);
	/* each of the first characters of the signature changed */
	for (size_t i = 0; i < 8; i++) {
		char *t4 = strdup(t);
		size_t at = strlen(h) + strlen(p) + 2 + i * 10;
		t4[at] = t4[at] == 'A' ? 'B' : 'A';
		expect_refused(f.kr, "at+jwt", t4);
		free(t4);
	}
	/* signature shortened, or of another token */
	char *t5 = join3(h, p, s + 4);
	expect_refused(f.kr, "at+jwt", t5);
	free(t5);
	free(h);
	free(p);
	free(s);
	free(t);
	fx_clear(&f);
}
END_TEST

START_TEST(test_jwt_verify_malformed_refused)
{
	struct fixture f;
	fx_init(&f, 0x11);
	char *t = sign_sample(f.kr, "at+jwt");
	char *h, *p, *s;
	split3(t, &h, &p, &s);
	size_t n = 2 * strlen(t) + 64;        /* room for the signature twice */
	char *m = malloc(n);
	/* two segments */
	ck_assert_int_eq(str_fmt(m, n, "%s.%s", h, p), CS_OK);
	expect_refused(f.kr, "at+jwt", m);
	/* four segments */
	ck_assert_int_eq(str_fmt(m, n, "%s.%s.%s.%s", h, p, s, s), CS_OK);
	expect_refused(f.kr, "at+jwt", m);
	ck_assert_int_eq(str_fmt(m, n, "%s.%s.%s.", h, p, s), CS_OK);
	expect_refused(f.kr, "at+jwt", m);
	/* empty segments */
	ck_assert_int_eq(str_fmt(m, n, ".%s.%s", p, s), CS_OK);
	expect_refused(f.kr, "at+jwt", m);
	ck_assert_int_eq(str_fmt(m, n, "%s..%s", h, s), CS_OK);
	expect_refused(f.kr, "at+jwt", m);
	ck_assert_int_eq(str_fmt(m, n, "%s.%s.", h, p), CS_OK);
	expect_refused(f.kr, "at+jwt", m);
	expect_refused(f.kr, "at+jwt", "..");
	expect_refused(f.kr, "at+jwt", "");
	expect_refused(f.kr, "at+jwt", ".");
	/* non-base64url characters */
	const char bad[] = { '+', '/', '=', ' ', '\n', '%', '\x80', '*' };
	for (size_t i = 0; i < sizeof bad; i++) {
		char *c = strdup(t);
		c[1] = bad[i];
		expect_refused(f.kr, "at+jwt", c);
		free(c);
		c = strdup(t);
		c[strlen(c) - 1] = bad[i];
		expect_refused(f.kr, "at+jwt", c);
		free(c);
	}
	ck_assert_int_eq(str_fmt(m, n, "%s.%s.%s==", h, p, s), CS_OK);
	expect_refused(f.kr, "at+jwt", m);
	/* the header not JSON, or not an object, or with duplicate members */
	char *hb = b64u_str("not json"), *tb = join3(hb, p, s);
	expect_refused(f.kr, "at+jwt", tb);
	free(hb);
	free(tb);
	hb = b64u_str("[\"ES256\"]");
	tb = join3(hb, p, s);
	expect_refused(f.kr, "at+jwt", tb);
	free(hb);
	free(tb);
	char dup[256];
	ck_assert_int_eq(str_fmt(dup, sizeof dup, "{\"alg\":\"none\",\"alg\":\"ES256\",\"typ\":\"at+jwt\",\"kid\":\"%s\"}",
	    keyring_signing_kid(f.kr)), CS_OK);
	hb = b64u_str(dup);
	tb = join3(hb, p, s);
	expect_refused(f.kr, "at+jwt", tb);
	free(hb);
	free(tb);
	/* oversized: 17 KiB */
	size_t big = 17 * 1024;
	char *o = malloc(big + 1);
	memset(o, 'A', big);
	o[100] = '.';
	o[big - 87] = '.';
	o[big] = '\0';
	expect_refused(f.kr, "at+jwt", o);
	free(o);
	free(m);
	free(h);
	free(p);
	free(s);
	free(t);
	fx_clear(&f);
}
END_TEST

START_TEST(test_jwt_verify_payload_not_object_refused)
{
	struct fixture f;
	fx_init(&f, 0x11);
	const char *payloads[] = { "[1,2,3]", "\"str\"", "42", "null", "not json",
	    "{\"sub\":\"a\",\"sub\":\"b\"}", "{\"sub\":\"a\"} trailing" };
	for (size_t i = 0; i < sizeof payloads / sizeof payloads[0]; i++) {
		char *t = sign_raw(&f, "at+jwt", payloads[i]);
		expect_refused(f.kr, "at+jwt", t);
		free(t);
	}
	/* and the same path with an object verifies: the refusals are about the payload */
	char *t = sign_raw(&f, "at+jwt", "{\"sub\":\"a\"}");
	json_t *c = NULL;
	ck_assert_int_eq(jwt_verify(f.kr, "at+jwt", t, &c), CS_OK);
	ck_assert_str_eq(json_string_value(json_object_get(c, "sub")), "a");
	json_decref(c);
	free(t);
	fx_clear(&f);
}
END_TEST

START_TEST(test_jwt_verify_other_ring_refused)
{
	struct fixture a, b;
	fx_init(&a, 0x11);
	fx_init(&b, 0x11);        /* same master key, another database: another key */
	ck_assert_str_ne(keyring_signing_kid(a.kr), keyring_signing_kid(b.kr));
	char *t = sign_sample(b.kr, "at+jwt");
	expect_refused(a.kr, "at+jwt", t);
	/* even when the other ring's token claims our kid */
	char *h, *p, *s, hdr[256];
	split3(t, &h, &p, &s);
	ck_assert_int_eq(str_fmt(hdr, sizeof hdr, "{\"alg\":\"ES256\",\"typ\":\"at+jwt\",\"kid\":\"%s\"}",
	    keyring_signing_kid(a.kr)), CS_OK);
	char *h2 = b64u_str(hdr), *t2 = join3(h2, p, s);
	expect_refused(a.kr, "at+jwt", t2);
	free(h);
	free(p);
	free(s);
	free(h2);
	free(t2);
	free(t);
	fx_clear(&a);
	fx_clear(&b);
}
END_TEST

struct thr {
	struct keyring *kr;
	int             ok;
};

static void *thr_main(void *arg)
{
	struct thr *t = arg;
	for (int i = 0; i < 200; i++) {
		json_t *c = json_pack("{s:i}", "n", i), *got = NULL;
		char *tok = NULL;
		if (jwt_sign(t->kr, "at+jwt", c, &tok) == CS_OK &&
		    jwt_verify(t->kr, "at+jwt", tok, &got) == CS_OK && json_equal(c, got))
			t->ok++;
		json_decref(c);
		json_decref(got);
		free(tok);
	}
	return NULL;
}

START_TEST(test_jwt_sign_verify_threads)
{
	struct fixture f;
	pthread_t th[4];
	struct thr t[4];
	fx_init(&f, 0x11);
	for (int i = 0; i < 4; i++) {
		t[i].kr = f.kr;
		t[i].ok = 0;
		ck_assert_int_eq(pthread_create(&th[i], NULL, thr_main, &t[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(t[i].ok, 200);
	}
	fx_clear(&f);
}
END_TEST

static Suite *jwt_suite(void)
{
	Suite *s = suite_create("jwt");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_jwt_keyring_generates_sealed);
	tcase_add_test(tc, test_jwt_keyring_reload_reuses);
	tcase_add_test(tc, test_jwt_keyring_wrong_master_fails);
	tcase_add_test(tc, test_jwt_keyring_retire_rotates);
	tcase_add_test(tc, test_jwt_rotate_publish_then_switch);
	tcase_add_test(tc, test_jwt_rotate_twice_each_key_kept_from_its_successor);
	tcase_add_test(tc, test_jwt_revoke_gone_at_once);
	tcase_add_test(tc, test_jwt_revoke_signer_needs_ready_successor);
	tcase_add_test(tc, test_jwt_revoke_upcoming);
	tcase_add_test(tc, test_jwt_unpublished_key_not_unsealed);
	tcase_add_test(tc, test_jwt_classify_states);
	tcase_add_test(tc, test_jwt_jwks_public_only);
	tcase_add_test(tc, test_jwt_kid_rfc7638);
	tcase_add_test(tc, test_jwt_sign_verify_roundtrip);
	tcase_add_test(tc, test_jwt_sign_bad_args_einval);
	tcase_add_test(tc, test_jwt_verify_alg_none_refused);
	tcase_add_test(tc, test_jwt_verify_hs256_pubkey_refused);
	tcase_add_test(tc, test_jwt_verify_other_ec_alg_refused);
	tcase_add_test(tc, test_jwt_verify_wrong_typ_refused);
	tcase_add_test(tc, test_jwt_verify_unknown_kid_refused);
	tcase_add_test(tc, test_jwt_verify_tampered_refused);
	tcase_add_test(tc, test_jwt_verify_malformed_refused);
	tcase_add_test(tc, test_jwt_verify_payload_not_object_refused);
	tcase_add_test(tc, test_jwt_verify_other_ring_refused);
	tcase_add_test(tc, test_jwt_sign_verify_threads);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(jwt_suite());
}
