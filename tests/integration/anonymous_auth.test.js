// An anonymous caller writes nothing durable (issue 28 item 1), from the attacker's side,
// against the real binary: a few thousand requests from eight loopback addresses, each a
// refused gateway authentication at /token, /introspect, /revoke, /proxy/... or /metrics,
// sent as fast as the server answers.  Before the fix each one was an fsync'd
// gateway.auth.refused audit entry (15,151 in 10 s in the review); now
//   - a method that is not enabled (private_key_jwt with Basic only) is refused as
//     invalid_client saying so, counted in consentd_gateway_auth_refused_total, never audited;
//   - a refused assertion (private_key_jwt on) is summarised: at most one audit entry per
//     address and interval on each node, naming the address;
//   - after [limits] auth_failure_burst failures an address gets 429 with Retry-After, before
//     any signature or database work;
//   - the gateway's own authenticated calls, from another address, succeed throughout.
// Also S4: an assertion without a kid, when the gateway's JWKS holds more than one key, is
// refused before any signature is tried.
// Runs on SQLite and, in the PostgreSQL pass (scripts/pg-pass.list), on two nodes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { generateKeyPair, exportJWK, SignJWT } from 'jose';
import { startConsentd } from '../lib/consentd.js';
import { basicAuth } from '../lib/idplogin.js';
import { CLIENT_ASSERTION_TYPE } from '../lib/gateway.js';

const GW = 'agent-gateway';
const GW_AUTH = basicAuth(GW, 'gateway-dev-secret');
const ADDRESSES = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5', '127.0.0.6', '127.0.0.7',
  '127.0.0.8', '127.0.0.9'];
const PER_ADDRESS = 400;          // 3,200 anonymous requests in all
const IN_FLIGHT = 8;              // per address
// The defaults of [limits] auth_failure_rate and auth_failure_burst (docs/security.md).
const FAILURE_BURST = 50;
const FAILURE_RATE = 1;

let basic;       // Basic only: private_key_jwt is not enabled
let pkjwt;       // private_key_jwt with a JWKS of two keys
let keyDir;
let gwKey;

before(async () => {
  keyDir = mkdtempSync(join(tmpdir(), 'consentd-anon-'));
  const a = await generateKeyPair('ES256', { extractable: true });
  const b = await generateKeyPair('ES256', { extractable: true });
  gwKey = a.privateKey;
  const jwksFile = join(keyDir, 'gateway-jwks.json');
  writeFileSync(jwksFile, JSON.stringify({ keys: [
    { ...(await exportJWK(a.publicKey)), kid: 'gw-1', alg: 'ES256', use: 'sig' },
    { ...(await exportJWK(b.publicKey)), kid: 'gw-2', alg: 'ES256', use: 'sig' },
  ] }));
  [basic, pkjwt] = await Promise.all([
    startConsentd(),
    startConsentd({ config: { gateway: { token_endpoint_auth: 'private_key_jwt', jwks_file: jwksFile,
      client_secret: null } } }),
  ]);
});
after(async () => {
  try { await Promise.all([basic?.stop(), pkjwt?.stop()]); } finally {
    if (keyDir) rmSync(keyDir, { recursive: true, force: true });
  }
});

// One request on agent (keep-alive, bound to a local address): { status, headers, body }.
function send(agent, url, { method = 'GET', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const r = http.request(url, { method, headers, agent }, (res) => {
      const chunks = [];
      res.on('data', (d) => chunks.push(d));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json = null;
        try { json = JSON.parse(text); } catch { /* not JSON */ }
        resolve({ status: res.statusCode, headers: res.headers, text, body: json });
      });
    });
    r.on('error', reject);
    r.end(body);
  });
}

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const form = (o, headers = {}) => ({ method: 'POST', headers: { ...FORM, ...headers }, body: new URLSearchParams(o).toString() });

