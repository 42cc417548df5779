/* test_events.c -- revocation events (flow G): one outbox entry per revocation
 * in the revoking transaction (revoke, replace, rollback), the SET's header and
 * claims exactly, and the push with its retry schedule against a canned
 * receiver on 127.0.0.1 that is first down (a closed port), then up. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <sqlite3.h>

#include "buf.h"
#include "audit.h"
#include "consent.h"
#include "events.h"
#include "httpc.h"
#include "jwt.h"
#include "store.h"
#include "testutil.h"
#include "tu_consent.h"

#include "tu_events.h"
}

static int64_t outbox_count(const char *consent_id)
{
	return q_int("SELECT count(*) FROM events_outbox WHERE consent_id = ?1", consent_id);
}

static int64_t audits(const char *action)
{
	return q_int("SELECT count(*) FROM audit WHERE action = ?1", action);
}

/* The one outbox row of consent_id. */
static void outbox_row(const char *consent_id, struct store_event_row *out)
{
	struct store_event_row *v = NULL;
	size_t n = 0;
	ck_assert_int_eq(events_list(sc, consent_id, STORE_EVENTS_ANY, 0, 10, &v, &n), CS_OK);
	ck_assert_uint_eq(n, 1);
	*out = v[0];
	memset(&v[0], 0, sizeof v[0]);
	store_event_rows_free(v, n);
}

static bool is_hex32(const char *s)
{
	if (s == NULL || strlen(s) != 32)
		return false;
	for (; *s; s++)
		if (strchr("0123456789abcdef", *s) == NULL)
			return false;
	return true;
}

/* The decoded JSON of one base64url segment [p, p + n). */
static json_t *b64u_json(const char *p, size_t n)
{
	char *s = calloc(1, n + 4);
	unsigned char *out = calloc(1, n + 4);
	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_nonnull(out);
	for (size_t i = 0; i < n; i++)
		s[i] = p[i] == '-' ? '+' : p[i] == '_' ? '/' : p[i];
	size_t m = n;
	while (m % 4 != 0)
		s[m++] = '=';
	int len = EVP_DecodeBlock(out, (unsigned char *)s, (int)m);
	ck_assert_int_ge(len, 0);
	while (m > n && len > 0) {   /* padding we added decodes to zero bytes */
		len--;
		m--;
	}
	json_t *j = json_loadb((const char *)out, (size_t)len, JSON_REJECT_DUPLICATES, NULL);
	ck_assert_ptr_nonnull(j);
	free(s);
	free(out);
	return j;
}

/* Checks the object has exactly the keys in want (NULL-terminated). */
static void ck_keys(json_t *o, const char *const *want)
{
	size_t n = 0;
	for (; want[n] != NULL; n++)
		ck_assert_msg(json_object_get(o, want[n]) != NULL, "missing %s", want[n]);
	ck_assert_uint_eq(json_object_size(o), n);
}

