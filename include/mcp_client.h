/* mcp_client.h -- who an MCP client is (issue #30): the one lookup from a
 * client_id to its registration, whether the operator registered it
 * ([client.NAME]) or it arrives with a client-id URL whose metadata document
 * is fetched under the [mcp] policy (cimd.h).  /authorize and /token both ask
 * here, so a client is the same client on both legs. */
#ifndef CS_MCP_CLIENT_H
#define CS_MCP_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include "cimd.h"
#include "config.h"
#include "cs_err.h"

struct app;

/* A client's registration.  For a [client.NAME] client the strings point into
 * the configuration; for a client-id URL into doc, which the view owns. */
struct mcp_client {              /* release with mcp_client_clear() */
	bool        by_url;              /* a client-id URL (a metadata document) */
	const char *client_id;
	const char *name;                /* the operator's name, the document's client_name,
	                                    or NULL (none given: show host) */
	bool        self_named;          /* name was chosen by the client (its document) */
	char        host[256];           /* by_url: the client-id URL's host; else "" */
	const char *const *redirect_uris;
	size_t      nredirect_uris;
	bool        private_key_jwt;     /* else public (none) */
	const char *jwks;                /* private_key_jwt: a JWK Set as JSON, or NULL */
	const char *jwks_uri;            /* private_key_jwt: or where it is, or NULL */
	bool        refresh;             /* may use refresh tokens */
	struct cimd_doc doc;             /* by_url: the document (owned) */
};
void mcp_client_clear(struct mcp_client *k);     /* NULL-safe */

/* The client whose client_id is client_id, into *out (written only on CS_OK):
 * a [client.NAME] by its client_id, else a client-id URL through the [mcp]
 * policy, the URL check, the cache and the fetch (cimd_client).  CS_ENOENT:
 * not an https URL and no [client.NAME] has it; CS_EPERM: the policy refuses
 * it; CS_EINVAL / CS_EIO / CS_ETOOBIG / CS_EBUSY: the URL, its fetch or its
 * document failed; why (CIMD_WHY_MAX bytes) names the failing check in every
 * refusal, for an error page or an error_description. */
enum cs_err mcp_client_lookup(struct app *app, const char *client_id, int64_t now,
    struct mcp_client *out, char *why, size_t whylen) CS_MUST_CHECK;

/* The [mcp] fetch options and policy as cimd.h takes them. */
struct cimd_fetch_opts mcp_client_fetch_opts(const struct config *cfg);
struct cimd_policy mcp_client_policy(const struct config *cfg);

#endif
