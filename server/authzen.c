/* authzen.c -- the organisation's decision point: one AuthZEN 1.0 Access
 * Evaluation call before a person is asked, its answer parsed as outside
 * input, and one audit entry per call.  It must never call any URL but
 * [authzen] endpoint, log or audit the bearer token, wait longer than
 * [authzen] timeout_ms, or be called inside a transaction. */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>

#include "audit.h"
#include "authzen.h"
#include "buf.h"
#include "httpc.h"
#include "jstr.h"
#include "mono.h"

/* The request body's cap: the parameters are bounded by the callers (at
 * most twice a proxied body); the rest is a few hundred bytes. */
#define AUTHZEN_MAX_REQUEST (8u << 20)
#define AUTHZEN_AUTH_MAX    (sizeof "Authorization: Bearer " + 4096)

/* --- the answer ----------------------------------------------------------- */

/* The reason as the audit entry keeps it: printable ASCII, ';' excepted (the
 * detail's separator), cut to AUTHZEN_REASON_MAX bytes. */
static void reason_copy(const char *s, char out[AUTHZEN_REASON_MAX + 1])
{
	size_t n = 0;
	for (; s != NULL && s[n] != '\0' && n < AUTHZEN_REASON_MAX; n++)
		out[n] = s[n] >= ' ' && s[n] <= '~' && s[n] != ';' ? s[n] : '?';
	out[n] = '\0';
	/* SECURITY: the audit refuses anything that looks like a JWT ("eyJ" and
	 * a dot); a reason must not turn a decision into a failure. */
	for (char *p = strstr(out, "eyJ"); p != NULL; p = strstr(p + 1, "eyJ"))
		p[0] = '?';
}

/* context.reason_admin (AuthZEN's examples: {"en": "..."}) or context.reason. */
static const char *reason_of(const json_t *ctx)
{
	const json_t *ra = json_object_get(ctx, "reason_admin");
	if (jstr(ra) != NULL)
		return jstr(ra);
	if (json_is_object(ra) && jstr(json_object_get(ra, "en")) != NULL)
		return jstr(json_object_get(ra, "en"));
	return jstr(json_object_get(ctx, "reason"));
}

enum cs_err authzen_parse_answer(const char *body, size_t len, struct authzen_answer *out,
    char *why, size_t whylen)
{
	json_error_t err;
	json_t *v = NULL;
	enum cs_err e = CS_EINVAL;
	const char *w;
	if (body == NULL) {
		w = "no answer";
		goto out;
	}
	if (len > AUTHZEN_MAX_ANSWER) {
		w = "the answer is larger than 16384 bytes";
		goto out;
	}
	/* SECURITY: a key given twice could read as permit to one parser and
	 * deny to another; \u0000 is refused too (jansson's default). */
	if ((v = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err)) == NULL) {
		w = "the answer is not JSON (or has a duplicate key)";
		goto out;
	}
	if (!json_is_object(v)) {
		w = "the answer is not a JSON object";
		goto out;
	}
	const json_t *d = json_object_get(v, "decision"), *ctx = json_object_get(v, "context");
	if (!json_is_boolean(d)) {
		w = "the answer's decision is missing or not a boolean";
		goto out;
	}
	if (ctx != NULL && !json_is_object(ctx)) {
		w = "the answer's context is not an object";
		goto out;
	}
	const json_t *cd = json_object_get(ctx, "consentd");
	if (cd != NULL && !jstr_eq(cd, "ask")) {
		w = "the answer's context.consentd is not \"ask\"";
		goto out;
	}
	out->verdict = cd != NULL ? AUTHZEN_ASK : json_is_true(d) ? AUTHZEN_PERMIT : AUTHZEN_DENY;
	reason_copy(ctx != NULL ? reason_of(ctx) : NULL, out->reason);
	e = CS_OK;
	w = "";
out:
	json_decref(v);
	if (e != CS_OK && str_fmt(why, whylen, "%s", w) != CS_OK && whylen > 0)
		why[0] = '\0';
	return e;
}

/* --- the question ----------------------------------------------------------- */

