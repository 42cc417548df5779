/* consent_priv.h -- what consent.c, consent_decide.c, consent_reconnect.c and
 * consent_block.c share, as store_priv.h is for the store: no other module includes it.
 * Everything here runs inside the caller's transaction. */
#ifndef CS_CONSENT_PRIV_H
#define CS_CONSENT_PRIV_H

#include "consent.h"
#include "store_consent.h"

struct audit_entry;

/* The revoke reason decide_approve writes for the consent a new one replaces. */
#define CONSENT_REASON_REPLACED "replaced"

/* A stored scope list; anything unparsable there is a damaged database (CS_EDB)
 * (consent_block.c, the family's lowest file). */
enum cs_err consent_scopes_from_db(const char *s, struct scope_set *out) CS_MUST_CHECK;
/* "slow_down answered N times" for the audit entry that ends a request, or
 * NULL when it never was. */
const char *consent_slow_down_note(int64_t n, char buf[64]);
/* Opens the request r, whose id, person, agent, resource, scopes, pre-ticked
 * scopes and reason the caller set: pending, asked at about->ts, its expiry
 * and poll interval from cfg; inserted and audited "consent.request.created"
 * (outcome pending, r's scopes and id) with about's actor, person, agent,
 * resource, consent and detail. */
enum cs_err consent_request_open(struct store_conn *c, const struct config *cfg,
    struct store_creq_row *r, const struct audit_entry *about) CS_MUST_CHECK;
/* Ends the undecided request r, whose time ran out, as "expired" at
 * about->ts, audited "consent.request.expired" (r's scopes, id and slow_down
 * count) with about's actor, person, agent and resource. */
enum cs_err consent_request_expire(struct store_conn *c, const struct store_creq_row *r,
    const struct audit_entry *about) CS_MUST_CHECK;
/* Revokes the unrevoked consent k with its grants and refresh tokens, and
 * audits it (detail in the entry).  *changed 0 when k was revoked already
 * (then nothing is written). */
enum cs_err consent_revoke_locked(struct store_conn *c, const struct store_consent_row *k,
    const struct consent_actor *who, const char *reason, const char *detail,
    int *changed) CS_MUST_CHECK;
/* The block the scopes the person unticked on consent k hold at now (see
 * consent_block.c); *out (zeroed by the caller) is filled when one holds
 * every scope of within (NULL: any), and stays zeroed otherwise. */
enum cs_err consent_declined_block(struct store_conn *c, const struct config *cfg,
    const struct store_consent_row *k, const struct scope_set *within, int64_t now,
    struct consent_block *out) CS_MUST_CHECK;
/* A block's strings and scopes, freed; b left zeroed.  NULL-safe. */
void consent_block_clear(struct consent_block *b);

#endif
