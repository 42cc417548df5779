/* backup_cli.c -- `consentd backup -c FILE --to PATH [--force]`: argument
 * parsing, the temporary file beside PATH, fsync and rename, and telling the
 * operator the copy's audit head.  The copy itself (SQLite's online backup
 * API, then integrity_check) is the store's (store_backup, store_sqlite.c); no SQL
 * here.  PATH is never half-written: the copy is made under a temporary name
 * in PATH's directory and renamed into place only once complete and synced,
 * and an existing PATH is refused unless --force. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "audit_cli.h"
#include "backup_cli.h"
#include "buf.h"
#include "config.h"
#include "store.h"

#define WHO "consentd backup"

static void backup_usage(FILE *f)
{
	fprintf(f,
	    "usage: consentd backup -c FILE --to PATH [--force]\n"
	    "                             a consistent copy of the database while consentd\n"
	    "                             serves (SQLite's online backup API), checked with\n"
	    "                             integrity_check, synced, then renamed to PATH; an\n"
	    "                             existing PATH is refused unless --force.  Prints the\n"
	    "                             copy's audit head N:LINK, for `consentd audit verify\n"
	    "                             --head N:LINK` on the copy\n");
}

/* The temporary file and the journal files SQLite may have left beside it. */
static void remove_tmp(const char *tmp)
{
	static const char *const sfx[] = { "", "-wal", "-shm", "-journal" };
	char p[PATH_MAX];
	for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++)
		if (str_fmt(p, sizeof p, "%s%s", tmp, sfx[i]) == CS_OK)
			(void)unlink(p);
}

static int fsync_path(const char *path, int flags)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | flags);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	int saved = errno;
	close(fd);
	errno = saved;
	return rc;
}

/* PATH's directory ("." when PATH has no slash). */
static enum cs_err dir_of(const char *path, char *dir, size_t n)
{
	const char *slash = strrchr(path, '/');
	if (slash == NULL)
		return str_fmt(dir, n, ".");
	if (slash == path)
		return str_fmt(dir, n, "/");
	return str_fmt(dir, n, "%.*s", (int)(slash - path), path);
}

/* The copy's head, read through the store like any database of ours. */
static int copy_head(const char *tmp, struct audit_head *h)
{
	struct store *s = NULL;
	struct store_conn *c = NULL;
	int rc = 1;
	enum cs_err e = store_open(tmp, &s);
	if (e != CS_OK) {
		fprintf(stderr, WHO ": the copy: %s\n", cs_strerror(e));
		goto out;
	}
	if ((c = store_conn(s)) == NULL || (e = audit_head(c, h)) != CS_OK) {
		fprintf(stderr, WHO ": the copy: cannot read its audit head\n");
		goto out;
	}
	rc = 0;
out:
	store_close(s);
	return rc;
}

static int backup_cmd(const struct config *cfg, const char *to, int force)
{
	struct store *s = NULL;
	struct store_conn *c = NULL;
	struct audit_head h;
	struct stat st;
	char tmp[PATH_MAX], dir[PATH_MAX];
	int made = 0, rc = 1;
	enum cs_err e;

	if (!force && lstat(to, &st) == 0) {
		fprintf(stderr, WHO ": %s exists; refusing to overwrite it (--force replaces it)\n", to);
		return 1;
	}
	if (str_fmt(tmp, sizeof tmp, "%s.tmp-XXXXXX", to) != CS_OK ||
	    dir_of(to, dir, sizeof dir) != CS_OK) {
		fprintf(stderr, WHO ": %s: path too long\n", to);
		return 1;
	}
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, WHO ": cannot create a file in %s: %s\n", dir, strerror(errno));
		return 1;
	}
	close(fd);
	made = 1;
	if (audit_cli_open_store(WHO, cfg, &s, &c) != 0)
		goto out;
	if ((e = store_backup(c, tmp)) != CS_OK) {
		fprintf(stderr, WHO ": the copy of %s failed: %s\n", cfg->db_path, cs_strerror(e));
		goto out;
	}
	store_close(s);
	s = NULL;
	if (copy_head(tmp, &h) != 0)
		goto out;
	if (fsync_path(tmp, 0) != 0) {
		fprintf(stderr, WHO ": fsync %s: %s\n", tmp, strerror(errno));
		goto out;
	}
	if (force ? rename(tmp, to) != 0 : link(tmp, to) != 0) {
		if (errno == EEXIST)
			fprintf(stderr, WHO ": %s exists; refusing to overwrite it (--force replaces it)\n",
			    to);
		else
			fprintf(stderr, WHO ": cannot place the copy at %s: %s\n", to, strerror(errno));
		goto out;
	}
	if (force)
		made = 0;                        /* renamed: nothing of tmp is left */
	if (fsync_path(dir, O_DIRECTORY) != 0) {
		fprintf(stderr, WHO ": fsync %s: %s\n", dir, strerror(errno));
		goto out;
	}
	printf("backup: %s: integrity ok; audit head %" PRId64 ":%s\n", to, h.seq, h.hex);
	if (fflush(stdout) != 0)
		goto out;
	rc = 0;
out:
	store_close(s);
	if (made)
		remove_tmp(tmp);
	return rc;
}

int backup_cli_main(int argc, char *const *argv)
{
	const char *cfgpath = NULL, *to = NULL;
	struct config *cfg = NULL;
	int force = 0, rc;

	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			backup_usage(stdout);
			return 0;
		} else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc && cfgpath == NULL)
			cfgpath = argv[++i];
		else if (strcmp(argv[i], "--to") == 0 && i + 1 < argc && to == NULL)
			to = argv[++i];
		else if (strcmp(argv[i], "--force") == 0 && !force)
			force = 1;
		else {
			backup_usage(stderr);
			return 2;
		}
	}
	if (cfgpath == NULL || to == NULL || *to == '\0') {
		backup_usage(stderr);
		return 2;
	}
	if (config_load(cfgpath, stderr, &cfg) != CS_OK)
		return 1;
	rc = backup_cmd(cfg, to, force);
	config_free(cfg);
	return rc;
}
