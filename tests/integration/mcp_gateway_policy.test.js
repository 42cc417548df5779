// The MCP gateway's per-endpoint policy (issue 31; docs/mcp.md "The gateway"), against the real
// binary, the real IdPs and a real upstream MCP server on @modelcontextprotocol/server 2.4.0
// (tests/lib/mcp-upstream.mjs), beside mcp_gateway.test.js's defaults:
//   - [mcp.open] unmapped = allow with unmapped_scope: a tool no action maps (delete_repo) is
//     listed and goes upstream under that scope; a token without the scope gets 403;
//   - [mcp.logged] log_arguments = true: the audit entry holds the canonical arguments, and
//     arguments that look like a token are left out, saying so; [mcp.tracker] (the default)
//     never holds a value.
//
// Node: the 2.x packages declare node >= 20; on Debian 12's Node 18 they run with
// globalThis.crypto, which tests/lib/webcrypto.js installs (imported first): never skipped.
import '../lib/webcrypto.js';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { authorizeHttp, pkce, tokenPost } from '../lib/mcp.js';
import { req, postForm } from '../lib/weblogin.js';
import { startMcpUpstream } from '../lib/mcp-upstream.mjs';
import { startMcpGateway, post2026, MCP_CLIENT as CLIENT, MCP_REDIRECT as REDIRECT } from '../lib/mcpstack.js';

process.stderr.write(`# node ${process.version} (globalThis.crypto from tests/lib/webcrypto.js when missing)\n`);

const API_KEY = `key-${randomBytes(12).toString('hex')}`;
const refused = new Set();   // provider tokens the upstream answers 401 (revoked early)
let g;
let v;
let up;
let keyed;         // an upstream that takes only the person's API key, in X-Api-Key
before(async () => {
  keyed = await startMcpUpstream({ check: async (t) => t === `Token ${API_KEY}`, keyHeader: 'X-Api-Key' });
  g = await startMcpGateway({
    accept: (t) => !refused.has(t),
    config: ({ up: u }) => ({
      'mcp.open': { resource: 'ghproxy', upstream: u.url, unmapped: 'allow', unmapped_scope: 'issues:write' },
      'mcp.logged': { resource: 'ghproxy', upstream: u.url, log_arguments: 'true' },
      // An API key resource behind the gateway: no base_url, the key the person enters.
      'resource.keyed': { name: 'Keyed tracker', credential: 'api_key', api_key_header: 'X-Api-Key',
        api_key_prefix: '"Token "' },
      'scope.keyed.issues:read': { description: 'Read issues' },
      'action.keyed.list_issues': { description: 'List issues', scope: 'issues:read', approval: 'none' },
      'mcp.keyed': { resource: 'keyed', upstream: keyed.url },
    }),
  });
  ({ v, up } = g);
});
after(async () => {
  try { await g?.stop(); } finally { await keyed?.stop(); }
});

const EP = (name) => `${v.url}/mcp/${name}`;
const signedIn = (url, user) => g.signedIn(url, user);

// The person signs the client in for endpoint name with scope -> its access token.
async function signIn(user, name, scope) {
  return (await g.signIn(user, { resource: EP(name), scope })).token;
}

const rpc = (name, token, method, params = {}, headers = {}) => post2026(EP(name), token, method, params, { headers });

// The last decision entry: an answer's entry ("answered", "upstream_failed") follows later,
// written by the audit queue, and is left out here.
const lastCall = () => v.c.rows("SELECT outcome, detail FROM audit WHERE action = 'mcp.call' "
  + "AND outcome NOT IN ('answered', 'upstream_failed') ORDER BY seq DESC LIMIT 1")[0];