enum cs_err authzen_request_body(const struct config *cfg, const struct authzen_call *q,
    struct buf *out)
{
	char when[STR_TIME_LEN];
	enum cs_err e = CS_ENOMEM;
	char *text = NULL;
	const struct consent *k = q->k;
	json_t *v = json_pack("{s:{s:s, s:s, s:{s:s}}, s:{s:s, s:{s:O}}, s:{s:s, s:s}, "
	    "s:{s:s, s:s, s:s, s:s, s:s}}",
	    "subject", "type", "user", "id", k->subject, "properties", "issuer",
	    cfg->oidc_issuer != NULL ? cfg->oidc_issuer : "",
	    "action", "name", q->action, "properties", "parameters",
	    q->params != NULL ? q->params : json_null(),
	    "resource", "type", "consentd_resource", "id", k->resource,
	    "context", "agent", k->agent, "client", q->actor != NULL ? q->actor : "",
	    "consent_id", k->id, "params_digest", q->digest != NULL ? q->digest : "",
	    "time", str_time(q->now, when));
	if (v == NULL)
		return CS_EINVAL;                 /* a NULL string: a caller's bug */
	if ((text = json_dumps(v, JSON_COMPACT)) != NULL)
		e = buf_puts(out, text);
	free(text);
	json_decref(v);
	return e;
}

bool authzen_applies(const struct config *cfg, const struct config_action *act)
{
	if (cfg->authzen_endpoint == NULL || act == NULL || act->approval != APPROVAL_REQUIRED)
		return false;
	if (cfg->nauthzen_actions == 0)
		return true;
	size_t rn = strlen(act->resource);
	for (size_t i = 0; i < cfg->nauthzen_actions; i++) {
		const char *w = cfg->authzen_actions[i];
		if (strncmp(w, act->resource, rn) == 0 && w[rn] == '.' && strcmp(w + rn + 1, act->name) == 0)
			return true;
	}
	return false;
}

bool authzen_denied(const struct approval_answer *a)
{
	return a != NULL && a->outcome == APPROVAL_DENIED && a->decided_by != NULL &&
	    strcmp(a->decided_by, AUTHZEN_DECIDED_BY) == 0;
}

/* --- the call ----------------------------------------------------------------- */

struct call_result {
	bool ok;                          /* an answer was parsed: in answer */
	struct authzen_answer answer;
	char failure[160];                /* !ok: what went wrong, in words for the audit */
	int64_t ms;                       /* how long the call took */
};

static void failed(struct call_result *r, const char *what)
{
	r->ok = false;
	if (str_fmt(r->failure, sizeof r->failure, "%s", what) != CS_OK)
		r->failure[0] = '\0';
}

/* POSTs body to the endpoint; r says what came of it.  Errors only for what
 * is not the decision point's doing (no memory). */
static enum cs_err call(const struct config *cfg, const struct buf *body, struct call_result *r)
{
	struct httpc_reply rep;
	struct buf auth;
	enum cs_err e, he;
	char why[96], st[32];
	const char *headers[4] = { "Content-Type: application/json", "Accept: application/json",
		NULL, NULL };
	httpc_reply_init(&rep);
	buf_init(&auth, AUTHZEN_AUTH_MAX);
	if (cfg->authzen_token != NULL) {
		if ((e = buf_printf(&auth, "Authorization: Bearer %s", cfg->authzen_token)) != CS_OK)
			goto out;
		headers[2] = auth.data;
	}
	int64_t t0 = mono_ms();
	/* SECURITY: the configured URL only (checked at load and by httpc), no
	 * redirect followed, TLS verified, the answer capped, one deadline for
	 * the whole call. */
	he = httpc_request_opts(&(struct httpc_request){ .method = "POST",
	    .url = cfg->authzen_endpoint, .headers = headers, .body = body->data,
	    .body_len = body->len, .max_body = AUTHZEN_MAX_ANSWER },
	    &(struct httpc_call_opts){ .timeout_ms = (long)cfg->authzen_timeout_ms,
	    .ca_file = cfg->authzen_ca_file }, &rep);
	r->ms = mono_ms() - t0;
	e = CS_OK;
	switch (he) {
	case CS_OK:
		break;
	case CS_ENOMEM:
		e = he;
		goto out;
	case CS_EBUSY:
		failed(r, "timeout");
		goto out;
	case CS_ETOOBIG:
		failed(r, "the answer is larger than 16384 bytes");
		goto out;
	default:
		failed(r, "unreachable (connection or TLS failed)");
		goto out;
	}
	if (rep.status != 200) {
		if (str_fmt(st, sizeof st, "HTTP status %ld", rep.status) != CS_OK)
			st[0] = '\0';
		failed(r, st);
		goto out;
	}
	if (authzen_parse_answer(rep.body.data, rep.body.len, &r->answer, why, sizeof why) != CS_OK) {
		failed(r, why);
		goto out;
	}
	r->ok = true;
out:
	httpc_reply_clear(&rep);
	buf_wipe_clear(&auth);
	return e;
}

