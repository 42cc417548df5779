// Flow E against the real development IdP (oidc-provider) and the real
// consentd binary: login, /me, state replay, another browser, IdP errors,
// issuer mix-up, session expiry, logout, open-redirect attempts, the length of
// return_to, and floods of anonymous sign-in starts (issue #12).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { startStack } from '../lib/stack.js';
import { testDb } from '../lib/consentd.js';
import { CookieJar } from '../lib/idplogin.js';
import { consentdLogin, req, postForm, setCookieLines } from '../lib/weblogin.js';

let idp; let c;
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });

async function startPair(session = {}) {
  const s = await startStack({ config: { session } });
  return { idp: s.idp, c: s.c, stop: s.stop };
}

let stack;
before(async () => { stack = await startPair(); ({ idp, c } = stack); });
after(async () => { await stack?.stop(); });
test('a person logs in at the IdP and /me shows who they are', async () => {
  const r = await consentdLogin({ url: c.url, user: 'alice', password: 'alice-password' });
  const auth = new URL(r.loginLocation);
  assert.equal(auth.origin, idp.issuer);
  assert.equal(auth.searchParams.get('code_challenge_method'), 'S256');
  assert.match(auth.searchParams.get('code_challenge'), /^[A-Za-z0-9_-]{43}$/);
  assert.ok(auth.searchParams.get('nonce'));
  assert.ok(auth.searchParams.get('state'));
  assert.equal(auth.searchParams.get('redirect_uri'), `${c.url}/callback`);
  assert.equal(r.final.status, 303);
  assert.equal(r.final.headers.get('location'), '/me');
  const setCookies = setCookieLines(r.final);
  const sess = setCookies.find((s) => s.startsWith('consentd_session='));
  assert.ok(sess, 'a session cookie is set');
  assert.match(sess, /HttpOnly/);
  assert.match(sess, /SameSite=Lax/);
  assert.match(sess, /Path=\//);
  assert.match(sess.split(';')[0], /^consentd_session=[A-Za-z0-9_-]{43}$/);
  const me = await req(r.jar, `${c.url}/me`);
  assert.equal(me.status, 200);
  const html = await me.text();
  assert.match(html, /Alice Example/);
  assert.match(html, /alice@example\.test/);
  assert.equal(me.headers.get('cache-control'), 'no-store');
  // The code travelled only in the callback's query, and is never logged.
  const code = new URL(r.callbackUrl).searchParams.get('code');
  const log = c.nodes.map((n) => readFileSync(join(n.dir, 'access.log'), 'utf8')).join('');   // every node's
  assert.ok(!log.includes(code), 'the authorization code is not in the access log');
  assert.ok(log.includes('"route":"/callback"'), 'the callback is logged by its route');
});

test('/me without a session redirects to login, coming back to /me', async () => {
  const res = await fetch(`${c.url}/me`, { redirect: 'manual' });
  assert.equal(res.status, 303);
  assert.equal(res.headers.get('location'), '/login?return_to=%2Fme');
});

test('a replayed callback (state used once) is refused', async () => {
  const r = await consentdLogin({ url: c.url, user: 'bob', password: 'bob-password' });
  assert.equal(r.final.status, 303);
  const again = await req(r.jar, r.callbackUrl);
  assert.equal(again.status, 400);
  assert.match(await again.text(), /unknown or was already used/);
});

test('a callback arriving in another browser (cookie jar) is refused', async () => {
  const r = await consentdLogin({ url: c.url, user: 'bob', password: 'bob-password', stopAtCallback: true });
  const other = new CookieJar();
  const res = await req(other, r.callbackUrl);
  assert.equal(res.status, 400);
  assert.match(await res.text(), /another browser/);
  assert.equal(setCookieLines(res).find((s) => s.startsWith('consentd_session=')), undefined);
});

async function startedLogin() {
  const jar = new CookieJar();
  const res = await req(jar, `${c.url}/login`);
  const loc = new URL(res.headers.get('location'));
  return { jar, state: loc.searchParams.get('state') };
}

test('an IdP error is said in consentd\'s words, after the issuer check: nothing of the URL is shown', async () => {
  const { jar, state } = await startedLogin();
  const res = await req(jar, `${c.url}/callback?state=${state}&iss=${encodeURIComponent(idp.issuer)}`
    + '&error=access_denied&error_description=%3Cscript%3Ealert(1)%3C%2Fscript%3E');
  assert.equal(res.status, 400);
  const html = await res.text();
  assert.match(html, /Sign-in cancelled/);
  assert.match(html, /You cancelled the sign-in at your identity provider/);
  assert.ok(!html.includes('alert(1)'), 'the error_description is not shown, escaped or not');
  assert.ok(!html.includes('access_denied'), 'nor the raw error code');
});

test('RFC 9207: a missing or foreign iss is refused before the error is shown', async () => {
  for (const iss of [null, 'http://127.0.0.1:1', `${idp.issuer}/`]) {
    const { jar, state } = await startedLogin();
    const q = `state=${state}&error=access_denied${iss ? `&iss=${encodeURIComponent(iss)}` : ''}`;
    const res = await req(jar, `${c.url}/callback?${q}`);
    assert.equal(res.status, 400);
    const html = await res.text();
    assert.match(html, /expected identity provider/);
    assert.ok(!html.includes('access_denied'), 'the IdP error is not shown before iss passed');
  }
});

test('a forged code is refused by the IdP and no session is made', async () => {
  const { jar, state } = await startedLogin();
  const res = await req(jar, `${c.url}/callback?state=${state}&iss=${encodeURIComponent(idp.issuer)}&code=forged`);
  assert.equal(res.status, 400);
  assert.match(await res.text(), /did not accept/);
  assert.equal(jar.get('consentd_session'), undefined);
});

test('return_to must be a same-origin path: no open redirect', async () => {
  for (const bad of ['//evil.example/x', 'https://evil.example/', '/\\evil.example', 'evil', '/ok\r\nX: y']) {
    const res = await fetch(`${c.url}/login?return_to=${encodeURIComponent(bad)}`, { redirect: 'manual' });
    assert.equal(res.status, 400, bad);
  }
  const r = await consentdLogin({ url: c.url, user: 'carol', password: 'carol-password', returnTo: '/me?x' });
  assert.equal(r.final.headers.get('location'), '/me?x');
});

test('return_to is at most 512 bytes: a longer one gets a 400 page that says so, and stores nothing', async () => {
  const longest = `/me?${'r'.repeat(508)}`;                 // 512 bytes
  const ok = await fetch(`${c.url}/login?return_to=${encodeURIComponent(longest)}`, { redirect: 'manual' });
  assert.equal(ok.status, 303);
  await ok.arrayBuffer();
  const rows = () => Number(c.sql('SELECT count(*) FROM login_states'));
  const before = rows();
  for (const bad of [`${longest}x`, `/${'%'.repeat(600)}`, `/${'é'.repeat(300)}`]) {   // 513, 601 and 601 bytes
    const res = await fetch(`${c.url}/login?return_to=${encodeURIComponent(bad)}`, { redirect: 'manual' });
    assert.equal(res.status, 400, `${Buffer.byteLength(bad)} bytes`);
    assert.match(res.headers.get('content-type'), /^text\/html/);
    const html = await res.text();
    assert.match(html, /<h1>Bad request<\/h1>/);
    assert.match(html, /return_to is too long/);
    assert.equal(setCookieLines(res).length, 0, 'no login cookie');
  }
  assert.equal(rows(), before, 'a refused start stores no login state');
});

test('the session id changes at every login (no fixation)', async () => {
  const jar = new CookieJar();
  jar.cookies.set('/\nconsentd_session', { name: 'consentd_session', value: 'A'.repeat(43), path: '/', expires: null });
  const r = await consentdLogin({ url: c.url, user: 'alice', password: 'alice-password', jar });
  assert.notEqual(r.jar.get('consentd_session'), 'A'.repeat(43));
  const first = r.jar.get('consentd_session');
  const r2 = await consentdLogin({ url: c.url, user: 'alice', password: 'alice-password', jar: r.jar });
  assert.notEqual(r2.jar.get('consentd_session'), first);
  // The replaced session is dead.
  const old = new CookieJar();
  old.cookies.set('/\nconsentd_session', { name: 'consentd_session', value: first, path: '/', expires: null });
  assert.equal((await req(old, `${c.url}/me`)).status, 303);
});

test('logout needs the CSRF token and same origin, ends the session, and goes to the IdP with client_id only', async () => {
  const r = await consentdLogin({ url: c.url, user: 'alice', password: 'alice-password' });
  const page = await (await req(r.jar, `${c.url}/me`)).text();
  const form = postForm(page);
  assert.equal(form.action, '/logout');
  const post = (body, headers = {}) => req(r.jar, `${c.url}/logout`, {
    method: 'POST', body, headers: { 'content-type': 'application/x-www-form-urlencoded', origin: c.url, ...headers },
  });
  assert.equal((await post('csrf=' + 'x'.repeat(43))).status, 403, 'wrong CSRF token');
  assert.equal((await post('')).status, 400, 'missing CSRF token');
  assert.equal((await post(`csrf=${form.fields.csrf}`, { origin: 'http://evil.example' })).status, 403, 'cross-origin');
  assert.equal((await req(r.jar, `${c.url}/me`)).status, 200, 'still signed in after refused logouts');
  const res = await post(`csrf=${form.fields.csrf}`);
  assert.equal(res.status, 303);
  const loc = new URL(res.headers.get('location'));
  assert.equal(loc.origin, idp.issuer);
  assert.equal(loc.searchParams.get('client_id'), 'consentd');
  assert.equal(loc.searchParams.get('id_token_hint'), null);
  assert.equal(loc.searchParams.get('post_logout_redirect_uri'), `${c.url}/`);
  assert.equal((await req(r.jar, `${c.url}/me`)).status, 303, 'signed out');
});

test('an idle session expires', async () => {
  const pair = await startPair({ idle_timeout: 2 });
  try {
    const r = await consentdLogin({ url: pair.c.url, user: 'alice', password: 'alice-password' });
    assert.equal((await req(r.jar, `${pair.c.url}/me`)).status, 200);
    await sleep(3500);
    const res = await req(r.jar, `${pair.c.url}/me`);
    assert.equal(res.status, 303);
    assert.match(res.headers.get('location'), /^\/login/);
  } finally {
    await pair.stop();
  }
});

// --- issue #12: anonymous sign-in starts cannot fill the disk ---------------

// Bytes of consentd c's database: a SQLite file and its WAL, or the PostgreSQL database.
function dbBytes(c) {
  if (testDb === 'pg') return Number(c.sql('SELECT pg_database_size(current_database())'));
  const db = join(c.dir, 'consentd.db');
  let n = 0;
  for (const f of [db, `${db}-wal`]) {
    try { n += statSync(f).size; } catch { /* no WAL yet */ }
  }
  return n;
}

// GET url+path n times from localAddress, `concurrency` at a time on kept-alive
// connections (stopping early after deadlineMs), and tallies the answers.
// out.done counts answers as they arrive; out.finished says whether it is over.
function flood({ url, path, n, localAddress, concurrency = 16, deadlineMs = 30000 }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency, localAddress });
  const out = {
    sent: 0, done: 0, status: {}, messages: {}, retryAfter: [], cookieOn429: 0, cookieOn303: 0,
    not429Html: 0, finished: false, ms: 0,
  };
  const t0 = Date.now();
  const one = () => new Promise((resolve, reject) => {
    const r = http.get(`${url}${path}`, { agent, localAddress }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
    });
    r.on('error', reject);
  });
  const worker = async () => {
    while (out.sent < n && Date.now() - t0 < deadlineMs) {
      out.sent += 1;
      const r = await one();
      out.done += 1;
      out.status[r.status] = (out.status[r.status] || 0) + 1;
      const cookie = (r.headers['set-cookie'] || []).some((l) => l.startsWith('consentd_login='));
      if (r.status === 303 && cookie) out.cookieOn303 += 1;
      if (r.status !== 429) continue;
      if (r.headers['set-cookie']) out.cookieOn429 += 1;
      out.retryAfter.push(r.headers['retry-after']);
      if (!/^text\/html/.test(r.headers['content-type'] || '')) out.not429Html += 1;
      const m = r.body.match(/<p>([^<]*)<\/p>/);
      const key = m ? m[1] : `(no message) ${r.body.slice(0, 200)}`;
      out.messages[key] = (out.messages[key] || 0) + 1;
    }
  };
  out.promise = Promise.all(Array.from({ length: concurrency }, worker)).then(() => {
    out.finished = true;
    out.ms = Date.now() - t0;
    agent.destroy();
    return out;
  }, (e) => { agent.destroy(); throw e; });
  return out;
}

