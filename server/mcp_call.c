/* mcp_call.c -- the MCP gateway's decisions for one request (mcp_call.h):
 * action, scope, the person's current consent, the approval gate and the
 * provider token's release, and the "mcp.call" audit entry.  It knows no
 * HTTP.  It must never release a provider token without a live consent that
 * grants the call's scope, nor decide on anything but the exact arguments. */
#include <stdbool.h>
#include <string.h>

#include <openssl/crypto.h>

#include "audit.h"
#include "buf.h"
#include "jcs.h"
#include "mcp_call.h"
#include "mcp_rpc.h"

void mcp_call_plan_clear(struct mcp_call_plan *p)
{
	if (p == NULL)
		return;
	consent_clear(&p->live);
	exchange_release_clear(&p->rel);
	OPENSSL_cleanse(p, sizeof *p);
}

static bool is_tool_call(const struct mcp_call_req *rq)
{
	return rq->tool != NULL;
}

/* out->ask for a pending consent request or approval. */
static enum cs_err ask(const struct config *cfg, const struct mcp_call_req *rq,
    enum mcp_ask_kind kind, const char *id, struct mcp_call_plan *out)
{
	const struct config_resource *res = config_resource(cfg, rq->ep->resource);
	const char *rname = res != NULL && res->name != NULL ? res->name : rq->ep->resource;
	enum cs_err e;
	out->outcome = MCP_CALL_ASK;
	out->ask.kind = kind;
	if (id == NULL || (e = str_fmt(out->ask.pending, sizeof out->ask.pending, "%s", id)) != CS_OK)
		return CS_EINVAL;
	if ((e = str_fmt(out->ask.url, sizeof out->ask.url, "%s/%s/%s", cfg->public_url,
	    kind == MCP_ASK_APPROVAL ? "approve" : "consent", id)) != CS_OK)
		return e;
	if (kind == MCP_ASK_APPROVAL)
		return str_fmt(out->ask.message, sizeof out->ask.message, "The call of %s needs your "
		    "approval of these exact arguments: open the link, approve or deny, then retry "
		    "the call.", rq->tool);
	return str_fmt(out->ask.message, sizeof out->ask.message, "This client needs your "
	    "consent to %s: open the link, decide, then retry the call.", rname);
}

/* The person's current consent, when it is live, connected and grants the
 * call's scope: *ok. */
static enum cs_err current(struct store_conn *c, const struct mcp_call_req *rq, const char *scope,
    struct mcp_call_plan *out, bool *ok)
{
	enum cs_err e;
	*ok = false;
	consent_clear(&out->live);
	e = consent_current(c, rq->token_consent->user_id, rq->token_consent->agent,
	    rq->ep->resource, rq->now, &out->live);
	if (e == CS_ENOENT)
		return CS_OK;
	if (e != CS_OK)
		return e;
	*ok = consent_is_live(&out->live, rq->now) && !out->live.reconnect_required &&
	    (scope == NULL || scope_set_has(&out->live.granted, scope));
	return CS_OK;
}

/* No usable consent: a consent request for the token's scopes (flow A's
 * state machine, the client as the agent).  *go when it turned out live. */
static enum cs_err ask_consent(struct store_conn *c, const struct config *cfg,
    const struct mcp_call_req *rq, struct mcp_call_plan *out, bool *go)
{
	struct consent_answer a;
	enum cs_err e = CS_OK;
	*go = false;
	/* An expired pending request ends and the next call starts anew: twice at most. */
	for (int round = 0; round < 2; round++) {
		struct consent_ask q = { .issuer = rq->issuer, .subject = rq->token_consent->subject,
			.agent = rq->token_consent->agent, .resource = rq->ep->resource,
			.requested = rq->token_scopes, .actor = rq->actor, .now = rq->now,
			.limits = rq->limits };
		memset(&a, 0, sizeof a);
		if ((e = consent_exchange(c, cfg, &q, &a)) != CS_OK)
			return e;
		switch (a.outcome) {
		case CONSENT_GRANT:
			*go = true;
			break;
		case CONSENT_REQUIRED:
		case CONSENT_PENDING:
		case CONSENT_SLOW_DOWN:
			e = ask(cfg, rq, MCP_ASK_CONSENT, a.request_id, out);
			break;
		case CONSENT_DENIED:
			out->outcome = MCP_CALL_DENIED;
			out->until = a.denied_until;
			break;
		case CONSENT_EXPIRED:
			consent_answer_clear(&a);
			continue;
		default:
			out->outcome = MCP_CALL_TOO_MANY;
			out->retry_after = a.retry_after > 0 ? a.retry_after : 1;
			break;
		}
		consent_answer_clear(&a);
		return e;
	}
	out->outcome = MCP_CALL_TOO_MANY;
	out->retry_after = 1;
	return CS_OK;
}

