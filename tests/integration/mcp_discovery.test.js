// How an MCP client finds consentd (issue 30): RFC 9728 protected resource metadata for
// every [mcp.NAME], the 401 of /mcp/NAME whose challenge names it (RFC 9728 §5.1), and the
// RFC 8414 metadata, read by the official SDK's client (@modelcontextprotocol/sdk 1.32.2)
// exactly as it reads them: path-aware discovery first, its zod schemas, its check that the
// metadata's resource belongs to the server URL, and its transport's 401 handling up to
// the authorization URL it builds (the sign-in itself: tests/e2e/mcp_signin.test.js).
// A presented credential that is not consentd's access token for the endpoint is answered
// invalid_token naming the check (the gateway itself: mcp_gateway.test.js).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  discoverOAuthProtectedResourceMetadata, discoverAuthorizationServerMetadata, discoverOAuthServerInfo,
  selectResourceURL, auth, UnauthorizedError,
} from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { OAuthMetadataSchema, OAuthProtectedResourceMetadataSchema } from '@modelcontextprotocol/sdk/shared/auth.js';
import { startStack } from '../lib/stack.js';
import { startCimdServer, mcpConfig } from '../lib/mcp.js';

let s;
let cimd;
before(async () => {
  cimd = await startCimdServer();
  s = await startStack({ config: mcpConfig({ cimd }) });
});
after(async () => { await s?.stop(); await cimd?.stop(); });

const prmUrl = (name) => `${s.url}/.well-known/oauth-protected-resource/mcp/${name}`;
const challenge = (name, scope) => `Bearer resource_metadata="${prmUrl(name)}", scope="${scope}"`;

// A fetch that records what it was asked for.
function recordingFetch() {
  const urls = [];
  const f = (u, init) => { urls.push(String(u)); return fetch(u, init); };
  return { f, urls };
}

test('every [mcp.NAME] has RFC 9728 metadata at its path-aware well-known URI', async () => {
  for (const [name, scopes, title] of [['notes', ['read', 'write'], 'Team notes'], ['wiki', ['read', 'admin'], 'Wiki']]) {
    const r = await fetch(prmUrl(name));
    assert.equal(r.status, 200, name);
    assert.match(r.headers.get('content-type'), /^application\/json/);
    assert.match(r.headers.get('cache-control') || '', /max-age=300/);
    const doc = await r.json();
    assert.deepEqual(doc, {
      resource: `${s.url}/mcp/${name}`,          // RFC 9728 §3.3: the URI the path came from
      authorization_servers: [s.url],
      scopes_supported: scopes,
      bearer_methods_supported: ['header'],
      resource_name: title,
    });
    assert.doesNotThrow(() => OAuthProtectedResourceMetadataSchema.parse(doc));
  }
  // Nothing for a name that is no [mcp.NAME], nor at the root, nor below an endpoint.
  for (const p of ['/.well-known/oauth-protected-resource/mcp/nothing', '/.well-known/oauth-protected-resource',
    '/.well-known/oauth-protected-resource/mcp/notes/x', '/.well-known/oauth-protected-resource/mcp/']) {
    const r = await fetch(`${s.url}${p}`);
    assert.equal(r.status, 404, p);
    assert.equal((await r.json()).error, 'not_found', p);
  }
});

test('the SDK discovers the metadata from the MCP URL alone, path-aware first, and accepts its resource', async () => {
  const serverUrl = `${s.url}/mcp/notes`;
  const { f, urls } = recordingFetch();
  const prm = await discoverOAuthProtectedResourceMetadata(serverUrl, {}, f);
  assert.deepEqual(urls, [prmUrl('notes')], 'the first URL asked answers');
  assert.equal(prm.resource, serverUrl);
  // checkResourceAllowed inside: the metadata's resource belongs to the server URL.
  assert.equal((await selectResourceURL(serverUrl, {}, prm)).href, serverUrl);
  // The other endpoint's metadata would not pass that check for this URL.
  const wiki = await discoverOAuthProtectedResourceMetadata(`${s.url}/mcp/wiki`);
  await assert.rejects(selectResourceURL(serverUrl, {}, wiki), /does not match/);

  const info = await discoverOAuthServerInfo(serverUrl);
  assert.equal(info.authorizationServerUrl, s.url);
  const meta = info.authorizationServerMetadata;
  assert.ok(meta, 'RFC 8414 metadata found at the issuer');
  assert.doesNotThrow(() => OAuthMetadataSchema.parse(meta));
  assert.equal(meta.issuer, s.url);
  assert.equal(meta.authorization_endpoint, `${s.url}/authorize`);
  assert.ok(meta.response_types_supported.includes('code'));
  assert.deepEqual(meta.code_challenge_methods_supported, ['S256']);
  assert.equal(meta.client_id_metadata_document_supported, true);
  assert.ok(meta.token_endpoint_auth_methods_supported.includes('none'));
  assert.equal(meta.registration_endpoint, undefined, 'no dynamic client registration');
  // discoverAuthorizationServerMetadata on its own: the RFC 8414 document, first URL tried.
  const { f: f2, urls: u2 } = recordingFetch();
  assert.deepEqual(await discoverAuthorizationServerMetadata(s.url, { fetchFn: f2 }), meta);
  assert.deepEqual(u2, [`${s.url}/.well-known/oauth-authorization-server`]);
});

