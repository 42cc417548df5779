/* events.c -- revocation events: builds, signs and pushes one Security Event
 * Token per outbox entry (RFC 8417, RFC 8935) and records each attempt.
 * It must never call the receiver inside a database transaction, put a SET
 * in a log or the audit log, or give an entry up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "buf.h"
#include "events.h"
#include "health.h"
#include "httpc.h"
#include "log.h"
#include "metrics.h"

#define EVENTS_ERR_MAX 120            /* last_error: short, printable ASCII */

int64_t events_retry_delay(int64_t attempts)
{
	int64_t d = EVENTS_RETRY_FIRST;
	if (attempts < 0)
		attempts = 0;
	/* Doubling past the cap stops early: no overflow however large attempts is. */
	for (int64_t i = 0; i < attempts && d < EVENTS_RETRY_MAX; i++)
		d *= 2;
	return d < EVENTS_RETRY_MAX ? d : EVENTS_RETRY_MAX;
}

/* The event of a connection-health entry (health.h): what changed, why, and
 * where the person goes while it needs them. */
static json_t *health_event(const struct config *cfg, const struct store_event_row *r,
    const char *resource)
{
	bool broken = strcmp(r->kind, HEALTH_KIND_BROKEN) == 0;
	json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s?}", "cid", r->consent_id,
	    "agent_id", r->agent, "resource", resource, "state", r->kind, "reason", r->reason);
	struct buf uri;
	if (ev == NULL || !broken)
		return ev;
	buf_init(&uri, 4096);
	if (buf_printf(&uri, "%s/me", cfg->public_url) != CS_OK ||
	    json_object_set_new(ev, "reconnect_uri", json_string(uri.data)) != 0) {
		json_decref(ev);
		ev = NULL;
	}
	buf_clear(&uri);
	return ev;
}

enum cs_err events_set_claims(const struct config *cfg, const struct store_event_row *r,
    int64_t now, json_t **out)
{
	const struct config_resource *res;
	const char *resource, *type = EVENTS_REVOKED_URI;
	json_t *claims, *ev;
	bool revoked;

	if (cfg == NULL || r == NULL || out == NULL || cfg->public_url == NULL ||
	    cfg->gateway_id == NULL)
		return CS_EINVAL;
	revoked = r->kind == NULL || strcmp(r->kind, HEALTH_KIND_REVOKED) == 0;
	/* An outbox kind this build does not know is never pushed as another. */
	if (!revoked && strcmp(r->kind, HEALTH_KIND_BROKEN) != 0 &&
	    strcmp(r->kind, HEALTH_KIND_RECOVERED) != 0)
		return CS_EINVAL;
	/* The gateway knows resources by uri, as in grants (grant.c's "resource"). */
	res = config_resource(cfg, r->resource);
	resource = res != NULL && res->uri != NULL ? res->uri : r->resource;
	if (revoked) {
		ev = json_pack("{s:s, s:s, s:s, s:s?}", "cid", r->consent_id, "agent_id", r->agent,
		    "resource", resource, "reason", r->reason);
	} else {
		type = EVENTS_HEALTH_URI;
		ev = health_event(cfg, r, resource);
	}
	if (ev == NULL)
		return CS_ENOMEM;
	/* SECURITY: no exp -- RFC 8417 §2.2: a SET states a fact; and nothing
	 * taken from the receiver goes in. */
	claims = json_pack("{s:s, s:s, s:I, s:I, s:s, s:{s:s, s:s, s:s}, s:{s:o}}",
	    "iss", cfg->public_url, "aud", cfg->gateway_id,
	    "iat", (json_int_t)now, "toe", (json_int_t)r->created_at, "jti", r->jti,
	    "sub_id", "format", "iss_sub", "iss", r->subject_iss, "sub", r->subject,
	    "events", type, ev);
	if (claims == NULL)
		return CS_ENOMEM;
	*out = claims;
	return CS_OK;
}

/* Copies at most EVENTS_ERR_MAX printable ASCII characters of s into out
 * (others become '?'): a receiver's error text goes into the database and
 * in front of admins. */
