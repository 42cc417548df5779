/* config_read.c -- the load's first step: the INI text (through inih) and the
 * CONSENTD_* environment into sections and entries, each remembering where it
 * came from.  It must never print a secret value and never accept an unknown
 * section, key or CONSENTD_* variable. */
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

/* CONSENTD_* variables that are not configuration keys and are left alone:
 * CONSENTD_CONFIG may name the file for the command line, CONSENTD_BIN names the
 * binary for the test tooling (scripts/check.sh).  Nothing else. */
static const char *const env_allowlist[] = { "CONSENTD_CONFIG", "CONSENTD_BIN", NULL };

static const char *const keys_server[] = { "listen", "public_url", "threads", "max_body",
	"per_ip_connections", "max_connections", "idle_timeout", "log", "log_level",
	"trusted_proxies", "proxy_header", "development", NULL };
static const char *const keys_database[] = { "path", "url", "password", "password_file",
    "prepared_statements", "write_queue", NULL };
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
static const char *const keys_audit[] = { "head_file", "batch_interval_ms", "crossref_interval",
	NULL };
static const char *const keys_metrics[] = { "token", "token_file", "listen", NULL };
static const char *const keys_mcp[] = { "cimd_allow", "cimd_hosts", "cimd_prefixes",
	"cimd_allow_loopback", "cimd_ca_file", "cimd_timeout_ms", "cimd_connect_timeout_ms",
	"cimd_max_bytes", "cimd_cache_entries", "cimd_cache_min_ttl", "cimd_cache_default_ttl",
	"cimd_cache_max_ttl", "cimd_failure_ttl", "require_dpop", NULL };
static const char *const keys_authzen[] = { "endpoint", "token", "token_file", "ca_file",
	"timeout_ms", "on_error", "actions", NULL };
static const char *const keys_retention[] = { "enabled", "interval", "batch_size", "grace",
	"revoked_consent_days", "audit_days", "audit_keep", NULL };
static const char *const keys_limits[] = { "address_rate", "address_burst", "person_rate",
	"person_burst", "gateway_rate", "gateway_burst", "auth_failure_rate", "auth_failure_burst",
	"buckets", NULL };
static const char *const keys_agent[] = { "name", "description", "allow", "offline", NULL };
static const char *const keys_resource[] = { "name", "uri", "max_consent", "provider_issuer",
	"provider_authorization_endpoint", "provider_token_endpoint",
	"provider_revocation_endpoint", "provider_client_id", "provider_client_secret",
	"refresh_margin", "token_release", "base_url", "preset", "provider_base_url", "credential",
	"api_key_header", "api_key_query", "api_key_prefix", "proactive_refresh", NULL };
static const char *const keys_scope[] = { "description", "provider", NULL };
static const char *const keys_action[] = { "description", "scope", "approval", "route",
	"standing", "standing_max", "standing_fixed", "approval_enforced_by", NULL };
static const char *const keys_client[] = { "client_id", "name", "redirect_uris",
	"token_endpoint_auth", "jwks_file", "jwks_uri", NULL };
static const char *const keys_mcp_endpoint[] = { "resource", "upstream", "upstream_timeout",
	"unmapped", "unmapped_scope", "log_arguments", NULL };
static const char *const keys_enterprise[] = { "issuer", "jwks_file", "jwks_uri", "allow", NULL };

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
	[SK_METRICS]  = { "metrics", keys_metrics },
	[SK_MCP]      = { "mcp", keys_mcp },
	[SK_AUTHZEN]  = { "authzen", keys_authzen },
	[SK_RETENTION] = { "retention", keys_retention },
	[SK_LIMITS]   = { "limits", keys_limits },
	[SK_AGENT]    = { "agent", keys_agent },
	[SK_RESOURCE] = { "resource", keys_resource },
	[SK_SCOPE]    = { "scope", keys_scope },
	[SK_ACTION]   = { "action", keys_action },
	[SK_CLIENT]   = { "client", keys_client },
	[SK_MCP_ENDPOINT] = { "mcp", keys_mcp_endpoint },
	[SK_ENTERPRISE] = { "enterprise", keys_enterprise },
};

const char *const *cfg_section_keys(enum sec_kind k, const char **name)
{
	*name = sec_defs[k].name;
	return sec_defs[k].keys;
}

