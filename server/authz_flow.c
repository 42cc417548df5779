/* authz_flow.c -- the authorization leg of MCP clients (authz_flow.h): a
 * pending /authorize request, its consent through consent_exchange (the one
 * consent state machine), and the single code it ends in.  It must never
 * keep a code in clear (only its SHA-256), issue a second code for one
 * request, or let a person continue another person's request. */
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "agent.h"
#include "audit.h"
#include "authz_flow.h"
#include "b64.h"
#include "buf.h"
#include "consent.h"

/* --- what a request asks for -------------------------------------------- */

static enum cs_err check_scopes(const struct config *cfg, const struct agent_view *ag,
    const char *resource, struct scope_set *out, enum authz_scope_outcome *oc, const char **bad)
{
	for (size_t i = 0; i < out->n; i++) {
		if (config_scope(cfg, resource, out->v[i]) == NULL) {
			*oc = AUTHZ_SCOPE_UNKNOWN;
			*bad = out->v[i];
			return CS_OK;
		}
		/* SECURITY: requested ⊆ configured ∩ what the client may ask (invariant 7). */
		if (!agent_may_ask(ag, resource, out->v[i])) {
			*oc = AUTHZ_SCOPE_DENIED;
			*bad = out->v[i];
			return CS_OK;
		}
	}
	*oc = out->n == 0 ? AUTHZ_SCOPE_NONE : AUTHZ_SCOPE_OK;
	return CS_OK;
}

enum cs_err authz_flow_scopes(const struct config *cfg, const char *client_id,
    const char *resource, const char *scope, struct scope_set *out,
    enum authz_scope_outcome *oc, const char **bad)
{
	struct agent_view ag;
	const char *ignored;
	enum cs_err e;
	if (bad == NULL)
		bad = &ignored;
	*bad = NULL;
	scope_set_clear(out);
	if (cfg == NULL || resource == NULL || oc == NULL)
		return CS_EINVAL;
	if (!agent_resolve(cfg, client_id, &ag)) {
		*oc = AUTHZ_SCOPE_DENIED;
		return CS_OK;
	}
	if (scope != NULL && scope[0] != '\0') {
		if ((e = scope_set_parse(scope, out)) != CS_OK) {
			scope_set_clear(out);
			if (e != CS_EINVAL && e != CS_ETOOBIG)
				return e;
			*oc = AUTHZ_SCOPE_MALFORMED;
			return CS_OK;
		}
		return check_scopes(cfg, &ag, resource, out, oc, bad);
	}
	for (size_t i = 0; i < cfg->nscopes; i++) {
		if (strcmp(cfg->scopes[i].resource, resource) != 0)
			continue;
		if ((e = scope_set_add(out, cfg->scopes[i].name, strlen(cfg->scopes[i].name))) != CS_OK) {
			scope_set_clear(out);
			if (e != CS_ETOOBIG)
				return e;
			*oc = AUTHZ_SCOPE_MALFORMED;
			return CS_OK;
		}
	}
	return check_scopes(cfg, &ag, resource, out, oc, bad);
}

enum cs_err authz_flow_scope_description(enum authz_scope_outcome oc, const char *bad,
    const char *resource_uri, char *out, size_t outlen)
{
	const char *r = resource_uri != NULL ? resource_uri : "";
	switch (oc) {
	case AUTHZ_SCOPE_MALFORMED:
		return str_fmt(out, outlen, "scope is malformed: at most %d distinct scopes of at most "
		    "%d characters, separated by single spaces", SCOPE_SET_MAX, SCOPE_TOKEN_MAX);
	/* The scope is named: scope_set_parse let only printable ASCII through. */
	case AUTHZ_SCOPE_UNKNOWN:
		return str_fmt(out, outlen, "scope %s is not a scope of resource %s", bad ? bad : "", r);
	case AUTHZ_SCOPE_DENIED:
		return str_fmt(out, outlen, "this client may not ask for scope %s of resource %s",
		    bad ? bad : "", r);
	case AUTHZ_SCOPE_NONE:
		return str_fmt(out, outlen, "resource %s has no scope to ask for", r);
	default:
		return str_fmt(out, outlen, "the scopes were accepted");
	}
}

