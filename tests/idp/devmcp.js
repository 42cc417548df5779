#!/usr/bin/env node
// devmcp.js -- the development MCP server of `make run` (scripts/run-dev.sh), issue #31: an
// issue tracker's tools behind the development provider, the "third-party MCP server" that
// consentd's MCP gateway (/mcp/NAME) stands in front of. Like the development API
// (devapi.js) it is a resource server of the provider: it accepts only bearer tokens that the
// provider's introspection endpoint (RFC 7662) calls active, with its audience, and answers
// 401 to anything else -- so it takes the provider's token that consentd releases from its
// vault, and never an MCP client's consentd token.
//
// NOT FOR PRODUCTION: plain http on loopback, issues kept in memory.
//
//   node tests/idp/devmcp.js --provider http://127.0.0.1:9091 --audience http://127.0.0.1:9092 \
//     [--port 9093] [--host 127.0.0.1] [--client resource-server --secret S]
//     [--sdk 1|2] [--stateless] [--json] [--record FILE]
//
//   --provider: the provider's issuer (its introspection endpoint comes from its discovery
//     document, read at the first request); --client/--secret: a client registered there for
//     introspection (client_secret_basic); --audience: what a token's aud must hold (the
//     provider's downstream resource: this server plays that provider's own MCP server, as
//     GitHub's MCP server takes GitHub's tokens; default: this server's /mcp URL).
//   --sdk 1 (default): served by @modelcontextprotocol/sdk 1.32.2 (revision 2025-11-25) over
//     Streamable HTTP. An `initialize` opens a session (Mcp-Session-Id; GET opens its SSE
//     stream, DELETE ends it) unless --stateless; a request without a session id that is not
//     an initialize is served statelessly. --json: answer POSTs with application/json instead
//     of an SSE stream.
//   --sdk 2: served by @modelcontextprotocol/server 2.4.0's createMcpHandler: revision
//     2026-07-28 (stateless, server/discover) and 2025-era requests statelessly (GET and DELETE
//     405). The 2.x packages declare Node >= 20; on Node 18 they need globalThis.crypto, which
//     ../lib/webcrypto.js installs first (so does sdk 1.32.2's server transport).
//   --record FILE: append one JSON line per HTTP request as it arrives, refused ones included:
//     { t, method, path, headers (Authorization included: a test tool), body (the raw text) }.
//     Tests read it to prove what reached this server (e.g. never the MCP client's token).
//   When listening, prints exactly one line `READY http://HOST:PORT/mcp` on stdout; one stderr
//   line per request ("[devmcp] POST /mcp tools/call -> 200 sub=alice", never a token).
//   SIGINT/SIGTERM: exit 0.
//
// The tools (the text of a result is JSON; ids are numbers; issue 1 exists from the start):
//   list_issues { state?: "open" | "closed" | "all" }                   needs scope issues:read
//   create_issue { title, body, labels?: [string] }                     needs scope issues:write
//   close_issue { id, reason?: "completed" | "not_planned" | "duplicate" } needs issues:write
//   Bad arguments, an unknown id or an issue already closed: a tool result with isError.
//   A tools/call whose tool needs a scope the token lacks: 403 insufficient_scope.
// Also GET /.well-known/oauth-protected-resource/mcp (RFC 9728): the provider as the
// authorization server; a 401 names it in WWW-Authenticate's resource_metadata.
// First: Web Crypto as globalThis.crypto on Node 18 (Debian 12), where an ES module has no
// `crypto` global. @modelcontextprotocol/sdk 1.32.2's server transport calls a bare
// crypto.randomUUID() for each POST with a request (server/webStandardStreamableHttp.js), so
// without it every such request fails there with "crypto is not defined" (integration/
// devmcp.test.js runs the server so); the 2.x packages use the global elsewhere.
import '../lib/webcrypto.js';
import { createServer } from 'node:http';
import { appendFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { introspect } from '../lib/downstream.js';

const log = (...a) => console.error('[devmcp]', ...a);
const MAX_BODY = 1 << 20;
const SERVER_INFO = { name: 'devmcp-tracker', version: '1.0.0' };
const INSTRUCTIONS = 'A development issue tracker (consentd make run). Listing is free; '
  + 'opening and closing issues may need the person to approve each call.';

// ---- the tracker: tools, their schemas, their work --------------------------------------------
const TOOLS = [
  {
    name: 'list_issues',
    scope: 'issues:read',
    title: 'List issues',
    description: 'List the issues in the tracker, newest first: id, title, state, labels, author '
      + 'and, for a closed issue, why it was closed. Shows open issues unless `state` says otherwise.',
    inputSchema: {
      type: 'object',
      properties: {
        state: { type: 'string', enum: ['open', 'closed', 'all'], default: 'open',
          description: 'Which issues to list: open (the default), closed, or all.' },
      },
      additionalProperties: false,
    },
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: 'create_issue',
    scope: 'issues:write',
    title: 'Open an issue',
    description: 'Open a new issue in the tracker, authored by the signed-in person. Returns the '
      + 'new issue with its id.',
    inputSchema: {
      type: 'object',
      properties: {
        title: { type: 'string', minLength: 1, maxLength: 200, description: 'A one-line summary.' },
        body: { type: 'string', maxLength: 20000, description: 'The description (Markdown).' },
        labels: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 50 }, maxItems: 10,
          uniqueItems: true, description: 'Labels to put on the issue, e.g. ["bug"].' },
      },
      required: ['title', 'body'],
      additionalProperties: false,
    },
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  },
  {
    name: 'close_issue',
    scope: 'issues:write',
    title: 'Close an issue',
    description: 'Close an open issue by its id, with an optional reason (completed, the default; '
      + 'not_planned; duplicate). Returns the closed issue.',
    inputSchema: {
      type: 'object',
      properties: {
        id: { type: 'integer', minimum: 1, description: 'The issue\'s id, as list_issues shows it.' },
        reason: { type: 'string', enum: ['completed', 'not_planned', 'duplicate'], default: 'completed',
          description: 'Why the issue is closed.' },
      },
      required: ['id'],
      additionalProperties: false,
    },
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  },
];
const TOOL = new Map(TOOLS.map((t) => [t.name, t]));
const listed = () => TOOLS.map(({ scope, ...t }) => t);   // what tools/list shows (no scope)

