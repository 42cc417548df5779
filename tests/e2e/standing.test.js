// End to end for the person's standing rules (issue #32) in Chromium at 375 px, each page
// checked with axe-core (@axe-core/playwright, as tests/e2e/a11y.test.js): the approval page
// offers "allow exactly this call again" and "allow it with these values fixed" (the
// never-open repo ticked and not untickable), the person picks which values stay fixed and
// for how long, approves; the gateway's next call with another title goes out without
// asking, one in another repository asks; /me lists the rule in words, and its End button
// ends it -- the next call asks again.  No page scrolls sideways at 375 px.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import AxeBuilder from '@axe-core/playwright';
import { startVaultStack } from '../lib/vaultstack.js';
import { launchBrowser, connectInBrowser } from '../lib/browser.js';

const shots = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'build', 'e2e');
const FAILING = new Set(['serious', 'critical']);
const CONFIG = {
  'action.github.create_issue': {
    description: 'Open an issue', scope: 'issues:write', approval: 'required',
    standing: 'match', standing_max: '28800', standing_fixed: 'repo',
    approval_enforced_by: 'gateway',  // the gateway holds the released token to the call (#32)
  },
};
const details = (params) => JSON.stringify([{ type: 'agent_action', action: 'create_issue', parameters: params }]);

let v; let b; let page;
before(async () => {
  v = await startVaultStack({ accessTokenTTL: 30, config: CONFIG });
  b = await launchBrowser({ viewport: { width: 375, height: 812 } });
  page = await b.newPage();
  mkdirSync(shots, { recursive: true });
});
after(async () => { await b?.close(); await v?.stop(); });

// axe on what the page shows now (serious and critical violations fail), and no sideways
// scrolling at 375 px.
async function check(label) {
  const results = await new AxeBuilder({ page }).analyze();
  assert.ok(results.passes.length > 10, `${label}: axe ran`);
  const bad = results.violations.filter((x) => FAILING.has(x.impact))
    .flatMap((x) => x.nodes.map((n) => `${x.id} (${x.impact}): ${x.help} -- ${n.target.join(' ')}`));
  assert.deepEqual(bad, [], `${label}: axe violations`);
  const w = await page.evaluate(() => ({ inner: window.innerWidth, scroll: document.documentElement.scrollWidth }));
  assert.equal(w.inner, 375);
  assert.ok(w.scroll <= 375, `${label}: ${w.scroll} px wide in a 375 px window`);
}

const release = (grant, params) => v.release(grant, 'create_issue', { authorization_details: details(params) });

test('the approval page\'s rule, the gateway\'s calls it covers, /me\'s list and End, at 375 px with axe', async () => {
  const ask = { subjectToken: await v.idToken('alice'), audience: 'github', scope: 'issues:read issues:write', agentId: 'coder' };
  const g = await connectInBrowser(page, { v, ask });
  const grant = g.body.access_token;

  const params = { repo: 'acme/widgets', title: 'First', labels: ['bug'] };
  const a = await release(grant, params);
  assert.equal(a.body?.error, 'approval_required', a.text);

  // The approval page and its choices.
  await page.goto(a.body.approval_uri);
  await page.waitForSelector('#standing');
  await check('approval page');
  assert.equal(await page.locator('#standing label', { hasText: 'repo' }).locator('input').isChecked(), true);
  assert.equal(await page.locator('#standing label', { hasText: 'repo' }).locator('input').isDisabled(), true, 'repo cannot be unticked');
  await page.check('#standing input[type=radio][value=match]');
  await page.locator('#standing label', { hasText: 'title' }).locator('input').uncheck();
  await page.locator('#standing label', { hasText: 'labels' }).locator('input').uncheck();
  await page.selectOption('#standing-for', '3600');
  await page.screenshot({ path: join(shots, 'standing-approval-375.png'), fullPage: true });
  await Promise.all([page.waitForLoadState('load'), page.click('button[value=standing]')]);
  await page.waitForSelector('#rule-made');
  assert.match(await page.textContent('#rule-made'), /You also allowed it to Open an issue again with the same repo, until/);
  await check('done page');

  // The approved call, then others with repo fixed: no person asked.  Another repo asks.
  assert.equal((await release(grant, params)).status, 200);
  assert.equal((await release(grant, { repo: 'acme/widgets', title: 'Second' })).status, 200);
  assert.equal((await release(grant, { repo: 'acme/other', title: 'Second' })).body?.error, 'approval_required');

  // /me: the rule in words, and End.
  await page.goto(`${v.url}/me`);
  await page.waitForSelector('#rules');
  const text = await page.textContent('#rules');
  assert.match(text, /Coding assistant may Open an issue \(create_issue\) on GitHub whenever repo is "acme\/widgets"/);
  assert.match(text, /used 1 time/);
  await check('/me with a rule');
  await page.screenshot({ path: join(shots, 'standing-me-375.png'), fullPage: true });
  await Promise.all([page.waitForURL((u) => u.pathname === '/me'), page.click('#rules button[type=submit]')]);
  assert.equal(await page.locator('#rules').count(), 0, 'the rule is gone');
  await check('/me after End');
  assert.equal((await release(grant, { repo: 'acme/widgets', title: 'Third' })).body?.error, 'approval_required', 'asked again');
});
