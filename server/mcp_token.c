/* mcp_token.c -- the token endpoint's rules for MCP clients (mcp_token.h):
 * who the client is, the authorization code's single use and its checks,
 * refresh of MCP families, revocation by the holder.  It owns the code's
 * transaction; the tokens are grant.c's.  It must never answer an error
 * before the client is authenticated beyond invalid_client, never store or
 * audit a code or token, and never issue for a code whose checks failed. */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "app.h"
#include "audit.h"
#include "authorize.h"
#include "buf.h"
#include "cimd.h"
#include "client_auth.h"
#include "consent.h"
#include "jws.h"
#include "log.h"
#include "mcp_client.h"
#include "mcp_token.h"
#include "metrics.h"
#include "rate_limits.h"
#include "scope.h"
#include "session.h"
#include "store_authz.h"
#include "store_grant.h"
#include "store_replay.h"

/* --- answers ------------------------------------------------------------- */

void mcp_token_answer_clear(struct mcp_token_answer *a)
{
	if (a == NULL)
		return;
	grant_response_clear(&a->g);
	memset(a, 0, sizeof *a);
}

/* An error answer: status, the RFC 6749 code, and the failing check. */
static void say(struct mcp_token_answer *a, int status, const char *error, const char *why)
{
	a->status = status;
	a->error = error;
	if (str_fmt(a->description, sizeof a->description, "%s", why) != CS_OK)
		a->description[0] = '\0';
}

/* A required parameter: false with invalid_request naming it when v is NULL. */
static bool given(struct mcp_token_answer *a, const char *v, const char *why)
{
	if (v != NULL)
		return true;
	say(a, 400, "invalid_request", why);
	return false;
}

bool mcp_token_request_is_client(const struct config *cfg, const char *client_id,
    const char *authorization)
{
	/* SECURITY: Basic credentials are the gateway's alone, and its own id
	 * is never an MCP client's (config refuses a [client.NAME] with it; a
	 * client-id URL is an https URL): such a request goes to the gateway's
	 * authentication, as before. */
	return client_id != NULL && client_id[0] != '\0' && authorization == NULL &&
	    (cfg->gateway_id == NULL || strcmp(client_id, cfg->gateway_id) != 0);
}

/* --- client authentication ------------------------------------------------ */

/* private_key_jwt for client k: the assertion checked with the client's own
 * keys (its jwks, from [client.NAME] jwks_file or its metadata document),
 * audience consentd's issuer or its token endpoint, its jti used once.  true:
 * authenticated; false: why says why. */
static bool assertion_ok(struct app *app, const struct mcp_client *k,
    const struct mcp_token_req *rq, char *why, size_t whylen)
{
	const struct config *cfg = app->cfg;
	struct jws_keyset *ks = NULL;
	char token_ep[600], *jti = NULL, *key = NULL;
	int64_t exp = 0;
	bool ok = false;
	size_t n;

	if (rq->assertion_type == NULL || strcmp(rq->assertion_type, CLIENT_ASSERTION_TYPE) != 0 ||
	    rq->assertion == NULL) {
		cimd_reason(why, whylen, "the client uses private_key_jwt: client_assertion_type "
		    "must be " CLIENT_ASSERTION_TYPE " with a client_assertion");
		return false;
	}
	if (k->jwks == NULL) {
		/* Not fetched here: a client-id URL's jwks_uri is a second URL the
		 * client chose, and needs the metadata fetch's SSRF rules. */
		cimd_reason(why, whylen, "the client's keys are at a jwks_uri, which the token "
		    "endpoint does not fetch: register them inline (jwks, or jwks_file)");
		return false;
	}
	if (jws_keyset_parse(k->jwks, &ks, why, whylen) != CS_OK)
		return false;
	bool with_token_ep = str_fmt(token_ep, sizeof token_ep, "%s/token", cfg->public_url) == CS_OK;
	const char *auds[2] = { cfg->public_url, token_ep };
	struct client_assertion_expect ex = { .keys = ks, .client_id = k->client_id,
		.audiences = auds, .naudiences = with_token_ep ? 2 : 1, .now = rq->now,
		.clock_skew = cfg->gateway_clock_skew };
	if (client_assertion_check(rq->assertion, &ex, &jti, &exp, why, whylen) != CS_OK)
		goto out;
	/* SECURITY: RFC 7523 §3 item 7, across every node; the client's id in
	 * the key, so that one client's jti never blocks another's. */
	n = strlen(k->client_id) + strlen(jti) + 6;
	if ((key = malloc(n)) == NULL || str_fmt(key, n, "mcp %s %s", k->client_id, jti) != CS_OK) {
		cimd_reason(why, whylen, "the assertion could not be checked");
		goto out;
	}
	struct store_conn *c = store_conn(app->store);
	enum cs_err e = c == NULL ? CS_EDB :
	    store_replay_use(c, REPLAY_CLIENT_ASSERTION, key, exp + cfg->gateway_clock_skew, rq->now);
	if (e == CS_EEXIST)
		cimd_reason(why, whylen, "the assertion's jti was used before");
	else if (e != CS_OK)
		cimd_reason(why, whylen, "the replay cache could not be consulted");
	else
		ok = true;
out:
	free(key);
	free(jti);
	jws_keyset_free(ks);
	return ok;
}

