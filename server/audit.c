/* audit.c -- appends entries to the audit log inside the caller's transaction,
 * each numbered and chained to the one before by an HMAC keyed from the master
 * key; verifies, re-links (master-key rotation) and exports the chain.
 * It must never record a token, code, secret or cookie: entries that look like
 * they carry one are refused, so a mistake fails loudly instead of leaking.
 * It must never write an unchained entry: without a chain key, appends fail.
 *
 * Action names in use (add yours here when you add one):
 *   consent.request.created    flow A: a new pending consent request
 *   consent.request.merged     flow A: more scopes merged into the pending request
 *   consent.request.slow_down  flow A: the gateway polled faster than the interval
 *   consent.request.expired    flow A/B: a pending request found past its expiry
 *   consent.request.refused    flow A: too many pending requests for the person
 *   consent.request.approved   flow B: the person approved (consent_id = the new consent)
 *   consent.request.denied     flow B: the person denied
 *   consent.granted            flow B: a new consent went live
 *   consent.revoked            flow B (replaced) and G: a consent and its grants and
 *                              refresh tokens were revoked; detail = the reason
 *   consent.binding_refused    flow B: a request opened by another account (pages.c)
 *   consent.cooldown_lifted    the person let an agent ask again on /me (detail: denied
 *                              = a denied request, declined = unticked scopes)
 *   authz.code.issued          an MCP client's authorization code was issued (authz_flow.c;
 *                              agent = its client_id, consent_id, the granted scopes)
 *   grant.issued               flow C: a grant was signed (grant.c; detail "jti=...")
 *   grant.revoked              RFC 7009 at /revoke: a grant's jti was revoked
 *   refresh.issued             an offline consent's refresh family began (detail "family=...")
 *   refresh.used               a refresh token was used and rotated
 *   refresh.reuse_detected     a used refresh token came back: its family was revoked
 *   refresh.revoked            RFC 7009 at /revoke: a refresh family was revoked
 *   vault.connected            flow D: a provider authorization sealed for a new consent
 *   vault.connect.failed       flow D: bad_state, cancelled, too_much or failed
 *   vault.key_stored           an API key sealed for a consent (stored / replaced; never the key)
 *   vault.record.moved         flow B: a record re-sealed under the consent replacing its own
 *   vault.released             flow D: a provider access token went to the gateway (action=...)
 *   vault.release.refused      flow D/F: refused (escalation attempt, token_release = never, ...)
 *   vault.refreshed            flow D: the provider refreshed a record's tokens
 *   vault.reconnect_required   flow D: the provider said invalid_grant
 *   vault.revoked              flow G: outbox tokens revoked at the provider (ok / expired)
 *   vault.revoke_retry         flow G: the provider could not be reached; retried later
 *   approval.requested         flow F: a new approval request (action, params_digest)
 *   approval.slow_down         flow F: polled faster than the interval
 *   approval.expired           flow F: a request or an unredeemed approval timed out
 *   approval.refused           flow F: too many pending, or a redemption refused
 *   approval.approved          flow F: the person approved
 *   approval.denied            flow F: the person denied
 *   approval.denied_by_policy  an [action] policy.N line denied a call (issue #32;
 *                              detail: action, line, params_digest)
 *   approval.cooldown_lifted   the person let a denied action ask again on /me
 *   approval.cancelled         flow F: a decision arrived after the consent ended
 *   approval.released          flow F: the token went out once for this approval
 *   standing.created           issue #32: the person made a standing rule with an approval
 *                              (rule, kind, action, the fixed names, until, max_uses)
 *   standing.used              a release a standing rule approved (rule, action)
 *   standing.refused           a rule ended, expired or used up before its release
 *   standing.ended             the person or an admin ended a rule
 *   admin.api                  an admin token was used (detail: the token's name)
 *   admin.api.refused          a revoked or unknown admin token was presented
 *   admin.token.created        consentd admin token create
 *   admin.token.revoked        consentd admin token revoke
 *   admin.cli                  an admin command-line action
 *   admin.bulk_revoked         a bulk revocation by user, agent or resource (count)
 *   admin.page.refused         /admin refused a person (not an admin, or a stale login)
 *   master-key-rotated         consentd vault rekey (old and new key ids)
 *   event.delivered            a revocation event (SET) was accepted by the gateway (202)
 *   proxy.forwarded            flow H: a request let through upstream, committed with its
 *                              vault.released before it goes (action, method, route, approval)
 *   proxy.refused              flow H: refused before anything went upstream (no route, ...)
 *   master-key-rotated         flow G: `consentd vault rekey` (detail "old=<kid> new=<kid>")
 *   gateway.auth.refused       client assertions (private_key_jwt) from one address were
 *                              refused: at most one entry per address and 5 minutes
 *                              (auth_refusal.h; detail: the address, the last reason and
 *                              how many refusals it stands for)
 *   dpop.refused               a DPoP proof was missing or refused (detail: method, path, why)
 *   authz.code_reused          an MCP client's authorization code came back a second time:
 *                              the refresh family its first use issued was revoked, with
 *                              every token in it (mcp_token.c; detail "family=..." or "none")
 *   authzen.evaluated          the organisation's decision point was asked (authzen.c):
 *                              outcome permit, deny, ask or error; detail: action, digest,
 *                              decision and reason, or the failure and what on_error did
 */
