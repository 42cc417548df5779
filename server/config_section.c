/* config_section.c -- each section of the configuration turned into struct
 * config (the fixed sections, then agents, resources, scopes and actions), and
 * the checks across sections.  It must never print a secret value. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <limits.h>
#include <ini.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/x509_vfy.h>
#include "buf.h"
#include "config.h"
#include "config_priv.h"
#include "store.h"
#include "jws.h"
#include "policy.h"

/* Claims a person can change or an IdP can hand to someone else. */
static const char *const reassignable_claims[] = { "email", "preferred_username", "upn",
	"name", "phone_number", NULL };
static const char *const token_types[] = { "id_token", "access_token", "jwt", NULL };
static const char *const auth_names[] = { "client_secret_basic", "client_secret_post", NULL };
static const char *const release_names[] = { "gateway", "never", NULL };
/* Indexed by enum config_preset. */
static const char *const preset_names[] = { "none", "github", "github-app", "google", "microsoft",
	"slack", "gitlab", "atlassian", NULL };
static const char *const approval_names[] = { "none", "required", NULL };
static const char *const standing_names[] = { "none", "exact", "match", NULL };
/* Indexed by enum config_enforcer. */
static const char *const enforcer_names[] = { "consentd", "gateway", NULL };
/* Indexed by enum config_credential. */
static const char *const credential_names[] = { "oauth", "api_key", NULL };
static const char *const cimd_allow_names[] = { "none", "any", "hosts", "prefixes", NULL };

/* ---------------------------------------------------------------- fixed sections */

/* [server] trusted_proxies: addresses and networks (forwarded.h), spaces between. */
static void load_trusted_proxies(struct ctx *c, struct config *cfg, const struct section *s)
{
	char *v = NULL;
	char **w = NULL;
	size_t n = 0;
	const struct entry *e = cfg_get_str(c, s, "trusted_proxies", NULL, S_EMPTY_NULL, &v);
	if (e == NULL || v == NULL)
		goto out;
	if ((w = cfg_split_words(c, v, &n)) == NULL || n == 0)
		goto out;
	if ((cfg->trusted_proxies = calloc(n, sizeof *cfg->trusted_proxies)) == NULL) {
		c->oom = true;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (!net_prefix_parse(w[i], &cfg->trusted_proxies[i])) {
			cfg_err_e(c, e, "'%s' is not an IPv4 or IPv6 address or network (such as "
			    "10.0.0.0/8 or 2001:db8::/32, without host bits past the prefix)", w[i]);
			goto out;
		}
	cfg->ntrusted_proxies = n;
out:
	cfg_free_strv(w);
	free(v);
}

static void load_server(struct ctx *c, struct config *cfg, const struct section *s)
{
	char *v = NULL;
	int64_t n;
	const struct entry *e = cfg_get_str(c, s, "listen", "127.0.0.1:8080", 0, &v);
	if (v != NULL) {
		static const struct entry def = { .key = (char *)"listen" };
		cfg_check_listen(c, e != NULL ? e : &def, v, &cfg->listen_host, &cfg->listen_port);
	}
	free(v);

	e = cfg_get_str(c, s, "public_url", NULL, S_REQUIRED, &cfg->public_url);
	if (e != NULL && !cfg_check_url(c, e, cfg->public_url, 0, &cfg->public_url_is_https)) {
		free(cfg->public_url);
		cfg->public_url = NULL;
	} else if (e != NULL) {
		size_t l = strlen(cfg->public_url);
		if (cfg->public_url[l - 1] == '/')
			cfg->public_url[l - 1] = '\0';
	}

	cfg_get_int(c, s, "threads", 0, 0, MAX_THREADS, &n);
	if (n == 0) {
		/* A worker waiting for the group commit's fsync holds no core: more
		 * workers than cores let more writes share one fsync. */
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		n = cpus < 1 ? 1 : cpus > MAX_THREADS / THREADS_PER_CORE ? MAX_THREADS : cpus * THREADS_PER_CORE;
	}
	cfg->threads = (unsigned)n;
	cfg_get_int(c, s, "max_body", 65536, 1024, 16 * 1024 * 1024, &n);
	cfg->max_body = (size_t)n;
	cfg_get_int(c, s, "per_ip_connections", 64, 1, 10000, &n);
	cfg->per_ip_connections = (unsigned)n;
	cfg_get_int(c, s, "max_connections", 16384, 16, 1048576, &n);
	cfg->max_connections = (unsigned)n;
	cfg_get_int(c, s, "idle_timeout", 30, 1, 3600, &n);
	cfg->idle_timeout = (unsigned)n;
	(void)cfg_get_str(c, s, "log", "stderr", 0, &cfg->log);
	static const char *const level_names[] = { "debug", "info", "warn", "error", NULL };
	int lv;
	cfg_get_enum(c, s, "log_level", level_names, LOG_INFO, &lv);
	cfg->log_level = (enum log_level)lv;
	load_trusted_proxies(c, cfg, s);
	static const char *const header_names[] = { "x-forwarded-for", "forwarded", NULL };
	int hk;
	cfg_get_enum(c, s, "proxy_header", header_names, FORWARDED_XFF, &hk);
	cfg->proxy_header = (enum forwarded_header)hk;
	cfg_get_bool(c, s, "development", false, &cfg->development);
}

/* [limits]: each class's rate and burst (rate 0 switches the class off), and
 * how many keys an address or person table holds (its memory: 24 bytes each).
 * The gateway's class is off by default: it is the only client of its routes,
 * and a cap below what one node serves refuses its real load (docs/reference.md,
 * "Rate limits"; docs/BENCHMARKS.md, issue 34). */
static void load_limits(struct ctx *c, struct config *cfg, const struct section *s)
{
	static const struct {
		const char *rate, *burst;
		int64_t def_rate_milli, def_burst;
		size_t off;
	} classes[] = {
		{ "address_rate", "address_burst", 20000, 100, offsetof(struct config, limit_address) },
		{ "person_rate", "person_burst", 1000, 20, offsetof(struct config, limit_person) },
		{ "gateway_rate", "gateway_burst", 0, 2000, offsetof(struct config, limit_gateway) },
		{ "auth_failure_rate", "auth_failure_burst", 1000, 50,
		  offsetof(struct config, limit_auth_failure) },
	};
	for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
		struct config_limit *l = (struct config_limit *)(void *)((char *)cfg + classes[i].off);
		cfg_get_rate(c, s, classes[i].rate, classes[i].def_rate_milli, 1000000, &l->rate_milli);
		cfg_get_int(c, s, classes[i].burst, classes[i].def_burst, 1, 1000000, &l->burst);
	}
	cfg_get_int(c, s, "buckets", 65536, 64, 16777216, &cfg->limit_buckets);
}

static void load_keys(struct ctx *c, struct config *cfg, const struct section *s)
{
	(void)cfg_get_str(c, s, "master_key_file", "/etc/consentd/master.key", 0, &cfg->master_key_file);
	cfg_get_int(c, s, "grant_ttl", 300, 1, 900, &cfg->grant_ttl);
	cfg_get_int(c, s, "publish_lead", 3600, 0, 2592000, &cfg->publish_lead);
	if (c->master_key != NULL) {
		if (!cfg_is_b64_32(c->master_key))
			cfg_err_env(c, c->master_key_var, "master_key: must be base64 of exactly 32 bytes");
		else
			cfg->master_key_b64 = cfg_xstrdup(c, c->master_key);
	}
}

static bool word_ok_token(const char *w) { return cfg_valid_token(w); }
static bool word_ok_scope(const char *w) { return cfg_valid_scope_token(w); }
static bool word_ok_type(const char *w) { return cfg_in_list(token_types, w); }

static void load_oidc(struct ctx *c, struct config *cfg, const struct section *s)
{
	bool https;
	int i;
	const struct entry *e = cfg_get_str(c, s, "issuer", NULL, S_REQUIRED, &cfg->oidc_issuer);
	if (e != NULL)
		(void)cfg_check_url(c, e, cfg->oidc_issuer, URL_PATH, &https);
	e = cfg_get_str(c, s, "client_id", NULL, S_REQUIRED, &cfg->oidc_client_id);
	if (e != NULL && !cfg_valid_token(cfg->oidc_client_id))
		cfg_err_e(c, e, "must be printable ASCII without spaces, at most %d characters", MAX_ID);
	(void)cfg_get_str(c, s, "client_secret", NULL, S_REQUIRED, &cfg->oidc_client_secret);
	cfg_get_enum(c, s, "token_endpoint_auth", auth_names, AUTH_CLIENT_SECRET_BASIC, &i);
	cfg->oidc_token_endpoint_auth = (enum config_auth)i;

	e = cfg_get_str(c, s, "scopes", "openid profile email", 0, &cfg->oidc_scopes);
	if (e != NULL) {
		size_t n = 0;
		char **w = cfg_split_words(c, cfg->oidc_scopes, &n);
		bool openid = false;
		for (size_t j = 0; w != NULL && j < n; j++) {
			if (!cfg_valid_scope_token(w[j])) {
				cfg_err_e(c, e, "'%s' is not a valid scope", w[j]);
				break;
			}
			openid = openid || strcmp(w[j], "openid") == 0;
		}
		if (w != NULL && !openid)
			cfg_err_e(c, e, "must include openid");
		cfg_free_strv(w);
	}

	e = cfg_get_str(c, s, "subject_claim", "sub", 0, &cfg->oidc_subject_claim);
	if (e != NULL) {
		const char *v = cfg->oidc_subject_claim;
		if (!cfg_valid_token(v))
			cfg_err_e(c, e, "must be a claim name (printable ASCII without spaces)");
		else if (cfg_in_list(reassignable_claims, v))
			/* SECURITY: a reassignable claim would let a new holder of an old
			 * address inherit someone else's consents. */
			cfg_err_e(c, e, "'%s' can be reassigned to another person; use sub", v);
		else if (strcmp(v, "sub") != 0)
			cfg_warn_e(c, e, "'%s' is not sub: make sure the IdP never reuses its values "
			    "and that the gateway's tokens carry the same claim", v);
	}
	e = cfg_get_str(c, s, "admin_claim", "groups", 0, &cfg->oidc_admin_claim);
	if (e != NULL && !cfg_valid_token(cfg->oidc_admin_claim))
		cfg_err_e(c, e, "must be a claim name (printable ASCII without spaces)");
	(void)cfg_get_str(c, s, "admin_value", "consent-admins", 0, &cfg->oidc_admin_value);
	cfg_get_int(c, s, "clock_skew", 60, 0, 600, &cfg->oidc_clock_skew);
}

