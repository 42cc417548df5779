/* visible_text.h -- agent text made visible: the one filter every page puts
 * agent-supplied text through (defined in pages.c).  Knows no HTTP, so that
 * pure modules such as params_view.c can use it. */
#ifndef CS_VISIBLE_TEXT_H
#define CS_VISIBLE_TEXT_H

/* A copy of s (which may be any bytes) that shows what a person would not
 * see: every Unicode Default_Ignorable_Code_Point (bidi controls, zero-width
 * characters, fillers, variation selectors, TAG characters), the C0 controls
 * but LF, DEL and the C1 controls become a visible "[U+hex]" marker (e.g.
 * "[U+202E]", "[U+E0041]"), and each ill-formed UTF-8 sequence becomes U+FFFD.
 * Everything else, LF included, is copied as it is; HTML escaping is the
 * template's job.  NULL on allocation failure. */
char *visible_text(const char *s);

#endif
