/* approval_block.c -- the actions a person denied, for /me (approval_block.h):
 * listing the denials that still hold an agent back and lifting one.  It must
 * never lift or show a denial to anyone but the person who decided it. */
#include <stdlib.h>
#include <string.h>

#include "approval_block.h"
#include "audit.h"
#include "buf.h"
#include "store_approval_block.h"

#define BLOCKS_MAX 200

void approval_block_list_free(struct approval_block *v, size_t n)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < n; i++) {
		free(v[i].id);
		free(v[i].agent);
		free(v[i].resource);
		free(v[i].action);
		free(v[i].parameters);
	}
	free(v);
}

enum cs_err approval_blocks_for_user(struct store_conn *c, const struct config *cfg,
    int64_t user_id, int64_t now, struct approval_block **out, size_t *n)
{
	struct store_approval_block_row *rows = NULL;
	struct approval_block *v = NULL;
	size_t nr = 0;
	enum cs_err e;
	if (c == NULL || cfg == NULL || out == NULL || n == NULL)
		return CS_EINVAL;
	*out = NULL;
	*n = 0;
	if (cfg->consent_deny_cooldown <= 0)
		return CS_OK;
	if ((e = store_approval_block_list(c, user_id, now - cfg->consent_deny_cooldown, now,
	    BLOCKS_MAX, &rows, &nr)) != CS_OK)
		return e;
	if (nr > 0 && (v = calloc(nr, sizeof *v)) == NULL) {
		e = CS_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < nr; i++) {
		struct approval_block *b = &v[i];
		if ((b->id = strdup(rows[i].id)) == NULL || (b->agent = strdup(rows[i].agent)) == NULL ||
		    (b->resource = strdup(rows[i].resource)) == NULL ||
		    (b->action = strdup(rows[i].action)) == NULL ||
		    (b->parameters = strdup(rows[i].parameters)) == NULL) {
			e = CS_ENOMEM;
			approval_block_list_free(v, nr);
			goto out;
		}
		b->decided_at = rows[i].decided_at;
		b->until = rows[i].decided_at + cfg->consent_deny_cooldown;
	}
	*out = v;
	*n = nr;
out:
	store_approval_block_rows_free(rows, nr);
	return e;
}

enum cs_err approval_allow_asking(struct store_conn *c, const struct config *cfg, const char *id,
    int64_t user_id, const char *actor, int64_t now, enum approval_lift_outcome *out)
{
	struct store_approval_block_row r;
	enum approval_lift_outcome o = APPROVAL_LIFT_NOTHING;
	char detail[200];
	int changed = 0;
	enum cs_err e;
	memset(&r, 0, sizeof r);
	if (c == NULL || cfg == NULL || id == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if ((e = store_approval_block_get(c, id, &r)) == CS_ENOENT) {
		e = CS_OK;
		o = APPROVAL_LIFT_UNKNOWN;
		goto out;
	} else if (e != CS_OK) {
		goto out;
	}
	/* SECURITY: a person lifts only the denials they decided. */
	if (user_id <= 0 || r.user_id != user_id) {
		o = APPROVAL_LIFT_NOT_YOURS;
		goto out;
	}
	if (strcmp(r.status, "denied") != 0) {
		o = APPROVAL_LIFT_NOT_DENIED;
		goto out;
	}
	/* Over already (the next call asks anyway), or lifted before: nothing to do. */
	if (r.lifted_at != 0 || r.decided_at + cfg->consent_deny_cooldown <= now)
		goto out;
	if ((e = store_approval_block_lift(c, r.id, now, &changed)) != CS_OK)
		goto out;
	if (changed && ((e = str_fmt(detail, sizeof detail, "action=%s; params_digest=%s", r.action,
	    r.digest)) != CS_OK || (e = audit_append(c, &(struct audit_entry){ .ts = now,
	    .actor = actor, .action = "approval.cooldown_lifted", .subject = r.subject,
	    .agent = r.agent, .resource = r.resource, .consent_id = r.consent_id,
	    .request_id = r.id, .outcome = "ok", .detail = detail })) != CS_OK))
		goto out;
	o = changed ? APPROVAL_LIFTED : APPROVAL_LIFT_NOTHING;
out:
	if (e == CS_OK && (e = store_commit(c)) == CS_OK)
		*out = o;
	else
		store_rollback(c);
	store_approval_block_row_clear(&r);
	return e;
}
