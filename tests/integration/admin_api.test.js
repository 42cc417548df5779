// The admin JSON API (/admin/api/) against the real binary and the real IdP:
// every route in server/routes.c under /admin/api/ refuses anonymous callers,
// session cookies (an ordinary user's, an admin's, one whose claim only resembles
// the admin value), wrong and revoked tokens; with a token from the CLI the happy
// paths, each response checked against docs/openapi.yaml; search parameters with
// SQL metacharacters and markup are harmless; bulk revocation of a user with live
// grants and refresh tokens leaves nothing active, and repeating it revokes 0.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startStack } from '../lib/stack.js';
import { DEFAULT_USERS } from '../lib/idp.js';
import { consentdBin } from '../lib/consentd.js';
import { getIdToken } from '../lib/idplogin.js';
import { consentdLogin, req, postForm } from '../lib/weblogin.js';
import { gateway } from '../lib/gateway.js';
import { consentConfig, GATEWAY_APP } from '../lib/fixtures.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

// --- the OpenAPI document and a validator for the subset it uses -------------

// docs/openapi.yaml is written as JSON (YAML 1.2 is a superset of JSON).
const openapi = JSON.parse(readFileSync(join(root, 'docs', 'openapi.yaml'), 'utf8'));

function resolve(schema) {
  if (schema && schema.$ref) {
    const name = schema.$ref.replace('#/components/schemas/', '');
    assert.ok(openapi.components.schemas[name], `unknown $ref ${schema.$ref}`);
    return openapi.components.schemas[name];
  }
  return schema;
}

function typeOf(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (Number.isInteger(v)) return 'integer';
  return typeof v;
}

// Returns a list of problems ("" path = the root); supports $ref, type (one or
// a list), enum, required, properties, additionalProperties: false, items, oneOf.
function validate(schema, v, path = '$') {
  const s = resolve(schema);
  if (s.oneOf) {
    const ok = s.oneOf.filter((alt) => validate(alt, v, path).length === 0);
    return ok.length === 1 ? [] : [`${path}: matches ${ok.length} of oneOf`];
  }
  const errs = [];
  if (s.type) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    const t = typeOf(v);
    if (!types.includes(t) && !(t === 'integer' && types.includes('number'))) {
      return [`${path}: ${JSON.stringify(v)} is ${t}, want ${types.join('|')}`];
    }
  }
  if (s.enum && !s.enum.includes(v)) errs.push(`${path}: ${JSON.stringify(v)} not in enum`);
  if (typeOf(v) === 'object') {
    for (const k of s.required || []) if (!(k in v)) errs.push(`${path}: missing ${k}`);
    for (const [k, sub] of Object.entries(s.properties || {})) {
      if (k in v) errs.push(...validate(sub, v[k], `${path}.${k}`));
    }
    if (s.additionalProperties === false) {
      for (const k of Object.keys(v)) if (!(k in (s.properties || {}))) errs.push(`${path}: extra ${k}`);
    }
  }
  if (typeOf(v) === 'array' && s.items) v.forEach((x, i) => errs.push(...validate(s.items, x, `${path}[${i}]`)));
  return errs;
}

// Checks a live response against the documented one for (method, pattern, status).
function checkDoc(method, pattern, r) {
  const op = openapi.paths[pattern]?.[method.toLowerCase()];
  assert.ok(op, `${method} ${pattern} is documented in docs/openapi.yaml`);
  const resp = op.responses[String(r.status)];
  assert.ok(resp, `${method} ${pattern}: status ${r.status} is documented`);
  const schema = resp.content['application/json'].schema;
  const problems = validate(schema, r.body);
  assert.deepEqual(problems, [], `${method} ${pattern} ${r.status}: ${JSON.stringify(r.body).slice(0, 600)}`);
}

// --- the route table ---------------------------------------------------------

// Every /admin/api/ route of server/routes.c, so a new one cannot be forgotten.
function adminApiRoutes() {
  const src = readFileSync(join(root, 'server', 'routes.c'), 'utf8');
  const out = [];
  for (const m of src.matchAll(/\{\s*HTTP_([A-Z]+)\s*,\s*"(\/admin\/api\/[^"]*)"/g)) {
    out.push({ method: m[1], pattern: m[2] });
  }
  return out;
}

