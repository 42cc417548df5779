/* test_vault_connect.c -- connecting a provider (flows B + D): the authorize
 * URL, the callback's bad states and outcomes, narrowing, and the record that
 * moves over, against the fixture of tu_vault.h.  Attacker cases first-class:
 * replayed and misrouted callbacks, another session, a wrong issuer,
 * providers that grant too much, requests that change meanwhile. */
#include "tu_vault.h"

/* --- begin -------------------------------------------------------------- */

/* The github resource as preset on the canned provider's /authorize and /token. */
static void as_preset(enum config_preset preset)
{
	static char a[128], tk[128];
	vault_free(v);
	ck_assert_int_eq(str_fmt(a, sizeof a, "%s/authorize", sv.base), CS_OK);
	ck_assert_int_eq(str_fmt(tk, sizeof tk, "%s/token", sv.base), CS_OK);
	resources[0].provider_issuer = NULL;
	resources[0].preset = preset;
	resources[0].provider_authorization_endpoint = a;
	resources[0].provider_token_endpoint = tk;
	ck_assert_int_eq(vault_new(&cfg, &mk, &v), CS_OK);
}

/* The authorize URL of a fresh request for issues:read in the current preset. */
static char *preset_authorize_url(const char *sub)
{
	char *rid = request(sub, "coder", "github", "issues:read", NOW);
	struct consent_decision d = decision("issues:read");
	struct vault_begin b = { NULL, NULL, CONSENT_DECIDED };
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(begin_as(rid, uid(sub), &d, NOW, &b), CS_OK);
	char *u = strdup(b.authorize_url);
	vault_begin_clear(&b);
	scope_set_clear(&d.selected);
	free(rid);
	return u;
}

static void ck_param(const char *url, const char *name, const char *want)
{
	char *p = url_param(url, name);
	if (want == NULL)
		ck_assert_msg(p == NULL, "%s present in %s", name, url);
	else
		ck_assert_msg(p != NULL && strcmp(p, want) == 0, "%s: %s in %s", name, p ? p : "-", url);
	free(p);
}

START_TEST(test_vault_begin_authorize_url_presets)
{
	/* Slack: user tokens, comma-separated scopes. */
	as_preset(PRESET_SLACK);
	char *u = preset_authorize_url("alice");
	ck_param(u, "user_scope", "issues:read,repo");
	ck_param(u, "scope", NULL);
	ck_param(u, "code_challenge_method", "S256");
	free(u);
	/* Google: offline access, and consent asked again to get a refresh token. */
	as_preset(PRESET_GOOGLE);
	u = preset_authorize_url("bob");
	ck_param(u, "scope", "issues:read repo");
	ck_param(u, "access_type", "offline");
	ck_param(u, "prompt", "consent");
	free(u);
	/* Atlassian: offline_access, and the API's audience. */
	as_preset(PRESET_ATLASSIAN);
	u = preset_authorize_url("carol");
	ck_param(u, "scope", "issues:read repo offline_access");
	ck_param(u, "audience", "api.atlassian.com");
	ck_param(u, "prompt", "consent");
	free(u);
	/* Microsoft: offline_access only. */
	as_preset(PRESET_MICROSOFT);
	u = preset_authorize_url("dave");
	ck_param(u, "scope", "issues:read repo offline_access");
	ck_param(u, "prompt", NULL);
	free(u);
}
END_TEST

START_TEST(test_vault_connect_microsoft_extra_scopes)
{
	/* Microsoft answers with openid profile email offline_access besides the
	 * API's scopes: the connection is exactly what was asked, not "too much". */
	as_preset(PRESET_MICROSOFT);
	srv_set_tokens("AT-secret-1", "RT-secret-1", "openid issues:read repo profile email offline_access",
	    3600);
	char *kid = connect_alice(NOW);
	char *ps = q_text("SELECT provider_scopes FROM vault_records WHERE consent_id = ?1", kid);
	ck_assert_str_eq(ps, "issues:read repo");
	free(ps);
	free(kid);
}
END_TEST

