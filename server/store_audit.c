/* store_audit.c -- the SQL of the audit chain and of master-key rotation
 * (migrations 0003, 0005, 0007).  Links and seals are computed in audit.c and
 * audit_cli.c; this file only moves rows, and never builds SQL from input. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_audit.h"
#include "store_priv.h"

#define AUDIT_COLS \
	"seq, ts, actor, action, subject, agent, resource, scopes, consent_id, request_id, " \
	"outcome, detail, link, master_kid, chain, prev_seq FROM audit "

/* A chain's head and the next number in one statement: the highest number
 * ever given (SQLite's sqlite_sequence outlives pruning; on PostgreSQL
 * numbers come from audit's sequence, SQL_AUDIT_NUMBERS_PG, so the column is
 * unused there), then the chain's last entry's seq and link, or its
 * anchor's when every entry of it was pruned (NULL when neither). */
static const char SQL_AUDIT_HEAD[] =
    "SELECT (SELECT seq FROM sqlite_sequence WHERE name = 'audit'), "
    "COALESCE(h.seq, a.seq), COALESCE(h.link, a.link) "
    "FROM (SELECT 1 AS one) AS o LEFT JOIN "
    "(SELECT seq, link FROM audit WHERE chain = ?1 ORDER BY seq DESC LIMIT 1) AS h ON 1 = 1 "
    "LEFT JOIN audit_anchor AS a ON a.chain = ?1";
static const char SQL_AUDIT_HEAD_PG[] =
    "SELECT 0, COALESCE(h.seq, a.seq), COALESCE(h.link, a.link) "
    "FROM (SELECT 1 AS one) AS o LEFT JOIN "
    "(SELECT seq, link FROM audit WHERE chain = ?1 ORDER BY seq DESC LIMIT 1) AS h ON 1 = 1 "
    "LEFT JOIN audit_anchor AS a ON a.chain = ?1";
/* Entry numbers for the appends of one transaction (?1 of them), from
 * audit's sequence (many writers: migrations/pg/0028); SQLite never asks
 * (one writer: the head's next). */
static const char SQL_AUDIT_NUMBERS[] =
    "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'audit'), 0) + ?1";
static const char SQL_AUDIT_NUMBERS_PG[] =
    "SELECT nextval(pg_get_serial_sequence('audit', 'seq')) FROM generate_series(1, ?1)";
static const char SQL_AUDIT_LAST[] = "SELECT seq, link FROM audit ORDER BY seq DESC LIMIT 1";
static const char SQL_CHAIN_CLAIM[] =
    "INSERT INTO audit_chains (opened_at) VALUES (?1) RETURNING chain";
/* The chains that appended last, not the last claimed: every `consentd`
 * command that writes claims a chain on PostgreSQL, and those never move
 * again, so the highest numbers would soon name only them. */
static const char SQL_CHAIN_HEADS[] =
    "SELECT chain, seq, link FROM audit WHERE seq IN (SELECT h.seq FROM (SELECT (SELECT "
    "max(a.seq) FROM audit AS a WHERE a.chain = c.chain) AS seq FROM audit_chains AS c "
    "WHERE c.chain <> ?1) AS h WHERE h.seq IS NOT NULL ORDER BY h.seq DESC LIMIT ?2) "
    "ORDER BY chain DESC";
static const char SQL_AUDIT_APPEND[] =
    "INSERT INTO audit (seq, ts, actor, action, subject, agent, resource, scopes, consent_id, "
    "request_id, outcome, detail, link, master_kid, chain, prev_seq) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)";
static const char SQL_AUDIT_PAGE[] = "SELECT " AUDIT_COLS "WHERE seq > ?1 ORDER BY seq LIMIT ?2";
/* The anchor's link stands for the pruned entry it names (audit_heads_check). */
static const char SQL_AUDIT_LINK_AT[] =
    "SELECT link FROM audit WHERE seq = ?1 UNION ALL SELECT link FROM audit_anchor WHERE seq = ?1";
#define ANCHOR_COLS "seq, link, mac, master_kid, pruned_at, chain FROM audit_anchor "
static const char SQL_ANCHOR_GET[] = "SELECT " ANCHOR_COLS "WHERE chain = ?1";
static const char SQL_ANCHOR_ALL[] = "SELECT " ANCHOR_COLS "ORDER BY chain";
/* An upsert rather than INSERT OR REPLACE, which PostgreSQL lacks: every
 * column is written either way, so the row ends the same. */
