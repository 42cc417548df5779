/* config.h -- consentd's INI configuration: parsed once at start into an
 * immutable struct, validated completely, failing closed with "file:line: key: why".
 * Section and key names are a public interface (docs/reference.md "Configuration"). */
#ifndef CS_CONFIG_H
#define CS_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include "cimd.h"
#include "cs_err.h"
#include "forwarded.h"
#include "log.h"

#define CONFIG_MAX_LINE 199          /* inih's line buffer is 200 bytes with the NUL */

enum config_release { RELEASE_GATEWAY = 0, RELEASE_NEVER };
/* [resource.NAME] preset: a provider whose endpoints and quirks consentd
 * knows (provider.c's table; docs/providers.md).  PRESET_NONE: generic OAuth. */
enum config_preset {
	PRESET_NONE = 0, PRESET_GITHUB, PRESET_GITHUB_APP, PRESET_GOOGLE, PRESET_MICROSOFT,
	PRESET_SLACK, PRESET_GITLAB, PRESET_ATLASSIAN, PRESET__MAX
};
/* In a preset = atlassian resource's base_url: the cloud id of the first site
 * the person's connection reaches (https://api.atlassian.com/ex/jira/{cloud_id}). */
#define CONFIG_SITE_PLACEHOLDER "{cloud_id}"
/* [resource.NAME] credential: what the vault keeps for the resource -- the
 * provider's OAuth tokens, or an API key (or static token) the person enters
 * once on consentd's page (docs/providers.md "API keys"). */
enum config_credential { CREDENTIAL_OAUTH = 0, CREDENTIAL_API_KEY };
enum config_approval { APPROVAL_NONE = 0, APPROVAL_REQUIRED };
/* [action.R.A] standing (issue #32): which standing rules the person may make
 * on the approval page -- none, "exactly this call again" (exact), or also
 * "with these values fixed" (match). */
enum config_standing { STANDING_NONE = 0, STANDING_EXACT, STANDING_MATCH };
#define CONFIG_STANDING_MAX_MIN 60            /* standing_max bounds, seconds */
#define CONFIG_STANDING_MAX_MAX (30 * 86400)
#define CONFIG_STANDING_MAX_DEF (8 * 3600)
enum config_auth { AUTH_CLIENT_SECRET_BASIC = 0, AUTH_CLIENT_SECRET_POST };
/* [authzen] on_error: what a failed call to the decision point decides. */
enum config_authzen_on_error { AUTHZEN_ON_ERROR_DENY = 0, AUTHZEN_ON_ERROR_ASK };
/* [action.R.A] approval_enforced_by: who holds a released token to the
 * approved call (issue #32 item 6). */
enum config_enforcer { ENFORCER_CONSENTD = 0, ENFORCER_GATEWAY };
struct policy_line;              /* policy.h */

struct config_scope {            /* [scope.RESOURCE.SCOPE] */
	char  *resource;             /* resource name */
	char  *name;                 /* bare scope name (letters, digits, _ - :) */
	char  *description;
	char **provider;             /* provider scopes this scope needs; NULL-terminated */
	size_t nprovider;
};

struct config_action {           /* [action.RESOURCE.ACTION] */
	char  *resource;
	char  *name;
	char  *description;
	char  *scope;                /* bare scope name of the same resource */
	enum config_approval approval;
	char  *route_method;         /* NULL when no route */
	char  *route_path;           /* e.g. /repos/{owner}/{repo}/issues */
	enum config_standing standing;   /* default none; needs approval = required */
	int64_t standing_max;        /* the longest rule, seconds (default 8 h) */
	char **standing_fixed;       /* top-level parameters a match rule never leaves
	                                open; NULL-terminated (standing = match only) */
	size_t nstanding_fixed;
	enum config_enforcer approval_enforced_by;   /* default consentd */
	struct policy_line *policy;  /* policy.N keys, in order of N (policy.h); NULL: none */
	size_t npolicy;
};

