/* oidc.c -- the upstream OpenID Provider: discovery, the JWKS cache, ID-token and
 * subject-token validation, the authorization-code exchange.  It must never accept
 * an algorithm outside its list (jws.h's JWS_ALGS_IDP_TOKEN), a key the provider
 * did not publish, or let a thread verify with a key another thread has freed.
 * Signatures are checked by jws.c, the one verifier. */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "b64.h"
#include "buf.h"
#include "form.h"
#include "httpc.h"
#include "jstr.h"
#include "jws.h"
#include "metrics.h"
#include "mono.h"
#include "oidc.h"
#include "subject_cache.h"

#define OIDC_MAX_HEADER_B64 4096          /* encoded protected header */
#define OIDC_MAX_KEYS       32            /* usable keys kept per JWKS */
#define OIDC_MAX_JWKS_ENTRIES 256         /* entries looked at per JWKS */
#define OIDC_MAX_KID        256
#define OIDC_REFETCH_EVERY  60            /* seconds between JWKS fetches on unknown kid */
#define OIDC_MAX_SKEW       86400
#define OIDC_MAX_TIME       INT64_C(253402300799)   /* 9999-12-31T23:59:59Z */
#define OIDC_RSA_MIN_BYTES  256           /* 2048-bit modulus */
#define OIDC_RSA_MAX_BYTES  1024          /* 8192-bit modulus */
#define OIDC_ES256_SIG_B64U 86            /* 64 bytes R || S */
#define OIDC_MAX_FORM       (64 * 1024)

/* --- algorithms and keys ------------------------------------------------ */

/* SECURITY: the allowlist is jws.h's JWS_ALGS_IDP_TOKEN (RS256, PS256,
 * ES256).  Everything else ("none", HS*, RS512 ...) fails before a key is
 * looked up. */

struct oidc_key {
	char           *kid;
	struct jws_key *key;      /* public only; verifies the algorithms of the list
	                           * its type fits, only its JWK's own alg when it names one */
};

/* One imported JWKS.  Immutable once built; shared by reference count (under
 * the provider's mutex) so that a set replaced while a thread verifies with
 * it is freed only when that thread lets go of it. */
struct keyset {
	unsigned        refs;
	uint64_t        gen;      /* 1, 2, ... in the order the sets were installed */
	size_t          n;
	struct oidc_key keys[OIDC_MAX_KEYS];
};

struct oidc_provider {
	char             *issuer;
	int64_t           skew;
	pthread_mutex_t   mu;         /* guards meta (until set), keys, refs, fetched_at */
	pthread_mutex_t   discover_mu;/* one discovery at a time */
	struct oidc_meta *meta;       /* NULL until discovery succeeded; then immutable */
	struct keyset    *keys;       /* current set; NULL when none */
	int64_t           fetched_at; /* monotonic seconds of the last JWKS fetch attempt */
	bool              fetched;
	uint64_t          gen;        /* of the newest key set installed */
	struct subject_cache *cache;  /* verified subject tokens (thread-safe on its own) */
};

static void set_why(char *why, size_t whylen, const char *reason)
{
	/* The reasons are short constants: one longer than the caller's why
	 * leaves it "" (str_fmt's rule), never a cut reason. */
	if (why != NULL && whylen > 0 && str_fmt(why, whylen, "%s", reason) != CS_OK)
		why[0] = '\0';
}

/* The algorithm called name when it is one of the IdP's list; JWS_ALG__MAX
 * otherwise. */
static enum jws_alg alg_lookup(const char *name)
{
	enum jws_alg a = jws_alg_parse(name);
	return a != JWS_ALG__MAX && (JWS_ALGS_IDP_TOKEN & JWS_ALG_BIT(a)) != 0 ? a : JWS_ALG__MAX;
}

static void keyset_free(struct keyset *ks)
{
	if (ks == NULL)
		return;
	for (size_t i = 0; i < ks->n; i++) {
		free(ks->keys[i].kid);
		jws_key_free(ks->keys[i].key);
	}
	free(ks);
}

/* Drops one reference; the caller holds p->mu. */
static void keyset_unref_locked(struct keyset *ks)
{
	if (ks != NULL && --ks->refs == 0)
		keyset_free(ks);
}

static struct keyset *keyset_get(struct oidc_provider *p)
{
	pthread_mutex_lock(&p->mu);
	struct keyset *ks = p->keys;
	if (ks != NULL)
		ks->refs++;
	pthread_mutex_unlock(&p->mu);
	return ks;
}

static void keyset_put(struct oidc_provider *p, struct keyset *ks)
{
	if (ks == NULL)
		return;
	pthread_mutex_lock(&p->mu);
	keyset_unref_locked(ks);
	pthread_mutex_unlock(&p->mu);
}

/* A JWK member of base64url text: non-empty, only the alphabet (no padding),
 * and a length a base64url text can have. */
static bool member_ok(const char *s)
{
	return s != NULL && b64url_valid(s, strlen(s));
}

