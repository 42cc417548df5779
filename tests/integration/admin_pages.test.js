// The admin pages under /admin against the real IdP and the real binary: every
// page route (read from server/routes.c, so none can be forgotten) refuses
// anonymous callers, non-admins, users whose groups only resemble the admin
// value, and admins whose login (auth_time) is older than admin_timeout; CSRF and
// Origin on every admin form; hostile search values are harmless; bulk
// revocation needs a forced fresh login (prompt=login, max_age=0), shows how
// many consents it will revoke, and then revokes exactly those.  Issue 35: revoking one
// consent goes through a confirmation, and neither kind of revocation goes through
// without a reason (refused server-side, nothing revoked); the chain's check is a POST
// with CSRF for admins only, and gives what `consentd audit verify` gives.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startStack } from '../lib/stack.js';
import { consentdCommand, testDb } from '../lib/consentd.js';
import { DEFAULT_USERS } from '../lib/idp.js';
import { getIdToken } from '../lib/idplogin.js';
import { consentdLogin, req, postForm } from '../lib/weblogin.js';
import { gateway } from '../lib/gateway.js';
import { consentConfig, GATEWAY_APP } from '../lib/fixtures.js';

const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

// Users whose groups only resemble the admin value "consent-admins".
const LOOKALIKES = {
  mallory: ['consent-admins-x'],
  trudy: ['Consent-Admins'],
  xavier: ['xconsent-admins'],
  yvonne: ['consent-admin'],
  zed: ['consent-admins '],
};
const USERS = { ...DEFAULT_USERS };
for (const [u, groups] of Object.entries(LOOKALIKES)) {
  USERS[u] = { password: `${u}-password`, name: u, email: `${u}@example.test`, groups };
}

// Every /admin page route of the route table (the JSON API under /admin/api/ has its own tests).
function adminRoutes() {
  const src = readFileSync(join(ROOT, 'server', 'routes.c'), 'utf8');
  const out = [];
  for (const m of src.matchAll(/\{\s*HTTP_(GET|POST)\s*,\s*"(\/admin[^"]*)"/g)) {
    if (m[2].startsWith('/admin/api/') || m[2] === '/admin/api') continue;
    out.push({ method: m[1], pattern: m[2], path: m[2].replace(/\{[^}]+\}/g, 'AAAAAAAAAAAAAAAAAAAAAA') });
  }
  return out;
}

function stackOptions(extra = {}) {
  return {
    config: {
      ...consentConfig(),
      oidc: { scopes: 'openid profile email groups' },
      ...extra,
    },
    idpOptions: { users: USERS },
  };
}

async function harness(extra) {
  const s = await startStack(stackOptions(extra));
  const gw = gateway({ url: s.url });
  const jars = new Map();
  return {
    s, gw, url: s.url,
    async jar(user, fresh = false) {
      if (fresh || !jars.has(user)) {
        const { jar, final } = await consentdLogin({ url: s.url, user, password: USERS[user].password });
        assert.equal(final.status, 303, `login of ${user}`);
        jars.set(user, jar);
      }
      return jars.get(user);
    },
    stop: () => s.stop(),
  };
}

async function openPage(jar, url) {
  const res = await req(jar, url);
  const html = await res.text();
  // The page's own form, not the header's sign-out.
  return { status: res.status, html, headers: res.headers, form: postForm(html, /^\/logout$/) };
}

async function postPage(jar, url, fields, headers = {}) {
  const h = { 'content-type': 'application/x-www-form-urlencoded', origin: new URL(url).origin, ...headers };
  for (const k of Object.keys(h)) if (h[k] === null) delete h[k];
  const res = await req(jar, url, { method: 'POST', headers: h, body: new URLSearchParams(fields).toString() });
  return { status: res.status, html: await res.text(), headers: res.headers };
}

// A consent of user for (agent, notes) approved on the consent page; returns the grant.
async function approvedGrant(h, user, agentId) {
  const subjectToken = (await getIdToken({
    issuer: h.s.idp.issuer, ...GATEWAY_APP, user, password: USERS[user].password,
  })).id_token;
  const args = { subjectToken, agentId, audience: 'notes', scope: 'read' };
  const first = await h.gw.exchange(args);
  assert.equal(first.body?.error, 'consent_required', first.text);
  const jar = await h.jar(user);
  const page = await openPage(jar, first.body.consent_uri);
  assert.equal(page.status, 200, page.html.slice(0, 300));
  // The form's own csrf and version (a decision names the version of the request it saw).
  const f = { csrf: page.form.fields.csrf, version: page.form.fields.version, decision: 'approve', s0: 'on' };
  f.duration = (page.html.match(/<option value="(\d+)"/) || [])[1];
  const done = await postPage(jar, first.body.consent_uri, f);
  assert.equal(done.status, 200, done.html.slice(0, 300));
  const g = await h.gw.exchange(args);
  assert.equal(g.status, 200, g.text);
  return g.body.access_token;
}

