/* meta.c -- the public, unauthenticated endpoints: RFC 8414 metadata, the
 * JWKS, health and readiness, the stylesheet, the local-time script and the front page.
 * Must never reveal anything but public keys and public configuration (the
 * front page names the signed-in person only to that person's browser). */
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "app.h"
#include "config.h"
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

/* Appends each of names (NULL-ended) to the array m[key], made here. */
static enum cs_err meta_words(json_t *m, const char *key, const char *const *names)
{
	json_t *a = json_array();
	if (a == NULL || json_object_set_new(m, key, a) != 0)
		return CS_ENOMEM;
	for (size_t i = 0; names[i] != NULL; i++)
		if (json_array_append_new(a, json_string(names[i])) != 0)
			return CS_ENOMEM;
	return CS_OK;
}

/* The authentication methods at each endpoint that authenticates its caller
 * (RFC 8414 §2).  Introspection: the gateway's, exactly as [gateway]
 * token_endpoint_auth enables them.  The token and revocation endpoints:
 * those, and the MCP clients' (issue #30; a client revokes its own tokens):
 * `none` for a public client (its client_id, and PKCE at the code) and
 * `private_key_jwt` for one with keys ([client.NAME] token_endpoint_auth, or a
 * client-id metadata document's jwks/jwks_uri).  Each endpoint that takes
 * private_key_jwt lists the algorithms it verifies. */
static enum cs_err meta_client_auth(json_t *m, const struct config *cfg)
{
	static const char *const eps[] = { "token_endpoint", "introspection_endpoint",
		"revocation_endpoint", NULL };
	char name[96];
	for (size_t i = 0; eps[i] != NULL; i++) {
		bool mcp = i != 1;            /* the token and revocation endpoints */
		enum cs_err e = str_fmt(name, sizeof name, "%s_auth_methods_supported", eps[i]);
		if (e != CS_OK)
			return e;
		json_t *methods = json_array();
		if (methods == NULL || json_object_set_new(m, name, methods) != 0)
			return CS_ENOMEM;
		if (cfg->gateway_auth_basic &&
		    json_array_append_new(methods, json_string("client_secret_basic")) != 0)
			return CS_ENOMEM;
		if (mcp && json_array_append_new(methods, json_string("none")) != 0)
			return CS_ENOMEM;
		if (!cfg->gateway_auth_private_key_jwt && !mcp)
			continue;
		if (json_array_append_new(methods, json_string("private_key_jwt")) != 0)
			return CS_ENOMEM;
		if ((e = str_fmt(name, sizeof name, "%s_auth_signing_alg_values_supported",
		    eps[i])) != CS_OK)
			return e;
		if ((e = meta_words(m, name, jws_alg_names_accepted)) != CS_OK)
			return e;
	}
	return CS_OK;
}

/* What MCP clients need to sign a person in (issue #30; MCP 2026-07-28
 * /basic/authorization): the authorization endpoint (OAuth 2.1: the code
 * flow with PKCE S256 alone, RFC 9207's iss in every response), and Client ID
 * Metadata Documents unless [mcp] cimd_allow = none turned them off.  No
 * registration_endpoint: dynamic client registration is not offered. */
static enum cs_err meta_authorization(json_t *m, const struct config *cfg)
{
	static const char *const code[] = { "code", NULL };
	static const char *const s256[] = { "S256", NULL };
	char authz[512];
	enum cs_err e = str_fmt(authz, sizeof authz, "%s/authorize", cfg->public_url);
	if (e != CS_OK)
		return e;
	if (json_object_set_new(m, "authorization_endpoint", json_string(authz)) != 0 ||
	    json_object_set_new(m, "authorization_response_iss_parameter_supported",
	    json_true()) != 0)
		return CS_ENOMEM;
	if ((e = meta_words(m, "response_types_supported", code)) != CS_OK ||
	    (e = meta_words(m, "code_challenge_methods_supported", s256)) != CS_OK)
		return e;
	if (cfg->mcp_cimd_allow != CIMD_ALLOW_NONE &&
	    json_object_set_new(m, "client_id_metadata_document_supported", json_true()) != 0)
		return CS_ENOMEM;
	/* MCP's enterprise-managed authorization: the ID-JAG profile of the
	 * jwt-bearer grant, offered where an [enterprise.NAME] IdP can grant. */
	static const char *const idjag[] = { "urn:ietf:params:oauth:grant-profile:id-jag", NULL };
	if (cfg->nenterprises > 0 &&
	    (e = meta_words(m, "authorization_grant_profiles_supported", idjag)) != CS_OK)
		return e;
	return CS_OK;
}

