/* ucd.h -- reads Unicode's DerivedCoreProperties.txt (Debian's unicode-data
 * package) for the tests that hold visible_text's table against Unicode's own
 * data.  Test-only; plain C with no Check, so the fuzz targets can use it too. */
#ifndef CS_UCD_H
#define CS_UCD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UCD_DERIVED_CORE "/usr/share/unicode/DerivedCoreProperties.txt"
#define UCD_CODE_POINTS  0x110000u

/* A set of code points, one bit each. */
struct ucd_set {
	uint8_t bits[UCD_CODE_POINTS / 8];
};

static inline int ucd_has(const struct ucd_set *s, uint32_t cp)
{
	return cp < UCD_CODE_POINTS && (s->bits[cp >> 3] >> (cp & 7) & 1);
}

/* Parses one hex code point at *p, moving *p past it; -1 when there is none
 * or it is out of range. */
static inline long ucd_hex(char **p)
{
	char *end;
	unsigned long v = strtoul(*p, &end, 16);
	if (end == *p || v >= UCD_CODE_POINTS)
		return -1;
	*p = end;
	return (long)v;
}

/* Adds every code point listed in path (a UCD property file: lines
 * "XXXX[..YYYY] ; Property # comment") with exactly the property prop to s.
 * Returns how many code points were listed, or -1 when the file cannot be
 * read or holds a malformed line. */
static inline long ucd_load(const char *path, const char *prop, struct ucd_set *s)
{
	char line[512];
	long count = 0;
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return -1;
	while (count >= 0 && fgets(line, sizeof line, f) != NULL) {
		char *p = line, *name, *hash = strchr(line, '#'), *semi;
		long lo, hi;
		size_t n;
		if (hash != NULL)
			*hash = '\0';
		if ((semi = strchr(line, ';')) == NULL)
			continue;                       /* a comment or blank line */
		for (name = semi + 1; *name == ' ' || *name == '\t'; name++)
			;
		for (n = strlen(name); n > 0 && strchr(" \t\r\n", name[n - 1]) != NULL; n--)
			;
		if (n != strlen(prop) || memcmp(name, prop, n) != 0)
			continue;
		if ((lo = ucd_hex(&p)) < 0) {
			count = -1;
			break;
		}
		hi = lo;
		if (p[0] == '.' && p[1] == '.') {
			p += 2;
			if ((hi = ucd_hex(&p)) < lo) {
				count = -1;
				break;
			}
		}
		for (long cp = lo; cp <= hi; cp++)
			s->bits[cp >> 3] = (uint8_t)(s->bits[cp >> 3] | 1u << (cp & 7));
		count += hi - lo + 1;
	}
	fclose(f);
	return count;
}

#endif