/* Who the client is, and whether it proved it: *k written and true when
 * authenticated; false with a 401 invalid_client in *a (or *e an error). */
static bool authenticate(struct app *app, const struct mcp_token_req *rq, struct mcp_client *k,
    struct mcp_token_answer *a, enum cs_err *e)
{
	char why[MCP_TOKEN_WHY_MAX], desc[MCP_TOKEN_WHY_MAX + 40];
	*e = CS_OK;
	why[0] = '\0';
	desc[0] = '\0';
	/* The address's auth_failure bucket was looked at by the gate
	 * (token_api_gate); a refusal here spends from it. */
	*e = mcp_client_lookup(app, rq->client_id, rq->now, k, why, sizeof why);
	if (*e == CS_ENOMEM || *e == CS_EDB)
		return false;
	if (*e != CS_OK) {
		*e = CS_OK;
		if (str_fmt(desc, sizeof desc, "client_id: %s", why) != CS_OK)
			desc[0] = '\0';
		goto refused;
	}
	if (!k->private_key_jwt) {
		/* A public client proves nothing here: PKCE binds the code to it. */
		if (rq->assertion == NULL && rq->assertion_type == NULL)
			return true;
		cimd_reason(desc, sizeof desc, "the client is registered as public "
		    "(token_endpoint_auth_method none): it sends no client assertion");
	} else if (assertion_ok(app, k, rq, why, sizeof why)) {
		return true;
	} else if (str_fmt(desc, sizeof desc, "client assertion: %s", why) != CS_OK) {
		desc[0] = '\0';
	}
	mcp_client_clear(k);
refused:
	rate_limits_auth_failed(app->limits, rq->remote_ip);
	say(a, 401, "invalid_client", desc[0] ? desc : "client authentication failed");
	return false;
}

/* The start of every grant: *out and *k cleared, then the client
 * authenticated into *k (false: *out says why, or *e is the failure). */
static bool client_start(struct app *app, const struct mcp_token_req *rq,
    struct mcp_client *k, struct mcp_token_answer *out, enum cs_err *e)
{
	memset(k, 0, sizeof *k);
	memset(out, 0, sizeof *out);
	if (app == NULL || rq == NULL) {
		*e = CS_EINVAL;
		return false;
	}
	return authenticate(app, rq, k, out, e);
}

bool mcp_token_dpop_missing(const struct config *cfg, bool proof, bool private_key_jwt)
{
	return !proof && !private_key_jwt && cfg->mcp_require_dpop;
}

/* [mcp] require_dpop for client k's request.  true: go on. */
static bool dpop_required_ok(const struct config *cfg, const struct mcp_client *k,
    const struct mcp_token_req *rq, struct mcp_token_answer *a)
{
	if (!mcp_token_dpop_missing(cfg, rq->jkt != NULL, k->private_key_jwt))
		return true;
	say(a, 400, "invalid_dpop_proof", MCP_TOKEN_DPOP_REQUIRED);
	return false;
}

/* What a grant needs before the store: [mcp] require_dpop met (false: *a
 * says why) and a connection in *c (false: *e CS_EDB). */
static bool store_ready(struct app *app, const struct mcp_client *k,
    const struct mcp_token_req *rq, struct mcp_token_answer *a, struct store_conn **c,
    enum cs_err *e)
{
	if (!dpop_required_ok(app->cfg, k, rq, a))
		return false;
	if ((*c = store_conn(app->store)) == NULL) {
		*e = CS_EDB;
		return false;
	}
	return true;
}

