/* config_base.c -- the bottom of the config family (config_priv.h): the load's
 * messages, kept and written sorted by line; the small helpers; the sections and
 * entries as read; and config.h's look-ups on a loaded struct config, which the
 * load's checks use as every other module does.  Every other config_*.c file and
 * config.c build on it, and it calls none of them.  It must never print a secret
 * value, and a look-up never changes the struct it reads. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "config.h"
#include "config_priv.h"

/* ---------------------------------------------------------------- reporting */

/* Messages are kept and written sorted by line once the load is over, so that
 * parse errors and value errors read in file order. */
/* Where a message points: the variable that set the value (env), else the
 * line of the file (0: the file as a whole), and the key when there is one. */
struct msg_at {
	bool        warning;
	const char *env;
	int         line;
	const char *key;
};

static void vreport(struct ctx *c, const struct msg_at *at, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static void vreport(struct ctx *c, const struct msg_at *at, const char *fmt, va_list ap)
{
	const bool warning = at->warning;
	const char *env = at->env, *key = at->key;
	const int line = at->line;
	struct buf b;
	enum cs_err r;
	if (!warning)
		c->nerr++;
	if (c->errs == NULL)
		return;
	buf_init(&b, 4096);
	r = buf_puts(&b, warning ? "warning: " : "");
	if (r == CS_OK && env != NULL)
		r = buf_printf(&b, "%s: ", env);
	else if (r == CS_OK && line > 0)
		r = buf_printf(&b, "%s:%d: ", c->file, line);
	else if (r == CS_OK)
		r = buf_printf(&b, "%s: ", c->file);
	if (r == CS_OK && key != NULL)
		r = buf_printf(&b, "%s: ", key);
	if (r == CS_OK)
		r = buf_vprintf(&b, fmt, ap);
	if (r == CS_ETOOBIG && b.data != NULL)
		r = CS_OK;                              /* keep what fits */
	if (r == CS_OK && c->nmsgs == c->capmsgs) {
		size_t ncap = c->capmsgs ? c->capmsgs * 2 : 16;
		struct msg *p = realloc(c->msgs, ncap * sizeof *p);
		if (p == NULL)
			r = CS_ENOMEM;
		else {
			c->msgs = p;
			c->capmsgs = ncap;
		}
	}
	if (r == CS_OK) {
		struct msg *m = &c->msgs[c->nmsgs++];
		m->line = env != NULL || line <= 0 ? INT_MAX : line;
		m->seq = c->nmsgs;
		m->text = buf_steal(&b);
		if (m->text == NULL)
			c->nmsgs--;
	}
	buf_clear(&b);
}

static int msg_cmp(const void *x, const void *y)
{
	const struct msg *a = x, *b = y;
	if (a->line != b->line)
		return a->line < b->line ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

void cfg_flush_messages(struct ctx *c)
{
	if (c->nmsgs > 0)
		qsort(c->msgs, c->nmsgs, sizeof *c->msgs, msg_cmp);
	for (size_t i = 0; i < c->nmsgs; i++) {
		if (c->errs != NULL)
			fprintf(c->errs, "%s\n", c->msgs[i].text);
		free(c->msgs[i].text);
	}
	free(c->msgs);
	c->msgs = NULL;
	c->nmsgs = c->capmsgs = 0;
	if (c->errs != NULL)
		fflush(c->errs);
}

/* An error at a line of the file (0: the file as a whole). */
void cfg_err_line(struct ctx *c, int line, const char *key, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(c, &(struct msg_at){ .line = line, .key = key }, fmt, ap);
	va_end(ap);
}

/* An error about an environment variable that is not tied to a key. */
void cfg_err_env(struct ctx *c, const char *var, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(c, &(struct msg_at){ .env = var }, fmt, ap);
	va_end(ap);
}

/* An error about the value of e, located where the value came from. */
void cfg_err_e(struct ctx *c, const struct entry *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(c, &(struct msg_at){ .env = e->env, .line = e->line, .key = e->key }, fmt, ap);
	va_end(ap);
}

void cfg_warn_e(struct ctx *c, const struct entry *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(c, &(struct msg_at){ .warning = true, .env = e->env, .line = e->line,
	    .key = e->key }, fmt, ap);
	va_end(ap);
}

/* ---------------------------------------------------------------- defaults */

void cfg_note_default(struct ctx *c, const struct section *s, const char *key, char kind,
    const char *fmt, ...)
{
	char head[160];
	va_list ap;
	enum cs_err e;
	if (c->defaults == NULL || s == NULL ||
	    str_fmt(head, sizeof head, "\n%s\t%s\t", s->name, key) != CS_OK)
		return;
	/* The first getter of a key says its default (a key read twice keeps it). */
	if (c->defaults->data != NULL && strstr(c->defaults->data, head) != NULL)
		return;
	e = buf_printf(c->defaults, "%s%c\t", head + 1, kind);
	va_start(ap, fmt);
	if (e == CS_OK)
		e = buf_vprintf(c->defaults, fmt, ap);
	va_end(ap);
	if (e == CS_OK)
		e = buf_puts(c->defaults, "\n");
	if (e != CS_OK)
		c->oom = true;
}

/* ---------------------------------------------------------------- small helpers */

char *cfg_xstrdup(struct ctx *c, const char *s)
{
	char *p = strdup(s);
	if (p == NULL)
		c->oom = true;
	return p;
}

char *cfg_xstrndup(struct ctx *c, const char *s, size_t n)
{
	char *p = strndup(s, n);
	if (p == NULL)
		c->oom = true;
	return p;
}

bool cfg_in_list(const char *const *list, const char *s)
{
	for (size_t i = 0; list[i] != NULL; i++)
		if (strcmp(list[i], s) == 0)
			return true;
	return false;
}

int cfg_list_index(const char *const *list, const char *s)
{
	for (int i = 0; list[i] != NULL; i++)
		if (strcmp(list[i], s) == 0)
			return i;
	return -1;
}

void cfg_free_strv(char **v)
{
	if (v == NULL)
		return;
	for (size_t i = 0; v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

/* Letters, digits, '_' and '-' (and ':' when colon), 1..MAX_PART characters. */
bool cfg_valid_part(const char *s, size_t n, bool colon)
{
	if (n == 0 || n > MAX_PART)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (!(isalnum(ch) || ch == '_' || ch == '-' || (colon && ch == ':')))
			return false;
	}
	return true;
}

/* Visible ASCII, no spaces: client ids, claim names, audiences. */
bool cfg_valid_token(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > MAX_ID)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

/* RFC 6749 scope-token: %x21 / %x23-5B / %x5D-7E. */
bool cfg_valid_scope_token(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch < 0x21 || ch > 0x7e || ch == '"' || ch == '\\')
			return false;
	}
	return true;
}

/* Strict base-10 integer within [min, max]; NULL or why not. */
const char *cfg_parse_int(const char *s, int64_t min, int64_t max, int64_t *out)
{
	if (!(isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1]))))
		return "not an integer";
	errno = 0;
	char *end = NULL;
	long long v = strtoll(s, &end, 10);
	if (end == s || *end != '\0')
		return "not an integer";
	if (errno == ERANGE || v < min || v > max)
		return "out of range";
	*out = (int64_t)v;
	return NULL;
}

