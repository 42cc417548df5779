// presets.js -- the development provider's preset modes (issue #33): one small OAuth 2
// authorization server per provider consentd has a preset for, each at /{mode} on the
// development IdP's port and playing that provider's quirks, so that consentd's presets are
// tested end to end against them (tests/integration/presets.test.js, docs/providers.md).
//
// NOT FOR PRODUCTION: plain http on loopback, everything in memory.
//
// Started by devidp.js when its config has "presets": ["github", ...] (or "preset": "github");
// consentd's [resource.NAME] then says `preset = github` and `provider_base_url = ISSUER/github`.
// Config keys (besides "users", as devidp.js):
//   "clients": [{ "client_id", "client_secret" }]   registered in every mode; redirect URIs are
//                                     registered at run time (POST /_devidp/register), because
//                                     consentd's port is known only after the provider's
//   "accessTokenTTL": 3600            seconds, where the provider's tokens expire
//   "logTokenRequests": true          stderr lines as devidp.js writes them:
//     "[devidp] TOKEN mode=M grant_type=G status=S grant=ID" and
//     "[devidp] REVOKE mode=M hint=H kind=K status=S grant=ID" (never a token value)
//
// The modes and what each plays (paths below /{mode}):
//   github      GET /login/oauth/authorize; POST /login/oauth/access_token: no expires_in, no
//               refresh token, scope answered comma-separated ("repo,issues:read"), errors
//               answered 200 {"error": ...}; DELETE /api/v3/applications/{client_id}/token with the
//               client's Basic credentials and {"access_token"} -> 204 (404 unknown token)
//   github-app  the same paths; expires_in = accessTokenTTL, a refresh token, scope ""; a refresh
//               token is single-use and using it kills the old access token (bad_refresh_token
//               for a used one, which also ends the authorization: reuse detection)
//   google      /o/oauth2/v2/auth, POST /token, POST /revoke (RFC 7009-like, token=...): a
//               refresh token only with access_type=offline, and again only with prompt=consent;
//               a refresh answer has no refresh_token (the old one stays valid)
//   microsoft   /oauth2/v2.0/authorize, /oauth2/v2.0/token: a refresh token only when the scope
//               has offline_access; answers add "openid profile email offline_access" to scope; a
//               new refresh token on every refresh; no revocation endpoint
//   slack       /oauth/v2/authorize with comma-separated user_scope (scope names bot scopes: a
//               bot token only), /api/oauth.v2.access answering {"ok":true, "authed_user":
//               {access_token, token_type:"user", scope "a,b", refresh_token, expires_in}},
//               errors as 200 {"ok":false,"error":...}; refresh answers flat; POST
//               /api/auth.revoke with the token as Bearer -> {"ok":true,"revoked":true}
//   gitlab      /oauth/authorize, /oauth/token, /oauth/revoke (RFC 7009); rotating refresh
//               tokens; the refresh answer has no expires_in (some GitLab versions)
//   atlassian   /authorize (needs audience=api.atlassian.com; prompt=consent), /oauth/token:
//               rotating single-use refresh tokens (only with offline_access), no revocation
//               endpoint; GET /oauth/token/accessible-resources -> [{ id: cloud id, ... }]
// Every mode: PKCE S256 required; a login form (fields login, password) at the authorize step;
// GET /_api/whoami with a bearer token -> 200 { sub, scope } or 401 (the "API" a token is used
// at; Atlassian's is GET /ex/jira/{cloudId}/rest/api/3/myself, which checks the cloud id).
// Test controls (top level, not per mode):
//   POST /_devidp/register {client_id, redirect_uri}          adds a redirect URI
//   POST /_devidp/refresh-failures {mode, count, status, error}   the next count refreshes of
//        mode answer status (e.g. 503, or 400 invalid_grant) instead of refreshing
//   POST /_devidp/revoke-user {mode, user}   the person removes the app at the provider: every
//        token of theirs dies (the next refresh answers invalid_grant)
import { createHash, randomBytes } from 'node:crypto';
import { readBodyUpTo } from '../lib/readbody.js';

