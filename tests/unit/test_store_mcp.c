/* test_store_mcp.c -- the MCP gateway's 2025-11-25 sessions and URL
 * elicitations (mcp_session.c over store_mcp.c, migration 0024): a session is
 * kept by the hash of its id and serves only its own person, client and
 * endpoint; an elicitation completes when its approval or consent request is
 * decided, and each completion is taken once, also by racing takers; the
 * janitor deletes both after their expiry.
 *
 * On both engines, as test_store.c: with CONSENTD_TEST_DATABASE_URL set to a
 * postgresql:// URL (scripts/run-store-pg.sh) every test runs on that
 * database, emptied before each; otherwise on a fresh SQLite file. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "janitor.h"
#include "mcp_session.h"
#include "session.h"
#include "store.h"
#include "store_approval.h"
#include "store_consent.h"
#include "store_mcp.h"
#include "store_user.h"
#include "testutil.h"
#include "tu_store.h"

#define T0 1700000000LL              /* "now" of the tests */
#define GRACE 100                    /* [retention] grace of the janitor test */
#define SID "9f1c2b7e-4d2a-4c1e-9d7b-2a5e8c3f6b10"

static struct mcp_who who(const char *endpoint, int64_t uid, const char *client)
{
	return (struct mcp_who){ .endpoint = endpoint, .user_id = uid, .client_id = client };
}

/* A consent of uid for client on the tracker resource (approvals need one). */
static void consent(struct store_conn *c, const char *id, int64_t uid, const char *client)
{
	ck_assert_int_eq(store_consent_insert(c, &(struct store_consent_row){ .id = (char *)id,
	    .user_id = uid, .agent = (char *)client, .resource = (char *)"tracker",
	    .granted = (char *)"issues:write", .declined = (char *)"", .created_at = T0,
	    .expires_at = T0 + 86400 }), CS_OK);
}

static void approval(struct store_conn *c, const char *id, const char *consent_id, int64_t uid,
    const char *digest)
{
	ck_assert_int_eq(store_approval_insert(c, &(struct store_approval_row){ .id = (char *)id,
	    .consent_id = (char *)consent_id, .user_id = uid, .agent = (char *)"client-a",
	    .resource = (char *)"tracker", .action = (char *)"create_issue",
	    .parameters = (char *)"{\"title\":\"x\"}", .digest = (char *)digest,
	    .status = (char *)"pending", .created_at = T0, .expires_at = T0 + 600,
	    .interval = 5 }), CS_OK);
}

static void creq(struct store_conn *c, const char *id, int64_t uid, const char *client)
{
	ck_assert_int_eq(store_creq_insert(c, &(struct store_creq_row){ .id = (char *)id,
	    .user_id = uid, .agent = (char *)client, .resource = (char *)"tracker",
	    .scopes = (char *)"issues:read", .pre_granted = (char *)"", .status = (char *)"pending",
	    .created_at = T0, .expires_at = T0 + 600, .interval = 5 }), CS_OK);
}

/* What take_done hands over at now for w's session sid: the ids, joined by
 * spaces, into out ("" when none). */
static void take(struct store_conn *c, const struct mcp_who *w, const char *sid, int64_t now,
    char *out, size_t outsz)
{
	unsigned char h[STORE_MCP_HASH_LEN];
	char **ids = NULL;
	size_t n = 99;
	ck_assert_int_eq(mcp_session_hash(sid, h), CS_OK);
	ck_assert_int_eq(mcp_elicitation_take_done(c, w, h, now, 16, &ids, &n), CS_OK);
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(out);
		snprintf(out + l, outsz - l, "%s%s", l ? " " : "", ids[i]);
	}
	store_mcp_ids_free(ids, n);
}

/* --- sessions ------------------------------------------------------------ */

/* A recorded session comes back for its own three with the capability it was
 * recorded with; its row holds the SHA-256 of the id; and (SQLite) the id
 * itself is nowhere in the database's files. */
