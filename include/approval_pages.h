/* approval_pages.h -- the person's pages for a per-action approval (flow F). */
#ifndef CS_APPROVAL_PAGES_H
#define CS_APPROVAL_PAGES_H
#include "http.h"

/* GET /approve/{id}: the action and its exact parameters. */
enum cs_err pages_approve_show(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* POST /approve/{id} (csrf): the decision (approval_decide). */
enum cs_err pages_approve_decide(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

#endif
