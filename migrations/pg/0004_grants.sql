-- 0004: grants (flow C) and refresh tokens for offline consents (flow A).
-- A grant is recorded by its jti only; a refresh token only by its SHA-256,
-- never in clear.  Rows die with their consent (consent.c's cascade).
-- PostgreSQL form of migrations/0004_grants.sql; grants gets SQLite's
-- implicit rowid as a column (the janitor deletes by it).

CREATE TABLE grants (
	jti         TEXT PRIMARY KEY,
	consent_id  TEXT NOT NULL REFERENCES consents(id),
	issued_at   BIGINT NOT NULL,
	expires_at  BIGINT NOT NULL,
	revoked_at  BIGINT NOT NULL DEFAULT 0,        -- 0 = not revoked
	rowid       BIGINT GENERATED ALWAYS AS IDENTITY   -- SQLite's implicit rowid
);
CREATE INDEX grants_consent ON grants(consent_id);
-- The janitor's DELETE ... WHERE rowid IN (...): see consent_requests_rowid.
CREATE INDEX grants_rowid ON grants(rowid);

CREATE TABLE refresh_tokens (
	hash        BYTEA PRIMARY KEY,                -- SHA-256 of the token
	family      TEXT NOT NULL,                    -- one family per offline grant chain
	consent_id  TEXT NOT NULL REFERENCES consents(id),
	issued_at   BIGINT NOT NULL,
	used_at     BIGINT NOT NULL DEFAULT 0,        -- 0 = current; set when rotated
	revoked_at  BIGINT NOT NULL DEFAULT 0         -- 0 = not revoked
);
CREATE INDEX refresh_tokens_consent ON refresh_tokens(consent_id);
CREATE INDEX refresh_tokens_family ON refresh_tokens(family);
