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
#include <openssl/evp.h>

#include "buf.h"
#include "httpc.h"
#include "jstr.h"
#include "metrics.h"
#include "mono.h"
#include "oidc.h"
#include "provider.h"

#define PROVIDER_WK_OAUTH      "/.well-known/oauth-authorization-server"
#define PROVIDER_RETRY_AFTER   5                      /* seconds between discovery attempts */
#define PROVIDER_MAX_URL       4096
#define PROVIDER_MAX_FORM      (64 * 1024)
#define PROVIDER_MAX_EXPIRES   INT64_C(315360000)     /* ten years; larger values are clamped */
#define PROVIDER_MAX_NUMSTR    18                     /* digits in a string expires_in */
#define PROVIDER_MAX_SITES     64                     /* Atlassian sites read from one answer */

/* --- presets (docs/providers.md says where each quirk is documented) ------ */

enum revoke_style { REVOKE_RFC7009 = 0, REVOKE_GITHUB, REVOKE_SLACK, REVOKE_NONE };

struct preset {
	enum revoke_style revoke_style;
	struct provider_authz authz;
	const char *ignore_scopes;    /* answered scopes that are not the API's (space-separated) */
	bool        app_permissions;  /* GitHub app: the answer's scope says nothing */
	bool        authed_user;      /* Slack: the user token sits under "authed_user" */
	int64_t     lifetime;         /* seconds when expires_in is missing; 0: the vault's default */
};

#define AUTHZ_RFC(extra_scope, extra) { "scope", ' ', extra_scope, extra }

/* The endpoints are the configuration's (config_section.c fills a preset's). */
static const struct preset presets[PRESET__MAX] = {
	[PRESET_NONE] = { .authz = AUTHZ_RFC(NULL, NULL) },
	/* OAuth app: tokens without expiry (GitHub revokes them after a year
	 * unused) and no refresh token; scopes answered comma-separated (read
	 * by parse_tokens for every provider). */
	[PRESET_GITHUB] = { REVOKE_GITHUB, AUTHZ_RFC(NULL, NULL), NULL, false, false, 31536000 },
	/* GitHub app: 8 h user tokens, single-use 6-month refresh tokens. */
	[PRESET_GITHUB_APP] = { REVOKE_GITHUB, AUTHZ_RFC(NULL, NULL), NULL, true, false, 28800 },
	[PRESET_GOOGLE] = { REVOKE_RFC7009, AUTHZ_RFC(NULL, "access_type=offline&prompt=consent"),
		NULL, false, false, 3600 },
	/* Entra: no RFC 7009 endpoint; openid profile email come back unasked. */
	[PRESET_MICROSOFT] = { REVOKE_NONE, AUTHZ_RFC("offline_access", NULL),
		"offline_access openid profile email", false, false, 3600 },
	/* Slack: without (opt-in) rotation a user token does not expire. */
	[PRESET_SLACK] = { REVOKE_SLACK, { "user_scope", ',', NULL, NULL }, NULL, false, true,
		31536000 },
	[PRESET_GITLAB] = { REVOKE_RFC7009, AUTHZ_RFC(NULL, NULL), NULL, false, false, 7200 },
	[PRESET_ATLASSIAN] = { REVOKE_NONE,
		AUTHZ_RFC("offline_access", "audience=api.atlassian.com&prompt=consent"),
		"offline_access", false, false, 3600 },
};

struct provider {
	char *issuer;                 /* NULL when configured by endpoints only */
	char *cfg_authorization;      /* explicit endpoints; NULL when not configured */
	char *cfg_token;
	char *cfg_revocation;
	char *client_id;
	char *client_secret;          /* NULL: a public client; wiped on free */
	const char *resource;         /* the configured resource's id (outlives p): a metrics label */
	enum config_preset preset;
	const struct preset *q;       /* presets[preset] */
	char *sites_url;              /* Atlassian's accessible-resources; NULL: none */

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
	free(p->sites_url);
	wipe_free(p->client_secret);
	free(p);
}

enum cs_err provider_new(const struct config_resource *r, struct provider **out)
{
	enum cs_err e = CS_EINVAL;
	struct provider *p = NULL;

