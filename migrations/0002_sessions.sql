-- 0002: browser sessions and pending logins (flow E).
-- Session ids and login states are stored only as SHA-256 hashes.
CREATE TABLE sessions (
	id_hash      BLOB PRIMARY KEY,
	user_id      INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
	csrf         TEXT NOT NULL,
	created_at   INTEGER NOT NULL,
	last_seen_at INTEGER NOT NULL,
	auth_time    INTEGER NOT NULL,
	admin_claim  INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX sessions_user ON sessions(user_id);

CREATE TABLE login_states (
	state_hash    BLOB PRIMARY KEY,
	browser_hash  BLOB NOT NULL,
	nonce         TEXT NOT NULL,
	code_verifier TEXT NOT NULL,
	return_to     TEXT NOT NULL,
	max_age       INTEGER NOT NULL DEFAULT -1,
	created_at    INTEGER NOT NULL,
	expires_at    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX login_states_expiry ON login_states(expires_at);
