// oauth4webapi 3.x (panva's strict OAuth client) as an MCP client of consentd (issue 30):
// RFC 8414 discovery with its issuer check, the code flow with PKCE S256 and the RFC 8707
// resource on both legs, validateAuthResponse with RFC 9207's iss (consentd advertises
// authorization_response_iss_parameter_supported, so a response without iss or with
// another one is refused by the client), refresh rotation (the spent refresh token is
// refused and ends the family), and a mix-up: an authorization response from consentd
// handed to a client that believes it talks to another authorization server is refused.
// The person's steps run over plain HTTP through the development IdP (tests/lib/mcp.js
// authorizeHttp, tests/lib/weblogin.js).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import '../lib/webcrypto.js';   // Node 18 (Debian 12): oauth4webapi needs the Web Crypto global
import * as oauth from 'oauth4webapi';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { startStack } from '../lib/stack.js';
import { CookieJar } from '../lib/idplogin.js';
import { consentdLogin } from '../lib/weblogin.js';
import { startCimdServer, mcpConfig, authorizeHttp } from '../lib/mcp.js';

const opts = { [oauth.allowInsecureRequests]: true };   // consentd on http://127.0.0.1 in tests
const REDIRECT = 'http://127.0.0.1:33418/callback';

let s; let cimd; let as; let jar;
before(async () => {
  cimd = await startCimdServer();
  s = await startStack({ config: mcpConfig({ cimd }) });
  const issuer = new URL(s.url);
  as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { ...opts, algorithm: 'oauth2' }));
  ({ jar } = await consentdLogin({ url: s.url, user: 'alice', password: 'alice-password', jar: new CookieJar() }));
});
after(async () => { await s?.stop(); await cimd?.stop(); });

const client = () => ({ client_id: cimd.url('/mcp/client.json') });
const RESOURCE = () => `${s.url}/mcp/notes`;

// The first leg as oauth4webapi's user builds it -> { redirect (URL), verifier, state }.
async function authorize({ scope = 'read write', resource = RESOURCE(), select } = {}) {
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const u = new URL(as.authorization_endpoint);
  u.searchParams.set('response_type', 'code');
  u.searchParams.set('client_id', client().client_id);
  u.searchParams.set('redirect_uri', REDIRECT);
  u.searchParams.set('state', state);
  u.searchParams.set('code_challenge', await oauth.calculatePKCECodeChallenge(verifier));
  u.searchParams.set('code_challenge_method', 'S256');
  u.searchParams.set('scope', scope);
  u.searchParams.set('resource', resource);
  const r = await authorizeHttp({ url: s.url, jar, authorizeUrl: u.href, user: 'alice', select });
  assert.ok(r.redirect, `back at the client: ${r.status} ${r.text?.slice(0, 300)}`);
  return { redirect: r.redirect, verifier, state };
}

async function redeem({ redirect, verifier, state }) {
  const params = oauth.validateAuthResponse(as, client(), redirect, state);
  const res = await oauth.authorizationCodeGrantRequest(as, client(), oauth.None(), params, REDIRECT, verifier,
    { ...opts, additionalParameters: { resource: RESOURCE() } });
  return oauth.processAuthorizationCodeResponse(as, client(), res);
}

const refresh = async (rt, more = {}) => oauth.processRefreshTokenResponse(as, client(),
  await oauth.refreshTokenGrantRequest(as, client(), oauth.None(), rt,
    { ...opts, additionalParameters: { resource: RESOURCE(), ...more } }));

// oauth4webapi's refusal of a token endpoint answer: the RFC 6749 error code.
async function oauthError(p) {
  try { await p; } catch (e) {
    if (e instanceof oauth.ResponseBodyError) return e.error;
    throw e;
  }
  assert.fail('the token endpoint accepted it');
}

test('discovery: the strict client accepts consentd\'s metadata (issuer checked), with what an MCP client needs', () => {
  assert.equal(as.issuer, s.url);
  assert.equal(as.authorization_endpoint, `${s.url}/authorize`);
  assert.deepEqual(as.code_challenge_methods_supported, ['S256']);
  assert.equal(as.authorization_response_iss_parameter_supported, true);
  assert.ok(as.grant_types_supported.includes('authorization_code'));
  assert.ok(as.token_endpoint_auth_methods_supported.includes('none'));
});