/* Checks claims are exactly the revocation SET of row r issued at iat. */
static void ck_set_claims(json_t *cl, const struct store_event_row *r, const char *reason,
    int64_t iat)
{
	static const char *const top[] = { "iss", "aud", "iat", "toe", "jti", "sub_id", "events",
		NULL };
	static const char *const sid[] = { "format", "iss", "sub", NULL };
	static const char *const ev[] = { "cid", "agent_id", "resource", "reason", NULL };
	ck_keys(cl, top);
	ck_assert_ptr_null(json_object_get(cl, "exp"));
	ck_assert_str_eq(json_string_value(json_object_get(cl, "iss")), PUBLIC);
	ck_assert_str_eq(json_string_value(json_object_get(cl, "aud")), "agent-gateway");
	ck_assert_int_eq(json_integer_value(json_object_get(cl, "iat")), iat);
	ck_assert_int_eq(json_integer_value(json_object_get(cl, "toe")), r->created_at);
	ck_assert_str_eq(json_string_value(json_object_get(cl, "jti")), r->jti);
	json_t *s = json_object_get(cl, "sub_id");
	ck_keys(s, sid);
	ck_assert_str_eq(json_string_value(json_object_get(s, "format")), "iss_sub");
	ck_assert_str_eq(json_string_value(json_object_get(s, "iss")), ISS);
	ck_assert_str_eq(json_string_value(json_object_get(s, "sub")), r->subject);
	json_t *events = json_object_get(cl, "events");
	ck_assert_uint_eq(json_object_size(events), 1);
	json_t *e = json_object_get(events, EVENTS_REVOKED_URI);
	ck_assert_ptr_nonnull(e);
	ck_keys(e, ev);
	ck_assert_str_eq(json_string_value(json_object_get(e, "cid")), r->consent_id);
	ck_assert_str_eq(json_string_value(json_object_get(e, "agent_id")), "coder");
	ck_assert_str_eq(json_string_value(json_object_get(e, "resource")),
	    "urn:consentd:resource:notes");
	if (reason == NULL)
		ck_assert(json_is_null(json_object_get(e, "reason")));
	else
		ck_assert_str_eq(json_string_value(json_object_get(e, "reason")), reason);
}

/* --- a canned receiver on 127.0.0.1 ------------------------------------ */

struct rcv {
	int             fd;
	int             stop;
	pthread_t       th;
	pthread_mutex_t mu;
	unsigned        port;
	char            url[96];
	int             status;         /* what it answers */
	const char     *body;
	int             hits;
	char            last_head[4096];
	char           *last_body;
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

/* The fake receiver keeps at most cap - 1 bytes of what it was sent: a longer
 * head is cut on purpose (the tests look at its start), never overrun. */
static void keep(char *dst, size_t cap, const char *s, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
}

static void rcv_one(struct rcv *r, int c)
{
	char req[16384] = "";
	size_t got = 0;
	char *end = NULL;
	while (got < sizeof req - 1 && (end = strstr(req, "\r\n\r\n")) == NULL) {
		ssize_t n = recv(c, req + got, sizeof req - 1 - got, 0);
		if (n <= 0)
			return;
		got += (size_t)n;
		req[got] = '\0';
	}
	if (end == NULL)
		return;
	size_t hlen = (size_t)(end - req) + 4, clen = 0;
	char *cl = strcasestr(req, "\r\ncontent-length:");
	if (cl != NULL && cl < end)
		clen = strtoul(cl + 17, NULL, 10);
	while (got < hlen + clen && got < sizeof req - 1) {
		ssize_t n = recv(c, req + got, sizeof req - 1 - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
		req[got] = '\0';
	}
	pthread_mutex_lock(&r->mu);
	r->hits++;
	keep(r->last_head, sizeof r->last_head, req, hlen);
	free(r->last_body);
	r->last_body = strdup(req + hlen);
	char head[256];
	size_t bl = strlen(r->body);
	/* A status and a length always fit; in the receiver's thread a failure aborts. */
	if (str_fmt(head, sizeof head, "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
	    "Content-Length: %zu\r\nConnection: close\r\n\r\n", r->status, bl) != CS_OK)
		abort();
	int h = (int)strlen(head);
	send_all(c, head, (size_t)h);
	send_all(c, r->body, bl);
	pthread_mutex_unlock(&r->mu);
}

static void *rcv_main(void *arg)
{
	struct rcv *r = arg;
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		struct pollfd pfd = { r->fd, POLLIN, 0 };
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		int c = accept(r->fd, NULL, NULL);
		if (c < 0)
			continue;
		rcv_one(r, c);
		close(c);
	}
	return NULL;
}

/* Listens on port (0: any free one) and serves until rcv_stop. */
static void rcv_start(struct rcv *r, unsigned port)
{
	struct sockaddr_in a;
	socklen_t alen = sizeof a;
	int one = 1;
	memset(r, 0, sizeof *r);
	pthread_mutex_init(&r->mu, NULL);
	r->fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(r->fd, 0);
	setsockopt(r->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a.sin_port = htons((uint16_t)port);
	ck_assert_int_eq(bind(r->fd, (struct sockaddr *)&a, sizeof a), 0);
	ck_assert_int_eq(listen(r->fd, 16), 0);
	ck_assert_int_eq(getsockname(r->fd, (struct sockaddr *)&a, &alen), 0);
	r->port = ntohs(a.sin_port);
	ck_assert_int_eq(str_fmt(r->url, sizeof r->url, "http://127.0.0.1:%u/events", r->port), CS_OK);
	r->status = 202;
	r->body = "";
	ck_assert_int_eq(pthread_create(&r->th, NULL, rcv_main, r), 0);
}

static void rcv_stop(struct rcv *r)
{
	__atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
	pthread_join(r->th, NULL);
	close(r->fd);
	free(r->last_body);
	r->last_body = NULL;
	pthread_mutex_destroy(&r->mu);
}

/* --- enqueue in the cascade -------------------------------------------- */

START_TEST(test_events_enqueue_revoke)
{
	char *kid = approve("alice", "read", T0);
	struct store_event_row r;
	ck_assert_int_eq(outbox_count(kid), 0);
	/* Rolled back by the caller: no event. */
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "bulk", T0 + 5, true), CS_OK);
	ck_assert_int_eq(outbox_count(kid), 0);     /* raw cannot see the open transaction */
	store_rollback(sc);
	ck_assert_int_eq(outbox_count(kid), 0);
	/* By the person: exactly one. */
	ck_assert_int_eq(tu_revoke(sc, kid, user_id("alice"), "user:alice", "no longer needed",
	    T0 + 10, false), CS_OK);
	ck_assert_int_eq(outbox_count(kid), 1);
	outbox_row(kid, &r);
	ck_assert(is_hex32(r.jti));
	ck_assert_str_eq(r.consent_id, kid);
	ck_assert_str_eq(r.subject_iss, ISS);
	ck_assert_str_eq(r.subject, "alice");
	ck_assert_str_eq(r.agent, "coder");
	ck_assert_str_eq(r.resource, "notes");
	ck_assert_str_eq(r.reason, "no longer needed");
	ck_assert_int_eq(r.created_at, T0 + 10);
	ck_assert_int_eq(r.next_attempt_at, T0 + 10);
	ck_assert_int_eq(r.attempts, 0);
	ck_assert_int_eq(r.delivered_at, 0);
	ck_assert_str_eq(events_state_name(&r), "pending");
	store_event_row_clear(&r);
	/* Again (by an admin): already revoked, no second event. */
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "again", T0 + 11, false), CS_OK);
	ck_assert_int_eq(outbox_count(kid), 1);
	free(kid);
}
END_TEST

