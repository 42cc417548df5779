/* store_vault.c -- the SQL for vault records, the revocation outbox and
 * connect states (migration 0005).  Rules and sealing live in vault.c; this
 * file only moves rows and ciphertexts, and never builds SQL from input. */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "store_priv.h"
#include "store_vault.h"

#define RECORD_COLS \
	"id, consent_id, user_id, subject, agent, resource, provider_scopes, token_type, " \
	"access_sealed, refresh_sealed, access_expires_at, master_kid, created_at, updated_at, " \
	"reserved_for, sites FROM vault_records "
#define OUTBOX_COLS_ONLY \
	"id, record_id, consent_id, user_id, subject, resource, access_sealed, refresh_sealed, " \
	"master_kid, access_expires_at, created_at, attempts, next_attempt_at, refresh_revoked, " \
	"access_revoked "

static const char SQL_RECORD_BY_CONSENT[] = "SELECT " RECORD_COLS "WHERE consent_id = ?1";
static const char SQL_RECORD_GET[] = "SELECT " RECORD_COLS "WHERE id = ?1";
/* vault_refresh_ahead: a resource's records due for a refresh (their access
 * token ends by ?2) that can be refreshed (a refresh token, no move under
 * way) and whose consent is offline, live at ?3 and not marked. */
static const char SQL_RECORDS_DUE[] = "SELECT " RECORD_COLS
    "WHERE resource = ?1 AND refresh_sealed IS NOT NULL AND reserved_for IS NULL "
    "AND access_expires_at <= ?2 AND consent_id IN (SELECT id FROM consents WHERE offline = 1 "
    "AND revoked_at = 0 AND expires_at > ?3 AND reconnect_required = 0) "
    "ORDER BY access_expires_at, id LIMIT ?4";
static const char SQL_RECORD_EXISTS[] = "SELECT 1 FROM vault_records WHERE consent_id = ?1";
static const char SQL_RECORD_INSERT[] =
    "INSERT INTO vault_records (id, consent_id, user_id, subject, agent, resource, "
    "provider_scopes, token_type, access_sealed, refresh_sealed, access_expires_at, master_kid, "
    "created_at, updated_at, reserved_for, sites) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, NULL, ?15)";
static const char SQL_RECORD_RESERVE[] =
    "UPDATE vault_records SET reserved_for = ?2, updated_at = ?3 WHERE id = ?1";
static const char SQL_RECORD_MOVE[] =
    "UPDATE vault_records SET consent_id = ?2, access_sealed = ?3, refresh_sealed = ?4, "
    "master_kid = ?5, updated_at = ?6, reserved_for = NULL WHERE id = ?1";
/* coalesce: a refresh that sent no new refresh token keeps the old one. */
static const char SQL_RECORD_REFRESHED[] =
    "UPDATE vault_records SET access_sealed = ?2, refresh_sealed = coalesce(?3, refresh_sealed), "
    "provider_scopes = ?4, access_expires_at = ?5, master_kid = ?6, updated_at = ?7 WHERE id = ?1";
/* The cascade: a reserved record is on its way to the consent replacing this one. */
static const char SQL_RECORD_TO_OUTBOX[] =
    "INSERT INTO vault_outbox (record_id, consent_id, user_id, subject, resource, access_sealed, "
    "refresh_sealed, master_kid, access_expires_at, created_at, attempts, next_attempt_at, "
    "refresh_revoked, access_revoked) "
    "SELECT id, consent_id, user_id, subject, resource, access_sealed, refresh_sealed, "
    "master_kid, access_expires_at, ?2, 0, ?2, 0, 0 FROM vault_records "
    "WHERE consent_id = ?1 AND reserved_for IS NULL";
static const char SQL_RECORD_DELETE_UNRESERVED[] =
    "DELETE FROM vault_records WHERE consent_id = ?1 AND reserved_for IS NULL";

