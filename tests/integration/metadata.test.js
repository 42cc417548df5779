// RFC 8414 metadata held against what consentd does, from the outside: every field is
// checked by a probe here (a field without a probe fails the test), every endpoint,
// grant type, client authentication method and authorization_details type that is
// advertised works end to end, and what consentd does not advertise does not work:
// other grant types, client_secret_post, an authorization endpoint, other details types.
// It runs twice: with the gateway on client_secret_basic (the default) and on
// private_key_jwt (RFC 7523, [gateway] token_endpoint_auth = private_key_jwt).
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

// EdDSA and RFC 9864's fully specified Ed25519 (what oauth4webapi 3 signs with), both
// advertised and both working (issue 28 item 6).
const ALGS = ['ES256', 'PS256', 'EdDSA', 'Ed25519'];

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
    'action.github.create_issue': { description: 'Open an issue', scope: 'issues:write', approval: 'required' },
  };
  const details = (params, type = 'agent_action') => JSON.stringify([{ type, action: 'create_issue', parameters: params }]);

  let v;
  let meta;
  before(async () => {
    keyDir = mkdtempSync(join(tmpdir(), 'consentd-gwkeys-'));
    gwKeys = await gatewayKeys(keyDir);
    const config = !pkjwt ? CONFIG : {
      ...CONFIG,
      gateway: { token_endpoint_auth: 'private_key_jwt', jwks_file: gwKeys.file, client_secret: null },
    };
    const gatewayOptions = pkjwt ? { assertionKey: gwKeys.keys.ES256, assertionKid: 'gw-ES256' } : {};
    v = await startVaultStack({ accessTokenTTL: 60, config, users: DEFAULT_USERS, gatewayOptions });
    const res = await fetch(`${v.url}/.well-known/oauth-authorization-server`);
    assert.equal(res.status, 200);
    meta = await res.json();
  });
  after(async () => { await v?.stop(); if (keyDir) rmSync(keyDir, { recursive: true, force: true }); });

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

  // Credentials in the body (client_secret_post) instead of the Basic header.
  const postAuth = (path, params) => v.gw.post(path, { client_id: 'agent-gateway', client_secret: 'gateway-dev-secret', ...params }, null);

  // The authentication method this configuration leaves out, done right otherwise.
  const otherMethod = async (path, params) => (pkjwt
    ? v.gw.post(path, params, basicAuth('agent-gateway', 'gateway-dev-secret'))
    : v.gw.post(path, { ...params, client_assertion_type: CLIENT_ASSERTION_TYPE,
      client_assertion: await v.gw.assertion({}, { kid: 'gw-ES256' }, gwKeys.keys.ES256) }, null));

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
    response_types_supported: async (val) => {
      // No authorization endpoint of its own: nothing to respond with.
      assert.deepEqual(val, []);
      assert.equal(meta.authorization_endpoint, undefined);
      for (const p of ['/authorize', '/oauth/authorize', '/auth']) {
        assert.equal((await fetch(`${v.url}${p}?response_type=code&client_id=agent-gateway`)).status, 404, p);
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
      assert.deepEqual([...val].sort(), ['refresh_token', TOKEN_EXCHANGE].sort());
      // token-exchange: flow A gave the held grant; refresh_token renews it.
      const { refresh } = await offlineGrant();
      const r = await v.gw.refresh(refresh);
      assert.equal(r.status, 200, r.text);
      assert.ok(r.body.access_token && r.body.refresh_token);
      held.refresh = r.body.refresh_token;
      held.grant = r.body.access_token;
      // Nothing else is a grant type here.
      for (const gt of ['client_credentials', 'authorization_code', 'password', 'implicit',
        'urn:ietf:params:oauth:grant-type:device_code', 'urn:ietf:params:oauth:grant-type:jwt-bearer',
        'urn:openid:params:grant-type:ciba']) {
        const x = await v.gw.post('/token', { grant_type: gt, scope: 'issues:read' });
        assert.equal(x.status, 400, `${gt}: ${x.text}`);
        assert.equal(x.body?.error, 'unsupported_grant_type', gt);
      }
    },
    token_endpoint_auth_methods_supported: async (val) => {
      assert.deepEqual(val, [mode]);
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
      assert.deepEqual(val, [mode]);
      const { grant } = await offlineGrant();
      const post = await postAuth('/revoke', { token: grant });
      assert.equal(post.status, 401, post.text);
      assert.equal(post.body?.error, 'invalid_client');
      const other = await otherMethod('/revoke', { token: grant });
      assert.equal(other.status, 401, other.text);
      assert.equal((await v.gw.introspect(grant)).body.active, true, 'nothing was revoked');
    },
    ...(pkjwt ? Object.fromEntries(['token_endpoint', 'introspection_endpoint', 'revocation_endpoint'].map((ep) => [
      `${ep}_auth_signing_alg_values_supported`, async (val) => {
        assert.deepEqual(val, ALGS);
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