function makeTracker() {
  const issues = [{ id: 1, title: 'Welcome to the development tracker', body: 'Opened by run-dev.sh.',
    labels: [], state: 'open', author: 'run-dev', closed_reason: null }];
  const text = (obj, isError = false) => ({
    content: [{ type: 'text', text: JSON.stringify(obj, null, 2) }], ...(isError ? { isError: true } : {}),
  });
  const refuse = (msg) => text({ error: msg }, true);
  const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
  // Checks args against the tool's schema (the subset it uses) -> an error message or null.
  const check = (tool, args) => {
    if (!isObj(args)) return 'arguments must be an object';
    const { properties, required = [] } = tool.inputSchema;
    for (const k of required) if (!(k in args)) return `${k} is required`;
    for (const [k, v] of Object.entries(args)) {
      const p = properties[k];
      if (!p) return `unknown argument ${k}`;
      if (p.type === 'string') {
        if (typeof v !== 'string') return `${k} must be a string`;
        if (p.enum && !p.enum.includes(v)) return `${k} must be one of ${p.enum.join(', ')}`;
        if (p.minLength && v.trim().length < p.minLength) return `${k} must not be empty`;
        if (p.maxLength && v.length > p.maxLength) return `${k} is longer than ${p.maxLength} characters`;
      } else if (p.type === 'integer') {
        if (!Number.isSafeInteger(v) || v < p.minimum) return `${k} must be an integer >= ${p.minimum}`;
      } else if (p.type === 'array') {
        if (!Array.isArray(v) || v.length > p.maxItems) return `${k} must be an array of at most ${p.maxItems}`;
        if (v.some((x) => typeof x !== 'string' || x === '' || x.length > p.items.maxLength)) {
          return `${k} must hold non-empty strings of at most ${p.items.maxLength} characters`;
        }
        if (new Set(v).size !== v.length) return `${k} must not repeat an item`;
      }
    }
    return null;
  };
  const run = {
    list_issues(args) {
      const state = args.state || 'open';
      return text(issues.filter((i) => state === 'all' || i.state === state).slice().reverse());
    },
    create_issue(args, who) {
      const issue = { id: issues.length + 1, title: args.title, body: args.body, labels: args.labels || [],
        state: 'open', author: who, closed_reason: null };
      issues.push(issue);
      return text(issue);
    },
    close_issue(args) {
      const issue = issues.find((i) => i.id === args.id);
      if (!issue) return refuse(`there is no issue ${args.id}`);
      if (issue.state === 'closed') return refuse(`issue ${args.id} is already closed`);
      issue.state = 'closed';
      issue.closed_reason = args.reason || 'completed';
      return text(issue);
    },
  };
  return {
    call(name, args, who) {
      const tool = TOOL.get(name);
      if (!tool) return null;
      const bad = check(tool, args === undefined ? {} : args);
      return bad ? refuse(`${name}: ${bad}`) : run[name](args || {}, who);
    },
  };
}