static const char *const gateway_auth_names[] = { "client_secret_basic", "private_key_jwt", NULL };
static bool word_ok_gateway_auth(const char *w) { return cfg_in_list(gateway_auth_names, w); }

/* A JWK Set file (a client's public keys, for private_key_jwt) read and
 * checked here, so that consentd -n catches a bad one: *json, the text. */
static void read_jwks_file_for(struct ctx *c, const struct entry *e, const char *path,
    jws_algs allow, char **json);
static void read_jwks_file(struct ctx *c, const struct entry *e, const char *path, char **json)
{
	read_jwks_file_for(c, e, path, JWS_ALGS_CLIENT_ASSERTION, json);
}

/* The same for the use whose algorithms are allow (an enterprise IdP's). */
static void read_jwks_file_for(struct ctx *c, const struct entry *e, const char *path,
    jws_algs allow, char **json)
{
	struct buf b;
	char chunk[4096], why[160];
	struct jws_keyset *ks = NULL;
	FILE *f = fopen(path, "re");
	buf_init(&b, 256 * 1024);
	if (f == NULL) {
		cfg_err_e(c, e, "cannot open '%s': %s", path, strerror(errno));
		goto out;
	}
	for (;;) {
		size_t got = fread(chunk, 1, sizeof chunk, f);
		enum cs_err r = got > 0 ? buf_append(&b, chunk, got) : CS_OK;
		if (r != CS_OK) {
			cfg_err_e(c, e, "'%s' is larger than 256 KiB", path);
			goto out;
		}
		if (got < sizeof chunk) {
			if (ferror(f)) {
				cfg_err_e(c, e, "cannot read '%s': %s", path, strerror(errno));
				goto out;
			}
			break;
		}
	}
	if (buf_append(&b, "", 1) != CS_OK) {
		c->oom = true;
		goto out;
	}
	enum cs_err r = jws_keyset_parse_for(b.data, allow, &ks, why, sizeof why);
	if (r == CS_ENOMEM)
		c->oom = true;
	else if (r != CS_OK)
		cfg_err_e(c, e, "'%s': %s", path, why);
	else
		*json = buf_steal(&b);
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
	char **w = cfg_get_words(c, s, &(struct words_key){ .key = "token_endpoint_auth",
	    .def = "client_secret_basic", .ok = word_ok_gateway_auth,
	    .what = "method (client_secret_basic or private_key_jwt)" }, &n, &given);
	const struct entry *e = cfg_find(s, "token_endpoint_auth");
	for (size_t i = 0; w != NULL && i < n; i++) {
		if (strcmp(w[i], "client_secret_basic") == 0)
			cfg->gateway_auth_basic = true;
		else if (strcmp(w[i], "private_key_jwt") == 0)
			cfg->gateway_auth_private_key_jwt = true;
	}
	if (w != NULL && n == 0 && e != NULL)
		cfg_err_e(c, e, "must name client_secret_basic, private_key_jwt or both");
	cfg_free_strv(w);
	if (e != NULL && e->bad)
		cfg->gateway_auth_basic = true;     /* already an error; keep the rest quiet */
	bool https;
	e = cfg_get_str(c, s, "jwks_file", NULL, S_EMPTY_NULL, &cfg->gateway_jwks_file);
	const struct entry *ue = cfg_get_str(c, s, "jwks_uri", NULL, S_EMPTY_NULL, &cfg->gateway_jwks_uri);
	if (cfg->gateway_jwks_file != NULL && cfg->gateway_jwks_uri != NULL)
		cfg_err_e(c, ue, "give jwks_file or jwks_uri, not both");
	else if (cfg->gateway_auth_private_key_jwt && cfg->gateway_jwks_file == NULL &&
	    cfg->gateway_jwks_uri == NULL && ue == NULL)
		cfg_err_line(c, s->line, "jwks_file", "required with private_key_jwt in token_endpoint_auth "
		    "(the gateway's public keys; or jwks_uri)");
	else if (!cfg->gateway_auth_private_key_jwt && (cfg_find(s, "jwks_file") != NULL ||
	    cfg_find(s, "jwks_uri") != NULL))
		cfg_err_e(c, cfg_find(s, "jwks_file") ? cfg_find(s, "jwks_file") : cfg_find(s, "jwks_uri"),
		    "used only with private_key_jwt in token_endpoint_auth");
	else if (e != NULL)
		read_jwks_file(c, e, cfg->gateway_jwks_file, &cfg->gateway_jwks_json);
	else if (ue != NULL && !cfg_check_url(c, ue, cfg->gateway_jwks_uri, URL_PATH | URL_QUERY, &https)) {
		free(cfg->gateway_jwks_uri);
		cfg->gateway_jwks_uri = NULL;
	}
	cfg_get_int(c, s, "clock_skew", 60, 5, 300, &cfg->gateway_clock_skew);
	cfg_get_bool(c, s, "require_dpop", false, &cfg->gateway_require_dpop);
	cfg_get_bool(c, s, "dpop_nonce", false, &cfg->gateway_dpop_nonce);
}

/* The gateway's client secret, given as itself or as its SHA-256 in hex,
 * exactly when client_secret_basic is how it authenticates. */
static void load_gateway_secret(struct ctx *c, struct config *cfg, const struct section *s)
{
	char *hex = NULL;
	const struct entry *se = cfg_get_str(c, s, "client_secret", NULL, 0, &cfg->gateway_client_secret);
	const struct entry *he = cfg_get_str(c, s, "client_secret_sha256", NULL, 0, &hex);
	const struct entry *sraw = cfg_find(s, "client_secret");
	const struct entry *hraw = cfg_find(s, "client_secret_sha256");
	if (!cfg->gateway_auth_basic) {
		/* SECURITY: a secret that no longer opens anything is not kept around
		 * to be found; the operator removes it. */
		if (sraw != NULL || hraw != NULL)
			cfg_err_e(c, sraw != NULL ? sraw : hraw, "not used without client_secret_basic in "
			    "token_endpoint_auth; remove it");
	} else if (sraw != NULL && hraw != NULL) {
		cfg_err_e(c, hraw, "give client_secret or client_secret_sha256, not both");
	} else if (sraw == NULL && hraw == NULL) {
		cfg_err_line(c, s->line, "client_secret", "required in [gateway] (or client_secret_sha256, "
		    "or CONSENTD_GATEWAY_CLIENT_SECRET)");
	} else if (se != NULL) {
		size_t n = strlen(cfg->gateway_client_secret);
		if (n < MIN_GW_SECRET)
			cfg_err_e(c, se, "must be at least %d characters", MIN_GW_SECRET);
		else if (EVP_Digest(cfg->gateway_client_secret, n, cfg->gateway_secret_sha256, NULL,
		    EVP_sha256(), NULL) != 1)
			c->oom = true;
		else
			cfg->gateway_has_secret = true;
	} else if (he != NULL) {
		bool ok = strlen(hex) == 64;
		for (size_t i = 0; ok && i < 32; i++) {
			int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
			if (hi < 0 || lo < 0)
				ok = false;
			else
				cfg->gateway_secret_sha256[i] = (unsigned char)(hi << 4 | lo);
		}
		if (ok)
			cfg->gateway_has_secret = true;
		else
			cfg_err_e(c, he, "must be 64 hexadecimal characters (a SHA-256)");
	}
	free(hex);
}

static void load_gateway(struct ctx *c, struct config *cfg, const struct section *s)
{
	bool https, given;
	const struct entry *e = cfg_get_str(c, s, "id", "agent-gateway", 0, &cfg->gateway_id);
	if (e != NULL && !cfg_valid_token(cfg->gateway_id))
		cfg_err_e(c, e, "must be printable ASCII without spaces, at most %d characters", MAX_ID);

	load_gateway_auth(c, cfg, s);
	load_gateway_secret(c, cfg, s);

	cfg->subject_audiences = cfg_get_words(c, s, &(struct words_key){
	    .key = "subject_audiences", .def = "gateway-app", .ok = word_ok_token,
	    .what = "audience" }, &cfg->nsubject_audiences, &given);
	e = cfg_find(s, "subject_audiences");
	if (cfg->subject_audiences != NULL && cfg->nsubject_audiences == 0 && e != NULL)
		cfg_err_e(c, e, "must name at least one audience");
	for (size_t i = 0; e != NULL && cfg->subject_audiences != NULL &&
	    i < cfg->nsubject_audiences; i++) {
		const char *a = cfg->subject_audiences[i];
		/* SECURITY: tokens minted for the gateway itself or for consentd's own login
		 * must never pass as a user's subject token. */
		if (cfg->gateway_id != NULL && strcmp(a, cfg->gateway_id) == 0)
			cfg_err_e(c, e, "'%s' is the gateway id; subject tokens must be for the gateway's "
			    "application, not for the gateway client", a);
		if (cfg->oidc_client_id != NULL && strcmp(a, cfg->oidc_client_id) == 0)
			cfg_err_e(c, e, "'%s' is consentd's own [oidc] client_id; its ID tokens must not "
			    "serve as subject tokens", a);
	}

	cfg->subject_token_types = cfg_get_words(c, s, &(struct words_key){
	    .key = "subject_token_types", .def = "id_token access_token jwt", .ok = word_ok_type,
	    .what = "token type (id_token, access_token or jwt)" },
	    &cfg->nsubject_token_types, &given);
	e = cfg_find(s, "subject_token_types");
	if (cfg->subject_token_types != NULL && cfg->nsubject_token_types == 0 && e != NULL)
		cfg_err_e(c, e, "must name at least one of id_token, access_token, jwt");

	e = cfg_get_str(c, s, "events_uri", NULL, S_EMPTY_NULL, &cfg->events_uri);
	if (e != NULL && !cfg_check_url(c, e, cfg->events_uri, URL_PATH | URL_QUERY, &https)) {
		free(cfg->events_uri);
		cfg->events_uri = NULL;
	}
}

#define METRICS_TOKEN_MIN 16
#define METRICS_TOKEN_MAX 512

/* The token's characters: printable ASCII without spaces (it travels in an
 * Authorization header). */
static bool metrics_token_ok(const char *t)
{
	size_t n = strlen(t);
	if (n < METRICS_TOKEN_MIN || n > METRICS_TOKEN_MAX)
		return false;
	for (; *t; t++)
		if (*t <= ' ' || *t > '~')
			return false;
	return true;
}

