/* store_approval_block.h -- the SQL behind approval_block.c (migration 0027):
 * a person's denied actions that still hold an agent back, and lifting one.
 * Plain rows: how long a denial holds ([consent] deny_cooldown) is
 * approval_block.c's rule. */
#ifndef CS_STORE_APPROVAL_BLOCK_H
#define CS_STORE_APPROVAL_BLOCK_H

#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"
#include "store.h"

struct store_approval_block_row {   /* release with store_approval_block_row_clear() */
	char   *block;                  /* the text fields' one allocation */
	char   *id, *consent_id, *subject, *agent, *resource, *action, *parameters, *digest, *status;
	int64_t user_id, decided_at, lifted_at;
};
void store_approval_block_row_clear(struct store_approval_block_row *r);      /* NULL-safe */
void store_approval_block_rows_free(struct store_approval_block_row *v, size_t n);

/* The user's denials decided after since, not lifted, of a consent live at
 * now: most recent first, at most max (<= 1000). */
enum cs_err store_approval_block_list(struct store_conn *c, int64_t user_id, int64_t since,
    int64_t now, size_t max, struct store_approval_block_row **out, size_t *n) CS_MUST_CHECK;
/* One approval by id, whatever its status; CS_ENOENT when unknown. */
enum cs_err store_approval_block_get(struct store_conn *c, const char *id,
    struct store_approval_block_row *out) CS_MUST_CHECK;
/* Sets lifted_at = now on a denied, unlifted approval; *changed says whether it did. */
enum cs_err store_approval_block_lift(struct store_conn *c, const char *id, int64_t now,
    int *changed) CS_MUST_CHECK;
/* The approval's lifted_at (0: not lifted); CS_ENOENT when unknown. */
enum cs_err store_approval_block_lifted_at(struct store_conn *c, const char *id,
    int64_t *at) CS_MUST_CHECK;

#endif
