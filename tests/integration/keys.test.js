// Signing-key rotation with the real binary: `consentd keys rotate|revoke|list
// -c FILE` against the database of a running server, which picks the change up
// on SIGHUP; the JWKS follows, and the only signing key cannot be revoked.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { startConsentd, consentdBin } from '../lib/consentd.js';

let c;
before(async () => { c = await startConsentd({ config: { keys: { publish_lead: 0 } } }); });
after(async () => {
  const st = await c.stop();
  assert.equal(st.code, 0, c.proc.stderr);
});

// Runs `consentd keys ARGS -c <config>`; a last object argument adds environment.
function keys(...args) {
  const env = typeof args.at(-1) === 'object' ? args.pop() : {};
  const r = spawnSync(consentdBin, ['keys', ...args, '-c', c.cfgPath], {
    encoding: 'utf8', timeout: 20000,
    env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1', ...env },
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

async function jwksKids() {
  const res = await fetch(`${c.url}/.well-known/jwks.json`);
  assert.equal(res.status, 200);
  const doc = await res.json();
  return doc.keys.map((k) => k.kid).sort();
}

// SIGHUP, then polls the JWKS (for up to 3 s) until it holds exactly `want`.
async function hupUntil(want) {
  process.kill(c.proc.pid, 'SIGHUP');
  want = [...want].sort();
  let got;
  for (const t0 = Date.now(); Date.now() - t0 < 3000;) {
    got = await jwksKids();
    if (JSON.stringify(got) === JSON.stringify(want)) return;
    await new Promise((r) => { setTimeout(r, 100); });
  }
  assert.deepEqual(got, want, 'the JWKS after SIGHUP');
}

function listStates() {
  const r = keys('list');
  assert.equal(r.code, 0, r.err);
  const lines = r.out.trim().split('\n');
  assert.match(lines[0], /^KID\s+CREATED\s+SIGN_AFTER\s+STATE$/);
  const states = {};
  for (const l of lines.slice(1)) {
    const m = l.match(/^([A-Za-z0-9_-]{43})\s+(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\s+(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\s+(\S+)/);
    assert.ok(m, `a sane list line: ${l}`);
    states[m[1]] = m[4];
  }
  return states;
}

test('rotate publishes a second key, revoke withdraws it, the only signing key stays', async () => {
  const first = await jwksKids();
  assert.equal(first.length, 1);
  const [oldKid] = first;
  assert.deepEqual(listStates(), { [oldKid]: 'signing' });

  // rotate: published at once (publish_lead = 0: it signs at once too)
  const rot = keys('rotate');
  assert.equal(rot.code, 0, rot.err);
  const m = rot.out.match(/new signing key ([A-Za-z0-9_-]{43}): published now, signs from (\S+)/);
  assert.ok(m, rot.out);
  const newKid = m[1];
  assert.notEqual(newKid, oldKid);
  assert.doesNotMatch(rot.out + rot.err, /"d"|PRIVATE/, 'never key material');
  // the running server does not see it before its reload (SIGHUP here, or 60 s)
  assert.deepEqual(await jwksKids(), [oldKid]);
  await hupUntil([oldKid, newKid]);
  assert.deepEqual(listStates(), { [oldKid]: 'retired-published', [newKid]: 'signing' });

  // revoke the new key: gone at once; the old (still published) one signs again
  const rev = keys('revoke', newKid);
  assert.equal(rev.code, 0, rev.err);
  assert.match(rev.out, new RegExp(`revoked ${newKid}`));
  assert.match(rev.out, new RegExp(`signing key now: ${oldKid}`));
  await hupUntil([oldKid]);
  assert.deepEqual(listStates(), { [oldKid]: 'signing' });

  // the only key that can sign: refused, and nothing changes
  const only = keys('revoke', oldKid);
  assert.notEqual(only.code, 0);
  assert.match(only.err, /refused/);
  assert.match(only.err, /keys rotate/);
  await hupUntil([oldKid]);
  assert.deepEqual(listStates(), { [oldKid]: 'signing' });

  // revoking it twice, or an unknown kid, fails clearly
  const again = keys('revoke', newKid);
  assert.equal(again.code, 1);
  assert.match(again.err, /no unrevoked key has kid/);

  // the server kept serving all along
  assert.equal((await fetch(`${c.url}/healthz`)).status, 200);
});

test('with a publish lead the new key is published but waits; the signer cannot be revoked meanwhile', async () => {
  const [oldKid] = await jwksKids();
  // CONSENTD_KEYS_PUBLISH_LEAD overrides the file, as for any key
  const rot = keys('rotate', { CONSENTD_KEYS_PUBLISH_LEAD: '3600' });
  assert.equal(rot.code, 0, rot.err);
  const m = rot.out.match(/new signing key ([A-Za-z0-9_-]{43}): published now, signs from (\S+) \(in 3600 s/);
  assert.ok(m, rot.out);
  const upcoming = m[1];
  const startsAt = Date.parse(m[2]);
  assert.ok(Math.abs(startsAt - (Date.now() + 3600e3)) < 60e3, `signs an hour from now: ${m[2]}`);
  assert.deepEqual(listStates(), { [oldKid]: 'signing', [upcoming]: 'upcoming' });
  await hupUntil([oldKid, upcoming]);

  const refused = keys('revoke', oldKid);
  assert.equal(refused.code, 1);
  assert.match(refused.err, /refused/);

  // an upcoming key may be withdrawn
  const rev = keys('revoke', upcoming);
  assert.equal(rev.code, 0, rev.err);
  await hupUntil([oldKid]);
  assert.deepEqual(listStates(), { [oldKid]: 'signing' });
});

test('keys: bad command lines exit 2 with usage', () => {
  for (const args of [['keys'], ['keys', 'spin', '-c', c.cfgPath], ['keys', 'revoke', '-c', c.cfgPath],
    ['keys', 'list'], ['keys', 'rotate', '-c', c.cfgPath, 'extra']]) {
    const r = spawnSync(consentdBin, args, { encoding: 'utf8' });
    assert.equal(r.status, 2, args.join(' '));
    assert.match(r.stderr, /usage: consentd keys/);
  }
});