// What an admin route answers a caller who must not get in: never a 200 page.
async function call(jar, url, route, fields = {}) {
  if (route.method === 'GET') {
    const r = await openPage(jar, `${url}${route.path}`);
    return r;
  }
  return postPage(jar, `${url}${route.path}`, { csrf: 'x'.repeat(43), ...fields });
}

const POST_FIELDS = {
  '/admin/revoke': { by: 'agent', value: 'coder', count: '0' },
};

function assertNoContent(r, what) {
  assert.notEqual(r.status, 200, `${what}: ${r.status} ${r.html.slice(0, 200)}`);
  assert.doesNotMatch(r.html, /<table|id="results"|id="audit"|id="count"|id="consent"/, what);
}

let h;
before(async () => { h = await harness(); });
after(async () => { await h?.stop(); });

test('the route table has the admin pages', () => {
  const paths = adminRoutes().map((r) => `${r.method} ${r.pattern}`);
  for (const p of ['GET /admin', 'GET /admin/consents/{id}', 'GET /admin/consents/{id}/revoke',
    'POST /admin/consents/{id}/revoke', 'GET /admin/revoke', 'POST /admin/revoke', 'GET /admin/audit',
    'POST /admin/audit/verify']) assert.ok(paths.includes(p), p);
});

test('every admin page route refuses anonymous callers: sign-in redirect for GET, 401/403 for POST', async () => {
  const { CookieJar } = await import('../lib/idplogin.js');
  for (const route of adminRoutes()) {
    const r = await call(new CookieJar(), h.url, route, POST_FIELDS[route.pattern]);
    assertNoContent(r, `anonymous ${route.method} ${route.pattern}`);
    if (route.method === 'GET') {
      assert.equal(r.status, 303, route.pattern);
      assert.match(r.headers.get('location'), /^\/login\?/, route.pattern);
    } else {
      assert.ok([401, 403].includes(r.status), `${route.pattern}: ${r.status}`);
    }
  }
});

test('an anonymous admin search comes back after sign-in with its query while it fits /login\'s 512-byte return_to, else to the bare path', async () => {
  const { CookieJar } = await import('../lib/idplogin.js');
  // "/admin?" + user (255) + agent (128) + resource (n): 412 + n bytes.
  const search = (n) => `/admin?user=${'u'.repeat(255)}&agent=${'a'.repeat(128)}&resource=${'r'.repeat(n)}`;
  for (const [n, back] of [[100, search(100)], [101, '/admin']]) {
    const jar = new CookieJar();
    const r = await req(jar, `${h.url}${search(n)}`);
    assert.equal(r.status, 303, `${n}`);
    const loc = new URL(r.headers.get('location'), h.url);
    assert.equal(loc.pathname, '/login');
    assert.equal(loc.searchParams.get('return_to'), back, `resource of ${n}`);
    // /login takes it: the link never leads to a 400.
    const login = await req(jar, loc.href);
    assert.equal(login.status, 303, `/login with the return_to of ${n}: ${login.status}`);
    await login.arrayBuffer();
  }
});

test('every admin page route refuses a non-admin session (403) and audits it', async () => {
  const jar = await h.jar('alice');
  for (const route of adminRoutes()) {
    const r = await call(jar, h.url, route, POST_FIELDS[route.pattern]);
    assertNoContent(r, `alice ${route.method} ${route.pattern}`);
    assert.equal(r.status, 403, `${route.pattern}: ${r.status}`);
  }
  const n = h.s.c.sql("SELECT count(*) FROM audit WHERE action = 'admin.page.refused' AND actor = 'user:alice'");
  assert.equal(Number(n), adminRoutes().length);
});

test('every admin page route refuses users whose groups only resemble the admin value', async () => {
  for (const user of Object.keys(LOOKALIKES)) {
    const jar = await h.jar(user);
    for (const route of adminRoutes()) {
      const r = await call(jar, h.url, route, POST_FIELDS[route.pattern]);
      assertNoContent(r, `${user} ${route.method} ${route.pattern}`);
      assert.equal(r.status, 403, `${user} ${route.pattern}: ${r.status}`);
    }
  }
});

