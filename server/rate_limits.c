/* rate_limits.c -- the [limits] classes over limiter.c's token buckets, and
 * their refusal counter.  Keys are what the caller was (an address's network,
 * a person's user id, the gateway's client id), never a request's free text;
 * the metric's label is the class's fixed name. */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "config.h"
#include "metrics.h"
#include "rate_limits.h"
#include "limiter.h"

struct rate_limits {
	struct limiter       *by[LIMIT__MAX];      /* NULL: the class is off */
	double                rate[LIMIT__MAX];
	struct metric_family *refusals;
};

static const char *const class_names[LIMIT__MAX] = {
	[LIMIT_NONE] = "none", [LIMIT_ADDRESS] = "address", [LIMIT_PERSON] = "person",
	[LIMIT_GATEWAY] = "gateway", [LIMIT_AUTH_FAILURE] = "auth_failure",
};

const char *limit_class_name(enum limit_class k)
{
	return (unsigned)k < LIMIT__MAX ? class_names[k] : "?";
}

struct rate_limits *rate_limits_new(const struct config *cfg)
{
	struct rate_limits *l = calloc(1, sizeof *l);
	const struct config_limit *rules[LIMIT__MAX] = {
		[LIMIT_ADDRESS] = &cfg->limit_address, [LIMIT_PERSON] = &cfg->limit_person,
		[LIMIT_GATEWAY] = &cfg->limit_gateway, [LIMIT_AUTH_FAILURE] = &cfg->limit_auth_failure,
	};
	/* One gateway today: its table needs no room for many keys. */
	const size_t slots[LIMIT__MAX] = {
		[LIMIT_ADDRESS] = (size_t)cfg->limit_buckets, [LIMIT_PERSON] = (size_t)cfg->limit_buckets,
		[LIMIT_GATEWAY] = 64, [LIMIT_AUTH_FAILURE] = (size_t)cfg->limit_buckets,
	};
	if (l == NULL)
		return NULL;
	for (int k = LIMIT_NONE + 1; k < LIMIT__MAX; k++) {
		const struct config_limit *r = rules[k];
		if (r->rate_milli == 0)
			continue;
		struct limit_rule rule = { .rate = (double)r->rate_milli / 1000.0,
			.burst = (double)r->burst };
		l->rate[k] = rule.rate;
		if ((l->by[k] = limiter_new(&rule, slots[k])) == NULL) {
			rate_limits_free(l);
			return NULL;
		}
	}
	l->refusals = metrics_family("consentd_rate_limit_refusals_total",
	    "Requests refused by a rate limit, by limit.", METRIC_COUNTER,
	    (const char *[]){ "limit", NULL }, NULL, 0);
	return l;
}

void rate_limits_free(struct rate_limits *l)
{
	if (l == NULL)
		return;
	for (int k = 0; k < LIMIT__MAX; k++)
		limiter_free(l->by[k]);
	free(l);
}

static int64_t monotonic_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool rate_limits_take(struct rate_limits *l, enum limit_class k, const void *key, size_t keylen,
    int64_t *retry_after)
{
	if (l == NULL || (unsigned)k >= LIMIT__MAX || l->by[k] == NULL)
		return true;
	if (limiter_take(l->by[k], key, keylen, monotonic_ms(), retry_after))
		return true;
	metrics_add(l->refusals, (const char *[]){ class_names[k] }, 1);
	return false;
}

size_t rate_limits_address_key(const char *ip, unsigned char out[RATE_LIMITS_KEY_MAX])
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	unsigned char a[16];
	if (inet_pton(AF_INET, ip, a) == 1) {
		memcpy(out, a, 4);
		return 4;
	}
	if (inet_pton(AF_INET6, ip, a) == 1) {
		/* SECURITY: one subscriber gets a whole /64; counting its addresses
		 * apart would let it rotate through 2^64 buckets. */
		if (memcmp(a, mapped, sizeof mapped) == 0) {
			memcpy(out, a + 12, 4);
			return 4;
		}
		memcpy(out, a, 8);
		return 8;
	}
	size_t n = strlen(ip);
	if (n > RATE_LIMITS_KEY_MAX)
		n = RATE_LIMITS_KEY_MAX;
	memcpy(out, ip, n);
	return n;
}

bool rate_limits_take_address(struct rate_limits *l, const char *ip, int64_t *retry_after)
{
	unsigned char key[RATE_LIMITS_KEY_MAX];
	size_t n = rate_limits_address_key(ip, key);
	return rate_limits_take(l, LIMIT_ADDRESS, key, n, retry_after);
}

bool rate_limits_auth_allowed(struct rate_limits *l, const char *ip, int64_t *retry_after)
{
	unsigned char key[RATE_LIMITS_KEY_MAX];
	if (l == NULL || l->by[LIMIT_AUTH_FAILURE] == NULL)
		return true;
	size_t n = rate_limits_address_key(ip, key);
	if (limiter_peek(l->by[LIMIT_AUTH_FAILURE], key, n, monotonic_ms(), retry_after))
		return true;
	metrics_add(l->refusals, (const char *[]){ class_names[LIMIT_AUTH_FAILURE] }, 1);
	return false;
}

void rate_limits_auth_failed(struct rate_limits *l, const char *ip)
{
	unsigned char key[RATE_LIMITS_KEY_MAX];
	if (l == NULL || l->by[LIMIT_AUTH_FAILURE] == NULL)
		return;
	size_t n = rate_limits_address_key(ip, key);
	(void)limiter_take(l->by[LIMIT_AUTH_FAILURE], key, n, monotonic_ms(), NULL);
}

double rate_limits_rate(const struct rate_limits *l, enum limit_class k)
{
	return l != NULL && (unsigned)k < LIMIT__MAX ? l->rate[k] : 0;
}
