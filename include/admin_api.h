/* admin_api.h -- the admin JSON API under /admin/api/ (docs/security.md actor
 * "admin", invariant 6; docs/architecture.md flow G): bearer admin tokens only;
 * JSON bodies for writes; JSON errors.  The handlers are thin: they check the
 * token, read typed parameters and call the admin domain (admin.h). */
#ifndef CS_ADMIN_API_H
#define CS_ADMIN_API_H
#include "http.h"

/* Each route's parameters by position (routes.c declares them in this order;
 * http_arg reads them). */
enum admin_api_consents_param { ADMIN_API_CONSENTS_USER, ADMIN_API_CONSENTS_AGENT,
	ADMIN_API_CONSENTS_RESOURCE, ADMIN_API_CONSENTS_STATE, ADMIN_API_CONSENTS_CURSOR,
	ADMIN_API_CONSENTS_LIMIT };
enum admin_api_requests_param { ADMIN_API_REQUESTS_LIMIT };
enum admin_api_events_param { ADMIN_API_EVENTS_CONSENT_ID, ADMIN_API_EVENTS_LIMIT };
enum admin_api_audit_param { ADMIN_API_AUDIT_SINCE, ADMIN_API_AUDIT_ACTION,
	ADMIN_API_AUDIT_CONSENT_ID, ADMIN_API_AUDIT_CURSOR, ADMIN_API_AUDIT_LIMIT };

enum cs_err admin_api_consents(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err admin_api_consent(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err admin_api_consent_revoke(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err admin_api_revocations(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err admin_api_requests(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err admin_api_audit(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

/* Route validators (routes.c): a consent state name; an admin listing limit
 * (1..500).  Cursors are checked strictly by admin.c. */
/* SECURITY: the bearer admin-token gate the router runs before every
 * /admin/api/ handler (routes.c's ROUTE_AUTH_ADMIN_API); what names the call
 * ("GET /admin/api/consents").  The token's name (free it), or NULL with the
 * 401 (or 500) in rep. */
char *admin_api_authenticate(const struct http_request *req, struct http_reply *rep,
    const char *what);
bool admin_api_valid_state(const char *v);
bool admin_api_valid_limit(const char *v);

/* GET /admin/api/events: revocation-event delivery state (counts and newest entries). */
enum cs_err admin_api_events(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

#endif
