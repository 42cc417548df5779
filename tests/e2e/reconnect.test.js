// The person's pages for a provider connection that needs them and for an API key (issue #33),
// in Chromium against the real binary, the development provider playing Google
// (tests/idp/presets.js) and axe-core on each page:
// - alice connects Google through the consent page and the provider's sign-in; the person
//   removes the app at the provider, the agent's next release is refused (invalid_grant) and
//   the connection is marked;
// - /me shows "Reconnect needed." with the reason and a Reconnect button; one click (the
//   session's form, with its CSRF token) opens the consent page of a new request for what the
//   consent granted, pre-ticked; approving goes to the provider and back, the connection works
//   again, /me no longer asks, the agent's next grant works without it asking the person, and
//   the "recovered" event is in the outbox;
// - a Reconnect form without the session's CSRF token is refused and makes no request;
// - an API key resource: after consent the browser lands on the key page, the key is entered
//   there and never shown again.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import AxeBuilder from '@axe-core/playwright';
import { startVaultStack, startDownstreamIdp } from '../lib/vaultstack.js';
import { launchBrowser, idpSignIn } from '../lib/browser.js';
import { pollExchange } from '../lib/gateway.js';
import { DEFAULT_USERS } from '../lib/idp.js';
import { MODES } from '../idp/presets.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const TTL = 4;
const MARGIN = 2;
const MODE = 'google';
const RES = 'drive';
const secret = `${MODE}-client-secret-for-tests`;
const FAILING = new Set(['serious', 'critical']);

let v; let p; let b; let page;

before(async () => {
  p = await startDownstreamIdp({
    clients: [{ client_id: `consentd-${MODE}`, client_secret: secret }],
    users: DEFAULT_USERS, more: { presets: MODES, accessTokenTTL: TTL },
  });
  v = await startVaultStack({
    accessTokenTTL: 60, refreshMargin: MARGIN, users: DEFAULT_USERS,
    config: {
      [`resource.${RES}`]: {
        name: 'Drive', preset: MODE, provider_base_url: `${p.issuer}/${MODE}`,
        provider_client_id: `consentd-${MODE}`, provider_client_secret: secret,
        refresh_margin: MARGIN, token_release: 'gateway', max_consent: 2592000,
      },
      [`scope.${RES}.read`]: { description: 'Read your files', provider: 'openid.test/drive.readonly' },
      [`action.${RES}.list`]: { description: 'List files', scope: 'read', approval: 'none' },
      'resource.vendor': { name: 'Vendor API', credential: 'api_key', api_key_header: 'X-Api-Key', base_url: 'http://127.0.0.1:9/api' },
      'scope.vendor.items:read': { description: 'Read your items' },
      'action.vendor.list_items': { description: 'List items', scope: 'items:read', approval: 'none', route: 'GET /items' },
      'agent.porter': { name: 'Porter', description: 'Reads files', allow: `${RES}:read vendor:items:read`, offline: 'false' },
    },
  });
  const r = await fetch(`${p.issuer}/_devidp/register`, {
    method: 'POST', body: JSON.stringify({ client_id: `consentd-${MODE}`, redirect_uri: `${v.url}/oauth/callback/${RES}` }),
  });
  assert.equal(r.status, 200);
  b = await launchBrowser({ viewport: { width: 1280, height: 900 } });
  page = await b.newPage();
});
after(async () => { await b?.close(); await v?.stop(); await p?.stop(); });

// axe on the page as it is now: no serious or critical violation.
async function axe(label) {
  const results = await new AxeBuilder({ page }).analyze();
  assert.ok(results.passes.length > 10, `${label}: axe ran`);
  const bad = results.violations.filter((x) => FAILING.has(x.impact))
    .flatMap((x) => x.nodes.map((n) => `${x.id} (${x.impact}): ${x.help} -- ${n.target.join(' ')}`));
  assert.deepEqual(bad, [], `${label}: serious/critical axe violations`);
}

// Approves the consent page open in the browser, signs in at the provider, back at consentd.
async function approveAndConnect() {
  await page.waitForSelector('button[value=approve]');
  await Promise.all([page.waitForURL((u) => u.href.startsWith(`${p.issuer}/${MODE}/`)), page.click('button[value=approve]')]);
  await idpSignIn(page, { user: 'alice', backTo: v.url });
}

let ask; let cid;