/* A base64url big-endian integer as its text without leading zero bytes
 * (*out malloc'd) and that length in bytes; false when s is no base64url
 * (CS_ENOMEM in *e when memory ran out). */
static bool uint_member(const char *s, char **out, size_t *len, enum cs_err *e)
{
	unsigned char *raw = NULL;
	size_t n = 0, i = 0;
	*e = CS_OK;
	if (!member_ok(s) || (*e = b64url_decode_alloc(s, strlen(s), &raw, &n)) != CS_OK) {
		if (*e != CS_ENOMEM)
			*e = CS_OK;
		return false;
	}
	while (i < n && raw[i] == 0)
		i++;
	*len = n - i;
	*out = malloc(B64URL_LEN(n - i) + 1);
	if (*out == NULL || b64url_encode(raw + i, n - i, *out, B64URL_LEN(n - i) + 1) != CS_OK) {
		free(*out);
		*out = NULL;
		*e = CS_ENOMEM;
	}
	free(raw);
	return *out != NULL;
}

/* Imports one JWKS entry when it is a usable public signing key; *ok false
 * (and CS_OK) when it is to be skipped. */
/* A JWKS entry's use, key_ops, private members and alg allow it as a
 * signature key of ours: true, with *alg its pinned algorithm or NULL. */
static bool key_for_signatures(json_t *k, const char **alg)
{
	static const char *const private_members[] = {
		"d", "p", "q", "dp", "dq", "qi", "oth", "k",
	};
	json_t *use = json_object_get(k, "use");
	json_t *ops = json_object_get(k, "key_ops");
	json_t *alg_j = json_object_get(k, "alg");

	if (use != NULL && !jstr_eq(use, "sig"))
		return false;
	if (ops != NULL) {
		bool verify = false;
		size_t i;
		json_t *v;
		if (!json_is_array(ops))
			return false;
		json_array_foreach(ops, i, v)
			if (jstr_eq(v, "verify"))
				verify = true;
		if (!verify)
			return false;
	}
	/* SECURITY: a JWKS entry with private members is never used, so a
	 * provider's mistake cannot turn into a shared secret here. */
	for (size_t i = 0; i < sizeof private_members / sizeof private_members[0]; i++)
		if (json_object_get(k, private_members[i]) != NULL)
			return false;
	if (alg_j != NULL) {
		*alg = jstr(alg_j);
		if (*alg == NULL || alg_lookup(*alg) == JWS_ALG__MAX)
			return false;         /* a key pinned to an algorithm we never accept */
	}
	return true;
}

static enum cs_err key_import(json_t *k, struct oidc_key *out, bool *ok)
{
	enum cs_err e = CS_OK;
	json_t *clean = NULL;
	char *kid = NULL, *n_min = NULL;
	struct jws_key *key = NULL;
	const char *alg = NULL;

	*ok = false;
	if (!json_is_object(k))
		goto out;
	const char *kid_s = jstr(json_object_get(k, "kid"));
	const char *kty = jstr(json_object_get(k, "kty"));
	if (kid_s == NULL || kid_s[0] == '\0' || strlen(kid_s) > OIDC_MAX_KID || kty == NULL)
		goto out;
	if (!key_for_signatures(k, &alg))
		goto out;
	if (strcmp(kty, "RSA") == 0) {
		const char *n = jstr(json_object_get(k, "n"));
		const char *ex = jstr(json_object_get(k, "e"));
		size_t nlen = 0;
		/* SECURITY: no RSA modulus below 2048 bits. */
		if (n == NULL || ex == NULL || !member_ok(ex) || !uint_member(n, &n_min, &nlen, &e) ||
		    nlen < OIDC_RSA_MIN_BYTES || nlen > OIDC_RSA_MAX_BYTES)
			goto out;
		e = CS_ENOMEM;
		clean = json_pack("{s:s, s:s, s:s}", "kty", "RSA", "n", n_min, "e", ex);
	} else if (strcmp(kty, "EC") == 0) {
		const char *x = jstr(json_object_get(k, "x"));
		const char *y = jstr(json_object_get(k, "y"));
		if (!jstr_eq(json_object_get(k, "crv"), "P-256") || !member_ok(x) || !member_ok(y))
			goto out;
		e = CS_ENOMEM;
		clean = json_pack("{s:s, s:s, s:s, s:s}", "kty", "EC", "crv", "P-256", "x", x, "y", y);
	} else {
		goto out;
	}
	if (clean == NULL || (alg != NULL && json_object_set_new(clean, "alg", json_string(alg)) != 0))
		goto out;
	if ((kid = strdup(kid_s)) == NULL)
		goto out;
	/* Only the public members reach jws.c; it checks an EC point is on the
	 * curve, and that a pinned alg fits the key's type (else the key is skipped). */
	if ((e = jws_key_from_jwk_for(clean, JWS_ALGS_IDP_TOKEN, &key, NULL, 0)) != CS_OK) {
		if (e != CS_ENOMEM)
			e = CS_OK;
		goto out;
	}
	out->kid = kid;
	out->key = key;
	kid = NULL;
	*ok = true;
out:
	json_decref(clean);
	free(n_min);
	free(kid);
	return e;
}

