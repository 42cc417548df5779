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
 *   audit.chain.opened         a process began a chain of its own (migration 0028,
 *                              PostgreSQL): resource = the chain, detail "heads=" the
 *                              newest entry of each recent other chain, CHAIN:SEQ:LINK
 *   audit.chain.crossref       every [audit] crossref_interval, when another chain moved
 *                              on: the same "heads=" of the other chains, in the
 *                              process's own chain (resource = it)
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
#include <errno.h>
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
	"audit.chain.crossref", "audit.chain.opened", "authz.code.issued", "authz.code_reused",
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
#define AUDIT_CROSSREFS 16               /* other chains a new chain's first entry names */

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
enum cs_err audit_link(const unsigned char key[AUDIT_LINK_LEN],
    const unsigned char prev[AUDIT_LINK_LEN], int64_t seq, const struct audit_entry *e,
    unsigned char out[AUDIT_LINK_LEN])
{
	return audit_link_chain(key, prev, seq, 0, 0, e, out);
}

/* An entry of chain > 0 (migration 0028) adds, after seq and ts, the tag 0x02
 * -- never the first byte of a field's encoding (0x00, 0x01) -- then the
 * chain and the number of the chain's entry before it, 8 bytes big-endian
 * each: no entry can be moved to another chain, and chain 0's links are what
 * they always were. */
enum cs_err audit_link_chain(const unsigned char key[AUDIT_LINK_LEN],
    const unsigned char prev[AUDIT_LINK_LEN], int64_t seq, int64_t chain_id, int64_t prev_seq,
    const struct audit_entry *e, unsigned char out[AUDIT_LINK_LEN])
{
	const char *fields[AUDIT_NFIELDS] = {
		e->actor, e->action, e->subject, e->agent, e->resource, e->scopes,
		e->consent_id, e->request_id, e->outcome, e->detail,
	};
	enum cs_err err = CS_ECRYPTO;
	unsigned char hdr[16], tag[5];
	size_t mlen = 0;
	EVP_MAC *hmac;
	EVP_MAC_CTX *h = NULL;
	char digest[] = "SHA256";
	OSSL_PARAM params[2];

	put_u64(hdr, (uint64_t)seq);
	put_u64(hdr + 8, (uint64_t)e->ts);
	params[0] = OSSL_PARAM_construct_utf8_string("digest", digest, 0);
	params[1] = OSSL_PARAM_construct_end();
	/* HMAC fetched once (seal.h): a fetch per link looked it up inside
	 * every writer's turn. */
	if ((hmac = alg_hmac()) == NULL || (h = EVP_MAC_CTX_new(hmac)) == NULL)
		goto out;
	if (EVP_MAC_init(h, key, AUDIT_LINK_LEN, params) != 1 ||
	    EVP_MAC_update(h, prev, AUDIT_LINK_LEN) != 1 || EVP_MAC_update(h, hdr, sizeof hdr) != 1)
		goto out;
	if (chain_id != 0) {
		unsigned char ctag[17];
		ctag[0] = 2;
		put_u64(ctag + 1, (uint64_t)chain_id);
		put_u64(ctag + 9, (uint64_t)prev_seq);
		if (EVP_MAC_update(h, ctag, sizeof ctag) != 1)
			goto out;
	}
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
	return audit_link_chain(key, a->link, a->seq, a->chain, 0, &e, out);
}

/* --- append -------------------------------------------------------------- */

/* Appends e linked under key to the process's chain: reads the chain's head
 * and inserts the next entry.
 * SECURITY: the caller's transaction holds this process's one writer
 * (SQLite's BEGIN IMMEDIATE for every process; on PostgreSQL the process's
 * writer turn, and the chain is this process's alone), so nobody can append
 * to the chain between reading its head and inserting. */
static enum cs_err append_one(struct store_conn *c, const unsigned char key[AUDIT_LINK_LEN],
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
	if ((err = audit_link_chain(key, prev, h.next, h.chain, h.seq, e, link)) != CS_OK)
		return err;
	return store_audit_append(c, &(struct store_audit_fields){ .chain = h.chain,
	    .prev_seq = h.seq, .ts = e->ts,
	    .actor = e->actor, .action = e->action, .subject = e->subject, .agent = e->agent,
	    .resource = e->resource, .scopes = e->scopes, .consent_id = e->consent_id,
	    .request_id = e->request_id, .outcome = e->outcome, .detail = e->detail },
	    h.next, link, kid);
}

/* "heads=none" or "heads=CHAIN:SEQ:LINK,..." of refs[0..n) into *detail:
 * what audit.chain.opened and audit.chain.crossref entries vouch for. */