START_TEST(test_store_mcp_session_round_trip)
{
	struct tu_store f;
	struct mcp_session s;
	enum mcp_session_outcome oc = MCP_SESSION__MAX;
	unsigned char h[32];
	tu_store_init(&f, T0);
	struct mcp_who a = who("tracker", f.alice, "client-a");
	ck_assert_int_eq(mcp_session_record(f.c, &a, SID, true, T0, &oc), CS_OK);
	ck_assert_int_eq(oc, MCP_SESSION_RECORDED);
	ck_assert_int_eq(mcp_session_find(f.c, &a, SID, T0 + 1, &s), CS_OK);
	ck_assert(s.url_elicitation);
	ck_assert_int_eq(s.expires_at, T0 + MCP_SESSION_IDLE);
	sha256_str(SID, h);
	ck_assert_mem_eq(s.hash, h, 32);
	/* Recorded again (a new initialize answered with the same id) without
	 * the capability: replaced. */
	ck_assert_int_eq(mcp_session_record(f.c, &a, SID, false, T0 + 2, &oc), CS_OK);
	ck_assert_int_eq(oc, MCP_SESSION_RECORDED);
	ck_assert_int_eq(mcp_session_find(f.c, &a, SID, T0 + 3, &s), CS_OK);
	ck_assert(!s.url_elicitation);
	store_close(f.s);
	f.s = NULL;
	if (tu_pg_url == NULL) {
		static const char *const files[] = { "consentd.db", "consentd.db-wal" };
		for (size_t i = 0; i < 2; i++) {
			char *p = tu_path(f.dir, files[i]);
			FILE *fp = fopen(p, "rb");
			free(p);
			if (fp == NULL)
				continue;
			static char data[4 << 20];
			size_t n = fread(data, 1, sizeof data, fp);
			fclose(fp);
			ck_assert_ptr_null(memmem(data, n, SID, strlen(SID)));
		}
	}
	tu_store_clear(&f);
}
END_TEST

/* SECURITY: a session id serves only the person, client and endpoint it was
 * recorded for; another person's initialize answered with the same id takes
 * nothing over, and ending it as someone else changes nothing. */
START_TEST(test_store_mcp_session_not_anothers)
{
	struct tu_store f;
	struct mcp_session s;
	enum mcp_session_outcome oc = MCP_SESSION__MAX;
	tu_store_init(&f, T0);
	struct mcp_who a = who("tracker", f.alice, "client-a");
	struct mcp_who b = who("tracker", f.bob, "client-a");
	struct mcp_who a_other_client = who("tracker", f.alice, "client-b");
	struct mcp_who a_other_endpoint = who("notes", f.alice, "client-a");
	ck_assert_int_eq(mcp_session_record(f.c, &a, SID, true, T0, &oc), CS_OK);
	ck_assert_int_eq(mcp_session_find(f.c, &b, SID, T0 + 1, &s), CS_ENOENT);
	ck_assert_int_eq(mcp_session_find(f.c, &a_other_client, SID, T0 + 1, &s), CS_ENOENT);
	ck_assert_int_eq(mcp_session_find(f.c, &a_other_endpoint, SID, T0 + 1, &s), CS_ENOENT);
	ck_assert_int_eq(mcp_session_record(f.c, &b, SID, false, T0 + 1, &oc), CS_OK);
	ck_assert_int_eq(oc, MCP_SESSION_TAKEN);
	ck_assert_int_eq(mcp_session_record(f.c, &a_other_client, SID, false, T0 + 1, &oc), CS_OK);
	ck_assert_int_eq(oc, MCP_SESSION_TAKEN);
	ck_assert_int_eq(mcp_session_end(f.c, &b, SID), CS_ENOENT);
	ck_assert_int_eq(mcp_session_end(f.c, &a_other_client, SID), CS_ENOENT);
	/* Alice's is untouched. */
	ck_assert_int_eq(mcp_session_find(f.c, &a, SID, T0 + 2, &s), CS_OK);
	ck_assert(s.url_elicitation);
	/* The same id on another endpoint is another session. */
	ck_assert_int_eq(mcp_session_record(f.c, &a_other_endpoint, SID, false, T0 + 2, &oc), CS_OK);
	ck_assert_int_eq(oc, MCP_SESSION_RECORDED);
	tu_store_clear(&f);
}
END_TEST