/* token_file: one token of printable characters. */
static void load_metrics_token_file(struct ctx *c, struct config *cfg, const struct entry *e,
    const char *path)
{
	char tok[METRICS_TOKEN_MAX + 2];
	size_t n = 0;
	bool ok = cfg_read_secret_file(c, e, path, tok, sizeof tok, &n);
	if (ok && (memchr(tok, '\0', n) != NULL || !metrics_token_ok(tok)))
		cfg_err_e(c, e, "'%s' must hold one token of %d to %d printable characters without "
		    "spaces", path, METRICS_TOKEN_MIN, METRICS_TOKEN_MAX);
	else if (ok)
		cfg->metrics_token = cfg_xstrdup(c, tok);
	OPENSSL_cleanse(tok, sizeof tok);
}

/* password_file: the PostgreSQL password. */
static void load_db_password_file(struct ctx *c, struct config *cfg, const struct entry *e,
    const char *path)
{
	char pw[1024 + 2];
	size_t n = 0;
	bool ok = cfg_read_secret_file(c, e, path, pw, sizeof pw, &n);
	if (ok && (n == 0 || n > 1024 || memchr(pw, '\0', n) != NULL))
		cfg_err_e(c, e, "'%s' must hold one password of 1 to 1024 bytes", path);
	else if (ok)
		cfg->db_password = cfg_xstrdup(c, pw);
	OPENSSL_cleanse(pw, sizeof pw);
}

/* [database]: a SQLite path (the default), or a postgresql:// URL whose
 * password comes apart from it (CONSENTD_DATABASE_PASSWORD or password_file). */
static void load_database(struct ctx *c, struct config *cfg, const struct section *s)
{
	char why[160], *path = NULL;
	(void)cfg_get_str(c, s, "path", "/var/lib/consentd/consentd.db", 0, &cfg->db_path);
	const struct entry *ue = cfg_get_str(c, s, "url", NULL, S_EMPTY_NULL, &cfg->db_url);
	if (ue != NULL && cfg->db_url != NULL && store_url_check(cfg->db_url, why, sizeof why) != CS_OK)
		cfg_err_e(c, ue, "%s", why);
	if (ue != NULL && cfg->db_url != NULL && cfg_find(s, "path") != NULL)
		cfg_err_e(c, ue, "give path (SQLite) or url (PostgreSQL), not both");
	const struct entry *pe = cfg_get_str(c, s, "password", NULL, S_EMPTY_NULL, &cfg->db_password);
	const struct entry *fe = cfg_get_str(c, s, "password_file", NULL, S_EMPTY_NULL, &path);
	if (pe != NULL && fe != NULL)
		cfg_err_e(c, fe, "give password (CONSENTD_DATABASE_PASSWORD) or password_file, not both");
	else if (fe != NULL && path != NULL)
		load_db_password_file(c, cfg, fe, path);
	free(path);
	if ((pe != NULL || fe != NULL) && cfg->db_url == NULL)
		cfg_err_e(c, pe != NULL ? pe : fe, "is for a PostgreSQL database: [database] url");
	cfg_get_bool(c, s, "prepared_statements", true, &cfg->db_prepared);
}

static void load_metrics(struct ctx *c, struct config *cfg, const struct section *s)
{
	char *v = NULL, *path = NULL;
	const struct entry *te = cfg_get_str(c, s, "token", NULL, S_EMPTY_NULL, &cfg->metrics_token);
	const struct entry *fe = cfg_get_str(c, s, "token_file", NULL, S_EMPTY_NULL, &path);
	if (te != NULL && fe != NULL) {
		cfg_err_e(c, fe, "give token or token_file, not both");
	} else if (te != NULL && cfg->metrics_token != NULL && !metrics_token_ok(cfg->metrics_token)) {
		cfg_err_e(c, te, "must be %d to %d printable characters without spaces",
		    METRICS_TOKEN_MIN, METRICS_TOKEN_MAX);
	} else if (fe != NULL && path != NULL) {
		load_metrics_token_file(c, cfg, fe, path);
	}
	free(path);
	const struct entry *le = cfg_get_str(c, s, "listen", NULL, S_EMPTY_NULL, &v);
	if (le != NULL && v != NULL) {
		cfg_check_listen(c, le, v, &cfg->metrics_listen_host, &cfg->metrics_listen_port);
		if (cfg->metrics_listen_host != NULL && cfg->listen_host != NULL &&
		    cfg->metrics_listen_port == cfg->listen_port &&
		    strcmp(cfg->metrics_listen_host, cfg->listen_host) == 0)
			cfg_err_e(c, le, "must differ from [server] listen");
	}
	free(v);
}

static bool word_ok_cimd_host(const char *w) { return cimd_host_entry_valid(w); }
static bool word_ok_cimd_prefix(const char *w) { return cimd_prefix_entry_valid(w); }

/* The first of two keys given in s (for a message about the pair); NULL: neither. */
static const struct entry *first_of(const struct section *s, const char *a, const char *b)
{
	const struct entry *e = cfg_find(s, a);
	return e != NULL ? e : cfg_find(s, b);
}

/* [mcp]: who may sign in with a client-id URL, and how its document is fetched
 * and kept (cimd.h). */
static void load_mcp(struct ctx *c, struct config *cfg, const struct section *s)
{
	int i;
	bool given;
	const struct entry *e;

	cfg_get_enum(c, s, "cimd_allow", cimd_allow_names, CIMD_ALLOW_ANY, &i);
	cfg->mcp_cimd_allow = (enum cimd_allow)i;
	cfg->mcp_cimd_hosts = cfg_get_words(c, s, &(struct words_key){ .key = "cimd_hosts",
	    .def = "", .ok = word_ok_cimd_host, .what = "host (name or name:port)" },
	    &cfg->nmcp_cimd_hosts, &given);
	cfg->mcp_cimd_prefixes = cfg_get_words(c, s, &(struct words_key){ .key = "cimd_prefixes",
	    .def = "", .ok = word_ok_cimd_prefix,
	    .what = "prefix (an https URL with a path ending in '/', no query)" },
	    &cfg->nmcp_cimd_prefixes, &given);
	e = cfg_find(s, "cimd_allow");
	if (e != NULL && cfg->mcp_cimd_allow == CIMD_ALLOW_HOSTS && cfg->nmcp_cimd_hosts == 0)
		cfg_err_e(c, e, "hosts needs at least one host in cimd_hosts");
	if (e != NULL && cfg->mcp_cimd_allow == CIMD_ALLOW_PREFIXES && cfg->nmcp_cimd_prefixes == 0)
		cfg_err_e(c, e, "prefixes needs at least one prefix in cimd_prefixes");
	if ((e = cfg_find(s, "cimd_hosts")) != NULL && cfg->nmcp_cimd_hosts > 0 &&
	    cfg->mcp_cimd_allow != CIMD_ALLOW_HOSTS)
		cfg_warn_e(c, e, "ignored: cimd_allow is not hosts");
	if ((e = cfg_find(s, "cimd_prefixes")) != NULL && cfg->nmcp_cimd_prefixes > 0 &&
	    cfg->mcp_cimd_allow != CIMD_ALLOW_PREFIXES)
		cfg_warn_e(c, e, "ignored: cimd_allow is not prefixes");

	cfg_get_bool(c, s, "cimd_allow_loopback", false, &cfg->mcp_cimd_allow_loopback);
	if (cfg->mcp_cimd_allow_loopback && !cfg->development &&
	    (e = cfg_find(s, "cimd_allow_loopback")) != NULL)
		cfg_warn_e(c, e, "client metadata documents may be fetched from loopback addresses: "
		    "for development only, never in production");
	e = cfg_get_str(c, s, "cimd_ca_file", NULL, S_EMPTY_NULL, &cfg->mcp_cimd_ca_file);
	if (e != NULL && cfg->mcp_cimd_ca_file != NULL)
		cfg_check_ca_file(c, e, cfg->mcp_cimd_ca_file);

	cfg_get_int(c, s, "cimd_timeout_ms", 5000, 100, 30000, &cfg->mcp_cimd_timeout_ms);
	cfg_get_int(c, s, "cimd_connect_timeout_ms", 2000, 100, 30000,
	    &cfg->mcp_cimd_connect_timeout_ms);
	if (cfg->mcp_cimd_connect_timeout_ms > cfg->mcp_cimd_timeout_ms &&
	    (e = first_of(s, "cimd_connect_timeout_ms", "cimd_timeout_ms")) != NULL)
		cfg_err_e(c, e, "cimd_connect_timeout_ms must not exceed cimd_timeout_ms "
		    "(%lld)", (long long)cfg->mcp_cimd_timeout_ms);
	cfg_get_int(c, s, "cimd_max_bytes", CIMD_DOC_MAX, 256, CIMD_DOC_MAX_LIMIT,
	    &cfg->mcp_cimd_max_bytes);
	cfg_get_int(c, s, "cimd_cache_entries", 1000, 1, 1000000, &cfg->mcp_cimd_cache_entries);
	cfg_get_int(c, s, "cimd_cache_min_ttl", 60, 0, 86400, &cfg->mcp_cimd_cache_min_ttl);
	cfg_get_int(c, s, "cimd_cache_default_ttl", 300, 0, 604800,
	    &cfg->mcp_cimd_cache_default_ttl);
	cfg_get_int(c, s, "cimd_cache_max_ttl", 86400, 0, 604800, &cfg->mcp_cimd_cache_max_ttl);
	if (cfg->mcp_cimd_cache_min_ttl > cfg->mcp_cimd_cache_max_ttl &&
	    (e = first_of(s, "cimd_cache_min_ttl", "cimd_cache_max_ttl")) != NULL)
		cfg_err_e(c, e, "cimd_cache_min_ttl must not exceed cimd_cache_max_ttl "
		    "(%lld)", (long long)cfg->mcp_cimd_cache_max_ttl);
	else if ((cfg->mcp_cimd_cache_default_ttl < cfg->mcp_cimd_cache_min_ttl ||
	    cfg->mcp_cimd_cache_default_ttl > cfg->mcp_cimd_cache_max_ttl) &&
	    ((e = first_of(s, "cimd_cache_default_ttl", "cimd_cache_min_ttl")) != NULL ||
	    (e = cfg_find(s, "cimd_cache_max_ttl")) != NULL))
		cfg_err_e(c, e, "cimd_cache_default_ttl must lie between "
		    "cimd_cache_min_ttl (%lld) and cimd_cache_max_ttl (%lld)",
		    (long long)cfg->mcp_cimd_cache_min_ttl, (long long)cfg->mcp_cimd_cache_max_ttl);
	cfg_get_int(c, s, "cimd_failure_ttl", 10, 0, 300, &cfg->mcp_cimd_failure_ttl);
	cfg_get_bool(c, s, "require_dpop", false, &cfg->mcp_require_dpop);
}

/* ---------------------------------------------------------------- dynamic sections */