/* A claim, as the events outbox's (store_events.c): the due entries' next
 * attempt moves past the lease, so no other node (nor this one) takes them
 * meanwhile, and a node that dies mid-pass leaves them due when the lease
 * ends.  The outer WHERE re-checks a row another claim committed meanwhile;
 * PostgreSQL skips the rows another claim holds rather than waiting. */
#define OUTBOX_CLAIM(lock) \
    "UPDATE vault_outbox SET next_attempt_at = ?2 WHERE next_attempt_at <= ?1 AND id IN " \
    "(SELECT id FROM vault_outbox WHERE next_attempt_at <= ?1 " \
    "ORDER BY next_attempt_at, id LIMIT ?3" lock ") RETURNING " OUTBOX_COLS_ONLY
static const char SQL_OUTBOX_CLAIM[] = OUTBOX_CLAIM("");
static const char SQL_OUTBOX_CLAIM_PG[] = OUTBOX_CLAIM(" FOR UPDATE SKIP LOCKED");
/* A flag once set stays set.  CASE rather than SQLite's two-argument max(),
 * which PostgreSQL spells GREATEST (neither side is ever NULL). */
static const char SQL_OUTBOX_MARK[] =
    "UPDATE vault_outbox SET "
    "refresh_revoked = CASE WHEN ?2 > refresh_revoked THEN ?2 ELSE refresh_revoked END, "
    "access_revoked = CASE WHEN ?3 > access_revoked THEN ?3 ELSE access_revoked END "
    "WHERE id = ?1";
static const char SQL_OUTBOX_RETRY[] =
    "UPDATE vault_outbox SET attempts = ?2, next_attempt_at = ?3 WHERE id = ?1";
static const char SQL_OUTBOX_DELETE[] = "DELETE FROM vault_outbox WHERE id = ?1";

static const char SQL_CONNECT_INSERT[] =
    "INSERT INTO vault_connects (state_hash, session_hash, user_id, request_id, resource, "
    "provider_issuer, code_verifier, selected, duration, offline, provider_scopes, created_at, "
    "expires_at, request_version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
    "?14)";
static const char SQL_CONNECT_TAKE[] =
    "DELETE FROM vault_connects WHERE state_hash = ?1 RETURNING session_hash, user_id, "
    "request_id, resource, provider_issuer, code_verifier, selected, duration, offline, "
    "provider_scopes, created_at, expires_at, request_version";
static const char SQL_CONNECT_PURGE[] = "DELETE FROM vault_connects WHERE expires_at <= ?1";

#define OUTBOX_MAX 1000              /* one pass handles at most this many */

/* --- records ------------------------------------------------------------ */

/* A RECORD_COLS statement's row, column by column (store_get, store_rows). */
static const struct store_member record_members[] = {
	STORE_TEXT(struct store_vault_record, id),
	STORE_TEXT(struct store_vault_record, consent_id),
	STORE_INT64(struct store_vault_record, user_id),
	STORE_TEXT(struct store_vault_record, subject),
	STORE_TEXT(struct store_vault_record, agent),
	STORE_TEXT(struct store_vault_record, resource),
	STORE_TEXT(struct store_vault_record, provider_scopes),
	STORE_TEXT(struct store_vault_record, token_type),
	STORE_BLOB(struct store_vault_record, access_sealed, access_sealed_len),
	STORE_BLOB_OR_NULL(struct store_vault_record, refresh_sealed, refresh_sealed_len),
	STORE_INT64(struct store_vault_record, access_expires_at),
	STORE_TEXT(struct store_vault_record, master_kid),
	STORE_INT64(struct store_vault_record, created_at),
	STORE_INT64(struct store_vault_record, updated_at),
	STORE_TEXT_OR_NULL(struct store_vault_record, reserved_for),
	STORE_TEXT_OR_NULL(struct store_vault_record, sites),
};

/* Its clear wipes the two sealed tokens before freeing them. */
static const struct store_row_type record_rows =
    STORE_ROW_MEMBERS(struct store_vault_record, record_members);

