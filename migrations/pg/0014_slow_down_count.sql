-- 0014: slow_down is audited once per request and counted after (issue #14.11).
-- slow_downs is how many times the gateway heard slow_down for a pending consent
-- request or approval; only the first one writes an audit entry, the count goes
-- into the entry that ends the request (decided or expired).
-- PostgreSQL form of migrations/0014_slow_down_count.sql.
ALTER TABLE consent_requests ADD COLUMN slow_downs BIGINT NOT NULL DEFAULT 0;
ALTER TABLE approvals ADD COLUMN slow_downs BIGINT NOT NULL DEFAULT 0;
