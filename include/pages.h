/* pages.h -- the person's pages for consent (flow B) and approval (flow F); /me is me_pages.h. */
#ifndef CS_PAGES_H
#define CS_PAGES_H
#include "http.h"

enum cs_err pages_consent_show(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err pages_consent_decide(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err pages_consent_done(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err pages_approve_show(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err pages_approve_decide(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

/* A copy of s (which may be any bytes) that shows what a person would not
 * see: every Unicode Default_Ignorable_Code_Point (bidi controls, zero-width
 * characters, fillers, variation selectors, TAG characters), the C0 controls
 * but LF, DEL and the C1 controls become a visible "[U+hex]" marker (e.g.
 * "[U+202E]", "[U+E0041]"), and each ill-formed UTF-8 sequence becomes U+FFFD.
 * Everything else, LF included, is copied as it is; HTML escaping is the
 * template's job.  NULL on allocation failure. */
char *visible_text(const char *s);

#endif
