/* vault.h -- the token vault (docs/architecture.md flow D): one sealed provider
 * authorization per consent, release to the gateway with refresh, and the
 * revocation outbox; connecting a provider is vault_connect.h.  Plaintext
 * tokens exist only briefly in memory and are wiped; a ciphertext is bound to
 * (record, consent, user, resource) and fails to open anywhere else. */
#ifndef CS_VAULT_H
#define CS_VAULT_H

#include <stdbool.h>
#include <stdint.h>
#include "config.h"
#include "consent.h"
#include "cs_err.h"
#include "provider.h"
#include "seal.h"
#include "store.h"

/* The token_type of a record that holds an API key or static token
 * (credential = api_key, vault_key.c) rather than OAuth tokens. */
#define VAULT_KEY_TOKEN_TYPE "api_key"

struct vault;                     /* process-wide: providers per resource, refresh locks */

enum cs_err vault_new(const struct config *cfg, const struct master_key *mk,
    struct vault **out) CS_MUST_CHECK;
void vault_free(struct vault *v);   /* NULL-safe */
/* The provider of a resource, or NULL when it has none. */
struct provider *vault_provider(struct vault *v, const char *resource);

/* The provider scopes a consent's scopes map to: the union of each scope's
 * `provider` list, sorted, unique. */
enum cs_err vault_map_scopes(const struct config *cfg, const char *resource,
    const struct scope_set *scopes, struct scope_set *out) CS_MUST_CHECK;

/* --- release (flow D) -------------------------------------------------- */
enum vault_release_outcome {
	VAULT_RELEASED = 0,           /* the access token is in the struct */
	VAULT_RELEASE_GONE,           /* no provider connection: no record or provider, consent not
	                               * live or reconnect_required, the provider ended it */
	VAULT_RELEASE_UNAVAILABLE,    /* the token expired and the provider could not refresh it */
	VAULT_RELEASE_APPROVAL_USED,  /* the approval was used meanwhile or is no longer redeemable */
	VAULT_RELEASE_TOO_SOON,       /* a forced refresh within VAULT_FORCED_REFRESH_MIN of the last change */
	VAULT_RELEASE__MAX
};

struct vault_release {            /* release with vault_release_clear() (wipes) */
	enum vault_release_outcome outcome;
	char   *access_token;         /* the rest only for VAULT_RELEASED */
	char   *token_type;
	char   *scope;                /* provider scopes */
	int64_t expires_in;
};
void vault_release_clear(struct vault_release *r);

/* One release: the provider access token of live consent k for action
 * (already checked by the caller against the grant). */
struct vault_release_req {
	const struct consent *k;
	const char *action;
	const char *approval_id;      /* vault_release_approved only; NULL otherwise */
	/* Issue #32: who approved a release no person's approval authorises (a
	 * standing rule, a policy line, the decision point), in words written into
	 * "vault.released"'s detail ("; approved_by=..."); NULL: none. */
	const char *decided_by;
	/* Issue #32: the standing rule whose use this release is (vault_release
	 * only): counted and re-checked in the release's transaction
	 * (standing_use); VAULT_RELEASE_APPROVAL_USED when it no longer holds. */
	const char *rule_id;
	const char *actor;
	int64_t now;
	/* The caller's own writes (the proxy's "proxy.forwarded"), made in the
	 * release's transaction after "vault.released" and only when the token is
	 * released: they commit with the release or not at all (an error rolls the
	 * release back and is returned).  NULL: none. */
	enum cs_err (*with)(struct store_conn *c, void *ctx);
	void *with_ctx;
};

/* Refreshed first when within refresh_margin of expiry, one refresh at a time
 * per record (others wait and reuse its result); a rotated refresh token
 * replaces the old one atomically, an answer without one keeps it;
 * invalid_grant marks the consent reconnect_required (VAULT_RELEASE_GONE).
 * A transient failure (5xx, timeout) keeps the connection: the unexpired
 * token is released (audited "refresh_failed"), and the record's next
 * refresh waits 2 s, doubling to 300 s (per process); an expired token is
 * never released (VAULT_RELEASE_UNAVAILABLE).  Audited ("vault.released",
 * action).  CS_OK with out->outcome for every answer; an error (CS_ECRYPTO
 * for a record that does not open, ...) only for failures. */
