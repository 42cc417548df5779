/* store_events.c -- the SQL for the revocation-event outbox (migration 0009).
 * It only moves rows; SETs are built and pushed by events.c.  It must never
 * build SQL from input: every value is a bound parameter. */
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "store_events.h"
#include "store_priv.h"

#define EVENT_COLS_ONLY \
	"id, jti, consent_id, subject_iss, subject, agent, resource, reason, created_at, " \
	"attempts, next_attempt_at, delivered_at, last_status, last_error, kind "
#define EVENT_COLS EVENT_COLS_ONLY "FROM events_outbox "

/* SECURITY: the person, agent, resource and reason come from the consent row
 * itself (server-side state), never from the caller. */
static const char SQL_EVENTS_ENQUEUE[] =
    "INSERT INTO events_outbox (jti, consent_id, subject_iss, subject, agent, resource, "
    "reason, created_at, next_attempt_at) "
    "SELECT ?2, k.id, u.issuer, u.subject, k.agent, k.resource, k.revoke_reason, ?3, ?3 "
    "FROM consents k JOIN users u ON u.id = k.user_id WHERE k.id = ?1";
/* A connection-health event (health.h, migration 0020): its kind and reason
 * are consentd's own words, the rest from the consent row as above. */
static const char SQL_EVENTS_ENQUEUE_KIND[] =
    "INSERT INTO events_outbox (jti, consent_id, subject_iss, subject, agent, resource, "
    "reason, created_at, next_attempt_at, kind) "
    "SELECT ?2, k.id, u.issuer, u.subject, k.agent, k.resource, ?4, ?3, ?3, ?5 "
    "FROM consents k JOIN users u ON u.id = k.user_id WHERE k.id = ?1";
/* A claim: the due entries' next attempt moves past the lease, so no other
 * node (nor this one) takes them meanwhile; a node that dies mid-delivery
 * leaves them due again when the lease ends.  The outer WHERE repeats the
 * due test, so a claim that waited for another's row lock re-checks the row
 * as committed and skips what the other took.  PostgreSQL skips the rows
 * another claim holds rather than waiting for them. */
#define EVENTS_CLAIM(lock) \
    "UPDATE events_outbox SET next_attempt_at = ?2 WHERE delivered_at = 0 AND " \
    "next_attempt_at <= ?1 AND id IN (SELECT id FROM events_outbox WHERE delivered_at = 0 " \
    "AND next_attempt_at <= ?1 ORDER BY next_attempt_at, id LIMIT ?3" lock ") " \
    "RETURNING " EVENT_COLS_ONLY
static const char SQL_EVENTS_CLAIM[] = EVENTS_CLAIM("");
static const char SQL_EVENTS_CLAIM_PG[] = EVENTS_CLAIM(" FOR UPDATE SKIP LOCKED");
static const char SQL_EVENTS_RELEASE[] =
    "UPDATE events_outbox SET next_attempt_at = ?2 WHERE id = ?1 AND delivered_at = 0";
static const char SQL_EVENTS_DELIVERED[] =
    "UPDATE events_outbox SET attempts = attempts + 1, delivered_at = ?2, last_status = ?3, "
    "last_error = NULL WHERE id = ?1 AND delivered_at = 0";
static const char SQL_EVENTS_RETRY[] =
    "UPDATE events_outbox SET attempts = ?2, next_attempt_at = ?3, last_status = ?4, "
    "last_error = ?5 WHERE id = ?1 AND delivered_at = 0";
static const char SQL_EVENTS_LIST[] =
    "SELECT " EVENT_COLS "WHERE (?1 IS NULL OR consent_id = ?1) "
    "AND (?2 = 0 OR (?2 = 1 AND delivered_at = 0) OR (?2 = 2 AND delivered_at <> 0)) "
    "AND (?3 <= 0 OR id < ?3) ORDER BY id DESC LIMIT ?4";
/* CASE ... THEN 1 ELSE 0: PostgreSQL has no sum of booleans. */
static const char SQL_EVENTS_COUNT[] =
    "SELECT coalesce(sum(CASE WHEN delivered_at = 0 THEN 1 ELSE 0 END), 0), "
    "coalesce(sum(CASE WHEN delivered_at = 0 AND attempts > 0 THEN 1 ELSE 0 END), 0), "
    "coalesce(sum(CASE WHEN delivered_at <> 0 THEN 1 ELSE 0 END), 0) FROM events_outbox";

/* An EVENT_COLS statement's row, column by column, its strings in one block. */
static const struct store_member event_members[] = {
	STORE_INT64(struct store_event_row, id),
	STORE_TEXT(struct store_event_row, jti),
	STORE_TEXT(struct store_event_row, consent_id),
	STORE_TEXT(struct store_event_row, subject_iss),
	STORE_TEXT(struct store_event_row, subject),
	STORE_TEXT(struct store_event_row, agent),
	STORE_TEXT(struct store_event_row, resource),
	STORE_TEXT_OR_NULL(struct store_event_row, reason),
	STORE_INT64(struct store_event_row, created_at),
	STORE_INT64(struct store_event_row, attempts),
	STORE_INT64(struct store_event_row, next_attempt_at),
	STORE_INT64(struct store_event_row, delivered_at),
	STORE_INT64(struct store_event_row, last_status),
	STORE_TEXT_OR_NULL(struct store_event_row, last_error),
	STORE_TEXT(struct store_event_row, kind),
};