STORE_ROW_CLEAR_FN(struct store_vault_record, record_rows, store_vault_record_clear)
STORE_ROWS_FREE_FN(struct store_vault_record, record_rows, store_vault_records_free)
STORE_ROW_LIST_FN(struct store_vault_record, record_rows, record_list)

enum cs_err store_vault_records_due(struct store_conn *c, const char *resource, int64_t before,
    int64_t now, size_t max, struct store_vault_record **out, size_t *n)
{
	if (resource == NULL || out == NULL || n == NULL)
		return CS_EINVAL;
	if (max > OUTBOX_MAX)
		max = OUTBOX_MAX;
	return record_list(c, SQL_RECORDS_DUE, STORE_VALS(SV_TEXT(resource), SV_INT(before),
	    SV_INT(now), SV_INT((int64_t)max)), max, out, n);
}

enum cs_err store_vault_record_by_consent(struct store_conn *c, const char *consent_id,
    struct store_vault_record *out)
{
	return store_get(c, SQL_RECORD_BY_CONSENT, STORE_VALS(SV_TEXT(consent_id)), &record_rows, out);
}

enum cs_err store_vault_record_get(struct store_conn *c, const char *id,
    struct store_vault_record *out)
{
	return store_get(c, SQL_RECORD_GET, STORE_VALS(SV_TEXT(id)), &record_rows, out);
}

int store_vault_record_exists(struct store_conn *c, const char *consent_id)
{
	int64_t one;
	return store_get_ints(c, SQL_RECORD_EXISTS, STORE_VALS(SV_TEXT(consent_id)), &one, 1) == CS_OK;
}

enum cs_err store_vault_record_insert(struct store_conn *c, const struct store_vault_record *r)
{
	return store_run(c, SQL_RECORD_INSERT, STORE_VALS(SV_TEXT(r->id),
	    SV_TEXT(r->consent_id), SV_INT(r->user_id), SV_TEXT(r->subject), SV_TEXT(r->agent),
	    SV_TEXT(r->resource), SV_TEXT(r->provider_scopes), SV_TEXT(r->token_type),
	    SV_BLOB(r->access_sealed, r->access_sealed_len),
	    SV_BLOB_OR_NULL(r->refresh_sealed, r->refresh_sealed_len),
	    SV_INT(r->access_expires_at), SV_TEXT(r->master_kid), SV_INT(r->created_at),
	    SV_INT(r->updated_at), SV_TEXT(r->sites)));
}

enum cs_err store_vault_record_reserve(struct store_conn *c, const char *id,
    const char *reserved_for, int64_t now)
{
	return store_run_one(c, SQL_RECORD_RESERVE, STORE_VALS(SV_TEXT(id),
	    SV_TEXT(reserved_for), SV_INT(now)));
}

enum cs_err store_vault_record_move(struct store_conn *c, const char *id, const char *consent_id,
    const struct store_sealed_blobs *blobs, int64_t now)
{
	if (blobs == NULL)
		return CS_EINVAL;
	return store_run_one(c, SQL_RECORD_MOVE, STORE_VALS(SV_TEXT(id),
	    SV_TEXT(consent_id), SV_BLOB(blobs->a, blobs->a_len),
	    SV_BLOB_OR_NULL(blobs->b, blobs->b_len), SV_TEXT(blobs->master_kid), SV_INT(now)));
}

enum cs_err store_vault_record_refreshed(struct store_conn *c, const char *id,
    const struct store_vault_refresh *r, int64_t now)
{
	if (r == NULL)
		return CS_EINVAL;
	return store_run_one(c, SQL_RECORD_REFRESHED, STORE_VALS(SV_TEXT(id),
	    SV_BLOB(r->blobs.a, r->blobs.a_len), SV_BLOB_OR_NULL(r->blobs.b, r->blobs.b_len),
	    SV_TEXT(r->provider_scopes), SV_INT(r->access_expires_at),
	    SV_TEXT(r->blobs.master_kid), SV_INT(now)));
}