/* Ids outside 1..256 visible ASCII characters are refused when recorded and
 * find nothing. */
START_TEST(test_store_mcp_session_bad_ids)
{
	struct tu_store f;
	struct mcp_session s;
	enum mcp_session_outcome oc = MCP_SESSION__MAX;
	char longest[MCP_SESSION_ID_MAX + 2];
	tu_store_init(&f, T0);
	struct mcp_who a = who("tracker", f.alice, "client-a");
	memset(longest, 'a', sizeof longest - 1);
	longest[sizeof longest - 1] = '\0';
	const char *bad[] = { "", "a b", "a\tb", "a\x7f", "caf\xc3\xa9", longest, NULL };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_assert_msg(!mcp_session_id_valid(bad[i]), "bad id %zu accepted", i);
		ck_assert_int_eq(mcp_session_record(f.c, &a, bad[i], true, T0, &oc), CS_EINVAL);
		ck_assert_int_eq(mcp_session_find(f.c, &a, bad[i], T0, &s), CS_ENOENT);
	}
	longest[MCP_SESSION_ID_MAX] = '\0';          /* exactly the most */
	ck_assert(mcp_session_id_valid(longest));
	ck_assert_int_eq(mcp_session_record(f.c, &a, longest, true, T0, &oc), CS_OK);
	ck_assert_int_eq(mcp_session_find(f.c, &a, longest, T0, &s), CS_OK);
	tu_store_clear(&f);
}
END_TEST

/* A session ends MCP_SESSION_IDLE after its last use; a use
 * MCP_SESSION_TOUCH after the last move moves the end.  Once over, the id may
 * be recorded by another person, who inherits none of its elicitations. */
START_TEST(test_store_mcp_session_idle_expiry)
{
	struct tu_store f;
	struct mcp_session s;
	enum mcp_session_outcome oc = MCP_SESSION__MAX;
	char id[MCP_ELICITATION_ID_LEN + 1], got[256];
	tu_store_init(&f, T0);
	struct mcp_who a = who("tracker", f.alice, "client-a");
	struct mcp_who b = who("tracker", f.bob, "client-a");
	ck_assert_int_eq(mcp_session_record(f.c, &a, SID, true, T0, &oc), CS_OK);
	ck_assert_int_eq(mcp_session_find(f.c, &a, SID, T0 + MCP_SESSION_TOUCH - 1, &s), CS_OK);
	ck_assert_int_eq(s.expires_at, T0 + MCP_SESSION_IDLE);          /* not moved yet */
	ck_assert_int_eq(mcp_session_find(f.c, &a, SID, T0 + MCP_SESSION_TOUCH, &s), CS_OK);
	ck_assert_int_eq(s.expires_at, T0 + MCP_SESSION_TOUCH + MCP_SESSION_IDLE);
	int64_t end = s.expires_at;
	ck_assert_int_eq(mcp_session_find(f.c, &a, SID, end - 1, &s), CS_OK);
	ck_assert_int_eq(mcp_session_find(f.c, &a, SID, end + MCP_SESSION_IDLE, &s), CS_ENOENT);
	/* An elicitation of alice's, decided, then the id recorded for bob. */
	consent(f.c, "consent-a", f.alice, "client-a");
	approval(f.c, "approval-1", "consent-a", f.alice, "d1");
	ck_assert_int_eq(mcp_session_find(f.c, &a, SID, end - 10, &s), CS_OK);
	ck_assert_int_eq(mcp_elicitation_new(f.c, &a, &s, MCP_ELICIT_APPROVAL, "approval-1",
	    end + 3 * MCP_SESSION_IDLE, end - 10, id), CS_OK);
	ck_assert_int_eq(store_approval_set_status(f.c, "approval-1", "pending", "approved", T0 + 5),
	    CS_OK);
	int64_t later = end + 2 * MCP_SESSION_IDLE;
	ck_assert_int_eq(mcp_session_record(f.c, &b, SID, true, later, &oc), CS_OK);
	ck_assert_int_eq(oc, MCP_SESSION_RECORDED);
	take(f.c, &b, SID, later, got, sizeof got);
	ck_assert_str_eq(got, "");
	ck_assert_int_eq(mcp_session_find(f.c, &a, SID, later, &s), CS_ENOENT);
	tu_store_clear(&f);
}
END_TEST

