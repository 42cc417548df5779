// The token endpoint for MCP clients (issue #30, the token leg) against the real binary,
// driven by oauth4webapi 3.x as a strict client: it redeems an authorization code with PKCE
// and resource (RFC 8707), checks the token response as OAuth 2.1 says, refreshes with
// rotation, and a replayed code is refused and revokes what its first use issued.  The
// person's consent and the code are put into the database as the authorization leg leaves
// them (another part of issue #30, covered end to end by tests/e2e once it lands): a consent
// row of the person for the client, and the code's SHA-256 in authz_codes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { jwtVerify, createRemoteJWKSet } from 'jose';
import '../lib/webcrypto.js';
import * as oauth from 'oauth4webapi';
import { startStack } from '../lib/stack.js';
import { testDb } from '../lib/consentd.js';
import { consentConfig } from '../lib/fixtures.js';

const REDIRECT = 'http://127.0.0.1:43111/callback';
let s;
let as;
let endpoint;   // the MCP endpoint's URI: the resource and the token's aud
const client = { client_id: 'ide' };
const b64u = (b) => Buffer.from(b).toString('base64url');

before(async () => {
  s = await startStack({ config: consentConfig({
    mcp: { cimd_allow: 'none' },
    'mcp.notes': { resource: 'notes' },
    'client.ide': { name: 'Example IDE', redirect_uris: 'http://127.0.0.1/callback' },
    'client.other': { redirect_uris: 'http://127.0.0.1/callback' },
  }) });
  endpoint = `${s.url}/mcp/notes`;
  as = { issuer: s.url, token_endpoint: `${s.url}/token`, revocation_endpoint: `${s.url}/revoke` };
});
after(async () => { await s?.stop(); });

// A consent of a new person for the client, and a code for it: { code, verifier, cid }.
let people = 0;
function seedCode({ offline = true } = {}) {
  const now = Math.floor(Date.now() / 1000);
  const subject = `mcp-person-${++people}`;
  s.c.sql(`INSERT INTO users (issuer, subject, name, email, created_at, last_login_at) VALUES `
    + `('${s.idp.issuer}', '${subject}', 'P', 'p@example.test', ${now}, ${now})`);
  const uid = Number(s.c.sql(`SELECT id FROM users WHERE subject = '${subject}'`));
  const cid = b64u(randomBytes(16));
  s.c.sql(`INSERT INTO consents (id, user_id, agent, resource, granted, declined, offline, `
    + `created_at, expires_at) VALUES ('${cid}', ${uid}, 'ide', 'notes', 'read write', '', `
    + `${offline ? 1 : 0}, ${now}, ${now + 3600})`);
  const code = b64u(randomBytes(32));
  const verifier = oauth.generateRandomCodeVerifier();
  const challenge = b64u(createHash('sha256').update(verifier).digest());
  const hash = createHash('sha256').update(code).digest('hex');
  const blob = testDb === 'pg' ? `decode('${hash}', 'hex')` : `X'${hash}'`;
  s.c.sql(`INSERT INTO authz_codes (code_hash, request_id, client_id, redirect_uri, `
    + `code_challenge, resource, scope, user_id, consent_id, created_at, expires_at) VALUES `
    + `(${blob}, '${b64u(randomBytes(16))}', 'ide', '${REDIRECT}', '${challenge}', `
    + `'${endpoint}', 'read write', ${uid}, '${cid}', ${now}, ${now + 60})`);
  return { code, verifier, cid };
}

const opts = { [oauth.allowInsecureRequests]: true };

// The authorization response the client would get at its redirect URI, validated as
// oauth4webapi does (RFC 9207 iss included).
function callback(code) {
  const url = new URL(REDIRECT);
  url.searchParams.set('code', code);
  url.searchParams.set('iss', s.url);
  return oauth.validateAuthResponse(as, client, url, oauth.expectNoState);
}

async function redeem(c, { id = client, verifier = c.verifier } = {}) {
  const res = await oauth.authorizationCodeGrantRequest(as, id, oauth.None(), callback(c.code),
    REDIRECT, verifier, { ...opts, additionalParameters: { resource: endpoint } });
  return res;
}

test('oauth4webapi redeems a code with PKCE and resource, and refreshes with rotation', async () => {
  const c = seedCode();
  const tok = await oauth.processAuthorizationCodeResponse(as, client, await redeem(c));
  assert.equal(tok.token_type, 'bearer');   // oauth4webapi lower-cases it
  assert.equal(tok.scope, 'read write');
  assert.ok(tok.refresh_token);
  const { payload, protectedHeader } = await jwtVerify(tok.access_token,
    createRemoteJWKSet(new URL(`${s.url}/.well-known/jwks.json`)),
    { issuer: s.url, audience: endpoint, typ: 'at+jwt', algorithms: ['ES256'] });
  assert.equal(protectedHeader.alg, 'ES256');
  assert.equal(payload.client_id, 'ide');
  assert.equal(payload.cid, c.cid);
  assert.equal(payload.act, undefined);
  // Refresh: the same resource, a new refresh token; the old one is used up.
  const r1 = await oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(
    as, client, oauth.None(), tok.refresh_token, { ...opts, additionalParameters: { resource: endpoint } }));
  assert.notEqual(r1.refresh_token, tok.refresh_token);
  const again = await jwtVerify(r1.access_token, createRemoteJWKSet(new URL(`${s.url}/.well-known/jwks.json`)),
    { issuer: s.url, audience: endpoint, typ: 'at+jwt' });
  assert.equal(again.payload.client_id, 'ide');
  // Another resource for the same refresh token: invalid_target, nothing used up.
  const wrong = await oauth.refreshTokenGrantRequest(as, client, oauth.None(), r1.refresh_token,
    { ...opts, additionalParameters: { resource: `${s.url}/mcp/other` } });
  await assert.rejects(oauth.processRefreshTokenResponse(as, client, wrong),
    (e) => e instanceof oauth.ResponseBodyError && e.error === 'invalid_target');
  // The used refresh token again: reuse detected, the family dies.
  const reuse = await oauth.refreshTokenGrantRequest(as, client, oauth.None(), tok.refresh_token,
    { ...opts, additionalParameters: { resource: endpoint } });
  await assert.rejects(oauth.processRefreshTokenResponse(as, client, reuse),
    (e) => e instanceof oauth.ResponseBodyError && e.error === 'invalid_grant'
      && /reuse detected/.test(e.error_description));
  const dead = await oauth.refreshTokenGrantRequest(as, client, oauth.None(), r1.refresh_token,
    { ...opts, additionalParameters: { resource: endpoint } });
  await assert.rejects(oauth.processRefreshTokenResponse(as, client, dead),
    (e) => e instanceof oauth.ResponseBodyError && e.error === 'invalid_grant');
});

