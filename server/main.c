/* main.c -- the command line, signals, and an orderly start and stop.
 * Must never print a secret; a configuration error exits non-zero before
 * anything listens. */
#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "app.h"
#include "audit.h"
#include "audit_cli.h"
#include "backup_cli.h"
#include "db_cli.h"
#include "vault_cli.h"
#include "audit_head.h"
#include "config.h"
#include "http.h"
#include "idjag_grant.h"
#include "httpc.h"
#include "provider.h"
#include "admin_cli.h"
#include "keys_cli.h"
#include "log.h"
#include "mcp_stream.h"
#include "metrics_api.h"
#include "seal.h"
#include "template.h"

#ifndef CONSENTD_VERSION
#define CONSENTD_VERSION "0.1.0"
#endif

#define DRAIN_SECONDS 10
#define KEY_RELOAD_SECONDS 60
#define AUDIT_HEAD_SECONDS 60

static void usage(FILE *f)
{
	fprintf(f,
	    "usage: consentd [-n] -c FILE          run the server (-n: check the config, the master\n"
	    "                                      key and the paths the start needs, and exit)\n"
	    "       consentd keygen [FILE | -c FILE]   create the master key (32 random bytes, mode\n"
	    "                                      0600; never overwrites; consentd keygen --help)\n"
	    "       consentd keys rotate|list -c FILE, consentd keys revoke KID -c FILE\n"
	    "                                      manage the signing keys (consentd keys --help)\n"
	    "       consentd admin token|consents|revoke-user ... -c FILE\n"
	    "                                      admin tokens, consents, bulk revocation\n"
	    "                                      (consentd admin --help)\n"
	    "       consentd audit verify|export -c FILE   check or export the audit chain\n"
	    "       consentd vault rekey -c FILE --new-key-file NEW   rotate the master key\n"
	    "       consentd backup -c FILE --to PATH [--force]   a consistent copy of the\n"
	    "                                      database while serving (consentd backup --help)\n"
	    "       consentd migrate -c FILE          apply the database's pending migrations\n"
	    "                                      (PostgreSQL nodes wait for it; SQLite migrates\n"
	    "                                      at every start)\n"
	    "       consentd db copy -c FILE --from SQLITE_FILE --to postgresql://...\n"
	    "                                      move a SQLite deployment to PostgreSQL\n"
	    "       consentd config-keys               every configuration key with its default\n"
	    "       consentd --version | --help\n"
	    "\n"
	    "Every configuration key can also come from the environment as\n"
	    "CONSENTD_<SECTION>_<KEY> (e.g. CONSENTD_OIDC_CLIENT_SECRET).\n");
}

/* -n with a PostgreSQL URL: the start connects, so this does: the server
 * must answer, and its schema must not be newer than ours (older is said:
 * the node would wait for `consentd migrate`). */
static int check_database_url(const struct config *cfg)
{
	struct store *s = NULL;
	struct store_conn *c;
	int have = 0;
	enum cs_err e = app_store_open(cfg, STORE_SCHEMA_WAIT, &s);
	if (e == CS_OK && ((c = store_conn(s)) == NULL ||
	    (e = store_schema_version(c, &have)) != CS_OK) && e == CS_OK)
		e = CS_EDB;
	if (e != CS_OK) {
		fprintf(stderr, "[database] url: %s: %s\n", cfg->db_url, e == CS_ESCHEMA ?
		    "its schema is newer than this consentd knows" : "cannot connect and read its schema");
		store_close(s);
		return 1;
	}
	if (have < store_schema_known())
		fprintf(stderr, "[database] url: schema %d, this consentd's is %d: run `consentd migrate "
		    "-c FILE` (until then the server waits)\n", have, store_schema_known());
	store_close(s);
	return 0;
}

/* Holds the database to the audit heads published (a database found behind
 * makes /readyz answer 503) and logs its head, so `consentd audit verify
 * --head N:LINK` can later tell a cut-off tail.  Every commit publishes its
 * own head as well (audit_head.c); this is the periodic check. */
