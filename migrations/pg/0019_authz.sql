-- 0019: the authorization code flow of MCP clients (issue #30; docs/notes/mcp-as-plan.md,
-- "The authorization leg").  authz_requests holds a validated /authorize request while
-- the person signs in and decides (minutes); authz_codes holds each authorization code
-- by its SHA-256 only, never the code, until it has been used once and has expired.
-- Neither table references consents or consent requests: its rows live minutes and the
-- janitor removes them by their own expiry (server/janitor.c), so that the purge of
-- consents and consent requests never waits for them.  The person is users.id, as in
-- every other table (a subject is unique only with its issuer).
-- PostgreSQL form of migrations/0019_authz.sql.

CREATE TABLE authz_requests (
	id                  TEXT PRIMARY KEY,            -- 22 characters: base64url of 16 random bytes
	client_id           TEXT NOT NULL,               -- a [client.NAME] client_id or a client-id URL
	redirect_uri        TEXT NOT NULL,               -- as validated (authz_check), exactly as sent
	state               TEXT,                        -- the client's state, or NULL
	code_challenge      TEXT NOT NULL,               -- PKCE S256 (RFC 7636)
	resource            TEXT NOT NULL,               -- RFC 8707
	scope               TEXT,                        -- requested, space-separated, or NULL
	created_at          BIGINT NOT NULL,             -- UTC seconds
	expires_at          BIGINT NOT NULL,
	user_id             BIGINT REFERENCES users(id),   -- NULL until the person signed in
	consent_request_id  TEXT                           -- the consent request it led to, or NULL
);
CREATE INDEX authz_requests_expiry ON authz_requests(expires_at);

CREATE TABLE authz_codes (
	code_hash       BYTEA PRIMARY KEY,               -- SHA-256 of the code, never the code
	request_id      TEXT NOT NULL,                   -- the authz_requests row it was issued for
	client_id       TEXT NOT NULL,
	redirect_uri    TEXT NOT NULL,
	code_challenge  TEXT NOT NULL,
	resource        TEXT NOT NULL,
	scope           TEXT NOT NULL,                   -- granted, space-separated
	user_id         BIGINT NOT NULL REFERENCES users(id),
	consent_id      TEXT NOT NULL,                   -- the consent the decision made
	dpop_jkt        TEXT,                            -- RFC 9449 §10 binding, or NULL
	created_at      BIGINT NOT NULL,
	expires_at      BIGINT NOT NULL,
	used_at         BIGINT NOT NULL DEFAULT 0,       -- 0 = not used; set by the one take
	family_id       TEXT                             -- the refresh family its tokens belong to
);
CREATE INDEX authz_codes_expiry ON authz_codes(expires_at);
