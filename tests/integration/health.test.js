// Connection health (issue #33 item 4) end to end, against the real binary, the development
// provider playing Google (tests/idp/presets.js) and a real webhook receiver on 127.0.0.1 that
// verifies each SET with consentd's JWKS:
// - the person removes the app at the provider; the vault's next refresh is refused
//   (invalid_grant): the consent is marked reconnect_required with its reason;
// - the gateway's next calls say what happened and where the person goes: the release at
//   /token names the reason and <public_url>/me, a new grant request answers consent_required
//   naming the reason;
// - a "reconnect_required" SET (urn:consentd:event:connection-health) is pushed to [gateway]
//   events_uri; the receiver is down at first: the outbox retries and it arrives later,
//   verified against consentd's JWKS;
// - /me shows "Reconnect needed." with the reason in words; /metrics counts the connection
//   under consentd_connections{health="reconnect_required"}; the admin page's
//   reconnect_required filter lists it with the reason;
// - the person reconnects: a "recovered" SET arrives for the new consent, and the metrics
//   count it ok.
// And through consentd's proxy (token_release = never): the call that finds the connection
// ended, and the next one, answer 401 naming the reason and <public_url>/me.
// Revoked at the provider: an upstream 401 to a token consentd holds as unexpired, then a
// refused forced refresh, marks the connection with reason "revoked" and that very call says so.
// proactive_refresh: an offline consent's token is refreshed by the background pass with no
// agent call, and a refusal there marks the connection before any agent call.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { startVaultStack, startDownstreamIdp, OriginJar } from '../lib/vaultstack.js';
import { DEFAULT_USERS } from '../lib/idp.js';
import { pollExchange } from '../lib/gateway.js';
import { consentdLogin, req } from '../lib/weblogin.js';
import { getFreePort } from '../lib/ports.js';
import { MODES } from '../idp/presets.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const HEALTH = 'urn:consentd:event:connection-health';
const TTL = 4;                  // the provider's access tokens, seconds
const MARGIN = 2;               // refresh_margin
const MODE = 'google';
const RES = 'xgoogle';
const PROXY_RES = 'xgoogleproxy';   // the same provider behind consentd's proxy (token_release = never)
const AHEAD_RES = 'xgoogleahead';   // the same provider with proactive_refresh = true
const ROT_RES = 'xghappahead';      // a GitHub app (single-use refresh tokens) with proactive_refresh
const GW_AUTH = `Basic ${Buffer.from('agent-gateway:gateway-dev-secret').toString('base64')}`;
const METRICS_TOKEN = 'health-metrics-token-5c1d2e';
const users = { ...DEFAULT_USERS };
for (const n of ['heidi', 'ivan', 'judy', 'ken', 'lia']) users[n] = { password: `${n}-password`, name: n, email: `${n}@example.test`, groups: [] };

let v;
let p;
let rport;
const secret = `${MODE}-client-secret-for-tests`;

// A webhook receiver on port: verifies each SET against consentd's JWKS and answers 202.
async function startReceiver({ port, consentdUrl }) {
  const jwks = createRemoteJWKSet(new URL(`${consentdUrl}/.well-known/jwks.json`));
  const got = [];
  const refused = [];
  const server = createServer((rq, rs) => {
    const chunks = [];
    rq.on('data', (c) => chunks.push(c));
    rq.on('end', async () => {
      try {
        assert.equal(rq.headers['content-type'], 'application/secevent+jwt');
        const { payload, protectedHeader } = await jwtVerify(Buffer.concat(chunks).toString('utf8'), jwks, {
          algorithms: ['ES256'], typ: 'secevent+jwt', issuer: consentdUrl, audience: 'agent-gateway',
        });
        got.push({ header: protectedHeader, payload });
        rs.writeHead(202).end();
      } catch (e) {
        refused.push(String(e?.message || e));
        rs.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ err: 'invalid_request' }));
      }
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host: '127.0.0.1' }, resolve);
  });
  return { got, refused, stop: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }) };
}

