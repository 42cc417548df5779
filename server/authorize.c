/* authorize.c -- the OAuth 2.1 authorization endpoint's rules (authorize.h):
 * the redirect URI match, the order of the checks and who hears a refusal,
 * PKCE S256, and the response URL with iss.  No HTTP, no store. */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <openssl/crypto.h>
#include "authorize.h"
#include "b64.h"
#include "buf.h"
#include "form.h"
#include "login.h"

/* --- the redirect URI ------------------------------------------------------ */

/* A loopback http URI cut into its host (as written, brackets kept) and
 * what follows its port (the path, query and fragment); false for anything
 * else, or a port that is not 1-65535 in at most five digits. */
struct loopback {
	const char *host, *rest;
	size_t      hostlen;
};

static bool loopback_split(const char *u, struct loopback *lb)
{
	static const char *const hosts[] = { "127.0.0.1", "[::1]", "localhost", NULL };
	if (strncmp(u, "http://", 7) != 0)
		return false;
	u += 7;
	for (const char *const *h = hosts; *h != NULL; h++) {
		size_t n = strlen(*h);
		if (strncmp(u, *h, n) != 0 || (u[n] != ':' && u[n] != '/' && u[n] != '\0'))
			continue;
		lb->host = u;
		lb->hostlen = n;
		const char *p = u + n;
		if (*p == ':') {
			unsigned long port = 0;
			size_t digits = 0;
			for (p++; *p >= '0' && *p <= '9'; p++, digits++)
				port = port * 10 + (unsigned long)(*p - '0');
			if (digits == 0 || digits > 5 || port == 0 || port > 65535)
				return false;
		}
		if (*p != '/' && *p != '\0')
			return false;
		lb->rest = p;
		return true;
	}
	return false;
}

bool authz_redirect_matches(const char *registered, const char *presented)
{
	struct loopback a, b;
	if (registered == NULL || presented == NULL)
		return false;
	if (strcmp(registered, presented) == 0)
		return true;
	/* SECURITY: the port alone may differ, and only on loopback http: the
	 * host must be spelled the same (127.0.0.1 is not localhost), and the
	 * path and query are compared whole. */
	return loopback_split(registered, &a) && loopback_split(presented, &b) &&
	    a.hostlen == b.hostlen && memcmp(a.host, b.host, a.hostlen) == 0 &&
	    strcmp(a.rest, b.rest) == 0;
}

/* --- the request ------------------------------------------------------------ */

static void verdict(struct authz_verdict *v, enum authz_outcome o, const char *error,
    const char *why)
{
	v->outcome = o;
	v->error = error;
	/* The descriptions are consentd's own words (never the request's), and
	 * each fits AUTHZ_WHY_MAX. */
	if (str_fmt(v->why, sizeof v->why, "%s", why) != CS_OK)
		v->why[0] = '\0';
	if (o == AUTHZ_TO_PERSON)
		v->redirect_uri = NULL;
}

static bool unreserved(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	    c == '-' || c == '.' || c == '_' || c == '~';
}

/* Exactly want base64url characters (no padding). */
static bool challenge_text(const char *s, size_t want)
{
	return strlen(s) == want && b64url_valid(s, want);
}

/* Printable ASCII without space (RFC 6749 Appendix A.5 allows VSCHAR, 0x20
 * to 0x7e; a space would only ever be an encoding mistake here). */
bool authz_state_valid(const char *s)
{
	size_t n = 0;
	for (; s[n] != '\0'; n++)
		if ((unsigned char)s[n] < 0x21 || (unsigned char)s[n] > 0x7e)
			return false;
	return n > 0 && n <= AUTHZ_STATE_MAX;
}

/* Which registered redirect URI the request may use, or false (with why). */
static bool redirect_pick(const struct authz_client *c, const char *presented, const char **use,
    const char **why)
{
	if (presented == NULL) {
		/* OAuth 2.1 §4.1.1: optional only when exactly one is registered,
		 * and then only when it names one URI (a loopback redirect
		 * needs the port the client is listening on). */
		struct loopback lb;
		if (c->nredirect_uris != 1) {
			*why = "redirect_uri is required: the client registered more than one";
			return false;
		}
		if (loopback_split(c->redirect_uris[0], &lb)) {
			*why = "redirect_uri is required for a loopback redirect (its port varies)";
			return false;
		}
		*use = c->redirect_uris[0];
		return true;
	}
	if (strlen(presented) > AUTHZ_URI_MAX || strchr(presented, '#') != NULL) {
		*why = "redirect_uri is not one this client registered";
		return false;
	}
	for (size_t i = 0; i < c->nredirect_uris; i++)
		if (authz_redirect_matches(c->redirect_uris[i], presented)) {
			*use = presented;
			return true;
		}
	*why = "redirect_uri is not one this client registered";
	return false;
}

/* To the person: nothing is sent to a URI not known to be the client's.
 * true with v->redirect_uri the client's; false with v's refusal. */
static bool client_known(const struct authz_client *client, const struct authz_request *req,
    struct authz_verdict *v)
{
	const char *why = NULL, *use = NULL;
	if (req->client_id == NULL || req->client_id[0] == '\0') {
		verdict(v, AUTHZ_TO_PERSON, "invalid_request", "client_id is missing");
		return false;
	}
	if (client == NULL || client->client_id == NULL ||
	    strcmp(client->client_id, req->client_id) != 0) {
		verdict(v, AUTHZ_TO_PERSON, "invalid_client", "client_id names no client that may sign in here");
		return false;
	}
	if (!redirect_pick(client, req->redirect_uri, &use, &why)) {
		verdict(v, AUTHZ_TO_PERSON, "invalid_request", why);
		return false;
	}
	v->redirect_uri = use;
	return true;
}

