// MCP clients' sign-in from the attacker's side, across both legs (issue 30): a replayed
// code, a PKCE downgrade, a redirect_uri that differs at /token and an open redirect at
// /authorize, a resource left out or swapped (a token for resource A refreshed for B), a
// refresh that widens, a reused refresh token, a client the [mcp] policy does not let in,
// and client-id metadata documents that are huge, slow, from an internal address or whose
// client_id is not their URL -- each an error page for the person at /authorize, never a
// redirect.  Every refusal is checked for its code (and, on pages, the check it names).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from '../lib/stack.js';
import { CookieJar } from '../lib/idplogin.js';
import { consentdLogin, req } from '../lib/weblogin.js';
import { startCimdServer, mcpConfig, codeFlow, tokenPost, pkce, decodeJwt } from '../lib/mcp.js';

const REDIRECT = 'http://127.0.0.1:33418/callback';
let s; let cimd; let jar;
before(async () => {
  cimd = await startCimdServer();
  // A fetch timeout short enough that the slow document is refused in seconds, long enough
  // for the others on a loaded machine (at 2.5 s, make check saw the mismatched one time out).
  s = await startStack({ config: mcpConfig({ cimd, mcp: { cimd_timeout_ms: 6000, cimd_connect_timeout_ms: 6000, cimd_failure_ttl: 0 } }) });
  ({ jar } = await consentdLogin({ url: s.url, user: 'alice', password: 'alice-password', jar: new CookieJar() }));
});
after(async () => { await s?.stop(); await cimd?.stop(); });

const CLIENT = () => cimd.url('/mcp/client.json');
const NOTES = () => `${s.url}/mcp/notes`;
const WIKI = () => `${s.url}/mcp/wiki`;
const flow = (o = {}) => codeFlow({ url: s.url, jar, clientId: CLIENT(), resource: NOTES(), scope: 'read write', ...o });
const redeem = (f, more = {}) => tokenPost(s.url, { grant_type: 'authorization_code', code: f.q.code, redirect_uri: REDIRECT,
  code_verifier: f.verifier, client_id: CLIENT(), resource: NOTES(), ...more });
const refresh = (rt, more = {}) => tokenPost(s.url, { grant_type: 'refresh_token', refresh_token: rt, client_id: CLIENT(),
  resource: NOTES(), ...more });

// A code for alice and the client (notes), asserted.
async function code(o) {
  const f = await flow(o);
  assert.ok(f.q?.code, `a code: ${JSON.stringify(f.q)} ${f.text?.slice(0, 300) ?? ''}`);
  return f;
}

// /authorize answered the person with an error page: no redirect anywhere, the check named.
async function errorPage(authorizeUrl, why) {
  const r = await req(new CookieJar(), authorizeUrl);
  const text = await r.text();
  assert.ok(r.status >= 400 && r.status < 500, `${r.status} ${text.slice(0, 300)}`);
  assert.equal(r.headers.get('location'), null, 'not sent anywhere');
  assert.match(r.headers.get('content-type'), /^text\/html/);
  assert.match(text, why);
  return text;
}
function authorizeUrl(url, p) {
  const { challenge } = pkce();
  const u = new URL(`${url}/authorize`);
  const all = { response_type: 'code', redirect_uri: REDIRECT, state: 's1', code_challenge: challenge,
    code_challenge_method: 'S256', resource: `${url}/mcp/notes`, scope: 'read', ...p };
  for (const [k, v] of Object.entries(all)) if (v != null) u.searchParams.set(k, v);
  return u.href;
}

test('a replayed code is refused, and what its first use gave is revoked', async () => {
  const f = await code();
  const first = await redeem(f);
  assert.equal(first.status, 200, first.text);
  const again = await redeem(f);
  assert.equal(again.status, 400, again.text);
  assert.equal(again.body?.error, 'invalid_grant');
  // OAuth 2.1 §4.1.3: the tokens the code gave end with the replay.
  const r = await refresh(first.body.refresh_token);
  assert.equal(r.status, 400, r.text);
  assert.equal(r.body?.error, 'invalid_grant');
});

