/* policy.h -- the organisation's policy lines (issue #32 item 4): an
 * action's `policy.N = approve|deny [if COND and COND ...]` keys, parsed once
 * with the configuration and evaluated against a call's canonical parameters
 * before anyone is asked.  Pure: no I/O, no clock, no store. */
#ifndef CS_POLICY_H
#define CS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <jansson.h>
#include "cs_err.h"

#define POLICY_MAX_LINES 99        /* policy.1 .. policy.99 */
#define POLICY_MAX_CONDS 16        /* conditions on one line */
#define POLICY_MAX_VALUES 64       /* values of one `in (...)` */
#define POLICY_MAX_PATH 8          /* names in one dotted path */

enum policy_verdict {
	POLICY_NONE = 0,               /* no line decided: go on (the person, the approval setting) */
	POLICY_APPROVE,                /* released without asking anyone */
	POLICY_DENY,                   /* refused, whatever else would have said yes */
	POLICY_VERDICT__MAX
};

enum policy_op {
	POLICY_EQ = 0,                 /* ==: the same JSON type and value (numbers by value) */
	POLICY_PREFIX,                 /* prefix: a string starting with the value */
	POLICY_IN,                     /* in (a, b, ...): == one of them */
	POLICY_LT, POLICY_LE, POLICY_GT, POLICY_GE,   /* numeric bounds: a JSON number only */
	POLICY_OP__MAX
};

struct policy_cond {
	char  *path;                   /* dotted names into the parameters ("repo", "head.ref") */
	enum policy_op op;
	json_t *values;                /* an array of literals: one, or the `in` list */
};

struct policy_line {               /* release with policy_line_clear() */
	int number;                    /* N of policy.N: the audit names "policy ACTION#N" */
	enum policy_verdict verdict;   /* POLICY_APPROVE or POLICY_DENY */
	struct policy_cond *conds;     /* all must hold; none: the line always decides */
	size_t nconds;
};
void policy_line_clear(struct policy_line *l);   /* NULL-safe */
void policy_lines_free(struct policy_line *v, size_t n);   /* NULL-safe */

/* Parses one line's text:
 *   approve | deny  [ if COND { and COND } ]
 *   COND   := PATH == VALUE | PATH prefix STRING | PATH in ( VALUE {, VALUE} )
 *           | PATH (< | <= | > | >=) NUMBER
 *   PATH   := NAME { . NAME }        NAME := [A-Za-z_][A-Za-z0-9_-]*
 *   VALUE  := "a JSON string" | a JSON number | true | false | null | a bare word
 *             (letters, digits and _ - . / : @ +, not starting a number: a string)
 * CS_EINVAL with a reason naming the failing part in why; *out written only on
 * CS_OK. */
enum cs_err policy_line_parse(const char *text, int number, struct policy_line *out,
    char *why, size_t whylen) CS_MUST_CHECK;

/* The first line (in the order given) whose every condition holds on params
 * (the call's parameters, any JSON value; NULL = no parameters) decides; *which
 * is its index (untouched on POLICY_NONE).  A missing parameter does not hold
 * the condition.  SECURITY: a parameter present with a type the condition
 * cannot judge (a string against a numeric bound, a number against prefix)
 * counts against the caller: it holds on a deny line and fails on an approve
 * line, so that sending "5000" instead of 5000 never slips past a bound. */
enum policy_verdict policy_eval(const struct policy_line *lines, size_t n, json_t *params,
    size_t *which);

/* Whether any line has a condition (needs the call's parameters to judge). */
bool policy_needs_params(const struct policy_line *lines, size_t n);

#endif
