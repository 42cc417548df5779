// A stolen grant is useless (issue #18), from the attacker's side, against the real binary,
// the real IdPs and a recording upstream: the gateway authenticates with private_key_jwt
// (RFC 7523) and binds its grants to a DPoP key (RFC 9449), as examples/gateway-dpop.mjs
// shows.  Every attack is refused with the RFC's error (invalid_client, invalid_dpop_proof,
// use_dpop_nonce), audited, and releases nothing: no grant, no provider token, no call
// upstream.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateKeyPair, exportJWK, SignJWT, createRemoteJWKSet } from 'jose';
import '../lib/webcrypto.js';   // first: Node 18 has no global crypto in a module
import * as oauth from 'oauth4webapi';
import { signedInJars } from '../lib/vaultstack.js';
import { startProxyStack } from '../lib/proxystack.js';
import { startConsentd } from '../lib/consentd.js';
import { TOKEN_EXCHANGE, TT_ACCESS_TOKEN, TT_ID_TOKEN } from '../lib/gateway.js';
import { example } from '../lib/example.js';

const { newDpopKey, dpopProof, clientAssertion, verifyBoundGrant, withDpop, CLIENT_ASSERTION_TYPE } = example;
const GW = 'agent-gateway';
const ALLOW = 'github:issues:read github:issues:write ghproxy:issues:read ghproxy:issues:write';

let stack;
let v;
let rec;
let keyDir;
let gwKey;          // the gateway's assertion key (its public half in jwks_file)
let gwEdKey;        // its Ed25519 assertion key (kid gw-ed)
let dpopKey;        // the gateway's DPoP key
let thiefKey;       // the attacker's own keys
let thiefAssertionKey;
before(async () => {
  keyDir = mkdtempSync(join(tmpdir(), 'consentd-dpop-'));
  const pair = await generateKeyPair('ES256', { extractable: true });
  gwKey = pair.privateKey;
  const jwksFile = join(keyDir, 'gateway-jwks.json');
  // gw-ed: an Ed25519 key the strict client library signs with under RFC 9864's "Ed25519".
  const ed = await crypto.subtle.generateKey({ name: 'Ed25519' }, true, ['sign', 'verify']);
  gwEdKey = ed.privateKey;
  writeFileSync(jwksFile, JSON.stringify({ keys: [
    { ...(await exportJWK(pair.publicKey)), kid: 'gw-1', alg: 'ES256', use: 'sig' },
    { ...(await crypto.subtle.exportKey('jwk', ed.publicKey)), kid: 'gw-ed', use: 'sig', key_ops: undefined, ext: undefined },
  ] }));
  thiefAssertionKey = (await generateKeyPair('ES256')).privateKey;
  dpopKey = await newDpopKey('ES256');
  thiefKey = await newDpopKey('EdDSA');
  stack = await startProxyStack({
    config: () => ({
      gateway: { token_endpoint_auth: 'private_key_jwt', jwks_file: jwksFile, client_secret: null },
      'agent.butler': { allow: ALLOW, offline: 'true' },
    }),
    gatewayOptions: { assertionKey: gwKey, assertionKid: 'gw-1' },
  });
  ({ v, rec } = stack);
});
after(async () => {
  try { await stack?.stop(); } finally { if (keyDir) rmSync(keyDir, { recursive: true, force: true }); }
});

const jarOf = signedInJars();
const audit = (action) => Number(v.sql(`SELECT count(*) FROM audit WHERE action = '${action}'`));
const lastDetail = (action) => v.sql(`SELECT detail FROM audit WHERE action = '${action}' ORDER BY seq DESC LIMIT 1`);
const assertion = (extra = {}) => clientAssertion({ key: gwKey, kid: 'gw-1', clientId: GW, audience: v.url, ...extra });

// POST /token with the gateway's assertion and, when given, a DPoP header.
async function token(params, { proof, auth } = {}) {
  const headers = { 'content-type': 'application/x-www-form-urlencoded' };
  if (proof) headers.dpop = proof;
  const a = auth ?? await assertion();
  const res = await fetch(`${v.url}/token`, {
    method: 'POST', headers,
    body: new URLSearchParams({ client_assertion_type: CLIENT_ASSERTION_TYPE, client_assertion: a, ...params }),
  });
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body, text, headers: res.headers };
}
const proofFor = (extra = {}) => dpopProof({ key: dpopKey, htm: 'POST', htu: `${v.url}/token`, ...extra });

