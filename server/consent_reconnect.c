/* consent_reconnect.c -- the person's own way back to a provider connection that
 * needs them (issue #33): from /me, a consent request for the agent, resource and
 * scopes of their consent marked reconnect_required, which the consent page then
 * approves and the provider connects (replacing the broken consent).  It acts only
 * on the person's own consent, never asks for more than that consent granted, and
 * writes nothing for a consent that does not need reconnecting. */
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "audit.h"
#include "b64.h"
#include "consent_priv.h"

/* The scopes of granted that are still configured and that agent may still ask
 * for at resource, as a stored scope list (*out malloc'd; "" when none). */
static enum cs_err still_askable(const struct config *cfg, const char *agent,
    const char *resource, const char *granted, char **out)
{
	enum cs_err e;
	struct agent_view ag;
	struct scope_set g = { .n = 0 }, keep = { .n = 0 };
	*out = NULL;
	if ((e = consent_scopes_from_db(granted, &g)) != CS_OK)
		return e;
	if (agent_resolve(cfg, agent, &ag) && config_resource(cfg, resource) != NULL)
		for (size_t i = 0; i < g.n && e == CS_OK; i++)
			/* SECURITY: never more than the consent granted, and only what
			 * the operator still allows (the consent page checks again). */
			if (config_scope(cfg, resource, g.v[i]) != NULL &&
			    agent_may_ask(&ag, resource, g.v[i]))
				e = scope_set_add(&keep, g.v[i], strlen(g.v[i]));
	if (e == CS_OK && (*out = scope_set_join(&keep)) == NULL)
		e = CS_ENOMEM;
	scope_set_clear(&g);
	scope_set_clear(&keep);
	return e;
}

/* Steps 2-4 of consent_reconnect, in its transaction, for consent k. */
static enum cs_err reconnect_in_tx(struct store_conn *c, const struct config *cfg,
    const struct store_consent_row *k, const struct consent_actor *who,
    struct consent_reconnect *out)
{
	enum cs_err e;
	struct store_creq_row r, nr;
	char id[CONSENT_ID_LEN + 1];
	char *scopes = NULL;
	int64_t now = who->now;

	memset(&r, 0, sizeof r);
	memset(&nr, 0, sizeof nr);
	/* 2. A request already waits for the person (the agent asked since the
	 * connection broke): that one is the way back. */
	e = store_creq_pending(c, k->user_id, k->agent, k->resource, &r);
	if (e == CS_OK && r.expires_at > now) {
		if (strlen(r.id) != CONSENT_ID_LEN) {
			e = CS_EDB;               /* not an id consentd made */
			goto out;
		}
		memcpy(out->request_id, r.id, CONSENT_ID_LEN + 1);
		out->outcome = CONSENT_RECONNECT_PENDING;
		goto out;
	}
	if (e == CS_OK) {
		/* Expired undecided: ended as the token exchange would end it. */
		if ((e = consent_request_expire(c, &r, &(struct audit_entry){ .ts = now,
		    .actor = who->actor, .subject = k->subject, .agent = k->agent,
		    .resource = k->resource })) != CS_OK)
			goto out;
	} else if (e != CS_ENOENT) {
		goto out;
	}
	/* 3. What can still be asked for. */
	if ((e = still_askable(cfg, k->agent, k->resource, k->granted, &scopes)) != CS_OK)
		goto out;
	if (scopes[0] == '\0') {
		out->outcome = CONSENT_RECONNECT_UNAVAILABLE;
		goto out;
	}
	/* 4. The request, its scopes pre-ticked (the person gave them before). */
	if ((e = b64url_random_id(id)) != CS_OK)
		goto out;
	nr.id = id;
	nr.user_id = k->user_id;
	nr.agent = k->agent;
	nr.resource = k->resource;
	nr.scopes = scopes;
	nr.pre_granted = scopes;
	if ((e = consent_request_open(c, cfg, &nr, &(struct audit_entry){ .ts = now,
	    .actor = who->actor, .subject = k->subject, .agent = k->agent,
	    .resource = k->resource, .consent_id = k->id, .detail = "reconnect from /me" })) != CS_OK)
		goto out;
	memcpy(out->request_id, id, sizeof id);
	out->outcome = CONSENT_RECONNECT_ASKED;
out:
	free(scopes);
	store_creq_row_clear(&r);
	return e;
}

enum cs_err consent_reconnect(struct store_conn *c, const struct config *cfg,
    const char *consent_id, const struct consent_actor *who, struct consent_reconnect *out)
{
	enum cs_err e;
	struct store_consent_row k;
	if (c == NULL || cfg == NULL || consent_id == NULL || who == NULL || who->user_id <= 0 ||
	    out == NULL)
		return CS_EINVAL;
	memset(out, 0, sizeof *out);
	memset(&k, 0, sizeof k);
	if ((e = store_begin(c)) != CS_OK)
		return e;
	/* 1. The person's own consent, live and marked. */
	e = store_consent_get(c, consent_id, &k);
	if (e == CS_ENOENT) {
		out->outcome = CONSENT_RECONNECT_UNKNOWN;
		e = CS_OK;
	} else if (e == CS_OK && k.user_id != who->user_id) {
		out->outcome = CONSENT_RECONNECT_NOT_YOURS;
	} else if (e == CS_OK && (k.revoked_at != 0 || k.expires_at <= who->now ||
	    !k.reconnect_required)) {
		out->outcome = CONSENT_RECONNECT_NOT_NEEDED;
	} else if (e == CS_OK) {
		e = reconnect_in_tx(c, cfg, &k, who, out);
	}
	if (e == CS_OK)
		e = store_commit(c);
	if (e != CS_OK) {
		store_rollback(c);
		memset(out, 0, sizeof *out);
	}
	store_consent_row_clear(&k);
	return e;
}