enum cs_err meta_as_metadata(const struct http_request *req, struct http_reply *rep)
{
	/* RFC 8693 (the gateway's exchanges, flow A), RFC 6749 §6, OAuth 2.1's
	 * code (MCP clients) and RFC 7523's JWT bearer (an ID-JAG, MCP ext-auth). */
	static const char *const grants[] = { "urn:ietf:params:oauth:grant-type:token-exchange",
		"refresh_token", "authorization_code", "urn:ietf:params:oauth:grant-type:jwt-bearer",
		NULL };
	const struct config *cfg = req->app->cfg;
	const char *pub = cfg->public_url;
	char jwks[512], tok[512], intro[512], rev[512];
	enum cs_err e;
	/* A public_url too long for these is refused whole, never cut. */
	if ((e = str_fmt(jwks, sizeof jwks, "%s/.well-known/jwks.json", pub)) != CS_OK ||
	    (e = str_fmt(tok, sizeof tok, "%s/token", pub)) != CS_OK ||
	    (e = str_fmt(intro, sizeof intro, "%s/introspect", pub)) != CS_OK ||
	    (e = str_fmt(rev, sizeof rev, "%s/revoke", pub)) != CS_OK)
		return e;
	/* Only endpoints that exist are listed; later capabilities add theirs.
	 * Held against what consentd does by tests/integration/metadata.test.js:
	 * every value here works, and nothing that works is missing. */
	json_t *m = json_pack("{s:s, s:s, s:s, s:s, s:s, s:[s]}",
	    "issuer", pub,
	    "jwks_uri", jwks,
	    "token_endpoint", tok,
	    "introspection_endpoint", intro,
	    "revocation_endpoint", rev,
	    /* RFC 9396 at the downstream-token exchange (flow F). */
	    "authorization_details_types_supported", "agent_action");
	if (m == NULL)
		return CS_ENOMEM;
	/* dpop_signing_alg_values_supported: RFC 9449 §5.1, tokens bound to the
	 * caller's key on request. */
	if ((e = meta_words(m, "grant_types_supported", grants)) != CS_OK ||
	    (e = meta_words(m, "dpop_signing_alg_values_supported", jws_alg_names_accepted)) != CS_OK ||
	    (e = meta_authorization(m, cfg)) != CS_OK ||
	    (e = meta_client_auth(m, cfg)) != CS_OK) {
		json_decref(m);
		return e;
	}
	return reply_cached(rep, 200, m, 300);
}

/* RFC 9728 protected resource metadata of the MCP endpoint [mcp.NAME], at
 * the path RFC 9728 §3.1 derives from its URI (public_url/mcp/NAME):
 * resource exactly that URI (§3.3; the RFC 8707 resource clients ask tokens
 * for), consentd as its one authorization server, the scopes of the resource
 * behind it, bearer tokens in the Authorization header only.  404 for a NAME
 * that is no [mcp.NAME]. */
enum cs_err meta_protected_resource(const struct http_request *req, struct http_reply *rep)
{
	const struct config *cfg = req->app->cfg;
	const struct config_mcp_endpoint *ep = req->ncaptures == 1 ?
	    config_mcp_endpoint(cfg, req->captures[0]) : NULL;
	const struct config_resource *r = ep != NULL ? config_resource(cfg, ep->resource) : NULL;
	json_t *m = NULL, *scopes = NULL;
	if (ep == NULL || ep->uri == NULL || r == NULL)
		return reply_error(rep, req->route->kind, 404, "not_found",
		    "There is no such MCP endpoint here.");
	m = json_pack("{s:s, s:[s], s:[], s:[s], s:s}",
	    "resource", ep->uri,
	    "authorization_servers", cfg->public_url,
	    "scopes_supported",
	    "bearer_methods_supported", "header",
	    "resource_name", r->name != NULL ? r->name : r->id);
	if (m == NULL || (scopes = json_object_get(m, "scopes_supported")) == NULL)
		goto oom;
	for (size_t i = 0; i < cfg->nscopes; i++)
		if (strcmp(cfg->scopes[i].resource, r->id) == 0 &&
		    json_array_append_new(scopes, json_string(cfg->scopes[i].name)) != 0)
			goto oom;
	return reply_cached(rep, 200, m, 300);
oom:
	json_decref(m);
	return CS_ENOMEM;
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
	json_t *ctx;
	enum cs_err e;

	signed_out = !have && state != NULL;
	via_idp = signed_out && strcmp(state, "signed-out") == 0;
	ctx = json_pack("{s:s, s:s, s:b, s:s?, s:b, s:b, s:b, s:s}",
	    "title", signed_out ? "You are signed out" : "Consent for AI agents", "public_url", cfg->public_url,
	    "signed_in", have, "who", have ? (s->name ? s->name : s->subject) : NULL,
	    "signed_out", signed_out, "via_idp", via_idp,
	    "idp_has_logout", m != NULL && m->end_session_endpoint != NULL,
	    "idp", cfg->oidc_issuer);
	e = page_render(rep, 200, "index.html", ctx, s);
	json_decref(ctx);
	return e;
}
