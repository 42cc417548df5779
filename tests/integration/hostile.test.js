// Hostile load (issue 16, item 5): while each attack runs, a well-behaved client keeps
// asking consentd for /healthz and for an introspection with the gateway's credentials,
// and every one of its answers must come within GOOD_BOUND_MS, none refused.  consentd's
// resident memory is sampled during each attack and must stay under the bound the test
// states; the figures are printed as test diagnostics.
//
// The attacks come from other loopback addresses (127.0.0.2 and up, at most 60
// connections each: [server] per_ip_connections is 64), the well-behaved client from
// 127.0.0.1.  HOSTILE_IDLE sets the idle connections (2,000 in `make check`; `make
// hostile-long` holds 10,000).  The test raises its own and consentd's open-file limit
// (prlimit, as root) to fit them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import http from 'node:http';
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startStack } from '../lib/stack.js';
import { gateway, TOKEN_EXCHANGE, TT_ID_TOKEN } from '../lib/gateway.js';
import { getIdToken, basicAuth } from '../lib/idplogin.js';
import { consentConfig, GATEWAY_APP } from '../lib/fixtures.js';
import { consentdBin } from '../lib/consentd.js';
import { consentdLogin, req as jarReq } from '../lib/weblogin.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });

// The bound the well-behaved client is held to: every answer within 3 s, none refused (the
// ASan build on two cores shared with the attacker; the slowest seen here was 1.4 s, during
// the burst of consent requests, whose durable writes queue on the same worker threads).
const GOOD_BOUND_MS = 3000;
const IDLE = Number(process.env.HOSTILE_IDLE || 2000);
const MiB = 1024;   // /proc reports kB

let s; let gw; let adminToken; let port;

