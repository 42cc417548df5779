// The attacker's side of flows A, B, C and G against the real IdP and the real
// binary: another account at the consent link, CSRF and Origin, form tampering,
// expired requests, gateway authentication, forged subject tokens, targets and
// scopes, polling too fast, flooding, hostile reason text, denial, revocation.
//
// One stack serves most tests; each test uses its own (user, agent, resource)
// triples so that pending requests never meet.  Tests that need other settings
// (a 2 s request_ttl, max_pending_per_user = 2, 1 s ID tokens) start their own.
//
//   main stack triples:  T1 alice/coder/notes  T2 carol/coder/notes  T3 bob/coder/notes + bob/coder/wiki
//                        T6 admin/coder/notes  T7 carol/butler/notes + carol/coder/wiki + carol/scribe/notes
//                        T8 bob/butler/notes   T10 alice/butler/notes  T11 alice/coder/wiki
//                        T12 admin/butler/notes
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { startStack } from '../lib/stack.js';
import { startIdp } from '../lib/idp.js';
import { CookieJar, getIdToken, basicAuth } from '../lib/idplogin.js';
import { consentdLogin, req, postForm } from '../lib/weblogin.js';
import {
  gateway, TOKEN_EXCHANGE, TT_ID_TOKEN, TT_JWT, TT_ACCESS_TOKEN,
} from '../lib/gateway.js';
import { consentConfig, GATEWAY_APP } from '../lib/fixtures.js';
import {
  decodeJws, algNone, hmacWithPublicKey, withClaims, fetchIdpJwk,
} from '../lib/forge.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });

// --- helpers -----------------------------------------------------------------

// A stack with its gateway client and per-user caches (ID tokens, browser jars).
async function harness(opts) {
  const s = await startStack(opts);
  const gw = gateway({ url: s.url });
  const tokens = new Map();
  const jars = new Map();
  return {
    s, gw, url: s.url,
    // An ID token of the gateway's app (aud gateway-app) for user: a subject token.
    async idToken(user) {
      if (!tokens.has(user)) {
        tokens.set(user, (await getIdToken({
          issuer: s.idp.issuer, ...GATEWAY_APP, user, password: `${user}-password`,
        })).id_token);
      }
      return tokens.get(user);
    },
    // A cookie jar holding a consentd session of user (one login per user).
    async jar(user) {
      if (!jars.has(user)) {
        const { jar, final } = await consentdLogin({ url: s.url, user, password: `${user}-password` });
        assert.equal(final.status, 303, `login of ${user}`);
        jars.set(user, jar);
      }
      return jars.get(user);
    },
    // Flow A as the gateway: ask(user, { agentId, audience, scope, ... }).
    async ask(user, args) {
      return gw.exchange({ subjectToken: await this.idToken(user), ...args });
    },
    // Rows of the live database, either backend (tests/lib/consentd.js).
    sql: (query) => s.c.rows(query),
    stop: () => s.stop(),
  };
}

// GET a consent (or any) page with a jar: { status, html, headers, form, duration }.
async function openPage(jar, url) {
  const res = await req(jar, url);
  const html = await res.text();
  return {
    status: res.status, html, headers: res.headers,
    form: postForm(html), duration: (html.match(/<option value="(\d+)"/) || [])[1],
  };
}

// POST a browser form.  fields: an object or [name, value] pairs (duplicates allowed);
// headers: merged over content-type and Origin = the stack's URL; a null value drops a header.
async function postPage(jar, url, fields, headers = {}) {
  const h = { 'content-type': 'application/x-www-form-urlencoded', origin: new URL(url).origin, ...headers };
  for (const k of Object.keys(h)) if (h[k] === null) delete h[k];
  const res = await req(jar, url, { method: 'POST', headers: h, body: new URLSearchParams(fields).toString() });
  return { status: res.status, html: await res.text(), headers: res.headers };
}

// The fields a person sends from a consent page: the CSRF token, the ticked boxes
// (all by default), the first duration offered, the decision; offline only when asked.
function decisionFields(page, { decision = 'approve', boxes, duration = page.duration, offline = false } = {}) {
  assert.ok(page.form, `the page has a form: ${page.html.slice(0, 300)}`);
  const f = { csrf: page.form.fields.csrf, decision };
  if (page.form.fields.version !== undefined) f.version = page.form.fields.version;
  for (const name of Object.keys(page.form.fields)) {
    if (/^s\d+$/.test(name) && (!boxes || boxes.includes(name))) f[name] = 'on';
  }
  if (duration !== undefined) f.duration = duration;
  if (offline) f.offline = 'on';
  return f;
}

// A consent request for (user, agent, resource) approved by the person, then the grant.
async function approvedGrant(h, user, args) {
  const first = await h.ask(user, args);
  assert.equal(first.body?.error, 'consent_required', JSON.stringify(first.body));
  const jar = await h.jar(user);
  const page = await openPage(jar, first.body.consent_uri);
  assert.equal(page.status, 200, page.html.slice(0, 300));
  const done = await postPage(jar, first.body.consent_uri, decisionFields(page));
  assert.equal(done.status, 200, done.html.slice(0, 500));
  assert.match(done.html, /Permission given/);
  const g = await h.ask(user, args);
  assert.equal(g.status, 200, JSON.stringify(g.body));
  return g.body;
}

