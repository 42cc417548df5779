/* scope.c -- scope sets (scope.h): parsing a scope list by RFC 6749's grammar
 * and the set operations consents and grants are checked with.  It must never
 * let a malformed or oversized list through as a set. */
#include <stdlib.h>
#include <string.h>

#include "scope.h"

void scope_set_clear(struct scope_set *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->n && i < SCOPE_SET_MAX; i++)
		free(s->v[i]);
	memset(s, 0, sizeof *s);
}

/* RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ). */
static bool scope_char_ok(unsigned char ch)
{
	return ch == 0x21 || (ch >= 0x23 && ch <= 0x5B) || (ch >= 0x5D && ch <= 0x7E);
}

/* Compares the len bytes at p (no NUL inside) with the string t, as strcmp would. */
static int cmp_n(const char *p, size_t len, const char *t)
{
	int r = strncmp(p, t, len);
	if (r != 0)
		return r;
	return t[len] == '\0' ? 0 : -1;
}

enum cs_err scope_set_add(struct scope_set *s, const char *p, size_t len)
{
	size_t i = 0;
	int r = 1;
	for (; i < s->n; i++) {
		r = cmp_n(p, len, s->v[i]);
		if (r <= 0)
			break;
	}
	if (i < s->n && r == 0)
		return CS_OK;                 /* already there */
	if (s->n >= SCOPE_SET_MAX)
		return CS_ETOOBIG;
	char *dup = strndup(p, len);
	if (dup == NULL)
		return CS_ENOMEM;
	memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof s->v[0]);
	s->v[i] = dup;
	s->n++;
	return CS_OK;
}

enum cs_err scope_set_parse(const char *s, struct scope_set *out)
{
	struct scope_set t;
	enum cs_err e = CS_OK;
	const char *p = s;

	memset(&t, 0, sizeof t);
	if (s == NULL || out == NULL)
		return CS_EINVAL;
	while (*p != '\0') {
		const char *start = p;
		for (; *p != '\0' && *p != ' '; p++) {
			if (!scope_char_ok((unsigned char)*p)) {
				e = CS_EINVAL;
				goto out;
			}
		}
		size_t len = (size_t)(p - start);
		/* An empty token: a leading, doubled or trailing space. */
		if (len == 0) {
			e = CS_EINVAL;
			goto out;
		}
		if (len > SCOPE_TOKEN_MAX) {
			e = CS_ETOOBIG;
			goto out;
		}
		if ((e = scope_set_add(&t, start, len)) != CS_OK)
			goto out;
		if (*p == ' ') {
			p++;
			if (*p == '\0') {     /* trailing space */
				e = CS_EINVAL;
				goto out;
			}
		}
	}
	*out = t;
	memset(&t, 0, sizeof t);
out:
	scope_set_clear(&t);
	return e;
}

bool scope_set_has(const struct scope_set *s, const char *name)
{
	if (s == NULL || name == NULL)
		return false;
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i], name) == 0)
			return true;
	return false;
}

bool scope_set_subset(const struct scope_set *a, const struct scope_set *b)
{
	if (a == NULL)
		return true;
	for (size_t i = 0; i < a->n; i++)
		if (!scope_set_has(b, a->v[i]))
			return false;
	return true;
}

char *scope_set_join(const struct scope_set *s)
{
	size_t len = 1, o = 0;
	for (size_t i = 0; s != NULL && i < s->n; i++)
		len += strlen(s->v[i]) + 1;
	char *p = malloc(len);
	if (p == NULL)
		return NULL;
	for (size_t i = 0; s != NULL && i < s->n; i++) {
		size_t n = strlen(s->v[i]);
		if (i > 0)
			p[o++] = ' ';
		memcpy(p + o, s->v[i], n);
		o += n;
	}
	p[o] = '\0';
	return p;
}

enum cs_err scope_set_union(struct scope_set *dst, const struct scope_set *src)
{
	enum cs_err e;
	for (size_t i = 0; i < src->n; i++)
		if ((e = scope_set_add(dst, src->v[i], strlen(src->v[i]))) != CS_OK)
			return e;
	return CS_OK;
}

/* out ∪= the scopes of a that are in b (keep) or not in b (!keep). */
static enum cs_err filter(struct scope_set *out, const struct scope_set *a,
    const struct scope_set *b, bool keep)
{
	enum cs_err e;
	for (size_t i = 0; i < a->n; i++)
		if (scope_set_has(b, a->v[i]) == keep &&
		    (e = scope_set_add(out, a->v[i], strlen(a->v[i]))) != CS_OK)
			return e;
	return CS_OK;
}

enum cs_err scope_set_intersect(struct scope_set *out, const struct scope_set *a,
    const struct scope_set *b)
{
	return filter(out, a, b, true);
}

enum cs_err scope_set_minus(struct scope_set *out, const struct scope_set *a,
    const struct scope_set *b)
{
	return filter(out, a, b, false);
}
