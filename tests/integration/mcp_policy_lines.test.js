// The organisation's policy lines (issue #32 item 4) at the MCP gateway's tools/call, against the
// real binary, the real IdPs and a real upstream MCP server (tests/lib/mcp-upstream.mjs; setup as
// in mcp_gateway_policy.test.js): a deny line answers before anyone is asked and nothing goes
// upstream, saying the organisation's policy denied it (issue #32 item 2); an approve line lets
// an approval = required tool through without asking; the audit names the line.
import '../lib/webcrypto.js';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startVaultStack, signedInJars, PROVIDER_SECRETS, DOWNSTREAM } from '../lib/vaultstack.js';
import { ghproxyClient, ghproxyConfig } from '../lib/proxystack.js';
import { vaultSignIn } from '../lib/mcp.js';
import { introspect } from '../lib/downstream.js';
import { startMcpUpstream } from '../lib/mcp-upstream.mjs';

const CLIENT = 'mcp-test';
const REDIRECT = 'http://127.0.0.1:33418/callback';

let v;
let up;
before(async () => {
  let check = async () => false;
  up = await startMcpUpstream({ check: async (t) => check(t) });
  v = await startVaultStack({
    accessTokenTTL: 300,
    extraDsClients: (url) => [ghproxyClient(url)],
    config: ({ providerIssuer }) => {
      const px = ghproxyConfig({ providerIssuer, baseUrl: up.url.replace(/\/mcp$/, '') });
      return {
        ...px,
        'action.ghproxy.list_issues': { ...px['action.ghproxy.list_issues'], 'policy.1': 'deny if state == closed' },
        'action.ghproxy.create_issue': { ...px['action.ghproxy.create_issue'], 'policy.1': 'approve if title prefix "[bot]"' },
        'client.mcptest': { client_id: CLIENT, redirect_uris: REDIRECT },
        'mcp.tracker': { resource: 'ghproxy', upstream: up.url },
      };
    },
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

const signedIn = signedInJars();
const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': { elicitation: { url: {} } } };

async function rpc(token, method, params = {}) {
  const res = await fetch(`${v.url}/mcp/tracker`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
      authorization: `Bearer ${token}`, 'mcp-protocol-version': '2026-07-28', 'mcp-method': method,
      ...(params.name ? { 'mcp-name': params.name } : {}) },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: META } }),
  });
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch {
    const data = text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).filter(Boolean);
    if (data.length) body = JSON.parse(data[data.length - 1]);
  }
  return { status: res.status, body, text };
}

test('tools/call: a deny line answers before anyone is asked, an approve line releases an approval = required tool, the audit names the line', async () => {
  const jar = await signedIn(v.url, 'alice');
  const token = (await vaultSignIn({ v, jar, user: 'alice', clientId: CLIENT, redirectUri: REDIRECT,
    resource: `${v.url}/mcp/tracker`, scope: 'issues:read issues:write' })).access_token;
  up.clear();
  const denied = await rpc(token, 'tools/call', { name: 'list_issues', arguments: { state: 'closed' } });
  assert.equal(denied.status, 200, denied.text);
  assert.equal(denied.body.result?.content?.[0]?.text, 'The call of list_issues with these arguments is denied by '
    + "the organisation's policy (policy list_issues#1). No one is asked, and the same call is denied every time.", denied.text);
  assert.deepEqual(up.calls, [], 'nothing went upstream');
  assert.equal(v.sql("SELECT count(*) FROM approvals"), '0', 'nobody was asked');
  assert.match(v.sql("SELECT detail FROM audit WHERE action = 'approval.denied_by_policy' ORDER BY seq DESC LIMIT 1"),
    /^action=list_issues; line=policy\.1; params_digest=[A-Za-z0-9_-]{43}$/);

  const open = await rpc(token, 'tools/call', { name: 'list_issues', arguments: { state: 'open' } });
  assert.equal(open.status, 200, open.text);
  assert.deepEqual(up.calls.map((c) => c.tool), ['list_issues']);

  up.clear();
  const bot = await rpc(token, 'tools/call', { name: 'create_issue', arguments: { title: '[bot] nightly' } });
  assert.equal(bot.status, 200, bot.text);
  assert.equal(bot.body.error, undefined, bot.text);
  assert.deepEqual(up.calls.map((c) => c.tool), ['create_issue'], 'released without asking');
  assert.equal(v.sql("SELECT count(*) FROM approvals"), '0', 'nobody was asked');
  assert.match(v.sql("SELECT detail FROM audit WHERE action = 'vault.released' ORDER BY seq DESC LIMIT 1"),
    /action=create_issue.*; approved_by=policy create_issue#1$/);
});
