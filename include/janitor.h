/* janitor.h -- retention: removes finished rows in small batches, one short
 * transaction each, so a pass never holds the write lock for long.  What is
 * finished, and the grace each kind keeps, is in janitor.c's header comment. */
#ifndef CS_JANITOR_H
#define CS_JANITOR_H

#include <stdint.h>
#include "config.h"
#include "cs_err.h"
#include "store.h"
#include "store_janitor.h"

/* What one pass removed. */
struct janitor_stats {
	int64_t removed[JANITOR__MAX];   /* by store_janitor_kind */
	int64_t audit_pruned;            /* audit entries pruned */
	int64_t batches;                 /* transactions committed */
};

/* One pass at time now under cfg's [retention]: every kind in batches of
 * batch_size rows until a batch comes back short (or JANITOR_MAX_BATCHES per
 * kind, so a pass ends), then the audit prefix older than audit_days (when
 * set).  *st (may be NULL) gets the counts.  Stops at the first failure; what
 * was committed before it stays. */
enum cs_err janitor_run(struct store_conn *c, const struct config *cfg, int64_t now,
    struct janitor_stats *st) CS_MUST_CHECK;

/* The cut-off times janitor_run uses at now (exposed for the tests). */
void janitor_cutoffs(const struct config *cfg, int64_t now, struct store_janitor_cutoffs *out);

#endif
