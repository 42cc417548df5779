-- 0029: fewer B-trees written by every audit entry (issue #34, goals 1 and 3);
-- the same indexes as migrations/0029_audit_hot_indexes.sql, which says why.
-- On PostgreSQL too no reader filters the audit by subject, and the admin's
-- audit listing walks by seq (its filters are "$N IS NULL OR col = $N").
DROP INDEX audit_subject;
DROP INDEX audit_ts;
DROP INDEX audit_action;
DROP INDEX audit_request;
CREATE INDEX audit_request ON audit(request_id) WHERE consent_id IS NULL;
