/* provider.c -- a downstream OAuth provider as consentd's client: metadata by
 * discovery (RFC 8414, then OpenID) or explicit endpoints, code exchange,
 * refresh and RFC 7009 revocation.  It must never log, print or keep a token,
 * code or secret beyond the call, nor talk to an endpoint httpc refuses. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "buf.h"
#include "httpc.h"
#include "metrics.h"
#include "mono.h"
#include "provider.h"

#define PROVIDER_WK_OAUTH      "/.well-known/oauth-authorization-server"
#define PROVIDER_WK_OPENID     "/.well-known/openid-configuration"
#define PROVIDER_RETRY_AFTER   5                      /* seconds between discovery attempts */
#define PROVIDER_MAX_URL       4096
#define PROVIDER_MAX_FORM      (64 * 1024)
#define PROVIDER_MAX_EXPIRES   INT64_C(315360000)     /* ten years; larger values are clamped */
#define PROVIDER_MAX_NUMSTR    18                     /* digits in a string expires_in */

struct provider {
	char *issuer;                 /* NULL when configured by endpoints only */
	char *cfg_authorization;      /* explicit endpoints; NULL when not configured */
	char *cfg_token;
	char *cfg_revocation;
	char *client_id;
	char *client_secret;          /* NULL: a public client; wiped on free */
	const char *resource;         /* the configured resource's id (outlives p): a metrics label */

	pthread_mutex_t      mu;      /* guards everything below; held during discovery */
	struct provider_meta *meta;   /* NULL until obtained; then immutable */
	bool                 attempted;
	int64_t              attempted_at;   /* monotonic seconds of the last discovery */
	enum cs_err          last_err;       /* what the last failed discovery returned */
};

/* --- small helpers ------------------------------------------------------ */

/* A copy of s, or NULL for NULL; false only when the copy failed. */
static bool dup_opt(const char *s, char **out)
{
	*out = NULL;
	if (s == NULL)
		return true;
	return (*out = strdup(s)) != NULL;
}

/* True when v is a JSON string equal to s, byte for byte (length included). */
static bool jstr_eq(const json_t *v, const char *s)
{
	if (!json_is_string(v) || s == NULL)
		return false;
	size_t n = strlen(s);
	return json_string_length(v) == n && memcmp(json_string_value(v), s, n) == 0;
}

/* The string value when v is a string without embedded NUL, else NULL. */
static const char *jstr(const json_t *v)
{
	if (!json_is_string(v))
		return NULL;
	const char *s = json_string_value(v);
	return strlen(s) == json_string_length(v) ? s : NULL;
}

/* Wipes every top-level string member of a token response before it is freed. */
static void json_wipe_strings(json_t *o)
{
	const char *k;
	json_t *v;
	if (!json_is_object(o))
		return;
	json_object_foreach(o, k, v)
		if (json_is_string(v))
			OPENSSL_cleanse((char *)json_string_value(v), json_string_length(v));
}

/* --- form bodies -------------------------------------------------------- */

struct kv {
	const char *k, *v;            /* v NULL: the pair is left out */
};

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	    c == '-' || c == '.' || c == '_' || c == '~';
}

/* Builds "k1=v1&k2=v2..." with every value percent-encoded, in one allocation
 * sized up front: the values are codes, verifiers and tokens, and a growing
 * buffer would leave copies of them in freed memory.  The caller wipes and
 * frees *out. */
static enum cs_err form_build(const struct kv *kv, size_t n, char **out)
{
	size_t need = 1, off = 0;
	char *s = NULL;
	static const char hex[] = "0123456789ABCDEF";

	for (size_t i = 0; i < n; i++) {
		if (kv[i].v == NULL)
			continue;
		size_t kl = strlen(kv[i].k), vl = strlen(kv[i].v);
		if (vl > PROVIDER_MAX_FORM || kl > 64)
			return CS_ETOOBIG;
		need += kl + 2 + 3 * vl;          /* '&' '=' and the worst-case encoding */
		if (need > PROVIDER_MAX_FORM)
			return CS_ETOOBIG;
	}
	if ((s = malloc(need)) == NULL)
		return CS_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (kv[i].v == NULL)
			continue;
		if (off > 0)
			s[off++] = '&';
		size_t kl = strlen(kv[i].k);
		memcpy(s + off, kv[i].k, kl);
		off += kl;
		s[off++] = '=';
		for (const unsigned char *p = (const unsigned char *)kv[i].v; *p; p++) {
			if (unreserved(*p)) {
				s[off++] = (char)*p;
			} else {
				s[off++] = '%';
				s[off++] = hex[*p >> 4];
				s[off++] = hex[*p & 15];
			}
		}
	}
	s[off] = '\0';
	*out = s;
	return CS_OK;
}

