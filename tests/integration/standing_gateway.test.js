// The person's standing rules (issue #32) at the other two check points, from the attacker's
// side: consentd's proxy (/proxy, flow H) and the MCP gateway's tools/call (issue #31), both
// through exchange_release's one approval gate.  A rule made on the approval page lets its
// calls through without a person and nothing else: another value of a fixed parameter asks
// again, a used-up rule asks again, and nothing reaches the upstream without an approval.
//
// [resource.ghproxy] (tests/lib/proxystack.js) with create_issue offering match rules; the
// proxy's upstream is a recorder (tests/lib/recorder.js), the MCP upstream a real MCP server
// (tests/lib/mcp-upstream.mjs), whose create_issue takes {title}; set up by tests/lib/mcpstack.js.
import '../lib/webcrypto.js';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startRecorder } from '../lib/recorder.js';
import { pollExchange } from '../lib/gateway.js';
import { basicAuth } from '../lib/idplogin.js';
import { startMcpGateway, decideOverHttp, post2026 } from '../lib/mcpstack.js';

const GW_AUTH = basicAuth('agent-gateway', 'gateway-dev-secret');

let stack;
let v;
let rec;
let up;
before(async () => {
  rec = await startRecorder();
  stack = await startMcpGateway({
    baseUrl: rec.url,
    redirect: 'http://127.0.0.1:33419/callback',
    config: ({ ghproxy: gh }) => ({
      consent: { max_pending_per_user: 50 },
      'action.ghproxy.create_issue': { ...gh['action.ghproxy.create_issue'], standing: 'match', standing_max: 3600 },
      'agent.coder': { allow: 'notes:read notes:write ghproxy:issues:read ghproxy:issues:write' },
    }),
  });
  ({ v, up } = stack);
});
after(async () => {
  try { await stack?.stop(); } finally { await rec?.stop(); }
});

const signedIn = (url, user) => stack.signedIn(url, user);

// The person opens the approval link and approves with a rule (fields: rule, for, uses, kN).
async function approveWithRule(user, uri, fields) {
  const { html, done } = await decideOverHttp({ v, jar: await signedIn(v.url, user), uri, decision: 'standing', fields });
  assert.match(done, /id="rule-made"/);
  return html;
}

// --- /proxy ----------------------------------------------------------------------------

async function connectProxy(user) {
  const jar = await signedIn(v.url, user);
  const subjectToken = await v.idToken(user);
  const scope = 'issues:read issues:write';
  const first = await v.gw.exchange({ subjectToken, audience: 'ghproxy', scope, agentId: 'coder' });
  assert.equal(first.body?.error, 'consent_required', JSON.stringify(first.body));
  const a = await v.approveHttp({ jar, consentUri: first.body.consent_uri, user });
  const callbackUrl = await v.providerLoginHttp({ jar, authorizeUrl: a.location, user });
  await v.deliverCallback({ jar, callbackUrl });
  const g = await pollExchange(v.gw, { subjectToken, audience: 'ghproxy', scope, agentId: 'coder' });
  assert.equal(g.status, 200, JSON.stringify(g.body));
  return { grant: g.body.access_token, cid: (await v.gw.verify(g.body.access_token)).payload.cid };
}

async function proxyPost(grant, path, json) {
  const res = await fetch(`${v.url}/proxy/ghproxy${path}`, {
    method: 'POST', headers: { authorization: GW_AUTH, 'consentd-grant': grant, 'content-type': 'application/json' },
    body: JSON.stringify(json),
  });
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body, text };
}

