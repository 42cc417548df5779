/* audit_cli.h -- `consentd audit verify|export`: the operator's commands for
 * the audit chain, and the steps `consentd vault rekey` (vault_cli.h) shares
 * with them.  Never prints key material, a token or a sealed value. */
#ifndef CS_AUDIT_CLI_H
#define CS_AUDIT_CLI_H

#include <stdint.h>
#include "audit.h"
#include "config.h"
#include "seal.h"
#include "store.h"

/* Runs one `audit` subcommand; argv[0] is the subcommand, the rest its
 * arguments.  Results go to stdout, problems to stderr.  Returns the exit
 * status: 0 done (chain intact), 1 failed or broken, 2 usage. */
int audit_cli_main(int argc, char *const *argv);

/* The steps the operator's commands share.  Each returns 0 when done, else 1
 * after saying why on stderr, prefixed with who ("consentd audit"). */
/* Opens cfg's database and the calling thread's connection. */
int audit_cli_open_store(const char *who, const struct config *cfg, struct store **s,
    struct store_conn **c);
/* Loads cfg's master key (file, or CONSENTD_KEYS_MASTER_KEY). */
int audit_cli_load_master(const char *who, const struct config *cfg, struct master_key *mk);
/* Every head listed in the file at path against c, the chain being intact up
 * to verified (under mk, which also checks the anchors that may excuse a
 * pruned head: audit_pruned_through); a file listing no head passes when
 * empty_ok.  *heads (may be NULL) gets how many heads the file lists. */
int audit_cli_check_heads(const char *who, const struct master_key *mk, struct store_conn *c,
    const char *path, const struct audit_head *verified, int empty_ok, int64_t *heads);

#endif
