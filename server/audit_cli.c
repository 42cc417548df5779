/* audit_cli.c -- `consentd audit verify|export -c FILE`: argument parsing,
 * opening config, store and master key, and telling the operator what
 * happened; also the store, master-key and heads-file steps that `consentd
 * vault rekey` (vault_cli.c) shares.  It must never print key material, a
 * token or a sealed value, and never touches SQL (store_audit.c does). */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit.h"
#include "audit_cli.h"
#include "audit_head.h"
#include "app.h"
#include "config.h"
#include "seal.h"
#include "store.h"
#include "store_audit.h"

static void audit_usage(FILE *f)
{
	fprintf(f,
	    "usage: consentd audit verify -c FILE [--head N:LINK] [--heads HEADS]\n"
	    "                             walk the chain; with --head, also require the head a\n"
	    "                             server logged (\"audit head N:LINK\") to be present;\n"
	    "                             with --heads, every head listed in HEADS ([audit]\n"
	    "                             head_file, or log lines \"audit head N:LINK\")\n"
	    "       consentd audit export -c FILE --since T\n"
	    "                             entries with ts >= T (UTC seconds or\n"
	    "                             2006-01-02T15:04:05Z) as JSON lines\n");
}

int audit_cli_open_store(const char *who, const struct config *cfg, struct store **s,
    struct store_conn **c)
{
	enum cs_err e = app_store_open(cfg, STORE_SCHEMA_REQUIRE, s);
	if (e != CS_OK) {
		fprintf(stderr, "%s: database %s: %s\n", who, app_db_name(cfg), cs_strerror(e));
		return 1;
	}
	if ((*c = store_conn(*s)) == NULL) {
		fprintf(stderr, "%s: database %s: cannot connect\n", who, app_db_name(cfg));
		return 1;
	}
	return 0;
}

int audit_cli_load_master(const char *who, const struct config *cfg, struct master_key *mk)
{
	enum cs_err e = master_key_load(cfg->master_key_file, cfg->master_key_b64, mk);
	if (e != CS_OK) {
		fprintf(stderr, "%s: master key (%s or CONSENTD_KEYS_MASTER_KEY): %s\n", who,
		    cfg->master_key_file, cs_strerror(e));
		return 1;
	}
	return 0;
}

/* --- audit verify / export ----------------------------------------------- */

int audit_cli_check_heads(const char *who, const struct master_key *mk, struct store_conn *c,
    const char *path, const struct audit_head *verified, int empty_ok, int64_t *heads)
{
	struct audit_heads_result hr;
	FILE *f;
	enum cs_err e;
	int rc = 1;

	/* The anchors that may excuse a pruned head are checked under mk's
	 * chain key (audit_pruned_through). */
	if ((e = audit_set_master_key(mk)) != CS_OK) {
		fprintf(stderr, "%s: master key: %s\n", who, cs_strerror(e));
		return 1;
	}
	if ((f = fopen(path, "re")) == NULL) {
		fprintf(stderr, "%s: heads file %s: %s\n", who, path, strerror(errno));
		return 1;
	}
	e = audit_heads_check(c, f, verified, &hr);
	if (e == CS_ENOENT && empty_ok) {
		rc = 0;
	} else if (e == CS_ENOENT) {
		fprintf(stderr, "%s: heads file %s lists no head\n", who, path);
	} else if (e == CS_EINVAL || e == CS_ETOOBIG || (e == CS_EIO && hr.line > 0)) {
		fprintf(stderr, "%s: heads file %s: %s\n", who, path, hr.why);
	} else if (e != CS_OK) {
		fprintf(stderr, "%s: heads file %s: %s\n", who, path, cs_strerror(e));
	} else if (!hr.ok) {
		fprintf(stderr, "audit: head %" PRId64 ":%s %s (%s)\n", hr.bad.seq, hr.bad.hex,
		    hr.missing ? "missing" : "not matched", hr.why);
	} else {
		rc = 0;
	}
	if (rc == 0 && hr.pruned > 0)
		printf("audit: %" PRId64 " head(s) listed in %s lie before the anchor of the pruned "
		    "prefix (not compared)\n", hr.pruned, path);
	if (hr.torn > 0)
		fprintf(stderr, "%s: warning: heads file %s: %" PRId64 " line(s) cut short by a crash "
		    "were skipped\n", who, path, hr.torn);
	if (heads != NULL)
		*heads = hr.heads;
	fclose(f);
	return rc;
}

