// The token vault from the attacker's side (docs/architecture.md flow D, docs/security.md invariants 1-3 and 12),
// against the real binary, a login IdP, a downstream oidc-provider and a downstream API:
// - a ciphertext swapped between two rows fails to open and the request fails cleanly;
// - a grant for resource A cannot obtain B's token;
// - a revoked or expired grant, an ID token, a tampered grant, or an action outside the
//   grant's scope obtains nothing;
// - `state` replay, a callback in another browser session or of another person, and a
//   callback for resource A arriving at B's redirect URI are refused before the code is used;
// - 20 concurrent exchanges of one near-expiry token cause exactly one refresh at the provider;
// - consentd's logs hold no provider token, code or grant;
// - a provider that grants fewer scopes than asked: the rest declined, named on the done page;
// - a provider that refuses the vault's refresh marks the consent reconnect_required;
// - a revoked consent's provider tokens are revoked at a slow provider once each, however
//   many nodes' outbox passes see them (the outbox claim; two nodes in make check's
//   PostgreSQL pass).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startVaultStack, OriginJar } from '../lib/vaultstack.js';
import { DEFAULT_USERS } from '../lib/idp.js';
import { pollExchange, TT_ID_TOKEN } from '../lib/gateway.js';
import { consentdLogin, req, postForm } from '../lib/weblogin.js';
import { basicAuth } from '../lib/idplogin.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
// The downstream IdP's log lines come through a pipe, its answers through a socket: let the
// log catch up before counting.
const settle = () => sleep(400);
// The grants live 20 s: long enough for a test's steps under load (the "20 concurrent"
// test releases its grant again about 10 s after it was issued), short enough that the
// expiry test waits it out.
const GRANT_TTL = 20;
const users = { ...DEFAULT_USERS };
for (const n of ['dave', 'erin', 'frank', 'grace', 'heidi', 'ivan']) {
  users[n] = { password: `${n}-password`, name: `${n[0].toUpperCase()}${n.slice(1)} Example`, email: `${n}@example.test`, groups: [] };
}

let v;
const seenSecrets = [];   // [what, value]: every provider token, code and grant the tests saw
before(async () => {
  v = await startVaultStack({ accessTokenTTL: 5, refreshMargin: 2, users, config: { keys: { grant_ttl: GRANT_TTL } } });
});
after(async () => { await v?.stop(); });

const vaultRows = (cid) => Number(v.sql(`SELECT count(*) FROM vault_records WHERE consent_id = '${cid}'`));
const codeExchanges = (client = 'consentd-github') => v.dsLog()
  .filter((e) => e.what === 'TOKEN' && e.grant_type === 'authorization_code' && e.client_id === client).length;
const refreshesFor = (grant) => v.dsLog().filter((e) => e.what === 'TOKEN' && e.grant_type === 'refresh_token' && e.grant === grant);
const consentsOf = (user) => v.sql(`SELECT count(*) FROM consents WHERE user_id = (SELECT id FROM users WHERE subject = '${user}')`);

function assertNoToken(r, what) {
  assert.equal(r.body?.access_token, undefined, `${what}: no token (${r.status} ${r.text})`);
  assert.ok(r.status >= 400, `${what}: an error status, got ${r.status}`);
  assert.equal(typeof r.body?.error, 'string', `${what}: an RFC 6749 JSON error (${r.text})`);
  assert.equal(r.headers.get('cache-control'), 'no-store', `${what}: Cache-Control: no-store`);
}

async function healthy() {
  assert.equal((await fetch(`${v.url}/healthz`)).status, 200, 'consentd still answers /healthz');
  assert.equal((await fetch(`${v.url}/readyz`)).status, 200, 'consentd still ready');
}

