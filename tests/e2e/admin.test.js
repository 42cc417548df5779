// The admin pages as an admin sees them in Chromium (issue 14, item 7), with realistic data:
// seven consents made the way people make them (two of them by people whose IdP subjects are
// a 36-character UUID and a 43-character Entra-style id) and more than 50 audit entries.
//
// - at a 1280 px window no admin page is wider than the window, and no id breaks over lines
//   (ids are shortened, the full id in a tooltip); at 390 px the page still does not scroll
//   sideways (a table scrolls inside its own labelled region);
// - agents and resources are shown by their configured names, with the id beside them;
// - the audit filter takes a date and time in UTC and leaves out what came before it (the old
//   ?since=<UTC seconds> links give the same page);
// - every control has a label, and each Revoke button names the consent it revokes: found by
//   getByRole('button', { name }), it revokes that consent and no other.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startStack } from '../lib/stack.js';
import { launchBrowser, idpSignIn } from '../lib/browser.js';
import { gateway } from '../lib/gateway.js';
import { consentConfig, GATEWAY_APP } from '../lib/fixtures.js';
import { getIdToken } from '../lib/idplogin.js';
import { consentdLogin } from '../lib/weblogin.js';
import {
  USERS_WITH_LONG_SUBJECTS, UUID_SUBJECT, ENTRA_SUBJECT, approveConsent,
} from '../lib/seed.js';

const shots = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'build', 'e2e');
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const NAMES = { coder: 'Coding assistant', butler: 'Butler', notes: 'Team notes', wiki: 'Wiki' };

// (person, agent, resource, scopes): the first batch, then, from a fresh second on, the second.
const BATCH1 = [
  ['alice', 'coder', 'notes', 'read write'],
  ['alice', 'butler', 'notes', 'read'],
  ['bob', 'coder', 'wiki', 'read'],
  [UUID_SUBJECT, 'coder', 'notes', 'read'],
  [ENTRA_SUBJECT, 'butler', 'notes', 'read write'],
  ['carol', 'coder', 'notes', 'read'],
];
const BATCH2 = [['bob', 'butler', 'notes', 'read write']];

let s; let b; let gw; let page;
const consents = [];          // { user, agent, resource, cid, grant }
let split;                    // UTC seconds: every audit entry of batch 2 is at or after it

