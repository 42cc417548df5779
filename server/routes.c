/* routes.c -- the route table: every URL consentd answers, its method, the
 * kind of client it serves, who may call it (the gate the router runs first,
 * defined below), whether it is deferred, and the typed parameters it accepts,
 * at the positions its handler's header names (enum X_param).  The one place
 * that decides a route's properties: a parameter not declared here never
 * reaches a handler, and no handler reads a session or checks a form's CSRF
 * token itself (scripts/lint.sh holds it): a route a person must be signed in
 * for says so here, with the class whose gate answers when they are not. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "admin_api.h"
#include "admin_pages.h"
#include "app.h"
#include "approval_pages.h"
#include "authorize_pages.h"
#include "consent_pages.h"
#include "buf.h"
#include "client_auth_api.h"
#include "grant_api.h"
#include "consent.h"
#include "form.h"
#include "http.h"
#include "login_pages.h"
#include "mcp_token.h"
#include "me_pages.h"
#include "mcp_api.h"
#include "metrics_api.h"
#include "meta.h"
#include "page_reply.h"
#include "pages.h"
#include "proxy.h"
#include "session.h"
#include "standing_api.h"
#include "standing_pages.h"
#include "vault_key.h"
#include "vault_pages.h"
#include "proxy_api.h"
#include "token_api.h"

static bool valid_digits(const char *v)
{
	if (*v == '\0')
		return false;
	for (; *v; v++)
		if (*v < '0' || *v > '9')
			return false;
	return true;
}

/* The admin API's audit cursor: SEQ, or XID.SEQ (PostgreSQL's, migration
 * 0030); admin_audit_query reads it. */
