/* vault_key.c -- API keys and static tokens (vault_key.h): the key a person
 * enters on consentd's page, sealed into the consent's vault record with the
 * vault's own sealing (vault_seal_pair: the same AEAD and AAD as a provider's
 * tokens).  It must never return, log or audit a key, nor store one for a
 * consent that is not the person's own. */
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "b64.h"
#include "store_vault.h"
#include "vault_key.h"
#include "vault_priv.h"

bool vault_key_valid(const char *key)
{
	size_t n;
	if (key == NULL || (n = strlen(key)) == 0 || n > VAULT_KEY_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)key[i] < 0x21 || (unsigned char)key[i] > 0x7e)
			return false;
	return true;
}

/* *k when consent_id is user_id's live consent of an api_key resource. */
static enum cs_err own_key_consent(struct store_conn *c, const struct config *cfg,
    int64_t user_id, const char *consent_id, int64_t now, struct consent *k, bool *ok)
{
	const struct config_resource *r;
	enum cs_err e;
	*ok = false;
	memset(k, 0, sizeof *k);
	if ((e = consent_get(c, consent_id, now, k)) == CS_ENOENT)
		return CS_OK;
	if (e != CS_OK)
		return e;
	/* SECURITY: another person's consent is answered as a missing one. */
	r = config_resource(cfg, k->resource);
	*ok = k->user_id == user_id && consent_is_live(k, now) && r != NULL &&
	    r->credential == CREDENTIAL_API_KEY;
	if (!*ok)
		consent_clear(k);
	return CS_OK;
}

enum cs_err vault_key_status(struct store_conn *c, const struct config *cfg, int64_t user_id,
    const char *consent_id, int64_t now, struct consent *k, bool *stored,
    enum vault_key_outcome *out)
{
	struct consent mine;
	bool ok;
	enum cs_err e;
	if (c == NULL || cfg == NULL || consent_id == NULL || k == NULL || stored == NULL ||
	    out == NULL)
		return CS_EINVAL;
	if ((e = own_key_consent(c, cfg, user_id, consent_id, now, &mine, &ok)) != CS_OK)
		return e;
	*out = VAULT_KEY_NOT_FOUND;
	if (!ok)
		return CS_OK;
	*stored = store_vault_record_exists(c, mine.id) != 0;
	*k = mine;
	*out = VAULT_KEY_STORED;
	return CS_OK;
}

/* The key sealed into k's record: a new record, or the one there updated.
 * Inside the caller's transaction. */
static enum cs_err key_write(struct vault *v, struct store_conn *c, const struct consent *k,
    const char *key, int64_t now, enum vault_key_outcome *out)
{
	struct store_vault_record cur, rec;
	struct vault_sealed sl = { NULL, 0, NULL, 0, NULL };
	char rid[VAULT_RECORD_ID_LEN + 1];
	/* A key has no expiry of its own: it lives as long as its consent. */
	int64_t until = k->expires_at > 0 ? k->expires_at : now + 315360000;
	enum cs_err e;
	memset(&cur, 0, sizeof cur);
	memset(&rec, 0, sizeof rec);
	e = store_vault_record_by_consent(c, k->id, &cur);
	if (e == CS_ENOENT) {
		if ((e = b64url_random_id(rid)) != CS_OK)
			goto out;
	} else if (e != CS_OK) {
		goto out;
	}
	/* SECURITY: invariant 3 -- sealed bound to (record, consent, subject,
	 * resource), as every vault record. */
	if ((e = vault_seal_pair(v->mk, &(struct vault_aad){ cur.id != NULL ? cur.id : rid, k->id,
	    k->subject, k->resource }, key, NULL, &sl)) != CS_OK)
		goto out;
	if (cur.id != NULL) {
		e = store_vault_record_refreshed(c, cur.id, &(struct store_vault_refresh){
		    .blobs = { .a = sl.access, .a_len = sl.access_len, .master_kid = v->mk->kid },
		    .provider_scopes = "", .access_expires_at = until }, now);
		*out = VAULT_KEY_REPLACED;
		goto out;
	}
	rec.id = rid;
	rec.consent_id = k->id;
	rec.user_id = k->user_id;
	rec.subject = k->subject;
	rec.agent = k->agent;
	rec.resource = k->resource;
	rec.provider_scopes = "";
	rec.token_type = VAULT_KEY_TOKEN_TYPE;
	rec.access_sealed = sl.access;
	rec.access_sealed_len = sl.access_len;
	rec.access_expires_at = until;
	rec.master_kid = (char *)v->mk->kid;
	rec.created_at = now;
	rec.updated_at = now;
	e = store_vault_record_insert(c, &rec);
	*out = VAULT_KEY_STORED;
out:
	blob_free(sl.access, sl.access_len);
	store_vault_record_clear(&cur);
	return e;
}

enum cs_err vault_key_store(struct vault *v, struct store_conn *c, const struct config *cfg,
    const struct vault_person *who, const char *consent_id, const char *key,
    enum vault_key_outcome *out)
{
	struct consent k;
	enum vault_key_outcome o = VAULT_KEY_NOT_FOUND;
	bool ok;
	enum cs_err e;
	if (v == NULL || c == NULL || cfg == NULL || who == NULL || consent_id == NULL ||
	    out == NULL)
		return CS_EINVAL;
	memset(&k, 0, sizeof k);
	if (!vault_key_valid(key)) {
		*out = VAULT_KEY_INVALID;
		return CS_OK;
	}
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if ((e = own_key_consent(c, cfg, who->user_id, consent_id, who->now, &k, &ok)) != CS_OK ||
	    !ok)
		goto done;
	if ((e = key_write(v, c, &k, key, who->now, &o)) != CS_OK)
		goto done;
	/* The entry names the consent and whether it replaced a key; never the key. */
	e = audit_append(c, &(struct audit_entry){ .ts = who->now, .actor = who->actor,
	    .action = "vault.key_stored", .subject = k.subject, .agent = k.agent,
	    .resource = k.resource, .consent_id = k.id, .outcome = "ok",
	    .detail = o == VAULT_KEY_REPLACED ? "replaced" : "stored" });
done:
	if (e == CS_OK && ok)
		e = store_commit(c);
	else
		store_rollback(c);
	if (e == CS_OK)
		*out = ok ? o : VAULT_KEY_NOT_FOUND;
	consent_clear(&k);
	return e;
}
