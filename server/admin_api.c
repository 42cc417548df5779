/* admin_api.c -- the /admin/api/ handlers: bearer admin-token authentication,
 * JSON bodies, JSON answers.  It must never authenticate by cookie (invariant
 * 6: a browser can be made to send one cross-site) and never reply with token
 * material. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <jansson.h>

#include "admin.h"
#include "admin_api.h"
#include "events.h"
#include "app.h"
#include "buf.h"
#include "form.h"

#define ADMIN_REALM "Bearer realm=\"consentd-admin\""

bool admin_api_valid_state(const char *v)
{
	return strcmp(v, "live") == 0 || strcmp(v, "expired") == 0 || strcmp(v, "revoked") == 0 ||
	    strcmp(v, "reconnect_required") == 0;
}

bool admin_api_valid_limit(const char *v)
{
	int n = 0;
	if (*v == '\0' || strlen(v) > 3 || *v == '0')
		return false;
	for (; *v; v++) {
		if (*v < '0' || *v > '9')
			return false;
		n = n * 10 + (*v - '0');
	}
	return n >= 1 && n <= ADMIN_LIST_MAX;
}

/* --- replies ------------------------------------------------------------- */

static enum cs_err api_error(struct http_reply *rep, int status, const char *code, const char *desc)
{
	return reply_oauth_error(rep, status, code, desc);   /* the admin API answers in JSON */
}

/* The domain's answer as an HTTP status, for errors that are the caller's. */
static enum cs_err domain_error(struct http_reply *rep, enum cs_err e, const char *what)
{
	if (e == CS_EINVAL)
		return api_error(rep, 400, "invalid_request", what);
	if (e == CS_ENOENT)
		return api_error(rep, 404, "not_found", "There is no such consent.");
	return e;
}

/* --- authentication ------------------------------------------------------ */

/* SECURITY: only `Authorization: Bearer <admin token>` authenticates here.
 * The Cookie header is never read on /admin/api/: a session -- even an
 * admin's -- is ambient authority a browser attaches cross-site, so the API
 * would be open to CSRF if it counted.  On failure rep holds the 401 with
 * WWW-Authenticate (RFC 6750 §3) and NULL is returned. */
char *admin_api_authenticate(const struct http_request *req, struct http_reply *rep, const char *what)
{
	const char *h = req->authorization;
	char *name = NULL;
	enum cs_err e = CS_EPERM;
	int presented = 0;
	struct store_conn *c = store_conn(req->app->store);

	if (h != NULL && strncasecmp(h, "Bearer ", 7) == 0) {
		h += 7;
		while (*h == ' ')
			h++;
		presented = 1;
		if (c == NULL)
			e = CS_EDB;
		else
			e = admin_token_check(c, h, what, req->now, &name);
	}
	if (e == CS_OK)
		return name;
	if (e != CS_EPERM) {                  /* the database, not the caller */
		if (api_error(rep, 500, "server_error", "The server could not check the token.") != CS_OK)
			rep->status = 500;
		return NULL;
	}
	if (api_error(rep, 401, "invalid_token", presented ? "The admin token is not valid." :
	    "An admin token is required (Authorization: Bearer).") != CS_OK ||
	    reply_header(rep, "WWW-Authenticate", presented ?
	    ADMIN_REALM ", error=\"invalid_token\"" : ADMIN_REALM) != CS_OK)
		rep->status = 401;
	return NULL;
}

/* The JSON object body of a write; NULL with a 400 in rep otherwise.  Only
 * the names in allowed may appear, each a string of 1..max bytes. */
static json_t *body_object(const struct http_request *req, struct http_reply *rep,
    const char *const *allowed, size_t max)
{
	json_error_t jerr;
	json_t *o = NULL, *v;
	const char *k;
	if (req->body == NULL || req->body_len == 0 ||
	    (o = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &jerr)) == NULL ||
	    !json_is_object(o)) {
		json_decref(o);
		if (api_error(rep, 400, "invalid_request", "The body must be a JSON object.") != CS_OK)
			rep->status = 400;
		return NULL;
	}
	json_object_foreach(o, k, v) {
		size_t i;
		for (i = 0; allowed[i]; i++)
			if (strcmp(allowed[i], k) == 0)
				break;
		const char *s = json_string_value(v);
		if (allowed[i] == NULL || s == NULL || s[0] == '\0' || strlen(s) > max ||
		    json_string_length(v) != strlen(s)) {
			json_decref(o);
			if (api_error(rep, 400, "invalid_request", allowed[i] == NULL ?
			    "The body holds an unknown member." :
			    "Each member must be a non-empty string of at most 500 bytes.") != CS_OK)
				rep->status = 400;
			return NULL;
		}
		for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
			if (*p < 0x20 || *p == 0x7f) {
				json_decref(o);
				if (api_error(rep, 400, "invalid_request",
				    "Control characters are not allowed.") != CS_OK)
					rep->status = 400;
				return NULL;
			}
		}
	}
	return o;
}

