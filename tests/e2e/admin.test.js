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
//
// Issue 35 (item 7), at 1280 and at 375 px, every page checked with axe-core:
// - "Revoke…" in the list opens a confirmation that needs a reason; without one (the browser's
//   own check taken away, as without JavaScript or with an old browser) the server refuses and
//   revokes nothing; a bulk revocation without a reason is refused the same way;
// - the header names the signed-in admin and signs out; /me links an admin to /admin (and no
//   one else); a person is found by email or name;
// - at 375 px no page scrolls sideways and every control is inside the window;
// - the audit log is newest first, a page at a time, filtered by a choice of actions, and its
//   chain is verified from the page.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join, dirname } from 'node:path';
import AxeBuilder from '@axe-core/playwright';
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
    config: {
      ...consentConfig(),
      oidc: { scopes: 'openid profile email groups' },
      // A resource named as operators name them: its option is wider than a phone.
      'resource.crm': { name: 'Customer relationship management, production tenant (EU)', max_consent: 86400 },
      'scope.crm.read': { description: 'Read customer records' },
    },
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
  `/admin/consents/${entraConsent().cid}/revoke`,
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
    const name = path.split('?')[0].split('/').slice(2).filter((x) => x !== entraConsent().cid).join('-') || 'search';
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
  assert.equal(await page.locator('#audit tbody tr').count(), 25);
  await page.goto(`${s.url}/admin/audit?action=consent.granted`);
  const actor = (await page.locator(`#audit td.actor span[title="user:${ENTRA_SUBJECT}"]`).first().innerText()).replace(/\s+/g, ' ');
  assert.equal(actor, `user ${ENTRA_SUBJECT.slice(0, 8)}…${ENTRA_SUBJECT.slice(-4)}`, 'the long actor is shortened');
});

test('at 375 px the pages do not scroll sideways and every control is in the window; wide tables scroll inside their labelled region', async () => {
  const narrow = await b.newPage();
  await narrow.setViewportSize({ width: 375, height: 812 });
  try {
    for (const path of adminPaths()) {
      await narrow.goto(`${s.url}${path}`);
      const l = await narrow.evaluate(() => ({
        scrollWidth: document.documentElement.scrollWidth,
        innerWidth: window.innerWidth,
        // Every control a person uses, outside a region that scrolls on its own.
        outside: [...document.querySelectorAll('button, a.button, select, input:not([type=hidden]), nav a')]
          .filter((el) => !el.closest('.table-scroll') || getComputedStyle(el.closest('.table-scroll')).overflowX === 'visible'
            || el.closest('.table-scroll').scrollWidth <= el.closest('.table-scroll').clientWidth)
          .map((el) => { const r = el.getBoundingClientRect(); return { what: el.outerHTML.slice(0, 80), left: r.left, right: r.right }; })
          .filter((r) => r.left < 0 || r.right > window.innerWidth),
        revokes: [...document.querySelectorAll('#results a.button')].map((el) => el.getBoundingClientRect().right),
        regions: [...document.querySelectorAll('.table-scroll')].map((el) => ({
          scrolls: el.scrollWidth > el.clientWidth,
          label: el.getAttribute('aria-label') || document.getElementById(el.getAttribute('aria-labelledby') || '')?.textContent,
          tabindex: el.getAttribute('tabindex'),
          role: el.getAttribute('role'),
        })),
      }));
      assert.equal(l.innerWidth, 375);
      assert.ok(l.scrollWidth <= 375, `${path}: ${l.scrollWidth} px wide in a 375 px window`);
      assert.deepEqual(l.outside, [], `${path}: controls outside the window`);
      for (const r of l.regions) {
        assert.equal(r.role, 'region');
        assert.ok(r.label, `${path}: a scrolling region without a name`);
        assert.equal(r.tabindex, '0', `${path}: a scrolling region that the keyboard cannot reach`);
      }
      if (path === '/admin') {
        assert.ok(l.revokes.length >= 6, `${l.revokes.length} Revoke links`);
        assert.ok(l.revokes.every((right) => right <= 375), `Revoke links at ${l.revokes.join(', ')} px`);
        assert.equal(l.regions[0].scrolls, false, 'the results do not scroll sideways: one block per consent');
      }
      if (path === '/admin/audit') assert.ok(l.regions[0].scrolls, 'the audit table scrolls in its region');
    }
    await narrow.goto(`${s.url}/admin`);
    await narrow.screenshot({ path: join(shots, 'admin-375-search.png'), fullPage: true });
    // The resource list is no wider than the form it is in.
    const sel = await narrow.evaluate(() => {
      const el = document.querySelector('select[name=resource]');
      return { right: el.getBoundingClientRect().right, form: document.getElementById('search').getBoundingClientRect().right };
    });
    assert.ok(sel.right <= sel.form, `the resource select ends at ${sel.right} px, its form at ${sel.form} px`);
    await narrow.goto(`${s.url}/admin/audit`);
    await narrow.screenshot({ path: join(shots, 'admin-375-audit.png'), fullPage: true });
  } finally {
    await narrow.close();
  }
});

