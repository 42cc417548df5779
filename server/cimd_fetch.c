/* cimd_fetch.c -- Client ID Metadata Documents, the fetch and the cache: the
 * host resolved here within the deadline, every address checked (SSRF), the GET
 * pinned to them (httpc_get_pinned), and documents kept by URL for a bounded time.
 * It must never connect to an address it did not check, follow a redirect, or
 * keep more than max_entries documents. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "buf.h"
#include "cimd.h"
#include "httpc.h"
#include "mono.h"

#define CIMD_MAX_ADDRS    16         /* addresses of one host kept and pinned */
#define CIMD_MAX_LOOKUPS  32         /* name lookups under way at once, all threads */

/* --------------------------------------------------------------- resolving */

/* getaddrinfo has no timeout, so it runs on a thread of its own; a caller
 * whose deadline passes leaves, and the last of the two to finish frees this. */
struct lookup {
	pthread_mutex_t  mu;
	pthread_cond_t   cv;              /* CLOCK_MONOTONIC */
	int              refs;
	bool             done;
	int              rc;
	struct addrinfo *res;
	char             host[256], port[8];
};

static atomic_int lookups_running;

static void lookup_unref(struct lookup *l)
{
	pthread_mutex_lock(&l->mu);
	int left = --l->refs;
	pthread_mutex_unlock(&l->mu);
	if (left > 0)
		return;
	if (l->res != NULL)
		freeaddrinfo(l->res);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	free(l);
}

static void *lookup_main(void *arg)
{
	struct lookup *l = arg;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(l->host, l->port, &hints, &res);
	pthread_mutex_lock(&l->mu);
	l->rc = rc;
	l->res = rc == 0 ? res : NULL;
	l->done = true;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	atomic_fetch_sub(&lookups_running, 1);
	lookup_unref(l);
	return NULL;
}

/* Starts a detached thread that looks host up, into *out: a look-up held
 * by the thread and by the caller (lookup_unref, each). */
static enum cs_err lookup_start(const char *host, const char *ps, struct lookup **out)
{
	struct lookup *l;
	pthread_condattr_t ca;
	pthread_attr_t ta;
	pthread_t t;