enum cs_err store_vault_to_outbox(struct store_conn *c, const char *consent_id, int64_t now,
    int *moved)
{
	enum cs_err e;
	int64_t n;
	struct store_stmt *st = store_query(c, SQL_RECORD_TO_OUTBOX, STORE_VALS(SV_TEXT(consent_id),
	    SV_INT(now)), &e);
	if (st == NULL)
		return e;
	if ((e = store_exec(c, st)) != CS_OK)
		return e;
	n = store_changes(c);
	/* SECURITY: the ciphertexts now live only in the outbox, from which
	 * nothing is ever released. */
	if ((st = store_query(c, SQL_RECORD_DELETE_UNRESERVED, STORE_VALS(SV_TEXT(consent_id)),
	    &e)) == NULL)
		return e;
	if ((e = store_exec(c, st)) != CS_OK)
		return e;
	/* Defensive: what was copied is exactly what was deleted. */
	if (store_changes(c) != n)
		return CS_EDB;
	if (moved != NULL)
		*moved = (int)n;
	return CS_OK;
}

/* --- outbox ------------------------------------------------------------- */

/* An OUTBOX_COLS_ONLY row, column by column (store_rows). */
static const struct store_member outbox_members[] = {
	STORE_INT64(struct store_vault_outbox, id),
	STORE_TEXT(struct store_vault_outbox, record_id),
	STORE_TEXT(struct store_vault_outbox, consent_id),
	STORE_INT64(struct store_vault_outbox, user_id),
	STORE_TEXT(struct store_vault_outbox, subject),
	STORE_TEXT(struct store_vault_outbox, resource),
	STORE_BLOB(struct store_vault_outbox, access_sealed, access_sealed_len),
	STORE_BLOB_OR_NULL(struct store_vault_outbox, refresh_sealed, refresh_sealed_len),
	STORE_TEXT(struct store_vault_outbox, master_kid),
	STORE_INT64(struct store_vault_outbox, access_expires_at),
	STORE_INT64(struct store_vault_outbox, created_at),
	STORE_INT64(struct store_vault_outbox, attempts),
	STORE_INT64(struct store_vault_outbox, next_attempt_at),
	STORE_FLAG(struct store_vault_outbox, refresh_revoked),
	STORE_FLAG(struct store_vault_outbox, access_revoked),
};

static const struct store_row_type outbox_rows =
    STORE_ROW_MEMBERS(struct store_vault_outbox, outbox_members);

STORE_ROW_CLEAR_FN(struct store_vault_outbox, outbox_rows, store_vault_outbox_clear)
STORE_ROWS_FREE_FN(struct store_vault_outbox, outbox_rows, store_vault_outbox_free)
STORE_ROW_LIST_DIALECT_FN(struct store_vault_outbox, outbox_rows, outbox_list)

enum cs_err store_vault_outbox_claim(struct store_conn *c, int64_t now, int64_t lease,
    size_t max, struct store_vault_outbox **out, size_t *n)
{
	if (max > OUTBOX_MAX)
		max = OUTBOX_MAX;
	return outbox_list(c, SQL_OUTBOX_CLAIM, SQL_OUTBOX_CLAIM_PG, STORE_VALS(SV_INT(now),
	    SV_INT(now + lease), SV_INT((int64_t)max)), max, out, n);
}

enum cs_err store_vault_outbox_mark(struct store_conn *c, int64_t id, int refresh_revoked,
    int access_revoked)
{
	return store_run_one(c, SQL_OUTBOX_MARK, STORE_VALS(SV_INT(id),
	    SV_INT(refresh_revoked ? 1 : 0), SV_INT(access_revoked ? 1 : 0)));
}

