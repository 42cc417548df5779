// `make run`'s development setup (scripts/run-dev.sh) as a new user meets it: the script itself
// runs, on free ports with its directory in a temporary DEV_DIR and the already-built binary
// (TEST_CONSENTD_BIN or build/consentd), in its own process group as a terminal's foreground
// job would be.
//   - admin works out of the box: the dev config asks for the `groups` scope, so `admin` reaches
//     /admin;
//   - every capability is configured: a provider resource (the vault: connect at the dev
//     provider, release a token, call the dev API with it; no approval there: issue #32 item 6),
//     and a proxy resource with approval = required (token_release = never, base_url = the dev API) with routes;
//   - the MCP gateway (issue #31): /mcp/tracker, the development MCP server behind consentd,
//     has its protected resource metadata, and the MCP SDK's example client, run with the
//     command the banner prints, signs alice in (through its client-id URL, served by
//     devcimd.js) and lists the tracker's tools;
//   - the config is written once: a generated file (also the older script's) is regenerated
//     while unchanged, an edited one is kept, said so, and used;
//   - SIGINT to the process group (Ctrl-C) stops every process, and the script exits 0.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { consentdBin } from '../lib/consentd.js';
import { getFreePort } from '../lib/ports.js';
import { CookieJar, getIdToken } from '../lib/idplogin.js';
import { consentdLogin, req, postForm } from '../lib/weblogin.js';
import { gateway, pollExchange, TOKEN_EXCHANGE, TT_ACCESS_TOKEN } from '../lib/gateway.js';
import { GATEWAY_APP } from '../lib/fixtures.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SCRIPT = join(ROOT, 'scripts', 'run-dev.sh');
const DEV = mkdtempSync(join(tmpdir(), 'consentd-devrun-'));
const CONF = join(DEV, 'consentd.conf');
const ports = {
  PORT: await getFreePort(), IDP_PORT: await getFreePort(),
  PROVIDER_PORT: await getFreePort(), API_PORT: await getFreePort(),
  MCP_PORT: await getFreePort(), CIMD_PORT: await getFreePort(),
};
const live = new Set();
after(() => {
  for (const d of live) { try { process.kill(-d.pid, 'SIGKILL'); } catch { /* gone */ } }
  rmSync(DEV, { recursive: true, force: true });
});

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });

// Starts run-dev.sh; resolves once it printed its banner -> { pid, out(), exited, url, ... }.
async function startDev(over = {}) {
  const env = {
    ...process.env, ...Object.fromEntries(Object.entries(ports).map(([k, p]) => [k, String(p)])),
    ...over, DEV_DIR: DEV, CONSENTD_BIN: consentdBin, NODE: process.execPath,
  };
  const child = spawn('bash', [SCRIPT], { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (b) => { out += b; });
  child.stderr.on('data', (b) => { out += b; });
  const d = {
    pid: child.pid, out: () => out, url: `http://127.0.0.1:${env.PORT}`,
    exited: new Promise((resolve) => { child.once('exit', (code, signal) => resolve({ code, signal })); }),
  };
  live.add(d);
  const t0 = Date.now();
  let gone = null;
  d.exited.then((st) => { gone = st; });
  while (!out.includes('Press Ctrl-C to stop everything.')) {
    if (gone) throw new Error(`run-dev.sh exited ${JSON.stringify(gone)} before its banner:\n${out}`);
    if (Date.now() - t0 > 40000) throw new Error(`run-dev.sh: no banner after 40 s:\n${out}`);
    await sleep(100);
  }
  const ready = await fetch(`${d.url}/readyz`);
  assert.equal(ready.status, 200, `readyz: ${await ready.text()}`);
  return d;
}

// Ctrl-C: SIGINT to the whole process group; the script exits 0 and nothing is left of it.
async function interrupt(d) {
  process.kill(-d.pid, 'SIGINT');
  let timer;
  const st = await Promise.race([d.exited,
    new Promise((r) => { timer = setTimeout(() => r({ timeout: true }), 25000); })]);
  clearTimeout(timer);
  assert.deepEqual(st, { code: 0, signal: null }, `run-dev.sh after SIGINT:\n${d.out()}`);
  let left = true;
  for (let i = 0; i < 50 && left; i += 1) {
    try { process.kill(-d.pid, 0); await sleep(100); } catch (e) { left = e.code !== 'ESRCH'; }
  }
  assert.equal(left, false, `a process of run-dev.sh's group is still running:\n${d.out()}`);
  live.delete(d);
  for (const p of new Set([...Object.values(ports), Number(new URL(d.url).port)])) {
    await assert.rejects(fetch(`http://127.0.0.1:${p}/`), `nothing listens on ${p} any more`);
  }
  assert.match(d.out(), /^run: stopped$/m);
  assert.doesNotMatch(d.out(), /did not stop|second signal, exiting now/, d.out());
}

const sha256 = (s) => createHash('sha256').update(s).digest('hex');

// The person approves a consent page as drawn (every scope ticked, the preselected duration).
async function approve(jar, url, consentUri) {
  const page = await req(jar, consentUri);
  const html = await page.text();
  assert.equal(page.status, 200, `consent page: ${html.slice(0, 300)}`);
  const form = postForm(html);
  const fields = { ...form.fields, decision: 'approve' };
  for (const m of html.matchAll(/name="(s\d+)"/g)) fields[m[1]] = 'on';
  const dm = html.match(/<select name="duration">[\s\S]*?<option value="(\d+)"[^>]*selected/);
  fields.duration = dm ? dm[1] : '3600';
  const res = await req(jar, new URL(form.action || consentUri, consentUri).href, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: url },
    body: new URLSearchParams(fields).toString(),
  });
  await res.arrayBuffer();
  return { html, res };
}

