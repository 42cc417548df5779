/* health.c -- connection health (issue #33 item 4): the reasons a provider
 * connection needs the person again, in words, and the health events added
 * to the outbox events.c pushes.  It must never write a mark without its
 * event (both in the caller's transaction), nor put a token in either. */
#include <string.h>

#include "buf.h"
#include "health.h"
#include "store_consent.h"
#include "store_events.h"

static const struct {
	const char *name, *person, *gateway;
} reasons[HEALTH_REASON__MAX] = {
	[HEALTH_REFRESH_REFUSED] = { "refresh_refused",
	    "The provider no longer accepts this connection: it refused to renew access "
	    "(the access was removed at the provider, or it lapsed).",
	    "the provider refused the refresh token (invalid_grant): the access was removed "
	    "at the provider or lapsed" },
	[HEALTH_MORE_SCOPES] = { "more_scopes",
	    "The provider renewed access with more permissions than you gave, so consentd "
	    "revoked those tokens.",
	    "the provider's refresh answer granted more scopes than the consent, so its "
	    "tokens were revoked" },
	[HEALTH_EXPIRED] = { "expired",
	    "The provider's access ended and it cannot be renewed without you.",
	    "the provider's access token expired and there is no refresh token" },
	[HEALTH_REVOKED] = { "revoked",
	    "The provider no longer accepts this connection: the access was revoked at the "
	    "provider.",
	    "the access was revoked at the provider: it refused the unexpired token and the "
	    "refresh token (invalid_grant)" },
	[HEALTH_UNKNOWN] = { "unknown",
	    "The provider no longer accepts this connection.",
	    "the provider no longer accepts the connection" },
};

const char *health_reason_name(enum health_reason r)
{
	return reasons[(unsigned)r < HEALTH_REASON__MAX ? r : HEALTH_UNKNOWN].name;
}

enum health_reason health_reason_parse(const char *name)
{
	for (int i = 0; name != NULL && i < HEALTH_REASON__MAX; i++)
		if (strcmp(reasons[i].name, name) == 0)
			return (enum health_reason)i;
	return HEALTH_UNKNOWN;
}

const char *health_reason_person(enum health_reason r)
{
	return reasons[(unsigned)r < HEALTH_REASON__MAX ? r : HEALTH_UNKNOWN].person;
}

const char *health_reason_gateway(enum health_reason r)
{
	return reasons[(unsigned)r < HEALTH_REASON__MAX ? r : HEALTH_UNKNOWN].gateway;
}

enum cs_err health_reconnect_description(enum health_reason r, const char *public_url,
    char *out, size_t cap)
{
	if (public_url == NULL || out == NULL || cap == 0)
		return CS_EINVAL;
	if (cap > HEALTH_DESCRIPTION_MAX)
		cap = HEALTH_DESCRIPTION_MAX;
	/* What happened, what the gateway does, where the person goes: the
	 * gateway can show the last part to the person as it is. */
	return str_fmt(out, cap, "the provider connection needs the person again: %s; ask for "
	    "consent again and the person reconnects (they see why at %s/me)",
	    health_reason_gateway(r), public_url);
}

enum cs_err health_describe_consent(struct store_conn *c, const char *public_url,
    const char *consent_id, char *out, size_t cap)
{
	enum cs_err e;
	struct store_consent_row r;
	if (c == NULL || public_url == NULL || consent_id == NULL || out == NULL || cap == 0)
		return CS_EINVAL;
	out[0] = '\0';
	/* Read now, not from the caller's copy: the release that failed may have
	 * marked it a moment ago. */
	if ((e = store_consent_get(c, consent_id, &r)) != CS_OK)
		return e;
	if (r.reconnect_required && r.revoked_at == 0)
		e = health_reconnect_description(health_reason_parse(r.reconnect_reason), public_url,
		    out, cap);
	else
		e = CS_ENOENT;
	store_consent_row_clear(&r);
	return e;
}

enum cs_err health_mark_broken(struct store_conn *c, const char *consent_id,
    enum health_reason r, int64_t now)
{
	enum cs_err e;
	int changed = 0;
	if (c == NULL || consent_id == NULL)
		return CS_EINVAL;
	if ((e = store_consent_set_reconnect(c, consent_id, health_reason_name(r), &changed)) != CS_OK)
		return e;
	if (!changed)
		return CS_ENOENT;
	/* SECURITY: the mark and its event in one transaction: the gateway hears
	 * of every connection that needs the person, and of none that does not. */
	return store_events_enqueue_kind(c, consent_id, HEALTH_KIND_BROKEN, health_reason_name(r), now);
}

enum cs_err health_recovered(struct store_conn *c, const char *new_id, enum health_reason r,
    int64_t now)
{
	if (c == NULL || new_id == NULL)
		return CS_EINVAL;
	return store_events_enqueue_kind(c, new_id, HEALTH_KIND_RECOVERED, health_reason_name(r), now);
}

enum cs_err health_count(struct store_conn *c, int64_t now, int64_t *ok, int64_t *broken)
{
	if (c == NULL || ok == NULL || broken == NULL)
		return CS_EINVAL;
	return store_consent_count_health(c, now, ok, broken);
}
