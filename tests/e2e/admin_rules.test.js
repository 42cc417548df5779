// The person's standing rules on the admin pages (issue #32, item 3) in Chromium, at 1280 and
// at 375 px, each page checked with axe-core (@axe-core/playwright, as tests/e2e/admin.test.js):
// a person made a rule with a long fixed value (a repository name as organisations write
// them); the admin finds it on the consent's page, in words, opens "End…" -- found by its
// accessible name, which names the rule -- confirms, and is back on the consent's page with
// the rule over; the agent's next call asks the person again.  No page scrolls sideways and
// every control is inside the window.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import AxeBuilder from '@axe-core/playwright';
import { startVaultStack, signedInJars } from '../lib/vaultstack.js';
import { STANDING_ACTIONS } from '../lib/fixtures.js';
import { launchBrowser, idpSignIn } from '../lib/browser.js';
import { req, postForm } from '../lib/weblogin.js';

const shots = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'build', 'e2e');
const FAILING = new Set(['serious', 'critical']);
const CONFIG = {
  oidc: { scopes: 'openid profile email groups' },   // the admin claim comes in groups
  'action.github.create_issue': STANDING_ACTIONS['action.github.create_issue'],   // tests/lib/fixtures.js
};
// 70 characters with no place to break a line (no space, hyphen or slash): wider than a phone.
const REPO = 'acme_corporation_europe_customer_relationship_management_backend_tools';
const details = (params) => JSON.stringify([{ type: 'agent_action', action: 'create_issue', parameters: params }]);

let v; let b; let k; let ruleId;
const release = (params) => v.release(k.grant, 'create_issue', { authorization_details: details(params) });

// Alice's consent and a match rule with repo fixed, made over HTTP as the approval page posts it.
async function seedRule() {
  const jar = await signedInJars()(v.url, 'alice');
  const subjectToken = await v.idToken('alice');
  const ask = { subjectToken, audience: 'github', scope: 'issues:read issues:write', agentId: 'coder' };
  const g = await v.consentAndGrant({ jar, user: 'alice', ask });
  k = { grant: g.body.access_token, cid: (await v.gw.verify(g.body.access_token)).payload.cid };
  const params = { repo: REPO, title: 'First' };
  const r = await release(params);
  assert.equal(r.body?.error, 'approval_required', r.text);
  const page = await req(jar, r.body.approval_uri);
  const form = postForm(await page.text());
  const done = await req(jar, r.body.approval_uri, {
    method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: v.url },
    body: new URLSearchParams({ csrf: form.fields.csrf, decision: 'standing', rule: 'match', for: '28800', uses: '0' }).toString(),
  });
  assert.equal(done.status, 200, (await done.text()).slice(0, 300));
  assert.equal((await release(params)).status, 200, 'the approved call');
  assert.equal((await release({ repo: REPO, title: 'Second' })).status, 200, 'by the rule');
  ruleId = v.sql(`SELECT id FROM standing_rules WHERE consent_id = '${k.cid}'`);
  assert.match(ruleId, /^[A-Za-z0-9_-]{22}$/);
}

before(async () => {
  v = await startVaultStack({ accessTokenTTL: 60, config: CONFIG });
  mkdirSync(shots, { recursive: true });
  await seedRule();
  b = await launchBrowser({ viewport: { width: 1280, height: 900 } });
  const p = await b.newPage();
  await p.goto(`${v.url}/admin`);
  await idpSignIn(p, { user: 'admin', backTo: v.url });
  await p.waitForSelector('#results');
  await p.close();
});
after(async () => { await b?.close(); await v?.stop(); });

// axe on what the page shows now (serious and critical violations fail); at this width no
// sideways scrolling and every control inside the window.
async function check(page, width, label) {
  const results = await new AxeBuilder({ page }).analyze();
  assert.ok(results.passes.length > 10, `${label}: axe ran`);
  const bad = results.violations.filter((x) => FAILING.has(x.impact))
    .flatMap((x) => x.nodes.map((n) => `${x.id} (${x.impact}): ${x.help} -- ${n.target.join(' ')}`));
  assert.deepEqual(bad, [], `${label} at ${width} px: axe violations`);
  const l = await page.evaluate(() => ({
    inner: window.innerWidth,
    scroll: document.documentElement.scrollWidth,
    outside: [...document.querySelectorAll('button, a.button, select, input:not([type=hidden])')]
      .filter((el) => !el.closest('.table-scroll'))
      .map((el) => { const r = el.getBoundingClientRect(); return { what: el.outerHTML.slice(0, 80), left: r.left, right: r.right }; })
      .filter((r) => r.left < 0 || r.right > window.innerWidth),
  }));
  assert.equal(l.inner, width);
  assert.ok(l.scroll <= width, `${label}: ${l.scroll} px wide in a ${width} px window`);
  assert.deepEqual(l.outside, [], `${label} at ${width} px: controls outside the window`);
}

test('the consent page lists the rule in words and its confirmation, at 1280 and 375 px with axe', async () => {
  for (const width of [1280, 375]) {
    const page = await b.newPage();
    await page.setViewportSize({ width, height: 900 });
    try {
      await page.goto(`${v.url}/admin/consents/${k.cid}`);
      const rule = page.locator(`#rule-${ruleId}`);
      await rule.waitFor();
      const text = (await rule.innerText()).replace(/\s+/g, ' ');
      assert.match(text, new RegExp(`Coding assistant may Open an issue \\(create_issue\\) on GitHub whenever repo is "${REPO}"`));
      assert.match(text, /Made \d{4}-\d\d-\d\d \d\d:\d\d UTC by user:alice · until \d{4}-\d\d-\d\d \d\d:\d\d UTC · used 1 time/);
      assert.match(text, /In force\./);
      await check(page, width, 'consent page with a rule');
      await page.screenshot({ path: join(shots, `admin-rules-${width}-consent.png`), fullPage: true });
      await Promise.all([page.waitForURL(`${v.url}/admin/rules/${ruleId}/end`),
        page.getByRole('link', { name: 'End the rule of Coding assistant: create_issue…' }).click()]);
      await page.waitForSelector('#end-rule');
      await check(page, width, 'the End confirmation');
      await page.screenshot({ path: join(shots, `admin-rules-${width}-end.png`), fullPage: true });
    } finally {
      await page.close();
    }
  }
});

test('End on the confirmation ends the rule: the consent page says so, and the next call asks the person', async () => {
  const page = await b.newPage();
  await page.setViewportSize({ width: 375, height: 812 });
  try {
    await page.goto(`${v.url}/admin/rules/${ruleId}/end`);
    await Promise.all([page.waitForURL(`${v.url}/admin/consents/${k.cid}#rules`),
      page.getByRole('button', { name: 'End the rule of Coding assistant: create_issue' }).click()]);
    const text = (await page.locator(`#rule-${ruleId}`).innerText()).replace(/\s+/g, ' ');
    assert.match(text, /Over: ended by admin:admin \(\d{4}-\d\d-\d\d \d\d:\d\d UTC\)\./);
    assert.equal(await page.getByRole('link', { name: /^End the rule/ }).count(), 0, 'no End link left');
    await check(page, 375, 'consent page with an ended rule');
  } finally {
    await page.close();
  }
  assert.equal((await release({ repo: REPO, title: 'Third' })).body?.error, 'approval_required', 'asked again');
});