function assertOAuthError(r, status, error, what = '') {
  assert.equal(r.status, status, `${what} ${r.text}`);
  assert.equal(r.body?.error, error, `${what} ${r.text}`);
  assert.equal(r.headers.get('cache-control'), 'no-store', `${what}: Cache-Control`);
}

// A raw form POST to an OAuth endpoint (for duplicated parameters).
async function rawPost(url, path, body, auth = basicAuth('agent-gateway', 'gateway-dev-secret')) {
  const res = await fetch(`${url}${path}`, {
    method: 'POST', body,
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: auth },
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body: json, text, headers: res.headers };
}

// Waits until the wall clock is just past a second boundary (the server counts in
// whole seconds): two calls made right after land in the same second.
async function alignToSecond() {
  const ms = Date.now() % 1000;
  if (ms > 50) await sleep(1000 - ms + 20);
}

const unescapeHtml = (t) => t.replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)))
  .replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

const requestId = (uri) => new URL(uri).pathname.split('/').pop();

// --- the shared stack -----------------------------------------------------------

let h;
before(async () => {
  h = await harness({
    config: consentConfig({
      'agent.scribe': { name: 'Scribe', description: 'Takes notes for you', allow: 'notes:read', offline: 'false' },
    }),
  });
});
after(async () => { await h?.stop(); });

// --- 1. session binding ---------------------------------------------------------

test('another account at the consent link: 403 with a sign-in-as-another-account link, audited; the request stays for its person', async () => {
  const ask = { agentId: 'coder', audience: 'notes', scope: 'read write', reason: 'tidy up' };
  const first = await h.ask('alice', ask);
  assert.equal(first.body?.error, 'consent_required', first.text);
  const uri = first.body.consent_uri;
  const id = requestId(uri);
  assert.equal(id, first.body.consent_request_id);

  const bob = await h.jar('bob');
  const seen = await openPage(bob, uri);
  assert.equal(seen.status, 403, seen.html.slice(0, 300));
  assert.match(seen.html, /another account/);
  const href = (seen.html.match(/<a\b[^>]*href="([^"]*)"[^>]*>\s*Sign in as another account/) || [])[1];
  assert.ok(href, 'a "sign in as another account" link');
  const login = new URL(unescapeHtml(href), h.url);
  assert.equal(login.origin, h.url);
  assert.equal(login.pathname, '/login');
  assert.equal(login.searchParams.get('prompt'), 'login');
  assert.equal(login.searchParams.get('return_to'), `/consent/${id}`);
  assert.ok(!seen.html.includes('tidy up'), 'bob does not see the agent\'s reason');
  assert.equal(postForm(seen.html), null, 'no decision form for bob');

  const rows = h.sql(`SELECT actor, action, subject, request_id, outcome FROM audit
    WHERE action = 'consent.binding_refused' AND request_id = '${id}'`);
  assert.equal(rows.length, 1, JSON.stringify(rows));
  assert.equal(rows[0].actor, 'user:bob');
  assert.equal(rows[0].subject, 'alice');
  assert.equal(rows[0].outcome, 'refused');

  // Bob posts a decision with his own (valid) CSRF token: refused, nothing changes.
  const bobMe = await openPage(bob, `${h.url}/me`);
  assert.equal(bobMe.status, 200);
  const bobCsrf = bobMe.form.fields.csrf;
  assert.ok(bobCsrf);
  const forged = await postPage(bob, uri, { csrf: bobCsrf, decision: 'approve', s0: 'on', s1: 'on', duration: '3600' });
  assert.equal(forged.status, 403, forged.html.slice(0, 300));
  assert.match(forged.html, /another account/);
  const denyTry = await postPage(bob, uri, { csrf: bobCsrf, decision: 'deny' });
  assert.equal(denyTry.status, 403);
  assert.equal(h.sql(`SELECT status FROM consent_requests WHERE id = '${id}'`)[0].status, 'pending');
  assert.equal(h.sql(`SELECT count(*) AS n FROM audit WHERE request_id = '${id}'
    AND action IN ('consent.request.approved', 'consent.request.denied', 'consent.granted')`)[0].n, 0);
  const still = await h.ask('alice', ask);
  assert.ok(['authorization_pending', 'slow_down'].includes(still.body?.error), still.text);

  // Alice, in her own browser, still sees the request and approves it.
  const alice = await h.jar('alice');
  const page = await openPage(alice, uri);
  assert.equal(page.status, 200, page.html.slice(0, 300));
  assert.match(page.html, /Coding assistant asks for your permission/);
  const done = await postPage(alice, uri, decisionFields(page));
  assert.equal(done.status, 200, done.html.slice(0, 300));
  assert.match(done.html, /Permission given/);
  const g = await h.ask('alice', ask);
  assert.equal(g.status, 200, g.text);
  assert.equal((await h.gw.verify(g.body.access_token)).payload.sub, 'alice');

  // Bob opens the link again after alice decided (issue 35): the page says nothing false
  // ("still waits") and nothing new: word for word what he was told while it was pending.
  const after = await openPage(bob, uri);
  assert.equal(after.status, 403, after.html.slice(0, 300));
  const section = (html) => (html.match(/<section class="error">[\s\S]*?<\/section>/) || [''])[0];
  assert.ok(section(after.html), after.html.slice(0, 500));
  assert.equal(section(after.html), section(seen.html), 'the decided request reads as the pending one did');
  for (const p of [seen, after]) {
    assert.doesNotMatch(p.html, /still waits|waiting|decided|approved|denied/i, section(p.html));
    assert.match(section(p.html), /not yours to see or decide/);
  }
});

