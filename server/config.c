/* config.c -- reads consentd's INI file (through inih) and the CONSENTD_* environment
 * into an immutable struct config, reporting every problem as "file:line: key: why":
 * the public API and the load's order, on top of the config family (config_base.c
 * holds the messages and the helpers config_*.c share).
 * It must never print a secret value, never stop at the first error, and never accept
 * an unknown section, key or CONSENTD_* variable. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <ini.h>
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
	cfg_free_sections(&c);
	c.errs = NULL;
	cfg_flush_messages(&c);
	buf_clear(&d);
	return rc;
}

/* ---------------------------------------------------------------- loading */

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
	cfg_free_sections(&c);
	cfg_flush_messages(&c);
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

/* ---------------------------------------------------------------- freeing */

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
