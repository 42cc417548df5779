// Errors explain themselves, and the log stream tells polling from failure (#14.10,
// #14.11), seen from the outside: the real binary, the real development IdP, the
// gateway's /token calls.  Each refusal's error_description names the check that
// failed -- and never echoes a token, a secret or the caller's own text; then the
// log stream of the same server is read back: JSON lines with error, agent and
// resource for /token, and none of the secrets the calls carried.
//
//   main stack (grant_ttl 2 s): A alice/coder/notes (grant, revoked, expired)
//     B bob/coder/notes (polling)  C carol/butler/notes (denied)  D bob/coder/wiki (reason kept)
//   second stack: ID tokens of 1 s, clock_skew 0, request_ttl 2 s (expired subject, expired request)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startStack } from '../lib/stack.js';
import { getIdToken } from '../lib/idplogin.js';
import { consentdLogin, req, postForm } from '../lib/weblogin.js';
import { gateway, TT_ID_TOKEN, TT_JWT, TT_ACCESS_TOKEN } from '../lib/gateway.js';
import { consentConfig, GATEWAY_APP } from '../lib/fixtures.js';
import { decodeJws, algNone, withClaims } from '../lib/forge.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
async function alignToSecond() {
  const ms = Date.now() % 1000;
  if (ms > 50) await sleep(1000 - ms + 20);
}
const REASON_RULE = 'reason: at most 200 characters, no control characters';

async function harness(opts) {
  const s = await startStack(opts);
  const gw = gateway({ url: s.url });
  const tokens = new Map();
  return {
    s, gw, url: s.url,
    async idToken(user, { fresh = false } = {}) {
      if (fresh || !tokens.has(user)) {
        tokens.set(user, (await getIdToken({
          issuer: s.idp.issuer, ...GATEWAY_APP, user, password: `${user}-password`,
        })).id_token);
      }
      return tokens.get(user);
    },
    async ask(user, args, opt) { return gw.exchange({ subjectToken: await this.idToken(user, opt), ...args }); },
    log() { return readFileSync(join(s.c.dir, 'access.log'), 'utf8'); },
    stop: () => s.stop(),
  };
}

// The refusal, its status and code, and the description: exactly want (a string) or matching it.
function refused(r, status, error, want, what = '') {
  assert.equal(r.status, status, `${what}: ${r.text}`);
  assert.equal(r.body?.error, error, `${what}: ${r.text}`);
  assert.equal(r.headers.get('cache-control'), 'no-store', `${what}: Cache-Control`);
  const d = r.body.error_description;
  assert.equal(typeof d, 'string', `${what}: an error_description: ${r.text}`);
  // RFC 6749 section 5.2: %x20-21 / %x23-5B / %x5D-7E.
  assert.match(d, /^[\x20\x21\x23-\x5b\x5d-\x7e]+$/, `${what}: description characters: ${d}`);
  if (typeof want === 'string') assert.equal(d, want, what);
  else assert.match(d, want, what);
  return d;
}

// The person decides on the consent page at uri (decision approve or deny).
async function decide(h, user, uri, decision = 'approve', extra = {}) {
  const { jar, final, callbackUrl } = await consentdLogin({ url: h.url, user, password: `${user}-password` });
  assert.equal(final.status, 303, `login of ${user}`);
  // The authorization code, the OIDC state, and every cookie (the session) are secrets too.
  for (const k of ['code', 'state']) {
    const v = new URL(callbackUrl).searchParams.get(k);
    if (v && v.length >= 8) secrets.add(v);
  }
  const page = await req(jar, uri);
  const html = await page.text();
  assert.equal(page.status, 200, html.slice(0, 300));
  const form = postForm(html);
  assert.ok(form, 'the consent page has a form');
  for (const c of jar.cookies.values()) if (c.value.length >= 16) secrets.add(c.value);
  // The CSRF token (and any other long hidden value) of the form.
  for (const v of Object.values(form.fields)) if (typeof v === 'string' && v.length >= 16) secrets.add(v);
  const f = { ...form.fields, decision, ...extra };
  for (const name of Object.keys(form.fields)) if (/^s\d+$/.test(name)) f[name] = 'on';
  const duration = (html.match(/<option value="(\d+)"/) || [])[1];
  if (duration) f.duration = duration;
  const done = await req(jar, uri, {
    method: 'POST', body: new URLSearchParams(f).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: h.url },
  });
  assert.equal(done.status, 200, (await done.text()).slice(0, 300));
}

