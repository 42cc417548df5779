// What the real binary says about the person-facing settings of issue 14: `consentd -n`
// warns for each approval = required action of a resource that releases its tokens to the
// gateway (and for none in proxy mode), checks [consent] default_duration, warns for the
// obsolete [login] bounds (issue #28), and the server
// serves the pages' one script, /static/local-time.js, under a CSP that allows only it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startConsentd, consentdBin, toIni, baseConfig } from '../lib/consentd.js';

// A configuration with a gateway-released and a proxy-only resource at the same provider,
// each with an approval = required action, and a resource with a short max_consent.
function sections(dir, consent = {}) {
  const provider = { provider_issuer: 'http://127.0.0.1:9', provider_client_id: 'consentd' };
  return {
    ...baseConfig({ port: 8080, dir }),
    consent,
    'agent.coder': { allow: 'github:issues:write ghproxy:issues:write wiki:read' },
    'resource.github': { ...provider, token_release: 'gateway' },
    'scope.github.issues:write': { provider: 'repo' },
    'action.github.create_issue': { scope: 'issues:write', approval: 'required' },
    'action.github.list_issues': { scope: 'issues:write', approval: 'none' },
    'resource.ghproxy': { ...provider, token_release: 'never', base_url: 'http://127.0.0.1:9' },
    'scope.ghproxy.issues:write': { provider: 'repo' },
    'action.ghproxy.create_issue': { scope: 'issues:write', approval: 'required', route: 'POST /issues' },
    'resource.wiki': { max_consent: 86400 },
    'scope.wiki.read': {},
  };
}

function check(dir, cfg) {
  const path = join(dir, 'c.ini');
  writeFileSync(path, toIni(cfg));
  // -n checks the master key as the start does (startchecks.test.js): give it one.
  if (!existsSync(cfg.keys.master_key_file)) writeFileSync(cfg.keys.master_key_file, randomBytes(32), { mode: 0o600 });
  return { path, ...spawnSync(consentdBin, ['-n', '-c', path], { encoding: 'utf8' }) };
}

test('consentd -n warns for approval = required with token_release = gateway, not for proxy mode', () => {
  const dir = mkdtempSync(join(tmpdir(), 'consentd-n-'));
  try {
    const r = check(dir, sections(dir));
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /configuration OK/);
    const warned = r.stderr.split('\n').filter((l) => /approval = required/.test(l));
    assert.equal(warned.length, 1, r.stderr);
    assert.match(warned[0], /^warning: \[action\.github\.create_issue\]: approval = required, but \[resource\.github\] has token_release = gateway: /);
    assert.match(warned[0], /only the gateway keeps it to this one action/);
    assert.doesNotMatch(r.stderr, /action\.ghproxy/);
    assert.doesNotMatch(r.stderr, /list_issues/);
  } finally { rmSync(dir, { recursive: true, force: true }); }
});

test('consentd -n: default_duration is checked, and a value past a resource\'s max_consent warns', () => {
  const dir = mkdtempSync(join(tmpdir(), 'consentd-n-'));
  try {
    const long = check(dir, sections(dir, { default_duration: 172800 }));
    assert.equal(long.status, 0, long.stderr);
    assert.match(long.stderr, /^warning: .*c\.ini:\d+: default_duration: 172800 is longer than max_consent of \[resource\.wiki\] \(86400\): its consent page preselects 86400$/m);
    assert.doesNotMatch(long.stderr, /resource\.github\] \(/, 'github allows 30 days: no warning for it');
    for (const bad of ['0', '-1', '1d', '315360001']) {
      const r = check(dir, sections(dir, { default_duration: bad }));
      assert.notEqual(r.status, 0, `default_duration = ${bad}: ${r.stderr}`);
      assert.match(r.stderr, /c\.ini:\d+: default_duration: /, r.stderr);
    }
    const none = check(dir, sections(dir));
    assert.doesNotMatch(none.stderr, /default_duration/, 'the built-in default never warns');
  } finally { rmSync(dir, { recursive: true, force: true }); }
});

test('consentd -n: [login] max_pending and max_pending_per_address are obsolete: a warning each, not a failure (issue #28)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'consentd-n-'));
  try {
    const r = check(dir, { ...sections(dir), login: { max_pending: 10000, max_pending_per_address: 16 } });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /configuration OK/);
    for (const key of ['max_pending', 'max_pending_per_address']) {
      assert.match(r.stderr, new RegExp(`^warning: .*c\\.ini:\\d+: ${key}: obsolete and ignored: sign-ins in progress are no longer stored at consentd`, 'm'), r.stderr);
    }
    const none = check(dir, sections(dir));
    assert.doesNotMatch(none.stderr, /obsolete/);
  } finally { rmSync(dir, { recursive: true, force: true }); }
});

test('/static/local-time.js is served as JavaScript; the pages\' CSP allows scripts from consentd only', async () => {
  const c = await startConsentd();
  try {
    const res = await fetch(`${c.url}/static/local-time.js`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/javascript; charset=utf-8');
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(res.headers.get('cache-control'), 'public, max-age=3600');
    const js = await res.text();
    assert.match(js, /querySelectorAll\('time\[datetime\]'\)/);
    assert.match(js, /textContent = /);
    assert.doesNotMatch(js, /innerHTML/, 'it never inserts markup');
    const csp = (await fetch(`${c.url}/`)).headers.get('content-security-policy');
    assert.match(csp, /(^|; )script-src 'self'(;|$)/, csp);
    assert.match(csp, /default-src 'none'/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  } finally {
    const st = await c.stop();
    assert.equal(st.code, 0, c.proc.stderr);
  }
});
