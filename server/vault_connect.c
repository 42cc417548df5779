/* vault_connect.c -- connecting a provider (docs/architecture.md flows B + D): the
 * authorize URL with PKCE S256 and a single-use state, and the callback that
 * exchanges the code, checks what the provider granted and makes the consent
 * live with its sealed record in one transaction.  It must never exchange a
 * code for another session than the one that began, keep a token holding more
 * than its consent maps to, or wait for a provider inside a transaction. */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "audit.h"
#include "b64.h"
#include "buf.h"
#include "form.h"
#include "session.h"
#include "store_consent.h"
#include "health.h"
#include "metrics.h"
#include "vault_connect.h"
#include "vault_priv.h"

#define RECORD_ID_LEN VAULT_RECORD_ID_LEN
#define URL_MAX 8192                    /* the authorize URL */
#define DETAIL_MAX (4096 + 1)           /* audit.c's longest field, and its NUL */

/* What one connect call works with. */
struct cx {
	struct vault              *v;
	struct store_conn         *c;
	const struct config       *cfg;
	const struct vault_person *who;
};

/* --- small helpers ------------------------------------------------------ */

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

/* consent_decide_tx as this file calls it: CS_OK with *o, and *nid on
 * CONSENT_DECIDED. */
static enum cs_err decide_in_tx_o(struct store_conn *c, const struct config *cfg,
    const char *request_id, const struct consent_actor *who, const struct consent_decision *d,
    enum consent_decide_outcome *o, char **nid)
{
	struct consent_decided got = { CONSENT_DECIDE_UNKNOWN, NULL };
	enum cs_err e = consent_decide_tx(c, cfg, request_id, who, d, &got);
	if (e == CS_OK) {
		*o = got.outcome;
		if (got.outcome == CONSENT_DECIDED) {
			*nid = got.consent_id;
			got.consent_id = NULL;
		}
	}
	consent_decided_clear(&got);
	return e;
}

/* decide_in_tx_o for the callback, whose decision was checked when the
 * person left: a refusal now is decide_err's. */
static enum cs_err decide_in_tx(struct store_conn *c, const struct config *cfg,
    const char *request_id, const struct consent_actor *who, const struct consent_decision *d,
    char **nid)
{
	enum consent_decide_outcome o = CONSENT_DECIDE_UNKNOWN;
	enum cs_err e = decide_in_tx_o(c, cfg, request_id, who, d, &o, nid);
	return e != CS_OK ? e : decide_err(o);
}

/* Record ids are b64url_random_id's. */
_Static_assert(VAULT_RECORD_ID_LEN == B64URL_ID_LEN, "VAULT_RECORD_ID_LEN is B64URL_ID_LEN");

/* PKCE S256 (RFC 7636 §4.2): BASE64URL(SHA256(ASCII(code_verifier))). */
static enum cs_err pkce_challenge(const char *verifier, char out[64])
{
	unsigned char digest[32];
	unsigned int dlen = sizeof digest;
	if (EVP_Digest(verifier, strlen(verifier), digest, &dlen, EVP_sha256(), NULL) != 1 ||
	    dlen != sizeof digest)
		return CS_ECRYPTO;
	return b64url_encode(digest, sizeof digest, out, 64);
}

