/* routes.c -- the route table: every URL consentd answers, its method, the
 * kind of client it serves, who may call it (the gate the router runs first),
 * whether it is deferred, and the typed parameters it accepts.  The one place
 * that decides a route's properties: a parameter not declared here never
 * reaches a handler, and no handler authenticates its caller itself. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "admin_api.h"
#include "admin_pages.h"
#include "buf.h"
#include "consent.h"
#include "http.h"
#include "login.h"
#include "me_pages.h"
#include "meta.h"
#include "pages.h"
#include "proxy.h"
#include "session.h"
#include "token.h"

/* The words a parameter may be (PARAM_WORD), each list ending at NULL. */
static const char *const w_prompt[] = { "login", NULL };
static const char *const w_decision[] = { "approve", "deny", NULL };
static const char *const w_yes[] = { "yes", NULL };
/* The words logout sends the browser back to / with (through the IdP's
 * end_session_endpoint as its `state`, or directly): meta.c says each in its
 * own words, never the URL's. */
static const char *const w_signed_out[] = { "signed-out", "signed-out-here", NULL };
/* The outcomes the provider callback names on the done page: words chosen by
 * consentd, never text (pages.c says each in its own words). */
static const char *const w_done_outcome[] = { "cancelled", "too_much", "failed", "changed", NULL };
/* The admin search's states ("" = any). */
static const char *const w_admin_state[] = { "", "live", "expired", "revoked",
	"reconnect_required", NULL };
static const char *const w_admin_by[] = { "user", "agent", "resource", NULL };

/* The largest number of n decimal digits (a PARAM_INT as long as max_len allows). */
#define DIGITS_10 INT64_C(9999999999)
#define DIGITS_12 INT64_C(999999999999)

static bool valid_digits(const char *v)
{
	if (*v == '\0')
		return false;
	for (; *v; v++)
		if (*v < '0' || *v > '9')
			return false;
	return true;
}

/* The words logout sends the browser back to / with (through the IdP's
 * end_session_endpoint as its `state`, or directly): meta.c says each in its
 * own words, never the URL's. */
static bool valid_hex(const char *v)
{
	if (*v == '\0')
		return false;
	for (; *v; v++)
		if (!((*v >= '0' && *v <= '9') || (*v >= 'a' && *v <= 'f')))
			return false;
	return true;
}

/* The audit page's since: empty (an unused filter), or UTC seconds, or a UTC
 * date or date and time (admin_parse_since). */
static bool valid_admin_since(const char *v)
{
	int64_t t;
	return *v == '\0' || admin_parse_since(v, &t) == CS_OK;
}

