/* params_view.c -- an approval's canonical parameters as rows a person reads
 * (approval_pages.c): paths for nested values, text as text, long values
 * folded.  It must never pass on JSON text of a value, nor agent text that has
 * not been through visible_text. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "buf.h"
#include "jcs.h"
#include "params_view.h"
#include "visible_text.h"

/* The view being built: the current group's rows, the label of the value at
 * hand (raw, before visible_text), and the bounds spent so far. */
struct pv {
	json_t *rows;
	struct buf path;
	const char *root_label;          /* the label of a group's value itself */
	size_t nrows, label_bytes, more;
	bool full;                       /* a bound was reached: rows are only counted */
};

/* Text made visible, NUL bytes included (visible_text reads up to the first
 * one): each NUL-free run through visible_text, each NUL as "[U+0000]". */
static enum cs_err shown_text(const char *s, size_t n, struct buf *out)
{
	enum cs_err e = CS_OK;
	size_t i = 0;
	while (i <= n && e == CS_OK) {
		const char *nul = memchr(s + i, '\0', n - i);
		size_t run = nul ? (size_t)(nul - (s + i)) : n - i;
		char *copy = malloc(run + 1), *vis = NULL;
		if (copy == NULL)
			return CS_ENOMEM;
		memcpy(copy, s + i, run);
		copy[run] = '\0';
		if ((vis = visible_text(copy)) == NULL)
			e = CS_ENOMEM;
		else
			e = buf_puts(out, vis);
		free(vis);
		free(copy);
		if (e == CS_OK && nul != NULL)
			e = buf_puts(out, "[U+0000]");
		i += run + 1;
		if (nul == NULL)
			break;
	}
	return e;
}

/* A json_string of what out holds (a new reference), NULL on failure. */
static json_t *shown_value(const char *s, size_t n)
{
	struct buf b;
	json_t *v = NULL;
	buf_init(&b, 8 * PARAMS_VIEW_MAX_INPUT + 16);
	if (shown_text(s, n, &b) == CS_OK)
		v = json_stringn(b.data ? b.data : "", b.len);
	buf_clear(&b);
	return v;
}

/* Where a string of n bytes folds: the byte offset just past its
 * PARAMS_VIEW_FOLD_CHARS-th code point or its PARAMS_VIEW_FOLD_LINES-th line
 * feed, whichever comes first; n when it does not fold.  *rest_chars: the code
 * points after it.  jansson hands back valid UTF-8 (NUL bytes aside), so a
 * lead byte alone tells a code point's length. */
static size_t fold_at(const char *s, size_t n, size_t *rest_chars)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, cps = 0, lfs = 0, cut = n, after = 0;
	while (i < n) {
		if (cut == n && (cps == PARAMS_VIEW_FOLD_CHARS || lfs == PARAMS_VIEW_FOLD_LINES))
			cut = i;
		unsigned c = p[i];
		size_t len = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
		if (c == '\n')
			lfs++;
		if (cut != n)
			after++;
		cps++;
		i += len > n - i ? n - i : len;
	}
	*rest_chars = after;
	return cut;
}

/* Appends one row {label, value, kind flags} for the value at the current path. */
static enum cs_err add_row(struct pv *pv, json_t *value, const char *kind, const char *rest,
    size_t rest_len, size_t rest_chars)
{
	enum cs_err e = CS_ENOMEM;
	const char *raw = pv->path.len ? pv->path.data : pv->root_label;
	char *label = NULL;
	json_t *row = NULL, *restv = NULL;
	if (pv->full || pv->nrows >= PARAMS_VIEW_MAX_ROWS) {
		pv->full = true;
		pv->more++;
		json_decref(value);
		return CS_OK;
	}
	if ((label = visible_text(raw)) == NULL)
		goto out;
	/* Bound the labels (a deep path repeats its prefix on every row): past the budget
	 * the rows are counted, except the first, which is always listed. */
	if (pv->nrows > 0 && pv->label_bytes + strlen(label) > PARAMS_VIEW_LABEL_BUDGET) {
		pv->full = true;
		pv->more++;
		e = CS_OK;
		goto out;
	}
	if (rest != NULL && (restv = shown_value(rest, rest_len)) == NULL)
		goto out;
	row = json_pack("{s:s, s:O, s:b, s:b, s:b, s:b, s:O, s:I}", "label", label, "value", value,
	    "text", strcmp(kind, "text") == 0, "literal", strcmp(kind, "literal") == 0,
	    "words", strcmp(kind, "words") == 0, "folded", rest != NULL,
	    "rest", restv ? restv : json_null(), "rest_chars", (json_int_t)rest_chars);
	if (row == NULL || json_array_append_new(pv->rows, row) != 0)
		goto out;
	pv->nrows++;
	pv->label_bytes += strlen(label);
	e = CS_OK;
out:
	free(label);
	json_decref(value);
	json_decref(restv);
	return e;
}

