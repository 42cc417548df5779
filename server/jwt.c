/* jwt.c -- consentd's ES256 signing keys (generated here, stored sealed) and
 * its own compact JWS: signed through cjose, verified through jws.c (the one
 * verifier) with JWS_ALGS_OWN.  It must never accept an algorithm outside
 * that list, a kid outside the ring, or publish a private member. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjose/cjose.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "b64.h"
#include "buf.h"
#include "jws.h"
#include "jwt.h"
#include "log.h"

#define JWT_ALG          "ES256"
#define JWT_MAX_COMPACT  (16 * 1024)   /* SECURITY: hard cap before any parsing */
#define JWT_MAX_HEADER   1024          /* decoded protected header */
#define JWT_ES256_SIG_B64U 86          /* 64 bytes R || S, base64url without padding */
#define JWT_KEY_PURPOSE  "signing-key"
#define JWT_KID_MAX      128

/* One key of the ring.  Immutable after keyring_load, so any number of
 * threads may read it.  cjose's ES256 sign takes the jwk as const and only
 * reads its EC_KEY (ECDSA_do_sign allocates its own context), and jws.c's
 * verifier only reads the public EVP key, so no lock is needed around them;
 * the public JWK JSON and key are computed once at load, never per request. */
struct kr_key {
	char           *kid;
	cjose_jwk_t    *jwk;       /* private: signs */
	struct jws_key *pub;       /* its public half: verifies (jws.c, JWS_ALGS_OWN) */
	int64_t         sign_after;
};

struct keyring {
	struct kr_key *keys;
	size_t         n;
	size_t         signer;     /* index into keys; n when none may sign */
	char          *jwks;       /* the JWKS document, built at load */
	unsigned char  fp[KEYRING_FP_LEN];   /* SHA-256 of jwks: the verifying key set */
};

/* --- keys -------------------------------------------------------------- */

static void cjose_str_free(char *s, bool secret)
{
	if (s == NULL)
		return;
	if (secret)
		OPENSSL_cleanse(s, strlen(s));
	cjose_get_dealloc()(s);
}

/* The RFC 7638 thumbprint of a P-256 public key, the JWK pub (jwk_public's:
 * its x and y, base64url). */
static enum cs_err thumbprint(const json_t *pub, char **out)
{
	const char *x = json_string_value(json_object_get(pub, "x"));
	const char *y = json_string_value(json_object_get(pub, "y"));
	enum cs_err e;
	struct buf in, b;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int md_len = 0;

	buf_init(&in, 512);
	buf_init(&b, 64);
	/* Required members only, in lexicographic order, no whitespace. */
	if ((e = buf_printf(&in, "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"%s\",\"y\":\"%s\"}",
	    x, y)) != CS_OK)
		goto out;
	if (EVP_Digest(in.data, in.len, md, &md_len, EVP_sha256(), NULL) != 1) {
		e = CS_ECRYPTO;
		goto out;
	}
	if ((e = b64url_append(&b, md, md_len)) != CS_OK)
		goto out;
	*out = buf_steal(&b);
	e = *out != NULL ? CS_OK : CS_ENOMEM;
out:
	buf_clear(&in);
	buf_clear(&b);
	return e;
}

static bool str_eq(const char *a, const char *b)
{
	return a != NULL && strcmp(a, b) == 0;
}

/* The public members of jwk as a new JSON object, checked to be a P-256 key. */
static enum cs_err jwk_public(const cjose_jwk_t *jwk, json_t **out)
{
	enum cs_err e = CS_ECRYPTO;
	char *pub = cjose_jwk_to_json(jwk, false, NULL);
	json_t *o = NULL;
	if (pub == NULL)
		goto out;
	o = json_loads(pub, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(o))
		goto out;
	if (!json_is_string(json_object_get(o, "x")) || !json_is_string(json_object_get(o, "y")) ||
	    !str_eq(json_string_value(json_object_get(o, "kty")), "EC") ||
	    !str_eq(json_string_value(json_object_get(o, "crv")), "P-256"))
		goto out;
	*out = o;
	o = NULL;
	e = CS_OK;
out:
	json_decref(o);
	cjose_str_free(pub, false);
	return e;
}

