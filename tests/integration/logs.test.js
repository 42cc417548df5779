// Logs (#16.8): SIGHUP reopens the log file, so that logrotate's move-then-HUP
// works -- the moved file gets no line after the reopen, the new file (created
// at the configured path) gets the next ones, each a JSON line with a level, a
// request id and the route; and the master key is in no line.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, renameSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startConsentd } from '../lib/consentd.js';

let c;
before(async () => { c = await startConsentd(); });
after(async () => { await c?.stop(); });

const lines = (path) => readFileSync(path, 'utf8').trim().split('\n').filter(Boolean).map((l, i) => {
  try { return JSON.parse(l); } catch { assert.fail(`${path} line ${i + 1} is not JSON: ${l}`); }
  return null;
});

async function waitFor(pred, ms = 5000) {
  for (let t = 0; t < ms; t += 50) {
    if (pred()) return true;
    await sleep(50);
  }
  return pred();
}

test('SIGHUP after a move: the next lines land in a new file at the path, none in the moved one', async () => {
  const log = c.config.server.log;
  const moved = join(c.dir, 'access.log.1');
  for (let i = 0; i < 3; i++) assert.equal((await fetch(`${c.url}/healthz?before=${i}`)).status, 200);
  await sleep(100);
  renameSync(log, moved);
  process.kill(c.proc.pid, 'SIGHUP');
  assert.ok(await waitFor(() => existsSync(log)), 'the log file is created again');
  assert.ok(await waitFor(() => lines(log).some((l) => l.msg === 'log reopened (SIGHUP)')));
  const oldCount = lines(moved).length;
  for (let i = 0; i < 5; i++) assert.equal((await fetch(`${c.url}/healthz`)).status, 200);
  assert.equal((await fetch(`${c.url}/no-such-route`)).status, 404);
  assert.ok(await waitFor(() => lines(log).filter((l) => l.event === 'request').length >= 6));
  await sleep(200);

  const before = lines(moved), after = lines(log);
  assert.equal(before.length, oldCount, 'the moved file got no line after the reopen');
  assert.ok(before.filter((l) => l.event === 'request').length >= 3);
  const reqs = after.filter((l) => l.event === 'request');
  assert.equal(reqs.length, 6, JSON.stringify(after));
  for (const l of after) {
    assert.equal(typeof l.ts, 'string');
    assert.ok(['debug', 'info', 'warn', 'error'].includes(l.level));
  }
  for (const l of reqs) {
    assert.equal(typeof l.request_id, 'string');
    if (l.status !== 404) assert.equal(l.route, '/healthz', JSON.stringify(l));
  }
  assert.equal(new Set(reqs.map((l) => l.request_id)).size, 6, 'one request id each');
  // 16 hex digits: the low 24 bits of the time in milliseconds, then 40 random bits (so
  // the audit's request index is written at its end, issue 34).
  const t0 = Date.now();
  const r1 = await fetch(`${c.url}/healthz`);
  const t1 = Date.now();
  const rid = r1.headers.get('x-request-id');
  assert.match(rid, /^[0-9a-f]{16}$/);
  const ms = parseInt(rid.slice(0, 6), 16);
  const lo = t0 % 2 ** 24, hi = t1 % 2 ** 24;
  assert.ok(lo <= hi ? ms >= lo && ms <= hi : ms >= lo || ms <= hi,
    `request id ${rid} does not begin with the time (${lo}..${hi})`);
  // The keys were reloaded on the same signal, and the server still serves.
  assert.equal((await fetch(`${c.url}/healthz`)).status, 200);
});

test('a second rotation works the same way; the master key is in no line', async () => {
  const log = c.config.server.log;
  const moved = join(c.dir, 'access.log.2');
  renameSync(log, moved);
  process.kill(c.proc.pid, 'SIGHUP');
  assert.ok(await waitFor(() => existsSync(log)));
  assert.equal((await fetch(`${c.url}/healthz`)).status, 200);
  assert.ok(await waitFor(() => lines(log).some((l) => l.event === 'request')));
  const key = readFileSync(join(c.dir, 'master.key'));
  const all = ['access.log.1', 'access.log.2', 'access.log'].map((f) => readFileSync(join(c.dir, f), 'utf8')).join('');
  for (const s of [key.toString('hex'), key.toString('base64'), key.toString('base64url')])
    assert.ok(!all.includes(s), 'the master key is in the log');
});