// RLIMIT_NOFILE for this process (its children inherit it): enough for the idle connections.
function raiseFdLimit(n) {
  const m = /^Max open files\s+(\d+)\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
  const hard = !m || m[2] === 'unlimited' ? Infinity : Number(m[2]);
  try {
    if (n > hard) execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${n}:${n}`], { stdio: 'ignore' });
    else execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${n}:${hard}`], { stdio: 'ignore' });
  } catch {
    // Not allowed past the hard limit here: as far as it goes (the idle test fails if too few).
    if (Number.isFinite(hard)) execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${hard}:${hard}`], { stdio: 'ignore' });
  }
}

function rssKiB(pid) {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m[1]);
}

// Samples consentd's resident memory every 100 ms until stopped: { base, peak }.
function rssSampler(pid) {
  const base = rssKiB(pid);
  let peak = base;
  const t = setInterval(() => { try { peak = Math.max(peak, rssKiB(pid)); } catch { /* gone */ } }, 100);
  return { base, stop() { clearInterval(t); peak = Math.max(peak, rssKiB(pid)); return { base, peak }; } };
}

// One request on a new connection from 127.0.0.1: { status, text }.
function request(path, { method = 'GET', headers = {}, body = '' } = {}) {
  return new Promise((resolve, reject) => {
    const rq = http.request({ host: '127.0.0.1', port, path, method, agent: false, headers: {
      ...headers, ...(body ? { 'content-length': Buffer.byteLength(body) } : {}) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, text }));
    });
    rq.setTimeout(10000, () => rq.destroy(new Error('no answer in 10 s')));
    rq.on('error', reject);
    rq.end(body);
  });
}

// The well-behaved client: GET /healthz and a POST /introspect, one after the other, each
// on a new connection (so that it meets the server as a newcomer does), until stopped.
// Each answer's time and any refusal are recorded.
function wellBehaved() {
  let running = true; let n = 0; let max = 0; const failures = [];
  const loop = (async () => {
    while (running) {
      for (const call of [
        () => request('/healthz'),
        () => request('/introspect', {
          method: 'POST', body: 'token=not-a-grant',
          headers: { authorization: basicAuth('agent-gateway', 'gateway-dev-secret'),
            'content-type': 'application/x-www-form-urlencoded' },
        }),
      ]) {
        const t0 = Date.now();
        try {
          const r = await call();
          if (r.status !== 200) failures.push(`status ${r.status}`);
        } catch (e) {
          failures.push(String(e.code || e.message));
        }
        max = Math.max(max, Date.now() - t0); n += 1;
      }
      await sleep(50);
    }
  })();
  return {
    answers: () => n,
    async stop() { running = false; await loop; return { n, max, failures }; },
  };
}

// Runs attack() with the well-behaved client and the memory sampler beside it, then holds
// both to their bounds.  Returns what the attack returned.
async function underAttack(t, name, rssBoundMiB, attack) {
  const mem = rssSampler(s.c.proc.pid);
  const good = wellBehaved();
  const t0 = Date.now();
  let result;
  try {
    result = await attack();
    // The well-behaved client runs at least 2 s beside every attack, and on after it
    // while the attack's connections are still open -- and until it has at least 4
    // answers (at most 20 s more): on a loaded machine 2 s may hold only 2 of them, each
    // still within GOOD_BOUND_MS, and the count is about the sample, not about consentd.
    await sleep(Math.max(0, 2000 - (Date.now() - t0)));
    const until = Date.now() + 20000;
    while (good.answers() < 4 && Date.now() < until) await sleep(50);
  } finally {
    const g = await good.stop();
    const { base, peak } = mem.stop();
    t.diagnostic(`${name}: well-behaved client ${g.n} answers, slowest ${g.max} ms, ${g.failures.length} refused; ` +
      `consentd resident ${Math.round(base / MiB)} MiB before, ${Math.round(peak / MiB)} MiB at most` +
      `${g.failures.length ? `; refusals: ${g.failures.slice(0, 5).join(', ')}` : ''}`);
    assert.deepEqual(g.failures.slice(0, 5), [], `${name}: the well-behaved client was refused`);
    assert.ok(g.n >= 4, `${name}: the well-behaved client got ${g.n} answers`);
    assert.ok(g.max <= GOOD_BOUND_MS, `${name}: an answer took ${g.max} ms (bound ${GOOD_BOUND_MS} ms)`);
    assert.ok(peak - base <= rssBoundMiB * MiB,
      `${name}: resident memory grew by ${Math.round((peak - base) / MiB)} MiB (bound ${rssBoundMiB} MiB)`);
  }
  return result;
}

// A raw connection from attacker address number i (127.0.0.2 and up, 60 a piece).
function attackerSocket(i) {
  const localAddress = `127.0.0.${2 + Math.floor(i / 60)}`;
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: '127.0.0.1', port, localAddress });
    sock.setNoDelay(true);
    sock.on('error', () => {});
    sock.once('connect', () => resolve(sock));
    sock.once('error', reject);
  });
}

// POST of a form from attacker address number i, with the gateway's credentials:
// { status, body, text, headers } like gateway.js's post.
function gatewayPostFrom(i, path, params) {
  const body = new URLSearchParams(params).toString();
  return new Promise((resolve, reject) => {
    const rq = http.request({
      host: '127.0.0.1', port, path, method: 'POST', agent: false,
      localAddress: `127.0.0.${2 + Math.floor(i / 40)}`,
      headers: { authorization: basicAuth('agent-gateway', 'gateway-dev-secret'),
        'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => {
        let json = null;
        try { json = JSON.parse(text); } catch { /* not JSON */ }
        resolve({ status: res.statusCode, body: json, text, headers: { get: (h) => res.headers[h.toLowerCase()] } });
      });
    });
    rq.on('error', reject);
    rq.end(body);
  });
}

// What the server sent on sock until it closed (or ms passed): { text, closed }.
function drain(sock, ms = 5000) {
  return new Promise((resolve) => {
    let text = ''; let done = false;
    const finish = (closed) => { if (!done) { done = true; clearTimeout(t); resolve({ text, closed }); } };
    const t = setTimeout(() => finish(false), ms);
    sock.on('data', (d) => { text += d.toString('latin1'); });
    sock.on('close', () => finish(true));
  });
}

before(async () => {
  raiseFdLimit(Math.max(4096, IDLE * 2 + 1024));
  // Ten agents besides the usual two, so that a burst for one person names more pending
  // requests than [consent] max_pending_per_user (5) allows.
  const burstAgents = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`agent.b${i}`,
    { name: `Burst agent ${i}`, allow: 'notes:read notes:write' }]));
  // ASan keeps freed memory in a quarantine (256 MiB by default), which would be measured
  // as consentd's; a small one keeps the resident figure about consentd.
  s = await startStack({ config: consentConfig(burstAgents),
    env: { ASAN_OPTIONS: 'detect_leaks=1:quarantine_size_mb=4' } });
  port = Number(new URL(s.url).port);
  gw = gateway({ url: s.url });
  const r = spawnSync(consentdBin, ['admin', 'token', 'create', '--name', 'hostile', '-c', s.c.cfgPath], {
    encoding: 'utf8', env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1' },
  });
  assert.equal(r.status, 0, r.stderr);
  adminToken = r.stdout.trim();
});

after(async () => { await s?.stop(); });

test('slow-loris: 240 connections sending headers and bodies a byte at a time', async (t) => {
  const socks = [];
  await underAttack(t, 'slow-loris', 48, async () => {
    for (let i = 0; i < 240; i++) socks.push(await attackerSocket(i));
    const bodyHead = 'POST /token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n' +
      'Content-Length: 4096\r\n\r\n';
    socks.forEach((k, i) => { k.write(i % 2 ? bodyHead : 'GET /healthz HTTP/1.1\r\nHost: x\r\n'); });
    for (let step = 0; step < 20; step++) {
      socks.forEach((k, i) => { if (!k.destroyed) k.write(i % 2 ? 'a' : `X-${step}: `); });
      await sleep(300);
    }
  });
  for (const k of socks) k.destroy();
});

test(`idle connections: ${IDLE} held open with no byte sent`, async (t) => {
  const socks = [];
  try {
    await underAttack(t, `${IDLE} idle connections`, Math.ceil(IDLE / 1000) * 48, async () => {
      for (let i = 0; i < IDLE; i += 200) {
        socks.push(...await Promise.all(Array.from({ length: Math.min(200, IDLE - i) }, (_, j) => attackerSocket(i + j))));
      }
      await sleep(3000);
      const closed = socks.filter((k) => k.destroyed || k.readyState !== 'open').length;
      t.diagnostic(`${IDLE - closed} of ${IDLE} idle connections still open after 3 s`);
    });
  } finally {
    for (const k of socks) k.destroy();
  }
});

test('header floods: 2 MiB of header lines on 20 connections at once, and one header of 1 MiB', async (t) => {
  const answers = await underAttack(t, 'header floods', 48, async () => {
    const socks = await Promise.all(Array.from({ length: 21 }, (_, i) => attackerSocket(i)));
    const outs = socks.map((k) => drain(k, 8000));
    const line = `X-Flood: ${'f'.repeat(90)}\r\n`;
    socks.slice(0, 20).forEach((k) => {
      k.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
      const chunk = line.repeat(1000);     // ~100 KB
      for (let j = 0; j < 20 && !k.destroyed; j++) k.write(chunk);
    });
    socks[20].write(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(1 << 20)}\r\n\r\n`);
    return Promise.all(outs);
  });
  for (const a of answers) {
    // Refused with a 4xx, or the connection closed: never a 200 for a request over the cap.
    assert.ok(a.closed || /^HTTP\/1\.1 4\d\d/.test(a.text), a.text.slice(0, 80));
    assert.ok(!/^HTTP\/1\.1 200/.test(a.text), 'a flooded request was served');
  }
});

