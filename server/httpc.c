/* httpc.c -- consentd's outbound HTTP client on libcurl: discovery, JWKS and token
 * endpoints.  It must never follow a redirect, skip TLS verification, talk plain
 * http to anything but loopback, or keep more than HTTPC_MAX_RESPONSE bytes. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <pthread.h>
#include <stdatomic.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include "buf.h"
#include "form.h"
#include "httpc.h"
#include "mono.h"

#define HTTPC_UA              "consentd"
#define HTTPC_CONNECT_TIMEOUT 5L
#define HTTPC_TIMEOUT         10L
#define HTTPC_MAX_CRED        4096     /* user or password, before encoding */
#define HTTPC_MAX_MEDIA_TYPE  127      /* a Content-Type given to httpc_post */

enum cs_err httpc_global_init(void)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? CS_OK : CS_EIO;
}

/* True when the URL part `what` is present in u. */
static bool url_has(CURLU *u, CURLUPart what)
{
	char *v = NULL;
	CURLUcode rc = curl_url_get(u, what, &v, 0);
	curl_free(v);
	return rc == CURLUE_OK;
}

/* Parses url into a new CURLU handle when it is allowed (see httpc.h).  The
 * same handle is then given to the transfer (CURLOPT_CURLU), so the URL that
 * was checked is exactly the URL that is fetched: no parser differential. */
static CURLU *url_parse_allowed(const char *url)
{
	CURLU *u = NULL, *ok = NULL;
	char *scheme = NULL, *host = NULL;

	if (url == NULL || url[0] == '\0')
		goto out;
	if ((u = curl_url()) == NULL)
		goto out;
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
		goto out;         /* no scheme, bad syntax, unknown scheme */
	if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || host[0] == '\0')
		goto out;
	/* SECURITY: credentials in a URL (user@host) are refused outright: they
	 * would be sent somewhere and they confuse human readers of the host. */
	if (url_has(u, CURLUPART_USER) || url_has(u, CURLUPART_PASSWORD) ||
	    url_has(u, CURLUPART_OPTIONS) || url_has(u, CURLUPART_ZONEID))
		goto out;
	if (strcasecmp(scheme, "https") == 0) {
		ok = u;
	} else if (strcasecmp(scheme, "http") == 0) {
		/* SECURITY: plain http only to loopback (development IdPs). */
		if (strcmp(host, "127.0.0.1") == 0 || strcmp(host, "[::1]") == 0 ||
		    strcmp(host, "::1") == 0 || strcasecmp(host, "localhost") == 0)
			ok = u;
	}
out:
	curl_free(scheme);
	curl_free(host);
	if (ok == NULL)
		curl_url_cleanup(u);
	return ok;
}

int httpc_url_allowed(const char *url)
{
	CURLU *u = url_parse_allowed(url);
	if (u == NULL)
		return 0;
	curl_url_cleanup(u);
	return 1;
}

struct sink {
	struct buf *body;
	bool        too_big;
	bool        nomem;
};

/* Appends to the response body, wiping the old block whenever it grows: token
 * responses hold secrets and realloc would leave copies in freed memory. */
static enum cs_err body_append(struct buf *b, const char *p, size_t n)
{
	if (n > b->max || b->len > b->max - n)
		return CS_ETOOBIG;
	size_t need = b->len + n + 1;
	if (need > b->cap) {
		size_t ncap = b->cap ? b->cap : 1024;
		while (ncap < need)
			ncap *= 2;                   /* bounded by max + 1 below */
		if (ncap > b->max + 1)
			ncap = b->max + 1;
		char *np = malloc(ncap);
		if (np == NULL)
			return CS_ENOMEM;
		if (b->data != NULL) {
			memcpy(np, b->data, b->len);
			OPENSSL_cleanse(b->data, b->cap);
			free(b->data);
		}
		b->data = np;
		b->cap = ncap;
	}
	if (n > 0)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return CS_OK;
}

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct sink *s = userdata;
	size_t n = size * nmemb;              /* size is always 1 for curl */
	enum cs_err e = body_append(s->body, ptr, n);
	if (e == CS_ETOOBIG)
		s->too_big = true;
	else if (e != CS_OK)
		s->nomem = true;
	return e == CS_OK ? n : 0;            /* 0 aborts the transfer */
}

/* Wipes every header line (an Authorization header holds a secret) and frees. */
static void slist_wipe_free(struct curl_slist *l)
{
	for (struct curl_slist *i = l; i != NULL; i = i->next)
		if (i->data != NULL)
			OPENSSL_cleanse(i->data, strlen(i->data));
	curl_slist_free_all(l);
}

static void response_init(struct httpc_response *res)
{
	res->status = 0;
	buf_init(&res->body, HTTPC_MAX_RESPONSE);
	res->content_type = NULL;
}

/* The request's header lines: Accept, then ct_line (a POST's Content-Type)
 * unless NULL, then the caller's lines (Authorization), moved from *extra
 * onto the list so one free wipes all.  NULL when out of memory (*extra
 * then still the caller's). */
static struct curl_slist *perform_headers(const char *ct_line, struct curl_slist **extra)
{
	struct curl_slist *hdrs, *tail;