static void load_agent(struct ctx *c, struct config_agent *a, const struct section *s)
{
	bool given;
	a->id = cfg_xstrdup(c, s->a);
	(void)cfg_get_str(c, s, "name", s->a, 0, &a->name);
	(void)cfg_get_str(c, s, "description", "", S_EMPTY_OK, &a->description);
	a->allow = cfg_get_words(c, s, &(struct words_key){ .key = "allow", .def = "",
	    .ok = word_ok_token, .what = "RESOURCE:SCOPE entry" }, &a->nallow, &given);
	cfg_get_bool(c, s, "offline", false, &a->offline);
}

static const char *const client_auth_names[] = { "none", "private_key_jwt", NULL };
static bool word_ok_any(const char *w) { (void)w; return true; }

/* [client.NAME]: an MCP client the operator registered (config.h). */
static void load_client(struct ctx *c, struct config_client *k, const struct section *s)
{
	bool given;
	int i;
	const struct entry *e;
	char why[CIMD_WHY_MAX];
	k->id = cfg_xstrdup(c, s->a);
	e = cfg_get_str(c, s, "client_id", s->a, 0, &k->client_id);
	bool visible = k->client_id != NULL && k->client_id[0] != '\0' && strlen(k->client_id) <= 255;
	for (const char *p = k->client_id; visible && *p; p++)
		visible = *p > 0x20 && *p < 0x7f;
	if (e != NULL && k->client_id != NULL && !visible)
		cfg_err_e(c, e, "must be 1 to 255 visible ASCII characters (no spaces)");
	/* An https URL is a client-id metadata document's (cimd.h): a registered
	 * client must not take a name another party's document could claim. */
	else if (k->client_id != NULL && strncasecmp(k->client_id, "https://", 8) == 0)
		cfg_err_line(c, e != NULL ? e->line : s->line, "client_id", "must not be an https URL "
		    "(that names a client by its metadata document; [mcp] cimd_allow admits those)");
	(void)cfg_get_str(c, s, "name", k->client_id != NULL ? k->client_id : s->a, 0, &k->name);
	k->redirect_uris = cfg_get_words(c, s, &(struct words_key){ .key = "redirect_uris",
	    .def = "", .ok = word_ok_any, .what = "redirect URI" }, &k->nredirect_uris, &given);
	e = cfg_find(s, "redirect_uris");
	if (k->nredirect_uris == 0)
		cfg_err_line(c, s->line, "redirect_uris", "[%s] needs at least one redirect URI "
		    "(https, or http to 127.0.0.1, [::1] or localhost)", s->name);
	for (size_t j = 0; e != NULL && j < k->nredirect_uris; j++)
		if (!cimd_redirect_uri_ok(k->redirect_uris[j], why, sizeof why))
			cfg_err_e(c, e, "'%s': %s", k->redirect_uris[j], why);
	cfg_get_enum(c, s, "token_endpoint_auth", client_auth_names, CLIENT_AUTH_NONE, &i);
	k->auth = (enum config_client_auth)i;
	e = cfg_get_str(c, s, "jwks_file", NULL, S_EMPTY_NULL, &k->jwks_file);
	const struct entry *ue = cfg_get_str(c, s, "jwks_uri", NULL, S_EMPTY_NULL, &k->jwks_uri);
	if (k->jwks_file != NULL && k->jwks_uri != NULL)
		cfg_err_e(c, ue, "give jwks_file or jwks_uri, not both");
	else if (k->auth == CLIENT_AUTH_PRIVATE_KEY_JWT && k->jwks_file == NULL && k->jwks_uri == NULL)
		cfg_err_line(c, s->line, "jwks_file", "required with token_endpoint_auth = "
		    "private_key_jwt (the client's public keys; or jwks_uri)");
	else if (k->auth == CLIENT_AUTH_NONE && (e != NULL || ue != NULL))
		cfg_err_e(c, e != NULL ? e : ue, "used only with token_endpoint_auth = private_key_jwt");
	else if (e != NULL)
		read_jwks_file(c, e, k->jwks_file, &k->jwks_json);
	else if (ue != NULL) {
		/* The token endpoint checks a client's assertion with keys it
		 * holds: a client's keys are not fetched (mcp_token.c).  Refused
		 * here rather than a client that can never authenticate. */
		cfg_err_e(c, ue, "not supported for a [client.NAME]: the token endpoint does not "
		    "fetch client keys; give jwks_file (the client's JWK Set, read at start)");
		free(k->jwks_uri);
		k->jwks_uri = NULL;
	}
}

static const char *const unmapped_names[] = { "refuse", "allow", NULL };

/* [mcp.NAME]: an MCP endpoint (config.h).  Its URI needs public_url (loaded
 * first); the resource's existence and unmapped_scope's are checked across
 * sections. */
static void load_mcp_endpoint(struct ctx *c, const struct config *cfg,
    struct config_mcp_endpoint *m, const struct section *s)
{
	const struct entry *e;
	bool https;
	int i;
	m->id = cfg_xstrdup(c, s->a);
	(void)cfg_get_str(c, s, "resource", NULL, S_REQUIRED, &m->resource);
	e = cfg_get_str(c, s, "upstream", NULL, S_EMPTY_NULL, &m->upstream);
	if (e != NULL && !cfg_check_url(c, e, m->upstream, URL_PATH | URL_QUERY, &https)) {
		free(m->upstream);
		m->upstream = NULL;
	}
	cfg_get_int(c, s, "upstream_timeout", 30, 1, 300, &m->upstream_timeout);
	cfg_get_enum(c, s, "unmapped", unmapped_names, UNMAPPED_REFUSE, &i);
	m->unmapped = (enum config_unmapped)i;
	e = cfg_get_str(c, s, "unmapped_scope", NULL, S_EMPTY_NULL, &m->unmapped_scope);
	if (m->unmapped == UNMAPPED_ALLOW && m->unmapped_scope == NULL)
		cfg_err_line(c, s->line, "unmapped_scope", "required in [%s] with unmapped = allow "
		    "(the scope a tool that maps to no [action.RESOURCE.TOOL] needs)", s->name);
	else if (m->unmapped != UNMAPPED_ALLOW && e != NULL)
		cfg_err_e(c, e, "used only with unmapped = allow");
	else if (e != NULL && !cfg_valid_scope_token(m->unmapped_scope))
		cfg_err_e(c, e, "'%s' is not a scope name", m->unmapped_scope);
	cfg_get_bool(c, s, "log_arguments", false, &m->log_arguments);
	if (cfg->public_url != NULL && m->id != NULL) {
		size_t n = strlen(cfg->public_url) + sizeof "/mcp/" + strlen(m->id);
		m->uri = malloc(n);
		if (m->uri == NULL || str_fmt(m->uri, n, "%s/mcp/%s", cfg->public_url, m->id) != CS_OK)
			c->oom = true;
	}
}

/* --- [enterprise.NAME] (issue #30 item 6; config.h) -------------------- */

/* One allow entry, CLIENT_ID=MCP_NAME:SCOPE,SCOPE, split at its last '=' (a
 * client-id URL may hold one); whether the endpoint and scopes exist is
 * checked across sections (enterprise_cross_check). */
static bool enterprise_allow_parse(struct ctx *c, const struct entry *e, const char *w,
    struct config_enterprise_allow *a)
{
	const char *eq = strrchr(w, '=');
	const char *colon = eq != NULL ? strchr(eq + 1, ':') : NULL;
	if (eq == NULL || eq == w || colon == NULL || colon == eq + 1 || colon[1] == '\0') {
		cfg_err_e(c, e, "'%s': expected CLIENT_ID=MCP_NAME:SCOPE,SCOPE", w);
		return false;
	}
	if ((size_t)(eq - w) > 1024) {
		cfg_err_e(c, e, "'%.40s...': a client_id is at most 1024 bytes", w);
		return false;
	}
	if (!cfg_valid_part(eq + 1, (size_t)(colon - eq - 1), false)) {
		cfg_err_e(c, e, "'%s': '%.*s' is not an [mcp.NAME] name", w, (int)(colon - eq - 1),
		    eq + 1);
		return false;
	}
	a->client_id = cfg_xstrndup(c, w, (size_t)(eq - w));
	a->mcp = cfg_xstrndup(c, eq + 1, (size_t)(colon - eq - 1));
	/* The scopes: comma-separated names, each a [scope.RESOURCE.SCOPE]. */
	const char *p = colon + 1;
	size_t n = 1;
	for (const char *q = p; *q; q++)
		n += *q == ',';
	if ((a->scopes = calloc(n + 1, sizeof *a->scopes)) == NULL) {
		c->oom = true;
		return false;
	}
	for (;;) {
		size_t len = strcspn(p, ",");
		if (!cfg_valid_part(p, len, true)) {
			cfg_err_e(c, e, "'%s': '%.*s' is not a scope name", w, (int)len, p);
			return false;
		}
		if ((a->scopes[a->nscopes++] = cfg_xstrndup(c, p, len)) == NULL)
			return false;
		if (p[len] == '\0')
			break;
		p += len + 1;
	}
	return a->client_id != NULL && a->mcp != NULL;
}

static void load_enterprise(struct ctx *c, struct config_enterprise *n, const struct section *s)
{
	bool https, given;
	size_t nw = 0;
	n->id = cfg_xstrdup(c, s->a);
	const struct entry *e = cfg_get_str(c, s, "issuer", NULL, S_REQUIRED, &n->issuer);
	if (e != NULL && n->issuer != NULL)
		(void)cfg_check_url(c, e, n->issuer, URL_PATH, &https);
	e = cfg_get_str(c, s, "jwks_file", NULL, S_EMPTY_NULL, &n->jwks_file);
	const struct entry *ue = cfg_get_str(c, s, "jwks_uri", NULL, S_EMPTY_NULL, &n->jwks_uri);
	if ((n->jwks_file == NULL) == (n->jwks_uri == NULL))
		cfg_err_line(c, ue != NULL ? ue->line : s->line, "jwks_file", "give jwks_file or "
		    "jwks_uri (the IdP's public keys), exactly one");
	else if (e != NULL)
		read_jwks_file_for(c, e, n->jwks_file, JWS_ALGS_IDJAG, &n->jwks_json);
	else if (ue != NULL && !cfg_check_url(c, ue, n->jwks_uri, URL_PATH | URL_QUERY, &https)) {
		free(n->jwks_uri);
		n->jwks_uri = NULL;
	}
	char **w = cfg_get_words(c, s, &(struct words_key){ .key = "allow", .def = "",
	    .ok = word_ok_any, .what = "allow entry" }, &nw, &given);
	e = cfg_find(s, "allow");
	if (w != NULL && nw > 0 && (n->allow = calloc(nw, sizeof *n->allow)) == NULL)
		c->oom = true;
	for (size_t i = 0; n->allow != NULL && i < nw; i++) {
		if (!enterprise_allow_parse(c, e, w[i], &n->allow[n->nallow++]))
			break;
		for (size_t j = 0; j + 1 < n->nallow; j++)
			if (strcmp(n->allow[j].client_id, n->allow[i].client_id) == 0 &&
			    strcmp(n->allow[j].mcp, n->allow[i].mcp) == 0)
				cfg_err_e(c, e, "'%s': the pair is listed twice", w[i]);
	}
	cfg_free_strv(w);
}

