// Self-test of the development IdP (tests/idp/devidp.js) and the helpers in tests/lib/.
// Run: (cd tests && npm ci) && node --test tests/integration/
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRemoteJWKSet, jwtVerify, decodeJwt } from 'jose';
import { startIdp, DEFAULT_CLIENTS, DEFAULT_USERS } from '../lib/idp.js';
import {
  discover, loginForCode, exchangeCode, getIdToken, CookieJar, basicAuth,
} from '../lib/idplogin.js';
import { pidAlive } from '../lib/proc.js';
import { getFreePort } from '../lib/ports.js';
import { CHROMIUM_PATH, launchBrowser } from '../lib/browser.js';

const here = dirname(fileURLToPath(import.meta.url));
const client = (id) => DEFAULT_CLIENTS.find((c) => c.client_id === id);
const gw = client('gateway-app');
const cd = client('consentd');

// devidp as the program `make run` starts (process: true); the other files serve it from
// their own process (tests/lib/idp.js).
let idp;
before(async () => { idp = await startIdp({ process: true }); });
after(async () => { if (idp) await idp.stop(); });

const gwLogin = (user, extra = {}) => getIdToken({
  issuer: idp.issuer,
  clientId: gw.client_id,
  clientSecret: gw.client_secret,
  redirectUri: gw.redirect_uris[0],
  user,
  password: DEFAULT_USERS[user]?.password,
  ...extra,
});

async function postForm(url, params, auth) {
  const headers = { 'content-type': 'application/x-www-form-urlencoded' };
  if (auth) headers.authorization = basicAuth(auth.client_id, auth.client_secret);
  const res = await fetch(url, { method: 'POST', headers, body: new URLSearchParams(params).toString() });
  return { status: res.status, body: await res.json().catch(() => null) };
}

test('ports: getFreePort gives a bindable loopback port', async () => {
  const p = await getFreePort();
  assert.ok(Number.isInteger(p) && p > 0 && p < 65536);
});

test('discovery', async () => {
  const meta = await discover(idp.issuer);
  assert.match(idp.issuer, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.equal(meta.issuer, idp.issuer);
  assert.ok(meta.code_challenge_methods_supported.includes('S256'));
  assert.ok(!meta.code_challenge_methods_supported.includes('plain'));
  assert.equal(meta.end_session_endpoint, `${idp.issuer}/session/end`);
  assert.deepEqual(meta.subject_types_supported, ['public']);
  assert.equal(meta.authorization_response_iss_parameter_supported, true);
  assert.ok(meta.revocation_endpoint && meta.introspection_endpoint && meta.jwks_uri);
  assert.ok(meta.id_token_signing_alg_values_supported.includes('ES256'));
  assert.ok(meta.id_token_signing_alg_values_supported.includes('RS256'));
  assert.ok(meta.scopes_supported.includes('groups'));
});

test('alice gets an ID token for gateway-app, verifiable with the JWKS', async () => {
  const r = await gwLogin('alice');
  assert.equal(r.claims.sub, 'alice');
  assert.equal(r.claims.aud, 'gateway-app');
  assert.equal(r.claims.name, 'Alice Example');
  assert.equal(r.claims.email, 'alice@example.test');
  assert.deepEqual(r.claims.groups, []);
  const meta = await discover(idp.issuer);
  const jwks = createRemoteJWKSet(new URL(meta.jwks_uri));
  const { payload, protectedHeader } = await jwtVerify(r.id_token, jwks, {
    issuer: idp.issuer, audience: 'gateway-app', algorithms: ['RS256'],
  });
  assert.equal(payload.sub, 'alice');
  assert.equal(protectedHeader.alg, 'RS256');
});

test('admin has groups ["consent-admins"]', async () => {
  const r = await gwLogin('admin');
  assert.equal(r.claims.sub, 'admin');
  assert.deepEqual(r.claims.groups, ['consent-admins']);
});

test('a wrong password or an unknown user is refused', async () => {
  await assert.rejects(gwLogin('alice', { password: 'nope' }), /login refused/);
  await assert.rejects(gwLogin('mallory', { password: 'x' }), /login refused/);
});

test('PKCE is required', async () => {
  const meta = await discover(idp.issuer);
  const u = new URL(meta.authorization_endpoint);
  for (const [k, v] of Object.entries({
    response_type: 'code', client_id: gw.client_id, redirect_uri: gw.redirect_uris[0], scope: 'openid', state: 's',
  })) u.searchParams.set(k, v);
  const res = await fetch(u, { redirect: 'manual' });
  assert.equal(res.status, 303);
  const loc = new URL(res.headers.get('location'));
  assert.equal(loc.searchParams.get('error'), 'invalid_request');
  assert.equal(loc.searchParams.get('iss'), idp.issuer);
});

test('consentd client: ES256 ID token with auth_time, iss in the response, SSO, RP-initiated logout', async () => {
  const jar = new CookieJar();
  const base = {
    issuer: idp.issuer, clientId: cd.client_id, redirectUri: cd.redirect_uris[0], jar,
  };
  const r = await loginForCode({ ...base, user: 'bob', password: DEFAULT_USERS.bob.password, scope: 'openid profile email' });
  assert.equal(r.iss, idp.issuer);
  const tok = await exchangeCode({
    ...base, clientSecret: cd.client_secret, code: r.code, codeVerifier: r.codeVerifier,
  });
  const meta = await discover(idp.issuer);
  const { payload, protectedHeader } = await jwtVerify(tok.id_token, createRemoteJWKSet(new URL(meta.jwks_uri)), {
    issuer: idp.issuer, audience: 'consentd', algorithms: ['ES256'],
  });
  assert.equal(protectedHeader.alg, 'ES256');
  assert.equal(payload.sub, 'bob');
  assert.equal(payload.nonce, r.nonce);
  assert.equal(typeof payload.auth_time, 'number');
  assert.ok(tok.refresh_token, 'consentd client has the refresh_token grant');

  // The code is single-use.
  await assert.rejects(exchangeCode({
    ...base, clientSecret: cd.client_secret, code: r.code, codeVerifier: r.codeVerifier,
  }), /invalid_grant/);

  // Same jar: the IdP session is reused, no login form (no user/password given).
  const again = await loginForCode({ ...base, scope: 'openid' });
  assert.ok(again.code);

  // RP-initiated logout with client_id (no id_token_hint), as consentd does it.
  const end = new URL(meta.end_session_endpoint);
  end.searchParams.set('client_id', cd.client_id);
  end.searchParams.set('post_logout_redirect_uri', cd.post_logout_redirect_uris[0]);
  let res = await fetch(end, { headers: { cookie: jar.header(end.href) }, redirect: 'manual' });
  jar.store(end.href, res);
  assert.equal(res.status, 200);
  const html = await res.text();
  const action = html.match(/<form[^>]*action="([^"]+)"/)[1];
  const xsrf = html.match(/name="xsrf" value="([^"]+)"/)[1];
  const confirm = new URL(action, end).href;
  res = await fetch(confirm, {
    method: 'POST',
    headers: { cookie: jar.header(confirm), 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ xsrf, logout: 'yes' }).toString(),
    redirect: 'manual',
  });
  jar.store(confirm, res);
  assert.equal(res.status, 303);
  const back = new URL(res.headers.get('location'), confirm).href;
  // devidp's success redirect goes through /session/end/success unless a post_logout_redirect_uri is given
  assert.equal(back, cd.post_logout_redirect_uris[0]);
  // Logged out: a new authorization needs the form again.
  await assert.rejects(loginForCode({ ...base, scope: 'openid' }), /login required/);
});