	if ((hdrs = curl_slist_append(NULL, "Accept: application/json")) == NULL)
		return NULL;
	tail = hdrs;
	if (ct_line != NULL) {
		if ((tail = curl_slist_append(hdrs, ct_line)) == NULL) {
			slist_wipe_free(hdrs);
			return NULL;
		}
	}
	while (tail->next != NULL)
		tail = tail->next;
	tail->next = *extra;
	*extra = NULL;
	return hdrs;
}

/* Sets up h for perform(): u, the header lines, the sink; body NULL: GET,
 * else a POST of body_len bytes.  false when libcurl refused an option. */
static bool perform_setup(CURL *h, CURLU *u, struct curl_slist *hdrs, struct sink *sink,
    const char *body, size_t body_len)
{
	bool setup_ok = curl_easy_setopt(h, CURLOPT_CURLU, u) == CURLE_OK &&
#if LIBCURL_VERSION_NUM >= 0x075500
	    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK &&
#else
	    curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS)) == CURLE_OK &&
#endif
	    /* SECURITY: no redirects, timeouts, TLS peer and host verification on. */
	    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, HTTPC_CONNECT_TIMEOUT) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_TIMEOUT, HTTPC_TIMEOUT) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE,
	        (curl_off_t)HTTPC_MAX_RESPONSE) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_USERAGENT, HTTPC_UA) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_WRITEDATA, sink) == CURLE_OK;
	if (setup_ok && body != NULL)
		setup_ok = curl_easy_setopt(h, CURLOPT_POST, 1L) == CURLE_OK &&
		    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
		        (curl_off_t)body_len) == CURLE_OK &&
		    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body) == CURLE_OK;
	return setup_ok;
}

/* One request with a fresh easy handle.  body NULL: GET; else a POST of
 * body_len bytes with the Content-Type line ct_line. */
static enum cs_err perform(const char *url, const char *body, size_t body_len,
    const char *ct_line, struct curl_slist *extra, struct httpc_response *res)
{
	enum cs_err e = CS_EINVAL;
	CURLU *u = NULL;
	CURL *h = NULL;
	struct curl_slist *hdrs = NULL;
	struct sink sink = { &res->body, false, false };
	char *ct = NULL;
	CURLcode rc;

	response_init(res);
	if ((u = url_parse_allowed(url)) == NULL)
		goto out;
	e = CS_ENOMEM;
	if ((h = curl_easy_init()) == NULL)
		goto out;
	if ((hdrs = perform_headers(body != NULL ? ct_line : NULL, &extra)) == NULL)
		goto out;

	e = CS_EIO;
	if (!perform_setup(h, u, hdrs, &sink, body, body_len))
		goto out;
	rc = curl_easy_perform(h);
	if (sink.too_big || rc == CURLE_FILESIZE_EXCEEDED) {
		e = CS_ETOOBIG;
		goto out;
	}
	if (sink.nomem) {
		e = CS_ENOMEM;
		goto out;
	}
	if (rc != CURLE_OK)
		goto out;
	if (curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &res->status) != CURLE_OK)
		goto out;
	if (curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct != NULL) {
		if ((res->content_type = strdup(ct)) == NULL) {
			e = CS_ENOMEM;
			goto out;
		}
	}
	if (res->body.data == NULL && (e = body_append(&res->body, "", 0)) != CS_OK)
		goto out;                         /* the body is always a string */
	e = CS_OK;
out:
	curl_easy_cleanup(h);                 /* before the CURLU it uses */
	curl_url_cleanup(u);
	slist_wipe_free(hdrs);
	slist_wipe_free(extra);
	if (e != CS_OK)
		httpc_response_clear(res);
	return e;
}

enum cs_err httpc_get(const char *url, struct httpc_response *res)
{
	if (res == NULL)
		return CS_EINVAL;
	return perform(url, NULL, 0, NULL, NULL, res);
}

/* "Authorization: Basic base64(pct(user):pct(pass))" as a one-line list. */
static enum cs_err basic_header(const char *user, const char *pass, struct curl_slist **out)
{
	enum cs_err e;
	char *u = NULL, *p = NULL;
	unsigned char *b64 = NULL;
	size_t b64_cap = 0;
	struct buf raw, line;
	struct curl_slist *l = NULL;

	buf_init(&raw, 6 * HTTPC_MAX_CRED + 2);
	buf_init(&line, 8 * HTTPC_MAX_CRED + 64);
	e = CS_EINVAL;
	if (strlen(user) > HTTPC_MAX_CRED || strlen(pass) > HTTPC_MAX_CRED)
		goto out;
	/* RFC 6749 §2.3.1: each part form-urlencoded before Base64. */
	if ((e = pct_encode(user, &u)) != CS_OK || (e = pct_encode(pass, &p)) != CS_OK)
		goto out;
	if ((e = buf_puts(&raw, u)) != CS_OK || (e = buf_puts(&raw, ":")) != CS_OK ||
	    (e = buf_puts(&raw, p)) != CS_OK)
		goto out;
	e = CS_ENOMEM;
	b64_cap = 4 * ((raw.len + 2) / 3) + 1;
	if ((b64 = malloc(b64_cap)) == NULL)
		goto out;
	EVP_EncodeBlock(b64, (const unsigned char *)raw.data, (int)raw.len);
	if ((e = buf_puts(&line, "Authorization: Basic ")) != CS_OK ||
	    (e = buf_puts(&line, (const char *)b64)) != CS_OK)
		goto out;
	e = CS_ENOMEM;
	if ((l = curl_slist_append(NULL, line.data)) == NULL)
		goto out;
	*out = l;
	e = CS_OK;
out:
	/* SECURITY: every temporary copy of the secret is wiped. */
	if (u != NULL) {
		OPENSSL_cleanse(u, strlen(u));
		free(u);
	}
	if (p != NULL) {
		OPENSSL_cleanse(p, strlen(p));
		free(p);
	}
	if (b64 != NULL) {
		OPENSSL_cleanse(b64, b64_cap);
		free(b64);
	}
	buf_wipe_clear(&raw);
	buf_wipe_clear(&line);
	return e;
}

