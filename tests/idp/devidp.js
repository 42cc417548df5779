#!/usr/bin/env node
// devidp.js -- development OpenID Provider for consentd's tests (panva's oidc-provider 8.x).
//
// NOT FOR PRODUCTION: plain http on loopback, in-memory storage, fresh signing keys per start.
//
// Usage:
//   node tests/idp/devidp.js [--port P] [--host 127.0.0.1] [--config FILE.json]
//   (or env: DEVIDP_PORT, DEVIDP_HOST, DEVIDP_CONFIG; the flags win)
//
//   --port 0 (the default) picks a free port. When listening, prints exactly one line
//     READY http://127.0.0.1:P
//   to stdout (the issuer); everything else goes to stderr. SIGTERM/SIGINT: clean exit 0.
//
// Config file (JSON; every key optional -- missing users/clients come from ./defaults.js:
//   users alice, bob, carol, admin (groups ["consent-admins"]) with password "<name>-password";
//   clients "consentd" and "gateway-app"):
//   {
//     "clients": [ oidc-provider client metadata, e.g.
//       { "client_id": "consentd", "client_secret": "...",
//         "redirect_uris": ["http://127.0.0.1:8080/callback"],
//         "post_logout_redirect_uris": ["http://127.0.0.1:8080/"],
//         "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
//         "token_endpoint_auth_method": "client_secret_basic",
//         "id_token_signed_response_alg": "ES256" } ],
//     "users": { "alice": { "password": "...", "name": "Alice Example",
//                           "email": "alice@example.test", "groups": [] }, ... },
//     "ttl": { "AccessToken": 3600, "IdToken": 3600, "RefreshToken": 86400, ... },
//     "rotateRefreshToken": true,
//     "reuseGrant": true,                 // false: every authorization gets a new grant (its own
//                                          //   tokens) instead of adding to the client's grant in
//                                          //   this session; revoking one leaves the others alive
//     "logTokenRequests": false,          // true: one stderr line per token-endpoint request
//                                          //   "[devidp] TOKEN grant_type=G client_id=C status=S grant=ID"
//                                          //   and per revocation request
//                                          //   "[devidp] REVOKE client_id=C hint=H kind=K status=S grant=ID"
//                                          //   (kind/grant "-" when the token was unknown); no token values
//     "revocationDelayMs": 0,              // > 0: every revocation request waits this long before
//                                          //   it is handled (a slow provider, for outbox tests)
//     "withholdScopes": [],                // downstream scopes never granted, though asked for (a
//                                          //   provider, or a person there, narrowing the request)
//     "refreshRefusals": 0,                // > 0: that many first refresh_token grants answer 400
//                                          //   invalid_grant, unhandled (the provider ended the
//                                          //   authorization), logged as TOKEN ... status=400
//     "revocationFailures": 0,             // > 0: that many first revocation requests answer 503
//                                          //   temporarily_unavailable, unhandled (logged as REVOKE
//                                          //   ... status=503)
//     "introspectGrantId": false,         // true: introspection answers carry grant_id (the token's grant)
//     "title": "GitHub (development)",    // who this IdP plays, named on its sign-in page
//     "cookiePrefix": "_provider",         // prefix of its cookie names (default: oidc-provider's
//                                          //   _session, _interaction, ...): browsers keep cookies
//                                          //   per host, not per port, so a second devidp on
//                                          //   127.0.0.1 needs its own names to keep both sessions
//     "presets": ["github", "slack", ...], // instead of everything here: the preset modes of
//                                          //   ./presets.js (issue #33), one provider per preset
//                                          //   at /{mode} playing that provider's quirks; see there
//     "idJag": {                           // mint ID-JAGs (issue #30 item 6): enterprise-managed
//                                          //   authorization; see "ID-JAG" below
//       "clientIds": { "gateway-app": "mcp-ide" },  // the ID-JAG's client_id for a client of
//                                          //   this IdP (its id at the authorization server;
//                                          //   default: the same client_id)
//       "alg": "RS256",                    // or "ES256": which of this IdP's keys signs
//       "lifetime": 300,                   // seconds from iat to exp
//       "testKnobs": false                 // true: the request may carry devidp_iat_offset
//                                          //   (seconds added to iat and exp, e.g. -600 for an
//                                          //   expired grant) and devidp_typ (another header
//                                          //   typ) -- for attacker-side tests only
//     },
//     "downstream": {                      // behave as a downstream OAuth provider (flow D)
//       "resource": "https://api.downstream.test",   // resource indicator = token audience
//                                          //   (default: ISSUER/api)
//       "scopes": ["repo", "issues:read", "issues:write"],
//       "accessTokenTTL": 30               // seconds; opaque access tokens
//     }
//   }
//
// Behaviour:
//   - issuer http://HOST:P; discovery at /.well-known/openid-configuration; PKCE S256 required
//     for every client; subject_types_supported ["public"]; RFC 9207 `iss` in authorization
//     responses; revocation, introspection, userinfo, RP-initiated logout (end_session_endpoint).
//   - login: GET /interaction/{uid} renders an HTML form (fields `login`, `password`, a submit
//     button) posting to /interaction/{uid}/login; only configured users with their password get
//     in (a bad login re-renders the form with status 401). `sub` = the user name.
//   - consent is never asked: loadExistingGrant grants every requested scope/claim (all clients
//     here are first-party test clients).
//   - claims: openid: sub; profile: name, preferred_username; email: email, email_verified;
//     groups: groups (scope `groups`). conformIdTokenClaims is false, so ID tokens carry the
//     claims of the requested scopes. `auth_time` is in ID tokens only when the client has
//     `require_auth_time: true` (the default "consentd" client does) or the request has max_age.
//   - refresh tokens: issued to every client allowed the refresh_token grant (no offline_access
//     needed), rotated on use when rotateRefreshToken (default true), not tied to the session.
//   - downstream mode: an authorization request whose scope names one of downstream.scopes gets
//     the resource `downstream.resource` by default (no `resource` parameter needed); its access
//     tokens are opaque, aud = that resource, scope = the granted downstream scopes, TTL
//     downstream.accessTokenTTL; they introspect and revoke at the usual endpoints.
//   - RP-initiated logout: the confirmation page auto-submits "yes" (a script; a plain HTTP client
//     posts the form itself: xsrf + logout=yes).
//   - GET /_devidp/health answers 200 "ok".
//   - ID-JAG (with "idJag"; draft-ietf-oauth-identity-assertion-authz-grant §4.3): the token
//     endpoint takes grant_type=urn:ietf:params:oauth:grant-type:token-exchange (RFC 8693) from
//     an authenticated client allowed that grant type, with requested_token_type
//     urn:ietf:params:oauth:token-type:id-jag, subject_token = an ID token this IdP issued to
//     that client (subject_token_type urn:ietf:params:oauth:token-type:id_token), audience =
//     the authorization server's issuer, and optional resource and scope. It answers
//     { access_token: the ID-JAG, issued_token_type: ...:id-jag, token_type: "N_A", expires_in }.
//     The ID-JAG: header typ "oauth-id-jag+jwt", alg and kid of this IdP's key; claims iss, sub
//     (the ID token's), aud (the audience), client_id (idJag.clientIds[client] or the client's
//     id), jti, iat, exp, resource and scope when asked for.