/* Unseals and imports one stored key; checks it is the P-256 key its kid names. */
static enum cs_err key_import(const struct store_key *sk, const struct master_key *mk,
    struct kr_key *out, json_t *jwks_keys)
{
	enum cs_err e;
	unsigned char *pt = NULL;
	size_t pt_len = 0;
	cjose_jwk_t *jwk = NULL;
	struct jws_key *vk = NULL;
	json_t *pub = NULL, *entry = NULL;
	char *tp = NULL, *kid = NULL;

	if (strcmp(sk->alg, JWT_ALG) != 0) {
		log_msg(LOG_ERROR, "signing key %s has unsupported alg", sk->kid);
		return CS_EINVAL;
	}
	/* SECURITY: the kid is the additional data: a sealed key moved to another
	 * row does not open. */
	e = unseal(mk, JWT_KEY_PURPOSE, sk->kid, strlen(sk->kid), sk->sealed, sk->sealed_len,
	    &pt, &pt_len);
	if (e != CS_OK) {
		log_msg(LOG_ERROR, "signing key %s does not open under master key %s "
		    "(sealed under %s)", sk->kid, mk->kid, sk->master_kid);
		goto out;
	}
	e = CS_ECRYPTO;
	jwk = cjose_jwk_import((const char *)pt, pt_len, NULL);
	if (jwk == NULL || cjose_jwk_get_kty(jwk, NULL) != CJOSE_JWK_KTY_EC ||
	    cjose_jwk_EC_get_curve(jwk, NULL) != CJOSE_JWK_EC_P_256)
		goto out;
	if ((e = jwk_public(jwk, &pub)) != CS_OK)
		goto out;
	if ((e = thumbprint(pub, &tp)) != CS_OK)
		goto out;
	if (strcmp(tp, sk->kid) != 0) {
		log_msg(LOG_ERROR, "signing key %s is not the key its kid names", sk->kid);
		e = CS_ECRYPTO;
		goto out;
	}
	if ((e = jws_key_from_jwk_for(pub, JWS_ALGS_OWN, &vk, NULL, 0)) != CS_OK) {
		if (e != CS_ENOMEM)
			e = CS_ECRYPTO;
		goto out;
	}
	e = CS_ENOMEM;
	entry = json_pack("{s:s, s:s, s:s, s:s, s:s, s:O, s:O}",
	    "kid", sk->kid, "kty", "EC", "use", "sig", "alg", JWT_ALG, "crv", "P-256",
	    "x", json_object_get(pub, "x"), "y", json_object_get(pub, "y"));
	if (entry == NULL || json_array_append_new(jwks_keys, entry) != 0)
		goto out;
	entry = NULL;
	kid = strdup(sk->kid);
	if (kid == NULL)
		goto out;
	out->kid = kid;
	out->jwk = jwk;
	out->pub = vk;
	out->sign_after = sk->sign_after;
	kid = NULL;
	jwk = NULL;
	vk = NULL;
	e = CS_OK;
out:
	if (pt != NULL) {
		OPENSSL_cleanse(pt, pt_len);
		free(pt);
	}
	cjose_jwk_release(jwk);
	jws_key_free(vk);
	json_decref(pub);
	json_decref(entry);
	free(tp);
	free(kid);
	return e;
}

/* --- key life: signing, upcoming, retired, revoked ---------------------- */

/* Whether row a comes after row b in the order keys take over signing:
 * by sign_after, then by position (rows come oldest first). */
static bool later(const struct store_key *ks, size_t a, size_t b)
{
	return ks[a].sign_after > ks[b].sign_after ||
	    (ks[a].sign_after == ks[b].sign_after && a > b);
}

/* retired_at set by hand and already past: the key signs no more. */
static bool retired_by_hand(const struct store_key *k, int64_t now)
{
	return k->retired_at != 0 && k->retired_at <= now;
}

