-- 0023: the authorization leg of MCP clients (issue #30).  A request to /authorize may
-- name the DPoP key its code is to be bound to (RFC 9449 §10, dpop_jkt): the pending
-- request keeps it until the code is issued, and the code row has it already (0019).
-- The consent page's done step finds the /authorize request a consent request came
-- from by that consent request's id.  (0021 and 0022 are other branches' of issue #30.)
-- PostgreSQL form of migrations/0023_authz_request_dpop.sql.
ALTER TABLE authz_requests ADD COLUMN dpop_jkt TEXT;
CREATE INDEX authz_requests_consent_request ON authz_requests(consent_request_id);
