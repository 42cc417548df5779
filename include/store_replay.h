/* store_replay.h -- the SQL behind the replay cache of migration 0015: jtis of
 * client assertions, DPoP proofs and ID-JAGs (0022), each accepted once until it expires. */
#ifndef CS_STORE_REPLAY_H
#define CS_STORE_REPLAY_H

#include <stdint.h>
#include "cs_err.h"
#include "store.h"

/* REPLAY_IDJAG (migration 0022): an ID-JAG's jti, keyed by its enterprise IdP
 * (idjag_grant.c). */
enum store_replay_kind { REPLAY_CLIENT_ASSERTION = 0, REPLAY_DPOP, REPLAY_IDJAG, REPLAY__MAX };

/* SECURITY: S2 (issue 28): how much longer than its expiry a row is kept.
 * expires_at is computed by the node that accepted a jti, and each node
 * decides "expired" by its own clock: a row purged by a node whose clock runs
 * ahead would let a slower node, for which the assertion or proof is still
 * valid, accept it again.  Keeping rows REPLAY_CLOCK_MARGIN seconds past
 * expires_at (by the purging node's clock) closes that window for nodes whose
 * clocks differ by up to this much; docs/security.md asks for NTP. */
#define REPLAY_CLOCK_MARGIN 300

/* Records jti of kind as used until expires_at, in its own statement (no
 * transaction needed: the insert is atomic across connections and nodes).
 * CS_EEXIST when it was recorded already and is not past expires_at +
 * REPLAY_CLOCK_MARGIN; a record past that is replaced.  Rows past it are
 * purged first. */
enum cs_err store_replay_use(struct store_conn *c, enum store_replay_kind kind, const char *jti,
    int64_t expires_at, int64_t now) CS_MUST_CHECK;

#endif
