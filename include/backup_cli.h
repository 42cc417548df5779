/* backup_cli.h -- `consentd backup -c FILE --to PATH [--force]`: a consistent
 * copy of the database made while the server serves (store_backup), placed at
 * PATH whole or not at all. */
#ifndef CS_BACKUP_CLI_H
#define CS_BACKUP_CLI_H

/* Runs the command; argv holds its arguments (after "backup").  The copy's
 * audit head goes to stdout, problems to stderr.  Returns the exit status:
 * 0 done, 1 failed or refused, 2 usage. */
int backup_cli_main(int argc, char *const *argv);

#endif
