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

/* `consentd keygen [FILE | -c CONFIG]`: creates the master key -- 32 random
 * bytes, mode 0600 -- at FILE, at CONFIG's [keys] master_key_file, or at that
 * key's default (/etc/consentd/master.key).  Never overwrites a file: that
 * would lose every secret sealed under the old key.  Prints the new key's
 * public id, never the key.  Returns 0 created, 1 failed or refused, 2 usage. */
int keygen_main(int argc, char *const *argv);

#endif
