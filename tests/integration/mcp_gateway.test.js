// consentd as the MCP gateway (issue 31) against the real binary, the real IdPs (login, and the
// downstream provider "GitHub"), a real upstream MCP server on @modelcontextprotocol/server 2.4.0
// (tests/lib/mcp-upstream.mjs: it accepts only a token the provider's introspection calls
// active) and the official clients: @modelcontextprotocol/client 2.4.0 with versionNegotiation
// auto (2026-07-28) and @modelcontextprotocol/sdk 1.32.2 (2025-11-25).
//
// [mcp.tracker] stands for resource ghproxy (tests/lib/proxystack.js): list_issues (approval
// none), create_issue (approval required); delete_repo exists upstream and maps to no action.
// The MCP client is a registered [client.mcp-test]; the person signs in through /authorize
// (consent page, provider connect) over plain HTTP (tests/lib/mcp.js, vaultstack.js); the
// set-up is tests/lib/mcpstack.js's.
//
// Node: the 2.x packages declare node >= 20; on Debian 12's Node 18 they run with
// globalThis.crypto, which tests/lib/webcrypto.js installs (imported first): never skipped.
import '../lib/webcrypto.js';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client as Client2, StreamableHTTPClientTransport as Transport2 } from '@modelcontextprotocol/client';
import { Client as Client1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as Transport1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startMcpGateway, decideOverHttp, rpcBody, MCP_CLIENT as CLIENT } from '../lib/mcpstack.js';

process.stderr.write(`# node ${process.version} (globalThis.crypto from tests/lib/webcrypto.js when missing)\n`);

let g;
let v;
let up;
before(async () => {
  g = await startMcpGateway({
    tracker: { upstream_timeout: 2 },
    config: ({ up: u }) => ({
      // [server] max_body above the gateway's own 1 MiB cap, so that this cap answers.
      server: { max_body: 2 * 1024 * 1024 },
      consent: { max_pending_per_user: 50, deny_cooldown: 600 },
      'mcp.other': { resource: 'ghproxy', upstream: u.url },
    }),
  });
  ({ v, up } = g);
});
after(async () => { await g?.stop(); });

const EP = (name = 'tracker') => `${v.url}/mcp/${name}`;

// The person signs the client in at consentd (consent page, then the provider) -> token.
const signIn = (user, { resource = EP(), scope = 'issues:read issues:write' } = {}) => g.signIn(user, { resource, scope });

// A raw JSON-RPC POST to the gateway -> { status, headers, body, text }.
async function rpc(token, msg, { name = 'tracker', headers = {}, raw } = {}) {
  const res = await fetch(EP(name), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
      ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
    body: raw ?? JSON.stringify(msg),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: rpcBody(text), text };
}

const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' } };
const H26 = (method, name) => ({ 'mcp-protocol-version': '2026-07-28', 'mcp-method': method, ...(name ? { 'mcp-name': name } : {}) });
// A 2026-07-28 tools/call by hand; caps: the client's declared capabilities.
function call26(token, tool, args, { caps = { elicitation: { url: {} } }, state, id = 1 } = {}) {
  return rpc(token, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: tool, arguments: args,
    ...(state ? { requestState: state, inputResponses: { approval: { action: 'accept' } } } : {}),
    _meta: { ...META, 'io.modelcontextprotocol/clientCapabilities': caps } } }, { headers: H26('tools/call', tool) });
}

// The person opens an approval (or consent) link and decides.
async function decideApproval(user, uri, decision = 'approve') {
  await decideOverHttp({ v, jar: await g.signedIn(v.url, user), uri, decision });
}

// The entry of call id's answer ("answered" or "upstream_failed"), once the audit queue has
// written it: polled every 50 ms, at most 400 times (a bound on the wait, not a timing claim).
async function answerOf(id) {
  for (let i = 0; i < 400; i++) {
    const r = v.c.rows("SELECT seq, outcome, detail, subject, agent, resource, consent_id FROM audit WHERE action = 'mcp.call' "
      + `AND outcome IN ('answered', 'upstream_failed') AND detail LIKE 'call=${id};%'`);
    if (r.length) {
      assert.equal(r.length, 1, 'one entry per answer');
      return r[0];
    }
    await new Promise((res) => setTimeout(res, 50));
  }
  assert.fail(`no answer entry for call=${id}`);
}

const clientTokenSeen = (token) => up.requests.some((r) => JSON.stringify(r).includes(token));