static enum cs_err keyset_parse(const char *jwks_json, struct keyset **out)
{
	enum cs_err e = CS_EINVAL;
	json_t *doc = NULL, *keys, *k;
	struct keyset *ks = NULL;
	size_t i;

	if (jwks_json == NULL)
		goto out;
	doc = json_loads(jwks_json, JSON_REJECT_DUPLICATES, NULL);
	keys = json_object_get(doc, "keys");
	if (!json_is_object(doc) || !json_is_array(keys))
		goto out;
	e = CS_ENOMEM;
	if ((ks = calloc(1, sizeof *ks)) == NULL)
		goto out;
	json_array_foreach(keys, i, k) {
		bool ok = false;
		if (i >= OIDC_MAX_JWKS_ENTRIES || ks->n >= OIDC_MAX_KEYS)
			break;
		if ((e = key_import(k, &ks->keys[ks->n], &ok)) != CS_OK)
			goto out;
		if (ok)
			ks->n++;
	}
	e = CS_EINVAL;
	if (ks->n == 0)
		goto out;
	ks->refs = 1;
	*out = ks;
	ks = NULL;
	e = CS_OK;
out:
	keyset_free(ks);
	json_decref(doc);
	return e;
}

enum cs_err oidc_set_jwks(struct oidc_provider *p, const char *jwks_json)
{
	enum cs_err e;
	struct keyset *ks = NULL;

	if (p == NULL || jwks_json == NULL)
		return CS_EINVAL;
	/* Keys are imported once per JWKS, here, never per token.  A document
	 * without a usable key leaves the current set in place. */
	if ((e = keyset_parse(jwks_json, &ks)) != CS_OK)
		return e;
	pthread_mutex_lock(&p->mu);
	struct keyset *old = p->keys;
	uint64_t gen = ks->gen = ++p->gen;
	p->keys = ks;
	keyset_unref_locked(old);            /* freed now, or by its last reader */
	pthread_mutex_unlock(&p->mu);
	/* SECURITY: a new key set forgets every cached subject token: each is
	 * verified again with the keys the IdP publishes now.  (A thread still
	 * holding the old set cannot put an entry back: its generation is older.) */
	subject_cache_advance(p->cache, gen);
	return CS_OK;
}

/* --- provider ----------------------------------------------------------- */

enum cs_err oidc_provider_new(const char *issuer, int64_t clock_skew, struct oidc_provider **out)
{
	struct oidc_provider *p = NULL;

	if (issuer == NULL || out == NULL || clock_skew < 0 || clock_skew > OIDC_MAX_SKEW ||
	    !httpc_url_allowed(issuer))
		return CS_EINVAL;
	if ((p = calloc(1, sizeof *p)) == NULL)
		return CS_ENOMEM;
	if ((p->issuer = strdup(issuer)) == NULL) {
		free(p);
		return CS_ENOMEM;
	}
	enum cs_err e = subject_cache_new(SUBJECT_CACHE_ENTRIES, &p->cache);
	if (e != CS_OK) {
		free(p->issuer);
		free(p);
		return e;
	}
	p->skew = clock_skew;
	pthread_mutex_init(&p->mu, NULL);
	pthread_mutex_init(&p->discover_mu, NULL);
	*out = p;
	return CS_OK;
}

static void meta_free(struct oidc_meta *m)
{
	if (m == NULL)
		return;
	free(m->issuer);
	free(m->authorization_endpoint);
	free(m->token_endpoint);
	free(m->jwks_uri);
	free(m->end_session_endpoint);
	free(m);
}

void oidc_provider_free(struct oidc_provider *p)
{
	if (p == NULL)
		return;
	/* No thread may still use p: its key set has no other reader left. */
	keyset_free(p->keys);
	subject_cache_free(p->cache);
	meta_free(p->meta);
	pthread_mutex_destroy(&p->mu);
	pthread_mutex_destroy(&p->discover_mu);
	free(p->issuer);
	free(p);
}

const struct oidc_meta *oidc_meta(struct oidc_provider *p)
{
	if (p == NULL)
		return NULL;
	pthread_mutex_lock(&p->mu);
	const struct oidc_meta *m = p->meta;
	pthread_mutex_unlock(&p->mu);
	return m;
}

/* Fetches the JWKS at uri into p.  Records the attempt time first, so that
 * a failing fetch is rate-limited like a successful one. */
static enum cs_err jwks_fetch(struct oidc_provider *p, const char *uri)
{
	enum cs_err e;
	struct httpc_response res;

	pthread_mutex_lock(&p->mu);
	p->fetched_at = mono_now();
	p->fetched = true;
	pthread_mutex_unlock(&p->mu);
	if ((e = httpc_get(uri, &res)) != CS_OK)
		goto out;
	if (res.status != 200)
		e = CS_EIO;
	else
		e = oidc_set_jwks(p, res.body.data);
	httpc_response_clear(&res);
out:
	if (e != CS_OK && e != CS_ENOMEM)
		metrics_inc(M_FETCH_ERRORS, "idp_jwks");
	return e;
}

