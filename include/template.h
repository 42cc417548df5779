/* template.h -- HTML pages from templates/ (compiled in), escaping by default.
 * Syntax: {{name}} prints a value HTML-escaped; {{#name}}..{{/name}} repeats for
 * each element of an array (or once for a true / non-empty value, with an object
 * as the inner context); {{^name}}..{{/name}} renders when the value is missing,
 * false, null, "" or []; {{> file}} includes another template.  There is no raw
 * output: markup lives only in the template files themselves. */
#ifndef CS_TEMPLATE_H
#define CS_TEMPLATE_H

#include <jansson.h>
#include "buf.h"
#include "cs_err.h"

/* Renders the template file name (e.g. "error.html") with ctx (a JSON object)
 * appended to out.  CS_ENOENT for an unknown template, CS_EINVAL for a
 * malformed one; on failure out keeps its previous length. */
enum cs_err template_render(const char *name, json_t *ctx, struct buf *out) CS_MUST_CHECK;

/* Checks that every compiled-in template parses (used by tests and at start). */
enum cs_err template_check_all(void) CS_MUST_CHECK;

#endif
