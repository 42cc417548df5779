// Flow E against the real development IdP (oidc-provider) and the real
// consentd binary: login, /me, state replay, another browser, IdP errors,
// issuer mix-up, session expiry, logout, open-redirect attempts, the length of
// return_to; the sealed login cookie, several tabs, its attackers (tampered,
// moved, expired, replayed), and a flood of anonymous sign-in starts from 640
// addresses that locks nobody out (issue #28).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startStack } from '../lib/stack.js';
import { CookieJar } from '../lib/idplogin.js';
import { consentdLogin, req, postForm, setCookieLines } from '../lib/weblogin.js';
import { loginCookieName, loginCookies, openLoginCookie, sealLoginCookie, stateHash } from '../lib/logincookie.js';
import { gateway } from '../lib/gateway.js';
import { consentConfig } from '../lib/fixtures.js';
import { approveConsent } from '../lib/seed.js';

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
  for (const bad of [`${longest}x`, `/${'%'.repeat(600)}`, `/${'é'.repeat(300)}`]) {   // 513, 601 and 601 bytes
    const res = await fetch(`${c.url}/login?return_to=${encodeURIComponent(bad)}`, { redirect: 'manual' });
    assert.equal(res.status, 400, `${Buffer.byteLength(bad)} bytes`);
    assert.match(res.headers.get('content-type'), /^text\/html/);
    const html = await res.text();
    assert.match(html, /<h1>Bad request<\/h1>/);
    assert.match(html, /return_to is too long/);
    assert.equal(setCookieLines(res).length, 0, 'no login cookie');
  }
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

// --- issue #28: a started sign-in lives in its own sealed cookie ----------

const masterKey = (cc) => readFileSync(join(cc.dir, 'master.key'));
const now = () => Math.floor(Date.now() / 1000);
const cookieOf = (name, value) => ({ name, value, path: '/', expires: null });
const jarWith = (...cookies) => {
  const jar = new CookieJar();
  for (const k of cookies) jar.cookies.set(`/\n${k.name}`, cookieOf(k.name, k.value));
  return jar;
};
const withCookieSet = (jar, name, value) => { jar.cookies.set(`/\n${name}`, cookieOf(name, value)); return jar; };

test('a start sets its own cookie: named by its state, HttpOnly, SameSite=Lax, 300 s, holding sealed what the IdP was sent; nothing is stored', async () => {
  const res = await fetch(`${c.url}/login?return_to=%2Fme%3Fx`, { redirect: 'manual' });
  assert.equal(res.status, 303);
  const auth = new URL(res.headers.get('location'));
  const state = auth.searchParams.get('state');
  const lines = setCookieLines(res);
  assert.equal(lines.length, 1);
  const [pair, ...attrs] = lines[0].split(';').map((x) => x.trim());
  const name = pair.slice(0, pair.indexOf('='));
  const value = pair.slice(pair.indexOf('=') + 1);
  assert.equal(name, loginCookieName(state));
  assert.deepEqual(attrs.sort(), ['HttpOnly', 'Max-Age=300', 'Path=/', 'SameSite=Lax']);
  assert.match(value, /^[A-Za-z0-9_-]{200,900}$/);
  const lc = openLoginCookie(masterKey(c), name, value);
  assert.deepEqual(lc.stateHash, stateHash(state));
  assert.equal(lc.nonce, auth.searchParams.get('nonce'));
  assert.equal(createHash('sha256').update(lc.verifier).digest('base64url'), auth.searchParams.get('code_challenge'));
  assert.equal(lc.returnTo, '/me?x');
  assert.equal(lc.maxAge, -1);
  assert.ok(Math.abs(lc.expiresAt - (now() + 300)) <= 5, `expires_at ${lc.expiresAt}`);
  for (const secret of [lc.verifier, lc.nonce, state]) assert.ok(!value.includes(secret), 'sealed, not in clear');
  assert.equal(Number(c.sql('SELECT count(*) FROM login_states')), 0, 'no login state is stored');
});