let alice;
test('tools/list and a tool call with the 2026-07-28 client: the provider token goes upstream, never the client\'s', async () => {
  alice = await signIn('alice');
  up.clear();
  const client = new Client2({ name: 'gw-test', version: '1' }, { capabilities: { elicitation: { form: {}, url: {} } },
    versionNegotiation: { mode: 'auto' } });
  await client.connect(new Transport2(new URL(EP()), { requestInit: { headers: { authorization: `Bearer ${alice.token}` } } }));
  const { tools } = await client.listTools();
  // unmapped = refuse: delete_repo is not listed.
  assert.deepEqual(tools.map((t) => t.name).sort(), ['create_issue', 'list_issues']);
  const r = await client.callTool({ name: 'list_issues', arguments: {} });
  assert.match(r.content[0].text, /first/);
  assert.ok(up.calls.some((c) => c.tool === 'list_issues'), 'the upstream ran it');
  assert.ok(up.requests.length > 0);
  for (const q of up.requests) {
    assert.match(q.headers.authorization, /^Bearer /, 'a provider token upstream');
    assert.notEqual(q.headers.authorization, `Bearer ${alice.token}`);
    assert.equal(q.headers.cookie, undefined);
  }
  assert.ok(!clientTokenSeen(alice.token), 'the upstream never saw the client\'s token');
  // The 2026 headers went along, so a 2026 upstream accepts the call.
  assert.ok(up.requests.some((q) => q.headers['mcp-method'] === 'tools/call' && q.headers['mcp-name'] === 'list_issues'));
  await client.close();
  // Audited: person, client, tool, digest, outcome, upstream status; no argument values.
  // "forwarded" was committed before the call went out; it names the call (call=).
  const rows = v.sql("SELECT agent || '|' || resource || '|' || outcome || '|' || detail || '|' || subject FROM audit "
    + "WHERE action = 'mcp.call' AND outcome = 'forwarded' ORDER BY seq DESC LIMIT 1");
  const fwd = /^mcp-test\|ghproxy\|forwarded\|call=([0-9a-f]{16}); endpoint=tracker; tool=list_issues; digest=([A-Za-z0-9_-]{43})\|\S+$/.exec(rows);
  assert.ok(fwd, rows);
  // The upstream's status follows in an "answered" entry that the audit queue writes off the
  // request's path (one transaction per batch): polled, bounded, never timed.
  const ans = await answerOf(fwd[1]);
  assert.equal(ans.outcome, 'answered');
  assert.match(ans.detail, new RegExp(`^call=${fwd[1]}; endpoint=tracker; tool=list_issues; digest=${fwd[2]}; `
    + 'upstream=200; ms=\\d+; bytes=[1-9]\\d*; end=complete$'));
  const f = v.c.rows(`SELECT seq, subject, agent, resource, consent_id FROM audit WHERE action = 'mcp.call' AND outcome = 'forwarded' AND detail LIKE 'call=${fwd[1]};%'`)[0];
  assert.ok(ans.seq > f.seq, 'after the entry it follows');
  for (const k of ['subject', 'agent', 'resource', 'consent_id']) assert.equal(ans[k], f[k], k);
  assert.equal(ans.agent, CLIENT);
});

test('the 2025-11-25 client (sdk 1.32.2): initialize, tools/list and a call through the gateway', async () => {
  up.clear();
  const client = new Client1({ name: 'gw-test-v1', version: '1' }, { capabilities: {} });
  await client.connect(new Transport1(new URL(EP()), { requestInit: { headers: { authorization: `Bearer ${alice.token}` } } }));
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), ['create_issue', 'list_issues']);
  const r = await client.callTool({ name: 'list_issues', arguments: {} });
  assert.match(r.content[0].text, /first/);
  assert.ok(!clientTokenSeen(alice.token));
  await client.close();
});