test('a 100 MB body, by Content-Length and chunked: refused at the cap, never read whole', async (t) => {
  const got = await underAttack(t, '100 MB bodies', 48, async () => {
    const out = [];
    for (const chunked of [false, true]) {
      const k = await attackerSocket(0);
      let text = ''; let closed = false;
      k.on('data', (d) => { text += d.toString('latin1'); });
      k.on('close', () => { closed = true; });
      k.write('POST /token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n' +
        (chunked ? 'Transfer-Encoding: chunked\r\n\r\n' : 'Content-Length: 104857600\r\n\r\n'));
      // A declared size over the cap is answered before any of the body is sent.
      for (let i = 0; i < 40 && !text && !chunked; i++) await sleep(50);
      const early = text;
      const block = Buffer.alloc(64 * 1024, 'a');
      let sent = 0;
      while (sent < 100 * 1024 * 1024 && !closed && !k.destroyed && k.writable) {
        const piece = chunked ? Buffer.concat([Buffer.from(`${block.length.toString(16)}\r\n`), block, Buffer.from('\r\n')]) : block;
        if (!k.write(piece)) await new Promise((r) => { k.once('drain', r); k.once('close', r); setTimeout(r, 2000); });
        sent += block.length;
      }
      for (let i = 0; i < 40 && !closed; i++) await sleep(50);
      k.destroy();
      out.push({ chunked, sent, early: (/^HTTP\/1\.1 (\d{3})/.exec(early) || [])[1] || '', status: (/^HTTP\/1\.1 (\d{3})/.exec(text) || [])[1] || 'closed' });
    }
    return out;
  });
  for (const g of got) {
    t.diagnostic(`${g.chunked ? 'chunked' : 'Content-Length'}: answer ${g.early || g.status}; ${Math.round(g.sent / 1048576)} MiB written before consentd closed the connection`);
  }
  assert.equal(got[0].early, '413', 'a declared 100 MB body is refused with 413 before it is sent');
  // Chunked: the cap is met after [server] max_body (64 KiB here); consentd stops reading then.
  assert.ok(got[1].sent < 8 * 1024 * 1024, `${Math.round(got[1].sent / 1048576)} MiB of a chunked body were taken`);
});