static void check_audit_head(struct app *app)
{
	struct store_conn *c = store_conn(app->store);
	if (c == NULL || audit_publish_check(c, 0, NULL) != CS_OK)
		log_msg(LOG_ERROR, "audit head: cannot read");
}

/* With chains of their own (PostgreSQL), this process's chain vouches for
 * the other chains' newest entries every [audit] crossref_interval, when
 * one moved on (audit_crossref): a cut of another node's tail below what it
 * named is then found by `audit verify` alone. */
static void audit_crossref_now(struct app *app)
{
	struct store_conn *c = store_conn(app->store);
	bool wrote = false;
	if (c == NULL || audit_crossref(c, app_now(), &wrote) != CS_OK)
		log_msg(LOG_ERROR, "audit: the cross-reference to the other chains could not be written");
}

/* PostgreSQL: a schema older than this binary's waits for `consentd
 * migrate` (run once, from one node or a deploy job) before the start goes
 * on, a stand-in answering on the address meanwhile (/readyz 503); SIGINT or
 * SIGTERM (blocked: sigtimedwait) ends the wait.  0: go on; 1: stop. */
static int wait_for_schema(const struct config *cfg, const sigset_t *stop)
{
	struct store *s = NULL;
	struct store_conn *c;
	struct http_waiter *hw = NULL;
	enum cs_err e;
	int rc = 1;
	if (cfg->db_url == NULL)
		return 0;
	if ((e = app_store_open(cfg, STORE_SCHEMA_WAIT, &s)) != CS_OK || (c = store_conn(s)) == NULL) {
		log_msg(LOG_ERROR, "database %s: %s", app_db_name(cfg), cs_strerror(e != CS_OK ? e : CS_EDB));
		goto out;
	}
	if (store_ping(c) != CS_ESCHEMA) {
		rc = 0;
		goto out;
	}
	if (http_waiter_start(cfg, &hw) != CS_OK)
		goto out;
	for (int waited = 0; (e = store_ping(c)) == CS_ESCHEMA || e == CS_EBUSY; waited++) {
		if (waited % 30 == 0)
			log_msg(LOG_WARN, "database: waiting for `consentd migrate` (schema older than %d); "
			    "/readyz answers 503 meanwhile", store_schema_known());
		struct timespec ts = { 1, 0 };
		int sig = sigtimedwait(stop, NULL, &ts);
		if (sig == SIGINT || sig == SIGTERM) {
			log_msg(LOG_INFO, "stopped while waiting for `consentd migrate`");
			rc = 2;
			goto out;
		}
	}
	rc = e == CS_OK ? 0 : 1;
out:
	http_waiter_stop(hw);
	store_close(s);
	return rc;
}

/* The start's log lines: where consentd listens, with what, and the warnings
 * a deployment must see. */
static void log_listening(struct app *app, const struct config *cfg)
{
	const struct keyring *kr = app_keys_get(app);
	if (cfg->metrics_listen_host != NULL)
		log_msg(LOG_INFO, "metrics listening on %s:%u (GET /metrics only, no authentication)",
		    cfg->metrics_listen_host, (unsigned)cfg->metrics_listen_port);
	log_msg(LOG_INFO, "consentd %s listening on %s:%u, public URL %s, %u threads, "
	    "schema %d, signing key %s, log level %s", CONSENTD_VERSION, cfg->listen_host,
	    (unsigned)cfg->listen_port, cfg->public_url, cfg->threads,
	    store_schema_known(), keyring_signing_kid(kr) ? keyring_signing_kid(kr) : "-",
	    log_level_name(cfg->log_level));
	app_keys_put(app);
	/* A warning where the configuration looks deployed (an https public URL). */
	if (cfg->development)
		log_msg(cfg->public_url_is_https ? LOG_WARN : LOG_INFO, "[server] development = true: "
		    "placeholder secrets and documentation hosts are allowed; never deploy this "
		    "configuration");
}

/* Runs until SIGINT or SIGTERM (returned): SIGHUP reopens the log and reloads
 * the keys, which are also reloaded every KEY_RELOAD_SECONDS; the audit head
 * is checked every AUDIT_HEAD_SECONDS, and the other chains vouched for every
 * [audit] crossref_interval. */