// An offline consent of alice for butler on resource; then a DPoP-bound grant for it.
const held = {};
async function boundGrant(resource) {
  if (held[resource]) return held[resource];
  const jar = await jarOf(v.url, 'alice');
  const ask = {
    grant_type: TOKEN_EXCHANGE, subject_token: await v.idToken('alice'), subject_token_type: TT_ID_TOKEN,
    audience: resource, scope: 'issues:read issues:write', agent_id: 'butler',
  };
  const first = await token(ask, { proof: await proofFor() });
  assert.equal(first.body?.error, 'consent_required', first.text);
  const c = await v.connectHttp({ jar, consentUri: first.body.consent_uri, user: 'alice', offline: true });
  assert.equal(c.first?.status, 303, `connect: ${c.text?.slice(0, 300)}`);
  let g;
  for (let i = 0; i < 30; i++) {
    g = await token(ask, { proof: await proofFor() });
    if (g.body?.error !== 'authorization_pending' && g.body?.error !== 'slow_down') break;
    await new Promise((r) => { setTimeout(r, 1100); });
  }
  assert.equal(g.status, 200, g.text);
  held[resource] = { ask, grant: g.body.access_token, refresh: g.body.refresh_token, body: g.body };
  return held[resource];
}

// Flow D: the grant as subject token for the provider's token, with a proof (or none).
const release = async (grant, proof) => token({
  grant_type: TOKEN_EXCHANGE, subject_token: grant, subject_token_type: TT_ACCESS_TOKEN,
  requested_token_type: TT_ACCESS_TOKEN, action: 'list_issues',
}, { proof });
const releaseProof = (grant, key = dpopKey, extra = {}) => dpopProof({ key, htm: 'POST', htu: `${v.url}/token`, accessToken: grant, ...extra });

// Flow H: a proxied call with the gateway's assertion, the grant and a proof (or none).
const PROXY_PATH = '/proxy/ghproxy/repos/acme/widgets/issues';
async function proxy(grant, proof, { assertionHeader } = {}) {
  const headers = { 'consentd-grant': grant, 'consentd-client-assertion': assertionHeader ?? await assertion() };
  if (proof) headers.dpop = proof;
  const res = await fetch(`${v.url}${PROXY_PATH}?state=open`, { headers });
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body, text, headers: res.headers };
}
const proxyProof = (grant, key = dpopKey, extra = {}) => dpopProof({ key, htm: 'GET', htu: `${v.url}${PROXY_PATH}`, accessToken: grant, ...extra });

// --- private_key_jwt --------------------------------------------------------------------

test('private_key_jwt: a fresh assertion authenticates at /introspect, /revoke and /metrics', async () => {
  const r = await v.gw.introspect('not-a-token');
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.active, false);
  assert.equal((await v.gw.revoke('not-a-token')).status, 200);
  const m = await fetch(`${v.url}/metrics`, { headers: { 'consentd-client-assertion': await assertion() } });
  assert.equal(m.status, 200);
  // S1 (draft-ietf-oauth-rfc7523bis): the token endpoint's URL is accepted too, at any
  // endpoint (RFC 7523's "MAY"); another endpoint's URL is not, even the one called.
  const ep = await v.gw.post('/introspect', { token: 'x', client_assertion_type: CLIENT_ASSERTION_TYPE,
    client_assertion: await assertion({ audience: `${v.url}/token` }) }, null);
  assert.equal(ep.status, 200, ep.text);
  const own = await v.gw.post('/introspect', { token: 'x', client_assertion_type: CLIENT_ASSERTION_TYPE,
    client_assertion: await assertion({ audience: `${v.url}/introspect` }) }, null);
  assert.equal(own.status, 401, own.text);
  assert.match(own.body.error_description, /aud must be this server's issuer or token endpoint/);
  const both = await v.gw.post('/introspect', { token: 'x', client_assertion_type: CLIENT_ASSERTION_TYPE,
    client_assertion: await assertion({ audience: [v.url, 'https://other.example'] }) }, null);
  assert.equal(both.status, 401, `an audience with an extra value: ${both.text}`);
});

