/* consent.c -- consent requests and consents (flows A, B, G): scope sets, the
 * token exchange's polling state machine, the person's decision and the
 * revocation cascade.  Every change commits in one transaction with its audit
 * entries; it must never let anyone but the requested person decide. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "audit.h"
#include "consent.h"
#include "store_consent.h"
#include "store_user.h"

#define SLOW_DOWN_STEP 5             /* seconds added to the interval on slow_down */
#define REASON_REPLACED "replaced"

/* --- scope sets -------------------------------------------------------- */

void scope_set_clear(struct scope_set *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->n && i < CONSENT_MAX_SCOPES; i++)
		free(s->v[i]);
	memset(s, 0, sizeof *s);
}

/* RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ). */
static bool scope_char_ok(unsigned char ch)
{
	return ch == 0x21 || (ch >= 0x23 && ch <= 0x5B) || (ch >= 0x5D && ch <= 0x7E);
}

/* Compares the len bytes at p (no NUL inside) with the string t, as strcmp would. */
static int cmp_n(const char *p, size_t len, const char *t)
{
	int r = strncmp(p, t, len);
	if (r != 0)
		return r;
	return t[len] == '\0' ? 0 : -1;
}

/* Adds the len bytes at p, keeping s sorted and unique. */
static enum cs_err set_add(struct scope_set *s, const char *p, size_t len)
{
	size_t i = 0;
	int r = 1;
	for (; i < s->n; i++) {
		r = cmp_n(p, len, s->v[i]);
		if (r <= 0)
			break;
	}
	if (i < s->n && r == 0)
		return CS_OK;                 /* already there */
	if (s->n >= CONSENT_MAX_SCOPES)
		return CS_ETOOBIG;
	char *dup = strndup(p, len);
	if (dup == NULL)
		return CS_ENOMEM;
	memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof s->v[0]);
	s->v[i] = dup;
	s->n++;
	return CS_OK;
}

enum cs_err scope_set_parse(const char *s, struct scope_set *out)
{
	struct scope_set t;
	enum cs_err e = CS_OK;
	const char *p = s;

	memset(&t, 0, sizeof t);
	if (s == NULL || out == NULL)
		return CS_EINVAL;
	while (*p != '\0') {
		const char *start = p;
		for (; *p != '\0' && *p != ' '; p++) {
			if (!scope_char_ok((unsigned char)*p)) {
				e = CS_EINVAL;
				goto out;
			}
		}
		size_t len = (size_t)(p - start);
		/* An empty token: a leading, doubled or trailing space. */
		if (len == 0) {
			e = CS_EINVAL;
			goto out;
		}
		if (len > CONSENT_MAX_SCOPE_LEN) {
			e = CS_ETOOBIG;
			goto out;
		}
		if ((e = set_add(&t, start, len)) != CS_OK)
			goto out;
		if (*p == ' ') {
			p++;
			if (*p == '\0') {     /* trailing space */
				e = CS_EINVAL;
				goto out;
			}
		}
	}
	*out = t;
	memset(&t, 0, sizeof t);
out:
	scope_set_clear(&t);
	return e;
}

bool scope_set_has(const struct scope_set *s, const char *name)
{
	if (s == NULL || name == NULL)
		return false;
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i], name) == 0)
			return true;
	return false;
}

bool scope_set_subset(const struct scope_set *a, const struct scope_set *b)
{
	if (a == NULL)
		return true;
	for (size_t i = 0; i < a->n; i++)
		if (!scope_set_has(b, a->v[i]))
			return false;
	return true;
}

char *scope_set_join(const struct scope_set *s)
{
	size_t len = 1, o = 0;
	for (size_t i = 0; s != NULL && i < s->n; i++)
		len += strlen(s->v[i]) + 1;
	char *p = malloc(len);
	if (p == NULL)
		return NULL;
	for (size_t i = 0; s != NULL && i < s->n; i++) {
		size_t n = strlen(s->v[i]);
		if (i > 0)
			p[o++] = ' ';
		memcpy(p + o, s->v[i], n);
		o += n;
	}
	p[o] = '\0';
	return p;
}

/* dst ∪= src. */
static enum cs_err set_union(struct scope_set *dst, const struct scope_set *src)
{
	enum cs_err e;
	for (size_t i = 0; i < src->n; i++)
		if ((e = set_add(dst, src->v[i], strlen(src->v[i]))) != CS_OK)
			return e;
	return CS_OK;
}

/* *out = a ∩ b (keep) or a − b (!keep); out starts empty. */
static enum cs_err set_filter(struct scope_set *out, const struct scope_set *a,
    const struct scope_set *b, bool keep)
{
	enum cs_err e;
	for (size_t i = 0; i < a->n; i++)
		if (scope_set_has(b, a->v[i]) == keep &&
		    (e = set_add(out, a->v[i], strlen(a->v[i]))) != CS_OK)
			return e;
	return CS_OK;
}

/* A stored scope list; anything unparsable there is a damaged database. */
static enum cs_err set_from_db(const char *s, struct scope_set *out)
{
	enum cs_err e = scope_set_parse(s ? s : "", out);
	return e == CS_ENOMEM ? e : e != CS_OK ? CS_EDB : CS_OK;
}

/* --- versions ---------------------------------------------------------- */

/* One field of a version: its length (4 bytes, big-endian) and its bytes, so
 * that no two different requests hash the same text.  NULL differs from "". */
static void version_field(EVP_MD_CTX *h, const char *s)
{
	size_t n = s != NULL ? strlen(s) : 0;
	unsigned char len[5] = { s != NULL, (unsigned char)(n >> 24), (unsigned char)(n >> 16),
	    (unsigned char)(n >> 8), (unsigned char)n };
	EVP_DigestUpdate(h, len, sizeof len);
	if (n > 0)
		EVP_DigestUpdate(h, s, n);
}

