/* admin_cli.c -- `consentd admin token|consents|revoke-user|revoke-agent|
 * revoke-resource -c FILE`: argument parsing, opening config and store, and
 * telling the operator what happened.  The semantics live in admin.c; this
 * file must never touch SQL, and prints an admin token only once, at creation. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jansson.h>
#include <openssl/crypto.h>

#include "admin.h"
#include "admin_cli.h"
#include "audit.h"
#include "audit_head.h"
#include "buf.h"
#include "app.h"
#include "config.h"
#include "seal.h"
#include "store.h"

#define ACTOR "cli"

static void admin_usage(FILE *f)
{
	fprintf(f,
	    "usage: consentd admin token create --name NAME -c FILE   a new API token, shown once\n"
	    "       consentd admin token list -c FILE                 names, creation, last use\n"
	    "       consentd admin token revoke NAME -c FILE          refuse that token from now on\n"
	    "       consentd admin consents list [--user SUBJECT] [--agent A] [--resource R]\n"
	    "                 [--state live|expired|revoked|reconnect_required] [--limit N]\n"
	    "                 [--cursor C] -c FILE\n"
	    "       consentd admin consents revoke ID --reason TEXT -c FILE\n"
	    "       consentd admin revoke-user SUBJECT --reason TEXT -c FILE\n"
	    "       consentd admin revoke-agent AGENT --reason TEXT -c FILE\n"
	    "       consentd admin revoke-resource RESOURCE --reason TEXT -c FILE\n"
	    "Revocation takes effect at once for running servers (same database).\n");
}

/* t as str_time writes it, or "-" for 0 (never). */
static const char *fmt_time(int64_t t, char buf[STR_TIME_LEN])
{
	return t == 0 ? "-" : str_time(t, buf);
}

/* Prints s with control characters as '?': names come from outside (IdP
 * subjects) and must not drive the operator's terminal. */
static void put_safe(const char *s, int width)
{
	int n = 0;
	for (const unsigned char *p = (const unsigned char *)(s ? s : "-"); *p; p++, n++)
		putchar(*p < 0x20 || *p == 0x7f ? '?' : *p);
	for (; n < width; n++)
		putchar(' ');
}

struct ctx {
	struct config     *cfg;
	struct store      *store;
	struct store_conn *c;
	struct master_key  mk;
	int64_t            now;
	int                publishing;
};

static int ctx_open(struct ctx *x, const char *cfgpath)
{
	enum cs_err e;
	if (config_load(cfgpath, stderr, &x->cfg) != CS_OK)
		return 1;
	/* The master key proves the operator may act for this installation, and
	 * keys the audit chain the entries below extend. */
	e = master_key_load(x->cfg->master_key_file, x->cfg->master_key_b64, &x->mk);
	if (e != CS_OK) {
		fprintf(stderr, "consentd admin: master key (%s or CONSENTD_KEYS_MASTER_KEY): %s\n",
		    x->cfg->master_key_file, cs_strerror(e));
		return 1;
	}
	if ((e = audit_set_master_key(&x->mk)) != CS_OK) {
		fprintf(stderr, "consentd admin: audit chain key: %s\n", cs_strerror(e));
		return 1;
	}
	if ((e = app_store_open(x->cfg, STORE_SCHEMA_REQUIRE, &x->store)) != CS_OK) {
		fprintf(stderr, "consentd admin: database %s: %s\n", app_db_name(x->cfg), cs_strerror(e));
		return 1;
	}
	if ((x->c = store_conn(x->store)) == NULL) {
		fprintf(stderr, "consentd admin: database %s: cannot connect\n", app_db_name(x->cfg));
		return 1;
	}
	/* The entries below are published like a server's: logged here and
	 * appended to [audit] head_file before the command says it is done. */
	if (audit_publish_open(x->store, x->cfg->audit_head_file, stderr) != CS_OK)
		return 1;
	x->publishing = 1;
	x->now = (int64_t)time(NULL);
	return 0;
}

static void ctx_close(struct ctx *x)
{
	if (x->publishing)
		audit_publish_close(x->store);
	store_close(x->store);
	audit_clear_key();
	master_key_clear(&x->mk);
	config_free(x->cfg);
}

