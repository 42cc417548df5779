/* consent_block.c -- the blocks a person's "no" holds for [consent]
 * deny_cooldown (consent.h): a denied request, or the scopes unticked on an
 * approval; listing them for /me and lifting one.  It also reads a stored scope
 * list for the whole family (consent_scopes_from_db), so that consent.c calls
 * down into this file and never the other way.  It must never lift or show
 * a block to anyone but the person whose decision it is. */
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "buf.h"
#include "consent_priv.h"

enum cs_err consent_scopes_from_db(const char *s, struct scope_set *out)
{
	enum cs_err e = scope_set_parse(s ? s : "", out);
	return e == CS_ENOMEM ? e : e != CS_OK ? CS_EDB : CS_OK;
}

void consent_block_clear(struct consent_block *b)
{
	if (b == NULL)
		return;
	free(b->request_id);
	free(b->agent);
	free(b->resource);
	scope_set_clear(&b->scopes);
	memset(b, 0, sizeof *b);
}

ARRAY_FREE_FN(struct consent_block, consent_block_clear, consent_block_list_free)

/* Fills b (zeroed by the caller) for the decided request r, held back until
 * cooldown after its decision; b's scopes move from *scopes. */
static enum cs_err block_fill(struct consent_block *b, const struct store_creq_row *r,
    struct scope_set *scopes, bool declined, int64_t cooldown)
{
	if ((b->request_id = strdup(r->id)) == NULL || (b->agent = strdup(r->agent)) == NULL ||
	    (b->resource = strdup(r->resource)) == NULL)
		return CS_ENOMEM;
	b->scopes = *scopes;
	memset(scopes, 0, sizeof *scopes);
	b->declined = declined;
	b->decided_at = r->decided_at;
	b->until = r->decided_at + cooldown;
	return CS_OK;
}

/* The block the scopes the person unticked on consent k hold at now: one
 * holds when k is live, the request that made it was decided less than
 * deny_cooldown ago and not lifted, and its person-declined scopes (k's
 * declined less those the provider did not grant, the request's narrowed)
 * are not empty and hold every scope of within (when not NULL). */
enum cs_err consent_declined_block(struct store_conn *c, const struct config *cfg,
    const struct store_consent_row *k, const struct scope_set *within, int64_t now,
    struct consent_block *out)
{
	enum cs_err e;
	struct store_creq_row r;
	struct scope_set kd, narrowed, mine;

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
	if ((e = consent_scopes_from_db(k->declined, &kd)) != CS_OK ||
	    (e = consent_scopes_from_db(r.narrowed, &narrowed)) != CS_OK ||
	    (e = scope_set_minus(&mine, &kd, &narrowed)) != CS_OK)
		goto out;
	if (mine.n == 0 || (within != NULL && !scope_set_subset(within, &mine)))
		goto out;
	if ((e = block_fill(out, &r, &mine, true, cfg->consent_deny_cooldown)) != CS_OK)
		consent_block_clear(out);
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
		if ((e = consent_scopes_from_db(denied[i].scopes, &sc)) == CS_OK)
			e = block_fill(&v[nv++], &denied[i], &sc, false, cfg->consent_deny_cooldown);
		scope_set_clear(&sc);
		if (e != CS_OK)
			goto out;
	}
	for (size_t i = 0; i < nk; i++) {
		if ((e = consent_declined_block(c, cfg, &ks[i], NULL, now, &v[nv])) != CS_OK)
			goto out;
		if (v[nv].request_id != NULL)
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

/* The scopes request r's decision holds back at now (malloc'd into *scopes;
 * NULL when it holds nothing), r being denied or approved. */
static enum cs_err held_scopes(struct store_conn *c, const struct config *cfg,
    const struct store_creq_row *r, int64_t now, char **scopes)
{
	enum cs_err e = CS_OK;
	struct store_consent_row k;
	struct consent_block b;

	*scopes = NULL;
	if (strcmp(r->status, "denied") == 0) {
		if (r->cooldown_lifted_at == 0 && now < r->decided_at + cfg->consent_deny_cooldown &&
		    (*scopes = strdup(r->scopes)) == NULL)
			return CS_ENOMEM;
		return CS_OK;
	}
	memset(&k, 0, sizeof k);
	memset(&b, 0, sizeof b);
	e = store_consent_get(c, r->consent_id, &k);
	if (e == CS_ENOENT)
		e = CS_OK;
	else if (e == CS_OK && (e = consent_declined_block(c, cfg, &k, NULL, now, &b)) == CS_OK &&
	    b.request_id != NULL && (*scopes = scope_set_join(&b.scopes)) == NULL)
		e = CS_ENOMEM;
	store_consent_row_clear(&k);
	consent_block_clear(&b);
	return e;
}

enum cs_err consent_allow_asking(struct store_conn *c, const struct config *cfg,
    const char *request_id, const struct consent_actor *who, enum consent_lift_outcome *out)
{
	enum cs_err e;
	enum consent_lift_outcome o = CONSENT_LIFT_NOTHING;
	int changed = 0;
	struct store_creq_row r;
	char *scopes = NULL;

	memset(&r, 0, sizeof r);
	if (c == NULL || cfg == NULL || request_id == NULL || who == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	e = store_creq_get(c, request_id, &r);
	if (e == CS_ENOENT) {
		e = CS_OK;
		o = CONSENT_LIFT_UNKNOWN;
		goto out;
	} else if (e != CS_OK) {
		goto out;
	}
	/* SECURITY: a person lifts only the blocks of their own decisions. */
	if (who->user_id <= 0 || r.user_id != who->user_id) {
		o = CONSENT_LIFT_NOT_YOURS;
		goto out;
	}
	if (strcmp(r.status, "denied") != 0 &&
	    (strcmp(r.status, "approved") != 0 || r.consent_id == NULL)) {
		o = CONSENT_LIFT_UNDECIDED;   /* pending or expired: no decision holds anyone back */
		goto out;
	}
	/* Lifted already, or the cooldown is over: nothing to do. */
	if ((e = held_scopes(c, cfg, &r, who->now, &scopes)) != CS_OK || scopes == NULL)
		goto out;
	if ((e = store_creq_lift_cooldown(c, r.id, who->now, &changed)) != CS_OK)
		goto out;
	if (changed && (e = audit_append(c, &(struct audit_entry){ .ts = who->now,
	    .actor = who->actor, .action = "consent.cooldown_lifted", .subject = r.subject,
	    .agent = r.agent, .resource = r.resource, .scopes = scopes,
	    .consent_id = r.consent_id, .request_id = r.id, .outcome = "ok",
	    .detail = strcmp(r.status, "denied") == 0 ? "denied" : "declined" })) != CS_OK)
		goto out;
	o = changed ? CONSENT_LIFTED : CONSENT_LIFT_NOTHING;
out:
	if (e == CS_OK && (e = store_commit(c)) == CS_OK)
		*out = o;
	else
		store_rollback(c);
	free(scopes);
	store_creq_row_clear(&r);
	return e;
}
