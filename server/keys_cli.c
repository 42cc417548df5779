/* keys_cli.c -- `consentd keys rotate|revoke|list -c FILE`: argument parsing,
 * opening config, store and master key, and telling the operator what
 * happened.  The key semantics live in jwt.c; this file must never print key
 * material or touch SQL. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "app.h"
#include "config.h"
#include "jwt.h"
#include "keys_cli.h"
#include "seal.h"
#include "store.h"

static void keys_usage(FILE *f)
{
	fprintf(f,
	    "usage: consentd keys rotate -c FILE      publish a new signing key now; it signs\n"
	    "                                         after [keys] publish_lead\n"
	    "       consentd keys revoke KID -c FILE  withdraw a key at once\n"
	    "       consentd keys list -c FILE        every key that is not revoked, and its state\n"
	    "Running servers pick changes up within 60 s, or at once on SIGHUP.\n");
}

/* The store of cfg, with the calling thread's connection. */
static int open_store(const struct config *cfg, struct store **s, struct store_conn **c)
{
	enum cs_err e = app_store_open(cfg, STORE_SCHEMA_REQUIRE, s);
	if (e != CS_OK) {
		fprintf(stderr, "consentd keys: database %s: %s\n", app_db_name(cfg), cs_strerror(e));
		return 1;
	}
	if ((*c = store_conn(*s)) == NULL) {
		fprintf(stderr, "consentd keys: database %s: cannot connect\n", app_db_name(cfg));
		return 1;
	}
	return 0;
}

static int keys_rotate(const struct config *cfg, int64_t now)
{
	struct master_key mk;
	struct store *s = NULL;
	struct store_conn *c = NULL;
	struct keyring *kr = NULL;
	char *kid = NULL, when[STR_TIME_LEN];
	enum cs_err e;
	int rc = 1;

	memset(&mk, 0, sizeof mk);
	e = master_key_load(cfg->master_key_file, cfg->master_key_b64, &mk);
	if (e != CS_OK) {
		fprintf(stderr, "consentd keys: master key (%s or CONSENTD_KEYS_MASTER_KEY): %s\n",
		    cfg->master_key_file, cs_strerror(e));
		goto out;
	}
	if (open_store(cfg, &s, &c) != 0)
		goto out;
	/* Load the ring first, as a server would: this proves the master key
	 * opens the published keys (a key sealed under another one would stop
	 * every server from loading), and gives a first key to rotate from. */
	if ((e = keyring_load(c, &mk, now, cfg->grant_ttl, &kr)) != CS_OK) {
		fprintf(stderr, "consentd keys: signing keys: %s\n", cs_strerror(e));
		goto out;
	}
	const int64_t sign_after = now + cfg->publish_lead;  /* both bounded by config */
	if ((e = keyring_generate_key(c, &mk, now, sign_after, &kid)) != CS_OK) {
		fprintf(stderr, "consentd keys rotate: %s\n", cs_strerror(e));
		goto out;
	}
	printf("new signing key %s: published now, signs from %s (in %lld s; %s signs until then)\n",
	    kid, str_time(sign_after, when), (long long)cfg->publish_lead,
	    keyring_signing_kid(kr));
	printf("running servers publish it within 60 s, or at once on SIGHUP\n");
	rc = 0;
out:
	free(kid);
	keyring_free(kr);
	store_close(s);
	master_key_clear(&mk);
	return rc;
}

