// consentd as the MCP gateway in the 2025-11-25 form (issue 31): the official
// @modelcontextprotocol/sdk 1.32.2 client in a session with a real upstream that keeps
// sessions (tests/lib/mcp-upstream-2025.mjs, the same SDK's server), through the real binary,
// the real IdPs (login, and the downstream provider) and the person's approval over HTTP.
//
// A tools/call that needs the person answers JSON-RPC -32042 (UrlElicitationRequiredError in
// the SDK) with an elicitationId and the approval link; once the person decides, the session's
// GET stream (served by consentd: the upstream's own is not relayed) carries
// notifications/elicitation/complete with that id, once; the retry goes out once.  From the
// attacker's side: another person's session id (POST, GET, DELETE), a replayed elicitation,
// a stream flood past the bound per person.
//
// Setup by tests/lib/mcpstack.js, as mcp_gateway.test.js: [mcp.tracker] stands for resource ghproxy
// (tests/lib/proxystack.js): list_issues (approval none), create_issue (approval required).
import '../lib/webcrypto.js';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitationCompleteNotificationSchema, ToolListChangedNotificationSchema, UrlElicitationRequiredError } from '@modelcontextprotocol/sdk/types.js';
import { startMcpGateway, decideOverHttp } from '../lib/mcpstack.js';
import { startMcpUpstream2025 } from '../lib/mcp-upstream-2025.mjs';

const METRICS_TOKEN = 'mcp-2025-metrics-token-5d1e8b';
let g;
let v;
let up;
before(async () => {
  g = await startMcpGateway({
    upstream: startMcpUpstream2025,
    tracker: { upstream_timeout: 5 },
    config: () => ({ consent: { max_pending_per_user: 50, deny_cooldown: 600 },
      metrics: { token: METRICS_TOKEN } }),
  });
  ({ v, up } = g);
});
after(async () => { await g?.stop(); });

const ep = () => `${v.url}/mcp/tracker`;

// The person signs the client in at consentd (consent page, then the provider) -> token.
async function signIn(user) {
  const { token } = await g.signIn(user);
  return { token };
}

// The person opens the approval link and decides.
async function decide(user, link, decision = 'approve') {
  await decideOverHttp({ v, jar: await g.signedIn(v.url, user), uri: link, decision });
}

// An SDK client in a session; completed: the elicitationIds its stream announced, in order.
async function connect(token, { url = true } = {}) {
  const completed = [];
  const errors = [];
  const client = new Client({ name: 'gw25-test', version: '1' },
    { capabilities: url ? { elicitation: { url: {} } } : {} });
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => { completed.push(n.params.elicitationId); });
  const transport = new StreamableHTTPClientTransport(new URL(ep()),
    { requestInit: { headers: { authorization: `Bearer ${token}` } } });
  transport.onerror = (e) => errors.push(e);
  await client.connect(transport);
  return { client, transport, completed, errors, sid: transport.sessionId };
}

async function waitFor(fn, ms, what, state) {
  const end = Date.now() + ms;
  for (;;) {
    const got = await fn();
    if (got) return got;
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}${state ? `; ${await state()}` : ''}`);
    await new Promise((r) => { setTimeout(r, 50); });
  }
}

// consentd's /metrics: { status, lines }.
async function metrics() {
  const m = await fetch(`${v.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  return { status: m.status, lines: (await m.text()).split('\n') };
}

// The writer's state from /metrics, said when a stream's place is not given back: a
// stream whose write waits in a batch nobody ends holds its place until the next write.
async function writerState() {
  try {
    return (await metrics()).lines
      .filter((l) => /^consentd_db_(requests_under_way|commit_lingers_total|write_queue_full_total|commit_batch_size_count) /.test(l))
      .join(', ');
  } catch (e) {
    return `no metrics: ${e.message}`;
  }
}

// A raw request to the gateway with a session id -> { status, body, text, headers }.
async function raw(token, sid, { method = 'POST', msg, signal } = {}) {
  const res = await fetch(ep(), {
    method, signal,
    headers: { authorization: `Bearer ${token}`, 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25',
      accept: 'application/json, text/event-stream', ...(msg ? { 'content-type': 'application/json' } : {}) },
    ...(msg ? { body: JSON.stringify(msg) } : {}),
  });
  if (method === 'GET' && res.status === 200) return { status: res.status, headers: res.headers, res };
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, headers: res.headers, body, text };
}

let alice;
let bob;
let session;   // alice's client with URL elicitation