// --- 2. CSRF and Origin ---------------------------------------------------------------

test('POST /consent/{id}: CSRF token and Origin / Sec-Fetch-Site are enforced; the request survives', async () => {
  const ask = { agentId: 'coder', audience: 'notes', scope: 'read write' };
  const first = await h.ask('carol', ask);
  assert.equal(first.body?.error, 'consent_required', first.text);
  const uri = first.body.consent_uri;
  const jar = await h.jar('carol');
  const page = await openPage(jar, uri);
  assert.equal(page.status, 200);
  const good = decisionFields(page);

  const { csrf, ...noCsrf } = good;
  const missing = await postPage(jar, uri, noCsrf);
  assert.equal(missing.status, 400, `missing csrf: ${missing.html.slice(0, 300)}`);

  const wrong = await postPage(jar, uri, { ...good, csrf: randomBytes(32).toString('base64url') });
  assert.equal(wrong.status, 403, `wrong csrf: ${wrong.html.slice(0, 300)}`);

  const evil = await postPage(jar, uri, good, { origin: 'http://evil.example' });
  assert.equal(evil.status, 403, `Origin evil: ${evil.html.slice(0, 300)}`);

  const nullCross = await postPage(jar, uri, good, { origin: 'null', 'sec-fetch-site': 'cross-site' });
  assert.equal(nullCross.status, 403, `Origin null + cross-site: ${nullCross.html.slice(0, 300)}`);

  const noOrigin = await postPage(jar, uri, good, { origin: null });
  assert.equal(noOrigin.status, 403, `neither Origin nor Sec-Fetch-Site: ${noOrigin.html.slice(0, 300)}`);

  // Still pending; the real form from the real origin decides it.
  const again = await openPage(jar, uri);
  assert.equal(again.status, 200, again.html.slice(0, 300));
  const ok = await postPage(jar, uri, good, { origin: 'null', 'sec-fetch-site': 'same-origin' });
  assert.equal(ok.status, 200, ok.html.slice(0, 300));
  assert.match(ok.html, /Permission given/);
  const g = await h.ask('carol', ask);
  assert.equal(g.status, 200, g.text);
  assert.equal(g.body.scope, 'read write');
});

// --- 3. form tampering ------------------------------------------------------------------

test('form tampering: extra boxes, extra fields, too long a duration, nothing ticked, a second decision', async () => {
  const ask = { agentId: 'coder', audience: 'notes', scope: 'read write' };
  const first = await h.ask('bob', ask);
  assert.equal(first.body?.error, 'consent_required', first.text);
  const uri = first.body.consent_uri;
  const id = requestId(uri);
  const jar = await h.jar('bob');
  const page = await openPage(jar, uri);
  assert.equal(page.status, 200);
  assert.deepEqual(Object.keys(page.form.fields).filter((n) => /^s\d+$/.test(n)), ['s0', 's1']);
  const good = decisionFields(page);

  const box = await postPage(jar, uri, { ...good, s7: 'on' });
  assert.equal(box.status, 400, `s7 on a 2-scope request: ${box.html.slice(0, 300)}`);
  assert.match(box.html, /did not ask for/);

  for (const [k, v] of [['agent', 'butler'], ['resource', 'wiki'], ['scope', 'admin']]) {
    const r = await postPage(jar, uri, { ...good, [k]: v });
    assert.equal(r.status, 400, `${k}=${v}: ${r.html.slice(0, 300)}`);
    assert.match(r.html, /unknown parameter/, `${k}=${v}`);
  }

  const none = await postPage(jar, uri, decisionFields(page, { boxes: [] }));
  assert.equal(none.status, 400, `approve with nothing ticked: ${none.html.slice(0, 300)}`);

  assert.equal(h.sql(`SELECT status FROM consent_requests WHERE id = '${id}'`)[0].status, 'pending');
  const done = await postPage(jar, uri, good);
  assert.equal(done.status, 200, done.html.slice(0, 300));
  assert.match(done.html, /Permission given/);
  const second = await postPage(jar, uri, decisionFields(page, { boxes: ['s0'] }));
  assert.equal(second.status, 400, `a second decision: ${second.html.slice(0, 300)}`);
  assert.match(second.html, /cannot be decided/);
  // The first decision stands: both scopes, one consent.
  const g = await h.ask('bob', ask);
  assert.equal(g.status, 200, g.text);
  assert.equal(g.body.scope, 'read write');
  assert.equal(h.sql(`SELECT count(*) AS n FROM consents WHERE request_id = '${id}'`)[0].n, 1);
});

