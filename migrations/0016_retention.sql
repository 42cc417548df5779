-- 0016: retention (issue #16 item 3).  The janitor (server/janitor.c) deletes
-- finished rows in small batches; these indexes let each batch find its rows
-- without a scan.  audit_anchor records where a pruned audit chain now starts:
-- the number and link of the last pruned entry, and a MAC over both under the
-- chain key, so the anchor cannot be moved by who lacks the master key.
CREATE INDEX grants_expiry ON grants(expires_at);
CREATE INDEX consent_requests_expiry ON consent_requests(expires_at);
CREATE INDEX approvals_expiry ON approvals(expires_at);
CREATE INDEX consents_revoked ON consents(revoked_at) WHERE revoked_at > 0;

CREATE TABLE audit_anchor (
	id          INTEGER PRIMARY KEY CHECK (id = 1),   -- one row at most
	seq         INTEGER NOT NULL,                     -- the last pruned entry's number
	link        BLOB NOT NULL,                        -- its link: the next entry's "previous"
	mac         BLOB NOT NULL,                        -- HMAC of (link, seq) under the chain key
	master_kid  TEXT NOT NULL,                        -- which master key made mac
	pruned_at   INTEGER NOT NULL                      -- UTC seconds of the last prune
);
