// Accessibility as a test (issue 14, item 8): axe-core (the npm package, driven by
// @axe-core/playwright through the same playwright-core and Debian's Chromium as every browser
// test) over every page a person or an admin can reach, each in the state a real flow leaves
// it in.  Any violation of impact "serious" or "critical" fails its page's test, printed as
// rule id, impact, help and the CSS target of each element.
//
// Pages: / (signed out), the sign-in error after "Cancel" at the IdP, the consent page, the
// 409 page of a request that changed under the open page, consent done (a resource without a
// provider, and one whose provider connection finished), the page for another account's
// request, the approval page and its done page, /me, the admin search, a consent's page, the
// confirmation of one revocation (and its refusal of a blank reason), the chain's check, the
// bulk confirmation and its result, the audit log, the admin pages' refusal of a person, the
// page after signing out, the 404 and 400 error pages, and an MCP client's consent page
// (reached through /authorize) with the refusal page of /authorize; /me with a provider
// connection that needs the person (its Reconnect button) and the consent page that button
// opens, and the API key page before and after a key is stored (issue #33).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import AxeBuilder from '@axe-core/playwright';
import { startVaultStack } from '../lib/vaultstack.js';
import { launchBrowser, idpSignIn } from '../lib/browser.js';
import { pollExchange } from '../lib/gateway.js';
import { startDownstreamIdp } from '../lib/vaultstack.js';
import { DEFAULT_USERS } from '../lib/idp.js';
import { MODES } from '../idp/presets.js';

const FAILING = new Set(['serious', 'critical']);
const CONFIG = {
  'action.github.create_issue': { description: 'Open an issue', scope: 'issues:write', approval: 'required',
    approval_enforced_by: 'gateway' },  // the gateway holds the released token to the call (#32)
  oidc: { scopes: 'openid profile email groups' },
  // An MCP client (issue #30): its sign-in reaches the consent page through /authorize.
  'client.ide': { name: 'Example IDE', redirect_uris: 'http://127.0.0.1/callback' },
  'mcp.notes': { resource: 'notes' },
};
const details = (params) => JSON.stringify([{ type: 'agent_action', action: 'create_issue', parameters: params }]);

let v; let b; let page;
let p;                          // the development provider playing Google (tests/idp/presets.js)
const checked = [];
const PRESET_SECRET = 'google-client-secret-for-tests';

before(async () => {
  p = await startDownstreamIdp({
    clients: [{ client_id: 'consentd-google', client_secret: PRESET_SECRET }],
    users: DEFAULT_USERS, more: { presets: MODES, accessTokenTTL: 4 },
  });
  v = await startVaultStack({
    accessTokenTTL: 60,
    config: {
      ...CONFIG,
      // A provider connection that can end at the provider, and an API key resource (issue #33).
      'resource.drive': {
        name: 'Drive', preset: 'google', provider_base_url: `${p.issuer}/google`,
        provider_client_id: 'consentd-google', provider_client_secret: PRESET_SECRET, refresh_margin: 2,
      },
      'scope.drive.read': { description: 'Read your files', provider: 'openid.test/drive.readonly' },
      'action.drive.list': { description: 'List files', scope: 'read', approval: 'none' },
      'resource.vendor': { name: 'Vendor API', credential: 'api_key', api_key_header: 'X-Api-Key', base_url: 'http://127.0.0.1:9/api' },
      'scope.vendor.items:read': { description: 'Read your items' },
      'agent.porter': { name: 'Porter', description: 'Reads files', allow: 'drive:read vendor:items:read' },
    },
  });
  const reg = await fetch(`${p.issuer}/_devidp/register`, {
    method: 'POST', body: JSON.stringify({ client_id: 'consentd-google', redirect_uri: `${v.url}/oauth/callback/drive` }),
  });
  assert.equal(reg.status, 200);
  b = await launchBrowser({ viewport: { width: 1280, height: 900 } });
  page = await b.newPage();
  watchStatus(page);
});
after(async () => { await b?.close(); await v?.stop(); await p?.stop(); });

