// MCP clients signing in through consentd (issue 30): what the tests of the sign-in share.
//
//   const cimd = await startCimdServer();   // tests/lib/cimd-server.mjs: real HTTPS, its own CA
//   cimd.url('/mcp/client.json')             // https://127.0.0.1:PORT/mcp/client.json (a client id)
//   cimd.ca, cimd.port; await cimd.hits(path); await cimd.stop()
//
//   mcpConfig({ cimd, mcp })  // consentConfig() + [mcp.notes] (resource notes), [mcp.wiki]
//                             // (resource wiki) and [mcp] trusting cimd's CA from loopback;
//                             // mcp: more [mcp] keys (or null values to drop some)
//
//   const cb = await startCallback();   // the client's loopback redirect listener
//   cb.redirectUri                       // http://127.0.0.1:PORT/callback
//   const u = await cb.next(ms)          // the URL the browser was sent to (a URL object)
//   await cb.stop()
//
//   await authorizeHttp({ url, jar, authorizeUrl, user, decision = 'approve', select, offline = true })
//     -> { redirect }   the client's redirect URI with the answer (code or error, state, iss)
//      | { status, text, res }   a page that is neither (an error page for the person)
//     the person's side over plain HTTP: consentd's redirects, a sign-in through the
//     development IdP when consentd asks for one (tests/lib/weblogin.js), and the consent
//     page's form, approved (every scope ticked, or those at positions `select`; "act while
//     I am away" ticked when offline and offered) or denied.
//
//   pkce()  -> { verifier, challenge }  (S256)
//   decodeJwt(token) -> its payload (no check: the tests verify with consentd's JWKS elsewhere)
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { consentConfig } from './fixtures.js';
import { consentdLogin, req, postForm } from './weblogin.js';

const CIMD_SERVER = join(dirname(fileURLToPath(import.meta.url)), 'cimd-server.mjs');

export async function startCimdServer() {
  // stdin is a pipe: the server exits when it closes (so it never outlives the test).
  const child = spawn(process.execPath, [CIMD_SERVER], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d) => { err += d; });
  const info = await new Promise((resolve, reject) => {
    let out = '';
    const t = setTimeout(() => reject(new Error(`cimd-server did not start: ${err}`)), 20000);
    child.stdout.on('data', (d) => {
      out += d;
      const nl = out.indexOf('\n');
      if (nl >= 0) { clearTimeout(t); resolve(JSON.parse(out.slice(0, nl))); }
    });
    child.on('exit', (code) => { clearTimeout(t); reject(new Error(`cimd-server exited ${code}: ${err}`)); });
  });
  const base = `https://127.0.0.1:${info.port}`;
  const exited = new Promise((r) => { child.on('exit', r); });
  return {
    port: info.port, ca: info.ca, base,
    url: (path) => `${base}${path}`,
    // How many times consentd fetched path (through the test CA, as consentd does).
    async hits(path) {
      const { default: https } = await import('node:https');
      const { readFileSync } = await import('node:fs');
      return new Promise((resolve, reject) => {
        https.get(`${base}/hits?p=${encodeURIComponent(path)}`, { ca: readFileSync(info.ca) }, (res) => {
          let b = '';
          res.on('data', (d) => { b += d; });
          res.on('end', () => resolve(JSON.parse(b).n));
        }).on('error', reject);
      });
    },
    async stop() {
      if (child.exitCode === null) {
        child.stdin.end();
        const t = setTimeout(() => { try { process.kill(child.pid, 'SIGKILL'); } catch { /* gone */ } }, 5000);
        await exited;
        clearTimeout(t);
      }
    },
  };
}

