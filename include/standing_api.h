/* standing_api.h -- the admin JSON API's view of the person's standing rules
 * (issue #32): list them, end one.  Bearer admin tokens only (the router's
 * gate, admin_api.h); JSON errors. */
#ifndef CS_STANDING_API_H
#define CS_STANDING_API_H
#include "http.h"

/* GET /admin/api/rules: {"rules": [...]} -- every person's live rules, newest
 * first, at most STANDING_LIST_MAX (standing_list's fields). */
enum cs_err admin_api_rules(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* POST /admin/api/rules/{id}/end (a JSON object body, e.g. {}): {"ended": true}
 * when ended now, false when it had already ended; 404 for an unknown id. */
enum cs_err admin_api_rule_end(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

#endif