test('/mcp/NAME without a token: 401 whose challenge names the metadata, for POST, GET and DELETE', async () => {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} });
  for (const [name, scope] of [['notes', 'read write'], ['wiki', 'read admin']]) {
    for (const method of ['POST', 'GET', 'DELETE']) {
      const r = await fetch(`${s.url}/mcp/${name}`, {
        method,
        headers: method === 'POST' ? { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }
          : { accept: 'text/event-stream' },
        body: method === 'POST' ? body : undefined,
      });
      assert.equal(r.status, 401, `${method} ${name}`);
      assert.equal(r.headers.get('www-authenticate'), challenge(name, scope), `${method} ${name}`);
      assert.match(r.headers.get('content-type'), /^application\/json/);
      const j = await r.json();
      assert.equal(j.jsonrpc, '2.0');
      assert.equal(j.id, null);
      assert.equal(j.error.code, -32001);
      assert.match(j.error.message, /access token is required/);
    }
  }
  // An unknown endpoint is 404 whatever the method; another method is 405.
  for (const method of ['POST', 'GET', 'DELETE']) {
    const r = await fetch(`${s.url}/mcp/nothing`, { method });
    assert.equal(r.status, 404, method);
    assert.equal(r.headers.get('www-authenticate'), null);
    assert.equal((await r.json()).error, 'not_found');
  }
  const put = await fetch(`${s.url}/mcp/notes`, { method: 'PUT' });
  assert.equal(put.status, 405);
  assert.match(put.headers.get('allow'), /POST/);
  const deeper = await fetch(`${s.url}/mcp/notes/x`, { method: 'POST' });
  assert.equal(deeper.status, 404);
  assert.match(deeper.headers.get('content-type'), /^application\/json/);
});

test('/mcp/NAME with a credential that is not a valid access token: 401 invalid_token naming the check, never let through', async () => {
  // The gateway (issue 31) names the check that refused it.
  const header = (w, why) => `Bearer error="invalid_token", error_description="${why}", `
    + `resource_metadata="${prmUrl(w)}", scope="read write"`;
  const whyOf = (authz) => (authz.startsWith('Basic') ? 'the Authorization header is not Bearer <token> or DPoP <token>'
    : 'not a consentd access token');
  // A token that names consentd's key and issuer and the endpoint as its audience (signed
  // by another key: a valid one comes from the token leg, mcp_oauth4webapi.test.js).
  const { SignJWT, generateKeyPair } = await import('jose');
  const { keys } = await (await fetch(`${s.url}/.well-known/jwks.json`)).json();
  const { privateKey } = await generateKeyPair('ES256');
  const forged = await new SignJWT({ aud: `${s.url}/mcp/notes`, scope: 'read write', client_id: cimd.url('/mcp/client.json') })
    .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: keys[0].kid }).setIssuer(s.url).setSubject('alice')
    .setIssuedAt().setExpirationTime('5m').sign(privateKey);
  for (const authz of ['Bearer not-a-token', `Bearer ${forged}`, `DPoP ${forged}`, 'Basic YTpi']) {
    for (const method of ['POST', 'GET', 'DELETE']) {
      const r = await fetch(`${s.url}/mcp/notes`, { method, headers: { authorization: authz, 'content-type': 'application/json' },
        body: method === 'POST' ? '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' : undefined });
      assert.equal(r.status, 401, `${method} ${authz.slice(0, 12)}`);
      assert.equal(r.headers.get('www-authenticate'), header('notes', whyOf(authz)));
      const j = await r.json();
      assert.equal(j.error.code, -32001);
      assert.equal(j.error.message, whyOf(authz));
    }
  }
});