import { createServer } from 'node:http';
import { randomBytes, randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { readFileSync, realpathSync } from 'node:fs';
import Provider, { errors } from 'oidc-provider';
import {
  generateKeyPair, exportJWK, importJWK, SignJWT, jwtVerify, createLocalJWKSet,
} from 'jose';
import { DEFAULT_USERS, DEFAULT_CLIENTS } from './defaults.js';
import { buildPresetProvider } from './presets.js';
import { readBodyUpTo } from '../lib/readbody.js';

const stderrLog = (...a) => console.error('[devidp]', ...a);

// oidc-provider's MemoryAdapter keeps one store for its whole process.  Several devidps in
// one process (tests/lib/idp.js starts them in the test's own) each need their own, as
// separate processes had: the MemoryAdapter's operations over a Map of this instance.
const GRANTABLE = new Set(['AccessToken', 'AuthorizationCode', 'RefreshToken', 'DeviceCode',
  'BackchannelAuthenticationRequest']);
export function ownMemoryAdapter() {
  const store = new Map();
  return class OwnMemoryAdapter {
    constructor(model) { this.model = model; }

    key(id) { return `${this.model}:${id}`; }

    async destroy(id) { store.delete(this.key(id)); }

    async consume(id) { store.get(this.key(id)).consumed = Math.floor(Date.now() / 1000); }

    async find(id) { return store.get(this.key(id)); }

    async findByUid(uid) { return this.find(store.get(`sessionUid:${uid}`)); }

    async findByUserCode(userCode) { return this.find(store.get(`userCode:${userCode}`)); }

    async upsert(id, payload) {
      const key = this.key(id);
      if (this.model === 'Session') store.set(`sessionUid:${payload.uid}`, id);
      const { grantId, userCode } = payload;
      if (GRANTABLE.has(this.model) && grantId) {
        const grant = store.get(`grant:${grantId}`);
        if (!grant) store.set(`grant:${grantId}`, [key]); else grant.push(key);
      }
      if (userCode) store.set(`userCode:${userCode}`, id);
      store.set(key, payload);
    }

    async revokeByGrantId(grantId) {
      const grant = store.get(`grant:${grantId}`);
      if (grant) {
        grant.forEach((k) => store.delete(k));
        store.delete(`grant:${grantId}`);
      }
    }
  };
}

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({
    '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;',
  }[c]));
}