START_TEST(test_events_enqueue_replace)
{
	char *k1 = approve("alice", "read", T0);
	char *k2 = approve("alice", "write", T0 + 10);
	struct store_event_row r;
	ck_assert_str_ne(k1, k2);
	ck_assert_int_eq(outbox_count(k1), 1);
	ck_assert_int_eq(outbox_count(k2), 0);
	outbox_row(k1, &r);
	ck_assert_str_eq(r.reason, "replaced");
	ck_assert_int_eq(r.created_at, T0 + 11);
	store_event_row_clear(&r);
	/* Two people, two consents, bulk revocation in one transaction: one each. */
	char *kb = approve("bob", "read", T0 + 20);
	ck_assert_int_eq(store_begin(sc), CS_OK);
	ck_assert_int_eq(tu_revoke(sc, k2, 0, "admin:root", "bulk", T0 + 30, true), CS_OK);
	ck_assert_int_eq(tu_revoke(sc, kb, 0, "admin:root", "bulk", T0 + 30, true), CS_OK);
	ck_assert_int_eq(store_commit(sc), CS_OK);
	ck_assert_int_eq(outbox_count(k2), 1);
	ck_assert_int_eq(outbox_count(kb), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM events_outbox", NULL), 3);
	ck_assert_int_eq(q_int("SELECT count(DISTINCT jti) FROM events_outbox", NULL), 3);
	free(k1);
	free(k2);
	free(kb);
}
END_TEST

/* --- the SET ----------------------------------------------------------- */

START_TEST(test_events_set_claims_exact)
{
	char *kid = approve("alice", "read", T0);
	struct store_event_row r;
	json_t *cl = NULL;
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "gone", T0 + 5, false), CS_OK);
	outbox_row(kid, &r);
	ck_assert_int_eq(events_set_claims(&cfg, &r, T0 + 99, &cl), CS_OK);
	ck_set_claims(cl, &r, "gone", T0 + 99);
	json_decref(cl);
	/* No reason: null; a resource no longer configured: its id. */
	r.reason = NULL;                 /* its text stays in r.block, freed by the clear */
	cfg.nresources = 0;
	ck_assert_int_eq(events_set_claims(&cfg, &r, T0 + 99, &cl), CS_OK);
	json_t *e = json_object_get(json_object_get(cl, "events"), EVENTS_REVOKED_URI);
	ck_assert(json_is_null(json_object_get(e, "reason")));
	ck_assert_str_eq(json_string_value(json_object_get(e, "resource")), "notes");
	json_decref(cl);
	store_event_row_clear(&r);
	free(kid);
}
END_TEST