static enum cs_err string_row(struct pv *pv, json_t *v)
{
	const char *s = json_string_value(v);
	size_t n = json_string_length(v), rest_chars = 0, cut;
	json_t *head;
	if (n == 0)
		return add_row(pv, json_string("(empty text)"), "words", NULL, 0, 0);
	cut = fold_at(s, n, &rest_chars);
	if ((head = shown_value(s, cut)) == NULL)
		return CS_ENOMEM;
	return add_row(pv, head, "text", cut < n ? s + cut : NULL, n - cut, rest_chars);
}

static enum cs_err number_row(struct pv *pv, json_t *v)
{
	struct buf b;
	enum cs_err e;
	buf_init(&b, 64);
	/* Every number read as a double and written back gives the very digits of the
	 * canonical text (RFC 8785 numbers are ECMAScript's; see jcs_pretty). */
	if ((e = jcs_number(json_number_value(v), &b)) == CS_OK)
		e = add_row(pv, json_string(b.data), "literal", NULL, 0, 0);
	buf_clear(&b);
	return e;
}

/* Whether a member name may stand in a label unquoted. */
static bool bare_name(const char *k)
{
	if (*k == '\0')
		return false;
	for (; *k; k++)
		if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') ||
		    (*k >= '0' && *k <= '9') || *k == '_' || *k == '-'))
			return false;
	return true;
}

/* Appends a member name to the path: name, .name or ["na\"me"].  SECURITY: in a
 * quoted name '"', '\' and '[' are escaped, so that neither the end of the name nor
 * a visible_text marker ("[U+200B]", unescaped) can be typed into it: two paths
 * never share a label. */
static enum cs_err path_name(struct buf *p, const char *k)
{
	enum cs_err e = CS_OK;
	if (bare_name(k))
		return p->len ? buf_printf(p, ".%s", k) : buf_puts(p, k);
	e = buf_puts(p, "[\"");
	for (; *k && e == CS_OK; k++) {
		if (*k == '"' || *k == '\\' || *k == '[')
			e = buf_printf(p, "\\%c", *k);
		else if (*k == '\n')
			e = buf_puts(p, "[U+000A]");
		else
			e = buf_append(p, k, 1);
	}
	return e == CS_OK ? buf_puts(p, "\"]") : e;
}

static enum cs_err flatten(struct pv *pv, json_t *v)
{
	enum cs_err e = CS_OK;
	size_t mark = pv->path.len;
	if (json_is_object(v)) {
		const char *k;
		json_t *m;
		if (json_object_size(v) == 0)
			return mark ? add_row(pv, json_string("(no fields)"), "words", NULL, 0, 0) : CS_OK;
		json_object_foreach(v, k, m) {
			if ((e = path_name(&pv->path, k)) != CS_OK || (e = flatten(pv, m)) != CS_OK)
				return e;
			buf_truncate(&pv->path, mark);
		}
		return CS_OK;
	}
	if (json_is_array(v)) {
		size_t i;
		json_t *m;
		if (json_array_size(v) == 0)
			return mark ? add_row(pv, json_string("(empty list)"), "words", NULL, 0, 0) : CS_OK;
		json_array_foreach(v, i, m) {
			if ((e = buf_printf(&pv->path, "[%zu]", i)) != CS_OK || (e = flatten(pv, m)) != CS_OK)
				return e;
			buf_truncate(&pv->path, mark);
		}
		return CS_OK;
	}
	if (json_is_string(v))
		return string_row(pv, v);
	if (json_is_number(v))
		return number_row(pv, v);
	return add_row(pv, json_string(json_is_true(v) ? "true" : json_is_false(v) ? "false" : "null"),
	    "literal", NULL, 0, 0);
}

/* True when v has nothing to list: null, {} or []. */
static bool empty_value(json_t *v)
{
	return json_is_null(v) || (json_is_object(v) && json_object_size(v) == 0) ||
	    (json_is_array(v) && json_array_size(v) == 0);
}

/* The group of pv->rows appended to groups: its none (when given) shown when
 * it has no rows. */
static enum cs_err append_group(struct pv *pv, json_t *groups, const char *group,
    const char *heading, const char *none)
{
	json_t *g = json_pack("{s:s, s:s?, s:s?, s:b, s:O}", "group", group, "heading", heading,
	    "none", json_array_size(pv->rows) == 0 ? none : NULL,
	    "has_rows", json_array_size(pv->rows) > 0, "rows", pv->rows);
	if (g == NULL || json_array_append_new(groups, g) != 0)
		return CS_ENOMEM;
	return CS_OK;
}

/* Flattens v into a new group appended to groups.  A group whose rows were all
 * cut by the bounds is left out (the "more" count tells of them); an empty
 * value's group says none instead. */
