/* consent_pages.h -- the person's pages for a consent request (flow B): the
 * request, the decision, and the page after it. */
#ifndef CS_CONSENT_PAGES_H
#define CS_CONSENT_PAGES_H
#include "http.h"

/* GET /consent/{id}: the request as the person decides on it. */
enum cs_err pages_consent_show(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* POST /consent/{id} (csrf): the decision (consent_decide, or the provider step first). */
enum cs_err pages_consent_decide(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* GET /consent/{id}/done: what became of it, from the stored request. */
enum cs_err pages_consent_done(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

#endif