/* Ending a session removes it and its elicitations; ending it again finds
 * nothing. */
START_TEST(test_store_mcp_session_end)
{
	struct tu_store f;
	struct mcp_session s;
	struct store_mcp_elicitation r;
	enum mcp_session_outcome oc = MCP_SESSION__MAX;
	char id[MCP_ELICITATION_ID_LEN + 1];
	tu_store_init(&f, T0);
	struct mcp_who a = who("tracker", f.alice, "client-a");
	ck_assert_int_eq(mcp_session_record(f.c, &a, SID, true, T0, &oc), CS_OK);
	ck_assert_int_eq(mcp_session_find(f.c, &a, SID, T0, &s), CS_OK);
	creq(f.c, "creq-1", f.alice, "client-a");
	ck_assert_int_eq(mcp_elicitation_new(f.c, &a, &s, MCP_ELICIT_CONSENT, "creq-1", T0 + 600,
	    T0, id), CS_OK);
	ck_assert_int_eq(store_mcp_elicitation_get(f.c, id, &r), CS_OK);
	store_mcp_elicitation_clear(&r);
	ck_assert_int_eq(mcp_session_end(f.c, &a, SID), CS_OK);
	ck_assert_int_eq(mcp_session_find(f.c, &a, SID, T0, &s), CS_ENOENT);
	ck_assert_int_eq(store_mcp_elicitation_get(f.c, id, &r), CS_ENOENT);
	ck_assert_int_eq(mcp_session_end(f.c, &a, SID), CS_ENOENT);
	tu_store_clear(&f);
}
END_TEST

/* --- elicitations -------------------------------------------------------- */

/* An approval's elicitation is taken once the approval is decided, and only
 * once; every column is as recorded. */
START_TEST(test_store_mcp_elicitation_approval_once)
{
	struct tu_store f;
	struct mcp_session s;
	struct store_mcp_elicitation r;
	enum mcp_session_outcome oc = MCP_SESSION__MAX;
	char id[MCP_ELICITATION_ID_LEN + 1], got[256];
	tu_store_init(&f, T0);
	struct mcp_who a = who("tracker", f.alice, "client-a");
	ck_assert_int_eq(mcp_session_record(f.c, &a, SID, true, T0, &oc), CS_OK);
	ck_assert_int_eq(mcp_session_find(f.c, &a, SID, T0, &s), CS_OK);
	consent(f.c, "consent-a", f.alice, "client-a");
	approval(f.c, "approval-1", "consent-a", f.alice, "d1");
	ck_assert_int_eq(mcp_elicitation_new(f.c, &a, &s, MCP_ELICIT_APPROVAL, "approval-1",
	    T0 + 600, T0, id), CS_OK);
	ck_assert_uint_eq(strlen(id), MCP_ELICITATION_ID_LEN);
	ck_assert_int_eq(store_mcp_elicitation_get(f.c, id, &r), CS_OK);
	ck_assert_str_eq(r.id, id);
	ck_assert_str_eq(r.endpoint, "tracker");
	ck_assert_str_eq(r.client_id, "client-a");
	ck_assert_str_eq(r.item_id, "approval-1");
	ck_assert_mem_eq(r.hash, s.hash, 32);
	ck_assert_int_eq(r.user_id, f.alice);
	ck_assert_int_eq(r.kind, STORE_MCP_APPROVAL);
	ck_assert_int_eq(r.created_at, T0);
	ck_assert_int_eq(r.expires_at, T0 + 600);
	ck_assert_int_eq(r.completed_at, 0);
	ck_assert_int_eq(r.notified_at, 0);
	store_mcp_elicitation_clear(&r);
	take(f.c, &a, SID, T0 + 1, got, sizeof got);
	ck_assert_str_eq(got, "");                   /* still pending */
	ck_assert_int_eq(store_approval_set_status(f.c, "approval-1", "pending", "approved", T0 + 5),
	    CS_OK);
	/* Not to another client of the same person, nor another person. */
	struct mcp_who b = who("tracker", f.bob, "client-a");
	struct mcp_who a2 = who("tracker", f.alice, "client-b");
	take(f.c, &b, SID, T0 + 6, got, sizeof got);
	ck_assert_str_eq(got, "");
	take(f.c, &a2, SID, T0 + 6, got, sizeof got);
	ck_assert_str_eq(got, "");
	take(f.c, &a, SID, T0 + 6, got, sizeof got);
	ck_assert_str_eq(got, id);
	take(f.c, &a, SID, T0 + 7, got, sizeof got);
	ck_assert_str_eq(got, "");                   /* once */
	ck_assert_int_eq(store_mcp_elicitation_get(f.c, id, &r), CS_OK);
	ck_assert_int_eq(r.completed_at, T0 + 6);
	ck_assert_int_eq(r.notified_at, T0 + 6);
	store_mcp_elicitation_clear(&r);
	tu_store_clear(&f);
}
END_TEST