static const char SQL_ANCHOR_SET[] =
    "INSERT INTO audit_anchor (chain, seq, link, mac, master_kid, pruned_at) "
    "VALUES (?6, ?1, ?2, ?3, ?4, ?5) ON CONFLICT (chain) DO UPDATE SET seq = excluded.seq, "
    "link = excluded.link, mac = excluded.mac, master_kid = excluded.master_kid, "
    "pruned_at = excluded.pruned_at";
static const char SQL_AUDIT_PRUNE[] = "DELETE FROM audit WHERE seq <= ?1";
static const char SQL_AUDIT_SET_LINK[] = "UPDATE audit SET link = ?2, master_kid = ?3 WHERE seq = ?1";

static const char SQL_KEYS_ALL[] = "SELECT kid, master_kid, sealed FROM signing_keys ORDER BY kid";
static const char SQL_RECORDS_ALL[] =
    "SELECT id, id, consent_id, subject, resource, master_kid, access_sealed, refresh_sealed "
    "FROM vault_records ORDER BY id";
static const char SQL_OUTBOX_ALL[] =
    "SELECT id, record_id, consent_id, subject, resource, master_kid, access_sealed, "
    "refresh_sealed FROM vault_outbox ORDER BY id";
static const char SQL_KEY_RESEAL[] =
    "UPDATE signing_keys SET sealed = ?2, master_kid = ?4 WHERE kid = ?1";
static const char SQL_RECORD_RESEAL[] =
    "UPDATE vault_records SET access_sealed = ?2, refresh_sealed = ?3, master_kid = ?4 WHERE id = ?1";
/* BIGINT, not INTEGER: the same to SQLite, but PostgreSQL's INTEGER is
 * 32 bits and the id is 64. */
static const char SQL_OUTBOX_RESEAL[] =
    "UPDATE vault_outbox SET access_sealed = ?2, refresh_sealed = ?3, master_kid = ?4 "
    "WHERE id = CAST(?1 AS BIGINT)";

#define PAGE_MAX 10000               /* rows per page, bounded by the caller too */

enum cs_err store_audit_reserve(struct store_conn *c, size_t n)
{
	int64_t v[STORE_AUDIT_RESERVE];
	size_t k = 0;
	enum cs_err e;
	struct store_stmt *st;

	if (c == NULL || n == 0)
		return CS_EINVAL;
	if (!store_audit_numbers_from_sequence(c))
		return CS_OK;                /* one writer: each append's head says */
	if (n > STORE_AUDIT_RESERVE)
		n = STORE_AUDIT_RESERVE;
	if ((st = store_query(c, store_dialect_sql(c, SQL_AUDIT_NUMBERS, SQL_AUDIT_NUMBERS_PG),
	    STORE_VALS(SV_INT((int64_t)n)), &e)) == NULL)
		return e;
	while (k < n && (e = store_step(c, st)) == CS_OK)
		v[k++] = store_col_int64(st, 0);
	store_stmt_done(st);
	if (e != CS_OK && e != CS_ENOENT)
		return e;
	if (k == 0)
		return CS_EDB;
	/* In order: the chain's numbers must only grow. */
	for (size_t i = 1; i < k; i++)
		for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
			int64_t t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	store_audit_numbers_add(c, v, k);
	return CS_OK;
}

/* The next entry number the transaction took from the sequence, taking one
 * more when it has none left. */
static enum cs_err next_number(struct store_conn *c, int64_t *seq)
{
	enum cs_err e;
	if (store_audit_number_take(c, seq))
		return CS_OK;
	if ((e = store_audit_reserve(c, 1)) != CS_OK)
		return e;
	return store_audit_number_take(c, seq) ? CS_OK : CS_EDB;
}

void store_audit_chain_need(struct store_conn *c, int64_t *chain, bool *fresh)
{
	bool own = false;
	*chain = store_audit_chain_of(c, &own);
	*fresh = own && *chain == 0;
}