test('an admin sees the pages; pages forbid framing', async () => {
  const jar = await h.jar('admin');
  for (const path of ['/admin', '/admin/audit']) {
    const r = await openPage(jar, `${h.url}${path}`);
    assert.equal(r.status, 200, `${path}: ${r.html.slice(0, 300)}`);
    assert.match(r.headers.get('content-security-policy') || '', /frame-ancestors 'none'/);
    assert.equal((r.headers.get('x-frame-options') || 'DENY').toUpperCase(), 'DENY');
  }
});

test('search values with SQL metacharacters and markup are harmless: escaped, no error, no extra rows', async () => {
  await approvedGrant(h, 'bob', 'coder');
  const jar = await h.jar('admin');
  const all = await openPage(jar, `${h.url}/admin`);
  assert.equal(all.status, 200);
  assert.ok((all.html.match(/class="consent-row"/g) || []).length >= 1, 'an unfiltered search lists the consent');
  const hostile = ["' OR '1'='1", "bob' --", '"; DROP TABLE consents; --', '<script>alert(1)</script>', '%', '_', 'b%'];
  for (const v of hostile) {
    for (const field of ['user', 'agent', 'resource']) {
      const r = await openPage(jar, `${h.url}/admin?${new URLSearchParams({ [field]: v })}`);
      assert.equal(r.status, 200, `${field}=${v}: ${r.html.slice(0, 200)}`);
      assert.equal((r.html.match(/class="consent-row"/g) || []).length, 0, `${field}=${v} matched rows`);
      assert.doesNotMatch(r.html, /<script>alert/, `${field}=${v} unescaped`);
    }
    const a = await openPage(jar, `${h.url}/admin/audit?${new URLSearchParams({ action: v, consent: v })}`);
    assert.equal(a.status, 200, `audit ${v}: ${a.html.slice(0, 200)}`);
    assert.equal((a.html.match(/class="audit-row"/g) || []).length, 0, `audit ${v} matched rows`);
    assert.doesNotMatch(a.html, /<script>alert/);
  }
  const escaped = await openPage(jar, `${h.url}/admin?user=${encodeURIComponent('<script>alert(1)</script>')}`);
  assert.match(escaped.html, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
  // The exact subject still finds bob's consent, and the database is intact.
  const bob = await openPage(jar, `${h.url}/admin?user=bob`);
  assert.equal((bob.html.match(/class="consent-row"/g) || []).length, 1);
  // Unknown parameters and bad states are refused.
  assert.equal((await openPage(jar, `${h.url}/admin?state=${encodeURIComponent("live' OR 1")}`)).status, 400);
  assert.equal((await openPage(jar, `${h.url}/admin?sort=id`)).status, 400);
});

// Whether an audit entry of action names consent id (or, without id, exists at all).
const audited = (action, id) => Number(h.s.c.sql(`SELECT count(*) FROM audit WHERE action = '${action}'${id ? ` AND consent_id = '${id}'` : ''}`));

test('revoking one consent: a confirmation page, CSRF and Origin checked, a reason required, then revoked with history', async () => {
  const grant = await approvedGrant(h, 'carol', 'coder');
  const jar = await h.jar('admin');
  const list = await openPage(jar, `${h.url}/admin?user=carol&state=live`);
  const id = (list.html.match(/href="\/admin\/consents\/([A-Za-z0-9_-]+)"/) || [])[1];
  assert.ok(id, list.html.slice(0, 500));
  // The search list's Revoke is a link to the confirmation, never a form that revokes.
  assert.match(list.html, new RegExp(`<a class="button danger small" href="/admin/consents/${id}/revoke"`));
  assert.doesNotMatch(list.html, /<form method="post" action="\/admin\/consents\//, 'no revoke form in the list');
  const page = await openPage(jar, `${h.url}/admin/consents/${id}/revoke`);
  assert.equal(page.status, 200);
  assert.ok(page.form, 'a revoke form');
  assert.equal(page.form.action, `/admin/consents/${id}/revoke`);
  assert.match(page.html, /<input id="reason" name="reason" value="" maxlength="200" required/);
  const url = `${h.url}/admin/consents/${id}/revoke`;
  const { csrf } = page.form.fields;
  // Missing, wrong, or another session's CSRF token; a foreign Origin; no Origin at all.
  assert.equal((await postPage(jar, url, { reason: 'x' })).status, 400);
  assert.equal((await postPage(jar, url, { csrf: 'A'.repeat(43), reason: 'x' })).status, 403);
  const aliceJar = await h.jar('alice');
  const alicePage = await openPage(aliceJar, `${h.url}/me`);
  assert.equal((await postPage(jar, url, { csrf: postForm(alicePage.html).fields.csrf, reason: 'x' })).status, 403);
  assert.equal((await postPage(jar, url, { csrf, reason: 'x' }, { origin: 'http://evil.example' })).status, 403);
  assert.equal((await postPage(jar, url, { csrf, reason: 'x' }, { origin: null })).status, 403);
  assert.equal((await postPage(jar, url, { csrf, reason: 'x' }, { origin: 'null', 'sec-fetch-site': 'cross-site' })).status, 403);
  // No reason, an empty one, or only spaces: the confirmation again, saying why; nothing revoked.
  for (const f of [{ csrf }, { csrf, reason: '' }, { csrf, reason: '   ' }]) {
    const r = await postPage(jar, url, f);
    assert.equal(r.status, 400, `${JSON.stringify(f.reason)}: ${r.html.slice(0, 300)}`);
    assert.match(r.html, /id="reason-error" role="alert">Give a reason: the person reads it on their page\. Nothing was revoked\./);
    assert.match(r.html, /aria-invalid="true"/);
  }
  assert.equal((await h.gw.introspect(grant)).body.active, true, 'still live after the refused posts');
  assert.equal(audited('consent.revoked', id), 0, 'nothing audited as revoked');

  const ok = await postPage(jar, url, { csrf, reason: 'left the company' });
  assert.equal(ok.status, 303, ok.html.slice(0, 300));
  assert.equal(ok.headers.get('location'), `/admin/consents/${id}`);
  assert.equal((await h.gw.introspect(grant)).body.active, false);
  const after = await openPage(jar, `${h.url}/admin/consents/${id}`);
  assert.match(after.html, /class="state">revoked/);
  assert.match(after.html, /admin:admin/);
  assert.match(after.html, /left the company/);
  assert.equal(after.form, null, 'no revoke form for a revoked consent');
  const again = await openPage(jar, `${h.url}/admin/consents/${id}/revoke`);
  assert.equal(again.status, 200);
  assert.match(again.html, /id="already"/);
  assert.equal(again.form, null, 'nothing to confirm for a revoked consent');
  // The person reads the admin's words.
  const carol = await openPage(await h.jar('carol'), `${h.url}/me`);
  assert.match(carol.html, /left the company/);
  assert.doesNotMatch(carol.html, /revoked by an admin on \/admin/);
});

test('bulk revoke form: CSRF and Origin checked; an empty reason is refused and nothing is revoked', async () => {
  const jar = await h.jar('admin');
  const confirm = await openPage(jar, `${h.url}/admin/revoke?by=agent&value=nobody`);
  assert.equal(confirm.status, 200, confirm.html.slice(0, 300));
  assert.match(confirm.html, /id="count">[^<]*<strong>0<\/strong>/);
  assert.equal(confirm.form, null, 'nothing to confirm');
  const grant = await approvedGrant(h, 'alice', 'butler');
  const one = await openPage(jar, `${h.url}/admin/revoke?by=user&value=alice`);
  assert.equal(one.status, 200);
  assert.equal(one.form.fields.count, '1');
  assert.match(one.html, /<input id="reason" name="reason" value="" maxlength="200" required/);
  const url = `${h.url}/admin/revoke`;
  const f = { ...one.form.fields };
  const { csrf } = f;
  delete f.csrf;
  delete f.reason;
  assert.equal((await postPage(jar, url, { ...f, reason: 'x' })).status, 400);
  assert.equal((await postPage(jar, url, { ...f, reason: 'x', csrf: 'A'.repeat(43) })).status, 403);
  assert.equal((await postPage(jar, url, { ...f, reason: 'x', csrf }, { origin: 'http://evil.example' })).status, 403);
  assert.equal((await postPage(jar, url, { ...f, reason: 'x', csrf }, { origin: null })).status, 403);
  // A count other than the current one shows the confirmation again and revokes nothing.
  const stale = await postPage(jar, url, { ...f, csrf, count: '5', reason: 'x' });
  assert.equal(stale.status, 409);
  assert.match(stale.html, /id="count">[^<]*<strong>1<\/strong>/);
  // No reason, an empty one, only spaces: refused with the confirmation again (the count and
  // the form kept), nothing revoked, nothing audited.
  const bulkBefore = audited('admin.bulk_revoked');
  for (const r of [{}, { reason: '' }, { reason: '   ' }]) {
    const res = await postPage(jar, url, { ...f, csrf, ...r });
    assert.equal(res.status, 400, `${JSON.stringify(r)}: ${res.html.slice(0, 300)}`);
    assert.match(res.html, /id="reason-error" role="alert">Give a reason: the person reads it on their page\. Nothing was revoked\./);
    assert.match(res.html, /id="count">[^<]*<strong>1<\/strong>/);
    assert.equal(postForm(res.html, /^\/logout$/).fields.count, '1', 'the form comes back to try again');
    assert.doesNotMatch(res.html, /id="revoked"/);
  }
  assert.equal((await h.gw.introspect(grant)).body.active, true, 'nothing revoked');
  assert.equal(audited('admin.bulk_revoked'), bulkBefore, 'no bulk revocation audited');
  const list = await openPage(jar, `${h.url}/admin?user=alice&state=live`);
  assert.equal((list.html.match(/class="consent-row"/g) || []).length, 1);
  // With a reason it goes through, and the person reads it.
  const done = await postPage(jar, url, { ...f, csrf, reason: 'account closed' });
  assert.equal(done.status, 200, done.html.slice(0, 300));
  assert.match(done.html, /id="revoked">Revoked <strong>1<\/strong>/);
  assert.equal((await h.gw.introspect(grant)).body.active, false);
  const alice = await openPage(await h.jar('alice'), `${h.url}/me`);
  assert.match(alice.html, /account closed/);
  assert.doesNotMatch(alice.html, /revoked by an admin on \/admin/);
});

test('a person is found by subject, by email or by name (any case), and only that person', async () => {
  const jar = await h.jar('admin');
  const rows = async (q) => {
    const r = await openPage(jar, `${h.url}/admin?${new URLSearchParams({ user: q })}`);
    assert.equal(r.status, 200, q);
    return [...r.html.matchAll(/<code class="id" title="([^"]+)">/g)].map((m) => m[1]);
  };
  const bySubject = await rows('carol');
  assert.ok(bySubject.length >= 1 && bySubject.every((u) => u === 'carol'), bySubject.join());
  for (const q of ['carol@example.test', 'CAROL@Example.TEST', 'Carol Example', 'carol example']) {
    assert.deepEqual(await rows(q), bySubject, q);
  }
  // Not a part of a name or an address, and no pattern characters.
  for (const q of ['Carol', 'example.test', '%carol%', 'carol@example.test ']) {
    assert.deepEqual(await rows(q), [], q);
  }
  const label = await openPage(jar, `${h.url}/admin`);
  assert.match(label.html, /<label>Person \(subject, email or name\) <input name="user"/);
});

test('the header shows the signed-in admin with a sign-out form, on every admin page', async () => {
  const jar = await h.jar('admin');
  const id = h.s.c.sql('SELECT id FROM consents LIMIT 1');
  for (const path of ['/admin', '/admin/audit', `/admin/consents/${id}`, `/admin/consents/${id}/revoke`, '/admin/revoke?by=agent&value=coder']) {
    const r = await openPage(jar, `${h.url}${path}`);
    assert.equal(r.status, 200, path);
    const header = (r.html.match(/<header>([\s\S]*?)<\/header>/) || [])[1] || '';
    assert.match(header, /Signed in as <strong id="signed-in-name">Admin Example<\/strong> <span class="muted">admin@example\.test<\/span>/, path);
    const out = postForm(header);
    assert.equal(out?.action, '/logout', path);
    assert.ok(out.fields.csrf.length >= 40, path);
  }
  // Signing out from there ends the session: the admin pages ask to sign in again.
  const own = await consentdLogin({ url: h.url, user: 'admin', password: USERS.admin.password, returnTo: '/admin' });
  const page = await openPage(own.jar, `${h.url}/admin`);
  const out = postForm((page.html.match(/<header>([\s\S]*?)<\/header>/) || [])[1]);
  const bye = await postPage(own.jar, `${h.url}/logout`, out.fields);
  assert.equal(bye.status, 303, bye.html.slice(0, 200));
  const later = await req(own.jar, `${h.url}/admin`);
  assert.equal(later.status, 303);
  assert.match(later.headers.get('location'), /^\/login\?/);
});

test('/me links an admin to the admin pages, and nobody else', async () => {
  const admin = await openPage(await h.jar('admin'), `${h.url}/me`);
  assert.match(admin.html, /<p id="admin-link">[^<]*<a href="\/admin">Admin pages<\/a><\/p>/);
  for (const user of ['alice', 'mallory']) {
    const r = await openPage(await h.jar(user), `${h.url}/me`);
    assert.equal(r.status, 200);
    assert.doesNotMatch(r.html, /admin-link|href="\/admin"/, user);
  }
});

// Every action name written in server/*.c: `.action = "x"`, `x.action = "x"`, a ternary's two.
function actionsInSources() {
  const dir = join(ROOT, 'server');
  const found = new Set();
  for (const f of readdirSync(dir).filter((n) => n.endsWith('.c'))) {
    const src = readFileSync(join(dir, f), 'utf8');
    for (const m of src.matchAll(/\baction = (?:[^;"]*\? )?"([a-z][a-z_.-]+)"(?: : "([a-z][a-z_.-]+)")?/g)) {
      found.add(m[1]);
      if (m[2]) found.add(m[2]);
    }
    for (const m of src.matchAll(/admin_audit_note\([^,]+,[^,]+, "([a-z][a-z_.-]+)"/g)) found.add(m[1]);
  }
  found.delete('audit.anchor');        // the anchor's MAC input, never an entry
  found.delete('refresh_ahead');       // a background refresh's release action (vault.c), never an entry's
  return [...found].sort();
}

test('the audit filter is a choice of every action consentd writes; an old link keeps its action', async () => {
  const jar = await h.jar('admin');
  const r = await openPage(jar, `${h.url}/admin/audit`);
  assert.equal(r.status, 200);
  assert.doesNotMatch(r.html, /<input name="action"/, 'no free text');
  const select = (r.html.match(/<select name="action">([\s\S]*?)<\/select>/) || [])[1];
  assert.ok(select, 'an action select');
  const options = [...select.matchAll(/<option value="([^"]*)"/g)].map((m) => m[1]);
  assert.equal(options[0], '', 'any action first');
  const written = actionsInSources();
  assert.ok(written.length >= 40, `${written.length} actions found in server/`);
  for (const a of written) assert.ok(options.includes(a), `${a} is written but not offered`);
  // A chosen action filters, and stays chosen.
  const g = await openPage(jar, `${h.url}/admin/audit?action=consent.granted`);
  assert.match(g.html, /<option value="consent.granted" selected>/);
  const whats = [...g.html.matchAll(/<td class="what">([^<]*)<\/td>/g)].map((m) => m[1]);
  assert.ok(whats.length > 0 && whats.every((w) => w === 'consent.granted'), whats.join());
  const old = await openPage(jar, `${h.url}/admin/audit?action=no.such.action`);
  assert.equal(old.status, 200);
  assert.match(old.html, /<option value="no.such.action" selected>no.such.action \(not a known action\)<\/option>/);
});

test('the audit log is newest first, in pages marked by entry number that new entries do not shift', async () => {
  const jar = await h.jar('admin');
  // Enough entries for three pages: admin.page.refused, one per refused page view.
  const alice = await h.jar('alice');
  for (let i = 0; i < 60; i += 1) await (await req(alice, `${h.url}/admin`)).arrayBuffer();
  const seqs = (html) => [...html.matchAll(/<tr class="audit-row"><td>(\d+)<\/td>/g)].map((m) => Number(m[1]));
  const link = (html, id) => { const m = html.match(new RegExp(`href="([^"]+)" id="${id}"`)); return m ? m[1].replace(/&amp;/g, '&').replace(/&#61;/g, '=') : null; };
  const max = Number(h.s.c.sql('SELECT max(seq) FROM audit'));
  const p1 = await openPage(jar, `${h.url}/admin/audit`);
  const s1 = seqs(p1.html);
  assert.equal(s1.length, 25);
  assert.equal(s1[0], max, 'the newest entry first');
  assert.deepEqual(s1, [...s1].sort((a, b) => b - a), 'descending');
  assert.equal(link(p1.html, 'prev'), null, 'nothing newer than the first page');
  const next = link(p1.html, 'next');
  assert.equal(next, `/admin/audit?before=${s1[24]}`);
  // New entries arrive; the next page still starts right below the first page's last entry.
  for (let i = 0; i < 3; i += 1) await (await req(alice, `${h.url}/admin`)).arrayBuffer();
  const p2 = await openPage(jar, `${h.url}${next}`);
  const s2 = seqs(p2.html);
  assert.equal(s2.length, 25);
  assert.equal(s2[0], s1[24] - 1, 'no entry repeated or skipped');
  assert.ok(link(p2.html, 'newest'), 'a way back to the newest');
  const prev = link(p2.html, 'prev');
  assert.equal(prev, `/admin/audit?after=${s2[0]}`);
  // Previous from page 2: exactly page 1 as it was (the entries written meanwhile are newer).
  const back = await openPage(jar, `${h.url}${prev}`);
  assert.deepEqual(seqs(back.html), s1);
  assert.ok(link(back.html, 'prev'), 'the three newer entries are one click away');
  // The filters go with the page links.
  const f1 = await openPage(jar, `${h.url}/admin/audit?action=admin.page.refused`);
  const fn = link(f1.html, 'next');
  assert.match(fn, /^\/admin\/audit\?action=admin\.page\.refused&before=\d+$/);
  const f2 = await openPage(jar, `${h.url}${fn}`);
  assert.ok(seqs(f2.html).length > 0 && [...f2.html.matchAll(/<td class="what">([^<]*)<\/td>/g)].every((m) => m[1] === 'admin.page.refused'));
  // Bad markers are refused.
  for (const q of ['before=0', 'before=x', 'after=-1', `before=${max}&after=1`]) {
    assert.equal((await openPage(jar, `${h.url}/admin/audit?${q}`)).status, 400, q);
  }
});

test('"Verify the chain": a POST with CSRF for admins only, showing what `consentd audit verify` finds, and the head', async () => {
  const jar = await h.jar('admin');
  const audit = await openPage(jar, `${h.url}/admin/audit`);
  const form = postForm(audit.html, /^\/logout$/);
  assert.equal(form.action, '/admin/audit/verify');
  const url = `${h.url}/admin/audit/verify`;
  // No CSRF token, a wrong one, a foreign Origin: refused, no result shown.
  for (const [f, hd, status] of [[{}, {}, 400], [{ csrf: 'A'.repeat(43) }, {}, 403], [form.fields, { origin: 'http://evil.example' }, 403]]) {
    const r = await postPage(jar, url, f, hd);
    assert.equal(r.status, status, JSON.stringify(f));
    assert.doesNotMatch(r.html, /id="verify-result"/);
  }
  // A person with their own valid CSRF token: 403, no result.
  const alice = await h.jar('alice');
  const me = await openPage(alice, `${h.url}/me`);
  const refused = await postPage(alice, url, { csrf: postForm(me.html).fields.csrf });
  assert.equal(refused.status, 403);
  assert.doesNotMatch(refused.html, /id="verify-result"|verifies/);
  // GET is no way to start a walk.
  assert.equal((await req(jar, url)).status, 405);

  const r = await postPage(jar, url, form.fields);
  assert.equal(r.status, 200, r.html.slice(0, 300));
  const cli = await consentdCommand(['audit', 'verify', '-c', h.s.c.cfgPath]);
  assert.equal(cli.code, 0, cli.stderr);
  const [, n, kid, head] = cli.stdout.match(/audit: (\d+) entries intact under master key (\S+); head (\d+:[0-9a-f]{64})/);
  const [, pn] = r.html.match(/<p id="verify-ok"><strong>(\d+)<\/strong> entries intact under master key <code>([^<]+)<\/code>/) || [];
  const [, phead] = r.html.match(/<code id="verify-head">([^<]+)<\/code>/) || [];
  assert.equal(r.html.includes(`<code>${kid}</code>`), true, 'the same master key');
  // The CLI ran after the page: at most the entries written between them differ.
  assert.ok(Number(pn) <= Number(n) && Number(pn) > 0, `${pn} vs ${n}`);
  const hex = testDb === 'pg' ? "encode(link, 'hex')" : 'lower(hex(link))';
  const dbHead = h.s.c.sql(`SELECT seq || ':' || ${hex} FROM audit WHERE seq = ${phead.split(':')[0]}`);
  assert.equal(phead, dbHead, 'the head shown is the entry the walk ended on, with its link');
  assert.ok(head.startsWith(`${n}:`));

  // A changed entry: the page says which, as the command line does.
  const victim = Number(h.s.c.sql('SELECT min(seq) FROM audit WHERE outcome IS NOT NULL AND seq > (SELECT min(seq) FROM audit)'));
  h.s.c.sql(`UPDATE audit SET outcome = outcome || 'x' WHERE seq = ${victim}`);
  try {
    const bad = await postPage(jar, url, form.fields);
    assert.equal(bad.status, 200);
    assert.match(bad.html, new RegExp(`<p id="verify-broken" class="form-error">Entry <strong>${victim}</strong> is broken: link does not match`));
    assert.match(bad.html, new RegExp(`<code id="verify-head">${victim - 1}:[0-9a-f]{64}</code>`));
    const cliBad = await consentdCommand(['audit', 'verify', '-c', h.s.c.cfgPath]);
    assert.notEqual(cliBad.code, 0);
    assert.match(cliBad.stderr, new RegExp(`audit: entry ${victim} is broken`));
  } finally {
    h.s.c.sql(`UPDATE audit SET outcome = substr(outcome, 1, length(outcome) - 1) WHERE seq = ${victim}`);
  }
  const fixed = await postPage(jar, url, form.fields);
  assert.match(fixed.html, /id="verify-ok"/);
});

// --- a second stack with a 3 s admin_timeout ------------------------------------

test('admin_timeout: a stale admin gets no content on any route; bulk revoke needs the step-up, shows the count and revokes exactly that many', async () => {
  const h2 = await harness({ session: { admin_timeout: 3 } });
  try {
    const g1 = await approvedGrant(h2, 'carol', 'coder');
    const g2 = await approvedGrant(h2, 'carol', 'butler');
    const g3 = await approvedGrant(h2, 'bob', 'coder');
    const jar = await h2.jar('admin');
    assert.equal((await openPage(jar, `${h2.url}/admin`)).status, 200, 'fresh admin');
    await sleep(4500);
    for (const route of adminRoutes()) {
      const r = await call(jar, h2.url, route, POST_FIELDS[route.pattern]);
      assertNoContent(r, `stale admin ${route.method} ${route.pattern}`);
      if (r.status === 303) assert.match(r.headers.get('location'), /^\/login\?prompt=login&max_age=0&/);
      else assert.equal(r.status, 403, `${route.pattern}: ${r.status}`);
    }
    // Bulk: the step-up.
    const want = `/admin/revoke?by=user&value=carol`;
    const first = await req(jar, `${h2.url}${want}`);
    assert.equal(first.status, 303);
    const loc = new URL(first.headers.get('location'), h2.url);
    assert.equal(loc.pathname, '/login');
    assert.equal(loc.searchParams.get('prompt'), 'login');
    assert.equal(loc.searchParams.get('max_age'), '0');
    assert.equal(loc.searchParams.get('return_to'), want);
    const step = await consentdLogin({
      url: h2.url, user: 'admin', password: USERS.admin.password, jar, returnTo: want, query: '&prompt=login&max_age=0',
    });
    const authz = new URL(step.loginLocation);
    assert.equal(authz.searchParams.get('prompt'), 'login');
    assert.equal(authz.searchParams.get('max_age'), '0');
    assert.equal(step.final.status, 303);
    assert.equal(step.final.headers.get('location'), want);
    const confirm = await openPage(jar, `${h2.url}${want}`);
    assert.equal(confirm.status, 200, confirm.html.slice(0, 300));
    assert.match(confirm.html, /id="count">[^<]*<strong>2<\/strong>/);
    assert.equal(confirm.form.fields.count, '2');
    const done = await postPage(jar, `${h2.url}/admin/revoke`, { ...confirm.form.fields, reason: 'offboarding' });
    assert.equal(done.status, 200, done.html.slice(0, 300));
    assert.match(done.html, /id="revoked">Revoked <strong>2<\/strong>/);
    assert.equal((await h2.gw.introspect(g1)).body.active, false);
    assert.equal((await h2.gw.introspect(g2)).body.active, false);
    assert.equal((await h2.gw.introspect(g3)).body.active, true, "bob's consent is untouched");
    // The confirmation is re-checked: after admin_timeout the POST is refused.
    await sleep(4000);
    const late = await postPage(jar, `${h2.url}/admin/revoke`, { ...confirm.form.fields, value: 'bob', count: '1' });
    assert.equal(late.status, 403, late.html.slice(0, 300));
    assert.equal((await h2.gw.introspect(g3)).body.active, true);
  } finally {
    await h2.stop();
  }
});
