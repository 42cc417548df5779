/* store_approval_block.c -- the SQL for the denied actions /me shows and lifts
 * (migration 0027's approvals.lifted_at).  Rules live in approval_block.c; it
 * must never build SQL from input: every value is a bound parameter. */
#include <stdlib.h>
#include <string.h>

#include "store_approval_block.h"
#include "store_priv.h"

#define BLOCK_COLS \
	"a.id, a.consent_id, u.subject, a.agent, a.resource, a.action, a.parameters, a.digest, " \
	"a.status, a.user_id, a.decided_at, a.lifted_at FROM approvals a " \
	"JOIN users u ON u.id = a.user_id "

static const char SQL_BLOCK_LIST[] =
    "SELECT " BLOCK_COLS "JOIN consents k ON k.id = a.consent_id "
    "WHERE a.user_id = ?1 AND a.status = 'denied' AND a.decided_at > ?2 AND a.lifted_at = 0 "
    "AND k.revoked_at = 0 AND k.expires_at > ?3 "
    "ORDER BY a.decided_at DESC, a.id LIMIT ?4";
static const char SQL_BLOCK_GET[] = "SELECT " BLOCK_COLS "WHERE a.id = ?1";
static const char SQL_BLOCK_LIFT[] =
    "UPDATE approvals SET lifted_at = ?2 WHERE id = ?1 AND status = 'denied' AND lifted_at = 0";
static const char SQL_BLOCK_LIFTED_AT[] = "SELECT lifted_at FROM approvals WHERE id = ?1";

static const struct store_member block_members[] = {
	STORE_TEXT(struct store_approval_block_row, id),
	STORE_TEXT(struct store_approval_block_row, consent_id),
	STORE_TEXT(struct store_approval_block_row, subject),
	STORE_TEXT(struct store_approval_block_row, agent),
	STORE_TEXT(struct store_approval_block_row, resource),
	STORE_TEXT(struct store_approval_block_row, action),
	STORE_TEXT(struct store_approval_block_row, parameters),
	STORE_TEXT(struct store_approval_block_row, digest),
	STORE_TEXT(struct store_approval_block_row, status),
	STORE_INT64(struct store_approval_block_row, user_id),
	STORE_INT64(struct store_approval_block_row, decided_at),
	STORE_INT64(struct store_approval_block_row, lifted_at),
};

static const struct store_row_type block_rows =
    STORE_ROW_MEMBERS(struct store_approval_block_row, block_members);

STORE_ROW_CLEAR_FN(struct store_approval_block_row, block_rows, store_approval_block_row_clear)
STORE_ROWS_FREE_FN(struct store_approval_block_row, block_rows, store_approval_block_rows_free)
STORE_ROW_LIST_FN(struct store_approval_block_row, block_rows, block_list)

enum cs_err store_approval_block_list(struct store_conn *c, int64_t user_id, int64_t since,
    int64_t now, size_t max, struct store_approval_block_row **out, size_t *n)
{
	if (max > 1000)
		max = 1000;
	return block_list(c, SQL_BLOCK_LIST, STORE_VALS(SV_INT(user_id), SV_INT(since),
	    SV_INT(now), SV_INT((int64_t)max)), max, out, n);
}

enum cs_err store_approval_block_get(struct store_conn *c, const char *id,
    struct store_approval_block_row *out)
{
	return store_get(c, SQL_BLOCK_GET, STORE_VALS(SV_TEXT(id)), &block_rows, out);
}

enum cs_err store_approval_block_lift(struct store_conn *c, const char *id, int64_t now,
    int *changed)
{
	return store_run_changed(c, SQL_BLOCK_LIFT, STORE_VALS(SV_TEXT(id), SV_INT(now)), changed);
}

enum cs_err store_approval_block_lifted_at(struct store_conn *c, const char *id, int64_t *at)
{
	return store_get_ints(c, SQL_BLOCK_LIFTED_AT, STORE_VALS(SV_TEXT(id)), at, 1);
}