// axe-core on every admin page at both widths: no serious or critical violation.
test('axe-core finds no serious or critical violation on any admin page at 1280 and at 375 px', async () => {
  const found = [];
  for (const width of [1280, 375]) {
    const p = await b.newPage();
    await p.setViewportSize({ width, height: 900 });
    try {
      for (const path of [...adminPaths(), '/admin/audit?action=consent.granted']) {
        await p.goto(`${s.url}${path}`);
        const r = await new AxeBuilder({ page: p }).analyze();
        assert.ok(r.passes.length > 10, `${path}: axe ran`);
        for (const v of r.violations.filter((x) => ['serious', 'critical'].includes(x.impact))) {
          for (const n of v.nodes) found.push(`${width} px ${path}: ${v.id} (${v.impact}) ${v.help} -- ${n.target.join(' ')}`);
        }
      }
      // The verification's result page too.
      await p.goto(`${s.url}/admin/audit`);
      await Promise.all([p.waitForURL(`${s.url}/admin/audit/verify`), p.getByRole('button', { name: 'Verify the chain' }).click()]);
      const r = await new AxeBuilder({ page: p }).analyze();
      for (const v of r.violations.filter((x) => ['serious', 'critical'].includes(x.impact))) {
        for (const n of v.nodes) found.push(`${width} px verify: ${v.id} (${v.impact}) ${v.help} -- ${n.target.join(' ')}`);
      }
    } finally {
      await p.close();
    }
  }
  assert.deepEqual(found, []);
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
  assert.ok(agents.length >= 20 && agents.every((t) => ['Coding assistant coder', 'Butler butler'].includes(t.replace(/\s+/g, ' ').trim())), agents.join('|'));
  const resources = await page.locator('#audit .resource').allInnerTexts();
  assert.ok(resources.length >= 20 && resources.every((t) => ['Team notes notes', 'Wiki wiki'].includes(t.replace(/\s+/g, ' ').trim())), resources.join('|'));
});

// A datetime-local value (Chromium leaves out ":00" seconds) read as UTC, in seconds.
const utc = (v) => Date.parse(`${v}Z`) / 1000;