/* --- grant_type=authorization_code ---------------------------------------- */

/* A second use of a code: its first use's family revoked with every token
 * in it (OAuth 2.1 §4.1.3), audited, committed by the caller. */
static enum cs_err code_reused(struct store_conn *c, const struct store_authz_code *row,
    const struct mcp_token_req *rq)
{
	struct consent k;
	char detail[128];
	int64_t n = 0;
	enum cs_err e;
	bool have_k;
	memset(&k, 0, sizeof k);
	if (row->family_id != NULL &&
	    (e = store_refresh_revoke_family(c, row->family_id, rq->now, true, &n)) != CS_OK)
		return e;
	e = consent_get(c, row->consent_id, rq->now, &k);
	if (e != CS_OK && e != CS_ENOENT)
		return e;
	have_k = e == CS_OK;
	if ((e = str_fmt(detail, sizeof detail, "family=%s", row->family_id != NULL ?
	    row->family_id : "none")) == CS_OK)
		e = audit_append(c, &(struct audit_entry){ .ts = rq->now, .actor = rq->actor,
		    .action = "authz.code_reused", .subject = have_k ? k.subject : NULL,
		    .agent = row->client_id, .resource = have_k ? k.resource : NULL,
		    .consent_id = row->consent_id, .outcome = "refused", .detail = detail });
	consent_clear(&k);
	return e;
}

/* The code's checks against the request (after the take).  true: all hold;
 * false: *a says which failed. */
static bool code_fits(const struct store_authz_code *row, const struct mcp_token_req *rq,
    const struct mcp_client *k, struct mcp_token_answer *a)
{
	/* SECURITY: the code is found by its hash alone (store_authz.h): a code
	 * another client obtained, or one sent to another redirect URI, is
	 * refused here and burnt by the take all the same. */
	if (strcmp(row->client_id, k->client_id) != 0) {
		say(a, 400, "invalid_grant", "the code was issued to another client");
		return false;
	}
	if (strcmp(row->redirect_uri, rq->redirect_uri) != 0) {
		say(a, 400, "invalid_grant", "redirect_uri is not the one the code was issued to");
		return false;
	}
	if (strcmp(row->resource, rq->resource) != 0) {
		say(a, 400, "invalid_target", "resource is not the one the code was issued for");
		return false;
	}
	if (!authz_pkce_verify(rq->code_verifier, row->code_challenge)) {
		say(a, 400, "invalid_grant", "code_verifier does not match the code's "
		    "code_challenge (PKCE S256)");
		return false;
	}
	/* RFC 9449 §10: a code bound to a key at /authorize needs a proof by it. */
	if (row->dpop_jkt != NULL && (rq->jkt == NULL || strlen(rq->jkt) != strlen(row->dpop_jkt) ||
	    CRYPTO_memcmp(rq->jkt, row->dpop_jkt, strlen(row->dpop_jkt)) != 0)) {
		say(a, 400, "invalid_dpop_proof", rq->jkt == NULL ?
		    "the code is bound to a DPoP key (dpop_jkt): a DPoP proof is required" :
		    "the DPoP proof is signed by another key than the code's dpop_jkt");
		return false;
	}
	return true;
}

/* Issues for a taken code that passed code_fits, in the caller's
 * transaction: the access token, the refresh token when allowed, the family
 * recorded on the code.  *issued false with *a for a refusal. */
