/* audit.c -- appends entries to the audit log inside the caller's transaction.
 * It must never record a token, code, secret or cookie: entries that look like
 * they carry one are refused, so a mistake fails loudly instead of leaking.
 *
 * Action names in use (add yours here when you add one):
 *   consent.request.created    flow A: a new pending consent request
 *   consent.request.merged     flow A: more scopes merged into the pending request
 *   consent.request.slow_down  flow A: the gateway polled faster than the interval
 *   consent.request.expired    flow A/B: a pending request found past its expiry
 *   consent.request.refused    flow A: too many pending requests for the person
 *   consent.request.approved   flow B: the person approved (consent_id = the new consent)
 *   consent.request.denied     flow B: the person denied
 *   consent.granted            flow B: a new consent went live
 *   consent.revoked            flow B (replaced) and G: a consent and its grants and
 *                              refresh tokens were revoked; detail = the reason
 *   consent.binding_refused    flow B: a request opened by another account (pages.c)
 *   grant.issued               flow C: a grant was signed (grant.c; detail "jti=...")
 *   grant.revoked              RFC 7009 at /revoke: a grant's jti was revoked
 *   refresh.issued             an offline consent's refresh family began (detail "family=...")
 *   refresh.used               a refresh token was used and rotated
 *   refresh.reuse_detected     a used refresh token came back: its family was revoked
 *   refresh.revoked            RFC 7009 at /revoke: a refresh family was revoked
 *   vault.connected            flow D: a provider authorization sealed for a new consent
 *   vault.connect.failed       flow D: bad_state, cancelled, too_much or failed
 *   vault.record.moved         flow B: a record re-sealed under the consent replacing its own
 *   vault.released             flow D: a provider access token went to the gateway (action=...)
 *   vault.release.refused      flow D/F: refused (escalation attempt, token_release = never, ...)
 *   vault.refreshed            flow D: the provider refreshed a record's tokens
 *   vault.reconnect_required   flow D: the provider said invalid_grant
 *   vault.revoked              flow G: outbox tokens revoked at the provider (ok / expired)
 *   vault.revoke_retry         flow G: the provider could not be reached; retried later
 *   approval.requested         flow F: a new approval request (action, params_digest)
 *   approval.slow_down         flow F: polled faster than the interval
 *   approval.expired           flow F: a request or an unredeemed approval timed out
 *   approval.refused           flow F: too many pending, or a redemption refused
 *   approval.approved          flow F: the person approved
 *   approval.denied            flow F: the person denied
 *   approval.cancelled         flow F: a decision arrived after the consent ended
 *   approval.released          flow F: the token went out once for this approval
 */
#include <string.h>

#include "audit.h"
#include "store_consent.h"

/* The start of every JWT ('{"' in base64url): a JWS, a JWE, an ID token. */
#define JWT_PREFIX "eyJ"

/* Longest value accepted in any field: entries are short by design. */
#define AUDIT_MAX_FIELD 4096

/* CS_EINVAL when v looks like it carries a token or is oversized. */
static enum cs_err field_ok(const char *v)
{
	if (v == NULL)
		return CS_OK;
	if (strlen(v) > AUDIT_MAX_FIELD)
		return CS_EINVAL;
	/* SECURITY: a token in the audit log would outlive every revocation.  A
	 * JWT is "eyJ" + base64url + "." -- random ids may contain "eyJ" by
	 * chance, but never the dot that follows a JWT's header segment. */
	for (const char *p = strstr(v, JWT_PREFIX); p != NULL; p = strstr(p + 1, JWT_PREFIX)) {
		const char *q = p + 3;
		while ((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') ||
		    (*q >= '0' && *q <= '9') || *q == '-' || *q == '_')
			q++;
		if (*q == '.')
			return CS_EINVAL;
	}
	return CS_OK;
}

enum cs_err audit_append(struct store_conn *c, const struct audit_entry *e)
{
	if (c == NULL || e == NULL || e->action == NULL || e->action[0] == '\0')
		return CS_EINVAL;
	const char *fields[] = {
		e->actor, e->action, e->subject, e->agent, e->resource, e->scopes,
		e->consent_id, e->request_id, e->outcome, e->detail,
	};
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
		if (field_ok(fields[i]) != CS_OK)
			return CS_EINVAL;
	return store_audit_insert(c, e);
}