static void version_of(const char *agent, const char *resource, const struct scope_set *scopes,
    const struct scope_set *pre, const char *reason, char out[CONSENT_VERSION_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[32];
	unsigned int mdlen = 0;
	EVP_MD_CTX *h = EVP_MD_CTX_new();
	memset(md, 0, sizeof md);
	/* SHA-256 cannot fail once its context exists; without one, an all-zero
	 * version never equals a page's real one, so nothing is decided. */
	if (h != NULL && EVP_DigestInit_ex(h, EVP_sha256(), NULL) == 1) {
		version_field(h, "consentd-request-v1");
		version_field(h, agent);
		version_field(h, resource);
		for (size_t i = 0; i < scopes->n; i++)
			version_field(h, scopes->v[i]);
		version_field(h, "|");
		for (size_t i = 0; i < pre->n; i++)
			version_field(h, pre->v[i]);
		version_field(h, "|");
		version_field(h, reason);
		if (EVP_DigestFinal_ex(h, md, &mdlen) != 1 || mdlen != sizeof md)
			memset(md, 0, sizeof md);
	}
	EVP_MD_CTX_free(h);
	for (size_t i = 0; i < sizeof md; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[CONSENT_VERSION_LEN] = '\0';
}

void consent_request_version(const struct consent_request *r, char out[CONSENT_VERSION_LEN + 1])
{
	version_of(r->agent, r->resource, &r->scopes, &r->pre_granted, r->reason, out);
}

/* CS_OK when have equals want (a page's version), CS_ESTALE otherwise. */
static enum cs_err version_check(const char *have, const char *want)
{
	return strlen(want) == CONSENT_VERSION_LEN &&
	    CRYPTO_memcmp(have, want, CONSENT_VERSION_LEN) == 0 ? CS_OK : CS_ESTALE;
}

/* CS_OK when the stored request is still at version want (a page's). */
static enum cs_err row_at_version(const struct store_creq_row *r, const char *want)
{
	struct scope_set scopes, pre;
	char have[CONSENT_VERSION_LEN + 1];
	enum cs_err e;
	memset(&scopes, 0, sizeof scopes);
	memset(&pre, 0, sizeof pre);
	if ((e = set_from_db(r->scopes, &scopes)) != CS_OK ||
	    (e = set_from_db(r->pre_granted, &pre)) != CS_OK)
		goto out;
	version_of(r->agent, r->resource, &scopes, &pre, r->reason, have);
	e = version_check(have, want);
out:
	scope_set_clear(&scopes);
	scope_set_clear(&pre);
	return e;
}

/* --- ids --------------------------------------------------------------- */

/* 22 characters of base64url from 16 random bytes.  An id never contains
 * "eyJ" (audit.c refuses anything that looks like a JWT), so the rare draw
 * that does is drawn again. */
static enum cs_err random_id(char out[CONSENT_ID_LEN + 1])
{
	static const char b64u[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	unsigned char r[18];
	for (int tries = 0; tries < 16; tries++) {
		memset(r, 0, sizeof r);
		if (RAND_bytes(r, 16) != 1)
			return CS_ECRYPTO;
		size_t o = 0;
		for (size_t i = 0; i < 18 && o < CONSENT_ID_LEN; i += 3) {
			unsigned v = (unsigned)r[i] << 16 | (unsigned)r[i + 1] << 8 | (unsigned)r[i + 2];
			for (int k = 3; k >= 0 && o < CONSENT_ID_LEN; k--)
				out[o++] = b64u[(v >> (6 * k)) & 63];
		}
		out[CONSENT_ID_LEN] = '\0';
		if (strstr(out, "eyJ") == NULL)
			return CS_OK;
	}
	return CS_ECRYPTO;                /* 16 draws in a row: the generator is broken */
}

/* --- structs ----------------------------------------------------------- */

void consent_clear(struct consent *k)
{
	if (k == NULL)
		return;
	free(k->id);
	free(k->subject);
	free(k->agent);
	free(k->resource);
	scope_set_clear(&k->granted);
	scope_set_clear(&k->declined);
	free(k->state);
	free(k->revoked_by);
	free(k->revoke_reason);
	free(k->request_id);
	memset(k, 0, sizeof *k);
}

void consent_request_clear(struct consent_request *r)
{
	if (r == NULL)
		return;
	free(r->id);
	free(r->subject);
	free(r->agent);
	free(r->resource);
	scope_set_clear(&r->scopes);
	scope_set_clear(&r->pre_granted);
	free(r->reason);
	free(r->status);
	free(r->consent_id);
	free(r->narrowed);
	memset(r, 0, sizeof *r);
}

void consent_answer_clear(struct consent_answer *a)
{
	if (a == NULL)
		return;
	consent_clear(&a->live);
	scope_set_clear(&a->grant_scopes);
	free(a->request_id);
	memset(a, 0, sizeof *a);
}

void consent_list_free(struct consent *v, size_t n)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		consent_clear(&v[i]);
	free(v);
}

void consent_request_list_free(struct consent_request *v, size_t n)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		consent_request_clear(&v[i]);
	free(v);
}

bool consent_is_live(const struct consent *k, int64_t now)
{
	return k != NULL && k->revoked_at == 0 && k->expires_at > now;
}

static const char *consent_state(int64_t revoked_at, int64_t expires_at, int reconnect,
    int64_t now)
{
	if (revoked_at != 0)
		return "revoked";
	if (expires_at <= now)
		return "expired";
	return reconnect ? "reconnect_required" : "live";
}

/* Moves a row into *out (the row's strings change owner); *out written only on CS_OK. */
static enum cs_err consent_from_row(struct store_consent_row *r, int64_t now, struct consent *out)
{
	struct consent k;
	enum cs_err e;
	memset(&k, 0, sizeof k);
	if ((e = set_from_db(r->granted, &k.granted)) != CS_OK ||
	    (e = set_from_db(r->declined, &k.declined)) != CS_OK)
		goto out;
	if ((k.state = strdup(consent_state(r->revoked_at, r->expires_at, r->reconnect_required,
	    now))) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	k.id = r->id;
	r->id = NULL;
	k.subject = r->subject;
	r->subject = NULL;
	k.agent = r->agent;
	r->agent = NULL;
	k.resource = r->resource;
	r->resource = NULL;
	k.revoked_by = r->revoked_by;
	r->revoked_by = NULL;
	k.revoke_reason = r->revoke_reason;
	r->revoke_reason = NULL;
	k.request_id = r->request_id;
	r->request_id = NULL;
	k.last_used_at = r->last_used_at;
	k.user_id = r->user_id;
	k.offline = r->offline != 0;
	k.created_at = r->created_at;
	k.expires_at = r->expires_at;
	k.revoked_at = r->revoked_at;
	k.reconnect_required = r->reconnect_required != 0;
	*out = k;
	memset(&k, 0, sizeof k);
out:
	consent_clear(&k);
	return e;
}

static enum cs_err request_from_row(struct store_creq_row *r, struct consent_request *out)
{
	struct consent_request q;
	enum cs_err e;
	memset(&q, 0, sizeof q);
	if ((e = set_from_db(r->scopes, &q.scopes)) != CS_OK ||
	    (e = set_from_db(r->pre_granted, &q.pre_granted)) != CS_OK)
		goto out;
	q.id = r->id;
	r->id = NULL;
	q.subject = r->subject;
	r->subject = NULL;
	q.agent = r->agent;
	r->agent = NULL;
	q.resource = r->resource;
	r->resource = NULL;
	q.reason = r->reason;
	r->reason = NULL;
	q.status = r->status;
	r->status = NULL;
	q.consent_id = r->consent_id;
	r->consent_id = NULL;
	q.narrowed = r->narrowed;
	r->narrowed = NULL;
	q.user_id = r->user_id;
	q.created_at = r->created_at;
	q.expires_at = r->expires_at;
	q.decided_at = r->decided_at;
	q.cooldown_lifted_at = r->cooldown_lifted_at;
	*out = q;
	memset(&q, 0, sizeof q);
out:
	consent_request_clear(&q);
	return e;
}

/* --- audit ------------------------------------------------------------- */

struct audit_ctx {                   /* what every entry of one operation shares */
	struct store_conn *c;
	int64_t     now;
	const char *actor, *subject, *agent, *resource;
};

static enum cs_err audit(const struct audit_ctx *x, const char *action, const char *scopes,
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

/* --- revocation -------------------------------------------------------- */

enum cs_err consent_touch(struct store_conn *c, const char *consent_id, int64_t now)
{
	if (c == NULL || consent_id == NULL)
		return CS_EINVAL;
	return store_consent_touch(c, consent_id, now);
}

/* Actors as the callers of consent_revoke write them: "user:<subject>" for a
 * person (pages.c), "admin:<name>" for the admin pages and API, "cli" for
 * `consentd admin` (admin_cli.c). */
enum consent_revoker consent_revoker(const struct consent *k)
{
	const char *by;
	if (k == NULL || k->revoked_at == 0)
		return CONSENT_BY_NOBODY;
	by = k->revoked_by ? k->revoked_by : "";
	/* An administrator's reason is free text: "replaced" there is still theirs. */
	if (strncmp(by, "admin:", 6) == 0 || strcmp(by, "cli") == 0)
		return CONSENT_BY_ADMIN;
	/* Only decide_approve writes REASON_REPLACED, with the deciding person as actor. */
	if (k->revoke_reason != NULL && strcmp(k->revoke_reason, REASON_REPLACED) == 0)
		return CONSENT_BY_REPLACEMENT;
	if (strncmp(by, "user:", 5) == 0 && k->subject != NULL && strcmp(by + 5, k->subject) == 0)
		return CONSENT_BY_PERSON;
	return CONSENT_BY_OTHER;
}

/* Revokes the unrevoked consent k with its grants and refresh tokens, and
 * audits it; inside the caller's transaction.  *changed 0 when k was revoked
 * already (then nothing is written). */
static enum cs_err revoke_locked(struct store_conn *c, const struct store_consent_row *k,
    const char *actor, const char *reason, const char *detail, int64_t now, int *changed)
{
	enum cs_err e;
	struct audit_ctx x = { c, now, actor, k->subject, k->agent, k->resource };
	*changed = 0;
	if ((e = store_consent_set_revoked(c, k->id, now, actor, reason, changed)) != CS_OK)
		return e;
	if (!*changed)
		return CS_OK;
	/* SECURITY: a revoked consent's grants and refresh tokens die with it, in
	 * the same transaction: introspection and refresh see it at once. */
	if ((e = store_consent_cascade(c, k->id, now)) != CS_OK)
		return e;
	return audit(&x, "consent.revoked", k->granted, k->id, k->request_id, "ok", detail);
}

enum cs_err consent_revoke(struct store_conn *c, const char *consent_id, int64_t only_user_id,
    const char *actor, const char *reason, int64_t now, bool in_tx)
{
	enum cs_err e;
	bool own_tx = false;
	int changed = 0;
	struct store_consent_row k;

	memset(&k, 0, sizeof k);
	if (c == NULL || consent_id == NULL)
		return CS_EINVAL;
	if (!in_tx) {
		if ((e = store_begin(c)) != CS_OK)
			return e;
		own_tx = true;
	}
	if ((e = store_consent_get(c, consent_id, &k)) != CS_OK)
		goto out;
	/* SECURITY: a person revokes only their own consents. */
	if (only_user_id > 0 && k.user_id != only_user_id) {
		e = CS_EPERM;
		goto out;
	}
	if (k.revoked_at == 0 &&
	    (e = revoke_locked(c, &k, actor, reason, reason, now, &changed)) != CS_OK)
		goto out;
	if (own_tx) {
		if ((e = store_commit(c)) != CS_OK)
			goto out;
		own_tx = false;
	}
	e = CS_OK;
out:
	if (own_tx)
		store_rollback(c);
	store_consent_row_clear(&k);
	return e;
}

/* --- blocks (deny_cooldown) ------------------------------------------- */

void consent_block_list_free(struct consent_block *v, size_t n)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < n; i++) {
		free(v[i].request_id);
		free(v[i].agent);
		free(v[i].resource);
		scope_set_clear(&v[i].scopes);
	}
	free(v);
}

/* Fills b (zeroed by the caller) from its parts; b's scopes move from *scopes. */
static enum cs_err block_fill(struct consent_block *b, const char *request_id, const char *agent,
    const char *resource, struct scope_set *scopes, bool declined, int64_t decided_at,
    int64_t until)
{
	if ((b->request_id = strdup(request_id)) == NULL || (b->agent = strdup(agent)) == NULL ||
	    (b->resource = strdup(resource)) == NULL)
		return CS_ENOMEM;
	b->scopes = *scopes;
	memset(scopes, 0, sizeof *scopes);
	b->declined = declined;
	b->decided_at = decided_at;
	b->until = until;
	return CS_OK;
}

/* The block the scopes the person unticked on consent k hold at now:
 * *held when k is live, the request that made it was decided less than
 * deny_cooldown ago and not lifted, and its person-declined scopes (k's
 * declined less those the provider did not grant, the request's narrowed)
 * are not empty and hold every scope of within (when not NULL).  With
 * out != NULL and *held, *out (zeroed by the caller) describes the block. */
static enum cs_err declined_block(struct store_conn *c, const struct config *cfg,
    const struct store_consent_row *k, const struct scope_set *within, int64_t now,
    struct consent_block *out, bool *held)
{
	enum cs_err e;
	struct store_creq_row r;
	struct scope_set kd, narrowed, mine;

	*held = false;
	memset(&r, 0, sizeof r);
	memset(&kd, 0, sizeof kd);
	memset(&narrowed, 0, sizeof narrowed);
	memset(&mine, 0, sizeof mine);
	if (k->revoked_at != 0 || k->expires_at <= now || k->request_id == NULL ||
	    k->declined == NULL || k->declined[0] == '\0' || cfg->consent_deny_cooldown <= 0)
		return CS_OK;
	e = store_creq_get(c, k->request_id, &r);
	if (e == CS_ENOENT)
		return CS_OK;
	if (e != CS_OK)
		return e;
	if (strcmp(r.status, "approved") != 0 || r.consent_id == NULL ||
	    strcmp(r.consent_id, k->id) != 0 || r.cooldown_lifted_at != 0 ||
	    now >= r.decided_at + cfg->consent_deny_cooldown)
		goto out;
	if ((e = set_from_db(k->declined, &kd)) != CS_OK ||
	    (e = set_from_db(r.narrowed, &narrowed)) != CS_OK ||
	    (e = set_filter(&mine, &kd, &narrowed, false)) != CS_OK)
		goto out;
	if (mine.n == 0 || (within != NULL && !scope_set_subset(within, &mine)))
		goto out;
	*held = true;
	if (out != NULL)
		e = block_fill(out, r.id, k->agent, k->resource, &mine, true, r.decided_at,
		    r.decided_at + cfg->consent_deny_cooldown);
out:
	store_creq_row_clear(&r);
	scope_set_clear(&kd);
	scope_set_clear(&narrowed);
	scope_set_clear(&mine);
	return e;
}

/* Most recent decision first. */
static int block_cmp(const void *a, const void *b)
{
	const struct consent_block *x = a, *y = b;
	return x->decided_at < y->decided_at ? 1 : x->decided_at > y->decided_at ? -1 : 0;
}

/* Live consents are few per person (one per agent and resource); this bounds
 * the listing should a database hold more. */
#define BLOCK_CONSENTS_MAX 200

enum cs_err consent_blocks_for_user(struct store_conn *c, const struct config *cfg,
    int64_t user_id, int64_t now, struct consent_block **out, size_t *n)
{
	enum cs_err e;
	struct store_creq_row *denied = NULL;
	struct store_consent_row *ks = NULL;
	struct consent_block *v = NULL;
	size_t nd = 0, nk = 0, nv = 0;

	if (c == NULL || cfg == NULL || out == NULL || n == NULL)
		return CS_EINVAL;
	*out = NULL;
	*n = 0;
	if (cfg->consent_deny_cooldown <= 0)
		return CS_OK;
	if ((e = store_creq_list_denied(c, user_id, now - cfg->consent_deny_cooldown, &denied,
	    &nd)) != CS_OK ||
	    (e = store_consent_list_user(c, user_id, now, BLOCK_CONSENTS_MAX, &ks, &nk)) != CS_OK)
		goto out;
	if (nd + nk > 0 && (v = calloc(nd + nk, sizeof *v)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < nd; i++) {
		struct scope_set sc;
		memset(&sc, 0, sizeof sc);
		if ((e = set_from_db(denied[i].scopes, &sc)) == CS_OK)
			e = block_fill(&v[nv++], denied[i].id, denied[i].agent, denied[i].resource, &sc,
			    false, denied[i].decided_at,
			    denied[i].decided_at + cfg->consent_deny_cooldown);
		scope_set_clear(&sc);
		if (e != CS_OK)
			goto out;
	}
	for (size_t i = 0; i < nk; i++) {
		bool held = false;
		if ((e = declined_block(c, cfg, &ks[i], NULL, now, &v[nv], &held)) != CS_OK) {
			nv++;                     /* v[nv] may hold a part: freed below */
			goto out;
		}
		if (held)
			nv++;
	}
	if (nv > 1)
		qsort(v, nv, sizeof *v, block_cmp);
	if (nv == 0) {
		free(v);
		v = NULL;
	}
	*out = v;
	*n = nv;
	v = NULL;
	nv = 0;
out:
	consent_block_list_free(v, nv);
	store_creq_rows_free(denied, nd);
	store_consent_rows_free(ks, nk);
	return e;
}

enum cs_err consent_allow_asking(struct store_conn *c, const struct config *cfg,
    const char *request_id, int64_t user_id, const char *actor, int64_t now, bool *lifted)
{
	enum cs_err e;
	bool in_tx = false, held = false;
	int changed = 0;
	struct store_creq_row r;
	struct store_consent_row k;
	struct consent_block b;
	char *scopes = NULL;
	struct audit_ctx x = { c, now, actor, NULL, NULL, NULL };

	memset(&r, 0, sizeof r);
	memset(&k, 0, sizeof k);
	memset(&b, 0, sizeof b);
	if (c == NULL || cfg == NULL || request_id == NULL || lifted == NULL)
		return CS_EINVAL;
	*lifted = false;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	in_tx = true;
	if ((e = store_creq_get(c, request_id, &r)) != CS_OK)
		goto out;
	/* SECURITY: a person lifts only the blocks of their own decisions. */
	if (user_id <= 0 || r.user_id != user_id) {
		e = CS_EPERM;
		goto out;
	}
	x.subject = r.subject;
	x.agent = r.agent;
	x.resource = r.resource;
	if (strcmp(r.status, "denied") == 0) {
		held = r.cooldown_lifted_at == 0 && now < r.decided_at + cfg->consent_deny_cooldown;
		if (held && (scopes = strdup(r.scopes)) == NULL) {
			e = CS_ENOMEM;
			goto out;
		}
	} else if (strcmp(r.status, "approved") == 0 && r.consent_id != NULL) {
		e = store_consent_get(c, r.consent_id, &k);
		if (e != CS_OK && e != CS_ENOENT)
			goto out;
		if (e == CS_OK && (e = declined_block(c, cfg, &k, NULL, now, &b, &held)) != CS_OK)
			goto out;
		if (held && (scopes = scope_set_join(&b.scopes)) == NULL) {
			e = CS_ENOMEM;
			goto out;
		}
	} else {
		e = CS_EINVAL;                /* pending or expired: no decision holds anyone back */
		goto out;
	}
	e = CS_OK;
	if (!held)
		goto out;                     /* lifted already, or the cooldown is over: nothing to do */
	if ((e = store_creq_lift_cooldown(c, r.id, now, &changed)) != CS_OK)
		goto out;
	if (changed && (e = audit(&x, "consent.cooldown_lifted", scopes, r.consent_id, r.id, "ok",
	    strcmp(r.status, "denied") == 0 ? "denied" : "declined")) != CS_OK)
		goto out;
	if ((e = store_commit(c)) != CS_OK)
		goto out;
	in_tx = false;
	*lifted = changed != 0;
out:
	if (in_tx)
		store_rollback(c);
	free(scopes);
	store_creq_row_clear(&r);
	store_consent_row_clear(&k);
	free(b.request_id);
	free(b.agent);
	free(b.resource);
	scope_set_clear(&b.scopes);
	return e;
}

/* --- flow A: the token exchange's state machine ------------------------ */

/* (a): K covers requested when every requested scope was decided on (granted
 * or declined) and at least one was granted; *grant = requested ∩ granted. */
static enum cs_err live_covers(const struct scope_set *kg, const struct scope_set *kd,
    const struct scope_set *requested, bool *covers, struct scope_set *grant)
{
	bool any = false;
	*covers = false;
	for (size_t i = 0; i < requested->n; i++) {
		bool g = scope_set_has(kg, requested->v[i]);
		if (!g && !scope_set_has(kd, requested->v[i]))
			return CS_OK;
		any = any || g;
	}
	if (!any)
		return CS_OK;
	*covers = true;
	return set_filter(grant, requested, kg, true);
}

/* "slow_down answered N times" for the audit entry that ends a request, or
 * NULL when it never was. */
static const char *slow_down_note(int64_t n, char buf[64])
{
	if (n <= 0)
		return NULL;
	snprintf(buf, 64, "slow_down answered %lld time%s", (long long)n, n == 1 ? "" : "s");
	return buf;
}

/* (b): a pending request exists for the triple. */
static enum cs_err exchange_pending(const struct audit_ctx *x, struct store_creq_row *r,
    const struct scope_set *requested, const char *reason, struct consent_answer *a)
{
	enum cs_err e;
	struct scope_set have;
	char *joined = NULL, note[64];
	int64_t now = x->now;

	memset(&have, 0, sizeof have);
	if (r->expires_at <= now) {
		/* The person never decided: the gateway hears expired_token once, and
		 * its next call starts a new request. */
		if ((e = store_creq_decide(x->c, r->id, "expired", now, NULL)) != CS_OK ||
		    (e = audit(x, "consent.request.expired", r->scopes, NULL, r->id, "expired",
		    slow_down_note(r->slow_downs, note))) != CS_OK)
			goto out;
		a->outcome = CONSENT_EXPIRED;
		goto out;
	}
	if ((e = set_from_db(r->scopes, &have)) != CS_OK)
		goto out;
	if (!scope_set_subset(requested, &have)) {
		/* At most one pending request per triple: new scopes join it. */
		if ((e = set_union(&have, requested)) != CS_OK)
			goto out;
		if ((joined = scope_set_join(&have)) == NULL) {
			e = CS_ENOMEM;
			goto out;
		}
		if ((e = store_creq_merge(x->c, r->id, joined, reason)) != CS_OK ||
		    (e = audit(x, "consent.request.merged", joined, NULL, r->id, "pending",
		    NULL)) != CS_OK)
			goto out;
		a->outcome = CONSENT_REQUIRED;
		a->merged = true;
	} else {
		bool slow = now - r->last_poll_at < r->interval;
		if (slow) {
			r->interval += SLOW_DOWN_STEP;
			/* Audited the first time only: a gateway polling in a loop would
			 * otherwise fill the chain; the rest are counted (slow_downs). */
			if (r->slow_downs == 0 &&
			    (e = audit(x, "consent.request.slow_down", r->scopes, NULL, r->id,
			    "slow_down", "the first; later ones are counted")) != CS_OK)
				goto out;
			a->outcome = CONSENT_SLOW_DOWN;
		} else {
			a->outcome = CONSENT_PENDING;
		}
		/* SECURITY: the reason shown stays what the person may already be
		 * reading; the gateway is told it was not replaced. */
		a->reason_kept = reason != NULL && (r->reason == NULL || strcmp(r->reason, reason) != 0);
		if ((e = store_creq_poll(x->c, r->id, now, r->interval, slow)) != CS_OK)
			goto out;
	}
	if ((a->request_id = strdup(r->id)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	a->expires_in = r->expires_at - now;
	a->interval = r->interval;
	e = CS_OK;
out:
	free(joined);
	scope_set_clear(&have);
	return e;
}

/* (d): a new request, unless the person has too many pending already. */
static enum cs_err exchange_new(const struct audit_ctx *x, const struct config *cfg,
    int64_t user_id, const struct scope_set *requested, const struct scope_set *live_granted,
    const char *reason, struct consent_answer *a)
{
	enum cs_err e;
	int64_t count = 0, earliest = 0, now = x->now;
	struct scope_set all;
	struct store_creq_row r;
	char id[CONSENT_ID_LEN + 1];
	char *joined = NULL, *pre = NULL;

	memset(&all, 0, sizeof all);
	memset(&r, 0, sizeof r);
	if ((e = store_creq_count_pending(x->c, user_id, now, &count, &earliest)) != CS_OK)
		goto out;
	if (count >= cfg->consent_max_pending_per_user) {
		if ((joined = scope_set_join(requested)) == NULL) {
			e = CS_ENOMEM;
			goto out;
		}
		if ((e = audit(x, "consent.request.refused", joined, NULL, NULL, "refused",
		    "too many pending requests")) != CS_OK)
			goto out;
		a->outcome = CONSENT_TOO_MANY;
		a->retry_after = earliest - now >= 1 ? earliest - now : 1;
		goto out;
	}
	/* The person sees everything the agent would hold, with what the live
	 * consent already grants pre-ticked. */
	if ((e = set_union(&all, requested)) != CS_OK ||
	    (live_granted != NULL && (e = set_union(&all, live_granted)) != CS_OK))
		goto out;
	if ((joined = scope_set_join(&all)) == NULL ||
	    (pre = scope_set_join(live_granted)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	if ((e = random_id(id)) != CS_OK)
		goto out;
	r.id = id;
	r.user_id = user_id;
	r.agent = (char *)x->agent;
	r.resource = (char *)x->resource;
	r.scopes = joined;
	r.pre_granted = pre;
	r.reason = (char *)reason;
	r.status = "pending";
	r.created_at = now;
	r.expires_at = now + cfg->consent_request_ttl;
	r.last_poll_at = now;
	r.interval = cfg->consent_interval;
	if ((e = store_creq_insert(x->c, &r)) != CS_OK ||
	    (e = audit(x, "consent.request.created", joined, NULL, id, "pending", NULL)) != CS_OK)
		goto out;
	if ((a->request_id = strdup(id)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	a->outcome = CONSENT_REQUIRED;
	a->expires_in = cfg->consent_request_ttl;
	a->interval = cfg->consent_interval;
out:
	free(joined);
	free(pre);
	scope_set_clear(&all);
	return e;
}

enum cs_err consent_exchange(struct store_conn *c, const struct config *cfg,
    const char *issuer, const char *subject, const char *agent, const char *resource,
    const struct scope_set *requested, const char *reason, const char *actor, int64_t now,
    struct consent_answer *out)
{
	enum cs_err e;
	bool in_tx = false, have_live = false, covers = false;
	int64_t user_id = 0, denied_at = 0, lifted_at = 0;
	struct store_consent_row k;
	struct store_creq_row r;
	struct scope_set kg, kd;
	struct consent_answer a;
	struct audit_ctx x = { c, now, actor, subject, agent, resource };

	memset(&k, 0, sizeof k);
	memset(&r, 0, sizeof r);
	memset(&kg, 0, sizeof kg);
	memset(&kd, 0, sizeof kd);
	memset(&a, 0, sizeof a);
	if (c == NULL || cfg == NULL || issuer == NULL || subject == NULL || agent == NULL ||
	    resource == NULL || requested == NULL || requested->n == 0 || out == NULL)
		return CS_EINVAL;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	in_tx = true;
	if ((e = store_user_put(c, &(struct store_user){ .issuer = issuer,
	    .subject = subject, .now = now }, &user_id)) != CS_OK)
		goto out;

	/* (a) a live consent that covers the call: a grant. */
	e = store_consent_current(c, user_id, agent, resource, &k);
	if (e != CS_OK && e != CS_ENOENT)
		goto out;
	if (e == CS_OK && k.expires_at > now) {
		have_live = true;
		if ((e = set_from_db(k.granted, &kg)) != CS_OK ||
		    (e = set_from_db(k.declined, &kd)) != CS_OK)
			goto out;
		/* SECURITY: a consent whose provider connection was rejected covers
		 * nothing until the person reconnects (flow D): consent_required. */
		if (!k.reconnect_required &&
		    (e = live_covers(&kg, &kd, requested, &covers, &a.grant_scopes)) != CS_OK)
			goto out;
		if (covers) {
			if ((e = consent_from_row(&k, now, &a.live)) != CS_OK)
				goto out;
			a.outcome = CONSENT_GRANT;
			goto commit;
		}
	}

	a.reconnect = have_live && k.reconnect_required;
	/* (b) the pending request: expired, merged, or polled. */
	e = store_creq_pending(c, user_id, agent, resource, &r);
	if (e == CS_OK) {
		if ((e = exchange_pending(&x, &r, requested, reason, &a)) != CS_OK)
			goto out;
		goto commit;
	} else if (e != CS_ENOENT) {
		goto out;
	}

	/* (c) a recent "no" holds for deny_cooldown, unless the person lifted it:
	 * a denied request for the triple, or -- asked only for scopes the person
	 * unticked on the live consent -- those declined scopes (consent.h). */
	e = store_creq_last_denied(c, user_id, agent, resource, &denied_at, &lifted_at);
	if (e == CS_OK && lifted_at == 0 && now < denied_at + cfg->consent_deny_cooldown) {
		a.outcome = CONSENT_DENIED;
		a.denied_until = denied_at + cfg->consent_deny_cooldown;
		goto commit;
	} else if (e != CS_OK && e != CS_ENOENT) {
		goto out;
	}
	if (have_live && scope_set_subset(requested, &kd)) {
		bool held = false;
		if ((e = declined_block(c, cfg, &k, requested, now, NULL, &held)) != CS_OK)
			goto out;
		if (held) {
			a.outcome = CONSENT_DENIED;
			goto commit;
		}
	}

	/* (d) a new request. */
	if ((e = exchange_new(&x, cfg, user_id, requested, have_live ? &kg : NULL, reason,
	    &a)) != CS_OK)
		goto out;

commit:
	if ((e = store_commit(c)) != CS_OK)
		goto out;
	in_tx = false;
	*out = a;
	memset(&a, 0, sizeof a);
	e = CS_OK;
out:
	if (in_tx)
		store_rollback(c);
	store_consent_row_clear(&k);
	store_creq_row_clear(&r);
	scope_set_clear(&kg);
	scope_set_clear(&kd);
	consent_answer_clear(&a);
	return e;
}

/* --- flow B: the person's decision ------------------------------------- */

static bool agent_allows(const struct config_agent *ag, const char *resource, const char *scope)
{
	size_t rl = strlen(resource);
	for (size_t i = 0; ag != NULL && i < ag->nallow; i++) {
		const char *e = ag->allow[i];
		if (strncmp(e, resource, rl) == 0 && e[rl] == ':' && strcmp(e + rl + 1, scope) == 0)
			return true;
	}
	return false;
}

/* The approved selection, checked: non-empty, ⊆ the request, still configured
 * and allowed to the agent.  *sel is sorted and unique. */
static enum cs_err check_selection(const struct config *cfg, const char *agent,
    const char *resource, const struct scope_set *req, const struct consent_decision *d,
    struct scope_set *sel)
{
	enum cs_err e;
	const struct config_agent *ag = config_agent(cfg, agent);
	if (d->selected.n == 0 || d->selected.n > CONSENT_MAX_SCOPES)
		return CS_EINVAL;
	for (size_t i = 0; i < d->selected.n; i++) {
		const char *s = d->selected.v[i];
		/* SECURITY: granted ⊆ requested ∩ configured ∩ agent-allowed
		 * (invariant 7), whatever the form sent. */
		if (s == NULL || !scope_set_has(req, s) || config_scope(cfg, resource, s) == NULL ||
		    !agent_allows(ag, resource, s))
			return CS_EINVAL;
		if ((e = set_add(sel, s, strlen(s))) != CS_OK)
			return e;
	}
	return CS_OK;
}

/* Approve inside the open transaction: replace the current consent by a new one. */
static enum cs_err decide_approve(const struct audit_ctx *x, const struct config *cfg,
    const struct store_creq_row *r, const struct consent_decision *d, char **new_id)
{
	enum cs_err e;
	struct scope_set req, sel, declined;
	struct store_consent_row old, k;
	char id[CONSENT_ID_LEN + 1], detail[64], note[64];
	char *granted_s = NULL, *declined_s = NULL, *nid = NULL;
	int changed = 0;
	const struct config_resource *res = config_resource(cfg, r->resource);
	const struct config_agent *ag = config_agent(cfg, r->agent);

	memset(&req, 0, sizeof req);
	memset(&sel, 0, sizeof sel);
	memset(&declined, 0, sizeof declined);
	memset(&old, 0, sizeof old);
	memset(&k, 0, sizeof k);
	if ((e = set_from_db(r->scopes, &req)) != CS_OK)
		goto out;
	if ((e = check_selection(cfg, r->agent, r->resource, &req, d, &sel)) != CS_OK)
		goto out;
	if (res == NULL || d->duration < 1 || d->duration > res->max_consent) {
		e = CS_EINVAL;
		goto out;
	}
	if ((e = set_filter(&declined, &req, &sel, false)) != CS_OK)
		goto out;
	if ((granted_s = scope_set_join(&sel)) == NULL ||
	    (declined_s = scope_set_join(&declined)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	if ((e = random_id(id)) != CS_OK)
		goto out;
	if ((nid = strdup(id)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	/* The previous consent (live or merely expired: at most one is unrevoked)
	 * goes with its grants and refresh tokens in this same transaction. */
	e = store_consent_current(x->c, r->user_id, r->agent, r->resource, &old);
	if (e == CS_OK) {
		snprintf(detail, sizeof detail, "replaced by %s", id);
		if ((e = revoke_locked(x->c, &old, x->actor, REASON_REPLACED, detail, x->now,
		    &changed)) != CS_OK)
			goto out;
	} else if (e != CS_ENOENT) {
		goto out;
	}
	k.id = id;
	k.user_id = r->user_id;
	k.agent = r->agent;
	k.resource = r->resource;
	k.granted = granted_s;
	k.declined = declined_s;
	/* SECURITY: offline use only where the operator allowed it for this agent. */
	k.offline = d->offline && ag != NULL && ag->offline;
	k.created_at = x->now;
	k.expires_at = x->now + d->duration;
	k.request_id = r->id;
	if ((e = store_consent_insert(x->c, &k)) != CS_OK ||
	    (e = store_creq_decide(x->c, r->id, "approved", x->now, id)) != CS_OK ||
	    (e = audit(x, "consent.request.approved", granted_s, id, r->id, "approved",
	    slow_down_note(r->slow_downs, note))) != CS_OK)
		goto out;
	snprintf(detail, sizeof detail, "declined=%zu offline=%d duration=%lld", declined.n,
	    k.offline, (long long)d->duration);
	if ((e = audit(x, "consent.granted", granted_s, id, r->id, "ok", detail)) != CS_OK)
		goto out;
	*new_id = nid;
	nid = NULL;
	e = CS_OK;
out:
	free(nid);
	free(granted_s);
	free(declined_s);
	scope_set_clear(&req);
	scope_set_clear(&sel);
	scope_set_clear(&declined);
	store_consent_row_clear(&old);
	return e;
}

enum cs_err consent_decide(struct store_conn *c, const struct config *cfg, const char *request_id,
    int64_t user_id, const struct consent_decision *d, const char *actor, int64_t now,
    char **new_consent_id)
{
	return consent_decide_tx(c, cfg, request_id, user_id, d, actor, now, false, new_consent_id);
}

enum cs_err consent_decide_tx(struct store_conn *c, const struct config *cfg,
    const char *request_id, int64_t user_id, const struct consent_decision *d, const char *actor,
    int64_t now, bool caller_tx, char **new_consent_id)
{
	enum cs_err e;
	bool in_tx = false;               /* our own transaction is open */
	char *nid = NULL, note[64];
	struct store_creq_row r;
	struct audit_ctx x = { c, now, actor, NULL, NULL, NULL };

	memset(&r, 0, sizeof r);
	if (c == NULL || cfg == NULL || request_id == NULL || d == NULL)
		return CS_EINVAL;
	if (!caller_tx) {
		if ((e = store_begin(c)) != CS_OK)
			return e;
		in_tx = true;
	}
	if ((e = store_creq_get(c, request_id, &r)) != CS_OK)
		goto out;
	/* SECURITY: invariant 4 -- only the person the agent asked for decides. */
	if (user_id <= 0 || r.user_id != user_id) {
		e = CS_EPERM;
		goto out;
	}
	x.subject = r.subject;
	x.agent = r.agent;
	x.resource = r.resource;
	if (strcmp(r.status, "pending") != 0) {
		e = CS_EINVAL;
		goto out;
	}
	if (r.expires_at <= now) {
		/* Refuse without writing: the token exchange records the expiry and
		 * tells the gateway expired_token once (flow A), whoever looked first. */
		e = CS_EINVAL;
		goto out;
	}
	/* SECURITY: an approval counts only for the request as the person saw it:
	 * checked inside this transaction, so no merge can slip in between.  A
	 * denial grants nothing whatever the request holds now, so it stands for
	 * every version (an agent merging scopes cannot hold a denial off). */
	if (d->approve && (e = row_at_version(&r, d->version)) != CS_OK)
		goto out;
	if (d->approve) {
		if ((e = decide_approve(&x, cfg, &r, d, &nid)) != CS_OK)
			goto out;
	} else {
		/* Deny: the request only; a live consent stays as it was. */
		if ((e = store_creq_decide(c, r.id, "denied", now, NULL)) != CS_OK ||
		    (e = audit(&x, "consent.request.denied", r.scopes, NULL, r.id, "denied",
		    slow_down_note(r.slow_downs, note))) != CS_OK)
			goto out;
	}
	if (in_tx) {
		if ((e = store_commit(c)) != CS_OK)
			goto out;
		in_tx = false;
	}
	if (new_consent_id != NULL) {
		*new_consent_id = nid;
		nid = NULL;
	}
	e = CS_OK;
out:
	if (in_tx)
		store_rollback(c);
	free(nid);
	store_creq_row_clear(&r);
	return e;
}

enum cs_err consent_decision_check(const struct config *cfg, const struct consent_request *r,
    int64_t user_id, const struct consent_decision *d, int64_t now)
{
	enum cs_err e;
	struct scope_set sel;
	const struct config_resource *res;
	char have[CONSENT_VERSION_LEN + 1];

	if (cfg == NULL || r == NULL || d == NULL || r->status == NULL || r->agent == NULL ||
	    r->resource == NULL)
		return CS_EINVAL;
	/* SECURITY: invariant 4, as in consent_decide. */
	if (user_id <= 0 || r->user_id != user_id)
		return CS_EPERM;
	if (strcmp(r->status, "pending") != 0 || r->expires_at <= now || !d->approve)
		return CS_EINVAL;
	consent_request_version(r, have);
	if ((e = version_check(have, d->version)) != CS_OK)
		return e;
	res = config_resource(cfg, r->resource);
	if (res == NULL || d->duration < 1 || d->duration > res->max_consent)
		return CS_EINVAL;
	memset(&sel, 0, sizeof sel);
	e = check_selection(cfg, r->agent, r->resource, &r->scopes, d, &sel);
	scope_set_clear(&sel);
	return e;
}

/* --- reading ----------------------------------------------------------- */

enum cs_err consent_request_get(struct store_conn *c, const char *id, struct consent_request *out)
{
	enum cs_err e;
	struct store_creq_row r;
	memset(&r, 0, sizeof r);
	if (c == NULL || id == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_creq_get(c, id, &r)) == CS_OK)
		e = request_from_row(&r, out);
	store_creq_row_clear(&r);
	return e;
}

enum cs_err consent_get(struct store_conn *c, const char *id, int64_t now, struct consent *out)
{
	enum cs_err e;
	struct store_consent_row r;
	memset(&r, 0, sizeof r);
	if (c == NULL || id == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_consent_get(c, id, &r)) == CS_OK)
		e = consent_from_row(&r, now, out);
	store_consent_row_clear(&r);
	return e;
}

enum cs_err consent_current(struct store_conn *c, int64_t user_id, const char *agent,
    const char *resource, int64_t now, struct consent *out)
{
	enum cs_err e;
	struct store_consent_row r;
	memset(&r, 0, sizeof r);
	if (c == NULL || agent == NULL || resource == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_consent_current(c, user_id, agent, resource, &r)) != CS_OK)
		goto out;
	if (r.expires_at <= now) {
		e = CS_ENOENT;
		goto out;
	}
	e = consent_from_row(&r, now, out);
out:
	store_consent_row_clear(&r);
	return e;
}

enum cs_err consent_set_reconnect_required(struct store_conn *c, const char *consent_id)
{
	enum cs_err e;
	int changed = 0;
	if (c == NULL || consent_id == NULL)
		return CS_EINVAL;
	if ((e = store_consent_set_reconnect(c, consent_id, &changed)) != CS_OK)
		return e;
	return changed ? CS_OK : CS_ENOENT;
}

enum cs_err consent_list_for_user(struct store_conn *c, int64_t user_id, int64_t now, size_t max,
    struct consent **out, size_t *n)
{
	enum cs_err e;
	struct store_consent_row *rows = NULL;
	struct consent *v = NULL;
	size_t nrows = 0, i = 0;

	if (c == NULL || out == NULL || n == NULL)
		return CS_EINVAL;
	if ((e = store_consent_list_user(c, user_id, now, max, &rows, &nrows)) != CS_OK)
		goto out;
	if (nrows > 0 && (v = calloc(nrows, sizeof *v)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	for (; i < nrows; i++)
		if ((e = consent_from_row(&rows[i], now, &v[i])) != CS_OK)
			goto out;
	*out = v;
	*n = nrows;
	v = NULL;
out:
	consent_list_free(v, i);
	store_consent_rows_free(rows, nrows);
	return e;
}

enum cs_err consent_pending_for_user(struct store_conn *c, int64_t user_id, int64_t now,
    struct consent_request **out, size_t *n)
{
	enum cs_err e;
	struct store_creq_row *rows = NULL;
	struct consent_request *v = NULL;
	size_t nrows = 0, i = 0;

	if (c == NULL || out == NULL || n == NULL)
		return CS_EINVAL;
	if ((e = store_creq_list_pending(c, user_id, now, &rows, &nrows)) != CS_OK)
		goto out;
	if (nrows > 0 && (v = calloc(nrows, sizeof *v)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	for (; i < nrows; i++)
		if ((e = request_from_row(&rows[i], &v[i])) != CS_OK)
			goto out;
	*out = v;
	*n = nrows;
	v = NULL;
out:
	consent_request_list_free(v, i);
	store_creq_rows_free(rows, nrows);
	return e;
}
