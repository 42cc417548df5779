-- 0010: a grant minted with a refresh token (or from one) remembers its refresh
-- family, so that ending the family (reuse detected, or RFC 7009 revocation of a
-- refresh token) ends those grants too instead of letting them live to expiry.
-- NULL: a grant without a refresh family.
-- PostgreSQL form of migrations/0010_grant_family.sql.
ALTER TABLE grants ADD COLUMN family TEXT;
CREATE INDEX grants_family ON grants(family) WHERE family IS NOT NULL;
