/* store.h -- the only door to SQL.  One SQLite file in WAL mode, one connection
 * per worker thread, migrations from migrations/ (embedded at build time) applied
 * at start, every statement prepared with bound parameters.  No SQL elsewhere. */
#ifndef CS_STORE_H
#define CS_STORE_H

#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"

struct store;        /* process-wide handle: the path and the migration state */
struct store_conn;   /* one SQLite connection; owned by one thread at a time */

/* Opens (creating if needed) the database at path, sets WAL, foreign_keys=ON,
 * busy_timeout, synchronous=FULL, and applies pending migrations, each in one
 * transaction, recording them in schema_version.  A database whose schema is
 * newer than this binary knows fails with CS_ESCHEMA (and a message on stderr). */
enum cs_err store_open(const char *path, struct store **out) CS_MUST_CHECK;
/* Closes the calling thread's connection too.  NULL-safe. */
void store_close(struct store *s);

/* The calling thread's connection, opened on first use and closed when the
 * thread exits (or at store_close for the thread that calls it).  NULL on failure. */
struct store_conn *store_conn(struct store *s);

/* The highest migration this binary knows, and the one the database has. */
int store_schema_known(void);
enum cs_err store_schema_version(struct store_conn *c, int *out) CS_MUST_CHECK;

/* A cheap "is the database there" check for /readyz. */
enum cs_err store_ping(struct store_conn *c) CS_MUST_CHECK;

/* Transactions: BEGIN IMMEDIATE / COMMIT / ROLLBACK (rollback is NULL-safe and
 * never fails loudly, for use after `out:`).  When the transaction appended
 * audit entries, store_commit calls the store's audit hook (below) after the
 * COMMIT succeeded and before it returns. */
enum cs_err store_begin(struct store_conn *c) CS_MUST_CHECK;
enum cs_err store_commit(struct store_conn *c) CS_MUST_CHECK;
void store_rollback(struct store_conn *c);

/* Called with the number and link of the last audit entry a committed
 * transaction appended.  Calls for one store come one at a time and in commit
 * order: store_commit holds one lock from its COMMIT through the call, so the
 * hook must be quick and must not commit on the store itself. */
#define STORE_AUDIT_LINK_LEN 32
typedef void (*store_audit_hook)(void *arg, int64_t seq,
    const unsigned char link[STORE_AUDIT_LINK_LEN]);
/* Installs fn (NULL removes it); the audit publisher (audit_head.c) is the one user. */
void store_set_audit_hook(struct store *s, store_audit_hook fn, void *arg);

/* --- signing keys (owned by jwt.c; stored sealed) ----------------------- */
struct store_key {               /* caller-owned; release with store_key_clear() */
	char          *kid;
	char          *alg;          /* "ES256" */
	int64_t        created_at;   /* UTC seconds */
	int64_t        sign_after;   /* signs from this time on */
	int64_t        retired_at;   /* 0 = still current; a later key replaced it */
	int64_t        revoked_at;   /* 0 = not revoked */
	char          *master_kid;   /* which master key sealed it */
	unsigned char *sealed;       /* seal.h blob of the private JWK JSON */
	size_t         sealed_len;
};
void store_key_clear(struct store_key *k);            /* NULL-safe */
void store_keys_free(struct store_key *ks, size_t n); /* NULL-safe */
enum cs_err store_key_insert(struct store_conn *c, const struct store_key *k) CS_MUST_CHECK;
/* Every key not revoked, oldest first.  *out is NULL and *n 0 when none. */
enum cs_err store_keys_list(struct store_conn *c, struct store_key **out, size_t *n) CS_MUST_CHECK;
enum cs_err store_key_set_retired(struct store_conn *c, const char *kid, int64_t at) CS_MUST_CHECK;
enum cs_err store_key_set_revoked(struct store_conn *c, const char *kid, int64_t at) CS_MUST_CHECK;

/* --- users, sessions, login states (flow E) ---------------------------- */
/* Inserts or updates the user (issuer, subject); *id is the user's row id. */
enum cs_err store_user_upsert(struct store_conn *c, const char *issuer, const char *subject,
    const char *name, const char *email, int64_t now, int64_t *id) CS_MUST_CHECK;

struct store_session {           /* caller-owned; release with store_session_clear() */
	int64_t user_id;
	char   *issuer, *subject, *name, *email;
	char    csrf[44];
	int64_t created_at, last_seen_at, auth_time;
	int     admin_claim;
};
void store_session_clear(struct store_session *s);    /* NULL-safe; wipes */
enum cs_err store_session_insert(struct store_conn *c, const unsigned char id_hash[32],
    int64_t user_id, const char *csrf, int64_t now, int64_t auth_time, int admin_claim) CS_MUST_CHECK;
/* CS_ENOENT when no session has this hash. */
enum cs_err store_session_get(struct store_conn *c, const unsigned char id_hash[32],
    struct store_session *out) CS_MUST_CHECK;
enum cs_err store_session_touch(struct store_conn *c, const unsigned char id_hash[32],
    int64_t now) CS_MUST_CHECK;
enum cs_err store_session_delete(struct store_conn *c, const unsigned char id_hash[32]) CS_MUST_CHECK;

struct store_login_state {       /* release with store_login_state_clear() when read */
	unsigned char state_hash[32];
	unsigned char browser_hash[32];
	unsigned char addr_hash[32];     /* the client address it came from (login_client_key) */
	char   *nonce, *code_verifier, *return_to;
	int64_t max_age;             /* -1 when none was asked */
	int64_t created_at, expires_at;
};
void store_login_state_clear(struct store_login_state *s);   /* NULL-safe; wipes */
enum cs_err store_login_state_insert(struct store_conn *c,
    const struct store_login_state *s) CS_MUST_CHECK;

/* What store_login_state_admit did. */
enum store_login_admit {
	STORE_LOGIN_ADMITTED = 0,    /* inserted */
	STORE_LOGIN_ADDRESS_FULL,    /* its address already holds per_address live states */
	STORE_LOGIN_ALL_FULL,        /* all addresses together hold total live states */
	STORE_LOGIN_ADMIT__MAX
};
struct store_login_limits {
	int64_t now;                 /* a state is live while its expires_at > now */
	int64_t per_address, total;  /* each at least 1 */
	/* The browser_hash of the browser's earlier login (its login cookie), or
	 * NULL: those states can no longer finish (the new cookie replaces theirs),
	 * so they are deleted with the insert and do not count. */
	const unsigned char *replaces;
};
/* Inserts s unless s->addr_hash already holds lim->per_address live states or
 * all addresses together hold lim->total; the check and the insert share one
 * IMMEDIATE transaction (never call it inside one).  Expired states never count.
 * A refused state writes nothing.  On CS_OK *out says which, and *free_at is,
 * when refused, the expiry of the soonest of the states that filled the limit
 * (a place frees then), 0 when admitted. */
enum cs_err store_login_state_admit(struct store_conn *c, const struct store_login_state *s,
    const struct store_login_limits *lim, enum store_login_admit *out,
    int64_t *free_at) CS_MUST_CHECK;
/* Reads and deletes (single use) the state with this hash; CS_ENOENT if none. */
enum cs_err store_login_state_take(struct store_conn *c, const unsigned char state_hash[32],
    struct store_login_state *out) CS_MUST_CHECK;
/* Deletes expired login states and sessions idle or older than the limits. */
enum cs_err store_purge_expired(struct store_conn *c, int64_t now, int64_t idle,
    int64_t absolute) CS_MUST_CHECK;

#endif
