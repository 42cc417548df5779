// Drive an OpenID Provider's authorization code flow with plain HTTP (global fetch, manual
// redirects, a small cookie jar) -- no browser. Made for tests/idp/devidp.js: its login page is a
// form with fields `login` and `password`; consent is automatic.
//
//   await discover(issuer) -> the provider metadata (cached per issuer; checks `issuer` matches)
//
//   await loginForCode({
//     issuer, clientId, redirectUri,
//     user, password,
//     scope = 'openid profile email groups',
//     nonce, state, codeVerifier,   // generated when left out
//     extraParams = {},             // more authorization request parameters (prompt, max_age, resource...)
//     jar = new CookieJar(),        // pass the same jar again to reuse the IdP session (SSO: no form)
//   }) -> { code, state, codeVerifier, codeChallenge, nonce, iss, callbackUrl, jar }
//     Throws when the login is refused (status 401 from the form), when the provider redirects
//     back with ?error=..., when `state` differs, or when `iss` is missing/wrong although the
//     provider advertises authorization_response_iss_parameter_supported (RFC 9207).
//     The redirect to redirectUri is never followed (it may point at an unused port).
//
//   await exchangeCode({ issuer, clientId, clientSecret, redirectUri, code, codeVerifier })
//     -> the token endpoint's JSON ({ access_token, id_token, token_type, expires_in, scope,
//        refresh_token? }); client_secret_basic (RFC 6749 §2.3.1 encoding). Throws on non-200.
//
//   await getIdToken({ issuer, clientId, clientSecret, redirectUri, user, password,
//                      scope?, nonce?, extraParams?, jar? })
//     -> { id_token, access_token, refresh_token, token_type, expires_in, scope,
//          claims /* decoded (unverified) ID token payload */, header, nonce, code }
//     Checks the ID token's nonce, iss and aud (= clientId) -- not its signature (use jose's
//     createRemoteJWKSet + jwtVerify for that).
//
//   new CookieJar(): .store(url, response) / .header(url) -> 'a=b; c=d' / .get(name) / .clear()
//   pkcePair() -> { codeVerifier, codeChallenge }   (S256)
//   basicAuth(id, secret) -> 'Basic ...'
import { createHash, randomBytes } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader } from 'jose';

const b64url = (buf) => Buffer.from(buf).toString('base64url');
export const randomToken = (n = 32) => b64url(randomBytes(n));

export function pkcePair() {
  const codeVerifier = randomToken(32);
  const codeChallenge = b64url(createHash('sha256').update(codeVerifier).digest());
  return { codeVerifier, codeChallenge };
}

// RFC 6749 §2.3.1: form-urlencode id and secret, join with ':', Base64.
const formEncode = (s) => new URLSearchParams({ x: s }).toString().slice(2);
export function basicAuth(id, secret) {
  return `Basic ${Buffer.from(`${formEncode(id)}:${formEncode(secret)}`).toString('base64')}`;
}

