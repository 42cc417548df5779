/* session.c -- browser sessions, their cookies, and CSRF tokens.
 * Only hashes of session ids reach the database; ids and CSRF tokens are
 * compared in constant time and never logged. */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "b64.h"
#include "buf.h"
#include "seal.h"
#include "session.h"
#include "store_session.h"

const char *session_cookie_name(const struct config *cfg)
{
	return cfg->public_url_is_https ? "__Host-consentd" : "consentd_session";
}

static int is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/* CS_EINVAL for a Cookie header no cookie is read from: oversized, or with a
 * control character other than a tab. */
static enum cs_err cookie_header_check(const char *header)
{
	if (strlen(header) > COOKIE_MAX_HEADER)
		return CS_EINVAL;
	for (const char *p = header; *p; p++)
		if ((unsigned char)*p < 0x20 && *p != '\t')
			return CS_EINVAL;
	return CS_OK;
}

/* The next name=value pair of a Cookie header from *pp on, advancing *pp past
 * it: the name without surrounding whitespace, the value without it and
 * without one pair of double quotes.  A bare word (no '=') names no cookie and
 * is skipped.  false at the end of the header. */
static bool cookie_next(const char **pp, const char **name, size_t *nlen, const char **val,
    size_t *vlen)
{
	const char *p = *pp;
	for (;;) {
		while (is_ows(*p) || *p == ';')
			p++;
		if (*p == '\0') {
			*pp = p;
			return false;
		}
		const char *start = p;
		while (*p && *p != ';')
			p++;
		const char *end = p;
		while (end > start && is_ows(end[-1]))
			end--;
		const char *eq = memchr(start, '=', (size_t)(end - start));
		if (eq == NULL)
			continue;
		const char *ne = eq;
		while (ne > start && is_ows(ne[-1]))
			ne--;
		const char *v = eq + 1;
		while (v < end && is_ows(*v))
			v++;
		size_t n = (size_t)(end - v);
		if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
			v++;
			n -= 2;
		}
		*name = start;
		*nlen = (size_t)(ne - start);
		*val = v;
		*vlen = n;
		*pp = p;
		return true;
	}
}

enum cs_err cookie_get(const char *header, const char *name, char **value)
{
	size_t nlen = strlen(name), found_len = 0, n, vl;
	const char *found = NULL, *p = header, *nm, *v;
	enum cs_err e;
	if (header == NULL)
		return CS_ENOENT;
	if ((e = cookie_header_check(header)) != CS_OK)
		return e;
	while (cookie_next(&p, &nm, &n, &v, &vl)) {
		if (n != nlen || memcmp(nm, name, nlen) != 0)
			continue;
		if (found != NULL)
			return CS_EINVAL;                 /* SECURITY: two copies -> trust neither */
		found = v;
		found_len = vl;
	}
	if (found == NULL)
		return CS_ENOENT;
	*value = strndup(found, found_len);
	return *value ? CS_OK : CS_ENOMEM;
}

enum cs_err cookie_each(const char *header, const char *prefix,
    bool (*each)(const char *name, size_t nlen, const char *value, size_t vlen, void *arg),
    void *arg)
{
	size_t plen = strlen(prefix), n, vl;
	const char *p = header, *nm, *v;
	enum cs_err e;
	if (header == NULL)
		return CS_ENOENT;
	if ((e = cookie_header_check(header)) != CS_OK)
		return e;
	while (cookie_next(&p, &nm, &n, &v, &vl))
		if (n >= plen && memcmp(nm, prefix, plen) == 0 && !each(nm, n, v, vl, arg))
			break;
	return CS_OK;
}

enum cs_err cookie_format(const struct config *cfg, const char *name, const char *value,
    int64_t max_age, char **out)
{
	struct buf b;
	enum cs_err e;
	/* The longest is a login cookie: a 34-byte name, a 900-byte value. */
	buf_init(&b, 2048);
	e = buf_printf(&b, "%s=%s; Path=/; HttpOnly; SameSite=Lax%s", name, value,
	    cfg->public_url_is_https ? "; Secure" : "");
	if (e == CS_OK && max_age >= 0)
		e = buf_printf(&b, "; Max-Age=%lld", (long long)max_age);
	if (e != CS_OK) {
		buf_wipe_clear(&b);
		return e;
	}
	*out = buf_steal(&b);
	return *out ? CS_OK : CS_ENOMEM;
}

