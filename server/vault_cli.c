/* vault_cli.c -- `consentd vault rekey -c FILE --new-key-file NEW`: master-key
 * rotation in one transaction (re-seal every signing key, vault record and
 * outbox entry, re-link the audit chain), argument parsing, and telling the
 * operator what happened.  It must never print key material, a token or a
 * sealed value, and never touches SQL (store_audit.c does). */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "audit.h"
#include "audit_cli.h"
#include "audit_head.h"
#include "buf.h"
#include "config.h"
#include "seal.h"
#include "store.h"
#include "store_audit.h"
#include "vault.h"
#include "vault_cli.h"

/* The seal.h purposes of jwt.c and vault.c.  SECURITY: they and the vault's
 * additional data (vault_aad_encode) must match those modules exactly, or a rotated
 * value no longer opens; test_audit and audit.test.js open rotated values
 * through jwt.c and vault.c to hold them to it. */
#define SIGNING_KEY_PURPOSE "signing-key"
#define VAULT_PURPOSE "vault"

static void vault_usage(FILE *f)
{
	fprintf(f,
	    "usage: consentd vault rekey -c FILE --new-key-file NEW\n"
	    "       with every server stopped: verify the audit chain under the current master\n"
	    "       key, then in one transaction re-seal every signing key and vault token and\n"
	    "       re-link the audit chain under NEW.  Then replace the master key with NEW.\n");
}

/* One row's re-sealing: from which key to which, for what purpose, and the
 * additional data both seals bind. */
struct reseal {
	const struct master_key *old, *new_mk;
	const char              *purpose;
	const unsigned char     *aad;
	size_t                   aad_len;
};

/* Opens blob under rs->old and seals it again under rs->new_mk with the same aad. */
static enum cs_err reseal_one(const struct reseal *rs, const unsigned char *blob,
    size_t blob_len, unsigned char **out, size_t *out_len)
{
	unsigned char *pt = NULL;
	size_t n = 0;
	enum cs_err e = unseal(rs->old, rs->purpose, rs->aad, rs->aad_len, blob, blob_len, &pt, &n);
	if (e != CS_OK)
		return e;
	e = seal(rs->new_mk, rs->purpose, rs->aad, rs->aad_len, pt, n, out, out_len);
	wipe_free_n(pt, n + 1);
	return e;
}

static const char *const kind_name[SEALED__MAX] = {
	[SEALED_SIGNING_KEY] = "signing key",
	[SEALED_VAULT_RECORD] = "vault record",
	[SEALED_VAULT_OUTBOX] = "vault outbox entry",
};

/* Re-seals every row of one kind; *count gets how many. */
static enum cs_err reseal_kind(struct store_conn *c, enum store_sealed_kind kind,
    const struct master_key *old, const struct master_key *new_mk, size_t *count)
{
	struct store_sealed *v = NULL;
	size_t n = 0;
	enum cs_err e;

	if ((e = store_sealed_list(c, kind, &v, &n)) != CS_OK)
		return e;
	for (size_t i = 0; i < n; i++) {
		struct store_sealed *r = &v[i];
		unsigned char *aad = NULL, *a = NULL, *b = NULL;
		size_t aad_len = 0, a_len = 0, b_len = 0;
		const char *purpose = kind == SEALED_SIGNING_KEY ? SIGNING_KEY_PURPOSE : VAULT_PURPOSE;

		if (r->master_kid == NULL || strcmp(r->master_kid, old->kid) != 0) {
			fprintf(stderr, "consentd vault rekey: %s %s is sealed under master key %s, "
			    "not the current %s\n", kind_name[kind], r->id,
			    r->master_kid ? r->master_kid : "?", old->kid);
			e = CS_ECRYPTO;
			goto out;
		}
		if (kind == SEALED_SIGNING_KEY) {
			aad_len = strlen(r->id);
			if ((aad = malloc(aad_len + 1)) == NULL) {
				e = CS_ENOMEM;
				goto next;
			}
			memcpy(aad, r->id, aad_len + 1);
		} else if ((e = vault_aad_encode(r->record_id, r->consent_id,
		    r->subject, r->resource, &aad, &aad_len)) != CS_OK) {
			goto next;
		}
		if (r->a == NULL) {
			e = CS_EINVAL;
			goto next;
		}
		const struct reseal rs = {
			.old = old, .new_mk = new_mk, .purpose = purpose, .aad = aad, .aad_len = aad_len,
		};
		if ((e = reseal_one(&rs, r->a, r->a_len, &a, &a_len)) != CS_OK)
			goto next;
		if (r->b != NULL && (e = reseal_one(&rs, r->b, r->b_len, &b, &b_len)) != CS_OK)
			goto next;
		e = store_sealed_update(c, kind, r->id, &(struct store_sealed_blobs){ .a = a,
		    .a_len = a_len, .b = b, .b_len = b_len, .master_kid = new_mk->kid });
next:
		if (e != CS_OK)
			fprintf(stderr, "consentd vault rekey: %s %s: %s\n", kind_name[kind], r->id,
			    cs_strerror(e));
		free(aad);
		free(a);
		free(b);
		if (e != CS_OK)
			goto out;
	}
	*count = n;
	e = CS_OK;
out:
	store_sealed_free(v, n);
	return e;
}

