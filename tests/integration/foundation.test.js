// Foundation: the real consentd binary on a free port with a temporary SQLite
// database, checked over HTTP -- metadata, keys, health, errors, limits,
// security headers, the access log, configuration checks and orderly stop.  (The metadata's
// endpoints and the 405 with Allow need no process: test_routes.c dispatches them through
// the real route table, test_handlers_as_metadata_endpoints_exist and
// test_handlers_wrong_method_405_with_allow.)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { startConsentd, consentdBin, toIni, baseConfig } from '../lib/consentd.js';

let c;
before(async () => { c = await startConsentd(); });
after(async () => {
  // Every request above (413s, 431s, bad URIs included) must have completed:
  // a leaked request would hold the stop for the whole drain time, and a
  // sanitizer finding would make the exit code non-zero.
  const t0 = Date.now();
  const st = await c.stop();
  assert.equal(st.code, 0, c.proc.stderr);
  assert.ok(Date.now() - t0 < 3000, 'no request stayed in flight');
});

function assertSecurityHeaders(res) {
  const csp = res.headers.get('content-security-policy') || '';
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /frame-ancestors 'none'/);
  assert.doesNotMatch(csp, /unsafe-inline/);
  assert.equal(res.headers.get('x-frame-options'), 'DENY');
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(res.headers.get('referrer-policy'), 'no-referrer');
  assert.match(res.headers.get('x-request-id') || '', /^[0-9a-f]{16}$/);
}

// Sends raw bytes and returns the raw response text (for requests fetch cannot make).
function rawRequest(port, data, { waitMs = 3000 } = {}) {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let out = '';
    s.on('data', (d) => { out += d.toString('latin1'); });
    s.on('end', () => resolve(out));
    s.on('error', reject);
    s.setTimeout(waitMs, () => { s.destroy(); resolve(out); });
    s.write(data);
  });
}

test('JWKS publishes one ES256 public key with kid, use and alg, cacheable for 300 s', async () => {
  const res = await fetch(`${c.url}/.well-known/jwks.json`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^application\/jwk-set\+json/);
  assert.equal(res.headers.get('cache-control'), 'public, max-age=300');
  assertSecurityHeaders(res);
  const jwks = await res.json();
  assert.equal(jwks.keys.length, 1);
  const k = jwks.keys[0];
  assert.equal(k.kty, 'EC');
  assert.equal(k.crv, 'P-256');
  assert.equal(k.alg, 'ES256');
  assert.equal(k.use, 'sig');
  assert.match(k.kid, /^[A-Za-z0-9_-]{43}$/);
  assert.ok(k.x && k.y);
  assert.equal(k.d, undefined, 'never a private member');
  // The key imports as a real P-256 public key.
  const { createPublicKey } = await import('node:crypto');
  const pub = createPublicKey({ key: k, format: 'jwk' });
  assert.equal(pub.asymmetricKeyDetails.namedCurve, 'prime256v1');
});

test('healthz answers; readyz checks the database and says unready without a reachable IdP', async () => {
  const h = await fetch(`${c.url}/healthz`);
  assert.equal(h.status, 200);
  assert.equal(h.headers.get('cache-control'), 'no-store');
  // This instance's IdP (port 9) does not exist: the login tests show readyz 200 with a real one.
  const r = await fetch(`${c.url}/readyz`);
  assert.equal(r.status, 503);
  const body = await r.json();
  assert.equal(body.status, 'unready');
  assert.equal(body.checks.database, true);
  assert.equal(body.checks.signing_key, true);
  assert.equal(body.checks.identity_provider, false);
  assert.equal(body.checks.audit_head, true);
});

test('unknown route: 404 as HTML for people, as JSON under /.well-known', async () => {
  const a = await fetch(`${c.url}/no/such/page`);
  assert.equal(a.status, 404);
  assert.match(a.headers.get('content-type'), /^text\/html/);
  assertSecurityHeaders(a);
  assert.match(await a.text(), /There is no such page/);
  const b = await fetch(`${c.url}/.well-known/nothing`);
  assert.equal(b.status, 404);
  assert.equal((await b.json()).error, 'not_found');
});

