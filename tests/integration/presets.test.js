// Provider presets end to end (issue #33, docs/providers.md): consentd with one resource per
// preset (`preset = github` ... `atlassian`, provider_base_url at the development provider's
// mode for it, tests/idp/presets.js) connects through the real consent/connect flow, uses the
// released token at the provider's API, refreshes it the provider's way, revokes it the
// provider's way when the person revokes, and reconnects:
// - github: comma-separated scopes answered, no refresh token, tokens without expiry, DELETE
//   /applications/{client_id}/token with the client's credentials;
// - github-app: 8 h-style expiring tokens, single-use refresh tokens whose use kills the old
//   access token; 20 concurrent releases in the margin do exactly one refresh (two nodes under
//   TEST_NODES=2) and no refresh token is used twice;
// - google: access_type=offline + prompt=consent, a refresh answer without a refresh token keeps
//   the stored one (the second refresh still works);
// - microsoft: offline_access asked for, the OpenID scopes answered besides the API's are not
//   "more than asked"; no revocation endpoint: the outbox lets the token expire;
// - slack: comma-separated user_scope, the user token under authed_user, auth.revoke;
// - gitlab: RFC 7009 on a self-hosted instance URL, rotating refresh tokens;
// - atlassian: audience=api.atlassian.com, offline_access, the cloud id from
//   accessible-resources (audited), rotating refresh tokens, no revocation endpoint.
// And the failures: a 503 then success keeps the connection; invalid_grant marks it
// reconnect_required and the person reconnects.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startVaultStack, startDownstreamIdp, OriginJar } from '../lib/vaultstack.js';
import { DEFAULT_USERS } from '../lib/idp.js';
import { pollExchange } from '../lib/gateway.js';
import { MODES } from '../idp/presets.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
// The provider's log lines come through a pipe, its answers through a socket: let the log
// catch up before counting.
const settle = () => sleep(400);
const TTL = 4;                  // the providers' access tokens, seconds
const MARGIN = 2;               // refresh_margin
const res = (mode) => `x${mode.replace('-', '')}`;   // the resource of a preset
const ATL_PROXY = 'xatlassianproxy';                 // Atlassian through consentd's proxy
const GW_AUTH = `Basic ${Buffer.from('agent-gateway:gateway-dev-secret').toString('base64')}`;
// Each preset's provider scopes for the one consent scope "read" (Slack's go out comma-joined).
const PSCOPES = {
  github: 'repo read:org', 'github-app': 'repo', google: 'openid.test/drive.readonly',
  microsoft: 'Mail.Read', slack: 'channels:read chat:write', gitlab: 'read_api',
  atlassian: 'read:jira-work',
};
const users = { ...DEFAULT_USERS };
for (const n of ['dave', 'erin', 'frank', 'grace', 'heidi', 'ivan', 'judy', 'ken', 'lia', 'mo']) {
  users[n] = { password: `${n}-password`, name: n, email: `${n}@example.test`, groups: [] };
}

let v;
let p;                          // the development provider with every preset mode
const secret = (mode) => `${mode}-client-secret-for-tests`;
const base = (mode) => `${p.issuer}/${mode}`;

