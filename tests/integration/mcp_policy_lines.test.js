// The organisation's policy lines (issue #32 item 4) at the MCP gateway's tools/call, against the
// real binary, the real IdPs and a real upstream MCP server (tests/lib/mcp-upstream.mjs; set up
// by tests/lib/mcpstack.js): a deny line answers before anyone is asked and nothing goes
// upstream, saying the organisation's policy denied it (issue #32 item 2); an approve line lets
// an approval = required tool through without asking; the audit names the line.
import '../lib/webcrypto.js';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startMcpGateway, post2026 } from '../lib/mcpstack.js';

let g;
let v;
let up;
before(async () => {
  g = await startMcpGateway({
    config: ({ ghproxy: px }) => ({
      'action.ghproxy.list_issues': { ...px['action.ghproxy.list_issues'], 'policy.1': 'deny if state == closed' },
      'action.ghproxy.create_issue': { ...px['action.ghproxy.create_issue'], 'policy.1': 'approve if title prefix "[bot]"' },
    }),
  });
  ({ v, up } = g);
});
after(async () => { await g?.stop(); });

const rpc = (token, method, params = {}) => post2026(`${v.url}/mcp/tracker`, token, method, params);

test('tools/call: a deny line answers before anyone is asked, an approve line releases an approval = required tool, the audit names the line', async () => {
  const { token } = await g.signIn('alice');
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