static int run_until_signal(struct app *app, const sigset_t *set)
{
	int64_t last_reload, last_head, last_xref;
	int sig;
	last_reload = last_head = last_xref = app_now();
	for (;;) {
		struct timespec ts = { 1, 0 };
		sig = sigtimedwait(set, NULL, &ts);
		if (sig == SIGINT || sig == SIGTERM)
			return sig;
		/* SIGHUP: logrotate moved the log file; the next lines go to a new one
		 * (on failure the old stream stays and says why). */
		if (sig == SIGHUP && log_reopen() == CS_OK)
			log_msg(LOG_INFO, "log reopened (SIGHUP)");
		if (sig == SIGHUP || app_now() - last_reload >= KEY_RELOAD_SECONDS) {
			if (app_reload_keys(app, app_now()) != CS_OK)
				log_msg(LOG_ERROR, "key reload failed; keeping the current keys");
			last_reload = app_now();
		}
		if (app_now() - last_head >= AUDIT_HEAD_SECONDS) {
			check_audit_head(app);
			last_head = app_now();
		}
		if (app->cfg->audit_crossref_interval > 0 &&
		    app_now() - last_xref >= app->cfg->audit_crossref_interval) {
			audit_crossref_now(app);
			last_xref = app_now();
		}
	}
}

/* Orderly stop: refuse new connections, let in-flight requests finish (up
 * to DRAIN_SECONDS).  A second signal ends the process at once. */
static void drain(struct http_server *srv, const sigset_t *set, int sig)
{
	log_msg(LOG_INFO, "stopping (signal %d); a second signal exits at once", sig);
	http_quiesce(srv);
	mcp_stream_stop();                /* the MCP sessions' GET streams end at their next poll */
	for (int waited = 0; waited < DRAIN_SECONDS * 10 && http_in_flight(srv) > 0; waited++) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		int s2 = sigtimedwait(set, NULL, &ts);
		if (s2 == SIGINT || s2 == SIGTERM) {
			log_msg(LOG_WARN, "second signal, exiting now");
			_exit(2);
		}
	}
}

static int serve(const struct config *cfg)
{
	struct app app;
	struct http_server *srv = NULL;
	sigset_t set;
	int rc = 1;

	/* Block the signals before any thread starts so that every worker
	 * inherits the mask and only this thread receives them. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* The one log stream first: every diagnostic from here on is a line of it
	 * (and, until the start is over, an error is also shown on stderr). */
	if (log_open(cfg->log, cfg->log_level) != CS_OK) {
		fprintf(stderr, "consentd: cannot open the log %s: %s\n", cfg->log, strerror(errno));
		return 1;
	}
	if (template_check_all() != CS_OK) {
		log_msg(LOG_ERROR, "a compiled-in template is malformed");
		log_close();
		return 1;
	}
	switch (wait_for_schema(cfg, &set)) {
	case 0:
		break;
	case 2:                           /* asked to stop while waiting: a clean exit */
		log_close();
		return 0;
	default:
		log_msg(LOG_ERROR, "not started");
		log_close();
		return 1;
	}
	/* The families first, so that the start's own commits are counted too. */
	if (metrics_api_init(&app) != CS_OK || httpc_global_init() != CS_OK ||
	    app_init(&app, cfg) != CS_OK) {
		log_msg(LOG_ERROR, "not started");
		log_close();
		return 1;
	}
	/* The [enterprise] policy as configured now: what it no longer lists, it
	 * takes back before the first request (idjag_grant.h). */
	int64_t swept = 0;
	if (idjag_grant_sweep(store_conn(app.store), cfg, app_now(), &swept) != CS_OK) {
		log_msg(LOG_ERROR, "the organisations' consents could not be checked against "
		    "[enterprise] allow; not started");
		goto out;
	}
	if (swept > 0)
		log_msg(LOG_INFO, "revoked %lld consent(s) an organisation gave that [enterprise] "
		    "allow no longer lists", (long long)swept);
	if (app_start_discovery(&app) != CS_OK || app_start_maintenance(&app) != CS_OK ||
	    app_start_janitor(&app) != CS_OK)
		goto out;
	if (http_start(&app, &srv) != CS_OK)
		goto out;
	log_listening(&app, cfg);
	log_started();
	drain(srv, &set, run_until_signal(&app, &set));
	rc = 0;
out:
	http_stop(srv);
	/* The queued audit entries (MCP calls' answers) written before the
	 * last head is checked and logged. */
	audit_queue_stop(app.audit_queue);
	if (rc == 0)
		check_audit_head(&app);
	app_clear(&app);
	log_msg(rc == 0 ? LOG_INFO : LOG_ERROR, rc == 0 ? "stopped" : "not started");
	log_close();
	return rc;
}