/* The approval gate's answer as the plan's outcome. */
static enum cs_err from_approval(const struct config *cfg, const struct mcp_call_req *rq,
    struct mcp_call_plan *out)
{
	const struct approval_answer *a = &out->rel.approval;
	switch (a->outcome) {
	case APPROVAL_NEEDED:
	case APPROVAL_PENDING:
	case APPROVAL_SLOW_DOWN:
		return ask(cfg, rq, MCP_ASK_APPROVAL, a->approval_id, out);
	case APPROVAL_DENIED:
		out->outcome = MCP_CALL_DENIED;
		out->until = rq->now + (a->retry_after > 0 ? a->retry_after : 0);
		return CS_OK;
	default:
		out->outcome = MCP_CALL_TOO_MANY;
		out->retry_after = a->retry_after > 0 ? a->retry_after : 1;
		return CS_OK;
	}
}

/* tools/call: the action, the scope, the digest. */
static enum cs_err tool_action(const struct config *cfg, const struct mcp_call_req *rq,
    json_t *args, struct mcp_call_plan *out, bool *go)
{
	*go = false;
	out->act = config_action(cfg, rq->ep->resource, rq->tool);
	if (out->act == NULL && rq->ep->unmapped == UNMAPPED_REFUSE) {
		out->outcome = MCP_CALL_UNMAPPED;
		return CS_OK;
	}
	if (out->act == NULL) {
		/* unmapped = allow: an action of its own, no approval, its configured scope. */
		out->unmapped = (struct config_action){ .resource = rq->ep->resource,
			.name = (char *)rq->tool, .description = (char *)"", .scope = rq->ep->unmapped_scope,
			.approval = APPROVAL_NONE };
		out->act = &out->unmapped;
	}
	out->scope = out->act->scope;
	/* SECURITY: the token caps the scopes: a tool beyond them is a step-up
	 * at consentd's /authorize (403 insufficient_scope), never an elicitation. */
	if (out->scope == NULL || !scope_set_has(rq->token_scopes, out->scope)) {
		out->outcome = MCP_CALL_SCOPE;
		return CS_OK;
	}
	enum cs_err e = approval_digest(args, out->digest);
	if (e != CS_OK)
		return e;
	*go = true;
	return CS_OK;
}

/* Not a tools/call: the provider token for the method, with a live consent. */
static enum cs_err release_other(struct store_conn *c, const struct config *cfg,
    const struct mcp_call_req *rq, struct mcp_call_plan *out)
{
	struct vault_release_req vr = { .k = &out->live, .action = rq->method, .actor = rq->actor,
		.now = rq->now };
	enum cs_err e = vault_release(rq->vault, c, cfg, &vr, &out->rel.tok);
	if (e != CS_OK)
		return e;
	out->outcome = out->rel.tok.outcome == VAULT_RELEASED ? MCP_CALL_RELEASED :
	    out->rel.tok.outcome == VAULT_RELEASE_UNAVAILABLE ? MCP_CALL_PROVIDER_DOWN :
	    MCP_CALL_NO_CONSENT;
	return CS_OK;
}

/* exchange_release's writes of a tool call: its "forwarded" entry, in the
 * transaction that releases the token -- written before the call goes out,
 * and one durable commit per call instead of two. */
struct release_entry {
	const struct mcp_call_req *rq;
	const struct mcp_call_plan *p;
};
static enum cs_err release_entry_write(struct store_conn *c, void *ctx);

/* A tool call with its consent: the approval gate on the exact arguments,
 * and the release (once); an expired or meanwhile used approval is asked
 * again, at most twice. */