// --- the stack ---------------------------------------------------------------

let s; let gw; let url; let token;
const tokens = new Map();
const jars = new Map();

const USERS = {
  ...DEFAULT_USERS,
  // Claims that only resemble the admin value: neither is an admin.
  mallory: { password: 'mallory-password', name: 'Mallory', email: 'mallory@example.test',
    groups: ['consent-admins-not', 'Consent-Admins', ' consent-admins'] },
};

async function idToken(user) {
  if (!tokens.has(user)) {
    tokens.set(user, (await getIdToken({
      issuer: s.idp.issuer, ...GATEWAY_APP, user, password: `${user}-password`,
    })).id_token);
  }
  return tokens.get(user);
}

async function jar(user) {
  if (!jars.has(user)) {
    const { jar: j, final } = await consentdLogin({ url, user, password: `${user}-password` });
    assert.equal(final.status, 303, `login of ${user}`);
    jars.set(user, j);
  }
  return jars.get(user);
}

const ask = async (user, args) => gw.exchange({ subjectToken: await idToken(user), ...args });

// Flow A + B: the person approves every requested scope; returns the grant response.
async function approvedGrant(user, args, { offline = false } = {}) {
  const first = await ask(user, args);
  assert.equal(first.body?.error, 'consent_required', JSON.stringify(first.body));
  const j = await jar(user);
  const pageRes = await req(j, first.body.consent_uri);
  const html = await pageRes.text();
  const form = postForm(html);
  assert.ok(form, html.slice(0, 300));
  // The form's own csrf and version (a decision names the version of the request it saw).
  const f = { csrf: form.fields.csrf, version: form.fields.version, decision: 'approve' };
  for (const name of Object.keys(form.fields)) if (/^s\d+$/.test(name)) f[name] = 'on';
  const duration = (html.match(/<option value="(\d+)"/) || [])[1];
  if (duration) f.duration = duration;
  if (offline) f.offline = 'on';
  const done = await req(j, first.body.consent_uri, {
    method: 'POST', body: new URLSearchParams(f).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: url },
  });
  assert.equal(done.status, 200, (await done.text()).slice(0, 300));
  const g = await ask(user, args);
  assert.equal(g.status, 200, JSON.stringify(g.body));
  return g.body;
}

