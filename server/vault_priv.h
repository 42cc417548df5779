/* vault_priv.h -- for the vault's own files (vault.c, vault_connect.c) only:
 * the vault's state, sealing a record's tokens and the small helpers both
 * halves share.  Every other module sees include/vault.h and vault_connect.h,
 * and never a ciphertext or a master key. */
#ifndef CS_VAULT_PRIV_H
#define CS_VAULT_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "consent.h"
#include "provider.h"
#include "seal.h"
#include "store_vault.h"
#include "vault.h"

#define VAULT_DEFAULT_EXPIRES_IN 3600   /* when the provider does not say */

struct vault_slot {                     /* one resource with a provider */
	const char      *resource;          /* the config's string */
	struct provider *p;
};

struct inflight;                        /* vault.c: a refresh under way */
struct refresh_wait;                    /* vault.c: a record whose last refresh failed transiently */

struct vault {
	const struct master_key *mk;        /* the caller's; outlives the vault */
	const struct config *cfg;           /* the caller's; outlives the vault */
	struct vault_slot *slots;
	size_t             nslots;
	pthread_mutex_t    mu;              /* guards inflight and waits */
	pthread_cond_t     cv;
	struct inflight   *inflight;
	struct refresh_wait *waits;         /* backoff after transient refresh failures */
};

/* true when resource keeps an API key (credential = api_key), not OAuth tokens. */
bool vault_key_resource(const struct vault *v, const char *resource);

/* The identity a ciphertext is bound to (its additional data). */
struct vault_aad {
	const char *record_id, *consent_id, *subject, *resource;
};

/* A sealed token pair: the refresh token's blob is NULL when there is none.
 * kid names the master key it was sealed under (checked on opening). */
struct vault_sealed {
	unsigned char *access;
	size_t         access_len;
	unsigned char *refresh;
	size_t         refresh_len;
	const char    *kid;
};

/* SECURITY: invariant 3 -- seals access (and refresh when non-NULL) bound to
 * id; copied to any other row they fail to open.  out->kid is mk's.  On CS_OK
 * the caller frees the blobs with blob_free. */
enum cs_err vault_seal_pair(const struct master_key *mk, const struct vault_aad *id,
    const char *access, const char *refresh, struct vault_sealed *out) CS_MUST_CHECK;
/* Opens in's tokens bound to id: *access when access is non-NULL, *refresh
 * when refresh is non-NULL and there is one (else it stays NULL).  The
 * plaintexts are the caller's to wipe (wipe_free).  CS_ECRYPTO when in
 * was sealed under another master key or does not open. */
enum cs_err vault_open_pair(const struct master_key *mk, const struct vault_aad *id,
    const struct vault_sealed *in, char **access, char **refresh) CS_MUST_CHECK;
/* vault_open_pair for rec, a record of consent k (bound to k's identity). */
enum cs_err vault_record_open(const struct master_key *mk, const struct store_vault_record *rec,
    const struct consent *k, char **access, char **refresh) CS_MUST_CHECK;

/* A record id is b64url_random_id's (vault_connect.c checks the length). */
#define VAULT_RECORD_ID_LEN 22

/* Best-effort RFC 7009 revocation of tokens that must not live (more scopes
 * than asked, a failed transaction): refresh token first, then access token. */
void vault_revoke_now(struct provider *p, const struct provider_tokens *t);

static inline void blob_free(unsigned char *p, size_t n)
{
	if (p == NULL)
		return;
	OPENSSL_cleanse(p, n);
	free(p);
}

/* A stored or received scope list as a set; "" is the empty set. */
static inline enum cs_err set_parse(const char *s, struct scope_set *out)
{
	return scope_set_parse(s != NULL ? s : "", out);
}

static inline bool is_bearer(const char *t)
{
	return t != NULL && strcasecmp(t, "Bearer") == 0;
}

#endif