test('form tampering: a duration beyond the resource\'s max_consent is refused and decides nothing', async () => {
  const ask = { agentId: 'coder', audience: 'wiki', scope: 'read' };
  const first = await h.ask('bob', ask);
  assert.equal(first.body?.error, 'consent_required', first.text);
  const uri = first.body.consent_uri;
  const id = requestId(uri);
  const jar = await h.jar('bob');
  const page = await openPage(jar, uri);
  assert.equal(page.status, 200);
  const offered = [...page.html.matchAll(/<option value="(\d+)"/g)].map((m) => Number(m[1]));
  assert.ok(offered.length > 0 && offered.every((d) => d <= 86400), `offered ${offered}`);

  const long = await postPage(jar, uri, decisionFields(page, { duration: '999999' }));
  assert.equal(long.status, 400, `duration 999999 > max_consent 86400: ${long.html.slice(0, 300)}`);
  assert.doesNotMatch(long.html, /Permission given/);
  assert.equal(h.sql(`SELECT status FROM consent_requests WHERE id = '${id}'`)[0].status, 'pending');
  assert.equal(h.sql(`SELECT count(*) AS n FROM consents WHERE request_id = '${id}'`)[0].n, 0);
  const still = await openPage(jar, uri);
  assert.equal(still.status, 200, 'the request still waits for a decision');
});

// --- 4. expired requests --------------------------------------------------------------------

test('expired request: the page says so (410), approving fails, the gateway hears expired_token, then a new request', async () => {
  const x = await harness({
    config: consentConfig({ consent: { request_ttl: 2, interval: 1, deny_cooldown: 3600, max_pending_per_user: 5 } }),
  });
  try {
    const ask = { agentId: 'coder', audience: 'notes', scope: 'read' };
    const jar = await x.jar('alice');
    await x.idToken('alice');
    const first = await x.ask('alice', ask);
    assert.equal(first.body?.error, 'consent_required', first.text);
    assert.equal(first.body.expires_in, 2);
    const uri = first.body.consent_uri;
    const csrf = (await openPage(jar, `${x.url}/me`)).form.fields.csrf;
    await sleep(3000);

    const page = await openPage(jar, uri);
    assert.equal(page.status, 410, page.html.slice(0, 300));
    assert.match(page.html, /expired/);
    assert.equal(page.form, null, 'no decision form');

    const post = await postPage(jar, uri, { csrf, decision: 'approve', s0: 'on', duration: '3600' });
    assert.equal(post.status, 400, `approving an expired request: ${post.html.slice(0, 300)}`);
    assert.doesNotMatch(post.html, /Permission given/);

    const exp = await x.ask('alice', ask);
    assertOAuthError(exp, 400, 'expired_token', 'the first call after expiry');
    const next = await x.ask('alice', ask);
    assertOAuthError(next, 400, 'consent_required', 'the call after expired_token');
    assert.notEqual(next.body.consent_request_id, first.body.consent_request_id);
    assert.notEqual(next.body.consent_uri, uri);
  } finally {
    await x.stop();
  }
});

test('expired request nobody opened: expired_token once, then consent_required with a new id', async () => {
  const x = await harness({
    config: consentConfig({ consent: { request_ttl: 2, interval: 1, deny_cooldown: 3600, max_pending_per_user: 5 } }),
  });
  try {
    const ask = { agentId: 'coder', audience: 'notes', scope: 'read' };
    const first = await x.ask('bob', ask);
    assert.equal(first.body?.error, 'consent_required', first.text);
    await sleep(3000);
    assertOAuthError(await x.ask('bob', ask), 400, 'expired_token');
    const next = await x.ask('bob', ask);
    assertOAuthError(next, 400, 'consent_required');
    assert.notEqual(next.body.consent_request_id, first.body.consent_request_id);
  } finally {
    await x.stop();
  }
});

// --- 5. gateway authentication ----------------------------------------------------------------

test('gateway client authentication at /token, /introspect and /revoke: 401 invalid_client with WWW-Authenticate', async () => {
  const bad = {
    'wrong secret': basicAuth('agent-gateway', 'not-the-secret'),
    'no Authorization': null,
    'right secret, wrong id': basicAuth('another-gateway', 'gateway-dev-secret'),
    'id and secret swapped': basicAuth('gateway-dev-secret', 'agent-gateway'),
    'garbage base64': 'Basic %%%not*base64%%%',
    'base64 without a colon': `Basic ${Buffer.from('agent-gateway').toString('base64')}`,
    'Bearer instead of Basic': 'Bearer gateway-dev-secret',
  };
  const endpoints = {
    '/token': { grant_type: TOKEN_EXCHANGE, subject_token: 'abc', subject_token_type: TT_ID_TOKEN,
      audience: 'notes', scope: 'read', agent_id: 'coder' },
    '/introspect': { token: 'abc' },
    '/revoke': { token: 'abc' },
  };
  for (const [path, params] of Object.entries(endpoints)) {
    for (const [what, auth] of Object.entries(bad)) {
      const r = await h.gw.post(path, params, auth);
      assertOAuthError(r, 401, 'invalid_client', `${path} ${what}`);
      assert.match(r.headers.get('www-authenticate') || '', /^Basic\b/, `${path} ${what}: WWW-Authenticate`);
    }
  }
  // The right credentials pass (a garbage token is simply inactive).
  const ok = await h.gw.introspect('abc');
  assert.equal(ok.status, 200, ok.text);
});

