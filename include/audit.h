/* audit.h -- the audit log: one entry per decision, refusal, release and
 * revocation, written in the same transaction as the change it records.
 * Never a token, code, secret or cookie in an entry: ids (jti, consent id) only. */
#ifndef CS_AUDIT_H
#define CS_AUDIT_H

#include <stdint.h>
#include "cs_err.h"
#include "store.h"

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

/* Appends one entry.  Call inside the caller's transaction. */
enum cs_err audit_append(struct store_conn *c, const struct audit_entry *e) CS_MUST_CHECK;

#endif
