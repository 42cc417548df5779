/* auth_refusal.h -- what consentd keeps of a refused gateway authentication
 * (issue 28): each one counted in consentd_gateway_auth_refused_total{reason},
 * and at most one audit entry per client address and AUTH_REFUSAL_INTERVAL
 * (and AUTH_REFUSAL_MAX_ENTRIES a node in all per interval), so that an
 * anonymous caller cannot make consentd write once per request.  A fixed
 * table in memory, one per node; no HTTP, no SQL. */
#ifndef CS_AUTH_REFUSAL_H
#define CS_AUTH_REFUSAL_H

#include <stdbool.h>
#include <stdint.h>

enum auth_refusal_reason {
	AUTH_REFUSED_MISSING = 0,         /* no credentials at all */
	AUTH_REFUSED_METHOD_NOT_ENABLED,  /* a method [gateway] token_endpoint_auth leaves out */
	AUTH_REFUSED_MALFORMED,           /* two methods, a wrong assertion type, a missing part */
	AUTH_REFUSED_BASIC,               /* a wrong Basic credential */
	AUTH_REFUSED_ASSERTION,           /* an assertion refused by client_assertion_check */
	AUTH_REFUSED_REPLAY,              /* an assertion whose jti was used before */
	AUTH_REFUSED__MAX
};

/* The reason's label value: "missing", "method_not_enabled", "malformed",
 * "basic", "assertion", "replay". */
const char *auth_refusal_reason_name(enum auth_refusal_reason r);

#define AUTH_REFUSAL_INTERVAL 300       /* seconds: one entry per address in each */
#define AUTH_REFUSAL_MAX_ENTRIES 64     /* entries a node writes per interval, all addresses */
#define AUTH_REFUSAL_SLOTS 4096         /* addresses remembered (oldest forgotten first) */

struct auth_refusals;

/* NULL when memory or randomness fails. */
struct auth_refusals *auth_refusals_new(void);
void auth_refusals_free(struct auth_refusals *t);     /* NULL-safe */

/* What an audit entry written now summarises besides the refusal at hand. */
struct auth_refusal_summary {
	uint64_t earlier;       /* refusals from this address since its last entry, not written */
	uint64_t unrecorded;    /* refusals from any address that found the interval's cap full */
};

/* Counts one refusal of reason from ip (a client address's text) at now (UTC
 * seconds) in the metric.  Only a refusal that is audited (audited: a refused
 * assertion) enters the table, so refusals that are never audited cannot use
 * up an address's entry.  true when the caller is to write one audit entry for
 * it (the address's first in AUTH_REFUSAL_INTERVAL, and the node's entries of
 * this interval below AUTH_REFUSAL_MAX_ENTRIES); then *out says what it stands
 * for.  Addresses count as [limits] does (an IPv6 /64 as one).  With t NULL
 * (unit tests without an app) every audited refusal is to be written. */
bool auth_refusals_note(struct auth_refusals *t, const char *ip, enum auth_refusal_reason reason,
    bool audited, int64_t now, struct auth_refusal_summary *out);

#endif
