/* idjag_api.c -- /token's jwt-bearer grant with an ID-JAG (idjag_grant.h),
 * the handler: the client authenticated as for a code
 * (mcp_token_authenticate), the DPoP proof when one came, then idjag_grant,
 * its outcome answered as RFC 6749 JSON.  The rules and their words are
 * idjag_grant.c's and mcp_token.c's. */
#include <string.h>
#include <jansson.h>
#include "app.h"
#include "client_auth_api.h"
#include "dpop_api.h"
#include "idjag_api.h"
#include "idjag_grant.h"
#include "mcp_token.h"

static enum cs_err reply_granted(struct http_reply *rep, const struct grant_response *g,
    bool bound)
{
	/* RFC 6749 §5.1, RFC 9449 §5; no refresh token: the client returns with
	 * a new ID-JAG. */
	json_t *v = json_pack("{s:s, s:s, s:I, s:s}", "access_token", g->access_token,
	    "token_type", bound ? "DPoP" : "Bearer", "expires_in", (json_int_t)g->expires_in,
	    "scope", g->scope);
	return reply_json_value(rep, 200, v);
}

/* The MCP client, as for a code.  false: rep holds the answer (or *e). */
static bool client_ok(const struct http_request *req, struct http_reply *rep,
    bool *private_key_jwt, enum cs_err *e)
{
	struct mcp_token_answer a;
	memset(&a, 0, sizeof a);
	*e = CS_OK;
	/* SECURITY: the gateway's credentials are no MCP client's (token_api.c
	 * sends the gateway's requests elsewhere; this holds if that changes). */
	if (req->authorization != NULL || req->auth.gateway) {
		*e = reply_oauth_error(rep, 401, "invalid_client", "an MCP client authenticates with "
		    "client_id (public) or a client assertion (private_key_jwt), never Basic");
		return false;
	}
	struct mcp_token_req rq = { .client_id = http_arg_str(req, CLIENT_AUTH_P_CLIENT_ID),
		.assertion_type = http_arg_str(req, CLIENT_AUTH_P_ASSERTION_TYPE),
		.assertion = http_arg_str(req, CLIENT_AUTH_P_ASSERTION),
		.remote_ip = req->remote_ip, .actor = req->auth.actor, .now = req->now };
	if (rq.client_id == NULL) {
		*e = reply_oauth_error(rep, 401, "invalid_client", "client_id is missing");
		return false;
	}
	bool ok = mcp_token_authenticate(req->app, &rq, &a, private_key_jwt, e);
	if (!ok && *e == CS_OK)
		*e = reply_oauth_error(rep, 401, "invalid_client", a.description[0] ? a.description :
		    "client authentication failed");
	mcp_token_answer_clear(&a);
	return ok;
}

enum cs_err idjag_api_token(const struct http_request *req, struct http_reply *rep,
    const struct idjag_api_params *p)
{
	struct app *app = req->app;
	struct idjag_grant_result r;
	char jkt[JWS_JKT_LEN + 1] = "";
	bool pkjwt = false;
	struct store_conn *c;
	enum cs_err e;

	memset(&r, 0, sizeof r);
	if (!client_ok(req, rep, &pkjwt, &e))
		return e;
	if (p->assertion == NULL)
		return reply_oauth_error(rep, 400, "invalid_request", "assertion (the ID-JAG) is missing");
	/* RFC 9449: a proof, when one came, must be valid and binds the token;
	 * [mcp] require_dpop asks one of public clients, as for a code. */
	if (req->header != NULL && req->header(req->hctx, DPOP_HEADER) != NULL &&
	    !dpop_api_at_token(req, rep, jkt))
		return CS_OK;
	if (mcp_token_dpop_missing(app->cfg, jkt[0] != '\0', pkjwt)) {
		dpop_api_refuse(req, rep, 400, MCP_TOKEN_DPOP_REQUIRED);
		return CS_OK;
	}
	if ((c = store_conn(app->store)) == NULL)
		return CS_EDB;
	struct idjag_grant_req rq = { .assertion = p->assertion,
		.client_id = http_arg_str(req, CLIENT_AUTH_P_CLIENT_ID), .resource = p->resource,
		.scope = p->scope, .jkt = jkt[0] ? jkt : NULL, .now = req->now };
	const struct keyring *kr = app_keys_get(app);
	e = idjag_grant(c, app->cfg, kr, &rq, &r);
	app_keys_put(app);
	if (e == CS_OK) {
		rep->log.agent = rq.client_id;
		switch (r.outcome) {
		case IDJAG_GRANTED:
			e = reply_granted(rep, &r.grant, rq.jkt != NULL);
			break;
		case IDJAG_GRANT_BAD_TARGET:
			e = reply_oauth_error(rep, 400, "invalid_target", r.why);
			break;
		case IDJAG_GRANT_BAD_SCOPE:
			e = reply_oauth_error(rep, 400, "invalid_scope", r.why);
			break;
		case IDJAG_GRANT_UNAVAILABLE:
			e = reply_oauth_error(rep, 503, "temporarily_unavailable", r.why);
			break;
		default:
			e = reply_oauth_error(rep, 400, "invalid_grant", r.why);
		}
	}
	idjag_grant_result_clear(&r);
	return e;
}
