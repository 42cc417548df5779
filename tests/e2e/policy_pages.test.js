// Issue #32 items 3 and 7 in Chromium at 375 px, each page checked with axe-core: the real
// login IdP, the downstream IdP as the provider, a recording upstream and the real binary;
// resource `ghproxy` (token_release = never) whose create_issue needs approval.
//
// - the done page after denying an action names it by its description, lists its values, and
//   says until when it is blocked, with where to lift it; after approving, until when the
//   agent may use it;
// - /me shows the denied action with its values, until when, and "Let it ask again"; pressing
//   it takes the block away, and the gateway's next identical call asks the person again;
// - no page scrolls sideways at 375 px, and every control is inside the window.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import AxeBuilder from '@axe-core/playwright';
import { startProxyStack } from '../lib/proxystack.js';
import { launchBrowser, openConsent, approveAtProvider } from '../lib/browser.js';
import { pollExchange } from '../lib/gateway.js';
import { basicAuth } from '../lib/idplogin.js';

const shots = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'build', 'e2e');
const GW_AUTH = basicAuth('agent-gateway', 'gateway-dev-secret');

let stack; let v; let b; let rec; let page; let grant;
before(async () => {
  stack = await startProxyStack({
    config: () => ({
      'agent.coder': { allow: 'notes:read notes:write ghproxy:issues:read ghproxy:issues:write' },
    }),
  });
  ({ v, rec } = stack);
  b = await launchBrowser();
  page = await b.newPage();
  await page.setViewportSize({ width: 375, height: 812 });
  mkdirSync(shots, { recursive: true });
});
after(async () => {
  try { await b?.close(); } finally { await stack?.stop(); }
});

async function createIssue(title) {
  const res = await fetch(`${v.url}/proxy/ghproxy/repos/acme/widgets/issues`, {
    method: 'POST', headers: { authorization: GW_AUTH, 'consentd-grant': grant, 'content-type': 'application/json' },
    body: JSON.stringify({ title }),
  });
  return { status: res.status, body: await res.json() };
}

// axe-core on what the page shows now, and the 375 px layout: nothing sideways.
async function checkPage(label) {
  const r = await new AxeBuilder({ page }).analyze();
  assert.ok(r.passes.length > 10, `${label}: axe ran`);
  const bad = r.violations.filter((x) => ['serious', 'critical'].includes(x.impact))
    .flatMap((x) => x.nodes.map((n) => `${x.id} (${x.impact}): ${x.help} -- ${n.target.join(' ')}`));
  assert.deepEqual(bad, [], `${label}: axe violations`);
  const l = await page.evaluate(() => ({
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    outside: [...document.querySelectorAll('button, a.button, input:not([type=hidden])')]
      .map((el) => { const x = el.getBoundingClientRect(); return { what: el.outerHTML.slice(0, 80), left: x.left, right: x.right }; })
      .filter((x) => x.left < 0 || x.right > window.innerWidth),
  }));
  assert.equal(l.innerWidth, 375);
  assert.ok(l.scrollWidth <= 375, `${label}: ${l.scrollWidth} px wide in a 375 px window`);
  assert.deepEqual(l.outside, [], `${label}: controls outside the window`);
}

// The <time> at sel as a date.
const timeAt = async (sel) => Date.parse(await page.getAttribute(sel, 'datetime'));

test('browser: alice connects ghproxy; the gateway gets a grant', async () => {
  const ask = { subjectToken: await v.idToken('alice'), audience: 'ghproxy', scope: 'issues:read issues:write', agentId: 'coder' };
  const q = await v.gw.exchange(ask);
  assert.equal(q.body?.error, 'consent_required', q.text);
  await openConsent(page, { v, uri: q.body.consent_uri });
  await approveAtProvider(page, { v });
  await checkPage('consent done page');
  assert.match(await page.textContent('#given-until'), /Until .* it may:/);
  assert.deepEqual(await page.$$eval('#given li', (els) => els.map((e) => e.textContent)),
    ['Read issues issues:read', 'Open and edit issues issues:write']);
  const g = await pollExchange(v.gw, ask);
  assert.equal(g.status, 200, g.text);
  grant = g.body.access_token;
});

test('browser, 375 px: the done pages say what was decided and until when; /me shows the denied action and lets it ask again', async () => {
  assert.ok(grant, 'the previous test gave a grant');
  // Denied: the done page.
  const a1 = await createIssue('Please deny');
  assert.equal(a1.body.error, 'approval_required');
  await page.goto(a1.body.approval_uri);
  await Promise.all([page.waitForLoadState('load'), page.click('button[value=deny]')]);
  await page.waitForSelector('text=Action denied');
  const denied = await page.textContent('section');
  assert.match(denied, /may not Open an issue on GitHub via proxy with these values:/);
  assert.doesNotMatch(denied, /create_issue/);
  assert.deepEqual(await page.$$eval('#decided-values dt', (els) => els.map((e) => e.textContent)), ['owner', 'repo', 'title']);
  assert.deepEqual(await page.$$eval('#decided-values dd', (els) => els.map((e) => e.textContent)), ['acme', 'widgets', 'Please deny']);
  const until = await timeAt('#blocked-until time');
  assert.ok(until > Date.now() + 3000 * 1000, `blocked until ${new Date(until).toISOString()}`);
  await checkPage('approval done page (denied)');
  await page.screenshot({ path: join(shots, 'policy-denied-done-375.png'), fullPage: true });

  // Approved: until when it may be used.
  const a2 = await createIssue('Please approve');
  await page.goto(a2.body.approval_uri);
  await Promise.all([page.waitForLoadState('load'), page.click('button[value=approve]')]);
  await page.waitForSelector('text=Action approved');
  assert.match(await page.textContent('section'), /may Open an issue on GitHub via proxy once, with these values:/);
  assert.ok(await timeAt('#use-by time') > Date.now(), 'a use-by time');
  await checkPage('approval done page (approved)');

  // /me: the denied action, until when, and "Let it ask again".
  await page.goto(`${v.url}/me`);
  await page.waitForSelector('#denied-actions');
  const block = await page.textContent('#denied-actions .block');
  assert.match(block, /You denied Coding assistant: Open an issue on GitHub via proxy/);
  assert.match(block, /Please deny/);
  assert.equal(await timeAt('#denied-actions .until time'), until, 'the same until as the done page');
  await checkPage('/me with a denied action');
  await page.screenshot({ path: join(shots, 'policy-me-denied-375.png'), fullPage: true });
  const still = await createIssue('Please deny');
  assert.equal(still.body.error, 'access_denied');
  assert.match(still.body.error_description, /refused until/);
  await Promise.all([page.waitForLoadState('load'), page.click('#denied-actions button')]);
  assert.equal(new URL(page.url()).pathname, '/me');
  assert.equal(await page.$('#denied-actions'), null, 'no longer blocked');
  await checkPage('/me after letting it ask again');
  const again = await createIssue('Please deny');
  assert.equal(again.status, 403);
  assert.equal(again.body.error, 'approval_required', 'the person is asked again');
});
