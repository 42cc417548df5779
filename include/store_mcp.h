/* store_mcp.h -- the SQL behind the MCP gateway's 2025-11-25 sessions and their
 * URL elicitations (migration 0024; mcp_session.h holds the rules).  A session
 * is found by the SHA-256 of the upstream's Mcp-Session-Id, never the id, and
 * only together with the person, the client and the endpoint it was recorded
 * for.  Plain rows and single statements; nothing here decides lifetimes. */
#ifndef CS_STORE_MCP_H
#define CS_STORE_MCP_H

#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"
#include "store.h"

#define STORE_MCP_HASH_LEN 32            /* SHA-256 of an Mcp-Session-Id */
#define STORE_MCP_ID_LEN 22              /* an elicitationId: base64url of 16 random bytes */

/* One session.  Read from the store, its strings are one block (block; the
 * fields point into it): its clear frees that block, never a field.  To put
 * one, fill the fields and leave block NULL. */
struct store_mcp_session {       /* caller-owned; release with store_mcp_session_clear() */
	char          *block;
	char          *endpoint;     /* [mcp.NAME]'s NAME */
	char          *client_id;
	unsigned char  hash[STORE_MCP_HASH_LEN];
	int64_t        user_id;      /* users.id */
	int            url_elicitation;   /* 1: the client declared elicitation.url */
	int64_t        created_at, last_seen_at, expires_at;
};
void store_mcp_session_clear(struct store_mcp_session *r);        /* NULL-safe */

enum store_mcp_kind { STORE_MCP_APPROVAL = 0, STORE_MCP_CONSENT, STORE_MCP_KIND__MAX };

/* One elicitation (strings as above). */
struct store_mcp_elicitation {   /* caller-owned; release with store_mcp_elicitation_clear() */
	char               *block;
	char               *id;      /* STORE_MCP_ID_LEN characters */
	char               *endpoint, *client_id;
	char               *item_id; /* approvals.id or consent_requests.id */
	unsigned char       hash[STORE_MCP_HASH_LEN];   /* its session's */
	int64_t             user_id;
	enum store_mcp_kind kind;
	int64_t             created_at, expires_at, completed_at, notified_at;
};
void store_mcp_elicitation_clear(struct store_mcp_elicitation *r);   /* NULL-safe */

/* --- sessions ------------------------------------------------------------ */
/* Records r (block ignored) in one statement.  (endpoint, hash) already held
 * by a session that has not expired at now and belongs to another person or
 * client: CS_EEXIST, and that session is left as it was.  Held by the same
 * person and client, or expired: replaced by r.  CS_EINVAL when a field is
 * missing. */
enum cs_err store_mcp_session_put(struct store_conn *c, const struct store_mcp_session *r,
    int64_t now) CS_MUST_CHECK;
/* SECURITY: the session (endpoint, hash) only when it is user_id's with
 * client_id and has not expired at now: CS_ENOENT otherwise, the same answer
 * whether it is unknown, expired or another's.  *out written only on CS_OK. */
enum cs_err store_mcp_session_get(struct store_conn *c, const char *endpoint,
    const unsigned char hash[STORE_MCP_HASH_LEN], int64_t user_id, const char *client_id,
    int64_t now, struct store_mcp_session *out) CS_MUST_CHECK;
/* Sets the session's last_seen_at and expires_at; CS_ENOENT when there is none. */
enum cs_err store_mcp_session_touch(struct store_conn *c, const char *endpoint,
    const unsigned char hash[STORE_MCP_HASH_LEN], int64_t last_seen_at,
    int64_t expires_at) CS_MUST_CHECK;
/* Deletes the session (endpoint, hash) of user_id and client_id, with its
 * elicitations; CS_ENOENT (nothing deleted) when it is not theirs or unknown.
 * Two statements: call it inside the caller's transaction. */
enum cs_err store_mcp_session_delete(struct store_conn *c, const char *endpoint,
    const unsigned char hash[STORE_MCP_HASH_LEN], int64_t user_id,
    const char *client_id) CS_MUST_CHECK;

/* --- elicitations -------------------------------------------------------- */
/* Records r (block, completed_at and notified_at ignored: both start 0);
 * CS_EEXIST on a duplicate id; CS_EINVAL when a field is missing or the id
 * is not STORE_MCP_ID_LEN characters. */
enum cs_err store_mcp_elicitation_put(struct store_conn *c,
    const struct store_mcp_elicitation *r) CS_MUST_CHECK;
/* The elicitation with this id, whatever its state; CS_ENOENT when unknown. */
enum cs_err store_mcp_elicitation_get(struct store_conn *c, const char *id,
    struct store_mcp_elicitation *out) CS_MUST_CHECK;
/* How many of the session's elicitations are ready to be notified at now:
 * still user_id's with client_id (a session id taken over after its expiry
 * inherits none), not notified yet, not expired, and their item (the approval
 * or consent request) no longer pending -- read from the item at each call.
 * A read: no lock, no write. */
enum cs_err store_mcp_elicitation_count_ready(struct store_conn *c, const char *endpoint,
    const unsigned char hash[STORE_MCP_HASH_LEN], int64_t user_id, const char *client_id,
    int64_t now, int64_t *n) CS_MUST_CHECK;
/* SECURITY: takes at most max of the session's ready elicitations (as
 * store_mcp_elicitation_count_ready counts them) in ONE conditional UPDATE
 * that sets completed_at and notified_at to now and returns their ids: of
 * racing takers, on one node or many, each id comes back to exactly one.
 * *ids (a malloc'd array of malloc'd strings, *n of them; NULL when none) is
 * the caller's (store_mcp_ids_free).  max is 1 to 1024. */
enum cs_err store_mcp_elicitation_take_ready(struct store_conn *c, const char *endpoint,
    const unsigned char hash[STORE_MCP_HASH_LEN], int64_t user_id, const char *client_id,
    int64_t now, size_t max, char ***ids, size_t *n) CS_MUST_CHECK;
void store_mcp_ids_free(char **ids, size_t n);                    /* NULL-safe */
/* The expiry of the item an elicitation of kind would wait for (the
 * approval's or the consent request's expires_at); CS_ENOENT when unknown. */
enum cs_err store_mcp_item_expiry(struct store_conn *c, enum store_mcp_kind kind,
    const char *item_id, int64_t *expires_at) CS_MUST_CHECK;

#endif
