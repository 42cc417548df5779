/* grant.c -- grants (RFC 9068 at+jwt, ES256, flow C), refresh tokens for
 * offline consents (rotated on every use, reuse revokes the family),
 * introspection (RFC 7662) and revocation (RFC 7009).  It must never store or
 * audit a token: grants are recorded by jti, refresh tokens only by SHA-256. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "agent.h"
#include "audit.h"
#include "b64.h"
#include "buf.h"
#include "grant.h"
#include "grant_cache.h"
#include "metrics.h"
#include "scope.h"
#include "session.h"
#include "store_grant.h"

#define GRANT_TYP "at+jwt"
/* [keys] grant_ttl is at most 900 (config.c); no grant of ours lives longer,
 * whatever the configuration says today. */
#define GRANT_TTL_CAP 900
/* jti and refresh-family ids: 43 base64url characters (256 random bits). */
#define GRANT_ID_LEN SESSION_TOKEN_LEN
/* A presented token longer than this is not one of ours (grants are < 2 KiB). */
#define GRANT_MAX_TOKEN 8192

/* --- small helpers ----------------------------------------------------- */

void grant_response_clear(struct grant_response *g)
{
	if (g == NULL)
		return;
	/* SECURITY: both tokens are bearer secrets; wipe before the memory is reused. */
	wipe_free(g->access_token);
	wipe_free(g->refresh_token);
	free(g->scope);
	free(g->jti);
	free(g->family);
	memset(g, 0, sizeof *g);
}

/* A fresh id (jti, family): the time in milliseconds as GRANT_ID_TIME hex
 * digits, then 24 random bytes in base64url (32 characters) -- 43 characters
 * as before, 192 of their bits random.  The time first makes the ids of a
 * node grow: a new grant's row goes at the end of the jti index, on a page
 * the batch's other grants write too, where a random id wrote a page of its
 * own for every grant (issue 34, docs/BENCHMARKS.md).  The time says no more
 * than the grant's iat.  audit.c refuses what looks like a JWT and the tests
 * look for "eyJ" in the audit log, so the rare draw holding it is drawn
 * again. */