	if (r == NULL || out == NULL || (unsigned)r->preset >= PRESET__MAX)
		goto out;
	if (r->provider_client_id == NULL || r->provider_client_id[0] == '\0')
		goto out;
	/* Either an issuer to discover or both endpoints a client needs (a
	 * preset's come filled in by the configuration). */
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
	    !httpc_url_allowed(r->provider_revocation_endpoint)) ||
	    (r->provider_sites_endpoint != NULL && !httpc_url_allowed(r->provider_sites_endpoint)))
		goto out;
	e = CS_ENOMEM;
	if ((p = calloc(1, sizeof *p)) == NULL)
		goto out;
	if (!dup_opt(r->provider_issuer, &p->issuer) ||
	    !dup_opt(r->provider_authorization_endpoint, &p->cfg_authorization) ||
	    !dup_opt(r->provider_token_endpoint, &p->cfg_token) ||
	    !dup_opt(r->provider_revocation_endpoint, &p->cfg_revocation) ||
	    !dup_opt(r->provider_client_id, &p->client_id) ||
	    !dup_opt(r->provider_client_secret, &p->client_secret) ||
	    !dup_opt(r->provider_sites_endpoint, &p->sites_url))
		goto out;
	p->resource = r->id;
	p->preset = r->preset;
	p->q = &presets[r->preset];
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
	return oidc_doc_url(doc, name, required, out);
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
			if ((e = oidc_discovery_url(p->issuer, &url)) != CS_OK)
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

/* scope without the words of drop (both space-separated), in place. */
static void scope_drop(char *scope, const char *drop)
{
	char *w = scope;
	for (char *r = scope; *r != '\0';) {
		size_t n = strcspn(r, " ");
		bool skip = n == 0;
		for (const char *d = drop; !skip && *d != '\0';) {
			size_t m = strcspn(d, " ");
			skip = m == n && memcmp(d, r, n) == 0;
			d += m + (d[m] == ' ');
		}
		if (!skip) {
			if (w != scope)
				*w++ = ' ';
			memmove(w, r, n);
			w += n;
		}
		r += n + (r[n] == ' ');
	}
	*w = '\0';
}

/* Reads a successful token response (RFC 6749 §5.1) into *out, as a
 * provider of preset q answers it. */
static enum cs_err parse_tokens(const struct preset *q, json_t *doc, struct provider_tokens *out)
{
	enum cs_err e;
	struct provider_tokens t;
	json_t *user = json_object_get(doc, "authed_user");

