// The whole token-vault stack for one test file (docs/architecture.md flow D):
//   - the login IdP (as startStack does: people sign in to consentd there),
//   - a second development IdP in downstream mode: the downstream OAuth provider ("GitHub"):
//     authorization code + PKCE, opaque short-lived access tokens, rotating refresh tokens,
//     revocation and introspection; a new grant per authorization (reuseGrant: false), so two
//     consents never share provider tokens; an opt-in log of token and revocation requests,
//   - a tiny downstream API (tests/lib/downstream.js) accepting only tokens the provider's
//     introspection calls active,
//   - consentd configured with resources `github` and `gitlab` (both at that provider, with
//     different clients and redirect URIs) and agents coder and butler.
//
//   const v = await startVaultStack({ accessTokenTTL = 5, refreshMargin = 2, config, users, ... });
//     provider: more of the downstream devidp's config, as tests/idp/devidp.js documents it
//       (e.g. { revocationDelayMs, revocationFailures, refreshRefusals, withholdScopes })
//     config: consentd sections merged over fixtures.js vaultConfig() (or a function of
//       { url, providerIssuer } returning them); users: both IdPs' users
//     extraDsClients: more clients at the downstream IdP (or a function of consentd's URL)
//   v.url, v.c (consentd handle), v.idp (login IdP), v.ds (downstream IdP), v.api (downstream API)
//   v.gw                        // tests/lib/gateway.js client (gatewayOptions: its options,
//                               // e.g. assertionKey for private_key_jwt)
//   v.dsMeta                    // the downstream IdP's discovery document
//   v.dsIntrospect(token)       // introspection at the provider with the resource-server client
//   v.dsLog()                   // the downstream IdP's parsed TOKEN/REVOKE lines (see devidp.js)
//   v.sql(query)                // consentd's database, either backend (c.sql) -> stdout trimmed
//   await v.idToken(user)       // the login IdP's ID token for the gateway (subject_token)
//   await v.release(grant, action, extra)  // flow D release exchange -> { status, body, ... }
//   await v.callApi(token, path, method)   // the downstream API -> { status, body }
//   await v.waitFor(fn, ms)     // poll until truthy
//   await v.kill(signal = 'SIGKILL')  // signals consentd by pid -> its { code, signal } once it exited
//   await v.restart()           // consentd again on the same directory (database, master key),
//                               //   port and config, after kill(); v.c is the new handle
//   await v.stop()              // everything; asserts consentd exited 0 (sanitizers clean)
//
// HTTP (no browser) helpers for the connect flow:
//   new OriginJar()             // a cookie jar per origin (host:port): the two IdPs both use
//                               //   oidc-provider's cookie names on 127.0.0.1
//   await v.approveHttp({ jar, consentUri, user, select, duration, offline })
//     -> { res, location, form }  (signs in at consentd first when needed; POSTs approve)
//   await v.providerLoginHttp({ jar, authorizeUrl, user })  -> callback URL (not followed)
//   await v.revokeHttp({ jar, cid })   // the person revokes consent cid on /me (through the confirmation)
//   await v.connectHttp({ jar, consentUri, user, ... }) -> { callbackUrl, final, page }
//     approve + provider login + callback, following consentd's redirects to the final page
//   await v.consentAndGrant({ jar, user, ask, grantAsk, approved, ...opts }) -> the grant's answer
//     the exchange asks for consent, the person gives it over HTTP, the exchange then answers 200
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startIdp, startDevIdp, DEFAULT_CLIENTS, DEFAULT_USERS } from './idp.js';
import { startConsentd } from './consentd.js';
import { withFreePort } from './ports.js';
import { waitNodesReady } from './stack.js';
import { CookieJar, discover, getIdToken } from './idplogin.js';
import { consentdLogin, req, postForm, revokeOnMe } from './weblogin.js';
import { startDownstreamApi, introspect } from './downstream.js';
import { gateway, pollExchange, TOKEN_EXCHANGE, TT_ACCESS_TOKEN } from './gateway.js';
import { vaultConfig, DOWNSTREAM, GATEWAY_APP } from './fixtures.js';

export { DOWNSTREAM };

// A second devidp with the options startIdp does not pass on (reuseGrant, logTokenRequests,
// introspectGrantId); more: any other keys of its config (tests/idp/devidp.js).
export async function startDownstreamIdp({
  clients, users = DEFAULT_USERS, downstream, ttl, rotateRefreshToken = true,
  reuseGrant = false, logTokenRequests = true, introspectGrantId = true, more = {}, env, echo,
  process: asProcess,
}) {
  const cfg = {
    ...more, clients, users, downstream, rotateRefreshToken, reuseGrant, logTokenRequests,
    introspectGrantId,
  };
  if (ttl) cfg.ttl = ttl;
  const idp = await startDevIdp(cfg, { env, echo, name: 'devidp-downstream', process: asProcess });
  return { ...idp, clients, users };
}

