/* params_view.h -- an approval's parameters as a person reads them: rows of
 * (label, value), nested values flattened into paths, text as text, long values
 * folded, invisible characters made visible.  Pure: no HTTP, no store; it never
 * hands back JSON text of a value. */
#ifndef CS_PARAMS_VIEW_H
#define CS_PARAMS_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include "cs_err.h"

/* Bounds.  The input is the canonical JSON an approval stores (at most
 * APPROVAL_MAX_CANONICAL bytes, half of this); rows past PARAMS_VIEW_MAX_ROWS,
 * or past PARAMS_VIEW_LABEL_BUDGET bytes of labels, are counted, not listed.
 * A value longer than PARAMS_VIEW_FOLD_CHARS code points or
 * PARAMS_VIEW_FOLD_LINES lines shows that much and folds the rest away. */
#define PARAMS_VIEW_MAX_INPUT (64u * 1024)
#define PARAMS_VIEW_MAX_ROWS 200
#define PARAMS_VIEW_LABEL_BUDGET (64u * 1024)
#define PARAMS_VIEW_FOLD_CHARS 280
#define PARAMS_VIEW_FOLD_LINES 8

/* The readable list of canonical (JSON text, I-JSON, as struct approval's
 * parameters), for a template, into *out (a new reference; written only on CS_OK):
 *
 *   {"request": bool, "groups": [GROUP...], "has_more": bool, "more": N}
 *   GROUP = {"group": "values"|"path"|"query"|"body", "heading": text or null,
 *            "none": text or null (the group's value is empty: "No values."),
 *            "has_rows": bool, "rows": [ROW...]}
 *   ROW   = {"label": text, "value": text, "text": bool, "literal": bool,
 *            "words": bool, "folded": bool, "rest": text or null, "rest_chars": N}
 *
 * Labels.  A member of an object is its name, after its parent's label and a
 * dot (body.title); an element of an array is its 0-based index in brackets
 * (labels[0], nested.a[1]).  A name of anything but ASCII letters, digits, '_'
 * and '-' is written quoted in brackets (["a.b"], ["two words"]), with '"',
 * '\' and '[' escaped by a backslash and a line feed written [U+000A]: no name
 * can pass for a path, nor typed text for a marker, and two values never share
 * a label (the query's repeated names aside).  A value that is not inside an object or array is labelled
 * "value" ("body" for a request's body).
 * Values.  A string is its text ("text"), line feeds kept as line breaks; a
 * number its RFC 8785 digits, true, false and null as those words ("literal",
 * shown as code); the empty string, an empty object and an empty array are
 * "(empty text)", "(no fields)", "(empty list)" ("words").  A folded value's
 * "value" is its first PARAMS_VIEW_FOLD_CHARS code points (or lines) and "rest"
 * the remainder, rest_chars code points long: together the whole text.
 * Labels and text go through visible_text (pages.h): bidi controls, zero-width
 * and control characters but LF come out as [U+XXXX] markers; a NUL as [U+0000].
 * Every group lists its rows in the text's member order (canonical order).
 *
 * proxied: the approval is for a request through the proxy (its action has a
 * route).  When canonical also has the proxy's shape {"path": {..}, "query":
 * {name: [values]}, "body": ..}, the rows come in groups "path" ("In the
 * address"), "query" ("In the query": a repeated name is listed once per value)
 * and "body" ("In the body": its members under their own names), each left out
 * when empty (the body when null), and "request" is true; otherwise one group
 * "values", heading null.
 * When no group is left, one group "values" whose none is "No values.".
 *
 * CS_EINVAL when canonical is not JSON (or holds what jansson cannot read back,
 * a NUL in a member name); CS_ETOOBIG past PARAMS_VIEW_MAX_INPUT bytes; CS_ENOMEM. */
enum cs_err params_view(const char *canonical, bool proxied, json_t **out) CS_MUST_CHECK;

#endif