// --- 6. subject tokens -------------------------------------------------------------------------

test('subject tokens: other issuer, wrong audience, wrong type, alg none, HMAC with the public key, tampered, a consentd grant', async () => {
  const base = { agentId: 'coder', audience: 'notes', scope: 'read' };
  // A grant consentd issued (admin approved coder on notes) -- and admin's real ID token.
  const grant = await approvedGrant(h, 'admin', base);
  const real = await h.idToken('admin');
  const refuse = async (what, subjectToken, subjectTokenType = TT_ID_TOKEN) => {
    const r = await h.gw.exchange({ ...base, subjectToken, subjectTokenType });
    assertOAuthError(r, 400, 'invalid_request', what);
  };

  // An ID token from a second IdP: same client, same user, another issuer.
  const other = await startIdp();
  try {
    const foreign = (await getIdToken({
      issuer: other.issuer, ...GATEWAY_APP, user: 'alice', password: 'alice-password',
    })).id_token;
    await refuse('an ID token of another IdP', foreign);
  } finally {
    await other.stop();
  }

  // An ID token for consentd itself (aud consentd, not a gateway audience).
  const forConsentd = (await getIdToken({
    issuer: h.s.idp.issuer, clientId: 'consentd', clientSecret: 'consentd-dev-secret',
    redirectUri: `${h.url}/callback`, user: 'alice', password: 'alice-password',
  })).id_token;
  assert.equal(decodeJws(forConsentd).payload.aud, 'consentd');
  await refuse('aud consentd', forConsentd);

  await refuse('subject_token_type saml2', real, 'urn:ietf:params:oauth:token-type:saml2');
  await refuse('alg none, signature dropped', algNone(real));
  await refuse('alg none, signature kept', algNone(real, { keepSignature: true }));
  const { header } = decodeJws(real);
  const { text } = await fetchIdpJwk(h.s.idp.issuer, header.kid);
  await refuse('HS256 keyed with the IdP\'s public JWK', hmacWithPublicKey(real, text));
  await refuse('payload changed (sub bob), signature kept', withClaims(real, { sub: 'bob' }));

  // A grant consentd issued is never a subject token, whatever the type says.
  await refuse('a consentd grant as jwt', grant.access_token, TT_JWT);
  await refuse('a consentd grant as access_token', grant.access_token, TT_ACCESS_TOKEN);

  // The real token still works: the refusals above were about the tokens.
  const ok = await h.gw.exchange({ ...base, subjectToken: real });
  assert.equal(ok.status, 200, ok.text);
  assert.equal((await h.gw.verify(ok.body.access_token)).payload.sub, 'admin');
});

test('subject tokens: an expired ID token (IdP ttl 1 s, clock_skew 0) is invalid_request', async () => {
  const x = await harness({
    idpOptions: { ttl: { IdToken: 1 } },
    config: consentConfig({ oidc: { clock_skew: 0 } }),
  });
  try {
    const t = await x.idToken('alice');
    const { payload } = decodeJws(t);
    assert.ok(payload.exp - payload.iat <= 1, `ID token lifetime ${payload.exp - payload.iat}`);
    await sleep(2500);
    const r = await x.gw.exchange({ subjectToken: t, agentId: 'coder', audience: 'notes', scope: 'read' });
    assertOAuthError(r, 400, 'invalid_request', 'an expired ID token');
  } finally {
    await x.stop();
  }
});

// --- 7. targets and scopes -----------------------------------------------------------------------