// Ask for a grant, connect at the provider over HTTP, poll the grant.
async function connected({ user, agent = 'coder', resource = 'github', scope = 'issues:read', jar = new OriginJar() }) {
  const ask = { subjectToken: await v.idToken(user), audience: resource, scope, agentId: agent };
  const first = await v.gw.exchange(ask);
  assert.equal(first.body?.error, 'consent_required', JSON.stringify(first.body));
  const c = await v.connectHttp({ jar, consentUri: first.body.consent_uri, user });
  assert.equal(c.first?.status, 303, `callback: ${c.first?.status} ${c.text?.slice(0, 300)}`);
  seenSecrets.push(['code', new URL(c.callbackUrl).searchParams.get('code')]);
  const g = await pollExchange(v.gw, ask);
  assert.equal(g.status, 200, JSON.stringify(g.body));
  seenSecrets.push(['grant', g.body.access_token]);
  const { payload } = await v.gw.verify(g.body.access_token);
  return { ask, jar, grant: g.body.access_token, cid: payload.cid, consentUri: first.body.consent_uri };
}

async function released(grant, action = 'list_issues', extra = {}) {
  const r = await v.release(grant, action, extra);
  assert.equal(r.status, 200, `release: ${r.text}`);
  assert.equal(r.body.refresh_token, undefined);
  seenSecrets.push(['provider access token', r.body.access_token]);
  return r.body;
}

// Up to the callback URL (not delivered): ask, sign in to consentd, approve, sign in at the provider.
async function callbackFor({ user, agent = 'coder', resource = 'github', scope = 'issues:read', jar = new OriginJar() }) {
  const ask = { subjectToken: await v.idToken(user), audience: resource, scope, agentId: agent };
  const first = await v.gw.exchange(ask);
  assert.equal(first.body?.error, 'consent_required', JSON.stringify(first.body));
  const a = await v.approveHttp({ jar, consentUri: first.body.consent_uri, user });
  assert.equal(a.status, 303, `approve: ${a.text.slice(0, 300)}`);
  const callbackUrl = await v.providerLoginHttp({ jar, authorizeUrl: a.location, user });
  assert.ok(callbackUrl.startsWith(`${v.url}/oauth/callback/${resource}?`), callbackUrl);
  seenSecrets.push(['code', new URL(callbackUrl).searchParams.get('code')]);
  return { ask, jar, callbackUrl, consentUri: first.body.consent_uri };
}

function assertRefusedPage(d, what) {
  const st = d.first.status;
  assert.ok(st >= 400 && st < 500, `${what}: a 4xx page, got ${st} -> ${d.firstLocation}`);
  assert.match(d.first.headers.get('content-type') || '', /text\/html/, `${what}: an HTML error page`);
  assert.ok(!(d.text || '').includes(new URL(d.callbackUrl || 'http://x/').searchParams.get('code') || '\u0000'),
    `${what}: the page does not echo the code`);
}

test('a ciphertext swapped between two rows fails to open; the request fails cleanly', async () => {
  const jar = new OriginJar();
  const a = await connected({ user: 'alice', agent: 'coder', jar });
  const b = await connected({ user: 'alice', agent: 'butler', jar });
  const ta = await released(a.grant);
  const tb = await released(b.grant);
  assert.notEqual(ta.access_token, tb.access_token);

  const pg = Boolean(v.c.config.database?.url);      // TEST_DB=pg: the same, in PostgreSQL's words
  const cols = v.sql(pg ? "SELECT column_name FROM information_schema.columns WHERE table_name = 'vault_records' ORDER BY ordinal_position"
    : "SELECT name FROM pragma_table_info('vault_records')").split('\n');
  const sealed = cols.filter((c) => /sealed|cipher|nonce|tag/i.test(c));
  assert.ok(sealed.includes('access_sealed'), `vault_records has access_sealed (columns: ${cols.join(', ')})`);
  // Swap the sealed material (every sealed column, so that no refresh can route around it).
  const set = sealed.map((c) => `${c} = (SELECT ${c} FROM swap WHERE swap.consent_id = CASE vault_records.consent_id WHEN '${a.cid}' THEN '${b.cid}' ELSE '${a.cid}' END)`).join(', ');
  v.sql(`BEGIN; CREATE TEMP TABLE swap AS SELECT consent_id, ${sealed.join(', ')} FROM vault_records WHERE consent_id IN ('${a.cid}', '${b.cid}');
    UPDATE vault_records SET ${set} WHERE consent_id IN ('${a.cid}', '${b.cid}'); COMMIT;`);
  const swapped = v.sql(`SELECT ${pg ? "encode(access_sealed, 'hex')" : 'hex(access_sealed)'} FROM vault_records WHERE consent_id IN ('${a.cid}', '${b.cid}') ORDER BY consent_id`);
  assert.equal(swapped.split('\n').length, 2);

  for (const [who, g, other] of [['coder', a.grant, tb], ['butler', b.grant, ta]]) {
    const r = await v.release(g, 'list_issues');
    assert.notEqual(r.body?.access_token, other.access_token, `${who}: never the other row's token`);
    assertNoToken(r, `${who} after the swap`);
    assert.ok(r.status < 600);
  }
  await healthy();
  // Other consents are unaffected: a third party's connection still releases.
  const c = await connected({ user: 'bob', agent: 'coder' });
  await released(c.grant);
});

