/* pages.h -- the person's pages for consent (flow B) and self-service on /me. */
#ifndef CS_PAGES_H
#define CS_PAGES_H
#include "http.h"

enum cs_err pages_consent_show(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err pages_consent_decide(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err pages_consent_done(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err pages_provider_callback(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err pages_approve_show(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err pages_approve_decide(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err pages_me(const struct http_request *, struct http_reply *) CS_MUST_CHECK;
enum cs_err pages_me_revoke(const struct http_request *, struct http_reply *) CS_MUST_CHECK;

/* A copy of s in which bidirectional controls and invisible characters
 * (U+200B-U+200F, U+202A-U+202E, U+2060-U+2064, U+2066-U+2069, U+FEFF, U+061C,
 * U+00AD) are replaced by a visible "[U+hex]" marker (e.g. "[U+202E]"), so agent-supplied text cannot
 * disguise itself.  NULL on allocation failure. */
char *visible_text(const char *s);

#endif
