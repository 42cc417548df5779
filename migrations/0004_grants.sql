-- 0004: grants (flow C) and refresh tokens for offline consents (flow A).
-- A grant is recorded by its jti only; a refresh token only by its SHA-256,
-- never in clear.  Rows die with their consent (consent.c's cascade).

CREATE TABLE grants (
	jti         TEXT PRIMARY KEY,
	consent_id  TEXT NOT NULL REFERENCES consents(id),
	issued_at   INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL,
	revoked_at  INTEGER NOT NULL DEFAULT 0        -- 0 = not revoked
);
CREATE INDEX grants_consent ON grants(consent_id);

CREATE TABLE refresh_tokens (
	hash        BLOB PRIMARY KEY,                 -- SHA-256 of the token
	family      TEXT NOT NULL,                    -- one family per offline grant chain
	consent_id  TEXT NOT NULL REFERENCES consents(id),
	issued_at   INTEGER NOT NULL,
	used_at     INTEGER NOT NULL DEFAULT 0,       -- 0 = current; set when rotated
	revoked_at  INTEGER NOT NULL DEFAULT 0        -- 0 = not revoked
);
CREATE INDEX refresh_tokens_consent ON refresh_tokens(consent_id);
CREATE INDEX refresh_tokens_family ON refresh_tokens(family);
