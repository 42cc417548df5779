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
/* Reads a discovered metadata document (body, NUL-terminated, of a 200) as
 * provider_meta would: CS_ENOENT when it is not a JSON object without
 * duplicate members (the next well-known path is then tried); CS_EINVAL when
 * its "issuer" is not the configured one exactly, or a required endpoint that
 * the configuration does not name is missing, or a named one (configured
 * ones win unread) is not a string passing httpc_url_allowed.  *out (release
 * with provider_meta_free) only on CS_OK.  No I/O. */
enum cs_err provider_meta_parse(const struct provider *p, const char *body,
    struct provider_meta **out) CS_MUST_CHECK;
void provider_meta_free(struct provider_meta *m);   /* NULL-safe */

/* Authorization-code exchange with PKCE (client_secret_basic with the
 * resource's client id and secret).  CS_EPERM when the provider refused. */
enum cs_err provider_exchange_code(struct provider *p, const char *code, const char *redirect_uri,
    const char *code_verifier, struct provider_tokens *out) CS_MUST_CHECK;
/* grant_type=refresh_token.  CS_EPERM for invalid_grant (the grant is dead),
 * CS_EIO when the provider could not be reached or failed otherwise. */
enum cs_err provider_refresh(struct provider *p, const char *refresh_token,
    struct provider_tokens *out) CS_MUST_CHECK;
/* Reads the token endpoint's answer (status and NUL-terminated body, which may
 * be NULL) to an authorization-code exchange or a refresh: a 200 with an
 * RFC 6749 §5.1 object (access_token and token_type required, strings without
 * NUL; expires_in a non-negative integer or digit string, clamped; GitHub's
 * comma-separated scope read as spaces) gives CS_OK and *out.  A 200 with an
 * "error" and no access_token is read as a 400.  CS_EPERM when the answer is
 * final (code: any 400/401; refresh: 401, or 400 with invalid_grant,
 * invalid_client, unauthorized_client or bad_refresh_token), CS_EIO for any
 * other status, CS_EINVAL for a malformed 200.  *out written only on CS_OK;
 * jansson's copies of the strings are wiped.  No I/O. */
enum provider_token_kind { PROVIDER_TOKEN_CODE = 0, PROVIDER_TOKEN_REFRESH, PROVIDER_TOKEN__MAX };
enum cs_err provider_token_answer(enum provider_token_kind kind, long status, const char *body,
    struct provider_tokens *out) CS_MUST_CHECK;

/* What the provider's authorization request looks like: its preset's syntax
 * (RFC 6749's for a generic provider).  Borrowed from p. */
struct provider_authz {
	const char *scope_param;      /* "scope"; Slack's user tokens: "user_scope" */
	char        scope_sep;        /* ' '; Slack: ',' */
	const char *extra_scope;      /* asked for with every request ("offline_access"), or NULL */
	const char *extra_params;     /* "k=v&k=v" appended as is ("access_type=offline&prompt=consent"), or NULL */
};
void provider_authz(const struct provider *p, struct provider_authz *out);
enum config_preset provider_preset(const struct provider *p);

/* provider_token_answer as a provider of preset reads it: Slack's user token
 * under "authed_user" (token_type "user" read as Bearer); the preset's own
 * scopes (offline_access, openid ...) dropped from the granted list; a GitHub
 * app's scope ignored (its permissions are the app's, not OAuth scopes);
 * a missing expires_in read as the preset's lifetime (GitHub OAuth app: a
 * year, GitHub app: 8 h, GitLab: 2 h).  PRESET_NONE: provider_token_answer. */
enum cs_err provider_token_answer_preset(enum config_preset preset, enum provider_token_kind kind,
    long status, const char *body, struct provider_tokens *out) CS_MUST_CHECK;

/* Atlassian: the cloud ids of the sites access_token reaches
 * (accessible-resources), comma-joined into *ids.  CS_ENOENT when it reaches
 * none or the provider has no such call, CS_EIO when it could not be asked. */
enum cs_err provider_sites(struct provider *p, const char *access_token, char **ids) CS_MUST_CHECK;
/* Reads an accessible-resources answer (a JSON array of objects with a string
 * "id" of [A-Za-z0-9-], at most 64 sites): CS_ENOENT for an empty array,
 * CS_EINVAL for anything else malformed.  No I/O. */
enum cs_err provider_sites_parse(const char *body, char **ids) CS_MUST_CHECK;

/* RFC 7009 with token_type_hint ("refresh_token" | "access_token").  CS_OK on
 * 200, CS_ENOENT when the provider has no revocation endpoint, CS_EIO otherwise.
 * A preset revokes its own way: GitHub's DELETE /applications/{client_id}/token
 * with the client's credentials (204; 404: GitHub no longer knows the token),
 * Slack's auth.revoke with the token itself (ok, or token_revoked /
 * invalid_auth: already dead); both take access tokens only (CS_ENOENT for a
 * refresh token), and Microsoft and Atlassian revoke nothing (CS_ENOENT). */
enum cs_err provider_revoke(struct provider *p, const char *token, const char *hint) CS_MUST_CHECK;

/* For tests: moves the last discovery attempt seconds into the past, so that
 * a failed discovery may be retried without waiting (at most one attempt per
 * 5 s otherwise). */
void provider_backdate_discovery(struct provider *p, int64_t seconds);

#endif
