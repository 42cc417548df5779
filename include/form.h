/* form.h -- the application/x-www-form-urlencoded parser (bodies and query
 * strings), percent-decoding and -encoding.  A parser of outside input: it never trusts a
 * length, rejects NUL bytes, bad escapes and invalid UTF-8, and caps everything. */
#ifndef CS_FORM_H
#define CS_FORM_H

#include <stdbool.h>
#include <stddef.h>
#include "cs_err.h"

#define FORM_MAX_PARAMS 64

struct form_param {
	char *name;              /* decoded, NUL-terminated; points into the form's block */
	char *value;             /* decoded, NUL-terminated; points into the form's block */
	size_t value_len;
};

struct form {                /* caller-owned; release with form_clear() */
	struct form_param p[FORM_MAX_PARAMS];
	size_t n;
	char *block;             /* every name and value, decoded: one allocation a form */
	size_t block_size;       /* wiped whole by form_clear() */
	bool block_in_arena;     /* the block is request-lifetime memory: arena_clear frees it */
};

void form_init(struct form *f);
/* Parses len bytes of s, decoding every name and value into one block that f owns
 * (one allocation a form, none for an empty one).  CS_EINVAL on a bad escape, a NUL,
 * invalid UTF-8 or an empty name; CS_ETOOBIG beyond FORM_MAX_PARAMS.  Duplicates are
 * kept (the router decides about them).  On failure f is left empty and what was
 * decoded is wiped. */
enum cs_err form_parse(struct form *f, const char *s, size_t len) CS_MUST_CHECK;
/* As form_parse, but the block comes from a (the request's memory, arena.h)
 * when a is not NULL: form_clear still wipes it, and arena_clear releases it. */
struct arena;
enum cs_err form_parse_in(struct form *f, struct arena *a, const char *s,
    size_t len) CS_MUST_CHECK;
/* The first value named name, or NULL. */
const char *form_get(const struct form *f, const char *name);
/* How many times name occurs. */
size_t form_count(const struct form *f, const char *name);
void form_clear(struct form *f);   /* NULL-safe; wipes the block (values may be secrets) */

/* Percent-decodes len bytes of s into a new NUL-terminated string; plus_space
 * turns '+' into ' ' (forms) or keeps it (paths).  CS_EINVAL on a bad escape,
 * a NUL or invalid UTF-8. */
enum cs_err pct_decode(const char *s, size_t len, int plus_space, char **out,
    size_t *out_len) CS_MUST_CHECK;
/* Percent-decodes len bytes of s into d, which holds at least len + 1 bytes,
 * and NUL-terminates it (*dlen: the decoded length).  d may be s: decoding
 * never lengthens.  CS_EINVAL as pct_decode; what was written is then the
 * caller's to wipe. */
enum cs_err pct_decode_into(const char *s, size_t len, int plus_space, char *d,
    size_t *dlen) CS_MUST_CHECK;
/* Percent-encodes s for a query value or path segment (unreserved kept). */
enum cs_err pct_encode(const char *s, char **out) CS_MUST_CHECK;
/* Appends "?name=value", or "&name=value" once b holds a '?', with value
 * percent-encoded: how consentd builds every URL it sends a browser to. */
struct buf;
enum cs_err form_url_param(struct buf *b, const char *name, const char *value) CS_MUST_CHECK;
/* Whether v is a same-origin absolute path a browser may be sent to ("/x",
 * never "//host", "/\host", a scheme, a backslash or a control character): the
 * check of /login's return_to (routes.c) and of the one sealed in a login cookie. */
bool valid_return_to(const char *v);
/* 1 when s[0..len) is valid UTF-8 (no overlongs, surrogates or > U+10FFFF). */
int utf8_valid(const char *s, size_t len);

#endif