/* `consentd -n`: [audit] head_file must be creatable and appendable: its
 * directory exists and is writable, and the file, when there, is a regular
 * file we may write.  1 when it is not (with a message). */
static int check_head_file(const struct config *cfg)
{
	const char *f = cfg->audit_head_file;
	struct stat sb;
	char *copy, *dir;
	int bad = 0;

	if (f == NULL)
		return 0;
	if ((copy = strdup(f)) == NULL)
		return 1;
	dir = dirname(copy);
	if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
		fprintf(stderr, "%s: [audit] head_file: directory %s does not exist\n", cfg->path, dir);
		bad = 1;
	} else if (access(dir, W_OK | X_OK) != 0 && access(f, F_OK) != 0) {
		fprintf(stderr, "%s: [audit] head_file: cannot create %s: directory %s is not "
		    "writable\n", cfg->path, f, dir);
		bad = 1;
	} else if (lstat(f, &sb) == 0 && (!S_ISREG(sb.st_mode) || access(f, W_OK) != 0)) {
		fprintf(stderr, "%s: [audit] head_file: %s is not a regular file consentd may "
		    "append to\n", cfg->path, f);
		bad = 1;
	}
	free(copy);
	return bad;
}

/* Whether the start could open path for writing (what: "database", "log"):
 * an existing regular file it may read and write, or a file it may create in
 * an existing directory.  SQLite also writes its -wal and -shm files beside
 * the database, so with dir_too the directory must be writable even when the
 * file exists.  Says what is wrong. */
static bool path_usable(const char *what, const char *path, bool dir_too)
{
	struct stat st;
	char *copy = NULL;
	bool ok = false;
	if (stat(path, &st) == 0) {
		if (!S_ISREG(st.st_mode)) {
			log_msg(LOG_ERROR, "%s %s is not a regular file", what, path);
			return false;
		}
		if (access(path, R_OK | W_OK) != 0) {
			log_msg(LOG_ERROR, "%s %s: %s", what, path, strerror(errno));
			return false;
		}
		if (!dir_too)
			return true;
	} else if (errno != ENOENT) {
		log_msg(LOG_ERROR, "%s %s: %s", what, path, strerror(errno));
		return false;
	}
	if ((copy = strdup(path)) == NULL)
		return false;
	const char *dir = dirname(copy);
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		log_msg(LOG_ERROR, "%s %s: the directory %s does not exist", what, path, dir);
	else if (access(dir, W_OK | X_OK) != 0)
		log_msg(LOG_ERROR, "%s %s: cannot write in the directory %s: %s", what, path, dir,
		    strerror(errno));
	else
		ok = true;
	free(copy);
	return ok;
}

/* `consentd -n` refuses what the start refuses beyond the file itself: the
 * master key exactly as the start loads it (there, 32 bytes, a regular file
 * that neither group nor others may read), and a database and log the start
 * could open.  Returns the number of problems; each is printed. */
static int check_start(const struct config *cfg)
{
	struct master_key mk;
	int bad = 0;
	memset(&mk, 0, sizeof mk);
	/* master_key_load says what is wrong, in the words the start uses. */
	if (master_key_load(cfg->master_key_file, cfg->master_key_b64, &mk) != CS_OK)
		bad++;
	master_key_clear(&mk);
	if (cfg->db_url != NULL)
		bad += check_database_url(cfg);
	else if (!path_usable("database", cfg->db_path, true))
		bad++;
	if (strcmp(cfg->log, "stderr") != 0 && strcmp(cfg->log, "stdout") != 0 &&
	    !path_usable("log", cfg->log, false))
		bad++;
	return bad;
}