enum cs_err httpc_post_form(const char *url, const char *body, const char *basic_user,
    const char *basic_pass, struct httpc_response *res)
{
	enum cs_err e;
	struct curl_slist *auth = NULL;

	if (res == NULL || body == NULL || (basic_user == NULL) != (basic_pass == NULL))
		return CS_EINVAL;
	if (basic_user != NULL && (e = basic_header(basic_user, basic_pass, &auth)) != CS_OK) {
		response_init(res);
		return e;
	}
	return perform(url, body, strlen(body), "Content-Type: application/x-www-form-urlencoded",
	    auth, res);                          /* takes auth and wipes it */
}

/* A media type as RFC 9110 §8.3.1 spells it without parameters: type "/"
 * subtype, each a token; anything else (spaces, CR, LF, ';') is refused so
 * no header can be smuggled in. */
static bool media_type_ok(const char *t)
{
	static const char tchar[] = "!#$%&'*+-.^_`|~";
	size_t n = 0, slash = 0;
	for (const char *p = t; *p != '\0'; p++, n++) {
		unsigned char ch = (unsigned char)*p;
		if (ch == '/') {
			if (slash != 0 || n == 0)
				return false;
			slash = n;
		} else if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || (ch != 0 && strchr(tchar, ch) != NULL))) {
			return false;
		}
		if (n >= HTTPC_MAX_MEDIA_TYPE)
			return false;
	}
	return slash != 0 && slash + 1 < n;
}

enum cs_err httpc_post(const char *url, const char *content_type, const char *body,
    size_t body_len, struct httpc_response *res)
{
	char line[HTTPC_MAX_MEDIA_TYPE + 32];
	if (res == NULL)
		return CS_EINVAL;
	if (body == NULL || content_type == NULL || !media_type_ok(content_type)) {
		response_init(res);
		return CS_EINVAL;
	}
	/* media_type_ok bounds content_type below HTTPC_MAX_MEDIA_TYPE: it fits. */
	if (str_fmt(line, sizeof line, "Content-Type: %s", content_type) != CS_OK) {
		response_init(res);
		return CS_EINVAL;
	}
	return perform(url, body, body_len, line, NULL, res);
}

void httpc_response_clear(struct httpc_response *res)
{
	if (res == NULL)
		return;
	buf_wipe_clear(&res->body);
	free(res->content_type);
	res->content_type = NULL;
	res->status = 0;
}

/* --- general requests (the proxy) ----------------------------------------- */

#define HTTPC_MAX_HEADER_LINE 8192

/* One connection cache per thread (CURLSH): every stream opened on a thread
 * shares it, so consecutive proxied calls reuse connections and TLS sessions.
 * A share touched by one thread only needs no lock callbacks; streams are read
 * and closed on the thread that opened them (an MHD worker keeps its
 * connections).  The thread also keeps the curl handles of streams that ended
 * (a multi handle and its easy handle, wiped with curl_easy_reset): a new
 * multi handle costs a wake-up socketpair, which a proxied call then does not
 * pay. */
#define HTTPC_IDLE_HANDLES 2          /* a pool thread holds one stream at a time */

struct handles {
	CURLM *multi;
	CURL  *h;
};

struct thread_curl {
	CURLSH        *share;
	struct handles idle[HTTPC_IDLE_HANDLES];
	size_t         nidle;
};

static pthread_key_t  tc_key;
static pthread_once_t tc_once = PTHREAD_ONCE_INIT;
static int            tc_key_ok;
static atomic_ulong   handles_made;

static void handles_free(struct handles *hs)
{
	if (hs->multi != NULL && hs->h != NULL)
		curl_multi_remove_handle(hs->multi, hs->h);
	curl_easy_cleanup(hs->h);          /* before the share it uses */
	curl_multi_cleanup(hs->multi);
	hs->h = NULL;
	hs->multi = NULL;
}

static void thread_curl_free(void *p)
{
	struct thread_curl *tc = p;
	for (size_t i = 0; i < tc->nidle; i++)
		handles_free(&tc->idle[i]);
	curl_share_cleanup(tc->share);
	free(tc);
}

static void tc_key_init(void)
{
	tc_key_ok = pthread_key_create(&tc_key, thread_curl_free) == 0;
}

