// Logs a person in to consentd through the development IdP with plain HTTP
// (no browser): consentd /login -> IdP login form -> consentd /callback.
//
//   const r = await consentdLogin({ url, user, password, jar, returnTo = '/me', stopAtCallback,
//                                   localAddress })
//   localAddress     // e.g. '127.0.0.2': every request of the login leaves from that address
//                    // (a person on another network than a test's other clients)
//   r.jar            // CookieJar now holding consentd's session cookie (and the IdP's)
//   r.callbackUrl    // the /callback URL the IdP sent the browser to (code + state + iss)
//   r.final          // the Response of /callback (303 to returnTo) unless stopAtCallback
//   r.loginLocation  // where consentd's /login sent the browser (the authorization request)
//
//   await revokeOnMe({ url, jar, cid })  // the person revokes consent cid on /me, through
//                                        // its confirmation page -> the POST's Response
import assert from 'node:assert/strict';
import http from 'node:http';
import { CookieJar } from './idplogin.js';

// fetch() from a chosen local address (global fetch cannot bind one): plain
// http only, no redirects followed; the answer is a real Response.
export function fetchFrom(localAddress, url, { method = 'GET', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const r = http.request(url, { method, headers, localAddress, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (d) => chunks.push(d));
      res.on('error', reject);
      res.on('end', () => {
        const h = new Headers();
        for (let i = 0; i < res.rawHeaders.length; i += 2) h.append(res.rawHeaders[i], res.rawHeaders[i + 1]);
        const b = Buffer.concat(chunks);
        const noBody = res.statusCode === 204 || res.statusCode === 304 || method === 'HEAD';
        resolve(new Response(noBody ? null : b, { status: res.statusCode, headers: h }));
      });
    });
    r.on('error', reject);
    r.end(body);
  });
}

// One request with the jar's cookies, redirects not followed; init.localAddress
// sends it from that address.
export async function req(jar, url, init = {}) {
  const { localAddress, ...rest } = init;
  const headers = { ...(rest.headers || {}) };
  const cookie = jar.header(url);
  if (cookie) headers.cookie = cookie;
  const res = localAddress
    ? await fetchFrom(localAddress, url, { ...rest, headers })
    : await fetch(url, { ...rest, headers, redirect: 'manual' });
  jar.store(url, res);
  return res;
}

const unescapeHtml = (s) => s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<')
  .replace(/&gt;/g, '>').replace(/&#61;/g, '=').replace(/&amp;/g, '&');

// The first POST form of a page: { action, fields }; with notAction (a RegExp), the first
// whose action it does not match (the admin pages' header has a sign-out form first).
export function postForm(html, notAction = null) {
  for (const m of html.matchAll(/<form\b([^>]*)>([\s\S]*?)<\/form>/gi)) {
    if (!/method\s*=\s*["']?post/i.test(m[1])) continue;
    const action = unescapeHtml((m[1].match(/action\s*=\s*"([^"]*)"/i) || [])[1] || '');
    if (notAction && notAction.test(action)) continue;
    const fields = {};
    for (const im of m[2].matchAll(/<input\b([^>]*)>/gi)) {
      const name = (im[1].match(/name\s*=\s*"([^"]*)"/i) || [])[1];
      if (name) fields[unescapeHtml(name)] = unescapeHtml((im[1].match(/value\s*=\s*"([^"]*)"/i) || [])[1] || '');
    }
    return { action, fields };
  }
  return null;
}

export async function consentdLogin({
  url, user, password, jar = new CookieJar(), returnTo = '/me', stopAtCallback = false, query = '',
  localAddress,
}) {
  const from = localAddress ? { localAddress } : {};
  let res = await req(jar, `${url}/login?return_to=${encodeURIComponent(returnTo)}${query}`, from);
  if (res.status !== 303) throw new Error(`/login answered ${res.status}: ${await res.text()}`);
  const loginLocation = res.headers.get('location');
  let next = loginLocation;
  let posted = false;
  for (let i = 0; i < 20; i += 1) {
    if (next.startsWith(`${url}/callback`)) {
      if (stopAtCallback) return { jar, callbackUrl: next, loginLocation };
      const final = await req(jar, next, from);
      return { jar, callbackUrl: next, final, loginLocation };
    }
    res = await req(jar, next, from);
    if (res.status >= 300 && res.status < 400) {
      next = new URL(res.headers.get('location'), next).href;
      await res.arrayBuffer();
      continue;
    }
    const body = await res.text();
    const form = postForm(body);
    if (res.status !== 200 || !form || posted) throw new Error(`IdP step ${next}: ${res.status} ${body.slice(0, 300)}`);
    posted = true;
    const action = new URL(form.action || next, next).href;
    res = await req(jar, action, {
      ...from,
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ ...form.fields, login: user, password }).toString(),
    });
    if (res.status < 300 || res.status >= 400) throw new Error(`login POST answered ${res.status}`);
    next = new URL(res.headers.get('location'), action).href;
  }
  throw new Error('too many steps');
}

// Every Set-Cookie line of a response (Node 18's fetch has no getSetCookie()).
export function setCookieLines(res) {
  if (typeof res.headers.getSetCookie === 'function') return res.headers.getSetCookie();
  const joined = res.headers.get('set-cookie');
  return joined ? joined.split(/, (?=[A-Za-z0-9_.-]+=)/) : [];
}

// Revokes consent cid on consentd at url with the person's session, as a person does:
// /me's "Revoke…" link to the confirmation page, then that page's form (csrf and
// confirm=yes) -> the POST's Response (a 303 to /me/consents/cid/revoked when done).
export async function revokeOnMe({ url, jar, cid }) {
  const me = await req(jar, `${url}/me`);
  const html = await me.text();
  assert.equal(me.status, 200, `/me: ${html.slice(0, 200)}`);
  assert.ok(html.includes(`href="/me/consents/${cid}/revoke"`), `a revoke link for ${cid} on /me`);
  const page = await req(jar, `${url}/me/consents/${cid}/revoke`);
  const confirm = await page.text();
  assert.equal(page.status, 200, `confirmation page: ${confirm.slice(0, 300)}`);
  const form = postForm(confirm);
  assert.ok(form && form.action === `/me/consents/${cid}/revoke`, 'the confirming form');
  assert.equal(form.fields.confirm, 'yes');
  return req(jar, `${url}${form.action}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: url },
    body: new URLSearchParams(form.fields).toString(),
  });
}