enum cs_err oidc_doc_url(json_t *doc, const char *name, bool required, char **out)
{
	json_t *v = json_object_get(doc, name);
	*out = NULL;
	if (v == NULL && !required)
		return CS_OK;
	const char *s = jstr(v);
	/* SECURITY: every endpoint is https (or http on loopback), no userinfo. */
	if (s == NULL || !httpc_url_allowed(s))
		return CS_EINVAL;
	return (*out = strdup(s)) != NULL ? CS_OK : CS_ENOMEM;
}

static bool array_has(json_t *a, const char *s)
{
	size_t i;
	json_t *v;
	if (!json_is_array(a))
		return false;
	json_array_foreach(a, i, v)
		if (jstr_eq(v, s))
			return true;
	return false;
}

enum cs_err oidc_meta_parse(const char *issuer, const char *body, struct oidc_meta **out)
{
	enum cs_err e = CS_EINVAL;
	json_t *doc = NULL;
	struct oidc_meta *m = NULL;

	if (issuer == NULL || body == NULL || out == NULL)
		goto out;
	doc = json_loads(body, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(doc))
		goto out;
	/* SECURITY: the document must name exactly the issuer we were configured
	 * with (OIDC Discovery §4.3): no trailing-slash or case games. */
	if (!jstr_eq(json_object_get(doc, "issuer"), issuer))
		goto out;
	e = CS_ENOMEM;
	if ((m = calloc(1, sizeof *m)) == NULL || (m->issuer = strdup(issuer)) == NULL)
		goto out;
	if ((e = oidc_doc_url(doc, "authorization_endpoint", true,
	    &m->authorization_endpoint)) != CS_OK ||
	    (e = oidc_doc_url(doc, "token_endpoint", true, &m->token_endpoint)) != CS_OK ||
	    (e = oidc_doc_url(doc, "jwks_uri", true, &m->jwks_uri)) != CS_OK ||
	    (e = oidc_doc_url(doc, "end_session_endpoint", false, &m->end_session_endpoint)) != CS_OK)
		goto out;
	m->iss_parameter_supported =
	    json_is_true(json_object_get(doc, "authorization_response_iss_parameter_supported"));
	m->public_subjects = array_has(json_object_get(doc, "subject_types_supported"), "public");
	m->s256_supported = array_has(json_object_get(doc, "code_challenge_methods_supported"), "S256");
	*out = m;
	m = NULL;
	e = CS_OK;
out:
	meta_free(m);
	json_decref(doc);
	return e;
}

void oidc_meta_free(struct oidc_meta *m)
{
	meta_free(m);
}

enum cs_err oidc_discovery_url(const char *issuer, struct buf *url)
{
	enum cs_err e;
	size_t n = strlen(issuer);
	if (n > 0 && issuer[n - 1] == '/')
		n--;
	if ((e = buf_append(url, issuer, n)) != CS_OK ||
	    (e = buf_puts(url, "/.well-known/openid-configuration")) != CS_OK)
		return e;
	return CS_OK;
}

enum cs_err oidc_discover(struct oidc_provider *p)
{
	enum cs_err e = CS_ENOMEM;
	struct buf url;
	struct httpc_response res;
	struct oidc_meta *m = NULL;
	bool counted = false;

	if (p == NULL)
		return CS_EINVAL;
	buf_init(&url, 4096);
	res.status = 0;
	buf_init(&res.body, HTTPC_MAX_RESPONSE);
	res.content_type = NULL;
	pthread_mutex_lock(&p->discover_mu);
	if (oidc_meta(p) != NULL) {           /* done before: the metadata never changes */
		e = CS_OK;
		goto out;
	}
	if ((e = oidc_discovery_url(p->issuer, &url)) != CS_OK)
		goto out;
	if ((e = httpc_get(url.data, &res)) != CS_OK)
		goto out;
	e = CS_EIO;
	if (res.status != 200)
		goto out;
	if ((e = oidc_meta_parse(p->issuer, res.body.data != NULL ? res.body.data : "", &m)) != CS_OK)
		goto out;
	counted = true;                       /* jwks_fetch counts its own failures */
	if ((e = jwks_fetch(p, m->jwks_uri)) != CS_OK)
		goto out;
	pthread_mutex_lock(&p->mu);
	p->meta = m;
	m = NULL;
	pthread_mutex_unlock(&p->mu);
	e = CS_OK;
out:
	if (e != CS_OK && e != CS_ENOMEM && !counted)
		metrics_inc(M_FETCH_ERRORS, "idp_discovery");
	pthread_mutex_unlock(&p->discover_mu);
	meta_free(m);
	httpc_response_clear(&res);
	buf_clear(&url);
	return e;
}

