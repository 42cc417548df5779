/* pages.h -- what the person's pages share (consent_pages.h, approval_pages.h,
 * me_pages.h): agent text made visible, times and names as the templates show
 * them, the page for a request opened by another account.  The provider's
 * callback is vault_pages.h. */
#ifndef CS_PAGES_H
#define CS_PAGES_H
#include <jansson.h>
#include "config.h"
#include "http.h"
#include "login.h"
#include "visible_text.h"      /* visible_text(), defined in pages.c */

struct session;
struct consent_refusal;

/* A time for a template: {"iso": "2026-12-01T20:00:00Z", "utc": "2026-12-01 20:00 UTC"},
 * written <time datetime="{{iso}}" title="{{utc}}">{{utc}}</time>, which
 * /static/local-time.js rewrites into the reader's local time.  NULL on failure. */
json_t *pages_time_value(int64_t t);
/* The configured name of an agent or resource; the id when it is no longer configured. */
const char *pages_agent_name(const struct config *cfg, const char *id);
const char *pages_resource_name(const struct config *cfg, const char *id);
/* Who is signed in, as a page names them (name, else e-mail, else subject),
 * through visible_text; malloc'd, NULL on allocation failure. */
char *pages_signed_in_name(const struct session *s);
/* The return_to path /kind/id/tail in out, or "/me" when it would not fit. */
const char *pages_return_path(char out[LOGIN_RETURN_TO_MAX + 1], const char *kind,
    const char *id, const char *tail);
/* SECURITY: session binding (invariant 4).  Audits that s opened another
 * person's request f (consent_refuse_binding; its actor and time are filled
 * here) and answers 403 with a way to sign in as the right person.  kind is
 * "consent" or "approve" (the request page's path). */
enum cs_err pages_refuse_other_account(const struct http_request *req, struct http_reply *rep,
    const struct session *s, const char *kind, struct consent_refusal *f) CS_MUST_CHECK;

#endif
