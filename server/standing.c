/* standing.c -- the person's standing rules (issue #32): built from the
 * approval page's choice, matched inside approval_check's transaction (the
 * key sets in use; the exact rules and the first key set's in one indexed
 * read, one more per further key set), counted in the release's transaction,
 * ended by the person, an admin or the consent's revocation.  A stored rule
 * is re-judged from its RFC 9396 details on every use and fails closed: it
 * must never cover another consent, agent, action or value than the person
 * allowed, and an audit entry names a rule and its action, never a
 * parameter's value. */
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "audit.h"
#include "b64.h"
#include "buf.h"
#include "jcs.h"
#include "session.h"
#include "standing.h"
#include "store_standing.h"

#define CANDIDATES_MAX 4             /* rules read per (key set, lookup) */
#define KEYSETS_MAX 16               /* distinct key sets of match rules judged per call */
#define RULE_MAX_CANONICAL (1u << 20)   /* bytes of a rule's canonical texts */

/* --- small helpers ----------------------------------------------------- */

static void set_why(char *why, size_t whylen, const char *msg)
{
	if (why != NULL && whylen > 0 && str_fmt(why, whylen, "%s", msg) != CS_OK)
		why[0] = '\0';
}

/* The JCS text of v, malloc'd into *out. */
static enum cs_err canonical(json_t *v, size_t max, char **out)
{
	struct buf b;
	enum cs_err e;
	buf_init(&b, max);
	if ((e = jcs_canonicalize(v, &b)) == CS_OK) {
		if (b.data == NULL && (e = buf_puts(&b, "")) != CS_OK)
			goto out;
		*out = buf_steal(&b);
	}
out:
	buf_clear(&b);
	return e;
}

/* base64url(SHA-256(JCS(v))): approval_digest's, for the parameters a rule
 * keeps (and the values it fixes). */
static enum cs_err digest_of(json_t *v, char out[STANDING_DIGEST_LEN + 1])
{
	unsigned char h[SHA256_DIGEST_LENGTH];
	char *text = NULL;
	enum cs_err e = canonical(v, RULE_MAX_CANONICAL, &text);
	if (e == CS_OK) {
		if (!sha256_bytes(text, strlen(text), h))
			e = CS_ECRYPTO;
		else
			e = b64url_encode(h, sizeof h, out, STANDING_DIGEST_LEN + 1);
	}
	free(text);
	return e;
}

/* Whether a and b have the same JCS text (false when either cannot have one). */
static bool same_value(json_t *a, json_t *b)
{
	char *x = NULL, *y = NULL;
	bool same = canonical(a, RULE_MAX_CANONICAL, &x) == CS_OK &&
	    canonical(b, RULE_MAX_CANONICAL, &y) == CS_OK && strcmp(x, y) == 0;
	free(x);
	free(y);
	return same;
}

void standing_rule_clear(struct standing_rule *r)
{
	if (r == NULL)
		return;
	free(r->details);
	free(r->keyset);
	free(r->consent_id);
	free(r->subject);
	free(r->agent);
	free(r->resource);
	free(r->action);
	free(r->approval_id);
	free(r->fixed);
	memset(r, 0, sizeof *r);
}

/* --- the page's choice ------------------------------------------------- */

enum cs_err standing_keys(const char *canonical_text, json_t **out)
{
	json_t *p, *names, *v;
	const char *k;
	if (canonical_text == NULL || out == NULL)
		return CS_EINVAL;
	if ((names = json_array()) == NULL)
		return CS_ENOMEM;
	/* jansson keeps an object's members in the order of the text: the
	 * canonical text's (RFC 8785) order, the same on the page and here. */
	p = json_loads(canonical_text, JSON_REJECT_DUPLICATES | JSON_PRESERVE_ORDER, NULL);
	if (json_is_object(p)) {
		if (json_object_size(p) > STANDING_MAX_FIXED) {
			json_decref(p);
			json_decref(names);
			return CS_ETOOBIG;
		}
		json_object_foreach(p, k, v)
			if (json_array_append_new(names, json_string(k)) != 0) {
				json_decref(p);
				json_decref(names);
				return CS_ENOMEM;
			}
	}
	json_decref(p);
	*out = names;
	return CS_OK;
}