test('code flow with PKCE, iss and resource; the token is for the endpoint; refresh rotates, and reuse ends the family', async () => {
  const jwks = createRemoteJWKSet(new URL(as.jwks_uri));
  const f = await authorize();
  assert.equal(f.redirect.searchParams.get('iss'), s.url);
  const tok = await redeem(f);
  assert.equal(tok.token_type.toLowerCase(), 'bearer');
  assert.ok(tok.refresh_token, 'a refresh token (the person let the client act while away)');
  const { payload } = await jwtVerify(tok.access_token, jwks, { issuer: s.url, audience: RESOURCE(), typ: 'at+jwt' });
  assert.equal(payload.client_id, client().client_id);
  assert.deepEqual(payload.scope.split(' ').sort(), ['read', 'write']);

  // Rotation: a new refresh token, the same audience; narrowing the scope is allowed.
  const t2 = await refresh(tok.refresh_token, { scope: 'read' });
  assert.ok(t2.refresh_token && t2.refresh_token !== tok.refresh_token, 'rotated');
  const p2 = (await jwtVerify(t2.access_token, jwks, { issuer: s.url, audience: RESOURCE() })).payload;
  assert.equal(p2.scope, 'read');
  assert.equal(p2.client_id, client().client_id);
  // The spent one again: refused, and the family it belongs to ends.
  assert.equal(await oauthError(refresh(tok.refresh_token)), 'invalid_grant');
  assert.equal(await oauthError(refresh(t2.refresh_token)), 'invalid_grant');
});

test('validateAuthResponse with iss: consentd\'s answers pass, an answer without iss or with another issuer is refused', async () => {
  const f = await authorize();
  // consentd's answer as it came: valid for this client.
  assert.doesNotThrow(() => oauth.validateAuthResponse(as, client(), f.redirect, f.state));
  // The same answer with iss removed: refused (consentd says it always sends iss).
  const noIss = new URL(f.redirect);
  noIss.searchParams.delete('iss');
  assert.throws(() => oauth.validateAuthResponse(as, client(), noIss, f.state), /"iss" \(issuer\) missing/);
  // With another authorization server's issuer: refused.
  const other = new URL(f.redirect);
  other.searchParams.set('iss', s.idp.issuer);
  assert.throws(() => oauth.validateAuthResponse(as, client(), other, f.state), /unexpected "iss"/);
  // An error answer carries iss too: the client gets to read the error only because it passed.
  const bad = new URL(as.authorization_endpoint);
  for (const [k, v] of Object.entries({ response_type: 'code', client_id: client().client_id, redirect_uri: REDIRECT,
    state: 'st-err', code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'plain',
    resource: RESOURCE() })) bad.searchParams.set(k, v);
  const e = await authorizeHttp({ url: s.url, jar, user: 'alice', authorizeUrl: bad.href });
  assert.ok(e.redirect, `${e.status} ${e.text?.slice(0, 200)}`);
  assert.equal(e.redirect.searchParams.get('iss'), s.url);
  assert.throws(() => oauth.validateAuthResponse(as, client(), e.redirect, 'st-err'),
    (err) => err instanceof oauth.AuthorizationResponseError && err.error === 'invalid_request');
});

test('mix-up: a client that began with another authorization server refuses consentd\'s answer (iss), and cannot redeem it there', async () => {
  // The other authorization server: the development IdP, a real one, with its own metadata.
  const otherIssuer = new URL(s.idp.issuer);
  const other = await oauth.processDiscoveryResponse(otherIssuer,
    await oauth.discoveryRequest(otherIssuer, { ...opts, algorithm: 'oidc' }));
  const f = await authorize();
  assert.throws(() => oauth.validateAuthResponse({ ...other, authorization_response_iss_parameter_supported: true },
    client(), f.redirect, f.state), /unexpected "iss"/);
  assert.throws(() => oauth.validateAuthResponse(other, client(), f.redirect, f.state), /unexpected "iss"/,
    'iss is compared whenever present');
  // And the honest client still redeems it at consentd: the answer itself was good.
  const tok = await redeem(f);
  assert.ok(tok.access_token);
});
