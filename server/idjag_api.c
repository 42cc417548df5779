/* idjag_api.c -- /token's jwt-bearer grant with an ID-JAG (idjag_grant.h),
 * the handler: the request's parameters to idjag_client_authenticate and
 * idjag_grant, their outcomes to RFC 6749 JSON.  The rules and their words are
 * idjag_grant.c's. */
#include <string.h>
#include <jansson.h>
#include "app.h"
#include "client_auth_api.h"
#include "idjag_api.h"
#include "idjag_grant.h"

static enum cs_err reply_granted(struct http_reply *rep, const struct grant_response *g)
{
	/* RFC 6749 §5.1; no refresh token: the client returns with a new ID-JAG. */
	json_t *v = json_pack("{s:s, s:s, s:I, s:s}", "access_token", g->access_token,
	    "token_type", "Bearer", "expires_in", (json_int_t)g->expires_in, "scope", g->scope);
	return reply_json_value(rep, 200, v);
}

enum cs_err idjag_api_token(const struct http_request *req, struct http_reply *rep,
    const struct idjag_api_params *p)
{
	struct app *app = req->app;
	const char *client_id = http_arg_str(req, CLIENT_AUTH_P_CLIENT_ID);
	const char *assertion = p->assertion;
	struct idjag_grant_result r;
	char why[IDJAG_WHY_MAX];
	bool ok = false;
	struct store_conn *c;
	enum cs_err e;

	memset(&r, 0, sizeof r);
	struct idjag_client_auth ca = { .client_id = client_id, .basic = req->authorization != NULL,
		.assertion_type = http_arg_str(req, CLIENT_AUTH_P_ASSERTION_TYPE),
		.assertion = http_arg_str(req, CLIENT_AUTH_P_ASSERTION), .now = req->now };
	if ((e = idjag_client_authenticate(app, &ca, &ok, why, sizeof why)) != CS_OK)
		return e;
	if (!ok)
		return reply_oauth_error(rep, 401, "invalid_client", why[0] ? why :
		    "client authentication failed");
	if (assertion == NULL)
		return reply_oauth_error(rep, 400, "invalid_request", "assertion (the ID-JAG) is missing");
	if ((c = store_conn(app->store)) == NULL)
		return CS_EDB;
	struct idjag_grant_req rq = { .assertion = assertion, .client_id = client_id,
		.resource = p->resource, .scope = p->scope, .now = req->now };
	const struct keyring *kr = app_keys_get(app);
	e = idjag_grant(c, app->cfg, kr, &rq, &r);
	app_keys_put(app);
	if (e == CS_OK) {
		rep->log.agent = client_id;
		switch (r.outcome) {
		case IDJAG_GRANTED:
			e = reply_granted(rep, &r.grant);
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
