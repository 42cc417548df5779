/* approval_block.h -- the actions a person denied (issue #32 item 3): a
 * denial of an action with exact parameters holds the agent back for
 * [consent] deny_cooldown (approval_check's step (c)); /me lists each with
 * until when, and the person may let it ask again at once, as with a consent
 * denial (consent_allow_asking). */
#ifndef CS_APPROVAL_BLOCK_H
#define CS_APPROVAL_BLOCK_H

#include <stddef.h>
#include <stdint.h>
#include "config.h"
#include "cs_err.h"
#include "store.h"

struct approval_block {          /* an element of approval_blocks_for_user's list */
	char   *id;                  /* the denied approval */
	char   *agent, *resource, *action;
	char   *parameters;          /* the canonical JSON text denied */
	int64_t decided_at, until;   /* denied at; blocked until (decided_at + deny_cooldown) */
};
void approval_block_list_free(struct approval_block *v, size_t n);   /* NULL-safe */

/* The person's denials that still hold at now (decided less than
 * deny_cooldown ago, not lifted, of a live consent), most recent first, at
 * most 200.  None when deny_cooldown is 0. */
enum cs_err approval_blocks_for_user(struct store_conn *c, const struct config *cfg,
    int64_t user_id, int64_t now, struct approval_block **out, size_t *n) CS_MUST_CHECK;

enum approval_lift_outcome {
	APPROVAL_LIFTED = 0,          /* lifted, audited "approval.cooldown_lifted" */
	APPROVAL_LIFT_NOTHING,        /* nothing held the agent back: lifted already, or over */
	APPROVAL_LIFT_NOT_DENIED,     /* the approval was never denied: nothing to lift */
	APPROVAL_LIFT_NOT_YOURS,      /* another person's approval: nothing changes */
	APPROVAL_LIFT_UNKNOWN,        /* no such approval */
	APPROVAL_LIFT__MAX
};
/* "Let it ask again": lifts the person's denial id, in one transaction with
 * its audit entry, so that the agent's next call of the same action with the
 * same parameters asks the person again.  A person lifts only their own. */
enum cs_err approval_allow_asking(struct store_conn *c, const struct config *cfg, const char *id,
    int64_t user_id, const char *actor, int64_t now, enum approval_lift_outcome *out) CS_MUST_CHECK;

#endif