// Cookie jars signed in to consentd, one per (consentd URL, person), made on first use:
//   const jarOf = signedInJars();   const jar = await jarOf(url, 'alice');
export function signedInJars() {
  const jars = new Map();
  return async (url, user) => {
    const key = `${url} ${user}`;
    if (!jars.has(key)) {
      const jar = new OriginJar();
      const { final } = await consentdLogin({ url, user, password: `${user}-password`, jar });
      assert.equal(final.status, 303, `login of ${user}`);
      jars.set(key, jar);
    }
    return jars.get(key);
  };
}

// Cookies per origin: browsers do not separate cookies by port, but a plain HTTP client can,
// which keeps the login IdP's and the downstream IdP's sessions apart.
export class OriginJar {
  constructor() { this.jars = new Map(); }

  jar(url) {
    const o = new URL(url).origin;
    if (!this.jars.has(o)) this.jars.set(o, new CookieJar());
    return this.jars.get(o);
  }

  store(url, res) { this.jar(url).store(url, res); }

  header(url) { return this.jar(url).header(url); }

  get(name, url) {
    if (url) return this.jar(url).get(name);
    for (const j of this.jars.values()) { const v = j.get(name); if (v !== undefined) return v; }
    return undefined;
  }

  clear(url) { if (url) this.jar(url).clear(); else this.jars.clear(); }
}

export const PROVIDER_SECRETS = {
  github: 'consentd-github-provider-secret',
  gitlab: 'consentd-gitlab-provider-secret',
  rs: 'resource-server-secret',
};

// consentd's port is chosen first, for the redirect URIs the providers register; when
// another process takes it before consentd binds it, everything starts again on another
// (tests/lib/ports.js withFreePort).
export function startVaultStack(opts = {}) {
  return withFreePort((port) => startVaultStackOn(port, opts));
}