// Runs axe on what the page shows now: the serious and critical violations as text lines
// (rule id, impact, help, the element's CSS target), none when the page is clean.
async function axe(label, { status } = {}) {
  const url = new URL(page.url());
  assert.equal(url.origin, v.url, `${label}: the browser is on consentd, not ${url.href}`);
  if (status !== undefined) assert.equal(lastStatus, status, `${label}: HTTP status`);
  const results = await new AxeBuilder({ page }).analyze();
  assert.ok(results.passes.length > 10, `${label}: axe ran (${results.passes.length} rules passed)`);
  const bad = results.violations.filter((x) => FAILING.has(x.impact));
  const minor = results.violations.filter((x) => !FAILING.has(x.impact)).map((x) => `${x.id} (${x.impact})`);
  checked.push({ label, path: url.pathname, minor });
  return bad.flatMap((x) => x.nodes.map((n) => `${label} (${url.pathname}): ${x.id} (${x.impact}): ${x.help} -- ${n.target.join(' ')}`));
}

// One test's pages: fn(check) visits them, check(label, { status }) runs axe on each; the test
// then fails listing every serious or critical violation of all of them (a bad page does not
// hide the pages after it).
async function pages(fn) {
  const found = [];
  await fn(async (label, opts) => { found.push(...await axe(label, opts)); });
  assert.equal(found.length, 0, `serious/critical axe violations:\n${found.join('\n')}`);
}

// The status of the last document the page loaded.
let lastStatus;
function watchStatus(p) {
  p.on('response', (r) => { if (r.request().isNavigationRequest() && r.frame() === p.mainFrame()) lastStatus = r.status(); });
}

async function signIn(user) {
  if (page.url().startsWith(v.idp.issuer)) await idpSignIn(page, { user, backTo: v.url });
}

let notesAsk; let grant;

test('/ signed out', () => pages(async (check) => {
  await page.goto(`${v.url}/`);
  await check('index', { status: 200 });
}));

test('the sign-in error after Cancel at the IdP', () => pages(async (check) => {
  await page.goto(`${v.url}/login`);
  assert.ok(page.url().startsWith(v.idp.issuer), page.url());
  await page.waitForSelector('#abort');
  await Promise.all([page.waitForURL((u) => u.href.startsWith(`${v.url}/callback`)), page.click('#abort')]);
  assert.ok(lastStatus >= 400, `an error page (${lastStatus})`);
  await check('sign-in cancelled');
}));

test('the consent page, and the 409 page when the request changed under it', () => pages(async (check) => {
  notesAsk = { subjectToken: await v.idToken('alice'), audience: 'notes', scope: 'read', agentId: 'coder', reason: 'to summarise your notes' };
  const first = await v.gw.exchange(notesAsk);
  assert.equal(first.body?.error, 'consent_required', first.text);
  await page.goto(first.body.consent_uri);
  await signIn('alice');
  await page.waitForSelector('button[value=approve]');
  await check('consent page', { status: 200 });
  // The agent asks for more while the page is open: the same request, a new version.
  const more = await v.gw.exchange({ ...notesAsk, scope: 'read write' });
  assert.ok(['consent_required', 'authorization_pending', 'slow_down'].includes(more.body?.error), more.text);
  await Promise.all([page.waitForLoadState('load'), page.click('button[value=approve]')]);
  await page.waitForSelector('button[value=approve]');
  await check('consent page, request changed (409)', { status: 409 });
  await Promise.all([page.waitForLoadState('load'), page.click('button[value=approve]')]);
  await check('consent done', { status: 200 });
  const g = await pollExchange(v.gw, { ...notesAsk, scope: 'read write' });
  assert.equal(g.status, 200, g.text);
}));

test("an MCP client's consent page, and /authorize's refusal page", () => pages(async (check) => {
  const q = new URLSearchParams({ response_type: 'code', client_id: 'ide', redirect_uri: 'http://127.0.0.1:40123/callback',
    state: 's', code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256',
    resource: `${v.url}/mcp/notes`, scope: 'read' });
  await page.goto(`${v.url}/authorize?${q}`);
  await signIn('alice');                 // signed in already: the session is reused
  await page.waitForSelector('#client-loopback');
  await check('consent page (MCP client)', { status: 200 });
  q.set('redirect_uri', 'https://evil.example/callback');
  await page.goto(`${v.url}/authorize?${q}`);
  await check('authorize refused', { status: 400 });
}));