test('PKCE downgrade: no challenge or plain at /authorize, no verifier or the challenge itself at /token', async () => {
  for (const [what, more] of [['no challenge', { code_challenge: null, code_challenge_method: null }],
    ['plain', { code_challenge_method: 'plain' }]]) {
    const f = await flow({ more });
    assert.ok(f.redirect, `${what}: ${f.status} ${f.text?.slice(0, 200)}`);
    assert.equal(f.q.error, 'invalid_request', what);
    assert.equal(f.q.code, undefined, what);
    assert.equal(f.q.iss, s.url, what);
  }
  const f = await code();
  const none = await redeem(f, { code_verifier: null });
  assert.equal(none.status, 400, none.text);
  assert.ok(['invalid_request', 'invalid_grant'].includes(none.body?.error), none.text);
  // The challenge sent as the verifier (what a plain downgrade would need): refused, and
  // the code is spent by the attempt or still refused for the right verifier's absence.
  const challenge = new URL(f.authorizeUrl).searchParams.get('code_challenge');
  const plain = await redeem(f, { code_verifier: challenge });
  assert.equal(plain.status, 400, plain.text);
  assert.equal(plain.body?.error, 'invalid_grant');
});

test('redirect_uri: another one at /token is refused; an unregistered one at /authorize is an error page, never a redirect', async () => {
  for (const other of ['http://127.0.0.1:33419/callback', 'http://127.0.0.1:33418/callback/x', 'https://client.example/cb']) {
    const f = await code();
    const r = await redeem(f, { redirect_uri: other });
    assert.equal(r.status, 400, `${other}: ${r.text}`);
    assert.equal(r.body?.error, 'invalid_grant', other);
  }
  const f = await code();
  const missing = await redeem(f, { redirect_uri: null });
  assert.equal(missing.status, 400, missing.text);
  assert.ok(['invalid_request', 'invalid_grant'].includes(missing.body?.error), missing.text);
  // An open redirect: the browser is never sent to a URI the client did not register.
  for (const evil of ['https://evil.example/cb', 'http://127.0.0.1:33418/callback?x=1', 'http://evil.example/callback',
    'http://127.0.0.1.evil.example/callback']) {
    await errorPage(authorizeUrl(s.url, { client_id: CLIENT(), redirect_uri: evil }), /redirect/i);
  }
});

