/* keys_cli.h -- `consentd keys rotate|revoke|list -c FILE`: the operator's
 * commands for consentd's signing keys.  They change the database a running
 * server uses; servers pick the change up at their next key reload (every
 * 60 s, and at once on SIGHUP).  Never prints key material. */
#ifndef CS_KEYS_CLI_H
#define CS_KEYS_CLI_H

/* Runs one `keys` subcommand; argv[0] is the subcommand ("rotate", "revoke",
 * "list"), the rest its arguments.  Results go to stdout, problems to stderr.
 * Returns the process exit status: 0 done, 1 failed or refused, 2 usage. */
int keys_cli_main(int argc, char *const *argv);

#endif