test('private_key_jwt: replayed, foreign, expired, other-audience, none and HS256 assertions are invalid_client, each saying why, and summarised in the audit', async () => {
  const before = audit('gateway.auth.refused');
  const now = Math.floor(Date.now() / 1000);
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const claims = { iss: GW, sub: GW, aud: v.url, iat: now, exp: now + 60 };
  const once = await assertion();
  const cases = [
    ['replayed', once, 'used before'],
    ['signed by a key outside the set', await clientAssertion({ key: thiefAssertionKey, kid: 'gw-1', clientId: GW, audience: v.url }), 'not signed'],
    ['expired', await clientAssertion({ key: gwKey, kid: 'gw-1', clientId: GW, audience: v.url, ttl: -120 }), 'expired'],
    ['for another audience', await assertion({ audience: 'https://other.example' }), 'aud'],
    ['valid for too long', await assertion({ ttl: 3600 }), '5 minutes'],
    ['for another client', await clientAssertion({ key: gwKey, kid: 'gw-1', clientId: 'someone-else', audience: v.url }), 'iss and sub'],
    ['alg none', `${b64({ alg: 'none' })}.${b64({ ...claims, jti: 'none-1' })}.`, 'three non-empty'],
    ['HS256', await new SignJWT({ ...claims, jti: 'hs-1' }).setProtectedHeader({ alg: 'HS256', kid: 'gw-1' })
      .sign(new TextEncoder().encode('x'.repeat(32))), 'algorithm'],
  ];
  const first = await v.gw.post('/introspect', { token: 'x', client_assertion_type: CLIENT_ASSERTION_TYPE, client_assertion: once }, null);
  assert.equal(first.status, 200, `the first use works: ${first.text}`);
  for (const [what, a, why] of cases) {
    for (const path of ['/introspect', '/token']) {
      const r = await v.gw.post(path, { token: 'x', grant_type: 'refresh_token', refresh_token: 'x',
        client_assertion_type: CLIENT_ASSERTION_TYPE, client_assertion: a }, null);
      assert.equal(r.status, 401, `${what} at ${path}: ${r.text}`);
      assert.equal(r.body?.error, 'invalid_client', `${what} at ${path}`);
      assert.match(r.body.error_description, new RegExp(why), `${what} at ${path}`);
    }
    // In the header, at /metrics and /proxy, the same.
    const m = await fetch(`${v.url}/metrics`, { headers: { 'consentd-client-assertion': a } });
    assert.equal(m.status, 401, `${what} at /metrics`);
  }
  // Issue 28: one entry summarises an address's refusals for an interval, not one each
  // (this file's earlier refusals from 127.0.0.1 may have written it already).
  const entries = audit('gateway.auth.refused') - before;
  assert.ok(entries <= (v.c.nodes?.length ?? 1), `${entries} entries for ${cases.length * 3} refusals from one address`);
  assert.match(lastDetail('gateway.auth.refused'), /^private_key_jwt refused from 127\.0\.0\.1: /);
  // Basic is off in this configuration.
  const basic = await v.gw.post('/introspect', { token: 'x' }, `Basic ${Buffer.from(`${GW}:gateway-dev-secret`).toString('base64')}`);
  assert.equal(basic.status, 401);
  assert.equal(basic.body?.error, 'invalid_client');
});

// --- DPoP at the exchange ---------------------------------------------------------------

test('DPoP: a proof at the exchange gives a grant bound to the key (cnf.jkt, token_type DPoP); introspection shows cnf', async () => {
  const { grant, refresh, body } = await boundGrant('github');
  assert.equal(body.token_type, 'DPoP');
  assert.ok(refresh, 'an offline consent gives a refresh token');
  const { payload } = await v.gw.verify(grant);
  assert.deepEqual(payload.cnf, { jkt: dpopKey.jkt });
  const i = await v.gw.introspect(grant);
  assert.equal(i.body.active, true);
  assert.deepEqual(i.body.cnf, { jkt: dpopKey.jkt });
  assert.equal(i.body.token_type, 'DPoP');
  const ir = await v.gw.introspect(refresh);
  assert.deepEqual(ir.body.cnf, { jkt: dpopKey.jkt }, 'the refresh family is bound too');
  // Verified offline the way examples/gateway-dpop.mjs shows: with a proof by the key.
  const jwks = createRemoteJWKSet(new URL(`${v.url}/.well-known/jwks.json`));
  const htu = 'https://api.example/thing';
  const proof = await dpopProof({ key: dpopKey, htm: 'GET', htu, accessToken: grant });
  const claims = await verifyBoundGrant({ grant, proof, jwks, issuer: v.url, audience: GW, htm: 'GET', htu });
  assert.equal(claims.cnf.jkt, dpopKey.jkt);
  // A thief's proof, a proof for another grant, or none: the offline check fails too.
  const thief = await dpopProof({ key: thiefKey, htm: 'GET', htu, accessToken: grant });
  await assert.rejects(verifyBoundGrant({ grant, proof: thief, jwks, issuer: v.url, audience: GW, htm: 'GET', htu }), /another key/);
  await assert.rejects(verifyBoundGrant({ grant, proof: undefined, jwks, issuer: v.url, audience: GW, htm: 'GET', htu }), /needs a DPoP proof/);
  const other = await dpopProof({ key: dpopKey, htm: 'GET', htu, accessToken: 'another-grant' });
  await assert.rejects(verifyBoundGrant({ grant, proof: other, jwks, issuer: v.url, audience: GW, htm: 'GET', htu }), /another grant/);
});