export const MODES = ['github', 'github-app', 'google', 'microsoft', 'slack', 'gitlab', 'atlassian'];

const stderrLog = (...a) => console.error('[devidp]', ...a);
const tok = (p) => `${p}${randomBytes(18).toString('base64url')}`;
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));

// Per mode: paths, scope syntax, and how tokens look.
const SPEC = {
  github: { authorize: '/login/oauth/authorize', token: '/login/oauth/access_token', revoke: '/api/v3/applications/', sep: ' ', scopeParam: 'scope', prefix: 'gho_' },
  'github-app': { authorize: '/login/oauth/authorize', token: '/login/oauth/access_token', revoke: '/api/v3/applications/', sep: ' ', scopeParam: 'scope', prefix: 'ghu_', refresh: true, killOld: true, singleUse: true },
  google: { authorize: '/o/oauth2/v2/auth', token: '/token', revoke: '/revoke', sep: ' ', scopeParam: 'scope', prefix: 'ya29.', refresh: true },
  microsoft: { authorize: '/oauth2/v2.0/authorize', token: '/oauth2/v2.0/token', sep: ' ', scopeParam: 'scope', prefix: 'eyJ0eXAi.', refresh: true, rotate: true },
  slack: { authorize: '/oauth/v2/authorize', token: '/api/oauth.v2.access', revoke: '/api/auth.revoke', sep: ',', scopeParam: 'user_scope', prefix: 'xoxe.xoxp-1-', refresh: true, rotate: true, singleUse: true },
  gitlab: { authorize: '/oauth/authorize', token: '/oauth/token', revoke: '/oauth/revoke', sep: ' ', scopeParam: 'scope', prefix: 'glat-', refresh: true, rotate: true, singleUse: true, killOld: true },
  atlassian: { authorize: '/authorize', token: '/oauth/token', sep: ' ', scopeParam: 'scope', prefix: 'atl-', refresh: true, rotate: true, singleUse: true },
};

function page(title, body) {
  return `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title></head><body>${body}</body></html>`;
}

const readBody = (req) => readBodyUpTo(req, 65536);

function sendJson(res, status, obj, headers = {}) {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
  res.end(obj === undefined ? '' : JSON.stringify(obj));
}

function sendHtml(res, status, html, headers = {}) {
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', ...headers });
  res.end(html);
}

function basicCreds(req) {
  const h = req.headers.authorization || '';
  const m = /^Basic ([A-Za-z0-9+/=]+)$/.exec(h);
  if (!m) return null;
  const raw = Buffer.from(m[1], 'base64').toString('utf8');
  const i = raw.indexOf(':');
  if (i < 0) return null;
  // RFC 6749 §2.3.1 form-encodes both parts; GitHub's REST API takes them raw.
  const dec = (s) => { try { return decodeURIComponent(s.replace(/\+/g, ' ')); } catch { return s; } };
  return { raw: [raw.slice(0, i), raw.slice(i + 1)], form: [dec(raw.slice(0, i)), dec(raw.slice(i + 1))] };
}

function bearer(req) {
  const m = /^Bearer (\S+)$/.exec(req.headers.authorization || '');
  return m ? m[1] : null;
}