test('the audit filter takes a date and time in UTC and leaves out the entries before it', async () => {
  const iso = new Date(split * 1000).toISOString().slice(0, 19);     // YYYY-MM-DDTHH:MM:SS, UTC
  const want = sql(`SELECT seq FROM audit WHERE ts >= ${split} ORDER BY seq`).split('\n').map(Number);
  const before1 = Number(sql(`SELECT max(seq) FROM audit WHERE ts < ${split}`));
  assert.ok(want.length > 0 && want.length < 25, `${want.length} entries after the split: one page`);

  await page.goto(`${s.url}/admin/audit`);
  const since = page.getByLabel('Since (UTC)');
  assert.equal(await since.getAttribute('type'), 'datetime-local');
  assert.match(await page.locator('#since-help').innerText(), /UTC/);
  // Chromium writes a whole minute without ":00", and Playwright's fill refuses a value the
  // input would rewrite: give a whole minute the way the input keeps it.
  await since.fill(iso.endsWith(':00') ? iso.slice(0, 16) : iso);
  await Promise.all([page.waitForURL(/since=/), page.getByRole('button', { name: 'Filter' }).click()]);
  const shown = (await page.locator('#audit tbody tr td:first-child').allInnerTexts()).map(Number);
  assert.deepEqual(shown, [...want].reverse(), 'exactly the entries at or after the time, newest first');
  assert.ok(!shown.includes(before1), 'the last entry before it is left out');
  for (const dt of await page.locator('#audit time').evaluateAll((ts) => ts.map((t) => t.getAttribute('datetime')))) {
    assert.ok(Date.parse(dt) >= split * 1000, dt);
  }
  assert.equal(utc(await page.getByLabel('Since (UTC)').inputValue()), split, 'the form keeps the time');
  assert.match(await page.locator('#since-shown').innerText(), new RegExp(`${iso.replace('T', ' ')} UTC`));

  // The old links with UTC seconds show the same entries, and the time in the form.
  await page.goto(`${s.url}/admin/audit?since=${split}`);
  assert.deepEqual((await page.locator('#audit tbody tr td:first-child').allInnerTexts()).map(Number), [...want].reverse());
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
  const names = live.map((c) => `Revoke ${NAMES[c.agent]} on ${NAMES[c.resource]} for ${c.user}…`);
  assert.equal(new Set(names).size, names.length, 'the fixture has distinct consents');
  for (const name of names) {
    assert.equal(await page.getByRole('link', { name, exact: true }).count(), 1, name);
  }
  const all = await page.getByRole('link', { name: /^Revoke / }).count();
  assert.equal(all, live.length, 'one Revoke link per live consent, each with its own name');
  assert.equal(await page.locator('#results form').count(), 0, 'no form in the list revokes anything');
  // The visible word is part of the name (WCAG 2.5.3).
  assert.deepEqual([...new Set(await page.locator('tr.consent-row a.button').allInnerTexts())], ['Revoke…']);
});

test('"Revoke…" in the list opens a confirmation that needs a reason; the server refuses one without it, and revokes nothing', async () => {
  const target = consents.find((c) => c.user === 'bob' && c.agent === 'coder');
  const others = consents.filter((x) => x !== target && x.live !== false);
  await page.goto(`${s.url}/admin`);
  await Promise.all([
    page.waitForURL(`${s.url}/admin/consents/${target.cid}/revoke`),
    page.getByRole('link', { name: 'Revoke Coding assistant on Wiki for bob…', exact: true }).click(),
  ]);
  assert.equal(await granted(target), true, 'the link alone revokes nothing');
  assert.match(await page.locator('h1').innerText(), /Revoke this consent\?/);
  const reason = page.getByLabel('Reason (the person reads it on their page)');
  assert.equal(await reason.getAttribute('required'), '');
  // The browser's own check: an empty reason does not even leave the page.
  await page.getByRole('button', { name: 'Revoke Coding assistant on Wiki for bob', exact: true }).click();
  assert.equal(page.url(), `${s.url}/admin/consents/${target.cid}/revoke`);
  assert.equal(await reason.evaluate((el) => el.validity.valueMissing), true);
  // Without it (no JavaScript needed to get here: an old browser, a hand-made form), the server
  // refuses a reason of spaces: 400, the confirmation again, saying why.
  await reason.evaluate((el) => { el.removeAttribute('required'); el.value = '   '; });
  const [refusal] = await Promise.all([
    page.waitForResponse((r) => r.url() === `${s.url}/admin/consents/${target.cid}/revoke` && r.request().method() === 'POST'),
    page.getByRole('button', { name: 'Revoke Coding assistant on Wiki for bob', exact: true }).click(),
  ]);
  assert.equal(refusal.status(), 400);
  await page.waitForSelector('#reason-error');
  assert.equal(await page.locator('#reason-error').innerText(), 'Give a reason: the person reads it on their page. Nothing was revoked.');
  assert.equal(await page.getByLabel('Reason (the person reads it on their page)').getAttribute('aria-invalid'), 'true');
  assert.equal(await granted(target), true, 'nothing revoked');
  await page.screenshot({ path: join(shots, 'admin-1280-revoke-refused.png'), fullPage: true });
  // With a reason, that consent and no other.
  await page.getByLabel('Reason (the person reads it on their page)').fill('agent retired');
  await Promise.all([
    page.waitForURL(`${s.url}/admin/consents/${target.cid}`),
    page.getByRole('button', { name: 'Revoke Coding assistant on Wiki for bob', exact: true }).click(),
  ]);
  assert.match(await page.locator('#consent .state').innerText(), /revoked/);
  assert.match(await page.locator('#consent').innerText(), /agent retired/);
  assert.equal(await granted(target), false, 'that consent is revoked');
  for (const c of others) assert.equal(await granted(c), true, `${c.user} ${c.agent} ${c.resource} untouched`);
  target.live = false;
  await page.goto(`${s.url}/admin`);
  assert.equal(await page.getByRole('link', { name: /^Revoke / }).count(), others.length);
  assert.equal(await page.getByRole('link', { name: 'Revoke Coding assistant on Wiki for bob…' }).count(), 0);
});