test('DPoP: bad proofs at the exchange are invalid_dpop_proof, audited, and give no grant', async () => {
  const { ask } = await boundGrant('github');
  const before = audit('dpop.refused');
  const replayed = await proofFor();
  const ok = await token(ask, { proof: replayed });
  assert.equal(ok.status, 200, `the first use works: ${ok.text}`);
  const now = Math.floor(Date.now() / 1000);
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const hs = await new SignJWT({ htm: 'POST', htu: `${v.url}/token`, iat: now, jti: 'hs-proof' })
    .setProtectedHeader({ typ: 'dpop+jwt', alg: 'HS256', jwk: dpopKey.publicJwk }).sign(new TextEncoder().encode('x'.repeat(32)));
  const priv = await generateKeyPair('ES256', { extractable: true });
  const privJwk = await exportJWK(priv.privateKey);
  const withPrivate = await new SignJWT({ htm: 'POST', htu: `${v.url}/token`, iat: now, jti: 'priv-proof' })
    .setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk: privJwk }).sign(priv.privateKey);
  const typJwt = await new SignJWT({ htm: 'POST', htu: `${v.url}/token`, iat: now, jti: 'typ-proof' })
    .setProtectedHeader({ typ: 'JWT', alg: 'ES256', jwk: dpopKey.publicJwk }).sign(dpopKey.privateKey);
  const cases = [
    ['replayed', replayed, 'used before'],
    ['for another method', await proofFor({ htm: 'GET' }), 'htm'],
    ['for another URL', await dpopProof({ key: dpopKey, htm: 'POST', htu: `${v.url}/introspect` }), 'htu'],
    ['from long ago', await proofFor({ iat: now - 600 }), 'iat'],
    ['from the future', await proofFor({ iat: now + 600 }), 'iat'],
    ['signed HS256', hs, 'algorithm'],
    ['alg none', `${b64({ typ: 'dpop+jwt', alg: 'none', jwk: dpopKey.publicJwk })}.${b64({ htm: 'POST', htu: `${v.url}/token`, iat: now, jti: 'none-proof' })}.`, 'three non-empty'],
    ['whose jwk carries a private key', withPrivate, 'private'],
    ['typ JWT', typJwt, 'typ'],
  ];
  for (const [what, proof, why] of cases) {
    const r = await token(ask, { proof });
    assert.equal(r.status, 400, `${what}: ${r.text}`);
    assert.equal(r.body?.error, 'invalid_dpop_proof', what);
    assert.equal(r.body?.access_token, undefined, `${what}: no grant`);
    assert.match(lastDetail('dpop.refused'), new RegExp(why), what);
  }
  assert.equal(audit('dpop.refused'), before + cases.length, 'each refusal audited once');
});

test('DPoP: the refresh token is bound to the key: no proof or the thief\'s key is refused and uses nothing up', async () => {
  const h = await boundGrant('github');
  const params = { grant_type: 'refresh_token', refresh_token: h.refresh };
  const none = await token(params);
  assert.equal(none.status, 400, none.text);
  assert.equal(none.body?.error, 'invalid_dpop_proof');
  const thief = await token(params, { proof: await dpopProof({ key: thiefKey, htm: 'POST', htu: `${v.url}/token` }) });
  assert.equal(thief.status, 400, thief.text);
  assert.equal(thief.body?.error, 'invalid_dpop_proof');
  assert.match(lastDetail('dpop.refused'), /another key/);
  // The holder of the key still refreshes with the same token: the attempts used nothing up.
  const ok = await token(params, { proof: await proofFor() });
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.body.token_type, 'DPoP');
  assert.deepEqual((await v.gw.verify(ok.body.access_token)).payload.cnf, { jkt: dpopKey.jkt });
  h.refresh = ok.body.refresh_token;
  h.grant = ok.body.access_token;
});

// --- DPoP on every use ------------------------------------------------------------------

