/* proxy.h -- proxy mode (ARCHITECTURE.md flow H): /proxy/{resource}/{path...}
 * normalised once, matched against configured action routes (default deny),
 * approval on the request itself, and forwarding with the provider token.
 * Pure functions (normalise, match, parameters, URL) are exported for tests. */
#ifndef CS_PROXY_H
#define CS_PROXY_H
#include <stddef.h>
#include <jansson.h>
#include "config.h"
#include "cs_err.h"
#include "http.h"

#define PROXY_MAX_SEGMENTS 64
#define PROXY_MAX_PATH 4096
#define PROXY_MAX_BODY (1u << 20)        /* request body, and upstream response body */
#define PROXY_MAX_CAPTURES 16

struct proxy_path {                       /* release with proxy_path_clear() */
	char  *seg[PROXY_MAX_SEGMENTS];       /* decoded once, each non-empty */
	size_t n;
};
void proxy_path_clear(struct proxy_path *p);   /* NULL-safe */
/* Decodes raw (the part after /proxy/{resource}/, without the query) once into
 * segments.  CS_EINVAL for: empty input, an empty segment (leading, "//",
 * trailing '/'), a '\\' raw or decoded, a decoded '/', a "." or ".." segment
 * (after decoding), a control character, a bad escape, NUL or invalid UTF-8;
 * CS_ETOOBIG beyond the caps.  A '%' left after the one decoding is literal
 * text.  *out written only on CS_OK. */
enum cs_err proxy_path_normalise(const char *raw, struct proxy_path *out) CS_MUST_CHECK;

struct proxy_match {                      /* release with proxy_match_clear() */
	const struct config_action *action;
	char  *name[PROXY_MAX_CAPTURES];      /* capture names (without braces) */
	char  *value[PROXY_MAX_CAPTURES];     /* decoded values */
	size_t n;
};
void proxy_match_clear(struct proxy_match *m);   /* NULL-safe */
/* The one action of resource whose route (method and template, one segment per
 * capture, literal segments compared exactly) matches.  CS_ENOENT when none
 * does -- or when more than one does (ambiguity is denied too). */
enum cs_err proxy_route_match(const struct config *cfg, const char *resource, const char *method,
    const struct proxy_path *p, struct proxy_match *out) CS_MUST_CHECK;

/* The action's parameters {"path":{capture:value},"query":{name:[values]},
 * "body":<JSON or null>}.  The body must be empty (null) or application/json
 * I-JSON (no duplicate keys, ...).  On failure *status is 400 or 415 and why
 * holds a short reason. */
enum cs_err proxy_params_build(const struct proxy_match *m, const char *query,
    const char *content_type, const char *body, size_t body_len, json_t **out, int *status,
    char *why, size_t whylen) CS_MUST_CHECK;

/* base_url + the route template with each capture percent-encoded + the
 * parameters' query re-encoded (never the raw path). */
enum cs_err proxy_url_build(const char *base_url, const char *route_path,
    const struct proxy_match *m, json_t *params, char **out) CS_MUST_CHECK;

/* The handler for every method on /proxy/{resource}/{rest*}. */
enum cs_err proxy_handle(const struct http_request *req, struct http_reply *rep) CS_MUST_CHECK;

/* Proxied calls so far for (resource, action) (in-memory, since start). */
unsigned long proxy_count(const char *resource, const char *action);
/* GET /metrics, with the gateway's Basic authentication (as at /token), in the
 * Prometheus text format: consentd_proxy_requests_total{resource,action,status}
 * for calls forwarded upstream (status 504 for a timeout, 502 for no answer) and
 * consentd_proxy_refused_total{resource,action,reason,status} for calls with a
 * valid grant refused before the upstream (action "" when no route matched);
 * then the audit publisher's consentd_audit_head_behind, consentd_audit_head_seq
 * and consentd_audit_head_file_errors_total (audit_head_metrics). */
enum cs_err proxy_metrics(const struct http_request *req, struct http_reply *rep) CS_MUST_CHECK;
#endif