test('the 2025 client in a session: -32042, the person approves, notifications/elicitation/complete on its stream, the retry goes out once', async () => {
  alice = await signIn('alice');
  up.clear();
  session = await connect(alice.token);
  assert.ok(session.sid, 'the upstream opened a session (Mcp-Session-Id)');
  assert.ok(up.sessions.has(session.sid), 'the id the client holds is the upstream\'s own');
  const { tools } = await session.client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), ['create_issue', 'list_issues']);

  let err;
  try {
    await session.client.callTool({ name: 'create_issue', arguments: { title: 'from 2025' } });
  } catch (e) { err = e; }
  assert.ok(err instanceof UrlElicitationRequiredError, `UrlElicitationRequiredError, got ${err}`);
  assert.equal(err.code, -32042);
  assert.equal(err.elicitations.length, 1);
  const [el] = err.elicitations;
  assert.equal(el.mode, 'url');
  assert.match(el.elicitationId, /^[A-Za-z0-9_-]{22}$/);
  assert.ok(el.url.startsWith(`${v.url}/approve/`), el.url);
  assert.ok(el.message.length > 0);
  assert.equal(up.calls.length, 0, 'nothing reached the upstream\'s tool yet');
  assert.deepEqual(session.completed, []);

  await decide('alice', el.url, 'approve');
  await waitFor(() => session.completed.length > 0, 5000, 'notifications/elicitation/complete');
  assert.deepEqual(session.completed, [el.elicitationId]);

  const r = await session.client.callTool({ name: 'create_issue', arguments: { title: 'from 2025' } });
  assert.match(r.content[0].text, /created #\d+: from 2025/);
  assert.deepEqual(up.calls.filter((c) => c.tool === 'create_issue'), [{ tool: 'create_issue', args: { title: 'from 2025' } }]);
  // consentd serves the session's stream, and relays the upstream's own GET stream into it
  // (opened with the provider's token, like every request upstream).
  for (const q of up.requests) assert.ok(!JSON.stringify(q).includes(alice.token), 'never the client\'s token upstream');
});

test('the upstream\'s own GET stream is relayed: its server-initiated notification reaches the client, beside consentd\'s own events', async () => {
  const c = await connect(alice.token);
  const changed = [];
  c.client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed.push(Date.now()); });
  // The SDK client opens the session's GET stream after initialize; consentd opens the
  // upstream's with the person's provider token.
  await waitFor(() => up.requests.some((q) => q.method === 'GET' && q.headers['mcp-session-id'] === c.sid),
    10000, 'the upstream GET stream opened by consentd');
  const get = up.requests.find((q) => q.method === 'GET' && q.headers['mcp-session-id'] === c.sid);
  assert.ok(!JSON.stringify(get).includes(alice.token), 'the provider token, never the client\'s');
  assert.match(get.headers.authorization, /^Bearer \S+$/);
  up.notifyAll();
  await waitFor(() => changed.length > 0, 10000, 'notifications/tools/list_changed through consentd');
  // consentd's own events still come on the same stream.
  let err;
  try { await c.client.callTool({ name: 'create_issue', arguments: { title: 'relay' } }); } catch (e) { err = e; }
  assert.ok(err instanceof UrlElicitationRequiredError, String(err));
  await decide('alice', err.elicitations[0].url, 'approve');
  await waitFor(() => c.completed.includes(err.elicitations[0].elicitationId), 5000, 'its completion');
  await c.client.close();
});

test('a replayed elicitation: the approval went out once, the same call asks again with a new id, the old id is never announced again', async () => {
  let err;
  try {
    await session.client.callTool({ name: 'create_issue', arguments: { title: 'from 2025' } });
  } catch (e) { err = e; }
  assert.ok(err instanceof UrlElicitationRequiredError, `asked again, got ${err}`);
  const [el] = err.elicitations;
  assert.notEqual(el.elicitationId, session.completed[0]);
  assert.equal(up.calls.filter((c) => c.tool === 'create_issue').length, 1, 'released once');
  await decide('alice', el.url, 'deny');
  await waitFor(() => session.completed.length > 1, 5000, 'the second completion');
  await new Promise((r) => { setTimeout(r, 1500); });      // three polls and more
  assert.deepEqual(session.completed.slice(1), [el.elicitationId], 'each id once, the first never again');
  // A denial: the retry is a tool error that says until when, not a new elicitation.
  const r = await session.client.callTool({ name: 'create_issue', arguments: { title: 'from 2025' } });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /denied[^]*until/);
});

test('a client in a session that declared no URL elicitation gets the link as tool text', async () => {
  const plain = await connect(alice.token, { url: false });
  try {
    const r = await plain.client.callTool({ name: 'create_issue', arguments: { title: 'plain' } });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, new RegExp(`${v.url}/approve/`));
  } finally {
    await plain.transport.terminateSession().catch(() => {});
    await plain.client.close();
  }
});

