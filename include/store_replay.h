/* store_replay.h -- the SQL behind the replay cache of migration 0015: jtis of
 * client assertions and DPoP proofs, each accepted once until it expires. */
#ifndef CS_STORE_REPLAY_H
#define CS_STORE_REPLAY_H

#include <stdint.h>
#include "cs_err.h"
#include "store.h"

enum store_replay_kind { REPLAY_CLIENT_ASSERTION = 0, REPLAY_DPOP, REPLAY__MAX };

/* Records jti of kind as used until expires_at, in its own statement (no
 * transaction needed: the insert is atomic across connections and nodes).
 * CS_EEXIST when it was recorded already and has not expired; an expired
 * record is replaced.  Rows expired before now are purged first. */
enum cs_err store_replay_use(struct store_conn *c, enum store_replay_kind kind, const char *jti,
    int64_t expires_at, int64_t now) CS_MUST_CHECK;

#endif
