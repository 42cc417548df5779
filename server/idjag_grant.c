/* idjag_grant.c -- enterprise-managed authorization (idjag_grant.h): an
 * ID-JAG from a configured enterprise IdP, under the admin's policy, becomes
 * the organisation's consent and an MCP access token.  Every refusal names
 * its check. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "audit.h"
#include "b64.h"
#include "buf.h"
#include "consent.h"
#include "httpc.h"
#include "idjag_grant.h"
#include "jws.h"
#include "mono.h"
#include "scope.h"
#include "store_consent.h"
#include "store_replay.h"
#include "store_user.h"

#define IDJAG_ACTOR_MAX 1100            /* "enterprise:" + NAME, "client:" + a client id */

void idjag_grant_result_clear(struct idjag_grant_result *r)
{
	if (r == NULL)
		return;
	grant_response_clear(&r->grant);
	free(r->consent_id);
	memset(r, 0, sizeof *r);
}

static enum cs_err refuse(struct idjag_grant_result *out, enum idjag_grant_outcome oc,
    const char *msg)
{
	out->outcome = oc;
	if (str_fmt(out->why, sizeof out->why, "%s", msg) != CS_OK)
		out->why[0] = '\0';
	return CS_OK;
}

/* A refusal naming the [enterprise.NAME] (fmt holds one %s). */
#define REFUSE_NAMED(out, oc, fmt, name) do { \
	(out)->outcome = (oc); \
	if (str_fmt((out)->why, sizeof (out)->why, fmt, name) != CS_OK) \
		(out)->why[0] = '\0'; \
} while (0)

/* --- the assertion: signature and claims ------------------------------- */

/* true when p verifies under one of ks's keys: the one its kid names, or,
 * without a kid, any. */
static bool signature_ok(const struct jws_parsed *p, const struct jws_keyset *ks)
{
	const char *kid = json_string_value(json_object_get(p->header, "kid"));
	for (size_t i = 0; i < ks->n; i++) {
		if (kid != NULL && (ks->keys[i]->kid == NULL || strcmp(kid, ks->keys[i]->kid) != 0))
			continue;
		if (jws_verify(p, ks->keys[i]))
			return true;
	}
	return false;
}

/* --- the IdP's keys ----------------------------------------------------------- */

/* jwks_uri's sets, by URI, per process: the JSON text as last fetched (each
 * use parses it: a set is a few keys).  A set replaced meanwhile is the
 * caller's own copy. */
#define URI_KEYS_SLOTS 32
static struct {
	pthread_mutex_t mu;
	struct { char *uri, *json; int64_t fetched_at; } v[URI_KEYS_SLOTS];
} uri_keys = { .mu = PTHREAD_MUTEX_INITIALIZER };

static bool has_kid(const struct jws_keyset *ks, const char *kid)
{
	for (size_t i = 0; kid != NULL && i < ks->n; i++)
		if (ks->keys[i]->kid != NULL && strcmp(ks->keys[i]->kid, kid) == 0)
			return true;
	return kid == NULL;
}

/* The cached JSON of uri (a copy, or NULL), and whether a fetch is due now
 * (none cached, or want_fetch, and none within IDJAG_KEYS_REFETCH s); a due
 * fetch is recorded as made, so that concurrent callers do not repeat it. */
static char *uri_keys_get(const char *uri, bool want_fetch, bool *fetch)
{
	char *json = NULL;
	int64_t now = mono_now();
	size_t i, slot = URI_KEYS_SLOTS;
	*fetch = false;
	pthread_mutex_lock(&uri_keys.mu);
	for (i = 0; i < URI_KEYS_SLOTS; i++) {
		if (uri_keys.v[i].uri != NULL && strcmp(uri_keys.v[i].uri, uri) == 0)
			break;
		if (uri_keys.v[i].uri == NULL && slot == URI_KEYS_SLOTS)
			slot = i;
	}
	if (i == URI_KEYS_SLOTS && slot < URI_KEYS_SLOTS &&
	    (uri_keys.v[slot].uri = strdup(uri)) != NULL)
		i = slot;
	if (i < URI_KEYS_SLOTS) {
		if (uri_keys.v[i].json != NULL)
			json = strdup(uri_keys.v[i].json);
		if ((uri_keys.v[i].json == NULL || want_fetch) && (uri_keys.v[i].fetched_at == 0 ||
		    now - uri_keys.v[i].fetched_at >= IDJAG_KEYS_REFETCH)) {
			uri_keys.v[i].fetched_at = now;
			*fetch = true;
		}
	}
	pthread_mutex_unlock(&uri_keys.mu);
	return json;
}

