// The development MCP server of `make run` (tests/idp/devmcp.js, issue #31) on its own, against
// the real development provider (devidp.js in downstream mode) and the official SDK clients:
//   - it refuses a request without a token, an unknown token and a token of the same provider
//     that is not for it (401 with WWW-Authenticate and its RFC 9728 metadata), and answers
//     403 insufficient_scope to a tool the token's scopes do not cover;
//   - it accepts the provider's token: @modelcontextprotocol/sdk 1.32.2's client (2025-11-25,
//     a session with its GET stream) lists the three tools with their descriptions and input
//     schemas, lists, opens and closes issues; bad arguments are a tool error;
//   - the variant on @modelcontextprotocol/server 2.4.0 serves @modelcontextprotocol/client
//     2.4.0 with versionNegotiation {mode: 'auto'} on revision 2026-07-28;
//   - the recording holds every request, refused ones included, with its Authorization header
//     and body (what the gateway's tests use to prove which token reached the upstream).
// The 2.x packages declare Node >= 20; on Debian 12's Node 18 they run once globalThis.crypto
// is Web Crypto (../lib/webcrypto.js, imported first here and by devmcp.js), and so does
// 1.32.2's server transport: the server runs here without the global (AS_ON_NODE18).
import '../lib/webcrypto.js';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startIdp } from '../lib/idp.js';
import { startDevMcp } from '../lib/devmcp.js';
import { getIdToken } from '../lib/idplogin.js';

const API = 'http://127.0.0.1:1/tracker-api';   // the provider's downstream resource (never contacted)
const CB = 'http://127.0.0.1:1/cb';
const CLIENTS = [
  { client_id: 'consentd-tracker', client_secret: 'consentd-tracker-dev-secret', redirect_uris: [CB],
    grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic' },
  { client_id: 'resource-server', client_secret: 'resource-server-dev-secret', redirect_uris: [],
    grant_types: [], response_types: [], token_endpoint_auth_method: 'client_secret_basic' },
];
let idp;
before(async () => {
  idp = await startIdp({ clients: CLIENTS, downstream: { resource: API, scopes: ['repo', 'issues:read', 'issues:write'] } });
});
after(async () => { await idp?.stop(); });

// The provider's access token for alice with these scopes, as consentd's vault would hold it.
async function providerToken(scope, user = 'alice') {
  const t = await getIdToken({
    issuer: idp.issuer, clientId: 'consentd-tracker', clientSecret: 'consentd-tracker-dev-secret',
    redirectUri: CB, user, password: `${user}-password`, scope: `openid ${scope}`,
  });
  assert.ok(t.access_token, 'the provider issued an access token');
  return t;
}

const rpc = (url, token, body, headers = {}) => fetch(url, {
  method: 'POST',
  headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
    ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
  body: JSON.stringify(body),
});
const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } } };
const call = (id, name, args) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
const textOf = (result) => JSON.parse(result.content[0].text);
// The server as on Debian 12's Node 18, whose ES modules have no `crypto` global (Node 20
// without its global Web Crypto): 1.32.2's server transport calls crypto.randomUUID().
const AS_ON_NODE18 = { NODE_OPTIONS: '--no-experimental-global-webcrypto' };