START_TEST(test_vault_begin_authorize_url)
{
	char *rid = request("alice", "coder", "github", "issues:read issues:write", NOW);
	struct consent_decision d = decision("issues:read issues:write");
	struct vault_begin b = { NULL, NULL, CONSENT_DECIDED };
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(begin_as(rid, uid("alice"), &d, NOW, &b),
	    CS_OK);
	ck_assert_ptr_nonnull(b.authorize_url);
	ck_assert_ptr_null(b.consent_id);
	char want_prefix[128];
	snprintf(want_prefix, sizeof want_prefix, "%s/authorize?", sv.base);
	ck_assert_int_eq(strncmp(b.authorize_url, want_prefix, strlen(want_prefix)), 0);
	char *p;
	ck_assert_str_eq((p = url_param(b.authorize_url, "response_type")), "code");
	free(p);
	ck_assert_str_eq((p = url_param(b.authorize_url, "client_id")), "consentd");
	free(p);
	ck_assert_str_eq((p = url_param(b.authorize_url, "redirect_uri")),
	    PUBLIC_URL "/oauth/callback/github");
	free(p);
	ck_assert_str_eq((p = url_param(b.authorize_url, "scope")), "issues:read issues:write repo");
	free(p);
	ck_assert_str_eq((p = url_param(b.authorize_url, "code_challenge_method")), "S256");
	free(p);
	char *state = url_param(b.authorize_url, "state");
	char *chal = url_param(b.authorize_url, "code_challenge");
	ck_assert_uint_eq(strlen(state), 43);
	/* The stored state: hash only, the verifier matching the challenge. */
	unsigned char h[32];
	sha256_str(state, h);
	sqlite3_stmt *s = NULL;
	ck_assert_int_eq(sqlite3_prepare_v2(raw, "SELECT request_id, resource, selected, "
	    "provider_scopes, expires_at, code_verifier, provider_issuer, duration, user_id "
	    "FROM vault_connects WHERE state_hash = ?1", -1, &s, NULL), SQLITE_OK);
	sqlite3_bind_blob(s, 1, h, 32, SQLITE_TRANSIENT);
	ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
	ck_assert_str_eq((const char *)sqlite3_column_text(s, 0), rid);
	ck_assert_str_eq((const char *)sqlite3_column_text(s, 1), "github");
	ck_assert_str_eq((const char *)sqlite3_column_text(s, 2), "issues:read issues:write");
	ck_assert_str_eq((const char *)sqlite3_column_text(s, 3), "issues:read issues:write repo");
	ck_assert_int_eq(sqlite3_column_int64(s, 4), NOW + VAULT_CONNECT_TTL);
	char *want_chal = b64url_sha256((const char *)sqlite3_column_text(s, 5));
	ck_assert_str_eq(chal, want_chal);
	ck_assert_str_eq((const char *)sqlite3_column_text(s, 6), sv.base);
	ck_assert_int_eq(sqlite3_column_int64(s, 7), 86400);
	ck_assert_int_eq(sqlite3_column_int64(s, 8), uid("alice"));
	sqlite3_finalize(s);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_connects WHERE state_hash = "
	    "CAST(?1 AS BLOB)", state), 0);            /* never in clear */
	/* Nothing else changed: no consent, the request still pending. */
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 0);
	char *status = q_text("SELECT status FROM consent_requests WHERE id = ?1", rid);
	ck_assert_str_eq(status, "pending");
	free(status);
	free(want_chal);
	free(state);
	free(chal);
	vault_begin_clear(&b);
	scope_set_clear(&d.selected);
	free(rid);
}
END_TEST

START_TEST(test_vault_begin_refuses)
{
	char *rid = request("alice", "coder", "github", "issues:read", NOW);
	free(request("bob", "coder", "github", "issues:read", NOW));   /* makes bob */
	struct consent_decision d = decision("issues:read");
	struct vault_begin b = { NULL, NULL, CONSENT_DECIDED };
	/* Another person. */
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(begin_as(rid, uid("bob"), &d, NOW, &b), CS_OK);
	ck_assert_int_eq(b.outcome, CONSENT_DECIDE_NOT_YOURS);
	/* A selection outside the request, a bad duration, an expired request. */
	scope_set_clear(&d.selected);
	d.selected = set("issues:write");
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(begin_as(rid, uid("alice"), &d, NOW, &b), CS_OK);
	ck_assert_int_eq(b.outcome, CONSENT_DECIDE_INVALID);
	scope_set_clear(&d.selected);
	d.selected = set("issues:read");
	d.duration = 86401;
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(begin_as(rid, uid("alice"), &d, NOW, &b), CS_OK);
	ck_assert_int_eq(b.outcome, CONSENT_DECIDE_INVALID);
	d.duration = 3600;
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(begin_as(rid, uid("alice"), &d, NOW + 600, &b), CS_OK);
	ck_assert_int_eq(b.outcome, CONSENT_DECIDE_CLOSED);
	tu_decision_version(sc, "nope", &d);
	ck_assert_int_eq(begin_as("nope", uid("alice"), &d, NOW, &b), CS_ENOENT);
	ck_assert_ptr_null(b.authorize_url);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_connects", NULL), 0);
	scope_set_clear(&d.selected);
	free(rid);
}
END_TEST

