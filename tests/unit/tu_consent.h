/* tu_consent.h -- what a consent page gives its form, for unit tests that
 * decide requests the way a person does (the request's current version), and
 * the consent calls in the short shapes the suites set their scenes with:
 * each outcome that is not the plain success comes back as the cs_err these
 * suites were written against (test_consent.c checks the outcomes themselves). */
#ifndef CS_TU_CONSENT_H
#define CS_TU_CONSENT_H

#include <string.h>
#include "consent.h"

/* Sets d->version to the version of request rid as it is now (as the consent
 * page draws it); leaves it empty when there is no such request. */
static inline void tu_decision_version(struct store_conn *c, const char *rid,
    struct consent_decision *d)
{
	struct consent_request r;
	memset(&r, 0, sizeof r);
	d->version[0] = '\0';
	if (consent_request_get(c, rid, &r) == CS_OK)
		consent_request_version(&r, d->version);
	consent_request_clear(&r);
}

/* consent_exchange for (iss, sub) asking agent for resource. */
static inline enum cs_err tu_exchange(struct store_conn *c, const struct config *cfg,
    const char *iss, const char *sub, const char *agent, const char *resource,
    const struct scope_set *req, const char *reason, const char *actor, int64_t now,
    struct consent_answer *out)
{
	return consent_exchange(c, cfg, &(struct consent_ask){ .issuer = iss, .subject = sub,
	    .agent = agent, .resource = resource, .requested = req, .reason = reason,
	    .actor = actor, .now = now }, out);
}

/* consent_decide: CS_OK and *kid (when asked) for CONSENT_DECIDED; CS_ENOENT,
 * CS_EPERM, CS_EINVAL (closed or invalid) or CS_ESTALE otherwise. */
static inline enum cs_err tu_decide(struct store_conn *c, const struct config *cfg,
    const char *rid, int64_t uid, const struct consent_decision *d, const char *actor,
    int64_t now, char **kid)
{
	static const enum cs_err as[CONSENT_DECIDE__MAX] = {
		[CONSENT_DECIDED] = CS_OK, [CONSENT_DECIDE_UNKNOWN] = CS_ENOENT,
		[CONSENT_DECIDE_NOT_YOURS] = CS_EPERM, [CONSENT_DECIDE_CLOSED] = CS_EINVAL,
		[CONSENT_DECIDE_INVALID] = CS_EINVAL, [CONSENT_DECIDE_CHANGED] = CS_ESTALE,
	};
	struct consent_decided got = { CONSENT_DECIDE_UNKNOWN, NULL };
	enum cs_err e = consent_decide(c, cfg, rid, &(struct consent_actor){ .user_id = uid,
	    .actor = actor, .now = now }, d, &got);
	if (e == CS_OK)
		e = as[got.outcome];
	if (e == CS_OK && kid != NULL) {
		*kid = got.consent_id;
		got.consent_id = NULL;
	}
	consent_decided_clear(&got);
	return e;
}

/* consent_revoke (consent_revoke_tx when in_tx): CS_OK when revoked now or
 * before; CS_ENOENT or CS_EPERM otherwise. */
static inline enum cs_err tu_revoke(struct store_conn *c, const char *kid, int64_t uid,
    const char *actor, const char *reason, int64_t now, bool in_tx)
{
	static const enum cs_err as[CONSENT_REVOKE__MAX] = {
		[CONSENT_REVOKED] = CS_OK, [CONSENT_REVOKE_ALREADY] = CS_OK,
		[CONSENT_REVOKE_UNKNOWN] = CS_ENOENT, [CONSENT_REVOKE_NOT_YOURS] = CS_EPERM,
	};
	enum consent_revoke_outcome o = CONSENT_REVOKE_UNKNOWN;
	const struct consent_actor who = { .user_id = uid, .actor = actor, .now = now };
	enum cs_err e = in_tx ? consent_revoke_tx(c, kid, &who, reason, &o) :
	    consent_revoke(c, kid, &who, reason, &o);
	return e == CS_OK ? as[o] : e;
}

/* consent_allow_asking: CS_OK with *lifted; CS_ENOENT, CS_EPERM or CS_EINVAL
 * (undecided) otherwise. */
static inline enum cs_err tu_allow_asking(struct store_conn *c, const struct config *cfg,
    const char *rid, int64_t uid, const char *actor, int64_t now, bool *lifted)
{
	static const enum cs_err as[CONSENT_LIFT__MAX] = {
		[CONSENT_LIFTED] = CS_OK, [CONSENT_LIFT_NOTHING] = CS_OK,
		[CONSENT_LIFT_UNKNOWN] = CS_ENOENT, [CONSENT_LIFT_NOT_YOURS] = CS_EPERM,
		[CONSENT_LIFT_UNDECIDED] = CS_EINVAL,
	};
	enum consent_lift_outcome o = CONSENT_LIFT_UNKNOWN;
	enum cs_err e = consent_allow_asking(c, cfg, rid, &(struct consent_actor){ .user_id = uid,
	    .actor = actor, .now = now }, &o);
	*lifted = e == CS_OK && o == CONSENT_LIFTED;
	return e == CS_OK ? as[o] : e;
}

#endif
