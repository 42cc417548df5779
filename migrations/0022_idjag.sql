-- 0022: enterprise-managed authorization (issue #30 item 6; docs/mcp.md, "Enterprise-managed
-- authorization (ID-JAG)").  consents.granted_by is NULL for a consent the person gave, and
-- 'organisation' for one an enterprise IdP's ID-JAG made under the admin's [enterprise.NAME]
-- policy (server/idjag_grant.c): /me and the admin pages show it as given by the
-- organisation.  replay_cache admits the kind 'id_jag': each ID-JAG's jti is single-use.
ALTER TABLE consents ADD COLUMN granted_by TEXT;

-- SQLite cannot change a CHECK constraint: the table is made again with the new kind.
CREATE TABLE replay_cache_0022 (
	kind       TEXT NOT NULL CHECK (kind IN ('client_assertion', 'dpop', 'id_jag')),
	jti        TEXT NOT NULL,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (kind, jti)
) WITHOUT ROWID;
INSERT INTO replay_cache_0022 (kind, jti, expires_at) SELECT kind, jti, expires_at FROM replay_cache;
DROP TABLE replay_cache;
ALTER TABLE replay_cache_0022 RENAME TO replay_cache;
CREATE INDEX replay_cache_expiry ON replay_cache(expires_at);
