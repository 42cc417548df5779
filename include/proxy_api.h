/* proxy_api.h -- proxy mode's handler (proxy_api.c): every method on
 * /proxy/{resource}/{rest*}, and the proxy's counters that /metrics shows. */
#ifndef CS_PROXY_API_H
#define CS_PROXY_API_H
#include <stdbool.h>
#include <stddef.h>
#include "config.h"
#include "cs_err.h"
#include "grant_api.h"
#include "http.h"

#define PROXY_MAX_HEADER_VALUE 4096
#define PROXY_MAX_HEADER_LINES 8          /* Authorization, the allowlist, Content-Type */

/* The header lines of one upstream request: line[] ends with a NULL. */
struct proxy_headers {                    /* release with proxy_headers_clear() (wipes) */
	const char *line[PROXY_MAX_HEADER_LINES + 1];
	char       *own[PROXY_MAX_HEADER_LINES];
	size_t      n;
};
void proxy_headers_clear(struct proxy_headers *h);   /* NULL-safe */
/* "Authorization: Bearer <token>" first, then each allowlisted request header
 * of req (Accept, If-None-Match, If-Match, If-Modified-Since,
 * If-Unmodified-Since) as it came, skipping values longer than
 * PROXY_MAX_HEADER_VALUE, then "Content-Type: application/json" when body.
 * Nothing else of req is ever forwarded (Authorization, Cookie,
 * Consentd-Grant, hop-by-hop headers).  CS_EINVAL for a NULL token, or a
 * token or forwarded value holding CR or LF (as httpc would refuse).  *out written only on CS_OK.  No I/O. */
enum cs_err proxy_api_upstream_headers(const struct http_request *req, const char *token, bool body,
    struct proxy_headers *out) CS_MUST_CHECK;
/* An API key resource's credential (credential = api_key, vault_key.h): with
 * api_key_header, *header_line "Name: <prefix><key>" and *url_out a copy of
 * url; with api_key_query, *header_line NULL and *url_out url with
 * "name=<prefix><key>" (percent-encoded) added to its query.  Both malloc'd,
 * the caller wipes and frees them.  CS_EINVAL for a resource that is not
 * api_key or a key that is not vault_key_valid (a CR or LF, a space).  No I/O. */
enum cs_err proxy_api_key_apply(const struct config_resource *res, const char *key,
    const char *url, char **header_line, char **url_out) CS_MUST_CHECK;

/* Where the gateway put the grant it presents at /proxy. */
enum proxy_grant_via {
	PROXY_GRANT_ABSENT = 0,     /* nowhere (or an empty Consentd-Grant) */
	PROXY_GRANT_HEADER,         /* Consentd-Grant: <grant> */
	PROXY_GRANT_DPOP,           /* Authorization: DPoP <grant> (RFC 9449 §7.1) */
	PROXY_GRANT_BEARER,         /* Authorization: Bearer <grant> (RFC 6750 §2.1) */
	PROXY_GRANT_MALFORMED,      /* refused: *why says why (400 invalid_request) */
	PROXY_GRANT_VIA__MAX
};
/* Reads the grant from a request's Authorization header (NULL: none) and
 * Consentd-Grant header (NULL: none).  Authorization holds a grant only with
 * the DPoP or Bearer scheme (case-insensitive), one or more spaces and a
 * token68 credential; any other scheme (Basic: the gateway's own
 * credentials) holds none.  MALFORMED, with a fixed phrase in *why, for a
 * grant in both headers, a CR or LF in either, or a DPoP or Bearer
 * credential that is not a token68.  *grant points into the header it came
 * from, written for HEADER, DPOP and BEARER.  Checks no length and no
 * signature; no I/O. */
enum proxy_grant_via proxy_api_grant_via(const char *authorization, const char *consentd_grant,
    const char **grant, const char **why);

/* The proxy routes' grant presenter (grant_api_gate runs the check): the
 * grant the gateway presents (proxy_api_grant_via; Consentd-Grant when the
 * gateway authenticates by Basic), at most 16 KiB, for the path's resource,
 * with the request's forwarded headers free of CR and LF.  *ok false: rep
 * holds the refusal (401 invalid_token with a Bearer or DPoP challenge, 400
 * invalid_request, 403 access_denied). */
enum cs_err proxy_api_grant_presented(const struct http_request *req, struct http_reply *rep,
    struct grant_api_presented *out, bool *ok) CS_MUST_CHECK;

/* The handler for every method on /proxy/{resource}/{rest*}, once the
 * route's grant check let the request through (req->auth.grant). */
enum cs_err proxy_api_handle(const struct http_request *req, struct http_reply *rep) CS_MUST_CHECK;

/* Proxied calls forwarded so far for (resource, action) (the registry's
 * count, since start). */
unsigned long proxy_count(const char *resource, const char *action);
/* Declares in the registry (metrics.h; idempotent) consentd_proxy_requests_total
 * {resource,action,status} for calls forwarded upstream (status 504 for a
 * timeout, 502 for no answer) and consentd_proxy_refused_total
 * {resource,action,reason,status} for calls with a valid grant refused before
 * the upstream (action "" when no route matched).  GET /metrics (metrics_api.c)
 * makes sure of them before it renders. */
enum cs_err proxy_metrics_declare(void) CS_MUST_CHECK;
#endif