void oidc_backdate_jwks_fetch(struct oidc_provider *p, int64_t seconds)
{
	if (p == NULL || seconds < 0 || seconds > OIDC_MAX_TIME)
		return;
	pthread_mutex_lock(&p->mu);
	p->fetched_at -= seconds;
	pthread_mutex_unlock(&p->mu);
}

size_t oidc_subject_cache_count(struct oidc_provider *p)
{
	return p != NULL ? subject_cache_count(p->cache) : 0;
}

/* --- validation --------------------------------------------------------- */

/* A time claim: an integer, or a finite real, in [0, OIDC_MAX_TIME].
 * CS_ENOENT when absent, CS_EINVAL when present but not a sane time. */
static enum cs_err time_claim(json_t *c, const char *name, int64_t *out)
{
	json_t *v = json_object_get(c, name);
	if (v == NULL)
		return CS_ENOENT;
	if (json_is_integer(v)) {
		json_int_t t = json_integer_value(v);
		if (t < 0 || t > OIDC_MAX_TIME)
			return CS_EINVAL;
		*out = (int64_t)t;
		return CS_OK;
	}
	if (json_is_real(v)) {
		double d = json_real_value(v);
		if (!isfinite(d) || d < 0.0 || d > (double)OIDC_MAX_TIME)
			return CS_EINVAL;
		*out = (int64_t)d;          /* d >= 0: truncation is floor */
		return CS_OK;
	}
	return CS_EINVAL;
}

/* The first key named kid that fits alg, or with *kid_seen set when the kid
 * exists but no key of that kid may be used with alg. */
static const struct oidc_key *key_find(const struct keyset *ks, const char *kid,
    enum jws_alg alg, bool *kid_seen)
{
	*kid_seen = false;
	if (ks == NULL)
		return NULL;
	for (size_t i = 0; i < ks->n; i++) {
		const struct oidc_key *k = &ks->keys[i];
		if (strcmp(k->kid, kid) != 0)
			continue;
		*kid_seen = true;
		/* SECURITY: the algorithm must fit the key's type and the key's own alg. */
		if ((k->key->algs & JWS_ALG_BIT(alg)) != 0)
			return k;
	}
	return NULL;
}

/* Decodes and pins the protected header: JSON object, alg in the allowlist,
 * a kid, no crit, not a logout token. */
static enum cs_err header_parse(const char *b64, size_t len, enum jws_alg *alg, json_t **hdr,
    const char **why)
{
	enum cs_err e = CS_EINVAL;
	unsigned char *raw = NULL;
	size_t raw_len = 0;
	json_t *h = NULL;

	*why = "has a malformed header";
	if (len > OIDC_MAX_HEADER_B64)
		goto out;
	if (b64url_decode_alloc(b64, len, &raw, &raw_len) != CS_OK)
		goto out;
	h = json_loadb((const char *)raw, raw_len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(h))
		goto out;
	const char *a = jstr(json_object_get(h, "alg"));
	/* SECURITY: the algorithm comes from our allowlist, never the token on
	 * trust: "none", HS256 with a public key as secret and the rest fail here. */
	*why = "uses an algorithm that is not allowed";
	if (a == NULL || (*alg = alg_lookup(a)) == JWS_ALG__MAX)
		goto out;
	json_t *typ = json_object_get(h, "typ");
	/* SECURITY: a logout token (RFC 8417 / OIDC Back-Channel Logout) signed by
	 * the same provider is never an ID or subject token. */
	*why = "has a typ that is not allowed";
	if (typ != NULL && (jstr(typ) == NULL || jstr_eq(typ, "logout+jwt") ||
	    jstr_eq(typ, "secevent+jwt")))
		goto out;
	*hdr = h;
	h = NULL;
	e = CS_OK;
out:
	json_decref(h);
	free(raw);
	return e;
}

static bool aud_accepted(const json_t *v, const struct oidc_expect *exp)
{
	for (size_t i = 0; i < exp->naudiences; i++)
		if (exp->audiences[i] != NULL && jstr_eq(v, exp->audiences[i]))
			return true;
	return false;
}

/* SECURITY: aud holds an accepted audience; azp (OIDC Core §3.1.3.7) is
 * required with several audiences, and when present it names us. */
static enum cs_err audience_check(json_t *c, const struct oidc_expect *exp, const char **why)
{
	json_t *aud = json_object_get(c, "aud");
	bool ok = false;
	size_t naud = 1;
	*why = "has the wrong audience";
	if (json_is_string(aud)) {
		ok = aud_accepted(aud, exp);
	} else if (json_is_array(aud) && json_array_size(aud) > 0) {
		size_t i;
		json_t *v;
		naud = json_array_size(aud);
		json_array_foreach(aud, i, v) {
			if (!json_is_string(v))
				return CS_EINVAL;
			if (aud_accepted(v, exp))
				ok = true;
		}
	}
	if (!ok)
		return CS_EINVAL;

