/* routes.c -- the route table: every URL consentd answers, its method, the
 * kind of client it serves and the parameters it accepts.  A parameter not
 * declared here never reaches a handler. */
#include <stddef.h>
#include <string.h>
#include "admin_api.h"
#include "admin_pages.h"
#include "approval_pages.h"
#include "consent_pages.h"
#include "http.h"
#include "login_pages.h"
#include "me_pages.h"
#include "meta.h"
#include "pages.h"
#include "proxy.h"
#include "vault_pages.h"
#include "proxy_api.h"
#include "token_api.h"

static bool valid_prompt(const char *v)
{
	return strcmp(v, "login") == 0;
}

static bool valid_digits(const char *v)
{
	if (*v == '\0')
		return false;
	for (; *v; v++)
		if (*v < '0' || *v > '9')
			return false;
	return true;
}

static bool valid_decision(const char *v)
{
	return strcmp(v, "approve") == 0 || strcmp(v, "deny") == 0;
}

static bool valid_on(const char *v)
{
	return strcmp(v, "on") == 0;
}

static bool valid_yes(const char *v)
{
	return strcmp(v, "yes") == 0;
}

/* The words logout sends the browser back to / with (through the IdP's
 * end_session_endpoint as its `state`, or directly): meta.c says each in its
 * own words, never the URL's. */
static bool valid_signed_out(const char *v)
{
	return strcmp(v, "signed-out") == 0 || strcmp(v, "signed-out-here") == 0;
}

/* The outcomes the provider callback names on the done page: words chosen by
 * consentd, never text (pages.c says each in its own words). */
static bool valid_done_outcome(const char *v)
{
	return strcmp(v, "cancelled") == 0 || strcmp(v, "too_much") == 0 ||
	    strcmp(v, "failed") == 0 || strcmp(v, "changed") == 0;
}

static bool valid_hex(const char *v)
{
	if (*v == '\0')
		return false;
	for (; *v; v++)
		if (!((*v >= '0' && *v <= '9') || (*v >= 'a' && *v <= 'f')))
			return false;
	return true;
}

/* The admin search's states ("" = any). */
static bool valid_admin_state(const char *v)
{
	return *v == '\0' || strcmp(v, "live") == 0 || strcmp(v, "expired") == 0 ||
	    strcmp(v, "revoked") == 0 || strcmp(v, "reconnect_required") == 0;
}

static bool valid_admin_by(const char *v)
{
	return strcmp(v, "user") == 0 || strcmp(v, "agent") == 0 || strcmp(v, "resource") == 0;
}

/* The audit page's since: empty (an unused filter), or UTC seconds, or a UTC
 * date or date and time (admin_parse_since). */
static bool valid_admin_since(const char *v)
{
	int64_t t;
	return *v == '\0' || admin_parse_since(v, &t) == CS_OK;
}

/* One checkbox per position in the stored request (consent.h's CONSENT_MAX_SCOPES). */
#define SCOPE_BOX(i) { "s" #i, 2, valid_on, 0 }

