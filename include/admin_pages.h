/* admin_pages.h -- the admin's browser pages under /admin: thin views over the
 * admin domain (admin.h) and the consent domain.  Admin powers come from the
 * ID token (the admin claim, exact match) and last only while the IdP's
 * auth_time is younger than [session] admin_timeout; bulk revocation needs a
 * fresh step-up login (prompt=login, max_age=0). */
#ifndef CS_ADMIN_PAGES_H
#define CS_ADMIN_PAGES_H

#include <stdbool.h>
#include <stdint.h>
#include "config.h"
#include "http.h"
#include "session.h"

/* How recent (seconds, from the IdP's auth_time) the login behind a bulk
 * revocation must be; never more than [session] admin_timeout. */
#define ADMIN_STEPUP_MAX_AGE 300

/* The audit filter's since (GET /admin/audit?since=): UTC seconds of at most
 * ADMIN_SINCE_DIGITS_MAX digits (the first form, kept for old links), or a
 * UTC date YYYY-MM-DD, or date and time YYYY-MM-DDTHH:MM[:SS] as
 * <input type="datetime-local"> sends it, from 1970 on.  Writes *out (UTC
 * seconds) only on CS_OK; CS_EINVAL for any other text or an impossible date
 * (2025-02-29, 24:00).  Since is inclusive: entries at that second are shown. */
#define ADMIN_SINCE_DIGITS_MAX 12
#define ADMIN_SINCE_MAX 19               /* the longest form, YYYY-MM-DDTHH:MM:SS */
#define ADMIN_SINCE_INPUT_MAX 253402300799LL   /* 9999-12-31T23:59:59Z */
enum cs_err admin_parse_since(const char *s, int64_t *out) CS_MUST_CHECK;

enum admin_gate {
	ADMIN_GATE_OK = 0,       /* an admin with a recent enough login */
	ADMIN_GATE_NOT_ADMIN,    /* the ID token's admin claim did not match */
	ADMIN_GATE_STALE,        /* an admin whose auth_time is missing, in the future or too old */
	ADMIN_GATE__MAX
};

/* Decides from the session alone (pure): admin_claim set at login and
 * 0 < auth_time, auth_time <= now + clock_skew, now - auth_time <= max_age
 * where max_age is admin_timeout, or for a step-up the smaller of
 * ADMIN_STEPUP_MAX_AGE and admin_timeout. */
enum admin_gate admin_gate_check(const struct config *cfg, const struct session *s, int64_t now,
    bool stepup);

/* SECURITY: the admin gate the router runs before every /admin page and form
 * (routes.c's ROUTE_AUTH_ADMIN_PAGE / _STEPUP) over the request's session s
 * (NULL: none; routes.c reads it).  CS_OK with *ok true: s is an admin's
 * session with a recent enough login (a step-up when stepup); otherwise the
 * reply is complete (sign-in redirect, 401, audited 403). */
enum cs_err admin_pages_gate(const struct http_request *req, struct http_reply *rep, bool stepup,
    const struct session *s, bool *ok) CS_MUST_CHECK;

/* Each route's parameters by position (routes.c declares them in this order;
 * http_arg reads them).  A form's csrf comes first (ROUTE_CSRF_PARAM). */
enum admin_pages_search_param { ADMIN_PAGES_SEARCH_USER, ADMIN_PAGES_SEARCH_AGENT,
	ADMIN_PAGES_SEARCH_RESOURCE, ADMIN_PAGES_SEARCH_STATE, ADMIN_PAGES_SEARCH_AFTER };
enum admin_pages_revoke_one_param { ADMIN_PAGES_REVOKE_ONE_CSRF, ADMIN_PAGES_REVOKE_ONE_REASON };
enum admin_pages_bulk_confirm_param { ADMIN_PAGES_BULK_CONFIRM_BY, ADMIN_PAGES_BULK_CONFIRM_VALUE };
enum admin_pages_bulk_revoke_param { ADMIN_PAGES_BULK_REVOKE_CSRF, ADMIN_PAGES_BULK_REVOKE_BY,
	ADMIN_PAGES_BULK_REVOKE_VALUE, ADMIN_PAGES_BULK_REVOKE_COUNT, ADMIN_PAGES_BULK_REVOKE_REASON };
/* Newest first: the page older than entry `before`, or newer than `after`. */
enum admin_pages_audit_param { ADMIN_PAGES_AUDIT_ACTION, ADMIN_PAGES_AUDIT_CONSENT,
	ADMIN_PAGES_AUDIT_SINCE, ADMIN_PAGES_AUDIT_BEFORE, ADMIN_PAGES_AUDIT_AFTER };
enum admin_pages_audit_verify_param { ADMIN_PAGES_AUDIT_VERIFY_CSRF };
enum admin_pages_rule_end_param { ADMIN_PAGES_RULE_END_CSRF };
_Static_assert(ADMIN_PAGES_REVOKE_ONE_CSRF == ROUTE_CSRF_PARAM &&
    ADMIN_PAGES_RULE_END_CSRF == ROUTE_CSRF_PARAM &&
    ADMIN_PAGES_BULK_REVOKE_CSRF == ROUTE_CSRF_PARAM &&
    ADMIN_PAGES_AUDIT_VERIFY_CSRF == ROUTE_CSRF_PARAM, "a form's csrf is where it is read");

enum cs_err admin_pages_search(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err admin_pages_consent(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* GET /admin/consents/{id}/revoke: the confirmation, with a reason to give. */
enum cs_err admin_pages_revoke_confirm(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* POST: revokes it when the form carries this session's CSRF token and a
 * reason (not only spaces); without a reason the confirmation comes back with
 * 400 and nothing is revoked. */
enum cs_err admin_pages_revoke_one(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* GET /admin/rules/{id}/end: a person's standing rule (issue #32) in words,
 * with the form that ends it while it holds. */
enum cs_err admin_pages_rule_end_confirm(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* POST: ends it (standing_end, audited as the admin API's end) when the form
 * carries this session's CSRF token; 303 to its consent's page. */
enum cs_err admin_pages_rule_end(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err admin_pages_bulk_confirm(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err admin_pages_bulk_revoke(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* GET /admin/audit: newest first, a page at a time (?before=, ?after= entry
 * numbers), filtered by an action of audit_actions, a consent and a time. */
enum cs_err admin_pages_audit(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
/* POST /admin/audit/verify: audit_verify, as `consentd audit verify` runs
 * it, and a page with its result and the head it reached. */
enum cs_err admin_pages_audit_verify(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

#endif