enum cs_err store_audit_chain_claim(struct store_conn *c, int64_t now, int64_t *chain)
{
	int64_t id = 0;
	enum cs_err e;
	if (c == NULL || chain == NULL)
		return CS_EINVAL;
	if ((e = store_get_ints(c, SQL_CHAIN_CLAIM, STORE_VALS(SV_INT(now)), &id, 1)) != CS_OK)
		return e == CS_ENOENT ? CS_EDB : e;
	if (id < 1)
		return CS_EDB;
	store_audit_chain_claimed(c, id);
	*chain = id;
	return CS_OK;
}

enum cs_err store_audit_head(struct store_conn *c, struct store_audit_head *out)
{
	enum cs_err e;
	struct store_audit_head h;
	struct store_stmt *st;
	bool own = false, from_sequence;
	int64_t high;                     /* one writer: the highest number ever given */

	memset(&h, 0, sizeof h);
	if (c == NULL || out == NULL)
		return CS_EINVAL;
	h.chain = store_audit_chain_of(c, &own);
	from_sequence = store_audit_numbers_from_sequence(c);
	/* After this transaction's own append its entry is the head: no round
	 * trip (a batch of entries in one transaction reads the head once).  The
	 * process's transactions before left it too: with chains of their own,
	 * its last commit (nobody else appends to that chain); on SQLite, the
	 * writer's last transaction, while no other connection committed (and
	 * so took no number: the next is the head's next). */
	if (store_audit_head_known(c, &h.seq, h.link) ||
	    store_audit_chain_head(c, h.chain, &h.seq, h.link)) {
		h.link_len = STORE_AUDIT_LINK_LEN;
		high = h.seq;
	} else {
		store_audit_head_was_read(c);
		if ((st = store_query(c, store_dialect_sql(c, SQL_AUDIT_HEAD, SQL_AUDIT_HEAD_PG),
		    STORE_VALS(SV_INT(h.chain)), &e)) == NULL)
			return e;
		e = store_step(c, st);
		if (e == CS_OK) {
			h.seq = store_col_int64(st, 1);
			if (store_col_type(st, 2) == STORE_COL_BLOB &&
			    store_col_bytes(st, 2) == STORE_AUDIT_LINK_LEN) {
				memcpy(h.link, store_col_raw_blob(st, 2), STORE_AUDIT_LINK_LEN);
				h.link_len = STORE_AUDIT_LINK_LEN;
			}
			h.next = store_col_int64(st, 0);
		}
		store_stmt_done(st);
		if (e != CS_OK && e != CS_ENOENT)
			return e;
		high = h.next > h.seq ? h.next : h.seq;
	}
	if (from_sequence) {
		if ((e = next_number(c, &h.next)) != CS_OK)
			return e;
	} else {
		if (high == INT64_MAX)
			return CS_ETOOBIG;
		h.next = high + 1;
	}
	*out = h;
	return CS_OK;
}

enum cs_err store_audit_last(struct store_conn *c, int64_t *seq,
    unsigned char link[STORE_AUDIT_LINK_LEN], size_t *link_len)
{
	enum cs_err e;
	struct store_stmt *st;
	if (c == NULL || seq == NULL || link == NULL || link_len == NULL)
		return CS_EINVAL;
	*seq = 0;
	*link_len = 0;
	memset(link, 0, STORE_AUDIT_LINK_LEN);
	if ((st = store_stmt(c, SQL_AUDIT_LAST)) == NULL)
		return CS_EDB;
	e = store_step(c, st);
	if (e == CS_OK) {
		*seq = store_col_int64(st, 0);
		if (store_col_type(st, 1) == STORE_COL_BLOB &&
		    store_col_bytes(st, 1) == STORE_AUDIT_LINK_LEN) {
			memcpy(link, store_col_raw_blob(st, 1), STORE_AUDIT_LINK_LEN);
			*link_len = STORE_AUDIT_LINK_LEN;
		}
	}
	store_stmt_done(st);
	return e == CS_ENOENT ? CS_OK : e;
}

enum cs_err store_audit_chain_heads(struct store_conn *c, int64_t except,
    struct store_audit_ref *out, size_t max, size_t *n)
{
	enum cs_err e;
	struct store_stmt *st;
	size_t k = 0;
	if (c == NULL || out == NULL || n == NULL || max == 0 || max > 1000)
		return CS_EINVAL;
	if ((st = store_query(c, SQL_CHAIN_HEADS, STORE_VALS(SV_INT(except), SV_INT((int64_t)max)),
	    &e)) == NULL)
		return e;
	while (k < max && (e = store_step(c, st)) == CS_OK) {
		if (store_col_type(st, 2) != STORE_COL_BLOB ||
		    store_col_bytes(st, 2) != STORE_AUDIT_LINK_LEN)
			continue;              /* no link: nothing to vouch for */
		out[k].chain = store_col_int64(st, 0);
		out[k].seq = store_col_int64(st, 1);
		memcpy(out[k].link, store_col_raw_blob(st, 2), STORE_AUDIT_LINK_LEN);
		k++;
	}
	store_stmt_done(st);
	if (e != CS_OK && e != CS_ENOENT)
		return e;
	*n = k;
	return CS_OK;
}

