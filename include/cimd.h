/* cimd.h -- OAuth Client ID Metadata Documents (draft-ietf-oauth-client-id-
 * metadata-document-03): a client_id that is an https URL whose JSON document
 * consentd fetches.  The URL check, the SSRF-safe fetch, the document check, a
 * cache bounded in time and entries, and the admin policy.  Knows no HTTP server. */
#ifndef CS_CIMD_H
#define CS_CIMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include "cs_err.h"

#define CIMD_URL_MAX        1024     /* bytes of a client-id URL (and of any URL in a document) */
#define CIMD_WHY_MAX        256      /* a refusal's reason, for error_description */
#define CIMD_DOC_MAX        5120     /* the draft's recommended read limit (5 KiB), the default */
#define CIMD_DOC_MAX_LIMIT  65536    /* what [mcp] cimd_max_bytes may raise it to */
#define CIMD_NAME_MAX       200      /* bytes of client_name */
#define CIMD_MAX_REDIRECTS  32       /* redirect_uris entries */

enum cimd_auth { CIMD_AUTH_NONE = 0, CIMD_AUTH_PRIVATE_KEY_JWT, CIMD_AUTH__MAX };

struct cimd_doc {                /* caller-owned; release with cimd_doc_clear() */
	char   *client_id;           /* equal to the URL it came from, byte for byte */
	char   *client_name;         /* NULL when absent: chosen by the client itself */
	char   *client_uri, *logo_uri;   /* https URLs, NULL when absent */
	char  **redirect_uris;       /* NULL-terminated, at least one */
	size_t  nredirect_uris;
	enum cimd_auth auth;         /* token_endpoint_auth_method (absent: none) */
	char   *jwks;                /* private_key_jwt: the JWK Set as compact JSON, or NULL */
	char   *jwks_uri;            /* private_key_jwt: or where it is; NULL */
	bool    refresh;             /* grant_types lists refresh_token (absent: true) */
};
/* A refusal's reason into why (whylen bytes), as every check here words it;
 * one too long for why becomes a short generic one rather than a cut one. */