/* The response asked for: a code, in the query, with no request object. */
static bool response_supported(const struct authz_request *req, struct authz_verdict *v)
{
	if (req->response_type == NULL) {
		verdict(v, AUTHZ_TO_CLIENT, "invalid_request", "response_type is missing");
		return false;
	}
	if (strcmp(req->response_type, "code") != 0) {
		verdict(v, AUTHZ_TO_CLIENT, "unsupported_response_type",
		    "response_type must be code (the authorization code flow)");
		return false;
	}
	if (req->response_mode != NULL && strcmp(req->response_mode, "query") != 0) {
		verdict(v, AUTHZ_TO_CLIENT, "invalid_request", "response_mode must be query");
		return false;
	}
	if (req->request != NULL) {
		verdict(v, AUTHZ_TO_CLIENT, "request_not_supported", "request objects are not supported");
		return false;
	}
	if (req->request_uri != NULL) {
		verdict(v, AUTHZ_TO_CLIENT, "request_uri_not_supported",
		    "request_uri (pushed authorization requests) is not supported");
		return false;
	}
	return true;
}

/* SECURITY: PKCE S256 always, never plain (OAuth 2.1 §7.5.1; MCP: the
 * client must use S256). */
static bool pkce_s256(const struct authz_request *req, struct authz_verdict *v)
{
	if (req->code_challenge == NULL) {
		verdict(v, AUTHZ_TO_CLIENT, "invalid_request", "code_challenge is missing (PKCE S256 is required)");
		return false;
	}
	if (req->code_challenge_method == NULL) {
		verdict(v, AUTHZ_TO_CLIENT, "invalid_request",
		    "code_challenge_method is missing: it must be S256");
		return false;
	}
	if (strcmp(req->code_challenge_method, "S256") != 0) {
		verdict(v, AUTHZ_TO_CLIENT, "invalid_request", "code_challenge_method must be S256");
		return false;
	}
	if (!challenge_text(req->code_challenge, AUTHZ_CHALLENGE_LEN)) {
		verdict(v, AUTHZ_TO_CLIENT, "invalid_request",
		    "code_challenge must be 43 base64url characters (S256 of the verifier)");
		return false;
	}
	return true;
}

void authz_check(const struct authz_client *client, const char *const *resources,
    const struct authz_request *req, struct authz_verdict *v)
{
	memset(v, 0, sizeof *v);

	if (!client_known(client, req, v))
		return;
	/* To the client, at its redirect URI. */
	if (!response_supported(req, v) || !pkce_s256(req, v))
		return;
	if (req->state != NULL && !authz_state_valid(req->state)) {
		verdict(v, AUTHZ_TO_CLIENT, "invalid_request",
		    "state must be 1 to 1024 printable characters without spaces");
		return;
	}
	/* RFC 8707: the token is for one resource, which consentd must know. */
	if (req->resource == NULL) {
		verdict(v, AUTHZ_TO_CLIENT, "invalid_target", "resource is missing (RFC 8707 is required)");
		return;
	}
	bool known = false;
	for (const char *const *r = resources; r != NULL && *r != NULL && !known; r++)
		known = strcmp(*r, req->resource) == 0;
	if (!known) {
		verdict(v, AUTHZ_TO_CLIENT, "invalid_target", "resource names no resource this server protects");
		return;
	}
	v->outcome = AUTHZ_OK;
}

/* --- the answer ------------------------------------------------------------- */

enum cs_err authz_response_url(struct buf *out, const char *redirect_uri, const char *code,
    const char *error, const char *description, const char *state, const char *issuer)
{
	enum cs_err e;
	if (redirect_uri == NULL || issuer == NULL || (code == NULL) == (error == NULL) ||
	    strchr(redirect_uri, '#') != NULL)
		return CS_EINVAL;
	if ((e = buf_puts(out, redirect_uri)) != CS_OK)
		return e;
	if (code != NULL)
		e = form_url_param(out, "code", code);
	else {
		e = form_url_param(out, "error", error);
		if (e == CS_OK && description != NULL)
			e = form_url_param(out, "error_description", description);
	}
	if (e == CS_OK && state != NULL)
		e = form_url_param(out, "state", state);
	if (e == CS_OK)
		e = form_url_param(out, "iss", issuer);
	return e;
}

bool authz_pkce_verify(const char *verifier, const char *challenge)
{
	char want[LOGIN_PKCE_CHALLENGE_LEN + 1];
	size_t n = 0;
	if (verifier == NULL || challenge == NULL || strlen(challenge) != AUTHZ_CHALLENGE_LEN)
		return false;
	for (; verifier[n] != '\0'; n++)
		if (n >= AUTHZ_VERIFIER_MAX || !unreserved(verifier[n]))
			return false;
	if (n < AUTHZ_VERIFIER_MIN)
		return false;
	login_pkce_challenge(verifier, want);
	bool ok = CRYPTO_memcmp(want, challenge, AUTHZ_CHALLENGE_LEN) == 0;
	OPENSSL_cleanse(want, sizeof want);
	return ok;
}
