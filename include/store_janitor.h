/* store_janitor.h -- the SQL behind the janitor (janitor.h): one bounded batch
 * of finished rows deleted per call.  The caller holds the transaction; what
 * counts as finished is decided by the cut-off times it passes. */
#ifndef CS_STORE_JANITOR_H
#define CS_STORE_JANITOR_H

#include <stdint.h>
#include "cs_err.h"
#include "store.h"

enum store_janitor_kind {
	JANITOR_GRANTS,          /* grant rows expired before grants_before */
	JANITOR_REQUESTS,        /* consent requests finished (see store_janitor.c) */
	JANITOR_APPROVALS,       /* approvals used, denied, expired, cancelled or unredeemable */
	JANITOR_EVENTS,          /* revocation events delivered before done_before */
	JANITOR_CONSENTS,        /* consents revoked before consents_before, with their rows */
	JANITOR_AUTHZ_REQUESTS,  /* pending /authorize requests expired before done_before */
	JANITOR_AUTHZ_CODES,     /* authorization codes, used or not, expired before done_before */
	JANITOR_MCP_ELICITATIONS,/* MCP URL elicitations (migration 0024) expired before done_before */
	JANITOR_MCP_SESSIONS,    /* 2025 MCP sessions expired before done_before */
	JANITOR__MAX
};

/* UTC seconds: a row of a kind is removed only when its deciding time is at
 * or before the cut-off for it. */
struct store_janitor_cutoffs {
	int64_t done_before;         /* now - grace: expiry, use, delivery */
	int64_t decided_before;      /* now - grace - request_ttl: approvals and approved requests */
	int64_t denied_before;       /* now - grace - max(request_ttl, deny_cooldown) */
	int64_t consents_before;     /* now - revoked_consent_days */
	int     keep_waiting_events; /* 1: an undelivered revocation event keeps its consent */
};

/* Deletes at most limit rows of kind (for JANITOR_CONSENTS: limit consents,
 * and their grants, refresh tokens, bindings, approvals and delivered events)
 * and sets *removed to the number of rows of kind deleted.  Inside the
 * caller's transaction. */
enum cs_err store_janitor_batch(struct store_conn *c, enum store_janitor_kind kind,
    const struct store_janitor_cutoffs *cut, int64_t limit, int64_t *removed) CS_MUST_CHECK;

#endif
