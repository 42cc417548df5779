/* vault_key.h -- API keys and static tokens (docs/providers.md "API keys"): a
 * resource with credential = api_key has no provider; the person enters its
 * key once on consentd's page, and it is sealed in the consent's vault record
 * exactly as a provider's access token is (vault_priv.h's sealing, the same
 * AAD).  Release is vault.h's; the key is never shown, logged or audited. */
#ifndef CS_VAULT_KEY_H
#define CS_VAULT_KEY_H

#include <stdbool.h>
#include <stdint.h>
#include "config.h"
#include "consent.h"
#include "cs_err.h"
#include "store.h"
#include "vault.h"
#include "vault_connect.h"

#define VAULT_KEY_MAX 4096        /* the longest key accepted, in bytes */

/* true when key is one consentd accepts: 1..VAULT_KEY_MAX bytes of visible
 * ASCII (0x21..0x7e), so that no header or query it goes into can be split. */
bool vault_key_valid(const char *key);

enum vault_key_outcome {
	VAULT_KEY_STORED = 0,         /* sealed into a new record */
	VAULT_KEY_REPLACED,           /* the record's key replaced */
	VAULT_KEY_NOT_FOUND,          /* no such consent of this person, not live, or not an api_key resource */
	VAULT_KEY_INVALID,            /* the key is not vault_key_valid */
	VAULT_KEY__MAX
};

/* What the key page shows about consent_id: *k the consent (consent_clear it)
 * when it is who's, live and of an api_key resource, and *stored whether a
 * key is stored (never the key).  VAULT_KEY_NOT_FOUND in *out otherwise,
 * with *k untouched: another person's consent is answered as a missing one. */
enum cs_err vault_key_status(struct store_conn *c, const struct config *cfg, int64_t user_id,
    const char *consent_id, int64_t now, struct consent *k, bool *stored,
    enum vault_key_outcome *out) CS_MUST_CHECK;

/* Seals key into consent_id's vault record (a new one, or the key replaced
 * in the one there), for who (the consent must be who's, live and of an
 * api_key resource), with its audit entry ("vault.key_stored", never the key)
 * in the same transaction.  *out says what happened; an error only for
 * failures (nothing written). */
enum cs_err vault_key_store(struct vault *v, struct store_conn *c, const struct config *cfg,
    const struct vault_person *who, const char *consent_id, const char *key,
    enum vault_key_outcome *out) CS_MUST_CHECK;

#endif