int cfg_policy_key(const char *key)
{
	int64_t n;
	if (strncmp(key, "policy.", 7) != 0 || key[7] == '0')
		return 0;
	return cfg_parse_int(key + 7, 1, POLICY_MAX_LINES, &n) == NULL ? (int)n : 0;
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
	char *full = cfg_xstrndup(c, name, n);
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
		cfg_err_line(c, c->lineno, NULL, "[%s]: unknown section", full);
		goto out;
	}
	if (kind == SK_AGENT || kind == SK_RESOURCE || kind == SK_CLIENT || kind == SK_MCP_ENDPOINT ||
	    kind == SK_ENTERPRISE) {
		a = dot + 1;
		alen = strlen(a);
		if (!cfg_valid_part(a, alen, false)) {
			cfg_err_line(c, c->lineno, NULL, "[%s]: the %s name must be 1 to %d letters, digits, "
			    "'_' or '-'", full, sec_defs[kind].name, MAX_PART);
			ok = false;
		}
	} else if (kind == SK_SCOPE || kind == SK_ACTION) {
		a = dot + 1;
		const char *dot2 = strchr(a, '.');
		if (dot2 == NULL) {
			cfg_err_line(c, c->lineno, NULL, "[%s]: expected [%s.RESOURCE.%s]", full,
			    sec_defs[kind].name, kind == SK_SCOPE ? "SCOPE" : "ACTION");
			goto out;
		}
		alen = (size_t)(dot2 - a);
		b = dot2 + 1;
		blen = strlen(b);
		if (!cfg_valid_part(a, alen, false)) {
			cfg_err_line(c, c->lineno, NULL, "[%s]: the resource name must be 1 to %d letters, "
			    "digits, '_' or '-'", full, MAX_PART);
			ok = false;
		}
		if (!cfg_valid_part(b, blen, kind == SK_SCOPE)) {
			cfg_err_line(c, c->lineno, NULL, "[%s]: the %s name must be 1 to %d letters, digits, "
			    "'_', '-'%s (no dots)", full, sec_defs[kind].name, MAX_PART,
			    kind == SK_SCOPE ? " or ':'" : "");
			ok = false;
		}
	}
	if (!ok)
		goto out;
	struct section *prev = cfg_find_section(c, full);
	if (prev != NULL) {
		if (prev->line > 0)
			cfg_err_line(c, c->lineno, NULL, "[%s]: duplicate section (first on line %d)",
			    full, prev->line);
		else
			cfg_err_line(c, c->lineno, NULL, "[%s]: duplicate section", full);
		goto out;
	}
	if (cfg_add_section(c, &(struct section_head){ .name = full, .kind = kind, .a = a,
	    .alen = alen, .b = b, .blen = blen, .line = c->lineno }) == NULL)
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
			cfg_err_line(c, c->lineno, NULL, "section header without closing ']'");
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
			cfg_err_line(c, c->lineno, NULL, "unexpected text after ']'");
		open_section(c, s + 1, (size_t)(end - (s + 1)));
		return;
	}
	c->expect_kv = true;
}