bool authz_flow_jkt_valid(const char *jkt)
{
	return jkt != NULL && strlen(jkt) == AUTHZ_FLOW_JKT_LEN && b64url_valid(jkt, AUTHZ_FLOW_JKT_LEN);
}

enum cs_err authz_flow_uri_host(const char *uri, char *host, size_t hostlen, bool *loopback)
{
	const char *p, *end;
	size_t n;
	if (uri == NULL || host == NULL || hostlen == 0 || loopback == NULL)
		return CS_EINVAL;
	host[0] = '\0';
	*loopback = false;
	if (strncmp(uri, "https://", 8) == 0)
		p = uri + 8;
	else if (strncmp(uri, "http://", 7) == 0)
		p = uri + 7;
	else
		return CS_EINVAL;
	end = p + strcspn(p, "/?#");
	/* No userinfo: authz_check let only registered URIs through, and
	 * registration refuses one; a stray '@' names no host here. */
	if (memchr(p, '@', (size_t)(end - p)) != NULL)
		return CS_EINVAL;
	if (*p == '[') {
		const char *close = memchr(p, ']', (size_t)(end - p));
		if (close == NULL)
			return CS_EINVAL;
		p++;
		end = close;
	} else {
		const char *colon = memchr(p, ':', (size_t)(end - p));
		if (colon != NULL)
			end = colon;
	}
	n = (size_t)(end - p);
	if (n == 0 || n >= hostlen)
		return CS_EINVAL;
	memcpy(host, p, n);
	host[n] = '\0';
	*loopback = strcmp(host, "127.0.0.1") == 0 || strcmp(host, "::1") == 0 ||
	    strcasecmp(host, "localhost") == 0;
	return CS_OK;
}

/* --- pending requests ------------------------------------------------------ */

/* A request id is a b64url_random_id: it never contains "eyJ", since the
 * audit refuses anything that looks like a JWT. */
_Static_assert(STORE_AUTHZ_ID_LEN == B64URL_ID_LEN, "STORE_AUTHZ_ID_LEN is B64URL_ID_LEN");

enum cs_err authz_flow_begin(struct store_conn *c, struct store_authz_request *r, int64_t now,
    char id[STORE_AUTHZ_ID_LEN + 1])
{
	enum cs_err e = CS_EEXIST;
	if (c == NULL || r == NULL || id == NULL)
		return CS_EINVAL;
	/* A clash of 128 random bits is a broken generator; one more draw says so. */
	for (int tries = 0; tries < 2 && e == CS_EEXIST; tries++) {
		if ((e = b64url_random_id(id)) != CS_OK)
			return e;
		r->id = id;
		r->user_id = 0;
		r->consent_request_id = NULL;
		r->created_at = now;
		r->expires_at = now + AUTHZ_FLOW_REQUEST_TTL;
		e = store_authz_request_put(c, r);
	}
	return e;
}

void authz_flow_step_clear(struct authz_flow_step *s)
{
	if (s == NULL)
		return;
	store_authz_request_clear(&s->req);
	OPENSSL_cleanse(s, sizeof *s);
}

/* The request with this id as p may see it: CS_ENOENT for an unknown,
 * expired or another person's one. */
static enum cs_err request_of(struct store_conn *c, const char *id,
    const struct authz_flow_person *p, struct store_authz_request *out)
{
	enum cs_err e;
	if ((e = store_authz_request_get(c, id, p->now, out)) != CS_OK)
		return e;
	/* SECURITY: bound to another person: that request does not exist here. */
	if (out->user_id != 0 && out->user_id != p->user_id) {
		store_authz_request_clear(out);
		return CS_ENOENT;
	}
	return CS_OK;
}

/* The start of a step (ask, finish): out cleared, the arguments checked, and
 * the request id names read into out->req when it is this person's; *found
 * false (out->outcome AUTHZ_STEP_UNKNOWN) when there is none. */
static enum cs_err step_start(struct store_conn *c, const struct config *cfg, const char *id,
    const struct authz_flow_person *p, struct authz_flow_step *out, bool *found)
{
	enum cs_err e;
	memset(out, 0, sizeof *out);
	*found = false;
	if (c == NULL || cfg == NULL || id == NULL || p == NULL || p->user_id <= 0)
		return CS_EINVAL;
	if ((e = request_of(c, id, p, &out->req)) == CS_ENOENT) {
		out->outcome = AUTHZ_STEP_UNKNOWN;
		return CS_OK;
	}
	*found = e == CS_OK;
	return e;
}

