// The examples as a new user runs them (issue 35): every ```js block of docs/*.md and
// README.md, and examples/gateway.mjs, against a real consentd and development IdP, from
// the repository's root, where no node_modules is (a block importing an npm package fails
// here as it does in a clean clone).
//   - a block that starts "// node --input-type=module" is run as written, on stdin;
//   - a block that starts "// from examples/X.mjs" must be word for word in that file,
//     which runs here (examples/gateway.mjs below, the others through the blocks).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startStack } from '../lib/stack.js';
import { consentdBin } from '../lib/consentd.js';
import { getFreePort } from '../lib/ports.js';
import { CookieJar, getIdToken, basicAuth } from '../lib/idplogin.js';
import { consentdLogin, req, postForm } from '../lib/weblogin.js';
import { gateway, pollExchange } from '../lib/gateway.js';
import { consentConfig, GATEWAY_APP } from '../lib/fixtures.js';
import { newDpopKey, dpopProof } from '../../examples/gateway-dpop.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });

// The ```js blocks of the documents: [{ file, line, code }].
function jsBlocks() {
  const files = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  const out = [];
  for (const file of files) {
    const text = readFileSync(join(ROOT, file), 'utf8');
    for (const m of text.matchAll(/^( *)```(?:js|javascript|mjs)\n([\s\S]*?)^\1```$/gm)) {
      const line = text.slice(0, m.index).split('\n').length;
      out.push({ file, line, code: m[2].split('\n').map((l) => l.slice(m[1].length)).join('\n') });
    }
  }
  return out;
}

// The person approves a consent page as drawn (every scope ticked) -> the POST's response.
async function approve(jar, url, consentUri) {
  const page = await req(jar, consentUri);
  const html = await page.text();
  assert.equal(page.status, 200, `consent page: ${html.slice(0, 300)}`);
  const form = postForm(html);
  const fields = { ...form.fields, decision: 'approve' };
  for (const m of html.matchAll(/name="(s\d+)"/g)) fields[m[1]] = 'on';
  fields.duration = (html.match(/<option value="(\d+)" selected/) || html.match(/<option value="(\d+)"/))[1];
  const res = await req(jar, new URL(form.action || consentUri, consentUri).href, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: url },
    body: new URLSearchParams(fields).toString(),
  });
  await res.arrayBuffer();
  return res;
}

let s;
let gw;
before(async () => { s = await startStack({ config: consentConfig() }); gw = gateway({ url: s.url }); });
after(async () => { await s?.stop(); });

test('every JavaScript example in docs/ and the README runs as written against consentd', { timeout: 120000 }, async () => {
  const blocks = jsBlocks();
  assert.ok(blocks.length >= 3, `${blocks.length} blocks`);
  assert.ok(!existsSync(join(ROOT, 'node_modules')), 'the root has no node_modules, as a clean clone');

  // A grant for coder's read on notes (alice approves), and a DPoP-bound one with its proof.
  const idToken = (await getIdToken({ issuer: s.idp.issuer, ...GATEWAY_APP, user: 'alice', password: 'alice-password' })).id_token;
  const ask = { subjectToken: idToken, agentId: 'coder', audience: 'notes', scope: 'read' };
  const first = await gw.exchange(ask);
  assert.equal(first.body?.error, 'consent_required', first.text);
  const { jar } = await consentdLogin({ url: s.url, user: 'alice', password: 'alice-password' });
  assert.equal((await approve(jar, s.url, first.body.consent_uri)).status, 200);
  const g = await pollExchange(gw, ask);
  assert.equal(g.status, 200, g.text);
  const key = await newDpopKey('ES256');
  const bound = await gw.post('/token', {
    grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange', subject_token: idToken,
    subject_token_type: 'urn:ietf:params:oauth:token-type:id_token', agent_id: 'coder', audience: 'notes', scope: 'read',
  }, basicAuth('agent-gateway', 'gateway-dev-secret'), { dpop: await dpopProof({ key, htm: 'POST', htu: `${s.url}/token` }) });
  assert.equal(bound.status, 200, bound.text);
  assert.equal(bound.body.token_type, 'DPoP');
  const requestUrl = 'http://127.0.0.1:9/notes/1';
  const dpop = await dpopProof({ key, htm: 'GET', htu: requestUrl, accessToken: bound.body.access_token });
  const env = { PATH: process.env.PATH, CONSENTD_URL: s.url, GRANT: g.body.access_token, REQUEST_URL: requestUrl, DPOP: dpop };
  const boundEnv = { ...env, GRANT: bound.body.access_token };

  let ran = 0;
  for (const b of blocks) {
    const where = `${b.file}:${b.line}`;
    const from = /^\/\/ from (examples\/[\w.-]+\.mjs)\b/.exec(b.code);
    if (from) {
      const body = b.code.split('\n').slice(1).join('\n').trimEnd();
      assert.ok(readFileSync(join(ROOT, from[1]), 'utf8').includes(body), `${where}: not word for word in ${from[1]}`);
      continue;
    }
    assert.match(b.code, /^\/\/ node --input-type=module/, `${where}: a block must say how to run it, or which file it is from`);
    const r = spawnSync(process.execPath, ['--input-type=module'], {
      cwd: ROOT, input: b.code, encoding: 'utf8', timeout: 30000, env: /DPOP/.test(b.code) ? boundEnv : env,
    });
    assert.equal(r.status, 0, `${where} failed:\n${r.stderr}`);
    assert.ok(r.stdout.trim().length > 0, `${where} printed nothing`);
    // And it checks what it says it checks: a tampered grant is refused.
    const bad = { ...(/DPOP/.test(b.code) ? boundEnv : env) };
    bad.GRANT = `${bad.GRANT.slice(0, -4)}AAAA`;
    const refused = spawnSync(process.execPath, ['--input-type=module'], { cwd: ROOT, input: b.code, encoding: 'utf8', timeout: 30000, env: bad });
    assert.notEqual(refused.status, 0, `${where} accepted a tampered grant: ${refused.stdout}`);
    ran++;
  }
  assert.ok(ran >= 2, `${ran} blocks ran`);
});