test('a bulk revocation without a reason is refused and revokes nothing', async () => {
  const carol = consents.filter((c) => c.user === 'carol' && c.live !== false);
  assert.ok(carol.length > 0);
  await page.goto(`${s.url}/admin`);
  await page.selectOption('#bulk select[name=by]', 'user');
  await page.fill('#bulk input[name=value]', 'carol');
  await Promise.all([page.waitForURL(/\/admin\/revoke\?/), page.click('#bulk button[type=submit]')]);
  const reason = page.getByLabel('Reason (each person reads it on their page)');
  await reason.evaluate((el) => el.removeAttribute('required'));
  const [refusal] = await Promise.all([
    page.waitForResponse((r) => r.url() === `${s.url}/admin/revoke` && r.request().method() === 'POST'),
    page.getByRole('button', { name: `Revoke ${carol.length} consent(s)` }).click(),
  ]);
  assert.equal(refusal.status(), 400);
  await page.waitForSelector('#reason-error');
  assert.match(await page.locator('#reason-error').innerText(), /Give a reason/);
  assert.match(await page.locator('#count').innerText(), new RegExp(`This will revoke ${carol.length} consent`));
  for (const c of carol) assert.equal(await granted(c), true, 'nothing revoked');
  assert.equal(await page.locator('#revoked').count(), 0);
});

test('the header names the signed-in admin; /me links an admin to /admin; a person is found by email or by name', async () => {
  for (const path of adminPaths()) {
    await page.goto(`${s.url}${path}`);
    const who = page.locator('header #signed-in');
    assert.match((await who.innerText()).replace(/\s+/g, ' '), /Signed in as Admin Example admin@example\.test/, path);
    assert.equal(await who.getByRole('button', { name: 'Sign out' }).count(), 1, path);
    assert.equal(await page.getByRole('navigation', { name: 'Administration' }).getByRole('link', { name: 'Audit log' }).count(), 1);
  }
  await page.goto(`${s.url}/me`);
  await Promise.all([page.waitForURL(`${s.url}/admin`), page.getByRole('link', { name: 'Admin pages' }).click()]);
  // By email, by name (any case): the person's consents, and only theirs.
  const erin = consents.filter((c) => c.user === ENTRA_SUBJECT).map((c) => c.cid).sort();
  for (const q of ['erin@example.test', 'Erin Entra', 'ERIN ENTRA']) {
    await page.goto(`${s.url}/admin`);
    await page.getByLabel('Person (subject, email or name)').fill(q);
    await Promise.all([page.waitForURL(/user=/), page.getByRole('button', { name: 'Search' }).click()]);
    const hrefs = await page.locator('tr.consent-row td:first-child a').evaluateAll((as) => as.map((a) => a.getAttribute('href').split('/').pop()));
    assert.deepEqual(hrefs.sort(), erin, q);
  }
});