test('get-id-token CLI prints an ID token', async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [
    join(here, '..', 'idp', 'get-id-token.js'), '--issuer', idp.issuer, '--client', 'gateway-app',
    '--secret', gw.client_secret, '--redirect', gw.redirect_uris[0], '--user', 'carol', '--password', DEFAULT_USERS.carol.password,
  ]);
  const claims = decodeJwt(stdout.trim());
  assert.equal(claims.sub, 'carol');
  assert.equal(claims.aud, 'gateway-app');
});

test('downstream provider mode: opaque short-lived tokens, rotating refresh tokens, introspection, revocation', async () => {
  const ds = {
    client_id: 'consentd',
    client_secret: 'downstream-secret',
    redirect_uris: ['http://127.0.0.1:8080/oauth/callback/github'],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  };
  const prov = await startIdp({
    process: true,
    clients: [ds],
    downstream: { resource: 'https://api.github.example', scopes: ['repo', 'issues:read', 'issues:write'], accessTokenTTL: 30 },
  });
  try {
    const meta = await discover(prov.issuer);
    const r = await loginForCode({
      issuer: prov.issuer, clientId: ds.client_id, redirectUri: ds.redirect_uris[0],
      user: 'alice', password: DEFAULT_USERS.alice.password, scope: 'repo issues:read',
    });
    assert.equal(r.iss, prov.issuer);
    assert.equal(r.nonce, undefined);
    const tok = await exchangeCode({
      issuer: prov.issuer, clientId: ds.client_id, clientSecret: ds.client_secret,
      redirectUri: ds.redirect_uris[0], code: r.code, codeVerifier: r.codeVerifier,
    });
    assert.equal(tok.token_type, 'Bearer');
    assert.equal(tok.expires_in, 30);
    assert.equal(tok.scope, 'repo issues:read');
    assert.equal(tok.id_token, undefined);
    assert.ok(!tok.access_token.includes('.'), 'opaque access token');
    assert.ok(tok.refresh_token);

    let intr = await postForm(meta.introspection_endpoint, { token: tok.access_token }, ds);
    assert.equal(intr.status, 200);
    assert.equal(intr.body.active, true);
    assert.equal(intr.body.sub, 'alice');
    assert.equal(intr.body.aud, 'https://api.github.example');
    assert.equal(intr.body.scope, 'repo issues:read');
    assert.equal(intr.body.client_id, 'consentd');

    // Refresh: a new refresh token (rotation); the old one is then refused and the chain revoked.
    const ref = await postForm(meta.token_endpoint, { grant_type: 'refresh_token', refresh_token: tok.refresh_token }, ds);
    assert.equal(ref.status, 200, JSON.stringify(ref.body));
    assert.equal(ref.body.scope, 'repo issues:read');
    assert.equal(ref.body.expires_in, 30);
    assert.ok(ref.body.refresh_token && ref.body.refresh_token !== tok.refresh_token);
    const reuse = await postForm(meta.token_endpoint, { grant_type: 'refresh_token', refresh_token: tok.refresh_token }, ds);
    assert.equal(reuse.status, 400);
    assert.equal(reuse.body.error, 'invalid_grant');

    // A fresh grant, then revocation (RFC 7009) of its refresh token.
    const r2 = await loginForCode({
      issuer: prov.issuer, clientId: ds.client_id, redirectUri: ds.redirect_uris[0],
      user: 'bob', password: DEFAULT_USERS.bob.password, scope: 'issues:write',
    });
    const tok2 = await exchangeCode({
      issuer: prov.issuer, clientId: ds.client_id, clientSecret: ds.client_secret,
      redirectUri: ds.redirect_uris[0], code: r2.code, codeVerifier: r2.codeVerifier,
    });
    assert.equal(tok2.scope, 'issues:write');
    const rev = await postForm(meta.revocation_endpoint, { token: tok2.refresh_token, token_type_hint: 'refresh_token' }, ds);
    assert.equal(rev.status, 200);
    intr = await postForm(meta.introspection_endpoint, { token: tok2.refresh_token }, ds);
    assert.equal(intr.body.active, false);
    const rev2 = await postForm(meta.revocation_endpoint, { token: tok2.access_token, token_type_hint: 'access_token' }, ds);
    assert.equal(rev2.status, 200);
    intr = await postForm(meta.introspection_endpoint, { token: tok2.access_token }, ds);
    assert.equal(intr.body.active, false);
  } finally {
    await prov.stop();
  }
});

