/* config.c -- reads consentd's INI file (through inih) and the CONSENTD_* environment
 * into an immutable struct config, reporting every problem as "file:line: key: why":
 * the public API, the load's order, messages, and the helpers config_*.c share.
 * It must never print a secret value, never stop at the first error, and never accept
 * an unknown section, key or CONSENTD_* variable. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <ini.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include "buf.h"
#include "config.h"
#include "config_priv.h"
#include "jws.h"
#include "policy.h"

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

static void flush_messages(struct ctx *c)
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

static void free_sections(struct ctx *c);

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

/* The configuration config_print_keys loads: every fixed section, and one of
 * each named kind, whose names stand for any (NAME, SCOPE, ACTION). */
static const char keys_text[] =
    "[server]\npublic_url = http://127.0.0.1:8080\n[database]\n[keys]\n"
    "[oidc]\nissuer = http://127.0.0.1:9\nclient_id = consentd\nclient_secret = s\n"
    "[session]\n[login]\n[consent]\n[gateway]\nclient_secret = 0123456789abcdef\n"
    "[audit]\n[metrics]\n[authzen]\n[retention]\n[limits]\n[agent.NAME]\n[resource.NAME]\n"
    "[scope.NAME.SCOPE]\n[action.NAME.ACTION]\nscope = SCOPE\n"
    "[client.NAME]\nredirect_uris = https://client.example/cb\n"
    "[mcp.NAME]\nresource = NAME\n"
    "[enterprise.NAME]\nissuer = https://idp.example\n";

enum cs_err config_print_keys(FILE *out)
{
	struct ctx c;
	struct config *cfg = NULL;
	struct buf d;
	enum cs_err rc = CS_OK;
	static const char *const label[SK__MAX] = { [SK_AGENT] = "agent.NAME",
		[SK_RESOURCE] = "resource.NAME", [SK_SCOPE] = "scope.NAME.SCOPE",
		[SK_ACTION] = "action.NAME.ACTION", [SK_CLIENT] = "client.NAME",
		[SK_MCP_ENDPOINT] = "mcp.NAME", [SK_ENTERPRISE] = "enterprise.NAME" };
	static char *const no_env[] = { NULL };