test('an approval-gated call: input_required, approve, the retry goes out once; other arguments ask again; a replayed or edited state fails closed', async () => {
  up.clear();
  const first = await call26(alice.token, 'create_issue', { title: 'Bug A' });
  assert.equal(first.status, 200, first.text);
  const res = first.body.result;
  assert.equal(res.resultType, 'input_required', first.text);
  const el = res.inputRequests.approval;
  assert.equal(el.method, 'elicitation/create');
  assert.equal(el.params.mode, 'url');
  assert.match(el.params.url, new RegExp(`^${v.url}/approve/[A-Za-z0-9_-]+$`));
  assert.ok(res.requestState);
  assert.equal(up.calls.length, 0, 'nothing went upstream');
  // Edited state: fails closed.
  const s = res.requestState;
  const edited = `${s.slice(0, 10)}${s[10] === 'A' ? 'B' : 'A'}${s.slice(11)}`;
  const bad = await call26(alice.token, 'create_issue', { title: 'Bug A' }, { state: edited, id: 2 });
  assert.equal(bad.body.error?.code, -32003, bad.text);
  assert.match(bad.body.error.message, /not one this gateway issued/);
  // The state for other arguments fails closed too.
  const other = await call26(alice.token, 'create_issue', { title: 'Bug B' }, { state: s, id: 3 });
  assert.equal(other.body.error?.code, -32003, other.text);
  assert.match(other.body.error.message, /other arguments/);
  await decideApproval('alice', el.params.url);
  const retry = await call26(alice.token, 'create_issue', { title: 'Bug A' }, { state: s, id: 4 });
  assert.equal(retry.status, 200, retry.text);
  assert.match(retry.body.result.content[0].text, /created #\d+: Bug A/);
  assert.deepEqual(up.calls.filter((c) => c.tool === 'create_issue'), [{ tool: 'create_issue', args: { title: 'Bug A' } }]);
  // Replayed: the approval was used; it never goes out twice.
  const replay = await call26(alice.token, 'create_issue', { title: 'Bug A' }, { state: s, id: 5 });
  assert.equal(replay.body.error?.code, -32003, replay.text);
  assert.match(replay.body.error.message, /already used/);
  assert.equal(up.calls.filter((c) => c.tool === 'create_issue').length, 1, 'once');
  // Other arguments ask again (a new approval).
  const again = await call26(alice.token, 'create_issue', { title: 'Bug C' }, { id: 6 });
  assert.equal(again.body.result?.resultType, 'input_required', again.text);
  assert.notEqual(again.body.result.inputRequests.approval.params.url, el.params.url);
});

test('the 2026 client drives the approval itself: URL elicitation accepted, the person approves, the retry succeeds', async () => {
  up.clear();
  const client = new Client2({ name: 'gw-test', version: '1' }, { capabilities: { elicitation: { form: {}, url: {} } },
    versionNegotiation: { mode: 'auto' } });
  const seen = [];
  client.setRequestHandler('elicitation/create', async (r) => {
    seen.push(r.params);
    await decideApproval('alice', r.params.url);
    return { action: 'accept' };
  });
  await client.connect(new Transport2(new URL(EP()), { requestInit: { headers: { authorization: `Bearer ${alice.token}` } } }));
  const r = await client.callTool({ name: 'create_issue', arguments: { title: 'Via client' } });
  assert.match(r.content[0].text, /Via client/);
  assert.equal(seen.length, 1);
  assert.equal(seen[0].mode, 'url');
  await client.close();
});

test('a client without URL elicitation gets the fallback text with the link; a denial says until when', async () => {
  const r = await call26(alice.token, 'create_issue', { title: 'Deny me' }, { caps: { elicitation: {} } });
  assert.equal(r.body.result.isError, true, r.text);
  const text = r.body.result.content[0].text;
  const link = text.match(new RegExp(`${v.url}/approve/[A-Za-z0-9_-]+`));
  assert.ok(link, text);
  assert.match(text, /call the tool again/);
  await decideApproval('alice', link[0], 'deny');
  const d = await call26(alice.token, 'create_issue', { title: 'Deny me' });
  assert.equal(d.body.result.isError, true, d.text);
  assert.match(d.body.result.content[0].text, /denied .* refused until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/);
  // The 2025 client without URL elicitation: the same fallback form.
  const r25 = await rpc(alice.token, { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'create_issue', arguments: { title: 'v1' } } },
    { headers: { 'mcp-protocol-version': '2025-11-25' } });
  assert.equal(r25.body.result.isError, true, r25.text);
  assert.match(r25.body.result.content[0].text, /\/approve\//);
});

test('revoked on /me: the next call asks for consent; after consenting again the retry goes on', async () => {
  const bob = await signIn('bob');
  const r0 = await call26(bob.token, 'list_issues', {});
  assert.match(r0.body.result.content[0].text, /first/, r0.text);
  const rv = await v.revokeHttp({ jar: bob.jar, cid: bob.cid });
  assert.ok(rv.status < 400);
  up.clear();
  const r1 = await call26(bob.token, 'list_issues', {});
  assert.equal(r1.status, 200, r1.text);
  assert.equal(r1.body.result.resultType, 'input_required', r1.text);
  const url = r1.body.result.inputRequests.consent.params.url;
  assert.match(url, new RegExp(`^${v.url}/consent/`));
  assert.equal(up.requests.length, 0, 'nothing upstream without a live consent');
  const c = await v.connectHttp({ jar: bob.jar, consentUri: url, user: 'bob' });
  assert.ok(c.callbackUrl, 'connected at the provider');
  const r2 = await call26(bob.token, 'list_issues', {}, { state: r1.body.result.requestState, id: 2 });
  assert.match(r2.body.result.content[0].text, /first/, r2.text);
});

test('attacks: no token, another endpoint\'s token, an unmapped tool, a batch, an oversized body, a header that lies', async () => {
  const none = await rpc(null, { jsonrpc: '2.0', id: 1, method: 'tools/list' });
  assert.equal(none.status, 401);
  assert.match(none.headers.get('www-authenticate'), /resource_metadata="[^"]+\/mcp\/tracker"/);
  const otherEp = await rpc(alice.token, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { name: 'other' });
  assert.equal(otherEp.status, 401);
  assert.match(otherEp.headers.get('www-authenticate'), /error="invalid_token", error_description="not an access token for this resource"/);
  up.clear();
  const unmapped = await call26(alice.token, 'delete_repo', {});
  assert.equal(unmapped.body.error?.code, -32602, unmapped.text);
  assert.match(unmapped.body.error.message, /Unknown tool: delete_repo/);
  assert.equal(up.calls.length, 0);
  const batch = await rpc(alice.token, null, { raw: JSON.stringify([{ jsonrpc: '2.0', id: 1, method: 'tools/list' }]) });
  assert.equal(batch.status, 400);
  assert.match(batch.body.error.message, /batches are not accepted/);
  const big = await rpc(alice.token, null, { raw: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call',
    params: { name: 'list_issues', arguments: { x: 'a'.repeat(1536 * 1024) } } }) });
  assert.equal(big.status, 413, big.text.slice(0, 200));
  assert.equal(big.body.error.code, -32600);
  assert.match(big.body.error.message, /larger than 1 MiB/);
  const lie = await rpc(alice.token, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'create_issue', arguments: { title: 'x' }, _meta: META } },
    { headers: H26('tools/call', 'list_issues') });
  assert.equal(lie.status, 400);
  assert.equal(lie.body.error.code, -32020);
  assert.equal(up.requests.length, 0, 'none of them reached the upstream');
});

