/* app.c -- process-wide state shared by worker threads: config, store,
 * master key, keyring.  The keyring pointer is swapped only under the write
 * lock; readers hold the read lock for as long as they use it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <openssl/crypto.h>
#include "app.h"
#include "buf.h"
#include "audit.h"
#include "audit_head.h"
#include "events.h"
#include "janitor.h"
#include "log.h"
#include "store_session.h"

int64_t app_now(void)
{
	return (int64_t)time(NULL);
}

const char *app_db_name(const struct config *cfg)
{
	return cfg->db_url != NULL ? cfg->db_url : cfg->db_path;
}

enum cs_err app_store_open(const struct config *cfg, enum store_schema_policy pol,
    struct store **out)
{
	const struct store_opts o = { .password = cfg->db_password, .unprepared = !cfg->db_prepared,
	    .schema = pol };
	return store_open_with(app_db_name(cfg), &o, out);
}

enum cs_err app_init(struct app *app, const struct config *cfg)
{
	enum cs_err e;
	struct store_conn *c;
	memset(app, 0, sizeof *app);
	app->cfg = cfg;
	if (pthread_rwlock_init(&app->keys_lock, NULL) != 0)
		return CS_ENOMEM;
	pthread_mutex_init(&app->stop_lock, NULL);
	pthread_cond_init(&app->stop_cond, NULL);
	e = oidc_provider_new(cfg->oidc_issuer, cfg->oidc_clock_skew, &app->idp);
	if (e != CS_OK)
		goto fail;
	e = master_key_load(cfg->master_key_file, cfg->master_key_b64, &app->mk);
	if (e != CS_OK) {
		log_msg(LOG_ERROR, "master key (%s or CONSENTD_KEYS_MASTER_KEY): %s",
		    cfg->master_key_file, cs_strerror(e));
		goto fail;
	}
	/* DPoP nonces are an HMAC under a key every node derives alike. */
	if ((e = seal_derive_key(&app->mk, "dpop-nonce", app->dpop_nonce_key)) != CS_OK)
		goto fail;
	/* The audit chain's key comes from the master key; without it no entry is written. */
	if ((e = audit_set_master_key(&app->mk)) != CS_OK)
		goto fail;
	e = app_store_open(cfg, STORE_SCHEMA_WAIT, &app->store);
	if (e != CS_OK) {
		log_msg(LOG_ERROR, "database %s: %s", app_db_name(cfg), cs_strerror(e));
		goto fail;
	}
	store_set_write_queue(app->store, cfg->db_write_queue);
	c = store_conn(app->store);
	if (c == NULL) {
		e = CS_EDB;
		goto fail;
	}
	/* From here on every commit that appends audit entries publishes its
	 * head; the first check runs before any thread can commit, so a database
	 * behind head_file is served unready from the start. */
	if ((e = audit_publish_open(app->store, cfg->audit_head_file, NULL)) != CS_OK)
		goto fail;
	app->publishing = 1;
	if ((e = audit_publish_check(c, 1, NULL)) != CS_OK)
		goto fail;
	/* Many nodes (PostgreSQL): this process's audit chain opens now, naming
	 * the other chains' heads.  Should it fail, the first append opens it. */
	if ((e = audit_chain_open(c, (int64_t)time(NULL))) != CS_OK)
		log_msg(LOG_WARN, "audit: opening this process's chain: %s; the first entry will",
		    cs_strerror(e));
	e = vault_new(cfg, &app->mk, &app->vault);
	if (e != CS_OK) {
		log_msg(LOG_ERROR, "token vault: %s", cs_strerror(e));
		goto fail;
	}
	if ((e = client_keys_new(cfg, &app->gateway_keys)) != CS_OK)
		goto fail;
	if ((app->limits = rate_limits_new(cfg)) == NULL ||
	    (app->auth_refusals = auth_refusals_new()) == NULL) {
		e = CS_ENOMEM;
		log_msg(LOG_ERROR, "[limits]: %s", cs_strerror(e));
		goto fail;
	}
	if (cfg->mcp_cimd_allow != CIMD_ALLOW_NONE &&
	    (e = cimd_cache_new(&(struct cimd_cache_opts){
	    .max_entries = (size_t)cfg->mcp_cimd_cache_entries,
	    .min_ttl = cfg->mcp_cimd_cache_min_ttl, .default_ttl = cfg->mcp_cimd_cache_default_ttl,
	    .max_ttl = cfg->mcp_cimd_cache_max_ttl, .failure_ttl = cfg->mcp_cimd_failure_ttl },
	    &app->cimd)) != CS_OK) {
		log_msg(LOG_ERROR, "[mcp] client metadata cache: %s", cs_strerror(e));
		goto fail;
	}
	e = keyring_load(c, &app->mk, app_now(), cfg->grant_ttl, &app->keys);
	if (e != CS_OK) {
		log_msg(LOG_ERROR, "signing keys: %s", cs_strerror(e));
		goto fail;
	}
	return CS_OK;
