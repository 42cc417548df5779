-- 0008: admin API tokens (ARCHITECTURE.md actor "admin": /admin/api/* with a
-- bearer token).  A token is shown once by `consentd admin token create` and
-- stored only as its SHA-256; a revoked token keeps its row (and its name) so
-- the audit trail that names it stays meaningful.
-- PostgreSQL form of migrations/0008_admin_tokens.sql.
CREATE TABLE admin_tokens (
	name          TEXT PRIMARY KEY,              -- letters, digits, '.', '_', '-'
	hash          BYTEA NOT NULL UNIQUE,         -- SHA-256 of the token
	created_at    BIGINT NOT NULL,
	last_used_at  BIGINT NOT NULL DEFAULT 0,     -- 0 = never used
	revoked_at    BIGINT NOT NULL DEFAULT 0      -- 0 = not revoked
);

-- The admin listings page through consents by (created_at, id) and through the
-- audit log by seq; filters by agent and resource and the audit query by action
-- and time need their own indexes.
CREATE INDEX consents_created ON consents(created_at, id);
CREATE INDEX consents_agent ON consents(agent, revoked_at);
CREATE INDEX consents_resource ON consents(resource, revoked_at);
CREATE INDEX audit_ts ON audit(ts);
CREATE INDEX audit_action ON audit(action, seq);
CREATE INDEX audit_request ON audit(request_id);