static enum cs_err code_issue(struct app *app, struct store_conn *c,
    const unsigned char h[STORE_AUTHZ_CODE_HASH_LEN], const struct store_authz_code *row,
    const struct mcp_client *mk, const struct mcp_token_req *rq, struct mcp_token_answer *a,
    bool *issued)
{
	struct consent k;
	struct scope_set sc = { .n = 0 };
	enum grant_issue_outcome oc = GRANT_ISSUE_REFUSED;
	enum cs_err e;
	memset(&k, 0, sizeof k);
	*issued = false;
	if (config_mcp_endpoint_by_uri(app->cfg, rq->resource) == NULL) {
		say(a, 400, "invalid_target", "resource is not an MCP endpoint of this server");
		return CS_OK;
	}
	e = consent_get(c, row->consent_id, rq->now, &k);
	if (e == CS_ENOENT) {
		say(a, 400, "invalid_grant", "the code's consent is gone");
		return CS_OK;
	}
	if (e != CS_OK)
		return e;
	if (k.revoked_at != 0 || !consent_is_live(&k, rq->now) || k.user_id != row->user_id) {
		say(a, 400, "invalid_grant", k.revoked_at != 0 ? "the code's consent was revoked" :
		    "the code's consent has ended");
		goto out;
	}
	if (scope_set_parse(row->scope, &sc) != CS_OK || sc.n == 0) {
		say(a, 400, "invalid_grant", "the code's scope is empty");
		goto out;
	}
	struct grant_issue_req iq = { .k = &k, .scope = &sc, .with_refresh = k.offline && mk->refresh,
		.jkt = rq->jkt, .actor = rq->actor, .now = rq->now, .audience = rq->resource,
		.client_id = mk->client_id };
	const struct keyring *kr = app_keys_get(app);
	e = grant_issue_tx(c, app->cfg, kr, &iq, &oc, &a->g);
	app_keys_put(app);
	if (e != CS_OK)
		goto out;
	if (oc != GRANT_ISSUED) {
		say(a, 400, "invalid_grant", oc == GRANT_ISSUE_REVOKED ?
		    "the code's consent was revoked" :
		    "the code's consent no longer covers its scope or resource");
		goto out;
	}
	/* SECURITY: recorded in the same transaction as the take, so that a
	 * second use, waiting on the code's row, finds what to revoke. */
	if ((e = store_authz_code_set_family(c, h, a->g.family)) != CS_OK)
		goto out;
	*issued = true;
out:
	scope_set_clear(&sc);
	consent_clear(&k);
	return e;
}

enum cs_err mcp_token_code(struct app *app, const struct mcp_token_req *rq,
    struct mcp_token_answer *out)
{
	struct mcp_client k;
	struct store_authz_code row;
	unsigned char h[STORE_AUTHZ_CODE_HASH_LEN];
	enum store_authz_take take = AUTHZ_TAKE_UNKNOWN;
	struct store_conn *c;
	enum cs_err e;
	bool in_tx = false, issued = false;

	memset(&row, 0, sizeof row);
	memset(h, 0, sizeof h);
	if (!client_start(app, rq, &k, out, &e))
		return e;
	e = CS_OK;
	if (!given(out, rq->code != NULL && rq->code[0] != '\0' ? rq->code : NULL,
	    "code is missing") ||
	    !given(out, rq->redirect_uri, "redirect_uri is missing (the one the code was issued to)") ||
	    !given(out, rq->code_verifier, "code_verifier is missing (PKCE is required)") ||
	    !given(out, rq->resource, "resource is missing (RFC 8707: the MCP endpoint the code "
	    "was issued for)"))
		goto out;
	if (!store_ready(app, &k, rq, out, &c, &e))
		goto out;
	sha256_str(rq->code, h);
	if ((e = store_begin(c)) != CS_OK)
		goto out;
	in_tx = true;
	if ((e = store_authz_code_take(c, h, rq->now, &take, &row)) != CS_OK)
		goto out;
	switch (take) {
	case AUTHZ_TAKE_OK:
		break;
	case AUTHZ_TAKE_REUSED:
		/* SECURITY: OAuth 2.1 §4.1.3: a code used twice was copied; what
		 * its first use issued dies, and that sticks: commit, then refuse. */
		if ((e = code_reused(c, &row, rq)) != CS_OK || (e = store_commit(c)) != CS_OK)
			goto out;
		in_tx = false;
		say(out, 400, "invalid_grant", "the code was used before: the tokens its first use "
		    "issued are now revoked (OAuth 2.1 §4.1.3)");
		goto out;
	case AUTHZ_TAKE_EXPIRED:
		say(out, 400, "invalid_grant", "the code expired");
		goto out;
	default:
		say(out, 400, "invalid_grant", "the code is unknown");
		goto out;
	}
	if (code_fits(&row, rq, &k, out) &&
	    (e = code_issue(app, c, h, &row, &k, rq, out, &issued)) != CS_OK)
		goto out;
	/* A refused code stays used: the take commits either way (a code that
	 * failed its checks once is not tried again). */
	if ((e = store_commit(c)) != CS_OK)
		goto out;
	in_tx = false;
	if (issued) {
		metrics_inc(M_GRANTS_ISSUED, "authorization_code");
		out->status = 200;
		out->dpop_bound = rq->jkt != NULL;
	}
out:
	if (in_tx)
		store_rollback(c);
	if (e != CS_OK || !issued)
		grant_response_clear(&out->g);
	OPENSSL_cleanse(h, sizeof h);
	store_authz_code_clear(&row);
	mcp_client_clear(&k);
	return e;
}

