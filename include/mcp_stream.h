/* mcp_stream.h -- the GET stream of a 2025-11-25 MCP session (issue #31): a
 * Server-Sent Events body (struct reply_stream) that carries
 * notifications/elicitation/complete for each of the session's elicitations
 * the person has decided, a comment now and then so that proxies keep it
 * open, and ends after a bounded time (the client opens it again).  It polls
 * the store, so a decision made on any node reaches the stream on any other.
 * The streams of one node are bounded, per person and in all, because each
 * holds one of the deferred pool's threads (http.c) while it is open. */
#ifndef CS_MCP_STREAM_H
#define CS_MCP_STREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include "cs_err.h"
#include "buf.h"
#include "mcp_session.h"
#include "store.h"

/* The bounds and pacing, one set per process (the defaults below; tests
 * shorten them). */
struct mcp_stream_limits {
	unsigned per_person;     /* open streams of one person on this node */
	unsigned total;          /* open streams on this node */
	int64_t  lifetime_ms;    /* a stream ends after this long */
	int64_t  poll_ms;        /* the store is asked this often */
	/* A comment after this long without a write: it keeps proxies from
	 * closing the stream, and it is how a stream whose client went away is
	 * noticed (a suspended connection is not watched: only a write fails),
	 * within two or three of these, when its place in the bounds comes back. */
	int64_t  keepalive_ms;
};
#define MCP_STREAM_PER_PERSON 2
/* Half the deferred pool's 16 threads (http.c DEFER_THREADS): tools/call and
 * the proxy keep the other half. */
#define MCP_STREAM_TOTAL 8
#define MCP_STREAM_LIFETIME_MS (300 * 1000)
#define MCP_STREAM_POLL_MS 500
#define MCP_STREAM_KEEPALIVE_MS (2 * 1000)
/* The client's reconnection delay the stream asks for (SSE retry:). */
#define MCP_STREAM_RETRY_MS 1000
/* The most streams MCP_STREAM_TOTAL may be raised to. */
#define MCP_STREAM_TOTAL_MAX 64

/* Sets the bounds (NULL: the defaults above) and lets streams open again
 * after mcp_stream_stop.  Zero or out-of-range fields are CS_EINVAL and
 * change nothing.  For the start and for tests; not while streams are open. */
enum cs_err mcp_stream_configure(const struct mcp_stream_limits *l) CS_MUST_CHECK;
/* The server is draining: every open stream ends at its next poll, and no
 * new one opens (MCP_STREAM_STOPPING). */
void mcp_stream_stop(void);
/* Streams open on this node now (and of one person). */
unsigned mcp_stream_open_count(void);
unsigned mcp_stream_person_count(int64_t user_id);

enum mcp_stream_admit {
	MCP_STREAM_ADMITTED = 0,     /* *out is the stream: the reply's body */
	MCP_STREAM_PERSON_FULL,      /* the person has per_person open: answer 429 */
	MCP_STREAM_FULL,             /* the node has total open: answer 503 */
	MCP_STREAM_STOPPING,         /* the server is draining: answer 503 */
	MCP_STREAM__MAX
};
/* One open stream (opaque). */
struct mcp_stream;
/* Opens the stream of who's session (its hash, as mcp_session_find found it)
 * when the bounds let it: on MCP_STREAM_ADMITTED *out is the stream, which
 * the handler hands to its reply as a struct reply_stream (http.h) of
 * { *out, mcp_stream_read, mcp_stream_close }; it reads the store through s
 * and keeps copies of who's strings.  *adm written on CS_OK; *out only when
 * admitted. */
enum cs_err mcp_stream_open(struct store *s, const struct mcp_who *who,
    const unsigned char hash[STORE_MCP_HASH_LEN], enum mcp_stream_admit *adm,
    struct mcp_stream **out) CS_MUST_CHECK;
/* A reply_stream's read: up to max bytes of the body into dst, *got 0 at its
 * end.  Blocks between polls, so it runs on the thread that ran the handler
 * of a deferred route (a pool thread of http.c), never a server worker. */
enum cs_err mcp_stream_read(void *stream, char *dst, size_t max, size_t *got) CS_MUST_CHECK;
/* Relays the upstream MCP server's own GET stream of the session through
 * st: each whole event the upstream writes goes out between consentd's own
 * (never inside one); when it ends or fails, consentd's events go on alone.
 * st takes up over (closed with it); it must be read on the thread that
 * opened up (httpc.h). */
struct httpc_stream;
void mcp_stream_relay(struct mcp_stream *st, struct httpc_stream *up);
/* A reply_stream's done: frees the stream and gives its place in the bounds
 * back.  NULL-safe. */
void mcp_stream_close(void *stream);
/* The SSE event for one completed elicitation (event: message, data: the
 * notifications/elicitation/complete JSON-RPC notification, a blank line),
 * appended to b. */
enum cs_err mcp_stream_event(struct buf *b, const char *elicitation_id) CS_MUST_CHECK;

#endif
