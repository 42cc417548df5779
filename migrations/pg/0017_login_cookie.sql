-- 0017: a started sign-in is no longer stored (issue #28).  Its state, nonce,
-- PKCE verifier and return_to travel sealed in a cookie of the browser that
-- started it (server/login_cookie.c), so strangers' starts fill nothing.  What
-- is stored is only a state that signed someone in, by its SHA-256, written
-- after the IdP answered and kept until the state could not be accepted
-- anyway, so that a callback cannot be replayed.
-- login_states stays: migrations are additive for one release, and a node of
-- the previous release keeps using it during a rolling upgrade; this release
-- only deletes its expired rows (store_purge_expired).
-- PostgreSQL form of migrations/0017_login_cookie.sql.
CREATE TABLE login_used (
	state_hash BYTEA PRIMARY KEY,
	expires_at BIGINT NOT NULL
);
CREATE INDEX login_used_expiry ON login_used(expires_at);