/* --- grant_type=refresh_token --------------------------------------------- */

enum cs_err mcp_token_refresh(struct app *app, const struct mcp_token_req *rq,
    struct mcp_token_answer *out)
{
	struct mcp_client k;
	struct scope_set narrow = { .n = 0 };
	enum grant_refresh_outcome oc = GRANT_REFRESH_INVALID;
	struct store_conn *c;
	enum cs_err e;

	if (!client_start(app, rq, &k, out, &e))
		return e;
	e = CS_OK;
	if (!k.refresh) {
		say(out, 400, "unauthorized_client", "the client may not use refresh tokens (its "
		    "registration lists no refresh_token grant type)");
		goto out;
	}
	if (!given(out, rq->refresh_token, "refresh_token is missing") ||
	    !given(out, rq->resource, "resource is missing (RFC 8707: the MCP endpoint the "
	    "refresh token was issued for)"))
		goto out;
	if (rq->scope != NULL && (scope_set_parse(rq->scope, &narrow) != CS_OK || narrow.n == 0)) {
		say(out, 400, "invalid_scope", "scope is malformed");
		goto out;
	}
	if (!store_ready(app, &k, rq, out, &c, &e))
		goto out;
	struct grant_refresh_req fr = { .refresh_token = rq->refresh_token,
		.scope = rq->scope != NULL ? &narrow : NULL, .jkt = rq->jkt, .actor = rq->actor,
		.now = rq->now, .client_id = k.client_id, .audience = rq->resource };
	const struct keyring *kr = app_keys_get(app);
	e = grant_refresh(c, app->cfg, kr, &fr, &oc, &out->g);
	app_keys_put(app);
	if (e != CS_OK)
		goto out;
	switch (oc) {
	case GRANT_REFRESHED:
		out->status = 200;
		out->dpop_bound = rq->jkt != NULL;
		break;
	case GRANT_REFRESH_WRONG_KEY:
		say(out, 400, "invalid_dpop_proof", rq->jkt == NULL ?
		    "the refresh token is DPoP-bound: a DPoP proof is required" :
		    "the refresh token is bound to another key");
		break;
	case GRANT_REFRESH_BAD_SCOPE:
		say(out, 400, "invalid_scope", grant_refresh_outcome_description(oc));
		break;
	case GRANT_REFRESH_WRONG_RESOURCE:
		say(out, 400, "invalid_target", grant_refresh_outcome_description(oc));
		break;
	default:
		say(out, 400, "invalid_grant", grant_refresh_outcome_description(oc));
	}
out:
	scope_set_clear(&narrow);
	mcp_client_clear(&k);
	return e;
}

/* --- revocation ---------------------------------------------------------- */

enum cs_err mcp_token_revoke(struct app *app, const struct mcp_token_req *rq,
    struct mcp_token_answer *out)
{
	struct mcp_client k;
	struct store_conn *c;
	enum cs_err e;
	if (!client_start(app, rq, &k, out, &e))
		return e;
	if ((c = store_conn(app->store)) == NULL) {
		mcp_client_clear(&k);
		return CS_EDB;
	}
	const struct keyring *kr = app_keys_get(app);
	e = grant_revoke_mcp(c, app->cfg, kr, rq->token, k.client_id, rq->actor, rq->now);
	app_keys_put(app);
	if (e == CS_OK)
		out->status = 200;           /* RFC 7009 §2.2: known or not, whose or not */
	mcp_client_clear(&k);
	return e;
}

/* The client's authentication alone (mcp_token.h): the ID-JAG grant's
 * (idjag_api.c), the same as a code's. */
bool mcp_token_authenticate(struct app *app, const struct mcp_token_req *rq,
    struct mcp_token_answer *out, bool *private_key_jwt, enum cs_err *e)
{
	struct mcp_client k;
	memset(&k, 0, sizeof k);
	if (!authenticate(app, rq, &k, out, e))
		return false;
	*private_key_jwt = k.private_key_jwt;
	mcp_client_clear(&k);
	return true;
}
