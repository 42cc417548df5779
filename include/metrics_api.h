/* metrics_api.h -- GET /metrics (metrics_api.c): the registry (metrics.h),
 * the proxy's counters and the audit publisher's, in the Prometheus text
 * format; and the [metrics] token that may read them. */
#ifndef CS_METRICS_API_H
#define CS_METRICS_API_H
#include <stdbool.h>
#include "cs_err.h"
#include "http.h"

/* The handler: every family of the registry (its collectors run first; the
 * proxy's and the audit publisher's families among them).  Who may call it is routes.c's
 * business: the gateway or the [metrics] token on the main listener, anyone
 * on [metrics] listen. */
enum cs_err metrics_api_scrape(const struct http_request *req, struct http_reply *rep) CS_MUST_CHECK;

/* Whether req carries `Authorization: Bearer <[metrics] token>` (false when
 * no token is configured).  *presented says whether a token is configured and
 * req carried a Bearer credential (right or wrong).  SECURITY: compared as SHA-256 digests, in constant time. */
bool metrics_api_token_ok(const struct http_request *req, bool *presented);

/* The 401 for a Bearer credential that is not the metrics token. */
enum cs_err metrics_api_refuse(struct http_reply *rep) CS_MUST_CHECK;

/* Declares consentd's families (metrics_declare_consentd) and registers the
 * collectors that count consents by state and the event backlog from app's
 * store at each scrape. */
struct app;
enum cs_err metrics_api_init(struct app *app) CS_MUST_CHECK;
#endif
