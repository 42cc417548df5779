/* fuzz_forwarded.c -- libFuzzer target for the X-Forwarded-For and Forwarded
 * parsers and the trusted-proxy walk (forwarded.c).  The first byte picks the
 * header; the answer must always be an address text that fits, and one the
 * parser wrote or the peer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "forwarded.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct net_prefix trusted[2];
	static int ready;
	char hops[FORWARDED_MAX_HOPS][FORWARDED_ADDR_LEN], out[FORWARDED_ADDR_LEN];
	size_t n = 0;
	if (!ready) {
		if (!net_prefix_parse("127.0.0.1", &trusted[0]) ||
		    !net_prefix_parse("10.0.0.0/8", &trusted[1]))
			abort();
		ready = 1;
	}
	if (size == 0)
		return 0;
	enum forwarded_header kind = (data[0] & 1) ? FORWARDED_RFC7239 : FORWARDED_XFF;
	char *h = malloc(size);
	if (h == NULL)
		return 0;
	memcpy(h, data + 1, size - 1);
	h[size - 1] = '\0';
	if (forwarded_parse(kind, h, hops, &n)) {
		if (n == 0 || n > FORWARDED_MAX_HOPS)
			abort();
		for (size_t i = 0; i < n; i++)
			if (memchr(hops[i], '\0', FORWARDED_ADDR_LEN) == NULL)
				abort();
	} else if (n != 0) {
		abort();
	}
	bool from = forwarded_client(trusted, 2, kind, "127.0.0.1", h, out);
	if (memchr(out, '\0', sizeof out) == NULL || (!from && strcmp(out, "127.0.0.1") != 0))
		abort();
	/* An untrusted peer's header is never read. */
	if (forwarded_client(trusted, 2, kind, "192.0.2.1", h, out) || strcmp(out, "192.0.2.1") != 0)
		abort();
	/* S3 (issue 28): whatever a client wrote, the entry its trusted proxy then
	 * appends names it (the client's text cannot make it the proxy). */
	const char *tail = kind == FORWARDED_RFC7239 ? ", for=203.0.113.77" : ", 203.0.113.77";
	size_t hl = strlen(h), tl = strlen(tail);
	char *h2 = malloc(hl + tl + 1);
	if (h2 == NULL) {
		free(h);
		return 0;
	}
	memcpy(h2, h, hl);
	memcpy(h2 + hl, tail, tl + 1);
	if (!forwarded_client(trusted, 2, kind, "127.0.0.1", h2, out) || strcmp(out, "203.0.113.77") != 0)
		abort();
	free(h2);
	free(h);
	return 0;
}
