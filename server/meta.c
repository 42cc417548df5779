/* meta.c -- the public, unauthenticated endpoints: RFC 8414 metadata, the
 * JWKS, health and readiness, the stylesheet, the local-time script and the front page.
 * Must never reveal anything but public keys and public configuration (the
 * front page names the signed-in person only to that person's browser). */
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "app.h"
#include "audit_head.h"
#include "buf.h"
#include "embed.h"
#include "form.h"
#include "jws.h"
#include "page_reply.h"
#include "meta.h"
#include "oidc.h"
#include "session.h"
#include "template.h"

/* A JSON reply that caches for max_age seconds (< 0: no-store). */
static enum cs_err reply_cached(struct http_reply *rep, int status, json_t *v, int max_age)
{
	enum cs_err e = reply_json_value(rep, status, v);
	rep->cache_max_age = max_age;
	return e;
}

/* The gateway's authentication methods, exactly as [gateway] token_endpoint_auth
 * enables them, at each endpoint that authenticates it (RFC 8414 §2). */
static enum cs_err meta_client_auth(json_t *m, const struct config *cfg)
{
	static const char *const eps[] = { "token_endpoint", "introspection_endpoint",
		"revocation_endpoint", NULL };
	char name[96];
	for (size_t i = 0; eps[i] != NULL; i++) {
		enum cs_err e = str_fmt(name, sizeof name, "%s_auth_methods_supported", eps[i]);
		if (e != CS_OK)
			return e;
		json_t *methods = json_array();
		if (methods == NULL || json_object_set_new(m, name, methods) != 0)
			return CS_ENOMEM;
		if (cfg->gateway_auth_basic &&
		    json_array_append_new(methods, json_string("client_secret_basic")) != 0)
			return CS_ENOMEM;
		if (!cfg->gateway_auth_private_key_jwt)
			continue;
		if (json_array_append_new(methods, json_string("private_key_jwt")) != 0)
			return CS_ENOMEM;
		if ((e = str_fmt(name, sizeof name, "%s_auth_signing_alg_values_supported",
		    eps[i])) != CS_OK)
			return e;
		json_t *algs = json_array();
		if (algs == NULL || json_object_set_new(m, name, algs) != 0)
			return CS_ENOMEM;
		for (size_t a = 0; jws_alg_names_accepted[a] != NULL; a++)
			if (json_array_append_new(algs, json_string(jws_alg_names_accepted[a])) != 0)
				return CS_ENOMEM;
	}
	return CS_OK;
}

enum cs_err meta_as_metadata(const struct http_request *req, struct http_reply *rep)
{
	const char *pub = req->app->cfg->public_url;
	char jwks[512], tok[512], intro[512], rev[512];
	enum cs_err e;
	/* A public_url too long for these is refused whole, never cut. */
	if ((e = str_fmt(jwks, sizeof jwks, "%s/.well-known/jwks.json", pub)) != CS_OK ||
	    (e = str_fmt(tok, sizeof tok, "%s/token", pub)) != CS_OK ||
	    (e = str_fmt(intro, sizeof intro, "%s/introspect", pub)) != CS_OK ||
	    (e = str_fmt(rev, sizeof rev, "%s/revoke", pub)) != CS_OK)
		return e;
	/* Only endpoints that exist are listed; later capabilities add theirs.
	 * consentd has no authorization endpoint of its own: no response types. */
	/* Held against what consentd does by tests/integration/metadata.test.js:
	 * every value here works, and nothing that works is missing. */
	json_t *m = json_pack("{s:s, s:s, s:[], s:s, s:s, s:s, s:[s,s], s:[s]}",
	    "issuer", pub,
	    "jwks_uri", jwks,
	    "response_types_supported",
	    "token_endpoint", tok,
	    "introspection_endpoint", intro,
	    "revocation_endpoint", rev,
	    "grant_types_supported", "urn:ietf:params:oauth:grant-type:token-exchange", "refresh_token",
	    /* RFC 9396 at the downstream-token exchange (flow F). */
	    "authorization_details_types_supported", "agent_action");
	/* RFC 9449 §5.1: grants bound to the gateway's key on request. */
	json_t *dpop_algs = json_array();
	if (m == NULL || json_object_set_new(m, "dpop_signing_alg_values_supported", dpop_algs) != 0) {
		json_decref(m);
		return CS_ENOMEM;
	}
	for (size_t a = 0; jws_alg_names_accepted[a] != NULL; a++)
		if (json_array_append_new(dpop_algs, json_string(jws_alg_names_accepted[a])) != 0) {
			json_decref(m);
			return CS_ENOMEM;
		}
	if (m == NULL || meta_client_auth(m, req->app->cfg) != CS_OK) {
		json_decref(m);
		return CS_ENOMEM;
	}
	return reply_cached(rep, 200, m, 300);
}

