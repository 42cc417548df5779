/* httpc.h -- consentd's outbound HTTP client (libcurl): discovery, JWKS, token
 * endpoints.  Always with timeouts, a response size cap, TLS verification on,
 * no redirects followed, and plain http only to loopback hosts. */
#ifndef CS_HTTPC_H
#define CS_HTTPC_H

#include <stddef.h>
#include "buf.h"
#include "cs_err.h"

#define HTTPC_MAX_RESPONSE (1u << 20)

struct httpc_response {          /* caller-owned; release with httpc_response_clear() */
	long        status;
	struct buf  body;            /* NUL-terminated */
	char       *content_type;    /* NULL when absent */
};

/* 1 when url is https, or http to 127.0.0.1, [::1] or localhost. */
int httpc_url_allowed(const char *url);

/* GET url with Accept: application/json.  CS_EINVAL for a URL that is not
 * allowed, CS_EIO for a transport failure or timeout, CS_ETOOBIG past the cap.
 * Non-2xx statuses are not errors: look at res->status. */
enum cs_err httpc_get(const char *url, struct httpc_response *res) CS_MUST_CHECK;
/* POST a form body (application/x-www-form-urlencoded).  basic_user and
 * basic_pass, when non-NULL, are sent as client_secret_basic (each
 * form-urlencoded before Base64, RFC 6749 §2.3.1). */
enum cs_err httpc_post_form(const char *url, const char *body, const char *basic_user,
    const char *basic_pass, struct httpc_response *res) CS_MUST_CHECK;
/* POST body_len bytes of body with Content-Type: content_type (a bare media
 * type such as "application/secevent+jwt": no parameters, no spaces; CS_EINVAL
 * otherwise) and Accept: application/json.  Same rules and errors as
 * httpc_get; look at res->status. */
enum cs_err httpc_post(const char *url, const char *content_type, const char *body,
    size_t body_len, struct httpc_response *res) CS_MUST_CHECK;
void httpc_response_clear(struct httpc_response *res);   /* NULL-safe; wipes the body */

/* Call once at start (curl_global_init) before threads exist. */
enum cs_err httpc_global_init(void) CS_MUST_CHECK;

#endif
