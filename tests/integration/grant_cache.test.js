// The verified-grant cache (issue 15) with the real binary and the real IdP: it may remember
// a grant's signature, never that the grant is live, and never past the key set it verified
// under.  Revocation through /revoke, /me and the admin API at introspection and /proxy is
// covered where those features are tested (consent_attacks, me, admin_api, proxy, dpop);
// here: `consentd keys revoke` of the key that signed a grant, then a reload (SIGHUP), makes
// that grant inactive at the very next introspection, though it was cached a moment before.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { startStack } from '../lib/stack.js';
import { consentdBin } from '../lib/consentd.js';
import { getIdToken } from '../lib/idplogin.js';
import { gateway } from '../lib/gateway.js';
import { consentdLogin, req, postForm } from '../lib/weblogin.js';
import { consentConfig, GATEWAY_APP } from '../lib/fixtures.js';

let s;
let gw;
before(async () => {
  s = await startStack({ config: { ...consentConfig(), keys: { publish_lead: 0 } } });
  gw = gateway({ url: s.url });
});
after(async () => { await s?.stop(); });

// `consentd keys ARGS -c <config>` against the running server's database.
function keys(...args) {
  const r = spawnSync(consentdBin, ['keys', ...args, '-c', s.c.cfgPath], {
    encoding: 'utf8', timeout: 20000, env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1' },
  });
  assert.equal(r.status, 0, `keys ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

async function jwksKids() {
  const res = await fetch(`${s.url}/.well-known/jwks.json`);
  assert.equal(res.status, 200);
  return (await res.json()).keys.map((k) => k.kid).sort();
}

// SIGHUP, then waits (up to 3 s) until the served JWKS is exactly want: the reload is done.
async function reloadUntil(want) {
  process.kill(s.c.proc.pid, 'SIGHUP');
  want = [...want].sort();
  let got;
  for (const t0 = Date.now(); Date.now() - t0 < 3000;) {
    got = await jwksKids();
    if (JSON.stringify(got) === JSON.stringify(want)) return;
    await new Promise((r) => { setTimeout(r, 100); });
  }
  assert.deepEqual(got, want, 'the JWKS after SIGHUP');
}

// alice approves coder on notes:read in the browser; the gateway then gets a grant.
async function aliceGrant() {
  const subjectToken = (await getIdToken({ issuer: s.idp.issuer, ...GATEWAY_APP, user: 'alice', password: 'alice-password' })).id_token;
  const ask = { subjectToken, audience: 'notes', scope: 'read', agentId: 'coder' };
  const first = await gw.exchange(ask);
  assert.equal(first.body?.error, 'consent_required', first.text);
  const { jar } = await consentdLogin({ url: s.url, user: 'alice', password: 'alice-password' });
  const page = await (await req(jar, first.body.consent_uri)).text();
  const form = postForm(page);
  const post = await req(jar, new URL(form.action, s.url).href, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: s.url },
    body: new URLSearchParams({ ...form.fields, decision: 'approve', duration: page.match(/<option value="(\d+)"/)[1] }).toString(),
  });
  assert.equal(post.status, 200, 'the approval');
  const g = await gw.exchange(ask);
  assert.equal(g.status, 200, g.text);
  return g.body.access_token;
}

const active = async (t) => (await gw.introspect(t)).body;
const kidOf = (t) => JSON.parse(Buffer.from(t.split('.')[0], 'base64url').toString()).kid;

test('keys revoke of the key that signed a cached grant, then SIGHUP: the grant is inactive at once', async () => {
  const [oldKid] = await jwksKids();
  const grant = await aliceGrant();
  assert.equal(kidOf(grant), oldKid);
  // Introspected twice: verified once, then remembered.
  assert.equal((await active(grant)).active, true);
  assert.equal((await active(grant)).active, true);

  // keys rotate: another key set (the old key is still published), so the grant is verified
  // again, with the old key, and stays active.
  const rot = keys('rotate');
  const newKid = rot.match(/new signing key ([A-Za-z0-9_-]{43})/)[1];
  await reloadUntil([oldKid, newKid]);
  assert.equal((await active(grant)).active, true, 'still signed by a published key');
  assert.equal((await active(grant)).active, true);

  // keys revoke of the old key: after the reload that drops it, its grant is refused at the
  // very next call, though the grant itself was neither revoked nor expired.
  assert.match(keys('revoke', oldKid), new RegExp(`revoked ${oldKid}`));
  await reloadUntil([newKid]);
  assert.deepEqual(await active(grant), { active: false });
  assert.deepEqual(await active(grant), { active: false });

  // A grant signed by the new key is active, and the server kept serving.
  const fresh = await gw.exchange({
    subjectToken: (await getIdToken({ issuer: s.idp.issuer, ...GATEWAY_APP, user: 'alice', password: 'alice-password' })).id_token,
    audience: 'notes', scope: 'read', agentId: 'coder',
  });
  assert.equal(fresh.status, 200, fresh.text);
  assert.equal(kidOf(fresh.body.access_token), newKid);
  assert.equal((await active(fresh.body.access_token)).active, true);
});
