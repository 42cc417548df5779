/* admin.c -- the admin domain: admin tokens, listings, one consent's history,
 * single and bulk revocation, pending work and the audit query (admin.h).
 * It must never return or audit token material, and every revocation goes
 * through consent_revoke so the cascade is the same whoever starts it. */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>

#include "admin.h"
#include "audit.h"
#include "buf.h"
#include "consent.h"
#include "store_admin.h"
#include "vault.h"

#define ACTOR_MAX (ADMIN_TOKEN_NAME_MAX + 16)

bool admin_token_name_ok(const char *name)
{
	size_t n = 0;
	if (name == NULL)
		return false;
	for (const char *p = name; *p; p++, n++) {
		char ch = *p;
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		    ch == '.' || ch == '_' || ch == '-'))
			return false;
	}
	return n >= 1 && n <= ADMIN_TOKEN_NAME_MAX;
}

enum cs_err admin_audit_note(struct store_conn *c, const char *actor, const char *action,
    const char *detail, int64_t now)
{
	return audit_append_alone(c, &(struct audit_entry){ .ts = now, .actor = actor, .action = action,
	    .outcome = "ok", .detail = detail });
}

enum cs_err admin_page_refused(struct store_conn *c, const char *subject, int64_t now)
{
	char actor[300];
	enum cs_err e;
	if ((e = str_fmt(actor, sizeof actor, "user:%s", subject)) != CS_OK)
		return e;
	return audit_append_alone(c, &(struct audit_entry){ .ts = now, .actor = actor,
	    .action = "admin.page.refused", .subject = subject, .outcome = "refused",
	    .detail = "not an admin" });
}

/* --- admin tokens -------------------------------------------------------- */

enum cs_err admin_token_create(struct store_conn *c, const char *name, const char *actor,
    int64_t now, char token[SESSION_TOKEN_LEN + 1], enum admin_token_outcome *outcome)
{
	char t[SESSION_TOKEN_LEN + 1], detail[ADMIN_TOKEN_NAME_MAX + 8];
	unsigned char h[32];
	enum cs_err e;
	if (!admin_token_name_ok(name)) {
		*outcome = ADMIN_TOKEN_BAD_NAME;
		return CS_OK;
	}
	if ((e = random_token(t)) != CS_OK)
		return e;
	sha256_str(t, h);
	if ((e = str_fmt(detail, sizeof detail, "name=%s", name)) != CS_OK ||
	    (e = store_begin(c)) != CS_OK)
		goto out;
	if ((e = store_admin_token_insert(c, name, h, now)) != CS_OK ||
	    (e = audit_append(c, &(struct audit_entry){ .ts = now, .actor = actor,
	    .action = "admin.token.created", .outcome = "ok", .detail = detail })) != CS_OK ||
	    (e = store_commit(c)) != CS_OK) {
		store_rollback(c);
		if (e == CS_EEXIST) {
			*outcome = ADMIN_TOKEN_NAME_TAKEN;
			e = CS_OK;
		}
		goto out;
	}
	memcpy(token, t, sizeof t);
	*outcome = ADMIN_TOKEN_DONE;
out:
	OPENSSL_cleanse(t, sizeof t);
	return e;
}

enum cs_err admin_token_revoke(struct store_conn *c, const char *name, const char *actor,
    int64_t now, enum admin_token_outcome *outcome)
{
	char detail[ADMIN_TOKEN_NAME_MAX + 8];
	int ch = 0;
	enum cs_err e;
	if (!admin_token_name_ok(name)) {
		*outcome = ADMIN_TOKEN_UNKNOWN;
		return CS_OK;
	}
	if ((e = str_fmt(detail, sizeof detail, "name=%s", name)) != CS_OK ||
	    (e = store_begin(c)) != CS_OK)
		return e;
	if ((e = store_admin_token_revoke(c, name, now, &ch)) != CS_OK ||
	    (ch && (e = audit_append(c, &(struct audit_entry){ .ts = now, .actor = actor,
	    .action = "admin.token.revoked", .outcome = "ok", .detail = detail })) != CS_OK) ||
	    (e = store_commit(c)) != CS_OK) {
		store_rollback(c);
		if (e == CS_ENOENT) {
			*outcome = ADMIN_TOKEN_UNKNOWN;
			return CS_OK;
		}
		return e;
	}
	*outcome = ch ? ADMIN_TOKEN_DONE : ADMIN_TOKEN_ALREADY_REVOKED;
	return CS_OK;
}