static int fail(const char *what, enum cs_err e)
{
	fprintf(stderr, "consentd admin %s: %s\n", what, cs_strerror(e));
	return 1;
}

/* --- token --------------------------------------------------------------- */

static int token_create(struct ctx *x, const char *name)
{
	char t[SESSION_TOKEN_LEN + 1];
	enum admin_token_outcome o = ADMIN_TOKEN__MAX;
	enum cs_err e = admin_token_create(x->c, name, ACTOR, x->now, t, &o);
	if (e != CS_OK)
		return fail("token create", e);
	if (o == ADMIN_TOKEN_BAD_NAME) {
		fprintf(stderr, "consentd admin token create: a name is 1-%d letters, digits, '.', '_' "
		    "or '-'\n", ADMIN_TOKEN_NAME_MAX);
		return 1;
	}
	if (o == ADMIN_TOKEN_NAME_TAKEN) {
		fprintf(stderr, "consentd admin token create: the name %s is taken (revoked names "
		    "stay taken, so the audit log keeps meaning one token)\n", name);
		return 1;
	}
	/* The token alone on stdout (scripts read it); the advice on stderr. */
	printf("%s\n", t);
	fflush(stdout);
	OPENSSL_cleanse(t, sizeof t);
	fprintf(stderr, "admin token %s created; it is shown only this once.  Use it as "
	    "`Authorization: Bearer <token>` on /admin/api/.\n", name);
	return 0;
}

static int token_list(struct ctx *x)
{
	json_t *a = NULL, *r;
	size_t i;
	char t1[STR_TIME_LEN], t2[STR_TIME_LEN], t3[STR_TIME_LEN];
	enum cs_err e = admin_token_list(x->c, &a);
	if (e != CS_OK)
		return fail("token list", e);
	printf("%-32s  %-20s  %-20s  %s\n", "NAME", "CREATED", "LAST_USED", "REVOKED");
	json_array_foreach(a, i, r) {
		put_safe(json_string_value(json_object_get(r, "name")), 32);
		printf("  %-20s  %-20s  %s\n",
		    fmt_time(json_integer_value(json_object_get(r, "created_at")), t1),
		    fmt_time(json_integer_value(json_object_get(r, "last_used_at")), t2),
		    fmt_time(json_integer_value(json_object_get(r, "revoked_at")), t3));
	}
	json_decref(a);
	if ((e = admin_audit_note(x->c, ACTOR, "admin.cli", "token list", x->now)) != CS_OK)
		return fail("token list", e);
	return 0;
}

static int token_revoke(struct ctx *x, const char *name)
{
	enum admin_token_outcome o = ADMIN_TOKEN__MAX;
	enum cs_err e = admin_token_revoke(x->c, name, ACTOR, x->now, &o);
	if (e != CS_OK)
		return fail("token revoke", e);
	if (o == ADMIN_TOKEN_UNKNOWN) {
		fprintf(stderr, "consentd admin token revoke: no token is called %s "
		    "(see consentd admin token list)\n", name);
		return 1;
	}
	printf(o == ADMIN_TOKEN_DONE ? "revoked admin token %s\n" : "admin token %s was revoked already\n", name);
	return 0;
}

/* --- consents ------------------------------------------------------------ */

