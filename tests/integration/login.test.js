// Flow E against the real development IdP (oidc-provider) and the real
// consentd binary: login, /me, state replay, another browser, IdP errors,
// issuer mix-up, session expiry, logout, and open-redirect attempts.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startStack } from '../lib/stack.js';
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
  const log = readFileSync(join(c.dir, 'access.log'), 'utf8');
  assert.ok(!log.includes(code), 'the authorization code is not in the access log');
  assert.ok(log.includes('"path":"/callback"'));
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

test('an IdP error is shown as escaped text, after the issuer check', async () => {
  const { jar, state } = await startedLogin();
  const res = await req(jar, `${c.url}/callback?state=${state}&iss=${encodeURIComponent(idp.issuer)}`
    + '&error=access_denied&error_description=%3Cscript%3Ealert(1)%3C%2Fscript%3E');
  assert.equal(res.status, 400);
  const html = await res.text();
  assert.match(html, /Sign-in cancelled/);
  assert.match(html, /access_denied/);
  assert.ok(!html.includes('<script>alert(1)</script>'));
  assert.ok(html.includes('&lt;script&gt;'));
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
