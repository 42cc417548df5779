/* idjag.c -- an Identity Assertion JWT Authorization Grant's claims
 * (idjag.h).  Every refusal names the claim and the check. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <jansson.h>
#include "buf.h"
#include "idjag.h"

void idjag_clear(struct idjag *g)
{
	if (g == NULL)
		return;
	free(g->iss); free(g->sub); free(g->client_id); free(g->jti);
	free(g->resource); free(g->scope);
	memset(g, 0, sizeof *g);
}

static enum cs_err refuse(char *why, size_t whylen, const char *msg)
{
	if (str_fmt(why, whylen, "%s", msg) != CS_OK && whylen > 0)
		why[0] = '\0';
	return CS_EINVAL;
}

/* The refusals that name a claim. */
enum claim_fault { NO_CLAIM, NOT_STRING, NOT_TIME };

static enum cs_err refuse_claim(char *why, size_t whylen, enum claim_fault f, const char *name)
{
	enum cs_err e;
	switch (f) {
	case NO_CLAIM:   e = str_fmt(why, whylen, "the grant has no %s claim", name); break;
	case NOT_STRING: e = str_fmt(why, whylen, "the grant's %s claim is not a valid string", name); break;
	default:         e = str_fmt(why, whylen, "the grant's %s claim is not a time in whole seconds",
	                     name); break;
	}
	if (e != CS_OK && whylen > 0)
		why[0] = '\0';
	return CS_EINVAL;
}

static bool text_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > IDJAG_CLAIM_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

/* A required (or optional) string claim into *dst (a copy). */
static enum cs_err claim_str(json_t *o, const char *name, bool required, char **dst, char *why,
    size_t whylen)
{
	json_t *v = json_object_get(o, name);
	if (v == NULL) {
		if (required)
			return refuse_claim(why, whylen, NO_CLAIM, name);
		return CS_OK;
	}
	if (!json_is_string(v) || json_string_length(v) != strlen(json_string_value(v)) ||
	    !text_ok(json_string_value(v)))
		return refuse_claim(why, whylen, NOT_STRING, name);
	if ((*dst = strdup(json_string_value(v))) == NULL)
		return CS_ENOMEM;
	return CS_OK;
}

static enum cs_err claim_time(json_t *o, const char *name, int64_t *dst, char *why, size_t whylen)
{
	json_t *v = json_object_get(o, name);
	if (v == NULL)
		return refuse_claim(why, whylen, NO_CLAIM, name);
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return refuse_claim(why, whylen, NOT_TIME, name);
	*dst = (int64_t)json_integer_value(v);
	return CS_OK;
}

static bool typ_ok(const char *typ)
{
	if (strncasecmp(typ, "application/", 12) == 0)
		typ += 12;
	return strcasecmp(typ, IDJAG_TYP) == 0;
}

static bool aud_ok(json_t *aud, const char *want)
{
	if (json_is_string(aud))
		return strcmp(json_string_value(aud), want) == 0;
	return json_is_array(aud) && json_array_size(aud) == 1 &&
	    json_is_string(json_array_get(aud, 0)) &&
	    strcmp(json_string_value(json_array_get(aud, 0)), want) == 0;
}

static enum cs_err check_payload(json_t *p, const struct idjag_expect *x, struct idjag *g,
    char *why, size_t whylen)
{
	enum cs_err e;
	if ((e = claim_str(p, "iss", true, &g->iss, why, whylen)) != CS_OK ||
	    (e = claim_str(p, "sub", true, &g->sub, why, whylen)) != CS_OK ||
	    (e = claim_str(p, "client_id", true, &g->client_id, why, whylen)) != CS_OK ||
	    (e = claim_str(p, "jti", true, &g->jti, why, whylen)) != CS_OK ||
	    (e = claim_str(p, "resource", false, &g->resource, why, whylen)) != CS_OK ||
	    (e = claim_str(p, "scope", false, &g->scope, why, whylen)) != CS_OK ||
	    (e = claim_time(p, "iat", &g->iat, why, whylen)) != CS_OK ||
	    (e = claim_time(p, "exp", &g->exp, why, whylen)) != CS_OK)
		return e;
	/* SECURITY: who issued it, for whom, and for which client -- each
	 * exactly, so that a grant for another AS or client is worthless here. */
	if (x->issuer == NULL || strcmp(g->iss, x->issuer) != 0)
		return refuse(why, whylen, "the grant's iss is not the configured identity provider");
	json_t *aud = json_object_get(p, "aud");
	if (aud == NULL)
		return refuse_claim(why, whylen, NO_CLAIM, "aud");
	if (x->audience == NULL || !aud_ok(aud, x->audience))
		return refuse(why, whylen, "the grant's aud is not this authorization server");
	if (x->client_id == NULL || strcmp(g->client_id, x->client_id) != 0)
		return refuse(why, whylen, "the grant's client_id is not the authenticated client");
	if (g->exp <= g->iat)
		return refuse(why, whylen, "the grant's exp is not after its iat");
	if (g->exp - g->iat > IDJAG_MAX_LIFETIME)
		return refuse(why, whylen, "the grant lives longer than 300 seconds");
	if (g->iat > x->now + IDJAG_LEEWAY)
		return refuse(why, whylen, "the grant's iat is in the future");
	if (g->exp <= x->now - IDJAG_LEEWAY)
		return refuse(why, whylen, "the grant has expired");
	if (g->resource != NULL) {
		bool known = false;
		for (const char *const *r = x->resources; r != NULL && *r != NULL && !known; r++)
			known = strcmp(*r, g->resource) == 0;
		if (!known)
			return refuse(why, whylen,
			    "the grant's resource names no resource this server protects");
	}
	return CS_OK;
}

enum cs_err idjag_check(const char *header, size_t header_len, const char *payload,
    size_t payload_len, const struct idjag_expect *x, struct idjag *out, char *why,
    size_t whylen)
{
	json_error_t jerr;
	struct idjag g;
	enum cs_err e;
	memset(&g, 0, sizeof g);
	json_t *h = json_loadb(header, header_len, JSON_REJECT_DUPLICATES, &jerr);
	if (h == NULL || !json_is_object(h)) {
		json_decref(h);
		return refuse(why, whylen, "the grant's header is not a JSON object");
	}
	json_t *typ = json_object_get(h, "typ");
	bool typ_good = json_is_string(typ) && typ_ok(json_string_value(typ));
	json_decref(h);
	if (!typ_good)
		return refuse(why, whylen, "the grant's typ is not " IDJAG_TYP);
	json_t *p = json_loadb(payload, payload_len, JSON_REJECT_DUPLICATES, &jerr);
	if (p == NULL || !json_is_object(p)) {
		json_decref(p);
		return refuse(why, whylen, "the grant's payload is not a JSON object");
	}
	e = check_payload(p, x, &g, why, whylen);
	json_decref(p);
	if (e != CS_OK) {
		idjag_clear(&g);
		return e;
	}
	*out = g;
	return CS_OK;
}