test('token exchange: targets, scopes, agents, reason length, duplicated parameters, grant and token types', async () => {
  const t = await h.idToken('carol');
  const ex = (args) => h.gw.exchange({ subjectToken: t, ...args });
  const cases = [
    ['unknown agent_id', { agentId: 'nobody', audience: 'notes', scope: 'read' }, 'invalid_request'],
    ['no agent_id', { audience: 'notes', scope: 'read' }, 'invalid_request'],
    ['unknown audience', { agentId: 'coder', audience: 'nowhere', scope: 'read' }, 'invalid_target'],
    ['unknown resource URI', { agentId: 'coder', resource: 'https://nowhere.example', scope: 'read' }, 'invalid_target'],
    ['audience and resource disagree', { agentId: 'coder', audience: 'notes', resource: 'https://wiki.example.test/api', scope: 'read' }, 'invalid_target'],
    ['unknown scope', { agentId: 'coder', audience: 'notes', scope: 'delete' }, 'invalid_scope'],
    ['scope outside the agent\'s allow list', { agentId: 'coder', audience: 'wiki', scope: 'admin' }, 'invalid_scope'],
    ['one allowed and one forbidden scope', { agentId: 'coder', audience: 'wiki', scope: 'read admin' }, 'invalid_scope'],
    ['missing scope', { agentId: 'coder', audience: 'notes' }, 'invalid_request'],
    ['reason of 201 characters', { agentId: 'coder', audience: 'notes', scope: 'read', reason: 'r'.repeat(201) }, 'invalid_request'],
    ['requested_token_type saml2', { agentId: 'coder', audience: 'notes', scope: 'read', requested_token_type: 'urn:ietf:params:oauth:token-type:saml2' }, 'invalid_request'],
  ];
  for (const [what, args, error] of cases) assertOAuthError(await ex(args), 400, error, what);

  const unsupported = await h.gw.post('/token', { grant_type: 'password', username: 'carol', password: 'carol-password' });
  assertOAuthError(unsupported, 400, 'unsupported_grant_type', 'grant_type password');

  const dup = new URLSearchParams([
    ['grant_type', TOKEN_EXCHANGE], ['subject_token', t], ['subject_token_type', TT_ID_TOKEN],
    ['audience', 'notes'], ['agent_id', 'coder'], ['scope', 'read'], ['scope', 'write'],
  ]);
  assertOAuthError(await rawPost(h.url, '/token', dup.toString()), 400, 'invalid_request', 'two scope parameters');

  // None of the refused calls created a request for carol.
  const created = h.sql(`SELECT count(*) AS n FROM audit WHERE subject = 'carol' AND action = 'consent.request.created'`)[0].n;

  // The resource by URI alone works.
  const byUri = await ex({ agentId: 'butler', resource: 'urn:consentd:resource:notes', scope: 'read' });
  assertOAuthError(byUri, 400, 'consent_required', 'resource=urn:consentd:resource:notes alone');
  // 200 characters are accepted, counted as characters (not bytes).
  const r200 = await ex({ agentId: 'coder', audience: 'wiki', scope: 'read', reason: 'r'.repeat(200) });
  assertOAuthError(r200, 400, 'consent_required', 'reason of 200 ASCII characters');
  const r200u = await ex({ agentId: 'scribe', audience: 'notes', scope: 'read', reason: 'é'.repeat(200) });
  assertOAuthError(r200u, 400, 'consent_required', 'reason of 200 two-byte characters');
  const after = h.sql(`SELECT count(*) AS n FROM audit WHERE subject = 'carol' AND action = 'consent.request.created'`)[0].n;
  assert.equal(after - created, 3);
  const stored = h.sql(`SELECT reason FROM consent_requests WHERE id = '${r200u.body.consent_request_id}'`)[0].reason;
  assert.equal(stored, 'é'.repeat(200));
});

// --- 8. polling --------------------------------------------------------------------------------

test('polling faster than the interval: slow_down adds 5 s each time; waiting the interval out gives authorization_pending', async () => {
  const ask = { agentId: 'butler', audience: 'notes', scope: 'read' };
  await h.idToken('bob');
  await alignToSecond();
  const first = await h.ask('bob', ask);
  assertOAuthError(first, 400, 'consent_required');
  assert.equal(first.body.interval, 1);
  const id = first.body.consent_request_id;

  const fast = await h.ask('bob', ask);
  assertOAuthError(fast, 400, 'slow_down', 'an immediate second call');
  assert.equal(fast.body.interval, 6);
  assert.equal(fast.body.consent_request_id, id);

  await sleep(2000);
  const stillFast = await h.ask('bob', ask);
  assertOAuthError(stillFast, 400, 'slow_down', '2 s later, interval 6');
  assert.equal(stillFast.body.interval, 11);
  assert.equal(stillFast.body.consent_request_id, id);

  await sleep(11500);
  const patient = await h.ask('bob', ask);
  assertOAuthError(patient, 400, 'authorization_pending', '11.5 s later, interval 11');
  assert.equal(patient.body.interval, 11);
  assert.equal(patient.body.consent_request_id, id);
  assert.equal(patient.body.consent_uri, first.body.consent_uri);
  assert.ok(patient.body.expires_in > 0 && patient.body.expires_in <= first.body.expires_in);
  // The first slow_down is audited, the rest counted on the request (#14.11).
  assert.equal(h.sql(`SELECT count(*) AS n FROM audit WHERE request_id = '${id}' AND action = 'consent.request.slow_down'`)[0].n, 1);
  assert.equal(h.sql(`SELECT slow_downs FROM consent_requests WHERE id = '${id}'`)[0].slow_downs, 2);
});

// --- 9. flooding -------------------------------------------------------------------------------

