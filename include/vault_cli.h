/* vault_cli.h -- `consentd vault rekey`: master-key rotation, the operator's
 * command and the one transaction behind it.  Never prints key material, a
 * token or a sealed value. */
#ifndef CS_VAULT_CLI_H
#define CS_VAULT_CLI_H

#include <stddef.h>
#include <stdint.h>
#include "cs_err.h"
#include "seal.h"
#include "store.h"

/* Runs one `vault` subcommand; argv[0] is the subcommand, the rest its
 * arguments.  Results go to stdout, problems to stderr.  Returns the exit
 * status: 0 done, 1 failed or refused, 2 usage. */
int vault_cli_main(int argc, char *const *argv);

/* What a rekey did. */
struct rekey_report {
	size_t  signing_keys, vault_records, outbox_entries;
	int64_t audit_entries;       /* re-linked, before the rotation's own entry */
	int64_t broken;              /* when refused for a broken chain: the entry */
	char    why[160];            /* and why */
};
/* Master-key rotation in ONE transaction on c: verifies the audit chain under
 * old (CS_EPERM when broken: report->broken and why say where), re-seals every
 * signing key, vault record and outbox entry from old to new, re-links every
 * audit entry under new and appends "master-key-rotated" (the process chain
 * key is left set to new).  On any error it rolls back: the old state stays. */
enum cs_err vault_rekey(struct store_conn *c, const struct master_key *old,
    const struct master_key *new_mk, int64_t now, struct rekey_report *report) CS_MUST_CHECK;

#endif
