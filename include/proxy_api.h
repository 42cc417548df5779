/* proxy_api.h -- proxy mode's handler (proxy_api.c): every method on
 * /proxy/{resource}/{rest*}, and the proxy's counters that /metrics shows. */
#ifndef CS_PROXY_API_H
#define CS_PROXY_API_H
#include "cs_err.h"
#include "http.h"

/* The handler for every method on /proxy/{resource}/{rest*}. */
enum cs_err proxy_handle(const struct http_request *req, struct http_reply *rep) CS_MUST_CHECK;

/* Proxied calls so far for (resource, action) (in-memory, since start). */
unsigned long proxy_count(const char *resource, const char *action);
/* Appends, in the Prometheus text format, consentd_proxy_requests_total
 * {resource,action,status} for calls forwarded upstream (status 504 for a
 * timeout, 502 for no answer) and consentd_proxy_refused_total
 * {resource,action,reason,status} for calls with a valid grant refused before
 * the upstream (action "" when no route matched).  For GET /metrics
 * (metrics_api.c). */
enum cs_err proxy_metrics_render(struct buf *b) CS_MUST_CHECK;
#endif
