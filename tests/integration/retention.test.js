// Retention ([retention], issue #16.3) with the real binary, the real IdP and a real
// SQLite file: a janitor pass every second with short values.  Consents are made the way
// people make them (the gateway asks, the person approves on the consent page), grants come
// from the token exchange, and a consent is revoked on /me.  Then, with no help but waiting:
// the expired grants and the decided consent requests go; a consent revoked longer ago than
// revoked_consent_days goes (its age is set back with sqlite3, which is the only way to make
// a day pass in a test), a freshly revoked one and a live one stay; the audit chain is
// pruned to audit_keep entries, and `consentd audit verify` passes from the anchor, with the
// published heads ([audit] head_file) after it, and fails once an entry after it is changed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startStack } from '../lib/stack.js';
import { consentdBin } from '../lib/consentd.js';
import { gateway } from '../lib/gateway.js';
import { consentdLogin, revokeOnMe } from '../lib/weblogin.js';
import { approveConsent } from '../lib/seed.js';
import { consentConfig, GATEWAY_APP } from '../lib/fixtures.js';
import { getIdToken } from '../lib/idplogin.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const KEEP = 6;
const headDir = mkdtempSync(join(tmpdir(), 'consentd-heads-'));
const headFile = join(headDir, 'audit-heads');

let s;
let gw;
before(async () => {
  s = await startStack({
    config: consentConfig({
      keys: { grant_ttl: 3 },
      consent: { interval: 1, request_ttl: 2, deny_cooldown: 0, max_pending_per_user: 5 },
      retention: { interval: 1, batch_size: 2, grace: 0, revoked_consent_days: 1, audit_keep: KEEP },
      audit: { head_file: headFile },
    }),
  });
  gw = gateway({ url: s.url });
});
after(async () => {
  await s?.stop();
  rmSync(headDir, { recursive: true, force: true });
});

const sql = (query) => s.c.sql(query);
const count = (table, where = 'true') => Number(sql(`SELECT count(*) FROM ${table} WHERE ${where}`));

function cli(...args) {
  const r = spawnSync(consentdBin, ['audit', ...args, '-c', s.c.cfgPath], {
    encoding: 'utf8', timeout: 30000, env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1' },
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

// Waits until check() holds (the janitor runs every second), or fails with what it saw.
async function until(what, check, ms = 12000) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    last = check();
    if (last === true) return;
    await sleep(250);
  }
  assert.fail(`${what}: still ${JSON.stringify(last)}`);
}

test('the janitor removes finished rows, old revoked consents and the audit prefix', async () => {
  const made = {};
  for (const user of ['alice', 'bob', 'carol']) {
    const { jar, final } = await consentdLogin({ url: s.url, user, password: `${user}-password` });
    assert.equal(final.status, 303, `login of ${user}`);
    const { grant, cid } = await approveConsent({
      url: s.url, issuer: s.idp.issuer, gw, jar, user, agentId: 'coder', audience: 'notes', scope: 'read',
    });
    assert.ok(grant);
    made[user] = { jar, cid };
  }
  // bob and carol revoke on /me; bob's revocation is made 2 days old (revoked_at is not part
  // of the audit chain), carol's stays fresh.
  for (const user of ['bob', 'carol']) {
    const r = await revokeOnMe({ url: s.url, jar: made[user].jar, cid: made[user].cid });
    assert.equal(r.status, 303);
  }
  // Everything the flows wrote was there (counted before bob's revocation ages: from
  // then on any janitor pass, of either node, may remove it).
  assert.equal(count('consents'), 3);
  sql(`UPDATE consents SET revoked_at = revoked_at - 2 * 86400 WHERE id = '${made.bob.cid}'`);

  // The grants expire after 3 s, the approved requests request_ttl (2 s) after their decision.
  await until('expired grants removed', () => count('grants') === 0 || count('grants'));
  await until('decided consent requests removed',
    () => count('consent_requests') === 0 || sql('SELECT id, status FROM consent_requests'));
  await until('the old revoked consent removed', () => count('consents', `id = '${made.bob.cid}'`) === 0);
  assert.equal(count('consents', `id = '${made.alice.cid}'`), 1, 'the live consent stays');
  assert.equal(count('consents', `id = '${made.carol.cid}' AND revoked_at > 0`), 1,
    'the freshly revoked consent stays');
  // The live consent still answers: a new grant for alice, after her old one was removed.
  const subjectToken = (await getIdToken({
    issuer: s.idp.issuer, ...GATEWAY_APP, user: 'alice', password: 'alice-password',
  })).id_token;
  const again = await gw.exchange({ subjectToken, agentId: 'coder', audience: 'notes', scope: 'read' });
  assert.equal(again.status, 200, again.text);
  await until('audit pruned to audit_keep', () => count('audit') <= KEEP || count('audit'));
  // One anchor per chain pruned (on PostgreSQL each node's chain: migration 0028); every
  // entry through the highest was pruned.
  const anchor = Number(sql('SELECT max(seq) FROM audit_anchor'));
  assert.ok(anchor > 0, 'an anchor recorded');
  assert.equal(Number(sql('SELECT min(seq) FROM audit')), anchor + 1);

  // Stop the server, then verify the pruned chain with the CLI, and the published heads.
  const st = await s.c.stop({ remove: false });
  assert.equal(st.code, 0, s.c.proc.stderr.slice(-2000));
  let r = cli('verify');
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, new RegExp(`entries through ${anchor} were pruned`));
  assert.match(r.out, /entries intact/);
  r = cli('verify', '--heads', headFile);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /lie before the anchor of the pruned prefix/);
  assert.match(r.out, /heads listed in .* are present/);

  // Tampering after the anchor is still found, and so is a moved anchor.
  const last = Number(sql('SELECT max(seq) FROM audit'));
  sql(`UPDATE audit SET detail = 'forged' WHERE seq = ${last}`);
  r = cli('verify');
  assert.notEqual(r.code, 0);
  assert.match(r.err, new RegExp(`entry ${last} is broken`));
  sql(`UPDATE audit SET detail = NULL WHERE seq = ${last}`);
  sql(`UPDATE audit_anchor SET seq = seq + 1, link = (SELECT link FROM audit WHERE seq = ${anchor + 1}) `
    + `WHERE seq = ${anchor}; `
    + `DELETE FROM audit WHERE seq = ${anchor + 1}`);
  r = cli('verify');
  assert.notEqual(r.code, 0);
  assert.match(r.err, /anchor of the pruned prefix does not verify/);
});