test('deeply nested JSON: the admin API and authorization_details answer 400, and consentd lives', async (t) => {
  await underAttack(t, 'nested JSON', 48, async () => {
    for (const body of ['['.repeat(60000), '{"a":'.repeat(12000), `${'['.repeat(30000)}${']'.repeat(30000)}`]) {
      const r = await fetch(`${s.url}/admin/api/revocations`, {
        method: 'POST', headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' }, body,
      });
      const j = await r.json();
      assert.equal(r.status, 400, JSON.stringify(j));
      assert.equal(typeof j.error, 'string');
    }
    const subjectToken = (await getIdToken({ issuer: s.idp.issuer, ...GATEWAY_APP, user: 'alice', password: 'alice-password' })).id_token;
    for (const details of ['['.repeat(16000), `[${'{"a":'.repeat(3000)}`]) {
      const r = await gw.post('/token', {
        grant_type: TOKEN_EXCHANGE, subject_token: subjectToken, subject_token_type: TT_ID_TOKEN,
        agent_id: 'coder', audience: 'notes', scope: 'read', authorization_details: details,
      });
      assert.equal(r.status, 400, r.text);
      assert.equal(typeof r.body.error, 'string', r.text);
    }
  });
  assert.equal((await fetch(`${s.url}/healthz`)).status, 200);
});

// Every parameter of every route: the contract's (docs/openapi.yaml, query and form) and
// the route table's own (server/routes.c, so a parameter is covered the day it is declared;
// the pages for people are not in the contract).
function allFields() {
  const openapi = JSON.parse(readFileSync(join(root, 'docs', 'openapi.yaml'), 'utf8'));
  const out = new Map();
  const add = (method, path, names, form) => {
    const k = `${method} ${path}`;
    const had = out.get(k) || { method, path, names: new Set(), form };
    for (const n of names) had.names.add(n);
    had.form = had.form || form;
    out.set(k, had);
  };
  for (const [path, ops] of Object.entries(openapi.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const names = [];
      for (const p of [...(ops.parameters || []), ...(op.parameters || [])]) {
        const q = p.$ref ? openapi.components.parameters[p.$ref.split('/').pop()] : p;
        if (q.in === 'query') names.push(q.name);
      }
      const form = op.requestBody?.content?.['application/x-www-form-urlencoded']?.schema;
      const props = form?.$ref ? openapi.components.schemas[form.$ref.split('/').pop()].properties : form?.properties;
      add(method.toUpperCase(), path.replace('{path}', '{rest*}'), [...names, ...Object.keys(props || {})], !!form);
    }
  }
  const src = readFileSync(join(root, 'server', 'routes.c'), 'utf8');
  for (const m of src.matchAll(/\{ HTTP_(GET|POST|PUT|PATCH|DELETE), "([^"]+)", (ROUTE_\w+), (\w+), \{([\s\S]*?)\{ NULL, 0, NULL, 0 \} \}/g)) {
    const names = [...m[5].matchAll(/\{ "(\w+)", \d+/g)].map((x) => (x[1] === 's' ? 's0' : x[1]));
    add(m[1], m[2], names, m[1] === 'POST');
  }
  return [...out.values()].map((r) => ({ ...r, names: [...r.names] }));
}

test('invalid UTF-8 and NUL bytes in every text field of every route: refused cleanly, nothing stored', async (t) => {
  const routes = allFields();
  assert.ok(routes.length > 40, `${routes.length} routes`);
  assert.ok(routes.some((r) => r.path === '/consent/{id}' && r.method === 'POST' && r.names.includes('s0')), 'the route table is read');
  // Signed in (alice), so that a page's own checks run, not only the sign-in redirect.
  const { jar } = await consentdLogin({ url: s.url, user: 'alice', password: 'alice-password' });
  let calls = 0;
  const statuses = new Map();
  await underAttack(t, 'invalid UTF-8 and NUL', 48, async () => {
    for (const r of routes) {
      const path = r.path.replace(/\{rest\*?\}/g, 'x%FF%00y').replace(/\{[^}]+\}/g, 'a%FF%00b');
      const headers = { origin: s.url };
      if (r.path.startsWith('/admin/api/')) headers.authorization = `Bearer ${adminToken}`;
      else if (/^\/(token|introspect|revoke|proxy|metrics)/.test(r.path)) headers.authorization = basicAuth('agent-gateway', 'gateway-dev-secret');
      for (const bad of ['%FF%FEab', 'a%00b', '%C3%28', '%ED%A0%80', '%F4%90%80%80']) {
        for (const name of (r.names.length ? r.names : ['x'])) {
          const q = `${encodeURIComponent(name)}=${bad}`;
          const opts = { method: r.method, headers: { ...headers } };
          let url = `${s.url}${path}`;
          if (r.method === 'GET' || !r.form) url += `?${q}`;
          else { opts.body = q; opts.headers['content-type'] = 'application/x-www-form-urlencoded'; }
          const res = await jarReq(jar, url, opts);
          const text = await res.text();
          calls += 1;
          statuses.set(res.status, (statuses.get(res.status) || 0) + 1);
          assert.ok(res.status < 500 || (res.status === 503 && /temporarily_unavailable/.test(text)),
            `${r.method} ${r.path} ${name}=${bad}: ${res.status} ${text.slice(0, 200)}`);
          assert.ok(!text.includes('\u0000') && !text.includes('\ufffd'), `${r.method} ${r.path} ${name}: a NUL or a replacement character in the answer`);
        }
      }
    }
  });
  t.diagnostic(`${calls} requests on ${routes.length} routes; statuses ${JSON.stringify(Object.fromEntries(statuses))}`);
  assert.equal((await fetch(`${s.url}/healthz`)).status, 200);
  const db = join(s.c.dir, 'consentd.db');
  const q = (sql) => spawnSync('sqlite3', [db, sql], { encoding: 'utf8' }).stdout.trim();
  assert.equal(q('PRAGMA integrity_check'), 'ok');
  // No stored text holds a NUL or bytes that are not UTF-8 (0xFF, 0xFE, a lone 0xC3 ...).
  for (const [table, cols] of [['audit', ['actor', 'action', 'subject', 'agent', 'resource', 'scopes', 'detail']],
    ['consent_requests', ['agent', 'resource', 'scopes', 'reason']]]) {
    for (const col of cols) {
      const n = q(`SELECT count(*) FROM ${table} WHERE instr(CAST(${col} AS BLOB), X'00') > 0 OR instr(CAST(${col} AS BLOB), X'FF') > 0 OR instr(CAST(${col} AS BLOB), X'FE') > 0 OR instr(CAST(${col} AS BLOB), X'C328') > 0`);
      assert.equal(n, '0', `${table}.${col} holds bytes that are not text`);
    }
  }
});