test('attacks: another person\'s session id is refused on POST, GET and DELETE; nothing of it goes upstream', async () => {
  bob = await signIn('bob');
  up.clear();
  const call = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'list_issues', arguments: {} } };
  let r = await raw(bob.token, session.sid, { msg: call });
  assert.equal(r.status, 404, r.text);
  assert.equal(r.body.error.code, -32001);
  assert.match(r.body.error.message, /Session not found/);
  r = await raw(bob.token, session.sid, { method: 'GET' });
  assert.equal(r.status, 404, r.text);
  r = await raw(bob.token, session.sid, { method: 'DELETE' });
  assert.equal(r.status, 404, r.text);
  // A made-up id is the same answer.
  r = await raw(alice.token, 'not-a-session-consentd-knows', { msg: call });
  assert.equal(r.status, 404, r.text);
  assert.equal(up.requests.length, 0, `nothing reached the upstream: ${JSON.stringify(up.requests.map((q) => q.method))}`);
  assert.ok(up.sessions.has(session.sid), 'alice\'s session lives on upstream');
  // And alice's session still works for her.
  const ok = await session.client.callTool({ name: 'list_issues', arguments: {} });
  assert.match(ok.content[0].text, /first/);
});

test('attacks: a flood of GET streams past the bound per person is answered 429, and a closed stream gives its place back', async () => {
  // The bound is 2 per person on each node (each stream holds one of that node's threads);
  // the SDK client holds one of alice's open.  With TEST_NODES behind a balancer the flood
  // meets a full node after at most 2 per node.  (The stream of the client the test before
  // closed is let go at its next keep-alive: the first tries may be refused already.)
  const nodes = Number(process.env.TEST_NODES || 1);
  const open = [];
  let refused;
  for (let i = 0; i < 2 * nodes + 1 && !refused; i += 1) {
    const a = new AbortController();
    const s = await raw(alice.token, session.sid, { method: 'GET', signal: a.signal });
    if (s.status === 200) {
      assert.match(s.headers.get('content-type'), /^text\/event-stream/);
      open.push(a);
    } else {
      refused = s;
    }
  }
  assert.ok(refused, `a refusal within ${2 * nodes + 1} streams`);
  assert.equal(refused.status, 429, refused.text);
  assert.equal(refused.headers.get('retry-after'), '5');
  assert.equal(refused.body.error.code, -32005);
  assert.match(refused.body.error.message, /too many streams/);
  for (const a of open) a.abort();
  // consentd notices a closed stream when a write fails (keep-alive comments every 2 s:
  // the first after the close may still be accepted by the socket).
  await waitFor(async () => {
    const a = new AbortController();
    const s = await raw(alice.token, session.sid, { method: 'GET', signal: a.signal });
    a.abort();
    return s.status === 200;
  }, 20000, 'the place given back', writerState);
});

test('an open GET stream is not a request the group commit waits for: its handler is done', async () => {
  // SQLite's group commit waits (at most a COMMIT's time) for the requests under way; a
  // stream held open for minutes must not count among them (docs/reference.md, "Durability").
  // (A stream the test before closed gives its place back at its next keep-alive.)
  let a;
  await waitFor(async () => {
    a = new AbortController();
    const s = await raw(alice.token, session.sid, { method: 'GET', signal: a.signal });
    if (s.status !== 200) a.abort();
    return s.status === 200;
  }, 20000, 'a stream of alice\'s open', writerState);
  try {
    const m = await metrics();
    assert.equal(m.status, 200);
    const line = m.lines.find((l) => l.startsWith('consentd_db_requests_under_way '));
    assert.ok(line, 'consentd_db_requests_under_way is scraped');
    // The scrape's own request only (PostgreSQL has no linger: 0).
    assert.equal(Number(line.split(' ')[1]), process.env.TEST_DB === 'pg' ? 0 : 1, line);
  } finally {
    a.abort();
  }
});

test('DELETE ends the session at consentd and upstream; its id then serves nobody', async () => {
  const sid = session.sid;
  const rows = async () => Number(await v.sql('SELECT count(*) FROM mcp_sessions'));
  const before = await rows();
  await session.transport.terminateSession();
  assert.equal(await rows(), before - 1, 'consentd forgot the session');
  assert.ok(!up.sessions.has(sid), 'the upstream ended it too');
  const r = await raw(alice.token, sid, { msg: { jsonrpc: '2.0', id: 9, method: 'tools/list', params: {} } });
  assert.equal(r.status, 404, r.text);
  await session.client.close();
});

test('attacks: an upstream that answers bob\'s initialize with alice\'s live session id: the id is not handed to bob (502)', async () => {
  up.ids = ['repeated-session-id'];
  const a = await connect(alice.token);
  assert.equal(a.sid, 'repeated-session-id');
  up.ids = ['repeated-session-id'];
  let err;
  try {
    await connect(bob.token);
  } catch (e) { err = e; }
  assert.ok(err, 'bob\'s initialize failed');
  assert.match(String(err.message), /502|session id consentd cannot use/);
  // Bob holds nothing: the id is still alice's alone at consentd.
  const r = await raw(bob.token, 'repeated-session-id', { msg: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} } });
  assert.equal(r.status, 404, r.text);
  await a.client.close();
});