/* A line that should have been "key = value" but never reached the handler. */
static void finish_line(struct ctx *c)
{
	if (c->expect_kv && !c->got_kv)
		cfg_err_line(c, c->lineno, NULL, "expected 'key = value'");
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
		cfg_err_line(c, c->lineno, NULL, "line too long (max %zu characters)", cap);
		return str;                             /* inih sees a blank line */
	}
	if (memchr(p, '\0', n) != NULL) {
		cfg_err_line(c, c->lineno, NULL, "line contains a NUL byte");
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
				cfg_err_e(c, e, "value too long (max %d bytes)", MAX_VALUE);
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
			cfg_err_line(c, c->lineno, name, "key outside of any section");
		return 1;
	}
	if (name[0] == '\0') {
		cfg_err_line(c, c->lineno, NULL, "missing key name before '='");
		return 1;
	}
	struct section *s = &c->secs[c->cur];
	/* [action.R.A] policy.N (N 1..99): numbered lines, from the file only. */
	if (!cfg_in_list(sec_defs[s->kind].keys, name) &&
	    !(s->kind == SK_ACTION && cfg_policy_key(name) > 0)) {
		cfg_err_line(c, c->lineno, name, "unknown key");
		return 1;
	}
	const struct entry *prev = cfg_find(s, name);
	if (prev != NULL) {
		cfg_err_line(c, c->lineno, name, "duplicate key (first on line %d)", prev->line);
		return 1;
	}
	if (cfg_add_entry(c, s, name, value, c->lineno) != NULL) {
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

/* Fixed sections exist even when the file leaves them out: defaults and
 * environment values still apply to them.  false on allocation failure. */
static bool fixed_sections_add(struct ctx *c)
{
	for (int k = 0; k < SK_NFIXED; k++)
		if (cfg_find_section(c, sec_defs[k].name) == NULL &&
		    cfg_add_section(c, &(struct section_head){ .name = sec_defs[k].name,
		    .kind = (enum sec_kind)k }) == NULL)
			return false;
	return true;
}

/* Section s's key takes the value v of environment variable *name (a value
 * too long is reported and marks the entry bad); the entry keeps the name,
 * *name is then NULL.  false on allocation failure. */
static bool entry_from_env(struct ctx *c, struct section *s, const char *key, const char *v,
    char **name)
{
	struct entry *e = cfg_find(s, key);
	if (strlen(v) > MAX_ENV_VALUE) {
		cfg_err_env(c, *name, "%s: value too long (max %d bytes)", key, MAX_ENV_VALUE);
		if (e != NULL)
			e->bad = true;
		return true;
	}
	if (e == NULL) {
		e = cfg_add_entry(c, s, key, v, 0);
		if (e == NULL)
			return false;
	} else {
		buf_wipe_clear(&e->val);
		buf_init(&e->val, MAX_VALUE);
		e->bad = false;
		if (buf_puts(&e->val, v) != CS_OK) {
			c->oom = true;
			return false;
		}
	}
	free(e->env);
	e->env = *name;
	*name = NULL;
	return true;
}

/* Each CONSENTD_ variable that no key claimed (nor the master key, nor the
 * allowlist) is an error; c->oom on allocation failure. */
static void unknown_vars_report(struct ctx *c, const struct claim *claims, size_t nenv)
{
	char *name = NULL;

	for (size_t j = 0; j < nenv; j++) {
		const char *v = c->env[j];
		if (strncmp(v, ENV_PREFIX, strlen(ENV_PREFIX)) != 0 || claims[j].section != NULL)
			continue;
		const char *eq = strchr(v, '=');
		size_t n = eq != NULL ? (size_t)(eq - v) : strlen(v);
		free(name);
		name = cfg_xstrndup(c, v, n);
		if (name == NULL)
			break;
		if (cfg_in_list(env_allowlist, name))
			continue;
		/* Later duplicates of a claimed variable are the same variable. */
		long first = env_find(c->env, name);
		if (first >= 0 && (size_t)first != j && claims[first].section != NULL)
			continue;
		cfg_err_env(c, name, "unknown configuration variable");
	}
	free(name);
}

static void apply_env(struct ctx *c)
{
	struct claim *claims = NULL;
	char *name = NULL;
	size_t nenv = 0;

	if (!fixed_sections_add(c))
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
				cfg_err_env(c, name, "ambiguous: names both [%s] %s and [%s] %s",
				    claims[j].section, claims[j].key, s->name, *k);
				continue;
			}
			claims[j].section = s->name;
			claims[j].key = *k;
			if (!entry_from_env(c, s, *k, c->env[j] + strlen(name) + 1, &name))
				goto out;
		}
	}

	long mk = env_find(c->env, ENV_MASTER_KEY);
	if (mk >= 0) {
		claims[mk].section = "keys";
		claims[mk].key = "master_key";
		c->master_key = c->env[mk] + strlen(ENV_MASTER_KEY) + 1;
		c->master_key_var = ENV_MASTER_KEY;
	}
	unknown_vars_report(c, claims, nenv);
out:
	free(name);
	free(claims);
}

/* The text and then the environment into c's sections and entries; every
 * problem reported through c, c->oom on allocation failure. */
void cfg_read(struct ctx *c)
{
	int r = ini_parse_stream(reader, c, on_value, c);
	if (r == -2)
		c->oom = true;
	else if (r != 0 && c->nerr == 0)
		cfg_err_line(c, r > 0 ? r : 0, NULL, "syntax error");
	if (c->oom)
		return;
	apply_env(c);
}
