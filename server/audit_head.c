/* audit_head.c -- publishes the audit chain's head with every commit that
 * appended entries (the log, and [audit] head_file), finds a database behind
 * the heads published, and checks a history of published heads.
 * It must never publish out of order, never publish a head it has not seen
 * committed, and never lose the mark once the database was found behind.
 * No SQL here (store_audit.c); links are not secrets, keys never come here. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "audit.h"
#include "audit_head.h"
#include "buf.h"
#include "log.h"
#include "metrics.h"
#include "store_audit.h"

#define LOG_TAG "audit head "           /* what a log line holds before a head */
#define TAIL_BYTES 8192                  /* read from head_file's end at start */
#define SAY_MAX 8192                     /* bytes of one message the publisher says */
#define ZERO_HEX "0000000000000000000000000000000000000000000000000000000000000000"

_Static_assert(sizeof ZERO_HEX == AUDIT_LINK_HEX + 1, "one link size");
_Static_assert(STORE_AUDIT_LINK_LEN == AUDIT_LINK_LEN, "one link size");

/* --- reading a line ------------------------------------------------------- */

static int is_blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

/* The last occurrence of tag in [p, end), or NULL. */
static const char *last_tag(const char *p, const char *end, const char *tag)
{
	size_t n = strlen(tag);
	const char *found = NULL;
	for (const char *q = p; (size_t)(end - q) >= n; ) {
		const char *hit = memmem(q, (size_t)(end - q), tag, n);
		if (hit == NULL)
			break;
		found = hit;
		q = hit + 1;
	}
	return found;
}

/* Decimal digits at *pp (1 to 19 of them, no sign) into *out. */
static int parse_seq(const char **pp, const char *end, int64_t *out)
{
	const char *p = *pp;
	int64_t n = 0;
	if (p == end || *p < '0' || *p > '9')
		return 0;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		if (n > (INT64_MAX - (*p - '0')) / 10)
			return 0;
		n = n * 10 + (*p - '0');
	}
	*pp = p;
	*out = n;
	return 1;
}

/* Exactly AUDIT_LINK_HEX hex digits filling [p, end), lowercased into hex. */
static int parse_link(const char *p, const char *end, char hex[AUDIT_LINK_HEX + 1])
{
	if (end - p != AUDIT_LINK_HEX)
		return 0;
	for (size_t i = 0; i < AUDIT_LINK_HEX; i++) {
		char ch = p[i];
		if (ch >= 'A' && ch <= 'F')
			ch = (char)(ch - 'A' + 'a');
		else if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
			return 0;
		hex[i] = ch;
	}
	hex[AUDIT_LINK_HEX] = '\0';
	return 1;
}

/* A line of the JSON log stream: its msg, read as a log line. */
static enum cs_err json_line(const char *p, const char *end, enum audit_line_kind *kind,
    struct audit_head *out)
{
	json_t *v = json_loadb(p, (size_t)(end - p), JSON_REJECT_DUPLICATES, NULL);
	enum cs_err e = CS_EINVAL;
	if (!json_is_object(v))
		goto out;
	const char *msg = json_string_value(json_object_get(v, "msg"));
	const char *after = msg != NULL && strncmp(msg, LOG_TAG, strlen(LOG_TAG)) == 0 ?
	    msg + strlen(LOG_TAG) : NULL;
	/* Only "audit head N:LINK" and "audit head seq=N ..." name a head; the
	 * publisher's other messages ("audit head behind: ...", "audit head check:
	 * ...") and every other line are skipped. */
	if (after == NULL || !((*after >= '0' && *after <= '9') || strncmp(after, "seq=", 4) == 0)) {
		*kind = AUDIT_LINE_SKIP;
		e = CS_OK;
		goto out;
	}
	e = audit_head_line(msg, kind, out);
out:
	json_decref(v);
	return e;
}

enum cs_err audit_head_line(const char *line, enum audit_line_kind *kind, struct audit_head *out)
{
	struct audit_head h;
	const char *p, *end, *tag;
	size_t n, mark = strlen(AUDIT_ROTATED_MARK);