enum cs_err store_audit_append(struct store_conn *c, const struct store_audit_fields *a,
    int64_t seq, const unsigned char link[STORE_AUDIT_LINK_LEN], const char *master_kid)
{
	/* store_run_later: bound without SQLite's copies of the entry's fields;
	 * on PostgreSQL it goes with the transaction's next statement or its
	 * COMMIT (nothing reads its answer; a failure fails the COMMIT). */
	enum cs_err e = store_run_later(c, SQL_AUDIT_APPEND, STORE_VALS(SV_INT(seq),
	    SV_INT(a->ts), SV_TEXT(a->actor), SV_TEXT(a->action), SV_TEXT(a->subject),
	    SV_TEXT(a->agent), SV_TEXT(a->resource), SV_TEXT(a->scopes), SV_TEXT(a->consent_id),
	    SV_TEXT(a->request_id), SV_TEXT(a->outcome), SV_TEXT(a->detail),
	    SV_BLOB(link, STORE_AUDIT_LINK_LEN), SV_TEXT(master_kid), SV_INT(a->chain),
	    SV_INT(a->chain != 0 ? a->prev_seq : 0)));
	if (e == CS_OK)
		store_audit_appended(c, a->chain, seq, link);
	return e;
}

enum cs_err store_audit_link_at(struct store_conn *c, int64_t seq,
    unsigned char link[STORE_AUDIT_LINK_LEN])
{
	enum cs_err e;
	struct store_stmt *st;

	if (c == NULL || link == NULL)
		return CS_EINVAL;
	if ((st = store_query(c, SQL_AUDIT_LINK_AT, STORE_VALS(SV_INT(seq)), &e)) == NULL)
		return e;
	e = store_step(c, st);
	if (e == CS_OK) {
		if (store_col_type(st, 0) == STORE_COL_BLOB &&
		    store_col_bytes(st, 0) == STORE_AUDIT_LINK_LEN)
			memcpy(link, store_col_raw_blob(st, 0), STORE_AUDIT_LINK_LEN);
		else
			e = CS_ENOENT;
	}
	store_stmt_done(st);
	return e;
}

/* An AUDIT_COLS statement's row, column by column (store_get, store_rows).
 * None required: a damaged entry is read as it is, for verification to
 * report, not refused here. */
static const struct store_member audit_members[] = {
	STORE_INT64(struct store_audit_row, seq),
	STORE_INT64(struct store_audit_row, ts),
	STORE_TEXT_OR_NULL(struct store_audit_row, actor),
	STORE_TEXT_OR_NULL(struct store_audit_row, action),
	STORE_TEXT_OR_NULL(struct store_audit_row, subject),
	STORE_TEXT_OR_NULL(struct store_audit_row, agent),
	STORE_TEXT_OR_NULL(struct store_audit_row, resource),
	STORE_TEXT_OR_NULL(struct store_audit_row, scopes),
	STORE_TEXT_OR_NULL(struct store_audit_row, consent_id),
	STORE_TEXT_OR_NULL(struct store_audit_row, request_id),
	STORE_TEXT_OR_NULL(struct store_audit_row, outcome),
	STORE_TEXT_OR_NULL(struct store_audit_row, detail),
	STORE_BLOB_OR_NULL(struct store_audit_row, link, link_len),
	STORE_TEXT_OR_NULL(struct store_audit_row, master_kid),
	STORE_INT64(struct store_audit_row, chain),
	STORE_INT64(struct store_audit_row, prev_seq),
};

static const struct store_row_type audit_rows =
    STORE_ROW_MEMBERS(struct store_audit_row, audit_members);

STORE_ROWS_FREE_FN(struct store_audit_row, audit_rows, store_audit_rows_free)
STORE_ROW_LIST_FN(struct store_audit_row, audit_rows, audit_list)

