// The consent and approval pages as a person sees them in Chromium (issue 14, items 3, 4
// and the keyboard part of 8): the real login IdP, the downstream IdP as the provider of
// `github` (token_release = gateway, create_issue approval = required) and of `ghproxy`
// (token_release = never, proxy mode), and the real binary with [consent]
// default_duration = 172800 (2 days, not one of the usual choices) and the wiki's
// max_consent = 129600 (36 hours).  The browser runs in Asia/Tokyo with en-GB.
//
// - the consent page names who is deciding ("You are signed in as Alice Example · not
//   you?"), and "not you?" signs in afresh and comes back to the request;
// - "Let this agent act while I am away" is explained; a provider resource says "Next,
//   GitHub will ask you to sign in"; a resource without one does not;
// - the duration preselected is default_duration (2 days, offered among the usual
//   choices), or a resource's smaller max_consent (wiki: 36 hours, "the longest
//   allowed"), never simply the longest option;
// - times are local (Tokyo) with UTC in the title; without JavaScript the UTC text stays;
// - the approval page says who keeps the approval to one action, in both modes, lists the
//   parameters by name, and keeps the exact canonical JSON and its digest behind
//   "Exact parameters";
// - both forms are completed with the keyboard only (Tab, Space, Enter; no click on any
//   consentd page) and the decision takes effect; every control has a label.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import canonicalize from 'canonicalize';
import { startVaultStack } from '../lib/vaultstack.js';
import { ghproxyClient, ghproxyConfig } from '../lib/proxystack.js';
import { launchBrowser, idpSignIn } from '../lib/browser.js';
import { pollExchange } from '../lib/gateway.js';
import { basicAuth } from '../lib/idplogin.js';

const shots = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'build', 'e2e');
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const words = (s) => (s || '').split(' ').filter(Boolean).sort();
const digestOf = (text) => createHash('sha256').update(text, 'utf8').digest('base64url');
const DEFAULT = 172800;

// Parameters with a string, markup, a multi-line text, numbers, a boolean, null, an empty
// string, an array and a nested object: each shown by name, in canonical (RFC 8785) order.
const PARAMS = {
  title: 'Crash <b>on</b> start — ünïcødé',
  body: 'line one\nline two',
  milestone: 3,
  ratio: 0.1,
  draft: false,
  assignee: null,
  note: '',
  labels: ['bug', 'p1'],
  nested: { z: 1, a: [true, 'x'] },
};
// What the readable list must show, value by value (issue 31): [label, text, its element].
// Nested values flattened into paths (labels[0], nested.a[1]), text as text with its line
// break, numbers and true/false/null as code, the empty string in words; never JSON.
const PARAM_ROWS = [
  ['assignee', 'null', 'CODE'],
  ['body', 'line one\nline two', null],
  ['draft', 'false', 'CODE'],
  ['labels[0]', 'bug', null],
  ['labels[1]', 'p1', null],
  ['milestone', '3', 'CODE'],
  ['nested.a[0]', 'true', 'CODE'],
  ['nested.a[1]', 'x', null],
  ['nested.z', '1', 'CODE'],
  ['note', '(empty text)', 'EM'],
  ['ratio', '0.1', 'CODE'],
  ['title', 'Crash <b>on</b> start — ünïcødé', null],
];

let v; let b; let page;
before(async () => {
  v = await startVaultStack({
    accessTokenTTL: 60,
    extraDsClients: (url) => [ghproxyClient(url)],
    config: ({ providerIssuer }) => ({
      // The proxy's upstream is never reached here: approval_required comes first.
      ...ghproxyConfig({ providerIssuer, baseUrl: 'http://127.0.0.1:9' }),
      consent: { default_duration: DEFAULT },
      'resource.wiki': { max_consent: 129600 },
      'action.github.create_issue': { description: 'Open an issue', scope: 'issues:write', approval: 'required',
    approval_enforced_by: 'gateway' },  // the gateway holds the released token to the call (#32)
      'agent.coder': { allow: 'notes:read notes:write wiki:read github:issues:read github:issues:write '
        + 'ghproxy:issues:read ghproxy:issues:write' },
    }),
  });
  b = await launchBrowser({ timezoneId: 'Asia/Tokyo', locale: 'en-GB' });
  page = await b.newPage();
  mkdirSync(shots, { recursive: true });
});
after(async () => {
  try { await b?.close(); } finally { await v?.stop(); }
});

// --- helpers -----------------------------------------------------------------------------