static void uri_keys_put(const char *uri, char *json)
{
	pthread_mutex_lock(&uri_keys.mu);
	for (size_t i = 0; i < URI_KEYS_SLOTS; i++)
		if (uri_keys.v[i].uri != NULL && strcmp(uri_keys.v[i].uri, uri) == 0) {
			free(uri_keys.v[i].json);
			uri_keys.v[i].json = json;
			json = NULL;
			break;
		}
	pthread_mutex_unlock(&uri_keys.mu);
	free(json);
}

/* The JWKS at uri, checked with the ID-JAG list, into the cache. */
static struct jws_keyset *uri_keys_fetch(const char *uri)
{
	struct httpc_response res;
	struct jws_keyset *ks = NULL;
	char why[160];
	if (httpc_get(uri, &res) != CS_OK)
		return NULL;
	if (res.status == 200 && res.body.data != NULL &&
	    jws_keyset_parse_for(res.body.data, JWS_ALGS_IDJAG, &ks, why, sizeof why) == CS_OK)
		uri_keys_put(uri, buf_steal(&res.body));
	httpc_response_clear(&res);
	return ks;
}

/* The keys of ent to verify a JWS whose header names kid (or none): the
 * jwks_file's, or jwks_uri's (fetched on first use, and again when kid is not
 * in the cached set, at most once per IDJAG_KEYS_REFETCH s).  NULL: none. */
static struct jws_keyset *idp_keys(const struct config_enterprise *ent, const char *kid)
{
	struct jws_keyset *ks = NULL, *fresh;
	char why[160];
	bool fetch;
	if (ent->jwks_json != NULL)
		return jws_keyset_parse_for(ent->jwks_json, JWS_ALGS_IDJAG, &ks, why, sizeof why) ==
		    CS_OK ? ks : NULL;
	if (ent->jwks_uri == NULL)
		return NULL;
	char *json = uri_keys_get(ent->jwks_uri, false, &fetch);
	if (json != NULL && jws_keyset_parse_for(json, JWS_ALGS_IDJAG, &ks, why, sizeof why) != CS_OK)
		ks = NULL;
	free(json);
	if (ks != NULL && !has_kid(ks, kid)) {
		json = uri_keys_get(ent->jwks_uri, true, &fetch);
		free(json);
	}
	if (fetch && (fresh = uri_keys_fetch(ent->jwks_uri)) != NULL) {
		jws_keyset_free(ks);
		ks = fresh;
	}
	return ks;
}

/* The [mcp.NAME] URIs: the resources an ID-JAG may name (NULL-terminated). */
static const char **mcp_uris(const struct config *cfg)
{
	const char **v = calloc(cfg->nmcp_endpoints + 1, sizeof *v);
	for (size_t i = 0; v != NULL && i < cfg->nmcp_endpoints; i++)
		v[i] = cfg->mcp_endpoints[i].uri;
	return v;
}

/* Parses and verifies the assertion, and checks its claims into *g; *ent is
 * its IdP.  A refusal is out->outcome (CS_OK). */
