/* vault.c -- the token vault (docs/architecture.md flow D): provider tokens sealed
 * per consent, release with single-flight refresh, and the revocation outbox
 * (connecting a provider is vault_connect.c).  It must never hand out a
 * refresh token, write a token to a log or the audit log, or wait for a
 * provider inside a database transaction. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approval.h"
#include "audit.h"
#include "buf.h"
#include "health.h"
#include "metrics.h"
#include "scope.h"
#include "standing.h"
#include "store_approval.h"
#include "store_consent.h"
#include "store_vault.h"
#include "vault.h"
#include "vault_priv.h"
#include "log.h"

#define VAULT_PURPOSE "vault"           /* seal.h purpose: its own derived key */
#define OUTBOX_BATCH 100                /* entries per pass */
#define OUTBOX_CLAIM 10                 /* entries per claim, claimed in turn up to OUTBOX_BATCH */
#define BACKOFF_BASE 5                  /* seconds, doubled per attempt */
#define BACKOFF_MAX 3600
#define DETAIL_MAX 1024

/* A refresh under way for one record: later callers wait for it and reuse
 * its result instead of refreshing again (single flight per record). */
struct inflight {
	char            *record_id;
	int              refs;              /* the leader and its waiters */
	int              done;
	enum cs_err      result;
	struct inflight *next;
};

/* A record whose last refresh failed transiently (5xx, timeout): the next
 * attempt waits until `until`, doubling per failure (REFRESH_BACKOFF_BASE ..
 * REFRESH_BACKOFF_MAX), so that a provider that is down is not asked again
 * by every release.  Per process: each node keeps its own. */
struct refresh_wait {
	char                *record_id;
	int64_t              until;
	int64_t              failures;
	struct refresh_wait *next;
};
#define REFRESH_BACKOFF_BASE 2
#define REFRESH_BACKOFF_MAX 300
#define REFRESH_WAITS_MAX 4096          /* records remembered at once; beyond, no backoff */

/* --- sealing ------------------------------------------------------------ */

/* The additional data binding a ciphertext to its row (vault.h).  None of
 * the parts can hold a NUL, so the encoding is unambiguous. */
enum cs_err vault_aad_encode(const char *record_id, const char *consent_id,
    const char *subject, const char *resource, unsigned char **out, size_t *len)
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