/* --- the provider ------------------------------------------------------- */

/* An issuer for RFC 8414: an allowed URL without query or fragment. */
static bool issuer_ok(const char *iss)
{
	return httpc_url_allowed(iss) && strchr(iss, '?') == NULL && strchr(iss, '#') == NULL;
}

/* Frees p and what it copied from the config; NULL-safe.  SECURITY: the
 * client secret does not outlive the provider. */
static void copies_free(struct provider *p)
{
	if (p == NULL)
		return;
	free(p->issuer);
	free(p->cfg_authorization);
	free(p->cfg_token);
	free(p->cfg_revocation);
	free(p->client_id);
	wipe_free(p->client_secret);
	free(p);
}

enum cs_err provider_new(const struct config_resource *r, struct provider **out)
{
	enum cs_err e = CS_EINVAL;
	struct provider *p = NULL;

	if (r == NULL || out == NULL)
		goto out;
	if (r->provider_client_id == NULL || r->provider_client_id[0] == '\0')
		goto out;
	/* Either an issuer to discover or both endpoints a client needs. */
	if (r->provider_issuer == NULL &&
	    (r->provider_authorization_endpoint == NULL || r->provider_token_endpoint == NULL))
		goto out;
	/* SECURITY: configured URLs obey the same outbound policy as discovered ones. */
	if (r->provider_issuer != NULL && !issuer_ok(r->provider_issuer))
		goto out;
	if ((r->provider_authorization_endpoint != NULL &&
	    !httpc_url_allowed(r->provider_authorization_endpoint)) ||
	    (r->provider_token_endpoint != NULL && !httpc_url_allowed(r->provider_token_endpoint)) ||
	    (r->provider_revocation_endpoint != NULL &&
	    !httpc_url_allowed(r->provider_revocation_endpoint)))
		goto out;
	e = CS_ENOMEM;
	if ((p = calloc(1, sizeof *p)) == NULL)
		goto out;
	if (!dup_opt(r->provider_issuer, &p->issuer) ||
	    !dup_opt(r->provider_authorization_endpoint, &p->cfg_authorization) ||
	    !dup_opt(r->provider_token_endpoint, &p->cfg_token) ||
	    !dup_opt(r->provider_revocation_endpoint, &p->cfg_revocation) ||
	    !dup_opt(r->provider_client_id, &p->client_id) ||
	    !dup_opt(r->provider_client_secret, &p->client_secret))
		goto out;
	p->resource = r->id;
	pthread_mutex_init(&p->mu, NULL);
	*out = p;
	p = NULL;
	e = CS_OK;
out:
	copies_free(p);                       /* the mutex was not initialised yet */
	return e;
}

static void meta_free(struct provider_meta *m)
{
	if (m == NULL)
		return;
	free(m->issuer);
	free(m->authorization_endpoint);
	free(m->token_endpoint);
	free(m->revocation_endpoint);
	free(m);
}

void provider_free(struct provider *p)
{
	if (p == NULL)
		return;
	meta_free(p->meta);
	pthread_mutex_destroy(&p->mu);
	copies_free(p);
}

void provider_tokens_clear(struct provider_tokens *t)
{
	if (t == NULL)
		return;
	/* SECURITY: every token is wiped before its memory is returned. */
	wipe_free(t->access_token);
	wipe_free(t->refresh_token);
	free(t->token_type);
	free(t->scope);
	memset(t, 0, sizeof *t);
}

/* --- discovery ---------------------------------------------------------- */

/* The RFC 8414 §3.1 URL: the well-known path inserted between the issuer's
 * host and its path, after dropping a terminating '/'. */
static enum cs_err url_oauth(const char *iss, struct buf *url)
{
	enum cs_err e;
	const char *sep = strstr(iss, "://");
	if (sep == NULL)
		return CS_EINVAL;
	const char *path = sep + 3 + strcspn(sep + 3, "/");
	size_t plen = strlen(path);
	if (plen > 0 && path[plen - 1] == '/')
		plen--;
	if ((e = buf_append(url, iss, (size_t)(path - iss))) != CS_OK ||
	    (e = buf_puts(url, PROVIDER_WK_OAUTH)) != CS_OK ||
	    (e = buf_append(url, path, plen)) != CS_OK)
		return e;
	return CS_OK;
}