#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "audit.h"
#include "buf.h"
#include "store_audit.h"
#include "log.h"

/* The list above as the admin audit page's filter offers it, sorted.  An
 * integration test (tests/integration/admin_pages.test.js) fails when an
 * action written in server/ is missing here. */
const char *const audit_actions[] = {
	"admin.api", "admin.api.refused", "admin.bulk_revoked", "admin.cli",
	"admin.page.refused", "admin.token.created", "admin.token.revoked",
	"approval.approved", "approval.cancelled", "approval.cooldown_lifted", "approval.denied",
	"approval.denied_by_policy", "approval.expired",
	"approval.refused", "approval.released", "approval.requested", "approval.slow_down",
	"authz.code.issued", "authz.code_reused",
	"authzen.evaluated",
	"consent.binding_refused", "consent.cooldown_lifted", "consent.granted",
	"consent.granted_by_policy",
	"consent.request.approved", "consent.request.created", "consent.request.denied",
	"consent.request.expired", "consent.request.merged", "consent.request.refused",
	"consent.request.slow_down", "consent.revoked", "dpop.refused", "event.delivered",
	"gateway.auth.refused", "grant.issued", "grant.revoked", "master-key-rotated",
	"mcp.call", "proxy.forwarded", "proxy.refused", "refresh.issued", "refresh.reuse_detected",
	"refresh.revoked", "refresh.used", "standing.created", "standing.ended",
	"standing.refused", "standing.used", "vault.connect.failed", "vault.connected",
	"vault.key_stored", "vault.reconnect_required", "vault.record.moved", "vault.refreshed",
	"vault.release.refused", "vault.released", "vault.revoke_retry", "vault.revoked", NULL,
};

#define AUDIT_KEY_PURPOSE "audit-chain"  /* seal_derive_key purpose */
#define AUDIT_NFIELDS 10                 /* text fields in the canonical form */
#define AUDIT_PAGE 500                   /* rows read at a time */

_Static_assert(AUDIT_LINK_LEN == STORE_AUDIT_LINK_LEN, "one link size");
_Static_assert(AUDIT_LINK_LEN == SEAL_DERIVED_KEY_LEN, "the chain key is a derived key");

/* The process-wide chain key: set once at start, read by every append. */
static struct {
	pthread_mutex_t lock;
	int             set;
	unsigned char   key[AUDIT_LINK_LEN];
	char            kid[MASTER_KID_LEN + 1];
} chain = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The start of every JWT ('{"' in base64url): a JWS, a JWE, an ID token. */
#define JWT_PREFIX "eyJ"

/* Longest value accepted in any field: entries are short by design. */
#define AUDIT_MAX_FIELD 4096