static struct thread_curl *thread_curl(void)
{
	struct thread_curl *tc;
	CURLSH *sh;
	pthread_once(&tc_once, tc_key_init);
	if (!tc_key_ok)
		return NULL;
	if ((tc = pthread_getspecific(tc_key)) != NULL)
		return tc;
	if ((tc = calloc(1, sizeof *tc)) == NULL)
		return NULL;
	if ((sh = curl_share_init()) == NULL) {
		free(tc);
		return NULL;
	}
	tc->share = sh;
	if (curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK ||
	    curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK ||
	    curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK ||
	    pthread_setspecific(tc_key, tc) != 0) {
		thread_curl_free(tc);
		return NULL;
	}
	return tc;
}

/* A multi handle with its easy handle for one stream: the thread's last idle
 * pair, or a new one. */
static bool handles_take(struct thread_curl *tc, struct handles *out)
{
	if (tc->nidle > 0) {
		*out = tc->idle[--tc->nidle];
		memset(&tc->idle[tc->nidle], 0, sizeof tc->idle[tc->nidle]);
		return true;
	}
	if ((out->h = curl_easy_init()) == NULL)
		return false;
	if ((out->multi = curl_multi_init()) == NULL) {
		curl_easy_cleanup(out->h);
		out->h = NULL;
		return false;
	}
	atomic_fetch_add(&handles_made, 1);
	return true;
}

/* A stream's handles back to the thread that opened it, wiped of the call:
 * SECURITY: curl_easy_reset drops every option -- the header list (the
 * provider token is one of its lines, wiped by the caller), the URL, the
 * method, the body -- and the handle's authentication state; only the share
 * (connections, TLS sessions, DNS) stays.  Kept only on the opening thread
 * and only while there is room, else freed. */
static void handles_put(struct thread_curl *tc, struct handles *hs)
{
	if (hs->multi != NULL && hs->h != NULL)
		curl_multi_remove_handle(hs->multi, hs->h);
	if (tc != NULL && hs->multi != NULL && hs->h != NULL &&
	    pthread_getspecific(tc_key) == tc && tc->nidle < HTTPC_IDLE_HANDLES) {
		curl_easy_reset(hs->h);
		tc->idle[tc->nidle++] = *hs;
	} else {
		handles_free(hs);
	}
	hs->h = NULL;
	hs->multi = NULL;
}

unsigned long httpc_handles_made(void)
{
	return atomic_load(&handles_made);
}

void httpc_reply_init(struct httpc_reply *res)
{
	memset(res, 0, sizeof *res);
	buf_init(&res->body, HTTPC_MAX_RESPONSE);
}

static void reply_headers_clear(struct httpc_reply *res)
{
	for (size_t i = 0; i < res->nheaders; i++) {
		free(res->headers[i].name);
		free(res->headers[i].value);
		res->headers[i].name = res->headers[i].value = NULL;
	}
	res->nheaders = 0;
}

void httpc_reply_clear(struct httpc_reply *res)
{
	if (res == NULL)
		return;
	buf_wipe_clear(&res->body);
	reply_headers_clear(res);
	res->status = 0;
}

struct hsink {
	struct httpc_reply *res;      /* NULL once the final headers are in */
	long code;                    /* of the response whose headers are arriving */
	bool final;                   /* the final (non-1xx) response's headers ended */
	bool nomem;
};

/* Keeps the header lines of the last response (a 100 Continue or a proxy's
 * answer before it starts over at its status line). */
static size_t header_cb(char *ptr, size_t size, size_t nitems, void *userdata)
{
	struct hsink *s = userdata;
	size_t n = size * nitems, nl, vl;
	const char *colon;
	if (s->res == NULL)
		return n;                         /* trailers: ignored */
	if (n >= 5 && memcmp(ptr, "HTTP/", 5) == 0) {
		const char *sp = memchr(ptr, ' ', n);
		s->code = 0;
		const char *d = sp ? sp + 1 : ptr + n;
		for (int k = 0; k < 3 && d < ptr + n && *d >= '0' && *d <= '9'; k++, d++)
			s->code = s->code * 10 + (*d - '0');
		reply_headers_clear(s->res);
		return n;
	}
	if ((n == 2 && ptr[0] == '\r' && ptr[1] == '\n') || (n == 1 && ptr[0] == '\n')) {
		if (s->code >= 200) {
			s->res->status = s->code;
			s->final = true;
			s->res = NULL;
		}
		return n;
	}
	if (n > HTTPC_MAX_HEADER_LINE || s->res->nheaders == HTTPC_MAX_REPLY_HEADERS)
		return n;                         /* dropped, not fatal */
	if ((colon = memchr(ptr, ':', n)) == NULL)
		return n;
	nl = (size_t)(colon - ptr);
	const char *v = colon + 1;
	vl = n - nl - 1;
	while (vl > 0 && (*v == ' ' || *v == '\t')) {
		v++;
		vl--;
	}
	while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' ' ||
	    v[vl - 1] == '\t'))
		vl--;
	if (nl == 0)
		return n;
	struct httpc_header *hh = &s->res->headers[s->res->nheaders];
	if ((hh->name = strndup(ptr, nl)) == NULL || (hh->value = strndup(v, vl)) == NULL) {
		free(hh->name);
		hh->name = NULL;
		s->nomem = true;
		return 0;
	}
	s->res->nheaders++;
	return n;
}