START_TEST(test_events_retry_delay)
{
	ck_assert_int_eq(events_retry_delay(0), 5);
	ck_assert_int_eq(events_retry_delay(1), 10);
	ck_assert_int_eq(events_retry_delay(2), 20);
	ck_assert_int_eq(events_retry_delay(9), 2560);
	ck_assert_int_eq(events_retry_delay(10), 3600);
	ck_assert_int_eq(events_retry_delay(-3), 5);
	ck_assert_int_eq(events_retry_delay(INT64_MAX), 3600);
}
END_TEST

/* What a receiver's refusal leaves in last_error: the status, and its "err"
 * only when the body is a JSON object with a string there, cleaned and cut. */
static const char *rstatus(long status, const char *body, size_t cap)
{
	static char out[256];
	memset(out, 'X', sizeof out);
	events_receiver_status(status, body, body != NULL ? strlen(body) : 0, out, cap);
	return out;
}

START_TEST(test_events_receiver_status)
{
	ck_assert_str_eq(rstatus(400, "{\"err\":\"invalid_key\",\"description\":\"x\"}", 128),
	    "HTTP 400: invalid_key");
	ck_assert_str_eq(rstatus(503, NULL, 128), "HTTP 503");
	ck_assert_str_eq(rstatus(400, "", 128), "HTTP 400");
	ck_assert_str_eq(rstatus(400, "not json", 128), "HTTP 400");
	ck_assert_str_eq(rstatus(400, "[\"err\"]", 128), "HTTP 400");
	ck_assert_str_eq(rstatus(400, "{\"err\":42}", 128), "HTTP 400");
	ck_assert_str_eq(rstatus(400, "{\"err\":\"\"}", 128), "HTTP 400");
	ck_assert_str_eq(rstatus(400, "{\"err\":\"a\",\"err\":\"b\"}", 128), "HTTP 400");
	/* Control bytes and non-ASCII bytes become '?'; a NUL escape is not JSON here. */
	ck_assert_str_eq(rstatus(400, "{\"err\":\"a\\n\\u00e9\\u0001b\"}", 128),
	    "HTTP 400: a????b");   /* é is two bytes */
	ck_assert_str_eq(rstatus(400, "{\"err\":\"ab\\u0000cd\"}", 128), "HTTP 400");
	/* At most 63 characters of the code. */
	char big[300] = "{\"err\":\"";
	memset(big + 8, 'e', 200);
	memcpy(big + 208, "\"}", 3);
	const char *o = rstatus(400, big, 128);
	ck_assert_uint_eq(strlen(o), strlen("HTTP 400: ") + 63);
	/* Too small for the code: the status alone; too small for that: empty;
	 * no room at all: nothing written. */
	ck_assert_str_eq(rstatus(400, "{\"err\":\"invalid_key\"}", 12), "HTTP 400");
	ck_assert_str_eq(rstatus(400, "{\"err\":\"invalid_key\"}", 5), "");
	ck_assert_int_eq(rstatus(400, "{\"err\":\"invalid_key\"}", 0)[0], 'X');
}
END_TEST

