// End to end for per-action approval (docs/architecture.md flow F): the real login IdP, the
// downstream IdP as the provider ("GitHub"), the downstream API, Chromium, and the real binary.
//
// - the person connects a consent in the browser; the gateway asks for create_issue
//   (approval = required) with parameters -> approval_required -> authorization_pending;
//   /me lists the waiting action; the person sees agent, resource, action, description and
//   exactly the parameters, and approves -> the gateway's next identical call returns the
//   provider token once, with authorization_details echoed and params_digest equal to
//   base64url(SHA-256(RFC 8785 JCS(parameters))) recomputed here with the npm `canonicalize`
//   package (an independent implementation); the token works at the downstream API;
//   the same call again -> a new approval_required; other parameters -> another approval;
//   the person denies that one -> access_denied.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import canonicalize from 'canonicalize';
import { startVaultStack } from '../lib/vaultstack.js';
import { launchBrowser, connectInBrowser } from '../lib/browser.js';

const shots = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'build', 'e2e');
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const TT_AT = 'urn:ietf:params:oauth:token-type:access_token';
const words = (s) => (s || '').split(' ').filter(Boolean).sort();

// The action under test: approval = required, scope issues:write.
const CONFIG = {
  'action.github.create_issue': { description: 'Open an issue', scope: 'issues:write', approval: 'required',
    approval_enforced_by: 'gateway' },  // the gateway holds the released token to the call (#32)
};

// base64url(SHA-256(RFC 8785 canonical JSON)) -- with an implementation independent of consentd's.
const digestOf = (params) => createHash('sha256').update(canonicalize(params), 'utf8').digest('base64url');
const details = (params, action = 'create_issue') => JSON.stringify([{ type: 'agent_action', action, parameters: params }]);

// Member names and values chosen so that a sloppy canonicalization gives another digest:
// "😀" (U+1F600, UTF-16 D83D DE00) sorts before "ﬁ" (U+FB01) in UTF-16 order (RFC 8785
// §3.2.3) but after it in UTF-8 byte order; nested objects; escapes; non-ASCII text.
const PARAMS = {
  repo: 'acme/widgets',
  title: 'Crash on start — ünïcødé ✓',
  body: 'Steps:\n1. run `widgets --start`\n2. see "panic" \\ tab\there',
  labels: ['bug', 'p1'],
  milestone: 3,
  draft: false,
  assignee: null,
  '\ufb01eld': 'ligature key',
  '\u{1F600}': 'astral key',
  nested: { z: 1, a: [{ y: true, b: -42 }], '': 'empty name' },
};
const OTHER_PARAMS = { ...PARAMS, title: 'Another issue entirely' };

let v; let b;
before(async () => {
  v = await startVaultStack({ accessTokenTTL: 30, refreshMargin: 2, config: CONFIG });
  b = await launchBrowser();
  mkdirSync(shots, { recursive: true });
});
after(async () => { await b?.close(); await v?.stop(); });

// Repeats the same release call, no faster than the interval, while the person has not decided.
async function pollRelease(grant, params, { maxMs = 20000 } = {}) {
  const t0 = Date.now();
  let interval = 1;
  for (;;) {
    const r = await v.release(grant, 'create_issue', { authorization_details: details(params) });
    const err = r.body?.error;
    if (err !== 'authorization_pending' && err !== 'slow_down') return r;
    interval = r.body.interval || interval + 5;
    if (Date.now() - t0 > maxMs) throw new Error('polling took too long');
    await sleep(interval * 1000 + 150);
  }
}

