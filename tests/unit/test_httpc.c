/* test_httpc.c -- the proxy's upstream client (httpc_request / streams) against
 * a loopback HTTP/1.1 server in a thread: a thread's curl handles are made
 * once and reused, and a reused handle carries nothing of the call before it
 * (no header, credential, method or body of another call). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"
#include "buf.h"
#include "httpc.h"

#define MAX_REQS 64
#define REQ_MAX 16384

/* --- a loopback server: records each request (head and body) as received --- */

static int listen_fd = -1;
static int port;
static pthread_t server_thread;
static atomic_int server_stop;
static pthread_mutex_t reqs_mu = PTHREAD_MUTEX_INITIALIZER;
static char reqs[MAX_REQS][REQ_MAX];
static size_t nreqs;
static int nconns;

/* The Content-Length of a request head, 0 without one. */
static size_t content_length(const char *head)
{
	const char *p = head;
	while ((p = strchr(p, '\n')) != NULL) {
		p++;
		if (strncasecmp(p, "Content-Length:", 15) == 0) {
			size_t n = 0;
			for (p += 15; *p == ' '; p++)
				;
			for (; *p >= '0' && *p <= '9'; p++)
				n = n * 10 + (size_t)(*p - '0');
			return n;
		}
	}
	return 0;
}

/* Serves one connection's requests until the client closes it. */
static void serve(int fd)
{
	char in[REQ_MAX];
	size_t have = 0;
	for (;;) {
		char *end;
		while ((end = memmem(in, have, "\r\n\r\n", 4)) == NULL) {
			struct pollfd p = { fd, POLLIN, 0 };
			if (atomic_load(&server_stop) || have == sizeof in - 1)
				return;
			if (poll(&p, 1, 100) <= 0)
				continue;
			ssize_t n = read(fd, in + have, sizeof in - 1 - have);
			if (n <= 0)
				return;
			have += (size_t)n;
		}
		size_t head = (size_t)(end - in) + 4;
		in[have] = '\0';
		size_t total = head + content_length(in);
		while (have < total && have < sizeof in - 1) {
			ssize_t n = read(fd, in + have, sizeof in - 1 - have);
			if (n <= 0)
				return;
			have += (size_t)n;
		}
		pthread_mutex_lock(&reqs_mu);
		if (nreqs < MAX_REQS) {
			memcpy(reqs[nreqs], in, total);
			reqs[nreqs][total] = '\0';
			nreqs++;
		}
		pthread_mutex_unlock(&reqs_mu);
		static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
		    "Content-Length: 2\r\n\r\n";
		bool is_head = strncmp(in, "HEAD ", 5) == 0;
		if (write(fd, ok, sizeof ok - 1) != (ssize_t)(sizeof ok - 1) ||
		    (!is_head && write(fd, "ok", 2) != 2))
			return;
		memmove(in, in + total, have - total);
		have -= total;
	}
}

static void *server_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&server_stop)) {
		struct pollfd p = { listen_fd, POLLIN, 0 };
		if (poll(&p, 1, 100) <= 0)
			continue;
		int fd = accept(listen_fd, NULL, NULL);
		if (fd < 0)
			continue;
		pthread_mutex_lock(&reqs_mu);
		nconns++;
		pthread_mutex_unlock(&reqs_mu);
		serve(fd);
		close(fd);
	}
	return NULL;
}

static void server_start(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof a;
	listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(listen_fd, 0);
	ck_assert_int_eq(bind(listen_fd, (struct sockaddr *)&a, sizeof a), 0);
	ck_assert_int_eq(listen(listen_fd, 8), 0);
	ck_assert_int_eq(getsockname(listen_fd, (struct sockaddr *)&a, &al), 0);
	port = ntohs(a.sin_port);
	nreqs = 0;
	nconns = 0;
	atomic_store(&server_stop, 0);
	ck_assert_int_eq(pthread_create(&server_thread, NULL, server_main, NULL), 0);
}

static void server_stop_join(void)
{
	atomic_store(&server_stop, 1);
	pthread_join(server_thread, NULL);
	close(listen_fd);
	listen_fd = -1;
}

/* One call to the server: its status and body. */
static void call(const char *method, const char *const *headers, const char *body)
{
	char url[64];
	struct httpc_reply res;
	ck_assert_int_eq(str_fmt(url, sizeof url, "http://127.0.0.1:%d/x", port), CS_OK);
	struct httpc_request rq = { method, url, headers, body, body ? strlen(body) : 0, 0, 5, 10, false };
	ck_assert_int_eq(httpc_request(&rq, &res), CS_OK);
	ck_assert_int_eq(res.status, 200);
	ck_assert_str_eq(res.body.data, strcmp(method, "HEAD") == 0 ? "" : "ok");
	httpc_reply_clear(&res);
}