test('resource: required on both legs, and a token for one endpoint is not refreshed (or redeemed) for another', async () => {
  // No resource at /authorize: back to the client, invalid_target or invalid_request.
  const noRes = await flow({ resource: null });
  assert.ok(noRes.q?.error, `${JSON.stringify(noRes.q)} ${noRes.text?.slice(0, 200) ?? ''}`);
  assert.ok(['invalid_target', 'invalid_request'].includes(noRes.q.error), noRes.q.error);
  // A resource consentd does not serve.
  const unknown = await flow({ resource: 'https://other.example/mcp' });
  assert.equal(unknown.q?.error, 'invalid_target');
  // No resource, or another one, at /token.
  const f1 = await code();
  const r1 = await redeem(f1, { resource: null });
  assert.equal(r1.status, 400, r1.text);
  assert.ok(['invalid_target', 'invalid_request', 'invalid_grant'].includes(r1.body?.error), r1.text);
  const f2 = await code();
  const r2 = await redeem(f2, { resource: WIKI() });
  assert.equal(r2.status, 400, r2.text);
  assert.ok(['invalid_target', 'invalid_grant'].includes(r2.body?.error), r2.text);
  // A token for notes, refreshed for wiki: refused; its access token's aud is notes alone.
  const f3 = await code();
  const t = await redeem(f3);
  assert.equal(t.status, 200, t.text);
  assert.equal(decodeJwt(t.body.access_token).aud, NOTES());
  const cross = await refresh(t.body.refresh_token, { resource: WIKI() });
  assert.equal(cross.status, 400, cross.text);
  assert.ok(['invalid_target', 'invalid_grant'].includes(cross.body?.error), cross.text);
  const none = await refresh(t.body.refresh_token, { resource: null });
  assert.equal(none.status, 400, none.text);
  // And wiki's endpoint does not take notes's token (the gateway, issue 31: aud must be the
  // endpoint); notes's own takes it, and says it has no upstream to send the call to.
  const post = (ep) => fetch(ep, { method: 'POST', headers: { authorization: `Bearer ${t.body.access_token}`,
    'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' });
  const call = await post(WIKI());
  assert.equal(call.status, 401);
  assert.match(call.headers.get('www-authenticate'), /error="invalid_token"/);
  const own = await post(NOTES());
  assert.equal(own.status, 503);
  assert.match((await own.json()).error.message, /no upstream server configured/);
});

test('a refresh may narrow the scopes, never widen them past what the person gave', async () => {
  // bob, who has no consent for this client yet (alice's would cover both scopes already).
  const { jar: bobJar } = await consentdLogin({ url: s.url, user: 'bob', password: 'bob-password', jar: new CookieJar() });
  const f = await code({ jar: bobJar, user: 'bob', scope: 'read write', select: [0] });   // bob ticks read only
  const t = await redeem(f);
  assert.equal(t.status, 200, t.text);
  assert.equal(decodeJwt(t.body.access_token).scope, 'read');
  const wider = await refresh(t.body.refresh_token, { scope: 'read write' });
  assert.equal(wider.status, 400, wider.text);
  assert.equal(wider.body?.error, 'invalid_scope');
});

test('a reused refresh token is refused and ends its family', async () => {
  const t = await redeem(await code());
  assert.equal(t.status, 200, t.text);
  const r1 = await refresh(t.body.refresh_token);
  assert.equal(r1.status, 200, r1.text);
  const reuse = await refresh(t.body.refresh_token);
  assert.equal(reuse.status, 400, reuse.text);
  assert.equal(reuse.body?.error, 'invalid_grant');
  const after1 = await refresh(r1.body.refresh_token);
  assert.equal(after1.status, 400, after1.text);
  assert.equal(after1.body?.error, 'invalid_grant');
  // Another client cannot use this client's refresh token either.
  const t2 = await redeem(await code());
  const other = await refresh(t2.body.refresh_token, { client_id: cimd.url('/mcp/other.json') });
  assert.ok(other.status === 400 || other.status === 401, other.text);
  assert.ok(['invalid_grant', 'invalid_client'].includes(other.body?.error), other.text);
});

test('client-id metadata documents: huge, slow, or whose client_id is not their URL -- an error page naming the check', async () => {
  const cases = [
    ['/huge.json', /larger than/],
    ['/huge-chunked.json', /larger than/],
    ['/slow.json', /took longer than/],
    ['/mcp/wrong-id.json', /client_id is not the URL it was fetched from/],
    ['/redirect', /redirect/],
    ['/text.json', /application\/json/],
    ['/secret.json', /shared secret/],
  ];
  for (const [path, why] of cases) {
    const t0 = Date.now();
    await errorPage(authorizeUrl(s.url, { client_id: cimd.url(path) }), why);
    // Bounded by the fetch's own timeout, not left hanging (generous: a loaded machine).
    assert.ok(Date.now() - t0 < 15000, `${path}: answered in ${Date.now() - t0} ms`);
  }
});

test('the [mcp] policy and the address check: a client-id URL outside the allowed prefixes, and one on an internal address', async () => {
  // Client-id URLs only under /mcp/, and none on a loopback address (the switch left off).
  const t = await startStack({ config: mcpConfig({ mcp: { cimd_allow: 'prefixes', cimd_prefixes: `${cimd.base}/mcp/`,
    cimd_ca_file: cimd.ca } }) });
  try {
    const before1 = await cimd.hits('/good.json');
    await errorPage(authorizeUrl(t.url, { client_id: cimd.url('/good.json') }), /prefix allowed to sign in/);
    assert.equal(await cimd.hits('/good.json'), before1, 'a client the policy refuses is not even fetched');
    // Allowed by the policy, but 127.0.0.1 is an internal address: no request goes there.
    const before2 = await cimd.hits('/mcp/client.json');
    await errorPage(authorizeUrl(t.url, { client_id: cimd.url('/mcp/client.json') }), /internal addresses/);
    assert.equal(await cimd.hits('/mcp/client.json'), before2, 'nothing was fetched from the internal address');
    // A [client.NAME]-less, URL-less id is nobody.
    await errorPage(authorizeUrl(t.url, { client_id: 'nobody' }), /client/i);
  } finally { await t.stop(); }
});