static bool listed(char *const *v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

/* The match object of a rule fixing the ticked names (and the never-open
 * ones) of params, the names comma-joined into fixed.  CS_EINVAL with why. */
static enum cs_err match_object(const struct config_action *act, json_t *params, json_t *names,
    uint64_t bits, json_t **match, struct buf *fixed, char *why, size_t whylen)
{
	json_t *m = json_object();
	enum cs_err e = CS_EINVAL;
	if (m == NULL)
		return CS_ENOMEM;
	if (!json_is_object(params) || json_array_size(names) == 0) {
		set_why(why, whylen, "this call's values cannot be fixed one by one");
		goto out;
	}
	/* SECURITY: the never-open parameters are fixed whatever the form says;
	 * one this call lacks makes a match rule impossible. */
	for (size_t i = 0; i < act->nstanding_fixed; i++)
		if (json_object_get(params, act->standing_fixed[i]) == NULL) {
			set_why(why, whylen, "this call lacks a value that must stay fixed");
			goto out;
		}
	if (json_array_size(names) < 64 && (bits >> json_array_size(names)) != 0) {
		set_why(why, whylen, "a value to fix is not among this call's values");
		goto out;
	}
	for (size_t i = 0; i < json_array_size(names); i++) {
		const char *k = json_string_value(json_array_get(names, i));
		if (!((bits >> i) & 1u) && !listed(act->standing_fixed, act->nstanding_fixed, k))
			continue;
		json_t *v = json_object_get(params, k);
		if (v == NULL) {
			e = CS_EDB;
			goto out;
		}
		if (json_object_set_new(m, k, json_pack("{s:O}", "exact", v)) != 0 ||
		    (fixed->len > 0 && (e = buf_puts(fixed, ",")) != CS_OK) ||
		    (e = buf_puts(fixed, k)) != CS_OK) {
			e = e == CS_EINVAL ? CS_ENOMEM : e;
			goto out;
		}
		e = CS_EINVAL;
	}
	if (json_object_size(m) == 0) {
		set_why(why, whylen, "choose at least one value that stays fixed");
		goto out;
	}
	*match = m;
	m = NULL;
	e = CS_OK;
out:
	json_decref(m);
	return e;
}

/* The key set (JCS array of the exactly fixed names) of a match object. */
static enum cs_err keyset_of(json_t *match, char **out)
{
	json_t *a = json_array(), *v;
	const char *k;
	enum cs_err e;
	if (a == NULL)
		return CS_ENOMEM;
	json_object_foreach(match, k, v)
		if (json_object_get(v, "exact") != NULL && json_array_append_new(a, json_string(k)) != 0) {
			json_decref(a);
			return CS_ENOMEM;
		}
	/* JCS does not sort arrays: sort the names so that one set has one text. */
	size_t n = json_array_size(a);
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && strcmp(json_string_value(json_array_get(a, j - 1)),
		    json_string_value(json_array_get(a, j))) > 0; j--) {
			json_t *x = json_incref(json_array_get(a, j));
			if (json_array_remove(a, j) != 0 || json_array_insert_new(a, j - 1, x) != 0) {
				json_decref(a);
				return CS_ENOMEM;
			}
		}
	e = canonical(a, RULE_MAX_CANONICAL, out);
	json_decref(a);
	return e;
}

static enum cs_err strdup_to(char **dst, const char *s)
{
	if (s == NULL)
		return CS_EINVAL;
	return (*dst = strdup(s)) != NULL ? CS_OK : CS_ENOMEM;
}

/* What the person asked for against what the action offers: NULL, or why
 * it is refused.  SECURITY: what the action offers is the configuration's
 * word, never the form's. */
static const char *request_refusal(const struct config_action *act,
    const struct config_resource *res, const struct standing_request *rq)
{
	if (act == NULL || res == NULL || act->approval != APPROVAL_REQUIRED ||
	    act->standing == STANDING_NONE || rq->kind == STANDING_NONE ||
	    (rq->kind == STANDING_MATCH && act->standing != STANDING_MATCH))
		return "this action offers no such rule";
	if (rq->duration < CONFIG_STANDING_MAX_MIN || rq->duration > act->standing_max)
		return "the rule's duration is longer than this action allows";
	if (rq->max_uses < 0 || rq->max_uses > STANDING_MAX_USES)
		return "the number of uses is out of bounds";
	return NULL;
}