// The i-th anonymous request: each gateway route in turn, an assertion made by mint(i).
async function anonymous(i, mint) {
  const a = await mint(i);
  const inForm = { client_assertion_type: CLIENT_ASSERTION_TYPE, client_assertion: a };
  switch (i % 5) {
    case 0: return { path: '/token', ...form({ grant_type: 'refresh_token', refresh_token: 'x', ...inForm }) };
    case 1: return { path: '/introspect', ...form({ token: 'x', ...inForm }) };
    case 2: return { path: '/revoke', ...form({ token: 'x', ...inForm }) };
    case 3: return { path: '/proxy/github/user', headers: { 'consentd-client-assertion': a } };
    default: return { path: '/metrics', headers: { 'consentd-client-assertion': a } };
  }
}

// Floods c from every address of ADDRESSES while the gateway introspects from 127.0.0.1
// with auth(); returns the answers by address, the gateway's statuses and the seconds taken.
async function flood(c, mint, auth) {
  const byAddress = new Map();
  let done = false;
  const gwStatuses = [];
  const gatewayLoop = (async () => {
    const agent = new http.Agent({ keepAlive: true, localAddress: '127.0.0.1' });
    try {
      while (!done) {
        const r = await send(agent, `${c.url}/introspect`, await auth());
        gwStatuses.push(r.status);
        await new Promise((res) => { setTimeout(res, 20); });
      }
    } finally { agent.destroy(); }
  })();
  const t0 = Date.now();
  await Promise.all(ADDRESSES.map(async (addr) => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: IN_FLIGHT, localAddress: addr });
    const answers = [];
    byAddress.set(addr, answers);
    let next = 0;
    try {
      await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
        while (next < PER_ADDRESS) {
          const i = next++;
          const { path, ...rq } = await anonymous(i, mint);
          answers.push(await send(agent, `${c.url}${path}`, rq));
        }
      }));
    } finally { agent.destroy(); }
  }));
  const seconds = (Date.now() - t0) / 1000;
  done = true;
  await gatewayLoop;
  return { byAddress, gwStatuses, seconds };
}

const count = (c, where) => Number(c.sql(`SELECT count(*) FROM audit${where ? ` WHERE ${where}` : ''}`));

// The sum over every node of consentd_gateway_auth_refused_total{reason} (each node keeps its own).
async function refusedMetric(c, reason, auth) {
  let sum = 0;
  for (const n of c.nodes) {
    const r = await fetch(`http://127.0.0.1:${n.port}/metrics`, await auth());
    assert.equal(r.status, 200, 'the gateway scrapes /metrics');
    const text = await r.text();
    const m = text.match(new RegExp(`^consentd_gateway_auth_refused_total\\{reason="${reason}"\\} (\\d+)$`, 'm'));
    sum += m ? Number(m[1]) : 0;
  }
  return sum;
}

// Every answer is 401 invalid_client or 429 too_many_requests with Retry-After; per address
// the 401s stop after the burst (plus what refills while the flood lasts) on each node (a
// node keeps its own buckets).
function checkAnswers(byAddress, seconds, descr, nodes) {
  let refused = 0;
  for (const [addr, answers] of byAddress) {
    const n401 = answers.filter((r) => r.status === 401).length;
    const n429 = answers.filter((r) => r.status === 429);
    assert.equal(n401 + n429.length, PER_ADDRESS, `${addr}: only 401 and 429: ${[...new Set(answers.map((r) => r.status))]}`);
    const bound = nodes * (FAILURE_BURST + Math.ceil(FAILURE_RATE * seconds)) + 2;
    assert.ok(n401 <= bound, `${addr}: ${n401} refusals reached authentication (at most ${bound})`);
    assert.ok(n429.length > 0, `${addr}: the address limit answered 429`);
    for (const r of n429) {
      assert.equal(r.body?.error, 'too_many_requests', r.text);
      assert.match(r.headers['retry-after'] ?? '', /^[1-9][0-9]*$/);
      assert.match(r.body.error_description, /auth_failure/);
    }
    for (const r of answers.filter((x) => x.status === 401)) {
      assert.equal(r.body?.error, 'invalid_client', r.text);
      assert.match(r.body.error_description, descr, r.text);
    }
    refused += n401;
  }
  return refused;
}

