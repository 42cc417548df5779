-- 0002: browser sessions and pending logins (flow E).
-- Session ids and login states are stored only as SHA-256 hashes.
-- PostgreSQL form of migrations/0002_sessions.sql (WITHOUT ROWID has no
-- counterpart: a PostgreSQL table has no rowid to leave out).
CREATE TABLE sessions (
	id_hash      BYTEA PRIMARY KEY,
	user_id      BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
	csrf         TEXT NOT NULL,
	created_at   BIGINT NOT NULL,
	last_seen_at BIGINT NOT NULL,
	auth_time    BIGINT NOT NULL,
	admin_claim  BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX sessions_user ON sessions(user_id);

CREATE TABLE login_states (
	state_hash    BYTEA PRIMARY KEY,
	browser_hash  BYTEA NOT NULL,
	nonce         TEXT NOT NULL,
	code_verifier TEXT NOT NULL,
	return_to     TEXT NOT NULL,
	max_age       BIGINT NOT NULL DEFAULT -1,
	created_at    BIGINT NOT NULL,
	expires_at    BIGINT NOT NULL
);
CREATE INDEX login_states_expiry ON login_states(expires_at);