static bool method_ok(const char *m)
{
	static const char *const ok[] = { "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", NULL };
	for (size_t i = 0; ok[i]; i++)
		if (strcmp(m, ok[i]) == 0)
			return true;
	return false;
}

struct httpc_stream {
	struct thread_curl *tc;          /* the opening thread's: its handles go back there */
	struct handles     cu;           /* its multi and easy handle, from tc */
	CURLU             *u;
	struct curl_slist *hdrs;         /* the provider token is one of these lines */
	struct buf         pending;      /* body bytes received and not yet read */
	size_t             off;          /* read position in pending */
	size_t             total, cap;   /* body bytes received; the cap on them */
	struct hsink       hs;
	bool               too_big, nomem, done;
	CURLcode           rc;           /* the transfer's result once done */
	struct httpc_call_opts opts;     /* httpc_request_opts's; zero otherwise */
};

static atomic_int abort_all;

void httpc_abort_all(void)
{
	atomic_store(&abort_all, 1);
}

/* Nonzero aborts the transfer (CURLE_ABORTED_BY_CALLBACK). */
static int progress_cb(void *clientp, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
    curl_off_t ulnow)
{
	(void)clientp; (void)dltotal; (void)dlnow; (void)ultotal; (void)ulnow;
	return atomic_load(&abort_all);
}

static size_t stream_write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct httpc_stream *s = userdata;
	size_t n = size * nmemb;              /* size is always 1 for curl */
	if (n > s->cap - s->total) {
		s->too_big = true;
		return 0;                         /* 0 aborts the transfer */
	}
	if (body_append(&s->pending, ptr, n) != CS_OK) {
		s->nomem = true;
		return 0;
	}
	s->total += n;
	return n;
}

static enum cs_err stream_result(const struct httpc_stream *s)
{
	if (s->too_big || s->rc == CURLE_FILESIZE_EXCEEDED)
		return CS_ETOOBIG;
	if (s->nomem || s->hs.nomem)
		return CS_ENOMEM;
	if (s->rc == CURLE_OPERATION_TIMEDOUT)
		return CS_EBUSY;
	return s->rc == CURLE_OK ? CS_OK : CS_EIO;
}

/* One step of the transfer: whatever is ready is read, then a wait of at most a
 * second for more (curl enforces the request's timeouts itself). */
static enum cs_err stream_step_wait(struct httpc_stream *s, int wait_ms);

static enum cs_err stream_step(struct httpc_stream *s)
{
	return stream_step_wait(s, 1000);
}

static enum cs_err stream_step_wait(struct httpc_stream *s, int wait_ms)
{
	int running = 0, left = 0;
	CURLMsg *msg;
	if (curl_multi_perform(s->cu.multi, &running) != CURLM_OK)
		return CS_EIO;
	while ((msg = curl_multi_info_read(s->cu.multi, &left)) != NULL)
		if (msg->msg == CURLMSG_DONE) {
			s->rc = msg->data.result;
			s->done = true;
		}
	if (s->done || running == 0) {
		s->done = true;
		return CS_OK;
	}
	if (s->pending.len > s->off)
		return CS_OK;
	return curl_multi_poll(s->cu.multi, NULL, 0, wait_ms, NULL) == CURLM_OK ? CS_OK : CS_EIO;
}

void httpc_stream_close(struct httpc_stream *s)
{
	if (s == NULL)
		return;
	/* Its connection stays in the thread's share; its handles are kept there. */
	handles_put(s->tc, &s->cu);
	curl_url_cleanup(s->u);
	slist_wipe_free(s->hdrs);
	buf_wipe_clear(&s->pending);
	free(s);
}

static bool stream_setup(struct httpc_stream *s, const struct httpc_request *rq, CURLSH *sh)
{
	CURL *h = s->cu.h;
	bool ok = curl_easy_setopt(h, CURLOPT_CURLU, s->u) == CURLE_OK &&
#if LIBCURL_VERSION_NUM >= 0x075500
	    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK &&
#else
	    curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS)) == CURLE_OK &&
#endif
	    curl_easy_setopt(h, CURLOPT_SHARE, sh) == CURLE_OK &&
	    /* SECURITY: never through a proxy from the environment (http_proxy...):
	     * the provider token goes to base_url and nowhere else. */
	    curl_easy_setopt(h, CURLOPT_PROXY, "") == CURLE_OK &&
	    /* SECURITY: no redirects, timeouts, TLS peer and host verification on. */
	    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT,
	        rq->connect_timeout > 0 ? rq->connect_timeout : HTTPC_CONNECT_TIMEOUT) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_TIMEOUT,
	        rq->timeout > 0 ? rq->timeout : HTTPC_TIMEOUT) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)s->cap) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_USERAGENT, HTTPC_UA) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_HTTPHEADER, s->hdrs) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, progress_cb) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, stream_write_cb) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_WRITEDATA, s) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb) == CURLE_OK &&
	    curl_easy_setopt(h, CURLOPT_HEADERDATA, &s->hs) == CURLE_OK;
	if (ok && s->opts.timeout_ms > 0)
		ok = curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, s->opts.timeout_ms) == CURLE_OK &&
		    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, s->opts.timeout_ms) == CURLE_OK;
	/* A connection is reused only for the same CA file (curl compares it);
	 * curl_easy_reset drops it before the handle's next call. */
	if (ok && s->opts.ca_file != NULL)
		ok = curl_easy_setopt(h, CURLOPT_CAINFO, s->opts.ca_file) == CURLE_OK;
	if (ok) {
		if (strcmp(rq->method, "HEAD") == 0)
			ok = curl_easy_setopt(h, CURLOPT_NOBODY, 1L) == CURLE_OK;
		else if (strcmp(rq->method, "GET") != 0)
			ok = curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method) == CURLE_OK;
	}
	/* COPYPOSTFIELDS: the caller's body need not outlive this call. */
	if (ok && rq->body != NULL)
		ok = curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
		        (curl_off_t)rq->body_len) == CURLE_OK &&
		    curl_easy_setopt(h, CURLOPT_COPYPOSTFIELDS, rq->body) == CURLE_OK;
	return ok;
}

