// The gateway's side of consentd, as a test client: token exchange, refresh,
// introspection, revocation, and offline verification of grants with jose
// (createRemoteJWKSet + jwtVerify, pinned to ES256, issuer, audience, typ).
//
//   const gw = gateway({ url, id = 'agent-gateway', secret = 'gateway-dev-secret' });
//   await gw.exchange({ subjectToken, audience, scope, agentId, reason, ...extra }) -> { status, body, headers }
//   await gw.refresh(refreshToken, extra) / gw.introspect(token) / gw.revoke(token)
//   await gw.verify(grant) -> { payload, protectedHeader }   (throws when invalid)
//
// With assertionKey (a jose private key) the gateway authenticates with private_key_jwt
// (RFC 7523) instead of Basic: each request carries a fresh client assertion, in the
// form body or, for /proxy and /metrics, in the Consentd-Client-Assertion header
// (gw.authHeaders()).  gw.assertion(claims, header) signs one by hand for attack tests.
import { randomUUID } from 'node:crypto';
import { createRemoteJWKSet, jwtVerify, SignJWT } from 'jose';
import { basicAuth } from './idplogin.js';

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const TT_ID_TOKEN = 'urn:ietf:params:oauth:token-type:id_token';
export const TT_JWT = 'urn:ietf:params:oauth:token-type:jwt';
export const TT_ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';

export const CLIENT_ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
const DEFAULT_AUTH = Symbol('default auth');

export function gateway({ url, id = 'agent-gateway', secret = 'gateway-dev-secret',
  assertionKey = null, assertionAlg = 'ES256', assertionKid } = {}) {
  const jwks = createRemoteJWKSet(new URL(`${url}/.well-known/jwks.json`));
  // A client assertion: iss = sub = the gateway, aud = consentd's issuer, 60 s, fresh jti.
  async function assertion(claims = {}, header = {}, key = assertionKey) {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ iss: id, sub: id, aud: url, iat: now, exp: now + 60, jti: randomUUID(), ...claims })
      .setProtectedHeader({ alg: assertionAlg, ...(assertionKid ? { kid: assertionKid } : {}), ...header })
      .sign(key);
  }
  async function authHeaders() {
    if (assertionKey) return { 'consentd-client-assertion': await assertion() };
    return { authorization: basicAuth(id, secret) };
  }
  async function post(path, params, auth = DEFAULT_AUTH, extraHeaders = {}) {
    const headers = { 'content-type': 'application/x-www-form-urlencoded', ...extraHeaders };
    if (auth === DEFAULT_AUTH && assertionKey) {
      params = { client_assertion_type: CLIENT_ASSERTION_TYPE, client_assertion: await assertion(), ...params };
      auth = null;
    } else if (auth === DEFAULT_AUTH) {
      auth = basicAuth(id, secret);
    }
    if (auth) headers.authorization = auth;
    const body = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null) body.append(k, v);
    const res = await fetch(`${url}${path}`, { method: 'POST', headers, body: body.toString() });
    const text = await res.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
    return { status: res.status, body: json, text, headers: res.headers };
  }
  return {
    post, assertion, authHeaders,
    exchange({ subjectToken, subjectTokenType = TT_ID_TOKEN, audience, resource, scope, agentId,
      reason, auth = DEFAULT_AUTH, ...extra }) {
      return post('/token', {
        grant_type: TOKEN_EXCHANGE, subject_token: subjectToken, subject_token_type: subjectTokenType,
        audience, resource, scope, agent_id: agentId, reason, ...extra,
      }, auth);
    },
    refresh(refreshToken, extra = {}) {
      return post('/token', { grant_type: 'refresh_token', refresh_token: refreshToken, ...extra });
    },
    introspect(token) { return post('/introspect', { token }); },
    revoke(token) { return post('/revoke', { token }); },
    verify(grant) {
      return jwtVerify(grant, jwks, {
        algorithms: ['ES256'], issuer: url, audience: id, typ: 'at+jwt',
      });
    },
  };
}

// Polls the exchange until it stops answering authorization_pending / slow_down.
export async function pollExchange(gw, args, { maxMs = 30000 } = {}) {
  const t0 = Date.now();
  let interval = 1;
  for (;;) {
    const r = await gw.exchange(args);
    const err = r.body?.error;
    if (err !== 'authorization_pending' && err !== 'slow_down') return r;
    if (err === 'slow_down' || r.body?.interval) interval = r.body.interval || interval + 5;
    if (Date.now() - t0 > maxMs) throw new Error('polling took too long');
    await new Promise((res) => { setTimeout(res, interval * 1000 + 100); });
  }
}