test('examples/gateway.mjs against `make run`: the link, the person\'s approval at consentd and the provider, the grant verified, the issues through the proxy', { timeout: 180000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'consentd-example-'));
  const ports = { PORT: await getFreePort(), IDP_PORT: await getFreePort(), PROVIDER_PORT: await getFreePort(), API_PORT: await getFreePort() };
  const url = `http://127.0.0.1:${ports.PORT}`;
  const dev = spawn('bash', [join(ROOT, 'scripts', 'run-dev.sh')], {
    env: { ...process.env, ...Object.fromEntries(Object.entries(ports).map(([k, p]) => [k, String(p)])),
      DEV_DIR: dir, CONSENTD_BIN: consentdBin, NODE: process.execPath },
    detached: true, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let devOut = '';
  dev.stdout.on('data', (d) => { devOut += d; });
  dev.stderr.on('data', (d) => { devOut += d; });
  const devExit = new Promise((r) => { dev.once('exit', (code) => r(code)); });
  let ex = null;
  try {
    for (let t = 0; !devOut.includes('Press Ctrl-C to stop everything.'); t += 100) {
      if (t > 40000) throw new Error(`make run did not come up:\n${devOut}`);
      await sleep(100);
    }
    // As the file's header says: the person's ID token from the development IdP, then run it.
    const tok = spawnSync(process.execPath, [join(ROOT, 'tests/idp/get-id-token.js'), '--issuer', `http://127.0.0.1:${ports.IDP_PORT}`, '--user', 'carol'],
      { cwd: ROOT, encoding: 'utf8' });
    assert.equal(tok.status, 0, tok.stderr);
    ex = spawn(process.execPath, ['examples/gateway.mjs'], {
      cwd: ROOT, env: { PATH: process.env.PATH, ID_TOKEN: tok.stdout.trim(), CONSENTD_URL: url }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    ex.stdout.on('data', (d) => { out += d; });
    ex.stderr.on('data', (d) => { err += d; });
    const exExit = new Promise((r) => { ex.once('exit', (code) => r(code)); });
    let link;
    for (let t = 0; !(link = /^Open this link to decide: (\S+)$/m.exec(out)); t += 100) {
      if (t > 30000 || ex.exitCode !== null) throw new Error(`no link from the example:\n${out}${err}`);
      await sleep(100);
    }
    assert.equal(new URL(link[1]).origin, url);
    // carol decides in her browser: signs in at consentd, approves, signs in at the provider.
    const jar = new CookieJar();
    await consentdLogin({ url, user: 'carol', password: 'carol-password', jar });
    const res = await approve(jar, url, link[1]);
    assert.equal(res.status, 303, 'to the provider');
    let next = new URL(res.headers.get('location'), url).href;
    let done = null;
    for (let i = 0; i < 20 && done === null; i++) {
      const r = await req(jar, next);
      if (r.status >= 300 && r.status < 400) { next = new URL(r.headers.get('location'), next).href; await r.arrayBuffer(); continue; }
      const body = await r.text();
      if (next.startsWith(`${url}/`)) { done = body; break; }
      const form = postForm(body);
      assert.ok(form, `a sign-in form at the provider: ${body.slice(0, 300)}`);
      const r2 = await req(jar, new URL(form.action, next).href, {
        method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ ...form.fields, login: 'carol', password: 'carol-password' }).toString(),
      });
      next = new URL(r2.headers.get('location'), next).href;
      await r2.arrayBuffer();
    }
    assert.match(done, /Permission given/);
    let timer;
    const code = await Promise.race([exExit, new Promise((r) => { timer = setTimeout(() => r('timeout'), 60000); })]);
    clearTimeout(timer);
    assert.equal(code, 0, `the example:\n${out}${err}`);
    assert.match(out, /^A grant for carol, issues:read on urn:consentd:resource:ghproxy, until \d{4}-/m, out);
    assert.match(out, /^#1 Welcome to the development API$/m, out);
  } finally {
    if (ex && ex.exitCode === null) ex.kill('SIGKILL');
    try { process.kill(-dev.pid, 'SIGINT'); } catch { /* gone */ }
    let timer;
    const code = await Promise.race([devExit, new Promise((r) => { timer = setTimeout(() => r('timeout'), 25000); })]);
    clearTimeout(timer);
    if (code === 'timeout') { try { process.kill(-dev.pid, 'SIGKILL'); } catch { /* gone */ } }
    rmSync(dir, { recursive: true, force: true });
  }
});