void cimd_reason(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void cimd_doc_clear(struct cimd_doc *d);     /* NULL-safe */
/* A deep copy of src into *out (written only on CS_OK). */
enum cs_err cimd_doc_copy(const struct cimd_doc *src, struct cimd_doc *out) CS_MUST_CHECK;

/* --- the client-id URL ----------------------------------------------------
 * A Client Identifier URL (draft §3), checked as text before anything is
 * fetched: at most CIMD_URL_MAX printable ASCII bytes of RFC 3986 characters
 * (no backslash, space or control), "https://" in lower case, a host (a DNS
 * name, IPv4 or bracketed IPv6 literal; no userinfo, no empty port), a path
 * that starts with '/', no "." or ".." segment (percent-encoded too), no %00,
 * no query (the draft says SHOULD NOT; consentd refuses it) and no fragment.
 * CS_OK, or CS_EINVAL with *why (static text) naming the failing check. */
enum cs_err cimd_url_check(const char *url, const char **why) CS_MUST_CHECK;
/* The host of a URL that passed cimd_url_check, as written (brackets of an
 * IPv6 literal removed) into host (at least 256 bytes), and its port (443
 * when none is written).  CS_EINVAL for a URL that does not pass. */
enum cs_err cimd_url_host(const char *url, char *host, size_t hostlen, uint16_t *port)
    CS_MUST_CHECK;

/* --- the document --------------------------------------------------------
 * Checks the document fetched from url (len bytes of JSON) and fills *out:
 * a JSON object (duplicate members refused) whose client_id equals url byte
 * for byte; redirect_uris a non-empty array (at most CIMD_MAX_REDIRECTS) of
 * absolute https URIs, or http URIs to a loopback host (127.0.0.1, [::1],
 * localhost: native clients, RFC 8252 §7.3), without fragment or userinfo;
 * token_endpoint_auth_method absent or "none", or "private_key_jwt" with
 * exactly one of jwks (an object with a "keys" array) or jwks_uri (https);
 * no client_secret* member, no method based on a shared secret and no private
 * key member (d, p, q, dp, dq, qi, k, oth) in any JWK (draft §4.1);
 * client_name a string of 1 to CIMD_NAME_MAX bytes without control
 * characters; client_uri and logo_uri https URLs; grant_types, when present,
 * an array listing authorization_code and neither implicit nor password;
 * response_types, when present, exactly ["code"].  Other members are ignored.
 * CS_OK, or CS_EINVAL with why naming the failing check (CS_ENOMEM). */
enum cs_err cimd_doc_parse(const char *url, const char *json, size_t len, struct cimd_doc *out,
    char *why, size_t whylen) CS_MUST_CHECK;

/* A redirect URI as a document or a pre-registered client ([client.NAME]
 * redirect_uris) may name: absolute, without fragment or userinfo, https, or
 * http to 127.0.0.1, [::1] or localhost (native clients, RFC 8252 §7.3).
 * false with why naming the failing check. */
bool cimd_redirect_uri_ok(const char *uri, char *why, size_t whylen);

/* --- addresses (SSRF) ------------------------------------------------------
 * Where an address may lead.  Everything but PUBLIC is refused; LOOPBACK only
 * is allowed when [mcp] cimd_allow_loopback says so.  IPv4-mapped
 * (::ffff:0:0/96), NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses are
 * judged by the IPv4 address inside them. */
enum cimd_addr {
	CIMD_ADDR_PUBLIC = 0,
	CIMD_ADDR_LOOPBACK,          /* 127/8, ::1 */
	CIMD_ADDR_PRIVATE,           /* 10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10 */
	CIMD_ADDR_LINK_LOCAL,        /* 169.254/16, fe80::/10 */
	CIMD_ADDR_UNSPECIFIED,       /* 0/8, :: */
	CIMD_ADDR_MULTICAST,         /* 224/4, ff00::/8 */
	CIMD_ADDR_SHARED,            /* 100.64/10 (carrier-grade NAT) */
	CIMD_ADDR_RESERVED,          /* the rest of RFC 6890's special-use blocks */
	CIMD_ADDR__MAX
};
enum cimd_addr cimd_addr_classify(const struct sockaddr *sa);   /* other families: RESERVED */
const char *cimd_addr_name(enum cimd_addr a);                   /* "a private address" ... */

/* --- the admin policy ------------------------------------------------------ */
enum cimd_allow { CIMD_ALLOW_NONE = 0, CIMD_ALLOW_ANY, CIMD_ALLOW_HOSTS, CIMD_ALLOW_PREFIXES,
	CIMD_ALLOW__MAX };
struct cimd_policy {
	enum cimd_allow     allow;
	const char *const  *hosts;     /* NULL-terminated: "host" or "host:port" (IPv6 in brackets) */
	const char *const  *prefixes;  /* NULL-terminated: https URLs whose path ends in '/' */
};
/* True when a URL that passed cimd_url_check may sign in.  hosts: the URL's
 * host equals an entry's host (ASCII case-insensitive) and its port is the
 * entry's (an entry without one: the URL has none, or 443).  prefixes: the URL
 * starts with an entry, byte for byte; the entries end in '/', so a prefix
 * never ends inside a host or a path segment.  On false, *why says why. */
bool cimd_policy_allows(const struct cimd_policy *p, const char *url, const char **why);
/* For [mcp] cimd_hosts and cimd_prefixes (config): true when the entry is valid. */
bool cimd_host_entry_valid(const char *entry);
bool cimd_prefix_entry_valid(const char *entry);

/* --- the fetch -------------------------------------------------------------- */
struct cimd_fetch_opts {
	bool        allow_loopback;  /* development only: loopback addresses allowed */
	const char *ca_file;         /* PEM CAs trusted for these fetches besides the system's */
	long        timeout_ms;      /* the whole fetch, name resolution included */
	long        connect_timeout_ms;
	size_t      max_bytes;       /* of the body; more is a refusal */
};
/* Fetches and checks the document at url (which must pass cimd_url_check):
 * 1. resolves the host itself (within the timeout) and refuses when ANY of
 *    its addresses is not PUBLIC (LOOPBACK allowed with allow_loopback);
 * 2. GETs it with the host pinned to those addresses (httpc_get_pinned: no
 *    redirects, TLS verified, Accept: application/json), within timeout_ms;
 * 3. wants 200, a JSON media type (application/json or application/...+json)
 *    and at most max_bytes, then cimd_doc_parse.
 * *max_age is the response's Cache-Control max-age (0 for no-store or
 * no-cache, -1 when it says none).  CS_OK, or an error with why naming the
 * failing step: CS_EINVAL (a refused URL, status, type or document), CS_EPERM
 * (a refused address), CS_EBUSY (timeout), CS_ETOOBIG, CS_EIO (transport). */
enum cs_err cimd_fetch(const struct cimd_fetch_opts *o, const char *url, struct cimd_doc *out,
    int64_t *max_age, char *why, size_t whylen) CS_MUST_CHECK;
/* Step 1's check alone, on a list of addresses (getaddrinfo's): CS_OK when
 * every one may be fetched from, CS_EPERM naming the first that may not,
 * CS_EIO when the list holds no IPv4 or IPv6 address. */
struct addrinfo;
enum cs_err cimd_addrs_allowed(const struct cimd_fetch_opts *o, const char *host,
    const struct addrinfo *res, char *why, size_t whylen) CS_MUST_CHECK;
/* The max-age of a Cache-Control value: 0 for no-store / no-cache, -1 when
 * absent or malformed, else the seconds (capped at INT32_MAX). */
int64_t cimd_cache_control_max_age(const char *value);

/* --- the cache ---------------------------------------------------------------
 * Documents by URL, thread-safe.  A document lives max-age seconds bounded to
 * [min_ttl, max_ttl] (default_ttl without a max-age); a failed fetch is
 * remembered for failure_ttl seconds (0: never) so that a slow or failing host
 * is asked at most once in that time; at most max_entries, the oldest evicted
 * first.  Calls for a URL whose fetch is under way wait for its outcome. */
struct cimd_cache_opts {
	size_t  max_entries;
	int64_t min_ttl, default_ttl, max_ttl, failure_ttl;   /* seconds */
};
struct cimd_cache;
enum cs_err cimd_cache_new(const struct cimd_cache_opts *o, struct cimd_cache **out) CS_MUST_CHECK;
void cimd_cache_free(struct cimd_cache *c);           /* NULL-safe */
/* CS_OK: a live document, copied to *out; CS_EINVAL: a remembered failure
 * (why says which); CS_ENOENT: nothing live for url at now. */
enum cs_err cimd_cache_get(struct cimd_cache *c, const char *url, int64_t now,
    struct cimd_doc *out, char *why, size_t whylen) CS_MUST_CHECK;
/* Stores a copy of doc (max_age as cimd_fetch gives it), or a failure. */
enum cs_err cimd_cache_put(struct cimd_cache *c, const char *url, const struct cimd_doc *doc,
    int64_t max_age, int64_t now) CS_MUST_CHECK;
enum cs_err cimd_cache_put_failure(struct cimd_cache *c, const char *url, const char *why,
    int64_t now) CS_MUST_CHECK;
size_t cimd_cache_count(struct cimd_cache *c);          /* entries held, live or not */

/* The whole way from a client_id to its checked document: the policy, the URL
 * check, the cache, else the fetch (one at a time per URL; its outcome goes
 * into the cache).  CS_EPERM when the policy refuses; otherwise as cimd_fetch
 * or cimd_cache_get.  why names the failing check. */
enum cs_err cimd_client(struct cimd_cache *c, const struct cimd_policy *p,
    const struct cimd_fetch_opts *o, const char *url, int64_t now, struct cimd_doc *out,
    char *why, size_t whylen) CS_MUST_CHECK;

#endif