struct config_resource {         /* [resource.NAME] */
	char    *id;                 /* the NAME part */
	char    *name;               /* display name (defaults to id) */
	char    *uri;                /* default urn:consentd:resource:NAME */
	int64_t  max_consent;        /* seconds, default 2592000 */
	char    *provider_issuer;    /* NULL when none */
	char    *provider_authorization_endpoint;
	char    *provider_token_endpoint;
	char    *provider_revocation_endpoint;
	char    *provider_client_id;
	char    *provider_client_secret;   /* secret: never log */
	enum config_preset preset;   /* default none; explicit endpoint keys override it */
	char    *provider_base_url;  /* a preset's instance (GitLab, GitHub Enterprise, a
	                                Microsoft tenant); NULL: the preset's public one */
	char    *provider_sites_endpoint;   /* not a key: Atlassian's accessible-resources
	                                       (preset atlassian); NULL otherwise */
	int64_t  refresh_margin;     /* default 60 */
	bool     proactive_refresh;  /* refresh offline consents' tokens within refresh_margin
	                                of expiry without waiting for a release (default false) */
	enum config_release token_release;
	char    *base_url;           /* NULL when none; may hold CONFIG_SITE_PLACEHOLDER
	                                (preset atlassian: the proxy puts the connection's site) */
	enum config_credential credential;   /* default oauth */
	char    *api_key_header;     /* api_key: the header the proxy puts the key in, or NULL */
	char    *api_key_query;      /* api_key: the query parameter instead (exactly one is set) */
	char    *api_key_prefix;     /* api_key: put before the key ("Bearer "); "" when none */
};

struct config_agent {            /* [agent.NAME] */
	char  *id;                   /* the NAME part: agent_id */
	char  *name;                 /* display name (defaults to id) */
	char  *description;
	char **allow;                /* "RESOURCE:SCOPE" entries; NULL-terminated */
	size_t nallow;
	bool   offline;
};

/* [client.NAME]: an MCP client registered by the operator (issue #30), beside
 * the clients that arrive with a client-id URL (cimd.h).  Public (a native or
 * browser client proving itself with PKCE alone) or private_key_jwt. */
enum config_client_auth { CLIENT_AUTH_NONE = 0, CLIENT_AUTH_PRIVATE_KEY_JWT };
struct config_client {
	char  *id;                   /* the NAME part */
	char  *client_id;            /* what the client sends (defaults to NAME) */
	char  *name;                 /* shown on the consent page (defaults to client_id) */
	char **redirect_uris;        /* NULL-terminated, at least one (cimd_redirect_uri_ok) */
	size_t nredirect_uris;
	enum config_client_auth auth;   /* token_endpoint_auth, default none */
	char  *jwks_file, *jwks_uri; /* private_key_jwt: exactly one */
	char  *jwks_json;            /* jwks_file's JWK Set as read and checked at start */
};

/* [mcp.NAME]: an MCP endpoint, served at public_url/mcp/NAME (issue #30, and
 * the gateway of issue #31).  Its URI is the resource indicator (RFC 8707) MCP
 * clients ask tokens for, and the access tokens' aud; the consent the person
 * gives for it is a consent to the consentd resource behind it. */
enum config_unmapped { UNMAPPED_REFUSE = 0, UNMAPPED_ALLOW };
struct config_mcp_endpoint {
	char *id;                    /* the NAME part */
	char *resource;              /* the [resource.X] id behind it (required) */
	char *uri;                   /* public_url + "/mcp/" + NAME */
	/* The gateway (issue #31): the upstream MCP server the calls go to (https,
	 * or http on loopback; NULL: none, and a valid token is answered 503), its
	 * time for one answer, what a tool that maps to no [action.RESOURCE.TOOL]
	 * gets (refused, or allowed with unmapped_scope), and whether the audit
	 * entry of a tool call holds its argument values. */
	char    *upstream;
	int64_t  upstream_timeout;   /* seconds, default 30 */
	enum config_unmapped unmapped;
	char    *unmapped_scope;     /* bare scope name of resource; required with allow */
	bool     log_arguments;
};

/* [enterprise.NAME]: an enterprise IdP whose Identity Assertion JWT
 * Authorization Grants (ID-JAG, idjag.h) consentd takes at /token as
 * urn:ietf:params:oauth:grant-type:jwt-bearer (issue #30 item 6), and the
 * admin's policy: which client may get a token for which MCP endpoint, with
 * which scopes, on the organisation's word instead of the person's consent. */
struct config_enterprise_allow {     /* one allow entry: CLIENT_ID=MCP_NAME:SCOPE,SCOPE */
	char  *client_id;                /* a [client.NAME] client_id or a client-id URL */
	char  *mcp;                      /* the [mcp.NAME] id */
	char **scopes;                   /* NULL-terminated: scopes of the resource behind it */
	size_t nscopes;
};
struct config_enterprise {
	char  *id;                       /* the NAME part */
	char  *issuer;                   /* the ID-JAG's iss, byte for byte (required) */
	char  *jwks_file, *jwks_uri;     /* the IdP's public keys: exactly one */
	char  *jwks_json;                /* jwks_file's JWK Set as read and checked at start
	                                    (ES256 and RS256 keys only, JWS_ALGS_IDJAG);
	                                    NULL with jwks_uri (fetched at run time) */
	struct config_enterprise_allow *allow;
	size_t nallow;
};