function assertApprovalRequired(r, label) {
  assert.equal(r.status, 400, `${label}: ${r.text}`);
  assert.equal(r.body?.error, 'approval_required', `${label}: ${r.text}`);
  assert.equal(r.headers.get('cache-control'), 'no-store');
  assert.equal(r.body.access_token, undefined);
  assert.match(r.body.approval_request_id, /^[A-Za-z0-9_-]{16,}$/);
  assert.equal(r.body.approval_uri, `${v.url}/approve/${r.body.approval_request_id}`);
  assert.ok(r.body.expires_in > 0 && r.body.expires_in <= 600, `expires_in ${r.body.expires_in}`);
  assert.equal(r.body.interval, 1);
  return r.body;
}

const auditRows = (action, requestId) => Number(v.sql(
  `SELECT count(*) FROM audit WHERE action = '${action}' AND request_id = '${requestId}'`,
));

let page; let grant; let cid; let firstApproval; let releasedToken;

test('browser: connect a consent with issues:write, then a grant', async () => {
  page = await b.newPage();
  const ask = { subjectToken: await v.idToken('alice'), audience: 'github', scope: 'issues:read issues:write', agentId: 'coder' };
  const g = await connectInBrowser(page, { v, ask });
  assert.deepEqual(words(g.body.scope), ['issues:read', 'issues:write']);
  grant = g.body.access_token;
  ({ cid } = (await v.gw.verify(grant)).payload);
  assert.ok(cid);
});

test('the gateway asks for create_issue: approval_required, then authorization_pending; nothing released', async () => {
  assert.ok(grant, 'the previous test gave a grant');
  const r = await v.release(grant, 'create_issue', { authorization_details: details(PARAMS) });
  firstApproval = assertApprovalRequired(r, 'first call');
  const row = v.sql(`SELECT status || '|' || digest || '|' || consent_id || '|' || action FROM approvals WHERE id = '${firstApproval.approval_request_id}'`);
  assert.equal(row, `pending|${digestOf(PARAMS)}|${cid}|create_issue`, 'one pending approval, bound to consent, action and digest');
  assert.equal(v.sql(`SELECT parameters FROM approvals WHERE id = '${firstApproval.approval_request_id}'`), canonicalize(PARAMS),
    'the stored parameters are the RFC 8785 canonical text');
  assert.equal(auditRows('approval.requested', firstApproval.approval_request_id), 1);

  await sleep(1200);
  const p = await v.release(grant, 'create_issue', { authorization_details: details(PARAMS) });
  assert.equal(p.status, 400, p.text);
  assert.equal(p.body?.error, 'authorization_pending', p.text);
  assert.equal(p.body.approval_request_id, firstApproval.approval_request_id, 'the same approval');
  assert.equal(p.body.access_token, undefined);
  assert.equal(Number(v.sql(`SELECT count(*) FROM audit WHERE action = 'vault.released' AND consent_id = '${cid}'`)), 0,
    'nothing was released');
});

