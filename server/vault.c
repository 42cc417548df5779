/* vault.c -- the token vault (ARCHITECTURE.md flow D): provider tokens sealed
 * per consent, the connect flow (PKCE, state, iss), release with single-flight
 * refresh, and the revocation outbox.  It must never hand out a refresh token,
 * write a token to a log or the audit log, or wait for a provider inside a
 * database transaction. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "approval.h"
#include "audit.h"
#include "buf.h"
#include "form.h"
#include "scope.h"
#include "session.h"
#include "store_consent.h"
#include "store_vault.h"
#include "vault.h"
#include "log.h"

#define VAULT_PURPOSE "vault"           /* seal.h purpose: its own derived key */
#define RECORD_ID_LEN 22                /* base64url of 16 random bytes */
#define DEFAULT_EXPIRES_IN 3600         /* when the provider does not say */
#define URL_MAX 8192                    /* the authorize URL */
#define OUTBOX_BATCH 100                /* entries per pass */
#define BACKOFF_BASE 5                  /* seconds, doubled per attempt */
#define BACKOFF_MAX 3600
#define DETAIL_MAX 1024

struct vault_slot {                     /* one resource with a provider */
	const char      *resource;          /* the config's string */
	struct provider *p;
};

/* A refresh under way for one record: later callers wait for it and reuse
 * its result instead of refreshing again (single flight per record). */
struct inflight {
	char            *record_id;
	int              refs;              /* the leader and its waiters */
	int              done;
	enum cs_err      result;
	struct inflight *next;
};

struct vault {
	const struct master_key *mk;        /* the caller's; outlives the vault */
	struct vault_slot *slots;
	size_t             nslots;
	pthread_mutex_t    mu;              /* guards inflight */
	pthread_cond_t     cv;
	struct inflight   *inflight;
};

/* --- small helpers ------------------------------------------------------ */

static void wipe_free(char *s)
{
	if (s == NULL)
		return;
	OPENSSL_cleanse(s, strlen(s));
	free(s);
}

static void blob_free(unsigned char *p, size_t n)
{
	if (p == NULL)
		return;
	OPENSSL_cleanse(p, n);
	free(p);
}

static void b64url(const unsigned char *p, size_t n, char *out, size_t cap)
{
	static const char t[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0;
	for (size_t i = 0; i < n && o + 4 < cap; i += 3) {
		unsigned v = (unsigned)p[i] << 16;
		if (i + 1 < n)
			v |= (unsigned)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		out[o++] = t[(v >> 18) & 63];
		out[o++] = t[(v >> 12) & 63];
		if (i + 1 < n)
			out[o++] = t[(v >> 6) & 63];
		if (i + 2 < n)
			out[o++] = t[v & 63];
	}
	out[o] = '\0';
}

/* A fresh record id: 22 base64url characters, never containing "eyJ" (the
 * audit log refuses what looks like a JWT). */
static enum cs_err record_id_new(char out[RECORD_ID_LEN + 1])
{
	unsigned char r[16];
	char tmp[32];
	for (int tries = 0; tries < 16; tries++) {
		if (RAND_bytes(r, sizeof r) != 1)
			return CS_ECRYPTO;
		b64url(r, sizeof r, tmp, sizeof tmp);
		if (strlen(tmp) == RECORD_ID_LEN && strstr(tmp, "eyJ") == NULL) {
			memcpy(out, tmp, RECORD_ID_LEN + 1);
			return CS_OK;
		}
	}
	return CS_ECRYPTO;
}

/* A stored or received scope list as a set; "" is the empty set. */
static enum cs_err set_parse(const char *s, struct scope_set *out)
{
	return scope_set_parse(s != NULL ? s : "", out);
}

static bool set_equal(const struct scope_set *a, const struct scope_set *b)
{
	return scope_set_subset(a, b) && scope_set_subset(b, a);
}

static bool is_bearer(const char *t)
{
	return t != NULL && strcasecmp(t, "Bearer") == 0;
}

/* --- sealing ------------------------------------------------------------ */

/* The additional data binding a ciphertext to its row: "v1" NUL record id NUL
 * consent id NUL subject NUL resource.  None of the parts can hold a NUL, so
 * the encoding is unambiguous. */
static enum cs_err aad_make(const char *record_id, const char *consent_id, const char *subject,
    const char *resource, unsigned char **out, size_t *len)
{
	const char *parts[] = { "v1", record_id, consent_id, subject, resource };
	size_t n = 0, o = 0;
	unsigned char *p;
	for (size_t i = 0; i < 5; i++) {
		if (parts[i] == NULL)
			return CS_EINVAL;
		n += strlen(parts[i]) + 1;
	}
	n--;                              /* no NUL after the last part */
	if ((p = malloc(n)) == NULL)
		return CS_ENOMEM;
	for (size_t i = 0; i < 5; i++) {
		size_t k = strlen(parts[i]);
		memcpy(p + o, parts[i], k);
		o += k;
		if (i < 4)
			p[o++] = '\0';
	}
	*out = p;
	*len = n;
	return CS_OK;
}

/* SECURITY: invariant 3 -- each token is sealed with the row's identity as
 * additional data; copied anywhere else it fails to open. */
static enum cs_err seal_token(const struct master_key *mk, const unsigned char *aad,
    size_t aad_len, const char *token, unsigned char **blob, size_t *blob_len)
{
	return seal(mk, VAULT_PURPOSE, aad, aad_len, token, strlen(token), blob, blob_len);
}

/* Opens a token; *out is a NUL-terminated malloc'd plaintext the caller wipes. */
static enum cs_err open_token(const struct master_key *mk, const unsigned char *aad,
    size_t aad_len, const unsigned char *blob, size_t blob_len, char **out)
{
	unsigned char *pt = NULL;
	size_t n = 0;
	enum cs_err e = unseal(mk, VAULT_PURPOSE, aad, aad_len, blob, blob_len, &pt, &n);
	if (e != CS_OK)
		return e;
	/* A token with a NUL inside was never sealed by us. */
	if (memchr(pt, '\0', n) != NULL || n == 0) {
		blob_free(pt, n + 1);
		return CS_ECRYPTO;
	}
	*out = (char *)pt;
	return CS_OK;
}

/* CS_ECRYPTO (with a message naming both key ids, which are public) when a
 * row was sealed under another master key than the running one. */
static enum cs_err kid_ok(const struct master_key *mk, const char *kid)
{
	if (kid != NULL && strcmp(kid, mk->kid) == 0)
		return CS_OK;
	log_msg(LOG_ERROR, "vault: a record is sealed under master key %s, but this "
	    "server runs with %s; run `consentd vault rekey` with the old key",
	    kid ? kid : "?", mk->kid);
	return CS_ECRYPTO;
}

/* Opens a record's or outbox entry's tokens.  *refresh stays NULL when want_refresh is
 * false or there is none. */
static enum cs_err open_pair(const struct master_key *mk, const char *kid, const char *record_id,
    const char *consent_id, const char *subject, const char *resource,
    const unsigned char *access_blob, size_t access_len, const unsigned char *refresh_blob,
    size_t refresh_len, char **access, char **refresh)
{
	enum cs_err e;
	unsigned char *aad = NULL;
	size_t aad_len = 0;
	char *a = NULL, *r = NULL;
	if ((e = kid_ok(mk, kid)) != CS_OK)
		return e;
	if ((e = aad_make(record_id, consent_id, subject, resource, &aad, &aad_len)) != CS_OK)
		return e;
	if (access != NULL &&
	    (e = open_token(mk, aad, aad_len, access_blob, access_len, &a)) != CS_OK)
		goto out;
	if (refresh != NULL && refresh_blob != NULL &&
	    (e = open_token(mk, aad, aad_len, refresh_blob, refresh_len, &r)) != CS_OK)
		goto out;
	if (access != NULL) {
		*access = a;
		a = NULL;
	}
	if (refresh != NULL) {
		*refresh = r;
		r = NULL;
	}
	e = CS_OK;
out:
	wipe_free(a);
	wipe_free(r);
	free(aad);
	return e;
}

/* Seals access (and refresh when non-NULL) under one aad. */
static enum cs_err seal_pair(const struct master_key *mk, const char *record_id,
    const char *consent_id, const char *subject, const char *resource, const char *access,
    const char *refresh, unsigned char **ab, size_t *al, unsigned char **rb, size_t *rl)
{
	enum cs_err e;
	unsigned char *aad = NULL, *a = NULL, *r = NULL;
	size_t aad_len = 0, an = 0, rn = 0;
	if ((e = aad_make(record_id, consent_id, subject, resource, &aad, &aad_len)) != CS_OK)
		return e;
	if ((e = seal_token(mk, aad, aad_len, access, &a, &an)) != CS_OK)
		goto out;
	if (refresh != NULL && (e = seal_token(mk, aad, aad_len, refresh, &r, &rn)) != CS_OK)
		goto out;
	*ab = a;
	*al = an;
	*rb = r;
	*rl = rn;
	a = r = NULL;
	e = CS_OK;
out:
	free(a);
	free(r);
	free(aad);
	return e;
}

/* --- audit -------------------------------------------------------------- */

struct vctx {                           /* what the audit entries of one call share */
	struct store_conn *c;
	int64_t     now;
	const char *actor, *subject, *agent, *resource;
};

static enum cs_err vaudit(const struct vctx *x, const char *action, const char *scopes,
    const char *consent_id, const char *request_id, const char *outcome, const char *detail)
{
	struct audit_entry a;
	memset(&a, 0, sizeof a);
	a.ts = x->now;
	a.actor = x->actor;
	a.action = action;
	a.subject = x->subject;
	a.agent = x->agent;
	a.resource = x->resource;
	a.scopes = scopes;
	a.consent_id = consent_id;
	a.request_id = request_id;
	a.outcome = outcome;
	a.detail = detail;
	return audit_append(x->c, &a);
}

/* One audit entry in its own transaction. */
static enum cs_err vaudit_tx(const struct vctx *x, const char *action, const char *scopes,
    const char *consent_id, const char *request_id, const char *outcome, const char *detail)
{
	enum cs_err e;
	if ((e = store_begin(x->c)) != CS_OK)
		return e;
	if ((e = vaudit(x, action, scopes, consent_id, request_id, outcome, detail)) != CS_OK ||
	    (e = store_commit(x->c)) != CS_OK) {
		store_rollback(x->c);
		return e;
	}
	return CS_OK;
}

/* --- the vault ---------------------------------------------------------- */

static bool has_provider(const struct config_resource *r)
{
	return r->provider_issuer != NULL || r->provider_authorization_endpoint != NULL ||
	    r->provider_token_endpoint != NULL;
}

enum cs_err vault_new(const struct config *cfg, const struct master_key *mk, struct vault **out)
{
	enum cs_err e;
	struct vault *v;
	if (cfg == NULL || mk == NULL || out == NULL)
		return CS_EINVAL;
	if ((v = calloc(1, sizeof *v)) == NULL)
		return CS_ENOMEM;
	v->mk = mk;
	pthread_mutex_init(&v->mu, NULL);
	pthread_cond_init(&v->cv, NULL);
	if (cfg->nresources > 0 && (v->slots = calloc(cfg->nresources, sizeof *v->slots)) == NULL) {
		e = CS_ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < cfg->nresources; i++) {
		const struct config_resource *r = &cfg->resources[i];
		if (!has_provider(r))
			continue;
		if ((e = provider_new(r, &v->slots[v->nslots].p)) != CS_OK)
			goto fail;
		v->slots[v->nslots].resource = r->id;
		v->nslots++;
	}
	*out = v;
	return CS_OK;
fail:
	vault_free(v);
	return e;
}

void vault_free(struct vault *v)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < v->nslots; i++)
		provider_free(v->slots[i].p);
	free(v->slots);
	/* No refresh can be under way when the vault is freed (threads joined). */
	while (v->inflight != NULL) {
		struct inflight *n = v->inflight->next;
		free(v->inflight->record_id);
		free(v->inflight);
		v->inflight = n;
	}
	pthread_cond_destroy(&v->cv);
	pthread_mutex_destroy(&v->mu);
	free(v);
}