// A grant for (user, args): ask, the person approves, ask again.
async function grantFor(h, user, args) {
  const first = await h.ask(user, args);
  assert.equal(first.body?.error, 'consent_required', first.text);
  await decide(h, user, first.body.consent_uri);
  const g = await h.ask(user, args);
  assert.equal(g.status, 200, g.text);
  return g.body.access_token;
}

// Flow D with a grant as the subject token (the grant check comes first).
const release = (h, grant) => h.gw.exchange({
  subjectToken: grant, subjectTokenType: TT_ACCESS_TOKEN,
  requested_token_type: TT_ACCESS_TOKEN, action: 'list_issues',
});

// Everything secret the calls below carried, for the log check at the end.
const secrets = new Set(['gateway-dev-secret', 'consentd-dev-secret', 'alice-password']);

let h;
before(async () => {
  h = await harness({ config: consentConfig({ keys: { grant_ttl: 2 } }) });
});
after(async () => { await h?.stop(); });

test('subject tokens: each refusal names its check (type, audience, key, algorithm, signature, a consentd grant)', async () => {
  const base = { agentId: 'coder', audience: 'notes', scope: 'read' };
  const real = await h.idToken('alice');
  secrets.add(real);
  const ex = (subjectToken, subjectTokenType = TT_ID_TOKEN, extra = {}) =>
    h.gw.exchange({ ...base, subjectToken, subjectTokenType, ...extra });

  refused(await h.gw.exchange({ ...base }), 400, 'invalid_request', 'subject_token is missing');
  refused(await ex(real, 'urn:ietf:params:oauth:token-type:saml2'), 400, 'invalid_request',
    'subject_token_type is not one this consentd accepts (urn:ietf:params:oauth:token-type: id_token, access_token, jwt)');

  // An ID token the IdP made for consentd itself: aud consentd, not a gateway audience.
  const forConsentd = (await getIdToken({
    issuer: h.s.idp.issuer, clientId: 'consentd', clientSecret: 'consentd-dev-secret',
    redirectUri: `${h.url}/callback`, user: 'alice', password: 'alice-password',
  })).id_token;
  secrets.add(forConsentd);
  assert.equal(decodeJws(forConsentd).payload.aud, 'consentd');
  refused(await ex(forConsentd), 400, 'invalid_request', 'subject token has the wrong audience');

  refused(await ex(algNone(real, { keepSignature: true })), 400, 'invalid_request',
    'subject token uses an algorithm that is not allowed');
  refused(await ex(algNone(real)), 400, 'invalid_request', 'subject token is not a well-formed compact JWS');
  refused(await ex(withClaims(real, { sub: 'bob' })), 400, 'invalid_request', 'subject token has a bad signature');
  const { header, parts } = decodeJws(real);
  const otherKid = `${Buffer.from(JSON.stringify({ ...header, kid: 'no-such-kid' })).toString('base64url')}.${parts[1]}.${parts[2]}`;
  refused(await ex(otherKid), 400, 'invalid_request',
    'subject token is signed with a key the IdP does not publish (unknown kid)');
  refused(await ex('not-a-jwt'), 400, 'invalid_request', 'subject token is not a well-formed compact JWS');

  // A grant consentd issued is never a subject, whatever the type says -- and it is named.
  const grant = await grantFor(h, 'alice', base);
  secrets.add(grant);
  for (const t of [TT_JWT, TT_ACCESS_TOKEN, TT_ID_TOKEN]) {
    refused(await ex(grant, t), 400, 'invalid_request',
      'the subject token is a consentd grant; send the person\'s token from the IdP', t);
  }
  // None of the descriptions above held token text.
  const ok = await ex(real);
  assert.equal(ok.status, 200, ok.text);
  secrets.add(ok.body.access_token);
});

