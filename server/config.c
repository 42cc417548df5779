/* config.c -- reads consentd's INI file (through inih) and the CONSENTD_* environment
 * into an immutable struct config, reporting every problem as "file:line: key: why".
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
#include "jws.h"

#define MAX_FILE        (1024 * 1024)   /* bytes of configuration text */
#define MAX_VALUE       65536           /* a value, continuation lines included */
#define MAX_ENV_VALUE   4096            /* a value from the environment */
#define MAX_PART        64              /* agent, resource, scope, action names */
#define MAX_ID          255             /* client ids, claim names */
#define MIN_GW_SECRET   16              /* characters of the gateway's client secret */
#define MAX_THREADS     1024

#define ENV_PREFIX      "CONSENTD_"
#define ENV_MASTER_KEY  "CONSENTD_KEYS_MASTER_KEY"

/* CONSENTD_* variables that are not configuration keys and are left alone:
 * CONSENTD_CONFIG may name the file for the command line, CONSENTD_BIN names the
 * binary for the test tooling (scripts/check.sh).  Nothing else. */
static const char *const env_allowlist[] = { "CONSENTD_CONFIG", "CONSENTD_BIN", NULL };

enum sec_kind {
	SK_SERVER, SK_DATABASE, SK_KEYS, SK_OIDC, SK_SESSION, SK_LOGIN, SK_CONSENT, SK_GATEWAY,
	SK_AUDIT,
	SK_AGENT, SK_RESOURCE, SK_SCOPE, SK_ACTION,
	SK__MAX
};
#define SK_NFIXED SK_AGENT       /* kinds before this one are fixed sections */

static const char *const keys_server[] = { "listen", "public_url", "threads", "max_body",
	"per_ip_connections", "idle_timeout", "log", "log_level", NULL };
static const char *const keys_database[] = { "path", NULL };
static const char *const keys_keys[] = { "master_key_file", "grant_ttl", "publish_lead", NULL };
static const char *const keys_oidc[] = { "issuer", "client_id", "client_secret",
	"token_endpoint_auth", "scopes", "subject_claim", "admin_claim", "admin_value",
	"clock_skew", NULL };
static const char *const keys_session[] = { "idle_timeout", "absolute_timeout",
	"admin_timeout", NULL };
static const char *const keys_login[] = { "max_pending", "max_pending_per_address", NULL };
static const char *const keys_consent[] = { "request_ttl", "interval", "deny_cooldown",
	"max_pending_per_user", "default_duration", NULL };
static const char *const keys_gateway[] = { "id", "client_secret", "client_secret_sha256",
	"subject_audiences", "subject_token_types", "events_uri", "token_endpoint_auth", "jwks_file",
	"jwks_uri", "clock_skew", "require_dpop", "dpop_nonce", NULL };
static const char *const keys_audit[] = { "head_file", NULL };
static const char *const keys_agent[] = { "name", "description", "allow", "offline", NULL };
static const char *const keys_resource[] = { "name", "uri", "max_consent", "provider_issuer",
	"provider_authorization_endpoint", "provider_token_endpoint",
	"provider_revocation_endpoint", "provider_client_id", "provider_client_secret",
	"refresh_margin", "token_release", "base_url", NULL };
static const char *const keys_scope[] = { "description", "provider", NULL };
static const char *const keys_action[] = { "description", "scope", "approval", "route", NULL };

static const struct {
	const char *name;
	const char *const *keys;
} sec_defs[SK__MAX] = {
	[SK_SERVER]   = { "server", keys_server },
	[SK_DATABASE] = { "database", keys_database },
	[SK_KEYS]     = { "keys", keys_keys },
	[SK_OIDC]     = { "oidc", keys_oidc },
	[SK_SESSION]  = { "session", keys_session },
	[SK_LOGIN]    = { "login", keys_login },
	[SK_CONSENT]  = { "consent", keys_consent },
	[SK_GATEWAY]  = { "gateway", keys_gateway },
	[SK_AUDIT]    = { "audit", keys_audit },
	[SK_AGENT]    = { "agent", keys_agent },
	[SK_RESOURCE] = { "resource", keys_resource },
	[SK_SCOPE]    = { "scope", keys_scope },
	[SK_ACTION]   = { "action", keys_action },
};

/* Claims a person can change or an IdP can hand to someone else. */
static const char *const reassignable_claims[] = { "email", "preferred_username", "upn",
	"name", "phone_number", NULL };
static const char *const token_types[] = { "id_token", "access_token", "jwt", NULL };
static const char *const auth_names[] = { "client_secret_basic", "client_secret_post", NULL };
static const char *const release_names[] = { "gateway", "never", NULL };
static const char *const approval_names[] = { "none", "required", NULL };
static const char *const route_methods[] = { "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE",
	NULL };

struct entry {
	char      *key;
	struct buf val;          /* continuation lines are appended with one space */
	int        line;         /* 0 when the value came from the environment only */
	char      *env;          /* the variable that set it, NULL when from the file */
	bool       bad;          /* already reported as invalid */
};

struct section {
	char          *name;     /* as written between the brackets */
	enum sec_kind  kind;
	char          *a, *b;    /* name parts of dynamic sections */
	int            line;     /* 0 when absent from the file */
	struct entry  *ents;
	size_t         nents, cap;
};

struct msg {
	int    line;             /* INT_MAX for messages without a line */
	size_t seq;
	char  *text;
};

struct ctx {
	const char *file;
	struct msg *msgs;
	size_t      nmsgs, capmsgs;
	FILE       *errs;
	unsigned    nerr;
	bool        oom;

	/* reader state */
	const char *text;
	size_t      len, pos;
	int         lineno;
	bool        have_prev;   /* inih remembers a key name: indented lines continue it */
	bool        cont;        /* the current line is a continuation */
	bool        expect_kv;   /* the current line must reach the handler */
	bool        got_kv;
	long        cur;         /* current section index, -1 for none */
	bool        cur_quiet;   /* no section because of an error already reported */
	long        last_sec, last_ent;   /* target of continuation lines, -1 for none */

	struct section *secs;
	size_t      nsecs, capsecs;

	char *const *env;
	const char *master_key;  /* points into env */
	const char *master_key_var;
};

/* ---------------------------------------------------------------- reporting */

/* Messages are kept and written sorted by line once the load is over, so that
 * parse errors and value errors read in file order. */
static void vreport(struct ctx *c, bool warning, const char *env, int line, const char *key,
    const char *fmt, va_list ap) __attribute__((format(printf, 6, 0)));