enum cs_err admin_token_list(struct store_conn *c, json_t **out)
{
	return store_admin_token_list(c, out);
}

static bool bearer_chars_ok(const char *t)
{
	size_t n = 0;
	for (const char *p = t; *p; p++, n++) {
		char ch = *p;
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		    ch == '-' || ch == '.' || ch == '_' || ch == '~' || ch == '+' || ch == '/' || ch == '='))
			return false;
	}
	return n >= 1 && n <= ADMIN_TOKEN_MAX;
}

enum cs_err admin_token_check(struct store_conn *c, const char *token, const char *what,
    int64_t now, char **name)
{
	unsigned char h[32];
	char *n = NULL, actor[ACTOR_MAX];
	int64_t revoked_at = 0;
	enum cs_err e;
	if (c == NULL || token == NULL || !bearer_chars_ok(token))
		return CS_EPERM;
	sha256_str(token, h);
	e = store_admin_token_find(c, h, &n, &revoked_at);
	OPENSSL_cleanse(h, sizeof h);
	if (e == CS_ENOENT)
		return CS_EPERM;
	if (e != CS_OK)
		return e;
	if ((e = str_fmt(actor, sizeof actor, "admin:%s", n)) != CS_OK)
		goto out;
	if (revoked_at != 0) {
		/* SECURITY: a revoked token is refused; its use is worth a record. */
		if ((e = audit_append_alone(c, &(struct audit_entry){ .ts = now, .actor = actor,
		    .action = "admin.api.refused", .outcome = "refused", .detail = what })) == CS_OK)
			e = CS_EPERM;
		goto out;
	}
	if ((e = store_begin(c)) != CS_OK)
		goto out;
	if ((e = store_admin_token_touch(c, n, now)) != CS_OK ||
	    (e = audit_append(c, &(struct audit_entry){ .ts = now, .actor = actor,
	    .action = "admin.api", .outcome = "ok", .detail = what })) != CS_OK ||
	    (e = store_commit(c)) != CS_OK) {
		store_rollback(c);
		goto out;
	}
	*name = n;
	n = NULL;
out:
	free(n);
	return e;
}

/* --- shaping ------------------------------------------------------------- */

/* A space-separated list as a JSON array of strings. */
static json_t *split_scopes(const char *s)
{
	json_t *a = json_array();
	if (a == NULL)
		return NULL;
	while (s != NULL && *s) {
		const char *sp = strchr(s, ' ');
		size_t n = sp ? (size_t)(sp - s) : strlen(s);
		json_t *v = n ? json_stringn(s, n) : NULL;
		if (n && (v == NULL || json_array_append_new(a, v) != 0)) {
			json_decref(a);
			return NULL;
		}
		s = sp ? sp + 1 : NULL;
	}
	return a;
}

static const char *str_of(const json_t *row, const char *k)
{
	return json_string_value(json_object_get(row, k));
}

static int64_t int_of(const json_t *row, const char *k)
{
	return (int64_t)json_integer_value(json_object_get(row, k));
}

static json_t *copy_or_null(const json_t *row, const char *k)
{
	json_t *v = json_object_get(row, k);
	return v ? json_deep_copy(v) : json_null();
}