async function ask(user, agentId, audience, scope) {
  const q = { subjectToken: await v.idToken(user), audience, scope, agentId };
  const r = await v.gw.exchange(q);
  assert.equal(r.body?.error, 'consent_required', r.text);
  return { q, id: r.body.consent_request_id, uri: r.body.consent_uri };
}

// Opens url, signing in at the login IdP when sent there.
async function open(p, url, user = 'alice') {
  const resp = await p.goto(url);
  if (p.url().startsWith(v.idp.issuer)) {
    await idpSignIn(p, { user, backTo: v.url });
    return null;
  }
  return resp;
}

// Presses Tab until the focused element matches selector (at most max times).
async function tabTo(p, selector, max = 60) {
  for (let i = 0; i < max; i += 1) {
    await p.keyboard.press('Tab');
    if (await p.evaluate((sel) => document.activeElement?.matches(sel) ?? false, selector)) return;
  }
  throw new Error(`Tab never reached ${selector}`);
}

// The development IdP's sign-in form with the keyboard: type, then Enter.
async function keyboardIdpSignIn(p, user, backTo) {
  await p.waitForSelector('input[name=login]');
  await p.focus('input[name=login]');
  await p.keyboard.type(user);
  await p.keyboard.press('Tab');
  await p.keyboard.type(`${user}-password`);
  await Promise.all([
    p.waitForURL((u) => u.href.startsWith(backTo) && !u.pathname.startsWith('/oauth/callback')),
    p.keyboard.press('Enter'),
  ]);
}

// Controls without a label (form controls) or without a name (buttons, summaries, links).
function unlabelled(p) {
  return p.$$eval('input:not([type=hidden]), select, textarea, button, summary, a', (els) => els.filter((el) => {
    if (el.getAttribute('aria-label')) return false;
    if (['BUTTON', 'SUMMARY', 'A'].includes(el.tagName)) return !el.textContent.trim();
    return ![...(el.labels || [])].some((l) => l.textContent.trim());
  }).map((el) => el.outerHTML));
}

// A <time>'s text, title and datetime; checks the title is its UTC time and the text the
// Tokyo one (UTC+9, no summer time), and returns the instant.
async function assertLocalTime(p, selector) {
  const t = await p.$eval(selector, (el) => ({ text: el.textContent, title: el.title, dt: el.getAttribute('datetime') }));
  assert.match(t.dt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/, `datetime ${t.dt}`);
  const d = new Date(t.dt);
  const utc = `${t.dt.slice(0, 10)} ${t.dt.slice(11, 16)} UTC`;
  assert.equal(t.title, utc, 'the tooltip is the UTC time');
  assert.notEqual(t.text, utc, 'the text is not the UTC time');
  assert.doesNotMatch(t.text, /UTC/, `local text: ${t.text}`);
  const tokyo = new Date(d.getTime() + 9 * 3600 * 1000);
  assert.ok(t.text.includes(tokyo.toISOString().slice(11, 16)), `Tokyo's ${tokyo.toISOString().slice(11, 16)} in "${t.text}"`);
  assert.ok(t.text.includes(String(tokyo.getUTCDate())), `Tokyo's day ${tokyo.getUTCDate()} in "${t.text}"`);
  assert.ok(t.text.includes(String(tokyo.getUTCFullYear())), `the year in "${t.text}"`);
  return d.getTime() / 1000;
}

// --- the consent page ---------------------------------------------------------------------

