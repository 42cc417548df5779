/* store_grant.h -- the SQL behind grant.c: issued grants (by jti) and refresh
 * tokens (by the SHA-256 of the token, never the token) of migration 0004.
 * Plain rows; the rules (liveness, rotation, reuse) belong to grant.c. */
#ifndef CS_STORE_GRANT_H
#define CS_STORE_GRANT_H

#include <stdbool.h>
#include <stdint.h>
#include "cs_err.h"
#include "store.h"

#define STORE_REFRESH_HASH_LEN 32    /* SHA-256 */

/* Read from the store, a row's strings are one block (block; the fields point
 * into it, store_cols_text): its clear frees that block, never a field. */
struct store_grant_row {         /* caller-owned; release with store_grant_row_clear() */
	char   *block;               /* the one allocation jti and consent_id point into */
	char   *jti;
	char   *consent_id;
	int64_t issued_at, expires_at, revoked_at;   /* revoked_at 0 = not revoked */
};
void store_grant_row_clear(struct store_grant_row *r);      /* NULL-safe */

struct store_refresh_row {       /* caller-owned; release with store_refresh_row_clear() */
	char   *block;               /* the one allocation family and consent_id point into */
	unsigned char hash[STORE_REFRESH_HASH_LEN];
	char   *family;
	char   *consent_id;
	int64_t issued_at, used_at, revoked_at;      /* 0 = not used / not revoked */
	bool    reuse_detected;      /* revoked by a reuse detection (migration 0017) */
};
void store_refresh_row_clear(struct store_refresh_row *r);  /* NULL-safe */

/* --- grants ------------------------------------------------------------ */
/* Records an issued grant (family: its refresh family, or NULL); CS_EEXIST on a
 * duplicate jti -- inside a transaction on PostgreSQL the write goes with the
 * next statement (store_run_later), so a duplicate fails that statement or
 * the COMMIT instead, and the transaction rolls back whole. */
enum cs_err store_grant_insert(struct store_conn *c, const char *jti, const char *consent_id,
    const char *family, int64_t issued_at, int64_t expires_at) CS_MUST_CHECK;
/* The grant with this jti; CS_ENOENT when unknown.  *out written only on CS_OK. */
enum cs_err store_grant_get(struct store_conn *c, const char *jti,
    struct store_grant_row *out) CS_MUST_CHECK;
/* Marks an unrevoked grant revoked at now; *changed is 1 when it was, 0 when
 * it was revoked already or is unknown. */
enum cs_err store_grant_revoke(struct store_conn *c, const char *jti, int64_t now,
    int *changed) CS_MUST_CHECK;

/* --- refresh tokens ---------------------------------------------------- */
/* Records a refresh token by its hash; CS_EEXIST on a duplicate hash. */
enum cs_err store_refresh_insert(struct store_conn *c,
    const unsigned char hash[STORE_REFRESH_HASH_LEN], const char *family,
    const char *consent_id, int64_t issued_at) CS_MUST_CHECK;
/* The refresh token with this hash, whatever its state; CS_ENOENT when
 * unknown.  *out written only on CS_OK. */
enum cs_err store_refresh_get(struct store_conn *c,
    const unsigned char hash[STORE_REFRESH_HASH_LEN], struct store_refresh_row *out) CS_MUST_CHECK;
/* Uses up a current (unused, unrevoked) token: used_at = now.  *changed is 1
 * when it was current, 0 otherwise (someone else took it first). */
enum cs_err store_refresh_mark_used(struct store_conn *c,
    const unsigned char hash[STORE_REFRESH_HASH_LEN], int64_t now, int *changed) CS_MUST_CHECK;
/* Revokes every unrevoked token of the family at now, and every grant minted in
 * it; *n is how many refresh tokens were.  reuse: the rows say a reuse detection
 * revoked them (reuse_detected). */
enum cs_err store_refresh_revoke_family(struct store_conn *c, const char *family, int64_t now,
    bool reuse, int64_t *n) CS_MUST_CHECK;

/* --- DPoP bindings of refresh families (migration 0015) ------------------ */
/* Binds family to the key thumbprint jkt; CS_EEXIST when it is bound already. */
enum cs_err store_refresh_bind(struct store_conn *c, const char *family, const char *jkt) CS_MUST_CHECK;
/* The thumbprint family is bound to (malloc'd); CS_ENOENT when it is unbound. */
enum cs_err store_refresh_binding(struct store_conn *c, const char *family, char **jkt) CS_MUST_CHECK;

/* --- audiences of MCP clients' refresh families (migration 0021) -------- */
/* Records that family's access tokens carry aud = audience and were issued to
 * client_id; CS_EEXIST when the family has one already. */
enum cs_err store_refresh_audience_put(struct store_conn *c, const char *family,
    const char *audience, const char *client_id) CS_MUST_CHECK;
/* The audience and client of family (both malloc'd); CS_ENOENT when it has
 * none (a gateway's family).  Both written only on CS_OK. */
enum cs_err store_refresh_audience(struct store_conn *c, const char *family, char **audience,
    char **client_id) CS_MUST_CHECK;

#endif
