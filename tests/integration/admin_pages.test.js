// The admin pages under /admin against the real IdP and the real binary: every
// page route (read from server/routes.c, so none can be forgotten) refuses
// anonymous callers, non-admins, users whose groups only resemble the admin
// value, and admins whose login (auth_time) is older than admin_timeout; CSRF and
// Origin on every admin form; hostile search values are harmless; bulk
// revocation needs a forced fresh login (prompt=login, max_age=0), shows how
// many consents it will revoke, and then revokes exactly those.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startStack } from '../lib/stack.js';
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
  return { status: res.status, html, headers: res.headers, form: postForm(html) };
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
  for (const p of ['GET /admin', 'GET /admin/consents/{id}', 'POST /admin/consents/{id}/revoke',
    'GET /admin/revoke', 'POST /admin/revoke', 'GET /admin/audit']) assert.ok(paths.includes(p), p);
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

test('revoking one consent: CSRF and Origin checked, then revoked with history', async () => {
  const grant = await approvedGrant(h, 'carol', 'coder');
  const jar = await h.jar('admin');
  const list = await openPage(jar, `${h.url}/admin?user=carol&state=live`);
  const id = (list.html.match(/href="\/admin\/consents\/([A-Za-z0-9_-]+)"/) || [])[1];
  assert.ok(id, list.html.slice(0, 500));
  const page = await openPage(jar, `${h.url}/admin/consents/${id}`);
  assert.equal(page.status, 200);
  assert.ok(page.form, 'a revoke form');
  const url = `${h.url}/admin/consents/${id}/revoke`;
  const { csrf } = page.form.fields;
  // Missing, wrong, or another session's CSRF token; a foreign Origin; no Origin at all.
  assert.equal((await postPage(jar, url, {})).status, 400);
  assert.equal((await postPage(jar, url, { csrf: 'A'.repeat(43) })).status, 403);
  const aliceJar = await h.jar('alice');
  const alicePage = await openPage(aliceJar, `${h.url}/me`);
  assert.equal((await postPage(jar, url, { csrf: postForm(alicePage.html).fields.csrf })).status, 403);
  assert.equal((await postPage(jar, url, { csrf }, { origin: 'http://evil.example' })).status, 403);
  assert.equal((await postPage(jar, url, { csrf }, { origin: null })).status, 403);
  assert.equal((await postPage(jar, url, { csrf }, { origin: 'null', 'sec-fetch-site': 'cross-site' })).status, 403);
  assert.equal((await h.gw.introspect(grant)).body.active, true, 'still live after the refused posts');

  const ok = await postPage(jar, url, { csrf, reason: 'left the company' });
  assert.equal(ok.status, 303, ok.html.slice(0, 300));
  assert.equal((await h.gw.introspect(grant)).body.active, false);
  const after = await openPage(jar, `${h.url}/admin/consents/${id}`);
  assert.match(after.html, /class="state">revoked/);
  assert.match(after.html, /admin:admin/);
  assert.match(after.html, /left the company/);
  assert.equal(after.form, null, 'no revoke form for a revoked consent');
});

test('bulk revoke form: CSRF and Origin checked', async () => {
  const jar = await h.jar('admin');
  const confirm = await openPage(jar, `${h.url}/admin/revoke?by=agent&value=nobody`);
  assert.equal(confirm.status, 200, confirm.html.slice(0, 300));
  assert.match(confirm.html, /id="count">[^<]*<strong>0<\/strong>/);
  assert.equal(confirm.form, null, 'nothing to confirm');
  await approvedGrant(h, 'alice', 'butler');
  const one = await openPage(jar, `${h.url}/admin/revoke?by=user&value=alice`);
  assert.equal(one.status, 200);
  assert.equal(one.form.fields.count, '1');
  const url = `${h.url}/admin/revoke`;
  const f = { ...one.form.fields };
  const { csrf } = f;
  delete f.csrf;
  assert.equal((await postPage(jar, url, f)).status, 400);
  assert.equal((await postPage(jar, url, { ...f, csrf: 'A'.repeat(43) })).status, 403);
  assert.equal((await postPage(jar, url, { ...f, csrf }, { origin: 'http://evil.example' })).status, 403);
  assert.equal((await postPage(jar, url, { ...f, csrf }, { origin: null })).status, 403);
  // A count other than the current one shows the confirmation again and revokes nothing.
  const stale = await postPage(jar, url, { ...f, csrf, count: '5' });
  assert.equal(stale.status, 409);
  assert.match(stale.html, /id="count">[^<]*<strong>1<\/strong>/);
  const list = await openPage(jar, `${h.url}/admin?user=alice&state=live`);
  assert.equal((list.html.match(/class="consent-row"/g) || []).length, 1);
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
