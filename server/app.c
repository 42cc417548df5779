/* app.c -- process-wide state shared by worker threads: config, store,
 * master key, keyring.  The keyring pointer is swapped only under the write
 * lock; readers hold the read lock for as long as they use it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "app.h"

int64_t app_now(void)
{
	return (int64_t)time(NULL);
}

enum cs_err app_init(struct app *app, const struct config *cfg)
{
	enum cs_err e;
	struct store_conn *c;
	memset(app, 0, sizeof *app);
	app->cfg = cfg;
	if (pthread_rwlock_init(&app->keys_lock, NULL) != 0)
		return CS_ENOMEM;
	e = master_key_load(cfg->master_key_file, cfg->master_key_b64, &app->mk);
	if (e != CS_OK) {
		fprintf(stderr, "consentd: master key (%s or CONSENTD_KEYS_MASTER_KEY): %s\n",
		    cfg->master_key_file, cs_strerror(e));
		goto fail;
	}
	e = store_open(cfg->db_path, &app->store);
	if (e != CS_OK) {
		fprintf(stderr, "consentd: database %s: %s\n", cfg->db_path, cs_strerror(e));
		goto fail;
	}
	c = store_conn(app->store);
	if (c == NULL) {
		e = CS_EDB;
		goto fail;
	}
	e = keyring_load(c, &app->mk, app_now(), &app->keys);
	if (e != CS_OK) {
		fprintf(stderr, "consentd: signing keys: %s\n", cs_strerror(e));
		goto fail;
	}
	return CS_OK;
fail:
	app_clear(app);
	return e;
}

void app_clear(struct app *app)
{
	if (app == NULL)
		return;
	keyring_free(app->keys);
	app->keys = NULL;
	store_close(app->store);
	app->store = NULL;
	master_key_clear(&app->mk);
	pthread_rwlock_destroy(&app->keys_lock);
}

enum cs_err app_reload_keys(struct app *app, int64_t now)
{
	struct keyring *kr = NULL, *old;
	struct store_conn *c = store_conn(app->store);
	enum cs_err e;
	if (c == NULL)
		return CS_EDB;
	e = keyring_load(c, &app->mk, now, &kr);
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
