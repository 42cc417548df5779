/* store_standing.c -- the SQL for the person's standing rules (migration 0026).
 * What a rule covers is standing.c's to judge; this file only moves rows.  It
 * must never build SQL from input: every value is a bound parameter. */
#include <stdlib.h>
#include <string.h>

#include "store_standing.h"
#include "store_priv.h"

#define STANDING_COLS \
	"r.id, r.consent_id, r.user_id, r.agent, r.resource, r.action, r.kind, r.keyset, " \
	"r.lookup, r.details, r.approval_id, r.created_by, r.created_at, r.expires_at, " \
	"r.max_uses, r.uses, r.last_used_at, r.ended_at, r.ended_by, u.subject " \
	"FROM standing_rules r JOIN users u ON u.id = r.user_id "
/* Live: not ended, unexpired, under its use count (n is now's parameter). */
#define LIVE(n) "r.ended_at = 0 AND r.expires_at > " n " AND (r.max_uses = 0 OR r.uses < r.max_uses) "

static const char SQL_INSERT[] =
    "INSERT INTO standing_rules (id, consent_id, user_id, agent, resource, action, kind, "
    "keyset, lookup, details, approval_id, created_by, created_at, expires_at, max_uses) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";
/* A part of the check's read: the live rules of (consent ?1, action ?2) of one
 * kind, key set and lookup, newest first, at most ?6 (now is ?5).  Newest:
 * on SQLite the index's own order of equal keys, the rowid (the order rows
 * were inserted in, so no sort per read: a sort cost a check more than the
 * read); on PostgreSQL created_at, then id. */
#define CANDIDATES(kind, keyset, lookup, newest) \
	"SELECT " STANDING_COLS "WHERE r.consent_id = ?1 AND r.action = ?2 AND r.kind = " kind " " \
	"AND r.keyset = " keyset " AND r.lookup = " lookup " AND " LIVE("?5") \
	"ORDER BY " newest " LIMIT ?6"
#define NEWEST_LITE "r.rowid DESC"
#define NEWEST_PG "r.created_at DESC, r.id"
#define KIND_OF_KEYSET "CASE WHEN ?3 = '*' THEN 'exact' ELSE 'match' END"
static const char SQL_CANDIDATES[] = CANDIDATES(KIND_OF_KEYSET, "?3", "?4", NEWEST_LITE);
static const char SQL_CANDIDATES_PG[] = CANDIDATES(KIND_OF_KEYSET, "?3", "?4", NEWEST_PG);
/* The check's first read, one statement: the exact rules (key set '*',
 * standing.h's STANDING_EXACT_KEYSET) of the call's digest (?3) and the match
 * rules of one key set and lookup (?4, ?7: NULL for none), each part in its
 * own order and limit; the caller judges the exact rules first. */
#define CANDIDATES_FIRST(newest) \
	"SELECT * FROM (" CANDIDATES("'exact'", "'*'", "?3", newest) ") AS e UNION ALL " \
	"SELECT * FROM (" CANDIDATES("'match'", "?4", "?7", newest) ") AS m"
static const char SQL_CANDIDATES_FIRST[] = CANDIDATES_FIRST(NEWEST_LITE);
static const char SQL_CANDIDATES_FIRST_PG[] =
    CANDIDATES_FIRST(NEWEST_PG) " ORDER BY kind, created_at DESC, id";
/* The smallest and the largest key set of the match rules not ended: two index
 * seeks, which answer whole for a person with none or one key set. */
#define MATCH_NOT_ENDED \
	"FROM standing_rules r WHERE r.consent_id = ?1 AND r.action = ?2 AND r.kind = 'match' " \
	"AND r.ended_at = 0"
static const char SQL_KEYSET_BOUNDS[] =
    "SELECT (SELECT min(r.keyset) " MATCH_NOT_ENDED "), (SELECT max(r.keyset) " MATCH_NOT_ENDED ")";
/* The distinct key sets of the match rules not ended, one index seek each: the
 * smallest, then the smallest above it, and so on (a skip scan: never a read of
 * every rule, however many the person has).  Expired and used-up rules' key
 * sets come too; their candidates are not live. */
static const char SQL_KEYSETS[] =
    "WITH RECURSIVE ks(k) AS ("
    "SELECT (SELECT min(r.keyset) " MATCH_NOT_ENDED ") "
    "UNION ALL "
    "SELECT (SELECT min(r.keyset) " MATCH_NOT_ENDED " AND r.keyset > ks.k) "
    "FROM ks WHERE ks.k IS NOT NULL) "
    "SELECT k FROM ks WHERE k IS NOT NULL LIMIT ?3";
/* SECURITY: the counted use.  One statement decides and counts, so two
 * concurrent releases can never both take a rule's last use; it re-checks the
 * consent too (invariant 9: never without a live consent). */
static const char SQL_USE[] =
    "UPDATE standing_rules SET uses = uses + 1, last_used_at = ?4 "
    "WHERE id = ?1 AND consent_id = ?2 AND action = ?3 AND ended_at = 0 AND expires_at > ?4 "
    "AND (max_uses = 0 OR uses < max_uses) "
    "AND consent_id IN (SELECT id FROM consents WHERE revoked_at = 0 AND expires_at > ?4)";