static enum cs_err stream_open(const struct httpc_request *rq, const struct httpc_call_opts *o,
    struct httpc_reply *res, struct httpc_stream **out);

enum cs_err httpc_stream_open(const struct httpc_request *rq, struct httpc_reply *res,
    struct httpc_stream **out)
{
	return stream_open(rq, NULL, res, out);
}

/* The stream's header lines into s->hdrs: "Expect:" off (a 100-continue
 * round trip buys nothing here), then the request's own. */
static enum cs_err stream_headers(struct httpc_stream *s, const struct httpc_request *rq)
{
	if ((s->hdrs = curl_slist_append(NULL, "Expect:")) == NULL)
		return CS_ENOMEM;
	for (size_t i = 0; rq->headers && rq->headers[i]; i++) {
		/* SECURITY: a header line with CR or LF would smuggle another header. */
		if (strpbrk(rq->headers[i], "\r\n") != NULL)
			return CS_EINVAL;
		struct curl_slist *t = curl_slist_append(s->hdrs, rq->headers[i]);
		if (t == NULL)
			return CS_ENOMEM;
		s->hdrs = t;
	}
	return CS_OK;
}

/* Runs the transfer until the final headers and the first body bytes (or
 * the end).  headers_only: the headers must come within the connect timeout
 * and 5 s more, whatever the transfer's own timeout (a stream's lifetime). */
static enum cs_err stream_wait_head(struct httpc_stream *s, const struct httpc_request *rq)
{
	enum cs_err e;
	int64_t head_by = mono_ms() + ((rq->connect_timeout > 0 ? rq->connect_timeout : 10) + 5) * 1000;
	while (!s->done && !(s->hs.final && (rq->headers_only || s->pending.len > 0))) {
		if (rq->headers_only && mono_ms() > head_by)
			return CS_EBUSY;
		if ((e = stream_step(s)) != CS_OK)
			return e;
	}
	if (s->done && (e = stream_result(s)) != CS_OK)
		return e;
	if (!s->hs.final)
		return CS_EIO;                    /* no HTTP response at all */
	return CS_OK;
}

static enum cs_err stream_open(const struct httpc_request *rq, const struct httpc_call_opts *o,
    struct httpc_reply *res, struct httpc_stream **out)
{
	enum cs_err e = CS_EINVAL;
	struct httpc_stream *s = NULL;

	if (res == NULL || out == NULL)
		return CS_EINVAL;
	*out = NULL;
	httpc_reply_init(res);
	if (rq == NULL || rq->method == NULL || !method_ok(rq->method))
		return CS_EINVAL;
	/* SECURITY: with a body libcurl turns GET into POST; HEAD has none either. */
	if (rq->body != NULL && (strcmp(rq->method, "GET") == 0 || strcmp(rq->method, "HEAD") == 0))
		return CS_EINVAL;
	if ((s = calloc(1, sizeof *s)) == NULL)
		return CS_ENOMEM;
	if (o != NULL)
		s->opts = *o;
	s->cap = rq->max_body ? rq->max_body : HTTPC_MAX_RESPONSE;
	buf_init(&s->pending, s->cap);
	s->hs.res = res;
	if ((s->u = url_parse_allowed(rq->url)) == NULL)
		goto out;
	if ((e = stream_headers(s, rq)) != CS_OK)
		goto out;
	e = CS_ENOMEM;
	if ((s->tc = thread_curl()) == NULL || !handles_take(s->tc, &s->cu))
		goto out;
	e = CS_EIO;
	if (!stream_setup(s, rq, s->tc->share) ||
	    curl_multi_add_handle(s->cu.multi, s->cu.h) != CURLM_OK)
		goto out;
	if ((e = stream_wait_head(s, rq)) != CS_OK)
		goto out;
	*out = s;
	return CS_OK;
out:
	s->hs.res = NULL;
	httpc_stream_close(s);
	httpc_reply_clear(res);
	return e;
}

enum cs_err httpc_stream_read(struct httpc_stream *s, char *dst, size_t max, size_t *got)
{
	enum cs_err e;
	*got = 0;
	if (s == NULL || dst == NULL)
		return CS_EINVAL;
	while (s->off == s->pending.len) {
		/* drained: the block is reused (and wiped when it grows) */
		s->off = 0;
		s->pending.len = 0;
		if (s->done)
			return stream_result(s);      /* CS_OK with *got == 0: the end */
		if ((e = stream_step(s)) != CS_OK)
			return e;
	}
	*got = buf_copy_out(&s->pending, &s->off, dst, max);
	return CS_OK;
}

