/* token.c -- the gateway's OAuth endpoints.  Every answer is RFC 6749 JSON with
 * Cache-Control: no-store.  The subject token is validated only against the
 * upstream IdP; a token consentd issued is never accepted as a subject. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include "app.h"
#include "audit.h"
#include "client_auth.h"
#include "consent.h"
#include "dpop.h"
#include "form.h"
#include "grant.h"
#include "jwt.h"
#include "oidc.h"
#include "session.h"
#include "approval.h"
#include "jcs.h"
#include "token.h"
#include "vault.h"

/* --- client authentication ----------------------------------------------- */

bool basic_credentials(const char *hdr, char **id, char **secret)
{
	unsigned char *dec = NULL;
	size_t n, len;
	bool ok = false;
	char *colon;
	*id = *secret = NULL;
	if (hdr == NULL || strncasecmp(hdr, "Basic ", 6) != 0)
		return false;
	hdr += 6;
	while (*hdr == ' ')
		hdr++;
	n = strlen(hdr);
	if (n == 0 || n > 2048 || n % 4 != 0)
		return false;
	dec = malloc(n / 4 * 3 + 1);
	if (dec == NULL)
		return false;
	int r = EVP_DecodeBlock(dec, (const unsigned char *)hdr, (int)n);
	if (r < 0)
		goto out;
	len = (size_t)r;
	if (n >= 1 && hdr[n - 1] == '=')
		len--;
	if (n >= 2 && hdr[n - 2] == '=')
		len--;
	dec[len] = '\0';
	if (memchr(dec, '\0', len) != NULL || (colon = strchr((char *)dec, ':')) == NULL)
		goto out;
	*colon = '\0';
	/* RFC 6749 §2.3.1: both parts are form-urlencoded before Base64. */
	if (pct_decode((char *)dec, strlen((char *)dec), 1, id, NULL) != CS_OK)
		goto out;
	if (pct_decode(colon + 1, strlen(colon + 1), 1, secret, NULL) != CS_OK) {
		free(*id);
		*id = NULL;
		goto out;
	}
	ok = true;
out:
	OPENSSL_cleanse(dec, n / 4 * 3 + 1);
	free(dec);
	return ok;
}

bool gateway_authenticate(const struct http_request *req, struct http_reply *rep)
{
	return client_auth_gateway(req, rep);
}

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

