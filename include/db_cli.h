/* db_cli.h -- `consentd migrate` and `consentd db copy` (db_cli.c): the
 * database commands of an operator, not of a running server. */
#ifndef CS_DB_CLI_H
#define CS_DB_CLI_H

/* consentd migrate -c FILE */
int migrate_cli_main(int argc, char *const *argv);
/* consentd db copy -c FILE --from SQLITE_FILE --to postgresql://... */
int db_cli_main(int argc, char *const *argv);

#endif
