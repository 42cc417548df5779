/* jstr.h -- a JSON string value as C text, exactly: the one definition of
 * jstr and jstr_eq for the files that read outside JSON documents (oidc.c,
 * provider.c).  A string with an embedded NUL is never taken for its prefix. */
#ifndef CS_JSTR_H
#define CS_JSTR_H

#include <stdbool.h>
#include <string.h>
#include <jansson.h>

/* True when v is a JSON string equal to s, byte for byte (length included). */
static inline bool jstr_eq(const json_t *v, const char *s)
{
	if (!json_is_string(v) || s == NULL)
		return false;
	size_t n = strlen(s);
	return json_string_length(v) == n && memcmp(json_string_value(v), s, n) == 0;
}

/* The string value when v is a string without embedded NUL, else NULL. */
static inline const char *jstr(const json_t *v)
{
	if (!json_is_string(v))
		return NULL;
	const char *s = json_string_value(v);
	return strlen(s) == json_string_length(v) ? s : NULL;
}

#endif