/* The OpenID Discovery §4 URL: the issuer without a terminating '/' + the path. */
static enum cs_err url_openid(const char *iss, struct buf *url)
{
	enum cs_err e;
	size_t n = strlen(iss);
	if (n > 0 && iss[n - 1] == '/')
		n--;
	if ((e = buf_append(url, iss, n)) != CS_OK || (e = buf_puts(url, PROVIDER_WK_OPENID)) != CS_OK)
		return e;
	return CS_OK;
}

/* Fetches one metadata document.  CS_ENOENT when the provider does not serve
 * a JSON object there (any status but 200, or a body that is not an object),
 * so that the caller may try the other well-known path. */
static enum cs_err fetch_doc(const char *url, json_t **out)
{
	enum cs_err e;
	struct httpc_response res;
	json_t *doc = NULL;

	if ((e = httpc_get(url, &res)) != CS_OK)
		return e == CS_ENOMEM ? e : CS_EIO;
	e = CS_ENOENT;
	if (res.status != 200)
		goto out;
	doc = json_loads(res.body.data, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(doc))
		goto out;
	*out = doc;
	doc = NULL;
	e = CS_OK;
out:
	json_decref(doc);
	httpc_response_clear(&res);
	return e;
}

/* Member name of doc as an endpoint: absent is fine unless required; when
 * present it must be a string that httpc allows.  *out is a copy or NULL. */
static enum cs_err doc_url(json_t *doc, const char *name, bool required, char **out)
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

/* An endpoint of the metadata: the configured one when there is one (it
 * overrides discovery, and then the document's value is not even read), else
 * the document's. */
static enum cs_err pick_url(json_t *doc, const char *name, bool required, const char *cfg,
    char **out)
{
	if (cfg != NULL) {
		*out = NULL;
		return (*out = strdup(cfg)) != NULL ? CS_OK : CS_ENOMEM;
	}
	if (doc == NULL) {
		*out = NULL;
		return required ? CS_EINVAL : CS_OK;
	}
	return doc_url(doc, name, required, out);
}

/* The metadata from the configuration and doc (the discovered document, or
 * NULL when both endpoints are configured). */
static enum cs_err meta_build(const struct provider *p, json_t *doc, struct provider_meta **out)
{
	enum cs_err e;
	struct provider_meta *m = NULL;

	if (doc != NULL) {
		/* SECURITY: the document must name exactly the issuer we were
		 * configured with (RFC 8414 §3.3, OpenID Discovery §4.3): no
		 * trailing-slash or case games, no mix-up with another provider. */
		e = CS_EINVAL;
		if (p->issuer == NULL || !jstr_eq(json_object_get(doc, "issuer"), p->issuer))
			goto out;
	}
	e = CS_ENOMEM;
	if ((m = calloc(1, sizeof *m)) == NULL || !dup_opt(p->issuer, &m->issuer))
		goto out;
	if ((e = pick_url(doc, "authorization_endpoint", true, p->cfg_authorization,
	    &m->authorization_endpoint)) != CS_OK ||
	    (e = pick_url(doc, "token_endpoint", true, p->cfg_token, &m->token_endpoint)) != CS_OK ||
	    (e = pick_url(doc, "revocation_endpoint", false, p->cfg_revocation,
	    &m->revocation_endpoint)) != CS_OK)
		goto out;
	/* RFC 9207 support can only be learned from the provider itself. */
	m->iss_parameter_supported = doc != NULL &&
	    json_is_true(json_object_get(doc, "authorization_response_iss_parameter_supported"));
	*out = m;
	m = NULL;
	e = CS_OK;
out:
	meta_free(m);
	return e;
}

enum cs_err provider_meta_parse(const struct provider *p, const char *body,
    struct provider_meta **out)
{
	enum cs_err e;
	json_t *doc;

	if (p == NULL || body == NULL || out == NULL)
		return CS_EINVAL;
	doc = json_loads(body, JSON_REJECT_DUPLICATES, NULL);
	e = json_is_object(doc) ? meta_build(p, doc, out) : CS_ENOENT;
	json_decref(doc);
	return e;
}

void provider_meta_free(struct provider_meta *m)
{
	meta_free(m);
}