	if ((l = calloc(1, sizeof *l)) == NULL)
		return CS_ENOMEM;
	l->refs = 2;
	if (str_fmt(l->host, sizeof l->host, "%s", host) != CS_OK ||
	    str_fmt(l->port, sizeof l->port, "%s", ps) != CS_OK) {
		free(l);
		return CS_EINVAL;
	}
	pthread_mutex_init(&l->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_attr_init(&ta);
	pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
	int prc = pthread_create(&t, &ta, lookup_main, l);
	pthread_attr_destroy(&ta);
	if (prc != 0) {
		l->refs = 1;
		lookup_unref(l);
		return CS_ENOMEM;
	}
	*out = l;
	return CS_OK;
}

/* The addresses of host by the deadline (a monotonic time in ms). */
static enum cs_err resolve(const char *host, uint16_t port, int64_t deadline,
    struct addrinfo **out, char *why, size_t whylen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
	    .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	struct lookup *l = NULL;
	char ps[8];
	enum cs_err e;

	if (str_fmt(ps, sizeof ps, "%u", (unsigned)port) != CS_OK)
		return CS_EINVAL;
	/* An address literal needs no lookup. */
	if (getaddrinfo(host, ps, &hints, out) == 0)
		return CS_OK;
	if (atomic_fetch_add(&lookups_running, 1) >= CIMD_MAX_LOOKUPS) {
		atomic_fetch_sub(&lookups_running, 1);
		cimd_reason(why, whylen, "too many client metadata look-ups are under way; try again");
		return CS_EBUSY;
	}
	if ((e = lookup_start(host, ps, &l)) != CS_OK) {
		atomic_fetch_sub(&lookups_running, 1);
		return e;
	}
	struct timespec ts = { .tv_sec = (time_t)(deadline / 1000),
	    .tv_nsec = (long)(deadline % 1000) * 1000000L };
	pthread_mutex_lock(&l->mu);
	while (!l->done)
		if (pthread_cond_timedwait(&l->cv, &l->mu, &ts) == ETIMEDOUT)
			break;
	if (!l->done) {
		e = CS_EBUSY;
		cimd_reason(why, whylen, "resolving the client_id's host took too long");
	} else if (l->rc != 0) {
		e = CS_EIO;
		cimd_reason(why, whylen, "the client_id's host does not resolve (%s)", gai_strerror(l->rc));
	} else {
		e = CS_OK;
		*out = l->res;
		l->res = NULL;
	}
	pthread_mutex_unlock(&l->mu);
	lookup_unref(l);
	return e;
}

/* --------------------------------------------------------------- the fetch */

static bool addr_allowed(const struct cimd_fetch_opts *o, const struct sockaddr *sa,
    enum cimd_addr *cls)
{
	enum cimd_addr c = cimd_addr_classify(sa);
	*cls = c;
	/* SECURITY: only public addresses; loopback only by the development switch. */
	return c == CIMD_ADDR_PUBLIC || (c == CIMD_ADDR_LOOPBACK && o->allow_loopback);
}

static bool pinned_addr_ok(const struct sockaddr *sa, void *arg)
{
	enum cimd_addr c;
	return addr_allowed(arg, sa, &c);
}

int64_t cimd_cache_control_max_age(const char *v)
{
	int64_t age = -1;
	while (v != NULL && *v) {
		v += strspn(v, " \t,");
		size_t n = strcspn(v, ",");
		if ((n == 8 && strncasecmp(v, "no-store", 8) == 0) ||
		    (n == 8 && strncasecmp(v, "no-cache", 8) == 0))
			return 0;
		if (n > 8 && strncasecmp(v, "max-age=", 8) == 0) {
			int64_t a = 0;
			size_t i = 8;
			for (; i < n && v[i] >= '0' && v[i] <= '9'; i++)
				if (a < INT32_MAX)
					a = a * 10 + (v[i] - '0');
			while (i < n && (v[i] == ' ' || v[i] == '\t'))
				i++;
			if (i == n && n > 8 && v[8] >= '0' && v[8] <= '9' && age < 0)
				age = a > INT32_MAX ? INT32_MAX : a;
		}
		v += n;
	}
	return age;
}

static const char *header(const struct httpc_reply *r, const char *name)
{
	for (size_t i = 0; i < r->nheaders; i++)
		if (strcasecmp(r->headers[i].name, name) == 0)
			return r->headers[i].value;
	return NULL;
}

/* application/json, or application/<something>+json (draft §4), any parameters. */
static bool json_media_type(const char *ct)
{
	size_t n;
	if (ct == NULL)
		return false;
	n = strcspn(ct, "; \t");
	if (n == 16 && strncasecmp(ct, "application/json", 16) == 0)
		return true;
	return n > 17 && strncasecmp(ct, "application/", 12) == 0 &&
	    strncasecmp(ct + n - 5, "+json", 5) == 0 && memchr(ct + 12, '/', n - 12) == NULL;
}

/* Every address of the host, checked; their numeric forms into addrs. */
static enum cs_err check_addrs(const struct cimd_fetch_opts *o, const char *host,
    const struct addrinfo *res, char addrs[][INET6_ADDRSTRLEN], size_t *n, char *why,
    size_t whylen)
{
	*n = 0;
	for (const struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
		char text[INET6_ADDRSTRLEN];
		const void *bytes;
		enum cimd_addr cls;
		if (ai->ai_family == AF_INET)
			bytes = &((const struct sockaddr_in *)(const void *)ai->ai_addr)->sin_addr;
		else if (ai->ai_family == AF_INET6)
			bytes = &((const struct sockaddr_in6 *)(const void *)ai->ai_addr)->sin6_addr;
		else
			continue;
		if (inet_ntop(ai->ai_family, bytes, text, sizeof text) == NULL)
			return CS_EIO;
		/* SECURITY: ANY refused address refuses the host: an attacker's name
		 * may list a public address beside an internal one. */
		if (!addr_allowed(o, ai->ai_addr, &cls)) {
			cimd_reason(why, whylen, "the client_id's host %s resolves to %s, %s: refused "
			    "(no requests to internal addresses)", host, text, cimd_addr_name(cls));
			return CS_EPERM;
		}
		bool seen = false;
		for (size_t i = 0; i < *n; i++)
			seen = seen || strcmp(addrs[i], text) == 0;
		if (!seen && *n < CIMD_MAX_ADDRS)
			memcpy(addrs[(*n)++], text, sizeof text);
	}
	if (*n == 0) {
		cimd_reason(why, whylen, "the client_id's host %s has no address", host);
		return CS_EIO;
	}
	return CS_OK;
}

enum cs_err cimd_addrs_allowed(const struct cimd_fetch_opts *o, const char *host,
    const struct addrinfo *res, char *why, size_t whylen)
{
	char addrs[CIMD_MAX_ADDRS][INET6_ADDRSTRLEN];
	size_t n;
	if (o == NULL || host == NULL)
		return CS_EINVAL;
	return check_addrs(o, host, res, addrs, &n, why, whylen);
}

/* Why the GET of step 2 failed with e (nothing for CS_ENOMEM). */
static void fetch_reason(const struct cimd_fetch_opts *o, enum cs_err e,
    const struct httpc_pinned_get *rq, int64_t start, char *why, size_t whylen)
{
	const char *cerr = rq->error;
	switch (e) {
	case CS_EBUSY:
		/* libcurl's connect timeout covers the TLS handshake: the whole
		 * deadline not yet reached, it was the connection's that ran out. */
		if (mono_ms() < start + o->timeout_ms)
			cimd_reason(why, whylen, "connecting to the client metadata document's host took longer "
			    "than %ld ms", rq->connect_timeout_ms);
		else
			cimd_reason(why, whylen, "fetching the client metadata document took longer than %ld ms",
			    o->timeout_ms);
		break;
	case CS_ETOOBIG:
		cimd_reason(why, whylen, "the client metadata document is larger than %zu bytes",
		    o->max_bytes);
		break;
	case CS_EPERM:
		cimd_reason(why, whylen, "the client_id's host led to a refused address");
		break;
	case CS_ENOMEM:
		break;
	default:
		cimd_reason(why, whylen, "the client metadata document could not be fetched (%s)",
		    cerr[0] ? cerr : "transport error");
		break;
	}
}

/* The answer is a 200 served as JSON (a redirect is not followed):
 * CS_EINVAL with why when not. */
static enum cs_err reply_check(const struct httpc_reply *rep, char *why, size_t whylen)
{
	if (rep->status >= 300 && rep->status < 400) {
		cimd_reason(why, whylen, "the client_id URL answered %ld, a redirect: redirects are not "
		    "followed", rep->status);
		return CS_EINVAL;
	}
	if (rep->status != 200) {
		cimd_reason(why, whylen, "the client_id URL answered %ld, not 200", rep->status);
		return CS_EINVAL;
	}
	if (!json_media_type(header(rep, "Content-Type"))) {
		cimd_reason(why, whylen, "the client metadata document is not served as application/json");
		return CS_EINVAL;
	}
	return CS_OK;
}

enum cs_err cimd_fetch(const struct cimd_fetch_opts *o, const char *url, struct cimd_doc *out,
    int64_t *max_age, char *why, size_t whylen)
{
	enum cs_err e;
	const char *uwhy = NULL;
	char host[256], addrs[CIMD_MAX_ADDRS][INET6_ADDRSTRLEN], cerr[HTTPC_ERROR_MAX];
	const char *addrv[CIMD_MAX_ADDRS + 1];
	size_t naddrs = 0;
	uint16_t port;
	struct addrinfo *res = NULL;
	struct httpc_reply rep;
	int64_t start = mono_ms(), left;
	bool have_rep = false;

	if (why != NULL && whylen > 0)
		why[0] = '\0';
	if (o == NULL || out == NULL || max_age == NULL || o->timeout_ms <= 0 ||
	    o->connect_timeout_ms <= 0 || o->max_bytes == 0)
		return CS_EINVAL;
	if (cimd_url_check(url, &uwhy) != CS_OK) {
		cimd_reason(why, whylen, "%s", uwhy);
		return CS_EINVAL;
	}
	if ((e = cimd_url_host(url, host, sizeof host, &port)) != CS_OK)
		return e;
	/* 1. The host's addresses, every one of them checked. */
	if ((e = resolve(host, port, start + o->timeout_ms, &res, why, whylen)) != CS_OK)
		goto out;
	if ((e = check_addrs(o, host, res, addrs, &naddrs, why, whylen)) != CS_OK)
		goto out;
	for (size_t i = 0; i < naddrs; i++)
		addrv[i] = addrs[i];
	addrv[naddrs] = NULL;
	/* 2. The GET, pinned to them, within what is left of the deadline. */
	if ((left = start + o->timeout_ms - mono_ms()) <= 0) {
		e = CS_EBUSY;
		cimd_reason(why, whylen, "fetching the client metadata document took longer than %ld ms",
		    o->timeout_ms);
		goto out;
	}
	struct httpc_pinned_get rq = {
		.url = url, .addrs = addrv, .addr_ok = pinned_addr_ok, .addr_arg = (void *)o,
		.accept = "application/json", .extra_ca_file = o->ca_file,
		.max_body = o->max_bytes,
		.connect_timeout_ms = o->connect_timeout_ms < left ? o->connect_timeout_ms : left,
		.timeout_ms = left, .error = cerr,
	};
	if ((e = httpc_get_pinned(&rq, &rep)) != CS_OK) {
		fetch_reason(o, e, &rq, start, why, whylen);
		goto out;
	}
	have_rep = true;
	/* 3. 200, JSON, then the document itself. */
	if ((e = reply_check(&rep, why, whylen)) != CS_OK ||
	    (e = cimd_doc_parse(url, rep.body.data, rep.body.len, out, why, whylen)) != CS_OK)
		goto out;
	*max_age = cimd_cache_control_max_age(header(&rep, "Cache-Control"));
out:
	if (res != NULL)
		freeaddrinfo(res);
	if (have_rep)
		httpc_reply_clear(&rep);
	return e;
}

/* --------------------------------------------------------------- the cache */

struct centry {
	char           *url;
	bool            ok;              /* a document, or a failure */
	struct cimd_doc doc;
	char            why[CIMD_WHY_MAX];
	int64_t         stored, expires;
};

struct cimd_cache {
	pthread_mutex_t        mu;
	pthread_cond_t         cv;       /* a fetch ended (CLOCK_MONOTONIC) */
	struct cimd_cache_opts o;
	struct centry         *e;        /* o.max_entries of them */
	size_t                 n;
	char                 **busy;     /* URLs being fetched */
	size_t                 nbusy, capbusy;
};

enum cs_err cimd_cache_new(const struct cimd_cache_opts *o, struct cimd_cache **out)
{
	struct cimd_cache *c;
	pthread_condattr_t ca;
	if (o == NULL || out == NULL || o->max_entries == 0 || o->min_ttl < 0 ||
	    o->max_ttl < o->min_ttl || o->failure_ttl < 0 || o->default_ttl < o->min_ttl ||
	    o->default_ttl > o->max_ttl)
		return CS_EINVAL;
	if ((c = calloc(1, sizeof *c)) == NULL)
		return CS_ENOMEM;
	if ((c->e = calloc(o->max_entries, sizeof *c->e)) == NULL) {
		free(c);
		return CS_ENOMEM;
	}
	c->o = *o;
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	*out = c;
	return CS_OK;
}

static void centry_clear(struct centry *e)
{
	free(e->url);
	cimd_doc_clear(&e->doc);
	memset(e, 0, sizeof *e);
}

void cimd_cache_free(struct cimd_cache *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->n; i++)
		centry_clear(&c->e[i]);
	for (size_t i = 0; i < c->nbusy; i++)
		free(c->busy[i]);
	free(c->busy);
	free(c->e);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static struct centry *find(struct cimd_cache *c, const char *url)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->e[i].url, url) == 0)
			return &c->e[i];
	return NULL;
}