// Set-Cookie headers of a fetch Response as an array. Headers.getSetCookie() is missing on
// Debian 12's Node 18 (it uses the system undici 5.15); then split the joined value at commas
// that start a new cookie (`, name=`), which keeps `Expires=Thu, 01 Jan ...` intact.
function setCookies(res) {
  if (typeof res.headers.getSetCookie === 'function') return res.headers.getSetCookie();
  const joined = res.headers.get('set-cookie');
  if (!joined) return [];
  return joined.split(/,\s*(?=[!#$%&'*+\-.^_`|~0-9A-Za-z]+=)/);
}

// A minimal cookie jar: name + path (domain ignored: everything is one loopback host here).
export class CookieJar {
  constructor() { this.cookies = new Map(); } // key `${path}\n${name}` -> {name, value, path, expires}

  store(url, res) {
    const u = new URL(url);
    for (const line of setCookies(res)) {
      const [pair, ...attrs] = line.split(';');
      const eq = pair.indexOf('=');
      if (eq <= 0) continue;
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      let path = u.pathname.replace(/\/[^/]*$/, '') || '/';
      let expires = null;
      for (const a of attrs) {
        const i = a.indexOf('=');
        const k = (i < 0 ? a : a.slice(0, i)).trim().toLowerCase();
        const v = i < 0 ? '' : a.slice(i + 1).trim();
        if (k === 'path' && v.startsWith('/')) path = v;
        else if (k === 'expires' && expires === null) { const t = Date.parse(v); if (!Number.isNaN(t)) expires = t; }
        else if (k === 'max-age') expires = Date.now() + Number(v) * 1000;
      }
      const key = `${path}\n${name}`;
      if (expires !== null && expires <= Date.now()) this.cookies.delete(key);
      else this.cookies.set(key, { name, value, path, expires });
    }
  }

  header(url) {
    const { pathname } = new URL(url);
    const now = Date.now();
    const out = [];
    for (const [key, c] of this.cookies) {
      if (c.expires !== null && c.expires <= now) { this.cookies.delete(key); continue; }
      const p = c.path;
      if (pathname === p || (pathname.startsWith(p) && (p.endsWith('/') || pathname[p.length] === '/'))) {
        out.push(c);
      }
    }
    out.sort((a, b) => b.path.length - a.path.length);
    return out.map((c) => `${c.name}=${c.value}`).join('; ');
  }

  get(name) {
    for (const c of this.cookies.values()) if (c.name === name) return c.value;
    return undefined;
  }

  clear() { this.cookies.clear(); }
}

async function request(jar, url, init = {}) {
  const headers = { ...(init.headers || {}) };
  const cookie = jar.header(url);
  if (cookie) headers.cookie = cookie;
  const res = await fetch(url, { ...init, headers, redirect: 'manual' });
  jar.store(url, res);
  return res;
}

const discoveryCache = new Map();
export async function discover(issuer) {
  if (discoveryCache.has(issuer)) return discoveryCache.get(issuer);
  const res = await fetch(`${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`);
  if (res.status !== 200) throw new Error(`discovery at ${issuer}: HTTP ${res.status}`);
  const meta = await res.json();
  if (meta.issuer !== issuer) throw new Error(`discovery: issuer ${meta.issuer} != ${issuer}`);
  discoveryCache.set(issuer, meta);
  return meta;
}

const unescapeHtml = (s) => s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<')
  .replace(/&gt;/g, '>').replace(/&amp;/g, '&');

// The first POST form of a page: its action and its named inputs.
function parsePostForm(html) {
  for (const m of html.matchAll(/<form\b([^>]*)>([\s\S]*?)<\/form>/gi)) {
    const attrs = m[1];
    if (!/method\s*=\s*["']?post/i.test(attrs)) continue;
    const action = unescapeHtml((attrs.match(/action\s*=\s*"([^"]*)"/i) || attrs.match(/action\s*=\s*'([^']*)'/i) || [])[1] || '');
    const fields = {};
    for (const im of m[2].matchAll(/<input\b([^>]*)>/gi)) {
      const name = (im[1].match(/name\s*=\s*"([^"]*)"/i) || [])[1];
      if (!name) continue;
      fields[unescapeHtml(name)] = unescapeHtml((im[1].match(/value\s*=\s*"([^"]*)"/i) || [])[1] || '');
    }
    return { action, fields };
  }
  return null;
}

const sameEndpoint = (a, b) => {
  const x = new URL(a); const y = new URL(b);
  return x.origin === y.origin && x.pathname === y.pathname;
};

export async function loginForCode(opts) {
  const {
    issuer, clientId, redirectUri, user, password,
    scope = 'openid profile email groups',
    extraParams = {}, jar = new CookieJar(), maxSteps = 20,
  } = opts;
  const meta = await discover(issuer);
  const nonce = opts.nonce ?? (scope.split(' ').includes('openid') ? randomToken(16) : undefined);
  const state = opts.state ?? randomToken(16);
  const codeVerifier = opts.codeVerifier ?? pkcePair().codeVerifier;
  const codeChallenge = b64url(createHash('sha256').update(codeVerifier).digest());

  const authUrl = new URL(meta.authorization_endpoint);
  const params = {
    response_type: 'code', client_id: clientId, redirect_uri: redirectUri, scope, state,
    code_challenge: codeChallenge, code_challenge_method: 'S256', ...extraParams,
  };
  if (nonce !== undefined) params.nonce = nonce;
  for (const [k, v] of Object.entries(params)) if (v !== undefined) authUrl.searchParams.set(k, v);

  let url = authUrl.href;
  let res = await request(jar, url);
  let postedLogin = false;
  for (let step = 0; step < maxSteps; step += 1) {
    if (res.status >= 300 && res.status < 400) {
      const loc = res.headers.get('location');
      await res.arrayBuffer();
      if (!loc) throw new Error(`redirect without Location from ${url}`);
      const next = new URL(loc, url).href;
      if (sameEndpoint(next, redirectUri)) {
        const q = new URL(next).searchParams;
        if (meta.authorization_response_iss_parameter_supported && q.get('iss') !== meta.issuer) {
          throw new Error(`authorization response iss ${q.get('iss')} != ${meta.issuer}`);
        }
        if (q.get('error')) {
          const e = new Error(`authorization error: ${q.get('error')}${q.get('error_description') ? `: ${q.get('error_description')}` : ''}`);
          e.error = q.get('error');
          e.callbackUrl = next;
          throw e;
        }
        if (q.get('state') !== state) throw new Error(`state mismatch: ${q.get('state')} != ${state}`);
        const code = q.get('code');
        if (!code) throw new Error(`no code in ${next}`);
        return {
          code, state, codeVerifier, codeChallenge, nonce, iss: q.get('iss'), callbackUrl: next, jar,
        };
      }
      url = next;
      res = await request(jar, url);
      continue;
    }
    const body = await res.text();
    if (res.status === 401 && postedLogin) throw new Error(`login refused for user ${JSON.stringify(user)}`);
    if (res.status !== 200) throw new Error(`HTTP ${res.status} at ${url}: ${body.slice(0, 500)}`);
    const form = parsePostForm(body);
    if (!form || !('login' in form.fields) || !('password' in form.fields)) {
      throw new Error(`no login form at ${url}: ${body.slice(0, 500)}`);
    }
    if (postedLogin) throw new Error(`login form shown again after posting it (user ${user})`);
    if (user === undefined || password === undefined) throw new Error('login required but no user/password given');
    const action = new URL(form.action || url, url).href;
    const fields = new URLSearchParams({ ...form.fields, login: user, password });
    postedLogin = true;
    url = action;
    res = await request(jar, action, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: fields.toString(),
    });
  }
  throw new Error(`too many steps (last ${url})`);
}

export async function exchangeCode({
  issuer, clientId, clientSecret, redirectUri, code, codeVerifier,
}) {
  const meta = await discover(issuer);
  const res = await fetch(meta.token_endpoint, {
    method: 'POST',
    headers: {
      authorization: basicAuth(clientId, clientSecret),
      'content-type': 'application/x-www-form-urlencoded',
      accept: 'application/json',
    },
    body: new URLSearchParams({
      grant_type: 'authorization_code', code, redirect_uri: redirectUri, code_verifier: codeVerifier,
    }).toString(),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`token endpoint: HTTP ${res.status}: ${text}`);
  return JSON.parse(text);
}

export async function getIdToken(opts) {
  const { issuer, clientId, clientSecret, redirectUri } = opts;
  const r = await loginForCode(opts);
  const tok = await exchangeCode({
    issuer, clientId, clientSecret, redirectUri, code: r.code, codeVerifier: r.codeVerifier,
  });
  if (!tok.id_token) throw new Error(`no id_token in token response (scope ${tok.scope})`);
  const claims = decodeJwt(tok.id_token);
  const header = decodeProtectedHeader(tok.id_token);
  if (claims.iss !== issuer) throw new Error(`id_token iss ${claims.iss} != ${issuer}`);
  const aud = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (!aud.includes(clientId)) throw new Error(`id_token aud ${claims.aud} lacks ${clientId}`);
  if (r.nonce !== undefined && claims.nonce !== r.nonce) throw new Error('id_token nonce mismatch');
  return {
    id_token: tok.id_token,
    access_token: tok.access_token,
    refresh_token: tok.refresh_token,
    token_type: tok.token_type,
    expires_in: tok.expires_in,
    scope: tok.scope,
    claims,
    header,
    nonce: r.nonce,
    code: r.code,
  };
}