test('DPoP: a bound grant releases a provider token only with a proof by its key for that request and grant', async () => {
  const { grant } = await boundGrant('github');
  const released = () => audit('vault.released');
  const n = released();
  const cases = [
    ['as a bearer token (no proof)', undefined, 'DPoP proof is required'],
    ['with the thief\'s key', await releaseProof(grant, thiefKey), 'another key'],
    ['without ath', await dpopProof({ key: dpopKey, htm: 'POST', htu: `${v.url}/token` }), 'ath'],
    ['with ath of another token', await releaseProof(grant, dpopKey, { accessToken: 'another' }), 'ath'],
  ];
  for (const [what, proof, why] of cases) {
    const r = await release(grant, proof);
    assert.equal(r.status, 400, `${what}: ${r.text}`);
    assert.equal(r.body?.error, 'invalid_dpop_proof', what);
    assert.equal(r.body?.access_token, undefined, `${what}: nothing released`);
    assert.match(lastDetail('dpop.refused'), new RegExp(why), what);
  }
  assert.equal(released(), n, 'nothing was released');
  const ok = await release(grant, await releaseProof(grant));
  assert.equal(ok.status, 200, ok.text);
  assert.ok(ok.body.access_token);
  assert.equal(released(), n + 1);
});

test('DPoP: at /proxy a stolen bound grant opens nothing; the holder with its key gets through', async () => {
  const { grant } = await boundGrant('ghproxy');
  const n = rec.seen.length;
  const replayed = await proxyProof(grant);
  const cases = [
    ['as a bearer token (no proof)', undefined, 'DPoP proof is required'],
    ['with the thief\'s key', await proxyProof(grant, thiefKey), 'another key'],
    ['for another method', await dpopProof({ key: dpopKey, htm: 'POST', htu: `${v.url}${PROXY_PATH}`, accessToken: grant }), 'htm'],
    ['for another URL', await dpopProof({ key: dpopKey, htm: 'GET', htu: `${v.url}/proxy/ghproxy/repos/acme/other/issues`, accessToken: grant }), 'htu'],
    ['without ath', await dpopProof({ key: dpopKey, htm: 'GET', htu: `${v.url}${PROXY_PATH}` }), 'ath'],
  ];
  for (const [what, proof, why] of cases) {
    const r = await proxy(grant, proof);
    assert.equal(r.status, 401, `${what}: ${r.text}`);
    assert.equal(r.body?.error, 'invalid_dpop_proof', what);
    assert.match(r.headers.get('www-authenticate') || '', /^DPoP error="invalid_dpop_proof"/, what);
    assert.match(lastDetail('dpop.refused'), new RegExp(why), what);
  }
  assert.equal(rec.seen.length, n, 'nothing reached the upstream');
  // The query is not part of htu: the proof for the path works with ?state=open.
  const ok = await proxy(grant, replayed);
  assert.equal(ok.status, 200, ok.text);
  assert.equal(rec.seen.length, n + 1);
  // Neither the proof nor the client assertion nor the grant goes upstream.
  const up = rec.seen[rec.seen.length - 1].headers;
  for (const h of ['dpop', 'consentd-client-assertion', 'consentd-grant']) assert.equal(up[h], undefined, h);
  assert.match(up.authorization || '', /^Bearer /, 'the provider token instead');
  const again = await proxy(grant, replayed);
  assert.equal(again.status, 401, `a replayed proof: ${again.text}`);
  assert.equal(again.body?.error, 'invalid_dpop_proof');
  assert.match(lastDetail('dpop.refused'), /used before/);
  assert.equal(rec.seen.length, n + 1, 'the replay reached nothing');
});

// --- the grant in Authorization (RFC 9449 §7.1, RFC 6750 §2.1; issue 28 item 5) -------

