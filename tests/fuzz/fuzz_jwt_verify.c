/* fuzz_jwt_verify.c -- libFuzzer driver for jwt_verify: hostile compact JWS
 * strings against a keyring holding one fixed ES256 key (so seeds carrying its
 * kid reach cjose's import and verify).  It must never crash, leak or accept. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "buf.h"
#include "jwt.h"
#include "seal.h"
#include "store.h"

/* A throwaway test key: never used anywhere but this fuzzer. */
#define FUZZ_KID "OQmbliVl4zVCB_D_1-gZ9z_7s7JYHC_fz_QRVjYfndE"
static const char fuzz_jwk[] =
    "{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"" FUZZ_KID "\","
    "\"x\":\"SXQGlAzpjLhMLv0UrdDlMyCflJAc03csVi1Wri0rrkU\","
    "\"y\":\"UZNB_bg2zUSr9qvQR2QK2lhtbrBt6jY_LOQA-JY8iMM\","
    "\"d\":\"rLqevOhPjeuiWzU-BYgeeHUTgaa310yRolZnCto9Ef8\"}";

static struct keyring *ring;
static struct store *st;
static char dir[] = "/tmp/consentd-fuzz-XXXXXX";
static char dbpath[sizeof dir + 16];

static void cleanup(void)
{
	keyring_free(ring);
	store_close(st);
	unlink(dbpath);
	char p[sizeof dbpath + 8];
	if (str_fmt(p, sizeof p, "%s-wal", dbpath) == CS_OK)
		unlink(p);
	if (str_fmt(p, sizeof p, "%s-shm", dbpath) == CS_OK)
		unlink(p);
	rmdir(dir);
}

static void setup(void)
{
	struct master_key mk;
	struct store_key k;
	memset(&mk, 0, sizeof mk);
	memset(mk.bytes, 0x5a, sizeof mk.bytes);
	memcpy(mk.kid, "5a5a5a5a5a5a5a5a", MASTER_KID_LEN + 1);
	if (mkdtemp(dir) == NULL)
		abort();
	if (str_fmt(dbpath, sizeof dbpath, "%s/fuzz.db", dir) != CS_OK ||
	    store_open(dbpath, &st) != CS_OK)
		abort();
	memset(&k, 0, sizeof k);
	k.kid = (char *)FUZZ_KID;
	k.alg = (char *)"ES256";
	k.master_kid = mk.kid;
	if (seal(&mk, "signing-key", FUZZ_KID, strlen(FUZZ_KID), fuzz_jwk, strlen(fuzz_jwk),
	    &k.sealed, &k.sealed_len) != CS_OK ||
	    store_key_insert(store_conn(st), &k) != CS_OK)
		abort();
	free(k.sealed);
	if (keyring_load(store_conn(st), &mk, 1700000000, 300, &ring) != CS_OK)
		abort();
	if (strcmp(keyring_signing_kid(ring), FUZZ_KID) != 0)
		abort();
	atexit(cleanup);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (ring == NULL)
		setup();
	char *s = malloc(size + 1);
	if (s == NULL)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	json_t *claims = NULL;
	/* Both the typ we sign with and one that never matches. */
	if (jwt_verify(ring, "at+jwt", s, &claims) == CS_OK) {
		/* Only a token made with the fixed key can get here. */
		if (!json_is_object(claims))
			abort();
		json_decref(claims);
	}
	claims = NULL;
	if (jwt_verify(ring, "secevent+jwt", s, &claims) == CS_OK)
		json_decref(claims);
	free(s);
	return 0;
}
