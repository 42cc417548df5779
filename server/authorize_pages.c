/* authorize_pages.c -- the authorization endpoint of MCP clients
 * (authorize_pages.h): parameters in, one domain call (authorize.c's rules,
 * authz_flow.c's steps), a page or a redirect out.  It must never send the
 * browser to a redirect URI the client did not register (an open
 * redirector), nor answer a refusal to the client before that URI is known
 * good (RFC 6749 §4.1.2.1). */
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "authorize.h"
#include "authorize_pages.h"
#include "authz_flow.h"
#include "buf.h"
#include "mcp_client.h"
#include "page_reply.h"
#include "session.h"

#define LOCATION_MAX (4 * AUTHZ_URI_MAX + 2 * AUTHZ_STATE_MAX)

/* An error page for the person: the browser goes nowhere else. */
static enum cs_err to_person(struct http_reply *rep, int status, const char *why)
{
	char msg[400];
	enum cs_err e;
	reply_log_error(rep, "invalid_request", why);
	if ((e = str_fmt(msg, sizeof msg, "The app that sent you here made a request consentd "
	    "cannot accept, so you were not sent back to it: %s.", why)) != CS_OK)
		return e;
	return reply_html_error(rep, status, "This sign-in cannot go on", msg);
}

/* The answer at the client's validated redirect URI: code, or error and
 * why; state when it is one authz_check accepts; iss (RFC 9207) always. */
static enum cs_err to_client(const struct http_request *req, struct http_reply *rep,
    const char *redirect_uri, const char *code, const char *error, const char *why,
    const char *state)
{
	struct buf loc;
	enum cs_err e;
	buf_init(&loc, LOCATION_MAX);
	if (error != NULL)
		reply_log_error(rep, error, why);
	if ((e = authz_response_url(&loc, redirect_uri, code, error, why,
	    state != NULL && authz_state_valid(state) ? state : NULL,
	    req->app->cfg->public_url)) == CS_OK)
		e = page_redirect(rep, loc.data);
	/* SECURITY: the code is a credential: the copy built here is wiped. */
	buf_wipe_clear(&loc);
	return e;
}

static enum cs_err not_found(struct http_reply *rep)
{
	return reply_html_error(rep, 404, "No such sign-in request",
	    "This sign-in request does not exist, expired or was already used. Start the sign-in "
	    "again from your app.");
}

/* Whether e is mcp_client_lookup's refusal of the client (why says which
 * check), rather than a failure. */
static bool client_refused(enum cs_err e)
{
	return e == CS_ENOENT || e == CS_EPERM || e == CS_EINVAL || e == CS_EIO ||
	    e == CS_ETOOBIG || e == CS_EBUSY;
}

/* The request as authz_check reads it. */
static struct authz_request request_of(const struct http_request *req)
{
	return (struct authz_request){
		.response_type = http_arg_str(req, AUTHORIZE_P_RESPONSE_TYPE),
		.client_id = http_arg_str(req, AUTHORIZE_P_CLIENT_ID),
		.redirect_uri = http_arg_str(req, AUTHORIZE_P_REDIRECT_URI),
		.state = http_arg_str(req, AUTHORIZE_P_STATE),
		.code_challenge = http_arg_str(req, AUTHORIZE_P_CODE_CHALLENGE),
		.code_challenge_method = http_arg_str(req, AUTHORIZE_P_CODE_CHALLENGE_METHOD),
		.scope = http_arg_str(req, AUTHORIZE_P_SCOPE),
		.resource = http_arg_str(req, AUTHORIZE_P_RESOURCE),
		.response_mode = http_arg_str(req, AUTHORIZE_P_RESPONSE_MODE),
		.request = http_arg_str(req, AUTHORIZE_P_REQUEST),
		.request_uri = http_arg_str(req, AUTHORIZE_P_REQUEST_URI),
	};
}

/* What the request asks beyond authz_check's rules, once its redirect URI
 * is good: scopes of the resource behind the endpoint, and a well-formed
 * dpop_jkt.  *error NULL when both pass; else error and why for the client. */
