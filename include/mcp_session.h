/* mcp_session.h -- the MCP gateway's 2025-11-25 sessions and the URL
 * elicitations it answers in them (issue #31; docs/mcp.md, "The 2025-11-25
 * form").  A session is the upstream's: consentd learns its Mcp-Session-Id
 * from the upstream's answer to `initialize` and records it, hashed, for the
 * person, the MCP client and the endpoint of that call, with whether the
 * client declared URL elicitation.  A session id is honoured only for the
 * same three.  An elicitation is one -32042 answer: a random elicitationId
 * standing for the approval or consent request the person is to decide; the
 * session's GET stream (mcp_stream.h) tells the client once that happened.
 * No HTTP here; the store's SQL is store_mcp.c's. */
#ifndef CS_MCP_SESSION_H
#define CS_MCP_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"
#include "store.h"
#include "store_mcp.h"

/* The longest Mcp-Session-Id kept track of (the spec asks for visible ASCII
 * and sets no length; a UUID is 36): a longer or otherwise malformed id is
 * refused, never truncated. */
#define MCP_SESSION_ID_MAX 256
/* A session unused this long is over (the janitor deletes it); each use
 * moves its end, writing at most every MCP_SESSION_TOUCH seconds. */
#define MCP_SESSION_IDLE (24 * 3600)
#define MCP_SESSION_TOUCH 300
#define MCP_ELICITATION_ID_LEN STORE_MCP_ID_LEN

/* Whose a session is: the endpoint ([mcp.NAME]'s NAME), the person (users.id)
 * and the MCP client (the access token's client_id).  The strings are the
 * caller's. */
struct mcp_who {
	const char *endpoint;
	int64_t     user_id;
	const char *client_id;
};

/* A session as mcp_session_find found it. */
struct mcp_session {
	unsigned char hash[STORE_MCP_HASH_LEN];   /* SHA-256 of its id */
	bool          url_elicitation;            /* the client declared elicitation.url */
	int64_t       expires_at;
};

/* true when sid is an Mcp-Session-Id consentd keeps track of: 1 to
 * MCP_SESSION_ID_MAX visible ASCII characters (0x21-0x7E). */
bool mcp_session_id_valid(const char *sid);
/* SHA-256 of sid into out; CS_EINVAL (out untouched) when sid is not valid. */
enum cs_err mcp_session_hash(const char *sid, unsigned char out[STORE_MCP_HASH_LEN]) CS_MUST_CHECK;

enum mcp_session_outcome {
	MCP_SESSION_RECORDED = 0,    /* the session is who's, with url_elicitation */
	/* SECURITY: the upstream answered an id that is another person's or
	 * client's live session on this endpoint: nothing was recorded, and the
	 * caller must not hand the id on (an upstream that repeats ids would
	 * otherwise join two people's sessions). */
	MCP_SESSION_TAKEN,
	MCP_SESSION__MAX
};
/* Records the session sid (the upstream's answer to who's initialize) with
 * whether the client declared URL elicitation, living MCP_SESSION_IDLE from
 * now, in its own transaction.  Recording the same id again for the same
 * three replaces it (a new initialize).  CS_EINVAL for an invalid sid;
 * *oc written only on CS_OK. */
enum cs_err mcp_session_record(struct store_conn *c, const struct mcp_who *who, const char *sid,
    bool url_elicitation, int64_t now, enum mcp_session_outcome *oc) CS_MUST_CHECK;
/* SECURITY: the session sid only when it is who's (endpoint, person and
 * client) and has not expired at now; CS_ENOENT otherwise -- the same answer
 * for an unknown, an expired and another's session, so an id learned from
 * elsewhere tells nothing.  Moves its end to now + MCP_SESSION_IDLE when the
 * last move is MCP_SESSION_TOUCH old.  *out written only on CS_OK. */
enum cs_err mcp_session_find(struct store_conn *c, const struct mcp_who *who, const char *sid,
    int64_t now, struct mcp_session *out) CS_MUST_CHECK;
/* Ends who's session sid (DELETE /mcp/NAME) with its elicitations, in its own
 * transaction; CS_ENOENT when it is not who's or unknown (nothing changed). */
enum cs_err mcp_session_end(struct store_conn *c, const struct mcp_who *who,
    const char *sid) CS_MUST_CHECK;

/* What an elicitation waits for. */
enum mcp_elicitation_kind {
	MCP_ELICIT_APPROVAL = STORE_MCP_APPROVAL,   /* item: approvals.id */
	MCP_ELICIT_CONSENT = STORE_MCP_CONSENT,     /* item: consent_requests.id */
	MCP_ELICIT__MAX = STORE_MCP_KIND__MAX
};
/* Records a new elicitation in who's session s for item_id (of kind), until
 * expires_at (the item's own expiry), in its own transaction, and writes its
 * fresh random elicitationId into id.  CS_EINVAL when expires_at <= now or an
 * argument is missing; id written only on CS_OK. */
enum cs_err mcp_elicitation_new(struct store_conn *c, const struct mcp_who *who,
    const struct mcp_session *s, enum mcp_elicitation_kind kind, const char *item_id,
    int64_t expires_at, int64_t now, char id[MCP_ELICITATION_ID_LEN + 1]) CS_MUST_CHECK;
/* The expiry of item_id of kind (the approval's or consent request's own),
 * for mcp_elicitation_new; CS_ENOENT when there is no such item. */
enum cs_err mcp_elicitation_item_expiry(struct store_conn *c, enum mcp_elicitation_kind kind,
    const char *item_id, int64_t *expires_at) CS_MUST_CHECK;
/* The elicitationIds of who's session hash whose item the person has decided
 * (approved, denied, or otherwise no longer pending) and that no stream has
 * taken yet, at most max (1 to 1024), each taken ONCE across every node
 * (store_mcp_elicitation_take_ready): *ids (malloc'd, store_mcp_ids_free) and
 * *n; NULL and 0 when none.  A cheap read first: the write transaction is
 * begun only when there is something to take. */
enum cs_err mcp_elicitation_take_done(struct store_conn *c, const struct mcp_who *who,
    const unsigned char hash[STORE_MCP_HASH_LEN], int64_t now, size_t max, char ***ids,
    size_t *n) CS_MUST_CHECK;

#endif
