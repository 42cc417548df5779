/* login_cookie.c -- a started sign-in's state, sealed into a cookie of the
 * browser that started it (login_cookie.h, issue #28).  It only names, seals,
 * opens and sorts those cookies; it must never hand out the fields of a
 * cookie that did not verify, nor keep a nonce or verifier unwiped. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include "b64.h"
#include "buf.h"
#include "login_cookie.h"
#include "form.h"

/* The sealing key is derived per day ("login-state <day>"), so that no key
 * seals more than a day of sign-in starts: AES-GCM with random 96-bit nonces
 * stays far below 2^32 seals a key even for a stranger starting sign-ins at
 * 40,000 a second.  A cookie lives 300 s, so it opens under the key of the
 * day it is presented or the day before (or the day after, at a node whose
 * clock is behind the one that sealed it). */
#define PURPOSE_FMT "login-state %lld"
#define DAY 86400
#define VERSION 1
#define FIXED_LEN (1 + 8 + 8 + 32 + SESSION_TOKEN_LEN + SESSION_TOKEN_LEN)
#define SEAL_OVERHEAD (12 + 16)          /* seal(): nonce and tag */
#define AAD_PREFIX "consentd login v1 "

void login_cookie_clear(struct login_cookie *lc)
{
	if (lc != NULL)
		OPENSSL_cleanse(lc, sizeof *lc);
}

const char *login_cookie_prefix(const struct config *cfg)
{
	return cfg->public_url_is_https ? "__Host-consentd-login-" : "consentd_login_";
}

void login_cookie_name(const struct config *cfg, const unsigned char state_hash[32],
    char out[LOGIN_COOKIE_NAME_MAX])
{
	static const char hex[] = "0123456789abcdef";
	const char *p = login_cookie_prefix(cfg);
	size_t n = strlen(p);
	memcpy(out, p, n);
	for (size_t i = 0; i < LOGIN_COOKIE_ID_LEN / 2; i++) {
		out[n++] = hex[state_hash[i] >> 4];
		out[n++] = hex[state_hash[i] & 15];
	}
	out[n] = '\0';
}

/* A return_to as /login accepts it (form.c valid_return_to), n bytes. */
static bool return_to_ok(const char *s, size_t n)
{
	char copy[LOGIN_RETURN_TO_MAX + 1];
	bool ok;
	if (n == 0 || n > LOGIN_RETURN_TO_MAX || memchr(s, '\0', n) != NULL)
		return false;
	memcpy(copy, s, n);
	copy[n] = '\0';
	ok = valid_return_to(copy);
	OPENSSL_cleanse(copy, n);
	return ok;
}

static bool token_ok(const char *s)
{
	return strlen(s) == SESSION_TOKEN_LEN && b64url_valid(s, SESSION_TOKEN_LEN);
}

static void put64(unsigned char *p, int64_t v)
{
	uint64_t u = (uint64_t)v;
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(u >> (56 - 8 * i));
}

static int64_t get64(const unsigned char *p)
{
	uint64_t u = 0;
	for (int i = 0; i < 8; i++)
		u = u << 8 | p[i];
	return (int64_t)u;
}

/* The associated data: the cookie's name, so a value cannot move to another. */
static enum cs_err aad_of(const char *name, char out[sizeof AAD_PREFIX + LOGIN_COOKIE_NAME_MAX],
    size_t *len)
{
	if (str_fmt(out, sizeof AAD_PREFIX + LOGIN_COOKIE_NAME_MAX, "%s%s", AAD_PREFIX, name) != CS_OK)
		return CS_EINVAL;
	*len = strlen(out);
	return CS_OK;
}

static enum cs_err purpose_of(int64_t day, char out[40])
{
	return str_fmt(out, 40, PURPOSE_FMT, (long long)day) == CS_OK ? CS_OK : CS_EINVAL;
}

enum cs_err login_cookie_parse(const unsigned char *pt, size_t n, struct login_cookie *out)
{
	struct login_cookie lc;
	const unsigned char *p = pt;
	enum cs_err e = CS_EINVAL;
	if (n < FIXED_LEN || n > FIXED_LEN + LOGIN_RETURN_TO_MAX || p[0] != VERSION)
		return CS_EINVAL;
	memset(&lc, 0, sizeof lc);
	lc.expires_at = get64(p + 1);
	lc.max_age = get64(p + 9);
	memcpy(lc.state_hash, p + 17, 32);
	memcpy(lc.nonce, p + 49, SESSION_TOKEN_LEN);
	memcpy(lc.verifier, p + 49 + SESSION_TOKEN_LEN, SESSION_TOKEN_LEN);
	p += FIXED_LEN;
	if (lc.max_age < -1 || !token_ok(lc.nonce) || !token_ok(lc.verifier) ||
	    !return_to_ok((const char *)p, n - FIXED_LEN))
		goto out;
	memcpy(lc.return_to, p, n - FIXED_LEN);
	*out = lc;
	e = CS_OK;
out:
	login_cookie_clear(&lc);
	return e;
}