	if (line == NULL || kind == NULL || out == NULL)
		return CS_EINVAL;
	if ((n = strnlen(line, AUDIT_HEAD_LINE_MAX + 1)) > AUDIT_HEAD_LINE_MAX)
		return CS_EINVAL;
	p = line;
	end = line + n;
	while (p < end && is_blank(*p))
		p++;
	while (end > p && is_blank(end[-1]))
		end--;
	if (p == end) {
		*kind = AUDIT_LINE_SKIP;
		return CS_OK;
	}
	if (*p == '{')
		return json_line(p, end, kind, out);
	if (*p == '#') {
		*kind = (size_t)(end - p) >= mark && memcmp(p, AUDIT_ROTATED_MARK, mark) == 0 &&
		    ((size_t)(end - p) == mark || is_blank(p[mark])) ? AUDIT_LINE_ROTATED : AUDIT_LINE_SKIP;
		return CS_OK;
	}
	if ((tag = last_tag(p, end, LOG_TAG)) != NULL) {
		p = tag + strlen(LOG_TAG);
		/* consentd's own alarm ("audit head behind: ...") names no head. */
		if ((size_t)(end - p) >= 6 && memcmp(p, "behind", 6) == 0) {
			*kind = AUDIT_LINE_SKIP;
			return CS_OK;
		}
		if ((size_t)(end - p) > 4 && memcmp(p, "seq=", 4) == 0) {
			p += 4;
			if (!parse_seq(&p, end, &h.seq) || (size_t)(end - p) < 6 ||
			    memcmp(p, " link=", 6) != 0 || !parse_link(p + 6, end, h.hex))
				return CS_EINVAL;
			*kind = AUDIT_LINE_HEAD;
			*out = h;
			return CS_OK;
		}
	}
	if (!parse_seq(&p, end, &h.seq) || p == end || *p != ':' || !parse_link(p + 1, end, h.hex))
		return CS_EINVAL;
	*kind = AUDIT_LINE_HEAD;
	*out = h;
	return CS_OK;
}

/* One line of f into buf (at most cap - 1 bytes, without its newline).
 * CS_ENOENT at the end of f; CS_ETOOBIG for a longer line; CS_EINVAL for a
 * NUL byte (a head file is text). */
static enum cs_err read_line(FILE *f, char *buf, size_t cap, bool *torn)
{
	size_t n = 0;
	int ch;
	bool nul = false, junk_after_nul = false;
	*torn = false;
	while ((ch = getc(f)) != EOF) {
		if (ch == '\n')
			break;
		if (ch == '\0') {
			nul = true;
			continue;
		}
		if (nul)
			junk_after_nul = true;
		if (n + 1 >= cap)
			return CS_ETOOBIG;
		buf[n++] = (char)ch;
	}
	/* A crash can leave a write cut short, or a tail of NUL bytes (delayed
	 * allocation): the text before the NULs must itself be a cut-off head. */
	if (nul && junk_after_nul)
		return CS_EINVAL;
	*torn = nul;
	if (ch == EOF && ferror(f))
		return CS_EIO;
	if (ch == EOF && n == 0)
		return CS_ENOENT;
	buf[n] = '\0';
	return CS_OK;
}

/* --- checking a history of heads ------------------------------------------ */

/* A line the publisher's write left cut short (a crash): digits, then
 * optionally ':' and fewer hex digits than a link has, or nothing at all.
 * The publisher starts the next head on a fresh line, so such a line is
 * skipped and counted, never compared: it proves nothing and hides nothing. */
static bool cut_off_head(const char *line)
{
	const char *p = line;
	size_t hex = 0;
	while (*p >= '0' && *p <= '9')
		p++;
	if (*p == '\0')
		return true;
	if (p == line || *p++ != ':')
		return false;
	for (; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); p++)
		hex++;
	return *p == '\0' && hex < AUDIT_LINK_HEX;
}