static enum cs_err release_tool_call(struct store_conn *c, const struct config *cfg,
    const struct mcp_call_req *rq, json_t *args, struct mcp_call_plan *out)
{
	enum cs_err e;
	bool go = false;

	for (int round = 0; round < 2; round++) {
		struct release_entry re = { rq, out };
		struct exchange_release_req xr = { .vault = rq->vault, .k = &out->live, .act = out->act,
			.params = args, .canonical_max = 2 * MCP_RPC_MAX_BODY + APPROVAL_MAX_CANONICAL,
			.actor = rq->actor, .now = rq->now, .limits = rq->limits,
			.with = release_entry_write, .with_ctx = &re };
		exchange_release_clear(&out->rel);
		memset(&out->rel, 0, sizeof out->rel);
		if ((e = exchange_release(c, cfg, &xr, &out->rel)) != CS_OK)
			return e;
		switch (out->rel.outcome) {
		case EXCHANGE_RELEASED:
			out->outcome = MCP_CALL_RELEASED;
			return CS_OK;
		case EXCHANGE_APPROVAL:
			if (out->rel.approval.outcome == APPROVAL_EXPIRED)
				continue;       /* the next call starts a new approval */
			return from_approval(cfg, rq, out);
		case EXCHANGE_APPROVAL_USED:
			continue;           /* used meanwhile: asked again */
		case EXCHANGE_PROVIDER_DOWN:
			out->outcome = MCP_CALL_PROVIDER_DOWN;
			return CS_OK;
		default:
			/* The consent ended or its connection needs the person: asked again. */
			e = ask_consent(c, cfg, rq, out, &go);
			if (e == CS_OK && go) {
				out->outcome = MCP_CALL_NO_CONSENT;
			}
			return e;
		}
	}
	out->outcome = MCP_CALL_TOO_MANY;
	out->retry_after = 1;
	return CS_OK;
}

enum cs_err mcp_call_prepare(struct store_conn *c, const struct config *cfg,
    const struct mcp_call_req *rq, struct mcp_call_plan *out)
{
	json_t *args = NULL;
	enum cs_err e;
	bool go = false, ok = false;
	if (c == NULL || cfg == NULL || rq == NULL || rq->ep == NULL || rq->token_consent == NULL ||
	    rq->token_scopes == NULL || rq->method == NULL || out == NULL)
		return CS_EINVAL;
	memset(out, 0, sizeof *out);
	if (is_tool_call(rq)) {
		args = rq->arguments != NULL ? json_incref(rq->arguments) : json_object();
		if (args == NULL)
			return CS_ENOMEM;
		if ((e = tool_action(cfg, rq, args, out, &go)) != CS_OK || !go)
			goto out;
	}
	/* SECURITY: the authority is the person's consent as it is now, never the
	 * one the token was issued under (revoked on /me: asked again). */
	if ((e = current(c, rq, out->scope, out, &ok)) != CS_OK)
		goto out;
	if (!ok && !is_tool_call(rq)) {
		out->outcome = MCP_CALL_NO_CONSENT;
		goto out;
	}
	if (!ok) {
		if ((e = ask_consent(c, cfg, rq, out, &go)) != CS_OK || !go)
			goto out;
		if ((e = current(c, rq, out->scope, out, &ok)) != CS_OK)
			goto out;
		if (!ok) {
			out->outcome = MCP_CALL_NO_CONSENT;
			goto out;
		}
	}
	if (!is_tool_call(rq)) {
		e = release_other(c, cfg, rq, out);
		goto out;
	}
	/* The call's id, named by its "forwarded" entry and by the entry of its
	 * answer, which the audit queue writes later (audit_queue.h). */
	if (rq->call_id != NULL && rq->call_id[0] != '\0')
		e = str_fmt(out->call_id, sizeof out->call_id, "%s", rq->call_id);
	else
		e = b64url_random_id(out->call_id);
	if (e != CS_OK)
		goto out;
	e = release_tool_call(c, cfg, rq, args, out);
out:
	json_decref(args);
	return e;
}

/* --- the audit entry ------------------------------------------------------ */

/* Known credential prefixes: GitHub, GitLab, Slack, OpenAI-style and Stripe
 * keys, AWS access key ids, Google OAuth access tokens, an HTTP credential. */
static const char *const secret_prefixes[] = { "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
	"github_pat_", "glpat-", "xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-", "sk-", "sk_live_",
	"rk_live_", "AKIA", "ASIA", "ya29.", "Bearer ", "bearer ", "Basic ", "basic ", NULL };

/* A run of at least 32 characters of [A-Za-z0-9_-+/=.] holding both letters
 * and digits: what a random key, a session id or a base64 secret looks like
 * (words, sentences, ids of few digits and numbers do not). */
