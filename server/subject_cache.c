/* subject_cache.c -- the bounded cache of verified subject tokens (see
 * subject_cache.h): a set-associative table under one mutex.  It must never
 * hold a token, hand out an entry past its expires_at or from another key set
 * generation, or grow beyond its capacity. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "subject_cache.h"

struct entry {
	unsigned char digest[SUBJECT_CACHE_DIGEST];
	json_t       *claims;         /* NULL: the slot is empty */
	int64_t       expires_at;     /* UTC seconds; the entry is gone from then on */
	uint64_t      used;           /* tick of the last put or hit, for LRU in the set */
};

struct subject_cache {
	pthread_mutex_t mu;           /* guards everything below */
	EVP_MD         *sha256;       /* fetched once: no implicit fetch per token */
	struct entry   *e;
	size_t          nsets;        /* capacity / SUBJECT_CACHE_WAYS */
	size_t          count;
	uint64_t        gen;          /* the key set generation entries belong to */
	uint64_t        tick;
};

enum cs_err subject_cache_new(size_t capacity, struct subject_cache **out)
{
	struct subject_cache *c = NULL;

	if (out == NULL || capacity < SUBJECT_CACHE_WAYS || capacity % SUBJECT_CACHE_WAYS != 0 ||
	    capacity > SIZE_MAX / sizeof(struct entry))
		return CS_EINVAL;
	if ((c = calloc(1, sizeof *c)) == NULL)
		return CS_ENOMEM;
	if ((c->e = calloc(capacity, sizeof *c->e)) == NULL) {
		free(c);
		return CS_ENOMEM;
	}
	if ((c->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL)) == NULL) {
		free(c->e);
		free(c);
		return CS_ECRYPTO;
	}
	c->nsets = capacity / SUBJECT_CACHE_WAYS;
	pthread_mutex_init(&c->mu, NULL);
	*out = c;
	return CS_OK;
}

static void entry_drop_locked(struct subject_cache *c, struct entry *x)
{
	if (x->claims == NULL)
		return;
	json_decref(x->claims);
	OPENSSL_cleanse(x->digest, sizeof x->digest);
	x->claims = NULL;
	x->expires_at = 0;
	x->used = 0;
	c->count--;
}

static void drop_all_locked(struct subject_cache *c)
{
	for (size_t i = 0; i < c->nsets * SUBJECT_CACHE_WAYS; i++)
		entry_drop_locked(c, &c->e[i]);
}

void subject_cache_free(struct subject_cache *c)
{
	if (c == NULL)
		return;
	drop_all_locked(c);
	EVP_MD_free(c->sha256);
	pthread_mutex_destroy(&c->mu);
	free(c->e);
	free(c);
}

enum cs_err subject_cache_digest(const struct subject_cache *c, const char *token, size_t len,
    unsigned char out[SUBJECT_CACHE_DIGEST])
{
	unsigned int n = 0;
	if (c == NULL || token == NULL || out == NULL)
		return CS_EINVAL;
	if (EVP_Digest(token, len, out, &n, c->sha256, NULL) != 1 || n != SUBJECT_CACHE_DIGEST)
		return CS_ECRYPTO;
	return CS_OK;
}

/* The first way of digest's set.  The digest is SHA-256 of a token whose
 * signature verified, so its bits are as good as random: nobody can crowd a
 * set without the IdP signing tokens for them. */
static struct entry *set_of(struct subject_cache *c, const unsigned char *digest)
{
	uint64_t h;
	memcpy(&h, digest, sizeof h);
	return &c->e[(size_t)(h % c->nsets) * SUBJECT_CACHE_WAYS];
}

static struct entry *find_locked(struct subject_cache *c, const unsigned char *digest)
{
	struct entry *set = set_of(c, digest);
	for (size_t i = 0; i < SUBJECT_CACHE_WAYS; i++)
		if (set[i].claims != NULL &&
		    CRYPTO_memcmp(set[i].digest, digest, SUBJECT_CACHE_DIGEST) == 0)
			return &set[i];
	return NULL;
}

/* Moves the cache to gen when gen is newer; false when gen is older (the
 * caller verified with a key set that has been replaced since). */
static bool gen_accept_locked(struct subject_cache *c, uint64_t gen)
{
	if (gen < c->gen)
		return false;
	if (gen > c->gen) {
		drop_all_locked(c);
		c->gen = gen;
	}
	return true;
}

bool subject_cache_get(struct subject_cache *c, const unsigned char digest[SUBJECT_CACHE_DIGEST],
    uint64_t gen, int64_t now, json_t **claims)
{
	bool hit = false;
	if (c == NULL || digest == NULL || claims == NULL)
		return false;
	pthread_mutex_lock(&c->mu);
	if (!gen_accept_locked(c, gen))
		goto out;
	struct entry *x = find_locked(c, digest);
	if (x == NULL)
		goto out;
	/* SECURITY: never past the token's exp, whatever the caller does next. */
	if (now >= x->expires_at) {
		entry_drop_locked(c, x);
		goto out;
	}
	x->used = ++c->tick;
	*claims = json_incref(x->claims);
	hit = true;
out:
	pthread_mutex_unlock(&c->mu);
	return hit;
}

void subject_cache_put(struct subject_cache *c, const unsigned char digest[SUBJECT_CACHE_DIGEST],
    uint64_t gen, int64_t now, int64_t expires_at, json_t *claims)
{
	if (c == NULL || digest == NULL || !json_is_object(claims) || expires_at <= now)
		return;
	pthread_mutex_lock(&c->mu);
	if (!gen_accept_locked(c, gen))
		goto out;
	struct entry *x = find_locked(c, digest);
	if (x == NULL) {
		/* An empty way, else one whose time is up, else the least recently used. */
		struct entry *set = set_of(c, digest);
		x = &set[0];
		for (size_t i = 0; i < SUBJECT_CACHE_WAYS; i++) {
			struct entry *w = &set[i];
			if (w->claims == NULL) {
				x = w;
				break;
			}
			if (now >= w->expires_at)
				x = w;
			else if (x->claims != NULL && now < x->expires_at && w->used < x->used)
				x = w;
		}
		entry_drop_locked(c, x);
		memcpy(x->digest, digest, SUBJECT_CACHE_DIGEST);
	} else {
		json_decref(x->claims);
		c->count--;
	}
	x->claims = json_incref(claims);
	x->expires_at = expires_at;
	x->used = ++c->tick;
	c->count++;
out:
	pthread_mutex_unlock(&c->mu);
}

void subject_cache_advance(struct subject_cache *c, uint64_t gen)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	(void)gen_accept_locked(c, gen);
	pthread_mutex_unlock(&c->mu);
}

size_t subject_cache_count(struct subject_cache *c)
{
	if (c == NULL)
		return 0;
	pthread_mutex_lock(&c->mu);
	size_t n = c->count;
	pthread_mutex_unlock(&c->mu);
	return n;
}