static bool set_equal(const struct scope_set *a, const struct scope_set *b)
{
	return scope_set_subset(a, b) && scope_set_subset(b, a);
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

/* --- begin -------------------------------------------------------------- */

void vault_begin_clear(struct vault_begin *b)
{
	if (b == NULL)
		return;
	free(b->authorize_url);
	free(b->consent_id);
	memset(b, 0, sizeof *b);
}

/* Ends the transaction of a decision made with the connection: commits it
 * (rolled back when the commit fails), counts the approval and hands the new
 * consent's id over from *nid to *new_id. */
static enum cs_err commit_decided(const struct cx *x, char **nid, char **new_id)
{
	enum cs_err e = store_commit(x->c);
	if (e != CS_OK) {
		store_rollback(x->c);
		return e;
	}
	metrics_inc(M_CONSENT_REQUESTS, "approved");   /* decided with the connection */
	*new_id = *nid;
	*nid = NULL;
	return CS_OK;
}

/* The record of live consent k moves to the new consent the decision makes,
 * in one transaction (flow B's exception).  *o is the decision's outcome;
 * nothing is written unless it is CONSENT_DECIDED (then *new_id). */
static enum cs_err move_record(const struct cx *x, const struct consent_request *r,
    const struct consent *k, const char *record_id, const struct consent_decision *d,
    enum consent_decide_outcome *o, char **new_id)
{
	enum cs_err e;
	bool in_tx = false;
	struct store_vault_record rec;
	struct vault_sealed sl = { NULL, 0, NULL, 0, NULL };
	char *nid = NULL, *access = NULL, *refresh = NULL;
	char detail[DETAIL_MAX];
	int64_t now = x->who->now;

	memset(&rec, 0, sizeof rec);
	if ((e = store_begin(x->c)) != CS_OK)
		return e;
	in_tx = true;
	/* Re-read inside the transaction: nothing moved it since we looked. */
	if ((e = store_vault_record_get(x->c, record_id, &rec)) != CS_OK)
		goto out;
	if (strcmp(rec.consent_id, k->id) != 0 || rec.reserved_for != NULL) {
		e = CS_EBUSY;
		goto out;
	}
	/* Reserved: the cascade that revokes k leaves this record alone. */
	if ((e = store_vault_record_reserve(x->c, rec.id, r->id, now)) != CS_OK ||
	    (e = decide_in_tx_o(x->c, x->cfg, r->id, &(struct consent_actor){
	    .user_id = x->who->user_id, .actor = x->who->actor, .now = now }, d, o, &nid)) != CS_OK ||
	    *o != CONSENT_DECIDED ||
	    (e = vault_record_open(x->v->mk, &rec, k, &access, &refresh)) != CS_OK)
		goto out;
	/* Re-sealed under the new consent id, with fresh nonces. */
	if ((e = vault_seal_pair(x->v->mk, &(struct vault_aad){ rec.id, nid, r->subject,
	    r->resource }, access, refresh, &sl)) != CS_OK ||
	    (e = store_vault_record_move(x->c, rec.id, nid, &(struct store_sealed_blobs){
	    .a = sl.access, .a_len = sl.access_len, .b = sl.refresh, .b_len = sl.refresh_len,
	    .master_kid = x->v->mk->kid }, now)) != CS_OK)
		goto out;
	if ((e = str_fmt(detail, sizeof detail, "from=%s provider_scopes=%s", k->id,
	    rec.provider_scopes)) != CS_OK ||
	    (e = audit_append(x->c, &(struct audit_entry){ .ts = now, .actor = x->who->actor,
	    .action = "vault.record.moved", .subject = r->subject, .agent = r->agent,
	    .resource = r->resource, .scopes = rec.provider_scopes, .consent_id = nid,
	    .request_id = r->id, .outcome = "ok", .detail = detail })) != CS_OK)
		goto out;
	in_tx = false;
	e = commit_decided(x, &nid, new_id);
out:
	if (in_tx)
		store_rollback(x->c);
	free(nid);
	wipe_free(access);
	wipe_free(refresh);
	blob_free(sl.access, sl.access_len);
	blob_free(sl.refresh, sl.refresh_len);
	store_vault_record_clear(&rec);
	return e;
}

/* When the live consent's record serves exactly mapping m (unreserved, under
 * the running master key), it moves to the consent d makes: *moved, *new_id;
 * *o is the decision's outcome when it was tried (else left as it was). */
static enum cs_err try_move(const struct cx *x, const struct consent_request *r,
    const struct consent_decision *d, const struct scope_set *m,
    enum consent_decide_outcome *o, char **new_id, bool *moved)
{
	enum cs_err e;
	struct consent live;
	struct store_vault_record rec;
	struct scope_set have = { .n = 0 };
	bool have_rec = false;

	memset(&live, 0, sizeof live);
	memset(&rec, 0, sizeof rec);
	*moved = false;
	e = consent_current(x->c, x->who->user_id, r->agent, r->resource, x->who->now, &live);
	if (e == CS_ENOENT) {
		e = CS_OK;
		goto out;
	} else if (e != CS_OK) {
		goto out;
	}
	if (!live.reconnect_required) {
		e = store_vault_record_by_consent(x->c, live.id, &rec);
		if (e == CS_OK)
			have_rec = true;
		else if (e != CS_ENOENT)
			goto out;
	}
	e = CS_OK;
	if (have_rec && rec.reserved_for == NULL && strcmp(rec.master_kid, x->v->mk->kid) == 0 &&
	    set_parse(rec.provider_scopes, &have) == CS_OK && set_equal(&have, m) &&
	    (e = move_record(x, r, &live, rec.id, d, o, new_id)) == CS_OK &&
	    *o == CONSENT_DECIDED)
		*moved = true;
out:
	scope_set_clear(&have);
	store_vault_record_clear(&rec);
	consent_clear(&live);
	return e;
}

struct authz {                    /* what the authorize URL asks for */
	const char *redirect, *scope, *state, *challenge;
	const struct provider_authz *syntax;   /* the provider's (its preset's) */
};

/* a->scope (space-separated) in the provider's syntax: its separator, and
 * its offline-access scope added when the mapping asks for anything. */
static enum cs_err scope_words(const struct authz *a, char **out)
{
	char *s;
	const char *extra = a->syntax->extra_scope;
	size_t n = strlen(a->scope), k = extra != NULL && n > 0 ? strlen(extra) + 1 : 0;
	if ((s = malloc(n + k + 1)) == NULL)
		return CS_ENOMEM;
	memcpy(s, a->scope, n + 1);
	for (char *c = s; *c; c++)
		if (*c == ' ')
			*c = a->syntax->scope_sep;
	if (k > 0) {
		s[n] = a->syntax->scope_sep;
		memcpy(s + n + 1, extra, k);
	}
	*out = s;
	return CS_OK;
}

/* The provider's authorize URL for a->scope, with state and PKCE S256, and
 * the provider's own parameters (offline access, audience). */
static enum cs_err authorize_url(const struct config_resource *res,
    const struct provider_meta *meta, const struct authz *a, char **out)
{
	enum cs_err e;
	struct buf b;
	char *scope = NULL;
	const char *names[] = { "client_id", "redirect_uri", a->syntax->scope_param, "state",
	    "code_challenge" };
	const char *values[] = { res->provider_client_id, a->redirect, NULL, a->state,
	    a->challenge };
	if (meta->authorization_endpoint == NULL || res->provider_client_id == NULL)
		return CS_EINVAL;
	if ((e = scope_words(a, &scope)) != CS_OK)
		return e;
	values[2] = scope;
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
	if (a->syntax->extra_params != NULL &&
	    ((e = buf_puts(&b, "&")) != CS_OK || (e = buf_puts(&b, a->syntax->extra_params)) != CS_OK))
		goto out;
	if ((*out = buf_steal(&b)) == NULL)
		e = CS_ENOMEM;
out:
	free(scope);
	buf_clear(&b);
	return e;
}

/* The person connects at the provider with exactly mapping m: the connect
 * state is stored and *url is where the browser goes. */
static enum cs_err connect_state(const struct cx *x, const struct consent_request *r,
    const struct consent_decision *d, const struct scope_set *m, char **url)
{
	enum cs_err e;
	struct store_vault_connect cs;
	const struct provider_meta *meta = NULL;
	const struct config_resource *res = config_resource(x->cfg, r->resource);
	char state[SESSION_TOKEN_LEN + 1], verifier[SESSION_TOKEN_LEN + 1], challenge[64];
	char *m_s = NULL, *sel_s = NULL, *redirect = NULL, *u = NULL;
	struct provider_authz syntax;

	memset(&cs, 0, sizeof cs);
	memset(state, 0, sizeof state);
	memset(verifier, 0, sizeof verifier);
	provider_authz(vault_provider(x->v, r->resource), &syntax);
	if ((e = provider_meta(vault_provider(x->v, r->resource), &meta)) != CS_OK)
		goto out;
	if ((m_s = scope_set_join(m)) == NULL || (sel_s = scope_set_join(&d->selected)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	if ((e = redirect_uri(x->cfg, r->resource, &redirect)) != CS_OK ||
	    (e = random_token(state)) != CS_OK || (e = random_token(verifier)) != CS_OK ||
	    (e = pkce_challenge(verifier, challenge)) != CS_OK ||
	    (e = authorize_url(res, meta, &(struct authz){ redirect, m_s, state, challenge,
	    &syntax }, &u)) != CS_OK)
		goto out;
	/* SECURITY: the state is stored only as its hash; the decision waits
	 * here, bound to this session, and nothing else changes until the callback. */
	sha256_str(state, cs.state_hash);
	memcpy(cs.session_hash, x->who->session_hash, 32);
	cs.user_id = x->who->user_id;
	cs.request_id = r->id;
	cs.resource = r->resource;
	cs.provider_issuer = meta->issuer;
	cs.code_verifier = verifier;
	cs.selected = sel_s;
	cs.duration = d->duration;
	cs.offline = d->offline;
	cs.provider_scopes = m_s;
	cs.request_version = (char *)d->version;
	cs.created_at = x->who->now;
	cs.expires_at = x->who->now + VAULT_CONNECT_TTL;
	if ((e = store_vault_connect_purge(x->c, x->who->now)) != CS_OK ||
	    (e = store_vault_connect_insert(x->c, &cs)) != CS_OK)
		goto out;
	*url = u;
	u = NULL;
out:
	OPENSSL_cleanse(state, sizeof state);
	OPENSSL_cleanse(verifier, sizeof verifier);
	free(m_s);
	free(sel_s);
	free(redirect);
	free(u);
	return e;
}

enum cs_err vault_begin_connect(struct vault *v, struct store_conn *c, const struct config *cfg,
    const struct vault_person *who, const struct vault_decision *in, struct vault_begin *out)
{
	enum cs_err e;
	struct consent_request r;
	struct scope_set m = { .n = 0 };
	struct vault_begin b = { NULL, NULL, CONSENT_DECIDED };
	const struct consent_decision *d;
	const struct cx x = { v, c, cfg, who };
	bool moved = false;

	memset(&r, 0, sizeof r);
	if (v == NULL || c == NULL || cfg == NULL || who == NULL || who->session_hash == NULL ||
	    in == NULL || in->request_id == NULL || in->decision == NULL || out == NULL)
		return CS_EINVAL;
	d = in->decision;
	if ((e = consent_request_get(c, in->request_id, &r)) != CS_OK)
		goto out;
	/* SECURITY: the same checks as consent_decide, before the person is sent
	 * anywhere (invariant 4: only the requested person decides). */
	b.outcome = CONSENT_DECIDE_UNKNOWN;
	if ((e = consent_decision_check(cfg, &r, who->user_id, d, who->now, &b.outcome)) != CS_OK)
		goto out;
	if (b.outcome == CONSENT_DECIDE_UNKNOWN) {
		e = CS_ENOENT;                /* as consent_request_get would say */
		goto out;
	}
	if (b.outcome != CONSENT_DECIDED)
		goto answer;
	if (config_resource(cfg, r.resource) == NULL || vault_provider(v, r.resource) == NULL) {
		b.outcome = CONSENT_DECIDE_INVALID;
		goto answer;
	}
	if ((e = vault_map_scopes(cfg, r.resource, &d->selected, &m)) != CS_OK)
		goto unserved;
	/* A record that serves exactly the new mapping moves to the new consent;
	 * otherwise the person connects at the provider with exactly m. */
	if ((e = try_move(&x, &r, d, &m, &b.outcome, &b.consent_id, &moved)) != CS_OK)
		goto out;
	if (b.outcome == CONSENT_DECIDE_UNKNOWN) {
		e = CS_ENOENT;
		goto out;
	}
	if (b.outcome != CONSENT_DECIDED)
		goto answer;
	if (!moved && (e = connect_state(&x, &r, d, &m, &b.authorize_url)) != CS_OK)
		goto unserved;
	goto answer;
unserved:
	/* CS_EINVAL of the mapping or the authorize URL: the configuration no
	 * longer serves a scope or the provider (changed since the request was
	 * made), so the decision cannot be carried out: INVALID. */
	if (e != CS_EINVAL)
		goto out;
	vault_begin_clear(&b);
	b.outcome = CONSENT_DECIDE_INVALID;
	e = CS_OK;
answer:
	*out = b;
	memset(&b, 0, sizeof b);
	e = CS_OK;
out:
	vault_begin_clear(&b);
	scope_set_clear(&m);
	consent_request_clear(&r);
	return e;
}

/* --- finish ------------------------------------------------------------- */

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

struct finish_work {              /* one callback's working state */
	struct store_vault_connect cs;    /* the connect state (have_state) */
	struct consent_request     r;     /* the request it was for (have_req) */
	bool                       have_state, have_req;
	bool                       stopped;   /* the outcome is decided: no further step */
	struct provider           *p;
	struct provider_tokens     t;     /* from the code exchange */
	struct scope_set           g;     /* the provider scopes granted */
	struct scope_set           kept;  /* the consent scopes that go live */
	char                      *g_s, *dropped_s;
	char                      *sites; /* Atlassian: the cloud ids the token reaches */
};

static void finish_work_clear(struct finish_work *w)
{
	store_vault_connect_clear(&w->cs);
	consent_request_clear(&w->r);
	provider_tokens_clear(&w->t);
	scope_set_clear(&w->g);
	scope_set_clear(&w->kept);
	free(w->g_s);
	free(w->dropped_s);
	free(w->sites);
}

/* Ends the callback with outcome o and the reason a person reads. */
static enum cs_err stop(struct finish_work *w, struct vault_finish *f,
    enum vault_connect_outcome o, const char *why)
{
	w->stopped = true;
	f->outcome = o;
	free(f->why);
	f->why = NULL;
	if (why != NULL && (f->why = strdup(why)) == NULL)
		return CS_ENOMEM;
	return CS_OK;
}

/* 1. The state: single use (deleted as it is read), this resource, this
 * session and person, unexpired. */
static enum cs_err take_state(const struct cx *x, const struct vault_callback *cb,
    struct finish_work *w, struct vault_finish *f)
{
	enum cs_err e;
	unsigned char h[32];
	if (cb->state == NULL || cb->state[0] == '\0')
		return stop(w, f, VAULT_BAD_STATE, "The answer from the provider carries no state.");
	sha256_str(cb->state, h);
	e = store_vault_connect_take(x->c, h, &w->cs);
	if (e == CS_ENOENT)
		return stop(w, f, VAULT_BAD_STATE,
		    "This answer from the provider is unknown or was already used.");
	if (e != CS_OK)
		return e;
	w->have_state = true;
	w->have_req = consent_request_get(x->c, w->cs.request_id, &w->r) == CS_OK;
	if (w->cs.expires_at <= x->who->now)
		return stop(w, f, VAULT_BAD_STATE,
		    "You took too long at the provider. Open the link from your agent again.");
	/* SECURITY: an answer meant for another resource's provider (mix-up). */
	if (strcmp(w->cs.resource, cb->resource) != 0)
		return stop(w, f, VAULT_BAD_STATE,
		    "This answer arrived at the address of another resource.");
	/* SECURITY: the connection finishes in the browser session that began it. */
	if (CRYPTO_memcmp(w->cs.session_hash, x->who->session_hash, 32) != 0 ||
	    w->cs.user_id != x->who->user_id || !w->have_req)
		return stop(w, f, VAULT_BAD_STATE,
		    "This answer from the provider belongs to another session.");
	if ((f->request_id = strdup(w->r.id)) == NULL || (f->agent = strdup(w->r.agent)) == NULL ||
	    (f->resource = strdup(w->r.resource)) == NULL)
		return CS_ENOMEM;
	return CS_OK;
}

/* 2. iss (RFC 9207), before anything the answer says is believed. */
static enum cs_err check_issuer(const struct cx *x, const struct vault_callback *cb,
    struct finish_work *w, struct vault_finish *f)
{
	const struct provider_meta *meta = NULL;
	const char *want;
	bool bad = false;
	if ((w->p = vault_provider(x->v, cb->resource)) == NULL)
		return stop(w, f, VAULT_FAILED, "This resource has no provider any more.");
	if (provider_meta(w->p, &meta) != CS_OK)
		return stop(w, f, VAULT_FAILED, "The provider could not be reached.");
	want = meta->issuer;
	if (meta->iss_parameter_supported && cb->iss == NULL)
		bad = true;
	/* With endpoints configured by hand there is no issuer to compare:
	 * the per-resource redirect URI is then the mix-up defence. */
	if (cb->iss != NULL && want != NULL && strcmp(cb->iss, want) != 0)
		bad = true;
	if (w->cs.provider_issuer != NULL && want != NULL && strcmp(w->cs.provider_issuer, want) != 0)
		bad = true;
	if (bad)
		return stop(w, f, VAULT_BAD_STATE, "The answer did not come from the expected provider.");
	return CS_OK;
}

/* 3. The provider's error; 4. the request must still be the one the person
 * decided on before they left for the provider: otherwise the code is never
 * exchanged (no tokens to revoke).  connect_commit checks it again inside its
 * transaction. */
static enum cs_err check_answer(const struct cx *x, const struct vault_callback *cb,
    struct finish_work *w, struct vault_finish *f)
{
	char now_v[CONSENT_VERSION_LEN + 1];
	(void)x;
	if (cb->error != NULL) {
		if (strcmp(cb->error, "access_denied") == 0)
			return stop(w, f, VAULT_CANCELLED, "You cancelled at the provider.");
		return stop(w, f, VAULT_FAILED, "The provider answered with an error.");
	}
	if (cb->code == NULL || cb->code[0] == '\0')
		return stop(w, f, VAULT_FAILED, "The provider sent no authorization code.");
	consent_request_version(&w->r, now_v);
	if (strlen(w->cs.request_version) != CONSENT_VERSION_LEN ||
	    CRYPTO_memcmp(now_v, w->cs.request_version, CONSENT_VERSION_LEN) != 0)
		return stop(w, f, VAULT_CHANGED,
		    "The request changed while you were at the provider; nothing was given.");
	return CS_OK;
}

/* 5. The code exchange, server-side, with the PKCE verifier. */
static enum cs_err exchange(const struct cx *x, const struct vault_callback *cb,
    struct finish_work *w, struct vault_finish *f)
{
	enum cs_err e;
	char *redirect = NULL;
	if ((e = redirect_uri(x->cfg, cb->resource, &redirect)) != CS_OK)
		return e;
	if (provider_exchange_code(w->p, cb->code, redirect, w->cs.code_verifier, &w->t) != CS_OK) {
		e = stop(w, f, VAULT_FAILED, "The provider refused the authorization code.");
	} else if (w->t.access_token == NULL || w->t.access_token[0] == '\0' ||
	    !is_bearer(w->t.token_type)) {
		vault_revoke_now(w->p, &w->t);
		e = stop(w, f, VAULT_FAILED, "The provider sent a token consentd cannot use.");
	} else if (provider_preset(w->p) == PRESET_ATLASSIAN) {
		/* Atlassian's API is reached through a site's cloud id: a token that
		 * reaches no site is of no use. */
		enum cs_err se = provider_sites(w->p, w->t.access_token, &w->sites);
		if (se == CS_ENOMEM)
			e = se;
		else if (se != CS_OK)
			vault_revoke_now(w->p, &w->t);
		if (se == CS_ENOENT)
			e = stop(w, f, VAULT_FAILED, "Your Atlassian account gave access to no site.");
		else if (se != CS_OK && se != CS_ENOMEM)
			e = stop(w, f, VAULT_FAILED, "The provider's list of sites could not be read.");
	}
	free(redirect);
	return e;
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

/* The provider granted less than asked: the consent keeps the scopes of sel
 * it fully covers (f->dropped the others), as long as the token then holds no
 * more than the narrowed consent maps to. */
static enum cs_err narrow_to_granted(const struct cx *x, const char *resource,
    const struct scope_set *sel, struct finish_work *w, struct vault_finish *f)
{
	enum cs_err e;
	struct scope_set m2 = { .n = 0 };
	bool fits;
	if ((e = narrow(x->cfg, resource, sel, &w->g, &w->kept, &f->dropped)) != CS_OK)
		return e;
	if (w->kept.n == 0) {
		vault_revoke_now(w->p, &w->t);
		return stop(w, f, VAULT_FAILED,
		    "The provider granted too little for any of the permissions you chose.");
	}
	if ((e = vault_map_scopes(x->cfg, resource, &w->kept, &m2)) != CS_OK)
		return e;
	fits = scope_set_subset(&w->g, &m2);
	scope_set_clear(&m2);
	if (!fits) {
		vault_revoke_now(w->p, &w->t);
		return stop(w, f, VAULT_FAILED,
		    "The provider granted a set of permissions that fits none of your choices.");
	}
	if ((w->dropped_s = scope_set_join(&f->dropped)) == NULL)
		return CS_ENOMEM;
	f->outcome = VAULT_NARROWED;
	return CS_OK;
}

/* 5, continued: what the provider granted, against what was asked. */
static enum cs_err check_granted(const struct cx *x, const struct vault_callback *cb,
    struct finish_work *w, struct vault_finish *f)
{
	enum cs_err e;
	struct scope_set m = { .n = 0 }, sel = { .n = 0 };
	if ((e = set_parse(w->cs.provider_scopes, &m)) != CS_OK ||
	    (e = set_parse(w->cs.selected, &sel)) != CS_OK) {
		e = CS_EDB;
		goto out;
	}
	if (w->t.scope != NULL) {
		if (scope_set_parse(w->t.scope, &w->g) != CS_OK) {
			vault_revoke_now(w->p, &w->t);
			e = stop(w, f, VAULT_FAILED, "The provider's answer could not be understood.");
			goto out;
		}
	} else if ((e = set_parse(w->cs.provider_scopes, &w->g)) != CS_OK) {
		goto out;
	}
	/* SECURITY: invariant 8 -- a provider token never holds more than the
	 * mapping of its consent's scopes. */
	if (!scope_set_subset(&w->g, &m)) {
		vault_revoke_now(w->p, &w->t);
		e = stop(w, f, VAULT_TOO_MUCH,
		    "The provider granted more than was asked for; those tokens were revoked.");
		goto out;
	}
	if (!scope_set_subset(&m, &w->g))
		e = narrow_to_granted(x, cb->resource, &sel, w, f);
	else if ((e = set_parse(w->cs.selected, &w->kept)) == CS_OK)
		f->outcome = VAULT_CONNECTED;
	if (e != CS_OK || w->stopped)
		goto out;
	if ((w->g_s = scope_set_join(&w->g)) == NULL)
		e = CS_ENOMEM;
out:
	scope_set_clear(&m);
	scope_set_clear(&sel);
	return e;
}

/* Whether the unrevoked consent of r's (person, agent, resource) needs the
 * person again (*broken), and why; read in the caller's transaction. */
static enum cs_err broken_before(const struct cx *x, const struct consent_request *r,
    bool *broken, enum health_reason *why)
{
	struct consent live;
	enum cs_err e;
	memset(&live, 0, sizeof live);
	*broken = false;
	e = consent_current(x->c, x->who->user_id, r->agent, r->resource, x->who->now, &live);
	if (e == CS_ENOENT)
		return CS_OK;
	if (e == CS_OK && live.reconnect_required) {
		*broken = true;
		*why = health_reason_parse(live.reconnect_reason);
	}
	consent_clear(&live);
	return e;
}

/* The consent d makes goes live with w's tokens sealed in its record, in one
 * transaction (outcome o is audited with it).  consent_decide_tx's refusals
 * come back as they are: CS_ESTALE, CS_EINVAL, CS_EPERM. */
static enum cs_err connect_commit(const struct cx *x, const struct finish_work *w,
    const struct consent_decision *d, enum vault_connect_outcome o, char **new_id)
{
	enum cs_err e;
	bool in_tx = false;
	char rid[RECORD_ID_LEN + 1], detail[DETAIL_MAX];
	char *nid = NULL;
	struct vault_sealed sl = { NULL, 0, NULL, 0, NULL };
	struct store_vault_record rec;
	const struct consent_request *r = &w->r;
	int64_t now = x->who->now;
	bool was_broken = false;
	enum health_reason why = HEALTH_UNKNOWN;

	memset(&rec, 0, sizeof rec);
	if ((e = b64url_random_id(rid)) != CS_OK || (e = store_begin(x->c)) != CS_OK)
		return e;
	in_tx = true;
	/* The consent this one replaces: when its connection needed the person,
	 * the gateway hears that it works again (issue #33 item 4). */
	if ((e = broken_before(x, r, &was_broken, &why)) != CS_OK)
		goto out;
	/* The previous consent's record goes to the outbox in its cascade. */
	if ((e = decide_in_tx(x->c, x->cfg, r->id, &(struct consent_actor){
	    .user_id = x->who->user_id, .actor = x->who->actor, .now = now }, d, &nid)) != CS_OK ||
	    (e = vault_seal_pair(x->v->mk, &(struct vault_aad){ rid, nid, r->subject, r->resource },
	    w->t.access_token, w->t.refresh_token, &sl)) != CS_OK)
		goto out;
	rec.id = rid;
	rec.consent_id = nid;
	rec.user_id = x->who->user_id;
	rec.subject = r->subject;
	rec.agent = r->agent;
	rec.resource = r->resource;
	rec.provider_scopes = w->g_s;
	rec.token_type = w->t.token_type;
	rec.access_sealed = sl.access;
	rec.access_sealed_len = sl.access_len;
	rec.refresh_sealed = sl.refresh;
	rec.refresh_sealed_len = sl.refresh_len;
	rec.access_expires_at = now + (w->t.expires_in > 0 ? w->t.expires_in :
	    VAULT_DEFAULT_EXPIRES_IN);
	rec.master_kid = (char *)x->v->mk->kid;
	rec.created_at = now;
	rec.updated_at = now;
	rec.sites = w->sites;             /* Atlassian: the proxy's {cloud_id} (vault_site) */
	if ((e = store_vault_record_insert(x->c, &rec)) != CS_OK ||
	    (was_broken && (e = health_recovered(x->c, nid, why, now)) != CS_OK))
		goto out;
	/* What the done page tells the person was left out, from here, never a URL. */
	if (w->dropped_s != NULL && (e = store_creq_set_narrowed(x->c, r->id, w->dropped_s)) != CS_OK)
		goto out;
	if ((e = str_fmt(detail, sizeof detail, "provider_scopes=%s refresh=%s%s%s%s%s", w->g_s,
	    w->t.refresh_token ? "yes" : "no", w->dropped_s ? " dropped=" : "",
	    w->dropped_s ? w->dropped_s : "", w->sites ? " sites=" : "",
	    w->sites ? w->sites : "")) != CS_OK ||
	    (e = audit_append(x->c, &(struct audit_entry){ .ts = now, .actor = x->who->actor,
	    .action = "vault.connected", .subject = r->subject, .agent = r->agent,
	    .resource = r->resource, .scopes = w->g_s, .consent_id = nid, .request_id = r->id,
	    .outcome = outcome_names[o], .detail = detail })) != CS_OK)
		goto out;
	in_tx = false;
	e = commit_decided(x, &nid, new_id);
out:
	if (in_tx)
		store_rollback(x->c);
	free(nid);
	blob_free(sl.access, sl.access_len);
	blob_free(sl.refresh, sl.refresh_len);
	return e;
}

/* 6. One transaction: the consent goes live with its sealed record. */
static enum cs_err go_live(const struct cx *x, const struct vault_callback *cb,
    struct finish_work *w, struct vault_finish *f)
{
	enum cs_err e;
	struct consent_decision d;
	char *nid = NULL;
	(void)cb;
	memset(&d, 0, sizeof d);
	d.approve = true;
	d.selected = w->kept;             /* borrowed: still owned by w */
	d.duration = w->cs.duration;
	d.offline = w->cs.offline != 0;
	/* SECURITY: the consent goes live only if the request is still the one
	 * the person decided on (checked again inside connect_commit's transaction). */
	memcpy(d.version, w->cs.request_version, sizeof d.version);
	if ((e = connect_commit(x, w, &d, f->outcome, &nid)) == CS_OK) {
		f->consent_id = nid;
		free(f->why);
		f->why = NULL;
		return CS_OK;
	}
	/* SECURITY: tokens that no record holds must not live on. */
	vault_revoke_now(w->p, &w->t);
	if (e != CS_ESTALE && e != CS_EINVAL && e != CS_EPERM)
		return e;
	scope_set_clear(&f->dropped);
	if (e == CS_ESTALE)
		return stop(w, f, VAULT_CHANGED,
		    "The request changed while you were at the provider; the connection was undone.");
	return stop(w, f, VAULT_FAILED,
	    "The request expired or was decided meanwhile; the connection was undone.");
}

/* Invariant 10: every refusal is audited (never the code or a token). */
static enum cs_err audit_refusal(const struct cx *x, const struct vault_callback *cb,
    const struct finish_work *w, const struct vault_finish *f)
{
	return audit_append_alone(x->c, &(struct audit_entry){ .ts = x->who->now, .actor = x->who->actor,
	    .action = "vault.connect.failed", .subject = w->have_req ? w->r.subject : NULL,
	    .agent = w->have_req ? w->r.agent : NULL, .resource = cb->resource,
	    .scopes = w->have_state ? w->cs.provider_scopes : NULL,
	    .request_id = w->have_req ? w->r.id : NULL, .outcome = outcome_names[f->outcome],
	    .detail = f->why ? f->why : "" });
}

typedef enum cs_err finish_step(const struct cx *, const struct vault_callback *,
    struct finish_work *, struct vault_finish *);

enum cs_err vault_finish_connect(struct vault *v, struct store_conn *c, const struct config *cfg,
    const struct vault_person *who, const struct vault_callback *cb, struct vault_finish *out)
{
	/* The protocol, in order; a step that decides the outcome ends it. */
	static finish_step *const steps[] = {
		take_state, check_issuer, check_answer, exchange, check_granted, go_live,
	};
	enum cs_err e = CS_OK;
	struct vault_finish f;
	struct finish_work w;
	const struct cx x = { v, c, cfg, who };

	memset(&f, 0, sizeof f);
	memset(&w, 0, sizeof w);
	if (v == NULL || c == NULL || cfg == NULL || who == NULL || who->session_hash == NULL ||
	    cb == NULL || cb->resource == NULL || out == NULL)
		return CS_EINVAL;
	for (size_t i = 0; i < sizeof steps / sizeof steps[0] && !w.stopped; i++)
		if ((e = steps[i](&x, cb, &w, &f)) != CS_OK)
			goto out;
	if (f.outcome != VAULT_CONNECTED && f.outcome != VAULT_NARROWED &&
	    (e = audit_refusal(&x, cb, &w, &f)) != CS_OK)
		goto out;
	*out = f;
	memset(&f, 0, sizeof f);
	e = CS_OK;
out:
	vault_finish_clear(&f);
	finish_work_clear(&w);
	return e;
}