/* Across sections: every allow entry names an [mcp.NAME] and scopes of the
 * resource behind it; one issuer, one [enterprise.NAME]. */
static void enterprise_cross_check(struct ctx *c, const struct config *cfg,
    const struct section *s)
{
	const struct config_enterprise *n = NULL;
	const struct entry *e = cfg_find(s, "allow");
	for (size_t i = 0; i < cfg->nenterprises && n == NULL; i++)
		if (cfg->enterprises[i].id != NULL && strcmp(cfg->enterprises[i].id, s->a) == 0)
			n = &cfg->enterprises[i];
	if (n == NULL)
		return;
	for (size_t i = 0; n->issuer != NULL && &cfg->enterprises[i] != n; i++)
		if (cfg->enterprises[i].issuer != NULL && strcmp(cfg->enterprises[i].issuer, n->issuer) == 0)
			cfg_err_line(c, s->line, "issuer", "[%s] has the issuer of [enterprise.%s]",
			    s->name, cfg->enterprises[i].id);
	for (size_t i = 0; e != NULL && i < n->nallow; i++) {
		const struct config_enterprise_allow *a = &n->allow[i];
		if (a->mcp == NULL)
			continue;
		const struct config_mcp_endpoint *m = config_mcp_endpoint(cfg, a->mcp);
		if (m == NULL) {
			cfg_err_e(c, e, "no [mcp.%s] section", a->mcp);
			continue;
		}
		for (size_t j = 0; j < a->nscopes && m->resource != NULL; j++)
			if (config_scope(cfg, m->resource, a->scopes[j]) == NULL)
				cfg_err_e(c, e, "[mcp.%s]: no [scope.%s.%s] section", a->mcp, m->resource,
				    a->scopes[j]);
	}
}

/* A preset's endpoints (docs/providers.md cites where each is documented):
 * the authorization server's public host and its API's, the API's path below
 * provider_base_url (GitHub Enterprise Server: /api/v3), and the paths; the
 * token endpoint sits on the API host where token_on_api (Google). */
struct preset_urls {
	const char *base, *api, *api_below;
	const char *authorize, *token, *revoke, *sites;   /* revoke, sites: on the API; NULL: none */
	bool        token_on_api;
};
static const struct preset_urls preset_urls[PRESET__MAX] = {
	[PRESET_GITHUB] = { "https://github.com", "https://api.github.com", "/api/v3",
		"/login/oauth/authorize", "/login/oauth/access_token", "/applications/{client_id}/token",
		NULL, false },
	[PRESET_GITHUB_APP] = { "https://github.com", "https://api.github.com", "/api/v3",
		"/login/oauth/authorize", "/login/oauth/access_token", "/applications/{client_id}/token",
		NULL, false },
	[PRESET_GOOGLE] = { "https://accounts.google.com", "https://oauth2.googleapis.com", "",
		"/o/oauth2/v2/auth", "/token", "/revoke", NULL, true },
	[PRESET_MICROSOFT] = { "https://login.microsoftonline.com/common",
		"https://login.microsoftonline.com/common", "", "/oauth2/v2.0/authorize",
		"/oauth2/v2.0/token", NULL, NULL, false },
	[PRESET_SLACK] = { "https://slack.com", "https://slack.com", "", "/oauth/v2/authorize",
		"/api/oauth.v2.access", "/api/auth.revoke", NULL, false },
	[PRESET_GITLAB] = { "https://gitlab.com", "https://gitlab.com", "", "/oauth/authorize",
		"/oauth/token", "/oauth/revoke", NULL, false },
	[PRESET_ATLASSIAN] = { "https://auth.atlassian.com", "https://api.atlassian.com", "",
		"/authorize", "/oauth/token", NULL, "/oauth/token/accessible-resources", false },
};

/* base + below + path, "{client_id}" in path replaced by the percent-encoded
 * client id; NULL for a NULL path (and on allocation failure, c->oom). */
static char *preset_url(struct ctx *c, const char *base, const char *below, const char *path,
    const char *client_id)
{
	struct buf b;
	char *out = NULL;
	const char *at;
	enum cs_err e;
	if (path == NULL)
		return NULL;
	buf_init(&b, 4096);
	e = buf_printf(&b, "%s%s", base, below);
	if (e == CS_OK && (at = strstr(path, "{client_id}")) != NULL) {
		e = buf_append(&b, path, (size_t)(at - path));
		for (const unsigned char *p = (const unsigned char *)(client_id ? client_id : "");
		    e == CS_OK && *p; p++)
			e = isalnum(*p) || strchr("-._~", *p) != NULL ?
			    buf_append(&b, (const char *)p, 1) : buf_printf(&b, "%%%02X", *p);
		path = at + strlen("{client_id}");
	}
	if (e == CS_OK)
		e = buf_puts(&b, path);
	if (e != CS_OK || (out = buf_steal(&b)) == NULL)
		c->oom = true;
	buf_clear(&b);
	return out;
}

/* The endpoints of r's preset where no key names them: on provider_base_url
 * when given, else on the preset's public hosts. */
static void preset_fill(struct ctx *c, struct config_resource *r)
{
	const struct preset_urls *u;
	const char *base, *api, *below;
	if (r->preset <= PRESET_NONE || r->preset >= PRESET__MAX)
		return;
	u = &preset_urls[r->preset];
	base = r->provider_base_url != NULL ? r->provider_base_url : u->base;
	api = r->provider_base_url != NULL ? r->provider_base_url : u->api;
	below = r->provider_base_url != NULL ? u->api_below : "";
	if (r->provider_authorization_endpoint == NULL)
		r->provider_authorization_endpoint = preset_url(c, base, "", u->authorize, NULL);
	if (r->provider_token_endpoint == NULL)
		r->provider_token_endpoint = preset_url(c, u->token_on_api ? api : base,
		    u->token_on_api ? below : "", u->token, NULL);
	if (r->provider_revocation_endpoint == NULL)
		r->provider_revocation_endpoint = preset_url(c, api, below, u->revoke,
		    r->provider_client_id);
	r->provider_sites_endpoint = preset_url(c, api, below, u->sites, NULL);
}

/* Headers an API key may never be put in: the request's own framing and
 * routing, the person's cookies, and consentd's grant (a key there would be
 * read as something else, or smuggle the request). */
static const char *const api_key_header_banned[] = { "Host", "Content-Length",
	"Transfer-Encoding", "Connection", "Content-Type", "Cookie", "Consentd-Grant", "Upgrade",
	"TE", "Trailer", "Keep-Alive", "Proxy-Authorization", NULL };

/* An RFC 9110 field name: tchar only, at most 64. */
static bool api_key_header_ok(const char *v)
{
	size_t n = strlen(v);
	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)v[i];
		if (!(isalnum(ch) || strchr("!#$%&'*+-.^_`|~", ch) != NULL))
			return false;
	}
	for (size_t i = 0; api_key_header_banned[i] != NULL; i++)
		if (strcasecmp(v, api_key_header_banned[i]) == 0)
			return false;
	return true;
}

/* api_key_prefix: printable ASCII with spaces, at most 64; a value in double
 * quotes keeps its trailing space ("Bearer "), which an INI line would lose. */
static void api_key_prefix_load(struct ctx *c, struct config_resource *r, const struct section *s)
{
	const struct entry *e = cfg_get_str(c, s, "api_key_prefix", "", S_EMPTY_OK, &r->api_key_prefix);
	size_t n;
	if (e == NULL || r->api_key_prefix == NULL)
		return;
	n = strlen(r->api_key_prefix);
	if (n >= 2 && r->api_key_prefix[0] == '"' && r->api_key_prefix[n - 1] == '"') {
		memmove(r->api_key_prefix, r->api_key_prefix + 1, n - 2);
		r->api_key_prefix[n - 2] = '\0';
		n -= 2;
	}
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)r->api_key_prefix[i] < 0x20 || (unsigned char)r->api_key_prefix[i] > 0x7e ||
		    r->api_key_prefix[i] == '"') {
			cfg_err_e(c, e, "must be printable ASCII without quotes inside");
			return;
		}
	if (n > 64)
		cfg_err_e(c, e, "at most 64 characters");
}

/* credential and its api_key_* keys (docs/providers.md "API keys").  An
 * api_key resource has no provider, needs base_url (the proxy is the only
 * way its key is used), and releases nothing to the gateway. */
static void load_credential(struct ctx *c, struct config_resource *r, const struct section *s)
{
	static const char *const key_keys[] = { "api_key_header", "api_key_query", "api_key_prefix" };
	const struct entry *eh, *eq, *e;
	int i;
	cfg_get_enum(c, s, "credential", credential_names, CREDENTIAL_OAUTH, &i);
	r->credential = (enum config_credential)i;
	if (r->credential != CREDENTIAL_API_KEY) {
		for (size_t k = 0; k < 3; k++)
			if ((e = cfg_find(s, key_keys[k])) != NULL)
				cfg_err_e(c, e, "only with credential = api_key in [%s]", s->name);
		return;
	}
	eh = cfg_get_str(c, s, "api_key_header", NULL, S_EMPTY_NULL, &r->api_key_header);
	eq = cfg_get_str(c, s, "api_key_query", NULL, S_EMPTY_NULL, &r->api_key_query);
	api_key_prefix_load(c, r, s);
	if ((r->api_key_header != NULL) == (r->api_key_query != NULL))
		cfg_err_line(c, s->line, "api_key_header", "credential = api_key in [%s] needs exactly "
		    "one of api_key_header and api_key_query", s->name);
	if (eh != NULL && r->api_key_header != NULL && !api_key_header_ok(r->api_key_header))
		cfg_err_e(c, eh, "must be a header name (letters, digits, -), and not one of Host, "
		    "Cookie, Content-Type, Consentd-Grant or a hop-by-hop header");
	if (eq != NULL && r->api_key_query != NULL &&
	    !cfg_valid_part(r->api_key_query, strlen(r->api_key_query), false))
		cfg_err_e(c, eq, "must be a query parameter name (letters, digits, _ and -)");
	if (r->provider_issuer != NULL || r->provider_authorization_endpoint != NULL ||
	    r->provider_token_endpoint != NULL || r->preset != PRESET_NONE ||
	    cfg_section_has_value(s, "provider_client_id"))
		cfg_err_line(c, s->line, "credential", "api_key in [%s] takes no provider or preset: "
		    "the person enters the key on consentd's page", s->name);
	/* SECURITY: the gateway never receives an API key: it has no expiry, no
	 * scope and no revocation at a provider, so a key released once is the
	 * gateway's for good.  token_release defaults to never here. */
	if ((e = cfg_find(s, "token_release")) != NULL && r->token_release == RELEASE_GATEWAY)
		cfg_err_e(c, e, "gateway is refused with credential = api_key in [%s]: the gateway "
		    "never receives an API key; use never (the default), and consentd's proxy "
		    "injects it", s->name);
	r->token_release = RELEASE_NEVER;
}