static enum cs_err bad_line(struct audit_heads_result *res, int64_t line, enum cs_err e)
{
	enum cs_err f;
	res->ok = 0;
	res->line = line;
	if (e == CS_ETOOBIG)
		f = str_fmt(res->why, sizeof res->why, "line %" PRId64 ": longer than %d characters",
		    line, AUDIT_HEAD_LINE_MAX - 1);
	else
		f = str_fmt(res->why, sizeof res->why, "line %" PRId64 ": %s", line, e == CS_EIO ?
		    "cannot read" : "not a head (N:LINK, or a log line \"audit head N:LINK\")");
	/* A number and a constant always fit res->why; the error below is what
	 * the caller acts on, the why only says it. */
	if (f != CS_OK)
		res->why[0] = '\0';
	return e == CS_EIO ? CS_EIO : e == CS_ETOOBIG ? CS_ETOOBIG : CS_EINVAL;
}

/* Compares head h (from line) with the database; 0 when it does not match
 * (res says why).  link_too is 0 for heads linked under an older master key. */
static enum cs_err check_one(struct store_conn *c, const struct audit_head *h, int64_t line,
    int link_too, const struct audit_head *verified, struct audit_heads_result *res)
{
	unsigned char link[AUDIT_LINK_LEN];
	char hex[AUDIT_LINK_HEX + 1];
	enum cs_err e;

	if (h->seq == 0)
		e = CS_OK;                 /* "nothing yet": its link is all zeros */
	else
		e = store_audit_link_at(c, h->seq, link);
	if (e != CS_OK && e != CS_ENOENT)
		return e;
	if (e == CS_ENOENT) {
		/* Gone because a pruned prefix took it?  Only below the anchors
		 * (every entry numbered through the highest was pruned). */
		int64_t through = 0;
		enum cs_err ae = audit_pruned_through(c, &through);
		if (ae != CS_OK)
			return ae;
		if (h->seq < through) {
			res->pruned++;
			return CS_OK;
		}
	}
	res->heads++;
	if (h->seq == 0)
		memcpy(hex, ZERO_HEX, sizeof hex);
	else if (e == CS_OK)
		audit_link_hex(link, hex);
	if (e == CS_ENOENT) {
		res->missing = 1;
		if ((e = str_fmt(res->why, sizeof res->why, "line %" PRId64 "; the log ends at entry %"
		    PRId64 ": cut off?", line, verified->seq)) != CS_OK)
			return e;
	} else if (link_too && CRYPTO_memcmp(hex, h->hex, AUDIT_LINK_HEX) != 0) {
		if ((e = str_fmt(res->why, sizeof res->why, "line %" PRId64 "; entry %" PRId64
		    " has another link: rewritten?", line, h->seq)) != CS_OK)
			return e;
	} else {
		return CS_OK;
	}
	res->ok = 0;
	res->line = line;
	res->bad = *h;
	return CS_OK;
}

enum cs_err audit_heads_check(struct store_conn *c, FILE *f, const struct audit_head *verified,
    struct audit_heads_result *res)
{
	char line[AUDIT_HEAD_LINE_MAX];
	enum audit_line_kind kind;
	struct audit_head h;
	int64_t lineno = 0, heads = 0, last_rotated = 0;
	bool torn = false;
	enum cs_err e;