struct config_limit {            /* one [limits] class */
	int64_t rate_milli;          /* requests a second, in thousandths; 0 = the class is off */
	int64_t burst;               /* the bucket's size: requests allowed at once */
};

struct config {                  /* immutable after config_load(); free with config_free() */
	char *path;                  /* the file it came from */

	/* [server] */
	char    *listen_host;        /* from listen = host:port: an IPv4 address, "localhost",
	                                or an IPv6 address (stored without its brackets) */
	uint16_t listen_port;
	char    *public_url;         /* scheme://host[:port], no trailing slash, no path */
	bool     public_url_is_https;
	unsigned threads;            /* 0 in the file = one per core, resolved at load */
	size_t   max_body;           /* default 65536 */
	unsigned per_ip_connections; /* default 64 */
	unsigned max_connections;    /* in all; default 16384 (the open-file limit is raised to fit) */
	unsigned idle_timeout;       /* default 30 */
	char    *log;                /* "stderr" | "stdout" | a path; default stderr */
	enum log_level log_level;    /* lines below it are not written; default info */
	/* The reverse proxies whose X-Forwarded-For / Forwarded header names the
	 * client (forwarded.h); none by default, and then no header is read. */
	struct net_prefix *trusted_proxies;
	size_t   ntrusted_proxies;
	enum forwarded_header proxy_header;   /* default x-forwarded-for */
	bool     development;        /* default false; true: placeholder secrets and documentation
	                                hosts are allowed (config_load refuses them otherwise) */

	/* [database] */
	char *db_path;               /* default /var/lib/consentd/consentd.db */
	char *db_url;                /* postgresql://... (the PostgreSQL backend), or NULL: db_path */
	char *db_password;           /* secret: password or password_file (CONSENTD_DATABASE_PASSWORD) */
	bool  db_prepared;           /* default true; false for PgBouncer < 1.21 in transaction mode */
	unsigned db_write_queue;     /* transactions that may wait for the writer, then 503 */

	/* [keys] */
	char    *master_key_file;    /* default /etc/consentd/master.key */
	char    *master_key_b64;     /* CONSENTD_KEYS_MASTER_KEY (environment only): base64 of
	                                32 bytes, shape-checked here; secret; NULL when unset */
	int64_t  grant_ttl;          /* default 300, at most 900 */
	int64_t  publish_lead;       /* default 3600 */

	/* [oidc] */
	char    *oidc_issuer;
	char    *oidc_client_id;
	char    *oidc_client_secret;         /* secret: never log */
	enum config_auth oidc_token_endpoint_auth;
	char    *oidc_scopes;                /* default "openid profile email" */
	char    *oidc_subject_claim;         /* default "sub" */
	char    *oidc_admin_claim;           /* default "groups" */
	char    *oidc_admin_value;           /* default "consent-admins" */
	int64_t  oidc_clock_skew;            /* default 60 */

	/* [session] */
	int64_t session_idle_timeout;        /* default 1800 */
	int64_t session_absolute_timeout;    /* default 43200 */
	int64_t session_admin_timeout;       /* default 3600 */

	/* [limits] (rate_limits.h) */
	struct config_limit limit_address;   /* default 20/s, burst 100 */
	struct config_limit limit_person;    /* default 1/s, burst 20 */
	struct config_limit limit_gateway;   /* default 1000/s, burst 2000 */
	struct config_limit limit_auth_failure;  /* default 1/s, burst 50: failed gateway
	                                      * authentications per address (issue 28) */
	int64_t limit_buckets;               /* default 65536: keys an address or person table holds */

	/* [consent] */
	int64_t consent_request_ttl;         /* default 600 */
	int64_t consent_interval;            /* default 5 */
	int64_t consent_deny_cooldown;       /* default 86400 */
	int64_t consent_max_pending_per_user;/* default 5 */
	int64_t consent_default_duration;    /* default 86400: the consent page's preselected
	                                        duration, lowered to a resource's max_consent */