static void clean_text(char *out, size_t cap, const char *s)
{
	size_t o = 0;
	for (; s != NULL && *s != '\0' && o + 1 < cap && o < EVENTS_ERR_MAX; s++)
		out[o++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
	out[o] = '\0';
}

void events_receiver_status(long status, const char *body, size_t body_len, char *out, size_t cap)
{
	char code[64] = "";
	json_t *j = json_loadb(body != NULL ? body : "", body != NULL ? body_len : 0,
	    JSON_REJECT_DUPLICATES, NULL);
	const char *err = json_string_value(json_object_get(j, "err"));
	clean_text(code, sizeof code, err);
	/* The callers' out holds a status and a cleaned code (at most 63
	 * bytes); were the code ever too long, the status alone is said. */
	if ((code[0] == '\0' ||
	    str_fmt(out, cap, "HTTP %ld: %s", status, code) != CS_OK) &&
	    str_fmt(out, cap, "HTTP %ld", status) != CS_OK && cap > 0)
		out[0] = '\0';
	json_decref(j);
}

/* Marks r delivered and audits it, in one transaction. */
static enum cs_err mark_delivered(struct store_conn *c, const struct store_event_row *r,
    int64_t now, long status)
{
	enum cs_err e;
	char detail[96];
	struct audit_entry a;

	if ((e = str_fmt(detail, sizeof detail, "jti=%s attempt=%lld", r->jti,
	    (long long)(r->attempts + 1))) != CS_OK)
		return e;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	memset(&a, 0, sizeof a);
	a.ts = now;
	a.actor = "system";
	a.action = "event.delivered";
	a.subject = r->subject;
	a.agent = r->agent;
	a.resource = r->resource;
	a.consent_id = r->consent_id;
	a.outcome = "ok";
	a.detail = detail;
	if ((e = store_events_delivered(c, r->id, now, (int64_t)status)) != CS_OK ||
	    (e = audit_append(c, &a)) != CS_OK) {
		store_rollback(c);
		return e;
	}
	return store_commit(c);
}

/* One run of events_push_run: what every entry is pushed with, and the tally. */
struct push_run {
	struct store_conn    *c;
	const struct config  *cfg;
	const struct keyring *kr;
	int64_t               now;
	int                   delivered;
	int                   unreachable;   /* set when an entry got no answer */
};

/* Tries one entry. */
static enum cs_err push_one(struct push_run *run, const struct store_event_row *r)
{
	struct store_conn *c = run->c;
	const struct config *cfg = run->cfg;
	const int64_t now = run->now;
	enum cs_err e, pe;
	json_t *claims = NULL;
	char *set = NULL;
	struct httpc_response res;
	char why[EVENTS_ERR_MAX + 40];
	int64_t wait;

	memset(&res, 0, sizeof res);
	if ((e = events_set_claims(cfg, r, now, &claims)) != CS_OK)
		goto out;
	if ((e = jwt_sign(run->kr, EVENTS_SET_TYP, claims, &set)) != CS_OK)
		goto out;
	/* SECURITY: outside any transaction -- the receiver may take up to the
	 * client's timeout, and no writer must wait for it. */
	pe = httpc_post(cfg->events_uri, EVENTS_MEDIA_TYPE, set, strlen(set), &res);
	if (pe == CS_OK && res.status == 202) {
		if ((e = mark_delivered(c, r, now, res.status)) == CS_OK) {
			run->delivered++;
			metrics_inc(M_EVENT_DELIVERIES, "delivered");
		}
		goto out;
	}
	metrics_inc(M_EVENT_DELIVERIES, "failed");
	if (pe != CS_OK) {
		run->unreachable = pe == CS_EIO;
		if ((e = str_fmt(why, sizeof why, "no answer: %s", cs_strerror(pe))) != CS_OK)
			goto out;
	} else {
		events_receiver_status(res.status, res.body.data, res.body.len, why, sizeof why);
	}
	wait = events_retry_delay(r->attempts);
	log_msg(LOG_WARN, "%s event %s: %s; retry %lld in %lld s",
	    r->kind == NULL || strcmp(r->kind, HEALTH_KIND_REVOKED) == 0 ? "revocation" :
	    "connection-health", r->jti, why,
	    (long long)(r->attempts + 2), (long long)wait);
	e = store_events_retry(c, r->id, r->attempts + 1, now + wait,
	    pe == CS_OK ? (int64_t)res.status : 0, why);
out:
	json_decref(claims);
	free(set);
	httpc_response_clear(&res);
	return e;
}

enum cs_err events_push_run(struct store_conn *c, const struct config *cfg,
    const struct keyring *kr, int64_t now, int *delivered)
{
	enum cs_err e;
	struct store_event_row *due = NULL;
	size_t n = 0;
	struct push_run run = { .c = c, .cfg = cfg, .kr = kr, .now = now };

	if (c == NULL || cfg == NULL || delivered == NULL)
		return CS_EINVAL;
	*delivered = 0;
	if (cfg->events_uri == NULL)
		return CS_OK;                 /* entries wait (see events.h) */
	if (kr == NULL)
		return CS_EINVAL;
	/* SECURITY: claimed in a transaction of its own, so that of many nodes
	 * sharing the outbox one delivers each entry (at least once: a node that
	 * dies after the push but before recording it lets another push again
	 * when the lease ends; receivers dedupe on the SET's jti, RFC 8417). */
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if ((e = store_events_claim(c, now, EVENTS_CLAIM_LEASE, EVENTS_BATCH, &due, &n)) != CS_OK ||
	    (e = store_commit(c)) != CS_OK) {
		store_rollback(c);
		store_event_rows_free(due, n);
		return e;
	}
	size_t i = 0;
	for (; i < n && !run.unreachable; i++)
		if ((e = push_one(&run, &due[i])) != CS_OK) {
			i++;
			break;
		}
	/* What this pass claimed but did not try is due again at once. */
	for (; i < n; i++)
		if (store_events_release(c, due[i].id, now) != CS_OK)
			break;                    /* then due again when the lease ends */
	store_event_rows_free(due, n);
	*delivered = run.delivered;
	return e;
}

/* --- delivery state ----------------------------------------------------- */

enum cs_err events_list(struct store_conn *c, const char *consent_id,
    enum store_events_state state, int64_t before_id, size_t max,
    struct store_event_row **out, size_t *n)
{
	if (c == NULL || out == NULL || n == NULL)
		return CS_EINVAL;
	return store_events_list(c, &(struct store_events_filter){ .consent_id = consent_id,
	    .state = state, .before_id = before_id, .max = max }, out, n);
}

const char *events_state_name(const struct store_event_row *r)
{
	if (r->delivered_at != 0)
		return "delivered";
	return r->attempts > 0 ? "retrying" : "pending";
}

static json_t *int_or_null(int64_t v, int is_null)
{
	return is_null ? json_null() : json_integer((json_int_t)v);
}

json_t *events_row_json(const struct store_event_row *r)
{
	if (r == NULL)
		return NULL;
	return json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s?, s:I, s:s, s:I, s:o, s:o, s:o, s:s?}",
	    "id", (json_int_t)r->id, "jti", r->jti,
	    "kind", r->kind != NULL ? r->kind : HEALTH_KIND_REVOKED, "consent_id", r->consent_id,
	    "subject_iss", r->subject_iss, "subject", r->subject, "agent", r->agent,
	    "resource", r->resource, "reason", r->reason, "created_at", (json_int_t)r->created_at,
	    "state", events_state_name(r), "attempts", (json_int_t)r->attempts,
	    "next_attempt_at", int_or_null(r->next_attempt_at, r->delivered_at != 0),
	    "delivered_at", int_or_null(r->delivered_at, r->delivered_at == 0),
	    "last_status", int_or_null(r->last_status, r->last_status == 0),
	    "last_error", r->last_error);
}

enum cs_err events_count(struct store_conn *c, int64_t *waiting, int64_t *failing,
    int64_t *delivered)
{
	if (c == NULL || waiting == NULL || failing == NULL || delivered == NULL)
		return CS_EINVAL;
	return store_events_count(c, waiting, failing, delivered);
}