/* The API's consent object from a store_admin_consent(s) row. */
static enum cs_err consent_json(struct store_conn *c, const json_t *row, json_t **out)
{
	const char *id = str_of(row, "id");
	json_t *o;
	if (id == NULL)
		return CS_EDB;
	o = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:b, s:o, s:o, s:I, s:I, s:I, s:o, s:o, s:o, s:b,"
	    " s:o}",
	    "id", id,
	    "user", copy_or_null(row, "subject"),
	    "issuer", copy_or_null(row, "issuer"),
	    "agent", copy_or_null(row, "agent"),
	    "resource", copy_or_null(row, "resource"),
	    "scopes", split_scopes(str_of(row, "granted")),
	    "declined_scopes", split_scopes(str_of(row, "declined")),
	    "offline", int_of(row, "offline") != 0,
	    "state", copy_or_null(row, "state"),
	    /* reconnect_required only: why (health.h's name). */
	    "reconnect_reason", copy_or_null(row, "reconnect_reason"),
	    "created_at", (json_int_t)int_of(row, "created_at"),
	    "expires_at", (json_int_t)int_of(row, "expires_at"),
	    "revoked_at", (json_int_t)int_of(row, "revoked_at"),
	    "revoked_by", copy_or_null(row, "revoked_by"),
	    "revoke_reason", copy_or_null(row, "revoke_reason"),
	    "request_id", copy_or_null(row, "request_id"),
	    /* SECURITY: whether a connection is held -- never anything of it. */
	    "provider_connection", vault_has_record(c, id),
	    /* null: the person gave it; "organisation": an enterprise policy (idjag_grant.h) */
	    "granted_by", copy_or_null(row, "granted_by"));
	if (o == NULL)
		return CS_ENOMEM;
	*out = o;
	return CS_OK;
}

/* --- listings ------------------------------------------------------------ */

static bool parse_i64(const char *s, size_t n, int64_t *out)
{
	int64_t v = 0;
	if (n == 0 || n > 18)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return true;
}

static bool id_chars_ok(const char *s)
{
	size_t n = 0;
	for (; *s; s++, n++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		    *s == '-' || *s == '_'))
			return false;
	return n >= 1 && n <= 64;
}

static const char *const state_names[STORE_ADMIN_STATE__MAX] = {
	[STORE_ADMIN_ANY] = "", [STORE_ADMIN_LIVE] = "live", [STORE_ADMIN_EXPIRED] = "expired",
	[STORE_ADMIN_REVOKED] = "revoked", [STORE_ADMIN_RECONNECT] = "reconnect_required",
};

/* The store's query for filter f (NULL: none) after cursor (NULL: from the
 * start); CS_EINVAL for an unknown state or a malformed cursor. */
static enum cs_err query_of(const struct admin_consent_filter *f, const char *cursor,
    struct store_admin_consent_query *q)
{
	q->issuer = f ? f->issuer : NULL;
	q->subject = f ? f->user : NULL;
	q->person = f ? f->person : NULL;
	q->agent = f ? f->agent : NULL;
	q->resource = f ? f->resource : NULL;
	q->state = STORE_ADMIN_ANY;
	if (f && f->state) {
		enum store_admin_state s;
		for (s = STORE_ADMIN_LIVE; s < STORE_ADMIN_STATE__MAX; s++)
			if (strcmp(f->state, state_names[s]) == 0)
				break;
		if (s == STORE_ADMIN_STATE__MAX)
			return CS_EINVAL;
		q->state = s;
	}
	/* The cursor is "CREATED_AT.ID" of the last row of the previous page. */
	if (cursor != NULL) {
		const char *dot = strchr(cursor, '.');
		if (dot == NULL || strlen(cursor) > ADMIN_CURSOR_MAX ||
		    !parse_i64(cursor, (size_t)(dot - cursor), &q->after_created) || !id_chars_ok(dot + 1))
			return CS_EINVAL;
		q->after_id = dot + 1;
	}
	return CS_OK;
}

