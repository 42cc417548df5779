/* forwarded.h -- the client address behind trusted reverse proxies: address
 * prefixes ([server] trusted_proxies) and the strict parsers of
 * X-Forwarded-For and Forwarded (RFC 7239).  Knows no HTTP connection: it is
 * given the TCP peer and the header text, and never trusts a header the peer
 * had no standing to send. */
#ifndef CS_FORWARDED_H
#define CS_FORWARDED_H

#include <stdbool.h>
#include <stddef.h>

#define FORWARDED_MAX_HOPS 32      /* more entries than this: the header is refused */
#define FORWARDED_MAX_LEN  4096    /* bytes of header text, every instance joined */
#define FORWARDED_ADDR_LEN 46      /* INET6_ADDRSTRLEN */

/* An IPv4 or IPv6 network: addr's first bits bits; IPv4 is held as an
 * IPv4-mapped IPv6 address (::ffff:a.b.c.d, bits counted from 96). */
struct net_prefix {
	unsigned char addr[16];
	unsigned      bits;        /* 0..128 */
};

/* "192.0.2.1", "192.0.2.0/24", "2001:db8::1", "2001:db8::/32" into *out: true
 * on success.  Refuses brackets, ports, zone ids, host bits set past the
 * prefix, leading zeros in a prefix length and anything else. */
bool net_prefix_parse(const char *s, struct net_prefix *out);

/* Whether the textual address ip (IPv4, IPv6 or IPv4-mapped IPv6) lies in one
 * of the n prefixes. */
bool net_prefix_match(const struct net_prefix *v, size_t n, const char *ip);

enum forwarded_header {
	FORWARDED_XFF = 0,         /* X-Forwarded-For: a comma-separated list of addresses */
	FORWARDED_RFC7239,         /* Forwarded: for= of each comma-separated element */
	FORWARDED_HEADER__MAX
};

/* The client address of a request whose TCP peer is peer, written to out
 * (normalised by inet_ntop, IPv4-mapped IPv6 as IPv4).  SECURITY: header
 * (the text of every instance of the header, joined with ",", or NULL) is
 * read only when peer is one of the n trusted prefixes; then the answer is the
 * right-most address in it that is not itself a trusted proxy.  A header that
 * does not parse whole (malformed, or more than FORWARDED_MAX_HOPS entries) is
 * read from its longest tail of whole elements that does (what a client wrote
 * on the left cannot make it the proxy); when not even the right-most element
 * parses, or the header is absent or longer than FORWARDED_MAX_LEN, the answer
 * is peer; when the walk meets an entry that is not an address ("unknown", an
 * obfuscated "_name", an element without for=), or every entry of a tail is a
 * trusted proxy, the answer is the trusted hop that wrote it.  Returns true
 * when the answer came from the header. */
bool forwarded_client(const struct net_prefix *trusted, size_t n, enum forwarded_header kind,
    const char *peer, const char *header, char out[FORWARDED_ADDR_LEN]);

/* The parser on its own (for tests and the fuzzer): the entries of header,
 * left to right, each an address written as inet_ntop does or "" for an
 * entry that is not one, into v (at most FORWARDED_MAX_HOPS).  false when the
 * header is malformed; then *n is 0. */
bool forwarded_parse(enum forwarded_header kind, const char *header,
    char v[FORWARDED_MAX_HOPS][FORWARDED_ADDR_LEN], size_t *n);

#endif