const sql = (q) => {
  const r = spawnSync('sqlite3', [join(s.c.dir, 'consentd.db'), q], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim();
};

// Does the gateway still get a grant for c's consent?  (A fresh exchange: grants seen earlier may
// have expired by now.)
async function granted(c) {
  const r = await gw.exchange({ subjectToken: await idToken(c.user), agentId: c.agent, audience: c.resource, scope: c.scope });
  return r.status === 200;
}

async function seed(batch) {
  for (const [user, agentId, audience, scope] of batch) {
    const { jar } = await consentdLogin({ url: s.url, user, password: `${user}-password` });
    const c = await approveConsent({ url: s.url, issuer: s.idp.issuer, gw, jar, user, agentId, audience, scope });
    consents.push({ user, agent: agentId, resource: audience, scope, ...c });
  }
}

before(async () => {
  s = await startStack({
    config: { ...consentConfig(), oidc: { scopes: 'openid profile email groups' } },
    idpOptions: { users: USERS_WITH_LONG_SUBJECTS },
  });
  gw = gateway({ url: s.url });
  mkdirSync(shots, { recursive: true });
  await seed(BATCH1);
  // More grants for the same consents: an audit entry each (grant.issued, jti=<43 characters>).
  for (let i = 0; i < 5; i += 1) {
    for (const [user, agentId, audience, scope] of BATCH1) {
      const g = await gw.exchange({ subjectToken: await idToken(user), agentId, audience, scope });
      assert.equal(g.status, 200, g.text);
    }
  }
  split = Math.floor(Date.now() / 1000) + 1;
  await sleep(split * 1000 - Date.now() + 50);
  await seed(BATCH2);
  assert.ok(Number(sql('SELECT count(*) FROM audit')) > 50, 'more than 50 audit entries');
  assert.ok(Number(sql(`SELECT count(*) FROM audit WHERE ts < ${split}`)) > 0);
  assert.ok(Number(sql(`SELECT count(*) FROM audit WHERE ts >= ${split}`)) > 0);

  b = await launchBrowser({ viewport: { width: 1280, height: 900 } });
  page = await b.newPage();
  await page.goto(`${s.url}/admin`);
  await idpSignIn(page, { user: 'admin', backTo: s.url });
  await page.waitForSelector('#results');
});
after(async () => { await b?.close(); await s?.stop(); });

const idTokens = new Map();
async function idToken(user) {
  if (!idTokens.has(user)) {
    idTokens.set(user, (await getIdToken({
      issuer: s.idp.issuer, ...GATEWAY_APP, user, password: `${user}-password`,
    })).id_token);
  }
  return idTokens.get(user);
}

const entraConsent = () => consents.find((c) => c.user === ENTRA_SUBJECT);
const adminPaths = () => [
  '/admin',
  '/admin/audit',
  `/admin/consents/${entraConsent().cid}`,
  `/admin/revoke?by=user&value=${encodeURIComponent(ENTRA_SUBJECT)}`,
];

// The page's width and every shortened id that takes more than one line box.
async function layout(p) {
  return p.evaluate(() => ({
    scrollWidth: document.documentElement.scrollWidth,
    clientWidth: document.documentElement.clientWidth,
    innerWidth: window.innerWidth,
    brokenIds: [...document.querySelectorAll('code.id, span.id')]
      .filter((el) => el.getClientRects().length > 1 || el.getBoundingClientRect().height > 2 * parseFloat(getComputedStyle(el).lineHeight || '20'))
      .map((el) => el.textContent),
    regionsScrolling: [...document.querySelectorAll('.table-scroll')]
      .filter((el) => el.scrollWidth > el.clientWidth).length,
  }));
}

test('at 1280 px every admin page fits the window, no table scrolls and no id breaks over lines', async (t) => {
  t.diagnostic(`${consents.length} consents, ${sql('SELECT count(*) FROM audit')} audit entries`);
  for (const path of adminPaths()) {
    await page.goto(`${s.url}${path}`);
    const l = await layout(page);
    t.diagnostic(`${path.split('?')[0]}: scrollWidth ${l.scrollWidth} px, clientWidth ${l.clientWidth} px`);
    const name = path.split('?')[0].split('/')[2] || 'search';
    await page.screenshot({ path: join(shots, `admin-1280-${name}.png`), fullPage: true });
    await page.screenshot({ path: join(shots, `admin-1280-${name}-top.png`) });
    assert.equal(l.innerWidth, 1280);
    assert.ok(l.scrollWidth <= 1280, `${path}: ${l.scrollWidth} px wide in a 1280 px window`);
    assert.ok(l.scrollWidth <= l.clientWidth, `${path}: scrollWidth ${l.scrollWidth} > clientWidth ${l.clientWidth}`);
    assert.deepEqual(l.brokenIds, [], `${path}: ids broken over lines`);
    assert.equal(l.regionsScrolling, 0, `${path}: a table scrolls at 1280 px`);
  }
  // The audit page really holds a full page of entries with long values.
  await page.goto(`${s.url}/admin/audit`);
  assert.equal(await page.locator('#audit tbody tr').count(), 50);
  const actor = (await page.locator(`#audit td.actor span[title="user:${ENTRA_SUBJECT}"]`).first().innerText()).replace(/\s+/g, ' ');
  assert.equal(actor, `user ${ENTRA_SUBJECT.slice(0, 8)}…${ENTRA_SUBJECT.slice(-4)}`, 'the long actor is shortened');
});

test('at 390 px the pages do not scroll sideways: the tables scroll inside their labelled region', async () => {
  const narrow = await b.newPage();
  await narrow.setViewportSize({ width: 390, height: 844 });
  try {
    for (const path of adminPaths()) {
      await narrow.goto(`${s.url}${path}`);
      const l = await narrow.evaluate(() => ({
        scrollWidth: document.documentElement.scrollWidth,
        regions: [...document.querySelectorAll('.table-scroll')].map((el) => ({
          scrolls: el.scrollWidth > el.clientWidth,
          label: el.getAttribute('aria-label') || document.getElementById(el.getAttribute('aria-labelledby') || '')?.textContent,
          tabindex: el.getAttribute('tabindex'),
          role: el.getAttribute('role'),
        })),
      }));
      assert.ok(l.scrollWidth <= 390, `${path}: ${l.scrollWidth} px wide in a 390 px window`);
      for (const r of l.regions) {
        assert.equal(r.role, 'region');
        assert.ok(r.label, `${path}: a scrolling region without a name`);
        assert.equal(r.tabindex, '0', `${path}: a scrolling region that the keyboard cannot reach`);
      }
      if (path === '/admin/audit') assert.ok(l.regions[0].scrolls, 'the audit table scrolls in its region');
    }
    await narrow.goto(`${s.url}/admin/audit`);
    await narrow.screenshot({ path: join(shots, 'admin-390-audit.png'), fullPage: true });
  } finally {
    await narrow.close();
  }
});

test('agents and resources are shown by their configured names, the id beside them', async () => {
  await page.goto(`${s.url}/admin`);
  for (const c of consents) {
    const row = page.locator('tr.consent-row', { has: page.locator(`a[href="/admin/consents/${c.cid}"]`) });
    assert.equal(await row.count(), 1, c.cid);
    assert.equal((await row.locator('td.agent').innerText()).replace(/\s+/g, ' ').trim(), `${NAMES[c.agent]} ${c.agent}`);
    assert.equal((await row.locator('td.resource').innerText()).replace(/\s+/g, ' ').trim(), `${NAMES[c.resource]} ${c.resource}`);
    // The shortened consent id and person carry the whole value in their tooltip.
    assert.equal(await row.locator(`a[href="/admin/consents/${c.cid}"]`).getAttribute('title'), c.cid);
    assert.equal(await row.locator(`code.id[title="${c.user}"]`).count(), 1);
  }
  // The search lists agents and resources by name, and searching by one finds its consents.
  const options = await page.locator('select[name=agent] option').allTextContents();
  assert.deepEqual(options, ['any agent', 'Coding assistant (coder)', 'Butler (butler)']);
  await page.selectOption('select[name=agent]', { label: 'Butler (butler)' });
  await page.selectOption('select[name=resource]', { label: 'Team notes (notes)' });
  await Promise.all([page.waitForURL(/agent=butler/), page.click('#search button[type=submit]')]);
  assert.equal(await page.locator('tr.consent-row').count(), consents.filter((c) => c.agent === 'butler').length);
  // The consent page and the bulk confirmation name them too.
  await page.goto(`${s.url}/admin/consents/${entraConsent().cid}`);
  assert.equal((await page.locator('#consent td.agent').innerText()).replace(/\s+/g, ' ').trim(), 'Butler butler');
  assert.equal((await page.locator('#consent td.resource').innerText()).replace(/\s+/g, ' ').trim(), 'Team notes notes');
  await page.goto(`${s.url}/admin/revoke?by=agent&value=coder`);
  assert.match(await page.locator('main').innerText(), /Every consent of the agent Coding assistant coder that is not revoked yet/);
  // Audit rows: by name as well.
  await page.goto(`${s.url}/admin/audit`);
  const agents = await page.locator('#audit .agent').allInnerTexts();
  assert.ok(agents.length >= 40 && agents.every((t) => ['Coding assistant coder', 'Butler butler'].includes(t.replace(/\s+/g, ' ').trim())), agents.join('|'));
  const resources = await page.locator('#audit .resource').allInnerTexts();
  assert.ok(resources.length >= 40 && resources.every((t) => ['Team notes notes', 'Wiki wiki'].includes(t.replace(/\s+/g, ' ').trim())), resources.join('|'));
});

// A datetime-local value (Chromium leaves out ":00" seconds) read as UTC, in seconds.
const utc = (v) => Date.parse(`${v}Z`) / 1000;

test('the audit filter takes a date and time in UTC and leaves out the entries before it', async () => {
  const iso = new Date(split * 1000).toISOString().slice(0, 19);     // YYYY-MM-DDTHH:MM:SS, UTC
  const want = sql(`SELECT seq FROM audit WHERE ts >= ${split} ORDER BY seq`).split('\n').map(Number);
  const before1 = Number(sql(`SELECT max(seq) FROM audit WHERE ts < ${split}`));
  assert.ok(want.length > 0 && want.length < 50, `${want.length} entries after the split`);

  await page.goto(`${s.url}/admin/audit`);
  const since = page.getByLabel('Since (UTC)');
  assert.equal(await since.getAttribute('type'), 'datetime-local');
  assert.match(await page.locator('#since-help').innerText(), /UTC/);
  // Chromium writes a whole minute without ":00", and Playwright's fill refuses a value the
  // input would rewrite: give a whole minute the way the input keeps it.
  await since.fill(iso.endsWith(':00') ? iso.slice(0, 16) : iso);
  await Promise.all([page.waitForURL(/since=/), page.getByRole('button', { name: 'Filter' }).click()]);
  const shown = (await page.locator('#audit tbody tr td:first-child').allInnerTexts()).map(Number);
  assert.deepEqual(shown, want, 'exactly the entries at or after the time');
  assert.ok(!shown.includes(before1), 'the last entry before it is left out');
  for (const dt of await page.locator('#audit time').evaluateAll((ts) => ts.map((t) => t.getAttribute('datetime')))) {
    assert.ok(Date.parse(dt) >= split * 1000, dt);
  }
  assert.equal(utc(await page.getByLabel('Since (UTC)').inputValue()), split, 'the form keeps the time');
  assert.match(await page.locator('#since-shown').innerText(), new RegExp(`${iso.replace('T', ' ')} UTC`));

  // The old links with UTC seconds show the same entries, and the time in the form.
  await page.goto(`${s.url}/admin/audit?since=${split}`);
  assert.deepEqual((await page.locator('#audit tbody tr td:first-child').allInnerTexts()).map(Number), want);
  assert.equal(utc(await page.getByLabel('Since (UTC)').inputValue()), split);
  // A date alone means its midnight, UTC; an impossible date is refused.
  const day = iso.slice(0, 10);
  await page.goto(`${s.url}/admin/audit?since=${day}`);
  assert.equal(utc(await page.getByLabel('Since (UTC)').inputValue()), Date.parse(`${day}T00:00:00Z`) / 1000);
  for (const bad of ['2025-02-29', '2025-13-01', '2025-01-31T24:00', '2025-01-31T09:30Z', 'yesterday']) {
    const r = await page.goto(`${s.url}/admin/audit?since=${encodeURIComponent(bad)}`);
    assert.equal(r.status(), 400, bad);
  }
});

test('every control has a label, and each Revoke button names the consent it revokes', async () => {
  for (const path of adminPaths()) {
    await page.goto(`${s.url}${path}`);
    const unnamed = await page.locator('input:not([type=hidden]), select, textarea, button').evaluateAll((els) => els
      .filter((el) => {
        const label = [...(el.labels || [])].map((l) => l.textContent.trim()).join(' ');
        const own = el.getAttribute('aria-label') || (el.tagName === 'BUTTON' ? el.textContent.trim() : '');
        return !(label || own);
      })
      .map((el) => el.outerHTML));
    assert.deepEqual(unnamed, [], `${path}: controls without a name`);
  }

  await page.goto(`${s.url}/admin`);
  const live = consents.filter((c) => c.live !== false);
  const names = live.map((c) => `Revoke ${NAMES[c.agent]} on ${NAMES[c.resource]} for ${c.user}`);
  assert.equal(new Set(names).size, names.length, 'the fixture has distinct consents');
  for (const name of names) {
    assert.equal(await page.getByRole('button', { name, exact: true }).count(), 1, name);
  }
  const all = await page.getByRole('button', { name: /^Revoke / }).count();
  assert.equal(all, live.length, 'one Revoke button per live consent, each with its own name');
  // The visible word is part of the name (WCAG 2.5.3).
  assert.deepEqual([...new Set(await page.locator('tr.consent-row button').allInnerTexts())], ['Revoke']);

  const target = consents.find((c) => c.user === 'bob' && c.agent === 'coder');
  await Promise.all([
    page.waitForURL(`${s.url}/admin/consents/${target.cid}`),
    page.getByRole('button', { name: `Revoke Coding assistant on Wiki for bob`, exact: true }).click(),
  ]);
  assert.match(await page.locator('#consent .state').innerText(), /revoked/);
  assert.equal(await granted(target), false, 'that consent is revoked');
  for (const c of consents.filter((x) => x !== target)) {
    assert.equal(await granted(c), true, `${c.user} ${c.agent} ${c.resource} untouched`);
  }
  target.live = false;
  await page.goto(`${s.url}/admin`);
  assert.equal(await page.getByRole('button', { name: /^Revoke / }).count(), live.length - 1);
  assert.equal(await page.getByRole('button', { name: 'Revoke Coding assistant on Wiki for bob' }).count(), 0);
});