/* Under c->mu. */
static enum cs_err get_locked(struct cimd_cache *c, const char *url, int64_t now,
    struct cimd_doc *out, char *why, size_t whylen)
{
	struct centry *e = find(c, url);
	if (e == NULL || e->expires <= now)
		return CS_ENOENT;
	if (!e->ok) {
		cimd_reason(why, whylen, "%s (remembered for %lld s)", e->why,
		    (long long)c->o.failure_ttl);
		return CS_EINVAL;
	}
	return cimd_doc_copy(&e->doc, out);
}

enum cs_err cimd_cache_get(struct cimd_cache *c, const char *url, int64_t now,
    struct cimd_doc *out, char *why, size_t whylen)
{
	if (c == NULL || url == NULL || out == NULL)
		return CS_EINVAL;
	pthread_mutex_lock(&c->mu);
	enum cs_err e = get_locked(c, url, now, out, why, whylen);
	pthread_mutex_unlock(&c->mu);
	return e;
}

/* The slot for url under c->mu: its own, else a free one, else the first
 * expired one, else the oldest (emptied). */
static struct centry *slot_locked(struct cimd_cache *c, const char *url, int64_t now)
{
	struct centry *e = find(c, url), *victim = NULL;
	if (e != NULL) {
		cimd_doc_clear(&e->doc);
		return e;
	}
	if (c->n < c->o.max_entries) {
		e = &c->e[c->n];
		if ((e->url = strdup(url)) == NULL)
			return NULL;
		c->n++;
		return e;
	}
	for (size_t i = 0; i < c->n; i++) {
		if (c->e[i].expires <= now) {
			victim = &c->e[i];
			break;
		}
		if (victim == NULL || c->e[i].stored < victim->stored)
			victim = &c->e[i];
	}
	char *u = strdup(url);
	if (u == NULL)
		return NULL;
	centry_clear(victim);
	victim->url = u;
	return victim;
}

