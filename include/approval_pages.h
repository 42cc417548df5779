/* approval_pages.h -- the person's pages for a per-action approval (flow F). */
#ifndef CS_APPROVAL_PAGES_H
#define CS_APPROVAL_PAGES_H
#include "http.h"

/* POST /approve/{id}'s parameters by position (routes.c declares them in this
 * order; http_arg reads them). */
enum approval_pages_decide_param { APPROVAL_PAGES_DECIDE_CSRF, APPROVAL_PAGES_DECIDE_DECISION,
	/* Issue #32: decision = standing also makes a standing rule: its kind
	 * (exact | match), duration (for, seconds), use count (uses, 0: no cap)
	 * and the top-level parameters kept fixed (k0 .. k31, by position). */
	APPROVAL_PAGES_DECIDE_RULE, APPROVAL_PAGES_DECIDE_FOR, APPROVAL_PAGES_DECIDE_USES,
	APPROVAL_PAGES_DECIDE_K };
#define APPROVAL_PAGES_FIXED_MAX 32      /* = STANDING_MAX_FIXED (standing.h) */
_Static_assert(APPROVAL_PAGES_DECIDE_CSRF == ROUTE_CSRF_PARAM,
    "a form's csrf is where its gate reads it");

/* GET /approve/{id}: the action and its exact parameters. */
enum cs_err approval_pages_show(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* POST /approve/{id} (csrf): the decision (approval_decide). */
enum cs_err approval_pages_decide(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

#endif
