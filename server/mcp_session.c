/* mcp_session.c -- the MCP gateway's 2025-11-25 sessions and URL elicitations
 * (mcp_session.h).  It must never keep a session id itself (only its hash),
 * never let a session id serve another person, client or endpoint, and never
 * hand one elicitation's completion to two streams. */
#include <string.h>

#include "b64.h"
#include "mcp_session.h"
#include "session.h"

bool mcp_session_id_valid(const char *sid)
{
	size_t n = 0;
	if (sid == NULL)
		return false;
	for (; sid[n] != '\0'; n++)
		if (n >= MCP_SESSION_ID_MAX || (unsigned char)sid[n] < 0x21 ||
		    (unsigned char)sid[n] > 0x7e)
			return false;
	return n > 0;
}

enum cs_err mcp_session_hash(const char *sid, unsigned char out[STORE_MCP_HASH_LEN])
{
	if (!mcp_session_id_valid(sid) || out == NULL)
		return CS_EINVAL;
	sha256_str(sid, out);
	return CS_OK;
}

static bool who_valid(const struct mcp_who *who)
{
	return who != NULL && who->endpoint != NULL && who->client_id != NULL && who->user_id > 0;
}

enum cs_err mcp_session_record(struct store_conn *c, const struct mcp_who *who, const char *sid,
    bool url_elicitation, int64_t now, enum mcp_session_outcome *oc)
{
	struct store_mcp_session r;
	enum cs_err e;
	if (c == NULL || !who_valid(who) || oc == NULL || now <= 0)
		return CS_EINVAL;
	memset(&r, 0, sizeof r);
	if ((e = mcp_session_hash(sid, r.hash)) != CS_OK)
		return e;
	r.endpoint = (char *)who->endpoint;
	r.client_id = (char *)who->client_id;
	r.user_id = who->user_id;
	r.url_elicitation = url_elicitation ? 1 : 0;
	r.created_at = r.last_seen_at = now;
	r.expires_at = now + MCP_SESSION_IDLE;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	e = store_mcp_session_put(c, &r, now);
	if (e != CS_OK && e != CS_EEXIST) {
		store_rollback(c);
		return e;
	}
	if (e == CS_EEXIST) {
		store_rollback(c);
		*oc = MCP_SESSION_TAKEN;
		return CS_OK;
	}
	if ((e = store_commit(c)) != CS_OK)
		return e;
	*oc = MCP_SESSION_RECORDED;
	return CS_OK;
}

enum cs_err mcp_session_find(struct store_conn *c, const struct mcp_who *who, const char *sid,
    int64_t now, struct mcp_session *out)
{
	struct store_mcp_session r;
	unsigned char h[STORE_MCP_HASH_LEN];
	enum cs_err e;
	if (c == NULL || !who_valid(who) || out == NULL)
		return CS_EINVAL;
	/* A malformed id names no session anyone could have: the same answer. */
	if (mcp_session_hash(sid, h) != CS_OK)
		return CS_ENOENT;
	memset(&r, 0, sizeof r);
	if ((e = store_mcp_session_get(c, who->endpoint, h, who->user_id, who->client_id, now,
	    &r)) != CS_OK)
		return e;
	memcpy(out->hash, r.hash, sizeof out->hash);
	out->url_elicitation = r.url_elicitation != 0;
	out->expires_at = r.expires_at;
	if (now - r.last_seen_at >= MCP_SESSION_TOUCH) {
		/* A session in use lives on; a failed move only shortens it. */
		if ((e = store_begin(c)) == CS_OK) {
			if ((e = store_mcp_session_touch(c, who->endpoint, h, now,
			    now + MCP_SESSION_IDLE)) == CS_OK)
				e = store_commit(c);
			else
				store_rollback(c);
		}
		if (e == CS_OK)
			out->expires_at = now + MCP_SESSION_IDLE;
	}
	store_mcp_session_clear(&r);
	return CS_OK;
}

enum cs_err mcp_session_end(struct store_conn *c, const struct mcp_who *who, const char *sid)
{
	unsigned char h[STORE_MCP_HASH_LEN];
	enum cs_err e;
	if (c == NULL || !who_valid(who))
		return CS_EINVAL;
	if (mcp_session_hash(sid, h) != CS_OK)
		return CS_ENOENT;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if ((e = store_mcp_session_delete(c, who->endpoint, h, who->user_id, who->client_id)) !=
	    CS_OK) {
		store_rollback(c);
		return e;
	}
	return store_commit(c);
}

enum cs_err mcp_elicitation_new(struct store_conn *c, const struct mcp_who *who,
    const struct mcp_session *s, enum mcp_elicitation_kind kind, const char *item_id,
    int64_t expires_at, int64_t now, char id[MCP_ELICITATION_ID_LEN + 1])
{
	struct store_mcp_elicitation r;
	char fresh[B64URL_ID_LEN + 1];
	enum cs_err e;
	if (c == NULL || !who_valid(who) || s == NULL || item_id == NULL || item_id[0] == '\0' ||
	    (unsigned)kind >= MCP_ELICIT__MAX || expires_at <= now || id == NULL)
		return CS_EINVAL;
	if ((e = b64url_random_id(fresh)) != CS_OK)
		return e;
	memset(&r, 0, sizeof r);
	r.id = fresh;
	r.endpoint = (char *)who->endpoint;
	r.client_id = (char *)who->client_id;
	r.item_id = (char *)item_id;
	memcpy(r.hash, s->hash, sizeof r.hash);
	r.user_id = who->user_id;
	r.kind = (enum store_mcp_kind)kind;
	r.created_at = now;
	r.expires_at = expires_at;
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if ((e = store_mcp_elicitation_put(c, &r)) != CS_OK) {
		store_rollback(c);
		return e;
	}
	if ((e = store_commit(c)) != CS_OK)
		return e;
	memcpy(id, fresh, sizeof fresh);
	return CS_OK;
}

enum cs_err mcp_elicitation_item_expiry(struct store_conn *c, enum mcp_elicitation_kind kind,
    const char *item_id, int64_t *expires_at)
{
	if ((unsigned)kind >= MCP_ELICIT__MAX)
		return CS_EINVAL;
	return store_mcp_item_expiry(c, (enum store_mcp_kind)kind, item_id, expires_at);
}

enum cs_err mcp_elicitation_take_done(struct store_conn *c, const struct mcp_who *who,
    const unsigned char hash[STORE_MCP_HASH_LEN], int64_t now, size_t max, char ***ids,
    size_t *n)
{
	int64_t ready = 0;
	char **got = NULL;
	size_t ngot = 0;
	enum cs_err e;
	if (c == NULL || !who_valid(who) || hash == NULL || ids == NULL || n == NULL ||
	    max == 0 || max > 1024)
		return CS_EINVAL;
	/* A stream asks twice a second: the usual answer "nothing" must cost a
	 * read, not a turn of the writer. */
	if ((e = store_mcp_elicitation_count_ready(c, who->endpoint, hash, who->user_id,
	    who->client_id, now, &ready)) != CS_OK)
		return e;
	if (ready > 0) {
		if ((e = store_begin(c)) != CS_OK)
			return e;
		if ((e = store_mcp_elicitation_take_ready(c, who->endpoint, hash, who->user_id,
		    who->client_id, now, max, &got, &ngot)) != CS_OK) {
			store_rollback(c);
			return e;
		}
		if ((e = store_commit(c)) != CS_OK) {
			store_mcp_ids_free(got, ngot);
			return e;
		}
	}
	*ids = got;
	*n = ngot;
	return CS_OK;
}
