/* test_mcp_state.c -- the gateway's sealed requestState (mcp_state.c): a
 * round trip, and every state that must fail closed. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include "b64.h"
#include "mcp_state.h"
#include "testutil.h"

static struct master_key mk, other;
static const char DIGEST[] = "n4bQgYhMfWWaL-qgxVrQFaO_TxsrC4Is0V1sFbDwCgg";

static void setup(void)
{
	memset(&mk, 0x42, sizeof mk.bytes);
	memset(&other, 0x43, sizeof other.bytes);
}

static struct mcp_state base(void)
{
	return (struct mcp_state){ .user_id = 7, .client_id = "https://client.example/c.json",
		.endpoint = "tracker", .tool = "close_issue", .digest = DIGEST,
		.kind = MCP_ASK_APPROVAL, .pending = "apr_0123456789abcdefghij", .expires_at = 1000 };
}

static enum mcp_state_verdict verdict_of(const struct master_key *k, const char *text,
    struct mcp_state want, int64_t now)
{
	struct mcp_state out;
	enum mcp_state_verdict v;
	memset(&out, 0, sizeof out);
	ck_assert_int_eq(mcp_state_open(k, text, &want, now, &out, &v), CS_OK);
	if (v == MCP_STATE_OK)
		mcp_state_clear(&out);
	else
		ck_assert_ptr_null(out.own);
	return v;
}

START_TEST(test_mcp_state_round_trip)
{
	struct mcp_state s = base(), out;
	char *text = NULL;
	enum mcp_state_verdict v;
	ck_assert_int_eq(mcp_state_seal(&mk, &s, &text), CS_OK);
	ck_assert(b64url_valid(text, strlen(text)));
	/* Nothing of it can be read without the key. */
	ck_assert_ptr_null(strstr(text, "close_issue"));
	ck_assert_int_eq(mcp_state_open(&mk, text, &s, 999, &out, &v), CS_OK);
	ck_assert_int_eq(v, MCP_STATE_OK);
	ck_assert_int_eq(out.kind, MCP_ASK_APPROVAL);
	ck_assert_str_eq(out.pending, "apr_0123456789abcdefghij");
	ck_assert_int_eq(out.expires_at, 1000);
	mcp_state_clear(&out);
	mcp_state_clear(NULL);
	/* Two seals of the same state differ (a fresh nonce each). */
	char *again = NULL;
	ck_assert_int_eq(mcp_state_seal(&mk, &s, &again), CS_OK);
	ck_assert_str_ne(text, again);
	free(again);
	free(text);
}
END_TEST

START_TEST(test_mcp_state_fails_closed)
{
	struct mcp_state s = base(), w;
	char *text = NULL;
	ck_assert_int_eq(mcp_state_seal(&mk, &s, &text), CS_OK);
	/* Expired (at its expiry, and after). */
	ck_assert_int_eq(verdict_of(&mk, text, s, 1000), MCP_STATE_EXPIRED);
	/* Another person, client, endpoint, tool, arguments. */
	w = base(); w.user_id = 8;
	ck_assert_int_eq(verdict_of(&mk, text, w, 10), MCP_STATE_OTHER_PERSON);
	w = base(); w.client_id = "https://client.example/d.json";
	ck_assert_int_eq(verdict_of(&mk, text, w, 10), MCP_STATE_OTHER_CLIENT);
	w = base(); w.endpoint = "wiki";
	ck_assert_int_eq(verdict_of(&mk, text, w, 10), MCP_STATE_OTHER_ENDPOINT);
	w = base(); w.tool = "create_issue";
	ck_assert_int_eq(verdict_of(&mk, text, w, 10), MCP_STATE_OTHER_TOOL);
	w = base(); w.digest = "x4bQgYhMfWWaL-qgxVrQFaO_TxsrC4Is0V1sFbDwCgg";
	ck_assert_int_eq(verdict_of(&mk, text, w, 10), MCP_STATE_OTHER_ARGUMENTS);
	/* Another master key. */
	ck_assert_int_eq(verdict_of(&other, text, s, 10), MCP_STATE_BROKEN);
	/* Every single character changed: never opens. */
	size_t n = strlen(text);
	for (size_t i = 0; i < n; i++) {
		char keep = text[i];
		text[i] = keep == 'A' ? 'B' : 'A';
		enum mcp_state_verdict v = verdict_of(&mk, text, s, 10);
		ck_assert_msg(v == MCP_STATE_BROKEN, "character %zu changed: verdict %d", i, v);
		text[i] = keep;
	}
	/* The last character's twin -- its unused low bit flipped, the same bytes
	 * to a lenient decoder: refused (one spelling per state).  Sealed texts
	 * whose length leaves no unused bits have no twin; try until one does. */
	static const char alphabet[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	for (int tries = 0; tries < 8; tries++) {
		struct mcp_state t = base();
		char *twin = NULL;
		t.pending = tries % 2 ? "apr_0123456789abcdefghijk" : "apr_0123456789abcdefghij";
		t.tool = tries < 2 ? "close_issue" : tries < 4 ? "close_issue2" : "close_issue_x";
		ck_assert_int_eq(mcp_state_seal(&mk, &t, &twin), CS_OK);
		size_t tn = strlen(twin);
		if (tn % 4 == 0) {
			free(twin);
			continue;
		}
		const char *at = strchr(alphabet, twin[tn - 1]);
		ck_assert_ptr_nonnull(at);
		ck_assert_int_eq(verdict_of(&mk, twin, t, 10), MCP_STATE_OK);
		twin[tn - 1] = alphabet[(at - alphabet) ^ 1];
		ck_assert_int_eq(verdict_of(&mk, twin, t, 10), MCP_STATE_BROKEN);
		free(twin);
		break;
	}
	/* Cut short, made longer, not base64url, empty, too long. */
	char *cut = strndup(text, n - 4);
	ck_assert_int_eq(verdict_of(&mk, cut, s, 10), MCP_STATE_BROKEN);
	free(cut);
	ck_assert_int_eq(verdict_of(&mk, "", s, 10), MCP_STATE_BROKEN);
	ck_assert_int_eq(verdict_of(&mk, "v1.eyJwIjp7InN0ZXAiOjF9fQ.3bBb", s, 10), MCP_STATE_BROKEN);
	char *big = malloc(MCP_STATE_MAX + 2);
	memset(big, 'A', MCP_STATE_MAX + 1);
	big[MCP_STATE_MAX + 1] = '\0';
	ck_assert_int_eq(verdict_of(&mk, big, s, 10), MCP_STATE_BROKEN);
	free(big);
	free(text);
	/* Missing fields are not sealed. */
	w = base(); w.pending = NULL;
	ck_assert_int_eq(mcp_state_seal(&mk, &w, &text), CS_EINVAL);
	w = base(); w.kind = MCP_ASK_NONE;
	ck_assert_int_eq(mcp_state_seal(&mk, &w, &text), CS_EINVAL);
	ck_assert_str_eq(mcp_state_verdict_text(MCP_STATE_OTHER_ARGUMENTS),
	    "the requestState was issued for other arguments");
}
END_TEST

static Suite *mcp_state_suite(void)
{
	Suite *s = suite_create("mcp_state");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_mcp_state_round_trip);
	tcase_add_test(tc, test_mcp_state_fails_closed);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run(mcp_state_suite());
}