/* A consent request's elicitation completes on any decision (a denial too);
 * an expired elicitation is never taken; bad arguments are refused. */
START_TEST(test_store_mcp_elicitation_consent_and_expiry)
{
	struct tu_store f;
	struct mcp_session s;
	enum mcp_session_outcome oc = MCP_SESSION__MAX;
	char id1[MCP_ELICITATION_ID_LEN + 1], id2[MCP_ELICITATION_ID_LEN + 1], got[256];
	tu_store_init(&f, T0);
	struct mcp_who a = who("tracker", f.alice, "client-a");
	ck_assert_int_eq(mcp_session_record(f.c, &a, SID, true, T0, &oc), CS_OK);
	ck_assert_int_eq(mcp_session_find(f.c, &a, SID, T0, &s), CS_OK);
	creq(f.c, "creq-1", f.alice, "client-a");
	ck_assert_int_eq(mcp_elicitation_new(f.c, &a, &s, MCP_ELICIT_CONSENT, "creq-1", T0 + 600,
	    T0, id1), CS_OK);
	ck_assert_int_eq(mcp_elicitation_new(f.c, &a, &s, MCP_ELICIT_CONSENT, "creq-1", T0 + 20,
	    T0, id2), CS_OK);
	ck_assert_str_ne(id1, id2);
	ck_assert_int_eq(store_creq_decide(f.c, "creq-1", "denied", T0 + 10, NULL), CS_OK);
	take(f.c, &a, SID, T0 + 30, got, sizeof got);  /* id2 expired at T0 + 20 */
	ck_assert_str_eq(got, id1);
	/* Refused: no item, expiry not after now, an unknown kind. */
	ck_assert_int_eq(mcp_elicitation_new(f.c, &a, &s, MCP_ELICIT_CONSENT, "", T0 + 600, T0, id2),
	    CS_EINVAL);
	ck_assert_int_eq(mcp_elicitation_new(f.c, &a, &s, MCP_ELICIT_CONSENT, "creq-1", T0, T0, id2),
	    CS_EINVAL);
	ck_assert_int_eq(mcp_elicitation_new(f.c, &a, &s, MCP_ELICIT__MAX, "creq-1", T0 + 600, T0,
	    id2), CS_EINVAL);
	tu_store_clear(&f);
}
END_TEST

/* SECURITY: racing takers (threads, each on its own connection -- on
 * PostgreSQL as two nodes would be) never take one completion twice, and
 * between them take all. */
