/* fuzz_details.c -- libFuzzer target for authorization_details (flow F): the
 * input is parsed as authorization_details for the action "create_issue",
 * and also as any JSON value.  Besides not crashing or leaking, it checks the
 * promises made: a refusal leaves *parameters NULL with a reason; accepted
 * parameters are I-JSON, canonicalize within APPROVAL_MAX_CANONICAL, digest to
 * 43 base64url characters equal to SHA-256 of the canonical bytes; and
 * canonicalization is idempotent (parse + canonicalize the output again gives
 * the very same bytes), and so is the indented form shown to the person. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/sha.h>

#include "approval.h"
#include "jcs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) abort(); } while (0)

static const char B64U[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Canonicalizes v, then parses the result again (every number read as a
 * double, as any JSON reader may) and canonicalizes that: same bytes. */
static void check_canonical(json_t *v, size_t cap)
{
	struct buf a, b;
	json_error_t err;
	buf_init(&a, cap);
	buf_init(&b, cap);
	enum cs_err e = jcs_canonicalize(v, &a);
	if (e == CS_OK) {
		CHECK(a.data != NULL && strlen(a.data) == a.len);
		json_t *w = json_loadb(a.data, a.len,
		    JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &err);
		CHECK(w != NULL);
		CHECK(jcs_canonicalize(w, &b) == CS_OK);
		CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
		/* Without the double reading, integers keep their value too. */
		json_t *x = json_loadb(a.data, a.len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);
		if (x != NULL) {
			buf_reset(&b);
			if (jcs_ijson_check(x, NULL, 0) == CS_OK) {
				CHECK(jcs_canonicalize(x, &b) == CS_OK);
				CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
			}
			json_decref(x);
		}
		json_decref(w);
		/* The form shown to the person says the same: re-read, canonical again. */
		struct buf pretty;
		buf_init(&pretty, 8 * cap);
		if (jcs_pretty(a.data, &pretty) == CS_OK) {
			w = json_loadb(pretty.data, pretty.len,
			    JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &err);
			CHECK(w != NULL);
			buf_reset(&b);
			CHECK(jcs_canonicalize(w, &b) == CS_OK);
			CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
			json_decref(w);
		}
		buf_clear(&pretty);
		/* The digest is SHA-256 of exactly these bytes. */
		char dg[APPROVAL_DIGEST_LEN + 1], want[APPROVAL_DIGEST_LEN + 1];
		unsigned char h[SHA256_DIGEST_LENGTH];
		CHECK(approval_digest(v, dg) == CS_OK);
		CHECK(strlen(dg) == APPROVAL_DIGEST_LEN && strspn(dg, B64U) == APPROVAL_DIGEST_LEN);
		SHA256((const unsigned char *)a.data, a.len, h);
		size_t o = 0;
		for (size_t i = 0; i < sizeof h; i += 3) {
			unsigned n = (unsigned)h[i] << 16 | (i + 1 < sizeof h ? (unsigned)h[i + 1] << 8 : 0) |
			    (i + 2 < sizeof h ? h[i + 2] : 0);
			for (int k = 3; k >= 0 && o < APPROVAL_DIGEST_LEN; k--)
				want[o++] = B64U[(n >> (6 * k)) & 63];
		}
		want[o] = '\0';
		CHECK(strcmp(dg, want) == 0);
	} else {
		/* Refused: nothing written. */
		CHECK(a.len == 0);
	}
	buf_clear(&a);
	buf_clear(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *p = NULL, *v;
	json_error_t err;
	char why[160];
	char *t;

	if (size > 2 * APPROVAL_MAX_DETAILS)
		return 0;
	if ((t = malloc(size + 1)) == NULL)
		return 0;
	memcpy(t, data, size);
	t[size] = '\0';

	/* As authorization_details. */
	why[0] = '\0';
	if (approval_parse_details(t, "create_issue", &p, why, sizeof why) == CS_OK) {
		CHECK(p != NULL);
		CHECK(strlen(t) <= APPROVAL_MAX_DETAILS);
		CHECK(jcs_ijson_check(p, NULL, 0) == CS_OK);
		struct buf c;
		buf_init(&c, APPROVAL_MAX_CANONICAL);
		CHECK(jcs_canonicalize(p, &c) == CS_OK);   /* the promised fit */
		buf_clear(&c);
		check_canonical(p, APPROVAL_MAX_CANONICAL);
		json_decref(p);
	} else {
		CHECK(p == NULL);
		CHECK(why[0] != '\0');
	}

	/* As any JSON value: the canonicalizer on its own. */
	v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);
	if (v != NULL) {
		bool ok = jcs_ijson_check(v, why, sizeof why) == CS_OK;
		struct buf c;
		buf_init(&c, 8 * APPROVAL_MAX_CANONICAL);
		enum cs_err e = jcs_canonicalize(v, &c);
		/* Whatever is I-JSON canonicalizes (given room); what is not, does not. */
		CHECK(ok ? (e == CS_OK || e == CS_ETOOBIG) : e != CS_OK);
		buf_clear(&c);
		if (ok)
			check_canonical(v, 8 * APPROVAL_MAX_CANONICAL);
		json_decref(v);
	}
	free(t);
	return 0;
}
