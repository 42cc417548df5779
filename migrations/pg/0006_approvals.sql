-- 0006: per-action approvals (flow F).  An approval belongs to the consent it
-- was requested under and is bound to one action and the RFC 8785 canonical
-- form of its parameters (digest = base64url SHA-256 of that text).  Never a
-- token here; parameters are the agent's input, shown to the person escaped.
-- PostgreSQL form of migrations/0006_approvals.sql; approvals gets SQLite's
-- implicit rowid as a column (the SQL orders and deletes by it).

CREATE TABLE approvals (
	id            TEXT PRIMARY KEY,              -- 22-character base64url of 16 random bytes
	consent_id    TEXT NOT NULL REFERENCES consents(id),
	user_id       BIGINT NOT NULL,               -- the consent's person (for /me and the cap)
	agent         TEXT NOT NULL,
	resource      TEXT NOT NULL,
	action        TEXT NOT NULL,
	parameters    TEXT NOT NULL,                 -- canonical JSON (RFC 8785)
	digest        TEXT NOT NULL,                 -- base64url(SHA-256(parameters))
	status        TEXT NOT NULL CHECK (status IN
	                  ('pending', 'approved', 'denied', 'expired', 'used', 'cancelled')),
	created_at    BIGINT NOT NULL,
	expires_at    BIGINT NOT NULL,               -- a pending approval waits until then
	decided_at    BIGINT NOT NULL DEFAULT 0,     -- the person's decision (redeemable until + request_ttl)
	used_at       BIGINT NOT NULL DEFAULT 0,     -- 0 = not released yet
	last_poll_at  BIGINT NOT NULL DEFAULT 0,
	interval      BIGINT NOT NULL,               -- current polling interval (grows on slow_down)
	rowid         BIGINT GENERATED ALWAYS AS IDENTITY   -- SQLite's implicit rowid
);
-- At most one pending approval per exact (consent, action, parameters).
CREATE UNIQUE INDEX approvals_one_pending
	ON approvals(consent_id, action, digest) WHERE status = 'pending';
CREATE INDEX approvals_user ON approvals(user_id, status);
CREATE INDEX approvals_match ON approvals(consent_id, action, digest, status);
-- The janitor's DELETE ... WHERE rowid IN (...): see consent_requests_rowid.
CREATE INDEX approvals_rowid ON approvals(rowid);