/* The answer for the client: error and why (a fixed sentence); the request
 * is used up, so that no later step answers it a second time.  Another step
 * that used it up first: AUTHZ_STEP_UNKNOWN. */
static enum cs_err refuse(struct store_conn *c, struct authz_flow_step *out, const char *error,
    const char *why)
{
	enum cs_err e = store_authz_request_delete(c, out->req.id);
	if (e == CS_ENOENT) {
		out->outcome = AUTHZ_STEP_UNKNOWN;
		return CS_OK;
	}
	if (e != CS_OK)
		return e;
	out->outcome = AUTHZ_STEP_REFUSED;
	out->error = error;
	if (out->why != why && (e = str_fmt(out->why, sizeof out->why, "%s", why)) != CS_OK)
		return e;
	return CS_OK;
}

/* The [resource.X] behind the request's resource URI (an [mcp.NAME]), or NULL
 * when that endpoint is no longer configured. */
static const char *resource_of(const struct config *cfg, const struct store_authz_request *r)
{
	const struct config_mcp_endpoint *ep = config_mcp_endpoint_by_uri(cfg, r->resource);
	return ep != NULL ? ep->resource : NULL;
}

/* --- the code ------------------------------------------------------------- */

/* Issues the request's code for consent_id and scopes: the request deleted
 * and the code's hash stored, with its audit entry, in one transaction. */
static enum cs_err issue(struct store_conn *c, const char *consent_id,
    const struct scope_set *scopes, const struct authz_flow_person *p,
    struct authz_flow_step *out)
{
	unsigned char raw[32], hash[STORE_AUTHZ_CODE_HASH_LEN];
	char *joined = scope_set_join(scopes);
	const struct store_authz_request *r = &out->req;
	enum cs_err e;
	if (joined == NULL)
		return CS_ENOMEM;
	if (RAND_bytes(raw, sizeof raw) != 1) {
		e = CS_ECRYPTO;
		goto out;
	}
	if ((e = b64url_encode(raw, sizeof raw, out->code, sizeof out->code)) != CS_OK)
		goto out;
	SHA256((const unsigned char *)out->code, AUTHZ_FLOW_CODE_LEN, hash);
	if ((e = store_begin(c)) != CS_OK)
		goto out;
	/* SECURITY: one request, one code: of two steps racing here, the one
	 * whose delete finds no row issues nothing. */
	e = store_authz_request_delete(c, r->id);
	if (e == CS_OK)
		e = store_authz_code_put(c, hash, &(struct store_authz_code){
		    .request_id = r->id, .client_id = r->client_id, .redirect_uri = r->redirect_uri,
		    .code_challenge = r->code_challenge, .resource = r->resource, .scope = joined,
		    .consent_id = (char *)consent_id, .dpop_jkt = r->dpop_jkt, .user_id = p->user_id,
		    .created_at = p->now, .expires_at = p->now + AUTHZ_FLOW_CODE_TTL });
	if (e == CS_OK)
		e = audit_append(c, &(struct audit_entry){ .ts = p->now, .actor = p->actor,
		    .action = "authz.code.issued", .subject = p->subject, .agent = r->client_id,
		    .resource = r->resource, .scopes = joined, .consent_id = consent_id,
		    .outcome = "ok", .detail = r->dpop_jkt != NULL ? "bound to a DPoP key" : NULL });
	if (e == CS_OK)
		e = store_commit(c);
	if (e != CS_OK)
		store_rollback(c);
	if (e == CS_ENOENT) {
		out->outcome = AUTHZ_STEP_UNKNOWN;
		e = CS_OK;
	} else if (e == CS_OK) {
		out->outcome = AUTHZ_STEP_CODE;
	}
out:
	if (out->outcome != AUTHZ_STEP_CODE)
		OPENSSL_cleanse(out->code, sizeof out->code);
	OPENSSL_cleanse(raw, sizeof raw);
	free(joined);
	return e;
}

/* --- asking ------------------------------------------------------------- */

/* The consent_exchange answer a for the request: a code, the consent page,
 * or a refusal for the client. */
