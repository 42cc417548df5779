/* grant_cache.c -- the verified-grant cache: SHA-256 of a grant -> the claims
 * its signature vouched for, the key set it verified under and its exp.  It
 * must never store a token, never answer for another key set or past exp,
 * and never stand for liveness: grant.c checks times and the database on
 * every hit exactly as on a miss. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "grant_cache.h"
#include "seal.h"

#define GC_WAYS 16
#define GC_SETS (GRANT_CACHE_CAPACITY / GC_WAYS)
#define GC_DIGEST_LEN 32
/* Claims longer than this are not remembered (ours are well under 1 KiB). */
#define GC_MAX_CLAIMS 4096

/* One remembered verification.  claims == NULL: the way is free. */
struct gc_entry {
	unsigned char digest[GC_DIGEST_LEN];   /* SHA-256 of the token */
	unsigned char fp[KEYRING_FP_LEN];      /* the key set it verified under */
	int64_t       exp;                     /* the grant's exp */
	char         *claims;                  /* the verified payload, compact JSON */
	size_t        len;
};

/* Readers share a set (json_loadb only reads the text); put and clear
 * take it alone. */
struct gc_set {
	pthread_rwlock_t lock;
	struct gc_entry  way[GC_WAYS];
};

static struct gc_set sets[GC_SETS];
static pthread_once_t sets_once = PTHREAD_ONCE_INIT;
static atomic_uint_least64_t n_hits, n_misses;

_Static_assert(GC_SETS * GC_WAYS == GRANT_CACHE_CAPACITY, "capacity is sets x ways");

static void sets_init(void)
{
	for (size_t i = 0; i < GC_SETS; i++)
		if (pthread_rwlock_init(&sets[i].lock, NULL) != 0)
			abort();   /* cannot happen with default attributes */
}

/* The token's digest and its set.  false for a token we do not digest. */
static bool locate(const char *token, unsigned char d[GC_DIGEST_LEN], struct gc_set **s)
{
	if (token == NULL || !sha256_bytes(token, strlen(token), d))
		return false;
	pthread_once(&sets_once, sets_init);
	uint32_t h = (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 |
	    (uint32_t)d[3] << 24;
	*s = &sets[h % GC_SETS];
	return true;
}

static void entry_drop(struct gc_entry *x)
{
	free(x->claims);
	memset(x, 0, sizeof *x);
}

enum cs_err grant_cache_get(const struct keyring *kr, const char *token, int64_t now,
    json_t **claims)
{
	unsigned char d[GC_DIGEST_LEN];
	struct gc_set *s = NULL;
	const unsigned char *fp = keyring_fingerprint(kr);
	enum cs_err e = CS_ENOENT;

	if (fp == NULL || claims == NULL || !locate(token, d, &s)) {
		atomic_fetch_add_explicit(&n_misses, 1, memory_order_relaxed);
		return CS_ENOENT;
	}
	pthread_rwlock_rdlock(&s->lock);
	for (size_t i = 0; i < GC_WAYS; i++) {
		const struct gc_entry *x = &s->way[i];
		/* SECURITY: the token's whole digest, the same key set (a key revoked
		 * or retired since changes it) and the grant's own exp.  Nothing
		 * else is decided here: grant.c checks the rest on every hit. */
		if (x->claims == NULL || CRYPTO_memcmp(x->digest, d, GC_DIGEST_LEN) != 0)
			continue;
		if (CRYPTO_memcmp(x->fp, fp, KEYRING_FP_LEN) != 0 || x->exp <= now)
			break;
		json_t *c = json_loadb(x->claims, x->len, JSON_REJECT_DUPLICATES, NULL);
		if (!json_is_object(c)) {
			json_decref(c);
			e = CS_ENOMEM;    /* our own text: only allocation can fail */
			break;
		}
		*claims = c;
		e = CS_OK;
		break;
	}
	pthread_rwlock_unlock(&s->lock);
	OPENSSL_cleanse(d, sizeof d);
	if (e == CS_OK)
		atomic_fetch_add_explicit(&n_hits, 1, memory_order_relaxed);
	else if (e == CS_ENOENT)
		atomic_fetch_add_explicit(&n_misses, 1, memory_order_relaxed);
	return e;
}

/* The way a new entry (exp) takes in s, or NULL to leave s as it is: the
 * token's own way, a free one, a stale one (another key set, past exp),
 * else the one expiring first if the newcomer outlives it. */
static struct gc_entry *victim(struct gc_set *s, const unsigned char d[GC_DIGEST_LEN],
    const unsigned char *fp, int64_t exp, int64_t now)
{
	struct gc_entry *free_way = NULL, *first = NULL;
	for (size_t i = 0; i < GC_WAYS; i++) {
		struct gc_entry *x = &s->way[i];
		if (x->claims == NULL) {
			if (free_way == NULL)
				free_way = x;
			continue;
		}
		if (CRYPTO_memcmp(x->digest, d, GC_DIGEST_LEN) == 0)
			return x;
		if (CRYPTO_memcmp(x->fp, fp, KEYRING_FP_LEN) != 0 || x->exp <= now) {
			if (free_way == NULL)
				free_way = x;
			continue;
		}
		if (first == NULL || x->exp < first->exp)
			first = x;
	}
	if (free_way != NULL)
		return free_way;
	return first != NULL && first->exp < exp ? first : NULL;
}

void grant_cache_put(const struct keyring *kr, const char *token, json_t *claims,
    int64_t exp, int64_t now)
{
	unsigned char d[GC_DIGEST_LEN];
	struct gc_set *s = NULL;
	const unsigned char *fp = keyring_fingerprint(kr);
	struct gc_entry *x;
	char *text = NULL;
	size_t len;

	if (fp == NULL || !json_is_object(claims) || exp <= now || !locate(token, d, &s))
		return;
	if ((text = json_dumps(claims, JSON_COMPACT)) == NULL)
		goto out;
	if ((len = strlen(text)) > GC_MAX_CLAIMS)
		goto out;
	pthread_rwlock_wrlock(&s->lock);
	if ((x = victim(s, d, fp, exp, now)) != NULL) {
		entry_drop(x);
		memcpy(x->digest, d, GC_DIGEST_LEN);
		memcpy(x->fp, fp, KEYRING_FP_LEN);
		x->exp = exp;
		x->claims = text;
		x->len = len;
		text = NULL;
	}
	pthread_rwlock_unlock(&s->lock);
out:
	free(text);
	OPENSSL_cleanse(d, sizeof d);
}

void grant_cache_clear(void)
{
	pthread_once(&sets_once, sets_init);
	for (size_t i = 0; i < GC_SETS; i++) {
		pthread_rwlock_wrlock(&sets[i].lock);
		for (size_t j = 0; j < GC_WAYS; j++)
			entry_drop(&sets[i].way[j]);
		pthread_rwlock_unlock(&sets[i].lock);
	}
}

void grant_cache_stats(struct grant_cache_stats *out)
{
	uint64_t n = 0;
	pthread_once(&sets_once, sets_init);
	for (size_t i = 0; i < GC_SETS; i++) {
		pthread_rwlock_rdlock(&sets[i].lock);
		for (size_t j = 0; j < GC_WAYS; j++)
			if (sets[i].way[j].claims != NULL)
				n++;
		pthread_rwlock_unlock(&sets[i].lock);
	}
	out->hits = atomic_load_explicit(&n_hits, memory_order_relaxed);
	out->misses = atomic_load_explicit(&n_misses, memory_order_relaxed);
	out->entries = n;
}