test('a request for another account', () => pages(async (check) => {
  const ask = { subjectToken: await v.idToken('bob'), audience: 'notes', scope: 'read', agentId: 'coder' };
  const r = await v.gw.exchange(ask);
  assert.equal(r.body?.error, 'consent_required', r.text);
  await page.goto(r.body.consent_uri);
  await check('consent for another account', { status: 403 });
}));

test('connecting a provider, the approval page and its done page', () => pages(async (check) => {
  const ask = { subjectToken: await v.idToken('alice'), audience: 'github', scope: 'issues:read issues:write', agentId: 'coder' };
  const first = await v.gw.exchange(ask);
  assert.equal(first.body?.error, 'consent_required', first.text);
  await page.goto(first.body.consent_uri);
  await signIn('alice');
  await page.waitForSelector('button[value=approve]');
  await check('consent page (provider resource)', { status: 200 });
  await Promise.all([page.waitForURL((u) => u.href.startsWith(v.ds.issuer)), page.click('button[value=approve]')]);
  await idpSignIn(page, { user: 'alice', backTo: v.url });
  await check('consent done (provider connected)', { status: 200 });
  const g = await pollExchange(v.gw, ask);
  assert.equal(g.status, 200, g.text);
  grant = g.body.access_token;

  const params = { repo: 'acme/widgets', title: 'Crash on start', labels: ['bug'] };
  const r = await v.release(grant, 'create_issue', { authorization_details: details(params) });
  assert.equal(r.body?.error, 'approval_required', r.text);
  await page.goto(`${v.url}/me`);
  await check('/me with a pending approval', { status: 200 });
  await page.goto(r.body.approval_uri);
  await page.waitForSelector('button[value=approve]');
  await check('approval page', { status: 200 });
  await Promise.all([page.waitForLoadState('load'), page.click('button[value=approve]')]);
  await check('approval done', { status: 200 });
}));

test('/me with a connection to reconnect, the consent page its Reconnect opens, and the API key page', () => pages(async (check) => {
  const ask = { subjectToken: await v.idToken('alice'), audience: 'drive', scope: 'read', agentId: 'porter' };
  const first = await v.gw.exchange(ask);
  assert.equal(first.body?.error, 'consent_required', first.text);
  await page.goto(first.body.consent_uri);
  await signIn('alice');
  await page.waitForSelector('button[value=approve]');
  await Promise.all([page.waitForURL((u) => u.href.startsWith(`${p.issuer}/google/`)), page.click('button[value=approve]')]);
  await idpSignIn(page, { user: 'alice', backTo: v.url });
  const g = await pollExchange(v.gw, ask);
  assert.equal(g.status, 200, g.text);
  // The person removes the app at the provider; the next release finds out.
  await fetch(`${p.issuer}/_devidp/revoke-user`, { method: 'POST', body: JSON.stringify({ mode: 'google', user: 'alice' }) });
  await new Promise((r) => { setTimeout(r, 2500); });
  assert.equal((await v.release(g.body.access_token, 'list')).body?.error, 'invalid_grant');
  await page.goto(`${v.url}/me`);
  await page.waitForSelector('form[action$="/reconnect"]');
  await check('/me with a connection to reconnect', { status: 200 });
  await Promise.all([page.waitForURL((u) => u.pathname.startsWith('/consent/')),
    page.click('form[action$="/reconnect"] button[type=submit]')]);
  await page.waitForSelector('button[value=approve]');
  await check('consent page of a reconnection', { status: 200 });

  const keyAsk = await v.gw.exchange({ subjectToken: await v.idToken('alice'), audience: 'vendor', scope: 'items:read', agentId: 'porter' });
  assert.equal(keyAsk.body?.error, 'consent_required', keyAsk.text);
  await page.goto(keyAsk.body.consent_uri);
  await page.waitForSelector('button[value=approve]');
  await Promise.all([page.waitForURL((u) => /\/key$/.test(u.pathname)), page.click('button[value=approve]')]);
  await check('API key page', { status: 200 });
  await page.fill('#key', 'vk-a11y-0123456789');
  await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]:has-text("Store the key")')]);
  await page.waitForSelector('p.ok');
  await check('API key page, key stored', { status: 200 });
}));