/* --- push -------------------------------------------------------------- */

START_TEST(test_events_push_delivers_signed_set)
{
	struct rcv rv;
	struct store_event_row r;
	json_t *cl = NULL;
	int delivered = -1;
	char *kid = approve("alice", "read", T0);
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "gone", T0 + 5, false), CS_OK);
	rcv_start(&rv, 0);
	cfg.events_uri = rv.url;
	ck_assert_int_eq(events_push_run(sc, &cfg, kr, T0 + 6, &delivered), CS_OK);
	ck_assert_int_eq(delivered, 1);
	ck_assert_int_eq(rv.hits, 1);
	ck_assert_ptr_nonnull(strstr(rv.last_head, "POST /events HTTP/1.1\r\n"));
	ck_assert_ptr_nonnull(strcasestr(rv.last_head, "\r\nContent-Type: application/secevent+jwt\r\n"));
	ck_assert_ptr_nonnull(strcasestr(rv.last_head, "\r\nAccept: application/json\r\n"));
	/* The header exactly: alg ES256, typ secevent+jwt, the signing kid. */
	const char *set = rv.last_body;
	const char *dot = strchr(set, '.');
	ck_assert_ptr_nonnull(dot);
	json_t *hdr = b64u_json(set, (size_t)(dot - set));
	static const char *const hk[] = { "alg", "typ", "kid", NULL };
	ck_keys(hdr, hk);
	ck_assert_str_eq(json_string_value(json_object_get(hdr, "alg")), "ES256");
	ck_assert_str_eq(json_string_value(json_object_get(hdr, "typ")), "secevent+jwt");
	ck_assert_str_eq(json_string_value(json_object_get(hdr, "kid")), keyring_signing_kid(kr));
	json_decref(hdr);
	/* The signature verifies with consentd's keys; the claims exactly. */
	ck_assert_int_eq(jwt_verify(kr, "secevent+jwt", set, &cl), CS_OK);
	outbox_row(kid, &r);
	ck_set_claims(cl, &r, "gone", T0 + 6);
	json_decref(cl);
	ck_assert_int_ne(jwt_verify(kr, "at+jwt", set, &cl), CS_OK);
	ck_assert_int_eq(r.delivered_at, T0 + 6);
	ck_assert_int_eq(r.attempts, 1);
	ck_assert_int_eq(r.last_status, 202);
	ck_assert_str_eq(events_state_name(&r), "delivered");
	store_event_row_clear(&r);
	ck_assert_int_eq(audits("event.delivered"), 1);
	/* Delivered: never again. */
	ck_assert_int_eq(events_push_run(sc, &cfg, kr, T0 + 7000, &delivered), CS_OK);
	ck_assert_int_eq(delivered, 0);
	ck_assert_int_eq(rv.hits, 1);
	rcv_stop(&rv);
	free(kid);
}
END_TEST

