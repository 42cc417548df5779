/* fuzz_visible_text.c -- libFuzzer target for visible_text(), the filter that
 * makes invisible characters in agent-supplied text visible.  Its oracle is
 * Unicode's own DerivedCoreProperties.txt (the unicode-data package), never
 * pages.c's table: the output must be valid UTF-8 holding no
 * Default_Ignorable_Code_Point and no control but LF, and valid input must
 * come out exactly as the documented markers say. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "form.h"
#include "pages.h"
#include "../unit/ucd.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static struct ucd_set ignorable;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (ucd_load(UCD_DERIVED_CORE, "Default_Ignorable_Code_Point", &ignorable) < 4000) {
		fprintf(stderr, "fuzz_visible_text: cannot read %s (apt-get install unicode-data)\n",
		    UCD_DERIVED_CORE);
		abort();
	}
	return 0;
}

/* What visible_text promises to mark. */
static int must_mark(uint32_t cp)
{
	return ucd_has(&ignorable, cp) || (cp < 0x20 && cp != '\n') || (cp >= 0x7f && cp <= 0x9f);
}

/* The code point of the sequence at *p in text already known to be valid
 * UTF-8, moving *p past it. */
static uint32_t next_valid(const unsigned char **p)
{
	const unsigned char *s = *p;
	size_t n = s[0] < 0x80 ? 1 : s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : 4;
	uint32_t cp = n == 1 ? s[0] : s[0] & (0x7fu >> n);
	for (size_t k = 1; k < n; k++)
		cp = cp << 6 | (s[k] & 0x3fu);
	*p = s + n;
	return cp;
}

/* For valid input, the output written out from the contract in pages.h. */
static char *expected_output(const char *in, size_t len)
{
	char *want = malloc(8 * len + 1);
	size_t w = 0;
	if (want == NULL)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)in; *p;) {
		const unsigned char *start = p;
		uint32_t cp = next_valid(&p);
		if (must_mark(cp)) {
			CHECK(str_fmt(want + w, 8 * len + 1 - w, "[U+%04X]", (unsigned)cp) == CS_OK);
			w += strlen(want + w);
		} else {
			memcpy(want + w, start, (size_t)(p - start));
			w += (size_t)(p - start);
		}
	}
	want[w] = '\0';
	return want;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), *v, *want;
	size_t len, vlen;
	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	len = strlen(s);                /* visible_text reads up to the first NUL */

	v = visible_text(s);
	CHECK(v != NULL);
	vlen = strlen(v);
	CHECK(vlen <= 8 * len);
	/* Whatever went in, what comes out is valid UTF-8 with nothing hidden. */
	CHECK(utf8_valid(v, vlen));
	for (const unsigned char *p = (const unsigned char *)v; *p;)
		CHECK(!must_mark(next_valid(&p)));
	/* Valid input: exactly the markers the contract describes, the rest as it was. */
	if (utf8_valid(s, len) && (want = expected_output(s, len)) != NULL) {
		CHECK(strcmp(v, want) == 0);
		free(want);
	}
	free(v);
	free(s);
	return 0;
}