let notes;
test('consent page: who is deciding, "not you?", the offline choice explained, the 2-day default, local time', async () => {
  notes = await ask('alice', 'butler', 'notes', 'read write');
  let resp = await open(page, notes.uri);
  if (resp === null) resp = await page.goto(notes.uri);
  assert.equal(resp.status(), 200);
  const csp = resp.headers()['content-security-policy'];
  assert.match(csp, /script-src 'self'/, csp);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/, csp);
  await page.waitForSelector('text=Butler asks for your permission');

  const who = await page.textContent('#signed-in-as');
  assert.equal(who.replace(/\s+/g, ' ').trim(), 'You are signed in as Alice Example · not you?');
  const other = await page.getAttribute('#signed-in-as a', 'href');
  assert.equal(other, `/login?prompt=login&return_to=%2Fconsent%2F${notes.id}`);

  const offline = await page.textContent('label[for=offline]');
  assert.equal(offline.trim(), 'Let this agent act while I am away');
  assert.equal(await page.getAttribute('#offline', 'aria-describedby'), 'offline-help');
  assert.match(await page.textContent('#offline-help'), /the agent keeps access until the consent ends, without you/);
  assert.equal(await page.$('#provider-next'), null, 'no provider sentence for a resource without one');

  // The preselected duration is [consent] default_duration, not the longest option.
  const sel = await page.$eval('select[name=duration]', (s) => ({
    value: s.value, label: s.selectedOptions[0].textContent,
    all: [...s.options].map((o) => Number(o.value)),
  }));
  assert.equal(sel.value, String(DEFAULT));
  assert.equal(sel.label, '2 days');
  assert.deepEqual(sel.all, [3600, 86400, DEFAULT, 604800, 2592000], 'the usual choices up to max_consent, and the default, shortest first');

  const at = await assertLocalTime(page, '#request-expires');
  assert.equal(String(at), v.sql(`SELECT expires_at FROM consent_requests WHERE id = '${notes.id}'`),
    'the time shown is the request\'s expiry');
  assert.ok(await page.$('input[type=hidden][name=version]'), 'the form keeps its version field');
  assert.deepEqual(await unlabelled(page), [], 'every control has a label');
  await page.screenshot({ path: join(shots, 'consent-page-offline.png'), fullPage: true });

  // "not you?" signs in afresh (the IdP asks even though alice has a session there) and
  // comes back to this request.
  await page.goto(new URL(other, v.url).href);
  assert.ok(page.url().startsWith(v.idp.issuer), `at the IdP: ${page.url()}`);
  await idpSignIn(page, { user: 'alice', backTo: v.url });
  assert.equal(new URL(page.url()).pathname, `/consent/${notes.id}`);
  await page.waitForSelector('text=Butler asks for your permission');
});

test('keyboard only: the consent form with Tab, Space and Enter; the decision takes effect', async () => {
  assert.ok(notes, 'the previous test opened the request');
  await page.goto(notes.uri);
  await page.waitForSelector('text=Butler asks for your permission');
  await tabTo(page, 'input[name=s1]');           // "write"
  await page.keyboard.press('Space');
  assert.equal(await page.isChecked('input[name=s1]'), false, 'Space unticked write');
  await tabTo(page, '#offline');
  await page.keyboard.press('Space');
  assert.equal(await page.isChecked('#offline'), true, 'Space ticked the offline choice');
  await tabTo(page, 'button[value=approve]');
  await Promise.all([page.waitForSelector('text=Permission given'), page.keyboard.press('Enter')]);

  const row = v.sql(`SELECT granted || '|' || declined || '|' || offline || '|' || (expires_at - created_at) FROM consents WHERE request_id = '${notes.id}'`);
  assert.equal(row, `read|write|1|${DEFAULT}`, 'read only, offline, for the preselected 2 days');
  const g = await pollExchange(v.gw, notes.q);
  assert.equal(g.status, 200, JSON.stringify(g.body));
  assert.equal(g.body.scope, 'read');
  assert.ok(g.body.refresh_token, 'offline: a refresh token');
});

test('a resource whose max_consent is shorter than default_duration preselects its max_consent', async () => {
  const wiki = await ask('alice', 'coder', 'wiki', 'read');
  await page.goto(wiki.uri);
  await page.waitForSelector('text=Coding assistant asks for your permission');
  const sel = await page.$eval('select[name=duration]', (s) => ({
    value: s.value, label: s.selectedOptions[0].textContent, all: [...s.options].map((o) => Number(o.value)),
  }));
  assert.equal(sel.value, '129600');
  assert.equal(sel.label, '36 hours (the longest allowed)');
  assert.deepEqual(sel.all, [3600, 86400, 129600], 'nothing past max_consent');
  assert.equal(await page.$('#offline'), null, 'coder may not act offline: no such choice');
});

let github;
test('provider resource: "Next, GitHub will ask you to sign in"; approved with the keyboard, on to GitHub', async () => {
  github = await ask('alice', 'coder', 'github', 'issues:read issues:write');
  await page.goto(github.uri);
  await page.waitForSelector('text=Coding assistant asks for your permission');
  assert.match(await page.textContent('#provider-next'), /^Next, GitHub will ask you to sign in/);
  assert.deepEqual(await unlabelled(page), []);
  await page.screenshot({ path: join(shots, 'consent-page-provider.png'), fullPage: true });
  await tabTo(page, 'button[value=approve]');
  await Promise.all([page.waitForURL((u) => u.href.startsWith(v.ds.issuer)), page.keyboard.press('Enter')]);
  await keyboardIdpSignIn(page, 'alice', v.url);
  await page.waitForSelector('text=Permission given');
  const g = await pollExchange(v.gw, github.q);
  assert.equal(g.status, 200, JSON.stringify(g.body));
  assert.deepEqual(words(g.body.scope), ['issues:read', 'issues:write']);
  github.grant = g.body.access_token;
  assert.equal(v.sql(`SELECT expires_at - created_at FROM consents WHERE request_id = '${github.id}'`), String(DEFAULT));
});

