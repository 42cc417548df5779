/* authorize.h -- the rules of consentd's OAuth 2.1 authorization endpoint
 * (draft-ietf-oauth-v2-1 §4.1, as MCP 2026-07-28 /basic/authorization uses
 * it; issue #30), without HTTP: which request is refused to the person's face
 * and which back at the client, the redirect URI match (exact, and any port
 * on a loopback redirect, RFC 8252 §7.3), PKCE S256 alone (RFC 7636), the
 * resource indicator (RFC 8707), and the response URL with RFC 9207's iss.
 * Pure functions: the caller looks the client and resources up. */
#ifndef CS_AUTHORIZE_H
#define CS_AUTHORIZE_H

#include <stdbool.h>
#include <stddef.h>
#include "cs_err.h"

struct buf;

#define AUTHZ_STATE_MAX     1024     /* bytes of state the client may send (and get back) */
#define AUTHZ_URI_MAX       1024     /* bytes of a redirect_uri or resource */
#define AUTHZ_WHY_MAX       200      /* a refusal's description */
/* A PKCE S256 challenge is base64url(SHA-256): 43 characters.  A verifier is
 * 43 to 128 unreserved characters (RFC 7636 §4.1). */
#define AUTHZ_CHALLENGE_LEN 43
#define AUTHZ_VERIFIER_MIN  43
#define AUTHZ_VERIFIER_MAX  128

/* What consentd knows of the client that asks: its registration (configured,
 * or its Client ID Metadata Document). */
struct authz_client {
	const char        *client_id;
	const char *const *redirect_uris;    /* as registered */
	size_t             nredirect_uris;
};

/* The request's parameters as the browser sent them (NULL: absent).  The
 * router already bounded their lengths and refused repeated ones. */
struct authz_request {
	const char *response_type, *client_id, *redirect_uri, *state;
	const char *code_challenge, *code_challenge_method;
	const char *scope, *resource, *response_mode;
	/* Request objects and PAR (RFC 9101, 9126) are not offered: either one
	 * present is refused back at the client. */
	const char *request, *request_uri;
};

/* Who hears a refusal.  RFC 6749 §4.1.2.1: until the client and its
 * redirect URI are known good, the person sees an error page and the browser
 * goes nowhere (an open redirector otherwise); after that, the error goes
 * back to the client at its redirect URI, with state and iss. */
enum authz_outcome {
	AUTHZ_OK = 0,            /* a valid request: go on to sign-in and consent */
	AUTHZ_TO_PERSON,         /* an error page (client_id or redirect_uri) */
	AUTHZ_TO_CLIENT,         /* an error at the redirect URI */
	AUTHZ__MAX
};

struct authz_verdict {
	enum authz_outcome outcome;
	/* The redirect URI the answer goes to, validated (the request's, or the
	 * only one registered when the request named none); NULL for
	 * AUTHZ_TO_PERSON.  Points into the request or the client. */
	const char *redirect_uri;
	const char *error;                 /* RFC 6749 code; NULL on AUTHZ_OK */
	char        why[AUTHZ_WHY_MAX];    /* error_description naming the failing check */
};

/* True when presented matches registered: byte for byte, or both http on
 * the same loopback host (127.0.0.1, [::1], localhost) whose port alone
 * differs, or is absent on either side (RFC 8252 §7.3: a native client gets
 * whatever port is free).  Path, query and the host's spelling must match
 * exactly; https never matches on anything but the whole string. */
bool authz_redirect_matches(const char *registered, const char *presented);

/* Checks req against client (NULL: a client_id consentd does not know, or
 * may not let in) and the resources it serves (resources: NULL-terminated
 * absolute URIs; the request's resource must equal one, byte for byte).
 * Always fills *v.  In this order: client_id, redirect_uri (both to the
 * person), then response_type, response_mode, request objects, PKCE, state,
 * resource (to the client). */
void authz_check(const struct authz_client *client, const char *const *resources,
    const struct authz_request *req, struct authz_verdict *v);

/* The authorization response (code != NULL) or error response (error !=
 * NULL; description may be NULL) at redirect_uri, appended to out: its own
 * query kept, then code or error and error_description, state when the
 * request had one, and iss = issuer (RFC 9207), each percent-encoded. */
enum cs_err authz_response_url(struct buf *out, const char *redirect_uri, const char *code,
    const char *error, const char *description, const char *state, const char *issuer)
    CS_MUST_CHECK;

/* Whether s is a state authz_check accepts (1 to AUTHZ_STATE_MAX printable
 * ASCII characters, no space): only such a state goes back to the client. */
bool authz_state_valid(const char *s);

/* RFC 7636 §4.6: true when verifier is 43-128 unreserved characters whose
 * S256 is challenge (compared in constant time). */
bool authz_pkce_verify(const char *verifier, const char *challenge);

#endif
