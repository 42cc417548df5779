/* limiter.c -- token buckets in a fixed, keyed-hash table.  Never
 * allocates after limiter_new; never stores a key, only its 64-bit SipHash
 * under a per-limiter random key (a collision merges two buckets, with
 * probability 2^-64 per pair).  A key may live in PROBE consecutive slots
 * from its hash; the table is split in shards with one mutex each. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/rand.h>
#include "limiter.h"

#define PROBE 8
#define SHARD_SLOTS 256        /* slots per mutex */

struct slot {
	uint64_t h;            /* 0 = empty (a hash of 0 is stored as 1) */
	double   tokens;
	int64_t  last_ms;      /* when tokens was computed */
};

struct shard {
	pthread_mutex_t mu;
};

struct limiter {
	struct limit_rule rule;
	size_t            mask;        /* slots - 1 */
	size_t            nshards;
	struct slot      *slots;
	struct shard     *shards;
	unsigned char     sipkey[16];
	uint64_t          evictions;   /* under the shards' mutexes; read racily */
};

/* --- SipHash-2-4 (Aumasson and Bernstein), 64-bit output ---------------- */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND \
	do { \
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2; \
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0; \
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); \
	} while (0)

static uint64_t le64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

uint64_t limiter_siphash(const unsigned char k[16], const void *data, size_t len)
{
	const unsigned char *in = data;
	uint64_t k0 = le64(k), k1 = le64(k + 8);
	uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
	uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
	size_t whole = len - len % 8;
	for (size_t i = 0; i < whole; i += 8) {
		uint64_t m = le64(in + i);
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	uint64_t b = (uint64_t)len << 56;
	for (size_t i = 0; i < len % 8; i++)
		b |= (uint64_t)in[whole + i] << (8 * i);
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/* --- the table ------------------------------------------------------------ */

struct limiter *limiter_new(const struct limit_rule *rule, size_t slots)
{
	struct limiter *l = NULL;
	size_t n = 64;
	if (rule == NULL || !(rule->rate > 0) || !(rule->burst >= 1) || slots > ((size_t)1 << 24))
		return NULL;
	while (n < slots)
		n <<= 1;
	l = calloc(1, sizeof *l);
	if (l == NULL)
		return NULL;
	l->rule = *rule;
	l->mask = n - 1;
	l->nshards = n < SHARD_SLOTS ? 1 : n / SHARD_SLOTS;
	l->slots = calloc(n, sizeof *l->slots);
	l->shards = calloc(l->nshards, sizeof *l->shards);
	if (l->slots == NULL || l->shards == NULL || RAND_bytes(l->sipkey, sizeof l->sipkey) != 1)
		goto fail;
	for (size_t i = 0; i < l->nshards; i++)
		if (pthread_mutex_init(&l->shards[i].mu, NULL) != 0) {
			l->nshards = i;
			goto fail;
		}
	return l;
fail:
	limiter_free(l);
	return NULL;
}

void limiter_free(struct limiter *l)
{
	if (l == NULL)
		return;
	for (size_t i = 0; i < l->nshards && l->shards != NULL; i++)
		pthread_mutex_destroy(&l->shards[i].mu);
	free(l->shards);
	free(l->slots);
	free(l);
}

uint64_t limiter_evictions(const struct limiter *l)
{
	return l ? __atomic_load_n(&l->evictions, __ATOMIC_RELAXED) : 0;
}

/* The tokens slot s holds at now_ms, refilled and capped at burst. */
static double refilled(const struct limiter *l, const struct slot *s, int64_t now_ms)
{
	double t = s->tokens;
	if (now_ms > s->last_ms)
		t += (double)(now_ms - s->last_ms) * l->rule.rate / 1000.0;
	return t > l->rule.burst ? l->rule.burst : t;
}

/* The whole seconds until tokens (< 1) is back at 1, at least 1. */
static int64_t wait_secs(const struct limiter *l, double tokens)
{
	double wait = (1.0 - tokens) / l->rule.rate;
	int64_t secs = (int64_t)wait;
	if ((double)secs < wait)
		secs++;
	return secs < 1 ? 1 : secs;
}

/* key's hash (never 0), the first slot of its probe window and its shard. */
static uint64_t key_place(const struct limiter *l, const void *key, size_t keylen, size_t *start,
    size_t *shard)
{
	uint64_t h = limiter_siphash(l->sipkey, key, keylen);
	if (h == 0)
		h = 1;
	/* The probe window stays inside one shard: start at a multiple of PROBE. */
	*start = (size_t)h & l->mask & ~(size_t)(PROBE - 1);
	*shard = (*start / SHARD_SLOTS) % l->nshards;
	return h;
}

bool limiter_peek(struct limiter *l, const void *key, size_t keylen, int64_t now_ms,
    int64_t *retry_after)
{
	size_t start, shard;
	uint64_t h = key_place(l, key, keylen, &start, &shard);
	bool ok = true;
	pthread_mutex_lock(&l->shards[shard].mu);
	for (size_t i = 0; i < PROBE; i++) {
		const struct slot *s = &l->slots[start + i];
		if (s->h != h)
			continue;
		double t = refilled(l, s, now_ms);
		ok = t >= 1.0;
		if (!ok && retry_after != NULL)
			*retry_after = wait_secs(l, t);
		break;
	}
	pthread_mutex_unlock(&l->shards[shard].mu);
	return ok;
}

bool limiter_take(struct limiter *l, const void *key, size_t keylen, int64_t now_ms,
    int64_t *retry_after)
{
	size_t start, shard;
	uint64_t h = key_place(l, key, keylen, &start, &shard);
	struct slot *found = NULL, *victim = NULL;
	bool ok;

	pthread_mutex_lock(&l->shards[shard].mu);
	for (size_t i = 0; i < PROBE; i++) {
		struct slot *s = &l->slots[start + i];
		if (s->h == h) {
			found = s;
			break;
		}
		/* Best victim: an empty slot, then a bucket full again by now
		 * (forgetting it loses nothing), then the least recently used. */
		if (victim == NULL || s->h == 0 ||
		    (victim->h != 0 && refilled(l, s, now_ms) >= l->rule.burst) ||
		    (victim->h != 0 && refilled(l, victim, now_ms) < l->rule.burst &&
		     s->last_ms < victim->last_ms))
			victim = s;
	}
	if (found == NULL) {
		if (victim->h != 0 && refilled(l, victim, now_ms) < l->rule.burst)
			__atomic_add_fetch(&l->evictions, 1, __ATOMIC_RELAXED);
		found = victim;
		found->h = h;
		found->tokens = l->rule.burst;
		found->last_ms = now_ms;
	}
	found->tokens = refilled(l, found, now_ms);
	if (now_ms > found->last_ms)
		found->last_ms = now_ms;
	ok = found->tokens >= 1.0;
	if (ok) {
		found->tokens -= 1.0;
	} else if (retry_after != NULL) {
		*retry_after = wait_secs(l, found->tokens);
	}
	pthread_mutex_unlock(&l->shards[shard].mu);
	return ok;
}
