/* consent_pages.h -- the person's pages for a consent request (flow B): the
 * request, the decision, and the page after it. */
#ifndef CS_CONSENT_PAGES_H
#define CS_CONSENT_PAGES_H
#include "http.h"

/* Each route's parameters by position (routes.c declares them in this order;
 * http_arg reads them).  CONSENT_PAGES_DECIDE_S is the family s0 .. s19: one
 * checkbox per position in the stored request. */
enum consent_pages_decide_param { CONSENT_PAGES_DECIDE_CSRF, CONSENT_PAGES_DECIDE_DECISION,
	CONSENT_PAGES_DECIDE_DURATION, CONSENT_PAGES_DECIDE_OFFLINE, CONSENT_PAGES_DECIDE_VERSION,
	CONSENT_PAGES_DECIDE_S };
enum consent_pages_done_param { CONSENT_PAGES_DONE_OUTCOME };
_Static_assert(CONSENT_PAGES_DECIDE_CSRF == ROUTE_CSRF_PARAM,
    "a form's csrf is where its gate reads it");

/* GET /consent/{id}: the request as the person decides on it. */
enum cs_err consent_pages_show(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* POST /consent/{id} (csrf): the decision (consent_decide, or the provider step first). */
enum cs_err consent_pages_decide(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* GET /consent/{id}/done: what became of it, from the stored request. */
enum cs_err consent_pages_done(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

#endif