static void vreport(struct ctx *c, bool warning, const char *env, int line, const char *key,
    const char *fmt, va_list ap)
{
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
static void err_line(struct ctx *c, int line, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void err_line(struct ctx *c, int line, const char *key, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(c, false, NULL, line, key, fmt, ap);
	va_end(ap);
}

/* An error about an environment variable that is not tied to a key. */
static void err_env(struct ctx *c, const char *var, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void err_env(struct ctx *c, const char *var, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(c, false, var, 0, NULL, fmt, ap);
	va_end(ap);
}

/* An error about the value of e, located where the value came from. */
static void err_e(struct ctx *c, const struct entry *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void err_e(struct ctx *c, const struct entry *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(c, false, e->env, e->line, e->key, fmt, ap);
	va_end(ap);
}

static void warn_e(struct ctx *c, const struct entry *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void warn_e(struct ctx *c, const struct entry *e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(c, true, e->env, e->line, e->key, fmt, ap);
	va_end(ap);
}

/* ---------------------------------------------------------------- small helpers */

static char *xstrdup(struct ctx *c, const char *s)
{
	char *p = strdup(s);
	if (p == NULL)
		c->oom = true;
	return p;
}

static char *xstrndup(struct ctx *c, const char *s, size_t n)
{
	char *p = strndup(s, n);
	if (p == NULL)
		c->oom = true;
	return p;
}

static bool in_list(const char *const *list, const char *s)
{
	for (size_t i = 0; list[i] != NULL; i++)
		if (strcmp(list[i], s) == 0)
			return true;
	return false;
}

static int list_index(const char *const *list, const char *s)
{
	for (int i = 0; list[i] != NULL; i++)
		if (strcmp(list[i], s) == 0)
			return i;
	return -1;
}

static void free_strv(char **v)
{
	if (v == NULL)
		return;
	for (size_t i = 0; v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

static void wipe_free(char *s)
{
	if (s != NULL) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

/* Letters, digits, '_' and '-' (and ':' when colon), 1..MAX_PART characters. */
static bool valid_part(const char *s, size_t n, bool colon)
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
static bool valid_token(const char *s)
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
static bool valid_scope_token(const char *s)
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
static const char *parse_int(const char *s, int64_t min, int64_t max, int64_t *out)
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
static char **split_words(struct ctx *c, const char *s, size_t *count)
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
		v[i] = xstrndup(c, w, (size_t)(p - w));
		if (v[i] == NULL) {
			free_strv(v);
			return NULL;
		}
		i++;
	}
	*count = n;
	return v;
}

static bool has_dup(char *const *v, size_t n, size_t *which)
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

static struct section *add_section(struct ctx *c, const char *name, enum sec_kind kind,
    const char *a, size_t alen, const char *b, size_t blen, int line)
{
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
	s->kind = kind;
	s->line = line;
	s->name = xstrdup(c, name);
	if (a != NULL)
		s->a = xstrndup(c, a, alen);
	if (b != NULL)
		s->b = xstrndup(c, b, blen);
	if (s->name == NULL || (a != NULL && s->a == NULL) || (b != NULL && s->b == NULL)) {
		free(s->name);
		free(s->a);
		free(s->b);
		return NULL;
	}
	c->nsecs++;
	return s;
}

static struct entry *find(const struct section *s, const char *key)
{
	for (size_t i = 0; i < s->nents; i++)
		if (strcmp(s->ents[i].key, key) == 0)
			return &s->ents[i];
	return NULL;
}

static struct entry *add_entry(struct ctx *c, struct section *s, const char *key,
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
	e->key = xstrdup(c, key);
	if (e->key == NULL)
		return NULL;
	enum cs_err r = buf_puts(&e->val, value);
	s->nents++;
	if (r == CS_ENOMEM)
		c->oom = true;
	else if (r != CS_OK) {
		err_e(c, e, "value too long (max %d bytes)", MAX_VALUE);
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

static struct section *find_section(struct ctx *c, const char *name)
{
	for (size_t i = 0; i < c->nsecs; i++)
		if (strcmp(c->secs[i].name, name) == 0)
			return &c->secs[i];
	return NULL;
}

static const char *value_of(const struct entry *e)
{
	return e->val.data != NULL ? e->val.data : "";
}

static bool section_has_value(const struct section *s, const char *key)
{
	const struct entry *e = s != NULL ? find(s, key) : NULL;
	return e != NULL && value_of(e)[0] != '\0';
}

/* ---------------------------------------------------------------- reading (inih) */

/* inih's scan for a terminator or an inline comment (";" after whitespace). */
static const char *find_chars_or_comment(const char *s, const char *chars)
{
	bool was_space = false;
	while (*s && (chars == NULL || strchr(chars, *s) == NULL) &&
	    !(was_space && strchr(INI_INLINE_COMMENT_PREFIXES, *s) != NULL)) {
		was_space = isspace((unsigned char)*s) != 0;
		s++;
	}
	return s;
}

/* A "[name]" line: validates the name and makes it the current section. */
static void open_section(struct ctx *c, const char *name, size_t n)
{
	c->cur = -1;
	c->cur_quiet = true;
	char *full = xstrndup(c, name, n);
	if (full == NULL)
		return;
	const char *dot = memchr(full, '.', n);
	enum sec_kind kind = SK__MAX;
	const char *a = NULL, *b = NULL;
	size_t alen = 0, blen = 0;
	bool ok = true;

	for (int k = 0; k < SK_NFIXED; k++)
		if (strcmp(full, sec_defs[k].name) == 0)
			kind = (enum sec_kind)k;
	if (kind == SK__MAX && dot != NULL) {
		size_t plen = (size_t)(dot - full);
		for (int k = SK_NFIXED; k < SK__MAX; k++)
			if (strlen(sec_defs[k].name) == plen && memcmp(full, sec_defs[k].name, plen) == 0)
				kind = (enum sec_kind)k;
	}
	if (kind == SK__MAX) {
		err_line(c, c->lineno, NULL, "[%s]: unknown section", full);
		goto out;
	}
	if (kind == SK_AGENT || kind == SK_RESOURCE) {
		a = dot + 1;
		alen = strlen(a);
		if (!valid_part(a, alen, false)) {
			err_line(c, c->lineno, NULL, "[%s]: the %s name must be 1 to %d letters, digits, "
			    "'_' or '-'", full, sec_defs[kind].name, MAX_PART);
			ok = false;
		}
	} else if (kind == SK_SCOPE || kind == SK_ACTION) {
		a = dot + 1;
		const char *dot2 = strchr(a, '.');
		if (dot2 == NULL) {
			err_line(c, c->lineno, NULL, "[%s]: expected [%s.RESOURCE.%s]", full,
			    sec_defs[kind].name, kind == SK_SCOPE ? "SCOPE" : "ACTION");
			goto out;
		}
		alen = (size_t)(dot2 - a);
		b = dot2 + 1;
		blen = strlen(b);
		if (!valid_part(a, alen, false)) {
			err_line(c, c->lineno, NULL, "[%s]: the resource name must be 1 to %d letters, "
			    "digits, '_' or '-'", full, MAX_PART);
			ok = false;
		}
		if (!valid_part(b, blen, kind == SK_SCOPE)) {
			err_line(c, c->lineno, NULL, "[%s]: the %s name must be 1 to %d letters, digits, "
			    "'_', '-'%s (no dots)", full, sec_defs[kind].name, MAX_PART,
			    kind == SK_SCOPE ? " or ':'" : "");
			ok = false;
		}
	}
	if (!ok)
		goto out;
	struct section *prev = find_section(c, full);
	if (prev != NULL) {
		if (prev->line > 0)
			err_line(c, c->lineno, NULL, "[%s]: duplicate section (first on line %d)",
			    full, prev->line);
		else
			err_line(c, c->lineno, NULL, "[%s]: duplicate section", full);
		goto out;
	}
	if (add_section(c, full, kind, a, alen, b, blen, c->lineno) == NULL)
		goto out;
	c->cur = (long)c->nsecs - 1;
	c->cur_quiet = false;
out:
	free(full);
}

/* Mirrors inih's decisions for one line so that we know what it will do with it. */
static void classify(struct ctx *c, const char *line)
{
	const char *s = line;
	if (c->lineno == 1 && (unsigned char)s[0] == 0xef && (unsigned char)s[1] == 0xbb &&
	    (unsigned char)s[2] == 0xbf)
		s += 3;
	while (*s && isspace((unsigned char)*s))
		s++;
	if (*s == '\0' || strchr(INI_START_COMMENT_PREFIXES, *s) != NULL)
		return;                                 /* blank or comment */
	if (INI_ALLOW_MULTILINE && c->have_prev && s > line) {
		c->cont = true;                         /* inih: continuation of the last key */
		return;
	}
	if (*s == '[') {
		const char *end = find_chars_or_comment(s + 1, "]");
		if (*end != ']') {
			err_line(c, c->lineno, NULL, "section header without closing ']'");
			c->cur = -1;
			c->cur_quiet = true;
			c->last_sec = c->last_ent = -1;
			return;
		}
		c->have_prev = false;
		c->last_sec = c->last_ent = -1;
		const char *t = end + 1;
		while (*t && isspace((unsigned char)*t))
			t++;
		if (*t != '\0' && strchr(INI_START_COMMENT_PREFIXES, *t) == NULL)
			err_line(c, c->lineno, NULL, "unexpected text after ']'");
		open_section(c, s + 1, (size_t)(end - (s + 1)));
		return;
	}
	c->expect_kv = true;
}

/* A line that should have been "key = value" but never reached the handler. */
static void finish_line(struct ctx *c)
{
	if (c->expect_kv && !c->got_kv)
		err_line(c, c->lineno, NULL, "expected 'key = value'");
	c->expect_kv = c->got_kv = c->cont = false;
}

/* inih's fgets-like reader over the text: counts lines and refuses long ones. */
static char *reader(char *str, int num, void *stream)
{
	struct ctx *c = stream;
	finish_line(c);
	if (c->pos >= c->len || num < 2)
		return NULL;
	const char *p = c->text + c->pos;
	size_t rem = c->len - c->pos;
	const char *nl = memchr(p, '\n', rem);
	size_t n = nl != NULL ? (size_t)(nl - p) : rem;
	c->pos += n + (nl != NULL ? 1 : 0);
	c->lineno++;
	if (n > 0 && p[n - 1] == '\r')
		n--;
	size_t cap = (size_t)num - 1;
	if (cap > CONFIG_MAX_LINE)
		cap = CONFIG_MAX_LINE;
	str[0] = '\0';
	if (n > cap) {
		err_line(c, c->lineno, NULL, "line too long (max %zu characters)", cap);
		return str;                             /* inih sees a blank line */
	}
	if (memchr(p, '\0', n) != NULL) {
		err_line(c, c->lineno, NULL, "line contains a NUL byte");
		return str;
	}
	memcpy(str, p, n);
	str[n] = '\0';
	classify(c, str);
	return str;
}

static int on_value(void *user, const char *section, const char *name, const char *value)
{
	struct ctx *c = user;
	(void)section;   /* ours, not inih's (which truncates long names) */
	if (c->cont) {
		if (c->last_sec >= 0) {
			struct entry *e = &c->secs[c->last_sec].ents[c->last_ent];
			enum cs_err r = buf_puts(&e->val, " ");
			if (r == CS_OK)
				r = buf_puts(&e->val, value);
			if (r == CS_ENOMEM)
				c->oom = true;
			else if (r != CS_OK && !e->bad) {
				err_e(c, e, "value too long (max %d bytes)", MAX_VALUE);
				e->bad = true;
			}
		}
		return 1;
	}
	c->got_kv = true;
	c->have_prev = name[0] != '\0';
	c->last_sec = c->last_ent = -1;
	if (c->cur < 0) {
		if (!c->cur_quiet)
			err_line(c, c->lineno, name, "key outside of any section");
		return 1;
	}
	if (name[0] == '\0') {
		err_line(c, c->lineno, NULL, "missing key name before '='");
		return 1;
	}
	struct section *s = &c->secs[c->cur];
	if (!in_list(sec_defs[s->kind].keys, name)) {
		err_line(c, c->lineno, name, "unknown key");
		return 1;
	}
	const struct entry *prev = find(s, name);
	if (prev != NULL) {
		err_line(c, c->lineno, name, "duplicate key (first on line %d)", prev->line);
		return 1;
	}
	if (add_entry(c, s, name, value, c->lineno) != NULL) {
		c->last_sec = c->cur;
		c->last_ent = (long)s->nents - 1;
	}
	return 1;
}

/* ---------------------------------------------------------------- environment */

/* CONSENTD_<SECTION>_<KEY>: upper case, '.', ':' and '-' as '_'. */
static char *env_name(struct ctx *c, const char *section, const char *key)
{
	struct buf b;
	buf_init(&b, 1024);
	enum cs_err r = buf_puts(&b, ENV_PREFIX);
	for (const char *p = section; r == CS_OK && *p; p++) {
		char ch = (*p == '.' || *p == ':' || *p == '-') ? '_' : (char)toupper((unsigned char)*p);
		r = buf_append(&b, &ch, 1);
	}
	if (r == CS_OK)
		r = buf_puts(&b, "_");
	for (const char *p = key; r == CS_OK && *p; p++) {
		char ch = (char)toupper((unsigned char)*p);
		r = buf_append(&b, &ch, 1);
	}
	char *out = NULL;
	if (r == CS_OK)
		out = buf_steal(&b);
	buf_clear(&b);
	if (out == NULL)
		c->oom = true;
	return out;
}

/* Index of the first "NAME=..." entry of env, or -1. */
static long env_find(char *const *env, const char *name)
{
	size_t n = strlen(name);
	for (long i = 0; env[i] != NULL; i++)
		if (strncmp(env[i], name, n) == 0 && env[i][n] == '=')
			return i;
	return -1;
}

struct claim {                 /* which section/key took an environment variable */
	const char *section, *key;
};

static void apply_env(struct ctx *c)
{
	struct claim *claims = NULL;
	char *name = NULL;
	size_t nenv = 0;

	/* Fixed sections exist even when the file leaves them out: defaults and
	 * environment values still apply to them. */
	for (int k = 0; k < SK_NFIXED; k++)
		if (find_section(c, sec_defs[k].name) == NULL &&
		    add_section(c, sec_defs[k].name, (enum sec_kind)k, NULL, 0, NULL, 0, 0) == NULL)
			goto out;
	if (c->env == NULL)
		goto out;
	while (c->env[nenv] != NULL)
		nenv++;
	claims = calloc(nenv + 1, sizeof *claims);
	if (claims == NULL) {
		c->oom = true;
		goto out;
	}

	for (size_t i = 0; i < c->nsecs; i++) {
		struct section *s = &c->secs[i];
		for (const char *const *k = sec_defs[s->kind].keys; *k != NULL; k++) {
			free(name);
			name = env_name(c, s->name, *k);
			if (name == NULL)
				goto out;
			long j = env_find(c->env, name);
			if (j < 0)
				continue;
			if (claims[j].section != NULL) {
				err_env(c, name, "ambiguous: names both [%s] %s and [%s] %s",
				    claims[j].section, claims[j].key, s->name, *k);
				continue;
			}
			claims[j].section = s->name;
			claims[j].key = *k;
			const char *v = c->env[j] + strlen(name) + 1;
			struct entry *e = find(s, *k);
			if (strlen(v) > MAX_ENV_VALUE) {
				err_env(c, name, "%s: value too long (max %d bytes)", *k, MAX_ENV_VALUE);
				if (e != NULL)
					e->bad = true;
				continue;
			}
			if (e == NULL) {
				e = add_entry(c, s, *k, v, 0);
				if (e == NULL)
					goto out;
			} else {
				buf_wipe_clear(&e->val);
				buf_init(&e->val, MAX_VALUE);
				e->bad = false;
				if (buf_puts(&e->val, v) != CS_OK) {
					c->oom = true;
					goto out;
				}
			}
			free(e->env);
			e->env = name;
			name = NULL;
		}
	}

	long mk = env_find(c->env, ENV_MASTER_KEY);
	if (mk >= 0) {
		claims[mk].section = "keys";
		claims[mk].key = "master_key";
		c->master_key = c->env[mk] + strlen(ENV_MASTER_KEY) + 1;
		c->master_key_var = ENV_MASTER_KEY;
	}
	for (size_t j = 0; j < nenv; j++) {
		const char *v = c->env[j];
		if (strncmp(v, ENV_PREFIX, strlen(ENV_PREFIX)) != 0 || claims[j].section != NULL)
			continue;
		const char *eq = strchr(v, '=');
		size_t n = eq != NULL ? (size_t)(eq - v) : strlen(v);
		free(name);
		name = xstrndup(c, v, n);
		if (name == NULL)
			goto out;
		if (in_list(env_allowlist, name))
			continue;
		/* Later duplicates of a claimed variable are the same variable. */
		long first = env_find(c->env, name);
		if (first >= 0 && (size_t)first != j && claims[first].section != NULL)
			continue;
		err_env(c, name, "unknown configuration variable");
	}
out:
	free(name);
	free(claims);
}

/* ---------------------------------------------------------------- typed getters */

enum { S_REQUIRED = 1, S_EMPTY_NULL = 2, S_EMPTY_OK = 4 };

static void missing(struct ctx *c, const struct section *s, const char *key)
{
	err_line(c, s->line, key, "required in [%s]", s->name);
}

/* *out = a copy of the value (or of def when absent; NULL for an empty value with
 * S_EMPTY_NULL).  Returns the entry when a usable value was given, else NULL. */
static const struct entry *get_str(struct ctx *c, const struct section *s, const char *key,
    const char *def, unsigned flags, char **out)
{
	*out = NULL;
	const struct entry *e = find(s, key);
	if (e == NULL) {
		if (flags & S_REQUIRED)
			missing(c, s, key);
		else if (def != NULL)
			*out = xstrdup(c, def);
		return NULL;
	}
	if (e->bad)
		return NULL;
	const char *v = value_of(e);
	if (*v == '\0') {
		if (flags & S_EMPTY_NULL)
			return NULL;
		if (!(flags & S_EMPTY_OK)) {
			err_e(c, e, "must not be empty");
			return NULL;
		}
	}
	*out = xstrdup(c, v);
	return *out != NULL ? e : NULL;
}

static void get_int(struct ctx *c, const struct section *s, const char *key, int64_t def,
    int64_t min, int64_t max, int64_t *out)
{
	*out = def;
	const struct entry *e = find(s, key);
	if (e == NULL || e->bad)
		return;
	const char *why = parse_int(value_of(e), min, max, out);
	if (why != NULL) {
		err_e(c, e, "%s (expected an integer from %lld to %lld)", why, (long long)min,
		    (long long)max);
		*out = def;
	}
}

static void get_bool(struct ctx *c, const struct section *s, const char *key, bool def,
    bool *out)
{
	static const char *const yes[] = { "true", "yes", "1", "on", NULL };
	static const char *const no[] = { "false", "no", "0", "off", NULL };
	*out = def;
	const struct entry *e = find(s, key);
	if (e == NULL || e->bad)
		return;
	const char *v = value_of(e);
	for (size_t i = 0; yes[i] != NULL; i++) {
		if (strcasecmp(v, yes[i]) == 0) {
			*out = true;
			return;
		}
		if (strcasecmp(v, no[i]) == 0) {
			*out = false;
			return;
		}
	}
	err_e(c, e, "not a boolean (expected true/false, yes/no, on/off or 1/0)");
}

/* One of names; *out = its index (or def). */
static void get_enum(struct ctx *c, const struct section *s, const char *key,
    const char *const *names, int def, int *out)
{
	*out = def;
	const struct entry *e = find(s, key);
	if (e == NULL || e->bad)
		return;
	int i = list_index(names, value_of(e));
	if (i >= 0) {
		*out = i;
		return;
	}
	struct buf b;
	buf_init(&b, 512);
	enum cs_err r = CS_OK;
	for (size_t j = 0; r == CS_OK && names[j] != NULL; j++)
		r = buf_printf(&b, "%s%s", j ? ", " : "", names[j]);
	err_e(c, e, "must be one of: %s", r == CS_OK && b.data ? b.data : "?");
	buf_clear(&b);
}

/* ---------------------------------------------------------------- value checks */

static bool is_loopback_host(const char *h, size_t n)
{
	return (n == 9 && memcmp(h, "127.0.0.1", 9) == 0) ||
	    (n == 9 && strncasecmp(h, "localhost", 9) == 0) ||
	    (n == 5 && memcmp(h, "[::1]", 5) == 0);
}

static bool parse_port(const char *p, size_t n, uint16_t *out)
{
	if (n == 0 || n > 5)
		return false;
	unsigned v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)p[i]))
			return false;
		v = v * 10 + (unsigned)(p[i] - '0');
	}
	if (v < 1 || v > 65535)
		return false;
	*out = (uint16_t)v;
	return true;
}

enum { URL_PATH = 1, URL_QUERY = 2 };

/* An http(s) URL: https, or http on a loopback host; no userinfo, no fragment;
 * a path and a query only where allowed (a lone "/" path is always fine).
 * *https tells the scheme.  Reports and returns false when the URL is unusable. */
static bool check_url(struct ctx *c, const struct entry *e, const char *v, unsigned allow,
    bool *https)
{
	for (const char *p = v; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f) {
			err_e(c, e, "URL must be printable ASCII without spaces");
			return false;
		}
	const char *a;
	if (strncmp(v, "https://", 8) == 0) {
		*https = true;
		a = v + 8;
	} else if (strncmp(v, "http://", 7) == 0) {
		*https = false;
		a = v + 7;
	} else {
		err_e(c, e, "must be an https:// URL");
		return false;
	}
	size_t alen = strcspn(a, "/?#");
	const char *rest = a + alen;
	if (memchr(a, '@', alen) != NULL) {
		err_e(c, e, "URL must not contain user information ('@')");
		return false;
	}
	const char *host = a;
	size_t hlen;
	const char *port = NULL;
	if (a[0] == '[') {
		const char *rb = memchr(a, ']', alen);
		char ip6[INET6_ADDRSTRLEN + 1];
		unsigned char tmp[16];
		size_t ilen = rb != NULL ? (size_t)(rb - a - 1) : 0;
		if (rb == NULL || ilen == 0 || ilen >= sizeof ip6) {
			err_e(c, e, "URL has a malformed IPv6 host");
			return false;
		}
		memcpy(ip6, a + 1, ilen);
		ip6[ilen] = '\0';
		if (inet_pton(AF_INET6, ip6, tmp) != 1) {
			err_e(c, e, "URL has a malformed IPv6 host");
			return false;
		}
		hlen = (size_t)(rb - a) + 1;
		if (hlen < alen) {
			if (a[hlen] != ':') {
				err_e(c, e, "URL has a malformed host");
				return false;
			}
			port = a + hlen + 1;
		}
	} else {
		const char *colon = memchr(a, ':', alen);
		hlen = colon != NULL ? (size_t)(colon - a) : alen;
		if (colon != NULL)
			port = colon + 1;
		for (size_t i = 0; i < hlen; i++) {
			unsigned char ch = (unsigned char)a[i];
			if (!(isalnum(ch) || ch == '-' || ch == '.' || ch == '_')) {
				err_e(c, e, "URL has a malformed host");
				return false;
			}
		}
	}
	if (hlen == 0) {
		err_e(c, e, "URL has no host");
		return false;
	}
	uint16_t pn;
	if (port != NULL && !parse_port(port, (size_t)(a + alen - port), &pn)) {
		err_e(c, e, "URL has a bad port (expected 1 to 65535)");
		return false;
	}
	bool ok = true;
	if (strchr(rest, '#') != NULL) {
		err_e(c, e, "URL must not have a fragment ('#')");
		ok = false;
	}
	if (strchr(rest, '?') != NULL && !(allow & URL_QUERY)) {
		err_e(c, e, "URL must not have a query ('?')");
		ok = false;
	}
	size_t plen = strcspn(rest, "?#");
	if (plen > 0 && !(allow & URL_PATH) && !(plen == 1 && rest[0] == '/')) {
		err_e(c, e, "URL must not have a path (only scheme://host[:port])");
		ok = false;
	}
	if (!*https && !is_loopback_host(host, hlen)) {
		err_e(c, e, "http:// is allowed only for 127.0.0.1, localhost or [::1]; use https://");
		ok = false;
	}
	return ok;
}

/* listen = host:port with host an IPv4 address, "localhost", or [IPv6]. */
static void check_listen(struct ctx *c, const struct entry *e, const char *v, char **host,
    uint16_t *port)
{
	const char *h = v, *p;
	size_t hlen;
	char tmp[INET6_ADDRSTRLEN + 1];
	unsigned char addr[16];
	if (v[0] == '[') {
		const char *rb = strchr(v, ']');
		if (rb == NULL || rb[1] != ':') {
			err_e(c, e, "expected HOST:PORT (IPv6 as [ADDRESS]:PORT)");
			return;
		}
		h = v + 1;
		hlen = (size_t)(rb - h);
		p = rb + 2;
		if (hlen == 0 || hlen >= sizeof tmp) {
			err_e(c, e, "malformed IPv6 address");
			return;
		}
		memcpy(tmp, h, hlen);
		tmp[hlen] = '\0';
		if (inet_pton(AF_INET6, tmp, addr) != 1) {
			err_e(c, e, "malformed IPv6 address");
			return;
		}
	} else {
		const char *colon = strrchr(v, ':');
		if (colon == NULL) {
			err_e(c, e, "expected HOST:PORT");
			return;
		}
		hlen = (size_t)(colon - v);
		p = colon + 1;
		if (hlen == 0 || hlen >= sizeof tmp) {
			err_e(c, e, "host must be an IPv4 address, localhost or [IPv6]");
			return;
		}
		memcpy(tmp, v, hlen);
		tmp[hlen] = '\0';
		if (strcmp(tmp, "localhost") != 0 && inet_pton(AF_INET, tmp, addr) != 1) {
			err_e(c, e, "host must be an IPv4 address, localhost or [IPv6]");
			return;
		}
	}
	if (!parse_port(p, strlen(p), port)) {
		err_e(c, e, "port must be from 1 to 65535");
		return;
	}
	*host = xstrndup(c, h, hlen);
}

/* RFC 3986 absolute URI: scheme ":" something, no fragment, no spaces. */
static bool check_abs_uri(struct ctx *c, const struct entry *e, const char *v)
{
	size_t i = 0;
	if (!isalpha((unsigned char)v[0]))
		goto bad;
	while (isalnum((unsigned char)v[i]) || v[i] == '+' || v[i] == '-' || v[i] == '.')
		i++;
	if (v[i] != ':' || v[i + 1] == '\0')
		goto bad;
	for (const char *p = v; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			goto bad;
	if (strchr(v, '#') != NULL) {
		err_e(c, e, "must not have a fragment ('#')");
		return false;
	}
	return true;
bad:
	err_e(c, e, "must be an absolute URI (scheme:...), printable ASCII without spaces");
	return false;
}

/* route = METHOD /path/{capture}/...; captures are whole names [A-Za-z0-9_], unique. */
static void check_route(struct ctx *c, const struct entry *e, const char *v, char **method,
    char **path)
{
	char **w = NULL;
	size_t n = 0;
	char *names = NULL;
	w = split_words(c, v, &n);
	if (w == NULL)
		goto out;
	if (n != 2 || !in_list(route_methods, w[0])) {
		err_e(c, e, "expected 'METHOD /path' with METHOD one of GET HEAD POST PUT PATCH DELETE");
		goto out;
	}
	const char *p = w[1];
	if (p[0] != '/') {
		err_e(c, e, "the path must start with '/'");
		goto out;
	}
	size_t plen = strlen(p);
	names = calloc(plen + 2, 1);       /* "\n"-separated capture names seen so far */
	if (names == NULL) {
		c->oom = true;
		goto out;
	}
	size_t nlen = 0;
	for (size_t i = 0; i < plen; i++) {
		unsigned char ch = (unsigned char)p[i];
		if (ch <= 0x20 || ch >= 0x7f || ch == '?' || ch == '#' || ch == '}') {
			err_e(c, e, "the path must be printable ASCII without spaces, '?', '#' or a "
			    "stray '}'");
			goto out;
		}
		if (ch == '%') {
			err_e(c, e, "the path must not hold '%%': a literal segment is matched "
			    "decoded and sent as written");
			goto out;
		}
		if (ch == '/' && p[i + 1] == '\0' && i > 0) {
			err_e(c, e, "the path must not end with '/' (a request path never does)");
			goto out;
		}
		if (ch == '/' && (p[i + 1] == '/' ||
		    (p[i + 1] == '.' && (p[i + 2] == '/' || p[i + 2] == '\0')) ||
		    (p[i + 1] == '.' && p[i + 2] == '.' && (p[i + 3] == '/' || p[i + 3] == '\0')))) {
			err_e(c, e, "the path must not contain empty, '.' or '..' segments");
			goto out;
		}
		if (ch == '{') {
			size_t j = i + 1;
			if (p[i - 1] != '/') {
				err_e(c, e, "a capture must be a whole segment: /{NAME}/");
				goto out;
			}
			while (isalnum((unsigned char)p[j]) || p[j] == '_')
				j++;
			if (p[j] != '}' || j == i + 1) {
				err_e(c, e, "a capture must be {NAME} with letters, digits or '_'");
				goto out;
			}
			if (p[j + 1] != '/' && p[j + 1] != '\0') {
				err_e(c, e, "a capture must be a whole segment: /{NAME}/");
				goto out;
			}
			size_t cl = j - i - 1;
			for (const char *q = names; *q;) {
				const char *nl = strchr(q, '\n');
				if ((size_t)(nl - q) == cl && memcmp(q, p + i + 1, cl) == 0) {
					err_e(c, e, "capture {%.*s} appears twice", (int)cl, p + i + 1);
					goto out;
				}
				q = nl + 1;
			}
			memcpy(names + nlen, p + i + 1, cl);
			nlen += cl;
			names[nlen++] = '\n';
			i = j;
		}
	}
	*method = xstrdup(c, w[0]);
	*path = xstrdup(c, w[1]);
out:
	free(names);
	free_strv(w);
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Base64 (standard alphabet) of exactly 32 bytes: 43 characters, or 44 with one '='. */
static bool is_b64_32(const char *s)
{
	size_t n = strlen(s);
	if (n == 44 && s[43] == '=')
		n = 43;
	else if (n != 43)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '+' || s[i] == '/'))
			return false;
	/* the last character carries 2 bits of padding that must be zero */
	return strchr("AEIMQUYcgkosw048", s[42]) != NULL;
}

/* A list of words: at least one, no duplicates; each checked by ok(). */
static char **get_words(struct ctx *c, const struct section *s, const char *key,
    const char *def, bool (*ok)(const char *), const char *what, size_t *count, bool *given)
{
	char *v = NULL;
	char **w = NULL;
	size_t n = 0, dup;
	*count = 0;
	*given = false;
	const struct entry *e = get_str(c, s, key, def, S_EMPTY_OK, &v);
	if (v == NULL)
		goto out;
	*given = e != NULL;
	w = split_words(c, v, &n);
	if (w == NULL || e == NULL)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (!ok(w[i])) {
			err_e(c, e, "'%s' is not a valid %s", w[i], what);
			goto out;
		}
	if (has_dup(w, n, &dup))
		err_e(c, e, "'%s' is listed twice", w[dup]);
out:
	if (w != NULL)
		*count = n;
	free(v);
	return w;
}

/* ---------------------------------------------------------------- fixed sections */

static void load_server(struct ctx *c, struct config *cfg, const struct section *s)
{
	char *v = NULL;
	int64_t n;
	const struct entry *e = get_str(c, s, "listen", "127.0.0.1:8080", 0, &v);
	if (v != NULL) {
		static const struct entry def = { .key = (char *)"listen" };
		check_listen(c, e != NULL ? e : &def, v, &cfg->listen_host, &cfg->listen_port);
	}
	free(v);

	e = get_str(c, s, "public_url", NULL, S_REQUIRED, &cfg->public_url);
	if (e != NULL && !check_url(c, e, cfg->public_url, 0, &cfg->public_url_is_https)) {
		free(cfg->public_url);
		cfg->public_url = NULL;
	} else if (e != NULL) {
		size_t l = strlen(cfg->public_url);
		if (cfg->public_url[l - 1] == '/')
			cfg->public_url[l - 1] = '\0';
	}

	get_int(c, s, "threads", 0, 0, MAX_THREADS, &n);
	if (n == 0) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		n = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : cpus;
	}
	cfg->threads = (unsigned)n;
	get_int(c, s, "max_body", 65536, 1024, 16 * 1024 * 1024, &n);
	cfg->max_body = (size_t)n;
	get_int(c, s, "per_ip_connections", 64, 1, 10000, &n);
	cfg->per_ip_connections = (unsigned)n;
	get_int(c, s, "idle_timeout", 30, 1, 3600, &n);
	cfg->idle_timeout = (unsigned)n;
	(void)get_str(c, s, "log", "stderr", 0, &cfg->log);
	static const char *const level_names[] = { "debug", "info", "warn", "error", NULL };
	int lv;
	get_enum(c, s, "log_level", level_names, LOG_INFO, &lv);
	cfg->log_level = (enum log_level)lv;
}

static void load_keys(struct ctx *c, struct config *cfg, const struct section *s)
{
	(void)get_str(c, s, "master_key_file", "/etc/consentd/master.key", 0, &cfg->master_key_file);
	get_int(c, s, "grant_ttl", 300, 1, 900, &cfg->grant_ttl);
	get_int(c, s, "publish_lead", 3600, 0, 2592000, &cfg->publish_lead);
	if (c->master_key != NULL) {
		if (!is_b64_32(c->master_key))
			err_env(c, c->master_key_var, "master_key: must be base64 of exactly 32 bytes");
		else
			cfg->master_key_b64 = xstrdup(c, c->master_key);
	}
}

static bool word_ok_token(const char *w) { return valid_token(w); }
static bool word_ok_scope(const char *w) { return valid_scope_token(w); }
static bool word_ok_type(const char *w) { return in_list(token_types, w); }

static void load_oidc(struct ctx *c, struct config *cfg, const struct section *s)
{
	bool https;
	int i;
	const struct entry *e = get_str(c, s, "issuer", NULL, S_REQUIRED, &cfg->oidc_issuer);
	if (e != NULL)
		(void)check_url(c, e, cfg->oidc_issuer, URL_PATH, &https);
	e = get_str(c, s, "client_id", NULL, S_REQUIRED, &cfg->oidc_client_id);
	if (e != NULL && !valid_token(cfg->oidc_client_id))
		err_e(c, e, "must be printable ASCII without spaces, at most %d characters", MAX_ID);
	(void)get_str(c, s, "client_secret", NULL, S_REQUIRED, &cfg->oidc_client_secret);
	get_enum(c, s, "token_endpoint_auth", auth_names, AUTH_CLIENT_SECRET_BASIC, &i);
	cfg->oidc_token_endpoint_auth = (enum config_auth)i;

	e = get_str(c, s, "scopes", "openid profile email", 0, &cfg->oidc_scopes);
	if (e != NULL) {
		size_t n = 0;
		char **w = split_words(c, cfg->oidc_scopes, &n);
		bool openid = false;
		for (size_t j = 0; w != NULL && j < n; j++) {
			if (!valid_scope_token(w[j])) {
				err_e(c, e, "'%s' is not a valid scope", w[j]);
				break;
			}
			openid = openid || strcmp(w[j], "openid") == 0;
		}
		if (w != NULL && !openid)
			err_e(c, e, "must include openid");
		free_strv(w);
	}

	e = get_str(c, s, "subject_claim", "sub", 0, &cfg->oidc_subject_claim);
	if (e != NULL) {
		const char *v = cfg->oidc_subject_claim;
		if (!valid_token(v))
			err_e(c, e, "must be a claim name (printable ASCII without spaces)");
		else if (in_list(reassignable_claims, v))
			/* SECURITY: a reassignable claim would let a new holder of an old
			 * address inherit someone else's consents. */
			err_e(c, e, "'%s' can be reassigned to another person; use sub", v);
		else if (strcmp(v, "sub") != 0)
			warn_e(c, e, "'%s' is not sub: make sure the IdP never reuses its values "
			    "and that the gateway's tokens carry the same claim", v);
	}
	e = get_str(c, s, "admin_claim", "groups", 0, &cfg->oidc_admin_claim);
	if (e != NULL && !valid_token(cfg->oidc_admin_claim))
		err_e(c, e, "must be a claim name (printable ASCII without spaces)");
	(void)get_str(c, s, "admin_value", "consent-admins", 0, &cfg->oidc_admin_value);
	get_int(c, s, "clock_skew", 60, 0, 600, &cfg->oidc_clock_skew);
}

static const char *const gateway_auth_names[] = { "client_secret_basic", "private_key_jwt", NULL };
static bool word_ok_gateway_auth(const char *w) { return in_list(gateway_auth_names, w); }

/* The gateway's public keys, for private_key_jwt: a JWKS file read and checked
 * here, so that consentd -n catches a bad one. */
static void load_gateway_jwks(struct ctx *c, struct config *cfg, const struct entry *e)
{
	struct buf b;
	char chunk[4096], why[160];
	struct jws_keyset *ks = NULL;
	FILE *f = fopen(cfg->gateway_jwks_file, "re");
	buf_init(&b, 256 * 1024);
	if (f == NULL) {
		err_e(c, e, "cannot open '%s': %s", cfg->gateway_jwks_file, strerror(errno));
		goto out;
	}
	for (;;) {
		size_t got = fread(chunk, 1, sizeof chunk, f);
		enum cs_err r = got > 0 ? buf_append(&b, chunk, got) : CS_OK;
		if (r != CS_OK) {
			err_e(c, e, "'%s' is larger than 256 KiB", cfg->gateway_jwks_file);
			goto out;
		}
		if (got < sizeof chunk) {
			if (ferror(f)) {
				err_e(c, e, "cannot read '%s': %s", cfg->gateway_jwks_file, strerror(errno));
				goto out;
			}
			break;
		}
	}
	if (buf_append(&b, "", 1) != CS_OK) {
		c->oom = true;
		goto out;
	}
	enum cs_err r = jws_keyset_parse(b.data, &ks, why, sizeof why);
	if (r == CS_ENOMEM)
		c->oom = true;
	else if (r != CS_OK)
		err_e(c, e, "'%s': %s", cfg->gateway_jwks_file, why);
	else
		cfg->gateway_jwks_json = buf_steal(&b);
out:
	jws_keyset_free(ks);
	if (f != NULL)
		fclose(f);
	buf_clear(&b);
}

static void load_gateway_auth(struct ctx *c, struct config *cfg, const struct section *s)
{
	bool given;
	size_t n = 0;
	char **w = get_words(c, s, "token_endpoint_auth", "client_secret_basic", word_ok_gateway_auth,
	    "method (client_secret_basic or private_key_jwt)", &n, &given);
	const struct entry *e = find(s, "token_endpoint_auth");
	for (size_t i = 0; w != NULL && i < n; i++) {
		if (strcmp(w[i], "client_secret_basic") == 0)
			cfg->gateway_auth_basic = true;
		else if (strcmp(w[i], "private_key_jwt") == 0)
			cfg->gateway_auth_private_key_jwt = true;
	}
	if (w != NULL && n == 0 && e != NULL)
		err_e(c, e, "must name client_secret_basic, private_key_jwt or both");
	free_strv(w);
	if (e != NULL && e->bad)
		cfg->gateway_auth_basic = true;     /* already an error; keep the rest quiet */
	bool https;
	e = get_str(c, s, "jwks_file", NULL, S_EMPTY_NULL, &cfg->gateway_jwks_file);
	const struct entry *ue = get_str(c, s, "jwks_uri", NULL, S_EMPTY_NULL, &cfg->gateway_jwks_uri);
	if (cfg->gateway_jwks_file != NULL && cfg->gateway_jwks_uri != NULL)
		err_e(c, ue, "give jwks_file or jwks_uri, not both");
	else if (cfg->gateway_auth_private_key_jwt && cfg->gateway_jwks_file == NULL &&
	    cfg->gateway_jwks_uri == NULL && ue == NULL)
		err_line(c, s->line, "jwks_file", "required with private_key_jwt in token_endpoint_auth "
		    "(the gateway's public keys; or jwks_uri)");
	else if (!cfg->gateway_auth_private_key_jwt && (find(s, "jwks_file") != NULL ||
	    find(s, "jwks_uri") != NULL))
		err_e(c, find(s, "jwks_file") ? find(s, "jwks_file") : find(s, "jwks_uri"),
		    "used only with private_key_jwt in token_endpoint_auth");
	else if (e != NULL)
		load_gateway_jwks(c, cfg, e);
	else if (ue != NULL && !check_url(c, ue, cfg->gateway_jwks_uri, URL_PATH | URL_QUERY, &https)) {
		free(cfg->gateway_jwks_uri);
		cfg->gateway_jwks_uri = NULL;
	}
	get_int(c, s, "clock_skew", 60, 5, 300, &cfg->gateway_clock_skew);
	get_bool(c, s, "require_dpop", false, &cfg->gateway_require_dpop);
	get_bool(c, s, "dpop_nonce", false, &cfg->gateway_dpop_nonce);
}

static void load_gateway(struct ctx *c, struct config *cfg, const struct section *s)
{
	bool https, given;
	char *hex = NULL;
	const struct entry *e = get_str(c, s, "id", "agent-gateway", 0, &cfg->gateway_id);
	if (e != NULL && !valid_token(cfg->gateway_id))
		err_e(c, e, "must be printable ASCII without spaces, at most %d characters", MAX_ID);

	load_gateway_auth(c, cfg, s);
	const struct entry *se = get_str(c, s, "client_secret", NULL, 0, &cfg->gateway_client_secret);
	const struct entry *he = get_str(c, s, "client_secret_sha256", NULL, 0, &hex);
	const struct entry *sraw = find(s, "client_secret");
	const struct entry *hraw = find(s, "client_secret_sha256");
	if (!cfg->gateway_auth_basic) {
		/* SECURITY: a secret that no longer opens anything is not kept around
		 * to be found; the operator removes it. */
		if (sraw != NULL || hraw != NULL)
			err_e(c, sraw != NULL ? sraw : hraw, "not used without client_secret_basic in "
			    "token_endpoint_auth; remove it");
	} else if (sraw != NULL && hraw != NULL) {
		err_e(c, hraw, "give client_secret or client_secret_sha256, not both");
	} else if (sraw == NULL && hraw == NULL) {
		err_line(c, s->line, "client_secret", "required in [gateway] (or client_secret_sha256, "
		    "or CONSENTD_GATEWAY_CLIENT_SECRET)");
	} else if (se != NULL) {
		size_t n = strlen(cfg->gateway_client_secret);
		if (n < MIN_GW_SECRET)
			err_e(c, se, "must be at least %d characters", MIN_GW_SECRET);
		else if (EVP_Digest(cfg->gateway_client_secret, n, cfg->gateway_secret_sha256, NULL,
		    EVP_sha256(), NULL) != 1)
			c->oom = true;
		else
			cfg->gateway_has_secret = true;
	} else if (he != NULL) {
		bool ok = strlen(hex) == 64;
		for (size_t i = 0; ok && i < 32; i++) {
			int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
			if (hi < 0 || lo < 0)
				ok = false;
			else
				cfg->gateway_secret_sha256[i] = (unsigned char)(hi << 4 | lo);
		}
		if (ok)
			cfg->gateway_has_secret = true;
		else
			err_e(c, he, "must be 64 hexadecimal characters (a SHA-256)");
	}
	free(hex);

	cfg->subject_audiences = get_words(c, s, "subject_audiences", "gateway-app", word_ok_token,
	    "audience", &cfg->nsubject_audiences, &given);
	e = find(s, "subject_audiences");
	if (cfg->subject_audiences != NULL && cfg->nsubject_audiences == 0 && e != NULL)
		err_e(c, e, "must name at least one audience");
	for (size_t i = 0; e != NULL && cfg->subject_audiences != NULL &&
	    i < cfg->nsubject_audiences; i++) {
		const char *a = cfg->subject_audiences[i];
		/* SECURITY: tokens minted for the gateway itself or for consentd's own login
		 * must never pass as a user's subject token. */
		if (cfg->gateway_id != NULL && strcmp(a, cfg->gateway_id) == 0)
			err_e(c, e, "'%s' is the gateway id; subject tokens must be for the gateway's "
			    "application, not for the gateway client", a);
		if (cfg->oidc_client_id != NULL && strcmp(a, cfg->oidc_client_id) == 0)
			err_e(c, e, "'%s' is consentd's own [oidc] client_id; its ID tokens must not "
			    "serve as subject tokens", a);
	}

	cfg->subject_token_types = get_words(c, s, "subject_token_types", "id_token access_token jwt",
	    word_ok_type, "token type (id_token, access_token or jwt)",
	    &cfg->nsubject_token_types, &given);
	e = find(s, "subject_token_types");
	if (cfg->subject_token_types != NULL && cfg->nsubject_token_types == 0 && e != NULL)
		err_e(c, e, "must name at least one of id_token, access_token, jwt");

	e = get_str(c, s, "events_uri", NULL, S_EMPTY_NULL, &cfg->events_uri);
	if (e != NULL && !check_url(c, e, cfg->events_uri, URL_PATH | URL_QUERY, &https)) {
		free(cfg->events_uri);
		cfg->events_uri = NULL;
	}
}

/* ---------------------------------------------------------------- dynamic sections */

static void load_agent(struct ctx *c, struct config_agent *a, const struct section *s)
{
	bool given;
	a->id = xstrdup(c, s->a);
	(void)get_str(c, s, "name", s->a, 0, &a->name);
	(void)get_str(c, s, "description", "", S_EMPTY_OK, &a->description);
	a->allow = get_words(c, s, "allow", "", word_ok_token, "RESOURCE:SCOPE entry",
	    &a->nallow, &given);
	get_bool(c, s, "offline", false, &a->offline);
}

static void load_resource(struct ctx *c, struct config_resource *r, const struct section *s)
{
	bool https;
	int i;
	const struct entry *e;
	char *def_uri = NULL;
	struct buf b;
	buf_init(&b, 256);

	r->id = xstrdup(c, s->a);
	(void)get_str(c, s, "name", s->a, 0, &r->name);
	if (buf_printf(&b, "urn:consentd:resource:%s", s->a) != CS_OK || (def_uri = buf_steal(&b)) == NULL)
		c->oom = true;
	e = get_str(c, s, "uri", def_uri != NULL ? def_uri : "", 0, &r->uri);
	if (e != NULL && !check_abs_uri(c, e, r->uri)) {
		free(r->uri);
		r->uri = NULL;
	}
	get_int(c, s, "max_consent", 2592000, 1, 315360000, &r->max_consent);

	static const char *const provider_keys[] = { "provider_issuer",
		"provider_authorization_endpoint", "provider_token_endpoint",
		"provider_revocation_endpoint" };
	char **fields[] = { &r->provider_issuer, &r->provider_authorization_endpoint,
		&r->provider_token_endpoint, &r->provider_revocation_endpoint };
	bool any = false;
	for (size_t k = 0; k < 4; k++) {
		e = get_str(c, s, provider_keys[k], NULL, S_EMPTY_NULL, fields[k]);
		if (e != NULL && !check_url(c, e, *fields[k], k == 0 ? URL_PATH : URL_PATH | URL_QUERY,
		    &https)) {
			free(*fields[k]);
			*fields[k] = NULL;
		}
		any = any || section_has_value(s, provider_keys[k]);
	}
	e = get_str(c, s, "provider_client_id", NULL, S_EMPTY_NULL, &r->provider_client_id);
	if (e != NULL && !valid_token(r->provider_client_id))
		err_e(c, e, "must be printable ASCII without spaces, at most %d characters", MAX_ID);
	(void)get_str(c, s, "provider_client_secret", NULL, S_EMPTY_NULL, &r->provider_client_secret);
	any = any || section_has_value(s, "provider_client_id") ||
	    section_has_value(s, "provider_client_secret");
	if (any) {
		if (!section_has_value(s, "provider_issuer") &&
		    !(section_has_value(s, "provider_authorization_endpoint") &&
		    section_has_value(s, "provider_token_endpoint")))
			err_line(c, s->line, "provider_issuer", "required in [%s] (or both "
			    "provider_authorization_endpoint and provider_token_endpoint)", s->name);
		if (!section_has_value(s, "provider_client_id"))
			err_line(c, s->line, "provider_client_id", "required in [%s] when a provider "
			    "is configured", s->name);
	}
	get_int(c, s, "refresh_margin", 60, 0, 3600, &r->refresh_margin);
	get_enum(c, s, "token_release", release_names, RELEASE_GATEWAY, &i);
	r->token_release = (enum config_release)i;

	e = get_str(c, s, "base_url", NULL, S_EMPTY_NULL, &r->base_url);
	if (e != NULL && !check_url(c, e, r->base_url, URL_PATH, &https)) {
		free(r->base_url);
		r->base_url = NULL;
	} else if (e != NULL) {
		size_t l = strlen(r->base_url);
		if (r->base_url[l - 1] == '/')
			r->base_url[l - 1] = '\0';    /* routes bring their own leading '/' */
	}
	e = find(s, "token_release");
	if (e != NULL && r->token_release == RELEASE_NEVER && !section_has_value(s, "base_url"))
		err_e(c, e, "never (proxy only) needs base_url in [%s]", s->name);
	free(def_uri);
	buf_clear(&b);
}

static void load_scope(struct ctx *c, struct config_scope *sc, const struct section *s)
{
	bool given;
	sc->resource = xstrdup(c, s->a);
	sc->name = xstrdup(c, s->b);
	(void)get_str(c, s, "description", s->b, 0, &sc->description);
	sc->provider = get_words(c, s, "provider", "", word_ok_scope, "provider scope",
	    &sc->nprovider, &given);
}

static void load_action(struct ctx *c, struct config_action *ac, const struct section *s)
{
	int i;
	ac->resource = xstrdup(c, s->a);
	ac->name = xstrdup(c, s->b);
	(void)get_str(c, s, "description", s->b, 0, &ac->description);
	const struct entry *e = get_str(c, s, "scope", NULL, S_REQUIRED, &ac->scope);
	if (e != NULL && !valid_part(ac->scope, strlen(ac->scope), true))
		err_e(c, e, "must be a bare scope name of resource %s", s->a);
	get_enum(c, s, "approval", approval_names, APPROVAL_NONE, &i);
	ac->approval = (enum config_approval)i;
	char *route = NULL;
	e = get_str(c, s, "route", NULL, S_EMPTY_NULL, &route);
	if (e != NULL)
		check_route(c, e, route, &ac->route_method, &ac->route_path);
	free(route);
}

/* ---------------------------------------------------------------- cross-checks */

static const struct section *resource_section(const struct ctx *c, const char *res)
{
	for (size_t j = 0; j < c->nsecs; j++)
		if (c->secs[j].kind == SK_RESOURCE && strcmp(c->secs[j].a, res) == 0)
			return &c->secs[j];
	return NULL;
}

/* Whether the resource's section names a provider (judged on the keys given, so
 * that a provider URL already reported as bad does not cause a second error). */
static bool section_has_provider(const struct section *rs)
{
	for (size_t j = 0; rs != NULL && j < rs->nents; j++)
		if (strncmp(rs->ents[j].key, "provider_", 9) == 0 && value_of(&rs->ents[j])[0])
			return true;
	return false;
}


static void check_agent(struct ctx *c, const struct config *cfg, const struct section *s,
    const struct config_agent *a)
{
	const struct entry *e = find(s, "allow");
	for (size_t j = 0; e != NULL && a->allow != NULL && j < a->nallow; j++) {
		const char *w = a->allow[j];
		const char *colon = strchr(w, ':');       /* the first colon separates */
		if (colon == NULL || colon == w || colon[1] == '\0') {
			err_e(c, e, "'%s' is not RESOURCE:SCOPE", w);
			continue;
		}
		char *res = xstrndup(c, w, (size_t)(colon - w));
		if (res == NULL)
			return;
		if (config_resource(cfg, res) == NULL)
			err_e(c, e, "'%s': no [resource.%s] section", w, res);
		else if (config_scope(cfg, res, colon + 1) == NULL)
			err_e(c, e, "'%s': no [scope.%s.%s] section", w, res, colon + 1);
		free(res);
	}
}

/* 1 when some path matches both templates (checked by check_route: '/'-separated
 * segments, each a literal or a whole {capture}): the same number of segments, and at
 * every position equal literals or a capture on either side. */
static int routes_overlap(const char *a, const char *b)
{
	for (;;) {
		size_t al = strcspn(a, "/"), bl = strcspn(b, "/");
		if (!(a[0] == '{' || b[0] == '{' || (al == bl && memcmp(a, b, al) == 0)))
			return 0;
		a += al;
		b += bl;
		if (*a == '\0' || *b == '\0')
			return *a == *b;
		a++;
		b++;
	}
}

static void check_action(struct ctx *c, const struct config *cfg, const struct section *s,
    const struct config_action *ac, size_t index)
{
	if (config_resource(cfg, s->a) == NULL) {
		err_line(c, s->line, NULL, "[%s]: no [resource.%s] section", s->name, s->a);
		return;
	}
	const struct entry *e = find(s, "scope");
	if (ac->scope != NULL && e != NULL && config_scope(cfg, s->a, ac->scope) == NULL)
		err_e(c, e, "no [scope.%s.%s] section", s->a, ac->scope);
	e = find(s, "route");
	if (ac->route_method == NULL || ac->route_path == NULL || e == NULL)
		return;
	if (!section_has_value(resource_section(c, s->a), "base_url"))
		err_e(c, e, "a route needs base_url in [resource.%s]", s->a);
	for (size_t j = 0; j < index; j++) {
		const struct config_action *o = &cfg->actions[j];
		if (o->route_method != NULL && o->route_path != NULL && o->resource != NULL &&
		    strcmp(o->resource, s->a) == 0 && strcmp(o->route_method, ac->route_method) == 0 &&
		    routes_overlap(o->route_path, ac->route_path))
			err_e(c, e, "overlaps the route of [action.%s.%s]: one request could match "
			    "both", o->resource, o->name);
	}
}

/* [consent] default_duration is one value for every resource, and each resource
 * caps its consents with max_consent: the page preselects the smaller of the two.
 * An operator who wrote a default longer than a resource allows hears so (it is
 * not an error: a short max_consent on one sensitive resource is normal). */
static void check_default_duration(struct ctx *c, const struct config *cfg)
{
	const struct entry *e = find(find_section(c, "consent"), "default_duration");
	if (e == NULL || e->bad)
		return;
	for (size_t i = 0; i < cfg->nresources; i++)
		if (cfg->resources[i].max_consent < cfg->consent_default_duration)
			warn_e(c, e, "%lld is longer than max_consent of [resource.%s] (%lld): its "
			    "consent page preselects %lld", (long long)cfg->consent_default_duration,
			    cfg->resources[i].id, (long long)cfg->resources[i].max_consent,
			    (long long)cfg->resources[i].max_consent);
}

static void cross_check(struct ctx *c, const struct config *cfg)
{
	size_t ia = 0, ir = 0, iac = 0;

	check_default_duration(c, cfg);

	const struct entry *e = find(find_section(c, "server"), "public_url");
	if (e != NULL && cfg->public_url != NULL && cfg->oidc_issuer != NULL) {
		size_t l = strlen(cfg->oidc_issuer);
		if (l > 0 && cfg->oidc_issuer[l - 1] == '/')
			l--;
		/* SECURITY: consentd's grants and the IdP's tokens must never share an issuer. */
		if (strlen(cfg->public_url) == l && strncasecmp(cfg->public_url, cfg->oidc_issuer, l) == 0)
			err_e(c, e, "must differ from [oidc] issuer");
	}

	for (size_t i = 0; i < c->nsecs; i++) {
		const struct section *s = &c->secs[i];
		switch (s->kind) {
		case SK_AGENT:
			check_agent(c, cfg, s, &cfg->agents[ia++]);
			break;
		case SK_RESOURCE: {
			const struct config_resource *r = &cfg->resources[ir];
			e = find(s, "uri");
			for (size_t j = 0; r->uri != NULL && j < ir; j++) {
				if (cfg->resources[j].uri == NULL || strcmp(cfg->resources[j].uri, r->uri) != 0)
					continue;
				if (e != NULL)
					err_e(c, e, "same as the uri of [resource.%s]", cfg->resources[j].id);
				else
					err_line(c, s->line, "uri", "the default uri of [%s] is already the uri "
					    "of [resource.%s]", s->name, cfg->resources[j].id);
			}
			ir++;
			break;
		}
		case SK_SCOPE: {
			const struct section *rs = resource_section(c, s->a);
			if (rs == NULL) {
				err_line(c, s->line, NULL, "[%s]: no [resource.%s] section", s->name, s->a);
				break;
			}
			e = find(s, "provider");
			if (e != NULL && value_of(e)[0] != '\0' && !section_has_provider(rs))
				err_e(c, e, "[resource.%s] has no provider", s->a);
			break;
		}
		case SK_ACTION:
			check_action(c, cfg, s, &cfg->actions[iac], iac);
			iac++;
			break;
		default:
			break;
		}
	}
}

/* ---------------------------------------------------------------- loading */

static void check_all_text(struct ctx *c)
{
	for (size_t i = 0; i < c->nsecs; i++)
		for (size_t j = 0; j < c->secs[i].nents; j++) {
			struct entry *e = &c->secs[i].ents[j];
			const char *why = e->bad ? NULL : text_problem(value_of(e));
			if (why != NULL) {
				err_e(c, e, "%s", why);
				e->bad = true;
			}
		}
}

static size_t count_kind(const struct ctx *c, enum sec_kind k)
{
	size_t n = 0;
	for (size_t i = 0; i < c->nsecs; i++)
		n += c->secs[i].kind == k;
	return n;
}

static void *calloc_n(struct ctx *c, size_t n, size_t size)
{
	if (n == 0)
		return NULL;
	void *p = calloc(n, size);
	if (p == NULL)
		c->oom = true;
	return p;
}

static void load_dynamic(struct ctx *c, struct config *cfg)
{
	size_t na = count_kind(c, SK_AGENT), nr = count_kind(c, SK_RESOURCE);
	size_t ns = count_kind(c, SK_SCOPE), nac = count_kind(c, SK_ACTION);
	cfg->agents = calloc_n(c, na, sizeof *cfg->agents);
	cfg->resources = calloc_n(c, nr, sizeof *cfg->resources);
	cfg->scopes = calloc_n(c, ns, sizeof *cfg->scopes);
	cfg->actions = calloc_n(c, nac, sizeof *cfg->actions);
	if (c->oom)
		return;
	for (size_t i = 0; i < c->nsecs; i++) {
		const struct section *s = &c->secs[i];
		switch (s->kind) {
		case SK_AGENT:    load_agent(c, &cfg->agents[cfg->nagents++], s); break;
		case SK_RESOURCE: load_resource(c, &cfg->resources[cfg->nresources++], s); break;
		case SK_SCOPE:    load_scope(c, &cfg->scopes[cfg->nscopes++], s); break;
		case SK_ACTION:   load_action(c, &cfg->actions[cfg->nactions++], s); break;
		default:          break;
		}
	}
}

static enum cs_err load_text(const char *text, size_t len, const char *name,
    char *const *env, FILE *errs, struct config **out)
{
	struct ctx c;
	struct config *cfg = NULL;
	enum cs_err rc = CS_ECONFIG;
	int64_t n;

	memset(&c, 0, sizeof c);
	c.file = name != NULL ? name : "(config)";
	c.errs = errs;
	c.text = text != NULL ? text : "";
	c.len = text != NULL ? len : 0;
	c.cur = c.last_sec = c.last_ent = -1;
	c.env = env;
	if (c.len > MAX_FILE) {
		err_line(&c, 0, NULL, "file too large (max %d bytes)", MAX_FILE);
		goto out;
	}
	int r = ini_parse_stream(reader, &c, on_value, &c);
	if (r == -2)
		c.oom = true;
	else if (r != 0 && c.nerr == 0)
		err_line(&c, r > 0 ? r : 0, NULL, "syntax error");
	if (c.oom)
		goto out;
	apply_env(&c);
	if (c.oom)
		goto out;
	check_all_text(&c);

	cfg = calloc(1, sizeof *cfg);
	if (cfg == NULL || (cfg->path = strdup(c.file)) == NULL) {
		c.oom = true;
		goto out;
	}
	load_server(&c, cfg, find_section(&c, "server"));
	(void)get_str(&c, find_section(&c, "database"), "path", "/var/lib/consentd/consentd.db", 0,
	    &cfg->db_path);
	load_keys(&c, cfg, find_section(&c, "keys"));
	load_oidc(&c, cfg, find_section(&c, "oidc"));

	const struct section *s = find_section(&c, "session");
	get_int(&c, s, "idle_timeout", 1800, 1, 2592000, &cfg->session_idle_timeout);
	get_int(&c, s, "absolute_timeout", 43200, 1, 31536000, &cfg->session_absolute_timeout);
	get_int(&c, s, "admin_timeout", 3600, 1, 86400, &cfg->session_admin_timeout);
	s = find_section(&c, "login");
	get_int(&c, s, "max_pending", 10000, 1, 1000000, &cfg->login_max_pending);
	get_int(&c, s, "max_pending_per_address", 16, 1, 1000000,
	    &cfg->login_max_pending_per_address);
	if (cfg->login_max_pending_per_address > cfg->login_max_pending) {
		const struct entry *pe = find(s, "max_pending_per_address");
		if (pe == NULL)          /* the default: a small max_pending lowers it */
			cfg->login_max_pending_per_address = cfg->login_max_pending;
		else if (!pe->bad)
			err_e(&c, pe, "must not be more than [login] max_pending (%lld)",
			    (long long)cfg->login_max_pending);
	}
	s = find_section(&c, "consent");
	get_int(&c, s, "request_ttl", 600, 1, 86400, &cfg->consent_request_ttl);
	get_int(&c, s, "interval", 5, 1, 300, &cfg->consent_interval);
	get_int(&c, s, "deny_cooldown", 86400, 0, 31536000, &cfg->consent_deny_cooldown);
	get_int(&c, s, "max_pending_per_user", 5, 1, 1000, &n);
	cfg->consent_max_pending_per_user = n;
	get_int(&c, s, "default_duration", 86400, 1, 315360000, &cfg->consent_default_duration);

	load_gateway(&c, cfg, find_section(&c, "gateway"));
	(void)get_str(&c, find_section(&c, "audit"), "head_file", NULL, S_EMPTY_NULL,
	    &cfg->audit_head_file);
	load_dynamic(&c, cfg);
	if (c.oom)
		goto out;
	cross_check(&c, cfg);

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
	return load_text(text, len, name, env, errs, out);
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
	rc = load_text(b.data != NULL ? b.data : "", b.len, path, environ, errs, out);
out:
	OPENSSL_cleanse(chunk, sizeof chunk);
	if (f != NULL)
		fclose(f);
	buf_wipe_clear(&b);     /* the file may hold secrets */
	return rc;
}

/* ---------------------------------------------------------------- -n reports */

unsigned config_warn_gateway_approvals(const struct config *cfg, FILE *out)
{
	unsigned n = 0;
	for (size_t i = 0; cfg != NULL && i < cfg->nactions; i++) {
		const struct config_action *ac = &cfg->actions[i];
		const struct config_resource *r = config_resource(cfg, ac->resource);
		if (ac->approval != APPROVAL_REQUIRED || r == NULL || r->token_release != RELEASE_GATEWAY ||
		    (r->provider_issuer == NULL && r->provider_token_endpoint == NULL))
			continue;
		fprintf(out, "warning: [action.%s.%s]: approval = required, but [resource.%s] has "
		    "token_release = gateway: consentd releases the token once per approval, and only "
		    "the gateway keeps it to this one action (it may already hold the same token from "
		    "an earlier release); with token_release = never consentd's proxy enforces each "
		    "approval itself\n", ac->resource, ac->name, r->id);
		n++;
	}
	return n;
}

/* ---------------------------------------------------------------- freeing and look-ups */

void config_free(struct config *c)
{
	if (c == NULL)
		return;
	free(c->path);
	free(c->listen_host);
	free(c->public_url);
	free(c->log);
	free(c->db_path);
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
	free_strv(c->subject_audiences);
	free_strv(c->subject_token_types);
	free(c->events_uri);
	free(c->gateway_jwks_file);
	free(c->gateway_jwks_uri);
	free(c->gateway_jwks_json);
	free(c->audit_head_file);
	for (size_t i = 0; i < c->nagents; i++) {
		free(c->agents[i].id);
		free(c->agents[i].name);
		free(c->agents[i].description);
		free_strv(c->agents[i].allow);
	}
	free(c->agents);
	for (size_t i = 0; i < c->nresources; i++) {
		struct config_resource *r = &c->resources[i];
		free(r->id);
		free(r->name);
		free(r->uri);
		free(r->provider_issuer);
		free(r->provider_authorization_endpoint);
		free(r->provider_token_endpoint);
		free(r->provider_revocation_endpoint);
		free(r->provider_client_id);
		wipe_free(r->provider_client_secret);
		free(r->base_url);
	}
	free(c->resources);
	for (size_t i = 0; i < c->nscopes; i++) {
		free(c->scopes[i].resource);
		free(c->scopes[i].name);
		free(c->scopes[i].description);
		free_strv(c->scopes[i].provider);
	}
	free(c->scopes);
	for (size_t i = 0; i < c->nactions; i++) {
		free(c->actions[i].resource);
		free(c->actions[i].name);
		free(c->actions[i].description);
		free(c->actions[i].scope);
		free(c->actions[i].route_method);
		free(c->actions[i].route_path);
	}
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