#define GRANT_ID_TIME 11              /* 44 bits of milliseconds: until the year 2527 */
static enum cs_err random_id(char out[GRANT_ID_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char r[24];
	struct timespec ts;
	for (int tries = 0; tries < 16; tries++) {
		if (RAND_bytes(r, (int)sizeof r) != 1)
			return CS_ECRYPTO;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
		for (int i = GRANT_ID_TIME - 1; i >= 0; i--) {
			out[i] = hex[ms & 15];
			ms >>= 4;
		}
		enum cs_err e = b64url_encode(r, sizeof r, out + GRANT_ID_TIME,
		    GRANT_ID_LEN + 1 - GRANT_ID_TIME);
		OPENSSL_cleanse(r, sizeof r);
		if (e != CS_OK)
			return e;
		if (strstr(out, "eyJ") == NULL)
			return CS_OK;
	}
	return CS_ECRYPTO;
}

/* Errors that are the server's, not the token's: passed up, never turned
 * into "inactive" or "invalid_grant". */
static bool fatal(enum cs_err e)
{
	return e == CS_ENOMEM || e == CS_EDB || e == CS_EBUSY;
}

/* The shape of a compact JWS: exactly two dots. */
static bool looks_like_jws(const char *t)
{
	size_t dots = 0;
	for (; *t != '\0'; t++)
		if (*t == '.')
			dots++;
	return dots == 2;
}

/* The shape of our refresh tokens (random_token): 43 base64url characters. */
static bool looks_like_refresh(const char *t)
{
	size_t n = 0;
	for (; t[n] != '\0' && n <= SESSION_TOKEN_LEN; n++) {
		char ch = t[n];
		if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_'))
			return false;
	}
	return n == SESSION_TOKEN_LEN;
}

static bool token_present(const char *t)
{
	return t != NULL && t[0] != '\0' && strnlen(t, GRANT_MAX_TOKEN + 1) <= GRANT_MAX_TOKEN;
}

/* "key=id" (an id, never a token) for an audit entry's detail. */
static enum cs_err id_detail(char out[128], const char *key, const char *id)
{
	return str_fmt(out, 128, "%s=%s", key, id);
}

/* One audit entry about consent k; detail is "key=id". */
static enum cs_err audit_k(struct store_conn *c, const struct audit_entry *base,
    const struct consent *k, const char *key, const char *id)
{
	struct audit_entry a = *base;
	char detail[128];
	enum cs_err e = id_detail(detail, key, id);
	if (e != CS_OK)
		return e;
	a.subject = k->subject;
	a.agent = k->agent;
	a.resource = k->resource;
	a.consent_id = k->id;
	a.detail = detail;
	return audit_append(c, &a);
}

/* May consent k still renew grants offline?  The consent must have been
 * given for offline use and the agent must still be configured for it. */
static bool offline_allowed(const struct config *cfg, const struct consent *k)
{
	struct agent_view ag;
	return k->offline && agent_resolve(cfg, k->agent, &ag) && ag.offline;
}

/* --- issuing ----------------------------------------------------------- */

/* Whether an MCP client's access token may be signed for rq->k: aud an
 * [mcp.NAME] URI standing for k's resource, and client_id k's agent, which is
 * an MCP client. */
static bool mcp_token_fits(const struct config *cfg, const struct grant_issue_req *rq)
{
	const struct config_mcp_endpoint *ep = config_mcp_endpoint_by_uri(cfg, rq->audience);
	struct agent_view ag;
	/* SECURITY: the token's aud is what the resource server checks; it must
	 * name an endpoint of the very resource the person consented to, and the
	 * client that holds it must be the consent's own (never a gateway's agent). */
	return ep != NULL && ep->resource != NULL && rq->client_id != NULL &&
	    strcmp(ep->resource, rq->k->resource) == 0 && strcmp(rq->client_id, rq->k->agent) == 0 &&
	    agent_resolve(cfg, rq->k->agent, &ag) && ag.kind != AGENT_CONFIGURED;
}

/* Signs a grant for rq->k (no database): the checks of invariant 8, the
 * claims, the ES256 signature.  CS_OK with *oc: GRANT_ISSUED (then *out and
 * *exp_out written), GRANT_ISSUE_REVOKED for a revoked consent,
 * GRANT_ISSUE_REFUSED for anything else it cannot sign for. */
static enum cs_err issue_sign(const struct config *cfg, const struct keyring *kr,
    const struct grant_issue_req *rq, enum grant_issue_outcome *oc, struct grant_response *out,
    int64_t *exp_out)
{
	enum cs_err e;
	const struct consent *k = rq->k;
	const struct config_resource *res = NULL;
	struct grant_response g;
	json_t *claims = NULL;
	char jti[GRANT_ID_LEN + 1];
	int64_t ttl, exp, now = rq->now;
	bool mcp = rq->audience != NULL;

	memset(&g, 0, sizeof g);
	/* Every refusal below is REFUSED, unless said otherwise. */
	e = CS_OK;
	*oc = GRANT_ISSUE_REFUSED;
	if (k->id == NULL || k->subject == NULL || k->agent == NULL || k->resource == NULL ||
	    cfg->public_url == NULL || (!mcp && cfg->gateway_id == NULL))
		goto out;
	if (k->revoked_at != 0) {
		*oc = GRANT_ISSUE_REVOKED;
		goto out;
	}
	/* SECURITY: a grant never carries a scope the person did not grant
	 * (invariant 8), and never an empty one. */
	if (rq->scope->n == 0 || !scope_set_subset(rq->scope, &k->granted))
		goto out;
	if (mcp ? !mcp_token_fits(cfg, rq) :
	    (res = config_resource(cfg, k->resource)) == NULL || res->uri == NULL)
		goto out;
	ttl = cfg->grant_ttl;
	if (ttl <= 0 || now < 0 || now > INT64_MAX - GRANT_TTL_CAP)
		goto out;
	if (ttl > GRANT_TTL_CAP)
		ttl = GRANT_TTL_CAP;
	/* SECURITY: a grant never outlives its consent. */
	exp = now + ttl;
	if (k->expires_at < exp)
		exp = k->expires_at;
	if (exp <= now)
		goto out;
	if ((e = random_id(jti)) != CS_OK)
		goto out;
	if ((g.scope = scope_set_join(rq->scope)) == NULL || (g.jti = strdup(jti)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	/* RFC 9068 §2.2: an MCP client's token names the client itself and the
	 * resource it asked for as aud; no act: the client is not acting for a
	 * gateway.  A gateway's grant names the gateway and its agent. */
	claims = mcp ?
	    json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I}",
	    "iss", cfg->public_url, "sub", k->subject, "aud", rq->audience,
	    "client_id", rq->client_id, "scope", g.scope, "cid", k->id, "jti", jti,
	    "iat", (json_int_t)now, "exp", (json_int_t)exp) :
	    json_pack("{s:s, s:s, s:s, s:s, s:{s:s}, s:s, s:s, s:s, s:s, s:I, s:I}",
	    "iss", cfg->public_url, "sub", k->subject, "aud", cfg->gateway_id,
	    "client_id", cfg->gateway_id, "act", "sub", k->agent, "scope", g.scope,
	    "resource", res->uri, "cid", k->id, "jti", jti,
	    "iat", (json_int_t)now, "exp", (json_int_t)exp);
	if (claims == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	/* RFC 9449 §6: a grant bound to the gateway's DPoP key names it. */
	if (rq->jkt != NULL &&
	    json_object_set_new(claims, "cnf", json_pack("{s:s}", "jkt", rq->jkt)) != 0) {
		e = CS_ENOMEM;
		goto out;
	}
	if ((e = jwt_sign(kr, GRANT_TYP, claims, &g.access_token)) != CS_OK)
		goto out;
	g.expires_in = exp - now;
	*out = g;
	*exp_out = exp;
	*oc = GRANT_ISSUED;
	memset(&g, 0, sizeof g);
	e = CS_OK;
out:
	json_decref(claims);
	grant_response_clear(&g);
	return e;
}

/* Records the signed grant g for rq->k in the caller's transaction: its jti
 * (in family, when not NULL), the consent's last use, grant.issued, and with
 * mint a refresh token of family (g->refresh_token written). */
static enum cs_err issue_record(struct store_conn *c, const struct grant_issue_req *rq,
    const char *family, bool mint, int64_t exp, struct grant_response *g)
{
	enum cs_err e;
	const struct consent *k = rq->k;
	char rt[SESSION_TOKEN_LEN + 1];
	unsigned char h[STORE_REFRESH_HASH_LEN];

	memset(rt, 0, sizeof rt);
	memset(h, 0, sizeof h);
	if ((e = store_grant_insert(c, g->jti, k->id, family, rq->now, exp)) != CS_OK)
		goto out;
	/* A grant issued is a use of its consent (/me's "last used"). */
	if ((e = consent_touch(c, k->id, rq->now)) != CS_OK)
		goto out;
	if ((e = audit_k(c, &(struct audit_entry){ .ts = rq->now, .actor = rq->actor,
	    .action = "grant.issued", .scopes = g->scope, .outcome = "ok" }, k, "jti", g->jti)) != CS_OK)
		goto out;
	if (family != NULL && mint) {
		/* SECURITY: the refresh token leaves here in clear exactly once; the
		 * database keeps only its SHA-256. */
		if ((e = random_token(rt)) != CS_OK)
			goto out;
		sha256_str(rt, h);
		if ((e = store_refresh_insert(c, h, family, k->id, rq->now)) != CS_OK)
			goto out;
		if ((g->refresh_token = strdup(rt)) == NULL) {
			e = CS_ENOMEM;
			goto out;
		}
	}
out:
	OPENSSL_cleanse(rt, sizeof rt);
	OPENSSL_cleanse(h, sizeof h);
	return e;
}

/* issue_sign then issue_record: signs a grant for consent rq->k with rq->scope
 * (⊆ k's granted, non-empty) and records its jti; with family != NULL also
 * mints a refresh token of that family.  Runs inside the caller's transaction
 * and audits "grant.issued".  CS_OK with *oc: GRANT_ISSUED (*out written),
 * GRANT_ISSUE_REVOKED for a revoked consent, GRANT_ISSUE_REFUSED for a bad
 * scope, an unknown resource or an expiry that is not after now. */
static enum cs_err issue_locked(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const struct grant_issue_req *rq, const char *family,
    enum grant_issue_outcome *oc, struct grant_response *out)
{
	enum cs_err e;
	struct grant_response g;
	int64_t exp = 0;
	memset(&g, 0, sizeof g);
	if ((e = issue_sign(cfg, kr, rq, oc, &g, &exp)) == CS_OK && *oc == GRANT_ISSUED &&
	    (e = issue_record(c, rq, family, family != NULL, exp, &g)) == CS_OK) {
		*out = g;
		memset(&g, 0, sizeof g);
	}
	grant_response_clear(&g);
	return e;
}

/* Whether a grant signed for snapshot a says exactly what one signed for b
 * would: the same consent, person, agent and resource, unrevoked in both,
 * the same end, and the scope still within what b granted. */
static bool same_grant(const struct consent *a, const struct consent *b,
    const struct scope_set *scope)
{
	return a->id != NULL && b->id != NULL && strcmp(a->id, b->id) == 0 &&
	    a->subject != NULL && b->subject != NULL && strcmp(a->subject, b->subject) == 0 &&
	    a->agent != NULL && b->agent != NULL && strcmp(a->agent, b->agent) == 0 &&
	    a->resource != NULL && b->resource != NULL && strcmp(a->resource, b->resource) == 0 &&
	    a->revoked_at == 0 && b->revoked_at == 0 && a->expires_at == b->expires_at &&
	    scope_set_subset(scope, &b->granted);
}

/* The part of grant_issue inside the transaction: the consent read again,
 * the grant recorded (pre, signed outside for rq->k's snapshot, when it still
 * says what one signed now would; else signed here), the family started.
 * Writes nothing unless GRANT_ISSUED. */
static enum cs_err issue_tx(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const struct grant_issue_req *rq, struct grant_response *pre,
    int64_t pre_exp, enum grant_issue_outcome *oc, struct grant_response *out)
{
	enum cs_err e;
	struct consent cur;
	struct grant_response g;
	struct grant_issue_req now_rq;
	char family[GRANT_ID_LEN + 1];
	bool refresh, in_family;
	enum grant_issue_outcome now_oc = GRANT_ISSUE_REFUSED;

	memset(&cur, 0, sizeof cur);
	memset(&g, 0, sizeof g);
	memset(family, 0, sizeof family);
	*oc = GRANT_ISSUE_REFUSED;
	/* SECURITY: rq->k is the caller's snapshot; the consent may have been
	 * revoked or replaced since.  Read it again inside this transaction and
	 * sign only for what is live now. */
	e = consent_get(c, rq->k->id, rq->now, &cur);
	if (e == CS_ENOENT) {
		e = CS_OK;                    /* gone */
		goto out;
	}
	if (e != CS_OK)
		goto out;
	if (rq->with_refresh && !cur.offline)
		goto out;                     /* a refresh token only for an offline consent */
	/* SECURITY: flow A's consent covers nothing while its provider
	 * connection must be made again, whatever the caller's snapshot said. */
	if (rq->live_only && cur.reconnect_required)
		goto out;
	/* An agent no longer configured offline gets grants but no new family. */
	refresh = rq->with_refresh && offline_allowed(cfg, &cur);
	/* An MCP client's token is always in a family: a second use of the
	 * authorization code that issued it revokes the family (OAuth 2.1 §4.1.3). */
	in_family = refresh || rq->audience != NULL;
	if (in_family && (e = random_id(family)) != CS_OK)
		goto out;
	now_rq = *rq;
	now_rq.k = &cur;
	if (pre != NULL && pre->access_token != NULL && same_grant(rq->k, &cur, rq->scope)) {
		if ((e = issue_record(c, &now_rq, in_family ? family : NULL, refresh, pre_exp,
		    pre)) != CS_OK)
			goto out;
		g = *pre;
		memset(pre, 0, sizeof *pre);
	} else {
		if ((e = issue_sign(cfg, kr, &now_rq, &now_oc, &g, &pre_exp)) != CS_OK ||
		    now_oc != GRANT_ISSUED) {
			*oc = now_oc;             /* REVOKED or REFUSED: nothing written */
			goto out;
		}
		if ((e = issue_record(c, &now_rq, in_family ? family : NULL, refresh, pre_exp,
		    &g)) != CS_OK)
			goto out;
	}
	/* SECURITY: the family is bound to the proof's key from its first token. */
	if (refresh && rq->jkt != NULL && (e = store_refresh_bind(c, family, rq->jkt)) != CS_OK)
		goto out;
	/* SECURITY: an MCP family keeps its audience and its client for every refresh. */
	if (refresh && rq->audience != NULL &&
	    (e = store_refresh_audience_put(c, family, rq->audience, rq->client_id)) != CS_OK)
		goto out;
	if (refresh && (e = audit_k(c, &(struct audit_entry){ .ts = rq->now, .actor = rq->actor,
	    .action = "refresh.issued", .scopes = g.scope, .outcome = "ok" }, &cur, "family",
	    family)) != CS_OK)
		goto out;
	if (in_family && (g.family = strdup(family)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	*oc = GRANT_ISSUED;
	*out = g;
	memset(&g, 0, sizeof g);
out:
	grant_response_clear(&g);
	consent_clear(&cur);
	return e;
}

/* grant_issue's and grant_issue_tx's arguments. */
static bool issue_args_ok(const struct store_conn *c, const struct config *cfg,
    const struct grant_issue_req *rq, const enum grant_issue_outcome *oc,
    const struct grant_response *out)
{
	return c != NULL && cfg != NULL && rq != NULL && rq->k != NULL && rq->k->id != NULL &&
	    rq->scope != NULL && oc != NULL && out != NULL &&
	    (rq->audience == NULL) == (rq->client_id == NULL);
}

enum cs_err grant_issue_tx(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const struct grant_issue_req *rq, enum grant_issue_outcome *oc,
    struct grant_response *out)
{
	if (!issue_args_ok(c, cfg, rq, oc, out))
		return CS_EINVAL;
	if (kr == NULL)
		return CS_ECRYPTO;
	return issue_tx(c, cfg, kr, rq, NULL, 0, oc, out);
}

/* issue_tx as store_transact's body: it may run on the writer's thread
 * (store.h), and touches only c and what this points at. */
struct issue_job {
	const struct config          *cfg;
	const struct keyring         *kr;
	const struct grant_issue_req *rq;
	struct grant_response        *pre;
	int64_t                       pre_exp;
	enum grant_issue_outcome     *o;
	struct grant_response        *g;
};

static enum cs_err issue_job_body(struct store_conn *c, void *arg, bool *keep)
{
	struct issue_job *x = arg;
	enum cs_err e = issue_tx(c, x->cfg, x->kr, x->rq, x->pre, x->pre_exp, x->o, x->g);
	*keep = e == CS_OK && *x->o == GRANT_ISSUED;
	return e;
}

static enum cs_err issue_once(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const struct grant_issue_req *rq, enum grant_issue_outcome *oc,
    struct grant_response *out)
{
	enum cs_err e;
	struct grant_response g, pre;
	bool presigned;
	int64_t pre_exp = 0;
	enum grant_issue_outcome pre_oc = GRANT_ISSUE_REFUSED, o = GRANT_ISSUE_REFUSED;

	memset(&g, 0, sizeof g);
	memset(&pre, 0, sizeof pre);
	if (!issue_args_ok(c, cfg, rq, oc, out))
		return CS_EINVAL;
	if (kr == NULL)
		return CS_ECRYPTO;            /* no keys: a server fault, not the caller's */
	/* The signature first, outside the transaction: every transaction takes
	 * its turn at the one writer (store.h), and ES256 is the slowest step of a
	 * grant.  It is signed for the caller's snapshot and kept inside only when
	 * it says exactly what one signed for the consent as it is now would. */
	presigned = issue_sign(cfg, kr, rq, &pre_oc, &pre, &pre_exp) == CS_OK &&
	    pre_oc == GRANT_ISSUED;
	if (!presigned)
		grant_response_clear(&pre);
	struct issue_job job = { cfg, kr, rq, &pre, pre_exp, &o, &g };
	bool kept = false;
	if ((e = store_transact(c, issue_job_body, &job, &kept)) != CS_OK)
		goto out;
	if (!kept) {
		*oc = o;                          /* REVOKED or REFUSED: nothing written */
		goto out;
	}
	metrics_inc(M_GRANTS_ISSUED, rq->audience != NULL ? "authorization_code" : "token_exchange");
	*oc = GRANT_ISSUED;
	*out = g;
	memset(&g, 0, sizeof g);
out:
	grant_response_clear(&g);
	grant_response_clear(&pre);
	return e;
}

/* One transaction with no effect outside the database: run again when
 * another node's transaction conflicted with it (store_retry). */
enum cs_err grant_issue(struct store_conn *c, const struct config *cfg, const struct keyring *kr,
    const struct grant_issue_req *rq, enum grant_issue_outcome *oc, struct grant_response *out)
{
	enum cs_err e;
	int n = 0;
	do
		e = issue_once(c, cfg, kr, rq, oc, out);
	while (store_retry(c, e, &n));
	return e;
}

/* --- refresh tokens ---------------------------------------------------- */

/* Finds the refresh token presented as token and its consent.  CS_EPERM when
 * the token is malformed or unknown (or its consent is).  *r and *k written
 * only on CS_OK; the token's state is for the caller to judge. */
static enum cs_err refresh_find(struct store_conn *c, const char *token, int64_t now,
    unsigned char h[STORE_REFRESH_HASH_LEN], struct store_refresh_row *r, struct consent *k)
{
	enum cs_err e;
	struct store_refresh_row row;
	struct consent kk;

	memset(&row, 0, sizeof row);
	memset(&kk, 0, sizeof kk);
	if (!token_present(token) || !looks_like_refresh(token))
		return CS_EPERM;
	sha256_str(token, h);
	/* The lookup is by hash in SQL: a timing difference there says nothing
	 * about the token.  The check below is defence in depth. */
	if ((e = store_refresh_get(c, h, &row)) != CS_OK)
		goto out;
	if (CRYPTO_memcmp(row.hash, h, STORE_REFRESH_HASH_LEN) != 0) {
		e = CS_EPERM;
		goto out;
	}
	if ((e = consent_get(c, row.consent_id, now, &kk)) != CS_OK)
		goto out;
	*r = row;
	memset(&row, 0, sizeof row);
	*k = kk;
	memset(&kk, 0, sizeof kk);
out:
	if (e == CS_ENOENT)
		e = CS_EPERM;
	store_refresh_row_clear(&row);
	consent_clear(&kk);
	return e;
}

/* Whom family was issued to: *aud and *client for an MCP client's family
 * (malloc'd), both NULL for a gateway's. */
static enum cs_err refresh_owner(struct store_conn *c, const char *family, char **aud,
    char **client)
{
	enum cs_err e = store_refresh_audience(c, family, aud, client);
	if (e == CS_ENOENT) {
		*aud = NULL;
		*client = NULL;
		return CS_OK;
	}
	return e;
}

/* Whether the token's holder (client, NULL: the gateway) is who asks (want,
 * NULL: the gateway).  Client ids are public: no constant-time compare. */
static bool owner_is(const char *client, const char *want)
{
	if (client == NULL || want == NULL)
		return client == want;
	return strcmp(client, want) == 0;
}

/* A refresh token that grant_refresh would accept (scope aside). */
static bool refresh_current(const struct config *cfg, const struct store_refresh_row *r,
    const struct consent *k, int64_t now)
{
	return r->used_at == 0 && r->revoked_at == 0 && consent_is_live(k, now) &&
	    offline_allowed(cfg, k);
}

/* Why a known, unused token x is not current (refresh_current false). */
static enum grant_refresh_outcome refresh_refusal(const struct config *cfg,
    const struct store_refresh_row *r, const struct consent *k, int64_t now)
{
	if (k->revoked_at != 0)
		return GRANT_REFRESH_CONSENT_REVOKED;
	if (r->revoked_at != 0)
		return r->reuse_detected ? GRANT_REFRESH_REUSE_REVOKED : GRANT_REFRESH_REVOKED;
	if (!consent_is_live(k, now))
		return GRANT_REFRESH_EXPIRED;
	return offline_allowed(cfg, k) ? GRANT_REFRESH_INVALID : GRANT_REFRESH_NOT_OFFLINE;
}

/* What grant_refresh found and is working with. */
struct renewal {
	struct store_conn *c;
	const struct config *cfg;
	const struct keyring *kr;
	const struct grant_refresh_req *rq;
	struct store_refresh_row r;            /* the token presented */
	struct consent k;                      /* its consent */
	unsigned char h[STORE_REFRESH_HASH_LEN];
	char *aud, *client;                    /* an MCP family's audience and client, or NULL */
};

/* Inside grant_refresh's transaction, for the current token x->r: the key
 * binding, the narrowing, then the token used up and the new grant issued.
 * *oc says which refusal when not GRANT_REFRESHED. */
static enum cs_err refresh_renew(const struct renewal *x, enum grant_refresh_outcome *oc,
    struct grant_response *out)
{
	char *bound = NULL;
	int changed = 0;
	const struct grant_refresh_req *rq = x->rq;
	/* SECURITY: an MCP family's tokens keep their aud and client exactly. */
	struct grant_issue_req iq = { .k = &x->k, .scope = &x->k.granted, .jkt = rq->jkt,
		.actor = rq->actor, .now = rq->now, .audience = x->aud, .client_id = x->client };
	/* SECURITY: a bound family renews only with a proof by its own key; a
	 * token stolen without the key is not used up by the thief's attempt. */
	enum cs_err e = store_refresh_binding(x->c, x->r.family, &bound);
	if (e != CS_OK && e != CS_ENOENT)
		goto out;
	if (e == CS_OK && (rq->jkt == NULL || strcmp(rq->jkt, bound) != 0)) {
		*oc = GRANT_REFRESH_WRONG_KEY;
		e = CS_OK;
		goto out;
	}
	if (rq->scope != NULL) {
		/* SECURITY: narrowing only; never wider than the consent (invariant 8). */
		if (rq->scope->n == 0 || !scope_set_subset(rq->scope, &x->k.granted)) {
			*oc = GRANT_REFRESH_BAD_SCOPE;
			e = CS_OK;
			goto out;
		}
		iq.scope = rq->scope;
	}
	if ((e = store_refresh_mark_used(x->c, x->h, rq->now, &changed)) != CS_OK)
		goto out;
	*oc = GRANT_REFRESH_INVALID;
	if (!changed)                     /* cannot happen inside BEGIN IMMEDIATE */
		goto out;
	enum grant_issue_outcome io = GRANT_ISSUE_REFUSED;
	if ((e = issue_locked(x->c, x->cfg, x->kr, &iq, x->r.family, &io, out)) != CS_OK)
		goto out;
	if (io != GRANT_ISSUED) {
		/* The scope was checked above: what remains (a resource no longer
		 * configured, say) is the token's problem, invalid_grant. */
		*oc = GRANT_REFRESH_NOT_CONFIGURED;
		goto out;
	}
	*oc = GRANT_REFRESHED;
out:
	free(bound);
	return e;
}

const char *grant_refresh_outcome_description(enum grant_refresh_outcome oc)
{
	switch (oc) {
	case GRANT_REFRESH_REUSED:
		return "the refresh token was already used: a used token presented again means it "
		    "was copied, so its whole family is now revoked (reuse detected); start again with "
		    "a token exchange";
	case GRANT_REFRESH_REUSE_REVOKED:
		return "the refresh token's family was revoked because one of its used tokens was "
		    "presented again (reuse detected); start again with a token exchange";
	case GRANT_REFRESH_REVOKED:
		return "the refresh token was revoked (at /revoke)";
	case GRANT_REFRESH_CONSENT_REVOKED:
		return "the refresh token's consent was revoked";
	case GRANT_REFRESH_EXPIRED:
		return "the refresh token expired with its consent";
	case GRANT_REFRESH_NOT_OFFLINE:
		return "the refresh token's agent or consent no longer allows offline use";
	case GRANT_REFRESH_NOT_CONFIGURED:
		return "the refresh token's resource is no longer configured";
	case GRANT_REFRESH_BAD_SCOPE:
		return "scope is outside the consent";
	case GRANT_REFRESH_WRONG_RESOURCE:
		return "resource is not the one the refresh token was issued for";
	default:
		return "the refresh token is unknown";
	}
}

static enum cs_err refresh_once(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const struct grant_refresh_req *rq, enum grant_refresh_outcome *oc,
    struct grant_response *out)
{
	enum cs_err e;
	struct renewal x = { .c = c, .cfg = cfg, .kr = kr, .rq = rq };
	struct grant_response g;
	enum grant_refresh_outcome o = GRANT_REFRESH_INVALID;
	bool in_tx = false;
	int64_t n = 0;

	memset(&g, 0, sizeof g);
	if (c == NULL || cfg == NULL || rq == NULL || oc == NULL || out == NULL ||
	    (rq->client_id == NULL) != (rq->audience == NULL))
		return CS_EINVAL;
	if (kr == NULL)
		return CS_ECRYPTO;
	if (!token_present(rq->refresh_token)) {
		*oc = GRANT_REFRESH_INVALID;
		return CS_OK;
	}
	if ((e = store_begin(c)) != CS_OK)
		goto out;
	in_tx = true;
	if ((e = refresh_find(c, rq->refresh_token, rq->now, x.h, &x.r, &x.k)) != CS_OK) {
		if (e == CS_EPERM)
			e = CS_OK;
		goto out;
	}
	if ((e = refresh_owner(c, x.r.family, &x.aud, &x.client)) != CS_OK)
		goto out;
	/* SECURITY: only whom the family was issued to may use (or burn) it: the
	 * gateway its own, an MCP client its own.  Anyone else hears "unknown". */
	if (!owner_is(x.client, rq->client_id))
		goto out;
	if (x.r.used_at != 0) {
		/* SECURITY: a used token presented again means it was copied: the
		 * holder and the thief cannot be told apart, so the whole family
		 * dies (RFC 9700 §4.14.2), and that sticks: commit, then refuse. */
		if ((e = store_refresh_revoke_family(c, x.r.family, rq->now, true, &n)) != CS_OK ||
		    (e = audit_k(c, &(struct audit_entry){ .ts = rq->now, .actor = rq->actor,
		    .action = "refresh.reuse_detected", .outcome = "refused" }, &x.k, "family",
		    x.r.family)) != CS_OK ||
		    (e = store_commit(c)) != CS_OK)
			goto out;
		in_tx = false;
		o = GRANT_REFRESH_REUSED;
		goto out;
	}
	/* SECURITY: a refresh token lives exactly as long as its consent. */
	if (!refresh_current(cfg, &x.r, &x.k, rq->now)) {
		o = refresh_refusal(cfg, &x.r, &x.k, rq->now);
		goto out;
	}
	/* SECURITY (RFC 8707): an MCP client names its resource at every refresh,
	 * and it must be the family's: a token for A is never renewed for B. */
	if (x.aud != NULL && (rq->audience == NULL || strcmp(rq->audience, x.aud) != 0)) {
		o = GRANT_REFRESH_WRONG_RESOURCE;
		goto out;
	}
	if ((e = refresh_renew(&x, &o, &g)) != CS_OK || o != GRANT_REFRESHED)
		goto out;
	if ((e = audit_k(c, &(struct audit_entry){ .ts = rq->now, .actor = rq->actor,
	    .action = "refresh.used", .scopes = g.scope, .outcome = "ok" }, &x.k, "family",
	    x.r.family)) != CS_OK ||
	    (e = store_commit(c)) != CS_OK)
		goto out;
	in_tx = false;
	metrics_inc(M_GRANTS_ISSUED, "refresh_token");
	*out = g;
	memset(&g, 0, sizeof g);
out:
	if (in_tx)
		store_rollback(c);
	if (e == CS_OK)
		*oc = o;
	OPENSSL_cleanse(x.h, sizeof x.h);
	grant_response_clear(&g);
	store_refresh_row_clear(&x.r);
	consent_clear(&x.k);
	free(x.aud);
	free(x.client);
	return e;
}

/* As grant_issue: one transaction, run again after a conflict (a copied
 * token raced with its holder on two nodes: the run after the winner's
 * commit sees the token used, and refuses it as reused). */
enum cs_err grant_refresh(struct store_conn *c, const struct config *cfg, const struct keyring *kr,
    const struct grant_refresh_req *rq, enum grant_refresh_outcome *oc,
    struct grant_response *out)
{
	enum cs_err e;
	int n = 0;
	do
		e = refresh_once(c, cfg, kr, rq, oc, out);
	while (store_retry(c, e, &n));
	return e;
}

/* --- validation and introspection -------------------------------------- */

bool grant_claims_have_scope(json_t *claims, const char *scope)
{
	struct scope_set gs = { .n = 0 };
	json_t *sc = json_object_get(claims, "scope");
	bool ok = json_is_string(sc) && scope_set_parse(json_string_value(sc), &gs) == CS_OK &&
	    scope_set_has(&gs, scope);
	scope_set_clear(&gs);
	return ok;
}

static const char *str_claim(json_t *o, const char *name)
{
	json_t *v = json_object_get(o, name);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool int_claim(json_t *o, const char *name, int64_t *out)
{
	json_t *v = json_object_get(o, name);
	if (!json_is_integer(v))
		return false;
	*out = (int64_t)json_integer_value(v);
	return true;
}

/* aud is want, or an array holding want. */
static bool aud_ok(json_t *aud, const char *want)
{
	size_t i;
	json_t *v;
	if (json_is_string(aud))
		return strcmp(json_string_value(aud), want) == 0;
	if (!json_is_array(aud))
		return false;
	json_array_foreach(aud, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), want) == 0)
			return true;
	return false;
}

void grant_check_clear(struct grant_check *g)
{
	if (g == NULL)
		return;
	json_decref(g->claims);
	consent_clear(&g->k);
	memset(g, 0, sizeof *g);
}

/* The claims of token if its signature verifies under kr (jwt_verify's
 * checks: ES256, typ at+jwt, a kid in kr).  From the verified-grant cache
 * when this very token verified under the same key set before and its exp is
 * ahead (*hit true), else by jwt_verify.  Only the signature is remembered:
 * the caller checks claims, times and the database as for a fresh one. */
static enum cs_err verify_grant(const struct keyring *kr, const char *token, int64_t now,
    json_t **cl, bool *hit)
{
	enum cs_err e = grant_cache_get(kr, token, now, cl);
	*hit = e == CS_OK;
	if (e == CS_OK || e == CS_ENOENT)
		metrics_inc2(M_CACHE_LOOKUPS, "grant", *hit ? "hit" : "miss");
	if (e != CS_ENOENT)
		return e;
	return jwt_verify(kr, GRANT_TYP, token, cl);
}

/* grant_validate's checks: CS_EPERM with *why for a refused token. */
/* A grant's claims as validate reads them (pointers into the claims). */
struct grant_claims {
	const char *iss, *sub, *cid, *jti, *client, *actsub, *scope, *resource;
	const char *aud;                 /* an MCP client's token: its aud; NULL: a gateway's */
	int64_t     iat, exp;
};

/* How validate judges a token: as the gateway's grant, as an MCP client's
 * access token for one audience, or as whichever it is (introspection). */
enum validate_as { AS_GATEWAY, AS_MCP, AS_ANY,
	AS_MCP_TOKEN };   /* AS_MCP's checks, the token's own standing (token_fits) for its consent's */

/* The claims every grant carries, for this gateway, within its lifetime:
 * false with *w saying which check failed. */
static bool claims_fit(json_t *cl, const struct config *cfg, int64_t now,
    struct grant_claims *g, const char **w)
{
	g->iss = str_claim(cl, "iss");
	g->sub = str_claim(cl, "sub");
	g->cid = str_claim(cl, "cid");
	g->jti = str_claim(cl, "jti");
	g->client = str_claim(cl, "client_id");
	g->scope = str_claim(cl, "scope");
	g->resource = str_claim(cl, "resource");
	g->actsub = str_claim(json_object_get(cl, "act"), "sub");
	g->aud = NULL;
	if (g->iss == NULL || g->sub == NULL || g->cid == NULL || g->jti == NULL ||
	    g->client == NULL || g->scope == NULL || g->resource == NULL || g->actsub == NULL ||
	    !int_claim(cl, "iat", &g->iat) || !int_claim(cl, "exp", &g->exp))
		return false;
	*w = "not a grant for this gateway";
	if (strcmp(g->iss, cfg->public_url) != 0 || strcmp(g->client, cfg->gateway_id) != 0 ||
	    !aud_ok(json_object_get(cl, "aud"), cfg->gateway_id))
		return false;
	/* Our own clock signed it, so no skew: exp strictly ahead, iat not in the
	 * future, and no lifetime beyond what consentd ever issues. */
	*w = "grant expired";
	if (g->exp <= now)
		return false;
	*w = "grant issued in the future";
	return !(g->iat > now || g->iat >= g->exp || g->exp - g->iat > GRANT_TTL_CAP);
}

/* An MCP client's access token for the endpoint audience, within its
 * lifetime: false with *w saying which check failed. */
static bool mcp_claims_fit(json_t *cl, const struct config *cfg, const char *audience,
    int64_t now, struct grant_claims *g, const char **w)
{
	json_t *aud = json_object_get(cl, "aud");
	memset(g, 0, sizeof *g);
	g->iss = str_claim(cl, "iss");
	g->sub = str_claim(cl, "sub");
	g->cid = str_claim(cl, "cid");
	g->jti = str_claim(cl, "jti");
	g->client = str_claim(cl, "client_id");
	g->scope = str_claim(cl, "scope");
	g->aud = json_is_string(aud) ? json_string_value(aud) : NULL;
	*w = "not a consentd access token";
	if (g->iss == NULL || g->sub == NULL || g->cid == NULL || g->jti == NULL ||
	    g->client == NULL || g->scope == NULL || !int_claim(cl, "iat", &g->iat) ||
	    !int_claim(cl, "exp", &g->exp))
		return false;
	/* SECURITY: a gateway's grant (act, aud the gateway) is not an MCP token,
	 * and aud must name this endpoint exactly: a token for endpoint A is
	 * refused at endpoint B (RFC 8707 §2, RFC 9068 §4). */
	*w = "not an access token for this resource";
	if (json_object_get(cl, "act") != NULL || g->aud == NULL || audience == NULL ||
	    strcmp(g->iss, cfg->public_url) != 0 || strcmp(g->aud, audience) != 0 ||
	    config_mcp_endpoint_by_uri(cfg, audience) == NULL)
		return false;
	*w = "access token expired";
	if (g->exp <= now)
		return false;
	*w = "access token issued in the future";
	return !(g->iat > now || g->iat >= g->exp || g->exp - g->iat > GRANT_TTL_CAP);
}

/* SECURITY: revocation is immediate for everything consentd checks: the
 * grant's row, its consent (live, not revoked) and what the grant claims of
 * it.  CS_OK with *kk the consent; CS_EPERM (or a store error) with *w. */
static enum cs_err consent_fits(struct store_conn *c, const struct config *cfg,
    const struct grant_claims *g, int64_t now, struct consent *kk, const char **w)
{
	struct store_grant_row row;
	struct scope_set sc;
	const struct config_resource *res;
	enum cs_err e;
	bool read = false;
	memset(&row, 0, sizeof row);
	memset(&sc, 0, sizeof sc);
	*w = "grant unknown to this consentd";
	/* SECURITY: the grant's row and its consent from the database on every
	 * call (revocation), in one statement; without a row, the grant or its
	 * consent is unknown, and the two reads below say which. */
	if ((e = consent_of_grant(c, g->jti, now, &row, kk)) == CS_OK)
		read = true;
	else if (e != CS_ENOENT || (e = store_grant_get(c, g->jti, &row)) != CS_OK)
		goto out;
	e = CS_EPERM;
	*w = "grant revoked";
	if (row.revoked_at != 0)
		goto out;
	*w = "grant does not match its consent";
	if (strcmp(row.consent_id, g->cid) != 0)
		goto out;
	*w = "the grant's consent is gone";
	if (!read && (e = consent_get(c, g->cid, now, kk)) != CS_OK)
		goto out;
	e = CS_EPERM;
	*w = "the grant's consent was revoked";
	if (kk->revoked_at != 0)
		goto out;
	*w = "the grant's consent expired";
	if (!consent_is_live(kk, now))
		goto out;
	*w = "grant does not match its consent";
	if (strcmp(kk->subject, g->sub) != 0)
		goto out;
	if (g->aud != NULL) {
		/* An MCP client's token: its client is the consent's agent, and its
		 * endpoint stands for the consent's resource. */
		const struct config_mcp_endpoint *ep = config_mcp_endpoint_by_uri(cfg, g->aud);
		if (strcmp(kk->agent, g->client) != 0 || ep == NULL || ep->resource == NULL ||
		    strcmp(ep->resource, kk->resource) != 0)
			goto out;
	} else if (strcmp(kk->agent, g->actsub) != 0 ||
	    (res = config_resource(cfg, kk->resource)) == NULL || res->uri == NULL ||
	    strcmp(res->uri, g->resource) != 0)
		goto out;
	if (scope_set_parse(g->scope, &sc) != CS_OK || sc.n == 0 ||
	    !scope_set_subset(&sc, &kk->granted))
		goto out;
	e = CS_OK;
out:
	store_grant_row_clear(&row);
	scope_set_clear(&sc);
	return e;
}

static enum cs_err token_fits(struct store_conn *c, const struct config *cfg,
    const struct grant_claims *g, int64_t now, struct consent *kk, const char **w);

static enum cs_err validate(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const char *token, enum validate_as as, const char *audience,
    int64_t now, struct grant_check *out)
{
	enum cs_err e;
	json_t *cl = NULL;
	struct consent kk;
	struct grant_claims g;
	const char *w = as == AS_MCP || as == AS_MCP_TOKEN ? "not a consentd access token" :
	    "not a consentd grant";
	bool hit = false;

	memset(&kk, 0, sizeof kk);
	e = CS_EPERM;
	if (kr == NULL || !token_present(token) || cfg->public_url == NULL ||
	    (as == AS_GATEWAY && cfg->gateway_id == NULL))
		goto out;
	/* SECURITY: only consentd's own keys, ES256 and typ at+jwt (invariant 7):
	 * an IdP token, an alg-none or HMAC token and a foreign key all fail here.
	 * A cache hit stands for this check alone, never for the ones below. */
	if ((e = verify_grant(kr, token, now, &cl, &hit)) != CS_OK) {
		if (e != CS_ENOMEM)
			e = CS_EPERM;
		goto out;
	}
	e = CS_EPERM;
	if (as == AS_ANY) {
		/* Introspection: a gateway's grant has act; an MCP client's token
		 * is judged for the audience it names. */
		as = json_object_get(cl, "act") != NULL ? AS_GATEWAY : AS_MCP;
		audience = str_claim(cl, "aud");
		if (as == AS_GATEWAY && cfg->gateway_id == NULL)
			goto out;
	}
	if (as == AS_GATEWAY ? !claims_fit(cl, cfg, now, &g, &w) :
	    !mcp_claims_fit(cl, cfg, audience, now, &g, &w))
		goto out;
	if ((e = as == AS_MCP_TOKEN ? token_fits(c, cfg, &g, now, &kk, &w) :
	    consent_fits(c, cfg, &g, now, &kk, &w)) != CS_OK)
		goto out;
	/* Only a grant that passed every check is remembered, and only its
	 * signature and claims, until its exp; before anyone may change cl. */
	if (!hit)
		grant_cache_put(kr, token, cl, g.exp, now);
	out->claims = cl;
	cl = NULL;
	out->k = kk;
	memset(&kk, 0, sizeof kk);
	w = NULL;
	e = CS_OK;
out:
	if (e == CS_ENOENT)
		e = CS_EPERM;
	out->why = e == CS_EPERM ? w : e == CS_OK ? NULL : "the grant could not be checked";
	json_decref(cl);
	consent_clear(&kk);
	return e;
}

enum cs_err grant_validate(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const char *token, int64_t now, struct grant_check *out)
{
	enum cs_err e;
	if (c == NULL || cfg == NULL || out == NULL)
		return CS_EINVAL;
	memset(out, 0, sizeof *out);
	e = validate(c, cfg, kr, token, AS_GATEWAY, NULL, now, out);
	out->valid = e == CS_OK;
	return e == CS_EPERM ? CS_OK : e;
}

/* grant_validate_mcp and _mcp_token: validate as as, a refusal in out. */
static enum cs_err validate_mcp(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const char *token, enum validate_as as, const char *audience,
    int64_t now, struct grant_check *out)
{
	enum cs_err e;
	if (c == NULL || cfg == NULL || out == NULL)
		return CS_EINVAL;
	memset(out, 0, sizeof *out);
	e = validate(c, cfg, kr, token, as, audience, now, out);
	out->valid = e == CS_OK;
	return e == CS_EPERM ? CS_OK : e;
}

enum cs_err grant_validate_mcp(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const char *token, const char *audience, int64_t now,
    struct grant_check *out)
{
	return validate_mcp(c, cfg, kr, token, AS_MCP, audience, now, out);
}

/* The token's own standing for the gateway (grant_validate_mcp_token): its
 * row, and the consent it was issued under, whatever that consent's state.
 * CS_OK with *kk; CS_EPERM (or a store error) with *w. */
static enum cs_err token_fits(struct store_conn *c, const struct config *cfg,
    const struct grant_claims *g, int64_t now, struct consent *kk, const char **w)
{
	struct store_grant_row row;
	const struct config_mcp_endpoint *ep = config_mcp_endpoint_by_uri(cfg, g->aud);
	enum cs_err e;
	bool read = false;
	memset(&row, 0, sizeof row);
	*w = "grant unknown to this consentd";
	/* The grant's row and its consent in one statement, as consent_fits
	 * reads them; without a row, the two reads below say which is missing. */
	if ((e = consent_of_grant(c, g->jti, now, &row, kk)) == CS_OK)
		read = true;
	else if (e != CS_ENOENT || (e = store_grant_get(c, g->jti, &row)) != CS_OK)
		goto out;
	e = CS_EPERM;
	*w = "grant does not match its consent";
	if (strcmp(row.consent_id, g->cid) != 0)
		goto out;
	*w = "the grant's consent is gone";
	if (!read && (e = consent_get(c, g->cid, now, kk)) != CS_OK)
		goto out;
	e = CS_EPERM;
	*w = "grant does not match its consent";
	if (strcmp(kk->subject, g->sub) != 0 || strcmp(kk->agent, g->client) != 0 || ep == NULL ||
	    ep->resource == NULL || strcmp(ep->resource, kk->resource) != 0)
		goto out;
	/* SECURITY: a token revoked on its own (RFC 7009 by its client, or its
	 * refresh family's reuse detection) is dead.  One revoked only because its
	 * consent ended -- consent_revoke revokes the consent's grants at the same
	 * instant -- still names the person, the client and the endpoint: the
	 * gateway then looks up the person's current consent (issue #31). */
	*w = "grant revoked";
	if (row.revoked_at != 0 && !(kk->revoked_at != 0 && row.revoked_at >= kk->revoked_at))
		goto out;
	e = CS_OK;
out:
	store_grant_row_clear(&row);
	return e;
}

enum cs_err grant_validate_mcp_token(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const char *token, const char *audience, int64_t now,
    struct grant_check *out)
{
	return validate_mcp(c, cfg, kr, token, AS_MCP_TOKEN, audience, now, out);
}

/* The active answer for a current refresh token of a live consent: a
 * gateway's family (aud NULL), or an MCP client's (its aud and client). */
static json_t *refresh_answer(const struct config *cfg, const struct consent *k,
    const char *aud, const char *client)
{
	json_t *v = NULL;
	char *scope = scope_set_join(&k->granted);
	if (scope != NULL && aud != NULL)
		v = json_pack("{s:b, s:s, s:s, s:s, s:s, s:s, s:s, s:I}",
		    "active", 1, "token_use", "refresh", "client_id", client, "aud", aud,
		    "sub", k->subject, "scope", scope, "cid", k->id,
		    "exp", (json_int_t)k->expires_at);
	else if (scope != NULL)
		v = json_pack("{s:b, s:s, s:s, s:s, s:s, s:s, s:{s:s}, s:I}",
		    "active", 1, "token_use", "refresh", "client_id", cfg->gateway_id,
		    "sub", k->subject, "scope", scope, "cid", k->id, "act", "sub", k->agent,
		    "exp", (json_int_t)k->expires_at);
	free(scope);
	return v;
}

/* A bound refresh family's cnf (RFC 9449 §6.2) on its introspection answer. */
static enum cs_err refresh_cnf(struct store_conn *c, const char *family, json_t *v)
{
	char *jkt = NULL;
	enum cs_err e = store_refresh_binding(c, family, &jkt);
	if (e == CS_ENOENT)
		return CS_OK;
	if (e == CS_OK && json_object_set_new(v, "cnf", json_pack("{s:s}", "jkt", jkt)) != 0)
		e = CS_ENOMEM;
	free(jkt);
	return e;
}

enum cs_err grant_introspect(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const char *token, int64_t now, json_t **out)
{
	enum cs_err e = CS_OK;
	json_t *v = NULL;
	struct consent k;
	struct store_refresh_row r;
	unsigned char h[STORE_REFRESH_HASH_LEN];
	char *aud = NULL, *client = NULL;

	memset(&k, 0, sizeof k);
	memset(&r, 0, sizeof r);
	memset(h, 0, sizeof h);
	if (c == NULL || cfg == NULL || out == NULL)
		return CS_EINVAL;
	if (!token_present(token) || cfg->gateway_id == NULL)
		goto answer;
	if (looks_like_jws(token)) {
		struct grant_check gc;
		memset(&gc, 0, sizeof gc);
		e = validate(c, cfg, kr, token, AS_ANY, NULL, now, &gc);
		v = gc.claims;
		k = gc.k;
		/* A gateway's grant names the gateway; an MCP client's token its
		 * client, as its own client_id claim says. */
		if (e == CS_OK &&
		    (json_object_set_new(v, "active", json_true()) != 0 ||
		    json_object_set_new(v, "token_use", json_string("grant")) != 0 ||
		    json_object_set_new(v, "token_type", json_string(
		    json_object_get(v, "cnf") != NULL ? "DPoP" : "Bearer")) != 0 ||
		    (json_object_get(v, "act") != NULL &&
		    json_object_set_new(v, "client_id", json_string(cfg->gateway_id)) != 0)))
			e = CS_ENOMEM;
	} else {
		e = refresh_find(c, token, now, h, &r, &k);
		if (e == CS_OK && (e = refresh_owner(c, r.family, &aud, &client)) == CS_OK) {
			if (!refresh_current(cfg, &r, &k, now))
				e = CS_EPERM;
			else if ((v = refresh_answer(cfg, &k, aud, client)) == NULL)
				e = CS_ENOMEM;
			else
				e = refresh_cnf(c, r.family, v);
		}
	}
	if (fatal(e))
		goto out;
	if (e != CS_OK) {
		json_decref(v);
		v = NULL;
	}
answer:
	/* SECURITY: an inactive answer says nothing more (RFC 7662 §2.2). */
	if (v == NULL && (v = json_pack("{s:b}", "active", 0)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	*out = v;
	v = NULL;
	e = CS_OK;
out:
	json_decref(v);
	OPENSSL_cleanse(h, sizeof h);
	store_refresh_row_clear(&r);
	consent_clear(&k);
	free(aud);
	free(client);
	return e;
}

/* --- revocation -------------------------------------------------------- */

/* Whether verified claims cl are a token of who (NULL: the gateway, an
 * MCP client's client_id otherwise). */
static bool grant_of(json_t *cl, const struct config *cfg, const char *who)
{
	const char *client = str_claim(cl, "client_id");
	bool gateway = json_object_get(cl, "act") != NULL;
	if (client == NULL)
		return false;
	if (who == NULL)
		return gateway && cfg->gateway_id != NULL && strcmp(client, cfg->gateway_id) == 0;
	return !gateway && strcmp(client, who) == 0;
}

/* Revokes the grant whose jti a verified token names, when it is who's
 * (grant_of); audits "grant.revoked" when it was live. */
static enum cs_err revoke_grant(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const char *token, const char *who, const char *actor, int64_t now)
{
	enum cs_err e;
	json_t *cl = NULL;
	struct store_grant_row row;
	struct consent k;
	const char *jti;
	char detail[128];
	bool in_tx = false, have_k = false;
	int changed = 0;

	memset(&row, 0, sizeof row);
	memset(&k, 0, sizeof k);
	/* SECURITY: only a grant signed with our keys may revoke anything: a
	 * forged token naming someone's jti must not end their grant. */
	if (kr == NULL || (e = jwt_verify(kr, GRANT_TYP, token, &cl)) != CS_OK) {
		e = CS_OK;
		goto out;
	}
	/* SECURITY (RFC 7009 §2.1): a client revokes only its own tokens; any
	 * other is left alone, and the answer does not say so. */
	if ((jti = str_claim(cl, "jti")) == NULL || !grant_of(cl, cfg, who))
		goto out;
	if ((e = store_begin(c)) != CS_OK)
		goto out;
	in_tx = true;
	if ((e = store_grant_get(c, jti, &row)) != CS_OK) {
		if (e == CS_ENOENT)
			e = CS_OK;
		goto out;
	}
	if ((e = store_grant_revoke(c, jti, now, &changed)) != CS_OK)
		goto out;
	if (changed) {
		e = consent_get(c, row.consent_id, now, &k);
		if (e != CS_OK && e != CS_ENOENT)
			goto out;
		have_k = e == CS_OK;
		if ((e = id_detail(detail, "jti", row.jti)) != CS_OK ||
		    (e = audit_append(c, &(struct audit_entry){ .ts = now, .actor = actor,
		    .action = "grant.revoked", .subject = have_k ? k.subject : NULL,
		    .agent = have_k ? k.agent : NULL, .resource = have_k ? k.resource : NULL,
		    .consent_id = have_k ? k.id : row.consent_id, .outcome = "ok",
		    .detail = detail })) != CS_OK)
			goto out;
	}
	if ((e = store_commit(c)) != CS_OK)
		goto out;
	in_tx = false;
out:
	if (in_tx)
		store_rollback(c);
	json_decref(cl);
	store_grant_row_clear(&row);
	consent_clear(&k);
	return e;
}

/* Revokes the family of a refresh token, when it is who's (NULL: the
 * gateway's); audits "refresh.revoked" when any of it was unrevoked. */
static enum cs_err revoke_refresh(struct store_conn *c, const char *token, const char *who,
    const char *actor, int64_t now)
{
	enum cs_err e;
	struct store_refresh_row r;
	struct consent k;
	unsigned char h[STORE_REFRESH_HASH_LEN];
	bool in_tx = false;
	int64_t n = 0;
	char *aud = NULL, *client = NULL;

	memset(&r, 0, sizeof r);
	memset(&k, 0, sizeof k);
	memset(h, 0, sizeof h);
	if ((e = store_begin(c)) != CS_OK)
		goto out;
	in_tx = true;
	if ((e = refresh_find(c, token, now, h, &r, &k)) != CS_OK) {
		if (e == CS_EPERM)            /* unknown: fine (RFC 7009 §2.2) */
			e = CS_OK;
		goto out;
	}
	if ((e = refresh_owner(c, r.family, &aud, &client)) != CS_OK)
		goto out;
	if (!owner_is(client, who))
		goto out;                     /* SECURITY: not the caller's: nothing, silently */
	if ((e = store_refresh_revoke_family(c, r.family, now, false, &n)) != CS_OK)
		goto out;
	if (n > 0 && (e = audit_k(c, &(struct audit_entry){ .ts = now, .actor = actor,
	    .action = "refresh.revoked", .outcome = "ok" }, &k, "family", r.family)) != CS_OK)
		goto out;
	if ((e = store_commit(c)) != CS_OK)
		goto out;
	in_tx = false;
out:
	if (in_tx)
		store_rollback(c);
	OPENSSL_cleanse(h, sizeof h);
	store_refresh_row_clear(&r);
	consent_clear(&k);
	free(aud);
	free(client);
	return e;
}

static enum cs_err revoke_as(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const char *token, const char *who, const char *actor, int64_t now)
{
	if (c == NULL || cfg == NULL)
		return CS_EINVAL;
	if (!token_present(token))
		return CS_OK;
	if (looks_like_jws(token))
		return revoke_grant(c, cfg, kr, token, who, actor, now);
	if (!looks_like_refresh(token))
		return CS_OK;
	return revoke_refresh(c, token, who, actor, now);
}

enum cs_err grant_revoke(struct store_conn *c, const struct config *cfg, const struct keyring *kr,
    const char *token, const char *actor, int64_t now)
{
	return revoke_as(c, cfg, kr, token, NULL, actor, now);
}

enum cs_err grant_revoke_mcp(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, const char *token, const char *client_id, const char *actor,
    int64_t now)
{
	if (client_id == NULL)
		return CS_EINVAL;
	return revoke_as(c, cfg, kr, token, client_id, actor, now);
}