/* CS_EINVAL when v looks like it carries a token or is oversized. */
static enum cs_err field_ok(const char *v)
{
	if (v == NULL)
		return CS_OK;
	if (strlen(v) > AUDIT_MAX_FIELD)
		return CS_EINVAL;
	/* SECURITY: a token in the audit log would outlive every revocation.  A
	 * JWT is "eyJ" + base64url + "." -- random ids may contain "eyJ" by
	 * chance, but never the dot that follows a JWT's header segment. */
	for (const char *p = strstr(v, JWT_PREFIX); p != NULL; p = strstr(p + 1, JWT_PREFIX)) {
		const char *q = p + 3;
		while ((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') ||
		    (*q >= '0' && *q <= '9') || *q == '-' || *q == '_')
			q++;
		if (*q == '.')
			return CS_EINVAL;
	}
	return CS_OK;
}


/* --- the chain key ------------------------------------------------------- */

void audit_set_key(const unsigned char key[AUDIT_LINK_LEN], const char *master_kid)
{
	pthread_mutex_lock(&chain.lock);
	memcpy(chain.key, key, AUDIT_LINK_LEN);
	/* A master key id is MASTER_KID_LEN hex digits and chain.kid holds one:
	 * a longer id (not one of ours) leaves it "" (str_fmt's rule). */
	if (str_fmt(chain.kid, sizeof chain.kid, "%s", master_kid != NULL ? master_kid : "") != CS_OK)
		chain.kid[0] = '\0';
	chain.set = 1;
	pthread_mutex_unlock(&chain.lock);
}

enum cs_err audit_set_master_key(const struct master_key *mk)
{
	unsigned char k[AUDIT_LINK_LEN];
	enum cs_err e;
	if (mk == NULL)
		return CS_EINVAL;
	e = seal_derive_key(mk, AUDIT_KEY_PURPOSE, k);
	if (e == CS_OK)
		audit_set_key(k, mk->kid);
	OPENSSL_cleanse(k, sizeof k);
	return e;
}

void audit_clear_key(void)
{
	pthread_mutex_lock(&chain.lock);
	OPENSSL_cleanse(chain.key, sizeof chain.key);
	memset(chain.kid, 0, sizeof chain.kid);
	chain.set = 0;
	pthread_mutex_unlock(&chain.lock);
}

/* Copies the chain key out; CS_ECRYPTO when none is set.  The caller wipes key. */
static enum cs_err chain_key(unsigned char key[AUDIT_LINK_LEN], char kid[MASTER_KID_LEN + 1])
{
	enum cs_err e = CS_ECRYPTO;
	pthread_mutex_lock(&chain.lock);
	if (chain.set) {
		memcpy(key, chain.key, AUDIT_LINK_LEN);
		memcpy(kid, chain.kid, MASTER_KID_LEN + 1);
		e = CS_OK;
	}
	pthread_mutex_unlock(&chain.lock);
	return e;
}

/* --- links --------------------------------------------------------------- */

static void put_u64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (unsigned char)(v & 0xff);
		v >>= 8;
	}
}

/* link = HMAC-SHA-256(key, prev || canonical(seq, e)).  The canonical form:
 * seq and ts as 8-byte big-endian, then each text field (actor, action,
 * subject, agent, resource, scopes, consent_id, request_id, outcome, detail)
 * as 0x00 when NULL, else 0x01, its length as 4-byte big-endian, its bytes --
 * unambiguous, and NULL distinct from "". */
/* HMAC's implementation, fetched once: a fetch per link looked the algorithm
 * up in OpenSSL's provider store (under its lock) inside every writer's turn. */
static EVP_MAC *hmac_alg;
static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;
static void hmac_fetch(void) { hmac_alg = EVP_MAC_fetch(NULL, "HMAC", NULL); }

enum cs_err audit_link(const unsigned char key[AUDIT_LINK_LEN],
    const unsigned char prev[AUDIT_LINK_LEN], int64_t seq, const struct audit_entry *e,
    unsigned char out[AUDIT_LINK_LEN])
{
	const char *fields[AUDIT_NFIELDS] = {
		e->actor, e->action, e->subject, e->agent, e->resource, e->scopes,
		e->consent_id, e->request_id, e->outcome, e->detail,
	};
	enum cs_err err = CS_ECRYPTO;
	unsigned char hdr[16], tag[5];
	size_t mlen = 0;
	EVP_MAC_CTX *h = NULL;
	char digest[] = "SHA256";
	OSSL_PARAM params[2];

	put_u64(hdr, (uint64_t)seq);
	put_u64(hdr + 8, (uint64_t)e->ts);
	params[0] = OSSL_PARAM_construct_utf8_string("digest", digest, 0);
	params[1] = OSSL_PARAM_construct_end();
	if (pthread_once(&hmac_once, hmac_fetch) != 0 || hmac_alg == NULL ||
	    (h = EVP_MAC_CTX_new(hmac_alg)) == NULL)
		goto out;
	if (EVP_MAC_init(h, key, AUDIT_LINK_LEN, params) != 1 ||
	    EVP_MAC_update(h, prev, AUDIT_LINK_LEN) != 1 || EVP_MAC_update(h, hdr, sizeof hdr) != 1)
		goto out;
	for (size_t i = 0; i < AUDIT_NFIELDS; i++) {
		if (fields[i] == NULL) {
			tag[0] = 0;
			if (EVP_MAC_update(h, tag, 1) != 1)
				goto out;
			continue;
		}
		size_t n = strlen(fields[i]);
		if (n > UINT32_MAX) {
			err = CS_ETOOBIG;
			goto out;
		}
		tag[0] = 1;
		tag[1] = (unsigned char)(n >> 24);
		tag[2] = (unsigned char)(n >> 16);
		tag[3] = (unsigned char)(n >> 8);
		tag[4] = (unsigned char)n;
		if (EVP_MAC_update(h, tag, sizeof tag) != 1 ||
		    EVP_MAC_update(h, (const unsigned char *)fields[i], n) != 1)
			goto out;
	}
	if (EVP_MAC_final(h, out, &mlen, AUDIT_LINK_LEN) != 1 || mlen != AUDIT_LINK_LEN)
		goto out;
	err = CS_OK;
out:
	EVP_MAC_CTX_free(h);
	return err;
}