test('Chromium (playwright-core) can sign in on the login page, and sign out', { skip: !existsSync(CHROMIUM_PATH) && `no ${CHROMIUM_PATH}` }, async () => {
  const meta = await discover(idp.issuer);
  const u = new URL(meta.authorization_endpoint);
  for (const [k, v] of Object.entries({
    response_type: 'code', client_id: gw.client_id, redirect_uri: gw.redirect_uris[0], scope: 'openid profile',
    state: 'browser-state', nonce: 'browser-nonce', code_challenge_method: 'S256',
    code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
  })) u.searchParams.set(k, v);
  const b = await launchBrowser();
  try {
    const page = await b.newPage();
    await page.goto(u.href);
    assert.match(page.url(), /\/interaction\//);
    await page.fill('input[name="login"]', 'alice');
    await page.fill('input[name="password"]', DEFAULT_USERS.alice.password);
    // The redirect_uri points at an unused port (and page.route does not see redirect targets):
    // catch the request the browser makes to it.
    const [req] = await Promise.all([
      page.waitForRequest((rq) => rq.url().startsWith(gw.redirect_uris[0])),
      page.click('button[type="submit"]#submit'),
    ]);
    const callback = req.url();
    const q = new URL(callback).searchParams;
    assert.ok(q.get('code'));
    assert.equal(q.get('state'), 'browser-state');
    assert.equal(q.get('iss'), idp.issuer);

    // RP-initiated logout by client_id: the confirmation page submits itself. (A new tab: the
    // first one is still busy failing to load the unused redirect_uri.)
    const page2 = await b.newPage();
    const end = new URL(meta.end_session_endpoint);
    end.searchParams.set('client_id', gw.client_id);
    await page2.goto(end.href);
    await page2.waitForURL(/\/session\/end\/success/);
    assert.match(await page2.textContent('h1'), /Signed out/);
    // and the next authorization asks for the password again
    await page2.goto(u.href);
    assert.match(page2.url(), /\/interaction\//);
    assert.equal(await page2.locator('input[name="password"]').count(), 1);
  } finally {
    await b.close();
  }
});

test('stop() ends the IdP process (by pid) with exit 0', async () => {
  const tmp = await startIdp({ process: true });
  assert.ok(pidAlive(tmp.pid));
  const st = await tmp.stop();
  assert.equal(st.code, 0);
  assert.equal(pidAlive(tmp.pid), false);
  await assert.rejects(fetch(`${tmp.issuer}/.well-known/openid-configuration`));
});