static bool valid_audit_cursor(const char *v)
{
	size_t xid = strspn(v, "0123456789");
	return v[xid] == '.' ? xid > 0 && valid_digits(v + xid + 1) : valid_digits(v);
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

/* --- parameter types (arrays of one: a table names each as one word) ------ */

static const char *const prompt_words[] = { "login", NULL };
static const char *const decision_words[] = { "approve", "deny", NULL };
/* The approval page's: approve once, deny, or approve and make a standing rule. */
static const char *const approval_decision_words[] = { "approve", "deny", "standing", NULL };
static const char *const standing_kind_words[] = { "exact", "match", NULL };
static const char *const yes_words[] = { "yes", NULL };
/* The words logout sends the browser back to / with (through the IdP's
 * end_session_endpoint as its `state`, or directly): meta.c says each in its
 * own words, never the URL's. */
static const char *const signed_out_words[] = { "signed-out", "signed-out-here", NULL };
/* The outcomes the provider callback names on the done page: words chosen by
 * consentd, never text (consent_pages.c says each in its own words). */
static const char *const done_outcome_words[] = { "cancelled", "too_much", "failed", "changed",
	NULL };
/* The admin search's states ("" = any). */
static const char *const admin_state_words[] = { "", "live", "expired", "revoked",
	"reconnect_required", NULL };
static const char *const admin_by_words[] = { "user", "agent", "resource", NULL };

static const struct param_type digits[1] = { { .kind = PARAM_STRING, .valid = valid_digits } };
static const struct param_type hex[1] = { { .kind = PARAM_STRING, .valid = valid_hex } };
static const struct param_type audit_cursor[1] = { { .kind = PARAM_STRING,
	.valid = valid_audit_cursor } };
static const struct param_type admin_since[1] = { { .kind = PARAM_STRING, .valid = valid_admin_since } };
static const struct param_type api_state[1] = { { .kind = PARAM_STRING, .valid = admin_api_valid_state } };
static const struct param_type api_limit[1] = { { .kind = PARAM_STRING, .valid = admin_api_valid_limit } };
/* Numbers as long as their max_len allows: a handler checks its own range. */
static const struct param_type seconds[1] = { { .kind = PARAM_INT, .min = 0,
	.max = INT64_C(9999999999) } };
static const struct param_type audit_seq[1] = { { .kind = PARAM_INT, .min = 1,
	.max = INT64_C(999999999999999999) } };
static const struct param_type count12[1] = { { .kind = PARAM_INT, .min = 0,
	.max = INT64_C(999999999999) } };
static const struct param_type checkbox[1] = { { .kind = PARAM_ON } };
static const struct param_type prompt[1] = { { .kind = PARAM_WORD, .words = prompt_words } };
static const struct param_type decision[1] = { { .kind = PARAM_WORD, .words = decision_words } };
static const struct param_type yes[1] = { { .kind = PARAM_WORD, .words = yes_words } };
static const struct param_type approval_decision[1] = { { .kind = PARAM_WORD,
	.words = approval_decision_words } };
static const struct param_type standing_kind[1] = { { .kind = PARAM_WORD,
	.words = standing_kind_words } };
static const struct param_type signed_out[1] = { { .kind = PARAM_WORD, .words = signed_out_words } };
static const struct param_type done_outcome[1] = { { .kind = PARAM_WORD,
	.words = done_outcome_words } };
static const struct param_type admin_state[1] = { { .kind = PARAM_WORD, .words = admin_state_words } };
static const struct param_type admin_by[1] = { { .kind = PARAM_WORD, .words = admin_by_words } };

const struct route http_routes[] = {
	{ HTTP_GET, "/", ROUTE_BROWSER, meta_index, {
		[META_INDEX_STATE] = { "state", 16, signed_out, 0 },
		{ NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_SESSION_OPTIONAL, LIMIT_NONE },
	{ HTTP_GET, "/.well-known/oauth-authorization-server", ROUTE_PUBLIC, meta_as_metadata,
	  { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, "/.well-known/jwks.json", ROUTE_PUBLIC, meta_jwks, { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, "/healthz", ROUTE_PUBLIC, meta_healthz, { { NULL, 0, NULL, 0 } }, ROUTE_PROBE_LIVE,
	  ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, "/readyz", ROUTE_PUBLIC, meta_readyz, { { NULL, 0, NULL, 0 } }, ROUTE_PROBE_READY,
	  ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, "/metrics", ROUTE_PUBLIC, metrics_api_scrape, { { NULL, 0, NULL, 0 } }, 0,
	  ROUTE_AUTH_METRICS, LIMIT_NONE },
	{ HTTP_GET, "/static/consentd.css", ROUTE_PUBLIC, meta_stylesheet, { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, "/static/favicon.svg", ROUTE_PUBLIC, meta_favicon, { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, "/favicon.ico", ROUTE_PUBLIC, meta_favicon, { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, "/static/local-time.js", ROUTE_PUBLIC, meta_local_time_script,
	  { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_GET, "/login", ROUTE_BROWSER, login_pages_start, {
		[LOGIN_PAGES_START_RETURN_TO] = { "return_to", LOGIN_RETURN_TO_MAX, param_return_to, 0 },
		[LOGIN_PAGES_START_PROMPT] = { "prompt", 16, prompt, 0 },
		[LOGIN_PAGES_START_MAX_AGE] = { "max_age", 10, seconds, 0 },
		{ NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_ADDRESS },
	/* The IdP decides which parameters come back; these are every one that
	 * OpenID Connect and RFC 9207 define for a code response. */
	{ HTTP_GET, "/callback", ROUTE_BROWSER, login_pages_callback, {
		[LOGIN_PAGES_CALLBACK_CODE] = { "code", 4096, param_printable, 0 },
		[LOGIN_PAGES_CALLBACK_STATE] = { "state", 128, param_token68, 0 },
		[LOGIN_PAGES_CALLBACK_ISS] = { "iss", 1024, param_printable, 0 },
		[LOGIN_PAGES_CALLBACK_ERROR] = { "error", 256, param_printable, 0 },
		[LOGIN_PAGES_CALLBACK_ERROR_DESCRIPTION] = { "error_description", 1024, param_printable, 0 },
		[LOGIN_PAGES_CALLBACK_ERROR_URI] = { "error_uri", 1024, param_printable, 0 },
		[LOGIN_PAGES_CALLBACK_SESSION_STATE] = { "session_state", 1024, param_printable, 0 },
		{ NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_ADDRESS },
	/* Signed out already: back to the front page; a stale form: 403 (the
	 * handler's, over the session its gate found). */
	{ HTTP_POST, "/logout", ROUTE_BROWSER, login_pages_logout, {
		[LOGIN_PAGES_LOGOUT_CSRF] = { "csrf", 64, param_token68, PARAM_REQUIRED },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY, ROUTE_AUTH_SESSION_OPTIONAL, LIMIT_ADDRESS },
	{ HTTP_GET, "/me", ROUTE_BROWSER, me_pages_show, { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_SESSION, LIMIT_ADDRESS },
	/* Revoking on /me: a confirmation page, its form (confirm=yes, so no other
	 * form revokes), and the page that says what happened. */
	{ HTTP_GET, "/me/consents/{id}/revoke", ROUTE_BROWSER, me_pages_revoke_confirm, {
		{ NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_SESSION, LIMIT_ADDRESS },
	{ HTTP_POST, "/me/consents/{id}/revoke", ROUTE_BROWSER, me_pages_revoke, {
		[ME_REVOKE_CSRF] = { "csrf", 64, param_token68, PARAM_REQUIRED },
		[ME_REVOKE_CONFIRM] = { "confirm", 4, yes, PARAM_REQUIRED },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY, ROUTE_AUTH_SESSION_FORM, LIMIT_ADDRESS },
	/* An API key (credential = api_key, vault_key.h): entered once, never
	 * shown again; the form replaces it. */
	{ HTTP_GET, "/me/consents/{id}/key", ROUTE_BROWSER, vault_pages_key_show, {
		{ NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_SESSION, LIMIT_ADDRESS },
	{ HTTP_POST, "/me/consents/{id}/key", ROUTE_BROWSER, vault_pages_key_store, {
		[VAULT_PAGES_KEY_CSRF] = { "csrf", 64, param_token68, PARAM_REQUIRED },
		/* The rule (visible ASCII) is vault_key_valid's; this bounds the bytes. */
		[VAULT_PAGES_KEY_KEY] = { "key", VAULT_KEY_MAX, NULL, PARAM_REQUIRED },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY, ROUTE_AUTH_SESSION_FORM, LIMIT_ADDRESS },
	/* Reconnect: a consent request for what a consent whose provider
	 * connection needs the person granted; 303 to its consent page. */
	{ HTTP_POST, "/me/consents/{id}/reconnect", ROUTE_BROWSER, me_pages_reconnect, {
		[ME_RECONNECT_CSRF] = { "csrf", 64, param_token68, PARAM_REQUIRED },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY, ROUTE_AUTH_SESSION_FORM, LIMIT_ADDRESS },
	{ HTTP_GET, "/me/consents/{id}/revoked", ROUTE_BROWSER, me_pages_revoked, {
		{ NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_SESSION, LIMIT_ADDRESS },
	/* "Allow it to ask again": lifts the deny_cooldown a decision holds. */
	{ HTTP_POST, "/me/requests/{id}/allow", ROUTE_BROWSER, me_pages_allow, {
		[ME_ALLOW_CSRF] = { "csrf", 64, param_token68, PARAM_REQUIRED },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY, ROUTE_AUTH_SESSION_FORM, LIMIT_ADDRESS },
	/* Ending a standing rule on /me (issue #32). */
	{ HTTP_POST, "/me/rules/{id}/end", ROUTE_BROWSER, me_rules_end, {
		[ME_RULES_END_CSRF] = { "csrf", 64, param_token68, PARAM_REQUIRED },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY, ROUTE_AUTH_SESSION_FORM, LIMIT_ADDRESS },
	/* "Let it ask again" for a denied action (issue #32). */
	{ HTTP_POST, "/me/approvals/{id}/allow", ROUTE_BROWSER, me_pages_approval_allow, {
		[ME_APPROVAL_ALLOW_CSRF] = { "csrf", 64, param_token68, PARAM_REQUIRED },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY, ROUTE_AUTH_SESSION_FORM, LIMIT_ADDRESS },
	{ HTTP_GET, "/consent/{id}", ROUTE_BROWSER, consent_pages_show, { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_SESSION, LIMIT_ADDRESS },
	{ HTTP_GET, "/consent/{id}/done", ROUTE_BROWSER, consent_pages_done, {
		[CONSENT_PAGES_DONE_OUTCOME] = { "outcome", 16, done_outcome, 0 },
		{ NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_SESSION, LIMIT_ADDRESS },
	{ HTTP_GET, "/approve/{id}", ROUTE_BROWSER, approval_pages_show, { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_SESSION, LIMIT_ADDRESS },
	{ HTTP_POST, "/approve/{id}", ROUTE_BROWSER, approval_pages_decide, {
		[APPROVAL_PAGES_DECIDE_CSRF] = { "csrf", 64, param_token68, PARAM_REQUIRED },
		[APPROVAL_PAGES_DECIDE_DECISION] = { "decision", 8, approval_decision, PARAM_REQUIRED },
		/* A standing rule's choice (issue #32); standing.c judges the values. */
		[APPROVAL_PAGES_DECIDE_RULE] = { "rule", 5, standing_kind, 0 },
		[APPROVAL_PAGES_DECIDE_FOR] = { "for", 10, seconds, 0 },
		[APPROVAL_PAGES_DECIDE_USES] = { "uses", 5, count12, 0 },
		[APPROVAL_PAGES_DECIDE_K] = { "k", 2, checkbox, PARAM_FAMILY(APPROVAL_PAGES_FIXED_MAX) },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY, ROUTE_AUTH_SESSION_FORM, LIMIT_ADDRESS },
	/* One redirect URI per resource (against mix-up): the provider's answer. */
	{ HTTP_GET, "/oauth/callback/{resource}", ROUTE_BROWSER, vault_pages_callback, {
		[VAULT_PAGES_CALLBACK_CODE] = { "code", 4096, param_printable, 0 },
		[VAULT_PAGES_CALLBACK_STATE] = { "state", 128, param_token68, 0 },
		[VAULT_PAGES_CALLBACK_ISS] = { "iss", 1024, param_printable, 0 },
		[VAULT_PAGES_CALLBACK_ERROR] = { "error", 256, param_printable, 0 },
		[VAULT_PAGES_CALLBACK_ERROR_DESCRIPTION] = { "error_description", 1024, param_printable, 0 },
		[VAULT_PAGES_CALLBACK_ERROR_URI] = { "error_uri", 1024, param_printable, 0 },
		[VAULT_PAGES_CALLBACK_SCOPE] = { "scope", 2048, param_printable, 0 },
		{ NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_SESSION_CALLBACK, LIMIT_ADDRESS },
	{ HTTP_POST, "/consent/{id}", ROUTE_BROWSER, consent_pages_decide, {
		[CONSENT_PAGES_DECIDE_CSRF] = { "csrf", 64, param_token68, PARAM_REQUIRED },
		[CONSENT_PAGES_DECIDE_DECISION] = { "decision", 8, decision, PARAM_REQUIRED },
		[CONSENT_PAGES_DECIDE_DURATION] = { "duration", 10, seconds, 0 },
		[CONSENT_PAGES_DECIDE_OFFLINE] = { "offline", 2, checkbox, 0 },
		[CONSENT_PAGES_DECIDE_VERSION] = { "version", 64, hex, 0 },
		/* One checkbox per position in the stored request: s0 .. s19. */
		[CONSENT_PAGES_DECIDE_S] = { "s", 2, checkbox, PARAM_FAMILY(CONSENT_MAX_SCOPES) },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY, ROUTE_AUTH_SESSION_FORM, LIMIT_ADDRESS },
	/* --- the authorization endpoint of MCP clients (authorize_pages.c, issue #30) ---
	 * GET /authorize: a page an OAuth client opens, so unknown parameters are
	 * ignored (RFC 6749 §3.1); every value is judged by authz_check, which
	 * answers the person or the client (the router's 400 page only for a
	 * repeated or oversized one).  The session is read when there is one
	 * (the sign-in comes at /authorize/{id}); it may wait on a client-id
	 * URL's fetch (5 s at most), so it runs deferred. */
	{ HTTP_GET, "/authorize", ROUTE_BROWSER, authorize_pages_start, {
		[AUTHORIZE_P_RESPONSE_TYPE] = { "response_type", 64, NULL, 0 },
		[AUTHORIZE_P_CLIENT_ID] = { "client_id", 2048, NULL, 0 },
		[AUTHORIZE_P_REDIRECT_URI] = { "redirect_uri", 2048, NULL, 0 },
		[AUTHORIZE_P_STATE] = { "state", 2048, NULL, 0 },
		[AUTHORIZE_P_CODE_CHALLENGE] = { "code_challenge", 256, NULL, 0 },
		[AUTHORIZE_P_CODE_CHALLENGE_METHOD] = { "code_challenge_method", 64, NULL, 0 },
		[AUTHORIZE_P_SCOPE] = { "scope", 2048, NULL, 0 },
		[AUTHORIZE_P_RESOURCE] = { "resource", 2048, NULL, 0 },
		[AUTHORIZE_P_RESPONSE_MODE] = { "response_mode", 64, NULL, 0 },
		[AUTHORIZE_P_REQUEST] = { "request", 8192, NULL, 0 },
		[AUTHORIZE_P_REQUEST_URI] = { "request_uri", 2048, NULL, 0 },
		[AUTHORIZE_P_DPOP_JKT] = { "dpop_jkt", 128, NULL, 0 },
		[AUTHORIZE_P__MAX] = { NULL, 0, NULL, 0 } },
	  ROUTE_UNKNOWN_IGNORED | ROUTE_DEFERRED, ROUTE_AUTH_SESSION_OPTIONAL, LIMIT_ADDRESS },
	/* The request's own pages: the person signs in (and comes back here),
	 * consents on /consent/{id}, and the done step answers the client. */
	{ HTTP_GET, "/authorize/{id}", ROUTE_BROWSER, authorize_pages_ask, { { NULL, 0, NULL, 0 } },
	  0, ROUTE_AUTH_SESSION, LIMIT_ADDRESS },
	{ HTTP_GET, "/authorize/{id}/done", ROUTE_BROWSER, authorize_pages_done,
	  { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_SESSION, LIMIT_ADDRESS },
	/* --- end of the authorization endpoint --- */
	/* Admin pages (admin_pages.c), behind the admin gate (admin_pages_gate);
	 * search values are bound parameters and escaped output, never patterns. */
	{ HTTP_GET, "/admin", ROUTE_BROWSER, admin_pages_search, {
		[ADMIN_PAGES_SEARCH_USER] = { "user", 255, param_printable, 0 },
		[ADMIN_PAGES_SEARCH_AGENT] = { "agent", 128, param_printable, 0 },
		[ADMIN_PAGES_SEARCH_RESOURCE] = { "resource", 128, param_printable, 0 },
		[ADMIN_PAGES_SEARCH_STATE] = { "state", 24, admin_state, 0 },
		[ADMIN_PAGES_SEARCH_AFTER] = { "after", 64, param_printable, 0 },
		{ NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_ADMIN_PAGE, LIMIT_NONE },
	{ HTTP_GET, "/admin/consents/{id}", ROUTE_BROWSER, admin_pages_consent,
	  { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_ADMIN_PAGE, LIMIT_NONE },
	/* Revoking one consent: a confirmation page, then its form, which needs
	 * a reason (admin_pages_revoke_one refuses a blank one). */
	{ HTTP_GET, "/admin/consents/{id}/revoke", ROUTE_BROWSER, admin_pages_revoke_confirm,
	  { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_ADMIN_PAGE, LIMIT_NONE },
	{ HTTP_POST, "/admin/consents/{id}/revoke", ROUTE_BROWSER, admin_pages_revoke_one, {
		[ADMIN_PAGES_REVOKE_ONE_CSRF] = { "csrf", 64, param_token68, PARAM_REQUIRED },
		[ADMIN_PAGES_REVOKE_ONE_REASON] = { "reason", 200, param_printable, 0 },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY, ROUTE_AUTH_ADMIN_PAGE, LIMIT_NONE },
	/* Ending a person's standing rule (issue #32): a confirmation, then a POST
	 * with CSRF (admin_pages_rule_end); standing.c ends and audits it. */
	{ HTTP_GET, "/admin/rules/{id}/end", ROUTE_BROWSER, admin_pages_rule_end_confirm,
	  { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_ADMIN_PAGE, LIMIT_NONE },
	{ HTTP_POST, "/admin/rules/{id}/end", ROUTE_BROWSER, admin_pages_rule_end, {
		[ADMIN_PAGES_RULE_END_CSRF] = { "csrf", 64, param_token68, PARAM_REQUIRED },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY, ROUTE_AUTH_ADMIN_PAGE, LIMIT_NONE },
	/* SECURITY: the step-up -- a forced, fresh login before a bulk revocation,
	 * checked again on the POST: the confirmation may be old. */
	{ HTTP_GET, "/admin/revoke", ROUTE_BROWSER, admin_pages_bulk_confirm, {
		[ADMIN_PAGES_BULK_CONFIRM_BY] = { "by", 10, admin_by, 0 },
		[ADMIN_PAGES_BULK_CONFIRM_VALUE] = { "value", 255, param_printable, 0 },
		{ NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_ADMIN_STEPUP, LIMIT_NONE },
	{ HTTP_POST, "/admin/revoke", ROUTE_BROWSER, admin_pages_bulk_revoke, {
		[ADMIN_PAGES_BULK_REVOKE_CSRF] = { "csrf", 64, param_token68, PARAM_REQUIRED },
		[ADMIN_PAGES_BULK_REVOKE_BY] = { "by", 10, admin_by, PARAM_REQUIRED },
		[ADMIN_PAGES_BULK_REVOKE_VALUE] = { "value", 255, param_printable, PARAM_REQUIRED },
		[ADMIN_PAGES_BULK_REVOKE_COUNT] = { "count", 12, count12, PARAM_REQUIRED },
		[ADMIN_PAGES_BULK_REVOKE_REASON] = { "reason", 200, param_printable, 0 },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY, ROUTE_AUTH_ADMIN_STEPUP, LIMIT_NONE },
	{ HTTP_GET, "/admin/audit", ROUTE_BROWSER, admin_pages_audit, {
		[ADMIN_PAGES_AUDIT_ACTION] = { "action", 128, param_printable, 0 },
		[ADMIN_PAGES_AUDIT_CONSENT] = { "consent", 64, param_printable, 0 },
		[ADMIN_PAGES_AUDIT_SINCE] = { "since", ADMIN_SINCE_MAX, admin_since, 0 },
		/* Newest first: the page older than entry `before`, or newer than `after`. */
		[ADMIN_PAGES_AUDIT_BEFORE] = { "before", 18, audit_seq, 0 },
		[ADMIN_PAGES_AUDIT_AFTER] = { "after", 18, audit_seq, 0 },
		{ NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_ADMIN_PAGE, LIMIT_NONE },
	/* The chain's check, as `consentd audit verify` runs it: a POST, so that
	 * a link or a prefetch never starts a walk of the whole log. */
	{ HTTP_POST, "/admin/audit/verify", ROUTE_BROWSER, admin_pages_audit_verify, {
		[ADMIN_PAGES_AUDIT_VERIFY_CSRF] = { "csrf", 64, param_token68, PARAM_REQUIRED },
		{ NULL, 0, NULL, 0 } }, ROUTE_FORM_BODY, ROUTE_AUTH_ADMIN_PAGE, LIMIT_NONE },
	/* The gateway's endpoints: RFC 6749 JSON errors, unknown parameters ignored. */
	{ HTTP_POST, "/token", ROUTE_OAUTH, token_api_token, {
		/* private_key_jwt (client_auth_api.c): RFC 7523 §2.2, first on
		 * every gateway form route. */
		[CLIENT_AUTH_P_ASSERTION_TYPE] = { "client_assertion_type", 128, param_printable, 0 },
		[CLIENT_AUTH_P_ASSERTION] = { "client_assertion", 16384, param_token68, 0 },
		/* 1024: an MCP client's client-id URL (cimd.h) */
		[CLIENT_AUTH_P_CLIENT_ID] = { "client_id", 1024, param_printable, 0 },
		[TOKEN_P_GRANT_TYPE] = { "grant_type", 128, param_printable, PARAM_REQUIRED },
		[TOKEN_P_SUBJECT_TOKEN] = { "subject_token", 16384, param_token68, 0 },
		[TOKEN_P_SUBJECT_TOKEN_TYPE] = { "subject_token_type", 128, param_printable, 0 },
		[TOKEN_P_REQUESTED_TOKEN_TYPE] = { "requested_token_type", 128, param_printable, 0 },
		[TOKEN_P_AUDIENCE] = { "audience", 256, param_printable, 0 },
		[TOKEN_P_RESOURCE] = { "resource", 1024, param_printable, 0 },
		[TOKEN_P_SCOPE] = { "scope", 2048, param_printable, 0 },
		[TOKEN_P_AGENT_ID] = { "agent_id", 128, param_printable, 0 },
		/* The rule (200 characters, no control character) is token.c's, which
		 * says it in one sentence; this only bounds the bytes. */
		[TOKEN_P_REASON] = { "reason", 8192, NULL, 0 },
		[TOKEN_P_REFRESH_TOKEN] = { "refresh_token", 128, param_token68, 0 },
		[TOKEN_P_ACTION] = { "action", 128, param_printable, 0 },
		/* JSON: the approval parser checks it */
		[TOKEN_P_AUTHORIZATION_DETAILS] = { "authorization_details", 16384, NULL, 0 },
		/* grant_type=authorization_code (mcp_token.h) */
		[TOKEN_P_CODE] = { "code", 128, param_token68, 0 },
		[TOKEN_P_REDIRECT_URI] = { "redirect_uri", 1024, param_printable, 0 },
		[TOKEN_P_CODE_VERIFIER] = { "code_verifier", 128, param_token68, 0 },
		/* grant_type jwt-bearer: an ID-JAG (idjag_grant.c) */
		[TOKEN_P_ASSERTION] = { "assertion", 16384, param_token68, 0 },
		[TOKEN_P__MAX] = { NULL, 0, NULL, 0 } },
	  /* SECURITY: a provider-token exchange's grant (its subject token) is
	   * checked by the route's grant check (grant_api_gate), as /proxy's is. */
	  ROUTE_FORM_BODY | ROUTE_GRANT | ROUTE_GRANT_SUBJECT, ROUTE_AUTH_TOKEN_CLIENT, LIMIT_GATEWAY },
	{ HTTP_POST, "/introspect", ROUTE_OAUTH, token_api_introspect, {
		[CLIENT_AUTH_P_ASSERTION_TYPE] = { "client_assertion_type", 128, param_printable, 0 },
		[CLIENT_AUTH_P_ASSERTION] = { "client_assertion", 16384, param_token68, 0 },
		[CLIENT_AUTH_P_CLIENT_ID] = { "client_id", 128, param_printable, 0 },
		[TOKEN_P_TOKEN] = { "token", 16384, param_token68, PARAM_REQUIRED },
		[TOKEN_P_TOKEN_TYPE_HINT] = { "token_type_hint", 64, param_printable, 0 },
		[TOKEN_P_TOKEN__MAX] = { NULL, 0, NULL, 0 } },
	  ROUTE_FORM_BODY, ROUTE_AUTH_GATEWAY, LIMIT_GATEWAY },
	{ HTTP_POST, "/revoke", ROUTE_OAUTH, token_api_revoke, {
		[CLIENT_AUTH_P_ASSERTION_TYPE] = { "client_assertion_type", 128, param_printable, 0 },
		[CLIENT_AUTH_P_ASSERTION] = { "client_assertion", 16384, param_token68, 0 },
		[CLIENT_AUTH_P_CLIENT_ID] = { "client_id", 1024, param_printable, 0 },
		[TOKEN_P_TOKEN] = { "token", 16384, param_token68, PARAM_REQUIRED },
		[TOKEN_P_TOKEN_TYPE_HINT] = { "token_type_hint", 64, param_printable, 0 },
		[TOKEN_P_TOKEN__MAX] = { NULL, 0, NULL, 0 } },
	  ROUTE_FORM_BODY, ROUTE_AUTH_TOKEN_CLIENT, LIMIT_GATEWAY },
	/* Proxy mode (flow H, proxy.c): the rest of the path comes raw, the query
	 * and body are read by the handler (no declared parameters); it waits on
	 * the upstream, so it runs deferred, off the server's workers (http.c).
	 * SECURITY: the gateway's gate, its limit and the grant it presents
	 * (grant_api_gate) are all checked on the connection's thread first:
	 * only a call that passed them may wait for a pool thread. */
	{ HTTP_GET, "/proxy/{resource}/{rest*}", ROUTE_OAUTH, proxy_api_handle, { { NULL, 0, NULL, 0 } },
	  ROUTE_DEFERRED | ROUTE_GRANT, ROUTE_AUTH_GATEWAY, LIMIT_GATEWAY },
	{ HTTP_POST, "/proxy/{resource}/{rest*}", ROUTE_OAUTH, proxy_api_handle, { { NULL, 0, NULL, 0 } },
	  ROUTE_DEFERRED | ROUTE_GRANT, ROUTE_AUTH_GATEWAY, LIMIT_GATEWAY },
	{ HTTP_PUT, "/proxy/{resource}/{rest*}", ROUTE_OAUTH, proxy_api_handle, { { NULL, 0, NULL, 0 } },
	  ROUTE_DEFERRED | ROUTE_GRANT, ROUTE_AUTH_GATEWAY, LIMIT_GATEWAY },
	{ HTTP_PATCH, "/proxy/{resource}/{rest*}", ROUTE_OAUTH, proxy_api_handle, { { NULL, 0, NULL, 0 } },
	  ROUTE_DEFERRED | ROUTE_GRANT, ROUTE_AUTH_GATEWAY, LIMIT_GATEWAY },
	{ HTTP_DELETE, "/proxy/{resource}/{rest*}", ROUTE_OAUTH, proxy_api_handle, { { NULL, 0, NULL, 0 } },
	  ROUTE_DEFERRED | ROUTE_GRANT, ROUTE_AUTH_GATEWAY, LIMIT_GATEWAY },
	/* MCP clients (issue #30): RFC 9728 protected resource metadata of each
	 * [mcp.NAME] (meta.c), and the endpoint itself, the MCP gateway (issue
	 * #31, mcp_api.c): its own access tokens only (401 with a challenge naming
	 * that metadata), the JSON-RPC body read by mcp_rpc.c, the call forwarded
	 * upstream -- deferred, as it waits on the upstream.  Unknown names: 404. */
	{ HTTP_GET, "/.well-known/oauth-protected-resource/mcp/{name}", ROUTE_PUBLIC,
	  meta_protected_resource, { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
	{ HTTP_POST, "/mcp/{name}", ROUTE_OAUTH, mcp_api_endpoint, { { NULL, 0, NULL, 0 } },
	  ROUTE_DEFERRED, ROUTE_AUTH_NONE, LIMIT_ADDRESS },
	{ HTTP_GET, "/mcp/{name}", ROUTE_OAUTH, mcp_api_endpoint, { { NULL, 0, NULL, 0 } },
	  ROUTE_DEFERRED, ROUTE_AUTH_NONE, LIMIT_ADDRESS },
	{ HTTP_DELETE, "/mcp/{name}", ROUTE_OAUTH, mcp_api_endpoint, { { NULL, 0, NULL, 0 } },
	  ROUTE_DEFERRED, ROUTE_AUTH_NONE, LIMIT_ADDRESS },
	/* The admin JSON API: bearer admin tokens only (admin_api.c), JSON
	 * errors, unknown parameters refused, JSON bodies for writes. */
	{ HTTP_GET, "/admin/api/consents", ROUTE_API, admin_api_consents, {
		[ADMIN_API_CONSENTS_USER] = { "user", 256, param_printable, 0 },
		[ADMIN_API_CONSENTS_AGENT] = { "agent", 128, param_printable, 0 },
		[ADMIN_API_CONSENTS_RESOURCE] = { "resource", 128, param_printable, 0 },
		[ADMIN_API_CONSENTS_STATE] = { "state", 32, api_state, 0 },
		[ADMIN_API_CONSENTS_CURSOR] = { "cursor", 64, param_printable, 0 },
		[ADMIN_API_CONSENTS_LIMIT] = { "limit", 3, api_limit, 0 },
		{ NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_ADMIN_API, LIMIT_NONE },
	{ HTTP_GET, "/admin/api/consents/{id}", ROUTE_API, admin_api_consent,
	  { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_ADMIN_API, LIMIT_NONE },
	{ HTTP_POST, "/admin/api/consents/{id}/revoke", ROUTE_API, admin_api_consent_revoke,
	  { { NULL, 0, NULL, 0 } }, ROUTE_JSON_BODY, ROUTE_AUTH_ADMIN_API, LIMIT_NONE },
	{ HTTP_POST, "/admin/api/revocations", ROUTE_API, admin_api_revocations,
	  { { NULL, 0, NULL, 0 } }, ROUTE_JSON_BODY, ROUTE_AUTH_ADMIN_API, LIMIT_NONE },
	{ HTTP_GET, "/admin/api/requests", ROUTE_API, admin_api_requests, {
		[ADMIN_API_REQUESTS_LIMIT] = { "limit", 3, api_limit, 0 },
		{ NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_ADMIN_API, LIMIT_NONE },
	{ HTTP_GET, "/admin/api/events", ROUTE_API, admin_api_events, {
		[ADMIN_API_EVENTS_CONSENT_ID] = { "consent_id", 64, param_token68, 0 },
		[ADMIN_API_EVENTS_LIMIT] = { "limit", 3, api_limit, 0 },
		{ NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_ADMIN_API, LIMIT_NONE },
	{ HTTP_GET, "/admin/api/audit", ROUTE_API, admin_api_audit, {
		[ADMIN_API_AUDIT_SINCE] = { "since", 18, digits, 0 },
		[ADMIN_API_AUDIT_ACTION] = { "action", 64, param_printable, 0 },
		[ADMIN_API_AUDIT_CONSENT_ID] = { "consent_id", 64, param_token68, 0 },
		[ADMIN_API_AUDIT_CURSOR] = { "cursor", 40, audit_cursor, 0 },
		[ADMIN_API_AUDIT_LIMIT] = { "limit", 3, api_limit, 0 },
		{ NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_ADMIN_API, LIMIT_NONE },
	/* The person's standing rules (issue #32, standing_api.c). */
	{ HTTP_GET, "/admin/api/rules", ROUTE_API, admin_api_rules,
	  { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_ADMIN_API, LIMIT_NONE },
	{ HTTP_POST, "/admin/api/rules/{id}/end", ROUTE_API, admin_api_rule_end,
	  { { NULL, 0, NULL, 0 } }, ROUTE_JSON_BODY, ROUTE_AUTH_ADMIN_API, LIMIT_NONE },
	{ HTTP_GET, NULL, 0, NULL, { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
};
/* Paths no route matches are answered in the kind of the routes around them. */
const struct route_prefix http_route_prefixes[] = {
	{ "/admin/api/", ROUTE_API },
	{ "/.well-known/", ROUTE_PUBLIC },
	{ "/proxy/", ROUTE_OAUTH },
	{ "/mcp/", ROUTE_OAUTH },
	{ NULL, ROUTE_BROWSER },
};

/* --- the gates ------------------------------------------------------------ */

/* The page a route's pattern names for req: its captures in place of the
 * {x} segments (where sign-in comes back to).  The router refused any capture
 * over ROUTE_CAPTURE_MAX, so every page of the table fits PAGE_OF_MAX. */
#define PAGE_OF_MAX 4096
_Static_assert(ROUTE_MAX_CAPTURES * ROUTE_CAPTURE_MAX + 1024 <= PAGE_OF_MAX,
    "a page with its longest captures fits page_of's buffer");
static enum cs_err page_of(const struct http_request *req, struct buf *out)
{
	enum cs_err e = CS_OK;
	size_t k = 0;
	for (const char *p = req->route->pattern; *p && e == CS_OK; p++) {
		const char *end = *p == '{' ? strchr(p, '}') : NULL;
		if (end != NULL && k < req->ncaptures) {
			e = buf_puts(out, req->captures[k++]);
			p = end;
		} else {
			e = buf_append(out, p, 1);
		}
	}
	return e;
}

/* The request's live session, read from its cookie, into *out: NULL when it
 * has none (no cookie, an unknown, ended or idle one).  CS_EDB without a
 * store; *out is freed with the request once the gate put it in req->auth. */
static enum cs_err session_read(const struct http_request *req, struct session **out)
{
	struct store_conn *c = store_conn(req->app->store);
	struct session *s;
	enum cs_err e;
	*out = NULL;
	if (c == NULL)
		return CS_EDB;
	if ((s = calloc(1, sizeof *s)) == NULL)
		return CS_ENOMEM;
	e = session_from_cookie(c, req->app->cfg, req->cookie, req->now, s);
	if (e == CS_OK) {
		*out = s;
		return CS_OK;
	}
	session_clear(s);
	free(s);
	return e == CS_ENOENT ? CS_OK : e;
}

/* SECURITY: a person's pages: without a live session the answer is the
 * sign-in that comes back to this page (to /me when this page's address is
 * longer than /login takes); the session found goes with the request. */
static enum cs_err gate_session(struct http_request *req, struct http_reply *rep, bool *ok)
{
	struct buf back, loc;
	enum cs_err e;
	*ok = false;
	buf_init(&back, PAGE_OF_MAX);
	buf_init(&loc, 4096);
	if ((e = page_of(req, &back)) == CS_ETOOBIG) {
		/* cannot happen (see PAGE_OF_MAX): a 4xx, not a 500 */
		e = reply_error(rep, ROUTE_BROWSER, 414, "invalid_request",
		    "This address is too long to be a page of this site.");
		goto out;
	}
	if (e != CS_OK || (e = session_read(req, &req->auth.session)) != CS_OK)
		goto out;
	if (req->auth.session != NULL) {
		*ok = true;
		goto out;
	}
	if ((e = buf_puts(&loc, "/login")) == CS_OK &&
	    (e = form_url_param(&loc, "return_to", strlen(back.data) > LOGIN_RETURN_TO_MAX ?
	    "/me" : back.data)) == CS_OK)
		e = page_redirect(rep, loc.data);
out:
	buf_clear(&back);
	buf_clear(&loc);
	return e;
}

/* What a person's form POST without a session says: on /me, to sign in
 * again; on a request's page, to open the agent's link again (it signs in
 * and comes back to the request). */
static const char *signin_again(const struct route *rt)
{
	return strncmp(rt->pattern, "/me/", 4) == 0 ? "Sign in again to manage your consents." :
	    "Your session ended. Open the link from your agent again to sign in.";
}

/* SECURITY: a person's form POST (a decision, a /me action): the session,
 * and the form's CSRF token (the route's parameter ROUTE_CSRF_PARAM)
 * compared with it in constant time.  401 without a session, 403 for a
 * stale or foreign form; nothing else is read. */
static enum cs_err gate_session_form(struct http_request *req, struct http_reply *rep, bool *ok)
{
	enum cs_err e;
	*ok = false;
	if ((e = session_read(req, &req->auth.session)) != CS_OK)
		return e;
	if (req->auth.session == NULL)
		return reply_html_error(rep, 401, "Not signed in", signin_again(req->route));
	if (!session_csrf_ok(req->auth.session, http_arg_str(req, ROUTE_CSRF_PARAM)))
		return reply_html_error(rep, 403, "Not allowed",
		    "This form is stale or did not come from this site. Reload the page and try again.");
	*ok = true;
	return CS_OK;
}

/* SECURITY: the provider's answer finishes a connection begun in a session
 * (vault_finish_connect binds it to that session): without one, a 400 page,
 * never a sign-in that would come back with the code in its address. */
static enum cs_err gate_session_callback(struct http_request *req, struct http_reply *rep,
    bool *ok)
{
	enum cs_err e;
	*ok = false;
	if ((e = session_read(req, &req->auth.session)) != CS_OK)
		return e;
	if (req->auth.session == NULL)
		return reply_html_error(rep, 400, "Not connected",
		    "Your session ended while you were at the provider. Open the link from your agent again.");
	*ok = true;
	return CS_OK;
}

/* The front page and the sign-out say what they say with or without a
 * session: the session when there is one (and a store to read it from). */
static enum cs_err gate_session_optional(struct http_request *req, struct http_reply *rep,
    bool *ok)
{
	enum cs_err e = CS_OK;
	(void)rep;
	if (store_conn(req->app->store) != NULL)
		e = session_read(req, &req->auth.session);
	*ok = e == CS_OK;
	return e;
}

/* SECURITY: the admin pages' gate (admin_pages_gate says what each refusal
 * answers and audits) over the request's session, if any; the session goes
 * with the request when it lets it through. */
static enum cs_err admin_session(struct http_request *req, struct http_reply *rep, bool stepup,
    bool *ok)
{
	struct session *s = NULL;
	enum cs_err e;
	*ok = false;
	if ((e = session_read(req, &s)) != CS_OK)
		return e;
	e = admin_pages_gate(req, rep, stepup, s, ok);
	if (e != CS_OK || !*ok) {
		*ok = false;
		if (s != NULL)
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
	*ok = req->auth.gateway = client_auth_api_gateway(req, rep);
	return CS_OK;
}

/* SECURITY: /token and /revoke: the gateway's client authentication, or a
 * request an MCP client makes (mcp_token_request_is_client: its own
 * client_id, no Authorization header), which mcp_token.c authenticates with
 * the client's registration; until then the address's buckets bound it
 * (address, then its failed authentications, as client_auth.c does). */
static enum cs_err gate_token_client(struct http_request *req, struct http_reply *rep, bool *ok)
{
	const char *client_id = http_arg_str(req, CLIENT_AUTH_P_CLIENT_ID);
	int64_t ra = 0;
	*ok = false;
	if (!mcp_token_request_is_client(req->app->cfg, client_id, req->authorization))
		return gate_gateway(req, rep, ok);
	if (!rate_limits_take_address(req->app->limits, req->remote_ip, &ra))
		return reply_limit_refusal(rep, req->route->kind, LIMIT_ADDRESS, ra);
	if (!rate_limits_auth_allowed(req->app->limits, req->remote_ip, &ra))
		return reply_limit_refusal(rep, req->route->kind, LIMIT_AUTH_FAILURE, ra);
	/* The audit's name for it (router.c keeps it); a long client-id URL is cut. */
	if (str_fmt(req->auth.actor, sizeof req->auth.actor, "client:%.280s", client_id) != CS_OK)
		return CS_EINVAL;
	*ok = true;
	return CS_OK;
}

/* SECURITY: /metrics on the main listener: the [metrics] token when one is
 * configured and presented as a Bearer credential (a wrong one is refused as
 * such), else the gateway's client authentication. */
static enum cs_err gate_metrics(struct http_request *req, struct http_reply *rep, bool *ok)
{
	bool presented = false;
	*ok = false;
	if (metrics_api_token_ok(req, &presented)) {
		*ok = true;
		return CS_OK;
	}
	if (presented)
		return metrics_api_refuse(rep);
	return gate_gateway(req, rep, ok);
}

const http_gate http_gates[ROUTE_AUTH__MAX] = {
	[ROUTE_AUTH_NONE] = NULL,
	[ROUTE_AUTH_SESSION] = gate_session,
	[ROUTE_AUTH_SESSION_FORM] = gate_session_form,
	[ROUTE_AUTH_SESSION_CALLBACK] = gate_session_callback,
	[ROUTE_AUTH_SESSION_OPTIONAL] = gate_session_optional,
	[ROUTE_AUTH_ADMIN_PAGE] = gate_admin_page,
	[ROUTE_AUTH_ADMIN_STEPUP] = gate_admin_stepup,
	[ROUTE_AUTH_ADMIN_API] = gate_admin_api,
	[ROUTE_AUTH_GATEWAY] = gate_gateway,
	[ROUTE_AUTH_METRICS] = gate_metrics,
	[ROUTE_AUTH_TOKEN_CLIENT] = gate_token_client,
};

/* SECURITY: the grant a ROUTE_GRANT route's caller presents, one check for
 * every such route (grant_api_gate): as /token's subject token
 * (ROUTE_GRANT_SUBJECT), or in /proxy's headers. */
static enum cs_err gate_grant(struct http_request *req, struct http_reply *rep, bool *ok)
{
	return grant_api_gate(req, rep, (req->route->flags & ROUTE_GRANT_SUBJECT) ?
	    token_api_grant_presented : proxy_api_grant_presented, ok);
}

const http_gate http_grant_check = gate_grant;

/* SECURITY: served only on [metrics] listen, which the operator keeps on a
 * private interface: what /metrics shows there needs no credentials. */
const struct route http_metrics_routes[] = {
	{ HTTP_GET, "/metrics", ROUTE_PUBLIC, metrics_api_scrape, { { NULL, 0, NULL, 0 } }, 0,
	  ROUTE_AUTH_NONE, LIMIT_NONE },
	{ 0, NULL, 0, NULL, { { NULL, 0, NULL, 0 } }, 0, ROUTE_AUTH_NONE, LIMIT_NONE },
};
