-- 0018: why a refresh family was revoked (issue #35 item 8).  reuse_detected is 1 on
-- the rows a reuse detection revoked (a used token of the family presented again), so
-- that /token can tell the gateway "revoked: reuse detected" apart from an expiry, a
-- revoked consent or its own /revoke.  0 on every row before this migration.
-- PostgreSQL form of migrations/0018_refresh_reuse.sql.
ALTER TABLE refresh_tokens ADD COLUMN reuse_detected BIGINT NOT NULL DEFAULT 0;
