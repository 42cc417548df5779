/* template.c -- a tiny logic-less template engine over jansson values.
 * Every substituted value is HTML-escaped; there is deliberately no way to
 * print a value raw.  Includes and sections nest to a fixed depth. */
#include <stdio.h>
#include <string.h>
#include "buf.h"
#include "embed.h"
#include "template.h"

#define TPL_MAX_DEPTH 8
#define TPL_MAX_NAME 64

struct tpl_ctx {
	json_t *stack[TPL_MAX_DEPTH * 2];
	size_t  n;
};

static const struct embedded_file *tpl_find(const char *name)
{
	for (const struct embedded_file *f = embedded_templates; f->name; f++)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

static json_t *tpl_lookup(const struct tpl_ctx *c, const char *name)
{
	if (strcmp(name, ".") == 0)
		return c->n ? c->stack[c->n - 1] : NULL;
	for (size_t i = c->n; i-- > 0;) {
		if (json_is_object(c->stack[i])) {
			json_t *v = json_object_get(c->stack[i], name);
			if (v)
				return v;
		}
	}
	return NULL;
}

static int tpl_truthy(json_t *v)
{
	if (v == NULL || json_is_null(v) || json_is_false(v))
		return 0;
	if (json_is_string(v))
		return json_string_length(v) > 0;
	if (json_is_array(v))
		return json_array_size(v) > 0;
	return 1;
}

static enum cs_err tpl_print(json_t *v, struct buf *out)
{
	char num[64];
	if (v == NULL || json_is_null(v))
		return CS_OK;
	if (json_is_string(v))
		return buf_html(out, json_string_value(v));
	if (json_is_integer(v)) {
		enum cs_err e = str_fmt(num, sizeof num, "%lld", (long long)json_integer_value(v));
		return e != CS_OK ? e : buf_html(out, num);
	}
	if (json_is_real(v)) {
		enum cs_err e = str_fmt(num, sizeof num, "%g", json_real_value(v));
		return e != CS_OK ? e : buf_html(out, num);
	}
	if (json_is_boolean(v))
		return buf_html(out, json_is_true(v) ? "true" : "false");
	return CS_EINVAL;        /* objects and arrays are not printable */
}

/* Reads a tag starting at s (just after "{{"); fills kind and name, returns
 * the position after "}}" or NULL when malformed. */
static const char *tpl_tag(const char *s, const char *end, char *kind, char name[TPL_MAX_NAME])
{
	const char *close = NULL;
	for (const char *p = s; p + 1 < end; p++)
		if (p[0] == '}' && p[1] == '}') { close = p; break; }
	if (close == NULL)
		return NULL;
	*kind = ' ';
	if (s < close && (*s == '#' || *s == '^' || *s == '/' || *s == '>'))
		*kind = *s++;
	while (s < close && *s == ' ')
		s++;
	const char *ne = close;
	while (ne > s && ne[-1] == ' ')
		ne--;
	size_t n = (size_t)(ne - s);
	if (n == 0 || n >= TPL_MAX_NAME)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		    ch == '_' || ch == '-' || ch == '.'))
			return NULL;
	}
	memcpy(name, s, n);
	name[n] = '\0';
	return close + 2;
}

/* Finds the {{/name}} that closes a section opened just before s, honouring nesting. */
static const char *tpl_section_end(const char *s, const char *end, const char *name,
    const char **after)
{
	int depth = 0;
	for (const char *p = s; p + 1 < end; p++) {
		if (p[0] != '{' || p[1] != '{')
			continue;
		char kind, n[TPL_MAX_NAME];
		const char *q = tpl_tag(p + 2, end, &kind, n);
		if (q == NULL)
			return NULL;
		if ((kind == '#' || kind == '^') && strcmp(n, name) == 0)
			depth++;
		else if (kind == '/' && strcmp(n, name) == 0) {
			if (depth == 0) {
				*after = q;
				return p;
			}
			depth--;
		}
		p = q - 1;
	}
	return NULL;
}

static enum cs_err tpl_run(const char *s, const char *end, struct tpl_ctx *c, struct buf *out,
    int depth);

static enum cs_err tpl_include(const char *name, struct tpl_ctx *c, struct buf *out, int depth)
{
	const struct embedded_file *f = tpl_find(name);
	if (f == NULL)
		return CS_ENOENT;
	return tpl_run(f->data, f->data + f->len, c, out, depth + 1);
}

static enum cs_err tpl_run(const char *s, const char *end, struct tpl_ctx *c, struct buf *out,
    int depth)
{
	enum cs_err e = CS_OK;
	if (depth > TPL_MAX_DEPTH)
		return CS_EINVAL;
	while (s < end && e == CS_OK) {
		const char *open = NULL;
		for (const char *p = s; p + 1 < end; p++)
			if (p[0] == '{' && p[1] == '{') { open = p; break; }
		if (open == NULL)
			return buf_append(out, s, (size_t)(end - s));
		if ((e = buf_append(out, s, (size_t)(open - s))) != CS_OK)
			return e;
		char kind, name[TPL_MAX_NAME];
		const char *q = tpl_tag(open + 2, end, &kind, name);
		if (q == NULL || kind == '/')
			return CS_EINVAL;
		if (kind == ' ') {
			e = tpl_print(tpl_lookup(c, name), out);
			s = q;
		} else if (kind == '>') {
			e = tpl_include(name, c, out, depth);
			s = q;
		} else {
			const char *after = NULL;
			const char *inner_end = tpl_section_end(q, end, name, &after);
			if (inner_end == NULL)
				return CS_EINVAL;
			json_t *v = tpl_lookup(c, name);
			if (c->n >= sizeof c->stack / sizeof c->stack[0])
				return CS_EINVAL;
			if (kind == '^') {
				if (!tpl_truthy(v))
					e = tpl_run(q, inner_end, c, out, depth + 1);
			} else if (json_is_array(v)) {
				size_t i;
				json_t *el;
				json_array_foreach(v, i, el) {
					c->stack[c->n++] = el;
					e = tpl_run(q, inner_end, c, out, depth + 1);
					c->n--;
					if (e != CS_OK)
						break;
				}
			} else if (tpl_truthy(v)) {
				c->stack[c->n++] = v;
				e = tpl_run(q, inner_end, c, out, depth + 1);
				c->n--;
			}
			s = after;
		}
	}
	return e;
}

enum cs_err template_render(const char *name, json_t *ctx, struct buf *out)
{
	const struct embedded_file *f = tpl_find(name);
	struct tpl_ctx c = { .n = 0 };
	size_t start = out->len;
	if (f == NULL)
		return CS_ENOENT;
	c.stack[c.n++] = ctx;
	enum cs_err e = tpl_run(f->data, f->data + f->len, &c, out, 0);
	if (e != CS_OK)
		buf_truncate(out, start);
	return e;
}

enum cs_err template_check_all(void)
{
	enum cs_err e = CS_OK;
	json_t *empty = json_object();
	if (empty == NULL)
		return CS_ENOMEM;
	for (const struct embedded_file *f = embedded_templates; f->name && e == CS_OK; f++) {
		struct buf b;
		buf_init(&b, 1u << 20);
		e = template_render(f->name, empty, &b);
		buf_clear(&b);
	}
	json_decref(empty);
	return e;
}
