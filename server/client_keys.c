/* client_keys.c -- a client's public keys at run time (for private_key_jwt,
 * RFC 7523): the JWK Set read at start, or the one at a jwks_uri, fetched on
 * first use and again when an assertion names a kid the cached set lacks, at
 * most once per CLIENT_KEYS_REFETCH seconds.  A set replaced while a thread
 * verifies with it stays alive until that thread releases it.  Knows no HTTP
 * server and no app. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "client_keys.h"
#include "config.h"
#include "httpc.h"
#include "jws.h"
#include "log.h"
#include "metrics.h"
#include "mono.h"

/* One key set, shared by reference count under the mutex. */
struct client_keyset {
	unsigned           refs;
	struct jws_keyset *ks;
};

struct client_keys {
	pthread_mutex_t    mu;            /* guards cur, refs, fetched_at, fetched */
	struct client_keyset *cur;           /* NULL until a set was loaded */
	char              *uri;           /* NULL: the file's set, never refetched */
	int64_t            fetched_at;    /* monotonic seconds of the last fetch attempt */
	bool               fetched;
};

static void set_unref_locked(struct client_keyset *s)
{
	if (s != NULL && --s->refs == 0) {
		jws_keyset_free(s->ks);
		free(s);
	}
}

static enum cs_err set_install(struct client_keys *k, struct jws_keyset *ks)
{
	struct client_keyset *s = calloc(1, sizeof *s);
	if (s == NULL) {
		jws_keyset_free(ks);
		return CS_ENOMEM;
	}
	s->refs = 1;
	s->ks = ks;
	pthread_mutex_lock(&k->mu);
	set_unref_locked(k->cur);
	k->cur = s;
	pthread_mutex_unlock(&k->mu);
	return CS_OK;
}

enum cs_err client_keys_new(const struct config *cfg, struct client_keys **out)
{
	struct client_keys *k;
	struct jws_keyset *ks = NULL;
	char why[160];
	enum cs_err e;
	*out = NULL;
	if (!cfg->gateway_auth_private_key_jwt)
		return CS_OK;
	if ((k = calloc(1, sizeof *k)) == NULL)
		return CS_ENOMEM;
	pthread_mutex_init(&k->mu, NULL);
	if (cfg->gateway_jwks_uri != NULL && (k->uri = strdup(cfg->gateway_jwks_uri)) == NULL) {
		client_keys_free(k);
		return CS_ENOMEM;
	}
	if (cfg->gateway_jwks_json != NULL) {
		if ((e = jws_keyset_parse(cfg->gateway_jwks_json, &ks, why, sizeof why)) != CS_OK ||
		    (e = set_install(k, ks)) != CS_OK) {
			log_msg(LOG_ERROR, "[gateway] jwks_file: %s", e == CS_EINVAL ? why :
			    cs_strerror(e));
			client_keys_free(k);
			return e;
		}
	}
	*out = k;
	return CS_OK;
}

void client_keys_free(struct client_keys *k)
{
	if (k == NULL)
		return;
	set_unref_locked(k->cur);
	free(k->uri);
	pthread_mutex_destroy(&k->mu);
	free(k);
}

static struct client_keyset *set_get(struct client_keys *k)
{
	pthread_mutex_lock(&k->mu);
	struct client_keyset *s = k->cur;
	if (s != NULL)
		s->refs++;
	pthread_mutex_unlock(&k->mu);
	return s;
}

static void set_put(struct client_keys *k, struct client_keyset *s)
{
	pthread_mutex_lock(&k->mu);
	set_unref_locked(s);
	pthread_mutex_unlock(&k->mu);
}

/* Fetches jwks_uri again unless that was tried less than CLIENT_KEYS_REFETCH
 * seconds ago; a set that does not parse leaves the cached one in place. */
static void keys_refetch(struct client_keys *k)
{
	struct httpc_response res;
	struct jws_keyset *ks = NULL;
	char why[160];
	int64_t now = mono_now();
	if (k->uri == NULL)
		return;
	pthread_mutex_lock(&k->mu);
	/* SECURITY: an attacker naming unknown kids cannot make consentd fetch
	 * more than once a minute. */
	bool due = !k->fetched || now - k->fetched_at >= CLIENT_KEYS_REFETCH;
	if (due) {
		k->fetched = true;
		k->fetched_at = now;
	}
	pthread_mutex_unlock(&k->mu);
	if (!due)
		return;
	if (httpc_get(k->uri, &res) != CS_OK) {
		metrics_inc(M_FETCH_ERRORS, "gateway_jwks");
		return;
	}
	if (res.status == 200 && res.body.data != NULL &&
	    jws_keyset_parse(res.body.data, &ks, why, sizeof why) == CS_OK) {
		(void)set_install(k, ks);
	} else {
		metrics_inc(M_FETCH_ERRORS, "gateway_jwks");
		log_msg(LOG_WARN, "[gateway] jwks_uri: status %ld: %s", res.status,
		    res.status == 200 ? why : "not fetched");
	}
	httpc_response_clear(&res);
}

/* The kid an assertion's header names; NULL when none (or not a JWS). */
static char *assertion_kid(const char *compact)
{
	struct jws_parsed p;
	char why[96], *kid = NULL;
	if (jws_parse(compact, JWS_ALGS_CLIENT_ASSERTION, &p, why, sizeof why) != CS_OK)
		return NULL;
	const char *v = json_string_value(json_object_get(p.header, "kid"));
	if (v != NULL)
		kid = strdup(v);
	jws_parsed_clear(&p);
	return kid;
}

static bool set_has_kid(const struct client_keyset *s, const char *kid)
{
	for (size_t i = 0; s != NULL && i < s->ks->n; i++)
		if (s->ks->keys[i]->kid != NULL && strcmp(s->ks->keys[i]->kid, kid) == 0)
			return true;
	return false;
}

struct client_keyset *client_keys_acquire(struct client_keys *k, const char *compact)
{
	if (k == NULL)
		return NULL;
	/* A kid the cached set lacks may be a key the client just added. */
	struct client_keyset *set = set_get(k);
	char *kid = set == NULL ? NULL : assertion_kid(compact);
	if (set == NULL || (kid != NULL && !set_has_kid(set, kid))) {
		set_put(k, set);
		keys_refetch(k);
		set = set_get(k);
	}
	free(kid);
	return set;
}

const struct jws_keyset *client_keyset_keys(const struct client_keyset *s)
{
	return s != NULL ? s->ks : NULL;
}

void client_keys_release(struct client_keys *k, struct client_keyset *s)
{
	if (k != NULL && s != NULL)
		set_put(k, s);
}