before(async () => {
  rport = await getFreePort();
  p = await startDownstreamIdp({
    clients: [{ client_id: `consentd-${MODE}`, client_secret: secret }, { client_id: 'consentd-github-app', client_secret: 'github-app-secret' }],
    users, more: { presets: MODES, accessTokenTTL: TTL },
  });
  v = await startVaultStack({
    accessTokenTTL: 60, refreshMargin: MARGIN, users,
    config: {
      [`resource.${RES}`]: {
        name: 'Google', preset: MODE, provider_base_url: `${p.issuer}/${MODE}`,
        provider_client_id: `consentd-${MODE}`, provider_client_secret: secret,
        refresh_margin: MARGIN, token_release: 'gateway', max_consent: 2592000,
      },
      [`scope.${RES}.read`]: { description: 'Read your files', provider: 'openid.test/drive.readonly' },
      [`action.${RES}.list`]: { description: 'List files', scope: 'read', approval: 'none' },
      [`resource.${PROXY_RES}`]: {
        name: 'Google via proxy', preset: MODE, provider_base_url: `${p.issuer}/${MODE}`,
        provider_client_id: `consentd-${MODE}`, provider_client_secret: secret,
        refresh_margin: MARGIN, token_release: 'never', base_url: `${p.issuer}/${MODE}/_api`,
        max_consent: 2592000,
      },
      [`scope.${PROXY_RES}.read`]: { description: 'Read your files', provider: 'openid.test/drive.readonly' },
      [`action.${PROXY_RES}.whoami`]: { description: 'Who am I', scope: 'read', approval: 'none', route: 'GET /whoami' },
      [`resource.${AHEAD_RES}`]: {
        name: 'Google, refreshed ahead', preset: MODE, provider_base_url: `${p.issuer}/${MODE}`,
        provider_client_id: `consentd-${MODE}`, provider_client_secret: secret,
        refresh_margin: MARGIN, token_release: 'gateway', max_consent: 2592000, proactive_refresh: 'true',
      },
      [`scope.${AHEAD_RES}.read`]: { description: 'Read your files', provider: 'openid.test/drive.readonly' },
      [`action.${AHEAD_RES}.list`]: { description: 'List files', scope: 'read', approval: 'none' },
      'agent.porter': { name: 'Porter', description: 'Reads files', allow: `${RES}:read ${PROXY_RES}:read`, offline: 'false' },
      // Single-use refresh tokens whose reuse ends the grant (GitHub app), refreshed ahead.
      [`resource.${ROT_RES}`]: {
        name: 'GitHub app, refreshed ahead', preset: 'github-app', provider_base_url: `${p.issuer}/github-app`,
        provider_client_id: 'consentd-github-app', provider_client_secret: 'github-app-secret',
        refresh_margin: MARGIN, token_release: 'gateway', max_consent: 2592000, proactive_refresh: 'true',
      },
      [`scope.${ROT_RES}.read`]: { description: 'Read your repositories', provider: 'repo' },
      [`action.${ROT_RES}.list`]: { description: 'List repositories', scope: 'read', approval: 'none' },
      'agent.nightly': { name: 'Nightly', description: 'Reads files at night', allow: `${AHEAD_RES}:read ${ROT_RES}:read`, offline: 'true' },
      gateway: { events_uri: `http://127.0.0.1:${rport}/events` },
      metrics: { token: METRICS_TOKEN },
      oidc: { scopes: 'openid profile email groups' },
    },
  });
  for (const [res, client] of [[RES, `consentd-${MODE}`], [PROXY_RES, `consentd-${MODE}`], [AHEAD_RES, `consentd-${MODE}`], [ROT_RES, 'consentd-github-app']]) {
    const r = await fetch(`${p.issuer}/_devidp/register`, {
      method: 'POST', body: JSON.stringify({ client_id: client, redirect_uri: `${v.url}/oauth/callback/${res}` }),
    });
    assert.equal(r.status, 200);
  }
});
after(async () => {
  await v?.stop();
  await p?.stop();
});

const control = (path, body) => fetch(`${p.issuer}/_devidp/${path}`, { method: 'POST', body: JSON.stringify(body) });

// Ask, approve at consentd, sign in at the provider, deliver the callback, poll the grant.
async function connect(user, audience = RES, { agentId = 'porter', offline = false } = {}) {
  const jar = new OriginJar();
  const ask = { subjectToken: await v.idToken(user), audience, scope: 'read', agentId };
  const first = await v.gw.exchange(ask);
  // Pending already when the gateway asked since the connection broke.
  assert.ok(['consent_required', 'authorization_pending'].includes(first.body?.error), JSON.stringify(first.body));
  const a = await v.approveHttp({ jar, consentUri: first.body.consent_uri, user, offline });
  assert.equal(a.status, 303, `approve: ${a.text.slice(0, 300)}`);
  const callbackUrl = await v.providerLoginHttp({ jar, authorizeUrl: a.location, user });
  const d = await v.deliverCallback({ jar, callbackUrl });
  assert.ok(d.first.status < 400, `callback: ${d.first.status} ${d.text?.slice(0, 300)}`);
  const g = await pollExchange(v.gw, ask);
  assert.equal(g.status, 200, JSON.stringify(g.body));
  const { payload } = await v.gw.verify(g.body.access_token);
  return { jar, ask, grant: g.body.access_token, cid: payload.cid };
}