enum cs_err random_token(char out[SESSION_TOKEN_LEN + 1])
{
	unsigned char r[32];
	enum cs_err e;
	if (RAND_bytes(r, sizeof r) != 1)
		return CS_ECRYPTO;
	/* 32 bytes -> 43 base64url characters (the last carries 4 bits). */
	e = b64url_encode(r, sizeof r, out, SESSION_TOKEN_LEN + 1);
	OPENSSL_cleanse(r, sizeof r);
	return e;
}

void session_clear(struct session *s)
{
	if (s == NULL)
		return;
	free(s->strings);
	OPENSSL_cleanse(s, sizeof *s);
}

enum cs_err session_create(struct store_conn *c, int64_t user_id, int64_t auth_time,
    bool admin_claim, int64_t now, char id_out[SESSION_TOKEN_LEN + 1])
{
	char id[SESSION_TOKEN_LEN + 1], csrf[SESSION_TOKEN_LEN + 1];
	unsigned char h[32];
	enum cs_err e;
	if ((e = random_token(id)) != CS_OK || (e = random_token(csrf)) != CS_OK)
		goto out;
	sha256_str(id, h);
	e = store_session_insert(c, h, &(struct store_session_new){ .user_id = user_id,
	    .csrf = csrf, .now = now, .auth_time = auth_time, .admin_claim = admin_claim });
	if (e == CS_OK)
		memcpy(id_out, id, sizeof id);
out:
	OPENSSL_cleanse(id, sizeof id);
	OPENSSL_cleanse(csrf, sizeof csrf);
	return e;
}

static int token_shape_ok(const char *v)
{
	if (strlen(v) != SESSION_TOKEN_LEN)
		return 0;
	for (const char *p = v; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'))
			return 0;
	return 1;
}

enum cs_err session_from_cookie(struct store_conn *c, const struct config *cfg,
    const char *cookie_header, int64_t now, struct session *out)
{
	char *id = NULL;
	struct store_session ss;
	enum cs_err e;
	unsigned char h[32];
	memset(&ss, 0, sizeof ss);
	e = cookie_get(cookie_header, session_cookie_name(cfg), &id);
	if (e != CS_OK) {
		e = CS_ENOENT;
		goto out;
	}
	if (!token_shape_ok(id)) {
		e = CS_ENOENT;
		goto out;
	}
	sha256_str(id, h);
	if ((e = store_session_get(c, h, &ss)) != CS_OK)
		goto out;
	/* SECURITY: both limits hold -- idle since last use, absolute since login. */
	if (now - ss.last_seen_at > cfg->session_idle_timeout ||
	    now - ss.created_at > cfg->session_absolute_timeout) {
		if (store_session_delete(c, h) != CS_OK)
			e = CS_EDB;
		else
			e = CS_ENOENT;
		goto out;
	}
	if (now - ss.last_seen_at >= 10 && (e = store_session_touch(c, h, now)) != CS_OK)
		goto out;
	memset(out, 0, sizeof *out);
	memcpy(out->id_hash, h, 32);
	out->user_id = ss.user_id;
	/* The row's block of strings changes owner. */
	out->strings = ss.block;
	out->issuer = ss.issuer;
	out->subject = ss.subject;
	out->name = ss.name;
	out->email = ss.email;
	ss.block = ss.issuer = ss.subject = ss.name = ss.email = NULL;
	memcpy(out->csrf, ss.csrf, sizeof out->csrf);
	out->created_at = ss.created_at;
	out->last_seen_at = now;
	out->auth_time = ss.auth_time;
	out->admin_claim = ss.admin_claim;
	e = CS_OK;
out:
	store_session_clear(&ss);
	if (id) {
		OPENSSL_cleanse(id, strlen(id));
		free(id);
	}
	return e;
}

enum cs_err session_end(struct store_conn *c, const unsigned char id_hash[32])
{
	return store_session_delete(c, id_hash);
}

bool session_csrf_ok(const struct session *s, const char *token)
{
	/* SECURITY: constant-time, and only for a token of the right length. */
	if (token == NULL || strlen(token) != SESSION_TOKEN_LEN || s->csrf[0] == '\0')
		return false;
	return CRYPTO_memcmp(s->csrf, token, SESSION_TOKEN_LEN) == 0;
}