test('/me with consents, the admin pages refused to a person, and signing out', () => pages(async (check) => {
  await page.goto(`${v.url}/me`);
  await check('/me', { status: 200 });
  await page.goto(`${v.url}/admin`);
  await check('admin refused (not an administrator)', { status: 403 });
  await page.goto(`${v.url}/me`);
  // Through the IdP's end-session page and back to consentd, wherever consentd lands the person.
  await Promise.all([
    page.waitForURL((u) => u.origin === v.url && u.pathname !== '/me' && !u.pathname.startsWith('/logout')),
    page.click('form[action="/logout"] button[type=submit]'),
  ]);
  await page.waitForLoadState('load');
  await check('signed out');
}));

test('error pages: 404 and 400', () => pages(async (check) => {
  await page.goto(`${v.url}/no-such-page`);
  await check('404 page', { status: 404 });
  await page.goto(`${v.url}/me?unknown=1`);
  await check('400 page', { status: 400 });
}));

test('the admin pages', () => pages(async (check) => {
  await b.context.clearCookies();            // the admin at this browser now
  await page.goto(`${v.url}/admin`);
  await signIn('admin');
  await page.waitForSelector('#results');
  await check('admin search', { status: 200 });
  const href = await page.locator('#results a[href^="/admin/consents/"]').first().getAttribute('href');
  await page.goto(`${v.url}${href}`);
  await check('admin consent', { status: 200 });
  // Revoking one: the confirmation, and the same page refusing a blank reason.
  await page.goto(`${v.url}${href}/revoke`);
  await check('admin revoke confirmation', { status: 200 });
  await page.locator('#reason').evaluate((el) => { el.removeAttribute('required'); el.value = ' '; });
  await Promise.all([page.waitForLoadState('load'), page.click('#revoke-one button[type=submit]')]);
  await page.waitForSelector('#reason-error');
  await check('admin revoke confirmation, reason missing', { status: 400 });
  await page.goto(`${v.url}/admin/audit`);
  await page.waitForSelector('#audit');
  await check('admin audit log', { status: 200 });
  await Promise.all([page.waitForURL(`${v.url}/admin/audit/verify`), page.click('#verify button[type=submit]')]);
  await check('admin audit verified', { status: 200 });
  // Bulk: the confirmation (the admin signed in moments ago: no second sign-in) and the result.
  await page.goto(`${v.url}/admin`);
  await page.selectOption('#bulk select[name=by]', 'user');
  await page.fill('#bulk input[name=value]', 'bob');
  await Promise.all([page.waitForURL(/\/admin\/revoke\?/), page.click('#bulk button[type=submit]')]);
  await check('admin bulk confirmation (nothing to revoke)', { status: 200 });
  await page.goto(`${v.url}/admin/revoke?by=agent&value=coder`);
  await page.waitForSelector('#count');
  await check('admin bulk confirmation', { status: 200 });
  await page.fill('#reason', 'a11y test');
  await Promise.all([page.waitForLoadState('load'), page.click('form[action="/admin/revoke"] button[type=submit]')]);
  await page.waitForSelector('#revoked');
  await check('admin bulk done', { status: 200 });
}));

test('every page kind was checked', (t) => {
  const labels = checked.map((c) => c.label);
  for (const want of ['index', 'sign-in cancelled', 'consent page', 'consent page, request changed (409)',
    'consent done', 'consent for another account', 'consent done (provider connected)', 'approval page',
    'approval done', '/me', 'admin refused (not an administrator)', 'signed out', '404 page', '400 page', 'admin search', 'admin consent', 'admin revoke confirmation',
    'admin revoke confirmation, reason missing', 'admin audit log', 'admin audit verified',
    'admin bulk confirmation', 'admin bulk done', 'consent page (MCP client)', 'authorize refused']) {
    assert.ok(labels.includes(want), `not checked: ${want}`);
  }
  t.diagnostic(`${checked.length} pages checked: ${labels.join(', ')}`);
  for (const c of checked) if (c.minor.length) t.diagnostic(`${c.label}: below serious: ${c.minor.join(', ')}`);
});