static enum cs_err add_group(struct pv *pv, json_t *groups, const char *group, const char *heading,
    const char *none, const char *root_label, json_t *v)
{
	enum cs_err e = CS_ENOMEM;
	if ((pv->rows = json_array()) == NULL)
		return CS_ENOMEM;
	buf_reset(&pv->path);
	pv->root_label = root_label;
	if (json_is_null(v) && strcmp(group, "values") != 0) {
		e = CS_OK;                    /* a request without a body: no group */
		goto out;
	}
	/* null, {} and [] as the whole value: no rows, the group's none says so. */
	if (!empty_value(v) && (e = flatten(pv, v)) != CS_OK)
		goto out;
	if (json_array_size(pv->rows) == 0 && !empty_value(v)) {
		e = CS_OK;
		goto out;
	}
	e = append_group(pv, groups, group, heading, none);
out:
	json_decref(pv->rows);
	pv->rows = NULL;
	return e;
}

/* The query as the address has it: each value of a repeated name listed under
 * that name; anything else (the proxy never builds it) flattened as usual. */
static enum cs_err add_query_group(struct pv *pv, json_t *groups, json_t *q)
{
	const char *k;
	json_t *vals;
	enum cs_err e = CS_ENOMEM;
	if ((pv->rows = json_array()) == NULL)
		return CS_ENOMEM;
	buf_reset(&pv->path);
	pv->root_label = "query";
	json_object_foreach(q, k, vals) {
		size_t i;
		json_t *s;
		bool strings = json_is_array(vals) && json_array_size(vals) > 0;
		json_array_foreach(vals, i, s)
			strings = strings && json_is_string(s);
		if ((e = path_name(&pv->path, k)) != CS_OK)
			goto out;
		if (strings) {
			json_array_foreach(vals, i, s)
				if ((e = flatten(pv, s)) != CS_OK)
					goto out;
		} else if ((e = flatten(pv, vals)) != CS_OK) {
			goto out;
		}
		buf_reset(&pv->path);
	}
	if (json_array_size(pv->rows) == 0) {
		e = CS_OK;                    /* every row cut by the bounds */
		goto out;
	}
	e = append_group(pv, groups, "query", "In the query", NULL);
out:
	json_decref(pv->rows);
	pv->rows = NULL;
	return e;
}

/* The proxy's parameters, {"path": {..}, "query": {..}, "body": ..} and nothing else. */
static bool proxy_shaped(json_t *v)
{
	return json_is_object(v) && json_object_size(v) == 3 &&
	    json_is_object(json_object_get(v, "path")) &&
	    json_is_object(json_object_get(v, "query")) && json_object_get(v, "body") != NULL;
}

enum cs_err params_view(const char *canonical, bool proxied, json_t **out)
{
	struct pv pv = { 0 };
	json_t *v = NULL, *groups = NULL, *view = NULL;
	enum cs_err e = CS_ENOMEM;
	if (strlen(canonical) > PARAMS_VIEW_MAX_INPUT)
		return CS_ETOOBIG;
	/* SECURITY: read exactly as stored -- duplicates refused, NUL kept (and shown),
	 * numbers as doubles so that they write back to their canonical digits. */
	v = json_loads(canonical, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL |
	    JSON_ALLOW_NUL, NULL);
	if (v == NULL)
		return CS_EINVAL;
	/* The path holds at most every name on the way down (a name's byte is at most 8
	 * bytes of it) and an index per level. */
	buf_init(&pv.path, 16 * PARAMS_VIEW_MAX_INPUT);
	if ((groups = json_array()) == NULL)
		goto out;
	bool request = proxied && proxy_shaped(v);
	if (request) {
		json_t *path = json_object_get(v, "path"), *q = json_object_get(v, "query"),
		    *body = json_object_get(v, "body");
		if (json_object_size(path) > 0 &&
		    (e = add_group(&pv, groups, "path", "In the address", NULL, "path", path)) != CS_OK)
			goto out;
		if (json_object_size(q) > 0 && (e = add_query_group(&pv, groups, q)) != CS_OK)
			goto out;
		if ((e = add_group(&pv, groups, "body", "In the body", json_is_array(body) ?
		    "An empty list." : "No fields.", "body", body)) != CS_OK)
			goto out;
		if (json_array_size(groups) == 0 && pv.more == 0 &&
		    (e = add_group(&pv, groups, "values", NULL, "No values.", "value", json_null())) != CS_OK)
			goto out;
	} else if ((e = add_group(&pv, groups, "values", NULL, "No values.", "value", v)) != CS_OK) {
		goto out;
	}
	e = CS_ENOMEM;
	view = json_pack("{s:b, s:O, s:b, s:I}", "request", request, "groups", groups,
	    "has_more", pv.more > 0, "more", (json_int_t)pv.more);
	if (view != NULL) {
		*out = view;
		e = CS_OK;
	}
out:
	buf_clear(&pv.path);
	json_decref(groups);
	json_decref(v);
	return e;
}
