/* store_admin.h -- the SQL behind admin.c: admin API tokens (migration 0008)
 * and the read-only admin listings over consents, requests, approvals, grants
 * and the audit log.  Listings come back as jansson arrays of plain row
 * objects (column name -> integer, text or null) so that admin.c, and the admin
 * pages after it, shape them without a struct per query.  Never a token here:
 * admin tokens only as their SHA-256, and no column holding a secret is read. */
#ifndef CS_STORE_ADMIN_H
#define CS_STORE_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "cs_err.h"
#include "store.h"

/* --- admin tokens ------------------------------------------------------ */
/* CS_EEXIST when the name (revoked or not) or the hash is taken. */
enum cs_err store_admin_token_insert(struct store_conn *c, const char *name,
    const unsigned char hash[32], int64_t now) CS_MUST_CHECK;
/* The token with this hash: *name (malloc'd) and *revoked_at; CS_ENOENT when none. */
enum cs_err store_admin_token_find(struct store_conn *c, const unsigned char hash[32],
    char **name, int64_t *revoked_at) CS_MUST_CHECK;
enum cs_err store_admin_token_touch(struct store_conn *c, const char *name,
    int64_t now) CS_MUST_CHECK;
/* *changed 1 when an unrevoked token of that name was revoked; CS_ENOENT when
 * no token has that name. */
enum cs_err store_admin_token_revoke(struct store_conn *c, const char *name, int64_t now,
    int *changed) CS_MUST_CHECK;
/* Every token: name, created_at, last_used_at, revoked_at; by name. */
enum cs_err store_admin_token_list(struct store_conn *c, json_t **out) CS_MUST_CHECK;

/* --- consents ---------------------------------------------------------- */
enum store_admin_state {
	STORE_ADMIN_ANY = 0, STORE_ADMIN_LIVE, STORE_ADMIN_EXPIRED, STORE_ADMIN_REVOKED,
	STORE_ADMIN_RECONNECT, STORE_ADMIN_STATE__MAX
};

struct store_admin_consent_query {   /* NULL / 0 fields do not filter */
	const char *issuer, *subject;    /* the person: subject at issuer (issuer NULL: any) */
	const char *person;              /* the person's subject, or their email or name as the
	                                    IdP last gave it at a login (case-insensitive) */
	const char *agent, *resource;    /* exact matches: no pattern characters exist here */
	enum store_admin_state state;
	int64_t     now;                 /* decides expired / live */
	int64_t     after_created;       /* keyset cursor: rows strictly after (created_at, id) */
	const char *after_id;            /* NULL: from the start */
	int64_t     limit;
};
/* Rows (newest first, ties by id descending): id, subject, issuer, agent,
 * resource, granted, declined, offline, created_at, expires_at, revoked_at,
 * revoked_by, revoke_reason, request_id, reconnect_required, state. */
enum cs_err store_admin_consents(struct store_conn *c, const struct store_admin_consent_query *q,
    json_t **out) CS_MUST_CHECK;
/* One such row; CS_ENOENT when unknown. */
enum cs_err store_admin_consent(struct store_conn *c, const char *id, int64_t now,
    json_t **out) CS_MUST_CHECK;
/* grants_issued, grants_live (unrevoked and unexpired at now), refresh_tokens_issued. */
enum cs_err store_admin_consent_counts(struct store_conn *c, const char *id, int64_t now,
    int64_t *grants_issued, int64_t *grants_live, int64_t *refresh_issued) CS_MUST_CHECK;
/* The consent request row (id, agent, resource, scopes, reason, status,
 * created_at, expires_at, decided_at, consent_id); CS_ENOENT when unknown. */
enum cs_err store_admin_request(struct store_conn *c, const char *id, json_t **out) CS_MUST_CHECK;
/* The consent's approvals (id, action, digest, status, created_at, expires_at,
 * decided_at, used_at), oldest first, at most 500. */
enum cs_err store_admin_consent_approvals(struct store_conn *c, const char *id,
    json_t **out) CS_MUST_CHECK;
/* Audit rows naming consent_id, or request_id when not NULL, in seq order, at
 * most 500. */
enum cs_err store_admin_consent_events(struct store_conn *c, const char *consent_id,
    const char *request_id, json_t **out) CS_MUST_CHECK;

/* Ids of at most limit unrevoked consents (expired or not) matching exactly one
 * of subject (at issuer), agent or resource, by id.  A JSON array of strings. */
enum store_admin_by { STORE_ADMIN_BY_USER = 0, STORE_ADMIN_BY_AGENT, STORE_ADMIN_BY_RESOURCE,
	STORE_ADMIN_BY__MAX };
enum cs_err store_admin_unrevoked_ids(struct store_conn *c, enum store_admin_by by,
    const char *value, const char *issuer, int64_t limit, json_t **out) CS_MUST_CHECK;

/* --- pending work and the audit log ------------------------------------ */
/* Pending, unexpired consent requests (id, subject, agent, resource, scopes,
 * reason, created_at, expires_at) and approvals (id, consent_id, subject,
 * agent, resource, action, digest, created_at, expires_at), newest first. */
enum cs_err store_admin_pending_requests(struct store_conn *c, int64_t now, int64_t limit,
    json_t **out) CS_MUST_CHECK;
enum cs_err store_admin_pending_approvals(struct store_conn *c, int64_t now, int64_t limit,
    json_t **out) CS_MUST_CHECK;

struct store_admin_audit_query {     /* NULL / 0 fields do not filter */
	int64_t     since;               /* ts >= since */
	const char *action, *consent_id; /* exact matches */
	int64_t     after_seq;           /* keyset cursor: seq > after_seq */
	bool        newest_first;        /* then seq < before_seq (0: from the newest), after_seq unused */
	int64_t     before_seq;
	int64_t     limit;
	/* The feed that exporters tail (the admin API): in an order no entry
	 * committed later can appear before.  One writer (SQLite): seq order, as
	 * without it.  Many (entry numbers from a sequence, store_audit.h): only
	 * the entries below the oldest running transaction, in (xid, seq) order
	 * after (after_xid, after_seq), each row with its xid; after_seq_only > 0
	 * (a cursor of seq alone) also wants seq > after_seq_only.  SQLite reads
	 * after_seq alone. */
	bool        feed;
	int64_t     after_xid, after_seq_only;
};
/* Rows in seq order (descending with newest_first; a feed's as above): seq,
 * ts, actor, action, subject, agent, resource, scopes, consent_id,
 * request_id, outcome, detail, and a feed's xid where it has one. */
enum cs_err store_admin_audit(struct store_conn *c, const struct store_admin_audit_query *q,
    json_t **out) CS_MUST_CHECK;

#endif
