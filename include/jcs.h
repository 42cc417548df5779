/* jcs.h -- RFC 8785 JSON Canonicalization Scheme and the I-JSON (RFC 7493)
 * checks behind approval digests (flow F).  Knows JSON only: no approval, no
 * store, no HTTP. */
#ifndef CS_JCS_H
#define CS_JCS_H

#include <stddef.h>
#include <jansson.h>
#include "buf.h"
#include "cs_err.h"

/* Nesting deeper than this is refused: jansson's own parsing limit. */
#define JCS_MAX_DEPTH 2048

/* RFC 8785 (JCS) canonical form of v appended to out.  Refuses (CS_EINVAL,
 * out unchanged) what is not I-JSON -- integers beyond ±(2^53-1), invalid
 * UTF-8 -- and (CS_ETOOBIG) nesting deeper than JCS_MAX_DEPTH. */
enum cs_err jcs_canonicalize(json_t *v, struct buf *out) CS_MUST_CHECK;
/* CS_EINVAL with a short reason (no input text) when v is not I-JSON: an
 * integer beyond ±(2^53-1), a non-finite real, a string or member name that is
 * not valid UTF-8, nesting deeper than JCS_MAX_DEPTH.  For values built
 * outside approval_parse_details (the proxy's request parameters). */
enum cs_err jcs_ijson_check(const json_t *v, char *why, size_t whylen) CS_MUST_CHECK;
/* ECMAScript Number::toString of a finite x (RFC 8785 §3.2.2.3) appended to
 * out; CS_EINVAL for NaN and infinities. */
enum cs_err jcs_number(double x, struct buf *out) CS_MUST_CHECK;
/* For showing an approval's parameters to the person: the canonical text
 * (struct approval's parameters) re-read and written with the very same
 * member order, strings and numbers, only indented (two spaces per level,
 * ": " after names).  jansson's own json_dumps would print 0.1 as
 * 0.10000000000000001 and cannot re-read 100000000000000000000.  CS_EINVAL
 * when canonical is not JSON; out unchanged on failure. */
enum cs_err jcs_pretty(const char *canonical, struct buf *out) CS_MUST_CHECK;

#endif