test('refuses a missing, an unknown or a foreign token (401) and a tool outside its scopes (403)', async () => {
  const mcp = await startDevMcp({ provider: idp.issuer, audience: API });
  try {
    const prm = `${new URL(mcp.url).origin}/.well-known/oauth-protected-resource/mcp`;
    const none = await rpc(mcp.url, null, INIT);
    assert.equal(none.status, 401);
    assert.equal(none.headers.get('www-authenticate'), `Bearer resource_metadata="${prm}"`);
    const meta = await (await fetch(prm)).json();
    assert.deepEqual(meta.authorization_servers, [idp.issuer]);
    assert.equal(meta.resource, mcp.url);

    const unknown = await rpc(mcp.url, 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln', INIT);
    assert.equal(unknown.status, 401);
    assert.match(unknown.headers.get('www-authenticate'), /^Bearer error="invalid_token", resource_metadata="/);
    assert.match((await unknown.json()).error, /not active/);

    // the same provider's token, active, but for its userinfo (no downstream scope): not for us
    const foreign = await providerToken('profile');
    const f = await rpc(mcp.url, foreign.access_token, INIT);
    assert.equal(f.status, 401);
    assert.match((await f.json()).error, /another audience/);

    // the provider's token for us, read-only: listing works, opening an issue is 403
    const ro = (await providerToken('issues:read')).access_token;
    const init = await rpc(mcp.url, ro, INIT);
    assert.equal(init.status, 200);
    await init.text();
    const list = await rpc(mcp.url, ro, call(2, 'list_issues', {}), { 'mcp-protocol-version': '2025-11-25' });
    assert.equal(list.status, 200, 'a request without a session is served statelessly');
    assert.match(await list.text(), /Welcome to the development tracker/);
    const w = await rpc(mcp.url, ro, call(3, 'create_issue', { title: 'x', body: 'y' }));
    assert.equal(w.status, 403);
    assert.equal(w.headers.get('www-authenticate'),
      `Bearer error="insufficient_scope", scope="issues:write", resource_metadata="${prm}"`);
  } finally {
    await mcp.stop();
  }
});

test('the provider\'s token: the SDK 1.32.2 client lists and calls the tools in a session; the recording holds every request', async () => {
  const mcp = await startDevMcp({ provider: idp.issuer, audience: API, env: AS_ON_NODE18 });
  const tok = await providerToken('issues:read issues:write', 'bob');
  const client = new Client({ name: 'devmcp-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(mcp.url), {
    requestInit: { headers: { authorization: `Bearer ${tok.access_token}` } },
  });
  try {
    await client.connect(transport);
    assert.ok(transport.sessionId, 'initialize opened a session');
    assert.equal(client.getServerVersion().name, 'devmcp-tracker');
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ['list_issues', 'create_issue', 'close_issue']);
    for (const t of tools) {
      assert.ok(t.description.length > 40, `${t.name} has a description`);
      assert.equal(t.inputSchema.type, 'object');
      assert.equal(t.scope, undefined, 'the scope map is the server\'s, not shown');
    }
    assert.deepEqual(tools[1].inputSchema.required, ['title', 'body']);
    assert.deepEqual(tools[2].inputSchema.required, ['id']);

    const created = await client.callTool({ name: 'create_issue', arguments: { title: 'Crash on start', body: 'Steps:\n1. run', labels: ['bug'] } });
    assert.equal(created.isError, undefined);
    const issue = textOf(created);
    assert.deepEqual({ ...issue }, { id: 2, title: 'Crash on start', body: 'Steps:\n1. run', labels: ['bug'],
      state: 'open', author: 'bob', closed_reason: null });
    const closed = textOf(await client.callTool({ name: 'close_issue', arguments: { id: 2, reason: 'duplicate' } }));
    assert.equal(closed.state, 'closed');
    assert.equal(closed.closed_reason, 'duplicate');
    const again = await client.callTool({ name: 'close_issue', arguments: { id: 2 } });
    assert.equal(again.isError, true);
    assert.match(again.content[0].text, /already closed/);
    const open = textOf(await client.callTool({ name: 'list_issues', arguments: {} }));
    assert.deepEqual(open.map((i) => i.id), [1]);
    const all = textOf(await client.callTool({ name: 'list_issues', arguments: { state: 'all' } }));
    assert.deepEqual(all.map((i) => i.id), [2, 1]);
    for (const [args, msg] of [[{ title: 'x' }, /body is required/], [{ title: ' ', body: 'b' }, /title must not be empty/],
      [{ title: 't', body: 'b', owner: 'x' }, /unknown argument owner/], [{ title: 't', body: 'b', labels: ['a', 'a'] }, /repeat/]]) {
      const bad = await client.callTool({ name: 'create_issue', arguments: args });
      assert.equal(bad.isError, true, JSON.stringify(args));
      assert.match(bad.content[0].text, msg);
    }
    const unknownTool = await client.callTool({ name: 'delete_repo', arguments: {} });
    assert.equal(unknownTool.isError, true);

    await transport.terminateSession();
    const recs = mcp.records();
    const ours = recs.filter((r) => r.headers.authorization === `Bearer ${tok.access_token}`);
    assert.equal(ours.length, recs.length, 'every request carried the provider\'s token');
    const methods = recs.map((r) => `${r.method} ${r.method === 'POST' ? JSON.parse(r.body).method || '' : ''}`.trim());
    assert.deepEqual(methods.slice(0, 3), ['POST initialize', 'POST notifications/initialized', 'GET']);
    assert.ok(recs[2].headers['mcp-session-id'], 'the GET stream is the session\'s');
    assert.equal(methods.at(-1), 'DELETE');
    const createRec = recs.find((r) => r.body.includes('"create_issue"') && r.body.includes('Crash on start'));
    assert.deepEqual(JSON.parse(createRec.body).params.arguments, { title: 'Crash on start', body: 'Steps:\n1. run', labels: ['bug'] });
    assert.equal(createRec.path, '/mcp');
    assert.equal(createRec.headers['mcp-session-id'], recs[2].headers['mcp-session-id']);

    // a refused request is recorded too
    await rpc(mcp.url, 'not-the-provider-token', INIT);
    const last = mcp.records().at(-1);
    assert.equal(last.headers.authorization, 'Bearer not-the-provider-token');
    assert.equal(JSON.parse(last.body).method, 'initialize');
  } finally {
    await client.close().catch(() => {});
    await mcp.stop();
  }
});

test('the 2026-07-28 variant (@modelcontextprotocol/server 2.4.0) serves @modelcontextprotocol/client 2.4.0 in auto mode', async () => {
  const { Client: Client2, StreamableHTTPClientTransport: Transport2 } = await import('@modelcontextprotocol/client');
  const mcp = await startDevMcp({ provider: idp.issuer, audience: API, sdk: 2, env: AS_ON_NODE18 });
  const tok = await providerToken('issues:read issues:write', 'carol');
  const client = new Client2({ name: 'devmcp-test-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  try {
    assert.equal((await rpc(mcp.url, null, INIT)).status, 401, 'the same token check');
    await client.connect(new Transport2(new URL(mcp.url), {
      requestInit: { headers: { authorization: `Bearer ${tok.access_token}` } },
    }));
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ['list_issues', 'create_issue', 'close_issue']);
    const created = await client.callTool({ name: 'create_issue', arguments: { title: 'From 2026', body: 'b' } });
    assert.equal(textOf(created).author, 'carol');
    const [refused, ...recs] = mcp.records();
    assert.equal(refused.headers.authorization, undefined);
    assert.equal(JSON.parse(recs[0].body).method, 'server/discover', 'auto mode probes server/discover first');
    const callRec = recs.find((r) => r.body.includes('"From 2026"'));
    assert.equal(callRec.headers['mcp-protocol-version'], '2026-07-28');
    assert.equal(JSON.parse(callRec.body).params._meta['io.modelcontextprotocol/protocolVersion'], '2026-07-28');
    assert.ok(recs.every((r) => r.headers.authorization === `Bearer ${tok.access_token}`));
    console.log(`# node ${process.version}: @modelcontextprotocol/client and server 2.4.0 (engines node >= 20) with globalThis.crypto = node:crypto's webcrypto`);
  } finally {
    await client.close().catch(() => {});
    await mcp.stop();
  }
});
