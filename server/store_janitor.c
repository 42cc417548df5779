/* store_janitor.c -- the SQL of the janitor (migration 0016): bounded batches
 * of finished rows deleted by rowid.  It decides nothing about what is
 * finished beyond the cut-offs it is given, and never builds SQL from input. */
#include <stddef.h>

#include "store_janitor.h"
#include "store_priv.h"

/* Grants: introspection and validation answer "inactive" for an expired grant
 * from its exp claim alone (grant.c), so a row past exp + grace is no longer
 * read; a revoked one is kept until then too, so that its revocation holds
 * for as long as the grant itself could be presented. */
static const char SQL_GRANTS[] =
    "DELETE FROM grants WHERE rowid IN (SELECT rowid FROM grants WHERE expires_at <= ?1 LIMIT ?2)";

/* Consent requests: a pending or expired one after its expiry; an approved one
 * after its expiry and request_ttl after the decision (the gateway's last
 * poll, the person's done page); a denied one once its cooldown is over. */
static const char SQL_REQUESTS[] =
    "DELETE FROM consent_requests WHERE rowid IN (SELECT rowid FROM consent_requests WHERE "
    "(status IN ('pending', 'expired') AND expires_at <= ?1) OR "
    "(status = 'approved' AND expires_at <= ?1 AND decided_at <= ?2) OR "
    "(status = 'denied' AND expires_at <= ?1 AND decided_at <= ?3) LIMIT ?4)";

/* Approvals: used, denied, expired or cancelled ones after their expiry and
 * decision; an approved, unused one once it can no longer be redeemed
 * (decided_at + request_ttl, approval.c); a pending one after its expiry. */
static const char SQL_APPROVALS[] =
    "DELETE FROM approvals WHERE rowid IN (SELECT rowid FROM approvals WHERE expires_at <= ?1 AND ("
    "(status = 'used' AND used_at <= ?1) OR "
    "(status IN ('denied', 'expired', 'cancelled') AND decided_at <= ?1) OR "
    "(status = 'approved' AND decided_at <= ?2) OR status = 'pending') LIMIT ?3)";

/* Revocation events: delivered ones (an undelivered one is retried forever). */
static const char SQL_EVENTS[] =
    "DELETE FROM events_outbox WHERE id IN (SELECT id FROM events_outbox "
    "WHERE delivered_at > 0 AND delivered_at <= ?1 LIMIT ?2)";

/* Pending /authorize requests (migration 0019) after their expiry: the
 * person's sign-in and decision come back to them only until then. */
static const char SQL_AUTHZ_REQUESTS[] =
    "DELETE FROM authz_requests WHERE id IN (SELECT id FROM authz_requests "
    "WHERE expires_at <= ?1 LIMIT ?2)";

/* Authorization codes, used or not, after their expiry: until then a used
 * code presented again is told apart as a reuse (store_authz_code_take),
 * which revokes what its first use issued. */
static const char SQL_AUTHZ_CODES[] =
    "DELETE FROM authz_codes WHERE code_hash IN (SELECT code_hash FROM authz_codes "
    "WHERE expires_at <= ?1 LIMIT ?2)";

/* The MCP gateway's URL elicitations (migration 0024) after their expiry (the
 * approval's or consent request's own), notified or not, and its 2025
 * sessions after theirs (idle past their lifetime): neither is read then. */
static const char SQL_MCP_ELICITATIONS[] =
    "DELETE FROM mcp_elicitations WHERE id IN (SELECT id FROM mcp_elicitations "
    "WHERE expires_at <= ?1 LIMIT ?2)";
static const char SQL_MCP_SESSIONS[] =
    "DELETE FROM mcp_sessions WHERE (endpoint, session_hash) IN (SELECT endpoint, "
    "session_hash FROM mcp_sessions WHERE expires_at <= ?1 LIMIT ?2)";

/* Consents revoked long ago, and the rows that refer to them.  Never one
 * whose vault record or revocation outbox entry is still there, nor, when a
 * receiver is configured (?3), one whose revocation event still waits: those
 * are work in progress.  Without a receiver, events wait for one to be
 * configured (events.h); past the consent's age they go with it.  ?3 <> 0,
 * not ?3 alone: PostgreSQL takes no integer as a condition. */
#define CONSENT_BATCH \
	"SELECT k.id FROM consents k WHERE k.revoked_at > 0 AND k.revoked_at <= ?1 " \
	"AND NOT EXISTS (SELECT 1 FROM vault_records v WHERE v.consent_id = k.id) " \
	"AND NOT EXISTS (SELECT 1 FROM vault_outbox o WHERE o.consent_id = k.id) " \
	"AND NOT (?3 <> 0 AND EXISTS (SELECT 1 FROM events_outbox e WHERE e.consent_id = k.id " \
	"AND e.delivered_at = 0)) ORDER BY k.revoked_at, k.id LIMIT ?2"