test('flooding: past max_pending_per_user the exchange answers 429 too_many_pending_requests with Retry-After', async () => {
  const x = await harness({
    config: consentConfig({ consent: { request_ttl: 600, interval: 1, deny_cooldown: 3600, max_pending_per_user: 2 } }),
  });
  try {
    assertOAuthError(await x.ask('alice', { agentId: 'coder', audience: 'notes', scope: 'read' }), 400, 'consent_required');
    assertOAuthError(await x.ask('alice', { agentId: 'coder', audience: 'wiki', scope: 'read' }), 400, 'consent_required');
    const third = await x.ask('alice', { agentId: 'butler', audience: 'notes', scope: 'read' });
    assertOAuthError(third, 429, 'too_many_pending_requests', 'a third pending request');
    const ra = third.headers.get('retry-after');
    assert.match(ra || '', /^\d+$/, `Retry-After ${ra}`);
    assert.ok(Number(ra) >= 1);
    assert.equal(third.body.consent_request_id, undefined);
    // Another person is not affected.
    assertOAuthError(await x.ask('bob', { agentId: 'butler', audience: 'notes', scope: 'read' }), 400, 'consent_required');
  } finally {
    await x.stop();
  }
});

// --- 10. hostile reason text -------------------------------------------------------------------

test('the agent\'s reason is shown escaped, with bidirectional overrides made visible; the page allows no inline script', async () => {
  const reason = '<script>alert(1)</script> open txt.exe\u202Efdp.';
  const first = await h.ask('alice', { agentId: 'butler', audience: 'notes', scope: 'read', reason });
  assert.equal(first.body?.error, 'consent_required', first.text);
  const page = await openPage(await h.jar('alice'), first.body.consent_uri);
  assert.equal(page.status, 200, page.html.slice(0, 300));
  assert.ok(page.html.includes('&lt;script&gt;alert(1)&lt;/script&gt;'), 'escaped');
  assert.deepEqual(page.html.match(/<script\b[^>]*>/gi), ['<script src="/static/local-time.js">'],
    'no raw <script: the only script element is consentd\'s own local-time script');
  assert.ok(!page.html.includes('\u202E'), 'no raw U+202E');
  assert.ok(page.html.includes('txt.exe[U+202E]fdp.'), 'U+202E shown as [U+202E]');
  const shown = (page.html.match(/id="agent-reason">([^<]*)</) || [])[1];
  assert.equal(shown, '&lt;script&gt;alert(1)&lt;/script&gt; open txt.exe[U+202E]fdp.');
  const csp = page.headers.get('content-security-policy');
  assert.ok(csp, 'a Content-Security-Policy');
  assert.ok(!csp.includes('unsafe-inline'), csp);
  assert.ok(!csp.includes('unsafe-eval'), csp);
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /frame-ancestors 'none'/);
});

// --- 11. denial --------------------------------------------------------------------------------

test('denial: the gateway hears access_denied, and keeps hearing it within deny_cooldown', async () => {
  const ask = { agentId: 'coder', audience: 'wiki', scope: 'read' };
  const first = await h.ask('alice', ask);
  assert.equal(first.body?.error, 'consent_required', first.text);
  const jar = await h.jar('alice');
  const page = await openPage(jar, first.body.consent_uri);
  assert.equal(page.status, 200);
  const done = await postPage(jar, first.body.consent_uri, decisionFields(page, { decision: 'deny' }));
  assert.equal(done.status, 200, done.html.slice(0, 300));
  assert.match(done.html, /Request denied/);

  for (let i = 0; i < 3; i += 1) {
    assertOAuthError(await h.ask('alice', ask), 400, 'access_denied', `call ${i + 1} after the denial`);
    await sleep(1100);
  }
  const closed = await openPage(jar, first.body.consent_uri);
  assert.equal(closed.status, 410);
  assert.match(closed.html, /denied/);
  assert.equal(h.sql(`SELECT count(*) AS n FROM consents WHERE request_id = '${first.body.consent_request_id}'`)[0].n, 0);
  assert.equal(h.sql(`SELECT status FROM consent_requests WHERE id = '${first.body.consent_request_id}'`)[0].status, 'denied');
});

// --- 12. revocation edge cases -----------------------------------------------------------------

test('/revoke and /introspect: garbage tokens, and a revoked grant while its consent stays live', async () => {
  const garbage = await h.gw.revoke('garbage-token');
  assert.equal(garbage.status, 200, garbage.text);
  assert.equal(garbage.headers.get('cache-control'), 'no-store');
  const gi = await h.gw.introspect('garbage-token');
  assert.equal(gi.status, 200, gi.text);
  assert.deepEqual(gi.body, { active: false });
  const jwtish = await h.gw.introspect(algNone(await h.idToken('admin')));
  assert.deepEqual(jwtish.body, { active: false }, 'an IdP token is no grant');

  const ask = { agentId: 'butler', audience: 'notes', scope: 'read' };
  const g = await approvedGrant(h, 'admin', ask);
  const { payload } = await h.gw.verify(g.access_token);
  assert.equal((await h.gw.introspect(g.access_token)).body.active, true);
  const rv = await h.gw.revoke(g.access_token);
  assert.equal(rv.status, 200, rv.text);
  assert.deepEqual((await h.gw.introspect(g.access_token)).body, { active: false });
  assert.equal((await h.gw.revoke(g.access_token)).status, 200, 'revoking twice is fine');

  // The consent itself is live: a new exchange gives a new grant under the same consent.
  const g2 = await h.ask('admin', ask);
  assert.equal(g2.status, 200, g2.text);
  assert.notEqual(g2.body.access_token, g.access_token);
  const p2 = (await h.gw.verify(g2.body.access_token)).payload;
  assert.equal(p2.cid, payload.cid);
  assert.notEqual(p2.jti, payload.jti);
  const i2 = await h.gw.introspect(g2.body.access_token);
  assert.equal(i2.body.active, true);
  assert.equal(i2.body.token_use, 'grant');
  assert.deepEqual((await h.gw.introspect(g.access_token)).body, { active: false }, 'the revoked one stays dead');
});