/* `consentd -n`: say plainly who enforces per-action approval, and warn where
 * released tokens could not be revoked at the provider. */
static void report_enforcement(const struct config *cfg)
{
	if (httpc_global_init() != CS_OK)
		return;
	for (size_t i = 0; i < cfg->nresources; i++) {
		const struct config_resource *r = &cfg->resources[i];
		int has_provider = r->provider_issuer != NULL || r->provider_token_endpoint != NULL;
		if (!has_provider)
			continue;
		if (r->token_release == RELEASE_NEVER) {
			printf("resource %s: token_release = never -- tokens stay inside consentd; "
			    "consentd's proxy enforces approval on each request\n", r->id);
			continue;
		}
		int approvals = 0;
		for (size_t j = 0; j < cfg->nactions; j++)
			if (strcmp(cfg->actions[j].resource, r->id) == 0 &&
			    cfg->actions[j].approval == APPROVAL_REQUIRED)
				approvals++;
		printf("resource %s: token_release = gateway -- the gateway enforces approval with the "
		    "tokens it receives (actions needing approval: %d)\n", r->id, approvals);
		struct provider *p = NULL;
		const struct provider_meta *m = NULL;
		if (provider_new(r, &p) != CS_OK) {
			fprintf(stderr, "warning: resource %s: provider settings unusable\n", r->id);
			continue;
		}
		if (provider_meta(p, &m) != CS_OK)
			fprintf(stderr, "warning: resource %s: provider not reachable; cannot check that it "
			    "has a revocation endpoint\n", r->id);
		else if (m->revocation_endpoint == NULL)
			fprintf(stderr, "warning: resource %s: token_release = gateway but the provider has no "
			    "revocation endpoint: released tokens cannot be revoked before they expire\n", r->id);
		provider_free(p);
	}
}

/* The commands of their own: `consentd NAME ...` runs NAME's main with the
 * words after NAME (keys_cli.c: keys and keygen; admin_cli.c, audit_cli.c,
 * vault_cli.c, backup_cli.c, db_cli.c: migrate and db). */
static const struct {
	const char *name;
	int (*run)(int argc, char *const *argv);
} commands[] = {
	{ "keys", keys_cli_main },
	{ "admin", admin_cli_main },
	{ "audit", audit_cli_main },
	{ "vault", vault_cli_main },
	{ "backup", backup_cli_main },
	{ "keygen", keygen_main },
	{ "migrate", migrate_cli_main },
	{ "db", db_cli_main },
};

int main(int argc, char **argv)
{
	const char *cfgpath = NULL;
	int check_only = 0, rc;
	struct config *cfg = NULL;

	for (size_t i = 0; argc >= 2 && i < sizeof commands / sizeof commands[0]; i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].run(argc - 2, argv + 2);
	/* Every configuration key with the default the code has (docs.test.js reads it). */
	if (argc == 2 && strcmp(argv[1], "config-keys") == 0)
		return config_print_keys(stdout) == CS_OK ? 0 : 1;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--version") == 0) {
			printf("consentd %s\n", CONSENTD_VERSION);
			return 0;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[i], "-n") == 0) {
			check_only = 1;
		} else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc) {
			cfgpath = argv[++i];
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (cfgpath == NULL) {
		usage(stderr);
		return 2;
	}
	if (config_load(cfgpath, stderr, &cfg) != CS_OK)
		return 1;
	if (check_only) {
		int bad = check_head_file(cfg) + check_start(cfg);
		if (bad > 0) {
			fprintf(stderr, "%s: %d problem%s above: consentd would refuse to start\n", cfgpath,
			    bad, bad == 1 ? "" : "s");
			config_free(cfg);
			return 1;
		}
		report_enforcement(cfg);
		printf("%s: configuration OK%s\n", cfgpath, cfg->development ? " (development = true: "
		    "placeholders and documentation hosts allowed; never deploy it)" : "");
		config_free(cfg);
		return 0;
	}
	rc = serve(cfg);
	config_free(cfg);
	return rc;
}
