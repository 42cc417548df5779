-- 0013: /me as the person's control panel (issue #14.5).
-- last_used_at: when a consent was last used -- a grant issued for it (grant.c,
-- refresh included) or its provider token released (vault.c, proxy included),
-- written in that same transaction; 0 = never.  Rows from before are filled from
-- what already records a use: the grants table and the audit log's releases.
-- PostgreSQL form of migrations/0013_me_panel.sql: SQLite's two-argument
-- max() is GREATEST (both arguments are coalesced, so NULLs cannot differ).
ALTER TABLE consents ADD COLUMN last_used_at BIGINT NOT NULL DEFAULT 0;
UPDATE consents SET last_used_at = GREATEST(
	coalesce((SELECT max(g.issued_at) FROM grants g WHERE g.consent_id = consents.id), 0),
	coalesce((SELECT max(a.ts) FROM audit a WHERE a.consent_id = consents.id
	          AND a.action = 'vault.released'), 0));

-- cooldown_lifted_at: the person let the agent ask again ("Allow it to ask
-- again" on /me, consent_allow_asking): a denied request, or an approved one
-- whose unticked scopes, no longer hold back [consent] deny_cooldown from its
-- decided_at.  0 = not lifted.
ALTER TABLE consent_requests ADD COLUMN cooldown_lifted_at BIGINT NOT NULL DEFAULT 0;