	json_t *azp = json_object_get(c, "azp");
	*why = "has the wrong azp";
	if (azp != NULL && !json_is_string(azp))
		return CS_EINVAL;
	if (exp->client_id != NULL) {
		if (naud > 1 && azp == NULL)
			return CS_EINVAL;
		if (azp != NULL && !jstr_eq(azp, exp->client_id))
			return CS_EINVAL;
	}
	return CS_OK;
}

/* exp, nbf and iat against the clock, each with skew seconds of leeway. */
static enum cs_err lifetime_check(json_t *c, int64_t now, int64_t skew, const char **why)
{
	int64_t t = 0;
	enum cs_err te;

	*why = "has no valid exp";
	if (time_claim(c, "exp", &t) != CS_OK)
		return CS_EINVAL;
	*why = "expired";
	if (now >= t + skew)
		return CS_EINVAL;

	te = time_claim(c, "nbf", &t);
	*why = "has a malformed nbf";
	if (te == CS_EINVAL)
		return CS_EINVAL;
	*why = "is not valid yet";
	if (te == CS_OK && t > now + skew)
		return CS_EINVAL;

	*why = "has no valid iat";
	if (time_claim(c, "iat", &t) != CS_OK)
		return CS_EINVAL;
	*why = "was issued in the future";
	if (t > now + skew)
		return CS_EINVAL;
	return CS_OK;
}

/* The claim checks, in the order the ID token rules list them. */
static enum cs_err claims_check(const struct oidc_provider *p, json_t *c,
    const struct oidc_expect *exp, const char **why)
{
	int64_t t = 0, now = exp->now, skew = p->skew;

	/* SECURITY: iss is exactly the configured issuer. */
	*why = "has the wrong issuer";
	if (!jstr_eq(json_object_get(c, "iss"), p->issuer))
		return CS_EINVAL;

	if (audience_check(c, exp, why) != CS_OK)
		return CS_EINVAL;
	if (lifetime_check(c, now, skew, why) != CS_OK)
		return CS_EINVAL;

	if (exp->nonce != NULL) {
		json_t *n = json_object_get(c, "nonce");
		size_t want = strlen(exp->nonce);
		/* SECURITY: the nonce bound to the browser, compared in constant time. */
		*why = "has the wrong nonce";
		if (!json_is_string(n) || json_string_length(n) != want ||
		    CRYPTO_memcmp(json_string_value(n), exp->nonce, want) != 0)
			return CS_EINVAL;
	}

	if (exp->max_age >= 0 || exp->require_auth_time) {
		*why = "has no valid auth_time";
		if (time_claim(c, "auth_time", &t) != CS_OK)
			return CS_EINVAL;
		*why = "has an auth_time in the future";
		if (t > now + skew)
			return CS_EINVAL;
		/* now - t is in [-skew, OIDC_MAX_TIME]: no overflow below. */
		*why = "is from a sign-in that is too old";
		if (exp->max_age >= 0 && now - t - skew > exp->max_age)
			return CS_EINVAL;
	}

	/* SECURITY: a logout token carries `events`; it is not a login. */
	*why = "is a logout or event token";
	if (json_object_get(c, "events") != NULL)
		return CS_EINVAL;
	return CS_OK;
}

/* The key for kid and alg in p's key set, which *ks holds (a reference,
 * released with keyset_put by the caller).  An unknown kid may be a rotation:
 * the JWKS is fetched again, at most once a minute and only for a discovered
 * provider, and *ks then holds the new set.  *kid_seen as key_find sets it. */
static const struct oidc_key *key_lookup(struct oidc_provider *p, struct keyset **ks,
    const char *kid, enum jws_alg alg, bool *kid_seen)
{
	const char *uri = NULL;
	*ks = keyset_get(p);
	const struct oidc_key *key = key_find(*ks, kid, alg, kid_seen);
	if (key != NULL || *kid_seen)
		return key;
	pthread_mutex_lock(&p->mu);
	int64_t m = mono_now();
	if (p->meta != NULL && (!p->fetched || m - p->fetched_at >= OIDC_REFETCH_EVERY)) {
		uri = p->meta->jwks_uri;   /* immutable once set */
		p->fetched_at = m;         /* claimed: concurrent misses do not fetch too */
		p->fetched = true;
	}
	pthread_mutex_unlock(&p->mu);
	if (uri != NULL && jwks_fetch(p, uri) == CS_OK) {
		keyset_put(p, *ks);
		*ks = keyset_get(p);
		key = key_find(*ks, kid, alg, kid_seen);
	}
	return key;
}

/* A subject token verified before under the current key set: CS_OK with
 * *claims (shared, read-only) when its claims pass every check at exp->now
 * again; CS_EINVAL with *why when they no longer do; CS_ENOENT when it is not
 * in the cache (then it is validated in full).  Only the signature and header
 * checks are remembered: the claim checks are the same code either way. */