test('a replayed code is refused and revokes what its first use issued', async () => {
  const c = seedCode();
  const tok = await oauth.processAuthorizationCodeResponse(as, client, await redeem(c));
  await assert.rejects(oauth.processAuthorizationCodeResponse(as, client, await redeem(c)),
    (e) => e instanceof oauth.ResponseBodyError && e.error === 'invalid_grant'
      && /used before/.test(e.error_description));
  const r = await oauth.refreshTokenGrantRequest(as, client, oauth.None(), tok.refresh_token,
    { ...opts, additionalParameters: { resource: endpoint } });
  await assert.rejects(oauth.processRefreshTokenResponse(as, client, r),
    (e) => e instanceof oauth.ResponseBodyError && e.error === 'invalid_grant');
  // The gateway's introspection sees the access token revoked.
  const res = await fetch(`${s.url}/introspect`, { method: 'POST',
    headers: { authorization: `Basic ${Buffer.from('agent-gateway:gateway-dev-secret').toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token: tok.access_token }) });
  assert.deepEqual(await res.json(), { active: false });
  assert.equal(s.c.sql(`SELECT count(*) FROM audit WHERE action = 'authz.code_reused'`), '1');
});

test('the attacker: a wrong verifier, another client, another redirect_uri', async () => {
  const a = seedCode();
  await assert.rejects(oauth.processAuthorizationCodeResponse(as, client,
    await redeem(a, { verifier: oauth.generateRandomCodeVerifier() })),
  (e) => e.error === 'invalid_grant' && /PKCE/.test(e.error_description));
  const b = seedCode();
  await assert.rejects(oauth.processAuthorizationCodeResponse(as, { client_id: 'other' },
    await redeem(b, { id: { client_id: 'other' } })),
  (e) => e.error === 'invalid_grant' && e.error_description === 'the code was issued to another client');
  const d = seedCode();
  const res = await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), callback(d.code),
    'http://127.0.0.1:43112/callback', d.verifier, { ...opts, additionalParameters: { resource: endpoint } });
  await assert.rejects(oauth.processAuthorizationCodeResponse(as, client, res),
    (e) => e.error === 'invalid_grant' && /redirect_uri/.test(e.error_description));
  assert.equal(s.c.sql(`SELECT count(*) FROM grants WHERE consent_id IN `
    + `('${a.cid}', '${b.cid}', '${d.cid}')`), '0');
});

test('the client revokes its refresh token (RFC 7009); another client cannot', async () => {
  const c = seedCode();
  const tok = await oauth.processAuthorizationCodeResponse(as, client, await redeem(c));
  await oauth.processRevocationResponse(await oauth.revocationRequest(as, { client_id: 'other' },
    oauth.None(), tok.refresh_token, opts));
  const still = await oauth.refreshTokenGrantRequest(as, client, oauth.None(), tok.refresh_token,
    { ...opts, additionalParameters: { resource: endpoint } });
  const fresh = await oauth.processRefreshTokenResponse(as, client, still);
  await oauth.processRevocationResponse(await oauth.revocationRequest(as, client, oauth.None(),
    fresh.refresh_token, opts));
  const gone = await oauth.refreshTokenGrantRequest(as, client, oauth.None(), fresh.refresh_token,
    { ...opts, additionalParameters: { resource: endpoint } });
  await assert.rejects(oauth.processRefreshTokenResponse(as, client, gone),
    (e) => e.error === 'invalid_grant' && /revoked/.test(e.error_description));
});

test('a client_id consentd does not know is a failed client authentication, whatever the grant type', async () => {
  const post = (fields) => fetch(`${s.url}/token`, { method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields) });
  // A gateway's grant type with a foreign client_id and no credentials: RFC 6749 §5.2.
  for (const client_id of ['stranger', 'https://evil.example/client.json']) {
    const res = await post({ grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      client_id, subject_token: 'x', subject_token_type: 'urn:ietf:params:oauth:token-type:id_token' });
    const body = await res.json();
    assert.equal(res.status, 401, `client_id ${client_id}: ${JSON.stringify(body)}`);
    assert.equal(body.error, 'invalid_client');
    assert.match(body.error_description, /client_id names no MCP client/);
  }
  // A client consentd knows asking for a grant type it has not: unsupported_grant_type.
  const res = await post({ grant_type: 'client_credentials', client_id: 'ide' });
  assert.equal(res.status, 400);
  assert.equal((await res.json()).error, 'unsupported_grant_type');
});