enum cs_err httpc_stream_read_wait(struct httpc_stream *s, char *dst, size_t max, size_t *got,
    long wait_ms, bool *ended)
{
	enum cs_err e;
	*got = 0;
	*ended = false;
	if (s == NULL || dst == NULL || wait_ms < 0)
		return CS_EINVAL;
	int64_t until = mono_ms() + wait_ms;
	while (s->off == s->pending.len) {
		s->off = 0;
		s->pending.len = 0;
		if (s->done) {
			*ended = true;
			return stream_result(s);
		}
		int64_t left = until - mono_ms();
		if (left <= 0)
			return CS_OK;                 /* nothing yet */
		if ((e = stream_step_wait(s, left > 1000 ? 1000 : (int)left)) != CS_OK)
			return e;
	}
	*got = buf_copy_out(&s->pending, &s->off, dst, max);
	return CS_OK;
}

enum cs_err httpc_request(const struct httpc_request *rq, struct httpc_reply *res)
{
	return httpc_request_opts(rq, NULL, res);
}

enum cs_err httpc_request_opts(const struct httpc_request *rq, const struct httpc_call_opts *o,
    struct httpc_reply *res)
{
	struct httpc_stream *s = NULL;
	char chunk[16384];
	size_t got;
	enum cs_err e = stream_open(rq, o, res, &s);
	if (e != CS_OK)
		return e;
	res->body.max = s->cap;
	do {
		if ((e = httpc_stream_read(s, chunk, sizeof chunk, &got)) != CS_OK)
			break;
		e = body_append(&res->body, chunk, got);
	} while (e == CS_OK && got > 0);
	OPENSSL_cleanse(chunk, sizeof chunk);
	httpc_stream_close(s);
	if (e == CS_OK && res->body.data == NULL)
		e = body_append(&res->body, "", 0);
	if (e != CS_OK)
		httpc_reply_clear(res);
	return e;
}

/* --- a pinned GET: client metadata documents (cimd.c) --------------------- */

struct pinned_sink {
	struct buf *body;
	size_t      cap;
	bool        too_big, nomem;
};

static size_t pinned_write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct pinned_sink *s = userdata;
	size_t n = size * nmemb;              /* size is always 1 for curl */
	if (n > s->cap - s->body->len) {
		s->too_big = true;
		return 0;                         /* 0 aborts the transfer */
	}
	if (body_append(s->body, ptr, n) != CS_OK) {
		s->nomem = true;
		return 0;
	}
	return n;
}

struct pinned_check {
	const struct httpc_pinned_get *rq;
	bool refused;                         /* addr_ok said no to an address */
};

/* SECURITY: the last look at an address before curl connects to it: even a
 * pinned name is checked again here, so that no address reaches connect()
 * without the caller's approval (CURLOPT_OPENSOCKETFUNCTION). */
static curl_socket_t pinned_open_cb(void *clientp, curlsocktype purpose,
    struct curl_sockaddr *address)
{
	struct pinned_check *pc = clientp;
	(void)purpose;
	size_t need = address->family == AF_INET ? sizeof(struct sockaddr_in)
	    : address->family == AF_INET6 ? sizeof(struct sockaddr_in6) : SIZE_MAX;
	if (address->addrlen < need || !pc->rq->addr_ok(&address->addr, pc->rq->addr_arg)) {
		pc->refused = true;
		return CURL_SOCKET_BAD;
	}
	return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

/* Trusts the extra CA file besides the default store (OpenSSL backend). */
static CURLcode pinned_ssl_ctx_cb(CURL *h, void *ssl_ctx, void *userdata)
{
	const char *file = userdata;
	X509_STORE *st = SSL_CTX_get_cert_store((SSL_CTX *)ssl_ctx);
	(void)h;
	if (st == NULL || X509_STORE_load_file(st, file) != 1)
		return CURLE_SSL_CACERT_BADFILE;
	return CURLE_OK;
}

/* "host:port:addr1,addr2" for CURLOPT_RESOLVE, the host as curl parsed it
 * (so the name curl looks up is the name that is pinned). */
static enum cs_err pinned_resolve_line(CURLU *u, const char *const *addrs, struct buf *line)
{
	enum cs_err e = CS_EINVAL;
	char *host = NULL, *port = NULL;
	if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
		goto out;
	if ((e = buf_printf(line, "%s:%s:", host, port)) != CS_OK)
		goto out;
	for (size_t i = 0; addrs[i] != NULL; i++) {
		bool v6 = strchr(addrs[i], ':') != NULL;
		if ((e = buf_printf(line, "%s%s%s%s", i ? "," : "", v6 ? "[" : "", addrs[i],
		    v6 ? "]" : "")) != CS_OK)
			goto out;
	}
	e = CS_OK;
out:
	curl_free(host);
	curl_free(port);
	return e;
}

/* What one pinned GET hands libcurl besides the request: its lists and the
 * callbacks' state. */
struct pinned_call {
	CURLU              *u;
	struct curl_slist  *hdrs, *resolve;
	struct pinned_sink *sink;
	struct hsink       *hs;
	struct pinned_check *pc;
};

static bool pinned_setopts(CURL *h, const struct httpc_pinned_get *rq, const struct pinned_call *k)
{
	/* SECURITY: a handle of its own (no shared connection, DNS or TLS session
	 * cache: a connection made for another caller, to an address nobody
	 * checked, is never reused), the host pinned to the checked addresses,
	 * https only, no proxy from the environment, no redirects, TLS verified,
	 * the body capped, timeouts in milliseconds. */
	if (curl_easy_setopt(h, CURLOPT_CURLU, k->u) != CURLE_OK ||
#if LIBCURL_VERSION_NUM >= 0x075500
	    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https") != CURLE_OK ||
#else
	    curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)CURLPROTO_HTTPS) != CURLE_OK ||
#endif
	    curl_easy_setopt(h, CURLOPT_RESOLVE, k->resolve) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, pinned_open_cb) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, k->pc) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_PROXY, "") != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, rq->connect_timeout_ms) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, rq->timeout_ms) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)rq->max_body) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, NULL) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_USERAGENT, HTTPC_UA) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_HTTPHEADER, k->hdrs) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, pinned_write_cb) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_WRITEDATA, k->sink) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb) != CURLE_OK ||
	    curl_easy_setopt(h, CURLOPT_HEADERDATA, k->hs) != CURLE_OK)
		return false;
	if (rq->error != NULL) {
		rq->error[0] = '\0';
		if (curl_easy_setopt(h, CURLOPT_ERRORBUFFER, rq->error) != CURLE_OK)
			return false;
	}
	if (rq->extra_ca_file != NULL &&
	    (curl_easy_setopt(h, CURLOPT_SSL_CTX_FUNCTION, pinned_ssl_ctx_cb) != CURLE_OK ||
	     curl_easy_setopt(h, CURLOPT_SSL_CTX_DATA, (void *)rq->extra_ca_file) != CURLE_OK))
		return false;
	return true;
}