/* base_url may hold {cloud_id} (CONFIG_SITE_PLACEHOLDER) with preset =
 * atlassian only: once, as a whole path segment.  The proxy puts there the
 * first site the person's connection reaches (proxy.c, vault_site). */
static void base_url_site_check(struct ctx *c, const struct entry *e, const struct config_resource *r)
{
	const char *at = strstr(r->base_url, CONFIG_SITE_PLACEHOLDER);
	size_t n = strlen(CONFIG_SITE_PLACEHOLDER);
	if (at == NULL) {
		if (strchr(r->base_url, '{') != NULL || strchr(r->base_url, '}') != NULL)
			cfg_err_e(c, e, "the only placeholder base_url may hold is %s (preset = atlassian)",
			    CONFIG_SITE_PLACEHOLDER);
		return;
	}
	if (r->preset != PRESET_ATLASSIAN)
		cfg_err_e(c, e, "%s needs preset = atlassian in [%s] (the cloud id of the site "
		    "the person's connection reaches)", CONFIG_SITE_PLACEHOLDER, r->id);
	else if (at[-1] != '/' || (at[n] != '\0' && at[n] != '/') ||
	    strchr(at + n, '{') != NULL || strchr(at + n, '}') != NULL ||
	    memchr(r->base_url, '{', (size_t)(at - r->base_url)) != NULL ||
	    memchr(r->base_url, '}', (size_t)(at - r->base_url)) != NULL)
		cfg_err_e(c, e, "%s must be one whole path segment, once (e.g. "
		    "https://api.atlassian.com/ex/jira/%s)", CONFIG_SITE_PLACEHOLDER,
		    CONFIG_SITE_PLACEHOLDER);
}

/* The resource's provider: its endpoints (or a preset's), its client and
 * the provider_base_url of a preset's instance.  true when one is configured. */
/* Reads s's key, a base URL, into *out (cfg_get_str; *e its entry, NULL when
 * unset): a URL with a path, whose trailing '/' is dropped, since what is
 * appended to it brings its own.  A bad one is reported (cfg_check_url) and
 * *out left NULL.  True when *out holds a URL. */
static bool get_base_url(struct ctx *c, const struct section *s, const char *key, bool *https,
    const struct entry **e, char **out)
{
	if ((*e = cfg_get_str(c, s, key, NULL, S_EMPTY_NULL, out)) == NULL)
		return false;
	if (!cfg_check_url(c, *e, *out, URL_PATH, https)) {
		free(*out);
		*out = NULL;
		return false;
	}
	size_t l = strlen(*out);
	if ((*out)[l - 1] == '/')
		(*out)[l - 1] = '\0';
	return true;
}

static bool load_provider(struct ctx *c, struct config_resource *r, const struct section *s)
{
	static const char *const provider_keys[] = { "provider_issuer",
		"provider_authorization_endpoint", "provider_token_endpoint",
		"provider_revocation_endpoint" };
	char **fields[] = { &r->provider_issuer, &r->provider_authorization_endpoint,
		&r->provider_token_endpoint, &r->provider_revocation_endpoint };
	bool any = false, https;
	int i;
	const struct entry *e;

	for (size_t k = 0; k < 4; k++) {
		e = cfg_get_str(c, s, provider_keys[k], NULL, S_EMPTY_NULL, fields[k]);
		if (e != NULL && !cfg_check_url(c, e, *fields[k], k == 0 ? URL_PATH : URL_PATH | URL_QUERY,
		    &https)) {
			free(*fields[k]);
			*fields[k] = NULL;
		}
		any = any || cfg_section_has_value(s, provider_keys[k]);
	}
	e = cfg_get_str(c, s, "provider_client_id", NULL, S_EMPTY_NULL, &r->provider_client_id);
	if (e != NULL && !cfg_valid_token(r->provider_client_id))
		cfg_err_e(c, e, "must be printable ASCII without spaces, at most %d characters", MAX_ID);
	(void)cfg_get_str(c, s, "provider_client_secret", NULL, S_EMPTY_NULL, &r->provider_client_secret);
	any = any || cfg_section_has_value(s, "provider_client_id") ||
	    cfg_section_has_value(s, "provider_client_secret");
	/* A preset names the provider's endpoints (explicit keys still win). */
	cfg_get_enum(c, s, "preset", preset_names, PRESET_NONE, &i);
	r->preset = (enum config_preset)i;
	/* The preset's paths bring their own '/'. */
	if (get_base_url(c, s, "provider_base_url", &https, &e, &r->provider_base_url) &&
	    r->preset == PRESET_NONE)
		cfg_err_e(c, e, "needs a preset in [%s] (it is the preset's instance URL)", s->name);
	any = any || r->preset != PRESET_NONE;
	if (any) {
		if (r->preset == PRESET_NONE && !cfg_section_has_value(s, "provider_issuer") &&
		    !(cfg_section_has_value(s, "provider_authorization_endpoint") &&
		    cfg_section_has_value(s, "provider_token_endpoint")))
			cfg_err_line(c, s->line, "provider_issuer", "required in [%s] (or both "
			    "provider_authorization_endpoint and provider_token_endpoint)", s->name);
		if (!cfg_section_has_value(s, "provider_client_id"))
			cfg_err_line(c, s->line, "provider_client_id", "required in [%s] when a provider "
			    "is configured", s->name);
	}
	return any;
}

static void load_resource(struct ctx *c, struct config_resource *r, const struct section *s)
{
	bool https;
	int i;
	const struct entry *e;
	char *def_uri = NULL;
	struct buf b;
	buf_init(&b, 256);

	r->id = cfg_xstrdup(c, s->a);
	(void)cfg_get_str(c, s, "name", s->a, 0, &r->name);
	if (buf_printf(&b, "urn:consentd:resource:%s", s->a) != CS_OK || (def_uri = buf_steal(&b)) == NULL)
		c->oom = true;
	e = cfg_get_str(c, s, "uri", def_uri != NULL ? def_uri : "", 0, &r->uri);
	if (e != NULL && !cfg_check_abs_uri(c, e, r->uri)) {
		free(r->uri);
		r->uri = NULL;
	}
	cfg_get_int(c, s, "max_consent", 2592000, 1, 315360000, &r->max_consent);

	bool any = load_provider(c, r, s);
	preset_fill(c, r);
	cfg_get_int(c, s, "refresh_margin", 60, 0, 3600, &r->refresh_margin);
	/* Refresh ahead of expiry for offline consents (vault_refresh_ahead): only
	 * where there is a provider to refresh at. */
	e = cfg_find(s, "proactive_refresh");
	cfg_get_bool(c, s, "proactive_refresh", false, &r->proactive_refresh);
	if (e != NULL && r->proactive_refresh && !any)
		cfg_err_e(c, e, "needs a provider in [%s] (a preset, or provider_issuer or its "
		    "endpoints): there is nothing to refresh", s->name);
	cfg_get_enum(c, s, "token_release", release_names, RELEASE_GATEWAY, &i);
	r->token_release = (enum config_release)i;

	/* Routes bring their own leading '/'. */
	if (get_base_url(c, s, "base_url", &https, &e, &r->base_url))
		base_url_site_check(c, e, r);
	load_credential(c, r, s);
	free(def_uri);
	buf_clear(&b);
}

static void load_scope(struct ctx *c, struct config_scope *sc, const struct section *s)
{
	bool given;
	sc->resource = cfg_xstrdup(c, s->a);
	sc->name = cfg_xstrdup(c, s->b);
	(void)cfg_get_str(c, s, "description", s->b, 0, &sc->description);
	sc->provider = cfg_get_words(c, s, &(struct words_key){ .key = "provider", .def = "",
	    .ok = word_ok_scope, .what = "provider scope" }, &sc->nprovider, &given);
}

/* A top-level parameter name a standing rule may fix: 1 to 64 of [A-Za-z0-9_.-]
 * (what the agents' tools and consentd's proxy (path, query, body) use). */
static bool word_ok_param(const char *w)
{
	size_t n = strlen(w);
	if (n == 0 || n > 64)
		return false;
	for (; *w; w++)
		if (!((*w >= 'a' && *w <= 'z') || (*w >= 'A' && *w <= 'Z') ||
		    (*w >= '0' && *w <= '9') || *w == '_' || *w == '.' || *w == '-'))
			return false;
	return true;
}

/* standing, standing_max, standing_fixed (issue #32): what standing rules the
 * approval page offers for the action.  A rule only ever replaces a person's
 * approval, so it needs approval = required; fixed names need match. */
static void load_standing(struct ctx *c, struct config_action *ac, const struct section *s)
{
	int i;
	bool given = false;
	cfg_get_enum(c, s, "standing", standing_names, STANDING_NONE, &i);
	ac->standing = (enum config_standing)i;
	cfg_get_int(c, s, "standing_max", CONFIG_STANDING_MAX_DEF, CONFIG_STANDING_MAX_MIN,
	    CONFIG_STANDING_MAX_MAX, &ac->standing_max);
	ac->standing_fixed = cfg_get_words(c, s, &(struct words_key){ .key = "standing_fixed",
	    .def = "", .ok = word_ok_param, .what = "parameter name" }, &ac->nstanding_fixed,
	    &given);
	const struct entry *e = cfg_find(s, "standing");
	if (e != NULL && !e->bad && ac->standing != STANDING_NONE && ac->approval != APPROVAL_REQUIRED)
		cfg_err_e(c, e, "needs approval = required: a standing rule stands in for a "
		    "person's approval");
	e = cfg_find(s, "standing_fixed");
	if (e != NULL && !e->bad && ac->nstanding_fixed > 0 && ac->standing != STANDING_MATCH)
		cfg_err_e(c, e, "needs standing = match: only a match rule leaves parameters open");
}