static const char SQL_GET[] = "SELECT " STANDING_COLS "WHERE r.id = ?1";
static const char SQL_END[] =
    "UPDATE standing_rules SET ended_at = ?2, ended_by = ?3 WHERE id = ?1 AND ended_at = 0";
static const char SQL_END_CONSENT[] =
    "UPDATE standing_rules SET ended_at = ?2, ended_by = 'revoked with its consent' "
    "WHERE consent_id = ?1 AND ended_at = 0";
static const char SQL_LIST_USER[] =
    "SELECT " STANDING_COLS "WHERE r.user_id = ?1 AND r.ended_at = 0 AND r.expires_at > ?2 "
    "ORDER BY r.created_at DESC, r.id LIMIT ?3";
static const char SQL_LIST_ALL[] =
    "SELECT " STANDING_COLS "WHERE ?1 = 0 AND r.ended_at = 0 AND r.expires_at > ?2 "
    "ORDER BY r.created_at DESC, r.id LIMIT ?3";
/* Every rule of one consent, ended or not (the admin's consent page). */
static const char SQL_LIST_CONSENT[] =
    "SELECT " STANDING_COLS "WHERE r.consent_id = ?1 ORDER BY r.created_at DESC, r.id LIMIT ?2";

/* --- rows -------------------------------------------------------------- */

static const struct store_member rule_members[] = {
	STORE_TEXT(struct store_standing_row, id),
	STORE_TEXT(struct store_standing_row, consent_id),
	STORE_INT64(struct store_standing_row, user_id),
	STORE_TEXT(struct store_standing_row, agent),
	STORE_TEXT(struct store_standing_row, resource),
	STORE_TEXT(struct store_standing_row, action),
	STORE_TEXT(struct store_standing_row, kind),
	STORE_TEXT(struct store_standing_row, keyset),
	STORE_TEXT(struct store_standing_row, lookup),
	STORE_TEXT(struct store_standing_row, details),
	STORE_TEXT_OR_NULL(struct store_standing_row, approval_id),
	STORE_TEXT(struct store_standing_row, created_by),
	STORE_INT64(struct store_standing_row, created_at),
	STORE_INT64(struct store_standing_row, expires_at),
	STORE_INT64(struct store_standing_row, max_uses),
	STORE_INT64(struct store_standing_row, uses),
	STORE_INT64(struct store_standing_row, last_used_at),
	STORE_INT64(struct store_standing_row, ended_at),
	STORE_TEXT_OR_NULL(struct store_standing_row, ended_by),
	STORE_TEXT(struct store_standing_row, subject),
};

static const struct store_row_type rule_rows =
    STORE_ROW_MEMBERS(struct store_standing_row, rule_members);

STORE_ROW_CLEAR_FN(struct store_standing_row, rule_rows, store_standing_row_clear)
STORE_ROWS_FREE_FN(struct store_standing_row, rule_rows, store_standing_rows_free)
STORE_ROW_LIST_FN(struct store_standing_row, rule_rows, rule_list)
STORE_ROW_LIST_DIALECT_FN(struct store_standing_row, rule_rows, rule_list_dialect)

/* --- writing ----------------------------------------------------------- */

enum cs_err store_standing_insert(struct store_conn *c, const struct store_standing_row *r)
{
	return store_run(c, SQL_INSERT, STORE_VALS(SV_TEXT(r->id), SV_TEXT(r->consent_id),
	    SV_INT(r->user_id), SV_TEXT(r->agent), SV_TEXT(r->resource), SV_TEXT(r->action),
	    SV_TEXT(r->kind), SV_TEXT(r->keyset), SV_TEXT(r->lookup), SV_TEXT(r->details),
	    SV_TEXT(r->approval_id), SV_TEXT(r->created_by), SV_INT(r->created_at),
	    SV_INT(r->expires_at), SV_INT(r->max_uses)));
}

enum cs_err store_standing_use(struct store_conn *c, const char *id, const char *consent_id,
    const char *action, int64_t now, int *changed)
{
	return store_run_changed(c, SQL_USE, STORE_VALS(SV_TEXT(id), SV_TEXT(consent_id),
	    SV_TEXT(action), SV_INT(now)), changed);
}

enum cs_err store_standing_end(struct store_conn *c, const char *id, int64_t now,
    const char *by, int *changed)
{
	return store_run_changed(c, SQL_END, STORE_VALS(SV_TEXT(id), SV_INT(now), SV_TEXT(by)),
	    changed);
}

enum cs_err store_standing_end_for_consent(struct store_conn *c, const char *consent_id,
    int64_t now)
{
	return store_run(c, SQL_END_CONSENT, STORE_VALS(SV_TEXT(consent_id), SV_INT(now)));
}

/* --- reading ----------------------------------------------------------- */

