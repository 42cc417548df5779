/* approval_pages.h -- the person's pages for a per-action approval (flow F). */
#ifndef CS_APPROVAL_PAGES_H
#define CS_APPROVAL_PAGES_H
#include "http.h"

/* POST /approve/{id}'s parameters by position (routes.c declares them in this
 * order; http_arg reads them). */
enum approval_pages_decide_param { APPROVAL_PAGES_DECIDE_CSRF, APPROVAL_PAGES_DECIDE_DECISION };
_Static_assert(APPROVAL_PAGES_DECIDE_CSRF == ROUTE_CSRF_PARAM,
    "a form's csrf is where its gate reads it");

/* GET /approve/{id}: the action and its exact parameters. */
enum cs_err approval_pages_show(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* POST /approve/{id} (csrf): the decision (approval_decide). */
enum cs_err approval_pages_decide(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

#endif