/* Builds the metadata, discovering when the configuration does not name both
 * endpoints.  The caller holds p->mu. */
static enum cs_err meta_obtain(struct provider *p, struct provider_meta **out)
{
	enum cs_err e = CS_ENOMEM;
	struct buf url;
	json_t *doc = NULL;
	bool discover = p->cfg_authorization == NULL || p->cfg_token == NULL;

	buf_init(&url, PROVIDER_MAX_URL);
	if (discover) {
		if (p->issuer == NULL) {          /* provider_new refuses this; defensive */
			e = CS_EINVAL;
			goto out;
		}
		if ((e = url_oauth(p->issuer, &url)) != CS_OK)
			goto out;
		e = fetch_doc(url.data, &doc);
		if (e == CS_ENOENT) {
			buf_reset(&url);
			if ((e = url_openid(p->issuer, &url)) != CS_OK)
				goto out;
			e = fetch_doc(url.data, &doc);
		}
		if (e == CS_ENOENT)
			e = CS_EIO;                   /* neither path serves metadata */
		if (e != CS_OK)
			goto out;
	}
	e = meta_build(p, doc, out);
out:
	json_decref(doc);
	buf_clear(&url);
	return e;
}

enum cs_err provider_meta(struct provider *p, const struct provider_meta **out)
{
	enum cs_err e;
	int64_t now;

	if (p == NULL || out == NULL)
		return CS_EINVAL;
	/* One mutex for the whole attempt: concurrent first callers wait for one
	 * discovery instead of each starting their own.  Once the metadata is
	 * set it never changes, so later callers only take the lock briefly. */
	pthread_mutex_lock(&p->mu);
	if (p->meta != NULL) {
		*out = p->meta;
		e = CS_OK;
		goto out;
	}
	now = mono_now();
	/* A failure is retried, but at most once per PROVIDER_RETRY_AFTER: a dead
	 * provider must not turn every request into an outbound fetch. */
	if (p->attempted && now - p->attempted_at < PROVIDER_RETRY_AFTER) {
		e = p->last_err;
		goto out;
	}
	p->attempted = true;
	p->attempted_at = now;
	if ((e = meta_obtain(p, &p->meta)) != CS_OK) {
		p->last_err = e;
		if (e != CS_ENOMEM)
			metrics_inc(M_FETCH_ERRORS, "provider_discovery");
		goto out;
	}
	*out = p->meta;
out:
	pthread_mutex_unlock(&p->mu);
	return e;
}

void provider_backdate_discovery(struct provider *p, int64_t seconds)
{
	if (p == NULL || seconds < 0 || seconds > PROVIDER_MAX_EXPIRES)
		return;
	pthread_mutex_lock(&p->mu);
	p->attempted_at -= seconds;
	pthread_mutex_unlock(&p->mu);
}

/* --- token endpoint ----------------------------------------------------- */

/* expires_in: a non-negative integer, or (some providers) a string of digits;
 * JSON null or absent is 0.  Huge values are clamped, not trusted. */
static enum cs_err parse_expires(json_t *v, int64_t *out)
{
	int64_t n = 0;
	if (v == NULL || json_is_null(v)) {
		*out = 0;
		return CS_OK;
	}
	if (json_is_integer(v)) {
		json_int_t i = json_integer_value(v);
		if (i < 0)
			return CS_EINVAL;
		n = i > PROVIDER_MAX_EXPIRES ? PROVIDER_MAX_EXPIRES : (int64_t)i;
	} else if (json_is_string(v)) {
		const char *s = json_string_value(v);
		size_t len = json_string_length(v);
		if (len == 0 || len > PROVIDER_MAX_NUMSTR)
			return CS_EINVAL;
		for (size_t i = 0; i < len; i++) {
			if (s[i] < '0' || s[i] > '9')
				return CS_EINVAL;
			n = n * 10 + (s[i] - '0');    /* at most 18 digits: no overflow */
		}
		if (n > PROVIDER_MAX_EXPIRES)
			n = PROVIDER_MAX_EXPIRES;
	} else {
		return CS_EINVAL;
	}
	*out = n;
	return CS_OK;
}

/* An optional string member: absent or null gives NULL; anything else must be
 * a string without NUL bytes (non-empty when nonempty is set). */