// consentd's configuration for the MCP tests: the fixtures' resources and agents, two MCP
// endpoints, and client-id URLs fetched from the test server (loopback, its CA).
// With a test CIMD server, its fetches get CIMD_TEST_TIMEOUTS: the defaults (2 s to
// connect, 5 s in all) are for the Internet, and a loaded make check took longer than 2 s
// to connect to the server on loopback; a test of a deadline sets its own (mcp).
export const CIMD_TEST_TIMEOUTS = { cimd_connect_timeout_ms: 10000, cimd_timeout_ms: 15000 };
export function mcpConfig({ cimd, mcp = {}, extra = {} } = {}) {
  const m = {
    cimd_allow: 'any',
    ...(cimd ? { cimd_ca_file: cimd.ca, cimd_allow_loopback: 'true', ...CIMD_TEST_TIMEOUTS } : {}),
    ...mcp,
  };
  return consentConfig({
    'mcp.notes': { resource: 'notes' },
    'mcp.wiki': { resource: 'wiki' },
    mcp: m,
    ...extra,
  });
}

// A loopback listener standing for a native MCP client's redirect URI: it answers every
// request with a small page and hands the URLs over in order.
export async function startCallback() {
  const queue = [];
  const waiters = [];
  const server = http.createServer((rq, rs) => {
    const u = new URL(rq.url, `http://127.0.0.1:${server.address().port}`);
    rs.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    rs.end('<!doctype html><title>Signed in</title><p>You can close this window.</p>');
    if (u.pathname !== '/callback') return;
    const w = waiters.shift();
    if (w) w(u); else queue.push(u);
  });
  await new Promise((r) => { server.listen(0, '127.0.0.1', r); });
  const port = server.address().port;
  return {
    port,
    redirectUri: `http://127.0.0.1:${port}/callback`,
    next(ms = 30000) {
      if (queue.length) return Promise.resolve(queue.shift());
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('no callback came')), ms);
        waiters.push((u) => { clearTimeout(t); resolve(u); });
      });
    },
    stop: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); }),
  };
}

export function pkce() {
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  return { verifier, challenge };
}

export function decodeJwt(token) {
  return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString('utf8'));
}

// The consent form as the person fills it in -> the fields to POST.
function consentFields(html, form, { decision, select, offline }) {
  const fields = { ...form.fields };
  for (const k of Object.keys(fields)) if (/^s\d+$/.test(k)) delete fields[k];
  const all = [...html.matchAll(/name="(s\d+)"/g)].map((x) => x[1]);
  for (const k of select ? select.map((i) => `s${i}`) : all) fields[k] = 'on';
  const dm = html.match(/<option value="(\d+)"[^>]*selected/) || html.match(/<option value="(\d+)"/);
  if (dm) fields.duration = dm[1];
  if (offline && /name="offline"/.test(html)) fields.offline = 'on';
  fields.decision = decision;
  return fields;
}

export async function authorizeHttp({
  url, jar, authorizeUrl, user, decision = 'approve', select, offline = true,
}) {
  let next = authorizeUrl;
  let decided = false;
  for (let i = 0; i < 25; i += 1) {
    if (!next.startsWith(`${url}/`)) return { redirect: new URL(next) };
    const at = new URL(next);
    if (at.pathname === '/login') {
      // consentd asks the person to sign in, and comes back to return_to.
      const returnTo = at.searchParams.get('return_to') || '/me';
      const { final } = await consentdLogin({ url, user, password: `${user}-password`, jar, returnTo });
      if (final.status !== 303) return { status: final.status, text: await final.text(), res: final };
      next = new URL(final.headers.get('location'), url).href;
      continue;
    }
    const res = await req(jar, next);
    if (res.status >= 300 && res.status < 400) {
      await res.arrayBuffer();
      next = new URL(res.headers.get('location'), next).href;
      continue;
    }
    const text = await res.text();
    const form = res.status === 200 ? postForm(text) : null;
    if (!decided && form && /name="decision"/.test(text)) {
      decided = true;
      const action = new URL(form.action || next, next).href;
      const r2 = await req(jar, action, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: url },
        body: new URLSearchParams(consentFields(text, form, { decision, select, offline })).toString(),
      });
      if (r2.status >= 300 && r2.status < 400) {
        await r2.arrayBuffer();
        next = new URL(r2.headers.get('location'), action).href;
        continue;
      }
      const t2 = await r2.text();
      // A page after the decision that links on to the authorization's last step.
      const link = t2.match(/href="(\/authorize\/[^"]+)"/);
      if (r2.status === 200 && link) { next = new URL(link[1].replace(/&amp;/g, '&'), url).href; continue; }
      return { status: r2.status, text: t2, res: r2 };
    }
    return { status: res.status, text, res };
  }
  throw new Error(`authorizeHttp: too many steps (at ${next})`);
}

