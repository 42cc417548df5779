-- 0009: the revocation-event outbox (ARCHITECTURE.md flow G).  Every consent
-- revocation adds one row here in the revoking transaction (store_consent_cascade);
-- the maintenance thread pushes each as a Security Event Token (RFC 8417) to
-- [gateway] events_uri (RFC 8935) and retries with backoff until a 202.
-- No secret is stored: the SET is signed afresh at each attempt.
CREATE TABLE events_outbox (
	id               INTEGER PRIMARY KEY AUTOINCREMENT,
	jti              TEXT NOT NULL UNIQUE,       -- the SET's jti, the same at every attempt
	consent_id       TEXT NOT NULL,
	subject_iss      TEXT NOT NULL,              -- users.issuer: the person's IdP
	subject          TEXT NOT NULL,              -- users.subject
	agent            TEXT NOT NULL,
	resource         TEXT NOT NULL,              -- the resource id (the SET carries its uri)
	reason           TEXT,                       -- consents.revoke_reason
	created_at       INTEGER NOT NULL,           -- when the consent was revoked
	attempts         INTEGER NOT NULL DEFAULT 0,
	next_attempt_at  INTEGER NOT NULL,
	delivered_at     INTEGER NOT NULL DEFAULT 0, -- 0 = not yet
	last_status      INTEGER NOT NULL DEFAULT 0, -- the receiver's last HTTP status; 0 = none
	last_error       TEXT                        -- short, no secrets
);
CREATE INDEX events_outbox_due ON events_outbox(delivered_at, next_attempt_at);
CREATE INDEX events_outbox_consent ON events_outbox(consent_id);
