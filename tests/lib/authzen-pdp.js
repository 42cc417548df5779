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
//   pdp.reply      // null; else { status, headers, body } sent instead of any answer (a 500,
//                  // a 404, a redirect, an oversized body)
//   await pdp.down() / await pdp.up()   // stop listening (connections refused) and again,
//                                       // on the same port
//   await pdp.stop()
//
// Over TLS: startCedarPdp({ policies, token, tls: { key, cert } }) listens with https (pdp.url
// https://127.0.0.1:PORT/...); pdp.setCert({ key, cert }) presents another certificate from
// the next connection on (open connections are closed).  testCerts() makes, with the openssl
// CLI in a fresh temp dir: a test CA (ca: its PEM file), a certificate for 127.0.0.1 (good)
// and one for other.example only (otherHost), both signed by that CA; rm() removes the dir.
//
// The mapping: principal User::<subject.id>, action Action::<action.name>, resource
// Resource::<resource.id>, context { parameters, agent, client }.  Cedar's allow is
// {"decision": true}; a deny a forbid policy determined is {"decision": false} with the
// policy in context.reason_admin; a deny no policy determined (Cedar's default deny: nothing
// applies) is "no decision": {"decision": false, "context": {"consentd": "ask"}}, so the
// person is asked (docs/security.md, "The organisation's decision point").
import { createServer } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { readBodyUpTo } from './readbody.js';

const require = createRequire(import.meta.url);
const cedar = require('@cedar-policy/cedar-wasm/nodejs');

const readBody = (req) => readBodyUpTo(req, 1 << 20);

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

export function testCerts() {
  const dir = mkdtempSync(join(tmpdir(), 'consentd-pdp-tls-'));
  const f = (n) => join(dir, n);
  const ossl = (...args) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  ossl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', f('ca.key'), '-out', f('ca.pem'), '-days', '2', '-subj', '/CN=consentd PDP test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign');
  const leaf = (name, san) => {
    ossl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
      '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', `/CN=${name}`);
    writeFileSync(f(`${name}.cnf`), `subjectAltName=${san}\nextendedKeyUsage=serverAuth\n`);
    ossl('x509', '-req', '-in', f(`${name}.csr`), '-CA', f('ca.pem'), '-CAkey', f('ca.key'),
      '-CAcreateserial', '-out', f(`${name}.pem`), '-days', '2', '-extfile', f(`${name}.cnf`));
    return { key: readFileSync(f(`${name}.key`)), cert: readFileSync(f(`${name}.pem`)) };
  };
  return {
    ca: f('ca.pem'),
    good: leaf('pdp', 'IP:127.0.0.1'),
    otherHost: leaf('other', 'DNS:other.example'),
    rm: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export async function startCedarPdp({ policies, token, tls = null }) {
  const pdp = { seen: [], delayMs: 0, answer: null, reply: null };
  const sockets = new Set();
  const handler = async (req, res) => {
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
    if (pdp.reply) {
      res.writeHead(pdp.reply.status, pdp.reply.headers ?? {});
      res.end(pdp.reply.body ?? '');
      return;
    }
    const a = pdp.answer ?? cedarDecide(policies, body);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(typeof a === 'string' ? a : JSON.stringify(a));
  };
  const server = tls ? createTlsServer({ key: tls.key, cert: tls.cert }, handler) : createServer(handler);
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
  pdp.url = `${tls ? 'https' : 'http'}://127.0.0.1:${port}/access/v1/evaluation`;
  pdp.setCert = (c) => {
    server.setSecureContext({ key: c.key, cert: c.cert });
    for (const s of sockets) s.destroy();
  };
  pdp.down = close;
  pdp.up = () => listen(port);
  pdp.stop = close;
  return pdp;
}