#define RACERS 4
#define RACE_N 24

struct racer {
	struct store      *s;
	const struct mcp_who *w;
	pthread_barrier_t *go;
	char              *ids[RACE_N * 2];
	size_t             n;
	enum cs_err        e;
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	struct store_conn *c = store_conn(r->s);
	unsigned char h[STORE_MCP_HASH_LEN];
	if (c == NULL || mcp_session_hash(SID, h) != CS_OK) {
		r->e = CS_EDB;
		pthread_barrier_wait(r->go);
		return NULL;
	}
	pthread_barrier_wait(r->go);
	for (int round = 0; round < 8 && r->e == CS_OK; round++) {
		char **ids = NULL;
		size_t n = 0;
		r->e = mcp_elicitation_take_done(c, r->w, h, T0 + 50, 5, &ids, &n);
		for (size_t i = 0; i < n && r->n < RACE_N * 2; i++) {
			r->ids[r->n++] = ids[i];
			ids[i] = NULL;
		}
		store_mcp_ids_free(ids, n);
	}
	return NULL;
}

START_TEST(test_store_mcp_elicitation_race_once)
{
	struct tu_store f;
	struct mcp_session s;
	enum mcp_session_outcome oc = MCP_SESSION__MAX;
	static char ids[RACE_N][MCP_ELICITATION_ID_LEN + 1];
	static struct racer rs[RACERS];
	pthread_t th[RACERS];
	pthread_barrier_t go;
	tu_store_init(&f, T0);
	struct mcp_who a = who("tracker", f.alice, "client-a");
	ck_assert_int_eq(mcp_session_record(f.c, &a, SID, true, T0, &oc), CS_OK);
	ck_assert_int_eq(mcp_session_find(f.c, &a, SID, T0, &s), CS_OK);
	consent(f.c, "consent-a", f.alice, "client-a");
	for (int i = 0; i < RACE_N; i++) {
		char aid[32], dig[16];
		snprintf(aid, sizeof aid, "approval-%d", i);
		snprintf(dig, sizeof dig, "d%d", i);
		approval(f.c, aid, "consent-a", f.alice, dig);
		ck_assert_int_eq(mcp_elicitation_new(f.c, &a, &s, MCP_ELICIT_APPROVAL, aid, T0 + 600,
		    T0, ids[i]), CS_OK);
		ck_assert_int_eq(store_approval_set_status(f.c, aid, "pending",
		    i % 2 ? "denied" : "approved", T0 + 5), CS_OK);
	}
	ck_assert_int_eq(pthread_barrier_init(&go, NULL, RACERS), 0);
	for (int k = 0; k < RACERS; k++) {
		memset(&rs[k], 0, sizeof rs[k]);
		rs[k].s = f.s;
		rs[k].w = &a;
		rs[k].go = &go;
		ck_assert_int_eq(pthread_create(&th[k], NULL, racer_main, &rs[k]), 0);
	}
	for (int k = 0; k < RACERS; k++)
		pthread_join(th[k], NULL);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < RACE_N; i++) {
		int seen = 0;
		for (int k = 0; k < RACERS; k++)
			for (size_t j = 0; j < rs[k].n; j++)
				seen += strcmp(rs[k].ids[j], ids[i]) == 0;
		ck_assert_msg(seen == 1, "elicitation %d taken %d times", i, seen);
	}
	for (int k = 0; k < RACERS; k++) {
		ck_assert_msg(rs[k].e == CS_OK || rs[k].e == CS_EBUSY, "racer %d: %s", k,
		    cs_strerror(rs[k].e));
		for (size_t j = 0; j < rs[k].n; j++)
			free(rs[k].ids[j]);
	}
	tu_store_clear(&f);
}
END_TEST

/* The janitor deletes elicitations and sessions from expires_at + grace on,
 * and nothing before. */
