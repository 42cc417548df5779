/* client_keys.h -- a client's public keys at run time (client_keys.c): the
 * gateway's today ([gateway] jwks_file or jwks_uri). */
#ifndef CS_CLIENT_KEYS_H
#define CS_CLIENT_KEYS_H
#include "cs_err.h"

struct config;
struct jws_keyset;

/* The jwks_file read at start, or the JWKS at jwks_uri, fetched on first use
 * and again when an assertion names a kid the cached set lacks, at most once
 * per CLIENT_KEYS_REFETCH seconds (a set replaced while a thread verifies
 * with it stays alive until it is done). */
#define CLIENT_KEYS_REFETCH 60
struct client_keys;
/* *out NULL (and CS_OK) when private_key_jwt is off. */
enum cs_err client_keys_new(const struct config *cfg, struct client_keys **out) CS_MUST_CHECK;
void client_keys_free(struct client_keys *k);    /* NULL-safe */

/* The set to verify the compact JWS with: the cached one, fetched again
 * first when none is loaded or compact names a kid it lacks.  NULL: no keys
 * (k NULL, or nothing could be loaded).  Hand it back with
 * client_keys_release. */
struct client_keyset;
struct client_keyset *client_keys_acquire(struct client_keys *k, const char *compact);
const struct jws_keyset *client_keyset_keys(const struct client_keyset *s);   /* NULL-safe */
void client_keys_release(struct client_keys *k, struct client_keyset *s);    /* NULL-safe */

#endif