/* Splits on spaces and tabs into a NULL-terminated array (never NULL unless OOM). */
char **cfg_split_words(struct ctx *c, const char *s, size_t *count)
{
	size_t n = 0;
	for (const char *p = s; *p;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			break;
		n++;
		while (*p && *p != ' ' && *p != '\t')
			p++;
	}
	char **v = calloc(n + 1, sizeof *v);
	if (v == NULL) {
		c->oom = true;
		return NULL;
	}
	size_t i = 0;
	for (const char *p = s; *p && i < n;) {
		while (*p == ' ' || *p == '\t')
			p++;
		const char *w = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
		v[i] = cfg_xstrndup(c, w, (size_t)(p - w));
		if (v[i] == NULL) {
			cfg_free_strv(v);
			return NULL;
		}
		i++;
	}
	*count = n;
	return v;
}

bool cfg_has_dup(char *const *v, size_t n, size_t *which)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(v[i], v[j]) == 0) {
				*which = i;
				return true;
			}
	return false;
}

/* ---------------------------------------------------------------- sections and entries */

struct section *cfg_add_section(struct ctx *c, const struct section_head *h)
{
	const char *a = h->a, *b = h->b;
	if (c->nsecs == c->capsecs) {
		size_t ncap = c->capsecs ? c->capsecs * 2 : 16;
		struct section *p = realloc(c->secs, ncap * sizeof *p);
		if (p == NULL) {
			c->oom = true;
			return NULL;
		}
		c->secs = p;
		c->capsecs = ncap;
	}
	struct section *s = &c->secs[c->nsecs];
	memset(s, 0, sizeof *s);
	s->kind = h->kind;
	s->line = h->line;
	s->name = cfg_xstrdup(c, h->name);
	if (a != NULL)
		s->a = cfg_xstrndup(c, a, h->alen);
	if (b != NULL)
		s->b = cfg_xstrndup(c, b, h->blen);
	if (s->name == NULL || (a != NULL && s->a == NULL) || (b != NULL && s->b == NULL)) {
		free(s->name);
		free(s->a);
		free(s->b);
		return NULL;
	}
	c->nsecs++;
	return s;
}

struct entry *cfg_find(const struct section *s, const char *key)
{
	for (size_t i = 0; i < s->nents; i++)
		if (strcmp(s->ents[i].key, key) == 0)
			return &s->ents[i];
	return NULL;
}