async function startVaultStackOn(port, {
  accessTokenTTL = 5, refreshMargin = 2, config = {}, rotateRefreshToken = true,
  reuseGrant = false, extraDsClients = [], users = DEFAULT_USERS, echo, gatewayOptions = {},
  provider = {},
} = {}) {
  const url = `http://127.0.0.1:${port}`;
  const stoppers = [];
  const cleanup = async () => { for (const f of stoppers.reverse()) { try { await f(); } catch { /* next */ } } };
  try {
    const dsClients = [
      {
        client_id: 'consentd-github', client_secret: PROVIDER_SECRETS.github,
        redirect_uris: [`${url}/oauth/callback/github`],
        grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
      {
        client_id: 'consentd-gitlab', client_secret: PROVIDER_SECRETS.gitlab,
        redirect_uris: [`${url}/oauth/callback/gitlab`],
        grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
      {
        client_id: 'resource-server', client_secret: PROVIDER_SECRETS.rs,
        grant_types: [], response_types: [], redirect_uris: [],
        token_endpoint_auth_method: 'client_secret_basic',
      },
      // extraDsClients: an array, or a function of consentd's URL returning one (for redirect URIs)
      ...(typeof extraDsClients === 'function' ? extraDsClients(url) : extraDsClients),
    ];
    const ds = await startDownstreamIdp({
      clients: dsClients,
      downstream: { resource: DOWNSTREAM.resource, scopes: DOWNSTREAM.scopes, accessTokenTTL },
      rotateRefreshToken, reuseGrant, users, echo, more: provider,
    });
    stoppers.push(() => ds.stop());
    const dsMeta = await discover(ds.issuer);
    const api = await startDownstreamApi({
      introspectionEndpoint: dsMeta.introspection_endpoint, clientId: 'resource-server',
      clientSecret: PROVIDER_SECRETS.rs, audience: DOWNSTREAM.resource,
    });
    stoppers.push(() => api.stop());

    const loginClients = DEFAULT_CLIENTS.map((x) => (x.client_id === 'consentd'
      ? { ...x, redirect_uris: [`${url}/callback`], post_logout_redirect_uris: [`${url}/`] } : x));
    const idp = await startIdp({ clients: loginClients, users, echo });
    stoppers.push(() => idp.stop());

    const base = vaultConfig({
      providerIssuer: ds.issuer, refreshMargin,
      githubSecret: PROVIDER_SECRETS.github, gitlabSecret: PROVIDER_SECRETS.gitlab,
    });
    // config: an object, or a function of { url, providerIssuer } returning one (for sections
    // naming the downstream provider, e.g. another resource at it)
    const extra = typeof config === 'function' ? config({ url, providerIssuer: ds.issuer }) : config;
    const merged = { ...base };
    for (const [k, v] of Object.entries(extra)) merged[k] = v && typeof v === 'object' ? { ...(base[k] || {}), ...v } : v;
    merged.oidc = { issuer: idp.issuer, ...(extra.oidc || {}) };
    let c = await startConsentd({ port, config: merged });
    let cStopped = null;
    stoppers.push(async () => { if (!cStopped) cStopped = await c.stop(); });
    await waitNodesReady(c);

    const gw = gateway({ url, ...gatewayOptions });
    const dbPath = join(c.dir, 'consentd.db');
    const v = {
      url, c, idp, ds, api, gw, dsMeta, dbPath,
      sql: (query) => c.sql(query),   // either backend (tests/lib/consentd.js)
      dsIntrospect(token, hint) {
        return introspect({
          introspectionEndpoint: dsMeta.introspection_endpoint, clientId: 'resource-server',
          clientSecret: PROVIDER_SECRETS.rs, token, hint,
        });
      },
      // [{ what: 'TOKEN'|'REVOKE', grant_type, client_id, status, grant, hint, kind }]
      dsLog() {
        const out = [];
        for (const line of ds.log().split('\n')) {
          const m = /^\[devidp\] (TOKEN|REVOKE) (.*)$/.exec(line);
          if (!m) continue;
          const e = { what: m[1] };
          for (const kv of m[2].split(' ')) { const i = kv.indexOf('='); e[kv.slice(0, i)] = kv.slice(i + 1); }
          e.status = Number(e.status);
          out.push(e);
        }
        return out;
      },
      // consentd's output: stdout, stderr and its log stream ([server] log, one JSON object per line).
      log() {
        let out = '';
        for (const n of c.nodes || [c]) {
          try { out += readFileSync(join(n.dir, 'access.log'), 'utf8'); } catch { /* not written yet */ }
          out += n.proc.stdout + n.proc.stderr;
        }
        return out;
      },
      // An ID token of the login IdP for the gateway's subject_token.
      async idToken(user) {
        return (await getIdToken({ issuer: idp.issuer, ...GATEWAY_APP, user, password: `${user}-password` })).id_token;
      },
      // Flow D's release: the grant as subject token, asking for the provider's access token.
      release(grant, action, extra = {}) {
        return gw.post('/token', {
          grant_type: TOKEN_EXCHANGE, subject_token: grant, subject_token_type: TT_ACCESS_TOKEN,
          requested_token_type: TT_ACCESS_TOKEN, action, ...extra,
        });
      },
      // The downstream API with a bearer token -> { status, body }
      async callApi(token, path = '/repos/acme/widgets/issues', method = 'GET') {
        const res = await fetch(`${api.url}${path}`, { method, headers: { authorization: `Bearer ${token}` } });
        return { status: res.status, body: await res.json() };
      },
      // Polls fn until it returns a truthy value (-> that value) or ms pass (-> the last value).
      async waitFor(fn, ms = 15000, step = 250) {
        let last;
        for (const t0 = Date.now(); Date.now() - t0 < ms;) {
          last = await fn();
          if (last) return last;
          await new Promise((r) => { setTimeout(r, step); });
        }
        return last;
      },
      async approveHttp({
        jar, consentUri, user, select, duration, offline = false, decision = 'approve',
      }) {
        let page = await req(jar, consentUri);
        if (page.status === 303 || page.status === 302) {
          await page.arrayBuffer();
          await consentdLogin({ url, user, password: `${user}-password`, jar, returnTo: new URL(consentUri).pathname });
          page = await req(jar, consentUri);
        }
        const html = await page.text();
        assert.equal(page.status, 200, `consent page: ${html.slice(0, 300)}`);
        const form = postForm(html);
        assert.ok(form, 'a consent form');
        const fields = { ...form.fields };
        if (select) {
          for (const k of Object.keys(fields)) if (/^s\d+$/.test(k)) delete fields[k];
          for (const i of select) fields[`s${i}`] = 'on';
        } else {
          for (const m of html.matchAll(/name="(s\d+)"/g)) fields[m[1]] = 'on';
        }
        const dm = html.match(/<option value="(\d+)"[^>]*selected/);
        fields.duration = String(duration ?? (dm ? dm[1] : 3600));
        if (offline) fields.offline = 'on';
        fields.decision = decision;
        const action = new URL(form.action || consentUri, consentUri).href;
        const res = await req(jar, action, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded', origin: url },
          body: new URLSearchParams(fields).toString(),
        });
        const location = res.headers.get('location');
        const text = await res.text();
        return { res, status: res.status, location, text, form };
      },
      // From consentd's redirect to the provider up to (not including) consentd's callback.
      async providerLoginHttp({ jar, authorizeUrl, user }) {
        let next = authorizeUrl;
        let posted = false;
        for (let i = 0; i < 20; i += 1) {
          if (next.startsWith(`${url}/`)) return next;
          const res = await req(jar, next);
          if (res.status >= 300 && res.status < 400) {
            const loc = res.headers.get('location');
            await res.arrayBuffer();
            next = new URL(loc, next).href;
            continue;
          }
          const body = await res.text();
          const form = postForm(body);
          if (res.status !== 200 || !form || posted) throw new Error(`provider step ${next}: ${res.status} ${body.slice(0, 300)}`);
          posted = true;
          const action = new URL(form.action || next, next).href;
          const r2 = await req(jar, action, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams({ ...form.fields, login: user, password: `${user}-password` }).toString(),
          });
          if (r2.status < 300 || r2.status >= 400) throw new Error(`provider login POST answered ${r2.status}`);
          next = new URL(r2.headers.get('location'), action).href;
          await r2.arrayBuffer();
        }
        throw new Error('too many provider steps');
      },
      // GET the callback and follow consentd's own redirects -> { first, final, finalUrl, text }
      async deliverCallback({ jar, callbackUrl }) {
        const first = await req(jar, callbackUrl);
        let res = first;
        let at = callbackUrl;
        let text = null;
        for (let i = 0; i < 5 && res.status >= 300 && res.status < 400; i += 1) {
          const loc = res.headers.get('location');
          await res.arrayBuffer();
          at = new URL(loc, at).href;
          if (!at.startsWith(`${url}/`)) break;
          res = await req(jar, at);
        }
        if (first === res || res.status < 300 || res.status >= 400) text = await res.text();
        return { first, firstLocation: first.headers.get('location'), final: res, finalUrl: at, text };
      },
      // Revokes consent cid as the person does on /me: its "Revoke…" link, then the
      // confirmation page's form -> the POST's Response (a 303 to /me/consents/cid/revoked).
      async revokeHttp({ jar, cid }) {
        return revokeOnMe({ url, jar, cid });
      },
      async connectHttp({ jar, consentUri, user, ...opts }) {
        const a = await v.approveHttp({ jar, consentUri, user, ...opts });
        if (a.status !== 303) return { approve: a };
        assert.ok(a.location.startsWith(ds.issuer), `approve sends to the provider: ${a.location}`);
        const callbackUrl = await v.providerLoginHttp({ jar, authorizeUrl: a.location, user });
        const d = await v.deliverCallback({ jar, callbackUrl });
        return { approve: a, callbackUrl, ...d };
      },
      // The gateway's exchange ask answers consent_required; the person (jar, user) approves the
      // consent over HTTP (approveHttp, with opts); when that sends them to the provider, they
      // sign in there and the callback must answer 303, otherwise approved(the approve answer)
      // checks the decision; the exchange polled again (grantAsk) must answer 200 -> that answer.
      async consentAndGrant({ jar, user, ask, grantAsk = ask, approved = () => {}, ...opts }) {
        const first = await gw.exchange(ask);
        assert.equal(first.body?.error, 'consent_required', JSON.stringify(first.body));
        const a = await v.approveHttp({ jar, consentUri: first.body.consent_uri, user, ...opts });
        if (a.status === 303 && a.location.startsWith(ds.issuer)) {
          const callbackUrl = await v.providerLoginHttp({ jar, authorizeUrl: a.location, user });
          const d = await v.deliverCallback({ jar, callbackUrl });
          assert.equal(d.first.status, 303, `callback: ${d.text?.slice(0, 300)}`);
        } else {
          approved(a);
        }
        const g = await pollExchange(gw, grantAsk);
        assert.equal(g.status, 200, JSON.stringify(g.body));
        return g;
      },
      // SIGKILL (or signal) to consentd by pid; resolves when it has exited.
      async kill(signal = 'SIGKILL') {
        if (!c.proc.exitStatus) {
          try { process.kill(c.proc.pid, signal); } catch { /* gone already */ }
        }
        return c.proc.exited;
      },
      // consentd again, after kill(): the same directory, port and config (startConsentd keeps
      // an existing master key); resolves once /healthz answers.
      async restart() {
        assert.ok(c.proc.exitStatus, 'restart() after consentd exited (kill() first)');
        c = await startConsentd({ port, dir: c.dir, config: merged });
        v.c = c;
        cStopped = null;
        await waitNodesReady(c);
        return c;
      },
      async stop() {
        cStopped = await c.stop();
        await cleanup();
        assert.equal(cStopped.code, 0, `consentd exit: ${c.proc.stderr.slice(-3000)}`);
      },
    };
    return v;
  } catch (e) {
    await cleanup();
    throw e;
  }
}

export default startVaultStack;