void keyring_classify(const struct store_key *ks, size_t n, int64_t now,
    int64_t token_ttl, struct key_status *out)
{
	size_t signer = n;
	int64_t ttl = token_ttl < 0 ? 0 : token_ttl > INT64_MAX / 2 ? INT64_MAX / 2 : token_ttl;
	int64_t keep = ttl + KEYRING_RELOAD_SLACK;

	for (size_t i = 0; i < n; i++) {
		if (ks[i].revoked_at != 0 || ks[i].sign_after > now || retired_by_hand(&ks[i], now))
			continue;
		if (signer == n || later(ks, i, signer))
			signer = i;
	}
	for (size_t i = 0; i < n; i++) {
		struct key_status st = { KEY_RETIRED, 0, 0 };
		if (ks[i].revoked_at != 0) {
			st.state = KEY_REVOKED;
		} else if (i == signer) {
			st.state = KEY_SIGNING;
		} else if (ks[i].sign_after > now) {
			st.state = KEY_UPCOMING;
		} else {
			/* It stopped signing when the first later key started, or when
			 * it was retired by hand, whichever came first. */
			int64_t stop = retired_by_hand(&ks[i], now) ? ks[i].retired_at : 0;
			for (size_t j = 0; j < n; j++) {
				if (j == i || ks[j].revoked_at != 0 || ks[j].sign_after > now ||
				    !later(ks, j, i))
					continue;
				if (stop == 0 || ks[j].sign_after < stop)
					stop = ks[j].sign_after;
			}
			if (stop == 0)        /* cannot happen: fail safe, as of now */
				stop = now;
			st.stopped_at = stop;
			st.unpublish_at = stop > INT64_MAX - keep ? INT64_MAX : stop + keep;
			st.state = now < st.unpublish_at ? KEY_RETIRED_PUBLISHED : KEY_RETIRED;
		}
		out[i] = st;
	}
}

const char *key_state_name(enum key_state s)
{
	static const char *const names[KEY_STATE__MAX] = {
		[KEY_SIGNING] = "signing",
		[KEY_UPCOMING] = "upcoming",
		[KEY_RETIRED_PUBLISHED] = "retired-published",
		[KEY_RETIRED] = "retired",
		[KEY_REVOKED] = "revoked",
	};
	if ((unsigned)s >= KEY_STATE__MAX)
		return "unknown";
	return names[s];
}

static bool published(enum key_state s)
{
	return s == KEY_SIGNING || s == KEY_UPCOMING || s == KEY_RETIRED_PUBLISHED;
}

/* The rows of the store with their status at now; *st has n entries. */
static enum cs_err keys_classified(struct store_conn *c, int64_t now, int64_t token_ttl,
    struct store_key **ks, struct key_status **st, size_t *n)
{
	enum cs_err e;
	struct store_key *rows = NULL;
	struct key_status *sts = NULL;
	size_t len = 0;

	if ((e = store_keys_list(c, &rows, &len)) != CS_OK)
		return e;
	if (len > 0 && (sts = calloc(len, sizeof *sts)) == NULL) {
		store_keys_free(rows, len);
		return CS_ENOMEM;
	}
	keyring_classify(rows, len, now, token_ttl, sts);
	*ks = rows;
	*st = sts;
	*n = len;
	return CS_OK;
}

/* Generates a P-256 key, names it by its thumbprint, seals its private JWK and
 * stores it.  The caller holds the transaction.  *kid_out (malloc'd) on CS_OK. */