static bool random_run(const char *s)
{
	size_t run = 0;
	bool letter = false, digit = false;
	for (const char *p = s;; p++) {
		char ch = *p;
		bool in = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
		    ch == '_' || ch == '-' || ch == '+' || ch == '/' || ch == '=' || ch == '.';
		if (in) {
			run++;
			letter = letter || (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z');
			digit = digit || (ch >= '0' && ch <= '9');
			continue;
		}
		if (run >= 32 && letter && digit)
			return true;
		if (ch == '\0')
			return false;
		run = 0;
		letter = digit = false;
	}
}

static bool text_secret_like(const char *s)
{
	for (size_t i = 0; secret_prefixes[i] != NULL; i++)
		if (strstr(s, secret_prefixes[i]) != NULL)
			return true;
	return strstr(s, "eyJ") != NULL || random_run(s);
}

bool mcp_call_secret_like(const json_t *v)
{
	const char *k;
	json_t *m;
	size_t i;
	switch (json_typeof(v)) {
	case JSON_STRING:
		return text_secret_like(json_string_value(v));
	case JSON_OBJECT:
		json_object_foreach((json_t *)v, k, m)
			if (text_secret_like(k) || mcp_call_secret_like(m))
				return true;
		return false;
	case JSON_ARRAY:
		json_array_foreach(v, i, m)
			if (mcp_call_secret_like(m))
				return true;
		return false;
	default:
		return false;
	}
}

static enum cs_err append_call(struct store_conn *c, const struct mcp_call_req *rq,
    const struct mcp_call_plan *p, const char *outcome, const char *detail, bool alone)
{
	const struct consent *k = p->live.id != NULL ? &p->live : rq->token_consent;
	const char *req_id = p->outcome == MCP_CALL_ASK ? p->ask.pending :
	    p->rel.approval.approval_id;
	struct audit_entry a = { .ts = rq->now, .actor = rq->actor,
	    .action = "mcp.call", .subject = k->subject, .agent = k->agent,
	    .resource = rq->ep->resource, .scopes = p->scope, .consent_id = k->id,
	    .request_id = req_id, .outcome = outcome, .detail = detail };
	return alone ? audit_append_alone(c, &a) : audit_append(c, &a);
}

/* "call=ID; " (a released call), "endpoint=E; tool=T; digest=D". */
static enum cs_err call_detail(struct buf *d, const struct mcp_call_req *rq,
    const struct mcp_call_plan *p)
{
	enum cs_err e = CS_OK;
	if (p->call_id[0] != '\0')
		e = buf_printf(d, "call=%s; ", p->call_id);
	if (e == CS_OK)
		e = buf_printf(d, "endpoint=%s; tool=%s; digest=%s", rq->ep->id, rq->tool,
		    p->digest[0] != '\0' ? p->digest : "-");
	return e;
}

/* The entry of one call: endpoint, tool, digest, the upstream's status
 * (status < 0: not known yet -- the entry written before the call goes
 * out), the arguments with log_arguments; in its own transaction (alone) or
 * in the caller's. */
static enum cs_err call_entry(struct store_conn *c, const struct mcp_call_req *rq,
    const struct mcp_call_plan *p, const char *outcome, long upstream_status, bool alone)
{
	struct buf d, args;
	enum cs_err e;
	if (c == NULL || rq == NULL || p == NULL || outcome == NULL || rq->tool == NULL)
		return CS_EINVAL;
	buf_init(&d, 4000);
	buf_init(&args, 3000);
	e = call_detail(&d, rq, p);
	if (e == CS_OK && upstream_status >= 0)
		e = buf_printf(&d, "; upstream=%ld", upstream_status);
	size_t plain = d.len;
	if (e == CS_OK && rq->ep->log_arguments && rq->arguments != NULL &&
	    mcp_call_secret_like(rq->arguments)) {
		/* SECURITY: an audit entry outlives every revocation: values that
		 * look like a credential are never recorded (docs/mcp.md). */
		e = buf_puts(&d, "; arguments=(not recorded: they look like a token)");
	} else if (e == CS_OK && rq->ep->log_arguments) {
		json_t *a = rq->arguments != NULL ? json_incref(rq->arguments) : json_object();
		enum cs_err ea = a != NULL ? jcs_canonicalize(a, &args) : CS_ENOMEM;
		json_decref(a);
		if (ea == CS_OK && (e = buf_puts(&d, "; arguments=")) == CS_OK &&
		    buf_append(&d, args.data, args.len) != CS_OK) {
			/* Too long for an entry: said so, never cut. */
			d.len = plain;
			d.data[d.len] = '\0';
			e = buf_puts(&d, "; arguments=(too long to record)");
		} else if (ea != CS_OK && e == CS_OK) {
			e = buf_puts(&d, "; arguments=(not recorded)");
		}
	}
	if (e == CS_OK) {
		e = append_call(c, rq, p, outcome, d.data, alone);
		/* A value the audit log refuses (one that looks like a token): the
		 * entry without the values, which says so. */
		if (e == CS_EINVAL && rq->ep->log_arguments) {
			d.len = plain;
			d.data[d.len] = '\0';
			if ((e = buf_puts(&d, "; arguments=(not recorded: they look like a token)")) ==
			    CS_OK)
				e = append_call(c, rq, p, outcome, d.data, alone);
		}
	}
	buf_wipe_clear(&args);
	buf_wipe_clear(&d);
	return e;
}

enum cs_err mcp_call_answer_new(const struct mcp_call_req *rq, const struct mcp_call_plan *p,
    long status, const char *failure, int64_t ms, struct audit_queue_entry **out)
{
	struct buf d;
	enum cs_err e;
	if (rq == NULL || p == NULL || out == NULL || rq->tool == NULL || rq->ep == NULL ||
	    p->outcome != MCP_CALL_RELEASED || p->call_id[0] == '\0')
		return CS_EINVAL;
	const struct consent *k = p->live.id != NULL ? &p->live : rq->token_consent;
	/* The status goes back as it is (2xx, and the protocol's own client
	 * errors but 401/403/407): answered; anything else failed. */
	bool answered = failure == NULL && ((status >= 200 && status < 300) ||
	    (status >= 400 && status < 500 && status != 401 && status != 403 && status != 407));
	buf_init(&d, AUDIT_QUEUE_DETAIL_MAX);
	e = call_detail(&d, rq, p);
	if (e == CS_OK)
		e = buf_printf(&d, "; upstream=%ld; ms=%lld", status, (long long)(ms > 0 ? ms : 0));
	if (e == CS_OK && failure != NULL)
		e = buf_printf(&d, "; failure=%s", failure);
	if (e == CS_OK)
		e = audit_queue_entry_new(&(struct audit_entry){ .ts = rq->now, .actor = rq->actor,
		    .action = "mcp.call", .subject = k->subject, .agent = k->agent,
		    .resource = rq->ep->resource, .scopes = p->scope, .consent_id = k->id,
		    .request_id = p->rel.approval.approval_id,
		    .outcome = answered ? "answered" : "upstream_failed", .detail = d.data }, out);
	buf_clear(&d);
	return e;
}

enum cs_err mcp_call_answer_put(struct audit_queue *q, struct store_conn *c,
    struct audit_queue_entry *qe, uint64_t bytes, const char *end)
{
	char more[96];
	enum cs_err e = CS_EINVAL;
	if (qe == NULL)
		return CS_EINVAL;
	if (end != NULL && ((e = str_fmt(more, sizeof more, "; bytes=%llu; end=%s",
	    (unsigned long long)bytes, end)) != CS_OK || (e = audit_queue_entry_detail(qe, more)) != CS_OK)) {
		audit_queue_entry_free(qe);
		return e;
	}
	return audit_queue_put(q, c, qe);
}

enum cs_err mcp_call_audit(struct store_conn *c, const struct mcp_call_req *rq,
    const struct mcp_call_plan *p, const char *outcome, long upstream_status)
{
	return call_entry(c, rq, p, outcome, upstream_status, true);
}


static enum cs_err release_entry_write(struct store_conn *c, void *ctx)
{
	const struct release_entry *r = ctx;
	return call_entry(c, r->rq, r->p, "forwarded", -1, false);
}

static enum cs_err retry_entry_write(struct store_conn *c, void *ctx)
{
	const struct release_entry *r = ctx;
	return call_entry(c, r->rq, r->p, "forwarded_again", -1, false);
}

enum cs_err mcp_call_refresh(struct store_conn *c, const struct config *cfg,
    const struct mcp_call_req *rq, const struct mcp_call_plan *p, struct vault_release *out)
{
	if (c == NULL || cfg == NULL || rq == NULL || p == NULL || out == NULL ||
	    p->outcome != MCP_CALL_RELEASED || p->act == NULL || p->live.id == NULL)
		return CS_EINVAL;
	memset(out, 0, sizeof *out);
	struct release_entry re = { rq, p };
	return vault_release_refreshed(rq->vault, c, cfg, &(struct vault_release_req){
	    .k = &p->live, .action = p->act->name, .actor = rq->actor, .now = rq->now,
	    .with = retry_entry_write, .with_ctx = &re }, out);
}