test('a token without the tool\'s scope: 403 insufficient_scope naming it (a step-up, not an elicitation)', async () => {
  const carol = await signIn('carol', { scope: 'issues:read' });
  const r = await call26(carol.token, 'create_issue', { title: 'x' });
  assert.equal(r.status, 403, r.text);
  const www = r.headers.get('www-authenticate');
  assert.match(www, /error="insufficient_scope"/);
  assert.match(www, /scope="issues:read issues:write"/);
  assert.match(www, /resource_metadata=/);
});

test('a slow upstream: a JSON-RPC error that says it timed out', async () => {
  up.delayMs = 3500;
  try {
    const r = await call26(alice.token, 'list_issues', {});
    assert.equal(r.status, 504, r.text);
    assert.equal(r.body.error.code, -32002);
    assert.equal(r.body.error.data.upstream, 'timeout');
    assert.match(r.body.error.message, /did not answer within 2 s/);
    // Audited twice: "forwarded" in the release's transaction, before the call went out,
    // then "upstream_failed" with the status it got (0: none) and why, through the audit
    // queue (so polled), naming the same call.
    const fwd = v.c.rows("SELECT seq, detail FROM audit WHERE action = 'mcp.call' AND outcome = 'forwarded' ORDER BY seq DESC LIMIT 1")[0];
    assert.doesNotMatch(fwd.detail, /upstream=/);
    const id = /^call=([0-9a-f]{16});/.exec(fwd.detail)[1];
    const failed = await answerOf(id);
    assert.equal(failed.outcome, 'upstream_failed');
    assert.ok(failed.seq > fwd.seq);
    assert.match(failed.detail, /tool=list_issues; digest=[A-Za-z0-9_-]{43}; upstream=0; ms=\d+; failure=timeout$/);
  } finally {
    up.delayMs = 0;
  }
});
