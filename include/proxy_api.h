/* proxy_api.h -- proxy mode's handler (proxy_api.c): every method on
 * /proxy/{resource}/{rest*}, and /metrics with the proxy's counters. */
#ifndef CS_PROXY_API_H
#define CS_PROXY_API_H
#include "cs_err.h"
#include "http.h"

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