test('unmapped = allow: a tool no action maps is listed and runs under unmapped_scope; without that scope, 403', async () => {
  const token = await signIn('alice', 'open', 'issues:read issues:write');
  const list = await rpc('open', token, 'tools/list');
  assert.equal(list.status, 200, list.text);
  assert.deepEqual(list.body.result.tools.map((t) => t.name).sort(), ['create_issue', 'delete_repo', 'list_issues']);
  up.clear();
  const r = await rpc('open', token, 'tools/call', { name: 'delete_repo', arguments: {} });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.result.content[0].text, 'deleted');
  assert.deepEqual(up.calls.map((c) => c.tool), ['delete_repo'], 'it went upstream once');
  assert.equal(lastCall().outcome, 'forwarded');

  // The same endpoint's tools/list under the default policy drops it; a call is refused.
  const strict = await signIn('bob', 'tracker', 'issues:read issues:write');
  const l2 = await rpc('tracker', strict, 'tools/list');
  assert.deepEqual(l2.body.result.tools.map((t) => t.name).sort(), ['create_issue', 'list_issues']);
  up.clear();
  const refused = await rpc('tracker', strict, 'tools/call', { name: 'delete_repo', arguments: {} });
  assert.ok(refused.body.error, refused.text);
  assert.match(refused.body.error.message, /delete_repo/);
  assert.deepEqual(up.calls, [], 'nothing went upstream');

  // A token without unmapped_scope: step-up, never the call.
  const readOnly = await signIn('carol', 'open', 'issues:read');
  up.clear();
  const denied = await rpc('open', readOnly, 'tools/call', { name: 'delete_repo', arguments: {} });
  assert.equal(denied.status, 403, denied.text);
  assert.match(denied.headers.get('www-authenticate'), /error="insufficient_scope"/);
  assert.match(denied.headers.get('www-authenticate'), /scope="[^"]*\bissues:write\b/);
  assert.deepEqual(up.calls, []);
});

test('log_arguments: the audit entry holds the canonical arguments only where configured, and never a token-like value', async () => {
  const token = await signIn('alice', 'logged', 'issues:read issues:write');
  const r = await rpc('logged', token, 'tools/call', { name: 'list_issues', arguments: { state: 'open', page: 2 } });
  assert.equal(r.status, 200, r.text);
  const e = lastCall();
  assert.equal(e.outcome, 'forwarded');
  assert.match(e.detail, /tool=list_issues; digest=[A-Za-z0-9_-]{43}; arguments=\{"page":2,"state":"open"\}$/);
  const secret = `ghp_${randomBytes(24).toString('hex')}`;
  const t = await rpc('logged', token, 'tools/call', { name: 'list_issues', arguments: { token: secret } });
  assert.equal(t.status, 200, t.text);
  const e2 = lastCall();
  assert.match(e2.detail, /arguments=\(not recorded: they look like a token\)$/);
  assert.ok(!e2.detail.includes(secret));

  // The default endpoint: the digest only.
  const plain = await signIn('bob', 'tracker', 'issues:read issues:write');
  const p = await rpc('tracker', plain, 'tools/call', { name: 'list_issues', arguments: { state: 'open' } });
  assert.equal(p.status, 200, p.text);
  const e3 = lastCall();
  assert.match(e3.detail, /digest=[A-Za-z0-9_-]{43}$/);
  assert.ok(!e3.detail.includes('open'));
});

test('an access token presented again is not verified again: its signature comes from the grant cache', async () => {
  const token = await signIn('carol', 'tracker', 'issues:read');
  const auth = `Basic ${Buffer.from('agent-gateway:gateway-dev-secret').toString('base64')}`;
  const hits = async () => {
    const text = await (await fetch(`${v.url}/metrics`, { headers: { authorization: auth } })).text();
    const m = /^consentd_cache_lookups_total\{cache="grant",outcome="hit"\} (\d+)/m.exec(text);
    return m ? Number(m[1]) : 0;
  };
  const before = await hits();
  for (let i = 0; i < 3; i += 1) {
    const r = await rpc('tracker', token, 'tools/call', { name: 'list_issues', arguments: {} });
    assert.equal(r.status, 200, r.text);
  }
  assert.ok(await hits() - before >= 2, 'the second and third calls found the token in the cache');
});

