// A real upstream MCP server for the gateway's tests (issue 31), on the official
// @modelcontextprotocol/server 2.4.0 (createMcpHandler: 2026-07-28 and, statelessly,
// 2025-11-25 clients).  An issue tracker's tools:
//   list_issues {}               create_issue {title}          delete_repo {} (no action maps it)
// It accepts only a token its check() calls good (the provider's introspection), and records
// every request (method, headers, body) so that the tests can see what reached it.
//
//   const up = await startMcpUpstream({ check: async (token) => bool, keyHeader });
//                     keyHeader: take the credential from that header (an API key) instead of Bearer
//   up.url            http://127.0.0.1:PORT/mcp
//   up.requests       [{ method, headers, body }] in order;  up.clear()
//   up.delayMs = 3000 // answer every request that late (a slow upstream)
//   up.calls          [{ tool, args }] the tool calls it ran
//   await up.stop()
import './webcrypto.js';
import http from 'node:http';
import * as z from 'zod/v4';
import { McpServer, createMcpHandler } from '@modelcontextprotocol/server';

export async function startMcpUpstream({ check, keyHeader = null }) {
  const requests = [];
  const calls = [];
  const issues = [{ id: 1, title: 'first' }];
  const state = { delayMs: 0 };
  const build = () => {
    const s = new McpServer({ name: 'tracker-upstream', version: '1' }, { capabilities: { tools: {} } });
    s.registerTool('list_issues', { description: 'List issues', inputSchema: z.object({}) }, async () => {
      calls.push({ tool: 'list_issues', args: {} });
      return { content: [{ type: 'text', text: JSON.stringify(issues) }] };
    });
    s.registerTool('create_issue', { description: 'Open an issue', inputSchema: z.object({ title: z.string() }) },
      async ({ title }) => {
        calls.push({ tool: 'create_issue', args: { title } });
        const issue = { id: issues.length + 1, title };
        issues.push(issue);
        return { content: [{ type: 'text', text: `created #${issue.id}: ${title}` }] };
      });
    s.registerTool('delete_repo', { description: 'Delete the repository', inputSchema: z.object({}) }, async () => {
      calls.push({ tool: 'delete_repo', args: {} });
      return { content: [{ type: 'text', text: 'deleted' }] };
    });
    return s;
  };
  const handler = createMcpHandler(build);
  const server = http.createServer(async (rq, rs) => {
    const chunks = [];
    for await (const c of rq) chunks.push(c);
    const body = Buffer.concat(chunks);
    requests.push({ method: rq.method, headers: { ...rq.headers }, body: body.toString('utf8') });
    if (state.delayMs > 0) await new Promise((r) => { setTimeout(r, state.delayMs); });
    // keyHeader: an API key in that header (and no Authorization at all); else a Bearer token.
    const auth = rq.headers.authorization || '';
    const m = keyHeader ? (auth === '' && rq.headers[keyHeader.toLowerCase()] ? [null, rq.headers[keyHeader.toLowerCase()]] : null)
      : /^Bearer (\S+)$/.exec(auth);
    let good = false;
    try { good = m !== null && await check(m[1]); } catch { good = false; }
    if (!good) {
      rs.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer error="invalid_token"' });
      rs.end(JSON.stringify({ error: 'invalid_token' }));
      return;
    }
    try {
      const r = await handler.fetch(new Request(`http://127.0.0.1${rq.url}`, {
        method: rq.method, headers: rq.headers, body: body.length ? body : undefined,
      }));
      const text = await r.text();
      rs.writeHead(r.status, Object.fromEntries(r.headers));
      rs.end(text);
    } catch (e) {
      rs.writeHead(500, { 'content-type': 'text/plain' });
      rs.end(String(e));
    }
  });
  await new Promise((r) => { server.listen(0, '127.0.0.1', r); });
  return {
    url: `http://127.0.0.1:${server.address().port}/mcp`,
    requests, calls,
    clear() { requests.length = 0; calls.length = 0; },
    set delayMs(ms) { state.delayMs = ms; },
    get delayMs() { return state.delayMs; },
    async stop() {
      server.closeAllConnections?.();
      await new Promise((r) => { server.close(r); });
      await handler.close();
    },
  };
}