static int64_t clamp_ttl(const struct cimd_cache_opts *o, int64_t max_age)
{
	if (max_age < 0)
		return o->default_ttl;
	if (max_age < o->min_ttl)
		return o->min_ttl;
	return max_age > o->max_ttl ? o->max_ttl : max_age;
}

static enum cs_err put_locked(struct cimd_cache *c, const char *url, const struct cimd_doc *doc,
    int64_t max_age, const char *why, int64_t now)
{
	struct cimd_doc copy = { 0 };
	struct centry *e;
	enum cs_err err;
	if (doc != NULL && (err = cimd_doc_copy(doc, &copy)) != CS_OK)
		return err;
	if ((e = slot_locked(c, url, now)) == NULL) {
		cimd_doc_clear(&copy);
		return CS_ENOMEM;
	}
	e->ok = doc != NULL;
	e->doc = copy;
	e->stored = now;
	e->expires = now + (doc != NULL ? clamp_ttl(&c->o, max_age) : c->o.failure_ttl);
	e->why[0] = '\0';
	if (why != NULL && str_fmt(e->why, sizeof e->why, "%s", why) != CS_OK)
		e->why[0] = '\0';
	return CS_OK;
}

enum cs_err cimd_cache_put(struct cimd_cache *c, const char *url, const struct cimd_doc *doc,
    int64_t max_age, int64_t now)
{
	if (c == NULL || url == NULL || doc == NULL)
		return CS_EINVAL;
	pthread_mutex_lock(&c->mu);
	enum cs_err e = put_locked(c, url, doc, max_age, NULL, now);
	pthread_mutex_unlock(&c->mu);
	return e;
}

