/* grant_api.h -- the grant the gateway presents, as an authentication class:
 * the one check that every ROUTE_GRANT route runs before its handler (the
 * router's http_grant_check, routes.c), whether the grant came as /token's
 * subject token (RFC 8693) or in /proxy's headers (RFC 6750, RFC 9449 §7). */
#ifndef CS_GRANT_API_H
#define CS_GRANT_API_H

#include <stdbool.h>
#include "cs_err.h"
#include "http.h"

/* How a refusal is answered: /token's RFC 6749 errors (400 invalid_request,
 * invalid_dpop_proof, invalid_target) or a resource's (401 invalid_token
 * with a challenge, 403 access_denied). */
enum grant_api_dialect { GRANT_API_AT_TOKEN = 0, GRANT_API_AT_RESOURCE };
/* The Authorization scheme the grant came with (a resource's only). */
enum grant_api_scheme { GRANT_API_NO_SCHEME = 0, GRANT_API_DPOP, GRANT_API_BEARER };

/* Where and how a request presents its grant, as its route's presenter read it. */
struct grant_api_presented {
	const char *grant;               /* the compact JWT; NULL: this request presents none */
	enum grant_api_dialect dialect;
	enum grant_api_scheme scheme;
	const char *resource_id;         /* the resource the request names (NULL: none): */
	const char *resource_uri;        /* the grant must be for it */
};

/* A route's presenter: *out from req (rep untouched, *ok true), or rep holds
 * the refusal of a malformed presentation (*ok false). */
typedef enum cs_err (*grant_api_presenter)(const struct http_request *req,
    struct http_reply *rep, struct grant_api_presented *out, bool *ok);

/* The grant check, in this order: the presentation (how); the grant
 * validated with consentd's own keys (grant_validate: typ at+jwt, signature,
 * expiry, revocation, its consent live); the scheme it came with matching
 * its binding (RFC 9449 §7.2); its DPoP proof when it is bound
 * (dpop_api_check_grant); and for the resource the request names (a grant
 * reaches only its own resource, exchange_grant_for).  *ok true: the request
 * may go on, req->auth.grant holding the grant (NULL when it presents none);
 * false: rep holds the refusal in the presentation's dialect. */
enum cs_err grant_api_gate(struct http_request *req, struct http_reply *rep,
    grant_api_presenter how, bool *ok) CS_MUST_CHECK;

/* The challenges an invalid_token answer carries (RFC 6750 §3, RFC 9449 §7.1). */
enum grant_api_challenge {
	GRANT_API_CHALLENGE_BEARER = 1, GRANT_API_CHALLENGE_DPOP = 2, GRANT_API_CHALLENGE_BOTH = 3
};
/* 401 invalid_token with desc and the challenges ch names. */
enum cs_err grant_api_invalid_token(struct http_reply *rep, const char *desc,
    enum grant_api_challenge ch) CS_MUST_CHECK;

#endif