static enum cs_err beyond_check(const struct config *cfg, const struct authz_request *ar,
    const char *jkt, const char **error, char *why, size_t whylen)
{
	const struct config_mcp_endpoint *ep = config_mcp_endpoint_by_uri(cfg, ar->resource);
	struct scope_set want = { .n = 0 };
	enum authz_scope_outcome so;
	const char *bad = NULL;
	enum cs_err e;
	*error = NULL;
	if (ep == NULL) {                 /* cannot happen: authz_check took it from the list */
		*error = "invalid_target";
		return str_fmt(why, whylen, "resource is not an MCP endpoint of this server");
	}
	if ((e = authz_flow_scopes(cfg, ar->client_id, ep->resource, ar->scope, &want, &so,
	    &bad)) != CS_OK)
		return e;
	if (so != AUTHZ_SCOPE_OK) {
		*error = "invalid_scope";
		e = authz_flow_scope_description(so, bad, ar->resource, why, whylen);
	} else if (jkt != NULL && !authz_flow_jkt_valid(jkt)) {
		*error = "invalid_request";
		e = str_fmt(why, whylen, "dpop_jkt must be a JWK SHA-256 thumbprint: %d base64url "
		    "characters (RFC 9449 section 10)", AUTHZ_FLOW_JKT_LEN);
	}
	scope_set_clear(&want);
	return e;
}

/* The resource indicators consentd serves: the URI of every [mcp.NAME]. */
static const char **mcp_resources(const struct config *cfg)
{
	const char **v = calloc(cfg->nmcp_endpoints + 1, sizeof *v);
	for (size_t i = 0; v != NULL && i < cfg->nmcp_endpoints; i++)
		v[i] = cfg->mcp_endpoints[i].uri;
	return v;
}