static int keys_revoke(const struct config *cfg, const char *kid, int64_t now)
{
	struct store *s = NULL;
	struct store_conn *c = NULL;
	char *next = NULL;
	enum cs_err e;
	int rc = 1;

	if (open_store(cfg, &s, &c) != 0)
		goto out;
	e = keyring_revoke_key(c, kid, now, cfg->grant_ttl, &next);
	if (e == CS_ENOENT) {
		fprintf(stderr, "consentd keys revoke: no unrevoked key has kid %s "
		    "(see consentd keys list)\n", kid);
		goto out;
	}
	if (e == CS_EPERM) {
		fprintf(stderr, "consentd keys revoke: refused: %s is the key that signs now and "
		    "no published key is ready to take over.\n"
		    "Run `consentd keys rotate`, wait until the new key signs (publish_lead), "
		    "then revoke.\n", kid);
		goto out;
	}
	if (e != CS_OK) {
		fprintf(stderr, "consentd keys revoke: %s\n", cs_strerror(e));
		goto out;
	}
	printf("revoked %s: withdrawn from the JWKS, and its tokens no longer verify\n", kid);
	printf("signing key now: %s\n", next != NULL ? next : "-");
	printf("running servers drop it within 60 s, or at once on SIGHUP\n");
	rc = 0;
out:
	free(next);
	store_close(s);
	return rc;
}

static int keys_list(const struct config *cfg, int64_t now)
{
	struct store *s = NULL;
	struct store_conn *c = NULL;
	struct store_key *ks = NULL;
	struct key_status *st = NULL;
	size_t n = 0;
	enum cs_err e;
	int rc = 1;
	char t1[STR_TIME_LEN], t2[STR_TIME_LEN], t3[STR_TIME_LEN];

	if (open_store(cfg, &s, &c) != 0)
		goto out;
	if ((e = store_keys_list(c, &ks, &n)) != CS_OK) {
		fprintf(stderr, "consentd keys list: %s\n", cs_strerror(e));
		goto out;
	}
	if (n > 0 && (st = calloc(n, sizeof *st)) == NULL) {
		fprintf(stderr, "consentd keys list: %s\n", cs_strerror(CS_ENOMEM));
		goto out;
	}
	keyring_classify(ks, n, now, cfg->grant_ttl, st);
	printf("%-43s  %-20s  %-20s  %s\n", "KID", "CREATED", "SIGN_AFTER", "STATE");
	for (size_t i = 0; i < n; i++) {
		printf("%-43s  %-20s  %-20s  %s", ks[i].kid, str_time(ks[i].created_at, t1),
		    str_time(ks[i].sign_after, t2), key_state_name(st[i].state));
		if (st[i].state == KEY_RETIRED_PUBLISHED)
			printf(" (published until %s)", str_time(st[i].unpublish_at, t3));
		else if (st[i].state == KEY_RETIRED)
			printf(" (unpublished since %s)", str_time(st[i].unpublish_at, t3));
		printf("\n");
	}
	if (n == 0)
		printf("(no keys yet: the server generates the first one when it starts)\n");
	rc = 0;
out:
	free(st);
	store_keys_free(ks, n);
	store_close(s);
	return rc;
}

int keys_cli_main(int argc, char *const *argv)
{
	const char *cmd, *cfgpath = NULL, *kid = NULL;
	struct config *cfg = NULL;
	int rc;

	if (argc < 1) {
		keys_usage(stderr);
		return 2;
	}
	cmd = argv[0];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		keys_usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "rotate") != 0 && strcmp(cmd, "revoke") != 0 && strcmp(cmd, "list") != 0) {
		keys_usage(stderr);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-c") == 0 && i + 1 < argc && cfgpath == NULL) {
			cfgpath = argv[++i];
		} else if (strcmp(cmd, "revoke") == 0 && kid == NULL && strcmp(argv[i], "-c") != 0 &&
		    argv[i][0] != '\0') {
			/* A kid is base64url, so it may well start with '-'. */
			kid = argv[i];
		} else {
			keys_usage(stderr);
			return 2;
		}
	}
	if (cfgpath == NULL || (strcmp(cmd, "revoke") == 0 && kid == NULL)) {
		keys_usage(stderr);
		return 2;
	}
	if (config_load(cfgpath, stderr, &cfg) != CS_OK)
		return 1;
	const int64_t now = (int64_t)time(NULL);
	if (strcmp(cmd, "rotate") == 0)
		rc = keys_rotate(cfg, now);
	else if (strcmp(cmd, "revoke") == 0)
		rc = keys_revoke(cfg, kid, now);
	else
		rc = keys_list(cfg, now);
	config_free(cfg);
	return rc;
}

