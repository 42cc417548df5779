/* grant_api.c -- the grant the gateway presents, checked once for every
 * route that takes one (/token's provider-token exchange, /proxy): validated,
 * its DPoP proof, its resource.  grant.c validates, dpop.c checks the proof,
 * exchange.c says which resource a grant reaches; this file reads and answers,
 * and must never let a request through without all of them. */
#include <stdlib.h>
#include <string.h>
#include "agent.h"
#include "app.h"
#include "buf.h"
#include "dpop_api.h"
#include "exchange.h"
#include "grant.h"
#include "grant_api.h"

enum cs_err grant_api_invalid_token(struct http_reply *rep, const char *desc,
    enum grant_api_challenge ch)
{
	enum cs_err e = reply_oauth_error(rep, 401, "invalid_token", desc);
	if (e == CS_OK && (ch & GRANT_API_CHALLENGE_BEARER))
		e = reply_header(rep, "WWW-Authenticate", "Bearer error=\"invalid_token\"");
	if (e == CS_OK && (ch & GRANT_API_CHALLENGE_DPOP))
		e = dpop_api_challenge(rep, "invalid_token");
	return e;
}

/* The access log names the grant's agent and resource (configured ones only). */
static void log_grant(struct http_reply *rep, const struct config *cfg, const struct consent *k)
{
	const struct config_resource *r = config_resource(cfg, k->resource);
	struct agent_view a;
	rep->log.resource = r != NULL ? r->id : NULL;
	rep->log.agent = agent_resolve(cfg, k->agent, &a) ? a.id : NULL;
}

/* A grant that did not validate: RFC 8693 §2.2.2 at /token (a bad subject
 * token is invalid_request), RFC 6750 §3.1 at a resource. */
static enum cs_err refuse_invalid(struct http_reply *rep, const struct grant_api_presented *p,
    const char *why)
{
	char desc[400];
	enum cs_err e;
	if (p->dialect == GRANT_API_AT_RESOURCE)
		return grant_api_invalid_token(rep, why, p->scheme == GRANT_API_DPOP ?
		    GRANT_API_CHALLENGE_DPOP : GRANT_API_CHALLENGE_BEARER);
	if ((e = str_fmt(desc, sizeof desc, "subject token: %s", why)) != CS_OK)
		return e;
	return reply_oauth_error(rep, 400, "invalid_request", desc);
}

/* SECURITY: RFC 9449 §7.2: a DPoP-bound grant is no bearer token, not even
 * in form; and a DPoP scheme names a binding the grant must have.  true:
 * the scheme fits (or none was used). */
static bool scheme_fits(struct http_reply *rep, const struct grant_api_presented *p,
    const struct grant_check *gc, enum cs_err *e)
{
	bool bound = json_object_get(json_object_get(gc->claims, "cnf"), "jkt") != NULL;
	*e = CS_OK;
	if (p->scheme == GRANT_API_BEARER && bound) {
		*e = grant_api_invalid_token(rep, "the grant is DPoP-bound: present it as "
		    "Authorization: DPoP <grant> with a DPoP proof, not as a Bearer token",
		    GRANT_API_CHALLENGE_DPOP);
		return false;
	}
	if (p->scheme == GRANT_API_DPOP && !bound) {
		*e = grant_api_invalid_token(rep, "the grant is not bound to a DPoP key: present it as "
		    "Authorization: Bearer <grant>", GRANT_API_CHALLENGE_BEARER);
		return false;
	}
	return true;
}

/* The chain after the presentation; *ok true when gc passed every check. */
static enum cs_err check(const struct http_request *req, struct http_reply *rep,
    struct store_conn *c, const struct grant_api_presented *p, struct grant_check *gc, bool *ok)
{
	struct app *app = req->app;
	const bool at_resource = p->dialect == GRANT_API_AT_RESOURCE;
	enum cs_err e;
	*ok = false;
	/* SECURITY: the grant is checked only with consentd's own keys and typ
	 * at+jwt; an IdP token, a revoked or expired grant all fail here. */
	const struct keyring *kr = app_keys_get(app);
	e = grant_validate(c, app->cfg, kr, p->grant, req->now, gc);
	app_keys_put(app);
	if (e != CS_OK)
		return e;
	if (!gc->valid)
		return refuse_invalid(rep, p, gc->why != NULL ? gc->why : "not a consentd grant");
	if (at_resource) {
		log_grant(rep, app->cfg, &gc->k);
		if (!scheme_fits(rep, p, gc, &e))
			return e;
	}
	/* SECURITY: a DPoP-bound grant is refused without a proof by its key for
	 * this method, URL and grant (RFC 9449 §7). */
	if (!dpop_api_check_grant(req, rep, gc->claims, p->grant, at_resource ? 401 : 400))
		return CS_OK;
	log_grant(rep, app->cfg, &gc->k);
	/* SECURITY: a grant reaches only its own resource. */
	if (!exchange_grant_for(app->cfg, &gc->k, p->resource_id, p->resource_uri)) {
		if (at_resource)
			return reply_oauth_error(rep, 403, "access_denied", "the grant is for another resource");
		return reply_oauth_error(rep, 400, "invalid_target", "the grant is for another resource");
	}
	*ok = true;
	return CS_OK;
}

enum cs_err grant_api_gate(struct http_request *req, struct http_reply *rep,
    grant_api_presenter how, bool *ok)
{
	struct grant_api_presented p;
	struct grant_check *gc;
	struct store_conn *c;
	enum cs_err e;
	*ok = false;
	memset(&p, 0, sizeof p);
	if ((e = how(req, rep, &p, ok)) != CS_OK || !*ok)
		return e;
	if (p.grant == NULL)
		return CS_OK;            /* nothing presented: *ok stays true, no grant */
	*ok = false;
	if ((c = store_conn(req->app->store)) == NULL)
		return CS_EDB;
	if ((gc = calloc(1, sizeof *gc)) == NULL)
		return CS_ENOMEM;
	e = check(req, rep, c, &p, gc, ok);
	if (e != CS_OK || !*ok) {
		*ok = false;
		grant_check_clear(gc);
		free(gc);
		return e;
	}
	req->auth.grant = gc;
	return CS_OK;
}
