/* dpop_api.h -- DPoP (dpop.h) at the gateway's endpoints: the proof read
 * from the request, and a refusal answered as RFC 9449 says (400 at /token,
 * 401 with a WWW-Authenticate: DPoP challenge at /proxy, the nonce to use).
 * dpop.c decides and audits; this file only reads and answers. */
#ifndef CS_DPOP_API_H
#define CS_DPOP_API_H

#include <stdbool.h>
#include <jansson.h>
#include "cs_err.h"
#include "dpop.h"
#include "http.h"

/* At the token endpoint (grant exchange, refresh): dpop_at_token for req.
 * true: *jkt the proof key's thumbprint, or "" for a bearer request.  false:
 * rep holds 400 invalid_dpop_proof or use_dpop_nonce (with a DPoP-Nonce
 * header), and the refusal was audited. */
bool dpop_api_at_token(const struct http_request *req, struct http_reply *rep,
    char jkt[JWS_JKT_LEN + 1]);

/* For a grant presented back: dpop_check_grant for req.  false: rep holds
 * status (400 at /token, 401 with WWW-Authenticate: DPoP at /proxy) with
 * invalid_dpop_proof or use_dpop_nonce, and the refusal was audited. */
bool dpop_api_check_grant(const struct http_request *req, struct http_reply *rep,
    const json_t *claims, const char *grant, int status);

/* Refuses req with status and invalid_dpop_proof (why as the description),
 * audited as dpop.refused: for refusals only the caller can see (a refresh
 * token bound to another key). */
void dpop_api_refuse(const struct http_request *req, struct http_reply *rep, int status,
    const char *why);

/* RFC 9449 §7.1: a WWW-Authenticate: DPoP challenge on rep naming the
 * algorithms a proof may use, with error when not NULL (a fixed word). */
enum cs_err dpop_api_challenge(struct http_reply *rep, const char *error) CS_MUST_CHECK;

#endif