	if (c == NULL || f == NULL || verified == NULL || res == NULL)
		return CS_EINVAL;
	memset(res, 0, sizeof *res);
	res->ok = 1;
	/* Pass 1: every line well-formed (or cut off by a crash), and where the
	 * chain was last re-linked. */
	while ((e = read_line(f, line, sizeof line, &torn)) != CS_ENOENT) {
		lineno++;
		if (e != CS_OK)
			return bad_line(res, lineno, e);
		if ((torn || audit_head_line(line, &kind, &h) != CS_OK) && cut_off_head(line)) {
			res->torn++;
			continue;
		}
		if (torn || audit_head_line(line, &kind, &h) != CS_OK)
			return bad_line(res, lineno, CS_EINVAL);
		if (kind == AUDIT_LINE_HEAD)
			heads++;
		else if (kind == AUDIT_LINE_ROTATED)
			last_rotated = lineno;
	}
	if (heads == 0) {
		res->ok = 0;
		if (str_fmt(res->why, sizeof res->why, "no head listed") != CS_OK)
			res->why[0] = '\0';
		return CS_ENOENT;
	}
	/* Pass 2: each head against the database, up to the first that does not match. */
	if (fseek(f, 0, SEEK_SET) != 0)
		return CS_EIO;
	clearerr(f);
	for (lineno = 1; res->ok && (e = read_line(f, line, sizeof line, &torn)) != CS_ENOENT;
	    lineno++) {
		if (e == CS_OK && (torn || audit_head_line(line, &kind, &h) != CS_OK) &&
		    cut_off_head(line))
			continue;
		if (e != CS_OK || torn || audit_head_line(line, &kind, &h) != CS_OK)
			return bad_line(res, lineno, e != CS_OK ? e : CS_EINVAL);   /* changed under us */
		if (kind != AUDIT_LINE_HEAD)
			continue;
		if ((e = check_one(c, &h, lineno, lineno > last_rotated, verified, res)) != CS_OK)
			return e;
	}
	return CS_OK;
}

/* --- the publisher -------------------------------------------------------- */

/* One publisher per process: the server's or a command's. */
static struct {
	pthread_mutex_t   lock;
	FILE             *log;
	int               fd;              /* head_file, -1 when none */
	char             *path;
	int               torn;            /* head_file does not end in a newline */
	struct audit_head published;       /* the highest head published; seq 0 = none */
	int               behind;
	uint64_t          file_errors;
} pub = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

/* Appends "N:LINK\n" to head_file (pub.lock held): one write(2), so lines
 * from several processes never interleave. */
/* One line of the publisher's log: a line of the log stream (log.c) when it
 * was opened with log NULL (the server), else "consentd: MSG" on that file
 * (the command-line tools, tests), as `audit verify --heads` reads either. */
