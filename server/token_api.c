/* token_api.c -- the gateway's OAuth endpoints: /token (RFC 8693 token
 * exchange for grants and provider tokens, refresh_token), /introspect and
 * /revoke.  Handlers only: they read the request, call one domain function
 * (exchange.c, grant.c) and map its outcome to RFC 6749 JSON with
 * Cache-Control: no-store.  No transaction and no audit entry is written here.
 * The subject token is validated only against the upstream IdP; a token
 * consentd issued is never accepted as a subject. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jansson.h>
#include "app.h"
#include "approval_api.h"
#include "buf.h"
#include "consent.h"
#include "dpop_api.h"
#include "exchange.h"
#include "grant.h"
#include "jwt.h"
#include "oidc.h"
#include "token_api.h"
#include "vault.h"

/* --- helpers -------------------------------------------------------------- */

static size_t utf8_chars(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			n++;
	return n;
}

const char *token_reason_problem(const char *reason)
{
	const unsigned char *p = (const unsigned char *)reason;
	if (reason == NULL)
		return NULL;
	for (; *p; p++) {
		/* C0 and DEL; C1 (U+0080..U+009F) is 0xC2 0x80..0x9F in UTF-8 (the
		 * router let only valid UTF-8 through). */
		if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
			return TOKEN_REASON_RULE;
	}
	return utf8_chars(reason) > AGENT_REASON_MAX_CHARS ? TOKEN_REASON_RULE : NULL;
}

