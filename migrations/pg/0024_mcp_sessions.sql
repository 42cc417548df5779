-- 0024: the MCP gateway's 2025-11-25 sessions and their URL elicitations (issue #31;
-- docs/mcp.md, "The 2025-11-25 form").  A session is the upstream MCP server's: its
-- Mcp-Session-Id, answered to `initialize`, is kept only as a SHA-256 hash, never the id,
-- with whose it is (the person, the MCP client, the endpoint) and whether the client
-- declared URL elicitation.  An elicitation is one -32042 answer's elicitationId (16
-- random bytes, base64url) and what it waits for: an approval (approvals.id) or a consent
-- request (consent_requests.id).  It is complete once that item is no longer pending,
-- read from the item itself (server/store_mcp.c); notified_at is set by the one stream
-- that sends notifications/elicitation/complete for it.  The janitor deletes both after
-- their expiry.
-- PostgreSQL form of migrations/0024_mcp_sessions.sql.
CREATE TABLE mcp_sessions (
	endpoint         TEXT NOT NULL,                 -- [mcp.NAME]'s NAME
	session_hash     BYTEA NOT NULL,                -- SHA-256 of the Mcp-Session-Id
	user_id          BIGINT NOT NULL REFERENCES users(id),
	client_id        TEXT NOT NULL,                 -- the MCP client's client_id
	url_elicitation  BIGINT NOT NULL,               -- 1: initialize declared elicitation.url
	created_at       BIGINT NOT NULL,
	last_seen_at     BIGINT NOT NULL,
	expires_at       BIGINT NOT NULL,               -- last_seen_at + the idle lifetime
	PRIMARY KEY (endpoint, session_hash)
);
CREATE INDEX mcp_sessions_expiry ON mcp_sessions(expires_at);

CREATE TABLE mcp_elicitations (
	id            TEXT PRIMARY KEY,                 -- the elicitationId
	endpoint      TEXT NOT NULL,
	session_hash  BYTEA NOT NULL,                   -- the session that was answered -32042
	user_id       BIGINT NOT NULL REFERENCES users(id),
	client_id     TEXT NOT NULL,
	kind          TEXT NOT NULL CHECK (kind IN ('approval', 'consent')),
	item_id       TEXT NOT NULL,                    -- approvals.id or consent_requests.id
	created_at    BIGINT NOT NULL,
	expires_at    BIGINT NOT NULL,
	completed_at  BIGINT NOT NULL DEFAULT 0,        -- when a stream found the item decided
	notified_at   BIGINT NOT NULL DEFAULT 0         -- when that stream took it to send
);
CREATE INDEX mcp_elicitations_session ON mcp_elicitations(endpoint, session_hash, notified_at);
CREATE INDEX mcp_elicitations_expiry ON mcp_elicitations(expires_at);
