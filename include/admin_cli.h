/* admin_cli.h -- `consentd admin ...`: the operator's commands for admin
 * tokens, consents and bulk revocation, against the configured database (a
 * running server shares it: SQLite WAL).  Every command is audited with actor
 * "cli".  An admin token is printed once, at creation, and never again. */
#ifndef CS_ADMIN_CLI_H
#define CS_ADMIN_CLI_H

/* Runs one `admin` subcommand; argv[0] is "token", "consents", "revoke-user",
 * "revoke-agent" or "revoke-resource", the rest its arguments.  Results go to
 * stdout, problems to stderr.  Returns the exit status: 0 done, 1 failed or
 * refused, 2 usage. */
int admin_cli_main(int argc, char *const *argv);

#endif