	/* [gateway] */
	char  *gateway_id;                   /* default agent-gateway */
	char  *gateway_client_secret;        /* secret: never log; NULL if only the hash given */
	unsigned char gateway_secret_sha256[32]; /* always set when the gateway is configured */
	bool   gateway_has_secret;
	char **subject_audiences;            /* NULL-terminated; default {"gateway-app"} */
	size_t nsubject_audiences;
	char **subject_token_types;          /* subset of id_token access_token jwt */
	size_t nsubject_token_types;
	char  *events_uri;                   /* NULL when empty */
	/* How the gateway authenticates (token_endpoint_auth, default
	 * client_secret_basic): either or both of the two methods. */
	bool   gateway_auth_basic;
	bool   gateway_auth_private_key_jwt;
	char  *gateway_jwks_file;            /* NULL when none */
	char  *gateway_jwks_json;            /* its text, checked to parse; NULL when none */
	char  *gateway_jwks_uri;             /* or fetched from here at run time; NULL when none */
	int64_t gateway_clock_skew;          /* default 60: assertion exp and DPoP iat tolerance, s */
	bool   gateway_require_dpop;         /* default false: bearer exchanges refused when true */
	bool   gateway_dpop_nonce;           /* default false: DPoP proofs must carry our nonce */

	/* [audit] */
	char  *audit_head_file;              /* append-only record of published heads; NULL = none */
	int64_t audit_batch_interval_ms;     /* default 100: the longest a queued entry (an MCP
	                                        call's answer) waits for its batch (audit_queue.h) */
	int64_t audit_crossref_interval;     /* s, default 300, 0 = never: how often a process with a
	                                        chain of its own vouches for the others' heads
	                                        (audit_crossref) */

	/* [metrics] */
	char    *metrics_token;              /* secret: never log; from token or token_file; NULL = none */
	char    *metrics_listen_host;        /* a second listener serving only /metrics; NULL = none */
	uint16_t metrics_listen_port;
	/* [retention] (janitor.h) */
	bool    retention_enabled;           /* default true */
	int64_t retention_interval;          /* default 300: seconds between janitor passes */
	int64_t retention_batch_size;        /* default 500: rows per delete transaction */
	int64_t retention_grace;             /* default 3600: a finished row stays at least this long, s */
	int64_t retention_revoked_consent_days; /* default 90 */
	int64_t retention_audit_days;        /* default 0: no age limit on audit entries */
	int64_t retention_audit_keep;        /* default 0: no count limit (keep the newest N) */

	/* [mcp] (cimd.h): client-id URLs (Client ID Metadata Documents) */
	enum cimd_allow mcp_cimd_allow;      /* default any */
	char  **mcp_cimd_hosts;              /* NULL-terminated; cimd_allow = hosts */
	size_t  nmcp_cimd_hosts;
	char  **mcp_cimd_prefixes;           /* NULL-terminated; cimd_allow = prefixes */
	size_t  nmcp_cimd_prefixes;
	bool    mcp_cimd_allow_loopback;     /* default false: development only */
	char   *mcp_cimd_ca_file;            /* extra CAs for these fetches; NULL = none */
	int64_t mcp_cimd_timeout_ms;         /* default 5000: the whole fetch */
	int64_t mcp_cimd_connect_timeout_ms; /* default 2000 */
	int64_t mcp_cimd_max_bytes;          /* default 5120 */
	int64_t mcp_cimd_cache_entries;      /* default 1000 */
	int64_t mcp_cimd_cache_min_ttl;      /* default 60, s */
	int64_t mcp_cimd_cache_default_ttl;  /* default 300, s: without a max-age */
	int64_t mcp_cimd_cache_max_ttl;      /* default 86400, s */
	int64_t mcp_cimd_failure_ttl;        /* default 10, s: a failed fetch is not retried sooner */
	bool    mcp_require_dpop;            /* default false: public MCP clients must send a
	                                        DPoP proof at /token (RFC 9449) */

	/* [authzen] (authzen.h): the organisation's decision point (AuthZEN 1.0
	 * Access Evaluation API), asked before a person is; off without endpoint */
	char   *authzen_endpoint;            /* the evaluation URL; NULL = no decision point */
	char   *authzen_token;               /* secret: never log; token or token_file; NULL = none */
	char   *authzen_ca_file;             /* PEM CAs trusted instead of the system's; NULL = system */
	int64_t authzen_timeout_ms;          /* default 2000: the whole call, connecting included */
	enum config_authzen_on_error authzen_on_error;   /* default deny (fail closed) */
	char  **authzen_actions;             /* RESOURCE.ACTION names; NULL-terminated; none:
	                                        every action with approval = required */
	size_t  nauthzen_actions;

