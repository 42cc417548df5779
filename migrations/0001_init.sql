-- 0001_init.sql -- the foundation: consentd's signing keys (sealed under the
-- master key, never stored in clear) and the users who log in through the IdP.
-- schema_version is created by store.c itself; later issues add 0002 onwards.

CREATE TABLE signing_keys (
	kid         TEXT PRIMARY KEY,              -- RFC 7638 thumbprint of the public key
	alg         TEXT NOT NULL,                 -- 'ES256'
	created_at  INTEGER NOT NULL,              -- UTC seconds
	sign_after  INTEGER NOT NULL,              -- signs from this time on
	retired_at  INTEGER NOT NULL DEFAULT 0,    -- 0 = current
	revoked_at  INTEGER NOT NULL DEFAULT 0,    -- 0 = not revoked
	master_kid  TEXT NOT NULL,                 -- which master key sealed it
	sealed      BLOB NOT NULL                  -- seal.h blob of the private JWK JSON
);

CREATE TABLE users (
	id             INTEGER PRIMARY KEY,
	issuer         TEXT NOT NULL,              -- the IdP's issuer, exactly
	subject        TEXT NOT NULL,              -- the [oidc] subject_claim value
	name           TEXT,
	email          TEXT,
	created_at     INTEGER NOT NULL,
	last_login_at  INTEGER NOT NULL,
	UNIQUE (issuer, subject)
);