function cli(...args) {
  const r = spawnSync(consentdBin, ['admin', ...args, '-c', s.c.cfgPath], {
    encoding: 'utf8', env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1' },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const sql = (query) => s.c.rows(query);

// One API call: { status, body, text, headers }.
async function api(method, path, { bearer = token, body, headers = {} } = {}) {
  const h = { ...headers };
  if (bearer) h.authorization = `Bearer ${bearer}`;
  let payload;
  if (body !== undefined) {
    payload = typeof body === 'string' ? body : JSON.stringify(body);
    if (!('content-type' in h)) h['content-type'] = 'application/json';
  }
  const res = await fetch(`${url}${path}`, { method, headers: h, body: payload, redirect: 'manual' });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body: json, text, headers: res.headers };
}

before(async () => {
  s = await startStack({ config: consentConfig(), idpOptions: { users: USERS } });
  url = s.url;
  gw = gateway({ url });
  const r = cli('token', 'create', '--name', 'ops');
  assert.equal(r.status, 0, r.stderr);
  token = r.stdout.trim();
  assert.match(token, /^[A-Za-z0-9_-]{43}$/);
});

after(async () => { await s?.stop(); });

// --- refusals ------------------------------------------------------------------

test('every /admin/api/ route refuses anonymous callers, session cookies (admin or not, resembling claims), wrong and revoked tokens', async () => {
  const routes = adminApiRoutes();
  assert.ok(routes.length >= 6, `routes found: ${JSON.stringify(routes)}`);
  // A revoked token, created and revoked through the command line.
  const mk = cli('token', 'create', '--name', 'soon-revoked');
  assert.equal(mk.status, 0, mk.stderr);
  const revoked = mk.stdout.trim();
  assert.equal((await api('GET', '/admin/api/requests', { bearer: revoked })).status, 200, 'works before revocation');
  const rv = cli('token', 'revoke', 'soon-revoked');
  assert.equal(rv.status, 0, rv.stderr);
  assert.match(cli('token', 'list').stdout, /soon-revoked/);

  const cookies = {};
  for (const user of ['alice', 'admin', 'mallory']) {
    cookies[user] = (await jar(user)).header(`${url}/admin/api/consents`);
    assert.ok(cookies[user], `a session cookie for ${user}`);
  }
  const callers = [
    ['anonymous', {}],
    ['alice session cookie', { headers: { cookie: cookies.alice } }],
    ['admin session cookie', { headers: { cookie: cookies.admin } }],
    ['resembling-claim session cookie', { headers: { cookie: cookies.mallory } }],
    ['wrong token', { bearer: 'A'.repeat(43) }],
    ['revoked token', { bearer: revoked }],
    ['revoked token + admin cookie', { bearer: revoked, headers: { cookie: cookies.admin } }],
    ['basic auth', { headers: { authorization: 'Basic YWRtaW46YWRtaW4=' } }],
    ['bearer without token', { headers: { authorization: 'Bearer ' } }],
  ];
  for (const { method, pattern } of routes) {
    const path = pattern.replace(/\{[^}]+\}/g, 'AAAAAAAAAAAAAAAAAAAAAA');
    const body = method === 'POST' ? { user: 'alice', reason: 'should never happen' } : undefined;
    for (const [who, opts] of callers) {
      const r = await api(method, path, { bearer: null, ...opts, body });
      assert.equal(r.status, 401, `${method} ${pattern} as ${who}: ${r.text}`);
      assert.match(r.headers.get('www-authenticate') || '', /^Bearer /, `${method} ${pattern} as ${who}`);
      assert.equal(r.body?.error, 'invalid_token', `${method} ${pattern} as ${who}`);
      assert.equal(r.headers.get('cache-control'), 'no-store');
      checkDoc(method, pattern, r);
    }
  }
  // Nothing was revoked by all that.
  assert.equal(sql("SELECT count(*) AS n FROM audit WHERE action = 'admin.bulk_revoked'")[0].n, 0);
  // A revoked token's use is on record under its name; the token itself never is.
  assert.ok(sql("SELECT count(*) AS n FROM audit WHERE action = 'admin.api.refused' AND actor = 'admin:soon-revoked'")[0].n >= 1);
  const dump = JSON.stringify(sql('SELECT * FROM audit'));
  assert.ok(!dump.includes(revoked) && !dump.includes(token), 'no admin token in the audit log');
});

// --- happy paths, the document, hostile search values ---------------------------

test('with an admin token: listings, filters, cursors, history, pending work and the audit query, each as documented', async () => {
  const g1 = await approvedGrant('alice', { audience: 'notes', scope: 'read', agentId: 'coder' });
  assert.ok(g1.access_token);
  // A pending request (carol never decides).
  const pend = await ask('carol', { audience: 'notes', scope: 'read write', agentId: 'coder', reason: '<b>hi</b>' });
  assert.equal(pend.body?.error, 'consent_required');

  const all = await api('GET', '/admin/api/consents');
  assert.equal(all.status, 200, all.text);
  checkDoc('GET', '/admin/api/consents', all);
  const mine = all.body.consents.find((k) => k.user === 'alice' && k.agent === 'coder');
  assert.ok(mine, JSON.stringify(all.body));
  assert.equal(mine.state, 'live');
  assert.equal(mine.provider_connection, false);
  assert.deepEqual(mine.scopes, ['read']);

  const live = await api('GET', '/admin/api/consents?user=alice&agent=coder&resource=notes&state=live');
  checkDoc('GET', '/admin/api/consents', live);
  assert.deepEqual(live.body.consents.map((k) => k.id), [mine.id]);
  const revokedOnly = await api('GET', '/admin/api/consents?user=alice&state=revoked');
  assert.equal(revokedOnly.body.consents.length, 0);

  // Hostile search values: data, never SQL or markup.
  const hostile = ["' OR 1=1 --", '%', '_', 'alice%', 'a_ice', '<script>alert(1)</script>', '"; DROP TABLE consents; --', '\\'];
  for (const v of hostile) {
    for (const p of ['user', 'agent', 'resource']) {
      const r = await api('GET', `/admin/api/consents?${p}=${encodeURIComponent(v)}`);
      assert.equal(r.status, 200, `${p}=${v}: ${r.text}`);
      assert.equal(r.body.consents.length, 0, `${p}=${v} matches nothing`);
      assert.equal(r.headers.get('content-type'), 'application/json');
      checkDoc('GET', '/admin/api/consents', r);
    }
    const a = await api('GET', `/admin/api/audit?action=${encodeURIComponent(v)}`);
    assert.equal(a.status, 200, a.text);
    assert.equal(a.body.entries.length, 0);
  }
  assert.ok(sql('SELECT count(*) AS n FROM consents')[0].n >= 1, 'the table is still there');
  for (const q of ['state=everything', 'cursor=%27%20OR%201%3D1', 'limit=0', 'limit=501', 'bogus=1', 'user=a&user=b', 'since=yesterday']) {
    const path = q.startsWith('since') ? '/admin/api/audit' : '/admin/api/consents';
    const r = await api('GET', `${path}?${q}`);
    assert.equal(r.status, 400, `${q}: ${r.text}`);
    assert.equal(r.headers.get('content-type'), 'application/json');
    checkDoc('GET', path, r);
  }

  // Cursor pagination visits every consent once.
  const seen = [];
  let cursor = null;
  for (let i = 0; i < 20; i++) {
    const r = await api('GET', `/admin/api/consents?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    assert.equal(r.status, 200, r.text);
    checkDoc('GET', '/admin/api/consents', r);
    seen.push(...r.body.consents.map((k) => k.id));
    cursor = r.body.next_cursor;
    if (!cursor) break;
  }
  assert.deepEqual([...seen].sort(), all.body.consents.map((k) => k.id).sort());

  const one = await api('GET', `/admin/api/consents/${mine.id}`);
  assert.equal(one.status, 200, one.text);
  checkDoc('GET', '/admin/api/consents/{id}', one);
  assert.ok(one.body.history.grants_issued >= 1);
  assert.ok(one.body.history.requested, 'the request that made it');
  assert.ok(one.body.history.events.some((e) => e.action === 'consent.granted'));
  // The request's own entries, written before the consent existed (no consent_id), are
  // found by the request's id: the only entries audit_request indexes (migration 0029).
  assert.ok(one.body.history.events.some((e) => e.action === 'consent.request.created'
    && e.consent_id === null && e.request_id === one.body.history.requested.id), 'the request\'s entries');
  assert.ok(one.body.history.events.some((e) => e.action === 'grant.issued' && e.consent_id === mine.id));
  assert.ok(!one.text.includes(g1.access_token), 'no grant in the history');
  const none = await api('GET', '/admin/api/consents/AAAAAAAAAAAAAAAAAAAAAA');
  assert.equal(none.status, 404);
  checkDoc('GET', '/admin/api/consents/{id}', none);

  const p = await api('GET', '/admin/api/requests');
  assert.equal(p.status, 200, p.text);
  checkDoc('GET', '/admin/api/requests', p);
  const cr = p.body.consent_requests.find((r) => r.id === pend.body.consent_request_id);
  assert.ok(cr, JSON.stringify(p.body));
  assert.equal(cr.reason, '<b>hi</b>', 'text as data');

  const au = await api('GET', `/admin/api/audit?action=admin.api&limit=2`);
  assert.equal(au.status, 200, au.text);
  checkDoc('GET', '/admin/api/audit', au);
  assert.equal(au.body.entries.length, 2);
  assert.ok(au.body.entries.every((e) => /^admin:(ops|soon-revoked)$/.test(e.actor)), JSON.stringify(au.body));
  const au2 = await api('GET', `/admin/api/audit?action=admin.api&cursor=${au.body.next_cursor}&consent_id=${mine.id}`);
  assert.equal(au2.status, 200, au2.text);
  checkDoc('GET', '/admin/api/audit', au2);
  const byConsent = await api('GET', `/admin/api/audit?consent_id=${mine.id}&since=0`);
  assert.ok(byConsent.body.entries.every((e) => e.consent_id === mine.id));
  assert.ok(byConsent.body.entries.length >= 1);

  // Revoke one: the grant is dead at once.
  const wrongType = await api('POST', `/admin/api/consents/${mine.id}/revoke`, {
    body: 'reason=x', headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  assert.equal(wrongType.status, 415);
  checkDoc('POST', '/admin/api/consents/{id}/revoke', wrongType);
  for (const bad of ['{}', '[]', '{"reason": ""}', '{"reason": 5}', '{"reason": "a", "extra": "b"}',
    '{"reason": "a", "reason": "b"}', 'not json']) {
    const r = await api('POST', `/admin/api/consents/${mine.id}/revoke`, { body: bad });
    assert.equal(r.status, 400, `${bad}: ${r.text}`);
    checkDoc('POST', '/admin/api/consents/{id}/revoke', r);
  }
  const rv = await api('POST', `/admin/api/consents/${mine.id}/revoke`, { body: { reason: 'laptop lost' } });
  assert.equal(rv.status, 200, rv.text);
  checkDoc('POST', '/admin/api/consents/{id}/revoke', rv);
  assert.equal(rv.body.revoked, 1);
  assert.equal(rv.body.consent.state, 'revoked');
  assert.equal(rv.body.consent.revoked_by, 'admin:ops');
  assert.deepEqual((await gw.introspect(g1.access_token)).body, { active: false });
  const again = await api('POST', `/admin/api/consents/${mine.id}/revoke`, { body: { reason: 'again' } });
  assert.equal(again.body.revoked, 0);
  const entries = sql(`SELECT actor, detail FROM audit WHERE action = 'consent.revoked' AND consent_id = '${mine.id}'`);
  assert.deepEqual(entries, [{ actor: 'admin:ops', detail: 'laptop lost' }]);
  // The revocation event for the gateway is queued, and admins can see its delivery state.
  const ev = await api('GET', `/admin/api/events?consent_id=${mine.id}`);
  assert.equal(ev.status, 200, ev.text);
  checkDoc('GET', '/admin/api/events', ev);
  assert.equal(ev.body.events.length, 1, 'exactly one event per revocation');
  assert.equal(ev.body.events[0].reason, 'laptop lost');
  assert.ok(['pending', 'retrying', 'delivered'].includes(ev.body.events[0].state));
  assert.ok(ev.body.counts.waiting + ev.body.counts.delivered >= 1);
});

test('a stolen refresh token used after its holder: the family and every grant minted in it die; RFC 7009 on a refresh token does the same', async () => {
  const g = await approvedGrant('alice', { audience: 'notes', scope: 'read', agentId: 'butler' }, { offline: true });
  assert.ok(g.refresh_token);
  const r1 = await gw.refresh(g.refresh_token);                  // the holder rotates
  assert.equal(r1.status, 200, r1.text);
  assert.equal((await gw.introspect(r1.body.access_token)).body.active, true);
  const thief = await gw.refresh(g.refresh_token);               // the copy comes back
  assert.equal(thief.status, 400);
  assert.equal(thief.body?.error, 'invalid_grant');
  for (const [label, t] of [['the first grant', g.access_token], ['the rotated grant', r1.body.access_token],
    ['the current refresh token', r1.body.refresh_token]]) {
    assert.deepEqual((await gw.introspect(t)).body, { active: false }, label);
  }
  // The consent itself lives on: a new exchange still gets a grant.
  const again = await ask('alice', { audience: 'notes', scope: 'read', agentId: 'butler' });
  assert.equal(again.status, 200, JSON.stringify(again.body));
  const g2 = again.body;
  assert.ok(g2.refresh_token, 'a new family');
  const r2 = await gw.refresh(g2.refresh_token);
  assert.equal(r2.status, 200, r2.text);
  const rv = await gw.revoke(r2.body.refresh_token);
  assert.equal(rv.status, 200, rv.text);
  assert.deepEqual((await gw.introspect(g2.access_token)).body, { active: false });
  assert.deepEqual((await gw.introspect(r2.body.access_token)).body, { active: false });
});

test('bulk revocation of a user with live grants and refresh tokens: everything inactive at once; repeating revokes 0', async () => {
  const g1 = await approvedGrant('bob', { audience: 'notes', scope: 'read', agentId: 'coder' });
  const g2 = await approvedGrant('bob', { audience: 'notes', scope: 'read write', agentId: 'butler' }, { offline: true });
  assert.ok(g2.refresh_token, 'an offline consent gives a refresh token');
  const other = await approvedGrant('admin', { audience: 'notes', scope: 'read', agentId: 'coder' });
  assert.equal((await gw.introspect(g1.access_token)).body.active, true);
  assert.equal((await gw.introspect(g2.refresh_token)).body.active, true);

  for (const bad of [{ reason: 'x' }, { user: 'bob', agent: 'coder', reason: 'x' }, { user: 'bob' },
    { user: 'bob', reason: 'x', extra: 'y' }]) {
    const r = await api('POST', '/admin/api/revocations', { body: bad });
    assert.equal(r.status, 400, `${JSON.stringify(bad)}: ${r.text}`);
    checkDoc('POST', '/admin/api/revocations', r);
  }
  const harmless = await api('POST', '/admin/api/revocations', { body: { user: "' OR 1=1 --", reason: 'x' } });
  assert.equal(harmless.body.revoked, 0);
  const pct = await api('POST', '/admin/api/revocations', { body: { agent: '%', reason: 'x' } });
  assert.equal(pct.body.revoked, 0);

  const r = await api('POST', '/admin/api/revocations', { body: { user: 'bob', reason: 'offboarding' } });
  assert.equal(r.status, 200, r.text);
  checkDoc('POST', '/admin/api/revocations', r);
  assert.equal(r.body.revoked, 2);
  assert.deepEqual((await gw.introspect(g1.access_token)).body, { active: false });
  assert.deepEqual((await gw.introspect(g2.access_token)).body, { active: false });
  assert.deepEqual((await gw.introspect(g2.refresh_token)).body, { active: false });
  const rf = await gw.refresh(g2.refresh_token);
  assert.equal(rf.status, 400, rf.text);
  assert.equal(rf.body?.error, 'invalid_grant');
  assert.equal((await gw.introspect(other.access_token)).body.active, true, "another person's grant lives on");

  const again = await api('POST', '/admin/api/revocations', { body: { user: 'bob', reason: 'offboarding' } });
  assert.equal(again.body.revoked, 0);
  const audited = sql("SELECT count(*) AS n FROM audit WHERE action = 'consent.revoked' AND actor = 'admin:ops' AND detail = 'offboarding'");
  assert.equal(audited[0].n, 2, 'one audit entry per consent naming actor and reason');

  // The command line does the same, audited as cli.
  const g3 = await approvedGrant('carol', { audience: 'wiki', scope: 'read', agentId: 'coder' });
  const list = cli('consents', 'list', '--user', 'carol', '--state', 'live');
  assert.equal(list.status, 0, list.stderr);
  assert.match(list.stdout, /carol/);
  const ru = cli('revoke-user', 'carol', '--reason', 'cli test');
  assert.equal(ru.status, 0, ru.stderr);
  assert.match(ru.stdout, /revoked 1 consent/);
  assert.deepEqual((await gw.introspect(g3.access_token)).body, { active: false });
  assert.equal(sql("SELECT count(*) AS n FROM audit WHERE actor = 'cli' AND action = 'consent.revoked'")[0].n, 1);
  assert.match(cli('revoke-user', 'carol', '--reason', 'cli test').stdout, /revoked 0 consents/);
  assert.equal(cli('consents', 'revoke', 'nope', '--reason', 'x').status, 1);
});