async function connections() {
  const r = await fetch(`${v.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  const text = await r.text();
  assert.equal(r.status, 200, text.slice(0, 300));
  const n = (h) => Number((new RegExp(`^consentd_connections\\{health="${h}"\\} (\\d+)$`, 'm').exec(text) || [])[1]);
  return { ok: n('ok'), broken: n('reconnect_required') };
}

function checkHealthSet(ev, { cid, state, subject }) {
  assert.equal(ev.header.typ, 'secevent+jwt');
  const pl = ev.payload;
  assert.equal(pl.exp, undefined, 'a SET has no exp');
  assert.equal(pl.aud, 'agent-gateway');
  assert.match(pl.jti, /^[0-9a-f]{32}$/);
  assert.deepEqual(pl.sub_id, { format: 'iss_sub', iss: v.idp.issuer, sub: subject });
  assert.deepEqual(Object.keys(pl.events), [HEALTH]);
  const e = pl.events[HEALTH];
  assert.equal(e.cid, cid);
  assert.equal(e.agent_id, 'porter');
  assert.equal(e.state, state);
  assert.equal(e.reason, 'refresh_refused');
  if (state === 'reconnect_required') assert.equal(e.reconnect_uri, `${v.url}/me`);
  else assert.equal(e.reconnect_uri, undefined);
}

test('invalid_grant: the event (after the receiver comes back), /me, /metrics, the admin page and the gateway\'s next calls name it; a reconnection pushes "recovered"', { timeout: 120000 }, async () => {
  const k = await connect('heidi');
  const subject = v.sql(`SELECT u.subject FROM consents k JOIN users u ON u.id = k.user_id WHERE k.id = '${k.cid}'`);
  assert.equal((await v.release(k.grant, 'list')).status, 200);
  assert.deepEqual(await connections(), { ok: 1, broken: 0 });

  // The person removes the app at the provider: the next refresh is refused for good.
  await control('revoke-user', { mode: MODE, user: 'heidi' });
  await sleep((TTL - MARGIN) * 1000 + 300);
  const r = await v.release(k.grant, 'list');
  assert.equal(r.status, 400, r.text);
  assert.equal(r.body.error, 'invalid_grant');
  assert.match(r.body.error_description, /needs the person again: the provider refused the refresh token \(invalid_grant\)/);
  assert.ok(r.body.error_description.includes(`${v.url}/me`), r.body.error_description);
  assert.equal(v.sql(`SELECT reconnect_required || '|' || reconnect_reason FROM consents WHERE id = '${k.cid}'`), '1|refresh_refused');
  // The next release, on a consent marked already, says the same.
  const again = await v.release(k.grant, 'list');
  assert.equal(again.body.error_description, r.body.error_description);
  // A new grant request: consent_required, with the reason.
  const ask = await v.gw.exchange(k.ask);
  assert.equal(ask.body.error, 'consent_required');
  assert.match(ask.body.error_description, /must be made again \(the provider refused the refresh token \(invalid_grant\)/);

  // The receiver is down: the event waits in the outbox after a failed attempt.
  const tried = await v.waitFor(() => {
    const row = v.sql(`SELECT kind || '|' || attempts || '|' || delivered_at || '|' || coalesce(last_error, '') FROM events_outbox WHERE consent_id = '${k.cid}' AND kind = 'reconnect_required'`);
    return row && Number(row.split('|')[1]) >= 1 ? row : null;
  }, 15000);
  assert.ok(tried, 'a failed attempt is recorded');
  assert.match(tried, /^reconnect_required\|\d+\|0\|no answer/);

  // /me says why, in words.
  const me = await req(k.jar, `${v.url}/me`);
  const html = await me.text();
  assert.equal(me.status, 200);
  assert.match(html, /Reconnect needed\.<\/strong> The provider no longer accepts this connection: it refused to renew access/);

  // /metrics counts it.
  assert.deepEqual(await connections(), { ok: 0, broken: 1 });

  // The admin page's filter lists it with the reason.
  const { jar: adminJar, final } = await consentdLogin({ url: v.url, user: 'admin', password: 'admin-password' });
  assert.equal(final.status, 303);
  const ad = await req(adminJar, `${v.url}/admin?state=reconnect_required`);
  const adminHtml = await ad.text();
  assert.equal(ad.status, 200, adminHtml.slice(0, 300));
  assert.ok(adminHtml.includes(`/admin/consents/${k.cid}`), 'the broken connection is listed');
  assert.match(adminHtml, /reconnect_required<br><span class="muted reconnect-why">The provider no longer accepts this connection: it refused to renew access/);

  // The receiver comes back: the event arrives (the outbox retries), verified.
  const rcv = await startReceiver({ port: rport, consentdUrl: v.url });
  try {
    assert.ok(await v.waitFor(() => rcv.got.length >= 1, 30000), 'the reconnect_required SET arrives');
    assert.deepEqual(rcv.refused, []);
    checkHealthSet(rcv.got[0], { cid: k.cid, state: 'reconnect_required', subject });

    // The person reconnects: "recovered" for the new consent.
    const k2 = await connect('heidi');
    assert.notEqual(k2.cid, k.cid);
    assert.equal((await v.release(k2.grant, 'list')).status, 200);
    const recovered = () => rcv.got.find((g) => g.payload.events[HEALTH]?.state === 'recovered');
    assert.ok(await v.waitFor(recovered, 20000), 'the recovered SET arrives');
    checkHealthSet(recovered(), { cid: k2.cid, state: 'recovered', subject });
    assert.deepEqual(rcv.refused, []);
    assert.deepEqual(await connections(), { ok: 1, broken: 0 });
  } finally {
    await rcv.stop();
  }
});

test('the proxy: the next call on a connection the provider ended answers 401 naming the reason and /me', { timeout: 60000 }, async () => {
  const k = await connect('ivan', PROXY_RES);
  const call = () => fetch(`${v.url}/proxy/${PROXY_RES}/whoami`, { headers: { authorization: GW_AUTH, 'consentd-grant': k.grant } });
  const ok = await call();
  assert.equal(ok.status, 200, await ok.text());
  await control('revoke-user', { mode: MODE, user: 'ivan' });
  await sleep((TTL - MARGIN) * 1000 + 300);
  for (let i = 0; i < 2; i += 1) {           // the call that finds out, and the next one
    const r = await call();
    const body = await r.json();
    assert.equal(r.status, 401, JSON.stringify(body));
    assert.equal(body.error, 'invalid_token');
    assert.match(body.error_description, /needs the person again: the provider refused the refresh token \(invalid_grant\)/);
    assert.ok(body.error_description.includes(`${v.url}/me`), body.error_description);
  }
  assert.equal(v.sql(`SELECT reconnect_reason FROM consents WHERE id = '${k.cid}'`), 'refresh_refused');
});

test('revoked at the provider: an upstream 401 to an unexpired token, then a refused refresh, marks the connection "revoked" and that call says so', { timeout: 60000 }, async () => {
  const k = await connect('judy', PROXY_RES);
  const call = () => fetch(`${v.url}/proxy/${PROXY_RES}/whoami`, { headers: { authorization: GW_AUTH, 'consentd-grant': k.grant } });
  const ok = await call();
  assert.equal(ok.status, 200, await ok.text());
  // As with a provider's hour-long tokens: consentd's copy is far from expiry, and older than the
  // minute between forced refreshes (VAULT_FORCED_REFRESH_MIN).
  v.sql(`UPDATE vault_records SET updated_at = updated_at - 120, access_expires_at = access_expires_at + 600 WHERE consent_id = '${k.cid}'`);
  await control('revoke-user', { mode: MODE, user: 'judy' });
  const r = await call();
  const body = await r.json();
  assert.equal(r.status, 401, JSON.stringify(body));
  assert.equal(body.error, 'invalid_token');
  assert.equal(body.error_description, `the provider connection needs the person again: the access was revoked at the provider: it refused the unexpired token and the refresh token (invalid_grant); ask for consent again and the person reconnects (they see why at ${v.url}/me)`);
  assert.equal(v.sql(`SELECT reconnect_required || '|' || reconnect_reason FROM consents WHERE id = '${k.cid}'`), '1|revoked');
  assert.equal(v.sql(`SELECT count(*) FROM events_outbox WHERE consent_id = '${k.cid}' AND kind = 'reconnect_required' AND reason = 'revoked'`), '1', 'its event is in the outbox');
  assert.match(v.sql(`SELECT detail FROM audit WHERE action = 'vault.reconnect_required' AND consent_id = '${k.cid}'`), /revoked at the provider/);
  // /me says it in the person's words.
  const me = await req(k.jar, `${v.url}/me`);
  assert.match(await me.text(), /Reconnect needed\.<\/strong> The provider no longer accepts this connection: the access was revoked at the provider\./);
});

test('proactive_refresh: an offline consent\'s token is refreshed ahead of expiry with no agent call; a refusal marks it before any call', { timeout: 60000 }, async () => {
  const k = await connect('ken', AHEAD_RES, { agentId: 'nightly', offline: true });
  assert.equal(v.sql(`SELECT offline FROM consents WHERE id = '${k.cid}'`), '1');
  const byPass = () => Number(v.sql(`SELECT count(*) FROM audit WHERE action = 'vault.refreshed' AND actor = 'system' AND consent_id = '${k.cid}'`));
  assert.ok(await v.waitFor(() => byPass() >= 1, 15000), 'refreshed by the background pass');
  assert.equal(v.sql(`SELECT count(*) FROM audit WHERE action = 'vault.released' AND consent_id = '${k.cid}'`), '0', 'no agent asked');
  assert.equal(v.sql(`SELECT reconnect_required FROM consents WHERE id = '${k.cid}'`), '0');
  // The person removes the app at the provider: the next pass finds out, no agent call needed.
  await control('revoke-user', { mode: MODE, user: 'ken' });
  assert.ok(await v.waitFor(() => v.sql(`SELECT reconnect_required FROM consents WHERE id = '${k.cid}'`) === '1', 15000), 'marked by the pass');
  assert.equal(v.sql(`SELECT reconnect_reason FROM consents WHERE id = '${k.cid}'`), 'refresh_refused');
  assert.equal(v.sql(`SELECT count(*) FROM events_outbox WHERE consent_id = '${k.cid}' AND kind = 'reconnect_required'`), '1');
  assert.equal(v.sql(`SELECT count(*) FROM audit WHERE action = 'vault.released' AND consent_id = '${k.cid}'`), '0');
  // The agent's next call hears why.
  const r = await v.release(k.grant, 'list');
  assert.equal(r.body.error, 'invalid_grant');
  assert.match(r.body.error_description, /the provider refused the refresh token \(invalid_grant\)/);
});

test('proactive_refresh with single-use refresh tokens: every rotated token is stored and used once (two nodes under TEST_NODES=2)', { timeout: 60000 }, async () => {
  const k = await connect('lia', ROT_RES, { agentId: 'nightly', offline: true });
  const byPass = () => Number(v.sql(`SELECT count(*) FROM audit WHERE action = 'vault.refreshed' AND actor = 'system' AND consent_id = '${k.cid}'`));
  // Tokens of 4 s refreshed 2 s before expiry: several rounds, each node's pass every 2 s.
  assert.ok(await v.waitFor(() => byPass() >= 4, 30000), `refreshed ahead again and again (${byPass()})`);
  await sleep(400);
  // The provider's log: every refresh of this client answered 200 (a refresh token used twice
  // answers bad_refresh_token and ends the grant), one per stored refresh.
  const lines = p.log().split('\n').filter((l) => /^\[devidp\] TOKEN mode=github-app grant_type=refresh_token /.test(l));
  assert.ok(lines.length >= 4, lines.join('\n'));
  assert.deepEqual(lines.filter((l) => !/ status=200 /.test(l)), [], 'no refresh refused');
  const stored = Number(v.sql(`SELECT count(*) FROM audit WHERE action = 'vault.refreshed' AND consent_id = '${k.cid}'`));
  assert.ok(Math.abs(lines.length - stored) <= 1, `one provider refresh per stored one (${lines.length} vs ${stored}; one may be under way)`);
  assert.equal(v.sql(`SELECT reconnect_required FROM consents WHERE id = '${k.cid}'`), '0');
  assert.equal((await v.release(k.grant, 'list')).status, 200);
});
