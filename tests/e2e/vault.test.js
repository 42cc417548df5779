// End to end for the token vault (docs/architecture.md flow D): a real login IdP, a second
// oidc-provider as the downstream OAuth provider ("GitHub": code + PKCE, opaque 5 s access
// tokens, rotating refresh tokens, revocation, introspection), a downstream API that trusts
// only that provider's introspection, Chromium, and the real binary.
//
// - consent with a provider connection in the browser -> grant -> downstream token for an
//   action -> the downstream API accepts it -> after expiry the next exchange returns a
//   refreshed token that works -> the person revokes -> the provider revoked the refresh token
//   (its grant) and the released access token is inactive, the vault row is gone, the exchange
//   is refused; the browser never saw a token, the code (outside the callback) or the verifier.
// - two agents consenting to the same resource hold different provider tokens; revoking one
//   leaves the other working.
// - a narrowed consent reconnects with the narrower provider scopes; the old tokens are revoked.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startVaultStack, OriginJar } from '../lib/vaultstack.js';
import { launchBrowser, idpSignIn, revokeInBrowser, openConsent, watchTraffic } from '../lib/browser.js';
import { pollExchange } from '../lib/gateway.js';
import { testDb } from '../lib/consentd.js';

const shots = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'build', 'e2e');
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const JWT = /eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+/;
const TT_AT = 'urn:ietf:params:oauth:token-type:access_token';
const settle = () => sleep(400);   // the provider's log arrives by pipe, its answers by socket
const words = (s) => (s || '').split(' ').filter(Boolean).sort();

let v; let b;
before(async () => {
  v = await startVaultStack({ accessTokenTTL: 5, refreshMargin: 2 });
  b = await launchBrowser();
  mkdirSync(shots, { recursive: true });
});
after(async () => { await b?.close(); await v?.stop(); });

const refreshesFor = (grant) => v.dsLog().filter((e) => e.what === 'TOKEN' && e.grant_type === 'refresh_token'
  && (grant === undefined || e.grant === grant));
const revocationsFor = (grant) => v.dsLog().filter((e) => e.what === 'REVOKE' && e.grant === grant);
const vaultRows = (cid) => Number(v.sql(`SELECT count(*) FROM vault_records WHERE consent_id = '${cid}'`));

// The checks every release answer must pass (flow D): a provider access token, never a refresh token.
function assertRelease(r, { scope } = {}) {
  assert.equal(r.status, 200, `release: ${r.text}`);
  assert.equal(r.headers.get('cache-control'), 'no-store');
  assert.equal(r.body.issued_token_type, TT_AT);
  assert.equal(r.body.token_type, 'Bearer');
  assert.equal(typeof r.body.access_token, 'string');
  assert.ok(r.body.access_token.length > 20);
  assert.equal(r.body.refresh_token, undefined, 'a release never carries a refresh token');
  assert.ok(r.body.expires_in > 0 && r.body.expires_in <= 5, `expires_in ${r.body.expires_in}`);
  if (scope) assert.deepEqual(words(r.body.scope), words(scope));
}

async function grantFor({ user, agent, scope, jar }) {
  const ask = { subjectToken: await v.idToken(user), audience: 'github', scope, agentId: agent };
  const first = await v.gw.exchange(ask);
  assert.equal(first.body?.error, 'consent_required', JSON.stringify(first.body));
  const c = await v.connectHttp({ jar, consentUri: first.body.consent_uri, user });
  assert.equal(c.first?.status, 303, `callback: ${c.first?.status} ${c.text?.slice(0, 300)}`);
  assert.ok(!c.firstLocation.includes('code='), 'the callback redirects to a URL without the code');
  const g = await pollExchange(v.gw, ask);
  assert.equal(g.status, 200, JSON.stringify(g.body));
  const { payload } = await v.gw.verify(g.body.access_token);
  return { ask, grant: g.body.access_token, cid: payload.cid, connect: c };
}

