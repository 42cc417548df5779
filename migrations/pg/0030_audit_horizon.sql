-- 0030: the audit in commit-safe order for readers that tail it (issue #34).
-- An entry's number (seq) comes from audit's sequence before its transaction
-- commits (migration 0028), so on many nodes a larger number can commit
-- first, and a reader that resumed after the largest number it read would
-- never see the smaller one committed after.  Each entry now records the id
-- of the transaction that inserted it (xid); the admin API's listing
-- (server/store_admin.c SQL_AUDIT_FEED_PG) returns only entries whose
-- transaction is older than every transaction still running
-- (pg_snapshot_xmin(pg_current_snapshot()): nothing can appear below it any
-- more), in (xid, seq) order, and its cursor names both.
-- Entries written before this migration get 0: all of them have committed,
-- and among them seq is the order.  The constant default first, then the
-- function: no rewrite of the table, no long lock.  A node of the previous
-- release inserting during a rolling upgrade names no xid and gets the
-- default, as every node of this one does.
-- PostgreSQL only: on SQLite one writer numbers and commits in one order, and
-- migrations/0030_audit_horizon.sql changes nothing (scripts/pg-sql-check.py
-- knows the column and its index are PostgreSQL's alone).
ALTER TABLE audit ADD COLUMN xid xid8 NOT NULL DEFAULT '0';
ALTER TABLE audit ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
CREATE INDEX audit_xid ON audit(xid, seq);
