-- 0005: the token vault (flow D).  Provider tokens are stored only sealed
-- (seal.h, purpose "vault", additional data = record id, consent id, subject,
-- resource); connect states keep the PKCE verifier but only a hash of state.

-- A consent whose provider connection was rejected (invalid_grant on refresh):
-- it still stands, but the token exchange asks the person to reconnect.
ALTER TABLE consents ADD COLUMN reconnect_required INTEGER NOT NULL DEFAULT 0;

-- One provider authorization per consent; it moves to vault_outbox (and this
-- row goes) when the consent is revoked or replaced.
CREATE TABLE vault_records (
	id                 TEXT PRIMARY KEY,
	consent_id         TEXT NOT NULL UNIQUE REFERENCES consents(id),
	user_id            INTEGER NOT NULL,
	subject            TEXT NOT NULL,            -- the person (IdP subject), part of the sealing aad
	agent              TEXT NOT NULL,
	resource           TEXT NOT NULL,
	provider_scopes    TEXT NOT NULL,            -- granted by the provider, sorted, space-separated
	token_type         TEXT NOT NULL,            -- 'Bearer'
	access_sealed      BLOB NOT NULL,
	refresh_sealed     BLOB,                     -- NULL when the provider sent none
	access_expires_at  INTEGER NOT NULL,
	master_kid         TEXT NOT NULL,            -- which master key sealed it
	created_at         INTEGER NOT NULL,
	updated_at         INTEGER NOT NULL,
	reserved_for       TEXT                      -- a consent request moving it to its new consent
);

-- Revoked tokens waiting to be revoked at the provider (RFC 7009); never released.
CREATE TABLE vault_outbox (
	id                 INTEGER PRIMARY KEY AUTOINCREMENT,
	record_id          TEXT NOT NULL,
	consent_id         TEXT NOT NULL,
	user_id            INTEGER NOT NULL,
	subject            TEXT NOT NULL,
	resource           TEXT NOT NULL,
	access_sealed      BLOB NOT NULL,
	refresh_sealed     BLOB,
	master_kid         TEXT NOT NULL,
	access_expires_at  INTEGER NOT NULL,
	created_at         INTEGER NOT NULL,
	attempts           INTEGER NOT NULL DEFAULT 0,
	next_attempt_at    INTEGER NOT NULL DEFAULT 0,
	refresh_revoked    INTEGER NOT NULL DEFAULT 0,
	access_revoked     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX vault_outbox_due ON vault_outbox(next_attempt_at);

-- A person on their way to the provider: the decision waits here until the
-- callback (single use, by SHA-256 of state).
CREATE TABLE vault_connects (
	state_hash         BLOB PRIMARY KEY,
	session_hash       BLOB NOT NULL,
	user_id            INTEGER NOT NULL,
	request_id         TEXT NOT NULL,
	resource           TEXT NOT NULL,
	provider_issuer    TEXT,
	code_verifier      TEXT NOT NULL,
	selected           TEXT NOT NULL,            -- the ticked scopes, space-separated
	duration           INTEGER NOT NULL,
	offline            INTEGER NOT NULL,
	provider_scopes    TEXT NOT NULL,            -- what was asked of the provider
	created_at         INTEGER NOT NULL,
	expires_at         INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX vault_connects_expiry ON vault_connects(expires_at);
