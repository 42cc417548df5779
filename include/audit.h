/* audit.h -- the audit log: one entry per decision, refusal, release and
 * revocation, written in the same transaction as the change it records.
 * Never a token, code, secret or cookie in an entry: ids (jti, consent id) only.
 * Entries are numbered and chained (docs/reference.md "Audit trail"): link =
 * HMAC-SHA-256(K, previous link || canonical entry), K derived from the master
 * key for "audit-chain", so who can write the database without the master key
 * cannot re-forge the chain. */
#ifndef CS_AUDIT_H
#define CS_AUDIT_H

#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"
#include "seal.h"
#include "store.h"

#define AUDIT_LINK_LEN 32
#define AUDIT_LINK_HEX (2 * AUDIT_LINK_LEN)

struct audit_entry {             /* every field but action may be NULL / 0 */
	int64_t     ts;              /* UTC seconds */
	const char *actor;           /* "user:<subject>", "gateway:<id>", "admin:<name>", "system" */
	const char *action;          /* e.g. "consent.request.created" (see audit.c for the list) */
	const char *subject;         /* the person concerned (IdP subject) */
	const char *agent;
	const char *resource;
	const char *scopes;          /* space-separated */
	const char *consent_id;
	const char *request_id;      /* consent/approval request id */
	const char *outcome;         /* "ok", "refused", ... */
	const char *detail;          /* short, no secrets (e.g. "jti=...") */
};

/* The action names consentd writes (audit.c lists what each records),
 * sorted, NULL-terminated. */
extern const char *const audit_actions[];

/* Sets the process-wide chain key from the master key (derived for
 * "audit-chain"; the master key itself is not kept).  Call once at start,
 * before any thread appends (app_init, the CLI commands, test setups). */
enum cs_err audit_set_master_key(const struct master_key *mk) CS_MUST_CHECK;
/* Sets the chain key directly: 32 bytes and the master key id recorded
 * beside each link (tests; app code uses audit_set_master_key). */
void audit_set_key(const unsigned char key[AUDIT_LINK_LEN], const char *master_kid);
/* Forgets (wipes) the chain key; appends fail with CS_ECRYPTO afterwards. */
void audit_clear_key(void);

/* The link of entry e numbered seq after the link prev, under the chain key:
 * HMAC-SHA-256(key, prev || canonical(seq, e)), exactly what audit_append
 * writes and `audit verify` checks -- for a tool that builds a chain outside
 * the server (bench/bench_seed.c).  CS_ETOOBIG for a field over 4 GiB. */
enum cs_err audit_link(const unsigned char key[AUDIT_LINK_LEN],
    const unsigned char prev[AUDIT_LINK_LEN], int64_t seq, const struct audit_entry *e,
    unsigned char out[AUDIT_LINK_LEN]) CS_MUST_CHECK;
/* audit_link for an entry of chain (migration 0028: one chain per writer on
 * PostgreSQL): prev is the link of the chain's previous entry, prev_seq its
 * number (0: none), and both the chain and prev_seq are part of what the
 * link covers (chain 0's links are audit_link's, prev_seq unused). */
enum cs_err audit_link_chain(const unsigned char key[AUDIT_LINK_LEN],
    const unsigned char prev[AUDIT_LINK_LEN], int64_t seq, int64_t chain, int64_t prev_seq,
    const struct audit_entry *e, unsigned char out[AUDIT_LINK_LEN]) CS_MUST_CHECK;

/* Appends one entry, numbered and linked to the head.  Call inside the
 * caller's transaction (the writer's turn serialises transactions, so
 * reading the head and inserting is race-free).  CS_ECRYPTO when no chain key is set:
 * an unchained entry is never written. */
enum cs_err audit_append(struct store_conn *c, const struct audit_entry *e) CS_MUST_CHECK;
/* audit_append in a transaction of its own (begin, append, commit; rolled
 * back on failure), for an entry that goes with no other write. */
enum cs_err audit_append_alone(struct store_conn *c, const struct audit_entry *e) CS_MUST_CHECK;
/* A process with a chain of its own to claim (PostgreSQL: migration 0028)
 * claims it now and appends its audit.chain.opened entry, in a transaction
 * of its own (the server at start: its first request then finds the chain
 * open).  Otherwise nothing: CS_OK. */
enum cs_err audit_chain_open(struct store_conn *c, int64_t now) CS_MUST_CHECK;
/* A process with a chain of its own (PostgreSQL) appends, in a transaction
 * of its own, an audit.chain.crossref entry naming the newest entry of each
 * of the most recent other chains ("heads=CHAIN:SEQ:LINK,..."), which
 * `audit verify` holds the database to as it holds an audit.chain.opened
 * entry's -- only when one of them moved on since the last one it wrote
 * (*wrote says whether it did).  One writer, or no chain claimed yet:
 * nothing.  The server calls it every [audit] crossref_interval. */
enum cs_err audit_crossref(struct store_conn *c, int64_t now, bool *wrote) CS_MUST_CHECK;
/* Forgets what audit_crossref last vouched for: its next run writes when
 * any other chain has an entry (a store opened anew; the unit tests). */