test('several tabs sign in at once: each start has its own cookie and both finish', async () => {
  const jar = new CookieJar();
  const one = await consentdLogin({ url: c.url, user: 'carol', password: 'carol-password', jar, returnTo: '/me?tab=1', stopAtCallback: true });
  const two = await consentdLogin({ url: c.url, user: 'carol', password: 'carol-password', jar, returnTo: '/me?tab=2', stopAtCallback: true });
  assert.equal(loginCookies(jar).length, 2);
  const r1 = await req(jar, one.callbackUrl);
  assert.equal(r1.status, 303, (await r1.text()).slice(0, 300));
  assert.equal(r1.headers.get('location'), '/me?tab=1');
  const r2 = await req(jar, two.callbackUrl);
  assert.equal(r2.status, 303, (await r2.text()).slice(0, 300));
  assert.equal(r2.headers.get('location'), '/me?tab=2');
  assert.equal(loginCookies(jar).length, 0, 'each callback deleted its own cookie');
  assert.equal((await req(jar, `${c.url}/me`)).status, 200);
});

test('a browser holds at most 4 starts: a fifth deletes the oldest; unreadable ones go first', async () => {
  const jar = new CookieJar();
  const states = [];
  for (let i = 0; i < 6; i += 1) {
    const res = await req(jar, `${c.url}/login`);
    assert.equal(res.status, 303);
    states.push(new URL(res.headers.get('location')).searchParams.get('state'));
    await sleep(i === 0 ? 1100 : 0);                   // the first is the oldest by a second
    assert.ok(loginCookies(jar).length <= 4, `${loginCookies(jar).length} login cookies after start ${i + 1}`);
  }
  const names = loginCookies(jar).map((k) => k.name).sort();
  assert.equal(names.length, 4);
  assert.ok(!names.includes(loginCookieName(states[0])), 'the oldest start was deleted');
  assert.ok(names.includes(loginCookieName(states[5])), 'the newest start is kept');
  // A damaged cookie is dropped before any live one.
  const live = loginCookies(jar);
  withCookieSet(jar, 'consentd_login_000000000000', 'A'.repeat(300));
  const res = await req(jar, `${c.url}/login`);
  assert.equal(res.status, 303);
  const after = loginCookies(jar).map((k) => k.name);
  assert.ok(!after.includes('consentd_login_000000000000'), 'the damaged cookie went');
  assert.equal(after.length, 4);
  assert.equal(live.filter((k) => after.includes(k.name)).length, 3, 'and one live one: four are left');
});

// A started login (a browser's jar, its state and its cookie) with the IdP's callback URL.
async function startedAtCallback(user = 'bob') {
  const r = await consentdLogin({ url: c.url, user, password: `${user}-password`, stopAtCallback: true });
  const state = new URL(r.callbackUrl).searchParams.get('state');
  const name = loginCookieName(state);
  const value = loginCookies(r.jar).find((k) => k.name === name)?.value;
  assert.ok(value, 'the start\'s cookie is in the jar');
  return { ...r, state, name, value };
}

test('attacker: a tampered login cookie is refused and no session is made', async () => {
  const a = await startedAtCallback();
  const raw = Buffer.from(a.value, 'base64url');
  for (const at of [0, 20, raw.length - 1]) {               // the nonce, the ciphertext, the tag
    const bad = Buffer.from(raw);
    bad[at] ^= 1;
    const jar = withCookieSet(a.jar, a.name, bad.toString('base64url'));
    const res = await req(jar, a.callbackUrl);
    assert.equal(res.status, 400, `byte ${at}`);
    assert.match(await res.text(), /cookie could not be read/);
    assert.equal(jar.get('consentd_session'), undefined);
  }
  for (const junk of ['', 'x', '%%%', 'A'.repeat(1000), a.value.slice(0, 200)]) {
    const res = await req(withCookieSet(jarWith(), a.name, junk), a.callbackUrl);
    assert.equal(res.status, 400, junk.slice(0, 20));
  }
  // Two copies of the cookie: neither is trusted.
  const dup = await fetch(a.callbackUrl, { redirect: 'manual', headers: { cookie: `${a.name}=${a.value}; ${a.name}=${a.value}` } });
  assert.equal(dup.status, 400);
  assert.match(await dup.text(), /cookie could not be read/);
  // The untouched cookie still works: the refusals spent nothing.
  const ok = await req(withCookieSet(a.jar, a.name, a.value), a.callbackUrl);
  assert.equal(ok.status, 303, (await ok.text()).slice(0, 300));
});

