/* store_vault.h -- the SQL behind vault.c: sealed vault records, the
 * revocation outbox and connect states (migration 0005).  Plain rows: sealing,
 * rules and provider calls belong to vault.c.  Blobs here are ciphertexts
 * only; nothing in this file ever sees a plaintext token. */
#ifndef CS_STORE_VAULT_H
#define CS_STORE_VAULT_H

#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"
#include "store.h"

/* Read from the store, a row's strings are one block (block; its text fields
 * point into it, store_cols_text): its clear frees that block (a connect
 * state's verifier wiped first) and the blobs, never a text field.  A row
 * filled by a caller for an insert leaves block NULL: its strings stay the
 * caller's. */
struct store_vault_record {      /* caller-owned; release with store_vault_record_clear() */
	char          *block;        /* the one allocation id .. sites point into */
	char          *id, *consent_id;
	int64_t        user_id;
	char          *subject, *agent, *resource;
	char          *provider_scopes, *token_type;
	unsigned char *access_sealed;
	size_t         access_sealed_len;
	unsigned char *refresh_sealed;       /* NULL when there is no refresh token */
	size_t         refresh_sealed_len;
	int64_t        access_expires_at;
	char          *master_kid;
	int64_t        created_at, updated_at;
	char          *reserved_for;         /* NULL unless a move is under way */
	char          *sites;                /* migration 0025: Atlassian's cloud ids, comma-joined;
	                                      * NULL for other providers */
};
void store_vault_record_clear(struct store_vault_record *r);   /* NULL-safe */

/* The record of a consent / by record id; CS_ENOENT when none.  *out written
 * only on CS_OK (here and below). */
enum cs_err store_vault_record_by_consent(struct store_conn *c, const char *consent_id,
    struct store_vault_record *out) CS_MUST_CHECK;
enum cs_err store_vault_record_get(struct store_conn *c, const char *id,
    struct store_vault_record *out) CS_MUST_CHECK;
/* At most max records of resource whose access token ends by before and that
 * a refresh can renew (a refresh token, no move under way), of consents that
 * are offline, live at now and not marked reconnect_required; soonest expiry
 * first.  *out NULL and *n 0 when none; free with store_vault_records_free. */
enum cs_err store_vault_records_due(struct store_conn *c, const char *resource, int64_t before,
    int64_t now, size_t max, struct store_vault_record **out, size_t *n) CS_MUST_CHECK;
void store_vault_records_free(struct store_vault_record *v, size_t n);   /* NULL-safe */
/* 1 when the consent holds a record, 0 when not (or on a database error). */
int store_vault_record_exists(struct store_conn *c, const char *consent_id);
/* Inserts r; CS_EEXIST when the id or the consent already has one. */
enum cs_err store_vault_record_insert(struct store_conn *c,
    const struct store_vault_record *r) CS_MUST_CHECK;
/* Sets (or with NULL clears) reserved_for; CS_ENOENT when the record is gone. */
enum cs_err store_vault_record_reserve(struct store_conn *c, const char *id,
    const char *reserved_for, int64_t now) CS_MUST_CHECK;
/* Moves the record to consent_id with new ciphertexts (blobs: a the access
 * token, b the refresh one or NULL), clearing reserved_for.  CS_ENOENT when
 * the record is gone. */
enum cs_err store_vault_record_move(struct store_conn *c, const char *id, const char *consent_id,
    const struct store_sealed_blobs *blobs, int64_t now) CS_MUST_CHECK;
/* What a refresh changes in a record. */
struct store_vault_refresh {
	struct store_sealed_blobs blobs;  /* b NULL: the old refresh token stays */
	const char *provider_scopes;
	int64_t     access_expires_at;
};
/* After a refresh: the new ciphertexts, scopes and expiry, in one UPDATE.
 * CS_ENOENT when the record is gone. */
enum cs_err store_vault_record_refreshed(struct store_conn *c, const char *id,
    const struct store_vault_refresh *r, int64_t now) CS_MUST_CHECK;

/* The revocation cascade (called by store_consent_cascade): the consent's
 * record, unless reserved for a move, is copied to the outbox (due at now)
 * and deleted, inside the caller's transaction.  *moved how many (0 or 1). */
enum cs_err store_vault_to_outbox(struct store_conn *c, const char *consent_id, int64_t now,
    int *moved) CS_MUST_CHECK;

/* --- the revocation outbox ---------------------------------------------- */
struct store_vault_outbox {      /* caller-owned; release with store_vault_outbox_clear() */
	char          *block;        /* the one allocation record_id .. master_kid point into */
	int64_t        id;
	char          *record_id, *consent_id;
	int64_t        user_id;
	char          *subject, *resource;
	unsigned char *access_sealed;
	size_t         access_sealed_len;
	unsigned char *refresh_sealed;       /* NULL when none */
	size_t         refresh_sealed_len;
	char          *master_kid;
	int64_t        access_expires_at, created_at, attempts, next_attempt_at;
	int            refresh_revoked, access_revoked;
};
void store_vault_outbox_clear(struct store_vault_outbox *o);             /* NULL-safe */
void store_vault_outbox_free(struct store_vault_outbox *v, size_t n);    /* NULL-safe */
/* Claims at most max entries due at now (next_attempt_at <= now), oldest
 * first: their next attempt moves to now + lease, so no other node, and no
 * later pass, takes them until the lease ends (a retry or delete settles them
 * sooner).  Run it in a transaction of its own and commit before calling the
 * provider.  *out NULL and *n 0 when none. */
enum cs_err store_vault_outbox_claim(struct store_conn *c, int64_t now, int64_t lease,
    size_t max, struct store_vault_outbox **out, size_t *n) CS_MUST_CHECK;
/* Records that the refresh and/or access token was revoked (flags only go up). */
enum cs_err store_vault_outbox_mark(struct store_conn *c, int64_t id, int refresh_revoked,
    int access_revoked) CS_MUST_CHECK;
enum cs_err store_vault_outbox_retry(struct store_conn *c, int64_t id, int64_t attempts,
    int64_t next_attempt_at) CS_MUST_CHECK;
/* Erases the entry and its ciphertexts. */
enum cs_err store_vault_outbox_delete(struct store_conn *c, int64_t id) CS_MUST_CHECK;

/* --- connect states ----------------------------------------------------- */
struct store_vault_connect {     /* caller-owned; release with store_vault_connect_clear() (wipes) */
	char    *block;              /* the one allocation request_id .. request_version point into */
	unsigned char state_hash[32], session_hash[32];
	int64_t  user_id;
	char    *request_id, *resource;
	char    *provider_issuer;            /* may be NULL */
	char    *code_verifier;              /* secret */
	char    *selected;
	int64_t  duration;
	int      offline;
	char    *provider_scopes;
	int64_t  created_at, expires_at;
	char    *request_version;            /* consent_request_version() the person decided on */
};
void store_vault_connect_clear(struct store_vault_connect *s);   /* NULL-safe; wipes */
enum cs_err store_vault_connect_insert(struct store_conn *c,
    const struct store_vault_connect *s) CS_MUST_CHECK;
/* Reads and deletes (single use) the state with this hash; CS_ENOENT when none. */
enum cs_err store_vault_connect_take(struct store_conn *c, const unsigned char state_hash[32],
    struct store_vault_connect *out) CS_MUST_CHECK;
/* Deletes connect states expired at now. */
enum cs_err store_vault_connect_purge(struct store_conn *c, int64_t now) CS_MUST_CHECK;

#endif