/* --- finish: bad states ------------------------------------------------- */

START_TEST(test_vault_finish_bad_state)
{
	struct vault_finish f;
	char *rid = request("alice", "coder", "github", "issues:read", NOW);
	/* Unknown and absent state. */
	ck_assert_int_eq(finish_full("github", "no-such-state", sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_BAD_STATE);
	ck_assert_ptr_nonnull(f.why);
	ck_assert_ptr_null(f.consent_id);
	vault_finish_clear(&f);
	ck_assert_int_eq(finish_full("github", NULL, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_BAD_STATE);
	vault_finish_clear(&f);

	/* Another session: refused, and the state is spent. */
	char *state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH_OTHER, "alice", NOW, &f),
	    VAULT_BAD_STATE);
	vault_finish_clear(&f);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_BAD_STATE);
	vault_finish_clear(&f);
	free(state);

	/* An answer for github arriving at gitlab's redirect URI. */
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("gitlab", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_BAD_STATE);
	vault_finish_clear(&f);
	free(state);

	/* iss: required when the provider advertises RFC 9207, exact. */
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, "https://evil.test", NULL, SH, "alice", NOW, &f),
	    VAULT_BAD_STATE);
	ck_assert_str_eq(f.why, "The answer did not come from the expected provider.");
	vault_finish_clear(&f);
	free(state);
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, NULL, NULL, SH, "alice", NOW, &f),
	    VAULT_BAD_STATE);
	vault_finish_clear(&f);
	free(state);
	/* iss is checked before the error is believed. */
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, "https://evil.test", "access_denied", SH,
	    "alice", NOW, &f), VAULT_BAD_STATE);
	vault_finish_clear(&f);
	free(state);

	/* Expired. */
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice",
	    NOW + VAULT_CONNECT_TTL, &f), VAULT_BAD_STATE);
	vault_finish_clear(&f);
	free(state);

	/* Another user in the right session (cannot happen, refused anyway). */
	state = begin(rid, "alice", "issues:read", NOW);
	free(request("bob", "coder", "github", "issues:read", NOW));
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "bob", NOW, &f),
	    VAULT_BAD_STATE);
	vault_finish_clear(&f);
	free(state);

	/* Nothing was exchanged, nothing went live. */
	pthread_mutex_lock(&sv.mu);
	ck_assert_str_eq(sv.last_code_req, "");
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records", NULL), 0);
	ck_assert_int_ge(audits("vault.connect.failed"), 8);

	/* A used state is spent: replay after success. */
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_CONNECTED);
	vault_finish_clear(&f);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_BAD_STATE);
	vault_finish_clear(&f);
	free(state);
	free(rid);
}
END_TEST

START_TEST(test_vault_finish_iss_optional_when_not_advertised)
{
	struct vault_finish f;
	sv.iss_supported = 0;
	char *rid = request("alice", "coder", "github", "issues:read", NOW);
	/* A fresh vault: its provider discovers the metadata without RFC 9207. */
	vault_free(v);
	ck_assert_int_eq(vault_new(&cfg, &mk, &v), CS_OK);
	char *state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, "https://evil.test", NULL, SH, "alice", NOW, &f),
	    VAULT_BAD_STATE);                         /* present: must still match */
	vault_finish_clear(&f);
	free(state);
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, NULL, NULL, SH, "alice", NOW, &f),
	    VAULT_CONNECTED);
	vault_finish_clear(&f);
	free(state);
	free(rid);
}
END_TEST

/* --- finish: outcomes --------------------------------------------------- */

