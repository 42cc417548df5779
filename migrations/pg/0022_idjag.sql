-- 0022: enterprise-managed authorization (issue #30 item 6; docs/mcp.md, "Enterprise-managed
-- authorization (ID-JAG)").  consents.granted_by is NULL for a consent the person gave, and
-- 'organisation' for one an enterprise IdP's ID-JAG made under the admin's [enterprise.NAME]
-- policy (server/idjag_grant.c): /me and the admin pages show it as given by the
-- organisation.  replay_cache admits the kind 'id_jag': each ID-JAG's jti is single-use.
-- PostgreSQL form of migrations/0022_idjag.sql.
ALTER TABLE consents ADD COLUMN granted_by TEXT;
ALTER TABLE replay_cache DROP CONSTRAINT replay_cache_kind_check;
ALTER TABLE replay_cache ADD CONSTRAINT replay_cache_kind_check
	CHECK (kind IN ('client_assertion', 'dpop', 'id_jag'));
