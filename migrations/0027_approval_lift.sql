-- 0027: "let it ask again" for a denied action (issue #32 item 3).  A person's denial of an
-- action with exact parameters holds for [consent] deny_cooldown; on /me the person may lift
-- it at once, as a consent denial's cooldown_lifted_at does: lifted_at is when (0 = not
-- lifted), and approval_check's denial step ignores a lifted denial.  (0026 is another
-- branch's.)
ALTER TABLE approvals ADD COLUMN lifted_at INTEGER NOT NULL DEFAULT 0;