test('a grant for resource A cannot obtain B\'s token', async () => {
  const jar = new OriginJar();
  const gh = await connected({ user: 'bob', agent: 'butler', resource: 'github', jar });
  const gl = await connected({ user: 'bob', agent: 'butler', resource: 'gitlab', jar });
  const tgh = await released(gh.grant);
  const tgl = await released(gl.grant);
  const igh = await v.dsIntrospect(tgh.access_token);
  const igl = await v.dsIntrospect(tgl.access_token);
  assert.equal(igh.client_id, 'consentd-github');
  assert.equal(igl.client_id, 'consentd-gitlab');
  assert.notEqual(igh.grant_id, igl.grant_id);

  for (const extra of [{ audience: 'gitlab' }, { resource: 'urn:consentd:resource:gitlab' },
    { audience: 'gitlab', resource: 'urn:consentd:resource:gitlab' }]) {
    const r = await v.release(gh.grant, 'list_issues', extra);
    if (r.body?.access_token) {
      seenSecrets.push(['provider access token', r.body.access_token]);
      const i = await v.dsIntrospect(r.body.access_token);
      assert.notEqual(i.grant_id, igl.grant_id, `github's grant with ${JSON.stringify(extra)} got gitlab's token`);
      assert.notEqual(r.body.access_token, tgl.access_token);
    }
    assertNoToken(r, `github's grant asking for ${JSON.stringify(extra)}`);
  }
  // And the other way round.
  const r = await v.release(gl.grant, 'list_issues', { audience: 'github' });
  assert.notEqual(r.body?.access_token, tgh.access_token);
  assertNoToken(r, 'gitlab\'s grant asking for github');
});

