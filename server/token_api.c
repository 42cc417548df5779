/* token_api.c -- the OAuth endpoints: /token (the gateway's RFC 8693 token
 * exchange for grants and provider tokens and its refresh_token; an MCP
 * client's authorization_code and refresh_token, mcp_token.c), /introspect
 * and /revoke.  Handlers only: they read the request, call one domain
 * function (exchange.c, grant.c, mcp_token.c) and map its outcome to RFC 6749
 * JSON with Cache-Control: no-store; the rules and their descriptions are the
 * domain's.  No transaction and no audit entry is written here. */
#include <string.h>
#include <jansson.h>
#include "agent.h"
#include "app.h"
#include "approval_api.h"
#include "buf.h"
#include "dpop_api.h"
#include "exchange.h"
#include "grant.h"
#include "idjag_api.h"
#include "idjag.h"
#include "mcp_token.h"
#include "token_api.h"
#include "vault.h"

/* --- replies --------------------------------------------------------------- */

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

/* A consent answer the gateway polls on: the description and where to send the person. */
static enum cs_err pending_reply(struct http_reply *rep, const struct config *cfg, const char *error,
    const struct consent_answer *a, const char *desc)
{
	char uri[600];
	enum cs_err e;
	if (a->request_id != NULL && (e = str_fmt(uri, sizeof uri, "%s/consent/%s", cfg->public_url,
	    a->request_id)) != CS_OK)
		return e;
	return reply_oauth_pending(rep, 400, error, desc, &(struct reply_pending){
	    .id_key = "consent_request_id", .id = a->request_id, .uri_key = "consent_uri",
	    .uri = uri, .expires_in = a->expires_in, .interval = a->interval });
}

/* --- flow A: a grant for a person's live consent ------------------------- */

/* The refusal of a subject token (exchange_subject). */
static enum cs_err subject_refusal(struct http_reply *rep, const struct config *cfg,
    const struct exchange_subject *s)
{
	char desc[EXCHANGE_DESCRIPTION_MAX];
	enum cs_err e = exchange_subject_description(cfg, s, desc, sizeof desc);
	if (e != CS_OK)
		return e;
	if (s->outcome == EXCHANGE_SUBJECT_IDP_UNREACHED)
		return reply_oauth_error(rep, 503, "temporarily_unavailable", desc);
	return reply_oauth_error(rep, 400, "invalid_request", desc);
}

/* The refusal of what a grant exchange names (exchange_target). */
static enum cs_err target_refusal(struct http_reply *rep, const struct exchange_target *t)
{
	char desc[EXCHANGE_DESCRIPTION_MAX];
	enum cs_err e = exchange_target_description(t, desc, sizeof desc);
	if (e != CS_OK)
		return e;
	switch (t->outcome) {
	case EXCHANGE_TARGET_NO_RESOURCE:
	case EXCHANGE_TARGET_UNKNOWN_AUDIENCE:
	case EXCHANGE_TARGET_UNKNOWN_URI:
	case EXCHANGE_TARGET_DISAGREE:
		return reply_oauth_error(rep, 400, "invalid_target", desc);
	case EXCHANGE_TARGET_NO_AGENT:
	case EXCHANGE_TARGET_UNKNOWN_AGENT:
	case EXCHANGE_TARGET_NO_SCOPE:
		return reply_oauth_error(rep, 400, "invalid_request", desc);
	case EXCHANGE_TARGET_BAD_SCOPE:
	case EXCHANGE_TARGET_SCOPE_UNKNOWN:
	case EXCHANGE_TARGET_SCOPE_DENIED:
		return reply_oauth_error(rep, 400, "invalid_scope", desc);
	default:
		return CS_EINVAL;
	}
}