START_TEST(test_events_push_retry_schedule)
{
	struct rcv rv;
	struct store_event_row r;
	int delivered = -1;
	char *jti = NULL;
	char *kid = approve("alice", "read", T0);
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "user:alice", "bye", T0 + 5, false), CS_OK);
	/* A port that was just free: the receiver is down (connection refused). */
	rcv_start(&rv, 0);
	unsigned port = rv.port;
	char url[96];
	ck_assert_int_eq(str_fmt(url, sizeof url, "%s", rv.url), CS_OK);
	rcv_stop(&rv);
	cfg.events_uri = url;
	ck_assert_int_eq(events_push_run(sc, &cfg, kr, T0 + 6, &delivered), CS_OK);
	ck_assert_int_eq(delivered, 0);
	outbox_row(kid, &r);
	jti = strdup(r.jti);
	ck_assert_int_eq(r.attempts, 1);
	ck_assert_int_eq(r.next_attempt_at, T0 + 6 + 5);
	ck_assert_int_eq(r.last_status, 0);
	ck_assert_ptr_nonnull(r.last_error);
	ck_assert_str_eq(events_state_name(&r), "retrying");
	store_event_row_clear(&r);
	/* Not due yet: untouched. */
	ck_assert_int_eq(events_push_run(sc, &cfg, kr, T0 + 10, &delivered), CS_OK);
	outbox_row(kid, &r);
	ck_assert_int_eq(r.attempts, 1);
	store_event_row_clear(&r);
	/* Due: the second failure waits twice as long. */
	ck_assert_int_eq(events_push_run(sc, &cfg, kr, T0 + 11, &delivered), CS_OK);
	outbox_row(kid, &r);
	ck_assert_int_eq(r.attempts, 2);
	ck_assert_int_eq(r.next_attempt_at, T0 + 11 + 10);
	store_event_row_clear(&r);
	/* Up again, but refusing (400 with an RFC 8935 error): a retry, recorded. */
	rcv_start(&rv, port);
	ck_assert_str_eq(rv.url, url);
	pthread_mutex_lock(&rv.mu);
	rv.status = 400;
	rv.body = "{\"err\":\"invalid_request\",\"description\":\"nope\"}";
	pthread_mutex_unlock(&rv.mu);
	ck_assert_int_eq(events_push_run(sc, &cfg, kr, T0 + 21, &delivered), CS_OK);
	ck_assert_int_eq(delivered, 0);
	outbox_row(kid, &r);
	ck_assert_int_eq(r.attempts, 3);
	ck_assert_int_eq(r.next_attempt_at, T0 + 21 + 20);
	ck_assert_int_eq(r.last_status, 400);
	ck_assert_str_eq(r.last_error, "HTTP 400: invalid_request");
	store_event_row_clear(&r);
	/* 200 is not 202: still a retry. */
	pthread_mutex_lock(&rv.mu);
	rv.status = 200;
	rv.body = "";
	pthread_mutex_unlock(&rv.mu);
	ck_assert_int_eq(events_push_run(sc, &cfg, kr, T0 + 41, &delivered), CS_OK);
	outbox_row(kid, &r);
	ck_assert_int_eq(r.attempts, 4);
	ck_assert_int_eq(r.last_status, 200);
	ck_assert_int_eq(r.next_attempt_at, T0 + 41 + 40);
	store_event_row_clear(&r);
	/* 202: delivered, with the same jti it had from the start. */
	pthread_mutex_lock(&rv.mu);
	rv.status = 202;
	pthread_mutex_unlock(&rv.mu);
	ck_assert_int_eq(events_push_run(sc, &cfg, kr, T0 + 81, &delivered), CS_OK);
	ck_assert_int_eq(delivered, 1);
	ck_assert_int_eq(rv.hits, 3);
	json_t *cl = NULL;
	ck_assert_int_eq(jwt_verify(kr, "secevent+jwt", rv.last_body, &cl), CS_OK);
	ck_assert_str_eq(json_string_value(json_object_get(cl, "jti")), jti);
	ck_assert_int_eq(json_integer_value(json_object_get(cl, "toe")), T0 + 5);
	json_decref(cl);
	outbox_row(kid, &r);
	ck_assert_int_eq(r.attempts, 5);
	ck_assert_int_eq(r.delivered_at, T0 + 81);
	ck_assert_ptr_null(r.last_error);
	store_event_row_clear(&r);
	ck_assert_int_eq(audits("event.delivered"), 1);
	rcv_stop(&rv);
	free(jti);
	free(kid);
}
END_TEST

