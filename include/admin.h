/* admin.h -- the admin domain (docs/architecture.md flow G): admin
 * API tokens, consent listings with filters and keyset cursors, one consent's
 * history, revocation of one consent or of all of a person's, an agent's or a
 * resource's consents, pending work, and the audit query.  Results are jansson
 * values shaped for the JSON API (and for the admin pages, which render the
 * same values); nothing here knows HTTP or HTML.  Never returns token material.
 *
 * Audit actions written here (besides consent.revoked from the cascade):
 *   admin.api               an admin token was used (actor admin:<name>, detail the route)
 *   admin.api.refused       a revoked admin token was presented (actor admin:<name>)
 *   admin.token.created     `consentd admin token create` (detail name=...)
 *   admin.token.revoked     `consentd admin token revoke` (detail name=...)
 *   admin.cli               a read-only CLI command ran (detail the command)
 *   admin.page.refused      a signed-in person who is not an admin asked for /admin
 *   admin.bulk_revoked      a bulk revocation finished (detail by=..., count=..., reason) */
#ifndef CS_ADMIN_H
#define CS_ADMIN_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include "cs_err.h"
#include "session.h"
#include "store.h"

#define ADMIN_TOKEN_NAME_MAX 64
#define ADMIN_TOKEN_MAX 256          /* longest bearer value looked at */
#define ADMIN_LIST_DEFAULT 50
#define ADMIN_LIST_MAX 500
#define ADMIN_BULK_BATCH 100         /* consents revoked per transaction */
#define ADMIN_REASON_MAX 500
#define ADMIN_CURSOR_MAX 64

/* true for 1..ADMIN_TOKEN_NAME_MAX of letters, digits, '.', '_', '-'. */
bool admin_token_name_ok(const char *name);

/* --- admin tokens -------------------------------------------------------- */
enum admin_token_outcome {
	ADMIN_TOKEN_DONE = 0,            /* created, or revoked */
	ADMIN_TOKEN_BAD_NAME,            /* not a token name (admin_token_name_ok) */
	ADMIN_TOKEN_NAME_TAKEN,          /* create: the name was ever used (revoked names stay taken) */
	ADMIN_TOKEN_UNKNOWN,             /* revoke: no token is called that */
	ADMIN_TOKEN_ALREADY_REVOKED,     /* revoke: nothing changed */
	ADMIN_TOKEN__MAX
};
/* Creates a token called name: 256 random bits, stored as its SHA-256; the
 * token itself goes only to *token (the caller shows it once and wipes it),
 * written only with ADMIN_TOKEN_DONE.  Audited (admin.token.created) in the
 * same transaction.  *outcome is DONE, BAD_NAME or NAME_TAKEN on CS_OK. */
enum cs_err admin_token_create(struct store_conn *c, const char *name, const char *actor,
    int64_t now, char token[SESSION_TOKEN_LEN + 1],
    enum admin_token_outcome *outcome) CS_MUST_CHECK;
/* Revokes the token called name, audited (admin.token.revoked) in the same
 * transaction.  *outcome is DONE, UNKNOWN (also for a name no token could
 * have) or ALREADY_REVOKED (nothing written) on CS_OK. */
enum cs_err admin_token_revoke(struct store_conn *c, const char *name, const char *actor,
    int64_t now, enum admin_token_outcome *outcome) CS_MUST_CHECK;
/* [{name, created_at, last_used_at, revoked_at}] by name. */
enum cs_err admin_token_list(struct store_conn *c, json_t **out) CS_MUST_CHECK;
/* Checks a presented token: CS_OK with *name (malloc'd) for a known,
 * unrevoked token -- then last_used_at is set and the use audited
 * ("admin.api", detail = what) in one transaction; CS_EPERM for an unknown,
 * malformed or revoked token (a revoked one is audited as admin.api.refused). */
enum cs_err admin_token_check(struct store_conn *c, const char *token, const char *what,
    int64_t now, char **name) CS_MUST_CHECK;

/* --- consents ------------------------------------------------------------ */
struct admin_consent_filter {        /* NULL: no filter */
	const char *issuer;              /* the IdP issuer people are identified at */
	const char *user;                /* the person's subject at issuer */
	const char *person;              /* the person by subject, or by the email or name
	                                    their last login gave (case-insensitive, whole) */
	const char *agent, *resource;
	const char *state;               /* live | expired | revoked | reconnect_required */
};
/* {"consents": [consent...], "next_cursor": string|null}, newest first.
 * cursor is a next_cursor from an earlier page (NULL: the first page); limit
 * 1..ADMIN_LIST_MAX.  CS_EINVAL for a bad state, cursor or limit.  Each
 * consent: id, user, issuer, agent, resource, scopes, declined_scopes,
 * offline, state, created_at, expires_at, revoked_at, revoked_by,
 * revoke_reason, request_id, provider_connection (true when the vault holds
 * a connection for it; never token material). */