/* The reply for flow A's outcome. */
static enum cs_err grant_answer(struct http_reply *rep, const struct config *cfg,
    const struct exchange_grant *x, const char *jkt)
{
	char desc[EXCHANGE_DESCRIPTION_MAX], ra[32];
	const struct consent_answer *a = &x->answer;
	enum cs_err e;
	if (x->outcome == EXCHANGE_GRANTED)
		return grant_reply(rep, &x->grant, jkt);
	if ((e = exchange_grant_description(x, desc, sizeof desc)) != CS_OK)
		return e;
	if (x->outcome == EXCHANGE_TOO_MANY_SCOPES)
		return reply_oauth_error(rep, 400, "invalid_scope", desc);
	if (x->outcome == EXCHANGE_GRANT_ENDED)
		return reply_oauth_error(rep, 400, "consent_required", desc);
	switch (a->outcome) {
	case CONSENT_REQUIRED:
		return pending_reply(rep, cfg, "consent_required", a, desc);
	case CONSENT_PENDING:
		return pending_reply(rep, cfg, "authorization_pending", a, desc);
	case CONSENT_SLOW_DOWN:
		return pending_reply(rep, cfg, "slow_down", a, desc);
	case CONSENT_DENIED:
		return reply_oauth_error(rep, 400, "access_denied", desc);
	case CONSENT_EXPIRED:
		return reply_oauth_error(rep, 400, "expired_token", desc);
	case CONSENT_TOO_MANY:
		if ((e = str_fmt(ra, sizeof ra, "%lld",
		    (long long)(a->retry_after > 0 ? a->retry_after : 1))) != CS_OK ||
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
	const char *st = http_arg_str(req, TOKEN_P_SUBJECT_TOKEN);
	struct exchange_subject s;
	struct exchange_target t;
	struct exchange_grant x;
	struct exchange_grant_req rq = { .jkt = jkt, .now = req->now, .limits = app->limits,
		.actor = req->auth.actor };
	struct store_conn *c = store_conn(app->store);
	enum cs_err e;

	memset(&x, 0, sizeof x);
	memset(&t, 0, sizeof t);
	memset(&s, 0, sizeof s);
	if (c == NULL)
		return CS_EDB;
	if ((e = exchange_subject(cfg, app->idp, http_arg_str(req, TOKEN_P_SUBJECT_TOKEN_TYPE), st,
	    req->now, &s)) != CS_OK)
		goto out;
	if (s.outcome == EXCHANGE_SUBJECT_INVALID) {
		exchange_subject_ours(app_keys_get(app), st, &s);
		app_keys_put(app);
	}
	if (s.outcome != EXCHANGE_SUBJECT_OK) {
		e = subject_refusal(rep, cfg, &s);
		goto out;
	}
	if ((e = exchange_target(cfg, http_arg_str(req, TOKEN_P_AUDIENCE),
	    http_arg_str(req, TOKEN_P_RESOURCE), http_arg_str(req, TOKEN_P_AGENT_ID),
	    http_arg_str(req, TOKEN_P_SCOPE), &t)) != CS_OK)
		goto out;
	rep->log.resource = t.res != NULL ? t.res->id : NULL;
	rep->log.agent = t.agent.id;
	if (t.outcome != EXCHANGE_TARGET_OK) {
		e = target_refusal(rep, &t);
		goto out;
	}
	if (exchange_reason_problem(reason) != NULL) {
		e = reply_oauth_error(rep, 400, "invalid_request", EXCHANGE_REASON_RULE);
		goto out;
	}
	rq.subject = s.sub;
	rq.res = t.res;
	rq.agent = &t.agent;
	rq.want = &t.want;
	rq.issuer = oidc_meta(app->idp)->issuer;
	rq.reason = reason && *reason ? reason : NULL;
	rq.kr = app_keys_get(app);
	e = exchange_grant(c, cfg, &rq, &x);
	app_keys_put(app);
	if (e == CS_OK)
		e = grant_answer(rep, cfg, &x, jkt);
out:
	exchange_subject_clear(&s);
	exchange_target_clear(&t);
	exchange_grant_clear(&x);
	return e;
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
		e = reply_oauth_error(rep, 400, "invalid_scope", grant_refresh_outcome_description(oc));
		break;
	default:
		/* invalid_grant for each; the text says which case it is. */
		e = reply_oauth_error(rep, 400, "invalid_grant", grant_refresh_outcome_description(oc));
	}
out:
	scope_set_clear(&narrow);
	grant_response_clear(&g);
	return e;
}

/* --- flow D: a provider token for one action of a grant ----------------- */

/* The reply for flow D's outcome. */
static enum cs_err release_reply(struct http_reply *rep, const struct config *cfg,
    const struct exchange_release *x, const char *action, int64_t now)
{
	const struct vault_release *t = &x->tok;
	const char *desc = exchange_outcome_description(x);
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
		return approval_answer_reply(rep, cfg, &x->approval, 400, now);
	case EXCHANGE_CONSENT_ENDED:
	case EXCHANGE_PROXY_ONLY:
	case EXCHANGE_DETAILS_NEEDED:
		return reply_oauth_error(rep, 400, "invalid_request", desc);
	case EXCHANGE_APPROVAL_USED:
		return reply_oauth_error(rep, 400, "access_denied", desc);
	case EXCHANGE_CONNECTION_GONE:
		return reply_oauth_error(rep, 400, "invalid_grant", desc);
	case EXCHANGE_PROVIDER_DOWN:
		return reply_oauth_error(rep, 503, "temporarily_unavailable", desc);
	case EXCHANGE_SCOPE_ESCALATION:
		return reply_oauth_error(rep, 400, "invalid_scope", desc);
	case EXCHANGE_BAD_DETAILS:
		return reply_oauth_error(rep, 400, "invalid_authorization_details", desc);
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
	enum exchange_action_outcome ao = exchange_action(cfg, app->vault, &gc->k, action, &rq.res,
	    &rq.act);
	switch (ao) {
	case EXCHANGE_ACTION_OK:
		break;
	case EXCHANGE_ACTION_NO_PROVIDER:
		return reply_oauth_error(rep, 400, "invalid_target", exchange_action_description(ao));
	default:
		return reply_oauth_error(rep, 400, "invalid_request", exchange_action_description(ao));
	}
	if ((e = exchange_provider_token(c, cfg, &rq, &x)) == CS_OK)
		e = release_reply(rep, cfg, &x, action, req->now);
	else if (e == CS_ECRYPTO && x.at_release)
		e = reply_oauth_error(rep, 500, "server_error", "the stored token could not be opened");
	exchange_release_clear(&x);
	return e;
}

/* --- MCP clients (mcp_token.c) -------------------------------------------- */

/* Whether the gate let req through as an MCP client's. */
static bool is_mcp_client(const struct http_request *req)
{
	return mcp_token_request_is_client(req->app->cfg, http_arg_str(req, CLIENT_AUTH_P_CLIENT_ID),
	    req->authorization);
}

/* An MCP client's request as mcp_token.h takes it; jkt the valid proof's. */
static struct mcp_token_req mcp_request_of(const struct http_request *req, const char *jkt)
{
	return (struct mcp_token_req){
		.client_id = http_arg_str(req, CLIENT_AUTH_P_CLIENT_ID),
		.assertion_type = http_arg_str(req, CLIENT_AUTH_P_ASSERTION_TYPE),
		.assertion = http_arg_str(req, CLIENT_AUTH_P_ASSERTION),
		.jkt = jkt, .remote_ip = req->remote_ip, .actor = req->auth.actor, .now = req->now,
	};
}

/* The answer mcp_token.c decided. */
static enum cs_err mcp_reply(const struct http_request *req, struct http_reply *rep,
    const struct mcp_token_answer *a)
{
	if (a->status == 200) {
		/* RFC 6749 §5.1, RFC 9449 §5: a bound token is of type DPoP. */
		json_t *v = json_pack("{s:s, s:s, s:I, s:s}", "access_token", a->g.access_token,
		    "token_type", a->dpop_bound ? "DPoP" : "Bearer",
		    "expires_in", (json_int_t)a->g.expires_in, "scope", a->g.scope);
		if (v != NULL && a->g.refresh_token != NULL &&
		    json_object_set_new(v, "refresh_token", json_string(a->g.refresh_token)) != 0) {
			json_decref(v);
			return CS_ENOMEM;
		}
		return reply_json_value(rep, 200, v);
	}
	if (a->error == NULL)
		return CS_EINVAL;
	if (strcmp(a->error, "invalid_dpop_proof") == 0) {
		dpop_api_refuse(req, rep, a->status, a->description);
		return CS_OK;
	}
	if (a->status == 401) {
		/* RFC 6749 §5.2: an MCP client has no Basic credentials to offer. */
		return reply_oauth_error(rep, 401, "invalid_client", a->description);
	}
	if (strcmp(a->error, "invalid_request") == 0)
		return reply_oauth_error(rep, 400, "invalid_request", a->description);
	if (strcmp(a->error, "invalid_grant") == 0)
		return reply_oauth_error(rep, 400, "invalid_grant", a->description);
	if (strcmp(a->error, "invalid_target") == 0)
		return reply_oauth_error(rep, 400, "invalid_target", a->description);
	if (strcmp(a->error, "invalid_scope") == 0)
		return reply_oauth_error(rep, 400, "invalid_scope", a->description);
	if (strcmp(a->error, "unauthorized_client") == 0)
		return reply_oauth_error(rep, 400, "unauthorized_client", a->description);
	return CS_EINVAL;
}

/* /token for an MCP client: authorization_code or refresh_token. */
static enum cs_err mcp_token(const struct http_request *req, struct http_reply *rep,
    const char *gt)
{
	char jkt[JWS_JKT_LEN + 1] = "";
	struct mcp_token_answer a;
	enum cs_err e;
	bool code = strcmp(gt, "authorization_code") == 0;
	memset(&a, 0, sizeof a);
	/* RFC 6749 §5.2: a client_id that names no client consentd knows
	 * (neither a [client.NAME] nor a client-id URL the [mcp] policy lets in)
	 * is a failed client authentication, whatever it asks for.  No fetch:
	 * the grant type is refused either way. */
	struct agent_view ag;
	if (!code && strcmp(gt, "refresh_token") != 0 &&
	    (!agent_resolve(req->app->cfg, http_arg_str(req, CLIENT_AUTH_P_CLIENT_ID), &ag) ||
	    ag.kind == AGENT_CONFIGURED))
		return reply_oauth_error(rep, 401, "invalid_client", "client_id names no MCP client "
		    "registered here ([client.NAME]) nor a client-id URL the [mcp] policy admits");
	if (!code && strcmp(gt, "refresh_token") != 0)
		return reply_oauth_error(rep, 400, "unsupported_grant_type", "grant_type must be "
		    "authorization_code, refresh_token or urn:ietf:params:oauth:grant-type:jwt-bearer "
		    "for an MCP client");
	/* RFC 9449 §5: a proof, when one came, must be valid; whether one is
	 * required is mcp_token.c's to say. */
	if (req->header != NULL && req->header(req->hctx, DPOP_HEADER) != NULL &&
	    !dpop_api_at_token(req, rep, jkt))
		return CS_OK;
	struct mcp_token_req rq = mcp_request_of(req, jkt[0] ? jkt : NULL);
	rq.resource = http_arg_str(req, TOKEN_P_RESOURCE);
	rq.scope = http_arg_str(req, TOKEN_P_SCOPE);
	if (code) {
		rq.code = http_arg_str(req, TOKEN_P_CODE);
		rq.redirect_uri = http_arg_str(req, TOKEN_P_REDIRECT_URI);
		rq.code_verifier = http_arg_str(req, TOKEN_P_CODE_VERIFIER);
		e = mcp_token_code(req->app, &rq, &a);
	} else {
		rq.refresh_token = http_arg_str(req, TOKEN_P_REFRESH_TOKEN);
		e = mcp_token_refresh(req->app, &rq, &a);
	}
	if (e == CS_OK)
		e = mcp_reply(req, rep, &a);
	mcp_token_answer_clear(&a);
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
	/* An MCP client's ID-JAG (idjag_api.h): it authenticates the client.
	 * The gateway has no such grant (unsupported_grant_type below). */
	if (!req->auth.gateway && strcmp(gt, IDJAG_GRANT_TYPE) == 0)
		return idjag_api_token(req, rep, &(struct idjag_api_params){      /* idjag_api.h */
		    .assertion = http_arg_str(req, TOKEN_P_ASSERTION),
		    .resource = http_arg_str(req, TOKEN_P_RESOURCE),
		    .scope = http_arg_str(req, TOKEN_P_SCOPE) });
	/* The gate let the gateway through, or an MCP client it named. */
	if (!req->auth.gateway && is_mcp_client(req))
		return mcp_token(req, rep, gt);
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
	if (!req->auth.gateway && is_mcp_client(req)) {
		/* An MCP client (token_api_gate): its own tokens only. */
		struct mcp_token_answer a;
		struct mcp_token_req rq = mcp_request_of(req, NULL);
		rq.token = http_arg_str(req, TOKEN_P_TOKEN);
		if ((e = mcp_token_revoke(app, &rq, &a)) == CS_OK)
			e = a.status == 200 ? reply_json(rep, 200, "{}") : mcp_reply(req, rep, &a);
		mcp_token_answer_clear(&a);
		return e;
	}
	const struct keyring *kr = app_keys_get(app);
	e = grant_revoke(c, app->cfg, kr, http_arg_str(req, TOKEN_P_TOKEN), req->auth.actor, req->now);
	app_keys_put(app);
	if (e != CS_OK)
		return e;
	/* RFC 7009 §2.2: 200 whether or not the token was known. */
	return reply_json(rep, 200, "{}");
}