static int64_t limit_of(const struct http_request *req, unsigned idx)
{
	const char *l = http_arg_str(req, idx);
	int64_t n = 0;
	if (l == NULL)
		return ADMIN_LIST_DEFAULT;
	for (; *l; l++)                       /* admin_api_valid_limit checked it */
		n = n * 10 + (*l - '0');
	return n;
}

/* --- handlers ------------------------------------------------------------ */

enum cs_err admin_api_consents(const struct http_request *req, struct http_reply *rep)
{
	struct admin_consent_filter f;
	json_t *out = NULL;
	enum cs_err e;
	struct store_conn *c = store_conn(req->app->store);
	memset(&f, 0, sizeof f);
	f.issuer = req->app->cfg->oidc_issuer;
	f.user = http_arg_str(req, ADMIN_API_CONSENTS_USER);
	f.agent = http_arg_str(req, ADMIN_API_CONSENTS_AGENT);
	f.resource = http_arg_str(req, ADMIN_API_CONSENTS_RESOURCE);
	f.state = http_arg_str(req, ADMIN_API_CONSENTS_STATE);
	e = c == NULL ? CS_EDB : admin_consents_list(c, &f,
	    http_arg_str(req, ADMIN_API_CONSENTS_CURSOR), limit_of(req, ADMIN_API_CONSENTS_LIMIT),
	    req->now, &out);
	if (e != CS_OK)
		return domain_error(rep, e == CS_ENOENT ? CS_EINVAL : e, "The cursor is not valid.");
	return reply_json_value(rep, 200, out);
}

enum cs_err admin_api_consent(const struct http_request *req, struct http_reply *rep)
{
	json_t *out = NULL;
	enum cs_err e;
	struct store_conn *c = store_conn(req->app->store);
	e = c == NULL ? CS_EDB : admin_consent_show(c, req->captures[0], req->now, &out);
	if (e != CS_OK)
		return domain_error(rep, e, NULL);
	return reply_json_value(rep, 200, out);
}

enum cs_err admin_api_consent_revoke(const struct http_request *req, struct http_reply *rep)
{
	static const char *const allowed[] = { "reason", NULL };
	json_t *body, *out = NULL;
	const char *actor = req->auth.actor;     /* "admin:<token name>" (the router's) */
	enum admin_revoke_outcome o = ADMIN_REVOKE__MAX;
	enum cs_err e;
	if ((body = body_object(req, rep, allowed, ADMIN_REASON_MAX)) == NULL)
		return CS_OK;
	const char *reason = json_string_value(json_object_get(body, "reason"));
	struct store_conn *c = store_conn(req->app->store);
	if (reason == NULL) {
		e = api_error(rep, 400, "invalid_request", "A reason is required.");
	} else if (c == NULL) {
		e = CS_EDB;
	} else if ((e = admin_consent_revoke(c, req->captures[0], actor, reason, req->now,
	    &o)) != CS_OK || o == ADMIN_REVOKE_UNKNOWN || o == ADMIN_REVOKE_BAD_REASON) {
		e = domain_error(rep, e != CS_OK ? e : o == ADMIN_REVOKE_UNKNOWN ? CS_ENOENT : CS_EINVAL,
		    "The reason is not valid.");
	} else if ((e = admin_consent_show(c, req->captures[0], req->now, &out)) != CS_OK) {
		e = domain_error(rep, e, "The reason is not valid.");
	} else {
		json_t *k = json_incref(json_object_get(out, "consent"));
		json_decref(out);
		e = reply_json_value(rep, 200, json_pack("{s:i, s:o}", "revoked", o == ADMIN_REVOKED,
		    "consent", k));
	}
	json_decref(body);
	return e;
}

