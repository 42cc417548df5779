-- 0028: one audit chain per writer (issue #34, goal 4).  Each entry names its
-- chain and the number of that chain's entry before it (prev_seq; 0 for chain
-- 0, whose numbers have no gap); its link covers both and follows the previous
-- entry OF THAT CHAIN (server/audit.c), so writers that append to different
-- chains never wait for each other.  Entry numbers (seq) stay unique across chains and are the
-- entries' order for readers.  Chain 0 is every entry written before this
-- migration and, on SQLite (one writer), every entry after it too; on
-- PostgreSQL each consentd process claims a chain of its own in audit_chains
-- the first time it appends.  audit_anchor gets one row per pruned chain.
ALTER TABLE audit ADD COLUMN chain INTEGER NOT NULL DEFAULT 0;
ALTER TABLE audit ADD COLUMN prev_seq INTEGER NOT NULL DEFAULT 0;
CREATE INDEX audit_chain ON audit(chain, seq);

CREATE TABLE audit_chains (
	chain       INTEGER PRIMARY KEY,                  -- 0: the shared chain
	opened_at   INTEGER NOT NULL                      -- UTC seconds
);
INSERT INTO audit_chains (chain, opened_at) VALUES (0, 0);

CREATE TABLE audit_anchor_0028 (
	seq         INTEGER NOT NULL,                     -- its last pruned entry's number
	link        BLOB NOT NULL,                        -- its link: the chain's next "previous"
	mac         BLOB NOT NULL,                        -- HMAC of (chain, link, seq) under the chain key
	master_kid  TEXT NOT NULL,                        -- which master key made mac
	pruned_at   INTEGER NOT NULL,                     -- UTC seconds of the last prune
	chain       INTEGER PRIMARY KEY                   -- the pruned chain
);
INSERT INTO audit_anchor_0028 (seq, link, mac, master_kid, pruned_at, chain)
	SELECT seq, link, mac, master_kid, pruned_at, 0 FROM audit_anchor;
DROP TABLE audit_anchor;
ALTER TABLE audit_anchor_0028 RENAME TO audit_anchor;