test('a person\'s /me has no link to /admin', async () => {
  const b2 = await launchBrowser({ viewport: { width: 375, height: 812 } });
  try {
    const p = await b2.newPage();
    await p.goto(`${s.url}/me`);
    await idpSignIn(p, { user: 'alice', backTo: s.url });
    await p.waitForSelector('h1');
    assert.equal(await p.getByRole('link', { name: 'Admin pages' }).count(), 0);
    assert.equal(await p.locator('a[href="/admin"]').count(), 0);
  } finally {
    await b2.close();
  }
});

test('the audit log: newest first, a page at a time, an action chosen from a list, and the chain verified', async (t) => {
  const max = Number(sql('SELECT max(seq) FROM audit'));
  await page.goto(`${s.url}/admin/audit`);
  const seqs = async () => (await page.locator('#audit tbody tr td:first-child').allInnerTexts()).map(Number);
  const p1 = await seqs();
  assert.equal(p1[0], max, 'the newest entry on top');
  assert.deepEqual(p1, [...p1].sort((x, y) => y - x));
  assert.equal(p1.length, 25);
  const tall = await page.evaluate(() => document.documentElement.scrollHeight);
  t.diagnostic(`the first audit page: ${tall} px tall at 1280 px`);
  assert.ok(tall < 3000, `the first audit page is ${tall} px tall`);
  assert.equal(await page.getByRole('link', { name: 'Previous (newer)' }).count(), 0);
  await Promise.all([page.waitForURL(/before=/), page.getByRole('link', { name: 'Next (older)' }).click()]);
  const p2 = await seqs();
  assert.equal(p2[0], p1[24] - 1, 'the next page starts right below');
  await Promise.all([page.waitForURL(/after=/), page.getByRole('link', { name: 'Previous (newer)' }).click()]);
  assert.deepEqual(await seqs(), p1);
  // The action filter is a list of the actions consentd writes.
  await page.goto(`${s.url}/admin/audit`);
  const action = page.getByLabel('Action');
  assert.equal(await action.evaluate((el) => el.tagName), 'SELECT');
  const options = await action.locator('option').allTextContents();
  for (const a of ['any action', 'consent.granted', 'consent.revoked', 'grant.issued', 'admin.bulk_revoked']) assert.ok(options.includes(a), a);
  await action.selectOption('consent.granted');
  await Promise.all([page.waitForURL(/action=consent\.granted/), page.getByRole('button', { name: 'Filter' }).click()]);
  const whats = await page.locator('#audit td.what').allInnerTexts();
  assert.equal(whats.length, Number(sql("SELECT count(*) FROM audit WHERE action = 'consent.granted'")));
  assert.ok(whats.every((w) => w === 'consent.granted'));
  assert.equal(await page.getByLabel('Action').inputValue(), 'consent.granted');
  // Verify the chain: the result and the head, as the database has it.
  await Promise.all([page.waitForURL(`${s.url}/admin/audit/verify`), page.getByRole('button', { name: 'Verify the chain' }).click()]);
  const head = sql("SELECT seq || ':' || lower(hex(link)) FROM audit ORDER BY seq DESC LIMIT 1");
  assert.match(await page.locator('h1').innerText(), /The audit chain verifies/);
  assert.match(await page.locator('#verify-ok').innerText(), new RegExp(`^${head.split(':')[0]} entries intact under master key [0-9a-f]+\\.$`));
  assert.equal(await page.locator('#verify-head').innerText(), head);
  await page.screenshot({ path: join(shots, 'admin-1280-verify.png'), fullPage: true });
});

// Last: it ends the admin's session.
test('"Sign out" in the header ends the admin\'s session', async () => {
  await page.goto(`${s.url}/admin/audit`);
  await Promise.all([
    page.waitForURL((u) => u.origin === s.url && u.pathname === '/'),
    page.locator('header').getByRole('button', { name: 'Sign out' }).click(),
  ]);
  const r = await page.request.get(`${s.url}/admin`, { maxRedirects: 0 });
  assert.equal(r.status(), 303);
  assert.match(r.headers().location, /^\/login\?/);
});