const tally = (byAddress) => {
  const all = [...byAddress.values()].flat();
  return `${all.length} requests: ${all.filter((r) => r.status === 401).length} x 401, ${all.filter((r) => r.status === 429).length} x 429`;
};

test('private_key_jwt not enabled: a flood of assertions is refused as such, counted, never audited; the gateway is served', async (t) => {
  const auth = async () => form({ token: 'not-a-token' }, { authorization: GW_AUTH });
  const beforeAll = count(basic);
  const { byAddress, gwStatuses, seconds } = await flood(basic, async () => 'x', auth);
  const written = count(basic) - beforeAll;
  t.diagnostic(`${tally(byAddress)} in ${seconds} s; ${written} audit entries; gateway ${gwStatuses.length} calls`);
  assert.equal(written, 0, 'no audit entry at all for a method that is not enabled');
  const refused = checkAnswers(byAddress, seconds, /private_key_jwt is not enabled/, basic.nodes.length);
  assert.ok(gwStatuses.length >= 3, 'the gateway called during the flood');
  assert.deepEqual([...new Set(gwStatuses)], [200], `the gateway's own introspections: ${gwStatuses}`);
  assert.equal(await refusedMetric(basic, 'method_not_enabled', async () => ({ headers: { authorization: GW_AUTH } })),
    refused, 'every 401 is counted in consentd_gateway_auth_refused_total');
});

test('private_key_jwt on: refused assertions are summarised, one entry per address and interval; no kid with two keys is refused before any signature', async (t) => {
  const thief = (await generateKeyPair('ES256')).privateKey;
  const now = () => Math.floor(Date.now() / 1000);
  // Half signed by a thief under the gateway's kid, half with no kid at all.
  const mint = (i) => new SignJWT({ iss: GW, sub: GW, aud: pkjwt.url, iat: now(), exp: now() + 60, jti: randomUUID() })
    .setProtectedHeader(i % 2 ? { alg: 'ES256', kid: 'gw-1' } : { alg: 'ES256' }).sign(thief);
  const own = () => new SignJWT({ iss: GW, sub: GW, aud: pkjwt.url, iat: now(), exp: now() + 60, jti: randomUUID() })
    .setProtectedHeader({ alg: 'ES256', kid: 'gw-1' }).sign(gwKey);
  const auth = async () => form({ token: 'not-a-token', client_assertion_type: CLIENT_ASSERTION_TYPE, client_assertion: await own() });
  const beforeAll = count(pkjwt);
  const beforeRefused = count(pkjwt, "action = 'gateway.auth.refused'");
  const { byAddress, gwStatuses, seconds } = await flood(pkjwt, mint, auth);
  const entries = count(pkjwt, "action = 'gateway.auth.refused'") - beforeRefused;
  t.diagnostic(`${tally(byAddress)} in ${seconds} s; ${entries} gateway.auth.refused entries; gateway ${gwStatuses.length} calls`);
  const bound = ADDRESSES.length * pkjwt.nodes.length;
  assert.ok(entries >= 1 && entries <= bound, `${entries} gateway.auth.refused entries (at most ${bound}: one per address and node)`);
  checkAnswers(byAddress, seconds, /not signed by a key of the client|kid is required/, pkjwt.nodes.length);
  const noKid = [...byAddress.values()].flat().filter((r) => r.status === 401 && /kid is required/.test(r.body.error_description));
  assert.ok(noKid.length > 0, 'an assertion without a kid is refused for it');
  assert.equal(count(pkjwt) - beforeAll, entries, 'nothing else was written');
  const details = pkjwt.sql("SELECT detail FROM audit WHERE action = 'gateway.auth.refused'").split('\n');
  for (const d of details) assert.match(d, /^private_key_jwt refused from 127\.0\.0\.\d+/, d);
  assert.ok(gwStatuses.length >= 3, 'the gateway called during the flood');
  assert.deepEqual([...new Set(gwStatuses)], [200], `the gateway's own introspections: ${gwStatuses}`);
});