before(async () => {
  p = await startDownstreamIdp({
    clients: MODES.map((m) => ({ client_id: `consentd-${m}`, client_secret: secret(m) })),
    users, more: { presets: MODES, accessTokenTTL: TTL },
  });
  const extra = {};
  let allow = '';
  for (const m of MODES) {
    const r = res(m);
    extra[`resource.${r}`] = {
      name: m, preset: m, provider_base_url: base(m), provider_client_id: `consentd-${m}`,
      provider_client_secret: secret(m), refresh_margin: MARGIN, token_release: 'gateway',
      max_consent: 2592000,
    };
    extra[`scope.${r}.read`] = { description: `Read at ${m}`, provider: PSCOPES[m] };
    extra[`action.${r}.list`] = { description: 'List things', scope: 'read', approval: 'none' };
    allow += ` ${r}:read`;
  }
  // Atlassian behind consentd's proxy: base_url holds {cloud_id}, which the proxy fills with the
  // site the person's connection reaches (docs/providers.md).
  extra[`resource.${ATL_PROXY}`] = {
    name: 'Jira via proxy', preset: 'atlassian', provider_base_url: base('atlassian'),
    provider_client_id: 'consentd-atlassian', provider_client_secret: secret('atlassian'),
    refresh_margin: MARGIN, token_release: 'never', max_consent: 2592000,
    base_url: `${base('atlassian')}/ex/jira/{cloud_id}`,
  };
  extra[`scope.${ATL_PROXY}.read`] = { description: 'Read Jira', provider: PSCOPES.atlassian };
  extra[`action.${ATL_PROXY}.myself`] = { description: 'Who am I', scope: 'read', approval: 'none', route: 'GET /rest/api/3/myself' };
  allow += ` ${ATL_PROXY}:read`;
  extra['agent.porter'] = { name: 'Porter', description: 'Works at every preset', allow: allow.trim(), offline: 'false' };
  v = await startVaultStack({ accessTokenTTL: 60, refreshMargin: MARGIN, users, config: extra });
  for (const [m, r0] of [...MODES.map((m) => [m, res(m)]), ['atlassian', ATL_PROXY]]) {
    const r = await fetch(`${p.issuer}/_devidp/register`, {
      method: 'POST', body: JSON.stringify({ client_id: `consentd-${m}`, redirect_uri: `${v.url}/oauth/callback/${r0}` }),
    });
    assert.equal(r.status, 200);
  }
});
after(async () => {
  await v?.stop();
  await p?.stop();
});

// [{ what, mode, grant_type, status, grant, hint, kind }] from the provider's stderr.
function plog(mode) {
  const out = [];
  for (const line of p.log().split('\n')) {
    const m = /^\[devidp\] (TOKEN|REVOKE) (.*)$/.exec(line);
    if (!m) continue;
    const e = { what: m[1] };
    for (const kv of m[2].split(' ')) { const i = kv.indexOf('='); e[kv.slice(0, i)] = kv.slice(i + 1); }
    e.status = Number(e.status);
    if (!mode || e.mode === mode) out.push(e);
  }
  return out;
}
const refreshes = (mode) => plog(mode).filter((e) => e.what === 'TOKEN' && e.grant_type === 'refresh_token');
const revokes = (mode) => plog(mode).filter((e) => e.what === 'REVOKE');
const control = (path, body) => fetch(`${p.issuer}/_devidp/${path}`, { method: 'POST', body: JSON.stringify(body) });

async function whoami(mode, token) {
  const r = await fetch(`${base(mode)}/_api/whoami`, { headers: { authorization: `Bearer ${token}` } });
  return r.status;
}

// Ask, approve at consentd, sign in at the provider, deliver the callback, poll the grant.
async function connect(mode, user, jar = new OriginJar(), audience = res(mode)) {
  const ask = { subjectToken: await v.idToken(user), audience, scope: 'read', agentId: 'porter' };
  const first = await v.gw.exchange(ask);
  assert.equal(first.body?.error, 'consent_required', JSON.stringify(first.body));
  const a = await v.approveHttp({ jar, consentUri: first.body.consent_uri, user });
  assert.equal(a.status, 303, `approve: ${a.text.slice(0, 300)}`);
  assert.ok(a.location.startsWith(`${base(mode)}/`), `to the ${mode} provider: ${a.location}`);
  const authorize = new URL(a.location);
  const callbackUrl = await v.providerLoginHttp({ jar, authorizeUrl: a.location, user });
  assert.ok(callbackUrl.startsWith(`${v.url}/oauth/callback/${audience}?`), callbackUrl);
  assert.equal(new URL(callbackUrl).searchParams.get('error'), null, `the provider accepted the request: ${callbackUrl}`);
  const d = await v.deliverCallback({ jar, callbackUrl });
  assert.ok(d.first.status < 400, `callback: ${d.first.status} ${d.text?.slice(0, 300)}`);
  const g = await pollExchange(v.gw, ask);
  assert.equal(g.status, 200, JSON.stringify(g.body));
  const { payload } = await v.gw.verify(g.body.access_token);
  return { jar, grant: g.body.access_token, cid: payload.cid, authorize };
}

async function released(grant, mode) {
  const r = await v.release(grant, 'list');
  assert.equal(r.status, 200, `release at ${mode}: ${r.text}`);
  assert.equal(r.body.refresh_token, undefined);
  return r.body;
}

const audit = (action, cid) => v.sql(`SELECT coalesce(detail, '') || '|' || outcome FROM audit WHERE action = '${action}' AND consent_id = '${cid}' ORDER BY seq`);