static enum cs_err opt_str(json_t *doc, const char *name, bool nonempty, char **out)
{
	json_t *v = json_object_get(doc, name);
	*out = NULL;
	if (v == NULL || json_is_null(v))
		return CS_OK;
	const char *s = jstr(v);
	if (s == NULL || (nonempty && s[0] == '\0'))
		return CS_EINVAL;
	return (*out = strdup(s)) != NULL ? CS_OK : CS_ENOMEM;
}

/* Reads a successful token response (RFC 6749 §5.1) into *out. */
static enum cs_err parse_tokens(json_t *doc, struct provider_tokens *out)
{
	enum cs_err e;
	struct provider_tokens t;

	memset(&t, 0, sizeof t);
	if ((e = opt_str(doc, "access_token", true, &t.access_token)) != CS_OK ||
	    (e = opt_str(doc, "refresh_token", true, &t.refresh_token)) != CS_OK ||
	    (e = opt_str(doc, "token_type", true, &t.token_type)) != CS_OK ||
	    (e = opt_str(doc, "scope", false, &t.scope)) != CS_OK ||
	    (e = parse_expires(json_object_get(doc, "expires_in"), &t.expires_in)) != CS_OK)
		goto out;
	/* RFC 6749 §5.1: access_token and token_type are REQUIRED; a response
	 * without them is not guessed at. */
	e = CS_EINVAL;
	if (t.access_token == NULL || t.token_type == NULL)
		goto out;
	/* GitHub answers "scope": "repo,gist" (commas, no spaces).  A value with
	 * commas and no space is read that way; any other is RFC 6749's
	 * space-separated list as it is. */
	if (t.scope != NULL && strchr(t.scope, ' ') == NULL && strchr(t.scope, ',') != NULL)
		for (char *q = t.scope; *q; q++)
			if (*q == ',')
				*q = ' ';
	*out = t;
	memset(&t, 0, sizeof t);
	e = CS_OK;
out:
	provider_tokens_clear(&t);
	return e;
}

/* Error codes that mean "this grant or this client is refused", not "try
 * again".  bad_refresh_token is GitHub's name for invalid_grant. */
static bool refusal(const char *err)
{
	static const char *const codes[] = {
		"invalid_grant", "invalid_client", "unauthorized_client", "bad_refresh_token",
	};
	if (err == NULL)
		return false;
	for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
		if (strcmp(err, codes[i]) == 0)
			return true;
	return false;
}

/* POSTs the form kv (with the client's authentication added) to url.
 * *res is the answer on CS_OK; the caller clears it. */
static enum cs_err post(struct provider *p, const char *url, struct kv *kv, size_t n,
    struct httpc_response *res)
{
	enum cs_err e;
	char *body = NULL;

	/* With a secret: client_secret_basic (httpc encodes both parts, RFC 6749
	 * §2.3.1).  Without one the client is public and names itself in the body. */
	kv[n - 1].k = "client_id";
	kv[n - 1].v = p->client_secret == NULL ? p->client_id : NULL;
	if ((e = form_build(kv, n, &body)) != CS_OK)
		return e;
	e = httpc_post_form(url, body, p->client_secret != NULL ? p->client_id : NULL,
	    p->client_secret, res);
	/* SECURITY: the body held a code, verifier or token. */
	wipe_free(body);
	if (e != CS_OK && e != CS_ENOMEM)
		e = CS_EIO;                       /* unreachable, timed out, oversized */
	return e;
}

enum cs_err provider_token_answer(enum provider_token_kind kind, long status, const char *body,
    struct provider_tokens *out)
{
	enum cs_err e;
	json_t *doc = json_loads(body != NULL ? body : "", JSON_REJECT_DUPLICATES, NULL);
	const char *err = json_is_object(doc) ? jstr(json_object_get(doc, "error")) : NULL;

	if (status == 200 && err != NULL && json_object_get(doc, "access_token") == NULL) {
		/* Some providers (GitHub) answer errors with 200: read them as 400. */
		status = 400;
	}
	if (status == 200) {
		e = json_is_object(doc) ? parse_tokens(doc, out) : CS_EINVAL;
	} else if (kind == PROVIDER_TOKEN_CODE) {
		/* The code is single-use and short-lived: any 400/401 is final. */
		e = status == 400 || status == 401 ? CS_EPERM : CS_EIO;
	} else {
		/* For a refresh, only an answer that says the grant or the client is
		 * refused is final (the vault then asks for a reconnect); anything
		 * else may pass, so the refresh token is kept. */
		if (status == 401 || (status == 400 && refusal(err)))
			e = CS_EPERM;             /* 401 is invalid_client (RFC 6749 §5.2) */
		else
			e = CS_EIO;
	}
	/* SECURITY: the response held tokens: wipe jansson's copies. */
	json_wipe_strings(doc);
	json_decref(doc);
	return e;
}