test('a revoked or expired grant, an ID token, a tampered grant, or an action outside the grant obtains nothing', async () => {
  const k = await connected({ user: 'carol', agent: 'coder', scope: 'issues:read' });
  const t0 = await released(k.grant);
  assert.equal((await v.callApi(t0.access_token)).status, 200);

  // An ID token of the login IdP where a grant is expected.
  const idt = await v.idToken('carol');
  for (const stt of ['urn:ietf:params:oauth:token-type:access_token', TT_ID_TOKEN, 'urn:ietf:params:oauth:token-type:jwt']) {
    const r = await v.release(idt, 'list_issues', { subject_token_type: stt });
    assertNoToken(r, `an ID token as subject (${stt})`);
    if (stt.endsWith(':access_token')) assert.equal(r.body.error, 'invalid_request');
  }
  // A tampered grant (payload changed, signature kept) and one with its signature flipped.
  const [h, p, s] = k.grant.split('.');
  const claims = JSON.parse(Buffer.from(p, 'base64url').toString());
  const forged = `${h}.${Buffer.from(JSON.stringify({ ...claims, scope: 'issues:read issues:write' })).toString('base64url')}.${s}`;
  assertNoToken(await v.release(forged, 'close_issue'), 'a grant with a widened scope');
  const flipped = `${h}.${p}.${s.slice(0, -2)}${s.at(-2) === 'A' ? 'B' : 'A'}${s.at(-1)}`;
  assertNoToken(await v.release(flipped, 'list_issues'), 'a grant with a bad signature');
  const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'at+jwt' })).toString('base64url')}.${p}.`;
  assertNoToken(await v.release(none, 'list_issues'), 'alg none');

  // An action outside the grant's scope; an unknown action; no action; another resource's only action name.
  const w = await v.release(k.grant, 'close_issue');
  assertNoToken(w, 'close_issue with an issues:read grant');
  assert.equal(w.body.error, 'invalid_scope');
  assertNoToken(await v.release(k.grant, 'delete_repo'), 'an unknown action');
  const noAction = await v.release(k.grant, undefined);
  assertNoToken(noAction, 'no action');
  assert.equal(noAction.body.error, 'invalid_request');
  // Without the gateway's credentials.
  const anon = await v.gw.post('/token', {
    grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange', subject_token: k.grant,
    subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
    requested_token_type: 'urn:ietf:params:oauth:token-type:access_token', action: 'list_issues',
  }, basicAuth('agent-gateway', 'wrong-secret'));
  assert.equal(anon.status, 401);
  assert.equal(anon.body.error, 'invalid_client');
  assert.equal(anon.body.access_token, undefined);
  // A consentd refresh token (offline consent) is no subject either: butler may act offline.
  // (Covered by typ pinning: a refresh token is not a JWT at all.)
  assertNoToken(await v.release('x'.repeat(43), 'list_issues'), 'garbage');

  // Expired: the first grant dies after grant_ttl; a fresh grant for the same live consent works.
  const { payload } = await v.gw.verify(k.grant);
  await sleep(Math.max(0, payload.exp * 1000 - Date.now()) + 1500);
  const expired = await v.release(k.grant, 'list_issues');
  assertNoToken(expired, 'an expired grant');
  const g2 = await v.gw.exchange(k.ask);
  assert.equal(g2.status, 200, JSON.stringify(g2.body));
  seenSecrets.push(['grant', g2.body.access_token]);
  await released(g2.body.access_token);

  // Revoked: the person revokes; the unexpired grant obtains nothing.
  const rv = await v.revokeHttp({ jar: k.jar, cid: k.cid });
  assert.ok(rv.status === 303 || rv.status === 200, `revoke: ${rv.status}`);
  const revoked = await v.release(g2.body.access_token, 'list_issues');
  assertNoToken(revoked, 'a revoked grant');
  assert.equal(vaultRows(k.cid), 0);
  await healthy();
});

test('state replay, a callback in another session or of another person, and a callback at another resource are refused', async () => {
  // 1. Another browser session of the same person, and a session of another person.
  const cb = await callbackFor({ user: 'dave' });
  await settle();
  const before1 = codeExchanges();
  const consents1 = consentsOf('dave');
  const otherSession = new OriginJar();
  await consentdLogin({ url: v.url, user: 'dave', password: 'dave-password', jar: otherSession });
  const d1 = await v.deliverCallback({ jar: otherSession, callbackUrl: cb.callbackUrl });
  assertRefusedPage({ ...d1, callbackUrl: cb.callbackUrl }, 'the callback in another session of the same person');
  const otherPerson = new OriginJar();
  await consentdLogin({ url: v.url, user: 'erin', password: 'erin-password', jar: otherPerson });
  const d2 = await v.deliverCallback({ jar: otherPerson, callbackUrl: cb.callbackUrl });
  assertRefusedPage({ ...d2, callbackUrl: cb.callbackUrl }, 'the callback in another person\'s session');
  const d3 = await v.deliverCallback({ jar: new OriginJar(), callbackUrl: cb.callbackUrl });
  assert.ok(d3.first.status !== 200 && !(d3.firstLocation || '').includes('code='), `no session: ${d3.first.status}`);
  await settle();
  assert.equal(codeExchanges(), before1, 'the code was never sent to the provider');
  assert.equal(consentsOf('dave'), consents1, 'no consent went live');
  assert.equal(consentsOf('erin'), '0');
  const still = await v.gw.exchange(cb.ask);
  assert.notEqual(still.status, 200, 'still no grant');

  // 2. A callback for github arriving at gitlab's redirect URI (same session).
  const cb2 = await callbackFor({ user: 'frank' });
  await settle();
  const before2 = codeExchanges();
  const before2gl = codeExchanges('consentd-gitlab');
  const atGitlab = cb2.callbackUrl.replace('/oauth/callback/github?', '/oauth/callback/gitlab?');
  const d4 = await v.deliverCallback({ jar: cb2.jar, callbackUrl: atGitlab });
  assertRefusedPage({ ...d4, callbackUrl: atGitlab }, 'github\'s callback at gitlab\'s redirect URI');
  await settle();
  assert.equal(codeExchanges(), before2, 'github\'s code was not exchanged');
  assert.equal(codeExchanges('consentd-gitlab'), before2gl, 'nor sent with gitlab\'s client');
  const gl = await v.gw.exchange({ ...cb2.ask, audience: 'gitlab' });
  assert.notEqual(gl.status, 200, 'no gitlab consent appeared');
  assert.equal(consentsOf('frank'), '0', 'no consent went live');
  // A callback naming an unknown resource.
  const d5 = await v.deliverCallback({ jar: cb2.jar, callbackUrl: cb2.callbackUrl.replace('/oauth/callback/github?', '/oauth/callback/nosuch?') });
  assert.ok(d5.first.status >= 400 && d5.first.status < 500, `unknown resource: ${d5.first.status}`);

  // 3. Replay: the callback works once; the same URL again is refused before anything else.
  const cb3 = await callbackFor({ user: 'grace' });
  const ok = await v.deliverCallback({ jar: cb3.jar, callbackUrl: cb3.callbackUrl });
  assert.equal(ok.first.status, 303, `the first delivery connects: ${ok.text?.slice(0, 300)}`);
  assert.ok(!ok.firstLocation.includes('code='), 'redirected to a URL without the code');
  const g = await pollExchange(v.gw, cb3.ask);
  assert.equal(g.status, 200, JSON.stringify(g.body));
  seenSecrets.push(['grant', g.body.access_token]);
  const { cid } = (await v.gw.verify(g.body.access_token)).payload;
  await settle();
  const before3 = codeExchanges();
  const consents3 = consentsOf('grace');
  const replay = await v.deliverCallback({ jar: cb3.jar, callbackUrl: cb3.callbackUrl });
  assertRefusedPage({ ...replay, callbackUrl: cb3.callbackUrl }, 'a replayed callback');
  await settle();
  assert.equal(codeExchanges(), before3, 'the replayed code was not sent to the provider');
  assert.equal(consentsOf('grace'), consents3);
  assert.equal(vaultRows(cid), 1, 'the live connection is untouched');
  const g2 = await v.gw.exchange(cb3.ask);
  assert.equal(g2.status, 200);
  assert.equal((await v.gw.verify(g2.body.access_token)).payload.cid, cid, 'the same consent');
  await released(g2.body.access_token);
  // A callback with a state that never existed, and one without state.
  const u = new URL(cb3.callbackUrl);
  u.searchParams.set('state', 'AAAAAAAAAAAAAAAAAAAAAA');
  const d6 = await v.deliverCallback({ jar: cb3.jar, callbackUrl: u.href });
  assert.ok(d6.first.status >= 400 && d6.first.status < 500, `unknown state: ${d6.first.status}`);
  u.searchParams.delete('state');
  const d7 = await v.deliverCallback({ jar: cb3.jar, callbackUrl: u.href });
  assert.ok(d7.first.status >= 400 && d7.first.status < 500, `no state: ${d7.first.status}`);
  assert.equal(codeExchanges(), before3);
  await healthy();
});

test('20 concurrent exchanges of one near-expiry token cause exactly one refresh at the provider', async () => {
  const k = await connected({ user: 'heidi', agent: 'coder' });
  const t0 = await released(k.grant);
  const dsGrant = (await v.dsIntrospect(t0.access_token)).grant_id;
  assert.equal(refreshesFor(dsGrant).length, 0);
  // Into the refresh margin (expires_in 5, refresh_margin 2), not past expiry.
  await sleep((t0.expires_in - 2) * 1000 + 700);
  const rs = await Promise.all(Array.from({ length: 20 }, () => v.release(k.grant, 'list_issues')));
  for (const r of rs) {
    assert.equal(r.status, 200, `every concurrent release succeeds: ${r.text}`);
    seenSecrets.push(['provider access token', r.body.access_token]);
  }
  await settle();
  const tokens = new Set(rs.map((r) => r.body.access_token));
  assert.ok(!tokens.has(t0.access_token), 'every answer is the refreshed token');
  assert.equal(tokens.size, 1, `one refreshed token for all 20 (got ${tokens.size})`);
  const refreshes = refreshesFor(dsGrant);
  assert.equal(refreshes.length, 1, `exactly one refresh at the provider: ${JSON.stringify(refreshes)}`);
  assert.equal(refreshes[0].status, 200);
  const [t1] = tokens;
  assert.equal((await v.callApi(t1)).status, 200, 'the refreshed token works');
  assert.equal((await v.dsIntrospect(t1)).grant_id, dsGrant, 'the provider authorization is still alive (no reuse detected)');
  // The rotated refresh token was stored: the next refresh works too.
  await sleep(3700);
  const again = await released(k.grant);
  await settle();
  assert.ok(!tokens.has(again.access_token));
  assert.equal(refreshesFor(dsGrant).length, 2);
  assert.ok(refreshesFor(dsGrant).every((e) => e.status === 200), 'no refresh was refused');
  assert.equal((await v.callApi(again.access_token)).status, 200);
});

test('a revoked consent\'s provider tokens: each revoked once at a slow, then failing provider, whichever pass finds them', { timeout: 120000 }, async () => {
  // A stack of its own whose provider takes 2.5 s a revocation (longer than the 2 s
  // between outbox passes, so every node's pass finds the entry while the first call
  // waits), and answers the first one 503: the entry is retried 10 s later, once.
  const shared = v;
  const w = await startVaultStack({ accessTokenTTL: 60, users, provider: { revocationDelayMs: 2500, revocationFailures: 1 } });
  v = w;
  try {
    const k = await connected({ user: 'ivan', agent: 'coder' });
    await released(k.grant);
    const revokes = () => v.dsLog().filter((e) => e.what === 'REVOKE');
    assert.equal(revokes().length, 0);
    await v.revokeHttp({ jar: k.jar, cid: k.cid });
    await v.waitFor(() => v.sql('SELECT count(*) FROM vault_outbox') === '0' &&
      revokes().length >= 3, 45000);
    // Room for any other pass that had taken the entry to reach the provider too.
    await sleep(6000);
    const seen = revokes();
    assert.deepEqual(seen.map((e) => `${e.hint} ${e.status}`).sort(),
      ['- 503', 'access_token 200', 'refresh_token 200'], `each token revoked once: ${JSON.stringify(seen)}`);
    assert.equal(v.sql("SELECT count(*) FROM audit WHERE action = 'vault.revoke_retry'"), '1');
    assert.equal(v.sql("SELECT count(*) FROM audit WHERE action = 'vault.revoked'"), '1');
  } finally {
    v = shared;
    await w.stop();
  }
});

test('a provider that grants fewer scopes than asked: the consent holds what it granted, the rest is declined and named on the done page', { timeout: 90000 }, async () => {
  const shared = v;
  const w = await startVaultStack({ users, provider: { withholdScopes: ['issues:write'] } });
  v = w;
  try {
    const ask = { subjectToken: await v.idToken('ivan'), audience: 'github', scope: 'issues:read issues:write', agentId: 'coder' };
    const first = await v.gw.exchange(ask);
    assert.equal(first.body?.error, 'consent_required', JSON.stringify(first.body));
    const rid = first.body.consent_request_id;
    const cn = await v.connectHttp({ jar: new OriginJar(), consentUri: first.body.consent_uri, user: 'ivan' });
    assert.equal(cn.first?.status, 303, `callback: ${cn.first?.status} ${cn.text?.slice(0, 300)}`);
    assert.equal(cn.final.status, 200, cn.text?.slice(0, 300));
    assert.match(cn.text, /left out/, `the done page names what the provider left out: ${cn.finalUrl} ${cn.text}`);
    assert.match(cn.text, /were left out: <code>issues:write<\/code>/);
    assert.equal(v.sql(`SELECT narrowed FROM consent_requests WHERE id = '${rid}'`), 'issues:write');
    // The narrower grant works; the withheld scope is not in it.
    const g = await pollExchange(v.gw, { ...ask, scope: 'issues:read' });
    assert.equal(g.status, 200, JSON.stringify(g.body));
    assert.equal(g.body.scope, 'issues:read');
    // Asking for both again never yields issues:write (at most the granted part).
    const wide = await v.gw.exchange(ask);
    if (wide.status === 200) seenSecrets.push(['grant', wide.body.access_token]);
    assert.ok(wide.status !== 200 || wide.body.scope === 'issues:read', `issues:write is not granted: ${wide.status} ${wide.body?.scope}`);
    const r = await v.release(g.body.access_token, 'list_issues');
    assert.equal(r.status, 200, r.text);
    seenSecrets.push(['provider access token', r.body.access_token], ['grant', g.body.access_token]);
  } finally {
    v = shared;
    await w.stop();
  }
});

test('a provider that refuses the refresh (it ended the authorization): the consent needs reconnecting, audited; nothing is released', { timeout: 90000 }, async () => {
  const shared = v;
  const w = await startVaultStack({ accessTokenTTL: 5, refreshMargin: 2, users, provider: { refreshRefusals: 1 } });
  v = w;
  try {
    const k = await connected({ user: 'ivan', agent: 'coder' });
    const t0 = await released(k.grant);
    // Into the refresh margin (expires_in 5, refresh_margin 2), not past expiry.
    await sleep((t0.expires_in - 2) * 1000 + 700);
    for (const attempt of ['first', 'again']) {
      const r = await v.release(k.grant, 'list_issues');
      assert.equal(r.status, 400, `${attempt}: ${r.text}`);
      assert.equal(r.body?.error, 'invalid_grant', r.text);
      assert.match(r.body.error_description, /reconnect/);
      assert.equal(r.body.access_token, undefined);
    }
    const refreshes = v.dsLog().filter((e) => e.what === 'TOKEN' && e.grant_type === 'refresh_token');
    assert.deepEqual(refreshes.map((e) => e.status), [400], 'one refresh tried, refused; none after the mark');
    assert.equal(v.sql(`SELECT reconnect_required FROM consents WHERE id = '${k.cid}'`), '1');
    assert.equal(v.sql(`SELECT count(*) FROM audit WHERE action = 'vault.reconnect_required' AND consent_id = '${k.cid}'`), '1');
  } finally {
    v = shared;
    await w.stop();
  }
});

test('consentd\'s logs hold no provider token, code or grant', async () => {
  assert.ok(seenSecrets.length > 10);
  // Every node's access log (TEST_NODES=2 runs two).
  const log = v.c.nodes.map((n) => readFileSync(join(n.dir, 'access.log'), 'utf8')).join('') + v.log();
  for (const [what, val] of seenSecrets) {
    if (val) assert.ok(!log.includes(val), `no ${what} in consentd's logs`);
  }
  assert.doesNotMatch(log, /eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\./, 'no JWT in the logs');
  assert.doesNotMatch(log, /[?&]code=/, 'no authorization code in the access log');
});