struct provider *vault_provider(struct vault *v, const char *resource)
{
	for (size_t i = 0; v != NULL && resource != NULL && i < v->nslots; i++)
		if (strcmp(v->slots[i].resource, resource) == 0)
			return v->slots[i].p;
	return NULL;
}

enum cs_err vault_map_scopes(const struct config *cfg, const char *resource,
    const struct scope_set *scopes, struct scope_set *out)
{
	enum cs_err e;
	struct buf b;
	char *s = NULL;
	if (cfg == NULL || resource == NULL || scopes == NULL || out == NULL)
		return CS_EINVAL;
	buf_init(&b, 64 * 1024);
	for (size_t i = 0; i < scopes->n; i++) {
		const struct config_scope *cs = config_scope(cfg, resource, scopes->v[i]);
		if (cs == NULL) {
			e = CS_EINVAL;
			goto out;
		}
		for (size_t j = 0; j < cs->nprovider; j++) {
			if (cs->provider[j] == NULL || cs->provider[j][0] == '\0')
				continue;
			if ((b.len > 0 && (e = buf_puts(&b, " ")) != CS_OK) ||
			    (e = buf_puts(&b, cs->provider[j])) != CS_OK)
				goto out;
		}
	}
	if ((s = buf_steal(&b)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	/* Parsing sorts and removes duplicates. */
	e = scope_set_parse(s, out);
out:
	free(s);
	buf_clear(&b);
	return e;
}

/* cfg->public_url + "/oauth/callback/" + resource: one redirect URI per
 * resource, so that an answer meant for one provider cannot land at another's. */
static enum cs_err redirect_uri(const struct config *cfg, const char *resource, char **out)
{
	enum cs_err e;
	struct buf b;
	char *enc = NULL;
	if (cfg->public_url == NULL)
		return CS_EINVAL;
	buf_init(&b, 2048);
	if ((e = pct_encode(resource, &enc)) != CS_OK ||
	    (e = buf_printf(&b, "%s/oauth/callback/%s", cfg->public_url, enc)) != CS_OK)
		goto out;
	if ((*out = buf_steal(&b)) == NULL)
		e = CS_ENOMEM;
out:
	free(enc);
	buf_clear(&b);
	return e;
}

/* Best-effort RFC 7009 revocation of tokens that must not live (more scopes
 * than asked, a failed transaction): refresh token first, then access token. */
static void revoke_now(struct provider *p, const struct provider_tokens *t)
{
	if (p == NULL || t == NULL)
		return;
	if (t->refresh_token != NULL && provider_revoke(p, t->refresh_token, "refresh_token") != CS_OK)
		log_msg(LOG_WARN, "vault: revoking an unwanted refresh token failed");
	if (t->access_token != NULL && provider_revoke(p, t->access_token, "access_token") != CS_OK)
		log_msg(LOG_WARN, "vault: revoking an unwanted access token failed");
}

/* --- connecting: begin -------------------------------------------------- */

/* The cs_err this file has always acted on for each consent_decide outcome
 * (CS_ESTALE: the request changed; CS_EINVAL / CS_EPERM: it can no longer be
 * decided), until the vault has outcomes of its own (#13.2). */
static enum cs_err decide_err(enum consent_decide_outcome o)
{
	static const enum cs_err map[CONSENT_DECIDE__MAX] = {
		[CONSENT_DECIDED] = CS_OK, [CONSENT_DECIDE_UNKNOWN] = CS_ENOENT,
		[CONSENT_DECIDE_NOT_YOURS] = CS_EPERM, [CONSENT_DECIDE_CLOSED] = CS_EINVAL,
		[CONSENT_DECIDE_INVALID] = CS_EINVAL, [CONSENT_DECIDE_CHANGED] = CS_ESTALE,
	};
	return (unsigned)o < CONSENT_DECIDE__MAX ? map[o] : CS_EINVAL;
}

/* consent_decide_tx as this file calls it: *nid on CONSENT_DECIDED, decide_err otherwise. */
static enum cs_err decide_in_tx(struct store_conn *c, const struct config *cfg,
    const char *request_id, const struct consent_actor *who, const struct consent_decision *d,
    char **nid)
{
	struct consent_decided got = { CONSENT_DECIDE_UNKNOWN, NULL };
	enum cs_err e = consent_decide_tx(c, cfg, request_id, who, d, &got);
	if (e == CS_OK && (e = decide_err(got.outcome)) == CS_OK) {
		*nid = got.consent_id;
		got.consent_id = NULL;
	}
	consent_decided_clear(&got);
	return e;
}

void vault_begin_clear(struct vault_begin *b)
{
	if (b == NULL)
		return;
	free(b->authorize_url);
	free(b->consent_id);
	memset(b, 0, sizeof *b);
}

/* The record of live consent k serves exactly mapping m: move it to the new
 * consent the decision makes, in one transaction (flow B's exception). */
static enum cs_err move_record(struct vault *v, struct store_conn *c, const struct config *cfg,
    const struct consent_request *r, const struct consent *k, const char *record_id,
    int64_t user_id, const struct consent_decision *d, const char *actor, int64_t now,
    char **new_id)
{
	enum cs_err e;
	bool in_tx = false;
	struct store_vault_record rec;
	char *nid = NULL, *access = NULL, *refresh = NULL;
	unsigned char *ab = NULL, *rb = NULL;
	size_t al = 0, rl = 0;
	char detail[DETAIL_MAX];
	struct vctx x = { c, now, actor, r->subject, r->agent, r->resource };

	memset(&rec, 0, sizeof rec);
	if ((e = store_begin(c)) != CS_OK)
		return e;
	in_tx = true;
	/* Re-read inside the transaction: nothing moved it since we looked. */
	if ((e = store_vault_record_get(c, record_id, &rec)) != CS_OK)
		goto out;
	if (strcmp(rec.consent_id, k->id) != 0 || rec.reserved_for != NULL) {
		e = CS_EBUSY;
		goto out;
	}
	/* Reserved: the cascade that revokes k leaves this record alone. */
	if ((e = store_vault_record_reserve(c, rec.id, r->id, now)) != CS_OK)
		goto out;
	if ((e = decide_in_tx(c, cfg, r->id, &(struct consent_actor){ .user_id = user_id,
	    .actor = actor, .now = now }, d, &nid)) != CS_OK)
		goto out;
	if ((e = open_pair(v->mk, rec.master_kid, rec.id, k->id, k->subject, k->resource,
	    rec.access_sealed, rec.access_sealed_len, rec.refresh_sealed, rec.refresh_sealed_len,
	    &access, &refresh)) != CS_OK)
		goto out;
	/* Re-sealed under the new consent id, with fresh nonces. */
	if ((e = seal_pair(v->mk, rec.id, nid, r->subject, r->resource, access, refresh, &ab, &al,
	    &rb, &rl)) != CS_OK)
		goto out;
	if ((e = store_vault_record_move(c, rec.id, nid, ab, al, rb, rl, v->mk->kid, now)) != CS_OK)
		goto out;
	snprintf(detail, sizeof detail, "from=%s provider_scopes=%s", k->id, rec.provider_scopes);
	if ((e = vaudit(&x, "vault.record.moved", rec.provider_scopes, nid, r->id, "ok",
	    detail)) != CS_OK)
		goto out;
	if ((e = store_commit(c)) != CS_OK)
		goto out;
	in_tx = false;
	*new_id = nid;
	nid = NULL;
out:
	if (in_tx)
		store_rollback(c);
	free(nid);
	wipe_free(access);
	wipe_free(refresh);
	blob_free(ab, al);
	blob_free(rb, rl);
	store_vault_record_clear(&rec);
	return e;
}

/* The provider's authorize URL for mapping m, with state and PKCE S256. */
static enum cs_err authorize_url(const struct config_resource *res,
    const struct provider_meta *meta, const char *redirect, const char *scope,
    const char *state, const char *challenge, char **out)
{
	enum cs_err e;
	struct buf b;
	const char *names[] = { "client_id", "redirect_uri", "scope", "state", "code_challenge" };
	const char *values[] = { res->provider_client_id, redirect, scope, state, challenge };
	if (meta->authorization_endpoint == NULL || res->provider_client_id == NULL)
		return CS_EINVAL;
	buf_init(&b, URL_MAX);
	if ((e = buf_puts(&b, meta->authorization_endpoint)) != CS_OK ||
	    (e = buf_puts(&b, strchr(meta->authorization_endpoint, '?') ? "&" : "?")) != CS_OK ||
	    (e = buf_puts(&b, "response_type=code")) != CS_OK)
		goto out;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		char *enc = NULL;
		/* An empty mapping asks for no scope parameter at all. */
		if (values[i] == NULL || (i == 2 && values[i][0] == '\0'))
			continue;
		if ((e = pct_encode(values[i], &enc)) != CS_OK)
			goto out;
		e = buf_printf(&b, "&%s=%s", names[i], enc);
		free(enc);
		if (e != CS_OK)
			goto out;
	}
	if ((e = buf_puts(&b, "&code_challenge_method=S256")) != CS_OK)
		goto out;
	if ((*out = buf_steal(&b)) == NULL)
		e = CS_ENOMEM;
out:
	buf_clear(&b);
	return e;
}

enum cs_err vault_begin_connect(struct vault *v, struct store_conn *c, const struct config *cfg,
    const char *request_id, int64_t user_id, const unsigned char session_hash[32],
    const struct consent_decision *d, const char *actor, int64_t now,
    struct vault_begin *out)
{
	enum cs_err e;
	struct consent_request r;
	struct consent live;
	struct store_vault_record rec;
	struct scope_set m, have;
	struct store_vault_connect cs;
	struct vault_begin b = { NULL, NULL };
	enum consent_decide_outcome dco = CONSENT_DECIDE_UNKNOWN;
	const struct provider_meta *meta = NULL;
	const struct config_resource *res;
	struct provider *p;
	char state[SESSION_TOKEN_LEN + 1], verifier[SESSION_TOKEN_LEN + 1], challenge[64];
	unsigned char digest[32];
	unsigned int dlen = sizeof digest;
	char *m_s = NULL, *sel_s = NULL, *redirect = NULL;
	bool have_live = false, have_rec = false;

	memset(&r, 0, sizeof r);
	memset(&live, 0, sizeof live);
	memset(&rec, 0, sizeof rec);
	memset(&m, 0, sizeof m);
	memset(&have, 0, sizeof have);
	memset(&cs, 0, sizeof cs);
	memset(state, 0, sizeof state);
	memset(verifier, 0, sizeof verifier);
	if (v == NULL || c == NULL || cfg == NULL || request_id == NULL || session_hash == NULL ||
	    d == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = consent_request_get(c, request_id, &r)) != CS_OK)
		goto out;
	/* SECURITY: the same checks as consent_decide, before the person is sent
	 * anywhere (invariant 4: only the requested person decides). */
	if ((e = consent_decision_check(cfg, &r, user_id, d, now, &dco)) != CS_OK ||
	    (e = decide_err(dco)) != CS_OK)
		goto out;
	if ((res = config_resource(cfg, r.resource)) == NULL ||
	    (p = vault_provider(v, r.resource)) == NULL) {
		e = CS_EINVAL;
		goto out;
	}
	if ((e = vault_map_scopes(cfg, r.resource, &d->selected, &m)) != CS_OK)
		goto out;

	/* A record that serves exactly the new mapping moves to the new consent. */
	e = consent_current(c, user_id, r.agent, r.resource, now, &live);
	if (e == CS_OK)
		have_live = true;
	else if (e != CS_ENOENT)
		goto out;
	if (have_live && !live.reconnect_required) {
		e = store_vault_record_by_consent(c, live.id, &rec);
		if (e == CS_OK)
			have_rec = true;
		else if (e != CS_ENOENT)
			goto out;
	}
	if (have_rec && rec.reserved_for == NULL && strcmp(rec.master_kid, v->mk->kid) == 0 &&
	    set_parse(rec.provider_scopes, &have) == CS_OK && set_equal(&have, &m)) {
		if ((e = move_record(v, c, cfg, &r, &live, rec.id, user_id, d, actor, now,
		    &b.consent_id)) != CS_OK)
			goto out;
		*out = b;
		memset(&b, 0, sizeof b);
		goto out;
	}

	/* Otherwise the person connects at the provider with exactly m. */
	if ((e = provider_meta(p, &meta)) != CS_OK)
		goto out;
	if ((m_s = scope_set_join(&m)) == NULL || (sel_s = scope_set_join(&d->selected)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	if ((e = redirect_uri(cfg, r.resource, &redirect)) != CS_OK ||
	    (e = random_token(state)) != CS_OK || (e = random_token(verifier)) != CS_OK)
		goto out;
	/* PKCE S256 (RFC 7636 §4.2): BASE64URL(SHA256(ASCII(code_verifier))). */
	if (EVP_Digest(verifier, strlen(verifier), digest, &dlen, EVP_sha256(), NULL) != 1 ||
	    dlen != sizeof digest) {
		e = CS_ECRYPTO;
		goto out;
	}
	b64url(digest, sizeof digest, challenge, sizeof challenge);
	if ((e = authorize_url(res, meta, redirect, m_s, state, challenge,
	    &b.authorize_url)) != CS_OK)
		goto out;
	/* SECURITY: the state is stored only as its hash; the decision waits
	 * here, bound to this session, and nothing else changes until the callback. */
	sha256_str(state, cs.state_hash);
	memcpy(cs.session_hash, session_hash, 32);
	cs.user_id = user_id;
	cs.request_id = r.id;
	cs.resource = r.resource;
	cs.provider_issuer = meta->issuer;
	cs.code_verifier = verifier;
	cs.selected = sel_s;
	cs.duration = d->duration;
	cs.offline = d->offline;
	cs.provider_scopes = m_s;
	cs.request_version = (char *)d->version;
	cs.created_at = now;
	cs.expires_at = now + VAULT_CONNECT_TTL;
	if ((e = store_vault_connect_purge(c, now)) != CS_OK ||
	    (e = store_vault_connect_insert(c, &cs)) != CS_OK)
		goto out;
	*out = b;
	memset(&b, 0, sizeof b);
	e = CS_OK;
out:
	OPENSSL_cleanse(state, sizeof state);
	OPENSSL_cleanse(verifier, sizeof verifier);
	vault_begin_clear(&b);
	free(m_s);
	free(sel_s);
	free(redirect);
	scope_set_clear(&m);
	scope_set_clear(&have);
	store_vault_record_clear(&rec);
	consent_clear(&live);
	consent_request_clear(&r);
	return e;
}

/* --- connecting: finish ------------------------------------------------- */

void vault_finish_clear(struct vault_finish *f)
{
	if (f == NULL)
		return;
	free(f->consent_id);
	free(f->request_id);
	free(f->agent);
	free(f->resource);
	scope_set_clear(&f->dropped);
	free(f->why);
	memset(f, 0, sizeof *f);
}

static const char *const outcome_names[VAULT_OUTCOME__MAX] = {
	[VAULT_CONNECTED] = "connected", [VAULT_NARROWED] = "narrowed",
	[VAULT_CANCELLED] = "cancelled", [VAULT_TOO_MUCH] = "too_much",
	[VAULT_BAD_STATE] = "bad_state", [VAULT_FAILED] = "failed",
	[VAULT_CHANGED] = "changed",
};

/* Sets the outcome and the reason a person reads. */
static enum cs_err finish_as(struct vault_finish *f, enum vault_connect_outcome o, const char *why)
{
	f->outcome = o;
	free(f->why);
	f->why = NULL;
	if (why != NULL && (f->why = strdup(why)) == NULL)
		return CS_ENOMEM;
	return CS_OK;
}

/* The consent scopes of sel whose provider scopes all lie in g (*kept), and
 * the others (*dropped). */
static enum cs_err narrow(const struct config *cfg, const char *resource,
    const struct scope_set *sel, const struct scope_set *g, struct scope_set *kept,
    struct scope_set *dropped)
{
	enum cs_err e;
	struct buf k, dr;
	char *ks = NULL, *ds = NULL;
	buf_init(&k, 64 * 1024);
	buf_init(&dr, 64 * 1024);
	for (size_t i = 0; i < sel->n; i++) {
		struct scope_set one = { .n = 0 }, mapped = { .n = 0 };
		bool fits;
		if ((e = scope_set_parse(sel->v[i], &one)) != CS_OK)
			goto out;
		e = vault_map_scopes(cfg, resource, &one, &mapped);
		fits = e == CS_OK && scope_set_subset(&mapped, g);
		scope_set_clear(&one);
		scope_set_clear(&mapped);
		if (e != CS_OK)
			goto out;
		struct buf *to = fits ? &k : &dr;
		if ((to->len > 0 && (e = buf_puts(to, " ")) != CS_OK) ||
		    (e = buf_puts(to, sel->v[i])) != CS_OK)
			goto out;
	}
	if ((ks = buf_steal(&k)) == NULL || (ds = buf_steal(&dr)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	if ((e = scope_set_parse(ks, kept)) != CS_OK)
		goto out;
	if ((e = scope_set_parse(ds, dropped)) != CS_OK) {
		scope_set_clear(kept);
		goto out;
	}
out:
	free(ks);
	free(ds);
	buf_clear(&k);
	buf_clear(&dr);
	return e;
}

/* After the exchange: the consent goes live with its sealed record in one
 * transaction.  CS_EINVAL / CS_EPERM when the decision can no longer be made
 * (the request expired or was decided meanwhile). */
static enum cs_err connect_commit(struct vault *v, struct store_conn *c, const struct config *cfg,
    const struct consent_request *r, int64_t user_id, const struct consent_decision *d,
    const struct provider_tokens *t, const char *g_s, const char *actor, int64_t now,
    enum vault_connect_outcome o, const char *dropped_s, char **new_id)
{
	enum cs_err e;
	bool in_tx = false;
	char rid[RECORD_ID_LEN + 1], detail[DETAIL_MAX];
	char *nid = NULL;
	unsigned char *ab = NULL, *rb = NULL;
	size_t al = 0, rl = 0;
	struct store_vault_record rec;
	struct vctx x = { c, now, actor, r->subject, r->agent, r->resource };

	memset(&rec, 0, sizeof rec);
	if ((e = record_id_new(rid)) != CS_OK)
		return e;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	in_tx = true;
	/* The previous consent's record goes to the outbox in its cascade. */
	if ((e = decide_in_tx(c, cfg, r->id, &(struct consent_actor){ .user_id = user_id,
	    .actor = actor, .now = now }, d, &nid)) != CS_OK)
		goto out;
	if ((e = seal_pair(v->mk, rid, nid, r->subject, r->resource, t->access_token,
	    t->refresh_token, &ab, &al, &rb, &rl)) != CS_OK)
		goto out;
	rec.id = rid;
	rec.consent_id = nid;
	rec.user_id = user_id;
	rec.subject = r->subject;
	rec.agent = r->agent;
	rec.resource = r->resource;
	rec.provider_scopes = (char *)g_s;
	rec.token_type = t->token_type;
	rec.access_sealed = ab;
	rec.access_sealed_len = al;
	rec.refresh_sealed = rb;
	rec.refresh_sealed_len = rl;
	rec.access_expires_at = now + (t->expires_in > 0 ? t->expires_in : DEFAULT_EXPIRES_IN);
	rec.master_kid = (char *)v->mk->kid;
	rec.created_at = now;
	rec.updated_at = now;
	if ((e = store_vault_record_insert(c, &rec)) != CS_OK)
		goto out;
	/* What the done page tells the person was left out, from here, never a URL. */
	if (dropped_s != NULL && (e = store_creq_set_narrowed(c, r->id, dropped_s)) != CS_OK)
		goto out;
	snprintf(detail, sizeof detail, "provider_scopes=%s refresh=%s%s%s", g_s,
	    t->refresh_token ? "yes" : "no", dropped_s ? " dropped=" : "", dropped_s ? dropped_s : "");
	if ((e = vaudit(&x, "vault.connected", g_s, nid, r->id, outcome_names[o], detail)) != CS_OK)
		goto out;
	if ((e = store_commit(c)) != CS_OK)
		goto out;
	in_tx = false;
	*new_id = nid;
	nid = NULL;
out:
	if (in_tx)
		store_rollback(c);
	free(nid);
	blob_free(ab, al);
	blob_free(rb, rl);
	return e;
}

enum cs_err vault_finish_connect(struct vault *v, struct store_conn *c, const struct config *cfg,
    const char *resource, const char *state, const char *code, const char *iss,
    const char *error, const unsigned char session_hash[32], int64_t user_id,
    const char *actor, int64_t now, struct vault_finish *out)
{
	enum cs_err e;
	struct vault_finish f;
	struct store_vault_connect cs;
	struct consent_request r;
	struct provider_tokens t;
	struct scope_set m, g, sel, kept;
	struct consent_decision d;
	const struct provider_meta *meta = NULL;
	struct provider *p = NULL;
	unsigned char h[32];
	char *redirect = NULL, *g_s = NULL, *dropped_s = NULL, *nid = NULL;
	bool have_state = false, have_req = false;
	struct vctx x = { c, now, actor, NULL, NULL, resource };

	memset(&f, 0, sizeof f);
	memset(&cs, 0, sizeof cs);
	memset(&r, 0, sizeof r);
	memset(&t, 0, sizeof t);
	memset(&m, 0, sizeof m);
	memset(&g, 0, sizeof g);
	memset(&sel, 0, sizeof sel);
	memset(&kept, 0, sizeof kept);
	memset(&d, 0, sizeof d);
	if (v == NULL || c == NULL || cfg == NULL || resource == NULL || session_hash == NULL ||
	    out == NULL)
		return CS_EINVAL;

	/* 1. The state: single use (deleted as it is read), this resource, this
	 * session and person, unexpired. */
	if (state == NULL || state[0] == '\0') {
		e = finish_as(&f, VAULT_BAD_STATE, "The answer from the provider carries no state.");
		goto done;
	}
	sha256_str(state, h);
	e = store_vault_connect_take(c, h, &cs);
	if (e == CS_ENOENT) {
		e = finish_as(&f, VAULT_BAD_STATE,
		    "This answer from the provider is unknown or was already used.");
		goto done;
	} else if (e != CS_OK) {
		goto out;
	}
	have_state = true;
	if (consent_request_get(c, cs.request_id, &r) == CS_OK) {
		have_req = true;
		x.subject = r.subject;
		x.agent = r.agent;
	}
	if (cs.expires_at <= now) {
		e = finish_as(&f, VAULT_BAD_STATE,
		    "You took too long at the provider. Open the link from your agent again.");
		goto done;
	}
	/* SECURITY: an answer meant for another resource's provider (mix-up). */
	if (strcmp(cs.resource, resource) != 0) {
		e = finish_as(&f, VAULT_BAD_STATE,
		    "This answer arrived at the address of another resource.");
		goto done;
	}
	/* SECURITY: the connection finishes in the browser session that began it. */
	if (CRYPTO_memcmp(cs.session_hash, session_hash, 32) != 0 || cs.user_id != user_id ||
	    !have_req) {
		e = finish_as(&f, VAULT_BAD_STATE,
		    "This answer from the provider belongs to another session.");
		goto done;
	}
	if ((f.request_id = strdup(r.id)) == NULL || (f.agent = strdup(r.agent)) == NULL ||
	    (f.resource = strdup(r.resource)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}

	/* 2. iss (RFC 9207), before anything the answer says is believed. */
	if ((p = vault_provider(v, resource)) == NULL) {
		e = finish_as(&f, VAULT_FAILED, "This resource has no provider any more.");
		goto done;
	}
	if (provider_meta(p, &meta) != CS_OK) {
		e = finish_as(&f, VAULT_FAILED, "The provider could not be reached.");
		goto done;
	}
	{
		const char *want = meta->issuer;
		bool bad = false;
		if (meta->iss_parameter_supported && iss == NULL)
			bad = true;
		/* With endpoints configured by hand there is no issuer to compare:
		 * the per-resource redirect URI is then the mix-up defence. */
		if (iss != NULL && want != NULL && strcmp(iss, want) != 0)
			bad = true;
		if (cs.provider_issuer != NULL && want != NULL && strcmp(cs.provider_issuer, want) != 0)
			bad = true;
		if (bad) {
			e = finish_as(&f, VAULT_BAD_STATE,
			    "The answer did not come from the expected provider.");
			goto done;
		}
	}

	/* 3. The provider's error. */
	if (error != NULL) {
		if (strcmp(error, "access_denied") == 0)
			e = finish_as(&f, VAULT_CANCELLED, "You cancelled at the provider.");
		else
			e = finish_as(&f, VAULT_FAILED, "The provider answered with an error.");
		goto done;
	}
	if (code == NULL || code[0] == '\0') {
		e = finish_as(&f, VAULT_FAILED, "The provider sent no authorization code.");
		goto done;
	}

	/* 4. The request must still be the one the person decided on before they
	 * left for the provider: otherwise the code is never exchanged (no tokens
	 * to revoke).  connect_commit checks it again inside its transaction. */
	{
		char now_v[CONSENT_VERSION_LEN + 1];
		consent_request_version(&r, now_v);
		if (strlen(cs.request_version) != CONSENT_VERSION_LEN ||
		    CRYPTO_memcmp(now_v, cs.request_version, CONSENT_VERSION_LEN) != 0) {
			e = finish_as(&f, VAULT_CHANGED,
			    "The request changed while you were at the provider; nothing was given.");
			goto done;
		}
	}

	/* 5. The code exchange, server-side, with the PKCE verifier. */
	if ((e = redirect_uri(cfg, resource, &redirect)) != CS_OK)
		goto out;
	if (provider_exchange_code(p, code, redirect, cs.code_verifier, &t) != CS_OK) {
		e = finish_as(&f, VAULT_FAILED, "The provider refused the authorization code.");
		goto done;
	}
	if (t.access_token == NULL || t.access_token[0] == '\0' || !is_bearer(t.token_type)) {
		revoke_now(p, &t);
		e = finish_as(&f, VAULT_FAILED, "The provider sent a token consentd cannot use.");
		goto done;
	}
	if ((e = set_parse(cs.provider_scopes, &m)) != CS_OK ||
	    (e = set_parse(cs.selected, &sel)) != CS_OK) {
		e = CS_EDB;
		goto out;
	}
	if (t.scope != NULL) {
		if (scope_set_parse(t.scope, &g) != CS_OK) {
			revoke_now(p, &t);
			e = finish_as(&f, VAULT_FAILED, "The provider's answer could not be understood.");
			goto done;
		}
	} else if ((e = set_parse(cs.provider_scopes, &g)) != CS_OK) {
		goto out;
	}
	/* SECURITY: invariant 7 -- a provider token never holds more than the
	 * mapping of its consent's scopes. */
	if (!scope_set_subset(&g, &m)) {
		revoke_now(p, &t);
		e = finish_as(&f, VAULT_TOO_MUCH,
		    "The provider granted more than was asked for; those tokens were revoked.");
		goto done;
	}
	if (!scope_set_subset(&m, &g)) {
		struct scope_set m2 = { .n = 0 };
		bool fits;
		if ((e = narrow(cfg, resource, &sel, &g, &kept, &f.dropped)) != CS_OK)
			goto out;
		if (kept.n == 0) {
			revoke_now(p, &t);
			e = finish_as(&f, VAULT_FAILED,
			    "The provider granted too little for any of the permissions you chose.");
			goto done;
		}
		/* The token must still hold no more than the narrowed consent maps to. */
		if ((e = vault_map_scopes(cfg, resource, &kept, &m2)) != CS_OK)
			goto out;
		fits = scope_set_subset(&g, &m2);
		scope_set_clear(&m2);
		if (!fits) {
			revoke_now(p, &t);
			e = finish_as(&f, VAULT_FAILED,
			    "The provider granted a set of permissions that fits none of your choices.");
			goto done;
		}
		if ((dropped_s = scope_set_join(&f.dropped)) == NULL) {
			e = CS_ENOMEM;
			goto out;
		}
		f.outcome = VAULT_NARROWED;
	} else {
		if ((e = set_parse(cs.selected, &kept)) != CS_OK)
			goto out;
		f.outcome = VAULT_CONNECTED;
	}
	if ((g_s = scope_set_join(&g)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}

	/* 6. One transaction: the consent goes live with its sealed record. */
	d.approve = true;
	d.selected = kept;
	d.duration = cs.duration;
	d.offline = cs.offline != 0;
	/* SECURITY: the consent goes live only if the request is still the one
	 * the person decided on (checked again inside connect_commit's transaction). */
	memcpy(d.version, cs.request_version, sizeof d.version);
	e = connect_commit(v, c, cfg, &r, user_id, &d, &t, g_s, actor, now, f.outcome, dropped_s,
	    &nid);
	memset(&d.selected, 0, sizeof d.selected);   /* still owned by kept */
	if (e != CS_OK) {
		/* SECURITY: tokens that no record holds must not live on. */
		revoke_now(p, &t);
		if (e == CS_ESTALE) {
			scope_set_clear(&f.dropped);
			e = finish_as(&f, VAULT_CHANGED,
			    "The request changed while you were at the provider; the connection was undone.");
			goto done;
		}
		if (e != CS_EINVAL && e != CS_EPERM)
			goto out;
		scope_set_clear(&f.dropped);
		e = finish_as(&f, VAULT_FAILED,
		    "The request expired or was decided meanwhile; the connection was undone.");
		goto done;
	}
	f.consent_id = nid;
	nid = NULL;
	free(f.why);
	f.why = NULL;

done:
	if (e != CS_OK)
		goto out;
	if (f.outcome != VAULT_CONNECTED && f.outcome != VAULT_NARROWED) {
		char detail[DETAIL_MAX];
		/* Invariant 10: every refusal is audited (never the code or a token). */
		snprintf(detail, sizeof detail, "%s", f.why ? f.why : "");
		if ((e = vaudit_tx(&x, "vault.connect.failed", have_state ? cs.provider_scopes : NULL,
		    NULL, have_req ? r.id : NULL, outcome_names[f.outcome], detail)) != CS_OK)
			goto out;
	}
	*out = f;
	memset(&f, 0, sizeof f);
	e = CS_OK;
out:
	vault_finish_clear(&f);
	store_vault_connect_clear(&cs);
	consent_request_clear(&r);
	provider_tokens_clear(&t);
	scope_set_clear(&m);
	scope_set_clear(&g);
	scope_set_clear(&sel);
	scope_set_clear(&kept);
	free(redirect);
	free(g_s);
	free(dropped_s);
	free(nid);
	return e;
}

/* --- release ------------------------------------------------------------ */

void vault_release_clear(struct vault_release *r)
{
	if (r == NULL)
		return;
	wipe_free(r->access_token);
	free(r->token_type);
	free(r->scope);
	memset(r, 0, sizeof *r);
}

/* Marks k reconnect_required with its audit entry, in one transaction. */
static enum cs_err mark_reconnect(const struct vctx *x, const struct consent *k, const char *why)
{
	enum cs_err e;
	if ((e = store_begin(x->c)) != CS_OK)
		return e;
	e = consent_set_reconnect_required(x->c, k->id);
	if (e == CS_OK || e == CS_ENOENT)
		e = vaudit(x, "vault.reconnect_required", NULL, k->id, NULL, "reconnect_required", why);
	if (e != CS_OK || (e = store_commit(x->c)) != CS_OK) {
		store_rollback(x->c);
		return e;
	}
	return CS_OK;
}

/* One refresh of rec (the leader's): the provider is called outside any
 * transaction; the new tokens are stored in one.  *rec is re-read on CS_OK. */
static enum cs_err do_refresh(struct vault *v, struct store_conn *c, struct provider *p,
    const struct consent *k, struct store_vault_record *rec, const struct vctx *x)
{
	enum cs_err e;
	bool in_tx = false;
	char *rt = NULL, *g_s = NULL;
	struct provider_tokens t;
	struct scope_set have, g;
	struct store_vault_record cur, fresh;
	unsigned char *ab = NULL, *rb = NULL;
	size_t al = 0, rl = 0;
	char detail[DETAIL_MAX];
	int64_t now = x->now;

	memset(&t, 0, sizeof t);
	memset(&have, 0, sizeof have);
	memset(&g, 0, sizeof g);
	memset(&cur, 0, sizeof cur);
	memset(&fresh, 0, sizeof fresh);
	if ((e = open_pair(v->mk, rec->master_kid, rec->id, k->id, k->subject, k->resource,
	    rec->access_sealed, rec->access_sealed_len, rec->refresh_sealed,
	    rec->refresh_sealed_len, NULL, &rt)) != CS_OK)
		goto out;
	if (rt == NULL) {                 /* the caller checked; defensive */
		e = CS_EPERM;
		goto out;
	}
	e = provider_refresh(p, rt, &t);
	if (e == CS_EPERM) {
		/* invalid_grant: the provider ended this authorization (perhaps by
		 * revoking another consent's tokens for the same user and client). */
		if ((e = mark_reconnect(x, k, "refresh refused (invalid_grant)")) == CS_OK)
			e = CS_EPERM;
		goto out;
	} else if (e != CS_OK) {
		e = e == CS_ENOMEM ? e : CS_EIO;
		goto out;
	}
	if (t.access_token == NULL || t.access_token[0] == '\0' || !is_bearer(t.token_type)) {
		revoke_now(p, &t);
		log_msg(LOG_WARN, "vault: the provider's refresh answer is unusable");
		e = CS_EIO;
		goto out;
	}
	if ((e = set_parse(rec->provider_scopes, &have)) != CS_OK) {
		e = CS_EDB;
		goto out;
	}
	if (t.scope != NULL) {
		if (scope_set_parse(t.scope, &g) != CS_OK || !scope_set_subset(&g, &have)) {
			/* SECURITY: invariant 7 holds on refresh too: a token with more
			 * scopes than the record's is revoked, never stored. */
			revoke_now(p, &t);
			if ((e = mark_reconnect(x, k, "refresh answered with more scopes")) == CS_OK)
				e = CS_EPERM;
			goto out;
		}
	} else if ((e = set_parse(rec->provider_scopes, &g)) != CS_OK) {
		goto out;
	}
	if ((g_s = scope_set_join(&g)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	if ((e = store_begin(c)) != CS_OK)
		goto fail_revoke;
	in_tx = true;
	/* The record as it is now: revoked meanwhile (gone to the outbox), or
	 * moved to a newer consent of the same triple. */
	if ((e = store_vault_record_get(c, rec->id, &cur)) != CS_OK)
		goto fail_revoke;
	if ((e = seal_pair(v->mk, cur.id, cur.consent_id, k->subject, k->resource, t.access_token,
	    t.refresh_token, &ab, &al, &rb, &rl)) != CS_OK)
		goto fail_revoke;
	if ((e = store_vault_record_refreshed(c, cur.id, ab, al, rb, rl, g_s,
	    now + (t.expires_in > 0 ? t.expires_in : DEFAULT_EXPIRES_IN), v->mk->kid,
	    now)) != CS_OK)
		goto fail_revoke;
	snprintf(detail, sizeof detail, "rotated=%s provider_scopes=%s",
	    t.refresh_token ? "yes" : "no", g_s);
	if ((e = vaudit(x, "vault.refreshed", g_s, cur.consent_id, NULL, "ok", detail)) != CS_OK)
		goto fail_revoke;
	if ((e = store_commit(c)) != CS_OK)
		goto fail_revoke;
	in_tx = false;
	if (strcmp(cur.consent_id, k->id) != 0) {
		e = CS_ENOENT;                /* k no longer holds the record */
		goto out;
	}
	if ((e = store_vault_record_get(c, rec->id, &fresh)) != CS_OK)
		goto out;
	store_vault_record_clear(rec);
	*rec = fresh;
	memset(&fresh, 0, sizeof fresh);
	e = CS_OK;
	goto out;
fail_revoke:
	if (in_tx) {
		store_rollback(c);
		in_tx = false;
	}
	/* SECURITY: tokens that no record holds must not live on. */
	revoke_now(p, &t);
out:
	if (in_tx)
		store_rollback(c);
	wipe_free(rt);
	free(g_s);
	blob_free(ab, al);
	blob_free(rb, rl);
	provider_tokens_clear(&t);
	scope_set_clear(&have);
	scope_set_clear(&g);
	store_vault_record_clear(&cur);
	store_vault_record_clear(&fresh);
	return e;
}

static void inflight_put(struct inflight *f)
{
	/* Called with the vault's mutex held. */
	if (--f->refs == 0 && f->done) {
		free(f->record_id);
		free(f);
	}
}

/* Refreshes rec unless another thread of this process is refreshing the
 * same record; then waits for it and takes its result.  On CS_OK *rec is
 * the current record (re-read). */
static enum cs_err refresh_single(struct vault *v, struct store_conn *c, struct provider *p,
    const struct consent *k, int64_t margin, struct store_vault_record *rec,
    const struct vctx *x)
{
	enum cs_err e;
	struct inflight *f;
	struct store_vault_record cur;

	memset(&cur, 0, sizeof cur);
	pthread_mutex_lock(&v->mu);
	for (f = v->inflight; f != NULL; f = f->next)
		if (strcmp(f->record_id, rec->id) == 0)
			break;
	if (f != NULL) {
		/* A follower: wait for the leader, then read what it stored. */
		f->refs++;
		while (!f->done)
			pthread_cond_wait(&v->cv, &v->mu);
		e = f->result;
		inflight_put(f);
		pthread_mutex_unlock(&v->mu);
		if (e == CS_OK || e == CS_EIO) {
			enum cs_err e2 = store_vault_record_by_consent(c, k->id, &cur);
			if (e2 != CS_OK)
				return e2;
			store_vault_record_clear(rec);
			*rec = cur;
		}
		return e;
	}
	if ((f = calloc(1, sizeof *f)) == NULL || (f->record_id = strdup(rec->id)) == NULL) {
		free(f);
		pthread_mutex_unlock(&v->mu);
		return CS_ENOMEM;
	}
	f->refs = 1;
	f->next = v->inflight;
	v->inflight = f;
	pthread_mutex_unlock(&v->mu);

	/* The leader.  Another leader may have finished just before: re-read,
	 * and refresh only if the record still needs it. */
	e = store_vault_record_by_consent(c, k->id, &cur);
	if (e == CS_OK) {
		store_vault_record_clear(rec);
		*rec = cur;
		if (rec->access_expires_at - x->now > margin)
			e = CS_OK;
		else if (rec->refresh_sealed == NULL)
			e = CS_EIO;               /* nothing to refresh with (cannot be: checked) */
		else
			e = do_refresh(v, c, p, k, rec, x);
	}

	pthread_mutex_lock(&v->mu);
	for (struct inflight **pp = &v->inflight; *pp != NULL; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	f->done = 1;
	f->result = e;
	pthread_cond_broadcast(&v->cv);
	inflight_put(f);
	pthread_mutex_unlock(&v->mu);
	return e;
}

static enum cs_err release(struct vault *v, struct store_conn *c, const struct config *cfg,
    const struct consent *k, const char *action, const char *approval_id, const char *actor,
    int64_t now, bool force, struct vault_release *out);

enum cs_err vault_release(struct vault *v, struct store_conn *c, const struct config *cfg,
    const struct consent *k, const char *action, const char *actor, int64_t now,
    struct vault_release *out)
{
	return release(v, c, cfg, k, action, NULL, actor, now, false, out);
}

enum cs_err vault_release_approved(struct vault *v, struct store_conn *c,
    const struct config *cfg, const struct consent *k, const char *action,
    const char *approval_id, const char *actor, int64_t now, struct vault_release *out)
{
	if (approval_id == NULL)
		return CS_EINVAL;
	return release(v, c, cfg, k, action, approval_id, actor, now, false, out);
}

enum cs_err vault_release_refreshed(struct vault *v, struct store_conn *c,
    const struct config *cfg, const struct consent *k, const char *action, const char *actor,
    int64_t now, struct vault_release *out)
{
	return release(v, c, cfg, k, action, NULL, actor, now, true, out);
}

/* The release's one transaction: the approval (if any) is used up and the
 * release audited together.  An approval refused meanwhile keeps its refusal
 * entry and records no release (CS_ESTALE). */
static enum cs_err release_commit(const struct vctx *x, const struct config *cfg,
    const char *approval_id, const char *scopes, const char *consent_id, const char *outcome,
    const char *detail)
{
	enum cs_err e;
	bool refused = false;
	if ((e = store_begin(x->c)) != CS_OK)
		return e;
	if (approval_id != NULL) {
		/* SECURITY: invariant 8 -- used once, in the transaction of its release. */
		e = approval_redeem(x->c, cfg, approval_id, x->actor, x->now);
		if (e == CS_EPERM) {
			refused = true;
			e = CS_OK;
		}
	}
	if (e == CS_OK && !refused)
		e = vaudit(x, "vault.released", scopes, consent_id, NULL, outcome, detail);
	/* A token released is a use of its consent (/me's "last used"). */
	if (e == CS_OK && !refused)
		e = consent_touch(x->c, consent_id, x->now);
	if (e == CS_OK && (e = store_commit(x->c)) == CS_OK)
		return refused ? CS_ESTALE : CS_OK;
	store_rollback(x->c);
	return e;
}

static enum cs_err release(struct vault *v, struct store_conn *c, const struct config *cfg,
    const struct consent *k, const char *action, const char *approval_id, const char *actor,
    int64_t now, bool force, struct vault_release *out)
{
	enum cs_err e;
	struct store_vault_record rec;
	struct vault_release rl;
	struct provider *p;
	const struct config_resource *res;
	char detail[DETAIL_MAX];
	const char *outcome = "ok";
	int64_t margin;
	struct vctx x = { c, now, actor, NULL, NULL, NULL };

	memset(&rec, 0, sizeof rec);
	memset(&rl, 0, sizeof rl);
	if (v == NULL || c == NULL || cfg == NULL || k == NULL || k->id == NULL ||
	    k->subject == NULL || k->resource == NULL || action == NULL || out == NULL)
		return CS_EINVAL;
	x.subject = k->subject;
	x.agent = k->agent;
	x.resource = k->resource;
	if ((res = config_resource(cfg, k->resource)) == NULL ||
	    (p = vault_provider(v, k->resource)) == NULL)
		return CS_ENOENT;
	margin = res->refresh_margin;
	/* A forced refresh (the provider refused the token) treats the token as
	 * due: a margin beyond any lifetime.  Bounded so that expiry - now never
	 * overflows against it. */
	if (force)
		margin = INT64_MAX / 4;
	/* The caller validated a grant of k; the consent may still have lost its
	 * provider connection since. */
	if (!consent_is_live(k, now) || k->reconnect_required)
		return CS_EPERM;
	if ((e = store_vault_record_by_consent(c, k->id, &rec)) != CS_OK)
		goto out;
	if (force && now - rec.updated_at < VAULT_FORCED_REFRESH_MIN) {
		e = CS_EBUSY;
		goto out;
	}
	if ((e = kid_ok(v->mk, rec.master_kid)) != CS_OK)
		goto out;
	if (!is_bearer(rec.token_type)) {
		e = CS_EPERM;
		goto out;
	}
	if (rec.access_expires_at - now <= margin) {
		if (rec.refresh_sealed != NULL) {
			e = refresh_single(v, c, p, k, margin, &rec, &x);
			/* Our call: a transient failure (CS_EIO) still releases an access
			 * token that has not expired -- it works until then, and the next
			 * release tries the refresh again.  An expired one is never released. */
			if (e == CS_EIO && rec.access_expires_at > now)
				outcome = "refresh_failed";
			else if (e != CS_OK)
				goto out;
		} else if (rec.access_expires_at <= now) {
			/* Expired, and nothing to refresh it with: only a new connection helps. */
			if ((e = mark_reconnect(&x, k, "access token expired; no refresh token")) == CS_OK)
				e = CS_EPERM;
			goto out;
		}
	}
	/* SECURITY: invariant 2 -- only the access token leaves, never the refresh token. */
	if ((e = open_pair(v->mk, rec.master_kid, rec.id, k->id, k->subject, k->resource,
	    rec.access_sealed, rec.access_sealed_len, NULL, 0, &rl.access_token, NULL)) != CS_OK)
		goto out;
	if ((rl.token_type = strdup(rec.token_type)) == NULL ||
	    (rl.scope = strdup(rec.provider_scopes)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	rl.expires_in = rec.access_expires_at - now;
	/* Invariant 10: the release is audited before the token is handed out. */
	snprintf(detail, sizeof detail, "action=%s%s%s", action, approval_id ? "; approval=" : "",
	    approval_id ? approval_id : "");
	if ((e = release_commit(&x, cfg, approval_id, rec.provider_scopes, k->id, outcome,
	    detail)) != CS_OK)
		goto out;
	*out = rl;
	memset(&rl, 0, sizeof rl);
	e = CS_OK;
out:
	vault_release_clear(&rl);
	store_vault_record_clear(&rec);
	return e;
}

bool vault_has_record(struct store_conn *c, const char *consent_id)
{
	if (c == NULL || consent_id == NULL)
		return false;
	return store_vault_record_exists(c, consent_id) != 0;
}

/* --- the revocation outbox --------------------------------------------- */

static int64_t backoff(int64_t attempts)
{
	int64_t d = BACKOFF_BASE;
	for (int64_t i = 0; i < attempts && d < BACKOFF_MAX; i++)
		d *= 2;
	return d < BACKOFF_MAX ? d : BACKOFF_MAX;
}

/* Works one entry; *finished 1 when it was erased. */
static enum cs_err outbox_one(struct vault *v, struct store_conn *c,
    struct store_vault_outbox *o, int64_t now, int *finished)
{
	enum cs_err e;
	char *access = NULL, *refresh = NULL;
	bool cannot = false, unreachable = false, done;
	bool rdone, adone, expired = o->access_expires_at <= now;
	struct provider *p = vault_provider(v, o->resource);
	char detail[DETAIL_MAX];
	struct vctx x = { c, now, "system", o->subject, NULL, o->resource };

	*finished = 0;
	if (p == NULL) {
		cannot = true;                /* the resource lost its provider */
	} else if (open_pair(v->mk, o->master_kid, o->record_id, o->consent_id, o->subject,
	    o->resource, o->access_sealed, o->access_sealed_len, o->refresh_sealed,
	    o->refresh_sealed_len, &access, &refresh) != CS_OK) {
		cannot = true;                /* unreadable: nothing to send */
		log_msg(LOG_WARN, "vault: an outbox entry could not be opened");
	}
	/* The provider is called outside any transaction; each success is
	 * recorded at once so that a crash does not repeat it. */
	if (!cannot && refresh != NULL && !o->refresh_revoked) {
		e = provider_revoke(p, refresh, "refresh_token");
		if (e == CS_OK) {
			o->refresh_revoked = 1;
			if ((e = store_vault_outbox_mark(c, o->id, 1, 0)) != CS_OK)
				goto out;
		} else if (e == CS_ENOENT) {
			cannot = true;
		} else {
			unreachable = true;
		}
	}
	if (!cannot && !unreachable && !o->access_revoked && !expired) {
		e = provider_revoke(p, access, "access_token");
		if (e == CS_OK) {
			o->access_revoked = 1;
			if ((e = store_vault_outbox_mark(c, o->id, 0, 1)) != CS_OK)
				goto out;
		} else if (e == CS_ENOENT) {
			cannot = true;
		}
	}
	rdone = o->refresh_sealed == NULL || o->refresh_revoked;
	adone = o->access_revoked || expired;
	/* Erased when both are revoked (or there was no refresh token), or when
	 * the access token expired and the refresh token is revoked; a provider
	 * that cannot revoke: once the access token expired. */
	done = (rdone && adone) || (cannot && expired);
	if ((e = store_begin(c)) != CS_OK)
		goto out;
	if (done) {
		snprintf(detail, sizeof detail, "record=%s refresh=%s access=%s", o->record_id,
		    o->refresh_sealed == NULL ? "none" : o->refresh_revoked ? "revoked" : "expired",
		    o->access_revoked ? "revoked" : "expired");
		if ((e = store_vault_outbox_delete(c, o->id)) != CS_OK ||
		    (e = vaudit(&x, "vault.revoked", NULL, o->consent_id, NULL,
		    o->access_revoked && rdone ? "ok" : "expired", detail)) != CS_OK)
			goto rollback;
	} else {
		int64_t attempts = o->attempts + 1;
		snprintf(detail, sizeof detail, "record=%s attempt=%lld%s", o->record_id,
		    (long long)attempts, cannot ? " cannot_revoke" : "");
		if ((e = store_vault_outbox_retry(c, o->id, attempts, now + backoff(attempts))) != CS_OK ||
		    (e = vaudit(&x, "vault.revoke_retry", NULL, o->consent_id, NULL, "retry",
		    detail)) != CS_OK)
			goto rollback;
	}
	if ((e = store_commit(c)) != CS_OK)
		goto rollback;
	*finished = done ? 1 : 0;
	e = CS_OK;
	goto out;
rollback:
	store_rollback(c);
out:
	wipe_free(access);
	wipe_free(refresh);
	return e;
}

enum cs_err vault_outbox_run(struct vault *v, struct store_conn *c, int64_t now, int *finished)
{
	enum cs_err e, first = CS_OK;
	struct store_vault_outbox *due = NULL;
	size_t n = 0;
	int count = 0;
	if (v == NULL || c == NULL || finished == NULL)
		return CS_EINVAL;
	if ((e = store_vault_outbox_due(c, now, OUTBOX_BATCH, &due, &n)) != CS_OK)
		return e;
	for (size_t i = 0; i < n; i++) {
		int one = 0;
		/* One entry's failure does not hold up the others. */
		if ((e = outbox_one(v, c, &due[i], now, &one)) != CS_OK && first == CS_OK)
			first = e;
		count += one;
	}
	store_vault_outbox_free(due, n);
	*finished = count;
	return first;
}
