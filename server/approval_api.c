/* approval_api.c -- the OAuth answers for approval outcomes (flow F), for the
 * gateway's handlers at /token and /proxy.  Fixed words, numbers and ids only:
 * never a parameter's value, never a token. */
#include <string.h>

#include "approval_api.h"
#include "authzen.h"
#include "buf.h"

/* The description of a waiting outcome (needed, slow_down, pending). */
static enum cs_err waiting_description(const struct approval_answer *a, char *desc, size_t n)
{
	long long iv = (long long)a->interval;
	if (a->outcome == APPROVAL_NEEDED)
		return str_fmt(desc, n, "this action needs the person's approval: send them to "
		    "approval_uri, then repeat this call every %lld s", iv);
	if (a->outcome == APPROVAL_SLOW_DOWN)
		return str_fmt(desc, n, "polled faster than the interval: wait %lld s between calls "
		    "from now on", iv);
	return str_fmt(desc, n, "the person has not decided on this action yet; repeat this "
	    "call in %lld s", iv);
}

/* Who denied, and until when (issue #32): the decision point ([authzen]), the
 * organisation's policy line,
 * another decider named by decided_by, or the person, whose denial holds for
 * retry_after more seconds (until the person lets it ask again on /me). */
static enum cs_err denied_description(const struct approval_answer *a, int64_t now, char *desc,
    size_t n)
{
	char when[STR_TIME_LEN];
	if (authzen_denied(a))
		return str_fmt(desc, n, "%s", AUTHZEN_DENIED_WORDS);
	if (a->decided_by != NULL && strncmp(a->decided_by, "policy ", 7) == 0)
		return str_fmt(desc, n, "denied by the organisation's policy (%s): no one is asked, "
		    "and the same call is denied every time", a->decided_by);
	if (a->decided_by != NULL)
		return str_fmt(desc, n, "denied by the %s, not by a person", a->decided_by);
	int64_t left = a->retry_after > 0 ? a->retry_after : 0;
	(void)str_time(now + left, when);
	return str_fmt(desc, n, "the person denied this action with these parameters; the same "
	    "call is refused until %s (%lld s from now) unless the person lets it ask again on "
	    "their /me page", when, (long long)left);
}

enum cs_err approval_answer_reply(struct http_reply *rep, const struct config *cfg,
    const struct approval_answer *a, int status, int64_t now)
{
	char uri[600], ra[32], desc[300];
	enum cs_err e;
	switch (a->outcome) {
	case APPROVAL_DENIED:
		if ((e = denied_description(a, now, desc, sizeof desc)) != CS_OK)
			return e;
		return reply_oauth_error(rep, status, "access_denied", desc);
	case APPROVAL_EXPIRED:
		return reply_oauth_error(rep, status, "expired_token",
		    "the approval request expired before the person decided; the next call starts a "
		    "new one");
	case APPROVAL_TOO_MANY:
		if ((e = str_fmt(ra, sizeof ra, "%lld",
		    (long long)(a->retry_after > 0 ? a->retry_after : 1))) != CS_OK)
			return e;
		e = a->rate_limited ? reply_oauth_error(rep, 429, "too_many_requests",
		    "rate limit exceeded: the person limit ([limits] person_rate) refused a new "
		    "approval request for this person") :
		    reply_oauth_error(rep, 429, "too_many_pending_requests",
		    "this person has too many pending approvals");
		return e == CS_OK ? reply_header(rep, "Retry-After", ra) : e;
	default:
		break;
	}
	const char *error_code = a->outcome == APPROVAL_NEEDED ? "approval_required" :
	    a->outcome == APPROVAL_SLOW_DOWN ? "slow_down" : "authorization_pending";
	if ((e = waiting_description(a, desc, sizeof desc)) != CS_OK)
		return e;
	if (a->approval_id != NULL && (e = str_fmt(uri, sizeof uri, "%s/approve/%s", cfg->public_url,
	    a->approval_id)) != CS_OK)
		return e;
	return reply_oauth_pending(rep, status, error_code, desc, &(struct reply_pending){
	    .id_key = "approval_request_id", .id = a->approval_id, .uri_key = "approval_uri",
	    .uri = uri, .expires_in = a->expires_in, .interval = a->interval });
}
