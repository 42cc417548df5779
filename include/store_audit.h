/* store_audit.h -- the SQL of the audit chain (migrations 0003 and 0007) and
 * of master-key rotation (every sealed column with its master_kid).  Called by
 * audit.c and by `consentd vault rekey` only; no rules, no crypto here. */
#ifndef CS_STORE_AUDIT_H
#define CS_STORE_AUDIT_H

#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"
#include "store.h"

/* The head of the chain this process appends to (migration 0028: chain 0,
 * the shared one, on SQLite; on PostgreSQL one of the process's own, claimed
 * by audit.c with store_audit_chain_claim): its last entry's seq and link
 * (link_len 0 when the row has no link), or, when every entry of the chain
 * was pruned, its anchor's; and next, the seq the next entry takes: above
 * every seq ever handed out (SQLite: AUTOINCREMENT's high-water mark, so a
 * deleted tail leaves a gap; PostgreSQL: audit's sequence, whose numbers
 * grow across every writer, with gaps where a transaction rolled back).  A
 * chain with no entry gives seq 0, link_len 0. */
struct store_audit_head {
	int64_t       chain;
	int64_t       seq;
	unsigned char link[STORE_AUDIT_LINK_LEN];
	size_t        link_len;
	int64_t       next;
};
enum cs_err store_audit_head(struct store_conn *c, struct store_audit_head *out) CS_MUST_CHECK;
/* The open transaction will append n entries (a batch): their numbers are
 * taken from the database in one round trip (many writers; at most
 * STORE_AUDIT_RESERVE).  A hint: without it each append takes its own. */
enum cs_err store_audit_reserve(struct store_conn *c, size_t n) CS_MUST_CHECK;
/* The newest entry of every chain (the highest seq): *seq 0 and link zeros
 * when the log is empty. */
enum cs_err store_audit_last(struct store_conn *c, int64_t *seq,
    unsigned char link[STORE_AUDIT_LINK_LEN], size_t *link_len) CS_MUST_CHECK;
/* The process's chain (store_audit_chain_of): *chain, and *fresh true when
 * it has none yet and must claim one (store_audit_chain_claim). */
void store_audit_chain_need(struct store_conn *c, int64_t *chain, bool *fresh);
/* Claims a new chain for this process, opened at now, inside the caller's
 * transaction: it is the process's once that transaction commits. */
enum cs_err store_audit_chain_claim(struct store_conn *c, int64_t now, int64_t *chain)
    CS_MUST_CHECK;
/* One chain's newest entry (a cross-reference, audit.c). */
struct store_audit_ref {
	int64_t       chain, seq;
	unsigned char link[STORE_AUDIT_LINK_LEN];
};
/* The newest entries of the max chains other than except that appended
 * most recently (by their newest entry's number), highest chain first. */
enum cs_err store_audit_chain_heads(struct store_conn *c, int64_t except,
    struct store_audit_ref *out, size_t max, size_t *n) CS_MUST_CHECK;

/* The columns of one entry as audit.c hands them down (its struct
 * audit_entry's fields: the store knows no audit type). */
struct store_audit_fields {
	int64_t     chain;
	int64_t     prev_seq;        /* chain > 0: the seq of the chain's entry before (0: none) */
	int64_t     ts;
	const char *actor, *action, *subject, *agent, *resource, *scopes, *consent_id,
	            *request_id, *outcome, *detail;
};
/* Inserts e at seq with its link and master kid (inside the caller's
 * transaction), and notes it as the transaction's last entry for store_commit's
 * audit hook. */
enum cs_err store_audit_append(struct store_conn *c, const struct store_audit_fields *e,
    int64_t seq, const unsigned char link[STORE_AUDIT_LINK_LEN],
    const char *master_kid) CS_MUST_CHECK;

