-- 0015: single-use identifiers from outside (issue #18): the jti of each client
-- assertion (RFC 7523 §3 item 7) and of each DPoP proof (RFC 9449 §11.1), held
-- until the assertion or proof could no longer be accepted anyway.  In the
-- database, so that a jti used at one node is refused at every other.
-- PostgreSQL form of migrations/0015_replay_cache.sql.
CREATE TABLE replay_cache (
	kind       TEXT NOT NULL CHECK (kind IN ('client_assertion', 'dpop')),
	jti        TEXT NOT NULL,
	expires_at BIGINT NOT NULL,
	PRIMARY KEY (kind, jti)
);
CREATE INDEX replay_cache_expiry ON replay_cache(expires_at);

-- A refresh family started with a DPoP proof is bound to that proof's key (RFC
-- 9449 §5): every refresh of the family must come with a proof by the same key.
-- jkt is the key's RFC 7638 thumbprint; a family without a row is unbound.
CREATE TABLE refresh_bindings (
	family     TEXT PRIMARY KEY,
	jkt        TEXT NOT NULL
);