function page(title, body) {
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:sans-serif;max-width:24em;margin:2em auto}label{display:block;margin:.6em 0}
input{width:100%;padding:.3em}button{margin-top:1em;padding:.4em 1em}.error{color:#a00}</style>
</head><body>${body}</body></html>`;
}

function loginPage(uid, details, { error, login, title } = {}) {
  const client = details.params.client_id;
  return page(title ? `Sign in to ${title}` : 'Sign in', `<h1>${title ? `Sign in to ${esc(title)}` : 'Sign in'}</h1>
<p>to continue to <code>${esc(client)}</code> (development IdP)</p>
${error ? `<p class="error" role="alert">${esc(error)}</p>` : ''}
<form method="post" action="/interaction/${esc(uid)}/login" autocomplete="off">
<label>User <input type="text" name="login" id="login" value="${esc(login || '')}" required autofocus></label>
<label>Password <input type="password" name="password" id="password" required></label>
<button type="submit" id="submit">Sign in</button>
</form>
<form method="get" action="/interaction/${esc(uid)}/abort"><button type="submit" id="abort">Cancel</button></form>`);
}

const readBody = (req) => readBodyUpTo(req, 65536);

function send(res, status, body, headers = {}) {
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'x-frame-options': 'DENY',
    ...headers,
  });
  res.end(body);
}

async function makeJwks() {
  const keys = [];
  for (const alg of ['RS256', 'ES256']) {
    const { privateKey } = await generateKeyPair(alg, { extractable: true, modulusLength: 2048 });
    const jwk = await exportJWK(privateKey);
    keys.push({ ...jwk, alg, use: 'sig', kid: `${alg.toLowerCase()}-${randomUUID().slice(0, 8)}` });
  }
  return { keys };
}

// opts: log (default: stderr lines "[devidp] ..."), adapter (default: oidc-provider's
// MemoryAdapter, one store per process; see ownMemoryAdapter).
export async function buildProvider(issuer, cfg = {}, { log = stderrLog, adapter } = {}) {
  const users = cfg.users || DEFAULT_USERS;
  const clients = cfg.clients || DEFAULT_CLIENTS;
  const ttlCfg = cfg.ttl || {};
  const downstream = cfg.downstream || null;
  const dsScopes = new Set(downstream ? (downstream.scopes || []) : []);
  const dsResource = downstream ? (downstream.resource || `${issuer}/api`) : null;
  const reuseGrant = cfg.reuseGrant !== false;

  const oidcClaims = {
    openid: ['sub'],
    profile: ['name', 'preferred_username'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  };
  const oidcScopes = new Set(['openid', 'offline_access', ...Object.keys(oidcClaims)]);

  const prefix = cfg.cookiePrefix;
  const configuration = {
    ...(adapter ? { adapter } : {}),
    clients,
    jwks: await makeJwks(),
    cookies: {
      keys: [randomBytes(32).toString('base64url')],
      ...(prefix ? {
        names: { session: `${prefix}_session`, interaction: `${prefix}_interaction`, resume: `${prefix}_interaction_resume` },
      } : {}),
    },
    claims: oidcClaims,
    scopes: [...oidcScopes],
    subjectTypes: ['public'],
    conformIdTokenClaims: false,
    pkce: { required: () => true, methods: ['S256'] },
    responseTypes: ['code'],
    clientDefaults: {
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
      id_token_signed_response_alg: 'RS256',
    },
    ttl: {
      AuthorizationCode: 60,
      IdToken: 3600,
      Interaction: 3600,
      Session: 14 * 24 * 3600,
      Grant: 14 * 24 * 3600,
      RefreshToken: 14 * 24 * 3600,
      ...ttlCfg,
      // a resource server's accessTokenTTL (downstream mode) wins over the plain AccessToken TTL
      AccessToken: (ctx, token) => token.resourceServer?.accessTokenTTL || ttlCfg.AccessToken || 3600,
    },
    rotateRefreshToken: cfg.rotateRefreshToken !== undefined ? !!cfg.rotateRefreshToken : true,
    issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
    expiresWithSession: async () => false,
    ...(cfg.introspectGrantId ? { extraTokenClaims: async (ctx, token) => ({ grant_id: token.grantId }) } : {}),
    features: {
      devInteractions: { enabled: false },
      revocation: { enabled: true },
      introspection: { enabled: true },
      userinfo: { enabled: true },
      rpInitiatedLogout: {
        enabled: true,
        async logoutSource(ctx, form) {
          // The form carries the xsrf token; add logout=yes and submit it at once.
          const f = form.replace('</form>', '<input type="hidden" name="logout" value="yes"/></form>');
          ctx.type = 'html';
          ctx.body = page('Sign out', `<h1>Signing out</h1>${f}
<button type="submit" form="op.logoutForm" id="logout">Sign out</button>
<script>document.getElementById('op.logoutForm').submit()</script>`);
        },
        async postLogoutSuccessSource(ctx) {
          ctx.type = 'html';
          ctx.body = page('Signed out', '<h1>Signed out</h1><p>You are signed out of the development IdP.</p>');
        },
      },
      resourceIndicators: downstream ? {
        enabled: true,
        async defaultResource(ctx, client, oneOf) {
          if (oneOf) return oneOf.length === 1 ? oneOf[0] : oneOf;
          const requested = (ctx.oidc.params?.scope || '').split(' ');
          return requested.some((s) => dsScopes.has(s)) ? dsResource : undefined;
        },
        useGrantedResource: async () => true,
        async getResourceServerInfo(ctx, indicator) {
          if (indicator !== dsResource) throw new errors.InvalidTarget();
          return {
            // withholdScopes: the resource server does not know them, so a request
            // naming them gets a token without them (no error), as a narrowing provider.
            scope: [...dsScopes].filter((s) => !(cfg.withholdScopes || []).includes(s)).join(' '),
            audience: dsResource,
            accessTokenFormat: 'opaque',
            accessTokenTTL: downstream.accessTokenTTL || ttlCfg.AccessToken || 3600,
          };
        },
      } : { enabled: false },
    },
    async findAccount(ctx, id) {
      if (!Object.prototype.hasOwnProperty.call(users, id)) return undefined;
      const u = users[id];
      return {
        accountId: id,
        async claims() {
          return {
            sub: id,
            name: u.name || id,
            preferred_username: id,
            email: u.email || `${id}@example.test`,
            email_verified: true,
            groups: Array.isArray(u.groups) ? u.groups : [],
          };
        },
      };
    },
    // First-party test clients: grant whatever is requested, so the consent prompt never shows.
    async loadExistingGrant(ctx) {
      const { oidc } = ctx;
      const grantId = oidc.result?.consent?.grantId
        || (reuseGrant ? oidc.session.grantIdFor(oidc.client.clientId) : undefined);
      let grant = grantId ? await oidc.provider.Grant.find(grantId) : undefined;
      if (!grant || grant.accountId !== oidc.session.accountId) {
        grant = new oidc.provider.Grant({ clientId: oidc.client.clientId, accountId: oidc.session.accountId });
      }
      const requested = [...(oidc.requestParamScopes || [])];
      const oidcReq = requested.filter((s) => oidcScopes.has(s));
      if (oidcReq.length) grant.addOIDCScope(oidcReq.join(' '));
      const claims = [...(oidc.requestParamClaims || [])];
      if (claims.length) grant.addOIDCClaims(claims);
      for (const [indicator, rs] of Object.entries(oidc.resourceServers || {})) {
        const rsReq = requested.filter((s) => rs.scopes.has(s));
        if (rsReq.length) grant.addResourceScope(indicator, rsReq.join(' '));
      }
      await grant.save();
      return grant;
    },
    async renderError(ctx, out) {
      ctx.type = 'html';
      ctx.body = page('Error', `<h1>Error</h1><p><code>${esc(out.error)}</code></p>${out.error_description ? `<p>${esc(out.error_description)}</p>` : ''}`);
    },
  };

  const provider = new Provider(issuer, configuration);
  provider.on('server_error', (ctx, err) => log('server_error', err));
  if (cfg.idJag) registerIdJag(provider, issuer, configuration.jwks, cfg.idJag);
  if (cfg.refreshRefusals > 0) {
    let refusals = cfg.refreshRefusals;
    provider.use(async (ctx, next) => {
      if (ctx.method === 'POST' && ctx.path === '/token' && refusals > 0) {
        const body = await new Promise((resolve) => {
          let s = '';
          ctx.req.on('data', (d) => { s += d; });
          ctx.req.on('end', () => resolve(s));
        });
        const grantType = new URLSearchParams(body).get('grant_type');
        if (grantType === 'refresh_token') {
          refusals -= 1;
          ctx.status = 400;
          ctx.body = { error: 'invalid_grant', error_description: 'grant request is invalid' };
          if (cfg.logTokenRequests) log('TOKEN grant_type=refresh_token client_id=- status=400 grant=-');
          return;
        }
        // Not a refresh: oidc-provider takes an already read body from req.body.
        ctx.req.body = body;
      }
      await next();
    });
  }
  if (cfg.revocationDelayMs > 0 || cfg.revocationFailures > 0) {
    let failures = cfg.revocationFailures || 0;
    provider.use(async (ctx, next) => {
      if (ctx.method === 'POST' && ctx.path === '/token/revocation') {
        if (cfg.revocationDelayMs > 0) await new Promise((r) => { setTimeout(r, cfg.revocationDelayMs); });
        if (failures > 0) {
          failures -= 1;
          ctx.status = 503;
          ctx.body = { error: 'temporarily_unavailable' };
          if (cfg.logTokenRequests) log('REVOKE client_id=- hint=- kind=- status=503 grant=-');
          return;
        }
      }
      await next();
    });
  }
  if (cfg.logTokenRequests) {
    // Opt-in request log for tests (e.g. "exactly one refresh"): names, never token values.
    provider.use(async (ctx, next) => {
      try {
        await next();
      } finally {
        if (ctx.method === 'POST' && (ctx.path === '/token' || ctx.path === '/token/revocation')) {
          const o = ctx.oidc || {};
          const ent = o.entities || {};
          const client = o.client?.clientId || '-';
          if (ctx.path === '/token') {
            const t = ent.RefreshToken || ent.AuthorizationCode;
            log(`TOKEN grant_type=${o.params?.grant_type || '-'} client_id=${client} status=${ctx.status} grant=${t?.grantId || '-'}`);
          } else {
            const t = ent.RefreshToken || ent.AccessToken || ent.ClientCredentials;
            log(`REVOKE client_id=${client} hint=${o.params?.token_type_hint || '-'} kind=${t?.kind || '-'} status=${ctx.status} grant=${t?.grantId || '-'}`);
          }
        }
      }
    });
  }
  return { provider, users, title: cfg.title };
}

// ID-JAG (draft-ietf-oauth-identity-assertion-authz-grant §4.3): an RFC 8693 token exchange of
// an ID token this IdP issued to the calling client for an Identity Assertion JWT Authorization
// Grant, signed with this IdP's key. The client was authenticated by oidc-provider already.
const URN_TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const URN_TT_ID_TOKEN = 'urn:ietf:params:oauth:token-type:id_token';
const URN_TT_ID_JAG = 'urn:ietf:params:oauth:token-type:id-jag';

function registerIdJag(provider, issuer, jwks, opts) {
  const alg = opts.alg || 'RS256';
  const priv = jwks.keys.find((k) => k.alg === alg);
  const publicSet = createLocalJWKSet({
    keys: jwks.keys.map(({ d, p, q, dp, dq, qi, ...pub }) => pub),
  });
  const lifetime = opts.lifetime || 300;
  const clientIds = opts.clientIds || {};
  provider.registerGrantType(URN_TOKEN_EXCHANGE, async (ctx, next) => {
    const p = ctx.oidc.params;
    const client = ctx.oidc.client.clientId;
    if (p.requested_token_type !== URN_TT_ID_JAG) {
      throw new errors.InvalidRequest(`requested_token_type must be ${URN_TT_ID_JAG}`);
    }
    if (p.subject_token_type !== URN_TT_ID_TOKEN) {
      throw new errors.InvalidRequest(`subject_token_type must be ${URN_TT_ID_TOKEN}`);
    }
    if (!p.subject_token) throw new errors.InvalidRequest('subject_token is missing');
    if (!p.audience) throw new errors.InvalidRequest('audience (the authorization server\'s issuer) is missing');
    let claims;
    try {
      ({ payload: claims } = await jwtVerify(p.subject_token, publicSet, { issuer, audience: client }));
    } catch (err) {
      throw new errors.InvalidGrant(`subject_token is not an ID token of this IdP for this client: ${err.code || err.message}`);
    }
    let offset = 0;
    let typ = 'oauth-id-jag+jwt';
    if (p.devidp_iat_offset !== undefined || p.devidp_typ !== undefined) {
      if (!opts.testKnobs) throw new errors.InvalidRequest('devidp_* parameters need idJag.testKnobs');
      offset = Number.parseInt(p.devidp_iat_offset || '0', 10) || 0;
      typ = p.devidp_typ || typ;
    }
    const iat = Math.floor(Date.now() / 1000) + offset;
    const body = {
      client_id: clientIds[client] || client,
      jti: randomUUID(),
      ...(p.resource ? { resource: p.resource } : {}),
      ...(p.scope ? { scope: p.scope } : {}),
    };
    const key = await importJWK(priv, alg);
    const jag = await new SignJWT(body)
      .setProtectedHeader({ alg, kid: priv.kid, typ })
      .setIssuer(issuer).setSubject(claims.sub).setAudience(p.audience)
      .setIssuedAt(iat).setExpirationTime(iat + lifetime)
      .sign(key);
    ctx.body = {
      access_token: jag, issued_token_type: URN_TT_ID_JAG, token_type: 'N_A', expires_in: lifetime,
    };
    await next();
  }, ['subject_token', 'subject_token_type', 'requested_token_type', 'audience', 'resource',
    'scope', 'devidp_iat_offset', 'devidp_typ']);
}

// The interaction routes (login form, auto-consent, abort). Everything else goes to the provider.
function makeHandler(provider, users, title, log = stderrLog) {
  const callback = provider.callback();
  return async (req, res) => {
    try {
      // In the try: a request-target that does not parse is an error page, not a crash of
      // the test's process the IdP may be served from (tests/lib/idp.js).
      const url = new URL(req.url, 'http://x');
      const m = url.pathname.match(/^\/interaction\/([A-Za-z0-9_-]+)(\/login|\/abort)?$/);
      if (url.pathname === '/_devidp/health') return send(res, 200, 'ok', { 'content-type': 'text/plain' });
      if (!m) return callback(req, res);
      const uid = m[1];
      const details = await provider.interactionDetails(req, res);
      if (details.uid !== uid) return send(res, 400, page('Error', '<h1>Interaction mismatch</h1>'));
      const { prompt } = details;

      if (m[2] === '/abort') {
        const to = await provider.interactionResult(req, res, {
          error: 'access_denied', error_description: 'End-User aborted interaction',
        }, { mergeWithLastSubmission: false });
        return send(res, 303, '', { location: to });
      }

      if (m[2] === '/login') {
        if (req.method !== 'POST') return send(res, 405, page('Error', '<h1>Method not allowed</h1>'), { allow: 'POST' });
        if (prompt.name !== 'login') return send(res, 400, page('Error', '<h1>No login pending</h1>'));
        const form = new URLSearchParams(await readBody(req));
        const login = form.get('login') || '';
        const password = form.get('password') || '';
        const u = Object.prototype.hasOwnProperty.call(users, login) ? users[login] : null;
        if (!u || typeof u.password !== 'string' || u.password !== password) {
          return send(res, 401, loginPage(uid, details, { error: 'Invalid user or password.', login, title }));
        }
        const to = await provider.interactionResult(req, res, {
          login: { accountId: login, amr: ['pwd'] },
        }, { mergeWithLastSubmission: false });
        return send(res, 303, '', { location: to });
      }

      // GET /interaction/{uid}
      if (prompt.name === 'login') return send(res, 200, loginPage(uid, details, { title }));
      if (prompt.name === 'consent') {
        // Normally unreachable (loadExistingGrant grants everything); finish it anyway.
        const { Grant } = provider;
        const grant = details.grantId ? await Grant.find(details.grantId)
          : new Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
        const d = prompt.details || {};
        if (d.missingOIDCScope) grant.addOIDCScope(d.missingOIDCScope.join(' '));
        if (d.missingOIDCClaims) grant.addOIDCClaims(d.missingOIDCClaims);
        for (const [ind, sc] of Object.entries(d.missingResourceScopes || {})) grant.addResourceScope(ind, sc.join(' '));
        const grantId = await grant.save();
        const to = await provider.interactionResult(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
        return send(res, 303, '', { location: to });
      }
      return send(res, 400, page('Error', `<h1>Unsupported prompt ${esc(prompt.name)}</h1>`));
    } catch (err) {
      // SessionNotFound etc.: an expired or foreign interaction.
      const status = err.statusCode || err.status || 500;
      if (status >= 500) log('interaction error', err);
      if (!res.headersSent) send(res, status, page('Error', `<h1>Error</h1><p>${esc(err.error || err.name)}: ${esc(err.error_description || err.message)}</p>`));
    }
  };
}

// Listens on host:port (0: a free port), then builds the provider for the real issuer.
// -> { issuer, port, server, close() }: close() stops listening and ends every connection.
// opts: log and adapter, as buildProvider takes them (the presets take log alone).
export async function serveDevIdp(cfg = {}, { host = '127.0.0.1', port = 0, log = stderrLog, adapter } = {}) {
  let handler = (req, res) => send(res, 503, 'starting');
  const server = createServer((req, res) => handler(req, res));
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const bound = server.address().port;
  const issuer = `http://${host}:${bound}`;
  try {
    if (cfg.presets || cfg.preset) {
      // The preset modes (./presets.js): one provider per preset at /{mode}.
      const ph = buildPresetProvider(issuer, { ...cfg, users: cfg.users || DEFAULT_USERS }, { log });
      handler = async (req, res) => {
        let url;
        try { url = new URL(req.url, 'http://x'); } catch { return send(res, 400, page('Error', '<h1>Bad request</h1>')); }
        if (url.pathname === '/_devidp/health') return send(res, 200, 'ok', { 'content-type': 'text/plain' });
        if (await ph(req, res, url) === false) send(res, 404, page('Not found', '<h1>Not found</h1>'));
        return undefined;
      };
    } else {
      const { provider, users, title } = await buildProvider(issuer, cfg, { log, adapter });
      handler = makeHandler(provider, users, title, log);
    }
  } catch (err) {
    server.close();
    throw err;
  }
  return {
    issuer,
    port: bound,
    server,
    close() {
      return new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections?.();
      });
    },
  };
}

async function main() {
  const { values } = parseArgs({
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      config: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.error('usage: node tests/idp/devidp.js [--port P] [--host 127.0.0.1] [--config FILE.json]');
    process.exit(0);
  }
  const host = values.host || process.env.DEVIDP_HOST || '127.0.0.1';
  const port = Number(values.port ?? process.env.DEVIDP_PORT ?? 0);
  const configFile = values.config || process.env.DEVIDP_CONFIG;
  const cfg = configFile ? JSON.parse(readFileSync(configFile, 'utf8')) : {};
  const { issuer, server } = await serveDevIdp(cfg, { host, port });

  let stopping = false;
  const stop = (sig) => {
    if (stopping) return;
    stopping = true;
    stderrLog(`${sig}: shutting down`);
    server.close(() => process.exit(0));
    server.closeAllConnections?.();
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  process.stdout.write(`READY ${issuer}\n`);
}

const isMain = process.argv[1]
  && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href;
if (isMain) {
  main().catch((err) => {
    stderrLog('fatal', err);
    process.exit(1);
  });
}
