/* provider.h -- a downstream OAuth provider (GitHub, Google, an internal API):
 * metadata by discovery (RFC 8414, then OpenID) or from explicit endpoints, and
 * the three calls consentd makes as its client: code exchange, refresh, and
 * RFC 7009 revocation.  Tokens pass through here and are never logged. */
#ifndef CS_PROVIDER_H
#define CS_PROVIDER_H

#include <stdbool.h>
#include <stdint.h>
#include "config.h"
#include "cs_err.h"

struct provider;                  /* one per resource with a provider; thread-safe */

struct provider_meta {            /* immutable once obtained */
	char *issuer;                 /* NULL when configured by explicit endpoints only */
	char *authorization_endpoint;
	char *token_endpoint;
	char *revocation_endpoint;    /* NULL when none */
	bool  iss_parameter_supported;   /* RFC 9207 */
};

struct provider_tokens {          /* release with provider_tokens_clear() (wipes) */
	char   *access_token;
	char   *refresh_token;        /* NULL when the provider sent none */
	char   *token_type;           /* as the provider said it, e.g. "Bearer" */
	char   *scope;                /* granted scopes, space-separated; NULL when the provider omitted it */
	int64_t expires_in;           /* seconds; 0 when the provider omitted it */
};
void provider_tokens_clear(struct provider_tokens *t);

/* A provider for resource r (which must have provider settings); no I/O yet. */
enum cs_err provider_new(const struct config_resource *r, struct provider **out) CS_MUST_CHECK;
void provider_free(struct provider *p);   /* NULL-safe */

/* The metadata: explicit endpoints as configured, else discovery of
 * provider_issuer at /.well-known/oauth-authorization-server, falling back to
 * /.well-known/openid-configuration (its issuer must equal ours exactly; every
 * endpoint must pass httpc_url_allowed).  Discovers on first use; a failure
 * is retried on the next call.  *out stays valid until provider_free. */
enum cs_err provider_meta(struct provider *p, const struct provider_meta **out) CS_MUST_CHECK;

/* Authorization-code exchange with PKCE (client_secret_basic with the
 * resource's client id and secret).  CS_EPERM when the provider refused. */
enum cs_err provider_exchange_code(struct provider *p, const char *code, const char *redirect_uri,
    const char *code_verifier, struct provider_tokens *out) CS_MUST_CHECK;
/* grant_type=refresh_token.  CS_EPERM for invalid_grant (the grant is dead),
 * CS_EIO when the provider could not be reached or failed otherwise. */
enum cs_err provider_refresh(struct provider *p, const char *refresh_token,
    struct provider_tokens *out) CS_MUST_CHECK;
/* RFC 7009 with token_type_hint ("refresh_token" | "access_token").  CS_OK on
 * 200, CS_ENOENT when the provider has no revocation endpoint, CS_EIO otherwise. */
enum cs_err provider_revoke(struct provider *p, const char *token, const char *hint) CS_MUST_CHECK;

/* For tests: moves the last discovery attempt seconds into the past, so that
 * a failed discovery may be retried without waiting (at most one attempt per
 * 5 s otherwise). */
void provider_backdate_discovery(struct provider *p, int64_t seconds);

#endif