// Revokes on /me; waits for the outbox to finish the record.
async function revokeAndDrain(k) {
  const r = await v.revokeHttp({ jar: k.jar, cid: k.cid });
  assert.equal(r.status, 303);
  const drained = await v.waitFor(() => Number(v.sql(`SELECT count(*) FROM vault_outbox WHERE consent_id = '${k.cid}'`)) === 0, 20000);
  assert.ok(drained, 'the outbox finished the revoked record');
  await settle();
  return audit('vault.revoked', k.cid);
}

async function reconnect(mode, user) {
  const k = await connect(mode, user);
  const t = await released(k.grant, mode);
  assert.equal(await whoami(mode, t.access_token), 200, 'the reconnected token works');
  return k;
}

test('github (OAuth app): comma scopes, no refresh token, no expiry; revoked by DELETE with the client\'s credentials', async () => {
  const mode = 'github';
  const k = await connect(mode, 'alice');
  assert.equal(k.authorize.searchParams.get('scope'), 'read:org repo');
  const t = await released(k.grant, mode);
  assert.ok(t.expires_in > 364 * 86400, `a GitHub OAuth token does not expire: ${t.expires_in}`);
  assert.equal(await whoami(mode, t.access_token), 200);
  assert.match(audit('vault.connected', k.cid), /provider_scopes=read:org repo refresh=no/);
  await sleep((MARGIN + 1) * 1000);
  assert.equal((await released(k.grant, mode)).access_token, t.access_token, 'nothing to refresh: the same token');
  await settle();
  assert.equal(refreshes(mode).length, 0);
  const done = await revokeAndDrain(k);
  assert.match(done, /refresh=none access=revoked\|ok/);
  assert.deepEqual(revokes(mode).map((e) => [e.hint, e.status]), [['access_token', 204]]);
  assert.equal(await whoami(mode, t.access_token), 401, 'the token is dead at the provider');
  await reconnect(mode, 'alice');
});

test('github-app: the refresh token is single-use and kills the old access token; 20 concurrent releases do one refresh', async () => {
  const mode = 'github-app';
  const k = await connect(mode, 'bob');
  const t0 = await released(k.grant, mode);
  assert.equal(await whoami(mode, t0.access_token), 200);
  await sleep((TTL - MARGIN) * 1000 + 500);
  const rs = await Promise.all(Array.from({ length: 20 }, () => v.release(k.grant, 'list')));
  for (const r of rs) assert.equal(r.status, 200, r.text);
  const tokens = new Set(rs.map((r) => r.body.access_token));
  assert.equal(tokens.size, 1, 'one refreshed token for all 20');
  const [t1] = tokens;
  assert.notEqual(t1, t0.access_token);
  await settle();
  assert.deepEqual(refreshes(mode).map((e) => e.status), [200], 'exactly one refresh, and no refresh token used twice');
  assert.equal(await whoami(mode, t0.access_token), 401, 'the old access token died with the refresh');
  assert.equal(await whoami(mode, t1), 200);
  // The rotated refresh token was stored: the next refresh works too.
  await sleep((TTL - MARGIN) * 1000 + 500);
  const t2 = await released(k.grant, mode);
  assert.notEqual(t2.access_token, t1);
  await settle();
  assert.deepEqual(refreshes(mode).map((e) => e.status), [200, 200]);
  const done = await revokeAndDrain(k);
  assert.match(done, /refresh=not_revocable access=revoked\|ok/);
  assert.equal(await whoami(mode, t2.access_token), 401);
  await reconnect(mode, 'bob');
});

