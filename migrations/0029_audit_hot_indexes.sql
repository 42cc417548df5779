-- 0029: fewer B-trees written by every audit entry (issue #34, goals 1 and 3).
-- A grant's or a proxied call's one durable write is mostly the pages it
-- changes, and each secondary index of audit adds its last page to every
-- COMMIT (docs/BENCHMARKS.md, "Issue 34 ... session 13").  Three of them
-- served no reader on SQLite: no statement filters the audit by subject, and
-- the admin's audit listing walks by seq (its optional action, time and
-- consent filters are "?N IS NULL OR col = ?N" terms, which SQLite's planner
-- does not turn into index lookups; scripts/pg-sql-check.py's
-- audit_plan_check, run by make check, holds every reader's plan).
DROP INDEX audit_subject;
DROP INDEX audit_ts;
DROP INDEX audit_action;
-- The request index serves one reader: a consent's history also shows the
-- entries of the consent request it came from, written before the consent
-- existed (consent_id NULL).  Entries that name a consent are found by
-- audit_consent, so only the others need this index; a grant's, a proxied
-- call's and an MCP call's entry (each names its consent) no longer write it.
DROP INDEX audit_request;
CREATE INDEX audit_request ON audit(request_id) WHERE consent_id IS NULL;