/* What the rule takes from the call it is made with (its consent, person,
 * agent, resource, action and approval) and from the request (how long,
 * how many uses). */
static enum cs_err rule_from_call(struct standing_rule *r, const struct standing_call *a,
    const struct standing_request *rq, int64_t now)
{
	enum cs_err e;
	if ((e = strdup_to(&r->consent_id, a->consent_id)) != CS_OK ||
	    (e = strdup_to(&r->subject, a->subject)) != CS_OK ||
	    (e = strdup_to(&r->agent, a->agent)) != CS_OK ||
	    (e = strdup_to(&r->resource, a->resource)) != CS_OK ||
	    (e = strdup_to(&r->action, a->action)) != CS_OK ||
	    (e = strdup_to(&r->approval_id, a->approval_id)) != CS_OK)
		return e;
	r->user_id = a->user_id;
	r->expires_at = now + rq->duration;
	r->max_uses = rq->max_uses;
	return CS_OK;
}

/* The names of the call's values a match rule may fix, into *names; a call
 * with too many of them is refused (CS_EINVAL with why). */
static enum cs_err call_keys(const struct standing_call *a, json_t **names, char *why,
    size_t whylen)
{
	enum cs_err e = standing_keys(a->parameters, names);
	if (e == CS_ETOOBIG) {
		e = CS_EINVAL;
		set_why(why, whylen, "this call has too many values to fix one by one");
	}
	return e;
}

enum cs_err standing_prepare(const struct config *cfg, const struct standing_call *a,
    const struct standing_request *rq, int64_t now, struct standing_rule *out,
    char *why, size_t whylen)
{
	const struct config_action *act;
	const struct config_resource *res;
	json_t *params = NULL, *names = NULL, *match = NULL, *details = NULL;
	struct standing_rule r;
	struct buf fixed;
	const char *refusal;
	enum cs_err e = CS_EINVAL;

	memset(&r, 0, sizeof r);
	buf_init(&fixed, 4096);
	if (cfg == NULL || a == NULL || rq == NULL || out == NULL)
		return CS_EINVAL;
	act = config_action(cfg, a->resource, a->action);
	res = config_resource(cfg, a->resource);
	if ((refusal = request_refusal(act, res, rq)) != NULL) {
		set_why(why, whylen, refusal);
		goto out;
	}
	if ((params = json_loads(a->parameters, JSON_REJECT_DUPLICATES | JSON_PRESERVE_ORDER,
	    NULL)) == NULL) {
		e = CS_EDB;
		goto out;
	}
	if (rq->kind == STANDING_EXACT) {
		r.kind = "exact";
		if ((e = strdup_to(&r.keyset, STANDING_EXACT_KEYSET)) != CS_OK)
			goto out;
		memcpy(r.lookup, a->digest, sizeof r.lookup);
		details = json_pack("{s:s, s:[s], s:[s], s:O}", "type", "agent_action", "actions",
		    a->action, "locations", res->uri, "parameters", params);
	} else {
		r.kind = "match";
		if ((e = call_keys(a, &names, why, whylen)) != CS_OK ||
		    (e = match_object(act, params, names, rq->fixed, &match, &fixed, why,
		    whylen)) != CS_OK || (e = keyset_of(match, &r.keyset)) != CS_OK ||
		    (e = standing_lookup_of(params, r.keyset, r.lookup)) != CS_OK)
			goto out;
		details = json_pack("{s:s, s:[s], s:[s], s:O}", "type", "agent_action", "actions",
		    a->action, "locations", res->uri, "match", match);
	}
	e = CS_ENOMEM;
	if (details == NULL)
		goto out;
	if ((e = canonical(details, RULE_MAX_CANONICAL, &r.details)) != CS_OK ||
	    (e = b64url_random_id(r.id)) != CS_OK ||
	    (e = rule_from_call(&r, a, rq, now)) != CS_OK ||
	    (e = strdup_to(&r.fixed, fixed.data != NULL ? fixed.data : "")) != CS_OK)
		goto out;
	*out = r;
	memset(&r, 0, sizeof r);
out:
	standing_rule_clear(&r);
	buf_clear(&fixed);
	json_decref(params);
	json_decref(names);
	json_decref(match);
	json_decref(details);
	return e;
}