// The code flow's first leg for a client, over plain HTTP (authorizeHttp): PKCE S256, state,
// resource -> { redirect, q (its parameters), verifier, state, authorizeUrl } or the page
// the person was left on ({ status, text }).  more: other /authorize parameters (null drops one).
export async function codeFlow({
  url, jar, user = 'alice', clientId, redirectUri = 'http://127.0.0.1:33418/callback',
  resource, scope, more = {}, decision, select, offline,
}) {
  const { verifier, challenge } = pkce();
  const state = randomBytes(12).toString('base64url');
  const p = { response_type: 'code', client_id: clientId, redirect_uri: redirectUri, state,
    code_challenge: challenge, code_challenge_method: 'S256', resource, scope, ...more };
  const u = new URL(`${url}/authorize`);
  for (const [k, v] of Object.entries(p)) if (v !== undefined && v !== null) u.searchParams.set(k, v);
  const r = await authorizeHttp({ url, jar, authorizeUrl: u.href, user, decision, select, offline });
  if (!r.redirect) return { ...r, verifier, state, authorizeUrl: u.href };
  return { redirect: r.redirect, q: Object.fromEntries(r.redirect.searchParams), verifier, state,
    authorizeUrl: u.href };
}

// A form POST to consentd's token endpoint (or another of its form endpoints) without the
// gateway's credentials -> { status, body, text, headers }.
export async function tokenPost(url, params, { path = '/token', headers = {} } = {}) {
  const body = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null) body.set(k, v);
  const res = await fetch(`${url}${path}`, {
    method: 'POST', body, headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
  });
  const text = await res.text();
  let parsed = null;
  try { parsed = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body: parsed, text, headers: res.headers };
}

// An MCP client's whole sign-in on a vault stack (tests/lib/vaultstack.js: v, with its
// provider's login), over plain HTTP: /authorize with PKCE and resource, consentd's consent
// page, the provider's sign-in and consent (at most three rounds), the code at /token ->
// the token response's body { access_token, refresh_token, ... }.  Throws, saying where it
// stopped, when no code or no token comes.
export async function vaultSignIn({ v, jar, user = 'alice', clientId, redirectUri, resource, scope }) {
  const { verifier, challenge } = pkce();
  const u = new URL(`${v.url}/authorize`);
  for (const [k, val] of Object.entries({ response_type: 'code', client_id: clientId, redirect_uri: redirectUri,
    state: randomBytes(8).toString('base64url'), code_challenge: challenge, code_challenge_method: 'S256',
    resource, scope })) u.searchParams.set(k, val);
  let r = await authorizeHttp({ url: v.url, jar, authorizeUrl: u.href, user });
  for (let i = 0; i < 3 && r.redirect && r.redirect.href.startsWith(v.ds.issuer); i += 1) {
    const cb = await v.providerLoginHttp({ jar, authorizeUrl: r.redirect.href, user });
    r = await authorizeHttp({ url: v.url, jar, authorizeUrl: cb, user });
  }
  const code = r.redirect?.searchParams.get('code');
  if (!code) throw new Error(`sign-in: no code: ${r.redirect?.href ?? `${r.status} ${r.text?.slice(0, 300)}`}`);
  const t = await tokenPost(v.url, { grant_type: 'authorization_code', code, redirect_uri: redirectUri,
    client_id: clientId, code_verifier: verifier, resource });
  if (t.status !== 200) throw new Error(`sign-in: /token ${t.status} ${t.text}`);
  return t.body;
}
