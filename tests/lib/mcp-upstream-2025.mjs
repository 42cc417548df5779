// A real upstream MCP server that keeps 2025-11-25 sessions, for the gateway's 2025 tests
// (issue 31): @modelcontextprotocol/sdk 1.32.2's McpServer over its
// StreamableHTTPServerTransport with a session id per initialize (Mcp-Session-Id; GET opens
// the session's SSE stream, DELETE ends it).  The same tracker as tests/lib/mcp-upstream.mjs
// (which serves statelessly on the 2.x server):
//   list_issues {}               create_issue {title}          delete_repo {} (no action maps it)
// It accepts only a token its check() calls good (the provider's introspection), and records
// every request (method, headers, body) so that the tests can see what reached it.
//
//   const up = await startMcpUpstream2025({ check: async (token) => bool });
//   up.url            http://127.0.0.1:PORT/mcp
//   up.requests       [{ method, headers, body }] in order;  up.clear()
//   up.calls          [{ tool, args }] the tool calls it ran
//   up.sessions       the session ids it holds now (a Set)
//   up.ids = [...]    the next initialize's session ids, in order (then random ones)
//   up.notifyAll()    notifications/tools/list_changed from every session's server, which
//                     the SDK sends on the session's own GET stream (server-initiated)
//   await up.stop()
import './webcrypto.js';
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import * as z from 'zod/v4';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

export async function startMcpUpstream2025({ check }) {
  const requests = [];
  const calls = [];
  const issues = [{ id: 1, title: 'first' }];
  const transports = new Map();
  const servers = new Map();
  const nextIds = [];
  const build = () => {
    const s = new McpServer({ name: 'tracker-upstream-2025', version: '1' }, { capabilities: { tools: {} } });
    s.registerTool('list_issues', { description: 'List issues', inputSchema: {} }, async () => {
      calls.push({ tool: 'list_issues', args: {} });
      return { content: [{ type: 'text', text: JSON.stringify(issues) }] };
    });
    s.registerTool('create_issue', { description: 'Open an issue', inputSchema: { title: z.string() } },
      async ({ title }) => {
        calls.push({ tool: 'create_issue', args: { title } });
        const issue = { id: issues.length + 1, title };
        issues.push(issue);
        return { content: [{ type: 'text', text: `created #${issue.id}: ${title}` }] };
      });
    s.registerTool('delete_repo', { description: 'Delete the repository', inputSchema: {} }, async () => {
      calls.push({ tool: 'delete_repo', args: {} });
      return { content: [{ type: 'text', text: 'deleted' }] };
    });
    return s;
  };
  const server = http.createServer(async (rq, rs) => {
    const chunks = [];
    for await (const c of rq) chunks.push(c);
    const text = Buffer.concat(chunks).toString('utf8');
    const m = /^Bearer (\S+)$/.exec(rq.headers.authorization || '');
    let good = false;
    try { good = m !== null && await check(m[1]); } catch { good = false; }
    // Recorded once the token is checked (the provider's introspection is slow under
    // load): a test that sees a GET here may notify at once, its stream opens next.
    requests.push({ method: rq.method, headers: { ...rq.headers }, body: text });
    if (!good) {
      rs.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer error="invalid_token"' });
      rs.end(JSON.stringify({ error: 'invalid_token' }));
      return;
    }
    let parsed;
    try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = undefined; }
    try {
      const sid = rq.headers['mcp-session-id'];
      if (sid) {
        const t = transports.get(sid);
        if (!t) {
          rs.writeHead(404, { 'content-type': 'application/json' });
          rs.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }));
          return;
        }
        await t.handleRequest(rq, rs, parsed);
        return;
      }
      if (parsed?.method !== 'initialize') {
        rs.writeHead(400, { 'content-type': 'application/json' });
        rs.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'initialize first' } }));
        return;
      }
      const srv = build();
      const t = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => nextIds.shift() ?? randomUUID(),
        onsessioninitialized: (id) => { transports.set(id, t); servers.set(id, srv); },
        onsessionclosed: (id) => { transports.delete(id); servers.delete(id); },
      });
      await srv.connect(t);
      await t.handleRequest(rq, rs, parsed);
    } catch (e) {
      if (!rs.headersSent) rs.writeHead(500, { 'content-type': 'text/plain' });
      rs.end(String(e));
    }
  });
  await new Promise((r) => { server.listen(0, '127.0.0.1', r); });
  return {
    url: `http://127.0.0.1:${server.address().port}/mcp`,
    requests, calls,
    get sessions() { return new Set(transports.keys()); },
    set ids(list) { nextIds.splice(0, nextIds.length, ...list); },
    clear() { requests.length = 0; calls.length = 0; },
    notifyAll() { for (const srv of servers.values()) srv.sendToolListChanged(); },
    async stop() {
      for (const t of transports.values()) await t.close().catch(() => {});
      server.closeAllConnections?.();
      await new Promise((r) => { server.close(r); });
    },
  };
}