enum cs_err vault_release(struct vault *v, struct store_conn *c, const struct config *cfg,
    const struct vault_release_req *rq, struct vault_release *out) CS_MUST_CHECK;

/* The same for a release that an approval (rq->approval_id) authorises
 * (flow F, and the proxy's flow H): the approval is redeemed (approval_redeem)
 * in the very transaction that records "vault.released", so that a release
 * entry exists exactly when the approval was used for it.
 * VAULT_RELEASE_APPROVAL_USED, with the refusal audited and no release, when
 * the approval was used meanwhile or is no longer redeemable. */
enum cs_err vault_release_approved(struct vault *v, struct store_conn *c,
    const struct config *cfg, const struct vault_release_req *rq,
    struct vault_release *out) CS_MUST_CHECK;

/* The same, refreshing first whatever the expiry (one refresh, shared with a
 * concurrent one as above): for the proxy's single retry after the provider
 * answered 401.  Without a refresh token the stored access token is returned.
 * VAULT_RELEASE_TOO_SOON, and nothing refreshed, when the record changed less
 * than VAULT_FORCED_REFRESH_MIN seconds ago: an upstream that answers 401 to
 * every call must not turn each call into a refresh at the provider. */
#define VAULT_FORCED_REFRESH_MIN 60
enum cs_err vault_release_refreshed(struct vault *v, struct store_conn *c,
    const struct config *cfg, const struct vault_release_req *rq,
    struct vault_release *out) CS_MUST_CHECK;
/* The first site (Atlassian cloud id, [A-Za-z0-9-]) consent_id's connection
 * reaches, malloc'd into *out: what the proxy puts for {cloud_id} in base_url.
 * CS_ENOENT when the consent holds no record or its record names no site (a
 * provider without sites, or a connection made before migration 0025). */
enum cs_err vault_site(struct store_conn *c, const char *consent_id, char **out) CS_MUST_CHECK;
/* true when consent_id holds a provider connection (for /me; no token material). */
bool vault_has_record(struct store_conn *c, const char *consent_id);

/* --- refresh ahead of expiry ------------------------------------------- */
/* One pass for the resources with proactive_refresh: each offline, live,
 * unmarked consent's token within refresh_margin of expiry (with a refresh
 * token) is refreshed now, without waiting for a release -- exactly as a
 * release would: one refresh at a time per record across threads and nodes
 * (a node that finds it fresh after the lock does nothing), the backoff after
 * a transient failure, invalid_grant marking the consent reconnect_required
 * with its health event.  At most 20 refreshes per resource and pass.
 * *tried counts the records refreshed or found fresh.  An error only for a
 * failure of the database. */
enum cs_err vault_refresh_ahead(struct vault *v, struct store_conn *c, int64_t now,
    int *tried) CS_MUST_CHECK;

/* --- revocation outbox ------------------------------------------------- */
/* Seconds a pass holds the entries it claimed (store_vault_outbox_claim):
 * more than the 10 entries of one claim can take at the provider (two calls
 * each, at most httpc's 10 s timeout plus the 5 s connect), so no other node
 * revokes what a slow pass has yet to. */
#define VAULT_OUTBOX_LEASE 600
/* One pass: for each due outbox entry revoke the refresh token at the provider
 * (RFC 7009), then the access token; erase the ciphertexts when that
 * succeeded or the access token expired; otherwise retry later with backoff.
 * Every outcome audited.  Returns how many entries were finished. */
enum cs_err vault_outbox_run(struct vault *v, struct store_conn *c, int64_t now,
    int *finished) CS_MUST_CHECK;

/* The additional data a vault ciphertext is bound to, malloc'd into *out:
 * "v1" NUL record id NUL consent id NUL subject NUL resource.  vault.c seals
 * with it and `consentd vault rekey` (vault_cli.c) reseals with it.
 * CS_EINVAL when a part is NULL. */
enum cs_err vault_aad_encode(const char *record_id, const char *consent_id,
    const char *subject, const char *resource, unsigned char **out, size_t *len) CS_MUST_CHECK;

#endif