fail:
	app_clear(app);
	return e;
}

/* Joins a thread that was started, once. */
static void join_started(pthread_t thread, int *started)
{
	if (*started) {
		pthread_join(thread, NULL);
		*started = 0;
	}
}

void app_clear(struct app *app)
{
	if (app == NULL)
		return;
	pthread_mutex_lock(&app->stop_lock);
	app->stopping = 1;
	pthread_cond_broadcast(&app->stop_cond);
	pthread_mutex_unlock(&app->stop_lock);
	join_started(app->discovery_thread, &app->discovery_started);
	join_started(app->maintenance_thread, &app->maintenance_started);
	join_started(app->janitor_thread, &app->janitor_started);
	/* Everything still queued is written before the store closes. */
	FREE_TO_NULL(audit_queue_free, app->audit_queue);
	FREE_TO_NULL(vault_free, app->vault);
	FREE_TO_NULL(client_keys_free, app->gateway_keys);
	FREE_TO_NULL(rate_limits_free, app->limits);
	FREE_TO_NULL(cimd_cache_free, app->cimd);
	FREE_TO_NULL(auth_refusals_free, app->auth_refusals);
	OPENSSL_cleanse(app->dpop_nonce_key, sizeof app->dpop_nonce_key);
	FREE_TO_NULL(oidc_provider_free, app->idp);
	FREE_TO_NULL(keyring_free, app->keys);
	if (app->publishing)
		audit_publish_close(app->store);
	app->publishing = 0;
	FREE_TO_NULL(store_close, app->store);
	master_key_clear(&app->mk);
	audit_clear_key();
	pthread_rwlock_destroy(&app->keys_lock);
	pthread_mutex_destroy(&app->stop_lock);
	pthread_cond_destroy(&app->stop_cond);
}

/* Sleeps up to seconds; returns 1 when the app is stopping. */
static int app_wait(struct app *app, int seconds)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += seconds;
	pthread_mutex_lock(&app->stop_lock);
	while (!app->stopping &&
	    pthread_cond_timedwait(&app->stop_cond, &app->stop_lock, &until) == 0)
		;
	int stop = app->stopping;
	pthread_mutex_unlock(&app->stop_lock);
	return stop;
}

static void *discovery_main(void *arg)
{
	struct app *app = arg;
	int delay = 1;
	for (;;) {
		if (oidc_discover(app->idp) == CS_OK) {
			const struct oidc_meta *m = oidc_meta(app->idp);
			log_msg(app_idp_ready(app) ? LOG_INFO : LOG_WARN, "upstream IdP %s discovered%s",
			    m->issuer,
			    app_idp_ready(app) ? "" : " but it offers no public subject identifiers "
			    "(subject_claim = sub needs them): not ready");
			return NULL;
		}
		log_msg(LOG_WARN, "upstream IdP %s not reachable yet; retrying in %d s",
		    app->cfg->oidc_issuer, delay);
		if (app_wait(app, delay))
			return NULL;
		if (delay < 30)
			delay *= 2;
	}
}

#define MAINTENANCE_SECONDS 2