/* The action's policy.N keys (issue #32 item 4), parsed and put in order of N. */
static void load_policy(struct ctx *c, struct config_action *ac, const struct section *s)
{
	size_t n = 0;
	char why[200];
	for (size_t j = 0; j < s->nents; j++)
		n += cfg_policy_key(s->ents[j].key) > 0;
	if (n == 0 || (ac->policy = calloc(n, sizeof *ac->policy)) == NULL) {
		c->oom = n > 0;
		return;
	}
	for (int want = 1; want <= POLICY_MAX_LINES; want++)
		for (size_t j = 0; j < s->nents; j++) {
			const struct entry *e = &s->ents[j];
			if (cfg_policy_key(e->key) != want)
				continue;
			enum cs_err r = policy_line_parse(cfg_value_of(e), want,
			    &ac->policy[ac->npolicy], why, sizeof why);
			if (r == CS_ENOMEM)
				c->oom = true;
			else if (r != CS_OK)
				cfg_err_e(c, e, "%s (a line is approve or deny [if PARAM OP VALUE and ...]; "
				    "OP is == prefix in < <= > >=)", why);
			else
				ac->npolicy++;
		}
}

static void load_action(struct ctx *c, struct config_action *ac, const struct section *s)
{
	int i;
	ac->resource = cfg_xstrdup(c, s->a);
	ac->name = cfg_xstrdup(c, s->b);
	(void)cfg_get_str(c, s, "description", s->b, 0, &ac->description);
	const struct entry *e = cfg_get_str(c, s, "scope", NULL, S_REQUIRED, &ac->scope);
	if (e != NULL && !cfg_valid_part(ac->scope, strlen(ac->scope), true))
		cfg_err_e(c, e, "must be a bare scope name of resource %s", s->a);
	cfg_get_enum(c, s, "approval", approval_names, APPROVAL_NONE, &i);
	ac->approval = (enum config_approval)i;
	cfg_get_enum(c, s, "approval_enforced_by", enforcer_names, ENFORCER_CONSENTD, &i);
	ac->approval_enforced_by = (enum config_enforcer)i;
	char *route = NULL;
	e = cfg_get_str(c, s, "route", NULL, S_EMPTY_NULL, &route);
	if (e != NULL)
		cfg_check_route(c, e, route, &ac->route_method, &ac->route_path);
	free(route);
	load_standing(c, ac, s);
	load_policy(c, ac, s);
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
		if (strncmp(rs->ents[j].key, "provider_", 9) == 0 && cfg_value_of(&rs->ents[j])[0])
			return true;
	return false;
}