enum cs_err vault_open_pair(const struct master_key *mk, const struct vault_aad *id,
    const struct vault_sealed *in, char **access, char **refresh)
{
	enum cs_err e;
	unsigned char *aad = NULL;
	size_t aad_len = 0;
	char *a = NULL, *r = NULL;
	if ((e = kid_ok(mk, in->kid)) != CS_OK)
		return e;
	if ((e = vault_aad_encode(id->record_id, id->consent_id, id->subject,
	    id->resource, &aad, &aad_len)) != CS_OK)
		return e;
	if (access != NULL &&
	    (e = open_token(mk, aad, aad_len, in->access, in->access_len, &a)) != CS_OK)
		goto out;
	if (refresh != NULL && in->refresh != NULL &&
	    (e = open_token(mk, aad, aad_len, in->refresh, in->refresh_len, &r)) != CS_OK)
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

enum cs_err vault_record_open(const struct master_key *mk, const struct store_vault_record *rec,
    const struct consent *k, char **access, char **refresh)
{
	const struct vault_aad id = { rec->id, k->id, k->subject, k->resource };
	const struct vault_sealed in = { rec->access_sealed, rec->access_sealed_len,
	    rec->refresh_sealed, rec->refresh_sealed_len, rec->master_kid };
	return vault_open_pair(mk, &id, &in, access, refresh);
}

enum cs_err vault_seal_pair(const struct master_key *mk, const struct vault_aad *id,
    const char *access, const char *refresh, struct vault_sealed *out)
{
	enum cs_err e;
	unsigned char *aad = NULL, *a = NULL, *r = NULL;
	size_t aad_len = 0, an = 0, rn = 0;
	if ((e = vault_aad_encode(id->record_id, id->consent_id, id->subject,
	    id->resource, &aad, &aad_len)) != CS_OK)
		return e;
	if ((e = seal_token(mk, aad, aad_len, access, &a, &an)) != CS_OK)
		goto out;
	if (refresh != NULL && (e = seal_token(mk, aad, aad_len, refresh, &r, &rn)) != CS_OK)
		goto out;
	out->access = a;
	out->access_len = an;
	out->refresh = r;
	out->refresh_len = rn;
	out->kid = mk->kid;
	a = r = NULL;
	e = CS_OK;
out:
	free(a);
	free(r);
	free(aad);
	return e;
}

/* --- audit -------------------------------------------------------------- */

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
	v->cfg = cfg;
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
	while (v->waits != NULL) {
		struct refresh_wait *n = v->waits->next;
		free(v->waits->record_id);
		free(v->waits);
		v->waits = n;
	}
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

bool vault_key_resource(const struct vault *v, const char *resource)
{
	const struct config_resource *r = v != NULL && resource != NULL ?
	    config_resource(v->cfg, resource) : NULL;
	return r != NULL && r->credential == CREDENTIAL_API_KEY;
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

/* Best-effort RFC 7009 revocation of tokens that must not live (more scopes
 * than asked, a failed transaction): refresh token first, then access token. */
void vault_revoke_now(struct provider *p, const struct provider_tokens *t)
{
	if (p == NULL || t == NULL)
		return;
	if (t->refresh_token != NULL && provider_revoke(p, t->refresh_token, "refresh_token") != CS_OK)
		log_msg(LOG_WARN, "vault: revoking an unwanted refresh token failed");
	if (t->access_token != NULL && provider_revoke(p, t->access_token, "access_token") != CS_OK)
		log_msg(LOG_WARN, "vault: revoking an unwanted access token failed");
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

/* What the steps of one release share: the call, and whom its audit entries
 * are about (the consent's subject, agent and resource). */
struct rel {
	struct vault      *v;
	struct store_conn *c;
	const struct config *cfg;
	const struct vault_release_req *rq;
	struct provider   *p;
	bool               forced;        /* vault_release_refreshed: the upstream refused the token */
};

/* One audit entry of the release path about rq's consent. */
static enum cs_err rel_audit(const struct rel *x, const struct audit_entry *what)
{
	struct audit_entry a = *what;
	a.ts = x->rq->now;
	a.actor = x->rq->actor;
	a.subject = x->rq->k->subject;
	a.agent = x->rq->k->agent;
	a.resource = x->rq->k->resource;
	return audit_append(x->c, &a);
}

/* Marks the consent reconnect_required for reason r with its health event
 * and its audit entry, in one transaction.  CS_OK: the caller answers
 * VAULT_RELEASE_GONE. */
static enum cs_err mark_reconnect(const struct rel *x, enum health_reason r, const char *why)
{
	enum cs_err e;
	const char *kid = x->rq->k->id;
	if ((e = store_begin(x->c)) != CS_OK)
		return e;
	e = health_mark_broken(x->c, kid, r, x->rq->now);
	if (e == CS_OK || e == CS_ENOENT)
		e = rel_audit(x, &(struct audit_entry){ .action = "vault.reconnect_required",
		    .consent_id = kid, .outcome = "reconnect_required", .detail = why });
	return store_end(x->c, e);
}

/* do_refresh's transaction: the new tokens t (scopes g_s) sealed into the
 * record as it is now (*cur: revoked meanwhile, or moved to a newer consent of
 * the same triple), audited.  On failure the caller revokes t. */
static enum cs_err refresh_store(const struct rel *x, const struct store_vault_record *rec,
    const struct provider_tokens *t, const char *g_s, struct store_vault_record *cur)
{
	enum cs_err e;
	struct vault_sealed sl = { NULL, 0, NULL, 0, NULL };
	char detail[DETAIL_MAX];
	int64_t now = x->rq->now;
	const struct consent *k = x->rq->k;

	if ((e = store_begin(x->c)) != CS_OK)
		return e;
	if ((e = store_vault_record_get(x->c, rec->id, cur)) != CS_OK)
		goto out;
	if ((e = vault_seal_pair(x->v->mk, &(struct vault_aad){ cur->id, cur->consent_id,
	    k->subject, k->resource }, t->access_token, t->refresh_token, &sl)) != CS_OK)
		goto out;
	if ((e = store_vault_record_refreshed(x->c, cur->id, &(struct store_vault_refresh){
	    .blobs = { .a = sl.access, .a_len = sl.access_len, .b = sl.refresh,
	        .b_len = sl.refresh_len, .master_kid = x->v->mk->kid },
	    .provider_scopes = g_s,
	    .access_expires_at = now + (t->expires_in > 0 ? t->expires_in : VAULT_DEFAULT_EXPIRES_IN) },
	    now)) != CS_OK)
		goto out;
	if ((e = str_fmt(detail, sizeof detail, "rotated=%s provider_scopes=%s",
	    t->refresh_token ? "yes" : "no", g_s)) != CS_OK)
		goto out;
	if ((e = rel_audit(x, &(struct audit_entry){ .action = "vault.refreshed", .scopes = g_s,
	    .consent_id = cur->consent_id, .outcome = "ok", .detail = detail })) != CS_OK)
		goto out;
out:
	e = store_end(x->c, e);
	blob_free(sl.access, sl.access_len);
	blob_free(sl.refresh, sl.refresh_len);
	return e;
}

/* The scopes the provider's refresh answer t grants (*g), within the record's
 * (invariant 8).  CS_EPERM when it grants more. */
static enum cs_err refresh_scopes(const struct store_vault_record *rec,
    const struct provider_tokens *t, struct scope_set *g)
{
	struct scope_set have;
	enum cs_err e;
	memset(&have, 0, sizeof have);
	if (set_parse(rec->provider_scopes, &have) != CS_OK)
		return CS_EDB;
	if (t->scope == NULL)
		e = set_parse(rec->provider_scopes, g);
	else if (scope_set_parse(t->scope, g) != CS_OK || !scope_set_subset(g, &have))
		e = CS_EPERM;
	else
		e = CS_OK;
	scope_set_clear(&have);
	return e;
}

/* One refresh of rec (the leader's): the provider is called outside any
 * transaction; the new tokens are stored in one.  *rec is re-read on CS_OK.
 * CS_EPERM (the consent marked reconnect_required) when the provider ended
 * the authorization or answered with more scopes; CS_EIO when it could not
 * be used; CS_ENOENT when the consent no longer holds the record. */
static enum cs_err do_refresh(const struct rel *x, struct store_vault_record *rec)
{
	enum cs_err e;
	char *rt = NULL, *g_s = NULL;
	struct provider_tokens t;
	struct scope_set g;
	struct store_vault_record cur, fresh;
	const struct consent *k = x->rq->k;

	memset(&t, 0, sizeof t);
	memset(&g, 0, sizeof g);
	memset(&cur, 0, sizeof cur);
	memset(&fresh, 0, sizeof fresh);
	if ((e = vault_record_open(x->v->mk, rec, k, NULL, &rt)) != CS_OK)
		goto out;
	if (rt == NULL) {                 /* the caller checked; defensive */
		e = CS_EPERM;
		goto out;
	}
	e = provider_refresh(x->p, rt, &t);
	if (e == CS_EPERM) {
		/* invalid_grant: the provider ended this authorization (perhaps by
		 * revoking another consent's tokens for the same user and client).
		 * After the upstream refused an access token that had not expired
		 * (a forced refresh), it was revoked at the provider: said so. */
		bool revoked = x->forced && rec->access_expires_at > x->rq->now;
		if ((e = mark_reconnect(x, revoked ? HEALTH_REVOKED : HEALTH_REFRESH_REFUSED,
		    revoked ? "refresh refused (invalid_grant) after the upstream refused the unexpired "
		    "access token: revoked at the provider" : "refresh refused (invalid_grant)")) == CS_OK)
			e = CS_EPERM;
		goto out;
	} else if (e != CS_OK) {
		e = e == CS_ENOMEM ? e : CS_EIO;
		goto out;
	}
	if (t.access_token == NULL || t.access_token[0] == '\0' || !is_bearer(t.token_type)) {
		vault_revoke_now(x->p, &t);
		log_msg(LOG_WARN, "vault: the provider's refresh answer is unusable");
		e = CS_EIO;
		goto out;
	}
	if ((e = refresh_scopes(rec, &t, &g)) == CS_EPERM) {
		/* SECURITY: invariant 8 holds on refresh too: a token with more
		 * scopes than the record's is revoked, never stored. */
		vault_revoke_now(x->p, &t);
		if ((e = mark_reconnect(x, HEALTH_MORE_SCOPES, "refresh answered with more scopes")) == CS_OK)
			e = CS_EPERM;
		goto out;
	}
	if (e == CS_OK && (g_s = scope_set_join(&g)) == NULL)
		e = CS_ENOMEM;
	if (e == CS_OK)
		e = refresh_store(x, rec, &t, g_s, &cur);
	if (e != CS_OK) {
		/* SECURITY: tokens that no record holds must not live on. */
		if (g_s != NULL)
			vault_revoke_now(x->p, &t);
		goto out;
	}
	if (strcmp(cur.consent_id, k->id) != 0) {
		e = CS_ENOENT;                /* k no longer holds the record */
		goto out;
	}
	if ((e = store_vault_record_get(x->c, rec->id, &fresh)) != CS_OK)
		goto out;
	store_vault_record_clear(rec);
	*rec = fresh;
	memset(&fresh, 0, sizeof fresh);
out:
	wipe_free(rt);
	free(g_s);
	provider_tokens_clear(&t);
	scope_set_clear(&g);
	store_vault_record_clear(&cur);
	store_vault_record_clear(&fresh);
	return e;
}

/* The wait of record_id, or NULL.  Called with the vault's mutex held. */
static struct refresh_wait **wait_find(struct vault *v, const char *record_id)
{
	for (struct refresh_wait **w = &v->waits; *w != NULL; w = &(*w)->next)
		if (strcmp((*w)->record_id, record_id) == 0)
			return w;
	return NULL;
}

/* true when record_id's refresh is to wait (a transient failure before). */
static bool refresh_deferred(struct vault *v, const char *record_id, int64_t now)
{
	struct refresh_wait **w;
	bool defer;
	pthread_mutex_lock(&v->mu);
	w = wait_find(v, record_id);
	defer = w != NULL && now < (*w)->until;
	pthread_mutex_unlock(&v->mu);
	return defer;
}

/* After a refresh of record_id with result e: a transient failure (CS_EIO)
 * sets or doubles its wait; any other result ends it. */
static void refresh_outcome(struct vault *v, const char *record_id, enum cs_err e, int64_t now)
{
	struct refresh_wait **w, *n;
	size_t count = 0;
	pthread_mutex_lock(&v->mu);
	w = wait_find(v, record_id);
	if (e != CS_EIO) {
		if (w != NULL) {
			n = *w;
			*w = n->next;
			free(n->record_id);
			free(n);
		}
		goto out;
	}
	if (w == NULL) {
		for (n = v->waits; n != NULL; n = n->next)
			count++;
		/* Bounded: past the cap a failing record simply retries at once. */
		if (count >= REFRESH_WAITS_MAX || (n = calloc(1, sizeof *n)) == NULL)
			goto out;
		if ((n->record_id = strdup(record_id)) == NULL) {
			free(n);
			goto out;
		}
		n->next = v->waits;
		v->waits = n;
		w = &v->waits;
	}
	n = *w;
	n->failures++;
	int64_t d = REFRESH_BACKOFF_BASE;
	for (int64_t i = 1; i < n->failures && d < REFRESH_BACKOFF_MAX; i++)
		d *= 2;
	n->until = now + (d < REFRESH_BACKOFF_MAX ? d : REFRESH_BACKOFF_MAX);
out:
	pthread_mutex_unlock(&v->mu);
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
static enum cs_err refresh_single(const struct rel *x, int64_t margin,
    struct store_vault_record *rec)
{
	enum cs_err e;
	struct inflight *f;
	struct store_vault_record cur;
	struct vault *v = x->v;
	const struct consent *k = x->rq->k;

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
			enum cs_err e2 = store_vault_record_by_consent(x->c, k->id, &cur);
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
	 * and refresh only if the record still needs it.  SECURITY: the same
	 * holds across the nodes sharing a database: the flight lock makes one
	 * of them refresh, and the others, once it lets go, read its result
	 * (a refresh token used twice may end the grant at the provider). */
	e = store_flight_begin(x->c, rec->id);
	if (e == CS_OK)
		e = store_vault_record_by_consent(x->c, k->id, &cur);
	if (e == CS_OK) {
		store_vault_record_clear(rec);
		*rec = cur;
		if (rec->access_expires_at - x->rq->now > margin)
			e = CS_OK;
		else if (rec->refresh_sealed == NULL)
			e = CS_EIO;               /* nothing to refresh with (cannot be: checked) */
		else if (refresh_deferred(v, rec->id, x->rq->now))
			e = CS_EIO;               /* failed transiently just before: wait (backoff) */
		else {
			const struct config_resource *r = config_resource(x->cfg, k->resource);
			e = do_refresh(x, rec);
			refresh_outcome(v, rec->id, e, x->rq->now);
			/* revoked: the provider ended the authorization (or widened it) */
			metrics_inc2(M_VAULT_REFRESHES, r != NULL ? r->id : "other",
			    e == CS_OK ? "ok" : e == CS_EPERM ? "revoked" : "error");
		}
	}
	store_flight_end(x->c);

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

/* The release's one transaction: the approval (if any) is used up, the
 * release audited and the caller's own writes (rq->with) made together.  An approval refused meanwhile keeps its refusal
 * entry and records no release (VAULT_RELEASE_APPROVAL_USED in *oc). */
static enum cs_err release_commit(const struct rel *x, const struct store_vault_record *rec,
    const char *outcome, enum vault_release_outcome *oc)
{
	enum cs_err e;
	char detail[DETAIL_MAX];
	const struct vault_release_req *rq = x->rq;
	enum approval_redeem_outcome ro = APPROVAL_REDEEMED;
	bool counted = false;
	if ((e = str_fmt(detail, sizeof detail, "action=%s%s%s%s%s", rq->action,
	    rq->approval_id ? "; approval=" : "", rq->approval_id ? rq->approval_id : "",
	    rq->decided_by ? "; approved_by=" : "", rq->decided_by ? rq->decided_by : "")) != CS_OK)
		return e;
	if ((e = store_begin(x->c)) != CS_OK)
		return e;
	/* SECURITY: the consent is checked again in the release's own transaction:
	 * the caller's snapshot may predate a revocation that committed since (on
	 * another node, too; SERIALIZABLE makes this read part of what conflicts
	 * with such a revocation, and a run after the conflict sees it). */
	{
		int live = 0;
		if ((e = store_approval_consent_live(x->c, rq->k->id, rq->now, &live)) != CS_OK) {
			store_rollback(x->c);
			return e;
		}
		if (!live) {
			store_rollback(x->c);
			*oc = VAULT_RELEASE_GONE;
			return CS_OK;
		}
	}
	/* SECURITY: invariant 9 -- used once, in the transaction of its release. */
	if (rq->approval_id != NULL)
		e = approval_redeem(x->c, x->cfg, rq->approval_id, rq->actor, rq->now, &ro);
	else if (rq->rule_id != NULL && (e = standing_use(x->c, rq->rule_id, rq->k, rq->action,
	    rq->actor, rq->now, &counted)) == CS_OK && !counted)
		ro = APPROVAL_NOT_REDEEMABLE;
	if (e == CS_OK && ro == APPROVAL_REDEEMED)
		e = rel_audit(x, &(struct audit_entry){ .action = "vault.released",
		    .scopes = rec->provider_scopes, .consent_id = rq->k->id, .outcome = outcome,
		    .detail = detail });
	/* A token released is a use of its consent (/me's "last used"). */
	if (e == CS_OK && ro == APPROVAL_REDEEMED)
		e = consent_touch(x->c, rq->k->id, rq->now);
	if (e == CS_OK && ro == APPROVAL_REDEEMED && rq->with != NULL)
		e = rq->with(x->c, rq->with_ctx);
	if ((e = store_end(x->c, e)) == CS_OK) {
		*oc = ro == APPROVAL_REDEEMED ? VAULT_RELEASED : VAULT_RELEASE_APPROVAL_USED;
		/* Counted once committed: a run rolled back (the caller's writes
		 * failed) or run again after a conflict used nothing. */
		if (rq->approval_id != NULL)
			approval_redeem_counted(ro);
	}
	return e;
}

/* The record's access token made current for the release: refreshed first
 * when within margin of expiry.  *outcome is "refresh_failed" when a
 * transient failure leaves a token that still works; *oc is set (and CS_OK
 * returned) when nothing can be released. */
static enum cs_err release_fresh(const struct rel *x, int64_t margin,
    struct store_vault_record *rec, const char **outcome, enum vault_release_outcome *oc)
{
	enum cs_err e;
	int64_t now = x->rq->now;
	if (rec->access_expires_at - now > margin)
		return CS_OK;
	if (rec->refresh_sealed == NULL) {
		if (rec->access_expires_at > now)
			return CS_OK;
		/* Expired, and nothing to refresh it with: only a new connection helps. */
		if ((e = mark_reconnect(x, HEALTH_EXPIRED, "access token expired; no refresh token")) == CS_OK)
			*oc = VAULT_RELEASE_GONE;
		return e;
	}
	e = refresh_single(x, margin, rec);
	/* Our call: a transient failure (CS_EIO) still releases an access token
	 * that has not expired -- it works until then, and the next release tries
	 * the refresh again.  An expired one is never released. */
	if (e == CS_EIO && rec->access_expires_at > now) {
		*outcome = "refresh_failed";
		return CS_OK;
	}
	if (e == CS_EIO || e == CS_EPERM || e == CS_ENOENT) {
		*oc = e == CS_EIO ? VAULT_RELEASE_UNAVAILABLE : VAULT_RELEASE_GONE;
		return CS_OK;
	}
	return e;
}

static enum cs_err release(struct vault *v, struct store_conn *c, const struct config *cfg,
    const struct vault_release_req *rq, bool force, struct vault_release *out)
{
	enum cs_err e;
	struct store_vault_record rec;
	struct vault_release rl;
	const struct config_resource *res;
	const char *outcome = "ok";
	const struct consent *k = rq != NULL ? rq->k : NULL;
	struct rel x = { v, c, cfg, rq, NULL, force };
	bool key = false;

	memset(&rec, 0, sizeof rec);
	memset(&rl, 0, sizeof rl);
	if (v == NULL || c == NULL || cfg == NULL || k == NULL || k->id == NULL ||
	    k->subject == NULL || k->resource == NULL || rq->action == NULL || out == NULL)
		return CS_EINVAL;
	memset(out, 0, sizeof *out);
	out->outcome = VAULT_RELEASE_GONE;
	/* The caller validated a grant of k; the consent may still have lost its
	 * provider connection since.  An API key has no provider (vault_key.h). */
	if ((res = config_resource(cfg, k->resource)) == NULL ||
	    (!(key = res->credential == CREDENTIAL_API_KEY) &&
	    (x.p = vault_provider(v, k->resource)) == NULL) ||
	    !consent_is_live(k, rq->now) || k->reconnect_required)
		return CS_OK;
	if ((e = store_vault_record_by_consent(c, k->id, &rec)) != CS_OK) {
		if (e == CS_ENOENT)
			e = CS_OK;
		goto out;
	}
	rl.outcome = VAULT_RELEASE_TOO_SOON;
	if (force && rq->now - rec.updated_at < VAULT_FORCED_REFRESH_MIN)
		goto done;
	if ((e = kid_ok(v->mk, rec.master_kid)) != CS_OK)
		goto out;
	rl.outcome = VAULT_RELEASE_GONE;
	if (key ? strcmp(rec.token_type, VAULT_KEY_TOKEN_TYPE) != 0 : !is_bearer(rec.token_type))
		goto done;
	/* A forced refresh (the provider refused the token) treats the token as
	 * due: a margin beyond any lifetime.  Bounded so that expiry - now never
	 * overflows against it.  A key has nothing to refresh it with. */
	rl.outcome = key && force ? VAULT_RELEASE_TOO_SOON : VAULT_RELEASED;
	if (!key && (e = release_fresh(&x, force ? INT64_MAX / 4 : res->refresh_margin, &rec,
	    &outcome, &rl.outcome)) != CS_OK)
		goto done;
	if (rl.outcome != VAULT_RELEASED)
		goto done;
	/* SECURITY: never an access token past its expiry, whatever path led
	 * here (a follower reading another release's refresh included). */
	if (rec.access_expires_at <= rq->now) {
		rl.outcome = VAULT_RELEASE_UNAVAILABLE;
		goto done;
	}
	/* SECURITY: invariant 2 -- only the access token leaves, never the refresh token. */
	if ((e = vault_record_open(v->mk, &rec, k, &rl.access_token, NULL)) != CS_OK)
		goto out;
	if ((rl.token_type = strdup(rec.token_type)) == NULL ||
	    (rl.scope = strdup(rec.provider_scopes)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	rl.expires_in = rec.access_expires_at - rq->now;
	/* Invariant 10: the release is audited before the token is handed out.
	 * One transaction with no effect outside the database: run again when
	 * another node's conflicted with it (the run after sees the approval it
	 * raced for used, and refuses). */
	{
		int tries = 0;
		do
			e = release_commit(&x, &rec, outcome, &rl.outcome);
		while (store_retry(x.c, e, &tries));
	}
	if (e != CS_OK)
		goto out;
	if (rl.outcome == VAULT_RELEASED)
		metrics_inc(M_VAULT_RELEASES, res->id);
done:
	if (e == CS_OK && rl.outcome != VAULT_RELEASED) {
		enum vault_release_outcome o = rl.outcome;
		vault_release_clear(&rl);
		rl.outcome = o;
	}
	if (e == CS_OK) {
		*out = rl;
		memset(&rl, 0, sizeof rl);
	}
out:
	vault_release_clear(&rl);
	store_vault_record_clear(&rec);
	return e;
}

enum cs_err vault_release(struct vault *v, struct store_conn *c, const struct config *cfg,
    const struct vault_release_req *rq, struct vault_release *out)
{
	if (rq == NULL || rq->approval_id != NULL)
		return CS_EINVAL;
	return release(v, c, cfg, rq, false, out);
}

enum cs_err vault_release_approved(struct vault *v, struct store_conn *c,
    const struct config *cfg, const struct vault_release_req *rq, struct vault_release *out)
{
	if (rq == NULL || rq->approval_id == NULL)
		return CS_EINVAL;
	return release(v, c, cfg, rq, false, out);
}

enum cs_err vault_release_refreshed(struct vault *v, struct store_conn *c,
    const struct config *cfg, const struct vault_release_req *rq, struct vault_release *out)
{
	if (rq == NULL || rq->approval_id != NULL)
		return CS_EINVAL;
	return release(v, c, cfg, rq, true, out);
}

/* --- refresh ahead of expiry ([resource.NAME] proactive_refresh) -------- */

#define AHEAD_SCAN 100                  /* records read per resource and pass */
#define AHEAD_MAX  20                   /* refreshes tried per resource and pass */

/* One due record of resource r (whose provider is p): refreshed as a release
 * would, single-flight across threads and nodes, audited by "system". */
static enum cs_err ahead_one(struct vault *v, struct store_conn *c,
    const struct config_resource *r, struct provider *p, struct store_vault_record *rec,
    int64_t now, bool *tried)
{
	enum cs_err e;
	struct consent k;
	*tried = false;
	memset(&k, 0, sizeof k);
	if ((e = consent_get(c, rec->consent_id, now, &k)) != CS_OK)
		return e == CS_ENOENT ? CS_OK : e;
	/* Read again: revoked, marked or made online since the list was read. */
	if (consent_is_live(&k, now) && k.offline && !k.reconnect_required) {
		const struct vault_release_req rq = { .k = &k, .action = "refresh_ahead",
			.actor = "system", .now = now };
		const struct rel x = { v, c, v->cfg, &rq, p, false };
		*tried = true;
		e = refresh_single(&x, r->refresh_margin, rec);
		/* Transient (backoff), refused (marked, with its event) or moved:
		 * each is recorded where it happened; the pass goes on. */
		if (e == CS_EIO || e == CS_EPERM || e == CS_ENOENT)
			e = CS_OK;
	}
	consent_clear(&k);
	return e;
}

enum cs_err vault_refresh_ahead(struct vault *v, struct store_conn *c, int64_t now,
    int *tried)
{
	enum cs_err e, first = CS_OK;
	if (v == NULL || c == NULL || tried == NULL)
		return CS_EINVAL;
	*tried = 0;
	for (size_t i = 0; i < v->cfg->nresources; i++) {
		const struct config_resource *r = &v->cfg->resources[i];
		struct provider *p = vault_provider(v, r->id);
		struct store_vault_record *recs = NULL;
		size_t n = 0;
		int count = 0;
		if (!r->proactive_refresh || p == NULL)
			continue;
		if ((e = store_vault_records_due(c, r->id, now + r->refresh_margin, now, AHEAD_SCAN,
		    &recs, &n)) != CS_OK) {
			if (first == CS_OK)
				first = e;
			continue;
		}
		for (size_t j = 0; j < n && count < AHEAD_MAX; j++) {
			bool one = false;
			/* Waiting out a transient failure: not asked again before its time. */
			if (refresh_deferred(v, recs[j].id, now))
				continue;
			if ((e = ahead_one(v, c, r, p, &recs[j], now, &one)) != CS_OK && first == CS_OK)
				first = e;
			count += one ? 1 : 0;
		}
		*tried += count;
		store_vault_records_free(recs, n);
	}
	return first;
}

enum cs_err vault_site(struct store_conn *c, const char *consent_id, char **out)
{
	enum cs_err e;
	struct store_vault_record rec;
	size_t n;
	if (c == NULL || consent_id == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_vault_record_by_consent(c, consent_id, &rec)) != CS_OK)
		return e;
	n = rec.sites != NULL ? strcspn(rec.sites, ",") : 0;
	if (n == 0)
		e = CS_ENOENT;
	else if ((*out = strndup(rec.sites, n)) == NULL)
		e = CS_ENOMEM;
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

/* Where one outbox entry stands while it is worked. */
struct outbox_try {
	bool cannot;          /* nothing (more) can be sent: no provider, unreadable, refused */
	bool unreachable;     /* the provider did not answer the refresh token's revocation */
	bool r_cannot;        /* the provider cannot name a refresh token */
	bool expired;         /* the access token expired (or there is none to revoke) */
};

/* The entry's provider and its tokens opened into *access and *refresh;
 * NULL (t->cannot) when there is nothing to send them to. */
static struct provider *outbox_open(struct vault *v, struct store_vault_outbox *o,
    struct outbox_try *t, char **access, char **refresh)
{
	struct provider *p = vault_provider(v, o->resource);
	if (p == NULL && vault_key_resource(v, o->resource)) {
		/* An API key: nothing to revoke anywhere, erased at once. */
		t->cannot = t->expired = true;
	} else if (p == NULL) {
		t->cannot = true;             /* the resource lost its provider */
	} else if (vault_open_pair(v->mk, &(struct vault_aad){ o->record_id, o->consent_id,
	    o->subject, o->resource }, &(struct vault_sealed){ o->access_sealed,
	    o->access_sealed_len, o->refresh_sealed, o->refresh_sealed_len, o->master_kid },
	    access, refresh) != CS_OK) {
		t->cannot = true;             /* unreadable: nothing to send */
		log_msg(LOG_WARN, "vault: an outbox entry could not be opened");
	}
	return p;
}

/* The provider is called outside any transaction; each success is
 * recorded at once so that a crash does not repeat it. */
static enum cs_err outbox_revoke(struct store_conn *c, struct provider *p,
    struct store_vault_outbox *o, const char *access, const char *refresh, struct outbox_try *t)
{
	enum cs_err e;
	if (!t->cannot && refresh != NULL && !o->refresh_revoked) {
		e = provider_revoke(p, refresh, "refresh_token");
		if (e == CS_OK) {
			o->refresh_revoked = 1;
			if ((e = store_vault_outbox_mark(c, o->id, 1, 0)) != CS_OK)
				return e;
		} else if (e == CS_ENOENT) {
			/* This provider cannot name a refresh token (GitHub, Slack
			 * revoke access tokens only; Microsoft, Atlassian nothing):
			 * the access token is still revoked where it can be. */
			t->r_cannot = true;
		} else {
			t->unreachable = true;
		}
	}
	if (!t->cannot && !t->unreachable && !o->access_revoked && !t->expired) {
		e = provider_revoke(p, access, "access_token");
		if (e == CS_OK) {
			o->access_revoked = 1;
			if ((e = store_vault_outbox_mark(c, o->id, 0, 1)) != CS_OK)
				return e;
		} else if (e == CS_ENOENT) {
			t->cannot = true;
		}
	}
	return CS_OK;
}

/* Erases the entry with its vault.revoked entry, or schedules its retry
 * with a vault.revoke_retry entry, in one transaction; *finished 1 when
 * it was erased. */
static enum cs_err outbox_settle(struct store_conn *c, const struct store_vault_outbox *o,
    int64_t now, const struct outbox_try *t, int *finished)
{
	enum cs_err e;
	char detail[DETAIL_MAX];
	bool rdone = o->refresh_sealed == NULL || o->refresh_revoked || t->r_cannot;
	bool adone = o->access_revoked || t->expired;
	/* Erased when both are revoked (or there was no refresh token), or when
	 * the access token expired and the refresh token is revoked; a provider
	 * that cannot revoke: once the access token expired. */
	bool done = (rdone && adone) || (t->cannot && t->expired);

	if ((e = store_begin(c)) != CS_OK)
		return e;
	if (done) {
		if ((e = str_fmt(detail, sizeof detail, "record=%s refresh=%s access=%s", o->record_id,
		    o->refresh_sealed == NULL ? "none" : o->refresh_revoked ? "revoked" :
		    t->r_cannot && !t->cannot ? "not_revocable" : "expired",
		    o->access_revoked ? "revoked" : "expired")) != CS_OK ||
		    (e = store_vault_outbox_delete(c, o->id)) != CS_OK ||
		    (e = audit_append(c, &(struct audit_entry){ .ts = now, .actor = "system",
		    .action = "vault.revoked", .subject = o->subject, .resource = o->resource,
		    .consent_id = o->consent_id, .outcome = o->access_revoked && rdone ? "ok" : "expired",
		    .detail = detail })) != CS_OK)
			goto rollback;
	} else {
		int64_t attempts = o->attempts + 1;
		if ((e = str_fmt(detail, sizeof detail, "record=%s attempt=%lld%s", o->record_id,
		    (long long)attempts, t->cannot ? " cannot_revoke" : "")) != CS_OK ||
		    (e = store_vault_outbox_retry(c, o->id, attempts, now + backoff(attempts))) != CS_OK ||
		    (e = audit_append(c, &(struct audit_entry){ .ts = now, .actor = "system",
		    .action = "vault.revoke_retry", .subject = o->subject, .resource = o->resource,
		    .consent_id = o->consent_id, .outcome = "retry", .detail = detail })) != CS_OK)
			goto rollback;
	}
	if ((e = store_commit(c)) != CS_OK)
		goto rollback;
	*finished = done ? 1 : 0;
	return CS_OK;
rollback:
	store_rollback(c);
	return e;
}

/* Works one entry; *finished 1 when it was erased. */
static enum cs_err outbox_one(struct vault *v, struct store_conn *c,
    struct store_vault_outbox *o, int64_t now, int *finished)
{
	enum cs_err e;
	char *access = NULL, *refresh = NULL;
	struct outbox_try t = { .expired = o->access_expires_at <= now };
	struct provider *p;

	*finished = 0;
	p = outbox_open(v, o, &t, &access, &refresh);
	if ((e = outbox_revoke(c, p, o, access, refresh, &t)) == CS_OK)
		e = outbox_settle(c, o, now, &t, finished);
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
	*finished = 0;
	/* SECURITY: claimed in transactions of their own, a few at a time, so
	 * that of many nodes sharing the outbox one calls the provider for each
	 * entry (a node that dies mid-pass leaves its claim due again when the
	 * lease ends: a revocation is idempotent at the provider). */
	for (size_t done = 0; done < OUTBOX_BATCH; done += n) {
		due = NULL;
		n = 0;
		if ((e = store_begin(c)) != CS_OK)
			return e;
		if ((e = store_vault_outbox_claim(c, now, VAULT_OUTBOX_LEASE, OUTBOX_CLAIM, &due,
		    &n)) != CS_OK || (e = store_commit(c)) != CS_OK) {
			store_rollback(c);
			store_vault_outbox_free(due, n);
			return first != CS_OK ? first : e;
		}
		for (size_t i = 0; i < n; i++) {
			int one = 0;
			/* One entry's failure does not hold up the others. */
			if ((e = outbox_one(v, c, &due[i], now, &one)) != CS_OK && first == CS_OK)
				first = e;
			count += one;
		}
		store_vault_outbox_free(due, n);
		*finished = count;
		if (n < OUTBOX_CLAIM)
			break;
	}
	return first;
}
