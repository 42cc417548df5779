/* embed.h -- files compiled into the binary (migrations/, templates/), so a
 * running consentd never depends on its working directory. */
#ifndef CS_EMBED_H
#define CS_EMBED_H
#include <stddef.h>

struct embedded_file {
	const char *name;   /* base name, e.g. "0001_init.sql"; NULL ends the table */
	const char *data;   /* NUL-terminated */
	size_t      len;
};

extern const struct embedded_file embedded_migrations[];   /* sorted by name */
extern const struct embedded_file embedded_migrations_pg[]; /* migrations/pg/, the same versions */
extern const struct embedded_file embedded_templates[];

#endif