test('browser: connect, release, the API accepts, refresh after expiry, revoke; nothing leaks to the browser', async () => {
  const page = await b.newPage();
  const { urls, bodies } = watchTraffic(page);

  const subjectToken = await v.idToken('alice');
  const ask = { subjectToken, audience: 'github', scope: 'issues:read', agentId: 'coder', reason: 'to triage your issues' };
  const first = await v.gw.exchange(ask);
  assert.equal(first.status, 400);
  assert.equal(first.body.error, 'consent_required', JSON.stringify(first.body));

  // Sign in to consentd at the login IdP, then approve.
  await openConsent(page, { v, uri: first.body.consent_uri });
  await Promise.all([
    page.waitForURL((u) => u.href.startsWith(v.ds.issuer)),
    page.click('button[value=approve]'),
  ]);
  // At the provider's login form: the connect state (with its PKCE verifier) is in consentd's DB.
  await page.waitForSelector('input[name=login]');
  const authz = urls.find((u) => u.startsWith(v.dsMeta.authorization_endpoint));
  assert.ok(authz, 'the browser went to the provider\'s authorization endpoint');
  const aq = new URL(authz).searchParams;
  assert.equal(aq.get('client_id'), 'consentd-github');
  assert.equal(aq.get('response_type'), 'code');
  assert.equal(aq.get('redirect_uri'), `${v.url}/oauth/callback/github`);
  assert.equal(aq.get('code_challenge_method'), 'S256');
  assert.match(aq.get('code_challenge'), /^[A-Za-z0-9_-]{43}$/);
  assert.ok((aq.get('state') || '').length >= 16, 'a state');
  assert.deepEqual(words(aq.get('scope')), ['issues:read', 'repo'], 'exactly the mapped provider scopes');
  // The tables with a verifier column, and that column, from either engine's catalog.
  const stateTable = v.sql(testDb === 'pg'
    ? "SELECT c.relname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid WHERE c.relkind = 'r' "
      + "AND c.relnamespace = current_schema()::regnamespace AND a.attname LIKE '%verifier%' AND NOT a.attisdropped "
      + "AND c.relname <> 'login_states' GROUP BY c.oid, c.relname ORDER BY c.oid"
    : "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%verifier%' AND name <> 'login_states'");
  assert.ok(stateTable, 'a table holding connect states with their verifier');
  const verifierCol = v.sql(testDb === 'pg'
    ? 'SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() '
      + `AND table_name = '${stateTable.split('\n')[0]}' AND column_name LIKE '%verifier%' ORDER BY ordinal_position`
    : `SELECT name FROM pragma_table_info('${stateTable.split('\n')[0]}') WHERE name LIKE '%verifier%'`);
  const verifier = v.sql(`SELECT ${verifierCol} FROM ${stateTable.split('\n')[0]}`).split('\n')[0];
  assert.match(verifier, /^[A-Za-z0-9_-]{43,128}$/, 'the PKCE verifier, read from the connect state');

  await idpSignIn(page, { user: 'alice', backTo: v.url });
  await page.waitForSelector('text=Permission given');
  await page.screenshot({ path: join(shots, 'vault-connected.png'), fullPage: true });
  const callbacks = urls.filter((u) => u.startsWith(`${v.url}/oauth/callback/github`));
  assert.equal(callbacks.length, 1, 'one callback');
  const cq = new URL(callbacks[0]).searchParams;
  const code = cq.get('code');
  assert.ok(code && code.length > 10, 'the callback carried the code');
  assert.equal(cq.get('iss'), v.ds.issuer, 'RFC 9207 iss at the callback');
  assert.ok(!page.url().includes(code), 'the final URL holds no code');

  // The grant, then the provider's token for an action, then the downstream API.
  const g = await pollExchange(v.gw, ask);
  assert.equal(g.status, 200, JSON.stringify(g.body));
  assert.equal(g.body.scope, 'issues:read');
  const grant = g.body.access_token;
  const { payload } = await v.gw.verify(grant);
  const { cid } = payload;
  assert.equal(vaultRows(cid), 1, 'one vault record for the consent');
  const conn = v.sql(`SELECT count(*) FROM consents WHERE id = '${cid}'`);
  assert.equal(conn, '1');

  const r1 = await v.release(grant, 'list_issues');
  assertRelease(r1, { scope: 'repo issues:read' });
  const t1 = r1.body.access_token;
  const api1 = await v.callApi(t1);
  assert.equal(api1.status, 200, JSON.stringify(api1.body));
  assert.deepEqual(api1.body, { ok: true, sub: 'alice', scope: api1.body.scope, path: '/repos/acme/widgets/issues', method: 'GET' });
  assert.deepEqual(words(api1.body.scope), ['issues:read', 'repo']);
  const i1 = await v.dsIntrospect(t1);
  assert.equal(i1.active, true);
  assert.equal(i1.client_id, 'consentd-github');
  const dsGrant = i1.grant_id;
  assert.ok(dsGrant, 'the provider names the grant');

  // Asked again at once: the same token, no refresh at the provider.
  const r1b = await v.release(grant, 'list_issues');
  assertRelease(r1b);
  await settle();
  assert.equal(r1b.body.access_token, t1, 'not near expiry: the stored token');
  assert.equal(refreshesFor(dsGrant).length, 0);
  assert.equal(v.sql(`SELECT count(*) FROM audit WHERE action = 'vault.released' AND consent_id = '${cid}'`), '2',
    'every release is audited');

  // Past expires_in - refresh_margin: the next release refreshes first, once.
  await sleep(Math.max(0, (r1.body.expires_in - 2) * 1000) + 1200);
  const r2 = await v.release(grant, 'list_issues');
  assertRelease(r2, { scope: 'repo issues:read' });
  const t2 = r2.body.access_token;
  assert.notEqual(t2, t1, 'a refreshed token');
  await settle();
  assert.equal(refreshesFor(dsGrant).length, 1, 'exactly one refresh at the provider');
  assert.ok(refreshesFor(dsGrant).every((e) => e.status === 200));
  const api2 = await v.callApi(t2);
  assert.equal(api2.status, 200, JSON.stringify(api2.body));
  assert.equal(api2.body.sub, 'alice');
  assert.equal((await v.dsIntrospect(t2)).grant_id, dsGrant, 'the same provider authorization, refreshed');

  // The person revokes on /me.
  await page.goto(`${v.url}/me`);
  await page.waitForSelector(`#consent-${cid}`);
  await page.screenshot({ path: join(shots, 'vault-me.png'), fullPage: true });
  const said = await revokeInBrowser(page, { url: v.url, cid });
  assert.match(said, /Coding assistant can no longer use GitHub\. Its grants stopped working at once\./);
  await page.goto(`${v.url}/me`);
  assert.match(await page.textContent(`#history #consent-${cid} .how`), /Revoked by you/);

  // consentd refuses at once; the vault row is gone from vault_records.
  const r3 = await v.release(grant, 'list_issues');
  assert.ok(r3.status >= 400 && r3.status < 500, `release after revocation: ${r3.status} ${r3.text}`);
  assert.equal(r3.body?.access_token, undefined);
  assert.equal(typeof r3.body?.error, 'string');
  assert.equal(vaultRows(cid), 0, 'the vault row is gone');
  // The outbox worker revokes the refresh token at the provider (which ends its grant, so the
  // released access token goes inactive), then erases the ciphertexts.
  const revoked = await v.waitFor(() => revocationsFor(dsGrant).find((e) => e.kind === 'RefreshToken' && e.status === 200));
  assert.ok(revoked, `the provider saw the refresh token revoked: ${JSON.stringify(v.dsLog())}`);
  const firstRevoke = revocationsFor(dsGrant)[0];
  assert.equal(firstRevoke.kind, 'RefreshToken', 'the refresh token is revoked first');
  assert.equal(firstRevoke.client_id, 'consentd-github');
  assert.deepEqual(await v.dsIntrospect(t2), { active: false }, 'the released access token is dead at the provider');
  assert.equal((await v.callApi(t2)).status, 401, 'the downstream API refuses it');
  const drained = await v.waitFor(() => v.sql('SELECT count(*) FROM vault_outbox') === '0');
  assert.ok(drained, `the outbox drained: ${v.sql('SELECT count(*) FROM vault_outbox')} left`);
  const r4 = await v.release(grant, 'list_issues');
  assert.equal(r4.body?.access_token, undefined);

  // Invariant 1: the browser never held a token; the code only in the callback's own query;
  // the verifier nowhere; the log holds none of them.
  const cookies = await b.context.cookies();
  const storage = await page.evaluate(() => JSON.stringify({ l: { ...localStorage }, s: { ...sessionStorage } }));
  const secrets = [
    ['provider access token 1', t1], ['provider access token 2', t2], ['grant', grant],
    ['subject token', subjectToken], ['PKCE verifier', verifier],
  ];
  const everything = [
    ...urls.map((u) => ({ where: `url ${u}`, text: u })),
    ...bodies.map((x) => ({ where: `body of ${x.url}`, text: x.text })),
    ...cookies.map((c) => ({ where: `cookie ${c.name}`, text: `${c.name}=${c.value}` })),
    { where: 'storage', text: storage },
  ];
  for (const { where, text } of everything) {
    assert.doesNotMatch(text, JWT, `no JWT in ${where}`);
    for (const [what, val] of secrets) assert.ok(!text.includes(val), `no ${what} in ${where}`);
    if (!where.startsWith(`url ${v.url}/oauth/callback/github?`)) {
      assert.ok(!text.includes(code), `the code only in the callback's query, not in ${where}`);
    }
  }
  const log = v.log();   // every node's log stream ([server] log), stdout and stderr
  for (const [what, val] of [...secrets, ['code', code]]) assert.ok(!log.includes(val), `no ${what} in consentd's logs`);
  assert.doesNotMatch(log, JWT, 'no JWT in consentd\'s logs');
  await page.close();
});