// --- the approval page --------------------------------------------------------------------

const details = (params) => JSON.stringify([{ type: 'agent_action', action: 'create_issue', parameters: params }]);

test('approval page, token_release = gateway: who enforces it, the parameters by name, the exact JSON behind a disclosure; keyboard approval', async () => {
  assert.ok(github?.grant, 'the previous test gave a grant');
  const r = await v.release(github.grant, 'create_issue', { authorization_details: details(PARAMS) });
  assert.equal(r.body?.error, 'approval_required', r.text);
  const resp = await page.goto(r.body.approval_uri);
  assert.equal(resp.status(), 200);
  await page.waitForSelector('text=Coding assistant asks to act now');
  assert.equal((await page.textContent('#signed-in-as')).replace(/\s+/g, ' ').trim(),
    'You are signed in as Alice Example · not you?');
  assert.equal(await page.getAttribute('#signed-in-as a', 'href'),
    `/login?prompt=login&return_to=%2Fapprove%2F${r.body.approval_request_id}`);

  const enforcement = (await page.textContent('#enforcement')).replace(/\s+/g, ' ');
  assert.match(enforcement, /Who keeps this to one action: the agent's gateway\./);
  assert.match(enforcement, /consentd hands the agent's gateway your GitHub token once for this action; the gateway is trusted to use it only for this action\./);
  assert.match(enforcement, /may already hold the same token from an earlier release/);
  assert.doesNotMatch(enforcement, /consentd makes this one call/);

  // The readable list: every value by its path, in canonical order.
  const rows = await page.$$eval('#parameter-list dt', (dts) => dts.map((dt) => {
    const dd = dt.nextElementSibling;
    return [dt.textContent, dd.textContent, dd.firstElementChild?.tagName ?? null];
  }));
  assert.deepEqual(rows, PARAM_ROWS);
  assert.equal(await page.$$eval('#parameter-list b', (els) => els.length), 0, 'markup in a value is text');
  // The two-line text shows as two lines; the list holds no JSON text.
  const body = await page.$$eval('#parameter-list dt', (dts) => {
    const dd = dts.find((dt) => dt.textContent === 'body')?.nextElementSibling;
    return dd && { inner: dd.innerText, lines: Math.round(dd.getBoundingClientRect().height / parseFloat(getComputedStyle(dd).lineHeight)) };
  });
  assert.deepEqual(body, { inner: 'line one\nline two', lines: 2 });
  const listText = await page.textContent('#parameter-list');
  for (const json of ['{', '}', '\\n', '":', '["', '""']) {
    assert.ok(!listText.includes(json), `no JSON text (${json}) in the list: ${listText}`);
  }
  // Above it, what the action does.
  assert.equal((await page.textContent('#action')).replace(/\s+/g, ' '),
    'Coding assistant wants to Open an issue (create_issue) on your GitHub account, with these values:');

  // The exact canonical JSON and its digest: closed until the person opens the disclosure.
  assert.equal(await page.textContent('#exact-parameters summary'), 'Exact parameters');
  assert.equal(await page.$eval('#exact-parameters', (d) => d.open), false);
  assert.equal(await page.isVisible('#parameters'), false, 'the exact JSON is behind the disclosure');
  assert.equal(await page.isVisible('#digest'), false);
  await tabTo(page, '#exact-parameters summary');
  await page.keyboard.press('Enter');
  assert.equal(await page.$eval('#exact-parameters', (d) => d.open), true, 'Enter opened it');
  assert.equal(await page.isVisible('#parameters'), true);
  const exact = await page.textContent('#parameters');
  assert.equal(exact, canonicalize(PARAMS), 'exactly the RFC 8785 canonical text');
  assert.equal(await page.textContent('#digest'), digestOf(exact), 'the digest is of exactly that text');
  assert.equal(await page.textContent('#digest'), v.sql(`SELECT digest FROM approvals WHERE id = '${r.body.approval_request_id}'`));

  await assertLocalTime(page, '#approval-expires');
  assert.deepEqual(await unlabelled(page), [], 'every control has a label');
  await page.screenshot({ path: join(shots, 'approval-page-gateway.png'), fullPage: true });

  // Keyboard only: Tab to "Approve this once", Enter.
  await tabTo(page, 'button[value=approve]');
  await Promise.all([page.waitForSelector('text=Action approved'), page.keyboard.press('Enter')]);
  assert.match((await page.textContent('#enforcement')).replace(/\s+/g, ' '),
    /consentd hands the agent's gateway your GitHub token once for this action; the gateway is trusted to use it only for this action\./);
  assert.equal(v.sql(`SELECT status FROM approvals WHERE id = '${r.body.approval_request_id}'`), 'approved');
  let rel;
  for (let i = 0; i < 10; i += 1) {
    rel = await v.release(github.grant, 'create_issue', { authorization_details: details(PARAMS) });
    if (rel.body?.error !== 'slow_down' && rel.body?.error !== 'authorization_pending') break;
    await sleep(1200);
  }
  assert.equal(rel.status, 200, `the approval took effect: ${rel.text}`);
  assert.ok(rel.body.access_token);
});

test('approval page, token_release = never: "consentd makes this one call for the agent, once"; approved with Space', async () => {
  const k = await ask('alice', 'coder', 'ghproxy', 'issues:read issues:write');
  await page.goto(k.uri);
  await page.waitForSelector('text=Coding assistant asks for your permission');
  assert.match(await page.textContent('#provider-next'), /^Next, GitHub via proxy will ask you to sign in/);
  await tabTo(page, 'button[value=approve]');
  // alice is still signed in at the provider (previous test): it may send her straight back.
  await Promise.all([
    page.waitForURL((u) => u.href.startsWith(v.ds.issuer) || u.pathname === `/consent/${k.id}/done`),
    page.keyboard.press('Enter'),
  ]);
  if (page.url().startsWith(v.ds.issuer)) await keyboardIdpSignIn(page, 'alice', v.url);
  await page.waitForSelector('text=Permission given');
  const g = await pollExchange(v.gw, k.q);
  assert.equal(g.status, 200, JSON.stringify(g.body));

  const res = await fetch(`${v.url}/proxy/ghproxy/repos/acme/widgets/issues`, {
    method: 'POST',
    headers: { authorization: basicAuth('agent-gateway', 'gateway-dev-secret'), 'consentd-grant': g.body.access_token,
      'content-type': 'application/json' },
    body: JSON.stringify({ title: 'From the proxy' }),
  });
  const a = await res.json();
  assert.equal(res.status, 403, JSON.stringify(a));
  assert.equal(a.error, 'approval_required');

  await page.goto(a.approval_uri);
  await page.waitForSelector('text=Coding assistant asks to act now');
  const enforcement = (await page.textContent('#enforcement')).replace(/\s+/g, ' ');
  assert.match(enforcement, /Who keeps this to one action: consentd\./);
  assert.match(enforcement, /consentd makes this one call for the agent, once/);
  assert.doesNotMatch(enforcement, /gateway/);
  // The request's parts under their headings, the body's members under their own names;
  // an empty query is left out.
  const rows = await page.$$eval('#parameter-list h2, #parameter-list dt', (els) => els.map((e) => (e.tagName === 'H2'
    ? `# ${e.textContent}` : [e.textContent, e.nextElementSibling.textContent])));
  assert.deepEqual(rows, ['# In the address', ['owner', 'acme'], ['repo', 'widgets'], '# In the body', ['title', 'From the proxy']]);
  assert.equal(await page.textContent('#parameters'),
    canonicalize({ path: { owner: 'acme', repo: 'widgets' }, query: {}, body: { title: 'From the proxy' } }));
  assert.deepEqual(await unlabelled(page), []);
  await page.screenshot({ path: join(shots, 'approval-page-proxy.png'), fullPage: true });

  await tabTo(page, 'button[value=approve]');
  await Promise.all([page.waitForSelector('text=Action approved'), page.keyboard.press('Space')]);
  assert.match(await page.textContent('#enforcement'), /consentd makes this one call for the agent, once/);
  assert.equal(v.sql(`SELECT status FROM approvals WHERE id = '${a.approval_request_id}'`), 'approved');
});

test('without JavaScript the UTC time stays on the page', async () => {
  const nojs = await launchBrowser({ javaScriptEnabled: false, timezoneId: 'Asia/Tokyo', locale: 'en-GB' });
  try {
    const p = await nojs.newPage();
    const r = await ask('alice', 'coder', 'notes', 'read');
    await open(p, r.uri);
    await p.waitForSelector('text=Coding assistant asks for your permission');
    const t = await p.$eval('#request-expires', (el) => ({ text: el.textContent, title: el.title, dt: el.getAttribute('datetime') }));
    assert.match(t.text, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$/);
    assert.equal(t.text, t.title);
    assert.equal(t.text, `${t.dt.slice(0, 10)} ${t.dt.slice(11, 16)} UTC`);
  } finally {
    await nojs.close();
  }
});