const struct route http_routes[] = {
	{ HTTP_GET, "/", ROUTE_BROWSER, ROUTE_AUTH_NONE, meta_index, {
		PARAM_WORDS("state", 16, w_signed_out, 0),
		PARAM_END }, 0 },
	{ HTTP_GET, "/.well-known/oauth-authorization-server", ROUTE_PUBLIC, ROUTE_AUTH_NONE, meta_as_metadata,
	  PARAMS_NONE, 0 },
	{ HTTP_GET, "/.well-known/jwks.json", ROUTE_PUBLIC, ROUTE_AUTH_NONE, meta_jwks, PARAMS_NONE, 0 },
	{ HTTP_GET, "/healthz", ROUTE_PUBLIC, ROUTE_AUTH_NONE, meta_healthz, PARAMS_NONE, 0 },
	{ HTTP_GET, "/readyz", ROUTE_PUBLIC, ROUTE_AUTH_NONE, meta_readyz, PARAMS_NONE, 0 },
	{ HTTP_GET, "/metrics", ROUTE_PUBLIC, ROUTE_AUTH_GATEWAY, proxy_metrics, PARAMS_NONE, 0 },
	{ HTTP_GET, "/static/consentd.css", ROUTE_PUBLIC, ROUTE_AUTH_NONE, meta_stylesheet, PARAMS_NONE, 0 },
	{ HTTP_GET, "/static/local-time.js", ROUTE_PUBLIC, ROUTE_AUTH_NONE, meta_local_time_script,
	  PARAMS_NONE, 0 },
	{ HTTP_GET, "/login", ROUTE_BROWSER, ROUTE_AUTH_NONE, login_start, {
		PARAM_STR("return_to", LOGIN_RETURN_TO_MAX, valid_return_to, 0),
		PARAM_WORDS("prompt", 16, w_prompt, 0),
		PARAM_INT_RANGE("max_age", 10, 0, DIGITS_10, 0),
		PARAM_END }, 0 },
	/* The IdP decides which parameters come back; these are every one that
	 * OpenID Connect and RFC 9207 define for a code response. */
	{ HTTP_GET, "/callback", ROUTE_BROWSER, ROUTE_AUTH_NONE, login_callback, {
		PARAM_STR("code", 4096, valid_printable, 0),
		PARAM_STR("state", 128, valid_token68, 0),
		PARAM_STR("iss", 1024, valid_printable, 0),
		PARAM_STR("error", 256, valid_printable, 0),
		PARAM_STR("error_description", 1024, valid_printable, 0),
		PARAM_STR("error_uri", 1024, valid_printable, 0),
		PARAM_STR("session_state", 1024, valid_printable, 0),
		PARAM_END }, 0 },
	{ HTTP_POST, "/logout", ROUTE_BROWSER, ROUTE_AUTH_NONE, login_logout, {
		PARAM_STR("csrf", 64, valid_token68, PARAM_REQUIRED),
		PARAM_END }, ROUTE_FORM_BODY },
	{ HTTP_GET, "/me", ROUTE_BROWSER, ROUTE_AUTH_NONE, me_pages_show, PARAMS_NONE, 0 },
	/* Revoking on /me: a confirmation page, its form (confirm=yes, so no other
	 * form revokes), and the page that says what happened. */
	{ HTTP_GET, "/me/consents/{id}/revoke", ROUTE_BROWSER, ROUTE_AUTH_NONE, me_pages_revoke_confirm, {
		PARAM_END }, 0 },
	{ HTTP_POST, "/me/consents/{id}/revoke", ROUTE_BROWSER, ROUTE_AUTH_NONE, me_pages_revoke, {
		PARAM_STR("csrf", 64, valid_token68, PARAM_REQUIRED),
		PARAM_WORDS("confirm", 4, w_yes, PARAM_REQUIRED),
		PARAM_END }, ROUTE_FORM_BODY },
	{ HTTP_GET, "/me/consents/{id}/revoked", ROUTE_BROWSER, ROUTE_AUTH_NONE, me_pages_revoked, {
		PARAM_END }, 0 },
	/* "Allow it to ask again": lifts the deny_cooldown a decision holds. */
	{ HTTP_POST, "/me/requests/{id}/allow", ROUTE_BROWSER, ROUTE_AUTH_NONE, me_pages_allow, {
		PARAM_STR("csrf", 64, valid_token68, PARAM_REQUIRED),
		PARAM_END }, ROUTE_FORM_BODY },
	{ HTTP_GET, "/consent/{id}", ROUTE_BROWSER, ROUTE_AUTH_NONE, pages_consent_show, PARAMS_NONE, 0 },
	{ HTTP_GET, "/consent/{id}/done", ROUTE_BROWSER, ROUTE_AUTH_NONE, pages_consent_done, {
		PARAM_WORDS("outcome", 16, w_done_outcome, 0),
		PARAM_END }, 0 },
	{ HTTP_GET, "/approve/{id}", ROUTE_BROWSER, ROUTE_AUTH_NONE, pages_approve_show, PARAMS_NONE, 0 },
	{ HTTP_POST, "/approve/{id}", ROUTE_BROWSER, ROUTE_AUTH_NONE, pages_approve_decide, {
		PARAM_STR("csrf", 64, valid_token68, PARAM_REQUIRED),
		PARAM_WORDS("decision", 8, w_decision, PARAM_REQUIRED),
		PARAM_END }, ROUTE_FORM_BODY },
	/* One redirect URI per resource (against mix-up): the provider's answer. */
	{ HTTP_GET, "/oauth/callback/{resource}", ROUTE_BROWSER, ROUTE_AUTH_NONE, pages_provider_callback, {
		PARAM_STR("code", 4096, valid_printable, 0),
		PARAM_STR("state", 128, valid_token68, 0),
		PARAM_STR("iss", 1024, valid_printable, 0),
		PARAM_STR("error", 256, valid_printable, 0),
		PARAM_STR("error_description", 1024, valid_printable, 0),
		PARAM_STR("error_uri", 1024, valid_printable, 0),
		PARAM_STR("scope", 2048, valid_printable, 0),
		PARAM_END }, 0 },
	{ HTTP_POST, "/consent/{id}", ROUTE_BROWSER, ROUTE_AUTH_NONE, pages_consent_decide, {
		PARAM_STR("csrf", 64, valid_token68, PARAM_REQUIRED),
		PARAM_WORDS("decision", 8, w_decision, PARAM_REQUIRED),
		PARAM_INT_RANGE("duration", 10, 0, DIGITS_10, 0),
		PARAM_CHECKBOX("offline"),
		PARAM_STR("version", 64, valid_hex, 0),
		/* One checkbox per position in the stored request: s0 .. s19. */
		PARAM_CHECKBOXES("s", CONSENT_MAX_SCOPES),
		PARAM_END }, ROUTE_FORM_BODY },
	/* Admin pages (admin_pages.c), behind the admin gate (admin_pages_gate);
	 * search values are bound parameters and escaped output, never patterns. */
	{ HTTP_GET, "/admin", ROUTE_BROWSER, ROUTE_AUTH_ADMIN_PAGE, admin_pages_search, {
		PARAM_STR("user", 255, valid_printable, 0),
		PARAM_STR("agent", 128, valid_printable, 0),
		PARAM_STR("resource", 128, valid_printable, 0),
		PARAM_WORDS("state", 24, w_admin_state, 0),
		PARAM_STR("after", 64, valid_printable, 0),
		PARAM_END }, 0 },
	{ HTTP_GET, "/admin/consents/{id}", ROUTE_BROWSER, ROUTE_AUTH_ADMIN_PAGE, admin_pages_consent,
	  PARAMS_NONE, 0 },
	{ HTTP_POST, "/admin/consents/{id}/revoke", ROUTE_BROWSER, ROUTE_AUTH_ADMIN_PAGE, admin_pages_revoke_one, {
		PARAM_STR("csrf", 64, valid_token68, PARAM_REQUIRED),
		PARAM_STR("reason", 200, valid_printable, 0),
		PARAM_END }, ROUTE_FORM_BODY },
	{ HTTP_GET, "/admin/revoke", ROUTE_BROWSER, ROUTE_AUTH_ADMIN_STEPUP, admin_pages_bulk_confirm, {
		PARAM_WORDS("by", 10, w_admin_by, 0),
		PARAM_STR("value", 255, valid_printable, 0),
		PARAM_END }, 0 },
	{ HTTP_POST, "/admin/revoke", ROUTE_BROWSER, ROUTE_AUTH_ADMIN_STEPUP, admin_pages_bulk_revoke, {
		PARAM_STR("csrf", 64, valid_token68, PARAM_REQUIRED),
		PARAM_WORDS("by", 10, w_admin_by, PARAM_REQUIRED),
		PARAM_STR("value", 255, valid_printable, PARAM_REQUIRED),
		PARAM_INT_RANGE("count", 12, 0, DIGITS_12, PARAM_REQUIRED),
		PARAM_STR("reason", 200, valid_printable, 0),
		PARAM_END }, ROUTE_FORM_BODY },
	{ HTTP_GET, "/admin/audit", ROUTE_BROWSER, ROUTE_AUTH_ADMIN_PAGE, admin_pages_audit, {
		PARAM_STR("action", 128, valid_printable, 0),
		PARAM_STR("consent", 64, valid_printable, 0),
		PARAM_STR("since", ADMIN_SINCE_MAX, valid_admin_since, 0),
		PARAM_STR("after", 20, valid_digits, 0),
		PARAM_END }, 0 },
	/* The gateway's endpoints: RFC 6749 JSON errors, unknown parameters ignored. */
	{ HTTP_POST, "/token", ROUTE_OAUTH, ROUTE_AUTH_GATEWAY, token_endpoint, {
		PARAM_STR("grant_type", 128, valid_printable, PARAM_REQUIRED),
		PARAM_STR("subject_token", 16384, valid_token68, 0),
		PARAM_STR("subject_token_type", 128, valid_printable, 0),
		PARAM_STR("requested_token_type", 128, valid_printable, 0),
		PARAM_STR("audience", 256, valid_printable, 0),
		PARAM_STR("resource", 1024, valid_printable, 0),
		PARAM_STR("scope", 2048, valid_printable, 0),
		PARAM_STR("agent_id", 128, valid_printable, 0),
		/* The rule (200 characters, no control character) is token.c's, which
		 * says it in one sentence; this only bounds the bytes. */
		PARAM_STR("reason", 8192, NULL, 0),
		PARAM_STR("refresh_token", 128, valid_token68, 0),
		PARAM_STR("action", 128, valid_printable, 0),
		PARAM_STR("authorization_details", 16384, NULL, 0),   /* JSON: the approval parser checks it */
		/* private_key_jwt (client_auth.c): RFC 7523 §2.2. */
		PARAM_STR("client_assertion_type", 128, valid_printable, 0),
		PARAM_STR("client_assertion", 16384, valid_token68, 0),
		PARAM_STR("client_id", 128, valid_printable, 0),
		PARAM_END }, ROUTE_FORM_BODY },
	{ HTTP_POST, "/introspect", ROUTE_OAUTH, ROUTE_AUTH_GATEWAY, token_introspect, {
		PARAM_STR("token", 16384, valid_token68, PARAM_REQUIRED),
		PARAM_STR("token_type_hint", 64, valid_printable, 0),
		/* private_key_jwt (client_auth.c): RFC 7523 §2.2. */
		PARAM_STR("client_assertion_type", 128, valid_printable, 0),
		PARAM_STR("client_assertion", 16384, valid_token68, 0),
		PARAM_STR("client_id", 128, valid_printable, 0),
		PARAM_END }, ROUTE_FORM_BODY },
	{ HTTP_POST, "/revoke", ROUTE_OAUTH, ROUTE_AUTH_GATEWAY, token_revoke, {
		PARAM_STR("token", 16384, valid_token68, PARAM_REQUIRED),
		PARAM_STR("token_type_hint", 64, valid_printable, 0),
		/* private_key_jwt (client_auth.c): RFC 7523 §2.2. */
		PARAM_STR("client_assertion_type", 128, valid_printable, 0),
		PARAM_STR("client_assertion", 16384, valid_token68, 0),
		PARAM_STR("client_id", 128, valid_printable, 0),
		PARAM_END }, ROUTE_FORM_BODY },
	/* Proxy mode (flow H, proxy.c): the rest of the path comes raw, the query
	 * and body are read by the handler (no declared parameters); it waits on
	 * the upstream, so it runs deferred, off the server's workers (http.c). */
	{ HTTP_GET, "/proxy/{resource}/{rest*}", ROUTE_OAUTH, ROUTE_AUTH_GATEWAY, proxy_handle,
	  PARAMS_NONE, ROUTE_DEFERRED },
	{ HTTP_POST, "/proxy/{resource}/{rest*}", ROUTE_OAUTH, ROUTE_AUTH_GATEWAY, proxy_handle,
	  PARAMS_NONE, ROUTE_DEFERRED },
	{ HTTP_PUT, "/proxy/{resource}/{rest*}", ROUTE_OAUTH, ROUTE_AUTH_GATEWAY, proxy_handle,
	  PARAMS_NONE, ROUTE_DEFERRED },
	{ HTTP_PATCH, "/proxy/{resource}/{rest*}", ROUTE_OAUTH, ROUTE_AUTH_GATEWAY, proxy_handle,
	  PARAMS_NONE, ROUTE_DEFERRED },
	{ HTTP_DELETE, "/proxy/{resource}/{rest*}", ROUTE_OAUTH, ROUTE_AUTH_GATEWAY, proxy_handle,
	  PARAMS_NONE, ROUTE_DEFERRED },
	/* The admin JSON API: bearer admin tokens only (admin_api.c), JSON
	 * errors, unknown parameters refused, JSON bodies for writes. */
	{ HTTP_GET, "/admin/api/consents", ROUTE_API, ROUTE_AUTH_ADMIN_API, admin_api_consents, {
		PARAM_STR("user", 256, valid_printable, 0),
		PARAM_STR("agent", 128, valid_printable, 0),
		PARAM_STR("resource", 128, valid_printable, 0),
		PARAM_STR("state", 32, admin_api_valid_state, 0),
		PARAM_STR("cursor", 64, valid_printable, 0),
		PARAM_STR("limit", 3, admin_api_valid_limit, 0),
		PARAM_END }, 0 },
	{ HTTP_GET, "/admin/api/consents/{id}", ROUTE_API, ROUTE_AUTH_ADMIN_API, admin_api_consent,
	  PARAMS_NONE, 0 },
	{ HTTP_POST, "/admin/api/consents/{id}/revoke", ROUTE_API, ROUTE_AUTH_ADMIN_API, admin_api_consent_revoke,
	  PARAMS_NONE, ROUTE_JSON_BODY },
	{ HTTP_POST, "/admin/api/revocations", ROUTE_API, ROUTE_AUTH_ADMIN_API, admin_api_revocations,
	  PARAMS_NONE, ROUTE_JSON_BODY },
	{ HTTP_GET, "/admin/api/requests", ROUTE_API, ROUTE_AUTH_ADMIN_API, admin_api_requests, {
		PARAM_STR("limit", 3, admin_api_valid_limit, 0),
		PARAM_END }, 0 },
	{ HTTP_GET, "/admin/api/events", ROUTE_API, ROUTE_AUTH_ADMIN_API, admin_api_events, {
		PARAM_STR("consent_id", 64, valid_token68, 0),
		PARAM_STR("limit", 3, admin_api_valid_limit, 0),
		PARAM_END }, 0 },
	{ HTTP_GET, "/admin/api/audit", ROUTE_API, ROUTE_AUTH_ADMIN_API, admin_api_audit, {
		PARAM_STR("since", 18, valid_digits, 0),
		PARAM_STR("action", 64, valid_printable, 0),
		PARAM_STR("consent_id", 64, valid_token68, 0),
		PARAM_STR("cursor", 20, valid_digits, 0),
		PARAM_STR("limit", 3, admin_api_valid_limit, 0),
		PARAM_END }, 0 },
	{ HTTP_GET, NULL, 0, ROUTE_AUTH_NONE, NULL, PARAMS_NONE, 0 },
};