static enum cs_err key_generate(struct store_conn *c, const struct master_key *mk,
    int64_t now, int64_t sign_after, char **kid_out)
{
	enum cs_err e = CS_ECRYPTO;
	cjose_jwk_t *jwk = NULL;
	json_t *pub = NULL;
	char *kid = NULL, *priv = NULL;
	struct store_key sk;

	memset(&sk, 0, sizeof sk);
	jwk = cjose_jwk_create_EC_random(CJOSE_JWK_EC_P_256, NULL);
	if (jwk == NULL)
		goto out;
	if ((e = jwk_public(jwk, &pub)) != CS_OK)
		goto out;
	if ((e = thumbprint(pub, &kid)) != CS_OK)
		goto out;
	e = CS_ECRYPTO;
	if (!cjose_jwk_set_kid(jwk, kid, strlen(kid), NULL))
		goto out;
	priv = cjose_jwk_to_json(jwk, true, NULL);
	if (priv == NULL)
		goto out;
	if ((e = seal(mk, JWT_KEY_PURPOSE, kid, strlen(kid), priv, strlen(priv),
	    &sk.sealed, &sk.sealed_len)) != CS_OK)
		goto out;
	sk.kid = kid;
	sk.alg = (char *)JWT_ALG;
	sk.created_at = now;
	sk.sign_after = sign_after;
	sk.master_kid = (char *)mk->kid;
	if ((e = store_key_insert(c, &sk)) != CS_OK)
		goto out;
	*kid_out = kid;
	kid = NULL;
out:
	cjose_str_free(priv, true);   /* SECURITY: the private JWK JSON is wiped */
	free(sk.sealed);
	free(kid);
	json_decref(pub);
	cjose_jwk_release(jwk);
	return e;
}

/* Makes sure some key may sign at now: if none does, one is generated, the
 * check repeated inside an IMMEDIATE transaction so that two processes
 * starting together do not both generate one. */
static enum cs_err ensure_signer(struct store_conn *c, const struct master_key *mk,
    int64_t now, int64_t token_ttl)
{
	enum cs_err e;
	struct store_key *ks = NULL;
	struct key_status *st = NULL;
	size_t n = 0;
	bool found = false;
	char *kid = NULL;

	if ((e = store_begin(c)) != CS_OK)
		goto out;
	if ((e = keys_classified(c, now, token_ttl, &ks, &st, &n)) != CS_OK)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (st[i].state == KEY_SIGNING)
			found = true;
	if (!found && (e = key_generate(c, mk, now, now, &kid)) != CS_OK)
		goto out;
	e = store_commit(c);
	if (e == CS_OK && kid != NULL)
		log_msg(LOG_INFO, "generated signing key %s", kid);
out:
	if (e != CS_OK)
		store_rollback(c);
	store_keys_free(ks, n);
	free(st);
	free(kid);
	return e;
}

/* Builds a ring from what the store holds now: the published keys only. */
static enum cs_err ring_build(struct store_conn *c, const struct master_key *mk,
    int64_t now, int64_t token_ttl, struct keyring **out)
{
	enum cs_err e;
	struct store_key *ks = NULL;
	struct key_status *st = NULL;
	size_t n = 0;
	struct keyring *kr = NULL;
	json_t *keys = NULL, *doc = NULL;
	unsigned int fp_len = KEYRING_FP_LEN;

	if ((e = keys_classified(c, now, token_ttl, &ks, &st, &n)) != CS_OK)
		goto out;
	e = CS_ENOMEM;
	kr = calloc(1, sizeof *kr);
	keys = json_array();
	if (kr == NULL || keys == NULL)
		goto out;
	if (n > 0 && (kr->keys = calloc(n, sizeof *kr->keys)) == NULL)
		goto out;
	kr->signer = SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		/* SECURITY: a key no longer published is not even unsealed, and
		 * tokens it signed stop verifying with it. */
		if (!published(st[i].state))
			continue;
		if ((e = key_import(&ks[i], mk, &kr->keys[kr->n], keys)) != CS_OK)
			goto out;
		if (st[i].state == KEY_SIGNING)
			kr->signer = kr->n;
		kr->n++;
	}
	if (kr->signer == SIZE_MAX)
		kr->signer = kr->n;
	e = CS_ENOMEM;
	doc = json_pack("{s:O}", "keys", keys);
	if (doc == NULL || (kr->jwks = json_dumps(doc, JSON_COMPACT)) == NULL)
		goto out;
	/* The JWKS names every key that verifies (kid = its RFC 7638 thumbprint,
	 * checked at import) and no other, so its digest identifies the set. */
	e = CS_ECRYPTO;
	if (EVP_Digest(kr->jwks, strlen(kr->jwks), kr->fp, &fp_len, EVP_sha256(), NULL) != 1 ||
	    fp_len != KEYRING_FP_LEN)
		goto out;
	*out = kr;
	kr = NULL;
	e = CS_OK;