static enum cs_err heads_detail(const struct store_audit_ref *refs, size_t n, struct buf *detail)
{
	enum cs_err err = buf_puts(detail, n == 0 ? "heads=none" : "heads=");
	for (size_t i = 0; i < n && err == CS_OK; i++) {
		char hex[AUDIT_LINK_HEX + 1];
		hex_encode(refs[i].link, AUDIT_LINK_LEN, hex);
		err = buf_printf(detail, "%s%" PRId64 ":%" PRId64 ":%s", i > 0 ? "," : "",
		    refs[i].chain, refs[i].seq, hex);
	}
	return err;
}

/* A process with chains of its own appends first to a chain it claims now,
 * in the caller's transaction: the chain's first entry, audit.chain.opened,
 * names the newest entry of each of the AUDIT_CROSSREFS most recent other
 * chains ("heads=CHAIN:SEQ:LINK,..."), which `audit verify` holds the
 * database to: cutting another chain's tail below a head named here is
 * found, as a cut below a published head is. */
static enum cs_err open_chain(struct store_conn *c, const unsigned char key[AUDIT_LINK_LEN],
    const char *kid, int64_t ts)
{
	struct store_audit_ref refs[AUDIT_CROSSREFS];
	struct buf detail;
	char cbuf[24];
	size_t n = 0;
	int64_t chain_id;
	enum cs_err err;

	buf_init(&detail, AUDIT_MAX_FIELD);
	/* Every other chain, chain 0 (the entries before migration 0028) too:
	 * the new chain is not claimed yet. */
	if ((err = store_audit_chain_heads(c, -1, refs, AUDIT_CROSSREFS, &n)) != CS_OK ||
	    (err = store_audit_chain_claim(c, ts, &chain_id)) != CS_OK ||
	    (err = heads_detail(refs, n, &detail)) != CS_OK)
		goto out;
	if ((err = str_fmt(cbuf, sizeof cbuf, "%" PRId64, chain_id)) != CS_OK)
		goto out;
	const struct audit_entry opened = { .ts = ts, .actor = "system",
	    .action = "audit.chain.opened", .resource = cbuf, .detail = detail.data };
	err = append_one(c, key, kid, &opened);
out:
	buf_clear(&detail);
	return err;
}