enum cs_err store_audit_page(struct store_conn *c, int64_t after, size_t limit,
    struct store_audit_row **out, size_t *n)
{
	if (c == NULL || out == NULL || n == NULL || limit == 0 || limit > PAGE_MAX)
		return CS_EINVAL;
	return audit_list(c, SQL_AUDIT_PAGE, STORE_VALS(SV_INT(after), SV_INT((int64_t)limit)),
	    limit, out, n);
}

enum cs_err store_audit_set_link(struct store_conn *c, int64_t seq,
    const unsigned char link[STORE_AUDIT_LINK_LEN], const char *master_kid)
{
	store_audit_head_forget(c);           /* the head's link may be this one */
	return store_run_one(c, SQL_AUDIT_SET_LINK, STORE_VALS(SV_INT(seq),
	    SV_BLOB(link, STORE_AUDIT_LINK_LEN), SV_TEXT(master_kid)));
}

/* --- master-key rotation ------------------------------------------------ */

/* A sealed row, column by column: only the id is required (CS_EDB
 * without it); a missing master kid is for the rekey to report by name. */
static const struct store_member sealed_key_members[] = {
	STORE_TEXT(struct store_sealed, id),
	STORE_TEXT_OR_NULL(struct store_sealed, master_kid),
	STORE_BLOB_OR_NULL(struct store_sealed, a, a_len),
};
static const struct store_member sealed_vault_members[] = {
	STORE_TEXT(struct store_sealed, id),
	STORE_TEXT_OR_NULL(struct store_sealed, record_id),
	STORE_TEXT_OR_NULL(struct store_sealed, consent_id),
	STORE_TEXT_OR_NULL(struct store_sealed, subject),
	STORE_TEXT_OR_NULL(struct store_sealed, resource),
	STORE_TEXT_OR_NULL(struct store_sealed, master_kid),
	STORE_BLOB_OR_NULL(struct store_sealed, a, a_len),
	STORE_BLOB_OR_NULL(struct store_sealed, b, b_len),
};

/* Each clear wipes the blobs it frees; the vault's names both a and b, so
 * it frees any sealed row. */
static const struct store_row_type sealed_key_rows =
    STORE_ROW_MEMBERS(struct store_sealed, sealed_key_members);
static const struct store_row_type sealed_vault_rows =
    STORE_ROW_MEMBERS(struct store_sealed, sealed_vault_members);

STORE_ROWS_FREE_FN(struct store_sealed, sealed_vault_rows, store_sealed_free)

enum cs_err store_sealed_list(struct store_conn *c, enum store_sealed_kind kind,
    struct store_sealed **out, size_t *n)
{
	static const char *const sql[SEALED__MAX] = {
		[SEALED_SIGNING_KEY] = SQL_KEYS_ALL,
		[SEALED_VAULT_RECORD] = SQL_RECORDS_ALL,
		[SEALED_VAULT_OUTBOX] = SQL_OUTBOX_ALL,
	};
	enum cs_err e;
	void *rows = NULL;
	struct store_sealed *v;
	size_t nv = 0;
	struct store_stmt *st;

	if (c == NULL || out == NULL || n == NULL || (unsigned)kind >= SEALED__MAX)
		return CS_EINVAL;
	if ((st = store_stmt(c, sql[kind])) == NULL)
		return CS_EDB;
	if ((e = store_rows_all(c, st, kind == SEALED_SIGNING_KEY ? &sealed_key_rows :
	    &sealed_vault_rows, &rows, &nv)) != CS_OK)
		return e;
	v = rows;
	for (size_t i = 0; i < nv; i++)
		v[i].kind = kind;
	*out = v;
	*n = nv;
	return CS_OK;
}