out:
	json_decref(doc);
	json_decref(keys);
	keyring_free(kr);
	store_keys_free(ks, n);
	free(st);
	return e;
}

enum cs_err keyring_load(struct store_conn *c, const struct master_key *mk,
    int64_t now, int64_t token_ttl, struct keyring **out)
{
	enum cs_err e;
	struct keyring *kr = NULL;

	if (c == NULL || mk == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = ring_build(c, mk, now, token_ttl, &kr)) != CS_OK)
		goto out;
	if (kr->signer == kr->n) {
		keyring_free(kr);
		kr = NULL;
		if ((e = ensure_signer(c, mk, now, token_ttl)) != CS_OK)
			goto out;
		if ((e = ring_build(c, mk, now, token_ttl, &kr)) != CS_OK)
			goto out;
		if (kr->signer == kr->n) {   /* cannot happen: fail safe */
			e = CS_ECRYPTO;
			goto out;
		}
	}
	*out = kr;
	kr = NULL;
	e = CS_OK;
out:
	keyring_free(kr);
	return e;
}

enum cs_err keyring_generate_key(struct store_conn *c, const struct master_key *mk,
    int64_t now, int64_t sign_after, char **kid)
{
	enum cs_err e;
	char *k = NULL;

	if (c == NULL || mk == NULL || kid == NULL)
		return CS_EINVAL;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if ((e = key_generate(c, mk, now, sign_after, &k)) != CS_OK)
		goto out;
	if ((e = store_commit(c)) != CS_OK)
		goto out;
	*kid = k;
	k = NULL;
out:
	if (e != CS_OK)
		store_rollback(c);
	free(k);
	return e;
}

