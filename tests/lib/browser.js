// Headless Chromium for browser tests: Debian's /usr/bin/chromium driven by playwright-core
// (which never downloads a browser of its own).
//
//   const b = await launchBrowser({ headless = true, executablePath, extraArgs = [], ...contextOptions });
//   b.context       // a playwright BrowserContext (persistent, fresh temporary profile)
//   b.userDataDir   // that profile's directory
//   const page = await b.newPage();
//   await b.close() // closes Chromium and removes the profile
//   await idpSignIn(page, { user, backTo })        // the development IdP's sign-in form
//   await revokeInBrowser(page, { url, cid })      // /me's "Revoke…", then its confirmation
//   await openConsent(page, { v, uri, user })       // a consent link, signed in: the consent page
//   await approveAtProvider(page, { v, user })      // "Allow", the provider's sign-in: "Permission given"
//   await connectInBrowser(page, { v, ask, user })  // the gateway asks, the person connects: the grant
//   const seen = watchTraffic(page)                 // seen.urls, seen.bodies: what the browser got
//
// Flags: --no-sandbox --disable-gpu --disable-quic --disable-background-networking
// --disable-component-update --disable-sync --no-first-run, plus a fresh --user-data-dir
// (passed by launchPersistentContext). CHROMIUM_PATH overrides the executable.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pollExchange } from './gateway.js';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

export async function launchBrowser(opts = {}) {
  const {
    headless = true, executablePath = CHROMIUM_PATH, extraArgs = [], ...contextOptions
  } = opts;
  // Imported here, so that loading this module never fails a test file that needs no browser.
  const { chromium } = await import('playwright-core');
  const userDataDir = mkdtempSync(join(tmpdir(), 'chromium-profile-'));
  let context;
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath,
      headless,
      args: [...CHROMIUM_ARGS, ...extraArgs],
      timeout: 30000,
      ...contextOptions,
    });
  } catch (err) {
    rmSync(userDataDir, { recursive: true, force: true });
    throw err;
  }
  return {
    context,
    userDataDir,
    newPage: () => context.newPage(),
    async close() {
      try { await context.close(); } finally { rmSync(userDataDir, { recursive: true, force: true }); }
    },
  };
}

// The development IdP's sign-in form (the login IdP or the downstream provider): fill it
// for user (password `<user>-password`), submit, and wait until the browser is back under
// backTo (a URL prefix), past any /oauth/callback redirect.
export async function idpSignIn(page, { user, backTo }) {
  await page.waitForSelector('input[name=login]');
  await page.fill('input[name=login]', user);
  await page.fill('input[name=password]', `${user}-password`);
  await Promise.all([
    page.waitForURL((u) => u.href.startsWith(backTo) && !u.pathname.startsWith('/oauth/callback')),
    page.click('button[type=submit]'),
  ]);
}

export default launchBrowser;

// Revokes consent cid in Chromium as a person does on /me: its "Revoke…" link, then
// "Revoke access" on the confirmation page.  Leaves the page on the page that says what
// happened (/me/consents/cid/revoked) and returns its text.
export async function revokeInBrowser(page, { url, cid }) {
  if (!page.url().startsWith(`${url}/me`) || new URL(page.url()).pathname !== '/me') await page.goto(`${url}/me`);
  await Promise.all([
    page.waitForURL(`${url}/me/consents/${cid}/revoke`),
    page.click(`#consent-${cid} a:has-text("Revoke")`),
  ]);
  await Promise.all([
    page.waitForURL(`${url}/me/consents/${cid}/revoked`),
    page.click('button:has-text("Revoke access")'),
  ]);
  return page.textContent('main');
}

// A consent link (uri) opened as user on the vault stack v (tests/lib/vaultstack.js): signed in
// at the login IdP when consentd asks, then on the consent page ("Coding assistant asks for
// your permission").
export async function openConsent(page, { v, uri, user = 'alice' }) {
  await page.goto(uri);
  if (page.url().startsWith(v.idp.issuer)) await idpSignIn(page, { user, backTo: v.url });
  await page.waitForSelector('text=Coding assistant asks for your permission');
}

// On the consent page of a provider's resource: "Allow" leads to the downstream provider, whose
// sign-in as user leads back to consentd's "Permission given".
export async function approveAtProvider(page, { v, user = 'alice' }) {
  await Promise.all([page.waitForURL((u) => u.href.startsWith(v.ds.issuer)), page.click('button[value=approve]')]);
  await idpSignIn(page, { user, backTo: v.url });
  await page.waitForSelector('text=Permission given');
}

// The gateway's exchange ask (v.gw.exchange's arguments) answers consent_required; the person
// connects in the browser (openConsent, approveAtProvider); the exchange polled again answers
// 200 -> that answer ({ status, body }).
export async function connectInBrowser(page, { v, ask, user = 'alice' }) {
  const first = await v.gw.exchange(ask);
  assert.equal(first.body?.error, 'consent_required', JSON.stringify(first.body));
  await openConsent(page, { v, uri: first.body.consent_uri, user });
  await approveAtProvider(page, { v, user });
  const g = await pollExchange(v.gw, ask);
  assert.equal(g.status, 200, JSON.stringify(g.body));
  return g;
}

// Records what the browser on page asks for and gets, to look for leaks: seen.urls, every
// request's URL; seen.bodies, { url, text } of every answer that is not a redirect and is
// HTML, JSON, text or JavaScript.
export function watchTraffic(page) {
  const seen = { urls: [], bodies: [] };
  page.on('request', (r) => seen.urls.push(r.url()));
  page.on('response', async (r) => {
    const ct = r.headers()['content-type'] || '';
    if (r.status() >= 300 && r.status() < 400) return;
    if (/html|json|text|javascript/.test(ct)) {
      try { seen.bodies.push({ url: r.url(), text: await r.text() }); } catch { /* navigated away */ }
    }
  });
  return seen;
}
