-- 0007: the audit log becomes a chain (ARCHITECTURE.md flow G).  Each entry
-- carries link = HMAC-SHA-256(key derived from the master key for
-- "audit-chain", previous link || canonical entry) and the id of the master
-- key that linked it.  A NULL link (an entry written before this migration)
-- does not verify.
-- PostgreSQL form of migrations/0007_audit_chain.sql.
ALTER TABLE audit ADD COLUMN link BYTEA;
ALTER TABLE audit ADD COLUMN master_kid TEXT;
