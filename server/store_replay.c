/* store_replay.c -- the SQL for the replay cache (migration 0015).  It only
 * inserts and purges rows; deciding what a jti is worth belongs to its caller.
 * Every value is a bound parameter. */
#include "store_priv.h"
#include "store_replay.h"

static const char *const kind_names[REPLAY__MAX] = {
	[REPLAY_CLIENT_ASSERTION] = "client_assertion", [REPLAY_DPOP] = "dpop",
	[REPLAY_IDJAG] = "id_jag",
};

/* A row past its expiry and the margin may be taken over; any other makes the
 * insert a no-op (?4 is now - REPLAY_CLOCK_MARGIN). */
static const char SQL_REPLAY_USE[] =
    "INSERT INTO replay_cache (kind, jti, expires_at) VALUES (?1, ?2, ?3) "
    "ON CONFLICT (kind, jti) DO UPDATE SET expires_at = excluded.expires_at "
    "WHERE replay_cache.expires_at < ?4";
static const char SQL_REPLAY_PURGE[] =
    "DELETE FROM replay_cache WHERE expires_at < ?1";

enum cs_err store_replay_use(struct store_conn *c, enum store_replay_kind kind, const char *jti,
    int64_t expires_at, int64_t now)
{
	struct store_stmt *st;
	enum cs_err e;
	if ((unsigned)kind >= REPLAY__MAX || jti == NULL)
		return CS_EINVAL;
	/* Every use also purges what expired (an index range, usually empty):
	 * the table holds only the jtis of the last few minutes. */
	int64_t cutoff = now - REPLAY_CLOCK_MARGIN;
	if ((st = store_query(c, SQL_REPLAY_PURGE, STORE_VALS(SV_INT(cutoff)), &e)) == NULL)
		return e;
	if ((e = store_exec(c, st)) != CS_OK)
		return e;
	if ((st = store_query(c, SQL_REPLAY_USE, STORE_VALS(SV_TEXT(kind_names[kind]),
	    SV_TEXT(jti), SV_INT(expires_at), SV_INT(cutoff)), &e)) == NULL)
		return e;
	if ((e = store_exec(c, st)) != CS_OK)
		return e;
	return store_changes(c) == 1 ? CS_OK : CS_EEXIST;
}
