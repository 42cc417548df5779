/* config_priv.h -- for config's own files only (config.c, config_base.c,
 * config_read.c, config_value.c, config_section.c, config_authzen.c,
 * config_placeholder.c): the load's working state (sections and entries as
 * read, messages waiting to be written) and the helpers the files share.  The
 * files are layered: config_base.c at the bottom, config_value.c's checks above
 * it, then config_read.c, config_authzen.c, config_section.c and
 * config_placeholder.c, and config.c on top; no file calls one above it.
 * Every other module sees only the immutable struct config of config.h. */
#ifndef CS_CONFIG_PRIV_H
#define CS_CONFIG_PRIV_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "buf.h"
#include "config.h"

#define MAX_FILE        (1024 * 1024)   /* bytes of configuration text */
#define MAX_VALUE       65536           /* a value, continuation lines included */
#define MAX_ENV_VALUE   4096            /* a value from the environment */
#define MAX_PART        64              /* agent, resource, scope, action names */
#define MAX_ID          255             /* client ids, claim names */
#define MIN_GW_SECRET   16              /* characters of the gateway's client secret */
#define MAX_THREADS     1024
#define THREADS_PER_CORE 8     /* threads = 0: workers per core */

#define ENV_PREFIX      "CONSENTD_"
#define ENV_MASTER_KEY  "CONSENTD_KEYS_MASTER_KEY"

enum sec_kind {
	SK_SERVER, SK_DATABASE, SK_KEYS, SK_OIDC, SK_SESSION, SK_LOGIN, SK_CONSENT, SK_GATEWAY,
	SK_AUDIT, SK_METRICS, SK_MCP, SK_AUTHZEN,
	SK_RETENTION, SK_LIMITS,
	SK_AGENT, SK_RESOURCE, SK_SCOPE, SK_ACTION, SK_CLIENT, SK_MCP_ENDPOINT,
	SK_ENTERPRISE,
	SK__MAX
};
#define SK_NFIXED SK_AGENT       /* kinds before this one are fixed sections */

struct entry {
	char      *key;
	struct buf val;          /* continuation lines are appended with one space */
	int        line;         /* 0 when the value came from the environment only */
	char      *env;          /* the variable that set it, NULL when from the file */
	bool       bad;          /* already reported as invalid */
};

struct section {
	char          *name;     /* as written between the brackets */
	enum sec_kind  kind;
	char          *a, *b;    /* name parts of dynamic sections */
	int            line;     /* 0 when absent from the file */
	struct entry  *ents;
	size_t         nents, cap;
};

struct msg {
	int    line;             /* INT_MAX for messages without a line */
	size_t seq;
	char  *text;
};

struct ctx {
	const char *file;
	struct msg *msgs;
	size_t      nmsgs, capmsgs;
	FILE       *errs;
	unsigned    nerr;
	bool        oom;

	/* reader state */
	const char *text;
	size_t      len, pos;
	int         lineno;
	bool        have_prev;   /* inih remembers a key name: indented lines continue it */
	bool        cont;        /* the current line is a continuation */
	bool        expect_kv;   /* the current line must reach the handler */
	bool        got_kv;
	long        cur;         /* current section index, -1 for none */
	bool        cur_quiet;   /* no section because of an error already reported */
	long        last_sec, last_ent;   /* target of continuation lines, -1 for none */

	struct section *secs;
	size_t      nsecs, capsecs;

	char *const *env;
	struct buf *defaults;    /* config_print_keys: each getter's section, key and default */
	const char *master_key;  /* points into env */
	const char *master_key_var;
};

/* get_str's flags. */
enum { S_REQUIRED = 1, S_EMPTY_NULL = 2, S_EMPTY_OK = 4 };
/* check_url's allowances. */
enum { URL_PATH = 1, URL_QUERY = 2 };