START_TEST(test_vault_finish_connected)
{
	char *kid = connect_alice(NOW);
	struct consent k = load(kid, NOW);
	ck_assert_str_eq(k.state, "live");
	ck_set(&k.granted, "issues:read");
	consent_clear(&k);
	char *ps = q_text("SELECT provider_scopes FROM vault_records WHERE consent_id = ?1", kid);
	ck_assert_str_eq(ps, "issues:read repo");
	free(ps);
	ck_assert_int_eq(q_int("SELECT access_expires_at FROM vault_records WHERE consent_id = ?1",
	    kid), NOW + 3600);
	char *mkid = q_text("SELECT master_kid FROM vault_records WHERE consent_id = ?1", kid);
	ck_assert_str_eq(mkid, mk.kid);
	free(mkid);
	ck_assert(vault_has_record(sc, kid));
	ck_assert(!vault_has_record(sc, "nope"));
	/* The code exchange carried the verifier and the redirect URI. */
	pthread_mutex_lock(&sv.mu);
	ck_assert_ptr_nonnull(strstr(sv.last_code_req, "code=code-1"));
	ck_assert_ptr_nonnull(strstr(sv.last_code_req, "code_verifier="));
	ck_assert_ptr_nonnull(strstr(sv.last_code_req, "oauth%2Fcallback%2Fgithub"));
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(audits("vault.connected"), 1);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_connects", NULL), 0);
	/* Flow A now grants. */
	ck_assert_int_eq(exchange("alice", "coder", "github", "issues:read", NOW + 1), CONSENT_GRANT);
	ck_no_plaintext();
	free(kid);
}
END_TEST

START_TEST(test_vault_finish_narrowed)
{
	struct vault_finish f;
	srv_set_tokens("AT-secret-1", "RT-secret-1", "repo issues:read", 3600);
	char *rid = request("alice", "coder", "github", "issues:read issues:write", NOW);
	char *state = begin(rid, "alice", "issues:read issues:write", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_NARROWED);
	ck_set(&f.dropped, "issues:write");
	struct consent k = load(f.consent_id, NOW);
	ck_set(&k.granted, "issues:read");
	ck_set(&k.declined, "issues:write");
	consent_clear(&k);
	char *ps = q_text("SELECT provider_scopes FROM vault_records WHERE consent_id = ?1",
	    f.consent_id);
	ck_assert_str_eq(ps, "issues:read repo");
	free(ps);
	/* What the done page names as left out is kept with the request. */
	char *nar = q_text("SELECT narrowed FROM consent_requests WHERE id = ?1", rid);
	ck_assert_str_eq(nar, "issues:write");
	free(nar);
	vault_finish_clear(&f);
	free(state);
	free(rid);

	/* Granted only what no chosen scope can live with: nothing, tokens revoked. */
	srv_set_tokens("AT-secret-2", "RT-secret-2", "repo", 3600);
	rid = request("alice", "helper", "github", "issues:read issues:write", NOW);
	state = begin(rid, "alice", "issues:read issues:write", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_FAILED);
	ck_assert_ptr_null(f.consent_id);
	vault_finish_clear(&f);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 2);
	ck_assert_str_eq(sv.revoked[0], "refresh_token:RT-secret-2");
	ck_assert_str_eq(sv.revoked[1], "access_token:AT-secret-2");
	pthread_mutex_unlock(&sv.mu);
	free(state);
	free(rid);
}
END_TEST

START_TEST(test_vault_finish_too_much_revokes)
{
	struct vault_finish f;
	srv_set_tokens("AT-secret-1", "RT-secret-1", "admin issues:read repo", 3600);
	char *rid = request("alice", "coder", "github", "issues:read", NOW);
	char *state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_TOO_MUCH);
	ck_assert_ptr_null(f.consent_id);
	ck_assert_str_eq(f.request_id, rid);
	vault_finish_clear(&f);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 2);
	ck_assert_str_eq(sv.revoked[0], "refresh_token:RT-secret-1");
	ck_assert_str_eq(sv.revoked[1], "access_token:AT-secret-1");
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records", NULL), 0);
	char *status = q_text("SELECT status FROM consent_requests WHERE id = ?1", rid);
	ck_assert_str_eq(status, "pending");
	free(status);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.connect.failed' "
	    "AND outcome = 'too_much'", NULL), 1);
	ck_no_plaintext();
	free(state);
	free(rid);
}
END_TEST

/* The request changes (a merged scope) while the person is at the provider:
 * the callback grants nothing, revokes the tokens it got and says so. */
/* The request changes (a merged scope) while the person is at the provider:
 * the callback grants nothing, never exchanges the code, and says so. */