void token_consent_description(const struct consent_answer *a, char *out, size_t outlen)
{
	static const char kept[] = "; the pending request keeps the reason the person sees (a new "
	    "reason is shown only with new scopes, or in the next request)";
	char when[32];
	switch (a->outcome) {
	case CONSENT_REQUIRED:
		if (a->reconnect)
			snprintf(out, outlen, "the consent's provider connection must be made again: "
			    "send the person to consent_uri, then poll every %lld s",
			    (long long)a->interval);
		else if (a->merged)
			snprintf(out, outlen, "the request was updated: the pending request now also asks "
			    "for the new scopes; the person decides on it at consent_uri (poll every %lld s)",
			    (long long)a->interval);
		else
			snprintf(out, outlen, "the person has not consented: send them to consent_uri, "
			    "then poll every %lld s", (long long)a->interval);
		break;
	case CONSENT_PENDING:
		snprintf(out, outlen, "the person has not decided yet; poll again in %lld s%s",
		    (long long)a->interval, a->reason_kept ? kept : "");
		break;
	case CONSENT_SLOW_DOWN:
		snprintf(out, outlen, "polled faster than the interval: wait %lld s between calls "
		    "from now on%s", (long long)a->interval, a->reason_kept ? kept : "");
		break;
	case CONSENT_DENIED:
		utc_time(a->denied_until, when, sizeof when);
		snprintf(out, outlen, "the person denied this request; a new request can be made from "
		    "%s", when[0] ? when : "the end of [consent] deny_cooldown");
		break;
	case CONSENT_EXPIRED:
		snprintf(out, outlen, "the consent request expired before the person decided; the next "
		    "call starts a new one");
		break;
	case CONSENT_TOO_MANY:
		snprintf(out, outlen, "this person has too many pending requests; retry after %lld s",
		    (long long)(a->retry_after > 0 ? a->retry_after : 1));
		break;
	default:
		snprintf(out, outlen, "the consent was found");
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

static bool agent_allows(const struct config_agent *a, const char *resource, const char *scope)
{
	size_t rl = strlen(resource);
	for (size_t i = 0; i < a->nallow; i++) {
		const char *e = a->allow[i];
		if (strncmp(e, resource, rl) == 0 && e[rl] == ':' && strcmp(e + rl + 1, scope) == 0)
			return true;
	}
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
    const struct consent_answer *a, int with_uri)
{
	char uri[600], desc[300];
	token_consent_description(a, desc, sizeof desc);
	json_t *v = json_pack("{s:s, s:s}", "error", error, "error_description", desc);
	if (v == NULL)
		return CS_ENOMEM;
	reply_log_error(rep, error, desc);
	if (a->request_id) {
		json_object_set_new(v, "consent_request_id", json_string(a->request_id));
		if (with_uri) {
			snprintf(uri, sizeof uri, "%s/consent/%s", cfg->public_url, a->request_id);
			json_object_set_new(v, "consent_uri", json_string(uri));
		}
		json_object_set_new(v, "expires_in", json_integer(a->expires_in));
		json_object_set_new(v, "interval", json_integer(a->interval));
	}
	return reply_json_value(rep, 400, v);
}

/* The accepted subject token types, for a description: "id_token, jwt". */
static void types_accepted(const struct config *cfg, char *out, size_t outlen)
{
	size_t used = 0;
	out[0] = '\0';
	for (size_t i = 0; i < cfg->nsubject_token_types && used < outlen; i++) {
		int n = snprintf(out + used, outlen - used, "%s%s", i ? ", " : "",
		    cfg->subject_token_types[i]);
		if (n < 0)
			break;
		used += (size_t)n;
	}
}

/* Whether t verifies as a token consentd signed: then it was sent as a subject
 * by mistake (or on purpose), which the description says. */
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

static enum cs_err exchange_for_grant(const struct http_request *req, struct http_reply *rep,
    const char *jkt)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	const char *stt = form_get(&req->params, "subject_token_type");
	const char *st = form_get(&req->params, "subject_token");
	const char *aud = form_get(&req->params, "audience");
	const char *res = form_get(&req->params, "resource");
	const char *scope = form_get(&req->params, "scope");
	const char *agent_id = form_get(&req->params, "agent_id");
	const char *reason = form_get(&req->params, "reason");
	const struct config_resource *r = NULL;
	const struct config_agent *agent;
	struct scope_set want = { .n = 0 };
	struct consent_answer ans;
	struct grant_response g;
	struct oidc_expect ex;
	json_t *claims = NULL;
	char why[128], actor[300], desc[400], types[64];
	struct store_conn *c = store_conn(app->store);
	enum cs_err e = CS_OK;

	memset(&ans, 0, sizeof ans);
	memset(&g, 0, sizeof g);
	if (c == NULL)
		return CS_EDB;
	if (st == NULL || stt == NULL) {
		e = reply_oauth_error(rep, 400, "invalid_request", st == NULL ?
		    "subject_token is missing" : "subject_token_type is missing");
		goto out;
	}
	if (!subject_type_allowed(cfg, stt)) {
		types_accepted(cfg, types, sizeof types);
		snprintf(desc, sizeof desc, "subject_token_type is not one this consentd accepts "
		    "(urn:ietf:params:oauth:token-type: %s)", types);
		e = reply_oauth_error(rep, 400, "invalid_request", desc);
		goto out;
	}
	if (oidc_meta(app->idp) == NULL) {
		e = reply_oauth_error(rep, 503, "temporarily_unavailable",
		    "consentd has not reached its IdP yet, so it cannot check the subject token; retry");
		goto out;
	}
	/* SECURITY: only the upstream IdP's keys, issuer and audiences count; a
	 * consentd grant (our iss, our keys) can never pass this. */
	memset(&ex, 0, sizeof ex);
	ex.audiences = (const char *const *)cfg->subject_audiences;
	ex.naudiences = cfg->nsubject_audiences;
	ex.now = req->now;
	ex.max_age = -1;
	if (oidc_validate(app->idp, st, &ex, &claims, why, sizeof why) != CS_OK) {
		/* RFC 8693 §2.2.2: invalid_request, naming the check that failed. */
		if (is_own_grant(app, st))
			snprintf(desc, sizeof desc, "the subject token is a consentd grant; send the "
			    "person's token from the IdP");
		else
			snprintf(desc, sizeof desc, "subject token %s", why);
		e = reply_oauth_error(rep, 400, "invalid_request", desc);
		goto out;
	}
	json_t *sub = json_object_get(claims, cfg->oidc_subject_claim);
	if (!json_is_string(sub) || json_string_length(sub) == 0 || json_string_length(sub) > 255) {
		snprintf(desc, sizeof desc, "the subject token has no usable %s claim (a string of 1 to "
		    "255 bytes; [oidc] subject_claim)", cfg->oidc_subject_claim);
		e = reply_oauth_error(rep, 400, "invalid_request", desc);
		goto out;
	}
	/* The resource: by name (audience) or by URI (resource); both must agree. */
	if (aud == NULL && res == NULL) {
		e = reply_oauth_error(rep, 400, "invalid_target",
		    "the resource is missing: name it with audience or resource");
		goto out;
	}
	if (aud != NULL && (r = config_resource(cfg, aud)) == NULL) {
		e = reply_oauth_error(rep, 400, "invalid_target", "audience names no configured resource");
		goto out;
	}
	if (res != NULL) {
		const struct config_resource *r2 = config_resource_by_uri(cfg, res);
		if (r2 == NULL || (r != NULL && r2 != r)) {
			e = reply_oauth_error(rep, 400, "invalid_target", r2 == NULL ?
			    "resource is not the URI of a configured resource" :
			    "audience and resource name different resources");
			goto out;
		}
		r = r2;
	}
	rep->log.resource = r->id;
	if (agent_id == NULL) {
		e = reply_oauth_error(rep, 400, "invalid_request", "agent_id is missing");
		goto out;
	}
	if ((agent = config_agent(cfg, agent_id)) == NULL) {
		e = reply_oauth_error(rep, 400, "invalid_request", "agent_id names no configured agent");
		goto out;
	}
	rep->log.agent = agent->id;
	if (scope == NULL) {
		e = reply_oauth_error(rep, 400, "invalid_request", "scope is missing");
		goto out;
	}
	if (scope_set_parse(scope, &want) != CS_OK || want.n == 0) {
		snprintf(desc, sizeof desc, "scope is malformed: at most %d distinct scopes of at most %d "
		    "characters, separated by single spaces", CONSENT_MAX_SCOPES, CONSENT_MAX_SCOPE_LEN);
		e = reply_oauth_error(rep, 400, "invalid_scope", desc);
		goto out;
	}
	for (size_t i = 0; i < want.n; i++) {
		/* SECURITY: requested ⊆ configured ∩ agent-allowed (invariant 7).  The
		 * scope is named: scope_set_parse let only printable ASCII through. */
		if (config_scope(cfg, r->id, want.v[i]) == NULL) {
			snprintf(desc, sizeof desc, "scope %s is not configured for resource %s",
			    want.v[i], r->id);
			e = reply_oauth_error(rep, 400, "invalid_scope", desc);
			goto out;
		}
		if (!agent_allows(agent, r->id, want.v[i])) {
			snprintf(desc, sizeof desc, "agent %s may not ask for scope %s of resource %s "
			    "([agent.%s] allow)", agent->id, want.v[i], r->id, agent->id);
			e = reply_oauth_error(rep, 400, "invalid_scope", desc);
			goto out;
		}
	}
	if (token_reason_problem(reason) != NULL) {
		e = reply_oauth_error(rep, 400, "invalid_request", TOKEN_REASON_RULE);
		goto out;
	}
	snprintf(actor, sizeof actor, "gateway:%s", cfg->gateway_id);
	e = consent_exchange(c, cfg, oidc_meta(app->idp)->issuer, json_string_value(sub), agent->id,
	    r->id, &want, reason && *reason ? reason : NULL, actor, req->now, &ans);
	if (e == CS_ETOOBIG) {
		snprintf(desc, sizeof desc, "together with the scopes already asked for, this is more "
		    "than %d scopes", CONSENT_MAX_SCOPES);
		e = reply_oauth_error(rep, 400, "invalid_scope", desc);
		goto out;
	}
	if (e != CS_OK)
		goto out;
	switch (ans.outcome) {
	case CONSENT_GRANT: {
		const struct keyring *kr = app_keys_get(app);
		bool offline = ans.live.offline && agent->offline;
		e = grant_issue_bound(c, cfg, kr, &ans.live, &ans.grant_scopes, offline, jkt, actor,
		    req->now, &g);
		app_keys_put(app);
		if (e == CS_OK)
			e = grant_reply(rep, &g, jkt);
		else if (e == CS_EPERM || e == CS_EINVAL)   /* revoked or expired meanwhile */
			e = reply_oauth_error(rep, 400, "consent_required",
			    "the consent ended just now (revoked or expired); ask again");
		break;
	}
	case CONSENT_REQUIRED:
		e = pending_reply(rep, cfg, "consent_required", &ans, 1);
		break;
	case CONSENT_PENDING:
		e = pending_reply(rep, cfg, "authorization_pending", &ans, 1);
		break;
	case CONSENT_SLOW_DOWN:
		e = pending_reply(rep, cfg, "slow_down", &ans, 1);
		break;
	case CONSENT_DENIED:
		token_consent_description(&ans, desc, sizeof desc);
		e = reply_oauth_error(rep, 400, "access_denied", desc);
		break;
	case CONSENT_EXPIRED:
		token_consent_description(&ans, desc, sizeof desc);
		e = reply_oauth_error(rep, 400, "expired_token", desc);
		break;
	case CONSENT_TOO_MANY: {
		char ra[32];
		snprintf(ra, sizeof ra, "%lld", (long long)(ans.retry_after > 0 ? ans.retry_after : 1));
		token_consent_description(&ans, desc, sizeof desc);
		e = reply_oauth_error(rep, 429, "too_many_pending_requests", desc);
		if (e == CS_OK)
			e = reply_header(rep, "Retry-After", ra);
		break;
	}
	default:
		e = CS_EINVAL;
	}
out:
	json_decref(claims);
	scope_set_clear(&want);
	consent_answer_clear(&ans);
	grant_response_clear(&g);
	return e;
}

static enum cs_err refresh(const struct http_request *req, struct http_reply *rep, const char *jkt)
{
	bool wrong_key = false;
	struct app *app = req->app;
	const char *rt = form_get(&req->params, "refresh_token");
	const char *scope = form_get(&req->params, "scope");
	struct scope_set narrow = { .n = 0 };
	struct grant_response g;
	struct store_conn *c = store_conn(app->store);
	char actor[300];
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
	snprintf(actor, sizeof actor, "gateway:%s", app->cfg->gateway_id);
	const struct keyring *kr = app_keys_get(app);
	e = grant_refresh_bound(c, app->cfg, kr, rt, scope ? &narrow : NULL, jkt, &wrong_key, actor,
	    req->now, &g);
	app_keys_put(app);
	if (e == CS_OK) {
		e = grant_reply(rep, &g, jkt);
	} else if (e == CS_EPERM && wrong_key) {
		dpop_refuse(req, rep, 400, jkt == NULL ?
		    "the refresh token is DPoP-bound: a DPoP proof is required" :
		    "the refresh token is bound to another key");
		e = CS_OK;
	} else if (e == CS_EPERM)
		e = reply_oauth_error(rep, 400, "invalid_grant", "the refresh token is unknown, used, "
		    "revoked or expired, or its consent ended");
	else if (e == CS_EINVAL)
		e = reply_oauth_error(rep, 400, "invalid_scope", "scope is outside the consent");
out:
	scope_set_clear(&narrow);
	grant_response_clear(&g);
	return e;
}

static enum cs_err audit_refusal(struct store_conn *c, const char *actor, const struct consent *k,
    const char *action, const char *why, int64_t now)
{
	char detail[300];
	struct audit_entry a;
	enum cs_err e;
	snprintf(detail, sizeof detail, "action=%s; %s", action ? action : "-", why);
	memset(&a, 0, sizeof a);
	a.ts = now;
	a.actor = actor;
	a.action = "vault.release.refused";
	a.subject = k ? k->subject : NULL;
	a.agent = k ? k->agent : NULL;
	a.resource = k ? k->resource : NULL;
	a.consent_id = k ? k->id : NULL;
	a.outcome = "refused";
	a.detail = detail;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if ((e = audit_append(c, &a)) != CS_OK || (e = store_commit(c)) != CS_OK)
		store_rollback(c);
	return e;
}

/* Flow D: a provider access token for one action, in exchange for a grant. */
static enum cs_err exchange_for_provider_token(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	const struct config *cfg = app->cfg;
	const char *st = form_get(&req->params, "subject_token");
	const char *stt = form_get(&req->params, "subject_token_type");
	const char *action = form_get(&req->params, "action");
	struct store_conn *c = store_conn(app->store);
	struct consent k;
	struct vault_release out;
	struct scope_set gs = { .n = 0 };
	struct approval_answer aa;
	json_t *claims = NULL, *params = NULL;
	char actor[300], digest[APPROVAL_DIGEST_LEN + 1] = "", desc[200];
	enum cs_err e;

	memset(&k, 0, sizeof k);
	memset(&out, 0, sizeof out);
	memset(&aa, 0, sizeof aa);
	if (c == NULL)
		return CS_EDB;
	snprintf(actor, sizeof actor, "gateway:%s", cfg->gateway_id);
	if (st == NULL) {
		e = reply_oauth_error(rep, 400, "invalid_request", "subject_token (the grant) is missing");
		goto out;
	}
	if (stt == NULL || strcmp(stt, URN_TT_ACCESS_TOKEN) != 0) {
		e = reply_oauth_error(rep, 400, "invalid_request", "subject_token_type must be "
		    "urn:ietf:params:oauth:token-type:access_token (the subject token is a grant)");
		goto out;
	}
	if (action == NULL) {
		e = reply_oauth_error(rep, 400, "invalid_request", "action is missing");
		goto out;
	}
	/* SECURITY: the grant is checked only with consentd's own keys and typ
	 * at+jwt; an IdP token, a revoked or expired grant all fail here. */
	const struct keyring *kr = app_keys_get(app);
	const char *gwhy = NULL;
	e = grant_validate(c, cfg, kr, st, req->now, &claims, &k, &gwhy);
	app_keys_put(app);
	if (e == CS_EPERM) {
		/* RFC 8693 §2.2.2: a bad subject token is invalid_request. */
		snprintf(desc, sizeof desc, "subject token: %s", gwhy ? gwhy : "not a consentd grant");
		e = reply_oauth_error(rep, 400, "invalid_request", desc);
		goto out;
	}
	if (e != CS_OK)
		goto out;
	/* SECURITY: a DPoP-bound grant releases nothing without a proof by its key. */
	if (!dpop_check_grant(req, rep, claims, st, 400)) {
		e = CS_OK;
		goto out;
	}
	const struct config_resource *r = config_resource(cfg, k.resource);
	const struct config_agent *ag = config_agent(cfg, k.agent);
	rep->log.resource = r != NULL ? r->id : NULL;
	rep->log.agent = ag != NULL ? ag->id : NULL;
	const char *want_aud = form_get(&req->params, "audience");
	const char *want_res = form_get(&req->params, "resource");
	/* SECURITY: a grant obtains only its own resource's token. */
	if ((want_aud != NULL && strcmp(want_aud, k.resource) != 0) ||
	    (want_res != NULL && (r == NULL || strcmp(want_res, r->uri) != 0))) {
		e = reply_oauth_error(rep, 400, "invalid_target", "the grant is for another resource");
		goto out;
	}
	const struct config_action *act = config_action(cfg, k.resource, action);
	if (r == NULL || vault_provider(app->vault, k.resource) == NULL) {
		e = reply_oauth_error(rep, 400, "invalid_target", "the grant's resource has no provider");
		goto out;
	}
	if (act == NULL) {
		e = reply_oauth_error(rep, 400, "invalid_request",
		    "unknown action: action names no configured action of the grant's resource");
		goto out;
	}
	json_t *sc = json_object_get(claims, "scope");
	if (!json_is_string(sc) || scope_set_parse(json_string_value(sc), &gs) != CS_OK ||
	    !scope_set_has(&gs, act->scope)) {
		/* SECURITY: an action outside the grant is an escalation attempt. */
		if ((e = audit_refusal(c, actor, &k, action, "escalation attempt: scope outside the grant",
		    req->now)) != CS_OK)
			goto out;
		e = reply_oauth_error(rep, 400, "invalid_scope", "the action's scope is not in the grant");
		goto out;
	}
	if (r->token_release == RELEASE_NEVER) {
		if ((e = audit_refusal(c, actor, &k, action, "token_release = never", req->now)) != CS_OK)
			goto out;
		e = reply_oauth_error(rep, 400, "invalid_request",
		    "this resource's tokens are used only by consentd's proxy");
		goto out;
	}
	/* Flow F: authorization_details, when present, names exactly this action. */
	const char *ad = form_get(&req->params, "authorization_details");
	if (ad != NULL) {
		char why[160];
		if (approval_parse_details(ad, action, &params, why, sizeof why) != CS_OK) {
			e = reply_oauth_error(rep, 400, "invalid_authorization_details", why);
			goto out;
		}
	}
	if (act->approval == APPROVAL_REQUIRED) {
		struct buf canon;
		if (ad == NULL) {
			/* SECURITY: never the token, and nothing is created. */
			e = reply_oauth_error(rep, 400, "invalid_request",
			    "this action needs a person's approval: send authorization_details");
			goto out;
		}
		buf_init(&canon, 2 * APPROVAL_MAX_DETAILS);
		if ((e = jcs_canonicalize(params, &canon)) != CS_OK ||
		    (e = approval_digest(params, digest)) != CS_OK) {
			buf_clear(&canon);
			goto out;
		}
		e = approval_check(c, cfg, &k, action, canon.data, digest, actor, req->now, &aa);
		buf_clear(&canon);
		if (e == CS_EPERM) {             /* the consent ended since the grant was checked */
			e = reply_oauth_error(rep, 400, "invalid_request", "the grant's consent has ended");
			goto out;
		}
		if (e != CS_OK)
			goto out;
		if (aa.outcome != APPROVAL_RELEASE) {
			e = approval_answer_reply(rep, cfg, &aa, 400);
			goto out;
		}
	}
	/* SECURITY: an approved release uses the approval up in the transaction
	 * that records the release: released once, never twice. */
	e = aa.approval_id != NULL ?
	    vault_release_approved(app->vault, c, cfg, &k, action, aa.approval_id, actor, req->now,
	    &out) : vault_release(app->vault, c, cfg, &k, action, actor, req->now, &out);
	if (e == CS_ESTALE) {
		e = reply_oauth_error(rep, 400, "access_denied",
		    "this approval was already used or is no longer valid");
		goto out;
	}
	if (e == CS_OK) {
		json_t *v = json_pack("{s:s, s:s, s:s, s:I, s:s}", "access_token", out.access_token,
		    "issued_token_type", URN_TT_ACCESS_TOKEN, "token_type", out.token_type,
		    "expires_in", (json_int_t)out.expires_in, "scope", out.scope ? out.scope : "");
		if (v != NULL && aa.approval_id != NULL)
			json_object_set_new(v, "authorization_details", json_pack("[{s:s, s:s, s:O, s:s}]",
			    "type", "agent_action", "action", action, "parameters", params,
			    "params_digest", digest));
		e = reply_json_value(rep, 200, v);
	} else if (e == CS_EPERM || e == CS_ENOENT) {
		e = reply_oauth_error(rep, 400, "invalid_grant",
		    "the provider connection is gone; ask for consent again to reconnect");
	} else if (e == CS_EIO) {
		e = reply_oauth_error(rep, 503, "temporarily_unavailable",
		    "the provider could not be reached to refresh the token");
	} else if (e == CS_ECRYPTO) {
		e = reply_oauth_error(rep, 500, "server_error", "the stored token could not be opened");
	}
out:
	json_decref(claims);
	json_decref(params);
	scope_set_clear(&gs);
	consent_clear(&k);
	approval_answer_clear(&aa);
	vault_release_clear(&out);
	return e;
}

enum cs_err token_endpoint(const struct http_request *req, struct http_reply *rep)
{
	const char *gt = form_get(&req->params, "grant_type");
	const char *rtt = form_get(&req->params, "requested_token_type");
	char jkt[JWS_JKT_LEN + 1];
	bool for_grant = strcmp(gt, "refresh_token") == 0 || (strcmp(gt, URN_TOKEN_EXCHANGE) == 0 &&
	    (rtt == NULL || strcmp(rtt, URN_TT_JWT) == 0));
	/* RFC 9449 §5: a proof at the exchange binds the grant to its key. */
	if (for_grant && !dpop_at_token(req, rep, jkt))
		return CS_OK;
	if (strcmp(gt, "refresh_token") == 0)
		return refresh(req, rep, jkt[0] ? jkt : NULL);
	if (strcmp(gt, URN_TOKEN_EXCHANGE) != 0)
		return reply_oauth_error(rep, 400, "unsupported_grant_type",
		    "grant_type must be token-exchange or refresh_token");
	/* requested_token_type tells the two exchanges apart (ARCHITECTURE.md flow D). */
	if (rtt == NULL || strcmp(rtt, URN_TT_JWT) == 0)
		return exchange_for_grant(req, rep, jkt[0] ? jkt : NULL);
	if (strcmp(rtt, URN_TT_ACCESS_TOKEN) == 0)
		return exchange_for_provider_token(req, rep);
	return reply_oauth_error(rep, 400, "invalid_request", "requested_token_type must be "
	    "urn:ietf:params:oauth:token-type:jwt (a grant) or ...:access_token (a provider token)");
}

enum cs_err token_introspect(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	struct store_conn *c = store_conn(app->store);
	json_t *out = NULL;
	enum cs_err e;
	if (c == NULL)
		return CS_EDB;
	const struct keyring *kr = app_keys_get(app);
	e = grant_introspect(c, app->cfg, kr, form_get(&req->params, "token"), req->now, &out);
	app_keys_put(app);
	if (e != CS_OK)
		return e;
	return reply_json_value(rep, 200, out);
}

enum cs_err token_revoke(const struct http_request *req, struct http_reply *rep)
{
	struct app *app = req->app;
	struct store_conn *c = store_conn(app->store);
	char actor[300];
	enum cs_err e;
	if (c == NULL)
		return CS_EDB;
	snprintf(actor, sizeof actor, "gateway:%s", app->cfg->gateway_id);
	const struct keyring *kr = app_keys_get(app);
	e = grant_revoke(c, app->cfg, kr, form_get(&req->params, "token"), actor, req->now);
	app_keys_put(app);
	if (e != CS_OK)
		return e;
	/* RFC 7009 §2.2: 200 whether or not the token was known. */
	return reply_json(rep, 200, "{}");
}