enum cs_err standing_insert(struct store_conn *c, const struct standing_rule *r,
    const char *actor, int64_t now)
{
	enum cs_err e;
	char detail[600];
	struct store_standing_row row = { .id = (char *)r->id, .consent_id = r->consent_id,
		.user_id = r->user_id, .agent = r->agent, .resource = r->resource,
		.action = r->action, .kind = (char *)r->kind, .keyset = r->keyset,
		.lookup = (char *)r->lookup, .details = r->details, .approval_id = r->approval_id,
		.created_by = (char *)actor, .created_at = now, .expires_at = r->expires_at,
		.max_uses = r->max_uses };
	if (c == NULL || r == NULL || r->details == NULL || actor == NULL)
		return CS_EINVAL;
	if ((e = str_fmt(detail, sizeof detail, "rule=%s; kind=%s; action=%s%s%s; until=%lld; "
	    "max_uses=%lld", r->id, r->kind, r->action, r->fixed[0] ? "; fixed=" : "",
	    r->fixed, (long long)r->expires_at, (long long)r->max_uses)) != CS_OK)
		return e;
	if ((e = store_standing_insert(c, &row)) != CS_OK)
		return e;
	return audit_append(c, &(struct audit_entry){ .ts = now, .actor = actor,
	    .action = "standing.created", .subject = r->subject, .agent = r->agent,
	    .resource = r->resource, .consent_id = r->consent_id, .request_id = r->approval_id,
	    .outcome = "ok", .detail = detail });
}

/* --- matching ---------------------------------------------------------- */

enum cs_err standing_lookup_of(json_t *params, const char *keyset,
    char out[STANDING_DIGEST_LEN + 1])
{
	json_t *ks = NULL, *sub = NULL;
	enum cs_err e = CS_ENOENT;
	if (!json_is_object(params) || keyset == NULL || out == NULL)
		return CS_ENOENT;
	ks = json_loads(keyset, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_array(ks) || json_array_size(ks) == 0 ||
	    json_array_size(ks) > STANDING_MAX_FIXED || (sub = json_object()) == NULL)
		goto out;
	for (size_t i = 0; i < json_array_size(ks); i++) {
		json_t *k = json_array_get(ks, i), *v;
		if (!json_is_string(k) || json_object_get(sub, json_string_value(k)) != NULL ||
		    strlen(json_string_value(k)) != json_string_length(k) ||
		    (v = json_object_get(params, json_string_value(k))) == NULL)
			goto out;
		if (json_object_set(sub, json_string_value(k), v) != 0) {
			e = CS_ENOMEM;
			goto out;
		}
	}
	e = digest_of(sub, out);
out:
	json_decref(ks);
	json_decref(sub);
	return e;
}

/* One constraint of a match object on value v (NULL: the call lacks it):
 * {"exact": V} or {"prefix": "non-empty string"}, nothing else. */
static bool constraint_holds(json_t *con, json_t *v)
{
	json_t *x;
	if (!json_is_object(con) || json_object_size(con) != 1 || v == NULL)
		return false;
	if ((x = json_object_get(con, "exact")) != NULL)
		return same_value(x, v);
	if ((x = json_object_get(con, "prefix")) != NULL) {
		size_t n = json_string_length(x);
		return json_is_string(x) && n > 0 && json_is_string(v) &&
		    json_string_length(v) >= n && memcmp(json_string_value(v),
		    json_string_value(x), n) == 0;
	}
	return false;
}

