/* mcp_token.h -- the token endpoint's rules for MCP clients (issue #30, the
 * token leg; docs/mcp.md "The token endpoint"): the client's authentication
 * (none: client_id alone; private_key_jwt: a client assertion signed with the
 * client's own keys), grant_type=authorization_code (the code taken once, its
 * client, redirect_uri and resource equal to the request's, PKCE S256, DPoP),
 * grant_type=refresh_token for MCP families (the same client, the same
 * resource, scopes that only narrow), and revocation by the client that holds
 * the token.  Knows no HTTP: token_api.c reads the request and answers what
 * is decided here; the tokens themselves are grant.c's. */
#ifndef CS_MCP_TOKEN_H
#define CS_MCP_TOKEN_H

#include <stdbool.h>
#include <stdint.h>
#include "config.h"
#include "cs_err.h"
#include "grant.h"

struct app;

#define MCP_TOKEN_WHY_MAX 240

/* [mcp] require_dpop: whether a request at /token must be refused for coming
 * without a DPoP proof (proof: a valid one came) -- a public client's, when
 * the operator requires proofs.  The one rule of the code, refresh and
 * ID-JAG grants; MCP_TOKEN_DPOP_REQUIRED is its error_description. */
#define MCP_TOKEN_DPOP_REQUIRED "a DPoP proof is required of public clients ([mcp] require_dpop)"
bool mcp_token_dpop_missing(const struct config *cfg, bool proof, bool private_key_jwt);

/* Whether a request at /token or /revoke is an MCP client's rather than the
 * gateway's: it names a client_id that is not [gateway] id, and carries no
 * Authorization header (Basic is the gateway's alone).  The caller still
 * authenticates the client (mcp_token_code, _refresh, _revoke do). */
bool mcp_token_request_is_client(const struct config *cfg, const char *client_id,
    const char *authorization);

/* A token request of an MCP client, as token_api.c read it (NULL: absent). */
struct mcp_token_req {
	const char *client_id;
	const char *assertion_type, *assertion;      /* private_key_jwt (RFC 7523 §2.2) */
	/* authorization_code.  SECURITY: the code is found by sha256_str(code)
	 * (session.h), the SHA-256 of the string the client sends, as
	 * store_authz_code_put was given it when the code was issued. */
	const char *code, *redirect_uri, *code_verifier;
	const char *refresh_token;                   /* refresh_token */
	const char *resource;                        /* RFC 8707: required on both */
	const char *scope;                           /* refresh: a narrowing, or NULL */
	const char *token;                           /* /revoke */
	const char *jkt;         /* the thumbprint of the request's valid DPoP proof, or NULL */
	const char *remote_ip;   /* for the [limits] auth_failure bucket */
	const char *actor;       /* whom the audit names: "client:<client_id>" */
	int64_t     now;
};

/* What to answer.  Release with mcp_token_answer_clear() (wipes the tokens). */
struct mcp_token_answer {
	int         status;          /* 200, or the error's: 400, 401 (invalid_client) */
	const char *error;           /* RFC 6749 §5.2 code; NULL for 200 */
	char        description[MCP_TOKEN_WHY_MAX];   /* the failing check, for error_description */
	struct grant_response g;     /* 200 from _code and _refresh */
	bool        dpop_bound;      /* the access token carries cnf.jkt: token_type DPoP */
};
void mcp_token_answer_clear(struct mcp_token_answer *a);   /* NULL-safe */

/* grant_type=authorization_code (OAuth 2.1 §4.1.3), in this order: the
 * client authenticated (401 invalid_client); code, redirect_uri,
 * code_verifier and resource present (invalid_request); then in ONE
 * transaction the code taken once by its SHA-256 (store_authz_code_take),
 * its client_id, redirect_uri and resource equal to the request's and its
 * PKCE S256 verified (invalid_grant naming the check); the DPoP proof the
 * code is bound to, or [mcp] require_dpop for a public client
 * (invalid_dpop_proof); the consent live (invalid_grant); the access token
 * (grant_issue_tx: aud = resource, client_id), a rotating refresh token when
 * the consent is offline and the client may refresh, and the family recorded
 * on the code.  A code used before: invalid_grant, and the family its first
 * use issued is revoked with every token in it, audited
 * "authz.code_reused" -- in its own transaction, committed before the answer.
 * CS_OK with *out for every answer; an error only when it could not be judged. */
enum cs_err mcp_token_code(struct app *app, const struct mcp_token_req *rq,
    struct mcp_token_answer *out) CS_MUST_CHECK;

/* grant_type=refresh_token of an MCP client's family: the client
 * authenticated and the family's own, resource present and the family's
 * audience, scope a narrowing, the family's DPoP key (grant_refresh's
 * rotation and reuse detection).  CS_OK with *out for every answer. */
enum cs_err mcp_token_refresh(struct app *app, const struct mcp_token_req *rq,
    struct mcp_token_answer *out) CS_MUST_CHECK;

/* RFC 7009 for an MCP client: authenticated, it revokes its own token
 * (grant_revoke_mcp); another's is left alone and the answer is the same
 * 200.  CS_OK with *out (status 200 or 401). */
enum cs_err mcp_token_revoke(struct app *app, const struct mcp_token_req *rq,
    struct mcp_token_answer *out) CS_MUST_CHECK;

/* The client's authentication alone, as _code, _refresh and _revoke make it
 * (for the ID-JAG grant, idjag_api.c): true when rq's client proved itself,
 * *private_key_jwt saying how; false with the 401 invalid_client in *out (and
 * the address's auth_failure bucket spent), or *e an error. */
bool mcp_token_authenticate(struct app *app, const struct mcp_token_req *rq,
    struct mcp_token_answer *out, bool *private_key_jwt, enum cs_err *e);

#endif