/* " (UTC time)" of t, or "" when it cannot be shown. */
static void utc_time(int64_t t, char *out, size_t outlen)
{
	struct tm tm;
	time_t tt = (time_t)t;
	if (outlen == 0)
		return;
	out[0] = '\0';
	if ((int64_t)tt == t && gmtime_r(&tt, &tm) != NULL)
		strftime(out, outlen, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

enum cs_err token_consent_description(const struct consent_answer *a, char *out, size_t outlen)
{
	static const char kept[] = "; the pending request keeps the reason the person sees (a new "
	    "reason is shown only with new scopes, or in the next request)";
	char when[32];
	long long iv = (long long)a->interval;
	switch (a->outcome) {
	case CONSENT_REQUIRED:
		if (a->reconnect)
			return str_fmt(out, outlen, "the consent's provider connection must be made "
			    "again: send the person to consent_uri, then poll every %lld s", iv);
		if (a->merged)
			return str_fmt(out, outlen, "the request was updated: the pending request now "
			    "also asks for the new scopes; the person decides on it at consent_uri (poll "
			    "every %lld s)", iv);
		return str_fmt(out, outlen, "the person has not consented: send them to consent_uri, "
		    "then poll every %lld s", iv);
	case CONSENT_PENDING:
		return str_fmt(out, outlen, "the person has not decided yet; poll again in %lld s%s",
		    iv, a->reason_kept ? kept : "");
	case CONSENT_SLOW_DOWN:
		return str_fmt(out, outlen, "polled faster than the interval: wait %lld s between "
		    "calls from now on%s", iv, a->reason_kept ? kept : "");
	case CONSENT_DENIED:
		utc_time(a->denied_until, when, sizeof when);
		return str_fmt(out, outlen, "the person denied this request; a new request can be "
		    "made from %s", when[0] ? when : "the end of [consent] deny_cooldown");
	case CONSENT_EXPIRED:
		return str_fmt(out, outlen, "the consent request expired before the person decided; "
		    "the next call starts a new one");
	case CONSENT_TOO_MANY:
		if (a->rate_limited)
			return str_fmt(out, outlen, "rate limit exceeded: the person limit ([limits] "
			    "person_rate) refused a new consent request for this person; retry after "
			    "%lld s", (long long)(a->retry_after > 0 ? a->retry_after : 1));
		return str_fmt(out, outlen, "this person has too many pending requests; retry after "
		    "%lld s", (long long)(a->retry_after > 0 ? a->retry_after : 1));
	default:
		return str_fmt(out, outlen, "the consent was found");
	}
}

static const char *subject_type_name(const char *urn)
{
	if (strcmp(urn, URN_TT_ID_TOKEN) == 0)
		return "id_token";
	if (strcmp(urn, URN_TT_ACCESS_TOKEN) == 0)
		return "access_token";
	if (strcmp(urn, URN_TT_JWT) == 0)
		return "jwt";
	return NULL;
}

static bool subject_type_allowed(const struct config *cfg, const char *urn)
{
	const char *name = subject_type_name(urn);
	if (name == NULL)
		return false;
	for (size_t i = 0; i < cfg->nsubject_token_types; i++)
		if (strcmp(cfg->subject_token_types[i], name) == 0)
			return true;
	return false;
}

static enum cs_err grant_reply(struct http_reply *rep, const struct grant_response *g,
    const char *jkt)
{
	/* RFC 9449 §5: a grant bound to the proof's key is of type DPoP. */
	json_t *v = json_pack("{s:s, s:s, s:s, s:I, s:s}", "access_token", g->access_token,
	    "issued_token_type", URN_TT_JWT, "token_type", jkt != NULL ? "DPoP" : "Bearer",
	    "expires_in", (json_int_t)g->expires_in, "scope", g->scope);
	if (v != NULL && g->refresh_token != NULL &&
	    json_object_set_new(v, "refresh_token", json_string(g->refresh_token)) != 0) {
		json_decref(v);
		return CS_ENOMEM;
	}
	return reply_json_value(rep, 200, v);
}

static enum cs_err pending_reply(struct http_reply *rep, const struct config *cfg, const char *error,
    const struct consent_answer *a)
{
	char uri[600], desc[300];
	enum cs_err e;
	if ((e = token_consent_description(a, desc, sizeof desc)) != CS_OK ||
	    (a->request_id != NULL && (e = str_fmt(uri, sizeof uri, "%s/consent/%s", cfg->public_url,
	    a->request_id)) != CS_OK))
		return e;
	json_t *v = json_pack("{s:s, s:s}", "error", error, "error_description", desc);
	if (v == NULL)
		return CS_ENOMEM;
	reply_log_error(rep, error, desc);
	if (a->request_id) {
		json_object_set_new(v, "consent_request_id", json_string(a->request_id));
		json_object_set_new(v, "consent_uri", json_string(uri));
		json_object_set_new(v, "expires_in", json_integer(a->expires_in));
		json_object_set_new(v, "interval", json_integer(a->interval));
	}
	return reply_json_value(rep, 400, v);
}

/* An OAuth error whose description is formatted (fixed words and config names). */
static enum cs_err oauth_errorf(struct http_reply *rep, int status, const char *error,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static enum cs_err oauth_errorf(struct http_reply *rep, int status, const char *error,
    const char *fmt, ...)
{
	char desc[400];
	va_list ap;
	va_start(ap, fmt);
	enum cs_err e = str_vfmt(desc, sizeof desc, fmt, ap);
	va_end(ap);
	return e != CS_OK ? e : reply_oauth_error(rep, status, error, desc);
}

/* The accepted subject token types, for a description: "id_token, jwt". */
static enum cs_err types_accepted(const struct config *cfg, struct buf *out)
{
	enum cs_err e = CS_OK;
	for (size_t i = 0; i < cfg->nsubject_token_types && e == CS_OK; i++)
		e = buf_printf(out, "%s%s", i ? ", " : "", cfg->subject_token_types[i]);
	return e;
}

/* Whether t verifies as a token consentd signed: then it was sent as a subject
 * by mistake (or on purpose), which the description says.  Asked only after the
 * IdP refused t, and cheap for a token that cannot be ours: jwt_verify refuses
 * a header whose alg, typ or kid is not one of ours before any signature check,
 * so a full ES256 verification runs only for a token that names our own key. */
static bool is_own_grant(struct app *app, const char *t)
{
	json_t *cl = NULL;
	const struct keyring *kr = app_keys_get(app);
	bool ours = kr != NULL && jwt_verify(kr, "at+jwt", t, &cl) == CS_OK;
	app_keys_put(app);
	json_decref(cl);
	return ours;
}

/* --- flow A: a grant for a person's live consent ------------------------- */

/* The person's subject from the subject token, checked against the upstream
 * IdP only.  *ok false when rep holds the refusal. */
static enum cs_err subject_of(const struct http_request *req, struct http_reply *rep,
    json_t **claims, const char **sub, bool *ok)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	const char *stt = http_arg_str(req, TOKEN_P_SUBJECT_TOKEN_TYPE);
	const char *st = http_arg_str(req, TOKEN_P_SUBJECT_TOKEN);
	char why[128];
	*ok = false;
	if (st == NULL || stt == NULL)
		return reply_oauth_error(rep, 400, "invalid_request", st == NULL ?
		    "subject_token is missing" : "subject_token_type is missing");
	if (!subject_type_allowed(cfg, stt)) {
		struct buf types;
		buf_init(&types, 64);
		enum cs_err e = types_accepted(cfg, &types);
		if (e == CS_OK)
			e = oauth_errorf(rep, 400, "invalid_request", "subject_token_type is not one this "
			    "consentd accepts (urn:ietf:params:oauth:token-type: %s)",
			    types.data ? types.data : "");
		buf_clear(&types);
		return e;
	}
	if (oidc_meta(app->idp) == NULL)
		return reply_oauth_error(rep, 503, "temporarily_unavailable",
		    "consentd has not reached its IdP yet, so it cannot check the subject token; retry");
	/* SECURITY: only the upstream IdP's keys, issuer and audiences count; a
	 * consentd grant (our iss, our keys) can never pass this. */
	struct oidc_expect ex = { .audiences = (const char *const *)cfg->subject_audiences,
		.naudiences = cfg->nsubject_audiences, .now = req->now, .max_age = -1, .cache = true };
	if (oidc_validate(app->idp, st, &ex, claims, why, sizeof why) != CS_OK) {
		/* RFC 8693 §2.2.2: invalid_request, naming the check that failed. */
		if (is_own_grant(app, st))
			return reply_oauth_error(rep, 400, "invalid_request", "the subject token is a "
			    "consentd grant; send the person's token from the IdP");
		return oauth_errorf(rep, 400, "invalid_request", "subject token %s", why);
	}
	json_t *s = json_object_get(*claims, cfg->oidc_subject_claim);
	if (!json_is_string(s) || json_string_length(s) == 0 || json_string_length(s) > 255)
		return oauth_errorf(rep, 400, "invalid_request", "the subject token has no usable %s "
		    "claim (a string of 1 to 255 bytes; [oidc] subject_claim)", cfg->oidc_subject_claim);
	*sub = json_string_value(s);
	*ok = true;
	return CS_OK;
}

/* The refusal of what a grant exchange names (exchange_target). */
static enum cs_err target_refusal(struct http_reply *rep, const struct exchange_target *t)
{
	const char *r = t->res != NULL ? t->res->id : "", *a = t->agent != NULL ? t->agent->id : "";
	switch (t->outcome) {
	case EXCHANGE_TARGET_NO_RESOURCE:
		return reply_oauth_error(rep, 400, "invalid_target",
		    "the resource is missing: name it with audience or resource");
	case EXCHANGE_TARGET_UNKNOWN_AUDIENCE:
		return reply_oauth_error(rep, 400, "invalid_target", "audience names no configured resource");
	case EXCHANGE_TARGET_UNKNOWN_URI:
		return reply_oauth_error(rep, 400, "invalid_target",
		    "resource is not the URI of a configured resource");
	case EXCHANGE_TARGET_DISAGREE:
		return reply_oauth_error(rep, 400, "invalid_target",
		    "audience and resource name different resources");
	case EXCHANGE_TARGET_NO_AGENT:
		return reply_oauth_error(rep, 400, "invalid_request", "agent_id is missing");
	case EXCHANGE_TARGET_UNKNOWN_AGENT:
		return reply_oauth_error(rep, 400, "invalid_request", "agent_id names no configured agent");
	case EXCHANGE_TARGET_NO_SCOPE:
		return reply_oauth_error(rep, 400, "invalid_request", "scope is missing");
	case EXCHANGE_TARGET_BAD_SCOPE:
		return oauth_errorf(rep, 400, "invalid_scope", "scope is malformed: at most %d distinct "
		    "scopes of at most %d characters, separated by single spaces", CONSENT_MAX_SCOPES,
		    SCOPE_TOKEN_MAX);
	/* The scope is named: scope_set_parse let only printable ASCII through. */
	case EXCHANGE_TARGET_SCOPE_UNKNOWN:
		return oauth_errorf(rep, 400, "invalid_scope", "scope %s is not configured for "
		    "resource %s", t->scope, r);
	case EXCHANGE_TARGET_SCOPE_DENIED:
		return oauth_errorf(rep, 400, "invalid_scope", "agent %s may not ask for scope %s "
		    "of resource %s ([agent.%s] allow)", a, t->scope, r, a);
	default:
		return CS_EINVAL;
	}
}

/* The reply for flow A's outcome. */
static enum cs_err grant_answer(struct http_reply *rep, const struct config *cfg,
    const struct exchange_grant *x, const char *jkt)
{
	char desc[400], ra[32];
	const struct consent_answer *a = &x->answer;
	enum cs_err e;
	if (x->outcome == EXCHANGE_TOO_MANY_SCOPES)
		return oauth_errorf(rep, 400, "invalid_scope", "together with the scopes already asked "
		    "for, this is more than %d scopes", CONSENT_MAX_SCOPES);
	if (x->outcome == EXCHANGE_GRANT_ENDED)
		return reply_oauth_error(rep, 400, "consent_required",
		    "the consent ended just now (revoked or expired); ask again");
	if (x->outcome == EXCHANGE_GRANTED)
		return grant_reply(rep, &x->grant, jkt);
	switch (a->outcome) {
	case CONSENT_REQUIRED:
		return pending_reply(rep, cfg, "consent_required", a);
	case CONSENT_PENDING:
		return pending_reply(rep, cfg, "authorization_pending", a);
	case CONSENT_SLOW_DOWN:
		return pending_reply(rep, cfg, "slow_down", a);
	case CONSENT_DENIED:
	case CONSENT_EXPIRED:
		if ((e = token_consent_description(a, desc, sizeof desc)) != CS_OK)
			return e;
		return reply_oauth_error(rep, 400, a->outcome == CONSENT_DENIED ? "access_denied" :
		    "expired_token", desc);
	case CONSENT_TOO_MANY:
		if ((e = str_fmt(ra, sizeof ra, "%lld",
		    (long long)(a->retry_after > 0 ? a->retry_after : 1))) != CS_OK ||
		    (e = token_consent_description(a, desc, sizeof desc)) != CS_OK ||
		    (e = reply_oauth_error(rep, 429, a->rate_limited ? "too_many_requests" :
		    "too_many_pending_requests", desc)) != CS_OK)
			return e;
		return reply_header(rep, "Retry-After", ra);
	default:
		return CS_EINVAL;
	}
}

static enum cs_err exchange_for_grant(const struct http_request *req, struct http_reply *rep,
    const char *jkt)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	const char *reason = http_arg_str(req, TOKEN_P_REASON);
	struct exchange_target t;
	struct exchange_grant x;
	struct exchange_grant_req rq = { .jkt = jkt, .now = req->now, .limits = app->limits,
		.actor = req->auth.actor };
	json_t *claims = NULL;
	struct store_conn *c = store_conn(app->store);
	enum cs_err e;
	bool ok = false;

	memset(&x, 0, sizeof x);
	memset(&t, 0, sizeof t);
	if (c == NULL)
		return CS_EDB;
	if ((e = subject_of(req, rep, &claims, &rq.subject, &ok)) != CS_OK || !ok)
		goto out;
	if ((e = exchange_target(cfg, http_arg_str(req, TOKEN_P_AUDIENCE),
	    http_arg_str(req, TOKEN_P_RESOURCE), http_arg_str(req, TOKEN_P_AGENT_ID),
	    http_arg_str(req, TOKEN_P_SCOPE), &t)) != CS_OK)
		goto out;
	rep->log.resource = t.res != NULL ? t.res->id : NULL;
	rep->log.agent = t.agent != NULL ? t.agent->id : NULL;
	if (t.outcome != EXCHANGE_TARGET_OK) {
		e = target_refusal(rep, &t);
		goto out;
	}
	if (token_reason_problem(reason) != NULL) {
		e = reply_oauth_error(rep, 400, "invalid_request", TOKEN_REASON_RULE);
		goto out;
	}
	rq.res = t.res;
	rq.agent = t.agent;
	rq.want = &t.want;
	rq.issuer = oidc_meta(app->idp)->issuer;
	rq.reason = reason && *reason ? reason : NULL;
	rq.kr = app_keys_get(app);
	e = exchange_grant(c, cfg, &rq, &x);
	app_keys_put(app);
	if (e == CS_OK)
		e = grant_answer(rep, cfg, &x, jkt);
out:
	json_decref(claims);
	exchange_target_clear(&t);
	exchange_grant_clear(&x);
	return e;
}

/* The error_description of an invalid_grant refresh: a gateway tells theft (reuse
 * detection) from an expiry or a revocation by it. */
static const char *refresh_refusal_text(enum grant_refresh_outcome oc)
{
	switch (oc) {
	case GRANT_REFRESH_REUSED:
		return "the refresh token was already used: a used token presented again means it "
		    "was copied, so its whole family is now revoked (reuse detected); start again with "
		    "a token exchange";
	case GRANT_REFRESH_REUSE_REVOKED:
		return "the refresh token's family was revoked because one of its used tokens was "
		    "presented again (reuse detected); start again with a token exchange";
	case GRANT_REFRESH_REVOKED:
		return "the refresh token was revoked (at /revoke)";
	case GRANT_REFRESH_CONSENT_REVOKED:
		return "the refresh token's consent was revoked";
	case GRANT_REFRESH_EXPIRED:
		return "the refresh token expired with its consent";
	case GRANT_REFRESH_NOT_OFFLINE:
		return "the refresh token's agent or consent no longer allows offline use";
	case GRANT_REFRESH_NOT_CONFIGURED:
		return "the refresh token's resource is no longer configured";
	default:
		return "the refresh token is unknown";
	}
}

static enum cs_err refresh(const struct http_request *req, struct http_reply *rep, const char *jkt)
{
	struct app *app = req->app;
	const char *rt = http_arg_str(req, TOKEN_P_REFRESH_TOKEN);
	const char *scope = http_arg_str(req, TOKEN_P_SCOPE);
	struct scope_set narrow = { .n = 0 };
	struct grant_response g;
	struct store_conn *c = store_conn(app->store);
	enum grant_refresh_outcome oc = GRANT_REFRESH_INVALID;
	enum cs_err e;
	memset(&g, 0, sizeof g);
	if (c == NULL)
		return CS_EDB;
	if (rt == NULL) {
		e = reply_oauth_error(rep, 400, "invalid_request", "refresh_token is missing");
		goto out;
	}
	if (scope != NULL && (scope_set_parse(scope, &narrow) != CS_OK || narrow.n == 0)) {
		e = reply_oauth_error(rep, 400, "invalid_scope", "scope is malformed");
		goto out;
	}
	struct grant_refresh_req rq = { .refresh_token = rt, .scope = scope ? &narrow : NULL,
		.jkt = jkt, .actor = req->auth.actor, .now = req->now };
	const struct keyring *kr = app_keys_get(app);
	e = grant_refresh(c, app->cfg, kr, &rq, &oc, &g);
	app_keys_put(app);
	if (e != CS_OK)
		goto out;
	switch (oc) {
	case GRANT_REFRESHED:
		e = grant_reply(rep, &g, jkt);
		break;
	case GRANT_REFRESH_WRONG_KEY:
		dpop_api_refuse(req, rep, 400, jkt == NULL ?
		    "the refresh token is DPoP-bound: a DPoP proof is required" :
		    "the refresh token is bound to another key");
		break;
	case GRANT_REFRESH_BAD_SCOPE:
		e = reply_oauth_error(rep, 400, "invalid_scope", "scope is outside the consent");
		break;
	default:
		/* invalid_grant for each; the text says which case it is.  Only a
		 * token consentd knows (by its hash) is told more than "unknown". */
		e = reply_oauth_error(rep, 400, "invalid_grant", refresh_refusal_text(oc));
	}
out:
	scope_set_clear(&narrow);
	grant_response_clear(&g);
	return e;
}

/* --- flow D: a provider token for one action of a grant ----------------- */

/* The reply for flow D's outcome. */
static enum cs_err release_reply(struct http_reply *rep, const struct config *cfg,
    const struct exchange_release *x, const char *action)
{
	const struct vault_release *t = &x->tok;
	json_t *v;
	switch (x->outcome) {
	case EXCHANGE_RELEASED:
		v = json_pack("{s:s, s:s, s:s, s:I, s:s}", "access_token", t->access_token,
		    "issued_token_type", URN_TT_ACCESS_TOKEN, "token_type", t->token_type,
		    "expires_in", (json_int_t)t->expires_in, "scope", t->scope ? t->scope : "");
		if (v != NULL && x->approval.approval_id != NULL)
			json_object_set_new(v, "authorization_details", json_pack("[{s:s, s:s, s:O, s:s}]",
			    "type", "agent_action", "action", action, "parameters", x->params,
			    "params_digest", x->digest));
		return reply_json_value(rep, 200, v);
	case EXCHANGE_APPROVAL:
		return approval_answer_reply(rep, cfg, &x->approval, 400);
	case EXCHANGE_CONSENT_ENDED:
		return reply_oauth_error(rep, 400, "invalid_request", "the grant's consent has ended");
	case EXCHANGE_APPROVAL_USED:
		return reply_oauth_error(rep, 400, "access_denied",
		    "this approval was already used or is no longer valid");
	case EXCHANGE_CONNECTION_GONE:
		return reply_oauth_error(rep, 400, "invalid_grant",
		    "the provider connection is gone; ask for consent again to reconnect");
	case EXCHANGE_PROVIDER_DOWN:
		return reply_oauth_error(rep, 503, "temporarily_unavailable",
		    "the provider could not be reached to refresh the token");
	case EXCHANGE_SCOPE_ESCALATION:
		return reply_oauth_error(rep, 400, "invalid_scope", "the action's scope is not in the grant");
	case EXCHANGE_PROXY_ONLY:
		return reply_oauth_error(rep, 400, "invalid_request",
		    "this resource's tokens are used only by consentd's proxy");
	case EXCHANGE_BAD_DETAILS:
		return reply_oauth_error(rep, 400, "invalid_authorization_details", x->why);
	case EXCHANGE_DETAILS_NEEDED:
		return reply_oauth_error(rep, 400, "invalid_request",
		    "this action needs a person's approval: send authorization_details");
	default:
		return CS_EINVAL;
	}
}

enum cs_err token_api_grant_presented(const struct http_request *req, struct http_reply *rep,
    struct grant_api_presented *out, bool *ok)
{
	const char *gt = http_arg_str(req, TOKEN_P_GRANT_TYPE);
	const char *rtt = http_arg_str(req, TOKEN_P_REQUESTED_TOKEN_TYPE);
	const char *st = http_arg_str(req, TOKEN_P_SUBJECT_TOKEN);
	const char *stt = http_arg_str(req, TOKEN_P_SUBJECT_TOKEN_TYPE);
	*ok = false;
	/* Only a provider-token exchange presents a grant (docs/architecture.md flow D). */
	if (gt == NULL || strcmp(gt, URN_TOKEN_EXCHANGE) != 0 || rtt == NULL ||
	    strcmp(rtt, URN_TT_ACCESS_TOKEN) != 0) {
		*ok = true;
		return CS_OK;
	}
	if (st == NULL)
		return reply_oauth_error(rep, 400, "invalid_request", "subject_token (the grant) is missing");
	if (stt == NULL || strcmp(stt, URN_TT_ACCESS_TOKEN) != 0)
		return reply_oauth_error(rep, 400, "invalid_request", "subject_token_type must be "
		    "urn:ietf:params:oauth:token-type:access_token (the subject token is a grant)");
	if (http_arg_str(req, TOKEN_P_ACTION) == NULL)
		return reply_oauth_error(rep, 400, "invalid_request", "action is missing");
	*out = (struct grant_api_presented){ .grant = st, .dialect = GRANT_API_AT_TOKEN,
		.resource_id = http_arg_str(req, TOKEN_P_AUDIENCE),
		.resource_uri = http_arg_str(req, TOKEN_P_RESOURCE) };
	*ok = true;
	return CS_OK;
}

/* Flow D, once the route's grant check (token_api_grant_presented) let the
 * grant through: valid, its proof checked, for the resource named. */
static enum cs_err exchange_for_provider_token(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	const struct grant_check *gc = req->auth.grant;
	const char *action = http_arg_str(req, TOKEN_P_ACTION);
	struct store_conn *c = store_conn(app->store);
	struct exchange_release x;
	enum cs_err e;

	memset(&x, 0, sizeof x);
	if (c == NULL)
		return CS_EDB;
	if (gc == NULL || !gc->valid)
		return CS_EPERM;        /* cannot happen: the route table checks the grant first */
	struct exchange_token_req rq = { .vault = app->vault, .k = &gc->k, .claims = gc->claims,
		.details = http_arg_str(req, TOKEN_P_AUTHORIZATION_DETAILS), .actor = req->auth.actor,
		.now = req->now, .limits = app->limits };
	switch (exchange_action(cfg, app->vault, &gc->k, action, &rq.res, &rq.act)) {
	case EXCHANGE_ACTION_OK:
		break;
	case EXCHANGE_ACTION_NO_PROVIDER:
		return reply_oauth_error(rep, 400, "invalid_target", "the grant's resource has no provider");
	default:
		return reply_oauth_error(rep, 400, "invalid_request",
		    "unknown action: action names no configured action of the grant's resource");
	}
	if ((e = exchange_provider_token(c, cfg, &rq, &x)) == CS_OK)
		e = release_reply(rep, cfg, &x, action);
	else if (e == CS_ECRYPTO && x.at_release)
		e = reply_oauth_error(rep, 500, "server_error", "the stored token could not be opened");
	exchange_release_clear(&x);
	return e;
}

/* --- the endpoints -------------------------------------------------------- */

enum cs_err token_api_token(const struct http_request *req, struct http_reply *rep)
{
	const char *gt = http_arg_str(req, TOKEN_P_GRANT_TYPE);
	const char *rtt = http_arg_str(req, TOKEN_P_REQUESTED_TOKEN_TYPE);
	char jkt[JWS_JKT_LEN + 1];
	bool for_grant = strcmp(gt, "refresh_token") == 0 || (strcmp(gt, URN_TOKEN_EXCHANGE) == 0 &&
	    (rtt == NULL || strcmp(rtt, URN_TT_JWT) == 0));
	/* RFC 9449 §5: a proof at the exchange binds the grant to its key. */
	if (for_grant && !dpop_api_at_token(req, rep, jkt))
		return CS_OK;
	if (strcmp(gt, "refresh_token") == 0)
		return refresh(req, rep, jkt[0] ? jkt : NULL);
	if (strcmp(gt, URN_TOKEN_EXCHANGE) != 0)
		return reply_oauth_error(rep, 400, "unsupported_grant_type",
		    "grant_type must be token-exchange or refresh_token");
	/* requested_token_type tells the two exchanges apart (docs/architecture.md flow D). */
	if (rtt == NULL || strcmp(rtt, URN_TT_JWT) == 0)
		return exchange_for_grant(req, rep, jkt[0] ? jkt : NULL);
	if (strcmp(rtt, URN_TT_ACCESS_TOKEN) == 0)
		return exchange_for_provider_token(req, rep);
	return reply_oauth_error(rep, 400, "invalid_request", "requested_token_type must be "
	    "urn:ietf:params:oauth:token-type:jwt (a grant) or ...:access_token (a provider token)");
}

enum cs_err token_api_introspect(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	struct store_conn *c = store_conn(app->store);
	json_t *out = NULL;
	enum cs_err e;
	if (c == NULL)
		return CS_EDB;
	const struct keyring *kr = app_keys_get(app);
	e = grant_introspect(c, app->cfg, kr, http_arg_str(req, TOKEN_P_TOKEN), req->now, &out);
	app_keys_put(app);
	if (e != CS_OK)
		return e;
	return reply_json_value(rep, 200, out);
}

enum cs_err token_api_revoke(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	struct store_conn *c = store_conn(app->store);
	enum cs_err e;
	if (c == NULL)
		return CS_EDB;
	const struct keyring *kr = app_keys_get(app);
	e = grant_revoke(c, app->cfg, kr, http_arg_str(req, TOKEN_P_TOKEN), req->auth.actor, req->now);
	app_keys_put(app);
	if (e != CS_OK)
		return e;
	/* RFC 7009 §2.2: 200 whether or not the token was known. */
	return reply_json(rep, 200, "{}");
}