static enum cs_err answered(struct store_conn *c, const struct authz_flow_person *p,
    const struct consent_answer *a, struct authz_flow_step *out)
{
	enum cs_err e;
	switch (a->outcome) {
	case CONSENT_GRANT:
		return issue(c, a->live.id, &a->grant_scopes, p, out);
	case CONSENT_REQUIRED:
	case CONSENT_PENDING:
	case CONSENT_SLOW_DOWN:
		if ((e = str_fmt(out->consent_request_id, sizeof out->consent_request_id, "%s",
		    a->request_id)) != CS_OK)
			return e;
		e = store_authz_request_bind(c, out->req.id, p->user_id, a->request_id, p->now);
		if (e == CS_ENOENT) {
			out->outcome = AUTHZ_STEP_UNKNOWN;
			return CS_OK;
		}
		if (e == CS_OK)
			out->outcome = AUTHZ_STEP_CONSENT;
		return e;
	case CONSENT_DENIED:
		return refuse(c, out, "access_denied", "the person denied this client access to this "
		    "resource recently ([consent] deny_cooldown); they can let it ask again on /me");
	case CONSENT_TOO_MANY:
		return refuse(c, out, "temporarily_unavailable", a->rate_limited ?
		    "the person has asked for consent too often ([limits] person_rate); try again later" :
		    "the person has too many consent requests waiting; try again later");
	case CONSENT_TOO_MANY_SCOPES:
		if ((e = str_fmt(out->why, sizeof out->why, "together with the scopes already asked "
		    "for, this is more than %d scopes", CONSENT_MAX_SCOPES)) != CS_OK)
			return e;
		return refuse(c, out, "invalid_scope", out->why);
	default:
		return refuse(c, out, "server_error", "the consent request could not be made");
	}
}

enum cs_err authz_flow_ask(struct store_conn *c, const struct config *cfg, const char *id,
    const struct authz_flow_person *p, struct authz_flow_step *out)
{
	struct scope_set want = { .n = 0 };
	struct consent_answer a;
	enum authz_scope_outcome so;
	const char *res, *bad = NULL;
	bool found;
	enum cs_err e;
	memset(&a, 0, sizeof a);
	if ((e = step_start(c, cfg, id, p, out, &found)) != CS_OK || !found)
		return e;
	/* SECURITY: the request is this person's from here on (a person who
	 * opens another's link later finds nothing). */
	if ((e = store_authz_request_bind(c, id, p->user_id, out->req.consent_request_id,
	    p->now)) == CS_ENOENT) {
		out->outcome = AUTHZ_STEP_UNKNOWN;
		return CS_OK;
	}
	if (e != CS_OK)
		return e;
	if ((res = resource_of(cfg, &out->req)) == NULL)
		return refuse(c, out, "invalid_target", "resource is no longer an MCP endpoint of "
		    "this server");
	if ((e = authz_flow_scopes(cfg, out->req.client_id, res, out->req.scope, &want, &so,
	    &bad)) != CS_OK)
		goto done;
	if (so != AUTHZ_SCOPE_OK) {
		if ((e = authz_flow_scope_description(so, bad, out->req.resource, out->why,
		    sizeof out->why)) == CS_OK)
			e = refuse(c, out, "invalid_scope", out->why);
		goto done;
	}
	/* The gateway's flow A, for this client: one pending request per
	 * (person, client, resource), merged; an expired one closed, then anew. */
	for (int round = 0; round < 2; round++) {
		consent_answer_clear(&a);
		if ((e = consent_exchange(c, cfg, &(struct consent_ask){ .issuer = p->issuer,
		    .subject = p->subject, .agent = out->req.client_id, .resource = res,
		    .requested = &want, .actor = p->actor, .now = p->now, .limits = p->limits },
		    &a)) != CS_OK)
			goto done;
		if (a.outcome != CONSENT_EXPIRED)
			break;
	}
	if (a.outcome == CONSENT_EXPIRED)
		e = refuse(c, out, "access_denied", "the consent request expired");
	else
		e = answered(c, p, &a, out);
done:
	consent_answer_clear(&a);
	scope_set_clear(&want);
	return e;
}

/* --- after the decision ------------------------------------------------- */

/* The approved consent request cr: the code for the requested scopes the
 * person granted, while its consent is live. */