enum cs_err meta_jwks(const struct http_request *req, struct http_reply *rep)
{
	char *json = NULL;
	const struct keyring *kr = app_keys_get(req->app);
	enum cs_err e = keyring_jwks(kr, &json);
	app_keys_put(req->app);
	if (e != CS_OK)
		return e;
	e = reply_json(rep, 200, json);
	free(json);
	rep->content_type = "application/jwk-set+json";
	rep->cache_max_age = 300;
	return e;
}

enum cs_err meta_healthz(const struct http_request *req, struct http_reply *rep)
{
	(void)req;
	return reply_json(rep, 200, "{\"status\":\"ok\"}");
}

enum cs_err meta_readyz(const struct http_request *req, struct http_reply *rep)
{
	struct store_conn *c = store_conn(req->app->store);
	int db_ok = c != NULL && store_ping(c) == CS_OK;
	const struct keyring *kr = app_keys_get(req->app);
	int keys_ok = kr != NULL && keyring_signing_kid(kr) != NULL;
	app_keys_put(req->app);
	int idp_ok = app_idp_ready(req->app);
	/* SECURITY: a database behind the audit heads published was cut off or
	 * rewound; it stays unready until an operator has looked (docs/reference.md). */
	int audit_ok = !audit_head_behind();
	int ok = db_ok && keys_ok && idp_ok && audit_ok;
	json_t *v = json_pack("{s:s, s:{s:b, s:b, s:b, s:b}}", "status", ok ? "ready" : "unready",
	    "checks", "database", db_ok, "signing_key", keys_ok, "identity_provider", idp_ok,
	    "audit_head", audit_ok);
	return reply_cached(rep, ok ? 200 : 503, v, -1);
}

/* One of the compiled-in files of templates/, served as it is, cached an hour. */
static enum cs_err static_file(struct http_reply *rep, const char *name, const char *type)
{
	for (const struct embedded_file *f = embedded_templates; f->name; f++) {
		if (strcmp(f->name, name) == 0) {
			rep->status = 200;
			rep->content_type = type;
			rep->cache_max_age = 3600;
			return buf_append(&rep->body, f->data, f->len);
		}
	}
	return CS_ENOENT;
}

enum cs_err meta_stylesheet(const struct http_request *req, struct http_reply *rep)
{
	(void)req;
	return static_file(rep, "consentd.css", "text/css; charset=utf-8");
}

enum cs_err meta_local_time_script(const struct http_request *req, struct http_reply *rep)
{
	(void)req;
	return static_file(rep, "local-time.js", "text/javascript; charset=utf-8");
}

/* The pages' icon (head.html links it; /favicon.ico too, which browsers ask for
 * by themselves): a small SVG, so that no page load logs a 404. */
enum cs_err meta_favicon(const struct http_request *req, struct http_reply *rep)
{
	(void)req;
	return static_file(rep, "favicon.svg", "image/svg+xml");
}

/* The front page: a way in ("Sign in", or "Your consents" with a session),
 * and after logout (`state`, one of two fixed words, routes.c) what ended:
 * "signed-out" comes back through the IdP's end_session_endpoint,
 * "signed-out-here" from a logout that did not go there.  A session present
 * again means the person signed in since: no sign-out is said. */
enum cs_err meta_index(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	const struct oidc_meta *m = oidc_meta(app->idp);
	const char *state = http_arg_str(req, META_INDEX_STATE);
	/* The router's optional session gate: NULL when nobody is signed in. */
	const struct session *s = req->auth.session;
	bool have = s != NULL, signed_out = false, via_idp = false;
	json_t *ctx = NULL;
	enum cs_err e = CS_OK;

	signed_out = !have && state != NULL;
	via_idp = signed_out && strcmp(state, "signed-out") == 0;
	ctx = json_pack("{s:s, s:s, s:b, s:s?, s:b, s:b, s:b, s:s}",
	    "title", signed_out ? "You are signed out" : "Consent for AI agents", "public_url", cfg->public_url,
	    "signed_in", have, "who", have ? (s->name ? s->name : s->subject) : NULL,
	    "signed_out", signed_out, "via_idp", via_idp,
	    "idp_has_logout", m != NULL && m->end_session_endpoint != NULL,
	    "idp", cfg->oidc_issuer);
	if (ctx == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	e = page_render(rep, 200, "index.html", ctx, s);
out:
	json_decref(ctx);
	return e;
}
