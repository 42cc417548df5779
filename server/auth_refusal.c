/* auth_refusal.c -- the summary of refused gateway authentications: a fixed
 * table of addresses (their [limits] keys hashed with SipHash under a random
 * key), each with the time of its last audit entry and the refusals since.
 * It never allocates after auth_refusals_new and never stores an address. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/rand.h>
#include "auth_refusal.h"
#include "metrics.h"
#include "rate_limits.h"
#include "limiter.h"

#define PROBE 8

struct entry {
	uint64_t h;             /* 0 = empty */
	int64_t  written_at;    /* UTC seconds of the address's last entry */
	uint64_t earlier;       /* refusals since then, not written */
};

struct auth_refusals {
	pthread_mutex_t mu;
	unsigned char   sipkey[16];
	int64_t         window_start;   /* the node's current interval */
	unsigned        window_entries; /* entries written in it */
	uint64_t        unrecorded;     /* refusals that found the cap full, since the last entry */
	struct entry    slots[AUTH_REFUSAL_SLOTS];
};

static const char *const reason_names[AUTH_REFUSED__MAX] = {
	[AUTH_REFUSED_MISSING] = "missing", [AUTH_REFUSED_METHOD_NOT_ENABLED] = "method_not_enabled",
	[AUTH_REFUSED_MALFORMED] = "malformed", [AUTH_REFUSED_BASIC] = "basic",
	[AUTH_REFUSED_ASSERTION] = "assertion", [AUTH_REFUSED_REPLAY] = "replay",
};

const char *auth_refusal_reason_name(enum auth_refusal_reason r)
{
	return (unsigned)r < AUTH_REFUSED__MAX ? reason_names[r] : "other";
}

struct auth_refusals *auth_refusals_new(void)
{
	struct auth_refusals *t = calloc(1, sizeof *t);
	if (t == NULL)
		return NULL;
	if (RAND_bytes(t->sipkey, sizeof t->sipkey) != 1 || pthread_mutex_init(&t->mu, NULL) != 0) {
		free(t);
		return NULL;
	}
	return t;
}

void auth_refusals_free(struct auth_refusals *t)
{
	if (t == NULL)
		return;
	pthread_mutex_destroy(&t->mu);
	free(t);
}

/* ip's entry, taken over from the address written longest ago when its
 * probe window is full (that address then starts afresh: at worst one more
 * entry for it). */
static struct entry *entry_for(struct auth_refusals *t, const char *ip)
{
	unsigned char key[RATE_LIMITS_KEY_MAX];
	size_t n = rate_limits_address_key(ip, key);
	uint64_t h = limiter_siphash(t->sipkey, key, n);
	struct entry *victim = NULL;
	if (h == 0)
		h = 1;
	size_t start = (size_t)h & (AUTH_REFUSAL_SLOTS - 1) & ~(size_t)(PROBE - 1);
	for (size_t i = 0; i < PROBE; i++) {
		struct entry *e = &t->slots[start + i];
		if (e->h == h)
			return e;
		if (victim == NULL || e->h == 0 || (victim->h != 0 && e->written_at < victim->written_at))
			victim = e;
	}
	memset(victim, 0, sizeof *victim);
	victim->h = h;
	return victim;
}

bool auth_refusals_note(struct auth_refusals *t, const char *ip, enum auth_refusal_reason reason,
    bool audited, int64_t now, struct auth_refusal_summary *out)
{
	bool write = false;
	metrics_add(metric[M_GATEWAY_AUTH_REFUSED], (const char *[]){ auth_refusal_reason_name(reason) },
	    1);
	memset(out, 0, sizeof *out);
	if (!audited)
		return false;
	if (t == NULL)
		return true;
	pthread_mutex_lock(&t->mu);
	struct entry *e = entry_for(t, ip);
	if (now - t->window_start >= AUTH_REFUSAL_INTERVAL || now < t->window_start) {
		t->window_start = now;
		t->window_entries = 0;
	}
	bool due = e->written_at == 0 || now - e->written_at >= AUTH_REFUSAL_INTERVAL ||
	    now < e->written_at;
	/* SECURITY: however many addresses an attacker has, a node writes at
	 * most AUTH_REFUSAL_MAX_ENTRIES entries an interval for them. */
	if (due && t->window_entries < AUTH_REFUSAL_MAX_ENTRIES) {
		out->earlier = e->earlier;
		out->unrecorded = t->unrecorded;
		e->written_at = now;
		e->earlier = 0;
		t->unrecorded = 0;
		t->window_entries++;
		write = true;
	} else if (due) {
		t->unrecorded++;
	} else {
		e->earlier++;
	}
	pthread_mutex_unlock(&t->mu);
	return write;
}
