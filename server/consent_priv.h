/* consent_priv.h -- what consent.c, consent_decide.c and consent_block.c
 * share, as store_priv.h is for the store: no other module includes it.
 * Everything here runs inside the caller's transaction. */
#ifndef CS_CONSENT_PRIV_H
#define CS_CONSENT_PRIV_H

#include "consent.h"
#include "store_consent.h"

/* The revoke reason decide_approve writes for the consent a new one replaces. */
#define CONSENT_REASON_REPLACED "replaced"

/* A stored scope list; anything unparsable there is a damaged database (CS_EDB)
 * (consent_block.c, the family's lowest file). */
enum cs_err consent_scopes_from_db(const char *s, struct scope_set *out) CS_MUST_CHECK;
/* "slow_down answered N times" for the audit entry that ends a request, or
 * NULL when it never was. */
const char *consent_slow_down_note(int64_t n, char buf[64]);
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