// Follows redirects from the provider's authorization URL, signing in there when asked, back
// to consentd's done page -> its HTML.
async function connectAtProvider(jar, url, authorizeUrl, user) {
  let next = authorizeUrl;
  for (let i = 0; i < 20; i += 1) {
    const res = await req(jar, next);
    if (res.status >= 300 && res.status < 400) {
      next = new URL(res.headers.get('location'), next).href;
      await res.arrayBuffer();
      continue;
    }
    const body = await res.text();
    if (next.startsWith(`${url}/`)) return body;
    const form = postForm(body);
    assert.ok(form, `a sign-in form at the provider: ${body.slice(0, 300)}`);
    assert.match(body, /Sign in to GitHub \(development\)/);
    const r2 = await req(jar, new URL(form.action, next).href, {
      method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ ...form.fields, login: user, password: `${user}-password` }).toString(),
    });
    assert.equal(r2.status, 303, 'provider sign-in');
    next = new URL(r2.headers.get('location'), next).href;
    await r2.arrayBuffer();
  }
  throw new Error('too many steps at the provider');
}

// The person's side of an MCP client's sign-in, over plain HTTP from the authorization URL the
// client printed: consentd's sign-in, its consent page (approved), the provider's sign-in where
// consentd connects the provider, until the browser is sent to the client's callback, which is
// then opened (delivering the code) -> that callback URL.
async function mcpSignIn(jar, url, authorizeUrl, user, callbackOrigin) {
  let next = authorizeUrl;
  for (let i = 0; i < 30; i += 1) {
    if (new URL(next).origin === callbackOrigin) {
      const cb = await fetch(next);
      assert.equal(cb.status, 200, `the client's callback: ${await cb.text()}`);
      return next;
    }
    if (next.startsWith(`${url}/login`)) {
      const { final } = await consentdLogin({ url, user, password: `${user}-password`, jar,
        returnTo: new URL(next).searchParams.get('return_to') || '/me' });
      next = new URL(final.headers.get('location'), url).href;
      continue;
    }
    const res = await req(jar, next);
    if (res.status >= 300 && res.status < 400) {
      next = new URL(res.headers.get('location'), next).href;
      await res.arrayBuffer();
      continue;
    }
    const html = await res.text();
    const form = postForm(html);
    const link = html.match(/href="(\/authorize\/[^"]+)"/);
    let fields;
    if (form && /name="decision"/.test(html)) {
      fields = { ...form.fields, decision: 'approve' };
      for (const m of html.matchAll(/name="(s\d+)"/g)) fields[m[1]] = 'on';
      const dm = html.match(/<option value="(\d+)"[^>]*selected/);
      if (dm) fields.duration = dm[1];
    } else if (form && 'login' in form.fields) {
      fields = { ...form.fields, login: user, password: `${user}-password` };
    } else if (link) {
      next = new URL(link[1].replace(/&amp;/g, '&'), url).href;
      continue;
    } else {
      assert.fail(`mcpSignIn: stuck at ${next} (${res.status}): ${html.slice(0, 400)}`);
    }
    const action = new URL(form.action || next, next).href;
    const r2 = await req(jar, action, {
      method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: new URL(next).origin },
      body: new URLSearchParams(fields).toString(),
    });
    assert.ok(r2.status >= 300 && r2.status < 400, `after the form at ${next}: ${r2.status} ${(await r2.text()).slice(0, 300)}`);
    next = new URL(r2.headers.get('location'), action).href;
  }
  throw new Error(`mcpSignIn: too many steps (at ${next})`);
}