enum cs_err login_cookie_seal(const struct master_key *mk, const char *name,
    const struct login_cookie *lc, int64_t now, char **value)
{
	unsigned char pt[FIXED_LEN + LOGIN_RETURN_TO_MAX], *blob = NULL;
	char aad[sizeof AAD_PREFIX + LOGIN_COOKIE_NAME_MAX], purpose[40], *enc = NULL;
	size_t rlen = strlen(lc->return_to), alen = 0, blen = 0;
	enum cs_err e;

	if (!token_ok(lc->nonce) || !token_ok(lc->verifier) || !return_to_ok(lc->return_to, rlen) ||
	    lc->max_age < -1 || now < DAY)
		return CS_EINVAL;
	if ((e = aad_of(name, aad, &alen)) != CS_OK || (e = purpose_of(now / DAY, purpose)) != CS_OK)
		return e;
	pt[0] = VERSION;
	put64(pt + 1, lc->expires_at);
	put64(pt + 9, lc->max_age);
	memcpy(pt + 17, lc->state_hash, 32);
	memcpy(pt + 49, lc->nonce, SESSION_TOKEN_LEN);
	memcpy(pt + 49 + SESSION_TOKEN_LEN, lc->verifier, SESSION_TOKEN_LEN);
	memcpy(pt + FIXED_LEN, lc->return_to, rlen);
	e = seal(mk, purpose, aad, alen, pt, FIXED_LEN + rlen, &blob, &blen);
	OPENSSL_cleanse(pt, sizeof pt);
	if (e != CS_OK)
		return e;
	e = CS_EINVAL;
	if (B64URL_LEN(blen) > LOGIN_COOKIE_VALUE_MAX)
		goto out;
	e = CS_ENOMEM;
	if ((enc = malloc(B64URL_LEN(blen) + 1)) == NULL)
		goto out;
	if ((e = b64url_encode(blob, blen, enc, B64URL_LEN(blen) + 1)) != CS_OK)
		goto out;
	*value = enc;
	enc = NULL;
out:
	wipe_free(enc);
	free(blob);
	return e;
}

enum cs_err login_cookie_open(const struct master_key *mk, const char *name,
    const char *value, size_t len, int64_t now, struct login_cookie *out)
{
	char aad[sizeof AAD_PREFIX + LOGIN_COOKIE_NAME_MAX], purpose[40];
	unsigned char *blob = NULL, *pt = NULL;
	size_t alen = 0, blen = 0, ptlen = 0;
	enum cs_err e;
	static const size_t min_len = ((FIXED_LEN + SEAL_OVERHEAD) * 4 + 2) / 3;

	if (len < min_len || len > LOGIN_COOKIE_VALUE_MAX || !b64url_valid(value, len))
		return CS_EINVAL;
	if ((e = aad_of(name, aad, &alen)) != CS_OK)
		return e;
	if (b64url_decode_alloc(value, len, &blob, &blen) != CS_OK)
		return CS_EINVAL;
	/* SECURITY: nothing of the plaintext is read before the tag verified. */
	e = CS_ECRYPTO;
	static const int64_t days[] = { 0, -1, 1 };
	for (size_t i = 0; i < sizeof days / sizeof days[0] && e == CS_ECRYPTO; i++) {
		if ((e = purpose_of(now / DAY + days[i], purpose)) != CS_OK)
			break;
		e = unseal(mk, purpose, aad, alen, blob, blen, &pt, &ptlen);
	}
	if (e == CS_OK) {
		e = login_cookie_parse(pt, ptlen, out);
		OPENSSL_cleanse(pt, ptlen);
		free(pt);
	}
	free(blob);
	return e;
}

/* What login_cookie_stale saw of one cookie. */
struct seen {
	char    name[LOGIN_COOKIE_NAME_MAX];
	int64_t expires_at;              /* 0: it does not open, or has expired */
};
struct stale_walk {
	const struct master_key *mk;
	int64_t now;
	struct seen s[LOGIN_COOKIES_SEEN];
	size_t n;
};

static bool stale_each(const char *name, size_t nlen, const char *value, size_t vlen, void *arg)
{
	struct stale_walk *w = arg;
	struct seen *s = &w->s[w->n];
	struct login_cookie lc;
	if (nlen >= LOGIN_COOKIE_NAME_MAX)
		return true;                  /* not a name of ours: not ours to delete */
	memcpy(s->name, name, nlen);
	s->name[nlen] = '\0';
	s->expires_at = 0;
	if (login_cookie_open(w->mk, s->name, value, vlen, w->now, &lc) == CS_OK &&
	    lc.expires_at > w->now)
		s->expires_at = lc.expires_at;
	login_cookie_clear(&lc);
	return ++w->n < LOGIN_COOKIES_SEEN;
}

void login_cookie_stale(const struct master_key *mk, const struct config *cfg,
    const char *cookie_header, int64_t now,
    char drop[LOGIN_COOKIES_SEEN][LOGIN_COOKIE_NAME_MAX], size_t *ndrop)
{
	struct stale_walk w = { .mk = mk, .now = now, .n = 0 };
	*ndrop = 0;
	if (cookie_each(cookie_header, login_cookie_prefix(cfg), stale_each, &w) != CS_OK ||
	    w.n < LOGIN_COOKIES_MAX)
		return;
	/* The unreadable and expired first, then by expiry: an insertion sort of
	 * at most LOGIN_COOKIES_SEEN. */
	for (size_t i = 1; i < w.n; i++) {
		struct seen t = w.s[i];
		size_t j = i;
		for (; j > 0 && w.s[j - 1].expires_at > t.expires_at; j--)
			w.s[j] = w.s[j - 1];
		w.s[j] = t;
	}
	for (size_t i = 0; i + LOGIN_COOKIES_MAX - 1 < w.n; i++)
		memcpy(drop[(*ndrop)++], w.s[i].name, LOGIN_COOKIE_NAME_MAX);
}