test('subject tokens: an expired ID token says "subject token expired"', async () => {
  const x = await harness({
    idpOptions: { ttl: { IdToken: 1 } },
    config: consentConfig({ oidc: { clock_skew: 0 }, consent: { request_ttl: 2, interval: 1, deny_cooldown: 3600, max_pending_per_user: 5 } }),
  });
  try {
    const t = await x.idToken('alice');
    const { payload } = decodeJws(t);
    assert.ok(payload.exp - payload.iat <= 1, `ID token lifetime ${payload.exp - payload.iat}`);
    await sleep(2500);
    const r = await x.gw.exchange({ subjectToken: t, agentId: 'coder', audience: 'notes', scope: 'read' });
    refused(r, 400, 'invalid_request', 'subject token expired');
  } finally {
    await x.stop();
  }
});

test('an expired consent request says so: expired_token', async () => {
  // Its own IdP, whose ID tokens live as long as usual: with the 1 s ones above, a
  // loaded machine let bob's fresh token expire before consentd saw it (CI).
  const x = await harness({
    config: consentConfig({ oidc: { clock_skew: 0 }, consent: { request_ttl: 2, interval: 1, deny_cooldown: 3600, max_pending_per_user: 5 } }),
  });
  try {
    // A consent request nobody decided on, asked again after request_ttl.
    const ask = { agentId: 'coder', audience: 'notes', scope: 'write' };
    const first = await x.ask('bob', ask, { fresh: true });
    refused(first, 400, 'consent_required', /^the person has not consented: send them to consent_uri, then poll every 1 s$/);
    await sleep(3100);
    refused(await x.ask('bob', ask, { fresh: true }), 400, 'expired_token',
      'the consent request expired before the person decided; the next call starts a new one');
  } finally {
    await x.stop();
  }
});

test('grants presented back: "grant revoked", "grant expired", "not a consentd grant" at /token and at the proxy', async () => {
  const ask = { agentId: 'coder', audience: 'notes', scope: 'read write' };
  const grant = await grantFor(h, 'alice', ask);
  secrets.add(grant);
  // Alive: the grant passes its check (and the resource has no provider, which is said).
  refused(await release(h, grant), 400, 'invalid_target', 'the grant\'s resource has no provider');
  // An introspection of it (the log check at the end looks for the grant in its line too).
  const live = await h.gw.introspect(grant);
  assert.equal(live.status, 200, live.text);
  assert.equal(live.body.active, true, live.text);
  const rv = await h.gw.revoke(grant);
  assert.equal(rv.status, 200, rv.text);
  refused(await release(h, grant), 400, 'invalid_request', 'subject token: grant revoked');
  const px = await fetch(`${h.url}/proxy/notes/anything`, {
    headers: { authorization: `Basic ${Buffer.from('agent-gateway:gateway-dev-secret').toString('base64')}`, 'consentd-grant': grant },
  });
  const pb = await px.json();
  assert.equal(px.status, 401);
  assert.deepEqual(pb, { error: 'invalid_token', error_description: 'grant revoked' });

  // grant_ttl is 2 s here: a fresh grant, then wait it out.
  const g2 = await h.ask('alice', ask);
  assert.equal(g2.status, 200, g2.text);
  secrets.add(g2.body.access_token);
  await sleep(3000);
  refused(await release(h, g2.body.access_token), 400, 'invalid_request', 'subject token: grant expired');

  // An IdP token, a forged token: not a consentd grant.
  refused(await release(h, await h.idToken('alice')), 400, 'invalid_request', 'subject token: not a consentd grant');
  refused(await release(h, algNone(g2.body.access_token)), 400, 'invalid_request', 'subject token: not a consentd grant');
  refused(await h.gw.exchange({ subjectToken: g2.body.access_token, subjectTokenType: TT_ID_TOKEN,
    requested_token_type: TT_ACCESS_TOKEN, action: 'x' }), 400, 'invalid_request',
  'subject_token_type must be urn:ietf:params:oauth:token-type:access_token (the subject token is a grant)');
  refused(await h.gw.exchange({ subjectTokenType: TT_ACCESS_TOKEN, requested_token_type: TT_ACCESS_TOKEN, action: 'x' }),
    400, 'invalid_request', 'subject_token (the grant) is missing');
  refused(await h.gw.refresh('no-such-refresh-token'), 400, 'invalid_grant',
    'the refresh token is unknown');
});

