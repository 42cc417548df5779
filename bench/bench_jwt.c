/* bench_jwt.c -- ES256 sign and verify rate through jwt.c with the keyring's
 * cached cjose keys (a temp database, a fixed master key).  Built by
 * `make build/bench_jwt`; `make bench` runs it first.  Its rates move with the
 * machine's load (session 17 read 30-33 k signs/s loaded and 41-43 k quiet, the same
 * code): compare builds in the same minute.
 * It must never be used with a real master key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "jwt.h"
#include "seal.h"
#include "store.h"

#define OPS 20000

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void)
{
	char dir[] = "/tmp/consentd-bench-XXXXXX", db[64], cmd[128];
	struct master_key mk;
	struct store *s = NULL;
	struct keyring *kr = NULL;
	char **toks = calloc(OPS, sizeof *toks);

	if (toks == NULL || mkdtemp(dir) == NULL)
		return 1;
	snprintf(db, sizeof db, "%s/bench.db", dir);
	memset(&mk, 0, sizeof mk);
	memset(mk.bytes, 0x42, sizeof mk.bytes);
	memcpy(mk.kid, "4242424242424242", MASTER_KID_LEN + 1);
	if (store_open(db, &s) != CS_OK || keyring_load(store_conn(s), &mk, time(NULL), 300, &kr) != CS_OK)
		return 1;
	json_t *claims = json_pack("{s:s, s:s, s:s, s:{s:s}, s:s, s:I, s:I, s:s}",
	    "iss", "https://consent.example.com", "sub", "user-1", "aud", "agent-gateway",
	    "act", "sub", "coder", "scope", "notes:read notes:write",
	    "iat", (json_int_t)1700000000, "exp", (json_int_t)1700000300,
	    "jti", "0123456789abcdef0123456789abcdef");

	double t0 = now_s();
	for (int i = 0; i < OPS; i++)
		if (jwt_sign(kr, "at+jwt", claims, &toks[i]) != CS_OK)
			return 1;
	double t1 = now_s();
	for (int i = 0; i < OPS; i++) {
		json_t *c = NULL;
		if (jwt_verify(kr, "at+jwt", toks[i], &c) != CS_OK)
			return 1;
		json_decref(c);
	}
	double t2 = now_s();
	printf("ES256 sign:   %d ops in %.3f s = %.0f ops/s (one thread)\n", OPS, t1 - t0, OPS / (t1 - t0));
	printf("ES256 verify: %d ops in %.3f s = %.0f ops/s (one thread)\n", OPS, t2 - t1, OPS / (t2 - t1));
	printf("token length: %zu bytes\n", strlen(toks[0]));

	for (int i = 0; i < OPS; i++)
		free(toks[i]);
	free(toks);
	json_decref(claims);
	keyring_free(kr);
	store_close(s);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : 1;
}