// panva's oauth4webapi 3.x, a strict client library, as the gateway: private_key_jwt at
// /token, a DPoP-bound grant by token exchange, then protectedResourceRequest, which puts
// the grant in `Authorization: DPoP <grant>` with a proof whose ath is the grant's hash.
// The gateway's own credentials go in Consentd-Client-Assertion, so Authorization is free.
test('oauth4webapi 3.x as the gateway: a DPoP-bound grant, then protectedResourceRequest at /proxy with Authorization: DPoP', async () => {
  await boundGrant('ghproxy');                 // alice's standing consent for butler on ghproxy
  const opts = { [oauth.allowInsecureRequests]: true };
  const issuer = new URL(v.url);
  const as = await oauth.processDiscoveryResponse(issuer,
    await oauth.discoveryRequest(issuer, { ...opts, algorithm: 'oauth2' }));
  const client = { client_id: GW };
  // The library signs with a WebCrypto key: the gateway's assertion key, imported as one.
  const gwCryptoKey = await crypto.subtle.importKey('jwk', await exportJWK(gwKey),
    { name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign']);
  const clientAuth = oauth.PrivateKeyJwt({ key: gwCryptoKey, kid: 'gw-1' });
  const dpop = oauth.DPoP(client, await oauth.generateKeyPair('ES256'));
  // A use_dpop_nonce answer is retried once with the nonce, as the library's docs say.
  const retryNonce = async (fn) => {
    try { return await fn(); } catch (err) { if (oauth.isDPoPNonceError(err)) return fn(); throw err; }
  };
  const { grant_type: grantType, ...params } = held.ghproxy.ask;
  const tok = await retryNonce(async () => oauth.processGenericTokenEndpointResponse(as, client,
    await oauth.genericTokenEndpointRequest(as, client, clientAuth, grantType, params, { ...opts, DPoP: dpop })));
  assert.equal(tok.token_type, 'dpop');
  const n = rec.seen.length;
  const res = await retryNonce(async () => oauth.protectedResourceRequest(tok.access_token, 'GET',
    new URL(`${v.url}${PROXY_PATH}?state=open`), new Headers({ 'consentd-client-assertion': await assertion() }),
    null, { ...opts, DPoP: dpop }));
  const text = await res.text();
  assert.equal(res.status, 200, text);
  assert.equal(JSON.parse(text).path, '/repos/acme/widgets/issues');
  assert.equal(rec.seen.length, n + 1, 'one call upstream');
  const up = rec.seen[rec.seen.length - 1];
  for (const h of ['dpop', 'consentd-client-assertion', 'consentd-grant']) assert.equal(up.headers[h], undefined, h);
  assert.match(up.headers.authorization || '', /^Bearer /, 'the provider token upstream');
  assert.ok(!up.rawHeaders.join('\n').includes(tok.access_token), 'the grant never goes upstream');
});

// Issue 28 item 6: oauth4webapi 3.x signs with an Ed25519 key as RFC 9864's fully specified
// "Ed25519" -- the client assertion (private_key_jwt) and the DPoP proofs alike.
test('oauth4webapi 3.x with Ed25519 keys: its "Ed25519" client assertion and DPoP proofs are accepted at /token and /proxy', async () => {
  await boundGrant('ghproxy');
  const opts = { [oauth.allowInsecureRequests]: true };
  const issuer = new URL(v.url);
  const as = await oauth.processDiscoveryResponse(issuer,
    await oauth.discoveryRequest(issuer, { ...opts, algorithm: 'oauth2' }));
  assert.ok(as.token_endpoint_auth_signing_alg_values_supported.includes('Ed25519'), 'advertised for assertions');
  assert.ok(as.dpop_signing_alg_values_supported.includes('Ed25519'), 'advertised for DPoP');
  const client = { client_id: GW };
  const seen = [];
  const peek = async (url, init) => {
    for (const [k, val] of new Headers(init?.headers)) if (k === 'dpop') seen.push(val);
    if (init?.body instanceof URLSearchParams && init.body.get('client_assertion')) seen.push(init.body.get('client_assertion'));
    return fetch(url, init);
  };
  const clientAuth = oauth.PrivateKeyJwt({ key: gwEdKey, kid: 'gw-ed' });
  const dpop = oauth.DPoP(client, await oauth.generateKeyPair('Ed25519'));
  const retryNonce = async (fn) => {
    try { return await fn(); } catch (err) { if (oauth.isDPoPNonceError(err)) return fn(); throw err; }
  };
  const { grant_type: grantType, ...params } = held.ghproxy.ask;
  const tok = await retryNonce(async () => oauth.processGenericTokenEndpointResponse(as, client,
    await oauth.genericTokenEndpointRequest(as, client, clientAuth, grantType, params,
      { ...opts, DPoP: dpop, [oauth.customFetch]: peek })));
  assert.equal(tok.token_type, 'dpop');
  const n = rec.seen.length;
  const res = await retryNonce(async () => oauth.protectedResourceRequest(tok.access_token, 'GET',
    new URL(`${v.url}${PROXY_PATH}?state=open`), new Headers({ 'consentd-client-assertion': await assertion() }),
    null, { ...opts, DPoP: dpop, [oauth.customFetch]: peek }));
  assert.equal(res.status, 200, await res.text());
  assert.equal(rec.seen.length, n + 1, 'one call upstream');
  // What the library sent really was "Ed25519", for the assertion and for every proof.
  const algs = seen.map((jwt) => JSON.parse(Buffer.from(jwt.split('.')[0], 'base64url')).alg);
  assert.ok(algs.length >= 3, `assertion and proofs seen: ${algs}`);
  assert.deepEqual([...new Set(algs)], ['Ed25519']);
});

// The same by hand, and every way of getting it wrong: each refused with what to do instead.
async function proxyWith(headers) {
  const res = await fetch(`${v.url}${PROXY_PATH}?state=open`, {
    headers: { 'consentd-client-assertion': await assertion(), ...headers },
  });
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body, text, headers: res.headers };
}

test('Authorization at /proxy: DPoP <bound grant> with its proof passes, Bearer <unbound grant> passes; both places, the wrong scheme, no proof, no grant are refused and said so', async () => {
  const { grant } = await boundGrant('ghproxy');
  const plainRes = await token({ ...held.ghproxy.ask });       // no proof: a grant not bound to a key
  assert.equal(plainRes.status, 200, plainRes.text);
  assert.equal(plainRes.body.token_type, 'Bearer');
  const plain = plainRes.body.access_token;
  const n = rec.seen.length;
  const refusals = [
    ['the grant in both places', { authorization: `DPoP ${grant}`, 'consentd-grant': grant, dpop: await proxyProof(grant) },
      400, 'invalid_request', /given twice/, null],
    ['a bound grant as Bearer', { authorization: `Bearer ${grant}`, dpop: await proxyProof(grant) },
      401, 'invalid_token', /DPoP-bound: present it as Authorization: DPoP/, /^DPoP error="invalid_token", algs="[A-Za-z0-9 ]+"$/],
    ['DPoP without a proof', { authorization: `DPoP ${grant}` },
      401, 'invalid_dpop_proof', /DPoP proof is required/, /^DPoP error="invalid_dpop_proof", algs=/],
    ['DPoP with the thief\'s proof', { authorization: `DPoP ${grant}`, dpop: await proxyProof(grant, thiefKey) },
      401, 'invalid_dpop_proof', /another key/, /^DPoP error="invalid_dpop_proof"/],
    ['an unbound grant as DPoP', { authorization: `DPoP ${plain}`, dpop: await proxyProof(plain) },
      401, 'invalid_token', /not bound to a DPoP key: present it as Authorization: Bearer/, /^Bearer error="invalid_token"$/],
    ['DPoP with two credentials', { authorization: `DPoP ${grant} ${grant}`, dpop: await proxyProof(grant) },
      400, 'invalid_request', /not DPoP <grant>/, null],
    ['no grant at all', {},
      401, 'invalid_token', /Authorization: DPoP <grant>.*Consentd-Grant/, /^Bearer error="invalid_token", DPoP error="invalid_token", algs=/],
  ];
  for (const [what, headers, status, error, why, challenge] of refusals) {
    const r = await proxyWith(headers);
    assert.equal(r.status, status, `${what}: ${r.text}`);
    assert.equal(r.body?.error, error, `${what}: ${r.text}`);
    assert.match(r.body.error_description, why, what);
    if (challenge) assert.match(r.headers.get('www-authenticate') || '', challenge, what);
  }
  assert.equal(rec.seen.length, n, 'nothing reached the upstream');
  // RFC 6750 §2.1: an unbound grant as a Bearer token, beside the client assertion.
  const ok = await proxyWith({ authorization: `Bearer ${plain}` });
  assert.equal(ok.status, 200, ok.text);
  // RFC 9449 §7.1 by hand: the scheme in any case, the proof's ath over the grant.
  const okDpop = await proxyWith({ authorization: `dpop ${grant}`, dpop: await proxyProof(grant) });
  assert.equal(okDpop.status, 200, okDpop.text);
  assert.equal(rec.seen.length, n + 2);
});

test('metadata: DPoP algorithms and private_key_jwt as configured', async () => {
  const m = await (await fetch(`${v.url}/.well-known/oauth-authorization-server`)).json();
  assert.deepEqual(m.dpop_signing_alg_values_supported, ['ES256', 'PS256', 'EdDSA', 'Ed25519']);
  // The gateway authenticates with private_key_jwt alone here; none is an MCP client's
  // (a public client redeems its code with its client_id and PKCE, docs/mcp.md).
  assert.deepEqual(m.token_endpoint_auth_methods_supported, ['none', 'private_key_jwt']);
});

// --- require_dpop and server nonces ------------------------------------------------------

test('require_dpop refuses bearer exchanges; dpop_nonce asks for a nonce (use_dpop_nonce) and takes it', async () => {
  const c = await startConsentd({ config: { gateway: { require_dpop: 'true', dpop_nonce: 'true' } } });
  try {
    const url = c.url;
    const basic = `Basic ${Buffer.from(`${GW}:gateway-dev-secret`).toString('base64')}`;
    const params = { grant_type: TOKEN_EXCHANGE, subject_token: 'not-a-token', subject_token_type: TT_ID_TOKEN,
      audience: 'notes', scope: 'notes:read', agent_id: 'coder' };
    const post = (headers) => fetch(`${url}/token`, {
      method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic, ...headers },
      body: new URLSearchParams(params),
    });
    const bearer = await post({});
    assert.equal(bearer.status, 400);
    assert.equal((await bearer.json()).error, 'invalid_dpop_proof', 'a bearer exchange is refused');
    const key = await newDpopKey('PS256');
    const noNonce = await post({ dpop: await dpopProof({ key, htm: 'POST', htu: `${url}/token` }) });
    assert.equal(noNonce.status, 400);
    assert.equal((await noNonce.json()).error, 'use_dpop_nonce');
    const nonce = noNonce.headers.get('dpop-nonce');
    assert.match(nonce || '', /^[A-Za-z0-9_-]{54}$/);
    const forged = await post({ dpop: await dpopProof({ key, htm: 'POST', htu: `${url}/token`, nonce: `${nonce.slice(0, -2)}AA` }) });
    assert.equal((await forged.json()).error, 'use_dpop_nonce', 'a nonce consentd did not make');
    // The example's withDpop retries once with the nonce; the proof then passes and the
    // exchange goes on to the subject token's check -- which needs the IdP, never reached
    // here (issuer 127.0.0.1:9): 503 temporarily_unavailable, not a refusal of the token.
    const r = await withDpop({ key, htm: 'POST', htu: `${url}/token` }, (proof) => [`${url}/token`, {
      method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic, dpop: proof },
      body: new URLSearchParams(params),
    }]);
    const b = await r.json();
    assert.equal(r.status, 503, JSON.stringify(b));
    assert.equal(b.error, 'temporarily_unavailable', JSON.stringify(b));
    assert.match(b.error_description, /has not reached its IdP yet, so it cannot check the subject token/);
  } finally {
    await c.stop();
  }
});