static enum cs_err assertion_check(const struct config *cfg, const struct idjag_grant_req *rq,
    const struct config_enterprise **ent, struct idjag *g, struct idjag_grant_result *out)
{
	struct jws_parsed p;
	struct jws_keyset *ks = NULL;
	char why[160], *hdr = NULL, *pl = NULL;
	const char **uris = NULL;
	enum cs_err e = CS_OK;

	memset(&p, 0, sizeof p);
	out->outcome = IDJAG_GRANT_INVALID;
	/* SECURITY: only ES256 and RS256 (JWS_ALGS_IDJAG): none and HS* are
	 * refused before any key is looked at. */
	if (jws_parse(rq->assertion, JWS_ALGS_IDJAG, &p, why, sizeof why) != CS_OK)
	{
		REFUSE_NAMED(out, IDJAG_GRANT_INVALID, "the assertion is not an ID-JAG: %s", why);
		return CS_OK;
	}
	const char *iss = json_string_value(json_object_get(p.payload, "iss"));
	if (iss == NULL || (*ent = config_enterprise_by_issuer(cfg, iss)) == NULL) {
		(void)refuse(out, IDJAG_GRANT_INVALID,
		    "the grant's iss is no configured enterprise identity provider");
		goto out;
	}
	if ((ks = idp_keys(*ent, json_string_value(json_object_get(p.header, "kid")))) == NULL) {
		REFUSE_NAMED(out, IDJAG_GRANT_UNAVAILABLE, "the keys of [enterprise.%s] could not "
		    "be had (its jwks_uri did not answer a usable JWK Set): try again later", (*ent)->id);
		goto out;
	}
	if (!signature_ok(&p, ks)) {
		REFUSE_NAMED(out, IDJAG_GRANT_INVALID, "the grant's signature does not verify with "
		    "the keys of [enterprise.%s]", (*ent)->id);
		goto out;
	}
	if ((hdr = json_dumps(p.header, JSON_COMPACT)) == NULL ||
	    (pl = json_dumps(p.payload, JSON_COMPACT)) == NULL || (uris = mcp_uris(cfg)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	struct idjag_expect x = { .issuer = (*ent)->issuer, .audience = cfg->public_url,
		.client_id = rq->client_id, .resources = uris, .now = rq->now };
	e = idjag_check(hdr, strlen(hdr), pl, strlen(pl), &x, g, out->why, sizeof out->why);
	if (e == CS_EINVAL)
		e = CS_OK;                 /* out->why names the claim */
	else if (e == CS_OK)
		out->outcome = IDJAG_GRANTED;
out:
	free(hdr);
	free(pl);
	free(uris);
	jws_keyset_free(ks);
	jws_parsed_clear(&p);
	return e;
}

/* The scopes to grant: the policy's, narrowed by the grant's and the
 * request's scope when each is given. */
static enum cs_err wanted_scopes(const struct config_enterprise_allow *a, const struct idjag *g,
    const char *asked, struct scope_set *out, struct idjag_grant_result *res)
{
	struct scope_set pol = { .n = 0 }, other = { .n = 0 }, tmp = { .n = 0 };
	enum cs_err e = CS_OK;
	for (size_t i = 0; i < a->nscopes && e == CS_OK; i++)
		e = scope_set_add(&pol, a->scopes[i], strlen(a->scopes[i]));
	for (int pass = 0; pass < 2 && e == CS_OK; pass++) {
		const char *s = pass == 0 ? g->scope : asked;
		if (s == NULL)
			continue;
		if (scope_set_parse(s, &other) != CS_OK) {
			REFUSE_NAMED(res, IDJAG_GRANT_BAD_SCOPE, "the %s scope is malformed",
			    pass == 0 ? "grant's" : "request's");
			goto out;
		}
		if ((e = scope_set_intersect(&tmp, &pol, &other)) != CS_OK)
			goto out;
		scope_set_clear(&pol);
		pol = tmp;
		memset(&tmp, 0, sizeof tmp);
		scope_set_clear(&other);
	}
	if (e == CS_OK && pol.n == 0) {
		(void)refuse(res, IDJAG_GRANT_BAD_SCOPE, "no scope asked for is one the enterprise "
		    "policy grants this client for this resource");
		goto out;
	}
	if (e == CS_OK) {
		*out = pol;
		memset(&pol, 0, sizeof pol);
		res->outcome = IDJAG_GRANTED;
	}
out:
	scope_set_clear(&pol);
	scope_set_clear(&other);
	scope_set_clear(&tmp);
	return e;
}

/* --- the organisation's consent ----------------------------------------- */

/* Inside the open transaction: the live consent of (user, client, resource)
 * when it covers want, else a new one given by the organisation (replacing
 * any unrevoked one), audited.  *id is the consent's id (malloc'd). */
static enum cs_err org_consent_locked(struct store_conn *c, const struct config_enterprise *ent,
    const struct config_resource *res, int64_t user_id, const struct idjag *g,
    const char *client_id, const struct scope_set *want, int64_t now, char **id)
{
	struct consent cur;
	struct store_consent_row old;
	char nid[CONSENT_ID_LEN + 1], actor[IDJAG_ACTOR_MAX], detail[160];
	char *granted = NULL;
	enum consent_revoke_outcome roc;
	enum cs_err e;
	memset(&cur, 0, sizeof cur);
	memset(&old, 0, sizeof old);
	e = consent_current(c, user_id, client_id, res->id, now, &cur);
	if (e == CS_OK && scope_set_subset(want, &cur.granted)) {
		*id = strdup(cur.id);
		consent_clear(&cur);
		return *id != NULL ? CS_OK : CS_ENOMEM;
	}
	consent_clear(&cur);
	if (e != CS_OK && e != CS_ENOENT)
		return e;
	if ((e = str_fmt(actor, sizeof actor, "enterprise:%s", ent->id)) != CS_OK ||
	    (e = b64url_random_id(nid)) != CS_OK)	/* as consent.c makes consent ids */
		goto out;
	/* The unrevoked one (live, narrower, or merely expired) makes way, with
	 * its tokens, in this transaction. */
	e = store_consent_current(c, user_id, client_id, res->id, &old);
	if (e == CS_OK) {
		struct consent_actor who = { .user_id = 0, .actor = actor, .now = now };
		if ((e = str_fmt(detail, sizeof detail, "replaced by the organisation's consent %s",
		    nid)) != CS_OK || (e = consent_revoke_tx(c, old.id, &who, detail, &roc)) != CS_OK)
			goto out;
	} else if (e != CS_ENOENT) {
		goto out;
	}
	if ((granted = scope_set_join(want)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	/* The organisation's consent lasts as long as the resource allows one;
	 * its tokens are minutes long, and each needs a new ID-JAG. */
	struct store_consent_row k = { .id = nid, .user_id = user_id, .agent = (char *)client_id,
		.resource = res->id, .granted = granted, .declined = "", .offline = 0,
		.created_at = now, .expires_at = now + res->max_consent,
		.granted_by = CONSENT_BY_ORGANISATION };
	if ((e = store_consent_insert(c, &k)) != CS_OK ||
	    (e = str_fmt(detail, sizeof detail, "enterprise=%s", ent->id)) != CS_OK ||
	    (e = audit_append(c, &(struct audit_entry){ .ts = now, .actor = actor,
	    .action = "consent.granted_by_policy", .subject = g->sub, .agent = client_id,
	    .resource = res->id, .scopes = granted, .consent_id = nid, .outcome = "ok",
	    .detail = detail })) != CS_OK)
		goto out;
	if ((*id = strdup(nid)) == NULL)
		e = CS_ENOMEM;
out:
	free(granted);
	store_consent_row_clear(&old);
	return e;
}

/* The person, their organisation's consent and its access token, in one
 * transaction: a refusal of the issuance (the consent ended meanwhile) leaves
 * nothing written. */
static enum cs_err org_consent_issue(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const struct config_enterprise *ent,
    const struct config_resource *res, const struct idjag *g, const struct idjag_grant_req *rq,
    const struct scope_set *want, const char *aud, struct idjag_grant_result *out)
{
	struct consent k;
	enum grant_issue_outcome oc = GRANT_ISSUE_REFUSED;
	char actor[IDJAG_ACTOR_MAX], *id = NULL;
	int64_t user_id = 0;
	enum cs_err e;
	memset(&k, 0, sizeof k);
	if ((e = str_fmt(actor, sizeof actor, "client:%s", rq->client_id)) != CS_OK)
		return e;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	/* SECURITY: the person is (the grant's iss, its sub): the same row a
	 * sign-in through that IdP names, never one of another issuer. */
	if ((e = store_user_put(c, &(struct store_user){ .issuer = g->iss, .subject = g->sub,
	    .now = rq->now, .login = false }, &user_id)) != CS_OK ||
	    (e = org_consent_locked(c, ent, res, user_id, g, rq->client_id, want, rq->now,
	    &id)) != CS_OK ||
	    (e = consent_get(c, id, rq->now, &k)) != CS_OK)
		goto out;
	struct grant_issue_req ir = { .k = &k, .scope = want, .with_refresh = false,
		.jkt = rq->jkt, .actor = actor, .now = rq->now, .audience = aud,
		.client_id = rq->client_id };
	if ((e = grant_issue_tx(c, cfg, kr, &ir, &oc, &out->grant)) != CS_OK)
		goto out;
	if (oc != GRANT_ISSUED) {
		(void)refuse(out, IDJAG_GRANT_INVALID, "the organisation's consent could not carry "
		    "a token (its resource or scopes are configured no more)");
		goto out;
	}
	if ((e = store_commit(c)) != CS_OK)
		goto out;
	out->consent_id = id;
	id = NULL;
out:
	if (e != CS_OK || out->outcome != IDJAG_GRANTED) {
		store_rollback(c);
		grant_response_clear(&out->grant);
	}
	free(id);
	consent_clear(&k);
	return e;
}

/* --- the grant ------------------------------------------------------------ */

/* The endpoint the token is for: the request's resource and the grant's,
 * equal when both are given. */
static const struct config_mcp_endpoint *target(const struct config *cfg,
    const struct idjag_grant_req *rq, const struct idjag *g, struct idjag_grant_result *out)
{
	const char *uri = rq->resource != NULL ? rq->resource : g->resource;
	const struct config_mcp_endpoint *m;
	if (uri == NULL) {
		(void)refuse(out, IDJAG_GRANT_BAD_TARGET, "resource is missing: neither the request "
		    "nor the grant names an MCP endpoint");
		return NULL;
	}
	if (rq->resource != NULL && g->resource != NULL && strcmp(rq->resource, g->resource) != 0) {
		(void)refuse(out, IDJAG_GRANT_BAD_TARGET,
		    "resource is not the resource the grant names");
		return NULL;
	}
	if ((m = config_mcp_endpoint_by_uri(cfg, uri)) == NULL)
		(void)refuse(out, IDJAG_GRANT_BAD_TARGET,
		    "resource is not an MCP endpoint of this server");
	return m;
}

enum cs_err idjag_grant(struct store_conn *c, const struct config *cfg, const struct keyring *kr,
    const struct idjag_grant_req *rq, struct idjag_grant_result *out)
{
	const struct config_enterprise *ent = NULL;
	const struct config_enterprise_allow *allow;
	const struct config_mcp_endpoint *m;
	const struct config_resource *res;
	struct idjag g;
	struct scope_set want = { .n = 0 };
	struct buf key;
	enum cs_err e;

	memset(&g, 0, sizeof g);
	memset(out, 0, sizeof *out);
	buf_init(&key, 2 * IDJAG_CLAIM_MAX + 64);
	if (c == NULL || cfg == NULL || rq == NULL || rq->assertion == NULL || rq->client_id == NULL)
		return CS_EINVAL;
	if ((e = assertion_check(cfg, rq, &ent, &g, out)) != CS_OK || out->outcome != IDJAG_GRANTED)
		goto out;
	if ((m = target(cfg, rq, &g, out)) == NULL)
		goto out;
	if ((res = config_resource(cfg, m->resource)) == NULL) {
		(void)refuse(out, IDJAG_GRANT_BAD_TARGET, "resource is configured no more");
		goto out;
	}
	/* SECURITY: the admin's policy is what stands in for the person: only a
	 * pair it lists, and only its scopes. */
	if ((allow = config_enterprise_allows(ent, rq->client_id, m->id)) == NULL) {
		REFUSE_NAMED(out, IDJAG_GRANT_INVALID, "the policy of [enterprise.%s] does not let "
		    "this client have tokens for this resource", ent->id);
		goto out;
	}
	if ((e = wanted_scopes(allow, &g, rq->scope, &want, out)) != CS_OK ||
	    out->outcome != IDJAG_GRANTED)
		goto out;
	/* SECURITY: single use, across nodes: the jti (per IdP) is recorded
	 * once, until the grant could no longer be accepted anyway. */
	if ((e = buf_puts(&key, ent->id)) != CS_OK || (e = buf_puts(&key, " ")) != CS_OK ||
	    (e = buf_puts(&key, g.jti)) != CS_OK)
		goto out;
	e = store_replay_use(c, REPLAY_IDJAG, key.data, g.exp + IDJAG_LEEWAY, rq->now);
	if (e == CS_EEXIST) {
		e = refuse(out, IDJAG_GRANT_INVALID, "the grant was used already (its jti is "
		    "single-use)");
		goto out;
	}
	if (e != CS_OK)
		goto out;
	e = org_consent_issue(c, cfg, kr, ent, res, &g, rq, &want, m->uri, out);
out:
	if (e != CS_OK || out->outcome != IDJAG_GRANTED) {
		grant_response_clear(&out->grant);
		free(out->consent_id);
		out->consent_id = NULL;
	}
	buf_clear(&key);
	scope_set_clear(&want);
	idjag_clear(&g);
	return e;
}

/* --- the policy taken back (idjag_grant_sweep) ----------------------------- */

/* Whether some allow entry still lists row's client for an endpoint of its
 * resource with every scope it holds. */
static bool policy_lists(const struct config *cfg, const struct store_consent_row *row)
{
	struct scope_set held = { .n = 0 };
	bool ok = false;
	if (scope_set_parse(row->granted != NULL ? row->granted : "", &held) != CS_OK)
		return false;
	for (size_t i = 0; !ok && i < cfg->nenterprises; i++) {
		const struct config_enterprise *ent = &cfg->enterprises[i];
		for (size_t j = 0; !ok && j < ent->nallow; j++) {
			const struct config_enterprise_allow *a = &ent->allow[j];
			const struct config_mcp_endpoint *m = config_mcp_endpoint(cfg, a->mcp);
			if (strcmp(a->client_id, row->agent) != 0 || m == NULL ||
			    strcmp(m->resource, row->resource) != 0)
				continue;
			size_t have = 0;
			for (size_t k = 0; k < held.n; k++)
				for (size_t l = 0; l < a->nscopes; l++)
					if (strcmp(held.v[k], a->scopes[l]) == 0) {
						have++;
						break;
					}
			ok = have == held.n;
		}
	}
	scope_set_clear(&held);
	return ok;
}

#define SWEEP_BATCH 500

enum cs_err idjag_grant_sweep(struct store_conn *c, const struct config *cfg, int64_t now,
    int64_t *revoked)
{
	struct store_consent_row *rows = NULL;
	size_t n = 0;
	int64_t count = 0;
	enum cs_err e;
	if (revoked != NULL)
		*revoked = 0;
	if (c == NULL || cfg == NULL)
		return CS_EINVAL;
	/* A page at a time, by id: what a page keeps is never read again. */
	char after[64] = "";
	for (;;) {
		if ((e = store_consent_list_organisation(c, now, after, SWEEP_BATCH, &rows, &n)) != CS_OK)
			return e;
		for (size_t i = 0; i < n && e == CS_OK; i++) {
			enum consent_revoke_outcome o;
			if (policy_lists(cfg, &rows[i]))
				continue;
			e = consent_revoke(c, rows[i].id, &(struct consent_actor){ .actor = "consentd",
			    .now = now }, IDJAG_POLICY_GONE, &o);
			if (e == CS_OK && o == CONSENT_REVOKED)
				count++;
		}
		if (e == CS_OK && n > 0 && str_fmt(after, sizeof after, "%s", rows[n - 1].id) != CS_OK)
			e = CS_EINVAL;
		store_consent_rows_free(rows, n);
		if (e != CS_OK || n < SWEEP_BATCH)
			break;
	}
	if (revoked != NULL)
		*revoked = count;
	return e;
}
