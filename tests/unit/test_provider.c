/* test_provider.c -- the downstream OAuth provider client against a canned HTTP
 * server on 127.0.0.1 (a thread answering per path and recording what it was
 * sent): discovery and its refusals, explicit endpoints, the token endpoint's
 * requests and answers, revocation, and an unreachable provider. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "buf.h"
#include "testutil.h"
#include "config.h"
#include "httpc.h"
#include "provider.h"

#define CLIENT_ID     "cli:ent"
#define CLIENT_SECRET "s3 cr+t/"
#define CODE          "c0de/+="
#define REDIRECT      "https://consentd.test/oauth/callback/gh"
#define VERIFIER      "v-erif.ier_~"

/* --- a canned HTTP server on 127.0.0.1 ---------------------------------- */

#define SRV_ROUTES 8

struct route {
	char  path[256];
	int   status;
	char *body;
	int   hits;
	char  last_method[8];
	char  last_auth[1024];
	char  last_body[4096];
};

struct srv {
	int             fd;
	int             stop;
	pthread_t       th;
	pthread_mutex_t mu;
	char            base[64];
	struct route    r[SRV_ROUTES];
	size_t          nr;
	int             unrouted;       /* requests to a path without a route (404) */
};

static void send_all(int c, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(c, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* The fake server keeps at most cap - 1 bytes of what it was sent: a longer
 * request is cut on purpose (the tests look at its start), never overrun. */
static void keep(char *dst, size_t cap, const char *s, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
}

static void reply(int c, int status, const char *body, size_t n)
{
	char head[512];
	/* A status and a length always fit; in the server's thread a failure aborts. */
	if (str_fmt(head, sizeof head, "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
	    "Content-Length: %zu\r\nConnection: close\r\n\r\n", status, n) != CS_OK)
		abort();
	int h = (int)strlen(head);
	send_all(c, head, (size_t)h);
	send_all(c, body, n);
}

static void serve_one(struct srv *sv, int c)
{
	char req[16384] = "";
	size_t got = 0;
	char *end = NULL;
	while (got < sizeof req - 1 && (end = strstr(req, "\r\n\r\n")) == NULL) {
		ssize_t r = recv(c, req + got, sizeof req - 1 - got, 0);
		if (r <= 0)
			return;
		got += (size_t)r;
		req[got] = '\0';
	}
	if (end == NULL)
		return;
	size_t hlen = (size_t)(end - req) + 4, clen = 0;
	char *cl = strcasestr(req, "\r\ncontent-length:");
	if (cl != NULL && cl < end)
		clen = strtoul(cl + 17, NULL, 10);
	while (got < hlen + clen && got < sizeof req - 1) {
		ssize_t r = recv(c, req + got, sizeof req - 1 - got, 0);
		if (r <= 0)
			break;
		got += (size_t)r;
		req[got] = '\0';
	}
	char method[8] = "", path[256] = "";
	size_t ml = strcspn(req, " ");
	keep(method, sizeof method, req, ml);
	if (req[ml] == ' ')
		keep(path, sizeof path, req + ml + 1, strcspn(req + ml + 1, " "));
	pthread_mutex_lock(&sv->mu);
	struct route *rt = NULL;
	for (size_t i = 0; i < sv->nr; i++)
		if (strcmp(sv->r[i].path, path) == 0)
			rt = &sv->r[i];
	if (rt == NULL) {
		sv->unrouted++;
		reply(c, 404, "{}", 2);
	} else {
		char *a = strcasestr(req, "\r\nauthorization: ");
		rt->hits++;
		keep(rt->last_method, sizeof rt->last_method, method, strlen(method));
		rt->last_auth[0] = '\0';
		if (a != NULL && a < end)
			keep(rt->last_auth, sizeof rt->last_auth, a + 17, strcspn(a + 17, "\r"));
		keep(rt->last_body, sizeof rt->last_body, req + hlen, strlen(req + hlen));
		reply(c, rt->status, rt->body, strlen(rt->body));
	}
	pthread_mutex_unlock(&sv->mu);
}

static void *srv_main(void *arg)
{
	struct srv *sv = arg;
	while (!__atomic_load_n(&sv->stop, __ATOMIC_ACQUIRE)) {
		struct pollfd pfd = { sv->fd, POLLIN, 0 };
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		int c = accept(sv->fd, NULL, NULL);
		if (c < 0)
			continue;
		serve_one(sv, c);
		close(c);
	}
	return NULL;
}

/* Answers path with status and body from now on (replacing an earlier route). */
static void srv_set(struct srv *sv, const char *path, int status, const char *body)
{
	pthread_mutex_lock(&sv->mu);
	struct route *rt = NULL;
	for (size_t i = 0; i < sv->nr; i++)
		if (strcmp(sv->r[i].path, path) == 0)
			rt = &sv->r[i];
	if (rt == NULL) {
		ck_assert_uint_lt(sv->nr, SRV_ROUTES);
		rt = &sv->r[sv->nr++];
		ck_assert_int_eq(str_fmt(rt->path, sizeof rt->path, "%s", path), CS_OK);
	}
	free(rt->body);
	rt->body = strdup(body);
	rt->status = status;
	pthread_mutex_unlock(&sv->mu);
	ck_assert_ptr_nonnull(rt->body);
}

/* A copy of what path last received, taken under the lock. */
static struct route srv_seen(struct srv *sv, const char *path)
{
	struct route copy;
	memset(&copy, 0, sizeof copy);
	pthread_mutex_lock(&sv->mu);
	for (size_t i = 0; i < sv->nr; i++)
		if (strcmp(sv->r[i].path, path) == 0)
			copy = sv->r[i];
	pthread_mutex_unlock(&sv->mu);
	copy.body = NULL;                   /* not ours */
	return copy;
}

static int srv_unrouted(struct srv *sv)
{
	pthread_mutex_lock(&sv->mu);
	int n = sv->unrouted;
	pthread_mutex_unlock(&sv->mu);
	return n;
}

static void srv_start(struct srv *sv)
{
	struct sockaddr_in a;
	socklen_t alen = sizeof a;
	memset(sv, 0, sizeof *sv);
	pthread_mutex_init(&sv->mu, NULL);
	sv->fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(sv->fd, 0);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(sv->fd, (struct sockaddr *)&a, sizeof a), 0);
	ck_assert_int_eq(listen(sv->fd, 16), 0);
	ck_assert_int_eq(getsockname(sv->fd, (struct sockaddr *)&a, &alen), 0);
	ck_assert_int_eq(str_fmt(sv->base, sizeof sv->base, "http://127.0.0.1:%u", (unsigned)ntohs(a.sin_port)), CS_OK);
	ck_assert_int_eq(pthread_create(&sv->th, NULL, srv_main, sv), 0);
}

static void srv_stop(struct srv *sv)
{
	__atomic_store_n(&sv->stop, 1, __ATOMIC_RELEASE);
	pthread_join(sv->th, NULL);
	close(sv->fd);
	for (size_t i = 0; i < sv->nr; i++)
		free(sv->r[i].body);
	pthread_mutex_destroy(&sv->mu);
}

/* --- helpers ------------------------------------------------------------ */

/* base + suffix, in a static-free caller buffer. */
static const char *url(char *out, size_t n, const struct srv *sv, const char *suffix)
{
	ck_assert_int_eq(str_fmt(out, n, "%s%s", sv->base, suffix), CS_OK);
	return out;
}

/* A metadata document naming issuer, with endpoints on sv and extra members
 * (a JSON object text, may be NULL) merged over them. */
static char *doc(const struct srv *sv, const char *issuer, const char *extra)
{
	json_t *d = json_pack("{s:s, s:s+, s:s+, s:s+, s:b}", "issuer", issuer,
	    "authorization_endpoint", sv->base, "/authorize",
	    "token_endpoint", sv->base, "/token",
	    "revocation_endpoint", sv->base, "/revoke",
	    "authorization_response_iss_parameter_supported", 1);
	ck_assert_ptr_nonnull(d);
	if (extra != NULL) {
		json_t *x = json_loads(extra, 0, NULL);
		ck_assert_ptr_nonnull(x);
		ck_assert_int_eq(json_object_update(d, x), 0);
		json_decref(x);
	}
	char *s = json_dumps(d, JSON_COMPACT);
	ck_assert_ptr_nonnull(s);
	json_decref(d);
	return s;
}

static void set_doc(struct srv *sv, const char *path, const char *issuer, const char *extra)
{
	char *d = doc(sv, issuer, extra);
	srv_set(sv, path, 200, d);
	free(d);
}

/* A resource with a provider on sv: issuer set, nothing explicit. */
static struct config_resource res_issuer(const char *issuer)
{
	struct config_resource r;
	memset(&r, 0, sizeof r);
	r.id = "gh";
	r.provider_issuer = (char *)issuer;
	r.provider_client_id = CLIENT_ID;
	r.provider_client_secret = CLIENT_SECRET;
	return r;
}

/* A provider configured by endpoints on sv only (no discovery). */
static struct provider *explicit_provider(struct srv *sv, bool revocation, bool secret)
{
	static char a[128], t[128], v[128];
	struct config_resource r = res_issuer(NULL);
	struct provider *p = NULL;
	r.provider_authorization_endpoint = (char *)url(a, sizeof a, sv, "/authorize");
	r.provider_token_endpoint = (char *)url(t, sizeof t, sv, "/token");
	r.provider_revocation_endpoint = revocation ? (char *)url(v, sizeof v, sv, "/revoke") : NULL;
	if (!secret)
		r.provider_client_secret = NULL;
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	return p;
}

/* "Basic " + base64(s), computed here independently of httpc. */
static void basic_of(const char *s, char *out, size_t n)
{
	unsigned char b64[200];
	ck_assert_uint_lt(4 * ((strlen(s) + 2) / 3) + 1, sizeof b64);
	EVP_EncodeBlock(b64, (const unsigned char *)s, (int)strlen(s));
	ck_assert_int_eq(str_fmt(out, n, "Basic %s", (const char *)b64), CS_OK);
}

/* --- discovery ---------------------------------------------------------- */

START_TEST(test_provider_discover_rfc8414)
{
	struct srv sv;
	struct provider *p = NULL;
	const struct provider_meta *m = NULL, *m2 = NULL;
	char buf[128];

	srv_start(&sv);
	set_doc(&sv, "/.well-known/oauth-authorization-server", sv.base, NULL);
	set_doc(&sv, "/.well-known/openid-configuration", "https://wrong.test", NULL);
	struct config_resource r = res_issuer(sv.base);
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	ck_assert_int_eq(provider_meta(p, &m), CS_OK);
	ck_assert_str_eq(m->issuer, sv.base);
	ck_assert_str_eq(m->authorization_endpoint, url(buf, sizeof buf, &sv, "/authorize"));
	ck_assert_str_eq(m->token_endpoint, url(buf, sizeof buf, &sv, "/token"));
	ck_assert_str_eq(m->revocation_endpoint, url(buf, sizeof buf, &sv, "/revoke"));
	ck_assert(m->iss_parameter_supported);
	ck_assert_str_eq(srv_seen(&sv, "/.well-known/oauth-authorization-server").last_method, "GET");
	ck_assert_int_eq(srv_seen(&sv, "/.well-known/openid-configuration").hits, 0);
	/* Kept: the second call makes no request and returns the same metadata. */
	ck_assert_int_eq(provider_meta(p, &m2), CS_OK);
	ck_assert_ptr_eq(m, m2);
	ck_assert_int_eq(srv_seen(&sv, "/.well-known/oauth-authorization-server").hits, 1);
	provider_free(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_provider_discover_rfc8414_path_insertion)
{
	struct srv sv;
	struct provider *p = NULL;
	const struct provider_meta *m = NULL;
	char iss[128], iss_slash[128];

	srv_start(&sv);
	/* RFC 8414 §3.1: https://h/tenant/x -> https://h/.well-known/oauth-authorization-server/tenant/x */
	url(iss, sizeof iss, &sv, "/tenant/x");
	set_doc(&sv, "/.well-known/oauth-authorization-server/tenant/x", iss, "{\"revocation_endpoint\":null}");
	struct config_resource r = res_issuer(iss);
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	/* A null revocation_endpoint is not a string: refused like any bad URL. */
	ck_assert_int_eq(provider_meta(p, &m), CS_EINVAL);
	provider_free(p);
	p = NULL;
	set_doc(&sv, "/.well-known/oauth-authorization-server/tenant/x", iss, NULL);
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	ck_assert_int_eq(provider_meta(p, &m), CS_OK);
	ck_assert_str_eq(m->issuer, iss);
	provider_free(p);
	p = NULL;
	/* A terminating '/' is dropped for the well-known URL, but the issuer
	 * comparison stays exact: the document must say "…/tenant/x/". */
	url(iss_slash, sizeof iss_slash, &sv, "/tenant/x/");
	r = res_issuer(iss_slash);
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	ck_assert_int_eq(provider_meta(p, &m), CS_EINVAL);
	provider_free(p);
	p = NULL;
	set_doc(&sv, "/.well-known/oauth-authorization-server/tenant/x", iss_slash, NULL);
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	ck_assert_int_eq(provider_meta(p, &m), CS_OK);
	ck_assert_str_eq(m->issuer, iss_slash);
	ck_assert_int_eq(srv_unrouted(&sv), 0);
	provider_free(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_provider_discover_fallback_openid)
{
	struct srv sv;
	struct provider *p = NULL;
	const struct provider_meta *m = NULL;
	char buf[128];

	srv_start(&sv);
	/* No RFC 8414 document (404): OpenID discovery is asked next. */
	set_doc(&sv, "/.well-known/openid-configuration", sv.base,
	    "{\"authorization_response_iss_parameter_supported\": false}");
	struct config_resource r = res_issuer(sv.base);
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	ck_assert_int_eq(provider_meta(p, &m), CS_OK);
	ck_assert_str_eq(m->token_endpoint, url(buf, sizeof buf, &sv, "/token"));
	ck_assert(!m->iss_parameter_supported);
	ck_assert_int_eq(srv_unrouted(&sv), 1);   /* the 404 for oauth-authorization-server */
	ck_assert_int_eq(srv_seen(&sv, "/.well-known/openid-configuration").hits, 1);
	provider_free(p);
	p = NULL;

	/* A 200 that is not JSON falls back too. */
	srv_set(&sv, "/.well-known/oauth-authorization-server", 200, "<html>hello</html>");
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	ck_assert_int_eq(provider_meta(p, &m), CS_OK);
	ck_assert_int_eq(srv_seen(&sv, "/.well-known/openid-configuration").hits, 2);
	provider_free(p);
	p = NULL;

	/* Neither path serves metadata: unreachable, not a crash. */
	srv_set(&sv, "/.well-known/openid-configuration", 500, "{}");
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	ck_assert_int_eq(provider_meta(p, &m), CS_EIO);
	provider_free(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_provider_discover_wrong_issuer)
{
	struct srv sv;
	struct provider *p = NULL;
	const struct provider_meta *m = NULL;
	char other[128];

	srv_start(&sv);
	/* The attacker's mix-up: a document for another issuer, or ours with a
	 * trailing slash, or none at all. */
	set_doc(&sv, "/.well-known/oauth-authorization-server", "https://evil.test", NULL);
	struct config_resource r = res_issuer(sv.base);
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	ck_assert_int_eq(provider_meta(p, &m), CS_EINVAL);
	ck_assert_ptr_null(m);
	/* A valid RFC 8414 document with the wrong issuer does not fall back. */
	ck_assert_int_eq(srv_unrouted(&sv), 0);

	/* Retried, but not at once: no tight loop against a broken provider. */
	set_doc(&sv, "/.well-known/oauth-authorization-server", sv.base, NULL);
	ck_assert_int_eq(provider_meta(p, &m), CS_EINVAL);
	ck_assert_int_eq(srv_seen(&sv, "/.well-known/oauth-authorization-server").hits, 1);
	provider_backdate_discovery(p, 6);
	ck_assert_int_eq(provider_meta(p, &m), CS_OK);
	ck_assert_int_eq(srv_seen(&sv, "/.well-known/oauth-authorization-server").hits, 2);
	ck_assert_str_eq(m->issuer, sv.base);
	provider_free(p);
	p = NULL;

	const char *bad[] = { NULL, "", "https://evil.test", "HTTP://127.0.0.1" };
	ck_assert_int_eq(str_fmt(other, sizeof other, "%s/", sv.base), CS_OK);
	for (size_t i = 0; i < 5; i++) {
		char *d;
		if (i == 4)
			d = doc(&sv, other, NULL);
		else if (i == 0)
			d = doc(&sv, "x", "{\"issuer\": 7}");
		else
			d = doc(&sv, bad[i], NULL);
		srv_set(&sv, "/.well-known/oauth-authorization-server", 200, d);
		free(d);
		ck_assert_int_eq(provider_new(&r, &p), CS_OK);
		ck_assert_int_eq(provider_meta(p, &m), CS_EINVAL);
		provider_free(p);
		p = NULL;
	}
	srv_stop(&sv);
}
END_TEST

START_TEST(test_provider_meta_explicit_no_discovery)
{
	struct srv sv;
	struct provider *p = NULL;
	const struct provider_meta *m = NULL;
	char a[128], t[128];

	srv_start(&sv);
	set_doc(&sv, "/.well-known/oauth-authorization-server", sv.base, NULL);
	/* Endpoints only: issuer NULL, no RFC 9207, no request made. */
	p = explicit_provider(&sv, false, true);
	ck_assert_int_eq(provider_meta(p, &m), CS_OK);
	ck_assert_ptr_null(m->issuer);
	ck_assert_str_eq(m->authorization_endpoint, url(a, sizeof a, &sv, "/authorize"));
	ck_assert_str_eq(m->token_endpoint, url(t, sizeof t, &sv, "/token"));
	ck_assert_ptr_null(m->revocation_endpoint);
	ck_assert(!m->iss_parameter_supported);
	provider_free(p);
	p = NULL;

	/* With an issuer too: still no discovery, the issuer is reported. */
	struct config_resource r = res_issuer("https://provider.test");
	r.provider_authorization_endpoint = a;
	r.provider_token_endpoint = t;
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	ck_assert_int_eq(provider_meta(p, &m), CS_OK);
	ck_assert_str_eq(m->issuer, "https://provider.test");
	ck_assert(!m->iss_parameter_supported);
	ck_assert_int_eq(srv_seen(&sv, "/.well-known/oauth-authorization-server").hits, 0);
	ck_assert_int_eq(srv_unrouted(&sv), 0);
	provider_free(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_provider_meta_explicit_override)
{
	struct srv sv;
	struct provider *p = NULL;
	const struct provider_meta *m = NULL;
	char buf[128];

	srv_start(&sv);
	/* The document's token endpoint is not even allowed; the configured one
	 * replaces it, and the rest is discovered. */
	set_doc(&sv, "/.well-known/oauth-authorization-server", sv.base,
	    "{\"token_endpoint\": \"http://example.com/token\"}");
	struct config_resource r = res_issuer(sv.base);
	r.provider_token_endpoint = "https://tokens.provider.test/t";
	r.provider_revocation_endpoint = "https://tokens.provider.test/r";
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	ck_assert_int_eq(provider_meta(p, &m), CS_OK);
	ck_assert_str_eq(m->issuer, sv.base);
	ck_assert_str_eq(m->authorization_endpoint, url(buf, sizeof buf, &sv, "/authorize"));
	ck_assert_str_eq(m->token_endpoint, "https://tokens.provider.test/t");
	ck_assert_str_eq(m->revocation_endpoint, "https://tokens.provider.test/r");
	ck_assert(m->iss_parameter_supported);
	ck_assert_int_eq(srv_seen(&sv, "/.well-known/oauth-authorization-server").hits, 1);
	provider_free(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_provider_discover_disallowed_endpoint)
{
	struct srv sv;
	struct provider *p = NULL;
	const struct provider_meta *m = NULL;
	static const char *const extras[] = {
		"{\"token_endpoint\": \"http://example.com/token\"}",
		"{\"authorization_endpoint\": \"http://example.com/authorize\"}",
		"{\"revocation_endpoint\": \"http://example.com/revoke\"}",
		"{\"token_endpoint\": \"https://user:pw@provider.test/token\"}",
		"{\"token_endpoint\": \"javascript:alert(1)\"}",
		"{\"token_endpoint\": 5}",
		"{\"revocation_endpoint\": \"\"}",
	};

	srv_start(&sv);
	struct config_resource r = res_issuer(sv.base);
	for (size_t i = 0; i < sizeof extras / sizeof extras[0]; i++) {
		set_doc(&sv, "/.well-known/oauth-authorization-server", sv.base, extras[i]);
		ck_assert_int_eq(provider_new(&r, &p), CS_OK);
		ck_assert_msg(provider_meta(p, &m) == CS_EINVAL, "accepted %s", extras[i]);
		provider_free(p);
		p = NULL;
	}
	/* Required endpoints missing. */
	srv_set(&sv, "/.well-known/oauth-authorization-server", 200, "{}");
	char d[256];
	ck_assert_int_eq(str_fmt(d, sizeof d, "{\"issuer\":\"%s\",\"authorization_endpoint\":\"%s/a\"}", sv.base, sv.base), CS_OK);
	srv_set(&sv, "/.well-known/oauth-authorization-server", 200, d);
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	ck_assert_int_eq(provider_meta(p, &m), CS_EINVAL);
	provider_free(p);
	p = NULL;

	/* Configured endpoints obey the same policy, checked at once. */
	struct config_resource x = res_issuer(NULL);
	x.provider_authorization_endpoint = "https://provider.test/a";
	x.provider_token_endpoint = "http://example.com/token";
	ck_assert_int_eq(provider_new(&x, &p), CS_EINVAL);
	x.provider_token_endpoint = "https://provider.test/t";
	x.provider_revocation_endpoint = "http://example.com/revoke";
	ck_assert_int_eq(provider_new(&x, &p), CS_EINVAL);
	x = res_issuer("http://example.com");
	ck_assert_int_eq(provider_new(&x, &p), CS_EINVAL);
	ck_assert_ptr_null(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_provider_new_rejects)
{
	struct provider *p = NULL;
	struct config_resource r = res_issuer("https://provider.test");

	ck_assert_int_eq(provider_new(NULL, &p), CS_EINVAL);
	ck_assert_int_eq(provider_new(&r, NULL), CS_EINVAL);
	r.provider_client_id = NULL;
	ck_assert_int_eq(provider_new(&r, &p), CS_EINVAL);
	r = res_issuer(NULL);                 /* nothing to discover, no endpoints */
	ck_assert_int_eq(provider_new(&r, &p), CS_EINVAL);
	r.provider_token_endpoint = "https://provider.test/t";   /* half the pair */
	ck_assert_int_eq(provider_new(&r, &p), CS_EINVAL);
	r = res_issuer("https://provider.test/?tenant=1");       /* RFC 8414: no query */
	ck_assert_int_eq(provider_new(&r, &p), CS_EINVAL);
	r = res_issuer("https://provider.test/#f");
	ck_assert_int_eq(provider_new(&r, &p), CS_EINVAL);
	ck_assert_ptr_null(p);
	provider_free(NULL);
	provider_tokens_clear(NULL);
	const struct provider_meta *m = NULL;
	ck_assert_int_eq(provider_meta(NULL, &m), CS_EINVAL);
}
END_TEST

/* The metadata document alone (provider_meta_parse): what provider_meta refuses. */
START_TEST(test_provider_meta_parse_bad)
{
	struct config_resource r = res_issuer("https://provider.test");
	struct provider *p = NULL, *pc = NULL;
	struct provider_meta *m = NULL;
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	r.provider_token_endpoint = "https://provider.test/configured";
	ck_assert_int_eq(provider_new(&r, &pc), CS_OK);
	/* Not an object (or a duplicate member): the other well-known path is tried. */
	static const char *const notdoc[] = { "", "nope", "[]", "null", "\"x\"",
		"{\"issuer\":\"https://provider.test\",\"issuer\":\"https://provider.test\"}" };
	for (size_t i = 0; i < sizeof notdoc / sizeof notdoc[0]; i++)
		ck_assert_int_eq(provider_meta_parse(p, notdoc[i], &m), CS_ENOENT);
	static const char *const bad[] = {
		"{}",
		"{\"issuer\":\"https://provider.test/\",\"authorization_endpoint\":\"https://provider.test/a\","
		    "\"token_endpoint\":\"https://provider.test/t\"}",
		"{\"issuer\":\"https://other.test\",\"authorization_endpoint\":\"https://provider.test/a\","
		    "\"token_endpoint\":\"https://provider.test/t\"}",
		"{\"issuer\":\"https://provider.test\",\"authorization_endpoint\":\"https://provider.test/a\"}",
		"{\"issuer\":\"https://provider.test\",\"authorization_endpoint\":\"https://provider.test/a\","
		    "\"token_endpoint\":\"http://provider.test/t\"}",
		"{\"issuer\":\"https://provider.test\",\"authorization_endpoint\":\"https://provider.test/a\","
		    "\"token_endpoint\":\"https://provider.test/t\",\"revocation_endpoint\":false}",
		"{\"issuer\":[\"https://provider.test\"],\"authorization_endpoint\":\"https://provider.test/a\","
		    "\"token_endpoint\":\"https://provider.test/t\"}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_assert_msg(provider_meta_parse(p, bad[i], &m) == CS_EINVAL, "accepted %s", bad[i]);
		ck_assert_ptr_null(m);
	}
	/* A configured endpoint wins, and the document's is not even read. */
	ck_assert_int_eq(provider_meta_parse(pc, "{\"issuer\":\"https://provider.test\","
	    "\"authorization_endpoint\":\"https://provider.test/a\",\"token_endpoint\":42}", &m), CS_OK);
	ck_assert_str_eq(m->token_endpoint, "https://provider.test/configured");
	ck_assert_ptr_null(m->revocation_endpoint);
	provider_meta_free(m);
	ck_assert_int_eq(provider_meta_parse(p, NULL, &m), CS_EINVAL);
	provider_meta_free(NULL);
	provider_free(p);
	provider_free(pc);
}
END_TEST

struct race {
	struct provider *p;
	const struct provider_meta *m[4];
	enum cs_err e[4];
};
struct race_arg {
	struct race *r;
	int i;
};

static void *race_main(void *arg)
{
	struct race_arg *a = arg;
	a->r->e[a->i] = provider_meta(a->r->p, &a->r->m[a->i]);
	return NULL;
}

START_TEST(test_provider_meta_concurrent_one_discovery)
{
	struct srv sv;
	struct race r;
	struct race_arg args[4];
	pthread_t th[4];

	srv_start(&sv);
	set_doc(&sv, "/.well-known/oauth-authorization-server", sv.base, NULL);
	struct config_resource c = res_issuer(sv.base);
	memset(&r, 0, sizeof r);
	ck_assert_int_eq(provider_new(&c, &r.p), CS_OK);
	for (int i = 0; i < 4; i++) {
		args[i].r = &r;
		args[i].i = i;
		ck_assert_int_eq(pthread_create(&th[i], NULL, race_main, &args[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(r.e[i], CS_OK);
		ck_assert_ptr_eq(r.m[i], r.m[0]);
	}
	ck_assert_int_eq(srv_seen(&sv, "/.well-known/oauth-authorization-server").hits, 1);
	provider_free(r.p);
	srv_stop(&sv);
}
END_TEST

/* --- token endpoint ----------------------------------------------------- */

START_TEST(test_provider_exchange_code_request)
{
	struct srv sv;
	struct provider *p = NULL;
	struct provider_tokens t;
	char want_auth[256];

	srv_start(&sv);
	srv_set(&sv, "/token", 200, "{\"access_token\":\"at-1\",\"refresh_token\":\"rt-1\","
	    "\"token_type\":\"Bearer\",\"scope\":\"repo read:user\",\"expires_in\":3600}");
	p = explicit_provider(&sv, true, true);
	memset(&t, 0, sizeof t);
	ck_assert_int_eq(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t), CS_OK);
	ck_assert_str_eq(t.access_token, "at-1");
	ck_assert_str_eq(t.refresh_token, "rt-1");
	ck_assert_str_eq(t.token_type, "Bearer");
	ck_assert_str_eq(t.scope, "repo read:user");
	ck_assert_int_eq(t.expires_in, 3600);
	provider_tokens_clear(&t);
	ck_assert_ptr_null(t.access_token);
	ck_assert_ptr_null(t.refresh_token);

	struct route seen = srv_seen(&sv, "/token");
	ck_assert_str_eq(seen.last_method, "POST");
	ck_assert_str_eq(seen.last_body, "grant_type=authorization_code&code=c0de%2F%2B%3D"
	    "&redirect_uri=https%3A%2F%2Fconsentd.test%2Foauth%2Fcallback%2Fgh"
	    "&code_verifier=v-erif.ier_~");
	/* RFC 6749 §2.3.1: each part form-urlencoded, then Base64. */
	basic_of("cli%3Aent:s3%20cr%2Bt%2F", want_auth, sizeof want_auth);
	ck_assert_str_eq(seen.last_auth, want_auth);
	ck_assert_ptr_null(strstr(seen.last_body, "client_secret"));
	ck_assert_ptr_null(strstr(seen.last_body, "client_id"));

	/* GitHub's comma-separated scope is read as a list. */
	srv_set(&sv, "/token", 200, "{\"access_token\":\"at-3\",\"token_type\":\"bearer\","
	    "\"scope\":\"repo,read:user\"}");
	ck_assert_int_eq(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t), CS_OK);
	ck_assert_str_eq(t.scope, "repo read:user");
	provider_tokens_clear(&t);

	/* Optional members omitted: NULL and 0. */
	srv_set(&sv, "/token", 200, "{\"access_token\":\"at-2\",\"token_type\":\"bearer\"}");
	ck_assert_int_eq(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t), CS_OK);
	ck_assert_str_eq(t.token_type, "bearer");
	ck_assert_ptr_null(t.refresh_token);
	ck_assert_ptr_null(t.scope);
	ck_assert_int_eq(t.expires_in, 0);
	provider_tokens_clear(&t);
	provider_free(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_provider_exchange_code_public_client)
{
	struct srv sv;
	struct provider *p = NULL;
	struct provider_tokens t;

	srv_start(&sv);
	srv_set(&sv, "/token", 200, "{\"access_token\":\"at\",\"token_type\":\"Bearer\"}");
	p = explicit_provider(&sv, false, false);
	memset(&t, 0, sizeof t);
	ck_assert_int_eq(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t), CS_OK);
	provider_tokens_clear(&t);
	struct route seen = srv_seen(&sv, "/token");
	ck_assert_str_eq(seen.last_auth, "");
	ck_assert_str_eq(seen.last_body, "grant_type=authorization_code&code=c0de%2F%2B%3D"
	    "&redirect_uri=https%3A%2F%2Fconsentd.test%2Foauth%2Fcallback%2Fgh"
	    "&code_verifier=v-erif.ier_~&client_id=cli%3Aent");
	provider_free(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_provider_exchange_code_missing_token_type)
{
	struct srv sv;
	struct provider *p = NULL;
	struct provider_tokens t;
	static const char *const bad[] = {
		"{\"access_token\":\"at\"}",                                  /* no token_type */
		"{\"access_token\":\"at\",\"token_type\":\"\"}",
		"{\"access_token\":\"at\",\"token_type\":null}",
		"{\"access_token\":\"at\",\"token_type\":1}",
		"{\"token_type\":\"Bearer\"}",                                /* no access_token */
		"{\"access_token\":\"\",\"token_type\":\"Bearer\"}",
		"{\"access_token\":[\"at\"],\"token_type\":\"Bearer\"}",
		"{\"access_token\":\"a\\u0000t\",\"token_type\":\"Bearer\"}",
		"{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"refresh_token\":7}",
		"{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"refresh_token\":\"\"}",
		"{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"scope\":[\"a\"]}",
		"{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"expires_in\":-1}",
		"{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"expires_in\":1.5}",
		"{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"expires_in\":true}",
		"{\"access_token\":\"at\",\"access_token\":\"x\",\"token_type\":\"Bearer\"}",
		"[\"at\"]",
		"not json",
		"",
	};

	srv_start(&sv);
	p = explicit_provider(&sv, false, true);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		srv_set(&sv, "/token", 200, bad[i]);
		memset(&t, 0, sizeof t);
		ck_assert_msg(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t) == CS_EINVAL,
		    "accepted %s", bad[i]);
		ck_assert_ptr_null(t.access_token);   /* *out untouched on failure */
	}
	provider_free(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_provider_exchange_code_expires_in_string)
{
	struct srv sv;
	struct provider *p = NULL;
	struct provider_tokens t;

	srv_start(&sv);
	p = explicit_provider(&sv, false, true);
	memset(&t, 0, sizeof t);
	srv_set(&sv, "/token", 200, "{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"expires_in\":\"3600\"}");
	ck_assert_int_eq(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t), CS_OK);
	ck_assert_int_eq(t.expires_in, 3600);
	provider_tokens_clear(&t);
	srv_set(&sv, "/token", 200, "{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"expires_in\":\"0\"}");
	ck_assert_int_eq(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t), CS_OK);
	ck_assert_int_eq(t.expires_in, 0);
	provider_tokens_clear(&t);
	/* Absurd lifetimes are clamped (ten years), never overflow a caller's now + n. */
	srv_set(&sv, "/token", 200, "{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"expires_in\":\"999999999999999999\"}");
	ck_assert_int_eq(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t), CS_OK);
	ck_assert_int_eq(t.expires_in, 315360000);
	provider_tokens_clear(&t);
	srv_set(&sv, "/token", 200, "{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"expires_in\":9223372036854775807}");
	ck_assert_int_eq(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t), CS_OK);
	ck_assert_int_eq(t.expires_in, 315360000);
	provider_tokens_clear(&t);
	static const char *const bad[] = { "\"\"", "\"-1\"", "\"+5\"", "\" 5\"", "\"5s\"", "\"1e3\"",
		"\"0x10\"", "\"9999999999999999999\"" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char body[256];
		ck_assert_int_eq(str_fmt(body, sizeof body,
		    "{\"access_token\":\"at\",\"token_type\":\"Bearer\",\"expires_in\":%s}", bad[i]), CS_OK);
		srv_set(&sv, "/token", 200, body);
		ck_assert_msg(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t) == CS_EINVAL,
		    "accepted expires_in %s", bad[i]);
	}
	provider_free(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_provider_exchange_code_refused)
{
	struct srv sv;
	struct provider *p = NULL;
	struct provider_tokens t;

	srv_start(&sv);
	p = explicit_provider(&sv, false, true);
	memset(&t, 0, sizeof t);
	srv_set(&sv, "/token", 400, "{\"error\":\"invalid_grant\"}");
	ck_assert_int_eq(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t), CS_EPERM);
	srv_set(&sv, "/token", 401, "{\"error\":\"invalid_client\"}");
	ck_assert_int_eq(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t), CS_EPERM);
	srv_set(&sv, "/token", 400, "garbage");
	ck_assert_int_eq(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t), CS_EPERM);
	/* GitHub answers errors with 200. */
	srv_set(&sv, "/token", 200, "{\"error\":\"bad_verification_code\"}");
	ck_assert_int_eq(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t), CS_EPERM);
	srv_set(&sv, "/token", 500, "{\"access_token\":\"at\",\"token_type\":\"Bearer\"}");
	ck_assert_int_eq(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t), CS_EIO);
	srv_set(&sv, "/token", 302, "");
	ck_assert_int_eq(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t), CS_EIO);
	ck_assert_ptr_null(t.access_token);
	/* Bad arguments never reach the network. */
	int before = srv_seen(&sv, "/token").hits;
	ck_assert_int_eq(provider_exchange_code(p, "", REDIRECT, VERIFIER, &t), CS_EINVAL);
	ck_assert_int_eq(provider_exchange_code(p, CODE, NULL, VERIFIER, &t), CS_EINVAL);
	ck_assert_int_eq(provider_exchange_code(p, CODE, REDIRECT, NULL, &t), CS_EINVAL);
	ck_assert_int_eq(provider_exchange_code(NULL, CODE, REDIRECT, VERIFIER, &t), CS_EINVAL);
	ck_assert_int_eq(srv_seen(&sv, "/token").hits, before);
	provider_free(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_provider_refresh_request)
{
	struct srv sv;
	struct provider *p = NULL;
	struct provider_tokens t;
	char want_auth[256];

	srv_start(&sv);
	p = explicit_provider(&sv, false, true);
	memset(&t, 0, sizeof t);
	srv_set(&sv, "/token", 200, "{\"access_token\":\"at-2\",\"token_type\":\"Bearer\",\"expires_in\":60}");
	ck_assert_int_eq(provider_refresh(p, "rt/1+", &t), CS_OK);
	ck_assert_str_eq(t.access_token, "at-2");
	ck_assert_ptr_null(t.refresh_token);      /* the provider kept the old one */
	ck_assert_int_eq(t.expires_in, 60);
	provider_tokens_clear(&t);
	struct route seen = srv_seen(&sv, "/token");
	ck_assert_str_eq(seen.last_body, "grant_type=refresh_token&refresh_token=rt%2F1%2B");
	basic_of("cli%3Aent:s3%20cr%2Bt%2F", want_auth, sizeof want_auth);
	ck_assert_str_eq(seen.last_auth, want_auth);
	ck_assert_int_eq(provider_refresh(p, "", &t), CS_EINVAL);
	ck_assert_int_eq(provider_refresh(p, NULL, &t), CS_EINVAL);
	provider_free(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_provider_refresh_invalid_grant)
{
	struct srv sv;
	struct provider *p = NULL;
	struct provider_tokens t;

	srv_start(&sv);
	p = explicit_provider(&sv, false, true);
	memset(&t, 0, sizeof t);
	srv_set(&sv, "/token", 400, "{\"error\":\"invalid_grant\",\"error_description\":\"revoked\"}");
	ck_assert_int_eq(provider_refresh(p, "rt", &t), CS_EPERM);
	srv_set(&sv, "/token", 400, "{\"error\":\"unauthorized_client\"}");
	ck_assert_int_eq(provider_refresh(p, "rt", &t), CS_EPERM);
	srv_set(&sv, "/token", 401, "{\"error\":\"invalid_client\"}");
	ck_assert_int_eq(provider_refresh(p, "rt", &t), CS_EPERM);
	srv_set(&sv, "/token", 401, "");
	ck_assert_int_eq(provider_refresh(p, "rt", &t), CS_EPERM);
	srv_set(&sv, "/token", 200, "{\"error\":\"bad_refresh_token\"}");   /* GitHub */
	ck_assert_int_eq(provider_refresh(p, "rt", &t), CS_EPERM);
	/* Anything else does not declare the grant dead. */
	srv_set(&sv, "/token", 400, "{\"error\":\"invalid_request\"}");
	ck_assert_int_eq(provider_refresh(p, "rt", &t), CS_EIO);
	srv_set(&sv, "/token", 400, "not json");
	ck_assert_int_eq(provider_refresh(p, "rt", &t), CS_EIO);
	srv_set(&sv, "/token", 429, "{\"error\":\"invalid_grant\"}");
	ck_assert_int_eq(provider_refresh(p, "rt", &t), CS_EIO);
	ck_assert_ptr_null(t.access_token);
	provider_free(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_provider_refresh_server_error)
{
	struct srv sv;
	struct provider *p = NULL;
	struct provider_tokens t;

	srv_start(&sv);
	p = explicit_provider(&sv, false, true);
	memset(&t, 0, sizeof t);
	srv_set(&sv, "/token", 500, "{\"error\":\"server_error\"}");
	ck_assert_int_eq(provider_refresh(p, "rt", &t), CS_EIO);
	srv_set(&sv, "/token", 503, "");
	ck_assert_int_eq(provider_refresh(p, "rt", &t), CS_EIO);
	ck_assert_ptr_null(t.access_token);
	provider_free(p);
	srv_stop(&sv);
}
END_TEST

/* --- revocation --------------------------------------------------------- */

START_TEST(test_provider_revoke_endpoint)
{
	struct srv sv;
	struct provider *p = NULL;
	char want_auth[256];

	srv_start(&sv);
	p = explicit_provider(&sv, true, true);
	srv_set(&sv, "/revoke", 200, "");
	ck_assert_int_eq(provider_revoke(p, "rt/1", "refresh_token"), CS_OK);
	struct route seen = srv_seen(&sv, "/revoke");
	ck_assert_str_eq(seen.last_method, "POST");
	ck_assert_str_eq(seen.last_body, "token=rt%2F1&token_type_hint=refresh_token");
	basic_of("cli%3Aent:s3%20cr%2Bt%2F", want_auth, sizeof want_auth);
	ck_assert_str_eq(seen.last_auth, want_auth);
	ck_assert_int_eq(provider_revoke(p, "at", "access_token"), CS_OK);
	ck_assert_str_eq(srv_seen(&sv, "/revoke").last_body, "token=at&token_type_hint=access_token");
	/* RFC 7009 §2.2.1: 503 means try again; any other failure too. */
	srv_set(&sv, "/revoke", 503, "");
	ck_assert_int_eq(provider_revoke(p, "at", "access_token"), CS_EIO);
	srv_set(&sv, "/revoke", 400, "{\"error\":\"unsupported_token_type\"}");
	ck_assert_int_eq(provider_revoke(p, "at", "access_token"), CS_EIO);
	int before = srv_seen(&sv, "/revoke").hits;
	ck_assert_int_eq(provider_revoke(p, "at", "id_token"), CS_EINVAL);
	ck_assert_int_eq(provider_revoke(p, "", "access_token"), CS_EINVAL);
	ck_assert_int_eq(srv_seen(&sv, "/revoke").hits, before);
	provider_free(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_provider_revoke_no_endpoint)
{
	struct srv sv;
	struct provider *p = NULL;

	srv_start(&sv);
	p = explicit_provider(&sv, false, true);
	ck_assert_int_eq(provider_revoke(p, "at", "access_token"), CS_ENOENT);
	provider_free(p);
	p = NULL;
	/* Discovered without one: the same. */
	set_doc(&sv, "/.well-known/oauth-authorization-server", sv.base, NULL);
	char d[512];
	ck_assert_int_eq(str_fmt(d, sizeof d, "{\"issuer\":\"%s\",\"authorization_endpoint\":\"%s/a\","
	    "\"token_endpoint\":\"%s/token\"}", sv.base, sv.base, sv.base), CS_OK);
	srv_set(&sv, "/.well-known/oauth-authorization-server", 200, d);
	struct config_resource r = res_issuer(sv.base);
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	ck_assert_int_eq(provider_revoke(p, "rt", "refresh_token"), CS_ENOENT);
	ck_assert_int_eq(srv_unrouted(&sv), 0);
	provider_free(p);
	srv_stop(&sv);
}
END_TEST

/* --- presets -------------------------------------------------------------- */

/* A resource of preset with its endpoints on base as config_section.c
 * fills them for provider_base_url = base (test_config checks that part). */
static struct provider *preset_provider(enum config_preset preset, const char *base)
{
	static char a[256], t[256], rv[256], st[256];
	struct config_resource r = res_issuer(NULL);
	struct provider *p = NULL;
	if (base == NULL)
		base = "https://provider.test";
	r.preset = preset;
	ck_assert_int_eq(str_fmt(a, sizeof a, "%s/authorize", base), CS_OK);
	ck_assert_int_eq(str_fmt(t, sizeof t, "%s/token", base), CS_OK);
	r.provider_authorization_endpoint = a;
	r.provider_token_endpoint = t;
	if (preset == PRESET_GITHUB || preset == PRESET_GITHUB_APP)
		ck_assert_int_eq(str_fmt(rv, sizeof rv, "%s/api/v3/applications/cli%%3Aent/token", base),
		    CS_OK);
	else if (preset == PRESET_SLACK)
		ck_assert_int_eq(str_fmt(rv, sizeof rv, "%s/api/auth.revoke", base), CS_OK);
	else
		rv[0] = '\0';
	r.provider_revocation_endpoint = rv[0] != '\0' ? rv : NULL;
	ck_assert_int_eq(str_fmt(st, sizeof st, "%s/oauth/token/accessible-resources", base), CS_OK);
	r.provider_sites_endpoint = preset == PRESET_ATLASSIAN ? st : NULL;
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	ck_assert_int_eq(provider_preset(p), preset);
	return p;
}

START_TEST(test_provider_preset_new)
{
	struct config_resource r = res_issuer(NULL);
	struct provider *p = NULL;
	/* SECURITY: a sites endpoint the outbound policy refuses gives no provider. */
	r.preset = PRESET_ATLASSIAN;
	r.provider_authorization_endpoint = "https://auth.atlassian.test/authorize";
	r.provider_token_endpoint = "https://auth.atlassian.test/oauth/token";
	r.provider_sites_endpoint = "http://api.atlassian.test/oauth/token/accessible-resources";
	ck_assert_int_eq(provider_new(&r, &p), CS_EINVAL);
	ck_assert_ptr_null(p);
	r.provider_sites_endpoint = NULL;
	r.preset = (enum config_preset)PRESET__MAX;
	ck_assert_int_eq(provider_new(&r, &p), CS_EINVAL);
	/* A preset without endpoints (the configuration fills them) is refused. */
	r = res_issuer(NULL);
	r.preset = PRESET_GITLAB;
	ck_assert_int_eq(provider_new(&r, &p), CS_EINVAL);
	ck_assert_ptr_null(p);
}
END_TEST

START_TEST(test_provider_preset_authz)
{
	struct provider_authz a;
	struct provider *p = preset_provider(PRESET_SLACK, NULL);
	provider_authz(p, &a);
	ck_assert_str_eq(a.scope_param, "user_scope");
	ck_assert_int_eq(a.scope_sep, ',');
	ck_assert_ptr_null(a.extra_scope);
	provider_free(p);
	p = preset_provider(PRESET_GOOGLE, NULL);
	provider_authz(p, &a);
	ck_assert_str_eq(a.scope_param, "scope");
	ck_assert_int_eq(a.scope_sep, ' ');
	ck_assert_str_eq(a.extra_params, "access_type=offline&prompt=consent");
	provider_free(p);
	p = preset_provider(PRESET_MICROSOFT, NULL);
	provider_authz(p, &a);
	ck_assert_str_eq(a.extra_scope, "offline_access");
	ck_assert_ptr_null(a.extra_params);
	provider_free(p);
	p = preset_provider(PRESET_ATLASSIAN, NULL);
	provider_authz(p, &a);
	ck_assert_str_eq(a.extra_scope, "offline_access");
	ck_assert_str_eq(a.extra_params, "audience=api.atlassian.com&prompt=consent");
	provider_free(p);
	provider_authz(NULL, &a);
	ck_assert_str_eq(a.scope_param, "scope");
	ck_assert_ptr_null(a.extra_scope);
	ck_assert_ptr_null(a.extra_params);
}
END_TEST

static struct provider_tokens preset_answer(enum config_preset preset, enum provider_token_kind kind,
    const char *body)
{
	struct provider_tokens t;
	memset(&t, 0, sizeof t);
	ck_assert_int_eq(provider_token_answer_preset(preset, kind, 200, body, &t), CS_OK);
	return t;
}

START_TEST(test_provider_preset_answers)
{
	struct provider_tokens t;
	/* GitHub OAuth app: no expiry, no refresh token, comma scopes. */
	t = preset_answer(PRESET_GITHUB, PROVIDER_TOKEN_CODE,
	    "{\"access_token\":\"gho_1\",\"token_type\":\"bearer\",\"scope\":\"repo,gist\"}");
	ck_assert_str_eq(t.scope, "repo gist");
	ck_assert_int_eq(t.expires_in, 31536000);
	ck_assert_ptr_null(t.refresh_token);
	provider_tokens_clear(&t);
	/* GitHub app: the scope is the app's, "" says nothing; 8 h when unsaid. */
	t = preset_answer(PRESET_GITHUB_APP, PROVIDER_TOKEN_REFRESH,
	    "{\"access_token\":\"ghu_1\",\"token_type\":\"bearer\",\"scope\":\"\","
	    "\"refresh_token\":\"ghr_1\",\"refresh_token_expires_in\":15811200}");
	ck_assert_ptr_null(t.scope);
	ck_assert_int_eq(t.expires_in, 28800);
	ck_assert_str_eq(t.refresh_token, "ghr_1");
	provider_tokens_clear(&t);
	/* Microsoft: the OpenID and offline scopes it adds are not the API's. */
	t = preset_answer(PRESET_MICROSOFT, PROVIDER_TOKEN_CODE,
	    "{\"access_token\":\"eyA\",\"token_type\":\"Bearer\",\"expires_in\":3599,"
	    "\"scope\":\"openid profile https://graph.microsoft.com/Mail.Read email offline_access\"}");
	ck_assert_str_eq(t.scope, "https://graph.microsoft.com/Mail.Read");
	ck_assert_int_eq(t.expires_in, 3599);
	provider_tokens_clear(&t);
	t = preset_answer(PRESET_ATLASSIAN, PROVIDER_TOKEN_REFRESH,
	    "{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"scope\":\"offline_access read:jira-work\"}");
	ck_assert_str_eq(t.scope, "read:jira-work");
	provider_tokens_clear(&t);
	t = preset_answer(PRESET_GITLAB, PROVIDER_TOKEN_REFRESH,
	    "{\"access_token\":\"a\",\"token_type\":\"bearer\",\"created_at\":1}");
	ck_assert_int_eq(t.expires_in, 7200);           /* GitLab sometimes omits it */
	provider_tokens_clear(&t);
	/* Slack: the user token under authed_user; "user" is a bearer token. */
	t = preset_answer(PRESET_SLACK, PROVIDER_TOKEN_CODE,
	    "{\"ok\":true,\"app_id\":\"A1\",\"access_token\":\"xoxb-bot\",\"token_type\":\"bot\","
	    "\"authed_user\":{\"id\":\"U1\",\"scope\":\"chat:write,channels:read\","
	    "\"access_token\":\"xoxe.xoxp-1\",\"token_type\":\"user\",\"refresh_token\":\"xoxe-1\","
	    "\"expires_in\":43200}}");
	ck_assert_str_eq(t.access_token, "xoxe.xoxp-1");
	ck_assert_str_eq(t.token_type, "Bearer");
	ck_assert_str_eq(t.scope, "chat:write channels:read");
	ck_assert_str_eq(t.refresh_token, "xoxe-1");
	ck_assert_int_eq(t.expires_in, 43200);
	provider_tokens_clear(&t);
	/* Without rotation: no expiry, no refresh token. */
	t = preset_answer(PRESET_SLACK, PROVIDER_TOKEN_CODE, "{\"ok\":true,\"authed_user\":"
	    "{\"access_token\":\"xoxp-2\",\"token_type\":\"user\",\"scope\":\"a\"}}");
	ck_assert_int_eq(t.expires_in, 31536000);
	ck_assert_ptr_null(t.refresh_token);
	provider_tokens_clear(&t);
	/* A generic provider reads none of that. */
	t = preset_answer(PRESET_NONE, PROVIDER_TOKEN_CODE,
	    "{\"access_token\":\"a\",\"token_type\":\"user\",\"authed_user\":{\"access_token\":\"b\"},"
	    "\"scope\":\"offline_access x\"}");
	ck_assert_str_eq(t.access_token, "a");
	ck_assert_str_eq(t.token_type, "user");
	ck_assert_str_eq(t.scope, "offline_access x");
	ck_assert_int_eq(t.expires_in, 0);
	provider_tokens_clear(&t);

	/* Bad input. */
	memset(&t, 0, sizeof t);
	ck_assert_int_eq(provider_token_answer_preset(PRESET_SLACK, PROVIDER_TOKEN_CODE, 200,
	    "{\"ok\":true,\"authed_user\":[\"xoxp\"]}", &t), CS_EINVAL);
	ck_assert_int_eq(provider_token_answer_preset(PRESET_SLACK, PROVIDER_TOKEN_CODE, 200,
	    "{\"ok\":true,\"authed_user\":{\"access_token\":7,\"token_type\":\"user\"}}", &t),
	    CS_EINVAL);
	/* Slack's refusals come as 200 with ok:false. */
	ck_assert_int_eq(provider_token_answer_preset(PRESET_SLACK, PROVIDER_TOKEN_REFRESH, 200,
	    "{\"ok\":false,\"error\":\"invalid_refresh_token\"}", &t), CS_EPERM);
	ck_assert_int_eq(provider_token_answer_preset(PRESET_SLACK, PROVIDER_TOKEN_REFRESH, 200,
	    "{\"ok\":false,\"error\":\"ratelimited\"}", &t), CS_EIO);
	ck_assert_int_eq(provider_token_answer_preset((enum config_preset)PRESET__MAX,
	    PROVIDER_TOKEN_CODE, 200, "{\"access_token\":\"a\",\"token_type\":\"Bearer\"}", &t),
	    CS_EINVAL);
	ck_assert_ptr_null(t.access_token);
}
END_TEST

START_TEST(test_provider_preset_revoke_github)
{
	struct srv sv;
	char want[256];
	const char *path = "/api/v3/applications/cli%3Aent/token";
	srv_start(&sv);
	struct provider *p = preset_provider(PRESET_GITHUB_APP, sv.base);
	srv_set(&sv, path, 204, "");
	ck_assert_int_eq(provider_revoke(p, "ghu_secret", "access_token"), CS_OK);
	struct route seen = srv_seen(&sv, path);
	ck_assert_str_eq(seen.last_method, "DELETE");
	ck_assert_str_eq(seen.last_body, "{\"access_token\":\"ghu_secret\"}");
	basic_of(CLIENT_ID ":" CLIENT_SECRET, want, sizeof want);   /* GitHub: the raw pair */
	ck_assert_str_eq(seen.last_auth, want);
	/* A refresh token cannot be named: nothing is sent. */
	ck_assert_int_eq(provider_revoke(p, "ghr_secret", "refresh_token"), CS_ENOENT);
	ck_assert_int_eq(srv_seen(&sv, path).hits, 1);
	srv_set(&sv, path, 404, "{\"message\":\"Not Found\"}");       /* unknown: dead already */
	ck_assert_int_eq(provider_revoke(p, "ghu_secret", "access_token"), CS_OK);
	srv_set(&sv, path, 422, "{}");
	ck_assert_int_eq(provider_revoke(p, "ghu_secret", "access_token"), CS_EIO);
	srv_set(&sv, path, 503, "{}");
	ck_assert_int_eq(provider_revoke(p, "ghu_secret", "access_token"), CS_EIO);
	provider_free(p);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_provider_preset_revoke_slack_and_none)
{
	struct srv sv;
	const char *path = "/api/auth.revoke";
	srv_start(&sv);
	struct provider *p = preset_provider(PRESET_SLACK, sv.base);
	srv_set(&sv, path, 200, "{\"ok\":true,\"revoked\":true}");
	ck_assert_int_eq(provider_revoke(p, "xoxp-1", "access_token"), CS_OK);
	struct route seen = srv_seen(&sv, path);
	ck_assert_str_eq(seen.last_method, "POST");
	ck_assert_str_eq(seen.last_auth, "Bearer xoxp-1");
	ck_assert_str_eq(seen.last_body, "");
	srv_set(&sv, path, 200, "{\"ok\":false,\"error\":\"token_revoked\"}");
	ck_assert_int_eq(provider_revoke(p, "xoxp-1", "access_token"), CS_OK);
	srv_set(&sv, path, 200, "{\"ok\":false,\"error\":\"ratelimited\"}");
	ck_assert_int_eq(provider_revoke(p, "xoxp-1", "access_token"), CS_EIO);
	srv_set(&sv, path, 200, "not json");
	ck_assert_int_eq(provider_revoke(p, "xoxp-1", "access_token"), CS_EIO);
	srv_set(&sv, path, 500, "{\"ok\":true}");
	ck_assert_int_eq(provider_revoke(p, "xoxp-1", "access_token"), CS_EIO);
	ck_assert_int_eq(provider_revoke(p, "xoxe-1", "refresh_token"), CS_ENOENT);
	provider_free(p);
	/* Microsoft and Atlassian revoke nothing, and ask nobody. */
	p = preset_provider(PRESET_MICROSOFT, sv.base);
	ck_assert_int_eq(provider_revoke(p, "a", "access_token"), CS_ENOENT);
	provider_free(p);
	p = preset_provider(PRESET_ATLASSIAN, sv.base);
	ck_assert_int_eq(provider_revoke(p, "a", "refresh_token"), CS_ENOENT);
	provider_free(p);
	ck_assert_int_eq(srv_unrouted(&sv), 0);
	srv_stop(&sv);
}
END_TEST

START_TEST(test_provider_sites)
{
	struct srv sv;
	char *ids = NULL;
	const char *path = "/oauth/token/accessible-resources";
	srv_start(&sv);
	struct provider *p = preset_provider(PRESET_ATLASSIAN, sv.base);
	srv_set(&sv, path, 200, "[{\"id\":\"1324a887-45db-1bf4-1e99-ef0ff456d421\",\"name\":\"Site\","
	    "\"url\":\"https://x.atlassian.net\",\"scopes\":[\"read:jira-work\"]},{\"id\":\"b2\"}]");
	ck_assert_int_eq(provider_sites(p, "at-1", &ids), CS_OK);
	ck_assert_str_eq(ids, "1324a887-45db-1bf4-1e99-ef0ff456d421,b2");
	free(ids);
	ids = NULL;
	ck_assert_str_eq(srv_seen(&sv, path).last_auth, "Bearer at-1");
	ck_assert_str_eq(srv_seen(&sv, path).last_method, "GET");
	srv_set(&sv, path, 200, "[]");
	ck_assert_int_eq(provider_sites(p, "at-1", &ids), CS_ENOENT);
	srv_set(&sv, path, 401, "{}");
	ck_assert_int_eq(provider_sites(p, "at-1", &ids), CS_EIO);
	/* SECURITY: an id goes into API paths: nothing but [A-Za-z0-9-]. */
	srv_set(&sv, path, 200, "[{\"id\":\"../../admin\"}]");
	ck_assert_int_eq(provider_sites(p, "at-1", &ids), CS_EIO);
	ck_assert_ptr_null(ids);
	provider_free(p);
	/* Other presets have no sites. */
	p = preset_provider(PRESET_GITLAB, sv.base);
	ck_assert_int_eq(provider_sites(p, "at-1", &ids), CS_ENOENT);
	provider_free(p);
	srv_stop(&sv);

	static const char *const bad[] = { "", "{}", "[1]", "[{}]", "[{\"id\":7}]",
		"[{\"id\":\"\"}]", "[{\"id\":\"a b\"}]", "[{\"id\":\"a\\u0000b\"}]",
		"[{\"id\":\"a\"},{\"id\":\"a?\"}]", "[{\"id\":\"a\",\"id\":\"b\"}]", NULL };
	for (size_t i = 0; bad[i] != NULL; i++) {
		ck_assert_msg(provider_sites_parse(bad[i], &ids) == CS_EINVAL, "accepted %s", bad[i]);
		ck_assert_ptr_null(ids);
	}
	struct buf b;
	buf_init(&b, 1 << 16);
	ck_assert_int_eq(buf_puts(&b, "["), CS_OK);
	for (int i = 0; i < 65; i++)
		ck_assert_int_eq(buf_printf(&b, "%s{\"id\":\"s%d\"}", i ? "," : "", i), CS_OK);
	ck_assert_int_eq(buf_puts(&b, "]"), CS_OK);
	ck_assert_int_eq(provider_sites_parse(b.data, &ids), CS_EINVAL);   /* more than 64 */
	buf_clear(&b);
	ck_assert_int_eq(provider_sites_parse(NULL, &ids), CS_EINVAL);
}
END_TEST

/* --- an unreachable provider -------------------------------------------- */

START_TEST(test_provider_connection_refused)
{
	struct sockaddr_in a;
	socklen_t alen = sizeof a;
	char base[64], at[96], tt[96], rt[96];
	struct provider *p = NULL;
	struct provider_tokens t;
	const struct provider_meta *m = NULL;

	/* A port that was just free and has no listener. */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	close(fd);
	ck_assert_int_eq(str_fmt(base, sizeof base, "http://127.0.0.1:%u", (unsigned)ntohs(a.sin_port)), CS_OK);
	ck_assert_int_eq(str_fmt(at, sizeof at, "%s/authorize", base), CS_OK);
	ck_assert_int_eq(str_fmt(tt, sizeof tt, "%s/token", base), CS_OK);
	ck_assert_int_eq(str_fmt(rt, sizeof rt, "%s/revoke", base), CS_OK);

	struct config_resource r = res_issuer(NULL);
	r.provider_authorization_endpoint = at;
	r.provider_token_endpoint = tt;
	r.provider_revocation_endpoint = rt;
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	memset(&t, 0, sizeof t);
	ck_assert_int_eq(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t), CS_EIO);
	ck_assert_int_eq(provider_refresh(p, "rt", &t), CS_EIO);
	ck_assert_int_eq(provider_revoke(p, "rt", "refresh_token"), CS_EIO);
	ck_assert_ptr_null(t.access_token);
	provider_free(p);
	p = NULL;

	/* Discovery that cannot connect: CS_EIO, and so are the calls needing it. */
	r = res_issuer(base);
	ck_assert_int_eq(provider_new(&r, &p), CS_OK);
	ck_assert_int_eq(provider_meta(p, &m), CS_EIO);
	ck_assert_int_eq(provider_exchange_code(p, CODE, REDIRECT, VERIFIER, &t), CS_EIO);
	ck_assert_int_eq(provider_refresh(p, "rt", &t), CS_EIO);
	ck_assert_int_eq(provider_revoke(p, "rt", "refresh_token"), CS_EIO);
	provider_free(p);
}
END_TEST

START_TEST(test_provider_tokens_clear_wipes)
{
	struct provider_tokens t;
	t.access_token = strdup("at");
	t.refresh_token = strdup("rt");
	t.token_type = strdup("Bearer");
	t.scope = NULL;
	t.expires_in = 5;
	ck_assert_ptr_nonnull(t.access_token);
	ck_assert_ptr_nonnull(t.refresh_token);
	provider_tokens_clear(&t);
	ck_assert_ptr_null(t.access_token);
	ck_assert_ptr_null(t.refresh_token);
	ck_assert_ptr_null(t.token_type);
	ck_assert_int_eq(t.expires_in, 0);
	provider_tokens_clear(&t);              /* twice is fine */
}
END_TEST

/* provider_token_answer on what a provider may send: never tokens from a
 * malformed 200, and the final/transient split for each call. */
static enum cs_err answer(enum provider_token_kind kind, long status, const char *body)
{
	struct provider_tokens t;
	memset(&t, 0x5a, sizeof t);
	enum cs_err e = provider_token_answer(kind, status, body, &t);
	if (e == CS_OK)
		provider_tokens_clear(&t);
	else
		ck_assert_uint_eq((uintptr_t)t.access_token, (uintptr_t)0x5a5a5a5a5a5a5a5aULL);
	return e;
}

START_TEST(test_provider_token_answer_good)
{
	struct provider_tokens t;
	ck_assert_int_eq(provider_token_answer(PROVIDER_TOKEN_CODE, 200,
	    "{\"access_token\":\"gho_x\",\"token_type\":\"bearer\",\"scope\":\"repo,gist\","
	    "\"refresh_token\":\"r1\",\"expires_in\":\"99999999999\"}", &t), CS_OK);
	ck_assert_str_eq(t.access_token, "gho_x");
	ck_assert_str_eq(t.token_type, "bearer");
	ck_assert_str_eq(t.refresh_token, "r1");
	ck_assert_str_eq(t.scope, "repo gist");
	ck_assert_int_eq(t.expires_in, 315360000);       /* clamped to ten years */
	provider_tokens_clear(&t);
	ck_assert_int_eq(provider_token_answer(PROVIDER_TOKEN_REFRESH, 200,
	    "{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"scope\":\"a,b c\","
	    "\"expires_in\":null,\"refresh_token\":null}", &t), CS_OK);
	ck_assert_str_eq(t.scope, "a,b c");               /* has a space: RFC 6749's list */
	ck_assert_int_eq(t.expires_in, 0);
	ck_assert_ptr_null(t.refresh_token);
	provider_tokens_clear(&t);
}
END_TEST

START_TEST(test_provider_token_answer_bad)
{
	static const char *const bad200[] = {
		NULL, "", "not json", "[]", "\"a\"", "{\"access_token\":\"a\"",
		"{\"token_type\":\"Bearer\"}",
		"{\"access_token\":\"a\"}",
		"{\"access_token\":\"\",\"token_type\":\"Bearer\"}",
		"{\"access_token\":\"a\",\"token_type\":\"\"}",
		"{\"access_token\":1,\"token_type\":\"Bearer\"}",
		"{\"access_token\":\"a\\u0000b\",\"token_type\":\"Bearer\"}",
		"{\"access_token\":\"a\",\"access_token\":\"b\",\"token_type\":\"Bearer\"}",
		"{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"refresh_token\":\"\"}",
		"{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"scope\":[]}",
		"{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"expires_in\":-1}",
		"{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"expires_in\":1.5}",
		"{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"expires_in\":\"\"}",
		"{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"expires_in\":\"12a\"}",
		"{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"expires_in\":\"-1\"}",
		"{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"expires_in\":\"1234567890123456789\"}",
		"{\"access_token\":\"a\",\"token_type\":\"Bearer\",\"expires_in\":true}",
	};
	for (size_t i = 0; i < sizeof bad200 / sizeof bad200[0]; i++)
		for (int k = 0; k < PROVIDER_TOKEN__MAX; k++)
			ck_assert_msg(answer((enum provider_token_kind)k, 200, bad200[i]) == CS_EINVAL,
			    "accepted: %s", bad200[i] ? bad200[i] : "(null)");
	/* GitHub's errors with 200 are read as 400. */
	ck_assert_int_eq(answer(PROVIDER_TOKEN_CODE, 200, "{\"error\":\"bad_verification_code\"}"),
	    CS_EPERM);
	ck_assert_int_eq(answer(PROVIDER_TOKEN_REFRESH, 200, "{\"error\":\"bad_refresh_token\"}"),
	    CS_EPERM);
	ck_assert_int_eq(answer(PROVIDER_TOKEN_REFRESH, 200, "{\"error\":\"slow_down\"}"), CS_EIO);
	/* Code: any 400/401 is final, anything else transient, whatever the body. */
	ck_assert_int_eq(answer(PROVIDER_TOKEN_CODE, 400, "garbage"), CS_EPERM);
	ck_assert_int_eq(answer(PROVIDER_TOKEN_CODE, 401, NULL), CS_EPERM);
	ck_assert_int_eq(answer(PROVIDER_TOKEN_CODE, 500, "{\"error\":\"invalid_grant\"}"), CS_EIO);
	ck_assert_int_eq(answer(PROVIDER_TOKEN_CODE, 302, ""), CS_EIO);
	/* Refresh: final only for 401 or a refusal code in a 400. */
	ck_assert_int_eq(answer(PROVIDER_TOKEN_REFRESH, 400, "{\"error\":\"invalid_grant\"}"), CS_EPERM);
	ck_assert_int_eq(answer(PROVIDER_TOKEN_REFRESH, 400, "{\"error\":\"invalid_client\"}"), CS_EPERM);
	ck_assert_int_eq(answer(PROVIDER_TOKEN_REFRESH, 400, "{\"error\":\"invalid_grant\","
	    "\"error\":\"x\"}"), CS_EIO);            /* duplicate member: not read */
	ck_assert_int_eq(answer(PROVIDER_TOKEN_REFRESH, 400, "{\"error\":[\"invalid_grant\"]}"), CS_EIO);
	ck_assert_int_eq(answer(PROVIDER_TOKEN_REFRESH, 400, "{\"error\":\"invalid_grant \"}"), CS_EIO);
	ck_assert_int_eq(answer(PROVIDER_TOKEN_REFRESH, 400, "not json"), CS_EIO);
	ck_assert_int_eq(answer(PROVIDER_TOKEN_REFRESH, 401, "not json"), CS_EPERM);
	ck_assert_int_eq(answer(PROVIDER_TOKEN_REFRESH, 503, "{\"error\":\"invalid_grant\"}"), CS_EIO);
}
END_TEST

static Suite *provider_suite(void)
{
	Suite *s = suite_create("provider");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_provider_new_rejects);
	tcase_add_test(tc, test_provider_tokens_clear_wipes);
	tcase_add_test(tc, test_provider_token_answer_good);
	tcase_add_test(tc, test_provider_token_answer_bad);
	tcase_add_test(tc, test_provider_meta_parse_bad);
	tcase_add_test(tc, test_provider_discover_rfc8414);
	tcase_add_test(tc, test_provider_discover_rfc8414_path_insertion);
	tcase_add_test(tc, test_provider_discover_fallback_openid);
	tcase_add_test(tc, test_provider_discover_wrong_issuer);
	tcase_add_test(tc, test_provider_meta_explicit_no_discovery);
	tcase_add_test(tc, test_provider_meta_explicit_override);
	tcase_add_test(tc, test_provider_discover_disallowed_endpoint);
	tcase_add_test(tc, test_provider_meta_concurrent_one_discovery);
	tcase_add_test(tc, test_provider_exchange_code_request);
	tcase_add_test(tc, test_provider_exchange_code_public_client);
	tcase_add_test(tc, test_provider_exchange_code_missing_token_type);
	tcase_add_test(tc, test_provider_exchange_code_expires_in_string);
	tcase_add_test(tc, test_provider_exchange_code_refused);
	tcase_add_test(tc, test_provider_refresh_request);
	tcase_add_test(tc, test_provider_refresh_invalid_grant);
	tcase_add_test(tc, test_provider_refresh_server_error);
	tcase_add_test(tc, test_provider_revoke_endpoint);
	tcase_add_test(tc, test_provider_revoke_no_endpoint);
	tcase_add_test(tc, test_provider_connection_refused);
	tcase_add_test(tc, test_provider_preset_new);
	tcase_add_test(tc, test_provider_preset_authz);
	tcase_add_test(tc, test_provider_preset_answers);
	tcase_add_test(tc, test_provider_preset_revoke_github);
	tcase_add_test(tc, test_provider_preset_revoke_slack_and_none);
	tcase_add_test(tc, test_provider_sites);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	if (httpc_global_init() != CS_OK)
		return EXIT_FAILURE;
	int rc = tu_run(provider_suite());
	curl_global_cleanup();
	return rc;
}
