// What the real binary says about the person-facing settings of issue 14: `consentd -n`
// refuses each approval = required action of a resource that releases its tokens to the
// gateway unless approval_enforced_by = gateway states who enforces it (issue #32 item 6;
// none in proxy mode), checks the organisation's policy lines (issue #32 item 4), checks [consent] default_duration, warns for the
// obsolete [login] bounds (issue #28), and the server
// serves the pages' one script, /static/local-time.js, under a CSP that allows only it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
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
    'action.github.create_issue': { scope: 'issues:write', approval: 'required', approval_enforced_by: 'gateway' },
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

test('consentd -n refuses approval = required with token_release = gateway unless approval_enforced_by = gateway; not in proxy mode', () => {
  const dir = mkdtempSync(join(tmpdir(), 'consentd-n-'));
  try {
    const cfg = sections(dir);
    delete cfg['action.github.create_issue'].approval_enforced_by;
    const r = check(dir, cfg);
    assert.equal(r.status, 1, r.stderr);
    assert.doesNotMatch(r.stdout, /configuration OK/);
    const refused = r.stderr.split('\n').filter((l) => /approval: required/.test(l));
    assert.equal(refused.length, 1, r.stderr);
    assert.match(refused[0], /c\.ini:\d+: approval: required, but \[resource\.github\] has token_release = gateway: /);
    assert.match(refused[0], /state approval_enforced_by = gateway$/);
    assert.doesNotMatch(r.stderr, /ghproxy|list_issues/);
    // The operator's statement: accepted, and nothing more to say about it.
    const ok = check(dir, sections(dir));
    assert.equal(ok.status, 0, ok.stderr);
    assert.match(ok.stdout, /configuration OK/);
    assert.doesNotMatch(ok.stderr, /approval/);
    // The same holds for a policy line with a condition (consentd never sees the gateway's call).
    const pol = sections(dir);
    pol['action.github.list_issues']['policy.1'] = 'deny if repo == secrets';
    const rp = check(dir, pol);
    assert.equal(rp.status, 1, rp.stderr);
    assert.match(rp.stderr, /c\.ini:\d+: policy\.1: a condition on the call's parameters, but \[resource\.github\] has token_release = gateway/);
  } finally { rmSync(dir, { recursive: true, force: true }); }
});

test('consentd -n checks the policy lines: syntax, operators, value types, numbered keys, route captures', () => {
  const dir = mkdtempSync(join(tmpdir(), 'consentd-n-'));
  try {
    const withLines = (lines) => {
      const cfg = sections(dir);
      cfg['action.ghproxy.create_issue'] = { ...cfg['action.ghproxy.create_issue'], route: 'POST /repos/{owner}/{repo}/issues', ...lines };
      return check(dir, cfg);
    };
    const good = withLines({ 'policy.1': 'deny if path.repo == secrets', 'policy.2': 'approve if body.labels prefix "triage" and body.count <= 1e3',
      'policy.3': 'deny if path.owner in (evil, "bad corp")' });
    assert.equal(good.status, 0, good.stderr);
    assert.match(good.stdout, /configuration OK/);
    for (const [lines, want] of [
      [{ 'policy.1': 'allow' }, /policy\.1: allow: a line starts with approve or deny/],
      [{ 'policy.1': 'deny if n != 3' }, /policy\.1: != 3: expected an operator: == prefix in < <= > >=/],
      [{ 'policy.1': 'deny if body.count > many' }, /policy\.1: body\.count: a numeric bound takes a number/],
      [{ 'policy.1': 'deny if body.title prefix 5' }, /policy\.1: body\.title: prefix takes a string/],
      [{ 'policy.1': 'deny if x == 1e999' }, /policy\.1: 1e999: not a JSON string or number/],
      [{ 'policy.0': 'deny' }, /policy\.0: unknown key/],
      [{ 'policy.1': 'deny if path.branch == main' }, /policy\.1: path\.branch: the route \/repos\/\{owner\}\/\{repo\}\/issues has no \{branch\}/],
    ]) {
      const r = withLines(lines);
      assert.equal(r.status, 1, `${JSON.stringify(lines)}: ${r.stderr}`);
      assert.match(r.stderr, new RegExp(`c\\.ini:\\d+: ${want.source}`), r.stderr);
    }
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

// Issue 35 item 4: what only a copied example holds -- a placeholder secret, a documentation
// host -- is refused by `consentd -n` (and so by the start), each by its line, unless
// [server] development = true; loopback URLs and the development secrets pass without it.
test('consentd -n refuses placeholder secrets and documentation hosts unless development = true', () => {
  const dir = mkdtempSync(join(tmpdir(), 'consentd-n-'));
  const provider = { provider_issuer: 'http://127.0.0.1:9', provider_client_id: 'consentd',
    provider_client_secret: 'a-real-provider-secret' };
  const base = () => ({
    ...baseConfig({ port: 8080, dir }),
    'agent.coder': { allow: 'github:issues:read' },
    'resource.github': { ...provider },
    'scope.github.issues:read': {},
  });
  // [section, key, value, what the refusal names]
  const cases = [
    ['server', 'public_url', 'https://consent.example.com', /public_url: consent\.example\.com in \[server\] is a documentation domain \(RFC 2606\)/],
    ['server', 'public_url', 'https://login.example.org', /documentation domain/],
    ['server', 'public_url', 'https://consent.example.net:8443', /documentation domain/],
    ['server', 'public_url', 'https://consent.test', /consent\.test in \[server\] is under a reserved top-level domain/],
    ['server', 'public_url', 'https://consent.invalid', /reserved top-level domain/],
    ['server', 'public_url', 'https://203.0.113.7', /a documentation address \(RFC 5737\)/],
    ['server', 'public_url', 'https://[2001:db8::7]', /a documentation address \(RFC 3849\)/],
    ['oidc', 'issuer', 'https://idp.example.com', /issuer: idp\.example\.com in \[oidc\]/],
    ['oidc', 'client_secret', 'REPLACE-ME-oidc-client-secret', /client_secret: a placeholder in \[oidc\] \(it says REPLACE-ME\): give the real secret, here or in CONSENTD_OIDC_CLIENT_SECRET/],
    ['oidc', 'client_secret', 'changeme', /a placeholder in \[oidc\] \(it says CHANGEME\)/],
    ['gateway', 'client_secret', 'REPLACE-ME-gateway-client-secret', /client_secret: a placeholder in \[gateway\]/],
    ['gateway', 'client_secret', 'xxxxxxxxxxxxxxxxxxxx', /one character repeated/],
    ['gateway', 'events_uri', 'https://hooks.example.com/consentd', /events_uri: hooks\.example\.com in \[gateway\]/],
    ['resource.github', 'provider_issuer', 'https://github.example', /provider_issuer: github\.example in \[resource\.github\]/],
    ['resource.github', 'provider_client_secret', 'REPLACE-ME-github-client-secret', /CONSENTD_RESOURCE_GITHUB_PROVIDER_CLIENT_SECRET/],
    ['metrics', 'token', '<scraper-token-here>', /token: a placeholder in \[metrics\] \(written as <\.\.\.>\)/],
  ];
  try {
    const ok = check(dir, base());
    assert.equal(ok.status, 0, `the loopback base passes without the switch: ${ok.stderr}`);
    assert.doesNotMatch(ok.stderr, /placeholder|documentation|development/, ok.stderr);
    for (const [sec, key, value, why] of cases) {
      const cfg = base();
      cfg[sec] = { ...(cfg[sec] || {}), [key]: value };
      const r = check(dir, cfg);
      assert.equal(r.status, 1, `[${sec}] ${key} = ${value} passed: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /c\.ini:\d+: /, r.stderr);
      assert.match(r.stderr, why, r.stderr);
      assert.match(r.stderr, /\[server\] development = true allows it in a test setup/, r.stderr);
      if (/secret|token/.test(key)) assert.ok(!r.stderr.includes(value), `the secret's value is printed: ${r.stderr}`);
      // The switch, in the file or from the environment, lets the same file through.
      cfg.server.development = 'true';
      const dev = check(dir, cfg);
      assert.equal(dev.status, 0, `[${sec}] ${key} = ${value} with development = true: ${dev.stderr}`);
      assert.match(dev.stdout, /configuration OK \(development = true: placeholders and documentation hosts allowed/);
      delete cfg.server.development;
      const path = join(dir, 'c.ini');
      writeFileSync(path, toIni(cfg));
      const env = spawnSync(consentdBin, ['-n', '-c', path], { encoding: 'utf8',
        env: { ...process.env, CONSENTD_SERVER_DEVELOPMENT: 'yes' } });
      assert.equal(env.status, 0, `CONSENTD_SERVER_DEVELOPMENT=yes: ${env.stderr}`);
    }
    // The example configuration as shipped: refused, one line per placeholder; it names no
    // file that does not exist and asks for the groups scope that the admin pages need.
    const example = readFileSync(new URL('../../config/consentd.conf.example', import.meta.url), 'utf8');
    const exPath = join(dir, 'example.conf');
    writeFileSync(exPath, example);
    const env = { ...process.env, CONSENTD_KEYS_MASTER_KEY: randomBytes(32).toString('base64'),
      CONSENTD_DATABASE_PATH: join(dir, 'example.db') };
    const ex = spawnSync(consentdBin, ['-n', '-c', exPath], { encoding: 'utf8', env });
    assert.equal(ex.status, 1, ex.stdout + ex.stderr);
    const lines = ex.stderr.trim().split('\n');
    for (const k of ['public_url', 'issuer', 'client_secret', 'provider_issuer', 'provider_client_secret', 'base_url'])
      assert.ok(lines.some((l) => l.includes(`: ${k}: `)), `${k} not refused:\n${ex.stderr}`);
    assert.equal(lines.filter((l) => /: client_secret: a placeholder/.test(l)).length, 2, ex.stderr);
    assert.ok(!ex.stderr.includes('REPLACE-ME-'), ex.stderr);
    const exDev = spawnSync(consentdBin, ['-n', '-c', exPath], { encoding: 'utf8',
      env: { ...env, CONSENTD_SERVER_DEVELOPMENT: 'true' } });
    assert.equal(exDev.status, 0, exDev.stderr);
    assert.doesNotMatch(example, /ARCHITECTURE\.md/);
    assert.match(example, /^scopes = openid profile email groups /m);
  } finally { rmSync(dir, { recursive: true, force: true }); }
});
