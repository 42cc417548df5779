// An OpenID AuthZEN 1.0 Access Evaluation endpoint (POST /access/v1/evaluation) on a real
// policy engine: Cedar, through @cedar-policy/cedar-wasm (the Cedar Rust engine compiled to
// WebAssembly). consentd's decision point tests (integration/authzen.test.js) call it.
//
//   const pdp = await startCedarPdp({ policies, token });
//     policies: { id: 'Cedar policy text', ... } (each id is named in reason_admin)
//     token: the bearer token every request must carry (else 401)
//   pdp.url        // http://127.0.0.1:PORT/access/v1/evaluation
//   pdp.seen       // [{ authorization, body }] each request as received (body parsed)
//   pdp.delayMs    // answer this much later (a timeout); 0 by default
//   pdp.answer     // null: Cedar decides; else an object or string sent as it is
//   await pdp.down() / await pdp.up()   // stop listening (connections refused) and again,
//                                       // on the same port
//   await pdp.stop()
//
// The mapping: principal User::<subject.id>, action Action::<action.name>, resource
// Resource::<resource.id>, context { parameters, agent, client }.  Cedar's allow is
// {"decision": true}; a deny a forbid policy determined is {"decision": false} with the
// policy in context.reason_admin; a deny no policy determined (Cedar's default deny: nothing
// applies) is "no decision": {"decision": false, "context": {"consentd": "ask"}}, so the
// person is asked (docs/security.md, "The organisation's decision point").
import { createServer } from 'node:http';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const cedar = require('@cedar-policy/cedar-wasm/nodejs');

async function readBody(req, limit = 1 << 20) {
  const chunks = [];
  let n = 0;
  for await (const c of req) {
    n += c.length;
    if (n > limit) throw new Error('body too large');
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString('utf8');
}

// Cedar's answer to one AuthZEN request.
export function cedarDecide(policies, q) {
  const r = cedar.isAuthorized({
    principal: { type: 'User', id: q.subject.id },
    action: { type: 'Action', id: q.action.name },
    resource: { type: 'Resource', id: q.resource.id },
    context: {
      parameters: q.action.properties?.parameters ?? {},
      agent: q.context?.agent ?? '', client: q.context?.client ?? '',
    },
    policies: { staticPolicies: policies },
    entities: [],
  });
  if (r.type !== 'success') throw new Error(`cedar: ${JSON.stringify(r.errors)}`);
  const { decision, diagnostics } = r.response;
  if (diagnostics.errors.length > 0) throw new Error(`cedar: ${JSON.stringify(diagnostics.errors)}`);
  if (decision === 'allow') return { decision: true, context: { reason_admin: { en: diagnostics.reason.join(',') } } };
  if (diagnostics.reason.length > 0) return { decision: false, context: { reason_admin: { en: `forbidden by ${diagnostics.reason.join(',')}` } } };
  return { decision: false, context: { consentd: 'ask' } };
}

export async function startCedarPdp({ policies, token }) {
  const pdp = { seen: [], delayMs: 0, answer: null };
  const sockets = new Set();
  const server = createServer(async (req, res) => {
    let body;
    try {
      body = JSON.parse(await readBody(req));
    } catch {
      res.writeHead(400).end();
      return;
    }
    pdp.seen.push({ authorization: req.headers.authorization, contentType: req.headers['content-type'], body });
    if (req.method !== 'POST' || req.url !== '/access/v1/evaluation') {
      res.writeHead(404).end();
      return;
    }
    if (req.headers.authorization !== `Bearer ${token}`) {
      res.writeHead(401, { 'www-authenticate': 'Bearer' }).end();
      return;
    }
    if (pdp.delayMs > 0) await new Promise((r) => { setTimeout(r, pdp.delayMs); });
    if (res.destroyed) return;
    const a = pdp.answer ?? cedarDecide(policies, body);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(typeof a === 'string' ? a : JSON.stringify(a));
  });
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  const listen = (port) => new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => { server.off('error', reject); resolve(); });
  });
  const close = () => new Promise((resolve) => {
    for (const s of sockets) s.destroy();
    server.close(() => resolve());
  });
  await listen(0);
  const { port } = server.address();
  pdp.url = `http://127.0.0.1:${port}/access/v1/evaluation`;
  pdp.down = close;
  pdp.up = () => listen(port);
  pdp.stop = close;
  return pdp;
}