static int consents_list(struct ctx *x, const struct admin_consent_filter *f, const char *cursor,
    int64_t limit)
{
	json_t *res = NULL, *k;
	size_t i;
	char t1[STR_TIME_LEN];
	enum cs_err e = admin_consents_list(x->c, f, cursor, limit, x->now, &res);
	if (e == CS_EINVAL) {
		fprintf(stderr, "consentd admin consents list: bad --state, --cursor or --limit (1-%d)\n",
		    ADMIN_LIST_MAX);
		return 1;
	}
	if (e != CS_OK)
		return fail("consents list", e);
	printf("%-22s  %-24s  %-12s  %-12s  %-18s  %-20s  %s\n", "ID", "USER", "AGENT", "RESOURCE",
	    "STATE", "EXPIRES", "CONNECTION");
	json_array_foreach(json_object_get(res, "consents"), i, k) {
		put_safe(json_string_value(json_object_get(k, "id")), 22);
		printf("  ");
		put_safe(json_string_value(json_object_get(k, "user")), 24);
		printf("  ");
		put_safe(json_string_value(json_object_get(k, "agent")), 12);
		printf("  ");
		put_safe(json_string_value(json_object_get(k, "resource")), 12);
		printf("  %-18s  %-20s  %s\n", json_string_value(json_object_get(k, "state")),
		    fmt_time(json_integer_value(json_object_get(k, "expires_at")), t1),
		    json_is_true(json_object_get(k, "provider_connection")) ? "yes" : "no");
	}
	const char *next = json_string_value(json_object_get(res, "next_cursor"));
	if (next)
		printf("(more: --cursor %s)\n", next);
	json_decref(res);
	if ((e = admin_audit_note(x->c, ACTOR, "admin.cli", "consents list", x->now)) != CS_OK)
		return fail("consents list", e);
	return 0;
}

static int consents_revoke(struct ctx *x, const char *id, const char *reason)
{
	enum admin_revoke_outcome o = ADMIN_REVOKE__MAX;
	enum cs_err e = admin_consent_revoke(x->c, id, ACTOR, reason, x->now, &o);
	if (e != CS_OK)
		return fail("consents revoke", e);
	if (o == ADMIN_REVOKE_UNKNOWN) {
		fprintf(stderr, "consentd admin consents revoke: no consent has id %s\n", id);
		return 1;
	}
	if (o == ADMIN_REVOKE_BAD_REASON) {
		fprintf(stderr, "consentd admin consents revoke: --reason must be 1-%d bytes\n",
		    ADMIN_REASON_MAX);
		return 1;
	}
	printf(o == ADMIN_REVOKED ? "revoked consent %s with its grants, refresh tokens and approvals\n" :
	    "consent %s was revoked already\n", id);
	return 0;
}

static int bulk(struct ctx *x, enum admin_bulk_by by, const char *value, const char *reason)
{
	int64_t n = 0;
	enum admin_revoke_outcome o = ADMIN_REVOKE__MAX;
	enum cs_err e = admin_bulk_revoke(x->c, &(struct admin_bulk){ .by = by, .value = value,
	    .issuer = x->cfg->oidc_issuer, .actor = ACTOR, .reason = reason }, x->now, &n, &o);
	if (e == CS_EINVAL || (e == CS_OK && o != ADMIN_REVOKED)) {
		fprintf(stderr, "consentd admin: the value and --reason (1-%d bytes) are required\n",
		    ADMIN_REASON_MAX);
		return 1;
	}
	if (e != CS_OK)
		return fail("revoke", e);
	printf("revoked %lld consent%s\n", (long long)n, n == 1 ? "" : "s");
	return 0;
}

/* --- parsing ------------------------------------------------------------- */

static int parse_limit(const char *s, int64_t *out)
{
	int64_t v = 0;
	if (s == NULL || *s == '\0' || strlen(s) > 3)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (*s - '0');
	}
	*out = v;
	return 0;
}

/* A command line, read. */
struct args {
	const char *cmd, *sub;           /* "token" "create", ...; sub NULL for revoke-* */
	const char *cfgpath, *name, *reason, *cursor;
	const char *pos;                 /* the one positional argument: an id, subject or name */
	struct admin_consent_filter f;
	int64_t limit;
};

/* Reads the options after the command words; false on anything unknown,
 * repeated or missing its value. */
static bool parse_options(int first, int argc, char *const *argv, struct args *g)
{
	for (int i = first; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int takes = v != NULL;
		if (strcmp(a, "-c") == 0 && takes && g->cfgpath == NULL)
			g->cfgpath = argv[++i];
		else if (strcmp(a, "--name") == 0 && takes && g->name == NULL)
			g->name = argv[++i];
		else if (strcmp(a, "--reason") == 0 && takes && g->reason == NULL)
			g->reason = argv[++i];
		else if (strcmp(a, "--user") == 0 && takes && g->f.user == NULL)
			g->f.user = argv[++i];
		else if (strcmp(a, "--agent") == 0 && takes && g->f.agent == NULL)
			g->f.agent = argv[++i];
		else if (strcmp(a, "--resource") == 0 && takes && g->f.resource == NULL)
			g->f.resource = argv[++i];
		else if (strcmp(a, "--state") == 0 && takes && g->f.state == NULL)
			g->f.state = argv[++i];
		else if (strcmp(a, "--cursor") == 0 && takes && g->cursor == NULL)
			g->cursor = argv[++i];
		else if (strcmp(a, "--limit") == 0 && takes && parse_limit(argv[i + 1], &g->limit) == 0)
			i++;
		else if (g->pos == NULL && a[0] != '\0' && strcmp(a, "-c") != 0)
			g->pos = a;            /* ids and subjects may start with '-' */
		else
			return false;
	}
	return g->cfgpath != NULL;
}

