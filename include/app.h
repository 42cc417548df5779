/* app.h -- the state one running consentd shares between its worker threads:
 * the immutable configuration, the store, the master key and the current
 * keyring (swapped under a lock when keys are reloaded). */
#ifndef CS_APP_H
#define CS_APP_H

#include <pthread.h>
#include <stdint.h>
#include "config.h"
#include "seal.h"
#include "store.h"
#include "jwt.h"
#include "oidc.h"
#include "vault.h"
#include "client_keys.h"
#include "rate_limits.h"
#include "auth_refusal.h"
#include "audit_queue.h"

struct app {
	const struct config *cfg;
	struct store        *store;
	int                  publishing;   /* audit heads published (audit_publish_open) */
	struct master_key    mk;
	pthread_rwlock_t     keys_lock;
	struct keyring      *keys;     /* read under keys_lock */
	struct oidc_provider *idp;     /* the upstream IdP; discovered in the background */
	pthread_t            discovery_thread;
	int                  discovery_started;
	struct vault        *vault;        /* downstream providers and sealed tokens */
	struct client_keys  *gateway_keys; /* the gateway's public keys; NULL without private_key_jwt */
	struct rate_limits  *limits;       /* [limits]; NULL (as in unit tests): nothing is limited */
	struct auth_refusals *auth_refusals; /* refused gateway authentications' audit summary;
	                                    * NULL (unit tests): each refusal is audited */
	struct cimd_cache   *cimd;         /* client-id URLs' documents (mcp_client.h); NULL:
	                                    * [mcp] cimd_allow = none */
	unsigned char        dpop_nonce_key[32];   /* derived from the master key ("dpop-nonce") */
	struct audit_queue  *audit_queue;  /* entries that follow a durable one (an MCP call's
	                                    * answer); NULL until app_start_maintenance: written
	                                    * synchronously */
	pthread_t            maintenance_thread;
	int                  maintenance_started;
	pthread_t            janitor_thread;
	int                  janitor_started;
	pthread_mutex_t      stop_lock;
	pthread_cond_t       stop_cond;
	int                  stopping;
};

/* Starts the thread that runs upstream discovery until it succeeds (retrying
 * with backoff, so consentd starts even while its IdP is down). */
enum cs_err app_start_discovery(struct app *app) CS_MUST_CHECK;
/* Starts the thread that, every few seconds, works the revocation outbox and
 * purges expired sessions and login states, and the audit queue's writer
 * (audit_queue.h; stopped, with everything queued written, by
 * audit_queue_stop after the last request, or app_clear). */
enum cs_err app_start_maintenance(struct app *app) CS_MUST_CHECK;
/* Starts the janitor's thread (janitor.h), a pass every [retention] interval
 * seconds; does nothing when [retention] enabled = false. */
enum cs_err app_start_janitor(struct app *app) CS_MUST_CHECK;

/* 1 when the upstream IdP is usable for login: discovered, and offering public
 * subject identifiers when subject_claim = sub. */
int app_idp_ready(struct app *app);

/* Opens the store [database] names (the SQLite path or the PostgreSQL URL,
 * with its password and statement mode) under policy pol (store.h). */
enum cs_err app_store_open(const struct config *cfg, enum store_schema_policy pol,
    struct store **out) CS_MUST_CHECK;
/* What [database] names, for messages: the path or the URL (no password in it). */
const char *app_db_name(const struct config *cfg);

/* Loads config-dependent state: opens the store (migrating it), loads the
 * master key and the keyring (generating the first signing key).  Messages
 * for the operator go to stderr.  *app is filled only on CS_OK. */
enum cs_err app_init(struct app *app, const struct config *cfg) CS_MUST_CHECK;
void app_clear(struct app *app);

/* Reloads the keyring from the store (SIGHUP and every 60 s). */
enum cs_err app_reload_keys(struct app *app, int64_t now) CS_MUST_CHECK;

/* Holds the keyring for reading; every app_keys_get is paired with app_keys_put. */
const struct keyring *app_keys_get(struct app *app);
void app_keys_put(struct app *app);

/* Current UTC time in seconds. */
int64_t app_now(void);

#endif
