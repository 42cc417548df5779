/* store_standing.h -- the SQL behind standing.c (migration 0026): the person's
 * standing rules by (consent, action, key set, lookup), by person, by id; the
 * counted use; ending one, or all of a consent's (the revocation cascade).
 * Plain rows: what a rule covers is standing.c's to judge. */
#ifndef CS_STORE_STANDING_H
#define CS_STORE_STANDING_H

#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"
#include "store.h"

/* A row read from the store owns its strings as one block (store_cols_text);
 * a row filled by a caller for an insert leaves block NULL. */
struct store_standing_row {      /* caller-owned; release with store_standing_row_clear() */
	char   *block;
	char   *id, *consent_id;
	int64_t user_id;
	char   *agent, *resource, *action;
	char   *kind;                /* exact | match */
	char   *keyset, *lookup, *details;
	char   *approval_id;         /* may be NULL */
	char   *created_by;
	int64_t created_at, expires_at, max_uses, uses, last_used_at, ended_at;
	char   *ended_by;            /* may be NULL */
	char   *subject;             /* users.subject (read only; ignored on insert) */
};
void store_standing_row_clear(struct store_standing_row *r);              /* NULL-safe */
void store_standing_rows_free(struct store_standing_row *v, size_t n);    /* NULL-safe */

/* Inserts r (uses, last_used_at, ended_* start at 0/NULL); CS_EEXIST on a
 * duplicate id. */
enum cs_err store_standing_insert(struct store_conn *c,
    const struct store_standing_row *r) CS_MUST_CHECK;
/* The live rules (not ended, unexpired at now, within their use count) of
 * (consent, action) with this key set and lookup: at most max, newest first
 * (on SQLite the last inserted, on PostgreSQL by created_at then id).
 * *out NULL and *n 0 when none. */
enum cs_err store_standing_candidates(struct store_conn *c, const char *consent_id,
    const char *action, const char *keyset, const char *lookup, int64_t now, size_t max,
    struct store_standing_row **out, size_t *n) CS_MUST_CHECK;
/* The check's first read, in one statement: the live exact rules of (consent,
 * action) whose lookup is digest, then -- when keyset and lookup are not NULL
 * -- the live match rules of that key set and lookup; at most max of each,
 * each part newest first as store_standing_candidates (the two parts may come
 * in either order: kind tells them apart).  *out NULL and *n 0 when none. */
enum cs_err store_standing_candidates_first(struct store_conn *c, const char *consent_id,
    const char *action, const char *digest, const char *keyset, const char *lookup,
    int64_t now, size_t max, struct store_standing_row **out, size_t *n) CS_MUST_CHECK;
/* The distinct key sets of the match rules of (consent, action) not ended, in
 * order, at most max, each malloc'd into (*out)[i] (free each, then the array);
 * one statement of two index seeks when there are none or one, else one
 * index seek per key set. */
enum cs_err store_standing_keysets(struct store_conn *c, const char *consent_id,
    const char *action, size_t max, char ***out, size_t *n) CS_MUST_CHECK;
/* Counts one use of rule id for (consent, action) at now -- only while the
 * rule is not ended, unexpired, under its use count and its consent is live:
 * the one UPDATE is the check.  *changed 1 when counted, 0 otherwise. */
enum cs_err store_standing_use(struct store_conn *c, const char *id, const char *consent_id,
    const char *action, int64_t now, int *changed) CS_MUST_CHECK;
/* CS_ENOENT when unknown.  *out written only on CS_OK. */
enum cs_err store_standing_get(struct store_conn *c, const char *id,
    struct store_standing_row *out) CS_MUST_CHECK;
/* Ends rule id at now (by: who, in words); *changed 0 when it was already ended. */
enum cs_err store_standing_end(struct store_conn *c, const char *id, int64_t now,
    const char *by, int *changed) CS_MUST_CHECK;
/* Ends every rule of the consent (the revocation cascade, in the caller's
 * transaction). */
enum cs_err store_standing_end_for_consent(struct store_conn *c, const char *consent_id,
    int64_t now) CS_MUST_CHECK;
/* The person's rules not ended and unexpired at now (user_id > 0), or every
 * person's (user_id 0, for admins), newest first, at most max. */
enum cs_err store_standing_list(struct store_conn *c, int64_t user_id, int64_t now, size_t max,
    struct store_standing_row **out, size_t *n) CS_MUST_CHECK;
/* Every rule of consent consent_id, ended, expired and used up ones too,
 * newest first, at most max (the admin's consent page). */
enum cs_err store_standing_list_consent(struct store_conn *c, const char *consent_id,
    size_t max, struct store_standing_row **out, size_t *n) CS_MUST_CHECK;

#endif