static void hex_encode(const unsigned char *b, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[b[i] >> 4];
		out[2 * i + 1] = hex[b[i] & 0x0f];
	}
	out[2 * n] = '\0';
}

static enum cs_err hex_decode_link(const char *s, unsigned char out[AUDIT_LINK_LEN])
{
	if (strlen(s) != AUDIT_LINK_HEX)
		return CS_EINVAL;
	for (size_t i = 0; i < AUDIT_LINK_LEN; i++) {
		int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return CS_EINVAL;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return CS_OK;
}

/* A row seen as the entry it records. */
static void row_entry(const struct store_audit_row *r, struct audit_entry *e)
{
	e->ts = r->ts;
	e->actor = r->actor;
	e->action = r->action;
	e->subject = r->subject;
	e->agent = r->agent;
	e->resource = r->resource;
	e->scopes = r->scopes;
	e->consent_id = r->consent_id;
	e->request_id = r->request_id;
	e->outcome = r->outcome;
	e->detail = r->detail;
}

/* --- the anchor of a pruned chain ---------------------------------------- */

/* The anchor's MAC: the link function over (anchor link, seq, an entry that
 * only says "audit.anchor"), so that only who holds the chain key can move
 * the anchor -- deleting more of the prefix and pointing the anchor at a
 * later entry is then detected, as is changing its number or link. */
static enum cs_err anchor_mac(const unsigned char key[AUDIT_LINK_LEN],
    const struct store_audit_anchor *a, unsigned char out[AUDIT_LINK_LEN])
{
	const struct audit_entry e = { .action = "audit.anchor" };
	return audit_link(key, a->link, a->seq, &e, out);
}

/* The anchor, checked under key: *have 0 when the chain was never pruned,
 * *good 0 when the anchor does not verify. */
static enum cs_err anchor_load(struct store_conn *c, const unsigned char key[AUDIT_LINK_LEN],
    struct store_audit_anchor *a, int *have, int *good)
{
	unsigned char mac[AUDIT_LINK_LEN];
	enum cs_err e = store_audit_anchor_get(c, a);
	*have = *good = 0;
	if (e == CS_ENOENT)
		return CS_OK;
	if (e != CS_OK)
		return e;
	*have = 1;
	if ((e = anchor_mac(key, a, mac)) != CS_OK)
		return e;
	/* SECURITY: compared in constant time, like every link. */
	*good = a->seq > 0 && CRYPTO_memcmp(mac, a->mac, AUDIT_LINK_LEN) == 0;
	return CS_OK;
}

/* --- append -------------------------------------------------------------- */

/* Appends e linked under key: reads the head and inserts the next entry.
 * SECURITY: the caller's BEGIN IMMEDIATE holds the writer lock, so no other
 * thread or process can append between reading the head and inserting. */
static enum cs_err append_with(struct store_conn *c, const unsigned char key[AUDIT_LINK_LEN],
    const char *kid, const struct audit_entry *e)
{
	enum cs_err err;
	struct store_audit_head h;
	unsigned char prev[AUDIT_LINK_LEN], link[AUDIT_LINK_LEN];

	if ((err = store_audit_head(c, &h)) != CS_OK)
		return err;
	memset(prev, 0, sizeof prev);
	if (h.link_len == AUDIT_LINK_LEN)
		memcpy(prev, h.link, AUDIT_LINK_LEN);
	if ((err = audit_link(key, prev, h.next, e, link)) != CS_OK)
		return err;
	return store_audit_append(c, &(struct store_audit_fields){ .ts = e->ts, .actor = e->actor,
	    .action = e->action, .subject = e->subject, .agent = e->agent, .resource = e->resource,
	    .scopes = e->scopes, .consent_id = e->consent_id, .request_id = e->request_id,
	    .outcome = e->outcome, .detail = e->detail }, h.next, link, kid);
}

enum cs_err audit_append(struct store_conn *c, const struct audit_entry *e)
{
	unsigned char key[AUDIT_LINK_LEN];
	char kid[MASTER_KID_LEN + 1];
	enum cs_err err;