test('browser: /me lists the waiting action; the person sees the exact parameters and approves', async () => {
  assert.ok(firstApproval, 'the previous test asked');
  await page.goto(`${v.url}/me`);
  await page.waitForSelector('text=An action waits for your approval');
  const meHtml = await page.content();
  assert.ok(meHtml.includes(`href="/approve/${firstApproval.approval_request_id}"`), '/me links the approval');

  const resp = await page.goto(firstApproval.approval_uri);
  assert.equal(resp.status(), 200);
  await page.waitForSelector('text=Coding assistant asks to act now');
  const text = await page.textContent('section');
  assert.match(text, /Coding assistant/);
  assert.match(text, /GitHub/);
  assert.match(text, /Open an issue/, 'the action\'s description');
  assert.match(text, /create_issue/);
  // The parameters block is the parameters, value for value.
  const shown = await page.textContent('#parameters');
  assert.deepEqual(JSON.parse(shown), PARAMS, `the page shows exactly the parameters:\n${shown}`);
  for (const s of ['Crash on start — ünïcødé ✓', 'acme/widgets', 'ligature key', 'astral key', '\u{1F600}', '\ufb01eld']) {
    assert.ok(shown.includes(s), `the page shows ${s} verbatim`);
  }
  assert.ok(text.includes(digestOf(PARAMS)), 'the fingerprint shown is the parameters\' digest');
  // Above it, the readable list (issue 31): every value by its path, in canonical order, text
  // as text (its line breaks, the tab made visible), names that are not plain quoted; no JSON.
  const rows = await page.$$eval('#parameter-list dt', (dts) => dts.map((dt) => {
    const dd = dt.nextElementSibling;
    return [dt.textContent, dd.textContent, dd.firstElementChild?.tagName ?? null];
  }));
  assert.deepEqual(rows, [
    ['assignee', 'null', 'CODE'],
    ['body', 'Steps:\n1. run `widgets --start`\n2. see "panic" \\ tab[U+0009]here', null],
    ['draft', 'false', 'CODE'],
    ['labels[0]', 'bug', null],
    ['labels[1]', 'p1', null],
    ['milestone', '3', 'CODE'],
    ['nested[""]', 'empty name', null],
    ['nested.a[0].b', '-42', 'CODE'],
    ['nested.a[0].y', 'true', 'CODE'],
    ['nested.z', '1', 'CODE'],
    ['repo', 'acme/widgets', null],
    ['title', 'Crash on start — ünïcødé ✓', null],
    ['["\u{1F600}"]', 'astral key', null],
    ['["\ufb01eld"]', 'ligature key', null],
  ]);
  const bodyLines = await page.$$eval('#parameter-list dt', (dts) => {
    const dd = dts.find((dt) => dt.textContent === 'body')?.nextElementSibling;
    return dd && Math.round(dd.getBoundingClientRect().height / parseFloat(getComputedStyle(dd).lineHeight));
  });
  assert.equal(bodyLines, 3, 'the three lines of the body show as three lines');
  const listText = await page.textContent('#parameter-list');
  for (const json of ['{', '}', '\\n', '\\t', '":', '[{']) {
    assert.ok(!listText.includes(json), `no JSON text (${json}) in the list: ${listText}`);
  }
  // The form is a CSRF-protected POST to the approval itself.
  const form = await page.$eval('form[method=post]', (f) => ({
    action: f.getAttribute('action'), csrf: f.querySelector('input[name=csrf]')?.value,
  }));
  assert.equal(form.action, `/approve/${firstApproval.approval_request_id}`);
  assert.ok(form.csrf && form.csrf.length >= 16, 'a CSRF token');
  await page.screenshot({ path: join(shots, 'approval-page.png'), fullPage: true });

  await Promise.all([page.waitForLoadState('load'), page.click('button[value=approve]')]);
  await page.waitForSelector('text=Action approved');
  // Issue #32 item 7: the done page names the action by its description, not its id.
  assert.match(await page.textContent('section'), /may Open an issue on GitHub once, with these values:/);
  assert.doesNotMatch(await page.textContent('section'), /create_issue/);
  assert.equal(v.sql(`SELECT status FROM approvals WHERE id = '${firstApproval.approval_request_id}'`), 'approved');
  assert.equal(auditRows('approval.approved', firstApproval.approval_request_id), 1);
  // Opened again: closed, nothing to decide.
  const again = await page.goto(firstApproval.approval_uri);
  assert.equal(again.status(), 410);
  assert.match(await page.textContent('body'), /already approved/);
});

