-- 0020: connection health (issue #33 item 4).  reconnect_reason says why a consent's
-- provider connection needs the person again (health.h's reason names: refresh_refused,
-- more_scopes, expired); NULL while reconnect_required is 0 and on every row before this
-- migration (read as "unknown").  events_outbox.kind tells a revocation event from the
-- connection-health events (reconnect_required, recovered); every earlier row was a
-- revocation.
ALTER TABLE consents ADD COLUMN reconnect_reason TEXT;
ALTER TABLE events_outbox ADD COLUMN kind TEXT NOT NULL DEFAULT 'revoked';
