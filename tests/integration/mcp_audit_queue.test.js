// The MCP gateway's audit of a tool call's answer (issue 31: "every tool call is audited: ...
// upstream status") is written off the request's path by the audit queue (server/audit_queue.c),
// one transaction per batch. What this file holds: an orderly stop (SIGTERM) right after a
// call writes the queued entry before consentd exits -- with [audit] batch_interval_ms at
// its maximum (10 s), so only the stop's flush can have written it -- and the chain still
// verifies (`consentd audit verify`) with the batched entries in it. Either backend
// (TEST_DB=pg too). The real binary, IdPs and an upstream on
// @modelcontextprotocol/server 2.4.0 (tests/lib/mcp-upstream.mjs), set up by tests/lib/mcpstack.js.
import '../lib/webcrypto.js';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startMcpGateway, post2026 } from '../lib/mcpstack.js';
import { consentdCommand } from '../lib/consentd.js';

let g;
let v;
before(async () => {
  g = await startMcpGateway({ config: () => ({ audit: { batch_interval_ms: 10000 } }) });
  ({ v } = g);
});
after(async () => { await g?.stop(); });

const EP = () => `${v.url}/mcp/tracker`;

async function listIssues(token) {
  const res = await post2026(EP(), token, 'tools/call', { name: 'list_issues', arguments: { state: 'open' } });
  assert.equal(res.status, 200, res.text);
  assert.match(res.text, /first/);
  return res.headers.get('x-request-id');
}

const callEntries = (id) => v.c.rows("SELECT seq, outcome, detail FROM audit WHERE action = 'mcp.call' "
  + `AND detail LIKE 'call=${id};%' ORDER BY seq`);

test('an orderly stop right after a call writes its queued "answered" entry; the chain verifies', async () => {
  const { token } = await g.signIn('alice');
  const id = await listIssues(token);
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