static const struct store_row_type event_rows =
    STORE_ROW_MEMBERS(struct store_event_row, event_members);

STORE_ROW_CLEAR_FN(struct store_event_row, event_rows, store_event_row_clear)
STORE_ROWS_FREE_FN(struct store_event_row, event_rows, store_event_rows_free)
STORE_ROW_LIST_FN(struct store_event_row, event_rows, event_list)
STORE_ROW_LIST_DIALECT_FN(struct store_event_row, event_rows, event_list_dialect)

/* 32 lowercase hex digits from 16 random bytes: unique, and never mistaken
 * for a token by audit.c (no "eyJ" in hex). */
static enum cs_err random_jti(char out[STORE_EVENTS_JTI_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char r[STORE_EVENTS_JTI_LEN / 2];
	if (RAND_bytes(r, (int)sizeof r) != 1)
		return CS_ECRYPTO;
	for (size_t i = 0; i < sizeof r; i++) {
		out[2 * i] = hex[r[i] >> 4];
		out[2 * i + 1] = hex[r[i] & 15];
	}
	out[STORE_EVENTS_JTI_LEN] = '\0';
	return CS_OK;
}

enum cs_err store_events_enqueue(struct store_conn *c, const char *consent_id, int64_t now)
{
	enum cs_err e;
	char jti[STORE_EVENTS_JTI_LEN + 1];
	struct store_stmt *st;
	if (c == NULL || consent_id == NULL)
		return CS_EINVAL;
	if ((e = random_jti(jti)) != CS_OK)
		return e;
	if ((st = store_query(c, SQL_EVENTS_ENQUEUE, STORE_VALS(SV_TEXT(consent_id),
	    SV_TEXT(jti), SV_INT(now)), &e)) == NULL)
		return e;
	if ((e = store_exec(c, st)) != CS_OK)
		return e;
	return store_changes(c) == 1 ? CS_OK : CS_ENOENT;
}

enum cs_err store_events_enqueue_kind(struct store_conn *c, const char *consent_id,
    const char *kind, const char *reason, int64_t now)
{
	enum cs_err e;
	char jti[STORE_EVENTS_JTI_LEN + 1];
	struct store_stmt *st;
	if (c == NULL || consent_id == NULL || kind == NULL)
		return CS_EINVAL;
	if ((e = random_jti(jti)) != CS_OK)
		return e;
	if ((st = store_query(c, SQL_EVENTS_ENQUEUE_KIND, STORE_VALS(SV_TEXT(consent_id),
	    SV_TEXT(jti), SV_INT(now), SV_TEXT(reason), SV_TEXT(kind)), &e)) == NULL)
		return e;
	if ((e = store_exec(c, st)) != CS_OK)
		return e;
	return store_changes(c) == 1 ? CS_OK : CS_ENOENT;
}

enum cs_err store_events_claim(struct store_conn *c, int64_t now, int64_t lease, size_t max,
    struct store_event_row **out, size_t *n)
{
	if (max > STORE_EVENTS_LIST_MAX)
		max = STORE_EVENTS_LIST_MAX;
	return event_list_dialect(c, SQL_EVENTS_CLAIM, SQL_EVENTS_CLAIM_PG, STORE_VALS(SV_INT(now),
	    SV_INT(now + lease), SV_INT((int64_t)max)), max, out, n);
}

enum cs_err store_events_release(struct store_conn *c, int64_t id, int64_t at)
{
	return store_run(c, SQL_EVENTS_RELEASE, STORE_VALS(SV_INT(id), SV_INT(at)));
}

enum cs_err store_events_delivered(struct store_conn *c, int64_t id, int64_t now, int64_t status)
{
	return store_run(c, SQL_EVENTS_DELIVERED, STORE_VALS(SV_INT(id), SV_INT(now),
	    SV_INT(status)));
}

enum cs_err store_events_retry(struct store_conn *c, int64_t id, int64_t attempts,
    int64_t next_attempt_at, int64_t status, const char *error)
{
	return store_run(c, SQL_EVENTS_RETRY, STORE_VALS(SV_INT(id), SV_INT(attempts),
	    SV_INT(next_attempt_at), SV_INT(status), SV_TEXT(error)));
}

enum cs_err store_events_list(struct store_conn *c, const struct store_events_filter *f,
    struct store_event_row **out, size_t *n)
{
	if (f == NULL || (unsigned)f->state >= STORE_EVENTS__MAX)
		return CS_EINVAL;
	size_t max = f->max > STORE_EVENTS_LIST_MAX ? STORE_EVENTS_LIST_MAX : f->max;
	return event_list(c, SQL_EVENTS_LIST, STORE_VALS(SV_TEXT(f->consent_id),
	    SV_INT((int64_t)f->state), SV_INT(f->before_id), SV_INT((int64_t)max)), max, out, n);
}

enum cs_err store_events_count(struct store_conn *c, int64_t *waiting, int64_t *failing,
    int64_t *delivered)
{
	enum cs_err e;
	struct store_stmt *st = store_stmt(c, SQL_EVENTS_COUNT);
	if (st == NULL)
		return CS_EDB;
	if ((e = store_step(c, st)) == CS_OK) {
		*waiting = store_col_int64(st, 0);
		*failing = store_col_int64(st, 1);
		*delivered = store_col_int64(st, 2);
	}
	if (e == CS_ENOENT)
		e = CS_EDB;                   /* an aggregate always answers one row */
	store_stmt_done(st);
	return e;
}
