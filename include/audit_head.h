/* audit_head.h -- publishing the audit chain's head, and holding the database
 * to the heads published (docs/reference.md "Audit trail").  Every commit that appended
 * audit entries publishes its last entry's number and link before the answer
 * goes out: on the log, and with [audit] head_file as one line of an
 * append-only file.  A database whose chain is behind what was published (a
 * cut-off tail, a rewound sequence, a rewritten entry) is reported: on the log,
 * by GET /readyz and by /metrics.  `consentd audit verify --heads FILE` checks
 * a whole history of published heads.  No SQL here, no key material. */
#ifndef CS_AUDIT_HEAD_H
#define CS_AUDIT_HEAD_H

#include <stdint.h>
#include <stdio.h>
#include "audit.h"
#include "buf.h"
#include "cs_err.h"
#include "store.h"

#define AUDIT_HEAD_LINE_MAX 1024       /* longest line of a heads file, newline included */
#define AUDIT_ROTATED_MARK "# master-key-rotated"

/* --- reading published heads ---------------------------------------------- */

enum audit_line_kind {
	AUDIT_LINE_HEAD,             /* a published head */
	AUDIT_LINE_SKIP,             /* blank, or a comment ('#') */
	AUDIT_LINE_ROTATED,          /* AUDIT_ROTATED_MARK ...: `vault rekey` re-linked the
	                                chain here, the heads above are under an older key */
	AUDIT_LINE__MAX
};
/* Reads one line of a heads file (NUL-terminated; a trailing "\n" or "\r\n"
 * and blanks around it are ignored): "N:LINK" as head_file holds it, or a log
 * line that ends in "audit head N:LINK" or "audit head seq=N link=LINK"; LINK
 * is 64 hex digits.  A line of the server's JSON log stream (log.h, a JSON
 * object) is read by its "msg" as such a log line, and skipped (a request, any
 * other message) when its msg does not start with "audit head ".  *kind, and
 * *out for a head, are written on CS_OK only; CS_EINVAL for any other line. */
enum cs_err audit_head_line(const char *line, enum audit_line_kind *kind,
    struct audit_head *out) CS_MUST_CHECK;

/* What audit_heads_check found. */
struct audit_heads_result {
	int               ok;        /* 1: every head listed is in the database, with its link */
	int64_t           heads;     /* heads compared */
	int64_t           line;      /* line number of the first head not matched, or of a bad line */
	struct audit_head bad;       /* that head */
	int               missing;   /* 1: the entry is gone; 0: its link differs */
	char              why[200];  /* the line, and what the database holds instead */
	int64_t           torn;      /* lines a crash cut short (skipped, never compared) */
	int64_t           pruned;    /* heads before the anchor of a pruned chain (not compared) */
};
/* Checks every head listed in f (seekable: it is read twice) against the
 * database: each must be present with its link.  verified is the head
 * audit_verify reached, which says where the log ends.  Heads listed before
 * the last AUDIT_LINE_ROTATED line only have to be present (`vault rekey`
 * re-linked them).  In a pruned chain (audit_prune), a head before the anchor
 * is counted in res->pruned and not compared; the anchor's own number is
 * compared with the anchor's link.  CS_OK when the check ran (read res->ok); CS_EINVAL for a
 * malformed line, CS_ETOOBIG for one longer than AUDIT_HEAD_LINE_MAX (res->line
 * and res->why say which); CS_ENOENT when f lists no head at all. */
enum cs_err audit_heads_check(struct store_conn *c, FILE *f, const struct audit_head *verified,
    struct audit_heads_result *res) CS_MUST_CHECK;

/* --- publishing (one publisher per process) ------------------------------ */

/* Starts publishing the heads of s's commits: opens head_file (NULL: none)
 * with O_APPEND|O_CREAT, mode 0600, takes the highest head its last lines
 * hold as the one published so far, and installs s's audit hook.  From then
 * on every commit that appended audit entries, once it succeeded and before
 * store_commit returns, logs "audit head N:LINK" (log NULL: on the server's log
 * stream, log.h; else "consentd: audit head N:LINK" on log) and appends
 * "N:LINK\n" to head_file with one write(2) -- in commit order, and only heads
 * above the highest published.  A commit whose head is not above it means the
 * numbers were rewound: the database is then marked behind.  CS_EIO (with a
 * message on log) when head_file cannot be opened or read. */
enum cs_err audit_publish_open(struct store *s, const char *head_file, FILE *log) CS_MUST_CHECK;
/* Removes s's hook, syncs and closes head_file and forgets everything
 * (the behind mark too).  NULL-safe. */
void audit_publish_close(struct store *s);

/* Compares the database with the highest head published: when its head is
 * lower, or the entry at the published number is gone or has another link, it
 * marks the database behind (for good: until audit_publish_close) and logs an
 * error "audit head behind: ...".  Then logs the database's head as
 * "consentd: audit head N:LINK" and fdatasyncs head_file.  With publish (at
 * start only, before any thread commits) a head above the published one is
 * published too, unless behind.  *behind (may be NULL) gets the mark. */
enum cs_err audit_publish_check(struct store_conn *c, int publish, int *behind) CS_MUST_CHECK;

/* 1 once the database was found behind the published heads. */
int audit_head_behind(void);
/* The highest head published (seq 0 when none). */
void audit_head_published(struct audit_head *out);
/* Sets the publisher's gauges and counter in the registry (metrics.h;
 * declared when they are not yet): consentd_audit_head_behind, _seq and
 * _file_errors_total; then appends those three families to b as
 * metrics_render writes them (b NULL: only sets them, GET /metrics renders). */
enum cs_err audit_head_metrics(struct buf *b) CS_MUST_CHECK;

/* For `consentd vault rekey`: appends AUDIT_ROTATED_MARK " old=OLD new=NEW\n"
 * and "N:LINK\n" for h to the file at path (created 0600) in one write(2). */
enum cs_err audit_head_file_rotated(const char *path, const char *old_kid, const char *new_kid,
    const struct audit_head *h) CS_MUST_CHECK;

#endif
