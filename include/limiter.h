/* limiter.h -- token-bucket rate limits with bounded memory (issue 16's
 * [limits]).  A limiter holds one bucket per key (a client address, a person,
 * the gateway) in a fixed table chosen at creation: it never allocates after
 * that, whatever the number of keys an attacker invents.  Keys are hashed
 * with SipHash-2-4 under a key drawn at creation, so no one can aim keys at
 * one slot.  Thread-safe. */
#ifndef CS_LIMITER_H
#define CS_LIMITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* rate tokens a second refill a bucket of at most burst tokens; a request
 * takes one.  rate > 0, burst >= 1. */
struct limit_rule {
	double rate;
	double burst;
};

struct limiter;

/* A limiter for rule with room for slots keys (rounded up to a power of two,
 * at least 64).  NULL when memory or randomness fails. */
struct limiter *limiter_new(const struct limit_rule *rule, size_t slots);
void limiter_free(struct limiter *l);

/* Takes one token from key's bucket at now_ms (a monotonic clock in
 * milliseconds).  true: the request may go on.  false: refused, and
 * *retry_after gets the whole seconds until a token is back (at least 1).
 *
 * Memory stays bounded: when the slots a key may use are all taken, the
 * bucket that would be full by now (it remembers nothing) is reused first,
 * else the least recently used one, whose key then starts again with a full
 * bucket.  So a flood of distinct keys can make the limiter forget, never
 * refuse a key it has not seen. */
bool limiter_take(struct limiter *l, const void *key, size_t keylen, int64_t now_ms,
    int64_t *retry_after);

/* Whether key's bucket holds a token at now_ms, taking none: true for a key
 * the limiter does not hold (its bucket would start full).  false: *retry_after
 * as limiter_take's.  Never makes room for a key. */
bool limiter_peek(struct limiter *l, const void *key, size_t keylen, int64_t now_ms,
    int64_t *retry_after);

/* How many buckets a limiter has forgotten to make room (for metrics). */
uint64_t limiter_evictions(const struct limiter *l);

/* SipHash-2-4 of len bytes under the 16-byte key k (the table's hash; here
 * for its test vectors). */
uint64_t limiter_siphash(const unsigned char k[16], const void *data, size_t len);

#endif
