/* approval_api.h -- the OAuth answers (RFC 6749 §5.2) for approval outcomes,
 * shared by the gateway's handlers at /token and /proxy.  approval.c itself
 * knows no HTTP. */
#ifndef CS_APPROVAL_API_H
#define CS_APPROVAL_API_H

#include "approval.h"
#include "config.h"
#include "cs_err.h"
#include "http.h"

/* The OAuth error for an outcome other than APPROVAL_RELEASE and
 * APPROVAL_CONSENT_ENDED: approval_required, authorization_pending or
 * slow_down (with approval_request_id, approval_uri, expires_in and interval),
 * access_denied or expired_token, all with status; too_many_pending_requests
 * is always 429 with Retry-After.  status is 400 at the token endpoint
 * (RFC 6749 section 5.2) and 403 at the proxy.  access_denied says who
 * denied: the organisation's policy (its line), another decider, or the
 * person -- with until when (now + retry_after, UTC) the denial holds. */
enum cs_err approval_answer_reply(struct http_reply *rep, const struct config *cfg,
    const struct approval_answer *a, int status, int64_t now) CS_MUST_CHECK;

#endif