const FROM_NETWORK = /^Too many sign-in attempts from your network\. Wait (a minute|\d+ minutes) and try again\.$/;
const FROM_EVERYONE = /^Too many people are signing in right now\. Wait (a minute|\d+ minutes) and try again\.$/;

// Every 429 of a flood: Retry-After in seconds (at most the 300 s a login may
// take), a page for a person, and no cookie.
function assertRefusals(f, message, what) {
  assert.equal(f.cookieOn429, 0, `${what}: a refused start sets no cookie`);
  assert.equal(f.not429Html, 0, `${what}: refusals are HTML pages`);
  for (const ra of f.retryAfter) {
    assert.match(String(ra), /^\d+$/, `${what}: Retry-After ${ra}`);
    assert.ok(Number(ra) >= 1 && Number(ra) <= 300, `${what}: Retry-After ${ra}`);
  }
  for (const [m, k] of Object.entries(f.messages)) assert.match(m, message, `${what}: ${k} answers said ${m}`);
}

test('a flood of anonymous sign-in starts from one address gets 429s and stores 16 states; a person on another address signs in meanwhile; the total is bounded too', async () => {
  const PER_ADDRESS = 16;              // the default [login] max_pending_per_address
  const TOTAL = 40;                    // [login] max_pending, lowered from 10000 to reach it here
  const N = 4000;
  // [limits] address_rate off: this is the [login] bound's test (the rate limit
  // would answer the flood first; ratelimit.test.js holds that one).
  const s = await startStack({ config: { login: { max_pending: TOTAL }, limits: { address_rate: 0 } } });
  try {
    const bytesBefore = dbBytes(s.c);
    // The longest return_to there is, so that every stored state is as big as it can be.
    const path = `/login?return_to=${encodeURIComponent(`/${'a'.repeat(511)}`)}`;
    const f = flood({ url: s.url, path, n: N, localAddress: '127.0.0.1' });
    while (f.done < 300 && !f.finished) await sleep(5);
    // Meanwhile a person on another network signs in, start to finish.
    const r = await consentdLogin({ url: s.url, user: 'alice', password: 'alice-password', localAddress: '127.0.0.2' });
    const floodStillRunning = !f.finished;
    assert.equal(r.final.status, 303);
    assert.equal(r.final.headers.get('location'), '/me');
    const me = await req(r.jar, `${s.url}/me`, { localAddress: '127.0.0.2' });
    assert.equal(me.status, 200);
    assert.match(await me.text(), /Alice Example/);
    await f.promise;
    assert.ok(floodStillRunning, 'the login ran while the flood did');

    assert.equal(f.sent, N, `the flood was not cut short (${f.done} in ${f.ms} ms)`);
    assert.deepEqual(Object.keys(f.status).sort(), ['303', '429']);
    assert.equal(f.status[303], PER_ADDRESS, 'exactly the per-address bound was admitted');
    assert.equal(f.cookieOn303, PER_ADDRESS);
    assert.equal(f.status[429], N - PER_ADDRESS);
    assertRefusals(f, FROM_NETWORK, '127.0.0.1');
    // alice's state was taken by her callback: the flood's are all that is left.
    assert.equal(Number(s.c.sql('SELECT count(*) FROM login_states')), PER_ADDRESS);
    const grew = dbBytes(s.c) - bytesBefore;
    assert.ok(grew < 1024 * 1024, `database + WAL grew by ${grew} bytes (bound: 1 MiB)`);
    console.log(`# flood: ${f.sent} sent in ${f.ms} ms, ${f.status[303]} admitted, ${f.status[429]} × 429, `
      + `${PER_ADDRESS} rows left, db+WAL ${bytesBefore} -> ${dbBytes(s.c)} bytes`);

    // A browser that starts again (its login cookie sent back) replaces its own
    // earlier state instead of taking another place: 40 restarts, 1 row.
    const jar = new CookieJar();
    for (let i = 0; i < 40; i += 1) {
      const res = await req(jar, `${s.url}/login`, { localAddress: '127.0.0.3' });
      assert.equal(res.status, 303, `restart ${i}`);
    }
    assert.equal(Number(s.c.sql('SELECT count(*) FROM login_states')), PER_ADDRESS + 1);

    // The total: more addresses fill the remaining 23 places, then everyone is
    // refused -- with a message that does not blame the person's network.
    let admitted = 0;
    const floods = [];
    for (const ip of ['127.0.0.4', '127.0.0.5', '127.0.0.6']) {
      const g = flood({ url: s.url, path: '/login', n: 100, localAddress: ip });
      await g.promise;
      floods.push(g);
      admitted += g.status[303] || 0;
      assert.ok((g.status[303] || 0) <= PER_ADDRESS, `${ip}: ${g.status[303]} admitted`);
      assert.equal((g.status[303] || 0) + (g.status[429] || 0), 100);
      assertRefusals(g, new RegExp(`${FROM_NETWORK.source}|${FROM_EVERYONE.source}`), ip);
    }
    assert.equal(admitted, TOTAL - PER_ADDRESS - 1);
    assert.equal(floods[2].status[429], 100, 'the third address found no place');
    assertRefusals(floods[2], FROM_EVERYONE, '127.0.0.6');
    assert.equal(Number(s.c.sql('SELECT count(*) FROM login_states')), TOTAL);
    const late = await req(new CookieJar(), `${s.url}/login`, { localAddress: '127.0.0.7' });
    assert.equal(late.status, 429);
    assert.ok(Number(late.headers.get('retry-after')) >= 1);
    assert.match(await late.text(), /Too many people are signing in right now/);
  } finally {
    await s.stop();
  }
});
