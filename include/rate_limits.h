/* rate_limits.h -- consentd's [limits]: one token-bucket limiter (limiter.h)
 * per class of caller -- a client address, a person, the gateway -- built
 * from the configuration, and the refusals counted in
 * consentd_rate_limit_refusals_total.  No HTTP here: the router applies the
 * address and gateway classes a route declares (routes.c), the consent and
 * approval domain the person class when it would create a request. */
#ifndef CS_RATE_LIMITS_H
#define CS_RATE_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config;

enum limit_class {
	LIMIT_NONE = 0,      /* the route has no limit */
	LIMIT_ADDRESS,       /* per client address (IPv4 address, IPv6 /64): people's pages */
	LIMIT_PERSON,        /* per person: creating consent requests and approvals */
	LIMIT_GATEWAY,       /* per authenticated gateway: /token /introspect /revoke /proxy */
	LIMIT_AUTH_FAILURE,  /* per client address: failed gateway authentications */
	LIMIT__MAX
};

struct rate_limits;

/* The limiters cfg's [limits] asks for (a class whose rate is 0 has none and
 * is never refused), and the metric family, declared here once.  NULL when
 * memory or randomness fails. */
struct rate_limits *rate_limits_new(const struct config *cfg);
void rate_limits_free(struct rate_limits *l);     /* NULL-safe */

/* The class's name in metrics and messages: "address", "person", "gateway",
 * "auth_failure". */
const char *limit_class_name(enum limit_class k);

/* Takes one token of key's bucket in class k, on the monotonic clock.  true:
 * go on (always for NULL limits, LIMIT_NONE or a class switched off).  false:
 * refused, counted, and *retry_after holds the whole seconds until a token is
 * back (at least 1). */
bool rate_limits_take(struct rate_limits *l, enum limit_class k, const void *key, size_t keylen,
    int64_t *retry_after);

/* The same for LIMIT_ADDRESS with the client address ip as text: an IPv4
 * address (or an IPv4-mapped IPv6 one) is one key, an IPv6 address counts
 * under its /64 (one subscriber's network), anything else under its text. */
bool rate_limits_take_address(struct rate_limits *l, const char *ip, int64_t *retry_after);

/* The key an address counts under, written to out: an IPv4 (or IPv4-mapped
 * IPv6) address's 4 bytes, an IPv6 address's /64 (8 bytes), anything else its
 * text (cut at RATE_LIMITS_KEY_MAX bytes).  Returns the key's length. */
#define RATE_LIMITS_KEY_MAX 64
size_t rate_limits_address_key(const char *ip, unsigned char out[RATE_LIMITS_KEY_MAX]);

/* SECURITY: the failed-authentication class (issue 28), keyed by address as
 * LIMIT_ADDRESS is.  rate_limits_auth_allowed looks without taking: true when
 * ip may try to authenticate; false when its failures used up
 * [limits] auth_failure_burst (refused, counted, *retry_after written).  It
 * is asked before any signature or database work.  rate_limits_auth_failed
 * spends one token for a failed attempt. */
bool rate_limits_auth_allowed(struct rate_limits *l, const char *ip, int64_t *retry_after);
void rate_limits_auth_failed(struct rate_limits *l, const char *ip);

/* The configured rate of class k in requests a second (0: off), for messages. */
double rate_limits_rate(const struct rate_limits *l, enum limit_class k);

#endif