test('malformed query string and hostile paths are refused with 400/404, never a crash', async () => {
  for (const q of ['%zz', '%00', '%c0%80', 'a=%ff']) {
    const res = await fetch(`${c.url}/?${q}`);
    assert.equal(res.status, 400, q);
    assert.match(await res.text(), /Bad request/);
  }
  const dotdot = await rawRequest(c.port, 'GET /static/../healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.match(dotdot, /^HTTP\/1\.1 404/);
  const abs = await rawRequest(c.port, 'GET http://evil.example/healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  assert.match(abs, /^HTTP\/1\.1 400/);
  // A browser page refuses parameters it does not know.
  const unk = await fetch(`${c.url}/?x=1`);
  assert.equal(unk.status, 400);
});

test('oversized body: 413 before the body is read', async () => {
  const big = 'a='.padEnd(70000, 'x');
  const res = await fetch(`${c.url}/token`, {
    method: 'POST', body: big, headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  assert.equal(res.status, 413);
  const j = await res.json();
  assert.equal(j.error, 'invalid_request');
  assert.equal(res.headers.get('cache-control'), 'no-store');
  // A chunked body past the cap (no Content-Length) is refused too.
  const chunk = 'x'.repeat(40000);
  const raw = await rawRequest(c.port, 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n'
    + 'Content-Type: application/x-www-form-urlencoded\r\nConnection: close\r\n\r\n'
    + `${(40000).toString(16)}\r\n${chunk}\r\n${(40000).toString(16)}\r\n${chunk}\r\n0\r\n\r\n`);
  assert.match(raw, /^HTTP\/1\.1 413/);
});

test('oversized headers are refused without crashing the server', async () => {
  const raw = await rawRequest(c.port, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'y'.repeat(100000)}\r\nConnection: close\r\n\r\n`);
  assert.match(raw, /^HTTP\/1\.1 (413|431|400)/);
  assert.equal((await fetch(`${c.url}/healthz`)).status, 200);
});

test('a header line that is not name: value (obs-fold, a name with spaces or a colon) -> 400 on any route', async () => {
  const cases = [
    ['obs-fold', 'GET /healthz HTTP/1.1\r\nHost: x\r\nAccept: text/html\r\n X-Folded: 1\r\nConnection: close\r\n\r\n'],
    ['a space in a name', 'GET /healthz HTTP/1.1\r\nHost: x\r\nX Bad: 1\r\nConnection: close\r\n\r\n'],
    ['obs-fold with a tab, before a body', 'POST /token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n'
      + '\tX-Folded: 1\r\nContent-Length: 3\r\nConnection: close\r\n\r\na=b'],
  ];
  for (const [label, bytes] of cases) {
    const raw = await rawRequest(c.port, bytes);
    assert.match(raw, /^HTTP\/1\.1 400/, label);
  }
  const tok = await rawRequest(c.port, cases[2][1]);
  assert.match(tok, /"error":\s*"invalid_request"/, 'an OAuth endpoint answers RFC 6749 JSON');
  // A normal request on the same server still works.
  assert.equal((await fetch(`${c.url}/healthz`)).status, 200);
});

test('access log: one JSON line per request with a request id and the route pattern, never the query string or the path', async () => {
  const res = await fetch(`${c.url}/healthz?code=SECRET-CODE-123&state=zzz`);
  const rid = res.headers.get('x-request-id');
  const page = await fetch(`${c.url}/consent/PATH-ID-4567`, { redirect: 'manual' });
  const rid2 = page.headers.get('x-request-id');
  await new Promise((r) => setTimeout(r, 100));
  const log = readFileSync(join(c.dir, 'access.log'), 'utf8');
  assert.doesNotMatch(log, /SECRET-CODE-123/);
  assert.doesNotMatch(log, /PATH-ID-4567/, 'ids in a path are not logged');
  const lines = log.trim().split('\n').map((l) => JSON.parse(l));
  const mine = lines.find((l) => l.request_id === rid);
  assert.ok(mine, 'the request is logged under its id');
  assert.equal(mine.event, 'request');
  assert.equal(mine.level, 'info');
  assert.match(mine.ts, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.equal(mine.route, '/healthz');
  assert.equal(mine.status, 200);
  assert.equal(mine.method, 'GET');
  assert.equal(typeof mine.ms, 'number');
  assert.equal(mine.path, undefined);
  const other = lines.find((l) => l.request_id === rid2);
  assert.equal(other.route, '/consent/{id}');
  // Diagnostics are lines of the same stream: the start is there.
  assert.ok(lines.some((l) => l.level === 'info' && /listening on 127\.0\.0\.1:/.test(l.msg || '')),
    'the start is logged on the same stream');
});

test('the signing key survives a restart (stored sealed in the database)', async () => {
  const before1 = await (await fetch(`${c.url}/.well-known/jwks.json`)).json();
  const d = await startConsentd({ keepDir: true });
  const kid1 = (await (await fetch(`${d.url}/.well-known/jwks.json`)).json()).keys[0].kid;
  await d.stop({ remove: false });
  const d2 = await startConsentd({ dir: d.dir, port: d.port });
  const kid2 = (await (await fetch(`${d2.url}/.well-known/jwks.json`)).json()).keys[0].kid;
  await d2.stop();
  assert.equal(kid1, kid2);
  assert.notEqual(kid1, before1.keys[0].kid, 'each database has its own key');
  // The private key is not in the database in the clear.
  const dump = spawnSync('sqlite3', [join(c.dir, 'consentd.db'), 'SELECT hex(sealed) FROM signing_keys'], { encoding: 'utf8' });
  assert.equal(dump.status, 0);
  assert.doesNotMatch(Buffer.from(dump.stdout.trim(), 'hex').toString('latin1'), /"d"/);
});

// A request whose body is still arriving is in flight.
async function startSlowRequest(port) {
  const s = net.connect(port, '127.0.0.1');
  await new Promise((r) => s.on('connect', r));
  let out = '';
  s.on('data', (d) => { out += d.toString('latin1'); });
  const done = new Promise((r) => s.on('close', () => r(out)));
  s.write('POST /logout HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n'
    + 'Content-Length: 10\r\nConnection: close\r\n\r\ncsrf');
  await new Promise((r) => setTimeout(r, 200));
  return { s, done };
}

const refused = (port) => new Promise((resolve) => {
  const s = net.connect(port, '127.0.0.1');
  s.on('connect', () => { s.destroy(); resolve(false); });
  s.on('error', () => resolve(true));
});

test('SIGTERM stops accepting, finishes the request in flight, then exits 0', async () => {
  const d = await startConsentd();
  const { s, done } = await startSlowRequest(d.port);
  process.kill(d.proc.pid, 'SIGTERM');
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(d.proc.exitStatus, null, 'still finishing the request in flight');
  assert.ok(await refused(d.port), 'new connections are refused while draining');
  s.write('=xxxxx');                       // the rest of the body
  const answer = await done;
  assert.match(answer, /^HTTP\/1\.1 403/, 'the in-flight request got its answer');
  const st = await d.proc.exited;
  assert.equal(st.code, 0);
  assert.match(readFileSync(join(d.dir, 'access.log'), 'utf8'), /"msg":"stopped"/);
  await d.stop();
});

test('a second signal while draining exits at once', async () => {
  const d = await startConsentd();
  const { s } = await startSlowRequest(d.port);
  process.kill(d.proc.pid, 'SIGTERM');
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(d.proc.exitStatus, null);
  process.kill(d.proc.pid, 'SIGINT');
  const st = await d.proc.exited;
  assert.equal(st.code, 2);
  s.destroy();
  await d.stop();
});

test('idle keep-alive connections do not hold up a stop', async () => {
  const d = await startConsentd();
  const s = net.connect(d.port, '127.0.0.1');
  await new Promise((r) => s.on('connect', r));
  s.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
  await new Promise((r) => s.once('data', r));
  const t0 = Date.now();
  const st = await d.stop();
  assert.equal(st.code, 0);
  assert.ok(Date.now() - t0 < 3000, 'stopped without waiting for the idle connection');
  s.destroy();
});

test('consentd -n catches a misspelled key with its line number, a head_file without its directory; --version and --help', () => {
  const dir = mkdtempSync(join(tmpdir(), 'consentd-n-'));
  try {
    const cfg = baseConfig({ port: 8080, dir, issuer: 'http://127.0.0.1:9' });
    const good = join(dir, 'good.ini');
    writeFileSync(good, toIni(cfg));
    // -n checks the master key as the start does: make one (startchecks.test.js tests that).
    const kg = spawnSync(consentdBin, ['keygen', cfg.keys.master_key_file], { encoding: 'utf8' });
    assert.equal(kg.status, 0, kg.stderr);
    const ok = spawnSync(consentdBin, ['-n', '-c', good], { encoding: 'utf8' });
    assert.equal(ok.status, 0, ok.stderr);
    const bad = join(dir, 'bad.ini');
    writeFileSync(bad, '[server]\nlisten = 127.0.0.1:8080\nlistn = 127.0.0.1:8081\n'
      + toIni({ ...cfg, server: undefined }));
    const r = spawnSync(consentdBin, ['-n', '-c', bad], { encoding: 'utf8' });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, new RegExp(`${bad.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:3: listn: `));
    // [audit] head_file: its directory must exist (and be writable) for the check to pass.
    const heads = join(dir, 'heads.ini');
    writeFileSync(heads, toIni({ ...cfg, audit: { head_file: join(dir, 'no-such-dir', 'heads') } }));
    const h1 = spawnSync(consentdBin, ['-n', '-c', heads], { encoding: 'utf8' });
    assert.equal(h1.status, 1);
    assert.match(h1.stderr, /\[audit\] head_file: directory .*no-such-dir does not exist/);
    writeFileSync(heads, toIni({ ...cfg, audit: { head_file: join(dir, 'heads') } }));
    const h2 = spawnSync(consentdBin, ['-n', '-c', heads], { encoding: 'utf8' });
    assert.equal(h2.status, 0, h2.stderr);
    const v = spawnSync(consentdBin, ['--version'], { encoding: 'utf8' });
    assert.equal(v.status, 0);
    assert.match(v.stdout, /^consentd \d+\.\d+\.\d+/);
    const h = spawnSync(consentdBin, ['--help'], { encoding: 'utf8' });
    assert.equal(h.status, 0);
    assert.match(h.stdout, /usage: consentd/);
  } finally { rmSync(dir, { recursive: true, force: true }); }
});

test('a database with a newer schema is refused at start, clearly', async () => {
  const d = await startConsentd({ keepDir: true });
  await d.stop({ remove: false });
  const r0 = spawnSync('sqlite3', [join(d.dir, 'consentd.db'),
    'INSERT INTO schema_version(version, applied_at) VALUES (9999, 0)'], { encoding: 'utf8' });
  assert.equal(r0.status, 0, r0.stderr);
  const r = spawnSync(consentdBin, ['-c', d.cfgPath], { encoding: 'utf8', timeout: 10000 });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /newer/);
  rmSync(d.dir, { recursive: true, force: true });
});

test('a master key readable by others is refused', async () => {
  const d = await startConsentd({ keepDir: true });
  await d.stop({ remove: false });
  spawnSync('chmod', ['0644', join(d.dir, 'master.key')]);
  const r = spawnSync(consentdBin, ['-c', d.cfgPath], { encoding: 'utf8', timeout: 10000 });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /master key/);
  rmSync(d.dir, { recursive: true, force: true });
});
