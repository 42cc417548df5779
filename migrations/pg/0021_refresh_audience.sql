-- 0021: refresh families of MCP clients' access tokens (issue #30, the token leg).
-- A family started at /token with an authorization code remembers the audience its
-- access tokens carry (aud: the [mcp.NAME] URI the client named as its RFC 8707
-- resource) and the client it was issued to, so that a refresh keeps aud exactly,
-- refuses another client and another resource, and /revoke and /introspect know
-- whose token it is.  A family without a row is a gateway's (flow C).  The janitor
-- removes a row with its family's refresh tokens.
-- PostgreSQL form of migrations/0021_refresh_audience.sql.
CREATE TABLE refresh_audiences (
	family     TEXT PRIMARY KEY,
	audience   TEXT NOT NULL,                 -- the access tokens' aud
	client_id  TEXT NOT NULL                  -- the MCP client's client_id
);