static void *maintenance_main(void *arg)
{
	struct app *app = arg;
	const struct config *cfg = app->cfg;
	while (!app_wait(app, MAINTENANCE_SECONDS)) {
		struct store_conn *c = store_conn(app->store);
		int finished = 0;
		if (c == NULL)
			continue;
		/* The provider is never called inside a transaction: the outbox pass
		 * takes care of that itself. */
		if (vault_outbox_run(app->vault, c, app_now(), &finished) != CS_OK)
			log_msg(LOG_WARN, "revocation outbox pass failed; will retry");
		/* proactive_refresh: offline consents' tokens renewed before they
		 * expire, and a connection the provider ended found before an agent
		 * call does (outside any transaction, as the outbox). */
		if (vault_refresh_ahead(app->vault, c, app_now(), &finished) != CS_OK)
			log_msg(LOG_WARN, "refresh-ahead pass failed; will retry");
		/* Revocation events (events.h): signed under the read lock, which
		 * only holds off a key reload, never another reader. */
		if (cfg->events_uri != NULL) {
			int delivered = 0;
			const struct keyring *kr = app_keys_get(app);
			enum cs_err ee = events_push_run(c, cfg, kr, app_now(), &delivered);
			app_keys_put(app);
			if (ee != CS_OK)
				log_msg(LOG_WARN, "revocation event pass failed (%s); will retry",
				    cs_strerror(ee));
		}
		if (store_purge_expired(c, app_now(), cfg->session_idle_timeout,
		    cfg->session_absolute_timeout) != CS_OK)
			log_msg(LOG_WARN, "purging expired sessions failed; will retry");
	}
	return NULL;
}

enum cs_err app_start_maintenance(struct app *app)
{
	enum cs_err e;
	const struct audit_queue_opts qo = { .interval_ms = (int)app->cfg->audit_batch_interval_ms };
	if ((e = audit_queue_new(app->store, &qo, &app->audit_queue)) != CS_OK ||
	    (e = audit_queue_start(app->audit_queue)) != CS_OK)
		return e;
	if (pthread_create(&app->maintenance_thread, NULL, maintenance_main, app) != 0)
		return CS_ENOMEM;
	app->maintenance_started = 1;
	return CS_OK;
}

/* The janitor's own thread, so that a long pass never delays the outbox
 * and event deliveries of the maintenance thread. */
static void *janitor_main(void *arg)
{
	struct app *app = arg;
	const struct config *cfg = app->cfg;
	while (!app_wait(app, (int)cfg->retention_interval)) {
		struct store_conn *c = store_conn(app->store);
		enum cs_err e;
		if (c == NULL)
			continue;
		if ((e = janitor_run(c, cfg, app_now(), NULL)) != CS_OK)
			log_msg(LOG_WARN, "janitor pass failed (%s); will retry", cs_strerror(e));
	}
	return NULL;
}

enum cs_err app_start_janitor(struct app *app)
{
	if (!app->cfg->retention_enabled)
		return CS_OK;
	if (pthread_create(&app->janitor_thread, NULL, janitor_main, app) != 0)
		return CS_ENOMEM;
	app->janitor_started = 1;
	return CS_OK;
}

enum cs_err app_start_discovery(struct app *app)
{
	if (pthread_create(&app->discovery_thread, NULL, discovery_main, app) != 0)
		return CS_ENOMEM;
	app->discovery_started = 1;
	return CS_OK;
}

int app_idp_ready(struct app *app)
{
	const struct oidc_meta *m = oidc_meta(app->idp);
	if (m == NULL)
		return 0;
	if (strcmp(app->cfg->oidc_subject_claim, "sub") == 0 && !m->public_subjects)
		return 0;
	return 1;
}

enum cs_err app_reload_keys(struct app *app, int64_t now)
{
	struct keyring *kr = NULL, *old;
	struct store_conn *c = store_conn(app->store);
	enum cs_err e;
	if (c == NULL)
		return CS_EDB;
	e = keyring_load(c, &app->mk, now, app->cfg->grant_ttl, &kr);
	if (e != CS_OK)
		return e;
	pthread_rwlock_wrlock(&app->keys_lock);
	old = app->keys;
	app->keys = kr;
	pthread_rwlock_unlock(&app->keys_lock);
	keyring_free(old);
	return CS_OK;
}

const struct keyring *app_keys_get(struct app *app)
{
	pthread_rwlock_rdlock(&app->keys_lock);
	return app->keys;
}

void app_keys_put(struct app *app)
{
	pthread_rwlock_unlock(&app->keys_lock);
}