test('attacker: a cookie from another browser, moved to the name of this state or kept with its own, does not finish this state', async () => {
  const victim = await startedAtCallback('alice');
  const attacker = await startedAtCallback('bob');
  // The attacker's cookie under the victim's state's name: the name is sealed in.
  let res = await req(jarWith({ name: victim.name, value: attacker.value }), victim.callbackUrl);
  assert.equal(res.status, 400);
  assert.match(await res.text(), /cookie could not be read/);
  // The attacker's cookie under its own name, with the victim's callback: no cookie for this state.
  res = await req(jarWith({ name: attacker.name, value: attacker.value }), victim.callbackUrl);
  assert.equal(res.status, 400);
  assert.match(await res.text(), /started in another browser/);
  // A cookie that opens under this state's name but holds another state's hash
  // (only the master key's holder can make one): refused all the same.
  const other = sealLoginCookie(masterKey(c), victim.name, { expiresAt: now() + 200, stateHash: stateHash(attacker.state) });
  res = await req(jarWith({ name: victim.name, value: other }), victim.callbackUrl);
  assert.equal(res.status, 400);
  assert.match(await res.text(), /This sign-in was started in another browser\. Start again\./);
  // Both still finish in their own browsers.
  assert.equal((await req(victim.jar, victim.callbackUrl)).status, 303);
  assert.equal((await req(attacker.jar, attacker.callbackUrl)).status, 303);
});

test('attacker: an expired state is refused (a cookie whose expiry has passed)', async () => {
  const a = await startedAtCallback();
  const lc = openLoginCookie(masterKey(c), a.name, a.value);
  const stale = sealLoginCookie(masterKey(c), a.name, { ...lc, expiresAt: now() - 1 });
  const res = await req(withCookieSet(a.jar, a.name, stale), a.callbackUrl);
  assert.equal(res.status, 400);
  assert.match(await res.text(), /took too long and expired/);
  assert.equal(a.jar.get('consentd_session'), undefined);
});

test('attacker: a callback replayed with its cookie (copied before it was deleted) is refused; the used state is recorded once', async () => {
  const a = await startedAtCallback('carol');
  const usedBefore = Number(c.sql('SELECT count(*) FROM login_used'));
  const first = await req(a.jar, a.callbackUrl);
  assert.equal(first.status, 303);
  assert.equal(loginCookies(a.jar).length, 0, 'the cookie was deleted');
  assert.equal(Number(c.sql('SELECT count(*) FROM login_used')), usedBefore + 1);
  for (const jar of [withCookieSet(a.jar, a.name, a.value), jarWith({ name: a.name, value: a.value })]) {
    const again = await req(jar, a.callbackUrl);
    assert.equal(again.status, 400);
    assert.match(await again.text(), /unknown or was already used/);
  }
  assert.equal(Number(c.sql('SELECT count(*) FROM login_used')), usedBefore + 1);
});