export function buildPresetProvider(issuer, cfg = {}, { log = stderrLog } = {}) {
  const users = cfg.users || {};
  const clients = new Map((cfg.clients || []).map((c) => [c.client_id, { ...c, redirect_uris: new Set(c.redirect_uris || []) }]));
  const ttl = cfg.accessTokenTTL || 3600;
  const modes = Array.isArray(cfg.presets) ? cfg.presets : [cfg.preset || 'github'];
  for (const m of modes) if (!SPEC[m]) throw new Error(`unknown preset mode ${m}`);
  const logOn = cfg.logTokenRequests !== false;
  const now = () => Math.floor(Date.now() / 1000);

  // State, per mode.
  const st = Object.fromEntries(modes.map((m) => [m, {
    txns: new Map(),       // login transaction id -> authorize params
    codes: new Map(),      // code -> { client, redirect, challenge, user, scope, offline, grant }
    access: new Map(),     // access token -> { grant, user, scope, exp, dead }
    refresh: new Map(),    // refresh token -> { grant, used }
    grants: new Map(),     // grant id -> { user, client, scope, alive }
    consented: new Set(),  // `${user} ${client}`: a person who consented before (Google)
    failures: [],          // queued refresh failures [{status, error}]
    cloudId: randomBytes(16).toString('hex').replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5'),
  }]));

  const logToken = (mode, gt, status, grant) => { if (logOn) log(`TOKEN mode=${mode} grant_type=${gt} status=${status} grant=${grant || '-'}`); };
  const logRevoke = (mode, hint, kind, status, grant) => { if (logOn) log(`REVOKE mode=${mode} hint=${hint || '-'} kind=${kind || '-'} status=${status} grant=${grant || '-'}`); };

  function killGrant(s, grant) {
    const g = s.grants.get(grant);
    if (g) g.alive = false;
    for (const a of s.access.values()) if (a.grant === grant) a.dead = true;
  }

  // The token answer of mode for a grant: new access (and refresh) tokens.
  function issue(mode, s, grantId, { withRefresh, refreshAnswer }) {
    const spec = SPEC[mode];
    const g = s.grants.get(grantId);
    const at = tok(spec.prefix);
    const exp = mode === 'github' ? 0 : now() + ttl;
    s.access.set(at, { grant: grantId, user: g.user, scope: g.scope, exp, dead: false });
    let rt;
    if (withRefresh) {
      rt = tok(mode === 'github-app' ? 'ghr_' : `${mode}-rt-`);
      s.refresh.set(rt, { grant: grantId, used: false });
    }
    const words = g.scope;
    switch (mode) {
      case 'github':
        return { access_token: at, token_type: 'bearer', scope: words.join(',') };
      case 'github-app':
        return { access_token: at, token_type: 'bearer', scope: '', expires_in: ttl, refresh_token: rt, refresh_token_expires_in: 15811200 };
      case 'google':
        return { access_token: at, token_type: 'Bearer', expires_in: ttl, scope: words.join(' '), ...(rt ? { refresh_token: rt } : {}) };
      case 'microsoft':
        return { token_type: 'Bearer', scope: ['openid', 'profile', 'email', ...words, ...(rt ? ['offline_access'] : [])].join(' '), expires_in: ttl, ext_expires_in: ttl, access_token: at, ...(rt ? { refresh_token: rt } : {}) };
      case 'slack': {
        const user = { id: `U${g.user.toUpperCase()}`, scope: words.join(','), access_token: at, token_type: 'user', refresh_token: rt, expires_in: ttl };
        if (refreshAnswer) return { ok: true, app_id: 'A0DEV', ...user, team: { id: 'T0DEV' } };
        return { ok: true, app_id: 'A0DEV', authed_user: user, team: { id: 'T0DEV', name: 'Dev' }, enterprise: null, is_enterprise_install: false };
      }
      case 'gitlab':
        return { access_token: at, token_type: 'Bearer', ...(refreshAnswer ? {} : { expires_in: ttl }), refresh_token: rt, scope: words.join(' '), created_at: now() };
      case 'atlassian':
        return { access_token: at, expires_in: ttl, token_type: 'Bearer', ...(rt ? { refresh_token: rt } : {}), scope: [...words, ...(rt ? ['offline_access'] : [])].join(' ') };
      default:
        throw new Error(mode);
    }
  }

  // An error as mode answers it: GitHub and Slack with 200.
  function tokenError(res, mode, status, error) {
    if (mode === 'github' || mode === 'github-app') return sendJson(res, 200, { error, error_description: error });
    if (mode === 'slack') return sendJson(res, 200, { ok: false, error });
    return sendJson(res, status, { error, error_description: error });
  }

  async function authorize(mode, s, url, res) {
    const spec = SPEC[mode];
    const q = url.searchParams;
    const client = clients.get(q.get('client_id') || '');
    const redirect = q.get('redirect_uri') || '';
    if (!client || !client.redirect_uris.has(redirect)) {
      return sendHtml(res, 400, page('Error', '<h1>Unknown client or redirect_uri</h1>'));
    }
    const back = (params) => {
      const u = new URL(redirect);
      for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
      return sendHtml(res, 302, '', { location: u.href });
    };
    if (q.get('response_type') !== 'code') return back({ error: 'unsupported_response_type', state: q.get('state') || '' });
    if (q.get('code_challenge_method') !== 'S256' || !q.get('code_challenge')) return back({ error: 'invalid_request', error_description: 'PKCE S256 required', state: q.get('state') || '' });
    if (mode === 'atlassian' && q.get('audience') !== 'api.atlassian.com') return back({ error: 'invalid_request', error_description: 'audience', state: q.get('state') || '' });
    const raw = q.get(spec.scopeParam);
    if (mode === 'slack' && q.get('scope')) return back({ error: 'invalid_scope', error_description: 'bot scopes are not what this test asks for', state: q.get('state') || '' });
    // The mode's separator: a request in another syntax names one scope with a space in it.
    const words = (raw || '').split(spec.sep).filter(Boolean);
    if (words.some((w) => /\s/.test(w))) return back({ error: 'invalid_scope', error_description: `scopes are ${spec.sep === ',' ? 'comma' : 'space'}-separated`, state: q.get('state') || '' });
    const txn = randomBytes(12).toString('base64url');
    s.txns.set(txn, {
      client: client.client_id, redirect, state: q.get('state') || '', challenge: q.get('code_challenge'),
      words, accessType: q.get('access_type'), prompt: q.get('prompt'),
    });
    return sendHtml(res, 200, page(`Sign in to ${mode}`, `<h1>Sign in to ${esc(mode)} (development)</h1>
<form method="post" action="/${esc(mode)}/login"><input type="hidden" name="txn" value="${esc(txn)}">
<label>User <input type="text" name="login"></label><label>Password <input type="password" name="password"></label>
<button type="submit">Sign in and allow</button></form>`));
  }

  async function login(mode, s, req, res) {
    const form = new URLSearchParams(await readBody(req));
    const t = s.txns.get(form.get('txn') || '');
    if (!t) return sendHtml(res, 400, page('Error', '<h1>Unknown transaction</h1>'));
    const u = users[form.get('login') || ''];
    if (!u || u.password !== form.get('password')) return sendHtml(res, 401, page('Error', '<h1>Invalid user or password</h1>'));
    s.txns.delete(form.get('txn'));
    const user = form.get('login');
    const offlineScope = t.words.includes('offline_access');
    const scope = t.words.filter((w) => w !== 'offline_access');
    const key = `${user} ${t.client}`;
    let withRefresh = !!SPEC[mode].refresh;
    if (mode === 'google') withRefresh = t.accessType === 'offline' && (t.prompt === 'consent' || !s.consented.has(key));
    if (mode === 'microsoft' || mode === 'atlassian') withRefresh = offlineScope;
    s.consented.add(key);
    const code = randomBytes(18).toString('base64url');
    s.codes.set(code, { ...t, user, scope, withRefresh, exp: now() + 60 });
    const cb = new URL(t.redirect);
    cb.searchParams.set('code', code);
    cb.searchParams.set('state', t.state);
    return sendHtml(res, 303, '', { location: cb.href });
  }

  function clientOf(req, form) {
    const b = basicCreds(req);
    const id = b ? b.form[0] : form.get('client_id');
    const secret = b ? b.form[1] : form.get('client_secret');
    const c = clients.get(id || '');
    return c && c.client_secret === secret ? c : null;
  }

  async function token(mode, s, req, res) {
    const form = new URLSearchParams(await readBody(req));
    const gt = form.get('grant_type');
    const c = clientOf(req, form);
    if (!c) { logToken(mode, gt, 401, null); return tokenError(res, mode, 401, 'invalid_client'); }
    if (gt === 'authorization_code') {
      const code = s.codes.get(form.get('code') || '');
      s.codes.delete(form.get('code') || '');
      const ok = code && code.exp > now() && code.client === c.client_id && code.redirect === form.get('redirect_uri')
        && createHash('sha256').update(form.get('code_verifier') || '').digest('base64url') === code.challenge;
      if (!ok) { logToken(mode, gt, 400, null); return tokenError(res, mode, 400, mode === 'github' || mode === 'github-app' ? 'bad_verification_code' : (mode === 'slack' ? 'invalid_code' : 'invalid_grant')); }
      const grant = randomBytes(8).toString('hex');
      s.grants.set(grant, { user: code.user, client: c.client_id, scope: code.scope, alive: true });
      const body = issue(mode, s, grant, { withRefresh: code.withRefresh });
      logToken(mode, gt, 200, grant);
      return sendJson(res, 200, body);
    }
    if (gt === 'refresh_token') {
      const rt = form.get('refresh_token') || '';
      const r = s.refresh.get(rt);
      if (s.failures.length > 0) {
        const f = s.failures.shift();
        logToken(mode, gt, f.status, r?.grant);
        return tokenError(res, mode, f.status, f.error);
      }
      const g = r ? s.grants.get(r.grant) : null;
      const invalid = mode === 'github-app' ? 'bad_refresh_token' : (mode === 'slack' ? 'invalid_refresh_token' : 'invalid_grant');
      if (!r || !g || !g.alive || g.client !== c.client_id) { logToken(mode, gt, 400, r?.grant); return tokenError(res, mode, 400, invalid); }
      if (r.used && SPEC[mode].singleUse) {
        // Reuse of a rotated refresh token: the authorization ends (reuse detection).
        killGrant(s, r.grant);
        logToken(mode, gt, 400, r.grant);
        return tokenError(res, mode, 400, invalid);
      }
      const spec = SPEC[mode];
      if (spec.killOld) for (const a of s.access.values()) if (a.grant === r.grant) a.dead = true;
      const newRefresh = !!(spec.rotate || spec.singleUse);
      if (newRefresh) r.used = true;
      const body = issue(mode, s, r.grant, { withRefresh: newRefresh, refreshAnswer: true });
      logToken(mode, gt, 200, r.grant);
      return sendJson(res, 200, body);
    }
    logToken(mode, gt, 400, null);
    return tokenError(res, mode, 400, 'unsupported_grant_type');
  }

  // Revocation in the mode's own kind.
  async function revoke(mode, s, req, res, url) {
    const body = await readBody(req);
    if (mode === 'github' || mode === 'github-app') {
      const id = decodeURIComponent(url.pathname.slice(SPEC[mode].revoke.length).replace(/\/token$/, ''));
      const b = basicCreds(req);
      const c = clients.get(id);
      if (req.method !== 'DELETE' || !url.pathname.endsWith('/token') || !b || !c || b.raw[0] !== id || b.raw[1] !== c.client_secret) {
        logRevoke(mode, '-', '-', 404, null);
        return sendJson(res, 404, { message: 'Not Found' });
      }
      let at;
      try { at = JSON.parse(body).access_token; } catch { at = null; }
      const a = s.access.get(at || '');
      if (!a || a.dead) { logRevoke(mode, 'access_token', '-', 404, null); return sendJson(res, 404, { message: 'Not Found' }); }
      a.dead = true;
      logRevoke(mode, 'access_token', 'AccessToken', 204, a.grant);
      return sendJson(res, 204);
    }
    if (mode === 'slack') {
      const t = bearer(req);
      const a = s.access.get(t || '');
      if (!a || a.dead || (a.exp && a.exp <= now())) { logRevoke(mode, 'access_token', '-', 200, null); return sendJson(res, 200, { ok: false, error: 'invalid_auth' }); }
      // Slack: revoking a user token ends the app's authorization for that person.
      killGrant(s, a.grant);
      logRevoke(mode, 'access_token', 'AccessToken', 200, a.grant);
      return sendJson(res, 200, { ok: true, revoked: true });
    }
    // RFC 7009 (Google, GitLab): 200 whether or not the token was known.
    const form = new URLSearchParams(body);
    const c = clientOf(req, form);
    if (mode === 'gitlab' && !c) { logRevoke(mode, form.get('token_type_hint'), '-', 401, null); return sendJson(res, 401, { error: 'invalid_client' }); }
    const t = form.get('token') || '';
    const r = s.refresh.get(t);
    const a = s.access.get(t);
    if (r) killGrant(s, r.grant);            // a refresh token takes its access tokens along
    if (a) a.dead = true;
    logRevoke(mode, form.get('token_type_hint'), r ? 'RefreshToken' : a ? 'AccessToken' : '-', 200, (r || a)?.grant);
    return sendJson(res, 200, {});
  }

  function live(s, t) {
    const a = s.access.get(t || '');
    if (!a || a.dead || (a.exp && a.exp <= now())) return null;
    const g = s.grants.get(a.grant);
    return g && g.alive ? a : null;
  }

  return async (req, res, url) => {
    const path = url.pathname;
    // Test controls.
    if (path.startsWith('/_devidp/') && req.method === 'POST') {
      const b = JSON.parse(await readBody(req) || '{}');
      if (path === '/_devidp/register') {
        const c = clients.get(b.client_id);
        if (!c) return sendJson(res, 404, { error: 'unknown client' });
        c.redirect_uris.add(b.redirect_uri);
        return sendJson(res, 200, { ok: true });
      }
      const s = st[b.mode];
      if (!s) return sendJson(res, 404, { error: 'unknown mode' });
      if (path === '/_devidp/refresh-failures') {
        for (let i = 0; i < (b.count || 1); i += 1) s.failures.push({ status: b.status || 503, error: b.error || 'temporarily_unavailable' });
        return sendJson(res, 200, { ok: true });
      }
      if (path === '/_devidp/revoke-user') {
        for (const [id, g] of s.grants) if (g.user === b.user) killGrant(s, id);
        return sendJson(res, 200, { ok: true });
      }
      return sendJson(res, 404, { error: 'unknown control' });
    }
    const m = /^\/([a-z-]+)(\/.*)$/.exec(path);
    if (!m || !st[m[1]]) return false;      // not a preset path: the caller answers
    const mode = m[1];
    const sub = m[2];
    const s = st[mode];
    const spec = SPEC[mode];
    try {
      if (sub === spec.authorize && req.method === 'GET') return await authorize(mode, s, url, res);
      if (sub === '/login' && req.method === 'POST') return await login(mode, s, req, res);
      if (sub === spec.token && req.method === 'POST') return await token(mode, s, req, res);
      if (spec.revoke && (sub === spec.revoke || (spec.revoke.endsWith('/') && sub.startsWith(spec.revoke)))) return await revoke(mode, s, req, res, { pathname: sub });
      if (sub === '/_api/whoami' && req.method === 'GET') {
        const a = live(s, bearer(req));
        return a ? sendJson(res, 200, { sub: a.user, scope: a.scope }) : sendJson(res, 401, { error: 'invalid_token' });
      }
      if (mode === 'atlassian' && sub === '/oauth/token/accessible-resources' && req.method === 'GET') {
        const a = live(s, bearer(req));
        if (!a) return sendJson(res, 401, { code: 401, message: 'Unauthorized' });
        return sendJson(res, 200, [{ id: s.cloudId, url: 'https://dev.atlassian.test', name: 'dev', scopes: a.scope, avatarUrl: '' }]);
      }
      if (mode === 'atlassian' && req.method === 'GET') {
        const am = /^\/ex\/jira\/([^/]+)\/rest\/api\/3\/myself$/.exec(sub);
        if (am) {
          const a = live(s, bearer(req));
          if (!a) return sendJson(res, 401, { code: 401, message: 'Unauthorized' });
          if (am[1] !== s.cloudId) return sendJson(res, 404, { message: 'unknown site' });
          return sendJson(res, 200, { accountId: a.user, cloudId: am[1] });
        }
      }
      return sendJson(res, 404, { error: 'not_found' });
    } catch (err) {
      log('preset error', err);
      if (!res.headersSent) sendJson(res, 500, { error: 'server_error' });
      return true;
    }
  };
}