enum cs_err admin_consents_list(struct store_conn *c, const struct admin_consent_filter *f,
    const char *cursor, int64_t limit, int64_t now, json_t **out)
{
	struct store_admin_consent_query q;
	json_t *rows = NULL, *list = NULL, *res = NULL, *row;
	enum cs_err e;
	size_t i;
	char next[ADMIN_CURSOR_MAX + 32];

	memset(&q, 0, sizeof q);
	if (limit < 1 || limit > ADMIN_LIST_MAX)
		return CS_EINVAL;
	if ((e = query_of(f, cursor, &q)) != CS_OK)
		return e;
	q.now = now;
	q.limit = limit;
	if ((e = store_admin_consents(c, &q, &rows)) != CS_OK)
		return e;
	e = CS_ENOMEM;
	if ((list = json_array()) == NULL)
		goto out;
	json_array_foreach(rows, i, row) {
		json_t *k = NULL;
		if ((e = consent_json(c, row, &k)) != CS_OK)
			goto out;
		if (json_array_append_new(list, k) != 0) {
			e = CS_ENOMEM;
			goto out;
		}
	}
	json_t *cur = json_null();
	if ((int64_t)json_array_size(rows) == limit) {
		const json_t *last = json_array_get(rows, json_array_size(rows) - 1);
		if ((e = str_fmt(next, sizeof next, "%lld.%s", (long long)int_of(last, "created_at"),
		    str_of(last, "id") ? str_of(last, "id") : "")) != CS_OK) {
			json_decref(cur);
			goto out;
		}
		json_decref(cur);
		cur = json_string(next);
	}
	if ((res = json_pack("{s:O, s:o}", "consents", list, "next_cursor", cur)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	*out = res;
	e = CS_OK;
out:
	json_decref(list);
	json_decref(rows);
	return e;
}

/* The consent request the consent came from, or JSON null without one;
 * NULL when out of memory. */
static json_t *requested_json(json_t *req)
{
	if (req == NULL)
		return json_null();
	return json_pack("{s:O, s:o, s:O, s:O, s:O, s:O}",
	    "id", json_object_get(req, "id"),
	    "scopes", split_scopes(str_of(req, "scopes")),
	    "reason", json_object_get(req, "reason"),
	    "status", json_object_get(req, "status"),
	    "created_at", json_object_get(req, "created_at"),
	    "decided_at", json_object_get(req, "decided_at"));
}

/* When, by whom and why the consent was revoked, or JSON null; NULL when
 * out of memory. */
static json_t *revocation_json(json_t *row)
{
	if (int_of(row, "revoked_at") == 0)
		return json_null();
	return json_pack("{s:I, s:O, s:O}", "revoked_at", (json_int_t)int_of(row, "revoked_at"),
	    "revoked_by", json_object_get(row, "revoked_by"),
	    "reason", json_object_get(row, "revoke_reason"));
}

/* The events that released a token (vault.released, approval.released);
 * NULL when out of memory. */
static json_t *releases_of(json_t *events)
{
	json_t *releases = json_array(), *ev;
	size_t i;

	if (releases == NULL)
		return NULL;
	json_array_foreach(events, i, ev) {
		const char *a = str_of(ev, "action");
		if (a && (strcmp(a, "vault.released") == 0 || strcmp(a, "approval.released") == 0) &&
		    json_array_append(releases, ev) != 0) {
			json_decref(releases);
			return NULL;
		}
	}
	return releases;
}

enum cs_err admin_consent_show(struct store_conn *c, const char *id, int64_t now, json_t **out)
{
	json_t *row = NULL, *k = NULL, *req = NULL, *appr = NULL, *events = NULL, *releases = NULL;
	json_t *requested = NULL, *revocation = NULL, *res = NULL;
	int64_t gi = 0, gl = 0, ri = 0;
	const char *request_id;
	enum cs_err e;

	if (id == NULL || !id_chars_ok(id))
		return CS_ENOENT;
	if ((e = store_admin_consent(c, id, now, &row)) != CS_OK)
		return e;
	if ((e = consent_json(c, row, &k)) != CS_OK)
		goto out;
	request_id = str_of(row, "request_id");
	if ((e = store_admin_consent_counts(c, id, now, &gi, &gl, &ri)) != CS_OK ||
	    (e = store_admin_consent_approvals(c, id, &appr)) != CS_OK ||
	    (e = store_admin_consent_events(c, id, request_id, &events)) != CS_OK)
		goto out;
	if (request_id != NULL) {
		e = store_admin_request(c, request_id, &req);
		if (e != CS_OK && e != CS_ENOENT)
			goto out;
	}
	e = CS_ENOMEM;
	if ((requested = requested_json(req)) == NULL ||
	    (revocation = revocation_json(row)) == NULL ||
	    (releases = releases_of(events)) == NULL)
		goto out;
	res = json_pack("{s:O, s:{s:O, s:O, s:I, s:I, s:I, s:O, s:O, s:O, s:O}}",
	    "consent", k,
	    "history",
	    "requested", requested,
	    "decided_at", req ? json_object_get(req, "decided_at") : json_null(),
	    "grants_issued", (json_int_t)gi,
	    "grants_live", (json_int_t)gl,
	    "refresh_tokens_issued", (json_int_t)ri,
	    "approvals", appr,
	    "releases", releases,
	    "revocation", revocation,
	    "events", events);
	if (res == NULL)
		goto out;
	*out = res;
	e = CS_OK;
out:
	json_decref(row);
	json_decref(k);
	json_decref(req);
	json_decref(appr);
	json_decref(events);
	json_decref(releases);
	json_decref(requested);
	json_decref(revocation);
	return e;
}

static bool reason_ok(const char *reason)
{
	return reason != NULL && reason[0] != '\0' && strlen(reason) <= ADMIN_REASON_MAX;
}

enum cs_err admin_consent_revoke(struct store_conn *c, const char *id, const char *actor,
    const char *reason, int64_t now, enum admin_revoke_outcome *outcome)
{
	json_t *row = NULL;
	enum cs_err e;
	bool was_unrevoked;
	if (id == NULL || !id_chars_ok(id)) {
		*outcome = ADMIN_REVOKE_UNKNOWN;
		return CS_OK;
	}
	if (!reason_ok(reason)) {
		*outcome = ADMIN_REVOKE_BAD_REASON;
		return CS_OK;
	}
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if ((e = store_admin_consent(c, id, now, &row)) != CS_OK)
		goto fail;
	was_unrevoked = int_of(row, "revoked_at") == 0;
	/* The consent exists: store_admin_consent read it in this transaction. */
	if ((e = consent_revoke_tx(c, id, &(struct consent_actor){ .actor = actor, .now = now },
	    reason, &(enum consent_revoke_outcome){ CONSENT_REVOKED })) != CS_OK ||
	    (e = store_commit(c)) != CS_OK)
		goto fail;
	json_decref(row);
	*outcome = was_unrevoked ? ADMIN_REVOKED : ADMIN_REVOKED_ALREADY;
	return CS_OK;
fail:
	store_rollback(c);
	json_decref(row);
	if (e == CS_ENOENT) {
		*outcome = ADMIN_REVOKE_UNKNOWN;
		return CS_OK;
	}
	return e;
}

enum cs_err admin_bulk_revoke(struct store_conn *c, const struct admin_bulk *b, int64_t now,
    int64_t *count, enum admin_revoke_outcome *outcome)
{
	static const enum store_admin_by map[ADMIN_BY__MAX] = {
		[ADMIN_BY_USER] = STORE_ADMIN_BY_USER, [ADMIN_BY_AGENT] = STORE_ADMIN_BY_AGENT,
		[ADMIN_BY_RESOURCE] = STORE_ADMIN_BY_RESOURCE,
	};
	static const char *const by_name[ADMIN_BY__MAX] = {
		[ADMIN_BY_USER] = "user", [ADMIN_BY_AGENT] = "agent", [ADMIN_BY_RESOURCE] = "resource",
	};
	enum admin_bulk_by by = b->by;
	int64_t total = 0;
	enum cs_err e;
	char detail[ADMIN_REASON_MAX + 64];

	if ((unsigned)by >= ADMIN_BY__MAX || b->value == NULL || b->value[0] == '\0')
		return CS_EINVAL;
	if (!reason_ok(b->reason)) {
		*outcome = ADMIN_REVOKE_BAD_REASON;
		return CS_OK;
	}
	/* Batches of ADMIN_BULK_BATCH per transaction keep the write lock short
	 * for the servers still answering; each batch selects only unrevoked
	 * consents, so a rerun after a failure continues where it stopped. */
	for (;;) {
		json_t *ids = NULL, *id;
		size_t i, n;
		if ((e = store_begin(c)) != CS_OK)
			return e;
		if ((e = store_admin_unrevoked_ids(c, map[by], b->value, b->issuer, ADMIN_BULK_BATCH,
		    &ids)) != CS_OK)
			goto fail;
		n = json_array_size(ids);
		json_array_foreach(ids, i, id) {
			if ((e = consent_revoke_tx(c, json_string_value(id),
			    &(struct consent_actor){ .actor = b->actor, .now = now }, b->reason,
			    &(enum consent_revoke_outcome){ CONSENT_REVOKED })) != CS_OK) {
				json_decref(ids);
				goto fail;
			}
		}
		json_decref(ids);
		if (n < ADMIN_BULK_BATCH) {
			/* The last batch carries the summary entry. */
			if ((e = str_fmt(detail, sizeof detail, "by=%s count=%lld reason=%s", by_name[by],
			    (long long)(total + (int64_t)n), b->reason)) != CS_OK ||
			    (e = audit_append(c, &(struct audit_entry){ .ts = now, .actor = b->actor,
			    .action = "admin.bulk_revoked", .outcome = "ok", .detail = detail })) != CS_OK)
				goto fail;
		}
		if ((e = store_commit(c)) != CS_OK)
			goto fail;
		total += (int64_t)n;
		if (n < ADMIN_BULK_BATCH)
			break;
	}
	*count = total;
	*outcome = ADMIN_REVOKED;
	return CS_OK;
fail:
	store_rollback(c);
	return e;
}

/* --- pending work and the audit log -------------------------------------- */

enum cs_err admin_pending(struct store_conn *c, int64_t now, int64_t limit, json_t **out)
{
	json_t *reqs = NULL, *appr = NULL, *res = NULL, *r;
	enum cs_err e;
	size_t i;
	if (limit < 1 || limit > ADMIN_LIST_MAX)
		return CS_EINVAL;
	if ((e = store_admin_pending_requests(c, now, limit, &reqs)) != CS_OK ||
	    (e = store_admin_pending_approvals(c, now, limit, &appr)) != CS_OK)
		goto out;
	/* Scopes as arrays, as everywhere else in the API. */
	json_array_foreach(reqs, i, r) {
		json_t *s = split_scopes(str_of(r, "scopes"));
		if (s == NULL || json_object_set_new(r, "scopes", s) != 0) {
			e = CS_ENOMEM;
			goto out;
		}
	}
	if ((res = json_pack("{s:O, s:O}", "consent_requests", reqs, "approvals", appr)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	*out = res;
	e = CS_OK;
out:
	json_decref(reqs);
	json_decref(appr);
	return e;
}

/* A query of the entries f selects (every entry when f is NULL), at most limit. */
static void audit_query_init(struct store_admin_audit_query *q, const struct admin_audit_filter *f,
    int64_t limit)
{
	memset(q, 0, sizeof *q);
	if (f != NULL) {
		q->since = f->since;
		q->action = f->action;
		q->consent_id = f->consent_id;
	}
	q->limit = limit;
}

/* The audit listing's cursor: "SEQ" (SQLite's; and every cursor from before
 * migration 0030) or "XID.SEQ" (PostgreSQL's: the transaction and number of
 * the last entry given), into q.  false when malformed. */
static bool audit_cursor_parse(const char *cursor, struct store_admin_audit_query *q)
{
	const char *dot = strchr(cursor, '.');
	if (dot == NULL) {
		if (!parse_i64(cursor, strlen(cursor), &q->after_seq))
			return false;
		q->after_seq_only = q->after_seq;
		return true;
	}
	return parse_i64(cursor, (size_t)(dot - cursor), &q->after_xid) &&
	    parse_i64(dot + 1, strlen(dot + 1), &q->after_seq);
}

/* The cursor after the last of rows (n > 0), and each row's xid removed
 * (the store's, for the cursor alone): "XID.SEQ" when the rows have one,
 * else "SEQ". */
static enum cs_err audit_cursor_after(json_t *rows, size_t n, char out[48])
{
	const json_t *last = json_array_get(rows, n - 1);
	int64_t seq = int_of(last, "seq");
	json_t *xid = json_object_get(last, "xid");
	enum cs_err e = xid != NULL ?
	    str_fmt(out, 48, "%lld.%lld", (long long)json_integer_value(xid), (long long)seq) :
	    str_fmt(out, 48, "%lld", (long long)seq);
	for (size_t i = 0; i < n; i++)
		json_object_del(json_array_get(rows, i), "xid");
	return e;
}

enum cs_err admin_audit_query(struct store_conn *c, const struct admin_audit_filter *f,
    const char *cursor, int64_t limit, json_t **out)
{
	struct store_admin_audit_query q;
	json_t *rows = NULL, *res = NULL, *cur;
	enum cs_err e;
	char next[48];
	size_t n;

	audit_query_init(&q, f, limit);
	q.feed = true;
	if (limit < 1 || limit > ADMIN_LIST_MAX)
		return CS_EINVAL;
	if (cursor != NULL && !audit_cursor_parse(cursor, &q))
		return CS_EINVAL;
	if ((e = store_admin_audit(c, &q, &rows)) != CS_OK)
		return e;
	/* A cursor with every page that has entries, a short one too: an
	 * exporter resumes from it later.  None with an empty page: nothing
	 * newer yet, the cursor asked with still holds. */
	if ((n = json_array_size(rows)) > 0) {
		if ((e = audit_cursor_after(rows, n, next)) != CS_OK) {
			json_decref(rows);
			return e;
		}
		cur = json_string(next);
	} else {
		cur = json_null();
	}
	if ((res = json_pack("{s:o, s:o}", "entries", rows, "next_cursor", cur)) == NULL)
		return CS_ENOMEM;
	*out = res;
	return CS_OK;
}

/* The rows of one query as entries newest first: rows come newest first,
 * or oldest first when asc (then they are turned around). */
static json_t *newest_first(json_t *rows, bool asc)
{
	json_t *a = json_array();
	size_t n = json_array_size(rows);
	for (size_t i = 0; a != NULL && i < n; i++)
		if (json_array_append(a, json_array_get(rows, asc ? n - 1 - i : i)) != 0) {
			json_decref(a);
			a = NULL;
		}
	return a;
}

/* Whether an entry matching f lies beyond seq: before it (older) or after it. */
static enum cs_err audit_beyond(struct store_conn *c, const struct store_admin_audit_query *f,
    int64_t seq, bool older, bool *any)
{
	struct store_admin_audit_query q = *f;
	json_t *rows = NULL;
	enum cs_err e;
	q.limit = 1;
	q.newest_first = older;
	q.before_seq = older ? seq : 0;
	q.after_seq = older ? 0 : seq;
	if ((e = store_admin_audit(c, &q, &rows)) != CS_OK)
		return e;
	*any = json_array_size(rows) > 0;
	json_decref(rows);
	return CS_OK;
}

enum cs_err admin_audit_recent(struct store_conn *c, const struct admin_audit_filter *f,
    int64_t before, int64_t after, int64_t limit, json_t **out)
{
	struct store_admin_audit_query q;
	json_t *rows = NULL, *entries = NULL, *res = NULL;
	bool older = false, newer = false;
	size_t n;
	enum cs_err e;

	audit_query_init(&q, f, limit);
	if (limit < 1 || limit > ADMIN_LIST_MAX || before < 0 || after < 0 || (before && after))
		return CS_EINVAL;
	if (after > 0) {
		/* The page just newer than after: the limit entries after it,
		 * oldest first from the store.  Fewer than a page means the
		 * newest end is near: the newest page is shown instead, so that
		 * a page is always full while there is enough to fill it. */
		q.after_seq = after;
		if ((e = store_admin_audit(c, &q, &rows)) != CS_OK)
			return e;
		if ((int64_t)json_array_size(rows) < limit) {
			json_decref(rows);
			rows = NULL;
			after = 0;
		}
	}
	if (rows == NULL) {
		q.after_seq = 0;
		q.newest_first = true;
		q.before_seq = before;
		if ((e = store_admin_audit(c, &q, &rows)) != CS_OK)
			return e;
	}
	e = CS_ENOMEM;
	if ((entries = newest_first(rows, after > 0)) == NULL)
		goto out;
	n = json_array_size(entries);
	if (n > 0) {
		int64_t top = int_of(json_array_get(entries, 0), "seq");
		int64_t bottom = int_of(json_array_get(entries, n - 1), "seq");
		if ((e = audit_beyond(c, &q, bottom, true, &older)) != CS_OK ||
		    ((before > 0 || after > 0) && (e = audit_beyond(c, &q, top, false, &newer)) != CS_OK))
			goto out;
		e = CS_ENOMEM;
		res = json_pack("{s:O, s:o, s:o}", "entries", entries,
		    "older", older ? json_integer((json_int_t)bottom) : json_null(),
		    "newer", newer ? json_integer((json_int_t)top) : json_null());
	} else {
		res = json_pack("{s:O, s:n, s:n}", "entries", entries, "older", "newer");
	}
	if (res == NULL)
		goto out;
	*out = res;
	res = NULL;
	e = CS_OK;
out:
	json_decref(res);
	json_decref(entries);
	json_decref(rows);
	return e;
}
