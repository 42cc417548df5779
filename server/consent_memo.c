/* consent_memo.c -- a few live consents per thread (consent_memo.h says why
 * a remembered one is only a hint).  Each thread has its own slots, so no
 * lock; a thread's slots are freed when it ends. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "consent_memo.h"

struct slot {
	char   *key;                      /* issuer NUL subject NUL agent NUL resource NUL */
	size_t  keylen;
	int64_t at;                       /* when it was put */
	struct store_consent_row row;     /* row.block holds its strings */
};

struct memo {
	struct slot s[CONSENT_MEMO_SLOTS];
	unsigned    next;                 /* the slot the next new entry takes */
};

static pthread_key_t memo_key;
static pthread_once_t memo_once = PTHREAD_ONCE_INIT;
static bool memo_key_ok;

static void slot_clear(struct slot *s)
{
	free(s->key);
	store_consent_row_clear(&s->row);
	memset(s, 0, sizeof *s);
}

static void memo_free(void *p)
{
	struct memo *m = p;
	for (size_t i = 0; i < CONSENT_MEMO_SLOTS; i++)
		slot_clear(&m->s[i]);
	free(m);
}

static void memo_init(void)
{
	memo_key_ok = pthread_key_create(&memo_key, memo_free) == 0;
}

static struct memo *memo_of_thread(bool create)
{
	(void)pthread_once(&memo_once, memo_init);
	if (!memo_key_ok)
		return NULL;
	struct memo *m = pthread_getspecific(memo_key);
	if (m == NULL && create && (m = calloc(1, sizeof *m)) != NULL &&
	    pthread_setspecific(memo_key, m) != 0) {
		free(m);
		m = NULL;
	}
	return m;
}

/* The key's bytes in buf (NULL: only counted); its length, 0 when a part is
 * missing. */
static size_t key_bytes(const struct consent_memo_key *k, char *buf)
{
	const char *part[4] = { k->issuer, k->subject, k->agent, k->resource };
	size_t n = 0;
	for (size_t i = 0; i < 4; i++) {
		if (part[i] == NULL)
			return 0;
		size_t len = strlen(part[i]) + 1;
		if (buf != NULL)
			memcpy(buf + n, part[i], len);
		n += len;
	}
	return n;
}

static struct slot *find(struct memo *m, const struct consent_memo_key *k)
{
	size_t n = key_bytes(k, NULL);
	if (m == NULL || n == 0 || n > 4096)
		return NULL;
	char buf[4096];
	(void)key_bytes(k, buf);
	for (size_t i = 0; i < CONSENT_MEMO_SLOTS; i++)
		if (m->s[i].key != NULL && m->s[i].keylen == n && memcmp(m->s[i].key, buf, n) == 0)
			return &m->s[i];
	return NULL;
}

/* A copy of r whose strings live in one new block, as the store's rows. */
static bool row_copy(const struct store_consent_row *r, struct store_consent_row *out)
{
	char *const *src[] = { &r->id, &r->subject, &r->agent, &r->resource, &r->granted,
		&r->declined, &r->revoked_by, &r->revoke_reason, &r->request_id,
		&r->reconnect_reason, &r->granted_by };
	char **dst[] = { &out->id, &out->subject, &out->agent, &out->resource, &out->granted,
		&out->declined, &out->revoked_by, &out->revoke_reason, &out->request_id,
		&out->reconnect_reason, &out->granted_by };
	size_t total = 0, at = 0;
	for (size_t i = 0; i < sizeof src / sizeof src[0]; i++)
		total += *src[i] != NULL ? strlen(*src[i]) + 1 : 0;
	*out = *r;
	if ((out->block = malloc(total > 0 ? total : 1)) == NULL) {
		memset(out, 0, sizeof *out);
		return false;
	}
	for (size_t i = 0; i < sizeof src / sizeof src[0]; i++) {
		if (*src[i] == NULL) {
			*dst[i] = NULL;
			continue;
		}
		size_t len = strlen(*src[i]) + 1;
		memcpy(out->block + at, *src[i], len);
		*dst[i] = out->block + at;
		at += len;
	}
	return true;
}

bool consent_memo_get(const struct consent_memo_key *key, int64_t now,
    struct store_consent_row *out)
{
	struct slot *s = find(memo_of_thread(false), key);
	if (s == NULL)
		return false;
	if (now < s->at || now - s->at >= CONSENT_MEMO_TTL) {
		slot_clear(s);
		return false;
	}
	return row_copy(&s->row, out);
}

void consent_memo_put(const struct consent_memo_key *key, const struct store_consent_row *r,
    int64_t now)
{
	struct memo *m = memo_of_thread(true);
	size_t n = key_bytes(key, NULL);
	if (m == NULL || n == 0 || n > 4096)
		return;
	struct slot *s = find(m, key);
	if (s == NULL) {
		s = &m->s[m->next];
		m->next = (m->next + 1) % CONSENT_MEMO_SLOTS;
	}
	slot_clear(s);
	if ((s->key = malloc(n)) == NULL)
		return;
	(void)key_bytes(key, s->key);
	if (!row_copy(r, &s->row)) {
		slot_clear(s);
		return;
	}
	s->keylen = n;
	s->at = now;
}

void consent_memo_forget(const struct consent_memo_key *key)
{
	struct slot *s = find(memo_of_thread(false), key);
	if (s != NULL)
		slot_clear(s);
}

void consent_memo_clear(void)
{
	struct memo *m = memo_of_thread(false);
	if (m != NULL)
		for (size_t i = 0; i < CONSENT_MEMO_SLOTS; i++)
			slot_clear(&m->s[i]);
}