enum cs_err keyring_revoke_key(struct store_conn *c, const char *kid, int64_t now,
    int64_t token_ttl, char **next_signer)
{
	enum cs_err e;
	struct store_key *ks = NULL, *rest = NULL;
	struct key_status *st = NULL, *rest_st = NULL;
	size_t n = 0, at = SIZE_MAX, next = SIZE_MAX;
	char *next_kid = NULL;

	if (c == NULL || kid == NULL || kid[0] == '\0')
		return CS_EINVAL;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if ((e = keys_classified(c, now, token_ttl, &ks, &st, &n)) != CS_OK)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (strcmp(ks[i].kid, kid) == 0)
			at = i;
	if (at == SIZE_MAX) {
		e = CS_ENOENT;
		goto out;
	}
	/* Who signs once it is gone: classify the other rows (a shallow copy,
	 * in the same order), and map the signer back to ks. */
	e = CS_ENOMEM;
	if (n > 1) {
		if ((rest = calloc(n - 1, sizeof *rest)) == NULL ||
		    (rest_st = calloc(n - 1, sizeof *rest_st)) == NULL)
			goto out;
		for (size_t i = 0, j = 0; i < n; i++)
			if (i != at)
				rest[j++] = ks[i];
		keyring_classify(rest, n - 1, now, token_ttl, rest_st);
		for (size_t j = 0; j < n - 1; j++)
			if (rest_st[j].state == KEY_SIGNING)
				next = j < at ? j : j + 1;
	}
	/* SECURITY: never leave the servers without a key clients already know:
	 * a key that was not published until now would sign tokens that clients
	 * holding a cached JWKS cannot verify, and with no key at all the next
	 * server to load would publish and sign with a brand-new one at once. */
	if (st[at].state == KEY_SIGNING && (next == SIZE_MAX || !published(st[next].state))) {
		e = CS_EPERM;
		goto out;
	}
	if ((e = store_key_set_revoked(c, kid, now)) != CS_OK)
		goto out;
	if (next_signer != NULL && next != SIZE_MAX && (next_kid = strdup(ks[next].kid)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	if ((e = store_commit(c)) != CS_OK)
		goto out;
	if (next_signer != NULL)
		*next_signer = next_kid;
	next_kid = NULL;
out:
	if (e != CS_OK)
		store_rollback(c);
	free(next_kid);
	free(rest);            /* shallow: the strings belong to ks */
	free(rest_st);
	store_keys_free(ks, n);
	free(st);
	return e;
}

void keyring_free(struct keyring *kr)
{
	if (kr == NULL)
		return;
	for (size_t i = 0; i < kr->n; i++) {
		free(kr->keys[i].kid);
		cjose_jwk_release(kr->keys[i].jwk);   /* EC_KEY_free clears the scalar */
		jws_key_free(kr->keys[i].pub);
	}
	free(kr->keys);
	free(kr->jwks);
	free(kr);
}

enum cs_err keyring_jwks(const struct keyring *kr, char **json)
{
	if (kr == NULL || json == NULL || kr->jwks == NULL)
		return CS_EINVAL;
	char *p = strdup(kr->jwks);
	if (p == NULL)
		return CS_ENOMEM;
	*json = p;
	return CS_OK;
}

const char *keyring_signing_kid(const struct keyring *kr)
{
	if (kr == NULL || kr->signer >= kr->n)
		return NULL;
	return kr->keys[kr->signer].kid;
}

const unsigned char *keyring_fingerprint(const struct keyring *kr)
{
	return kr != NULL ? kr->fp : NULL;
}

static const struct kr_key *ring_find(const struct keyring *kr, const char *kid)
{
	for (size_t i = 0; i < kr->n; i++)
		if (strcmp(kr->keys[i].kid, kid) == 0)
			return &kr->keys[i];
	return NULL;
}

/* --- JWS --------------------------------------------------------------- */

enum cs_err jwt_sign(const struct keyring *kr, const char *typ, json_t *claims, char **compact)
{
	enum cs_err e = CS_EINVAL;
	cjose_header_t *hdr = NULL;
	cjose_jws_t *jws = NULL;
	char *payload = NULL, *res = NULL;
	const char *ser = NULL;

	if (kr == NULL || typ == NULL || typ[0] == '\0' || !json_is_object(claims) ||
	    compact == NULL)
		return CS_EINVAL;
	if (kr->signer >= kr->n)
		return CS_ENOENT;
	const struct kr_key *k = &kr->keys[kr->signer];
	e = CS_ENOMEM;
	if ((hdr = cjose_header_new(NULL)) == NULL)
		goto out;
	if (!cjose_header_set(hdr, CJOSE_HDR_ALG, JWT_ALG, NULL) ||
	    !cjose_header_set(hdr, "typ", typ, NULL) ||
	    !cjose_header_set(hdr, CJOSE_HDR_KID, k->kid, NULL))
		goto out;
	if ((payload = json_dumps(claims, JSON_COMPACT)) == NULL)
		goto out;
	e = CS_ECRYPTO;
	jws = cjose_jws_sign(k->jwk, hdr, (const uint8_t *)payload, strlen(payload), NULL);
	if (jws == NULL || !cjose_jws_export(jws, &ser, NULL) || ser == NULL)
		goto out;
	e = CS_ENOMEM;
	if ((res = strdup(ser)) == NULL)
		goto out;
	*compact = res;
	e = CS_OK;
out:
	cjose_jws_release(jws);
	cjose_header_release(hdr);
	free(payload);
	return e;
}

/* The shape check done before cjose sees the input: at most JWT_MAX_COMPACT
 * bytes, exactly three non-empty base64url segments, an ES256-sized signature. */
static enum cs_err compact_check(const char *s, size_t *len, size_t *dot1, size_t *dot2)
{
	size_t n = strnlen(s, JWT_MAX_COMPACT + 1);
	size_t dots[2], nd = 0;
	if (n == 0 || n > JWT_MAX_COMPACT)
		return CS_EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '.') {
			if (nd == 2)
				return CS_EINVAL;
			dots[nd++] = i;
		} else if (!b64url_char((unsigned char)s[i])) {
			return CS_EINVAL;
		}
	}
	if (nd != 2 || dots[0] == 0 || dots[1] == dots[0] + 1 || dots[1] == n - 1)
		return CS_EINVAL;
	if (n - dots[1] - 1 != JWT_ES256_SIG_B64U || (dots[1] - dots[0] - 1) % 4 == 1)
		return CS_EINVAL;
	*len = n;
	*dot1 = dots[0];
	*dot2 = dots[1];
	return CS_OK;
}