test('a burst of 400 consent requests for one person: at most max_pending_per_user stored, the rest 429', async (t) => {
  const subjectToken = (await getIdToken({ issuer: s.idp.issuer, ...GATEWAY_APP, user: 'bob', password: 'bob-password' })).id_token;
  const scopes = ['read', 'write', 'read write'];
  const res = await underAttack(t, 'consent request burst', 48, async () => Promise.all(Array.from({ length: 400 }, (_, i) => gatewayPostFrom(i, '/token', {
    grant_type: TOKEN_EXCHANGE, subject_token: subjectToken, subject_token_type: TT_ID_TOKEN,
    agent_id: `b${i % 10}`, audience: 'notes', scope: scopes[i % 3],
    reason: `burst ${i}`,
  }))));
  const counts = {};
  for (const r of res) {
    const k = `${r.status} ${r.body?.error || ''}`;
    counts[k] = (counts[k] || 0) + 1;
    assert.ok([400, 429].includes(r.status), `${r.status} ${r.text}`);
    if (r.status === 429) {
      assert.equal(r.body.error, 'too_many_pending_requests');
      assert.match(r.headers.get('retry-after') || '', /^\d+$/);
    }
  }
  t.diagnostic(`answers: ${JSON.stringify(counts)}`);
  assert.ok(Object.keys(counts).every((k) => ['400 consent_required', '400 authorization_pending', '400 slow_down', '429 too_many_pending_requests'].includes(k)), JSON.stringify(counts));
  const db = join(s.c.dir, 'consentd.db');
  const pending = spawnSync('sqlite3', [db, "SELECT count(*) FROM consent_requests r JOIN users u ON u.id = r.user_id WHERE u.subject = 'bob' AND r.status = 'pending'"], { encoding: 'utf8' });
  assert.equal(pending.status, 0, pending.stderr);
  assert.ok(Number(pending.stdout.trim()) <= 5, `${pending.stdout.trim()} pending requests for bob (max_pending_per_user 5)`);
  assert.ok(counts['429 too_many_pending_requests'] > 0, 'the burst met the bound');
});