// Issue 35: a gateway tells theft detection (a used refresh token presented again) from
// the other ends of a refresh token; each is invalid_grant, each said apart.
test('refresh refusals say which case: reuse detected, a family revoked by it, revoked at /revoke, unknown', async () => {
  const args = { agentId: 'butler', audience: 'notes', scope: 'read' };
  const first = await h.ask('bob', args);
  assert.equal(first.body?.error, 'consent_required', first.text);
  await decide(h, 'bob', first.body.consent_uri, 'approve', { offline: 'on' });
  const g = await h.ask('bob', args);
  assert.equal(g.status, 200, g.text);
  const r1 = g.body.refresh_token;
  assert.ok(r1, `an offline consent gives a refresh token: ${g.text}`);
  const g2 = await h.gw.refresh(r1);
  assert.equal(g2.status, 200, g2.text);
  for (const t of [r1, g2.body.refresh_token]) secrets.add(t);
  const said = new Set();
  // The thief (or the holder) presents r1 again: reuse detected, the family dies.
  said.add(refused(await h.gw.refresh(r1), 400, 'invalid_grant',
    'the refresh token was already used: a used token presented again means it was copied, '
    + 'so its whole family is now revoked (reuse detected); start again with a token exchange', 'reuse'));
  // The holder's current token: revoked by that detection, and told so.
  said.add(refused(await h.gw.refresh(g2.body.refresh_token), 400, 'invalid_grant',
    'the refresh token\'s family was revoked because one of its used tokens was presented again '
    + '(reuse detected); start again with a token exchange', 'the family after reuse'));
  // A new family of the same consent, revoked by the gateway itself at /revoke.
  const g3 = await h.ask('bob', args);
  assert.equal(g3.status, 200, g3.text);
  secrets.add(g3.body.refresh_token);
  assert.equal((await h.gw.revoke(g3.body.refresh_token)).status, 200);
  said.add(refused(await h.gw.refresh(g3.body.refresh_token), 400, 'invalid_grant',
    'the refresh token was revoked (at /revoke)', 'revoked'));
  said.add(refused(await h.gw.refresh('rt_unknown-but-well-formed-0123456789'), 400, 'invalid_grant',
    'the refresh token is unknown', 'unknown'));
  assert.equal(said.size, 4, [...said].join('\n'));
});

test('the call itself: missing agent_id, unknown agent, missing or foreign scope, the reason rule, targets', async () => {
  const t = await h.idToken('carol');
  secrets.add(t);
  const ex = (args) => h.gw.exchange({ subjectToken: t, ...args });
  refused(await ex({ audience: 'notes', scope: 'read' }), 400, 'invalid_request', 'agent_id is missing');
  refused(await ex({ agentId: 'nobody', audience: 'notes', scope: 'read' }), 400, 'invalid_request',
    'agent_id names no configured agent');
  refused(await ex({ agentId: 'coder', audience: 'notes' }), 400, 'invalid_request', 'scope is missing');
  refused(await ex({ agentId: 'coder', audience: 'notes', scope: 'delete' }), 400, 'invalid_scope',
    'scope delete is not configured for resource notes');
  refused(await ex({ agentId: 'coder', audience: 'wiki', scope: 'admin' }), 400, 'invalid_scope',
    'agent coder may not ask for scope admin of resource wiki ([agent.coder] allow)');
  refused(await ex({ agentId: 'coder', scope: 'read' }), 400, 'invalid_target',
    'the resource is missing: name it with audience or resource');
  refused(await ex({ agentId: 'coder', audience: 'nowhere', scope: 'read' }), 400, 'invalid_target',
    'audience names no configured resource');
  refused(await ex({ agentId: 'coder', audience: 'notes', resource: 'https://wiki.example.test/api', scope: 'read' }),
    400, 'invalid_target', 'audience and resource name different resources');

  // The reason: one sentence for every way it breaks the rule, none of its text echoed.
  const bad = [
    ['201 characters', 'r'.repeat(201)],
    ['201 two-byte characters', 'é'.repeat(201)],
    ['1500 characters', 'MARKER-'.repeat(215)],
    ['a newline', 'MARKER line\nbreak'],
    ['a bell', 'MARKER \u0007'],
    ['an escape sequence', 'MARKER \u001b[31mred'],
    ['DEL', 'MARKER \u007f'],
    ['a C1 control (CSI)', 'MARKER \u009b31m'],
  ];
  for (const [what, reason] of bad) {
    const d = refused(await ex({ agentId: 'coder', audience: 'notes', scope: 'read', reason }), 400,
      'invalid_request', REASON_RULE, what);
    assert.doesNotMatch(d, /MARKER/);
  }
  // Exactly 200 characters is fine: consent_required.
  refused(await ex({ agentId: 'coder', audience: 'notes', scope: 'read', reason: 'é'.repeat(200) }), 400,
    'consent_required', /send them to consent_uri/);
});