/* What a finished pinned GET amounts to. */
static enum cs_err pinned_outcome(CURLcode rc, const struct pinned_sink *sink,
    const struct hsink *hs, const struct pinned_check *pc)
{
	if (sink->too_big || rc == CURLE_FILESIZE_EXCEEDED)
		return CS_ETOOBIG;
	if (sink->nomem || hs->nomem)
		return CS_ENOMEM;
	if (pc->refused)
		return CS_EPERM;
	if (rc == CURLE_OPERATION_TIMEDOUT)
		return CS_EBUSY;
	if (rc != CURLE_OK || !hs->final)
		return CS_EIO;
	return CS_OK;
}

enum cs_err httpc_get_pinned(const struct httpc_pinned_get *rq, struct httpc_reply *res)
{
	enum cs_err e = CS_EINVAL;
	CURLU *u = NULL;
	CURL *h = NULL;
	struct curl_slist *hdrs = NULL, *resolve = NULL;
	struct buf accept, line;
	struct hsink hs = { res, 0, false, false };
	struct pinned_sink sink = { NULL, 0, false, false };
	struct pinned_check pc = { rq, false };
	char *scheme = NULL;
	struct pinned_call k;
	CURLcode rc;

	if (res == NULL)
		return CS_EINVAL;
	httpc_reply_init(res);
	buf_init(&accept, 512);
	buf_init(&line, 4096);
	if (rq == NULL || rq->url == NULL || rq->addrs == NULL || rq->addrs[0] == NULL ||
	    rq->addr_ok == NULL || rq->accept == NULL || strpbrk(rq->accept, "\r\n") != NULL ||
	    rq->max_body == 0 || rq->timeout_ms <= 0 || rq->connect_timeout_ms <= 0)
		goto out;
	if ((u = url_parse_allowed(rq->url)) == NULL)
		goto out;
	/* SECURITY: https only here, loopback included. */
	if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    strcasecmp(scheme, "https") != 0)
		goto out;
	if ((e = pinned_resolve_line(u, rq->addrs, &line)) != CS_OK ||
	    (e = buf_printf(&accept, "Accept: %s", rq->accept)) != CS_OK)
		goto out;
	res->body.max = rq->max_body;
	sink.body = &res->body;
	sink.cap = rq->max_body;
	e = CS_ENOMEM;
	if ((h = curl_easy_init()) == NULL ||
	    (hdrs = curl_slist_append(NULL, accept.data)) == NULL ||
	    (resolve = curl_slist_append(NULL, line.data)) == NULL)
		goto out;
	e = CS_EIO;
	k = (struct pinned_call){ u, hdrs, resolve, &sink, &hs, &pc };
	if (!pinned_setopts(h, rq, &k))
		goto out;
	rc = curl_easy_perform(h);
	if ((e = pinned_outcome(rc, &sink, &hs, &pc)) != CS_OK)
		goto out;
	if (res->body.data == NULL && (e = body_append(&res->body, "", 0)) != CS_OK)
		goto out;
	e = CS_OK;
out:
	curl_easy_cleanup(h);                 /* before the CURLU and lists it uses */
	curl_url_cleanup(u);
	curl_slist_free_all(hdrs);
	curl_slist_free_all(resolve);
	curl_free(scheme);
	buf_clear(&accept);
	buf_clear(&line);
	if (e != CS_OK)
		httpc_reply_clear(res);
	return e;
}
