-- 0026: the person's standing rules (issue #32).  A rule stands in for the person's
-- approval of calls of one action under one consent: exactly one call's parameters
-- (kind exact) or every call whose fixed top-level parameters hold the values the
-- person fixed (kind match), until expires_at and at most max_uses times (0: no cap).
-- details is the rule in the RFC 9396 shape approvals use ({"type": "agent_action",
-- "actions": [...], "locations": [...]} with "parameters" (exact) or a "match" object
-- (match)); approval.c re-checks every candidate against it.  keyset and lookup make
-- the check one indexed read per key set: exact rules have keyset '*' and lookup the
-- parameters' digest; match rules the JCS array of their exactly fixed keys and the
-- digest of those keys' canonical values.  Never a token here; the values are the
-- agent's input, shown to the person escaped.
CREATE TABLE standing_rules (
	id            TEXT PRIMARY KEY,              -- 22-character base64url of 16 random bytes
	consent_id    TEXT NOT NULL REFERENCES consents(id),
	user_id       INTEGER NOT NULL,              -- the consent's person (for /me)
	agent         TEXT NOT NULL,
	resource      TEXT NOT NULL,
	action        TEXT NOT NULL,
	kind          TEXT NOT NULL CHECK (kind IN ('exact', 'match')),
	keyset        TEXT NOT NULL,
	lookup        TEXT NOT NULL,
	details       TEXT NOT NULL,                 -- RFC 9396 object (canonical JSON)
	approval_id   TEXT,                          -- the approval the person made it with
	created_by    TEXT NOT NULL,                 -- the audit actor who made it
	created_at    INTEGER NOT NULL,
	expires_at    INTEGER NOT NULL,
	max_uses      INTEGER NOT NULL DEFAULT 0,    -- 0: as often as needed until expires_at
	uses          INTEGER NOT NULL DEFAULT 0,
	last_used_at  INTEGER NOT NULL DEFAULT 0,
	ended_at      INTEGER NOT NULL DEFAULT 0,    -- 0: not ended (by the person, an admin, revocation)
	ended_by      TEXT
);
-- The check's reads: a rule's candidates by (consent, action, kind, key set, lookup), and the
-- distinct key sets of match rules, found by skipping from one to the next (store_standing.c).
CREATE INDEX standing_rules_lookup ON standing_rules(consent_id, action, kind, keyset, lookup)
	WHERE ended_at = 0;
CREATE INDEX standing_rules_user ON standing_rules(user_id, ended_at, expires_at);
CREATE INDEX standing_rules_consent ON standing_rules(consent_id);