/* Paths no route matches are answered in the kind of the routes around them. */
const struct route_prefix http_route_prefixes[] = {
	{ "/admin/api/", ROUTE_API },
	{ "/.well-known/", ROUTE_PUBLIC },
	{ "/proxy/", ROUTE_OAUTH },
	{ NULL, ROUTE_BROWSER },
};

/* --- the gates ------------------------------------------------------------ */

/* SECURITY: the admin pages' gate (admin_pages_gate says what each refusal
 * answers and audits); the session it found goes with the request. */
static enum cs_err admin_session(struct http_request *req, struct http_reply *rep, bool stepup,
    bool *ok)
{
	struct session *s = calloc(1, sizeof *s);
	enum cs_err e;
	*ok = false;
	if (s == NULL)
		return CS_ENOMEM;
	e = admin_pages_gate(req, rep, stepup, s, ok);
	if (e != CS_OK || !*ok) {
		*ok = false;
		session_clear(s);
		free(s);
		return e;
	}
	req->auth.session = s;
	return CS_OK;
}

static enum cs_err gate_admin_page(struct http_request *req, struct http_reply *rep, bool *ok)
{
	return admin_session(req, rep, false, ok);
}

static enum cs_err gate_admin_stepup(struct http_request *req, struct http_reply *rep, bool *ok)
{
	return admin_session(req, rep, true, ok);
}

/* SECURITY: the admin API's bearer token, audited under "METHOD pattern". */
static enum cs_err gate_admin_api(struct http_request *req, struct http_reply *rep, bool *ok)
{
	char what[160];
	enum cs_err e;
	*ok = false;
	if ((e = str_fmt(what, sizeof what, "%s %s", http_method_name(req->route->method),
	    req->route->pattern)) != CS_OK)
		return e;
	req->auth.admin = admin_api_authenticate(req, rep, what);
	*ok = req->auth.admin != NULL;
	return CS_OK;
}

/* SECURITY: the gateway's client authentication (client_auth.c). */
static enum cs_err gate_gateway(struct http_request *req, struct http_reply *rep, bool *ok)
{
	*ok = req->auth.gateway = gateway_authenticate(req, rep);
	return CS_OK;
}

const http_gate http_gates[ROUTE_AUTH__MAX] = {
	[ROUTE_AUTH_NONE] = NULL,
	[ROUTE_AUTH_ADMIN_PAGE] = gate_admin_page,
	[ROUTE_AUTH_ADMIN_STEPUP] = gate_admin_stepup,
	[ROUTE_AUTH_ADMIN_API] = gate_admin_api,
	[ROUTE_AUTH_GATEWAY] = gate_gateway,
};
