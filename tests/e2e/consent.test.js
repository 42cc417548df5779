// End to end (real IdP, real browser, real binary): the gateway asks, the
// person decides in Chromium, the gateway verifies the grant offline with jose,
// introspects it, and the person revokes on /me.  Then the same with the
// offline option: refresh, rotation, reuse detection, death on revocation.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startStack } from '../lib/stack.js';
import { launchBrowser, idpSignIn, revokeInBrowser } from '../lib/browser.js';
import { getIdToken } from '../lib/idplogin.js';
import { gateway, pollExchange } from '../lib/gateway.js';
import { consentConfig, GATEWAY_APP } from '../lib/fixtures.js';

const shots = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'build', 'e2e');
let s; let b; let gw;
before(async () => {
  s = await startStack({ config: consentConfig() });
  b = await launchBrowser();
  gw = gateway({ url: s.url });
  mkdirSync(shots, { recursive: true });
});
after(async () => { await b?.close(); await s?.stop(); });

const idTokenFor = async (user) => (await getIdToken({
  issuer: s.idp.issuer, ...GATEWAY_APP, user, password: `${user}-password`,
})).id_token;

async function signInAt(page, url, user) {
  await page.goto(url);
  if (page.url().startsWith(s.idp.issuer)) await idpSignIn(page, { user, backTo: s.url });
}

test('gateway asks, the person approves one of two scopes, the gateway verifies, the person revokes', async () => {
  const subjectToken = await idTokenFor('alice');
  const ask = { subjectToken, audience: 'notes', scope: 'read write', agentId: 'coder', reason: 'to summarise your notes' };
  const first = await gw.exchange(ask);
  assert.equal(first.status, 400);
  assert.equal(first.body.error, 'consent_required');
  assert.match(first.body.consent_uri, new RegExp(`^${s.url}/consent/[A-Za-z0-9_-]{22}$`));
  assert.equal(first.body.interval, 1);
  assert.ok(first.body.expires_in > 500);
  assert.equal(first.headers.get('cache-control'), 'no-store');

  const page = await b.newPage();
  await signInAt(page, first.body.consent_uri, 'alice');
  await page.waitForSelector('text=Coding assistant asks for your permission');
  assert.equal(await page.textContent('#agent-reason'), 'to summarise your notes');
  await page.screenshot({ path: join(shots, 'consent-page.png'), fullPage: true });
  // Untick "write" (the boxes are in the stored order: read, write).
  await page.uncheck('input[name=s1]');
  await Promise.all([page.waitForSelector('text=Permission given'), page.click('button[value=approve]')]);

  const granted = await pollExchange(gw, ask);
  assert.equal(granted.status, 200, JSON.stringify(granted.body));
  assert.equal(granted.body.token_type, 'Bearer');
  assert.equal(granted.body.issued_token_type, 'urn:ietf:params:oauth:token-type:jwt');
  assert.equal(granted.body.scope, 'read');
  assert.equal(granted.body.refresh_token, undefined, 'no refresh token without the offline option');
  assert.ok(granted.body.expires_in > 0 && granted.body.expires_in <= 300);
  const { payload, protectedHeader } = await gw.verify(granted.body.access_token);
  assert.equal(protectedHeader.alg, 'ES256');
  assert.equal(protectedHeader.typ, 'at+jwt');
  assert.equal(payload.sub, 'alice');
  assert.equal(payload.scope, 'read');
  assert.deepEqual(payload.act, { sub: 'coder' });
  assert.equal(payload.client_id, 'agent-gateway');
  assert.equal(payload.resource, 'urn:consentd:resource:notes');
  assert.match(payload.cid, /^[A-Za-z0-9_-]{22}$/);
  assert.ok(payload.jti);
  assert.equal(payload.exp - payload.iat, 300);

  const intro = await gw.introspect(granted.body.access_token);
  assert.equal(intro.status, 200);
  assert.equal(intro.body.active, true);
  assert.equal(intro.body.token_use, 'grant');
  assert.equal(intro.body.scope, 'read');

  // Asking only for the declined scope, within deny_cooldown: answered like a denial of it.
  const declined = await gw.exchange({ ...ask, scope: 'write' });
  assert.equal(declined.body.error, 'access_denied', JSON.stringify(declined.body));

  // The person revokes on /me.
  await page.goto(`${s.url}/me`);
  await page.waitForSelector(`#consent-${payload.cid}`);
  await page.screenshot({ path: join(shots, 'me-consents.png'), fullPage: true });
  const said = await revokeInBrowser(page, { url: s.url, cid: payload.cid });
  assert.match(said, /Coding assistant can no longer use Team notes\. Its grants stopped working at once\./);
  await page.goto(`${s.url}/me`);
  assert.match(await page.textContent(`#history #consent-${payload.cid} .how`), /Revoked by you/);

  const after1 = await gw.introspect(granted.body.access_token);
  assert.deepEqual(after1.body, { active: false });
  const again = await gw.exchange(ask);
  assert.equal(again.status, 400);
  assert.equal(again.body.access_token, undefined);
  assert.ok(['consent_required', 'authorization_pending', 'slow_down'].includes(again.body.error), JSON.stringify(again.body));
  await page.close();
});

test('offline consent: refresh tokens rotate, reuse revokes the family, revocation kills them', async () => {
  const subjectToken = await idTokenFor('bob');
  const ask = { subjectToken, audience: 'notes', scope: 'read', agentId: 'butler' };
  const first = await gw.exchange(ask);
  assert.equal(first.body.error, 'consent_required');
  await b.context.clearCookies();           // a different person at this browser
  const page = await b.newPage();
  await signInAt(page, first.body.consent_uri, 'bob');
  await page.waitForSelector('text=Butler asks for your permission');
  await page.check('input[name=offline]');
  await Promise.all([page.waitForSelector('text=Permission given'), page.click('button[value=approve]')]);

  const g = await pollExchange(gw, ask);
  assert.equal(g.status, 200, JSON.stringify(g.body));
  const rt1 = g.body.refresh_token;
  assert.match(rt1, /^[A-Za-z0-9_-]{43}$/);
  const ri = await gw.introspect(rt1);
  assert.equal(ri.body.active, true);
  assert.equal(ri.body.token_use, 'refresh');

  const r2 = await gw.refresh(rt1);
  assert.equal(r2.status, 200, JSON.stringify(r2.body));
  const rt2 = r2.body.refresh_token;
  assert.notEqual(rt2, rt1);
  assert.equal((await gw.verify(r2.body.access_token)).payload.sub, 'bob');

  // The used token presented again: refused, and the whole family dies.
  const reuse = await gw.refresh(rt1);
  assert.equal(reuse.status, 400);
  assert.equal(reuse.body.error, 'invalid_grant');
  const afterReuse = await gw.refresh(rt2);
  assert.equal(afterReuse.body.error, 'invalid_grant');

  // A fresh exchange starts a new family; revoking the consent ends it.
  const g2 = await gw.exchange(ask);
  assert.equal(g2.status, 200);
  const cid = (await gw.verify(g2.body.access_token)).payload.cid;
  await page.goto(`${s.url}/me`);
  await revokeInBrowser(page, { url: s.url, cid });
  const dead = await gw.refresh(g2.body.refresh_token);
  assert.equal(dead.body.error, 'invalid_grant');
  assert.deepEqual((await gw.introspect(g2.body.access_token)).body, { active: false });
  await page.close();
});
