// End to end (issue 30): the official MCP TypeScript SDK's client, @modelcontextprotocol/sdk
// 1.32.2, given nothing but the MCP endpoint's URL, signs a person in through consentd.
// Its Streamable HTTP transport meets /mcp/notes's 401, follows the challenge's
// resource_metadata (RFC 9728) to consentd's RFC 8414 metadata, uses a client-id URL
// (a Client ID Metadata Document served over real HTTPS by tests/lib/cimd-server.mjs),
// PKCE S256 and the RFC 8707 resource, and sends the person to /authorize.  The person's
// steps run in Chromium: the development IdP's sign-in and the consent page.  The
// browser comes back to the client's loopback redirect URI with code, state and iss;
// the SDK redeems the code (finishAuth), then refreshes (auth() with the stored refresh
// token), which rotates the refresh token: the old one is refused afterwards and takes
// the whole family with it.  The token is checked against consentd's JWKS: aud is the
// endpoint, client_id the client-id URL.  The SDK 1.32.2 does not check RFC 9207's iss
// itself (docs/notes/mcp-facts-review.md), so this test checks the iss the browser
// brought back; oauth4webapi's validateAuthResponse checks it in
// tests/integration/mcp_oauth4webapi.test.js.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { auth, UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startStack } from '../lib/stack.js';
import { launchBrowser, idpSignIn } from '../lib/browser.js';
import { startCimdServer, startCallback, mcpConfig, tokenPost } from '../lib/mcp.js';

const shots = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'build', 'e2e');
let s; let b; let cimd; let cb;
before(async () => {
  cimd = await startCimdServer();
  s = await startStack({ config: mcpConfig({ cimd }) });
  cb = await startCallback();
  b = await launchBrowser();
  mkdirSync(shots, { recursive: true });
});
after(async () => { await b?.close(); await cb?.stop(); await s?.stop(); await cimd?.stop(); });

// The SDK's OAuthClientProvider, as an MCP client implements it: everything it is told to
// keep, kept in memory; the authorization URL it is told to open, recorded.
function clientProvider({ clientMetadataUrl, redirectUrl }) {
  const kept = { state: randomBytes(16).toString('base64url') };
  return {
    kept,
    get redirectUrl() { return redirectUrl; },
    get clientMetadata() {
      return { client_name: 'MCP test client client', redirect_uris: [redirectUrl],
        grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'],
        token_endpoint_auth_method: 'none' };
    },
    clientMetadataUrl,
    state: () => kept.state,
    clientInformation: () => kept.client,
    saveClientInformation: (c) => { kept.client = c; },
    tokens: () => kept.tokens,
    saveTokens: (t) => { kept.tokens = t; },
    redirectToAuthorization: (u) => { kept.authorizationUrl = u; },
    saveCodeVerifier: (v) => { kept.verifier = v; },
    codeVerifier: () => kept.verifier,
    saveDiscoveryState: (d) => { kept.discovery = d; },
    discoveryState: () => kept.discovery,
    invalidateCredentials: (what) => { if (what === 'all' || what === 'tokens') kept.tokens = undefined; },
  };
}

const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'consentd-e2e', version: '1' } } };