/* Under c->mu: removes url's entry (a failure not to remember). */
static void drop_locked(struct cimd_cache *c, const char *url)
{
	struct centry *e = find(c, url);
	if (e == NULL)
		return;
	centry_clear(e);
	struct centry *last = &c->e[--c->n];
	if (e != last) {
		*e = *last;
		memset(last, 0, sizeof *last);
	}
}

enum cs_err cimd_cache_put_failure(struct cimd_cache *c, const char *url, const char *why,
    int64_t now)
{
	enum cs_err e = CS_OK;
	if (c == NULL || url == NULL)
		return CS_EINVAL;
	pthread_mutex_lock(&c->mu);
	if (c->o.failure_ttl == 0)
		drop_locked(c, url);
	else
		e = put_locked(c, url, NULL, 0, why != NULL ? why : "the last fetch failed", now);
	pthread_mutex_unlock(&c->mu);
	return e;
}

size_t cimd_cache_count(struct cimd_cache *c)
{
	if (c == NULL)
		return 0;
	pthread_mutex_lock(&c->mu);
	size_t n = c->n;
	pthread_mutex_unlock(&c->mu);
	return n;
}

static bool busy_has(const struct cimd_cache *c, const char *url)
{
	for (size_t i = 0; i < c->nbusy; i++)
		if (strcmp(c->busy[i], url) == 0)
			return true;
	return false;
}

