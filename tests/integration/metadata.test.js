// RFC 8414 metadata held against what consentd does, from the outside: every field is
// checked by a probe here (a field without a probe fails the test), every endpoint,
// grant type, client authentication method and authorization_details type that is
// advertised works end to end, and what consentd does not advertise does not work:
// other grant types, client_secret_post, other response types and PKCE methods, other
// details types, dynamic client registration.
// It runs twice: with the gateway on client_secret_basic (the default) and on
// private_key_jwt (RFC 7523, [gateway] token_endpoint_auth = private_key_jwt).  Both have
// an MCP endpoint ([mcp.notes]), a client-id URL served by tests/lib/cimd-server.mjs and a
// [client.tool] on private_key_jwt, for the MCP clients' fields (issue 30): the
// authorization endpoint, code with S256, iss in every answer, client-id metadata
// documents, none and private_key_jwt at the token endpoint, and the new grant types.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPair, exportJWK, SignJWT } from 'jose';
import { startVaultStack, signedInJars } from '../lib/vaultstack.js';
import { DEFAULT_USERS } from '../lib/idp.js';
import { req, postForm } from '../lib/weblogin.js';
import { basicAuth } from '../lib/idplogin.js';
import { pollExchange, TOKEN_EXCHANGE, TT_ACCESS_TOKEN, CLIENT_ASSERTION_TYPE } from '../lib/gateway.js';
import { example } from '../lib/example.js';
import { startCimdServer, codeFlow, tokenPost, decodeJwt, CIMD_TEST_TIMEOUTS } from '../lib/mcp.js';

// EdDSA and RFC 9864's fully specified Ed25519 (what oauth4webapi 3 signs with), both
// advertised and both working (issue 28 item 6).
const ALGS = ['ES256', 'PS256', 'EdDSA', 'Ed25519'];
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

// The gateway's key pairs, one per algorithm, and a JWKS file with their public halves.
async function gatewayKeys(dir) {
  const keys = {};
  const jwks = { keys: [] };
  for (const alg of ALGS) {
    const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
    keys[alg] = privateKey;
    jwks.keys.push({ ...(await exportJWK(publicKey)), kid: `gw-${alg}`, alg, use: 'sig' });
  }
  const file = join(dir, 'gateway-jwks.json');
  writeFileSync(file, JSON.stringify(jwks));
  return { keys, file };
}