/* Whether each command has the arguments it needs (and none it refuses). */
static bool args_complete(const struct args *g)
{
	const char *cmd = g->cmd, *sub = g->sub;
	if (sub && strcmp(cmd, "token") == 0 && strcmp(sub, "create") == 0)
		return g->name != NULL && g->pos == NULL;
	if (sub && strcmp(cmd, "token") == 0 && strcmp(sub, "list") == 0)
		return g->pos == NULL && g->name == NULL;
	if (sub && strcmp(cmd, "token") == 0 && strcmp(sub, "revoke") == 0)
		return g->pos != NULL;
	if (sub && strcmp(cmd, "consents") == 0 && strcmp(sub, "list") == 0)
		return g->pos == NULL;
	if (sub && strcmp(cmd, "consents") == 0 && strcmp(sub, "revoke") == 0)
		return g->pos != NULL && g->reason != NULL;
	if (sub == NULL)
		return g->pos != NULL && g->reason != NULL;
	return false;
}

/* Runs the command g names against an open ctx. */
static int run(struct ctx *x, struct args *g)
{
	const char *cmd = g->cmd, *sub = g->sub;
	g->f.issuer = x->cfg->oidc_issuer;
	if (strcmp(cmd, "token") == 0) {
		if (strcmp(sub, "create") == 0)
			return token_create(x, g->name);
		if (strcmp(sub, "list") == 0)
			return token_list(x);
		return token_revoke(x, g->pos);
	}
	if (strcmp(cmd, "consents") == 0) {
		if (strcmp(sub, "list") == 0)
			return consents_list(x, &g->f, g->cursor, g->limit);
		return consents_revoke(x, g->pos, g->reason);
	}
	if (strcmp(cmd, "revoke-user") == 0)
		return bulk(x, ADMIN_BY_USER, g->pos, g->reason);
	if (strcmp(cmd, "revoke-agent") == 0)
		return bulk(x, ADMIN_BY_AGENT, g->pos, g->reason);
	return bulk(x, ADMIN_BY_RESOURCE, g->pos, g->reason);
}

int admin_cli_main(int argc, char *const *argv)
{
	struct args g;
	struct ctx x;
	int rc, first = 1;

	memset(&g, 0, sizeof g);
	memset(&x, 0, sizeof x);
	g.limit = ADMIN_LIST_DEFAULT;
	if (argc < 1) {
		admin_usage(stderr);
		return 2;
	}
	g.cmd = argv[0];
	if (strcmp(g.cmd, "--help") == 0 || strcmp(g.cmd, "-h") == 0) {
		admin_usage(stdout);
		return 0;
	}
	if (strcmp(g.cmd, "token") == 0 || strcmp(g.cmd, "consents") == 0) {
		if (argc < 2) {
			admin_usage(stderr);
			return 2;
		}
		g.sub = argv[1];
		first = 2;
	} else if (strcmp(g.cmd, "revoke-user") != 0 && strcmp(g.cmd, "revoke-agent") != 0 &&
	    strcmp(g.cmd, "revoke-resource") != 0) {
		admin_usage(stderr);
		return 2;
	}
	if (!parse_options(first, argc, argv, &g) || !args_complete(&g)) {
		admin_usage(stderr);
		return 2;
	}
	if (ctx_open(&x, g.cfgpath) != 0) {
		ctx_close(&x);
		return 1;
	}
	rc = run(&x, &g);
	ctx_close(&x);
	return rc;
}