	memset(&t, 0, sizeof t);
	/* Slack: a user token comes under "authed_user" (the top level holds a
	 * bot token when the app asked for bot scopes too; consentd never
	 * uses it). */
	if (q->authed_user && json_is_object(user) && json_object_get(user, "access_token") != NULL)
		doc = user;
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
		for (char *c = t.scope; *c; c++)
			if (*c == ',')
				*c = ' ';
	if (q->authed_user && strcmp(t.token_type, "user") == 0) {
		/* Slack's user tokens are bearer tokens by another name. */
		free(t.token_type);
		if ((t.token_type = strdup("Bearer")) == NULL) {
			e = CS_ENOMEM;
			goto out;
		}
	}
	if (t.scope != NULL && q->ignore_scopes != NULL)
		scope_drop(t.scope, q->ignore_scopes);
	if (q->app_permissions) {
		/* A GitHub app's token carries the app's permissions; its "scope"
		 * (empty) says nothing about them: read as "as asked". */
		free(t.scope);
		t.scope = NULL;
	}
	if (t.expires_in == 0)
		t.expires_in = q->lifetime;
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
		"invalid_refresh_token",          /* Slack's */
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

static enum cs_err token_answer(const struct preset *q, enum provider_token_kind kind,
    long status, const char *body, struct provider_tokens *out)
{
	enum cs_err e;
	json_t *doc = json_loads(body != NULL ? body : "", JSON_REJECT_DUPLICATES, NULL);
	const char *err = json_is_object(doc) ? jstr(json_object_get(doc, "error")) : NULL;

	if (status == 200 && err != NULL && json_object_get(doc, "access_token") == NULL) {
		/* Some providers (GitHub) answer errors with 200: read them as 400. */
		status = 400;
	}
	if (status == 200) {
		e = json_is_object(doc) ? parse_tokens(q, doc, out) : CS_EINVAL;
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

enum cs_err provider_token_answer(enum provider_token_kind kind, long status, const char *body,
    struct provider_tokens *out)
{
	return token_answer(&presets[PRESET_NONE], kind, status, body, out);
}

enum cs_err provider_token_answer_preset(enum config_preset preset, enum provider_token_kind kind,
    long status, const char *body, struct provider_tokens *out)
{
	if ((unsigned)preset >= PRESET__MAX)
		return CS_EINVAL;
	return token_answer(&presets[preset], kind, status, body, out);
}

void provider_authz(const struct provider *p, struct provider_authz *out)
{
	*out = p != NULL ? p->q->authz : presets[PRESET_NONE].authz;
}

enum config_preset provider_preset(const struct provider *p)
{
	return p != NULL ? p->preset : PRESET_NONE;
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
	e = token_answer(p->q, kind, res.status, res.body.data, out);
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

/* "Authorization: Basic base64(id:secret)" as GitHub's REST API takes it
 * (the raw pair, not RFC 6749's form-encoded one).  The caller wipes *out. */
static enum cs_err basic_line(const char *id, const char *secret, char **out)
{
	enum cs_err e = CS_ENOMEM;
	size_t n = strlen(id) + 1 + strlen(secret), cap;
	char *raw = NULL, *line = NULL;
	static const char pre[] = "Authorization: Basic ";
	if (n > PROVIDER_MAX_URL)
		return CS_ETOOBIG;
	cap = sizeof pre + 4 * ((n + 2) / 3) + 1;
	if ((raw = malloc(n + 1)) == NULL || (line = malloc(cap)) == NULL)
		goto out;
	memcpy(raw, id, strlen(id));
	raw[strlen(id)] = ':';
	memcpy(raw + strlen(id) + 1, secret, strlen(secret) + 1);
	memcpy(line, pre, sizeof pre);
	EVP_EncodeBlock((unsigned char *)line + sizeof pre - 1, (const unsigned char *)raw, (int)n);
	*out = line;
	line = NULL;
	e = CS_OK;
out:
	wipe_free(raw);
	free(line);
	return e;
}

/* A revocation in the provider's own way (GitHub's DELETE, Slack's
 * auth.revoke): url, method and headers sent, the token in body or header.
 * *status is the answer's, *ok whether the answer means the token is dead. */
static enum cs_err revoke_call(const struct provider *p, const char *url, const char *token,
    bool *dead)
{
	enum cs_err e = CS_ENOMEM;
	struct httpc_reply res;
	char *auth = NULL, *body = NULL;
	json_t *doc = NULL;
	const char *hdrs[4] = { NULL, NULL, NULL, NULL };

	httpc_reply_init(&res);
	*dead = false;
	if (p->q->revoke_style == REVOKE_GITHUB) {
		/* DELETE /applications/{client_id}/token, the token in a JSON body,
		 * the client's credentials as Basic. */
		if (p->client_secret == NULL)
			return CS_ENOENT;             /* GitHub asks for the secret */
		if ((e = basic_line(p->client_id, p->client_secret, &auth)) != CS_OK)
			goto out;
		if ((doc = json_pack("{s:s}", "access_token", token)) == NULL ||
		    (body = json_dumps(doc, JSON_COMPACT)) == NULL) {
			e = CS_ENOMEM;
			goto out;
		}
		hdrs[0] = "Accept: application/vnd.github+json";
		hdrs[1] = "Content-Type: application/json";
		hdrs[2] = auth;
		e = httpc_request(&(struct httpc_request){ .method = "DELETE", .url = url,
		    .headers = hdrs, .body = body, .body_len = strlen(body) }, &res);
		/* 204 revoked; 404: GitHub does not know the token (revoked already). */
		*dead = e == CS_OK && (res.status == 204 || res.status == 200 || res.status == 404);
	} else {
		/* Slack's auth.revoke: the token revokes itself. */
		struct buf b;
		buf_init(&b, PROVIDER_MAX_FORM);
		e = buf_printf(&b, "Authorization: Bearer %s", token);
		auth = e == CS_OK ? buf_steal(&b) : NULL;
		buf_wipe_clear(&b);
		if (e != CS_OK || auth == NULL) {
			e = e != CS_OK ? e : CS_ENOMEM;
			goto out;
		}
		hdrs[0] = "Accept: application/json";
		hdrs[1] = "Content-Type: application/x-www-form-urlencoded";
		hdrs[2] = auth;
		e = httpc_request(&(struct httpc_request){ .method = "POST", .url = url,
		    .headers = hdrs, .body = "", .body_len = 0 }, &res);
		if (e == CS_OK && res.status == 200) {
			json_t *a = json_loads(res.body.data != NULL ? res.body.data : "", 0, NULL);
			const char *err = jstr(json_object_get(a, "error"));
			*dead = json_is_true(json_object_get(a, "ok")) || (err != NULL &&
			    (strcmp(err, "token_revoked") == 0 || strcmp(err, "invalid_auth") == 0));
			json_decref(a);
		}
	}
	if (e != CS_OK && e != CS_ENOMEM)
		e = CS_EIO;
out:
	httpc_reply_clear(&res);
	if (body != NULL)
		OPENSSL_cleanse(body, strlen(body));
	free(body);
	json_wipe_strings(doc);
	json_decref(doc);
	wipe_free(auth);
	return e;
}

static enum cs_err revoke_once(struct provider *p, const char *token, const char *hint)
{
	enum cs_err e;
	const struct provider_meta *m = NULL;
	struct httpc_response res;

	if (p == NULL || token == NULL || token[0] == '\0' ||
	    (hint != NULL && strcmp(hint, "refresh_token") != 0 && strcmp(hint, "access_token") != 0))
		return CS_EINVAL;
	if (p->q->revoke_style == REVOKE_NONE && p->cfg_revocation == NULL)
		return CS_ENOENT;
	if ((e = provider_meta(p, &m)) != CS_OK)
		return e == CS_ENOMEM ? e : CS_EIO;
	if (m->revocation_endpoint == NULL)
		return CS_ENOENT;
	if (p->q->revoke_style == REVOKE_GITHUB || p->q->revoke_style == REVOKE_SLACK) {
		bool dead = false;
		/* Both take an access token only: a refresh token cannot be named. */
		if (hint != NULL && strcmp(hint, "refresh_token") == 0)
			return CS_ENOENT;
		if ((e = revoke_call(p, m->revocation_endpoint, token, &dead)) != CS_OK)
			return e;
		return dead ? CS_OK : CS_EIO;
	}
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

/* --- Atlassian's sites -------------------------------------------------- */

static bool site_id_ok(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > 64)
		return false;
	for (const char *c = id; *c; c++)
		if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
		    (*c >= '0' && *c <= '9') || *c == '-'))
			return false;
	return true;
}

enum cs_err provider_sites_parse(const char *body, char **ids)
{
	enum cs_err e = CS_EINVAL;
	struct buf b;
	json_t *doc;
	size_t i;
	json_t *v;

	if (body == NULL || ids == NULL)
		return CS_EINVAL;
	buf_init(&b, PROVIDER_MAX_SITES * 66);
	doc = json_loads(body, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_array(doc) || json_array_size(doc) > PROVIDER_MAX_SITES)
		goto out;
	json_array_foreach(doc, i, v) {
		const char *id = json_is_object(v) ? jstr(json_object_get(v, "id")) : NULL;
		/* SECURITY: a cloud id goes into API paths: only [A-Za-z0-9-]. */
		if (id == NULL || !site_id_ok(id))
			goto out;
		if ((e = buf_printf(&b, "%s%s", i > 0 ? "," : "", id)) != CS_OK)
			goto out;
		e = CS_EINVAL;
	}
	if (json_array_size(doc) == 0) {
		e = CS_ENOENT;
		goto out;
	}
	e = (*ids = buf_steal(&b)) != NULL ? CS_OK : CS_ENOMEM;
out:
	json_decref(doc);
	buf_clear(&b);
	return e;
}

enum cs_err provider_sites(struct provider *p, const char *access_token, char **ids)
{
	enum cs_err e;
	struct httpc_reply res;
	struct buf b;
	char *auth = NULL;
	const char *hdrs[] = { "Accept: application/json", NULL, NULL };

	if (p == NULL || access_token == NULL || ids == NULL)
		return CS_EINVAL;
	if (p->sites_url == NULL)
		return CS_ENOENT;
	httpc_reply_init(&res);
	buf_init(&b, PROVIDER_MAX_FORM);
	if ((e = buf_printf(&b, "Authorization: Bearer %s", access_token)) != CS_OK ||
	    (auth = buf_steal(&b)) == NULL) {
		e = e != CS_OK ? e : CS_ENOMEM;
		goto out;
	}
	hdrs[1] = auth;
	e = httpc_request(&(struct httpc_request){ .method = "GET", .url = p->sites_url,
	    .headers = hdrs }, &res);
	if (e == CS_OK)
		e = res.status == 200 ? provider_sites_parse(res.body.data, ids) : CS_EIO;
	else if (e != CS_ENOMEM)
		e = CS_EIO;
	if (e == CS_EINVAL)
		e = CS_EIO;                       /* an answer we cannot read: as unreachable */
out:
	httpc_reply_clear(&res);
	buf_wipe_clear(&b);
	wipe_free(auth);
	return counted(p, e);
}