for (const mode of ['client_secret_basic', 'private_key_jwt']) describe(`gateway on ${mode}`, () => {
  const pkjwt = mode === 'private_key_jwt';
  let keyDir;
  let gwKeys;
  const CONFIG = {
    'action.github.create_issue': { description: 'Open an issue', scope: 'issues:write', approval: 'required',
    approval_enforced_by: 'gateway' },  // the gateway holds the released token to the call (#32)
  };
  const details = (params, type = 'agent_action') => JSON.stringify([{ type, action: 'create_issue', parameters: params }]);

  let v;
  let meta;
  let cimd;
  before(async () => {
    keyDir = mkdtempSync(join(tmpdir(), 'consentd-gwkeys-'));
    gwKeys = await gatewayKeys(keyDir);
    cimd = await startCimdServer();
    // MCP clients (issue 30): an endpoint, client-id URLs from the test server, and a
    // [client.tool] that authenticates with private_key_jwt (the same key pairs).
    const MCP = {
      'mcp.notes': { resource: 'notes' },
      mcp: { cimd_ca_file: cimd.ca, cimd_allow_loopback: 'true', ...CIMD_TEST_TIMEOUTS },
      'client.tool': { name: 'Tool', redirect_uris: 'http://127.0.0.1/callback',
        token_endpoint_auth: 'private_key_jwt', jwks_file: gwKeys.file },
    };
    const config = !pkjwt ? { ...CONFIG, ...MCP } : {
      ...CONFIG, ...MCP,
      gateway: { token_endpoint_auth: 'private_key_jwt', jwks_file: gwKeys.file, client_secret: null },
    };
    const gatewayOptions = pkjwt ? { assertionKey: gwKeys.keys.ES256, assertionKid: 'gw-ES256' } : {};
    v = await startVaultStack({ accessTokenTTL: 60, config, users: DEFAULT_USERS, gatewayOptions });
    const res = await fetch(`${v.url}/.well-known/oauth-authorization-server`);
    assert.equal(res.status, 200);
    meta = await res.json();
  });
  after(async () => { await v?.stop(); await cimd?.stop(); if (keyDir) rmSync(keyDir, { recursive: true, force: true }); });

  const jarOf = signedInJars();

  // A live, offline consent of alice for butler on github: a grant and a refresh token.
  let held;
  async function offlineGrant() {
    if (held) return held;
    const jar = await jarOf(v.url, 'alice');
    const ask = { subjectToken: await v.idToken('alice'), audience: 'github', scope: 'issues:read issues:write', agentId: 'butler' };
    const first = await v.gw.exchange(ask);
    assert.equal(first.body?.error, 'consent_required', first.text);
    const c = await v.connectHttp({ jar, consentUri: first.body.consent_uri, user: 'alice', offline: true });
    assert.equal(c.first?.status, 303, `connect: ${c.text?.slice(0, 300)}`);
    const g = await pollExchange(v.gw, ask);
    assert.equal(g.status, 200, g.text);
    assert.ok(g.body.refresh_token, 'an offline consent gives a refresh token');
    held = { ask, jar, grant: g.body.access_token, refresh: g.body.refresh_token };
    return held;
  }

  // MCP clients (issue 30).  The sign-in's first leg for a client-id URL (public) or
  // [client.tool] (private_key_jwt), the person alice approving; and the code redeemed.
  const RESOURCE = () => `${v.url}/mcp/notes`;
  const PUBLIC = () => cimd.url('/mcp/client.json');
  async function mcpCode({ clientId = PUBLIC(), more = {} } = {}) {
    const jar = await jarOf(v.url, 'alice');
    return codeFlow({ url: v.url, jar, clientId, resource: RESOURCE(), scope: 'read', more });
  }
  const toolAssertion = (alg = 'ES256', claims = {}) => v.gw.assertion({ iss: 'tool', sub: 'tool', ...claims },
    { alg, kid: `gw-${alg}` }, gwKeys.keys[alg]);
  async function redeem(f, { clientId = PUBLIC(), auth = {} } = {}) {
    return tokenPost(v.url, { grant_type: 'authorization_code', code: f.q.code, redirect_uri: 'http://127.0.0.1:33418/callback',
      code_verifier: f.verifier, resource: RESOURCE(), client_id: clientId, ...auth });
  }
  // A public client's tokens for notes (alice), once: a refresh token among them.
  let mcpHeld;
  async function mcpTokens() {
    if (mcpHeld) return mcpHeld;
    const f = await mcpCode();
    assert.ok(f.q?.code, `a code: ${JSON.stringify(f.q ?? f.text?.slice(0, 300))}`);
    const t = await redeem(f);
    assert.equal(t.status, 200, t.text);
    mcpHeld = t.body;
    return mcpHeld;
  }

  // Credentials in the body (client_secret_post) instead of the Basic header.
  const postAuth = (path, params) => v.gw.post(path, { client_id: 'agent-gateway', client_secret: 'gateway-dev-secret', ...params }, null);

  // The authentication method this configuration leaves out, done right otherwise.
  const otherMethod = async (path, params) => (pkjwt
    ? v.gw.post(path, params, basicAuth('agent-gateway', 'gateway-dev-secret'))
    : v.gw.post(path, { ...params, client_assertion_type: CLIENT_ASSERTION_TYPE,
      client_assertion: await v.gw.assertion({}, { kid: 'gw-ES256' }, gwKeys.keys.ES256) }, null));

  // private_key_jwt of the MCP client [client.tool] at /token or /revoke, algorithm by
  // algorithm: an authenticated client whose code is bad hears invalid_grant (at /revoke, an
  // unknown token is 200), an unauthenticated one invalid_client.
  async function toolAlgs(val, ep) {
    assert.deepEqual(val, ALGS);
    const revoke = ep === 'revocation_endpoint';
    const path = revoke ? '/revoke' : '/token';
    const code = revoke ? { token: 'not-a-token', client_id: 'tool', client_assertion_type: CLIENT_ASSERTION_TYPE }
      : { grant_type: 'authorization_code', code: 'not-a-code', redirect_uri: 'http://127.0.0.1:33418/callback',
        code_verifier: 'v'.repeat(43), resource: RESOURCE(), client_id: 'tool', client_assertion_type: CLIENT_ASSERTION_TYPE };
    for (const alg of val) {
      const r = await tokenPost(v.url, { ...code, client_assertion: await toolAssertion(alg) }, { path });
      // Authenticated: /revoke answers 200 for an unknown token, /token invalid_grant for a bad code.
      assert.equal(r.status, revoke ? 200 : 400, `${alg}: ${r.text}`);
      if (!revoke) assert.equal(r.body?.error, 'invalid_grant', alg);
    }
    const now = Math.floor(Date.now() / 1000);
    const claims = { iss: 'tool', sub: 'tool', aud: v.url, iat: now, exp: now + 60 };
    const hs = await new SignJWT({ ...claims, jti: 'hs-tool' }).setProtectedHeader({ alg: 'HS256', kid: 'gw-ES256' })
      .sign(new TextEncoder().encode('x'.repeat(40)));
    const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
    for (const [what, a] of [['HS256', hs], ['none', `${b64({ alg: 'none' })}.${b64({ ...claims, jti: 'none-tool' })}.`]]) {
      const r = await tokenPost(v.url, { ...code, client_assertion: a }, { path });
      assert.equal(r.status, 401, `${what}: ${r.text}`);
      assert.equal(r.body?.error, 'invalid_client', what);
    }
  }

  // One probe per metadata field; the test fails on a field nobody probes.
  const probes = {
    issuer: async (val) => {
      assert.equal(val, v.url);
      const { grant } = await offlineGrant();
      assert.equal((await v.gw.verify(grant)).payload.iss, val, 'grants carry this issuer');
    },
    jwks_uri: async (val) => {
      assert.equal(val, `${v.url}/.well-known/jwks.json`);
      const r = await fetch(val);
      assert.equal(r.status, 200);
      const { keys } = await r.json();
      assert.ok(keys.length >= 1 && keys.every((k) => k.kty === 'EC' && k.d === undefined));
    },
    authorization_endpoint: async (val) => {
      assert.equal(val, `${v.url}/authorize`);
      // A client-id URL's sign-in there gives a code for the resource, with state and iss.
      const f = await mcpCode();
      assert.ok(f.redirect, `sent back to the client: ${f.status} ${f.text?.slice(0, 300)}`);
      assert.equal(`${f.redirect.origin}${f.redirect.pathname}`, 'http://127.0.0.1:33418/callback');
      assert.match(f.q.code || '', /^[A-Za-z0-9_-]{20,}$/, JSON.stringify(f.q));
      assert.equal(f.q.state, f.state);
      // No other authorization endpoint.
      for (const p of ['/oauth/authorize', '/auth', '/oauth2/authorize']) {
        assert.equal((await fetch(`${v.url}${p}?response_type=code&client_id=${encodeURIComponent(PUBLIC())}`)).status, 404, p);
      }
    },
    response_types_supported: async (val) => {
      assert.deepEqual(val, ['code']);
      // Every other response type goes back to the client as unsupported_response_type.
      for (const rt of ['token', 'id_token', 'code id_token', 'code token']) {
        const f = await mcpCode({ more: { response_type: rt } });
        assert.ok(f.redirect, `${rt}: ${f.status} ${f.text?.slice(0, 200)}`);
        assert.equal(f.q.error, 'unsupported_response_type', rt);
        assert.equal(f.q.code, undefined, rt);
      }
    },
    code_challenge_methods_supported: async (val) => {
      assert.deepEqual(val, ['S256']);
      // plain, another method and no challenge at all: refused back at the client.
      for (const [what, more] of [['plain', { code_challenge_method: 'plain', code_challenge: 'a'.repeat(43) }],
        ['S512', { code_challenge_method: 'S512' }], ['no challenge', { code_challenge: null, code_challenge_method: null }],
        ['no method', { code_challenge_method: null }]]) {
        const f = await mcpCode({ more });
        assert.ok(f.redirect, `${what}: ${f.status} ${f.text?.slice(0, 200)}`);
        assert.equal(f.q.error, 'invalid_request', what);
        assert.equal(f.q.code, undefined, what);
      }
      // With S256 the verifier is checked at the token endpoint: another one is refused.
      const f = await mcpCode();
      const bad = await redeem({ ...f, verifier: `${f.verifier.slice(0, -1)}${f.verifier.endsWith('A') ? 'B' : 'A'}` });
      assert.equal(bad.status, 400, bad.text);
      assert.equal(bad.body?.error, 'invalid_grant');
    },
    authorization_response_iss_parameter_supported: async (val) => {
      assert.equal(val, true);
      // Every authorization response carries iss = the issuer: a success and an error.
      const ok = await mcpCode();
      assert.ok(ok.q?.code, JSON.stringify(ok.q));
      assert.equal(ok.q.iss, v.url);
      const err = await mcpCode({ more: { resource: `${v.url}/mcp/nothing` } });
      assert.ok(err.q?.error, `${err.status} ${err.text?.slice(0, 200)}`);
      assert.equal(err.q.error, 'invalid_target');
      assert.equal(err.q.iss, v.url);
    },
    client_id_metadata_document_supported: async (val) => {
      assert.equal(val, true);
      // A client-id URL nobody registered signs in: its document fetched from the URL.
      const before = await cimd.hits('/mcp/other.json');
      const f = await mcpCode({ clientId: cimd.url('/mcp/other.json') });
      assert.ok(f.q?.code, `${JSON.stringify(f.q)} ${f.text?.slice(0, 300) ?? ''}`);
      assert.ok(await cimd.hits('/mcp/other.json') > before, 'the document was fetched');
      // No dynamic client registration instead.
      assert.equal(meta.registration_endpoint, undefined);
      for (const p of ['/register', '/oauth/register', '/connect/register']) {
        const r = await fetch(`${v.url}${p}`, { method: 'POST', headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ redirect_uris: ['http://127.0.0.1/cb'] }) });
        assert.ok([404, 405].includes(r.status), `${p}: ${r.status}`);
      }
    },
    token_endpoint: async (val) => {
      assert.equal(val, `${v.url}/token`);
      // The grant types probe exercises it fully.
    },
    introspection_endpoint: async (val) => {
      assert.equal(val, `${v.url}/introspect`);
      const { grant } = await offlineGrant();
      const r = await v.gw.introspect(grant);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.active, true);
      assert.equal((await v.gw.introspect('not-a-token')).body.active, false);
    },
    revocation_endpoint: async (val) => {
      assert.equal(val, `${v.url}/revoke`);
      // A grant of its own (refreshed from the held refresh token) is revoked and dies at once.
      const { refresh } = await offlineGrant();
      const r = await v.gw.refresh(refresh);
      assert.equal(r.status, 200, r.text);
      held.refresh = r.body.refresh_token;
      const rv = await v.gw.revoke(r.body.access_token);
      assert.equal(rv.status, 200, rv.text);
      assert.equal((await v.gw.introspect(r.body.access_token)).body.active, false);
    },
    grant_types_supported: async (val) => {
      assert.deepEqual([...val].sort(), ['authorization_code', 'refresh_token', TOKEN_EXCHANGE, JWT_BEARER].sort());
      // token-exchange: flow A gave the held grant; refresh_token renews it.
      const { refresh } = await offlineGrant();
      const r = await v.gw.refresh(refresh);
      assert.equal(r.status, 200, r.text);
      assert.ok(r.body.access_token && r.body.refresh_token);
      held.refresh = r.body.refresh_token;
      held.grant = r.body.access_token;
      // authorization_code: an MCP client's code gives its tokens for the resource; its
      // refresh token renews them (rotated).
      const t = await mcpTokens();
      assert.equal(decodeJwt(t.access_token).aud, RESOURCE());
      const rr = await tokenPost(v.url, { grant_type: 'refresh_token', refresh_token: t.refresh_token,
        client_id: PUBLIC(), resource: RESOURCE() });
      assert.equal(rr.status, 200, rr.text);
      assert.ok(rr.body.refresh_token && rr.body.refresh_token !== t.refresh_token, 'rotated');
      mcpHeld = { ...t, ...rr.body };
      // jwt-bearer (an ID-JAG, tests/integration/mcp_idjag.test.js): served -- a bad
      // assertion is a bad grant, not an unsupported grant type.
      const jb = await tokenPost(v.url, { grant_type: JWT_BEARER, assertion: 'e30.e30.x', client_id: PUBLIC(),
        resource: RESOURCE() });
      assert.equal(jb.status, 400, jb.text);
      assert.notEqual(jb.body?.error, 'unsupported_grant_type', jb.text);
      assert.ok(['invalid_grant', 'invalid_request'].includes(jb.body?.error), jb.text);
      // Nothing else is a grant type here.
      for (const gt of ['client_credentials', 'password', 'implicit',
        'urn:ietf:params:oauth:grant-type:device_code', 'urn:openid:params:grant-type:ciba']) {
        const x = await v.gw.post('/token', { grant_type: gt, scope: 'issues:read' });
        assert.equal(x.status, 400, `${gt}: ${x.text}`);
        assert.equal(x.body?.error, 'unsupported_grant_type', gt);
      }
    },
    token_endpoint_auth_methods_supported: async (val) => {
      assert.deepEqual(val, pkjwt ? ['none', 'private_key_jwt'] : ['client_secret_basic', 'none', 'private_key_jwt']);
      // none: a public MCP client redeems its code with its client_id alone (grant_types_supported
      // does it too); private_key_jwt: [client.tool] with an assertion, and not without one.
      const f = await mcpCode({ clientId: 'tool' });
      assert.ok(f.q?.code, `${JSON.stringify(f.q)} ${f.text?.slice(0, 300) ?? ''}`);
      const naked = await redeem(f, { clientId: 'tool' });
      assert.equal(naked.status, 401, `private_key_jwt client without an assertion: ${naked.text}`);
      assert.equal(naked.body?.error, 'invalid_client');
      const f2 = await mcpCode({ clientId: 'tool' });
      const tool = await redeem(f2, { clientId: 'tool',
        auth: { client_assertion_type: CLIENT_ASSERTION_TYPE, client_assertion: await toolAssertion() } });
      assert.equal(tool.status, 200, tool.text);
      assert.equal(decodeJwt(tool.body.access_token).client_id, 'tool');
      // The gateway: exactly its own method.
      const { refresh } = await offlineGrant();
      const post = await postAuth('/token', { grant_type: 'refresh_token', refresh_token: refresh });
      assert.equal(post.status, 401, `client_secret_post is not offered: ${post.text}`);
      assert.equal(post.body?.error, 'invalid_client');
      const none = await v.gw.post('/token', { grant_type: 'refresh_token', refresh_token: refresh, client_id: 'agent-gateway' }, null);
      assert.equal(none.status, 401, `no authentication: ${none.text}`);
      // The method left out does not work either.
      const other = await otherMethod('/token', { grant_type: 'refresh_token', refresh_token: refresh });
      assert.equal(other.status, 401, `${pkjwt ? 'client_secret_basic' : 'private_key_jwt'} is off: ${other.text}`);
      assert.equal(other.body?.error, 'invalid_client');
    },
    introspection_endpoint_auth_methods_supported: async (val) => {
      assert.deepEqual(val, [mode]);
      const { grant } = await offlineGrant();
      const post = await postAuth('/introspect', { token: grant });
      assert.equal(post.status, 401, post.text);
      assert.equal(post.body?.error, 'invalid_client');
      const other = await otherMethod('/introspect', { token: grant });
      assert.equal(other.status, 401, other.text);
      assert.equal(other.body?.error, 'invalid_client');
    },
    revocation_endpoint_auth_methods_supported: async (val) => {
      assert.deepEqual(val, pkjwt ? ['none', 'private_key_jwt'] : ['client_secret_basic', 'none', 'private_key_jwt']);
      // none: a public MCP client revokes its own refresh token with its client_id alone.
      const f = await mcpCode();
      const t = await redeem(f);
      assert.equal(t.status, 200, t.text);
      const rv = await tokenPost(v.url, { token: t.body.refresh_token, client_id: PUBLIC() }, { path: '/revoke' });
      assert.equal(rv.status, 200, rv.text);
      const dead = await tokenPost(v.url, { grant_type: 'refresh_token', refresh_token: t.body.refresh_token,
        client_id: PUBLIC(), resource: RESOURCE() });
      assert.equal(dead.body?.error, 'invalid_grant', dead.text);
      // private_key_jwt: [client.tool] with an assertion; without one it is no one.
      const naked = await tokenPost(v.url, { token: 'not-a-token', client_id: 'tool' }, { path: '/revoke' });
      assert.equal(naked.status, 401, naked.text);
      assert.equal(naked.body?.error, 'invalid_client');
      const tool = await tokenPost(v.url, { token: 'not-a-token', client_id: 'tool',
        client_assertion_type: CLIENT_ASSERTION_TYPE, client_assertion: await toolAssertion() }, { path: '/revoke' });
      assert.equal(tool.status, 200, tool.text);
      // The gateway: exactly its own method (its client_id alone is not none).
      const { grant } = await offlineGrant();
      const gwNone = await tokenPost(v.url, { token: grant, client_id: 'agent-gateway' }, { path: '/revoke' });
      assert.equal(gwNone.status, 401, gwNone.text);
      const post = await postAuth('/revoke', { token: grant });
      assert.equal(post.status, 401, post.text);
      assert.equal(post.body?.error, 'invalid_client');
      const other = await otherMethod('/revoke', { token: grant });
      assert.equal(other.status, 401, other.text);
      assert.equal((await v.gw.introspect(grant)).body.active, true, 'nothing was revoked');
    },
    // The token and revocation endpoints take private_key_jwt in both modes (MCP clients): each
    // advertised algorithm authenticates [client.tool], HS256 and none do not (and with the
    // gateway on private_key_jwt, the gateway's probe below runs too).
    ...(!pkjwt ? {
      token_endpoint_auth_signing_alg_values_supported: async (val) => { await toolAlgs(val, 'token_endpoint'); },
      revocation_endpoint_auth_signing_alg_values_supported: async (val) => { await toolAlgs(val, 'revocation_endpoint'); },
    } : {}),
    ...(pkjwt ? Object.fromEntries(['token_endpoint', 'introspection_endpoint', 'revocation_endpoint'].map((ep) => [
      `${ep}_auth_signing_alg_values_supported`, async (val) => {
        assert.deepEqual(val, ALGS);
        if (ep !== 'introspection_endpoint') await toolAlgs(val, ep);
        const { grant } = await offlineGrant();
        // What each endpoint answers once the gateway is authenticated.
        const [path, params, authed] = {
          token_endpoint: ['/token', { grant_type: 'client_credentials' },
            (r) => r.status === 400 && r.body?.error === 'unsupported_grant_type'],
          introspection_endpoint: ['/introspect', { token: grant }, (r) => r.status === 200 && r.body.active === true],
          revocation_endpoint: ['/revoke', { token: 'not-a-token' }, (r) => r.status === 200],
        }[ep];
        // Each advertised algorithm authenticates ...
        for (const alg of val) {
          const a = await v.gw.assertion({}, { alg, kid: `gw-${alg}` }, gwKeys.keys[alg]);
          const r = await v.gw.post(path, { ...params, client_assertion_type: CLIENT_ASSERTION_TYPE, client_assertion: a }, null);
          assert.ok(authed(r), `${alg}: ${r.status} ${r.text}`);
        }
        // ... and nothing else does: HS256 with any secret, or alg none.
        const now = Math.floor(Date.now() / 1000);
        const claims = { iss: 'agent-gateway', sub: 'agent-gateway', aud: v.url, iat: now, exp: now + 60 };
        const hs = await new SignJWT({ ...claims, jti: `hs-${ep}` }).setProtectedHeader({ alg: 'HS256', kid: 'gw-ES256' })
          .sign(new TextEncoder().encode('gateway-dev-secret-gateway-dev-secret'));
        const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
        const none = `${b64({ alg: 'none' })}.${b64({ ...claims, jti: `none-${ep}` })}.`;
        for (const [what, a] of [['HS256', hs], ['none', none]]) {
          const r = await v.gw.post(path, { ...params, client_assertion_type: CLIENT_ASSERTION_TYPE, client_assertion: a }, null);
          assert.equal(r.status, 401, `${what}: ${r.text}`);
          assert.equal(r.body?.error, 'invalid_client', what);
        }
      }])) : {}),
    dpop_signing_alg_values_supported: async (val) => {
      assert.deepEqual(val, ALGS);
      // A refresh with a proof by a key of each algorithm gives a grant bound to that key.
      for (const alg of val) {
        const key = await example.newDpopKey(alg);
        const proof = await example.dpopProof({ key, htm: 'POST', htu: `${v.url}/token` });
        const { refresh } = await offlineGrant();
        const r = await v.gw.post('/token', { grant_type: 'refresh_token', refresh_token: refresh }, undefined, { dpop: proof });
        assert.equal(r.status, 200, `${alg}: ${r.text}`);
        held.refresh = r.body.refresh_token;
        assert.equal(r.body.token_type, 'DPoP', alg);
        assert.deepEqual((await v.gw.verify(r.body.access_token)).payload.cnf, { jkt: key.jkt }, alg);
      }
      // No other algorithm: ES384, or HS256 with any secret.
      const { refresh } = await offlineGrant();
      const now = Math.floor(Date.now() / 1000);
      const es384 = await generateKeyPair('ES384', { extractable: true });
      const jwk384 = await exportJWK(es384.publicKey);
      const claims = { htm: 'POST', htu: `${v.url}/token`, iat: now };
      for (const [what, proof] of [
        ['ES384', await new SignJWT({ ...claims, jti: 'p384' }).setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES384', jwk: jwk384 }).sign(es384.privateKey)],
        ['HS256', await new SignJWT({ ...claims, jti: 'phs' }).setProtectedHeader({ typ: 'dpop+jwt', alg: 'HS256', jwk: jwk384 }).sign(new TextEncoder().encode('x'.repeat(32)))],
      ]) {
        const r = await v.gw.post('/token', { grant_type: 'refresh_token', refresh_token: refresh }, undefined, { dpop: proof });
        assert.equal(r.status, 400, `${what}: ${r.text}`);
        assert.equal(r.body?.error, 'invalid_dpop_proof', what);
      }
    },
    authorization_details_types_supported: async (val) => {
      assert.deepEqual(val, ['agent_action']);
      const { grant, jar } = await offlineGrant();
      const params = { repo: 'acme/widgets', title: 'metadata' };
      const release = (d) => v.gw.post('/token', {
        grant_type: TOKEN_EXCHANGE, subject_token: grant, subject_token_type: TT_ACCESS_TOKEN,
        requested_token_type: TT_ACCESS_TOKEN, action: 'create_issue', authorization_details: d,
      });
      const other = await release(details(params, 'payment_initiation'));
      assert.equal(other.status, 400, other.text);
      assert.equal(other.body?.error, 'invalid_authorization_details');
      const first = await release(details(params));
      assert.equal(first.body?.error, 'approval_required', first.text);
      const page = await req(jar, first.body.approval_uri);
      const html = await page.text();
      assert.equal(page.status, 200, html.slice(0, 300));
      const form = postForm(html);
      const done = await req(jar, first.body.approval_uri, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: v.url },
        body: new URLSearchParams({ ...form.fields, decision: 'approve' }).toString(),
      });
      assert.equal(done.status, 200, (await done.text()).slice(0, 300));
      const tok = await release(details(params));
      assert.equal(tok.status, 200, tok.text);
      assert.equal(tok.body.authorization_details[0].type, 'agent_action');
    },
  };

  test('every field of the metadata is probed, and nothing is advertised that has no probe', () => {
    assert.deepEqual(Object.keys(meta).sort(), Object.keys(probes).sort(),
      'a field without a probe here is a claim nothing holds consentd to');
  });

  for (const name of Object.keys(probes)) {
    test(`metadata ${name}: what it says works, and what it leaves out does not`, async () => {
      assert.ok(name in meta, `${name} is advertised`);
      await probes[name](meta[name]);
    });
  }

  test('the metadata is public, cacheable JSON', async () => {
    const r = await fetch(`${v.url}/.well-known/oauth-authorization-server`);
    assert.match(r.headers.get('content-type'), /application\/json/);
    assert.match(r.headers.get('cache-control') || '', /max-age=300/);
  });
});
