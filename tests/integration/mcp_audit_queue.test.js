// The MCP gateway's audit of a tool call's answer (issue 31: "every tool call is audited: ...
// upstream status") is written off the request's path by the audit queue (server/audit_queue.c),
// one transaction per batch. What this file holds: an orderly stop (SIGTERM) right after a
// call writes the queued entry before consentd exits -- with [audit] batch_interval_ms at
// its maximum (10 s), so only the stop's flush can have written it -- and the chain still
// verifies (`consentd audit verify`) with the batched entries in it. Either backend
// (TEST_DB=pg too). The real binary, IdPs and an upstream on
// @modelcontextprotocol/server 2.4.0 (tests/lib/mcp-upstream.mjs), as mcp_gateway.test.js.
import '../lib/webcrypto.js';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startVaultStack, signedInJars, PROVIDER_SECRETS, DOWNSTREAM } from '../lib/vaultstack.js';
import { ghproxyClient, ghproxyConfig } from '../lib/proxystack.js';
import { vaultSignIn } from '../lib/mcp.js';
import { introspect } from '../lib/downstream.js';
import { startMcpUpstream } from '../lib/mcp-upstream.mjs';
import { consentdCommand } from '../lib/consentd.js';

const CLIENT = 'mcp-test';
const REDIRECT = 'http://127.0.0.1:33418/callback';

let v;
let up;
before(async () => {
  let check = async () => false;
  up = await startMcpUpstream({ check: (t) => check(t) });
  v = await startVaultStack({
    accessTokenTTL: 300,
    extraDsClients: (url) => [ghproxyClient(url)],
    config: ({ providerIssuer }) => ({
      audit: { batch_interval_ms: 10000 },
      ...ghproxyConfig({ providerIssuer, baseUrl: up.url.replace(/\/mcp$/, '') }),
      'client.mcptest': { client_id: CLIENT, redirect_uris: REDIRECT },
      'mcp.tracker': { resource: 'ghproxy', upstream: up.url },
    }),
  });
  check = async (token) => {
    const r = await introspect({ introspectionEndpoint: v.dsMeta.introspection_endpoint, clientId: 'resource-server',
      clientSecret: PROVIDER_SECRETS.rs, token });
    return r.active === true && r.aud === DOWNSTREAM.resource;
  };
});
after(async () => {
  try { await v?.stop(); } finally { await up?.stop(); }
});

const EP = () => `${v.url}/mcp/tracker`;
const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } } };

async function listIssues(token) {
  const res = await fetch(EP(), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
      authorization: `Bearer ${token}`, 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call',
      'mcp-name': 'list_issues' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call',
      params: { name: 'list_issues', arguments: { state: 'open' }, _meta: META } }),
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  assert.match(text, /first/);
  return res.headers.get('x-request-id');
}

const callEntries = (id) => v.c.rows("SELECT seq, outcome, detail FROM audit WHERE action = 'mcp.call' "
  + `AND detail LIKE 'call=${id};%' ORDER BY seq`);

test('an orderly stop right after a call writes its queued "answered" entry; the chain verifies', async () => {
  const jar = await signedInJars()(v.url, 'alice');
  const t = await vaultSignIn({ v, jar, user: 'alice', clientId: CLIENT, redirectUri: REDIRECT, resource: EP(),
    scope: 'issues:read issues:write' });
  const id = await listIssues(t.access_token);
  assert.match(id, /^[0-9a-f]{16}$/, 'the call id is the request id the client got (X-Request-Id)');
  // The answer's entry waits for its batch (up to 10 s here) when the stop comes.
  const exit = await v.kill('SIGTERM');
  assert.equal(exit.code, 0, 'an orderly stop');
  const rows = callEntries(id);
  assert.deepEqual(rows.map((r) => r.outcome), ['forwarded', 'answered'], 'the stop wrote the queued entry');
  assert.match(rows[1].detail, /; upstream=200; ms=\d+; bytes=[1-9]\d*; end=complete$/);
  const verify = await consentdCommand(['audit', 'verify', '-c', v.c.cfgPath]);
  assert.equal(verify.code, 0, verify.stdout + verify.stderr);

  // consentd again, for the stack's own stop (on PostgreSQL the harness's restart opens a
  // fresh database: nothing more is asserted on it).
  await v.restart();
});