test('two agents on the same resource hold different provider tokens; revoking one leaves the other', async () => {
  const jar = new OriginJar();
  const a = await grantFor({ user: 'bob', agent: 'coder', scope: 'issues:read', jar });
  const c = await grantFor({ user: 'bob', agent: 'butler', scope: 'issues:read', jar });
  assert.notEqual(a.cid, c.cid);
  assert.equal(vaultRows(a.cid), 1);
  assert.equal(vaultRows(c.cid), 1);

  const ra = await v.release(a.grant, 'list_issues');
  const rc = await v.release(c.grant, 'list_issues');
  assertRelease(ra, { scope: 'repo issues:read' });
  assertRelease(rc, { scope: 'repo issues:read' });
  assert.notEqual(ra.body.access_token, rc.body.access_token, 'two agents never share a provider token');
  const ia = await v.dsIntrospect(ra.body.access_token);
  const ic = await v.dsIntrospect(rc.body.access_token);
  assert.equal(ia.active, true);
  assert.equal(ic.active, true);
  assert.notEqual(ia.grant_id, ic.grant_id, 'two provider authorizations');
  assert.equal((await v.callApi(ra.body.access_token)).status, 200);
  assert.equal((await v.callApi(rc.body.access_token)).status, 200);
  const sealed = v.sql(`SELECT count(DISTINCT access_sealed) FROM vault_records WHERE consent_id IN ('${a.cid}', '${c.cid}')`);
  assert.equal(sealed, '2');

  const rv = await v.revokeHttp({ jar, cid: a.cid });
  assert.ok(rv.status === 303 || rv.status === 200, `revoke: ${rv.status}`);
  const ra2 = await v.release(a.grant, 'list_issues');
  assert.equal(ra2.body?.access_token, undefined, 'the revoked agent gets nothing');
  assert.equal(vaultRows(a.cid), 0);
  const gone = await v.waitFor(async () => (await v.dsIntrospect(ra.body.access_token)).active === false);
  assert.ok(gone, 'the revoked agent\'s provider token dies at the provider');
  assert.ok(await v.waitFor(() => revocationsFor(ia.grant_id).some((e) => e.kind === 'RefreshToken' && e.status === 200)),
    'the revoked agent\'s refresh token was revoked at the provider');
  await settle();
  assert.equal(revocationsFor(ic.grant_id).length, 0, 'nothing of the other agent was revoked');

  // The other agent still works, also across a refresh.
  assert.equal((await v.dsIntrospect(rc.body.access_token)).active, true);
  assert.equal((await v.callApi(rc.body.access_token)).status, 200);
  await sleep(Math.max(0, (rc.body.expires_in - 2) * 1000) + 1200);
  const rc2 = await v.release(c.grant, 'list_issues');
  assertRelease(rc2);
  assert.notEqual(rc2.body.access_token, rc.body.access_token, 'refreshed');
  assert.equal((await v.callApi(rc2.body.access_token)).status, 200);
  assert.equal(vaultRows(c.cid), 1);
});

