/* client_auth.h -- how the gateway authenticates at /token, /introspect,
 * /revoke, /proxy and /metrics: client_secret_basic (RFC 6749 §2.3.1) and
 * private_key_jwt (RFC 7523 §2.2 and §3, OpenID Connect Core §9), each only
 * when [gateway] token_endpoint_auth enables it. */
#ifndef CS_CLIENT_AUTH_H
#define CS_CLIENT_AUTH_H

#include <stdbool.h>
#include <stdint.h>
#include "config.h"
#include "cs_err.h"
#include "jws.h"

struct app;

#define CLIENT_ASSERTION_TYPE "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
/* The longest an assertion may be valid ahead: its exp at most this far from now. */
#define CLIENT_ASSERTION_MAX_AHEAD 300
/* Where /proxy and /metrics (no form body of ours) take the assertion from. */
#define CLIENT_ASSERTION_HEADER "Consentd-Client-Assertion"
#define CLIENT_ASSERTION_JTI_MAX 256

struct client_assertion_expect {
	const struct jws_keyset *keys;      /* the gateway's public keys */
	const char *client_id;              /* iss and sub */
	const char *const *audiences;       /* aud must contain one of these */
	size_t naudiences;
	int64_t now, clock_skew;
};

/* Checks a client assertion without touching the database: a compact JWS from
 * jws_parse (ES256, PS256, EdDSA or Ed25519 only) signed by a key of e->keys (the
 * one the header's kid names; a kid is required when the set holds more than
 * one key); iss == sub == client_id; aud one of e->audiences, as a string or
 * an array of that one value (an array with more is refused); exp present, not past (clock_skew allowed) and at most
 * CLIENT_ASSERTION_MAX_AHEAD ahead; nbf and iat, when present, not ahead of
 * now + clock_skew; jti a string of 1 to CLIENT_ASSERTION_JTI_MAX characters.
 * CS_EINVAL with why (no secret in it) when anything fails; on CS_OK *jti
 * (malloc'd) and *exp are written. */
enum cs_err client_assertion_check(const char *compact, const struct client_assertion_expect *e,
    char **jti, int64_t *exp, char *why, size_t whylen) CS_MUST_CHECK;


/* A request as client authentication sees it (client_auth_api.c fills it
 * from the HTTP request): plain values only, NULL for what is absent. */
struct client_auth_request {
	const char *authorization;     /* the Authorization header */
	const char *assertion_header;  /* the CLIENT_ASSERTION_HEADER header */
	const char *assertion_type;    /* the form's client_assertion_type, */
	const char *assertion;         /* client_assertion */
	const char *client_id;         /* and client_id */
	const char *remote_ip;         /* the client's address, as text */
	const char *path;              /* the endpoint, for the audit */
	int64_t     now;
};

enum client_auth_outcome {
	CLIENT_AUTH_OK = 0,            /* the gateway, authenticated */
	CLIENT_AUTH_LIMITED,           /* the address used up [limits] auth_failure_burst */
	CLIENT_AUTH_REFUSED,           /* refused: 401 invalid_client */
	CLIENT_AUTH__MAX
};

struct client_auth_result {
	enum client_auth_outcome outcome;
	int64_t retry_after;           /* LIMITED: seconds until the bucket allows one more */
	char    description[200];      /* REFUSED: the error_description ("" when it did not fit) */
	bool    basic_challenge;       /* REFUSED: answer WWW-Authenticate: Basic (Basic is on) */
};

/* Authenticates the gateway by the methods enabled: Basic credentials, or a
 * client assertion (client_assertion_type and client_assertion, or the
 * CLIENT_ASSERTION_HEADER header) whose audience is consentd's issuer
 * (public_url) or its token endpoint, and whose jti has not been used before
 * (the database's replay cache, kept until exp).  More than one method in one
 * request is refused (RFC 6749 §2.3).  LIMITED when rq's address used up
 * [limits] auth_failure_burst: that is checked first, before any signature,
 * hash or database work.  REFUSED with the description saying why (but for a
 * wrong Basic credential).  Every refusal spends a token of that bucket and
 * is counted (auth_refusal.h); a refused assertion is audited as
 * gateway.auth.refused at most once per address and interval, in a
 * transaction of its own (audit_append_alone; the path left out when too
 * long, audit_refusal_detail); a method that is not enabled never is. */
void client_auth_gateway(struct app *app, const struct client_auth_request *rq,
    struct client_auth_result *out);

/* Base64 bytes of a Basic credential consentd reads; longer is refused. */
#define BASIC_CREDENTIALS_MAX 2048
/* A Basic credential, decoded on the caller's stack: id and secret point into
 * buf.  Wipe it with basic_credentials_clear. */
struct basic_credentials {
	char        buf[BASIC_CREDENTIALS_MAX / 4 * 3 + 1];
	const char *id, *secret;
};
/* Parses "Basic base64(urlencode(id):urlencode(secret))" (RFC 6749 §2.3.1)
 * into *out; false when it is not one (then out->id and out->secret are NULL
 * and nothing decoded is left in buf). */
bool basic_credentials(const char *hdr, struct basic_credentials *out);
void basic_credentials_clear(struct basic_credentials *c);   /* wipes; NULL-safe */

#endif