/* A call that failed for want of a usable answer (CS_EIO; a refusal is not
 * an error) in consentd_provider_errors_total. */
static enum cs_err counted(const struct provider *p, enum cs_err e)
{
	if (e == CS_EIO)
		metrics_inc(M_PROVIDER_ERRORS, p->resource != NULL ? p->resource : "other");
	return e;
}

/* One call to the token endpoint and the reading of its answer. */
static enum cs_err token_call_once(struct provider *p, enum provider_token_kind kind,
    struct kv *kv, size_t n, struct provider_tokens *out)
{
	enum cs_err e;
	const struct provider_meta *m = NULL;
	struct httpc_response res;

	if ((e = provider_meta(p, &m)) != CS_OK)
		return e == CS_ENOMEM ? e : CS_EIO;
	if ((e = post(p, m->token_endpoint, kv, n, &res)) != CS_OK)
		return e;
	e = provider_token_answer(kind, res.status, res.body.data, out);
	/* SECURITY: the response held tokens: wipe the body. */
	httpc_response_clear(&res);
	return e;
}

static enum cs_err token_call(struct provider *p, enum provider_token_kind kind, struct kv *kv,
    size_t n, struct provider_tokens *out)
{
	return counted(p, token_call_once(p, kind, kv, n, out));
}

enum cs_err provider_exchange_code(struct provider *p, const char *code, const char *redirect_uri,
    const char *code_verifier, struct provider_tokens *out)
{
	if (p == NULL || code == NULL || code[0] == '\0' || redirect_uri == NULL ||
	    code_verifier == NULL || code_verifier[0] == '\0' || out == NULL)
		return CS_EINVAL;
	struct kv kv[] = {
		{ "grant_type", "authorization_code" },
		{ "code", code },
		{ "redirect_uri", redirect_uri },
		{ "code_verifier", code_verifier },
		{ NULL, NULL },                   /* client_id, for a public client */
	};
	return token_call(p, PROVIDER_TOKEN_CODE, kv, sizeof kv / sizeof kv[0], out);
}

enum cs_err provider_refresh(struct provider *p, const char *refresh_token,
    struct provider_tokens *out)
{
	if (p == NULL || refresh_token == NULL || refresh_token[0] == '\0' || out == NULL)
		return CS_EINVAL;
	struct kv kv[] = {
		{ "grant_type", "refresh_token" },
		{ "refresh_token", refresh_token },
		{ NULL, NULL },                   /* client_id, for a public client */
	};
	return token_call(p, PROVIDER_TOKEN_REFRESH, kv, sizeof kv / sizeof kv[0], out);
}

/* --- revocation --------------------------------------------------------- */

static enum cs_err revoke_once(struct provider *p, const char *token, const char *hint)
{
	enum cs_err e;
	const struct provider_meta *m = NULL;
	struct httpc_response res;

	if (p == NULL || token == NULL || token[0] == '\0' ||
	    (hint != NULL && strcmp(hint, "refresh_token") != 0 && strcmp(hint, "access_token") != 0))
		return CS_EINVAL;
	if ((e = provider_meta(p, &m)) != CS_OK)
		return e == CS_ENOMEM ? e : CS_EIO;
	if (m->revocation_endpoint == NULL)
		return CS_ENOENT;
	struct kv kv[] = {
		{ "token", token },
		{ "token_type_hint", hint },
		{ NULL, NULL },                   /* client_id, for a public client */
	};
	if ((e = post(p, m->revocation_endpoint, kv, sizeof kv / sizeof kv[0], &res)) != CS_OK)
		return e;
	/* RFC 7009 §2.2: 200 whether or not the token was valid; 503 and every
	 * other answer mean it may still be live, so the caller retries. */
	e = res.status == 200 ? CS_OK : CS_EIO;
	httpc_response_clear(&res);
	return e;
}

enum cs_err provider_revoke(struct provider *p, const char *token, const char *hint)
{
	enum cs_err e = revoke_once(p, token, hint);
	return p != NULL ? counted(p, e) : e;
}