test('the next identical call returns the token once with params_digest = JCS digest; the API accepts it', async () => {
  assert.ok(firstApproval, 'the previous tests approved');
  const r = await pollRelease(grant, PARAMS);
  assert.equal(r.status, 200, `release after approval: ${r.text}`);
  assert.equal(r.headers.get('cache-control'), 'no-store');
  assert.equal(r.body.issued_token_type, TT_AT);
  assert.equal(r.body.token_type, 'Bearer');
  assert.equal(r.body.refresh_token, undefined, 'never a refresh token');
  assert.ok(typeof r.body.access_token === 'string' && r.body.access_token.length > 20);
  assert.deepEqual(words(r.body.scope), ['issues:read', 'issues:write', 'repo']);
  assert.ok(Array.isArray(r.body.authorization_details) && r.body.authorization_details.length === 1,
    `authorization_details echoed: ${r.text}`);
  const ad = r.body.authorization_details[0];
  assert.equal(ad.type, 'agent_action');
  assert.equal(ad.action, 'create_issue');
  assert.deepEqual(ad.parameters, PARAMS, 'the parameters echoed');
  const expected = digestOf(PARAMS);
  assert.match(ad.params_digest, /^[A-Za-z0-9_-]{43}$/);
  assert.equal(ad.params_digest, expected, 'params_digest equals an independent RFC 8785 + SHA-256 + base64url');
  releasedToken = r.body.access_token;

  // The downstream token works at the downstream API, as the person, with the write scope.
  const api = await v.callApi(releasedToken, '/repos/acme/widgets/issues', 'POST');
  assert.equal(api.status, 200, JSON.stringify(api.body));
  assert.equal(api.body.sub, 'alice');
  assert.equal(api.body.method, 'POST');
  assert.ok(words(api.body.scope).includes('issues:write'));

  assert.equal(v.sql(`SELECT status FROM approvals WHERE id = '${firstApproval.approval_request_id}'`), 'used');
  assert.equal(auditRows('approval.released', firstApproval.approval_request_id), 1);
  const rel = v.sql(`SELECT detail FROM audit WHERE action = 'approval.released' AND request_id = '${firstApproval.approval_request_id}'`);
  assert.ok(rel.includes(expected), `the release audit names the digest: ${rel}`);
  assert.ok(!rel.includes('acme/widgets'), 'the audit never holds a parameter\'s value');
});

test('the same call again needs a new approval; other parameters need another one; a denial answers access_denied', async () => {
  assert.ok(releasedToken, 'the previous test released');
  const again = await v.release(grant, 'create_issue', { authorization_details: details(PARAMS) });
  const second = assertApprovalRequired(again, 'the same call after the release');
  assert.notEqual(second.approval_request_id, firstApproval.approval_request_id, 'a new approval, not the used one');

  const other = await v.release(grant, 'create_issue', { authorization_details: details(OTHER_PARAMS) });
  const third = assertApprovalRequired(other, 'other parameters');
  assert.notEqual(third.approval_request_id, second.approval_request_id);
  assert.equal(v.sql(`SELECT digest FROM approvals WHERE id = '${third.approval_request_id}'`), digestOf(OTHER_PARAMS));

  // The person denies the one for other parameters.
  await page.goto(third.approval_uri);
  await page.waitForSelector('text=Coding assistant asks to act now');
  assert.deepEqual(JSON.parse(await page.textContent('#parameters')), OTHER_PARAMS);
  await Promise.all([page.waitForLoadState('load'), page.click('button[value=deny]')]);
  await page.waitForSelector('text=Action denied');
  await page.screenshot({ path: join(shots, 'approval-denied.png'), fullPage: true });
  assert.equal(v.sql(`SELECT status FROM approvals WHERE id = '${third.approval_request_id}'`), 'denied');
  assert.equal(auditRows('approval.denied', third.approval_request_id), 1);

  await sleep(1200);
  const denied = await v.release(grant, 'create_issue', { authorization_details: details(OTHER_PARAMS) });
  assert.equal(denied.status, 400, denied.text);
  assert.equal(denied.body?.error, 'access_denied', denied.text);
  assert.equal(denied.body.access_token, undefined);
  // The denial of those parameters does not touch the pending approval for the first ones.
  const stillPending = await v.release(grant, 'create_issue', { authorization_details: details(PARAMS) });
  assert.equal(stillPending.body?.error, 'authorization_pending', stillPending.text);
  assert.equal(stillPending.body.approval_request_id, second.approval_request_id);
  await page.close();
});
