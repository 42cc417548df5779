// mcpupstream.mjs -- the upstream MCP server of `make bench`'s MCP gateway row (issue 31,
// bench/bench_mcp.js): the official @modelcontextprotocol/server 2.4.0 (createMcpHandler, the
// same entry the gateway's tests use in tests/lib/mcp-upstream.mjs) with one tool, list_issues,
// that answers at once.  It accepts only a provider token: check(token) (the provider's
// introspection) is asked once per distinct token and its verdict kept, as a resource server
// that caches introspection does, so the bench measures consentd and the SDK, not the
// provider's introspection endpoint.  It records nothing, only counts.
//
//   const up = await startBenchMcpUpstream({ check, sdk = true });
//     sdk: false -> the same answer written by hand on node:http (no SDK): what the SDK costs
//   up.url                      http://127.0.0.1:PORT/mcp
//   up.count()                  requests answered;  up.connections(): TCP connections accepted
//   up.firstToken()             the first good token seen (the provider token consentd sent)
//   await up.stop()
//
// In the calling process (as tests/lib/recorder.js for the proxy row): process.cpuUsage()
// around a wrk run is its CPU.
import '../tests/lib/webcrypto.js';
import http from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
// The SDK and zod from tests/node_modules (bench/ has none of its own).
const need = createRequire(join(here, '..', 'tests', 'package.json'));
const TEXT = JSON.stringify([{ id: 1, title: 'first' }]);

async function sdkHandler() {
  const { McpServer, createMcpHandler } = need('@modelcontextprotocol/server');
  const z = need('zod/v4');
  // A server per request: createMcpHandler's stateless serving (2026-07-28).
  return createMcpHandler(() => {
    const s = new McpServer({ name: 'bench-upstream', version: '1' }, { capabilities: { tools: {} } });
    s.registerTool('list_issues', { description: 'List issues', inputSchema: z.object({}) },
      async () => ({ content: [{ type: 'text', text: TEXT }] }));
    return s;
  });
}

export async function startBenchMcpUpstream({ check, sdk = true }) {
  const handler = sdk ? await sdkHandler() : null;
  const verdicts = new Map();       // token -> Promise<bool>
  let n = 0;
  let k = 0;
  let first = null;
  const good = (token) => {
    if (!verdicts.has(token)) verdicts.set(token, Promise.resolve(check(token)).catch(() => false));
    return verdicts.get(token);
  };
  const server = http.createServer(async (rq, rs) => {
    const chunks = [];
    for await (const c of rq) chunks.push(c);
    const body = Buffer.concat(chunks);
    const m = /^Bearer (\S+)$/.exec(rq.headers.authorization || '');
    if (m === null || !(await good(m[1]))) {
      rs.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer error="invalid_token"' });
      rs.end(JSON.stringify({ error: 'invalid_token' }));
      return;
    }
    first ??= m[1];
    n += 1;
    if (!sdk) {
      // What the SDK answers to this tools/call, without the SDK.
      let id = null;
      try { id = JSON.parse(body.toString('utf8')).id ?? null; } catch { /* id null */ }
      rs.writeHead(200, { 'content-type': 'application/json' });
      rs.end(JSON.stringify({ result: { content: [{ type: 'text', text: TEXT }], resultType: 'complete',
        _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'bench-upstream', version: '1' } } }, jsonrpc: '2.0', id }));
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
  server.on('connection', () => { k += 1; });
  await new Promise((r) => { server.listen(0, '127.0.0.1', r); });
  return {
    url: `http://127.0.0.1:${server.address().port}/mcp`,
    count: () => n,
    connections: () => k,
    firstToken: () => first,
    async stop() {
      server.closeAllConnections?.();
      await new Promise((r) => { server.close(r); });
      await handler?.close();
    },
  };
}
