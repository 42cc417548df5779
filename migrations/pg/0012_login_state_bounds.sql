-- 0012: pending logins are bounded per client address and in total (issue #12).
-- addr_hash is SHA-256 of the address a login was started from (an IPv6 address
-- by its /64), never the address itself; states from before this migration have
-- an empty one and expire within minutes.  browser_hash is indexed because a
-- browser that starts a login again replaces its earlier, now unusable, state.
-- PostgreSQL form of migrations/0012_login_state_bounds.sql (x'' there is a
-- bit string here: the empty blob is written ''::bytea).
ALTER TABLE login_states ADD COLUMN addr_hash BYTEA NOT NULL DEFAULT ''::bytea;
CREATE INDEX login_states_addr ON login_states(addr_hash, expires_at);
CREATE INDEX login_states_browser ON login_states(browser_hash);
