/* token.h -- the gateway's endpoints: /token (RFC 8693 token exchange for
 * grants, refresh_token), /introspect (RFC 7662) and /revoke (RFC 7009), and the
 * gateway's client authentication (client_secret_basic, RFC 6749 §2.3.1). */
#ifndef CS_TOKEN_H
#define CS_TOKEN_H
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
void token_consent_description(const struct consent_answer *a, char *out, size_t outlen);

/* Parses "Basic base64(urlencode(id):urlencode(secret))" (RFC 6749 §2.3.1).
 * On true, *id and *secret are malloc'd (the caller wipes the secret). */
bool basic_credentials(const char *hdr, char **id, char **secret);

/* true when the request's Authorization header carries the gateway's id and
 * secret (Basic, each form-urlencoded before Base64).  Otherwise fills rep
 * with 401 invalid_client and WWW-Authenticate and returns false. */
bool gateway_authenticate(const struct http_request *req, struct http_reply *rep);

enum cs_err token_endpoint(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err token_introspect(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err token_revoke(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

#endif
