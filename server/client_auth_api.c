/* client_auth_api.c -- the gate of the gateway's routes: its credentials
 * read from the request (Authorization, Consentd-Client-Assertion, the
 * form's client_assertion parameters) into client_auth.h's plain request,
 * and the refusal answered.  client_auth.c decides, counts and audits; this
 * file must never decide who the caller is itself. */
#include "app.h"
#include "client_auth.h"
#include "client_auth_api.h"

bool client_auth_api_gateway(const struct http_request *req, struct http_reply *rep)
{
	struct client_auth_request rq = {
		.authorization = req->authorization,
		.assertion_header = req->header ? req->header(req->hctx, CLIENT_ASSERTION_HEADER) : NULL,
		.assertion_type = http_arg_str(req, CLIENT_AUTH_P_ASSERTION_TYPE),
		.assertion = http_arg_str(req, CLIENT_AUTH_P_ASSERTION),
		.client_id = http_arg_str(req, CLIENT_AUTH_P_CLIENT_ID),
		.remote_ip = req->remote_ip, .path = req->path, .now = req->now,
	};
	struct client_auth_result r;
	client_auth_gateway(req->app, &rq, &r);
	switch (r.outcome) {
	case CLIENT_AUTH_OK:
		return true;
	case CLIENT_AUTH_LIMITED:
		/* Every gateway route answers JSON: the kind only picks that shape. */
		if (req->route == NULL ||
		    reply_limit_refusal(rep, req->route->kind, LIMIT_AUTH_FAILURE, r.retry_after) != CS_OK)
			rep->status = 429;
		return false;
	default:
		/* RFC 6749 §5.2: a challenge for the scheme the client can use. */
		if (reply_oauth_error(rep, 401, "invalid_client", r.description[0] ? r.description :
		    "client authentication failed") != CS_OK ||
		    (r.basic_challenge &&
		    reply_header(rep, "WWW-Authenticate", "Basic realm=\"consentd\"") != CS_OK))
			rep->status = 401;
		return false;
	}
}
