/* dpop_api.c -- DPoP at the gateway's endpoints: reads the proof, the
 * method and the path of a request into dpop.h's plain dpop_request, and
 * answers a refusal (RFC 9449 §5, §7.1, §8).  dpop.c checks the proof and
 * audits the refusal; this file must never decide one itself. */
#include <string.h>
#include "app.h"
#include "buf.h"
#include "dpop_api.h"

/* The algorithms a proof may use, as the challenge names them. */
#define DPOP_CHALLENGE_ALGS "ES256 PS256 EdDSA Ed25519"

static struct dpop_request request_of(const struct http_request *req)
{
	return (struct dpop_request){ .method = http_method_name(req->method), .path = req->path,
		.proof = req->header ? req->header(req->hctx, DPOP_HEADER) : NULL,
		.actor = req->auth.actor, .now = req->now };
}

/* The DPoP-Nonce header on a reply (when nonces are on). */
static enum cs_err reply_nonce(const struct http_request *req, struct http_reply *rep)
{
	char nonce[DPOP_NONCE_LEN + 1];
	enum cs_err e;
	if (!req->app->cfg->gateway_dpop_nonce)
		return CS_OK;
	if ((e = dpop_nonce_make(req->app->dpop_nonce_key, req->now, nonce)) != CS_OK)
		return e;
	return reply_header(rep, DPOP_NONCE_HEADER, nonce);
}

enum cs_err dpop_api_challenge(struct http_reply *rep, const char *error)
{
	char chal[160];
	enum cs_err e = error != NULL ?
	    str_fmt(chal, sizeof chal, "DPoP error=\"%s\", algs=\"" DPOP_CHALLENGE_ALGS "\"", error) :
	    str_fmt(chal, sizeof chal, "DPoP algs=\"" DPOP_CHALLENGE_ALGS "\"");
	return e == CS_OK ? reply_header(rep, "WWW-Authenticate", chal) : e;
}

/* Answers a refusal dpop.c made (and audited): the RFC's error, the nonce to
 * use, and for a resource (401) the DPoP challenge of RFC 9449 §7.1. */
static void refuse(const struct http_request *req, struct http_reply *rep, int status,
    enum dpop_verdict v, const char *why)
{
	const char *err = v == DPOP_NEED_NONCE ? "use_dpop_nonce" : "invalid_dpop_proof";
	enum cs_err e;
	/* The two codes spelled at their calls: tests/integration/openapi.test.js
	 * holds docs/errors.md to the codes reply_oauth_error is given. */
	if (v == DPOP_NEED_NONCE)
		e = reply_oauth_error(rep, status, "use_dpop_nonce", why);
	else
		e = reply_oauth_error(rep, status, "invalid_dpop_proof", why);
	if (e != CS_OK || reply_nonce(req, rep) != CS_OK) {
		rep->status = status;
		return;
	}
	if (status == 401 && dpop_api_challenge(rep, err) != CS_OK)
		rep->status = status;
}

bool dpop_api_at_token(const struct http_request *req, struct http_reply *rep,
    char jkt[JWS_JKT_LEN + 1])
{
	struct dpop_request rq = request_of(req);
	char why[DPOP_WHY_MAX];
	enum dpop_verdict v = dpop_at_token(req->app, &rq, jkt, why, sizeof why);
	if (v == DPOP_VALID)
		return true;
	refuse(req, rep, 400, v, why);
	return false;
}

bool dpop_api_check_grant(const struct http_request *req, struct http_reply *rep,
    const json_t *claims, const char *grant, int status)
{
	struct dpop_request rq = request_of(req);
	char why[DPOP_WHY_MAX];
	enum dpop_verdict v = dpop_check_grant(req->app, &rq, claims, grant, why, sizeof why);
	if (v == DPOP_VALID)
		return true;
	refuse(req, rep, status, v, why);
	return false;
}

void dpop_api_refuse(const struct http_request *req, struct http_reply *rep, int status,
    const char *why)
{
	struct dpop_request rq = request_of(req);
	dpop_refused(req->app, &rq, why);
	refuse(req, rep, status, DPOP_INVALID, why);
}