// --- jwks_uri ---------------------------------------------------------------------------

test('jwks_uri: the gateway\'s keys fetched on first use, again for an unknown kid, at most once a minute', { timeout: 120000 }, async () => {
  const { createServer } = await import('node:http');
  const a = await generateKeyPair('EdDSA', { extractable: true });
  const b = await generateKeyPair('PS256', { extractable: true });
  const jwkA = { ...(await exportJWK(a.publicKey)), kid: 'a', alg: 'EdDSA' };
  const jwkB = { ...(await exportJWK(b.publicKey)), kid: 'b', alg: 'PS256' };
  let keys = [jwkA];
  let fetches = 0;
  const srv = createServer((req, res) => {
    fetches += 1;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ keys }));
  });
  await new Promise((r) => { srv.listen(0, '127.0.0.1', r); });
  const jwksUri = `http://127.0.0.1:${srv.address().port}/jwks`;
  // One process: the key set is cached per process (every node fetches its own), and
  // this counts one cache's fetches, whichever backend the test runs on.
  const c = await startConsentd({ nodes: 1, config: { gateway: { token_endpoint_auth: 'private_key_jwt', jwks_uri: jwksUri, client_secret: null } } });
  try {
    const intro = async (key, alg, kid) => {
      const r = await fetch(`${c.url}/introspect`, {
        method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: 'x', client_assertion_type: CLIENT_ASSERTION_TYPE,
          client_assertion: await clientAssertion({ key, alg, kid, clientId: GW, audience: c.url }) }),
      });
      return r.status;
    };
    assert.equal(fetches, 0, 'nothing fetched before the first use');
    assert.equal(await intro(a.privateKey, 'EdDSA', 'a'), 200);
    assert.equal(fetches, 1);
    assert.equal(await intro(a.privateKey, 'EdDSA', 'a'), 200);
    assert.equal(fetches, 1, 'a known kid uses the cached set');
    // The gateway adds key b: within the minute an unknown kid does not fetch again,
    // however often it is named.
    keys = [jwkA, jwkB];
    for (let i = 0; i < 5; i++) assert.equal(await intro(b.privateKey, 'PS256', i ? 'b' : 'nope'), 401);
    assert.equal(fetches, 1, 'at most one fetch a minute');
    await new Promise((r) => { setTimeout(r, 61000); });
    assert.equal(await intro(b.privateKey, 'PS256', 'b'), 200, 'after a minute the unknown kid is fetched');
    assert.equal(fetches, 2);
    assert.equal(await intro(a.privateKey, 'EdDSA', 'a'), 200);
    assert.equal(fetches, 2);
  } finally {
    await c.stop();
    srv.close();
  }
});