// GET path from each of `addresses`, `perAddress` times on one kept-alive
// connection per address, `concurrency` addresses at a time; out.done counts
// answers as they arrive, out.status tallies them; out.stop() ends it early
// (a failed test), out.promise settles when it is over.
function floodFrom({ url, path, addresses, perAddress, concurrency = 32 }) {
  const out = { done: 0, status: {}, cookies: 0, finished: false, ms: 0, stopped: false };
  out.stop = () => { out.stopped = true; };
  const t0 = Date.now();
  let next = 0;
  const one = (agent, localAddress) => new Promise((resolve, reject) => {
    const r = http.get(`${url}${path}`, { agent, localAddress }, (res) => {
      res.resume();
      res.on('end', () => resolve(res));
      res.on('error', reject);
    });
    r.on('error', reject);
  });
  const worker = async () => {
    while (next < addresses.length && !out.stopped) {
      const localAddress = addresses[next++];
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1, localAddress });
      try {
        for (let i = 0; i < perAddress && !out.stopped; i += 1) {
          const res = await one(agent, localAddress);
          out.done += 1;
          out.status[res.statusCode] = (out.status[res.statusCode] || 0) + 1;
          if ((res.headers['set-cookie'] || []).some((l) => /^consentd_login_/.test(l))) out.cookies += 1;
        }
      } finally {
        agent.destroy();
      }
    }
  };
  out.promise = Promise.all(Array.from({ length: concurrency }, worker)).then(() => {
    out.finished = true;
    out.ms = Date.now() - t0;
    return out;
  });
  return out;
}

test('16 sign-in starts from each of 640 addresses lock nobody out: a person on another address signs in and approves a consent meanwhile, and the flood stores nothing', async () => {
  const PER_ADDRESS = 16;
  // 127.0.10.0 .. 127.0.12.127: 640 loopback addresses (all of 127/8 is local on Linux).
  const addresses = Array.from({ length: 640 }, (_, i) => `127.0.${10 + Math.floor(i / 256)}.${i % 256}`);
  const TOTAL = addresses.length * PER_ADDRESS;    // 10,240: past the 10,000 [login] max_pending of issue #28
  const s = await startStack({ config: consentConfig() });
  let f = null;
  try {
    f = floodFrom({ url: s.url, path: '/login?return_to=%2Fme', addresses, perAddress: PER_ADDRESS });
    // The person comes once the flood has made more starts than the old bound held.
    while (f.done < 10050 && !f.finished) await sleep(20);
    const floodRunning = !f.finished;
    const r = await consentdLogin({ url: s.url, user: 'alice', password: 'alice-password', localAddress: '127.0.0.2' });
    assert.equal(r.final.status, 303, 'alice signed in');
    assert.equal(r.final.headers.get('location'), '/me');
    const me = await req(r.jar, `${s.url}/me`, { localAddress: '127.0.0.2' });
    assert.equal(me.status, 200);
    assert.match(await me.text(), /Alice Example/);
    // ... and approves what an agent asks for, the thing a lock-out would stop.
    const gw = gateway({ url: s.url });
    const { grant } = await approveConsent({ url: s.url, issuer: s.idp.issuer, gw, jar: r.jar, user: 'alice',
      agentId: 'coder', audience: 'notes', scope: 'read' });
    assert.ok(grant, 'a grant after the approval');
    await f.promise;
    assert.ok(floodRunning, `the sign-in began while the flood ran (${f.done} of ${TOTAL} answered)`);
    assert.deepEqual(f.status, { 303: TOTAL }, 'every start of the flood went to the IdP');
    assert.equal(f.cookies, TOTAL);
    assert.equal(Number(s.c.sql('SELECT count(*) FROM login_states')), 0, 'nothing stored for a start');
    assert.equal(Number(s.c.sql('SELECT count(*) FROM login_used')), 1, 'one used state: alice\'s');
    console.log(`# flood: ${TOTAL} starts from ${addresses.length} addresses in ${f.ms} ms, all 303; `
      + 'alice signed in and approved meanwhile');
  } finally {
    f?.stop();
    await f?.promise.catch(() => {});
    await s.stop();
  }
});