test('the SDK transport without a token gets the 401, follows resource_metadata, and starts a CIMD sign-in', async () => {
  const serverUrl = new URL(`${s.url}/mcp/notes`);
  // Without an auth provider: the transport's own error, status 401.
  const bare = new StreamableHTTPClientTransport(serverUrl);
  await bare.start();
  await assert.rejects(bare.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
    protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } }),
  (e) => e instanceof StreamableHTTPError && e.code === 401);
  await bare.close();

  // With a provider whose client id is a client-id URL: auth() from the challenge to the
  // authorization URL it would send the person to (the rest is mcp_signin.test.js).
  const saved = {};
  const clientMetadataUrl = cimd.url('/mcp/client.json');
  const provider = {
    get redirectUrl() { return 'http://127.0.0.1:33418/callback'; },
    get clientMetadata() { return { redirect_uris: ['http://127.0.0.1:33418/callback'], client_name: 'x' }; },
    clientMetadataUrl,
    clientInformation: () => saved.client,
    saveClientInformation: (c) => { saved.client = c; },
    tokens: () => undefined,
    saveTokens: (t) => { saved.tokens = t; },
    redirectToAuthorization: (u) => { saved.authorizationUrl = u; },
    saveCodeVerifier: (v) => { saved.verifier = v; },
    codeVerifier: () => saved.verifier,
    saveDiscoveryState: (d) => { saved.discovery = d; },
    discoveryState: () => saved.discovery,
  };
  const t = new StreamableHTTPClientTransport(serverUrl, { authProvider: provider });
  await t.start();
  await assert.rejects(t.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
    protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } }),
  (e) => e instanceof UnauthorizedError);
  await t.close();
  assert.equal(saved.discovery.resourceMetadataUrl, prmUrl('notes'), 'found through the challenge');
  assert.equal(saved.discovery.authorizationServerUrl, s.url);
  assert.equal(saved.client.client_id, clientMetadataUrl, 'the client-id URL, no registration');
  const a = saved.authorizationUrl;
  assert.equal(`${a.origin}${a.pathname}`, `${s.url}/authorize`);
  const q = Object.fromEntries(a.searchParams);
  assert.equal(q.response_type, 'code');
  assert.equal(q.client_id, clientMetadataUrl);
  assert.equal(q.code_challenge_method, 'S256');
  assert.match(q.code_challenge, /^[A-Za-z0-9_-]{43}$/);
  assert.equal(q.redirect_uri, 'http://127.0.0.1:33418/callback');
  assert.equal(q.resource, `${s.url}/mcp/notes`, 'RFC 8707: the metadata\'s resource, verbatim');
  assert.equal(q.scope, 'read write', 'the challenge\'s scope');
});

test('[mcp] cimd_allow = none: no client_id_metadata_document_supported, so the SDK does not use a client-id URL', async () => {
  const t = await startStack({ config: mcpConfig({ mcp: { cimd_allow: 'none' } }) });
  try {
    const meta = await (await fetch(`${t.url}/.well-known/oauth-authorization-server`)).json();
    assert.equal(meta.client_id_metadata_document_supported, undefined);
    assert.equal(meta.registration_endpoint, undefined);
    assert.equal(meta.authorization_endpoint, `${t.url}/authorize`);
    // The SDK falls back to dynamic registration, which consentd does not offer.
    const saved = {};
    const provider = {
      get redirectUrl() { return 'http://127.0.0.1:33418/callback'; },
      get clientMetadata() { return { redirect_uris: ['http://127.0.0.1:33418/callback'] }; },
      clientMetadataUrl: 'https://tools.example.com/mcp/client.json',
      clientInformation: () => saved.client,
      saveClientInformation: (c) => { saved.client = c; },
      tokens: () => undefined,
      saveTokens: () => {},
      redirectToAuthorization: (u) => { saved.authorizationUrl = u; },
      saveCodeVerifier: () => {},
      codeVerifier: () => '',
    };
    await assert.rejects(auth(provider, { serverUrl: `${t.url}/mcp/notes` }), /does not support dynamic client registration/);
    assert.equal(saved.authorizationUrl, undefined);
  } finally { await t.stop(); }
});