test('a consent request changed under the person: the provider path grants nothing the person did not see', async () => {
  const user = 'ivan';
  const jar = new OriginJar();
  await consentdLogin({ url: v.url, user, password: `${user}-password`, jar });
  const ask = { subjectToken: await v.idToken(user), audience: 'github', scope: 'issues:write', agentId: 'coder' };
  const first = await v.gw.exchange(ask);
  assert.equal(first.body?.error, 'consent_required', JSON.stringify(first.body));
  const uri = first.body.consent_uri;
  const rid = first.body.consent_request_id;
  // The person's page: one box, s0 = issues:write.
  const page = await req(jar, uri);
  const html = await page.text();
  assert.equal(page.status, 200, html.slice(0, 300));
  const form = postForm(html);
  assert.deepEqual(Object.keys(form.fields).filter((n) => /^s\d+$/.test(n)), ['s0']);
  assert.match(html, /name="s0"[^>]*> <code>issues:write<\/code>/);
  // The agent asks for more meanwhile: issues:read sorts first and would take box s0.
  const merged = await v.gw.exchange({ ...ask, scope: 'issues:read issues:write' });
  assert.equal(merged.body?.error, 'consent_required', JSON.stringify(merged.body));
  assert.equal(merged.body.consent_request_id, rid, 'merged into the same request');
  await settle();
  const exchanges0 = codeExchanges();
  const post = (fields) => req(jar, new URL(form.action || uri, uri).href, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: v.url },
    body: new URLSearchParams(fields).toString(),
  });
  const dm = html.match(/<option value="(\d+)"[^>]*selected/);
  const stale = await post({ ...form.fields, s0: 'on', duration: dm[1], decision: 'approve' });
  const staleHtml = await stale.text();
  assert.equal(stale.status, 409, `a decision from the old page: ${staleHtml.slice(0, 300)}`);
  assert.equal(stale.headers.get('location'), null, 'not sent to the provider');
  assert.match(staleHtml, /changed while you were looking at it/);
  assert.match(staleHtml, /issues:read/, 'the page shows the request as it is now');
  assert.equal(v.sql(`SELECT count(*) FROM vault_connects WHERE request_id = '${rid}'`), '0', 'no connection begun');
  assert.equal(v.sql(`SELECT status FROM consent_requests WHERE id = '${rid}'`), 'pending');
  assert.equal(consentsOf(user), '0');

  // On the page as it is now the person ticks issues:write only and goes to the provider;
  // while they are there the agent asks for yet another scope.
  const now = postForm(staleHtml);
  const boxes = [...staleHtml.matchAll(/name="(s\d+)"[^>]*> <code>([^<]+)<\/code>/g)];
  const writeBox = boxes.find((m) => m[2] === 'issues:write')[1];
  const fields = { ...now.fields, duration: dm[1], decision: 'approve' };
  for (const k of Object.keys(fields)) if (/^s\d+$/.test(k)) delete fields[k];
  fields[writeBox] = 'on';
  const go = await post(fields);
  await go.arrayBuffer();
  assert.equal(go.status, 303, 'sent to the provider');
  const callbackUrl = await v.providerLoginHttp({ jar, authorizeUrl: go.headers.get('location'), user });
  const again = await v.gw.exchange({ ...ask, scope: 'issues:read issues:write metadata' });
  assert.equal(again.body?.consent_request_id, rid, JSON.stringify(again.body));
  const d = await v.deliverCallback({ jar, callbackUrl });
  assert.equal(d.first.status, 303, `callback: ${d.first.status}`);
  assert.match(d.firstLocation, /\/done\?outcome=changed$/);
  assert.match(d.text, /changed while you were at the provider/);
  assert.doesNotMatch(d.text, /Permission given/);
  await settle();
  assert.equal(codeExchanges(), exchanges0, 'the code was never exchanged: no tokens to undo');
  assert.equal(consentsOf(user), '0', 'no consent went live');
  assert.equal(v.sql(`SELECT count(*) FROM vault_records WHERE user_id = (SELECT id FROM users WHERE subject = '${user}')`), '0');
  assert.equal(v.sql(`SELECT count(*) FROM audit WHERE action = 'vault.connect.failed' AND outcome = 'changed' AND request_id = '${rid}'`), '1');
  const g = await v.gw.exchange(ask);
  assert.notEqual(g.status, 200, 'no grant');
  await healthy();
});
