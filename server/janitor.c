/* janitor.c -- retention ([retention] in consentd.conf): deletes finished rows
 * in batches of batch_size, one short transaction per batch, and prunes the
 * oldest audit entries when audit_days is set.  It must never remove a row a
 * live flow may still read; the grace periods below say what "finished" means:
 *
 *   grants           exp + grace.  An expired grant is inactive from its exp
 *                    claim alone (grant.c checks exp before the row), so the
 *                    row, and a revocation recorded in it, is kept as long as
 *                    the grant could be presented, and then grace longer.
 *   consent requests pending/expired: expires_at + grace; approved: also
 *                    decided_at + request_ttl + grace (the gateway's last poll,
 *                    the person's done page); denied: also decided_at +
 *                    max(request_ttl, deny_cooldown) + grace (the cooldown
 *                    reads the latest denied request).
 *   approvals        only after expires_at + grace, and: used: used_at + grace;
 *                    denied/expired/cancelled: decided_at + grace; approved and
 *                    unused: decided_at + request_ttl + grace (the redemption
 *                    window, approval.c); pending: nothing more.
 *   events           delivered_at + grace (undelivered ones are retried forever).
 *   consents         revoked_at + revoked_consent_days, with their grants,
 *                    refresh tokens and bindings, approvals and delivered events,
 *                    and never while a vault record or outbox entry still names
 *                    the consent, nor, with [gateway] events_uri set, while its
 *                    revocation event is undelivered (without a receiver events
 *                    wait for one; past the consent's age they go with it).
 *   authz requests   pending /authorize requests (migration 0019):
 *                    expires_at + grace.
 *   authz codes      authorization codes, used or not: expires_at + grace.
 *                    Until then a used code presented again is a reuse
 *                    (store_authz.h), which revokes what its first use
 *                    issued; after it, an unknown code.
 *   mcp elicitations the MCP gateway's URL elicitations (migration 0024):
 *                    expires_at + grace (their approval's or consent
 *                    request's expiry), notified or not.
 *   mcp sessions     2025-11-25 sessions: expires_at + grace (idle past
 *                    their lifetime; mcp_session.h).
 *   audit            entries older than audit_days, or beyond the newest
 *                    audit_keep (both 0, the default: kept forever); the head
 *                    is never pruned, and audit_prune records the anchor.
 * The vault's revocation outbox deletes its own entries when they finish
 * (vault.c); sessions, login and connect states are purged by the maintenance
 * pass (app.c).  This file holds no SQL (store_janitor.c). */
#include <inttypes.h>
#include <string.h>

#include "audit.h"
#include "janitor.h"
#include "log.h"
#include "store_janitor.h"

#define JANITOR_MAX_BATCHES 1000     /* per kind and pass: a pass always ends */
#define DAY 86400

static const char *const kind_names[JANITOR__MAX] = {
	[JANITOR_GRANTS] = "grants",
	[JANITOR_REQUESTS] = "consent_requests",
	[JANITOR_APPROVALS] = "approvals",
	[JANITOR_EVENTS] = "events",
	[JANITOR_CONSENTS] = "revoked_consents",
	[JANITOR_AUTHZ_REQUESTS] = "authz_requests",
	[JANITOR_AUTHZ_CODES] = "authz_codes",
	[JANITOR_MCP_ELICITATIONS] = "mcp_elicitations",
	[JANITOR_MCP_SESSIONS] = "mcp_sessions",
};

void janitor_cutoffs(const struct config *cfg, int64_t now, struct store_janitor_cutoffs *out)
{
	int64_t ttl = cfg->consent_request_ttl, cool = cfg->consent_deny_cooldown;
	out->done_before = now - cfg->retention_grace;
	out->decided_before = out->done_before - ttl;
	out->denied_before = out->done_before - (cool > ttl ? cool : ttl);
	out->consents_before = now - cfg->retention_revoked_consent_days * DAY;
	out->keep_waiting_events = cfg->events_uri != NULL;
}

/* Batches of one kind until one comes back short. */
static enum cs_err run_kind(struct store_conn *c, enum store_janitor_kind kind,
    const struct store_janitor_cutoffs *cut, int64_t limit, struct janitor_stats *st)
{
	enum cs_err e;
	for (int i = 0; i < JANITOR_MAX_BATCHES; i++) {
		int64_t n = 0;
		if ((e = store_begin(c)) != CS_OK)
			return e;
		if ((e = store_end(c, store_janitor_batch(c, kind, cut, limit, &n))) != CS_OK)
			return e;
		st->removed[kind] += n;
		st->batches++;
		if (n < limit)
			break;
	}
	return CS_OK;
}

enum cs_err janitor_run(struct store_conn *c, const struct config *cfg, int64_t now,
    struct janitor_stats *out)
{
	struct store_janitor_cutoffs cut;
	struct janitor_stats st;
	enum cs_err e = CS_OK;

	if (c == NULL || cfg == NULL)
		return CS_EINVAL;
	memset(&st, 0, sizeof st);
	janitor_cutoffs(cfg, now, &cut);
	for (int k = 0; k < JANITOR__MAX && e == CS_OK; k++)
		e = run_kind(c, (enum store_janitor_kind)k, &cut, cfg->retention_batch_size, &st);
	if (e == CS_OK && (cfg->retention_audit_days > 0 || cfg->retention_audit_keep > 0)) {
		int64_t before = cfg->retention_audit_days > 0 ? now - cfg->retention_audit_days * DAY : 0;
		for (int i = 0; i < JANITOR_MAX_BATCHES; i++) {
			int64_t n = 0;
			if ((e = audit_prune(c, before, cfg->retention_audit_keep,
			    cfg->retention_batch_size, now, &n)) != CS_OK)
				break;
			st.audit_pruned += n;
			if (n == 0)
				break;
			st.batches++;
		}
	}
	for (int k = 0; k < JANITOR__MAX; k++)
		if (st.removed[k] > 0)
			log_msg(LOG_INFO, "janitor: removed %" PRId64 " %s", st.removed[k],
			    kind_names[k]);
	if (st.audit_pruned > 0)
		log_msg(LOG_INFO, "janitor: pruned %" PRId64 " audit entries", st.audit_pruned);
	if (out != NULL)
		*out = st;
	return e;
}
