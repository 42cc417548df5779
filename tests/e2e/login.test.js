// Browser: Chromium logs in through the development IdP's page and lands on
// /me.  Everything the browser saw -- every URL, response body, cookie and
// storage entry -- is scanned for tokens, the PKCE verifier and the code.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startStack } from '../lib/stack.js';
import { launchBrowser, watchTraffic } from '../lib/browser.js';
import { openLoginCookie } from '../lib/logincookie.js';

const shots = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'build', 'e2e');
let s; let b;
before(async () => { s = await startStack(); b = await launchBrowser(); });
after(async () => { await b?.close(); await s?.stop(); });

const JWT = /eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+/;

test('a person signs in with Chromium and no token, code or verifier leaks to the browser', async () => {
  const page = await b.newPage();
  const { urls, bodies } = watchTraffic(page);

  await page.goto(`${s.url}/me`);
  // Now at the IdP's login form: the login state (with its verifier) is in the
  // browser's login cookie, sealed under consentd's master key (issue #28).
  await page.waitForSelector('input[name=login]');
  assert.ok(page.url().startsWith(s.idp.issuer), 'sent to the IdP to sign in');
  const started = (await b.context.cookies()).filter((k) => k.name.startsWith('consentd_login_'));
  assert.equal(started.length, 1, 'one login cookie');
  assert.equal(started[0].httpOnly, true);
  assert.equal(started[0].sameSite, 'Lax');
  const { verifier, nonce } = openLoginCookie(readFileSync(join(s.c.dir, 'master.key')), started[0].name, started[0].value);
  assert.match(verifier, /^[A-Za-z0-9_-]{43}$/);
  assert.ok(!started[0].value.includes(verifier), 'the verifier is sealed, not in the clear');

  await page.fill('input[name=login]', 'alice');
  await page.fill('input[name=password]', 'alice-password');
  await Promise.all([page.waitForURL(`${s.url}/me`), page.click('button[type=submit], input[type=submit]')]);
  await page.waitForSelector('text=Alice Example');
  mkdirSync(shots, { recursive: true });
  await page.screenshot({ path: join(shots, 'login-me.png'), fullPage: true });

  const cookies = await b.context.cookies();
  const storage = await page.evaluate(() => JSON.stringify({ l: { ...localStorage }, s: { ...sessionStorage } }));
  const session = cookies.find((c) => c.name === 'consentd_session');
  assert.ok(session, 'a session cookie');
  assert.equal(session.httpOnly, true);
  assert.equal(session.sameSite, 'Lax');

  const callbacks = urls.filter((u) => u.startsWith(`${s.url}/callback`));
  assert.equal(callbacks.length, 1);
  const code = new URL(callbacks[0]).searchParams.get('code');
  assert.ok(code && code.length > 10);

  const everything = [
    ...urls.map((u) => ({ where: `url ${u}`, text: u })),
    ...bodies.map((x) => ({ where: `body of ${x.url}`, text: x.text })),
    ...cookies.map((c) => ({ where: `cookie ${c.name}`, text: `${c.name}=${c.value}` })),
    { where: 'storage', text: storage },
  ];
  for (const { where, text } of everything) {
    assert.doesNotMatch(text, JWT, `no JWT in ${where}`);
    assert.ok(!text.includes(verifier), `no PKCE verifier in ${where}`);
    if (!where.startsWith(`url ${s.url}/callback`)) {
      assert.ok(!text.includes(code), `the code only in the callback URL, not in ${where}`);
    }
  }
  assert.ok(urls.some((u) => u.includes(`nonce=${nonce}`)), 'the nonce went to the IdP');
  // The callback answered with a redirect to a URL without the code, and nothing logged it.
  assert.equal(page.url(), `${s.url}/me`);
  const log = readFileSync(join(s.c.dir, 'access.log'), 'utf8');
  assert.ok(!log.includes(code) && !log.includes(verifier), 'the access log holds neither code nor verifier');
  // The login cookie was spent: the callback deleted it.
  assert.equal(cookies.filter((k) => k.name.startsWith('consentd_login_')).length, 0, 'login cookie deleted');
  await page.close();
});

test('signing out in the browser ends the session at consentd and at the IdP', async () => {
  const page = await b.newPage();
  await page.goto(`${s.url}/me`);
  await page.waitForSelector('text=Alice Example');
  await page.click('text=Sign out');
  // Back from the IdP's sign-out, with the fixed word that makes / say so.
  await page.waitForURL(`${s.url}/?state=signed-out`);
  await page.waitForSelector('h1:has-text("You are signed out")');
  const cookies = await b.context.cookies();
  assert.equal(cookies.find((c) => c.name === 'consentd_session'), undefined, 'session cookie removed');
  await page.goto(`${s.url}/me`);
  // The IdP's session ended too: its login form is shown again.
  await page.waitForSelector('input[name=login]');
  assert.ok(page.url().startsWith(s.idp.issuer));
  await page.close();
});