enum cs_err store_sealed_update(struct store_conn *c, enum store_sealed_kind kind, const char *id,
    const struct store_sealed_blobs *blobs)
{
	static const char *const sql[SEALED__MAX] = {
		[SEALED_SIGNING_KEY] = SQL_KEY_RESEAL,
		[SEALED_VAULT_RECORD] = SQL_RECORD_RESEAL,
		[SEALED_VAULT_OUTBOX] = SQL_OUTBOX_RESEAL,
	};
	enum cs_err e;
	struct store_stmt *st;

	if (c == NULL || id == NULL || blobs == NULL || blobs->a == NULL || blobs->master_kid == NULL ||
	    (unsigned)kind >= SEALED__MAX)
		return CS_EINVAL;
	/* A signing key's statement has no ?3 (b is NULL for it): it binds unused. */
	if ((st = store_query(c, sql[kind], STORE_VALS(SV_TEXT(id),
	    SV_BLOB(blobs->a, blobs->a_len), SV_BLOB_OR_NULL(blobs->b, blobs->b_len),
	    SV_TEXT(blobs->master_kid)), &e)) == NULL)
		return e;
	if ((e = store_exec(c, st)) != CS_OK)
		return e;
	return store_changes(c) == 1 ? CS_OK : CS_ENOENT;
}

/* --- the anchor ------------------------------------------------------------ */

/* The anchor row st stands on into out; a damaged row (wrong sizes) is
 * CS_EDB, reported as a damaged database: verification must not quietly
 * fall back to genesis. */
static enum cs_err anchor_row(struct store_stmt *st, struct store_audit_anchor *out)
{
	const unsigned char *kid = store_col_raw_text(st, 3);
	if (store_col_bytes(st, 1) != STORE_AUDIT_LINK_LEN ||
	    store_col_bytes(st, 2) != STORE_AUDIT_LINK_LEN || kid == NULL ||
	    (size_t)store_col_bytes(st, 3) >= sizeof out->master_kid)
		return CS_EDB;
	out->seq = store_col_int64(st, 0);
	memcpy(out->link, store_col_raw_blob(st, 1), STORE_AUDIT_LINK_LEN);
	memcpy(out->mac, store_col_raw_blob(st, 2), STORE_AUDIT_LINK_LEN);
	memcpy(out->master_kid, kid, (size_t)store_col_bytes(st, 3) + 1);
	out->pruned_at = store_col_int64(st, 4);
	out->chain = store_col_int64(st, 5);
	return CS_OK;
}

enum cs_err store_audit_anchor_get(struct store_conn *c, struct store_audit_anchor *out)
{
	enum cs_err e;
	struct store_stmt *st;

	if (c == NULL || out == NULL)
		return CS_EINVAL;
	if ((st = store_query(c, SQL_ANCHOR_GET, STORE_VALS(SV_INT(out->chain)), &e)) == NULL)
		return e;
	if ((e = store_step(c, st)) == CS_OK)
		e = anchor_row(st, out);
	store_stmt_done(st);
	return e;
}

enum cs_err store_audit_anchors(struct store_conn *c, struct store_audit_anchor **out, size_t *n)
{
	enum cs_err e;
	struct store_stmt *st;
	struct store_audit_anchor *v = NULL;
	size_t k = 0, cap = 0;

	if (c == NULL || out == NULL || n == NULL)
		return CS_EINVAL;
	if ((st = store_stmt(c, SQL_ANCHOR_ALL)) == NULL)
		return CS_EDB;
	while ((e = store_step(c, st)) == CS_OK) {
		if (k == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			struct store_audit_anchor *nv = realloc(v, ncap * sizeof *nv);
			if (nv == NULL) {
				e = CS_ENOMEM;
				break;
			}
			v = nv;
			cap = ncap;
		}
		if ((e = anchor_row(st, &v[k])) != CS_OK)
			break;
		k++;
	}
	store_stmt_done(st);
	if (e != CS_ENOENT) {
		free(v);
		return e == CS_OK ? CS_EDB : e;
	}
	*out = v;
	*n = k;
	return CS_OK;
}

enum cs_err store_audit_anchor_set(struct store_conn *c, const struct store_audit_anchor *a)
{
	if (c == NULL || a == NULL)
		return CS_EINVAL;
	return store_run(c, SQL_ANCHOR_SET, STORE_VALS(SV_INT(a->seq),
	    SV_BLOB(a->link, STORE_AUDIT_LINK_LEN), SV_BLOB(a->mac, STORE_AUDIT_LINK_LEN),
	    SV_TEXT(a->master_kid), SV_INT(a->pruned_at), SV_INT(a->chain)));
}

enum cs_err store_audit_prune(struct store_conn *c, int64_t through)
{
	if (c == NULL)
		return CS_EINVAL;
	store_audit_head_forget(c);
	return store_run(c, SQL_AUDIT_PRUNE, STORE_VALS(SV_INT(through)));
}
