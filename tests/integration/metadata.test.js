// RFC 8414 metadata held against what consentd does, from the outside: every field is
// checked by a probe here (a field without a probe fails the test), every endpoint,
// grant type, client authentication method and authorization_details type that is
// advertised works end to end, and what consentd does not advertise does not work:
// other grant types, client_secret_post, an authorization endpoint, other details types.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startVaultStack, signedInJars } from '../lib/vaultstack.js';
import { DEFAULT_USERS } from '../lib/idp.js';
import { req, postForm } from '../lib/weblogin.js';
import { pollExchange, TOKEN_EXCHANGE, TT_ACCESS_TOKEN } from '../lib/gateway.js';

const CONFIG = {
  'action.github.create_issue': { description: 'Open an issue', scope: 'issues:write', approval: 'required' },
};
const details = (params, type = 'agent_action') => JSON.stringify([{ type, action: 'create_issue', parameters: params }]);

let v;
let meta;
before(async () => {
  v = await startVaultStack({ accessTokenTTL: 60, config: CONFIG, users: DEFAULT_USERS });
  const res = await fetch(`${v.url}/.well-known/oauth-authorization-server`);
  assert.equal(res.status, 200);
  meta = await res.json();
});
after(async () => { await v?.stop(); });

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
    assert.deepEqual(val, ['client_secret_basic']);
    const { refresh } = await offlineGrant();
    const post = await postAuth('/token', { grant_type: 'refresh_token', refresh_token: refresh });
    assert.equal(post.status, 401, `client_secret_post is not offered: ${post.text}`);
    assert.equal(post.body?.error, 'invalid_client');
    const none = await v.gw.post('/token', { grant_type: 'refresh_token', refresh_token: refresh, client_id: 'agent-gateway' }, null);
    assert.equal(none.status, 401, `no authentication: ${none.text}`);
  },
  introspection_endpoint_auth_methods_supported: async (val) => {
    assert.deepEqual(val, ['client_secret_basic']);
    const { grant } = await offlineGrant();
    const post = await postAuth('/introspect', { token: grant });
    assert.equal(post.status, 401, post.text);
    assert.equal(post.body?.error, 'invalid_client');
  },
  revocation_endpoint_auth_methods_supported: async (val) => {
    assert.deepEqual(val, ['client_secret_basic']);
    const { grant } = await offlineGrant();
    const post = await postAuth('/revoke', { token: grant });
    assert.equal(post.status, 401, post.text);
    assert.equal(post.body?.error, 'invalid_client');
    assert.equal((await v.gw.introspect(grant)).body.active, true, 'nothing was revoked');
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
