/* me_pages.h -- /me, the person's control panel (docs/architecture.md flow G for
 * people): the agents acting for them and what each may do, when each was last
 * used, the history of ended consents, what waits for a decision, the agents
 * their "no" holds back, revoking with a confirmation, and reconnecting a
 * provider connection that needs them. */
#ifndef CS_ME_PAGES_H
#define CS_ME_PAGES_H
#include "http.h"

/* Each route's parameters by position (routes.c declares them in this order;
 * http_arg reads them). */
enum me_pages_revoke_param { ME_REVOKE_CSRF, ME_REVOKE_CONFIRM };
enum me_pages_allow_param { ME_ALLOW_CSRF };
enum me_pages_reconnect_param { ME_RECONNECT_CSRF };
enum me_pages_approval_allow_param { ME_APPROVAL_ALLOW_CSRF };
_Static_assert(ME_APPROVAL_ALLOW_CSRF == ROUTE_CSRF_PARAM, "a form's csrf is where its gate reads it");
_Static_assert(ME_REVOKE_CSRF == ROUTE_CSRF_PARAM && ME_ALLOW_CSRF == ROUTE_CSRF_PARAM &&
    ME_RECONNECT_CSRF == ROUTE_CSRF_PARAM,
    "a form's csrf is where its gate reads it");

/* GET /me */
enum cs_err me_pages_show(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* GET /me/consents/{id}/revoke: what revoking does, and the confirming form. */
enum cs_err me_pages_revoke_confirm(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* POST /me/consents/{id}/revoke (csrf, confirm=yes): revokes, 303 to .../revoked. */
enum cs_err me_pages_revoke(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* GET /me/consents/{id}/revoked: says what happened, from the stored consent. */
enum cs_err me_pages_revoked(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* POST /me/requests/{id}/allow (csrf): lifts the block a decision holds
 * (consent_allow_asking), 303 to /me. */
enum cs_err me_pages_allow(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* POST /me/approvals/{id}/allow (csrf): "let it ask again" for an action the
 * person denied (approval_allow_asking), 303 to /me; 404 for an approval not
 * the person's. */
enum cs_err me_pages_approval_allow(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* POST /me/consents/{id}/reconnect (csrf): a consent whose provider connection
 * needs the person gets a consent request for what it granted
 * (consent_reconnect), 303 to its consent page; 303 to /me when there is
 * nothing to reconnect; 404 for a consent not the person's. */
enum cs_err me_pages_reconnect(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

#endif