static enum cs_err busy_add(struct cimd_cache *c, const char *url)
{
	if (c->nbusy == c->capbusy) {
		size_t ncap = c->capbusy ? 2 * c->capbusy : 8;
		char **nb = realloc(c->busy, ncap * sizeof *nb);
		if (nb == NULL)
			return CS_ENOMEM;
		c->busy = nb;
		c->capbusy = ncap;
	}
	if ((c->busy[c->nbusy] = strdup(url)) == NULL)
		return CS_ENOMEM;
	c->nbusy++;
	return CS_OK;
}

static void busy_remove(struct cimd_cache *c, const char *url)
{
	for (size_t i = 0; i < c->nbusy; i++)
		if (strcmp(c->busy[i], url) == 0) {
			free(c->busy[i]);
			c->busy[i] = c->busy[--c->nbusy];
			return;
		}
}

enum cs_err cimd_client(struct cimd_cache *c, const struct cimd_policy *p,
    const struct cimd_fetch_opts *o, const char *url, int64_t now, struct cimd_doc *out,
    char *why, size_t whylen)
{
	enum cs_err e;
	const char *pwhy = NULL;
	struct cimd_doc doc = { 0 };
	int64_t max_age = -1;

	if (why != NULL && whylen > 0)
		why[0] = '\0';
	if (c == NULL || p == NULL || o == NULL || out == NULL)
		return CS_EINVAL;
	if (cimd_url_check(url, &pwhy) != CS_OK) {
		cimd_reason(why, whylen, "%s", pwhy);
		return CS_EINVAL;
	}
	if (!cimd_policy_allows(p, url, &pwhy)) {
		cimd_reason(why, whylen, "%s", pwhy);
		return CS_EPERM;
	}
	/* The cache, or a turn to fetch: one fetch per URL at a time; the others
	 * wait for its outcome (at most the fetch's own timeout and a second). */
	int64_t wait_until = mono_ms() + o->timeout_ms + 1000;
	struct timespec ts = { .tv_sec = (time_t)(wait_until / 1000),
	    .tv_nsec = (long)(wait_until % 1000) * 1000000L };
	pthread_mutex_lock(&c->mu);
	for (;;) {
		e = get_locked(c, url, now, out, why, whylen);
		if (e != CS_ENOENT) {
			pthread_mutex_unlock(&c->mu);
			return e;
		}
		if (!busy_has(c, url))
			break;
		if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) == ETIMEDOUT) {
			pthread_mutex_unlock(&c->mu);
			cimd_reason(why, whylen, "another fetch of this client metadata document is under way");
			return CS_EBUSY;
		}
	}
	e = busy_add(c, url);
	pthread_mutex_unlock(&c->mu);
	if (e != CS_OK)
		return e;

	e = cimd_fetch(o, url, &doc, &max_age, why, whylen);

	pthread_mutex_lock(&c->mu);
	enum cs_err pe = CS_OK;
	if (e == CS_OK)
		pe = put_locked(c, url, &doc, max_age, NULL, now);
	else if (e != CS_ENOMEM && c->o.failure_ttl > 0)
		pe = put_locked(c, url, NULL, 0, why, now);
	busy_remove(c, url);
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	if (e == CS_OK && pe != CS_OK)
		e = pe;
	if (e == CS_OK)
		*out = doc;
	else
		cimd_doc_clear(&doc);
	return e;
}