test('an API key resource behind the gateway: the person enters the key once at sign-in, and it goes upstream in its header, never as a bearer', async () => {
  const user = 'alice';
  const jar = await signedIn(v.url, user);
  const resource = EP('keyed');
  const { verifier, challenge } = pkce();
  const u = new URL(`${v.url}/authorize`);
  for (const [k, val] of Object.entries({ response_type: 'code', client_id: CLIENT, redirect_uri: REDIRECT,
    state: 'st', code_challenge: challenge, code_challenge_method: 'S256', resource, scope: 'issues:read' })) {
    u.searchParams.set(k, val);
  }
  // The consent, then the key page (where a provider's sign-in would be).
  const r = await authorizeHttp({ url: v.url, jar, authorizeUrl: u.href, user });
  assert.equal(r.status, 200, r.text?.slice(0, 300));
  assert.match(r.text, /API key/);
  const form = postForm(r.text, /logout/);
  const keyPage = new URL(r.res.url);
  const stored = await req(jar, new URL(form.action, keyPage).href, { method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: v.url },
    body: new URLSearchParams({ csrf: form.fields.csrf, key: API_KEY }).toString() });
  const cont = await stored.text();
  const next = cont.match(/href="(\/authorize\/[^"]+\/done)"/);
  assert.ok(next, `the sign-in goes on: ${cont.slice(0, 300)}`);
  const done = await req(jar, `${v.url}${next[1]}`);
  await done.arrayBuffer();
  const code = new URL(done.headers.get('location')).searchParams.get('code');
  const t = await tokenPost(v.url, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT,
    client_id: CLIENT, code_verifier: verifier, resource });
  assert.equal(t.status, 200, t.text);

  keyed.clear();
  const call = await rpc('keyed', t.body.access_token, 'tools/call', { name: 'list_issues', arguments: {} });
  assert.equal(call.status, 200, call.text);
  assert.match(call.body.result.content[0].text, /first/);
  const seen = keyed.requests.at(-1);
  assert.equal(seen.headers['x-api-key'], `Token ${API_KEY}`);
  assert.equal(seen.headers.authorization, undefined, 'no bearer: neither the key nor the client\'s token');
  assert.ok(!call.text.includes(API_KEY), 'the key never reaches the client');
});

test('a provider token the upstream refuses (401) before its expiry: one forced refresh and one retry, at most once a minute', async () => {
  const token = await signIn('bob', 'tracker', 'issues:read issues:write');
  up.clear();
  assert.equal((await rpc('tracker', token, 'tools/call', { name: 'list_issues', arguments: {} })).status, 200);
  const first = /^Bearer (\S+)$/.exec(up.requests.at(-1).headers.authorization)[1];
  // The provider ended that token early; consentd's record is older than the forced
  // refresh's one-a-minute bound.
  refused.add(first);
  v.c.sql("UPDATE vault_records SET updated_at = updated_at - 120");
  up.clear();
  const r = await rpc('tracker', token, 'tools/call', { name: 'list_issues', arguments: {} });
  assert.equal(r.status, 200, r.text);
  assert.match(r.body.result.content[0].text, /first/);
  const sent = up.requests.map((q) => /^Bearer (\S+)$/.exec(q.headers.authorization)[1]);
  assert.equal(sent.length, 2, 'the call, then its one retry');
  assert.equal(sent[0], first);
  assert.notEqual(sent[1], first, 'the retry carried a refreshed token');
  const entries = v.c.rows("SELECT outcome FROM audit WHERE action = 'mcp.call' "
    + "AND outcome NOT IN ('answered', 'upstream_failed') ORDER BY seq DESC LIMIT 2");
  assert.deepEqual(entries.map((x) => x.outcome), ['forwarded_again', 'forwarded']);

  // Within the minute after that refresh, another 401 is answered as it is: an upstream that
  // refuses every call must not turn each call into a refresh at the provider.
  refused.add(sent[1]);
  up.clear();
  const again = await rpc('tracker', token, 'tools/call', { name: 'list_issues', arguments: {} });
  assert.equal(again.status, 502, again.text);
  assert.equal(again.body.error.data.status, 401);
  assert.equal(up.requests.length, 1, 'no second retry');
});

test('Mcp-Param-* headers (MCP 2026-07-28) go upstream as the client sent them; other headers of the client do not', async () => {
  const token = await signIn('carol', 'tracker', 'issues:read');
  up.clear();
  const r = await rpc('tracker', token, 'tools/call', { name: 'list_issues', arguments: { state: 'open' } },
    { 'mcp-param-state': 'open', 'x-client-secret-thing': 'not for the upstream', cookie: 'a=b' });
  assert.equal(r.status, 200, r.text);
  const seen = up.requests.at(-1).headers;
  assert.equal(seen['mcp-param-state'], 'open');
  assert.equal(seen['x-client-secret-thing'], undefined);
  assert.equal(seen.cookie, undefined);
});