bool standing_covers(const char *kind, const char *details, const char *action,
    json_t *params, const char *digest)
{
	json_t *d = NULL, *m, *con;
	const char *k;
	bool exact, ok = false;
	char got[STANDING_DIGEST_LEN + 1];

	if (kind == NULL || details == NULL || action == NULL)
		return false;
	exact = strcmp(kind, "exact") == 0;
	if (!exact && strcmp(kind, "match") != 0)
		return false;
	d = json_loads(details, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(d))
		goto out;
	json_object_foreach(d, k, m)
		if (strcmp(k, "type") != 0 && strcmp(k, "actions") != 0 &&
		    strcmp(k, "locations") != 0 && strcmp(k, exact ? "parameters" : "match") != 0)
			goto out;
	m = json_object_get(d, "type");
	if (!json_is_string(m) || strcmp(json_string_value(m), "agent_action") != 0)
		goto out;
	/* SECURITY: one action, this one (no NUL smuggled into the name). */
	m = json_object_get(d, "actions");
	if (!json_is_array(m) || json_array_size(m) != 1 ||
	    !json_is_string(json_array_get(m, 0)) ||
	    strcmp(json_string_value(json_array_get(m, 0)), action) != 0 ||
	    json_string_length(json_array_get(m, 0)) != strlen(action))
		goto out;
	if (exact) {
		m = json_object_get(d, "parameters");
		ok = m != NULL && digest != NULL && digest_of(m, got) == CS_OK &&
		    strcmp(got, digest) == 0;
		goto out;
	}
	m = json_object_get(d, "match");
	/* SECURITY: a match object that fixes nothing would allow every call. */
	if (!json_is_object(m) || json_object_size(m) == 0 || !json_is_object(params))
		goto out;
	json_object_foreach(m, k, con)
		if (!constraint_holds(con, json_object_get(params, k)))
			goto out;
	ok = true;
out:
	json_decref(d);
	return ok;
}

/* --- at the check points ----------------------------------------------- */

/* The call a check is about. */
struct call {
	const struct consent *k;
	const char *action, *digest;
	int64_t now;
};

/* The first of the candidates v[0..n) of kind that covers the call: its id
 * into *id (malloc'd), or NULL. */
static enum cs_err covering_of(const struct store_standing_row *v, size_t n, const char *kind,
    const struct call *q, json_t *params, char **id)
{
	*id = NULL;
	for (size_t i = 0; i < n; i++) {
		/* SECURITY: the row's own binding and the rule itself are judged
		 * again: the indexed columns only find candidates. */
		if (strcmp(v[i].kind, kind) != 0 || strcmp(v[i].agent, q->k->agent) != 0 ||
		    strcmp(v[i].resource, q->k->resource) != 0 || v[i].user_id != q->k->user_id ||
		    !standing_covers(v[i].kind, v[i].details, q->action, params, q->digest))
			continue;
		return (*id = strdup(v[i].id)) != NULL ? CS_OK : CS_ENOMEM;
	}
	return CS_OK;
}

/* The first live match rule of (key set, lookup) that covers the call: its id
 * into *id (malloc'd), or NULL. */
static enum cs_err first_covering(struct store_conn *c, const struct call *q,
    const char *keyset, const char *lookup, json_t *params, char **id)
{
	struct store_standing_row *v = NULL;
	size_t n = 0;
	enum cs_err e = store_standing_candidates(c, q->k->id, q->action, keyset, lookup, q->now,
	    CANDIDATES_MAX, &v, &n);
	*id = NULL;
	if (e == CS_OK)
		e = covering_of(v, n, "match", q, params, id);
	store_standing_rows_free(v, n);
	return e;
}

/* The exact rules of the call's digest and the match rules of one key set and
 * lookup (NULL: none), read together: the first that covers the call. */
static enum cs_err first_covering_of_two(struct store_conn *c, const struct call *q,
    const char *keyset, const char *lookup, json_t *params, char **id)
{
	struct store_standing_row *v = NULL;
	size_t n = 0;
	enum cs_err e = store_standing_candidates_first(c, q->k->id, q->action, q->digest, keyset,
	    lookup, q->now, CANDIDATES_MAX, &v, &n);
	*id = NULL;
	/* The exact rules first, then the match rules, each in the store's order. */
	if (e == CS_OK && (e = covering_of(v, n, "exact", q, params, id)) == CS_OK && *id == NULL)
		e = covering_of(v, n, "match", q, params, id);
	store_standing_rows_free(v, n);
	return e;
}