enum cs_err admin_consents_list(struct store_conn *c, const struct admin_consent_filter *f,
    const char *cursor, int64_t limit, int64_t now, json_t **out) CS_MUST_CHECK;
/* {"consent": consent, "history": {requested, decided_at, grants_issued,
 * grants_live, refresh_tokens_issued, approvals, releases, revocation,
 * events}}; CS_ENOENT when unknown. */
enum cs_err admin_consent_show(struct store_conn *c, const char *id, int64_t now,
    json_t **out) CS_MUST_CHECK;
enum admin_revoke_outcome {
	ADMIN_REVOKED = 0,               /* it was live (or expired) until now: revoked */
	ADMIN_REVOKED_ALREADY,           /* it was revoked before (the cascade ran again) */
	ADMIN_REVOKE_UNKNOWN,            /* no consent has this id */
	ADMIN_REVOKE_BAD_REASON,         /* empty, or longer than ADMIN_REASON_MAX: nothing written */
	ADMIN_REVOKE__MAX
};
/* Revokes one consent with the whole cascade (consent_revoke), audited with
 * actor and reason, in one transaction.  *outcome on CS_OK. */
enum cs_err admin_consent_revoke(struct store_conn *c, const char *id, const char *actor,
    const char *reason, int64_t now, enum admin_revoke_outcome *outcome) CS_MUST_CHECK;

enum admin_bulk_by { ADMIN_BY_USER = 0, ADMIN_BY_AGENT, ADMIN_BY_RESOURCE, ADMIN_BY__MAX };
struct admin_bulk {                  /* what to revoke, and who asks why */
	enum admin_bulk_by by;
	const char *value;               /* the subject, agent id or resource id */
	const char *issuer;              /* ADMIN_BY_USER: the IdP the subject is at */
	const char *actor, *reason;
};
/* Revokes every unrevoked consent of a person (subject at issuer), an agent or
 * a resource, ADMIN_BULK_BATCH per transaction, each with the full cascade and
 * its own audit entry; *count how many were revoked (repeating it gives 0).  A
 * failure part way leaves earlier batches committed: running it again finishes
 * the job.  *outcome is ADMIN_REVOKED (then *count is set) or
 * ADMIN_REVOKE_BAD_REASON (nothing written) on CS_OK; CS_EINVAL for a bad by
 * or an empty value, which the caller should have refused. */
enum cs_err admin_bulk_revoke(struct store_conn *c, const struct admin_bulk *b, int64_t now,
    int64_t *count, enum admin_revoke_outcome *outcome) CS_MUST_CHECK;

/* {"consent_requests": [...], "approvals": [...]}: pending and unexpired, newest first. */
enum cs_err admin_pending(struct store_conn *c, int64_t now, int64_t limit,
    json_t **out) CS_MUST_CHECK;

struct admin_audit_filter {          /* NULL / 0: no filter */
	int64_t     since;
	const char *action, *consent_id;
};
/* {"entries": [...], "next_cursor": string|null}: the feed exporters tail,
 * in an order no entry committed later can appear before (seq order on
 * SQLite; on PostgreSQL the entries below the oldest running transaction in
 * (transaction, seq) order: store_admin.h).  next_cursor, an opaque string,
 * follows every page with entries (null: none yet after cursor, which still
 * holds); a cursor of seq alone (from before migration 0030) resumes after
 * that number. */
enum cs_err admin_audit_query(struct store_conn *c, const struct admin_audit_filter *f,
    const char *cursor, int64_t limit, json_t **out) CS_MUST_CHECK;

/* The audit log newest first (the admin pages), a page of at most limit
 * (1..ADMIN_LIST_MAX) entries matching f: with before > 0 the entries just
 * older than entry number before, with after > 0 the page just newer than
 * entry after (the newest page when fewer than limit are newer), with both 0
 * the newest.  Pages are marked by entry numbers, so entries written
 * meanwhile never shift a page.  {"entries": [...] newest first, "older":
 * seq|null (give it as before for the next, older page), "newer": seq|null
 * (give it as after for the previous, newer page)}.  CS_EINVAL for a bad
 * limit, a negative marker or both markers. */
enum cs_err admin_audit_recent(struct store_conn *c, const struct admin_audit_filter *f,
    int64_t before, int64_t after, int64_t limit, json_t **out) CS_MUST_CHECK;

/* Appends one audit entry (action, actor, detail) in its own transaction: for
 * the command line's read-only commands. */
enum cs_err admin_audit_note(struct store_conn *c, const char *actor, const char *action,
    const char *detail, int64_t now) CS_MUST_CHECK;

/* Records, in its own transaction, that the signed-in person subject asked
 * for an admin page without being an admin (admin.page.refused). */
enum cs_err admin_page_refused(struct store_conn *c, const char *subject,
    int64_t now) CS_MUST_CHECK;

#endif
