// What a new user meets first (issue 35 item 9): the pages' icon (no console 404 for
// /favicon.ico), the front page's title, and `consentd keygen` into a directory that is
// not there, which names the directory and what to do.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync, mkdirSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startConsentd, consentdBin } from '../lib/consentd.js';

test('the icon is served at /favicon.ico and /static/favicon.svg, and every page links it; the front page\'s title is not "consentd · consentd"', async () => {
  const c = await startConsentd();
  try {
    for (const p of ['/favicon.ico', '/static/favicon.svg']) {
      const r = await fetch(`${c.url}${p}`);
      assert.equal(r.status, 200, p);
      assert.equal(r.headers.get('content-type'), 'image/svg+xml', p);
      assert.equal(r.headers.get('cache-control'), 'public, max-age=3600', p);
      assert.match(await r.text(), /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/, p);
    }
    const home = await (await fetch(`${c.url}/`)).text();
    assert.match(home, /<link rel="icon" href="\/static\/favicon\.svg" type="image\/svg\+xml">/);
    const title = home.match(/<title>([^<]*)<\/title>/)[1];
    assert.equal(title, 'Consent for AI agents · consentd');
    assert.doesNotMatch(title, /consentd · consentd/);
    const csp = (await fetch(`${c.url}/`)).headers.get('content-security-policy');
    assert.match(csp, /img-src 'self'/, 'the icon is allowed by the CSP');
  } finally {
    const st = await c.stop();
    assert.equal(st.code, 0, c.proc.stderr);
  }
});

test('consentd keygen into a missing or unwritable directory names it and says what to do', () => {
  const dir = mkdtempSync(join(tmpdir(), 'consentd-keygen-'));
  try {
    const file = join(dir, 'etc-consentd', 'master.key');
    const r = spawnSync(consentdBin, ['keygen', file], { encoding: 'utf8' });
    assert.equal(r.status, 1, r.stdout);
    assert.equal(r.stderr.trim(), `consentd keygen: cannot create ${file}: the directory ${join(dir, 'etc-consentd')} does not exist; `
      + `create it first (e.g. install -d -m 0750 ${join(dir, 'etc-consentd')}, owned by the user consentd runs as), `
      + 'or give another file: consentd keygen FILE');
    assert.equal(existsSync(file), false);
    if (process.getuid && process.getuid() !== 0) {
      const ro = join(dir, 'ro');
      mkdirSync(ro);
      chmodSync(ro, 0o500);
      const w = spawnSync(consentdBin, ['keygen', join(ro, 'master.key')], { encoding: 'utf8' });
      assert.equal(w.status, 1);
      assert.match(w.stderr, new RegExp(`cannot create ${join(ro, 'master.key')}: cannot write in ${ro} \\(Permission denied\\); run it as a user who may`));
      chmodSync(ro, 0o700);
    }
    // And where it can: created, 0600.
    const ok = spawnSync(consentdBin, ['keygen', join(dir, 'master.key')], { encoding: 'utf8' });
    assert.equal(ok.status, 0, ok.stderr);
    assert.match(ok.stdout, /created .*master\.key \(32 random bytes, mode 0600\)/);
  } finally { rmSync(dir, { recursive: true, force: true }); }
});
