-- 0025: the sites a provider connection reaches (issue #33).  Atlassian's API is called
-- through https://api.atlassian.com/ex/{product}/{cloudId}: at connection consentd reads
-- which sites the token reaches (accessible-resources) and keeps their cloud ids here,
-- comma-joined in the provider's order ([A-Za-z0-9-] each, provider.c checks), so that the
-- proxy can put the first one in a base_url holding {cloud_id}.  NULL for every other
-- provider and for a record connected before this migration (the person reconnects).
-- (0024 is another branch's.)
ALTER TABLE vault_records ADD COLUMN sites TEXT;
