/* store_authz.h -- the SQL behind the authorization code flow of MCP clients
 * (migration 0019; docs/notes/mcp-as-plan.md, "The authorization leg"): pending
 * /authorize requests, and authorization codes by the SHA-256 of the code,
 * never the code.  Plain rows; the rules (who may bind a request, which client
 * may redeem a code, what a reuse revokes) belong to the caller. */
#ifndef CS_STORE_AUTHZ_H
#define CS_STORE_AUTHZ_H

#include <stdint.h>
#include "cs_err.h"
#include "store.h"

#define STORE_AUTHZ_ID_LEN 22            /* a request id: base64url of 16 random bytes */
#define STORE_AUTHZ_CODE_HASH_LEN 32     /* SHA-256 of the code */

/* A validated /authorize request while the person signs in and decides.  Read
 * from the store, its strings are one block (block; the fields point into it,
 * store_cols_text): its clear frees that block, never a field.  To put one,
 * fill the fields and leave block NULL. */
struct store_authz_request {     /* caller-owned; release with store_authz_request_clear() */
	char   *block;
	char   *id;                  /* STORE_AUTHZ_ID_LEN characters */
	char   *client_id, *redirect_uri, *code_challenge, *resource;
	char   *state;               /* the client's state, or NULL */
	char   *scope;               /* requested, space-separated, or NULL */
	char   *consent_request_id;  /* the consent request it led to, or NULL */
	char   *dpop_jkt;            /* RFC 9449 §10: the key its code is to be bound to, or
	                                NULL (migration 0023) */
	int64_t user_id;             /* the person (users.id); 0 until signed in */
	int64_t created_at, expires_at;
};
void store_authz_request_clear(struct store_authz_request *r);   /* NULL-safe */

/* An authorization code's row (the code itself is never stored).  Read from
 * the store, its strings are one block, as above. */
struct store_authz_code {        /* caller-owned; release with store_authz_code_clear() */
	char   *block;
	char   *request_id, *client_id, *redirect_uri, *code_challenge, *resource;
	char   *scope;               /* granted, space-separated */
	char   *consent_id;
	char   *dpop_jkt;            /* RFC 9449 §10: the key the code is bound to, or NULL */
	char   *family_id;           /* the refresh family its tokens belong to, or NULL */
	int64_t user_id;             /* the person (users.id) */
	int64_t created_at, expires_at;
	int64_t used_at;             /* 0 = not used */
};
void store_authz_code_clear(struct store_authz_code *r);          /* NULL-safe */

/* --- pending requests ---------------------------------------------------- */
/* Records r (block ignored; user_id 0 and the NULL fields are stored as
 * NULL).  CS_EINVAL when id is not STORE_AUTHZ_ID_LEN characters or a
 * required field (client_id, redirect_uri, code_challenge, resource) is NULL;
 * CS_EEXIST on a duplicate id. */
enum cs_err store_authz_request_put(struct store_conn *c,
    const struct store_authz_request *r) CS_MUST_CHECK;
/* The request with this id, unless it expired (expires_at <= now); CS_ENOENT
 * when unknown or expired.  *out written only on CS_OK. */
enum cs_err store_authz_request_get(struct store_conn *c, const char *id, int64_t now,
    struct store_authz_request *out) CS_MUST_CHECK;
/* Records that user_id signed in for the request, and the consent request it
 * led to (consent_request_id may be NULL: none yet).  SECURITY: a request
 * bound to one person is never bound to another: the same person may bind it
 * again (a new consent request after the first expired), anyone else gets
 * CS_ENOENT, as for an unknown or expired request.  CS_EINVAL when user_id is
 * not positive. */
enum cs_err store_authz_request_bind(struct store_conn *c, const char *id, int64_t user_id,
    const char *consent_request_id, int64_t now) CS_MUST_CHECK;
/* The unexpired request that led to the consent request consent_request_id
 * (store_authz_request_bind recorded it): how the consent page's done step
 * knows a decision came from /authorize.  CS_ENOENT when none (a gateway's
 * request, or the /authorize request expired or was used up).  *out written
 * only on CS_OK. */
enum cs_err store_authz_request_by_consent(struct store_conn *c, const char *consent_request_id,
    int64_t now, struct store_authz_request *out) CS_MUST_CHECK;
/* Deletes the request, expired or not; CS_ENOENT when there was none.  The
 * caller that issues a code deletes its request in the same transaction and
 * issues nothing on CS_ENOENT: one request, one code, even when two "done"
 * steps race. */
enum cs_err store_authz_request_delete(struct store_conn *c, const char *id) CS_MUST_CHECK;

/* --- codes ---------------------------------------------------------------- */
/* Records a code by its hash (r's used_at and family_id are ignored: a new
 * code is unused and has no family).  CS_EINVAL when a required field
 * (request_id, client_id, redirect_uri, code_challenge, resource, scope,
 * consent_id) is NULL or user_id is not positive; CS_EEXIST on a duplicate
 * hash. */
enum cs_err store_authz_code_put(struct store_conn *c,
    const unsigned char code_hash[STORE_AUTHZ_CODE_HASH_LEN],
    const struct store_authz_code *r) CS_MUST_CHECK;

/* What store_authz_code_take found. */
enum store_authz_take {
	AUTHZ_TAKE_OK = 0,           /* unused and unexpired: now used; *out is the row */
	AUTHZ_TAKE_UNKNOWN,          /* no code has this hash (or it was purged) */
	AUTHZ_TAKE_EXPIRED,          /* unused, but past expires_at: stays unused */
	AUTHZ_TAKE_REUSED,           /* used before: *out is the row, with the family and
	                              * consent the first use issued for */
	AUTHZ_TAKE__MAX
};

/* Uses up the code with this hash at now, once: of any number of takes, on
 * any connections or nodes, exactly one gets AUTHZ_TAKE_OK (one conditional
 * UPDATE marks used_at).  A used code is AUTHZ_TAKE_REUSED whether or not it
 * has expired since, until the janitor purges its row: OAuth 2.1 §4.1.3 asks
 * that a second use revoke what the first issued, so *out then carries
 * family_id and consent_id.  SECURITY: the code is found by its hash alone;
 * the caller compares client_id, redirect_uri and resource with the token
 * request's own and verifies PKCE, and refuses on any difference (a code
 * another client obtained is returned here all the same).  CS_OK with *oc for
 * every answer, *out written only for AUTHZ_TAKE_OK and AUTHZ_TAKE_REUSED;
 * CS_EINVAL when now is not positive; an error only when the take could not
 * be judged.
 * A reuse that arrives between the take and store_authz_code_set_family
 * finds no family yet: run the take, the issuance and set_family in one
 * transaction, so that a racing take waits for their commit (both engines
 * hold the row's write lock until then). */
enum cs_err store_authz_code_take(struct store_conn *c,
    const unsigned char code_hash[STORE_AUTHZ_CODE_HASH_LEN], int64_t now,
    enum store_authz_take *oc, struct store_authz_code *out) CS_MUST_CHECK;
/* Records the refresh family the code's tokens were issued in, once, on a
 * used code: CS_ENOENT when no used code without a family has this hash
 * (unknown, unused, or its family recorded already -- never overwritten). */
enum cs_err store_authz_code_set_family(struct store_conn *c,
    const unsigned char code_hash[STORE_AUTHZ_CODE_HASH_LEN], const char *family_id) CS_MUST_CHECK;

#endif