enum cs_err standing_check(struct store_conn *c, const struct config *cfg,
    const struct consent *k, const char *action, const char *parameters, const char *digest,
    int64_t now, char **rule_id)
{
	const struct config_action *act;
	const struct call q = { k, action, digest, now };
	json_t *params = NULL;
	char **ks = NULL, *id = NULL, lookup[STANDING_DIGEST_LEN + 1] = "";
	size_t nks = 0, i = 0;
	bool unreadable = false;
	enum cs_err e;

	if (c == NULL || cfg == NULL || k == NULL || action == NULL || parameters == NULL ||
	    digest == NULL || rule_id == NULL)
		return CS_EINVAL;
	*rule_id = NULL;
	act = config_action(cfg, k->resource, action);
	/* An action whose configuration no longer offers rules ignores them (and
	 * one that offers exact rules only, its match rules). */
	if (act == NULL || act->standing == STANDING_NONE)
		return CS_OK;
	if (act->standing == STANDING_MATCH &&
	    (e = store_standing_keysets(c, k->id, action, KEYSETS_MAX, &ks, &nks)) != CS_OK)
		goto done;
	if (nks > 0 && (params = json_loads(parameters, JSON_REJECT_DUPLICATES, NULL)) == NULL)
		unreadable = true;
	/* The first key set the call has every value of is read with the exact
	 * rules, in one statement; the others after, one statement each. */
	while (!unreadable && i < nks && standing_lookup_of(params, ks[i], lookup) != CS_OK)
		i++;
	if ((e = first_covering_of_two(c, &q, !unreadable && i < nks ? ks[i] : NULL, lookup, params,
	    &id)) != CS_OK || id != NULL)
		goto done;
	if (unreadable) {
		e = CS_EINVAL;
		goto done;
	}
	for (i++; i < nks && id == NULL && e == CS_OK; i++)
		if (standing_lookup_of(params, ks[i], lookup) == CS_OK)
			e = first_covering(c, &q, ks[i], lookup, params, &id);
done:
	if (e == CS_OK) {
		*rule_id = id;
		id = NULL;
	}
	for (size_t j = 0; j < nks; j++)
		free(ks[j]);
	free(ks);
	free(id);
	json_decref(params);
	return e;
}

enum cs_err standing_use(struct store_conn *c, const char *rule_id, const struct consent *k,
    const char *action, const char *actor, int64_t now, bool *counted)
{
	enum cs_err e;
	int changed = 0;
	char detail[200];
	struct audit_entry a = { 0 };
	if (c == NULL || rule_id == NULL || k == NULL || action == NULL || counted == NULL)
		return CS_EINVAL;
	/* SECURITY: the one UPDATE that counts the use is the check. */
	if ((e = store_standing_use(c, rule_id, k->id, action, now, &changed)) != CS_OK)
		return e;
	if ((e = str_fmt(detail, sizeof detail, "rule=%s; action=%s%s", rule_id, action,
	    changed ? "" : "; ended, expired or used up meanwhile")) != CS_OK)
		return e;
	consent_audit_about(k, actor, now, &a);
	a.action = changed ? "standing.used" : "standing.refused";
	a.outcome = changed ? "ok" : "refused";
	a.detail = detail;
	if ((e = audit_append(c, &a)) == CS_OK)
		*counted = changed != 0;
	return e;
}

/* --- seen and ended ---------------------------------------------------- */

enum cs_err standing_end(struct store_conn *c, const char *id, int64_t user_id,
    const char *actor, int64_t now, enum standing_end_outcome *oc)
{
	enum cs_err e;
	int changed = 0;
	char detail[200];
	struct store_standing_row r;
	enum standing_end_outcome o = STANDING_ALREADY_ENDED;

	memset(&r, 0, sizeof r);
	if (c == NULL || id == NULL || actor == NULL || oc == NULL || user_id < 0)
		return CS_EINVAL;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if ((e = store_standing_get(c, id, &r)) != CS_OK)
		goto out;
	/* SECURITY: a person ends only their own rules. */
	if (user_id > 0 && r.user_id != user_id) {
		o = STANDING_NOT_YOURS;
	} else if (r.ended_at == 0 && r.expires_at > now && (r.max_uses == 0 || r.uses < r.max_uses)) {
		if ((e = store_standing_end(c, id, now, actor, &changed)) != CS_OK)
			goto out;
		if (changed) {
			o = STANDING_ENDED;
			if ((e = str_fmt(detail, sizeof detail, "rule=%s; action=%s; by=%s", r.id,
			    r.action, user_id > 0 ? "the person" : "an admin")) != CS_OK ||
			    (e = audit_append(c, &(struct audit_entry){ .ts = now, .actor = actor,
			    .action = "standing.ended", .subject = r.subject, .agent = r.agent,
			    .resource = r.resource, .consent_id = r.consent_id, .outcome = "ok",
			    .detail = detail })) != CS_OK)
				goto out;
		}
	}
out:
	if ((e = store_end(c, e)) == CS_OK)
		*oc = o;
	store_standing_row_clear(&r);
	return e;
}