test('a narrowed consent reconnects with the narrower provider scopes and the old tokens are revoked', async () => {
  const jar = new OriginJar();
  const k1 = await grantFor({ user: 'carol', agent: 'coder', scope: 'issues:read issues:write', jar });
  const authz1 = new URL(k1.connect.approve.location).searchParams;
  assert.deepEqual(words(authz1.get('scope')), ['issues:read', 'issues:write', 'repo']);
  const r1 = await v.release(k1.grant, 'close_issue');
  assertRelease(r1, { scope: 'repo issues:read issues:write' });
  const i1 = await v.dsIntrospect(r1.body.access_token);
  assert.equal(i1.active, true);

  // The agent asks for one more scope (provider scopes: repo only); the person keeps
  // issues:read, drops issues:write and gives metadata: the mapping narrows to repo issues:read.
  const ask2 = { subjectToken: await v.idToken('carol'), audience: 'github', scope: 'metadata', agentId: 'coder' };
  const q = await v.gw.exchange(ask2);
  assert.equal(q.body?.error, 'consent_required', JSON.stringify(q.body));
  const page = await (await fetch(q.body.consent_uri, { headers: { cookie: jar.header(q.body.consent_uri) } })).text();
  const boxes = [...page.matchAll(/name="(s\d+)"[^>]*>\s*<code>([^<]+)<\/code>/g)].map((m) => [m[1], m[2]]);
  assert.deepEqual(boxes.map((x) => x[1]).sort(), ['issues:read', 'issues:write', 'metadata']);
  const select = boxes.filter(([, name]) => name !== 'issues:write').map(([f]) => Number(f.slice(1)));
  const a = await v.approveHttp({ jar, consentUri: q.body.consent_uri, user: 'carol', select });
  assert.equal(a.status, 303, `approve: ${a.text.slice(0, 300)}`);
  assert.ok(a.location.startsWith(v.dsMeta.authorization_endpoint), `reconnect at the provider: ${a.location}`);
  assert.deepEqual(words(new URL(a.location).searchParams.get('scope')), ['issues:read', 'repo'],
    'exactly the narrower provider scopes');
  // Until the callback the previous consent and its tokens are unchanged.
  assert.equal(vaultRows(k1.cid), 1);
  const still = await v.release(k1.grant, 'close_issue');
  assertRelease(still);

  const callbackUrl = await v.providerLoginHttp({ jar, authorizeUrl: a.location, user: 'carol' });
  const d = await v.deliverCallback({ jar, callbackUrl });
  assert.equal(d.first.status, 303, `callback: ${d.text?.slice(0, 300)}`);
  const g2 = await pollExchange(v.gw, { ...ask2, scope: 'issues:read metadata' });
  assert.equal(g2.status, 200, JSON.stringify(g2.body));
  assert.deepEqual(words(g2.body.scope), ['issues:read', 'metadata']);
  const cid2 = (await v.gw.verify(g2.body.access_token)).payload.cid;
  assert.notEqual(cid2, k1.cid, 'a new consent');
  assert.equal(vaultRows(cid2), 1);
  assert.equal(vaultRows(k1.cid), 0, 'the old record left the vault');

  const r2 = await v.release(g2.body.access_token, 'list_issues');
  assertRelease(r2, { scope: 'repo issues:read' });
  const i2 = await v.dsIntrospect(r2.body.access_token);
  assert.equal(i2.active, true);
  assert.deepEqual(words(i2.scope), ['issues:read', 'repo'], 'the provider token is narrower');
  assert.notEqual(i2.grant_id, i1.grant_id);
  assert.equal((await v.callApi(r2.body.access_token)).status, 200);
  // The old consent's grant is dead, and so is its provider authorization.
  const old = await v.release(k1.grant, 'close_issue');
  assert.equal(old.body?.access_token, undefined);
  const oldDead = await v.waitFor(async () => (await v.dsIntrospect(r1.body.access_token)).active === false);
  assert.ok(oldDead, 'the old provider token is revoked');
  assert.ok(await v.waitFor(() => revocationsFor(i1.grant_id).some((e) => e.kind === 'RefreshToken' && e.status === 200)),
    'the old refresh token was revoked at the provider');
  const noWrite = await v.release(g2.body.access_token, 'close_issue');
  assert.equal(noWrite.body?.access_token, undefined);
  assert.equal(noWrite.body?.error, 'invalid_scope');
});