enum cs_err admin_api_revocations(const struct http_request *req, struct http_reply *rep)
{
	static const char *const allowed[] = { "user", "agent", "resource", "reason", NULL };
	static const char *const by_key[ADMIN_BY__MAX] = {
		[ADMIN_BY_USER] = "user", [ADMIN_BY_AGENT] = "agent", [ADMIN_BY_RESOURCE] = "resource",
	};
	json_t *body;
	const char *actor = req->auth.actor;     /* "admin:<token name>" (the router's) */
	enum admin_revoke_outcome o = ADMIN_REVOKE__MAX;
	int64_t count = 0;
	enum cs_err e;
	int nsel = 0;
	enum admin_bulk_by by = ADMIN_BY_USER;
	if ((body = body_object(req, rep, allowed, ADMIN_REASON_MAX)) == NULL)
		return CS_OK;
	for (int i = 0; i < ADMIN_BY__MAX; i++) {
		if (json_object_get(body, by_key[i]) != NULL) {
			nsel++;
			by = (enum admin_bulk_by)i;
		}
	}
	const char *reason = json_string_value(json_object_get(body, "reason"));
	struct store_conn *c = store_conn(req->app->store);
	if (nsel != 1 || reason == NULL) {
		e = api_error(rep, 400, "invalid_request",
		    "Name exactly one of user, agent or resource, and a reason.");
	} else if (c == NULL) {
		e = CS_EDB;
	} else if ((e = admin_bulk_revoke(c, &(struct admin_bulk){ .by = by,
	    .value = json_string_value(json_object_get(body, by_key[by])),
	    .issuer = req->app->cfg->oidc_issuer, .actor = actor, .reason = reason }, req->now,
	    &count, &o)) != CS_OK || o != ADMIN_REVOKED) {
		e = domain_error(rep, e == CS_OK ? CS_EINVAL : e, "The revocation request is not valid.");
	} else {
		e = reply_json_value(rep, 200, json_pack("{s:I}", "revoked", (json_int_t)count));
	}
	json_decref(body);
	return e;
}

enum cs_err admin_api_requests(const struct http_request *req, struct http_reply *rep)
{
	json_t *out = NULL;
	enum cs_err e;
	struct store_conn *c = store_conn(req->app->store);
	e = c == NULL ? CS_EDB : admin_pending(c, req->now, limit_of(req, ADMIN_API_REQUESTS_LIMIT), &out);
	if (e != CS_OK)
		return domain_error(rep, e, "The limit is not valid.");
	return reply_json_value(rep, 200, out);
}

enum cs_err admin_api_audit(const struct http_request *req, struct http_reply *rep)
{
	struct admin_audit_filter f;
	json_t *out = NULL;
	enum cs_err e;
	const char *since = http_arg_str(req, ADMIN_API_AUDIT_SINCE);
	memset(&f, 0, sizeof f);
	if (since != NULL) {
		if (strlen(since) > 18)
			return api_error(rep, 400, "invalid_request", "parameter since is malformed");
		for (const char *p = since; *p; p++)
			f.since = f.since * 10 + (*p - '0');
	}
	f.action = http_arg_str(req, ADMIN_API_AUDIT_ACTION);
	f.consent_id = http_arg_str(req, ADMIN_API_AUDIT_CONSENT_ID);
	struct store_conn *c = store_conn(req->app->store);
	e = c == NULL ? CS_EDB : admin_audit_query(c, &f, http_arg_str(req, ADMIN_API_AUDIT_CURSOR),
	    limit_of(req, ADMIN_API_AUDIT_LIMIT), &out);
	if (e != CS_OK)
		return domain_error(rep, e, "The cursor is not valid.");
	return reply_json_value(rep, 200, out);
}

enum cs_err admin_api_events(const struct http_request *req, struct http_reply *rep)
{
	struct store_event_row *rows = NULL;
	size_t n = 0;
	int64_t waiting = 0, failing = 0, delivered = 0;
	json_t *out = NULL, *items = NULL;
	enum cs_err e;
	const char *cid = http_arg_str(req, ADMIN_API_EVENTS_CONSENT_ID);
	struct store_conn *c = store_conn(req->app->store);
	if (c == NULL)
		return CS_EDB;
	if ((e = events_count(c, &waiting, &failing, &delivered)) != CS_OK ||
	    (e = events_list(c, cid, STORE_EVENTS_ANY, 0, (size_t)limit_of(req, ADMIN_API_EVENTS_LIMIT), &rows, &n)) != CS_OK)
		goto out;
	items = json_array();
	for (size_t i = 0; items && i < n; i++)
		json_array_append_new(items, events_row_json(&rows[i]));
	out = json_pack("{s:{s:I, s:I, s:I}, s:O}", "counts", "waiting", (json_int_t)waiting,
	    "failing", (json_int_t)failing, "delivered", (json_int_t)delivered, "events", items);
	if (out == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	e = reply_json_value(rep, 200, out);
	out = NULL;
out:
	json_decref(items);
	json_decref(out);
	store_event_rows_free(rows, n);
	return e;
}
