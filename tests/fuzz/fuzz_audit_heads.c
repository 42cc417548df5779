/* fuzz_audit_heads.c -- libFuzzer target for the published-head line reader
 * (audit_head_line: head_file lines and grepped log lines, which
 * `consentd audit verify --heads` and the server's start read). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "audit_head.h"
#include "buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *line = malloc(size + 1);
	enum audit_line_kind kind;
	struct audit_head h, again;
	char text[64 + AUDIT_LINK_HEX];

	if (line == NULL)
		return 0;
	memcpy(line, data, size);
	line[size] = '\0';
	if (audit_head_line(line, &kind, &h) == CS_OK && kind == AUDIT_LINE_HEAD) {
		/* A head read is a well-formed head: lowercase hex of the right length,
		 * a number >= 0, and what head_file would hold reads back the same. */
		if (h.seq < 0 || strlen(h.hex) != AUDIT_LINK_HEX ||
		    strspn(h.hex, "0123456789abcdef") != AUDIT_LINK_HEX)
			abort();
		if (str_fmt(text, sizeof text, "%lld:%s\n", (long long)h.seq, h.hex) != CS_OK ||
		    audit_head_line(text, &kind, &again) != CS_OK || kind != AUDIT_LINE_HEAD ||
		    again.seq != h.seq || strcmp(again.hex, h.hex) != 0)
			abort();
	}
	free(line);
	return 0;
}
