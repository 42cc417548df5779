/* token_api.h -- the gateway's endpoints (token_api.c): /token (RFC 8693
 * token exchange for grants and provider tokens, refresh_token), /introspect
 * (RFC 7662) and /revoke (RFC 7009).  Client authentication is client_auth.h's. */
#ifndef CS_TOKEN_API_H
#define CS_TOKEN_API_H
#include <stdbool.h>
#include <stddef.h>
#include "http.h"

#define URN_TOKEN_EXCHANGE "urn:ietf:params:oauth:grant-type:token-exchange"
#define URN_TT_ID_TOKEN "urn:ietf:params:oauth:token-type:id_token"
#define URN_TT_ACCESS_TOKEN "urn:ietf:params:oauth:token-type:access_token"
#define URN_TT_JWT "urn:ietf:params:oauth:token-type:jwt"
#define AGENT_REASON_MAX_CHARS 200
/* The rule a refused reason is answered with (invalid_request). */
#define TOKEN_REASON_RULE "reason: at most 200 characters, no control characters"

struct consent_answer;

/* NULL when the agent's reason (valid UTF-8, or NULL) is acceptable: at most
 * AGENT_REASON_MAX_CHARS characters and no control character (C0, DEL, C1);
 * otherwise TOKEN_REASON_RULE. */
const char *token_reason_problem(const char *reason);
/* The error_description for a flow A answer that is not a grant: what the
 * gateway should do next (send the person to consent_uri, poll again in N s,
 * when a denied request may be asked again, ...), including whether the call's
 * new scopes joined the pending request or its new reason was not taken.
 * Fixed words and numbers only, never anything the gateway sent. */
enum cs_err token_consent_description(const struct consent_answer *a, char *out,
    size_t outlen) CS_MUST_CHECK;   /* CS_ETOOBIG (out "") when outlen is too small */

enum cs_err token_endpoint(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err token_introspect(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err token_revoke(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

#endif