enum cs_err store_vault_outbox_retry(struct store_conn *c, int64_t id, int64_t attempts,
    int64_t next_attempt_at)
{
	return store_run_one(c, SQL_OUTBOX_RETRY, STORE_VALS(SV_INT(id),
	    SV_INT(attempts), SV_INT(next_attempt_at)));
}

enum cs_err store_vault_outbox_delete(struct store_conn *c, int64_t id)
{
	return store_run_one(c, SQL_OUTBOX_DELETE, STORE_VALS(SV_INT(id)));
}

/* --- connect states ----------------------------------------------------- */

void store_vault_connect_clear(struct store_vault_connect *s)
{
	if (s == NULL)
		return;
	/* SECURITY: the PKCE verifier is wiped before its block is freed.  A
	 * caller's insert row (block NULL) is the caller's own. */
	if (s->block != NULL) {
		if (s->code_verifier != NULL)
			OPENSSL_cleanse(s->code_verifier, strlen(s->code_verifier));
		free(s->block);
	}
	OPENSSL_cleanse(s, sizeof *s);
}

enum cs_err store_vault_connect_insert(struct store_conn *c, const struct store_vault_connect *s)
{
	return store_run(c, SQL_CONNECT_INSERT, STORE_VALS(SV_BLOB(s->state_hash, 32),
	    SV_BLOB(s->session_hash, 32), SV_INT(s->user_id), SV_TEXT(s->request_id),
	    SV_TEXT(s->resource), SV_TEXT(s->provider_issuer), SV_TEXT(s->code_verifier),
	    SV_TEXT(s->selected), SV_INT(s->duration), SV_INT(s->offline ? 1 : 0),
	    SV_TEXT(s->provider_scopes), SV_INT(s->created_at), SV_INT(s->expires_at),
	    SV_TEXT(s->request_version)));
}

enum cs_err store_vault_connect_take(struct store_conn *c, const unsigned char state_hash[32],
    struct store_vault_connect *out)
{
	enum cs_err e;
	unsigned char *sh = NULL;
	size_t shlen = 0;
	struct store_vault_connect s;
	struct store_stmt *st = store_stmt(c, SQL_CONNECT_TAKE);
	memset(&s, 0, sizeof s);
	if (st == NULL)
		return CS_EDB;
	if ((e = store_bind(st, STORE_VALS(SV_BLOB(state_hash, 32)))) != CS_OK ||
	    (e = store_step(c, st)) != CS_OK)
		goto out;
	if ((e = store_col_blob(st, 0, &sh, &shlen)) != CS_OK ||
	    (e = store_cols_text(st, &s.block, STORE_TEXT_COLS(
	    { 2, &s.request_id, true },
	    { 3, &s.resource, true },
	    { 4, &s.provider_issuer, false },
	    { 5, &s.code_verifier, true },
	    { 6, &s.selected, true },
	    { 9, &s.provider_scopes, true },
	    { 12, &s.request_version, true }))) != CS_OK)
		goto out;
	if (shlen != 32) {
		e = CS_EDB;
		goto out;
	}
	memcpy(s.state_hash, state_hash, 32);
	memcpy(s.session_hash, sh, 32);
	s.user_id = store_col_int64(st, 1);
	s.duration = store_col_int64(st, 7);
	s.offline = store_col_int(st, 8) != 0;
	s.created_at = store_col_int64(st, 10);
	s.expires_at = store_col_int64(st, 11);
	/* Step to the end so the DELETE really happens (RETURNING runs it). */
	if ((e = store_step(c, st)) != CS_ENOENT) {
		if (e == CS_OK)
			e = CS_EDB;           /* a primary key matched twice: cannot be */
		goto out;
	}
	*out = s;
	memset(&s, 0, sizeof s);
	e = CS_OK;
out:
	store_stmt_done(st);
	free(sh);
	store_vault_connect_clear(&s);
	return e;
}

enum cs_err store_vault_connect_purge(struct store_conn *c, int64_t now)
{
	return store_run(c, SQL_CONNECT_PURGE, STORE_VALS(SV_INT(now)));
}
