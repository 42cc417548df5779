-- 0003: consent requests, consents (flows A, B, G) and the audit log.
-- Scope lists are stored space-separated and sorted; ids are 22-character
-- base64url strings of 16 random bytes.  No token of any kind is stored here.

CREATE TABLE consent_requests (
	id            TEXT PRIMARY KEY,
	user_id       INTEGER NOT NULL REFERENCES users(id),
	agent         TEXT NOT NULL,
	resource      TEXT NOT NULL,
	scopes        TEXT NOT NULL,                 -- requested (merged) scopes
	pre_granted   TEXT NOT NULL DEFAULT '',      -- granted by the consent live at creation
	reason        TEXT,                          -- the agent's text, or NULL
	status        TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
	created_at    INTEGER NOT NULL,
	expires_at    INTEGER NOT NULL,
	decided_at    INTEGER NOT NULL DEFAULT 0,
	last_poll_at  INTEGER NOT NULL DEFAULT 0,
	interval      INTEGER NOT NULL,              -- current polling interval (grows on slow_down)
	consent_id    TEXT                           -- the consent an approval made
);
-- At most one pending request per (user, agent, resource): later calls merge into it.
CREATE UNIQUE INDEX consent_requests_one_pending
	ON consent_requests(user_id, agent, resource) WHERE status = 'pending';
CREATE INDEX consent_requests_user ON consent_requests(user_id, status, expires_at);
CREATE INDEX consent_requests_triple ON consent_requests(user_id, agent, resource, status, decided_at);

CREATE TABLE consents (
	id             TEXT PRIMARY KEY,
	user_id        INTEGER NOT NULL REFERENCES users(id),
	agent          TEXT NOT NULL,
	resource       TEXT NOT NULL,
	granted        TEXT NOT NULL,                -- ticked scopes
	declined       TEXT NOT NULL,                -- requested but unticked scopes
	offline        INTEGER NOT NULL DEFAULT 0,
	created_at     INTEGER NOT NULL,
	expires_at     INTEGER NOT NULL,
	revoked_at     INTEGER NOT NULL DEFAULT 0,   -- 0 = not revoked
	revoked_by     TEXT,                         -- the actor
	revoke_reason  TEXT,
	request_id     TEXT                          -- the request whose approval made it
);
-- At most one unrevoked consent per (user, agent, resource): an approval revokes
-- the previous one ('replaced') in the same transaction that inserts the new one.
CREATE UNIQUE INDEX consents_one_current
	ON consents(user_id, agent, resource) WHERE revoked_at = 0;
CREATE INDEX consents_user ON consents(user_id, created_at);

CREATE TABLE audit (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	ts          INTEGER NOT NULL,                -- UTC seconds
	actor       TEXT,                            -- "user:<sub>", "gateway:<id>", "admin:<name>", "system"
	action      TEXT NOT NULL,                   -- see server/audit.c for the list
	subject     TEXT,
	agent       TEXT,
	resource    TEXT,
	scopes      TEXT,
	consent_id  TEXT,
	request_id  TEXT,
	outcome     TEXT,
	detail      TEXT                             -- short, never a token
);
CREATE INDEX audit_consent ON audit(consent_id);
CREATE INDEX audit_subject ON audit(subject, ts);