// ---- MCP servers on either SDK -----------------------------------------------------------------
const whoOf = (authInfo) => authInfo?.extra?.sub || 'unknown';
const unknownTool = (name) => ({ content: [{ type: 'text', text: `unknown tool: ${name}` }], isError: true });

async function sdk1(tracker) {
  const { Server } = await import('@modelcontextprotocol/sdk/server/index.js');
  const { ListToolsRequestSchema, CallToolRequestSchema } = await import('@modelcontextprotocol/sdk/types.js');
  const { StreamableHTTPServerTransport } = await import('@modelcontextprotocol/sdk/server/streamableHttp.js');
  const make = () => {
    const server = new Server(SERVER_INFO, { capabilities: { tools: {} }, instructions: INSTRUCTIONS });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: listed() }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => (
      tracker.call(request.params.name, request.params.arguments, whoOf(extra.authInfo))
      || unknownTool(request.params.name)));
    return server;
  };
  return { make, StreamableHTTPServerTransport };
}

async function sdk2(tracker) {
  const { Server, createMcpHandler } = await import('@modelcontextprotocol/server');
  const handler = createMcpHandler(() => {
    const server = new Server(SERVER_INFO, { capabilities: { tools: {} }, instructions: INSTRUCTIONS });
    server.setRequestHandler('tools/list', async () => ({ tools: listed() }));
    server.setRequestHandler('tools/call', async (request, ctx) => (
      tracker.call(request.params.name, request.params.arguments, whoOf(ctx.http?.authInfo))
      || unknownTool(request.params.name)));
    return server;
  }, { onerror: (err) => log('sdk2:', err.message) });
  return handler;
}