void audit_crossref_forget(void);
/* The open transaction is about to append n entries: with many writers
 * (PostgreSQL) their numbers come from the database in one round trip
 * rather than one each.  A hint; appends work without it. */
enum cs_err audit_expect(struct store_conn *c, size_t n) CS_MUST_CHECK;
/* The detail of a refusal entry that names the request's path (dpop.refused,
 * gateway.auth.refused): before, the path, after, as one text of at most
 * AUDIT_REFUSAL_DETAIL_MAX bytes.  One rule for every such entry: a path that
 * would not fit is left out and said so ("(a path too long to record)"),
 * never cut, so the reason is always whole.  CS_ETOOBIG (out "") only when
 * even that does not fit. */
#define AUDIT_REFUSAL_DETAIL_MAX 511
enum cs_err audit_refusal_detail(char out[AUDIT_REFUSAL_DETAIL_MAX + 1], const char *before,
    const char *path, const char *after) CS_MUST_CHECK;

/* The chain head: number and link of the last entry (0 and 32 zero bytes
 * when the log is empty).  hex gets the link in lowercase hex. */
struct audit_head {
	int64_t seq;
	char    hex[AUDIT_LINK_HEX + 1];
};
enum cs_err audit_head(struct store_conn *c, struct audit_head *out) CS_MUST_CHECK;
/* link in lowercase hex (AUDIT_LINK_HEX digits and a NUL). */
void audit_link_hex(const unsigned char link[AUDIT_LINK_LEN], char hex[AUDIT_LINK_HEX + 1]);
/* Parses "N:LINKHEX" (what the server logs) into *out; CS_EINVAL when malformed. */
enum cs_err audit_head_parse(const char *s, struct audit_head *out) CS_MUST_CHECK;

/* What audit_verify found.  ok is 1 when the whole chain verifies (and the
 * expected head, when given, is present with its link); else broken names the
 * first bad entry (or the missing head) and why. */
struct audit_verify_result {
	int              ok;
	int              head_missing;  /* broken because the expected head is gone */
	int64_t          entries;       /* entries walked */
	struct audit_head head;         /* the last entry that verified */
	int64_t          broken;        /* the first broken entry's number */
	int64_t          anchor;        /* a pruned chain: the walk began after this entry; 0 = genesis */
	int64_t          chains;        /* chains walked (migration 0028: one per writer) */
	int64_t          crossrefs;     /* cross-references between chains checked */
	int64_t          crossref_lookups;  /* entries looked up for them: one a chain named
	                                       (on each side of the last rotation) */
	char             why[160];      /* "link does not match", "entry 4 missing", ... */
};
/* Walks the whole chain in seq order under mk, recomputing every link and
 * checking that numbers are contiguous from 1.  want (may be NULL) is a head
 * logged earlier: it must be present with that link.  A pruned chain (see
 * audit_prune) is walked from its anchor, which must verify under mk, and its
 * first kept entry must link to the anchor's link; an expected head at or before
 * the anchor is compared with the anchor when it is the anchor, else passes as
 * pruned.  CS_OK whenever the walk
 * ran (read res->ok); an error only when it could not. */
enum cs_err audit_verify(struct store_conn *c, const struct master_key *mk,
    const struct audit_head *want, struct audit_verify_result *res) CS_MUST_CHECK;

/* Prunes the oldest entries, at most limit of them, that were written before
 * `before` (UTC seconds; 0: no age limit) or are not among the newest keep
 * (0: no count limit), in one transaction of its own; the prefix pruned ends
 * at the first entry that is neither: checks the anchor and the
 * links of what it removes (a chain that does not verify is left alone:
 * CS_ECRYPTO), never removes the head, records the last removed entry's
 * number and link as the new anchor (audit_anchor, MACed under the chain
 * key; no entry is appended, so that pruning never feeds itself).  audit_verify and
 * audit_heads_check then start from the anchor.  *removed gets the count. */
enum cs_err audit_prune(struct store_conn *c, int64_t before, int64_t keep, int64_t limit,
    int64_t now, int64_t *removed) CS_MUST_CHECK;

/* The highest entry number a prune removed, from the anchors (audit_anchor)
 * whose MAC verifies under the chain key: an entry at or below it may be
 * missing.  SECURITY: when any anchor does not verify, *through is 0 (no
 * entry counts as pruned) and the error is logged; CS_ECRYPTO without a chain
 * key. */
enum cs_err audit_pruned_through(struct store_conn *c, int64_t *through) CS_MUST_CHECK;

/* Recomputes every link under new_mk (master-key rotation): the caller has
 * verified the chain under the old key and holds the transaction. */
enum cs_err audit_relink(struct store_conn *c, const struct master_key *new_mk) CS_MUST_CHECK;

/* Calls fn for each entry with ts >= since, in seq order, as one JSON object
 * text (no newline; jansson; link in hex).  Stops at fn's first error. */
enum cs_err audit_export(struct store_conn *c, int64_t since,
    enum cs_err (*fn)(void *arg, const char *json), void *arg) CS_MUST_CHECK;

#endif