static enum cs_err cache_lookup(struct oidc_provider *p, const unsigned char *digest,
    const struct oidc_expect *exp, json_t **claims, const char **why)
{
	json_t *c = NULL;
	pthread_mutex_lock(&p->mu);
	uint64_t gen = p->keys != NULL ? p->keys->gen : 0;
	pthread_mutex_unlock(&p->mu);
	if (!subject_cache_get(p->cache, digest, gen, exp->now, &c)) {
		metrics_inc2(M_CACHE_LOOKUPS, "subject_token", "miss");
		return CS_ENOENT;
	}
	metrics_inc2(M_CACHE_LOOKUPS, "subject_token", "hit");
	enum cs_err e = claims_check(p, c, exp, why);
	if (e != CS_OK) {
		json_decref(c);
		return e;
	}
	*claims = c;
	return CS_OK;
}

/* Remembers a token that passed every check (claims c, verified with ks). */
static void cache_put(struct oidc_provider *p, const unsigned char *digest,
    const struct keyset *ks, const struct oidc_expect *exp, json_t *c)
{
	int64_t t = 0;
	/* SECURITY: an entry lives until the token's exp, never longer (the
	 * clock skew is not added: past exp, the token is validated in full). */
	if (time_claim(c, "exp", &t) == CS_OK)
		subject_cache_put(p->cache, digest, ks->gen, exp->now, t, c);
}

/* SECURITY: the shape, before any decoding: a length cap, three non-empty
 * segments of base64url characters.  *len and the two dots' offsets. */
static bool jwt_shape(const char *jwt, size_t *len, size_t dots[2], const char **reason)
{
	size_t nd = 0;
	*len = strnlen(jwt, OIDC_MAX_JWT + 1);
	*reason = "is too long";
	if (*len > OIDC_MAX_JWT)
		return false;
	*reason = "is not a well-formed compact JWS";
	for (size_t i = 0; i < *len; i++) {
		if (jwt[i] == '.') {
			if (nd == 2)
				return false;
			dots[nd++] = i;
		} else if (!b64url_char((unsigned char)jwt[i])) {
			return false;
		}
	}
	return nd == 2 && dots[0] != 0 && dots[1] != dots[0] + 1 && dots[1] + 1 != *len;
}

/* The header, the IdP's key for its kid and alg, the signature, the payload
 * as a JSON object into *c; *ks holds the key set the key came from (the
 * caller puts it back). */
static enum cs_err verify_signed(struct oidc_provider *p, const char *jwt, size_t len,
    const size_t dots[2], struct keyset **ks, json_t **c, const char **reason)
{
	enum jws_alg alg = JWS_ALG__MAX;
	json_t *hdr = NULL;
	const struct oidc_key *key;
	unsigned char *pt = NULL, *sig = NULL;
	size_t pt_len = 0, sig_len = 0;
	bool kid_seen = false;
	enum cs_err e;

	if ((e = header_parse(jwt, dots[0], &alg, &hdr, reason)) != CS_OK)
		return e;
	e = CS_EINVAL;
	*reason = "has no kid";
	const char *kid = jstr(json_object_get(hdr, "kid"));
	if (kid == NULL || kid[0] == '\0' || strlen(kid) > OIDC_MAX_KID)
		goto out;
	e = CS_ECRYPTO;
	key = key_lookup(p, ks, kid, alg, &kid_seen);
	*reason = "is signed with a key the IdP does not publish (unknown kid)";
	if (key == NULL && !kid_seen)
		goto out;
	*reason = "uses an algorithm that does not fit its key";
	if (key == NULL)
		goto out;
	e = CS_EINVAL;
	/* SECURITY: no critical extension is understood here, so none is accepted. */
	*reason = "has a crit header";
	if (json_object_get(hdr, "crit") != NULL)
		goto out;
	*reason = "has a malformed signature";
	if (alg == JWS_ES256 && len - dots[1] - 1 != OIDC_ES256_SIG_B64U)
		goto out;
	/* The payload and the signature decode (the header did in header_parse). */
	*reason = "is not a well-formed JWS";
	if ((e = b64url_decode_alloc(jwt + dots[0] + 1, dots[1] - dots[0] - 1, &pt, &pt_len)) !=
	    CS_OK ||
	    (e = b64url_decode_alloc(jwt + dots[1] + 1, len - dots[1] - 1, &sig, &sig_len)) != CS_OK) {
		if (e != CS_ENOMEM)
			e = CS_EINVAL;
		goto out;
	}
	e = CS_ECRYPTO;
	*reason = "has a bad signature";
	if (!jws_verify_input(key->key, alg, jwt, dots[1], sig, sig_len))
		goto out;
	e = CS_EINVAL;
	*reason = "has a malformed payload";
	*c = json_loadb((const char *)pt, pt_len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(*c)) {
		json_decref(*c);
		*c = NULL;
		goto out;
	}
	e = CS_OK;
out:
	json_decref(hdr);
	free(pt);
	free(sig);
	return e;
}