START_TEST(test_vault_finish_request_changed_meanwhile)
{
	struct vault_finish f;
	srv_set_tokens("AT-secret-1", "RT-secret-1", "issues:read repo", 3600);
	char *rid = request("alice", "coder", "github", "issues:read", NOW);
	char *state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(exchange("alice", "coder", "github", "issues:read issues:write", NOW + 1),
	    CONSENT_REQUIRED);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW + 2, &f),
	    VAULT_CHANGED);
	ck_assert_ptr_null(f.consent_id);
	ck_assert_str_eq(f.request_id, rid);
	vault_finish_clear(&f);
	/* The code was never exchanged: no tokens exist to revoke. */
	pthread_mutex_lock(&sv.mu);
	ck_assert_str_eq(sv.last_code_req, "");
	ck_assert_int_eq(sv.nrevoked, 0);
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records", NULL), 0);
	char *status = q_text("SELECT status FROM consent_requests WHERE id = ?1", rid);
	ck_assert_str_eq(status, "pending");
	free(status);
	ck_assert_int_eq(q_int("SELECT count(*) FROM audit WHERE action = 'vault.connect.failed' "
	    "AND outcome = 'changed'", NULL), 1);
	ck_no_plaintext();
	free(state);
	free(rid);
}
END_TEST

/* The connect path binds its selection to the version shown, too. */
START_TEST(test_vault_begin_refuses_changed_request)
{
	char *rid = request("alice", "coder", "github", "issues:read", NOW);
	struct consent_decision d = decision("issues:read");
	struct vault_begin b = { NULL, NULL, CONSENT_DECIDED };
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(exchange("alice", "coder", "github", "issues:read issues:write", NOW + 1),
	    CONSENT_REQUIRED);
	ck_assert_int_eq(begin_as(rid, uid("alice"), &d, NOW + 2, &b), CS_OK);
	ck_assert_int_eq(b.outcome, CONSENT_DECIDE_CHANGED);
	ck_assert_ptr_null(b.authorize_url);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_connects", NULL), 0);
	scope_set_clear(&d.selected);
	free(rid);
}
END_TEST

START_TEST(test_vault_finish_cancelled_and_errors)
{
	struct vault_finish f;
	char *rid = request("alice", "coder", "github", "issues:read", NOW);
	char *state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, "access_denied", SH, "alice", NOW, &f),
	    VAULT_CANCELLED);
	ck_assert_str_eq(f.request_id, rid);
	vault_finish_clear(&f);
	free(state);
	char *status = q_text("SELECT status FROM consent_requests WHERE id = ?1", rid);
	ck_assert_str_eq(status, "pending");
	free(status);
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, "server_error", SH, "alice", NOW, &f),
	    VAULT_FAILED);
	vault_finish_clear(&f);
	free(state);
	/* The provider refuses the code. */
	pthread_mutex_lock(&sv.mu);
	sv.code_status = 400;
	snprintf(sv.code_body, sizeof sv.code_body, "{\"error\":\"invalid_grant\"}");
	pthread_mutex_unlock(&sv.mu);
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_FAILED);
	vault_finish_clear(&f);
	free(state);
	/* Not Bearer: revoked, failed. */
	pthread_mutex_lock(&sv.mu);
	sv.code_status = 200;
	snprintf(sv.code_body, sizeof sv.code_body, "{\"access_token\":\"AT-secret-9\","
	    "\"token_type\":\"DPoP\",\"scope\":\"issues:read repo\"}");
	pthread_mutex_unlock(&sv.mu);
	state = begin(rid, "alice", "issues:read", NOW);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW, &f),
	    VAULT_FAILED);
	vault_finish_clear(&f);
	free(state);
	pthread_mutex_lock(&sv.mu);
	ck_assert_int_eq(sv.nrevoked, 1);
	ck_assert_str_eq(sv.revoked[0], "access_token:AT-secret-9");
	pthread_mutex_unlock(&sv.mu);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 0);
	/* The request expired while the person was at the provider: undone. */
	srv_set_tokens("AT-secret-3", NULL, NULL, 0);
	state = begin(rid, "alice", "issues:read", NOW + 500);
	ck_assert_int_eq(finish_full("github", state, sv.base, NULL, SH, "alice", NOW + 600, &f),
	    VAULT_FAILED);
	vault_finish_clear(&f);
	free(state);
	ck_assert_int_eq(q_int("SELECT count(*) FROM consents", NULL), 0);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records", NULL), 0);
	pthread_mutex_lock(&sv.mu);
	ck_assert_str_eq(sv.revoked[sv.nrevoked - 1], "access_token:AT-secret-3");
	pthread_mutex_unlock(&sv.mu);
	free(rid);
}
END_TEST

