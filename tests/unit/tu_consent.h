/* tu_consent.h -- what a consent page gives its form, for unit tests that
 * decide requests the way a person does: the request's current version. */
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

#endif