enum cs_err authorize_pages_start(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	struct authz_request ar = request_of(req);
	const char *jkt = http_arg_str(req, AUTHORIZE_P_DPOP_JKT), *error = NULL;
	struct mcp_client k;
	struct authz_verdict v;
	struct store_conn *c = store_conn(app->store);
	char why[CIMD_WHY_MAX], more[AUTHZ_FLOW_WHY_MAX], id[STORE_AUTHZ_ID_LEN + 1], loc[64];
	const char **resources = NULL;
	enum cs_err e;

	memset(&k, 0, sizeof k);
	if (c == NULL)
		return CS_EDB;
	/* Who asks: a [client.NAME], or a client-id URL under the [mcp] policy
	 * (fetched, checked and cached).  SECURITY: a client consentd cannot
	 * vouch for has no redirect URI consentd may send the browser to. */
	e = mcp_client_lookup(app, ar.client_id, req->now, &k, why, sizeof why);
	if (e != CS_OK)
		return client_refused(e) ? to_person(rep, 400, why) : e;
	if ((resources = mcp_resources(cfg)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	authz_check(&(struct authz_client){ .client_id = k.client_id,
	    .redirect_uris = k.redirect_uris, .nredirect_uris = k.nredirect_uris },
	    resources, &ar, &v);
	if (v.outcome == AUTHZ_TO_PERSON) {
		e = to_person(rep, 400, v.why);
		goto out;
	}
	if (v.outcome == AUTHZ_TO_CLIENT) {
		e = to_client(req, rep, v.redirect_uri, NULL, v.error, v.why, ar.state);
		goto out;
	}
	/* A private_key_jwt client whose keys are only at a jwks_uri could not
	 * redeem a code: /token does not fetch keys (docs/mcp.md).  Said now,
	 * before the person is asked, rather than after they agreed. */
	if (k.private_key_jwt && k.jwks == NULL) {
		e = to_client(req, rep, v.redirect_uri, NULL, "unauthorized_client", "the client's "
		    "keys are at a jwks_uri, which consentd does not fetch: its token requests could "
		    "not be authenticated; publish them inline (jwks)", ar.state);
		goto out;
	}
	if ((e = beyond_check(cfg, &ar, jkt, &error, more, sizeof more)) != CS_OK)
		goto out;
	if (error != NULL) {
		e = to_client(req, rep, v.redirect_uri, NULL, error, more, ar.state);
		goto out;
	}
	/* Kept as validated: the redirect URI is the one the answer goes to
	 * (the registered one when the request named none). */
	struct store_authz_request r = { .client_id = (char *)k.client_id,
		.redirect_uri = (char *)v.redirect_uri, .state = (char *)ar.state,
		.code_challenge = (char *)ar.code_challenge, .resource = (char *)ar.resource,
		.scope = ar.scope != NULL && ar.scope[0] != '\0' ? (char *)ar.scope : NULL,
		.dpop_jkt = (char *)jkt };
	if ((e = authz_flow_begin(c, &r, req->now, id)) != CS_OK ||
	    (e = str_fmt(loc, sizeof loc, "/authorize/%s", id)) != CS_OK)
		goto out;
	e = page_redirect(rep, loc);
out:
	free(resources);
	mcp_client_clear(&k);
	return e;
}

/* The person's step s, answered: the consent page, the client, or 404. */
static enum cs_err step_reply(const struct http_request *req, struct http_reply *rep,
    const struct authz_flow_step *s)
{
	char loc[128];
	enum cs_err e;
	switch (s->outcome) {
	case AUTHZ_STEP_CONSENT:
		if ((e = str_fmt(loc, sizeof loc, "/consent/%s", s->consent_request_id)) != CS_OK)
			return e;
		return page_redirect(rep, loc);
	case AUTHZ_STEP_ASK:
		if ((e = str_fmt(loc, sizeof loc, "/authorize/%s", s->req.id)) != CS_OK)
			return e;
		return page_redirect(rep, loc);
	case AUTHZ_STEP_CODE:
		return to_client(req, rep, s->req.redirect_uri, s->code, NULL, NULL, s->req.state);
	case AUTHZ_STEP_REFUSED:
		return to_client(req, rep, s->req.redirect_uri, NULL, s->error, s->why, s->req.state);
	case AUTHZ_STEP_UNKNOWN:
	case AUTHZ_STEP__MAX:
		break;
	}
	return not_found(rep);
}

/* The signed-in person as the flow names them (the router's session gate). */
static struct authz_flow_person person_of(const struct http_request *req)
{
	const struct session *s = req->auth.session;
	return (struct authz_flow_person){ .user_id = s->user_id, .issuer = s->issuer,
		.subject = s->subject, .actor = req->auth.actor, .now = req->now,
		.limits = req->app->limits };
}

/* One step of the flow (ask or finish) for the signed-in person, answered. */
typedef enum cs_err (*flow_step_fn)(struct store_conn *, const struct config *, const char *,
    const struct authz_flow_person *, struct authz_flow_step *);
static enum cs_err run_step(const struct http_request *req, struct http_reply *rep,
    flow_step_fn step)
{
	struct store_conn *c = store_conn(req->app->store);
	struct authz_flow_person p = person_of(req);
	struct authz_flow_step s;
	enum cs_err e;
	memset(&s, 0, sizeof s);
	if (c == NULL)
		return CS_EDB;
	if ((e = step(c, req->app->cfg, req->captures[0], &p, &s)) == CS_OK)
		e = step_reply(req, rep, &s);
	authz_flow_step_clear(&s);
	return e;
}

enum cs_err authorize_pages_ask(const struct http_request *req, struct http_reply *rep)
{
	return run_step(req, rep, authz_flow_ask);
}

enum cs_err authorize_pages_done(const struct http_request *req, struct http_reply *rep)
{
	return run_step(req, rep, authz_flow_finish);
}

enum cs_err authorize_pages_continue(const struct http_request *req, struct http_reply *rep,
    const char *request_id, bool *sent)
{
	char aid[STORE_AUTHZ_ID_LEN + 1], loc[64];
	enum cs_err e = authz_flow_from_consent(store_conn(req->app->store), request_id, req->now,
	    aid);
	*sent = false;
	if (e == CS_ENOENT)
		return CS_OK;
	if (e != CS_OK || (e = str_fmt(loc, sizeof loc, "/authorize/%s/done", aid)) != CS_OK)
		return e;
	*sent = true;
	if (req->method != HTTP_POST)
		return page_redirect(rep, loc);
	/* Right after a form (the decision, an API key): a page that moves on by
	 * itself, not a 303.  Chromium holds every redirect that follows a form
	 * submission to the page's CSP form-action ('self' and the configured
	 * providers), and the done step's answer goes to the client's redirect
	 * URI, which no configuration can list (a client-id URL's document names
	 * it). */
	json_t *ctx = json_pack("{s:s, s:s}", "title", "Going back to the app", "next", loc);
	e = page_render(rep, 200, "authorize_continue.html", ctx, req->auth.session);
	json_decref(ctx);
	return e;
}