	buf_init(&d, 256 * 1024);
	memset(&c, 0, sizeof c);
	c.file = "(defaults)";
	c.text = keys_text;
	c.len = sizeof keys_text - 1;
	c.cur = c.last_sec = c.last_ent = -1;
	c.env = no_env;
	c.defaults = &d;
	/* A leading newline lets cfg_note_default find "\nSECTION\tKEY\t" anywhere. */
	if (buf_puts(&d, "\n") != CS_OK || (cfg = calloc(1, sizeof *cfg)) == NULL) {
		rc = CS_ENOMEM;
		goto out;
	}
	cfg_read(&c);
	if (!c.oom)
		cfg_load_sections(&c, cfg);
	if (c.oom) {
		rc = CS_ENOMEM;
		goto out;
	}
	for (int k = 0; k < SK__MAX; k++) {
		const char *name;
		const char *const *keys = cfg_section_keys((enum sec_kind)k, &name);
		const char *sec = label[k] != NULL ? label[k] : name;
		for (size_t i = 0; keys[i] != NULL; i++) {
			char head[160];
			const char *at = NULL;
			if (str_fmt(head, sizeof head, "\n%s\t%s\t", sec, keys[i]) == CS_OK)
				at = strstr(d.data, head);
			if (at == NULL) {
				fprintf(out, "[%s] %s =\n", sec, keys[i]);
				continue;
			}
			at += strlen(head);
			const char *end = strchr(at, '\n');
			if (at[0] == 'r')
				fprintf(out, "[%s] %s (required)\n", sec, keys[i]);
			else if (at[0] == 'o')
				fprintf(out, "[%s] %s (obsolete)\n", sec, keys[i]);
			else if (at[0] == 'n' || end == at + 2)
				fprintf(out, "[%s] %s =\n", sec, keys[i]);
			else
				fprintf(out, "[%s] %s = %.*s\n", sec, keys[i], (int)(end - at - 2), at + 2);
		}
	}
	if (fflush(out) != 0 || ferror(out))
		rc = CS_EIO;
out:
	config_free(cfg);
	free_sections(&c);
	c.errs = NULL;
	flush_messages(&c);
	buf_clear(&d);
	return rc;
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

/* NULL when the text is fine, else why it is not. */
static const char *text_problem(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		if (*p < 0x80) {
			if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
				return "contains a control character";
			p++;
			continue;
		}
		size_t n;
		unsigned min;
		unsigned cp;
		if ((*p & 0xe0) == 0xc0) { n = 1; min = 0x80; cp = *p & 0x1fu; }
		else if ((*p & 0xf0) == 0xe0) { n = 2; min = 0x800; cp = *p & 0x0fu; }
		else if ((*p & 0xf8) == 0xf0) { n = 3; min = 0x10000; cp = *p & 0x07u; }
		else
			return "is not valid UTF-8";
		for (size_t i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return "is not valid UTF-8";
			cp = (cp << 6) | (p[i] & 0x3fu);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return "is not valid UTF-8";
		p += n + 1;
	}
	return NULL;
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

static void free_sections(struct ctx *c)
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

/* ---------------------------------------------------------------- loading */

static void check_all_text(struct ctx *c)
{
	for (size_t i = 0; i < c->nsecs; i++)
		for (size_t j = 0; j < c->secs[i].nents; j++) {
			struct entry *e = &c->secs[i].ents[j];
			const char *why = e->bad ? NULL : text_problem(cfg_value_of(e));
			if (why != NULL) {
				cfg_err_e(c, e, "%s", why);
				e->bad = true;
			}
		}
}

static enum cs_err load_text(const char *text, size_t len, const char *name,
    char *const *env, bool deployed, FILE *errs, struct config **out)
{
	struct ctx c;
	struct config *cfg = NULL;
	enum cs_err rc = CS_ECONFIG;

	memset(&c, 0, sizeof c);
	c.file = name != NULL ? name : "(config)";
	c.errs = errs;
	c.text = text != NULL ? text : "";
	c.len = text != NULL ? len : 0;
	c.cur = c.last_sec = c.last_ent = -1;
	c.env = env;
	if (c.len > MAX_FILE) {
		cfg_err_line(&c, 0, NULL, "file too large (max %d bytes)", MAX_FILE);
		goto out;
	}
	cfg_read(&c);
	if (c.oom)
		goto out;
	check_all_text(&c);

	cfg = calloc(1, sizeof *cfg);
	if (cfg == NULL || (cfg->path = strdup(c.file)) == NULL) {
		c.oom = true;
		goto out;
	}
	cfg_load_sections(&c, cfg);
	if (deployed && !cfg->development)
		cfg_check_placeholders(&c);

	if (c.oom)
		goto out;
	if (c.nerr == 0) {
		*out = cfg;
		cfg = NULL;
		rc = CS_OK;
	}
out:
	if (c.oom)
		rc = CS_ENOMEM;
	config_free(cfg);
	free_sections(&c);
	flush_messages(&c);
	return rc;
}

enum cs_err config_load_string(const char *text, size_t len, const char *name,
    char *const *env, FILE *errs, struct config **out)
{
	return load_text(text, len, name, env, false, errs, out);
}

enum cs_err config_load_string_deployed(const char *text, size_t len, const char *name,
    char *const *env, FILE *errs, struct config **out)
{
	return load_text(text, len, name, env, true, errs, out);
}

enum cs_err config_load(const char *path, FILE *errs, struct config **out)
{
	struct buf b;
	FILE *f = NULL;
	enum cs_err rc = CS_ECONFIG;
	char chunk[4096];

	buf_init(&b, MAX_FILE);
	f = fopen(path, "re");
	if (f == NULL) {
		if (errs != NULL)
			fprintf(errs, "%s: cannot open: %s\n", path, strerror(errno));
		goto out;
	}
	for (;;) {
		size_t got = fread(chunk, 1, sizeof chunk, f);
		if (got > 0) {
			enum cs_err r = buf_append(&b, chunk, got);
			if (r == CS_ETOOBIG) {
				if (errs != NULL)
					fprintf(errs, "%s: file too large (max %d bytes)\n", path, MAX_FILE);
				goto out;
			}
			if (r != CS_OK) {
				rc = r;
				goto out;
			}
		}
		if (got < sizeof chunk) {
			if (ferror(f)) {
				if (errs != NULL)
					fprintf(errs, "%s: cannot read: %s\n", path, strerror(errno));
				goto out;
			}
			break;
		}
	}
	rc = load_text(b.data != NULL ? b.data : "", b.len, path, environ, true, errs, out);
out:
	OPENSSL_cleanse(chunk, sizeof chunk);
	if (f != NULL)
		fclose(f);
	buf_wipe_clear(&b);     /* the file may hold secrets */
	return rc;
}

/* ---------------------------------------------------------------- freeing and look-ups */

/* Each section's struct frees its own strings: [agent.X], [client.X], [mcp.X],
 * [enterprise.X], [resource.X], [scope.R.S] and [action.R.A]. */
static void agent_free_fields(struct config_agent *a)
{
	free(a->id);
	free(a->name);
	free(a->description);
	cfg_free_strv(a->allow);
}

static void client_free_fields(struct config_client *k)
{
	free(k->id);
	free(k->client_id);
	free(k->name);
	cfg_free_strv(k->redirect_uris);
	free(k->jwks_file);
	free(k->jwks_uri);
	free(k->jwks_json);
}

static void mcp_endpoint_free_fields(struct config_mcp_endpoint *m)
{
	free(m->id);
	free(m->resource);
	free(m->uri);
	free(m->upstream);
	free(m->unmapped_scope);
}

/* [enterprise.NAME] (issue #30 item 6) */
static void enterprise_free_fields(struct config_enterprise *n)
{
	free(n->id);
	free(n->issuer);
	free(n->jwks_file);
	free(n->jwks_uri);
	free(n->jwks_json);
	for (size_t j = 0; j < n->nallow; j++) {
		free(n->allow[j].client_id);
		free(n->allow[j].mcp);
		cfg_free_strv(n->allow[j].scopes);
	}
	free(n->allow);
}

static void resource_free_fields(struct config_resource *r)
{
	free(r->id);
	free(r->name);
	free(r->uri);
	free(r->provider_issuer);
	free(r->provider_authorization_endpoint);
	free(r->provider_token_endpoint);
	free(r->provider_revocation_endpoint);
	free(r->provider_base_url);
	free(r->provider_sites_endpoint);
	free(r->provider_client_id);
	wipe_free(r->provider_client_secret);
	free(r->base_url);
	free(r->api_key_header);
	free(r->api_key_query);
	free(r->api_key_prefix);
}

static void scope_free_fields(struct config_scope *sc)
{
	free(sc->resource);
	free(sc->name);
	free(sc->description);
	cfg_free_strv(sc->provider);
}

static void action_free_fields(struct config_action *a)
{
	free(a->resource);
	free(a->name);
	free(a->description);
	free(a->scope);
	free(a->route_method);
	free(a->route_path);
	cfg_free_strv(a->standing_fixed);
	policy_lines_free(a->policy, a->npolicy);
}

void config_free(struct config *c)
{
	if (c == NULL)
		return;
	free(c->path);
	free(c->listen_host);
	free(c->public_url);
	free(c->log);
	free(c->trusted_proxies);
	free(c->db_path);
	free(c->db_url);
	wipe_free(c->db_password);
	free(c->master_key_file);
	wipe_free(c->master_key_b64);
	free(c->oidc_issuer);
	free(c->oidc_client_id);
	wipe_free(c->oidc_client_secret);
	free(c->oidc_scopes);
	free(c->oidc_subject_claim);
	free(c->oidc_admin_claim);
	free(c->oidc_admin_value);
	free(c->gateway_id);
	wipe_free(c->gateway_client_secret);
	cfg_free_strv(c->subject_audiences);
	cfg_free_strv(c->subject_token_types);
	free(c->events_uri);
	free(c->gateway_jwks_file);
	free(c->gateway_jwks_uri);
	free(c->gateway_jwks_json);
	free(c->audit_head_file);
	wipe_free(c->metrics_token);
	free(c->metrics_listen_host);
	cfg_free_strv(c->mcp_cimd_hosts);
	cfg_free_strv(c->mcp_cimd_prefixes);
	free(c->mcp_cimd_ca_file);
	free(c->authzen_endpoint);
	wipe_free(c->authzen_token);
	free(c->authzen_ca_file);
	cfg_free_strv(c->authzen_actions);
	for (size_t i = 0; i < c->nagents; i++)
		agent_free_fields(&c->agents[i]);
	free(c->agents);
	for (size_t i = 0; i < c->nclients; i++)
		client_free_fields(&c->clients[i]);
	free(c->clients);
	for (size_t i = 0; i < c->nmcp_endpoints; i++)
		mcp_endpoint_free_fields(&c->mcp_endpoints[i]);
	free(c->mcp_endpoints);
	for (size_t i = 0; i < c->nenterprises; i++)
		enterprise_free_fields(&c->enterprises[i]);
	free(c->enterprises);
	for (size_t i = 0; i < c->nresources; i++)
		resource_free_fields(&c->resources[i]);
	free(c->resources);
	for (size_t i = 0; i < c->nscopes; i++)
		scope_free_fields(&c->scopes[i]);
	free(c->scopes);
	for (size_t i = 0; i < c->nactions; i++)
		action_free_fields(&c->actions[i]);
	free(c->actions);
	OPENSSL_cleanse(c, sizeof *c);    /* the gateway secret's hash */
	free(c);
}

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