/* Parses the protected header ourselves (duplicates refused) and pins it:
 * alg in JWS_ALGS_OWN (ES256 alone), typ exactly expected, kid in the ring,
 * no crit.  *alg and *key written on CS_OK. */
static enum cs_err header_check(const struct keyring *kr, const char *expected_typ,
    const char *b64, size_t b64_len, enum jws_alg *alg_out, const struct kr_key **key)
{
	enum cs_err e = CS_EINVAL;
	unsigned char raw[JWT_MAX_HEADER];
	size_t raw_len = 0;
	json_t *h = NULL;

	if (b64_len > JWT_MAX_HEADER / 3 * 4)
		return CS_EINVAL;
	if (b64url_decode_canonical(b64, b64_len, raw, sizeof raw, &raw_len) != CS_OK)
		return CS_EINVAL;
	h = json_loadb((const char *)raw, raw_len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(h))
		goto out;
	const char *alg = json_string_value(json_object_get(h, "alg"));
	const char *typ = json_string_value(json_object_get(h, "typ"));
	const char *kid = json_string_value(json_object_get(h, "kid"));
	/* SECURITY: the algorithm is pinned to this use's list, never taken from
	 * the token on trust: "none", HS256 (a public key used as an HMAC secret)
	 * and the rest fail. */
	enum jws_alg a = alg != NULL ? jws_alg_parse(alg) : JWS_ALG__MAX;
	if (a == JWS_ALG__MAX || (JWS_ALGS_OWN & JWS_ALG_BIT(a)) == 0)
		goto out;
	/* SECURITY: explicit typing keeps one kind of token from passing as another. */
	if (typ == NULL || strcmp(typ, expected_typ) != 0)
		goto out;
	if (json_object_get(h, "crit") != NULL)
		goto out;
	e = CS_ECRYPTO;
	if (kid == NULL || (*key = ring_find(kr, kid)) == NULL)
		goto out;
	*alg_out = a;
	e = CS_OK;
out:
	json_decref(h);
	return e;
}

enum cs_err jwt_verify(const struct keyring *kr, const char *expected_typ,
    const char *compact, json_t **claims)
{
	enum cs_err e;
	size_t len = 0, d1 = 0, d2 = 0;
	const struct kr_key *key = NULL;
	enum jws_alg alg = JWS_ALG__MAX;
	unsigned char *pt = NULL, sig[JWT_ES256_SIG_B64U * 3 / 4];
	size_t pt_len = 0, sig_len = 0;
	json_t *c = NULL;

	if (kr == NULL || expected_typ == NULL || expected_typ[0] == '\0' ||
	    compact == NULL || claims == NULL)
		return CS_EINVAL;
	if ((e = compact_check(compact, &len, &d1, &d2)) != CS_OK)
		goto out;
	if ((e = header_check(kr, expected_typ, compact, d1, &alg, &key)) != CS_OK)
		goto out;
	/* The payload and the signature decode (the header did in header_check). */
	if ((e = b64url_decode_alloc(compact + d1 + 1, d2 - d1 - 1, &pt, &pt_len)) != CS_OK ||
	    (e = b64url_decode(compact + d2 + 1, len - d2 - 1, sig, sizeof sig, &sig_len)) != CS_OK) {
		if (e != CS_ENOMEM)
			e = CS_EINVAL;
		goto out;
	}
	/* SECURITY: jws.c verifies, the key taking only this use's list. */
	e = CS_ECRYPTO;
	if (!jws_verify_input(key->pub, alg, compact, d2, sig, sig_len))
		goto out;
	e = CS_EINVAL;
	c = json_loadb((const char *)pt, pt_len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(c))
		goto out;
	*claims = c;
	c = NULL;
	e = CS_OK;
out:
	json_decref(c);
	free(pt);
	return e;
}