struct entry *cfg_add_entry(struct ctx *c, struct section *s, const char *key,
    const char *value, int line)
{
	if (s->nents == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 8;
		struct entry *p = realloc(s->ents, ncap * sizeof *p);
		if (p == NULL) {
			c->oom = true;
			return NULL;
		}
		s->ents = p;
		s->cap = ncap;
	}
	struct entry *e = &s->ents[s->nents];
	memset(e, 0, sizeof *e);
	buf_init(&e->val, MAX_VALUE);
	e->line = line;
	e->key = cfg_xstrdup(c, key);
	if (e->key == NULL)
		return NULL;
	enum cs_err r = buf_puts(&e->val, value);
	s->nents++;
	if (r == CS_ENOMEM)
		c->oom = true;
	else if (r != CS_OK) {
		cfg_err_e(c, e, "value too long (max %d bytes)", MAX_VALUE);
		e->bad = true;
	}
	return e;
}

void cfg_free_sections(struct ctx *c)
{
	for (size_t i = 0; i < c->nsecs; i++) {
		struct section *s = &c->secs[i];
		for (size_t j = 0; j < s->nents; j++) {
			free(s->ents[j].key);
			free(s->ents[j].env);
			buf_wipe_clear(&s->ents[j].val);   /* values may be secrets */
		}
		free(s->ents);
		free(s->name);
		free(s->a);
		free(s->b);
	}
	free(c->secs);
	c->secs = NULL;
	c->nsecs = c->capsecs = 0;
}

struct section *cfg_find_section(struct ctx *c, const char *name)
{
	for (size_t i = 0; i < c->nsecs; i++)
		if (strcmp(c->secs[i].name, name) == 0)
			return &c->secs[i];
	return NULL;
}

const char *cfg_value_of(const struct entry *e)
{
	return e->val.data != NULL ? e->val.data : "";
}

bool cfg_section_has_value(const struct section *s, const char *key)
{
	const struct entry *e = s != NULL ? cfg_find(s, key) : NULL;
	return e != NULL && cfg_value_of(e)[0] != '\0';
}

/* ---------------------------------------------------------------- look-ups on a loaded struct config */

static bool same(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

const struct config_agent *config_agent(const struct config *c, const char *id)
{
	for (size_t i = 0; c != NULL && i < c->nagents; i++)
		if (same(c->agents[i].id, id))
			return &c->agents[i];
	return NULL;
}

const struct config_client *config_client(const struct config *c, const char *client_id)
{
	for (size_t i = 0; c != NULL && i < c->nclients; i++)
		if (same(c->clients[i].client_id, client_id))
			return &c->clients[i];
	return NULL;
}

const struct config_mcp_endpoint *config_mcp_endpoint(const struct config *c, const char *id)
{
	for (size_t i = 0; c != NULL && i < c->nmcp_endpoints; i++)
		if (same(c->mcp_endpoints[i].id, id))
			return &c->mcp_endpoints[i];
	return NULL;
}

const struct config_mcp_endpoint *config_mcp_endpoint_by_uri(const struct config *c,
    const char *uri)
{
	for (size_t i = 0; c != NULL && i < c->nmcp_endpoints; i++)
		if (same(c->mcp_endpoints[i].uri, uri))
			return &c->mcp_endpoints[i];
	return NULL;
}

bool config_resource_has_mcp_endpoint(const struct config *c, const char *resource)
{
	for (size_t i = 0; c != NULL && i < c->nmcp_endpoints; i++)
		if (same(c->mcp_endpoints[i].resource, resource))
			return true;
	return false;
}

/* [enterprise.NAME] (issue #30 item 6) */
const struct config_enterprise *config_enterprise_by_issuer(const struct config *c,
    const char *issuer)
{
	for (size_t i = 0; c != NULL && i < c->nenterprises; i++)
		if (same(c->enterprises[i].issuer, issuer))
			return &c->enterprises[i];
	return NULL;
}

const struct config_enterprise_allow *config_enterprise_allows(const struct config_enterprise *e,
    const char *client_id, const char *mcp)
{
	for (size_t i = 0; e != NULL && i < e->nallow; i++)
		if (same(e->allow[i].client_id, client_id) && same(e->allow[i].mcp, mcp))
			return &e->allow[i];
	return NULL;
}

const struct config_resource *config_resource(const struct config *c, const char *id)
{
	for (size_t i = 0; c != NULL && i < c->nresources; i++)
		if (same(c->resources[i].id, id))
			return &c->resources[i];
	return NULL;
}

const struct config_resource *config_resource_by_uri(const struct config *c, const char *uri)
{
	for (size_t i = 0; c != NULL && i < c->nresources; i++)
		if (same(c->resources[i].uri, uri))
			return &c->resources[i];
	return NULL;
}

const struct config_scope *config_scope(const struct config *c, const char *resource,
    const char *name)
{
	for (size_t i = 0; c != NULL && i < c->nscopes; i++)
		if (same(c->scopes[i].resource, resource) && same(c->scopes[i].name, name))
			return &c->scopes[i];
	return NULL;
}

const struct config_action *config_action(const struct config *c, const char *resource,
    const char *name)
{
	for (size_t i = 0; c != NULL && i < c->nactions; i++)
		if (same(c->actions[i].resource, resource) && same(c->actions[i].name, name))
			return &c->actions[i];
	return NULL;
}