static int audit_verify_cmd(const struct config *cfg, const char *head_arg, const char *heads_arg)
{
	struct master_key mk;
	struct store *s = NULL;
	struct store_conn *c = NULL;
	struct audit_head want;
	struct audit_verify_result res;
	enum cs_err e;
	int64_t heads = 0;
	int rc = 1;

	memset(&mk, 0, sizeof mk);
	if (head_arg != NULL && audit_head_parse(head_arg, &want) != CS_OK) {
		fprintf(stderr, "consentd audit verify: --head wants N:LINK (64 hex digits), "
		    "as the server logs it\n");
		return 2;
	}
	if (audit_cli_load_master("consentd audit", cfg, &mk) != 0 ||
	    audit_cli_open_store("consentd audit", cfg, &s, &c) != 0)
		goto out;
	if ((e = audit_verify(c, &mk, head_arg != NULL ? &want : NULL, &res)) != CS_OK) {
		fprintf(stderr, "consentd audit verify: %s\n", cs_strerror(e));
		goto out;
	}
	if (!res.ok) {
		if (res.head_missing)
			fprintf(stderr, "audit: head %" PRId64 " missing (%s)\n", res.broken, res.why);
		else
			fprintf(stderr, "audit: entry %" PRId64 " is broken (%s)\n", res.broken, res.why);
		fprintf(stderr, "audit: verified up to %" PRId64 ":%s\n", res.head.seq, res.head.hex);
		goto out;
	}
	if (heads_arg != NULL &&
	    audit_cli_check_heads("consentd audit verify", &mk, c, heads_arg, &res.head, 0,
	    &heads) != 0) {
		fprintf(stderr, "audit: verified up to %" PRId64 ":%s\n", res.head.seq, res.head.hex);
		goto out;
	}
	if (res.anchor > 0)
		printf("audit: entries through %" PRId64 " were pruned; the chain starts at its "
		    "anchor, which verifies\n", res.anchor);
	printf("audit: %" PRId64 " entries intact under master key %s; head %" PRId64 ":%s\n",
	    res.entries, mk.kid, res.head.seq, res.head.hex);
	if (res.chains > 1 || res.crossrefs > 0)
		printf("audit: %" PRId64 " chains (one per writer), %" PRId64 " cross-references "
		    "between them present\n", res.chains, res.crossrefs);
	if (heads_arg != NULL)
		printf("audit: all %" PRId64 " heads listed in %s are present\n", heads, heads_arg);
	rc = 0;
out:
	store_close(s);
	master_key_clear(&mk);
	return rc;
}

/* T as UTC seconds or "YYYY-MM-DDTHH:MM:SSZ". */
static enum cs_err parse_time(const char *t, int64_t *out)
{
	struct tm tm;
	int64_t v = 0;
	const char *p = t;

	if (t == NULL || *t == '\0')
		return CS_EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (INT64_MAX - (*p - '0')) / 10)
			return CS_EINVAL;
		v = v * 10 + (*p - '0');
	}
	if (*p == '\0') {
		*out = v;
		return CS_OK;
	}
	memset(&tm, 0, sizeof tm);
	const char *end = strptime(t, "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (end == NULL || *end != '\0')
		return CS_EINVAL;
	*out = (int64_t)timegm(&tm);
	return CS_OK;
}

static enum cs_err print_line(void *arg, const char *json)
{
	(void)arg;
	return printf("%s\n", json) < 0 ? CS_EIO : CS_OK;
}

static int audit_export_cmd(const struct config *cfg, const char *since_arg)
{
	struct store *s = NULL;
	struct store_conn *c = NULL;
	int64_t since = 0;
	enum cs_err e;
	int rc = 1;

	if (parse_time(since_arg, &since) != CS_OK) {
		fprintf(stderr, "consentd audit export: --since wants UTC seconds or "
		    "2006-01-02T15:04:05Z\n");
		return 2;
	}
	if (audit_cli_open_store("consentd audit", cfg, &s, &c) != 0)
		goto out;
	if ((e = audit_export(c, since, print_line, NULL)) != CS_OK) {
		fprintf(stderr, "consentd audit export: %s\n", cs_strerror(e));
		goto out;
	}
	if (fflush(stdout) != 0)
		goto out;
	rc = 0;
out:
	store_close(s);
	return rc;
}

int audit_cli_main(int argc, char *const *argv)
{
	const char *cmd, *cfgpath = NULL, *head = NULL, *heads = NULL, *since = NULL;
	struct config *cfg = NULL;
	int rc;

	if (argc < 1) {
		audit_usage(stderr);
		return 2;
	}
	cmd = argv[0];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		audit_usage(stdout);
		return 0;
	}
	int verify = strcmp(cmd, "verify") == 0, export = strcmp(cmd, "export") == 0;
	if (!verify && !export) {
		audit_usage(stderr);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-c") == 0 && i + 1 < argc && cfgpath == NULL)
			cfgpath = argv[++i];
		else if (verify && strcmp(argv[i], "--head") == 0 && i + 1 < argc && head == NULL)
			head = argv[++i];
		else if (verify && strcmp(argv[i], "--heads") == 0 && i + 1 < argc && heads == NULL)
			heads = argv[++i];
		else if (export && strcmp(argv[i], "--since") == 0 && i + 1 < argc && since == NULL)
			since = argv[++i];
		else {
			audit_usage(stderr);
			return 2;
		}
	}
	if (cfgpath == NULL || (export && since == NULL)) {
		audit_usage(stderr);
		return 2;
	}
	if (config_load(cfgpath, stderr, &cfg) != CS_OK)
		return 1;
	rc = verify ? audit_verify_cmd(cfg, head, heads) : audit_export_cmd(cfg, since);
	config_free(cfg);
	return rc;
}