test('a connection the provider ended: /me offers Reconnect, one click leads through the consent page and the provider, and it works again', { timeout: 90000 }, async () => {
  ask = { subjectToken: await v.idToken('alice'), audience: RES, scope: 'read', agentId: 'porter' };
  const first = await v.gw.exchange(ask);
  assert.equal(first.body?.error, 'consent_required', first.text);
  await page.goto(first.body.consent_uri);
  await idpSignIn(page, { user: 'alice', backTo: v.url });
  await approveAndConnect();
  const g = await pollExchange(v.gw, ask);
  assert.equal(g.status, 200, g.text);
  cid = (await v.gw.verify(g.body.access_token)).payload.cid;
  assert.equal((await v.release(g.body.access_token, 'list')).status, 200);

  // The person removes the app at the provider: the next refresh is refused for good.
  await fetch(`${p.issuer}/_devidp/revoke-user`, { method: 'POST', body: JSON.stringify({ mode: MODE, user: 'alice' }) });
  await sleep((TTL - MARGIN) * 1000 + 300);
  const refused = await v.release(g.body.access_token, 'list');
  assert.equal(refused.body?.error, 'invalid_grant', refused.text);
  assert.equal(v.sql(`SELECT reconnect_required FROM consents WHERE id = '${cid}'`), '1');

  await page.goto(`${v.url}/me`);
  const card = page.locator(`#consent-${cid}`);
  assert.match(await card.locator('.notice.reconnect').textContent(), /Reconnect needed\. The provider no longer accepts this connection: it refused to renew access/);
  await axe('/me with a connection to reconnect');
  await Promise.all([
    page.waitForURL((u) => u.pathname.startsWith('/consent/')),
    card.locator('form[action$="/reconnect"] button[type=submit]').click(),
  ]);
  const rid = new URL(page.url()).pathname.split('/')[2];
  assert.equal(v.sql(`SELECT status || '|' || scopes || '|' || agent FROM consent_requests WHERE id = '${rid}'`), 'pending|read|porter');
  // What the consent granted is pre-ticked: the person approves it as it was.
  assert.equal(await page.locator('input[type=checkbox][name^=s]').first().isChecked(), true);
  await axe('consent page of a reconnection');
  await approveAndConnect();
  assert.match(await page.textContent('main'), /Permission given\s+Porter may now use your Drive account/);

  // /me: the new consent's connection is held, nothing to reconnect.
  await page.goto(`${v.url}/me`);
  assert.equal(await page.locator('.notice.reconnect').count(), 0, 'no connection needs the person');
  assert.equal(await page.locator('form[action$="/reconnect"]').count(), 0);
  assert.equal(await page.locator('.connected').count(), 1);
  // The agent's next grant request is answered at once, and its release works.
  const again = await v.gw.exchange(ask);
  assert.equal(again.status, 200, again.text);
  const cid2 = (await v.gw.verify(again.body.access_token)).payload.cid;
  assert.notEqual(cid2, cid);
  assert.equal((await v.release(again.body.access_token, 'list')).status, 200);
  assert.equal(v.sql(`SELECT count(*) FROM events_outbox WHERE consent_id = '${cid2}' AND kind = 'recovered'`), '1');
});

test('Reconnect is a session form: without its CSRF token it is refused and asks nothing', async () => {
  await fetch(`${p.issuer}/_devidp/revoke-user`, { method: 'POST', body: JSON.stringify({ mode: MODE, user: 'alice' }) });
  await sleep((TTL - MARGIN) * 1000 + 300);
  const g = await v.gw.exchange(ask);
  assert.equal(g.status, 200, g.text);
  const live = (await v.gw.verify(g.body.access_token)).payload.cid;
  assert.equal((await v.release(g.body.access_token, 'list')).body?.error, 'invalid_grant');
  const before = v.sql('SELECT count(*) FROM consent_requests');
  // The browser's own session cookie, a form without its token (as another site's page would
  // post it).
  const cookie = (await page.context().cookies(v.url)).map((c) => `${c.name}=${c.value}`).join('; ');
  const r = await fetch(`${v.url}/me/consents/${live}/reconnect`, {
    method: 'POST', redirect: 'manual', body: new URLSearchParams({ csrf: 'x'.repeat(43) }),
    headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', origin: v.url },
  });
  assert.equal(r.status, 403, await r.text());
  assert.equal(v.sql('SELECT count(*) FROM consent_requests'), before, 'no request made');
});

test('an API key resource: after consent the key page, the key stored and never shown again', async () => {
  const first = await v.gw.exchange({ subjectToken: await v.idToken('alice'), audience: 'vendor', scope: 'items:read', agentId: 'porter' });
  assert.equal(first.body?.error, 'consent_required', first.text);
  await page.goto(first.body.consent_uri);
  await page.waitForSelector('button[value=approve]');
  await Promise.all([page.waitForURL((u) => /^\/me\/consents\/[^/]+\/key$/.test(u.pathname)), page.click('button[value=approve]')]);
  await axe('API key page');
  const key = 'vk-e2e-0123456789abcdef';
  await page.fill('#key', key);
  await Promise.all([page.waitForLoadState('load'), page.click('button:has-text("Store the key")')]);
  assert.match(await page.textContent('main'), /A key is stored for this connection/);
  assert.ok(!(await page.content()).includes(key), 'the key is not on the page');
  await axe('API key page, key stored');
});
