/* proxy.h -- proxy mode's domain (docs/architecture.md flow H), knowing no HTTP:
 * /proxy/{resource}/{path...} normalised once, matched against configured
 * action routes (default deny), approval on the request itself (the gate in
 * exchange.h), the upstream URL, and each call's audit entries.  The handler
 * and the upstream call are proxy_api.h's. */
#ifndef CS_PROXY_H
#define CS_PROXY_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "config.h"
#include "consent.h"
#include "cs_err.h"
#include "exchange.h"
#include "store.h"
#include "vault.h"

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

/* What the gateway sent besides the path. */
struct proxy_input {
	const char *query;                    /* without '?', or NULL */
	const char *content_type;
	const char *body;
	size_t body_len;
};

/* The action's parameters {"path":{capture:value},"query":{name:[values]},
 * "body":<JSON or null>}.  The body must be empty (null) or application/json
 * I-JSON (no duplicate keys, ...).  On failure *status is 400, 413 or 415 and
 * why holds a short reason (500: out of memory). */
enum cs_err proxy_params_build(const struct proxy_match *m, const struct proxy_input *in,
    json_t **out, int *status, char *why, size_t whylen) CS_MUST_CHECK;

/* base_url + the route template with each capture percent-encoded + the
 * parameters' query re-encoded (never the raw path). */
enum cs_err proxy_url_build(const char *base_url, const char *route_path,
    const struct proxy_match *m, json_t *params, char **out) CS_MUST_CHECK;

/* One proxied call with a validated grant. */
struct proxy_call {
	struct vault *vault;
	const struct consent *k;              /* the grant's consent (grant_validate) */
	json_t *claims;                       /* the grant's claims */
	const char *rest;                     /* the path after /proxy/{resource}/ */
	const char *method;                   /* "GET", "POST", ... */
	bool bodyless;                        /* GET or HEAD: a body is refused */
	struct proxy_input in;
	const char *actor;
	int64_t now;
	struct rate_limits *limits;           /* [limits] person, before a new approval */
};

enum proxy_outcome {
	PROXY_READY = 0,          /* forward: url, rel.tok, body */
	PROXY_NO_ROUTE,           /* no configured route (default deny); audited */
	PROXY_SCOPE,              /* the action's scope is not in the grant; audited */
	PROXY_BODY_ON_GET,        /* a GET or HEAD request with a body */
	PROXY_BAD_INPUT,          /* status (400, 413, 415) and why */
	PROXY_NOT_IJSON,          /* the body is not I-JSON */
	PROXY_NO_SITE,            /* base_url holds {cloud_id} and the connection names no site; audited */
	PROXY_NOT_RELEASED,       /* rel.outcome says why: approval, consent ended, ... */
	PROXY_OUTCOME__MAX
};

struct proxy_plan {                       /* release with proxy_plan_clear() (wipes) */
	enum proxy_outcome outcome;
	const struct config_resource *res;    /* the grant's resource (NULL when not configured) */
	const struct config_action *act;      /* the matched action; NULL for PROXY_NO_ROUTE */
	int    status;                        /* PROXY_BAD_INPUT */
	char   why[160];
	struct exchange_release rel;          /* the gate's answer and the provider token */
	char  *url;                           /* PROXY_READY: where to send it */
	char  *body;                          /* the canonical body to forward, or NULL */
	size_t body_len;
};
void proxy_plan_clear(struct proxy_plan *p);   /* NULL-safe */

/* In this order: the route (normalised path, default deny) and the grant's
 * scope, each refusal audited ("proxy.refused"); no body on GET or HEAD; the
 * parameters and the canonical body; the upstream URL; then the approval gate
 * and the release (exchange_release), whose one transaction also holds the
 * call's "proxy.forwarded" entry (action, method, route, approval: written
 * before the upstream is called, so it holds no upstream status -- that goes
 * to the access log and /metrics).  out->outcome says what to do. */
enum cs_err proxy_prepare(struct store_conn *c, const struct config *cfg,
    const struct proxy_call *call, struct proxy_plan *out) CS_MUST_CHECK;

/* After the upstream answered 401: a forced refresh (vault_release_refreshed)
 * replaces p's token, its release transaction holding the retry's own
 * "proxy.forwarded" entry ("retry after 401"); false (and p unchanged, nothing
 * audited) when there is none. */
bool proxy_refresh_token(struct store_conn *c, const struct config *cfg,
    const struct proxy_call *call, struct proxy_plan *p);

#endif