const struct route http_routes[] = {
	{ HTTP_GET, "/", ROUTE_BROWSER, meta_index, {
		{ "state", 16, valid_signed_out, 0 },
		{ NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/.well-known/oauth-authorization-server", ROUTE_PUBLIC, meta_as_metadata,
	  { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/.well-known/jwks.json", ROUTE_PUBLIC, meta_jwks, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/healthz", ROUTE_PUBLIC, meta_healthz, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/readyz", ROUTE_PUBLIC, meta_readyz, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/metrics", ROUTE_PUBLIC, proxy_metrics, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/static/consentd.css", ROUTE_PUBLIC, meta_stylesheet, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/static/local-time.js", ROUTE_PUBLIC, meta_local_time_script,
	  { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/login", ROUTE_BROWSER, login_start, {
		{ "return_to", LOGIN_RETURN_TO_MAX, valid_return_to, 0 },
		{ "prompt", 16, valid_prompt, 0 },
		{ "max_age", 10, valid_digits, 0 },
		{ NULL, 0, NULL, 0 } }, 0 },
	/* The IdP decides which parameters come back; these are every one that
	 * OpenID Connect and RFC 9207 define for a code response. */
	{ HTTP_GET, "/callback", ROUTE_BROWSER, login_callback, {
		{ "code", 4096, valid_printable, 0 },
		{ "state", 128, valid_token68, 0 },
		{ "iss", 1024, valid_printable, 0 },
		{ "error", 256, valid_printable, 0 },
		{ "error_description", 1024, valid_printable, 0 },
		{ "error_uri", 1024, valid_printable, 0 },
		{ "session_state", 1024, valid_printable, 0 },
		{ NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_POST, "/logout", ROUTE_BROWSER, login_logout, {
		{ "csrf", 64, valid_token68, PARAM_REQUIRED },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY },
	{ HTTP_GET, "/me", ROUTE_BROWSER, me_pages_show, { { NULL, 0, NULL, 0 } }, 0 },
	/* Revoking on /me: a confirmation page, its form (confirm=yes, so no other
	 * form revokes), and the page that says what happened. */
	{ HTTP_GET, "/me/consents/{id}/revoke", ROUTE_BROWSER, me_pages_revoke_confirm, {
		{ NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_POST, "/me/consents/{id}/revoke", ROUTE_BROWSER, me_pages_revoke, {
		{ "csrf", 64, valid_token68, PARAM_REQUIRED },
		{ "confirm", 4, valid_yes, PARAM_REQUIRED },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY },
	{ HTTP_GET, "/me/consents/{id}/revoked", ROUTE_BROWSER, me_pages_revoked, {
		{ NULL, 0, NULL, 0 } }, 0 },
	/* "Allow it to ask again": lifts the deny_cooldown a decision holds. */
	{ HTTP_POST, "/me/requests/{id}/allow", ROUTE_BROWSER, me_pages_allow, {
		{ "csrf", 64, valid_token68, PARAM_REQUIRED },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY },
	{ HTTP_GET, "/consent/{id}", ROUTE_BROWSER, pages_consent_show, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/consent/{id}/done", ROUTE_BROWSER, pages_consent_done, {
		{ "outcome", 16, valid_done_outcome, 0 },
		{ NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/approve/{id}", ROUTE_BROWSER, pages_approve_show, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_POST, "/approve/{id}", ROUTE_BROWSER, pages_approve_decide, {
		{ "csrf", 64, valid_token68, PARAM_REQUIRED },
		{ "decision", 8, valid_decision, PARAM_REQUIRED },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY },
	/* One redirect URI per resource (against mix-up): the provider's answer. */
	{ HTTP_GET, "/oauth/callback/{resource}", ROUTE_BROWSER, vault_pages_callback, {
		{ "code", 4096, valid_printable, 0 },
		{ "state", 128, valid_token68, 0 },
		{ "iss", 1024, valid_printable, 0 },
		{ "error", 256, valid_printable, 0 },
		{ "error_description", 1024, valid_printable, 0 },
		{ "error_uri", 1024, valid_printable, 0 },
		{ "scope", 2048, valid_printable, 0 },
		{ NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_POST, "/consent/{id}", ROUTE_BROWSER, pages_consent_decide, {
		{ "csrf", 64, valid_token68, PARAM_REQUIRED },
		{ "decision", 8, valid_decision, PARAM_REQUIRED },
		{ "duration", 10, valid_digits, 0 },
		{ "offline", 2, valid_on, 0 },
		{ "version", 64, valid_hex, 0 },
		SCOPE_BOX(0), SCOPE_BOX(1), SCOPE_BOX(2), SCOPE_BOX(3), SCOPE_BOX(4),
		SCOPE_BOX(5), SCOPE_BOX(6), SCOPE_BOX(7), SCOPE_BOX(8), SCOPE_BOX(9),
		SCOPE_BOX(10), SCOPE_BOX(11), SCOPE_BOX(12), SCOPE_BOX(13), SCOPE_BOX(14),
		SCOPE_BOX(15), SCOPE_BOX(16), SCOPE_BOX(17), SCOPE_BOX(18), SCOPE_BOX(19),
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY },
	/* Admin pages (admin_pages.c): every handler passes the admin gate first;
	 * search values are bound parameters and escaped output, never patterns. */
	{ HTTP_GET, "/admin", ROUTE_BROWSER, admin_pages_search, {
		{ "user", 255, valid_printable, 0 },
		{ "agent", 128, valid_printable, 0 },
		{ "resource", 128, valid_printable, 0 },
		{ "state", 24, valid_admin_state, 0 },
		{ "after", 64, valid_printable, 0 },
		{ NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/admin/consents/{id}", ROUTE_BROWSER, admin_pages_consent,
	  { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_POST, "/admin/consents/{id}/revoke", ROUTE_BROWSER, admin_pages_revoke_one, {
		{ "csrf", 64, valid_token68, PARAM_REQUIRED },
		{ "reason", 200, valid_printable, 0 },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY },
	{ HTTP_GET, "/admin/revoke", ROUTE_BROWSER, admin_pages_bulk_confirm, {
		{ "by", 10, valid_admin_by, 0 },
		{ "value", 255, valid_printable, 0 },
		{ NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_POST, "/admin/revoke", ROUTE_BROWSER, admin_pages_bulk_revoke, {
		{ "csrf", 64, valid_token68, PARAM_REQUIRED },
		{ "by", 10, valid_admin_by, PARAM_REQUIRED },
		{ "value", 255, valid_printable, PARAM_REQUIRED },
		{ "count", 12, valid_digits, PARAM_REQUIRED },
		{ "reason", 200, valid_printable, 0 },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY },
	{ HTTP_GET, "/admin/audit", ROUTE_BROWSER, admin_pages_audit, {
		{ "action", 128, valid_printable, 0 },
		{ "consent", 64, valid_printable, 0 },
		{ "since", ADMIN_SINCE_MAX, valid_admin_since, 0 },
		{ "after", 20, valid_digits, 0 },
		{ NULL, 0, NULL, 0 } }, 0 },
	/* The gateway's endpoints: RFC 6749 JSON errors, unknown parameters ignored. */
	{ HTTP_POST, "/token", ROUTE_OAUTH, token_endpoint, {
		{ "grant_type", 128, valid_printable, PARAM_REQUIRED },
		{ "subject_token", 16384, valid_token68, 0 },
		{ "subject_token_type", 128, valid_printable, 0 },
		{ "requested_token_type", 128, valid_printable, 0 },
		{ "audience", 256, valid_printable, 0 },
		{ "resource", 1024, valid_printable, 0 },
		{ "scope", 2048, valid_printable, 0 },
		{ "agent_id", 128, valid_printable, 0 },
		/* The rule (200 characters, no control character) is token.c's, which
		 * says it in one sentence; this only bounds the bytes. */
		{ "reason", 8192, NULL, 0 },
		{ "refresh_token", 128, valid_token68, 0 },
		{ "action", 128, valid_printable, 0 },
		{ "authorization_details", 16384, NULL, 0 },   /* JSON: the approval parser checks it */
		/* private_key_jwt (client_auth.c): RFC 7523 §2.2. */
		{ "client_assertion_type", 128, valid_printable, 0 },
		{ "client_assertion", 16384, valid_token68, 0 },
		{ "client_id", 128, valid_printable, 0 },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY },
	{ HTTP_POST, "/introspect", ROUTE_OAUTH, token_introspect, {
		{ "token", 16384, valid_token68, PARAM_REQUIRED },
		{ "token_type_hint", 64, valid_printable, 0 },
		/* private_key_jwt (client_auth.c): RFC 7523 §2.2. */
		{ "client_assertion_type", 128, valid_printable, 0 },
		{ "client_assertion", 16384, valid_token68, 0 },
		{ "client_id", 128, valid_printable, 0 },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY },
	{ HTTP_POST, "/revoke", ROUTE_OAUTH, token_revoke, {
		{ "token", 16384, valid_token68, PARAM_REQUIRED },
		{ "token_type_hint", 64, valid_printable, 0 },
		/* private_key_jwt (client_auth.c): RFC 7523 §2.2. */
		{ "client_assertion_type", 128, valid_printable, 0 },
		{ "client_assertion", 16384, valid_token68, 0 },
		{ "client_id", 128, valid_printable, 0 },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY },
	/* Proxy mode (flow H, proxy.c): the rest of the path comes raw, the query
	 * and body are read by the handler (no declared parameters; flags 0). */
	{ HTTP_GET, "/proxy/{resource}/{rest*}", ROUTE_OAUTH, proxy_handle, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_POST, "/proxy/{resource}/{rest*}", ROUTE_OAUTH, proxy_handle, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_PUT, "/proxy/{resource}/{rest*}", ROUTE_OAUTH, proxy_handle, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_PATCH, "/proxy/{resource}/{rest*}", ROUTE_OAUTH, proxy_handle, { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_DELETE, "/proxy/{resource}/{rest*}", ROUTE_OAUTH, proxy_handle, { { NULL, 0, NULL, 0 } }, 0 },
	/* The admin JSON API: bearer admin tokens only (admin_api.c), JSON
	 * errors, unknown parameters refused, JSON bodies for writes. */
	{ HTTP_GET, "/admin/api/consents", ROUTE_API, admin_api_consents, {
		{ "user", 256, valid_printable, 0 },
		{ "agent", 128, valid_printable, 0 },
		{ "resource", 128, valid_printable, 0 },
		{ "state", 32, admin_api_valid_state, 0 },
		{ "cursor", 64, valid_printable, 0 },
		{ "limit", 3, admin_api_valid_limit, 0 },
		{ NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/admin/api/consents/{id}", ROUTE_API, admin_api_consent,
	  { { NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_POST, "/admin/api/consents/{id}/revoke", ROUTE_API, admin_api_consent_revoke,
	  { { NULL, 0, NULL, 0 } }, ROUTE_JSON_BODY },
	{ HTTP_POST, "/admin/api/revocations", ROUTE_API, admin_api_revocations,
	  { { NULL, 0, NULL, 0 } }, ROUTE_JSON_BODY },
	{ HTTP_GET, "/admin/api/requests", ROUTE_API, admin_api_requests, {
		{ "limit", 3, admin_api_valid_limit, 0 },
		{ NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/admin/api/events", ROUTE_API, admin_api_events, {
		{ "consent_id", 64, valid_token68, 0 },
		{ "limit", 3, admin_api_valid_limit, 0 },
		{ NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, "/admin/api/audit", ROUTE_API, admin_api_audit, {
		{ "since", 18, valid_digits, 0 },
		{ "action", 64, valid_printable, 0 },
		{ "consent_id", 64, valid_token68, 0 },
		{ "cursor", 20, valid_digits, 0 },
		{ "limit", 3, admin_api_valid_limit, 0 },
		{ NULL, 0, NULL, 0 } }, 0 },
	{ HTTP_GET, NULL, 0, NULL, { { NULL, 0, NULL, 0 } }, 0 },
};