struct store_audit_row {         /* caller-owned; release with store_audit_rows_free() */
	char          *block;        /* the one allocation actor .. master_kid point into
	                                (store_cols_text): freed whole, never a field */
	int64_t        seq, ts, chain, prev_seq;
	char          *actor, *action, *subject, *agent, *resource, *scopes;
	char          *consent_id, *request_id, *outcome, *detail;
	unsigned char *link;         /* NULL when the column is NULL */
	size_t         link_len;
	char          *master_kid;
};
void store_audit_rows_free(struct store_audit_row *rows, size_t n);   /* NULL-safe */
/* Up to limit rows with seq > after, in seq order; *out NULL and *n 0 when none. */
enum cs_err store_audit_page(struct store_conn *c, int64_t after, size_t limit,
    struct store_audit_row **out, size_t *n) CS_MUST_CHECK;
/* The stored link of entry seq; CS_ENOENT when there is no such entry or it
 * has no link. */
enum cs_err store_audit_link_at(struct store_conn *c, int64_t seq,
    unsigned char link[STORE_AUDIT_LINK_LEN]) CS_MUST_CHECK;
/* --- the anchor of a pruned chain (migration 0016) ------------------------ */
struct store_audit_anchor {
	int64_t       chain;                        /* the pruned chain */
	int64_t       seq;                          /* its last pruned entry */
	unsigned char link[STORE_AUDIT_LINK_LEN];   /* its link */
	unsigned char mac[STORE_AUDIT_LINK_LEN];    /* audit.c's MAC over seq and link */
	char          master_kid[32];
	int64_t       pruned_at;
};
/* The anchor of chain (out->chain on input); CS_ENOENT when the chain was
 * never pruned (it starts with a zero link). */
enum cs_err store_audit_anchor_get(struct store_conn *c, struct store_audit_anchor *out)
    CS_MUST_CHECK;
/* Every chain's anchor, by chain, in *out (malloc'd; the caller frees). */
enum cs_err store_audit_anchors(struct store_conn *c, struct store_audit_anchor **out,
    size_t *n) CS_MUST_CHECK;
/* Writes a->chain's anchor (one row per chain, replaced), inside the
 * caller's transaction. */
enum cs_err store_audit_anchor_set(struct store_conn *c, const struct store_audit_anchor *a)
    CS_MUST_CHECK;
/* Deletes every entry numbered through seq (inside the caller's transaction). */
enum cs_err store_audit_prune(struct store_conn *c, int64_t through) CS_MUST_CHECK;

/* Replaces one entry's link and master kid (master-key rotation only). */
enum cs_err store_audit_set_link(struct store_conn *c, int64_t seq,
    const unsigned char link[STORE_AUDIT_LINK_LEN], const char *master_kid) CS_MUST_CHECK;

/* --- master-key rotation: every sealed value with what binds it ---------- */
enum store_sealed_kind {
	SEALED_SIGNING_KEY,          /* signing_keys: id = kid; aad = kid */
	SEALED_VAULT_RECORD,         /* vault_records: id = record id */
	SEALED_VAULT_OUTBOX,         /* vault_outbox: id = the row's number */
	SEALED__MAX
};
struct store_sealed {            /* caller-owned; release with store_sealed_free() */
	char          *block;        /* the one allocation id .. master_kid point into
	                                (store_cols_text): freed whole, never a field */
	enum store_sealed_kind kind;
	char          *id;           /* kid, record id, or outbox row number in decimal */
	char          *record_id, *consent_id, *subject, *resource;   /* vault rows only */
	char          *master_kid;
	unsigned char *a;            /* signing key's blob, or the access token's */
	size_t         a_len;
	unsigned char *b;            /* refresh token's blob; NULL when none */
	size_t         b_len;
};
void store_sealed_free(struct store_sealed *v, size_t n);   /* NULL-safe */
/* Every row of kind (revoked signing keys too). */
enum cs_err store_sealed_list(struct store_conn *c, enum store_sealed_kind kind,
    struct store_sealed **out, size_t *n) CS_MUST_CHECK;
/* Writes new blobs (b may be NULL) and their master kid for the row kind/id;
 * CS_ENOENT when no row changed. */
enum cs_err store_sealed_update(struct store_conn *c, enum store_sealed_kind kind, const char *id,
    const struct store_sealed_blobs *blobs) CS_MUST_CHECK;

#endif