/* --- config_base.c: messages (kept, and written sorted by line at the end) --- */
/* An error at a line of the file (0: the file as a whole). */
void cfg_err_line(struct ctx *c, int line, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* An error about an environment variable that is not tied to a key. */
void cfg_err_env(struct ctx *c, const char *var, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An error (a warning) about the value of e, located where it came from. */
void cfg_err_e(struct ctx *c, const struct entry *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void cfg_warn_e(struct ctx *c, const struct entry *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* config_print_keys: the getter of key in s records its default: kind 'd'
 * (the value follows), 'n' (none) or 'r' (required).  Does nothing otherwise. */
void cfg_note_default(struct ctx *c, const struct section *s, const char *key, char kind,
    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* --- config_base.c: small helpers; an allocation failure sets c->oom --- */
char *cfg_xstrdup(struct ctx *c, const char *s);
char *cfg_xstrndup(struct ctx *c, const char *s, size_t n);
bool cfg_in_list(const char *const *list, const char *s);
int cfg_list_index(const char *const *list, const char *s);
void cfg_free_strv(char **v);
bool cfg_valid_part(const char *s, size_t n, bool colon);
bool cfg_valid_token(const char *s);
bool cfg_valid_scope_token(const char *s);
const char *cfg_parse_int(const char *s, int64_t min, int64_t max, int64_t *out);
char **cfg_split_words(struct ctx *c, const char *s, size_t *count);
bool cfg_has_dup(char *const *v, size_t n, size_t *which);
/* --- config_base.c: sections and entries --- */
/* A section to add: its name as written, its kind, the name parts of a
 * dynamic section (a: the agent or resource; b: the scope or action of
 * resource a) and
 * its line (0 when absent from the file). */
struct section_head {
	const char   *name;
	enum sec_kind kind;
	const char   *a, *b;
	size_t        alen, blen;
	int           line;
};
struct section *cfg_add_section(struct ctx *c, const struct section_head *h);
struct entry *cfg_find(const struct section *s, const char *key);
struct entry *cfg_add_entry(struct ctx *c, struct section *s, const char *key,
    const char *value, int line);
struct section *cfg_find_section(struct ctx *c, const char *name);
const char *cfg_value_of(const struct entry *e);
bool cfg_section_has_value(const struct section *s, const char *key);
/* The load's end: every section and entry freed (values wiped), then the
 * messages written to c->errs (when set) sorted by line, and freed. */
void cfg_free_sections(struct ctx *c);
void cfg_flush_messages(struct ctx *c);
/* --- config_value.c: typed getters (each reports what it refuses) and
 * value checks --- */
const struct entry *cfg_get_str(struct ctx *c, const struct section *s, const char *key,
    const char *def, unsigned flags, char **out);
void cfg_get_int(struct ctx *c, const struct section *s, const char *key, int64_t def,
    int64_t min, int64_t max, int64_t *out);
void cfg_get_bool(struct ctx *c, const struct section *s, const char *key, bool def,
    bool *out);
void cfg_get_enum(struct ctx *c, const struct section *s, const char *key,
    const char *const *names, int def, int *out);
bool cfg_check_url(struct ctx *c, const struct entry *e, const char *v, unsigned allow,
    bool *https);
void cfg_check_listen(struct ctx *c, const struct entry *e, const char *v, char **host,
    uint16_t *port);
bool cfg_check_abs_uri(struct ctx *c, const struct entry *e, const char *v);
void cfg_check_route(struct ctx *c, const struct entry *e, const char *v, char **method,
    char **path);
bool cfg_is_b64_32(const char *s);
/* A rate in requests a second: a decimal with at most three decimals from 0
 * to max, in thousandths (0 = off). */
void cfg_get_rate(struct ctx *c, const struct section *s, const char *key, int64_t def_milli,
    int64_t max, int64_t *out);
/* A key holding a list of words: its default, the test each word must pass,
 * and what a word is called in a refusal ("'x' is not a valid <what>"). */
struct words_key {
	const char *key, *def;
	bool      (*ok)(const char *);
	const char *what;
};
/* The words of k in s (malloc'd, NULL-terminated; *count of them); *given
 * when the file or the environment set the key. */
char **cfg_get_words(struct ctx *c, const struct section *s, const struct words_key *k,
    size_t *count, bool *given);

/* N of an [action.R.A] key "policy.N" (1..99, no leading zero); 0 otherwise
 * (config_read.c). */
int cfg_policy_key(const char *key);

/* config_read.c's key list of a section kind (NULL-terminated) and its name. */
const char *const *cfg_section_keys(enum sec_kind k, const char **name);

/* config_value.c's checks of the files a value names, for config_section.c
 * and config_authzen.c: a secret file (the whole file, one final newline
 * allowed; false when unreadable, said through c) and a check that path is a
 * readable PEM file of CA certificates. */
bool cfg_read_secret_file(struct ctx *c, const struct entry *e, const char *path, char *buf,
    size_t cap, size_t *n);
void cfg_check_ca_file(struct ctx *c, const struct entry *e, const char *path);
/* [authzen] (config_authzen.c); after the dynamic sections (it names actions). */
void cfg_load_authzen(struct ctx *c, struct config *cfg, const struct section *s);

/* The load's steps, in order (config.c's load_text runs them). */
void cfg_read(struct ctx *c);                                  /* config_read.c */
void cfg_load_sections(struct ctx *c, struct config *cfg);     /* config_section.c */
/* Unless development: placeholder secrets and documentation hosts are errors. */
void cfg_check_placeholders(struct ctx *c);                    /* config_placeholder.c */

#endif