/* The number of lines of request i that start with name (case-insensitive). */
static int lines_named(size_t i, const char *name)
{
	int n = 0;
	for (const char *p = reqs[i]; p != NULL && *p != '\0'; p = strchr(p, '\n')) {
		if (*p == '\n')
			p++;
		if (strncasecmp(p, name, strlen(name)) == 0)
			n++;
	}
	return n;
}

/* --- tests ------------------------------------------------------------------ */

START_TEST(test_httpc_stream_handles_reused)
{
	server_start();
	unsigned long made = httpc_handles_made();
	for (int i = 0; i < 20; i++)
		call("GET", (const char *const[]){ "Authorization: Bearer t", NULL }, NULL);
	/* This thread's first stream made a pair (none when an earlier test did);
	 * the others reused it -- no multi handle, so no wake-up socketpair, each. */
	ck_assert_uint_le(httpc_handles_made() - made, 1);
	server_stop_join();
	ck_assert_uint_eq(nreqs, 20);
	ck_assert_int_eq(nconns, 1);             /* and one connection for them all */
}
END_TEST

START_TEST(test_httpc_reused_handle_keeps_nothing_of_the_last_call)
{
	server_start();
	unsigned long made = httpc_handles_made();
	call("POST", (const char *const[]){ "Authorization: Bearer token-A-secret",
	    "If-None-Match: \"etag-a\"", "Content-Type: application/json", NULL }, "{\"a\":1}");
	call("HEAD", (const char *const[]){ "Authorization: Bearer token-H", NULL }, NULL);
	call("GET", (const char *const[]){ "Authorization: Bearer token-B", NULL }, NULL);
	call("GET", NULL, NULL);
	ck_assert_uint_le(httpc_handles_made() - made, 1);   /* the same handles each time */
	server_stop_join();
	ck_assert_uint_eq(nreqs, 4);
	ck_assert_msg(strncmp(reqs[0], "POST /x ", 8) == 0, "%s", reqs[0]);
	ck_assert_ptr_nonnull(strstr(reqs[0], "\r\n\r\n{\"a\":1}"));
	ck_assert_msg(strncmp(reqs[1], "HEAD /x ", 8) == 0, "%s", reqs[1]);
	/* SECURITY: each call carries its own token only, and nothing else of the
	 * calls before: no header, no method, no body. */
	for (size_t i = 1; i < 4; i++) {
		ck_assert_msg(strstr(reqs[i], "token-A") == NULL, "call %zu: %s", i, reqs[i]);
		ck_assert_int_eq(lines_named(i, "If-None-Match:"), 0);
		ck_assert_int_eq(lines_named(i, "Content-Type:"), 0);
		ck_assert_int_eq(lines_named(i, "Content-Length:"), 0);
		ck_assert_msg(strstr(reqs[i], "\r\n\r\n")[4] == '\0', "call %zu has a body: %s", i, reqs[i]);
	}
	ck_assert_msg(strncmp(reqs[2], "GET /x ", 7) == 0, "%s", reqs[2]);
	ck_assert_int_eq(lines_named(2, "Authorization:"), 1);
	ck_assert_ptr_nonnull(strstr(reqs[2], "\nAuthorization: Bearer token-B\r\n"));
	ck_assert_ptr_null(strstr(reqs[2], "token-H"));
	ck_assert_msg(strncmp(reqs[3], "GET /x ", 7) == 0, "%s", reqs[3]);
	ck_assert_int_eq(lines_named(3, "Authorization:"), 0);
	ck_assert_ptr_null(strstr(reqs[3], "token-"));
}
END_TEST

static void *three_calls(void *arg)
{
	unsigned long *made = arg;
	unsigned long m0 = httpc_handles_made();
	for (int i = 0; i < 3; i++)
		call("GET", NULL, NULL);
	*made = httpc_handles_made() - m0;
	return NULL;                             /* the thread's handles are freed as it ends */
}

START_TEST(test_httpc_handles_per_thread)
{
	pthread_t t;
	unsigned long made = 99;
	server_start();
	ck_assert_int_eq(pthread_create(&t, NULL, three_calls, &made), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(made, 1);              /* a new thread makes its own, once */
	server_stop_join();
	ck_assert_uint_eq(nreqs, 3);
}
END_TEST

static Suite *httpc_suite(void)
{
	Suite *s = suite_create("httpc");
	TCase *tc = tcase_create("streams");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_httpc_stream_handles_reused);
	tcase_add_test(tc, test_httpc_reused_handle_keeps_nothing_of_the_last_call);
	tcase_add_test(tc, test_httpc_handles_per_thread);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	if (httpc_global_init() != CS_OK)
		return EXIT_FAILURE;
	return tu_run(httpc_suite());
}