static const char SQL_CONSENT_GRANTS[] =
    "DELETE FROM grants WHERE consent_id IN (" CONSENT_BATCH ")";
static const char SQL_CONSENT_BINDINGS[] =
    "DELETE FROM refresh_bindings WHERE family IN (SELECT family FROM refresh_tokens "
    "WHERE consent_id IN (" CONSENT_BATCH "))";
static const char SQL_CONSENT_AUDIENCES[] =
    "DELETE FROM refresh_audiences WHERE family IN (SELECT family FROM refresh_tokens "
    "WHERE consent_id IN (" CONSENT_BATCH "))";
static const char SQL_CONSENT_REFRESH[] =
    "DELETE FROM refresh_tokens WHERE consent_id IN (" CONSENT_BATCH ")";
static const char SQL_CONSENT_APPROVALS[] =
    "DELETE FROM approvals WHERE consent_id IN (" CONSENT_BATCH ")";
static const char SQL_CONSENT_RULES[] =
    "DELETE FROM standing_rules WHERE consent_id IN (" CONSENT_BATCH ")";
static const char SQL_CONSENT_EVENTS[] =
    "DELETE FROM events_outbox WHERE consent_id IN (" CONSENT_BATCH ")";
static const char SQL_CONSENTS[] = "DELETE FROM consents WHERE id IN (" CONSENT_BATCH ")";

static enum cs_err consents_batch(struct store_conn *c, int64_t before, int64_t keep_waiting,
    int64_t limit, int64_t *removed)
{
	/* The same ordered selection in every statement, inside one transaction:
	 * the dependants of exactly the consents deleted last go first. */
	static const char *const deps[] = { SQL_CONSENT_GRANTS, SQL_CONSENT_BINDINGS,
		SQL_CONSENT_AUDIENCES, SQL_CONSENT_REFRESH, SQL_CONSENT_APPROVALS, SQL_CONSENT_RULES, SQL_CONSENT_EVENTS };
	enum cs_err e;
	for (size_t i = 0; i < sizeof deps / sizeof deps[0]; i++)
		if ((e = store_run(c, deps[i], STORE_VALS(SV_INT(before), SV_INT(limit),
		    SV_INT(keep_waiting)))) != CS_OK)
			return e;
	if ((e = store_run(c, SQL_CONSENTS, STORE_VALS(SV_INT(before), SV_INT(limit),
	    SV_INT(keep_waiting)))) != CS_OK)
		return e;
	*removed = store_changes(c);
	return CS_OK;
}

enum cs_err store_janitor_batch(struct store_conn *c, enum store_janitor_kind kind,
    const struct store_janitor_cutoffs *cut, int64_t limit, int64_t *removed)
{
	enum cs_err e;

	if (c == NULL || cut == NULL || removed == NULL || limit < 1)
		return CS_EINVAL;
	switch (kind) {
	case JANITOR_GRANTS:
		e = store_run(c, SQL_GRANTS, STORE_VALS(SV_INT(cut->done_before), SV_INT(limit)));
		break;
	case JANITOR_REQUESTS:
		e = store_run(c, SQL_REQUESTS, STORE_VALS(SV_INT(cut->done_before),
		    SV_INT(cut->decided_before), SV_INT(cut->denied_before), SV_INT(limit)));
		break;
	case JANITOR_APPROVALS:
		e = store_run(c, SQL_APPROVALS, STORE_VALS(SV_INT(cut->done_before),
		    SV_INT(cut->decided_before), SV_INT(limit)));
		break;
	case JANITOR_EVENTS:
		e = store_run(c, SQL_EVENTS, STORE_VALS(SV_INT(cut->done_before), SV_INT(limit)));
		break;
	case JANITOR_AUTHZ_REQUESTS:
		e = store_run(c, SQL_AUTHZ_REQUESTS, STORE_VALS(SV_INT(cut->done_before),
		    SV_INT(limit)));
		break;
	case JANITOR_AUTHZ_CODES:
		e = store_run(c, SQL_AUTHZ_CODES, STORE_VALS(SV_INT(cut->done_before), SV_INT(limit)));
		break;
	case JANITOR_MCP_ELICITATIONS:
		e = store_run(c, SQL_MCP_ELICITATIONS, STORE_VALS(SV_INT(cut->done_before),
		    SV_INT(limit)));
		break;
	case JANITOR_MCP_SESSIONS:
		e = store_run(c, SQL_MCP_SESSIONS, STORE_VALS(SV_INT(cut->done_before), SV_INT(limit)));
		break;
	case JANITOR_CONSENTS:
		return consents_batch(c, cut->consents_before, cut->keep_waiting_events ? 1 : 0, limit,
		    removed);
	default:
		return CS_EINVAL;
	}
	if (e == CS_OK)
		*removed = store_changes(c);
	return e;
}