test('/proxy: a rule fixing the path lets other bodies in that repository through, and no other repository', async () => {
  const k = await connectProxy('alice');
  const n0 = rec.seen.length;
  const first = await proxyPost(k.grant, '/repos/acme/widgets/issues', { title: 'One' });
  assert.equal(first.status, 403, first.text);
  assert.equal(first.body.error, 'approval_required');
  // The proxy's parameters are body, path, query (k0, k1, k2): fix the path only.
  const html = await approveWithRule('alice', first.body.approval_uri, { rule: 'match', for: '900', k1: 'on' });
  assert.match(html, /name="k1" value="on" checked> <code>path<\/code>/);
  assert.equal((await proxyPost(k.grant, '/repos/acme/widgets/issues', { title: 'One' })).status, 201, 'the approved call');
  const second = await proxyPost(k.grant, '/repos/acme/widgets/issues', { title: 'Two', body: 'more' });
  assert.equal(second.status, 201, `by the rule: ${second.text}`);
  assert.deepEqual(rec.since(n0).map((r) => r.body && JSON.parse(r.body).title), ['One', 'Two']);
  const rule = v.sql(`SELECT id FROM standing_rules WHERE consent_id = '${k.cid}'`);
  assert.match(v.sql(`SELECT detail FROM audit WHERE action = 'vault.released' AND consent_id = '${k.cid}' ORDER BY seq DESC LIMIT 1`),
    new RegExp(`approved_by=rule ${rule}`));
  // Another repository, another owner: asked again, nothing upstream.
  const n1 = rec.seen.length;
  for (const path of ['/repos/acme/secrets/issues', '/repos/evil/widgets/issues']) {
    const r = await proxyPost(k.grant, path, { title: 'Two' });
    assert.equal(r.status, 403, `${path}: ${r.text}`);
    assert.equal(r.body.error, 'approval_required', path);
  }
  assert.equal(rec.seen.length, n1, 'nothing reached the upstream');
});

// --- MCP tools/call -------------------------------------------------------------------

const toolCall = (token, tool, args, id = 1) => post2026(`${v.url}/mcp/tracker`, token, 'tools/call',
  { name: tool, arguments: args }, { id });

test('MCP tools/call: a rule fixing the title lets the call through without asking, at most its use count; another title asks', async () => {
  const { token, cid } = await stack.signIn('bob');
  up.clear();
  const first = await toolCall(token, 'create_issue', { title: 'Bug A', note: 'one' });
  assert.equal(first.body?.result?.resultType, 'input_required', first.text);
  const url = first.body.result.inputRequests.approval.params.url;
  // The arguments are note, title (k0, k1): fix the title, for at most 2 uses.
  await approveWithRule('bob', url, { rule: 'match', for: '900', uses: '2', k1: 'on' });
  // The approved call, then two by the rule (other notes), then the rule is used up.
  const r1 = await toolCall(token, 'create_issue', { title: 'Bug A', note: 'one' }, 2);
  assert.match(r1.body?.result?.content?.[0]?.text || '', /created #\d+: Bug A/, r1.text);
  for (const [i, note] of [[3, 'two'], [4, 'three']]) {
    const r = await toolCall(token, 'create_issue', { title: 'Bug A', note }, i);
    assert.match(r.body?.result?.content?.[0]?.text || '', /created #\d+: Bug A/, `by the rule (${note}): ${r.text}`);
  }
  const rule = v.sql(`SELECT id || ' ' || uses FROM standing_rules WHERE consent_id = '${cid}'`).split(' ');
  assert.equal(rule[1], '2');
  assert.equal(Number(v.sql(`SELECT count(*) FROM audit WHERE action = 'standing.used' AND detail LIKE 'rule=${rule[0]};%'`)), 2);
  const used = await toolCall(token, 'create_issue', { title: 'Bug A', note: 'four' }, 5);
  assert.equal(used.body?.result?.resultType, 'input_required', `used up: ${used.text}`);
  // Another title: asked, whatever the rule.
  const other = await toolCall(token, 'create_issue', { title: 'Bug B', note: 'one' }, 6);
  assert.equal(other.body?.result?.resultType, 'input_required', `another title: ${other.text}`);
  assert.equal(up.calls.filter((c) => c.tool === 'create_issue').length, 3, 'three calls went upstream');
});