enum cs_err oidc_validate(struct oidc_provider *p, const char *jwt,
    const struct oidc_expect *exp, json_t **claims, char *why, size_t whylen)
{
	enum cs_err e = CS_EINVAL;
	const char *reason = "could not be checked (bad arguments)";
	size_t len = 0, dots[2] = { 0, 0 };
	json_t *c = NULL;
	struct keyset *ks = NULL;
	unsigned char digest[SUBJECT_CACHE_DIGEST];

	set_why(why, whylen, "");
	if (p == NULL || jwt == NULL || exp == NULL || claims == NULL)
		goto out;
	reason = "could not be checked (bad clock)";
	if (exp->now < 0 || exp->now > OIDC_MAX_TIME)
		goto out;
	if (!jwt_shape(jwt, &len, dots, &reason))
		goto out;
	if (exp->cache) {
		reason = "could not be checked (no digest)";
		if ((e = subject_cache_digest(p->cache, jwt, len, digest)) != CS_OK)
			goto out;
		e = cache_lookup(p, digest, exp, &c, &reason);
		if (e == CS_OK)
			goto done;
		if (e != CS_ENOENT)
			goto out;
		e = CS_EINVAL;
	}
	if ((e = verify_signed(p, jwt, len, dots, &ks, &c, &reason)) != CS_OK)
		goto out;
	if ((e = claims_check(p, c, exp, &reason)) != CS_OK)
		goto out;
	if (exp->cache)
		cache_put(p, digest, ks, exp, c);
done:
	*claims = c;
	c = NULL;
	reason = "";
	e = CS_OK;
out:
	if (e != CS_OK)
		set_why(why, whylen, reason);
	json_decref(c);
	keyset_put(p, ks);
	return e;
}

/* --- code exchange ------------------------------------------------------- */

static enum cs_err form_add(struct buf *b, const char *name, const char *value)
{
	enum cs_err e;
	char *v = NULL;
	if ((e = pct_encode(value, &v)) != CS_OK)
		return e;
	if (b->len > 0)
		e = buf_puts(b, "&");
	if (e == CS_OK)
		e = buf_printf(b, "%s=%s", name, v);
	OPENSSL_cleanse(v, strlen(v));        /* codes, verifiers and secrets */
	free(v);
	return e;
}

/* Wipes every string member of a token response before it is freed. */
static void json_wipe_strings(json_t *o)
{
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v)
		if (json_is_string(v))
			OPENSSL_cleanse((char *)json_string_value(v), json_string_length(v));
}

enum cs_err oidc_exchange_code(struct oidc_provider *p, const char *client_id,
    const char *client_secret, enum oidc_auth auth, const char *code,
    const char *redirect_uri, const char *code_verifier, char **id_token)
{
	enum cs_err e = CS_EINVAL;
	const struct oidc_meta *m;
	struct buf body;
	struct httpc_response res;
	json_t *doc = NULL;
	char *tok = NULL;

	res.status = 0;
	buf_init(&res.body, HTTPC_MAX_RESPONSE);
	res.content_type = NULL;
	buf_init(&body, OIDC_MAX_FORM);
	if (p == NULL || client_id == NULL || client_secret == NULL || code == NULL ||
	    redirect_uri == NULL || code_verifier == NULL || id_token == NULL ||
	    (auth != OIDC_AUTH_BASIC && auth != OIDC_AUTH_POST))
		goto out;
	if ((m = oidc_meta(p)) == NULL)
		goto out;
	if ((e = form_add(&body, "grant_type", "authorization_code")) != CS_OK ||
	    (e = form_add(&body, "code", code)) != CS_OK ||
	    (e = form_add(&body, "redirect_uri", redirect_uri)) != CS_OK ||
	    (e = form_add(&body, "code_verifier", code_verifier)) != CS_OK)
		goto out;
	if (auth == OIDC_AUTH_POST &&
	    ((e = form_add(&body, "client_id", client_id)) != CS_OK ||
	    (e = form_add(&body, "client_secret", client_secret)) != CS_OK))
		goto out;
	e = httpc_post_form(m->token_endpoint, body.data,
	    auth == OIDC_AUTH_BASIC ? client_id : NULL,
	    auth == OIDC_AUTH_BASIC ? client_secret : NULL, &res);
	if (e != CS_OK)
		goto out;
	if (res.status == 400 || res.status == 401) {
		e = CS_EPERM;                     /* invalid_grant, invalid_client ... */
		goto out;
	}
	e = CS_EIO;
	if (res.status != 200)
		goto out;
	e = CS_EINVAL;
	doc = json_loads(res.body.data, JSON_REJECT_DUPLICATES, NULL);
	const char *it = jstr(json_object_get(doc, "id_token"));
	if (!json_is_object(doc) || it == NULL || it[0] == '\0')
		goto out;
	e = CS_ENOMEM;
	if ((tok = strdup(it)) == NULL)
		goto out;
	*id_token = tok;
	e = CS_OK;
out:
	/* SECURITY: the request (code, verifier, maybe the secret) and the
	 * response (tokens) are wiped. */
	if (json_is_object(doc))
		json_wipe_strings(doc);
	json_decref(doc);
	httpc_response_clear(&res);
	buf_wipe_clear(&body);
	return e;
}