	struct config_agent    *agents;    size_t nagents;
	struct config_client   *clients;   size_t nclients;
	struct config_mcp_endpoint *mcp_endpoints; size_t nmcp_endpoints;
	struct config_enterprise *enterprises; size_t nenterprises;
	struct config_resource *resources; size_t nresources;
	struct config_scope    *scopes;    size_t nscopes;
	struct config_action   *actions;   size_t nactions;
};

/* Reads and validates the file at path, then applies CONSENTD_<SECTION>_<KEY>
 * environment overrides (env wins) for every key of the fixed sections and of
 * every [agent.*] [resource.*] [scope.*] [action.*] section in the file.  Any
 * other CONSENTD_* variable is an error, except CONSENTD_KEYS_MASTER_KEY (see
 * master_key_b64), CONSENTD_CONFIG (left for the command line) and CONSENTD_BIN
 * (the test tooling's name for the binary).
 * On failure returns CS_ECONFIG and writes one line per problem, sorted by line,
 * "file:line: key: what is wrong" (or "CONSENTD_X_Y: key: what" for the
 * environment), to errs (may be NULL).  An unreadable file is CS_ECONFIG too.
 * Warnings (e.g. a subject_claim other than sub) go to errs too, prefixed
 * "warning: ", and do not fail the load.  *out is written only on CS_OK.
 * Unless [server] development = true it also refuses what only a copied example
 * holds (config_placeholder.c): a placeholder secret (REPLACE-ME-..., CHANGEME,
 * one character repeated) and a documentation host (example.com/.net/.org and
 * their subdomains, *.example, *.test, *.invalid, 192.0.2.0/24, 198.51.100.0/24,
 * 203.0.113.0/24, 2001:db8::/32) in a URL consentd publishes or connects to. */
enum cs_err config_load(const char *path, FILE *errs, struct config **out) CS_MUST_CHECK;

/* The same over an in-memory text (for tests and the fuzzer); name is used in
 * messages.  It skips the placeholder checks, which only config_load (the
 * binary's path: the server, -n and every command) runs: the unit tests'
 * configurations use documentation hosts on purpose.  env may be NULL (then the process environment is not read) or a
 * NULL-terminated "NAME=value" array standing in for it. */
enum cs_err config_load_string(const char *text, size_t len, const char *name,
    char *const *env, FILE *errs, struct config **out) CS_MUST_CHECK;
/* config_load_string with the placeholder checks config_load runs (the fuzzer's). */
enum cs_err config_load_string_deployed(const char *text, size_t len, const char *name,
    char *const *env, FILE *errs, struct config **out) CS_MUST_CHECK;

void config_free(struct config *c);   /* NULL-safe; wipes secrets */

/* `consentd config-keys`: every key of every section, one a line, as the code
 * reads it: "[section] key = default", "[section] key =" when it has none and
 * "[section] key (required)"; named sections as [agent.NAME], [resource.NAME],
 * [scope.NAME.SCOPE] and [action.NAME.ACTION] (defaults that name the section
 * say NAME).  Reads neither a file nor the environment. */
enum cs_err config_print_keys(FILE *out) CS_MUST_CHECK;

/* Look-ups; NULL when absent. */
const struct config_agent    *config_agent(const struct config *, const char *id);
/* The [client.NAME] whose client_id is client_id, byte for byte; NULL: none. */
const struct config_client   *config_client(const struct config *, const char *client_id);
/* The [mcp.NAME] named id, or whose URI is uri, byte for byte; NULL: none. */
const struct config_mcp_endpoint *config_mcp_endpoint(const struct config *, const char *id);
const struct config_mcp_endpoint *config_mcp_endpoint_by_uri(const struct config *,
    const char *uri);
/* Whether some [mcp.NAME] stands for the [resource.X] whose id is resource. */
bool config_resource_has_mcp_endpoint(const struct config *, const char *resource);
/* The [enterprise.NAME] whose issuer is issuer, byte for byte; NULL: none. */
const struct config_enterprise *config_enterprise_by_issuer(const struct config *,
    const char *issuer);
/* The entry of e's allow policy for (client_id, the [mcp.NAME] mcp); NULL: the
 * policy does not list the pair. */
const struct config_enterprise_allow *config_enterprise_allows(const struct config_enterprise *e,
    const char *client_id, const char *mcp);
const struct config_resource *config_resource(const struct config *, const char *id);
const struct config_resource *config_resource_by_uri(const struct config *, const char *uri);
const struct config_scope    *config_scope(const struct config *, const char *resource, const char *name);
const struct config_action   *config_action(const struct config *, const char *resource, const char *name);

#endif