static enum cs_err append_with(struct store_conn *c, const unsigned char key[AUDIT_LINK_LEN],
    const char *kid, const struct audit_entry *e)
{
	int64_t chain_id;
	bool fresh;
	enum cs_err err;

	store_audit_chain_need(c, &chain_id, &fresh);
	if (fresh && (err = open_chain(c, key, kid, e->ts)) != CS_OK)
		return err;
	return append_one(c, key, kid, e);
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

static enum cs_err chain_open_once(struct store_conn *c, int64_t now)
{
	unsigned char key[AUDIT_LINK_LEN];
	char kid[MASTER_KID_LEN + 1];
	int64_t chain_id;
	bool fresh;
	enum cs_err err;

	store_audit_chain_need(c, &chain_id, &fresh);
	if (!fresh)
		return CS_OK;
	if ((err = chain_key(key, kid)) != CS_OK)
		return err;
	if ((err = store_begin(c)) == CS_OK)
		err = store_end(c, open_chain(c, key, kid, now));
	OPENSSL_cleanse(key, sizeof key);
	return err;
}

enum cs_err audit_chain_open(struct store_conn *c, int64_t now)
{
	enum cs_err e;
	int n = 0;
	if (c == NULL)
		return CS_EINVAL;
	do
		e = chain_open_once(c, now);
	while (store_retry(c, e, &n));
	return e;
}

/* The other chains' newest entries this process's chain last vouched for
 * (audit_crossref): a cross-reference is written only when one of them
 * moved on, so an idle cluster adds nothing to its audit. */
static struct {
	pthread_mutex_t lock;
	int64_t         chain;               /* the process's chain that wrote them; 0: none */
	struct { int64_t chain, seq; } last[AUDIT_CROSSREFS];
	size_t          n;
} xref = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The references of refs[0..n) whose chain moved on since the last
 * cross-reference (or was not named then), moved to the front: how many. */
static size_t xref_moved(int64_t own, struct store_audit_ref *refs, size_t n)
{
	size_t k = 0;
	pthread_mutex_lock(&xref.lock);
	for (size_t i = 0; i < n; i++) {
		bool same = false;
		for (size_t j = 0; xref.chain == own && j < xref.n && !same; j++)
			same = xref.last[j].chain == refs[i].chain && xref.last[j].seq == refs[i].seq;
		if (!same)
			refs[k++] = refs[i];
	}
	pthread_mutex_unlock(&xref.lock);
	return k;
}

static void xref_remember(int64_t own, const struct store_audit_ref *refs, size_t n)
{
	pthread_mutex_lock(&xref.lock);
	xref.chain = own;
	xref.n = n;
	for (size_t i = 0; i < n; i++) {
		xref.last[i].chain = refs[i].chain;
		xref.last[i].seq = refs[i].seq;
	}
	pthread_mutex_unlock(&xref.lock);
}

void audit_crossref_forget(void)
{
	pthread_mutex_lock(&xref.lock);
	xref.chain = 0;
	xref.n = 0;
	pthread_mutex_unlock(&xref.lock);
}

/* One run of audit_crossref, in its own transaction: *wrote with the entry. */
static enum cs_err crossref_once(struct store_conn *c, const unsigned char key[AUDIT_LINK_LEN],
    const char *kid, int64_t own, int64_t now, bool *wrote)
{
	struct store_audit_ref refs[AUDIT_CROSSREFS], moved[AUDIT_CROSSREFS];
	struct buf detail;
	char cbuf[24];
	size_t n = 0, nmoved = 0;
	int64_t chain_now;
	bool fresh;
	enum cs_err err;

	*wrote = false;
	if ((err = store_begin(c)) != CS_OK)
		return err;
	/* The chain given up since (a COMMIT whose outcome was unknown): the
	 * entry that opens the next one vouches instead.  Read in the
	 * transaction that appends: the heads named are committed entries, and
	 * the process's own chain is not among them. */
	store_audit_chain_need(c, &chain_now, &fresh);
	if (!fresh && chain_now == own &&
	    (err = store_audit_chain_heads(c, own, refs, AUDIT_CROSSREFS, &n)) == CS_OK) {
		memcpy(moved, refs, n * sizeof *refs);
		nmoved = xref_moved(own, moved, n);
	}
	/* Only the chains that moved are named: one that did not was named by
	 * an entry before, and what verify holds its chain to is its newest. */
	if (err != CS_OK || nmoved == 0) {
		store_rollback(c);
		return err;
	}
	buf_init(&detail, AUDIT_MAX_FIELD);
	if ((err = heads_detail(moved, nmoved, &detail)) == CS_OK &&
	    (err = str_fmt(cbuf, sizeof cbuf, "%" PRId64, own)) == CS_OK)
		err = append_with(c, key, kid, &(struct audit_entry){ .ts = now, .actor = "system",
		    .action = "audit.chain.crossref", .resource = cbuf, .detail = detail.data });
	buf_clear(&detail);
	if ((err = store_end(c, err)) == CS_OK) {
		xref_remember(own, refs, n);
		*wrote = true;
	}
	return err;
}

enum cs_err audit_crossref(struct store_conn *c, int64_t now, bool *wrote)
{
	unsigned char key[AUDIT_LINK_LEN];
	char kid[MASTER_KID_LEN + 1];
	int64_t own;
	bool fresh;
	enum cs_err err;
	int tries = 0;

	if (c == NULL || wrote == NULL)
		return CS_EINVAL;
	*wrote = false;
	/* One writer (SQLite): chain 0, nothing to vouch for.  No chain yet:
	 * the entry that opens it names the other chains' heads itself. */
	store_audit_chain_need(c, &own, &fresh);
	if (fresh || own < 1)
		return CS_OK;
	if ((err = chain_key(key, kid)) != CS_OK)
		return err;
	do
		err = crossref_once(c, key, kid, own, now, wrote);
	while (store_retry(c, err, &tries));
	OPENSSL_cleanse(key, sizeof key);
	return err;
}

enum cs_err audit_expect(struct store_conn *c, size_t n)
{
	if (c == NULL || n == 0)
		return CS_EINVAL;
	return store_audit_reserve(c, n);
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
	unsigned char link[AUDIT_LINK_LEN];
	size_t len = 0;
	int64_t seq = 0;
	enum cs_err e;
	if (c == NULL || out == NULL)
		return CS_EINVAL;
	/* The newest entry of every chain: what the database holds last. */
	if ((e = store_audit_last(c, &seq, link, &len)) != CS_OK)
		return e;
	if (len != AUDIT_LINK_LEN)
		memset(link, 0, sizeof link);
	out->seq = seq;
	hex_encode(link, AUDIT_LINK_LEN, out->hex);
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

/* --- the chains of a walk (migration 0028) ---------------------------------- */

/* One chain as a walk in seq order has it so far. */
struct chain_at {
	int64_t       chain;
	unsigned char prev[AUDIT_LINK_LEN];  /* the link its next entry follows */
	int64_t       anchor;                /* its anchor's seq; 0 when never pruned */
	int64_t       last;                  /* its last entry walked (or its anchor's) */
	int64_t       pruned;                /* prune: its last entry removed now; 0 none */
};
struct chains {
	struct chain_at *v;                  /* sorted by chain */
	size_t           n, cap;
};

static void chains_free(struct chains *cs)
{
	free(cs->v);
	memset(cs, 0, sizeof *cs);
}

/* Chain id's state, added (zero link: a chain's first entry follows no
 * entry) when it is new; NULL when out of memory. */
static struct chain_at *chain_get(struct chains *cs, int64_t id)
{
	size_t lo = 0, hi = cs->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cs->v[mid].chain == id)
			return &cs->v[mid];
		if (cs->v[mid].chain < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (cs->n == cs->cap) {
		size_t ncap = cs->cap ? cs->cap * 2 : 8;
		struct chain_at *nv = realloc(cs->v, ncap * sizeof *nv);
		if (nv == NULL)
			return NULL;
		cs->v = nv;
		cs->cap = ncap;
	}
	memmove(&cs->v[lo + 1], &cs->v[lo], (cs->n - lo) * sizeof *cs->v);
	memset(&cs->v[lo], 0, sizeof *cs->v);
	cs->v[lo].chain = id;
	cs->n++;
	return &cs->v[lo];
}

/* Every chain's anchor into cs, each checked under key: *bad the seq of the
 * first that does not verify (0: all do), *through the highest seq pruned. */
static enum cs_err chains_load(struct store_conn *c, const unsigned char key[AUDIT_LINK_LEN],
    struct chains *cs, int64_t *bad, int64_t *through)
{
	struct store_audit_anchor *a = NULL;
	size_t n = 0;
	enum cs_err e;

	*bad = 0;
	*through = 0;
	if ((e = store_audit_anchors(c, &a, &n)) != CS_OK)
		return e;
	for (size_t i = 0; i < n; i++) {
		unsigned char mac[AUDIT_LINK_LEN];
		struct chain_at *ch;
		if ((e = anchor_mac(key, &a[i], mac)) != CS_OK)
			goto out;
		/* SECURITY: compared in constant time, like every link. */
		if (a[i].seq <= 0 || CRYPTO_memcmp(mac, a[i].mac, AUDIT_LINK_LEN) != 0) {
			*bad = a[i].seq > 0 ? a[i].seq : 1;
			goto out;
		}
		if ((ch = chain_get(cs, a[i].chain)) == NULL) {
			e = CS_ENOMEM;
			goto out;
		}
		memcpy(ch->prev, a[i].link, AUDIT_LINK_LEN);
		ch->anchor = a[i].seq;
		ch->last = a[i].seq;
		if (a[i].seq > *through)
			*through = a[i].seq;
	}
out:
	OPENSSL_cleanse(a, n * sizeof *a);
	free(a);
	return e;
}

enum cs_err audit_pruned_through(struct store_conn *c, int64_t *through)
{
	unsigned char key[AUDIT_LINK_LEN];
	char kid[MASTER_KID_LEN + 1];
	struct chains cs = { NULL, 0, 0 };
	int64_t bad = 0;
	enum cs_err e;

	if (c == NULL || through == NULL)
		return CS_EINVAL;
	*through = 0;
	if ((e = chain_key(key, kid)) != CS_OK)
		return e;
	e = chains_load(c, key, &cs, &bad, through);
	OPENSSL_cleanse(key, sizeof key);
	chains_free(&cs);
	/* SECURITY: an anchor that does not verify was not written by a prune
	 * under the chain key: it excuses no missing entry. */
	if (e == CS_OK && bad != 0) {
		log_msg(LOG_ERROR, "audit: the anchor of entry %" PRId64 " does not verify; "
		    "no entry counts as pruned", bad);
		*through = 0;
	}
	if (e != CS_OK)
		*through = 0;
	return e;
}

/* A cross-reference an audit.chain.opened or .crossref entry made. */
struct crossref {
	int64_t       from, chain, seq;
	unsigned char link[AUDIT_LINK_LEN];
	bool          after;              /* made after the last master-key rotation (verify) */
};

/* The references "heads=none" or "heads=C:N:LINK,..." of entry from into
 * *v (grown); CS_EINVAL when detail is not that. */
static enum cs_err crossrefs_parse(int64_t from, const char *detail, struct crossref **v,
    size_t *n, size_t *cap)
{
	const char *p;
	if (detail == NULL || strncmp(detail, "heads=", 6) != 0)
		return CS_EINVAL;
	p = detail + 6;
	if (strcmp(p, "none") == 0)
		return CS_OK;
	for (;;) {
		struct crossref r = { .from = from };
		char *end;
		char hex[AUDIT_LINK_HEX + 1];
		long long ch, sq;
		errno = 0;
		ch = strtoll(p, &end, 10);
		if (end == p || *end != ':' || errno != 0 || ch < 0)
			return CS_EINVAL;
		p = end + 1;
		sq = strtoll(p, &end, 10);
		if (end == p || *end != ':' || errno != 0 || sq < 1)
			return CS_EINVAL;
		p = end + 1;
		if (strlen(p) < AUDIT_LINK_HEX)
			return CS_EINVAL;
		memcpy(hex, p, AUDIT_LINK_HEX);
		hex[AUDIT_LINK_HEX] = '\0';
		if (hex_decode_link(hex, r.link) != CS_OK)
			return CS_EINVAL;
		p += AUDIT_LINK_HEX;
		r.chain = ch;
		r.seq = sq;
		if (*n == *cap) {
			size_t ncap = *cap ? *cap * 2 : 16;
			struct crossref *nv = realloc(*v, ncap * sizeof *nv);
			if (nv == NULL)
				return CS_ENOMEM;
			*v = nv;
			*cap = ncap;
		}
		(*v)[(*n)++] = r;
		if (*p == '\0')
			return CS_OK;
		if (*p != ',')
			return CS_EINVAL;
		p++;
	}
}

/* audit_verify's walk: the chains so far and what they are checked against. */
struct verify_walk {
	const struct master_key    *mk;
	const struct audit_head    *want;
	struct audit_verify_result *res;
	unsigned char key[AUDIT_LINK_LEN], want_link[AUDIT_LINK_LEN];
	struct chains cs;
	int64_t expect;                      /* chain 0 alone: numbers run on without a gap */
	bool    zero_only;                   /* every entry so far is chain 0's */
	int     want_seen;
	int64_t rotated;                     /* the last master-key-rotated entry */
	struct crossref *refs;
	size_t nrefs, caprefs;
};

static enum cs_err verify_row(void *arg, const struct store_audit_row *r, bool *stop)
{
	struct verify_walk *w = arg;
	struct audit_verify_result *res = w->res;
	unsigned char link[AUDIT_LINK_LEN];
	struct audit_entry e;
	struct chain_at *ch;
	enum cs_err err;

	if (r->chain != 0)
		w->zero_only = false;
	/* One chain (SQLite's, or a database before migration 0028): its numbers
	 * have no gap.  Chains of their own take numbers in blocks, with gaps;
	 * each chain's links still find an entry removed from its middle. */
	if (w->zero_only && r->seq != w->expect) {
		broken(res, r->seq, "entry %" PRId64 " before it is missing", w->expect);
		goto done;
	}
	if (r->chain < 0) {
		broken(res, r->seq, "it names chain %" PRId64, r->chain);
		goto done;
	}
	if ((ch = chain_get(&w->cs, r->chain)) == NULL)
		return CS_ENOMEM;
	if (r->link == NULL || r->link_len != AUDIT_LINK_LEN) {
		broken(res, r->seq, "it has no link");
		goto done;
	}
	row_entry(r, &e);
	/* A chain of its own names the entry before each of its entries: one
	 * removed from the middle is named, as chain 0's numbers name it. */
	if (r->chain != 0 && r->prev_seq != ch->last) {
		if (r->prev_seq > ch->last)
			broken(res, r->seq, "entry %" PRId64 " before it is missing", r->prev_seq);
		else
			broken(res, r->seq, "it follows entry %" PRId64 " of chain %" PRId64 ", whose "
			    "last entry was %" PRId64, r->prev_seq, r->chain, ch->last);
		goto done;
	}
	if ((err = audit_link_chain(w->key, ch->prev, r->seq, r->chain, r->prev_seq, &e,
	    link)) != CS_OK)
		return err;
	/* SECURITY: links compared in constant time. */
	if (CRYPTO_memcmp(link, r->link, AUDIT_LINK_LEN) != 0) {
		if (r->master_kid != NULL && strcmp(r->master_kid, w->mk->kid) != 0)
			broken(res, r->seq, "link does not match; it names master key "
			    "%.16s, verifying with %s", r->master_kid, w->mk->kid);
		else if (r->chain != 0)
			broken(res, r->seq, "link does not match its content "
			    "and the entry before it in chain %" PRId64, r->chain);
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
	if (r->action != NULL && (strcmp(r->action, "audit.chain.opened") == 0 ||
	    strcmp(r->action, "audit.chain.crossref") == 0) &&
	    (err = crossrefs_parse(r->seq, r->detail, &w->refs, &w->nrefs, &w->caprefs)) != CS_OK) {
		if (err == CS_ENOMEM)
			return err;
		broken(res, r->seq, "its cross-references cannot be read");
		goto done;
	}
	if (r->action != NULL && strcmp(r->action, "master-key-rotated") == 0)
		w->rotated = r->seq;
	memcpy(ch->prev, link, AUDIT_LINK_LEN);
	ch->last = r->seq;
	res->entries++;
	res->head.seq = r->seq;
	hex_encode(link, AUDIT_LINK_LEN, res->head.hex);
	w->expect = r->seq + 1;
done:
	*stop = !res->ok;
	return CS_OK;
}

/* The references by chain, then made after the last rotation or not, then
 * newest named first (verify_crossrefs checks the first of each group). */
static int crossref_order(const void *a, const void *b)
{
	const struct crossref *x = a, *y = b;
	if (x->chain != y->chain)
		return x->chain < y->chain ? -1 : 1;
	if (x->after != y->after)
		return x->after ? 1 : -1;
	if (x->seq != y->seq)
		return x->seq > y->seq ? -1 : 1;
	return (x->from > y->from) - (x->from < y->from);
}

/* Each chain's first entry, and its audit.chain.crossref entries, vouched
 * for the other chains' newest entries: each must still be there with that
 * link, or have been pruned.  A reference made before the last master-key
 * rotation names a link the rotation re-made: the entry only has to be
 * there (as for published heads before AUDIT_ROTATED_MARK); its content is
 * held by its own chain.  Of the references to one chain (on one side of
 * the rotation) only the newest named is looked up: the chain's own walk
 * found every entry of it before that one there and linked, so the older
 * ones hold when it does -- one look-up a chain, not one a reference. */
static enum cs_err verify_crossrefs(struct store_conn *c, struct verify_walk *w, int64_t through)
{
	struct audit_verify_result *res = w->res;
	for (size_t i = 0; i < w->nrefs; i++)
		w->refs[i].after = w->refs[i].from > w->rotated;
	if (w->nrefs > 1)
		qsort(w->refs, w->nrefs, sizeof *w->refs, crossref_order);
	for (size_t i = 0, group; i < w->nrefs && res->ok; i += group) {
		const struct crossref *r = &w->refs[i];
		unsigned char link[AUDIT_LINK_LEN];
		enum cs_err e;
		for (group = 1; i + group < w->nrefs && w->refs[i + group].chain == r->chain &&
		    w->refs[i + group].after == r->after; group++)
			;
		if (r->seq <= through)
			continue;                /* pruned, with everything before it */
		e = store_audit_link_at(c, r->seq, link);
		res->crossref_lookups++;
		if (e == CS_ENOENT) {
			broken(res, r->from, "it names entry %" PRId64 " of chain %" PRId64 ", which is "
			    "missing (cut off?)", r->seq, r->chain);
			res->head_missing = 1;
		} else if (e != CS_OK) {
			return e;
		} else if (r->after && CRYPTO_memcmp(link, r->link, AUDIT_LINK_LEN) != 0) {
			broken(res, r->from, "it names entry %" PRId64 " of chain %" PRId64 " with "
			    "another link than the entry has", r->seq, r->chain);
		} else {
			/* The group's older references: pruned ones are not "present". */
			for (size_t j = i; j < i + group; j++)
				res->crossrefs += w->refs[j].seq > through;
		}
	}
	return CS_OK;
}

enum cs_err audit_verify(struct store_conn *c, const struct master_key *mk,
    const struct audit_head *want, struct audit_verify_result *res)
{
	enum cs_err err;
	struct verify_walk w = { .mk = mk, .want = want, .res = res, .expect = 1, .zero_only = true };
	int64_t bad = 0, through = 0;

	if (c == NULL || mk == NULL || res == NULL)
		return CS_EINVAL;
	memset(res, 0, sizeof *res);
	{
		unsigned char zero[AUDIT_LINK_LEN] = { 0 };
		hex_encode(zero, AUDIT_LINK_LEN, res->head.hex);
	}
	if (want != NULL && (want->seq < 0 || hex_decode_link(want->hex, w.want_link) != CS_OK))
		return CS_EINVAL;
	if ((err = seal_derive_key(mk, AUDIT_KEY_PURPOSE, w.key)) != CS_OK)
		return err;
	res->ok = 1;
	if ((err = chains_load(c, w.key, &w.cs, &bad, &through)) != CS_OK)
		goto out;
	if (bad != 0) {
		broken(res, bad, "the anchor of the pruned prefix does not verify "
		    "(moved or rewritten?)");
		goto out;
	}
	if (through > 0) {
		/* A pruned log starts after its anchors: each chain's first kept
		 * entry must link to its chain's anchor. */
		struct chain_at *zero = chain_get(&w.cs, 0);
		if (zero == NULL) {
			err = CS_ENOMEM;
			goto out;
		}
		if (w.cs.n > 1 || zero->anchor == 0)
			w.zero_only = false;     /* other chains were pruned too: gaps */
		w.expect = zero->anchor + 1;
		res->anchor = through;
		res->head.seq = through;
		for (size_t i = 0; i < w.cs.n; i++)
			if (w.cs.v[i].anchor == through)
				hex_encode(w.cs.v[i].prev, AUDIT_LINK_LEN, res->head.hex);
		if (want != NULL && want->seq > 0 && want->seq <= through) {
			/* An expected head at or before an anchor: only an anchor itself
			 * can still be compared. */
			w.want_seen = 1;
			for (size_t i = 0; i < w.cs.n; i++)
				if (w.cs.v[i].anchor == want->seq &&
				    CRYPTO_memcmp(w.cs.v[i].prev, w.want_link, AUDIT_LINK_LEN) != 0) {
					broken(res, want->seq, "its link differs from the expected head's");
					goto out;
				}
		}
	}
	if ((err = each_row(c, verify_row, &w)) != CS_OK)
		goto out;
	res->chains = (int64_t)w.cs.n;
	if (res->ok && (err = verify_crossrefs(c, &w, through)) != CS_OK)
		goto out;
	if (res->ok && want != NULL && want->seq > 0 && !w.want_seen) {
		broken(res, want->seq, "head %" PRId64 " missing: the log ends at entry %" PRId64
		    " (cut off?)", want->seq, res->head.seq);
		res->head_missing = 1;
	}
out:
	OPENSSL_cleanse(w.key, sizeof w.key);
	chains_free(&w.cs);
	free(w.refs);
	return err;
}

/* --- prune --------------------------------------------------------------- */

enum cs_err audit_prune(struct store_conn *c, int64_t before, int64_t keep, int64_t limit,
    int64_t now, int64_t *removed)
{
	unsigned char key[AUDIT_LINK_LEN], link[AUDIT_LINK_LEN], newest_link[AUDIT_LINK_LEN];
	char kid[MASTER_KID_LEN + 1];
	struct chains cs = { 0 };
	struct store_audit_row *rows = NULL;
	size_t n = 0, newest_len = 0;
	int64_t last = 0, count = 0, bad = 0, through = 0, newest = 0;
	enum cs_err err;
	bool in_tx = false;

	if (c == NULL || removed == NULL || limit < 1 || before < 0 || keep < 0)
		return CS_EINVAL;
	if ((err = chain_key(key, kid)) != CS_OK)
		return err;
	if ((err = store_begin(c)) != CS_OK)
		goto out;
	in_tx = true;
	/* Where each chain starts: after its anchor.  SECURITY: every anchor is
	 * verified first, and every entry removed, so pruning can never hide a
	 * rewritten entry: a log that does not verify is left as it is, for
	 * `consentd audit verify` to report. */
	if ((err = store_audit_last(c, &newest, newest_link, &newest_len)) != CS_OK ||
	    (err = chains_load(c, key, &cs, &bad, &through)) != CS_OK)
		goto out;
	if (bad != 0) {
		log_msg(LOG_ERROR, "audit: the anchor does not verify; not pruning");
		err = CS_ECRYPTO;
		goto out;
	}
	/* From the oldest entry left, not from the anchors: with many writers an
	 * entry numbered before a prune's last may commit after it (numbers are
	 * taken as a transaction begins to append), and is pruned, verified like
	 * any, by the next. */
	if ((err = store_audit_page(c, 0, (size_t)limit, &rows, &n)) != CS_OK)
		goto out;
	for (size_t i = 0; i < n; i++) {
		struct audit_entry e;
		struct chain_at *ch;
		/* The newest entry is never pruned: the log's head stays readable
		 * (GET /readyz, the published heads).  A chain's own newest entry may
		 * go: its anchor then holds the link its next entry follows. */
		if (rows[i].seq >= newest)
			break;
		if (!(before > 0 && rows[i].ts < before) && !(keep > 0 && rows[i].seq <= newest - keep))
			break;
		if ((ch = chain_get(&cs, rows[i].chain)) == NULL) {
			err = CS_ENOMEM;
			goto out;
		}
		row_entry(&rows[i], &e);
		err = CS_ECRYPTO;
		if (rows[i].chain < 0 || rows[i].link == NULL || rows[i].link_len != AUDIT_LINK_LEN ||
		    audit_link_chain(key, ch->prev, rows[i].seq, rows[i].chain, rows[i].prev_seq, &e,
		    link) != CS_OK ||
		    CRYPTO_memcmp(link, rows[i].link, AUDIT_LINK_LEN) != 0) {
			log_msg(LOG_ERROR, "audit: entry %" PRId64 " does not verify; not pruning",
			    rows[i].seq);
			goto out;
		}
		memcpy(ch->prev, link, AUDIT_LINK_LEN);
		ch->pruned = rows[i].seq;
		last = rows[i].seq;
		count++;
	}
	if (count == 0) {
		err = CS_OK;
		goto out;
	}
	if ((err = store_audit_prune(c, last)) != CS_OK)
		goto out;
	/* Each chain pruned now is anchored at its last entry removed, with the
	 * anchor's MAC under the chain key. */
	for (size_t i = 0; i < cs.n; i++) {
		struct store_audit_anchor a;
		if (cs.v[i].pruned == 0)
			continue;
		memset(&a, 0, sizeof a);
		a.chain = cs.v[i].chain;
		a.seq = cs.v[i].pruned;
		memcpy(a.link, cs.v[i].prev, AUDIT_LINK_LEN);
		a.pruned_at = now;
		if ((err = str_fmt(a.master_kid, sizeof a.master_kid, "%s", kid)) != CS_OK ||
		    (err = anchor_mac(key, &a, a.mac)) != CS_OK ||
		    (err = store_audit_anchor_set(c, &a)) != CS_OK)
			goto out;
	}
	if ((err = store_commit(c)) != CS_OK)
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
	chains_free(&cs);
	OPENSSL_cleanse(key, sizeof key);
	return err;
}

/* audit_relink's walk: the new chain key and each chain's link before. */
struct relink_walk {
	struct store_conn       *c;
	const struct master_key *new_mk;
	unsigned char key[AUDIT_LINK_LEN];
	struct chains cs;
};

static enum cs_err relink_row(void *arg, const struct store_audit_row *r, bool *stop)
{
	struct relink_walk *w = arg;
	unsigned char link[AUDIT_LINK_LEN];
	struct audit_entry e;
	struct chain_at *ch;
	enum cs_err err;
	(void)stop;
	if ((ch = chain_get(&w->cs, r->chain)) == NULL)
		return CS_ENOMEM;
	row_entry(r, &e);
	if ((err = audit_link_chain(w->key, ch->prev, r->seq, r->chain, r->prev_seq, &e,
	    link)) != CS_OK ||
	    (err = store_audit_set_link(w->c, r->seq, link, w->new_mk->kid)) != CS_OK)
		return err;
	memcpy(ch->prev, link, AUDIT_LINK_LEN);
	return CS_OK;
}

enum cs_err audit_relink(struct store_conn *c, const struct master_key *new_mk)
{
	enum cs_err err;
	struct relink_walk w = { .c = c, .new_mk = new_mk };
	struct store_audit_anchor *a = NULL;
	size_t n = 0;

	if (c == NULL || new_mk == NULL)
		return CS_EINVAL;
	if ((err = seal_derive_key(new_mk, AUDIT_KEY_PURPOSE, w.key)) != CS_OK)
		return err;
	/* A pruned chain goes on from its anchor's link (the link itself stays:
	 * it was the old key's); the anchor's MAC moves to the new key. */
	if ((err = store_audit_anchors(c, &a, &n)) != CS_OK)
		goto out;
	for (size_t i = 0; i < n; i++) {
		struct chain_at *ch = chain_get(&w.cs, a[i].chain);
		if (ch == NULL) {
			err = CS_ENOMEM;
			goto out;
		}
		memcpy(ch->prev, a[i].link, AUDIT_LINK_LEN);
		if ((err = str_fmt(a[i].master_kid, sizeof a[i].master_kid, "%s", new_mk->kid)) != CS_OK ||
		    (err = anchor_mac(w.key, &a[i], a[i].mac)) != CS_OK ||
		    (err = store_audit_anchor_set(c, &a[i])) != CS_OK)
			goto out;
	}
	err = each_row(c, relink_row, &w);
out:
	free(a);
	chains_free(&w.cs);
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