test('the SDK client, given only the MCP URL, signs alice in through Chromium, gets a token for the endpoint and refreshes it', { timeout: 120000 }, async () => {
  const serverUrl = `${s.url}/mcp/notes`;
  const clientId = cimd.url('/mcp/client.json');
  const provider = clientProvider({ clientMetadataUrl: clientId, redirectUrl: cb.redirectUri });
  const jwks = createRemoteJWKSet(new URL(`${s.url}/.well-known/jwks.json`));

  // 1. The transport's first call: 401; the SDK discovers and starts the sign-in.
  const transport = new StreamableHTTPClientTransport(new URL(serverUrl), { authProvider: provider });
  await transport.start();
  await assert.rejects(transport.send(INITIALIZE), (e) => e instanceof UnauthorizedError);
  const { kept } = provider;
  assert.equal(kept.discovery.resourceMetadataUrl, `${s.url}/.well-known/oauth-protected-resource/mcp/notes`,
    'found through the 401\'s resource_metadata');
  assert.equal(kept.discovery.authorizationServerUrl, s.url);
  assert.equal(kept.client.client_id, clientId, 'a client-id URL, no registration');
  const a = kept.authorizationUrl;
  assert.equal(`${a.origin}${a.pathname}`, `${s.url}/authorize`);
  assert.equal(a.searchParams.get('resource'), serverUrl);
  assert.equal(a.searchParams.get('code_challenge_method'), 'S256');
  assert.equal(a.searchParams.get('state'), kept.state);
  assert.equal(a.searchParams.get('redirect_uri'), cb.redirectUri);

  // 2. The person, in Chromium: consentd's sign-in at the IdP, then the consent page.
  const page = await b.newPage();
  await page.goto(a.href);
  if (page.url().startsWith(s.idp.issuer)) await idpSignIn(page, { user: 'alice', backTo: s.url });
  await page.waitForURL(/\/consent\/[A-Za-z0-9_-]{22}$/);
  const text = await page.textContent('main');
  assert.match(text, /MCP test client client/, 'the client\'s name');
  assert.match(text, /named by the client/, 'a name the client chose itself is marked so');
  assert.match(text, /127\.0\.0\.1/, 'the host of its client-id URL, and where the answer goes');
  assert.match(text, /Team notes/, 'the resource behind the endpoint');
  await page.screenshot({ path: join(shots, 'mcp-consent-page.png'), fullPage: true });
  if (await page.$('input[name=offline]')) await page.check('input[name=offline]');
  const back = cb.next();
  await page.click('button[value=approve]');
  const answer = await back;
  await page.close();

  // 3. The answer at the loopback redirect URI: code, the state sent, iss = consentd.
  const code = answer.searchParams.get('code');
  assert.ok(code, `a code: ${answer.href}`);
  assert.equal(answer.searchParams.get('state'), kept.state);
  assert.equal(answer.searchParams.get('iss'), s.url, 'RFC 9207');

  // 4. The SDK redeems it (PKCE verifier, redirect_uri, resource, client_id).
  await transport.finishAuth(code);
  await transport.close();
  const first = kept.tokens;
  assert.ok(first?.access_token, 'an access token');
  assert.ok(first.refresh_token, 'a refresh token: the person let the client act while away');
  const { payload, protectedHeader } = await jwtVerify(first.access_token, jwks, { issuer: s.url, audience: serverUrl });
  assert.equal(protectedHeader.typ, 'at+jwt');
  assert.equal(protectedHeader.alg, 'ES256');
  assert.equal(payload.client_id, clientId);
  assert.equal(payload.aud, serverUrl);
  assert.ok(payload.sub, 'the person');
  assert.ok(payload.exp - payload.iat <= 3600, 'minutes long');
  assert.deepEqual(payload.scope.split(' ').sort(), ['read', 'write']);

  // 5. Refresh through the SDK: auth() finds the stored refresh token and uses it.
  assert.equal(await auth(provider, { serverUrl }), 'AUTHORIZED');
  const second = kept.tokens;
  assert.notEqual(second.access_token, first.access_token);
  assert.ok(second.refresh_token && second.refresh_token !== first.refresh_token, 'the refresh token rotated');
  const p2 = (await jwtVerify(second.access_token, jwks, { issuer: s.url, audience: serverUrl })).payload;
  assert.equal(p2.client_id, clientId);
  assert.equal(p2.sub, payload.sub);

  // 6. The spent refresh token again: refused, and the family ends (the new one too).
  const reused = await tokenPost(s.url, { grant_type: 'refresh_token', refresh_token: first.refresh_token,
    client_id: clientId, resource: serverUrl });
  assert.equal(reused.status, 400, reused.text);
  assert.equal(reused.body?.error, 'invalid_grant');
  const killed = await tokenPost(s.url, { grant_type: 'refresh_token', refresh_token: second.refresh_token,
    client_id: clientId, resource: serverUrl });
  assert.equal(killed.status, 400, killed.text);
  assert.equal(killed.body?.error, 'invalid_grant');

  // The code is spent: the same code again is refused (last: a replay also revokes what
  // the code gave, mcp_attacks.test.js).
  const again = await tokenPost(s.url, { grant_type: 'authorization_code', code, redirect_uri: cb.redirectUri,
    code_verifier: kept.verifier, client_id: clientId, resource: serverUrl });
  assert.equal(again.status, 400, again.text);
  assert.equal(again.body?.error, 'invalid_grant');

  // 7. The reuse above revoked the family's access tokens too: the gateway refuses this one
  //    (invalid_token, "grant revoked"; a live token goes through: mcp_gateway.test.js).
  const call = await fetch(serverUrl, { method: 'POST', headers: { authorization: `Bearer ${second.access_token}`,
    'content-type': 'application/json' }, body: JSON.stringify(INITIALIZE) });
  assert.equal(call.status, 401);
  assert.match(call.headers.get('www-authenticate'), /error="invalid_token", error_description="grant revoked"/);
});
