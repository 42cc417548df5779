-- 0011: a provider connection remembers the version of the consent request the
-- person decided on (consent_request_version: agent, resource, scopes shown,
-- pre-ticked scopes, reason).  The callback grants nothing when the request
-- changed while the person was at the provider.  '' (rows from before): never
-- matches, so such an in-flight connection asks the person again.
-- PostgreSQL form of migrations/0011_decision_version.sql.
ALTER TABLE vault_connects ADD COLUMN request_version TEXT NOT NULL DEFAULT '';

-- The provider scopes' consent scopes the provider did not grant, so that the
-- consent was narrowed (flow D), recorded with the connection: the "done" page
-- names them from here, never from its URL.  NULL: not narrowed.
ALTER TABLE consent_requests ADD COLUMN narrowed TEXT;
