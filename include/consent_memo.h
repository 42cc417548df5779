/* consent_memo.h -- the live consent a thread last read for a person, an
 * agent and a resource, kept in that thread's memory for a few seconds so
 * that flow A's next grant for them need not read it from the database
 * before its transaction (consent.h, consent_exchange_remembered).
 *
 * SECURITY: a remembered consent is a hint, never an authority.  It is
 * never consulted to answer anything but flow A, and a grant made from it
 * is signed only after the writer's transaction read the consent again and
 * found it the same and still covering (grant.h, grant_issue_req's
 * live_only); when it is not, the entry is forgotten and the call takes
 * the full path again.  So nothing needs to tell other threads or nodes
 * that a consent changed: a stale entry costs one refused turn. */
#ifndef CS_CONSENT_MEMO_H
#define CS_CONSENT_MEMO_H

#include <stdbool.h>
#include <stdint.h>

#include "cs_err.h"
#include "store_consent.h"

#define CONSENT_MEMO_SLOTS 32          /* per thread; the oldest goes first */
#define CONSENT_MEMO_TTL   10          /* seconds an entry is used for */

/* Who a consent is for: the person (the IdP's issuer and subject), the agent
 * and the resource. */
struct consent_memo_key {
	const char *issuer, *subject, *agent, *resource;
};

/* A copy of the row remembered for key by this thread, when one is and was
 * put less than CONSENT_MEMO_TTL seconds before now; *out (caller-owned,
 * store_consent_row_clear) written only then. */
bool consent_memo_get(const struct consent_memo_key *key, int64_t now,
    struct store_consent_row *out);
/* Remembers a copy of row r for key in this thread from now on, in place of
 * any entry for key.  Nothing is remembered when memory runs out. */
void consent_memo_put(const struct consent_memo_key *key, const struct store_consent_row *r,
    int64_t now);
/* Forgets this thread's entry for key, if any. */
void consent_memo_forget(const struct consent_memo_key *key);
/* Forgets every entry of this thread (tests). */
void consent_memo_clear(void);

#endif