test('polling: consent_required, authorization_pending and slow_down say what to do; a new reason is kept out, and said so', async () => {
  const ask = { agentId: 'coder', audience: 'notes', scope: 'read', reason: 'to read your notes' };
  await h.idToken('bob');
  await alignToSecond();                // the server counts whole seconds: two calls, one second
  const first = await h.ask('bob', ask);
  refused(first, 400, 'consent_required', 'the person has not consented: send them to consent_uri, then poll every 1 s');
  const fast = await h.ask('bob', ask);
  refused(fast, 400, 'slow_down', 'polled faster than the interval: wait 6 s between calls from now on');
  assert.equal(fast.body.interval, 6);
  await sleep(6200);
  refused(await h.ask('bob', ask), 400, 'authorization_pending', 'the person has not decided yet; poll again in 6 s');
  // New scopes join the pending request, and the answer says the request was updated.
  await sleep(6200);
  const merged = await h.ask('bob', { ...ask, scope: 'read write' });
  refused(merged, 400, 'consent_required', /^the request was updated: the pending request now also asks for the new scopes/);
  assert.equal(merged.body.consent_request_id, first.body.consent_request_id);

  // Another reason, same scopes, on another triple: kept out of the pending request, and said so.
  const d = { agentId: 'coder', audience: 'wiki', scope: 'read', reason: 'to read the wiki page you named' };
  const d1 = await h.ask('bob', d);
  refused(d1, 400, 'consent_required', /send them to consent_uri/);
  await sleep(1200);
  const d2 = await h.ask('bob', { ...d, reason: 'URGENT: approve now or lose your data' });
  const kept = refused(d2, 400, 'authorization_pending',
    /^the person has not decided yet; poll again in 1 s; the pending request keeps the reason the person sees/);
  assert.doesNotMatch(kept, /URGENT/);
  const page = await fetch(d1.body.consent_uri, { redirect: 'manual' });
  assert.equal(page.status, 303, 'the page needs a login first');
  const { jar } = await consentdLogin({ url: h.url, user: 'bob', password: 'bob-password' });
  const html = await (await req(jar, d1.body.consent_uri)).text();
  assert.match(html, /to read the wiki page you named/);
  assert.doesNotMatch(html, /URGENT/);
});

