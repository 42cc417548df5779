/* vault.h -- the token vault (ARCHITECTURE.md flow D): one sealed provider
 * authorization per consent, the connect flow, release to the gateway with
 * refresh, and the revocation outbox.  Plaintext tokens exist only briefly in
 * memory and are wiped; a ciphertext is bound to (record, consent, user,
 * resource) and fails to open anywhere else. */
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

#define VAULT_CONNECT_TTL 600

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

/* --- connecting (flow B + D) -------------------------------------------- */
struct vault_begin {              /* release with vault_begin_clear() */
	char *authorize_url;          /* non-NULL: send the browser there */
	char *consent_id;             /* non-NULL: the consent went live already (record moved over) */
};
void vault_begin_clear(struct vault_begin *b);

/* After the person approved request_id (for a resource with a provider) with
 * decision d.  If the live consent's vault record serves exactly the mapping of
 * d->selected, the decision is recorded and the record re-sealed under the new
 * consent id in one transaction (out->consent_id).  Otherwise a connect state
 * is stored (session hash, user, request, resource, provider issuer, PKCE
 * verifier, the decision, expiry) and out->authorize_url asks the provider for
 * exactly the mapped scopes with PKCE S256 and state; the consent does not go
 * live and the previous consent is untouched until the callback succeeds. */
enum cs_err vault_begin_connect(struct vault *v, struct store_conn *c, const struct config *cfg,
    const char *request_id, int64_t user_id, const unsigned char session_hash[32],
    const struct consent_decision *d, const char *actor, int64_t now,
    struct vault_begin *out) CS_MUST_CHECK;

enum vault_connect_outcome {
	VAULT_CONNECTED = 0,          /* the consent is live with its record */
	VAULT_NARROWED,               /* live, narrowed to what the provider granted (out->dropped) */
	VAULT_CANCELLED,              /* the person cancelled at the provider: no consent */
	VAULT_TOO_MUCH,               /* the provider granted more than asked: tokens revoked, no consent */
	VAULT_BAD_STATE,              /* unknown, used, expired state; another session; wrong iss or resource */
	VAULT_FAILED,                 /* the code exchange failed */
	VAULT_CHANGED,                /* the request changed since the person decided: tokens revoked, no consent */
	VAULT_OUTCOME__MAX
};

struct vault_finish {             /* release with vault_finish_clear() */
	enum vault_connect_outcome outcome;
	char  *consent_id;
	char  *request_id;            /* the consent request the connection was for (when known) */
	char  *agent, *resource;
	struct scope_set dropped;     /* consent scopes removed by narrowing */
	char  *why;                   /* a short reason for a person (no secrets) */
};
void vault_finish_clear(struct vault_finish *f);

/* The callback at /oauth/callback/{resource}.  Order: state single-use lookup
 * (it must name this resource and this session/user), then `iss` (required
 * when the provider advertises RFC 9207; exact), then error, then the code
 * exchange; then the consent goes live with its sealed record in one
 * transaction, replacing the previous consent (whose record goes to the
 * revocation outbox). */
enum cs_err vault_finish_connect(struct vault *v, struct store_conn *c, const struct config *cfg,
    const char *resource, const char *state, const char *code, const char *iss,
    const char *error, const unsigned char session_hash[32], int64_t user_id,
    const char *actor, int64_t now, struct vault_finish *out) CS_MUST_CHECK;

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
	const char *actor;
	int64_t now;
};

/* Refreshed first when within refresh_margin of expiry, one refresh at a time
 * per record (others wait and reuse its result); a rotated refresh token
 * replaces the old one atomically; invalid_grant marks the consent
 * reconnect_required (VAULT_RELEASE_GONE).  Audited ("vault.released",
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
/* true when consent_id holds a provider connection (for /me; no token material). */
bool vault_has_record(struct store_conn *c, const char *consent_id);

/* --- revocation outbox ------------------------------------------------- */
/* One pass: for each due outbox entry revoke the refresh token at the provider
 * (RFC 7009), then the access token; erase the ciphertexts when that
 * succeeded or the access token expired; otherwise retry later with backoff.
 * Every outcome audited.  Returns how many entries were finished. */
enum cs_err vault_outbox_run(struct vault *v, struct store_conn *c, int64_t now,
    int *finished) CS_MUST_CHECK;

#endif