/* --- consentd keygen ------------------------------------------------------ */

#define KEYGEN_DEFAULT_FILE "/etc/consentd/master.key"   /* [keys] master_key_file's default */

static void keygen_usage(FILE *f)
{
	fprintf(f,
	    "usage: consentd keygen [FILE]          create the master key at FILE (default\n"
	    "                                       " KEYGEN_DEFAULT_FILE ")\n"
	    "       consentd keygen -c CONFIG       create it at CONFIG's [keys] master_key_file\n"
	    "The key is 32 random bytes, mode 0600.  An existing file is never overwritten:\n"
	    "that would lose every secret sealed under it (to change keys: consentd vault rekey).\n");
}

/* Why file could not be made, and what to do: a missing or unwritable directory
 * is named (the package makes /etc/consentd; a source install does not). */
static void keygen_explain(const char *file, int err, enum cs_err e)
{
	char dir[4096];
	const char *slash = strrchr(file, '/');
	size_t n = slash == NULL ? 1 : slash == file ? 1 : (size_t)(slash - file);
	if (n >= sizeof dir)
		n = sizeof dir - 1;
	memcpy(dir, slash == NULL ? "." : file, n);
	dir[n] = '\0';
	if (err == ENOENT)
		fprintf(stderr, "consentd keygen: cannot create %s: the directory %s does not exist; "
		    "create it first (e.g. install -d -m 0750 %s, owned by the user consentd runs as), "
		    "or give another file: consentd keygen FILE\n", file, dir, dir);
	else if (err == EACCES || err == EPERM || err == EROFS)
		fprintf(stderr, "consentd keygen: cannot create %s: cannot write in %s (%s); run it as "
		    "a user who may, or give another file: consentd keygen FILE\n", file, dir,
		    strerror(err));
	else
		fprintf(stderr, "consentd keygen: cannot create %s: %s\n", file,
		    err != 0 ? strerror(err) : cs_strerror(e));
}

int keygen_main(int argc, char *const *argv)
{
	const char *file = NULL, *cfgpath = NULL;
	struct config *cfg = NULL;
	struct master_key mk;
	enum cs_err e;
	int rc = 1;

	memset(&mk, 0, sizeof mk);
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			keygen_usage(stdout);
			return 0;
		} else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc && cfgpath == NULL) {
			cfgpath = argv[++i];
		} else if (argv[i][0] != '-' && argv[i][0] != '\0' && file == NULL) {
			file = argv[i];
		} else {
			keygen_usage(stderr);
			return 2;
		}
	}
	if (file != NULL && cfgpath != NULL) {
		keygen_usage(stderr);
		return 2;
	}
	if (cfgpath != NULL) {
		if (config_load(cfgpath, stderr, &cfg) != CS_OK)
			return 1;
		file = cfg->master_key_file;
		if (cfg->master_key_b64 != NULL)
			fprintf(stderr, "consentd keygen: warning: CONSENTD_KEYS_MASTER_KEY is set; a server "
			    "uses it, not %s\n", file);
	}
	if (file == NULL)
		file = KEYGEN_DEFAULT_FILE;
	errno = 0;
	e = master_key_create_file(file);
	if (e == CS_EEXIST) {
		fprintf(stderr, "consentd keygen: %s exists; not overwritten (every secret sealed under "
		    "it would be lost; to change keys: consentd vault rekey)\n", file);
		goto out;
	}
	if (e != CS_OK) {
		keygen_explain(file, errno, e);
		goto out;
	}
	/* Read back as a server would: the mode and length are right, and the
	 * public id lets the operator match the key to `consentd vault rekey`. */
	if (master_key_load(file, NULL, &mk) != CS_OK)
		goto out;
	printf("consentd keygen: created %s (32 random bytes, mode 0600); master key id %s\n", file,
	    mk.kid);
	printf("Keep a copy somewhere safe: without it nothing sealed under it can be opened.\n");
	rc = 0;
out:
	master_key_clear(&mk);
	config_free(cfg);
	return rc;
}