test('denial: access_denied says from when a new request can be made', async () => {
  const ask = { agentId: 'butler', audience: 'notes', scope: 'read' };
  const first = await h.ask('carol', ask);
  refused(first, 400, 'consent_required', /send them to consent_uri/);
  await decide(h, 'carol', first.body.consent_uri, 'deny');
  const r = await h.ask('carol', ask);
  const dsc = refused(r, 400, 'access_denied',
    /^the person denied this request; a new request can be made from \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  const until = Date.parse(dsc.split(' from ')[1]);
  const expect = Date.now() + 3600 * 1000;                    // consentConfig's deny_cooldown
  assert.ok(Math.abs(until - expect) < 60 * 1000, `${dsc} is about an hour from now`);
});

// Runs last: everything above went through this server.
test('the log stream: JSON lines; /token lines carry error, agent and resource, so polling is told from failure; no secret', async () => {
  await sleep(200);
  const text = h.log();
  const lines = text.trim().split('\n');
  const all = lines.map((l, i) => {
    try { return JSON.parse(l); } catch { assert.fail(`line ${i + 1} is not JSON: ${l}`); }
    return null;
  });
  for (const l of all) {
    assert.equal(typeof l.ts, 'string');
    assert.ok(['debug', 'info', 'warn', 'error'].includes(l.level), JSON.stringify(l));
    assert.ok(typeof l.msg === 'string' || l.event === 'request', JSON.stringify(l));
  }
  const tok = all.filter((l) => l.event === 'request' && l.route === '/token');
  assert.ok(tok.length >= 30, `${tok.length} /token lines`);
  for (const l of tok) {
    assert.equal(l.method, 'POST');
    assert.equal(typeof l.request_id, 'string');
    assert.equal(typeof l.ms, 'number');
    if (l.status === 200) assert.equal(l.error, undefined, JSON.stringify(l));
    else assert.equal(typeof l.error, 'string', JSON.stringify(l));
  }
  const pending = tok.filter((l) => l.error === 'authorization_pending');
  assert.ok(pending.length >= 2);
  for (const l of pending) {
    assert.equal(l.status, 400);
    assert.equal(l.agent, 'coder');
    assert.ok(['notes', 'wiki'].includes(l.resource), JSON.stringify(l));
    assert.match(l.error_description, /has not decided yet/);
  }
  assert.ok(tok.some((l) => l.error === 'slow_down' && l.agent === 'coder' && l.resource === 'notes'));
  assert.ok(tok.some((l) => l.error === 'access_denied' && l.agent === 'butler' && l.resource === 'notes'));
  assert.ok(tok.some((l) => l.error === 'consent_required' && l.agent === 'coder'));
  // Failures: the check that failed, and agent and resource once the call got that far
  // (a refused grant names neither: nothing in it is believed).
  const revoked = tok.find((l) => l.error_description === 'subject token: grant revoked');
  assert.ok(revoked, 'the revoked grant is logged with its reason');
  assert.equal(revoked.error, 'invalid_request');
  assert.equal(revoked.agent, undefined);
  const noProvider = tok.find((l) => l.error_description === 'the grant\'s resource has no provider');
  assert.equal(noProvider.agent, 'coder');
  assert.equal(noProvider.resource, 'notes');
  const noAgent = tok.find((l) => l.error_description === 'agent_id is missing');
  assert.equal(noAgent.error, 'invalid_request');
  assert.equal(noAgent.resource, 'notes');
  assert.equal(noAgent.agent, undefined);
  assert.ok(tok.some((l) => l.error === 'invalid_request' && l.error_description === 'subject token has a bad signature'));
  const granted = tok.filter((l) => l.status === 200);
  assert.ok(granted.filter((l) => l.agent === 'coder').length >= 2, JSON.stringify(granted));
  // (butler's grants and refreshes are the refresh test's)
  assert.ok(granted.every((l) => ['coder', 'butler', undefined].includes(l.agent) && [undefined, 'notes'].includes(l.resource)), JSON.stringify(granted));
  const proxied = all.find((l) => l.event === 'request' && l.route === '/proxy/{resource}/{rest*}');
  assert.equal(proxied.error, 'invalid_token');
  // No grant, subject token, client secret, password or code anywhere in the stream.
  const key = readFileSync(join(h.s.c.dir, 'master.key'));
  for (const k of [key.toString('hex'), key.toString('base64'), key.toString('base64url')]) secrets.add(k);
  assert.ok(secrets.size >= 12, `${secrets.size} secrets looked for`);
  for (const s of secrets) assert.ok(!text.includes(s), `the log holds a secret (${s.slice(0, 12)}...)`);
  assert.doesNotMatch(text, /eyJ/, 'no JWT of any kind');
  assert.doesNotMatch(text, /code=|Basic /);
  assert.doesNotMatch(text, /MARKER|URGENT/, 'no reason text the agent sent');
});
