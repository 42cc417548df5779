/* scope.h -- scope sets: the parsed, sorted, duplicate-free form of an OAuth
 * scope list (RFC 6749 §3.3) that consents, grants, the token exchange, the
 * proxy and the vault compare.  Pure data: no store, no configuration. */
#ifndef CS_SCOPE_H
#define CS_SCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include "cs_err.h"

#define SCOPE_SET_MAX 20             /* distinct scopes in one set */
#define SCOPE_TOKEN_MAX 128          /* bytes in one scope token (CS_ETOOBIG beyond) */

/* A set of bare scope names, sorted, without duplicates.  Caller-owned;
 * release with scope_set_clear(). */
struct scope_set {
	char  *v[SCOPE_SET_MAX];
	size_t n;
};
void scope_set_clear(struct scope_set *s);            /* NULL-safe; leaves s empty */
/* Parses a space-separated list (RFC 6749 §3.3: %x21 / %x23-5B / %x5D-7E,
 * separated by single spaces).  CS_EINVAL for a malformed list, CS_ETOOBIG
 * past SCOPE_SET_MAX (distinct) or SCOPE_TOKEN_MAX.  Duplicates collapse.
 * "" parses as the empty set (callers that need one scope check n).
 * *out written only on CS_OK. */
enum cs_err scope_set_parse(const char *s, struct scope_set *out) CS_MUST_CHECK;
bool scope_set_has(const struct scope_set *s, const char *name);
/* true when every scope of a is in b (the empty set is a subset of any set). */
bool scope_set_subset(const struct scope_set *a, const struct scope_set *b);
/* Space-separated, sorted; malloc'd ("" for an empty set); NULL when out of memory. */
char *scope_set_join(const struct scope_set *s);

/* Adds the len bytes at p (no NUL among them; not checked against the
 * grammar), keeping s sorted and unique.  CS_ETOOBIG when s is full. */
enum cs_err scope_set_add(struct scope_set *s, const char *p, size_t len) CS_MUST_CHECK;
/* dst ∪= src. */
enum cs_err scope_set_union(struct scope_set *dst, const struct scope_set *src) CS_MUST_CHECK;
/* out ∪= a ∩ b (out usually starts empty). */
enum cs_err scope_set_intersect(struct scope_set *out, const struct scope_set *a,
    const struct scope_set *b) CS_MUST_CHECK;
/* out ∪= a − b (out usually starts empty). */
enum cs_err scope_set_minus(struct scope_set *out, const struct scope_set *a,
    const struct scope_set *b) CS_MUST_CHECK;

#endif