enum cs_err vault_rekey(struct store_conn *c, const struct master_key *old,
    const struct master_key *new_mk, int64_t now, struct rekey_report *report)
{
	struct rekey_report rep;
	struct audit_verify_result res;
	char detail[64];
	enum cs_err e;

	if (c == NULL || old == NULL || new_mk == NULL || report == NULL)
		return CS_EINVAL;
	memset(&rep, 0, sizeof rep);
	if (strcmp(old->kid, new_mk->kid) == 0)
		return CS_EEXIST;
	/* SECURITY: one transaction for everything: interrupted or failed, the
	 * database keeps every value sealed, and every link made, under the old key. */
	if ((e = store_begin(c)) != CS_OK)
		return e;
	if ((e = audit_verify(c, old, NULL, &res)) != CS_OK)
		goto out;
	if (!res.ok) {
		rep.broken = res.broken;
		/* res.why and rep.why are both 160 bytes: it always fits. */
		if ((e = str_fmt(rep.why, sizeof rep.why, "%s", res.why)) != CS_OK)
			goto out;
		e = CS_EPERM;
		goto out;
	}
	rep.audit_entries = res.entries;
	if ((e = reseal_kind(c, SEALED_SIGNING_KEY, old, new_mk, &rep.signing_keys)) != CS_OK ||
	    (e = reseal_kind(c, SEALED_VAULT_RECORD, old, new_mk, &rep.vault_records)) != CS_OK ||
	    (e = reseal_kind(c, SEALED_VAULT_OUTBOX, old, new_mk, &rep.outbox_entries)) != CS_OK)
		goto out;
	if ((e = audit_relink(c, new_mk)) != CS_OK)
		goto out;
	if ((e = audit_set_master_key(new_mk)) != CS_OK)
		goto out;
	if ((e = str_fmt(detail, sizeof detail, "old=%s new=%s", old->kid, new_mk->kid)) != CS_OK)
		goto out;
	const struct audit_entry ae = {
		.ts = now, .actor = "admin:cli", .action = "master-key-rotated",
		.outcome = "ok", .detail = detail,
	};
	if ((e = audit_append(c, &ae)) != CS_OK)
		goto out;
	e = store_commit(c);
out:
	if (e != CS_OK)
		store_rollback(c);
	*report = rep;
	return e;
}