	if (c == NULL || e == NULL || e->action == NULL || e->action[0] == '\0')
		return CS_EINVAL;
	const char *fields[] = {
		e->actor, e->action, e->subject, e->agent, e->resource, e->scopes,
		e->consent_id, e->request_id, e->outcome, e->detail,
	};
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
		if (field_ok(fields[i]) != CS_OK)
			return CS_EINVAL;
	/* SECURITY: no key, no entry -- an unchained entry would be forgeable. */
	if ((err = chain_key(key, kid)) != CS_OK) {
		log_msg(LOG_ERROR, "audit: no chain key set; entry refused");
		return err;
	}
	err = append_with(c, key, kid, e);
	OPENSSL_cleanse(key, sizeof key);
	return err;
}

enum cs_err audit_append_alone(struct store_conn *c, const struct audit_entry *e)
{
	enum cs_err err;
	if ((err = store_begin(c)) != CS_OK)
		return err;
	if ((err = audit_append(c, e)) != CS_OK || (err = store_commit(c)) != CS_OK) {
		store_rollback(c);
		return err;
	}
	return CS_OK;
}

enum cs_err audit_refusal_detail(char out[AUDIT_REFUSAL_DETAIL_MAX + 1], const char *before,
    const char *path, const char *after)
{
	if (str_fmt(out, AUDIT_REFUSAL_DETAIL_MAX + 1, "%s%s%s", before, path, after) == CS_OK)
		return CS_OK;
	return str_fmt(out, AUDIT_REFUSAL_DETAIL_MAX + 1, "%s(a path too long to record)%s", before,
	    after);
}

/* --- head ---------------------------------------------------------------- */

void audit_link_hex(const unsigned char link[AUDIT_LINK_LEN], char hex[AUDIT_LINK_HEX + 1])
{
	hex_encode(link, AUDIT_LINK_LEN, hex);
}

enum cs_err audit_head(struct store_conn *c, struct audit_head *out)
{
	struct store_audit_head h;
	enum cs_err e;
	if (c == NULL || out == NULL)
		return CS_EINVAL;
	if ((e = store_audit_head(c, &h)) != CS_OK)
		return e;
	if (h.link_len != AUDIT_LINK_LEN)
		memset(h.link, 0, sizeof h.link);
	out->seq = h.seq;
	hex_encode(h.link, AUDIT_LINK_LEN, out->hex);
	return CS_OK;
}

enum cs_err audit_head_parse(const char *s, struct audit_head *out)
{
	unsigned char link[AUDIT_LINK_LEN];
	int64_t n = 0;
	const char *p = s;

	if (s == NULL || out == NULL)
		return CS_EINVAL;
	if (*p < '0' || *p > '9')
		return CS_EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (n > (INT64_MAX - (*p - '0')) / 10)
			return CS_EINVAL;
		n = n * 10 + (*p - '0');
	}
	if (*p != ':' || hex_decode_link(p + 1, link) != CS_OK)
		return CS_EINVAL;
	out->seq = n;
	hex_encode(link, AUDIT_LINK_LEN, out->hex);
	return CS_OK;
}

/* --- verify, relink, export --------------------------------------------- */

/* Marks res broken at entry seq, with why formatted.  The verdict is what
 * counts: every reason below fits res->why by construction (numbers, and
 * master key ids of MASTER_KID_LEN), and one that did not would leave it ""
 * (str_fmt's rule), never a cut reason. */