// ---- HTTP: recording, the token check, routing -------------------------------------------------
async function readBody(req) {
  const chunks = [];
  let n = 0;
  for await (const c of req) {
    n += c.length;
    if (n > MAX_BODY) return null;
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString('utf8');
}

async function main() {
  const { values: v } = parseArgs({
    options: {
      provider: { type: 'string' },
      port: { type: 'string', default: '0' },
      host: { type: 'string', default: '127.0.0.1' },
      client: { type: 'string', default: 'resource-server' },
      secret: { type: 'string', default: 'resource-server-dev-secret' },
      audience: { type: 'string' },
      sdk: { type: 'string', default: '1' },
      stateless: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      record: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (v.help || !v.provider || !['1', '2'].includes(v.sdk)) {
    console.error('usage: node tests/idp/devmcp.js --provider ISSUER [--audience A] [--port P] '
      + '[--client ID --secret S] [--sdk 1|2] [--stateless] [--json] [--record FILE]');
    process.exit(v.help ? 0 : 2);
  }
  const provider = v.provider.replace(/\/$/, '');
  let introspectionEndpoint = null;
  const endpoint = async () => {
    if (!introspectionEndpoint) {
      const res = await fetch(`${provider}/.well-known/openid-configuration`);
      const meta = res.ok ? await res.json() : {};
      if (!meta.introspection_endpoint) throw new Error(`${provider}: no introspection_endpoint (HTTP ${res.status})`);
      introspectionEndpoint = meta.introspection_endpoint;
    }
    return introspectionEndpoint;
  };

  const tracker = makeTracker();
  const v1 = v.sdk === '1' ? await sdk1(tracker) : null;
  const v2 = v.sdk === '2' ? await sdk2(tracker) : null;
  const sessions = new Map();   // Mcp-Session-Id -> transport (sdk 1)
  let base = '';
  let audience = v.audience;
  const prmUrl = () => `${base}/.well-known/oauth-protected-resource/mcp`;

  const record = (entry) => {
    if (v.record) appendFileSync(v.record, `${JSON.stringify(entry)}\n`);
  };

  // The bearer token -> authInfo, or a refusal already answered (false).
  const authenticate = async (req, res, done) => {
    const challenge = (error) => `Bearer ${error ? `error="${error}", ` : ''}resource_metadata="${prmUrl()}"`;
    const m = /^Bearer ([\x21-\x7e]+)$/.exec(req.headers.authorization || '');
    if (!m) {
      done(401, { error: 'a bearer token from the provider is required' }, { 'www-authenticate': challenge() });
      return false;
    }
    const info = await introspect({
      introspectionEndpoint: await endpoint(), clientId: v.client, clientSecret: v.secret, token: m[1],
    });
    const aud = info.aud === undefined ? [] : [].concat(info.aud);
    if (info.active !== true || !aud.includes(audience)) {
      done(401, { error: info.active === true ? 'the token is for another audience' : 'the token is not active at the provider' },
        { 'www-authenticate': challenge('invalid_token') });
      return false;
    }
    return { token: m[1], clientId: info.client_id || '', scopes: String(info.scope || '').split(' ').filter(Boolean),
      expiresAt: info.exp, extra: { sub: info.sub } };
  };

  const server = createServer(async (req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    let who = '-';
    let rpc = '';
    const done = (status, obj, headers = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
      res.end(`${JSON.stringify(obj)}\n`);
    };
    res.on('finish', () => log(`${req.method} ${path}${rpc ? ` ${rpc}` : ''} -> ${res.statusCode} sub=${who}`));
    try {
      const body = await readBody(req);
      record({ t: new Date().toISOString(), method: req.method, path: req.url, headers: req.headers, body });
      if (body === null) return done(413, { error: `the body is larger than ${MAX_BODY} bytes` });
      if (path === '/.well-known/oauth-protected-resource/mcp' && req.method === 'GET') {
        return done(200, { resource: `${base}/mcp`, authorization_servers: [provider],
          scopes_supported: ['issues:read', 'issues:write'], bearer_methods_supported: ['header'],
          resource_name: 'Development issue tracker' });
      }
      if (path !== '/mcp') return done(404, { error: 'not found: the MCP endpoint is /mcp' });
      const auth = await authenticate(req, res, done);
      if (!auth) return undefined;
      who = auth.extra.sub;
      let parsed;
      if (req.method === 'POST') {
        try { parsed = JSON.parse(body); } catch {
          return done(400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error: the body is not JSON' } });
        }
        rpc = Array.isArray(parsed) ? 'batch' : String(parsed?.method || 'response');
      }
      // A tool the token's scopes do not cover: 403 insufficient_scope, as a resource server does.
      if (parsed?.method === 'tools/call') {
        const tool = TOOL.get(parsed.params?.name);
        if (tool && !auth.scopes.includes(tool.scope)) {
          return done(403, { error: 'insufficient_scope', scope: tool.scope }, {
            'www-authenticate': `Bearer error="insufficient_scope", scope="${tool.scope}", resource_metadata="${prmUrl()}"`,
          });
        }
      }
      if (v2) {
        const request = new Request(`${base}${req.url}`, {
          method: req.method, headers: req.headers,
          ...(req.method === 'POST' ? { body } : {}),
        });
        const answer = await v2.fetch(request, { authInfo: auth });
        res.writeHead(answer.status, Object.fromEntries(answer.headers));
        if (answer.body) {
          for await (const chunk of answer.body) res.write(chunk);
        }
        res.end();
        return undefined;
      }
      req.auth = auth;
      const sid = req.headers['mcp-session-id'];
      if (sid) {
        const t = sessions.get(sid);
        if (!t) return done(404, { jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } });
        await t.handleRequest(req, res, parsed);
        return undefined;
      }
      const opening = !v.stateless && parsed?.method === 'initialize';
      if (req.method !== 'POST' && !opening) {
        return done(405, { jsonrpc: '2.0', id: null, error: { code: -32000, message: 'GET and DELETE need an Mcp-Session-Id (initialize first)' } },
          { allow: 'POST' });
      }
      const transport = new v1.StreamableHTTPServerTransport({
        sessionIdGenerator: opening ? () => randomUUID() : undefined,
        enableJsonResponse: v.json,
        onsessioninitialized: (id) => { sessions.set(id, transport); },
        onsessionclosed: (id) => { sessions.delete(id); },
      });
      const mcp = v1.make();
      await mcp.connect(transport);
      if (!opening) res.on('close', () => { transport.close(); mcp.close(); });
      await transport.handleRequest(req, res, parsed);
      return undefined;
    } catch (err) {
      log('error:', err.message);
      if (!res.headersSent) return done(502, { error: `devmcp: ${err.message}` });
      res.end();
      return undefined;
    }
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(v.port), v.host, resolve);
  });
  base = `http://${v.host}:${server.address().port}`;
  audience = audience || `${base}/mcp`;
  const stop = () => {
    for (const t of sessions.values()) t.close().catch(() => {});
    server.close(() => process.exit(0));
    server.closeAllConnections?.();
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdout.write(`READY ${base}/mcp\n`);
}

main().catch((err) => {
  log('fatal', err.message);
  process.exit(1);
});
