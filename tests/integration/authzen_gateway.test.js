// The organisation's decision point (issue #32 item 5) at the MCP gateway and over real TLS,
// beside authzen.test.js (/token and /proxy).  A real policy engine (Cedar through
// @cedar-policy/cedar-wasm, tests/lib/authzen-pdp.js) behind an AuthZEN 1.0 endpoint served
// by node's https server with a certificate from a test CA the test makes (openssl CLI, temp
// dir); the real binary, the real IdPs, a real upstream MCP server
// (tests/lib/mcp-upstream.mjs) and the official MCP client (@modelcontextprotocol/client).
//   - tools/call of create_issue (approval = required): permit -> it reaches the upstream, no
//     person asked, vault.released says approved_by=decision point; deny -> a tool error that
//     says the organisation's decision point denied it, nothing upstream; no decision -> the
//     gateway asks the person (input_required with the approval link);
//   - TLS: with ca_file naming the test CA the call goes through; without it (the system's
//     CAs) the TLS check fails and on_error = deny refuses, audited as a failure; a
//     certificate from that CA for another host fails the same way;
//   - what the PDP answers that is not an answer: 500, 404, a redirect (never followed), a
//     200 larger than 16384 bytes: each refused (on_error = deny), audited with its failure.
//
// Stacks: t (https PDP, ca_file = the test CA, on_error = deny)
//         sys (the same https PDP, no ca_file, on_error = deny)
import '../lib/webcrypto.js';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { startVaultStack, signedInJars, PROVIDER_SECRETS, DOWNSTREAM } from '../lib/vaultstack.js';
import { startCedarPdp, testCerts } from '../lib/authzen-pdp.js';
import { ghproxyClient, ghproxyConfig } from '../lib/proxystack.js';
import { vaultSignIn, decodeJwt } from '../lib/mcp.js';
import { introspect } from '../lib/downstream.js';
import { startMcpUpstream } from '../lib/mcp-upstream.mjs';
import { startRecorder } from '../lib/recorder.js';
import { post2026 } from '../lib/mcpstack.js';

const TOKEN = 'pdp-bearer-tls-0123456789abcdef';
const CLIENT = 'mcp-test';
const REDIRECT = 'http://127.0.0.1:33418/callback';
const DENIED = "denied by the organisation's decision point";
// Cedar, on the tool's arguments ({title}): "Fix typo" permitted, "Drop tables" forbidden,
// any other title: no policy applies (the person is asked).
const POLICIES = {
  'typo-open': 'permit(principal, action == Action::"create_issue", resource == Resource::"ghproxy") when '
    + '{ context.parameters has title && context.parameters.title == "Fix typo" };',
  'drop-closed': 'forbid(principal, action == Action::"create_issue", resource == Resource::"ghproxy") when '
    + '{ context.parameters has title && context.parameters.title == "Drop tables" };',
};

let certs; let pdp; let up; let other; let t; let sys;
function stackConfig(upstream, authzen) {
  return ({ providerIssuer }) => ({
    consent: { max_pending_per_user: 50 },
    ...ghproxyConfig({ providerIssuer, baseUrl: upstream.replace(/\/mcp$/, '') }),
    'client.mcptest': { client_id: CLIENT, redirect_uris: REDIRECT },
    'mcp.tracker': { resource: 'ghproxy', upstream },
    // No test here is of the deadline (authzen.test.js has them): long enough that a TLS
    // handshake refused on a loaded machine is reported as that, not as a timeout (at 1.5 s
    // a fresh CI run saw 'failure=timeout ... ms=2110' for the untrusted certificate).
    authzen: { endpoint: pdp.url, token: TOKEN, timeout_ms: 10000, on_error: 'deny', ...authzen },
  });
}
before(async () => {
  certs = testCerts();
  pdp = await startCedarPdp({ policies: POLICIES, token: TOKEN, tls: certs.good });
  other = await startRecorder();          // a redirect's target: it must never be asked
  let check = async () => false;
  up = await startMcpUpstream({ check: (x) => check(x) });
  const common = { accessTokenTTL: 300, extraDsClients: (url) => [ghproxyClient(url)] };
  t = await startVaultStack({ ...common, config: stackConfig(up.url, { ca_file: certs.ca }) });
  sys = await startVaultStack({ ...common, config: stackConfig(up.url, {}) });
  check = async (token) => {
    for (const s of [t, sys]) {
      const r = await introspect({ introspectionEndpoint: s.dsMeta.introspection_endpoint, clientId: 'resource-server',
        clientSecret: PROVIDER_SECRETS.rs, token });
      if (r.active === true && r.aud === DOWNSTREAM.resource) return true;
    }
    return false;
  };
});
after(async () => {
  try { await t?.stop(); await sys?.stop(); } finally {
    await pdp?.stop(); await up?.stop(); await other?.stop(); certs?.rm();
  }
});