static void say(enum log_level lv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(enum log_level lv, const char *fmt, ...)
{
	struct buf b;
	va_list ap;
	buf_init(&b, SAY_MAX);
	va_start(ap, fmt);
	enum cs_err e = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	/* A message is said whole or, too long (paths are its only long part),
	 * replaced by one that says so: never a cut one. */
	const char *msg = e == CS_OK && b.data != NULL ? b.data : "(this message was too long to log)";
	if (pub.log == NULL) {
		/* The level says "error"; the words need not. */
		log_msg(lv, "%s", strncmp(msg, "error: ", 7) == 0 ? msg + 7 : msg);
	} else {
		fprintf(pub.log, "consentd: %s\n", msg);
		fflush(pub.log);
	}
	buf_clear(&b);
}

static void file_append(const struct audit_head *h)
{
	char line[32 + AUDIT_LINK_HEX];
	int n;
	ssize_t w;

	if (pub.fd < 0)
		return;
	/* A number and 64 hex digits: it always fits. */
	if (str_fmt(line, sizeof line, "%s%" PRId64 ":%s\n", pub.torn ? "\n" : "", h->seq,
	    h->hex) != CS_OK)
		return;
	n = (int)strlen(line);
	do
		w = write(pub.fd, line, (size_t)n);
	while (w < 0 && errno == EINTR);
	if (w == n) {
		pub.torn = 0;
		return;
	}
	/* A short write leaves a partial line: the next one starts on a fresh line. */
	if (w > 0)
		pub.torn = 1;
	pub.file_errors++;
	say(LOG_ERROR, "error: audit head_file %s: cannot append head %" PRId64 ": %s",
	    pub.path, h->seq, w < 0 ? strerror(errno) : "short write");
}

static void log_head(const struct audit_head *h)
{
	say(LOG_INFO, LOG_TAG "%" PRId64 ":%s", h->seq, h->hex);
	fflush(pub.log);
}

/* Marks the database behind (pub.lock held) and says so loudly. */
static void mark_behind(const char *why)
{
	pub.behind = 1;
	say(LOG_ERROR, "error: " LOG_TAG "behind: %s; the audit log was cut off, "
	    "rewound or rewritten -- serving unready (GET /readyz 503); check it with `consentd "
	    "audit verify --heads FILE`", why);
}

/* store_commit's audit hook: a transaction ending in entry seq has committed. */
static void on_commit(void *arg, int64_t seq, const unsigned char link[STORE_AUDIT_LINK_LEN])
{
	struct audit_head h;
	char why[160];
	(void)arg;
	h.seq = seq;
	audit_link_hex(link, h.hex);
	pthread_mutex_lock(&pub.lock);
	log_head(&h);
	if (pub.behind) {
		/* Nothing more goes to head_file: its last line stays the last good head. */
	} else if (seq <= pub.published.seq) {
		/* SECURITY: commits come here in order with ever higher numbers; a
		 * number not above the published head was handed out again. */
		/* Numbers only: it fits; the constant stands in if it ever did not. */
		mark_behind(str_fmt(why, sizeof why, "database head %" PRId64 " %s published %"
		    PRId64 " (the numbers were rewound)", seq, seq < pub.published.seq ? "<" :
		    "re-uses", pub.published.seq) == CS_OK ? why : "the numbers were rewound");
	} else {
		pub.published = h;
		file_append(&h);
	}
	pthread_mutex_unlock(&pub.lock);
}

/* The highest head among the last lines of head_file (pub.fd), into *out
 * (seq 0 when none).  Sets pub.torn when the file does not end in a newline;
 * *unreadable counts lines that are not heads (a torn last write). */
static enum cs_err read_tail(struct audit_head *out, int *unreadable)
{
	char buf[TAIL_BYTES];
	struct stat sb;
	off_t from;
	ssize_t got;
	size_t n = 0;

	out->seq = 0;
	memcpy(out->hex, ZERO_HEX, sizeof out->hex);
	*unreadable = 0;
	if (fstat(pub.fd, &sb) != 0)
		return CS_EIO;
	if (!S_ISREG(sb.st_mode))
		return CS_EINVAL;
	if (sb.st_size == 0)
		return CS_OK;
	from = sb.st_size > TAIL_BYTES ? sb.st_size - TAIL_BYTES : 0;
	while (n < (size_t)(sb.st_size - from)) {
		got = pread(pub.fd, buf + n, (size_t)(sb.st_size - from) - n, from + (off_t)n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return CS_EIO;
		n += (size_t)got;
	}
	pub.torn = buf[n - 1] != '\n';
	const char *p = buf, *end = buf + n;
	if (from > 0) {                  /* the first line is cut: start after it */
		const char *nl = memchr(p, '\n', n);
		if (nl == NULL)
			return CS_OK;
		p = nl + 1;
	}
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = (size_t)((nl != NULL ? nl : end) - p);
		char line[AUDIT_HEAD_LINE_MAX];
		enum audit_line_kind kind;
		struct audit_head h;
		if (len >= sizeof line || memchr(p, '\0', len) != NULL) {
			(*unreadable)++;
		} else {
			memcpy(line, p, len);
			line[len] = '\0';
			if (audit_head_line(line, &kind, &h) != CS_OK)
				(*unreadable)++;
			else if (kind == AUDIT_LINE_HEAD && h.seq > out->seq)
				*out = h;
		}
		p += len + 1;
	}
	return CS_OK;
}

enum cs_err audit_publish_open(struct store *s, const char *head_file, FILE *log)
{
	enum cs_err e = CS_OK;
	int unreadable = 0;

	if (s == NULL)
		return CS_EINVAL;
	pthread_mutex_lock(&pub.lock);
	pub.log = log;
	pub.fd = -1;
	pub.torn = 0;
	pub.behind = 0;
	pub.file_errors = 0;
	pub.published.seq = 0;
	memcpy(pub.published.hex, ZERO_HEX, sizeof pub.published.hex);
	if (head_file != NULL) {
		if ((pub.path = strdup(head_file)) == NULL) {
			e = CS_ENOMEM;
			goto out;
		}
		pub.fd = open(head_file, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (pub.fd < 0) {
			say(LOG_ERROR, "audit head_file %s: cannot open: %s", head_file,
			    strerror(errno));
			e = CS_EIO;
			goto out;
		}
		if ((e = read_tail(&pub.published, &unreadable)) != CS_OK) {
			say(LOG_ERROR, "audit head_file %s: %s", head_file,
			    e == CS_EINVAL ? "not a regular file" : "cannot read");
			e = CS_EIO;
			goto out;
		}
		if (unreadable > 0)
			say(LOG_WARN, "audit head_file %s: %d line(s) among the last are "
			    "not heads (a torn write?); ignored", head_file, unreadable);
		if (unreadable > 0 && pub.published.seq == 0) {
			/* SECURITY: a file that says something, but no head, cannot vouch for the database. */
			pub.behind = 1;
			say(LOG_ERROR, "error: " LOG_TAG "behind: head_file %s holds no "
			    "readable head among its last lines -- serving unready (GET /readyz 503)",
			    head_file);
		}
		if (pub.published.seq > 0)
			say(LOG_INFO, "audit head_file %s: last published head %" PRId64,
			    head_file, pub.published.seq);
	}
out:
	if (e != CS_OK && pub.fd >= 0) {
		close(pub.fd);
		pub.fd = -1;
	}
	if (e != CS_OK) {
		free(pub.path);
		pub.path = NULL;
	}
	pthread_mutex_unlock(&pub.lock);
	if (e == CS_OK)
		store_set_audit_hook(s, on_commit, NULL);
	return e;
}

void audit_publish_close(struct store *s)
{
	if (s != NULL)
		store_set_audit_hook(s, NULL, NULL);
	pthread_mutex_lock(&pub.lock);
	if (pub.fd >= 0) {
		if (fdatasync(pub.fd) != 0)
			say(LOG_ERROR, "audit head_file %s: fdatasync: %s", pub.path,
			    strerror(errno));
		close(pub.fd);
	}
	pub.fd = -1;
	free(pub.path);
	pub.path = NULL;
	pub.behind = 0;
	pub.published.seq = 0;
	memcpy(pub.published.hex, ZERO_HEX, sizeof pub.published.hex);
	pthread_mutex_unlock(&pub.lock);
}

/* Why the database (head db) is behind the published head p, into why; 0 when it is not. */
static enum cs_err compare(struct store_conn *c, const struct audit_head *p,
    const struct audit_head *db, char *why, size_t n, int *is_behind)
{
	unsigned char link[AUDIT_LINK_LEN];
	char hex[AUDIT_LINK_HEX + 1];
	enum cs_err e;

	*is_behind = 0;
	if (p->seq == 0)
		return CS_OK;
	if (db->seq < p->seq) {
		*is_behind = 1;
		return str_fmt(why, n, "database head %" PRId64 " < published %" PRId64, db->seq,
		    p->seq);
	}
	if ((e = store_audit_link_at(c, p->seq, link)) == CS_ENOENT) {
		/* Pruned (audit_prune) is not behind: an anchor is past it. */
		int64_t through = 0;
		enum cs_err ae = audit_pruned_through(c, &through);
		if (ae != CS_OK)
			return ae;
		if (p->seq < through)
			return CS_OK;
		*is_behind = 1;
		return str_fmt(why, n, "published head %" PRId64 " is missing from the database "
		    "(head %" PRId64 ")", p->seq, db->seq);
	}
	if (e != CS_OK)
		return e;
	audit_link_hex(link, hex);
	if (CRYPTO_memcmp(hex, p->hex, AUDIT_LINK_HEX) != 0) {
		*is_behind = 1;
		return str_fmt(why, n, "entry %" PRId64 " has another link than the published head "
		    "(database head %" PRId64 ")", p->seq, db->seq);
	}
	return CS_OK;
}

enum cs_err audit_publish_check(struct store_conn *c, int publish, int *behind)
{
	struct audit_head p, db;
	char why[200];
	int is_behind = 0, fd;
	enum cs_err e;

	if (c == NULL)
		return CS_EINVAL;
	/* The published head first: everything it names has committed, so the
	 * database read after it must hold it. */
	audit_head_published(&p);
	if ((e = audit_head(c, &db)) != CS_OK || (e = compare(c, &p, &db, why, sizeof why,
	    &is_behind)) != CS_OK) {
		say(LOG_ERROR, LOG_TAG "check: cannot "
		    "read the database: %s", cs_strerror(e));
		return e;
	}
	pthread_mutex_lock(&pub.lock);
	if (is_behind)
		mark_behind(why);
	else if (pub.behind)
		say(LOG_ERROR, "error: " LOG_TAG "behind: found so earlier; still "
		    "serving unready");
	log_head(&db);
	if (publish && !pub.behind && db.seq > pub.published.seq) {
		pub.published = db;
		file_append(&db);
	}
	is_behind = pub.behind;
	fd = pub.fd;
	pthread_mutex_unlock(&pub.lock);
	/* Outside the lock: commits need not wait for the disk.  fd stays open
	 * until audit_publish_close, which runs after every thread is gone. */
	if (fd >= 0 && fdatasync(fd) != 0)
		say(LOG_ERROR, "audit head_file: fdatasync: %s", strerror(errno));
	if (behind != NULL)
		*behind = is_behind;
	return CS_OK;
}

int audit_head_behind(void)
{
	pthread_mutex_lock(&pub.lock);
	int b = pub.behind;
	pthread_mutex_unlock(&pub.lock);
	return b;
}

void audit_head_published(struct audit_head *out)
{
	pthread_mutex_lock(&pub.lock);
	*out = pub.published;
	pthread_mutex_unlock(&pub.lock);
}

enum cs_err audit_head_metrics(struct buf *b)
{
	struct metric_family *f[] = {
		metrics_family_get("consentd_audit_head_behind", "1 when the database's audit "
		    "chain is behind the heads consentd published (cut off, rewound or rewritten; see "
		    "the log).", METRIC_GAUGE, NULL, NULL, 0),
		metrics_family_get("consentd_audit_head_seq", "The number of the highest audit "
		    "head consentd published.", METRIC_GAUGE, NULL, NULL, 0),
		metrics_family_get("consentd_audit_head_file_errors_total", "Heads that could not "
		    "be appended to [audit] head_file.", METRIC_COUNTER, NULL, NULL, 0),
	};
	enum cs_err e = CS_OK;
	pthread_mutex_lock(&pub.lock);
	int behind = pub.behind;
	int64_t seq = pub.published.seq;
	uint64_t errors = pub.file_errors;
	pthread_mutex_unlock(&pub.lock);
	metrics_set(f[0], NULL, behind);
	metrics_set(f[1], NULL, (double)seq);
	metrics_set(f[2], NULL, (double)errors);
	for (size_t i = 0; b != NULL && e == CS_OK && i < sizeof f / sizeof f[0]; i++)
		e = f[i] != NULL ? metrics_render_family(b, f[i]) : CS_ENOMEM;
	return b == NULL && (f[0] == NULL || f[1] == NULL || f[2] == NULL) ? CS_ENOMEM : e;
}

enum cs_err audit_head_file_rotated(const char *path, const char *old_kid, const char *new_kid,
    const struct audit_head *h)
{
	char text[256];
	int n, fd;
	ssize_t w;
	enum cs_err e = CS_OK;

	if (path == NULL || old_kid == NULL || new_kid == NULL || h == NULL)
		return CS_EINVAL;
	if ((e = str_fmt(text, sizeof text, "\n" AUDIT_ROTATED_MARK " old=%s new=%s\n%" PRId64
	    ":%s\n", old_kid, new_kid, h->seq, h->hex)) != CS_OK)
		return e;
	n = (int)strlen(text);
	if ((fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
		return CS_EIO;
	/* The leading newline ends a line a crash may have left torn (a blank
	 * line is skipped when read). */
	do
		w = write(fd, text, (size_t)n);
	while (w < 0 && errno == EINTR);
	if (w != n || fdatasync(fd) != 0)
		e = CS_EIO;
	if (close(fd) != 0)
		e = CS_EIO;
	return e;
}