test('google: offline access with consent asked again; a refresh answer without a refresh token keeps the stored one', async () => {
  const mode = 'google';
  const k = await connect(mode, 'carol');
  assert.equal(k.authorize.searchParams.get('access_type'), 'offline');
  assert.equal(k.authorize.searchParams.get('prompt'), 'consent');
  assert.match(audit('vault.connected', k.cid), /refresh=yes/);
  const t0 = await released(k.grant, mode);
  await sleep((TTL - MARGIN) * 1000 + 500);
  const t1 = await released(k.grant, mode);
  assert.notEqual(t1.access_token, t0.access_token);
  assert.match(audit('vault.refreshed', k.cid), /rotated=no/);
  // The answer had no refresh token: the stored one still refreshes.
  await sleep((TTL - MARGIN) * 1000 + 500);
  const t2 = await released(k.grant, mode);
  assert.notEqual(t2.access_token, t1.access_token);
  await settle();
  assert.deepEqual(refreshes(mode).map((e) => e.status), [200, 200]);
  assert.equal(await whoami(mode, t2.access_token), 200);
  const done = await revokeAndDrain(k);
  assert.match(done, /refresh=revoked access=revoked\|ok/);
  assert.equal(await whoami(mode, t2.access_token), 401);
  // Reconnecting asks for consent again, so Google sends a refresh token again.
  const k2 = await reconnect(mode, 'carol');
  assert.match(audit('vault.connected', k2.cid), /refresh=yes/);
});

test('microsoft: offline_access, the OpenID scopes answered besides are not "more than asked"; no revocation endpoint: the outbox waits for expiry', async () => {
  const mode = 'microsoft';
  const k = await connect(mode, 'dave');
  assert.equal(k.authorize.searchParams.get('scope'), 'Mail.Read offline_access');
  assert.match(audit('vault.connected', k.cid), /provider_scopes=Mail.Read refresh=yes/);
  const t0 = await released(k.grant, mode);
  await sleep((TTL - MARGIN) * 1000 + 500);
  const t1 = await released(k.grant, mode);
  assert.notEqual(t1.access_token, t0.access_token);
  assert.match(audit('vault.refreshed', k.cid), /rotated=yes/);
  const done = await revokeAndDrain(k);
  assert.match(done, /access=expired\|expired/);
  assert.equal(revokes(mode).length, 0, 'nothing to call');
  await reconnect(mode, 'dave');
});

test('slack: comma-separated user_scope, the user token under authed_user, auth.revoke', async () => {
  const mode = 'slack';
  const k = await connect(mode, 'erin');
  assert.equal(k.authorize.searchParams.get('user_scope'), 'channels:read,chat:write');
  assert.equal(k.authorize.searchParams.get('scope'), null);
  const t0 = await released(k.grant, mode);
  assert.match(t0.access_token, /^xoxe\.xoxp-/);
  assert.equal(t0.token_type.toLowerCase(), 'bearer');
  assert.equal(await whoami(mode, t0.access_token), 200);
  await sleep((TTL - MARGIN) * 1000 + 500);
  const t1 = await released(k.grant, mode);
  assert.notEqual(t1.access_token, t0.access_token);
  const done = await revokeAndDrain(k);
  assert.match(done, /refresh=not_revocable access=revoked\|ok/);
  assert.deepEqual(revokes(mode).map((e) => e.status), [200]);
  assert.equal(await whoami(mode, t1.access_token), 401);
  await reconnect(mode, 'erin');
});

test('gitlab: an instance URL, rotating refresh tokens, RFC 7009 revocation of both', async () => {
  const mode = 'gitlab';
  const k = await connect(mode, 'frank');
  const t0 = await released(k.grant, mode);
  await sleep((TTL - MARGIN) * 1000 + 500);
  const t1 = await released(k.grant, mode);
  assert.notEqual(t1.access_token, t0.access_token);
  assert.equal(await whoami(mode, t0.access_token), 401, 'GitLab ends the old access token');
  // GitLab's refresh answer may lack expires_in: the preset's 2 h, not the vault's hour.
  assert.ok(t1.expires_in > 7000, `expires_in ${t1.expires_in}`);
  const done = await revokeAndDrain(k);
  assert.match(done, /refresh=revoked access=revoked\|ok/);
  assert.deepEqual(revokes(mode).map((e) => e.hint), ['refresh_token', 'access_token']);
  assert.equal(await whoami(mode, t1.access_token), 401);
  await reconnect(mode, 'frank');
});