enum cs_err store_standing_candidates(struct store_conn *c, const char *consent_id,
    const char *action, const char *keyset, const char *lookup, int64_t now, size_t max,
    struct store_standing_row **out, size_t *n)
{
	if (max > 1000)
		max = 1000;
	return rule_list_dialect(c, SQL_CANDIDATES, SQL_CANDIDATES_PG,
	    STORE_VALS(SV_TEXT(consent_id), SV_TEXT(action), SV_TEXT(keyset), SV_TEXT(lookup),
	    SV_INT(now), SV_INT((int64_t)max)), max, out, n);
}

enum cs_err store_standing_candidates_first(struct store_conn *c, const char *consent_id,
    const char *action, const char *digest, const char *keyset, const char *lookup,
    int64_t now, size_t max, struct store_standing_row **out, size_t *n)
{
	if (max > 1000)
		max = 1000;
	/* NULL binds NULL, which equals no key set: the match part is empty. */
	if (keyset == NULL || lookup == NULL)
		keyset = lookup = NULL;
	return rule_list_dialect(c, SQL_CANDIDATES_FIRST, SQL_CANDIDATES_FIRST_PG,
	    STORE_VALS(SV_TEXT(consent_id), SV_TEXT(action), SV_TEXT(digest), SV_TEXT(keyset),
	    SV_INT(now), SV_INT((int64_t)max), SV_TEXT(lookup)), 2 * max, out, n);
}

/* The smallest and largest key set (*lo, *hi malloc'd, NULL when there is none). */
static enum cs_err keyset_bounds(struct store_conn *c, const char *consent_id,
    const char *action, char **lo, char **hi)
{
	enum cs_err e;
	struct store_stmt *st;
	*lo = *hi = NULL;
	if ((st = store_query(c, SQL_KEYSET_BOUNDS, STORE_VALS(SV_TEXT(consent_id),
	    SV_TEXT(action)), &e)) == NULL)
		return e;
	if ((e = store_step(c, st)) == CS_OK && (e = store_col_text(st, 0, lo)) == CS_OK)
		e = store_col_text(st, 1, hi);
	store_stmt_done(st);
	/* The aggregate answers one row, always. */
	if (e == CS_ENOENT)
		e = CS_EDB;
	if (e == CS_OK && (*lo == NULL) != (*hi == NULL))
		e = CS_EDB;
	if (e != CS_OK) {
		free(*lo);
		free(*hi);
		*lo = *hi = NULL;
	}
	return e;
}

enum cs_err store_standing_keysets(struct store_conn *c, const char *consent_id,
    const char *action, size_t max, char ***out, size_t *n)
{
	enum cs_err e;
	char **v = NULL, *lo = NULL, *hi = NULL;
	size_t k = 0;
	struct store_stmt *st;
	if (max > 1000)
		max = 1000;
	if (max == 0) {
		if ((v = calloc(1, sizeof *v)) == NULL)
			return CS_ENOMEM;
		*out = v;
		*n = 0;
		return CS_OK;
	}
	if ((e = keyset_bounds(c, consent_id, action, &lo, &hi)) != CS_OK)
		return e;
	if ((v = calloc(max + 1, sizeof *v)) == NULL) {
		free(lo);
		free(hi);
		return CS_ENOMEM;
	}
	/* None, or one key set: the bounds are the whole answer. */
	if (lo == NULL || strcmp(lo, hi) == 0) {
		v[0] = lo;
		free(hi);
		*out = v;
		*n = lo != NULL ? 1 : 0;
		return CS_OK;
	}
	free(lo);
	free(hi);
	if ((st = store_query(c, SQL_KEYSETS, STORE_VALS(SV_TEXT(consent_id), SV_TEXT(action),
	    SV_INT((int64_t)max)), &e)) == NULL) {
		free(v);
		return e;
	}
	while (k < max && (e = store_step(c, st)) == CS_OK) {
		if ((e = store_col_text(st, 0, &v[k])) != CS_OK)
			break;
		if (v[k] == NULL) {
			e = CS_EDB;
			break;
		}
		k++;
	}
	store_stmt_done(st);
	if (e == CS_ENOENT || (e == CS_OK && k == max))
		e = CS_OK;
	if (e != CS_OK) {
		for (size_t i = 0; i < k; i++)
			free(v[i]);
		free(v);
		return e;
	}
	*out = v;
	*n = k;
	return CS_OK;
}

enum cs_err store_standing_get(struct store_conn *c, const char *id,
    struct store_standing_row *out)
{
	return store_get(c, SQL_GET, STORE_VALS(SV_TEXT(id)), &rule_rows, out);
}

enum cs_err store_standing_list(struct store_conn *c, int64_t user_id, int64_t now, size_t max,
    struct store_standing_row **out, size_t *n)
{
	if (max > 1000)
		max = 1000;
	return rule_list(c, user_id > 0 ? SQL_LIST_USER : SQL_LIST_ALL, STORE_VALS(SV_INT(user_id),
	    SV_INT(now), SV_INT((int64_t)max)), max, out, n);
}

enum cs_err store_standing_list_consent(struct store_conn *c, const char *consent_id,
    size_t max, struct store_standing_row **out, size_t *n)
{
	if (max > 1000)
		max = 1000;
	return rule_list(c, SQL_LIST_CONSENT, STORE_VALS(SV_TEXT(consent_id),
	    SV_INT((int64_t)max)), max, out, n);
}