static void broken(struct audit_verify_result *res, int64_t seq, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void broken(struct audit_verify_result *res, int64_t seq, const char *fmt, ...)
{
	va_list ap;
	res->ok = 0;
	res->broken = seq;
	va_start(ap, fmt);
	if (str_vfmt(res->why, sizeof res->why, fmt, ap) != CS_OK)
		res->why[0] = '\0';
	va_end(ap);
}

/* Calls fn on every entry in order, a page of AUDIT_PAGE at a time, until fn
 * fails or sets *stop. */
static enum cs_err each_row(struct store_conn *c,
    enum cs_err (*fn)(void *arg, const struct store_audit_row *r, bool *stop), void *arg)
{
	enum cs_err err;
	struct store_audit_row *rows = NULL;
	size_t n = 0;
	int64_t after = 0;
	bool stop = false;

	while (!stop) {
		if ((err = store_audit_page(c, after, AUDIT_PAGE, &rows, &n)) != CS_OK)
			goto out;
		if (n == 0)
			break;
		for (size_t i = 0; i < n && !stop; i++)
			if ((err = fn(arg, &rows[i], &stop)) != CS_OK)
				goto out;
		after = rows[n - 1].seq;
		store_audit_rows_free(rows, n);
		rows = NULL;
		n = 0;
	}
	err = CS_OK;
out:
	store_audit_rows_free(rows, n);
	return err;
}

/* audit_verify's walk: the chain so far and what it is checked against. */
struct verify_walk {
	const struct master_key    *mk;
	const struct audit_head    *want;
	struct audit_verify_result *res;
	unsigned char key[AUDIT_LINK_LEN], prev[AUDIT_LINK_LEN], want_link[AUDIT_LINK_LEN];
	int64_t expect;
	int     want_seen;
};

static enum cs_err verify_row(void *arg, const struct store_audit_row *r, bool *stop)
{
	struct verify_walk *w = arg;
	struct audit_verify_result *res = w->res;
	unsigned char link[AUDIT_LINK_LEN];
	struct audit_entry e;
	enum cs_err err;

	if (r->seq != w->expect) {
		broken(res, r->seq, "entry %" PRId64 " before it is missing", w->expect);
		goto done;
	}
	if (r->link == NULL || r->link_len != AUDIT_LINK_LEN) {
		broken(res, r->seq, "it has no link");
		goto done;
	}
	row_entry(r, &e);
	if ((err = audit_link(w->key, w->prev, r->seq, &e, link)) != CS_OK)
		return err;
	/* SECURITY: links compared in constant time. */
	if (CRYPTO_memcmp(link, r->link, AUDIT_LINK_LEN) != 0) {
		if (r->master_kid != NULL && strcmp(r->master_kid, w->mk->kid) != 0)
			broken(res, r->seq, "link does not match; it names master key "
			    "%.16s, verifying with %s", r->master_kid, w->mk->kid);
		else
			broken(res, r->seq, "link does not match its content "
			    "and the entry before it");
		goto done;
	}
	if (w->want != NULL && r->seq == w->want->seq) {
		w->want_seen = 1;
		if (CRYPTO_memcmp(link, w->want_link, AUDIT_LINK_LEN) != 0) {
			broken(res, r->seq, "its link differs from the expected head's");
			goto done;
		}
	}
	memcpy(w->prev, link, AUDIT_LINK_LEN);
	res->entries++;
	res->head.seq = r->seq;
	hex_encode(link, AUDIT_LINK_LEN, res->head.hex);
	w->expect = r->seq + 1;
done:
	*stop = !res->ok;
	return CS_OK;
}

enum cs_err audit_verify(struct store_conn *c, const struct master_key *mk,
    const struct audit_head *want, struct audit_verify_result *res)
{
	enum cs_err err;
	struct verify_walk w = { .mk = mk, .want = want, .res = res, .expect = 1 };

	if (c == NULL || mk == NULL || res == NULL)
		return CS_EINVAL;
	memset(res, 0, sizeof *res);
	hex_encode(w.prev, AUDIT_LINK_LEN, res->head.hex);
	if (want != NULL && (want->seq < 0 || hex_decode_link(want->hex, w.want_link) != CS_OK))
		return CS_EINVAL;
	if ((err = seal_derive_key(mk, AUDIT_KEY_PURPOSE, w.key)) != CS_OK)
		return err;
	res->ok = 1;
	{
		struct store_audit_anchor a;
		int have, good;
		if ((err = anchor_load(c, w.key, &a, &have, &good)) != CS_OK)
			goto out;
		if (have && !good) {
			broken(res, a.seq, "the anchor of the pruned prefix does not verify "
			    "(moved or rewritten?)");
			goto out;
		}
		if (have) {
			/* A pruned chain starts after its anchor: the first kept entry
			 * must link to the anchor's link. */
			memcpy(w.prev, a.link, AUDIT_LINK_LEN);
			w.expect = a.seq + 1;
			res->anchor = a.seq;
			res->head.seq = a.seq;
			hex_encode(a.link, AUDIT_LINK_LEN, res->head.hex);
			if (want != NULL && want->seq > 0 && want->seq <= a.seq) {
				/* An expected head at or before the anchor: only the anchor
				 * itself can still be compared. */
				w.want_seen = 1;
				if (want->seq == a.seq &&
				    CRYPTO_memcmp(a.link, w.want_link, AUDIT_LINK_LEN) != 0) {
					broken(res, a.seq, "its link differs from the expected head's");
					goto out;
				}
			}
		}
	}
	if ((err = each_row(c, verify_row, &w)) != CS_OK)
		goto out;
	if (res->ok && want != NULL && want->seq > 0 && !w.want_seen) {
		broken(res, want->seq, "head %" PRId64 " missing: the log ends at entry %" PRId64
		    " (cut off?)", want->seq, res->head.seq);
		res->head_missing = 1;
	}
out:
	OPENSSL_cleanse(w.key, sizeof w.key);
	return err;
}

/* --- prune --------------------------------------------------------------- */

/* Where the chain starts: after the anchor (SECURITY: verified first, so
 * pruning can never hide a rewritten entry: a chain that does not verify is
 * left as it is, for `consentd audit verify` to report), or at entry 1.
 * prev gets the link the next entry follows, *expect its number. */
static enum cs_err chain_start(struct store_conn *c, const unsigned char key[AUDIT_LINK_LEN],
    unsigned char prev[AUDIT_LINK_LEN], int64_t *expect)
{
	struct store_audit_anchor a;
	int have = 0, good = 0;
	enum cs_err err;

	if ((err = anchor_load(c, key, &a, &have, &good)) != CS_OK)
		return err;
	if (have && !good) {
		log_msg(LOG_ERROR, "audit: the anchor does not verify; not pruning");
		return CS_ECRYPTO;
	}
	memset(prev, 0, AUDIT_LINK_LEN);
	if (have)
		memcpy(prev, a.link, AUDIT_LINK_LEN);
	*expect = have ? a.seq + 1 : 1;
	return CS_OK;
}

/* Row r is entry number expect, and its link follows prev under key: true
 * with its link in link. */
static bool row_verifies(const unsigned char key[AUDIT_LINK_LEN],
    const unsigned char prev[AUDIT_LINK_LEN], const struct store_audit_row *r, int64_t expect,
    unsigned char link[AUDIT_LINK_LEN])
{
	struct audit_entry e;

	row_entry(r, &e);
	return r->seq == expect && r->link != NULL && r->link_len == AUDIT_LINK_LEN &&
	    audit_link(key, prev, r->seq, &e, link) == CS_OK &&
	    CRYPTO_memcmp(link, r->link, AUDIT_LINK_LEN) == 0;
}

/* Removes the entries up to last and anchors the chain at last's link, with
 * the anchor's MAC under key (named kid), in the caller's transaction. */
static enum cs_err prune_to(struct store_conn *c, const unsigned char key[AUDIT_LINK_LEN],
    const char *kid, int64_t last, const unsigned char link[AUDIT_LINK_LEN], int64_t now)
{
	struct store_audit_anchor a;
	enum cs_err err;

	memset(&a, 0, sizeof a);
	a.seq = last;
	memcpy(a.link, link, AUDIT_LINK_LEN);
	a.pruned_at = now;
	if ((err = str_fmt(a.master_kid, sizeof a.master_kid, "%s", kid)) != CS_OK ||
	    (err = anchor_mac(key, &a, a.mac)) != CS_OK ||
	    (err = store_audit_prune(c, last)) != CS_OK ||
	    (err = store_audit_anchor_set(c, &a)) != CS_OK)
		return err;
	return CS_OK;
}

enum cs_err audit_prune(struct store_conn *c, int64_t before, int64_t keep, int64_t limit,
    int64_t now, int64_t *removed)
{
	unsigned char key[AUDIT_LINK_LEN], prev[AUDIT_LINK_LEN], link[AUDIT_LINK_LEN];
	char kid[MASTER_KID_LEN + 1];
	struct store_audit_head h;
	struct store_audit_row *rows = NULL;
	size_t n = 0;
	int64_t expect = 1, last = 0, count = 0;
	enum cs_err err;
	bool in_tx = false;

	if (c == NULL || removed == NULL || limit < 1 || before < 0 || keep < 0)
		return CS_EINVAL;
	if ((err = chain_key(key, kid)) != CS_OK)
		return err;
	if ((err = store_begin(c)) != CS_OK)
		goto out;
	in_tx = true;
	if ((err = store_audit_head(c, &h)) != CS_OK ||
	    (err = chain_start(c, key, prev, &expect)) != CS_OK)
		goto out;
	if ((err = store_audit_page(c, expect - 1, (size_t)limit, &rows, &n)) != CS_OK)
		goto out;
	for (size_t i = 0; i < n; i++) {
		/* The head is never pruned: the next append links to it. */
		if (rows[i].seq >= h.seq)
			break;
		if (!(before > 0 && rows[i].ts < before) && !(keep > 0 && rows[i].seq <= h.seq - keep))
			break;
		err = CS_ECRYPTO;
		if (!row_verifies(key, prev, &rows[i], expect, link)) {
			log_msg(LOG_ERROR, "audit: entry %" PRId64 " does not verify; not pruning",
			    rows[i].seq);
			goto out;
		}
		memcpy(prev, link, AUDIT_LINK_LEN);
		last = rows[i].seq;
		expect = last + 1;
		count++;
	}
	if (count == 0) {
		err = CS_OK;
		goto out;
	}
	if ((err = prune_to(c, key, kid, last, prev, now)) != CS_OK ||
	    (err = store_commit(c)) != CS_OK)
		goto out;
	in_tx = false;
	*removed = count;
	err = CS_OK;
out:
	if (in_tx)
		store_rollback(c);
	if (err == CS_OK && count == 0)
		*removed = 0;
	store_audit_rows_free(rows, n);
	OPENSSL_cleanse(key, sizeof key);
	return err;
}

/* audit_relink's walk: the new chain key and the link before. */
struct relink_walk {
	struct store_conn       *c;
	const struct master_key *new_mk;
	unsigned char key[AUDIT_LINK_LEN], prev[AUDIT_LINK_LEN];
};

static enum cs_err relink_row(void *arg, const struct store_audit_row *r, bool *stop)
{
	struct relink_walk *w = arg;
	unsigned char link[AUDIT_LINK_LEN];
	struct audit_entry e;
	enum cs_err err;
	(void)stop;
	row_entry(r, &e);
	if ((err = audit_link(w->key, w->prev, r->seq, &e, link)) != CS_OK ||
	    (err = store_audit_set_link(w->c, r->seq, link, w->new_mk->kid)) != CS_OK)
		return err;
	memcpy(w->prev, link, AUDIT_LINK_LEN);
	return CS_OK;
}

enum cs_err audit_relink(struct store_conn *c, const struct master_key *new_mk)
{
	enum cs_err err;
	struct relink_walk w = { .c = c, .new_mk = new_mk };

	if (c == NULL || new_mk == NULL)
		return CS_EINVAL;
	if ((err = seal_derive_key(new_mk, AUDIT_KEY_PURPOSE, w.key)) != CS_OK)
		return err;
	{
		/* A pruned chain goes on from its anchor's link (the link itself
		 * stays: it was the old chain's); the anchor's MAC moves to the new key. */
		struct store_audit_anchor a;
		err = store_audit_anchor_get(c, &a);
		if (err == CS_OK) {
			memcpy(w.prev, a.link, AUDIT_LINK_LEN);
			if ((err = str_fmt(a.master_kid, sizeof a.master_kid, "%s", new_mk->kid)) != CS_OK ||
			    (err = anchor_mac(w.key, &a, a.mac)) != CS_OK ||
			    (err = store_audit_anchor_set(c, &a)) != CS_OK)
				goto out;
		} else if (err != CS_ENOENT) {
			goto out;
		}
	}
	err = each_row(c, relink_row, &w);
out:
	OPENSSL_cleanse(w.key, sizeof w.key);
	return err;
}

/* v as a JSON string, or null. */
static json_t *json_str_or_null(const char *v)
{
	return v != NULL ? json_string(v) : json_null();
}

static enum cs_err row_json(const struct store_audit_row *r, char **out)
{
	char hex[AUDIT_LINK_HEX + 1];
	json_t *o = json_object();
	enum cs_err err = CS_ENOMEM;
	if (o == NULL)
		return CS_ENOMEM;
	const struct { const char *k; const char *v; } f[] = {
		{ "actor", r->actor }, { "action", r->action }, { "subject", r->subject },
		{ "agent", r->agent }, { "resource", r->resource }, { "scopes", r->scopes },
		{ "consent_id", r->consent_id }, { "request_id", r->request_id },
		{ "outcome", r->outcome }, { "detail", r->detail }, { "master_kid", r->master_kid },
	};
	if (json_object_set_new(o, "seq", json_integer(r->seq)) != 0 ||
	    json_object_set_new(o, "ts", json_integer(r->ts)) != 0)
		goto out;
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
		if (json_object_set_new(o, f[i].k, json_str_or_null(f[i].v)) != 0)
			goto out;
	if (r->link != NULL && r->link_len == AUDIT_LINK_LEN) {
		hex_encode(r->link, AUDIT_LINK_LEN, hex);
		if (json_object_set_new(o, "link", json_string(hex)) != 0)
			goto out;
	} else if (json_object_set_new(o, "link", json_null()) != 0) {
		goto out;
	}
	if ((*out = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER)) == NULL)
		goto out;
	err = CS_OK;
out:
	json_decref(o);
	return err;
}

/* audit_export's walk: where it starts and whom it hands each entry. */
struct export_walk {
	int64_t since;
	enum cs_err (*fn)(void *arg, const char *json);
	void *arg;
};

static enum cs_err export_row(void *arg, const struct store_audit_row *r, bool *stop)
{
	struct export_walk *w = arg;
	char *js = NULL;
	enum cs_err err;
	(void)stop;
	if (r->ts < w->since)
		return CS_OK;
	if ((err = row_json(r, &js)) != CS_OK)
		return err;
	err = w->fn(w->arg, js);
	free(js);
	return err;
}

enum cs_err audit_export(struct store_conn *c, int64_t since,
    enum cs_err (*fn)(void *arg, const char *json), void *arg)
{
	if (c == NULL || fn == NULL)
		return CS_EINVAL;
	return each_row(c, export_row, &(struct export_walk){ .since = since, .fn = fn, .arg = arg });
}