static void check_agent(struct ctx *c, const struct config *cfg, const struct section *s,
    const struct config_agent *a)
{
	const struct entry *e = cfg_find(s, "allow");
	for (size_t j = 0; e != NULL && a->allow != NULL && j < a->nallow; j++) {
		const char *w = a->allow[j];
		const char *colon = strchr(w, ':');       /* the first colon separates */
		if (colon == NULL || colon == w || colon[1] == '\0') {
			cfg_err_e(c, e, "'%s' is not RESOURCE:SCOPE", w);
			continue;
		}
		char *res = cfg_xstrndup(c, w, (size_t)(colon - w));
		if (res == NULL)
			return;
		if (config_resource(cfg, res) == NULL)
			cfg_err_e(c, e, "'%s': no [resource.%s] section", w, res);
		else if (config_scope(cfg, res, colon + 1) == NULL)
			cfg_err_e(c, e, "'%s': no [scope.%s.%s] section", w, res, colon + 1);
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

/* Whether the route template holds the capture {name} (name: n bytes). */
static bool route_has_capture(const char *route, const char *name, size_t n)
{
	for (const char *p = strchr(route, '{'); p != NULL; p = strchr(p + 1, '{'))
		if (strncmp(p + 1, name, n) == 0 && p[1 + n] == '}')
			return true;
	return false;
}

/* What -n can check of the policy lines beyond their syntax (load_policy):
 * on an action with a route, a condition on path.NAME names a capture of the
 * route (the proxy's parameters are {"path": {captures}, "query", "body"}). */
static void check_policy(struct ctx *c, const struct section *s, const struct config_action *ac)
{
	for (size_t i = 0; ac->route_path != NULL && i < ac->npolicy; i++)
		for (size_t j = 0; j < ac->policy[i].nconds; j++) {
			const char *p = ac->policy[i].conds[j].path;
			if (strncmp(p, "path.", 5) != 0)
				continue;
			size_t n = strcspn(p + 5, ".");
			char key[16];
			const struct entry *e = str_fmt(key, sizeof key, "policy.%d",
			    ac->policy[i].number) == CS_OK ? cfg_find(s, key) : NULL;
			if (e != NULL && !route_has_capture(ac->route_path, p + 5, n))
				cfg_err_e(c, e, "%s: the route %s has no {%.*s}", p, ac->route_path, (int)n,
				    p + 5);
		}
}

/* SECURITY (issue #32 item 6): with token_release = gateway consentd hands the
 * provider token to the gateway, which may already hold the same token: an
 * approval (or a policy line's condition on the call) that only consentd
 * would enforce is not enforced.  Refused unless the operator states that the
 * gateway enforces it. */
static void check_enforcement(struct ctx *c, const struct config *cfg, const struct section *s,
    const struct config_action *ac)
{
	const struct config_resource *r = config_resource(cfg, s->a);
	if (ac->approval_enforced_by == ENFORCER_GATEWAY || r->token_release != RELEASE_GATEWAY ||
	    (r->provider_issuer == NULL && r->provider_token_endpoint == NULL))
		return;
	const struct entry *e = cfg_find(s, "approval");
	if (ac->approval == APPROVAL_REQUIRED && e != NULL)
		cfg_err_e(c, e, "required, but [resource.%s] has token_release = gateway: consentd "
		    "releases the provider token to the gateway, which may already hold the same "
		    "token, so only the gateway can hold it to the approved call; use token_release "
		    "= never (consentd's proxy or MCP gateway enforces each approval), or state "
		    "approval_enforced_by = gateway", s->a);
	for (size_t i = 0; i < ac->npolicy; i++) {
		char key[16];
		if (ac->policy[i].nconds == 0 || str_fmt(key, sizeof key, "policy.%d",
		    ac->policy[i].number) != CS_OK || (e = cfg_find(s, key)) == NULL)
			continue;
		cfg_err_e(c, e, "a condition on the call's parameters, but [resource.%s] has "
		    "token_release = gateway: the gateway receives the provider token and consentd "
		    "never sees the call it makes; use token_release = never, or state "
		    "approval_enforced_by = gateway", s->a);
	}
}

static void check_action(struct ctx *c, const struct config *cfg, const struct section *s,
    const struct config_action *ac, size_t index)
{
	if (config_resource(cfg, s->a) == NULL) {
		cfg_err_line(c, s->line, NULL, "[%s]: no [resource.%s] section", s->name, s->a);
		return;
	}
	check_enforcement(c, cfg, s, ac);
	check_policy(c, s, ac);
	const struct entry *e = cfg_find(s, "scope");
	if (ac->scope != NULL && e != NULL && config_scope(cfg, s->a, ac->scope) == NULL)
		cfg_err_e(c, e, "no [scope.%s.%s] section", s->a, ac->scope);
	e = cfg_find(s, "route");
	if (ac->route_method == NULL || ac->route_path == NULL || e == NULL)
		return;
	if (!cfg_section_has_value(resource_section(c, s->a), "base_url"))
		cfg_err_e(c, e, "a route needs base_url in [resource.%s]", s->a);
	for (size_t j = 0; j < index; j++) {
		const struct config_action *o = &cfg->actions[j];
		if (o->route_method != NULL && o->route_path != NULL && o->resource != NULL &&
		    strcmp(o->resource, s->a) == 0 && strcmp(o->route_method, ac->route_method) == 0 &&
		    routes_overlap(o->route_path, ac->route_path))
			cfg_err_e(c, e, "overlaps the route of [action.%s.%s]: one request could match "
			    "both", o->resource, o->name);
	}
}

/* [consent] default_duration is one value for every resource, and each resource
 * caps its consents with max_consent: the page preselects the smaller of the two.
 * An operator who wrote a default longer than a resource allows hears so (it is
 * not an error: a short max_consent on one sensitive resource is normal). */
static void check_default_duration(struct ctx *c, const struct config *cfg)
{
	const struct entry *e = cfg_find(cfg_find_section(c, "consent"), "default_duration");
	if (e == NULL || e->bad)
		return;
	for (size_t i = 0; i < cfg->nresources; i++)
		if (cfg->resources[i].max_consent < cfg->consent_default_duration)
			cfg_warn_e(c, e, "%lld is longer than max_consent of [resource.%s] (%lld): its "
			    "consent page preselects %lld", (long long)cfg->consent_default_duration,
			    cfg->resources[i].id, (long long)cfg->resources[i].max_consent,
			    (long long)cfg->resources[i].max_consent);
}

/* A resource whose credentials only consentd uses (token_release = never,
 * or an API key) must be reachable by consentd: a base_url for its proxy, or
 * an [mcp.NAME] whose upstream MCP server the gateway calls with them. */
static void check_resource_reached(struct ctx *c, const struct config *cfg,
    const struct section *s, const struct config_resource *r)
{
	const struct entry *e;
	if (r->base_url != NULL || cfg_section_has_value(s, "base_url"))
		return;      /* a bad base_url has its own error */
	for (size_t i = 0; i < cfg->nmcp_endpoints; i++)
		if (cfg->mcp_endpoints[i].upstream != NULL && cfg->mcp_endpoints[i].resource != NULL &&
		    strcmp(cfg->mcp_endpoints[i].resource, r->id) == 0)
			return;
	if (r->credential == CREDENTIAL_API_KEY)
		cfg_err_line(c, s->line, "base_url", "required in [%s] with credential = api_key (the "
		    "key is used only by consentd's proxy), unless an [mcp.NAME] with an upstream "
		    "puts the resource behind consentd's MCP gateway", s->name);
	else if ((e = cfg_find(s, "token_release")) != NULL && r->token_release == RELEASE_NEVER)
		cfg_err_e(c, e, "never (proxy only) needs base_url in [%s], or an [mcp.NAME] with an "
		    "upstream in front of it", s->name);
}

/* SECURITY: consentd's grants and the IdP's tokens must never share an issuer. */
static void check_public_url(struct ctx *c, const struct config *cfg)
{
	const struct entry *e = cfg_find(cfg_find_section(c, "server"), "public_url");
	if (e != NULL && cfg->public_url != NULL && cfg->oidc_issuer != NULL) {
		size_t l = strlen(cfg->oidc_issuer);
		if (l > 0 && cfg->oidc_issuer[l - 1] == '/')
			l--;
		if (strlen(cfg->public_url) == l && strncasecmp(cfg->public_url, cfg->oidc_issuer, l) == 0)
			cfg_err_e(c, e, "must differ from [oidc] issuer");
	}
}

/* The ik-th [client.X]'s client_id names no earlier client and no agent. */
static void check_client(struct ctx *c, const struct config *cfg, const struct section *s,
    size_t ik)
{
	const struct config_client *k = &cfg->clients[ik];
	for (size_t j = 0; k->client_id != NULL && j < ik; j++)
		if (cfg->clients[j].client_id != NULL &&
		    strcmp(cfg->clients[j].client_id, k->client_id) == 0)
			cfg_err_line(c, s->line, "client_id", "[%s] has the client_id of "
			    "[client.%s]", s->name, cfg->clients[j].id);
	/* SECURITY: one id, one party: consent rows name either. */
	for (size_t j = 0; k->client_id != NULL && j < cfg->nagents; j++)
		if (cfg->agents[j].id != NULL && strcmp(cfg->agents[j].id, k->client_id) == 0)
			cfg_err_line(c, s->line, "client_id", "[%s] has the id of "
			    "[agent.%s]", s->name, k->client_id);
}

/* The ir-th [resource.X]'s uri (given or default) is no earlier resource's. */
static void check_resource_uri(struct ctx *c, const struct config *cfg, const struct section *s,
    size_t ir)
{
	const struct config_resource *r = &cfg->resources[ir];
	const struct entry *e = cfg_find(s, "uri");
	for (size_t j = 0; r->uri != NULL && j < ir; j++) {
		if (cfg->resources[j].uri == NULL || strcmp(cfg->resources[j].uri, r->uri) != 0)
			continue;
		if (e != NULL)
			cfg_err_e(c, e, "same as the uri of [resource.%s]", cfg->resources[j].id);
		else
			cfg_err_line(c, s->line, "uri", "the default uri of [%s] is already the uri "
			    "of [resource.%s]", s->name, cfg->resources[j].id);
	}
}

/* A [scope.R.S] has its [resource.R], and names provider scopes only when
 * that resource has a provider. */
static void check_scope(struct ctx *c, const struct section *s)
{
	const struct section *rs = resource_section(c, s->a);
	const struct entry *e;
	if (rs == NULL) {
		cfg_err_line(c, s->line, NULL, "[%s]: no [resource.%s] section", s->name, s->a);
		return;
	}
	e = cfg_find(s, "provider");
	if (e != NULL && cfg_value_of(e)[0] != '\0' && !section_has_provider(rs))
		cfg_err_e(c, e, "[resource.%s] has no provider", s->a);
}

/* An [mcp.X]'s resource and unmapped_scope name sections that exist. */
static void check_mcp_endpoint(struct ctx *c, const struct config *cfg, const struct section *s)
{
	const struct config_mcp_endpoint *m = config_mcp_endpoint(cfg, s->a);
	const struct entry *e = cfg_find(s, "resource");
	if (m != NULL && m->resource != NULL && e != NULL &&
	    config_resource(cfg, m->resource) == NULL)
		cfg_err_e(c, e, "no [resource.%s] section", m->resource);
	else if (m != NULL && m->resource != NULL && m->unmapped_scope != NULL &&
	    (e = cfg_find(s, "unmapped_scope")) != NULL &&
	    config_scope(cfg, m->resource, m->unmapped_scope) == NULL)
		cfg_err_e(c, e, "no [scope.%s.%s] section", m->resource, m->unmapped_scope);
}

static void cross_check(struct ctx *c, const struct config *cfg)
{
	size_t ia = 0, ir = 0, iac = 0, ik = 0;

	check_default_duration(c, cfg);
	check_public_url(c, cfg);

	for (size_t i = 0; i < c->nsecs; i++) {
		const struct section *s = &c->secs[i];
		switch (s->kind) {
		case SK_AGENT:
			check_agent(c, cfg, s, &cfg->agents[ia++]);
			break;
		case SK_CLIENT:
			check_client(c, cfg, s, ik++);
			break;
		case SK_RESOURCE:
			check_resource_reached(c, cfg, s, &cfg->resources[ir]);
			check_resource_uri(c, cfg, s, ir++);
			break;
		case SK_SCOPE:
			check_scope(c, s);
			break;
		case SK_ENTERPRISE:
			enterprise_cross_check(c, cfg, s);
			break;
		case SK_MCP_ENDPOINT:
			check_mcp_endpoint(c, cfg, s);
			break;
		case SK_ACTION:
			check_action(c, cfg, s, &cfg->actions[iac], iac);
			iac++;
			break;
		default:
			break;
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
	size_t nk = count_kind(c, SK_CLIENT), nm = count_kind(c, SK_MCP_ENDPOINT);
	size_t nen = count_kind(c, SK_ENTERPRISE);
	cfg->agents = calloc_n(c, na, sizeof *cfg->agents);
	cfg->resources = calloc_n(c, nr, sizeof *cfg->resources);
	cfg->scopes = calloc_n(c, ns, sizeof *cfg->scopes);
	cfg->actions = calloc_n(c, nac, sizeof *cfg->actions);
	cfg->clients = calloc_n(c, nk, sizeof *cfg->clients);
	cfg->mcp_endpoints = calloc_n(c, nm, sizeof *cfg->mcp_endpoints);
	cfg->enterprises = calloc_n(c, nen, sizeof *cfg->enterprises);
	if (c->oom)
		return;
	for (size_t i = 0; i < c->nsecs; i++) {
		const struct section *s = &c->secs[i];
		switch (s->kind) {
		case SK_AGENT:    load_agent(c, &cfg->agents[cfg->nagents++], s); break;
		case SK_RESOURCE: load_resource(c, &cfg->resources[cfg->nresources++], s); break;
		case SK_SCOPE:    load_scope(c, &cfg->scopes[cfg->nscopes++], s); break;
		case SK_ACTION:   load_action(c, &cfg->actions[cfg->nactions++], s); break;
		case SK_CLIENT:   load_client(c, &cfg->clients[cfg->nclients++], s); break;
		case SK_MCP_ENDPOINT:
			load_mcp_endpoint(c, cfg, &cfg->mcp_endpoints[cfg->nmcp_endpoints++], s);
			break;
		case SK_ENTERPRISE:
			load_enterprise(c, &cfg->enterprises[cfg->nenterprises++], s);
			break;
		default:          break;
		}
	}
}

/* Every section into cfg, then the checks across them; problems reported
 * through c, c->oom on allocation failure. */
void cfg_load_sections(struct ctx *c, struct config *cfg)
{
	int64_t n;

	load_server(c, cfg, cfg_find_section(c, "server"));
	load_database(c, cfg, cfg_find_section(c, "database"));
	cfg_get_int(c, cfg_find_section(c, "database"), "write_queue", STORE_WRITE_QUEUE_DEFAULT, 0,
	    65536, &n);
	cfg->db_write_queue = (unsigned)n;
	load_keys(c, cfg, cfg_find_section(c, "keys"));
	load_oidc(c, cfg, cfg_find_section(c, "oidc"));

	const struct section *s = cfg_find_section(c, "session");
	cfg_get_int(c, s, "idle_timeout", 1800, 1, 2592000, &cfg->session_idle_timeout);
	cfg_get_int(c, s, "absolute_timeout", 43200, 1, 31536000, &cfg->session_absolute_timeout);
	cfg_get_int(c, s, "admin_timeout", 3600, 1, 86400, &cfg->session_admin_timeout);
	/* [login] max_pending and max_pending_per_address bounded the sign-ins
	 * stored before the IdP answered.  None is stored any more (issue #28):
	 * the keys are obsolete, accepted with a warning so that an upgrade does
	 * not fail on a configuration copied from the old example. */
	s = cfg_find_section(c, "login");
	for (const char *const *k = (const char *const[]){ "max_pending", "max_pending_per_address",
	    NULL }; s != NULL && *k != NULL; k++) {
		const struct entry *le = cfg_find(s, *k);
		cfg_note_default(c, s, *k, 'o', "%s", "");   /* config-keys: (obsolete) */
		if (le != NULL)
			cfg_warn_e(c, le, "obsolete and ignored: sign-ins in progress are no longer "
			    "stored at consentd, so there is nothing to bound (remove the key)");
	}
	load_limits(c, cfg, cfg_find_section(c, "limits"));
	s = cfg_find_section(c, "consent");
	cfg_get_int(c, s, "request_ttl", 600, 1, 86400, &cfg->consent_request_ttl);
	cfg_get_int(c, s, "interval", 5, 1, 300, &cfg->consent_interval);
	cfg_get_int(c, s, "deny_cooldown", 86400, 0, 31536000, &cfg->consent_deny_cooldown);
	cfg_get_int(c, s, "max_pending_per_user", 5, 1, 1000, &n);
	cfg->consent_max_pending_per_user = n;
	cfg_get_int(c, s, "default_duration", 86400, 1, 315360000, &cfg->consent_default_duration);

	load_gateway(c, cfg, cfg_find_section(c, "gateway"));
	(void)cfg_get_str(c, cfg_find_section(c, "audit"), "head_file", NULL, S_EMPTY_NULL,
	    &cfg->audit_head_file);
	cfg_get_int(c, cfg_find_section(c, "audit"), "batch_interval_ms", 100, 10, 10000,
	    &cfg->audit_batch_interval_ms);
	cfg_get_int(c, cfg_find_section(c, "audit"), "crossref_interval", 300, 0, 86400,
	    &cfg->audit_crossref_interval);
	load_metrics(c, cfg, cfg_find_section(c, "metrics"));
	load_mcp(c, cfg, cfg_find_section(c, "mcp"));
	s = cfg_find_section(c, "retention");
	cfg_get_bool(c, s, "enabled", true, &cfg->retention_enabled);
	cfg_get_int(c, s, "interval", 300, 1, 86400, &cfg->retention_interval);
	cfg_get_int(c, s, "batch_size", 500, 1, 100000, &cfg->retention_batch_size);
	cfg_get_int(c, s, "grace", 3600, 0, 31536000, &cfg->retention_grace);
	cfg_get_int(c, s, "revoked_consent_days", 90, 1, 36500, &cfg->retention_revoked_consent_days);
	cfg_get_int(c, s, "audit_days", 0, 0, 36500, &cfg->retention_audit_days);
	cfg_get_int(c, s, "audit_keep", 0, 0, INT64_C(1000000000000), &cfg->retention_audit_keep);
	load_dynamic(c, cfg);
	if (c->oom)
		return;
	cfg_load_authzen(c, cfg, cfg_find_section(c, "authzen"));
	cross_check(c, cfg);
}