START_TEST(test_store_mcp_janitor_purge)
{
	struct tu_store f;
	struct mcp_session s;
	struct store_mcp_elicitation r;
	struct janitor_stats st;
	struct config cfg;
	enum mcp_session_outcome oc = MCP_SESSION__MAX;
	char old[MCP_ELICITATION_ID_LEN + 1], live[MCP_ELICITATION_ID_LEN + 1];
	tu_store_init(&f, T0);
	memset(&cfg, 0, sizeof cfg);
	cfg.retention_batch_size = 500;
	cfg.retention_grace = GRACE;
	cfg.retention_revoked_consent_days = 90;
	struct mcp_who a = who("tracker", f.alice, "client-a");
	struct mcp_who b = who("tracker", f.bob, "client-a");
	ck_assert_int_eq(mcp_session_record(f.c, &a, SID, true, T0, &oc), CS_OK);
	ck_assert_int_eq(mcp_session_record(f.c, &b, "bob-session", true, T0 + 1000, &oc), CS_OK);
	ck_assert_int_eq(mcp_session_find(f.c, &a, SID, T0, &s), CS_OK);
	creq(f.c, "creq-1", f.alice, "client-a");
	ck_assert_int_eq(mcp_elicitation_new(f.c, &a, &s, MCP_ELICIT_CONSENT, "creq-1", T0 + 600,
	    T0, old), CS_OK);
	ck_assert_int_eq(mcp_elicitation_new(f.c, &a, &s, MCP_ELICIT_CONSENT, "creq-1", T0 + 601,
	    T0, live), CS_OK);
	/* At expiry + grace - 1 nothing goes. */
	ck_assert_int_eq(janitor_run(f.c, &cfg, T0 + 600 + GRACE - 1, &st), CS_OK);
	ck_assert_int_eq(st.removed[JANITOR_MCP_ELICITATIONS], 0);
	ck_assert_int_eq(janitor_run(f.c, &cfg, T0 + 600 + GRACE, &st), CS_OK);
	ck_assert_int_eq(st.removed[JANITOR_MCP_ELICITATIONS], 1);
	ck_assert_int_eq(store_mcp_elicitation_get(f.c, old, &r), CS_ENOENT);
	ck_assert_int_eq(store_mcp_elicitation_get(f.c, live, &r), CS_OK);
	store_mcp_elicitation_clear(&r);
	ck_assert_int_eq(st.removed[JANITOR_MCP_SESSIONS], 0);
	int64_t a_end = T0 + MCP_SESSION_IDLE;
	ck_assert_int_eq(janitor_run(f.c, &cfg, a_end + GRACE - 1, &st), CS_OK);
	ck_assert_int_eq(st.removed[JANITOR_MCP_SESSIONS], 0);
	ck_assert_int_eq(janitor_run(f.c, &cfg, a_end + GRACE, &st), CS_OK);
	ck_assert_int_eq(st.removed[JANITOR_MCP_SESSIONS], 1);     /* alice's, not bob's */
	ck_assert_int_eq(mcp_session_find(f.c, &b, "bob-session", a_end + GRACE, &s), CS_OK);
	tu_store_clear(&f);
}
END_TEST

static Suite *store_mcp_suite(void)
{
	Suite *s = suite_create(tu_pg_url != NULL ? "store_mcp (postgresql)" : "store_mcp (sqlite)");
	TCase *tc = tcase_create("sessions");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_store_mcp_session_round_trip);
	tcase_add_test(tc, test_store_mcp_session_not_anothers);
	tcase_add_test(tc, test_store_mcp_session_bad_ids);
	tcase_add_test(tc, test_store_mcp_session_idle_expiry);
	tcase_add_test(tc, test_store_mcp_session_end);
	suite_add_tcase(s, tc);
	tc = tcase_create("elicitations");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_store_mcp_elicitation_approval_once);
	tcase_add_test(tc, test_store_mcp_elicitation_consent_and_expiry);
	tcase_add_test(tc, test_store_mcp_elicitation_race_once);
	tcase_add_test(tc, test_store_mcp_janitor_purge);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_store_run(store_mcp_suite);
}