test('a request changed under the open page: approving from the old page grants nothing and shows the request as it now is; a denial stands', async () => {
  const x = await harness({ config: consentConfig() });
  try {
    const jar = await x.jar('alice');
    const ask = { agentId: 'coder', audience: 'notes', scope: 'write', reason: 'to fix a typo' };
    const first = await x.ask('alice', ask);
    assert.equal(first.body?.error, 'consent_required', first.text);
    const uri = first.body.consent_uri;
    const id = requestId(uri);
    const page = await openPage(jar, uri);
    assert.equal(page.status, 200);
    assert.deepEqual(Object.keys(page.form.fields).filter((n) => /^s\d+$/.test(n)), ['s0']);
    assert.match(page.html, /name="s0"[^>]*> <code>write<\/code>/);
    assert.match(page.html, /to fix a typo/);
    // The agent asks for "read" too, with another reason: "read" sorts first, into box s0.
    const merged = await x.ask('alice', { ...ask, scope: 'read write', reason: 'delete everything' });
    assert.equal(merged.body?.error, 'consent_required', merged.text);
    assert.equal(merged.body.consent_request_id, id);
    const stale = await postPage(jar, uri, decisionFields(page));
    assert.equal(stale.status, 409, `approving from the old page: ${stale.html.slice(0, 300)}`);
    assert.match(stale.html, /changed while you were looking at it/);
    assert.doesNotMatch(stale.html, /Permission given|Request denied/);
    assert.match(stale.html, /delete everything/, 'the reason as it is now');
    assert.match(stale.html, /<code>read<\/code>/);
    assert.match(stale.html, /<code>write<\/code>/);
    // A form without its version is never taken for the current one.
    const { version, ...noVersion } = decisionFields(page);
    assert.ok(version, 'the page names its version');
    const bare = await postPage(jar, uri, noVersion);
    assert.equal(bare.status, 409, bare.html.slice(0, 300));
    assert.equal(x.sql(`SELECT status FROM consent_requests WHERE id = '${id}'`)[0].status, 'pending');
    assert.equal(x.sql(`SELECT count(*) AS n FROM consents WHERE request_id = '${id}'`)[0].n, 0);
    const none = await x.ask('alice', { ...ask, scope: 'read write', reason: 'delete everything' });
    assert.notEqual(none.status, 200, 'no grant');
    // Decided on the page as it is now: exactly the ticked box ("write"), "read" declined.
    const fresh = await openPage(jar, uri);
    const writeBox = [...fresh.html.matchAll(/name="(s\d+)"[^>]*> <code>([^<]+)<\/code>/g)].find((m) => m[2] === 'write')[1];
    const done = await postPage(jar, uri, decisionFields(fresh, { boxes: [writeBox] }));
    assert.equal(done.status, 200, done.html.slice(0, 300));
    assert.match(done.html, /Permission given/);
    const row = x.sql(`SELECT granted, declined FROM consents WHERE request_id = '${id}'`)[0];
    assert.deepEqual(row, { granted: 'write', declined: 'read' });

    // A denial grants nothing, so it stands whatever was merged since: an agent that keeps
    // merging scopes cannot hold a person's "no" off.
    const ask2 = { agentId: 'butler', audience: 'notes', scope: 'write' };
    const q = await x.ask('alice', ask2);
    assert.equal(q.body?.error, 'consent_required', q.text);
    const page2 = await openPage(jar, q.body.consent_uri);
    assert.equal((await x.ask('alice', { ...ask2, scope: 'read write' })).body?.error, 'consent_required');
    const denied = await postPage(jar, q.body.consent_uri, decisionFields(page2, { decision: 'deny' }));
    assert.equal(denied.status, 200, denied.html.slice(0, 300));
    assert.match(denied.html, /Request denied/);
    const id2 = requestId(q.body.consent_uri);
    assert.equal(x.sql(`SELECT status FROM consent_requests WHERE id = '${id2}'`)[0].status, 'denied');
    assert.equal(x.sql(`SELECT count(*) AS n FROM consents WHERE request_id = '${id2}'`)[0].n, 0);
    const after = await x.ask('alice', { ...ask2, scope: 'read write' });
    assert.equal(after.body?.error, 'access_denied', after.text);
  } finally {
    await x.stop();
  }
});