static enum cs_err approved(struct store_conn *c, const struct config *cfg,
    const struct consent_request *cr, const struct authz_flow_person *p,
    struct authz_flow_step *out)
{
	struct scope_set want = { .n = 0 }, give = { .n = 0 };
	struct consent k;
	enum authz_scope_outcome so;
	const char *res = resource_of(cfg, &out->req);
	enum cs_err e;
	memset(&k, 0, sizeof k);
	if (res == NULL)
		return refuse(c, out, "invalid_target", "resource is no longer an MCP endpoint of "
		    "this server");
	if (cr->consent_id == NULL || (e = consent_get(c, cr->consent_id, p->now, &k)) == CS_ENOENT)
		return refuse(c, out, "access_denied", "the consent ended before the code was issued");
	if (e != CS_OK)
		return e;
	/* SECURITY: the consent is the one this person gave this client for
	 * this resource, and still live. */
	if (k.user_id != p->user_id || strcmp(k.agent, out->req.client_id) != 0 ||
	    strcmp(k.resource, res) != 0 || !consent_is_live(&k, p->now)) {
		e = refuse(c, out, "access_denied", "the consent ended before the code was issued");
		goto out;
	}
	if ((e = authz_flow_scopes(cfg, out->req.client_id, res, out->req.scope, &want, &so,
	    NULL)) != CS_OK)
		goto out;
	if (so == AUTHZ_SCOPE_OK && (e = scope_set_intersect(&give, &want, &k.granted)) != CS_OK)
		goto out;
	if (give.n == 0) {
		e = refuse(c, out, "access_denied", "the person granted none of the scopes asked for");
		goto out;
	}
	e = issue(c, k.id, &give, p, out);
out:
	consent_clear(&k);
	scope_set_clear(&want);
	scope_set_clear(&give);
	return e;
}

enum cs_err authz_flow_finish(struct store_conn *c, const struct config *cfg, const char *id,
    const struct authz_flow_person *p, struct authz_flow_step *out)
{
	struct consent_request cr;
	bool found;
	enum cs_err e;
	memset(&cr, 0, sizeof cr);
	if ((e = step_start(c, cfg, id, p, out, &found)) != CS_OK || !found)
		return e;
	/* Not this person's yet, or never asked: its own page first. */
	if (out->req.user_id != p->user_id || out->req.consent_request_id == NULL) {
		out->outcome = AUTHZ_STEP_ASK;
		return CS_OK;
	}
	if ((e = consent_request_get(c, out->req.consent_request_id, &cr)) == CS_ENOENT) {
		e = refuse(c, out, "access_denied", "the consent request is gone");
		goto out;
	}
	if (e != CS_OK)
		goto out;
	if (cr.user_id != p->user_id) {               /* cannot happen: bound by ask */
		out->outcome = AUTHZ_STEP_UNKNOWN;
		goto out;
	}
	if (strcmp(cr.status, "pending") == 0 && cr.expires_at > p->now) {
		out->outcome = AUTHZ_STEP_CONSENT;
		e = str_fmt(out->consent_request_id, sizeof out->consent_request_id, "%s", cr.id);
	} else if (strcmp(cr.status, "approved") == 0) {
		e = approved(c, cfg, &cr, p, out);
	} else if (strcmp(cr.status, "denied") == 0) {
		e = refuse(c, out, "access_denied", "the person denied the request");
	} else {
		e = refuse(c, out, "access_denied", "the consent request expired before the person "
		    "decided");
	}
out:
	consent_request_clear(&cr);
	return e;
}

enum cs_err authz_flow_request_of_consent(struct store_conn *c, const char *consent_request_id,
    int64_t now, struct store_authz_request *out)
{
	if (c == NULL || consent_request_id == NULL || out == NULL)
		return CS_EINVAL;
	return store_authz_request_by_consent(c, consent_request_id, now, out);
}

enum cs_err authz_flow_from_consent(struct store_conn *c, const char *consent_request_id,
    int64_t now, char id[STORE_AUTHZ_ID_LEN + 1])
{
	struct store_authz_request r;
	enum cs_err e;
	if ((e = authz_flow_request_of_consent(c, consent_request_id, now, &r)) != CS_OK)
		return e;
	e = strlen(r.id) == STORE_AUTHZ_ID_LEN ? str_fmt(id, STORE_AUTHZ_ID_LEN + 1, "%s", r.id) :
	    CS_EINVAL;
	store_authz_request_clear(&r);
	return e;
}
