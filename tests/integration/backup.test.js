// `consentd backup -c FILE --to PATH` (issue 16 item 7) with the real binary: while
// consentd serves under a write load (consent requests through the token exchange, each
// audited), the backup makes a copy; the copy passes integrity_check, holds every consent
// request acknowledged before the backup started, and `consentd audit verify --head` with
// the printed head passes on it; an existing --to is refused without --force (and replaced
// with it); a --to in a missing directory fails with a message and leaves nothing; a
// consentd started on the copy serves /readyz 200.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack, waitReady } from '../lib/stack.js';
import { startConsentd, consentdBin, toIni } from '../lib/consentd.js';
import { gateway } from '../lib/gateway.js';
import { getIdToken } from '../lib/idplogin.js';
import { consentConfig, GATEWAY_APP } from '../lib/fixtures.js';

let s;
const out = mkdtempSync(join(tmpdir(), 'consentd-backup-'));
const AGENTS = 600;   // one pending request each (a pending one is reused, not duplicated)
// The load is one person's consent requests, as fast as they go: [limits] person_rate off
// (ratelimit.test.js holds the limit; here it would stop the load this test needs).
const cfg = () => { const c = consentConfig(); c.consent = { ...c.consent, max_pending_per_user: 1000 };
  c.limits = { person_rate: 0 };
  for (let i = 0; i < AGENTS; i++) c[`agent.load${i}`] = { name: `Load ${i}`, description: 'Writes', allow: 'notes:read notes:write' };
  return c;
};
before(async () => { s = await startStack({ config: cfg() }); });
after(async () => { await s?.stop(); rmSync(out, { recursive: true, force: true }); });

function run(args) {
  const r = spawnSync(consentdBin, args, {
    encoding: 'utf8', timeout: 60000, env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1' },
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}
// The same, without blocking the event loop (the load keeps running meanwhile).
function runAsync(args) {
  return new Promise((resolve) => {
    const p = spawn(consentdBin, args, { env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1' } });
    let o = '';
    let e = '';
    p.stdout.on('data', (d) => { o += d; });
    p.stderr.on('data', (d) => { e += d; });
    p.on('close', (code) => resolve({ code, out: o, err: e }));
  });
}
function sql(db, query) {
  const r = spawnSync('sqlite3', ['-json', db, query], { encoding: 'utf8' });
  assert.equal(r.status, 0, `sqlite3: ${r.stderr}`);
  return r.stdout.trim() ? JSON.parse(r.stdout) : [];
}
// A config like the server's, with the database at db.
function configFor(db, name) {
  const cfg = { ...s.c.config, database: { ...s.c.config.database, path: db } };
  const p = join(out, name);
  writeFileSync(p, toIni(cfg));
  return p;
}

test('backup under write load: a consistent, verifiable copy; refusals; a server on the copy', async () => {
  const gw = gateway({ url: s.url });
  const idToken = (await getIdToken({
    issuer: s.idp.issuer, ...GATEWAY_APP, user: 'alice', password: 'alice-password',
  })).id_token;
  const acked = new Set();
  let n = 0;
  let stop = false;
  const ask = async () => {
    const r = await gw.exchange({ subjectToken: idToken, agentId: `load${n}`, audience: 'notes',
      scope: 'read write', reason: `load ${n++}` });
    assert.equal(r.body?.error, 'consent_required', r.text);
    acked.add(r.body.consent_request_id);
  };
  for (let i = 0; i < 5; i++) await ask();
  const load = (async () => { while (!stop && n < AGENTS) await ask(); })();
  await new Promise((r) => { setTimeout(r, 300); });

  const before = new Set(acked);
  const auditBefore = sql(join(s.c.dir, 'consentd.db'), 'SELECT count(*) AS n FROM audit')[0].n;
  const copy = join(out, 'copy.db');
  const startedAt = n;
  const b = await runAsync(['backup', '-c', s.c.cfgPath, '--to', copy]);
  const during = n - startedAt;
  await new Promise((r) => { setTimeout(r, 200); });
  stop = true;
  await load;
  assert.equal(b.code, 0, b.err);
  assert.ok(during > 0, `requests were answered while the backup ran (${n} in all)`);
  const m = b.out.match(/audit head (\d+:[0-9a-f]{64})/);
  assert.ok(m, b.out);
  assert.deepEqual(readdirSync(out).filter((f) => f.includes('.tmp-')), [], 'no temporary file left');

  assert.deepEqual(sql(copy, 'PRAGMA integrity_check'), [{ integrity_check: 'ok' }]);
  const ids = new Set(sql(copy, 'SELECT id FROM consent_requests').map((r) => r.id));
  for (const id of before) assert.ok(ids.has(id), `acknowledged request ${id} in the copy`);
  assert.ok(sql(copy, 'SELECT count(*) AS n FROM audit')[0].n >= auditBefore);

  const copyCfg = configFor(copy, 'copy.ini');
  const v = run(['audit', 'verify', '-c', copyCfg, '--head', m[1]]);
  assert.equal(v.code, 0, v.err);

  // An existing --to is refused, and left as it was; --force replaces it.
  const again = run(['backup', '-c', s.c.cfgPath, '--to', copy]);
  assert.equal(again.code, 1);
  assert.match(again.err, /exists; refusing/);
  const forced = run(['backup', '-c', s.c.cfgPath, '--to', copy, '--force']);
  assert.equal(forced.code, 0, forced.err);
  assert.deepEqual(sql(copy, 'PRAGMA integrity_check'), [{ integrity_check: 'ok' }]);

  // A missing directory: a message, exit 1, nothing made.
  const missing = join(out, 'no-such-dir', 'copy.db');
  const bad = run(['backup', '-c', s.c.cfgPath, '--to', missing]);
  assert.equal(bad.code, 1);
  assert.match(bad.err, /cannot create a file in .*no-such-dir/);
  assert.equal(existsSync(join(out, 'no-such-dir')), false);

  // Usage.
  assert.equal(run(['backup', '-c', s.c.cfgPath]).code, 2);
  assert.equal(run(['backup', '--help']).code, 0);

  // A consentd on the copy (its own directory, the same master key) is ready.
  const dir = mkdtempSync(join(tmpdir(), 'consentd-restored-'));
  copyFileSync(copy, join(dir, 'consentd.db'));
  copyFileSync(join(s.c.dir, 'master.key'), join(dir, 'master.key'));
  const c2 = await startConsentd({ dir, config: { oidc: { issuer: s.idp.issuer }, ...cfg() } });
  try {
    await waitReady(c2.url);
    assert.equal((await fetch(`${c2.url}/readyz`)).status, 200);
  } finally {
    const st = await c2.stop();
    assert.equal(st.code, 0, c2.proc.stderr.slice(-2000));
  }
});