static const char *const verdict_words[AUTHZEN_VERDICT__MAX] = {
	[AUTHZEN_PERMIT] = "permit", [AUTHZEN_DENY] = "deny", [AUTHZEN_ASK] = "ask",
};

/* The one audit entry of a call. */
static enum cs_err audit_call(struct store_conn *c, const struct config *cfg,
    const struct authzen_call *q, const struct call_result *r)
{
	char detail[512];
	enum cs_err e;
	const char *then = cfg->authzen_on_error == AUTHZEN_ON_ERROR_DENY ? "denied" :
	    "the person is asked";
	if (r->ok)
		e = str_fmt(detail, sizeof detail, "action=%s; digest=%s; decision=%s%s%s; ms=%lld",
		    q->action, q->digest != NULL ? q->digest : "", verdict_words[r->answer.verdict],
		    r->answer.reason[0] != '\0' ? "; reason=" : "", r->answer.reason,
		    (long long)r->ms);
	else
		e = str_fmt(detail, sizeof detail, "action=%s; digest=%s; failure=%s; on_error=%s: %s; "
		    "ms=%lld", q->action, q->digest != NULL ? q->digest : "", r->failure,
		    cfg->authzen_on_error == AUTHZEN_ON_ERROR_DENY ? "deny" : "ask", then,
		    (long long)r->ms);
	if (e != CS_OK)
		return e;
	return audit_append_alone(c, &(struct audit_entry){ .ts = q->now, .actor = q->actor,
	    .action = "authzen.evaluated", .subject = q->k->subject, .agent = q->k->agent,
	    .resource = q->k->resource, .consent_id = q->k->id,
	    .outcome = r->ok ? verdict_words[r->answer.verdict] : "error", .detail = detail });
}

enum cs_err authzen_gate(struct store_conn *c, const struct config *cfg,
    const struct config_action *act, const struct authzen_call *q, struct approval_answer *out,
    bool *decided)
{
	struct buf body;
	struct call_result r;
	enum cs_err e;
	*decided = false;
	if (c == NULL || cfg == NULL || q == NULL || q->k == NULL || q->action == NULL || out == NULL)
		return CS_EINVAL;
	if (!authzen_applies(cfg, act))
		return CS_OK;
	memset(&r, 0, sizeof r);
	buf_init(&body, AUTHZEN_MAX_REQUEST);
	if ((e = authzen_request_body(cfg, q, &body)) != CS_OK)
		goto out;
	if ((e = call(cfg, &body, &r)) != CS_OK)
		goto out;
	/* SECURITY: nothing is decided unless the call is audited. */
	if ((e = audit_call(c, cfg, q, &r)) != CS_OK)
		goto out;
	enum approval_outcome o;
	if (r.ok && r.answer.verdict == AUTHZEN_PERMIT)
		o = APPROVAL_RELEASE;
	else if (r.ok && r.answer.verdict == AUTHZEN_DENY)
		o = APPROVAL_DENIED;
	else if (!r.ok && cfg->authzen_on_error == AUTHZEN_ON_ERROR_DENY)
		o = APPROVAL_DENIED;               /* fail closed */
	else
		goto out;                          /* the person decides */
	char *by = strdup(AUTHZEN_DECIDED_BY);
	if (by == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	approval_answer_clear(out);
	out->outcome = o;
	out->decided_by = by;
	*decided = true;
out:
	buf_wipe_clear(&body);
	return e;
}