const signedIn = signedInJars();
const EP = (s) => `${s.url}/mcp/tracker`;

async function signIn(s, user) {
  const jar = await signedIn(s.url, user);
  const r = await vaultSignIn({ v: s, jar, user, clientId: CLIENT, redirectUri: REDIRECT, resource: EP(s),
    scope: 'issues:read issues:write' });
  return { token: r.access_token, cid: decodeJwt(r.access_token).cid };
}

// A 2026-07-28 tools/call by hand (the client declares URL elicitation) -> { status, body, text }.
const call26 = (s, token, tool, args) => post2026(EP(s), token, 'tools/call', { name: tool, arguments: args });

// The official client, signed in as token, asked by the gateway (elicitation) -> pushed to asked.
async function mcpClient(s, token, asked) {
  const c = new Client({ name: 'authzen-test', version: '1' }, { capabilities: { elicitation: { form: {}, url: {} } },
    versionNegotiation: { mode: 'auto' } });
  c.setRequestHandler('elicitation/create', async (r) => { asked.push(r.params); return { action: 'decline' }; });
  await c.connect(new StreamableHTTPClientTransport(new URL(EP(s)), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return c;
}

function evaluations(s, cid) {
  return s.c.rows(`SELECT outcome, detail, actor FROM audit WHERE action = 'authzen.evaluated' AND consent_id = '${cid}' ORDER BY seq`);
}
const created = (title) => up.calls.filter((c) => c.tool === 'create_issue' && c.args.title === title).length;

let alice;
test('MCP tools/call: the decision point permits, and the call reaches the upstream without asking the person', async () => {
  alice = await signIn(t, 'alice');
  const asked = [];
  const client = await mcpClient(t, alice.token, asked);
  const n = pdp.seen.length;
  const r = await client.callTool({ name: 'create_issue', arguments: { title: 'Fix typo' } });
  await client.close();
  assert.match(r.content[0].text, /created #\d+: Fix typo/, JSON.stringify(r));
  assert.notEqual(r.isError, true);
  assert.equal(created('Fix typo'), 1, 'the upstream ran it once');
  assert.deepEqual(asked, [], 'the person was not asked');
  assert.equal(Number(t.sql(`SELECT count(*) FROM approvals WHERE consent_id = '${alice.cid}'`)), 0, 'no approval request');
  // What the PDP was asked: the tool's arguments as the action's parameters.
  assert.equal(pdp.seen.length, n + 1);
  const q = pdp.seen.at(-1);
  assert.equal(q.authorization, `Bearer ${TOKEN}`);
  assert.deepEqual(q.body.action, { name: 'create_issue', properties: { parameters: { title: 'Fix typo' } } });
  assert.deepEqual(q.body.resource, { type: 'consentd_resource', id: 'ghproxy' });
  assert.equal(q.body.context.consent_id, alice.cid);
  assert.equal(q.body.context.agent, CLIENT);
  const e = evaluations(t, alice.cid).at(-1);
  assert.equal(e.outcome, 'permit');
  assert.match(e.detail, /^action=create_issue; digest=[A-Za-z0-9_-]{43}; decision=permit; reason=typo-open; ms=\d+$/);
  const rel = t.sql(`SELECT detail FROM audit WHERE action = 'vault.released' AND consent_id = '${alice.cid}' ORDER BY seq DESC LIMIT 1`);
  assert.match(rel, /approved_by=decision point/);
  // The call went out once, in the release's transaction (its answer entry, from the
  // audit queue, follows it at its own pace: not asserted here).
  const fwd = t.c.rows(`SELECT seq FROM audit WHERE action = 'mcp.call' AND outcome = 'forwarded' AND consent_id = '${alice.cid}'`);
  assert.equal(fwd.length, 1);
});

test('MCP tools/call: the decision point denies: a tool error naming it, and the upstream never sees the call', async () => {
  // The call's own entry, counted: the audit queue may still append the first test's
  // 'answered' entry after it, so the log's last mcp.call row is not necessarily this one.
  const denied = () => t.c.rows(`SELECT seq FROM audit WHERE action = 'mcp.call' AND outcome = 'denied' AND consent_id = '${alice.cid}'`).length;
  const deniedBefore = denied();
  const asked = [];
  const client = await mcpClient(t, alice.token, asked);
  const r = await client.callTool({ name: 'create_issue', arguments: { title: 'Drop tables' } });
  await client.close();
  assert.equal(r.isError, true, JSON.stringify(r));
  assert.equal(r.content[0].text, `This call of create_issue was ${DENIED}.`);
  assert.equal(created('Drop tables'), 0, 'nothing upstream');
  assert.deepEqual(asked, [], 'the person was not asked');
  const e = evaluations(t, alice.cid).at(-1);
  assert.equal(e.outcome, 'deny');
  assert.match(e.detail, /decision=deny; reason=forbidden by drop-closed/);
  assert.equal(denied(), deniedBefore + 1, 'the denied call is one mcp.call entry, outcome denied');
});

test('MCP tools/call: no decision (no policy applies): the gateway asks the person', async () => {
  const r = await call26(t, alice.token, 'create_issue', { title: 'Something else' });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.result.resultType, 'input_required', r.text);
  const el = r.body.result.inputRequests.approval;
  assert.equal(el.method, 'elicitation/create');
  assert.match(el.params.url, new RegExp(`^${t.url}/approve/[A-Za-z0-9_-]+$`));
  assert.equal(created('Something else'), 0, 'nothing upstream');
  assert.equal(evaluations(t, alice.cid).at(-1).outcome, 'ask');
  // Nothing went upstream, and an approval request waits for the person.
  assert.equal(Number(t.sql(`SELECT count(*) FROM approvals WHERE consent_id = '${alice.cid}' AND status = 'pending'`)), 1);
});

test('TLS: without ca_file (the system CAs) the test CA\'s certificate fails the check: on_error = deny refuses, audited', async () => {
  const bob = await signIn(sys, 'bob');
  const n = pdp.seen.length;
  const r = await call26(sys, bob.token, 'create_issue', { title: 'Fix typo' });
  assert.equal(r.body?.result?.isError, true, r.text);
  assert.equal(r.body.result.content[0].text, `This call of create_issue was ${DENIED}.`);
  assert.equal(pdp.seen.length, n, 'no request reached the PDP: the handshake failed');
  const e = evaluations(sys, bob.cid).at(-1);
  assert.equal(e.outcome, 'error');
  assert.match(e.detail, /failure=unreachable \(connection or TLS failed\); on_error=deny: denied/);
  assert.equal(created('Fix typo'), 1, 'only the first test\'s call ever went upstream');
});

test('TLS: a certificate from the trusted CA for another host fails the check too', async () => {
  try {
    pdp.setCert(certs.otherHost);
    const n = pdp.seen.length;
    const r = await call26(t, alice.token, 'create_issue', { title: 'Fix typo' });
    assert.equal(r.body?.result?.isError, true, r.text);
    assert.equal(r.body.result.content[0].text, `This call of create_issue was ${DENIED}.`);
    assert.equal(pdp.seen.length, n, 'no request reached the PDP');
    const e = evaluations(t, alice.cid).at(-1);
    assert.equal(e.outcome, 'error');
    assert.match(e.detail, /failure=unreachable \(connection or TLS failed\); on_error=deny/);
  } finally {
    pdp.setCert(certs.good);
  }
  // The right certificate again: permitted.
  const ok = await call26(t, alice.token, 'create_issue', { title: 'Fix typo' });
  assert.match(ok.body?.result?.content?.[0]?.text ?? '', /created #\d+: Fix typo/, ok.text);
});

test('answers that are not answers: 500, 404, a redirect (not followed), an oversized 200: each refused and audited', async () => {
  const cases = [
    { reply: { status: 500, body: '{"decision": true}' }, failure: 'HTTP status 500' },
    { reply: { status: 404, body: 'not here' }, failure: 'HTTP status 404' },
    // A redirect to a server that would be asked instead: 307 keeps the POST if followed.
    { reply: { status: 307, headers: { location: `${other.url}/access/v1/evaluation` } }, failure: 'HTTP status 307' },
    { reply: { status: 302, headers: { location: `${other.url}/access/v1/evaluation` } }, failure: 'HTTP status 302' },
    { reply: { status: 200, headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ decision: true, context: { pad: 'x'.repeat(17000) } }) },
    failure: 'the answer is larger than 16384 bytes' },
  ];
  const o0 = other.seen.length;
  try {
    for (const c of cases) {
      pdp.reply = c.reply;
      const r = await call26(t, alice.token, 'create_issue', { title: 'Fix typo' });
      assert.equal(r.body?.result?.isError, true, `${c.failure}: ${r.text}`);
      assert.equal(r.body.result.content[0].text, `This call of create_issue was ${DENIED}.`);
      const e = evaluations(t, alice.cid).at(-1);
      assert.equal(e.outcome, 'error', c.failure);
      assert.equal(e.detail.split('; ')[2], `failure=${c.failure}`);
      assert.match(e.detail, /; on_error=deny: denied; ms=\d+$/);
    }
  } finally {
    pdp.reply = null;
  }
  assert.equal(other.seen.length, o0, 'the redirect\'s target was never asked');
  assert.equal(Number(t.sql(`SELECT count(*) FROM audit WHERE detail LIKE '%${TOKEN}%'`)), 0, 'the bearer token is never audited');
});