START_TEST(test_vault_begin_moves_exact_record)
{
	char *kid = connect_alice(NOW);
	char *rec_id = q_text("SELECT id FROM vault_records WHERE consent_id = ?1", kid);
	char *before = q_text("SELECT hex(access_sealed) FROM vault_records WHERE id = ?1", rec_id);
	/* The agent asks again (a longer duration, say): the same mapping. */
	char *rid = request("alice", "coder", "github", "issues:write", NOW + 1);
	struct consent_decision d = decision("issues:read");
	struct vault_begin b = { NULL, NULL, CONSENT_DECIDED };
	tu_decision_version(sc, rid, &d);
	ck_assert_int_eq(begin_as(rid, uid("alice"), &d, NOW + 1, &b), CS_OK);
	ck_assert_ptr_null(b.authorize_url);
	ck_assert_ptr_nonnull(b.consent_id);
	ck_assert_str_ne(b.consent_id, kid);
	/* Same record, under the new consent, re-sealed; the old consent revoked; no outbox. */
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_records WHERE id = ?1 AND "
	    "reserved_for IS NULL", rec_id), 1);
	char *now_kid = q_text("SELECT consent_id FROM vault_records WHERE id = ?1", rec_id);
	ck_assert_str_eq(now_kid, b.consent_id);
	free(now_kid);
	ck_assert_int_eq(q_int("SELECT count(*) FROM vault_outbox", NULL), 0);
	struct consent k = load(kid, NOW + 1);
	ck_assert_str_eq(k.state, "revoked");
	consent_clear(&k);
	ck_assert_int_eq(audits("vault.record.moved"), 1);
	ck_release(b.consent_id, NOW + 1, "AT-secret-1");
	struct vault_release r;
	ck_assert_int_eq(release_o(kid, NOW + 1, &r), VAULT_RELEASE_GONE);
	/* Re-sealed: a new ciphertext (fresh nonce, new additional data). */
	char *after = q_text("SELECT hex(access_sealed) FROM vault_records WHERE id = ?1", rec_id);
	ck_assert_str_ne(after, before);
	free(after);
	free(before);
	vault_begin_clear(&b);
	scope_set_clear(&d.selected);

	/* Another mapping: a new connection, the live consent untouched until the callback.
	 * (issues:write was just unticked: the person first lets the agent ask again.) */
	char *cur = q_text("SELECT consent_id FROM vault_records", NULL);
	bool lifted = false;
	ck_assert_int_eq(tu_allow_asking(sc, &cfg, rid, uid("alice"), ACT, NOW + 2, &lifted),
	    CS_OK);
	ck_assert(lifted);
	char *rid2 = request("alice", "coder", "github", "issues:write", NOW + 2);
	char *state = begin(rid2, "alice", "issues:read issues:write", NOW + 2);
	k = load(cur, NOW + 2);
	ck_assert_str_eq(k.state, "live");
	consent_clear(&k);
	free(state);
	free(rid2);
	free(cur);
	free(rid);
	free(rec_id);
	free(kid);
}
END_TEST

static Suite *vault_connect_suite(void)
{
	Suite *s = suite_create("vault_connect");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_vault_begin_authorize_url);
	tcase_add_test(tc, test_vault_begin_authorize_url_presets);
	tcase_add_test(tc, test_vault_connect_microsoft_extra_scopes);
	tcase_add_test(tc, test_vault_begin_refuses);
	tcase_add_test(tc, test_vault_finish_bad_state);
	tcase_add_test(tc, test_vault_finish_iss_optional_when_not_advertised);
	tcase_add_test(tc, test_vault_finish_connected);
	tcase_add_test(tc, test_vault_finish_narrowed);
	tcase_add_test(tc, test_vault_finish_too_much_revokes);
	tcase_add_test(tc, test_vault_finish_request_changed_meanwhile);
	tcase_add_test(tc, test_vault_begin_refuses_changed_request);
	tcase_add_test(tc, test_vault_finish_cancelled_and_errors);
	tcase_add_test(tc, test_vault_begin_moves_exact_record);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	if (httpc_global_init() != CS_OK)
		return EXIT_FAILURE;
	int rc = tu_run(vault_connect_suite());
	curl_global_cleanup();
	return rc;
}