START_TEST(test_events_push_no_uri_waits)
{
	int delivered = -1;
	int64_t w = -1, f = -1, d = -1;
	char *kid = approve("alice", "read", T0);
	ck_assert_int_eq(tu_revoke(sc, kid, 0, "admin:root", "x", T0 + 5, false), CS_OK);
	cfg.events_uri = NULL;
	ck_assert_int_eq(events_push_run(sc, &cfg, kr, T0 + 6, &delivered), CS_OK);
	ck_assert_int_eq(delivered, 0);
	ck_assert_int_eq(q_int("SELECT attempts FROM events_outbox WHERE consent_id = ?1", kid), 0);
	ck_assert_int_eq(events_count(sc, &w, &f, &d), CS_OK);
	ck_assert_int_eq(w, 1);
	ck_assert_int_eq(f, 0);
	ck_assert_int_eq(d, 0);
	free(kid);
}
END_TEST

START_TEST(test_events_push_stops_when_unreachable)
{
	struct rcv rv;
	int delivered = -1;
	char url[96];
	char *k1 = approve("alice", "read", T0);
	char *k2 = approve("bob", "read", T0);
	ck_assert_int_eq(tu_revoke(sc, k1, 0, "admin:root", "x", T0 + 5, false), CS_OK);
	ck_assert_int_eq(tu_revoke(sc, k2, 0, "admin:root", "x", T0 + 5, false), CS_OK);
	rcv_start(&rv, 0);
	ck_assert_int_eq(str_fmt(url, sizeof url, "%s", rv.url), CS_OK);
	rcv_stop(&rv);
	cfg.events_uri = url;
	/* One failed attempt per pass while nobody answers; the other waits its turn. */
	ck_assert_int_eq(events_push_run(sc, &cfg, kr, T0 + 6, &delivered), CS_OK);
	ck_assert_int_eq(q_int("SELECT sum(attempts) FROM events_outbox", NULL), 1);
	ck_assert_int_eq(events_push_run(sc, &cfg, kr, T0 + 7, &delivered), CS_OK);
	ck_assert_int_eq(q_int("SELECT sum(attempts) FROM events_outbox", NULL), 2);
	ck_assert_int_eq(q_int("SELECT count(*) FROM events_outbox WHERE attempts = 1", NULL), 2);
	free(k1);
	free(k2);
}
END_TEST

/* --- delivery state ---------------------------------------------------- */