/* The "match" object's exact values into fixed and prefixes into prefixes. */
static void split_match(json_t *details, json_t *fixed, json_t *prefixes)
{
	json_t *m = json_object_get(details, "match"), *con, *x;
	const char *k;
	json_object_foreach(m, k, con) {
		if ((x = json_object_get(con, "exact")) != NULL)
			(void)json_object_set(fixed, k, x);
		else if ((x = json_object_get(con, "prefix")) != NULL)
			(void)json_object_set(prefixes, k, x);
	}
}

/* A stored rule as the list's JSON object (standing.h's standing_list); with
 * whole, also ended_at, ended_by and live (standing_list_consent's).  NULL
 * when out of memory. */
static json_t *rule_object(const struct store_standing_row *r, int64_t now, bool whole)
{
	json_t *d = json_loads(r->details, JSON_REJECT_DUPLICATES, NULL);
	json_t *fixed = json_object(), *prefixes = json_object(), *o;
	bool used_up = r->max_uses > 0 && r->uses >= r->max_uses;
	if (json_is_object(d))
		split_match(d, fixed, prefixes);
	o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:I, s:s, s:I, "
	    "s:I, s:I, s:I, s:b}", "id", r->id, "subject", r->subject, "consent_id",
	    r->consent_id, "agent", r->agent, "resource", r->resource, "action",
	    r->action, "kind", r->kind, "details", d != NULL ? d : json_null(),
	    "fixed", fixed, "prefixes", prefixes, "created_at", (json_int_t)r->created_at,
	    "created_by", r->created_by, "expires_at", (json_int_t)r->expires_at,
	    "max_uses", (json_int_t)r->max_uses, "uses", (json_int_t)r->uses,
	    "last_used_at", (json_int_t)r->last_used_at, "used_up", used_up);
	if (o != NULL && whole && (json_object_set_new(o, "ended_at",
	    json_integer((json_int_t)r->ended_at)) != 0 || json_object_set_new(o, "ended_by",
	    r->ended_by != NULL ? json_string(r->ended_by) : json_null()) != 0 ||
	    json_object_set_new(o, "live", json_boolean(r->ended_at == 0 && r->expires_at > now &&
	    !used_up)) != 0)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* The rows v[0..n) as a new JSON array of rule_object's into *out. */
static enum cs_err rule_array(const struct store_standing_row *v, size_t n, int64_t now,
    bool whole, json_t **out)
{
	json_t *list = json_array();
	if (list == NULL)
		return CS_ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (json_array_append_new(list, rule_object(&v[i], now, whole)) != 0) {
			json_decref(list);
			return CS_ENOMEM;
		}
	*out = list;
	return CS_OK;
}

enum cs_err standing_list(struct store_conn *c, int64_t user_id, int64_t now, json_t **out)
{
	struct store_standing_row *v = NULL;
	size_t n = 0;
	enum cs_err e;
	if (c == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_standing_list(c, user_id, now, STANDING_LIST_MAX, &v, &n)) != CS_OK)
		return e;
	e = rule_array(v, n, now, false, out);
	store_standing_rows_free(v, n);
	return e;
}

enum cs_err standing_list_consent(struct store_conn *c, const char *consent_id, int64_t now,
    json_t **out)
{
	struct store_standing_row *v = NULL;
	size_t n = 0;
	enum cs_err e;
	if (c == NULL || consent_id == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_standing_list_consent(c, consent_id, STANDING_LIST_MAX, &v, &n)) != CS_OK)
		return e;
	e = rule_array(v, n, now, true, out);
	store_standing_rows_free(v, n);
	return e;
}

enum cs_err standing_show(struct store_conn *c, const char *id, int64_t now, json_t **out)
{
	struct store_standing_row r;
	json_t *o;
	enum cs_err e;
	if (c == NULL || id == NULL || out == NULL)
		return CS_EINVAL;
	memset(&r, 0, sizeof r);
	if ((e = store_standing_get(c, id, &r)) != CS_OK)
		return e;
	if ((o = rule_object(&r, now, true)) == NULL)
		e = CS_ENOMEM;
	else
		*out = o;
	store_standing_row_clear(&r);
	return e;
}