// Runs the MCP SDK example client's command as the banner prints it; the person signs in
// (mcpSignIn) at the URL it prints; then it is told `list` -> what it printed.
async function sdkExampleClient(d, jar) {
  const line = d.out().split('\n').find((l) => l.includes('simpleOAuthClient.js'));
  assert.ok(line, `the banner prints the SDK example client's command:\n${d.out()}`);
  const [cmd, ...args] = line.trim().split(/\s+/);
  const child = spawn(cmd, args, { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (b) => { out += b; });
  child.stderr.on('data', (b) => { out += b; });
  const until = async (re, what) => {
    for (let i = 0; i < 300 && !re.test(out); i += 1) {
      if (child.exitCode !== null) break;
      await sleep(100);
    }
    assert.match(out, re, `the example client: ${what}:\n${out}`);
  };
  try {
    await until(/Please open this URL in your browser to authorize:\s+(\S+)/, 'an authorization URL');
    const authorizeUrl = out.match(/Please open this URL in your browser to authorize:\s+(\S+)/)[1];
    assert.ok(authorizeUrl.startsWith(`${d.url}/authorize?`), authorizeUrl);
    await until(/OAuth callback server started/, 'its callback listener');
    await mcpSignIn(jar, d.url, authorizeUrl, 'alice', 'http://localhost:8090');
    await until(/mcp> /, 'connected, at its prompt');
    child.stdin.write('list\n');
    await until(/Available tools:[\s\S]*close_issue/, 'the tools');
    child.stdin.write('quit\n');
    return out;
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
}

test('make run: admin, a provider resource, approval and a proxy resource work out of the box; Ctrl-C exits 0', async () => {
  const d = await startDev();
  const { url } = d;
  const gw = gateway({ url });
  try {
    assert.match(d.out(), /^run: wrote a development config: /m);
    const conf = readFileSync(CONF, 'utf8');
    const [first, ...rest] = conf.split('\n');
    assert.match(first, /^; run-dev\.sh sha256: [0-9a-f]{64}$/);
    assert.equal(first.slice(-64), sha256(rest.join('\n')), 'the checksum covers the rest of the file');
    assert.match(conf, /^scopes = openid profile email groups$/m);
    assert.match(d.out(), /configuration OK/);
    // Nothing make run just wrote is warned about (issue 35): the config is a development one.
    assert.match(conf, /^development = true$/m);
    assert.doesNotMatch(d.out(), /^warning:/m, d.out());

    // metadata
    const meta = await (await fetch(`${url}/.well-known/oauth-authorization-server`)).json();
    assert.equal(meta.issuer, url);
    assert.equal(meta.token_endpoint, `${url}/token`);

    // admin: the login asks for groups, and admin (in consent-admins) gets /admin
    const ajar = new CookieJar();
    const a = await consentdLogin({ url, user: 'admin', password: 'admin-password', jar: ajar, returnTo: '/admin' });
    assert.ok(new URL(a.loginLocation).searchParams.get('scope').split(' ').includes('groups'), a.loginLocation);
    assert.equal(a.final.status, 303);
    assert.equal(a.final.headers.get('location'), '/admin');
    const adm = await req(ajar, `${url}/admin`);
    const admHtml = await adm.text();
    assert.equal(adm.status, 200, admHtml.slice(0, 300));
    assert.doesNotMatch(admHtml, /Not an administrator/);

    // the vault: a consent for the provider resource, connected at the dev provider
    const jar = new CookieJar();   // one jar for every port, as a browser keeps 127.0.0.1's cookies
    await consentdLogin({ url, user: 'alice', password: 'alice-password', jar });
    const idToken = (await getIdToken({
      issuer: `http://127.0.0.1:${ports.IDP_PORT}`, ...GATEWAY_APP, user: 'alice', password: 'alice-password',
    })).id_token;
    const askGithub = { subjectToken: idToken, audience: 'github', scope: 'issues:read issues:write', agentId: 'coder' };
    const c1 = await gw.exchange(askGithub);
    assert.equal(c1.body?.error, 'consent_required', c1.text);
    const ap = await approve(jar, url, c1.body.consent_uri);
    assert.match(ap.html, /GitHub \(development\)/);
    assert.equal(ap.res.status, 303);
    const toProvider = ap.res.headers.get('location');
    assert.ok(toProvider.startsWith(`http://127.0.0.1:${ports.PROVIDER_PORT}/`), toProvider);
    assert.match(await connectAtProvider(jar, url, toProvider, 'alice'), /Permission given/);
    assert.ok(jar.get('_session') && jar.get('_provider_session'), 'both IdP sessions kept side by side');
    const g1 = await pollExchange(gw, askGithub);
    assert.equal(g1.status, 200, g1.text);
    const release = (grant, action, extra = {}) => gw.post('/token', {
      grant_type: TOKEN_EXCHANGE, subject_token: grant, subject_token_type: TT_ACCESS_TOKEN,
      requested_token_type: TT_ACCESS_TOKEN, action, ...extra,
    });
    const r1 = await release(g1.body.access_token, 'list_issues');
    assert.equal(r1.status, 200, r1.text);
    const api = `http://127.0.0.1:${ports.API_PORT}`;
    const issues = await fetch(`${api}/repos/acme/widgets/issues`, { headers: { authorization: `Bearer ${r1.body.access_token}` } });
    assert.equal(issues.status, 200);
    assert.equal((await issues.json())[0].title, 'Welcome to the development API');
    assert.equal((await fetch(`${api}/repos/acme/widgets/issues`)).status, 401, 'the API wants a token');
    // Issue #32 item 6: no approval where the token goes to the gateway (consentd could not
    // hold the gateway to the approved call); approval is shown in proxy mode below.
    const r2 = await release(g1.body.access_token, 'create_issue');
    assert.equal(r2.status, 200, r2.text);
    assert.match(conf, /^\[action\.github\.create_issue\]\n(?:[^[\n][^\n]*\n)*approval = none$/m);

    // proxy mode: no grant -> 401; with one: the routed action reaches the API; approval enforced
    const proxied = (path, grant, init = {}) => fetch(`${url}/proxy/ghproxy${path}`, {
      ...init,
      headers: { authorization: `Basic ${Buffer.from('agent-gateway:gateway-dev-secret').toString('base64')}`,
        ...(grant ? { 'consentd-grant': grant } : {}), ...(init.headers || {}) },
    });
    assert.equal((await proxied('/repos/acme/widgets/issues')).status, 401);
    const askProxy = { ...askGithub, audience: 'ghproxy' };
    const c2 = await gw.exchange(askProxy);
    assert.equal(c2.body?.error, 'consent_required', c2.text);
    const ap2 = await approve(jar, url, c2.body.consent_uri);
    assert.equal(ap2.res.status, 303);
    assert.match(await connectAtProvider(jar, url, ap2.res.headers.get('location'), 'alice'), /Permission given/);
    const g2 = await pollExchange(gw, askProxy);
    assert.equal(g2.status, 200, g2.text);
    const list = await proxied('/repos/acme/widgets/issues', g2.body.access_token);
    assert.equal(list.status, 200);
    assert.equal((await list.json())[0].number, 1);
    const post = await proxied('/repos/acme/widgets/issues', g2.body.access_token, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ title: 'Crash' }),
    });
    assert.equal(post.status, 403);
    assert.equal((await post.json()).error, 'approval_required');
    assert.equal((await proxied('/repos/acme/widgets/pulls', g2.body.access_token)).status, 403, 'no route: default deny');

    // the MCP gateway: the development MCP server's tracker behind /mcp/tracker
    const prm = await fetch(`${url}/.well-known/oauth-protected-resource/mcp/tracker`);
    assert.equal(prm.status, 200);
    const pm = await prm.json();
    assert.equal(pm.resource, `${url}/mcp/tracker`);
    assert.deepEqual(pm.authorization_servers, [url]);
    assert.deepEqual([...pm.scopes_supported].sort(), ['issues:read', 'issues:write']);
    const noToken = await fetch(`${url}/mcp/tracker`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(noToken.status, 401);
    assert.match(noToken.headers.get('www-authenticate'), /resource_metadata="[^"]*\/mcp\/tracker"/);
    assert.match(d.out(), new RegExp(`claude mcp add --transport http --client-id local-mcp --callback-port \\d+ tracker ${url}/mcp/tracker`));
    assert.match(d.out(), new RegExp(`"url": "${url}/mcp/tracker"`));
    const mcpUp = `http://127.0.0.1:${ports.MCP_PORT}/mcp`;
    assert.equal((await fetch(mcpUp, { method: 'POST', body: '{}' })).status, 401, 'the MCP server wants the provider\'s token');
    const listed = await sdkExampleClient(d, jar);
    assert.match(listed, /1\. list_issues[\s\S]*2\. create_issue[\s\S]*3\. close_issue/);
  } finally {
    await interrupt(d);
  }
});

// What the run-dev.sh before this one wrote at every start (for these ports and directory).
const v1 = () => `; generated by \`make run\` (scripts/run-dev.sh) for development on 127.0.0.1 -- do not deploy
[server]
listen = 127.0.0.1:${ports.PORT}
public_url = http://127.0.0.1:${ports.PORT}
threads = 0
log = stderr

[database]
path = ${DEV}/consentd.db

[keys]
master_key_file = ${DEV}/master.key

[oidc]
issuer = http://127.0.0.1:${ports.IDP_PORT}
client_id = consentd
client_secret = consentd-dev-secret

[gateway]
id = agent-gateway
client_secret = gateway-dev-secret
subject_audiences = gateway-app

[consent]
interval = 2

[resource.notes]
name = Team notes
max_consent = 2592000

[scope.notes.read]
description = Read your notes

[scope.notes.write]
description = Create and edit notes

[agent.coder]
name = Coding assistant
description = Reads and writes your notes
allow = notes:read notes:write
offline = true
`;

// run-dev.sh --prepare: only the files of DEV_DIR, nothing started -> its output.
function prepare(over = {}) {
  const env = {
    ...process.env, ...Object.fromEntries(Object.entries(ports).map(([k, p]) => [k, String(p)])),
    ...over, DEV_DIR: DEV,
  };
  const r = spawnSync('bash', [SCRIPT, '--prepare'], { env, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  return r.stdout + r.stderr;
}

test('the dev config is written once: regenerated while as generated, kept (and used) once edited', async () => {
  // the older script's file, untouched: replaced by this version's
  writeFileSync(CONF, v1());
  assert.match(prepare(), /^run: regenerated .*consentd\.conf \(it was as generated, unchanged by you\)$/m);
  const gen = readFileSync(CONF, 'utf8');
  assert.match(gen, /^scopes = openid profile email groups$/m);
  assert.equal(prepare(), '', 'as generated and nothing to change: rewritten silently');
  assert.equal(readFileSync(CONF, 'utf8'), gen);

  // an unchanged generated file follows new ports
  const PORT = String(await getFreePort());
  assert.match(prepare({ PORT }), /^run: regenerated /m);
  assert.match(readFileSync(CONF, 'utf8'), new RegExp(`^listen = 127\\.0\\.0\\.1:${PORT}$`, 'm'));
  // ... and the older script's file only when it is exactly that: one changed byte keeps it
  writeFileSync(CONF, v1().replace('interval = 2', 'interval = 3'));
  const kept = prepare();
  assert.match(kept, /^run: using your /m);
  // ... and a kept config without the MCP gateway's development endpoint is pointed out
  assert.match(kept, /^run: note: it has no \[mcp\.tracker\] .*: delete it to get one$/m);

  // edited: kept byte for byte, said so, and in effect
  writeFileSync(CONF, gen);
  const edited = `${gen.replace(/^interval = 2$/m, 'interval = 7')}; my own note\n`;
  writeFileSync(CONF, edited);
  const d = await startDev();
  try {
    assert.match(d.out(), /^run: using your .*consentd\.conf \(delete it to regenerate\)$/m);
    assert.doesNotMatch(d.out(), /run: note:/);
    assert.equal(readFileSync(CONF, 'utf8'), edited);
    const idToken = (await getIdToken({
      issuer: `http://127.0.0.1:${ports.IDP_PORT}`, ...GATEWAY_APP, user: 'bob', password: 'bob-password',
    })).id_token;
    const r = await gateway({ url: d.url }).exchange({ subjectToken: idToken, audience: 'notes', scope: 'read', agentId: 'coder' });
    assert.equal(r.body?.error, 'consent_required', r.text);
    assert.equal(r.body.interval, 7, 'the edited interval is the one in use');
  } finally {
    await interrupt(d);
  }
  assert.equal(readFileSync(CONF, 'utf8'), edited);
  // a kept config that names another port is pointed out
  writeFileSync(CONF, edited.replace(/^listen = .*$/m, 'listen = 127.0.0.1:1'));
  assert.match(prepare(), new RegExp(`^run: note: it does not say 'listen = 127\\.0\\.0\\.1:${ports.PORT}'`, 'm'));
});