test('atlassian: audience and offline_access asked for, the cloud id read from accessible-resources, rotating refresh tokens', async () => {
  const mode = 'atlassian';
  const k = await connect(mode, 'grace');
  assert.equal(k.authorize.searchParams.get('audience'), 'api.atlassian.com');
  assert.equal(k.authorize.searchParams.get('scope'), 'read:jira-work offline_access');
  const m = /sites=([A-Za-z0-9-]+)/.exec(audit('vault.connected', k.cid));
  assert.ok(m, 'the cloud id is audited with the connection');
  const t0 = await released(k.grant, mode);
  const api = (tok) => fetch(`${base(mode)}/ex/jira/${m[1]}/rest/api/3/myself`, { headers: { authorization: `Bearer ${tok}` } });
  assert.equal((await api(t0.access_token)).status, 200, 'the API answers through the cloud id');
  await sleep((TTL - MARGIN) * 1000 + 500);
  const t1 = await released(k.grant, mode);
  assert.notEqual(t1.access_token, t0.access_token);
  assert.equal((await api(t1.access_token)).status, 200);
  await sleep((TTL - MARGIN) * 1000 + 500);
  await released(k.grant, mode);
  await settle();
  assert.deepEqual(refreshes(mode).map((e) => e.status), [200, 200], 'each rotated refresh token used once');
  const done = await revokeAndDrain(k);
  assert.match(done, /\|expired/);
  assert.equal(revokes(mode).length, 0);
  await reconnect(mode, 'grace');
});

test('a 503 then success keeps the connection; invalid_grant marks it reconnect_required and the person reconnects', async () => {
  const mode = 'google';
  const k = await connect(mode, 'heidi');
  const t0 = await released(k.grant, mode);
  await control('refresh-failures', { mode, count: 1, status: 503 });
  await sleep((TTL - MARGIN) * 1000 + 300);
  const during = await released(k.grant, mode);
  assert.equal(during.access_token, t0.access_token, 'the unexpired token, while the provider is down');
  assert.match(v.sql(`SELECT outcome FROM audit WHERE action = 'vault.released' AND consent_id = '${k.cid}' ORDER BY seq DESC LIMIT 1`), /refresh_failed/);
  await sleep(2300);                         // past the 2 s backoff
  const after = await released(k.grant, mode);
  assert.notEqual(after.access_token, t0.access_token, 'refreshed once the provider is back');
  assert.equal(v.sql(`SELECT reconnect_required FROM consents WHERE id = '${k.cid}'`), '0', 'the connection is kept');
  // The person removes the app at the provider: the next refresh is refused for good.
  await control('revoke-user', { mode, user: 'heidi' });
  await sleep((TTL - MARGIN) * 1000 + 300);
  const r = await v.release(k.grant, 'list');
  assert.ok(r.status >= 400, `nothing released: ${r.status} ${r.text}`);
  assert.equal(r.body.access_token, undefined);
  assert.equal(v.sql(`SELECT reconnect_required FROM consents WHERE id = '${k.cid}'`), '1', 'the connection needs the person');
  assert.match(audit('vault.reconnect_required', k.cid), /invalid_grant/);
  await reconnect(mode, 'heidi');
});

test('atlassian through the proxy: base_url\'s {cloud_id} is the site the connection reaches, read at connect', async () => {
  const k = await connect('atlassian', 'ivan', new OriginJar(), ATL_PROXY);
  const m = /sites=([A-Za-z0-9-]+)/.exec(audit('vault.connected', k.cid));
  assert.ok(m, 'the cloud id is audited with the connection');
  assert.equal(v.sql(`SELECT sites FROM vault_records WHERE consent_id = '${k.cid}'`), m[1], 'and kept with the record');
  const call = () => fetch(`${v.url}/proxy/${ATL_PROXY}/rest/api/3/myself`, { headers: { authorization: GW_AUTH, 'consentd-grant': k.grant } });
  const r = await call();
  const body = await r.json();
  assert.equal(r.status, 200, JSON.stringify(body));
  assert.deepEqual(body, { accountId: 'ivan', cloudId: m[1] }, 'the provider answered at /ex/jira/{the cloud id}');
  // A connection that names no site (made before consentd kept them) is refused before the
  // upstream, saying where the person reconnects.
  v.sql(`UPDATE vault_records SET sites = NULL WHERE consent_id = '${k.cid}'`);
  const no = await call();
  const nb = await no.json();
  assert.equal(no.status, 403, JSON.stringify(nb));
  assert.equal(nb.error, 'access_denied');
  assert.equal(nb.error_description, `the provider connection names no site to call (it was made before consentd kept its sites): the person reconnects at ${v.url}/me`);
  assert.match(v.sql(`SELECT detail FROM audit WHERE action = 'proxy.refused' AND consent_id = '${k.cid}' ORDER BY seq DESC LIMIT 1`), /names no site for \{cloud_id\}/);
});
