/* vault_connect.h -- connecting a provider (docs/architecture.md flows B + D):
 * after the person approved a request for a resource with a provider, the
 * provider authorizes exactly the mapped scopes (PKCE S256, single-use state,
 * RFC 9207 iss) and the consent goes live with its sealed vault record.  The
 * record itself, release and refresh are vault.h's. */
#ifndef CS_VAULT_CONNECT_H
#define CS_VAULT_CONNECT_H

#include <stdint.h>
#include "config.h"
#include "consent.h"
#include "cs_err.h"
#include "store.h"
#include "vault.h"

#define VAULT_CONNECT_TTL 600

/* The signed-in person a connection is bound to, from their session. */
struct vault_person {
	int64_t              user_id;
	const unsigned char *session_hash;   /* 32 bytes: the session the connection begins in */
	const char          *actor;          /* for the audit log: "user:<subject>" */
	int64_t              now;
};

/* --- begin --------------------------------------------------------------- */
struct vault_decision {           /* the person's decision on a consent request */
	const char                    *request_id;
	const struct consent_decision *decision;
};

struct vault_begin {              /* release with vault_begin_clear() */
	char *authorize_url;          /* CONSENT_DECIDED, non-NULL: send the browser there */
	char *consent_id;             /* CONSENT_DECIDED, non-NULL: the consent went live
	                                 already (record moved over) */
	enum consent_decide_outcome outcome;   /* CONSENT_DECIDED, or why it was refused */
};
void vault_begin_clear(struct vault_begin *b);

/* After who approved in->request_id (for a resource with a provider) with
 * decision in->decision (d).  If the live consent's vault record serves
 * exactly the mapping of d->selected, the decision is recorded and the record
 * re-sealed under the new consent id in one transaction (out->consent_id).
 * Otherwise a connect state is stored (session hash, user, request, resource,
 * provider issuer, PKCE verifier, the decision, expiry) and out->authorize_url
 * asks the provider for exactly the mapped scopes with PKCE S256 and state;
 * the consent does not go live and the previous consent is untouched until
 * the callback succeeds.  The request is refused as consent_decide refuses it:
 * CS_OK with out->outcome NOT_YOURS, CLOSED, INVALID (also: the resource has
 * no provider) or CHANGED, and nothing written; CS_ENOENT for an unknown
 * request. */
enum cs_err vault_begin_connect(struct vault *v, struct store_conn *c, const struct config *cfg,
    const struct vault_person *who, const struct vault_decision *in,
    struct vault_begin *out) CS_MUST_CHECK;

/* --- finish (the callback) ----------------------------------------------- */
struct vault_callback {           /* the provider's answer at /oauth/callback/{resource} */
	const char *resource;         /* from the path */
	const char *state, *code, *iss, *error;   /* query parameters; NULL when absent */
};

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
 * (it must name this resource and who's session and user), then `iss`
 * (required when the provider advertises RFC 9207; exact), then error, then
 * the code exchange; then the consent goes live with its sealed record in one
 * transaction, replacing the previous consent (whose record goes to the
 * revocation outbox).  What happened is out->outcome; every outcome but
 * connected or narrowed is audited ("vault.connect.failed").  An error is
 * returned only when the callback could not be handled at all. */
enum cs_err vault_finish_connect(struct vault *v, struct store_conn *c, const struct config *cfg,
    const struct vault_person *who, const struct vault_callback *cb,
    struct vault_finish *out) CS_MUST_CHECK;

#endif