START_TEST(test_events_list_and_json)
{
	struct rcv rv;
	struct store_event_row *v = NULL;
	size_t n = 9;
	int delivered = 0;
	char *k1 = approve("alice", "read", T0);
	char *k2 = approve("bob", "read", T0);
	ck_assert_int_eq(tu_revoke(sc, k1, 0, "admin:root", "x", T0 + 5, false), CS_OK);
	rcv_start(&rv, 0);
	cfg.events_uri = rv.url;
	ck_assert_int_eq(events_push_run(sc, &cfg, kr, T0 + 6, &delivered), CS_OK);
	ck_assert_int_eq(delivered, 1);
	rcv_stop(&rv);
	ck_assert_int_eq(tu_revoke(sc, k2, 0, "admin:root", NULL, T0 + 7, false), CS_OK);

	ck_assert_int_eq(events_list(sc, NULL, STORE_EVENTS_ANY, 0, 10, &v, &n), CS_OK);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(v[0].consent_id, k2);               /* newest first */
	ck_assert_str_eq(v[1].consent_id, k1);
	int64_t newest = v[0].id;
	json_t *j = events_row_json(&v[0]);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(json_string_value(json_object_get(j, "state")), "pending");
	ck_assert(json_is_null(json_object_get(j, "delivered_at")));
	ck_assert(json_is_null(json_object_get(j, "last_status")));
	ck_assert(json_is_null(json_object_get(j, "reason")));
	ck_assert_int_eq(json_integer_value(json_object_get(j, "next_attempt_at")), T0 + 7);
	json_decref(j);
	j = events_row_json(&v[1]);
	ck_assert_str_eq(json_string_value(json_object_get(j, "state")), "delivered");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "delivered_at")), T0 + 6);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "last_status")), 202);
	ck_assert(json_is_null(json_object_get(j, "next_attempt_at")));
	json_decref(j);
	store_event_rows_free(v, n);

	ck_assert_int_eq(events_list(sc, NULL, STORE_EVENTS_UNDELIVERED, 0, 10, &v, &n), CS_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0].consent_id, k2);
	store_event_rows_free(v, n);
	ck_assert_int_eq(events_list(sc, NULL, STORE_EVENTS_DELIVERED, 0, 10, &v, &n), CS_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0].consent_id, k1);
	store_event_rows_free(v, n);
	/* Keyset cursor and a page of one. */
	ck_assert_int_eq(events_list(sc, NULL, STORE_EVENTS_ANY, newest, 10, &v, &n), CS_OK);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0].consent_id, k1);
	store_event_rows_free(v, n);
	ck_assert_int_eq(events_list(sc, NULL, STORE_EVENTS_ANY, 0, 1, &v, &n), CS_OK);
	ck_assert_uint_eq(n, 1);
	store_event_rows_free(v, n);
	ck_assert_int_eq(events_list(sc, "nosuchconsent", STORE_EVENTS_ANY, 0, 10, &v, &n), CS_OK);
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(v);
	ck_assert_int_eq(events_list(sc, NULL, STORE_EVENTS__MAX, 0, 10, &v, &n), CS_EINVAL);
	int64_t w, f, d;
	ck_assert_int_eq(events_count(sc, &w, &f, &d), CS_OK);
	ck_assert_int_eq(w, 1);
	ck_assert_int_eq(f, 0);
	ck_assert_int_eq(d, 1);
	free(k1);
	free(k2);
}
END_TEST

/* --- httpc_post -------------------------------------------------------- */

START_TEST(test_events_httpc_post_refusals)
{
	struct httpc_response res;
	const char *bad[] = { "", "text", "/x", "x/", "a/b/c", "a/b; charset=utf-8",
		"a/b\r\nX-Evil: 1", "a b/c", NULL };
	for (size_t i = 0; bad[i] != NULL; i++) {
		ck_assert_msg(httpc_post("http://127.0.0.1:1/", bad[i], "x", 1, &res) == CS_EINVAL,
		    "accepted [%s]", bad[i]);
		httpc_response_clear(&res);
	}
	ck_assert_int_eq(httpc_post("http://example.com/", EVENTS_MEDIA_TYPE, "x", 1, &res),
	    CS_EINVAL);                                       /* plain http off loopback */
	httpc_response_clear(&res);
	ck_assert_int_eq(httpc_post("http://127.0.0.1:1/", EVENTS_MEDIA_TYPE, NULL, 0, &res),
	    CS_EINVAL);
	httpc_response_clear(&res);
	ck_assert_int_eq(httpc_post("http://127.0.0.1:1/", EVENTS_MEDIA_TYPE, "x", 1, NULL),
	    CS_EINVAL);
}
END_TEST

static Suite *events_suite(void)
{
	Suite *s = suite_create("events");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_events_enqueue_revoke);
	tcase_add_test(tc, test_events_enqueue_replace);
	tcase_add_test(tc, test_events_set_claims_exact);
	tcase_add_test(tc, test_events_retry_delay);
	tcase_add_test(tc, test_events_receiver_status);
	tcase_add_test(tc, test_events_push_delivers_signed_set);
	tcase_add_test(tc, test_events_push_retry_schedule);
	tcase_add_test(tc, test_events_push_no_uri_waits);
	tcase_add_test(tc, test_events_push_stops_when_unreachable);
	tcase_add_test(tc, test_events_list_and_json);
	tcase_add_test(tc, test_events_httpc_post_refusals);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	if (httpc_global_init() != CS_OK)
		return EXIT_FAILURE;
	return tu_run(events_suite());
}
