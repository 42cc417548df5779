/* mcp_state.c -- the gateway's sealed requestState (mcp_state.h): a small
 * JSON object sealed with AES-256-GCM (seal.h) and base64url-encoded.  It
 * must never trust a field of a state that did not open, and never answer a
 * state that opened for someone or something else. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "b64.h"
#include "buf.h"
#include "mcp_state.h"

/* Bound into the seal: a blob sealed for another use never opens here. */
static const char AAD[] = "consentd mcp request state v1";
static const char *const kinds[MCP_ASK__MAX] = { [MCP_ASK_CONSENT] = "consent",
	[MCP_ASK_APPROVAL] = "approval" };

void mcp_state_clear(struct mcp_state *s)
{
	if (s == NULL)
		return;
	json_decref(s->own);
	memset(s, 0, sizeof *s);
}

enum cs_err mcp_state_seal(const struct master_key *mk, const struct mcp_state *s, char **out)
{
	json_t *v;
	char *pt = NULL;
	unsigned char *blob = NULL;
	size_t blen = 0;
	struct buf b;
	enum cs_err e;
	if (mk == NULL || s == NULL || out == NULL || s->client_id == NULL || s->endpoint == NULL ||
	    s->tool == NULL || s->digest == NULL || s->pending == NULL || s->kind <= MCP_ASK_NONE ||
	    s->kind >= MCP_ASK__MAX)
		return CS_EINVAL;
	v = json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:s, s:I}", "u", (json_int_t)s->user_id,
	    "c", s->client_id, "e", s->endpoint, "t", s->tool, "d", s->digest, "k", kinds[s->kind],
	    "p", s->pending, "x", (json_int_t)s->expires_at);
	if (v == NULL)
		return CS_ENOMEM;
	pt = json_dumps(v, JSON_COMPACT);
	json_decref(v);
	if (pt == NULL)
		return CS_ENOMEM;
	e = seal(mk, MCP_STATE_PURPOSE, AAD, sizeof AAD - 1, pt, strlen(pt), &blob, &blen);
	free(pt);
	if (e != CS_OK)
		return e;
	buf_init(&b, MCP_STATE_MAX + 1);
	e = b64url_append(&b, blob, blen);
	free(blob);
	if (e == CS_ETOOBIG)
		e = CS_EINVAL;
	if (e == CS_OK && (*out = buf_steal(&b)) == NULL)
		e = CS_ENOMEM;
	buf_clear(&b);
	return e;
}

static bool same(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

enum cs_err mcp_state_open(const struct master_key *mk, const char *text,
    const struct mcp_state *want, int64_t now, struct mcp_state *out,
    enum mcp_state_verdict *verdict)
{
	unsigned char *blob = NULL, *pt = NULL;
	size_t blen = 0, plen = 0, n = text != NULL ? strlen(text) : 0;
	json_t *v = NULL;
	json_int_t u = 0, x = 0;
	const char *c = NULL, *ep = NULL, *t = NULL, *d = NULL, *k = NULL, *p = NULL;
	struct mcp_state s;
	enum cs_err e;
	*verdict = MCP_STATE_BROKEN;
	if (mk == NULL || want == NULL || out == NULL)
		return CS_EINVAL;
	if (n == 0 || n > MCP_STATE_MAX || !b64url_valid(text, n))
		return CS_OK;
	/* SECURITY: one spelling per state: a text whose last character's unused
	 * bits are not 0 is refused, not read as its canonical twin. */
	if ((blob = malloc(B64URL_DECODED_MAX(n) + 1)) == NULL)
		return CS_ENOMEM;
	if (b64url_decode_canonical(text, n, blob, B64URL_DECODED_MAX(n), &blen) != CS_OK) {
		free(blob);
		return CS_OK;
	}
	/* SECURITY: nothing of the state is read before it opens. */
	e = unseal(mk, MCP_STATE_PURPOSE, AAD, sizeof AAD - 1, blob, blen, &pt, &plen);
	free(blob);
	if (e != CS_OK)
		return e == CS_ENOMEM ? e : CS_OK;
	v = json_loadb((const char *)pt, plen, JSON_REJECT_DUPLICATES, NULL);
	OPENSSL_cleanse(pt, plen);
	free(pt);
	if (v == NULL || json_unpack(v, "{s:I, s:s, s:s, s:s, s:s, s:s, s:s, s:I !}", "u", &u,
	    "c", &c, "e", &ep, "t", &t, "d", &d, "k", &k, "p", &p, "x", &x) != 0)
		goto out;
	memset(&s, 0, sizeof s);
	s.kind = same(k, kinds[MCP_ASK_CONSENT]) ? MCP_ASK_CONSENT :
	    same(k, kinds[MCP_ASK_APPROVAL]) ? MCP_ASK_APPROVAL : MCP_ASK_NONE;
	if (s.kind == MCP_ASK_NONE)
		goto out;
	if (x <= now)
		*verdict = MCP_STATE_EXPIRED;
	else if (u != want->user_id)
		*verdict = MCP_STATE_OTHER_PERSON;
	else if (!same(c, want->client_id))
		*verdict = MCP_STATE_OTHER_CLIENT;
	else if (!same(ep, want->endpoint))
		*verdict = MCP_STATE_OTHER_ENDPOINT;
	else if (!same(t, want->tool))
		*verdict = MCP_STATE_OTHER_TOOL;
	else if (!same(d, want->digest))
		*verdict = MCP_STATE_OTHER_ARGUMENTS;
	else
		*verdict = MCP_STATE_OK;
	if (*verdict != MCP_STATE_OK)
		goto out;
	s.user_id = (int64_t)u;
	s.client_id = c;
	s.endpoint = ep;
	s.tool = t;
	s.digest = d;
	s.pending = p;
	s.expires_at = (int64_t)x;
	s.own = v;
	v = NULL;
	*out = s;
out:
	json_decref(v);
	return CS_OK;
}

const char *mcp_state_verdict_text(enum mcp_state_verdict v)
{
	static const char *const t[MCP_STATE_VERDICT__MAX] = {
		[MCP_STATE_OK] = "the requestState is good",
		[MCP_STATE_BROKEN] = "the requestState is not one this gateway issued (altered or "
		    "made up)",
		[MCP_STATE_EXPIRED] = "the requestState has expired: call again without it",
		[MCP_STATE_OTHER_PERSON] = "the requestState was issued to another person",
		[MCP_STATE_OTHER_CLIENT] = "the requestState was issued to another client",
		[MCP_STATE_OTHER_ENDPOINT] = "the requestState was issued for another MCP endpoint",
		[MCP_STATE_OTHER_TOOL] = "the requestState was issued for another tool",
		[MCP_STATE_OTHER_ARGUMENTS] = "the requestState was issued for other arguments",
	};
	return v < MCP_STATE_VERDICT__MAX && t[v] != NULL ? t[v] : "the requestState is refused";
}