static int vault_rekey_cmd(const struct config *cfg, const char *new_file)
{
	struct master_key old, nk;
	struct store *s = NULL;
	struct store_conn *c = NULL;
	struct rekey_report rep;
	struct audit_head head;
	enum cs_err e;
	int rc = 1;

	memset(&old, 0, sizeof old);
	memset(&nk, 0, sizeof nk);
	if (audit_cli_load_master("consentd vault rekey", cfg, &old) != 0)
		goto out;
	if ((e = master_key_load(new_file, NULL, &nk)) != CS_OK) {
		fprintf(stderr, "consentd vault rekey: new master key %s: %s\n", new_file, cs_strerror(e));
		goto out;
	}
	if (audit_cli_open_store("consentd vault rekey", cfg, &s, &c) != 0)
		goto out;
	/* SECURITY: the rotation re-links every entry, after which the heads
	 * published so far can only be checked for presence: check them all
	 * under the old key first, so a cut-off tail is not rotated away. */
	if (cfg->audit_head_file != NULL && access(cfg->audit_head_file, F_OK) == 0) {
		struct audit_verify_result res;
		if ((e = audit_verify(c, &old, NULL, &res)) != CS_OK) {
			fprintf(stderr, "consentd vault rekey: %s\n", cs_strerror(e));
			goto out;
		}
		if (res.ok && audit_cli_check_heads("consentd vault rekey", &old, c,
		    cfg->audit_head_file, &res.head, 1, NULL) != 0) {
			fprintf(stderr, "consentd vault rekey: refused: the database is behind the heads "
			    "published in %s; nothing changed\n", cfg->audit_head_file);
			goto out;
		}
	}
	e = vault_rekey(c, &old, &nk, (int64_t)time(NULL), &rep);
	if (e == CS_EEXIST) {
		fprintf(stderr, "consentd vault rekey: the new key is the current one (%s)\n", old.kid);
		goto out;
	}
	if (e == CS_EPERM) {
		fprintf(stderr, "audit: entry %" PRId64 " is broken (%s)\n", rep.broken, rep.why);
		fprintf(stderr, "consentd vault rekey: refused: the audit chain does not verify under "
		    "master key %s; nothing changed\n", old.kid);
		goto out;
	}
	if (e != CS_OK) {
		fprintf(stderr, "consentd vault rekey: %s; rolled back, nothing changed "
		    "(still master key %s)\n", cs_strerror(e), old.kid);
		goto out;
	}
	printf("master key %s -> %s: re-sealed %zu signing keys, %zu vault records, "
	    "%zu outbox entries; re-linked %" PRId64 " audit entries\n", old.kid, nk.kid,
	    rep.signing_keys, rep.vault_records, rep.outbox_entries, rep.audit_entries);
	if (audit_head(c, &head) == CS_OK) {
		printf("audit head %" PRId64 ":%s\n", head.seq, head.hex);
		if (cfg->audit_head_file != NULL &&
		    audit_head_file_rotated(cfg->audit_head_file, old.kid, nk.kid, &head) != CS_OK)
			fprintf(stderr, "consentd vault rekey: cannot append to %s; add these lines "
			    "yourself before starting a server:\n" AUDIT_ROTATED_MARK " old=%s new=%s\n%"
			    PRId64 ":%s\n", cfg->audit_head_file, old.kid, nk.kid, head.seq, head.hex);
		/* Many nodes on one database: each publishes to a head file of its
		 * own, whose old heads carry the old links; each needs the mark
		 * too, or it stays unready (docs/deploy.md "Rotating the master
		 * key"). */
		printf("other nodes on this database: append these two lines to each one's "
		    "[audit] head_file before starting it:\n" AUDIT_ROTATED_MARK " old=%s new=%s\n%"
		    PRId64 ":%s\n", old.kid, nk.kid, head.seq, head.hex);
	}
	printf("now replace the master key (%s or CONSENTD_KEYS_MASTER_KEY) with %s, "
	    "then start the servers\n", cfg->master_key_file ? cfg->master_key_file : "-", new_file);
	rc = 0;
out:
	audit_clear_key();
	store_close(s);
	master_key_clear(&old);
	master_key_clear(&nk);
	return rc;
}

int vault_cli_main(int argc, char *const *argv)
{
	const char *cfgpath = NULL, *new_file = NULL;
	struct config *cfg = NULL;
	int rc;

	if (argc < 1) {
		vault_usage(stderr);
		return 2;
	}
	if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
		vault_usage(stdout);
		return 0;
	}
	if (strcmp(argv[0], "rekey") != 0) {
		vault_usage(stderr);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-c") == 0 && i + 1 < argc && cfgpath == NULL)
			cfgpath = argv[++i];
		else if (strcmp(argv[i], "--new-key-file") == 0 && i + 1 < argc && new_file == NULL)
			new_file = argv[++i];
		else {
			vault_usage(stderr);
			return 2;
		}
	}
	if (cfgpath == NULL || new_file == NULL) {
		vault_usage(stderr);
		return 2;
	}
	if (config_load(cfgpath, stderr, &cfg) != CS_OK)
		return 1;
	rc = vault_rekey_cmd(cfg, new_file);
	config_free(cfg);
	return rc;
}
